/*
 * test_hoist.c: loop-invariant code motion moves what does not change
 * between iterations, and only that.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "optimizer/opt.h"

static TraProg *compile(const char *text)
{
	diag_reset();
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	FeOptions fo = {.warnings = false};
	TraProg *p = fe_compile(fe_parse(arena_new(), file), &fo);
	assert_non_null(p);
	opt_autodiff(p);
	return p;
}

/* Position of the loop op, and of the first op reading tensor `name`'s
 * input op through a join. */
static int find(const TraProg *p, TraOpKind k, int nth)
{
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].kind == k && nth-- == 0)
			return i;
	return -1;
}

static void test_invariant_join_moves(void **state)
{
	TraProg *p = compile(
		"size N = 4;\ninput A[N, N];\ninput X[N, N];\nparam W[N, N] = ones;\n"
		"repeat 3 {\n"
		"  AX[i, j] = A[i, k] * X[k, j];\n"          /* invariant: moves */
		"  Y[i, j] = AX[i, k] * W[k, j];\n"          /* reads W: stays */
		"  W[i, j] -= 0.1 * Y[i, j];\n"
		"}\noutput W;\n");
	int j0 = find(p, TRA_JOIN, 0), j1 = find(p, TRA_JOIN, 1), loop = find(p, TRA_LOOP, 0);
	assert_true(j0 > loop && j1 > loop);
	opt_hoist(p);
	Buf err = {0};
	assert_true(tra_verify(p, &err));
	loop = find(p, TRA_LOOP, 0);
	j0 = find(p, TRA_JOIN, 0);
	j1 = find(p, TRA_JOIN, 1);
	assert_true(j0 < loop);         /* A X before the loop */
	assert_true(j1 > loop);         /* (A X) W inside it */
	/* the aggregation of A X moved with it */
	int a0 = find(p, TRA_AGG, 0);
	assert_true(a0 < loop && p->ops.v[a0].u.agg.in == j0);
	tra_free(p);
}

static void test_nested_loops(void **state)
{
	TraProg *p = compile(
		"size N = 4;\ninput A[N];\nparam w[N] = ones;\n"
		"repeat 2 {\n"
		"  s[i] = w[i] * 2;\n"                      /* reads w: stays in the outer loop */
		"  repeat 3 {\n"
		"    t[i] = s[i] + A[i];\n"                 /* invariant in the inner loop only */
		"    u[i] = exp(A[i]);\n"                   /* invariant in both */
		"    w[i] -= 0.01 * t[i] * u[i];\n"
		"  }\n"
		"}\noutput w;\n");
	opt_hoist(p);
	Buf err = {0};
	assert_true(tra_verify(p, &err));
	int outer = find(p, TRA_LOOP, 0), inner = find(p, TRA_LOOP, 1);
	int exp_map = -1, t_join = -1;
	for (int i = 0; i < p->ops.n; i++) {
		const TraOp *op = &p->ops.v[i];
		if (op->kind == TRA_MAP && op->u.map.kernel->expr->kind == KX_OP &&
		    op->u.map.kernel->expr->op == KOP_EXP)
			exp_map = i;
		if (op->kind == TRA_JOIN && op->u.join.kernel->expr->kind == KX_OP &&
		    op->u.join.kernel->expr->op == KOP_ADD)
			t_join = i;
	}
	assert_true(exp_map >= 0 && exp_map < outer);       /* out of both loops */
	assert_true(t_join > outer && t_join < inner);      /* out of the inner loop only */
	tra_free(p);
}

static void test_effects_stay(void **state)
{
	TraProg *p = compile(
		"size N = 4;\ninput A[N];\nparam w[N] = ones;\n"
		"repeat 3 {\n  s = sum[i](A[i]);\n  print s;\n  w[i] -= 0.1 * A[i];\n}\noutput w;\n");
	opt_hoist(p);
	int loop = find(p, TRA_LOOP, 0), print = find(p, TRA_PRINT, 0), store = find(p, TRA_STORE, 1);
	assert_true(print > loop && store > loop);  /* printed and stored every iteration */
	tra_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_invariant_join_moves),
		cmocka_unit_test(test_nested_loops),
		cmocka_unit_test(test_effects_stay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
