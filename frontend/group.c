/*
 * group.c: a product's factors grouped so that no intermediate has more
 * indices than a tensor may (MAXDIM, 8), when some grouping fits.
 *
 * Lowering joins a product's factors as the parser grouped them, left to
 * right, and Einstein's rule sums an index at the smallest sub-expression
 * holding it, so the join of two groups of factors holds every index either
 * group has that a factor outside it, another term or the left side still
 * needs (the group's *live* indices).  In
 *
 *   Y[d, e] = T0[d] * T1[e] * T2[g, i, h, b] * T3[g, i, f, a, b, c] * T4[h, f, a, c];
 *
 * the join of T0 T1 T2 with T3 holds 10 indices; T2 T3 first, then T4,
 * then T0 and T1 never holds more than 7.  For each maximal product (a
 * tree of '*' nodes; a node of another kind is a factor) whose written
 * grouping has a join over the limit, fe_group_products rebuilds it in the
 * grouping that fits at the fewest flops (each join costs the product of
 * its indices' extents, contract.c's measure; contract.c later reorders
 * among the groupings that fit), or reports the narrowest join any
 * grouping needs when none fits.  A product whose written grouping fits
 * is left as written, so no program that compiled before changes.  The
 * body of an explicit sum is a product too: its sum's indices, when the
 * product must be regrouped, are summed where Einstein's rule would sum
 * them (the same value).
 *
 * The groupings are searched exactly over the sets of factors up to EXACT
 * factors (3^n splits), greedily beyond, up to 32 (the narrowest join
 * first).  Factors without indices (numbers, counters, scalars) take no
 * part: they multiply the rebuilt product from the left.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

#define EXACT 14                /* factors searched exactly */
#define MAXFACTOR 32            /* factors with indices of a product regrouped (the bits of a Set) */
#define MAXVAR 64               /* indices of a product regrouped (the bits of a VarSet) */
#define MAXSCALAR 256           /* factors without indices */

typedef uint64_t VarSet;        /* a set of the product's indices, by local number */
typedef uint32_t Set;           /* a set of its factors with indices, by position */

typedef struct Product {
	Sema *s;
	Node *factor[MAXFACTOR];        /* the factors with indices, in written order */
	VarSet fv[MAXFACTOR];           /* their free indices */
	int nfactor;
	Node *scalar[MAXSCALAR];        /* the factors without */
	int nscalar;
	int var[MAXVAR];                /* local number -> the statement's var */
	int nvar;
	VarSet outside;                 /* indices needed beyond the product */
	bool ok;                        /* false: too many to regroup */
} Product;

static int width(VarSet v)
{
	return __builtin_popcountll(v);
}

static bool is_product(const Node *n)
{
	return n->kind == N_BINARY && n->u.binary.op == B_MUL;
}

/* The local number of the statement's var v, made on first sight. */
static int local_var(Product *p, int v)
{
	for (int i = 0; i < p->nvar; i++)
		if (p->var[i] == v)
			return i;
	if (p->nvar == MAXVAR) {
		p->ok = false;
		return 0;
	}
	p->var[p->nvar] = v;
	return p->nvar++;
}

/* The free indices of n: those no reduction inside n binds. */
static VarSet node_vars(Product *p, Node *n)
{
	VarSet v = 0;
	if (n->kind == N_INDEX)
		return 1ull << local_var(p, n->u.name.var);
	if (n->kind == N_ACCESS) {
		int var[MAX_ACCESS_VARS], k = fe_access_vars(n, var);
		for (int i = 0; i < k; i++)
			v |= 1ull << local_var(p, var[i]);
		return v;
	}
	Node **kids[3];
	int k = fe_children(n, kids);
	for (int i = 0; i < k; i++)
		v |= node_vars(p, *kids[i]);
	if (n->kind == N_REDUCE)
		for (int i = 0; i < n->u.reduce.nnames; i++)
			for (int j = 0; j < p->nvar; j++)
				if (p->var[j] == n->u.reduce.var[i])
					v &= ~(1ull << j);
	return v;
}

/* The factors of the product at n, in written order. */
static void flatten(Product *p, Node *n)
{
	if (is_product(n)) {
		flatten(p, n->u.binary.a);
		flatten(p, n->u.binary.b);
		return;
	}
	VarSet v = node_vars(p, n);
	if (v && p->nfactor < MAXFACTOR) {
		p->fv[p->nfactor] = v;
		p->factor[p->nfactor++] = n;
	} else if (!v && p->nscalar < MAXSCALAR) {
		p->scalar[p->nscalar++] = n;
	} else {
		p->ok = false;
	}
}

/* The indices of the factors in a. */
static VarSet vars_of(const Product *p, Set a)
{
	VarSet v = 0;
	for (int i = 0; i < p->nfactor; i++)
		if (a >> i & 1)
			v |= p->fv[i];
	return v;
}

static Set all_factors(const Product *p)
{
	return p->nfactor == 32 ? ~0u : (1u << p->nfactor) - 1;
}

/* The indices a group of factors still holds after its joins: those
 * needed beyond the product or by a factor outside the group (the others
 * are summed inside it). */
static VarSet live(const Product *p, Set a)
{
	return vars_of(p, a) & (p->outside | vars_of(p, all_factors(p) & ~a));
}

/* The widest join of the grouping written at n; *set: the factors under n. */
static int written_width(const Product *p, const Node *n, Set *set)
{
	*set = 0;
	if (!is_product(n)) {
		for (int i = 0; i < p->nfactor; i++)
			if (p->factor[i] == n)
				*set = 1u << i;
		return 0;
	}
	Set a, b;
	int w = written_width(p, n->u.binary.a, &a), wb = written_width(p, n->u.binary.b, &b);
	*set = a | b;
	if (wb > w)
		w = wb;
	if (a && b && width(live(p, a) | live(p, b)) > w)
		w = width(live(p, a) | live(p, b));
	return w;
}

static double volume(const Product *p, VarSet v)
{
	double x = 1;
	for (; v; v &= v - 1)
		x *= (double)p->s->vars.v[p->var[__builtin_ctzll(v)]].extent;
	return x;
}

/* A grouping under search: per set of factors, its indices, the split
 * made (the half holding its first factor), its widest join and its
 * flops. */
typedef struct Grouping {
	VarSet *vars;
	Set *split;
	int *widest;
	double *flops;
} Grouping;

/* Is (w, f) better than (bw, bf): narrower, then cheaper. */
static bool better(int w, double f, int bw, double bf)
{
	return w < bw || (w == bw && f < bf);
}

/* Exact: every split of every set of factors, the smaller sets first. */
static void group_exact(const Product *p, Grouping *g)
{
	Set full = all_factors(p);
	for (Set s = 1; s <= full; s++)
		g->vars[s] = g->vars[s & (s - 1)] | p->fv[__builtin_ctz(s)];
	for (Set s = 1; s <= full; s++) {
		g->widest[s] = s & (s - 1) ? INT32_MAX : 0;
		g->flops[s] = 0;
		Set low = s & -s;
		for (Set a = (s - 1) & s; a && (s & (s - 1)); a = (a - 1) & s) {
			if (!(a & low))
				continue;
			Set b = s ^ a;
			/* a group's live indices: see live() */
			VarSet j = (g->vars[a] & (p->outside | g->vars[full ^ a])) |
			           (g->vars[b] & (p->outside | g->vars[full ^ b]));
			int w = width(j);
			if (w < g->widest[a])
				w = g->widest[a];
			if (w < g->widest[b])
				w = g->widest[b];
			double f = g->flops[a] + g->flops[b] + volume(p, j);
			if (better(w, f, g->widest[s], g->flops[s])) {
				g->widest[s] = w;
				g->flops[s] = f;
				g->split[s] = a;
			}
		}
	}
}

/* a * b, a new node of the product. */
static Node *times(Sema *s, Node *a, Node *b)
{
	Node *n = fe_ast_node(s->arena, N_BINARY, loc_span(a->loc, b->loc));
	n->u.binary.op = B_MUL;
	n->u.binary.a = a;
	n->u.binary.b = b;
	n->height = (a->height > b->height ? a->height : b->height) + 1;
	return n;
}

/* The product of the factors in a, grouped by split. */
static Node *build(Product *p, const Set *split, Set a)
{
	if (!(a & (a - 1)))
		return p->factor[__builtin_ctz(a)];
	return times(p->s, build(p, split, split[a]), build(p, split, a ^ split[a]));
}

/* Greedy, for many factors: join the pair of groups whose join is
 * narrowest (then cheapest) until one group is left, recording each
 * join's split; the widest join made. */
static int group_greedy(const Product *p, Set *split, int nsplit)
{
	Set group[MAXFACTOR];
	int n = p->nfactor, widest = 0, nmade = 0;
	for (int i = 0; i < n; i++)
		group[i] = 1u << i;
	while (n > 1) {
		int bi = 0, bj = 1, bw = INT32_MAX;
		double bf = 0;
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++) {
				VarSet v = live(p, group[i]) | live(p, group[j]);
				if (better(width(v), volume(p, v), bw, bf)) {
					bw = width(v);
					bf = volume(p, v);
					bi = i;
					bj = j;
				}
			}
		if (bw > widest)
			widest = bw;
		Set u = group[bi] | group[bj];
		Set a = group[bi] & (u & -u) ? group[bi] : group[bj];
		if (nmade < nsplit) {
			split[2 * nmade] = u;
			split[2 * nmade + 1] = a;
			nmade++;
		}
		group[bi] = u;
		group[bj] = group[--n];
	}
	return widest;
}

/* The greedy's product: its joins replayed (split holds pairs: a join's
 * set, then its half holding its first factor). */
static Node *build_greedy(Product *p, const Set *split, int njoin, Set a)
{
	for (int i = 0; i < njoin; i++)
		if (split[2 * i] == a) {
			Node *x = build_greedy(p, split, njoin, split[2 * i + 1]);
			return times(p->s, x, build_greedy(p, split, njoin, a ^ split[2 * i + 1]));
		}
	return p->factor[__builtin_ctz(a)];
}

/* The indices of p needed beyond it: on the left, in another term, or
 * bound by a reduction around it; an explicit sum's (summed, or NULL)
 * only when inside is false. */
static VarSet outside(const Product *p, Node *root, Node *n, int nlhs, const int *lhs,
                      const Node *summed, bool inside)
{
	VarSet o = 0;
	for (int i = 0; i < p->nvar; i++) {
		int v = p->var[i];
		bool out = fe_count_var(root, v) != fe_count_var(n, v) || p->s->vars.v[v].reduced;
		for (int j = 0; j < nlhs; j++)
			out |= lhs[j] == v;
		for (int j = 0; inside && summed && j < summed->u.reduce.nnames; j++)
			if (summed->u.reduce.var[j] == v)
				out = fe_count_var(root, v) != fe_count_var(n, v);
		if (out)
			o |= 1ull << i;
	}
	return o;
}

/* The product at *slot regrouped when its written grouping is too wide;
 * summed: the explicit sum whose body it is, whose indices may then be
 * summed inside it, or NULL.  *regrouped: it was rebuilt.  False
 * (reported) when no grouping fits. */
static bool group_one(Sema *s, Node **root, Node **slot, int nlhs, const int *lhs, const Node *summed,
                      bool *regrouped)
{
	Product p = {.s = s, .ok = true};
	*regrouped = false;
	flatten(&p, *slot);
	if (!p.ok || p.nfactor < 3)
		return true;
	Set top;
	p.outside = outside(&p, *root, *slot, nlhs, lhs, summed, false);
	int written = written_width(&p, *slot, &top);
	if (written <= MAXDIM)
		return true;
	p.outside = outside(&p, *root, *slot, nlhs, lhs, summed, true);
	Node *product;
	if (p.nfactor <= EXACT) {
		size_t n = (size_t)1 << p.nfactor;
		Grouping g = {xcalloc(n, sizeof(VarSet)), xcalloc(n, sizeof(Set)), xcalloc(n, sizeof(int)),
		              xcalloc(n, sizeof(double))};
		group_exact(&p, &g);
		int best = g.widest[all_factors(&p)];
		product = best <= MAXDIM ? build(&p, g.split, all_factors(&p)) : NULL;
		free(g.vars);
		free(g.split);
		free(g.widest);
		free(g.flops);
		if (!product) {
			diag(DIAG_ERROR, (*slot)->loc, "this product joins %d indices at once however its factors are "
			     "grouped (%d as written); trac supports at most %d", best, written, MAXDIM);
			return false;
		}
	} else {
		Set split[2 * MAXFACTOR];
		if (group_greedy(&p, split, MAXFACTOR) > MAXDIM)
			return true;    /* the rank check reports the written grouping */
		product = build_greedy(&p, split, p.nfactor - 1, all_factors(&p));
	}
	for (int i = p.nscalar - 1; i >= 0; i--)
		product = times(s, p.scalar[i], product);
	*slot = product;
	*regrouped = true;
	return true;
}

static bool walk(Sema *s, Node **root, Node **slot, int nlhs, const int *lhs);

/* The factors under the product at n, walked (its '*' nodes are not
 * grouped again). */
static bool walk_factors(Sema *s, Node **root, Node *n, int nlhs, const int *lhs)
{
	bool ok = true;
	for (int i = 0; i < 2; i++) {
		Node **kid = i ? &n->u.binary.b : &n->u.binary.a;
		ok &= is_product(*kid) ? walk_factors(s, root, *kid, nlhs, lhs) : walk(s, root, kid, nlhs, lhs);
	}
	return ok;
}

static bool walk(Sema *s, Node **root, Node **slot, int nlhs, const int *lhs)
{
	Node *n = *slot;
	bool regrouped;
	if (is_product(n))
		return group_one(s, root, slot, nlhs, lhs, NULL, &regrouped) && walk_factors(s, root, *slot, nlhs, lhs);
	if (n->kind == N_REDUCE && n->u.reduce.red == R_SUM && !n->u.reduce.implicit && is_product(n->u.reduce.body)) {
		if (!group_one(s, root, &n->u.reduce.body, nlhs, lhs, n, &regrouped))
			return false;
		if (regrouped) {
			/* its indices are now summed by Einstein's rule, where it
			 * places them: inside the regrouped product */
			for (int i = 0; i < n->u.reduce.nnames; i++)
				s->vars.v[n->u.reduce.var[i]].reduced = false;
			*slot = n->u.reduce.body;
		}
		return walk_factors(s, root, n->u.reduce.body, nlhs, lhs);
	}
	Node **kids[3];
	int k = fe_children(n, kids);
	bool ok = true;
	for (int i = 0; i < k; i++)
		ok &= walk(s, root, kids[i], nlhs, lhs);
	return ok;
}

/* Every product of the right side *root whose written grouping has a join
 * wider than MAXDIM, regrouped to fit (see the top); false (reported) when
 * one cannot be.  lhs: the left side's vars.  Runs before the implicit sums
 * are placed. */
bool fe_group_products(Sema *s, Node **root, int nlhs, const int *lhs)
{
	return walk(s, root, root, nlhs, lhs);
}
