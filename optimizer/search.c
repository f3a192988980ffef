/*
 * search.c: from the TRA program to the plan that runs.
 *
 * -O0 runs the initial plan of Table 1 as it is; -O1 applies the rules that
 * never make a plan worse (rules.c).  -O2 searches.  The search works on
 * the TRA program, not on one IA plan: every TRA op (a *unit*; a join whose
 * only reader is a sum over it is taken together with that sum, a
 * contraction) has *implementations*, each the IA fragment that one chain of
 * the paper's equivalence rules derives from the op's Table 1 translation:
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
 *   a contraction     the join fused with its aggregation (R1-7), its inputs
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
 * The objective is predicted seconds (cost.c), ties broken by floats moved.
 * Ops inside repeat blocks cost `count` times; moves are made where the value
 * is made, so a value made outside a loop is moved once.  Deterministic: no
 * hashing of pointers, no clocks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

#define MAXDOM 40               /* placements considered per relation */
#define ANYPL (-1)              /* an input taken wherever it is */

static void verify(const IaPlan *p, const char *after, const OptOptions *o)
{
	Buf err = {0};
	if (o->verify && !ia_verify(p, &err))
		tr_bug("IA plan invalid after %s: %s", after, err.s);
	buf_free(&err);
}

/* ---- placements of one relation ---- */

typedef struct Dom {
	int n;
	Place p[MAXDOM];
} Dom;

/* Partitioning dims of frontier 1 never change a tuple's site. */
static Place place_norm(const RelType *t, Place p)
{
	if (p.kind != PL_PART)
		return p;
	Place q = {.kind = PL_PART};
	for (int i = 0; i < p.ndims; i++)
		if (p.dims[i] < t->nkey && rel_frontier(t, p.dims[i]) > 1)
			q.dims[q.ndims++] = p.dims[i];
	return q;
}

static int dom_find(const Dom *d, const RelType *t, Place p)
{
	p = place_norm(t, p);
	for (int i = 0; i < d->n; i++)
		if (place_eq(&d->p[i], &p))
			return i;
	return -1;
}

static void dom_add(Dom *d, Place p)
{
	for (int i = 0; i < d->n; i++)
		if (place_eq(&d->p[i], &p))
			return;
	if (d->n < MAXDOM)
		d->p[d->n++] = p;
}

/* all; part on each dim; part on ordered pairs (small key arities); part()
 * (everything on rank 0, for scalars). */
static void dom_make(Dom *d, const RelType *t)
{
	d->n = 0;
	dom_add(d, place_all());
	for (int a = 0; a < t->nkey; a++)
		if (rel_frontier(t, a) > 1)
			dom_add(d, place_part(1, &a));
	if (t->nkey <= 4)
		for (int a = 0; a < t->nkey; a++)
			for (int b = 0; b < t->nkey; b++)
				if (a != b && rel_frontier(t, a) > 1 && rel_frontier(t, b) > 1)
					dom_add(d, place_part(2, (int[]){a, b}));
	dom_add(d, place_part(0, NULL));
}

/* ---- implementations ---- */

typedef enum {
	IM_SOURCE,              /* read, init, load in a placement */
	IM_LOCAL,               /* a local op on its inputs as placed */
	IM_AGG_SHUFFLE,         /* shuffle onto the group, aggregate (Table 1) */
	IM_AGG_TWOPHASE,        /* aggregate, shuffle the partials, aggregate (R2-5) */
	IM_AGG_ALLRED,          /* aggregate, broadcast the partials, aggregate */
	IM_CONTRACT,            /* join fused with its aggregation, complete result */
	IM_CONTRACT_SHUF,       /* fused join to partial sums, shuffled, aggregated */
	IM_CONTRACT_BCAST,      /* fused join to partial sums, broadcast, aggregated */
	IM_RMM,                 /* both sides replicated and partitioned on the free keys */
	IM_TWOPHASE,            /* a two-phase schedule, per chunk (twophase.c) */
} ImplKind;

typedef struct Impl {
	ImplKind kind;
	int inpl[2];            /* each input's placement (its dom index), or ANYPL */
	int out;                /* the result's placement (dom index); -1: no result */
	Place mid;              /* shuffle target over the result, or RMM's over the join space */
	Cost cost;              /* its own, times the loop count */
	double mem;             /* bytes per rank it holds at once */
	Strategy strat;
	int side;               /* broadcast: the input everywhere (0 left, 1 right) */
	unsigned rules;         /* the rules that derive it (bits of RuleId) */
	const TpSched *tp;      /* IM_TWOPHASE: its schedule */
} Impl;

#define RB(r) (1u << RULE_##r)

typedef Vec(Impl) Impls;

typedef struct Search {
	TraProg *tra;
	const OptOptions *o;
	CostCtx cc;
	int n;
	int *uses;              /* per op: readers */
	int *absorbed;          /* per join: the aggregation that absorbs it, or -1 */
	double *times;          /* per op: how often it runs */
	int *loopof;            /* per op: the innermost LOOP around it, or -1 */
	int *depth;             /* per op: loop depth */
	Dom *dom;
	double *share;          /* [n][MAXDOM]: cost_share */
	Impls *impls;
	Place *varplace;        /* per tensor (params) */
	double budget;          /* per-rank bytes an implementation may hold; 0: none */
	Strategy *force;        /* per statement: the strategy its joins must use, or STRAT_NONE */
	int *forceside;         /* per statement: for broadcast, the side everywhere, or -1 */
	/* the dynamic program */
	Cost *best, *avail;     /* [n][MAXDOM] */
	Cost *home;             /* [n]: min over best */
	/* extraction */
	int *choice;            /* per op: impl index, -1 none */
	uint64_t *req;          /* per op: placements its readers need */
	bool *anyreq;
	/* moves between placements, per op (lazily) */
	Cost **move;
	/* the implementations of ops that depend on neither params'
	 * placements nor forcing, made once per budget (gen_all: unfiltered) */
	Impls *cache;
	double *cache_budget;
	bool *cached;
	bool gen_all;
	bool quick;             /* choosing blocks: no two-phase schedules (their planning is dear) */
} Search;

static const RelType *type_of(Search *s, int t)
{
	return &s->tra->ops.v[t].type;
}

static Cost *at(Cost *a, int t, int i)
{
	return &a[(size_t)t * MAXDOM + i];
}

static Cost inf_cost(void)
{
	return (Cost){INFINITY, INFINITY, INFINITY, INFINITY};
}

/* Moving op t's result from placement q to p (dom indices), times its count. */
static Cost move_cost(Search *s, int t, int q, int p)
{
	if (q == p)
		return (Cost){0};
	if (!s->move[t]) {
		s->move[t] = xcalloc((size_t)MAXDOM * MAXDOM, sizeof(Cost));
		for (int i = 0; i < MAXDOM * MAXDOM; i++)
			s->move[t][i].seconds = -1;
	}
	Cost *c = &s->move[t][q * MAXDOM + p];
	if (c->seconds < 0)
		*c = cost_scale(cost_move(&s->cc, type_of(s, t), &s->dom[t].p[q], 1, &s->dom[t].p[p]), s->times[t]);
	return *c;
}

static int find_out(Search *s, int t, Place p)
{
	return dom_find(&s->dom[t], type_of(s, t), p);
}

static double rank_bytes(Search *s, const RelType *t, const Place *p, double copies)
{
	return cost_rank_bytes(&s->cc, t, p, copies);
}

static void push_impl(Search *s, int t, Impl im)
{
	if (!s->gen_all && s->budget > 0 && im.mem > s->budget)
		return;
	im.cost = cost_scale(im.cost, s->times[t]);
	vec_push(&s->impls[t], im);
}

/* The placement of a local join's key space given its inputs', or false
 * when matching tuples would not meet (ia_derive_place's join rule). */
static bool join_place(const TraOp *j, const RelType *lt, const Place *l, const Place *r, Place *jp)
{
	if (l->kind == PL_ALL && r->kind == PL_ALL) {
		*jp = place_all();
		return true;
	}
	if (l->kind == PL_ALL) {
		*jp = (Place){.kind = PL_PART, .ndims = r->ndims};
		for (int i = 0; i < r->ndims; i++)
			jp->dims[i] = ia_join_out_dim(lt->nkey, j->u.join.nmatch, j->u.join.rkey, r->dims[i], j->u.join.lkey);
		return true;
	}
	if (r->kind == PL_ALL) {
		*jp = *l;
		return true;
	}
	if (l->ndims != r->ndims)
		return false;
	for (int i = 0; i < l->ndims; i++) {
		bool matched = false;
		for (int m = 0; m < j->u.join.nmatch; m++)
			matched |= j->u.join.lkey[m] == l->dims[i] && j->u.join.rkey[m] == r->dims[i];
		if (!matched)
			return false;
	}
	*jp = *l;
	return true;
}

/* Pairs of input placements under which a local join works: (all, all),
 * (all, any), (any, all), and co-partitionings on the join keys. */
typedef struct Pair {
	int l, r;
	Place jp;
} Pair;

static int join_pairs(Search *s, const TraOp *j, Pair *out, int max)
{
	int L = j->u.join.left, R = j->u.join.right, n = 0;
	const Dom *dl = &s->dom[L], *dr = &s->dom[R];
	const RelType *lt = type_of(s, L);
	RelType jt = ia_join_type(lt, type_of(s, R), j->u.join.nmatch, j->u.join.lkey, j->u.join.rkey);
	for (int a = 0; a < dl->n; a++)
		for (int b = 0; b < dr->n; b++) {
			const Place *pl = &dl->p[a], *pr = &dr->p[b];
			/* (part, part) pairs only when co-partitioned; skip the
			 * rest quickly */
			if (pl->kind == PL_PART && pr->kind == PL_PART && pl->ndims != pr->ndims)
				continue;
			Place jp;
			if (!join_place(j, lt, pl, pr, &jp))
				continue;
			if (n < max)
				out[n++] = (Pair){a, b, place_norm(&jt, jp)};
		}
	return n;
}

/* The strategy a contraction's (or join's) input placements make. */
static Strategy pair_strategy(const Place *l, const Place *r)
{
	if (l->kind == PL_ALL && r->kind == PL_ALL)
		return STRAT_LOCAL;
	if (l->kind == PL_ALL || r->kind == PL_ALL)
		return STRAT_BROADCAST;
	return STRAT_COPARTITION;
}

/* Aggregating a relation of type it placed by p onto `group`: the result's
 * placement if complete (true), or false when partials remain. */
static bool agg_complete(const RelType *it, const Place *p, int ngroup, const int *group, Place *out)
{
	if (p->kind == PL_ALL) {
		*out = place_all();
		return true;
	}
	Place q = {.kind = PL_PART};
	for (int i = 0; i < p->ndims; i++) {
		int pos = -1;
		for (int g = 0; g < ngroup; g++)
			if (group[g] == p->dims[i])
				pos = g;
		if (pos < 0) {
			if (rel_frontier(it, p->dims[i]) == 1)
				continue;
			return false;
		}
		q.dims[q.ndims++] = pos;
	}
	*out = q;
	return true;
}

static bool allowed(Search *s, int t, Strategy st, int side)
{
	int stmt = s->tra->ops.v[t].stmt;
	if (s->gen_all || stmt < 0 || s->force[stmt] == STRAT_NONE)
		return true;
	return st == s->force[stmt] && (s->forceside[stmt] < 0 || s->forceside[stmt] == side);
}

/* The aggregation's result after partial sums: a shuffle to every
 * partitioning of the result, or a broadcast to all sites. */
static void partial_targets(Search *s, int t, Impl base, double partial_floats_copies, const RelType *ot,
                            ImplKind shuf, ImplKind bc)
{
	const Dom *d = &s->dom[t];
	for (int i = 0; i < d->n; i++) {
		Impl im = base;
		Place pp = place_partial();
		Cost mv = cost_move(&s->cc, ot, &pp, partial_floats_copies, &d->p[i]);
		Cost ag;
		if (d->p[i].kind == PL_ALL) {
			im.kind = bc;
			Place all = place_all();
			ag = cost_agg(&s->cc, ot, &all, 1, ot);
			ag = cost_scale(ag, partial_floats_copies);
			im.mem += rank_bytes(s, ot, &all, 1) * partial_floats_copies;
		} else {
			im.kind = shuf;
			Place in = place_partial();
			ag = cost_agg(&s->cc, ot, &in, partial_floats_copies, ot);
			im.mem += rank_bytes(s, ot, &d->p[i], 1) * 2;
			im.rules |= RB(R2_5);
		}
		im.cost = cost_add(cost_add(im.cost, mv), ag);
		im.out = i;
		im.mid = d->p[i];
		push_impl(s, t, im);
	}
}

/* RMM's key maps: join-space dim o is the left's dim lmap[o] and the
 * right's rmap[o], or -1 where the side is duplicated along it. */
static void rmm_keymaps(const TraOp *j, const RelType *lt, const RelType *rt, const RelType *jt, int *lmap, int *rmap)
{
	for (int o = 0; o < jt->nkey; o++) {
		lmap[o] = o < lt->nkey ? o : -1;
		rmap[o] = -1;
	}
	for (int d = 0; d < rt->nkey; d++)
		rmap[ia_join_out_dim(lt->nkey, j->u.join.nmatch, j->u.join.rkey, d, j->u.join.lkey)] = d;
}

/* A side replicated into the join space: its key dims placed by keymap,
 * its chunks unchanged. */
static RelType rep_type(const RelType *jt, const RelType *st, const int *keymap)
{
	RelType r = *jt;
	r.dtype = st->dtype;
	r.nchunk = st->nchunk;
	for (int c = 0; c < st->nchunk; c++)
		for (int o = 0; o < jt->nkey; o++)
			if (keymap[o] == st->chunkdim[c])
				r.chunkdim[c] = o;
	return r;
}

/* Where a two-phase schedule takes its inputs from: everywhere, or
 * partitioned on one dim (the schedule moves what it needs). */
static bool twophase_input(const Place *p)
{
	return p->kind == PL_ALL || (p->kind == PL_PART && p->ndims == 1);
}

/* Two-phase schedules of a contraction (twophase.c): the paper's greedy
 * decides per chunk what moves where, for inputs in each placement above
 * and the result in each partitioning of up to two dims. */
static void twophase_impls(Search *s, int t, const TraOp *op, const TraOp *j)
{
	int L = j->u.join.left, R = j->u.join.right;
	if (s->quick || s->cc.nsites < 2 || !allowed(s, t, STRAT_TWOPHASE, -1) || !opt_twophase_dense(s->tra, L) ||
	    !opt_twophase_dense(s->tra, R))
		return;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R), *ot = &op->type;
	Kernel k = *j->u.join.kernel;
	k.red = op->u.agg.agg;
	const Dom *dl = &s->dom[L], *dr = &s->dom[R], *dt = &s->dom[t];
	for (int a = 0; a < dl->n; a++)
		for (int b = 0; b < dr->n; b++) {
			const Place *pl = &dl->p[a], *pr = &dr->p[b];
			if (!twophase_input(pl) || !twophase_input(pr) || (pl->kind == PL_ALL && pr->kind == PL_ALL))
				continue;
			for (int o = 0; o < dt->n; o++) {
				const Place *po = &dt->p[o];
				if (po->kind != PL_PART || po->ndims > 2 || (po->ndims == 0 && rel_ntuples(ot) > 1))
					continue;
				double fixed = rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1) + rank_bytes(s, ot, po, 1);
				if (s->budget > 0 && fixed >= s->budget)
					continue;
				const TpSched *ts = opt_twophase_candidate(&s->cc, &k, lt, rt, j->u.join.nmatch, j->u.join.lkey,
				                                           j->u.join.rkey, op->u.agg.ngroup, op->u.agg.group,
				                                           ot, pl, pr, po, s->budget > 0 ? s->budget - fixed : 0);
				if (!ts)
					continue;
				Impl im = {.kind = IM_TWOPHASE, .inpl = {a, b}, .out = o, .strat = STRAT_TWOPHASE,
				           .rules = RB(R1_7), .tp = ts};
				im.cost = (Cost){ts->seconds, ts->floats, ts->bytes, ts->flops};
				im.mem = fixed + ts->mem;
				push_impl(s, t, im);
			}
		}
}

/* Implementations of a contraction: aggregation t of join j. */
static void contraction_impls(Search *s, int t, const TraOp *op, const TraOp *j)
{
	int L = j->u.join.left, R = j->u.join.right;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R), *ot = &op->type;
	RelType jt = ia_join_type(lt, rt, j->u.join.nmatch, j->u.join.lkey, j->u.join.rkey);
	Pair pairs[MAXDOM * MAXDOM];
	int np = join_pairs(s, j, pairs, MAXDOM * MAXDOM);
	const int ng = op->u.agg.ngroup;
	const int *group = op->u.agg.group;

	for (int k = 0; k < np; k++) {
		const Place *pl = &s->dom[L].p[pairs[k].l], *pr = &s->dom[R].p[pairs[k].r];
		Impl im = {.inpl = {pairs[k].l, pairs[k].r}, .strat = pair_strategy(pl, pr), .rules = RB(R1_7),
		           .side = pl->kind == PL_ALL ? 0 : 1};
		if (!allowed(s, t, im.strat, im.side))
			continue;
		if (im.strat == STRAT_BROADCAST)
			im.rules |= RB(BMM);
		Place jp = pairs[k].jp;
		im.cost = cost_join(&s->cc, j->u.join.kernel, lt, rt, j->u.join.nmatch, j->u.join.lkey, j->u.join.rkey, &jp);
		im.mem = rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1);
		Place outp;
		if (agg_complete(&jt, &jp, ng, group, &outp)) {
			im.kind = IM_CONTRACT;
			im.out = find_out(s, t, outp);
			if (im.out < 0)
				continue;
			im.mem += rank_bytes(s, ot, &s->dom[t].p[im.out], 1);
			if (im.strat == STRAT_COPARTITION)
				im.rules |= RB(R2_4);
			push_impl(s, t, im);
		} else {
			double copies = cost_partial_copies(&s->cc, &jt, &jp, ng, group);
			im.mem += rank_bytes(s, ot, &(Place){.kind = PL_PARTIAL}, copies);
			if (im.strat == STRAT_COPARTITION)
				im.rules |= RB(CMM);
			partial_targets(s, t, im, copies, ot, IM_CONTRACT_SHUF, IM_CONTRACT_BCAST);
		}
	}

	twophase_impls(s, t, op, j);

	/* RMM: the dims only one side has must all be grouped on and make the
	 * partitioning, one from each side */
	if (!allowed(s, t, STRAT_REPLICATE, -1))
		return;
	int lonly[MAXDIM], nlo = 0, ronly[MAXDIM], nro = 0;
	for (int d = 0; d < jt.nkey; d++) {
		bool inl = d < lt->nkey, matched = false;
		for (int m = 0; m < j->u.join.nmatch; m++)
			matched |= j->u.join.lkey[m] == d;
		if (inl && matched)
			continue;
		bool grouped = false;
		for (int g = 0; g < ng; g++)
			grouped |= group[g] == d;
		if (rel_frontier(&jt, d) == 1)
			continue;
		if (!grouped)
			return;         /* a side's own dim is summed: no RMM */
		if (inl)
			lonly[nlo++] = d;
		else
			ronly[nro++] = d;
	}
	if (nlo != 1 || nro != 1)
		return;
	for (int order = 0; order < 2; order++) {
		Place P = place_part(2, order ? (int[]){ronly[0], lonly[0]} : (int[]){lonly[0], ronly[0]});
		Place outp;
		if (!agg_complete(&jt, &P, ng, group, &outp))
			continue;
		int oi = find_out(s, t, outp);
		if (oi < 0)
			continue;
		Impl im = {.kind = IM_RMM, .inpl = {ANYPL, ANYPL}, .out = oi, .mid = P,
		           .strat = STRAT_REPLICATE, .rules = RB(RMM) | RB(R1_7) | RB(R2_4)};
		/* the shuffles of the replicated sides (their floats count every
		 * copy: the paper's Front(Y)[1] |X| + Front(X)[0] |Y|) */
		int lmap[MAXDIM], rmap[MAXDIM];
		rmm_keymaps(j, lt, rt, &jt, lmap, rmap);
		RelType ls = rep_type(&jt, lt, lmap), rs = rep_type(&jt, rt, rmap);
		Place src = place_partial();
		Cost mvl = cost_move(&s->cc, &ls, &src, 1, &P);
		Cost mvr = cost_move(&s->cc, &rs, &src, 1, &P);
		im.cost = cost_add(mvl, mvr);
		im.cost = cost_add(im.cost, cost_join(&s->cc, j->u.join.kernel, lt, rt, j->u.join.nmatch, j->u.join.lkey,
		                                      j->u.join.rkey, &P));
		im.mem = rank_bytes(s, &ls, &P, 1) + rank_bytes(s, &rs, &P, 1) + rank_bytes(s, ot, &s->dom[t].p[oi], 1);
		push_impl(s, t, im);
	}
}

/* Implementations of an aggregation that absorbs no join. */
static void agg_impls(Search *s, int t, const TraOp *op)
{
	int in = op->u.agg.in;
	const RelType *it = type_of(s, in), *ot = &op->type;
	const Dom *di = &s->dom[in];
	for (int a = 0; a < di->n; a++) {
		const Place *p = &di->p[a];
		Place outp;
		Impl im = {.inpl = {a}, .strat = STRAT_LOCAL};
		im.cost = cost_agg(&s->cc, it, p, 1, ot);
		im.mem = rank_bytes(s, it, p, 1);
		if (agg_complete(it, p, op->u.agg.ngroup, op->u.agg.group, &outp)) {
			im.kind = IM_LOCAL;
			im.out = find_out(s, t, outp);
			im.rules = RB(R2_4);
			if (im.out >= 0) {
				im.mem += rank_bytes(s, ot, &s->dom[t].p[im.out], 1);
				push_impl(s, t, im);
			}
			continue;
		}
		/* partials: two-phase (R2-5), or Table 1's shuffle first */
		double copies = cost_partial_copies(&s->cc, it, p, op->u.agg.ngroup, op->u.agg.group);
		im.strat = STRAT_OTHER;
		partial_targets(s, t, im, copies, ot, IM_AGG_TWOPHASE, IM_AGG_ALLRED);
		const Dom *d = &s->dom[t];
		for (int i = 0; i < d->n; i++) {
			if (d->p[i].kind != PL_PART || d->p[i].ndims == 0)
				continue;
			Place tin = {.kind = PL_PART, .ndims = d->p[i].ndims};
			for (int k = 0; k < d->p[i].ndims; k++)
				tin.dims[k] = op->u.agg.group[d->p[i].dims[k]];
			Impl sh = {.kind = IM_AGG_SHUFFLE, .inpl = {a}, .out = i, .mid = tin, .strat = STRAT_OTHER};
			sh.cost = cost_add(cost_move(&s->cc, it, p, 1, &tin), cost_agg(&s->cc, it, &tin, 1, ot));
			sh.mem = rank_bytes(s, it, p, 1) + rank_bytes(s, it, &tin, 1) + rank_bytes(s, ot, &d->p[i], 1);
			push_impl(s, t, sh);
		}
	}
}

/* A local join that no aggregation absorbs. */
static void join_impls(Search *s, int t, const TraOp *op)
{
	int L = op->u.join.left, R = op->u.join.right;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R);
	Pair pairs[MAXDOM * MAXDOM];
	int np = join_pairs(s, op, pairs, MAXDOM * MAXDOM);
	for (int k = 0; k < np; k++) {
		const Place *pl = &s->dom[L].p[pairs[k].l], *pr = &s->dom[R].p[pairs[k].r];
		Impl im = {.kind = IM_LOCAL, .inpl = {pairs[k].l, pairs[k].r}, .strat = pair_strategy(pl, pr),
		           .rules = RB(R2_6), .side = pl->kind == PL_ALL ? 0 : 1};
		if (!allowed(s, t, im.strat, im.side))
			continue;
		im.out = find_out(s, t, pairs[k].jp);
		if (im.out < 0)
			continue;
		im.cost = cost_join(&s->cc, op->u.join.kernel, lt, rt, op->u.join.nmatch, op->u.join.lkey,
		                    op->u.join.rkey, &pairs[k].jp);
		im.mem = rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1) +
		         rank_bytes(s, &op->type, &s->dom[t].p[im.out], 1);
		push_impl(s, t, im);
	}
}

/* A map, rekey or filter: each input placement, carried through. */
static void unary_impls(Search *s, int t, const TraOp *op, int in)
{
	const Dom *di = &s->dom[in];
	for (int a = 0; a < di->n; a++) {
		Place p = di->p[a];
		if (op->kind == TRA_REKEY && p.kind == PL_PART) {
			Place q = {.kind = PL_PART};
			bool ok = true;
			for (int i = 0; i < p.ndims; i++) {
				int pos = -1;
				for (int k = 0; k < op->u.rekey.nkey; k++)
					if (op->u.rekey.keymap[k] == p.dims[i])
						pos = k;
				if (pos < 0)
					ok = false;
				else
					q.dims[q.ndims++] = pos;
			}
			if (!ok)
				continue;
			p = q;
		}
		Impl im = {.kind = IM_LOCAL, .inpl = {a}, .strat = STRAT_LOCAL};
		im.out = find_out(s, t, p);
		if (im.out < 0)
			continue;
		if (op->kind == TRA_MAP)
			im.cost = cost_map(&s->cc, op->u.map.kernel, type_of(s, in), &di->p[a]);
		im.mem = rank_bytes(s, type_of(s, in), &di->p[a], 1) * (op->kind == TRA_MAP ? 2 : 1);
		push_impl(s, t, im);
	}
}

/* A layout an input or param may start in for free: partitioned on some
 * key dims (everything on rank 0 only when it is one tuple anyway). */
static bool free_layout(const RelType *t, const Place *p)
{
	return p->kind == PL_PART && (p->ndims > 0 || rel_ntuples(t) == 1);
}

static const PlacePin *place_pin(Search *s, int tensor)
{
	for (int i = 0; i < s->o->nplacepins; i++)
		if (s->o->placepins[i].tensor == tensor)
			return &s->o->placepins[i];
	return NULL;
}

static void gen_impls(Search *s, int t);

/* Every op's implementations for the current params' placements, forcing
 * and budget: joins, aggregations and maps from their cache. */
static void make_impls(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		TraOpKind k = s->tra->ops.v[t].kind;
		s->impls[t].n = 0;
		if (k != TRA_JOIN && k != TRA_AGG && k != TRA_MAP && k != TRA_REKEY && k != TRA_FILTER) {
			gen_impls(s, t);
			continue;
		}
		if (!s->cached[t] || s->cache_budget[t] != s->budget) {
			s->gen_all = true;
			gen_impls(s, t);
			s->gen_all = false;
			vec_free(&s->cache[t]);
			s->cache[t] = s->impls[t];
			s->impls[t] = (Impls){0};
			s->cached[t] = true;
			s->cache_budget[t] = s->budget;
		}
		/* joins and contractions obey --strategy; aggregations, maps do not */
		const TraOp *op = &s->tra->ops.v[t];
		bool forceable = k == TRA_JOIN || (k == TRA_AGG && s->absorbed[op->u.agg.in] == t);
		for (int c = 0; c < s->cache[t].n; c++) {
			const Impl *im = &s->cache[t].v[c];
			if ((s->budget > 0 && im->mem > s->budget) || (forceable && !allowed(s, t, im->strat, im->side)))
				continue;
			vec_push(&s->impls[t], *im);
		}
	}
}

static void gen_impls(Search *s, int t)
{
	{
		const TraOp *op = &s->tra->ops.v[t];
		switch (op->kind) {
		case TRA_INPUT: {
			const PlacePin *pin = place_pin(s, op->u.input.tensor);
			const Dom *d = &s->dom[t];
			Place pinned = pin ? place_norm(&op->type, pin->place) : place_all();
			for (int i = 0; i < d->n; i++) {
				if (pin ? !place_eq(&pinned, &d->p[i]) : !free_layout(&op->type, &d->p[i]))
					continue;
				Impl im = {.kind = IM_SOURCE, .inpl = {ANYPL, ANYPL}, .out = i, .strat = STRAT_LOCAL};
				/* read everywhere only when pinned so: a broadcast from disk */
				if (d->p[i].kind == PL_ALL) {
					Place one = place_part(0, NULL);
					im.cost = cost_move(&s->cc, &op->type, &one, 1, &d->p[i]);
				}
				im.mem = rank_bytes(s, &op->type, &d->p[i], 1);
				push_impl(s, t, im);
			}
			break;
		}
		case TRA_INIT:
		case TRA_LOAD: {
			int i = find_out(s, t, s->varplace[op->u.init.tensor]);
			if (i < 0)
				tr_bug("param placement outside its domain");
			Impl im = {.kind = IM_SOURCE, .inpl = {ANYPL, ANYPL}, .out = i, .strat = STRAT_LOCAL};
			im.mem = rank_bytes(s, &op->type, &s->dom[t].p[i], 1);
			vec_push(&s->impls[t], im);     /* never over budget: it is the param */
			break;
		}
		case TRA_JOIN:
			if (s->absorbed[t] < 0)
				join_impls(s, t, op);
			break;
		case TRA_AGG:
			for (int j = 0; j < s->n; j++)
				if (s->absorbed[j] == t)
					contraction_impls(s, t, op, &s->tra->ops.v[j]);
			if (s->tra->ops.v[op->u.agg.in].kind != TRA_JOIN || s->absorbed[op->u.agg.in] != t)
				agg_impls(s, t, op);
			break;
		case TRA_MAP:
			unary_impls(s, t, op, op->u.map.in);
			break;
		case TRA_REKEY:
			unary_impls(s, t, op, op->u.rekey.in);
			break;
		case TRA_FILTER:
			unary_impls(s, t, op, op->u.filter.in);
			break;
		case TRA_OUTPUT:
		case TRA_PRINT: {
			Impl im = {.kind = IM_LOCAL, .inpl = {ANYPL, ANYPL}, .out = -1, .strat = STRAT_LOCAL};
			vec_push(&s->impls[t], im);
			break;
		}
		case TRA_STORE: {
			int in = op->u.store.in;
			int i = dom_find(&s->dom[in], type_of(s, in), s->varplace[op->u.store.tensor]);
			if (i < 0)
				tr_bug("param placement outside its value's domain");
			Impl im = {.kind = IM_LOCAL, .inpl = {i, ANYPL}, .out = -1, .strat = STRAT_LOCAL};
			vec_push(&s->impls[t], im);
			break;
		}
		case TRA_LOOP:
		case TRA_ENDLOOP:
			break;
		case TRA_GRAD:
			tr_bug("a grad op reached the search");
		}
	}
}

/* ---- the dynamic program ---- */

static int nins(const Search *s, int t, int *in)
{
	const TraOp *op = &s->tra->ops.v[t];
	if (op->kind == TRA_AGG && s->absorbed[op->u.agg.in] == t) {
		const TraOp *j = &s->tra->ops.v[op->u.agg.in];
		in[0] = j->u.join.left;
		in[1] = j->u.join.right;
		return 2;
	}
	return tra_inputs(op, in);
}

static Cost in_cost(Search *s, int v, int q)
{
	if (q == ANYPL)
		return s->home[v];
	return *at(s->avail, v, q);
}

static void dp(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		for (int i = 0; i < s->dom[t].n; i++)
			*at(s->best, t, i) = *at(s->avail, t, i) = inf_cost();
		s->home[t] = inf_cost();
		int in[2];
		int k = nins(s, t, in);
		for (int c = 0; c < s->impls[t].n; c++) {
			const Impl *im = &s->impls[t].v[c];
			if (im->out < 0)
				continue;
			Cost tot = im->cost;
			for (int j = 0; j < k; j++)
				tot = cost_add(tot, in_cost(s, in[j], im->inpl[j]));
			if (cost_cmp(tot, *at(s->best, t, im->out)) < 0)
				*at(s->best, t, im->out) = tot;
		}
		const Dom *d = &s->dom[t];
		for (int p = 0; p < d->n; p++) {
			Cost b = *at(s->best, t, p);
			if (cost_cmp(b, s->home[t]) < 0)
				s->home[t] = b;
		}
		if (isinf(s->home[t].seconds))
			continue;       /* no result (a sink), or none possible */
		for (int p = 0; p < d->n; p++) {
			Cost b = *at(s->best, t, p);
			for (int q = 0; q < d->n; q++) {
				Cost bq = *at(s->best, t, q);
				if (q == p || isinf(bq.seconds) || bq.seconds >= b.seconds)
					continue;
				Cost c = cost_add(bq, move_cost(s, t, q, p));
				if (cost_cmp(c, b) < 0)
					b = c;
			}
			*at(s->avail, t, p) = b;
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
	Cost a = *at(s->avail, v, q), h = s->home[v];
	Cost d = {a.seconds - h.seconds, a.floats - h.floats, a.bytes - h.bytes, a.flops - h.flops};
	if (d.seconds < 0)
		d.seconds = 0;
	if (d.floats < 0)
		d.floats = 0;
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
		if (op->kind == TRA_LOOP || op->kind == TRA_ENDLOOP || (op->kind == TRA_JOIN && s->absorbed[t] >= 0))
			continue;
		if (!is_sink(op->kind) && !s->req[t] && !s->anyreq[t])
			continue;       /* nobody reads it */
		int in[2];
		int k = nins(s, t, in);
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
			if (bi < 0 || cost_cmp(tot, bestc) < 0) {
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
	IaPlan *p;
	int *homeop;            /* per TRA op: its IA op */
	int *moved;             /* [n][MAXDOM]: IA op of the op's result moved there, or -1 */
	int *first_reader;      /* [n][MAXDOM]: the first reader needing it there */
} Build;

static int emit(Build *b, IaOp op)
{
	Buf why = {0};
	if (!ia_derive_place(b->p, &op, &op.place, &why))
		tr_bug("search made an invalid %s: %s", ia_op_name(op.kind), why.s);
	buf_free(&why);
	return ia_push(b->p, op);
}

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
	Place have = place_norm(t, b->p->ops.v[h].place);
	if (place_eq(&have, &want))
		return h;
	int *m = &b->moved[(size_t)v * MAXDOM + q];
	if (*m >= 0)
		return *m;
	IaOp mv = {.stmt = stmt, .tra = v, .type = b->p->ops.v[h].type};
	if (want.kind == PL_ALL) {
		mv.kind = IA_BCAST;
		mv.u.bcast.in = h;
	} else {
		mv.kind = IA_SHUFFLE;
		mv.u.shuffle.in = h;
		mv.place = want;
	}
	return *m = emit(b, mv);
}

/* After op v's result is made: moves its readers in deeper loops need are
 * made here, once, not in every iteration. */
static void early_moves(Build *b, int v)
{
	Search *s = b->s;
	for (int q = 0; q < s->dom[v].n; q++) {
		int r = b->first_reader[(size_t)v * MAXDOM + q];
		if (r >= 0 && s->depth[r] > s->depth[v])
			get(b, v, q, s->tra->ops.v[r].stmt);
	}
}

static IaOp join_op(const TraOp *j, int stmt, int tra, int l, int r, const RelType *type)
{
	IaOp op = {.kind = IA_JOIN, .stmt = stmt, .tra = tra, .type = *type};
	op.u.join.left = l;
	op.u.join.right = r;
	op.u.join.nmatch = j->u.join.nmatch;
	memcpy(op.u.join.lkey, j->u.join.lkey, sizeof op.u.join.lkey);
	memcpy(op.u.join.rkey, j->u.join.rkey, sizeof op.u.join.rkey);
	op.u.join.ngroup = -1;
	op.u.join.kernel = j->u.join.kernel;
	return op;
}

static int agg_op(Build *b, int in, const TraOp *t, int tra, bool identity)
{
	IaOp op = {.kind = IA_AGG, .stmt = t->stmt, .tra = tra, .type = t->type};
	op.u.agg.in = in;
	op.u.agg.ngroup = t->u.agg.ngroup;
	op.u.agg.agg = t->u.agg.agg;
	for (int g = 0; g < t->u.agg.ngroup; g++)
		op.u.agg.group[g] = identity ? g : t->u.agg.group[g];
	return emit(b, op);
}

static int move_op(Build *b, int in, const Place *to, int stmt, int tra)
{
	IaOp mv = {.stmt = stmt, .tra = tra, .type = b->p->ops.v[in].type};
	if (to->kind == PL_ALL) {
		mv.kind = IA_BCAST;
		mv.u.bcast.in = in;
	} else {
		mv.kind = IA_SHUFFLE;
		mv.u.shuffle.in = in;
		mv.place = *to;
	}
	return emit(b, mv);
}

/* RMM's replication of one side into the join space. */
static int replicate(Build *b, int in, const RelType *st, const RelType *jt, const int *keymap, int stmt, int tra)
{
	IaOp op = {.kind = IA_MAP, .stmt = stmt, .tra = tra, .type = rep_type(jt, st, keymap)};
	op.u.map.in = in;
	op.u.map.nkey = jt->nkey;
	memcpy(op.u.map.keymap, keymap, sizeof op.u.map.keymap);
	op.u.map.kernel = NULL;
	return emit(b, op);
}

static void build_unit(Build *b, int t)
{
	Search *s = b->s;
	const TraOp *op = &s->tra->ops.v[t];
	const Impl *im = &s->impls[t].v[s->choice[t]];
	int in[2];
	int k = nins(s, t, in);
	int x[2] = {-1, -1};
	if (im->kind != IM_SOURCE)
		for (int j = 0; j < k; j++)
			x[j] = get(b, in[j], im->inpl[j], op->stmt);
	IaOp ia = {.stmt = op->stmt, .tra = t, .type = op->type};
	int res = -1;

	switch (op->kind) {
	case TRA_INPUT:
		ia.kind = IA_READ;
		ia.u.read.tensor = op->u.input.tensor;
		ia.place = s->dom[t].p[im->out];
		if (ia.place.kind == PL_ALL) {
			/* pinned everywhere: read on rank 0's share, broadcast */
			ia.place = place_part(0, NULL);
			res = move_op(b, emit(b, ia), &(Place){.kind = PL_ALL}, op->stmt, t);
		} else {
			res = emit(b, ia);
		}
		break;
	case TRA_INIT:
	case TRA_LOAD:
		ia.kind = op->kind == TRA_INIT ? IA_INIT : IA_LOAD;
		ia.u.init.tensor = op->u.init.tensor;
		res = emit(b, ia);
		break;
	case TRA_JOIN:
		ia = join_op(op, op->stmt, t, x[0], x[1], &op->type);
		res = emit(b, ia);
		break;
	case TRA_MAP:
		ia.kind = IA_MAP;
		ia.u.map.in = x[0];
		ia.u.map.nkey = op->type.nkey;
		for (int d = 0; d < op->type.nkey; d++)
			ia.u.map.keymap[d] = d;
		ia.u.map.kernel = op->u.map.kernel;
		res = emit(b, ia);
		break;
	case TRA_REKEY:
		ia.kind = IA_MAP;
		ia.u.map.in = x[0];
		ia.u.map.nkey = op->u.rekey.nkey;
		memcpy(ia.u.map.keymap, op->u.rekey.keymap, sizeof ia.u.map.keymap);
		ia.u.map.kernel = NULL;
		res = emit(b, ia);
		break;
	case TRA_FILTER:
		ia.kind = IA_FILTER;
		ia.u.filter.in = x[0];
		ia.u.filter.pred = op->u.filter.pred;
		res = emit(b, ia);
		break;
	case TRA_OUTPUT:
		ia.kind = IA_WRITE;
		ia.u.write.in = x[0];
		ia.u.write.tensor = op->u.output.tensor;
		emit(b, ia);
		return;
	case TRA_PRINT:
	case TRA_STORE:
		ia.kind = op->kind == TRA_PRINT ? IA_PRINT : IA_STORE;
		ia.u.store.in = x[0];
		ia.u.store.tensor = op->u.store.tensor;
		emit(b, ia);
		return;
	case TRA_LOOP:
	case TRA_ENDLOOP:
		return;
	case TRA_GRAD:
		tr_bug("a grad op reached the search");
	case TRA_AGG: {
		bool contraction = s->absorbed[op->u.agg.in] == t;
		if (!contraction) {
			switch (im->kind) {
			case IM_LOCAL:
				res = agg_op(b, x[0], op, t, false);
				break;
			case IM_AGG_SHUFFLE:
				res = agg_op(b, move_op(b, x[0], &im->mid, op->stmt, t), op, t, false);
				break;
			case IM_AGG_TWOPHASE:
			case IM_AGG_ALLRED: {
				int pre = agg_op(b, x[0], op, t, false);
				res = agg_op(b, move_op(b, pre, &im->mid, op->stmt, t), op, t, true);
				break;
			}
			default:
				tr_bug("aggregation implementation %d", (int)im->kind);
			}
			break;
		}
		const TraOp *j = &s->tra->ops.v[op->u.agg.in];
		const RelType *lt = type_of(s, in[0]), *rt = type_of(s, in[1]);
		RelType jt = ia_join_type(lt, rt, j->u.join.nmatch, j->u.join.lkey, j->u.join.rkey);
		IaOp f = join_op(j, op->stmt, t, x[0], x[1], &op->type);
		f.u.join.ngroup = op->u.agg.ngroup;
		memcpy(f.u.join.group, op->u.agg.group, sizeof f.u.join.group);
		f.u.join.kernel = kernel_clone(b->p->arena, j->u.join.kernel);
		f.u.join.kernel->red = op->u.agg.agg;
		switch (im->kind) {
		case IM_CONTRACT:
			res = emit(b, f);
			break;
		case IM_CONTRACT_SHUF:
		case IM_CONTRACT_BCAST: {
			int part = emit(b, f);
			res = agg_op(b, move_op(b, part, &im->mid, op->stmt, t), op, t, true);
			break;
		}
		case IM_RMM: {
			int lmap[MAXDIM], rmap[MAXDIM];
			rmm_keymaps(j, lt, rt, &jt, lmap, rmap);
			int lr = replicate(b, x[0], lt, &jt, lmap, op->stmt, t);
			int rr = replicate(b, x[1], rt, &jt, rmap, op->stmt, t);
			int ls = move_op(b, lr, &im->mid, op->stmt, t);
			int rs = move_op(b, rr, &im->mid, op->stmt, t);
			f.u.join.left = ls;
			f.u.join.right = rs;
			f.u.join.nmatch = jt.nkey;
			for (int d = 0; d < jt.nkey; d++)
				f.u.join.lkey[d] = f.u.join.rkey[d] = d;
			res = emit(b, f);
			break;
		}
		case IM_TWOPHASE: {
			IaOp tp = {.kind = IA_TWOPHASE, .stmt = op->stmt, .tra = t, .type = op->type,
			           .place = s->dom[t].p[im->out]};
			tp.u.twophase.left = x[0];
			tp.u.twophase.right = x[1];
			tp.u.twophase.nmatch = f.u.join.nmatch;
			memcpy(tp.u.twophase.lkey, f.u.join.lkey, sizeof tp.u.twophase.lkey);
			memcpy(tp.u.twophase.rkey, f.u.join.rkey, sizeof tp.u.twophase.rkey);
			tp.u.twophase.ngroup = f.u.join.ngroup;
			memcpy(tp.u.twophase.group, f.u.join.group, sizeof tp.u.twophase.group);
			tp.u.twophase.kernel = f.u.join.kernel;
			tp.u.twophase.sched = im->tp;
			res = emit(b, tp);
			break;
		}
		default:
			tr_bug("contraction implementation %d", (int)im->kind);
		}
		break;
	}
	}
	b->homeop[t] = res;
	early_moves(b, t);
}

static IaPlan *build(Search *s)
{
	int n = s->n;
	Build b = {s, ia_new(s->tra, s->o->nranks), xcalloc(n + 1, sizeof(int)),
	           xcalloc((size_t)(n + 1) * MAXDOM, sizeof(int)), xcalloc((size_t)(n + 1) * MAXDOM, sizeof(int))};
	for (int i = 0; i < n; i++)
		b.homeop[i] = -1;
	for (size_t i = 0; i < (size_t)(n + 1) * MAXDOM; i++)
		b.moved[i] = b.first_reader[i] = -1;
	for (int t = 0; t < s->tra->tensors.n; t++)
		b.p->varplace.v[t] = s->varplace[t];
	/* the first reader of each (value, placement) */
	for (int t = 0; t < n; t++) {
		if (s->choice[t] < 0)
			continue;
		const Impl *im = &s->impls[t].v[s->choice[t]];
		int in[2];
		int k = nins(s, t, in);
		for (int j = 0; j < k; j++)
			if (im->inpl[j] != ANYPL && b.first_reader[(size_t)in[j] * MAXDOM + im->inpl[j]] < 0)
				b.first_reader[(size_t)in[j] * MAXDOM + im->inpl[j]] = t;
	}
	for (int t = 0; t < n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->kind == TRA_LOOP || op->kind == TRA_ENDLOOP) {
			IaOp l = {.kind = op->kind == TRA_LOOP ? IA_LOOP : IA_ENDLOOP, .stmt = -1, .tra = t};
			l.u.loop.count = op->u.loop.count;
			emit(&b, l);
			continue;
		}
		if (s->choice[t] >= 0)
			build_unit(&b, t);
	}
	free(b.homeop);
	free(b.moved);
	free(b.first_reader);
	return b.p;
}

/* ---- strategies, as the plan shows them ---- */

/* A statement's strategy: that of its costliest join: replicate when its
 * inputs are replicated, broadcast when one is a broadcast, co-partition
 * when partitioned inputs were shuffled or its partial sums are, local when
 * nothing moves.  Statements without joins: local, or other if they move. */
static void classify(IaPlan *p)
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
		if (op->stmt < 0 || op->kind != IA_JOIN)
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
	for (int s = 0; s < ns; s++)
		if (p->strategy.v[s] == STRAT_NONE)
			p->strategy.v[s] = moved[s] > 0 ? STRAT_OTHER : STRAT_LOCAL;
	free(flops);
	free(moved);
}

/* ---- the search ---- */

static void search_init(Search *s, TraProg *tra, const OptOptions *o, const Machine *m)
{
	int n = tra->ops.n;
	memset(s, 0, sizeof *s);
	s->tra = tra;
	s->o = o;
	s->cc = (CostCtx){m, o->nranks};
	s->n = n;
	s->uses = xcalloc(n + 1, sizeof(int));
	s->absorbed = xcalloc(n + 1, sizeof(int));
	s->times = xcalloc(n + 1, sizeof(double));
	s->loopof = xcalloc(n + 1, sizeof(int));
	s->depth = xcalloc(n + 1, sizeof(int));
	s->dom = xcalloc(n + 1, sizeof(Dom));
	s->impls = xcalloc(n + 1, sizeof(Impls));
	s->varplace = xcalloc(tra->tensors.n + 1, sizeof(Place));
	s->best = xcalloc((size_t)(n + 1) * MAXDOM, sizeof(Cost));
	s->avail = xcalloc((size_t)(n + 1) * MAXDOM, sizeof(Cost));
	s->home = xcalloc(n + 1, sizeof(Cost));
	s->choice = xcalloc(n + 1, sizeof(int));
	s->req = xcalloc(n + 1, sizeof(uint64_t));
	s->anyreq = xcalloc(n + 1, sizeof(bool));
	s->move = xcalloc(n + 1, sizeof(Cost *));
	s->cache = xcalloc(n + 1, sizeof(Impls));
	s->cache_budget = xcalloc(n + 1, sizeof(double));
	s->cached = xcalloc(n + 1, sizeof(bool));
	s->force = xcalloc(tra->stmts.n + 1, sizeof(Strategy));
	s->forceside = xcalloc(tra->stmts.n + 1, sizeof(int));
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
		int in[2];
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
		if (jo->kind == TRA_JOIN && s->uses[j] == 1 &&
		    (!jo->u.join.kernel->reduces || jo->u.join.kernel->red == op->u.agg.agg))
			s->absorbed[j] = t;
	}
	for (int t = 0; t < n; t++) {
		const TraOp *op = &tra->ops.v[t];
		dom_make(&s->dom[t], &op->type);
		/* a pinned placement is always a choice, even when unusual */
		int tensor = op->kind == TRA_INPUT ? op->u.input.tensor
		             : op->kind == TRA_INIT || op->kind == TRA_LOAD ? op->u.init.tensor
		             : op->kind == TRA_STORE ? op->u.store.tensor : -1;
		for (int k = 0; tensor >= 0 && k < o->nplacepins; k++)
			if (o->placepins[k].tensor == tensor) {
				int src = op->kind == TRA_STORE ? op->u.store.in : t;
				dom_add(&s->dom[src], place_norm(&tra->ops.v[src].type, o->placepins[k].place));
			}
	}
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

static void search_free(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		vec_free(&s->impls[t]);
		vec_free(&s->cache[t]);
		free(s->move[t]);
	}
	free(s->cache);
	free(s->cache_budget);
	free(s->cached);
	free(s->uses);
	free(s->absorbed);
	free(s->times);
	free(s->loopof);
	free(s->depth);
	free(s->dom);
	free(s->impls);
	free(s->varplace);
	free(s->best);
	free(s->avail);
	free(s->home);
	free(s->choice);
	free(s->req);
	free(s->anyreq);
	free(s->move);
	free(s->force);
	free(s->forceside);
}

/* A param's placement, normalised to what its values' domain holds. */
static void norm_varplace(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->kind == TRA_INIT || op->kind == TRA_LOAD)
			s->varplace[op->u.init.tensor] = place_norm(&op->type, s->varplace[op->u.init.tensor]);
	}
}

/* One whole plan for the current params' placements: the dynamic program,
 * extraction, the IA plan, its exact cost.  NULL when nothing fits. */
static IaPlan *plan_once(Search *s)
{
	norm_varplace(s);
	for (int t = 0; t < s->n; t++)
		vec_free(&s->impls[t]);
	make_impls(s);
	dp(s);
	if (!extract(s))
		return NULL;
	IaPlan *p = build(s);
	verify(p, "search", s->o);
	opt_cost(p, s->cc.m);
	classify(p);
	return p;
}

static Cost plan_cost(const IaPlan *p)
{
	return (Cost){p->predicted_seconds, p->total_floats_moved, p->total_bytes_sent, p->total_flops};
}

/* Whole plans within this fraction of each other's predicted time are a
 * tie, which the bytes they send break: the machine model is coarse, and
 * the network is what a cluster runs short of. */
#define TIE 0.10

/* Is plan a better than plan b (plans over the budget lim lose)? */
static bool better_plan(double lim, const IaPlan *a, const IaPlan *b)
{
	if (!a)
		return false;
	if (!b)
		return true;
	if (lim > 0) {
		bool fa = a->peak_bytes <= lim, fb = b->peak_bytes <= lim;
		if (fa != fb)
			return fa;
		if (!fa)
			return a->peak_bytes < b->peak_bytes;
	}
	double ta = a->predicted_seconds, tb = b->predicted_seconds;
	if (fabs(ta - tb) <= TIE * fmin(ta, tb)) {
		double ba = a->total_bytes_sent, bb = b->total_bytes_sent;
		if (fabs(ba - bb) > 1e-9 * fmax(ba, bb))
			return ba < bb;
	}
	return cost_cmp(plan_cost(a), plan_cost(b)) < 0;
}

static bool param_pinned(const Search *s, int tensor)
{
	for (int k = 0; k < s->o->nplacepins; k++)
		if (s->o->placepins[k].tensor == tensor)
			return true;
	return false;
}

/* The params' placements by coordinate descent over whole plans. */
static IaPlan *search_params(Search *s)
{
	IaPlan *bestp = plan_once(s);
	int nt = s->tra->tensors.n;
	/* a representative value of each param, for its domain */
	int *rep = xcalloc(nt + 1, sizeof(int));
	for (int i = 0; i < nt; i++)
		rep[i] = -1;
	for (int t = 0; t < s->n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if ((op->kind == TRA_INIT || op->kind == TRA_LOAD) && rep[op->u.init.tensor] < 0)
			rep[op->u.init.tensor] = t;
	}
	int rounds = s->n > 400 ? 1 : 3;
	for (int round = 0; round < rounds; round++) {
		bool improved = false;
		for (int i = 0; i < nt; i++) {
			if (rep[i] < 0 || param_pinned(s, i))
				continue;
			Place keep = s->varplace[i];
			Place bestpl = keep;
			const Dom *d = &s->dom[rep[i]];
			for (int q = 0; q < d->n; q++) {
				if (place_eq(&d->p[q], &keep) ||
				    (d->p[q].kind == PL_PART && !free_layout(type_of(s, rep[i]), &d->p[q])))
					continue;
				s->varplace[i] = d->p[q];
				IaPlan *c = plan_once(s);
				if (better_plan(s->o->mem_per_rank, c, bestp)) {
					ia_free(bestp);
					bestp = c;
					bestpl = d->p[q];
					improved = true;
				} else {
					ia_free(c);
				}
			}
			s->varplace[i] = bestpl;
		}
		if (!improved)
			break;
	}
	free(rep);
	return bestp;
}

/* With a memory budget: the budget on each implementation's working set
 * is tightened until the whole plan's peak fits. */
static IaPlan *search_budget(Search *s, double *leanest)
{
	IaPlan *bestp = NULL;
	double lim = s->o->mem_per_rank;
	double factor = 1;
	for (int tries = 0; tries < (lim > 0 ? 6 : 1); tries++) {
		s->budget = lim > 0 ? lim * factor : 0;
		IaPlan *p = search_params(s);
		if (p && p->peak_bytes < *leanest)
			*leanest = p->peak_bytes;
		if (better_plan(s->o->mem_per_rank, p, bestp)) {
			ia_free(bestp);
			bestp = p;
		} else {
			ia_free(p);
		}
		if (!bestp || lim <= 0 || bestp->peak_bytes <= lim)
			break;
		factor *= 0.6;
	}
	if (!bestp && lim > 0) {
		/* nothing fits: the cheapest plan, whose peak the driver reports */
		s->budget = 0;
		bestp = search_params(s);
	}
	return bestp;
}

/* ---- strategies tried whole, and alternatives for --explain=all ---- */

static const Strategy alt_strategies[] = {STRAT_BROADCAST, STRAT_COPARTITION, STRAT_REPLICATE, STRAT_LOCAL,
                                          STRAT_TWOPHASE};
#define NALT ((int)(sizeof alt_strategies / sizeof *alt_strategies))

/* Statements with a join, whose strategy is a choice. */
static bool *join_stmts(Search *s)
{
	bool *has = xcalloc(s->tra->stmts.n + 1, sizeof(bool));
	for (int t = 0; t < s->n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->stmt >= 0 && op->kind == TRA_JOIN)
			has[op->stmt] = true;
	}
	return has;
}

/* The dynamic program costs a statement's implementations one by one and
 * its estimates of moves are approximate; here each statement's strategies
 * are tried whole, each plan costed exactly, and the best kept. */
static IaPlan *improve_strategies(Search *s, IaPlan *best)
{
	int ns = s->tra->stmts.n;
	bool *has = join_stmts(s);
	for (int st = 0; st < ns; st++) {
		if (!has[st] || s->force[st] != STRAT_NONE)
			continue;
		Strategy keep = s->force[st];
		for (int a = 0; a < NALT; a++) {
			if (alt_strategies[a] == best->strategy.v[st])
				continue;
			s->force[st] = alt_strategies[a];
			IaPlan *p = plan_once(s);
			if (better_plan(s->o->mem_per_rank, p, best)) {
				ia_free(best);
				best = p;
				keep = alt_strategies[a];
			} else {
				ia_free(p);
			}
		}
		s->force[st] = keep;
	}
	free(has);
	return best;
}

static void alternatives(Search *s, IaPlan *chosen)
{
	int ns = s->tra->stmts.n;
	bool *has = join_stmts(s);
	for (int st = 0; st < ns; st++) {
		if (!has[st])
			continue;
		Strategy keep = s->force[st];
		int keepside = s->forceside[st];
		s->forceside[st] = -1;
		for (int a = 0; a < NALT; a++) {
			Strategy want = alt_strategies[a];
			if (want == chosen->strategy.v[st])
				continue;
			s->force[st] = want;
			IaPlan *p = plan_once(s);
			IaAlt alt = {.stmt = st, .strategy = want};
			if (!p) {
				alt.why = "does not apply to this statement";
			} else {
				alt.feasible = true;
				alt.seconds = p->predicted_seconds;
				alt.floats = p->total_floats_moved;
				alt.peak_bytes = p->peak_bytes;
				double lim = s->o->mem_per_rank;
				if (lim > 0 && p->peak_bytes > lim)
					alt.why = arena_strdup(chosen->arena, "needs more memory per rank than --mem-per-rank");
				else if (fabs(p->predicted_seconds - chosen->predicted_seconds) <=
				         TIE * fmin(p->predicted_seconds, chosen->predicted_seconds)) {
					double db = p->total_bytes_sent - chosen->total_bytes_sent;
					if (fabs(db) <= 1e-9 * fmax(p->total_bytes_sent, chosen->total_bytes_sent))
						alt.why = arena_strdup(chosen->arena, xprintf("a tie on time (%+.3g s predicted) "
						                       "and on bytes sent; slower", p->predicted_seconds -
						                       chosen->predicted_seconds));
					else
						alt.why = arena_strdup(chosen->arena, xprintf("a tie on time (%+.3g s predicted); "
						                       "%+.3g bytes sent, %+.3g floats moved",
						                       p->predicted_seconds - chosen->predicted_seconds, db,
						                       p->total_floats_moved - chosen->total_floats_moved));
				} else
					alt.why = arena_strdup(chosen->arena, xprintf("%+.3g s predicted, %+.3g floats moved",
					                       p->predicted_seconds - chosen->predicted_seconds,
					                       p->total_floats_moved - chosen->total_floats_moved));
				ia_free(p);
			}
			vec_push(&chosen->alts, alt);
		}
		s->force[st] = keep;
		s->forceside[st] = keepside;
	}
	free(has);
}

/* TRAC_DEBUG_SEARCH=1: the search's phases on stderr. */
static void trace(const char *what, const IaPlan *p)
{
	static int on = -1;
	if (on < 0)
		on = getenv("TRAC_DEBUG_SEARCH") && *getenv("TRAC_DEBUG_SEARCH") == '1';
	if (on)
		fprintf(stderr, "search: %-28s %s\n", what,
		        p ? xprintf("%.4g s, %.4g floats, %.4g bytes, peak %.4g", p->predicted_seconds,
		                    p->total_floats_moved, p->total_bytes_sent, p->peak_bytes) : "no plan");
}

/* ---- blocks chosen with the plan ---- */

/* Candidate blocks for one class: the automatic one, and ones that
 * partition well (as many blocks as ranks, half as many, its square root,
 * two, twice and four times the ranks). */
static int class_candidates(const BlockClasses *bc, int c, int s, int64_t *out)
{
	int n = 0;
	int64_t ext = bc->extent[c];
	int64_t cand[8] = {bc->block[c]};
	int nc = 1;
	int64_t fs[6] = {s, 2, (int64_t)ceil(sqrt((double)s)), 2 * (int64_t)s, s / 2, 4 * (int64_t)s};
	for (int i = 0; i < 6; i++)
		if (fs[i] >= 1 && fs[i] <= ext)
			cand[nc++] = ceil_div(ext, fs[i]);
	for (int i = 0; i < nc; i++) {
		bool dup = false;
		for (int j = 0; j < n; j++)
			dup |= out[j] == cand[i];
		if (!dup && cand[i] >= 1)
			out[n++] = cand[i];
	}
	return n;
}

/* The classes of the two free dims (one each side, both kept) of the
 * costliest contractions, neither pinned: at most max pairs. */
static int contraction_grids(const TraProg *tra, const BlockClasses *bc, int (*out)[2], int max)
{
	int n = 0;
	double flops[8] = {0};
	for (int t = 0; t < tra->ops.n; t++) {
		const TraOp *op = &tra->ops.v[t];
		if (op->kind != TRA_AGG)
			continue;
		const TraOp *j = &tra->ops.v[op->u.agg.in];
		if (j->kind != TRA_JOIN)
			continue;
		const RelType *lt = &tra->ops.v[j->u.join.left].type, *rt = &tra->ops.v[j->u.join.right].type;
		RelType jt = ia_join_type(lt, rt, j->u.join.nmatch, j->u.join.lkey, j->u.join.rkey);
		int lo = -1, ro = -1, nlo = 0, nro = 0;
		double vol = 1;
		for (int d = 0; d < jt.nkey; d++) {
			vol *= (double)jt.extent[d];
			bool matched = false, grouped = false;
			for (int m = 0; m < j->u.join.nmatch; m++)
				matched |= j->u.join.lkey[m] == d;
			for (int g = 0; g < op->u.agg.ngroup; g++)
				grouped |= op->u.agg.group[g] == d;
			if (matched || !grouped)
				continue;
			if (d < lt->nkey) {
				lo = d;
				nlo++;
			} else {
				ro = d;
				nro++;
			}
		}
		if (nlo != 1 || nro != 1)
			continue;
		int ci = bc->of[bc->base[op->u.agg.in] + lo], cj = bc->of[bc->base[op->u.agg.in] + ro];
		if (ci == cj || bc->pinned[ci] || bc->pinned[cj])
			continue;
		/* keep the costliest max, by the join's volume */
		int at = n < max ? n++ : -1;
		if (at < 0) {
			for (int k = 0; k < max; k++)
				if (flops[k] < vol && (at < 0 || flops[k] < flops[at]))
					at = k;
			if (at < 0)
				continue;
		}
		out[at][0] = ci;
		out[at][1] = cj;
		flops[at] = vol;
	}
	return n;
}

/* One search at the current blocks: params by descent (or as given). */
/* Params' placements for the block descent's quick plans: the best quick
 * plan's, or the first search's when nothing quick fits the budget. */
static const Place *descent_varplace(const IaPlan *quick, const IaPlan *best)
{
	return quick ? quick->varplace.v : best->varplace.v;
}

static IaPlan *plan_at(TraProg *tra, const OptOptions *o, const Machine *m, const BlockClasses *bc,
                       const Place *varplace, bool descend, double *leanest)
{
	opt_block_apply(tra, bc);
	Search s;
	search_init(&s, tra, o, m);
	IaPlan *p;
	if (varplace) {
		for (int i = 0; i < tra->tensors.n; i++)
			if (!param_pinned(&s, i))
				s.varplace[i] = varplace[i];
	}
	if (descend) {
		p = search_budget(&s, leanest);
	} else {
		s.quick = true;
		p = plan_once(&s);
		if (!p && s.budget > 0) {
			/* nothing fits: the plan regardless, to compare peaks */
			s.budget = 0;
			p = plan_once(&s);
		}
		if (p && p->peak_bytes < *leanest)
			*leanest = p->peak_bytes;
	}
	search_free(&s);
	return p;
}

IaPlan *opt_plan(TraProg *tra, const OptOptions *o)
{
	Machine dflt;
	const Machine *m = o->machine;
	if (!m) {
		machine_default(&dflt);
		m = &dflt;
	}
	opt_twophase_trim(64e6);        /* earlier plans' schedules, when many (fuzzing) */
	if (o->level < 2) {
		IaPlan *p = ia_from_tra(tra, o->nranks);
		verify(p, "Table 1", o);
		if (o->level > 0) {
			p = opt_rewrite_simple(p);
			verify(p, "rewriting", o);
		}
		opt_cost(p, m);
		classify(p);
		p->machine = arena_strdup(p->arena, m->source);
		return p;
	}

	/* blocks: the automatic ones, then coordinate descent over the
	 * classes no override pins, within a budget of whole-program plans
	 * (each at the params' placements found so far) */
	BlockClasses *bc = opt_block_classes(tra);
	Buf err = {0};
	opt_block_choose(bc, tra, o, &err);
	buf_free(&err);
	double leanest = INFINITY;
	IaPlan *best = plan_at(tra, o, m, bc, NULL, true, &leanest);
	if (!best)
		tr_bug("the search found no plan");
	int64_t *initial = xcalloc(bc->n + 1, sizeof(int64_t)), *chosen = xcalloc(bc->n + 1, sizeof(int64_t));
	memcpy(initial, bc->block, sizeof(int64_t) * (size_t)bc->n);
	memcpy(chosen, bc->block, sizeof(int64_t) * (size_t)bc->n);
	/* the descent compares quick plans (no two-phase schedules) */
	trace("automatic blocks", best);
	IaPlan *quick = plan_at(tra, o, m, bc, best->varplace.v, false, &leanest);
	trace("automatic blocks, quick", quick);
	int budget = tra->ops.n > 400 ? 0 : tra->ops.n > 100 ? 20 : 60;
	bool moved = false;
	/* grids: a contraction's two free dims blocked together, a x b blocks
	 * for the ranks (replication wants few blocks along both, which no
	 * one class's change finds) */
	int grids[2][2];
	int ngrid = contraction_grids(tra, bc, grids, 2);
	for (int g = 0; g < ngrid && budget > 0; g++) {
		int ci = grids[g][0], cj = grids[g][1];
		for (int a = 1; a <= o->nranks && budget > 0; a++) {
			int b = (o->nranks + a - 1) / a;
			if (a > 1 && (o->nranks + a - 2) / (a - 1) == b)
				continue;       /* the same b as a - 1 gave: a worse grid */
			if (a > bc->extent[ci] || b > bc->extent[cj])
				continue;
			memcpy(bc->block, chosen, sizeof(int64_t) * (size_t)bc->n);
			bc->block[ci] = ceil_div(bc->extent[ci], a);
			bc->block[cj] = ceil_div(bc->extent[cj], b);
			if (bc->block[ci] == chosen[ci] && bc->block[cj] == chosen[cj])
				continue;
			budget--;
			IaPlan *p = plan_at(tra, o, m, bc, descent_varplace(quick, best), false, &leanest);
			trace(xprintf("grid %d x %d, quick", a, b), p);
			if (better_plan(o->mem_per_rank, p, quick)) {
				ia_free(quick);
				quick = p;
				chosen[ci] = bc->block[ci];
				chosen[cj] = bc->block[cj];
				moved = true;
			} else {
				ia_free(p);
			}
		}
	}
	for (int round = 0; round < 2 && budget > 0; round++) {
		bool improved = false;
		for (int c = 0; c < bc->n && budget > 0; c++) {
			if (bc->pinned[c])
				continue;
			int64_t cand[8];
			int nc = class_candidates(bc, c, o->nranks, cand);
			for (int i = 0; i < nc && budget > 0; i++) {
				if (cand[i] == chosen[c])
					continue;
				memcpy(bc->block, chosen, sizeof(int64_t) * (size_t)bc->n);
				bc->block[c] = cand[i];
				budget--;
				IaPlan *p = plan_at(tra, o, m, bc, descent_varplace(quick, best), false, &leanest);
				if (better_plan(o->mem_per_rank, p, quick)) {
					ia_free(quick);
					quick = p;
					chosen[c] = cand[i];
					improved = moved = true;
				} else {
					ia_free(p);
				}
			}
		}
		if (!improved)
			break;
	}
	/* at the blocks the descent chose: the full search, against the
	 * first one's plan (at the automatic blocks) */
	if (moved) {
		memcpy(bc->block, chosen, sizeof(int64_t) * (size_t)bc->n);
		IaPlan *p = plan_at(tra, o, m, bc, descent_varplace(quick, best), true, &leanest);
		trace("chosen blocks", p);
		trace("chosen blocks, quick", quick);
		/* the quick plan stays a candidate: the full search's estimates
		 * of two-phase schedules' memory may put it over the budget */
		if (better_plan(o->mem_per_rank, quick, p)) {
			ia_free(p);
			p = quick;
			quick = NULL;
		}
		if (better_plan(o->mem_per_rank, p, best)) {
			ia_free(best);
			best = p;
		} else {
			ia_free(p);
			memcpy(bc->block, initial, sizeof(int64_t) * (size_t)bc->n);
		}
	} else {
		memcpy(bc->block, initial, sizeof(int64_t) * (size_t)bc->n);
	}
	ia_free(quick);
	opt_block_apply(tra, bc);
	free(chosen);
	free(initial);

	/* at the chosen blocks: each statement's strategies tried whole
	 * (small programs), then the alternatives */
	Search s;
	search_init(&s, tra, o, m);
	for (int i = 0; i < tra->tensors.n; i++)
		if (!param_pinned(&s, i))
			s.varplace[i] = best->varplace.v[i];
	if (tra->stmts.n <= 40)
		best = improve_strategies(&s, best);
	if (o->alternatives && tra->stmts.n <= 60)
		alternatives(&s, best);
	search_free(&s);
	opt_block_classes_free(bc);
	best->machine = arena_strdup(best->arena, m->source);
	best->leanest_peak = leanest;
	trace("final", best);
	if (o->mem_per_rank > 0 && best->peak_bytes > o->mem_per_rank) {
		/* nothing fits: the cheapest plan regardless of memory, for the
		 * driver to say what it needs, beside the leanest one found */
		OptOptions unbounded = *o;
		unbounded.mem_per_rank = 0;
		unbounded.alternatives = false;
		IaPlan *cheapest = opt_plan(tra, &unbounded);
		cheapest->leanest_peak = fmin(leanest, best->peak_bytes);
		ia_free(best);
		return cheapest;
	}
	return best;
}

/* "all", "part()", "part(0)", "part(1,0)" */
bool opt_parse_place(const char *s, Place *p)
{
	if (!strcmp(s, "all")) {
		*p = place_all();
		return true;
	}
	if (strncmp(s, "part(", 5))
		return false;
	*p = (Place){.kind = PL_PART};
	s += 5;
	while (*s && *s != ')') {
		char *end;
		long d = strtol(s, &end, 10);
		if (end == s || d < 0 || d >= MAXDIM || p->ndims == MAXDIM)
			return false;
		for (int i = 0; i < p->ndims; i++)
			if (p->dims[i] == d)
				return false;
		p->dims[p->ndims++] = (int)d;
		s = end;
		if (*s == ',')
			s++;
		else if (*s != ')')
			return false;
	}
	return s[0] == ')' && s[1] == 0;
}
