/*
 * test_rules.c: every equivalence rule of optimizer/rules.def, checked the
 * way the paper defines equivalence: both sides run (the in-process IA
 * interpreter, optimizer/interp.c) on random data over several simulated
 * sites, and the relations they write must hold the same values once the
 * site is projected away.  Each rule is tried on 1 to 4 sites and on
 * blocks that do not divide the extents; the rewritten plan must also pass
 * the IA verifier.  Then the searched plans of a few programs against
 * their Table 1 plans, the same way, and every row of optimizer/impls.def:
 * each candidate the search makes, built into a plan, against Table 1.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "optimizer/opt.h"
#include "optimizer/search.h"

static TraProg *compile(const char *text)
{
	diag_reset();
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	Arena *a = arena_new();
	FeOptions fo = {.warnings = false};
	TraProg *p = fe_compile(fe_parse(a, file), &fo);
	if (!p)
		fail_msg("does not compile:\n%s", text);
	opt_autodiff(p);
	return p;
}

/* Random values for every input and file-initialised param. */
static Dense **random_inputs(const TraProg *p, unsigned seed)
{
	Dense **in = xcalloc(p->tensors.n + 1, sizeof *in);
	uint64_t x = seed * 2654435761u + 12345;
	for (int t = 0; t < p->tensors.n; t++) {
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role != TENSOR_INPUT)
			continue;
		Dense *d = xcalloc(1, sizeof *d);
		d->rank = ten->rank;
		int64_t n = 1;
		for (int i = 0; i < ten->rank; i++) {
			d->shape[i] = ten->shape[i];
			n *= ten->shape[i];
		}
		d->v = xcalloc((size_t)n, sizeof *d->v);
		for (int64_t e = 0; e < n; e++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			/* integers are gather indices: below every extent they index */
			d->v[e] = dtype_is_int(ten->dtype) ? (double)((x >> 11) % 5) : (double)((x >> 11) % 2001) / 1000.0 - 1.0;
			if (ten->sparse && (x >> 40) % 3)
				d->v[e] = 0;    /* a third stored: sampling leaves the rest out */
		}
		in[t] = d;
	}
	return in;
}

static void free_dense_all(Dense **d, int n)
{
	for (int i = 0; i < n; i++)
		dense_free(d[i]);
	free(d);
}

/* Run both plans on the same random data over `sites` sites; their
 * outputs must agree. */
static void expect_equivalent(const IaPlan *a, const IaPlan *b, int sites, const char *what)
{
	const TraProg *p = a->tra;
	Buf err = {0};
	if (!ia_verify(a, &err) || !ia_verify(b, &err))
		fail_msg("%s: a plan fails the verifier: %s", what, err.s);
	Dense **in = random_inputs(p, (unsigned)sites * 7 + 1);
	Dense **oa = xcalloc(p->tensors.n + 1, sizeof *oa), **ob = xcalloc(p->tensors.n + 1, sizeof *ob);
	if (!ia_interpret(a, sites, in, oa, &err))
		fail_msg("%s: the left side fails on %d sites: %s", what, sites, err.s);
	if (!ia_interpret(b, sites, in, ob, &err))
		fail_msg("%s: the right side fails on %d sites: %s", what, sites, err.s);
	int outputs = 0;
	for (int t = 0; t < p->tensors.n; t++) {
		if (!p->tensors.v[t].output)
			continue;
		outputs++;
		if (!oa[t] || !ob[t])
			fail_msg("%s: output %s missing", what, p->tensors.v[t].name);
		int64_t n = 1;
		for (int d = 0; d < oa[t]->rank; d++)
			n *= oa[t]->shape[d];
		for (int64_t e = 0; e < n; e++) {
			double x = oa[t]->v[e], y = ob[t]->v[e];
			if (fabs(x - y) > 1e-9 * (1 + fabs(x)))
				fail_msg("%s on %d sites: %s[%lld] is %.17g on the left, %.17g on the right", what, sites,
				         p->tensors.v[t].name, (long long)e, x, y);
		}
	}
	assert_true(outputs > 0);
	free_dense_all(in, p->tensors.n);
	free_dense_all(oa, p->tensors.n);
	free_dense_all(ob, p->tensors.n);
	buf_free(&err);
}

/* ---- plan surgery, to make a rule's left side where lowering does not ---- */

/* Every reader of op `from` (at or after `after`) reads `to` instead. */
static void redirect(IaPlan *p, int from, int to, int after)
{
	for (int i = after; i < p->ops.n; i++) {
		IaOp *op = &p->ops.v[i];
		switch (op->kind) {
		case IA_BCAST: if (op->u.bcast.in == from) op->u.bcast.in = to; break;
		case IA_SHUFFLE: if (op->u.shuffle.in == from) op->u.shuffle.in = to; break;
		case IA_JOIN:
			if (op->u.join.left == from) op->u.join.left = to;
			if (op->u.join.right == from) op->u.join.right = to;
			break;
		case IA_AGG: if (op->u.agg.in == from) op->u.agg.in = to; break;
		case IA_MAP: if (op->u.map.in == from) op->u.map.in = to; break;
		case IA_FILTER: if (op->u.filter.in == from) op->u.filter.in = to; break;
		case IA_WRITE: if (op->u.write.in == from) op->u.write.in = to; break;
		case IA_STORE: case IA_PRINT: if (op->u.store.in == from) op->u.store.in = to; break;
		default: break;
		}
	}
}

/* Insert `op` right after op i (reading what it says), every later reader
 * of i made to read it when `reroute`; placements derived again. */
static IaPlan *insert_after(const IaPlan *p, int i, IaOp op, bool reroute)
{
	IaPlan *q = ia_clone(p);
	IaOp none = {0};
	vec_push(&q->ops, none);
	memmove(&q->ops.v[i + 2], &q->ops.v[i + 1], sizeof(IaOp) * (size_t)(q->ops.n - i - 2));
	/* renumber references to ops after i */
	for (int k = 0; k < q->ops.n; k++) {
		if (k == i + 1)
			continue;
		IaOp *o = &q->ops.v[k];
		int *refs[2] = {NULL, NULL};
		switch (o->kind) {
		case IA_BCAST: refs[0] = &o->u.bcast.in; break;
		case IA_SHUFFLE: refs[0] = &o->u.shuffle.in; break;
		case IA_JOIN: refs[0] = &o->u.join.left; refs[1] = &o->u.join.right; break;
		case IA_AGG: refs[0] = &o->u.agg.in; break;
		case IA_MAP: refs[0] = &o->u.map.in; break;
		case IA_FILTER: refs[0] = &o->u.filter.in; break;
		case IA_WRITE: refs[0] = &o->u.write.in; break;
		case IA_STORE: case IA_PRINT: refs[0] = &o->u.store.in; break;
		default: break;
		}
		for (int r = 0; r < 2; r++)
			if (refs[r] && *refs[r] > i)
				(*refs[r])++;
	}
	q->ops.v[i + 1] = op;
	if (reroute)
		redirect(q, i, i + 1, i + 2);
	Buf why = {0};
	for (int k = i + 1; k < q->ops.n; k++)
		if (!ia_derive_place(q, &q->ops.v[k], &q->ops.v[k].place, &why))
			fail_msg("surgery made an invalid plan at op %d: %s", k, why.s);
	return q;
}

static int find(const IaPlan *p, IaOpKind k, int from)
{
	for (int i = from; i < p->ops.n; i++)
		if (p->ops.v[i].kind == k)
			return i;
	return -1;
}

/* ---- the cases ---- */

typedef IaPlan *(*Prep)(IaPlan *p);

typedef struct Case {
	RuleId rule;
	int variants;
	const char *src;
	Prep prep;              /* makes the left side from Table 1's plan, or NULL */
} Case;

/* d[i] = X[i,i,i]'s filter of two pairs, split into two filters. */
static IaPlan *split_filter(IaPlan *p)
{
	int f = find(p, IA_FILTER, 0);
	assert_true(f >= 0 && p->ops.v[f].u.filter.pred.neq == 2);
	IaOp second = p->ops.v[f];
	second.u.filter.in = f;
	second.u.filter.pred.neq = 1;
	second.u.filter.pred.eq[0][0] = p->ops.v[f].u.filter.pred.eq[1][0];
	second.u.filter.pred.eq[0][1] = p->ops.v[f].u.filter.pred.eq[1][1];
	p->ops.v[f].u.filter.pred.neq = 1;
	IaPlan *q = insert_after(p, f, second, true);
	ia_free(p);
	return q;
}

/* A broadcast inserted after the first filter (every reader reads it). */
static IaPlan *bcast_after_filter(IaPlan *p)
{
	int f = find(p, IA_FILTER, 0);
	assert_true(f >= 0);
	IaOp b = {.kind = IA_BCAST, .stmt = p->ops.v[f].stmt, .tra = -1, .type = p->ops.v[f].type};
	b.u.bcast.in = f;
	IaPlan *q = insert_after(p, f, b, true);
	ia_free(p);
	return q;
}

/* A shuffle inserted after the first filter, onto key dim 0. */
static IaPlan *shuffle_after_filter(IaPlan *p)
{
	int f = find(p, IA_FILTER, 0);
	assert_true(f >= 0);
	int d0 = 0;
	IaOp b = {.kind = IA_SHUFFLE, .stmt = p->ops.v[f].stmt, .tra = -1, .type = p->ops.v[f].type,
	          .place = place_part(1, &d0)};
	b.u.shuffle.in = f;
	IaPlan *q = insert_after(p, f, b, true);
	ia_free(p);
	return q;
}

/* A shuffle, onto its own placement, after the first co-partitioned join. */
static IaPlan *coshuffle_then_reshuffle(IaPlan *p)
{
	int j = find(p, IA_JOIN, 0);
	IaPlan *q = rule_apply(RULE_R2_6, p, j, 2);
	assert_non_null(q);
	ia_free(p);
	j = find(q, IA_JOIN, 0);
	IaOp s = {.kind = IA_SHUFFLE, .stmt = q->ops.v[j].stmt, .tra = -1, .type = q->ops.v[j].type,
	          .place = q->ops.v[j].place};
	s.u.shuffle.in = j;
	IaPlan *r = insert_after(q, j, s, true);
	ia_free(q);
	return r;
}

/* Table 1's needless shuffles dropped first (R2-1, R2-4 everywhere). */
static IaPlan *drop_moves(IaPlan *p)
{
	for (int guard = 0; guard < 100; guard++) {
		int i = 0;
		while (i < p->ops.n && !rule_match(RULE_R2_1, p, i) && !rule_match(RULE_R2_4, p, i))
			i++;
		if (i == p->ops.n)
			return p;
		IaPlan *q = rule_apply(rule_match(RULE_R2_1, p, i) ? RULE_R2_1 : RULE_R2_4, p, i, 0);
		assert_non_null(q);
		ia_free(p);
		p = q;
	}
	return p;
}

/* Fused joins (F-1) where Table 1's aggregation follows a join. */
static IaPlan *fuse(IaPlan *p)
{
	p = drop_moves(p);
	int i = 0;
	while (i < p->ops.n && !rule_match(RULE_F_1, p, i))
		i++;
	if (i < p->ops.n) {
		IaPlan *q = rule_apply(RULE_F_1, p, i, 0);
		ia_free(p);
		p = q;
	}
	return p;
}

static const char mm[] =
	"size I = 7, K = 5, J = 6;\n"
	"input A[I, K];\ninput B[K, J];\n"
	"C[i, j] = A[i, k] * B[k, j];\noutput C;\n";

static const Case cases[] = {
	{RULE_R1_1, 1, "size N = 5;\ninput X[N, N, N];\nd[i] = X[i, i, i];\noutput d;\n", split_filter},
	{RULE_R1_2, 1, "size N = 5, M = 4;\ninput X[N, M];\nC[i, j] = relu(X[i, j]);\nD[i, j] = exp(C[i, j]);\noutput D;\n", NULL},
	{RULE_R1_3, 1, "size N = 6;\ninput X[N, N];\nd[i] = X[i, i];\noutput d;\n", NULL},
	{RULE_R1_3, 1, "size N = 5;\ninput X[N, N];\nY[i, j] = relu(X[i, j]);\nd[i] = Y[i, i];\noutput d;\n", NULL},
	{RULE_R1_4, 1, "size N = 5, M = 4;\ninput X[N, M];\ns[i] = X[i, j];\nt[i] = 2 * s[i];\noutput t;\n", NULL},
	{RULE_R1_4, 1, "size N = 5, M = 4;\ninput X[N, M];\nm[i] = max[j](X[i, j]);\nt[i] = relu(m[i]) + 1;\noutput t;\n", NULL},
	{RULE_R1_5, 1, "size N = 5, K = 3;\ninput X[N, N, K];\nY[i, j] = X[i, j, k];\nd[i] = Y[i, i];\noutput d;\n", NULL},
	{RULE_R1_6, 1, "size N = 5;\ninput X[N, N];\ninput W[N, N];\nZ[i, j] = X[i, j] * W[i, j];\nd[i] = Z[i, i];\noutput d;\n", NULL},
	{RULE_R1_7, 1, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\nZ[i, j] = X[i, j] * W[i, j];\nT[i, j] = exp(Z[i, j]);\noutput T;\n", NULL},
	{RULE_F_1, 1, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\ns[i] = X[i, j] * W[i, j];\noutput s;\n", drop_moves},
	{RULE_R2_1, 1, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\ns[i] = X[i, j] * W[i, j];\noutput s;\n", NULL},
	{RULE_R2_2, 2, "size N = 5;\ninput X[N, N];\nd[i] = X[i, i];\noutput d;\n", bcast_after_filter},
	{RULE_R2_2, 2, "size N = 5;\ninput X[N, N];\nd[i] = X[i, i];\noutput d;\n", shuffle_after_filter},
	{RULE_R2_3, 2, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\nE[i, j] = exp(X[i, j]);\nY[i, j] = E[i, j] * W[i, j];\noutput Y;\n", NULL},
	{RULE_R2_4, 1, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\ns[i] = X[i, j] * W[i, j];\noutput s;\n", NULL},
	{RULE_R2_5, 1, mm, NULL},
	{RULE_R2_6, 3, mm, NULL},
	{RULE_R2_6, 3, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\nZ[i, j] = X[i, j] * W[i, j];\noutput Z;\n", NULL},
	{RULE_R2_6, 3, mm, fuse},
	{RULE_R2_7, 1, "size N = 5, M = 4;\ninput X[N, M];\ninput W[N, M];\nZ[i, j] = X[i, j] * W[i, j];\noutput Z;\n",
	 coshuffle_then_reshuffle},
	{RULE_BMM, 2, mm, NULL},
	{RULE_BMM, 2, mm, fuse},
	{RULE_CMM, 1, mm, NULL},
	{RULE_CMM, 1, mm, fuse},
	{RULE_RMM, 2, mm, NULL},
	{RULE_RMM, 2, mm, fuse},
	{RULE_RMM, 2, "size B = 3, I = 5, K = 4, J = 6;\ninput A[B, I, K];\ninput X[B, K, J];\n"
	              "C[b, i, j] = A[b, i, k] * X[b, k, j];\noutput C;\n", NULL},
	{RULE_LOOKUP, 1, "size V = 7, D = 5, B = 6;\ninput E[V, D];\ninput idx[B] : i64;\nZ[b, d] = E[idx[b], d];\n"
	                 "G[v, b] = E[v, idx[b]];\noutput Z;\noutput G;\n", NULL},
};

static void run_case(const Case *c, int64_t block, int sites)
{
	TraProg *p = compile(c->src);
	OptOptions o = {.nranks = sites, .block = block};
	opt_block(p, &o);
	IaPlan *base = opt_table1(p, sites);
	if (c->prep)
		base = c->prep(base);
	int at = 0;
	while (at < base->ops.n && !rule_match(c->rule, base, at))
		at++;
	if (at == base->ops.n) {
		Buf b = {0};
		ia_print(&b, base, false);
		fail_msg("%s does not match anywhere in\n%s", rule_name(c->rule), b.s);
	}
	for (int v = 0; v < c->variants; v++) {
		IaPlan *q = rule_apply(c->rule, base, at, v);
		if (!q)
			fail_msg("%s variant %d matched op %d but did not apply", rule_name(c->rule), v, at);
		char what[64];
		snprintf(what, sizeof what, "%s variant %d, block %lld", rule_name(c->rule), v, (long long)block);
		expect_equivalent(base, q, sites, what);
		ia_free(q);
	}
	ia_free(base);
	tra_free(p);
}

static void test_rules(void **state)
{
	(void)state;
	bool covered[NRULES] = {0};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		covered[cases[i].rule] = true;
		for (int sites = 1; sites <= 4; sites++) {
			run_case(&cases[i], 2, sites);
			run_case(&cases[i], 3, sites);
		}
	}
	for (int r = 0; r < NRULES; r++)
		if (!covered[r])
			fail_msg("rule %s has no test", rule_name(r));
}

/* Every rule has a name, a meaning and a condition (the explain vocabulary). */
static void test_table(void **state)
{
	(void)state;
	for (int r = 0; r < NRULES; r++) {
		assert_non_null(rule_name(r));
		assert_true(strlen(rule_meaning(r)) > 10);
		assert_true(strlen(rule_condition(r)) > 2);
	}
	assert_string_equal(rule_name(RULE_R2_6), "R2-6");
}

/* A rule whose side condition fails does not match: R2-4 on an
 * aggregation whose input is partitioned on a dim it groups away. */
static void test_conditions(void **state)
{
	(void)state;
	TraProg *p = compile(mm);
	OptOptions o = {.nranks = 3, .block = 2};
	opt_block(p, &o);
	IaPlan *t1 = opt_table1(p, 3);
	int agg = find(t1, IA_AGG, 0);
	assert_false(rule_match(RULE_R2_4, t1, agg));     /* partials over k */
	assert_true(rule_match(RULE_R2_5, t1, agg));
	assert_false(rule_match(RULE_R1_1, t1, agg));
	ia_free(t1);
	tra_free(p);

	/* R1-3 does not move a diagonal kernel below its filter when the
	 * blocks are ragged: the off-diagonal chunks are not square */
	for (int n = 5; n <= 6; n++) {
		char src[96];
		snprintf(src, sizeof src, "size N = %d;\ninput X[N, N];\nd[i] = X[i, i];\noutput d;\n", n);
		p = compile(src);
		opt_block(p, &o);
		t1 = opt_table1(p, 3);
		int f = find(t1, IA_FILTER, 0), m = -1;
		for (int i = f + 1; i < t1->ops.n && m < 0; i++)
			if (t1->ops.v[i].kind == IA_MAP && t1->ops.v[i].u.map.in == f)
				m = i;
		assert_true(f >= 0 && m >= 0);
		assert_int_equal(rule_match(RULE_R1_3, t1, m), n == 6);
		ia_free(t1);
		tra_free(p);
	}
}

/* The searched plans against Table 1's: the same outputs on 1 to 4 sites. */
/* Sampled products: the sums over k and the difference computed only at
 * O's elements (optimizer/sparse.c makes them sampled joins). */
static const char sddmm[] =
	"size M = 7, N = 5, K = 5;\ninput O[M, N] : sparse;\ninput R[M, N] : sparse;\ninput U[M, K];\ninput V[N, K];\n"
	"E[i, j] = O[i, j] * (U[i, k] * V[j, k] - R[i, j]);\nS[i, j] = O[i, j] * (U[i, k] * V[j, k]);\n"
	"l = sum[i, j](E[i, j] * E[i, j]);\noutput E;\noutput S;\noutput l;\n";

/* The sampled joins of a program: there must be some in the SDDMM one. */
static int sampled_joins(const TraProg *p)
{
	int n = 0;
	for (int i = 0; i < p->ops.n; i++)
		n += p->ops.v[i].kind == TRA_JOIN && p->ops.v[i].u.join.mask.on;
	return n;
}

/* TransE (examples/transe.tra) at toy sizes: E read by three gathers. */
static const char transe[] =
	"size V = 7, NR = 5, D = 4, B = 6;\nconst lr = 0.5;\ninput h[B] : i64;\ninput r[B] : i64;\ninput t[B] : i64;\n"
	"input neg[B] : i64;\nparam E[V, D] = normal(0, 0.5);\nparam Rel[NR, D] = normal(0, 0.5);\nrepeat 2 {\n"
	"pos[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[t[b], d]) ** 2);\n"
	"ng[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[neg[b], d]) ** 2);\n"
	"loss = sum[b](relu(1 + pos[b] - ng[b]));\ndE = grad(loss, E);\ndR = grad(loss, Rel);\n"
	"E[v, d] -= lr * dE[v, d];\nRel[q, d] -= lr * dR[q, d];\n}\noutput E;\noutput Rel;\n";

static int scatters_into_base(const TraProg *p)
{
	int n = 0;
	for (int i = 0; i < p->ops.n; i++)
		n += p->ops.v[i].kind == TRA_SCATTER && p->ops.v[i].u.gather.base >= 0;
	return n;
}

static const char *programs[] = {
	mm,
	"size N = 9, D = 7;\ninput xq[D];\ninput X[N, D];\ninput A[D, D];\n"
	"diff[n, d] = X[n, d] - xq[d];\nproj[n, e] = diff[n, d] * A[d, e];\n"
	"dist[n] = proj[n, e] * diff[n, e];\nbest = argmin[n](dist[n]);\noutput best;\noutput dist;\n",
	"size N = 6, D = 5, H = 7, L = 3;\nconst eta = 0.1;\ninput X[N, D];\ninput Y[N, L];\n"
	"param W1[D, H] = normal(0, 0.1);\nparam W2[H, L] = normal(0, 0.1);\n"
	"repeat 2 {\n"
	"a1[n, h] = relu(X[n, d] * W1[d, h]);\na2[n, l] = sigmoid(a1[n, h] * W2[h, l]);\n"
	"g2[n, l] = a2[n, l] - Y[n, l];\ngW2[h, l] = a1[n, h] * g2[n, l];\n"
	"g1[n, h] = g2[n, l] * W2[h, l];\ng1b[n, h] = where(a1[n, h] > 0, g1[n, h], 0);\n"
	"gW1[d, h] = X[n, d] * g1b[n, h];\nW2[h, l] -= eta * gW2[h, l];\nW1[d, h] -= eta * gW1[d, h];\n"
	"}\noutput W1;\noutput W2;\n",
	"size I = 6, J = 5, K = 4, A = 3;\ninput X[I, J, K];\ninput B[J, A];\ninput C[K, A];\n"
	"M[i, a] = X[i, j, k] * B[j, a] * C[k, a];\noutput M;\n",
	"size P = 3, Q = 2, R = 3, S = 2, I = 4, J = 3, K = 4, L = 3;\n"
	"input X[P, I];\ninput Y[Q, J];\ninput T[I, J, K, L];\ninput Z[R, K];\ninput W[S, L];\n"
	"O[p, q, r, s] = X[p, i] * Y[q, j] * T[i, j, k, l] * Z[r, k] * W[s, l];\noutput O;\n",
	/* nine operands: the greedy order */
	"size A = 5, B = 2, C = 6, D = 3, E = 7, F = 2, G = 5, H = 3, I = 4, J = 2;\n"
	"input M1[A, B];\ninput M2[B, C];\ninput M3[C, D];\ninput M4[D, E];\ninput M5[E, F];\n"
	"input M6[F, G];\ninput M7[G, H];\ninput M8[H, I];\ninput M9[I, J];\n"
	"R[a, j] = M1[a, b] * M2[b, c] * M3[c, d] * M4[d, e] * M5[e, f] * M6[f, g] * M7[g, h] * M8[h, i] * M9[i, j];\n"
	"output R;\n",
	/* sampled products (SDDMM): E and S only at O's elements */
	sddmm,
	/* a table two gathers read: its gradient's scatters and the SGD step
	 * fold into scatters added into the table (optimizer/scatter.c) */
	transe,
};

/* Before autodiff a product is put in its cheaper order only when no
 * intermediate of it is bigger than one lowering's order holds, and an
 * intermediate's keys follow its operands' (H[j,g] W[g,c] is keyed [j,c],
 * the layout a sparse product reads by rows). */
static bool has_type(const TraProg *p, int64_t e0, int64_t e1)
{
	for (int i = 0; i < p->ops.n; i++) {
		const RelType *t = &p->ops.v[i].type;
		if (p->ops.v[i].kind != TRA_INPUT && t->nkey == 2 && t->extent[0] == e0 && t->extent[1] == e1)
			return true;
	}
	return false;
}

static void test_contract_forward(void **state)
{
	(void)state;
	/* Z = (A H) W as written: A H is 8 x 6; A (H W) holds 8 x 3, fewer flops */
	const char *gcn = "size V = 8, G = 6, C = 3;\ninput A[V, V];\ninput H[V, G];\ninput W[G, C];\n"
	                  "Z[i, c] = A[i, j] * H[j, g] * W[g, c];\noutput Z;\n";
	TraProg *p = compile(gcn);
	assert_false(has_type(p, 8, 3) && !has_type(p, 8, 6));
	assert_int_equal(opt_contract_forward(p), 1);
	Buf err = {0};
	if (!tra_verify(p, &err))
		fail_msg("forward order made invalid TRA: %s", err.s);
	if (!has_type(p, 8, 3) || has_type(p, 3, 8))
		fail_msg("H W is not keyed [j, c]");
	tra_free(p);
	/* (X Y) Z as written: 3*2*6 + 3*6*10 = 216 flops, X Y 3 x 6 = 18;
	 * X (Y Z): 2*6*10 + 3*2*10 = 180, but Y Z is 2 x 10 = 20 */
	const char *wider = "size I = 3, J = 2, K = 6, L = 10;\ninput X[I, J];\ninput Y[J, K];\ninput Z[K, L];\n"
	                    "R[i, l] = X[i, j] * Y[j, k] * Z[k, l];\noutput R;\n";
	p = compile(wider);
	assert_int_equal(opt_contract_forward(p), 0);
	assert_int_equal(opt_contract_within(p, INFINITY, NULL), 1);
	assert_true(has_type(p, 2, 10));
	tra_free(p);
}

/* A stabilised log-sum-exp's max is not differentiated (its two paths
 * cancel): no max's backward (first_extreme's min) is built, and dW is
 * what it is when the pattern is broken (s read twice) and the max's
 * backward is built, on the interpreter in f64. */
static int count_aggs(const TraProg *p, AggKind k)
{
	int n = 0;
	for (int i = 0; i < p->ops.n; i++)
		n += p->ops.v[i].kind == TRA_AGG && p->ops.v[i].u.agg.agg == k;
	return n;
}

static Dense *interpret_output(TraProg *p, const char *name)
{
	OptOptions o = {.nranks = 1, .block = 2, .verify = true, .level = 0};
	opt_block(p, &o);
	IaPlan *plan = opt_table1(p, 1);
	Dense **in = random_inputs(p, 5);
	Dense **out = xcalloc(p->tensors.n + 1, sizeof *out);
	Buf err = {0};
	if (!ia_interpret(plan, 1, in, out, &err))
		fail_msg("the interpreter fails: %s", err.s);
	Dense *r = NULL;
	for (int t = 0; t < p->tensors.n; t++)
		if (!strcmp(p->tensors.v[t].name, name)) {
			r = out[t];
			out[t] = NULL;
		}
	assert_non_null(r);
	free_dense_all(in, p->tensors.n);
	free_dense_all(out, p->tensors.n);
	ia_free(plan);
	return r;
}

static void test_lse_shift(void **state)
{
	(void)state;
	const char *head = "size N = 5, C = 4, D = 3;\ninput X[N, D];\ninput Y[N, C];\n"
	                   "param W[D, C] = normal(0, 1);\nZ[i, c] = X[i, d] * W[d, c];\nm[i] = max[c](Z[i, c]);\n";
	const char *tail = "loss = sum[i](sum[c](Y[i, c] * (lse[i] - Z[i, c])));\ndW = grad(loss, W);\noutput dW;\n";
	char lse[1024], broken[1024], swapped[1024];
	snprintf(lse, sizeof lse, "%slse[i] = m[i] + log(sum[c](exp(Z[i, c] - m[i])));\n%s", head, tail);
	snprintf(swapped, sizeof swapped, "%slse[i] = log(sum[c](exp(Z[i, c] - m[i]))) + m[i];\n%s", head, tail);
	snprintf(broken, sizeof broken, "%ss[i] = sum[c](exp(Z[i, c] - m[i]));\nlse[i] = m[i] + log(s[i]);\n%soutput s;\n",
	         head, tail);
	TraProg *a = compile(lse), *w = compile(swapped), *b = compile(broken);
	assert_int_equal(count_aggs(a, AGG_MIN), 0);
	assert_int_equal(count_aggs(w, AGG_MIN), 0);
	assert_int_equal(count_aggs(b, AGG_MIN), 1);
	Dense *da = interpret_output(a, "dW"), *dw = interpret_output(w, "dW"), *db = interpret_output(b, "dW");
	double most = 0;
	for (int e = 0; e < 12; e++) {
		most = fmax(most, fabs(db->v[e]));
		if (fabs(da->v[e] - db->v[e]) > 1e-12 * (1 + fabs(db->v[e])) || fabs(dw->v[e] - db->v[e]) > 1e-12 * (1 + fabs(db->v[e])))
			fail_msg("dW[%d]: %.17g and %.17g without the max's backward, %.17g with it", e, da->v[e], dw->v[e], db->v[e]);
	}
	assert_true(most > 1e-3);
	dense_free(da);
	dense_free(dw);
	dense_free(db);
	tra_free(a);
	tra_free(w);
	tra_free(b);
}

static void test_search(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof programs / sizeof *programs; i++)
		for (int sites = 1; sites <= 4; sites++)
			for (int64_t block = 2; block <= 3; block++) {
				TraProg *p0 = compile(programs[i]), *p = compile(programs[i]);
				OptOptions o = {.nranks = sites, .block = block, .verify = true, .level = 2};
				opt_block(p0, &o);
				IaPlan *t1 = opt_table1(p0, sites);
				opt_contract(p, &o);
				Buf terr = {0};
				if (!tra_verify(p, &terr))
					fail_msg("program %zu: contraction order made invalid TRA: %s", i, terr.s);
				opt_sparsity(p, &o);
				if (programs[i] == sddmm && sampled_joins(p) != 3)
					fail_msg("the SDDMM program has %d sampled joins, not 3", sampled_joins(p));
				opt_fuse_scatters(p);
				if (programs[i] == transe && scatters_into_base(p) != 6)
					fail_msg("the TransE program has %d scatters into a base, not 6", scatters_into_base(p));
				opt_block(p, &o);
				IaPlan *best = opt_plan(p, &o);
				char what[64];
				snprintf(what, sizeof what, "program %zu, block %lld", i, (long long)block);
				expect_equivalent(t1, best, sites, what);
				/* the searched plan moves no more than Table 1's */
				opt_cost(t1, NULL);
				if (best->total_bytes_sent > t1->total_bytes_sent * (1 + 1e-9) + 64)
					fail_msg("%s on %d sites: the searched plan sends %.6g bytes, Table 1's %.6g", what, sites,
					         best->total_bytes_sent, t1->total_bytes_sent);
				ia_free(t1);
				ia_free(best);
				tra_free(p);
				tra_free(p0);
			}
}

/* Every implementation of impls.def against Table 1: for each unit of a
 * few programs, each of its candidates (at most a few per row) built into
 * a plan whose other units take their first candidate; every row must be
 * tried somewhere. */
static const char *impl_programs[] = {
	mm,
	"size N = 7, M = 5;\ninput X[N, M];\ninput Q[N, N];\ns[m] = sum[n](X[n, m]);\nt[n] = max[m](X[n, m]);\n"
	"u[n, m] = exp(Q[n, m]);\nd[n] = u[n, n];\noutput s;\noutput t;\noutput d;\n",
	"size N = 6, M = 5;\ninput X[N, M];\ninput W[N, M];\nZ[i, j] = X[i, j] * W[i, j];\n"
	"Y[j, i] = Z[i, j];\noutput Y;\n",
	"size N = 6, D = 5, H = 7;\nconst eta = 0.1;\ninput X[N, D];\nparam W[D, H] = normal(0, 0.1);\n"
	"repeat 2 {\na[n, h] = X[n, d] * W[d, h];\ng[d, h] = X[n, d] * a[n, h];\nW[d, h] -= eta * g[d, h];\n}\n"
	"print W;\noutput W;\n",
	/* ranges: index values */
	"size N = 7, C = 5;\ninput L[N];\nY[n, c in C] = L[n] * f32(c);\nI[i in N, j in N] = f32(i == j) - f32(j);\n"
	"s = sum[i in N](f32(i) * L[i]);\noutput Y;\noutput I;\noutput s;\n",
	/* gathers: replicated and looked up; the gradient a scatter-add */
	"size V = 7, D = 5, B = 6;\ninput E[V, D];\ninput idx[B] : i64;\nparam W[V, D] = normal(0, 0.1);\n"
	"Z[b, d] = E[idx[b], d] * W[idx[b], d];\nG[v, b] = E[v, idx[b]];\nloss = sum[b, d](Z[b, d] ** 2);\n"
	"dW = grad(loss, W);\noutput Z;\noutput G;\noutput dW;\n",
	/* loop counters, windows that move with them, shifts and their gradients */
	"size N = 7, B = 2, NB = 4, D = 3;\ninput X[N, D];\nparam W[N, D] = normal(0, 1);\nparam A[B, D] = zeros;\n"
	"repeat e in 2 {\nrepeat b in NB {\nXb[n in B, d] = X[b*B + n + e, d];\n"
	"Y[i, d] = W[i - 1, d] * X[i, d] + W[i + 2, d];\nl = sum[i, d](Y[i, d] * Y[i, d]);\ng = grad(l, W);\n"
	"W[i, d] -= 0.1 * g[i, d];\nA[n, d] += Xb[n, d] * f32(b - e);\n}\n}\noutput A;\noutput W;\n",
	/* convolutions (TRA_CONV), padded and valid, and their gradients: convolutions too */
	"size N = 3, C = 2, O = 3, H = 7, W = 6, R = 3;\ninput X[N, C, H, W];\nparam K[O, C, R, R] = normal(0, 1);\n"
	"Y[n, o, y in H, x in W] = K[o, c, dy, dx] * X[n, c, y + dy - 1, x + dx - 1];\n"
	"V[n, o, y, x] = K[o, c, dy, dx] * X[n, c, y + dy, x + 2*dx];\n"
	"l = sum[n, o, y, x](Y[n, o, y, x] * Y[n, o, y, x]) + sum[n, o, y, x](V[n, o, y, x]);\n"
	"dK = grad(l, K);\ndX = grad(l, X);\noutput Y;\noutput V;\noutput dK;\noutput dX;\n",
	/* convolutions along blocked window dims (halos), valid and padded, 3-d */
	"size C = 2, O = 3, T = 5, H = 7, W = 6;\ninput X[C, T, H, W];\nparam K[O, C, 2, 3, 3] = normal(0, 1);\n"
	"V[o, t, y, x] = K[o, c, dt, dy, dx] * X[c, t + dt, y + dy, x + dx];\n"
	"Z[o, t in T, y in H, x in W] = K[o, c, dt, dy, dx] * X[c, t + dt, y + dy - 1, x + dx - 1];\n"
	"l = sum[o, t, y, x](V[o, t, y, x] * V[o, t, y, x]) + sum[o, t, y, x](Z[o, t, y, x]);\n"
	"dK = grad(l, K);\ndX = grad(l, X);\noutput V;\noutput Z;\noutput dK;\noutput dX;\n",
	/* sampled joins: each placement of the mask the search offers */
	sddmm,
	/* scatters into a base */
	transe,
	/* a convolution no sum absorbs: read_twice gives Y's another reader */
	"# read twice\nsize N = 2, C = 2, O = 3, H = 7, W = 6, R = 3;\ninput X[N, C, H, W];\ninput K[O, C, R, R];\n"
	"Y[n, o, y in H, x in W] = K[o, c, dy, dx] * X[n, c, y + dy - 1, x + dx - 1];\noutput Y;\n",
};

/* The program's first join or convolution read by a second aggregation,
 * the first's copy, written as a tensor of its own: a join no sum absorbs
 * (source programs never make one of a convolution). */
static void read_twice(TraProg *p)
{
	for (int a = 0; a < p->ops.n; a++) {
		const TraOp *agg = &p->ops.v[a];
		if (agg->kind != TRA_AGG)
			continue;
		for (int w = 0; w < p->ops.n; w++)
			if (p->ops.v[w].kind == TRA_OUTPUT && p->ops.v[w].u.output.in == a) {
				Tensor t = p->tensors.v[p->ops.v[w].u.output.tensor];
				t.name = "Y2";
				TraOp again = *agg, out = p->ops.v[w];
				out.u.output.in = tra_push(p, again);
				out.u.output.tensor = tra_add_tensor(p, t);
				tra_push(p, out);
				return;
			}
	}
	fail_msg("read_twice: no aggregation written");
}

static TraProg *impl_program(size_t i)
{
	TraProg *p = compile(impl_programs[i]);
	if (!strncmp(impl_programs[i], "# read twice", 12))
		read_twice(p);
	return p;
}

static void test_impls(void **state)
{
	(void)state;
	int tried[NIMPLS] = {0};
	for (size_t i = 0; i < sizeof impl_programs / sizeof *impl_programs; i++)
		for (int sites = 1; sites <= 4; sites++)
			for (int64_t block = 2; block <= 3; block++) {
				TraProg *p0 = impl_program(i), *p = impl_program(i);
				OptOptions o = {.nranks = sites, .block = block, .verify = true, .level = 2};
				opt_block(p0, &o);
				opt_sparsity(p, &o);
				opt_fuse_scatters(p);
				opt_block(p, &o);
				IaPlan *t1 = opt_table1(p0, sites);
				Machine m;
				machine_default(&m);
				Search s;
				search_init(&s, p, &o, &m, NULL);
				norm_varplace(&s);
				make_impls(&s);
				for (int t = 0; t < s.n; t++) {
					int per[NIMPLS] = {0};
					for (int c = 0; c < s.impls[t].n; c++) {
						ImplKind k = s.impls[t].v[c].kind;
						if (per[k]++ >= 2)
							continue;
						for (int u = 0; u < s.n; u++)
							s.choice[u] = s.impls[u].n > 0 ? 0 : -1;
						s.choice[t] = c;
						IaPlan *q = search_build(&s);
						char what[96];
						snprintf(what, sizeof what, "program %zu, op %d by %s, %d sites, block %lld", i, t,
						         impl_name(k), sites, (long long)block);
						expect_equivalent(t1, q, sites, what);
						tried[k]++;
						ia_free(q);
					}
				}
				search_free(&s);
				ia_free(t1);
				tra_free(p);
				tra_free(p0);
			}
	int untried = 0;
	for (int k = 0; k < NIMPLS; k++)
		if (!tried[k]) {
			print_error("implementation %s (%s) has no test\n", impl_name(k), impl_what(k));
			untried++;
		}
	if (untried)
		fail_msg("%d implementations have no test: add programs to impl_programs", untried);
}

/* ---- scatters into a base (optimizer/scatter.c) ---- */

/* A table W two gathers read, its gradient dW, then statement `use`. */
static char *fuse_program(const char *use)
{
	return xprintf("size V = 7, D = 5, B = 6;\ninput idx[B] : i64;\ninput jdx[B] : i64;\ninput X[V, D];\n"
	               "input lr;\nparam W[V, D] = normal(0, 0.5);\n"
	               "loss = sum[b, d](W[idx[b], d] * W[jdx[b], d] * X[idx[b], d]);\n"
	               "dW = grad(loss, W);\n%s\n", use);
}

/* Which sums fold: the joins folded, and the scatters into a base made,
 * then the folded program (Table 1's and the searched plan) against the
 * unfolded one's Table 1 plan on 1 to 4 sites, blocks that do not divide. */
static void test_fuse_scatters(void **state)
{
	(void)state;
	static const struct {
		const char *use;
		int folded, based;      /* joins folded, scatters into a base */
	} cases[] = {
		{"Y[v, d] = X[v, d] + dW[v, d];\noutput Y;", 2, 2},
		{"Y[v, d] = X[v, d] - 0.5 * dW[v, d];\noutput Y;", 2, 2},
		{"Y[v, d] = dW[v, d] / 4 + X[v, d];\noutput Y;", 2, 2},
		{"Y[v, d] = X[v, d] - lr * dW[v, d];\noutput Y;", 2, 2},
		{"W[v, d] -= 0.1 * dW[v, d];\noutput W;", 2, 2},
		/* dW folds alone (one scatter into the other); Y stays a join */
		{"Y[v, d] = X[v, d] * dW[v, d];\noutput Y;", 1, 1},
		{"Y[v, d] = dW[v, d] - X[v, d];\noutput Y;", 1, 1},
		{"Y[v, d] = 2 * X[v, d] + dW[v, d];\noutput Y;", 1, 1},
		{"Y[v, d] = X[v, d] + 1 + dW[v, d];\noutput Y;", 1, 1},
		{"Y[v, d] = exp(X[v, d]) + lr * lr * dW[v, d];\noutput Y;", 1, 1},
		/* dW read twice: it folds, Y does not */
		{"Y[v, d] = X[v, d] + dW[v, d] * dW[v, d];\noutput Y;", 1, 1},
		{"Y[v, d] = X[v, d] + dW[v, d];\noutput Y;\noutput dW;", 1, 1},
	};
	for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
		char *src = fuse_program(cases[c].use);
		TraProg *p = compile(src);
		OptOptions o0 = {.nranks = 1, .verify = true, .level = 2};
		opt_sparsity(p, &o0);
		int folded = opt_fuse_scatters(p);
		Buf err = {0};
		if (!tra_verify(p, &err))
			fail_msg("case %zu: scatter fusion made invalid TRA: %s", c, err.s);
		if (folded != cases[c].folded || scatters_into_base(p) != cases[c].based)
			fail_msg("case %zu (%s): %d joins folded, %d scatters into a base; expected %d, %d", c, cases[c].use,
			         folded, scatters_into_base(p), cases[c].folded, cases[c].based);
		tra_free(p);
		for (int sites = 1; sites <= 4; sites++)
			for (int64_t block = 2; block <= 3; block++) {
				TraProg *p0 = compile(src), *pf = compile(src), *ps = compile(src);
				OptOptions o = {.nranks = sites, .block = block, .verify = true, .level = 2};
				opt_block(p0, &o);
				IaPlan *t1 = opt_table1(p0, sites);
				opt_sparsity(pf, &o);
				opt_fuse_scatters(pf);
				opt_block(pf, &o);
				IaPlan *f1 = opt_table1(pf, sites);
				opt_sparsity(ps, &o);
				opt_fuse_scatters(ps);
				opt_block(ps, &o);
				IaPlan *best = opt_plan(ps, &o);
				char what[96];
				snprintf(what, sizeof what, "fuse case %zu, Table 1, block %lld", c, (long long)block);
				expect_equivalent(t1, f1, sites, what);
				snprintf(what, sizeof what, "fuse case %zu, searched, block %lld", c, (long long)block);
				expect_equivalent(t1, best, sites, what);
				ia_free(t1);
				ia_free(f1);
				ia_free(best);
				tra_free(p0);
				tra_free(pf);
				tra_free(ps);
			}
		free(src);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table),
		cmocka_unit_test(test_conditions),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_contract_forward),
		cmocka_unit_test(test_lse_shift),
		cmocka_unit_test(test_search),
		cmocka_unit_test(test_impls),
		cmocka_unit_test(test_fuse_scatters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
