/*
 * tune.c: around one search (search.c), what opt_plan tunes by whole
 * plans, each costed exactly: params' placements by coordinate descent,
 * the per-rank memory budget, each statement's strategies tried whole,
 * the alternatives --explain=all shows, and block sizes not pinned.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/search.h"


/* A whole plan's cost; its work is the busiest rank's flops, each op's
 * flops times its placement's share (cost_share reads only the rank
 * count of its context). */
static Cost plan_cost(const IaPlan *p)
{
	CostCtx cc = {NULL, p->nranks, p->objective, p->mem_budget};
	double work = 0;
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].flops > 0)
			work += p->ops.v[i].flops * cost_share(&cc, &p->ops.v[i].type, &p->ops.v[i].place);
	return (Cost){p->predicted_seconds, p->total_floats_moved, p->total_bytes_sent, p->total_flops, work};
}

/* Whole plans within this fraction of each other's predicted time are a
 * tie, which the bytes they send break: the machine model is coarse, and
 * the network is what a cluster runs short of. */
#define TIE (PLAN_TIE_PCT / 100.0)

/* Plan a against plan b under o, -1 (better), 0 or 1, and what decided
 * (*why).  Plans over the budget o->mem_per_rank lose first (out of core,
 * o->spill_budget, those whose resident peak is over it: an op holding
 * more than the budget at once, chunks too big; their spilling is in
 * their seconds); then what
 * the objective ranks before seconds (floats moved under --objective
 * floats); then seconds, where a TIE is broken by bytes sent; then
 * cost_cmp's order (seconds, floats moved). */
static int plan_cmp(const OptOptions *o, const IaPlan *a, const IaPlan *b, AltWhy *why)
{
	double lim = o->mem_per_rank > 0 ? o->mem_per_rank : o->spill_budget;
	double pa = o->mem_per_rank > 0 ? a->peak_bytes : a->resident_peak;
	double pb = o->mem_per_rank > 0 ? b->peak_bytes : b->resident_peak;
	*why = ALT_MEMORY;
	if (lim > 0) {
		bool fa = pa <= lim, fb = pb <= lim;
		if (fa != fb)
			return fa ? -1 : 1;
		if (!fa)
			return pa < pb ? -1 : 1;
	}
	Cost ca = plan_cost(a), cb = plan_cost(b);
	*why = ALT_LEAD;
	int lead = cost_cmp_lead(o->objective, ca, cb);
	if (lead)
		return lead;
	double ta = a->predicted_seconds, tb = b->predicted_seconds;
	*why = ALT_TIME;
	if (fabs(ta - tb) <= TIE * fmin(ta, tb)) {
		double ba = a->total_bytes_sent, bb = b->total_bytes_sent;
		*why = ALT_BYTES;
		if (fabs(ba - bb) > 1e-9 * fmax(ba, bb))
			return ba < bb ? -1 : 1;
		*why = cost_cmp_measure(ta, tb, 1e-6) ? ALT_TIME_CLOSE
		       : cost_cmp_measure(ca.floats, cb.floats, 1e-9) ? ALT_FLOATS : ALT_EQUAL;
	}
	return cost_cmp(o->objective, ca, cb);
}

/* Is plan a better than plan b under o (NULL plans lose)? */
static bool better_plan(const OptOptions *o, const IaPlan *a, const IaPlan *b)
{
	AltWhy why;
	if (!a)
		return false;
	if (!b)
		return true;
	return plan_cmp(o, a, b, &why) < 0;
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
				if (better_plan(s->o, c, bestp)) {
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
		if (better_plan(s->o, p, bestp)) {
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
                                          STRAT_TWOPHASE, STRAT_LOOKUP};
#define NALT ((int)(sizeof alt_strategies / sizeof *alt_strategies))

/* Statements with a join, whose strategy is a choice. */
static bool *join_stmts(Search *s)
{
	bool *has = xcalloc(s->tra->stmts.n + 1, sizeof(bool));
	for (int t = 0; t < s->n; t++) {
		const TraOp *op = &s->tra->ops.v[t];
		if (op->stmt >= 0 && (op->kind == TRA_JOIN || op->kind == TRA_GATHER))
			has[op->stmt] = true;
	}
	return has;
}

/* Does statement st gather (so that lookup is a strategy for it)? */
static bool stmt_gathers(const Search *s, int st)
{
	for (int t = 0; t < s->n; t++)
		if (s->tra->ops.v[t].stmt == st && s->tra->ops.v[t].kind == TRA_GATHER)
			return true;
	return false;
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
			if (alt_strategies[a] == best->strategy.v[st] ||
			    (alt_strategies[a] == STRAT_LOOKUP && !stmt_gathers(s, st)))
				continue;
			s->force[st] = alt_strategies[a];
			IaPlan *p = plan_once(s);
			if (better_plan(s->o, p, best)) {
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
			if (want == chosen->strategy.v[st] || (want == STRAT_LOOKUP && !stmt_gathers(s, st)))
				continue;
			s->force[st] = want;
			IaPlan *p = plan_once(s);
			IaAlt alt = {.stmt = st, .strategy = want, .why = ALT_NO_PLAN};
			if (p) {
				alt.rules = p->rules.v[st] ? arena_strdup(chosen->arena, p->rules.v[st]) : NULL;
				alt.seconds = p->predicted_seconds;
				alt.floats = p->total_floats_moved;
				alt.bytes = p->total_bytes_sent;
				alt.peak_bytes = p->peak_bytes;
				plan_cmp(s->o, p, chosen, &alt.why);
				double wp = plan_cost(p).work, wc = plan_cost(chosen).work;
				if (alt.why == ALT_LEAD && cost_cmp_measure(wp, wc, WORK_TIE))
					alt.work_ratio = wp / fmax(wc, 1);
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
		        p ? xprintf("%.4g s, %.4g floats, %.4g bytes, peak %.4g, work %.4g", p->predicted_seconds,
		                    p->total_floats_moved, p->total_bytes_sent, p->peak_bytes, plan_cost(p).work) : "no plan");
}

/* ---- blocks chosen with the plan ---- */

/* The blocks a plan chose, per block class (opt_block_classes). */
typedef struct BlockChoice {
	int n;
	int64_t *block;
} BlockChoice;

/* Candidate blocks for one class: the automatic one, and ones that
 * partition well (as many blocks as ranks, half as many, its square root,
 * two, twice and four times the ranks; a sparse dim's cap, opt_block_cap). */
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
	if (bc->sparse[c] && s > 1)     /* the coarsest a sparse dim may be */
		cand[nc++] = opt_block_cap(bc, c, s);
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
		RelType jt = ia_join_type(lt, rt, &j->u.join.on);
		int lo = -1, ro = -1, nlo = 0, nro = 0;
		double vol = 1;
		for (int d = 0; d < jt.nkey; d++) {
			vol *= (double)jt.extent[d];
			bool matched = false, grouped = false;
			for (int m = 0; m < j->u.join.on.nmatch; m++)
				matched |= j->u.join.on.lkey[m] == d;
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

/* Params' placements for the block descent's quick plans: the best quick
 * plan's, or the first search's when nothing quick fits the budget. */
static const Place *descent_varplace(const IaPlan *quick, const IaPlan *best)
{
	return quick ? quick->varplace.v : best->varplace.v;
}

/* One search at bc's blocks: params by descent and two-phase schedules
 * (`full`), or quick (params as given, no schedules); the least peak of
 * a plan seen goes to *leanest. */
static IaPlan *plan_at(const TraProg *tra, const OptOptions *o, const Machine *m, const BlockClasses *bc,
                       const Place *varplace, bool full, double *leanest)
{
	Search s;
	search_init(&s, tra, o, m, bc);
	IaPlan *p;
	if (varplace) {
		for (int i = 0; i < tra->tensors.n; i++)
			if (!param_pinned(&s, i))
				s.varplace[i] = varplace[i];
	}
	if (full) {
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

/* The blocks a plan for o->nranks starts from: the automatic ones for
 * the count, then the overrides.  The one place blocks are decided: the
 * program keeps lowering's (one chunk a tensor). */
static BlockClasses *auto_blocks(const TraProg *tra, const OptOptions *o)
{
	BlockClasses *bc = opt_block_classes(tra);
	Buf err = {0};
	opt_block_choose(bc, tra, o, &err);     /* contradicting overrides: cmdline reported them */
	buf_free(&err);
	return bc;
}

/* The block descent: from the automatic blocks, coordinate descent over
 * the classes no override pins, within a budget of quick plans (each at
 * the params' placements the full search at the automatic blocks found). */
typedef struct Descent {
	const TraProg *tra;
	const OptOptions *o;
	const Machine *m;
	BlockClasses *bc;       /* bc->block: the blocks being tried */
	int64_t *chosen;        /* per class: the blocks of `quick` */
	IaPlan *best;           /* the full search's at the automatic blocks */
	IaPlan *quick;          /* the best quick plan so far, at `chosen` */
	int budget;             /* quick plans left */
	bool moved;             /* chosen is not the automatic blocks */
	double leanest;
	Search *last;           /* the last quick search, for the next to take over from */
} Descent;

/* A quick plan at bc's blocks (plan_at's), the search taking over what
 * the last quick one computed for ops whose types did not change (a
 * trial changes the blocks of a class or two). */
static IaPlan *quick_at(Descent *d, const Place *varplace, double *leanest)
{
	Search *s = xcalloc(1, sizeof *s);
	search_init(s, d->tra, d->o, d->m, d->bc);
	s->quick = true;
	if (d->last) {
		search_inherit(s, d->last);
		search_free(d->last);
		free(d->last);
	}
	d->last = s;
	for (int i = 0; i < d->tra->tensors.n; i++)
		if (!param_pinned(s, i))
			s->varplace[i] = varplace[i];
	IaPlan *p = plan_once(s);
	if (!p && s->budget > 0) {
		/* nothing fits: the plan regardless, to compare peaks */
		s->budget = 0;
		p = plan_once(s);
	}
	if (p && p->peak_bytes < *leanest)
		*leanest = p->peak_bytes;
	return p;
}

static void set_blocks(Descent *d, const int64_t *block)
{
	memcpy(d->bc->block, block, sizeof(int64_t) * (size_t)d->bc->n);
}

/* A quick plan at bc's blocks, kept (and its blocks chosen) when better. */
static bool try_blocks(Descent *d, const char *what)
{
	d->budget--;
	IaPlan *p = quick_at(d, descent_varplace(d->quick, d->best), &d->leanest);
	if (what)
		trace(what, p);
	if (!opt_plan_placeable(p) || !better_plan(d->o, p, d->quick)) {
		ia_free(p);
		return false;
	}
	ia_free(d->quick);
	d->quick = p;
	memcpy(d->chosen, d->bc->block, sizeof(int64_t) * (size_t)d->bc->n);
	d->moved = true;
	return true;
}

/* Grids: a contraction's two free dims blocked together, a x b blocks for
 * the ranks (replication wants few blocks along both, which no one
 * class's change finds). */
static void descend_grids(Descent *d)
{
	BlockClasses *bc = d->bc;
	int n = d->o->nranks, grids[2][2];
	int ngrid = contraction_grids(d->tra, bc, grids, 2);
	for (int g = 0; g < ngrid && d->budget > 0; g++) {
		int ci = grids[g][0], cj = grids[g][1];
		for (int a = 1; a <= n && d->budget > 0; a++) {
			int b = (n + a - 1) / a;
			if (a > 1 && (n + a - 2) / (a - 1) == b)
				continue;       /* the same b as a - 1 gave: a worse grid */
			if (a > bc->extent[ci] || b > bc->extent[cj])
				continue;
			set_blocks(d, d->chosen);
			bc->block[ci] = ceil_div(bc->extent[ci], a);
			bc->block[cj] = ceil_div(bc->extent[cj], b);
			if (bc->block[ci] == d->chosen[ci] && bc->block[cj] == d->chosen[cj])
				continue;
			try_blocks(d, xprintf("grid %d x %d, quick", a, b));
		}
	}
}

/* Then class by class, each class's candidates (class_candidates), two
 * rounds at most. */
static void descend_classes(Descent *d)
{
	BlockClasses *bc = d->bc;
	int n = d->o->nranks;
	for (int round = 0; round < 2 && d->budget > 0; round++) {
		bool improved = false;
		for (int c = 0; c < bc->n && d->budget > 0; c++) {
			if (bc->pinned[c])
				continue;
			int64_t cand[8];
			int nc = class_candidates(bc, c, n, cand);
			for (int i = 0; i < nc && d->budget > 0; i++) {
				if (cand[i] == d->chosen[c])
					continue;
				set_blocks(d, d->chosen);
				bc->block[c] = cand[i];
				improved |= try_blocks(d, NULL);
			}
		}
		if (!improved)
			break;
	}
}

/*
 * A second descent, from the sparse inputs in one block each, read by one
 * rank and broadcast: no sparse dim then needs the blocks the run would
 * place (opt_block_cap), and a product may split its dense operand
 * instead.  bench/sparse_batches.py's design matrix, read in mini-batches
 * of 1024 rows, is planned in blocks of 1024 x 1000 from the automatic
 * blocks: 400 tiny products a batch and their sums shuffled (1.57-1.68 s
 * on 2 ranks, 1.16 on 1); whole, with W's columns halved, 0.98-1.16.
 * No one class's change from the first descent reaches that: every step
 * between partitions the input past its cap.  The second descent has a
 * budget of its own, half the first one's, and its plan is kept only when
 * better.
 */
static void descend_whole_sparse(Descent *d, int allotted)
{
	BlockClasses *bc = d->bc;
	if (d->o->nranks <= 1 || !d->quick || allotted < 2)
		return;
	set_blocks(d, d->chosen);
	bool any = false;
	for (int i = 0; i < d->tra->ops.n; i++) {
		const TraOp *op = &d->tra->ops.v[i];
		if (op->kind != TRA_INPUT || !op->type.sparse)
			continue;
		for (int k = 0; k < op->type.nkey; k++) {
			int c = bc->of[bc->base[i] + k];
			if (!bc->pinned[c] && bc->block[c] != bc->extent[c]) {
				bc->block[c] = bc->extent[c];
				any = true;
			}
		}
	}
	if (!any)
		return;
	int budget = d->budget;
	d->budget = allotted / 2;
	IaPlan *p = quick_at(d, descent_varplace(d->quick, d->best), &d->leanest);
	trace("the sparse inputs whole, quick", p);
	if (!p || !opt_plan_placeable(p)) {
		ia_free(p);
		d->budget = budget;
		return;
	}
	IaPlan *first = d->quick;
	int64_t *chosen = xcalloc((size_t)bc->n + 1, sizeof *chosen);
	memcpy(chosen, d->chosen, sizeof(int64_t) * (size_t)bc->n);
	bool moved = d->moved;
	d->quick = p;
	memcpy(d->chosen, bc->block, sizeof(int64_t) * (size_t)bc->n);
	descend_classes(d);
	if (better_plan(d->o, d->quick, first)) {
		ia_free(first);
		d->moved = true;
	} else {
		ia_free(d->quick);
		d->quick = first;
		memcpy(d->chosen, chosen, sizeof(int64_t) * (size_t)bc->n);
		d->moved = moved;
	}
	free(chosen);
	d->budget = budget;
}

/* A plan for fewer ranks is a plan here (sites are modulo the ranks),
 * which the descent from this count's automatic blocks may miss: the
 * blocks the plan for opt_prior_count ranks chose (`prior`, classes no
 * override pins; a sparse dim's no coarser than its cap for this count,
 * opt_block_cap, or the run could not balance it) are searched in full too, unless a quick plan at them is
 * more than PRIOR_TIE slower than the descent's (the quick plan's params
 * and its want of two-phase schedules underrate them by up to that, and a
 * full search costs as much as the descent). */
#define PRIOR_TIE 1.25

static void prior_blocks(Descent *d, const BlockChoice *prior)
{
	for (int c = 0; c < d->bc->n; c++) {
		int64_t cap = opt_block_cap(d->bc, c, d->o->nranks);
		if (!d->bc->pinned[c])  /* a sparse dim keeps its blocks a rank here too */
			d->bc->block[c] = prior->block[c] < cap ? prior->block[c] : cap;
	}
}

/* Is `prior` worth a full search, by a quick plan at it? */
static bool prior_worth(Descent *d, const BlockChoice *prior)
{
	if (!prior || prior->n != d->bc->n)
		return false;
	set_blocks(d, d->chosen);
	prior_blocks(d, prior);
	if (!memcmp(d->bc->block, d->chosen, sizeof(int64_t) * (size_t)d->bc->n))
		return true;            /* the descent's own: nothing to try, unless they are not chosen */
	double ignore = INFINITY;
	IaPlan *q = quick_at(d, descent_varplace(d->quick, d->best), &ignore);
	trace("the fewer ranks' blocks, quick", q);
	bool worth = better_plan(d->o, q, d->quick) ||
	             (q && d->quick && q->predicted_seconds <= PRIOR_TIE * d->quick->predicted_seconds);
	if (q)
		ia_free(q);
	return worth;
}

/* The full plan at `prior`'s blocks when it beats `best` (whose blocks
 * bc holds): it, with its blocks in bc; else NULL, bc untouched. */
static IaPlan *prior_plan(Descent *d, const BlockChoice *prior, const IaPlan *best)
{
	BlockClasses *bc = d->bc;
	int64_t *keep = xcalloc((size_t)bc->n + 1, sizeof *keep);
	memcpy(keep, bc->block, sizeof(int64_t) * (size_t)bc->n);
	prior_blocks(d, prior);
	IaPlan *p = NULL;
	if (memcmp(bc->block, keep, sizeof(int64_t) * (size_t)bc->n)) {
		p = plan_at(d->tra, d->o, d->m, bc, best->varplace.v, true, &d->leanest);
		trace("the fewer ranks' blocks", p);
	}
	if (p && !better_plan(d->o, p, best)) {
		ia_free(p);
		p = NULL;
	}
	if (!p)
		set_blocks(d, keep);
	free(keep);
	return p;
}

/* The blocks chosen jointly with the plan: the descent's, searched in
 * full against the full plan at the automatic blocks, then the prior
 * count's.  Returns the best plan, its blocks in d->bc. */
static IaPlan *choose_blocks(Descent *d, const BlockChoice *prior)
{
	BlockClasses *bc = d->bc;
	int64_t *initial = xcalloc((size_t)bc->n + 1, sizeof *initial);
	memcpy(initial, bc->block, sizeof(int64_t) * (size_t)bc->n);
	d->chosen = xcalloc((size_t)bc->n + 1, sizeof *d->chosen);
	memcpy(d->chosen, bc->block, sizeof(int64_t) * (size_t)bc->n);
	trace("automatic blocks", d->best);
	d->quick = quick_at(d, d->best->varplace.v, &d->leanest);
	trace("automatic blocks, quick", d->quick);
	d->budget = d->tra->ops.n > 400 ? 0 : d->tra->ops.n > 100 ? 20 : 60;
	int allotted = d->budget;
	descend_grids(d);
	descend_classes(d);
	descend_whole_sparse(d, allotted);
	bool worth = prior_worth(d, prior);
	/* at the blocks the descent chose: the full search, against the
	 * first one's plan (at the automatic blocks) */
	IaPlan *best = d->best;
	set_blocks(d, initial);
	if (d->moved) {
		set_blocks(d, d->chosen);
		IaPlan *p = plan_at(d->tra, d->o, d->m, bc, descent_varplace(d->quick, best), true, &d->leanest);
		trace("chosen blocks", p);
		trace("chosen blocks, quick", d->quick);
		/* the quick plan stays a candidate: the full search's estimates
		 * of two-phase schedules' memory may put it over the budget, and
		 * its strategies may partition a sparse relation along a dim the
		 * blocks leave too few blocks to place (the quick plan does not:
		 * try_blocks) */
		if (!opt_plan_placeable(p) || better_plan(d->o, d->quick, p)) {
			ia_free(p);
			p = d->quick;
			d->quick = NULL;
		}
		if (better_plan(d->o, p, best)) {
			ia_free(best);
			best = p;
		} else {
			ia_free(p);
			set_blocks(d, initial);
		}
	}
	ia_free(d->quick);
	if (d->last) {
		search_free(d->last);
		free(d->last);
		d->last = NULL;
	}
	IaPlan *fewer = worth ? prior_plan(d, prior, best) : NULL;
	if (fewer) {
		ia_free(best);
		best = fewer;
	}
	free(d->chosen);
	free(initial);
	return best;
}

/* -O2 within the budget o->mem_per_rank: blocks, params' placements and
 * implementations (choose_blocks), then, when `finish`, the strategies
 * tried whole and the alternatives.  The blocks of the plan go to *out. */
static IaPlan *search_plan(const TraProg *tra, const OptOptions *o, const Machine *m, const BlockChoice *prior,
                           BlockChoice *out, bool finish)
{
	Descent d = {tra, o, m, auto_blocks(tra, o), .leanest = INFINITY};
	BlockClasses *bc = d.bc;
	d.best = plan_at(tra, o, m, bc, NULL, true, &d.leanest);
	if (!d.best && o->nstratpins > 0) {
		/* a pinned strategy no implementation of its statement has (on
		 * one rank, none is two-phase: a count of the chain has no plan) */
		if (finish)
			diag(DIAG_ERROR, NOLOC, "no plan has the strategies --strategy asks for (a two-phase schedule "
			     "needs operands that hold every block: no diagonal, filter or sparse tensor upstream)");
		opt_block_classes_free(bc);
		return NULL;
	}
	if (!d.best)
		tr_bug("the search found no plan");
	IaPlan *best = choose_blocks(&d, prior);

	/* at the chosen blocks: each statement's strategies tried whole
	 * (small programs), then the alternatives */
	if (finish) {
		Search s;
		search_init(&s, tra, o, m, bc);
		for (int i = 0; i < tra->tensors.n; i++)
			if (!param_pinned(&s, i))
				s.varplace[i] = best->varplace.v[i];
		if (tra->stmts.n <= 40)
			best = improve_strategies(&s, best);
		if (o->alternatives && tra->stmts.n <= 60)
			alternatives(&s, best);
		search_free(&s);
	}
	out->n = bc->n;
	out->block = xrealloc(out->block, sizeof(int64_t) * ((size_t)bc->n + 1));
	memcpy(out->block, bc->block, sizeof(int64_t) * (size_t)bc->n);
	opt_block_classes_free(bc);
	best->machine = arena_strdup(best->arena, m->source);
	best->leanest_peak = d.leanest;
	trace("final", best);
	return best;
}

/* ---- one plan per rank count: opt_plan ---- */

/* The counts whose plans chain: 1 to 8, then the powers of two (the
 * default -P list). */
static int ladder_below(int n)
{
	if (n <= 1)
		return 0;
	if (n <= 9)
		return n - 1;
	int p = 8;
	while (2 * (int64_t)p < n)
		p *= 2;
	return p;
}

int opt_prior_count(const TraProg *tra, int nranks)
{
	for (int m = ladder_below(nranks); m > 0; m = ladder_below(m)) {
		bool divides = true;    /* an IST split a count cannot share has no plan there */
		for (int i = 0; i < tra->ist.n; i++)
			for (int z = 0; z < tra->ist.v[i].nsplit; z++)
				divides &= tra->ist.v[i].extent[z] % m == 0;
		if (divides)
			return m;
	}
	return 0;
}

/* Blocks chosen by earlier plans of one program under one set of
 * options, by rank count. */
struct BlockMemo {
	const TraProg *tra;
	Vec(int) nranks;
	Vec(BlockChoice) blocks;
};

BlockMemo *opt_block_memo_new(void)
{
	return xcalloc(1, sizeof(BlockMemo));
}

void opt_block_memo_free(BlockMemo *bm)
{
	if (!bm)
		return;
	for (int i = 0; i < bm->blocks.n; i++)
		free(bm->blocks.v[i].block);
	vec_free(&bm->blocks);
	vec_free(&bm->nranks);
	free(bm);
}

static const BlockChoice *memo_get(const BlockMemo *bm, const TraProg *tra, int nranks)
{
	for (int i = 0; bm->tra == tra && i < bm->nranks.n; i++)
		if (bm->nranks.v[i] == nranks)
			return &bm->blocks.v[i];
	return NULL;
}

static void memo_put(BlockMemo *bm, const TraProg *tra, int nranks, BlockChoice b)
{
	if (bm->tra != tra) {   /* another program: forget the last one's */
		for (int i = 0; i < bm->blocks.n; i++)
			free(bm->blocks.v[i].block);
		bm->blocks.n = bm->nranks.n = 0;
		bm->tra = tra;
	}
	vec_push(&bm->nranks, nranks);
	vec_push(&bm->blocks, b);
}

/* What a plan says of its search: the objective, the busiest rank's flops. */
static IaPlan *finish(IaPlan *p, const OptOptions *o)
{
	p->objective = o->objective;
	p->busiest_flops = plan_cost(p).work;
	return p;
}

static IaPlan *plan_searched(const TraProg *tra, const OptOptions *o, const Machine *m, bool whole);

/* The blocks of the plan for nranks (o's count): from the memo, else
 * planned now (without the strategies and alternatives, which choose no
 * blocks) and kept there. */
static const BlockChoice *chain_blocks(const TraProg *tra, const OptOptions *o, const Machine *m, int nranks)
{
	const BlockChoice *b = memo_get(o->memo, tra, nranks);
	if (!b) {
		OptOptions at = *o;
		at.nranks = nranks;
		at.alternatives = false;
		IaPlan *p = plan_searched(tra, &at, m, false);
		if (p)
			ia_free(p);
		b = memo_get(o->memo, tra, nranks);
	}
	return b;
}

/* -O2: the plan at o's count, its blocks remembered in o->memo.  `whole`:
 * the strategies tried whole and the alternatives too. */
static IaPlan *plan_searched(const TraProg *tra, const OptOptions *o, const Machine *m, bool whole)
{
	int fewer = opt_prior_count(tra, o->nranks);
	const BlockChoice *prior = fewer ? chain_blocks(tra, o, m, fewer) : NULL;
	if (prior && !prior->block)
		prior = NULL;           /* that count has no plan */
	opt_twophase_trim(64e6);        /* earlier plans' schedules, when many (fuzzing); a fresh work budget */
	BlockChoice chosen = {0};
	IaPlan *best = search_plan(tra, o, m, prior, &chosen, whole);
	if (!best) {
		/* an error said why; or, planned for a count above's chain, no
		 * blocks to try there */
		memo_put(o->memo, tra, o->nranks, chosen);
		return NULL;
	}
	finish(best, o);
	double lim = o->mem_per_rank > 0 ? o->mem_per_rank : m->mem_per_rank;
	if (lim > 0 && best->peak_bytes > lim && o->spill_budget == 0) {
		/* nothing fits in memory (--mem-per-rank, else the machine's
		 * memory per rank): the plan runs out of core in lim bytes a
		 * rank, the cheapest with its spilling priced (spill.c) */
		OptOptions ooc = *o;
		ooc.mem_per_rank = 0;
		ooc.spill_budget = lim;
		IaPlan *spilling = search_plan(tra, &ooc, m, prior, &chosen, whole);
		spilling->leanest_peak = fmin(best->leanest_peak, best->peak_bytes);
		ia_free(best);
		best = finish(spilling, o);
	}
	memo_put(o->memo, tra, o->nranks, chosen);
	return best;
}

IaPlan *opt_plan(const TraProg *tra, const OptOptions *o)
{
	Machine dflt;
	const Machine *m = o->machine;
	if (!m) {
		machine_default(&dflt);
		m = &dflt;
	}
	if (o->level < 2) {
		opt_twophase_trim(64e6);
		BlockClasses *bc = auto_blocks(tra, o);
		RelType *types = xcalloc((size_t)tra->ops.n + 1, sizeof *types);
		opt_block_types(tra, bc, types);
		IaPlan *p = opt_table1_at(tra, o->nranks, types);
		free(types);
		opt_block_classes_free(bc);
		verify_plan(p, "Table 1", o);
		if (o->level > 0) {
			p = opt_rewrite_simple(p);
			verify_plan(p, "rewriting", o);
		}
		p->mem_budget = o->spill_budget;
		opt_cost(p, m);
		classify(p);
		p->machine = arena_strdup(p->arena, m->source);
		return finish(p, o);
	}
	if (o->memo)
		return plan_searched(tra, o, m, true);
	OptOptions own = *o;            /* the chain of counts below, planned here */
	own.memo = opt_block_memo_new();
	IaPlan *p = plan_searched(tra, &own, m, true);
	opt_block_memo_free(own.memo);
	return p;
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

