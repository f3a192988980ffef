/*
 * test_lexer.c: tokens, their byte spans, and locations as line:col.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "frontend/parser.h"
#include "frontend/lexer.h"

typedef struct Tok {
	int kind;
	uint32_t off, len;
	FE_YYSTYPE val;
} Tok;

static int lex_all(const char *text, Tok *toks, int max)
{
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	struct LexState ls = {file, 0, arena_new()};
	yyscan_t sc;
	int n = 0;
	fe_yylex_init_extra(&ls, &sc);
	YY_BUFFER_STATE b = fe_yy_scan_bytes(text, (int)strlen(text), sc);
	for (;;) {
		FE_YYSTYPE v;
		Loc loc;
		int k = fe_yylex(&v, &loc, sc);
		if (k == 0 || n == max)
			break;
		toks[n++] = (Tok){k, loc.off, loc.len, v};
	}
	fe_yy_delete_buffer(b, sc);
	fe_yylex_destroy(sc);
	return n;
}

static void test_tokens(void **state)
{
	Tok t[32];
	int n = lex_all("size N = 10; # comment\n// another\nC[i,j] **= 1.5e-3 -> ", t, 32);
	int want[] = {SIZE, IDENT, '=', NUMBER, ';', IDENT, '[', IDENT, ',', IDENT, ']', POW, '=', NUMBER, ARROW};
	assert_int_equal(n, (int)(sizeof want / sizeof want[0]));
	for (int i = 0; i < n; i++)
		assert_int_equal(t[i].kind, want[i]);
	assert_string_equal(t[1].val.str, "N");
	assert_true(t[3].val.num.integer);
	assert_true(t[3].val.num.value == 10);
	assert_false(t[13].val.num.integer);
	assert_true(t[13].val.num.value == 1.5e-3);
	/* byte spans */
	assert_int_equal(t[0].off, 0);
	assert_int_equal(t[0].len, 4);
	assert_int_equal(t[13].len, 6);
}

static void test_keywords_and_strings(void **state)
{
	Tok t[16];
	int n = lex_all("input f64 sum argmax where \"a\\\"b.npy\" sums", t, 16);
	assert_int_equal(n, 7);
	assert_int_equal(t[0].kind, INPUT);
	assert_int_equal(t[1].kind, F64);
	assert_int_equal(t[2].kind, SUM);
	assert_int_equal(t[3].kind, ARGMAX);
	assert_int_equal(t[4].kind, WHERE);
	assert_int_equal(t[5].kind, STRING);
	assert_string_equal(t[5].val.str, "a\"b.npy");
	assert_int_equal(t[6].kind, IDENT);       /* "sums" is a name, not "sum" + "s" */
	n = lex_all("c in C index", t, 16);
	assert_int_equal(n, 4);
	assert_int_equal(t[1].kind, IN);
	assert_int_equal(t[3].kind, IDENT);       /* "index" is a name */
}

static void test_linecol(void **state)
{
	int file = src_add("u.tra", xstrdup("ab\n  cd\n\tx"), 10);
	int line, col;
	loc_linecol((Loc){file, 0, 1}, &line, &col);
	assert_int_equal(line, 1);
	assert_int_equal(col, 1);
	loc_linecol((Loc){file, 5, 2}, &line, &col);
	assert_int_equal(line, 2);
	assert_int_equal(col, 3);
	loc_linecol((Loc){file, 9, 1}, &line, &col);
	assert_int_equal(line, 3);
	assert_int_equal(col, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tokens),
		cmocka_unit_test(test_keywords_and_strings),
		cmocka_unit_test(test_linecol),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
