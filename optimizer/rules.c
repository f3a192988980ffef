/*
 * rules.c: the equivalence rules of rules.def as rewrites of IA plans.
 *
 * Each rule has a matcher (does its pattern, with its side condition, sit at
 * op i?) and a rewriter that emits the right side in place of op i.  A rule
 * application rebuilds the plan op by op: ops before and after i are copied
 * (their inputs renumbered), op i is replaced by the rule's ops, and ops no
 * one reads any more are swept.  Every rebuilt op's placement is derived
 * again from its new inputs (ia_derive_place), so a rewrite only states what
 * it computes; one that would make an op invalid on its inputs' placements
 * fails, and rule_apply returns NULL.  Where a rule changes the placement of
 * the relation it computes (R2-6, BMM, CMM, RMM), a move back to the old
 * placement follows, so the rest of the plan is untouched.
 *
 * Two plans are equivalent when they hold the same (key, chunk) pairs once
 * the site is projected away (the paper's definition); tests/unit/
 * test_rules.c checks every rule so, by running both sides in the
 * interpreter (interp.c) on random data over simulated sites.
 *
 * The search (impls.c, search.c) does not rewrite plans: its implementations
 * (impls.def) are the right sides these rules derive from Table 1's
 * translation, built directly.  The rewriters here build their right sides
 * with the same builders (impl_build).  -O1 applies the rules that never
 * make a plan worse.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

/* ---- rebuilding ---- */

typedef struct Rw {
	const IaPlan *old;
	Emit e;                 /* into the new plan; e.failed: the rule does not apply */
	int *map;               /* old op -> new op */
	int variant;
} Rw;

static int emit(Rw *r, IaOp op)
{
	return emit_op(&r->e, op);
}

/* The op with its inputs renumbered into the new plan. */
static IaOp remap(Rw *r, const IaOp *op)
{
	return ia_op_remap(op, r->map, r->e.p->arena);
}

/* Drop ops nobody reads (a join folded into its aggregation). */
static IaPlan *sweep(IaPlan *old)
{
	int n = old->ops.n;
	bool *live = xcalloc(n + 1, sizeof *live);
	for (int i = n - 1; i >= 0; i--) {
		if (!ia_has_result(old->ops.v[i].kind))
			live[i] = true;     /* writes, stores, prints and loop bounds */
		if (!live[i])
			continue;
		int in[MAXIN];
		int k = ia_inputs(&old->ops.v[i], in);
		for (int j = 0; j < k; j++)
			live[in[j]] = true;
	}
	Rw r = {old, {ia_plan_like(old), .strict = true}, xcalloc(n + 1, sizeof(int)), 0};
	for (int i = 0; i < n; i++)
		if (live[i])
			r.map[i] = emit(&r, remap(&r, &old->ops.v[i]));
	free(r.map);
	free(live);
	ia_free(old);
	return r.e.p;
}

/* ---- helpers ---- */

#define OP(p, i) (&(p)->ops.v[(i)])

static int readers(const IaPlan *p, int j)
{
	int n = 0;
	for (int i = 0; i < p->ops.n; i++) {
		int in[MAXIN];
		int k = ia_inputs(OP(p, i), in);
		for (int x = 0; x < k; x++)
			n += in[x] == j;
	}
	return n;
}

static bool is_move(const IaOp *op)
{
	return op->kind == IA_BCAST || op->kind == IA_SHUFFLE;
}

static bool is_dup(const IaOp *op)
{
	if (op->kind != IA_MAP || op->u.map.kernel)
		return false;
	for (int d = 0; d < op->u.map.nkey; d++)
		if (op->u.map.keymap[d] < 0)
			return true;
	return false;
}

static int move_in(const IaOp *op)
{
	return op->kind == IA_BCAST ? op->u.bcast.in : op->u.shuffle.in;
}

/* A move of new-plan op `in` to placement `to`. */
static int move_to(Rw *r, int in, const Place *to, int stmt, int tra)
{
	return emit_move(&r->e, in, to, stmt, tra);
}

/* IA ops as the TRA ops the implementations' builders take: a join (its
 * kernel in the new plan's arena), and an aggregation (an IA aggregation,
 * or a fused join's). */
static TraOp as_join(Rw *r, const IaOp *j)
{
	TraOp t = {.kind = TRA_JOIN, .stmt = j->stmt, .type = j->type};
	if (j->u.join.mask.on)
		tr_bug("a rule rewrites a sampled join (only the search makes them)");
	t.u.join.left = j->u.join.left;
	t.u.join.right = j->u.join.right;
	t.u.join.on.nmatch = j->u.join.on.nmatch;
	memcpy(t.u.join.on.lkey, j->u.join.on.lkey, sizeof t.u.join.on.lkey);
	memcpy(t.u.join.on.rkey, j->u.join.on.rkey, sizeof t.u.join.on.rkey);
	t.u.join.kernel = kernel_clone(r->e.p->arena, j->u.join.kernel);
	return t;
}

static TraOp as_agg(const IaOp *op)
{
	TraOp t = {.kind = TRA_AGG, .stmt = op->stmt, .type = op->type};
	if (op->kind == IA_AGG) {
		t.u.agg.in = op->u.agg.in;
		t.u.agg.ngroup = op->u.agg.ngroup;
		memcpy(t.u.agg.group, op->u.agg.group, sizeof t.u.agg.group);
		t.u.agg.agg = op->u.agg.agg;
	} else {
		t.u.agg.ngroup = op->u.join.ngroup;
		memcpy(t.u.agg.group, op->u.join.group, sizeof t.u.agg.group);
		t.u.agg.agg = op->u.join.kernel->red;
	}
	return t;
}

/* The contraction's fused row for its inputs' placements (new-plan ops). */
static ImplKind fused_row(Rw *r, int l, int rr)
{
	bool la = r->e.p->ops.v[l].place.kind == PL_ALL, ra = r->e.p->ops.v[rr].place.kind == PL_ALL;
	return la && ra ? IM_CONTRACT_LOCAL : la || ra ? IM_BMM : IM_COPART;
}

/* After a rewrite changed where a relation lives: back where the old op
 * had it.  A partial result of a contraction (u) is first completed. */
static int restore(Rw *r, int nw, const IaOp *old, const Unit *u)
{
	const IaOp *n = OP(r->e.p, nw);
	if (place_eq(&n->place, &old->place) || old->place.kind == PL_PARTIAL)
		return nw;
	if (n->place.kind == PL_PARTIAL) {
		if (!u) {
			r->e.failed = true;
			return nw;
		}
		return impl_finish_partial(&r->e, nw, &old->place, u);
	}
	return move_to(r, nw, &old->place, old->stmt, old->tra);
}

/* ---- the rules: matchers ---- */

static bool m_R1_1(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	return op->kind == IA_FILTER && OP(p, op->u.filter.in)->kind == IA_FILTER &&
	       op->u.filter.pred.neq + OP(p, op->u.filter.in)->u.filter.pred.neq <= MAXDIM;
}

static bool m_R1_2(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_MAP || is_dup(op))
		return false;
	const IaOp *in = OP(p, op->u.map.in);
	if (in->kind != IA_MAP || is_dup(in) || !op->u.map.kernel != !in->u.map.kernel)
		return false;
	if (!op->u.map.kernel)
		return true;
	return op->type.dtype == in->type.dtype && OP(p, in->u.map.in)->type.dtype == in->type.dtype &&
	       !op->u.map.kernel->reduces && !in->u.map.kernel->reduces;
}

/* A kernel that takes a diagonal inside its chunk (a label twice in its
 * input) reads square chunks only.  A filter on the key diagonal gives it
 * those; below the filter it sees every chunk, which is square only when
 * the dims it pairs are cut into equal whole blocks. */
static bool kernel_fits_every_chunk(const Kernel *k, const RelType *t)
{
	for (int a = 0; a < k->nindim[0]; a++)
		for (int b = a + 1; b < k->nindim[0]; b++) {
			if (k->inlab[0][a] != k->inlab[0][b])
				continue;
			int da = t->chunkdim[a], db = t->chunkdim[b];
			if (t->block[da] != t->block[db] || t->extent[da] % t->block[da] != 0 ||
			    t->extent[db] % t->block[db] != 0)
				return false;
		}
	return true;
}

static bool m_R1_3(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind == IA_MAP && op->u.map.kernel) {
		const IaOp *f = OP(p, op->u.map.in);
		return f->kind == IA_FILTER && kernel_fits_every_chunk(op->u.map.kernel, &f->type);
	}
	if (op->kind == IA_FILTER) {
		const IaOp *in = OP(p, op->u.filter.in);
		return in->kind == IA_MAP && in->u.map.kernel;
	}
	return false;
}

static bool m_R1_4(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_MAP || !op->u.map.kernel || op->u.map.kernel->reduces)
		return false;
	const IaOp *in = OP(p, op->u.map.in);
	if (in->kind != IA_AGG || op->type.dtype != in->type.dtype)
		return false;
	bool uses = false;
	return kx_distributes(op->u.map.kernel->expr, in->u.agg.agg, &uses) && uses;
}

static bool m_R1_5(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	return op->kind == IA_FILTER && OP(p, op->u.filter.in)->kind == IA_AGG;
}

/* Split a predicate over a join's output dims into the inputs' own. */
static bool split_pred(const IaPlan *p, const IaOp *j, const KeyPred *pred, KeyPred *lp, KeyPred *rp)
{
	const IaOp *l = OP(p, j->u.join.left), *r = OP(p, j->u.join.right);
	int nl = l->type.nkey;
	int rdim[MAXDIM];       /* output dim -> right dim, or -1 */
	for (int o = 0; o < MAXDIM; o++)
		rdim[o] = -1;
	for (int d = 0; d < r->type.nkey; d++)
		rdim[ia_join_out_dim(nl, &j->u.join.on, d)] = d;
	lp->neq = rp->neq = 0;
	for (int e = 0; e < pred->neq; e++) {
		int a = pred->eq[e][0], b = pred->eq[e][1];
		bool done = false;
		if (a < nl && b < nl) {
			lp->eq[lp->neq][0] = a;
			lp->eq[lp->neq++][1] = b;
			done = true;
		}
		if (rdim[a] >= 0 && rdim[b] >= 0) {
			rp->eq[rp->neq][0] = rdim[a];
			rp->eq[rp->neq++][1] = rdim[b];
			done = true;
		}
		if (!done)
			return false;
	}
	return true;
}

static bool m_R1_6(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_FILTER)
		return false;
	const IaOp *j = OP(p, op->u.filter.in);
	if (j->kind != IA_JOIN || j->u.join.ngroup >= 0)
		return false;
	KeyPred lp, rp;
	return split_pred(p, j, &op->u.filter.pred, &lp, &rp);
}

static bool m_R1_7(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_MAP || !op->u.map.kernel || op->u.map.kernel->reduces)
		return false;
	const IaOp *j = OP(p, op->u.map.in);
	return j->kind == IA_JOIN && j->u.join.ngroup < 0 && !j->u.join.kernel->reduces &&
	       j->type.dtype == op->type.dtype && readers(p, op->u.map.in) == 1;
}

static bool m_F_1(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_AGG)
		return false;
	const IaOp *j = OP(p, op->u.agg.in);
	return j->kind == IA_JOIN && j->u.join.ngroup < 0 && readers(p, op->u.agg.in) == 1 &&
	       (!j->u.join.kernel->reduces || j->u.join.kernel->red == op->u.agg.agg);
}

static bool m_R2_1(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (!is_move(op))
		return false;
	const IaOp *in = OP(p, move_in(op));
	if (is_move(in))
		return true;
	if (op->kind == IA_BCAST)
		return in->place.kind == PL_ALL;
	return in->place.kind == PL_PART && place_eq(&in->place, &op->place);
}

static bool m_R2_2(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (is_move(op))
		return OP(p, move_in(op))->kind == IA_FILTER;
	return op->kind == IA_FILTER && is_move(OP(p, op->u.filter.in));
}

static bool perm_keymap(const IaOp *m, int nin)
{
	if (m->u.map.nkey != nin)
		return false;
	for (int d = 0; d < m->u.map.nkey; d++)
		if (m->u.map.keymap[d] < 0)
			return false;
	return true;
}

static bool m_R2_3(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (is_move(op)) {
		const IaOp *m = OP(p, move_in(op));
		if (m->kind != IA_MAP || OP(p, m->u.map.in)->place.kind == PL_PARTIAL)
			return false;
		return op->kind == IA_BCAST || m->u.map.kernel || perm_keymap(m, OP(p, m->u.map.in)->type.nkey);
	}
	if (op->kind != IA_MAP)
		return false;
	const IaOp *mv = OP(p, op->u.map.in);
	if (!is_move(mv) || OP(p, move_in(mv))->place.kind == PL_PARTIAL)
		return false;
	return mv->kind == IA_BCAST || op->u.map.kernel || perm_keymap(op, mv->type.nkey);
}

static bool m_R2_4(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_AGG || OP(p, op->u.agg.in)->kind != IA_SHUFFLE)
		return false;
	const IaOp *src = OP(p, OP(p, op->u.agg.in)->u.shuffle.in);
	if (src->place.kind == PL_ALL)
		return true;
	if (src->place.kind != PL_PART)
		return false;
	for (int d = 0; d < src->place.ndims; d++) {
		bool in = false;
		for (int g = 0; g < op->u.agg.ngroup; g++)
			in |= op->u.agg.group[g] == src->place.dims[d];
		if (!in && rel_frontier(&src->type, src->place.dims[d]) > 1)
			return false;
	}
	return true;
}

static bool m_R2_5(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_AGG || OP(p, op->u.agg.in)->kind != IA_SHUFFLE || readers(p, op->u.agg.in) != 1)
		return false;
	const IaOp *sh = OP(p, op->u.agg.in);
	const IaOp *src = OP(p, sh->u.shuffle.in);
	if (op->u.agg.ngroup == src->type.nkey || src->place.kind == PL_ALL)
		return false;
	/* the shuffle's dims must be grouped, to renumber onto the result */
	for (int d = 0; d < sh->place.ndims; d++) {
		bool in = false;
		for (int g = 0; g < op->u.agg.ngroup; g++)
			in |= op->u.agg.group[g] == sh->place.dims[d];
		if (!in)
			return false;
	}
	return true;
}

static bool m_R2_6(const IaPlan *p, int i)
{
	return OP(p, i)->kind == IA_JOIN;
}

static bool m_R2_7(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_SHUFFLE)
		return false;
	const IaOp *j = OP(p, op->u.shuffle.in);
	return j->kind == IA_JOIN && place_eq(&j->place, &op->place) &&
	       OP(p, j->u.join.left)->place.kind == PL_PART && OP(p, j->u.join.right)->place.kind == PL_PART;
}

/* A contraction at op i: a fused join, or an aggregation of a join (through
 * a shuffle) that only it reads.  *j is the join, *fuse true if fused. */
static bool contraction(const IaPlan *p, int i, int *j)
{
	const IaOp *op = OP(p, i);
	if (op->kind == IA_JOIN && op->u.join.ngroup >= 0) {
		*j = i;
		return true;
	}
	if (op->kind != IA_AGG)
		return false;
	int x = op->u.agg.in;
	if (OP(p, x)->kind == IA_SHUFFLE && readers(p, x) == 1)
		x = OP(p, x)->u.shuffle.in;
	const IaOp *jo = OP(p, x);
	if (jo->kind != IA_JOIN || jo->u.join.ngroup >= 0 || readers(p, x) != 1)
		return false;
	if (jo->u.join.kernel->reduces && jo->u.join.kernel->red != op->u.agg.agg)
		return false;
	*j = x;
	return true;
}

/* The contraction's group over its join space, and the dims only one side
 * has (not matched), with their frontiers > 1. */
typedef struct Contr {
	int j;                  /* the join */
	int ngroup;
	int group[MAXDIM];
	AggKind agg;
	RelType jt;
	int nl;
	int lonly[MAXDIM], nlo, ronly[MAXDIM], nro, summed[MAXDIM], nsum;
} Contr;

static bool contr_info(const IaPlan *p, int i, Contr *c)
{
	if (!contraction(p, i, &c->j))
		return false;
	const IaOp *op = OP(p, i), *j = OP(p, c->j);
	if (op->kind == IA_JOIN) {
		c->ngroup = op->u.join.ngroup;
		memcpy(c->group, op->u.join.group, sizeof c->group);
		c->agg = op->u.join.kernel->red;
	} else {
		c->ngroup = op->u.agg.ngroup;
		memcpy(c->group, op->u.agg.group, sizeof c->group);
		c->agg = op->u.agg.agg;
	}
	const IaOp *l = OP(p, j->u.join.left), *r = OP(p, j->u.join.right);
	c->jt = ia_join_type(&l->type, &r->type, &j->u.join.on);
	c->nl = l->type.nkey;
	c->nlo = c->nro = c->nsum = 0;
	for (int d = 0; d < c->jt.nkey; d++) {
		bool matched = false, grouped = false;
		for (int m = 0; m < j->u.join.on.nmatch; m++)
			matched |= j->u.join.on.lkey[m] == d;
		for (int g = 0; g < c->ngroup; g++)
			grouped |= c->group[g] == d;
		if (rel_frontier(&c->jt, d) == 1)
			continue;
		if (!grouped)
			c->summed[c->nsum++] = d;
		if (matched || !grouped)
			continue;
		if (d < c->nl)
			c->lonly[c->nlo++] = d;
		else
			c->ronly[c->nro++] = d;
	}
	return true;
}

static bool m_LOOKUP(const IaPlan *p, int i)
{
	const IaOp *op = OP(p, i);
	if (op->kind != IA_GATHER || OP(p, op->u.gather.src)->kind != IA_BCAST)
		return false;
	return OP(p, OP(p, op->u.gather.src)->u.bcast.in)->place.kind == PL_PART;
}

static bool m_BMM(const IaPlan *p, int i)
{
	Contr c;
	return contr_info(p, i, &c) && (c.nlo > 0 || c.nro > 0);
}

static bool m_CMM(const IaPlan *p, int i)
{
	Contr c;
	if (!contr_info(p, i, &c) || c.nsum == 0)
		return false;
	/* a summed dim must be a join key */
	const IaOp *j = OP(p, c.j);
	for (int s = 0; s < c.nsum; s++)
		for (int m = 0; m < j->u.join.on.nmatch; m++)
			if (j->u.join.on.lkey[m] == c.summed[s])
				return true;
	return false;
}

static bool m_RMM(const IaPlan *p, int i)
{
	Contr c;
	if (!contr_info(p, i, &c) || c.nlo != 1 || c.nro != 1)
		return false;
	/* every dim of one side only must be grouped (no side's own sums) */
	const IaOp *j = OP(p, c.j);
	for (int s = 0; s < c.nsum; s++) {
		bool matched = false;
		for (int m = 0; m < j->u.join.on.nmatch; m++)
			matched |= j->u.join.on.lkey[m] == c.summed[s];
		if (!matched)
			return false;
	}
	return true;
}

/* ---- the rules: rewriters ---- */

static bool a_R1_1(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *in = OP(r->old, op->u.filter.in);
	IaOp f = remap(r, op);
	f.u.filter.in = r->map[in->u.filter.in];
	f.u.filter.pred = in->u.filter.pred;
	for (int e = 0; e < op->u.filter.pred.neq; e++) {
		f.u.filter.pred.eq[f.u.filter.pred.neq][0] = op->u.filter.pred.eq[e][0];
		f.u.filter.pred.eq[f.u.filter.pred.neq++][1] = op->u.filter.pred.eq[e][1];
	}
	r->map[i] = emit(r, f);
	return true;
}

static bool a_R1_2(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *in = OP(r->old, op->u.map.in);
	IaOp m = remap(r, op);
	m.u.map.in = r->map[in->u.map.in];
	if (!op->u.map.kernel) {
		for (int d = 0; d < op->u.map.nkey; d++)
			m.u.map.keymap[d] = in->u.map.keymap[op->u.map.keymap[d]];
	} else {
		m.u.map.kernel = kernel_compose(r->e.p->arena, op->u.map.kernel, in->u.map.kernel);
		if (!m.u.map.kernel)
			return false;
	}
	r->map[i] = emit(r, m);
	return true;
}

static bool a_R1_3(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i);
	if (op->kind == IA_MAP) {
		const IaOp *f = OP(r->old, op->u.map.in);
		IaOp m = remap(r, op);
		m.u.map.in = r->map[f->u.filter.in];
		m.type = op->type;
		int mi = emit(r, m);
		IaOp g = remap(r, f);
		g.u.filter.in = mi;
		g.type = op->type;
		r->map[i] = emit(r, g);
	} else {
		const IaOp *m = OP(r->old, op->u.filter.in);
		IaOp g = remap(r, op);
		g.u.filter.in = r->map[m->u.map.in];
		g.type = OP(r->old, m->u.map.in)->type;
		int gi = emit(r, g);
		IaOp mm = remap(r, m);
		mm.u.map.in = gi;
		r->map[i] = emit(r, mm);
	}
	return true;
}

static bool a_R1_4(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *ag = OP(r->old, op->u.map.in);
	const IaOp *src = OP(r->old, ag->u.agg.in);
	IaOp m = remap(r, op);
	m.u.map.in = r->map[ag->u.agg.in];
	m.type = src->type;
	m.type.dtype = op->type.dtype;
	m.u.map.nkey = src->type.nkey;
	for (int d = 0; d < src->type.nkey; d++)
		m.u.map.keymap[d] = d;
	int mi = emit(r, m);
	IaOp a = remap(r, ag);
	a.u.agg.in = mi;
	a.type = op->type;
	r->map[i] = emit(r, a);
	return true;
}

static bool a_R1_5(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *ag = OP(r->old, op->u.filter.in);
	IaOp f = remap(r, op);
	f.u.filter.in = r->map[ag->u.agg.in];
	f.type = OP(r->old, ag->u.agg.in)->type;
	for (int e = 0; e < f.u.filter.pred.neq; e++)
		for (int k = 0; k < 2; k++)
			f.u.filter.pred.eq[e][k] = ag->u.agg.group[op->u.filter.pred.eq[e][k]];
	int fi = emit(r, f);
	IaOp a = remap(r, ag);
	a.u.agg.in = fi;
	r->map[i] = emit(r, a);
	return true;
}

static bool a_R1_6(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *j = OP(r->old, op->u.filter.in);
	KeyPred lp, rp;
	if (!split_pred(r->old, j, &op->u.filter.pred, &lp, &rp))
		return false;
	IaOp jn = remap(r, j);
	int side[2] = {j->u.join.left, j->u.join.right};
	KeyPred *pr[2] = {&lp, &rp};
	int x[MAXIN] = {-1, -1, -1};
	for (int s = 0; s < 2; s++) {
		x[s] = r->map[side[s]];
		if (pr[s]->neq == 0)
			continue;
		IaOp f = {.kind = IA_FILTER, .stmt = op->stmt, .tra = op->tra, .type = OP(r->e.p, x[s])->type};
		f.u.filter.in = x[s];
		f.u.filter.pred = *pr[s];
		x[s] = emit(r, f);
	}
	jn.u.join.left = x[0];
	jn.u.join.right = x[1];
	jn.stmt = op->stmt;
	r->map[i] = emit(r, jn);
	return true;
}

static bool a_R1_7(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *j = OP(r->old, op->u.map.in);
	IaOp jn = remap(r, j);
	jn.u.join.kernel = kernel_compose(r->e.p->arena, op->u.map.kernel, j->u.join.kernel);
	if (!jn.u.join.kernel)
		return false;
	jn.type = op->type;
	jn.stmt = op->stmt;
	r->map[i] = emit(r, jn);
	return true;
}

static bool a_F_1(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *j = OP(r->old, op->u.agg.in);
	TraOp agg = as_agg(op), join = as_join(r, j);
	Unit u = {&agg, &join, op->tra};
	int x[MAXIN] = {r->map[j->u.join.left], r->map[j->u.join.right], -1};
	r->map[i] = impl_build(&r->e, fused_row(r, x[0], x[1]), &u, x, NULL, NULL, NULL);
	return true;
}

static bool a_R2_1(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *in = OP(r->old, move_in(op));
	if (is_move(in)) {
		IaOp m = remap(r, op);
		if (m.kind == IA_BCAST)
			m.u.bcast.in = r->map[move_in(in)];
		else
			m.u.shuffle.in = r->map[move_in(in)];
		r->map[i] = emit(r, m);
	} else {
		r->map[i] = r->map[move_in(op)];
	}
	return true;
}

static bool a_R2_2(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i);
	if (is_move(op)) {
		const IaOp *f = OP(r->old, move_in(op));
		int mi = move_to(r, r->map[f->u.filter.in], &op->place, op->stmt, op->tra);
		IaOp g = remap(r, f);
		g.u.filter.in = mi;
		r->map[i] = emit(r, g);
	} else {
		const IaOp *mv = OP(r->old, op->u.filter.in);
		IaOp g = remap(r, op);
		g.u.filter.in = r->map[move_in(mv)];
		int gi = emit(r, g);
		r->map[i] = move_to(r, gi, &mv->place, mv->stmt, mv->tra);
	}
	return true;
}

/* A move's target through a map: dims renumbered by the key map (out dim
 * d is in dim keymap[d]); inverse when going the other way. */
static Place through_map(const Place *p, const IaOp *m, bool to_input)
{
	if (p->kind != PL_PART)
		return *p;
	Place q = {.kind = PL_PART, .ndims = p->ndims};
	for (int i = 0; i < p->ndims; i++) {
		if (to_input) {
			q.dims[i] = m->u.map.keymap[p->dims[i]];
		} else {
			for (int d = 0; d < m->u.map.nkey; d++)
				if (m->u.map.keymap[d] == p->dims[i])
					q.dims[i] = d;
		}
	}
	return q;
}

static bool a_R2_3(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i);
	if (is_move(op)) {
		const IaOp *m = OP(r->old, move_in(op));
		Place to = m->u.map.kernel ? op->place : through_map(&op->place, m, true);
		int mi = move_to(r, r->map[m->u.map.in], &to, op->stmt, op->tra);
		IaOp mm = remap(r, m);
		mm.u.map.in = mi;
		r->map[i] = emit(r, mm);
	} else {
		const IaOp *mv = OP(r->old, op->u.map.in);
		IaOp mm = remap(r, op);
		mm.u.map.in = r->map[move_in(mv)];
		int mi = emit(r, mm);
		Place to = op->u.map.kernel ? mv->place : through_map(&mv->place, op, false);
		r->map[i] = move_to(r, mi, &to, mv->stmt, mv->tra);
	}
	return true;
}

static bool a_R2_4(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *sh = OP(r->old, op->u.agg.in);
	TraOp agg = as_agg(op);
	Unit u = {&agg, NULL, op->tra};
	r->map[i] = impl_build(&r->e, IM_AGG_LOCAL, &u, &r->map[sh->u.shuffle.in], NULL, NULL, NULL);
	return true;
}

static bool a_R2_5(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i), *sh = OP(r->old, op->u.agg.in);
	Place to = {.kind = PL_PART, .ndims = sh->place.ndims};
	for (int d = 0; d < sh->place.ndims; d++)
		for (int g = 0; g < op->u.agg.ngroup; g++)
			if (op->u.agg.group[g] == sh->place.dims[d])
				to.dims[d] = g;
	TraOp agg = as_agg(op);
	Unit u = {&agg, NULL, op->tra};
	r->map[i] = impl_build(&r->e, IM_AGG_TWOPHASE, &u, &r->map[sh->u.shuffle.in], &to, NULL, NULL);
	return true;
}

/* An input of a join without the move in front of it. */
static int source(Rw *r, int x)
{
	const IaOp *op = OP(r->old, x);
	return r->map[is_move(op) ? move_in(op) : x];
}

static bool a_R2_6(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i);
	int ls = source(r, op->u.join.left), rs = source(r, op->u.join.right);
	Place all = place_all();
	switch (r->variant) {
	case 0:
		ls = move_to(r, ls, &all, op->stmt, op->tra);
		break;
	case 1:
		rs = move_to(r, rs, &all, op->stmt, op->tra);
		break;
	default: {
		if (op->u.join.on.nmatch == 0)
			return false;
		Place pl = place_part(op->u.join.on.nmatch, op->u.join.on.lkey);
		Place pr = place_part(op->u.join.on.nmatch, op->u.join.on.rkey);
		ls = move_to(r, ls, &pl, op->stmt, op->tra);
		rs = move_to(r, rs, &pr, op->stmt, op->tra);
		break;
	}
	}
	int x[MAXIN] = {ls, rs, -1};
	TraOp agg = as_agg(op), join = as_join(r, op);
	if (op->u.join.ngroup < 0) {
		Unit u = {&join, NULL, op->tra};
		static const ImplKind rows[] = {IM_JOIN_BCAST, IM_JOIN_BCAST, IM_JOIN_COPART};
		r->map[i] = restore(r, impl_build(&r->e, rows[r->variant], &u, x, NULL, NULL, NULL), op, NULL);
	} else {
		Unit u = {&agg, &join, op->tra};
		r->map[i] = restore(r, impl_build(&r->e, fused_row(r, ls, rs), &u, x, NULL, NULL, NULL), op, &u);
	}
	return true;
}

static bool a_R2_7(Rw *r, int i)
{
	r->map[i] = r->map[OP(r->old, i)->u.shuffle.in];
	return true;
}

/* Contraction c at old op i, as a unit of the builders, built by row k of
 * impls.def from inputs x already where k needs them (mid: the target of
 * k's shuffle, where it takes one). */
static bool contr_build(Rw *r, int i, const Contr *c, ImplKind k, const int *x, const Place *mid)
{
	const IaOp *op = OP(r->old, i);
	TraOp agg = {.kind = TRA_AGG, .stmt = op->stmt, .type = op->type};
	agg.u.agg.ngroup = c->ngroup;
	memcpy(agg.u.agg.group, c->group, sizeof agg.u.agg.group);
	agg.u.agg.agg = c->agg;
	TraOp join = as_join(r, OP(r->old, c->j));
	Unit u = {&agg, &join, op->tra};
	r->map[i] = restore(r, impl_build(&r->e, k, &u, x, mid, NULL, NULL), op, &u);
	return true;
}

static bool a_LOOKUP(Rw *r, int i)
{
	const IaOp *op = OP(r->old, i);
	TraOp g = {.kind = TRA_GATHER, .stmt = op->stmt, .type = op->type};
	g.u.gather.src = op->u.gather.src;
	g.u.gather.index = op->u.gather.index;
	g.u.gather.dim = op->u.gather.dim;
	g.u.gather.tensor = op->u.gather.tensor;
	g.u.gather.itensor = op->u.gather.itensor;
	g.u.gather.base = -1;
	g.u.gather.scale = 1;
	Unit u = {&g, NULL, op->tra};
	int x[MAXIN] = {source(r, op->u.gather.src), r->map[op->u.gather.index], -1};
	r->map[i] = impl_build(&r->e, IM_GATHER_LOOKUP, &u, x, NULL, NULL, NULL);
	return true;
}

static bool a_BMM(Rw *r, int i)
{
	Contr c;
	contr_info(r->old, i, &c);
	const IaOp *op = OP(r->old, i), *j = OP(r->old, c.j);
	int ls = source(r, j->u.join.left), rs = source(r, j->u.join.right);
	Place all = place_all();
	/* variant 0: the right everywhere, the left on its own kept dim;
	 * variant 1: the other way round */
	bool right_everywhere = r->variant == 0 ? c.nlo > 0 : c.nro == 0;
	if (right_everywhere) {
		Place pl = place_part(1, &c.lonly[0]);
		ls = move_to(r, ls, &pl, op->stmt, op->tra);
		rs = move_to(r, rs, &all, op->stmt, op->tra);
	} else {
		int rd = -1;
		const IaOp *rop = OP(r->old, j->u.join.right);
		for (int d = 0; d < rop->type.nkey; d++)
			if (ia_join_out_dim(c.nl, &j->u.join.on, d) == c.ronly[0])
				rd = d;
		Place pr = place_part(1, &rd);
		ls = move_to(r, ls, &all, op->stmt, op->tra);
		rs = move_to(r, rs, &pr, op->stmt, op->tra);
	}
	return contr_build(r, i, &c, IM_BMM, (int[]){ls, rs, -1}, NULL);
}

static bool a_CMM(Rw *r, int i)
{
	Contr c;
	contr_info(r->old, i, &c);
	const IaOp *op = OP(r->old, i), *j = OP(r->old, c.j);
	int m = -1;
	for (int s = 0; s < c.nsum && m < 0; s++)
		for (int k = 0; k < j->u.join.on.nmatch; k++)
			if (j->u.join.on.lkey[k] == c.summed[s])
				m = k;
	Place pl = place_part(1, &j->u.join.on.lkey[m]), pr = place_part(1, &j->u.join.on.rkey[m]);
	int ls = move_to(r, source(r, j->u.join.left), &pl, op->stmt, op->tra);
	int rs = move_to(r, source(r, j->u.join.right), &pr, op->stmt, op->tra);
	/* the partial sums to where the old result was (CMM's own shuffle
	 * and aggregation), unless it held partial sums too */
	return contr_build(r, i, &c, IM_COPART, (int[]){ls, rs, -1}, NULL);
}

static bool a_RMM(Rw *r, int i)
{
	Contr c;
	contr_info(r->old, i, &c);
	const IaOp *j = OP(r->old, c.j);
	int x[MAXIN] = {source(r, j->u.join.left), source(r, j->u.join.right), -1};
	Place P = place_part(2, r->variant ? (int[]){c.ronly[0], c.lonly[0]} : (int[]){c.lonly[0], c.ronly[0]});
	return contr_build(r, i, &c, IM_RMM, x, &P);
}

/* ---- the table: rules.def's rows with their matchers and rewriters ---- */

static const struct {
	const char *name, *kind, *meaning, *condition;
	bool (*match)(const IaPlan *p, int i);
	bool (*apply)(Rw *r, int i);
} rules[NRULES] = {
#define RULE(id, name, kind, meaning, condition) [RULE_##id] = {name, kind, meaning, condition, m_##id, a_##id},
#include "optimizer/rules.def"
};

const char *rule_name(RuleId r)
{
	return rules[r].name;
}

const char *rule_meaning(RuleId r)
{
	return rules[r].meaning;
}

const char *rule_condition(RuleId r)
{
	return rules[r].condition;
}

bool rule_match(RuleId r, const IaPlan *p, int i)
{
	if (r < 0 || r >= NRULES || i < 0 || i >= p->ops.n)
		return false;
	return rules[r].match(p, i);
}

IaPlan *rule_apply(RuleId rule, const IaPlan *p, int i, int variant)
{
	if (!rule_match(rule, p, i))
		return NULL;
	int n = p->ops.n;
	Rw r = {p, {ia_plan_like(p), .strict = false}, xcalloc(n + 1, sizeof(int)), variant};
	for (int k = 0; k < n && !r.e.failed; k++) {
		if (k == i) {
			if (!rules[rule].apply(&r, i))
				r.e.failed = true;
			continue;
		}
		r.map[k] = emit(&r, remap(&r, OP(p, k)));
	}
	free(r.map);
	if (r.e.failed) {
		ia_free(r.e.p);
		return NULL;
	}
	return sweep(r.e.p);
}

/* ---- -O1: the rules that never make a plan worse ---- */

/* Apply a rule wherever it matches, first match first, to a fixpoint. */
static IaPlan *everywhere(IaPlan *p, RuleId rule)
{
	int from = 0;
	for (int guard = 0; guard < 100000; guard++) {
		int i = from;
		while (i < p->ops.n && !rule_match(rule, p, i))
			i++;
		if (i >= p->ops.n)
			return p;
		IaPlan *q = rule_apply(rule, p, i, 0);
		if (!q) {
			from = i + 1;   /* matched but would not apply here: go on */
			continue;
		}
		ia_free(p);
		p = q;
		from = 0;
	}
	return p;
}

IaPlan *opt_rewrite_simple(IaPlan *p)
{
	p = everywhere(p, RULE_R2_1);
	p = everywhere(p, RULE_R2_4);
	p = everywhere(p, RULE_R2_5);
	p = everywhere(p, RULE_R2_1);
	p = everywhere(p, RULE_F_1);
	return p;
}
