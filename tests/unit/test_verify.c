/*
 * test_verify.c: the TRA and IA verifiers accept what the passes make and
 * catch each broken invariant they are meant to catch.
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

static const char matmul[] =
	"size I = 10, K = 7, J = 3;\n"
	"input A[I, K];\ninput B[K, J];\n"
	"C[i, j] = A[i, k] * B[k, j];\n"
	"D[j, i] = relu(C[i, j]) + 1;\n"
	"output D;\n";

static TraProg *compile(const char *text)
{
	diag_reset();
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	Arena *a = arena_new();
	FeOptions fo = {.warnings = false};
	TraProg *p = fe_compile(fe_parse(a, file), &fo);
	assert_non_null(p);
	return p;
}

static void expect_tra_error(TraProg *p, const char *want)
{
	Buf err = {0};
	assert_false(tra_verify(p, &err));
	if (!strstr(err.s, want))
		fail_msg("expected '%s' in '%s'", want, err.s);
	buf_free(&err);
}

static int find_op(const TraProg *p, TraOpKind k)
{
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].kind == k)
			return i;
	fail_msg("no %s op", tra_op_name(k));
	return -1;
}

static void test_tra_ok(void **state)
{
	TraProg *p = compile(matmul);
	Buf err = {0};
	assert_true(tra_verify(p, &err));
	OptOptions o = {.nranks = 3, .block = 4};
	opt_block(p, &o);
	assert_true(tra_verify(p, &err));
	/* blocking gives matched dims one block size */
	int j = find_op(p, TRA_JOIN);
	assert_int_equal(p->ops.v[j].type.block[1], 4);
	tra_free(p);
}

static void test_tra_join_mismatch(void **state)
{
	TraProg *p = compile(matmul);
	int j = find_op(p, TRA_JOIN);
	p->ops.v[j].u.join.on.rkey[0] = 1;          /* k of A against j of B */
	expect_tra_error(p, "differ in extent or block");
	tra_free(p);
}

static void test_tra_order(void **state)
{
	TraProg *p = compile(matmul);
	int j = find_op(p, TRA_JOIN);
	p->ops.v[j].u.join.left = j;             /* reads itself */
	expect_tra_error(p, "input 0 is op");
	tra_free(p);
}

static void test_tra_kernel_labels(void **state)
{
	TraProg *p = compile(matmul);
	int j = find_op(p, TRA_JOIN);
	Kernel *k = p->ops.v[j].u.join.kernel;
	int t = k->inlab[1][0];
	k->inlab[1][0] = k->inlab[1][1];         /* B's k and j swapped */
	k->inlab[1][1] = t;
	expect_tra_error(p, "kernel");
	tra_free(p);
}

static void test_tra_agg_chunk(void **state)
{
	TraProg *p = compile(matmul);
	int a = find_op(p, TRA_AGG);
	p->ops.v[a].u.agg.group[1] = 1;          /* group on the summed k */
	expect_tra_error(p, "");
	tra_free(p);
}

static void test_ia_ok_and_placement(void **state)
{
	TraProg *p = compile(matmul);
	OptOptions o = {.nranks = 3, .block = 4, .verify = true};
	opt_block(p, &o);
	IaPlan *plan = opt_table1(p, 3);
	Buf err = {0};
	assert_true(ia_verify(plan, &err));

	/* a join of a partitioned A with a partitioned B on k is not co-partitioned
	 * when A is partitioned on i: remove the broadcast */
	for (int i = 0; i < plan->ops.n; i++) {
		IaOp *op = &plan->ops.v[i];
		if (op->kind == IA_JOIN && plan->ops.v[op->u.join.left].kind == IA_BCAST) {
			op->u.join.left = plan->ops.v[op->u.join.left].u.bcast.in;
			break;
		}
	}
	assert_false(ia_verify(plan, &err));
	assert_non_null(strstr(err.s, "not co-partitioned"));
	buf_free(&err);
	ia_free(plan);
	tra_free(p);
}

static void test_ia_partial_write(void **state)
{
	TraProg *p = compile(matmul);
	OptOptions o = {.nranks = 3, .block = 4, .verify = true, .level = 1};   /* -O1 keeps the partial fused join */
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	Buf err = {0};
	assert_true(ia_verify(plan, &err));
	/* find the join fused with its aggregation: its output is partial;
	 * make the write read it directly */
	int fused = -1, write = -1;
	for (int i = 0; i < plan->ops.n; i++) {
		if (plan->ops.v[i].kind == IA_JOIN && plan->ops.v[i].u.join.ngroup >= 0)
			fused = i;
		if (plan->ops.v[i].kind == IA_WRITE)
			write = i;
	}
	assert_true(fused >= 0 && write >= 0);
	assert_int_equal(plan->ops.v[fused].place.kind, PL_PARTIAL);
	plan->ops.v[write].u.write.in = fused;
	assert_false(ia_verify(plan, &err));
	buf_free(&err);
	ia_free(plan);
	tra_free(p);
}

/* ops.def's inputs column: what tra_inputs, ia_inputs and the remaps read,
 * optional inputs (a slice's offset, a scatter's base, a sampled join's
 * mask) only when there; kernels cloned by ia_op_remap. */
static void test_inputs_column(void **state)
{
	(void)state;
	int in[MAXIN];
	TraOp slice = {.kind = TRA_SLICE, .u.slice = {.in = 4, .off = -1}};
	assert_int_equal(tra_inputs(&slice, in), 1);
	slice.u.slice.off = 2;
	assert_int_equal(tra_inputs(&slice, in), 2);
	assert_int_equal(in[1], 2);
	TraOp conv = {.kind = TRA_CONV, .u.join = {.left = 1, .right = 3}};
	assert_int_equal(tra_inputs(&conv, in), 2);
	assert_int_equal(in[0], 1);
	assert_int_equal(in[1], 3);

	Arena *a = arena_new();
	Kernel k = {.nin = 2, .expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL)};
	IaOp j = {.kind = IA_JOIN, .u.join = {.left = 0, .right = 1, .kernel = &k}};
	assert_int_equal(ia_inputs(&j, in), 2);
	j.u.join.mask = (JoinMask){.on = true, .rel = 2};
	assert_int_equal(ia_inputs(&j, in), 3);
	assert_int_equal(in[2], 2);
	int map[] = {10, 11, 12, 13};
	IaOp r = ia_op_remap(&j, map, a);
	assert_int_equal(r.u.join.left, 10);
	assert_int_equal(r.u.join.right, 11);
	assert_int_equal(r.u.join.mask.rel, 12);
	assert_true(ia_op_kernel(&r) != &k && ia_op_kernel(&r)->nin == 2);
	assert_ptr_equal(ia_op_kernel(&j), &k);

	IaOp sc = {.kind = IA_SCATTER, .u.gather = {.src = 0, .index = 1, .base = -1}};
	assert_int_equal(ia_inputs(&sc, in), 2);
	r = ia_op_remap(&sc, map, a);
	assert_int_equal(r.u.gather.base, -1);
	sc.u.gather.base = 3;
	assert_int_equal(ia_inputs(&sc, in), 3);
	assert_int_equal(ia_op_remap(&sc, map, a).u.gather.base, 13);
	IaOp g = {.kind = IA_GATHER, .u.gather = {.src = 0, .index = 1, .base = 3}};
	assert_int_equal(ia_inputs(&g, in), 2);      /* a gather has no base */
	IaOp rekey = {.kind = IA_MAP, .u.map = {.in = 0}};
	assert_null(ia_op_kernel(&rekey));
	assert_int_equal(ia_op_remap(&rekey, map, a).u.map.in, 10);
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tra_ok),
		cmocka_unit_test(test_tra_join_mismatch),
		cmocka_unit_test(test_tra_order),
		cmocka_unit_test(test_tra_kernel_labels),
		cmocka_unit_test(test_tra_agg_chunk),
		cmocka_unit_test(test_ia_ok_and_placement),
		cmocka_unit_test(test_ia_partial_write),
		cmocka_unit_test(test_inputs_column),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
