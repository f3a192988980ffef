/*
 * consts.c: the one evaluator of what a program computes when it compiles:
 * sizes (dims, repeat counts, ranges, `every`, size items) and consts
 * (const items, initialisers' arguments, a rank-0 assignment that reads no
 * tensor and no loop counter).
 *
 * One walk serves both.  Its context says which type of value it makes,
 * and every sub-expression has that type:
 *
 *   EV_SIZE   an integer: numbers are whole, names are sizes or consts of
 *             whole values, + - * / ** are exact, overflow is an error;
 *   EV_CONST  a real: names are sizes or consts, arithmetic, comparisons
 *             and exp log sqrt abs tanh sigmoid relu are C's on doubles.
 *
 * An error is reported where it is found and the walk returns false; the
 * caller reports nothing more.  The names a walk reads are marked used.
 */
#include <math.h>
#include <string.h>

#include "frontend/sema.h"

typedef enum { EV_SIZE, EV_CONST } EvalKind;

/* A value known when compiling, of its context's kind. */
typedef struct CValue {
	EvalKind kind;
	union {
		int64_t i;      /* EV_SIZE */
		double r;       /* EV_CONST */
	} u;
} CValue;

/* What each kind of evaluation says when it fails. */
static const struct {
	const char *unknown;    /* "unknown WHAT 'x'" */
	const char *not_value;  /* "'x' is a tensor" + this */
	const char *not_expr;   /* an expression it cannot evaluate */
} evals[] = {
	[EV_SIZE] = {"size", ", not a size", "a size must be an integer expression of numbers and earlier sizes"},
	[EV_CONST] = {"name", "; a const needs a value known at compile time",
	              "a const must be a number or an expression of numbers, sizes and consts "
	              "(arithmetic, comparisons, exp log sqrt abs tanh sigmoid relu)"},
};

static double sigmoid(double a) { return 1 / (1 + exp(-a)); }
static double relu(double a) { return a > 0 ? a : 0; }

/* The elementwise functions a const may call, on numbers. */
static const struct { const char *name; double (*f)(double); } const_functions[] = {
	{"exp", exp}, {"log", log}, {"sqrt", sqrt}, {"abs", fabs},
	{"tanh", tanh}, {"sigmoid", sigmoid}, {"relu", relu},
};

static bool eval(Sema *s, Node *n, EvalKind k, CValue *out);

/* sym's value as kind k: a size's, or a const's (a size only when whole);
 * false when it has none. */
static bool sym_value(const Sym *sym, EvalKind k, CValue *out)
{
	switch (sym->kind) {
	case SYM_SIZE:
		if (k == EV_SIZE)
			out->u.i = sym->size;
		else
			out->u.r = (double)sym->size;
		return true;
	case SYM_CONST:
		if (k == EV_CONST) {
			out->u.r = sym->value;
			return true;
		}
		if (!(sym->value == floor(sym->value) && fabs(sym->value) < 9.2e18))
			return false;
		out->u.i = (int64_t)sym->value;
		return true;
	case SYM_TENSOR:
	case SYM_DEF:
	case SYM_COUNTER:
		return false;
	}
	return false;
}

/* a op b on sizes, exactly: false (reported) on overflow, a division by
 * zero, a negative exponent or an operator sizes do not have. */
static bool size_binary(Node *n, int64_t a, int64_t b, int64_t *out)
{
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
	case B_LT: case B_LE: case B_GT: case B_GE: case B_EQ: case B_NE:
		diag(DIAG_ERROR, n->loc, "%s", evals[EV_SIZE].not_expr);
		return false;
	}
overflow:
	diag(DIAG_ERROR, n->loc, "size overflows 64 bits");
	return false;
}

/* a op b on consts, as C computes it on doubles. */
static double const_binary(BinOp op, double a, double b)
{
	switch (op) {
	case B_ADD: return a + b;
	case B_SUB: return a - b;
	case B_MUL: return a * b;
	case B_DIV: return a / b;
	case B_POW: return pow(a, b);
	case B_LT: return a < b;
	case B_LE: return a <= b;
	case B_GT: return a > b;
	case B_GE: return a >= b;
	case B_EQ: return a == b;
	case B_NE: return a != b;
	}
	return 0;
}

/* f(e) for a const: one of const_functions, on one argument; false
 * (reported) otherwise. */
static bool const_call(Sema *s, Node *n, CValue *out)
{
	int fn = -1;
	for (int i = 0; i < (int)(sizeof const_functions / sizeof *const_functions); i++)
		if (!strcmp(n->u.call.name, const_functions[i].name))
			fn = i;
	if (fn < 0 || n->u.call.nargs != 1) {
		diag(DIAG_ERROR, n->loc, "%s", evals[EV_CONST].not_expr);
		return false;
	}
	CValue x;
	if (!eval(s, n->u.call.args[0], EV_CONST, &x))
		return false;
	out->u.r = const_functions[fn].f(x.u.r);
	return true;
}

/* n's value, of kind k; false (reported) when it has none. */
static bool eval(Sema *s, Node *n, EvalKind k, CValue *out)
{
	CValue a, b;
	out->kind = k;
	switch (n->kind) {
	case N_NUM:
		if (k == EV_CONST) {
			out->u.r = n->u.num;
			return true;
		}
		if (n->u.num != floor(n->u.num) || fabs(n->u.num) > 9.2e18) {
			diag(DIAG_ERROR, n->loc, "a size must be an integer");
			return false;
		}
		out->u.i = (int64_t)n->u.num;
		return true;
	case N_NAME: {
		Sym *sym = fe_use_sym(s, n, evals[k].unknown);
		if (!sym)
			return false;
		if (sym_value(sym, k, out))
			return true;
		diag(DIAG_ERROR, n->loc, "'%s' is %s%s", n->u.name.name, fe_sym_what(sym, s->prog), evals[k].not_value);
		return false;
	}
	case N_UNARY:
		if (!eval(s, n->u.unary.a, k, &a))
			return false;
		if (k == EV_CONST) {
			out->u.r = -a.u.r;
			return true;
		}
		if (a.u.i == INT64_MIN) {
			diag(DIAG_ERROR, n->loc, "size overflows 64 bits");
			return false;
		}
		out->u.i = -a.u.i;
		return true;
	case N_BINARY:
		if (!eval(s, n->u.binary.a, k, &a) || !eval(s, n->u.binary.b, k, &b))
			return false;
		if (k == EV_SIZE)
			return size_binary(n, a.u.i, b.u.i, &out->u.i);
		out->u.r = const_binary(n->u.binary.op, a.u.r, b.u.r);
		return true;
	case N_CALL:
		if (k == EV_CONST)
			return const_call(s, n, out);
		break;
	case N_STR:
	case N_ACCESS:
	case N_WHERE:
	case N_REDUCE:
	case N_GRAD:
	case N_INDEX:
	case N_COUNTER:
		break;
	}
	diag(DIAG_ERROR, n->loc, "%s", evals[k].not_expr);
	return false;
}

/* A size: an integer expression of numbers, earlier sizes, whole consts,
 * + - * / **. */
bool fe_eval_size(Sema *s, Node *n, int64_t *out)
{
	CValue v;
	if (!eval(s, n, EV_SIZE, &v))
		return false;
	*out = v.u.i;
	return true;
}

/* A const: numbers, sizes, consts, arithmetic, comparisons, functions. */
bool fe_eval_const(Sema *s, Node *n, double *out)
{
	CValue v;
	if (!eval(s, n, EV_CONST, &v))
		return false;
	*out = v.u.r;
	return true;
}
