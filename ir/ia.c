/*
 * ia.c: the implementation algebra: placements and the physical plan.
 *
 * An IA plan is an array of ops in topological order, each with its output
 * relation's type and placement.  The placement says where every tuple lives
 * as a pure function of its key (PL_ALL, PL_PART), or that the relation is a
 * set of per-site partial aggregates still to be combined (PL_PARTIAL).
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ops.def's IA table: each op's name, whether it moves tuples, its input
 * fields and its kernel's (0: none). */
static const struct {
	const char *name;
	bool moves;
	InField in[MAXIN];
	size_t kernel;
} ia_ops[] = {
#define OP_FIELDS IaOp
#define IA_OP(n, s, mv, in, k, m) [IA_##n] = {s, mv, INS in, k},
#include "ops.def"
};

const char *ia_op_name(IaOpKind k)
{
	return ia_ops[k].name;
}

bool ia_op_moves(IaOpKind k)
{
	return ia_ops[k].moves;
}

/* ---- placements ---- */

Place place_all(void)
{
	return (Place){.kind = PL_ALL};
}

Place place_part(int ndims, const int *dims)
{
	Place p = {.kind = PL_PART, .ndims = ndims};
	if (ndims)      /* dims may be NULL for a scalar */
		memcpy(p.dims, dims, ndims * sizeof *dims);
	return p;
}

Place place_partial(void)
{
	return (Place){.kind = PL_PARTIAL};
}

int place_site(const Place *p, const RelType *t, const int64_t *key, int nsites)
{
	if (p->kind != PL_PART)
		return -1;
	int64_t lin = 0;
	for (int i = 0; i < p->ndims; i++) {
		int d = p->dims[i];
		lin = (lin * (rel_frontier(t, d) % nsites) + key[d] % nsites) % nsites;
	}
	return (int)lin;
}

bool place_eq(const Place *a, const Place *b)
{
	if (a->kind != b->kind)
		return false;
	if (a->kind != PL_PART)
		return true;
	return a->ndims == b->ndims && !memcmp(a->dims, b->dims, a->ndims * sizeof *a->dims);
}

void place_print(Buf *b, const Place *p)
{
	switch (p->kind) {
	case PL_ALL:
		buf_puts(b, "all");
		return;
	case PL_PARTIAL:
		buf_puts(b, "partial");
		return;
	case PL_PART:
		buf_puts(b, "part(");
		buf_ints(b, p->ndims, p->dims, ",");
		buf_puts(b, ")");
		return;
	}
}

const char *strategy_name(Strategy s)
{
	switch (s) {
	case STRAT_NONE: return "none";
	case STRAT_LOCAL: return "local";
	case STRAT_BROADCAST: return "broadcast";
	case STRAT_COPARTITION: return "co-partition";
	case STRAT_REPLICATE: return "replicate";
	case STRAT_OTHER: return "other";
	case STRAT_TWOPHASE: return "two-phase";
	case STRAT_LOOKUP: return "lookup";
	}
	return "?";
}

#define STR_(x) #x
#define STR(x) STR_(x)

static const struct {
	const char *name, *order;
} objectives[NOBJECTIVES] = {
	[OBJ_SECONDS] = {"seconds", "predicted seconds, then floats moved"},
	[OBJ_FLOATS] = {"floats", "the busiest rank's flops (within " STR(OBJ_WORK_TIE_PCT) "%), floats moved, "
	                          "then predicted seconds"},
};

const char *objective_name(Objective o)
{
	return o >= 0 && o < NOBJECTIVES ? objectives[o].name : "?";
}

const char *objective_order(Objective o)
{
	return o >= 0 && o < NOBJECTIVES ? objectives[o].order : "?";
}

bool objective_parse(const char *s, Objective *o)
{
	for (int i = 0; i < NOBJECTIVES; i++)
		if (!strcmp(s, objectives[i].name)) {
			*o = (Objective)i;
			return true;
		}
	return false;
}

/* ---- the plan ---- */

IaPlan *ia_new(const TraProg *tra, int nranks)
{
	IaPlan *p = xcalloc(1, sizeof *p);
	p->arena = arena_new();
	p->tra = tra;
	p->nranks = nranks;
	for (int i = 0; i < tra->stmts.n; i++) {
		vec_push(&p->strategy, STRAT_NONE);
		vec_push(&p->rules, (const char *)NULL);
	}
	for (int i = 0; i < tra->tensors.n; i++) {
		const Tensor *t = &tra->tensors.v[i];
		int dim0 = 0;
		vec_push(&p->varplace, place_part(t->rank > 0, &dim0));
	}
	return p;
}

void ia_free(IaPlan *p)
{
	if (!p)
		return;
	vec_free(&p->ops);
	vec_free(&p->strategy);
	vec_free(&p->rules);
	vec_free(&p->varplace);
	vec_free(&p->alts);
	arena_free(p->arena);
	free(p);
}

int ia_push(IaPlan *p, IaOp op)
{
	vec_push(&p->ops, op);
	return p->ops.n - 1;
}

/* Per statement: the index of its last op (-1 if it has none). */
int *ia_stmt_last_ops(const IaPlan *p)
{
	int *last = xcalloc(p->tra->stmts.n + 1, sizeof *last);
	for (int s = 0; s < p->tra->stmts.n; s++)
		last[s] = -1;
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].stmt >= 0)
			last[p->ops.v[i].stmt] = i;
	return last;
}

void ia_loops(const IaPlan *p, IaLoops *l)
{
	int n = p->ops.n;
	l->loopof = xcalloc(n + 1, sizeof *l->loopof);
	l->parent = xcalloc(n + 1, sizeof *l->parent);
	l->endof = xcalloc(n + 1, sizeof *l->endof);
	l->dead_after = xcalloc(n + 1, sizeof *l->dead_after);
	l->times = xcalloc(n + 1, sizeof *l->times);
	for (int i = 0, cur = -1; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->kind == IA_ENDLOOP) {
			l->endof[cur] = i;
			cur = l->parent[cur];
		}
		l->loopof[i] = cur;
		l->times[i] = cur < 0 ? 1 : l->times[cur];
		if (op->kind == IA_LOOP) {
			l->parent[i] = cur;
			l->times[i] *= (double)op->u.loop.count;
			cur = i;
		}
	}
	for (int i = 0; i < n; i++) {
		l->dead_after[i] = i;
		int in[MAXIN];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			l->dead_after[in[j]] = i;
	}
	for (int i = 0; i < n; i++) {
		int outer = -1;         /* the outermost loop around the last reader that is not around i */
		for (int lp = l->loopof[l->dead_after[i]]; lp >= 0 && lp != l->loopof[i]; lp = l->parent[lp])
			outer = lp;
		if (outer >= 0)
			l->dead_after[i] = l->endof[outer];
	}
}

/* Can scatter i add into its base's chunks (IP_OWNED or IP_PARAM)?  The
 * base dies at i, is neither its rows nor its index, and is dense. */
static bool base_dies_here(const IaPlan *p, const IaLoops *l, int i)
{
	const IaOp *op = &p->ops.v[i];
	if (op->kind != IA_SCATTER || op->u.gather.base < 0)
		return false;
	int b = op->u.gather.base;
	const RelType *bt = &p->ops.v[b].type;
	return l->dead_after[b] == i && b != op->u.gather.src && b != op->u.gather.index && !bt->sparse && !bt->holes &&
	       place_eq(&p->ops.v[b].place, &op->place);
}

/* Scatter i in place on load b of param t: the chain of scatters each the
 * only reader of the one before, its end stored to t by the first op
 * after b that loads or stores t, all in one loop body, and no other load
 * of t alive while it runs.  Marks the chain and the store. */
static void param_chain(const IaPlan *p, const IaLoops *l, const int *nread, int i, InPlace *res)
{
	int n = p->ops.n, b = p->ops.v[i].u.gather.base, t = p->ops.v[b].u.init.tensor;
	int cur = i;
	for (;;) {
		int r = l->dead_after[cur];
		const IaOp *ro = &p->ops.v[r];
		if (nread[cur] != 1 || ro->kind != IA_SCATTER || ro->u.gather.base != cur || !base_dies_here(p, l, r) ||
		    l->loopof[r] != l->loopof[i])
			break;
		cur = r;
	}
	int s = -1;
	for (int j = b + 1; j < n && s < 0; j++) {
		const IaOp *o = &p->ops.v[j];
		if ((o->kind == IA_LOAD && o->u.init.tensor == t) || (o->kind == IA_STORE && o->u.store.tensor == t))
			s = j;
	}
	if (s < 0 || p->ops.v[s].kind != IA_STORE || p->ops.v[s].u.store.in != cur || l->loopof[s] != l->loopof[i] ||
	    l->dead_after[cur] != s)
		return;
	for (int j = 0; j < b; j++)
		if (p->ops.v[j].kind == IA_LOAD && p->ops.v[j].u.init.tensor == t && l->dead_after[j] >= i)
			return;
	for (int x = i;; x = l->dead_after[x]) {
		res[x] = IP_PARAM;
		if (x == cur)
			break;
	}
	res[s] = IP_KEPT;
}

InPlace *ia_in_place(const IaPlan *p, const IaLoops *l)
{
	int n = p->ops.n;
	InPlace *res = xcalloc(n + 1, sizeof *res);
	int *nread = xcalloc(n + 1, sizeof *nread);
	for (int i = 0; i < n; i++) {
		int in[MAXIN];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			nread[in[j]]++;
	}
	for (int i = 0; i < n; i++) {
		if (res[i] != IP_NONE || !base_dies_here(p, l, i))
			continue;
		int b = p->ops.v[i].u.gather.base;
		if (p->ops.v[b].kind == IA_LOAD)
			param_chain(p, l, nread, i, res);
		else if (res[b] != IP_PARAM)    /* (a param's storage only in its chain) */
			res[i] = IP_OWNED;
	}
	free(nread);
	return res;
}

/* The input op whose chunks' pattern sparse op a keeps (a sampled join's
 * mask, a join's or map's pattern input), or -1: a itself is a source. */
static int pattern_input(const IaPlan *p, int a)
{
	const IaOp *op = &p->ops.v[a];
	if (!op->type.sparse)
		return -1;
	if (op->kind == IA_JOIN && op->u.join.mask.on)
		return op->u.join.mask.rel;
	if (op->kind == IA_JOIN) {
		const RelType *in[2] = {&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type};
		int pat = kernel_sparse_pattern(op->u.join.kernel, in);
		return pat < 0 ? -1 : pat ? op->u.join.right : op->u.join.left;
	}
	if (op->kind == IA_MAP && op->u.map.kernel && op->u.map.nkey == op->type.nkey) {
		const RelType *in[1] = {&p->ops.v[op->u.map.in].type};
		for (int d = 0; d < op->u.map.nkey; d++)
			if (op->u.map.keymap[d] != d)
				return -1;
		return kernel_sparse_pattern(op->u.map.kernel, in) == 0 ? op->u.map.in : -1;
	}
	return -1;
}

bool ia_same_pattern(const IaPlan *p, int a, int m)
{
	for (int n = 0; a >= 0 && n <= p->ops.n; n++, a = pattern_input(p, a))
		if (a == m)
			return true;
	return false;
}

int ia_elementwise_in_place(const IaPlan *p, const IaLoops *l, int i)
{
	const IaOp *op = &p->ops.v[i];
	const Kernel *k = ia_op_kernel(op);
	bool sparse = op->type.sparse;
	if (!k || k->reduces || k->nwin || (op->kind == IA_JOIN && op->u.join.ngroup >= 0) ||
	    (op->kind == IA_JOIN && op->u.join.mask.on && !sparse) || (op->kind != IA_JOIN && op->kind != IA_MAP))
		return -1;
	int in[2] = {op->kind == IA_JOIN ? op->u.join.left : op->u.map.in, op->kind == IA_JOIN ? op->u.join.right : -1};
	int src = sparse ? pattern_input(p, i) : -1;
	if (sparse && src < 0)
		return -1;
	for (int s = 0; s < k->nin; s++)
		if (!sparse && p->ops.v[in[s]].type.sparse)
			return -1;      /* (a sparse input's kernel is not a loop nest on the chunks) */
	for (int s = 0; s < k->nin; s++) {
		const IaOp *x = &p->ops.v[in[s]];
		/* a sparse result in an input's chunks: one of its pattern (the
		 * same positions, stored alike), the output's element at each of
		 * the input's (codegen/sparse.c reads it by its position q) */
		bool layout = sparse ? x->type.sparse && rel_same_dims(&x->type, &op->type) && ia_same_pattern(p, in[s], src)
		                     : rel_same_layout(&x->type, &op->type);
		if (in[s] == in[1 - s] || x->kind == IA_LOAD || x->kind == IA_INIT || x->kind == IA_SCATTER ||
		    l->dead_after[in[s]] != i || !layout || k->nindim[s] != k->noutdim)
			continue;
		bool same = true;
		for (int c = 0; c < k->noutdim; c++)
			same &= k->inlab[s][c] == k->outlab[c];
		if (op->kind == IA_MAP) {
			same &= op->u.map.nkey == x->type.nkey;
			for (int d = 0; d < op->u.map.nkey; d++)
				same &= op->u.map.keymap[d] == d;
		} else if (s == 1) {    /* the output's key dim d is the right's d */
			for (int d = 0; d < x->type.nkey; d++)
				same &= ia_join_out_dim(p->ops.v[in[0]].type.nkey, &op->u.join.on, d) == d;
		}
		if (same)
			return s;
	}
	return -1;
}

bool loop_within(const int *parent, int inner, int outer)
{
	for (int l = inner;; l = parent[l]) {
		if (l == outer)
			return true;
		if (l < 0)
			return false;
	}
}

void ia_loops_free(IaLoops *l)
{
	free(l->loopof);
	free(l->parent);
	free(l->endof);
	free(l->dead_after);
	free(l->times);
}

int ia_inputs(const IaOp *op, int *in)
{
	return ir_inputs(op, ia_ops[op->kind].in, in);
}

Kernel *ia_op_kernel(const IaOp *op)
{
	return ir_kernel(op, ia_ops[op->kind].kernel);
}

bool ia_has_result(IaOpKind k)
{
	switch (k) {
	case IA_WRITE: case IA_STORE: case IA_PRINT: case IA_LOOP: case IA_ENDLOOP:
		return false;
	case IA_READ: case IA_BCAST: case IA_SHUFFLE: case IA_JOIN: case IA_AGG: case IA_MAP:
	case IA_FILTER: case IA_INIT: case IA_LOAD: case IA_RANGE: case IA_COUNTER: case IA_SLICE:
	case IA_TWOPHASE: case IA_GATHER: case IA_LOOKUP: case IA_SCATTER: case IA_CONV: case IA_HALO:
		return true;
	}
	return false;
}

bool ia_op_joins(IaOpKind k)
{
	switch (k) {
	case IA_JOIN: case IA_CONV: case IA_TWOPHASE:
		return true;
	case IA_READ: case IA_BCAST: case IA_SHUFFLE: case IA_AGG: case IA_MAP: case IA_FILTER: case IA_WRITE:
	case IA_INIT: case IA_LOAD: case IA_RANGE: case IA_COUNTER: case IA_SLICE: case IA_STORE: case IA_PRINT:
	case IA_LOOP: case IA_ENDLOOP: case IA_GATHER: case IA_LOOKUP: case IA_SCATTER: case IA_HALO:
		return false;
	}
	return false;
}

/* Where right key dim rdim lands in a join's output key: a matched dim is
 * the left's dim it matched; the others follow the left key in order. */
int ia_join_out_dim(int nleft, const JoinSpec *on, int rdim)
{
	int pos = nleft;
	for (int i = 0; i < on->nmatch; i++)
		if (on->rkey[i] == rdim)
			return on->lkey[i];
	for (int d = 0; d < rdim; d++) {
		bool matched = false;
		for (int i = 0; i < on->nmatch; i++)
			matched |= on->rkey[i] == d;
		if (!matched)
			pos++;
	}
	return pos;
}

/* The type of a join's key space (its output before any fused grouping):
 * left key ++ right key minus the matched dims.  No chunk dims. */
RelType ia_join_type(const RelType *l, const RelType *r, const JoinSpec *on)
{
	RelType jt = {.dtype = l->dtype, .nkey = l->nkey};
	memcpy(jt.extent, l->extent, sizeof jt.extent);
	memcpy(jt.block, l->block, sizeof jt.block);
	for (int d = 0; d < r->nkey; d++) {
		int o = ia_join_out_dim(l->nkey, on, d);
		if (o >= MAXDIM)
			continue;
		jt.extent[o] = r->extent[d];
		jt.block[o] = r->block[d];
		if (o >= jt.nkey)
			jt.nkey = o + 1;
	}
	return jt;
}

bool ia_conv_own_left(const Kernel *k, int w)
{
	int own = k->inlab[1][k->win[w].dim];
	for (int c = 0; c < k->nindim[0]; c++)
		if (k->inlab[0][c] == own)
			return true;
	return false;
}

int ia_conv_own_dim(const Kernel *k, const RelType *l, int w)
{
	int own = k->inlab[1][k->win[w].dim];
	for (int c = 0; c < k->nindim[0]; c++)
		if (k->inlab[0][c] == own)
			return l->chunkdim[c];
	return -1;
}

/* The lab runs over its whole extent (its dim's chunks' offsets add to
 * it, so the whole extent bounds what any chunk reads). */
void ia_conv_reach(const Kernel *k, const RelType *l, const RelType *out, int w, int64_t *lo, int64_t *hi)
{
	int lab = k->win[w].lab;
	int64_t n = 1;
	for (int c = 0; c < k->nindim[0]; c++)
		if (k->inlab[0][c] == lab)
			n = l->extent[l->chunkdim[c]];
	for (int c = 0; c < k->noutdim; c++)
		if (k->outlab[c] == lab)
			n = out->extent[out->chunkdim[c]];
	int64_t a = k->win[w].coef * (n - 1);
	int64_t first = (a < 0 ? a : 0) + k->win[w].shift, last = (a > 0 ? a : 0) + k->win[w].shift;
	*lo = first < 0 ? -first : 0;
	*hi = last > 0 ? last : 0;
}

/* ---- placement rules ---- */

/* The placement a group-by leaves: a partitioning that survives the grouping
 * is renumbered onto the group; one that is grouped away leaves partials. */
Place ia_agg_place(const RelType *t, const Place *in, int ngroup, const int *group)
{
	if (in->kind != PL_PART)
		return *in;
	Place p = {.kind = PL_PART};
	for (int i = 0; i < in->ndims; i++) {
		int pos = -1;
		for (int g = 0; g < ngroup; g++)
			if (group[g] == in->dims[i])
				pos = g;
		if (pos < 0) {
			if (rel_frontier(t, in->dims[i]) == 1)
				continue;       /* a singleton dim never changed the site */
			return place_partial();
		}
		p.dims[p.ndims++] = pos;
	}
	return p;
}

/* Where a local join computes, given its inputs' placements (neither of
 * partials): one side everywhere, or both partitioned on matching join
 * keys; false when matching tuples would not meet. */
bool ia_join_place(int nleft, const JoinSpec *on, const Place *l, const Place *r, Place *out)
{
	if (l->kind == PL_ALL && r->kind == PL_ALL) {
		*out = place_all();
		return true;
	}
	if (l->kind == PL_ALL) {
		*out = (Place){.kind = PL_PART, .ndims = r->ndims};
		for (int i = 0; i < r->ndims; i++)
			out->dims[i] = ia_join_out_dim(nleft, on, r->dims[i]);
		return true;
	}
	if (r->kind == PL_ALL) {
		*out = *l;
		return true;
	}
	if (l->ndims != r->ndims)
		return false;
	for (int i = 0; i < l->ndims; i++) {
		bool matched = false;
		for (int m = 0; m < on->nmatch; m++)
			matched |= on->lkey[m] == l->dims[i] && on->rkey[m] == r->dims[i];
		if (!matched)
			return false;
	}
	*out = *l;
	return true;
}

/* Where a sampled join's mask must be for a join computing in placement
 * jp (over join type jt): everywhere, or partitioned on the mask dims that
 * are jp's (dims of one block ignored); false when a partitioning dim of
 * jp is none of the mask's. */
bool ia_mask_place(const JoinMask *m, const RelType *jt, const Place *jp, Place *want)
{
	if (jp->kind == PL_ALL) {
		*want = place_all();
		return true;
	}
	if (jp->kind != PL_PART)
		return false;
	*want = (Place){.kind = PL_PART};
	for (int i = 0; i < jp->ndims; i++) {
		int d = -1;
		for (int k = 0; k < m->nkey; k++)
			if (m->key[k] == jp->dims[i])
				d = k;
		if (d < 0 && rel_frontier(jt, jp->dims[i]) != 1)
			return false;
		if (d >= 0)
			want->dims[want->ndims++] = d;
	}
	return true;
}

/* Is a mask placed mp where a join in placement jp finds its tuples? */
static bool mask_meets(const JoinMask *m, const RelType *mt, const Place *mp, const RelType *jt, const Place *jp)
{
	Place want;
	if (mp->kind == PL_ALL)
		return true;
	if (mp->kind != PL_PART || !ia_mask_place(m, jt, jp, &want))
		return false;
	int a[MAXDIM], na = 0, b[MAXDIM], nb = 0;
	for (int i = 0; i < mp->ndims; i++)
		if (rel_frontier(mt, mp->dims[i]) != 1)
			a[na++] = mp->dims[i];
	for (int i = 0; i < want.ndims; i++)
		if (rel_frontier(mt, want.dims[i]) != 1)
			b[nb++] = want.dims[i];
	if (na != nb)
		return false;
	for (int i = 0; i < na; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/*
 * The placement of a local op's output, derived from its inputs' placements;
 * false (with the reason in *why) when the op is not valid on them: a join
 * needs one side on every site or both sides partitioned on matching join
 * keys, and nothing but a shuffle or an aggregation may consume partials.
 */
static bool place_has(const Place *p, int dim)
{
	for (int i = 0; i < p->ndims; i++)
		if (p->dims[i] == dim)
			return true;
	return false;
}

/* What leaves the plan leaves whole, a param where it lives. */
static bool sink_place(const IaPlan *p, const IaOp *op, const IaOp *a, Place *out, Buf *why)
{
	if (a->place.kind == PL_PARTIAL) {
		buf_printf(why, "%s a relation of partial aggregates",
		           op->kind == IA_STORE ? "stores" : op->kind == IA_PRINT ? "prints" : "writes");
		return false;
	}
	if (op->kind == IA_STORE && op->u.store.tensor < p->varplace.n &&
	    !place_eq(&a->place, &p->varplace.v[op->u.store.tensor])) {
		buf_puts(why, "stores a relation in a placement other than the param's");
		return false;
	}
	*out = a->place;
	return true;
}

/* A slice is cut at an offset every rank knows (b) from a whole input on
 * every rank (any placement of the window), or from one partitioned on
 * other dims (the window placed alike): nothing moved. */
static bool slice_place(const IaOp *op, const IaOp *a, const IaOp *b, Place *out, Buf *why)
{
	if (b && b->place.kind != PL_ALL) {
		buf_puts(why, "slices at an offset not held by every site");
		return false;
	}
	if (a->place.kind == PL_PART && !place_has(&a->place, op->u.slice.dim)) {
		*out = a->place;
		return true;
	}
	if (a->place.kind != PL_ALL) {
		buf_puts(why, "slices a relation neither everywhere nor partitioned on other dims");
		return false;
	}
	if (op->place.kind == PL_PARTIAL) {
		buf_puts(why, "makes a slice as partials");
		return false;
	}
	*out = op->place;
	return true;
}

/* A map's keys renumber its input's partitioning, which it may not drop. */
static bool map_place(const IaOp *op, const IaOp *a, Place *out, Buf *why)
{
	if (a->place.kind != PL_PART) {
		*out = a->place;
		return true;
	}
	*out = (Place){.kind = PL_PART};
	for (int i = 0; i < a->place.ndims; i++) {
		int d = a->place.dims[i], pos = -1;
		for (int k = 0; k < op->u.map.nkey; k++)
			if (op->u.map.keymap[k] == d)
				pos = k;
		if (pos < 0 && rel_frontier(&a->type, d) != 1) {
			buf_printf(why, "drops partitioning key dim %d", d);
			return false;
		}
		if (pos >= 0)
			out->dims[out->ndims++] = pos;
	}
	return true;
}

/* A join (or convolution: its windows never partition) where its inputs
 * a, b and mask m (NULL: none) meet; fused with its aggregation, the
 * sums' placement. */
static bool join_place(const IaOp *op, const IaOp *a, const IaOp *b, const IaOp *m, Place *out, Buf *why)
{
	const Place *l = &a->place, *r = &b->place;
	Place j;
	if (l->kind == PL_PARTIAL || r->kind == PL_PARTIAL) {
		buf_puts(why, "joins a relation of partial aggregates");
		return false;
	}
	if (!ia_join_place(a->type.nkey, &op->u.join.on, l, r, &j)) {
		buf_puts(why, "joins two partitioned relations that are not co-partitioned on the join keys");
		return false;
	}
	/* the join's own output type, to know which dims are singletons */
	RelType jt = ia_join_type(&a->type, &b->type, &op->u.join.on);
	if (m && !mask_meets(&op->u.join.mask, &m->type, &m->place, &jt, &j)) {
		buf_puts(why, "samples at a mask placed where the join's tuples are not");
		return false;
	}
	if (op->u.join.ngroup < 0) {
		*out = j;
		return true;
	}
	*out = ia_agg_place(&jt, &j, op->u.join.ngroup, op->u.join.group);
	return true;
}

/* The schedule sends every chunk where it is needed, so any placement of
 * complete tuples will do; the result ends partitioned on the group as the
 * op says. */
static bool twophase_place(const IaOp *op, const IaOp *a, const IaOp *b, Place *out, Buf *why)
{
	if (a->place.kind == PL_PARTIAL || b->place.kind == PL_PARTIAL) {
		buf_puts(why, "runs a two-phase schedule over partial aggregates");
		return false;
	}
	if (op->place.kind != PL_PART) {
		buf_puts(why, "ends a two-phase schedule in a placement other than a partitioning");
		return false;
	}
	*out = op->place;
	return true;
}

/* A look-up's result is where the index is (its key dims come first). */
static bool gather_place(const IaOp *op, const IaOp *a, const IaOp *b, Place *out, Buf *why)
{
	if (a->place.kind == PL_PARTIAL || b->place.kind == PL_PARTIAL) {
		buf_puts(why, "looks up in or by a relation of partial aggregates");
		return false;
	}
	if (op->kind == IA_GATHER && a->place.kind != PL_ALL) {
		buf_puts(why, "gathers locally from a table that is not on every site");
		return false;
	}
	*out = b->place;
	return true;
}

/* Each rows tuple must meet its index tuple, keyed by the rows' first
 * dims; the result, and a base c, where the op says. */
static bool scatter_place(const IaOp *op, const IaOp *a, const IaOp *b, const IaOp *c, Place *out, Buf *why)
{
	if (a->place.kind == PL_PARTIAL || b->place.kind == PL_PARTIAL) {
		buf_puts(why, "scatters partial aggregates");
		return false;
	}
	if (b->place.kind != PL_ALL && !place_eq(&a->place, &b->place)) {
		buf_puts(why, "scatters rows not placed with their index");
		return false;
	}
	if (op->place.kind == PL_PARTIAL) {
		buf_puts(why, "scatters into partial aggregates");
		return false;
	}
	if (c && !place_eq(&c->place, &op->place)) {
		buf_puts(why, "scatters into a base placed elsewhere than its result");
		return false;
	}
	*out = op->place;
	return true;
}

bool ia_derive_place(const IaPlan *p, const IaOp *op, Place *out, Buf *why)
{
	int in[MAXIN];
	int n = ia_inputs(op, in);
	const IaOp *a = n > 0 ? &p->ops.v[in[0]] : NULL;
	const IaOp *b = n > 1 ? &p->ops.v[in[1]] : NULL;
	const IaOp *c = n > 2 ? &p->ops.v[in[2]] : NULL;       /* a mask, a base */

	switch (op->kind) {
	case IA_READ:
	case IA_RANGE:          /* made where its placement says, any placement */
	case IA_SHUFFLE:
	case IA_LOOP:
	case IA_ENDLOOP:
		*out = op->place;
		return true;
	case IA_INIT:
	case IA_LOAD:
		if (op->u.init.tensor < p->varplace.n && op->u.init.tensor >= 0)
			*out = p->varplace.v[op->u.init.tensor];
		else
			*out = op->place;
		return true;
	case IA_STORE:
	case IA_PRINT:
	case IA_WRITE:
		return sink_place(p, op, a, out, why);
	case IA_BCAST:
	case IA_COUNTER:        /* every rank knows the loop's iteration */
		*out = place_all();
		return true;
	case IA_SLICE:
		return slice_place(op, a, b, out, why);
	case IA_FILTER:
		*out = a->place;
		return true;
	case IA_HALO:           /* the same keys where they were, the chunks extended */
		if (a->place.kind == PL_PARTIAL) {
			buf_puts(why, "exchanges the halos of partial aggregates");
			return false;
		}
		*out = a->place;
		return true;
	case IA_AGG:
		*out = ia_agg_place(&a->type, &a->place, op->u.agg.ngroup, op->u.agg.group);
		return true;
	case IA_MAP:
		return map_place(op, a, out, why);
	case IA_JOIN:
	case IA_CONV:
		return join_place(op, a, b, c, out, why);
	case IA_TWOPHASE:
		return twophase_place(op, a, b, out, why);
	case IA_GATHER:
	case IA_LOOKUP:
		return gather_place(op, a, b, out, why);
	case IA_SCATTER:
		return scatter_place(op, a, b, c, out, why);
	}
	tr_bug("bad IA op");
}

/* ---- dims placed alike ---- */

static int dim_find(int *parent, int x)
{
	while (parent[x] != x)
		x = parent[x] = parent[parent[x]];
	return x;
}

static void dim_unite(int *parent, int a, int b)
{
	a = dim_find(parent, a);
	b = dim_find(parent, b);
	if (a != b)
		parent[a < b ? b : a] = a < b ? a : b;
}

/* Unite dims [a, a+n) of one slot range with [b, b+n) of another. */
static void unite_run(int *parent, int a, int b, int n)
{
	for (int d = 0; d < n; d++)
		dim_unite(parent, a + d, b + d);
}

/* A join's (or convolution's, two-phase schedule's) inputs' dims with its
 * key space's, at slot js (jt.nkey slots); the window dims of a
 * convolution's right input with its output's too (chunk k of the output
 * reads chunk k of the halo).  The mask's dims name key-space dims. */
static void unite_join(const IaPlan *p, const IaOp *op, const int *base, int js, int *parent)
{
	int l = op->u.join.left, r = op->u.join.right;
	int nl = p->ops.v[l].type.nkey;
	unite_run(parent, base[l], js, nl);
	for (int d = 0; d < p->ops.v[r].type.nkey; d++)
		dim_unite(parent, base[r] + d, js + ia_join_out_dim(nl, &op->u.join.on, d));
	if (op->kind == IA_JOIN && op->u.join.mask.on)
		for (int d = 0; d < op->u.join.mask.nkey; d++)
			dim_unite(parent, base[op->u.join.mask.rel] + d, js + op->u.join.mask.key[d]);
}

/* Unite op i's dims with those of its inputs it carries or matches (first:
 * per tensor, the first op holding its value, or -1). */
static void unite_ia_op(const IaPlan *p, int i, const int *base, const int *jslot, int *parent, int *first)
{
	const IaOp *op = &p->ops.v[i];
	int o = base[i], n = op->type.nkey, in[MAXIN];
	ia_inputs(op, in);
	switch (op->kind) {
	case IA_RANGE:
	case IA_COUNTER:
	case IA_LOOP:
	case IA_ENDLOOP:
	case IA_WRITE:
	case IA_PRINT:
		break;
	case IA_READ:           /* every value of one tensor alike */
	case IA_INIT:
	case IA_LOAD:
	case IA_STORE: {
		int t = op->kind == IA_READ ? op->u.read.tensor :
		        op->kind == IA_STORE ? op->u.store.tensor : op->u.init.tensor;
		int src = op->kind == IA_STORE ? op->u.store.in : i;
		if (t < 0)
			break;
		if (first[t] < 0)
			first[t] = src;
		unite_run(parent, base[first[t]], base[src], p->ops.v[src].type.nkey);
		break;
	}
	case IA_BCAST:
	case IA_SHUFFLE:
	case IA_HALO:
	case IA_FILTER:
		unite_run(parent, base[in[0]], o, n);
		if (op->kind == IA_FILTER)
			for (int e = 0; e < op->u.filter.pred.neq; e++)
				dim_unite(parent, o + op->u.filter.pred.eq[e][0], o + op->u.filter.pred.eq[e][1]);
		break;
	case IA_SLICE:
		for (int d = 0; d < n; d++)
			if (d != op->u.slice.dim)
				dim_unite(parent, base[op->u.slice.in] + d, o + d);
		break;
	case IA_AGG:
		for (int g = 0; g < op->u.agg.ngroup; g++)
			dim_unite(parent, base[op->u.agg.in] + op->u.agg.group[g], o + g);
		break;
	case IA_MAP:
		for (int d = 0; d < op->u.map.nkey; d++)
			if (op->u.map.keymap[d] >= 0)
				dim_unite(parent, base[op->u.map.in] + op->u.map.keymap[d], o + d);
		break;
	case IA_JOIN:
	case IA_CONV:
	case IA_TWOPHASE:
		unite_join(p, op, base, jslot[i], parent);
		if (op->u.join.ngroup < 0)
			unite_run(parent, jslot[i], o, n);
		for (int g = 0; g < op->u.join.ngroup; g++)
			if (op->u.join.group[g] >= 0)
				dim_unite(parent, jslot[i] + op->u.join.group[g], o + g);
		break;
	case IA_GATHER:
	case IA_LOOKUP:
	case IA_SCATTER: {
		/* the rows' dims: the index's, then the table's but the gathered one */
		int tab = op->kind == IA_SCATTER ? i : op->u.gather.src;
		int rows = op->kind == IA_SCATTER ? op->u.gather.src : i;
		int ix = op->u.gather.index, ni = p->ops.v[ix].type.nkey;
		unite_run(parent, base[ix], base[rows], ni);
		for (int d = 0, r = ni; d < p->ops.v[tab].type.nkey; d++)
			if (d != op->u.gather.dim)
				dim_unite(parent, base[tab] + d, base[rows] + r++);
		if (op->kind == IA_SCATTER && op->u.gather.base >= 0)
			unite_run(parent, base[op->u.gather.base], o, n);
		break;
	}
	}
}

int ia_dim_classes(const IaPlan *p, int *base, int *of)
{
	int n = p->ops.n, nslot = 0;
	int *jslot = xcalloc(n + 1, sizeof *jslot);
	for (int i = 0; i < n; i++) {
		base[i] = nslot;
		nslot += p->ops.v[i].type.nkey;
	}
	base[n] = nslot;
	int total = nslot;
	for (int i = 0; i < n; i++) {   /* a join's key space, which a fused aggregation groups */
		const IaOp *op = &p->ops.v[i];
		if (!ia_op_joins(op->kind))
			continue;
		jslot[i] = total;
		total += ia_join_type(&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type,
		                      &op->u.join.on).nkey;
	}
	int *parent = xcalloc(total + 1, sizeof *parent);
	for (int s = 0; s < total; s++)
		parent[s] = s;
	int *first = xcalloc(p->tra->tensors.n + 1, sizeof *first);
	for (int t = 0; t < p->tra->tensors.n; t++)
		first[t] = -1;
	for (int i = 0; i < n; i++)
		unite_ia_op(p, i, base, jslot, parent, first);
	int *num = xcalloc(total + 1, sizeof *num), nclass = 0;
	for (int s = 0; s < total; s++)
		num[s] = -1;
	for (int s = 0; s < nslot; s++) {
		int r = dim_find(parent, s);
		if (num[r] < 0)
			num[r] = nclass++;
		of[s] = num[r];
	}
	free(num);
	free(first);
	free(parent);
	free(jslot);
	return nclass;
}

/* ---- copies ---- */

/* The op with its inputs renumbered by map, kernels cloned into arena a. */
IaOp ia_op_remap(const IaOp *op, const int *map, Arena *a)
{
	IaOp c = *op;
	ir_remap(&c, ia_ops[c.kind].in, map);
	Kernel *k = ia_op_kernel(&c);
	if (k)
		*(Kernel **)((char *)&c + ia_ops[c.kind].kernel) = kernel_clone(a, k);
	return c;
}

IaPlan *ia_plan_like(const IaPlan *old)
{
	IaPlan *p = ia_new(old->tra, old->nranks);
	for (int i = 0; i < old->strategy.n; i++) {
		p->strategy.v[i] = old->strategy.v[i];
		p->rules.v[i] = old->rules.v[i] ? arena_strdup(p->arena, old->rules.v[i]) : NULL;
	}
	for (int i = 0; i < old->varplace.n; i++)
		p->varplace.v[i] = old->varplace.v[i];
	p->objective = old->objective;
	p->mem_budget = old->mem_budget;
	return p;
}

/* A copy of a plan (new arena, kernels cloned), costs and all. */
IaPlan *ia_clone(const IaPlan *p)
{
	IaPlan *c = ia_plan_like(p);
	int *map = xcalloc(p->ops.n + 1, sizeof(int));
	for (int i = 0; i < p->ops.n; i++)
		map[i] = ia_push(c, ia_op_remap(&p->ops.v[i], map, c->arena));
	free(map);
	c->total_floats_moved = p->total_floats_moved;
	c->total_bytes_sent = p->total_bytes_sent;
	c->total_flops = p->total_flops;
	c->busiest_flops = p->busiest_flops;
	c->peak_bytes = p->peak_bytes;
	c->predicted_seconds = p->predicted_seconds;
	return c;
}
