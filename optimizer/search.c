/*
 * search.c: from the TRA program to the plan that runs.
 *
 * -O0 runs the initial plan of Table 1 as it is; -O1 applies the rules that
 * never make a plan worse (rules.c).  -O2 searches.  The search works on
 * the TRA program, not on one IA plan: every TRA op (a *unit*; a join whose
 * only reader is a sum over it is taken together with that sum, a
 * contraction) has *implementations*, the rows of impls.def, each the IA
 * fragment that one chain of the paper's equivalence rules derives from the
 * op's Table 1 translation (build.c builds them, impls.c costs them):
 *
 *   a join            local join^L on inputs placed so that matching tuples
 *                     meet: one side on every site (R2-6: broadcast the left
 *                     or the right) or both partitioned on the join keys
 *                     (R2-6: co-shuffle); no move when already so (R2-4)
 *   an aggregation    local (R2-4, input partitioned within the group), or
 *                     shuffle then aggregate (Table 1), or two-phase: local
 *                     pre-aggregation, shuffle of the partials, final
 *                     aggregation (R2-5); the shuffle's target is any
 *                     partitioning of the result (R2-7: the one the next
 *                     statement wants), or all sites
 *   a contraction     the join fused with its aggregation (F-1), its inputs
 *                     placed as for a join: broadcast (BMM), co-partition on
 *                     the summed keys then shuffle the partial sums (CMM), or
 *                     replicate both sides into the 3-D key space and
 *                     partition on the two free keys (RMM)
 *   read, init, load  any partitioning (the input layout is free), or the
 *                     one --place pins; a param has one placement (varplace)
 *                     for its loads and stores
 *
 * Placements are the "interesting orders" (Selinger): for every op and
 * every placement its result could have (all, or partitioned on one or two
 * key dims), a dynamic program keeps the cheapest way to have the result
 * there: by one of the op's implementations, or by moving it from another
 * placement (bcast, shuffle: the enforcers).  The program is a DAG, so the
 * plan is then extracted from the outputs back, each op choosing the
 * implementation that is cheapest given what its readers, already decided,
 * need of it (a result moved once serves every reader that needs it so:
 * a broadcast activation is reused by the backward pass).  Params' placements
 * are chosen by coordinate descent over whole plans, each costed exactly
 * (opt_cost); so are block sizes not pinned, jointly with the plan.
 *
 * The objective (--objective, OptOptions.objective) orders costs, in one
 * place, opt.h's cost_cmp: by default predicted seconds (cost.c), ties
 * broken by floats moved; under `floats`, the TRA paper's metric under its
 * premise, the busiest rank's flops (within a tie), then floats moved
 * between ranks, then seconds, and an input may also be read whole by
 * every rank (cost_read: its read time, no floats), which the search
 * offers otherwise only when --place pins it.  The dynamic program, the
 * extraction, the tuning around the search (tune.c: params, budget,
 * blocks, strategies, the counts of -P LIST) and two-phase schedules
 * (twophase.c) all compare by it; memory budgets come before it.
 *
 * Ops inside repeat blocks cost `count` times; moves are made where the
 * value is made, so a value made outside a loop is moved once.
 * Deterministic: no hashing of pointers, no clocks.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/search.h"

void verify_plan(const IaPlan *p, const char *after, const OptOptions *o)
{
	Buf err = {0};
	if (o->verify && !ia_verify(p, &err))
		tr_bug("IA plan invalid after %s: %s", after, err.s);
	buf_free(&err);
}

/* ---- the dynamic program ---- */

int unit_inputs(const Search *s, int t, int *in)
{
	const TraOp *op = &s->tra->ops.v[t];
	if (op->kind == TRA_AGG && s->absorbed[op->u.agg.in] == t) {
		const TraOp *j = &s->tra->ops.v[op->u.agg.in];
		return tra_inputs(j, in);       /* its sides, and a sampled one's mask */
	}
	return tra_inputs(op, in);
}

static Cost in_cost(Search *s, int v, int q)
{
	if (q == ANYPL)
		return s->home[v];
	return *at(s, s->avail, v, q);
}

static void dp(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		for (int i = 0; i < s->dom[t].n; i++)
			*at(s, s->best, t, i) = *at(s, s->avail, t, i) = inf_cost();
		s->home[t] = inf_cost();
		int in[MAXIN];
		int k = unit_inputs(s, t, in);
		for (int c = 0; c < s->impls[t].n; c++) {
			const Impl *im = &s->impls[t].v[c];
			if (im->out < 0)
				continue;
			Cost tot = im->cost;
			for (int j = 0; j < k; j++)
				tot = cost_add(tot, in_cost(s, in[j], im->inpl[j]));
			if (cost_cmp(s->cc.objective, tot, *at(s, s->best, t, im->out)) < 0)
				*at(s, s->best, t, im->out) = tot;
		}
		const Dom *d = &s->dom[t];
		for (int p = 0; p < d->n; p++) {
			Cost b = *at(s, s->best, t, p);
			if (cost_cmp(s->cc.objective, b, s->home[t]) < 0)
				s->home[t] = b;
		}
		if (isinf(s->home[t].seconds))
			continue;       /* no result (a sink), or none possible */
		for (int p = 0; p < d->n; p++) {
			Cost b = *at(s, s->best, t, p);
			for (int q = 0; q < d->n; q++) {
				Cost bq = *at(s, s->best, t, q);
				if (q == p || isinf(bq.seconds) || cost_cmp(s->cc.objective, bq, b) >= 0)
					continue;       /* a move only adds to a cost */
				Cost c = cost_add(bq, move_cost(s, t, q, p));
				if (cost_cmp(s->cc.objective, c, b) < 0)
					b = c;
			}
			*at(s, s->avail, t, p) = b;
		}
	}
}

/* What requiring v in placement q adds, given the readers decided so far:
 * nothing if one of them needs it so already; the move from its home if v
 * is needed anyway; else all of v's cost. */
static Cost marginal(Search *s, int v, int q)
{
	bool needed = s->req[v] || s->anyreq[v];
	if (!needed)
		return in_cost(s, v, q);
	if (q == ANYPL || (s->req[v] >> q & 1))
		return (Cost){0};
	Cost a = *at(s, s->avail, v, q), h = s->home[v];
	Cost d = {a.seconds - h.seconds, a.floats - h.floats, a.bytes - h.bytes, a.flops - h.flops, a.work - h.work};
	if (d.seconds < 0)
		d.seconds = 0;
	if (d.floats < 0)
		d.floats = 0;
	if (d.work < 0)
		d.work = 0;
	return d;
}

static bool is_sink(TraOpKind k)
{
	return k == TRA_OUTPUT || k == TRA_PRINT || k == TRA_STORE;
}

/* From the sinks back: each op's implementation, given its readers'. */
static bool extract(Search *s)
{
	memset(s->req, 0, sizeof *s->req * (size_t)s->n);
	memset(s->anyreq, 0, sizeof *s->anyreq * (size_t)s->n);
	for (int t = s->n - 1; t >= 0; t--) {
		const TraOp *op = &s->tra->ops.v[t];
		s->choice[t] = -1;
		if (op->kind == TRA_LOOP || op->kind == TRA_ENDLOOP || s->absorbed[t] >= 0)
			continue;
		if (!is_sink(op->kind) && !s->req[t] && !s->anyreq[t])
			continue;       /* nobody reads it */
		int in[MAXIN];
		int k = unit_inputs(s, t, in);
		Cost bestc = inf_cost();
		int bi = -1;
		for (int c = 0; c < s->impls[t].n; c++) {
			const Impl *im = &s->impls[t].v[c];
			Cost tot = im->cost;
			for (int j = 0; j < k; j++)
				tot = cost_add(tot, marginal(s, in[j], im->inpl[j]));
			if (im->out >= 0)
				for (int p = 0; p < s->dom[t].n; p++)
					if (s->req[t] >> p & 1)
						tot = cost_add(tot, move_cost(s, t, im->out, p));
			if (isinf(tot.seconds))
				continue;
			if (bi < 0 || cost_cmp(s->cc.objective, tot, bestc) < 0) {
				bestc = tot;
				bi = c;
			}
		}
		if (bi < 0)
			return false;   /* nothing fits */
		s->choice[t] = bi;
		const Impl *im = &s->impls[t].v[bi];
		for (int j = 0; j < k; j++) {
			if (im->inpl[j] == ANYPL)
				s->anyreq[in[j]] = true;
			else
				s->req[in[j]] |= 1ull << im->inpl[j];
		}
	}
	return true;
}

/* ---- the IA plan of the choices ---- */

typedef struct Build {
	Search *s;
	Emit e;                 /* into the plan */
	int *homeop;            /* per TRA op: its IA op */
	int *moved;             /* per (op, placement), at domoff: IA op of the op's result moved there, or -1 */
	int *first_reader;      /* per (op, placement): the first reader needing it there */
} Build;

/* The IA op holding TRA op v's result in placement q (dom index); a move
 * made for it counts toward statement stmt (its first reader's). */
static int get(Build *b, int v, int q, int stmt)
{
	Search *s = b->s;
	int h = b->homeop[v];
	if (h < 0)
		tr_bug("value %d used before it is made", v);
	if (q == ANYPL)
		return h;
	const RelType *t = type_of(s, v);
	Place want = s->dom[v].p[q];
	Place have = place_norm(t, b->e.p->ops.v[h].place);
	if (place_eq(&have, &want))
		return h;
	int *m = &b->moved[s->domoff[v] + q];
	if (*m < 0)
		*m = emit_move(&b->e, h, &want, stmt, v);
	return *m;
}

/* After op v's result is made: moves its readers in deeper loops need are
 * made here, once, not in every iteration. */
static void early_moves(Build *b, int v)
{
	Search *s = b->s;
	for (int q = 0; q < s->dom[v].n; q++) {
		int r = b->first_reader[s->domoff[v] + q];
		if (r >= 0 && s->depth[r] > s->depth[v])
			get(b, v, q, s->tra->ops.v[r].stmt);
	}
}

/* Unit t by its chosen implementation, its inputs first moved where it
 * takes them. */
static void build_unit(Build *b, int t)
{
	Search *s = b->s;
	const TraOp *op = &s->tra->ops.v[t];
	const Impl *im = &s->impls[t].v[s->choice[t]];
	int in[MAXIN], x[MAXIN] = {-1, -1, -1};
	int k = unit_inputs(s, t, in);
	for (int j = 0; j < k; j++)
		x[j] = get(b, in[j], im->inpl[j], op->stmt);
	/* the ops at the searched blocks */
	TraOp at = *op, join;
	at.type = *type_of(s, t);
	Unit u = {&at, NULL, t};
	if (op->kind == TRA_AGG && s->absorbed[op->u.agg.in] == t) {
		join = s->tra->ops.v[op->u.agg.in];
		join.type = *type_of(s, op->u.agg.in);
		u.join = &join;
	}
	const Place *out = im->out >= 0 ? &s->dom[t].p[im->out] : NULL;
	b->homeop[t] = impl_build(&b->e, im->kind, &u, x, &im->mid, out, im->tp);
	if (b->homeop[t] >= 0)
		early_moves(b, t);
}

/* Each statement's rule chain: the rules deriving its units' chosen
 * implementations from Table 1, in rules.def's order. */
static void record_rules(Search *s, IaPlan *p)
{
	int ns = s->tra->stmts.n;
	unsigned *mask = xcalloc(ns + 1, sizeof *mask);
	bool *chosen = xcalloc(ns + 1, sizeof *chosen);
	for (int t = 0; t < s->n; t++) {
		int st = s->tra->ops.v[t].stmt;
		if (s->choice[t] < 0 || st < 0)
			continue;
		const Impl *im = &s->impls[t].v[s->choice[t]];
		unsigned r = impl_rules(im->kind);
		/* a local aggregation whose input is moved to it keeps Table 1's
		 * shuffle: R2-4 dropped nothing */
		int in[MAXIN];
		if (im->kind == IM_AGG_LOCAL && unit_inputs(s, t, in) == 1 &&
		    s->choice[in[0]] >= 0 && s->impls[in[0]].v[s->choice[in[0]]].out != im->inpl[0])
			r &= ~RB(R2_4);
		mask[st] |= r;
		chosen[st] = true;
	}
	for (int st = 0; st < ns; st++) {
		if (!chosen[st])
			continue;
		/* a chain's text, made once per search */
		int k = 0;
		while (k < s->chains.n && s->chains.v[k].mask != mask[st])
			k++;
		if (k == s->chains.n) {
			Buf b = {0};
			for (int r = 0; r < NRULES; r++)
				if (mask[st] & (1u << r))
					buf_printf(&b, "%s%s", b.len ? ", " : "", rule_name((RuleId)r));
			RuleChain c = {mask[st], arena_strdup(s->scratch, b.s ? b.s : "")};
			vec_push(&s->chains, c);
			buf_free(&b);
		}
		p->rules.v[st] = arena_strdup(p->arena, s->chains.v[k].text);
	}
	free(mask);
	free(chosen);
}

IaPlan *search_build(Search *s)
{
	int n = s->n;
	Build b = {s, {ia_new(s->tra, s->o->nranks), .strict = true}, xcalloc(n + 1, sizeof(int)),
	           xcalloc(s->domoff[n] + 1, sizeof(int)), xcalloc(s->domoff[n] + 1, sizeof(int))};
	for (int i = 0; i < n; i++)
		b.homeop[i] = -1;
	for (size_t i = 0; i < s->domoff[n] + 1; i++)
		b.moved[i] = b.first_reader[i] = -1;
	for (int t = 0; t < s->tra->tensors.n; t++)
		b.e.p->varplace.v[t] = s->varplace[t];
	/* the first reader of each (value, placement) */
	for (int t = 0; t < n; t++) {
		if (s->choice[t] < 0)
			continue;
		const Impl *im = &s->impls[t].v[s->choice[t]];
		int in[MAXIN];
		int k = unit_inputs(s, t, in);
		for (int j = 0; j < k; j++)
			if (im->inpl[j] != ANYPL && b.first_reader[s->domoff[in[j]] + im->inpl[j]] < 0)
				b.first_reader[s->domoff[in[j]] + im->inpl[j]] = t;
	}
	for (int t = 0; t < n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->kind == TRA_LOOP || op->kind == TRA_ENDLOOP) {
			IaOp l = {.kind = op->kind == TRA_LOOP ? IA_LOOP : IA_ENDLOOP, .stmt = -1, .tra = t};
			l.u.loop.count = op->u.loop.count;
			l.u.loop.ist = op->u.loop.ist;
			emit_op(&b.e, l);
			continue;
		}
		if (s->choice[t] >= 0)
			build_unit(&b, t);
	}
	record_rules(s, b.e.p);
	free(b.homeop);
	free(b.moved);
	free(b.first_reader);
	return b.e.p;
}

/* ---- strategies, as the plan shows them ---- */

/* A statement's strategy: that of its costliest join: replicate when its
 * inputs are replicated, broadcast when one is a broadcast, co-partition
 * when partitioned inputs were shuffled or its partial sums are, local when
 * nothing moves.  Statements without joins: local, or other if they move. */
void classify(IaPlan *p)
{
	int ns = p->strategy.n;
	double *flops = xcalloc(ns + 1, sizeof *flops), *moved = xcalloc(ns + 1, sizeof *moved);
	for (int s = 0; s < ns; s++)
		p->strategy.v[s] = STRAT_NONE;
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->stmt < 0)
			continue;
		moved[op->stmt] += op->floats_moved;
	}
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->stmt >= 0 && op->kind == IA_TWOPHASE && op->flops >= flops[op->stmt]) {
			flops[op->stmt] = op->flops;
			p->strategy.v[op->stmt] = STRAT_TWOPHASE;
			continue;
		}
		if (op->stmt < 0 || !ia_op_joins(op->kind))
			continue;
		if (p->strategy.v[op->stmt] != STRAT_NONE && op->flops <= flops[op->stmt])
			continue;
		flops[op->stmt] = op->flops;
		const IaOp *l = &p->ops.v[op->u.join.left], *r = &p->ops.v[op->u.join.right];
		Strategy st;
		const IaOp *ls = l->kind == IA_SHUFFLE ? &p->ops.v[l->u.shuffle.in] : l;
		if (ls->kind == IA_MAP && !ls->u.map.kernel && ls->u.map.nkey > 0) {
			bool dup = false;
			for (int d = 0; d < ls->u.map.nkey; d++)
				dup |= ls->u.map.keymap[d] < 0;
			if (dup) {
				p->strategy.v[op->stmt] = STRAT_REPLICATE;
				continue;
			}
		}
		if (l->place.kind == PL_ALL || r->place.kind == PL_ALL) {
			const IaOp *all = l->place.kind == PL_ALL ? l : r;
			bool bc = all->kind == IA_BCAST || (l->kind == IA_BCAST || r->kind == IA_BCAST);
			st = l->place.kind == PL_ALL && r->place.kind == PL_ALL && !bc ? STRAT_LOCAL
			     : bc ? STRAT_BROADCAST : STRAT_LOCAL;
		} else {
			bool shuffled = l->kind == IA_SHUFFLE || r->kind == IA_SHUFFLE || op->place.kind == PL_PARTIAL;
			st = shuffled ? STRAT_COPARTITION : STRAT_LOCAL;
		}
		p->strategy.v[op->stmt] = st;
	}
	/* a statement with a gather and no join: how the gather reads */
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->stmt < 0 || (op->kind != IA_GATHER && op->kind != IA_LOOKUP) || flops[op->stmt] > 0)
			continue;
		if (op->kind == IA_LOOKUP)
			p->strategy.v[op->stmt] = STRAT_LOOKUP;
		else if (p->strategy.v[op->stmt] != STRAT_LOOKUP)
			p->strategy.v[op->stmt] = p->ops.v[op->u.gather.src].kind == IA_BCAST ? STRAT_BROADCAST : STRAT_LOCAL;
	}
	for (int s = 0; s < ns; s++)
		if (p->strategy.v[s] == STRAT_NONE)
			p->strategy.v[s] = moved[s] > 0 ? STRAT_OTHER : STRAT_LOCAL;
	free(flops);
	free(moved);
}

/* ---- the search ---- */

void search_init(Search *s, const TraProg *tra, const OptOptions *o, const Machine *m, const BlockClasses *bc)
{
	int n = tra->ops.n;
	memset(s, 0, sizeof *s);
	s->tra = tra;
	s->scratch = arena_new();
	s->types = search_scratch(s, n + 1, sizeof(RelType));
	opt_block_types(tra, bc, s->types);
	s->o = o;
	s->cc = (CostCtx){m, o->nranks, o->objective, o->spill_budget};
	s->n = n;
	s->uses = search_scratch(s, n + 1, sizeof(int));
	s->absorbed = search_scratch(s, n + 1, sizeof(int));
	s->times = search_scratch(s, n + 1, sizeof(double));
	s->loopof = search_scratch(s, n + 1, sizeof(int));
	s->depth = search_scratch(s, n + 1, sizeof(int));
	s->dom = search_scratch(s, n + 1, sizeof(Dom));
	s->impls = search_scratch(s, n + 1, sizeof(Impls));
	s->varplace = search_scratch(s, tra->tensors.n + 1, sizeof(Place));
	s->home = search_scratch(s, n + 1, sizeof(Cost));
	s->choice = search_scratch(s, n + 1, sizeof(int));
	s->req = search_scratch(s, n + 1, sizeof(uint64_t));
	s->anyreq = search_scratch(s, n + 1, sizeof(bool));
	s->move = search_scratch(s, n + 1, sizeof(Cost *));
	s->cache = search_scratch(s, n + 1, sizeof(Impls));
	s->cache_budget = search_scratch(s, n + 1, sizeof(double));
	s->cached = search_scratch(s, n + 1, sizeof(bool));
	s->force = search_scratch(s, tra->stmts.n + 1, sizeof(Strategy));
	s->forceside = search_scratch(s, tra->stmts.n + 1, sizeof(int));
	for (int i = 0; i < tra->stmts.n; i++)
		s->forceside[i] = -1;
	for (int i = 0; i < o->nstratpins; i++)
		if (o->stratpins[i].stmt >= 0 && o->stratpins[i].stmt < tra->stmts.n) {
			s->force[o->stratpins[i].stmt] = o->stratpins[i].strategy;
			s->forceside[o->stratpins[i].stmt] = o->stratpins[i].side;
		}
	s->budget = o->mem_per_rank;

	Vec(double) stack = {0};
	double times = 1;
	int cur = -1, depth = 0;
	int *parent = xcalloc(n + 1, sizeof(int));
	for (int t = 0; t < n; t++) {
		const TraOp *op = &tra->ops.v[t];
		int in[MAXIN];
		int k = tra_inputs(op, in);
		for (int j = 0; j < k; j++)
			s->uses[in[j]]++;
		if (op->kind == TRA_ENDLOOP) {
			times = stack.v[--stack.n];
			cur = parent[cur];
			depth--;
		}
		s->times[t] = times;
		s->loopof[t] = cur;
		s->depth[t] = depth;
		if (op->kind == TRA_LOOP) {
			vec_push(&stack, times);
			times *= (double)(op->u.loop.count > 0 ? op->u.loop.count : 0);
			parent[t] = cur;
			cur = t;
			depth++;
		}
	}
	vec_free(&stack);
	free(parent);
	/* contractions: a join whose only reader is an aggregation its kernel
	 * can accumulate into (sums over products, max over max, ...) */
	for (int t = 0; t < n; t++) {
		s->absorbed[t] = -1;
		const TraOp *op = &tra->ops.v[t];
		if (op->kind != TRA_AGG)
			continue;
		int j = op->u.agg.in;
		const TraOp *jo = &tra->ops.v[j];
		if (tra_op_joins(jo->kind) && s->uses[j] == 1 &&
		    (!jo->u.join.kernel->reduces || jo->u.join.kernel->red == op->u.agg.agg))
			s->absorbed[j] = t;
	}
	for (int t = 0; t < n; t++) {
		const TraOp *op = &tra->ops.v[t];
		dom_make(&s->dom[t], type_of(s, t));
		/* a pinned placement is always a choice, even when unusual */
		int tensor = op->kind == TRA_INPUT ? op->u.input.tensor
		             : op->kind == TRA_INIT || op->kind == TRA_LOAD ? op->u.init.tensor
		             : op->kind == TRA_STORE ? op->u.store.tensor : -1;
		for (int k = 0; tensor >= 0 && k < o->nplacepins; k++)
			if (o->placepins[k].tensor == tensor) {
				int src = op->kind == TRA_STORE ? op->u.store.in : t;
				dom_add(&s->dom[src], place_norm(type_of(s, src), o->placepins[k].place));
			}
	}
	/* the dynamic program's tables: one entry per (op, placement) */
	s->domoff = search_scratch(s, n + 1, sizeof(size_t));
	for (int t = 0; t < n; t++)
		s->domoff[t + 1] = s->domoff[t] + (size_t)s->dom[t].n;
	s->best = search_scratch(s, s->domoff[n] + 1, sizeof(Cost));
	s->avail = search_scratch(s, s->domoff[n] + 1, sizeof(Cost));
	/* params: pinned, else partitioned on their first dim to start */
	for (int i = 0; i < tra->tensors.n; i++) {
		const Tensor *ten = &tra->tensors.v[i];
		int d0 = 0;
		s->varplace[i] = place_part(ten->rank > 0 ? 1 : 0, &d0);
		for (int k = 0; k < o->nplacepins; k++)
			if (o->placepins[k].tensor == i)
				s->varplace[i] = o->placepins[k].place;
	}
}

/* Are op t's type and those of the ops its candidates read (its inputs,
 * and an absorbed join's) the same in s and prev? */
static bool unit_same(const Search *s, const Search *prev, int t)
{
	if (!rel_type_eq(&s->types[t], &prev->types[t]))
		return false;
	int in[MAXIN];
	int k = tra_inputs(&s->tra->ops.v[t], in);
	for (int j = 0; j < k; j++) {
		if (!rel_type_eq(&s->types[in[j]], &prev->types[in[j]]))
			return false;
		if (s->absorbed[in[j]] == t && !unit_same(s, prev, in[j]))
			return false;
	}
	return true;
}

void search_inherit(Search *s, Search *prev)
{
	if (prev->tra != s->tra || prev->quick != s->quick || prev->cc.nsites != s->cc.nsites)
		return;
	for (int t = 0; t < s->n; t++) {
		if (!rel_type_eq(&s->types[t], &prev->types[t]))
			continue;
		if (prev->move[t]) {
			size_t n = (size_t)s->dom[t].n * (size_t)s->dom[t].n;
			s->move[t] = search_scratch(s, n, sizeof(Cost));
			memcpy(s->move[t], prev->move[t], n * sizeof(Cost));
		}
		if (prev->cached[t] && unit_same(s, prev, t)) {
			s->cache[t] = prev->cache[t];
			prev->cache[t] = (Impls){0};
			prev->cached[t] = false;
			s->cached[t] = true;
			s->cache_budget[t] = prev->cache_budget[t];
		}
	}
}

void search_free(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		vec_free(&s->impls[t]);
		vec_free(&s->cache[t]);
	}
	vec_free(&s->chains);
	arena_free(s->scratch);
}

void *search_scratch(Search *s, size_t n, size_t size)
{
	return arena_alloc(s->scratch, n * size);
}

/* A param's placement, normalised to what its values' domain holds. */
void norm_varplace(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->kind == TRA_INIT || op->kind == TRA_LOAD)
			s->varplace[op->u.init.tensor] = place_norm(type_of(s, t), s->varplace[op->u.init.tensor]);
	}
}

/* One whole plan for the current params' placements: the dynamic program,
 * extraction, the IA plan, its exact cost.  NULL when nothing fits. */
IaPlan *plan_once(Search *s)
{
	norm_varplace(s);
	for (int t = 0; t < s->n; t++)
		vec_free(&s->impls[t]);
	make_impls(s);
	dp(s);
	if (!extract(s))
		return NULL;
	IaPlan *p = search_build(s);
	verify_plan(p, "search", s->o);
	p->mem_budget = s->o->spill_budget;
	opt_cost(p, s->cc.m);
	classify(p);
	return p;
}
