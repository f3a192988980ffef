/*
 * autodiff.c: relational reverse-mode autodiff (relational-autodiff paper,
 * digest sections 3-6).
 *
 * Sema leaves a grad op where the program says dW = grad(loss, W).  This
 * pass rebuilds the program, replacing each grad op by TRA that computes the
 * gradient, so the backward pass is planned like any other code.
 *
 * The forward ops are read as *units*, the computations the relation-Jacobian
 * product rules apply to whole:
 *
 *   einsum   a join or map, with its aggregation when its kernel reduces:
 *            out[O] = red over the other vars of f(in0[I0], in1[I1])
 *   diag     filter + diagonal map + aggregation (a repeated index)
 *   rekey    a permutation of keys
 *   conv     a convolution (TRA_CONV) with its sum: both adjoints are
 *            convolutions again (vjp_conv), never im2col
 *   gather   a look-up by an integer index's values: its adjoint is a
 *            scatter-add of G into the rows read (TRA_SCATTER), touching
 *            only those; nothing flows into the index
 *   leaf     the load of a param, or an input: where gradients are collected
 *
 * For an einsum unit with adjoint G, the contribution to input i is
 *
 *   sum over the vars not in I_i of  G[O] * (d f / d in_i)(in0, in1)
 *
 * built with the TRA builder, so it is again joins on shared vars with
 * in-kernel reductions and aggregations: the paper's join rule with its
 * optimisations falling out (for a product kernel, d f / d in0 = in1, so the
 * rebuilt forward join disappears and the contribution is one contraction of
 * G with the other input, a gemm; the aggregation's own RJP, a broadcast, is
 * never materialised; an aggregation over no var is not made).  A max or min
 * routes G to the first element equal to the result (first_extreme).  Contributions to one op add
 * up (the total derivative), in reverse program order.
 *
 * Adjoints are cached per loss, so dW = grad(loss, W); db = grad(loss, b);
 * share the backward computation they have in common.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

typedef enum { D_NONE, D_EINSUM, D_DIAG, D_REKEY, D_GATHER, D_SLICE, D_CONV, D_LEAF } DiffKind;

typedef struct DiffUnit {
	DiffKind kind;
	int prod;               /* einsum: the join or map; diag: the map */
	int agg;                /* einsum, diag: the aggregation, or -1 */
	int filter;             /* diag: the filter */
	int nin, in[MAXIN];     /* the unit's input ops */
} DiffUnit;

typedef Vec(int) IntVec;

typedef struct Grad {
	const TraProg *old;     /* the program before this pass */
	TraProg *p;             /* the program being rebuilt (shares tensors and stmts) */
	int *map;               /* old op -> new op */
	DiffUnit *unit;             /* per old op: the unit whose output it is */
	/* the cache for one loss */
	int loss;
	int *adj;               /* per old op: its finished adjoint (new op, the op's key order), or -1 */
	IntVec *contrib;        /* per old op: contributions not yet summed (new ops) */
	bool (*prop)[2];        /* per old op: contribution to input slot made */
	bool (*still)[2];       /* per old op: input slot whose contributions cancel (lse_shift) */
} Grad;

/* ---- units ---- */

/* Aggregation i's unit, by what it sums: a diagonal (a map of a filter),
 * a convolution, or an einsum (a join or map whose kernel reduces). */
static void agg_unit(const TraProg *o, int i, DiffUnit *u)
{
	const TraOp *op = &o->ops.v[i], *in = &o->ops.v[op->u.agg.in];
	u->agg = i;
	switch (in->kind) {
	case TRA_MAP:
		if (o->ops.v[in->u.map.in].kind == TRA_FILTER) {
			u->kind = D_DIAG;
			u->prod = op->u.agg.in;
			u->filter = in->u.map.in;
		} else if (in->u.map.kernel->reduces) {
			u->kind = D_EINSUM;
			u->prod = op->u.agg.in;
		}
		return;
	case TRA_CONV:
		u->kind = D_CONV;
		u->prod = op->u.agg.in;
		return;
	case TRA_JOIN:
		if (in->u.join.kernel->reduces) {
			u->kind = D_EINSUM;
			u->prod = op->u.agg.in;
		}
		return;
	case TRA_INPUT: case TRA_AGG: case TRA_REKEY: case TRA_FILTER: case TRA_OUTPUT: case TRA_INIT:
	case TRA_LOAD: case TRA_RANGE: case TRA_COUNTER: case TRA_SLICE: case TRA_STORE: case TRA_PRINT:
	case TRA_LOOP: case TRA_ENDLOOP: case TRA_GATHER: case TRA_SCATTER: case TRA_GRAD:
		return;         /* a plain sum */
	}
}

/* Ops that are no unit but a part of one: a join, map or convolution
 * whose sum is the unit, a diagonal's filter. */
static bool inside_unit(TraOpKind k)
{
	switch (k) {
	case TRA_JOIN: case TRA_MAP: case TRA_FILTER: case TRA_CONV:
		return true;
	case TRA_INPUT: case TRA_AGG: case TRA_REKEY: case TRA_OUTPUT: case TRA_INIT: case TRA_LOAD:
	case TRA_RANGE: case TRA_COUNTER: case TRA_SLICE: case TRA_STORE: case TRA_PRINT: case TRA_LOOP:
	case TRA_ENDLOOP: case TRA_GATHER: case TRA_SCATTER: case TRA_GRAD:
		return false;
	}
	return false;
}

static void find_units(Grad *g)
{
	const TraProg *o = g->old;
	for (int i = 0; i < o->ops.n; i++) {
		const TraOp *op = &o->ops.v[i];
		DiffUnit *u = &g->unit[i];
		*u = (DiffUnit){.kind = D_NONE, .prod = -1, .agg = -1, .filter = -1};
		switch (op->kind) {
		case TRA_INPUT:
		case TRA_LOAD:
			u->kind = D_LEAF;
			break;
		case TRA_JOIN:
			if (!op->u.join.kernel->reduces) {
				u->kind = D_EINSUM;
				u->prod = i;
			}
			break;
		case TRA_MAP:
			if (!op->u.map.kernel->reduces && o->ops.v[op->u.map.in].kind != TRA_FILTER) {
				u->kind = D_EINSUM;
				u->prod = i;
			}
			break;
		case TRA_AGG:
			agg_unit(o, i, u);
			break;
		case TRA_REKEY:
			u->kind = D_REKEY;
			u->prod = i;
			break;
		case TRA_GATHER:
			u->kind = D_GATHER;
			u->prod = i;
			break;
		case TRA_SLICE:         /* the offset is an integer: no gradient */
			u->kind = D_SLICE;
			u->prod = i;
			u->nin = 1;
			u->in[0] = op->u.slice.in;
			break;
		case TRA_CONV:          /* inside its aggregation's unit */
		case TRA_FILTER:
		case TRA_OUTPUT:
		case TRA_INIT:
		case TRA_RANGE:
		case TRA_COUNTER:
		case TRA_STORE:
		case TRA_PRINT:
		case TRA_LOOP:
		case TRA_ENDLOOP:
		case TRA_SCATTER:
		case TRA_GRAD:
			break;
		}
		if (u->kind == D_EINSUM || u->kind == D_REKEY || u->kind == D_GATHER || u->kind == D_CONV)
			u->nin = tra_inputs(&o->ops.v[u->prod], u->in);
		else if (u->kind == D_DIAG)
			u->nin = tra_inputs(&o->ops.v[u->filter], u->in);
	}
}

/* ---- a log-sum-exp's shift ---- */

static bool is_in(const KExpr *e, int i)
{
	return e->kind == KX_IN && e->in == i;
}

static bool same_labels(int n, const int *a, int m, const int *b)
{
	return n == m && !memcmp(a, b, sizeof *a * (size_t)n);
}

/* Op m is max over some dims of z (a map of in0 reducing max within the
 * chunk, then an aggregation over the keys), and op s the sum over the
 * same dims of exp(z - m): their join L = m + log(s) does not depend on m
 * (d/dm = 1 - sum(exp(z - m)) / s = 0), as every stabilised log-sum-exp
 * and softmax cross-entropy is written.  Its two paths to m are then not
 * differentiated (JAX's and PyTorch's logsumexp treat the max so), which
 * leaves out the max's backward (the elements equal to it, their first,
 * a mask) and the sum's second adjoint: six or seven passes over z. */
static bool lse_pair(const Grad *g, int m, int s, const int *uses)
{
	const TraProg *o = g->old;
	const DiffUnit *um = &g->unit[m], *us = &g->unit[s];
	if (um->kind != D_EINSUM || um->agg != m || us->kind != D_EINSUM || us->agg != s || uses[s] != 1)
		return false;
	const TraOp *M = &o->ops.v[m], *S = &o->ops.v[s], *PM = &o->ops.v[um->prod], *PS = &o->ops.v[us->prod];
	if (M->u.agg.agg != AGG_MAX || S->u.agg.agg != AGG_ADD || PM->kind != TRA_MAP || PS->kind != TRA_JOIN)
		return false;
	const Kernel *km = PM->u.map.kernel, *ks = PS->u.join.kernel;
	if (!km->reduces || km->red != AGG_MAX || !is_in(km->expr, 0) || !ks->reduces || ks->red != AGG_ADD)
		return false;
	const KExpr *e = ks->expr;      /* exp(in0 - in1): in0 = z, in1 = m */
	if (!(e->kind == KX_OP && e->op == KOP_EXP && e->arg[0]->kind == KX_OP && e->arg[0]->op == KOP_SUB &&
	      is_in(e->arg[0]->arg[0], 0) && is_in(e->arg[0]->arg[1], 1)))
		return false;
	int z = PM->u.map.in;
	if (PS->u.join.left != z || PS->u.join.right != m)
		return false;
	/* m's key dim j is z's dim group[j], the one s's join matches it with
	 * and s keeps as its j-th; the chunks reduced alike */
	const JoinSpec *on = &PS->u.join.on;
	if (on->nmatch != M->type.nkey || S->u.agg.ngroup != M->u.agg.ngroup)
		return false;
	for (int j = 0; j < M->u.agg.ngroup; j++)
		if (S->u.agg.group[j] != M->u.agg.group[j])
			return false;
	for (int k = 0; k < on->nmatch; k++)
		if (on->lkey[k] != M->u.agg.group[on->rkey[k]])
			return false;
	return same_labels(km->nindim[0], km->inlab[0], ks->nindim[0], ks->inlab[0]) &&
	       same_labels(km->noutdim, km->outlab, ks->nindim[1], ks->inlab[1]) &&
	       same_labels(km->noutdim, km->outlab, ks->noutdim, ks->outlab);
}

/* Marks the slots of m in L = m + log(s) and in s = sum(exp(z - m)). */
static void lse_shift(Grad *g)
{
	const TraProg *o = g->old;
	int n = o->ops.n;
	int *uses = tra_nreaders(o);
	for (int i = 0; i < n; i++) {
		const TraOp *L = &o->ops.v[i];
		if (L->kind != TRA_JOIN || L->u.join.kernel->reduces || g->unit[i].kind != D_EINSUM)
			continue;
		const Kernel *k = L->u.join.kernel;
		const KExpr *e = k->expr;
		if (e->kind != KX_OP || e->op != KOP_ADD)
			continue;
		int x = -1;             /* the slot of m: the other is log(s) */
		for (int a = 0; a < 2; a++) {
			const KExpr *l = e->arg[1 - a];
			if (e->arg[a]->kind == KX_IN && l->kind == KX_OP && l->op == KOP_LOG && is_in(l->arg[0], 1 - e->arg[a]->in))
				x = e->arg[a]->in;
		}
		if (x < 0)
			continue;
		int in[2] = {L->u.join.left, L->u.join.right};
		const RelType *tm = &o->ops.v[in[x]].type;
		/* elementwise: every key matched to the same dim, the labels alike */
		bool elementwise = L->u.join.on.nmatch == tm->nkey && o->ops.v[in[1 - x]].type.nkey == tm->nkey &&
		                   same_labels(k->nindim[0], k->inlab[0], k->nindim[1], k->inlab[1]) &&
		                   same_labels(k->nindim[0], k->inlab[0], k->noutdim, k->outlab);
		for (int j = 0; j < L->u.join.on.nmatch; j++)
			elementwise &= L->u.join.on.lkey[j] == j && L->u.join.on.rkey[j] == j;
		if (!elementwise || !lse_pair(g, in[x], in[1 - x], uses))
			continue;
		g->still[i][x] = true;
		g->still[in[1 - x]][1] = true;
	}
	free(uses);
}

/* ---- adjoints ---- */

static TVal rel_with_new_vars(TraBuild *b, int op, const RelType *t, int *var)
{
	for (int d = 0; d < t->nkey; d++)
		var[d] = tb_var(b, t->extent[d]);
	return tb_rel(b, op, t->nkey, var);
}

/* The summed contributions to old op v, finished in v's key order. */
static int adjoint(Grad *g, TraBuild *b, int v)
{
	if (g->adj[v] >= 0)
		return g->adj[v];
	IntVec *c = &g->contrib[v];
	if (c->n == 0)
		return -1;
	const RelType *t = &g->old->ops.v[v].type;
	int var[MAXDIM];
	TVal acc = rel_with_new_vars(b, c->v[0], t, var);
	for (int i = 1; i < c->n; i++)
		acc = tb_binary(b, KOP_ADD, acc, tb_rel(b, c->v[i], t->nkey, var));
	g->adj[v] = c->n == 1 ? c->v[0] : tb_finish(b, acc, t->nkey, var);
	return g->adj[v];
}

/* Add a contribution (vars `var` in the order of op v's key dims) to v. */
static void contribute(Grad *g, TraBuild *b, int v, TVal t, const int *var)
{
	const RelType *vt = &g->old->ops.v[v].type;
	if (g->p->ops.v[t.op].type.dtype != vt->dtype)
		t = tb_convert(b, t, vt->dtype);      /* through a conversion: back to v's type */
	vec_push(&g->contrib[v], tb_finish(b, t, vt->nkey, var));
}

/* x in element type dt: a conversion's unit (f32(T[i]) of an f64 T, exp
 * and the rest absorbed into the conversion's map) computes in its output's
 * type, and so must the values its derivative reads */
static TVal as_type(TraBuild *b, TVal x, DType dt)
{
	if (b->prog->ops.v[x.op].type.dtype == dt)
		return x;
	x = tb_convert(b, x, dt);
	x.fresh = false;        /* a conversion's own map: nothing to absorb into it */
	return x;
}

/* t summed over its vars outside want[0..n), then spread over the vars of
 * want it lacks by a join with x, the relation that has them all (its keys
 * only are read). */
static TVal fit(TraBuild *b, TVal t, TVal x, int n, const int *want)
{
	int extra[2 * MAXDIM], ne = 0;
	for (int i = 0; i < t.nvar; i++) {
		bool in = false;
		for (int j = 0; j < n; j++)
			in |= t.var[i] == want[j];
		if (!in)
			extra[ne++] = t.var[i];
	}
	if (ne)
		t = tb_reduce(b, t, TB_SUM, ne, extra);
	bool all = true;
	for (int j = 0; j < n; j++) {
		bool in = false;
		for (int i = 0; i < t.nvar; i++)
			in |= t.var[i] == want[j];
		all &= in;
	}
	if (all)
		return t;
	/* x's keys only are read, but a join's inputs share an element type:
	 * t goes to x's now, the input's, which contribute would give it */
	t = as_type(b, t, b->prog->ops.v[x.op].type.dtype);
	return tb_join_expr(b, x, t, kx_in(b->arena, 1));
}

/* A copy of kernel expression e with index labels replaced by vars. */
static KExpr *label_to_var(Arena *a, const KExpr *e, const int *labvar)
{
	KExpr *repl[2] = {kx_in(a, 0), kx_in(a, 1)};
	KExpr *c = kx_subst(a, e, repl);
	Vec(KExpr *) stack = {0};
	vec_push(&stack, c);
	while (stack.n) {
		KExpr *x = stack.v[--stack.n];
		if (x->kind == KX_IDX)
			x->in = labvar[x->in];
		else if (x->kind == KX_OP)
			for (int i = 0; i < kop_arity(x->op); i++)
				vec_push(&stack, x->arg[i]);
	}
	vec_free(&stack);
	return c;
}

/* e with input `from` read as in0 (for a derivative that needs one input). */
static KExpr *as_in0(Arena *a, const KExpr *e, int from)
{
	KExpr *repl[2] = {kx_in(a, 0), kx_in(a, 0)};
	repl[1 - from] = kx_in(a, 1);   /* not used */
	return kx_subst(a, e, repl);
}

/* An einsum unit's contributions to its inputs. */
/*
 * Where a max or min's G goes: to the first of the elements equal to the
 * result, in the order of the reduced vars (row-major over them), as
 * PyTorch's max pooling and max(dim) do; so ties (a window of zeros after
 * a relu) take G once, not once each.  cand = the position where F equals
 * the result, else inf; the mask is cand == min(cand), where that is finite
 * (a NaN result, equal to nothing, sends nothing).
 */
static TVal first_extreme(TraBuild *b, TVal F, TVal out, int np, const int *pvar, int no, const int *ovar)
{
	Arena *a = b->arena;
	int red[2 * MAXDIM], nred = 0;
	for (int i = 0; i < np; i++) {
		bool kept = false;
		for (int j = 0; j < no; j++)
			kept |= ovar[j] == pvar[i];
		if (!kept)
			red[nred++] = pvar[i];
	}
	if (nred == 0)
		return tb_binary(b, KOP_EQ, F, out);
	KExpr *pos = NULL;
	for (int i = 0; i < nred; i++) {
		KExpr *x = kx_idx(a, red[i]);
		pos = pos ? kx_op(a, KOP_ADD, kx_op(a, KOP_MUL, pos, kx_const(a, (double)b->extent.v[red[i]]), NULL), x,
		                  NULL)
		          : x;
	}
	KExpr *at = kx_op(a, KOP_WHERE, kx_op(a, KOP_EQ, kx_in(a, 0), kx_in(a, 1), NULL), pos,
	                  kx_const(a, INFINITY));
	TVal cand = tb_absorb(b, tb_join_expr(b, F, out, at));
	cand.fresh = false;     /* read twice: its min, and the comparison */
	TVal first = tb_reduce(b, cand, TB_MIN, nred, red);
	KExpr *hit = kx_op(a, KOP_MUL, kx_op(a, KOP_EQ, kx_in(a, 0), kx_in(a, 1), NULL),
	                   kx_op(a, KOP_LT, kx_in(a, 1), kx_const(a, INFINITY), NULL), NULL);
	return tb_join_expr(b, cand, first, hit);
}

/*
 * f's derivative read from f's own value (in0 standing for it), when f is
 * one of these functions applied to input 0 alone: relu (x > 0 exactly
 * where relu(x) > 0), exp, tanh, sigmoid, sqrt, each written as kx_diff
 * writes it, so the values are the same bit for bit.  The backward then
 * reads the map's output, not its input, and evaluates no transcendental
 * again: a ReLU's input dies after the ReLU (GCN's AX W1, 21.7 MB a rank),
 * a sigmoid's or tanh's backward is a multiply.  NULL otherwise.
 */
static KExpr *diff_by_value(Arena *a, const KExpr *f)
{
	if (f->kind != KX_OP || kop_arity(f->op) != 1 || f->arg[0]->kind != KX_IN || f->arg[0]->in != 0)
		return NULL;
	KExpr *v = kx_in(a, 0), *one = kx_const(a, 1);
	switch (f->op) {
	case KOP_RELU:
		return kx_op(a, KOP_WHERE, kx_op(a, KOP_GT, v, kx_const(a, 0), NULL), one, kx_const(a, 0));
	case KOP_EXP:
		return v;
	case KOP_TANH:
		return kx_op(a, KOP_SUB, one, kx_op(a, KOP_MUL, v, v, NULL), NULL);
	case KOP_SIGMOID:
		return kx_op(a, KOP_MUL, v, kx_op(a, KOP_SUB, one, v, NULL), NULL);
	case KOP_SQRT:
		return kx_op(a, KOP_DIV, one, kx_op(a, KOP_MUL, kx_const(a, 2), v, NULL), NULL);
	default:
		return NULL;
	}
}

/* Is map P elementwise on input type t: its output keyed, chunked and
 * typed as its input, each chunk dim labelled as the input's? */
static bool elementwise(const TraOp *P, const RelType *t)
{
	const Kernel *k = P->u.map.kernel;
	if (P->kind != TRA_MAP || !k || k->reduces || P->type.dtype != t->dtype || P->type.nkey != t->nkey ||
	    P->type.nchunk != t->nchunk || k->noutdim != k->nindim[0])
		return false;
	for (int c = 0; c < t->nchunk; c++)
		if (P->type.chunkdim[c] != t->chunkdim[c] || k->outlab[c] != k->inlab[0][c])
			return false;
	return true;
}

static void vjp_einsum(Grad *g, TraBuild *b, int u, int G)
{
	const DiffUnit *un = &g->unit[u];
	const TraOp *P = &g->old->ops.v[un->prod];
	const Kernel *k = P->kind == TRA_JOIN ? P->u.join.kernel : P->u.map.kernel;
	int nin = un->nin;
	int ivar[2][MAXDIM], pvar[2 * MAXDIM], np = 0, labvar[4 * MAXDIM];
	TVal X[2];

	/* vars: the inputs' key dims, matched join dims shared */
	const RelType *t0 = &g->old->ops.v[un->in[0]].type;
	for (int d = 0; d < t0->nkey; d++)
		ivar[0][d] = pvar[np++] = tb_var(b, t0->extent[d]);
	if (nin == 2) {
		const RelType *t1 = &g->old->ops.v[un->in[1]].type;
		for (int d = 0; d < t1->nkey; d++) {
			ivar[1][d] = -1;
			for (int m = 0; m < P->u.join.on.nmatch; m++)
				if (P->u.join.on.rkey[m] == d)
					ivar[1][d] = ivar[0][P->u.join.on.lkey[m]];
			if (ivar[1][d] < 0)
				ivar[1][d] = pvar[np++] = tb_var(b, t1->extent[d]);
		}
	}
	for (int i = 0; i < nin; i++) {
		const RelType *t = &g->old->ops.v[un->in[i]].type;
		X[i] = tb_rel(b, g->map[un->in[i]], t->nkey, ivar[i]);
		for (int c = 0; c < t->nchunk; c++)
			labvar[k->inlab[i][c]] = ivar[i][t->chunkdim[c]];
	}
	KExpr *f = label_to_var(b->arena, k->expr, labvar);

	/* the unit's output vars, and its adjoint */
	int ovar[MAXDIM], no;
	if (un->agg >= 0) {
		const TraOp *A = &g->old->ops.v[un->agg];
		no = A->u.agg.ngroup;
		for (int j = 0; j < no; j++)
			ovar[j] = pvar[A->u.agg.group[j]];
	} else {
		no = P->type.nkey;
		memcpy(ovar, pvar, no * sizeof *ovar);
	}
	TVal Gv = tb_rel(b, G, no, ovar);

	/* which inputs still need their contribution, and their derivatives */
	KExpr *d[2] = {NULL, NULL};
	bool need = false;
	for (int i = 0; i < nin; i++) {
		int in = un->in[i];
		if (g->prop[u][i] || g->adj[in] == -2 || g->still[u][i])  /* made, or not on a path from a wrt tensor */
			continue;
		g->prop[u][i] = true;
		d[i] = kx_diff(b->arena, f, i);
		if (kx_is_zero(d[i]))
			d[i] = NULL;
		need |= d[i] != NULL;
	}
	if (!need)
		return;

	/* a max or min sends G to the elements equal to the result */
	if (un->agg >= 0 && k->red != AGG_ADD) {
		TVal F = X[0];
		if (nin == 2)
			F = tb_join_expr(b, X[0], X[1], f);
		else if (!(f->kind == KX_IN && f->in == 0))
			F.pend = f;
		if (F.pend || nin == 2) {
			F = tb_absorb(b, F);
			F.fresh = false;
		}
		F = as_type(b, F, P->type.dtype);
		TVal out = tb_rel(b, g->map[un->agg], no, ovar);
		Gv = tb_binary(b, KOP_MUL, first_extreme(b, F, out, np, pvar, no, ovar), Gv);
		/* read by each input's contribution: none may absorb its sums
		 * into it (an input of fewer dims would reshape it for the other) */
		Gv = tb_absorb(b, Gv);
		Gv.fresh = false;
	}

	TVal shared = {.op = -1};       /* G * d when both inputs' derivatives are one expression */
	KExpr *dv;
	for (int i = 0; i < nin; i++) {
		if (!d[i])
			continue;
		bool u0 = kx_uses(d[i], 0), u1 = nin > 1 && kx_uses(d[i], 1);
		TVal T;
		if (i == 1 && shared.op >= 0 && kx_equal(d[0], d[1])) {
			T = shared;     /* relu(x + b): d/dx = d/db; made once */
		} else if (!u0 && !u1) {
			T = tb_binary(b, KOP_MUL, Gv, (TVal){.op = -1, .pend = d[i]});
		} else if (nin == 1 && un->agg < 0 && elementwise(P, &g->old->ops.v[un->in[0]].type) &&
		           (dv = diff_by_value(b->arena, f))) {
			TVal V = tb_rel(b, g->map[un->prod], no, ovar);
			V.pend = dv;
			T = tb_binary(b, KOP_MUL, V, Gv);
		} else if (u0 && u1) {
			T = tb_binary(b, KOP_MUL, tb_join_expr(b, X[0], X[1], d[i]), Gv);
		} else {
			int j = u0 ? 0 : 1;
			TVal D = as_type(b, X[j], P->type.dtype);
			D.pend = as_in0(b->arena, d[i], j);
			T = tb_binary(b, KOP_MUL, D, Gv);
		}
		if (i == 0 && nin == 2 && d[1] && kx_equal(d[0], d[1])) {
			if (T.pend || T.fresh)
				T = tb_absorb(b, T);    /* materialised once, read by both */
			T.fresh = false;
			shared = T;
		}
		const RelType *ti = &g->old->ops.v[un->in[i]].type;
		b->order = ivar[i];     /* reductions produce the input's order directly */
		b->norder = ti->nkey;
		T = fit(b, T, X[i], ti->nkey, ivar[i]);
		b->norder = 0;
		contribute(g, b, un->in[i], T, ivar[i]);
	}
}

/* out[distinct] = A[positions]: G lands on the diagonal of a relation shaped
 * like A, zero elsewhere. */
static void vjp_diag(Grad *g, TraBuild *b, int u, int G)
{
	const DiffUnit *un = &g->unit[u];
	int a = un->in[0];
	if (g->prop[u][0] || g->adj[a] == -2)
		return;
	g->prop[u][0] = true;
	const TraOp *F = &g->old->ops.v[un->filter], *A = &g->old->ops.v[un->agg];
	const RelType *ta = &g->old->ops.v[a].type;
	int avar[MAXDIM], ovar[MAXDIM];
	TVal X = rel_with_new_vars(b, g->map[a], ta, avar);
	for (int j = 0; j < A->u.agg.ngroup; j++)
		ovar[j] = avar[A->u.agg.group[j]];
	TVal Gv = tb_rel(b, G, A->u.agg.ngroup, ovar);
	KExpr *e = kx_in(b->arena, 1);
	for (int q = 0; q < F->u.filter.pred.neq; q++)
		e = kx_op(b->arena, KOP_WHERE,
		          kx_op(b->arena, KOP_EQ, kx_idx(b->arena, avar[F->u.filter.pred.eq[q][0]]),
		                kx_idx(b->arena, avar[F->u.filter.pred.eq[q][1]]), NULL),
		          e, kx_const(b->arena, 0));
	contribute(g, b, a, tb_join_expr(b, X, Gv, e), avar);
}

static void vjp_rekey(Grad *g, TraBuild *b, int u, int G)
{
	const DiffUnit *un = &g->unit[u];
	const TraOp *R = &g->old->ops.v[u];
	int a = un->in[0];
	if (g->prop[u][0] || g->adj[a] == -2)
		return;
	g->prop[u][0] = true;
	const RelType *ta = &g->old->ops.v[a].type;
	int avar[MAXDIM], ovar[MAXDIM];
	TVal X = rel_with_new_vars(b, g->map[a], ta, avar);
	for (int j = 0; j < R->u.rekey.nkey; j++)
		ovar[j] = avar[R->u.rekey.keymap[j]];
	TVal T = fit(b, tb_rel(b, G, R->u.rekey.nkey, ovar), X, ta->nkey, avar);
	contribute(g, b, a, T, avar);
}

/* Z = E[idx[b], d]: dE = scatter(G, idx), the rows of G added into the
 * rows of a relation shaped like E that idx names. */
static void vjp_gather(Grad *g, TraBuild *b, int u, int G)
{
	const DiffUnit *un = &g->unit[u];
	int a = un->in[0];
	if (g->prop[u][0] || g->adj[a] == -2)
		return;
	g->prop[u][0] = true;
	const RelType *ta = &g->old->ops.v[a].type;
	TraOp sc = {.kind = TRA_SCATTER, .stmt = b->stmt, .type = *ta};
	sc.type.sparse = sc.type.holes = false;
	sc.u.gather.src = G;
	sc.u.gather.index = g->map[un->in[1]];
	sc.u.gather.dim = g->old->ops.v[u].u.gather.dim;
	sc.u.gather.tensor = g->old->ops.v[u].u.gather.tensor;
	sc.u.gather.itensor = g->old->ops.v[u].u.gather.itensor;
	sc.u.gather.base = -1;          /* into zeros; optimizer/scatter.c may give it a base */
	sc.u.gather.scale = 1;
	int avar[MAXDIM];
	TVal T = rel_with_new_vars(b, tra_push(g->p, sc), ta, avar);
	contribute(g, b, a, T, avar);
}

/* A window's adjoint is the window the other way: G scattered back to the
 * positions it was gathered from, zero elsewhere (and a scatter's is the
 * gather). */
static void vjp_slice(Grad *g, TraBuild *b, int u, int G)
{
	const TraOp *S = &g->old->ops.v[u];
	int a = g->unit[u].in[0];
	if (g->prop[u][0] || g->adj[a] == -2)
		return;
	g->prop[u][0] = true;
	const RelType *ta = &g->old->ops.v[a].type;
	int d = S->u.slice.dim, avar[MAXDIM];
	TraOp s = {.kind = TRA_SLICE, .stmt = b->stmt, .type = g->p->ops.v[G].type};
	s.type.extent[d] = ta->extent[d];
	s.type.block[d] = ta->block[d];
	s.u.slice.in = G;
	s.u.slice.dim = d;
	s.u.slice.shift = S->u.slice.shift;
	s.u.slice.stride = S->u.slice.stride;
	s.u.slice.scatter = !S->u.slice.scatter;
	s.u.slice.off = S->u.slice.off >= 0 ? g->map[S->u.slice.off] : -1;
	int op = tra_push(g->p, s);
	for (int k = 0; k < ta->nkey; k++)
		avar[k] = tb_var(b, ta->extent[k]);
	contribute(g, b, a, tb_rel(b, op, ta->nkey, avar), avar);
}

/*
 * out[O] = sum W[Iw] X[.., own + coef * lab + shift, ..] (a convolution:
 * own the output's var, lab W's and summed; lowering makes no other).
 * With G the adjoint of out, both contributions are convolutions:
 *
 *   dW = sum G[O] X[.., own + coef * lab + shift, ..]: the same windows,
 *        G in W's place; lab is now the result's var and own summed (the
 *        kernel's gradient, a correlation of X with G);
 *   dX[.., p, ..] = sum G[.., p - coef * lab - shift, ..] W[Iw]: G read
 *        through the flipped windows (own p, coefficient -coef), zero
 *        outside G: the transposed convolution, padded.
 */
static void vjp_conv(Grad *g, TraBuild *b, int u, int G)
{
	const DiffUnit *un = &g->unit[u];
	const TraOp *P = &g->old->ops.v[un->prod], *A = &g->old->ops.v[u];
	const Kernel *k = P->u.join.kernel;
	const RelType *tw = &g->old->ops.v[un->in[0]].type, *tx = &g->old->ops.v[un->in[1]].type;
	int wvar[MAXDIM], xvar[MAXDIM], pvar[MAXDIM], labvar[4 * MAXDIM], ovar[MAXDIM];
	for (int l = 0; l < 4 * MAXDIM; l++)
		labvar[l] = -1;
	for (int d = 0; d < tw->nkey; d++)
		wvar[d] = pvar[d] = tb_var(b, tw->extent[d]);
	for (int c = 0; c < tw->nchunk; c++)
		labvar[k->inlab[0][c]] = wvar[tw->chunkdim[c]];
	int winof[MAXDIM];              /* per key dim of X: its window, or -1 */
	for (int d = 0; d < tx->nkey; d++)
		winof[d] = -1;
	for (int w = 0; w < k->nwin; w++)
		winof[tx->chunkdim[k->win[w].dim]] = w;
	for (int d = 0; d < tx->nkey; d++) {
		xvar[d] = -1;
		for (int m = 0; m < P->u.join.on.nmatch; m++)
			if (P->u.join.on.rkey[m] == d)
				xvar[d] = wvar[P->u.join.on.lkey[m]];
		if (xvar[d] < 0)
			xvar[d] = tb_var(b, tx->extent[d]);
		int o = ia_join_out_dim(tw->nkey, &P->u.join.on, d);
		if (winof[d] < 0) {
			pvar[o] = xvar[d];
			continue;
		}
		/* the window's output var: own's, its extent the output's */
		const typeof(k->win[0]) *w = &k->win[winof[d]];
		int own = k->inlab[1][w->dim];
		if (labvar[own] >= 0 || labvar[w->lab] < 0)
			tr_bug("a convolution whose output var is its weights'");
		pvar[o] = labvar[own] = tb_var(b, P->type.extent[o]);
	}
	for (int c = 0; c < tx->nchunk; c++)
		if (winof[tx->chunkdim[c]] < 0)
			labvar[k->inlab[1][c]] = xvar[tx->chunkdim[c]];
	int no = A->u.agg.ngroup;
	for (int j = 0; j < no; j++)
		ovar[j] = pvar[A->u.agg.group[j]];
	TVal Gv = tb_rel(b, G, no, ovar);
	TVal W = tb_rel(b, g->map[un->in[0]], tw->nkey, wvar);
	TVal X = tb_rel(b, g->map[un->in[1]], tx->nkey, xvar);

	for (int i = 0; i < 2; i++) {
		int in = un->in[i];
		if (g->prop[u][i] || g->adj[in] == -2)
			continue;
		g->prop[u][i] = true;
		TbWin win[MAXDIM];
		int nwin = 0;
		for (int d = 0; d < tx->nkey; d++) {
			if (winof[d] < 0)
				continue;
			const typeof(k->win[0]) *w = &k->win[winof[d]];
			int own = labvar[k->inlab[1][w->dim]], lab = labvar[w->lab];
			if (i == 0) {
				win[nwin++] = (TbWin){.dim = d, .own = own, .lab = lab, .coef = w->coef, .shift = w->shift};
				continue;
			}
			int gd = -1;
			for (int j = 0; j < no; j++)
				if (ovar[j] == own)
					gd = j;
			if (gd < 0)
				tr_bug("a convolution's output summed along a window");
			win[nwin++] = (TbWin){.dim = gd, .own = xvar[d], .lab = lab, .coef = -w->coef, .shift = -w->shift};
		}
		TVal T = i == 0 ? tb_conv(b, Gv, X, nwin, win) : tb_conv(b, W, Gv, nwin, win);
		const RelType *ti = i == 0 ? tw : tx;
		int *iv = i == 0 ? wvar : xvar;
		b->order = iv;
		b->norder = ti->nkey;
		T = fit(b, T, i == 0 ? W : X, ti->nkey, iv);
		b->norder = 0;
		contribute(g, b, in, T, iv);
	}
}

/* ---- one grad op ---- */

static void mark_ancestors(const TraProg *o, int v, bool *anc)
{
	Vec(int) stack = {0};
	vec_push(&stack, v);
	while (stack.n) {
		int x = stack.v[--stack.n];
		if (anc[x])
			continue;
		anc[x] = true;
		int in[MAXIN];
		int n = tra_inputs(&o->ops.v[x], in);
		for (int j = 0; j < n; j++)
			vec_push(&stack, in[j]);
	}
	vec_free(&stack);
}

static void reset_cache(Grad *g, int loss)
{
	int n = g->old->ops.n;
	for (int i = 0; i < n; i++) {
		g->adj[i] = -1;
		vec_free(&g->contrib[i]);
		g->prop[i][0] = g->prop[i][1] = false;
	}
	g->loss = loss;
}

/* The gradient of old op `loss` with respect to tensor `wrt`, emitted for
 * statement `stmt`; returns the new op holding it in the tensor's order. */
static int expand(Grad *g, int loss, int wrt, int stmt, Loc loc)
{
	const TraProg *o = g->old;
	int n = o->ops.n;
	const Tensor *wt = &o->tensors.v[wrt];
	TraBuild b;
	tb_init(&b, g->p, stmt);

	if (g->loss != loss)
		reset_cache(g, loss);

	/* the ops between the loss and the leaves of every tensor some grad of
	 * this loss asks for: the first grad makes all their contributions, so
	 * dW and db share what their backward computations have in common */
	bool *anc = xcalloc(n + 1, sizeof *anc), *rel = xcalloc(n + 1, sizeof *rel);
	bool *target = xcalloc(o->tensors.n + 1, sizeof *target);
	mark_ancestors(o, loss, anc);
	for (int i = 0; i < n; i++)
		if (o->ops.v[i].kind == TRA_GRAD && o->ops.v[i].u.grad.loss == loss)
			target[o->ops.v[i].u.grad.tensor] = true;
	Vec(int) leaves = {0};
	for (int i = 0; i <= loss; i++) {
		const TraOp *op = &o->ops.v[i];
		int t = op->kind == TRA_LOAD ? op->u.init.tensor : op->kind == TRA_INPUT ? op->u.input.tensor : -1;
		if (anc[i] && t >= 0 && target[t]) {
			rel[i] = true;
			if (t == wrt)
				vec_push(&leaves, i);
		}
		int in[MAXIN];
		int k = tra_inputs(op, in);
		for (int j = 0; j < k; j++)
			if (rel[in[j]] && anc[i])
				rel[i] = true;
	}
	free(target);

	int result;
	if (leaves.n == 0) {
		diag(DIAG_WARNING, loc, "the loss does not depend on '%s'; its gradient is zero", wt->name);
		TraOp ld = {.kind = wt->role == TENSOR_PARAM ? TRA_LOAD : TRA_INPUT, .stmt = stmt};
		ld.type = (RelType){.dtype = wt->dtype, .nkey = wt->rank, .nchunk = wt->rank};
		for (int d = 0; d < wt->rank; d++) {
			ld.type.extent[d] = ld.type.block[d] = wt->shape[d];
			ld.type.chunkdim[d] = d;
		}
		ld.u.init.tensor = wrt;
		int var[MAXDIM];
		TVal z = rel_with_new_vars(&b, tra_push(g->p, ld), &ld.type, var);
		z.pend = kx_const(b.arena, 0);
		result = tb_finish(&b, z, wt->rank, var);
		goto done;
	}
	for (int i = 0; i < n; i++)
		if (!rel[i] && g->adj[i] == -1)
			g->adj[i] = -2;         /* no gradient flows here for this wrt */
		else if (rel[i] && g->adj[i] == -2)
			g->adj[i] = -1;

	/* the seed: d loss / d loss = 1, a relation of its own rather than a
	 * map of the loss, so the backward ops that read only it and values
	 * the loop does not change (sum(M) in a mean) hoist out of the loop */
	if (g->adj[loss] < 0)
		g->adj[loss] = tb_unit(&b, 1, o->ops.v[loss].type.dtype);

	/* reverse program order: every consumer of an op comes after it */
	for (int v = loss; v >= 0; v--) {
		if (!rel[v] || g->unit[v].kind == D_LEAF)
			continue;
		const TraOp *op = &o->ops.v[v];
		switch (g->unit[v].kind) {
		case D_NONE:
			if (op->kind == TRA_GRAD)
				diag(DIAG_ERROR, loc, "the loss depends on a gradient; second derivatives are not supported");
			else if (!inside_unit(op->kind))
				tr_bug("autodiff meets a %s op it has no rule for", tra_op_name(op->kind));
			continue;       /* a reducing kernel or filter inside its unit */
		case D_LEAF:
			continue;
		case D_EINSUM:
		case D_DIAG:
		case D_REKEY:
		case D_GATHER:
		case D_SLICE:
		case D_CONV:
			break;
		}
		int first = g->p->ops.n;
		int G = adjoint(g, &b, v);
		if (G < 0)
			continue;       /* nothing reached it: no contribution */
		switch (g->unit[v].kind) {
		case D_EINSUM: vjp_einsum(g, &b, v, G); break;
		case D_DIAG: vjp_diag(g, &b, v, G); break;
		case D_REKEY: vjp_rekey(g, &b, v, G); break;
		case D_GATHER: vjp_gather(g, &b, v, G); break;
		case D_SLICE: vjp_slice(g, &b, v, G); break;
		case D_CONV: vjp_conv(g, &b, v, G); break;
		default: break;
		}
		/* what this unit's adjoint and its contributions made is the
		 * backward of v's statement, for --explain's and --profile's
		 * labels (the plan keeps it in the grad's statement) */
		for (int i = first; op->stmt >= 0 && i < g->p->ops.n; i++)
			if (!g->p->ops.v[i].grad_of)
				g->p->ops.v[i].grad_of = op->stmt + 1;
	}

	/* the gradient: the leaves' adjoints added up, in the tensor's order */
	{
		int var[MAXDIM];
		TVal acc = {.op = -1};
		for (int d = 0; d < wt->rank; d++)
			var[d] = tb_var(&b, wt->shape[d]);
		for (int i = 0; i < leaves.n; i++) {
			int a = adjoint(g, &b, leaves.v[i]);
			if (a >= 0)
				acc = acc.op < 0 ? tb_rel(&b, a, wt->rank, var)
				                 : tb_binary(&b, KOP_ADD, acc, tb_rel(&b, a, wt->rank, var));
		}
		if (acc.op < 0) {
			/* every path was a zero derivative (comparisons, argmax): zero */
			acc = tb_rel(&b, g->map[leaves.v[0]], wt->rank, var);
			acc.pend = kx_const(b.arena, 0);
		} else if (wt->sparse) {
			/* a sparse input's gradient has its pattern: (W != 0) * acc
			 * is sparse (optimizer/sparse.c) */
			TVal pat = tb_rel(&b, g->map[leaves.v[0]], wt->rank, var);
			pat = tb_binary(&b, KOP_NE, pat, tb_const(&b, 0));
			acc = tb_binary(&b, KOP_MUL, pat, acc);
		}
		result = tb_finish(&b, acc, wt->rank, var);
	}
done:
	vec_free(&leaves);
	free(anc);
	free(rel);
	tb_free(&b);
	return result;
}

/* ---- the pass ---- */

static int remap_op(Grad *g, TraOp op)
{
	switch (op.kind) {
	case TRA_JOIN:
	case TRA_CONV:
		op.u.join.left = g->map[op.u.join.left];
		op.u.join.right = g->map[op.u.join.right];
		break;
	case TRA_AGG: op.u.agg.in = g->map[op.u.agg.in]; break;
	case TRA_MAP: op.u.map.in = g->map[op.u.map.in]; break;
	case TRA_REKEY: op.u.rekey.in = g->map[op.u.rekey.in]; break;
	case TRA_FILTER: op.u.filter.in = g->map[op.u.filter.in]; break;
	case TRA_OUTPUT: op.u.output.in = g->map[op.u.output.in]; break;
	case TRA_STORE:
	case TRA_PRINT: op.u.store.in = g->map[op.u.store.in]; break;
	case TRA_GRAD: op.u.grad.loss = g->map[op.u.grad.loss]; break;
	case TRA_GATHER:
	case TRA_SCATTER:
		op.u.gather.src = g->map[op.u.gather.src];
		op.u.gather.index = g->map[op.u.gather.index];
		if (op.u.gather.base >= 0)
			op.u.gather.base = g->map[op.u.gather.base];
		break;
	case TRA_SLICE:
		op.u.slice.in = g->map[op.u.slice.in];
		op.u.slice.off = op.u.slice.off >= 0 ? g->map[op.u.slice.off] : -1;
		break;
	case TRA_INPUT: case TRA_INIT: case TRA_LOAD: case TRA_RANGE: case TRA_COUNTER: case TRA_LOOP: case TRA_ENDLOOP:
		break;
	}
	return tra_push(g->p, op);
}

void opt_autodiff(TraProg *p)
{
	bool any = false;
	for (int i = 0; i < p->ops.n; i++)
		any |= p->ops.v[i].kind == TRA_GRAD;
	if (!any)
		return;

	/* the old ops move aside; the program is rebuilt into p */
	TraProg old = *p;
	p->ops.v = NULL;
	p->ops.n = p->ops.cap = 0;
	int n = old.ops.n;
	Grad g = {&old, p, xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(DiffUnit)), -1,
	          xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(*g.contrib)), xcalloc(n + 1, sizeof(*g.prop)),
	          xcalloc(n + 1, sizeof(*g.still))};
	find_units(&g);
	lse_shift(&g);
	for (int i = 0; i < n; i++) {
		const TraOp *op = &old.ops.v[i];
		if (op->kind == TRA_GRAD) {
			Loc loc = op->stmt >= 0 ? p->stmts.v[op->stmt].loc : NOLOC;
			g.map[i] = expand(&g, op->u.grad.loss, op->u.grad.tensor, op->stmt, loc);
		} else {
			g.map[i] = remap_op(&g, *op);
		}
	}
	for (int i = 0; i < n; i++)
		vec_free(&g.contrib[i]);
	free(g.contrib);
	free(g.prop);
	free(g.still);
	free(g.adj);
	free(g.unit);
	free(g.map);
	vec_free(&old.ops);
}
