/*
 * names.c: the symbol table of sema, one scope of names (sizes, consts,
 * tensors, defs, loop counters) searched innermost first.
 *
 * A def's body, inlined at a call, declares above scope_base and its names
 * shadow the program's; its tensors are named "def.name" (fe_local_name).
 * A name whose definition had an error stays declared, poisoned, and
 * fe_sym_live keeps every later use of it quiet; a name defined in a repeat
 * block expires when the block ends, and a use after it is reported here.
 * An unknown name is reported with the nearest declared one
 * (fe_did_you_mean), by edit distance.
 */
#include <string.h>

#include "frontend/sema.h"

Sym *fe_lookup(Sema *s, const char *name)
{
	for (int i = s->syms.n - 1; i >= 0; i--)
		if (!strcmp(s->syms.v[i].name, name))
			return &s->syms.v[i];
	return NULL;
}

/* The edit distance between a and b, counting an insertion, a deletion, a
 * substitution and a swap of two neighbours as one each (99 past 64
 * characters): for did-you-mean, here and in the scanner's misspelt
 * keywords (`inptu` is one swap from `input`). */
int fe_edit_distance(const char *a, const char *b)
{
	int n = strlen(a), m = strlen(b);
	if (n > 64 || m > 64)
		return 99;
	int d[65][65];
	for (int i = 0; i <= n; i++)
		d[i][0] = i;
	for (int j = 0; j <= m; j++)
		d[0][j] = j;
	for (int i = 1; i <= n; i++)
		for (int j = 1; j <= m; j++) {
			int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < c)
				c = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < c)
				c = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
				c = d[i - 2][j - 2] + 1;
			d[i][j] = c;
		}
	return d[n][m];
}

/* The hint "; did you mean 'x'?" naming the declared name nearest to
 * `name` among symbols of kind `kind` (or ANY_SYM) and the extra names, or
 * "" when none is near. */
const char *fe_did_you_mean(Sema *s, const char *name, int kind, const char *const *extra, int nextra)
{
	const char *best = NULL;
	int bestd = strlen(name) <= 3 ? 1 : 2;
	for (int i = 0; i < s->syms.n; i++) {
		if (kind != ANY_SYM && (int)s->syms.v[i].kind != kind)
			continue;
		int d = fe_edit_distance(name, s->syms.v[i].name);
		if (d <= bestd && (d < bestd || !best)) {
			best = s->syms.v[i].name;
			bestd = d;
		}
	}
	for (int i = 0; i < nextra; i++) {
		int d = fe_edit_distance(name, extra[i]);
		if (d <= bestd && (d < bestd || !best)) {
			best = extra[i];
			bestd = d;
		}
	}
	if (!best)
		return "";
	char *hint = arena_alloc(s->arena, strlen(best) + 24);
	sprintf(hint, "; did you mean '%s'?", best);
	return hint;
}

/* The symbol a name in an expression refers to, marked used; NULL after
 * "unknown WHAT 'x'; did you mean ...?". */
Sym *fe_use_sym(Sema *s, Node *n, const char *what)
{
	Sym *sym = fe_lookup(s, n->u.name.name);
	if (!sym) {
		diag(DIAG_ERROR, n->loc, "unknown %s '%s'%s", what, n->u.name.name, fe_did_you_mean(s, n->u.name.name, ANY_SYM, NULL, 0));
		return NULL;
	}
	sym->used = true;
	return sym;
}

const char *fe_sym_what(const Sym *sym, const TraProg *p)
{
	switch (sym->kind) {
	case SYM_SIZE: return "a size";
	case SYM_CONST: return "a const";
	case SYM_DEF: return "a def";
	case SYM_COUNTER: return "a loop counter";
	case SYM_TENSOR:
		if (sym->tensor < 0)
			return "a tensor";
		switch (p->tensors.v[sym->tensor].role) {
		case TENSOR_INPUT: return "an input";
		case TENSOR_PARAM: return "a param";
		case TENSOR_TEMP: return "a tensor";
		}
	}
	return "a name";
}

/* The IST loop whose body is being checked (in the whole program): its
 * body is compiled apart, where what the program computed before it does
 * not exist (the counters of the blocks around it do: trt_ist passes them). */
static struct {
	const Sema *s;          /* NULL outside an IST body */
	int first_sym;          /* the syms declared before the body */
	Loc loc;                /* its clause */
} ist_scope;

/* Enter the body of the IST loop whose clause is at loc, the syms from
 * first_sym on its own; s NULL: leave it. */
void fe_ist_scope(const Sema *s, int first_sym, Loc loc)
{
	ist_scope.s = s;
	ist_scope.first_sym = first_sym;
	ist_scope.loc = loc;
}

/* May a use at `use` read sym?  Not when its definition had an error
 * (quietly: that was reported) nor when its repeat block has ended. */
bool fe_sym_live(const Sym *sym, Loc use)
{
	if (sym->poisoned)
		return false;
	const Sema *s = ist_scope.s;
	if (s && sym >= s->syms.v && sym < s->syms.v + ist_scope.first_sym && !sym->expired) {
		int line, col;
		loc_linecol(ist_scope.loc, &line, &col);
		if (sym->kind == SYM_TENSOR && sym->tensor >= 0 && s->prog->tensors.v[sym->tensor].role == TENSOR_TEMP) {
			diag(DIAG_ERROR, use, "the IST loop at %d:%d cannot read '%s', computed before it, yet: its body "
			     "is compiled apart as the subnet's program; compute it inside the loop", line, col, sym->name);
			return false;
		}
	}
	if (sym->expired) {
		int line, col;
		loc_linecol(sym->expired_loc, &line, &col);
		if (sym->kind == SYM_COUNTER) {
			diag(DIAG_ERROR, use, "'%s' counts the iterations of the repeat block at %d:%d and has no value "
			     "after it", sym->name, line, col);
			return false;
		}
		diag(DIAG_ERROR, use, "'%s' is defined inside the repeat block at %d:%d and has no value after it; "
		     "store it in a param to keep it", sym->name, line, col);
		return false;
	}
	return true;
}

/* Declare a name in the innermost scope (a def body's locals shadow the
 * program's names). */
bool fe_declare(Sema *s, Sym sym)
{
	Sym *old = fe_lookup(s, sym.name);
	if (old && old < s->syms.v + s->scope_base)
		old = NULL;
	if (old) {
		int line, col;
		loc_linecol(old->loc, &line, &col);
		diag(DIAG_ERROR, sym.loc, "'%s' is already declared, as %s at %d:%d", sym.name,
		     fe_sym_what(old, s->prog), line, col);
		return false;
	}
	vec_push(&s->syms, sym);
	return true;
}

/* A tensor's name for explain and print: a def's locals carry the def's name. */
const char *fe_local_name(Sema *s, const char *name)
{
	if (!s->prefix)
		return name;
	char *n = arena_alloc(s->arena, strlen(s->prefix) + strlen(name) + 1);
	strcpy(n, s->prefix);
	strcat(n, name);
	return n;
}
