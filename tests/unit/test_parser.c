/*
 * test_parser.c: the parser builds the AST it should, and reports syntax
 * errors at the right place in the user's words.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/frontend.h"

/* Parse text; return the AST printed, and the diagnostics in *errs. */
static char *parse(const char *text, char **errs)
{
	char *buf;
	size_t len;
	FILE *out = open_memstream(&buf, &len);
	diag_out = out;
	diag_reset();
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	Arena *a = arena_new();
	Ast *ast = fe_parse(a, file);
	Buf b = {0};
	fe_ast_print(&b, ast);
	fclose(out);
	diag_out = NULL;
	*errs = buf;
	arena_free(a);
	return b.s ? b.s : xstrdup("");
}

static void expect_ast(const char *text, const char *want)
{
	char *errs;
	char *got = parse(text, &errs);
	assert_string_equal(errs, "");
	assert_string_equal(got, want);
	free(got);
	free(errs);
}

static void expect_error(const char *text, const char *want)
{
	char *errs;
	char *got = parse(text, &errs);
	if (!strstr(errs, want))
		fail_msg("expected diagnostic containing\n  %s\ngot\n  %s", want, errs);
	free(got);
	free(errs);
}

static void test_declarations(void **state)
{
	expect_ast("size N = 10, D = 2*N;\ninput X[N, D] : f64 = \"x.npy\";\noutput Y = \"y.npy\";\n",
	           "size N = 10\nsize D = (* 2 N)\ninput X[N, D] : f64 = \"x.npy\"\noutput Y = \"y.npy\"\n");
	expect_ast("const lr = 0.1;\nparam W[D, H] = normal(0, 0.01);\n",
	           "const lr = 0.10000000000000001\nparam W[D, H] : f32 = (normal 0 0.01)\n");
}

static void test_expressions(void **state)
{
	/* precedence: ** binds tighter than unary minus, * tighter than + */
	expect_ast("C[i, j] = -A[i, k] ** 2 * B[k, j] + D[i, j];\n",
	           "C[i, j] = (+ (* (- (** A[i, k] 2)) B[k, j]) D[i, j])\n");
	expect_ast("s = sum[i, j](where(X[i, j] > 0, X[i, j], 0));\n",
	           "s = (sum[i, j] (where (> X[i, j] 0) X[i, j] 0))\n");
	expect_ast("Y[n, h] = relu(X[n, d] * W[d, h]) - (b[h] / 2);\n",
	           "Y[n, h] = (- (relu (* X[n, d] W[d, h])) (/ b[h] 2))\n");
	expect_ast("dW = grad(loss, W);\nprint loss;\n", "dW = (grad loss W)\nprint loss\n");
	/* ranges: on the left, in a reduction's brackets (keyword or named) */
	expect_ast("Y[n, c in C] = f32(labels[n] == c);\n", "Y[n, c in C] = (f32 (== labels[n] c))\n");
	expect_ast("s = sum[i in N, j, k in 2 * K](x[i] * j);\n", "s = (sum[i in N, j, k in (* 2 K)] (* x[i] j))\n");
	expect_ast("m = mean[i in N + 1](f32(i));\n", "m = (mean[i in (+ N 1)] (f32 i))\n");
	expect_error("input x[N in 4];\n", "t.tra:1:11: error: unexpected 'in'");
	expect_error("def f(X[i in N]) -> Y[i] { Y[i] = X[i]; }\n", "t.tra:1:11: error: expected");
}

static void test_blocks(void **state)
{
	expect_ast("repeat 3 { W[d] -= 0.5 * g[d]; print W; }\n",
	           "repeat 3 {\n  W[d] -= (* 0.5 g[d])\n  print W\n}\n");
	expect_ast("repeat b in NB { Xb[n in B, d] = X[b*B + n, d]; }\n",
	           "repeat b in NB {\n  Xb[n in B, d] = X[(+ (* b B) n), d]\n}\n");
	expect_ast("def lin(X[n, d], W[d, h]) -> Y[n, h] { Y[n, h] = X[n, d] * W[d, h]; }\n",
	           "def lin(X[n, d], W[d, h]) -> Y[n, h] {\n  Y[n, h] = (* X[n, d] W[d, h])\n}\n");
	expect_ast("import \"nn.tra\";\n", "import \"nn.tra\"\n");
}

static void test_syntax_errors(void **state)
{
	expect_error("input A[4, 4]\nB[i] = A[i, i];\n", "t.tra:1:14: error: expected ';' before 'B'");
	expect_error("C[i, j] = A[i, k] * ;\n", "t.tra:1:21: error: unexpected ';'");
	expect_error("C[i] = A[i] $ 2;\n", "t.tra:1:13: error: unexpected character '$'");
	expect_error("input A[4];\nB[i] = (A[i];\n", "expected");
	expect_error("x = \"abc\n;", "missing closing '\"'");
	expect_error("size N = 99999999999999999999;\n", "integer does not fit in 64 bits");
	/* no bison token names in messages */
	char *errs;
	free(parse("C[i, j] = A[i, k] *", &errs));
	assert_null(strstr(errs, "$end"));
	assert_null(strstr(errs, "IDENT"));
	assert_non_null(strstr(errs, "end of file"));
	free(errs);
}

static void test_recovery(void **state)
{
	/* several errors in one run, each located */
	char *errs;
	free(parse("A[i] = ;\nB[i] = ;\nC[i] = ;\n", &errs));
	assert_non_null(strstr(errs, "t.tra:1:"));
	assert_non_null(strstr(errs, "t.tra:2:"));
	assert_non_null(strstr(errs, "t.tra:3:"));
	free(errs);
}

static void test_caret(void **state)
{
	char *errs;
	free(parse("size N = 4;\nC[i] = A[i] @ 1;\n", &errs));
	assert_non_null(strstr(errs, "    C[i] = A[i] @ 1;\n                ^\n"));
	free(errs);
}

static void test_depth_limit(void **state)
{
	Buf b = {0};
	buf_puts(&b, "x = ");
	for (int i = 0; i < 300; i++)
		buf_puts(&b, "(");
	buf_puts(&b, "1");
	for (int i = 0; i < 300; i++)
		buf_puts(&b, ")");
	buf_puts(&b, ";\n");
	expect_error(b.s, "nested too deeply");
	buf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_declarations),
		cmocka_unit_test(test_expressions),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_recovery),
		cmocka_unit_test(test_caret),
		cmocka_unit_test(test_depth_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
