/*
 * table1.c: TRA -> IA by Table 1 of the TRA paper, the initial plan.
 *
 *   TRA                        IA                              impls.def
 *   input                      read, partitioned on key dim 0  READ
 *                              (a scalar: on site 0)
 *   join(Rl, Rr)               join^L(bcast(Rl), Rr)           JOIN_BCAST
 *   conv(Rl, Rr)               conv^L(bcast(Rl), halo(Rr))     CONV_JOIN_BCAST
 *   agg(group)                 agg^L(group) . shuffle(group)   AGG_SHUFFLE
 *   map(f)                     map^L(id, f)                    UNARY
 *   rekey(keyfunc)             map^L(keyfunc, id)              UNARY
 *   filter(pred)               filter^L(pred)                  UNARY
 *   output                     write                           SINK
 *   init, load                 init, load in the param's       PARAM
 *                              placement (partitioned on key
 *                              dim 0, as inputs)
 *   range                      range, partitioned on key dim 0 RANGE
 *   gather(E, idx)             gather^L(bcast(E), idx)         GATHER_REPLICATE
 *   scatter(rows, idx)         scatter(rows, idx) into a       SCATTER
 *                              partitioning on key dim 0
 *                              (idx broadcast first; a base
 *                              moved there first)
 *   store                      store (a shuffle first when     STORE
 *                              the new value is elsewhere)
 *   print, loop, endloop       the same
 *
 * The paper states no initial layout for inputs; we read them partitioned on
 * their first key dim, the layout its BMM and RMM experiments start from.
 * This plan is what -O0 runs and where the optimizer's search starts.
 */
#include <stdlib.h>

#include "optimizer/opt.h"

/* Op t's Table 1 row, where it needs its inputs (moved there first), the
 * shuffle target inside it (*mid) and where its result is (*out). */
static ImplKind row(const TraOp *t, const IaPlan *p, Place *need, Place *mid, Place *out)
{
	int dim0 = 0;
	need[0].kind = need[1].kind = need[2].kind = PL_PARTIAL;       /* where they are */
	*mid = *out = place_part(0, NULL);
	switch (t->kind) {
	case TRA_INPUT:
		*out = place_part(t->type.nkey > 0, &dim0);
		return IM_READ;
	case TRA_INIT:
	case TRA_LOAD:
		return IM_PARAM;
	case TRA_RANGE:
		*out = place_part(t->type.nkey > 0, &dim0);
		return IM_RANGE;
	case TRA_COUNTER:
		return IM_COUNTER;
	case TRA_SLICE:
		need[0] = need[1] = place_all();
		*out = place_all();
		return IM_SLICE;
	case TRA_JOIN:
		need[0] = place_all();
		return IM_JOIN_BCAST;
	case TRA_CONV:
		need[0] = place_all();
		return IM_CONV_JOIN_BCAST;
	case TRA_AGG:
		*mid = place_part(t->u.agg.ngroup, t->u.agg.group);
		return IM_AGG_SHUFFLE;
	case TRA_GATHER:
		need[0] = place_all();
		return IM_GATHER_REPLICATE;
	case TRA_SCATTER:
		/* the result partitioned on key dim 0, the base with it */
		need[1] = place_all();
		need[2] = *out = place_part(t->type.nkey > 0, &dim0);
		return IM_SCATTER;
	case TRA_MAP:
	case TRA_REKEY:
	case TRA_FILTER:
		return IM_UNARY;
	case TRA_STORE:
		/* a param keeps one placement: move the new value there */
		need[0] = p->varplace.v[t->u.store.tensor];
		return IM_STORE;
	case TRA_OUTPUT:
	case TRA_PRINT:
		return IM_SINK;
	case TRA_GRAD:
		tr_bug("a grad op reached Table 1: autodiff did not run");
	case TRA_LOOP:
	case TRA_ENDLOOP:
		break;
	}
	tr_bug("%s has no Table 1 row", tra_op_name(t->kind));
}

IaPlan *opt_table1(const TraProg *tra, int nranks)
{
	return opt_table1_at(tra, nranks, NULL);
}

IaPlan *opt_table1_at(const TraProg *tra, int nranks, const RelType *types)
{
	IaPlan *p = ia_new(tra, nranks);
	Emit e = {p, .strict = true};
	int *map = xcalloc(tra->ops.n ? tra->ops.n : 1, sizeof *map);   /* TRA op -> IA op */

	for (int i = 0; i < tra->ops.n; i++) {
		TraOp at = tra->ops.v[i];
		if (types)
			at.type = types[i];
		const TraOp *t = &at;
		if (t->kind == TRA_LOOP || t->kind == TRA_ENDLOOP) {
			IaOp op = {.kind = t->kind == TRA_LOOP ? IA_LOOP : IA_ENDLOOP, .stmt = t->stmt, .tra = i};
			op.u.loop.count = t->u.loop.count;
			op.u.loop.ist = t->u.loop.ist;
			map[i] = emit_op(&e, op);
			continue;
		}
		Place need[MAXIN], mid, out;
		ImplKind k = row(t, p, need, &mid, &out);
		int in[MAXIN], x[MAXIN] = {-1, -1, -1};
		int n = tra_inputs(t, in);
		for (int j = 0; j < n; j++) {
			x[j] = map[in[j]];
			/* a broadcast row's input is broadcast as it is, a
			 * stored value moved only when elsewhere */
			if (need[j].kind != PL_PARTIAL &&
			    (impl_strategy(k) == STRAT_BROADCAST || !place_eq(&p->ops.v[x[j]].place, &need[j])))
				x[j] = emit_move(&e, x[j], &need[j], t->stmt, i);
		}
		Unit u = {t, NULL, i};
		map[i] = impl_build(&e, k, &u, x, &mid, &out, NULL);
	}
	free(map);
	return p;
}
