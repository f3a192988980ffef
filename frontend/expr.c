/*
 * expr.c: the right side of an assignment, checked: names resolved,
 * accesses matched to their tensors, element types inferred, Einstein's
 * implicit sums placed, ranks bounded.
 *
 * check_expr annotates the AST in place for lower.c: a size or const
 * becomes its number (N_NUM), an index name used as a value its position
 * (N_INDEX), a loop counter N_COUNTER, a rank-0 tensor an access; a node
 * checked before (a def's body, inlined again) reads the same.  An
 * expression's type is the tensors' it reads (Ty), or untyped when it
 * reads none; integers never meet reals without f32()/f64().  An index on
 * the right that is not on the left and no reduction binds is summed over
 * the smallest sub-expression holding all its uses (an N_REDUCE marked
 * implicit); then every node's free vars are listed, in first-use order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

/* ---- expressions ---- */

static const struct { const char *name; KOp op; } functions[] = {
	{"exp", KOP_EXP}, {"log", KOP_LOG}, {"sqrt", KOP_SQRT}, {"abs", KOP_ABS},
	{"tanh", KOP_TANH}, {"sigmoid", KOP_SIGMOID}, {"relu", KOP_RELU},
	{"stop_gradient", KOP_STOP},
};
#define NFUNCTIONS (int)(sizeof functions / sizeof functions[0])

static bool settle(Sema *s, Node *n, DType t, bool own);

/* a and b, the types of nodes na and nb, meet: a becomes their type.  A
 * soft side meeting a typed one of another type takes that type. */
static bool unify(Sema *s, Ty *a, Ty b, Node *na, Node *nb, Loc loc)
{
	if (!b.typed)
		return true;
	if (a->typed && a->t != b.t) {
		if (a->soft && !b.soft) {
			*a = b;
			return settle(s, na, b.t, false);
		}
		if (b.soft)
			return settle(s, nb, a->t, false);
		diag(DIAG_ERROR, loc, "mixed element types %s and %s; convert one side with %s(...) or %s(...)",
		     dtype_name(a->t), dtype_name(b.t), dtype_name(a->t < b.t ? a->t : b.t),
		     dtype_name(a->t < b.t ? b.t : a->t));
		return false;
	}
	a->soft = a->typed ? a->soft && b.soft : b.soft;
	a->t = b.t;
	a->typed = true;
	return true;
}

/* A number in an integer expression must be a whole number in its range:
 * 0.5 would be truncated to 0 without a word.  n is a side that reads no
 * tensor.  own: the type is a where's own, its condition's (settle_own),
 * which the message says. */
static bool whole_numbers(Node *n, DType t, bool own)
{
	if (n->kind == N_NUM) {
		double lim = t == DT_I32 ? 2147483647.0 : 9.2e18;
		bool whole = n->u.num == trunc(n->u.num);
		if (whole && fabs(n->u.num) <= lim)
			return true;
		const char *what = whole ? "out of its range" : "not a whole number";
		if (own)
			diag(DIAG_ERROR, n->loc, "%g is %s, in an %s where: a where whose branches are numbers takes "
			     "its condition's type; write %s(%g) for a real result", n->u.num, what, dtype_name(t),
			     dtype_name(DT_F32), n->u.num);
		else
			diag(DIAG_ERROR, n->loc, "%g is %s, in an %s expression; convert the other side with f32(...) "
			     "or f64(...)", n->u.num, what, dtype_name(t));
		return false;
	}
	Node **kids[3];
	int k = fe_children(n, kids);
	for (int i = 0; i < k; i++)
		if (!whole_numbers(*kids[i], t, own))
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

/* e != 0, in e's type: a condition of another type than its where's
 * branches, converted to theirs as 0 or 1.  Converted itself, 0.375 (f64)
 * would be 0 as an i32 and 1e-50 would be 0 as an f32: false, where a
 * condition is true where it is not zero (tra.5). */
static Node *nonzero(Sema *s, Node *e)
{
	Node *zero = fe_ast_node(s->arena, N_NUM, e->loc);
	zero->u.num = 0;
	Node *n = fe_ast_node(s->arena, N_BINARY, e->loc);
	n->u.binary.op = B_NE;
	n->u.binary.a = e;
	n->u.binary.b = zero;
	n->height = e->height + 1;
	return n;
}

/* n, soft (its type its wheres' conditions' alone), in a context of type
 * t: each such where's condition becomes cond != 0 converted to t, and a
 * number it reaches must be whole in an integer t.  A soft node's children
 * are soft or untyped, but for a where's condition, which keeps its type.
 * own: t is the wheres' own type, met by nothing else (settle_own): the
 * conditions stay, and a number not whole says so. */
static bool settle(Sema *s, Node *n, DType t, bool own)
{
	switch (n->kind) {
	case N_NUM:
		return !dtype_is_int(t) || whole_numbers(n, t, own);
	case N_WHERE:
		if (n->u.where.soft && !own)
			n->u.where.cond = converted(s, nonzero(s, n->u.where.cond), t);
		n->u.where.soft = false;
		return settle(s, n->u.where.a, t, own) && settle(s, n->u.where.b, t, own);
	case N_CALL:
		if (n->u.call.conv >= 0)
			return true;    /* typed by its conversion */
		break;
	default:
		break;
	}
	Node **kids[3];
	int k = fe_children(n, kids);
	for (int i = 0; i < k; i++)
		if (!settle(s, *kids[i], t, own))
			return false;
	return true;
}

/* Every where still soft when its statement is checked (no operand of
 * another type met it: b[n] = where(labels[n], 0.5, 2), or one of its own
 * type did: labels[n] * where(...)) has its condition's type, and its
 * numbers must be whole in an integer one. */
static bool settle_own(Sema *s, Node *n)
{
	if (n->kind == N_WHERE && n->u.where.soft && !settle(s, n, (DType)n->u.where.st, true))
		return false;
	Node **kids[3];
	int k = fe_children(n, kids);
	for (int i = 0; i < k; i++)
		if (!settle_own(s, *kids[i]))
			return false;
	return true;
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
	int first = s->affuse.n;
	if (!check_expr(s, ix, &ity))
		return false;
	for (int i = first; i < s->affuse.n; i++)
		s->affuse.v[i].gathers = n->u.access.name;
	const Tensor *it = &s->prog->tensors.v[ix->u.access.tensor];
	if (!ity.typed || !dtype_is_int(ity.t)) {
		diag(DIAG_ERROR, ix->loc, "'%s' is %s, so it cannot index dimension %d of '%s'; a gather index must be "
		     "an integer tensor", it->name, ity.typed ? dtype_name(ity.t) : "untyped", d + 1, n->u.access.name);
		diag(DIAG_NOTE, it->loc, "declare '%s' with an integer type, as in 'input %s[...] : i64;'", it->name, it->name);
		return false;
	}
	/* from a sparse tensor, a gather reads it dense (its zeros too, as
	 * scipy's A[idx]); by one, an index of zeros would be a guess */
	if (it->sparse) {
		diag(DIAG_ERROR, ix->loc, "cannot gather by sparse tensor '%s'; a gather index must be dense",
		     it->name);
		return false;
	}
	if (it->rank + t->rank - 1 > MAXDIM) {
		diag(DIAG_ERROR, ix->loc, "this gather has %d indices; trac supports at most %d", it->rank + t->rank - 1,
		     MAXDIM);
		return false;
	}
	return true;
}

static bool check_access(Sema *s, Node *n, Ty *ty)
{
	const char *name = n->u.access.name;
	Sym *sym = fe_lookup(s, name);
	if (!sym) {
		diag(DIAG_ERROR, n->u.access.nameloc, "unknown tensor '%s'%s", name, fe_did_you_mean(s, name, SYM_TENSOR, NULL, 0));
		return false;
	}
	sym->used = true;
	if (!fe_sym_live(sym, n->loc))
		return false;
	if (sym->kind != SYM_TENSOR) {
		diag(DIAG_ERROR, n->u.access.nameloc, "'%s' is %s and cannot be indexed", name, fe_sym_what(sym, s->prog));
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
			ok &= fe_check_affine_index(s, n, d, t);
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
			     ix->u.name.name, fe_sym_what(clash, s->prog));
			ok = false;
			continue;
		}
		int v = fe_find_var(s, ix->u.name.name, ix->loc);
		ix->u.name.var = v;

		char *why = arena_alloc(s->arena, 64 + strlen(name));
		sprintf(why, "dimension %d of %s", d + 1, name);
		ok &= fe_bind_extent(s, v, t->shape[d], ix->loc, why);
	}
	/* an index name in two positions of one access, one of them shifted or
	 * strided: with one name a position (X[y, y + 1], X[2*y, y]) each is a
	 * window (a slice) and the name then a diagonal of them, as in
	 * X[y, y]; where a position has two names (X[y + dx, x + dx]) it
	 * would need a diagonal of the stacked windows: not built */
	for (int d = 0; ok && n->u.access.aff && d < n->u.access.nidx; d++) {
		const IxAffine *f = n->u.access.aff[d];
		for (int e = 0; f && ok && e < n->u.access.nidx; e++) {
			if (e == d)
				continue;
			const IxAffine *g = n->u.access.aff[e];
			if (f->nvar == 1 && (!g || g->nvar == 1))
				continue;
			for (int i = 0; ok && i < f->nvar; i++) {
				bool twice = g ? false : n->u.access.idx[e]->kind == N_NAME && n->u.access.idx[e]->u.name.var == f->var[i];
				for (int j = 0; g && j < g->nvar; j++)
					twice |= g->var[j] == f->var[i];
				if (twice) {
					diag(DIAG_ERROR, n->u.access.idx[d]->loc, "an index name in two positions of '%s', one "
					     "of them with another index name, is not supported yet; give one of them a name of its "
					     "own", name);
					ok = false;
				}
			}
		}
	}
	/* E[idx[b], j + 1]: a window of the gathered rows (lower.c); with two
	 * names (E[idx[b], j + dj]) it would be their stacked windows */
	for (int d = 0; ok && n->u.access.gather && n->u.access.aff && d < n->u.access.nidx; d++)
		if (n->u.access.aff[d] && n->u.access.aff[d]->nvar > 1) {
			diag(DIAG_ERROR, n->u.access.idx[d]->loc, "a position with two index names in an access that "
			     "gathers is not supported yet; gather into a temporary first, as in 'T[b, j] = %s[idx[b], j]', "
			     "then index that", name);
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
		/* the functions, and the keywords called like one */
		const char *names[NFUNCTIONS + 6] = {"where", "grad", "f32", "f64", "i32", "i64"};
		for (int i = 0; i < NFUNCTIONS; i++)
			names[6 + i] = functions[i].name;
		Sym *sym = fe_lookup(s, name);
		if (sym && sym->kind == SYM_DEF)
			diag(DIAG_ERROR, n->loc, "a call of def '%s' must be the whole right side of an assignment, "
			     "as in Z = %s(...);", name, name);
		else if (sym)
			diag(DIAG_ERROR, n->u.call.nameloc, "'%s' is %s, not a function", name, fe_sym_what(sym, s->prog));
		else
			diag(DIAG_ERROR, n->u.call.nameloc, "unknown function '%s'%s", name,
			     fe_did_you_mean(s, name, ANY_SYM, names, NFUNCTIONS + 6));
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
		int v = fe_new_var(s, n->u.reduce.names[i], n->u.reduce.nameloc[i], true);
		n->u.reduce.var[i] = v;
		vec_push(&s->scope, v);
		Node *range = n->u.reduce.range ? n->u.reduce.range[i] : NULL;
		int64_t extent;
		if (range && !fe_range_extent(s, range, &extent)) {
			s->scope.n = base;
			return false;
		}
		if (range)
			fe_bind_extent(s, v, extent, n->u.reduce.nameloc[i], fe_range_why(s, n->u.reduce.nameloc[i]));
	}
	bool ok = check_expr(s, n->u.reduce.body, ty);
	if (ok && n->u.reduce.red == R_MEAN)
		ok = int_operand(*ty, n->loc, "mean");
	s->scope.n = base;
	for (int i = 0; ok && i < nn; i++)
		if (s->vars.v[n->u.reduce.var[i]].value && s->vars.v[n->u.reduce.var[i]].extent < 0) {
			fe_needs_range(s, n->u.reduce.var[i], "in the brackets");
			ok = false;
		} else if (s->vars.v[n->u.reduce.var[i]].extent < 0 && !fe_in_affine(s, n->u.reduce.var[i])) {
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
		int v = fe_lookup(s, n->u.name.name) ? -1 : fe_value_var(s, n->u.name.name, n->loc);
		if (v >= 0) {
			/* an index's position: an i64 */
			n->kind = N_INDEX;
			n->u.name.var = v;
			s->vars.v[v].value = true;
			ty->typed = true;
			ty->t = DT_I64;
			break;
		}
		Sym *sym = fe_use_sym(s, n, "name");
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
		ok = ok && unify(s, ty, b, n->u.binary.a, n->u.binary.b, n->loc);
		if (ok && n->u.binary.op == B_POW)
			ok = int_operand(*ty, n->loc, "'**'");
		if (ok && ty->typed && dtype_is_int(ty->t))
			ok = (a.typed || whole_numbers(n->u.binary.a, ty->t, false)) && (b.typed || whole_numbers(n->u.binary.b, ty->t, false));
		break;
	case N_CALL:
		ok = check_call(s, n, ty);
		break;
	case N_WHERE:
		ok = check_expr(s, n->u.where.cond, &c);
		ok &= check_expr(s, n->u.where.a, &a);
		ok &= check_expr(s, n->u.where.b, &b);
		*ty = a;
		ok = ok && unify(s, ty, b, n->u.where.a, n->u.where.b, n->loc);
		if (ok && c.typed && ty->typed && c.t != ty->t)
			n->u.where.cond = converted(s, nonzero(s, n->u.where.cond), ty->t);
		else if (ok && c.typed && !ty->typed)
			*ty = (Ty){.typed = true, .soft = true, .t = c.t};
		/* branches of numbers (or soft): the condition's type, until a
		 * context of another type gives its own (settle) */
		n->u.where.soft = ok && ty->soft && c.typed;
		n->u.where.st = ty->t;
		/* a soft where's numbers wait for the type a context gives
		 * (settle), or its own at the end (settle_own) */
		if (ok && ty->typed && dtype_is_int(ty->t) && !n->u.where.soft)
			ok = (a.typed || whole_numbers(n->u.where.a, ty->t, false)) && (b.typed || whole_numbers(n->u.where.b, ty->t, false)) &&
			     (c.typed || whole_numbers(n->u.where.cond, ty->t, false));
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
int fe_children(Node *n, Node ***slot)
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

/* The occurrences of var v in n. */
int fe_count_var(const Node *n, int v)
{
	int c = 0;
	if (n->kind == N_INDEX)
		return n->u.name.var == v;
	if (n->kind == N_ACCESS) {
		int var[MAX_ACCESS_VARS], k = fe_access_vars(n, var);
		for (int d = 0; d < n->u.access.nidx; d++)
			c += n->u.access.idx[d]->kind == N_ACCESS ? fe_count_var(n->u.access.idx[d], v)
			                                          : n->u.access.idx[d]->u.name.var == v;
		for (int i = 0; i < k; i++)             /* a var of an affine position alone */
			c += var[i] == v && !count_in_idx(n, v);
		return c;
	}
	Node **slot[3];
	int k = fe_children((Node *)n, slot);
	for (int i = 0; i < k; i++)
		c += fe_count_var(*slot[i], v);
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
		int k = fe_children(*slot, kids), next = -1;
		for (int i = 0; i < k; i++)
			if (fe_count_var(*kids[i], v) == total)
				next = i;
		if (next < 0)
			return slot;
		if (nonlinear(*slot))
			*under = *slot;
		slot = kids[next];
	}
}

/* Is `at` inside n a term of a sum or a difference, or a factor of one
 * (X[n, d] + b[k], X[n, d] - 0.5 * W[d] * b[k])?  term: n is. */
static bool summand(const Node *n, const Node *at, bool term)
{
	if (n == at)
		return term;
	if (n->kind == N_UNARY)
		return summand(n->u.unary.a, at, term);
	if (n->kind != N_BINARY)
		return false;
	int op = n->u.binary.op;
	if (op != B_ADD && op != B_SUB && op != B_MUL && op != B_DIV)
		return false;
	bool t = term || op == B_ADD || op == B_SUB;
	return summand(n->u.binary.a, at, t) || summand(n->u.binary.b, at, t);
}

/* A warning about an implicit sum that is likely a typo: over an index of
 * one access alone, taken inside a call (relu(X[n, d]) * W[d, h]), in a
 * param's update (W[d] -= lr * X[e]: an index on the left misspelt), or
 * of one term of a sum (Y[n, d] = X[n, d] + b[k]: b[d] misspelt). */
static void warn_sum(Sema *s, const Item *it, bool update, int v, Node *at, const Node *under, const Node *root)
{
	const Var *var = &s->vars.v[v];
	if (!s->opt->warnings || at->kind != N_ACCESS || var->single)
		return;
	if (under && under->kind == N_CALL)
		diag(DIAG_WARNING, at->loc,
		     "implicit sum over '%s' is taken inside '%s', of this access alone; write sum[%s](...) "
		     "around the call if you meant to sum its results", var->name, under->u.call.name, var->name);
	else if (update)
		diag(DIAG_WARNING, at->loc, "implicit sum over '%s' is taken of this access alone, in an update of '%s'; "
		     "write sum[%s](...) if you meant to sum it, or index it by the left side's names", var->name,
		     it->name, var->name);
	else if (!under && summand(root, at, false))
		diag(DIAG_WARNING, at->loc, "implicit sum over '%s' is taken of this access alone, a term of a sum; "
		     "write sum[%s](...) if you meant to add its total, or index it by names the other terms use",
		     var->name, var->name);
}

/* Einstein's rule: each index on the right that is neither on the left
 * nor bound by a reduction is summed over the smallest sub-expression
 * holding all its uses (an implicit N_REDUCE inserted there, one per
 * sub-expression).  False (reported) when one sums more than MAXDIM. */
static bool place_implicit_sums(Sema *s, const Item *it, bool update, Node **root, int nlhs, const int *lhs)
{
	Vec(Node **) slots = {0};
	Vec(int) vars = {0};
	bool ok = true;

	for (int v = 0; v < s->vars.n; v++) {
		bool on_left = false;
		for (int i = 0; i < nlhs; i++)
			on_left |= lhs[i] == v;
		if (on_left || s->vars.v[v].reduced)
			continue;
		int total = fe_count_var(*root, v);
		if (total == 0)
			continue;
		Node *under = NULL;
		Node **slot = lca(root, v, total, &under);
		warn_sum(s, it, update, v, *slot, under, *root);
		vec_push(&slots, slot);
		vec_push(&vars, v);
	}
	/* one implicit reduction per distinct node, over all its vars */
	for (int i = 0; ok && i < slots.n; i++) {
		if (!slots.v[i])
			continue;
		int n = 0;
		for (int j = i; j < slots.n; j++)
			n += slots.v[j] == slots.v[i];
		Node *body = *slots.v[i];
		if (n > MAXDIM) {
			diag(DIAG_ERROR, body->loc, "this sub-expression has %d indices summed by Einstein's rule; trac "
			     "supports at most %d", n, MAXDIM);
			ok = false;
			break;
		}
		Node *r = fe_ast_node(s->arena, N_REDUCE, body->loc);
		r->u.reduce.red = R_SUM;
		r->u.reduce.implicit = true;
		r->u.reduce.body = body;
		r->u.reduce.names = arena_alloc(s->arena, MAXDIM * sizeof(char *));
		r->u.reduce.nameloc = arena_alloc(s->arena, MAXDIM * sizeof(Loc));
		for (int j = i; j < slots.n; j++) {
			if (slots.v[j] != slots.v[i])
				continue;
			int k = r->u.reduce.nnames++;
			r->u.reduce.var[k] = vars.v[j];
			r->u.reduce.names[k] = s->vars.v[vars.v[j]].name;
			r->u.reduce.nameloc[k] = s->vars.v[vars.v[j]].loc;
			s->vars.v[vars.v[j]].reduced = true;
			if (j != i)
				slots.v[j] = NULL;
		}
		*slots.v[i] = r;
	}
	vec_free(&slots);
	vec_free(&vars);
	return ok;
}

/* Free vars of every node, in first-occurrence order, all of them (the
 * rank check counts them). */
static void free_vars(Sema *s, Node *n)
{
	Vec(int) var = {0};
	if (n->kind == N_INDEX) {
		vec_push(&var, n->u.name.var);
	} else if (n->kind == N_ACCESS) {
		for (int d = 0; d < n->u.access.nidx; d++)
			if (n->u.access.idx[d]->kind == N_ACCESS)
				free_vars(s, n->u.access.idx[d]);       /* a gather's index, lowered on its own */
		int av[MAX_ACCESS_VARS], k = fe_access_vars(n, av);
		for (int i = 0; i < k; i++)
			vec_push(&var, av[i]);
	} else {
		Node **kids[3];
		int k = fe_children(n, kids);
		for (int c = 0; c < k; c++) {
			Node *ch = *kids[c];
			free_vars(s, ch);
			for (int i = 0; i < ch->nvar; i++) {
				int v = ch->var[i];
				bool skip = false;
				for (int j = 0; j < var.n; j++)
					skip |= var.v[j] == v;
				if (n->kind == N_REDUCE)
					for (int j = 0; j < n->u.reduce.nnames; j++)
						skip |= n->u.reduce.var[j] == v;
				if (!skip)
					vec_push(&var, v);
			}
		}
	}
	n->nvar = var.n;
	n->var = arena_alloc(s->arena, (size_t)(var.n + 1) * sizeof(int));
	if (var.n)
		memcpy(n->var, var.v, (size_t)var.n * sizeof(int));
	vec_free(&var);
}

static bool check_rank(Sema *s, Node *n)
{
	Node **kids[3];
	int k = fe_children(n, kids);
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

/* Does n read a relation: a tensor, an index's positions, or a loop
 * counter (known only when the program runs)? */
static bool reads_tensor(Node *n)
{
	if (n->kind == N_ACCESS || n->kind == N_INDEX || n->kind == N_COUNTER)
		return true;
	Node **kids[3];
	int k = fe_children(n, kids);
	for (int c = 0; c < k; c++)
		if (reads_tensor(*kids[c]))
			return true;
	return false;
}

/* ---- the right side of an assignment ---- */

/* The right side: types, the left's indices all used, implicit sums, ranks.
 * False when there is nothing to lower: an error (reported), or a value
 * known at compile time, declared a const. */
bool fe_check_rhs(Sema *s, Item *it, const Tensor *param, const int *lhs, Ty *ty)
{
	int nlhs = it->u.assign.nidx;
	s->rhs = it->u.assign.value;
	bool checked = check_expr(s, it->u.assign.value, ty);
	s->rhs = NULL;
	if (checked && ty->soft && param && ty->t != param->dtype)
		checked = settle(s, it->u.assign.value, param->dtype, false);  /* a param's new value: its type */
	if (!checked || !settle_own(s, it->u.assign.value))
		return false;
	if (param && ty->typed && ty->t != param->dtype) {
		diag(DIAG_ERROR, it->u.assign.value->loc, "the new value of %s param '%s' is %s; convert it with %s(...)",
		     dtype_name(param->dtype), it->name, dtype_name(ty->t), dtype_name(param->dtype));
		return false;
	}
	bool ok = fe_infer_ranges(s);
	for (int i = 0; i < nlhs; i++)
		if (!param && fe_count_var(it->u.assign.value, lhs[i]) == 0) {
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
			fe_needs_range(s, v, left ? "on the left" : "in the brackets of a reduction around its uses");
			ok = false;
		}
	if (!ok)
		return false;
	if (!fe_check_windows(s))
		return false;
	if (!fe_group_products(s, &it->u.assign.value, nlhs, lhs) ||
	    !place_implicit_sums(s, it, param != NULL, &it->u.assign.value, nlhs, lhs))
		return false;
	free_vars(s, it->u.assign.value);
	if (!check_rank(s, it->u.assign.value) || diag_errors() > s->nerr_before)
		return false;
	if (!param && nlhs == 0 && !reads_tensor(it->u.assign.value)) {
		/* s = 3 * N: a rank-0 tensor whose value is known at compile
		 * time is a const; every use folds it */
		double v;
		if (fe_eval_const(s, it->u.assign.value, &v))
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
