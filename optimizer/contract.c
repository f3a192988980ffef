/*
 * contract.c: the order of pairwise contractions in a sum of products.
 *
 * Lowering joins a product's operands left to right and sums each index at
 * the smallest sub-expression holding it, so `X[p,i]*Y[q,j]*T[i,j,k,l]*
 * Z[r,k]*W[s,l]` first makes the outer product of X and Y.  Here every
 * maximal *product-sum tree* is found: joins whose kernel is in0 * in1 and
 * sum aggregations over them, each intermediate read only inside the tree,
 * down to leaves that are other ops (inputs, maps, results of other
 * statements).  The tree is one einsum over index variables: its leaves'
 * key dims are variables, the root's are the output, the rest are summed.
 * It is rebuilt as the cheapest binary order of pairwise contractions,
 * each summing the variables no later operand and not the output needs:
 *
 *   cost      flops of each pairwise contraction (the product of the
 *             extents of every variable either operand has), summed
 *   search    exact dynamic programming over subsets of operands up to 8
 *             (3^n splits), greedy beyond (the cheapest pair first)
 *   memory    an intermediate bigger than a limit is never chosen: the
 *             memory of all ranks (--mem-per-rank, or the machine model's,
 *             times the ranks), opt_contract_limit; nor a join of more
 *             than MAXDIM indices
 *
 * It runs on TRA of lowering's blocks (every tensor one chunk) and keeps
 * the root's key and chunk order, so nothing downstream changes.  A tree
 * already in the best order is left alone.  The front end orders without
 * a limit, which depends on the rank count, and notes the largest
 * intermediate its orders hold: a limit at least that orders alike (the
 * exact order and the greedy's steps are then all within it), so only a
 * count whose limit is below it needs its own order (frontend/pipeline.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

#define MAXLEAF 32
#define MAXVAR 64
#define EXACT 8

typedef struct Leaf {
	int op;
	int nvar;
	int var[MAXDIM];        /* key dim d is variable var[d] */
} Leaf;

typedef struct Tree {
	const TraProg *p;
	const int *uses;
	int root, stmt, grad_of;
	int nleaf;
	Leaf leaf[MAXLEAF];
	int nvar;
	int64_t extent[MAXVAR];
	int nout;
	int out[MAXDIM];        /* the root's key dims' variables */
	RelType roottype;
	double cur_flops;       /* of the order lowering made */
	double cur_largest;     /* its largest intermediate, in elements */
	bool ok;
} Tree;

typedef uint64_t VarSet;        /* bits of variables (MAXVAR = 64) */

static VarSet leaf_vars(const Tree *t, int l)
{
	VarSet v = 0;
	for (int d = 0; d < t->leaf[l].nvar; d++)
		v |= 1ull << t->leaf[l].var[d];
	return v;
}

static double vol(const Tree *t, VarSet v)
{
	double x = 1;
	for (int i = 0; i < t->nvar; i++)
		if (v >> i & 1)
			x *= (double)t->extent[i];
	return x;
}

static bool product_join(const TraOp *op)
{
	return op->kind == TRA_JOIN && kx_is_product(op->u.join.kernel->expr) &&
	       (!op->u.join.kernel->reduces || op->u.join.kernel->red == AGG_ADD);
}

/* A sum over a product join only it reads. */
static bool sum_node(const TraProg *p, const int *uses, const TraOp *op)
{
	if (op->kind != TRA_AGG || op->u.agg.agg != AGG_ADD)
		return false;
	const TraOp *j = &p->ops.v[op->u.agg.in];
	return product_join(j) && uses[op->u.agg.in] == 1 && j->stmt == op->stmt;
}

static int fresh(Tree *t, int64_t extent)
{
	if (t->nvar == MAXVAR) {
		t->ok = false;
		return 0;
	}
	t->extent[t->nvar] = extent;
	return t->nvar++;
}

/* Walk op with its key dims named by vars; internal ops are marked.
 * Returns the variables of op's result; adds the flops of the order
 * lowering made (each join: its operands' variables) to cur_flops and
 * notes its largest intermediate (an op expanded below the top: the
 * root, and a sum's join, are not intermediates of their own). */
static VarSet walk(Tree *t, int i, const int *vars, bool top, bool *inner)
{
	VarSet mine = 0;
	for (int d = 0; d < t->p->ops.v[i].type.nkey; d++)
		mine |= 1ull << vars[d];
	const TraOp *op = &t->p->ops.v[i];
	bool expand = top || (t->uses[i] == 1 && op->stmt == t->stmt);
	if (expand && !top && (sum_node(t->p, t->uses, op) || product_join(op)))
		t->cur_largest = fmax(t->cur_largest, vol(t, mine));
	if (expand && sum_node(t->p, t->uses, op)) {
		const TraOp *j = &t->p->ops.v[op->u.agg.in];
		int jv[MAXDIM];
		for (int d = 0; d < j->type.nkey; d++)
			jv[d] = -1;
		for (int g = 0; g < op->u.agg.ngroup; g++)
			jv[op->u.agg.group[g]] = vars[g];
		for (int d = 0; d < j->type.nkey; d++)
			if (jv[d] < 0)
				jv[d] = fresh(t, j->type.extent[d]);
		inner[i] = true;
		walk(t, op->u.agg.in, jv, true, inner);
		return mine;
	}
	if (expand && product_join(op)) {
		int L = op->u.join.left, R = op->u.join.right;
		const TraOp *l = &t->p->ops.v[L], *r = &t->p->ops.v[R];
		int lv[MAXDIM], rv[MAXDIM];
		for (int d = 0; d < l->type.nkey; d++)
			lv[d] = vars[d];
		for (int d = 0; d < r->type.nkey; d++)
			rv[d] = vars[ia_join_out_dim(l->type.nkey, &op->u.join.on, d)];
		inner[i] = true;
		VarSet a = walk(t, L, lv, false, inner);
		VarSet b = walk(t, R, rv, false, inner);
		t->cur_flops += vol(t, a | b);
		return mine;
	}
	/* a leaf: its chunks must span every key dim (a complete relation) */
	if (t->nleaf == MAXLEAF || op->type.nchunk != op->type.nkey) {
		t->ok = false;
		return mine;
	}
	Leaf *lf = &t->leaf[t->nleaf++];
	lf->op = i;
	lf->nvar = op->type.nkey;
	memcpy(lf->var, vars, sizeof lf->var);
	/* a variable twice in one leaf (a diagonal) is not a plain einsum */
	for (int a = 0; a < lf->nvar; a++)
		for (int b = a + 1; b < lf->nvar; b++)
			if (lf->var[a] == lf->var[b])
				t->ok = false;
	return mine;
}

/* ---- costs over sets of operands (bit masks of leaves) ---- */

typedef struct Order {
	const Tree *t;
	VarSet *lv;             /* per leaf */
	VarSet outv;
	double limit;           /* elements an intermediate may hold */
} Order;

/* The variables the contraction of leaves `s` keeps: those the rest of
 * the operands or the output still need. */
static VarSet kept(const Order *o, uint32_t s)
{
	VarSet in = 0, rest = o->outv;
	for (int l = 0; l < o->t->nleaf; l++)
		if (s >> l & 1)
			in |= o->lv[l];
		else
			rest |= o->lv[l];
	return in & rest;
}

/* ---- the binary order ---- */

typedef struct Node {
	int leaf;               /* >= 0: a leaf */
	int a, b;               /* children (node indices) */
	uint32_t set;
} Node;

typedef struct Plan {
	Node node[2 * MAXLEAF];
	int n, root;
	double flops;
} Plan;

static int plan_leaf(Plan *p, int l)
{
	p->node[p->n] = (Node){.leaf = l, .a = -1, .b = -1, .set = 1u << l};
	return p->n++;
}

static int plan_pair(Plan *p, int a, int b)
{
	p->node[p->n] = (Node){.leaf = -1, .a = a, .b = b, .set = p->node[a].set | p->node[b].set};
	return p->n++;
}

static int unfold(Plan *out, const uint32_t *split, uint32_t s)
{
	if (!(s & (s - 1)))
		return plan_leaf(out, __builtin_ctz(s));
	int a = unfold(out, split, split[s]);
	int b = unfold(out, split, s ^ split[s]);
	return plan_pair(out, a, b);
}

/* Exact: best[s] over all splits of s, by subset DP. */
static bool order_exact(const Order *o, Plan *out)
{
	int n = o->t->nleaf;
	uint32_t full = (1u << n) - 1;
	double *best = xcalloc((size_t)full + 1, sizeof *best);
	uint32_t *split = xcalloc((size_t)full + 1, sizeof *split);
	for (uint32_t s = 1; s <= full; s++) {
		if (!(s & (s - 1))) {
			best[s] = 0;
			continue;
		}
		best[s] = INFINITY;
		if (vol(o->t, kept(o, s)) > o->limit && s != full)
			continue;       /* this intermediate does not fit */
		/* each unordered split once: a holds the lowest leaf */
		uint32_t low = s & -s;
		for (uint32_t a = (s - 1) & s; a; a = (a - 1) & s) {
			if (!(a & low))
				continue;
			uint32_t b = s ^ a;
			if (isinf(best[a]) || isinf(best[b]) || __builtin_popcountll(kept(o, a) | kept(o, b)) > MAXDIM)
				continue;       /* a relation has at most MAXDIM key dims */
			double f = vol(o->t, kept(o, a) | kept(o, b));
			double c = best[a] + best[b] + f;
			if (c < best[s]) {
				best[s] = c;
				split[s] = a;
			}
		}
	}
	bool ok = !isinf(best[full]);
	if (ok) {
		out->n = 0;
		out->root = unfold(out, split, full);
		out->flops = best[full];
	}
	free(best);
	free(split);
	return ok;
}

/* Greedy: the cheapest pair of current operands first. */
static bool order_greedy(const Order *o, Plan *out)
{
	int n = o->t->nleaf, live[MAXLEAF], nl = 0;
	out->n = 0;
	out->flops = 0;
	for (int l = 0; l < n; l++)
		live[nl++] = plan_leaf(out, l);
	while (nl > 1) {
		int bi = -1, bj = -1;
		double bf = INFINITY, bsize = INFINITY;
		for (int i = 0; i < nl; i++)
			for (int j = i + 1; j < nl; j++) {
				uint32_t a = out->node[live[i]].set, b = out->node[live[j]].set;
				double size = vol(o->t, kept(o, a | b));
				if ((size > o->limit && nl > 2) || __builtin_popcountll(kept(o, a) | kept(o, b)) > MAXDIM)
					continue;
				double f = vol(o->t, kept(o, a) | kept(o, b));
				if (f < bf || (f == bf && size < bsize)) {
					bf = f;
					bsize = size;
					bi = i;
					bj = j;
				}
			}
		if (bi < 0)
			return false;
		out->flops += bf;
		live[bi] = plan_pair(out, live[bi], live[bj]);
		live[bj] = live[--nl];
	}
	out->root = live[0];
	return true;
}

/* ---- rebuilding TRA ---- */

typedef struct Build {
	TraProg *p;             /* the new program */
	const Tree *t;
	const Order *o;
	const int *map;         /* old op -> new op */
} Build;

typedef struct Val {
	int op;
	int nvar;
	int var[MAXDIM];
} Val;

/* The type of a relation keyed by variables var[0..n), whole chunks in
 * the order chunk[0..nchunk) (variables). */
static RelType vars_type(const Tree *t, DType dtype, int n, const int *var, int nchunk, const int *chunk)
{
	RelType rt = {.dtype = dtype, .nkey = n, .nchunk = nchunk};
	for (int d = 0; d < n; d++)
		rt.extent[d] = rt.block[d] = t->extent[var[d]];
	for (int c = 0; c < nchunk; c++)
		for (int d = 0; d < n; d++)
			if (var[d] == chunk[c])
				rt.chunkdim[c] = d;
	return rt;
}

/* pos[i]: the key dim of v that is variable keys[i]. */
static void var_positions(const Val *v, int n, const int *keys, int *pos)
{
	for (int i = 0; i < n; i++)
		for (int d = 0; d < v->nvar; d++)
			if (v->var[d] == keys[i])
				pos[i] = d;
}

/* The join of a and b on their shared variables, kernel in0 * in1 summing
 * what is not kept; chunks in the order `chunk` (variables), keys kept in
 * the order `keys`. */
static Val contract(Build *b, Val x, Val y, VarSet keep, int nchunk, const int *chunk, int nkeys, const int *keys)
{
	TraProg *p = b->p;
	const Tree *t = b->t;
	const RelType *xt = &p->ops.v[x.op].type, *yt = &p->ops.v[y.op].type;
	TraOp j = {.kind = TRA_JOIN, .stmt = t->stmt, .grad_of = t->grad_of};
	j.u.join.left = x.op;
	j.u.join.right = y.op;
	Val jv = x;
	jv.nvar = tb_join_keys(jv.var, x.nvar, y.var, y.nvar, &j.u.join.on);
	Kernel *k = kernel_new(p->arena, 2);
	tb_input_labels(k, 0, xt, x.var);
	tb_input_labels(k, 1, yt, y.var);
	k->noutdim = nchunk;
	memcpy(k->outlab, chunk, sizeof(int) * (size_t)nchunk);
	k->red = AGG_ADD;
	k->reduces = false;
	for (int d = 0; d < jv.nvar; d++)
		if (!(keep >> jv.var[d] & 1))
			k->reduces = true;
	tb_compact_labels(k);
	j.u.join.kernel = k;
	j.type = vars_type(t, xt->dtype, jv.nvar, jv.var, nchunk, chunk);
	jv.op = tra_push(p, j);
	if (!k->reduces && nkeys == jv.nvar) {
		bool same = true;
		for (int d = 0; d < nkeys; d++)
			same &= keys[d] == jv.var[d];
		if (same)
			return jv;
	}
	/* a rekey puts the keys in order; an aggregation sums the rest away */
	TraOp op = {.stmt = t->stmt, .grad_of = t->grad_of};
	if (!k->reduces) {
		op.kind = TRA_REKEY;
		op.u.rekey.in = jv.op;
		op.u.rekey.nkey = nkeys;
		var_positions(&jv, nkeys, keys, op.u.rekey.keymap);
	} else {
		op.kind = TRA_AGG;
		op.u.agg.in = jv.op;
		op.u.agg.agg = AGG_ADD;
		op.u.agg.ngroup = nkeys;
		var_positions(&jv, nkeys, keys, op.u.agg.group);
	}
	op.type = vars_type(t, xt->dtype, nkeys, keys, nchunk, chunk);
	Val out = {.op = tra_push(p, op), .nvar = nkeys};
	memcpy(out.var, keys, sizeof(int) * (size_t)nkeys);
	return out;
}

/* The variables of a set in the order they first appear in the leaves,
 * left to right: an intermediate's keys then follow its operands' (H[j,g]
 * W[g,c] keyed [j,c], not [c,j]), which is the layout a sparse product
 * with it reads by rows. */
static int vars_of(const Tree *t, VarSet v, int *out)
{
	int n = 0;
	for (int l = 0; l < t->nleaf; l++)
		for (int d = 0; d < t->leaf[l].nvar; d++) {
			int x = t->leaf[l].var[d];
			if (v >> x & 1) {
				out[n++] = x;
				v &= ~(1ull << x);
			}
		}
	return n;
}

static Val build_node(Build *b, const Plan *pl, int ni, bool root)
{
	const Node *nd = &pl->node[ni];
	if (nd->leaf >= 0) {
		const Leaf *lf = &b->t->leaf[nd->leaf];
		Val v = {.op = b->map[lf->op], .nvar = lf->nvar};
		memcpy(v.var, lf->var, sizeof v.var);
		return v;
	}
	Val x = build_node(b, pl, nd->a, false), y = build_node(b, pl, nd->b, false);
	if (root) {
		/* the old root's keys and chunk order */
		const RelType *rt = &b->t->roottype;
		int chunk[MAXDIM];
		for (int c = 0; c < rt->nchunk; c++)
			chunk[c] = b->t->out[rt->chunkdim[c]];
		return contract(b, x, y, b->o->outv, rt->nchunk, chunk, b->t->nout, b->t->out);
	}
	VarSet keep = kept(b->o, nd->set);
	int vars[MAXVAR];
	int n = vars_of(b->t, keep, vars);
	return contract(b, x, y, keep, n, vars, n, vars);
}


double opt_contract_limit(const OptOptions *o, int nranks)
{
	double mem = o->mem_per_rank > 0 ? o->mem_per_rank : o->machine ? o->machine->mem_per_rank : 0;
	if (mem <= 0)
		return INFINITY;
	return mem * (nranks > 0 ? nranks : 1) / 8;     /* elements, f64 at worst */
}

int opt_contract(TraProg *p, const OptOptions *o)
{
	return opt_contract_within(p, opt_contract_limit(o, o->nranks), NULL);
}

/* The most elements an intermediate of order pl holds (its root, the
 * result, aside). */
static double plan_largest(const Order *o, const Plan *pl)
{
	double most = 0;
	for (int i = 0; i < pl->n; i++)
		if (pl->node[i].leaf < 0 && i != pl->root)
			most = fmax(most, vol(o->t, kept(o, pl->node[i].set)));
	return most;
}

/* limit < 0: each tree's own, its current order's largest intermediate */
static int contract_trees(TraProg *p, double limit, double *largest)
{
	int n = p->ops.n, done = 0;
	int *uses = tra_nreaders(p);
	if (largest)
		*largest = 0;

	/* roots: tree ops no tree op above them absorbs */
	bool *inner = xcalloc(n + 1, sizeof *inner);
	Plan *plans = xcalloc(n + 1, sizeof *plans);
	Tree *trees = xcalloc(n + 1, sizeof *trees);
	bool *rebuild = xcalloc(n + 1, sizeof *rebuild);
	Order *orders = xcalloc(n + 1, sizeof *orders);
	for (int i = n - 1; i >= 0; i--) {
		const TraOp *op = &p->ops.v[i];
		if (inner[i] || !(sum_node(p, uses, op) || product_join(op)))
			continue;
		Tree *t = &trees[i];
		*t = (Tree){.p = p, .uses = uses, .root = i, .stmt = op->stmt, .grad_of = op->grad_of, .ok = true,
		            .roottype = op->type};
		int vars[MAXDIM];
		t->nout = op->type.nkey;
		for (int d = 0; d < op->type.nkey; d++)
			vars[d] = t->out[d] = fresh(t, op->type.extent[d]);
		bool *mark = xcalloc(n + 1, sizeof *mark);
		walk(t, i, vars, true, mark);
		if (!t->ok || t->nleaf < 3) {
			free(mark);
			continue;
		}
		for (int k = 0; k < n; k++)
			inner[k] |= mark[k] && k != i;
		/* the best order, against the current one's cost (walk's) */
		Order *ord = &orders[i];
		ord->t = t;
		ord->lv = xcalloc(MAXLEAF, sizeof(VarSet));
		for (int l = 0; l < t->nleaf; l++)
			ord->lv[l] = leaf_vars(t, l);
		ord->outv = 0;
		for (int d = 0; d < t->nout; d++)
			ord->outv |= 1ull << t->out[d];
		ord->limit = limit < 0 ? t->cur_largest : limit;
		Plan *pl = &plans[i];
		bool ok = t->nleaf <= EXACT ? order_exact(ord, pl) : order_greedy(ord, pl);
		if (ok && largest)
			*largest = fmax(*largest, plan_largest(ord, pl));
		if (ok && pl->flops < 0.99 * t->cur_flops)
			rebuild[i] = true;
		free(mark);
	}

	bool any = false;
	for (int i = 0; i < n; i++)
		any |= rebuild[i];
	if (any) {
		/* which ops the rebuilt trees replace */
		bool *drop = xcalloc(n + 1, sizeof *drop);
		for (int i = 0; i < n; i++) {
			if (!rebuild[i])
				continue;
			bool *mark = xcalloc(n + 1, sizeof *mark);
			int vars[MAXDIM];
			Tree t = {.p = p, .uses = uses, .root = i, .stmt = p->ops.v[i].stmt,
			          .grad_of = p->ops.v[i].grad_of, .ok = true};
			for (int d = 0; d < p->ops.v[i].type.nkey; d++)
				vars[d] = fresh(&t, p->ops.v[i].type.extent[d]);
			walk(&t, i, vars, true, mark);
			for (int k = 0; k < n; k++)
				drop[k] |= mark[k] && k != i;
			free(mark);
		}
		Vec(TraOp) old = {0};
		for (int i = 0; i < n; i++)
			vec_push(&old, p->ops.v[i]);
		p->ops.n = 0;
		int *map = xcalloc(n + 1, sizeof *map);
		for (int i = 0; i < n; i++) {
			if (drop[i])
				continue;
			if (rebuild[i]) {
				Build b = {p, &trees[i], &orders[i], map};
				Val v = build_node(&b, &plans[i], plans[i].root, true);
				map[i] = v.op;
				done++;
				continue;
			}
			TraOp op = old.v[i];
			tra_op_remap(&op, map);
			map[i] = tra_push(p, op);
		}
		free(map);
		vec_free(&old);
		free(drop);
	}
	for (int i = 0; i < n; i++)
		free(orders[i].lv);
	free(orders);
	free(rebuild);
	free(trees);
	free(plans);
	free(inner);
	free(uses);
	return done;
}

int opt_contract_within(TraProg *p, double limit, double *largest)
{
	return contract_trees(p, limit, largest);
}

int opt_contract_forward(TraProg *p)
{
	return contract_trees(p, -1, NULL);
}
