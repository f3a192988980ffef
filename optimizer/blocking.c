/*
 * blocking.c: the chunk shape of every relation.
 *
 * Lowering leaves each tensor as a single chunk.  Here the key dims of all
 * TRA ops are put into classes with union-find: dims a join matches, the
 * dims an aggregation or rekey carries through, a filter's equated dims.
 * Dims of one class must be blocked alike, or chunks that meet in a kernel
 * would not line up; every class has one extent (sema checked it), and gets
 * one block size.
 *
 * The choice is simple for now: the --block size if given, else blocks of
 * at most 512 split evenly over the extent, so edge chunks are not slivers.
 */
#include <stdlib.h>

#include "optimizer/opt.h"

#define AUTO_BLOCK 512

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

static int64_t choose_block(int64_t extent, const OptOptions *o)
{
	if (o->block > 0)
		return o->block < extent ? o->block : extent;
	int64_t nblocks = ceil_div(extent, AUTO_BLOCK);
	return ceil_div(extent, nblocks);
}

void opt_block(TraProg *p, const OptOptions *o)
{
	int n = p->ops.n;
	int *base = xcalloc(n + 1, sizeof *base);
	for (int i = 0; i < n; i++)
		base[i + 1] = base[i] + p->ops.v[i].type.nkey;
	int total = base[n];
	int *parent = xcalloc(total + 1, sizeof *parent);
	for (int i = 0; i < total; i++)
		parent[i] = i;
	int *first = xcalloc(p->tensors.n + 1, sizeof *first);   /* per param: an op carrying it */
	for (int t = 0; t < p->tensors.n; t++)
		first[t] = -1;

	for (int i = 0; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		switch (op->kind) {
		case TRA_INPUT:
			break;
		case TRA_JOIN: {
			int l = op->u.join.left, r = op->u.join.right;
			int nl = p->ops.v[l].type.nkey;
			for (int d = 0; d < nl; d++)
				unite(parent, base[l] + d, base[i] + d);
			for (int d = 0; d < p->ops.v[r].type.nkey; d++) {
				int o2 = ia_join_out_dim(nl, op->u.join.nmatch, op->u.join.rkey, d, op->u.join.lkey);
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
				unite(parent, base[op->u.rekey.in] + op->u.rekey.keymap[d], base[i] + d);
			break;
		case TRA_FILTER:
			for (int d = 0; d < op->type.nkey; d++)
				unite(parent, base[op->u.filter.in] + d, base[i] + d);
			for (int e = 0; e < op->u.filter.pred.neq; e++)
				unite(parent, base[i] + op->u.filter.pred.eq[e][0], base[i] + op->u.filter.pred.eq[e][1]);
			break;
		case TRA_OUTPUT:
		case TRA_PRINT:
		case TRA_LOOP:
		case TRA_ENDLOOP:
			break;
		case TRA_GRAD:
			tr_bug("a grad op reached blocking: autodiff did not run");
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

	int64_t *block = xcalloc(total + 1, sizeof *block);
	for (int i = 0; i < n; i++) {
		RelType *t = &p->ops.v[i].type;
		for (int d = 0; d < t->nkey; d++) {
			int c = find(parent, base[i] + d);
			if (!block[c])
				block[c] = choose_block(t->extent[d], o);
			else if (block[c] > t->extent[d])
				tr_bug("blocking class %d mixes extents", c);
			t->block[d] = block[c];
		}
	}
	/* an output's, store's or print's type is its input's */
	for (int i = 0; i < n; i++) {
		TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_OUTPUT)
			op->type = p->ops.v[op->u.output.in].type;
		else if (op->kind == TRA_STORE || op->kind == TRA_PRINT)
			op->type = p->ops.v[op->u.store.in].type;
	}
	free(first);
	free(block);
	free(parent);
	free(base);
}
