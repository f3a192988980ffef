/*
 * sparse.c: which relations are stored sparse, and which may have holes.
 *
 * Sparsity is storage, never meaning: an element a sparse relation does not
 * store is zero, and so is every element of a tuple it does not hold (a
 * hole).  So every pass before this one, and the interpreter the rules are
 * tested on, see dense tensors; this pass only marks types, in program
 * order, from the inputs declared sparse:
 *
 *   sparse  chunks are compressed rows (the runtime's TrtView), and blocks
 *           with nothing stored are absent.  An input declared sparse is; a
 *           map or join is when its kernel is zero wherever a sparse input
 *           is (kx_zero_with: a product with it, f(0) = 0 of it) and its
 *           output's chunk labels are that input's, in its order: then the
 *           kernel writes exactly that input's stored positions (the
 *           *pattern* input).  A rekey or filter keeps its input's chunks.
 *   holes   tuples may be absent (zero blocks), but chunks are dense: the
 *           result of a kernel zero wherever an input with holes is (a
 *           sparse-dense product's), an aggregation of such tuples.
 *
 * Whoever reads a relation with holes through a kernel that is not zero
 * where it is (exp(A), A + B) needs the missing tuples: codegen completes
 * the relation first (trt_complete).  A param's value never has holes.
 *
 * The density of a sparse result is its pattern input's; an input's is
 * the planning estimate (sparse_density below, or --nnz), since the real
 * count is known only when the program runs.
 *
 * Sampling (SDDMM): a join whose result keeps a sparse input's pattern P
 * (O[i,j] * X[i,j]) needs X only at P's stored positions.  When X is
 * read by that join alone, it is computed only there: X becomes a sampled
 * join, P its mask (JoinMask, a third input), and so, down through X's
 * inputs read by it alone, does each elementwise join (U V - R) and each
 * contraction (sum_k U[i,k] V[j,k], the mask on its join, the aggregation
 * then sparse too).  The dense product is never formed; the kernels loop
 * over the mask's stored elements (codegen), and costs count nnz * K.
 * Only the search (-O2) places a mask (impls.c); -O0 and -O1 keep the
 * dense product.
 */
#include <stdlib.h>
#include <string.h>

#include "opt.h"

/* A sparse input's stored fraction, as planned: graphs and ratings average
 * a few dozen elements per row, so 16 per row of the longest dim. */
static double sparse_density(const Tensor *t)
{
	if (t->density > 0)
		return t->density;
	double all = 1, longest = 1;
	for (int d = 0; d < t->rank; d++) {
		all *= (double)t->shape[d];
		if ((double)t->shape[d] > longest)
			longest = (double)t->shape[d];
	}
	double f = all > 0 ? 16 * longest / all : 1;
	return f < 1 ? f : 1;
}

/* sliced: whether a scatter (a window's adjoint) reads op (its input must
 * be stored dense: a scatter puts dense chunks back, and may read a hole
 * as zero, not a sparse chunk). */
static void mark(TraProg *p, TraOp *op, bool sliced)
{
	RelType *t = &op->type;
	int in[MAXIN];
	int n = tra_inputs(op, in);
	const RelType *it[MAXIN] = {NULL, NULL, NULL};
	bool holes = false;
	for (int i = 0; i < n; i++) {
		it[i] = &p->ops.v[in[i]].type;
		holes |= it[i]->holes;
	}
	t->sparse = t->holes = false;
	t->density = 1;

	switch (op->kind) {
	case TRA_INPUT: {
		const Tensor *x = &p->tensors.v[op->u.input.tensor];
		if (x->sparse) {
			t->sparse = t->holes = true;
			t->density = (float)sparse_density(x);
		}
		return;
	}
	case TRA_JOIN:
		if (op->u.join.mask.on) {
			t->sparse = t->holes = true;
			t->density = p->ops.v[op->u.join.mask.rel].type.density;
			return;
		}
		/* fall through */
	case TRA_MAP: {
		const Kernel *k = op->kind == TRA_MAP ? op->u.map.kernel : op->u.join.kernel;
		int pat = sliced ? -1 : kernel_sparse_pattern(k, it);
		if (pat >= 0) {
			t->sparse = t->holes = true;
			t->density = it[pat]->density;
			return;
		}
		/* holes in the result where a hole in an input zeroes it */
		for (int i = 0; i < n; i++)
			if (it[i]->holes && kernel_hole_ok(k, i))
				t->holes = true;
		return;
	}
	case TRA_SLICE:
		/* a window of a sparse relation (A[b*B + n, j]) is cut from its
		 * compressed rows: sparse, of its density; a scatter puts dense
		 * chunks back (codegen densifies a sparse input) */
		if (op->u.slice.scatter || !it[0]->sparse)
			return;
		/* fall through */
	case TRA_REKEY:
	case TRA_FILTER:
	case TRA_OUTPUT:
	case TRA_PRINT:
		t->sparse = it[0]->sparse;
		t->holes = it[0]->holes;
		t->density = it[0]->density;
		return;
	case TRA_AGG:
		t->holes = holes;
		if (it[0]->sparse && p->ops.v[in[0]].kind == TRA_JOIN && p->ops.v[in[0]].u.join.mask.on) {
			/* the sums of a sampled contraction: its mask's pattern */
			t->sparse = true;
			t->density = it[0]->density;
		}
		return;
	case TRA_GATHER:        /* reads its table whole (codegen completes it, or makes a sparse one dense) */
	case TRA_SCATTER:       /* every row of the result, zero (or the base's, dense) where nothing adds */
	case TRA_STORE:         /* a param's value is dense and whole: codegen fills it */
	case TRA_INIT:
	case TRA_RANGE:
	case TRA_COUNTER:
	case TRA_CONV:          /* dense: sema keeps sparse inputs out of windows */
	case TRA_LOAD:
	case TRA_LOOP:
	case TRA_ENDLOOP:
	case TRA_GRAD:
		return;
	}
}

/* ---- sampling ---- */

/* Does op x, keyed like mask m through mk (mask dim d is x's dim mk[d]),
 * have the mask's chunks: every dim, the chunk dims in the mask's order? */
static bool like_mask(const RelType *x, const RelType *m, const int *mk)
{
	if (x->nkey != m->nkey || x->nchunk != m->nchunk)
		return false;
	bool seen[MAXDIM] = {0};
	for (int d = 0; d < m->nkey; d++) {
		if (mk[d] < 0 || mk[d] >= x->nkey || seen[mk[d]])
			return false;
		seen[mk[d]] = true;
	}
	for (int c = 0; c < m->nchunk; c++)
		if (x->chunkdim[c] != mk[m->chunkdim[c]])
			return false;
	return true;
}

/* Join j's input side (0 left, 1 right) keyed through j's output: side
 * dim e is j's output dim map[e]. */
static void side_dims(const TraProg *p, const TraOp *j, int side, int *map)
{
	int nl = p->ops.v[j->u.join.left].type.nkey;
	int r = side ? j->u.join.right : j->u.join.left;
	for (int e = 0; e < p->ops.v[r].type.nkey; e++)
		map[e] = side ? ia_join_out_dim(nl, &j->u.join.on, e) : e;
}

/* x's dims for mask dims given as dims of the op above (up[d]), where
 * x's dim e is that op's dim map[e]; false when one is not x's. */
static bool down_dims(const int *up, int nkey, const int *map, int nmap, int *mk)
{
	for (int d = 0; d < nkey; d++) {
		mk[d] = -1;
		for (int e = 0; e < nmap; e++)
			if (map[e] == up[d])
				mk[d] = e;
		if (mk[d] < 0)
			return false;
	}
	return true;
}

static void sample(TraProg *p, int x, int mask, const int *mk, const int *nread);

/* Join j (x itself, or a contraction's) sampled at the mask, key[d] its
 * output dim for mask dim d; its inputs read by it alone next. */
static void sample_join(TraProg *p, int j, int mask, const int *key, const int *nread)
{
	TraOp *op = &p->ops.v[j];
	const RelType *mt = &p->ops.v[mask].type;
	op->u.join.mask = (JoinMask){.on = true, .rel = mask, .nkey = mt->nkey};
	memcpy(op->u.join.mask.key, key, sizeof *key * (size_t)mt->nkey);
	if (op->u.join.kernel->reduces)
		return;         /* a contraction's inputs are not sampled */
	for (int side = 0; side < 2; side++) {
		int in = side ? op->u.join.right : op->u.join.left, map[MAXDIM], mk[MAXDIM];
		side_dims(p, op, side, map);
		if (down_dims(key, mt->nkey, map, p->ops.v[in].type.nkey, mk))
			sample(p, in, mask, mk, nread);
	}
}

/* Op x, read only where the mask stores elements, computed only there when
 * it is an elementwise join or a contraction read by nothing else. */
static void sample(TraProg *p, int x, int mask, const int *mk, const int *nread)
{
	TraOp *op = &p->ops.v[x];
	const RelType *mt = &p->ops.v[mask].type;
	if (nread[x] != 1 || x <= mask || op->type.sparse || !like_mask(&op->type, mt, mk))
		return;
	if (op->kind == TRA_JOIN && !op->u.join.mask.on && !op->u.join.kernel->reduces) {
		sample_join(p, x, mask, mk, nread);
		return;
	}
	if (op->kind != TRA_AGG)
		return;
	int c = op->u.agg.in;
	const TraOp *cj = &p->ops.v[c];
	if (cj->kind != TRA_JOIN || cj->u.join.mask.on || nread[c] != 1)
		return;
	int key[MAXDIM];
	for (int d = 0; d < mt->nkey; d++)
		key[d] = op->u.agg.group[mk[d]];
	/* the join's chunks are the sums', in the mask's order */
	if (cj->type.nchunk != mt->nchunk)
		return;
	for (int ch = 0; ch < mt->nchunk; ch++)
		if (cj->type.chunkdim[ch] != key[mt->chunkdim[ch]])
			return;
	sample_join(p, c, mask, key, nread);
}

/* Each join keeping a sparse input's pattern samples its other input. */
static bool sample_all(TraProg *p)
{
	int n = p->ops.n;
	int *nread = xcalloc(n + 1, sizeof *nread);
	bool any = false;
	for (int i = 0; i < n; i++) {
		int in[MAXIN];
		int k = tra_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			nread[in[j]]++;
	}
	for (int i = n - 1; i >= 0; i--) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind != TRA_JOIN || !op->type.sparse || op->u.join.mask.on)
			continue;
		const RelType *it[2] = {&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type};
		int pat = kernel_sparse_pattern(op->u.join.kernel, it);
		if (pat < 0)
			continue;
		int mask = pat ? op->u.join.right : op->u.join.left, x = pat ? op->u.join.left : op->u.join.right;
		int mmap[MAXDIM], xmap[MAXDIM], mk[MAXDIM];
		side_dims(p, op, pat, mmap);
		side_dims(p, op, !pat, xmap);
		if (!down_dims(mmap, it[pat]->nkey, xmap, it[!pat]->nkey, mk))
			continue;
		sample(p, x, mask, mk, nread);
		any |= p->ops.v[x].kind == TRA_JOIN ? p->ops.v[x].u.join.mask.on
		     : p->ops.v[x].kind == TRA_AGG && p->ops.v[p->ops.v[x].u.agg.in].u.join.mask.on;
	}
	free(nread);
	return any;
}

void opt_sparsity(TraProg *p, const OptOptions *o)
{
	for (int i = 0; i < o->nnnzpins; i++) {
		Tensor *t = &p->tensors.v[o->nnzpins[i].tensor];
		double all = 1;
		for (int d = 0; d < t->rank; d++)
			all *= (double)t->shape[d];
		t->density = all > 0 ? o->nnzpins[i].count / all : 1;
		if (t->density <= 0)
			t->density = 1e-30;     /* 0 stands for "not given" */
	}
	bool *sliced = xcalloc(p->ops.n + 1, sizeof *sliced);
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].kind == TRA_SLICE && p->ops.v[i].u.slice.scatter)
			sliced[p->ops.v[i].u.slice.in] = true;
	for (int i = 0; i < p->ops.n; i++)
		mark(p, &p->ops.v[i], sliced[i]);
	if (o->level >= 2 && sample_all(p))
		for (int i = 0; i < p->ops.n; i++)
			mark(p, &p->ops.v[i], sliced[i]);
	free(sliced);
}
