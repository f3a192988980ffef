/*
 * lower.c: a checked statement -> TRA ops.
 *
 * A walk of the annotated expression that builds TRA through ir/build.c
 * (the TRA builder): sema's index vars become the builder's vars, an access
 * names its tensor's key dims by them, operators combine values, reductions
 * reduce them, and the left side gives the final key and chunk order.  The
 * other entry points add the ops around statements: inputs, params (init,
 * load, store), print, loops and outputs.
 */
#include <math.h>
#include <string.h>

#include "frontend/frontend.h"

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

static TVal lower(TraBuild *b, Lowering *lw, Node *n);

static int window(TraBuild *b, Lowering *lw, int op, int d, const IxAffine *f, int64_t stride, int64_t shift,
                  int64_t n);

/* E[idx[b], d]: a gather op keyed by the index's vars, then E's other
 * positions' (a repeated var among them takes a diagonal, as any access). */
static TVal lower_gather(TraBuild *b, Lowering *lw, Node *n)
{
	int gd = n->u.access.gather - 1;
	Node *ixn = n->u.access.idx[gd];
	TVal ix = lower(b, lw, ixn);
	if (ix.pend || ix.op < 0)
		ix = tb_absorb(b, ix);
	int table = value_of(lw, n->u.access.tensor);
	TraOp op = {.kind = TRA_GATHER, .stmt = b->stmt};
	op.type = gather_type(&lw->prog->ops.v[table].type, &lw->prog->ops.v[ix.op].type, gd);
	op.u.gather.src = table;
	op.u.gather.index = ix.op;
	op.u.gather.dim = gd;
	op.u.gather.tensor = n->u.access.tensor;
	op.u.gather.itensor = ixn->u.access.tensor;
	op.u.gather.base = -1;
	op.u.gather.scale = 1;
	int var[MAXDIM], nv = 0;
	for (int i = 0; i < ix.nvar; i++)
		var[nv++] = ix.var[i];
	int g = tra_push(lw->prog, op);
	for (int d = 0; d < n->u.access.nidx; d++) {
		if (d == gd)
			continue;
		/* E[idx[b], j + 1]: a window of the rows gathered, along the
		 * position's dim of them (expr.c allows one name there) */
		const IxAffine *f = n->u.access.aff ? n->u.access.aff[d] : NULL;
		if (f)
			g = window(b, lw, g, nv, f, f->vcoef[0], f->shift, lw->vars[f->var[0]].extent);
		var[nv++] = n->u.access.idx[d]->u.name.var;
	}
	return tb_access(b, g, nv, var);
}

/* A window of op along dim d: positions stride * i + shift + the loop
 * counters' multiples (computed each iteration as a 0-d i64), extent n. */
static int window(TraBuild *b, Lowering *lw, int op, int d, const IxAffine *f, int64_t stride, int64_t shift,
                  int64_t n)
{
	TraOp s = {.kind = TRA_SLICE, .stmt = lw->stmt, .type = lw->prog->ops.v[op].type};
	s.type.extent[d] = s.type.block[d] = n;
	s.u.slice.in = op;
	s.u.slice.dim = d;
	s.u.slice.shift = shift;
	s.u.slice.stride = stride;
	s.u.slice.off = -1;
	if (f->ncounter) {
		TVal off = tb_binary(b, KOP_MUL, tb_counter(b, f->depth[0]), tb_const(b, (double)f->coef[0]));
		for (int i = 1; i < f->ncounter; i++)
			off = tb_binary(b, KOP_ADD, off,
			                tb_binary(b, KOP_MUL, tb_counter(b, f->depth[i]), tb_const(b, (double)f->coef[i])));
		s.u.slice.off = tb_finish(b, off, 0, NULL);
	}
	return tra_push(lw->prog, s);
}

/* Access n's relation with each affine position cut to its windows.  The
 * position's first var (rising) runs along the dim, with its coefficient
 * as the stride; each other var's values make one window apiece, stacked
 * along a new dim for that var (im2col: the window at k where the var is
 * k, a sum of products with f32(var == k)).  *nvar, var: the result's
 * vars, the access's positions first. */
static int windows(TraBuild *b, Lowering *lw, Node *n, int op, int *nvar, int *var, unsigned skip)
{
	*nvar = n->u.access.nidx;
	for (int d = 0; d < n->u.access.nidx; d++)     /* a position not yet cut: a var of its own */
		var[d] = n->u.access.aff && n->u.access.aff[d] ? tb_var(b, lw->prog->ops.v[op].type.extent[d])
		                                               : n->u.access.idx[d]->u.name.var;
	for (int d = 0; n->u.access.aff && d < n->u.access.nidx; d++) {
		const IxAffine *f = n->u.access.aff[d];
		if (!f || (skip & 1u << d))
			continue;
		int64_t ext = lw->vars[f->var[0]].extent;
		if (f->nvar == 1) {
			op = window(b, lw, op, d, f, f->vcoef[0], f->shift, ext);
			var[d] = f->var[0];
			continue;
		}
		var[d] = f->var[0];
		DType dt = lw->prog->ops.v[op].type.dtype;
		int64_t k[MAXDIM] = {0};
		TVal acc = {.op = -1};
		for (;;) {
			int64_t shift = f->shift;
			for (int i = 1; i < f->nvar; i++)
				shift += f->vcoef[i] * k[i];
			TVal w = tb_rel(b, window(b, lw, op, d, f, f->vcoef[0], shift, ext), *nvar, var);
			for (int i = 1; i < f->nvar; i++) {
				TVal at = tb_binary(b, KOP_EQ, tb_index(b, f->var[i]), tb_const(b, (double)k[i]));
				w = tb_binary(b, KOP_MUL, w, tb_convert(b, at, dt));
			}
			acc = acc.op < 0 ? w : tb_binary(b, KOP_ADD, acc, w);
			int i = f->nvar - 1;
			while (i >= 1 && ++k[i] == lw->vars[f->var[i]].extent)
				k[i--] = 0;
			if (i < 1)
				break;
		}
		for (int i = 1; i < f->nvar; i++)
			var[(*nvar)++] = f->var[i];
		op = tb_finish(b, acc, *nvar, var);
	}
	return op;
}

/* Does var v occur in the vars of t? */
static bool has_var(const TVal *t, int v)
{
	for (int i = 0; i < t->nvar; i++)
		if (t->var[i] == v)
			return true;
	return false;
}

/* The window of position f for a convolution with weights w: own + coef
 * * lab + shift, own of coefficient 1, neither w's nor summed, lab w's
 * and summed (among r[0..nr)); false when f is not of that form. */
static bool conv_window(const IxAffine *f, const TVal *w, int nr, const int *r, TbWin *win)
{
	if (f->nvar != 2 || f->ncounter)
		return false;
	for (int o = 0; o < 2; o++) {
		int own = f->var[o], lab = f->var[1 - o];
		bool summed = false, own_summed = false;
		for (int i = 0; i < nr; i++) {
			summed |= r[i] == lab;
			own_summed |= r[i] == own;
		}
		if (f->vcoef[o] == 1 && !has_var(w, own) && has_var(w, lab) && summed && !own_summed) {
			*win = (TbWin){.own = own, .lab = lab, .coef = f->vcoef[1 - o], .shift = f->shift};
			return true;
		}
	}
	return false;
}

/*
 * sum[r](W * X[.., y + dy, ..]), a position of X with two vars, one of
 * them (dy) W's and summed: a convolution, one TRA_CONV op whose kernel
 * reads X's windows directly, rather than im2col's stacked windows.  Each
 * such position of X must be of the form own + coef * lab + shift with
 * own's coefficient 1 (a stride other than 1 stays im2col); positions of
 * one var are cut as slices first.  Returns false (nothing built) when
 * the sum is not of this form.
 */
static bool lower_conv(TraBuild *b, Lowering *lw, Node *n, TVal *res)
{
	Node *body = n->u.reduce.body;
	if (n->u.reduce.red != R_SUM || body->kind != N_BINARY || body->u.binary.op != B_MUL)
		return false;
	for (int side = 0; side < 2; side++) {
		Node *x = side ? body->u.binary.b : body->u.binary.a;
		Node *wn = side ? body->u.binary.a : body->u.binary.b;
		if (x->kind != N_ACCESS || x->u.access.gather || !x->u.access.aff)
			continue;
		if (dtype_is_int(lw->prog->tensors.v[x->u.access.tensor].dtype))
			continue;
		unsigned two = 0;
		for (int d = 0; d < x->u.access.nidx; d++)
			if (x->u.access.aff[d] && x->u.access.aff[d]->nvar > 1)
				two |= 1u << d;
		if (!two)
			continue;
		/* W first: its vars decide which var of each position is the
		 * window's (a constant W built nothing: lower the sum as usual) */
		TVal w = lower(b, lw, wn);
		if (w.op < 0)
			return false;
		if (w.pend)
			w = tb_absorb(b, w);
		TbWin win[MAXDIM];
		int nwin = 0;
		bool ok = lw->prog->ops.v[w.op].type.dtype == lw->prog->tensors.v[x->u.access.tensor].dtype;
		int seen[MAXDIM], nseen = 0;     /* X's vars along its dims: none twice (a diagonal) */
		for (int d = 0; d < x->u.access.nidx && ok; d++) {
			const IxAffine *f = x->u.access.aff[d];
			int v = f ? f->var[0] : x->u.access.idx[d]->u.name.var;
			if (two & 1u << d) {
				ok = conv_window(f, &w, n->u.reduce.nnames, n->u.reduce.var, &win[nwin]);
				v = win[nwin].own;
				win[nwin++].dim = d;
			} else if (f && f->nvar == 0) {
				continue;       /* a constant position: no var */
			}
			for (int i = 0; i < nseen; i++)
				ok &= seen[i] != v;
			seen[nseen++] = v;
		}
		if (!ok) {
			TVal xv = lower(b, lw, x);      /* im2col after all; w is built already */
			TVal prod = side ? tb_binary(b, KOP_MUL, w, xv) : tb_binary(b, KOP_MUL, xv, w);
			*res = tb_reduce(b, prod, TB_SUM, n->u.reduce.nnames, n->u.reduce.var);
			return true;
		}
		int nvar, xvar[2 * MAXDIM];
		int op = windows(b, lw, x, value_of(lw, x->u.access.tensor), &nvar, xvar, two);
		TVal xv = tb_access(b, op, nvar, xvar);
		if (xv.op != op || xv.nvar != nvar)
			tr_bug("a convolution's input read on a diagonal");
		*res = tb_reduce(b, tb_conv(b, w, xv, nwin, win), TB_SUM, n->u.reduce.nnames, n->u.reduce.var);
		return true;
	}
	return false;
}

static TVal lower(TraBuild *b, Lowering *lw, Node *n)
{
	static const TbRed reds[] = {TB_SUM, TB_MAX, TB_MIN, TB_ARGMAX, TB_ARGMIN, TB_MEAN};
	TVal v;
	switch (n->kind) {
	case N_NUM:
		return tb_const(b, n->u.num);
	case N_ACCESS: {
		if (n->u.access.gather)
			return lower_gather(b, lw, n);
		int nvar, avar[2 * MAXDIM];
		int op = windows(b, lw, n, value_of(lw, n->u.access.tensor), &nvar, avar, 0);
		return tb_access(b, op, nvar, avar);
	}
	case N_UNARY:
		return tb_unary(b, KOP_NEG, lower(b, lw, n->u.unary.a));
	case N_CALL:
		v = lower(b, lw, n->u.call.args[0]);
		if (n->u.call.conv >= 0)
			return tb_convert(b, v, n->u.call.conv);
		return tb_unary(b, n->u.call.fn, v);
	case N_BINARY:
		return tb_binary(b, binop_kop(n->u.binary.op), lower(b, lw, n->u.binary.a), lower(b, lw, n->u.binary.b));
	case N_WHERE: {
		TVal c = lower(b, lw, n->u.where.cond);
		TVal x = lower(b, lw, n->u.where.a);
		return tb_where(b, c, x, lower(b, lw, n->u.where.b));
	}
	case N_REDUCE:
		if (lower_conv(b, lw, n, &v))
			return v;
		return tb_reduce(b, lower(b, lw, n->u.reduce.body), reds[n->u.reduce.red], n->u.reduce.nnames,
		                 n->u.reduce.var);
	case N_INDEX:
		return tb_index(b, n->u.name.var);
	case N_COUNTER:
		return tb_counter(b, n->u.name.var);
	case N_STR:
	case N_NAME:
	case N_GRAD:
		break;
	}
	tr_bug("node kind %d reached lowering", (int)n->kind);
}

int fe_lower_input(TraProg *prog, int tensor)
{
	TraOp op = {.kind = TRA_INPUT, .stmt = -1, .type = tensor_type(&prog->tensors.v[tensor])};
	op.u.input.tensor = tensor;
	return tra_push(prog, op);
}

void fe_lower_param_init(TraProg *prog, int tensor)
{
	TraOp op = {.kind = TRA_INIT, .stmt = -1, .type = tensor_type(&prog->tensors.v[tensor])};
	op.u.init.tensor = tensor;
	TraOp st = {.kind = TRA_STORE, .stmt = -1, .type = op.type};
	st.u.store.in = tra_push(prog, op);
	st.u.store.tensor = tensor;
	tra_push(prog, st);
}

void fe_lower_store(Lowering *lw, int in, int tensor)
{
	TraOp op = {.kind = TRA_STORE, .stmt = lw->stmt, .type = lw->prog->ops.v[in].type};
	op.u.store.in = in;
	op.u.store.tensor = tensor;
	tra_push(lw->prog, op);
}

void fe_lower_print(Lowering *lw, int tensor)
{
	TraOp op = {.kind = TRA_PRINT, .stmt = lw->stmt};
	op.u.store.in = value_of(lw, tensor);
	op.u.store.tensor = tensor;
	op.type = lw->prog->ops.v[op.u.store.in].type;
	tra_push(lw->prog, op);
}

void fe_lower_loop(TraProg *prog, int64_t count, Loc loc)
{
	TraOp op = {.kind = TRA_LOOP, .stmt = -1};
	op.u.loop.count = count;
	tra_push(prog, op);
}

void fe_lower_endloop(TraProg *prog)
{
	TraOp op = {.kind = TRA_ENDLOOP, .stmt = -1};
	tra_push(prog, op);
}

int fe_lower_value(TraProg *prog, int *cur, int tensor)
{
	Lowering lw = {.prog = prog, .cur = cur, .stmt = -1};
	return value_of(&lw, tensor);
}

int fe_lower_grad(Lowering *lw, int loss, int wrt)
{
	TraOp op = {.kind = TRA_GRAD, .stmt = lw->stmt, .type = tensor_type(&lw->prog->tensors.v[wrt])};
	op.u.grad.loss = value_of(lw, loss);
	op.u.grad.tensor = wrt;
	return tra_push(lw->prog, op);
}

void fe_lower_output(TraProg *prog, int *cur, int tensor)
{
	Lowering lw = {.prog = prog, .cur = cur, .stmt = -1};
	TraOp op = {.kind = TRA_OUTPUT, .stmt = -1};
	op.u.output.in = value_of(&lw, tensor);
	op.u.output.tensor = tensor;
	op.type = prog->ops.v[op.u.output.in].type;
	tra_push(prog, op);
}

int fe_lower_assign(Lowering *lw, Node *value, int nlhs, const int *lhs)
{
	TraBuild b;
	tb_init(&b, lw->prog, lw->stmt);
	for (int i = 0; i < lw->nvars; i++)
		tb_var(&b, lw->vars[i].extent);
	b.norder = nlhs;
	b.order = lhs;
	TVal v = lower(&b, lw, value);
	if (v.op < 0)
		tr_bug("a statement without a tensor reached lowering");
	int op = tb_finish(&b, v, nlhs, lhs);
	tb_free(&b);
	return op;
}
