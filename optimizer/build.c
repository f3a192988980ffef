/*
 * build.c: the IA each implementation of impls.def builds.
 *
 * One builder per kind of right side; Table 1 (table1.c), the rewrites
 * (rules.c) and the search (search.c) all build through impl_build, each
 * after placing the unit's inputs as the row needs them (the search's
 * enforcers, Table 1's broadcast of a join's left, a rewrite's moves).
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

int emit_op(Emit *e, IaOp op)
{
	Buf why = {0};
	if (!ia_derive_place(e->p, &op, &op.place, &why)) {
		if (e->strict)
			tr_bug("an invalid %s: %s", ia_op_name(op.kind), why.s);
		e->failed = true;
	}
	buf_free(&why);
	return ia_push(e->p, op);
}

int emit_move(Emit *e, int in, const Place *to, int stmt, int tra)
{
	IaOp mv = {.stmt = stmt, .tra = tra, .type = e->p->ops.v[in].type};
	if (to->kind == PL_ALL) {
		mv.kind = IA_BCAST;
		mv.u.bcast.in = in;
	} else if (to->kind == PL_PART) {
		mv.kind = IA_SHUFFLE;
		mv.u.shuffle.in = in;
		mv.place = *to;
	} else {
		if (e->strict)
			tr_bug("a move to a %s placement", to->kind == PL_PARTIAL ? "partial" : "unknown");
		e->failed = true;
		return in;
	}
	return emit_op(e, mv);
}

/* ---- pieces ---- */

/* The unit's join (a contraction's, or the op) as IA op `kind` on inputs
 * l and r, sampled at mask op m when m >= 0. */
static IaOp join_op(const Unit *u, IaOpKind kind, int l, int r, int m)
{
	const TraOp *j = u->join ? u->join : u->op;
	IaOp op = {.kind = kind, .stmt = u->op->stmt, .tra = u->tra, .type = u->op->type};
	op.u.join.left = l;
	op.u.join.right = r;
	op.u.join.on.nmatch = j->u.join.on.nmatch;
	memcpy(op.u.join.on.lkey, j->u.join.on.lkey, sizeof op.u.join.on.lkey);
	memcpy(op.u.join.on.rkey, j->u.join.on.rkey, sizeof op.u.join.on.rkey);
	op.u.join.ngroup = -1;
	op.u.join.kernel = j->u.join.kernel;
	if (m >= 0) {
		op.u.join.mask = j->u.join.mask;
		op.u.join.mask.rel = m;
	}
	return op;
}

/*
 * The halo a convolution j needs of its right input (type rt; lt the
 * left's): along each window dim that is blocked, or whose output dim is,
 * the rows each output chunk reads beyond its own block (ia_conv_reach),
 * the chunk keyed and blocked as the output dim.  A window whose own label
 * is the left's (a kernel's gradient: the dim stands for the lab in the
 * output) reads, when `tiled` (the conv is fused with its sum), the halo
 * of the left's own chunk of the same key: keyed and blocked as the left's
 * own dim, matched to it in *on (j's keys otherwise); else the whole dim,
 * one chunk.  False when every window dim is one chunk in X and in the
 * output: the kernel reads X's chunk as it is.
 */
bool conv_halo_type(const TraOp *j, const RelType *lt, const RelType *rt, bool tiled, RelType *ht, JoinSpec *on)
{
	*on = j->u.join.on;
	const Kernel *k = j->u.join.kernel;
	const RelType *jt = &j->type;
	bool any = false;
	*ht = *rt;
	ht->holes = ht->sparse = false; /* made dense and whole first (codegen/body.c's read_kind) */
	ht->density = 1;
	for (int w = 0; w < k->nwin; w++) {
		int d = rt->chunkdim[k->win[w].dim], o = ia_join_out_dim(lt->nkey, &j->u.join.on, d);
		int own = ia_conv_own_dim(k, lt, w);
		if (own >= 0 && tiled) {
			if (rel_frontier(rt, d) == 1 && rel_frontier(lt, own) == 1)
				continue;
			any = true;
			ht->extent[d] = lt->extent[own];
			ht->block[d] = lt->block[own];
			ht->hext[d] = rt->extent[d];
			ia_conv_reach(k, lt, jt, w, &ht->hlo[d], &ht->hhi[d]);
			on->lkey[on->nmatch] = own;
			on->rkey[on->nmatch++] = d;
			continue;
		}
		if (rel_frontier(rt, d) == 1 && (own >= 0 || rel_frontier(jt, o) == 1))
			continue;
		any = true;
		ht->extent[d] = jt->extent[o];
		ht->block[d] = jt->block[o];
		ht->hext[d] = rt->extent[d];
		if (own >= 0) {
			ht->block[d] = ht->extent[d];
			ht->hlo[d] = 0;
			ht->hhi[d] = rt->extent[d];
		} else {
			ia_conv_reach(k, lt, jt, w, &ht->hlo[d], &ht->hhi[d]);
		}
	}
	return any;
}

/* A join output dim of keys `from` as a dim of keys `to` (nl left dims):
 * -1 where it is a right dim `to` matches. */
int conv_join_dim(int nl, const JoinSpec *from, const JoinSpec *to, int dim, int nright)
{
	if (dim < nl)
		return dim;
	for (int rd = 0; rd < nright; rd++)
		if (ia_join_out_dim(nl, from, rd) == dim) {
			for (int m = 0; m < to->nmatch; m++)
				if (to->rkey[m] == rd)
					return -1;
			return ia_join_out_dim(nl, to, rd);
		}
	return dim;
}

/* An op of p the same as halo h (its input, type and placement) that an op
 * appended now may read: not inside a loop closed since.  -1 if none. */
static int same_halo(const IaPlan *p, const IaOp *h)
{
	int depth = 0;          /* loops closed between op i and the end */
	for (int i = p->ops.n - 1; i >= 0; i--) {
		const IaOp *o = &p->ops.v[i];
		if (o->kind == IA_ENDLOOP)
			depth++;
		else if (o->kind == IA_LOOP && depth > 0)
			depth--;
		else if (depth == 0 && o->kind == IA_HALO && o->u.halo.in == h->u.halo.in &&
		         rel_type_eq(&o->type, &h->type) && place_eq(&o->place, &h->place))
			return i;
	}
	return -1;
}

/* A convolution op with the halo its right input needs: the halo op
 * inserted, its keys and group made to fit a tiled window.  A halo made
 * already is read again (the forward conv's of X serves dK's). */
static void conv_halo(Emit *e, const Unit *u, IaOp *op)
{
	const TraOp *j = u->join ? u->join : u->op;
	IaOp h = {.kind = IA_HALO, .stmt = u->op->stmt, .tra = u->tra};
	RelType lt = e->p->ops.v[op->u.join.left].type, rt = e->p->ops.v[op->u.join.right].type;
	JoinSpec on;
	if (!conv_halo_type(j, &lt, &rt, op->u.join.ngroup >= 0, &h.type, &on))
		return;
	for (int g = 0; g < op->u.join.ngroup; g++)
		op->u.join.group[g] = conv_join_dim(lt.nkey, &op->u.join.on, &on, op->u.join.group[g], rt.nkey);
	op->u.join.on = on;
	h.u.halo.in = op->u.join.right;
	h.place = e->p->ops.v[h.u.halo.in].place;
	int again = same_halo(e->p, &h);
	op->u.join.right = again >= 0 ? again : emit_op(e, h);
}

/* A contraction's join fused with its aggregation (F-1). */
static IaOp fused_op(Emit *e, const Unit *u, IaOpKind kind, int l, int r, int m)
{
	IaOp f = join_op(u, kind, l, r, m);
	f.u.join.ngroup = u->op->u.agg.ngroup;
	memcpy(f.u.join.group, u->op->u.agg.group, sizeof f.u.join.group);
	f.u.join.kernel = kernel_clone(e->p->arena, f.u.join.kernel);
	f.u.join.kernel->red = u->op->u.agg.agg;
	return f;
}

/* The unit's aggregation of op `in`: on its group, or (identity) on every
 * key dim of partial results already keyed like the result. */
static int agg_op(Emit *e, int in, const Unit *u, bool identity)
{
	const TraOp *t = u->op;
	IaOp op = {.kind = IA_AGG, .stmt = t->stmt, .tra = u->tra, .type = t->type};
	op.u.agg.in = in;
	op.u.agg.ngroup = t->u.agg.ngroup;
	op.u.agg.agg = t->u.agg.agg;
	for (int g = 0; g < t->u.agg.ngroup; g++)
		op.u.agg.group[g] = identity ? g : t->u.agg.group[g];
	return emit_op(e, op);
}

int impl_finish_partial(Emit *e, int part, const Place *mid, const Unit *u)
{
	return agg_op(e, emit_move(e, part, mid, u->op->stmt, u->tra), u, true);
}

/* ---- the builders ---- */

typedef int BuildFn(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp);

static int b_source(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)x, (void)mid, (void)tp;
	const TraOp *t = u->op;
	IaOp ia = {.stmt = t->stmt, .tra = u->tra, .type = t->type};
	if (t->kind != TRA_INPUT) {
		ia.kind = t->kind == TRA_INIT ? IA_INIT : IA_LOAD;
		ia.u.init.tensor = t->u.init.tensor;
		return emit_op(e, ia);
	}
	ia.kind = IA_READ;
	ia.u.read.tensor = t->u.input.tensor;
	ia.place = *out;                /* PL_ALL: every rank reads the whole file */
	return emit_op(e, ia);
}

/* Every site makes the chunks its placement gives it: nothing to move. */
static int b_range(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)x, (void)mid, (void)tp;
	IaOp ia = {.kind = IA_RANGE, .stmt = u->op->stmt, .tra = u->tra, .type = u->op->type, .place = *out};
	return emit_op(e, ia);
}

static int b_counter(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)x, (void)mid, (void)out, (void)tp;
	IaOp ia = {.kind = IA_COUNTER, .stmt = u->op->stmt, .tra = u->tra, .type = u->op->type};
	ia.u.counter.depth = u->op->u.counter.depth;
	return emit_op(e, ia);
}

/* Each site cuts the chunks its placement gives it: nothing to move. */
static int b_slice(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)tp;
	IaOp ia = {.kind = IA_SLICE, .stmt = u->op->stmt, .tra = u->tra, .type = u->op->type, .place = *out};
	ia.u.slice.in = x[0];
	ia.u.slice.off = u->op->u.slice.off >= 0 ? x[1] : -1;
	ia.u.slice.dim = u->op->u.slice.dim;
	ia.u.slice.shift = u->op->u.slice.shift;
	ia.u.slice.stride = u->op->u.slice.stride;
	ia.u.slice.scatter = u->op->u.slice.scatter;
	return emit_op(e, ia);
}

static int b_sink(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	const TraOp *t = u->op;
	IaOp ia = {.stmt = t->stmt, .tra = u->tra, .type = t->type};
	if (t->kind == TRA_OUTPUT) {
		ia.kind = IA_WRITE;
		ia.u.write.in = x[0];
		ia.u.write.tensor = t->u.output.tensor;
	} else {
		ia.kind = t->kind == TRA_PRINT ? IA_PRINT : IA_STORE;
		ia.u.store.in = x[0];
		ia.u.store.tensor = t->u.store.tensor;
	}
	emit_op(e, ia);
	return -1;
}

static int b_unary(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	const TraOp *t = u->op;
	IaOp ia = {.stmt = t->stmt, .tra = u->tra, .type = t->type};
	switch (t->kind) {
	case TRA_MAP:
		ia.kind = IA_MAP;
		ia.u.map.in = x[0];
		ia.u.map.nkey = t->type.nkey;
		for (int d = 0; d < t->type.nkey; d++)
			ia.u.map.keymap[d] = d;
		ia.u.map.kernel = t->u.map.kernel;
		break;
	case TRA_REKEY:
		ia.kind = IA_MAP;
		ia.u.map.in = x[0];
		ia.u.map.nkey = t->u.rekey.nkey;
		memcpy(ia.u.map.keymap, t->u.rekey.keymap, sizeof ia.u.map.keymap);
		ia.u.map.kernel = NULL;
		break;
	case TRA_FILTER:
		ia.kind = IA_FILTER;
		ia.u.filter.in = x[0];
		ia.u.filter.pred = t->u.filter.pred;
		break;
	default:
		tr_bug("%s is not a unary op", tra_op_name(t->kind));
	}
	return emit_op(e, ia);
}

static int b_join(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return emit_op(e, join_op(u, IA_JOIN, x[0], x[1], -1));
}

/* The join at its mask's elements alone (x[2]). */
static int b_sampled(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return emit_op(e, join_op(u, IA_JOIN, x[0], x[1], x[2]));
}

/* The halo of the right input, then the windowed join. */
static int b_conv(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	IaOp op = join_op(u, IA_CONV, x[0], x[1], -1);
	conv_halo(e, u, &op);
	return emit_op(e, op);
}

static int b_agg_local(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return agg_op(e, x[0], u, false);
}

static int b_agg_shuffle(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)out, (void)tp;
	return agg_op(e, emit_move(e, x[0], mid, u->op->stmt, u->tra), u, false);
}

static int b_agg_partial(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)out, (void)tp;
	return impl_finish_partial(e, agg_op(e, x[0], u, false), mid, u);
}

static int b_fused(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return emit_op(e, fused_op(e, u, IA_JOIN, x[0], x[1], -1));
}

static int b_sampled_fused(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return emit_op(e, fused_op(e, u, IA_JOIN, x[0], x[1], x[2]));
}

static int b_fused_partial(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)out, (void)tp;
	return impl_finish_partial(e, emit_op(e, fused_op(e, u, IA_JOIN, x[0], x[1], -1)), mid, u);
}

/* A convolution fused with its sum: the halo (a kernel's gradient's
 * window keyed by the left's own dim, tiled), then the windowed join. */
static int b_conv_fused(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	IaOp op = fused_op(e, u, IA_CONV, x[0], x[1], -1);
	conv_halo(e, u, &op);
	return emit_op(e, op);
}

static int b_conv_partial(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)out, (void)tp;
	IaOp op = fused_op(e, u, IA_CONV, x[0], x[1], -1);
	conv_halo(e, u, &op);
	return impl_finish_partial(e, emit_op(e, op), mid, u);
}

/* RMM's key maps: join-space dim o is the left's dim lmap[o] and the
 * right's rmap[o], or -1 where the side is duplicated along it. */
void rmm_keymaps(const TraOp *j, const RelType *lt, const RelType *rt, const RelType *jt, int *lmap, int *rmap)
{
	for (int o = 0; o < jt->nkey; o++) {
		lmap[o] = o < lt->nkey ? o : -1;
		rmap[o] = -1;
	}
	for (int d = 0; d < rt->nkey; d++)
		rmap[ia_join_out_dim(lt->nkey, &j->u.join.on, d)] = d;
}

/* A side replicated into the join space: its key dims placed by keymap,
 * its chunks unchanged. */
RelType rep_type(const RelType *jt, const RelType *st, const int *keymap)
{
	RelType r = *jt;
	r.dtype = st->dtype;
	r.sparse = st->sparse;
	r.holes = st->holes;
	r.density = st->density;
	r.nchunk = st->nchunk;
	for (int c = 0; c < st->nchunk; c++)
		for (int o = 0; o < jt->nkey; o++)
			if (keymap[o] == st->chunkdim[c])
				r.chunkdim[c] = o;
	return r;
}

/* RMM's replication of one side (type st) into the join space. */
static int replicate(Emit *e, const Unit *u, int in, const RelType *st, const RelType *jt, const int *keymap)
{
	IaOp op = {.kind = IA_MAP, .stmt = u->op->stmt, .tra = u->tra, .type = rep_type(jt, st, keymap)};
	op.u.map.in = in;
	op.u.map.nkey = jt->nkey;
	memcpy(op.u.map.keymap, keymap, sizeof op.u.map.keymap);
	op.u.map.kernel = NULL;
	return emit_op(e, op);
}

static int b_rmm(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)out, (void)tp;
	const TraOp *j = u->join;
	/* copies: pushing ops moves the plan's */
	RelType lt = e->p->ops.v[x[0]].type, rt = e->p->ops.v[x[1]].type;
	RelType jt = ia_join_type(&lt, &rt, &j->u.join.on);
	int lmap[MAXDIM], rmap[MAXDIM];
	rmm_keymaps(j, &lt, &rt, &jt, lmap, rmap);
	int lr = replicate(e, u, x[0], &lt, &jt, lmap);
	int rr = replicate(e, u, x[1], &rt, &jt, rmap);
	int ls = emit_move(e, lr, mid, u->op->stmt, u->tra);
	int rs = emit_move(e, rr, mid, u->op->stmt, u->tra);
	IaOp f = fused_op(e, u, IA_JOIN, ls, rs, -1);
	f.u.join.on.nmatch = jt.nkey;
	for (int d = 0; d < jt.nkey; d++)
		f.u.join.on.lkey[d] = f.u.join.on.rkey[d] = d;
	return emit_op(e, f);
}

static int b_twophase(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid;
	IaOp f = fused_op(e, u, IA_TWOPHASE, x[0], x[1], -1);
	f.place = *out;
	f.u.join.sched = tp;
	return emit_op(e, f);
}

/* A gather or scatter op of TRA op t's table, index and tensors, on
 * inputs x (the table or rows, then the index, then a scatter's base), in
 * placement p. */
static int emit_gather_op(Emit *e, const Unit *u, IaOpKind kind, const int *x, Place p)
{
	const TraOp *t = u->op;
	IaOp ia = {.kind = kind, .stmt = t->stmt, .tra = u->tra, .type = t->type, .place = p};
	ia.u.gather.src = x[0];
	ia.u.gather.index = x[1];
	ia.u.gather.base = t->kind == TRA_SCATTER && t->u.gather.base >= 0 ? x[2] : -1;
	ia.u.gather.scale = t->u.gather.scale;
	ia.u.gather.dim = t->u.gather.dim;
	ia.u.gather.tensor = t->u.gather.tensor;
	ia.u.gather.itensor = t->u.gather.itensor;
	return emit_op(e, ia);
}

/* A look-up where the index is: local when the table is everywhere
 * (GATHER_REPLICATE), else with requests to the rows' owners (LOOKUP). */
static int b_gather(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)out, (void)tp;
	return emit_gather_op(e, u, e->p->ops.v[x[0]].place.kind == PL_ALL ? IA_GATHER : IA_LOOKUP, x, (Place){0});
}

/* A scatter-add into the result's placement `out` (where its base is). */
static int b_scatter(Emit *e, const Unit *u, const int *x, const Place *mid, const Place *out, const TpSched *tp)
{
	(void)mid, (void)tp;
	return emit_gather_op(e, u, IA_SCATTER, x, *out);
}

/* ---- the table ---- */

static const struct {
	const char *name, *what;
	UnitKind unit;
	Strategy strat;
	unsigned rules;
	BuildFn *build;
} impls[NIMPLS] = {
#define IMPL(id, unit, strat, at, rules, build, cost, what) \
	[IM_##id] = {#id, what, U_##unit, STRAT_##strat, rules, build},
#include "optimizer/impls.def"
};

const char *impl_name(ImplKind k)
{
	return impls[k].name;
}

const char *impl_what(ImplKind k)
{
	return impls[k].what;
}

UnitKind impl_unit(ImplKind k)
{
	return impls[k].unit;
}

Strategy impl_strategy(ImplKind k)
{
	return impls[k].strat;
}

unsigned impl_rules(ImplKind k)
{
	return impls[k].rules;
}

UnitKind unit_kind(const Unit *u)
{
	const TraOp *t = u->join ? u->join : u->op;
	switch (t->kind) {
	case TRA_INPUT:
		return U_INPUT;
	case TRA_INIT:
	case TRA_LOAD:
		return U_PARAM;
	case TRA_RANGE:
		return U_RANGE;
	case TRA_COUNTER:
		return U_COUNTER;
	case TRA_SLICE:
		return U_SLICE;
	case TRA_MAP:
	case TRA_REKEY:
	case TRA_FILTER:
		return U_UNARY;
	case TRA_OUTPUT:
	case TRA_PRINT:
		return U_SINK;
	case TRA_STORE:
		return U_STORE;
	case TRA_JOIN:
		if (t->u.join.mask.on)
			return u->join ? U_SAMPLED_CONTRACT : U_SAMPLED;
		return u->join ? U_CONTRACT : U_JOIN;
	case TRA_CONV:
		return u->join ? U_CONV_CONTRACT : U_CONV;
	case TRA_AGG:
		return U_AGG;
	case TRA_GATHER:
		return U_GATHER;
	case TRA_SCATTER:
		return U_SCATTER;
	case TRA_LOOP:
	case TRA_ENDLOOP:
	case TRA_GRAD:
		break;
	}
	tr_bug("a %s op is no unit", tra_op_name(t->kind));
}

int impl_build(Emit *e, ImplKind k, const Unit *u, const int *x, const Place *mid, const Place *out,
               const TpSched *tp)
{
	if (unit_kind(u) != impls[k].unit)
		tr_bug("%s built for a unit it does not implement", impls[k].name);
	return impls[k].build(e, u, x, mid, out, tp);
}
