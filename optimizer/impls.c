/*
 * impls.c: the candidates of the plan search.
 *
 * For every TRA op (a unit: a join only a sum reads goes with it), the rows
 * of impls.def of its kind, each tried on the combinations of its inputs'
 * placements its `at` takes: a candidate with the placements it needs of
 * its inputs, the one it gives its result, its cost (impls.def's cost
 * column, once per candidate) and the memory it holds; and the placements
 * a relation may have (its Dom).  search.c's top comment lists the rows.
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

/* ---- units ---- */

/* The unit op t is (unit_kind: which rows implement it), or false when it
 * is none: a join a sum absorbs (its contraction is the sum's), a loop. */
static bool unit_of(Search *s, int t, UnitKind *u)
{
	const TraOp *op = &s->tra->ops.v[t];
	if (op->kind == TRA_LOOP || op->kind == TRA_ENDLOOP || s->absorbed[t] >= 0)
		return false;
	Unit un = {op, NULL, t};
	if (op->kind == TRA_AGG && s->absorbed[op->u.agg.in] == t)
		un.join = &s->tra->ops.v[op->u.agg.in];
	*u = unit_kind(&un);
	return true;
}

/* The join a unit's rows are about: the op, or a contraction's join. */
static const TraOp *join_of(Search *s, int t)
{
	const TraOp *op = &s->tra->ops.v[t];
	return op->kind == TRA_AGG ? &s->tra->ops.v[op->u.agg.in] : op;
}

/* Where join j computes on inputs placed l and r, in j's own numbering of
 * its output dims, or false when matching tuples would not meet: per unit
 * kind of two inputs (`meets`). */
typedef bool MeetFn(Search *s, const TraOp *j, const Place *l, const Place *r, Place *jp);

static bool meet_join(Search *s, const TraOp *j, const Place *l, const Place *r, Place *jp)
{
	return ia_join_place(type_of(s, j->u.join.left)->nkey, &j->u.join.on, l, r, jp);
}

/* A convolution no sum absorbs never has its right input partitioned on a
 * window dim that stands for its lab (a kernel's gradient): its halo is
 * that whole dim, one chunk, which the partitioning would put on one site. */
static bool meet_conv(Search *s, const TraOp *j, const Place *l, const Place *r, Place *jp)
{
	const RelType *rt = type_of(s, j->u.join.right);
	const Kernel *k = j->u.join.kernel;
	for (int w = 0; r->kind == PL_PART && w < k->nwin; w++)
		for (int i = 0; i < r->ndims; i++)
			if (ia_conv_own_left(k, w) && r->dims[i] == rt->chunkdim[k->win[w].dim])
				return false;
	return meet_join(s, j, l, r, jp);
}

/* A convolution fused with its sum matches a kernel's gradient's windows
 * to the left's own dims (its halo is keyed so: build.c's conv_halo_type),
 * then renumbers. */
static bool meet_tiled(Search *s, const TraOp *j, const Place *l, const Place *r, Place *jp)
{
	const RelType *lt = type_of(s, j->u.join.left), *rt = type_of(s, j->u.join.right);
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

static MeetFn *const meets[NUNITS] = {
	[U_JOIN] = meet_join,     [U_SAMPLED] = meet_join,          [U_CONTRACT] = meet_join,
	[U_SAMPLED_CONTRACT] = meet_join, [U_CONV] = meet_conv,     [U_CONV_CONTRACT] = meet_tiled,
};

static bool pair_place(Search *s, UnitKind u, const TraOp *j, const Place *l, const Place *r, Place *jp)
{
	if (!meets[u])
		tr_bug("a unit of one input placed as a pair");
	return meets[u](s, j, l, r, jp);
}

/* Where the join of a unit of kind u computes, given its inputs'
 * placements (a pair pair_place admits). */
static Place join_at(Search *s, UnitKind u, const TraOp *j, const Place *pl, const Place *pr)
{
	RelType jt = ia_join_type(type_of(s, j->u.join.left), type_of(s, j->u.join.right), &j->u.join.on);
	Place jp;
	if (!pair_place(s, u, j, pl, pr, &jp))
		tr_bug("a join's inputs placed where their tuples do not meet");
	return place_norm(&jt, jp);
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

/* A join's kernel where it computes, and the bytes of its inputs and
 * result (a sampled join's mask mt among them, NULL: none). */
static void join_rows(Search *s, int t, Impl *im, const RelType *mt)
{
	const TraOp *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	const Place *pl = in_place(s, t, im, 0), *pr = in_place(s, t, im, 1);
	Place jp = join_at(s, impl_unit(im->kind), j, pl, pr);
	im->mem = 0;
	im->cost = cost_join(&s->cc, j->u.join.kernel, lt, rt, &j->u.join.on, &jp, mt);
	im->mem += rank_bytes(s, lt, pl, 1) + rank_bytes(s, rt, pr, 1) + rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
	if (mt)
		im->mem += rank_bytes(s, mt, in_place(s, t, im, 2), 1);
}

/* a join, or a contraction whose sums are complete where it computes */
static void c_join(Search *s, int t, Impl *im)
{
	join_rows(s, t, im, NULL);
}

static void c_fused(Search *s, int t, Impl *im)
{
	join_rows(s, t, im, NULL);
}

/* a sampled join: the kernel at its mask's stored elements alone */
static void c_sampled(Search *s, int t, Impl *im)
{
	join_rows(s, t, im, in_type(s, t, 2));
}

/* A convolution of a unit of kind u where it computes (jp), and the halo
 * its right input (placed pr) needs (build.c's conv_halo), whose bytes
 * add to *mem. */
static Cost conv_cost(Search *s, int t, UnitKind u, const Place *pr, const Place *jp, double *mem)
{
	const TraOp *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	Cost c = cost_conv(&s->cc, j->u.join.kernel, lt, rt, &j->u.join.on, type_of(s, t), jp);
	TraOp jb = *j;
	jb.type = *type_of(s, (int)(j - s->tra->ops.v));
	RelType ht;
	JoinSpec on;
	if (conv_halo_type(&jb, lt, rt, u == U_CONV_CONTRACT, &ht, &on)) {
		c = cost_add(c, cost_halo(&s->cc, rt, pr, &ht));
		*mem += rank_bytes(s, &ht, pr, 1);
	}
	return c;
}

/* a convolution, or one fused with its sum complete where it computes */
static void c_conv(Search *s, int t, Impl *im)
{
	const Place *pl = in_place(s, t, im, 0), *pr = in_place(s, t, im, 1);
	UnitKind u = impl_unit(im->kind);
	Place jp = join_at(s, u, join_of(s, t), pl, pr);
	im->mem = 0;
	im->cost = conv_cost(s, t, u, pr, &jp, &im->mem);
	im->mem += rank_bytes(s, in_type(s, t, 0), pl, 1) + rank_bytes(s, in_type(s, t, 1), pr, 1) +
	           rank_bytes(s, type_of(s, t), out_place(s, t, im), 1);
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

/* A contraction whose join (its cost and bytes in im already) leaves
 * partial sums where it computes (jp): its inputs' bytes, the partials',
 * and their moving and adding up. */
static void fused_partials(Search *s, int t, Impl *im, const Place *jp)
{
	const TraOp *op = &s->tra->ops.v[t], *j = join_of(s, t);
	const RelType *lt = in_type(s, t, 0), *rt = in_type(s, t, 1);
	RelType jt = ia_join_type(lt, rt, &j->u.join.on);
	im->mem += rank_bytes(s, lt, in_place(s, t, im, 0), 1) + rank_bytes(s, rt, in_place(s, t, im, 1), 1);
	double copies = cost_partial_copies(&s->cc, &jt, jp, op->u.agg.ngroup, op->u.agg.group);
	im->mem += rank_bytes(s, type_of(s, t), &(Place){.kind = PL_PARTIAL}, copies);
	partial_tail(s, t, im, copies);
}

static void c_fused_partial(Search *s, int t, Impl *im)
{
	const TraOp *j = join_of(s, t);
	Place jp = join_at(s, U_CONTRACT, j, in_place(s, t, im, 0), in_place(s, t, im, 1));
	im->mem = 0;
	im->cost = cost_join(&s->cc, j->u.join.kernel, in_type(s, t, 0), in_type(s, t, 1), &j->u.join.on, &jp, NULL);
	fused_partials(s, t, im, &jp);
}

static void c_conv_partial(Search *s, int t, Impl *im)
{
	const Place *pr = in_place(s, t, im, 1);
	Place jp = join_at(s, U_CONV_CONTRACT, join_of(s, t), in_place(s, t, im, 0), pr);
	im->mem = 0;
	im->cost = conv_cost(s, t, U_CONV_CONTRACT, pr, &jp, &im->mem);
	fused_partials(s, t, im, &jp);
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
#define IMPL(id, unit, strat, at, rules, build, cost, what) [IM_##id] = cost,
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

/* ---- matching: impls.def's at column ---- */

/* One placement of a unit's inputs its rows are tried on: a pair's (its
 * strategy, and where the join computes), or a single input's; the
 * relation the unit's aggregation (if any) groups, placed by gp. */
typedef struct Combo {
	int in[MAXIN];          /* dom indices */
	Strategy strat;         /* a pair's; else STRAT_NONE */
	int side;               /* a pair's input everywhere (0 left, 1 right) */
	const RelType *gt;      /* the relation grouped, or NULL: no aggregation */
	Place gp;               /* where it is (a pair's: where the join computes) */
} Combo;

typedef void AtFn(Search *s, int t, ImplKind k, const Combo *c);

/* Does row k take combination c at all (a pair row of its strategy)? */
static bool takes(ImplKind k, const Combo *c)
{
	return c->strat == STRAT_NONE || c->strat == impl_strategy(k);
}

/* The unit's aggregation complete where its input is (its placement in
 * *out), or none: a join's result is where it computes. */
static bool complete(Search *s, int t, const Combo *c, Place *out)
{
	const TraOp *op = &s->tra->ops.v[t];
	if (!c->gt) {
		*out = c->gp;
		return true;
	}
	return agg_complete(c->gt, &c->gp, op->u.agg.ngroup, op->u.agg.group, out);
}

static Impl combo_impl(ImplKind k, const Combo *c)
{
	return (Impl){.kind = k, .inpl = {c->in[0], c->in[1], c->in[2]}, .side = c->side};
}

static void at_complete(Search *s, int t, ImplKind k, const Combo *c)
{
	Place outp;
	Impl im = combo_impl(k, c);
	if (!takes(k, c) || !complete(s, t, c, &outp) || (im.out = find_out(s, t, outp)) < 0)
		return;
	offer(s, t, im);
}

/* A sampled join computing where c says takes its mask where the join's
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

/* Pairs whose sums are complete where they compute, the mask placed with
 * the join's tuples: no schedule or replication samples. */
static void at_masked(Search *s, int t, ImplKind k, const Combo *c)
{
	Place outp;
	Impl im = combo_impl(k, c);
	if (!takes(k, c) || !complete(s, t, c, &outp) || !mask_inpl(s, join_of(s, t), &c->gp, &im) ||
	    (im.out = find_out(s, t, outp)) < 0)
		return;
	offer(s, t, im);
}

/* Partial sums moved to each placement of the result that is everywhere
 * (all) or not (!all), the move's target its mid. */
static void partials(Search *s, int t, ImplKind k, const Combo *c, bool all)
{
	Place outp;
	if (!takes(k, c) || complete(s, t, c, &outp))
		return;
	const Dom *d = &s->dom[t];
	for (int i = 0; i < d->n; i++)
		if ((d->p[i].kind == PL_ALL) == all) {
			Impl im = combo_impl(k, c);
			im.out = i;
			im.mid = d->p[i];
			offer(s, t, im);
		}
}

static void at_partial_all(Search *s, int t, ImplKind k, const Combo *c)
{
	partials(s, t, k, c, true);
}

static void at_partial_part(Search *s, int t, ImplKind k, const Combo *c)
{
	partials(s, t, k, c, false);
}

/* Table 1's aggregation: its input shuffled onto the group first, into
 * each partitioning of the result on some dims. */
static void at_regroup(Search *s, int t, ImplKind k, const Combo *c)
{
	const TraOp *op = &s->tra->ops.v[t];
	Place outp;
	if (complete(s, t, c, &outp))
		return;
	const Dom *d = &s->dom[t];
	for (int i = 0; i < d->n; i++) {
		if (d->p[i].kind != PL_PART || d->p[i].ndims == 0)
			continue;
		Place tin = {.kind = PL_PART, .ndims = d->p[i].ndims};
		for (int g = 0; g < d->p[i].ndims; g++)
			tin.dims[g] = op->u.agg.group[d->p[i].dims[g]];
		offer(s, t, (Impl){.kind = k, .inpl = {c->in[0]}, .out = i, .mid = tin});
	}
}

/* A map, rekey or filter: its input's placement carried through. */
static void at_carry(Search *s, int t, ImplKind k, const Combo *c)
{
	const TraOp *op = &s->tra->ops.v[t];
	Place p = c->gp;
	if (op->kind == TRA_REKEY && p.kind == PL_PART) {
		Place q = {.kind = PL_PART};
		for (int i = 0; i < p.ndims; i++) {
			int pos = -1;
			for (int d = 0; d < op->u.rekey.nkey; d++)
				if (op->u.rekey.keymap[d] == p.dims[i])
					pos = d;
			if (pos < 0)
				return;
			q.dims[q.ndims++] = pos;
		}
		p = q;
	}
	Impl im = {.kind = k, .inpl = {c->in[0]}, .out = find_out(s, t, p)};
	if (im.out >= 0)
		offer(s, t, im);
}

/* A gather: the result where the index (c->in[1]) is; --strategy
 * broadcast or lookup picks the row, others force the statement's joins
 * alone. */
static void gather(Search *s, int t, ImplKind k, const Combo *c)
{
	const TraOp *op = &s->tra->ops.v[t];
	int out = find_out(s, t, s->dom[op->u.gather.index].p[c->in[1]]);
	Strategy f = !s->gen_all && op->stmt >= 0 ? s->force[op->stmt] : STRAT_NONE;
	if (out < 0 || ((f == STRAT_BROADCAST || f == STRAT_LOOKUP) && impl_strategy(k) != f))
		return;
	offer(s, t, (Impl){.kind = k, .inpl = {c->in[0], c->in[1]}, .out = out});
}

static void at_table_all(Search *s, int t, ImplKind k, const Combo *c)
{
	if (s->dom[s->tra->ops.v[t].u.gather.src].p[c->in[0]].kind == PL_ALL)
		gather(s, t, k, c);
}

/* the table partitioned (on one site only when it is one tuple) */
static void at_table_part(Search *s, int t, ImplKind k, const Combo *c)
{
	int T = s->tra->ops.v[t].u.gather.src;
	const Place *tp = &s->dom[T].p[c->in[0]];
	if (tp->kind == PL_PART && (tp->ndims > 0 || rel_ntuples(type_of(s, T)) <= 1))
		gather(s, t, k, c);
}

/* A scatter-add: rows with their index (placed alike, or the index
 * everywhere), into each placement of the result but partials; a base
 * placed as the result. */
static void at_scatter(Search *s, int t, ImplKind k, const Combo *c)
{
	const TraOp *op = &s->tra->ops.v[t];
	int B = op->u.gather.base;
	const Place *rp = &s->dom[op->u.gather.src].p[c->in[0]], *ip = &s->dom[op->u.gather.index].p[c->in[1]];
	if (ip->kind != PL_ALL && !place_eq(rp, ip))
		return;
	const Dom *d = &s->dom[t];
	for (int o = 0; o < d->n; o++) {
		int b = B >= 0 ? find_out(s, B, d->p[o]) : ANYPL;
		if (d->p[o].kind != PL_PARTIAL && (B < 0 || b >= 0))
			offer(s, t, (Impl){.kind = k, .inpl = {c->in[0], c->in[1], b}, .out = o});
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

static void at_read(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	const PlacePin *pin = place_pin(s, s->tra->ops.v[t].u.input.tensor);
	const Dom *d = &s->dom[t];
	Place pinned = pin ? place_norm(type_of(s, t), pin->place) : place_all();
	for (int i = 0; i < d->n; i++)
		if (pin ? place_eq(&pinned, &d->p[i]) : input_layout(s, type_of(s, t), &d->p[i]))
			offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = i});
}

static void at_param(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	int i = find_out(s, t, s->varplace[s->tra->ops.v[t].u.init.tensor]);
	if (i < 0)
		tr_bug("param placement outside its domain");
	offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = i});
}

/* any placement but partials, each made where it is */
static void at_any(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	for (int i = 0; i < s->dom[t].n; i++)
		offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = i});
}

static void at_all(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	int i = find_out(s, t, place_all());
	if (i < 0)
		tr_bug("a counter cannot be everywhere");
	offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = i});
}

static void at_slice(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	const TraOp *op = &s->tra->ops.v[t];
	int a = find_out(s, op->u.slice.in, place_all());
	int b = op->u.slice.off >= 0 ? find_out(s, op->u.slice.off, place_all()) : 0;
	if (a < 0 || b < 0)
		tr_bug("a slice's inputs cannot be everywhere");
	int off = op->u.slice.off >= 0 ? b : ANYPL;
	for (int i = 0; i < s->dom[t].n; i++)
		offer(s, t, (Impl){.kind = k, .inpl = {a, off}, .out = i});
	/* or where the input is partitioned on other dims, placed alike */
	const Dom *din = &s->dom[op->u.slice.in];
	for (int i = 0; i < din->n; i++) {
		const Place *q = &din->p[i];
		bool along = false;
		for (int d = 0; d < q->ndims; d++)
			along |= q->dims[d] == op->u.slice.dim;
		int o = q->kind == PL_PART && !along ? find_out(s, t, *q) : -1;
		if (o >= 0)
			offer(s, t, (Impl){.kind = k, .inpl = {i, off}, .out = o});
	}
}

static void at_where(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = -1});
}

static void at_store(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	const TraOp *op = &s->tra->ops.v[t];
	int in = op->u.store.in;
	int i = dom_find(&s->dom[in], type_of(s, in), s->varplace[op->u.store.tensor]);
	if (i < 0)
		tr_bug("param placement outside its value's domain");
	offer(s, t, (Impl){.kind = k, .inpl = {i, ANYPL}, .out = -1});
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
static void at_twophase(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	const TraOp *op = &s->tra->ops.v[t], *j = join_of(s, t);
	int L = j->u.join.left, R = j->u.join.right;
	if (s->quick || s->cc.nsites < 2 || !opt_twophase_dense(s->tra, L) || !opt_twophase_dense(s->tra, R))
		return;
	const RelType *lt = type_of(s, L), *rt = type_of(s, R), *ot = type_of(s, t);
	Kernel kn = *j->u.join.kernel;
	kn.red = op->u.agg.agg;
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
				Impl im = {.kind = k, .inpl = {a, b}, .out = o};
				double fixed = twophase_fixed(s, t, &im);
				if (s->budget > 0 && fixed >= s->budget)
					continue;
				im.tp = opt_twophase_candidate(&s->cc, &kn, lt, rt, &j->u.join.on, op->u.agg.ngroup, op->u.agg.group, ot,
				                               pl, pr, po, s->budget > 0 ? s->budget - fixed : 0);
				if (im.tp)
					offer(s, t, im);
			}
		}
}

/* RMM: the dims only one side has must all be grouped on and make the
 * partitioning, one from each side. */
static void at_replicate(Search *s, int t, ImplKind k, const Combo *c)
{
	(void)c;
	const TraOp *op = &s->tra->ops.v[t], *j = join_of(s, t);
	const RelType *lt = type_of(s, j->u.join.left);
	RelType jt = ia_join_type(lt, type_of(s, j->u.join.right), &j->u.join.on);
	const int ng = op->u.agg.ngroup, *group = op->u.agg.group;
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
			offer(s, t, (Impl){.kind = k, .inpl = {ANYPL, ANYPL}, .out = oi, .mid = P});
	}
}

/* impls.def's at column: each value's function, and whether it is tried
 * on each placement of the unit's inputs (combo) or once, choosing them. */
typedef enum {
	AT_READ, AT_PARAM, AT_ANY, AT_ALL, AT_SLICE, AT_WHERE, AT_STORE, AT_CARRY, AT_COMPLETE, AT_MASKED,
	AT_PARTIAL_ALL, AT_PARTIAL_PART, AT_REGROUP, AT_TWOPHASE, AT_REPLICATE, AT_TABLE_ALL, AT_TABLE_PART,
	AT_SCATTER, NATS
} At;

static const struct {
	AtFn *fn;
	bool combo;
} ats[NATS] = {
	[AT_READ] = {at_read, false},           [AT_PARAM] = {at_param, false},
	[AT_ANY] = {at_any, false},             [AT_ALL] = {at_all, false},
	[AT_SLICE] = {at_slice, false},         [AT_WHERE] = {at_where, false},
	[AT_STORE] = {at_store, false},         [AT_CARRY] = {at_carry, true},
	[AT_COMPLETE] = {at_complete, true},    [AT_MASKED] = {at_masked, true},
	[AT_PARTIAL_ALL] = {at_partial_all, true}, [AT_PARTIAL_PART] = {at_partial_part, true},
	[AT_REGROUP] = {at_regroup, true},      [AT_TWOPHASE] = {at_twophase, false},
	[AT_REPLICATE] = {at_replicate, false}, [AT_TABLE_ALL] = {at_table_all, true},
	[AT_TABLE_PART] = {at_table_part, true}, [AT_SCATTER] = {at_scatter, true},
};

static const At row_at[NIMPLS] = {
#define IMPL(id, unit, strat, at, rules, build, cost, what) [IM_##id] = AT_##at,
#include "optimizer/impls.def"
};

/* The rows of unit kind u tried on combination c. */
static void try_rows(Search *s, int t, UnitKind u, const Combo *c)
{
	for (int k = 0; k < NIMPLS; k++)
		if (impl_unit((ImplKind)k) == u && ats[row_at[k]].combo)
			ats[row_at[k]].fn(s, t, (ImplKind)k, c);
}

/* ---- the combinations of a unit's inputs' placements ---- */

typedef void CombosFn(Search *s, int t, UnitKind u);

/* Pairs of input placements under which the join's tuples meet: (all,
 * all), (all, any), (any, all), and co-partitionings on the join keys. */
static void pairs(Search *s, int t, UnitKind u)
{
	const TraOp *op = &s->tra->ops.v[t], *j = join_of(s, t);
	int L = j->u.join.left, R = j->u.join.right;
	const Dom *dl = &s->dom[L], *dr = &s->dom[R];
	RelType jt = ia_join_type(type_of(s, L), type_of(s, R), &j->u.join.on);
	for (int a = 0; a < dl->n; a++)
		for (int b = 0; b < dr->n; b++) {
			const Place *pl = &dl->p[a], *pr = &dr->p[b];
			/* (part, part) pairs only when co-partitioned; skip the
			 * rest quickly */
			if (pl->kind == PL_PART && pr->kind == PL_PART && pl->ndims != pr->ndims)
				continue;
			Place jp;
			if (!pair_place(s, u, j, pl, pr, &jp))
				continue;
			Combo c = {.in = {a, b, ANYPL}, .strat = pair_strategy(pl, pr), .side = pl->kind == PL_ALL ? 0 : 1,
			           .gt = op != j ? &jt : NULL, .gp = place_norm(&jt, jp)};
			try_rows(s, t, u, &c);
		}
}

/* Each placement of the one input (an aggregation's, grouped). */
static void singles(Search *s, int t, UnitKind u)
{
	int in[MAXIN];
	unit_inputs(s, t, in);
	const Dom *d = &s->dom[in[0]];
	for (int a = 0; a < d->n; a++) {
		Combo c = {.in = {a, ANYPL, ANYPL}, .strat = STRAT_NONE, .gt = u == U_AGG ? type_of(s, in[0]) : NULL,
		           .gp = d->p[a]};
		try_rows(s, t, u, &c);
	}
}

/* A gather's: each placement of the index, then of the table. */
static void tables(Search *s, int t, UnitKind u)
{
	const TraOp *op = &s->tra->ops.v[t];
	const Dom *dt = &s->dom[op->u.gather.src], *di = &s->dom[op->u.gather.index];
	for (int b = 0; b < di->n; b++)
		for (int a = 0; a < dt->n; a++) {
			Combo c = {.in = {a, b, ANYPL}, .strat = STRAT_NONE};
			try_rows(s, t, u, &c);
		}
}

/* A scatter's: each placement of the rows, then of the index. */
static void rows_index(Search *s, int t, UnitKind u)
{
	const TraOp *op = &s->tra->ops.v[t];
	const Dom *dr = &s->dom[op->u.gather.src], *di = &s->dom[op->u.gather.index];
	for (int a = 0; a < dr->n; a++)
		for (int b = 0; b < di->n; b++) {
			Combo c = {.in = {a, b, ANYPL}, .strat = STRAT_NONE};
			try_rows(s, t, u, &c);
		}
}

/* Per unit kind: the combinations its rows are tried on (NULL: none),
 * whether its candidates depend neither on params' placements nor on
 * --strategy (made once per budget, then filtered), and whether
 * --strategy forces it. */
static const struct {
	CombosFn *combos;
	bool cached, forced;
} units[NUNITS] = {
	[U_INPUT] = {NULL, false, false},        [U_PARAM] = {NULL, false, false},
	[U_RANGE] = {NULL, false, false},        [U_COUNTER] = {NULL, false, false},
	[U_SLICE] = {NULL, false, false},        [U_UNARY] = {singles, true, false},
	[U_SINK] = {NULL, false, false},         [U_STORE] = {NULL, false, false},
	[U_JOIN] = {pairs, true, true},          [U_SAMPLED] = {pairs, true, true},
	[U_CONV] = {pairs, true, true},          [U_AGG] = {singles, true, false},
	[U_CONTRACT] = {pairs, true, true},      [U_SAMPLED_CONTRACT] = {pairs, true, true},
	[U_CONV_CONTRACT] = {pairs, true, true}, [U_GATHER] = {tables, false, false},
	[U_SCATTER] = {rows_index, false, false},
};

/* Unit t's candidates: its rows on each combination of its inputs'
 * placements, then the rows that choose their inputs' placements. */
static void gen_impls(Search *s, int t, UnitKind u)
{
	if (units[u].combos)
		units[u].combos(s, t, u);
	for (int k = 0; k < NIMPLS; k++)
		if (impl_unit((ImplKind)k) == u && !ats[row_at[k]].combo)
			ats[row_at[k]].fn(s, t, (ImplKind)k, NULL);
}

/* Every op's implementations for the current params' placements, forcing
 * and budget: joins, aggregations and maps from their cache. */
void make_impls(Search *s)
{
	for (int t = 0; t < s->n; t++) {
		UnitKind u;
		s->impls[t].n = 0;
		if (!unit_of(s, t, &u))
			continue;
		if (!units[u].cached) {
			gen_impls(s, t, u);
			continue;
		}
		if (!s->cached[t] || s->cache_budget[t] != s->budget) {
			s->gen_all = true;
			gen_impls(s, t, u);
			s->gen_all = false;
			vec_free(&s->cache[t]);
			s->cache[t] = s->impls[t];
			s->impls[t] = (Impls){0};
			s->cached[t] = true;
			s->cache_budget[t] = s->budget;
		}
		for (int c = 0; c < s->cache[t].n; c++) {
			const Impl *im = &s->cache[t].v[c];
			if ((s->budget > 0 && im->mem > s->budget) ||
			    (units[u].forced && !allowed(s, t, impl_strategy(im->kind), im->side)))
				continue;
			vec_push(&s->impls[t], *im);
		}
	}
}
