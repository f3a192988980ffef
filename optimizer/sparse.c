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
 */
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

static void mark(TraProg *p, TraOp *op)
{
	RelType *t = &op->type;
	int in[2];
	int n = tra_inputs(op, in);
	const RelType *it[2] = {NULL, NULL};
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
	case TRA_MAP:
	case TRA_JOIN: {
		const Kernel *k = op->kind == TRA_MAP ? op->u.map.kernel : op->u.join.kernel;
		int pat = kernel_sparse_pattern(k, it);
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
		return;
	case TRA_GATHER:        /* reads its table whole (codegen completes it) */
	case TRA_SCATTER:       /* every row of the result, zero where nothing adds */
	case TRA_STORE:         /* a param's value is dense and whole: codegen fills it */
	case TRA_INIT:
	case TRA_RANGE:
	case TRA_COUNTER:
	case TRA_SLICE:         /* cut into dense chunks (codegen densifies a sparse input) */
	case TRA_CONV:          /* dense: sema keeps sparse inputs out of windows */
	case TRA_LOAD:
	case TRA_LOOP:
	case TRA_ENDLOOP:
	case TRA_GRAD:
		return;
	}
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
	for (int i = 0; i < p->ops.n; i++)
		mark(p, &p->ops.v[i]);
}
