/*
 * blocking.c: the chunk shape of every relation.
 *
 * Lowering leaves each tensor as a single chunk.  Here the key dims of all
 * TRA ops are put into classes with union-find: dims a join matches, the
 * dims an aggregation or rekey carries through, a filter's equated dims, the
 * dims of every value of one param.  Dims of one class must be blocked
 * alike, or chunks that meet in a kernel would not line up; every class has
 * one extent (sema checked it), and gets one block size.
 *
 * The automatic block aims at chunks BLIS runs near its best rate (the
 * smallest block the machine model rates within 10% of its best), with a
 * number of blocks the ranks divide evenly: at least one per rank when the
 * extent allows blocks of 128, else a multiple of the rank count when that
 * changes the block by little.  Blocks are a plan's, not the program's:
 * opt_plan (tune.c) takes the automatic ones for its count (opt_block_choose,
 * the one place they are decided), and the search then tries others class
 * by class, jointly with the plan (a replication matmul wants few blocks
 * along its free dims), and keeps what predicts fastest.  The program keeps
 * lowering's single chunks; opt_block writes a count's automatic blocks
 * into a program (--dump-after=blocking, tests).
 *
 * Overrides (--block): N for every dim (all classes pinned), or per tensor
 * NAME=B (every dim) or NAME=B0xB1x... (per dim, `*` automatic).  A tensor
 * dim's block is its class's: two overrides that give one class different
 * blocks are an error naming both.
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

enum { CONV_MIN_BLOCK = 32 };  /* a tied window dim's smallest automatic block */

static int find(int *parent, int x)
{
	while (parent[x] != x)
		x = parent[x] = parent[parent[x]];
	return x;
}

static void unite(int *parent, int a, int b)
{
	a = find(parent, a);
	b = find(parent, b);
	if (a != b)
		parent[a < b ? b : a] = a < b ? a : b;
}

/* Is dim d of op a sampled contraction's summed dim (none of its mask's)?
 * Such a relation is sparse, but only along its mask's dims. */
static bool summed_by_sample(const TraOp *op, int d)
{
	if (op->kind != TRA_JOIN || !op->u.join.mask.on)
		return false;
	for (int k = 0; k < op->u.join.mask.nkey; k++)
		if (op->u.join.mask.key[k] == d)
			return false;
	return true;
}

/* Unite the key dims op i shares with the ops it reads (first: per
 * param, an op carrying it, or -1). */
static void unite_op(const TraProg *p, int i, const int *base, int *parent, int *first)
{
	const TraOp *op = &p->ops.v[i];
	switch (op->kind) {
	case TRA_INPUT:
	case TRA_RANGE:
	case TRA_COUNTER:
		break;
	case TRA_SLICE:         /* blocked as its input but along the window's dim */
		for (int d = 0; d < op->type.nkey; d++)
			if (d != op->u.slice.dim)
				unite(parent, base[op->u.slice.in] + d, base[i] + d);
		break;
	case TRA_JOIN: {
		int l = op->u.join.left, r = op->u.join.right;
		int nl = p->ops.v[l].type.nkey;
		for (int d = 0; d < nl; d++)
			unite(parent, base[l] + d, base[i] + d);
		for (int d = 0; d < p->ops.v[r].type.nkey; d++) {
			int o2 = ia_join_out_dim(nl, &op->u.join.on, d);
			unite(parent, base[r] + d, base[i] + o2);
		}
		if (op->u.join.mask.on)
			for (int d = 0; d < op->u.join.mask.nkey; d++)
				unite(parent, base[op->u.join.mask.rel] + d, base[i] + op->u.join.mask.key[d]);
		break;
	}
	case TRA_CONV: {        /* as a join, but a window dim meets its output's dim nowhere */
		int l = op->u.join.left, r = op->u.join.right;
		int nl = p->ops.v[l].type.nkey;
		const Kernel *k = op->u.join.kernel;
		for (int d = 0; d < nl; d++)
			unite(parent, base[l] + d, base[i] + d);
		for (int d = 0; d < p->ops.v[r].type.nkey; d++) {
			int o2 = ia_join_out_dim(nl, &op->u.join.on, d);
			bool win = false;
			for (int w = 0; w < k->nwin; w++)
				win |= p->ops.v[r].type.chunkdim[k->win[w].dim] == d;
			if (!win)
				unite(parent, base[r] + d, base[i] + o2);
		}
		break;
	}
	case TRA_AGG:
		for (int g = 0; g < op->u.agg.ngroup; g++)
			unite(parent, base[op->u.agg.in] + op->u.agg.group[g], base[i] + g);
		break;
	case TRA_MAP:
		for (int d = 0; d < op->type.nkey; d++)
			unite(parent, base[op->u.map.in] + d, base[i] + d);
		break;
	case TRA_REKEY:
		for (int d = 0; d < op->u.rekey.nkey; d++)
			if (op->u.rekey.keymap[d] >= 0)
				unite(parent, base[op->u.rekey.in] + op->u.rekey.keymap[d], base[i] + d);
		break;
	case TRA_FILTER:
		for (int d = 0; d < op->type.nkey; d++)
			unite(parent, base[op->u.filter.in] + d, base[i] + d);
		for (int e = 0; e < op->u.filter.pred.neq; e++)
			unite(parent, base[i] + op->u.filter.pred.eq[e][0], base[i] + op->u.filter.pred.eq[e][1]);
		break;
	case TRA_GATHER:
	case TRA_SCATTER: {
		/* the rows' dims: the index's, then the table's but the
		 * gathered one, which is free of the index's values */
		int tab = op->kind == TRA_GATHER ? op->u.gather.src : i;
		int rows = op->kind == TRA_GATHER ? i : op->u.gather.src;
		int ix = op->u.gather.index, ni = p->ops.v[ix].type.nkey;
		for (int d = 0; d < ni; d++)
			unite(parent, base[ix] + d, base[rows] + d);
		for (int d = 0, o = ni; d < p->ops.v[tab].type.nkey; d++)
			if (d != op->u.gather.dim)
				unite(parent, base[tab] + d, base[rows] + o++);
		if (op->kind == TRA_SCATTER && op->u.gather.base >= 0)     /* blocked as the result */
			for (int d = 0; d < op->type.nkey; d++)
				unite(parent, base[op->u.gather.base] + d, base[i] + d);
		break;
	}
	case TRA_OUTPUT:
	case TRA_PRINT:
	case TRA_LOOP:
	case TRA_ENDLOOP:
	case TRA_GRAD:          /* autodiff replaced it before blocking */
		break;
	case TRA_INIT:
	case TRA_LOAD:
	case TRA_STORE: {
		/* every value of a param is blocked alike: unite with the
		 * first op that carries the param */
		int t = op->kind == TRA_STORE ? op->u.store.tensor : op->u.init.tensor;
		int src = op->kind == TRA_STORE ? op->u.store.in : i;
		if (first[t] < 0)
			first[t] = src;
		for (int d = 0; d < p->ops.v[src].type.nkey; d++)
			unite(parent, base[first[t]] + d, base[src] + d);
		break;
	}
	}
}

/* A convolution's window dim, in its right input, is tied to its
 * output's dim: blocked alike, so output chunk k reads X's chunk k and a
 * halo from its neighbours (IA_HALO), each block at least the rows a
 * window reaches beyond it.  A kernel's gradient's window dim stands for
 * the lab in its output: that dim is one chunk. */
static void tie_windows(const TraProg *p, BlockClasses *c)
{
	int n = p->ops.n;
	const int *base = c->base;
	c->tie = xcalloc(c->n + 1, sizeof *c->tie);
	c->reach = xcalloc(c->n + 1, sizeof *c->reach);
	for (int k = 0; k < c->n; k++)
		c->tie[k] = k;
	for (int i = 0; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		const Kernel *k = tra_op_kernel(op);
		if (!k || k->nwin == 0)
			continue;       /* not a convolution */
		const RelType *lt = &p->ops.v[op->u.join.left].type, *rt = &p->ops.v[op->u.join.right].type;
		for (int w = 0; w < k->nwin; w++) {
			int d = rt->chunkdim[k->win[w].dim];
			int ko = c->of[base[i] + ia_join_out_dim(lt->nkey, &op->u.join.on, d)];
			if (ia_conv_own_left(k, w)) {
				c->whole[ko] = true;
				continue;
			}
			int64_t lo, hi;
			ia_conv_reach(k, lt, &op->type, w, &lo, &hi);
			unite(c->tie, c->of[base[op->u.join.right] + d], ko);
			int r = find(c->tie, ko);
			lo = lo > hi ? lo : hi;
			c->reach[r] = c->reach[r] > lo ? c->reach[r] : lo;
		}
	}
	for (int k = 0; k < c->n; k++) {        /* each root its group's largest reach */
		int r = find(c->tie, k);
		c->reach[r] = c->reach[r] > c->reach[k] ? c->reach[r] : c->reach[k];
	}
}

BlockClasses *opt_block_classes(const TraProg *p)
{
	int n = p->ops.n;
	BlockClasses *c = xcalloc(1, sizeof *c);
	c->base = xcalloc(n + 1, sizeof *c->base);
	for (int i = 0; i < n; i++)
		c->base[i + 1] = c->base[i] + p->ops.v[i].type.nkey;
	int total = c->nslot = c->base[n];
	int *parent = xcalloc(total + 1, sizeof *parent);
	for (int i = 0; i < total; i++)
		parent[i] = i;
	int *first = xcalloc(p->tensors.n + 1, sizeof *first);   /* per param: an op carrying it */
	for (int t = 0; t < p->tensors.n; t++)
		first[t] = -1;
	const int *base = c->base;

	for (int i = 0; i < n; i++)
		unite_op(p, i, base, parent, first);

	/* number the classes in order of first appearance */
	int *num = xcalloc(total + 1, sizeof *num);
	for (int i = 0; i < total; i++)
		num[i] = -1;
	c->of = xcalloc(total + 1, sizeof *c->of);
	for (int i = 0; i < total; i++) {
		int r = find(parent, i);
		if (num[r] < 0)
			num[r] = c->n++;
		c->of[i] = num[r];
	}
	c->extent = xcalloc(c->n + 1, sizeof *c->extent);
	c->block = xcalloc(c->n + 1, sizeof *c->block);
	c->pinned = xcalloc(c->n + 1, sizeof *c->pinned);
	c->dtype = xcalloc(c->n + 1, sizeof *c->dtype);
	c->sparse = xcalloc(c->n + 1, sizeof *c->sparse);
	c->whole = xcalloc(c->n + 1, sizeof *c->whole);
	for (int i = 0; i < n; i++) {
		const RelType *t = &p->ops.v[i].type;
		for (int d = 0; d < t->nkey; d++) {
			int k = c->of[base[i] + d];
			c->sparse[k] |= t->sparse && !summed_by_sample(&p->ops.v[i], d);
			if (!c->extent[k]) {
				c->extent[k] = t->extent[d];
				c->block[k] = t->block[d];
				c->dtype[k] = t->dtype;
			} else if (c->extent[k] != t->extent[d]) {
				tr_bug("blocking class %d mixes extents %" PRId64 " and %" PRId64, k, c->extent[k], t->extent[d]);
			}
		}
	}
	tie_windows(p, c);
	free(num);
	free(first);
	free(parent);
	return c;
}

void opt_block_classes_free(BlockClasses *c)
{
	if (!c)
		return;
	free(c->of);
	free(c->base);
	free(c->extent);
	free(c->block);
	free(c->pinned);
	free(c->dtype);
	free(c->sparse);
	free(c->whole);
	free(c->tie);
	free(c->reach);
	free(c);
}

/* The smallest block the machine rates within 10% of its best gemm rate. */
static int64_t target_block(const Machine *m, DType t)
{
	double best = 0;
	for (int i = 0; i < m->ngemm; i++)
		best = m->gemm_rate[t == DT_F64][i] > best ? m->gemm_rate[t == DT_F64][i] : best;
	for (int i = 0; i < m->ngemm; i++)
		if (m->gemm_rate[t == DT_F64][i] >= 0.9 * best)
			return m->gemm_block[i] > 64 ? m->gemm_block[i] : 64;
	return 512;
}

int64_t opt_auto_block(int64_t extent, int nranks, const Machine *m, DType t)
{
	Machine dflt;
	if (!m) {
		machine_default(&dflt);
		m = &dflt;
	}
	int64_t b = target_block(m, t);
	int64_t f = ceil_div(extent, b);
	int64_t s = nranks > 0 ? nranks : 1;
	if (f < s && extent / s >= 128)
		f = s;                          /* one block per rank at least */
	else if (f > s && f % s) {
		int64_t g = (f / s + 1) * s;    /* a multiple of the ranks, if close */
		if ((double)g <= 1.25 * (double)f)
			f = g;
	}
	if (f > extent)
		f = extent;
	return ceil_div(extent, f);
}

/* The ops that carry tensor t's own value (key dim d = tensor dim d). */
static bool carries(const TraOp *op, int t)
{
	switch (op->kind) {
	case TRA_INPUT: return op->u.input.tensor == t;
	case TRA_INIT: case TRA_LOAD: return op->u.init.tensor == t;
	case TRA_OUTPUT: return op->u.output.tensor == t;
	case TRA_STORE: return op->u.store.tensor == t;
	default: return false;
	}
}

/* The largest block of an extent that leaves a sparse dim enough blocks
 * to place on nranks: SPARSE_BLOCKS_PER_RANK a rank, at most
 * SPARSE_MAX_BLOCKS a dim (or one a rank beyond: a reader keeps a few
 * bytes per key of the whole key space). */
static int64_t sparse_cap(int64_t extent, int nranks)
{
	int64_t f = (int64_t)SPARSE_BLOCKS_PER_RANK * nranks;
	if (f > SPARSE_MAX_BLOCKS)
		f = nranks > SPARSE_MAX_BLOCKS ? nranks : SPARSE_MAX_BLOCKS;
	return ceil_div(extent, f);
}

int64_t opt_block_cap(const BlockClasses *c, int k, int nranks)
{
	if (!c->sparse[k] || nranks <= 1)
		return INT64_MAX;
	return sparse_cap(c->extent[k], nranks);
}

bool opt_plan_placeable(const IaPlan *p)
{
	if (p->nranks <= 1)
		return true;
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		/* the run places a sparse input's blocks along the dim its file
		 * compresses (a csr's rows, a csc's columns: runtime/sparse.c,
		 * trt_balance), which the plan does not know; relations of its
		 * dims' classes follow it */
		if (op->kind != IA_READ || !op->type.sparse || op->place.kind != PL_PART || op->place.ndims == 0)
			continue;
		for (int d = 0; d < op->type.nkey; d++)
			if (rel_block_len(&op->type, d) > sparse_cap(op->type.extent[d], p->nranks))
				return false;
	}
	return true;
}

bool opt_block_choose(BlockClasses *c, const TraProg *p, const OptOptions *o, Buf *err)
{
	for (int k = 0; k < c->n; k++) {
		int64_t b = opt_auto_block(c->extent[k], o->nranks, o->machine, c->dtype[k]);
		int64_t cap = opt_block_cap(c, k, o->nranks);
		c->block[k] = b < cap ? b : cap;
	}
	return opt_block_pins(c, p, o, err);
}

bool opt_block_pins(BlockClasses *c, const TraProg *p, const OptOptions *o, Buf *err)
{
	for (int k = 0; k < c->n; k++) {
		c->pinned[k] = o->block > 0;
		if (o->block > 0)
			c->block[k] = o->block < c->extent[k] ? o->block : c->extent[k];
	}
	/* per-tensor overrides; who set each class, for messages */
	int *who = xcalloc(c->n + 1, sizeof *who), *whodim = xcalloc(c->n + 1, sizeof *whodim);
	for (int k = 0; k < c->n; k++)
		who[k] = -1;
	bool ok = true;
	for (int i = 0; i < o->nblockpins && ok; i++) {
		const BlockPin *pin = &o->blockpins[i];
		const Tensor *ten = &p->tensors.v[pin->tensor];
		for (int d = 0; d < ten->rank && ok; d++) {
			if (pin->dim >= 0 && pin->dim != d)
				continue;
			if (pin->block <= 0)
				continue;       /* `*`: automatic */
			for (int op = 0; op < p->ops.n && ok; op++) {
				const TraOp *x = &p->ops.v[op];
				if (!carries(x, pin->tensor))
					continue;
				int src = x->kind == TRA_OUTPUT ? x->u.output.in : x->kind == TRA_STORE ? x->u.store.in : op;
				if (d >= p->ops.v[src].type.nkey)
					continue;
				int k = c->of[c->base[src] + d];
				int64_t b = pin->block < c->extent[k] ? pin->block : c->extent[k];
				if (who[k] >= 0 && c->block[k] != b) {
					buf_printf(err, "--block gives %s's dim %d a block of %" PRId64 " but %s's dim %d, "
					           "which meets it, a block of %" PRId64,
					           ten->name, d, b, p->tensors.v[who[k]].name, whodim[k], c->block[k]);
					ok = false;
					break;
				}
				c->block[k] = b;
				c->pinned[k] = true;
				who[k] = pin->tensor;
				whodim[k] = d;
			}
		}
	}
	free(who);
	free(whodim);
	/* a tie's classes take one block, a pinned one's if any, else the
	 * largest chosen (the data's, whose extent is the largest: then
	 * both have as many chunks, on the same sites); below the reach, on one rank (where a halo only
	 * copies), or when the smallest class would be one chunk anyway,
	 * each is one chunk.  The search leaves them alone */
	for (int r = 0; r < c->n; r++) {
		if (find(c->tie, r) != r)
			continue;
		int64_t b = 0, pin = 0, least = INT64_MAX;
		int members = 0;
		for (int k = 0; k < c->n; k++)
			if (find(c->tie, k) == r) {
				members++;
				b = c->block[k] > b ? c->block[k] : b;
				least = c->extent[k] < least ? c->extent[k] : least;
				if (c->pinned[k] && c->block[k] < c->extent[k])
					pin = c->block[k];
			}
		if (members < 2)
			continue;
		/* at least a chunk a rank along the dim when that leaves blocks
		 * of CONV_MIN_BLOCK: the search can then split X along it alone */
		int64_t most = 0;
		for (int k = 0; k < c->n; k++)
			if (find(c->tie, k) == r)
				most = c->extent[k] > most ? c->extent[k] : most;
		int64_t share = o->nranks > 1 ? ceil_div(most, o->nranks) : most;
		if (share < b && share >= CONV_MIN_BLOCK && share >= c->reach[r])
			b = share;
		b = pin ? pin : b;
		bool whole = b < c->reach[r] || (o->nranks <= 1 && !pin) || b >= least;
		for (int k = 0; k < c->n; k++)
			if (find(c->tie, k) == r) {
				c->whole[k] |= whole;
				c->block[k] = b < c->extent[k] ? b : c->extent[k];
				c->pinned[k] = true;
			}
	}
	for (int k = 0; k < c->n; k++)
		if (c->whole[k]) {      /* the search leaves it alone, as a pinned class */
			c->block[k] = c->extent[k];
			c->pinned[k] = true;
		}
	return ok;
}

void opt_block_types(const TraProg *p, const BlockClasses *c, RelType *types)
{
	int n = p->ops.n;
	for (int i = 0; i < n; i++) {
		types[i] = p->ops.v[i].type;
		for (int d = 0; c && d < types[i].nkey; d++)
			types[i].block[d] = c->block[c->of[c->base[i] + d]];
	}
	/* an output's, store's or print's type is its input's */
	for (int i = 0; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_OUTPUT)
			types[i] = types[op->u.output.in];
		else if (op->kind == TRA_STORE || op->kind == TRA_PRINT)
			types[i] = types[op->u.store.in];
	}
}

static void block_apply(TraProg *p, const BlockClasses *c)
{
	RelType *types = xcalloc(p->ops.n + 1, sizeof *types);
	opt_block_types(p, c, types);
	for (int i = 0; i < p->ops.n; i++)
		p->ops.v[i].type = types[i];
	free(types);
}

bool opt_check_blocks(const TraProg *p, const OptOptions *o, Buf *err)
{
	BlockClasses *c = opt_block_classes(p);
	bool ok = opt_block_pins(c, p, o, err);
	opt_block_classes_free(c);
	return ok;
}

void opt_block(TraProg *p, const OptOptions *o)
{
	BlockClasses *c = opt_block_classes(p);
	Buf err = {0};
	opt_block_choose(c, p, o, &err);
	buf_free(&err);
	block_apply(p, c);
	opt_block_classes_free(c);
}
