/*
 * twophase.c: two-phase execution of a contraction, planned at compile time.
 *
 * After D. Jankov, B. Yuan, S. Luo, C. Jermaine, "Distributed numerical and
 * machine learning computations via two-phase execution of aggregated join
 * trees", PVLDB 14(7), 2021 (../shared/papers/digest-two-phase.md).  A
 * contraction is an aggregated join tree: a join whose kernel makes one
 * partial result per *join group* (one tuple of each input), summed per
 * *aggregation group* (one output tuple).  The paper runs the tree twice:
 * a pilot on keys alone collects the lineage (which chunks meet in which
 * join group, which join groups make which aggregation group, where each
 * chunk is), a greedy planner assigns every join group and aggregation group
 * to a site, and the real run follows the assignment.
 *
 * The pilot.  trac's relations are dense (every key below the frontier has
 * its chunk) and placed by a function of the key, so the lineage follows
 * from the blocking: join groups are the tuples of the join's key space,
 * numbered row-major; join group u reads chunk u|left of the left input and
 * u|right of the right, and belongs to aggregation group u|group; a chunk
 * lives on trt_site of its key (or everywhere).  tp_lineage builds it with no
 * pilot run.  A relation with holes (a filter upstream: diagonals) is not
 * offered a two-phase schedule (opt_twophase_dense); its lineage would be as
 * static, but nothing here enumerates it.  Were lineage ever data-dependent
 * (block-sparse chunks, placements known only at run time), the same
 * TpProblem could be filled at start-up from the ranks' keys and planned by
 * the same code linked into the runtime; that case cannot arise today.
 *
 * The cost (the paper's Eq. 6).  Four stages run one after the other, each
 * as long as its most loaded site: input transfers (t_F per chunk a site
 * lacks), kernels (t_pi per join group), transfers of join results to their
 * aggregation site (t_g), and combining them there (t_Sigma).  With
 * `paper` set the model is exactly the paper's; otherwise (what trac plans
 * with) it is extended where trac's runtime differs:
 *   - local pre-aggregation: the join groups of one aggregation group on one
 *     site are summed there (the kernel accumulates), so t_g and t_Sigma are
 *     charged once per (site, aggregation group), not per join group;
 *   - sender-side cost: a stage's time on a site is the larger of what it
 *     receives and what it sends (a chunk sent to many sites costs its
 *     holder that many times);
 *   - memory: chunks received, accumulators and partial sums waiting to be
 *     combined count against a per-site limit; over it, a site is not a
 *     candidate;
 *   - t_pi per join group by its chunks' lengths (edge chunks are short),
 *     t_F per chunk likewise, and a message's latency on every transfer.
 *
 * The greedy (the paper's section 6, Fig. 5).  Aggregation groups are taken
 * in a fixed order (most join groups first, then by number).  Rule 1 puts
 * all of a group's join groups on one site with the group; Rule 2 puts its
 * join groups one by one on the site that costs least, then the group.
 * The paper compares partial plans of unequal extent; here each group is
 * completed both ways from the same state and the cheaper completion kept
 * (the digest's "completed-group" comparison, ties to Rule 1).  The plans
 * made by Rule 1 alone and by Rule 2 alone are costed too, and the cheapest
 * of the three is the schedule.  Costs are updated incrementally: placing a
 * join group touches its sites' counters only; a candidate is costed as the
 * maximum over sites of each stage, O(sites).  Everything is in index order
 * and ties go to the lower site: plans are reproducible.
 *
 * For the search (impls.c), opt_twophase_candidate plans a contraction for
 * given input and output placements, with the aggregation groups fixed on
 * the sites the output's partitioning gives them (so the result is an
 * ordinary PL_PART relation the next op can use), and keeps the schedule in
 * a memo that lives to the end of the process: plans refer to schedules by
 * pointer, and the search asks for the same ones many times.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

#define TP_MAXJOIN (1 << 17)    /* join groups a schedule may have: its tables are C */
/* The search offers a schedule only while join groups x sites stays below
 * this: the greedy's work grows with it, and the search asks for one
 * schedule per placement of inputs and output.  Beyond it the chunks are
 * small next to the sites' share, and the IA plans do as well. */
#define TP_SEARCH_WORK (1 << 14)
/* ... and while the schedules planned for one opt_plan stay below this in
 * all (about half a second of greedy): a program with many contractions
 * still plans fast.  Schedules planned already (the memo) cost nothing. */
#define TP_PLAN_WORK (1 << 20)

static double work_left = TP_PLAN_WORK;

static inline double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* ---- problems and plans ---- */

TpProblem *tp_problem_new(int nsite, int64_t njoin, int64_t nagg, int64_t nchunk0, int64_t nchunk1)
{
	TpProblem *pb = xcalloc(1, sizeof *pb);
	pb->nsite = nsite;
	pb->njoin = njoin;
	pb->nagg = nagg;
	pb->nchunk[0] = nchunk0;
	pb->nchunk[1] = nchunk1;
	pb->jin = xcalloc((size_t)(2 * njoin + 1), sizeof *pb->jin);
	pb->jagg = xcalloc((size_t)(njoin + 1), sizeof *pb->jagg);
	pb->tpi = xcalloc((size_t)(njoin + 1), sizeof *pb->tpi);
	for (int i = 0; i < 2; i++) {
		pb->holder[i] = xcalloc((size_t)(pb->nchunk[i] + 1), sizeof *pb->holder[i]);
		pb->tf[i] = xcalloc((size_t)(pb->nchunk[i] + 1), sizeof *pb->tf[i]);
		pb->chunk_bytes[i] = xcalloc((size_t)(pb->nchunk[i] + 1), sizeof *pb->chunk_bytes[i]);
	}
	pb->tg = xcalloc((size_t)(nagg + 1), sizeof *pb->tg);
	pb->tsig = xcalloc((size_t)(nagg + 1), sizeof *pb->tsig);
	pb->gbytes = xcalloc((size_t)(nagg + 1), sizeof *pb->gbytes);
	pb->gsite = xcalloc((size_t)(nagg + 1), sizeof *pb->gsite);
	for (int64_t g = 0; g < nagg; g++)
		pb->gsite[g] = -1;
	pb->elem_bytes = 4;
	return pb;
}

void tp_problem_free(TpProblem *pb)
{
	if (!pb)
		return;
	free(pb->jin);
	free(pb->jagg);
	free(pb->tpi);
	for (int i = 0; i < 2; i++) {
		free(pb->holder[i]);
		free(pb->tf[i]);
		free(pb->chunk_bytes[i]);
	}
	free(pb->tg);
	free(pb->tsig);
	free(pb->gbytes);
	free(pb->gsite);
	free(pb);
}

void tp_plan_free(TpPlan *pl)
{
	if (!pl)
		return;
	free(pl->x);
	free(pl->y);
	free(pl);
}

/* ---- the incremental state of a (partial) plan ---- */

typedef struct St {
	const TpProblem *pb;
	int ns;
	int *x, *y;                     /* -1: not placed */
	int *need[2];                   /* [chunk * ns + s]: join groups at s reading the chunk */
	int *cnt;                       /* [g * ns + s]: join groups of g at s */
	/* per site: seconds received and sent by the input stage, kernels,
	 * received and sent by the partial-sum stage, combining; bytes held */
	double *fin, *fout, *pi, *gin, *gout, *sig, *mem;
	/* a trial: the sites a tentative placement changed, since `base`
	 * (the stage maxima of the state before it, computed once) */
	bool trial;
	int *touched, ntouched;
	char *mark;
	double base[4];
	bool base_over;                 /* some site is over the memory limit */
} St;

/* Placing only adds to the counters, so a trial's cost is the base's
 * maxima raised by the sites it touched: O(touched), not O(sites). */
static inline void touch(St *st, int s)
{
	if (st->trial && !st->mark[s]) {
		st->mark[s] = 1;
		st->touched[st->ntouched++] = s;
	}
}

static void st_init(St *st, const TpProblem *pb)
{
	int ns = pb->nsite;
	memset(st, 0, sizeof *st);
	st->pb = pb;
	st->ns = ns;
	st->x = xmalloc(sizeof *st->x * (size_t)(pb->njoin + 1));
	st->y = xmalloc(sizeof *st->y * (size_t)(pb->nagg + 1));
	for (int64_t j = 0; j < pb->njoin; j++)
		st->x[j] = -1;
	for (int64_t g = 0; g < pb->nagg; g++)
		st->y[g] = -1;
	for (int i = 0; i < 2; i++)
		st->need[i] = xcalloc((size_t)(pb->nchunk[i] * ns + 1), sizeof *st->need[i]);
	st->cnt = xcalloc((size_t)(pb->nagg * ns + 1), sizeof *st->cnt);
	double **site[] = {&st->fin, &st->fout, &st->pi, &st->gin, &st->gout, &st->sig, &st->mem};
	for (size_t k = 0; k < sizeof site / sizeof *site; k++)
		*site[k] = xcalloc((size_t)ns + 1, sizeof(double));
	st->touched = xcalloc((size_t)ns + 1, sizeof *st->touched);
	st->mark = xcalloc((size_t)ns + 1, 1);
}

static void st_free(St *st)
{
	free(st->x);
	free(st->y);
	free(st->need[0]);
	free(st->need[1]);
	free(st->cnt);
	free(st->fin);
	free(st->fout);
	free(st->pi);
	free(st->gin);
	free(st->gout);
	free(st->sig);
	free(st->mem);
	free(st->touched);
	free(st->mark);
}

/* Site s starts (sign 1) or stops (-1) sending its partial sum of g to y. */
static void contrib(St *st, int64_t g, int s, int y, int sign)
{
	const TpProblem *pb = st->pb;
	touch(st, y);
	touch(st, s);
	st->gin[y] += sign * pb->tg[g];
	st->gout[s] += sign * pb->tg[g];
	st->sig[y] += sign * pb->tsig[g];
	st->mem[y] += sign * pb->gbytes[g];     /* its buffer at the aggregation site */
}

/* Join group j placed on s (sign 1), or taken off it (sign -1). */
static void jg_move(St *st, int64_t j, int s, int sign)
{
	const TpProblem *pb = st->pb;
	int ns = st->ns;
	st->x[j] = sign > 0 ? s : -1;
	touch(st, s);
	st->pi[s] += sign * pb->tpi[j];
	for (int i = 0; i < 2; i++) {
		int64_t c = pb->jin[2 * j + i];
		int h = pb->holder[i][c];
		int *n = &st->need[i][c * ns + s];
		bool edge = sign > 0 ? (*n)++ == 0 : --(*n) == 0;
		if (edge && h >= 0 && h != s) {
			touch(st, h);
			st->fin[s] += sign * pb->tf[i][c];
			st->fout[h] += sign * pb->tf[i][c];
			st->mem[s] += sign * pb->chunk_bytes[i][c];
		}
	}
	int64_t g = pb->jagg[j];
	int y = st->y[g];
	int *n = &st->cnt[g * ns + s];
	bool edge = sign > 0 ? (*n)++ == 0 : --(*n) == 0;
	if (pb->paper) {
		if (y >= 0 && y != s) {
			touch(st, y);
			st->gin[y] += sign * pb->tg[g];
		}
		return;
	}
	if (edge) {
		st->mem[s] += sign * pb->gbytes[g];     /* its accumulator */
		if (y >= 0 && y != s)
			contrib(st, g, s, y, sign);
	}
}

/* Aggregation group g placed on s (sign 1), or taken off it (-1). */
static void g_move(St *st, int64_t g, int s, int sign)
{
	const TpProblem *pb = st->pb;
	int ns = st->ns;
	st->y[g] = sign > 0 ? s : -1;
	touch(st, s);
	if (pb->paper) {
		int64_t remote = 0;
		for (int t = 0; t < ns; t++)
			if (t != s)
				remote += st->cnt[g * ns + t];
		st->sig[s] += sign * pb->tsig[g];
		st->gin[s] += sign * pb->tg[g] * (double)remote;
		return;
	}
	for (int t = 0; t < ns; t++)
		if (t != s && st->cnt[g * ns + t] > 0)
			contrib(st, g, t, s, sign);
}

/* Eq. 6: the four stages' maxima over sites, summed; INFINITY when a site
 * holds more than the limit (unless `any`). */
static double st_cost_any(const St *st, double *stage, bool any)
{
	const TpProblem *pb = st->pb;
	double m[4] = {0, 0, 0, 0};
	for (int s = 0; s < st->ns; s++) {
		if (!any && pb->mem_limit > 0 && st->mem[s] > pb->mem_limit)
			return INFINITY;
		double f = pb->paper ? st->fin[s] : dmax(st->fin[s], st->fout[s]);
		double g = pb->paper ? st->gin[s] : dmax(st->gin[s], st->gout[s]);
		m[0] = dmax(m[0], f);
		m[1] = dmax(m[1], st->pi[s]);
		m[2] = dmax(m[2], g);
		m[3] = dmax(m[3], st->sig[s]);
	}
	if (stage)
		memcpy(stage, m, sizeof m);
	return m[0] + m[1] + m[2] + m[3];
}

static double st_cost(const St *st, double *stage)
{
	return st_cost_any(st, stage, false);
}

/* The four stage maxima m[] raised by site s's values. */
static inline void site_max(const St *st, int s, double m[4])
{
	double f = st->fin[s], g = st->gin[s];
	if (!st->pb->paper) {
		f = dmax(f, st->fout[s]);
		g = dmax(g, st->gout[s]);
	}
	m[0] = dmax(m[0], f);
	m[1] = dmax(m[1], st->pi[s]);
	m[2] = dmax(m[2], g);
	m[3] = dmax(m[3], st->sig[s]);
}

/* Start trials from the current state: its maxima, once. */
static void trial_base(St *st)
{
	const TpProblem *pb = st->pb;
	double m[4] = {0, 0, 0, 0};
	bool over = false;
	for (int s = 0; s < st->ns; s++) {
		over |= pb->mem_limit > 0 && st->mem[s] > pb->mem_limit;
		site_max(st, s, m);
	}
	memcpy(st->base, m, sizeof m);
	st->base_over = over;
}

static void trial_begin(St *st)
{
	st->trial = true;
	st->ntouched = 0;
}

/* The cost of the state a trial made from the base: what st_cost would
 * say, from the touched sites alone.  Ends the trial's tracking. */
static double trial_cost(St *st)
{
	const TpProblem *pb = st->pb;
	double m[4] = {st->base[0], st->base[1], st->base[2], st->base[3]};
	bool over = st->base_over;
	for (int i = 0; i < st->ntouched; i++) {
		int s = st->touched[i];
		st->mark[s] = 0;
		over |= pb->mem_limit > 0 && st->mem[s] > pb->mem_limit;
		site_max(st, s, m);
	}
	st->trial = false;
	st->ntouched = 0;
	return over ? INFINITY : m[0] + m[1] + m[2] + m[3];
}

/* ---- the greedy ---- */

/* Aggregation groups with their join groups, in the greedy's order. */
typedef struct Groups {
	int64_t *order;                 /* aggregation groups, most join groups first */
	int64_t *first, *members;       /* g's join groups: members[first[g] .. first[g+1]) */
} Groups;

static const int64_t *gsize_of;

static int cmp_gsize(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	int64_t nx = gsize_of[x + 1] - gsize_of[x], ny = gsize_of[y + 1] - gsize_of[y];
	if (nx != ny)
		return nx > ny ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void groups_make(Groups *gr, const TpProblem *pb)
{
	gr->first = xcalloc((size_t)(pb->nagg + 2), sizeof *gr->first);
	gr->members = xcalloc((size_t)(pb->njoin + 1), sizeof *gr->members);
	gr->order = xcalloc((size_t)(pb->nagg + 1), sizeof *gr->order);
	for (int64_t j = 0; j < pb->njoin; j++)
		gr->first[pb->jagg[j] + 1]++;
	for (int64_t g = 0; g < pb->nagg; g++)
		gr->first[g + 1] += gr->first[g];
	int64_t *fill = xcalloc((size_t)(pb->nagg + 1), sizeof *fill);
	for (int64_t j = 0; j < pb->njoin; j++) {
		int64_t g = pb->jagg[j];
		gr->members[gr->first[g] + fill[g]++] = j;
	}
	free(fill);
	for (int64_t g = 0; g < pb->nagg; g++)
		gr->order[g] = g;
	gsize_of = gr->first;
	qsort(gr->order, (size_t)pb->nagg, sizeof *gr->order, cmp_gsize);
	gsize_of = NULL;
}

static void groups_free(Groups *gr)
{
	free(gr->order);
	free(gr->first);
	free(gr->members);
}

/* Sites g may be placed on: its fixed one, or all. */
static int g_sites(const TpProblem *pb, int64_t g, int *lo, int *hi)
{
	if (pb->gsite[g] >= 0) {
		*lo = pb->gsite[g];
		*hi = *lo + 1;
	} else {
		*lo = 0;
		*hi = pb->nsite;
	}
	return *hi - *lo;
}

/* Rule 1, tried without changing the state: the site for g and all its
 * join groups that costs least; INFINITY when none fits. */
static double rule1_try(St *st, const Groups *gr, int64_t g, int *best)
{
	int lo, hi;
	double bc = INFINITY;
	*best = -1;
	g_sites(st->pb, g, &lo, &hi);
	trial_base(st);
	for (int s = lo; s < hi; s++) {
		trial_begin(st);
		for (int64_t k = gr->first[g]; k < gr->first[g + 1]; k++)
			jg_move(st, gr->members[k], s, 1);
		g_move(st, g, s, 1);
		double c = trial_cost(st);
		g_move(st, g, s, -1);
		for (int64_t k = gr->first[g]; k < gr->first[g + 1]; k++)
			jg_move(st, gr->members[k], s, -1);
		if (c < bc || *best < 0) {
			bc = c;
			*best = s;
		}
	}
	return bc;
}

static void rule1_apply(St *st, const Groups *gr, int64_t g, int s)
{
	for (int64_t k = gr->first[g]; k < gr->first[g + 1]; k++)
		jg_move(st, gr->members[k], s, 1);
	g_move(st, g, s, 1);
}

/* Places one join group (jg_move) or one aggregation group (g_move). */
typedef void MoveFn(St *st, int64_t id, int s, int sign);

/* Rule 2's step: `id` alone on the site where it costs least (the first
 * such site). */
static void move_cheapest(St *st, MoveFn *move, int64_t id)
{
	int best = 0;
	double bc = INFINITY;
	trial_base(st);
	for (int s = 0; s < st->ns; s++) {
		trial_begin(st);
		move(st, id, s, 1);
		double c = trial_cost(st);
		move(st, id, s, -1);
		if (c < bc) {
			bc = c;
			best = s;
		}
	}
	move(st, id, best, 1);
}

/* The four maxima trial_cost sums, raised by site i's counters when on,
 * by 0 (no change) when not. */
static inline void raise_maxima(const St *st, double m[4], int i, bool on)
{
	m[0] = dmax(m[0], on ? dmax(st->fin[i], st->fout[i]) : 0);
	m[1] = dmax(m[1], on ? st->pi[i] : 0);
	m[2] = dmax(m[2], on ? dmax(st->gin[i], st->gout[i]) : 0);
	m[3] = dmax(m[3], on ? st->sig[i] : 0);
}

/* move_cheapest for join group j (trac's model, not the paper's), the
 * search's hot loop: each site's trial without calls, the touched sites'
 * bookkeeping, the counters' round trips or branches.  The same arithmetic
 * in the same order as jg_move's +1 and -1 and trial_cost: a trial leaves
 * the doubles as x + a - a does (not always x), and ties between sites go
 * by those last bits, so the +1 and -1 stay.  What a trial does not do is
 * done as adding 0 to a spare site (index ns) or to one not touched, and
 * as raising the maxima by 0 for a site not touched: both change no bits,
 * as no counter is ever -0 (they are sums and differences of
 * non-negative numbers) and the maxima start at 0.  Memory is left alone
 * without a limit: nothing in the greedy reads it then (tp_plan_cost
 * counts it afresh). */
static void jg_cheapest(St *st, int64_t j)
{
	const TpProblem *pb = st->pb;
	int ns = st->ns;
	int64_t c0 = pb->jin[2 * j], c1 = pb->jin[2 * j + 1];
	int h0 = pb->holder[0][c0], h1 = pb->holder[1][c1];
	int h0i = h0 >= 0 ? h0 : ns, h1i = h1 >= 0 ? h1 : ns;
	const int *need0 = &st->need[0][c0 * ns], *need1 = &st->need[1][c1 * ns];
	double tf0 = pb->tf[0][c0], tf1 = pb->tf[1][c1];
	double cb0 = pb->chunk_bytes[0][c0], cb1 = pb->chunk_bytes[1][c1];
	int64_t g = pb->jagg[j];
	int y = st->y[g], yi = y >= 0 ? y : ns;
	const int *cnt = &st->cnt[g * ns];
	double tpi = pb->tpi[j], tg = pb->tg[g], tsig = pb->tsig[g], gb = pb->gbytes[g];
	double lim = pb->mem_limit;
	bool mem = lim > 0;
	double *fin = st->fin, *fout = st->fout, *pi = st->pi, *gin = st->gin, *gout = st->gout, *sig = st->sig,
	       *mm = st->mem;
	int best = 0;
	double bc = INFINITY;
	trial_base(st);
	for (int s = 0; s < ns; s++) {
		bool in0 = need0[s] == 0 && h0 >= 0 && h0 != s, in1 = need1[s] == 0 && h1 >= 0 && h1 != s;
		bool acc = cnt[s] == 0, to = acc && y >= 0 && y != s;
		double a0 = in0 ? tf0 : 0, a1 = in1 ? tf1 : 0, ag = to ? tg : 0, as = to ? tsig : 0;
		pi[s] += tpi;
		fin[s] += a0;
		fout[h0i] += a0;
		fin[s] += a1;
		fout[h1i] += a1;
		gin[yi] += ag;
		gout[s] += ag;
		sig[yi] += as;
		bool over = st->base_over;
		if (mem) {
			mm[s] += in0 ? cb0 : 0;
			mm[s] += in1 ? cb1 : 0;
			mm[s] += acc ? gb : 0;
			mm[yi] += to ? gb : 0;
			over |= mm[s] > lim || (in0 && mm[h0] > lim) || (in1 && mm[h1] > lim) || (to && mm[y] > lim);
		}
		/* trial_cost: the base's maxima raised by the touched sites */
		double m[4] = {st->base[0], st->base[1], st->base[2], st->base[3]};
		raise_maxima(st, m, s, true);
		raise_maxima(st, m, h0i, in0);
		raise_maxima(st, m, h1i, in1);
		raise_maxima(st, m, yi, to);
		double cost = over ? INFINITY : m[0] + m[1] + m[2] + m[3];
		/* the trial undone, as jg_move's -1 */
		pi[s] -= tpi;
		fin[s] -= a0;
		fout[h0i] -= a0;
		fin[s] -= a1;
		fout[h1i] -= a1;
		gin[yi] -= ag;
		gout[s] -= ag;
		sig[yi] -= as;
		if (mem) {
			mm[s] -= in0 ? cb0 : 0;
			mm[s] -= in1 ? cb1 : 0;
			mm[s] -= acc ? gb : 0;
			mm[yi] -= to ? gb : 0;
		}
		if (cost < bc) {
			bc = cost;
			best = s;
		}
	}
	jg_move(st, j, best, 1);
}

/* Rule 2, applied: g's join groups one by one where they cost least (a
 * fixed group first, so the cost of sending to it counts), then the group
 * where it costs least.  Returns the cost after. */
static double rule2_apply(St *st, const Groups *gr, int64_t g)
{
	const TpProblem *pb = st->pb;
	if (pb->gsite[g] >= 0)
		g_move(st, g, pb->gsite[g], 1);
	for (int64_t k = gr->first[g]; k < gr->first[g + 1]; k++) {
		if (pb->paper)
			move_cheapest(st, jg_move, gr->members[k]);
		else
			jg_cheapest(st, gr->members[k]);
	}
	if (pb->gsite[g] < 0)
		move_cheapest(st, g_move, g);
	return st_cost(st, NULL);
}

static void group_undo(St *st, const Groups *gr, int64_t g)
{
	g_move(st, g, st->y[g], -1);
	for (int64_t k = gr->first[g]; k < gr->first[g + 1]; k++)
		jg_move(st, gr->members[k], st->x[gr->members[k]], -1);
}

TpPlan *tp_plan_greedy(const TpProblem *pb, TpVariant v)
{
	St st;
	Groups gr;
	st_init(&st, pb);
	groups_make(&gr, pb);
	TpPlan *pl = xcalloc(1, sizeof *pl);
	for (int64_t i = 0; i < pb->nagg; i++) {
		int64_t g = gr.order[i];
		if (gr.first[g] == gr.first[g + 1] && pb->gsite[g] < 0) {
			/* no join group: the group is empty; anywhere will do */
			g_move(&st, g, 0, 1);
			continue;
		}
		int s1 = -1;
		double c1 = v == TP_RULE2 ? INFINITY : rule1_try(&st, &gr, g, &s1);
		if (v == TP_RULE1) {
			rule1_apply(&st, &gr, g, s1);
			pl->by_rule[0]++;
			continue;
		}
		double c2 = rule2_apply(&st, &gr, g);
		if (v == TP_GREEDY && s1 >= 0 && c1 <= c2) {
			group_undo(&st, &gr, g);
			rule1_apply(&st, &gr, g, s1);
			pl->by_rule[0]++;
		} else {
			pl->by_rule[1]++;
		}
	}
	pl->x = st.x;
	pl->y = st.y;
	st.x = st.y = NULL;
	st_free(&st);
	groups_free(&gr);
	tp_plan_cost(pb, pl);
	return pl;
}

void tp_plan_cost(const TpProblem *pb, TpPlan *pl)
{
	St st;
	st_init(&st, pb);
	int ns = pb->nsite;
	for (int64_t g = 0; g < pb->nagg; g++)
		if (pl->y[g] >= 0)
			g_move(&st, g, pl->y[g], 1);
	for (int64_t j = 0; j < pb->njoin; j++)
		if (pl->x[j] >= 0)
			jg_move(&st, j, pl->x[j], 1);
	double stage[4];
	pl->seconds = st_cost_any(&st, stage, true);
	pl->t_in = stage[0];
	pl->t_kernel = stage[1];
	pl->t_partial = stage[2];
	pl->t_combine = stage[3];
	/* what the runtime sends: each chunk once to each site lacking it,
	 * each site's sum of a group once to the group's site */
	pl->bytes = pl->mem = 0;
	pl->in_msgs = pl->part_msgs = 0;
	pl->fits = true;
	for (int i = 0; i < 2; i++)
		for (int64_t c = 0; c < pb->nchunk[i]; c++)
			for (int s = 0; s < ns; s++)
				if (st.need[i][c * ns + s] > 0 && pb->holder[i][c] >= 0 && pb->holder[i][c] != s) {
					pl->bytes += pb->chunk_bytes[i][c];
					pl->in_msgs++;
				}
	for (int64_t g = 0; g < pb->nagg; g++)
		for (int s = 0; s < ns; s++)
			if (st.cnt[g * ns + s] > 0 && pl->y[g] != s) {
				pl->bytes += pb->gbytes[g];
				pl->part_msgs++;
			}
	for (int s = 0; s < ns; s++) {
		/* the paper's model keeps no accounts of memory: count as trac's */
		double m = st.mem[s];
		if (pb->paper) {
			m = 0;
			for (int i = 0; i < 2; i++)
				for (int64_t c = 0; c < pb->nchunk[i]; c++)
					if (st.need[i][c * ns + s] > 0 && pb->holder[i][c] >= 0 && pb->holder[i][c] != s)
						m += pb->chunk_bytes[i][c];
		}
		pl->mem = dmax(pl->mem, m);
	}
	if (pb->mem_limit > 0 && pl->mem > pb->mem_limit)
		pl->fits = false;
	st_free(&st);
}

/* ---- the lineage of a contraction, from its blocking ---- */

/* Row-major index of key over t's frontiers, and back. */
static int64_t key_index(const RelType *t, const int64_t *key)
{
	int64_t lin = 0;
	for (int d = 0; d < t->nkey; d++)
		lin = lin * rel_frontier(t, d) + key[d];
	return lin;
}

static void key_of(const RelType *t, int64_t lin, int64_t *key)
{
	for (int d = t->nkey - 1; d >= 0; d--) {
		int64_t f = rel_frontier(t, d);
		key[d] = lin % f;
		lin /= f;
	}
}


TpProblem *tp_lineage(const CostCtx *cc, const Kernel *k, const RelType *l, const RelType *r,
                      const JoinSpec *on, int ngroup, const int *group, const RelType *out, const Place *pl,
                      const Place *pr, const Place *po)
{
	const Machine *m = cc->m;
	int ns = cc->nsites;
	RelType jt = ia_join_type(l, r, on);
	double nj = 1;
	for (int d = 0; d < jt.nkey; d++)
		nj *= (double)rel_frontier(&jt, d);
	if (nj > TP_MAXJOIN || nj < 1 || ngroup < 0 || out->nkey != ngroup)
		return NULL;
	int rmap[MAXDIM];               /* right dim -> join-space dim */
	for (int d = 0; d < r->nkey; d++)
		rmap[d] = ia_join_out_dim(l->nkey, on, d);
	TpProblem *pb = tp_problem_new(ns, (int64_t)nj, rel_ntuples(out), rel_ntuples(l), rel_ntuples(r));
	double size = dtype_size(out->dtype);
	pb->elem_bytes = size;
	double bw = m->bandwidth[COLL_ALLTOALL], lat = m->latency[COLL_ALLTOALL];

	/* the join-space dims a chunk dim spans: a kernel loops over them */
	bool covered[MAXDIM] = {0};
	for (int c = 0; c < l->nchunk; c++)
		covered[l->chunkdim[c]] = true;
	for (int c = 0; c < r->nchunk; c++)
		covered[rmap[r->chunkdim[c]]] = true;
	int per = kx_nops(k->expr) + (k->reduces ? 1 : 0);
	const RelType *ins[2] = {l, r};
	/* kernels and combines take what kernelcost.c says the whole join and a
	 * whole aggregation take on one rank, shared by flops and elements */
	Place one = place_part(0, NULL);
	Cost kall = cost_join(cc, k, l, r, on, &one, NULL);
	Cost sall = cost_agg(cc, out, &one, 1, out);
	double oelems = rel_floats(out);

	for (int i = 0; i < 2; i++) {
		const RelType *t = ins[i];
		const Place *p = i ? pr : pl;
		int64_t key[MAXDIM] = {0};
		for (int64_t c = 0; c < pb->nchunk[i]; c++) {
			key_of(t, c, key);
			pb->holder[i][c] = place_site(p, t, key, ns);
			pb->chunk_bytes[i][c] = (double)rel_chunk_elems(t, key) * dtype_size(t->dtype);
			pb->tf[i][c] = pb->chunk_bytes[i][c] / bw + lat;
		}
	}
	for (int64_t g = 0; g < pb->nagg; g++) {
		int64_t key[MAXDIM] = {0};
		key_of(out, g, key);
		double elems = (double)rel_chunk_elems(out, key);
		pb->gbytes[g] = elems * size;
		pb->tg[g] = pb->gbytes[g] / bw + lat;
		pb->tsig[g] = oelems > 0 ? sall.seconds * elems / oelems : 0;
		pb->gsite[g] = po ? place_site(po, out, key, ns) : -1;
	}
	int64_t jk[MAXDIM] = {0}, lk[MAXDIM], rk[MAXDIM], gk[MAXDIM];
	for (int64_t j = 0; j < pb->njoin; j++) {
		key_of(&jt, j, jk);
		for (int d = 0; d < l->nkey; d++)
			lk[d] = jk[d];
		for (int d = 0; d < r->nkey; d++)
			rk[d] = jk[rmap[d]];
		for (int g = 0; g < ngroup; g++)
			gk[g] = jk[group[g]];
		pb->jin[2 * j] = key_index(l, lk);
		pb->jin[2 * j + 1] = key_index(r, rk);
		pb->jagg[j] = key_index(out, gk);
		double f = per ? per : 1;
		for (int d = 0; d < jt.nkey; d++)
			if (covered[d])
				f *= (double)rel_chunk_len(&jt, d, jk[d]);
		pb->flops += f;
		pb->tpi[j] = f;
	}
	for (int64_t j = 0; j < pb->njoin; j++)
		pb->tpi[j] = pb->flops > 0 ? kall.seconds * pb->tpi[j] / pb->flops : kall.seconds / (double)pb->njoin;
	return pb;
}

/* ---- density: which relations have every chunk ---- */

bool opt_twophase_dense(const TraProg *p, int t)
{
	bool *dense = xcalloc((size_t)t + 2, sizeof *dense);
	for (int i = 0; i <= t; i++) {
		const TraOp *op = &p->ops.v[i];
		int in[MAXIN];
		int n = tra_inputs(op, in);
		bool d = op->kind != TRA_FILTER && !op->type.holes;
		for (int k = 0; k < n; k++)
			d &= in[k] < i && dense[in[k]];
		dense[i] = d;
	}
	bool r = dense[t];
	free(dense);
	return r;
}

/* ---- the search's candidates, memoised ---- */

typedef struct Memo {
	int n;
	int64_t *key;
	TpSched *sched;                 /* NULL: no schedule applies */
} Memo;

static Vec(Memo) memo;
static int64_t *memo_slot;          /* index + 1, 0 empty */
static size_t memo_cap;
static double memo_bytes;           /* held by keys and schedules */

static void memo_free_all(void)
{
	for (int i = 0; i < memo.n; i++) {
		free(memo.v[i].key);
		if (memo.v[i].sched) {
			free((void *)memo.v[i].sched->site);
			free(memo.v[i].sched);
		}
	}
	vec_free(&memo);
	free(memo_slot);
	memo_slot = NULL;
	memo_cap = 0;
	memo_bytes = 0;
}

void opt_twophase_trim(double bytes)
{
	if (memo_bytes > bytes)
		memo_free_all();
	work_left = TP_PLAN_WORK;
}

static int64_t *memo_find(const int64_t *k, int n)
{
	if ((size_t)(memo.n + 1) * 2 > memo_cap) {
		static bool registered;
		if (!registered)
			atexit(memo_free_all);
		registered = true;
		size_t cap = memo_cap ? 2 * memo_cap : 256;
		free(memo_slot);
		memo_slot = xcalloc(cap, sizeof *memo_slot);
		memo_cap = cap;
		for (int i = 0; i < memo.n; i++) {
			size_t h = hash_keys(memo.v[i].key, memo.v[i].n) & (cap - 1);
			while (memo_slot[h])
				h = (h + 1) & (cap - 1);
			memo_slot[h] = i + 1;
		}
	}
	for (size_t h = hash_keys(k, n) & (memo_cap - 1);; h = (h + 1) & (memo_cap - 1)) {
		int64_t *e = &memo_slot[h];
		if (!*e)
			return e;
		const Memo *mm = &memo.v[*e - 1];
		if (mm->n == n && !memcmp(mm->key, k, sizeof *k * (size_t)n))
			return e;
	}
}

typedef Vec(int64_t) Key;

static void key_type(Key *k, const RelType *t)
{
	vec_push(k, t->dtype);
	vec_push(k, t->nkey);
	for (int d = 0; d < t->nkey; d++) {
		vec_push(k, t->extent[d]);
		vec_push(k, t->block[d]);
	}
	vec_push(k, t->nchunk);
	for (int c = 0; c < t->nchunk; c++)
		vec_push(k, t->chunkdim[c]);
}

static void key_place(Key *k, const Place *p)
{
	vec_push(k, p ? p->kind : -1);
	if (p && p->kind == PL_PART) {
		vec_push(k, p->ndims);
		for (int i = 0; i < p->ndims; i++)
			vec_push(k, p->dims[i]);
	}
}

static void key_kexpr(Key *k, const KExpr *e)
{
	vec_push(k, e->kind);
	switch (e->kind) {
	case KX_IN:
	case KX_IDX:
		vec_push(k, e->in);
		return;
	case KX_CONST: {
		int64_t bits;
		memcpy(&bits, &e->val, sizeof bits);
		vec_push(k, bits);
		return;
	}
	case KX_OP:
		vec_push(k, e->op);
		for (int i = 0; i < kop_arity(e->op); i++)
			key_kexpr(k, e->arg[i]);
		return;
	}
}

static int64_t machine_hash(const Machine *m)
{
	/* every number of the model, whatever fields it grows (the name of
	 * its source does not matter) */
	size_t n = offsetof(Machine, source);
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)m;
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return (int64_t)h;
}

static const char *variant_name[TP_NVARIANT] = {"greedy", "rule 1 only", "rule 2 only"};

/* A plan's cost, for cost_cmp. */
static Cost tp_cost(const TpProblem *pb, const TpPlan *pl)
{
	return (Cost){pl->seconds, pl->bytes / pb->elem_bytes, pl->bytes, pb->flops, 0};  /* one work: the same flops spread */
}

/* Plan a problem three ways and make the cheapest a schedule (under the
 * search's objective: by seconds, or by floats moved first; the greedy
 * itself places groups by time, Eq. 6, either way). */
static TpSched *schedule(const TpProblem *pb, const CostCtx *cc)
{
	TpPlan *best = NULL;
	int bv = 0;
	double vs[TP_NVARIANT];
	for (int v = 0; v < TP_NVARIANT; v++) {
		TpPlan *pl = tp_plan_greedy(pb, (TpVariant)v);
		vs[v] = pl->fits ? pl->seconds : INFINITY;
		if (pl->fits && (!best || cost_cmp(cc->objective, tp_cost(pb, pl), tp_cost(pb, best)) < 0)) {
			tp_plan_free(best);
			best = pl;
			bv = v;
		} else {
			tp_plan_free(pl);
		}
	}
	if (!best)
		return NULL;
	TpSched *ts = xcalloc(1, sizeof *ts);
	ts->nranks = pb->nsite;
	ts->njoin = pb->njoin;
	ts->nagg = pb->nagg;
	ts->site = best->x;
	best->x = NULL;
	ts->variant = variant_name[bv];
	memcpy(ts->variant_seconds, vs, sizeof vs);
	ts->by_rule[0] = best->by_rule[0];
	ts->by_rule[1] = best->by_rule[1];
	ts->t_in = best->t_in;
	ts->t_kernel = best->t_kernel;
	ts->t_partial = best->t_partial;
	ts->t_combine = best->t_combine;
	/* two exchanges, each an op that communicates */
	ts->seconds = best->seconds + 2 * cc->m->op_overhead;
	ts->bytes = best->bytes;
	ts->floats = best->bytes / pb->elem_bytes;
	ts->flops = pb->flops;
	ts->mem = best->mem;
	ts->in_msgs = best->in_msgs;
	ts->part_msgs = best->part_msgs;
	tp_plan_free(best);
	return ts;
}

const TpSched *opt_twophase_candidate(const CostCtx *cc, const Kernel *k, const RelType *l, const RelType *r,
                                      const JoinSpec *on, int ngroup, const int *group, const RelType *out,
                                      const Place *pl, const Place *pr, const Place *po,
                                      double mem_limit)
{
	if (pl->kind == PL_PARTIAL || pr->kind == PL_PARTIAL || po->kind != PL_PART || ngroup < 0)
		return NULL;
	Key key = {0};
	vec_push(&key, cc->nsites);
	vec_push(&key, machine_hash(cc->m));
	vec_push(&key, cc->objective);
	int64_t lim;
	memcpy(&lim, &mem_limit, sizeof lim);
	vec_push(&key, lim);
	key_type(&key, l);
	key_type(&key, r);
	key_type(&key, out);
	vec_push(&key, on->nmatch);
	for (int i = 0; i < on->nmatch; i++) {
		vec_push(&key, on->lkey[i]);
		vec_push(&key, on->rkey[i]);
	}
	vec_push(&key, ngroup);
	for (int g = 0; g < ngroup; g++)
		vec_push(&key, group[g]);
	key_place(&key, pl);
	key_place(&key, pr);
	key_place(&key, po);
	vec_push(&key, k->nlab);
	vec_push(&key, k->red);
	vec_push(&key, k->reduces);
	for (int i = 0; i < 2; i++) {
		vec_push(&key, k->nindim[i]);
		for (int c = 0; c < k->nindim[i]; c++)
			vec_push(&key, k->inlab[i][c]);
	}
	vec_push(&key, k->noutdim);
	for (int c = 0; c < k->noutdim; c++)
		vec_push(&key, k->outlab[c]);
	key_kexpr(&key, k->expr);

	int64_t *slot = memo_find(key.v, key.n);
	if (*slot) {
		vec_free(&key);
		return memo.v[*slot - 1].sched;
	}
	RelType jt = ia_join_type(l, r, on);
	double work = cc->nsites;
	for (int d = 0; d < jt.nkey; d++)
		work *= (double)rel_frontier(&jt, d);
	if (work > TP_SEARCH_WORK || work > work_left) {
		/* not planned, and not remembered: a later opt_plan may afford it */
		vec_free(&key);
		return NULL;
	}
	work_left -= work;
	TpProblem *pb = tp_lineage(cc, k, l, r, on, ngroup, group, out, pl, pr, po);
	TpSched *ts = NULL;
	if (pb) {
		pb->mem_limit = mem_limit;
		ts = schedule(pb, cc);
		tp_problem_free(pb);
	}
	Memo mm = {key.n, key.v, ts};
	vec_push(&memo, mm);
	memo_bytes += sizeof(int64_t) * (double)key.cap + (ts ? sizeof *ts + sizeof(int) * (double)ts->njoin : 0);
	*slot = memo.n;
	return ts;
}
