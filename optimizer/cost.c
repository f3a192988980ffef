/*
 * cost.c: the cost model.
 *
 * Section 5.3 of the TRA paper: because frontiers are known exactly, so are
 * the sizes of all relations, and the cost of a plan is the number of floats
 * it moves: a broadcast of f floats over s sites costs f*s, a shuffle f, a
 * move that moves nothing (the relation already placed as needed) 0.
 * Beside that metric we compute what a run will do: bytes that leave their
 * site (from the site function the runtime uses), flops, the most bytes a
 * rank holds at once (intermediates freed after their last use), and
 * predicted seconds from the machine model (machine.c): per op, the most
 * loaded rank's share of the work at the kernel's rate, and each move as the
 * collective the runtime makes of it (a broadcast is an allgather, a
 * shuffle an all-to-all).
 *
 * Balance.  A relation partitioned on dims D puts each combination of D's
 * key values on one rank (row-major index modulo the rank count), so the
 * most loaded rank's share is known exactly by enumerating those
 * combinations (weighted by their chunks' lengths, edge chunks being short).
 *
 * Partials.  A relation of partial aggregates (PL_PARTIAL) holds each key on
 * up to r sites, r = `copies`: the sites its grouped-away partitioning dims
 * spread it over.  Its floats, moved or held, count r times: a co-partition
 * matmul ships s partial results of I x J (the paper's CMM = I*J*s).
 *
 * The primitives (cost_move, cost_join, ...) are what the search costs its
 * candidates with; opt_cost (plancost.c) applies the same ones to a whole
 * plan.  Here what moves, is read or written, and a placement's balance;
 * a kernel op's flops and seconds are kernelcost.c's.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

#define ENUM_LIMIT 200000       /* key combinations enumerated exactly; above, estimates */

/* ---- a memo of enumerations ---- */

/* Shares and moving fractions depend only on the partitioning dims'
 * extents, blocks and chunking, and on the site count: the search asks
 * for the same ones many times.  Keys are small int64 arrays. */
#define MEMO_KEY 40

typedef struct MemoEnt {
	int n;
	int64_t key[MEMO_KEY];
	double val;
} MemoEnt;

static MemoEnt *memo;
static size_t memo_cap, memo_used;

static MemoEnt *memo_find(const int64_t *k, int n)
{
	if (memo_used * 2 >= memo_cap) {
		size_t oc = memo_cap;
		MemoEnt *old = memo;
		memo_cap = oc ? 2 * oc : 4096;
		memo = xcalloc(memo_cap, sizeof *memo);
		memo_used = 0;
		for (size_t i = 0; i < oc; i++)
			if (old[i].n) {
				MemoEnt *e = memo_find(old[i].key, old[i].n);
				*e = old[i];
				memo_used++;
			}
		free(old);
	}
	size_t i = hash_keys(k, n) & (memo_cap - 1);
	for (;; i = (i + 1) & (memo_cap - 1)) {
		MemoEnt *e = &memo[i];
		if (!e->n || (e->n == n && !memcmp(e->key, k, (size_t)n * sizeof *k)))
			return e;
	}
}

static bool memo_get(const int64_t *k, int n, double *v)
{
	if (n > MEMO_KEY)
		return false;
	MemoEnt *e = memo_find(k, n);
	if (!e->n)
		return false;
	*v = e->val;
	return true;
}

static void memo_put(const int64_t *k, int n, double v)
{
	if (n > MEMO_KEY)
		return;
	MemoEnt *e = memo_find(k, n);
	if (!e->n) {
		e->n = n;
		memcpy(e->key, k, (size_t)n * sizeof *k);
		memo_used++;
	}
	e->val = v;
}

/* The key of a dim: extent, block, chunked. */
static int dim_key(const RelType *t, int d, int64_t *k)
{
	k[0] = t->extent[d];
	k[1] = t->block[d];
	k[2] = rel_chunkpos(t, d) >= 0;
	return 3;
}

/* ---- sizes and balance ---- */

/* A key dim's frontier and the fraction of the volume in each of its keys:
 * `full` for every key but the last, `last` for it (an extent that does
 * not divide by the block).  Worked out once per enumeration, not per key:
 * at 1024 ranks the enumerations are most of the planning time. */
typedef struct DimW {
	int64_t f;
	double full, last;
} DimW;

static DimW dim_w(const RelType *t, int d)
{
	DimW w = {.f = rel_frontier(t, d)};
	if (rel_chunkpos(t, d) < 0) {
		w.full = w.last = 1.0 / (double)w.f;
		return w;
	}
	int64_t len = t->extent[d] - (w.f - 1) * t->block[d];
	w.full = (double)rel_block_len(t, d) / (double)t->extent[d];
	w.last = (double)(len < t->block[d] ? len : t->block[d]) / (double)t->extent[d];
	return w;
}

/* The enumerations below walk the keys as an odometer (the last dim
 * fastest) instead of dividing each index apart.  A key's weight is the
 * product of its dims' fractions of the volume at its key values (edge
 * chunks are short; a dim no chunk spans weighs its key values alike):
 * `last` for a dim at its last key, else `full`.  w[mask] is that product
 * for the dims at their last key (mask's bits), multiplied in the order
 * the enumeration always took it (dims up, or down): the same bits. */
static void mask_weights(const DimW *dw, int n, bool down, double *w)
{
	for (int mask = 0; mask < 1 << n; mask++) {
		double x = 1;
		for (int k = 0; k < n; k++) {
			int i = down ? n - 1 - k : k;
			x *= mask >> i & 1 ? dw[i].last : dw[i].full;
		}
		w[mask] = x;
	}
}

/* The mask of a key all zero: the dims whose only key is their last. */
static int first_mask(const DimW *dw, int n)
{
	int mask = 0;
	for (int i = 0; i < n; i++)
		if (dw[i].f == 1)
			mask |= 1 << i;
	return mask;
}

/* The odometer's step: key (over dw's dims) to the next, its mask kept.
 * Returns the dim that went up (its lower ones went back to zero), or -1
 * past the last key. */
static int key_next(const DimW *dw, int n, int64_t *key, int *mask)
{
	for (int i = n - 1; i >= 0; i--) {
		if (++key[i] < dw[i].f) {
			if (key[i] == dw[i].f - 1)
				*mask |= 1 << i;
			return i;
		}
		key[i] = 0;
		*mask = (*mask & ~(1 << i)) | (dw[i].f == 1 ? 1 << i : 0);
	}
	return -1;
}

double cost_share(const CostCtx *c, const RelType *t, const Place *p)
{
	int s = c->nsites;
	switch (p->kind) {
	case PL_ALL:
		return 1;
	case PL_PARTIAL:
		return 1.0 / s;
	case PL_PART:
		break;
	}
	if (s == 1 || p->ndims == 0)
		return 1;
	int64_t mk[MEMO_KEY];
	int nk = 0;
	mk[nk++] = 1;           /* kind: a share */
	mk[nk++] = s;
	for (int i = 0; i < p->ndims && nk + 3 <= MEMO_KEY; i++)
		nk += dim_key(t, p->dims[i], mk + nk);
	double memoed;
	if (p->ndims <= (MEMO_KEY - 2) / 3 && memo_get(mk, nk, &memoed))
		return memoed;
	double combos = 1;
	for (int i = 0; i < p->ndims; i++)
		combos *= (double)rel_frontier(t, p->dims[i]);
	if (combos > ENUM_LIMIT) {
		double per = ceil(combos / s);
		return per / combos;
	}
	/* load per site over the combinations of the partitioning dims */
	double load[4096];
	double *site = s <= 4096 ? load : xcalloc((size_t)s, sizeof *site);
	for (int i = 0; i < s && i < 4096; i++)
		load[i] = 0;
	/* key k (row-major over the dims) goes to site k % s with its weight,
	 * the product of its dims' weights taken dims up; the last dim in an
	 * inner loop, the others by the odometer */
	int64_t key[MAXDIM] = {0};
	DimW dw[MAXDIM] = {{0}};
	double wm[1 << MAXDIM];
	if (p->ndims > MAXDIM)
		tr_bug("a share over %d dims", p->ndims);
	for (int i = 0; i < p->ndims; i++)
		dw[i] = dim_w(t, p->dims[i]);
	mask_weights(dw, p->ndims, false, wm);
	int L = p->ndims - 1, mask = first_mask(dw, L), r = 0;
	for (int up = L; up >= 0; up = key_next(dw, L, key, &mask))
		for (int64_t x = 0, f = dw[L].f; x < f; x++) {
			site[r] += wm[x == f - 1 ? mask | 1 << L : mask];
			if (++r == s)
				r = 0;
		}
	double m = 0;
	for (int i = 0; i < s; i++)
		m = site[i] > m ? site[i] : m;
	if (site != load)
		free(site);
	if (p->ndims <= (MEMO_KEY - 2) / 3)
		memo_put(mk, nk, m);
	return m;
}

double cost_partial_copies(const CostCtx *c, const RelType *t, const Place *p, int ngroup, const int *group)
{
	if (p->kind != PL_PART)
		return 1;
	double spread = 1;
	for (int i = 0; i < p->ndims; i++) {
		bool kept = false;
		for (int g = 0; g < ngroup; g++)
			kept |= group[g] == p->dims[i];
		if (!kept)
			spread *= (double)rel_frontier(t, p->dims[i]);
	}
	return spread < c->nsites ? spread : c->nsites;
}

/* The read system calls the busiest rank makes for its share of a dense
 * file (runtime/read.c, rt_read_rel).  A block's runs are its pieces
 * contiguous in the file: the dims from d0 on, where d0 is the last dim
 * the block splits (the dims after it whole); nrun of them per chunk.
 * Chunks whose dims are not in key order are read run by run; the others
 * band by band (the chunks along d0), one preadv per stretch without a
 * gap of at most READ_IOV runs.  A rank whose chunks along d0 are every
 * other (a partition over d0: sites go round the keys) has the others'
 * runs between its own: a gap of at most READ_GAP bytes it reads and
 * drops, a run and a gap a buffer each of a preadv's READ_IOV; past
 * READ_GAP, a preadv per run.  One that owns whole bands reads them as
 * stretches.  A sparse input is read from a .npz (npz_seconds), its calls
 * not counted. */
#define READ_IOV 1024.0         /* the runtime's MAX_IOV */
#define READ_GAP 8192.0         /* the runtime's GAP_MAX (read.c) */

/* Whether t's chunk dims are its key dims in order (a block of the file
 * is then a chunk as it is), and the last key dim t's blocks split, 0 if
 * none (runtime/rel.c, rt_block_of's d0): what the runtime reads and
 * writes files by. */
static bool chunks_in_key_order(const RelType *t)
{
	if (t->nchunk != t->nkey)
		return false;
	for (int ch = 0; ch < t->nchunk; ch++)
		if (t->chunkdim[ch] != ch)
			return false;
	return true;
}

static int last_split_dim(const RelType *t)
{
	int d0 = t->nkey - 1;
	while (d0 > 0 && t->block[d0] >= t->extent[d0])
		d0--;
	return d0;
}

/* The calls, and in *gap the bytes of gaps read and dropped. */
static double read_calls(const CostCtx *c, const RelType *t, const Place *p, double *gap)
{
	*gap = 0;
	if (t->sparse || t->nkey == 0)
		return 1;
	int d0 = last_split_dim(t);
	double nrun = 1, chunks = 1;
	for (int d = 0; d < t->nkey; d++) {
		if (d < d0)
			nrun *= (double)rel_block_len(t, d);
		chunks *= (double)rel_frontier(t, d);
	}
	double share = p->kind == PL_PART ? cost_share(c, t, p) : p->kind == PL_PARTIAL ? 1.0 / c->nsites : 1;
	double mine = ceil(chunks * share);
	bool split_d0 = false;
	for (int i = 0; p->kind == PL_PART && c->nsites > 1 && i < p->ndims; i++)
		split_d0 |= p->dims[i] == d0 && rel_frontier(t, d0) > 1;
	if (!chunks_in_key_order(t))
		return mine * nrun;
	if (split_d0) {
		double run = dtype_size(t->dtype) * (double)(t->block[d0] < t->extent[d0] ? t->block[d0] : t->extent[d0]);
		for (int d = d0 + 1; d < t->nkey; d++)
			run *= (double)t->extent[d];
		double f = (double)rel_frontier(t, d0), own = fmax(1, round(f * share));
		double between = run * (f / own - 1);
		if (between > READ_GAP)
			return mine * nrun;
		*gap = mine * nrun * between;
		return ceil(2 * mine * nrun / READ_IOV);
	}
	double bands = ceil(mine / (double)rel_frontier(t, d0));
	return fmax(bands, ceil(mine * nrun / READ_IOV));
}

/* The most bytes of a deflated member the runtime inflates whole, by
 * libdeflate, when the run has no memory budget; a bigger member, and every
 * member under a budget, streams through zlib (runtime/zip.c's WHOLE_MAX). */
#define NPZ_WHOLE_MAX (256.0 * 1024 * 1024)

/* Seconds to inflate a deflated member of n bytes. */
static double inflate_seconds(const CostCtx *c, double n)
{
	bool whole = c->budget <= 0 && n <= NPZ_WHOLE_MAX;
	double bw = whole || c->m->zlib_bw <= 0 ? c->m->inflate_bw : c->m->zlib_bw;
	return bw > 0 ? n / bw : 0;
}

/* What a sparse input read from a scipy .npz adds to its bytes (runtime/
 * npz.c): every stored element of the rows the rank's blocks cover goes
 * through a pile (npz_elem each), and each deflated member (save_npz
 * deflates by default) is inflated from its start up to the last byte the
 * rank needs: the busiest rank, holding the last rows, inflates all of
 * data and indices (int32 while the matrix allows) and indptr, each at
 * its own path's rate (inflate_seconds).  A rank whose blocks split only
 * the rows reads its rows; any other reads every row, keeping its own.  A
 * matrix may come as a dense .npy instead, every rank reading its share of
 * all V^2 elements: not what a sparse input is planned for, and not
 * priced. */
static double npz_seconds(const CostCtx *c, const RelType *t, const Place *p)
{
	if (t->nkey != 2)
		return 0;
	double stored = rel_stored(t);
	bool rows_only = p->kind == PL_PART && p->ndims == 1 && p->dims[0] == 0;
	double read = rows_only ? stored * cost_share(c, t, p) : stored;
	bool narrow = stored < 2147483647.0 && t->extent[0] < 2147483647 && t->extent[1] < 2147483647;
	double isize = narrow ? 4 : 8;
	return read * c->m->npz_elem + inflate_seconds(c, stored * dtype_size(t->dtype)) +
	       inflate_seconds(c, stored * isize) + inflate_seconds(c, (double)(t->extent[0] + 1) * isize);
}

/* Seconds the busiest rank takes to read its share of an input's file. */
double cost_read_seconds(const CostCtx *c, const RelType *t, const Place *p)
{
	double gap, calls = read_calls(c, t, p, &gap);
	double s = (cost_rank_bytes(c, t, p, 1) + gap) / c->m->read_bw + calls * c->m->read_call;
	return t->sparse ? s + npz_seconds(c, t, p) : s;
}

/* What the search weighs of a read: all of it when every rank reads the
 * whole file; else its system calls and the gaps it reads alone.  The
 * bytes are free there (the paper's convention: an input starts where it
 * is needed, and every partition reads a share), the calls and the gaps
 * are what a layout adds: MTTKRP's X split along its last dim read its share in 360000 runs
 * of 1.2 KB (0.85 s, before reads stepped over the gaps between them),
 * split along its first in one (0.30 s). */
Cost cost_read(const CostCtx *c, const RelType *t, const Place *p)
{
	if (p->kind != PL_ALL) {
		double gap, calls = read_calls(c, t, p, &gap);
		return (Cost){.seconds = gap / c->m->read_bw + calls * c->m->read_call};
	}
	return (Cost){.seconds = cost_read_seconds(c, t, p)};
}

/* What rank 0 holds beyond the output while it writes it (runtime/write.c,
 * write_rel and Out): a file of at most WRITE_BUFFERED bytes (the
 * runtime's OUT_BUFFERED, its data and a block) goes through the page
 * cache, no stage; a larger one through its stages, a chunk of two
 * WRITE_STAGEs (the runtime's out_stage_bytes); and what it receives.
 * A sparse matrix written to a .npz (its default path's ending, or none:
 * what a sparse output is written to) is gathered whole on rank 0 and
 * made a csr there, no stage: its bytes twice (runtime/npz.c,
 * rt_npz_write); to a .npy, its chunks made dense one at a time.  A dense output
 * whose chunk dims are in key-dim order goes slab by slab in file order,
 * the other ranks' portions of one slab received first: a slab is at
 * most WRITE_SLAB_MAX bytes (the runtime's SLAB_MAX), the indices within
 * one block of the first dim p one index of which fits in that; anything
 * else chunk by chunk, one chunk received at a time. */
#define WRITE_SLAB_MAX (4.0 * 1024 * 1024)
#define WRITE_STAGE (8.0 * 1024 * 1024)
#define WRITE_BLOCK 4096.0
#define WRITE_BUFFERED (512.0 * 1024 * 1024)

static double write_stage_bytes(const RelType *t)
{
	double data = dtype_size(t->dtype);
	for (int d = 0; d < t->nkey; d++)
		data *= (double)t->extent[d];
	if (data + WRITE_BLOCK <= WRITE_BUFFERED)
		return 0;
	double one = (ceil(data / WRITE_BLOCK) + 1) * WRITE_BLOCK;
	return (one > WRITE_STAGE ? 2 * WRITE_STAGE : one) + WRITE_BLOCK;
}

double write_transient_bytes(const CostCtx *c, const RelType *t, const Place *p, const char *path)
{
	if (t->sparse && t->nkey == 2 && (!path || ends_with(path, ".npz")))
		return 2 * rel_bytes(t);
	double stages = write_stage_bytes(t);
	if (t->nkey == 0 || p->kind == PL_ALL || c->nsites < 2)
		return stages;
	double es = dtype_size(t->dtype);
	if (t->sparse || !chunks_in_key_order(t)) {
		double chunk = es;
		for (int d = 0; d < t->nkey; d++)
			chunk *= (double)rel_block_len(t, d);
		return stages + chunk;
	}
	double unit = es;
	int d = t->nkey - 1;
	while (d > 0 && unit * (double)t->extent[d] <= WRITE_SLAB_MAX)
		unit *= (double)t->extent[d--];
	double h = fmax(1, floor(WRITE_SLAB_MAX / unit));
	h = fmin(h, (double)rel_block_len(t, d));
	return stages + h * unit;
}

/* Rank 0 receives the other ranks' share of an output and writes it all
 * (runtime/write.c, trt_write): the file's latency (its creation, fsyncs
 * and rename) and bytes.  Rank 0 fills WRITE_STAGE bytes (the runtime's
 * OUT_STAGE) by receiving and copying, into the page cache with the
 * disk's writeback started behind every WRITE_STAGE bytes (a file of at
 * most WRITE_BUFFERED bytes), or into one of two stages while a thread
 * writes the other (a larger one): either way the disk takes each
 * WRITE_STAGE bytes while the next fill, so after the first filling and
 * before the last one's writing the slower of the two sets the pace:
 *     first * fill + (b - first) * max(fill, disk) + first * disk
 * per byte, first = min(b, WRITE_STAGE).  The stages, when there are any,
 * are the write's transient memory (write_transient_bytes), their first
 * touch the op's when they go past the most memory held so far
 * (opt_cost). */

double cost_write(const CostCtx *c, const RelType *t)
{
	double b = rel_bytes(t), s = c->nsites;
	if (b <= 0)
		return c->m->write_latency;
	double recv = s > 1 ? machine_coll(c->m, COLL_ALLGATHER, b * (s - 1) / s) : 0;
	double fill = (recv + b / c->m->memcpy_bw) / b, disk = 1 / c->m->write_bw;
	double first = fmin(b, WRITE_STAGE);
	return c->m->write_latency + first * fill + (b - first) * fmax(fill, disk) + first * disk;
}

/* A param's initial values: this rank's share, made by seed and index
 * (not the memory's first touch: see HACKING.md, "The cost model").  The
 * rates are of f32 values (calibrate.c measures f32); an 8-byte value
 * costs two, as runtime/param.c makes two f32 values from one hash and
 * writes half the bytes (f64 uniform and normal of 9M values 1.8-2.2x
 * their f32 seconds). */
double cost_init(const CostCtx *c, const Tensor *x, const RelType *t, const Place *p)
{
	double f32s = cost_rank_bytes(c, t, p, 1) / 4;
	switch (x->init) {
	case INIT_UNIFORM:
		return f32s / c->m->uniform_rate;
	case INIT_NORMAL:
		return f32s / c->m->normal_rate;
	case INIT_FILE:
		return cost_read_seconds(c, t, p);
	default:
		return 0;
	}
}

double cost_rank_bytes(const CostCtx *c, const RelType *t, const Place *p, double copies)
{
	double b = rel_bytes(t);
	switch (p->kind) {
	case PL_ALL:
		return b;
	case PL_PARTIAL:
		return b * copies / c->nsites;
	case PL_PART:
		return b * cost_share(c, t, p);
	}
	return b;
}

/* The fraction of a relation's volume whose site changes from `from` to
 * `to` (both partitionings). */
static double moving_fraction(const CostCtx *c, const RelType *t, const Place *from, const Place *to)
{
	int s = c->nsites, dims[2 * MAXDIM], nd = 0;
	if (s == 1)
		return 0;
	for (int pass = 0; pass < 2; pass++) {
		const Place *p = pass ? to : from;
		for (int i = 0; i < p->ndims; i++) {
			bool seen = false;
			for (int j = 0; j < nd; j++)
				seen |= dims[j] == p->dims[i];
			if (!seen)
				dims[nd++] = p->dims[i];
		}
	}
	double combos = 1;
	for (int i = 0; i < nd; i++)
		combos *= (double)rel_frontier(t, dims[i]);
	if (combos > ENUM_LIMIT)
		return (double)(s - 1) / s;
	/* key: the union's dims, then each placement as positions in it */
	int64_t mk[MEMO_KEY];
	int nk = 0;
	bool memoable = 3 + 3 * nd + from->ndims + to->ndims + 2 <= MEMO_KEY;
	if (memoable) {
		mk[nk++] = 2;   /* kind: a moving fraction */
		mk[nk++] = s;
		for (int i = 0; i < nd; i++)
			nk += dim_key(t, dims[i], mk + nk);
		for (int pass = 0; pass < 2; pass++) {
			const Place *p = pass ? to : from;
			mk[nk++] = 100 + p->ndims;
			for (int i = 0; i < p->ndims; i++)
				for (int j = 0; j < nd; j++)
					if (dims[j] == p->dims[i])
						mk[nk++] = j;
		}
		double v;
		if (memo_get(mk, nk, &v))
			return v;
	}
	/* the keys over the union's dims (row-major), each weighing the
	 * product of its dims' weights taken dims down, moving when its
	 * sites differ: a = its row-major index over from's dims, b over to's,
	 * both linear in the key, kept modulo s as the odometer steps */
	int64_t key[2 * MAXDIM] = {0}, inc[2][2 * MAXDIM], back[2][2 * MAXDIM];
	DimW dw[2 * MAXDIM];
	for (int i = 0; i < nd; i++)
		dw[i] = dim_w(t, dims[i]);
	for (int pass = 0; pass < 2; pass++) {
		const Place *p = pass ? to : from;
		for (int j = 0; j < nd; j++) {
			int64_t stride = 0, st = 1;
			for (int i = p->ndims - 1; i >= 0; i--) {
				if (p->dims[i] == dims[j])
					stride = st;
				st *= rel_frontier(t, p->dims[i]);
			}
			inc[pass][j] = stride % s;
			back[pass][j] = (dw[j].f - 1) * stride % s;
		}
	}
	double wm[1 << MAXDIM];
	if (nd > MAXDIM)
		tr_bug("a move over %d dims", nd);
	mask_weights(dw, nd, true, wm);
	/* the last dim in an inner loop, the others by the odometer */
	int L = nd - 1, mask = first_mask(dw, L);
	int64_t ab[2] = {0, 0};
	double moved = 0;
	for (int up = L; nd > 0 && up >= 0; up = key_next(dw, L, key, &mask)) {
		if (up < L) {           /* after the first: the odometer stepped dim up */
			for (int pass = 0; pass < 2; pass++) {
				for (int j = up + 1; j < L; j++)
					if ((ab[pass] -= back[pass][j]) < 0)
						ab[pass] += s;
				if ((ab[pass] += inc[pass][up]) >= s)
					ab[pass] -= s;
			}
		}
		int64_t a = ab[0], b = ab[1], f = dw[L].f;
		for (int64_t x = 0; x < f; x++) {
			if (a != b)
				moved += wm[x == f - 1 ? mask | 1 << L : mask];
			if ((a += inc[0][L]) >= s)
				a -= s;
			if ((b += inc[1][L]) >= s)
				b -= s;
		}
	}
	if (memoable)
		memo_put(mk, nk, moved);
	return moved;
}

Cost cost_move(const CostCtx *c, const RelType *t, const Place *from, double copies, const Place *to)
{
	const Machine *m = c->m;
	int s = c->nsites;
	/* a sparse relation's floats are its stored elements, and each
	 * carries its index: its bytes per float are more than its dtype's */
	double stored = rel_stored(t);
	double size = stored > 0 ? rel_bytes(t) / stored : dtype_size(t->dtype);
	double f = stored * (from->kind == PL_PARTIAL ? copies : 1);
	Cost k = {0};

	if (to->kind == PL_ALL) {
		if (from->kind == PL_ALL)
			return k;               /* already everywhere (R2-1) */
		k.floats = f * s;
		k.bytes = f * size * (s - 1);
		/* every rank sends its part to every other: an allgather */
		double share = from->kind == PL_PART ? cost_share(c, t, from) : copies / s;
		if (share > 1)
			share = 1;
		double send = f * size * share * (s - 1), recv = f * size * (s - 1) / s;
		k.seconds = s > 1 ? machine_coll(m, COLL_ALLGATHER, send > recv ? send : recv) + m->op_overhead : 0;
		return k;
	}
	if (from->kind == PL_ALL) {
		/* each rank keeps its share: nothing moves */
		k.seconds = m->op_overhead / 4;
		return k;
	}
	if (from->kind == PL_PART && place_eq(from, to))
		return k;                       /* already partitioned so (R2-4) */
	k.floats = f;
	double frac = from->kind == PL_PARTIAL ? (double)(s - 1) / s : moving_fraction(c, t, from, to);
	k.bytes = f * size * frac;
	double sshare = from->kind == PL_PART ? cost_share(c, t, from) : 1.0 / s;
	double rshare = cost_share(c, t, to);
	double send = k.bytes * sshare, recv = k.bytes * rshare;
	k.seconds = s > 1 ? machine_coll(m, COLL_ALLTOALL, send > recv ? send : recv) + m->op_overhead : 0;
	return k;
}

/*
 * A halo (IA_HALO): the pieces of x's chunks (placed by xp) that halo
 * chunks (type h, placed alike) on other sites hold, counted exactly
 * as runtime/halo.c cuts them: for each halo key, the input chunks its
 * range covers, a piece's bytes sent when place_site puts the two keys on
 * different sites.  The seconds: one all-to-all of the busiest site's
 * bytes, and every site's copy of its halo chunks.  Above ENUM_LIMIT
 * pairs, the rows beyond the blocks, (s-1)/s of them remote.
 */
Cost cost_halo(const CostCtx *c, const RelType *x, const Place *xp, const RelType *h)
{
	int s = c->nsites;
	double es = dtype_size(x->dtype);
	Cost k = {0};
	double copy = cost_rank_bytes(c, h, xp, 1);
	k.seconds = copy / c->m->memcpy_bw + c->m->local_op_overhead;
	if (xp->kind != PL_PART || s == 1)
		return k;
	double *send = xcalloc((size_t)s + 1, sizeof *send);
	int64_t nk = rel_ntuples(h), K[MAXDIM] = {0}, lo[MAXDIM], hi[MAXDIM], kx[MAXDIM];
	double pairs = (double)nk;
	for (int d = 0; d < h->nkey; d++)
		if (h->hext[d] > 0)
			pairs *= 3;
	if (pairs > ENUM_LIMIT) {
		k.bytes = (rel_floats(h) - rel_floats(x)) * es * (s - 1) / s;
		k.bytes = k.bytes > 0 ? k.bytes : 0;
		send[0] = k.bytes / s;
	}
	for (int64_t lin = 0; pairs <= ENUM_LIMIT && lin < nk; lin++) {
		for (int64_t r = lin, d = h->nkey - 1; d >= 0; d--) {
			K[d] = r % rel_frontier(h, (int)d);
			r /= rel_frontier(h, (int)d);
		}
		int dest = place_site(xp, h, K, s);
		bool empty = false;
		for (int d = 0; d < h->nkey; d++) {
			lo[d] = hi[d] = K[d];
			if (!h->hext[d] || rel_chunkpos(h, d) < 0)
				continue;
			int64_t a = rel_chunk_off(h, d, K[d]), n = rel_chunk_len(h, d, K[d]);
			empty |= n == 0;
			lo[d] = a / x->block[d];
			hi[d] = (a + n - 1) / x->block[d];
		}
		if (empty)
			continue;
		memcpy(kx, lo, sizeof kx);
		for (;;) {
			int src = place_site(xp, x, kx, s);
			if (src != dest) {
				double n = 1;
				for (int ch = 0; ch < h->nchunk; ch++) {
					int d = h->chunkdim[ch];
					int64_t xa = kx[d] * x->block[d], xe = xa + rel_chunk_len(x, d, kx[d]);
					int64_t ta = rel_chunk_off(h, d, K[d]), te = ta + rel_chunk_len(h, d, K[d]);
					int64_t a = xa > ta ? xa : ta, e = xe < te ? xe : te;
					n *= e > a ? (double)(e - a) : 0;
				}
				k.bytes += n * es;
				send[src] += n * es;
			}
			int d = h->nkey - 1;
			for (; d >= 0; d--) {
				if (++kx[d] <= hi[d])
					break;
				kx[d] = lo[d];
			}
			if (d < 0)
				break;
		}
	}
	double most = 0;
	for (int r = 0; r < s; r++)
		most = send[r] > most ? send[r] : most;
	free(send);
	k.floats = k.bytes / es;
	if (k.bytes > 0)
		k.seconds += machine_coll(c->m, COLL_ALLTOALL, most) + c->m->op_overhead;
	return k;
}

/* ---- gathers ----
 *
 * The sizes are exact: one request (two int64s: the table chunk and the
 * row in it, REQ_BYTES) per index
 * element and table chunk along the other partitioning dims, one row
 * (the table's elements along its other dims) per index element.  Which
 * rows are remote depends on the index's values, known only at run time:
 * a row is taken to be on each rank alike, so (s-1)/s of them move. */

#define REQ_BYTES 16             /* runtime/gather.c: a request, a scattered row's header */

/* The table's chunks one index element's row spans on distinct sites:
 * frontiers of its partitioning dims other than the gathered one. */
static double row_pieces(const RelType *table, const Place *tp, int gdim)
{
	double n = 1;
	if (tp->kind == PL_PART)
		for (int i = 0; i < tp->ndims; i++)
			if (tp->dims[i] != gdim)
				n *= (double)rel_frontier(table, tp->dims[i]);
	return n;
}

/* Bytes sent as an all-to-all: total bytes, the most one rank sends. */
static double alltoall_seconds(const CostCtx *c, double per_rank)
{
	return machine_coll(c->m, COLL_ALLTOALL, per_rank);
}

Cost cost_gather(const CostCtx *c, const RelType *table, const Place *tp, int gdim, const RelType *index,
                 const Place *ip, const RelType *rows)
{
	const Machine *m = c->m;
	int s = c->nsites;
	double share = cost_share(c, rows, ip);
	double es = dtype_size(rows->dtype);
	Cost k = {0};
	/* the local copy of every row this rank ends up with */
	k.seconds = rel_floats(rows) * share * es / m->memcpy_bw + m->local_op_overhead;
	if (tp->kind == PL_ALL || s == 1)
		return k;
	/* a lookup: requests there, rows back; an index everywhere asks on
	 * every rank */
	double askers = ip->kind == PL_ALL ? s : 1;
	double remote = (double)(s - 1) / s;
	double nreq = rel_floats(index) * askers * row_pieces(table, tp, gdim) * remote;
	double nrow = rel_floats(rows) * askers * remote;
	k.floats = nrow;
	k.bytes = nreq * REQ_BYTES + nrow * es;
	double per = (nreq * REQ_BYTES * share + nrow * es * share) / askers;
	k.seconds += 2 * alltoall_seconds(c, per) + m->op_overhead;
	return k;
}

Cost cost_scatter(const CostCtx *c, const RelType *rows, const Place *rp, const RelType *index,
                  const RelType *out, const Place *op, ScatterInto into)
{
	const Machine *m = c->m;
	int s = c->nsites;
	double es = dtype_size(rows->dtype);
	double rshare = rp->kind == PL_ALL ? 1.0 / s : cost_share(c, rows, rp);
	Cost k = {0};
	/* the result zeroed (its share written) or the base copied (read and
	 * written), none of it in place; then every row added in, the result's
	 * rows it touches read and written, and each row's piece (a row split
	 * over the result's chunks along its other dims) at scatter_row:
	 * trt_scatter packs it with its chunk and row number, sorts it by
	 * them and sums it into its row on its own, not as a stream */
	double fill = into == SCATTER_ZEROS ? 1 : into == SCATTER_COPY ? 2 : 0;
	double pieces = rel_ntuples(rows) / fmax(1, rel_ntuples(index));
	k.seconds = fill * rel_bytes(out) * cost_share(c, out, op) / m->memcpy_bw +
	            rel_floats(rows) * rshare * (es / m->memcpy_bw + 1 / m->loop_rate) +
	            rel_floats(index) * pieces * rshare * m->scatter_row + m->local_op_overhead;
	k.flops = rel_floats(rows);
	if (rp->kind == PL_ALL || s == 1)
		return k;               /* each rank adds the rows it owns: nothing moves */
	double copies = op->kind == PL_ALL ? s - 1 : (double)(s - 1) / s;
	/* each row carries its chunk and row number */
	double nrow = rel_floats(index) * pieces * copies;
	double nval = rel_floats(rows) * copies;
	k.floats = nval;
	k.bytes = nrow * REQ_BYTES + nval * es;
	k.seconds += alltoall_seconds(c, k.bytes * rshare) + m->op_overhead;
	return k;
}

/*
 * A window cut out of a relation every rank holds (trt_slice, a pooling
 * window or its adjoint's scatter slice): the window's bytes copied, and
 * each row of it along the result's innermost chunk dim at slice_row.
 * trt_slice works row by row, each row's offset in its input chunk summed
 * from its position (copy_whole), and copies the row as one run, or
 * element by element when the window steps along it; cnn.tra's pooling
 * windows are rows of 2 floats, which a memcpy's rate prices at a fifth
 * of what they take.
 */
Cost cost_slice(const CostCtx *c, const RelType *t, const Place *p)
{
	const Machine *m = c->m;
	Cost k = {0};
	double bytes = cost_rank_bytes(c, t, p, 1), run = 1;
	if (t->nchunk > 0) {
		int d = t->chunkdim[t->nchunk - 1];
		run = (double)rel_block_len(t, d);
	}
	double rows = bytes / dtype_size(t->dtype) / fmax(1, run);
	k.seconds = bytes / m->memcpy_bw + rows * m->slice_row + m->local_op_overhead;
	return k;
}
