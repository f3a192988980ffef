/*
 * test_deps.c: the make rules of -M and -MD (frontend/paths.c) read as
 * gcc's do: the same quoting, the same line wrapping, the same phony
 * targets.  The expectations were written by gcc -M on C files with the
 * same names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/frontend.h"

static char *rule(const char *const *targets, int ntargets, const char *const *deps, int ndeps, bool phony)
{
	FeOptions o = {0};
	for (int i = 0; i < ndeps; i++)
		fe_add_dep(&o, deps[i]);
	Buf b = {0};
	fe_deps_rule(&b, targets, ntargets, &o, phony, false);
	for (int i = 0; i < o.ndeps; i++)
		free((char *)o.deps[i]);
	free(o.deps);
	return b.s;
}

static void test_one_file(void **state)
{
	const char *t[] = {"model"};
	const char *d[] = {"model.tra"};
	char *r = rule(t, 1, d, 1, false);
	assert_string_equal(r, "model: model.tra\n");
	free(r);
	/* -MP leaves the main file out: nothing to add */
	r = rule(t, 1, d, 1, true);
	assert_string_equal(r, "model: model.tra\n");
	free(r);
}

/* gcc -M -MP -MT aaa...a w.c, w.c including hdr_number_1.h ... 9 */
static void test_wrapping_and_phony(void **state)
{
	const char *t[] = {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
	const char *d[] = {"w.c", "/usr/include/stdc-predef.h", "hdr_number_1.h", "hdr_number_2.h",
	                   "hdr_number_3.h", "hdr_number_4.h", "hdr_number_5.h", "hdr_number_6.h",
	                   "hdr_number_7.h", "hdr_number_8.h", "hdr_number_9.h"};
	char *r = rule(t, 1, d, 11, true);
	assert_string_equal(r,
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa: w.c \\\n"
		" /usr/include/stdc-predef.h hdr_number_1.h hdr_number_2.h hdr_number_3.h \\\n"
		" hdr_number_4.h hdr_number_5.h hdr_number_6.h hdr_number_7.h \\\n"
		" hdr_number_8.h hdr_number_9.h\n"
		"/usr/include/stdc-predef.h:\n"
		"hdr_number_1.h:\n"
		"hdr_number_2.h:\n"
		"hdr_number_3.h:\n"
		"hdr_number_4.h:\n"
		"hdr_number_5.h:\n"
		"hdr_number_6.h:\n"
		"hdr_number_7.h:\n"
		"hdr_number_8.h:\n"
		"hdr_number_9.h:\n");
	free(r);
}

/* gcc -M -MP q.c, q.c including "sp ace.h", "d$ollar.h" and "h#ash.h" */
static void test_quoting(void **state)
{
	const char *t[] = {"q.o"};
	const char *d[] = {"q.c", "sp ace.h", "d$ollar.h", "h#ash.h"};
	char *r = rule(t, 1, d, 4, true);
	assert_string_equal(r, "q.o: q.c sp\\ ace.h d$$ollar.h h\\#ash.h\nsp\\ ace.h:\nd$$ollar.h:\nh\\#ash.h:\n");
	free(r);

	/* -MQ 'a$b c' */
	char *q = fe_make_quote("a$b c");
	assert_string_equal(q, "a$$b\\ c");
	free(q);
	q = fe_make_quote("plain/path-1.x");
	assert_string_equal(q, "plain/path-1.x");
	free(q);
}

/* -MT twice: both targets, as given */
static void test_targets(void **state)
{
	const char *t[] = {"bin/model", "plans/model.svg"};
	const char *d[] = {"model.tra"};
	char *r = rule(t, 2, d, 1, false);
	assert_string_equal(r, "bin/model plans/model.svg: model.tra\n");
	free(r);
}

/* a file read twice (imported from two places) is one dependency */
static void test_dep_once(void **state)
{
	FeOptions o = {0};
	fe_add_dep(&o, "main.tra");
	fe_add_dep(&o, "nn.tra");
	fe_add_dep(&o, "linalg.tra");
	fe_add_dep(&o, "nn.tra");
	fe_add_dep(&o, "main.tra");
	assert_int_equal(o.ndeps, 3);
	assert_string_equal(o.deps[0], "main.tra");
	assert_string_equal(o.deps[1], "nn.tra");
	assert_string_equal(o.deps[2], "linalg.tra");
}

/* the stdlib folder is never NULL; -MM leaves its files out */
static void test_stdlib(void **state)
{
	const char *dir = fe_stdlib_dir();
	assert_non_null(dir);
	assert_ptr_equal(dir, fe_stdlib_dir());
	FeOptions o = {0};
	fe_add_dep(&o, "main.tra");
	char *nn = xprintf("%s/nn.tra", dir);
	fe_add_dep(&o, nn);
	fe_add_dep(&o, "mine.tra");
	const char *t[] = {"main"};
	Buf b = {0};
	fe_deps_rule(&b, t, 1, &o, true, true);
	assert_string_equal(b.s, "main: main.tra mine.tra\nmine.tra:\n");
	buf_free(&b);
	free(nn);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_file),
		cmocka_unit_test(test_wrapping_and_phony),
		cmocka_unit_test(test_quoting),
		cmocka_unit_test(test_targets),
		cmocka_unit_test(test_dep_once),
		cmocka_unit_test(test_stdlib),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
