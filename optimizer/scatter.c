/*
 * scatter.c: scatter-adds into a base (HACKING.md "Gathers").
 *
 * Autodiff makes a gather's adjoint a scatter into zeros: the rows G added
 * at the rows idx names of a relation shaped like the table.  A table that
 * several gathers read gets one scatter per gather, summed by dense joins,
 * and an SGD step `E - lr * dE` is one more dense join: each a pass over
 * the table's whole share, though only the rows read change.  This pass
 * folds those sums into scatters that add into a *base* (TRA_SCATTER's
 * third input), one rewrite:
 *
 *   A + k * S   ->   scatter(G_1, idx_1) times k into ... scatter(G_n, idx_n) times k into A
 *
 * where the join's kernel is exactly in_A + k * in_S (`linear`: a sum of
 * the two inputs times constants, A's coefficient 1, no constant term), S
 * is read by this join alone and is a *chain*: a scatter into zeros, or a
 * join this pass folded whose own A was a chain read by it alone, so S is
 * the sum of its links' scattered rows and nothing else.  k may also be a
 * 0-d relation times a constant (`A - lr * S` with lr an input): S's side
 * is then a product join of the 0-d relation and the chain, read by this
 * join alone.  A constant factor is the scatter's scale, applied as each
 * row adds (no pass of its own); a 0-d factor is a join with the rows (a
 * pass over the batch's rows, not the table's).
 *
 * So dE = s1 + s2 + s3 (a join of two scatters is the case A = a chain,
 * k = 1) becomes one chain, and E - lr * dE the chain's rows, times -lr,
 * added into E; the runtime adds in place when the base dies there
 * (ia_in_place), so an SGD step on a gathered table touches the rows read.
 * A chain whose bottom is not zeros (A + S made earlier, A not a chain)
 * does not fold again: c * A would be a dense op of its own.
 *
 * Runs after opt_sparsity (its bases and rows must be dense and whole) and
 * before opt_block (one chunk per tensor): the program is rebuilt, each
 * folded join replaced by its chain and the ops it absorbed dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

/* One scattered term: the rows src (old op), times k and the 0-d old op
 * scal when scal >= 0, added at index's values along dim. */
typedef struct Link {
	int src, index, dim, tensor, itensor;
	double k;
	int scal;
} Link;

/* What old op x sums: its links added into the old op `bottom`, or into
 * zeros when bottom < 0 (then x is a chain other joins may fold). */
typedef struct Chain {
	bool folded;            /* x is a join this pass replaces, or a scatter into zeros */
	int bottom;
	Vec(Link) links;
} Chain;

typedef struct Fuse {
	const TraProg *old;
	int *nread;             /* per old op: its readers */
	int *loop, *parent;     /* per old op: the innermost loop op around it, -1; per loop op: the one around it */
	Chain *ch;              /* per old op */
	bool *absorbed;         /* per old op: re-made by its only reader's chain, dropped */
} Fuse;

/* ---- which joins fold ---- */

static bool lin(const KExpr *e, double w, double *k, double *c)
{
	switch (e->kind) {
	case KX_IN:
		if (e->in > 1)
			return false;
		k[e->in] += w;
		return true;
	case KX_CONST:
		*c += w * e->val;
		return true;
	case KX_IDX:
		return false;
	case KX_OP:
		switch (e->op) {
		case KOP_ADD:
			return lin(e->arg[0], w, k, c) && lin(e->arg[1], w, k, c);
		case KOP_SUB:
			return lin(e->arg[0], w, k, c) && lin(e->arg[1], -w, k, c);
		case KOP_NEG:
			return lin(e->arg[0], -w, k, c);
		case KOP_MUL:
			if (e->arg[0]->kind == KX_CONST)
				return lin(e->arg[1], w * e->arg[0]->val, k, c);
			if (e->arg[1]->kind == KX_CONST)
				return lin(e->arg[0], w * e->arg[1]->val, k, c);
			return false;
		case KOP_DIV:
			return e->arg[1]->kind == KX_CONST && e->arg[1]->val != 0 && lin(e->arg[0], w / e->arg[1]->val, k, c);
		default:
			return false;
		}
	}
	return false;
}

/* Is e exactly k[0] * in0 + k[1] * in1? */
static bool linear(const KExpr *e, double *k)
{
	double c = 0;
	k[0] = k[1] = 0;
	return lin(e, 1, k, &c) && c == 0;
}

static bool dense(const RelType *t)
{
	return !t->sparse && !t->holes;
}

/* A join that computes elementwise between two relations of its own
 * layout, chunk for chunk: every key dim matched to itself, each input's
 * labels the output's, nothing reduced, no mask or window. */
static bool elementwise(const TraProg *p, const TraOp *j)
{
	if (j->kind != TRA_JOIN || j->u.join.mask.on)
		return false;
	const Kernel *k = j->u.join.kernel;
	const RelType *l = &p->ops.v[j->u.join.left].type, *r = &p->ops.v[j->u.join.right].type, *o = &j->type;
	if (k->nin != 2 || k->reduces || k->nwin || dtype_is_int(o->dtype) || !rel_same_layout(l, o) || !rel_same_layout(r, o) ||
	    j->u.join.on.nmatch != o->nkey || k->nindim[0] != o->nchunk || k->nindim[1] != o->nchunk ||
	    k->noutdim != o->nchunk)
		return false;
	for (int d = 0; d < o->nkey; d++)
		if (j->u.join.on.lkey[d] != d || j->u.join.on.rkey[d] != d)
			return false;
	for (int c = 0; c < o->nchunk; c++)
		if (k->inlab[0][c] != k->outlab[c] || k->inlab[1][c] != k->outlab[c])
			return false;
	return true;
}

/* May old op j read old op x: is x's loop j's or one around it?  (A
 * chain re-made at j reads what x read, which x could.) */
static bool visible(const Fuse *f, int x, int j)
{
	return loop_within(f->parent, f->loop[j], f->loop[x]);
}

/* Is old op x a chain into zeros that one op alone reads? */
static bool lone_chain(const Fuse *f, int x)
{
	return f->ch[x].folded && f->ch[x].bottom < 0 && f->nread[x] == 1;
}

/* The S side of join j, old op s: a lone chain (*scal = -1), or a product
 * join only j reads of a 0-d relation (*scal) and a lone chain; that
 * chain, or -1. */
static int s_side(const Fuse *f, const TraOp *j, int s, int *scal, int *prod)
{
	*scal = *prod = -1;
	if (lone_chain(f, s))
		return s;
	const TraOp *t = &f->old->ops.v[s];
	if (t->kind != TRA_JOIN || f->nread[s] != 1 || !kx_is_product(t->u.join.kernel->expr) || t->u.join.mask.on ||
	    t->u.join.kernel->reduces || t->u.join.kernel->nwin)
		return -1;
	for (int side = 0; side < 2; side++) {
		int c = side ? t->u.join.right : t->u.join.left, y = side ? t->u.join.left : t->u.join.right;
		const RelType *ct = &f->old->ops.v[c].type;
		const Kernel *k = t->u.join.kernel;
		if (ct->nkey != 0 || !dense(ct) || ct->dtype != j->type.dtype || !lone_chain(f, y) ||
		    !rel_same_layout(&f->old->ops.v[y].type, &t->type) || !rel_same_layout(&t->type, &j->type) ||
		    t->u.join.on.nmatch != 0 || k->nindim[1 - side] != t->type.nchunk)
			continue;
		bool ok = true;
		for (int c2 = 0; c2 < t->type.nchunk; c2++)
			ok &= k->inlab[1 - side][c2] == k->outlab[c2];
		if (ok) {
			*scal = c;
			*prod = s;
			return y;
		}
	}
	return -1;
}

/* Append S's links, scaled by k and scal, to c; false when two 0-d
 * factors would meet. */
static bool add_scaled(Chain *c, const Chain *s, double k, int scal)
{
	for (int i = 0; i < s->links.n; i++)
		if (scal >= 0 && s->links.v[i].scal >= 0)
			return false;
	for (int i = 0; i < s->links.n; i++) {
		Link l = s->links.v[i];
		l.k *= k;
		if (scal >= 0)
			l.scal = scal;
		vec_push(&c->links, l);
	}
	return true;
}

/* Fold join j (old op i) if it is A + k * S, deciding its chain. */
static void try_fold(Fuse *f, int i)
{
	const TraOp *j = &f->old->ops.v[i];
	double k[2];
	if (!elementwise(f->old, j) || !linear(j->u.join.kernel->expr, k))
		return;
	int side_op[2] = {j->u.join.left, j->u.join.right};
	for (int s = 1; s >= 0; s--) {
		if (k[1 - s] != 1 || k[s] == 0)
			continue;
		int scal, prod;
		int S = s_side(f, j, side_op[s], &scal, &prod), A = side_op[1 - s];
		if (S < 0 || S == A || !visible(f, side_op[s], i) || !visible(f, S, i))
			continue;
		Chain c = {.folded = true, .bottom = A};
		if (lone_chain(f, A) && visible(f, A, i)) {
			/* A's links first, then S's: one chain into zeros */
			c.bottom = -1;
			add_scaled(&c, &f->ch[A], 1, -1);
		}
		if (!add_scaled(&c, &f->ch[S], k[s], scal)) {
			vec_free(&c.links);
			continue;
		}
		f->ch[i] = c;
		f->absorbed[S] = true;
		if (prod >= 0)
			f->absorbed[prod] = true;
		if (c.bottom < 0)
			f->absorbed[A] = true;
		return;
	}
}

/* ---- rebuilding ---- */


/* The rows of link l in the new program, times its 0-d factor if any
 * (its constant is the scatter's scale). */
static int scaled_rows(TraBuild *b, const Link *l, const int *map)
{
	int src = map[l->src];
	if (l->scal < 0)
		return src;
	const RelType *t = &b->prog->ops.v[src].type;
	int var[MAXDIM];
	for (int d = 0; d < t->nkey; d++)
		var[d] = tb_var(b, t->extent[d]);
	TVal g = tb_binary(b, KOP_MUL, tb_rel(b, map[l->scal], 0, NULL), tb_rel(b, src, t->nkey, var));
	return tb_finish(b, g, t->nkey, var);
}

/* Old join i's chain in the new program; returns its top scatter. */
static int emit_chain(Fuse *f, TraProg *p, int i, const int *map)
{
	const TraOp *j = &f->old->ops.v[i];
	const Chain *c = &f->ch[i];
	TraBuild b;
	tb_init(&b, p, j->stmt);
	int first = p->ops.n;
	int base = c->bottom >= 0 ? map[c->bottom] : -1;
	for (int k = 0; k < c->links.n; k++) {
		const Link *l = &c->links.v[k];
		TraOp sc = {.kind = TRA_SCATTER, .stmt = j->stmt, .grad_of = j->grad_of, .type = j->type};
		sc.u.gather.src = scaled_rows(&b, l, map);
		sc.u.gather.index = map[l->index];
		sc.u.gather.dim = l->dim;
		sc.u.gather.tensor = l->tensor;
		sc.u.gather.itensor = l->itensor;
		sc.u.gather.base = base;
		sc.u.gather.scale = l->k;
		base = tra_push(p, sc);
	}
	for (int k = first; k < p->ops.n; k++)         /* the scaling maps: the chain's backward too */
		p->ops.v[k].grad_of = j->grad_of;
	tb_free(&b);
	return base;
}

int opt_fuse_scatters(TraProg *p)
{
	int n = p->ops.n, folded = 0;
	Fuse f = {p, xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(int)),
	          xcalloc(n + 1, sizeof(Chain)), xcalloc(n + 1, sizeof(bool))};
	for (int i = 0, cur = -1; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_ENDLOOP)
			cur = f.parent[cur];
		f.loop[i] = cur;
		if (op->kind == TRA_LOOP) {
			f.parent[i] = cur;
			cur = i;
		}
		int in[MAXIN];
		int k = tra_inputs(op, in);
		for (int j = 0; j < k; j++)
			f.nread[in[j]]++;
	}
	for (int i = 0; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_SCATTER && op->u.gather.base < 0 && dense(&p->ops.v[op->u.gather.src].type)) {
			Chain *c = &f.ch[i];
			c->folded = true;
			c->bottom = -1;
			vec_push(&c->links, ((Link){op->u.gather.src, op->u.gather.index, op->u.gather.dim, op->u.gather.tensor,
			                            op->u.gather.itensor, 1, -1}));
		} else if (op->kind == TRA_JOIN) {
			try_fold(&f, i);
		}
	}
	for (int i = 0; i < n; i++)
		folded += p->ops.v[i].kind == TRA_JOIN && f.ch[i].folded;
	if (folded) {
		/* the old ops aside; the program rebuilt into p */
		TraProg oldp = *p;
		oldp.ops.v = xcalloc(n + 1, sizeof *oldp.ops.v);
		memcpy(oldp.ops.v, p->ops.v, (size_t)n * sizeof *p->ops.v);
		const TraOp *old = oldp.ops.v;
		f.old = &oldp;
		p->ops.n = 0;
		int *map = xcalloc(n + 1, sizeof *map);
		for (int i = 0; i < n; i++) {
			map[i] = -1;
			if (f.absorbed[i])
				continue;
			if (old[i].kind == TRA_JOIN && f.ch[i].folded) {
				map[i] = emit_chain(&f, p, i, map);
				continue;
			}
			TraOp op = old[i];
			tra_op_remap(&op, map);
			map[i] = tra_push(p, op);
		}
		free(map);
		free(oldp.ops.v);
		f.old = p;
	}
	for (int i = 0; i < n; i++)
		vec_free(&f.ch[i].links);
	free(f.ch);
	free(f.nread);
	free(f.loop);
	free(f.parent);
	free(f.absorbed);
	return folded;
}
