/*
 * rules.c: equivalence rules over IA plans (TRA paper, Table 2).
 *
 * Each rule is a pass that rebuilds the plan, op by op, replacing the ops it
 * matches.  A rebuilt op's placement is derived again from its new inputs
 * (ia_derive_place), so a rule only states what it rewrites.
 *
 *   R2-4   shuffle(R, D) -> R          when R is already partitioned on D
 *   R2-1   bcast(R) -> R               when R is already on every site
 *   R2-5   agg(shuffle(R)) -> agg(shuffle(agg(R)))
 *                                      two-phase aggregation: a local
 *                                      pre-aggregation before the shuffle
 *   R1-7'  agg(join(L, R)) -> join_agg(L, R)
 *                                      a local join whose only reader is a
 *                                      local aggregation accumulates into its
 *                                      output (gemm with beta = 1)
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

typedef struct Rebuild {
	const IaPlan *old;
	IaPlan *new;
	int *map;               /* old op -> new op */
	int *users;             /* old op -> readers in the old plan */
} Rebuild;

static int emit(Rebuild *r, IaOp op)
{
	Buf why = {0};
	if (!ia_derive_place(r->new, &op, &op.place, &why))
		tr_bug("rule made an invalid %s: %s", ia_op_name(op.kind), why.s);
	buf_free(&why);
	return ia_push(r->new, op);
}

/* The op with its inputs renumbered into the new plan. */
static IaOp remap(Rebuild *r, const IaOp *op)
{
	IaOp c = *op;
	switch (c.kind) {
	case IA_READ: break;
	case IA_BCAST: c.u.bcast.in = r->map[c.u.bcast.in]; break;
	case IA_SHUFFLE: c.u.shuffle.in = r->map[c.u.shuffle.in]; break;
	case IA_JOIN:
		c.u.join.left = r->map[c.u.join.left];
		c.u.join.right = r->map[c.u.join.right];
		/* kernels live in the plan's arena, which dies with the old plan */
		c.u.join.kernel = kernel_clone(r->new->arena, c.u.join.kernel);
		break;
	case IA_AGG: c.u.agg.in = r->map[c.u.agg.in]; break;
	case IA_MAP:
		c.u.map.in = r->map[c.u.map.in];
		if (c.u.map.kernel)
			c.u.map.kernel = kernel_clone(r->new->arena, c.u.map.kernel);
		break;
	case IA_FILTER: c.u.filter.in = r->map[c.u.filter.in]; break;
	case IA_WRITE: c.u.write.in = r->map[c.u.write.in]; break;
	case IA_STORE:
	case IA_PRINT: c.u.store.in = r->map[c.u.store.in]; break;
	case IA_INIT:
	case IA_LOAD:
	case IA_LOOP:
	case IA_ENDLOOP: break;
	}
	return c;
}

typedef bool (*RuleFn)(Rebuild *r, int i);

static IaPlan *sweep(IaPlan *old);

/* Apply a rule to every op, then drop the ops nobody reads any more. */
static IaPlan *rebuild(IaPlan *old, RuleFn rule)
{
	int n = old->ops.n;
	Rebuild r = {old, ia_new(old->tra, old->nranks), xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(int))};
	for (int i = 0; i < n; i++) {
		int in[2];
		int k = ia_inputs(&old->ops.v[i], in);
		for (int j = 0; j < k; j++)
			r.users[in[j]]++;
	}
	for (int i = 0; i < old->tra->stmts.n; i++)
		r.new->strategy.v[i] = old->strategy.v[i];
	for (int i = 0; i < old->varplace.n; i++)
		r.new->varplace.v[i] = old->varplace.v[i];
	for (int i = 0; i < n; i++)
		if (!rule(&r, i))
			r.map[i] = emit(&r, remap(&r, &old->ops.v[i]));
	free(r.map);
	free(r.users);
	ia_free(old);
	return sweep(r.new);
}

/* R2-4 and R2-1: a shuffle or broadcast that does not move anything. */
static bool drop_moves(Rebuild *r, int i)
{
	const IaOp *op = &r->old->ops.v[i];
	if (op->kind == IA_SHUFFLE) {
		const IaOp *in = &r->new->ops.v[r->map[op->u.shuffle.in]];
		if (place_eq(&in->place, &op->place)) {
			r->map[i] = r->map[op->u.shuffle.in];
			return true;
		}
	}
	if (op->kind == IA_BCAST) {
		const IaOp *in = &r->new->ops.v[r->map[op->u.bcast.in]];
		if (in->place.kind == PL_ALL) {
			r->map[i] = r->map[op->u.bcast.in];
			return true;
		}
	}
	return false;
}

/* R2-5: aggregate locally before shuffling for the final aggregation, when
 * the grouping removes a key dim (so the pre-aggregation can shrink data). */
static bool preaggregate(Rebuild *r, int i)
{
	const IaOp *op = &r->old->ops.v[i];
	if (op->kind != IA_AGG)
		return false;
	const IaOp *sh = &r->old->ops.v[op->u.agg.in];
	if (sh->kind != IA_SHUFFLE || r->users[op->u.agg.in] != 1)
		return false;
	const IaOp *src = &r->new->ops.v[r->map[sh->u.shuffle.in]];
	if (op->u.agg.ngroup == src->type.nkey || src->place.kind == PL_ALL)
		return false;

	IaOp pre = *op;
	pre.u.agg.in = r->map[sh->u.shuffle.in];
	int pi = emit(r, pre);

	IaOp s2 = *sh;
	s2.type = op->type;
	s2.u.shuffle.in = pi;
	s2.place = (Place){.kind = PL_PART, .ndims = sh->place.ndims};
	for (int d = 0; d < sh->place.ndims; d++)
		for (int g = 0; g < op->u.agg.ngroup; g++)
			if (op->u.agg.group[g] == sh->place.dims[d])
				s2.place.dims[d] = g;
	int si = emit(r, s2);

	IaOp fin = *op;
	fin.u.agg.in = si;
	for (int g = 0; g < op->u.agg.ngroup; g++)
		fin.u.agg.group[g] = g;
	r->map[op->u.agg.in] = si;
	r->map[i] = emit(r, fin);
	return true;
}

/* R1-7 (folding an aggregation into the join it reads, when nothing else
 * reads the join): the join accumulates into its output chunks. */
static bool fuse_join_agg(Rebuild *r, int i)
{
	const IaOp *op = &r->old->ops.v[i];
	if (op->kind != IA_AGG)
		return false;
	const IaOp *j = &r->old->ops.v[op->u.agg.in];
	if (j->kind != IA_JOIN || j->u.join.ngroup >= 0 || r->users[op->u.agg.in] != 1)
		return false;
	if (j->u.join.kernel->reduces && j->u.join.kernel->red != op->u.agg.agg)
		return false;
	IaOp f = remap(r, j);
	f.stmt = op->stmt;
	f.tra = op->tra;
	f.type = op->type;
	f.u.join.ngroup = op->u.agg.ngroup;
	memcpy(f.u.join.group, op->u.agg.group, sizeof f.u.join.group);
	f.u.join.kernel = kernel_clone(r->new->arena, j->u.join.kernel);
	f.u.join.kernel->red = op->u.agg.agg;
	r->map[i] = emit(r, f);
	return true;
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
		int in[2];
		int k = ia_inputs(&old->ops.v[i], in);
		for (int j = 0; j < k; j++)
			live[in[j]] = true;
	}
	IaPlan *p = ia_new(old->tra, old->nranks);
	int *map = xcalloc(n + 1, sizeof *map);
	Rebuild r = {old, p, map, NULL};
	for (int i = 0; i < old->tra->stmts.n; i++)
		p->strategy.v[i] = old->strategy.v[i];
	for (int i = 0; i < old->varplace.n; i++)
		p->varplace.v[i] = old->varplace.v[i];
	for (int i = 0; i < n; i++)
		if (live[i])
			map[i] = emit(&r, remap(&r, &old->ops.v[i]));
	free(map);
	free(live);
	ia_free(old);
	return p;
}

IaPlan *opt_rewrite_simple(IaPlan *p)
{
	p = rebuild(p, drop_moves);
	p = rebuild(p, preaggregate);
	p = rebuild(p, drop_moves);
	return rebuild(p, fuse_join_agg);
}
