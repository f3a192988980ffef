/*
 * table1.c: TRA -> IA by Table 1 of the TRA paper, the initial plan.
 *
 *   TRA                        IA
 *   input                      read, partitioned on key dim 0 (a scalar: on site 0)
 *   join(Rl, Rr)               join^L(bcast(Rl), Rr)
 *   agg(group)                 agg^L(group) . shuffle(group)
 *   map(f)                     map^L(id, f)
 *   rekey(keyfunc)             map^L(keyfunc, id)
 *   filter(pred)               filter^L(pred)
 *   output                     write
 *   init, load, store          init, load, store in the param's placement
 *                              (partitioned on key dim 0, as inputs; a
 *                              shuffle first when a new value is elsewhere)
 *   print, loop, endloop       the same
 *
 * The paper states no initial layout for inputs; we read them partitioned on
 * their first key dim, the layout its BMM and RMM experiments start from.
 * This plan is what -O0 runs and where the optimizer's search starts.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static int push(IaPlan *p, IaOp op)
{
	Buf why = {0};
	if (!ia_derive_place(p, &op, &op.place, &why))
		tr_bug("Table 1 made an invalid %s: %s", ia_op_name(op.kind), why.s);
	return ia_push(p, op);
}

IaPlan *ia_from_tra(const TraProg *tra, int nranks)
{
	IaPlan *p = ia_new(tra, nranks);
	int *map = xcalloc(tra->ops.n ? tra->ops.n : 1, sizeof *map);   /* TRA op -> IA op */

	for (int i = 0; i < tra->ops.n; i++) {
		const TraOp *t = &tra->ops.v[i];
		IaOp op = {.stmt = t->stmt, .tra = i, .type = t->type};

		switch (t->kind) {
		case TRA_INPUT: {
			op.kind = IA_READ;
			op.u.read.tensor = t->u.input.tensor;
			int dim0 = 0;
			op.place = place_part(t->type.nkey > 0, &dim0);
			map[i] = push(p, op);
			break;
		}
		case TRA_JOIN: {
			IaOp b = {.kind = IA_BCAST, .stmt = t->stmt, .tra = i,
			          .type = tra->ops.v[t->u.join.left].type};
			b.u.bcast.in = map[t->u.join.left];
			op.kind = IA_JOIN;
			op.u.join.left = push(p, b);
			op.u.join.right = map[t->u.join.right];
			op.u.join.nmatch = t->u.join.nmatch;
			memcpy(op.u.join.lkey, t->u.join.lkey, sizeof op.u.join.lkey);
			memcpy(op.u.join.rkey, t->u.join.rkey, sizeof op.u.join.rkey);
			op.u.join.ngroup = -1;
			op.u.join.kernel = t->u.join.kernel;
			map[i] = push(p, op);
			if (t->stmt >= 0)
				p->strategy.v[t->stmt] = STRAT_BROADCAST;
			break;
		}
		case TRA_AGG: {
			const TraOp *in = &tra->ops.v[t->u.agg.in];
			IaOp s = {.kind = IA_SHUFFLE, .stmt = t->stmt, .tra = i, .type = in->type};
			s.u.shuffle.in = map[t->u.agg.in];
			s.place = place_part(t->u.agg.ngroup, t->u.agg.group);
			op.kind = IA_AGG;
			op.u.agg.in = push(p, s);
			op.u.agg.ngroup = t->u.agg.ngroup;
			memcpy(op.u.agg.group, t->u.agg.group, sizeof op.u.agg.group);
			op.u.agg.agg = t->u.agg.agg;
			map[i] = push(p, op);
			break;
		}
		case TRA_MAP:
			op.kind = IA_MAP;
			op.u.map.in = map[t->u.map.in];
			op.u.map.nkey = t->type.nkey;
			for (int d = 0; d < t->type.nkey; d++)
				op.u.map.keymap[d] = d;
			op.u.map.kernel = t->u.map.kernel;
			map[i] = push(p, op);
			break;
		case TRA_REKEY:
			op.kind = IA_MAP;
			op.u.map.in = map[t->u.rekey.in];
			op.u.map.nkey = t->u.rekey.nkey;
			memcpy(op.u.map.keymap, t->u.rekey.keymap, sizeof op.u.map.keymap);
			op.u.map.kernel = NULL;
			map[i] = push(p, op);
			break;
		case TRA_FILTER:
			op.kind = IA_FILTER;
			op.u.filter.in = map[t->u.filter.in];
			op.u.filter.pred = t->u.filter.pred;
			map[i] = push(p, op);
			break;
		case TRA_OUTPUT:
			op.kind = IA_WRITE;
			op.u.write.in = map[t->u.output.in];
			op.u.write.tensor = t->u.output.tensor;
			map[i] = push(p, op);
			break;
		case TRA_INIT:
		case TRA_LOAD:
			op.kind = t->kind == TRA_INIT ? IA_INIT : IA_LOAD;
			op.u.init.tensor = t->u.init.tensor;
			map[i] = push(p, op);
			break;
		case TRA_STORE: {
			/* a param keeps one placement: move the new value there */
			int in = map[t->u.store.in];
			const Place *want = &p->varplace.v[t->u.store.tensor];
			if (!place_eq(&p->ops.v[in].place, want)) {
				IaOp m = {.stmt = t->stmt, .tra = i, .type = p->ops.v[in].type, .place = *want};
				m.kind = want->kind == PL_ALL ? IA_BCAST : IA_SHUFFLE;
				m.u.shuffle.in = in;
				in = push(p, m);
			}
			op.kind = IA_STORE;
			op.u.store.in = in;
			op.u.store.tensor = t->u.store.tensor;
			map[i] = push(p, op);
			break;
		}
		case TRA_PRINT:
			op.kind = IA_PRINT;
			op.u.store.in = map[t->u.store.in];
			op.u.store.tensor = t->u.store.tensor;
			map[i] = push(p, op);
			break;
		case TRA_GRAD:
			tr_bug("a grad op reached Table 1: autodiff did not run");
		case TRA_LOOP:
		case TRA_ENDLOOP:
			op.kind = t->kind == TRA_LOOP ? IA_LOOP : IA_ENDLOOP;
			op.u.loop.count = t->u.loop.count;
			map[i] = push(p, op);
			break;
		}
	}
	free(map);
	return p;
}
