/*
 * verify.c: the verifiers of TRA programs and IA plans.
 *
 * They run after every pass in debug builds (and always under `make check`),
 * and check the invariants the later phases rely on: ops in topological
 * order, well-formed types, join keys that agree in extent and blocking,
 * kernels whose labels match their operands' chunks, and placements that
 * follow from the inputs' (ia_derive_place).  A failure is a bug in the pass
 * that ran last, never a user error.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* Loops: loopof[i] is the innermost loop (its LOOP op) around op i, or -1;
 * an op may read only ops of its own loop or of loops around it. */
typedef struct Scope {
	int *loopof;
	int *parent;            /* per LOOP op: the loop around it, or -1 */
	bool *result;           /* per op seen: whether it makes a relation */
	int cur;
} Scope;

/* One verification: where it is, its first problem, the loops around the
 * op, and per param the type of its first value (the others must match). */
typedef struct Ctx {
	Buf *err;
	const char *ir;
	int op;
	bool ok;
	Scope sc;
	const RelType **ref;
} Ctx;

static void fail(Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Ctx *c, const char *fmt, ...)
{
	va_list ap;
	if (!c->ok)
		return;         /* the first problem is the one worth reading */
	c->ok = false;
	buf_printf(c->err, "%s op %d: ", c->ir, c->op);
	va_start(ap, fmt);
	buf_vprintf(c->err, fmt, ap);
	va_end(ap);
}

static void check_type(Ctx *c, const RelType *t)
{
	if (t->nkey < 0 || t->nkey > MAXDIM || t->nchunk < 0 || t->nchunk > t->nkey)
		return fail(c, "bad arity: %d key dims, %d chunk dims", t->nkey, t->nchunk);
	for (int d = 0; d < t->nkey; d++)
		if (t->extent[d] < 1 || t->block[d] < 1)
			return fail(c, "key dim %d has extent %" PRId64 " and block %" PRId64, d, t->extent[d], t->block[d]);
	unsigned seen = 0;
	for (int i = 0; i < t->nchunk; i++) {
		int d = t->chunkdim[i];
		if (d < 0 || d >= t->nkey || (seen & 1u << d))
			return fail(c, "chunk dim %d spans key dim %d", i, d);
		seen |= 1u << d;
	}
}

static bool same_dim(const RelType *a, int da, const RelType *b, int db)
{
	return a->extent[da] == b->extent[db] && a->block[da] == b->block[db];
}

/*
 * A kernel's labels against its operands: every label names the output key
 * dims its chunk dims span (inmap[i][d] is the output dim of input i's key
 * dim d); a label may span two dims only when they are the same dim of a
 * diagonal (equal extent and block, tied by a filter).  The output's chunk
 * dims must be labelled by dims they span, and a label the output lacks is
 * reduced, so its dims cannot stay in the output's chunks.
 */
static void check_kernel(Ctx *c, const Kernel *k, int nin, const RelType *const *in,
                         int inmap[2][MAXDIM], const RelType *out)
{
	uint64_t dims[2 * MAXDIM];      /* per label: output key dims it spans (bit MAXDIM+d: grouped away) */
	const RelType *spanned[2 * MAXDIM];
	int spandim[2 * MAXDIM];
	if (!k)
		return fail(c, "no kernel");
	if (k->nin != nin)
		return fail(c, "kernel has %d inputs, op has %d", k->nin, nin);
	if (k->nlab < 0 || k->nlab > 2 * MAXDIM)
		return fail(c, "kernel has %d labels", k->nlab);
	for (int l = 0; l < k->nlab; l++)
		dims[l] = 0;
	for (int i = 0; i < nin; i++) {
		if (k->nindim[i] != in[i]->nchunk)
			return fail(c, "kernel input %d has %d dims, its chunks %d", i, k->nindim[i], in[i]->nchunk);
		for (int ch = 0; ch < in[i]->nchunk; ch++) {
			int l = k->inlab[i][ch], kd = in[i]->chunkdim[ch], d = inmap[i][kd];
			if (l < 0 || l >= k->nlab)
				return fail(c, "kernel input %d dim %d has label %d", i, ch, l);
			if (dims[l] && !(dims[l] & (1ull << d)) && !same_dim(spanned[l], spandim[l], in[i], kd))
				return fail(c, "kernel label %d spans two key dims of different extent or block", l);
			dims[l] |= 1ull << d;
			spanned[l] = in[i];
			spandim[l] = kd;
		}
	}
	if (k->noutdim != out->nchunk)
		return fail(c, "kernel has %d output dims, its chunks %d", k->noutdim, out->nchunk);
	for (int ch = 0; ch < out->nchunk; ch++) {
		int l = k->outlab[ch];
		if (l < 0 || l >= k->nlab || !(dims[l] & (1ull << out->chunkdim[ch])))
			return fail(c, "kernel output dim %d (label %d) does not span key dim %d", ch, l, out->chunkdim[ch]);
	}
	bool reduces = false;
	for (int l = 0; l < k->nlab; l++) {
		bool inout = false;
		for (int ch = 0; ch < k->noutdim; ch++)
			inout |= k->outlab[ch] == l;
		if (inout || !dims[l])
			continue;
		reduces = true;
		for (int d = 0; d < out->nkey; d++)
			if ((dims[l] & (1ull << d)) && rel_chunkpos(out, d) >= 0)
				return fail(c, "kernel reduces label %d but the output keeps it in the chunk", l);
	}
	if (reduces != k->reduces)
		return fail(c, "kernel's reduces flag is %d, its labels say %d", k->reduces, reduces);
}

/* A join's output type: left key ++ right key minus the matched dims. */
/* A sampled join's mask: sparse, each dim one of the join's (before its
 * aggregation) blocked alike, its chunks the output's in number; the
 * output sparse with its pattern. */
static void check_mask(Ctx *c, const JoinMask *m, const RelType *mt, const RelType *l, const RelType *r,
                       const JoinSpec *on, const RelType *out)
{
	RelType jt = ia_join_type(l, r, on);
	if (!mt->sparse || !out->sparse)
		return fail(c, "a sampled join's mask or result is not sparse");
	if (m->nkey != mt->nkey || mt->nchunk != out->nchunk)
		return fail(c, "a sampled join's mask has %d key dims (%d named), %d chunk dims (the result %d)",
		            mt->nkey, m->nkey, mt->nchunk, out->nchunk);
	for (int d = 0; d < m->nkey; d++)
		if (m->key[d] < 0 || m->key[d] >= jt.nkey || !same_dim(mt, d, &jt, m->key[d]))
			return fail(c, "a sampled join's mask dim %d is not join dim %d", d, m->key[d]);
}

/* The join's key pairs: in range, and alike in extent and block. */
static bool join_keys_ok(Ctx *c, const RelType *l, const RelType *r, const JoinSpec *on)
{
	for (int m = 0; m < on->nmatch; m++) {
		int lk = on->lkey[m], rk = on->rkey[m];
		if (lk < 0 || lk >= l->nkey || rk < 0 || rk >= r->nkey) {
			fail(c, "join key pair %d (%d, %d) out of range", m, lk, rk);
			return false;
		}
		if (!same_dim(l, lk, r, rk)) {
			fail(c, "join keys %d and %d differ in extent or block", lk, rk);
			return false;
		}
	}
	return true;
}

static void check_join(Ctx *c, const RelType *l, const RelType *r, const JoinSpec *on, const Kernel *k,
                       const RelType *out, int ngroup, const int *group)
{
	int inmap[2][MAXDIM];
	RelType jt = {.dtype = out->dtype, .nkey = l->nkey};

	if (l->dtype != r->dtype || l->dtype != out->dtype)
		return fail(c, "mixed element types");
	if (!join_keys_ok(c, l, r, on))
		return;
	for (int d = 0; d < l->nkey; d++) {
		inmap[0][d] = d;
		jt.extent[d] = l->extent[d];
		jt.block[d] = l->block[d];
	}
	for (int d = 0; d < r->nkey; d++) {
		int o = ia_join_out_dim(l->nkey, on, d);
		inmap[1][d] = o;
		if (o >= MAXDIM)
			return fail(c, "join output has more than %d key dims", MAXDIM);
		jt.extent[o] = r->extent[d];
		jt.block[o] = r->block[d];
		if (o >= jt.nkey)
			jt.nkey = o + 1;
	}
	const RelType *in[2] = {l, r};
	if (ngroup < 0) {
		if (out->nkey != jt.nkey)
			return fail(c, "join output has %d key dims, expected %d", out->nkey, jt.nkey);
		for (int d = 0; d < jt.nkey; d++)
			if (!same_dim(out, d, &jt, d))
				return fail(c, "join output key dim %d has the wrong extent or block", d);
		return check_kernel(c, k, 2, in, inmap, out);
	}
	/* fused aggregation: output dims are the group's */
	if (out->nkey != ngroup)
		return fail(c, "fused join output has %d key dims, its group %d", out->nkey, ngroup);
	int togroup[MAXDIM];
	for (int d = 0; d < jt.nkey; d++)
		togroup[d] = -1;
	for (int g = 0; g < ngroup; g++) {
		if (group[g] < 0 || group[g] >= jt.nkey || togroup[group[g]] >= 0)
			return fail(c, "bad group dim %d", group[g]);
		togroup[group[g]] = g;
		if (!same_dim(out, g, &jt, group[g]))
			return fail(c, "group dim %d has the wrong extent or block", g);
	}
	/* labels of grouped-away dims must be reduced inside the kernel */
	for (int i = 0; i < 2; i++)
		for (int d = 0; d < in[i]->nkey; d++)
			inmap[i][d] = togroup[inmap[i][d]] >= 0 ? togroup[inmap[i][d]] : MAXDIM + inmap[i][d];
	RelType o2 = *out;
	check_kernel(c, k, 2, in, inmap, &o2);
}

/* A convolution: a join (keys as check_join's) whose kernel is in0 * in1
 * summed, reading input 1 through windows.  A window dim of the right
 * input is never matched, and is one chunk there (a chunk of the output
 * reads its whole window from one chunk) or a halo (IA_HALO) holding
 * every row the output's chunk of the same key reads; when the window's
 * own label is the left's (a kernel's gradient), that one chunk holds the
 * whole dim.  A TRA convolution's window dim is blocked as its output
 * dim, each block at least the rows read beyond it. */
static void check_conv(Ctx *c, const RelType *l, const RelType *r, const JoinSpec *on, const Kernel *k,
                       const RelType *out, int ngroup, const int *group, bool ia)
{
	if (l->dtype != r->dtype || l->dtype != out->dtype)
		return fail(c, "mixed element types");
	if (!k || k->nin != 2 || !kx_is_product(k->expr) || k->red != AGG_ADD || k->nwin < 1 || k->nwin > MAXDIM)
		return fail(c, "a convolution's kernel is not a windowed product summed");
	if (k->nindim[0] != l->nchunk || k->nindim[1] != r->nchunk || k->noutdim != out->nchunk)
		return fail(c, "a convolution's kernel does not fit its chunks");
	int nkey = l->nkey;
	for (int w = 0; w < k->nwin; w++) {
		int ch = k->win[w].dim;
		if (ch < 0 || ch >= r->nchunk || k->win[w].lab < 0 || k->win[w].lab >= k->nlab)
			return fail(c, "window %d reads chunk dim %d", w, ch);
		int d = r->chunkdim[ch], own = ia_conv_own_dim(k, l, w), tiled = -1;
		for (int m = 0; m < on->nmatch; m++)
			if (on->rkey[m] == d && (!ia || own < 0 || on->lkey[m] != own))
				return fail(c, "window dim %d is a join key", d);
			else if (on->rkey[m] == d)
				tiled = m;
		if (tiled >= 0) {
			/* a kernel's gradient's window matched to its own dim: the
			 * halo of the left's chunk of that key */
			int64_t lo, hi;
			ia_conv_reach(k, l, out, w, &lo, &hi);
			if (r->hext[d] <= 0 || r->hlo[d] < lo || r->hhi[d] < hi || r->extent[d] != l->extent[own] ||
			    r->block[d] != l->block[own])
				return fail(c, "window dim %d's halo is not its own dim's tiles", d);
		} else if (r->hext[d] > 0) {
			int64_t lo, hi;
			ia_conv_reach(k, l, out, w, &lo, &hi);
			if (ia_conv_own_left(k, w) ? rel_frontier(r, d) != 1 || rel_chunk_off(r, d, 0) != 0 ||
			                                     rel_chunk_len(r, d, 0) != r->hext[d]
			                           : r->hlo[d] < lo || r->hhi[d] < hi)
				return fail(c, "window dim %d's halo holds less than its windows read", d);
		} else if (rel_frontier(r, d) != 1 && ia) {
			return fail(c, "window dim %d is more than one chunk", d);
		} else if (rel_frontier(r, d) != 1 && !ia_conv_own_left(k, w)) {
			/* a TRA convolution's (an own-left one's halo holds it all) */
			int o = ia_join_out_dim(l->nkey, on, d);
			int64_t lo, hi;
			ia_conv_reach(k, l, out, w, &lo, &hi);
			if (o >= out->nkey || out->block[o] != r->block[d] || lo > r->block[d] || hi > r->block[d])
				return fail(c, "window dim %d is blocked unlike its output's, or below its reach", d);
		}
	}
	if (!join_keys_ok(c, l, r, on))
		return;
	nkey += r->nkey - on->nmatch;
	if (ngroup < 0 ? out->nkey != nkey : out->nkey != ngroup)
		return fail(c, "a convolution's output has %d key dims", out->nkey);
	for (int g = 0; g < ngroup; g++)
		if (group[g] < -1 || group[g] >= nkey || (group[g] < 0 && rel_frontier(out, g) != 1))
			return fail(c, "bad group dim %d", group[g]);
}

/* A halo: the input's keys and chunk dims, dense; along each halo dim its
 * data's extent the input's, its own extent and block the reader's. */
static void check_halo(Ctx *c, const RelType *in, const RelType *out)
{
	int nhalo = 0;
	if (out->sparse || out->holes)          /* its input is made dense and whole first */
		return fail(c, "a sparse halo, or one with holes");
	if (in->dtype != out->dtype || in->nkey != out->nkey || in->nchunk != out->nchunk ||
	    memcmp(in->chunkdim, out->chunkdim, sizeof in->chunkdim))
		return fail(c, "a halo changes its input's keys or chunk dims");
	for (int d = 0; d < in->nkey; d++) {
		if (in->hext[d])
			return fail(c, "a halo of a halo");
		if (!out->hext[d]) {
			if (out->extent[d] != in->extent[d] || out->block[d] != in->block[d])
				return fail(c, "a halo reblocks key dim %d", d);
			continue;
		}
		nhalo++;
		if (out->hext[d] != in->extent[d] || out->hlo[d] < 0 || out->hhi[d] < 0 ||
		    rel_chunkpos(out, d) < 0)
			return fail(c, "a halo along key dim %d does not fit its input", d);
	}
	if (!nhalo)
		return fail(c, "a halo along no dim");
}

static void check_agg(Ctx *c, const RelType *in, int ngroup, const int *group, const RelType *out)
{
	unsigned seen = 0;
	if (out->nkey != ngroup)
		return fail(c, "aggregation output has %d key dims, its group %d", out->nkey, ngroup);
	for (int g = 0; g < ngroup; g++) {
		int d = group[g];
		if (d < 0 || d >= in->nkey || (seen & 1u << d))
			return fail(c, "bad group dim %d", d);
		seen |= 1u << d;
		if (!same_dim(out, g, in, d))
			return fail(c, "group dim %d has the wrong extent or block", g);
	}
	if (out->nchunk != in->nchunk)
		return fail(c, "aggregation changes the chunk rank");
	for (int ch = 0; ch < in->nchunk; ch++) {
		int d = in->chunkdim[ch];
		if (!(seen & 1u << d))
			return fail(c, "aggregation groups away key dim %d, which a chunk dim spans", d);
		if (group[out->chunkdim[ch]] != d)
			return fail(c, "aggregation reorders chunk dim %d", ch);
	}
}

static void check_rekey(Ctx *c, const RelType *in, int nkey, const int *keymap, const RelType *out)
{
	unsigned seen = 0;
	if (out->nkey != nkey)
		return fail(c, "rekey to %d dims, output has %d", nkey, out->nkey);
	for (int i = 0; i < nkey; i++) {
		int d = keymap[i];
		if (d == -1)
			continue;       /* an inserted dim, tuples duplicated along it */
		if (d < 0 || d >= in->nkey || (seen & 1u << d))
			return fail(c, "bad key map entry %d", d);
		seen |= 1u << d;
		if (!same_dim(out, i, in, d))
			return fail(c, "rekeyed dim %d has the wrong extent or block", i);
	}
	for (int d = 0; d < in->nkey; d++)
		if (!(seen & 1u << d) && rel_frontier(in, d) != 1)
			return fail(c, "rekey drops key dim %d, which is not a singleton", d);
	if (out->nchunk != in->nchunk)
		return fail(c, "rekey changes the chunk rank");
	for (int ch = 0; ch < in->nchunk; ch++)
		if (keymap[out->chunkdim[ch]] != in->chunkdim[ch])
			return fail(c, "rekey moves chunk dim %d", ch);
}

/* A map keeps keys; its kernel may change the element type (a conversion). */
static void check_map(Ctx *c, const RelType *in, const Kernel *k, const RelType *out)
{
	int inmap[2][MAXDIM];
	const RelType *ins[1] = {in};
	if (out->nkey != in->nkey)
		return fail(c, "map changes the key arity");
	for (int d = 0; d < in->nkey; d++) {
		inmap[0][d] = d;
		if (!same_dim(out, d, in, d))
			return fail(c, "map changes key dim %d", d);
	}
	check_kernel(c, k, 1, ins, inmap, out);
}

static void check_pred(Ctx *c, const RelType *in, const KeyPred *p)
{
	for (int i = 0; i < p->neq; i++) {
		int a = p->eq[i][0], b = p->eq[i][1];
		if (a < 0 || b < 0 || a >= in->nkey || b >= in->nkey || !same_dim(in, a, in, b))
			return fail(c, "filter compares key dims %d and %d", a, b);
	}
}

/* A param's own relation type: key dim d is the tensor's dim d, chunks in
 * order.  Blocks are whatever the relation carries; *ref keeps the first
 * seen, so all loads and stores of one param agree. */
static void check_param(Ctx *c, const TraProg *p, int tensor, const RelType *t)
{
	if (tensor < 0 || tensor >= p->tensors.n || p->tensors.v[tensor].role != TENSOR_PARAM)
		return fail(c, "tensor %d is not a param", tensor);
	const Tensor *ten = &p->tensors.v[tensor];
	const RelType **ref = &c->ref[tensor];
	if (t->nkey != ten->rank || t->nchunk != ten->rank || t->dtype != ten->dtype)
		return fail(c, "a value of param %s has the wrong arity or type", ten->name);
	for (int d = 0; d < ten->rank; d++)
		if (t->extent[d] != ten->shape[d] || t->chunkdim[d] != d)
			return fail(c, "dim %d of a value of param %s does not match it", d, ten->name);
	if (!*ref)
		*ref = t;
	else if (memcmp((*ref)->block, t->block, sizeof t->block))
		fail(c, "values of param %s are blocked differently", ten->name);
}

/* A range: one key dim with its chunk dim, of i64 positions; or none, the
 * one empty key (tb_unit). */
static void check_range(Ctx *c, const RelType *t)
{
	if (t->nkey > 1 || t->nchunk != t->nkey || t->dtype != DT_I64)
		fail(c, "a range of %d key dims, %d chunk dims, %s", t->nkey, t->nchunk, dtype_name(t->dtype));
}

/* A gather's table (a scatter's result), index and rows (a gather's
 * result, a scatter's input) agree: the rows keyed as gather_type says,
 * every key dim spanned by a chunk dim (each row is a whole run). */
static void check_gather(Ctx *c, const RelType *table, const RelType *index, int dim, const RelType *rows)
{
	if (dim < 0 || dim >= table->nkey) {
		fail(c, "gathers dim %d of a table of %d key dims", dim, table->nkey);
		return;
	}
	/* a sparse table, index or rows is read dense (codegen: trt_densify) */
	if (!dtype_is_int(index->dtype))
		fail(c, "gathers by a %s index", dtype_name(index->dtype));
	if (table->dtype != rows->dtype)
		fail(c, "gathers %s rows into %s", dtype_name(table->dtype), dtype_name(rows->dtype));
	if (index->nchunk != index->nkey || table->nchunk != table->nkey || rows->nchunk != rows->nkey)
		fail(c, "gathers with a key dim no chunk dim spans");
	RelType want = gather_type(table, index, dim);
	if (want.nkey != rows->nkey)
		fail(c, "gathers into %d key dims, not %d", rows->nkey, want.nkey);
	for (int d = 0; d < want.nkey && c->ok; d++)
		if (want.extent[d] != rows->extent[d] || want.block[d] != rows->block[d])
			fail(c, "gathered key dim %d is %" PRId64 "/%" PRId64 ", not %" PRId64 "/%" PRId64, d,
			     rows->extent[d], rows->block[d], want.extent[d], want.block[d]);
}

/* A scatter's base: the result's own type, dense and whole, so the rows
 * add into its chunks (in place when it dies there). */
static void check_scatter_base(Ctx *c, const RelType *base, const RelType *t)
{
	bool same = base->dtype == t->dtype && base->nkey == t->nkey && base->nchunk == t->nchunk &&
	            !base->sparse && !base->holes;
	for (int d = 0; same && d < t->nkey; d++)
		same = base->extent[d] == t->extent[d] && base->block[d] == t->block[d];
	for (int k = 0; same && k < t->nchunk; k++)
		same = base->chunkdim[k] == t->chunkdim[k];
	if (!same)
		fail(c, "scatters into a base of another type, or one sparse or with holes");
}

/* A scatter's rows are scaled by a finite number but 0 (0: a maker that
 * forgot it). */
static void check_scale(Ctx *c, double scale)
{
	if (!(scale != 0 && scale - scale == 0))
		fail(c, "scatters rows times %g", scale);
}

/* A loop counter: a 0-d i64 of a repeat block around it. */
static void check_counter(Ctx *c, int depth, const RelType *t)
{
	if (t->nkey != 0 || t->dtype != DT_I64 || depth < 0)
		fail(c, "a counter of %d key dims, %s, depth %d", t->nkey, dtype_name(t->dtype), depth);
}

/* A slice: the input's type but for the sliced dim's extent (and blocks),
 * at a 0-d i64 offset; sparse when it cuts a sparse input's compressed
 * rows (the other dims' blocks then the input's), never a scatter (which
 * reads a sparse input dense: codegen's trt_densify). */
static void check_slice(Ctx *c, const RelType *in, const RelType *off, int dim, int64_t stride, bool scatter,
                        const RelType *t)
{
	if (stride == 0)
		fail(c, "a slice of stride %" PRId64, stride);
	if (off && (off->nkey != 0 || off->dtype != DT_I64))
		fail(c, "a slice at an offset of %d key dims, %s", off->nkey, dtype_name(off->dtype));
	else if (dim < 0 || dim >= in->nkey || t->nkey != in->nkey || t->nchunk != in->nchunk || t->dtype != in->dtype ||
	         (t->sparse && (scatter || !in->sparse)))
		fail(c, "a slice along dim %d of a different relation", dim);
	for (int d = 0; c->ok && d < t->nkey; d++)
		if (d != dim && (t->extent[d] != in->extent[d] || (t->sparse && t->block[d] != in->block[d])))
			fail(c, "a slice changes the extent (or a sparse one the blocks) of dim %d", d);
	for (int d = 0; c->ok && d < t->nchunk; d++)
		if (t->chunkdim[d] != in->chunkdim[d])
			fail(c, "a slice reorders its chunks");
}

static Ctx ctx_new(Buf *err, const char *ir, int nops, int ntensors)
{
	Scope sc = {xcalloc(nops + 1, sizeof(int)), xcalloc(nops + 1, sizeof(int)),
	            xcalloc(nops + 1, sizeof(bool)), -1};
	return (Ctx){err, ir, 0, true, sc, xcalloc(ntensors + 1, sizeof(RelType *))};
}

/* The end of the ops: every loop must be closed.  Returns whether all held. */
static bool ctx_end(Ctx *c)
{
	if (c->ok && c->sc.cur >= 0)
		fail(c, "loop at op %d is not closed", c->sc.cur);
	free(c->ref);
	free(c->sc.loopof);
	free(c->sc.parent);
	free(c->sc.result);
	return c->ok;
}

static void scope_enter(Ctx *c, Scope *sc, int i, bool is_loop, bool is_end)
{
	if (is_end) {
		if (sc->cur < 0)
			return fail(c, "endloop without loop");
		sc->cur = sc->parent[sc->cur];
	}
	sc->loopof[i] = sc->cur;
	if (is_loop) {
		sc->parent[i] = sc->cur;
		sc->cur = i;
	}
}

static bool scope_visible(const Scope *sc, int def, int use)
{
	return loop_within(sc->parent, sc->loopof[use], sc->loopof[def]);
}

/*
 * Op i, of either IR, begins: it opens or closes a loop, makes a relation
 * or not, and reads in[0..n), which must be earlier ops that make
 * relations, in its loop or in one around it.
 */
static void enter_op(Ctx *c, int i, const int *in, int n, bool is_loop, bool is_end, bool result)
{
	Scope *sc = &c->sc;
	c->op = i;
	scope_enter(c, sc, i, is_loop, is_end);
	sc->result[i] = result;
	for (int j = 0; j < n; j++)
		if (in[j] < 0 || in[j] >= i || !sc->result[in[j]])
			fail(c, "input %d is op %d", j, in[j]);
		else if (!scope_visible(sc, in[j], i))
			fail(c, "input %d (op %d) is inside a loop this op is not in", j, in[j]);
}

/* Whether the checks of an op's kind may go on: its inputs and (checked
 * only when they are) its own type are sound. */
static bool sound(Ctx *c, const RelType *t)
{
	if (c->ok)
		check_type(c, t);
	return c->ok;
}

static void check_tra_op(Ctx *c, const TraProg *p, int i)
{
	const TraOp *op = &p->ops.v[i];
	int in[MAXIN];
	int n = tra_inputs(op, in);
	enter_op(c, i, in, n, op->kind == TRA_LOOP, op->kind == TRA_ENDLOOP, tra_has_result(op->kind));
	if (op->stmt < -1 || op->stmt >= p->stmts.n)
		fail(c, "statement %d", op->stmt);
	if (!sound(c, &op->type))
		return;
	const RelType *a = n > 0 ? &p->ops.v[in[0]].type : NULL;
	const RelType *b = n > 1 ? &p->ops.v[in[1]].type : NULL;
	switch (op->kind) {
	case TRA_INPUT: {
		int t = op->u.input.tensor;
		if (t < 0 || t >= p->tensors.n) {
			fail(c, "tensor %d", t);
			break;
		}
		const Tensor *ten = &p->tensors.v[t];
		if (op->type.nkey != ten->rank || op->type.nchunk != ten->rank)
			fail(c, "input of a rank-%d tensor has %d key dims", ten->rank, op->type.nkey);
		for (int d = 0; d < ten->rank && c->ok; d++)
			if (op->type.extent[d] != ten->shape[d] || op->type.chunkdim[d] != d)
				fail(c, "input dim %d does not match tensor %s", d, ten->name);
		break;
	}
	case TRA_JOIN:
		check_join(c, a, b, &op->u.join.on,
		           op->u.join.kernel, &op->type, -1, NULL);
		if (c->ok && op->u.join.mask.on)
			check_mask(c, &op->u.join.mask, &p->ops.v[in[2]].type, a, b, &op->u.join.on, &op->type);
		break;
	case TRA_CONV:
		check_conv(c, a, b, &op->u.join.on, op->u.join.kernel, &op->type, -1, NULL, false);
		break;
	case TRA_AGG:
		check_agg(c, a, op->u.agg.ngroup, op->u.agg.group, &op->type);
		break;
	case TRA_MAP:
		check_map(c, a, op->u.map.kernel, &op->type);
		break;
	case TRA_REKEY:
		check_rekey(c, a, op->u.rekey.nkey, op->u.rekey.keymap, &op->type);
		break;
	case TRA_FILTER:
		check_pred(c, a, &op->u.filter.pred);
		break;
	case TRA_OUTPUT: {
		int t = op->u.output.tensor;
		if (t < 0 || t >= p->tensors.n || a->nkey != p->tensors.v[t].rank) {
			fail(c, "output to tensor %d", t);
			break;
		}
		for (int d = 0; d < a->nkey; d++)
			if (a->extent[d] != p->tensors.v[t].shape[d] || rel_chunkpos(a, d) < 0)
				fail(c, "output dim %d does not match tensor %s", d, p->tensors.v[t].name);
		break;
	}
	case TRA_INIT:
	case TRA_LOAD:
		check_param(c, p, op->u.init.tensor, &op->type);
		break;
	case TRA_RANGE:
		check_range(c, &op->type);
		break;
	case TRA_GATHER:
		check_gather(c, a, b, op->u.gather.dim, &op->type);
		break;
	case TRA_SCATTER:
		check_gather(c, &op->type, b, op->u.gather.dim, a);
		check_scale(c, op->u.gather.scale);
		if (op->u.gather.base >= 0)
			check_scatter_base(c, &p->ops.v[op->u.gather.base].type, &op->type);
		break;
	case TRA_COUNTER:
		check_counter(c, op->u.counter.depth, &op->type);
		break;
	case TRA_SLICE:
		check_slice(c, a, b, op->u.slice.dim, op->u.slice.stride, op->u.slice.scatter, &op->type);
		break;
	case TRA_STORE:
		check_param(c, p, op->u.store.tensor, a);
		break;
	case TRA_PRINT:
		if (op->u.store.tensor < 0 || op->u.store.tensor >= p->tensors.n)
			fail(c, "prints tensor %d", op->u.store.tensor);
		break;
	case TRA_LOOP:
		if (op->u.loop.count < 0)
			fail(c, "loop count %" PRId64, op->u.loop.count);
		break;
	case TRA_ENDLOOP:
		break;
	case TRA_GRAD: {
		int t = op->u.grad.tensor;
		if (a->nkey != 0)
			fail(c, "the gradient of a relation with %d key dims", a->nkey);
		else if (t < 0 || t >= p->tensors.n || p->tensors.v[t].role == TENSOR_TEMP)
			fail(c, "a gradient with respect to tensor %d", t);
		else if (op->type.nkey != p->tensors.v[t].rank)
			fail(c, "a gradient typed unlike its tensor");
		break;
	}
	}
}

static void check_ia_op(Ctx *c, const IaPlan *p, int i)
{
	const IaOp *op = &p->ops.v[i];
	int in[MAXIN];
	int n = ia_inputs(op, in);
	enter_op(c, i, in, n, op->kind == IA_LOOP, op->kind == IA_ENDLOOP, ia_has_result(op->kind));
	if (!sound(c, &op->type))
		return;
	const RelType *a = n > 0 ? &p->ops.v[in[0]].type : NULL;
	const RelType *b = n > 1 ? &p->ops.v[in[1]].type : NULL;
	switch (op->kind) {
	case IA_READ:
		if (op->place.kind == PL_PARTIAL)
			fail(c, "reads as partials");
		break;
	case IA_BCAST:
	case IA_FILTER:
	case IA_WRITE:
		if (memcmp(a, &op->type, sizeof *a))
			fail(c, "changes the type of its input");
		if (op->kind == IA_FILTER)
			check_pred(c, a, &op->u.filter.pred);
		break;
	case IA_SHUFFLE:
		if (memcmp(a, &op->type, sizeof *a))
			fail(c, "changes the type of its input");
		if (op->place.kind != PL_PART)
			fail(c, "shuffles to a placement that is not a partitioning");
		for (int d = 0; d < op->place.ndims; d++)
			if (op->place.dims[d] < 0 || op->place.dims[d] >= op->type.nkey)
				fail(c, "partitions on key dim %d", op->place.dims[d]);
		break;
	case IA_JOIN:
		check_join(c, a, b, &op->u.join.on,
		           op->u.join.kernel, &op->type, op->u.join.ngroup, op->u.join.group);
		if (c->ok && op->u.join.mask.on)
			check_mask(c, &op->u.join.mask, &p->ops.v[in[2]].type, a, b, &op->u.join.on, &op->type);
		break;
	case IA_CONV:
		check_conv(c, a, b, &op->u.join.on, op->u.join.kernel, &op->type, op->u.join.ngroup, op->u.join.group, true);
		break;
	case IA_TWOPHASE: {
		const TpSched *ts = op->u.join.sched;
		if (op->u.join.ngroup < 0 || op->u.join.mask.on)
			fail(c, "a two-phase schedule without its aggregation, or sampled");
		else
			check_join(c, a, b, &op->u.join.on,
			           op->u.join.kernel, &op->type, op->u.join.ngroup, op->u.join.group);
		RelType jt = ia_join_type(a, b, &op->u.join.on);
		if (c->ok && (!ts || !ts->site || ts->njoin != rel_ntuples(&jt) || ts->nagg != rel_ntuples(&op->type)))
			fail(c, "a two-phase schedule that does not fit its join's key space");
		for (int64_t j = 0; c->ok && j < ts->njoin; j++)
			if (ts->site[j] < 0 || ts->site[j] >= ts->nranks)
				fail(c, "join group %" PRId64 " on rank %d of %d", j, ts->site[j], ts->nranks);
		break;
	}
	case IA_AGG:
		check_agg(c, a, op->u.agg.ngroup, op->u.agg.group, &op->type);
		break;
	case IA_MAP:
		if (op->u.map.kernel)
			check_map(c, a, op->u.map.kernel, &op->type);
		else
			check_rekey(c, a, op->u.map.nkey, op->u.map.keymap, &op->type);
		break;
	case IA_INIT:
	case IA_LOAD:
		check_param(c, p->tra, op->u.init.tensor, &op->type);
		break;
	case IA_RANGE:
		check_range(c, &op->type);
		if (op->place.kind == PL_PARTIAL)
			fail(c, "a range as partials");
		break;
	case IA_GATHER:
	case IA_LOOKUP:
		check_gather(c, a, b, op->u.gather.dim, &op->type);
		break;
	case IA_SCATTER:
		check_gather(c, &op->type, b, op->u.gather.dim, a);
		check_scale(c, op->u.gather.scale);
		if (op->u.gather.base >= 0)
			check_scatter_base(c, &p->ops.v[op->u.gather.base].type, &op->type);
		break;
	case IA_COUNTER:
		check_counter(c, op->u.counter.depth, &op->type);
		break;
	case IA_SLICE:
		check_slice(c, a, b, op->u.slice.dim, op->u.slice.stride, op->u.slice.scatter, &op->type);
		break;
	case IA_HALO:
		check_halo(c, a, &op->type);
		break;
	case IA_STORE:
		check_param(c, p->tra, op->u.store.tensor, a);
		break;
	case IA_PRINT:
	case IA_LOOP:
	case IA_ENDLOOP:
		break;
	}
	if (!c->ok)
		return;
	Place want;
	Buf why = {0};
	if (!ia_derive_place(p, op, &want, &why))
		fail(c, "%s: %s", ia_op_name(op->kind), why.s);
	else if (ia_has_result(op->kind) && !place_eq(&want, &op->place))
		fail(c, "placement is not the one its inputs give");
	buf_free(&why);
}

bool tra_verify(const TraProg *p, Buf *err)
{
	Ctx c = ctx_new(err, "TRA", p->ops.n, p->tensors.n);
	for (int i = 0; c.ok && i < p->ops.n; i++)
		check_tra_op(&c, p, i);
	return ctx_end(&c);
}

bool ia_verify(const IaPlan *p, Buf *err)
{
	Ctx c = ctx_new(err, "IA", p->ops.n, p->tra->tensors.n);
	for (int i = 0; c.ok && i < p->ops.n; i++)
		check_ia_op(&c, p, i);
	return ctx_end(&c);
}
