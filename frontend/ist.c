/*
 * ist.c: IST loops' bodies (HACKING.md "IST"), each planned apart as a
 * one-rank program on the subnet, derived from the TRA the front end made:
 *
 *   trac_ist_split   sema lowers each IST loop's body into the program
 *                    and marks it (IstLoop.op, stmt0, nstmt); take it out
 *                    into a program of its own, at the program's extents,
 *                    and leave the loop empty (the IST run stands for it)
 *   trac_ist_plan    the body for a plan of n ranks: a copy whose dims of
 *                    the split sizes are cut to H / n, then autodiff,
 *                    hoisting, contraction order, sparsity, scatter
 *                    fusion, and the plan for one rank
 *
 * A body program is what the body compiled alone would be: the program's
 * declarations (inputs' reads, params' initial values, in order, those
 * after the loop after it), the loop op, the body's ops and statements;
 * its tensors are the program's.  A dim is cut when it meets a dim of a
 * param declared with a split size (Tensor.dimsize): the classes of key
 * dims blocking unites (opt_block_classes) say which meet.  Numbers are
 * never cut: a size or const computed from a split size, mean's divisor
 * over a split dim, keep the program's values in the body too.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/driver.h"

struct IstBodies {
	int n;
	TraProg **body;                 /* per IST loop: its body at the program's extents */
	Vec(TraProg *) cut;             /* the subnets' programs made (their plans point into them) */
};

bool trac_ist_divides(const TraProg *p, int nranks, const IstLoop **loop, int *split)
{
	for (int i = 0; i < p->ist.n; i++)
		for (int z = 0; z < p->ist.v[i].nsplit; z++)
			if (p->ist.v[i].extent[z] % nranks) {
				*loop = &p->ist.v[i];
				*split = z;
				return false;
			}
	return true;
}

/* The endloop of the loop op at `op`. */
static int loop_end(const TraProg *p, int op)
{
	int depth = 0;
	for (int i = op; i < p->ops.n; i++) {
		depth += p->ops.v[i].kind == TRA_LOOP ? 1 : p->ops.v[i].kind == TRA_ENDLOOP ? -1 : 0;
		if (depth == 0)
			return i;
	}
	tr_bug("an IST loop without its end");
}

/* A declaration's op: an input's read, a param's initial value and its
 * store (lower_input, lower_param_init). */
static bool declaration(const TraProg *p, int i)
{
	const TraOp *op = &p->ops.v[i];
	return op->kind == TRA_INPUT || op->kind == TRA_INIT ||
	       (op->kind == TRA_STORE && op->stmt < 0 && p->ops.v[op->u.store.in].kind == TRA_INIT);
}

static void push_remapped(TraProg *b, const TraProg *p, int i, int *map, int stmt0)
{
	TraOp op = p->ops.v[i];
	int in[MAXIN];
	int k = tra_inputs(&op, in);
	for (int j = 0; j < k; j++)
		if (map[in[j]] < 0)
			tr_bug("IST body op %d reads op %d outside the body", i, in[j]);
	tra_op_remap(&op, map);
	if (op.stmt >= 0)
		op.stmt -= stmt0;
	map[i] = tra_push(b, op);
}

/* IST loop `loop`'s body as a program of its own. */
static TraProg *body_of(const TraProg *p, int loop)
{
	const IstLoop *l = &p->ist.v[loop];
	int end = loop_end(p, l->op);
	TraProg *b = tra_new();
	for (int t = 0; t < p->tensors.n; t++)
		vec_push(&b->tensors, p->tensors.v[t]);
	for (int st = l->stmt0; st < l->stmt0 + l->nstmt; st++) {
		Stmt s = {p->stmts.v[st].loc, xstrdup(p->stmts.v[st].text)};
		vec_push(&b->stmts, s);
	}
	for (int i = 0; i < p->ist.n; i++)
		vec_push(&b->ist, p->ist.v[i]);
	int *map = xcalloc((size_t)p->ops.n + 1, sizeof *map);
	for (int i = 0; i < p->ops.n; i++)
		map[i] = -1;
	for (int i = 0; i < p->ops.n; i++)
		if ((i >= l->op && i <= end) || declaration(p, i))
			push_remapped(b, p, i, map, l->stmt0);
	free(map);
	return b;
}

/* Leave IST loop `loop` of p empty: its body's ops and statements out,
 * the ops and statements after renumbered. */
static void cut_out(TraProg *p, int loop)
{
	IstLoop *l = &p->ist.v[loop];
	int end = loop_end(p, l->op), nop = end - l->op - 1;
	int *map = xcalloc((size_t)p->ops.n + 1, sizeof *map);
	int n = 0;
	for (int i = 0; i < p->ops.n; i++) {
		map[i] = i > l->op && i < end ? -1 : n;
		if (map[i] < 0)
			continue;
		TraOp op = p->ops.v[i];
		tra_op_remap(&op, map);
		if (op.stmt >= l->stmt0 + l->nstmt)
			op.stmt -= l->nstmt;
		p->ops.v[n++] = op;
	}
	p->ops.n = n;
	free(map);
	for (int st = l->stmt0; st < l->stmt0 + l->nstmt; st++)
		free(p->stmts.v[st].text);
	memmove(&p->stmts.v[l->stmt0], &p->stmts.v[l->stmt0 + l->nstmt],
	        sizeof *p->stmts.v * (size_t)(p->stmts.n - l->stmt0 - l->nstmt));
	p->stmts.n -= l->nstmt;
	for (int k = loop + 1; k < p->ist.n; k++) {
		p->ist.v[k].op -= nop;
		p->ist.v[k].stmt0 -= l->nstmt;
	}
	l->nstmt = 0;
}

IstBodies *trac_ist_split(TraProg *p)
{
	IstBodies *b = xcalloc(1, sizeof *b);
	b->n = p->ist.n;
	b->body = xcalloc((size_t)b->n + 1, sizeof *b->body);
	for (int i = b->n - 1; i >= 0; i--) {  /* the last first: the earlier ones' ops stay where they are */
		b->body[i] = body_of(p, i);
		cut_out(p, i);
	}
	return b;
}

/* Is tensor dim t.d declared with one of l's split sizes? */
static bool split_dim(const IstLoop *l, const Tensor *t, int d)
{
	for (int z = 0; z < l->nsplit && t->dimsize[d]; z++)
		if (!strcmp(l->split[z], t->dimsize[d]))
			return true;
	return false;
}

/* The op whose key dims are param t's, for op i carrying it (its own
 * value, or the value it stores), or -1. */
static int param_value(const TraProg *p, int i, int *t)
{
	const TraOp *op = &p->ops.v[i];
	switch (op->kind) {
	case TRA_INIT:
	case TRA_LOAD:
		*t = op->u.init.tensor;
		return i;
	case TRA_STORE:
		*t = op->u.store.tensor;
		return op->u.store.in;
	case TRA_GRAD:
		*t = op->u.grad.tensor;
		return i;
	default:
		return -1;
	}
}

/* A window, a gather or a scatter along a cut dim reads positions of the
 * whole tensor: not supported; false (reported) when the body has one. */
static bool cut_supported(const TraProg *p, const BlockClasses *c, const bool *cut, const IstLoop *l)
{
	for (int i = 0; i < p->ops.n; i++) {
		const TraOp *op = &p->ops.v[i];
		int in = -1, dim = -1;
		switch (op->kind) {
		case TRA_SLICE:
			in = op->u.slice.in;
			dim = op->u.slice.dim;
			break;
		case TRA_GATHER:
			in = op->u.gather.src;
			dim = op->u.gather.dim;
			break;
		case TRA_SCATTER:
			in = i;
			dim = op->u.gather.dim;
			break;
		case TRA_CONV:
			for (int d = 0; d < op->type.nkey; d++)
				if (cut[c->of[c->base[i] + d]])
					in = i, dim = d;
			break;
		case TRA_INPUT: case TRA_JOIN: case TRA_AGG: case TRA_MAP: case TRA_REKEY:
		case TRA_FILTER: case TRA_OUTPUT: case TRA_INIT: case TRA_LOAD: case TRA_RANGE:
		case TRA_COUNTER: case TRA_STORE: case TRA_PRINT: case TRA_LOOP: case TRA_ENDLOOP:
		case TRA_GRAD:
			break;          /* reads whole chunks of its inputs' keys */
		}
		if (in < 0 || dim < 0 || !cut[c->of[c->base[in] + dim]])
			continue;
		Loc at = op->stmt >= 0 ? p->stmts.v[op->stmt].loc : l->loc;
		diag(DIAG_ERROR, at, "a window, gather or scatter along a dim of split size in an IST loop is not "
		     "supported yet: each subnet holds its own share of that dim");
		return false;
	}
	return true;
}

/* Cut the dims of IST loop `loop`'s split sizes in body p to H / nranks:
 * every key dim meeting a split param dim, and the params' shapes. */
static bool cut_split(TraProg *p, int loop, int nranks)
{
	const IstLoop *l = &p->ist.v[loop];
	BlockClasses *c = opt_block_classes(p);
	bool *cut = xcalloc((size_t)c->n + 1, sizeof *cut);
	for (int i = 0; i < p->ops.n; i++) {
		int t, v = param_value(p, i, &t);
		for (int d = 0; v >= 0 && d < p->tensors.v[t].rank; d++)
			if (split_dim(l, &p->tensors.v[t], d))
				cut[c->of[c->base[v] + d]] = true;
	}
	bool ok = cut_supported(p, c, cut, l);
	for (int i = 0; ok && i < p->ops.n; i++) {
		RelType *ty = &p->ops.v[i].type;
		for (int d = 0; d < ty->nkey; d++)
			if (cut[c->of[c->base[i] + d]])
				ty->extent[d] = ty->block[d] = ty->extent[d] / nranks;
	}
	for (int t = 0; ok && t < p->tensors.n; t++) {
		Tensor *ten = &p->tensors.v[t];
		for (int d = 0; d < ten->rank; d++)
			if (ten->role == TENSOR_PARAM && split_dim(l, ten, d))
				ten->shape[d] /= nranks;
	}
	free(cut);
	opt_block_classes_free(c);
	return ok;
}

static void verify(const TraProg *p, const char *after)
{
	Buf err = {0};
	if (!tra_verify(p, &err))
		tr_bug("IST body invalid after %s: %s", after, err.s);
}

IaPlan *trac_ist_plan(IstBodies *b, int loop, int nranks, const OptOptions *base, bool quiet)
{
	TraProg *p = tra_copy(b->body[loop]);
	vec_push(&b->cut, p);
	if (!cut_split(p, loop, nranks))
		return NULL;
	verify(p, "cutting the split sizes");
	/* the passes of the front end after lowering; the autodiff warnings of
	 * a body are the same for every count: said once */
	static FILE *devnull;
	FILE *loud = diag_out;
	if (quiet && !devnull)
		devnull = fopen("/dev/null", "w");
	if (quiet && devnull)
		diag_out = devnull;
	opt_autodiff(p);
	diag_out = loud;
	if (diag_errors())
		return NULL;
	verify(p, "autodiff");
	OptOptions o = *base;
	o.nranks = 1;
	/* pins name the program's tensors and lines: its plans' only */
	o.blockpins = NULL;
	o.nblockpins = 0;
	o.placepins = NULL;
	o.nplacepins = 0;
	o.stratpins = NULL;
	o.nstratpins = 0;
	o.nnzpins = NULL;
	o.nnnzpins = 0;
	o.memo = NULL;
	if (o.level > 0) {
		opt_hoist(p);
		verify(p, "hoisting");
		opt_contract_within(p, opt_contract_limit(&o, 1), NULL);
		verify(p, "contraction order");
	}
	opt_sparsity(p, &o);
	if (o.level > 0) {
		opt_fuse_scatters(p);
		verify(p, "scatter fusion");
	}
	IaPlan *plan = opt_plan(p, &o);
	if (plan && diag_errors()) {
		ia_free(plan);
		return NULL;
	}
	return plan;
}

void trac_ist_free(IstBodies *b)
{
	if (!b)
		return;
	for (int i = 0; i < b->n; i++)
		tra_free(b->body[i]);
	free(b->body);
	for (int i = 0; i < b->cut.n; i++)
		tra_free(b->cut.v[i]);
	vec_free(&b->cut);
	free(b);
}
