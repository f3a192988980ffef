/*
 * build.c: building TRA from index-var schemas (the TRA builder).
 *
 * Both the frontend's lowering and reverse-mode autodiff build TRA in the
 * same terms: a value (TVal) is a relation whose key dim d is named by an
 * index var var[d], together with an elementwise expression still to apply
 * to its chunks (pend), which is folded into whichever kernel reads it.
 * The translation is the thesis's structural induction (digest B.2.2, the
 * "implementable version"):
 *
 *   a relation         tb_rel, tb_access (a repeated var takes a diagonal)
 *   an index's value   tb_index: a range over it, read as any relation
 *   a loop counter     tb_counter: a 0-d i64
 *   f(e), e op c       deferred in pend (tb_unary, tb_binary with a constant)
 *   e1 op e2           join on the shared vars, kernel op(pend1, pend2);
 *                      two values of one relation with one schema need no join
 *   sum[k](e)          the kernel that produces e reduces k inside each chunk,
 *                      then agg groups away k's key dim (a blocked matmul is
 *                      join(in0*in1, ik,kj->ij) then agg sum <i,j>)
 *   tb_finish          keys and chunks in a given var order
 *
 * Blocks are the whole extent here (one chunk per tensor); optimizer/blocking
 * chooses the chunk shapes afterwards, on the TRA program.  Kernel labels
 * are var ids until a kernel is complete (tb_compact_labels).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

void tb_init(TraBuild *l, TraProg *prog, int stmt)
{
	memset(l, 0, sizeof *l);
	l->prog = prog;
	l->arena = prog->arena;
	l->stmt = stmt;
}

void tb_free(TraBuild *l)
{
	vec_free(&l->extent);
	vec_free(&l->range);
}

int tb_var(TraBuild *l, int64_t extent)
{
	vec_push(&l->extent, extent);
	vec_push(&l->range, -1);
	return l->extent.n - 1;
}

TVal tb_rel(TraBuild *l, int op, int nvar, const int *var)
{
	TVal v = {.op = op, .nvar = nvar};
	if (nvar)       /* var may be NULL for a scalar */
		memcpy(v.var, var, nvar * sizeof *var);
	return v;
}

TVal tb_const(TraBuild *l, double c)
{
	return (TVal){.op = -1, .pend = kx_const(l->arena, c)};
}

static RelType make_type(TraBuild *l, int nvar, const int *var, DType dt)
{
	RelType t = {.dtype = dt, .nkey = nvar, .nchunk = nvar};
	for (int d = 0; d < nvar; d++) {
		t.extent[d] = l->extent.v[var[d]];
		t.block[d] = t.extent[d];
		t.chunkdim[d] = d;
	}
	return t;
}

/* An index var where a value is expected: its position, read from a range
 * over it (one per var and statement), as the kernels read any input. */
TVal tb_index(TraBuild *l, int var)
{
	if (l->range.v[var] < 0) {
		TraOp op = {.kind = TRA_RANGE, .stmt = l->stmt, .type = make_type(l, 1, &var, DT_I64)};
		l->range.v[var] = tra_push(l->prog, op);
	}
	return tb_rel(l, l->range.v[var], 1, &var);
}

/* The scalar c as a relation of its own: a range over no index (the one
 * empty key, always present) mapped to c.  It reads nothing, so it is the
 * same on every iteration of a loop and hoists out of it (autodiff's seed,
 * d loss / d loss = 1, whatever the loss's value). */
int tb_unit(TraBuild *l, double c, DType dt)
{
	TraOp r = {.kind = TRA_RANGE, .stmt = l->stmt, .type = make_type(l, 0, NULL, DT_I64)};
	TraOp op = {.kind = TRA_MAP, .stmt = l->stmt, .type = make_type(l, 0, NULL, dt)};
	op.u.map.in = tra_push(l->prog, r);
	op.u.map.kernel = kernel_new(l->arena, 1);
	op.u.map.kernel->expr = kx_const(l->arena, c);
	return tra_push(l->prog, op);
}

/* The iteration of the repeat block at `depth` (0 the outermost): a 0-d
 * i64 made where it is used, never hoisted out of its loop. */
TVal tb_counter(TraBuild *l, int depth)
{
	TraOp op = {.kind = TRA_COUNTER, .stmt = l->stmt, .type = {.dtype = DT_I64}};
	op.u.counter.depth = depth;
	return tb_rel(l, tra_push(l->prog, op), 0, NULL);
}

static TraOp *op_at(TraBuild *l, int i)
{
	return &l->prog->ops.v[i];
}

static int push(TraBuild *l, TraOp op)
{
	op.stmt = l->stmt;
	return tra_push(l->prog, op);
}

static KExpr *in_or(TraBuild *l, KExpr *pend, int in)
{
	if (!pend)
		return kx_in(l->arena, in);
	if (in == 0)
		return pend;
	KExpr *repl[2] = {kx_in(l->arena, 1), kx_in(l->arena, 1)};
	return kx_subst(l->arena, pend, repl);
}

static void remap_idx(KExpr *e, const int *map, int nmap)
{
	if (e->kind == KX_IDX) {
		if (e->in >= nmap || map[e->in] < 0)
			tr_bug("index label %d in no input", e->in);
		e->in = map[e->in];
	} else if (e->kind == KX_OP) {
		for (int i = 0; i < kop_arity(e->op); i++)
			remap_idx(e->arg[i], map, nmap);
	}
}

/* Renumber a kernel's labels (index var ids, as many as a statement and
 * its gradients make) to 0.. in order of appearance. */
void tb_compact_labels(Kernel *k)
{
	int nmap = 0, n = 0;
	for (int i = 0; i < k->nin; i++)
		for (int d = 0; d < k->nindim[i]; d++)
			if (k->inlab[i][d] >= nmap)
				nmap = k->inlab[i][d] + 1;
	for (int w = 0; w < k->nwin; w++)
		if (k->win[w].lab >= nmap)
			nmap = k->win[w].lab + 1;
	int *map = xcalloc((size_t)nmap + 1, sizeof *map);
	for (int i = 0; i < nmap; i++)
		map[i] = -1;
	for (int i = 0; i < k->nin; i++)
		for (int d = 0; d < k->nindim[i]; d++) {
			int v = k->inlab[i][d];
			if (map[v] < 0)
				map[v] = n++;
			k->inlab[i][d] = map[v];
		}
	for (int w = 0; w < k->nwin; w++) {
		int v = k->win[w].lab;
		if (map[v] < 0)
			map[v] = n++;
		k->win[w].lab = map[v];
	}
	for (int d = 0; d < k->noutdim; d++) {
		int v = k->outlab[d];
		if (v >= nmap || map[v] < 0)
			tr_bug("output label %d not in any input", v);
		k->outlab[d] = map[v];
	}
	remap_idx(k->expr, map, nmap);
	free(map);
	k->nlab = n;
}

/* The labels a kernel input sees: the index vars of its chunk dims.  Labels
 * are statement var ids until tb_compact_labels. */
void tb_input_labels(Kernel *k, int in, const RelType *t, const int *var)
{
	k->nindim[in] = t->nchunk;
	for (int c = 0; c < t->nchunk; c++)
		k->inlab[in][c] = var[t->chunkdim[c]];
}

/* The label of the join output's key dim that input 1's chunk dim ch
 * becomes: its own, or for a convolution's window dim whichever of its
 * position's labels input 0 lacks. */
static int conv_slot_label(const Kernel *k, int ch)
{
	int own = k->inlab[1][ch];
	for (int w = 0; w < k->nwin; w++)
		if (k->win[w].dim == ch)
			for (int c = 0; c < k->nindim[0]; c++)
				if (k->inlab[0][c] == own)
					return k->win[w].lab;
	return own;
}

/* A kernel's output labels and its op's chunk dims, in the given var order. */
static void set_output_order(TraBuild *l, int opi, int nvar, const int *var, int nout, const int *outvar)
{
	TraOp *op = op_at(l, opi);
	Kernel *k = op->kind == TRA_MAP ? op->u.map.kernel : op->u.join.kernel;
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
	int in[MAXIN];
	int n = tra_inputs(op, in);
	for (int c = 0; c < nout; c++) {
		int d = op->type.chunkdim[c];
		for (int i = 0; i < n && k->outlab[c] < 0; i++) {
			const RelType *it = &op_at(l, in[i])->type;
			for (int ch = 0; ch < it->nchunk; ch++) {
				int kd = it->chunkdim[ch];
				int od = kd;
				if (op->kind != TRA_MAP && i == 1)
					od = ia_join_out_dim(op_at(l, in[0])->type.nkey, &op->u.join.on, kd);
				if (od == d) {
					k->outlab[c] = i == 1 ? conv_slot_label(k, ch) : k->inlab[i][ch];
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

TVal tb_join_expr(TraBuild *l, TVal a, TVal b, KExpr *e);

static TVal join(TraBuild *l, TVal a, TVal b, KOp kop)
{
	return tb_join_expr(l, a, b, kx_op(l->arena, kop, kx_in(l->arena, 0), kx_in(l->arena, 1), NULL));
}

static bool same_rel(const TVal *a, const TVal *b)
{
	return a->op == b->op && a->nvar == b->nvar && !memcmp(a->var, b->var, a->nvar * sizeof *a->var);
}

/* The join of relations keyed by vars var[0..nvar) and bvar[0..nbvar)
 * matches the vars they share (on); its keys are var's, then bvar's
 * others, appended to var.  Returns how many keys it has. */
int tb_join_keys(int *var, int nvar, const int *bvar, int nbvar, JoinSpec *on)
{
	int n = nvar;
	for (int j = 0; j < nbvar; j++) {
		int shared = -1;
		for (int i = 0; i < nvar; i++)
			if (var[i] == bvar[j])
				shared = i;
		if (shared >= 0) {
			on->lkey[on->nmatch] = shared;
			on->rkey[on->nmatch++] = j;
		} else {
			var[n++] = bvar[j];
		}
	}
	return n;
}

/* Join on the shared index vars; the kernel computes e over the two
 * inputs' elements (in0, in1), their pending expressions applied. */
TVal tb_join_expr(TraBuild *l, TVal a, TVal b, KExpr *e)
{
	TraOp op = {.kind = TRA_JOIN};
	const RelType *ta = &op_at(l, a.op)->type, *tb = &op_at(l, b.op)->type;
	TVal out = {.fresh = true};

	op.u.join.left = a.op;
	op.u.join.right = b.op;
	memcpy(out.var, a.var, sizeof out.var);
	out.nvar = tb_join_keys(out.var, a.nvar, b.var, b.nvar, &op.u.join.on);
	Kernel *k = kernel_new(l->arena, 2);
	tb_input_labels(k, 0, ta, a.var);
	tb_input_labels(k, 1, tb, b.var);
	k->noutdim = out.nvar;
	for (int d = 0; d < out.nvar; d++)
		k->outlab[d] = out.var[d];
	KExpr *repl[2] = {in_or(l, a.pend, 0), in_or(l, b.pend, 1)};
	k->expr = kx_subst(l->arena, e, repl);
	tb_compact_labels(k);
	op.u.join.kernel = k;
	op.type = make_type(l, out.nvar, out.var, ta->dtype);
	out.op = push(l, op);
	return out;
}

/* A convolution (TRA_CONV): the product of w and x, x read through windows
 * win[0..nwin): along x's key dim win[i].dim at pos(own) + coef * pos(lab)
 * + shift, where one of the vars own and lab is w's; x's own var at a
 * window dim is ignored.  Shared vars elsewhere are matched as a join's;
 * the result's key at a window dim is the one of own and lab that w lacks
 * (its extent that var's).  Sum it with tb_reduce, as a join. */
static TVal map(TraBuild *l, TVal v);

TVal tb_conv(TraBuild *l, TVal w, TVal x, int nwin, const TbWin *win)
{
	if (w.pend)
		w = map(l, w);
	if (x.pend)
		x = map(l, x);
	TraOp op = {.kind = TRA_CONV};
	const RelType *tw = &op_at(l, w.op)->type, *tx = &op_at(l, x.op)->type;
	TVal out = {.fresh = true};
	int xkey[MAXDIM], xlab[MAXDIM];
	memcpy(xkey, x.var, sizeof xkey);
	memcpy(xlab, x.var, sizeof xlab);
	Kernel *k = kernel_new(l->arena, 2);
	for (int i = 0; i < nwin; i++) {
		bool own_in_w = false;
		for (int d = 0; d < w.nvar; d++)
			own_in_w |= w.var[d] == win[i].own;
		xkey[win[i].dim] = own_in_w ? win[i].lab : win[i].own;
		xlab[win[i].dim] = win[i].own;
		k->win[i].dim = rel_chunkpos(tx, win[i].dim);
		k->win[i].lab = win[i].lab;
		k->win[i].coef = win[i].coef;
		k->win[i].shift = win[i].shift;
		if (k->win[i].dim < 0)
			tr_bug("a window along a dim with no chunk dim");
	}
	k->nwin = nwin;
	op.u.join.left = w.op;
	op.u.join.right = x.op;
	memcpy(out.var, w.var, sizeof out.var);
	out.nvar = tb_join_keys(out.var, w.nvar, xkey, x.nvar, &op.u.join.on);
	tb_input_labels(k, 0, tw, w.var);
	tb_input_labels(k, 1, tx, xlab);
	k->noutdim = out.nvar;
	for (int d = 0; d < out.nvar; d++)
		k->outlab[d] = out.var[d];
	k->expr = kx_op(l->arena, KOP_MUL, kx_in(l->arena, 0), kx_in(l->arena, 1), NULL);
	tb_compact_labels(k);
	op.u.join.kernel = k;
	op.type = make_type(l, out.nvar, out.var, tw->dtype);
	out.op = push(l, op);
	return out;
}

/* A map applying v's pending expression (or the identity), fresh. */
static TVal map(TraBuild *l, TVal v)
{
	TraOp op = {.kind = TRA_MAP};
	const RelType *t = &op_at(l, v.op)->type;
	Kernel *k = kernel_new(l->arena, 1);
	tb_input_labels(k, 0, t, v.var);
	k->noutdim = t->nchunk;
	memcpy(k->outlab, k->inlab[0], sizeof k->outlab);
	k->expr = in_or(l, v.pend, 0);
	tb_compact_labels(k);
	op.u.map.in = v.op;
	op.u.map.kernel = k;
	op.type = *t;
	TVal out = v;
	out.op = push(l, op);
	out.pend = NULL;
	out.fresh = true;
	return out;
}

/* Make v's op a fresh join or map with no reduction, its pending expression
 * folded into the kernel (R1-2, R1-7 applied as we go). */
TVal tb_absorb(TraBuild *l, TVal v)
{
	Kernel *k = v.op >= 0 && v.fresh ? tra_op_kernel(op_at(l, v.op)) : NULL;
	if (k && k->nwin > 0 && !v.pend)
		return v;       /* a convolution is summed by the aggregation after it */
	if (k && k->nwin == 0 && !k->reduces) {
		if (v.pend) {
			KExpr *repl[1] = {k->expr};
			k->expr = kx_subst(l->arena, v.pend, repl);
			v.pend = NULL;
		}
		return v;
	}
	return map(l, v);
}

/*
 * The vars of v minus those in r: the chunk order of a reduction's result.
 * A result whose vars are all on the left side is ordered as the left side
 * (the statement's result then needs no reordering).  One that keeps a var
 * a later reduction sums away is an intermediate: it keeps v's own order,
 * the order its operands give it, so that its kernel writes along the
 * operands' rows (a sparse product driven by its stored rows, n in
 * sum[n](relu(A[n, d] * W[d, h])), writes each row's products side by
 * side, not 4 KiB apart); the reduction after it reads any order.
 */
static int keep_order(TraBuild *l, const TVal *v, int nr, const int *r, int *out)
{
	bool final = true;
	for (int j = 0; j < v->nvar; j++) {
		bool gone = false;
		for (int i = 0; i < nr; i++)
			gone |= v->var[j] == r[i];
		for (int i = 0; i < l->norder; i++)
			gone |= v->var[j] == l->order[i];
		final &= gone;
	}
	int n = 0;
	for (int i = 0; final && i < l->norder; i++)
		for (int j = 0; j < v->nvar; j++)
			if (v->var[j] == l->order[i])
				out[n++] = v->var[j];
	for (int j = 0; j < v->nvar; j++) {
		bool skip = false;
		for (int i = 0; final && i < l->norder; i++)
			skip |= v->var[j] == l->order[i];
		for (int i = 0; i < nr; i++)
			skip |= v->var[j] == r[i];
		if (!skip)
			out[n++] = v->var[j];
	}
	return n;
}

TVal tb_reduce(TraBuild *l, TVal v, TbRed red, int nr, const int *r);

/* mean: the sum over the indices, times one over their extents' product. */
static TVal mean(TraBuild *l, TVal v, int nr, const int *r)
{
	double count = 1;
	for (int i = 0; i < nr; i++)
		count *= (double)l->extent.v[r[i]];
	TVal s = tb_reduce(l, v, TB_SUM, nr, r);
	s.pend = kx_op(l->arena, KOP_MUL, s.op >= 0 ? in_or(l, s.pend, 0) : s.pend, kx_const(l->arena, 1.0 / count), NULL);
	return s;
}

/*
 * argmax[k](e): the first position along k where e is largest.  e is made
 * once; m = max[k](e); then min over k of (e == m ? the index along k : inf),
 * so ties go to the first position, as numpy's argmax.
 */
static TVal argreduce(TraBuild *l, TVal v, TbRed red, int k)
{
	if (v.op < 0)
		return (TVal){.op = -1, .pend = kx_const(l->arena, 0)};
	bool varies = false;
	for (int i = 0; i < v.nvar; i++)
		varies |= v.var[i] == k;
	v = tb_absorb(l, v);
	if (!varies) {          /* e is the same all along k: the first position */
		v.pend = kx_const(l->arena, 0);
		return v;
	}
	v.fresh = false;        /* read twice: the max, and the comparison */
	TVal m = tb_reduce(l, v, red == TB_ARGMAX ? TB_MAX : TB_MIN, 1, &k);
	KExpr *e = kx_op(l->arena, KOP_WHERE,
	                 kx_op(l->arena, KOP_EQ, kx_in(l->arena, 0), kx_in(l->arena, 1), NULL),
	                 kx_idx(l->arena, k), kx_const(l->arena, INFINITY));
	TVal t = tb_join_expr(l, v, m, e);
	return tb_reduce(l, t, TB_MIN, 1, &k);
}

TVal tb_reduce(TraBuild *l, TVal v, TbRed red, int nr, const int *r)
{
	if (red == TB_MEAN)
		return mean(l, v, nr, r);
	if (red == TB_ARGMAX || red == TB_ARGMIN)
		return argreduce(l, v, red, r[0]);
	AggKind agg = red == TB_MAX ? AGG_MAX : red == TB_MIN ? AGG_MIN : AGG_ADD;
	double mult = 1;
	int present[MAXDIM], np = 0;

	for (int i = 0; i < nr; i++) {
		bool found = false;
		for (int j = 0; j < v.nvar; j++)
			found |= v.var[j] == r[i];
		if (found)
			present[np++] = r[i];
		else
			mult *= (double)l->extent.v[r[i]];
	}
	if (v.op < 0 || np == 0) {
		/* nothing to reduce over: sum multiplies by the extents */
		if (agg == AGG_ADD && mult != 1)
			v.pend = kx_op(l->arena, KOP_MUL, v.pend ? v.pend : kx_in(l->arena, 0), kx_const(l->arena, mult), NULL);
		return v;
	}

	v = tb_absorb(l, v);
	int keep[MAXDIM];
	int nkeep = keep_order(l, &v, np, present, keep);
	set_output_order(l, v.op, v.nvar, v.var, nkeep, keep);
	TraOp *p = op_at(l, v.op);
	Kernel *k = tra_op_kernel(p);
	if (k->nwin > 0 && agg != AGG_ADD)
		tr_bug("a convolution reduced by %s", agg_name(agg));
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
	TVal out = {.nvar = nkeep, .fresh = false};
	memcpy(out.var, keep, sizeof out.var);
	out.op = push(l, op);
	if (agg == AGG_ADD && mult != 1)
		out.pend = kx_op(l->arena, KOP_MUL, kx_in(l->arena, 0), kx_const(l->arena, mult), NULL);
	return out;
}

static bool is_const_val(const TVal *v, double c)
{
	return v->op < 0 && v->pend && v->pend->kind == KX_CONST && v->pend->val == c;
}

TVal tb_binary(TraBuild *l, KOp kop, TVal a, TVal b)
{
	/* x * 1, 1 * x, x + 0, 0 + x, x - 0, x / 1: x (autodiff makes these) */
	if ((kop == KOP_MUL && is_const_val(&b, 1)) || ((kop == KOP_ADD || kop == KOP_SUB) && is_const_val(&b, 0)) ||
	    (kop == KOP_DIV && is_const_val(&b, 1)))
		return a;
	if ((kop == KOP_MUL && is_const_val(&a, 1)) || (kop == KOP_ADD && is_const_val(&a, 0)))
		return b;
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

/* c ? x : 0 (or c ? 0 : x when !keep), element by element: a kernel's
 * where, so an x that is infinite or NaN where c is false (log of a
 * negative, a diverged loss) stays out; built as tb_binary builds. */
static TVal pick(TraBuild *l, TVal c, TVal x, bool keep)
{
	KExpr *zero = kx_const(l->arena, 0);
	KExpr *in[2] = {c.op >= 0 ? in_or(l, c.pend, 0) : c.pend, x.op >= 0 ? in_or(l, x.pend, 0) : x.pend};
	if (c.op >= 0 && x.op >= 0 && !same_rel(&c, &x))
		return tb_join_expr(l, c, x, kx_op(l->arena, KOP_WHERE, kx_op(l->arena, KOP_NE, kx_in(l->arena, 0), zero, NULL),
		                                   keep ? kx_in(l->arena, 1) : zero, keep ? zero : kx_in(l->arena, 1)));
	TVal out = c.op >= 0 ? c : x;
	out.pend = kx_op(l->arena, KOP_WHERE, kx_op(l->arena, KOP_NE, in[0], zero, NULL), keep ? in[1] : zero,
	                 keep ? zero : in[1]);
	if (c.op >= 0 && x.op >= 0)
		out.fresh = false;      /* read twice: do not fold into its kernel */
	return out;
}

/* where(c, a, b) over up to three relations: one map when they share one
 * relation and schema; otherwise (c ? a : 0) + (c ? 0 : b), exact for every
 * value but the sign of a zero. */
TVal tb_where(TraBuild *l, TVal c, TVal a, TVal b)
{
	TVal *rel = c.op >= 0 ? &c : a.op >= 0 ? &a : b.op >= 0 ? &b : NULL;
	bool one = true;
	TVal *all[3] = {&c, &a, &b};
	for (int i = 0; i < 3; i++)
		if (all[i]->op >= 0 && !same_rel(all[i], rel))
			one = false;
	if (one) {
		TVal out = rel ? *rel : c;
		KExpr *e[3];
		for (int i = 0; i < 3; i++)
			e[i] = all[i]->op >= 0 ? in_or(l, all[i]->pend, 0) : all[i]->pend;
		out.pend = kx_op(l->arena, KOP_WHERE, e[0], e[1], e[2]);
		if (rel && (c.op >= 0) + (a.op >= 0) + (b.op >= 0) > 1)
			out.fresh = false;
		return out;
	}
	TVal c2 = c;
	c2.fresh = false;
	return tb_binary(l, KOP_ADD, pick(l, c, a, true), pick(l, c2, b, false));
}

/* A[i, k]: the tensor's relation, its key dims named by the index vars.  A
 * repeated index takes a diagonal: filter the keys where the dims agree, a
 * map that reads each chunk's diagonal, and an aggregation that drops the
 * repeated key dims (each group holds the one tuple the filter kept). */
TVal tb_access(TraBuild *l, int op, int nvar, const int *var)
{
	TVal v = {.op = op, .nvar = nvar};
	int first[MAXDIM], ndistinct = 0, distinct[MAXDIM], at[MAXDIM];
	TraOp f = {.kind = TRA_FILTER};

	for (int d = 0; d < v.nvar; d++) {
		v.var[d] = var[d];
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
	tb_input_labels(k, 0, &f.type, v.var);
	k->noutdim = ndistinct;
	m.type.nchunk = ndistinct;
	for (int c = 0; c < ndistinct; c++) {
		k->outlab[c] = distinct[c];
		m.type.chunkdim[c] = at[c];
	}
	tb_compact_labels(k);
	m.u.map.in = fi;
	m.u.map.kernel = k;
	int mi = push(l, m);

	TraOp g = {.kind = TRA_AGG};
	g.u.agg.in = mi;
	g.u.agg.agg = AGG_ADD;
	g.u.agg.ngroup = ndistinct;
	memcpy(g.u.agg.group, at, sizeof at);
	g.type = make_type(l, ndistinct, distinct, f.type.dtype);
	TVal out = {.op = push(l, g), .nvar = ndistinct};
	memcpy(out.var, distinct, sizeof out.var);
	return out;
}

/* f32(e), f64(e): e in its own type, then a map to the other. */
TVal tb_convert(TraBuild *l, TVal v, DType to)
{
	if (v.op < 0)
		return v;               /* a constant takes its context's type anyway */
	if (v.pend)
		v = tb_absorb(l, v);
	const RelType *t = &op_at(l, v.op)->type;
	if (t->dtype == to)
		return v;
	TraOp op = {.kind = TRA_MAP, .type = *t};
	op.type.dtype = to;
	Kernel *k = kernel_new(l->arena, 1);
	tb_input_labels(k, 0, t, v.var);
	k->noutdim = t->nchunk;
	memcpy(k->outlab, k->inlab[0], sizeof k->outlab);
	tb_compact_labels(k);
	op.u.map.in = v.op;
	op.u.map.kernel = k;
	TVal out = v;
	out.op = push(l, op);
	out.pend = NULL;
	out.fresh = true;
	return out;
}


TVal tb_unary(TraBuild *l, KOp op, TVal v)
{
	v.pend = kx_op(l->arena, op, v.op >= 0 ? in_or(l, v.pend, 0) : v.pend, NULL, NULL);
	return v;
}

/* The op holding v with keys and chunks in the given var order (every var
 * of v, each once), its pending expression applied. */
int tb_finish(TraBuild *l, TVal v, int n, const int *order)
{
	if (v.op < 0)
		tr_bug("a value without a relation reached tb_finish");
	const RelType *t = &op_at(l, v.op)->type;
	bool in_order = t->nchunk == n;
	for (int c = 0; in_order && c < n; c++)
		in_order = v.var[t->chunkdim[c]] == order[c];
	if (v.pend || !in_order) {
		v = tb_absorb(l, v);
		set_output_order(l, v.op, v.nvar, v.var, n, order);
	}
	bool identity = true;
	TraOp rk = {.kind = TRA_REKEY};
	rk.u.rekey.in = v.op;
	rk.u.rekey.nkey = n;
	for (int i = 0; i < n; i++) {
		for (int d = 0; d < v.nvar; d++)
			if (v.var[d] == order[i])
				rk.u.rekey.keymap[i] = d;
		identity &= rk.u.rekey.keymap[i] == i;
	}
	if (identity && v.nvar == n)
		return v.op;
	rk.type = make_type(l, n, order, op_at(l, v.op)->type.dtype);
	return push(l, rk);
}
