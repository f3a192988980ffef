/*
 * kernelcost.c: what a kernel op costs where it runs: its flops and the
 * busiest rank's seconds (cost_join, cost_conv, cost_agg, cost_map).
 *
 * A contraction is BLIS's calls (ir/gemm.c plans them), each at the
 * machine's gemm rate for a cube of its volume, plus what a thin call
 * packs or streams; anything else is the generated loop at the loop rate,
 * an op's weight in ir.h's KOPS; a row-strided or to-one-scalar reduction
 * at row_reduce; a convolution at the conv rate where its register tiles
 * run; a kernel over sparse inputs at least its stored elements' visits
 * and the dense rows it gathers.  The share of the work is cost.c's
 * (cost_share); what moves between ranks is cost.c's too.
 */
#include <math.h>

#include "optimizer/opt.h"


/* The elements a kernel computes over a relation's key space `sp`: its
 * labels' space; key dims no chunk spans multiply by their frontier (one
 * kernel call each). */
static double kernel_elems(const Kernel *k, int nin, const RelType *const *in, const RelType *sp,
                           const int inmap[2][MAXDIM])
{
	bool covered[MAXDIM] = {0};
	for (int i = 0; i < nin; i++)
		for (int ch = 0; ch < in[i]->nchunk; ch++)
			covered[inmap[i][in[i]->chunkdim[ch]]] = true;
	double n = 1;
	for (int d = 0; d < sp->nkey; d++)
		n *= covered[d] ? (double)sp->extent[d] : (double)rel_frontier(sp, d);
	/* a kernel zero wherever a sparse input is runs over its elements only */
	for (int i = 0; i < nin; i++)
		if (in[i]->sparse && kx_zero_with(k->expr, i))
			n *= in[i]->density;
	return n;
}

/* Per element: the expression's ops and one for a reduction, at least
 * one: its flops. */
static double kernel_per(const Kernel *k)
{
	int per = kx_nops(k->expr) + (k->reduces ? 1 : 0);
	return per > 0 ? per : 1;
}

/* Seconds per element of a kernel at `rate`: its flops, and in a loop
 * what its ops cost beyond an add each (ir.h's KOPS weights: an exp
 * several adds, a stop_gradient none), in flops of the loop rate the
 * weights were measured at (KOP_WEIGHT_RATE): the time of SLEEF's exp on
 * this machine, not a multiple of another machine's loop rate.  A
 * product summed (a contraction, at BLIS's rate) weighs its flops. */
static double kernel_secs(const Kernel *k, double rate)
{
	double s = kernel_per(k) / rate + (kx_weight(k->expr) - kx_nops(k->expr)) / KOP_WEIGHT_RATE;
	return s > 0 ? s : 1 / rate;
}

/*
 * The stored elements of a kernel's sparse inputs the busiest rank visits:
 * the mask's when it is sampled, else the most of any sparse input it is
 * zero without (it runs over that input's elements alone), each at its
 * share.  A kernel placed by that input's own dims splits its elements; one
 * placed by the other input's dims alone visits all it holds on every rank:
 * an SpMM split by the dense operand's columns, the sparse one broadcast
 * (gcn_sparse's A H1 W2 split by its 40 columns took 27 ns an element on
 * each rank, split by A's rows 32 ns on half of them).  Each chunk's
 * elements are visited once for each chunk of the other input it meets:
 * the arxiv-size GCN's A H1 W2 with its 40 columns in blocks of 10 took
 * 7.1 ns an element a block, 28 in all, against 11.3 in one block of 40.
 * 0: a dense kernel.
 * A sampled join visits the mask's elements once for each chunk of the
 * dims it sums (out's keys beyond the mask's): mf_sparse's U V^T at the
 * ratings with K = 16 in two chunks of 8 took 1.07 s against 0.69 in one.
 * inmap[i] maps input i's dims to out's, the type p places.
 */
static double sparse_visits(const CostCtx *c, const Kernel *k, int nin, const RelType *const *in,
                            int inmap[][MAXDIM], const RelType *out, const Place *p, const RelType *mask)
{
	if (mask)
		return rel_stored(mask) * cost_share(c, out, p) * ((double)rel_ntuples(out) / (double)rel_ntuples(mask));
	double v = 0;
	for (int i = 0; i < nin; i++) {
		if (!in[i]->sparse || !kx_zero_with(k->expr, i))
			continue;
		/* once for each chunk of the other input it meets (H's column
		 * blocks in A H), on the ranks those chunks are split over */
		double share = 1, passes = fmax(1, (double)rel_ntuples(out) / (double)rel_ntuples(in[i]));
		if (p->kind != PL_PART) {
			share = cost_share(c, out, p);
		} else {
			int dims[MAXDIM], n = 0, nrest = 0;
			for (int x = 0; x < p->ndims; x++) {
				bool own = false;
				for (int d = 0; d < in[i]->nkey; d++)
					if (inmap[i][d] == p->dims[x] && n < MAXDIM) {
						dims[n++] = d;
						own = true;
					}
				nrest += !own;
			}
			if (nrest == 0) {       /* its own dims: a rank's elements, every pass */
				Place own = place_part(n, dims);
				share = cost_share(c, in[i], &own);
			} else {                /* others too: the rank's share of the passes */
				passes *= cost_share(c, out, p);
			}
		}
		v = fmax(v, rel_stored(in[i]) * share * passes);
	}
	return v;
}

/* The first input (*i) whose chunks bear kernel label x, and the key dim
 * they bear it along; -1 when none does. */
static int label_dim(const Kernel *k, int nin, const RelType *const *in, int x, int *i)
{
	for (*i = 0; *i < nin; (*i)++)
		for (int ch = 0; ch < k->nindim[*i]; ch++)
			if (k->inlab[*i][ch] == x)
				return in[*i]->chunkdim[ch];
	return -1;
}

/* The chunk extent of kernel label x; 1 when no input bears it. */
static double label_extent(const Kernel *k, int nin, const RelType *const *in, int x)
{
	int i, d = label_dim(k, nin, in, x, &i);
	return d < 0 ? 1 : (double)rel_block_len(in[i], d);
}

/* The chunks of the inputs along kernel label x; 1 when none bears it. */
static double label_frontier(const Kernel *k, int nin, const RelType *const *in, int x)
{
	int i, d = label_dim(k, nin, in, x, &i);
	return d < 0 ? 1 : (double)rel_frontier(in[i], d);
}

/* Whether label x is among the n labels lab. */
static bool has_label(const int *lab, int n, int x)
{
	for (int i = 0; i < n; i++)
		if (lab[i] == x)
			return true;
	return false;
}

/* The bytes, in whole cache lines, of the dense rows a kernel gathers
 * or adds into at each stored element of sparse input s (sparse_work):
 * each dense input, and the output, whose labels hold s's column label
 * and not its row label, its labels beyond s's, when its chunk is more
 * than half the L1; 0 without an L1 (the reference model's) or for a
 * sparse input of one dim. */
static double gathered_bytes(const CostCtx *c, const Kernel *k, int nin, const RelType *const *in,
                             const RelType *out, int s)
{
	if (c->m->cache_l1 <= 0 || k->nindim[s] < 2)
		return 0;
	int row = k->inlab[s][0], col = k->inlab[s][k->nindim[s] - 1];
	double bytes = 0;
	for (int o = 0; o <= nin; o++) {        /* the other inputs, then the output (o == nin) */
		if (o == s || (o < nin && in[o]->sparse))
			continue;
		const int *lab = o < nin ? k->inlab[o] : k->outlab;
		int nlab = o < nin ? k->nindim[o] : k->noutdim;
		if (!has_label(lab, nlab, col) || has_label(lab, nlab, row))
			continue;
		double elems = 1, chunk = 1;
		for (int ch = 0; ch < nlab; ch++) {
			double e = label_extent(k, nin, in, lab[ch]);
			chunk *= e;
			elems *= has_label(k->inlab[s], k->nindim[s], lab[ch]) ? 1 : e;
		}
		double size = dtype_size(o < nin ? in[o]->dtype : out->dtype);
		if (chunk * size > c->m->cache_l1 / 2)
			bytes += ceil(elems * size / 64) * 64;
	}
	return bytes;
}

/*
 * The seconds of a kernel over sparse inputs beyond its flops: each stored
 * element visited (sparse_visits) chases the compressed rows (a row's
 * offset, an element's column, its value) and runs the loop over the
 * dense rows at sparse_elem seconds (host.c's SPARSE_ELEM_S); a dense
 * operand indexed by the sparse input's columns without its rows has a row
 * gathered at the element's column (an input: H of A H) or added into
 * there (the output: dW of A^T G), its whole cache lines at
 * sparse_gather_bw (the quick calibration's) when its chunk is more than
 * half a core's L1 (which the sparse chunk's elements stream through, and
 * the output's rows).  On the 2.6 GHz Zen 4 (a 32 KiB L1), 2 ranks, the
 * count of elements given: mf_sparse's products with V (16 floats a row,
 * V's chunk 16 KB) 1.7 ns an element; gcn_sparse's with H1 W2 at V = 8000
 * (4 and 7 floats, chunks of 16 and 28 KB) 4.3-5.1; the arxiv-size GCN's
 * (bench/gcn_sparse.py) 8.6-11.3 with 20 floats (two lines, 1.7 MB) and
 * 13-19 with 40 (three), where 2.5 ns and the quick calibration's 16-29
 * GB/s a line put 10.3 and 14.2.  Its A^T G took 12.8-14.8 ns with 20
 * floats added and with 40, so a row added is counted once, as one
 * gathered.  A sampled join's rows are its flops' (the loop rate).
 */
static double sparse_work(const CostCtx *c, const Kernel *k, int nin, const RelType *const *in,
                          int inmap[][MAXDIM], const RelType *out, const Place *p, const RelType *mask)
{
	double visits = sparse_visits(c, k, nin, in, inmap, out, p, mask);
	if (visits <= 0)
		return 0;
	double bytes = 0;               /* the most of any sparse input's */
	for (int s = 0; s < nin && !mask; s++)
		if (in[s]->sparse && kx_zero_with(k->expr, s))
			bytes = fmax(bytes, gathered_bytes(c, k, nin, in, out, s));
	double bw = c->m->sparse_gather_bw > 0 ? c->m->sparse_gather_bw : c->m->memcpy_bw;
	return visits * (c->m->sparse_elem + bytes / bw);
}

/* Reuse below which an aliased operand costs its streaming (512 x 32768
 * x 512 with rows 128 KiB apart runs at the square rate, 256 x 65536 x 256
 * at a third of it). */
#define GEMM_REUSE 512
/* Bytes from which an operand packed is packed from memory, not cache
 * (and from which trt_sgemm unaliases a B). */
#define GEMM_PACKED ((double)(4 << 20))

/* Whether operand o's rows (groups x and y its dims) are a multiple of
 * 4 KiB apart: they then share cache sets, and BLIS misses on every row. */
static bool aliased(const Contraction *g, int o, int x, int y, DType t)
{
	double ld = 1;
	if (x >= 0 && g->g[x].stride[o] > ld)
		ld = g->g[x].stride[o];
	if (y >= 0 && g->g[y].stride[o] > ld)
		ld = g->g[y].stride[o];
	return ld > 1 && fmod(ld * dtype_size(t), 4096) == 0;
}

/* Whether input o's matrix differs from one call to the next (a group of
 * its labels is a loop of calls, as a batch is): BLIS then packs it from
 * memory, each call afresh, whatever its size. */
static bool streamed(const Contraction *g, int o)
{
	for (int i = 0; i < g->ngroup; i++)
		if (i != g->use[ROLE_M] && i != g->use[ROLE_N] && i != g->use[ROLE_K] && g->g[i].pos[o] >= 0 &&
		    g->g[i].ext > 1)
			return true;
	return false;
}

/* Whether k's generated loop reduces with its adds in one chain: a kernel
 * reducing into an output with dims takes the output's innermost label in
 * tiles (codegen/kernel.c, emit_loop_kernel), the tile's loop innermost;
 * when an input holds that label along any dim but its contiguous one
 * (the chunk's last), the tile's loop strides by the input's row, at the
 * machine's row_reduce an element whatever the loop rate (attention's
 * max[c] and sum[c]; nnsearch's join dist[n] = proj[n, e] * diff[n, e],
 * 1.3 ns an element where the loop rate priced 0.27; not gcn's A[i, j] *
 * relu(H[j, c]), whose tile runs along H's rows).  A kernel reducing to
 * one scalar stays a scalar loop: each element's add waits for the last
 * one's (mf.tra's sum[i, j](E[i, j] * E[i, j]), 480k elements a rank,
 * took 0.97 ns an element where the loop rate priced 0.27). */
static bool reduces_rows(const Kernel *k, int nin, const RelType *const *in)
{
	if (!k->reduces)
		return false;
	if (k->noutdim == 0)
		return true;
	int tile = k->outlab[k->noutdim - 1];
	for (int i = 0; i < nin; i++) {
		if (in[i]->nchunk == 0)
			continue;
		int last = in[i]->chunkdim[in[i]->nchunk - 1];
		for (int d = 0; d < k->nindim[i]; d++)
			if (k->inlab[i][d] == tile && d != last)
				return true;
	}
	return false;
}

/* How many calls add into each C of contraction g: its summed labels'
 * chunks (the join's sum over them fused) times the calls of a summed
 * group looped inside a chunk. */
static double k_steps(const Contraction *g, const Kernel *k, const RelType *const *in)
{
	double steps = 1;
	for (int x = 0; x < g->ngroup; x++) {
		if (g->g[x].role != ROLE_K)
			continue;
		if (x != g->use[ROLE_K])
			steps *= g->g[x].ext;
		for (int l = 0; l < g->g[x].n; l++)
			steps *= label_frontier(k, 2, in, g->g[x].lab[l]);
	}
	return steps;
}

/*
 * The kernel's rate.  A contraction is the BLIS calls codegen makes
 * (ir/gemm.c's contraction_plan), each at the calibrated rate of a cube of
 * its volume (m n k), and what a thin call adds (bench/README.md, "Thin
 * gemms").  *call_bytes: the bytes of BLIS's A a flop of a call packs,
 * which cost_join adds at memcpy's rate when the calls' are more than the
 * cache holds (the calibrated cubes ran in the cache; the calls of a big
 * join read their A from memory, one after the other), however thin the
 * call: *bound, the rate of its operands' streaming through memory, is a
 * least time beside that sum, not instead of it (as the rate with A's
 * packing dropped, it priced the arxiv-size GCN's AX W1 in two blocks of
 * 32 columns, AX packed twice, at 0.8 of one block of 64, and the search
 * chose them; they ran 1.35x slower, 0.046 s a step against 0.034).  Calls of
 * 20000 x k x n (m k n, distinct chunks, Zen 4, 2026-11-29) ran at 44-60
 * GFLOP/s for n = 64, 50-70 for n = 100, 59-76 for n = 200 and 75-102 for
 * n = 400, where cubes of their volumes ran at 70-86.  Priced as cubes
 * alone, nnsearch's 100-wide blocks tied with 400-wide ones (0.0704 s
 * against 0.0707) and ran 1.8x slower: a rank's 16 calls of 20000 x 100 x
 * 100 stream an A of 8 MB each, where 400-wide blocks make one call of
 * 20000 x 400 x 400.  B, which BLIS packs in panels and reuses across A's
 * rows, is the packing terms' below, as is an A they price.  C read
 * again by each call that adds into it (k_steps: a k split in chunks, or
 * a summed group looped) costs its bytes at gemm_accum_bw beyond the L1: the
 * host model's memcpy rate (nnsearch's 64 calls of 20000 x 50 x 50 a rank
 * took 0.120 s, one of 20000 x 400 x 400 0.082, priced 0.090 and 0.094
 * without it); free in the built-in model, where it gave the TRA paper's
 * XML FFNN 500-row batch blocks, 2 on 5 ranks, 6% more floats than the
 * paper's fastest plan, on a saving the model alone claims
 * (tests/golden/paper.sh).
 * BLIS packs the operand it reuses little from memory, and a
 * cube of the same volume packs far less: in BLIS's own orientation (C
 * column-major is computed as C' = B' A', the roles of m and n swapped)
 * B (k x n) reused m times costs its bytes at gemm_pack_b_Bps when m is
 * short, A (m x k) reused n times its bytes at gemm_pack_a_Bps when n is
 * short, either when 4 MB or more or when it is a new matrix each call
 * (`streamed`: Tucker's T2 = B T1, 48 x 96 x 4608 a call, B's 1.8 MB a
 * slice of T1, ran at 51 GFLOP/s against 71 for a cube of its volume);
 * a smaller one the calls share is packed from cache.
 * Aliased rows add: B's the runtime copies to unaliased panels first
 * (trt_sgemm), a pass at memcpy bandwidth, after which C's aliasing
 * measured nothing (96 x 442368 x 96: 56.1 GFLOP/s with B's rows padded,
 * 53.0 with both); else C's (k short) streams at gemm_alias_bw.  The rate
 * is bounded (*bound) by the product's arithmetic intensity times the
 * memory bandwidth (a dim of 10 streams its operands through memory).
 * Anything else is the generated loops, at their rate.
 */
static double kernel_rate(const CostCtx *c, const Kernel *k, int nin, const RelType *const *in, DType t,
                          double *call_bytes, double *bound)
{
	Contraction g;
	*call_bytes = *bound = 0;
	if (nin != 2 || in[0]->sparse || in[1]->sparse || !contraction_plan(k, in, t, &g))
		return c->m->loop_rate;
	double m, n, kk;
	contraction_calls(&g, &m, &n, &kk);
	int gm = g.use[ROLE_M], gn = g.use[ROLE_N], gk = g.use[ROLE_K];
	double v = m * n * kk, size = dtype_size(t);
	bool colc = gm >= 0 && gn >= 0 && g.g[gm].stride[2] < g.g[gn].stride[2];
	double bm = colc ? n : m, bn = colc ? m : n;   /* BLIS's m and n */
	double secs = 2 * v / machine_gemm_rate(c->m, t, cbrt(v));
	*call_bytes = size * bm * kk / (2 * v);        /* A; B is the packing terms' */
	int ba = colc ? 1 : 0, bb = 1 - ba;             /* the inputs BLIS sees as A and B */
	if (bm < GEMM_REUSE && (kk * bn * size >= GEMM_PACKED || streamed(&g, bb)) && c->m->gemm_pack_b_bw > 0)
		secs += kk * bn * size / c->m->gemm_pack_b_bw;
	if (bn < GEMM_REUSE && (bm * kk * size >= GEMM_PACKED || streamed(&g, ba)) && c->m->gemm_pack_a_bw > 0) {
		secs += bm * kk * size / c->m->gemm_pack_a_bw;
		*call_bytes = 0;                                 /* A priced so */
	}
	/* each call that adds into its C (a k over chunks, or a k group
	 * looped) reads it again, from beyond the L1 */
	double ks = k_steps(&g, k, in);
	if (ks > 1 && m * n * size > c->m->cache_l1 && c->m->gemm_accum_bw > 0)
		secs += m * n * size * (1 - 1 / ks) / c->m->gemm_accum_bw;
	if (m < GEMM_REUSE && n > 4096 && kk * n * size >= GEMM_PACKED && aliased(&g, 1, gk, gn, t))
		secs += kk * n * size / c->m->memcpy_bw;        /* trt_sgemm's conditions */
	else if (kk < GEMM_REUSE && aliased(&g, 2, gm, gn, t))
		secs += m * n * size / c->m->gemm_alias_bw;
	*bound = 2 * v / (size * (m * kk + kk * n + m * n)) * c->m->memcpy_bw;
	return 2 * v / secs;
}

Cost cost_join(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r, const JoinSpec *on,
               const Place *jp, const RelType *mask)
{
	int inmap[2][MAXDIM];
	const RelType *in[2] = {l, r};
	RelType jt = ia_join_type(l, r, on);
	for (int d = 0; d < l->nkey; d++)
		inmap[0][d] = d;
	for (int d = 0; d < r->nkey; d++)
		inmap[1][d] = ia_join_out_dim(l->nkey, on, d);
	Cost x = {0};
	double n = kernel_elems(k, 2, in, &jt, inmap);
	double share = cost_share(c, &jt, jp);
	double call_bytes, bound;
	double rate = kernel_rate(c, k, 2, in, jt.dtype, &call_bytes, &bound);
	if (mask) {
		/* sampled: the kernel runs at the mask's stored elements alone,
		 * a loop over them (nnz * K for SDDMM), never a gemm */
		n *= rel_density(mask);
		rate = c->m->loop_rate;
	}
	x.flops = n * kernel_per(k);
	double per = kernel_secs(k, rate);
	/* the generated loop (not a gemm: kernel_rate gave the loop rate) */
	if (!mask && rate == c->m->loop_rate && reduces_rows(k, 2, in))
		per = fmax(per, c->m->row_reduce);
	/* the BLIS calls of a join whose A operands are more than a core's
	 * L2 holds pack them at memory's pace, call after call, beside their
	 * flops: BLIS packs from the L3 no faster than from memory (on the
	 * 2.44 GHz Zen 3, calls of 1000 x 200 x 64 on one A of 0.8 MB ran at
	 * 64-66 GFLOP/s, over four distinct A, 3.2 MB, at 52-55, and over 16
	 * at 57; examples/gcn_sparse.tra's AX W1 and its adjoint's AX^T dH1,
	 * 3.2 MB of AX a rank in four such calls, ran at 43 on 2 ranks, priced
	 * at 80 when the test was the rank's L2 and its share of the L3) */
	double a_bytes = kernel_per(k) * call_bytes;   /* of BLIS's A, an element */
	double held = c->m->cache_l2 > 0 ? c->m->cache_l2 : c->m->cache_per_rank;
	if (!mask && a_bytes > 0 && n * share * a_bytes > held)
		per += a_bytes / c->m->memcpy_bw;
	/* and never faster than its operands' streaming through memory */
	if (!mask && bound > 0)
		per = fmax(per, kernel_per(k) / bound);
	/* a sampled join's visits add to its flops: each is a dot product
	 * of its own, its vector's lanes summed and stored, which the loop's
	 * flops do not hide (mf_sparse's U V^T at the ratings on the Zen 3:
	 * 9.4 ns a visit with K = 16 in one chunk, 7.7 with two chunks of 8,
	 * 6 ns and 0.21 a k; priced the most of the two, the plan with two
	 * passes came within the tie of the one with one and ran 1.35x
	 * slower); a kernel over a sparse input's elements streams its
	 * dense rows beside them (the most of the two) */
	double flop_work = n * per * share, sparse = sparse_work(c, k, 2, in, inmap, &jt, jp, mask);
	double work = mask ? flop_work + sparse : fmax(flop_work, sparse);
	x.seconds = work + (double)rel_ntuples(&jt) * share * c->m->call_overhead + c->m->local_op_overhead;
	return x;
}

/* A convolution (IA_CONV; out its output, the join's or the fused
 * aggregation's): a multiply-add per point of its labels' space, every
 * label spanning a chunk dim of an input or of the output, at the
 * machine's conv rate where the kernel's register tiles run along input
 * 1's rows (its last chunk dim, CONV_TILE_BYTES at a time), at the loop
 * rate for what a row leaves over (all of it in rows shorter than a tile:
 * cnn.tra's 12 x 12 images, 3.4 GFLOP/s where the conv rate said 162), or
 * at conv_short a multiply-add when that is slower (host.c's CONV_SHORT_S:
 * cnn's rows ran at a quarter of the loop rate);
 * a kernel call per tuple of the join's key space. */
Cost cost_conv(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r, const JoinSpec *on,
               const RelType *out, const Place *jp)
{
	const RelType *ty[3] = {l, r, out};
	const int *lab[3] = {k->inlab[0], k->inlab[1], k->outlab};
	int nlab[3] = {k->nindim[0], k->nindim[1], k->noutdim};
	double n = 1;
	for (int x = 0; x < k->nlab; x++) {
		double e = 0;
		for (int i = 0; i < 3 && !e; i++)
			for (int ch = 0; ch < nlab[i] && !e; ch++) {
				bool win = false;
				for (int w = 0; w < k->nwin; w++)
					win |= i == 1 && k->win[w].dim == ch;
				if (lab[i][ch] == x && !win)
					e = (double)ty[i]->extent[ty[i]->chunkdim[ch]];
			}
		n *= e ? e : 1;
	}
	RelType jt = ia_join_type(l, r, on);
	double share = cost_share(c, &jt, jp);
	Cost x = {0};
	x.flops = 2 * n;
	double tiled = 1;
	if (r->nchunk > 0) {
		int d = r->chunkdim[r->nchunk - 1];
		double row = (double)rel_block_len(r, d);
		double tile = CONV_TILE_BYTES / dtype_size(r->dtype);
		tiled = floor(row / tile) * tile / row;
	}
	double untiled = fmax(1 / c->m->loop_rate, c->m->conv_short / 2);       /* a second per flop */
	x.seconds = x.flops * share * (tiled / c->m->conv_rate + (1 - tiled) * untiled) +
	            (double)rel_ntuples(&jt) * share * c->m->call_overhead + c->m->local_op_overhead;
	return x;
}

Cost cost_agg(const CostCtx *c, const RelType *in, const Place *p, double copies, const RelType *out)
{
	(void)out;
	Cost x = {0};
	double elems = rel_stored(in) * (p->kind == PL_PARTIAL ? copies : 1);
	x.flops = elems;
	double share = p->kind == PL_PARTIAL ? 1.0 / c->nsites : cost_share(c, in, p);
	x.seconds = elems * share / c->m->loop_rate + (double)rel_ntuples(in) * share * c->m->call_overhead / 4 +
	            c->m->local_op_overhead;
	return x;
}

Cost cost_map(const CostCtx *c, const Kernel *k, const RelType *in, const Place *p)
{
	Cost x = {0};
	if (!k)
		return x;               /* a rekey shares its chunks */
	int inmap[2][MAXDIM];
	const RelType *ins[1] = {in};
	for (int d = 0; d < in->nkey; d++)
		inmap[0][d] = d;
	double n = kernel_elems(k, 1, ins, in, inmap);
	double share = cost_share(c, in, p);
	x.flops = n * kernel_per(k);
	double per = kernel_secs(k, c->m->loop_rate);
	if (reduces_rows(k, 1, ins))
		per = fmax(per, c->m->row_reduce);
	double work = fmax(n * per * share, sparse_work(c, k, 1, ins, inmap, in, p, NULL));
	x.seconds = work + (double)rel_ntuples(in) * share * c->m->call_overhead + c->m->local_op_overhead;
	return x;
}
