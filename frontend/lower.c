/*
 * lower.c: a checked statement -> TRA ops.
 *
 * The translation is the thesis's structural induction (digest B.2.2, the
 * "implementable version"), with relations that carry a schema: key dim d of
 * a value's relation is index var var[d].
 *
 *   A[i, k]            the tensor's current relation
 *   f(e), e op c       deferred: an elementwise expression `pend` over the
 *                      value's chunks, folded into whichever kernel reads it
 *   e1 op e2           join on the shared index vars, kernel op(pend1, pend2);
 *                      two values of one relation with one schema need no join
 *   sum[k](e)          the kernel that produces e reduces k inside each chunk,
 *                      then agg groups away k's key dim (a blocked matmul is
 *                      join(in0*in1, ik,kj->ij) then agg sum <i,j>)
 *   T[i, j] = e        chunks and keys put in the left side's order
 *
 * Blocks are the whole extent here (one chunk per tensor); optimizer/blocking
 * chooses the chunk shapes afterwards, on the TRA program.
 */
#include <math.h>
#include <string.h>

#include "frontend/frontend.h"

typedef struct Val {
	int op;                 /* -1: a compile-time constant (pend) */
	int nvar;
	int var[MAXDIM];        /* key dim d of op is index var var[d] */
	KExpr *pend;            /* elementwise expression over in0 still to apply; NULL: none */
	bool fresh;             /* op made for this value alone: its kernel may absorb more */
} Val;

typedef struct L {
	Lowering *lw;
	Arena *arena;
	int nlhs;
	const int *lhs;
} L;

static RelType make_type(L *l, int nvar, const int *var, DType dt)
{
	RelType t = {.dtype = dt, .nkey = nvar, .nchunk = nvar};
	for (int d = 0; d < nvar; d++) {
		t.extent[d] = l->lw->vars[var[d]].extent;
		t.block[d] = t.extent[d];
		t.chunkdim[d] = d;
	}
	return t;
}

static TraOp *op_at(L *l, int i)
{
	return &l->lw->prog->ops.v[i];
}

static int push(L *l, TraOp op)
{
	op.stmt = l->lw->stmt;
	return tra_push(l->lw->prog, op);
}

static KExpr *in_or(L *l, KExpr *pend, int in)
{
	if (!pend)
		return kx_in(l->arena, in);
	if (in == 0)
		return pend;
	KExpr *repl[2] = {kx_in(l->arena, 1), kx_in(l->arena, 1)};
	return kx_subst(l->arena, pend, repl);
}

static void remap_idx(KExpr *e, const int *map)
{
	if (e->kind == KX_IDX) {
		if (map[e->in] < 0)
			tr_bug("index label %d in no input", e->in);
		e->in = map[e->in];
	} else if (e->kind == KX_OP) {
		for (int i = 0; i < kop_arity(e->op); i++)
			remap_idx(e->arg[i], map);
	}
}

/* Renumber a kernel's labels (index var ids) to 0.. in order of appearance. */
static void compact_labels(Kernel *k)
{
	int map[256], n = 0;
	for (int i = 0; i < 256; i++)
		map[i] = -1;
	for (int i = 0; i < k->nin; i++)
		for (int d = 0; d < k->nindim[i]; d++) {
			int v = k->inlab[i][d];
			if (map[v] < 0)
				map[v] = n++;
			k->inlab[i][d] = map[v];
		}
	for (int d = 0; d < k->noutdim; d++) {
		int v = k->outlab[d];
		if (map[v] < 0)
			tr_bug("output label %d not in any input", v);
		k->outlab[d] = map[v];
	}
	remap_idx(k->expr, map);
	k->nlab = n;
}

/* The labels a kernel input sees: the index vars of its chunk dims.  Labels
 * are statement var ids until compact_labels. */
static void input_labels(Kernel *k, int in, const RelType *t, const int *var)
{
	k->nindim[in] = t->nchunk;
	for (int c = 0; c < t->nchunk; c++)
		k->inlab[in][c] = var[t->chunkdim[c]];
}

/* A kernel's output labels and its op's chunk dims, in the given var order. */
static void set_output_order(L *l, int opi, int nvar, const int *var, int nout, const int *outvar)
{
	TraOp *op = op_at(l, opi);
	Kernel *k = op->kind == TRA_JOIN ? op->u.join.kernel : op->u.map.kernel;
	/* labels are compacted; recover each var's label from the inputs */
	op->type.nchunk = nout;
	k->noutdim = nout;
	for (int c = 0; c < nout; c++) {
		int d = -1;
		for (int j = 0; j < nvar; j++)
			if (var[j] == outvar[c])
				d = j;
		if (d < 0)
			tr_bug("output var %d not in the value", outvar[c]);
		op->type.chunkdim[c] = d;
		k->outlab[c] = -1;
	}
	/* find the label of key dim d: the label of an input chunk dim spanning it */
	int in[2];
	int n = tra_inputs(op, in);
	for (int c = 0; c < nout; c++) {
		int d = op->type.chunkdim[c];
		for (int i = 0; i < n && k->outlab[c] < 0; i++) {
			const RelType *it = &op_at(l, in[i])->type;
			for (int ch = 0; ch < it->nchunk; ch++) {
				int kd = it->chunkdim[ch];
				int od = kd;
				if (op->kind == TRA_JOIN && i == 1)
					od = ia_join_out_dim(op_at(l, in[0])->type.nkey, op->u.join.nmatch,
					                     op->u.join.rkey, kd, op->u.join.lkey);
				if (od == d) {
					k->outlab[c] = k->inlab[i][ch];
					break;
				}
			}
		}
		if (k->outlab[c] < 0)
			tr_bug("no label for output dim %d", c);
	}
	/* labels absent from the output are reduced */
	k->reduces = false;
	for (int i = 0; i < k->nin; i++)
		for (int ch = 0; ch < k->nindim[i]; ch++) {
			bool out = false;
			for (int c = 0; c < nout; c++)
				out |= k->outlab[c] == k->inlab[i][ch];
			k->reduces |= !out;
		}
}

static Val join_expr(L *l, Val a, Val b, KExpr *e);

static Val join(L *l, Val a, Val b, KOp kop)
{
	return join_expr(l, a, b, kx_op(l->arena, kop, kx_in(l->arena, 0), kx_in(l->arena, 1), NULL));
}

static bool same_rel(const Val *a, const Val *b)
{
	return a->op == b->op && a->nvar == b->nvar && !memcmp(a->var, b->var, a->nvar * sizeof *a->var);
}

/* Join on the shared index vars; the kernel computes e over the two
 * inputs' elements (in0, in1), their pending expressions applied. */
static Val join_expr(L *l, Val a, Val b, KExpr *e)
{
	TraOp op = {.kind = TRA_JOIN};
	const RelType *ta = &op_at(l, a.op)->type, *tb = &op_at(l, b.op)->type;
	Val out = {.fresh = true};

	op.u.join.left = a.op;
	op.u.join.right = b.op;
	out.nvar = a.nvar;
	memcpy(out.var, a.var, sizeof out.var);
	for (int j = 0; j < b.nvar; j++) {
		int shared = -1;
		for (int i = 0; i < a.nvar; i++)
			if (a.var[i] == b.var[j])
				shared = i;
		if (shared >= 0) {
			op.u.join.lkey[op.u.join.nmatch] = shared;
			op.u.join.rkey[op.u.join.nmatch++] = j;
		} else {
			out.var[out.nvar++] = b.var[j];
		}
	}
	Kernel *k = kernel_new(l->arena, 2);
	input_labels(k, 0, ta, a.var);
	input_labels(k, 1, tb, b.var);
	k->noutdim = out.nvar;
	for (int d = 0; d < out.nvar; d++)
		k->outlab[d] = out.var[d];
	KExpr *repl[2] = {in_or(l, a.pend, 0), in_or(l, b.pend, 1)};
	k->expr = kx_subst(l->arena, e, repl);
	compact_labels(k);
	op.u.join.kernel = k;
	op.type = make_type(l, out.nvar, out.var, ta->dtype);
	out.op = push(l, op);
	return out;
}

/* A map applying v's pending expression (or the identity), fresh. */
static Val map(L *l, Val v)
{
	TraOp op = {.kind = TRA_MAP};
	const RelType *t = &op_at(l, v.op)->type;
	Kernel *k = kernel_new(l->arena, 1);
	input_labels(k, 0, t, v.var);
	k->noutdim = t->nchunk;
	memcpy(k->outlab, k->inlab[0], sizeof k->outlab);
	k->expr = in_or(l, v.pend, 0);
	compact_labels(k);
	op.u.map.in = v.op;
	op.u.map.kernel = k;
	op.type = *t;
	Val out = v;
	out.op = push(l, op);
	out.pend = NULL;
	out.fresh = true;
	return out;
}

/* Make v's op a fresh join or map with no reduction, its pending expression
 * folded into the kernel (R1-2, R1-7 applied as we go). */
static Val absorb(L *l, Val v)
{
	TraOp *op = v.op >= 0 ? op_at(l, v.op) : NULL;
	if (op && v.fresh && (op->kind == TRA_JOIN || op->kind == TRA_MAP)) {
		Kernel *k = op->kind == TRA_JOIN ? op->u.join.kernel : op->u.map.kernel;
		if (!k->reduces) {
			if (v.pend) {
				KExpr *repl[1] = {k->expr};
				k->expr = kx_subst(l->arena, v.pend, repl);
				v.pend = NULL;
			}
			return v;
		}
	}
	return map(l, v);
}

/* The vars of v minus those in r, ordered as the left side where they
 * appear there, else as in v. */
static int keep_order(L *l, const Val *v, int nr, const int *r, int *out)
{
	int n = 0;
	for (int i = 0; i < l->nlhs; i++)
		for (int j = 0; j < v->nvar; j++)
			if (v->var[j] == l->lhs[i])
				out[n++] = v->var[j];
	for (int j = 0; j < v->nvar; j++) {
		bool skip = false;
		for (int i = 0; i < l->nlhs; i++)
			skip |= v->var[j] == l->lhs[i];
		for (int i = 0; i < nr; i++)
			skip |= v->var[j] == r[i];
		if (!skip)
			out[n++] = v->var[j];
	}
	return n;
}

static Val reduce(L *l, Val v, RedKind red, int nr, const int *r);

/* mean: the sum over the indices, times one over their extents' product. */
static Val mean(L *l, Val v, int nr, const int *r)
{
	double count = 1;
	for (int i = 0; i < nr; i++)
		count *= (double)l->lw->vars[r[i]].extent;
	Val s = reduce(l, v, R_SUM, nr, r);
	s.pend = kx_op(l->arena, KOP_MUL, s.op >= 0 ? in_or(l, s.pend, 0) : s.pend, kx_const(l->arena, 1.0 / count), NULL);
	return s;
}

/*
 * argmax[k](e): the first position along k where e is largest.  e is made
 * once; m = max[k](e); then min over k of (e == m ? the index along k : inf),
 * so ties go to the first position, as numpy's argmax.
 */
static Val argreduce(L *l, Val v, RedKind red, int k)
{
	if (v.op < 0)
		return (Val){.op = -1, .pend = kx_const(l->arena, 0)};
	v = absorb(l, v);
	v.fresh = false;        /* read twice: the max, and the comparison */
	Val m = reduce(l, v, red == R_ARGMAX ? R_MAX : R_MIN, 1, &k);
	KExpr *e = kx_op(l->arena, KOP_WHERE,
	                 kx_op(l->arena, KOP_EQ, kx_in(l->arena, 0), kx_in(l->arena, 1), NULL),
	                 kx_idx(l->arena, k), kx_const(l->arena, INFINITY));
	Val t = join_expr(l, v, m, e);
	return reduce(l, t, R_MIN, 1, &k);
}

static Val reduce(L *l, Val v, RedKind red, int nr, const int *r)
{
	if (red == R_MEAN)
		return mean(l, v, nr, r);
	if (red == R_ARGMAX || red == R_ARGMIN)
		return argreduce(l, v, red, r[0]);
	AggKind agg = red == R_MAX ? AGG_MAX : red == R_MIN ? AGG_MIN : AGG_ADD;
	double mult = 1;
	int present[MAXDIM], np = 0;

	for (int i = 0; i < nr; i++) {
		bool found = false;
		for (int j = 0; j < v.nvar; j++)
			found |= v.var[j] == r[i];
		if (found)
			present[np++] = r[i];
		else
			mult *= (double)l->lw->vars[r[i]].extent;
	}
	if (v.op < 0 || np == 0) {
		/* nothing to reduce over: sum multiplies by the extents */
		if (agg == AGG_ADD && mult != 1)
			v.pend = kx_op(l->arena, KOP_MUL, v.pend ? v.pend : kx_in(l->arena, 0), kx_const(l->arena, mult), NULL);
		return v;
	}

	v = absorb(l, v);
	int keep[MAXDIM];
	int nkeep = keep_order(l, &v, np, present, keep);
	set_output_order(l, v.op, v.nvar, v.var, nkeep, keep);
	TraOp *p = op_at(l, v.op);
	Kernel *k = p->kind == TRA_JOIN ? p->u.join.kernel : p->u.map.kernel;
	k->red = agg;

	TraOp op = {.kind = TRA_AGG};
	op.u.agg.in = v.op;
	op.u.agg.agg = agg;
	op.u.agg.ngroup = nkeep;
	for (int g = 0; g < nkeep; g++)
		for (int d = 0; d < v.nvar; d++)
			if (v.var[d] == keep[g])
				op.u.agg.group[g] = d;
	op.type = make_type(l, nkeep, keep, op_at(l, v.op)->type.dtype);
	Val out = {.nvar = nkeep, .fresh = false};
	memcpy(out.var, keep, sizeof out.var);
	out.op = push(l, op);
	if (agg == AGG_ADD && mult != 1)
		out.pend = kx_op(l->arena, KOP_MUL, kx_in(l->arena, 0), kx_const(l->arena, mult), NULL);
	return out;
}

static KOp binop_kop(BinOp op)
{
	switch (op) {
	case B_ADD: return KOP_ADD;
	case B_SUB: return KOP_SUB;
	case B_MUL: return KOP_MUL;
	case B_DIV: return KOP_DIV;
	case B_POW: return KOP_POW;
	case B_LT: return KOP_LT;
	case B_LE: return KOP_LE;
	case B_GT: return KOP_GT;
	case B_GE: return KOP_GE;
	case B_EQ: return KOP_EQ;
	case B_NE: return KOP_NE;
	}
	tr_bug("bad binary operator");
}

static Val combine(L *l, KOp kop, Val a, Val b)
{
	if (a.op < 0 && b.op < 0) {
		a.pend = kx_op(l->arena, kop, a.pend, b.pend, NULL);
		return a;
	}
	if (a.op < 0) {
		b.pend = kx_op(l->arena, kop, a.pend, in_or(l, b.pend, 0), NULL);
		return b;
	}
	if (b.op < 0) {
		a.pend = kx_op(l->arena, kop, in_or(l, a.pend, 0), b.pend, NULL);
		return a;
	}
	if (same_rel(&a, &b)) {
		a.pend = kx_op(l->arena, kop, in_or(l, a.pend, 0), in_or(l, b.pend, 0), NULL);
		a.fresh = false;        /* read twice: do not fold into its kernel */
		return a;
	}
	return join(l, a, b, kop);
}

static Val lower(L *l, Node *n);

/* A tensor's own relation type: key dim d is tensor dim d, one chunk. */
static RelType tensor_type(const Tensor *t)
{
	RelType r = {.dtype = t->dtype, .nkey = t->rank, .nchunk = t->rank};
	for (int d = 0; d < t->rank; d++) {
		r.extent[d] = r.block[d] = t->shape[d];
		r.chunkdim[d] = d;
	}
	return r;
}

/* The op holding a tensor's current value: a param is loaded on first use
 * after each store (and at the top of each loop iteration). */
static int value_of(Lowering *lw, int tensor)
{
	if (lw->cur[tensor] >= 0)
		return lw->cur[tensor];
	const Tensor *t = &lw->prog->tensors.v[tensor];
	if (t->role != TENSOR_PARAM)
		tr_bug("tensor %s has no value", t->name);
	TraOp op = {.kind = TRA_LOAD, .stmt = lw->stmt, .type = tensor_type(t)};
	op.u.init.tensor = tensor;
	return lw->cur[tensor] = tra_push(lw->prog, op);
}

/* where(c, a, b) over up to three relations: one map when they share one
 * relation and schema; otherwise (c ? a : 0) + (c ? 0 : b), exact for every
 * value but the sign of a zero. */
static Val lower_where(L *l, Node *n)
{
	Val c = lower(l, n->u.where.cond), a = lower(l, n->u.where.a), b = lower(l, n->u.where.b);
	Val *rel = c.op >= 0 ? &c : a.op >= 0 ? &a : b.op >= 0 ? &b : NULL;
	bool one = true;
	Val *all[3] = {&c, &a, &b};
	for (int i = 0; i < 3; i++)
		if (all[i]->op >= 0 && !same_rel(all[i], rel))
			one = false;
	if (one) {
		Val out = rel ? *rel : c;
		KExpr *e[3];
		for (int i = 0; i < 3; i++)
			e[i] = all[i]->op >= 0 ? in_or(l, all[i]->pend, 0) : all[i]->pend;
		out.pend = kx_op(l->arena, KOP_WHERE, e[0], e[1], e[2]);
		if (rel && (c.op >= 0) + (a.op >= 0) + (b.op >= 0) > 1)
			out.fresh = false;
		return out;
	}
	Val zero = {.op = -1, .pend = kx_const(l->arena, 0)};
	Val c2 = c;
	c2.fresh = false;
	Val ta = combine(l, KOP_MUL, combine(l, KOP_NE, c, zero), a);
	Val tb = combine(l, KOP_MUL, combine(l, KOP_EQ, c2, zero), b);
	return combine(l, KOP_ADD, ta, tb);
}

/* A[i, k]: the tensor's relation, its key dims named by the index vars.  A
 * repeated index takes a diagonal: filter the keys where the dims agree, a
 * map that reads each chunk's diagonal, and an aggregation that drops the
 * repeated key dims (each group holds the one tuple the filter kept). */
static Val access(L *l, Node *n)
{
	Val v = {.op = value_of(l->lw, n->u.access.tensor), .nvar = n->u.access.nidx};
	int first[MAXDIM], ndistinct = 0, distinct[MAXDIM], at[MAXDIM];
	TraOp f = {.kind = TRA_FILTER};

	for (int d = 0; d < v.nvar; d++) {
		v.var[d] = n->u.access.idx[d]->u.name.var;
		first[d] = d;
		for (int e = 0; e < d; e++)
			if (v.var[e] == v.var[d] && first[d] == d)
				first[d] = e;
		if (first[d] == d) {
			at[ndistinct] = d;
			distinct[ndistinct++] = v.var[d];
		} else {
			f.u.filter.pred.eq[f.u.filter.pred.neq][0] = first[d];
			f.u.filter.pred.eq[f.u.filter.pred.neq++][1] = d;
		}
	}
	if (ndistinct == v.nvar)
		return v;

	f.u.filter.in = v.op;
	f.type = op_at(l, v.op)->type;
	int fi = push(l, f);

	TraOp m = {.kind = TRA_MAP, .type = f.type};
	Kernel *k = kernel_new(l->arena, 1);
	input_labels(k, 0, &f.type, v.var);
	k->noutdim = ndistinct;
	m.type.nchunk = ndistinct;
	for (int c = 0; c < ndistinct; c++) {
		k->outlab[c] = distinct[c];
		m.type.chunkdim[c] = at[c];
	}
	compact_labels(k);
	m.u.map.in = fi;
	m.u.map.kernel = k;
	int mi = push(l, m);

	TraOp g = {.kind = TRA_AGG};
	g.u.agg.in = mi;
	g.u.agg.agg = AGG_ADD;
	g.u.agg.ngroup = ndistinct;
	memcpy(g.u.agg.group, at, sizeof at);
	g.type = make_type(l, ndistinct, distinct, f.type.dtype);
	Val out = {.op = push(l, g), .nvar = ndistinct};
	memcpy(out.var, distinct, sizeof out.var);
	return out;
}

/* f32(e), f64(e): e in its own type, then a map to the other. */
static Val convert(L *l, Val v, DType to)
{
	if (v.op < 0)
		return v;               /* a constant takes its context's type anyway */
	if (v.pend)
		v = absorb(l, v);
	const RelType *t = &op_at(l, v.op)->type;
	if (t->dtype == to)
		return v;
	TraOp op = {.kind = TRA_MAP, .type = *t};
	op.type.dtype = to;
	Kernel *k = kernel_new(l->arena, 1);
	input_labels(k, 0, t, v.var);
	k->noutdim = t->nchunk;
	memcpy(k->outlab, k->inlab[0], sizeof k->outlab);
	compact_labels(k);
	op.u.map.in = v.op;
	op.u.map.kernel = k;
	Val out = v;
	out.op = push(l, op);
	out.pend = NULL;
	out.fresh = true;
	return out;
}

static Val lower(L *l, Node *n)
{
	Val v = {.op = -1};
	switch (n->kind) {
	case N_NUM:
		v.pend = kx_const(l->arena, n->u.num);
		return v;
	case N_ACCESS:
		return access(l, n);
	case N_UNARY:
		v = lower(l, n->u.unary.a);
		v.pend = kx_op(l->arena, KOP_NEG, v.op >= 0 ? in_or(l, v.pend, 0) : v.pend, NULL, NULL);
		return v;
	case N_CALL:
		v = lower(l, n->u.call.args[0]);
		if (n->u.call.conv >= 0)
			return convert(l, v, n->u.call.conv);
		v.pend = kx_op(l->arena, n->u.call.fn, v.op >= 0 ? in_or(l, v.pend, 0) : v.pend, NULL, NULL);
		return v;
	case N_BINARY:
		return combine(l, binop_kop(n->u.binary.op), lower(l, n->u.binary.a), lower(l, n->u.binary.b));
	case N_WHERE:
		return lower_where(l, n);
	case N_REDUCE:
		return reduce(l, lower(l, n->u.reduce.body), n->u.reduce.red, n->u.reduce.nnames, n->u.reduce.var);
	case N_STR:
	case N_NAME:
	case N_GRAD:
		break;
	}
	tr_bug("node kind %d reached lowering", (int)n->kind);
}

int lower_input(TraProg *prog, int tensor)
{
	TraOp op = {.kind = TRA_INPUT, .stmt = -1, .type = tensor_type(&prog->tensors.v[tensor])};
	op.u.input.tensor = tensor;
	return tra_push(prog, op);
}

void lower_param_init(TraProg *prog, int tensor)
{
	TraOp op = {.kind = TRA_INIT, .stmt = -1, .type = tensor_type(&prog->tensors.v[tensor])};
	op.u.init.tensor = tensor;
	TraOp st = {.kind = TRA_STORE, .stmt = -1, .type = op.type};
	st.u.store.in = tra_push(prog, op);
	st.u.store.tensor = tensor;
	tra_push(prog, st);
}

void lower_store(Lowering *lw, int in, int tensor)
{
	TraOp op = {.kind = TRA_STORE, .stmt = lw->stmt, .type = lw->prog->ops.v[in].type};
	op.u.store.in = in;
	op.u.store.tensor = tensor;
	tra_push(lw->prog, op);
}

void lower_print(Lowering *lw, int tensor)
{
	TraOp op = {.kind = TRA_PRINT, .stmt = lw->stmt};
	op.u.store.in = value_of(lw, tensor);
	op.u.store.tensor = tensor;
	op.type = lw->prog->ops.v[op.u.store.in].type;
	tra_push(lw->prog, op);
}

void lower_loop(TraProg *prog, int64_t count, Loc loc)
{
	TraOp op = {.kind = TRA_LOOP, .stmt = -1};
	op.u.loop.count = count;
	tra_push(prog, op);
}

void lower_endloop(TraProg *prog)
{
	TraOp op = {.kind = TRA_ENDLOOP, .stmt = -1};
	tra_push(prog, op);
}

int lower_value(TraProg *prog, int *cur, int tensor)
{
	Lowering lw = {.prog = prog, .cur = cur, .stmt = -1};
	return value_of(&lw, tensor);
}

void lower_output(TraProg *prog, int *cur, int tensor)
{
	Lowering lw = {.prog = prog, .cur = cur, .stmt = -1};
	TraOp op = {.kind = TRA_OUTPUT, .stmt = -1};
	op.u.output.in = value_of(&lw, tensor);
	op.u.output.tensor = tensor;
	op.type = prog->ops.v[op.u.output.in].type;
	tra_push(prog, op);
}

int lower_assign(Lowering *lw, Node *value, int nlhs, const int *lhs)
{
	L l = {lw, lw->prog->arena, nlhs, lhs};
	Val v = lower(&l, value);
	if (v.op < 0)
		tr_bug("a statement without a tensor reached lowering");

	/* chunks in the left side's order, the pending expression applied */
	const RelType *t = &op_at(&l, v.op)->type;
	bool in_order = t->nchunk == nlhs;
	for (int c = 0; in_order && c < nlhs; c++)
		in_order = v.var[t->chunkdim[c]] == lhs[c];
	if (v.pend || !in_order) {
		v = absorb(&l, v);
		set_output_order(&l, v.op, v.nvar, v.var, nlhs, lhs);
	}
	/* keys in the left side's order */
	bool identity = true;
	TraOp rk = {.kind = TRA_REKEY};
	rk.u.rekey.in = v.op;
	rk.u.rekey.nkey = nlhs;
	for (int i = 0; i < nlhs; i++) {
		for (int d = 0; d < v.nvar; d++)
			if (v.var[d] == lhs[i])
				rk.u.rekey.keymap[i] = d;
		identity &= rk.u.rekey.keymap[i] == i;
	}
	if (identity && v.nvar == nlhs)
		return v.op;
	rk.type = make_type(&l, nlhs, lhs, op_at(&l, v.op)->type.dtype);
	return push(&l, rk);
}
