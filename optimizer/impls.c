/*
 * impls.c: the candidates of the plan search.
 *
 * For every TRA op (a unit: a join only a sum reads goes with it), the
 * implementations the rules derive from its Table 1 translation, each with
 * the placements it needs of its inputs, the one it gives its result, its
 * cost and the memory it holds (search.c's top comment lists them); and
 * the placements a relation may have (its Dom).
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/search.h"

/* ---- placements of one relation ---- */

/* Partitioning dims of frontier 1 never change a tuple's site. */
Place place_norm(const RelType *t, Place p)
{
	if (p.kind != PL_PART)
		return p;
	Place q = {.kind = PL_PART};
	for (int i = 0; i < p.ndims; i++)
		if (p.dims[i] < t->nkey && rel_frontier(t, p.dims[i]) > 1)
			q.dims[q.ndims++] = p.dims[i];
	return q;
}

int dom_find(const Dom *d, const RelType *t, Place p)
{
	p = place_norm(t, p);
	for (int i = 0; i < d->n; i++)
		if (place_eq(&d->p[i], &p))
			return i;
	return -1;
}

void dom_add(Dom *d, Place p)
{
	for (int i = 0; i < d->n; i++)
		if (place_eq(&d->p[i], &p))
			return;
	if (d->n < MAXDOM)
		d->p[d->n++] = p;
}

/* all; part on each dim; part on ordered pairs (small key arities); part()
 * (everything on rank 0, for scalars). */
void dom_make(Dom *d, const RelType *t)
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


/* Moving op t's result from placement q to p (dom indices), times its count. */
Cost move_cost(Search *s, int t, int q, int p)
{
	if (q == p)
		return (Cost){0};
	if (!s->move[t]) {
		int nd = s->dom[t].n;
		s->move[t] = search_scratch(s, (size_t)nd * nd, sizeof(Cost));
		for (int i = 0; i < nd * nd; i++)
			s->move[t][i].seconds = -1;
	}
	Cost *c = &s->move[t][q * s->dom[t].n + p];
	if (c->seconds < 0)
		*c = cost_scale(cost_move(&s->cc, type_of(s, t), &s->dom[t].p[q], 1, &s->dom[t].p[p]), s->times[t]);
	return *c;
}

int find_out(Search *s, int t, Place p)
{
	return dom_find(&s->dom[t], type_of(s, t), p);
}

static double rank_bytes(Search *s, const RelType *t, const Place *p, double copies)
{
	return cost_rank_bytes(&s->cc, t, p, copies);
}

/* The placement of a local join's key space given its inputs', or false
 * when matching tuples would not meet. */
/* Whether convolution j is fused with its sum, so that a kernel's
 * gradient's window is tiled (build.c's conv_halo_type). */
static bool conv_tiled(Search *s, const TraOp *j)
{
	return j->kind == TRA_CONV && s->absorbed[j - s->tra->ops.v] >= 0;
}

/* Where join j computes on inputs placed l and r, in j's own numbering of
 * its output dims; a tiled convolution matches its windows' dims to the
 * left's own dims (its halo is keyed so), then renumbers. */
static bool join_place(Search *s, const TraOp *j, const Place *l, const Place *r, Place *jp)
{
	const RelType *lt = type_of(s, j->u.join.left), *rt = type_of(s, j->u.join.right);
	if (!conv_tiled(s, j))
		return ia_join_place(lt->nkey, &j->u.join.on, l, r, jp);
	JoinSpec on;
	RelType ht;
	TraOp jb = *j;
	jb.type = *type_of(s, (int)(j - s->tra->ops.v));
	conv_halo_type(&jb, lt, rt, true, &ht, &on);
	if (!ia_join_place(lt->nkey, &on, l, r, jp))
		return false;
	for (int i = 0; jp->kind == PL_PART && i < jp->ndims; i++)
		jp->dims[i] = conv_join_dim(lt->nkey, &on, &j->u.join.on, jp->dims[i], rt->nkey);
	return true;
}

/* Pairs of input placements under which a local join works: (all, all),
 * (all, any), (any, all), and co-partitionings on the join keys. */
typedef struct Pair {
	int l, r;
	Place jp;
} Pair;

/* A convolution's right input is never partitioned on a window dim that
 * stands for its lab (a kernel's gradient): its halo is the whole dim,
 * one chunk, which a partitioning on it would put on one site. */
static bool conv_right_ok(const TraOp *j, const RelType *rt, const Place *pr)
{
	if (j->kind != TRA_CONV || pr->kind != PL_PART)
		return true;
	const Kernel *k = j->u.join.kernel;
	for (int w = 0; w < k->nwin; w++)
		for (int i = 0; i < pr->ndims; i++)
			if (ia_conv_own_left(k, w) && pr->dims[i] == rt->chunkdim[k->win[w].dim])
				return false;
	return true;
}

static int join_pairs(Search *s, const TraOp *j, Pair *out, int max)
{
	int L = j->u.join.left, R = j->u.join.right, n = 0;
	const Dom *dl = &s->dom[L], *dr = &s->dom[R];
	const RelType *lt = type_of(s, L);
	RelType jt = ia_join_type(lt, type_of(s, R), &j->u.join.on);
	for (int a = 0; a < dl->n; a++)
		for (int b = 0; b < dr->n; b++) {
			const Place *pl = &dl->p[a], *pr = &dr->p[b];
			/* (part, part) pairs only when co-partitioned; skip the
			 * rest quickly */
			if (pl->kind == PL_PART && pr->kind == PL_PART && pl->ndims != pr->ndims)
				continue;
			Place jp;
			if (!join_place(s, j, pl, pr, &jp) || (!conv_tiled(s, j) && !conv_right_ok(j, type_of(s, R), pr)))
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
	*out = ia_agg_place(it, p, ngroup, group);
	return out->kind != PL_PARTIAL;
}

static bool allowed(Search *s, int t, Strategy st, int side)
{
	int stmt = s->tra->ops.v[t].stmt;
	if (s->gen_all || stmt < 0 || s->force[stmt] == STRAT_NONE || s->force[stmt] == STRAT_LOOKUP)
		return true;    /* lookup forces the statement's gathers alone */
	return st == s->force[stmt] && (s->forceside[stmt] < 0 || s->forceside[stmt] == side);
}

/* ---- costs: impls.def's cost column ---- */

typedef void CostFn(Search *s, int t, Impl *im);

/* Input j's type and placement as im takes it. */
static const RelType *in_type(Search *s, int t, int j)
{
	int in[MAXIN];
	unit_inputs(s, t, in);
	return type_of(s, in[j]);
}

static const Place *in_place(Search *s, int t, const Impl *im, int j)
{
	int in[MAXIN];
	unit_inputs(s, t, in);
	return &s->dom[in[j]].p[im->inpl[j]];
}

static const Place *out_place(Search *s, int t, const Impl *im)
{
	return &s->dom[t].p[im->out];
}

/* The join a unit's costs are about: the op, or a contraction's join. */
static const TraOp *join_of(Search *s, int t)
{
	const TraOp *op = &s->tra->ops.v[t];
	return op->kind == TRA_AGG ? &s->tra->ops.v[op->u.agg.in] : op;
}

/* Where a join computes, given its inputs' placements (a pair that
 * join_pairs admitted). */
static Place join_at(Search *s, const TraOp *j, const Place *pl, const Place *pr)
{
	const RelType *lt = type_of(s, j->u.join.left);
	RelType jt = ia_join_type(lt, type_of(s, j->u.join.right), &j->u.join.on);
	Place jp;
	if (!join_place(s, j, pl, pr, &jp))
		tr_bug("a join's inputs placed where their tuples do not meet");
	return place_norm(&jt, jp);
}

static void c_none(Search *s, int t, Impl *im)
{
	(void)s, (void)t, (void)im;
}

static void c_read(Search *s, int t, Impl *im)
{
	const RelType *ty = type_of(s, t);
	const Place *p = out_place(s, t, im);
	/* partitioned: its read calls; every rank reads all of it when pinned so */
	im->cost = cost_read(&s->cc, ty, p);
	im->mem = rank_bytes(s, ty, p, 1);
}

/* init, load, range: made where they are, at memory speed */
static void c_param(Search *s, int t, Impl *im)
{
	im->mem = rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
}

/* a slice: the window's chunks copied out of the whole input, which every
 * rank holds */
static void c_slice(Search *s, int t, Impl *im)
{
	const RelType *ot = type_of(s, t);
	const Place *p = out_place(s, t, im);
	double bytes = rank_bytes(s, ot, p, 1);
	im->cost.seconds = bytes / s->cc.m->memcpy_bw + s->cc.m->local_op_overhead;
	im->mem = rank_bytes(s, in_type(s, t, 0), in_place(s, t, im, 0), 1) + bytes;
}

static void c_unary(Search *s, int t, Impl *im)
{
	const TraOp *op = &s->tra->ops.v[t];
	const RelType *it = in_type(s, t, 0);
	const Place *p = in_place(s, t, im, 0);
	if (op->kind == TRA_MAP)
		im->cost = cost_map(&s->cc, op->u.map.kernel, it, p);
	im->mem = rank_bytes(s, it, p, 1) * (op->kind == TRA_MAP ? 2 : 1);
}

/* A join's kernel over its key space at jp: a convolution's at its own rate. */
/* A join's cost: a convolution's by its windows, a sampled join's by its
 * mask mt's stored elements (NULL: not sampled). */
static Cost join_cost(Search *s, int t, const TraOp *j, const RelType *lt, const RelType *rt, const Place *pr,
                      const Place *jp, const RelType *mt, double *mem)
{
	if (j->kind == TRA_CONV) {
		/* and the halo its right input needs (build.c's conv_halo) */
		Cost c = cost_conv(&s->cc, j->u.join.kernel, lt, rt, &j->u.join.on, type_of(s, t), jp);
		TraOp jb = *j;
		jb.type = *type_of(s, (int)(j - s->tra->ops.v));
		RelType ht;
		JoinSpec on;
		if (conv_halo_type(&jb, lt, rt, conv_tiled(s, j), &ht, &on)) {
			c = cost_add(c, cost_halo(&s->cc, rt, pr, &ht));
			*mem += rank_bytes(s, &ht, pr, 1);
		}
		return c;
	}
	return cost_join(&s->cc, j->u.join.kernel, lt, rt, &j->u.join.on, jp, mt);
}

static void c_join(Search *s, int t, Impl *im)
{
	const TraOp *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	const Place *pl = in_place(s, t, im, 0), *pr = in_place(s, t, im, 1);
	Place jp = join_at(s, j, pl, pr);
	const RelType *mt = j->u.join.mask.on ? in_type(s, t, 2) : NULL;
	im->mem = 0;
	im->cost = join_cost(s, t, j, lt, rt, pr, &jp, mt, &im->mem);
	im->mem += rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1) + rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
	if (mt)
		im->mem += rank_bytes(s, mt, in_place(s, t, im, 2), 1);
}

static void c_agg_local(Search *s, int t, Impl *im)
{
	const RelType *it = in_type(s, t, 0), *ot = type_of(s, t);
	const Place *p = in_place(s, t, im, 0);
	im->cost = cost_agg(&s->cc, it, p, 1, ot);
	im->mem = rank_bytes(s, it, p, 1);
	im->mem += rank_bytes(s, ot, out_place(s, t, im), 1);
}

static void c_agg_shuffle(Search *s, int t, Impl *im)
{
	const RelType *it = in_type(s, t, 0), *ot = type_of(s, t);
	const Place *p = in_place(s, t, im, 0);
	im->cost = cost_add(cost_move(&s->cc, it, p, 1, &im->mid), cost_agg(&s->cc, it, &im->mid, 1, ot));
	im->mem = rank_bytes(s, it, p, 1) + rank_bytes(s, it, &im->mid, 1) + rank_bytes(s, ot, out_place(s, t, im), 1);
}

/* Partial results (copies per key) moved to the result's placement and
 * added up: a shuffle to a partitioning, or a broadcast to all sites. */
static void partial_tail(Search *s, int t, Impl *im, double copies)
{
	const RelType *ot = type_of(s, t);
	const Place *po = out_place(s, t, im);
	Place pp = place_partial();
	Cost mv = cost_move(&s->cc, ot, &pp, copies, po);
	Cost ag;
	if (po->kind == PL_ALL) {
		Place all = place_all();
		ag = cost_agg(&s->cc, ot, &all, 1, ot);
		ag = cost_scale(ag, copies);
		im->mem += rank_bytes(s, ot, &all, 1) * copies;
	} else {
		ag = cost_agg(&s->cc, ot, &pp, copies, ot);
		im->mem += rank_bytes(s, ot, po, 1) * 2;
	}
	im->cost = cost_add(cost_add(im->cost, mv), ag);
}

static void c_agg_partial(Search *s, int t, Impl *im)
{
	const TraOp *op = &s->tra->ops.v[t];
	const RelType *it = in_type(s, t, 0), *ot = type_of(s, t);
	const Place *p = in_place(s, t, im, 0);
	im->cost = cost_agg(&s->cc, it, p, 1, ot);
	im->mem = rank_bytes(s, it, p, 1);
	partial_tail(s, t, im, cost_partial_copies(&s->cc, it, p, op->u.agg.ngroup, op->u.agg.group));
}

static void c_fused(Search *s, int t, Impl *im)
{
	c_join(s, t, im);
}

static void c_fused_partial(Search *s, int t, Impl *im)
{
	const TraOp *op = &s->tra->ops.v[t], *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	const Place *pl = in_place(s, t, im, 0), *pr = in_place(s, t, im, 1);
	RelType jt = ia_join_type(lt, rt, &j->u.join.on);
	Place jp = join_at(s, j, pl, pr);
	im->mem = 0;
	im->cost = join_cost(s, t, j, lt, rt, pr, &jp, NULL, &im->mem);
	im->mem += rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1);
	double copies = cost_partial_copies(&s->cc, &jt, &jp, op->u.agg.ngroup, op->u.agg.group);
	im->mem += rank_bytes(s, type_of(s, t), &(Place){.kind = PL_PARTIAL}, copies);
	partial_tail(s, t, im, copies);
}

static void c_rmm(Search *s, int t, Impl *im)
{
	const TraOp *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	RelType jt = ia_join_type(lt, rt, &j->u.join.on);
	/* the shuffles of the replicated sides (their floats count every
	 * copy: the paper's Front(Y)[1] |X| + Front(X)[0] |Y|) */
	int lmap[MAXDIM], rmap[MAXDIM];
	rmm_keymaps(j, lt, rt, &jt, lmap, rmap);
	RelType ls = rep_type(&jt, lt, lmap), rs = rep_type(&jt, rt, rmap);
	Place src = place_partial();
	Cost mvl = cost_move(&s->cc, &ls, &src, 1, &im->mid);
	Cost mvr = cost_move(&s->cc, &rs, &src, 1, &im->mid);
	im->cost = cost_add(mvl, mvr);
	im->cost = cost_add(im->cost, cost_join(&s->cc, j->u.join.kernel, lt, rt, &j->u.join.on, &im->mid, NULL));
	im->mem = rank_bytes(s, &ls, &im->mid, 1) + rank_bytes(s, &rs, &im->mid, 1) +
	          rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
}

/* The bytes a two-phase schedule holds besides its own: its inputs and
 * result in their placements. */
static double twophase_fixed(Search *s, int t, const Impl *im)
{
	return rank_bytes(s, in_type(s, t, 0), in_place(s, t, im, 0), 1) +
	       rank_bytes(s, in_type(s, t, 1), in_place(s, t, im, 1), 1) +
	       rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
}

static void c_twophase(Search *s, int t, Impl *im)
{
	const TpSched *ts = im->tp;
	im->cost = (Cost){ts->seconds, ts->floats, ts->bytes, ts->flops, 0};      /* work: offer's */
	im->mem = twophase_fixed(s, t, im) + ts->mem;
}

static void c_gather(Search *s, int t, Impl *im)
{
	const TraOp *op = &s->tra->ops.v[t];
	const RelType *tt = in_type(s, t, 0), *it = in_type(s, t, 1), *ot = type_of(s, t);
	const Place *tp = in_place(s, t, im, 0), *ip = in_place(s, t, im, 1);
	im->cost = cost_gather(&s->cc, tt, tp, op->u.gather.dim, it, ip, ot);
	im->mem = rank_bytes(s, tt, tp, 1) + rank_bytes(s, it, ip, 1) + rank_bytes(s, ot, out_place(s, t, im), 1);
}

/* A scatter with a base is taken to add in place when it is the base's
 * only reader (opt_cost knows the plan's: ia_in_place). */
static void c_scatter(Search *s, int t, Impl *im)
{
	const TraOp *op = &s->tra->ops.v[t];
	const RelType *rt = in_type(s, t, 0), *it = in_type(s, t, 1), *ot = type_of(s, t);
	const Place *rp = in_place(s, t, im, 0), *ip = in_place(s, t, im, 1);
	int base = op->u.gather.base;
	ScatterInto into = base < 0 ? SCATTER_ZEROS : s->uses[base] == 1 ? SCATTER_IN_PLACE : SCATTER_COPY;
	im->cost = cost_scatter(&s->cc, rt, rp, it, ot, out_place(s, t, im), into);
	im->mem = rank_bytes(s, rt, rp, 1) + rank_bytes(s, it, ip, 1) +
	          (into == SCATTER_IN_PLACE ? 0 : rank_bytes(s, ot, out_place(s, t, im), 1));
}

static CostFn *const costs[NIMPLS] = {
#define IMPL(id, unit, strat, rules, build, cost, what) [IM_##id] = cost,
#include "optimizer/impls.def"
};

/* Cost candidate im of unit t and keep it, unless over the budget (a
 * param's own placement never is: it is the param). */
static void offer(Search *s, int t, Impl im)
{
	costs[im.kind](s, t, &im);
	if (!s->gen_all && s->budget > 0 && im.mem > s->budget && im.kind != IM_PARAM)
		return;
	/* the busiest rank's flops: the share of the result it holds (a
	 * result on every rank, or on one, was computed there whole) */
	im.cost.work = im.cost.flops * (im.out >= 0 ? cost_share(&s->cc, type_of(s, t), &s->dom[t].p[im.out]) : 1);
	im.cost = cost_scale(im.cost, s->times[t]);
	vec_push(&s->impls[t], im);
}

/* ---- matching: each unit's rows and the placements they take ---- */

/* A sampled join computing in placement jp takes its mask where the join's
 * tuples are (ia_mask_place), or everywhere: im->inpl[2], false when the
 * mask can be in neither. */
static bool mask_inpl(Search *s, const TraOp *j, const Place *jp, Impl *im)
{
	const JoinMask *m = &j->u.join.mask;
	RelType jt = ia_join_type(type_of(s, j->u.join.left), type_of(s, j->u.join.right), &j->u.join.on);
	Place want;
	int q = -1;
	if (ia_mask_place(m, &jt, jp, &want))
		q = dom_find(&s->dom[m->rel], type_of(s, m->rel), want);
	if (q < 0)
		q = dom_find(&s->dom[m->rel], type_of(s, m->rel), place_all());
	im->inpl[2] = q;
	return q >= 0;
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
	if (s->quick || s->cc.nsites < 2 || !opt_twophase_dense(s->tra, L) || !opt_twophase_dense(s->tra, R))
		return;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R), *ot = type_of(s, t);
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
				Impl im = {.kind = IM_TWOPHASE, .inpl = {a, b}, .out = o};
				double fixed = twophase_fixed(s, t, &im);
				if (s->budget > 0 && fixed >= s->budget)
					continue;
				im.tp = opt_twophase_candidate(&s->cc, &k, lt, rt, &j->u.join.on, op->u.agg.ngroup, op->u.agg.group, ot, pl, pr,
				                               po, s->budget > 0 ? s->budget - fixed : 0);
				if (im.tp)
					offer(s, t, im);
			}
		}
}

/* A contraction's rows by its inputs' placements and whether its sums are
 * complete where it computes. */
static const int contract_rows[][3] = {
	/* complete, partials shuffled, partials broadcast */
	[STRAT_LOCAL] = {IM_CONTRACT_LOCAL, -1, -1},
	[STRAT_BROADCAST] = {IM_BMM, IM_BMM_SHUF, IM_BMM_ALLRED},
	[STRAT_COPARTITION] = {IM_COPART, IM_CMM, IM_CMM_ALLRED},
};

/* Implementations of a contraction: aggregation t of join j. */
static void contraction_impls(Search *s, int t, const TraOp *op, const TraOp *j)
{
	int L = j->u.join.left, R = j->u.join.right;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R);
	RelType jt = ia_join_type(lt, rt, &j->u.join.on);
	Pair pairs[MAXDOM * MAXDOM];
	int np = join_pairs(s, j, pairs, MAXDOM * MAXDOM);
	const int ng = op->u.agg.ngroup;
	const int *group = op->u.agg.group;

	for (int k = 0; k < np; k++) {
		const Place *pl = &s->dom[L].p[pairs[k].l], *pr = &s->dom[R].p[pairs[k].r];
		const int *rows = contract_rows[pair_strategy(pl, pr)];
		Impl im = {.inpl = {pairs[k].l, pairs[k].r}, .side = pl->kind == PL_ALL ? 0 : 1};
		Place outp;
		if (j->u.join.mask.on) {
			/* sampled: its sums complete where the mask's blocks are */
			if (agg_complete(&jt, &pairs[k].jp, ng, group, &outp) && mask_inpl(s, j, &pairs[k].jp, &im)) {
				im.kind = (ImplKind)rows[0];
				im.out = find_out(s, t, outp);
				if (im.out >= 0)
					offer(s, t, im);
			}
			continue;
		}
		if (agg_complete(&jt, &pairs[k].jp, ng, group, &outp)) {
			im.kind = (ImplKind)rows[0];
			im.out = find_out(s, t, outp);
			if (im.out >= 0)
				offer(s, t, im);
			continue;
		}
		/* partial sums: to each placement of the result */
		const Dom *d = &s->dom[t];
		for (int i = 0; i < d->n; i++) {
			int row = rows[d->p[i].kind == PL_ALL ? 2 : 1];
			if (row < 0)
				tr_bug("partial sums of a contraction with both inputs everywhere");
			im.kind = (ImplKind)row;
			im.out = i;
			im.mid = d->p[i];
			offer(s, t, im);
		}
	}

	if (j->kind == TRA_CONV)
		return;         /* a convolution's kernel runs where trt_join meets its chunks */
	if (j->u.join.mask.on)
		return;         /* no schedule or replication samples */
	twophase_impls(s, t, op, j);

	/* RMM: the dims only one side has must all be grouped on and make the
	 * partitioning, one from each side */
	int lonly[MAXDIM], nlo = 0, ronly[MAXDIM], nro = 0;
	for (int d = 0; d < jt.nkey; d++) {
		bool inl = d < lt->nkey, matched = false;
		for (int m = 0; m < j->u.join.on.nmatch; m++)
			matched |= j->u.join.on.lkey[m] == d;
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
		if (oi >= 0)
			offer(s, t, (Impl){.kind = IM_RMM, .inpl = {ANYPL, ANYPL}, .out = oi, .mid = P});
	}
}

/* Implementations of an aggregation that absorbs no join. */
static void agg_impls(Search *s, int t, const TraOp *op)
{
	int in = op->u.agg.in;
	const RelType *it = type_of(s, in);
	const Dom *di = &s->dom[in], *d = &s->dom[t];
	for (int a = 0; a < di->n; a++) {
		Place outp;
		if (agg_complete(it, &di->p[a], op->u.agg.ngroup, op->u.agg.group, &outp)) {
			Impl im = {.kind = IM_AGG_LOCAL, .inpl = {a}, .out = find_out(s, t, outp)};
			if (im.out >= 0)
				offer(s, t, im);
			continue;
		}
		/* partials: two-phase (R2-5) to each placement of the result, or
		 * Table 1's shuffle first */
		for (int i = 0; i < d->n; i++) {
			ImplKind k = d->p[i].kind == PL_ALL ? IM_AGG_ALLRED : IM_AGG_TWOPHASE;
			offer(s, t, (Impl){.kind = k, .inpl = {a}, .out = i, .mid = d->p[i]});
		}
		for (int i = 0; i < d->n; i++) {
			if (d->p[i].kind != PL_PART || d->p[i].ndims == 0)
				continue;
			Place tin = {.kind = PL_PART, .ndims = d->p[i].ndims};
			for (int k = 0; k < d->p[i].ndims; k++)
				tin.dims[k] = op->u.agg.group[d->p[i].dims[k]];
			offer(s, t, (Impl){.kind = IM_AGG_SHUFFLE, .inpl = {a}, .out = i, .mid = tin});
		}
	}
}

/* A local join that no aggregation absorbs. */
static void join_impls(Search *s, int t, const TraOp *op)
{
	static const ImplKind rows[] = {
		[STRAT_LOCAL] = IM_JOIN_LOCAL, [STRAT_BROADCAST] = IM_JOIN_BCAST, [STRAT_COPARTITION] = IM_JOIN_COPART,
	};
	Pair pairs[MAXDOM * MAXDOM];
	int np = join_pairs(s, op, pairs, MAXDOM * MAXDOM);
	for (int k = 0; k < np; k++) {
		const Place *pl = &s->dom[op->u.join.left].p[pairs[k].l], *pr = &s->dom[op->u.join.right].p[pairs[k].r];
		Impl im = {.kind = rows[pair_strategy(pl, pr)], .inpl = {pairs[k].l, pairs[k].r},
		           .side = pl->kind == PL_ALL ? 0 : 1};
		if (op->u.join.mask.on && !mask_inpl(s, op, &pairs[k].jp, &im))
			continue;
		im.out = find_out(s, t, pairs[k].jp);
		if (im.out >= 0)
			offer(s, t, im);
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
		Impl im = {.kind = IM_UNARY, .inpl = {a}, .out = find_out(s, t, p)};
		if (im.out >= 0)
			offer(s, t, im);
	}
}

/* A gather: the table everywhere (replicated) or partitioned (looked up
 * in), for each placement of the index; the result is where the index is. */
static void gather_impls(Search *s, int t, const TraOp *op)
{
	int T = op->u.gather.src, I = op->u.gather.index;
	const Dom *dt = &s->dom[T], *di = &s->dom[I];
	for (int b = 0; b < di->n; b++) {
		int out = find_out(s, t, di->p[b]);
		if (out < 0)
			continue;
		for (int a = 0; a < dt->n; a++) {
			const Place *tp = &dt->p[a];
			if (tp->kind == PL_PARTIAL || (tp->kind == PL_PART && tp->ndims == 0 && rel_ntuples(type_of(s, T)) > 1))
				continue;
			ImplKind k = tp->kind == PL_ALL ? IM_GATHER_REPLICATE : IM_GATHER_LOOKUP;
			/* --strategy broadcast or lookup picks the row; others
			 * force the statement's joins alone */
			Strategy f = !s->gen_all && op->stmt >= 0 ? s->force[op->stmt] : STRAT_NONE;
			if ((f == STRAT_BROADCAST || f == STRAT_LOOKUP) && impl_strategy(k) != f)
				continue;
			offer(s, t, (Impl){.kind = k, .inpl = {a, b}, .out = out});
		}
	}
}

/* A scatter-add: rows with their index (placed alike, or the index
 * everywhere), into each placement of the result but partials; a base
 * placed as the result. */
static void scatter_impls(Search *s, int t, const TraOp *op)
{
	int R = op->u.gather.src, I = op->u.gather.index, B = op->u.gather.base;
	const Dom *dr = &s->dom[R], *di = &s->dom[I], *d = &s->dom[t];
	for (int a = 0; a < dr->n; a++)
		for (int b = 0; b < di->n; b++) {
			const Place *rp = &dr->p[a], *ip = &di->p[b];
			if (ip->kind != PL_ALL && !place_eq(rp, ip))
				continue;
			for (int o = 0; o < d->n; o++) {
				int c = B >= 0 ? find_out(s, B, d->p[o]) : ANYPL;
				if (d->p[o].kind != PL_PARTIAL && (B < 0 || c >= 0))
					offer(s, t, (Impl){.kind = IM_SCATTER, .inpl = {a, b, c}, .out = o});
			}
		}
}

/* A layout an input or param may start in for free: partitioned on some
 * key dims (everything on rank 0 only when it is one tuple anyway). */
bool free_layout(const RelType *t, const Place *p)
{
	return p->kind == PL_PART && (p->ndims > 0 || rel_ntuples(t) == 1);
}

/* The placements an input not pinned is read in: a free layout, or, under
 * --objective floats, also whole on every rank (the paper's convention:
 * an input is free where it is needed; cost_read prices its time). */
static bool input_layout(const Search *s, const RelType *t, const Place *p)
{
	return free_layout(t, p) || (s->o->objective == OBJ_FLOATS && p->kind == PL_ALL);
}

static const PlacePin *place_pin(Search *s, int tensor)
{
	for (int i = 0; i < s->o->nplacepins; i++)
		if (s->o->placepins[i].tensor == tensor)
			return &s->o->placepins[i];
	return NULL;
}

static void gen_impls(Search *s, int t)
{
	const TraOp *op = &s->tra->ops.v[t];
	switch (op->kind) {
	case TRA_INPUT: {
		const PlacePin *pin = place_pin(s, op->u.input.tensor);
		const Dom *d = &s->dom[t];
		Place pinned = pin ? place_norm(type_of(s, t), pin->place) : place_all();
		for (int i = 0; i < d->n; i++)
			if (pin ? place_eq(&pinned, &d->p[i]) : input_layout(s, type_of(s, t), &d->p[i]))
				offer(s, t, (Impl){.kind = IM_READ, .inpl = {ANYPL, ANYPL}, .out = i});
		break;
	}
	case TRA_INIT:
	case TRA_LOAD: {
		int i = find_out(s, t, s->varplace[op->u.init.tensor]);
		if (i < 0)
			tr_bug("param placement outside its domain");
		offer(s, t, (Impl){.kind = IM_PARAM, .inpl = {ANYPL, ANYPL}, .out = i});
		break;
	}
	case TRA_RANGE:
		/* any placement but partials, each made where it is */
		for (int i = 0; i < s->dom[t].n; i++)
			offer(s, t, (Impl){.kind = IM_RANGE, .inpl = {ANYPL, ANYPL}, .out = i});
		break;
	case TRA_COUNTER: {
		int i = find_out(s, t, place_all());
		if (i < 0)
			tr_bug("a counter cannot be everywhere");
		offer(s, t, (Impl){.kind = IM_COUNTER, .inpl = {ANYPL, ANYPL}, .out = i});
		break;
	}
	case TRA_SLICE: {
		int a = find_out(s, op->u.slice.in, place_all());
		int b = op->u.slice.off >= 0 ? find_out(s, op->u.slice.off, place_all()) : 0;
		if (a < 0 || b < 0)
			tr_bug("a slice's inputs cannot be everywhere");
		for (int i = 0; i < s->dom[t].n; i++)
			offer(s, t, (Impl){.kind = IM_SLICE, .inpl = {a, op->u.slice.off >= 0 ? b : ANYPL}, .out = i});
		/* or where the input is partitioned on other dims, placed alike */
		const Dom *din = &s->dom[op->u.slice.in];
		for (int i = 0; i < din->n; i++) {
			const Place *q = &din->p[i];
			bool along = false;
			for (int k = 0; k < q->ndims; k++)
				along |= q->dims[k] == op->u.slice.dim;
			int o = q->kind == PL_PART && !along ? find_out(s, t, *q) : -1;
			if (o >= 0)
				offer(s, t, (Impl){.kind = IM_SLICE, .inpl = {i, op->u.slice.off >= 0 ? b : ANYPL}, .out = o});
		}
		break;
	}
	case TRA_JOIN:
	case TRA_CONV:
		if (s->absorbed[t] < 0)
			join_impls(s, t, op);
		break;
	case TRA_AGG:
		for (int j = 0; j < s->n; j++)
			if (s->absorbed[j] == t)
				contraction_impls(s, t, op, &s->tra->ops.v[j]);
		if (s->absorbed[op->u.agg.in] != t)
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
	case TRA_GATHER:
		gather_impls(s, t, op);
		break;
	case TRA_SCATTER:
		scatter_impls(s, t, op);
		break;
	case TRA_OUTPUT:
	case TRA_PRINT:
		offer(s, t, (Impl){.kind = IM_SINK, .inpl = {ANYPL, ANYPL}, .out = -1});
		break;
	case TRA_STORE: {
		int in = op->u.store.in;
		int i = dom_find(&s->dom[in], type_of(s, in), s->varplace[op->u.store.tensor]);
		if (i < 0)
			tr_bug("param placement outside its value's domain");
		offer(s, t, (Impl){.kind = IM_SINK, .inpl = {i, ANYPL}, .out = -1});
		break;
	}
	case TRA_LOOP:
	case TRA_ENDLOOP:
		break;
	case TRA_GRAD:
		tr_bug("a grad op reached the search");
	}
}

/* Every op's implementations for the current params' placements, forcing
 * and budget: joins, aggregations and maps from their cache. */
void make_impls(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		TraOpKind k = s->tra->ops.v[t].kind;
		s->impls[t].n = 0;
		if (k != TRA_JOIN && k != TRA_CONV && k != TRA_AGG && k != TRA_MAP && k != TRA_REKEY && k != TRA_FILTER) {
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
		bool forceable = k == TRA_JOIN || k == TRA_CONV || (k == TRA_AGG && s->absorbed[op->u.agg.in] == t);
		for (int c = 0; c < s->cache[t].n; c++) {
			const Impl *im = &s->cache[t].v[c];
			if ((s->budget > 0 && im->mem > s->budget) || (forceable && !allowed(s, t, impl_strategy(im->kind), im->side)))
				continue;
			vec_push(&s->impls[t], *im);
		}
	}
}

