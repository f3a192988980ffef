/*
 * test_dot.c: --explain=dot's labels (ir/print.c, dot_text).  Every piece
 * of text in a label goes through one escaping function: a plan whose
 * labels hold < > & and quotes (kernels' "->" and comparisons, join keys'
 * "<0>", a statement and a tensor name given hostile text, a control byte
 * and bytes that are not UTF-8, and "< 1 µs" of a tiny plan's predicted
 * seconds) is printed with entities, and Graphviz lays it out without a
 * complaint.  Graphviz is in .ci/packages: without `dot` the layout is a
 * failure under CI=true (tests/e2e/lib.sh's rule), elsewhere a loud skip.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "optimizer/opt.h"

static bool skipped;

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

/* The DOT of the program on nranks ranks, with costs */
static char *dot_of(TraProg *p, int nranks)
{
	OptOptions o = {.nranks = nranks, .level = 2, .verify = true};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	assert_non_null(plan);
	Buf b = {0};
	ia_explain(&b, plan, EXPLAIN_DOT, true);
	ia_free(plan);
	return b.s;
}

/* Graphviz's dot lays the graph out (-Tsvg) with nothing on stderr. */
static void lays_out(const char *dot)
{
	if (system("command -v dot >/dev/null 2>&1") != 0) {
		const char *ci = getenv("CI");
		if (ci && !strcmp(ci, "true"))
			fail_msg("Graphviz dot is not installed, under CI=true (.ci/packages lists graphviz)");
		fprintf(stderr, "skip: layout by Graphviz dot (not installed; apt-get install graphviz)\n");
		skipped = true;
		skip();
	}
	char dir[] = "/tmp/test_dot.XXXXXX", path[64], err[64], cmd[256];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/plan.dot", dir);
	snprintf(err, sizeof err, "%s/err", dir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(dot, f);
	fclose(f);
	snprintf(cmd, sizeof cmd, "dot -Tsvg %s -o /dev/null 2>%s", path, err);
	int status = system(cmd);
	char msg[512] = "";
	f = fopen(err, "r");
	if (f) {
		msg[fread(msg, 1, sizeof msg - 1, f)] = 0;
		fclose(f);
	}
	unlink(path);
	unlink(err);
	rmdir(dir);
	if (status != 0 || msg[0])
		fail_msg("dot -Tsvg: status %d: %s", status, msg);
}

/* A plan predicted under a microsecond: the graph's label says "< 1 µs"
 * (a program whose statement is dead, as it has no output). */
static void test_tiny(void **state)
{
	(void)state;
	TraProg *p = compile("param X[4] = zeros;\nZ[i] = X[i] + 1;\n");
	for (int nranks = 1; nranks <= 2; nranks++) {
		char *dot = dot_of(p, nranks);
		assert_non_null(strstr(dot, "predicted &lt; 1 µs</font>"));
		assert_null(strstr(dot, "predicted < "));
		lays_out(dot);
		free(dot);
	}
	tra_free(p);
}

/* Kernels full of < and >, a statement and a tensor's name given hostile
 * text where a program's own text goes. */
static void test_hostile(void **state)
{
	(void)state;
	TraProg *p = compile("param X[4] = zeros;\nparam Y[4] = ones;\n"
	                     "Z[i] = where(X[i] < Y[i], X[i], Y[i]) * (X[i] > 0);\nprint Z;\n");
	char *dot = dot_of(p, 2);
	assert_non_null(strstr(dot, "Z[i] = where(X[i] &lt; Y[i], X[i], Y[i]) * (X[i] &gt; 0);</b>"));
	assert_non_null(strstr(dot, "(in0 &lt; in1)"));
	assert_non_null(strstr(dot, "a,a-&gt;a"));
	lays_out(dot);
	free(dot);

	free(p->stmts.v[0].text);
	p->stmts.v[0].text = xstrdup("Z[i] = \"a\" & 'b' <c> </b></font>> ]; } \x01 tab\t \xff\xfe \xe0\x80\x80 µ end");
	for (int i = 0; i < p->tensors.n; i++)
		if (!strcmp(p->tensors.v[i].name, "Z"))
			p->tensors.v[i].name = "Z&\"<b>\"";
	dot = dot_of(p, 2);
	assert_non_null(strstr(dot, "Z[i] = &quot;a&quot; &amp; 'b' &lt;c&gt; &lt;/b&gt;&lt;/font&gt;&gt; ]; }   tab  "
	                            "&#xFFFD;&#xFFFD; &#xFFFD;&#xFFFD;&#xFFFD; µ end</b>"));
	assert_non_null(strstr(dot, "print Z&amp;&quot;&lt;b&gt;&quot;</b>"));
	assert_null(strstr(dot, "\"a\""));
	assert_null(strstr(dot, "<c>"));
	lays_out(dot);
	free(dot);
	tra_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny),
		cmocka_unit_test(test_hostile),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	return failed ? 1 : skipped ? 77 : 0;
}
