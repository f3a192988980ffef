/*
 * search.c: from the TRA program to the plan that runs.
 *
 * -O0 runs the initial plan of Table 1 as it is.  Higher levels apply the
 * rules that never make a plan worse (rules.c).  Every plan is verified
 * after each step when asked, costed, and each statement's strategy is named
 * for --explain.
 */
#include <stdlib.h>

#include "optimizer/opt.h"

static void verify(const IaPlan *p, const char *after, const OptOptions *o)
{
	Buf err = {0};
	if (o->verify && !ia_verify(p, &err))
		tr_bug("IA plan invalid after %s: %s", after, err.s);
	buf_free(&err);
}

/* How a statement's contractions are distributed: by the moves that feed
 * its joins. */
static void classify(IaPlan *p)
{
	for (int s = 0; s < p->strategy.n; s++)
		p->strategy.v[s] = STRAT_NONE;
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->stmt < 0)
			continue;
		Strategy *st = &p->strategy.v[op->stmt];
		if (op->kind != IA_JOIN) {
			if (*st == STRAT_NONE && op->kind != IA_READ && op->kind != IA_WRITE)
				*st = STRAT_LOCAL;
			continue;
		}
		IaOpKind l = p->ops.v[op->u.join.left].kind, r = p->ops.v[op->u.join.right].kind;
		Strategy js = STRAT_LOCAL;
		if (l == IA_BCAST || r == IA_BCAST)
			js = STRAT_BROADCAST;
		else if (l == IA_SHUFFLE || r == IA_SHUFFLE)
			js = STRAT_COPARTITION;
		if (*st == STRAT_NONE || *st == STRAT_LOCAL)
			*st = js;
		else if (*st != js && js != STRAT_LOCAL)
			*st = STRAT_OTHER;
	}
}

IaPlan *opt_plan(const TraProg *tra, const OptOptions *o)
{
	IaPlan *p = ia_from_tra(tra, o->nranks);
	verify(p, "Table 1", o);
	if (o->level > 0) {
		p = opt_rewrite_simple(p);
		verify(p, "rewriting", o);
	}
	classify(p);
	opt_cost(p);
	return p;
}
