/*
 * sema.c: the checks between syntax and TRA.
 *
 * Sema walks the program's items in order, keeping one scope of names
 * (sizes, consts, tensors), and for each assignment:
 *
 *   - resolves every name: sizes and consts fold to numbers, tensors to
 *     accesses, index names to the statement's index vars (a reduction's
 *     names are a nested scope);
 *   - fixes each index var's extent from the accesses that use it, and
 *     reports a disagreement with both uses;
 *   - places Einstein's implicit sums: an index on the right that is not on
 *     the left and not bound by a reduction is summed over the smallest
 *     sub-expression containing all its occurrences (an N_REDUCE marked
 *     implicit is inserted there);
 *   - infers the element type;
 *
 * and then hands the statement to lower.c.  Errors are collected (diag caps
 * them); a statement with an error is not lowered, and fe_compile returns
 * NULL if any error occurred.  A def's call is checked again in place
 * (defs.c), an import's items too (imports.c); sema.h is what they share.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/frontend.h"

#include "frontend/sema.h"

/* ---- names ---- */

static const char *did_you_mean_of(Sema *s, const char *name, int kind, const char *const *extra, int nextra);
#define did_you_mean(s, name, extra, nextra) did_you_mean_of(s, name, ANY_SYM, extra, nextra)

Sym *fe_lookup(Sema *s, const char *name)
{
	for (int i = s->syms.n - 1; i >= 0; i--)
		if (!strcmp(s->syms.v[i].name, name))
			return &s->syms.v[i];
	return NULL;
}

static int edit_distance(const char *a, const char *b)
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
			d[i][j] = c;
		}
	return d[n][m];
}

#define ANY_SYM (-1)

/* The hint "; did you mean 'x'?" naming the declared name nearest to
 * `name` among symbols of kind `kind` (or ANY_SYM) and the extra names, or
 * "" when none is near. */
static const char *did_you_mean_of(Sema *s, const char *name, int kind, const char *const *extra, int nextra)
{
	const char *best = NULL;
	int bestd = strlen(name) <= 3 ? 1 : 2;
	for (int i = 0; i < s->syms.n; i++) {
		if (kind != ANY_SYM && (int)s->syms.v[i].kind != kind)
			continue;
		int d = edit_distance(name, s->syms.v[i].name);
		if (d <= bestd && (d < bestd || !best)) {
			best = s->syms.v[i].name;
			bestd = d;
		}
	}
	for (int i = 0; i < nextra; i++) {
		int d = edit_distance(name, extra[i]);
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
static Sym *use_sym(Sema *s, Node *n, const char *what)
{
	Sym *sym = fe_lookup(s, n->u.name.name);
	if (!sym) {
		diag(DIAG_ERROR, n->loc, "unknown %s '%s'%s", what, n->u.name.name, did_you_mean(s, n->u.name.name, NULL, 0));
		return NULL;
	}
	sym->used = true;
	return sym;
}

static const char *sym_what(const Sym *sym, const TraProg *p)
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

/* May a use at `use` read sym?  Not when its definition had an error
 * (quietly: that was reported) nor when its repeat block has ended. */
/* The IST loop whose body is being checked (in the whole program): its
 * body is compiled apart, where what the program computed before it does
 * not exist (the counters of the blocks around it do: trt_ist passes them). */
static struct {
	const Sema *s;          /* NULL outside an IST body */
	int first_sym;          /* the syms declared before the body */
	Loc loc;                /* its clause */
} ist_scope;

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
		     sym_what(old, s->prog), line, col);
		return false;
	}
	vec_push(&s->syms, sym);
	return true;
}

static const Define *find_define(Sema *s, const char *name, int *index)
{
	for (int i = 0; i < s->opt->ndefines; i++)
		if (!strcmp(s->opt->defines[i].name, name)) {
			*index = i;
			return &s->opt->defines[i];
		}
	return NULL;
}

/* ---- compile-time arithmetic: sizes and consts ---- */

/* An integer size expression: numbers, earlier sizes, + - * / **. */
static bool eval_int(Sema *s, Node *n, int64_t *out)
{
	int64_t a, b;
	switch (n->kind) {
	case N_NUM:
		if (n->u.num != floor(n->u.num) || fabs(n->u.num) > 9.2e18) {
			diag(DIAG_ERROR, n->loc, "a size must be an integer");
			return false;
		}
		*out = (int64_t)n->u.num;
		return true;
	case N_NAME: {
		Sym *sym = use_sym(s, n, "size");
		if (!sym)
			return false;
		if (sym->kind == SYM_CONST && sym->value == floor(sym->value) && fabs(sym->value) < 9.2e18) {
			*out = (int64_t)sym->value;
			return true;
		}
		if (sym->kind != SYM_SIZE) {
			diag(DIAG_ERROR, n->loc, "'%s' is %s, not a size", n->u.name.name, sym_what(sym, s->prog));
			return false;
		}
		*out = sym->size;
		return true;
	}
	case N_UNARY:
		if (!eval_int(s, n->u.unary.a, &a))
			return false;
		if (a == INT64_MIN) {
			diag(DIAG_ERROR, n->loc, "size overflows 64 bits");
			return false;
		}
		*out = -a;
		return true;
	case N_BINARY:
		if (!eval_int(s, n->u.binary.a, &a) || !eval_int(s, n->u.binary.b, &b))
			return false;
		switch (n->u.binary.op) {
		case B_ADD:
			if (!add_ok(a, b, out))
				goto overflow;
			return true;
		case B_SUB:
			if (__builtin_sub_overflow(a, b, out))
				goto overflow;
			return true;
		case B_MUL:
			if (!mul_ok(a, b, out))
				goto overflow;
			return true;
		case B_DIV:
			if (b == 0) {
				diag(DIAG_ERROR, n->loc, "division by zero in a size");
				return false;
			}
			if (a == INT64_MIN && b == -1)
				goto overflow;
			*out = a / b;
			return true;
		case B_POW:
			if (b < 0) {
				diag(DIAG_ERROR, n->loc, "negative exponent in a size");
				return false;
			}
			*out = 1;
			for (int64_t i = 0; i < b; i++)
				if (!mul_ok(*out, a, out))
					goto overflow;
			return true;
		default:
			break;
		}
		/* fall through */
	default:
		diag(DIAG_ERROR, n->loc, "a size must be an integer expression of numbers and earlier sizes");
		return false;
	}
overflow:
	diag(DIAG_ERROR, n->loc, "size overflows 64 bits");
	return false;
}

/* A compile-time scalar: numbers, sizes, consts, arithmetic, functions. */
static bool eval_num(Sema *s, Node *n, double *out)
{
	double a, b;
	switch (n->kind) {
	case N_NUM:
		*out = n->u.num;
		return true;
	case N_NAME: {
		Sym *sym = use_sym(s, n, "name");
		if (!sym)
			return false;
		if (sym->kind == SYM_SIZE)
			*out = (double)sym->size;
		else if (sym->kind == SYM_CONST)
			*out = sym->value;
		else {
			diag(DIAG_ERROR, n->loc, "'%s' is %s; a const needs a value known at compile time",
			     n->u.name.name, sym_what(sym, s->prog));
			return false;
		}
		return true;
	}
	case N_UNARY:
		if (!eval_num(s, n->u.unary.a, &a))
			return false;
		*out = -a;
		return true;
	case N_BINARY:
		if (!eval_num(s, n->u.binary.a, &a) || !eval_num(s, n->u.binary.b, &b))
			return false;
		switch (n->u.binary.op) {
		case B_ADD: *out = a + b; return true;
		case B_SUB: *out = a - b; return true;
		case B_MUL: *out = a * b; return true;
		case B_DIV: *out = a / b; return true;
		case B_POW: *out = pow(a, b); return true;
		case B_LT: *out = a < b; return true;
		case B_LE: *out = a <= b; return true;
		case B_GT: *out = a > b; return true;
		case B_GE: *out = a >= b; return true;
		case B_EQ: *out = a == b; return true;
		case B_NE: *out = a != b; return true;
		}
		break;
	case N_CALL: {
		/* the elementwise functions, on numbers */
		static const struct { const char *name; int fn; } fns[] = {
			{"exp", 0}, {"log", 1}, {"sqrt", 2}, {"abs", 3}, {"tanh", 4}, {"sigmoid", 5}, {"relu", 6},
		};
		int fn = -1;
		for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
			if (!strcmp(n->u.call.name, fns[i].name))
				fn = fns[i].fn;
		if (fn < 0 || n->u.call.nargs != 1)
			break;
		if (!eval_num(s, n->u.call.args[0], &a))
			return false;
		switch (fn) {
		case 0: *out = exp(a); break;
		case 1: *out = log(a); break;
		case 2: *out = sqrt(a); break;
		case 3: *out = fabs(a); break;
		case 4: *out = tanh(a); break;
		case 5: *out = 1 / (1 + exp(-a)); break;
		default: *out = a > 0 ? a : 0; break;
		}
		return true;
	}
	default:
		break;
	}
	diag(DIAG_ERROR, n->loc, "a const must be a number or an expression of numbers, sizes and consts "
	     "(arithmetic, comparisons, exp log sqrt abs tanh sigmoid relu)");
	return false;
}

/* ---- index vars of one statement ---- */

static int new_var(Sema *s, const char *name, Loc loc, bool reduced)
{
	Var v = {.name = name, .loc = loc, .extent = -1, .reduced = reduced};
	vec_push(&s->vars, v);
	return s->vars.n - 1;
}

/* The var an index name denotes here, if any yet: the innermost reduction
 * binding it, else the statement's free var of that name; -1 for none. */
static int bound_var(Sema *s, const char *name)
{
	for (int i = s->scope.n - 1; i >= 0; i--)
		if (!strcmp(s->vars.v[s->scope.v[i]].name, name))
			return s->scope.v[i];
	for (int i = 0; i < s->vars.n; i++)
		if (!s->vars.v[i].reduced && !strcmp(s->vars.v[i].name, name))
			return i;
	return -1;
}

/* The var an index name denotes here (a free var made on first use). */
static int find_var(Sema *s, const char *name, Loc loc)
{
	int v = bound_var(s, name);
	return v >= 0 ? v : new_var(s, name, loc, false);
}

static int children(Node *n, Node ***slot);

/* Does an access in n index with `name`? */
static bool indexes_with(Node *n, const char *name)
{
	if (n->kind == N_ACCESS) {
		for (int d = 0; d < n->u.access.nidx; d++)
			if ((n->u.access.idx[d]->kind == N_NAME && !strcmp(n->u.access.idx[d]->u.name.name, name)) ||
			    (n->u.access.idx[d]->kind == N_ACCESS && indexes_with(n->u.access.idx[d], name)))
				return true;
		return false;
	}
	Node **kids[3];
	int k = children(n, kids);
	for (int i = 0; i < k; i++)
		if (indexes_with(*kids[i], name))
			return true;
	return false;
}

/* The var a name where a value is expected denotes, when it is an index of
 * this statement: the innermost reduction's binding it, the left side's or
 * an implicit sum's (a name some access of the right side indexes with);
 * else -1.  Declared names come first: sema asks only about a name that is
 * not one, so every v1 program keeps its meaning. */
static int value_var(Sema *s, const char *name, Loc loc)
{
	int v = bound_var(s, name);
	if (v >= 0)
		return v;
	if (s->rhs && indexes_with(s->rhs, name))
		return new_var(s, name, loc, false);
	return -1;
}

/* `i in N` in an index list: N's value, a positive size; false (reported)
 * when it is not one. */
static bool range_extent(Sema *s, Node *range, int64_t *extent)
{
	if (!eval_int(s, range, extent))
		return false;
	if (*extent < 1) {
		diag(DIAG_ERROR, range->loc, "a range's extent must be positive, not %" PRId64, *extent);
		return false;
	}
	return true;
}

/* "the range 'i in N'", for messages about the extent it gives */
static const char *range_why(Sema *s, Loc loc)
{
	char *text = loc_text(loc);
	char *why = arena_alloc(s->arena, strlen(text) + 16);
	sprintf(why, "the range '%s'", text);
	free(text);
	return why;
}

/* An index used as a value with no extent: ask for `in` (where says where
 * the range goes). */
static void needs_range(Sema *s, int v, const char *where)
{
	const Var *var = &s->vars.v[v];
	diag(DIAG_ERROR, var->loc, "index '%s' is used only as a value, so it has no extent; give it one with "
	     "'%s in SIZE' %s", var->name, var->name, where);
}

static bool bind_extent(Sema *s, int v, int64_t extent, Loc loc, const char *why)
{
	Var *var = &s->vars.v[v];
	if (var->extent < 0) {
		var->extent = extent;
		var->extloc = loc;
		var->extwhy = why;
		return true;
	}
	if (var->extent == extent)
		return true;
	int line, col;
	loc_linecol(var->extloc, &line, &col);
	diag(DIAG_ERROR, loc, "index '%s' has extent %" PRId64 " here (%s) but %" PRId64 " at %d:%d (%s)",
	     var->name, extent, why, var->extent, line, col, var->extwhy);
	diag(DIAG_NOTE, var->extloc, "'%s' first gets extent %" PRId64 " here", var->name, var->extent);
	return false;
}

/* ---- expressions ---- */

static const struct { const char *name; KOp op; } functions[] = {
	{"exp", KOP_EXP}, {"log", KOP_LOG}, {"sqrt", KOP_SQRT}, {"abs", KOP_ABS},
	{"tanh", KOP_TANH}, {"sigmoid", KOP_SIGMOID}, {"relu", KOP_RELU},
	{"stop_gradient", KOP_STOP},
};
#define NFUNCTIONS (int)(sizeof functions / sizeof functions[0])

static bool unify(Ty *a, Ty b, Loc loc)
{
	if (!b.typed)
		return true;
	if (a->typed && a->t != b.t) {
		diag(DIAG_ERROR, loc, "mixed element types %s and %s; convert one side with %s(...) or %s(...)",
		     dtype_name(a->t), dtype_name(b.t), dtype_name(a->t < b.t ? a->t : b.t),
		     dtype_name(a->t < b.t ? b.t : a->t));
		return false;
	}
	*a = b;
	return true;
}

/* A number in an integer expression must be a whole number: 0.5 would be
 * truncated to 0 without a word.  n is a side that reads no tensor. */
static bool whole_numbers(Node *n, DType t)
{
	if (n->kind == N_NUM) {
		double lim = t == DT_I32 ? 2147483647.0 : 9.2e18;
		bool whole = n->u.num == trunc(n->u.num);
		if (whole && fabs(n->u.num) <= lim)
			return true;
		diag(DIAG_ERROR, n->loc, "%g is %s, in an %s expression; convert the other side with f32(...) or f64(...)",
		     n->u.num, whole ? "out of its range" : "not a whole number", dtype_name(t));
		return false;
	}
	Node **kids[3];
	int k = children(n, kids);
	for (int i = 0; i < k; i++)
		if (!whole_numbers(*kids[i], t))
			return false;
	return true;
}

/* What integers cannot do: functions defined on reals, '**', mean. */
static bool int_operand(Ty ty, Loc loc, const char *what)
{
	if (!ty.typed || !dtype_is_int(ty.t))
		return true;
	diag(DIAG_ERROR, loc, "%s of an %s value; convert the value first with f32(...) or f64(...)", what,
	     dtype_name(ty.t));
	return false;
}

static bool check_expr(Sema *s, Node *n, Ty *ty);

/* f(e) for the conversion to t, as if the program had written it. */
static Node *converted(Sema *s, Node *e, DType t)
{
	Node *n = fe_ast_node(s->arena, N_CALL, e->loc);
	n->u.call.name = dtype_name(t);
	n->u.call.nameloc = e->loc;
	n->u.call.args = arena_alloc(s->arena, sizeof(Node *));
	n->u.call.args[0] = e;
	n->u.call.nargs = 1;
	n->u.call.conv = t;
	n->height = e->height + 1;
	return n;
}

/* Position d of access n (of tensor t) holds an access, E[idx[b], d]: a
 * gather by an integer tensor's values.  The index access is checked as
 * any (its indices bind from its tensor's extents); one gather per access,
 * from a dense tensor, by a dense integer one. */
static bool check_gather_index(Sema *s, Node *n, int d, const Tensor *t)
{
	Node *ix = n->u.access.idx[d];
	if (n->u.access.gather) {
		diag(DIAG_ERROR, ix->loc, "'%s' is gathered along dimension %d already; an access may gather along "
		     "one dimension only", n->u.access.name, n->u.access.gather);
		diag(DIAG_NOTE, n->loc, "gather into a temporary first, as in 'T[b, j] = %s[idx[b], j]', then gather from "
		     "that", n->u.access.name);
		return false;
	}
	n->u.access.gather = d + 1;
	Ty ity = {0};
	if (!check_expr(s, ix, &ity))
		return false;
	const Tensor *it = &s->prog->tensors.v[ix->u.access.tensor];
	if (!ity.typed || !dtype_is_int(ity.t)) {
		diag(DIAG_ERROR, ix->loc, "'%s' is %s, so it cannot index dimension %d of '%s'; a gather index must be "
		     "an integer tensor", it->name, ity.typed ? dtype_name(ity.t) : "untyped", d + 1, n->u.access.name);
		diag(DIAG_NOTE, it->loc, "declare '%s' with an integer type, as in 'input %s[...] : i64;'", it->name, it->name);
		return false;
	}
	if (t->sparse || it->sparse) {
		diag(DIAG_ERROR, ix->loc, "cannot gather %s sparse tensor '%s'; gathers read dense tensors",
		     t->sparse ? "from" : "by", t->sparse ? t->name : it->name);
		return false;
	}
	if (it->rank + t->rank - 1 > MAXDIM) {
		diag(DIAG_ERROR, ix->loc, "this gather has %d indices; trac supports at most %d", it->rank + t->rank - 1,
		     MAXDIM);
		return false;
	}
	return true;
}

/* ---- affine index positions: X[b*B + n, d], X[i - 1] ---- */

/* A sum of index vars, loop counters and a constant, each with an integer
 * coefficient, as it is being read. */
typedef struct Affine {
	int64_t c0;
	int n;
	struct { bool counter; int id; int64_t coef; Loc loc; } t[2 * MAXDIM];
} Affine;

static bool aff_add(Sema *s, Affine *a, const Affine *b, int64_t k, Loc loc)
{
	int64_t x;
	if (!mul_ok(b->c0, k, &x) || !add_ok(a->c0, x, &a->c0))
		goto overflow;
	for (int i = 0; i < b->n; i++) {
		if (!mul_ok(b->t[i].coef, k, &x))
			goto overflow;
		int j = 0;
		while (j < a->n && (a->t[j].counter != b->t[i].counter || a->t[j].id != b->t[i].id))
			j++;
		if (j == a->n) {
			if (a->n == 2 * MAXDIM) {
				diag(DIAG_ERROR, loc, "an index expression of more than %d names", 2 * MAXDIM);
				return false;
			}
			a->t[a->n++] = b->t[i];
			a->t[j].coef = 0;
		}
		if (!add_ok(a->t[j].coef, x, &a->t[j].coef))
			goto overflow;
	}
	return true;
overflow:
	diag(DIAG_ERROR, loc, "an index expression's coefficients overflow 64 bits");
	return false;
}

static void not_affine(Node *n, const char *why)
{
	char *text = loc_text(n->loc);
	diag(DIAG_ERROR, n->loc, "index expression '%s' is not affine: %s; an index position holds index names, loop "
	     "counters and sizes, added, subtracted and multiplied by integers", text, why);
	free(text);
}

/* n as an affine form; false (reported) when it is not one. */
static bool affine_of(Sema *s, Node *n, Affine *a)
{
	Affine x = {0}, y = {0};
	*a = (Affine){0};
	switch (n->kind) {
	case N_NUM:
		if (n->u.num != floor(n->u.num) || fabs(n->u.num) > 9.2e18) {
			not_affine(n, "a position is a whole number");
			return false;
		}
		a->c0 = (int64_t)n->u.num;
		return true;
	case N_NAME: {
		if (n->u.name.range) {
			diag(DIAG_ERROR, n->loc, "a range such as '%s in N' goes on the left side or in a reduction's "
			     "brackets, not in an access on the right", n->u.name.name);
			return false;
		}
		Sym *sym = fe_lookup(s, n->u.name.name);
		if (!sym) {
			a->t[a->n++] = (typeof(a->t[0])){false, find_var(s, n->u.name.name, n->loc), 1, n->loc};
			return true;
		}
		sym->used = true;
		if (!fe_sym_live(sym, n->loc))
			return false;
		if (sym->kind == SYM_COUNTER) {
			a->t[a->n++] = (typeof(a->t[0])){true, (int)(sym - s->syms.v), 1, n->loc};
			return true;
		}
		int64_t v;
		if (sym->kind == SYM_SIZE || sym->kind == SYM_CONST)
			return eval_int(s, n, &v) && (a->c0 = v, true);
		diag(DIAG_ERROR, n->loc, "'%s' is %s, not an index; index names are lower-case names not otherwise declared",
		     n->u.name.name, sym_what(sym, s->prog));
		return false;
	}
	case N_UNARY:
		return affine_of(s, n->u.unary.a, &x) && aff_add(s, a, &x, -1, n->loc);
	case N_BINARY:
		if (n->u.binary.op != B_ADD && n->u.binary.op != B_SUB && n->u.binary.op != B_MUL)
			break;
		if (!affine_of(s, n->u.binary.a, &x) || !affine_of(s, n->u.binary.b, &y))
			return false;
		if (n->u.binary.op != B_MUL)
			return aff_add(s, a, &x, 1, n->loc) && aff_add(s, a, &y, n->u.binary.op == B_ADD ? 1 : -1, n->loc);
		if (x.n && y.n) {
			not_affine(n, "it multiplies two names that are not sizes");
			return false;
		}
		return x.n ? aff_add(s, a, &x, y.c0, n->loc) : aff_add(s, a, &y, x.c0, n->loc);
	default:
		break;
	}
	not_affine(n, n->kind == N_BINARY && n->u.binary.op == B_DIV ? "it divides" :
	              n->kind == N_BINARY ? "it compares" : n->kind == N_CALL ? "it calls a function" : "it is not a sum");
	return false;
}

/* Position d of access n is not a plain index name: read it as an index
 * var plus loop counters' multiples plus a constant (a window that moves
 * with the loop, a shift), the var's range left to inference unless the
 * statement gives it.  A position checked before (a def inlined again)
 * is read from what was written. */
static bool check_affine_index(Sema *s, Node *n, int d, const Tensor *t)
{
	if (!n->u.access.aff) {
		n->u.access.aff = arena_alloc(s->arena, (size_t)n->u.access.nidx * sizeof(IxAffine *));
		memset(n->u.access.aff, 0, (size_t)n->u.access.nidx * sizeof(IxAffine *));
	}
	IxAffine *ia = n->u.access.aff[d];
	Node *ix = ia ? ia->expr : n->u.access.idx[d];
	Affine a;
	if (!affine_of(s, ix, &a))
		return false;
	IxAffine f = {.expr = ix, .shift = a.c0};
	int64_t lo = a.c0, hi = a.c0;
	bool rising = false;
	for (int i = 0; i < a.n; i++) {
		if (a.t[i].coef == 0)
			continue;
		if (!a.t[i].counter) {
			if (f.nvar == MAXDIM) {
				diag(DIAG_ERROR, ix->loc, "an index expression of more than %d index names", MAXDIM);
				return false;
			}
			/* one that rises with its var first: it names the position */
			int at = f.nvar++;
			if (a.t[i].coef > 0 && !rising) {
				f.var[at] = f.var[0], f.vcoef[at] = f.vcoef[0];
				at = 0;
				rising = true;
			}
			f.var[at] = a.t[i].id;
			f.vcoef[at] = a.t[i].coef;
			continue;
		}
		const Sym *c = &s->syms.v[a.t[i].id];
		f.depth[f.ncounter] = c->loop_depth;
		f.coef[f.ncounter++] = a.t[i].coef;
		int64_t last = c->size > 0 ? c->size - 1 : 0, ext;
		if (!mul_ok(a.t[i].coef, last, &ext) || !add_ok(ext > 0 ? hi : lo, ext, ext > 0 ? &hi : &lo)) {
			diag(DIAG_ERROR, ix->loc, "an index expression's positions overflow 64 bits");
			return false;
		}
	}
	if (f.nvar == 0) {
		/* one position, X[b, d], X[3, d]: a window of one element along
		 * a var of its own, which Einstein's rule sums away */
		char *text = loc_text(ix->loc);
		int v = new_var(s, arena_strdup(s->arena, text), ix->loc, false);
		free(text);
		bind_extent(s, v, 1, ix->loc, "a single position");
		s->vars.v[v].single = true;
		f.var[f.nvar] = v;
		f.vcoef[f.nvar++] = 1;
	}
	if (t->sparse) {
		diag(DIAG_ERROR, ix->loc, "index arithmetic on sparse input '%s' is not supported yet; index it with plain names",
		     t->name);
		return false;
	}
	IxAffine *stored = arena_alloc(s->arena, sizeof f);
	*stored = f;
	n->u.access.aff[d] = stored;
	/* from here on the position reads as its first var's name */
	Node *name = fe_ast_node(s->arena, N_NAME, ix->loc);
	name->u.name.name = s->vars.v[f.var[0]].name;
	name->u.name.var = f.var[0];
	n->u.access.idx[d] = name;
	vec_push(&s->affuse, ((AffUse){stored, lo, hi, t->shape[d], ix->loc}));
	return true;
}

/* The index vars of access n, each once: its positions' names, then the
 * other vars of its affine positions. */
static int access_vars(const Node *n, int *out)
{
	int k = 0;
	for (int d = 0; d < n->u.access.nidx; d++) {
		if (n->u.access.idx[d]->kind == N_ACCESS) {     /* a gather: its index's vars */
			int sub[2 * MAXDIM], ns = access_vars(n->u.access.idx[d], sub);
			for (int i = 0; i < ns; i++) {
				int seen = 0;
				for (int j = 0; j < k; j++)
					seen |= out[j] == sub[i];
				if (!seen && k < 2 * MAXDIM)
					out[k++] = sub[i];
			}
			continue;
		}
		const IxAffine *f = n->u.access.aff ? n->u.access.aff[d] : NULL;
		int nv = f ? f->nvar : 1;
		for (int i = 0; i < nv; i++) {
			int v = f ? f->var[i] : n->u.access.idx[d]->u.name.var, seen = 0;
			for (int j = 0; j < k; j++)
				seen |= out[j] == v;
			if (!seen && k < 2 * MAXDIM)
				out[k++] = v;
		}
	}
	return k;
}

/* Does var v occur in an affine position of the statement (its range is
 * inferred after the statement is read)? */
static bool in_affine(const Sema *s, int v)
{
	for (int i = 0; i < s->affuse.n; i++)
		for (int k = 0; k < s->affuse.v[i].f->nvar; k++)
			if (s->affuse.v[i].f->var[k] == v)
				return true;
	return false;
}

/* The statement's index vars that only affine positions use take the
 * largest range from 0 that keeps every such access inside its tensor
 * for every value of the loop counters ("valid", as Tensor Comprehensions
 * infers ranges); false (reported) when there is none. */
static bool infer_ranges(Sema *s)
{
	bool ok = true, progress = true;
	/* a var whose uses' other vars all have extents first, until none is left */
	while (progress) {
		progress = false;
		for (int i = 0; i < s->affuse.n; i++)
			for (int k = 0; k < s->affuse.v[i].f->nvar; k++) {
				int v = s->affuse.v[i].f->var[k];
				if (s->vars.v[v].extent >= 0)
					continue;
				int64_t ext = INT64_MAX;
				bool neg = false, ready = true;
				for (int j = 0; j < s->affuse.n && ready; j++) {
					const AffUse *u = &s->affuse.v[j];
					int64_t lo = u->lo, hi = u->hi, a = 0;
					bool has = false;
					for (int m = 0; m < u->f->nvar; m++)
						has |= u->f->var[m] == v;
					for (int m = 0; has && m < u->f->nvar; m++) {
						int64_t e = s->vars.v[u->f->var[m]].extent, c = u->f->vcoef[m];
						if (u->f->var[m] == v)
							a = c;
						else if (e < 0)
							ready = false;
						else if (c > 0)
							hi += c * (e - 1);
						else
							lo += c * (e - 1);
					}
					if (a == 0 || !ready)
						continue;
					/* rising: from lo up, by a; falling: from hi down */
					neg |= a > 0 && lo < 0;
					int64_t most = a > 0 ? (u->extent - 1 - hi) / a + 1 : lo / -a + 1;
					if (u->extent - 1 - hi < 0 || lo < 0)
						most = 0;
					if (most < ext)
						ext = most;
				}
				if (!ready)
					continue;
				const Var *var = &s->vars.v[v];
				progress = true;
				if (neg || ext < 1) {
					diag(DIAG_ERROR, s->affuse.v[i].loc, "the range of index '%s' cannot be inferred: %s; give it "
					     "one with '%s in SIZE' on the left or in a reduction's brackets", var->name,
					     neg ? "a position below 0 is read for every value of it" :
					           "no value of it keeps every access inside its tensor", var->name);
					s->vars.v[v].extent = 1;        /* reported: no second error */
					ok = false;
					continue;
				}
				bind_extent(s, v, ext, s->affuse.v[i].loc,
				            "the largest range keeping its accesses inside their tensors");
			}
	}
	/* what is left waits on another var of its position that has no range either */
	for (int i = 0; i < s->affuse.n; i++)
		for (int k = 0; k < s->affuse.v[i].f->nvar; k++) {
			Var *var = &s->vars.v[s->affuse.v[i].f->var[k]];
			if (var->extent >= 0)
				continue;
			char *text = loc_text(s->affuse.v[i].loc);
			diag(DIAG_ERROR, s->affuse.v[i].loc, "the range of index '%s' cannot be inferred: '%s' has other "
			     "index names without ranges; give one of them a range with 'in', or use it plainly elsewhere",
			     var->name, text);
			free(text);
			var->extent = 1;        /* reported: no second error */
			ok = false;
		}
	return ok;
}

static bool check_access(Sema *s, Node *n, Ty *ty)
{
	const char *name = n->u.access.name;
	Sym *sym = fe_lookup(s, name);
	if (!sym) {
		diag(DIAG_ERROR, n->u.access.nameloc, "unknown tensor '%s'%s", name, did_you_mean_of(s, name, SYM_TENSOR, NULL, 0));
		return false;
	}
	sym->used = true;
	if (!fe_sym_live(sym, n->loc))
		return false;
	if (sym->kind != SYM_TENSOR) {
		diag(DIAG_ERROR, n->u.access.nameloc, "'%s' is %s and cannot be indexed", name, sym_what(sym, s->prog));
		return false;
	}
	const Tensor *t = &s->prog->tensors.v[sym->tensor];
	if (!sym->defined) {
		diag(DIAG_ERROR, n->u.access.nameloc, "'%s' is used before it has a value", name);
		return false;
	}
	if (n->u.access.nidx != t->rank) {
		int line, col;
		loc_linecol(t->loc, &line, &col);
		diag(DIAG_ERROR, n->loc, "'%s' has %d dimension%s but is indexed with %d", name, t->rank,
		     t->rank == 1 ? "" : "s", n->u.access.nidx);
		diag(DIAG_NOTE, t->loc, "'%s' is declared here", name);
		return false;
	}
	n->u.access.tensor = sym->tensor;
	n->u.access.gather = 0;
	ty->typed = true;
	ty->t = t->dtype;
	bool ok = true;
	for (int d = 0; d < n->u.access.nidx; d++) {
		Node *ix = n->u.access.idx[d];
		if (ix->kind == N_ACCESS) {
			ok &= check_gather_index(s, n, d, t);
			continue;
		}
		Sym *counter = ix->kind == N_NAME ? fe_lookup(s, ix->u.name.name) : NULL;
		if (ix->kind != N_NAME || (counter && counter->kind == SYM_COUNTER) || (n->u.access.aff && n->u.access.aff[d])) {
			ok &= check_affine_index(s, n, d, t);
			continue;
		}
		if (ix->u.name.range) {
			diag(DIAG_ERROR, ix->loc, "a range such as '%s in N' goes on the left side or in a reduction's "
			     "brackets, not in an access on the right", ix->u.name.name);
			ok = false;
			continue;
		}
		Sym *clash = fe_lookup(s, ix->u.name.name);
		if (clash && clash->kind == SYM_TENSOR) {
			diag(DIAG_ERROR, ix->loc, "'%s' is %s, not an index; index names are lower-case names not otherwise declared",
			     ix->u.name.name, sym_what(clash, s->prog));
			ok = false;
			continue;
		}
		int v = find_var(s, ix->u.name.name, ix->loc);
		ix->u.name.var = v;

		char *why = arena_alloc(s->arena, 64 + strlen(name));
		sprintf(why, "dimension %d of %s", d + 1, name);
		ok &= bind_extent(s, v, t->shape[d], ix->loc, why);
	}
	/* an index name in two shifted positions of one access (X[y + dx, x + dx])
	 * would need a diagonal of the stacked windows: not built */
	for (int d = 0; ok && n->u.access.aff && d < n->u.access.nidx; d++) {
		const IxAffine *f = n->u.access.aff[d];
		for (int e = 0; f && ok && e < n->u.access.nidx; e++) {
			if (e == d)
				continue;
			const IxAffine *g = n->u.access.aff[e];
			for (int i = 0; ok && i < f->nvar; i++) {
				bool twice = g ? false : n->u.access.idx[e]->kind == N_NAME && n->u.access.idx[e]->u.name.var == f->var[i];
				for (int j = 0; g && j < g->nvar; j++)
					twice |= g->var[j] == f->var[i];
				if (twice) {
					diag(DIAG_ERROR, n->u.access.idx[d]->loc, "an index name in two positions of '%s' where "
					     "either is shifted or strided is not supported yet; give one of them a name of its "
					     "own", name);
					ok = false;
				}
			}
		}
	}
	for (int d = 0; ok && n->u.access.gather && n->u.access.aff && d < n->u.access.nidx; d++)
		if (n->u.access.aff[d]) {
			diag(DIAG_ERROR, n->u.access.idx[d]->loc, "index arithmetic in an access that gathers is not "
			     "supported yet; gather into a temporary first, as in 'T[b, j] = %s[idx[b], j]', then index "
			     "that", name);
			ok = false;
		}
	return ok;
}

static bool check_call(Sema *s, Node *n, Ty *ty)
{
	const char *name = n->u.call.name;
	int conv = -1;
	for (DType t = DT_F32; t <= DT_I64; t++)
		if (!strcmp(name, dtype_name(t)))
			conv = t;
	int fn = -1;
	for (int i = 0; i < NFUNCTIONS; i++)
		if (!strcmp(functions[i].name, name))
			fn = i;
	if (fn < 0 && conv < 0) {
		const char *names[NFUNCTIONS];
		for (int i = 0; i < NFUNCTIONS; i++)
			names[i] = functions[i].name;
		Sym *sym = fe_lookup(s, name);
		if (sym && sym->kind == SYM_DEF)
			diag(DIAG_ERROR, n->loc, "a call of def '%s' must be the whole right side of an assignment, "
			     "as in Z = %s(...);", name, name);
		else if (sym)
			diag(DIAG_ERROR, n->u.call.nameloc, "'%s' is %s, not a function", name, sym_what(sym, s->prog));
		else
			diag(DIAG_ERROR, n->u.call.nameloc, "unknown function '%s'%s", name,
			     did_you_mean(s, name, names, NFUNCTIONS));
		return false;
	}
	if (n->u.call.nargs != 1) {
		diag(DIAG_ERROR, n->loc, "'%s' takes one argument, not %d", name, n->u.call.nargs);
		return false;
	}
	n->u.call.conv = -1;
	if (conv >= 0) {
		Ty inner;
		if (!check_expr(s, n->u.call.args[0], &inner))
			return false;
		n->u.call.conv = conv;
		ty->typed = true;
		ty->t = n->u.call.conv;
		return true;
	}
	n->u.call.fn = functions[fn].op;
	if (!check_expr(s, n->u.call.args[0], ty))
		return false;
	KOp op = n->u.call.fn;
	return op == KOP_ABS || op == KOP_RELU || op == KOP_STOP || int_operand(*ty, n->loc, name);
}

static bool check_reduce(Sema *s, Node *n, Ty *ty)
{
	int nn = n->u.reduce.nnames;
	if ((n->u.reduce.red == R_ARGMAX || n->u.reduce.red == R_ARGMIN) && nn != 1) {
		diag(DIAG_ERROR, n->loc, "%s takes one index, as in %s[k](...): the position along k", fe_red_name(n->u.reduce.red),
		     fe_red_name(n->u.reduce.red));
		return false;
	}
	if (nn > MAXDIM) {
		diag(DIAG_ERROR, n->loc, "a reduction over more than %d indices", MAXDIM);
		return false;
	}
	int base = s->scope.n;
	for (int i = 0; i < nn; i++) {
		for (int j = 0; j < i; j++)
			if (!strcmp(n->u.reduce.names[i], n->u.reduce.names[j])) {
				diag(DIAG_ERROR, n->u.reduce.nameloc[i], "index '%s' is listed twice", n->u.reduce.names[i]);
				s->scope.n = base;
				return false;
			}
		int v = new_var(s, n->u.reduce.names[i], n->u.reduce.nameloc[i], true);
		n->u.reduce.var[i] = v;
		vec_push(&s->scope, v);
		Node *range = n->u.reduce.range ? n->u.reduce.range[i] : NULL;
		int64_t extent;
		if (range && !range_extent(s, range, &extent)) {
			s->scope.n = base;
			return false;
		}
		if (range)
			bind_extent(s, v, extent, n->u.reduce.nameloc[i], range_why(s, n->u.reduce.nameloc[i]));
	}
	bool ok = check_expr(s, n->u.reduce.body, ty);
	if (ok && n->u.reduce.red == R_MEAN)
		ok = int_operand(*ty, n->loc, "mean");
	s->scope.n = base;
	for (int i = 0; ok && i < nn; i++)
		if (s->vars.v[n->u.reduce.var[i]].value && s->vars.v[n->u.reduce.var[i]].extent < 0) {
			needs_range(s, n->u.reduce.var[i], "in the brackets");
			ok = false;
		} else if (s->vars.v[n->u.reduce.var[i]].extent < 0 && !in_affine(s, n->u.reduce.var[i])) {
			diag(DIAG_ERROR, n->u.reduce.nameloc[i], "index '%s' does not occur in the argument of %s",
			     n->u.reduce.names[i], fe_red_name(n->u.reduce.red));
			ok = false;
		}
	return ok;
}

static bool check_expr(Sema *s, Node *n, Ty *ty)
{
	Ty a = {0}, b = {0}, c = {0};
	bool ok = true;

	ty->typed = false;
	if (++s->depth > MAX_DEPTH) {
		s->depth--;
		diag(DIAG_ERROR, n->loc, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
		return false;
	}
	switch (n->kind) {
	case N_NUM:
		break;
	case N_STR:
		diag(DIAG_ERROR, n->loc, "a string can only name a file, in a declaration");
		ok = false;
		break;
	case N_COUNTER:         /* the same */
		n->kind = N_NAME;
		/* fall through */
	case N_INDEX:           /* checked before: a def's body, inlined again */
		n->kind = N_NAME;
		/* fall through */
	case N_NAME: {
		int v = fe_lookup(s, n->u.name.name) ? -1 : value_var(s, n->u.name.name, n->loc);
		if (v >= 0) {
			/* an index's position: an i64 */
			n->kind = N_INDEX;
			n->u.name.var = v;
			s->vars.v[v].value = true;
			ty->typed = true;
			ty->t = DT_I64;
			break;
		}
		Sym *sym = use_sym(s, n, "name");
		if (!sym || sym->poisoned) {
			ok = false;
			break;
		}
		if (sym->kind == SYM_SIZE) {
			n->kind = N_NUM;
			n->u.num = (double)sym->size;
		} else if (sym->kind == SYM_CONST) {
			n->kind = N_NUM;
			n->u.num = sym->value;
		} else if (sym->kind == SYM_DEF) {
			diag(DIAG_ERROR, n->loc, "'%s' is a def; call it, as in %s(...)", n->u.name.name, n->u.name.name);
			ok = false;
		} else if (sym->kind == SYM_COUNTER) {
			if (!fe_sym_live(sym, n->loc)) {
				ok = false;
				break;
			}
			n->kind = N_COUNTER;
			n->u.name.var = sym->loop_depth;
			ty->typed = true;
			ty->t = DT_I64;
		} else {
			const Tensor *t = &s->prog->tensors.v[sym->tensor];
			if (t->rank != 0) {
				diag(DIAG_ERROR, n->loc, "'%s' has %d dimension%s; index it, as in %s[%s]", n->u.name.name,
				     t->rank, t->rank == 1 ? "" : "s", n->u.name.name, t->rank == 1 ? "i" : t->rank == 2 ? "i, j" : "i, j, ...");
				ok = false;
				break;
			}
			const char *name = n->u.name.name;
			Loc loc = n->loc;
			n->kind = N_ACCESS;
			n->u.access.name = name;
			n->u.access.nameloc = loc;
			n->u.access.idx = NULL;
			n->u.access.nidx = 0;
			ok = check_access(s, n, ty);
		}
		break;
	}
	case N_ACCESS:
		ok = check_access(s, n, ty);
		break;
	case N_UNARY:
		ok = check_expr(s, n->u.unary.a, ty);
		break;
	case N_BINARY:
		ok = check_expr(s, n->u.binary.a, &a);
		ok &= check_expr(s, n->u.binary.b, &b);
		if (ok && n->u.binary.op == B_POW && n->u.binary.b->kind != N_NUM) {
			diag(DIAG_ERROR, n->u.binary.b->loc, "the exponent of '**' must be a constant");
			ok = false;
		}
		*ty = a;
		ok = ok && unify(ty, b, n->loc);
		if (ok && n->u.binary.op == B_POW)
			ok = int_operand(*ty, n->loc, "'**'");
		if (ok && ty->typed && dtype_is_int(ty->t))
			ok = (a.typed || whole_numbers(n->u.binary.a, ty->t)) && (b.typed || whole_numbers(n->u.binary.b, ty->t));
		break;
	case N_CALL:
		ok = check_call(s, n, ty);
		break;
	case N_WHERE:
		ok = check_expr(s, n->u.where.cond, &c);
		ok &= check_expr(s, n->u.where.a, &a);
		ok &= check_expr(s, n->u.where.b, &b);
		*ty = a;
		ok = ok && unify(ty, b, n->loc);
		if (ok && c.typed && ty->typed && c.t != ty->t)
			n->u.where.cond = converted(s, n->u.where.cond, ty->t);   /* a condition is true where nonzero */
		else
			ok = ok && unify(ty, c, n->loc);
		if (ok && ty->typed && dtype_is_int(ty->t))
			ok = (a.typed || whole_numbers(n->u.where.a, ty->t)) && (b.typed || whole_numbers(n->u.where.b, ty->t)) &&
			     (c.typed || whole_numbers(n->u.where.cond, ty->t));
		break;
	case N_REDUCE:
		ok = check_reduce(s, n, ty);
		break;
	case N_GRAD:
		diag(DIAG_ERROR, n->loc, "grad(...) must be the whole right side of an assignment, as in dW = grad(loss, W);");
		ok = false;
		break;
	}
	s->depth--;
	return ok;
}

/* ---- implicit summation ---- */

/* The child slots of a node, in evaluation order. */
static int children(Node *n, Node ***slot)
{
	switch (n->kind) {
	case N_UNARY:
		slot[0] = &n->u.unary.a;
		return 1;
	case N_BINARY:
		slot[0] = &n->u.binary.a;
		slot[1] = &n->u.binary.b;
		return 2;
	case N_CALL:
		for (int i = 0; i < n->u.call.nargs && i < 3; i++)
			slot[i] = &n->u.call.args[i];
		return n->u.call.nargs < 3 ? n->u.call.nargs : 3;
	case N_WHERE:
		slot[0] = &n->u.where.cond;
		slot[1] = &n->u.where.a;
		slot[2] = &n->u.where.b;
		return 3;
	case N_REDUCE:
		slot[0] = &n->u.reduce.body;
		return 1;
	default:
		return 0;
	}
}

static bool count_in_idx(const Node *n, int v)
{
	for (int d = 0; d < n->u.access.nidx; d++)
		if (n->u.access.idx[d]->kind == N_ACCESS ? count_in_idx(n->u.access.idx[d], v)
		                                         : n->u.access.idx[d]->u.name.var == v)
			return true;
	return false;
}

static int count_var(Node *n, int v)
{
	int c = 0;
	if (n->kind == N_INDEX)
		return n->u.name.var == v;
	if (n->kind == N_ACCESS) {
		int var[2 * MAXDIM], k = access_vars(n, var);
		for (int d = 0; d < n->u.access.nidx; d++)
			c += n->u.access.idx[d]->kind == N_ACCESS ? count_var(n->u.access.idx[d], v)
			                                          : n->u.access.idx[d]->u.name.var == v;
		for (int i = 0; i < k; i++)             /* a var of an affine position alone */
			c += var[i] == v && !count_in_idx(n, v);
		return c;
	}
	Node **slot[3];
	int k = children(n, slot);
	for (int i = 0; i < k; i++)
		c += count_var(*slot[i], v);
	return c;
}

static bool nonlinear(const Node *n)
{
	return n->kind == N_CALL || n->kind == N_WHERE ||
	       (n->kind == N_BINARY && n->u.binary.op != B_ADD && n->u.binary.op != B_SUB &&
	        n->u.binary.op != B_MUL);
}

/* The slot of the smallest sub-expression holding all `total` occurrences
 * of var v; *under is set to the innermost nonlinear node above it. */
static Node **lca(Node **slot, int v, int total, Node **under)
{
	for (;;) {
		Node **kids[3];
		int k = children(*slot, kids), next = -1;
		for (int i = 0; i < k; i++)
			if (count_var(*kids[i], v) == total)
				next = i;
		if (next < 0)
			return slot;
		if (nonlinear(*slot))
			*under = *slot;
		slot = kids[next];
	}
}

static void place_implicit_sums(Sema *s, Node **root, int nlhs, const int *lhs)
{
	Node **slots[2 * MAXDIM + 16];
	int vars[2 * MAXDIM + 16], nslots = 0;

	for (int v = 0; v < s->vars.n; v++) {
		bool on_left = false;
		for (int i = 0; i < nlhs; i++)
			on_left |= lhs[i] == v;
		if (on_left || s->vars.v[v].reduced)
			continue;
		int total = count_var(*root, v);
		if (total == 0)
			continue;
		if (nslots == (int)(sizeof slots / sizeof slots[0])) {
			diag(DIAG_ERROR, s->vars.v[v].loc, "too many summed indices in one statement");
			return;
		}
		Node *under = NULL;
		Node **slot = lca(root, v, total, &under);
		if (under && (*slot)->kind == N_ACCESS && under->kind == N_CALL && !s->vars.v[v].single)
			diag(DIAG_WARNING, (*slot)->loc,
			     "implicit sum over '%s' is taken inside '%s', of this access alone; write sum[%s](...) "
			     "around the call if you meant to sum its results",
			     s->vars.v[v].name, under->u.call.name, s->vars.v[v].name);
		slots[nslots] = slot;
		vars[nslots++] = v;
	}
	/* one implicit reduction per distinct node, over all its vars */
	for (int i = 0; i < nslots; i++) {
		if (!slots[i])
			continue;
		Node *body = *slots[i];
		Node *r = fe_ast_node(s->arena, N_REDUCE, body->loc);
		r->u.reduce.red = R_SUM;
		r->u.reduce.implicit = true;
		r->u.reduce.body = body;
		r->u.reduce.names = arena_alloc(s->arena, MAXDIM * sizeof(char *));
		r->u.reduce.nameloc = arena_alloc(s->arena, MAXDIM * sizeof(Loc));
		for (int j = i; j < nslots; j++) {
			if (slots[j] != slots[i])
				continue;
			if (r->u.reduce.nnames == MAXDIM) {
				diag(DIAG_ERROR, body->loc, "more than %d indices summed over one sub-expression", MAXDIM);
				return;
			}
			int k = r->u.reduce.nnames++;
			r->u.reduce.var[k] = vars[j];
			r->u.reduce.names[k] = s->vars.v[vars[j]].name;
			r->u.reduce.nameloc[k] = s->vars.v[vars[j]].loc;
			s->vars.v[vars[j]].reduced = true;
			if (j != i)
				slots[j] = NULL;
		}
		*slots[i] = r;
	}
}

/* Free vars of every node, in first-occurrence order (for lowering). */
static void free_vars(Node *n)
{
	n->nvar = 0;
	if (n->kind == N_INDEX) {
		n->var[n->nvar++] = n->u.name.var;
		return;
	}
	if (n->kind == N_ACCESS) {
		for (int d = 0; d < n->u.access.nidx; d++)
			if (n->u.access.idx[d]->kind == N_ACCESS)
				free_vars(n->u.access.idx[d]);  /* a gather's index, lowered on its own */
		int var[2 * MAXDIM], k = access_vars(n, var);
		for (int i = 0; i < k && n->nvar < MAXDIM; i++)
			n->var[n->nvar++] = var[i];
		return;
	}
	Node **kids[3];
	int k = children(n, kids);
	for (int c = 0; c < k; c++) {
		Node *ch = *kids[c];
		free_vars(ch);
		for (int i = 0; i < ch->nvar; i++) {
			int v = ch->var[i], skip = 0;
			for (int j = 0; j < n->nvar; j++)
				skip |= n->var[j] == v;
			if (n->kind == N_REDUCE)
				for (int j = 0; j < n->u.reduce.nnames; j++)
					skip |= n->u.reduce.var[j] == v;
			if (!skip && n->nvar < MAXDIM)
				n->var[n->nvar++] = v;
		}
	}
}

static bool check_rank(Sema *s, Node *n)
{
	Node **kids[3];
	int k = children(n, kids);
	bool ok = true;
	for (int c = 0; c < k; c++)
		ok &= check_rank(s, *kids[c]);
	int total = n->nvar;
	if (n->kind == N_REDUCE)
		total += n->u.reduce.nnames;
	if (ok && total > MAXDIM) {
		diag(DIAG_ERROR, n->loc, "this sub-expression has %d indices; trac supports at most %d", total, MAXDIM);
		return false;
	}
	return ok;
}

/* Does n read a relation: a tensor, or an index's positions? */
static bool reads_tensor(Node *n)
{
	if (n->kind == N_ACCESS || n->kind == N_INDEX)
		return true;
	Node **kids[3];
	int k = children(n, kids);
	for (int c = 0; c < k; c++)
		if (reads_tensor(*kids[c]))
			return true;
	return false;
}

/* ---- items ---- */

static void check_input(Sema *s, Item *it)
{
	Tensor t = {.name = it->name, .loc = it->nameloc, .role = TENSOR_INPUT,
	            .dtype = it->u.decl.dtype, .path = it->u.decl.path, .sparse = it->u.decl.sparse};
	if (it->u.decl.ndims > MAXDIM) {
		diag(DIAG_ERROR, it->nameloc, "'%s' has %d dimensions; trac supports at most %d", it->name,
		     it->u.decl.ndims, MAXDIM);
		return;
	}
	t.rank = it->u.decl.ndims;
	int64_t total = 1;
	bool ok = true;
	for (int d = 0; d < t.rank; d++) {
		if (it->u.decl.dims[d]->kind == N_NAME)
			t.dimsize[d] = it->u.decl.dims[d]->u.name.name;
		if (!eval_int(s, it->u.decl.dims[d], &t.shape[d])) {
			ok = false;
			continue;
		}
		if (t.shape[d] < 1) {
			diag(DIAG_ERROR, it->u.decl.dims[d]->loc, "extent %" PRId64 " is not positive", t.shape[d]);
			ok = false;
		} else if (!mul_ok(total, t.shape[d], &total) || !mul_ok(total, dtype_size(t.dtype), &(int64_t){0})) {
			diag(DIAG_ERROR, it->nameloc, "'%s' has more elements than fit in 64 bits", it->name);
			ok = false;
		}
	}
	if (!ok)
		return;
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	Sym sym = {.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id, .defined = true};
	if (fe_declare(s, sym))
		s->cur.v[id] = fe_lower_input(s->prog, id);
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

static void check_grad(Sema *s, Item *it);

static const char *aop_name(AssignOp op)
{
	static const char *names[] = {"=", "+=", "-=", "*=", "/="};
	return names[op];
}

/*
 * An assignment.  To a new name it defines a tensor; to a param it is an
 * update, W[d, h] -= e meaning W's new value is W[d, h] - (e), stored back
 * (implicit sums are placed in the whole update, so they land inside e).
 */
/* The left side's name: a param to update (*param), or a new name; false
 * (reported) when it is neither. */
static bool assign_target(Sema *s, Item *it, Sym **target, const Tensor **param)
{
	int nlhs = it->u.assign.nidx;
	*target = fe_lookup(s, it->name);
	*param = NULL;
	Sym *t = *target;
	if (t && t->kind == SYM_TENSOR && !t->poisoned && t->tensor >= 0 &&
	    s->prog->tensors.v[t->tensor].role == TENSOR_PARAM) {
		const Tensor *p = &s->prog->tensors.v[t->tensor];
		if (nlhs != p->rank) {
			diag(DIAG_ERROR, it->nameloc, "param '%s' has %d dimension%s; update it as %s[%s] %s ...",
			     it->name, p->rank, p->rank == 1 ? "" : "s", it->name,
			     p->rank == 1 ? "i" : p->rank == 2 ? "i, j" : "i, j, ...", aop_name(it->u.assign.op));
			return false;
		}
		t->used = true;
		*param = p;
	} else if (it->u.assign.op != A_SET) {
		if (t && !t->poisoned)
			diag(DIAG_ERROR, it->nameloc, "only params can be updated with '%s'; '%s' is %s",
			     aop_name(it->u.assign.op), it->name, sym_what(t, s->prog));
		else if (!t)
			diag(DIAG_ERROR, it->nameloc, "'%s' is not a param; only params can be updated with '%s'",
			     it->name, aop_name(it->u.assign.op));
		return false;
	} else if (t && t >= s->syms.v + s->scope_base) {
		int line, col;
		loc_linecol(t->loc, &line, &col);
		if (t->kind == SYM_TENSOR && t->tensor >= 0 && s->prog->tensors.v[t->tensor].role == TENSOR_INPUT)
			diag(DIAG_ERROR, it->nameloc, "cannot assign to input '%s' (declared at %d:%d)", it->name, line, col);
		else
			diag(DIAG_ERROR, it->nameloc, "'%s' is already defined, as %s at %d:%d; each name is defined once",
			     it->name, sym_what(t, s->prog), line, col);
		return false;
	}
	return true;
}

/* The left side's indices as fresh vars lhs[] (a param's bound to its
 * shape); false (reported) when one is not a new plain name. */
static bool lhs_indices(Sema *s, Item *it, const Tensor *param, int *lhs)
{
	int nlhs = it->u.assign.nidx;
	s->vars.n = 0;
	s->affuse.n = 0;
	s->scope.n = 0;
	bool ok = true;
	for (int i = 0; i < nlhs; i++) {
		Node *ix = it->u.assign.idx[i];
		lhs[i] = -1;            /* until it is a var: the loop below skips it */
		if (ix->kind != N_NAME) {
			diag(DIAG_ERROR, ix->loc, "an index on the left must be a plain name such as 'i'");
			ok = false;
			continue;
		}
		Sym *clash = fe_lookup(s, ix->u.name.name);
		if (clash) {
			diag(DIAG_ERROR, ix->loc, "'%s' is %s, not an index", ix->u.name.name, sym_what(clash, s->prog));
			ok = false;
			continue;
		}
		for (int j = 0; j < i; j++)
			if (lhs[j] >= 0 && !strcmp(s->vars.v[lhs[j]].name, ix->u.name.name)) {
				diag(DIAG_ERROR, ix->loc, "index '%s' appears twice on the left", ix->u.name.name);
				ok = false;
			}
		lhs[i] = new_var(s, ix->u.name.name, ix->loc, false);
		ix->u.name.var = lhs[i];
		if (param) {
			char *why = arena_alloc(s->arena, 64 + strlen(it->name));
			sprintf(why, "dimension %d of %s", i + 1, it->name);
			bind_extent(s, lhs[i], param->shape[i], ix->loc, why);
		}
		int64_t extent;
		if (ix->u.name.range && !range_extent(s, ix->u.name.range, &extent))
			ok = false;
		else if (ix->u.name.range)
			ok &= bind_extent(s, lhs[i], extent, ix->loc, range_why(s, ix->loc));
	}
	return ok;
}

/* W[i, j] -= v: the right side becomes W[i, j] - v, the op '='. */
static void update_value(Sema *s, Item *it)
{
	static const BinOp ops[] = {B_ADD, B_ADD, B_SUB, B_MUL, B_DIV};
	int nlhs = it->u.assign.nidx;
	Node *w = fe_ast_node(s->arena, N_ACCESS, it->nameloc);
	w->u.access.name = it->name;
	w->u.access.nameloc = it->nameloc;
	w->u.access.nidx = nlhs;
	w->u.access.idx = arena_alloc(s->arena, (nlhs + 1) * sizeof(Node *));
	for (int i = 0; i < nlhs; i++) {
		w->u.access.idx[i] = fe_ast_node(s->arena, N_NAME, it->u.assign.idx[i]->loc);
		w->u.access.idx[i]->u.name.name = it->u.assign.idx[i]->u.name.name;
	}
	Node *v = fe_ast_node(s->arena, N_BINARY, it->loc);
	v->u.binary.op = ops[it->u.assign.op];
	v->u.binary.a = w;
	v->u.binary.b = it->u.assign.value;
	it->u.assign.value = v;
	it->u.assign.op = A_SET;
}

/* The right side: types, the left's indices all used, implicit sums, ranks.
 * False when there is nothing to lower: an error (reported), or a value
 * known at compile time, declared a const. */
static bool check_rhs(Sema *s, Item *it, const Tensor *param, const int *lhs, Ty *ty)
{
	int nlhs = it->u.assign.nidx;
	s->rhs = it->u.assign.value;
	bool checked = check_expr(s, it->u.assign.value, ty);
	s->rhs = NULL;
	if (!checked)
		return false;
	if (param && ty->typed && ty->t != param->dtype) {
		diag(DIAG_ERROR, it->u.assign.value->loc, "the new value of %s param '%s' is %s; convert it with %s(...)",
		     dtype_name(param->dtype), it->name, dtype_name(ty->t), dtype_name(param->dtype));
		return false;
	}
	bool ok = infer_ranges(s);
	for (int i = 0; i < nlhs; i++)
		if (!param && count_var(it->u.assign.value, lhs[i]) == 0) {
			diag(DIAG_ERROR, it->u.assign.idx[i]->loc, "index '%s' on the left does not occur on the right",
			     s->vars.v[lhs[i]].name);
			ok = false;
		}
	/* an index used only as a value takes its extent from `in` */
	for (int v = 0; ok && v < s->vars.n; v++)
		if (s->vars.v[v].extent < 0) {
			bool left = false;
			for (int i = 0; i < nlhs; i++)
				left |= lhs[i] == v;
			needs_range(s, v, left ? "on the left" : "in the brackets of a reduction around its uses");
			ok = false;
		}
	if (!ok)
		return false;
	place_implicit_sums(s, &it->u.assign.value, nlhs, lhs);
	free_vars(it->u.assign.value);
	if (!check_rank(s, it->u.assign.value) || diag_errors() > s->nerr_before)
		return false;
	if (!param && nlhs == 0 && !reads_tensor(it->u.assign.value)) {
		/* s = 3 * N: a rank-0 tensor whose value is known at compile
		 * time is a const; every use folds it */
		double v;
		if (eval_num(s, it->u.assign.value, &v))
			fe_declare(s, (Sym){.kind = SYM_CONST, .name = it->name, .loc = it->nameloc, .value = v});
		return false;
	}
	if (!reads_tensor(it->u.assign.value) || (param && it->u.assign.value->nvar < nlhs)) {
		diag(DIAG_ERROR, it->u.assign.value->loc, "%s; the right side must read a tensor",
		     param ? "a param can only be set from tensors indexed by all its indices"
		           : "a tensor with indices needs a right side that reads a tensor");
		return false;
	}
	return true;
}

/* A new name's tensor, declared; -1 (reported) when it is too large. */
static int new_tensor(Sema *s, Item *it, const int *lhs, const Ty *ty)
{
	int nlhs = it->u.assign.nidx;
	Tensor t = {.name = fe_local_name(s, it->name), .loc = it->nameloc, .role = TENSOR_TEMP, .rank = nlhs,
	            .dtype = ty->typed ? ty->t : DT_F32};
	int64_t total = 1;
	for (int i = 0; i < nlhs; i++) {
		t.shape[i] = s->vars.v[lhs[i]].extent;
		if (!mul_ok(total, t.shape[i], &total) || !mul_ok(total, dtype_size(t.dtype), &(int64_t){0})) {
			diag(DIAG_ERROR, it->nameloc, "'%s' has more elements than fit in 64 bits", it->name);
			return -1;
		}
	}
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	fe_declare(s, (Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id, .defined = true,
	                 .loop_depth = s->loop_depth});
	return id;
}

/* NAME[i, ...] = expr; or a param's update (+=, -=, *=, /=); a grad or a
 * def's call on the right goes to check_grad or fe_inline_call. */
static void check_assign(Sema *s, Item *it)
{
	int lhs[MAXDIM];
	int nlhs = it->u.assign.nidx;
	Sym *target;
	const Tensor *param;

	if (!assign_target(s, it, &target, &param))
		return;
	if (it->u.assign.value->kind == N_GRAD) {
		if (param) {
			diag(DIAG_ERROR, it->nameloc, "a gradient cannot update param '%s'; assign it to a new name, "
			     "as in d%s = grad(loss, %s);", it->name, it->name, it->name);
			return;
		}
		check_grad(s, it);
		return;
	}
	if (it->u.assign.value->kind == N_CALL) {
		Sym *f = fe_lookup(s, it->u.assign.value->u.call.name);
		if (f && f->kind == SYM_DEF) {
			if (param) {
				diag(DIAG_ERROR, it->nameloc, "a def's result cannot update param '%s'; assign it to a new "
				     "name and update the param from that", it->name);
				return;
			}
			fe_inline_call(s, it, f->def);
			return;
		}
	}
	if (nlhs > MAXDIM) {
		diag(DIAG_ERROR, it->nameloc, "'%s' has %d dimensions; trac supports at most %d", it->name, nlhs, MAXDIM);
		return;
	}
	if (!lhs_indices(s, it, param, lhs))
		return;
	if (param && it->u.assign.op != A_SET)
		update_value(s, it);
	Ty ty = {0};
	if (!check_rhs(s, it, param, lhs, &ty))
		return;
	int id = param ? target->tensor : new_tensor(s, it, lhs, &ty);
	if (id < 0)
		return;

	Lowering l = {s->prog, s->cur.v, tra_add_stmt(s->prog, it->loc), s->vars.v, s->vars.n,
	              s->prog->tensors.v[id].dtype};
	int op = fe_lower_assign(&l, it->u.assign.value, nlhs, lhs);
	if (param) {
		fe_lower_store(&l, op, id);
		s->cur.v[id] = -1;      /* read again: loads the new value */
	} else {
		s->cur.v[id] = op;
	}
}

/* param W[D, H] = zeros | ones | uniform(a, b) | normal(mean, std) | "w0.npy"; */
static void check_param(Sema *s, Item *it)
{
	Tensor t = {.name = it->name, .loc = it->nameloc, .role = TENSOR_PARAM, .dtype = it->u.decl.dtype};
	Node *init = it->u.decl.init;
	bool ok = true;

	if (it->u.decl.sparse) {
		diag(DIAG_ERROR, it->u.decl.sparseloc, "only an input may be sparse; a param is dense, since every "
		     "training step may change any of its elements");
		return;
	}
	if (dtype_is_int(t.dtype)) {
		diag(DIAG_ERROR, it->u.decl.typeloc, "a param is trained, so it is f32 or f64; an %s tensor is an input "
		     "or a computed tensor", dtype_name(t.dtype));
		return;
	}

	if (it->u.decl.ndims > MAXDIM) {
		diag(DIAG_ERROR, it->nameloc, "'%s' has %d dimensions; trac supports at most %d", it->name,
		     it->u.decl.ndims, MAXDIM);
		return;
	}
	t.rank = it->u.decl.ndims;
	int64_t total = 1;
	for (int d = 0; d < t.rank; d++) {
		if (it->u.decl.dims[d]->kind == N_NAME)
			t.dimsize[d] = it->u.decl.dims[d]->u.name.name;
		if (!eval_int(s, it->u.decl.dims[d], &t.shape[d])) {
			ok = false;
		} else if (t.shape[d] < 1) {
			diag(DIAG_ERROR, it->u.decl.dims[d]->loc, "extent %" PRId64 " is not positive", t.shape[d]);
			ok = false;
		} else if (!mul_ok(total, t.shape[d], &total) || !mul_ok(total, dtype_size(t.dtype), &(int64_t){0})) {
			diag(DIAG_ERROR, it->nameloc, "'%s' has more elements than fit in 64 bits", it->name);
			ok = false;
		}
	}
	const char *fn = init->kind == N_NAME ? init->u.name.name : init->kind == N_CALL ? init->u.call.name : NULL;
	int nargs = init->kind == N_CALL ? init->u.call.nargs : 0;
	if (init->kind == N_STR) {
		t.init = INIT_FILE;
		t.path = init->u.str;
	} else if (fn && (!strcmp(fn, "zeros") || !strcmp(fn, "ones")) && nargs == 0) {
		t.init = fn[0] == 'z' ? INIT_ZEROS : INIT_ONES;
	} else if (fn && (!strcmp(fn, "uniform") || !strcmp(fn, "normal")) && init->kind == N_CALL) {
		t.init = fn[0] == 'u' ? INIT_UNIFORM : INIT_NORMAL;
		if (nargs != 2) {
			diag(DIAG_ERROR, init->loc, "%s takes two arguments, %s", fn,
			     t.init == INIT_UNIFORM ? "uniform(low, high)" : "normal(mean, std)");
			return;
		}
		ok &= eval_num(s, init->u.call.args[0], &t.init_a);
		ok &= eval_num(s, init->u.call.args[1], &t.init_b);
		if (ok && t.init == INIT_NORMAL && t.init_b < 0) {
			diag(DIAG_ERROR, init->u.call.args[1]->loc, "a standard deviation cannot be negative");
			ok = false;
		}
	} else {
		diag(DIAG_ERROR, init->loc, "unknown initialiser; use zeros, ones, uniform(low, high), "
		     "normal(mean, std) or a file name in quotes");
		return;
	}
	if (!ok)
		return;
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	if (fe_declare(s, (Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id, .defined = true}))
		fe_lower_param_init(s->prog, id);
}

/* print NAME; */
static void check_print(Sema *s, Item *it)
{
	Node *n = it->u.print.value;
	if (n->kind != N_NAME) {
		diag(DIAG_ERROR, n->loc, "print takes the name of a tensor");
		return;
	}
	Sym *sym = fe_lookup(s, n->u.name.name);
	if (!sym || sym->kind != SYM_TENSOR) {
		if (!sym)
			diag(DIAG_ERROR, n->loc, "unknown tensor '%s'", n->u.name.name);
		else if (sym->kind == SYM_CONST)
			diag(DIAG_ERROR, n->loc, "'%s' is a const, %g when the program compiles; print takes a tensor "
			     "computed when it runs", n->u.name.name, sym->value);
		else
			diag(DIAG_ERROR, n->loc, "'%s' is %s; print takes a tensor", n->u.name.name, sym_what(sym, s->prog));
		return;
	}
	if (!fe_sym_live(sym, n->loc))
		return;
	sym->used = true;
	Lowering l = {s->prog, s->cur.v, tra_add_stmt(s->prog, it->loc), NULL, 0,
	              s->prog->tensors.v[sym->tensor].dtype};
	fe_lower_print(&l, sym->tensor);
}


/* The split clause of an IST loop: each name a size that some param's
 * dim is declared with and no input's, J at least 1.  False (reported)
 * otherwise. */
static bool check_split(Sema *s, Item *it, IstLoop *l)
{
	bool ok = true;
	if (it->u.repeat.nsplit > MAXSPLIT) {
		diag(DIAG_ERROR, it->u.repeat.splitloc[MAXSPLIT], "an IST loop splits at most %d sizes", MAXSPLIT);
		return false;
	}
	l->loc = it->u.repeat.istloc;
	l->nsplit = it->u.repeat.nsplit;
	for (int i = 0; i < l->nsplit; i++) {
		const char *name = it->u.repeat.split[i];
		Loc at = it->u.repeat.splitloc[i];
		l->split[i] = name;
		l->splitloc[i] = at;
		Sym *sym = fe_lookup(s, name);
		if (!sym || sym->kind != SYM_SIZE) {
			diag(DIAG_ERROR, at, "'%s' is %s; split names sizes whose neurons are dealt among the ranks",
			     name, sym ? sym_what(sym, s->prog) : "not declared");
			ok = false;
			continue;
		}
		l->extent[i] = sym->size;
		for (int j = 0; j < i; j++)
			if (!strcmp(l->split[j], name)) {
				diag(DIAG_ERROR, at, "'%s' is split twice", name);
				ok = false;
			}
		bool used = false;
		for (int t = 0; t < s->prog->tensors.n; t++) {
			const Tensor *ten = &s->prog->tensors.v[t];
			for (int d = 0; d < ten->rank; d++) {
				if (!ten->dimsize[d] || strcmp(ten->dimsize[d], name))
					continue;
				if (ten->role == TENSOR_PARAM)
					used = true;
				else if (ten->role == TENSOR_INPUT && ok) {
					diag(DIAG_ERROR, at, "input '%s' has a dim of split size '%s': splitting an input "
					     "among the subnets is not supported yet", ten->name, name);
					ok = false;
				}
			}
		}
		if (!used && ok) {
			diag(DIAG_ERROR, at, "no param has a dim of size '%s', so splitting it splits nothing; "
			     "declare the params' dims with the size's name", name);
			ok = false;
		}
	}
	if (!eval_int(s, it->u.repeat.every, &l->every))
		return false;
	if (l->every < 1) {
		diag(DIAG_ERROR, it->u.repeat.every->loc, "every takes the local iterations between exchanges, "
		     "at least 1; found %" PRId64, l->every);
		ok = false;
	}
	return ok;
}

/* Items outside the IST body being compiled apart: sizes, consts,
 * declarations, imports and defs count; statements do not, and repeat
 * blocks only for the IST loops inside them. */
static void skip_items(Sema *s, Item **items, int n);

/* repeat N { ... }: the body's temps exist only inside it.  An IST loop
 * (`split ... every ...`) in the whole program is checked and then left
 * empty: its body is compiled apart (fe_compile with ist_local). */
static void check_repeat(Sema *s, Item *it)
{
	int64_t n;
	bool ist = it->u.repeat.nsplit > 0;
	if (s->ist_depth) {
		int line, col;
		loc_linecol(s->prog->ist.v[s->nist - 1].loc, &line, &col);
		diag(DIAG_ERROR, it->loc, "a repeat block inside an IST loop (at %d:%d) is not supported yet: the "
		     "body is one training step", line, col);
		return;
	}
	if (!eval_int(s, it->u.repeat.count, &n))
		return;
	IstLoop l = {.count = n, .depth = s->loop_depth};
	if (ist) {
		if (!check_split(s, it, &l))
			return;
		vec_push(&s->prog->ist, l);
		s->nist++;
	}
	if (s->ist_skip && !(ist && s->nist == s->opt->ist_local)) {
		/* a block around the IST body compiled apart: its counter, of its
		 * depth, is the value trt_ist passes in (emit.c) */
		int first = s->syms.n;
		if (it->u.repeat.counter && !ist)
			fe_declare(s, (Sym){.kind = SYM_COUNTER, .name = it->u.repeat.counter, .loc = it->u.repeat.counterloc,
			                 .size = n, .loop_depth = s->loop_depth, .defined = true, .used = true});
		s->loop_depth++;
		skip_items(s, it->u.repeat.body, it->u.repeat.nbody);
		s->loop_depth--;
		for (int i = first; i < s->syms.n; i++) {
			s->syms.v[i].expired = true;
			s->syms.v[i].expired_loc = it->loc;
		}
		return;
	}
	if (n < 0) {
		diag(DIAG_ERROR, it->u.repeat.count->loc, "a repeat count cannot be negative");
		return;
	}
	if (s->loop_depth >= MAX_LOOP_DEPTH) {
		diag(DIAG_ERROR, it->loc, "repeat blocks nested more than %d deep", MAX_LOOP_DEPTH);
		return;
	}
	int first = s->syms.n, loop_op = s->prog->ops.n, nstmt = s->prog->stmts.n;
	fe_lower_loop(s->prog, n, it->loc);
	if (ist) {
		s->prog->ops.v[loop_op].u.loop.ist = s->nist;
		s->ist_depth = s->loop_depth + 1;
		s->ist_skip = false;
		if (!s->opt->ist_local)
			ist_scope = (typeof(ist_scope)){s, first, l.loc};
	}
	if (it->u.repeat.counter)
		fe_declare(s, (Sym){.kind = SYM_COUNTER, .name = it->u.repeat.counter, .loc = it->u.repeat.counterloc,
		                 .size = n, .loop_depth = s->loop_depth, .defined = true, .used = true});
	for (int t = 0; t < s->cur.n; t++)
		if (s->prog->tensors.v[t].role == TENSOR_PARAM)
			s->cur.v[t] = -1;       /* each iteration reads the params afresh */
	s->loop_depth++;
	for (int i = 0; i < it->u.repeat.nbody && diag_errors() < diag_max; i++)
		fe_check_item(s, it->u.repeat.body[i]);
	s->loop_depth--;
	if (ist) {
		ist_scope.s = NULL;
		s->ist_depth = 0;
		s->ist_skip = s->opt->ist_local > 0;
		if (!s->opt->ist_local) {
			/* the whole program keeps the loop, empty: the IST run stands for it */
			for (int i = nstmt; i < s->prog->stmts.n; i++)
				free(s->prog->stmts.v[i].text);
			s->prog->stmts.n = nstmt;
			s->prog->ops.n = loop_op + 1;
			for (int t = 0; t < s->cur.n; t++)
				if (s->cur.v[t] > loop_op)
					s->cur.v[t] = -1;
		}
	}
	fe_lower_endloop(s->prog);
	for (int t = 0; t < s->cur.n; t++)
		if (s->prog->tensors.v[t].role == TENSOR_PARAM)
			s->cur.v[t] = -1;
	for (int i = first; i < s->syms.n; i++) {
		s->syms.v[i].expired = true;
		s->syms.v[i].expired_loc = it->loc;
	}
}

/* ---- gradients ---- */

/* A tensor name in a grad(...): its sym, or NULL after an error. */
static Sym *grad_operand(Sema *s, const char *name, Loc loc, const char *what)
{
	Sym *sym = fe_lookup(s, name);
	if (!sym) {
		diag(DIAG_ERROR, loc, "unknown tensor '%s'%s", name, did_you_mean_of(s, name, SYM_TENSOR, NULL, 0));
		return NULL;
	}
	if (!fe_sym_live(sym, loc))
		return NULL;
	if (sym->kind != SYM_TENSOR) {
		diag(DIAG_ERROR, loc, "'%s' is %s; grad takes %s", name, sym_what(sym, s->prog), what);
		return NULL;
	}
	sym->used = true;
	return sym;
}

/*
 * dW = grad(loss, W): the gradient of the scalar loss with respect to the
 * param (or input) W, as its value in loss's computation.  Lowered to a grad
 * op that optimizer/autodiff.c turns into the backward computation.
 */
static void check_grad(Sema *s, Item *it)
{
	Node *g = it->u.assign.value;
	if (it->u.assign.has_idx) {
		diag(DIAG_ERROR, it->nameloc, "a gradient is assigned whole: write %s = grad(...);", it->name);
		return;
	}
	Sym *loss = grad_operand(s, g->u.grad.loss, g->u.grad.lossloc, "a scalar first");
	Sym *wrt = grad_operand(s, g->u.grad.wrt, g->u.grad.wrtloc, "a param or an input second");
	if (!loss || !wrt)
		return;
	const Tensor *lt = &s->prog->tensors.v[loss->tensor];
	const Tensor *wt = &s->prog->tensors.v[wrt->tensor];
	if (lt->rank != 0) {
		diag(DIAG_ERROR, g->u.grad.lossloc, "'%s' has %d dimension%s; grad differentiates a scalar "
		     "(sum it first, as in loss = sum[i](%s[i]))", lt->name, lt->rank, lt->rank == 1 ? "" : "s", lt->name);
		return;
	}
	if (dtype_is_int(lt->dtype) || dtype_is_int(wt->dtype)) {
		const Tensor *x = dtype_is_int(lt->dtype) ? lt : wt;
		diag(DIAG_ERROR, dtype_is_int(lt->dtype) ? g->u.grad.lossloc : g->u.grad.wrtloc,
		     "'%s' is %s; grad differentiates f32 and f64 values only", x->name, dtype_name(x->dtype));
		return;
	}
	if (wt->role == TENSOR_TEMP) {
		diag(DIAG_ERROR, g->u.grad.wrtloc, "'%s' is a computed tensor; grad is taken with respect to a param "
		     "or an input", g->u.grad.wrt);
		return;
	}
	int lossid = loss->tensor, wrtid = wrt->tensor;        /* fe_declare() may move the syms */
	Tensor t = *wt;
	t.name = fe_local_name(s, it->name);
	t.loc = it->nameloc;
	t.role = TENSOR_TEMP;
	t.output = false;
	t.path = NULL;
	t.init = INIT_NONE;
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	fe_declare(s, (Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id,
	                 .defined = true, .loop_depth = s->loop_depth});
	Lowering l = {s->prog, s->cur.v, tra_add_stmt(s->prog, it->loc), NULL, 0, t.dtype};
	s->cur.v[id] = fe_lower_grad(&l, lossid, wrtid);
}

/* A definition that failed still declares its name, poisoned, so later uses
 * of it do not each report that it does not exist. */
static void poison_on_error(Sema *s, Item *it)
{
	Sym *old = fe_lookup(s, it->name);
	if (diag_errors() > s->nerr_before && (!old || old < s->syms.v + s->scope_base))
		vec_push(&s->syms, ((Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc,
		                          .tensor = -1, .poisoned = true}));
}

static void skip_items(Sema *s, Item **items, int n)
{
	for (int i = 0; i < n && diag_errors() < diag_max; i++)
		fe_check_item(s, items[i]);
}

void fe_check_item(Sema *s, Item *it)
{
	if (s->ist_skip && (it->kind == I_ASSIGN || it->kind == I_PRINT || it->kind == I_OUTPUT))
		return;
	if (s->ist_depth && it->kind == I_PRINT) {
		int line, col;
		loc_linecol(s->prog->ist.v[s->nist - 1].loc, &line, &col);
		diag(DIAG_ERROR, it->loc, "print inside an IST loop (at %d:%d) is not supported yet: each rank "
		     "trains its own subnet; print after the loop", line, col);
		return;
	}
	s->nerr_before = diag_errors();
	if (s->prog->stmts.n >= MAX_STATEMENTS) {
		if (!s->too_many)
			diag(DIAG_ERROR, it->loc, "the program has more than %d statements (a def's body counts once per call); "
			     "trac compiles at most that many", MAX_STATEMENTS);
		s->too_many = true;
		return;
	}
	switch (it->kind) {
	case I_SIZE: {
		int64_t v;
		int di;
		const Define *d = find_define(s, it->name, &di);
		if (!eval_int(s, it->u.size.value, &v))
			return;
		if (d) {
			char *end;
			errno = 0;
			long long dv = strtoll(d->value, &end, 10);
			s->define_used[di] = true;
			if (*end || end == d->value || errno) {
				diag(DIAG_ERROR, NOLOC, "-D %s=%s: a size must be an integer", d->name, d->value);
				return;
			}
			v = dv;
		}
		if (v < 1) {
			diag(DIAG_ERROR, it->u.size.value->loc, "size '%s' is %" PRId64 "; sizes must be positive", it->name, v);
			return;
		}
		fe_declare(s, (Sym){.kind = SYM_SIZE, .name = it->name, .loc = it->nameloc, .size = v});
		return;
	}
	case I_CONST: {
		double v;
		int di;
		const Define *d = find_define(s, it->name, &di);
		if (!eval_num(s, it->u.cnst.value, &v))
			return;
		if (d) {
			char *end;
			s->define_used[di] = true;
			v = strtod(d->value, &end);
			if (*end || end == d->value) {
				diag(DIAG_ERROR, NOLOC, "-D %s=%s: a const must be a number", d->name, d->value);
				return;
			}
		}
		fe_declare(s, (Sym){.kind = SYM_CONST, .name = it->name, .loc = it->nameloc, .value = v});
		return;
	}
	case I_INPUT:
		check_input(s, it);
		poison_on_error(s, it);
		return;
	case I_OUTPUT: {
		Sym *sym = fe_lookup(s, it->name);
		if (!sym) {
			/* outputs may be declared before their statement: resolved at the end */
			return;
		}
		if (sym->kind == SYM_CONST) {
			diag(DIAG_ERROR, it->nameloc, "'%s' is a const, %g when the program compiles; only tensors "
			     "computed when it runs can be outputs", it->name, sym->value);
			return;
		}
		if (sym->kind != SYM_TENSOR) {
			diag(DIAG_ERROR, it->nameloc, "'%s' is %s; only tensors can be outputs", it->name, sym_what(sym, s->prog));
			return;
		}
		return;
	}
	case I_ASSIGN:
		check_assign(s, it);
		poison_on_error(s, it);
		return;
	case I_PARAM:
		check_param(s, it);
		poison_on_error(s, it);
		return;
	case I_IMPORT:
		fe_check_import(s, it);
		return;
	case I_DEF:
		fe_check_def(s, it);
		return;
	case I_PRINT:
		check_print(s, it);
		return;
	case I_REPEAT:
		check_repeat(s, it);
		return;
	}
}

void fe_check_items(Sema *s, Item **items, int n)
{
	for (int i = 0; i < n && diag_errors() < diag_max; i++)
		fe_check_item(s, items[i]);
}

/* Outputs: each names a tensor that has a value at the end. */
static void check_outputs(Sema *s, Ast *ast)
{
	if (s->too_many)
		return;         /* the statements after the limit were never checked */
	for (int i = 0; i < ast->nitems; i++) {
		Item *it = ast->items[i];
		if (it->kind != I_OUTPUT)
			continue;
		Sym *sym = fe_lookup(s, it->name);
		if (!sym) {
			diag(DIAG_ERROR, it->nameloc, "output '%s' is never defined%s", it->name, did_you_mean_of(s, it->name, SYM_TENSOR, NULL, 0));
			continue;
		}
		if (sym->kind != SYM_TENSOR || !fe_sym_live(sym, it->nameloc))
			continue;       /* reported in order */
		Tensor *t = &s->prog->tensors.v[sym->tensor];
		if (t->output) {
			int line, col;
			loc_linecol(t->outloc, &line, &col);
			diag(DIAG_ERROR, it->nameloc, "'%s' is already an output (at %d:%d)", it->name, line, col);
			continue;
		}
		sym->used = true;
		t->output = true;
		t->outpath = it->u.output.path;
		t->outloc = it->nameloc;
		if (diag_errors() == 0)
			fe_lower_output(s->prog, s->cur.v, sym->tensor);
	}
}

TraProg *fe_compile(Ast *ast, FeOptions *opt)
{
	Sema s = {.opt = opt, .arena = ast->arena, .prog = tra_new()};
	s.define_used = xcalloc(opt->ndefines + 1, sizeof(bool));
	char real[PATH_MAX];
	const char *main_path = src_get(ast->file)->path;
	fe_add_dep(opt, main_path);
	vec_push(&s.importing, xstrdup(realpath(main_path, real) ? real : main_path));
	vec_push(&s.shown, xstrdup(main_path));
	vec_push(&s.files, ast->file);

	s.ist_skip = opt->ist_local > 0;
	fe_check_items(&s, ast->items, ast->nitems);
	if (!opt->ist_local)
		check_outputs(&s, ast);

	for (int i = 0; i < opt->ndefines; i++)
		if (!s.define_used[i])
			diag(DIAG_ERROR, NOLOC, "-D %s=%s: the program declares no size or const named '%s'",
			     opt->defines[i].name, opt->defines[i].value, opt->defines[i].name);
	bool any_output = false;
	for (int i = 0; i < s.prog->tensors.n; i++)
		any_output |= s.prog->tensors.v[i].output;
	if (opt->warnings && !opt->ist_local && diag_errors() == 0) {
		for (int i = 0; i < s.syms.n; i++) {
			Sym *sym = &s.syms.v[i];
			if (sym->kind == SYM_TENSOR && !sym->poisoned && !sym->used && sym->tensor >= 0 &&
			    s.prog->tensors.v[sym->tensor].role != TENSOR_TEMP)
				diag(DIAG_WARNING, sym->loc, "%s '%s' is never used",
				     s.prog->tensors.v[sym->tensor].role == TENSOR_INPUT ? "input" : "param", sym->name);
		}
		if (!any_output && s.prog->tensors.n > 0)
			diag(DIAG_WARNING, NOLOC, "the program has no output; declare one with 'output NAME;'");
	}

	for (int i = 0; i < s.imports.n; i++)
		free(s.imports.v[i]);
	for (int i = 0; i < s.importing.n; i++) {
		free(s.importing.v[i]);
		free(s.shown.v[i]);
	}
	vec_free(&s.shown);
	vec_free(&s.imports);
	vec_free(&s.importing);
	vec_free(&s.files);
	vec_free(&s.calls);
	vec_free(&s.syms);
	vec_free(&s.cur);
	vec_free(&s.vars);
	vec_free(&s.affuse);
	vec_free(&s.scope);
	free(s.define_used);
	if (diag_errors()) {
		tra_free(s.prog);
		return NULL;
	}
	return s.prog;
}
