/*
 * test_npy.c: the runtime's .npy header parser on good headers, broken ones
 * and what fuzz_npy.c found.  Each header is copied into a buffer of
 * exactly its length, so under make check-asan a read past the end is
 * caught (the parser must never assume a NUL after the header).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "rt.h"

static const TrtTensor A = {"A", TRT_INPUT, TRT_F32, 2, {6, 5}, NULL};

/* A v1.0 file's first bytes: magic, version, length, then dict as given. */
static unsigned char *header(const char *dict, size_t *n)
{
	size_t len = strlen(dict);
	*n = 10 + len;
	unsigned char *b = malloc(*n);
	memcpy(b, "\x93NUMPY\x01\x00", 8);
	b[8] = (unsigned char)(len & 0xff);
	b[9] = (unsigned char)(len >> 8);
	memcpy(b + 10, dict, len);
	return b;
}

/* parse + check: 1 and the reason "" when the header holds A */
static int verdict(const char *dict, char *why, size_t whylen)
{
	size_t n;
	NpyHeader h;
	unsigned char *b = header(dict, &n);
	int ok = rt_npy_parse(b, n, &h, why, whylen) &&
	         rt_npy_check(&h, &A, (int64_t)n + 120, why, whylen);
	if (ok)
		why[0] = 0;
	free(b);
	return ok;
}

static void test_good(void **state)
{
	char why[256];
	assert_true(verdict("{'descr': '<f4', 'fortran_order': False, 'shape': (6, 5), }      \n", why, sizeof why));
	assert_true(verdict("{\"shape\": (6L, 5L), \"descr\": \"|f4\", \"fortran_order\": False}", why, sizeof why));
}

static void test_bad(void **state)
{
	static const struct { const char *dict, *why; } cases[] = {
		{"{'descr': '<f8', 'fortran_order': False, 'shape': (6, 5), }", "dtype <f4 expected, found <f8"},
		{"{'descr': '<f4', 'fortran_order': True, 'shape': (6, 5), }", "Fortran order not supported; save the array in C order"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (5, 6), }", "shape (6, 5) expected, found (5, 6)"},
		{"{'descr': '<f4', 'fortran_order': False}", "malformed .npy header: no 'shape'"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (-6, 5), }", "malformed .npy header"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 5), }", "malformed .npy header"},
		/* fuzz_npy: the digits run to the end of the buffer; strtoll read past it */
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (1,                 ", "malformed .npy header"},
		{"{'descr': '<f4', 'fortran_order': False, 'shape': (123", "malformed .npy header"},
		{"{'descr': '<f4', 'fortran_order': Fal", "malformed .npy header"},
		{"{'descr': '<f4", "malformed .npy header"},
		{"", "malformed .npy header"},
	};
	char why[256];
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		assert_false(verdict(cases[i].dict, why, sizeof why));
		assert_string_equal(why, cases[i].why);
	}
}

static void test_short(void **state)
{
	NpyHeader h;
	char why[256];
	unsigned char b[12] = "\x93NUMPY\x01\x00\xff\x00";
	for (size_t n = 0; n <= 10; n++) {
		unsigned char *c = malloc(n ? n : 1);
		memcpy(c, b, n);
		assert_false(rt_npy_parse(c, n, &h, why, sizeof why));
		free(c);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_short),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
