/*
 * hoist.c: loop-invariant code motion over TRA programs.
 *
 * A join, aggregation, map, rekey or filter inside a repeat block whose
 * inputs do not change from one iteration to the next computes the same
 * relation every time: A X in a GCN layer (the adjacency times the
 * features), a product of two inputs, a range (which reads nothing).  It moves to just before the
 * outermost loop it does not depend on.  Loads of params, inits, stores,
 * prints and grads stay where they are: a param's value changes when it is
 * stored, and the others have effects.
 *
 * The op array is reordered, never changed otherwise: an op moves before
 * the loop op of the outermost loop, inside its home, that contains it, and
 * keeps its order among the ops that move there (their inputs come first).
 */
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

static bool movable(TraOpKind k)
{
	switch (k) {
	case TRA_JOIN: case TRA_AGG: case TRA_MAP: case TRA_REKEY: case TRA_FILTER: case TRA_RANGE: case TRA_SLICE:
	case TRA_GATHER: case TRA_SCATTER: case TRA_CONV:
		return true;
	case TRA_COUNTER:       /* changes every iteration of its loop */
	case TRA_INPUT: case TRA_OUTPUT: case TRA_INIT: case TRA_LOAD: case TRA_STORE:
	case TRA_PRINT: case TRA_LOOP: case TRA_ENDLOOP: case TRA_GRAD:
		return false;
	}
	return false;
}

static int remap_in(const int *pos, int i)
{
	return pos[i];
}

void opt_hoist(TraProg *p)
{
	int n = p->ops.n;
	int *loop = xcalloc(n + 1, sizeof *loop);       /* innermost loop op around each op, -1 */
	int *parent = xcalloc(n + 1, sizeof *parent);   /* per loop op: the loop around it */
	int *home = xcalloc(n + 1, sizeof *home);       /* the loop an op's value belongs to */
	int *before = xcalloc(n + 1, sizeof *before);   /* the loop op it moves before, or -1 */
	bool any = false;

	for (int i = 0, cur = -1; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_ENDLOOP)
			cur = parent[cur];
		loop[i] = cur;
		if (op->kind == TRA_LOOP) {
			parent[i] = cur;
			cur = i;
		}
	}
	for (int i = 0; i < n; i++) {
		const TraOp *op = &p->ops.v[i];
		before[i] = -1;
		home[i] = loop[i];
		if (!movable(op->kind) || loop[i] < 0)
			continue;
		/* the innermost loop around i that contains an input's home */
		int in[MAXIN];
		int k = tra_inputs(op, in);
		int h = -1;
		for (int l = loop[i]; l >= 0 && h < 0; l = parent[l])
			for (int j = 0; j < k; j++)
				if (home[in[j]] == l)
					h = l;
		home[i] = h;
		if (h == loop[i])
			continue;
		/* move before the outermost loop inside h that contains i */
		int outer = loop[i];
		while (parent[outer] != h)
			outer = parent[outer];
		before[i] = outer;
		any = true;
	}
	if (!any)
		goto done;

	/* the new order: moved ops just before their loop op */
	int *order = xcalloc(n + 1, sizeof *order), *pos = xcalloc(n + 1, sizeof *pos), m = 0;
	for (int i = 0; i < n; i++) {
		if (p->ops.v[i].kind == TRA_LOOP)
			for (int j = i + 1; j < n; j++)
				if (before[j] == i)
					order[m++] = j;
		if (before[i] < 0)
			order[m++] = i;
	}
	if (m != n)
		tr_bug("hoisting lost ops (%d of %d)", m, n);
	for (int i = 0; i < n; i++)
		pos[order[i]] = i;
	TraOp *ops = xcalloc(n + 1, sizeof *ops);
	for (int i = 0; i < n; i++) {
		TraOp op = p->ops.v[order[i]];
		switch (op.kind) {
		case TRA_JOIN:
		case TRA_CONV:
			op.u.join.left = remap_in(pos, op.u.join.left);
			op.u.join.right = remap_in(pos, op.u.join.right);
			break;
		case TRA_AGG: op.u.agg.in = remap_in(pos, op.u.agg.in); break;
		case TRA_MAP: op.u.map.in = remap_in(pos, op.u.map.in); break;
		case TRA_REKEY: op.u.rekey.in = remap_in(pos, op.u.rekey.in); break;
		case TRA_FILTER: op.u.filter.in = remap_in(pos, op.u.filter.in); break;
		case TRA_GATHER:
		case TRA_SCATTER:
			op.u.gather.src = remap_in(pos, op.u.gather.src);
			op.u.gather.index = remap_in(pos, op.u.gather.index);
			if (op.u.gather.base >= 0)
				op.u.gather.base = remap_in(pos, op.u.gather.base);
			break;
		case TRA_OUTPUT: op.u.output.in = remap_in(pos, op.u.output.in); break;
		case TRA_STORE:
		case TRA_PRINT: op.u.store.in = remap_in(pos, op.u.store.in); break;
		case TRA_GRAD: op.u.grad.loss = remap_in(pos, op.u.grad.loss); break;
		case TRA_SLICE:
			op.u.slice.in = remap_in(pos, op.u.slice.in);
			op.u.slice.off = op.u.slice.off >= 0 ? remap_in(pos, op.u.slice.off) : -1;
			break;
		case TRA_INPUT: case TRA_INIT: case TRA_LOAD: case TRA_RANGE: case TRA_COUNTER: case TRA_LOOP: case TRA_ENDLOOP:
			break;
		}
		ops[i] = op;
	}
	memcpy(p->ops.v, ops, (size_t)n * sizeof *ops);
	free(ops);
	free(order);
	free(pos);
done:
	free(loop);
	free(parent);
	free(home);
	free(before);
}
