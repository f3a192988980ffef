/*
 * index.c: the index vars of the statement being checked (Sema.vars), and
 * their extents.
 *
 * A var is made at its first use (a free var of the statement) or by a
 * reduction that binds it (a nested scope, Sema.scope).  Its extent comes
 * from the first use that fixes one: a dimension of an access, the left
 * side's param, or a range `i in N`; every later one must agree
 * (fe_bind_extent reports both uses).  A position that is not a plain name,
 * X[b*B + n, d], X[i - 1], is read as an affine form (IxAffine) of index
 * vars, loop counters and a constant; a var that only such positions use
 * takes the largest range keeping every access inside its tensor
 * (fe_infer_ranges, after the statement is read).  Extent -1 means not
 * known yet; an error leaves extent 1 so that nothing is reported twice.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

/* ---- index vars of one statement ---- */

/* A new index var of the statement, its extent unknown (-1); its number. */
int fe_new_var(Sema *s, const char *name, Loc loc, bool reduced)
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
int fe_find_var(Sema *s, const char *name, Loc loc)
{
	int v = bound_var(s, name);
	return v >= 0 ? v : fe_new_var(s, name, loc, false);
}

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
	int k = fe_children(n, kids);
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
int fe_value_var(Sema *s, const char *name, Loc loc)
{
	int v = bound_var(s, name);
	if (v >= 0)
		return v;
	if (s->rhs && indexes_with(s->rhs, name))
		return fe_new_var(s, name, loc, false);
	return -1;
}

/* `i in N` in an index list: N's value, a positive size; false (reported)
 * when it is not one. */
bool fe_range_extent(Sema *s, Node *range, int64_t *extent)
{
	if (!fe_eval_size(s, range, extent))
		return false;
	if (*extent < 1) {
		diag(DIAG_ERROR, range->loc, "a range's extent must be positive, not %" PRId64, *extent);
		return false;
	}
	return true;
}

/* "the range 'i in N'", for messages about the extent it gives */
const char *fe_range_why(Sema *s, Loc loc)
{
	char *text = loc_text(loc);
	char *why = arena_alloc(s->arena, strlen(text) + 16);
	sprintf(why, "the range '%s'", text);
	free(text);
	return why;
}

/* An index used as a value with no extent: ask for `in` (where says where
 * the range goes). */
void fe_needs_range(Sema *s, int v, const char *where)
{
	const Var *var = &s->vars.v[v];
	diag(DIAG_ERROR, var->loc, "index '%s' is used only as a value, so it has no extent; give it one with "
	     "'%s in SIZE' %s", var->name, var->name, where);
}

/* Var v has `extent` here (why: "dimension 2 of B"): its first extent is
 * kept, a second that differs is reported with both uses. */
bool fe_bind_extent(Sema *s, int v, int64_t extent, Loc loc, const char *why)
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
			a->t[a->n++] = (typeof(a->t[0])){false, fe_find_var(s, n->u.name.name, n->loc), 1, n->loc};
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
			return fe_eval_size(s, n, &v) && (a->c0 = v, true);
		diag(DIAG_ERROR, n->loc, "'%s' is %s, not an index; index names are lower-case names not otherwise declared",
		     n->u.name.name, fe_sym_what(sym, s->prog));
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
	case N_ACCESS: {
		/* E[idx[b] + 1, d]: a gather's index is the access alone */
		char *text = loc_text(n->loc);
		diag(DIAG_ERROR, n->loc, "'%s' reads a tensor's value inside index arithmetic, where a gather's index "
		     "position holds the access alone; compute the index first, as in 'I[b] = %s + 1', and gather "
		     "by I", text, text);
		free(text);
		return false;
	}
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
bool fe_check_affine_index(Sema *s, Node *n, int d, const Tensor *t)
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
	int counter = -1;
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
		if (counter < 0)
			counter = a.t[i].id;
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
		int v = fe_new_var(s, arena_strdup(s->arena, text), ix->loc, false);
		free(text);
		fe_bind_extent(s, v, 1, ix->loc, "a single position");
		s->vars.v[v].single = true;
		f.var[f.nvar] = v;
		f.vcoef[f.nvar++] = 1;
	}
	if (t->sparse && f.nvar > 1) {
		/* one name and counters is a window (lower.c's slice), which
		 * cuts sparse chunks; two names are a convolution's or im2col's
		 * windows, which read dense ones */
		diag(DIAG_ERROR, ix->loc, "a position of sparse input '%s' with two index names is not supported yet; "
		     "a position may hold one name, loop counters and a constant ('%s[b*B + n, j]', '%s[i, j + 1]')",
		     t->name, t->name, t->name);
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
	vec_push(&s->affuse, ((AffUse){stored, lo, hi, t->shape[d], ix->loc, t->name, d, counter,
	                               dtype_is_int(t->dtype), NULL}));
	return true;
}

/* Position d of a param t written on the left, W[e, i] = ...: loop
 * counters, sizes and numbers, affine, and no index name; true when every
 * value the counters give it is inside t's dim d (the write is then of
 * one element along it), false (reported) otherwise. */
bool fe_check_position(Sema *s, Node *ix, const Tensor *t, int d)
{
	int nvars = s->vars.n;
	Affine a;
	bool ok = affine_of(s, ix, &a);
	int64_t lo = a.c0, hi = a.c0;
	for (int i = 0; ok && i < a.n; i++) {
		if (a.t[i].coef == 0)
			continue;
		if (!a.t[i].counter) {
			char *text = loc_text(ix->loc);
			diag(DIAG_ERROR, a.t[i].loc, "'%s' is an index name in position '%s' on the left: writing a "
			     "window of a param is not supported yet; a position on the left is an index name, or loop "
			     "counters, sizes and numbers (one element)", s->vars.v[a.t[i].id].name, text);
			free(text);
			ok = false;
			break;
		}
		const Sym *c = &s->syms.v[a.t[i].id];
		int64_t last = c->size > 0 ? c->size - 1 : 0, ext;
		if (!mul_ok(a.t[i].coef, last, &ext) || !add_ok(ext > 0 ? hi : lo, ext, ext > 0 ? &hi : &lo)) {
			diag(DIAG_ERROR, ix->loc, "an index expression's positions overflow 64 bits");
			ok = false;
		}
	}
	s->vars.n = nvars;      /* an index name made a var: reported */
	if (ok && (lo < 0 || hi >= t->shape[d])) {
		char *text = loc_text(ix->loc);
		if (lo == hi)
			diag(DIAG_ERROR, ix->loc, "position '%s' of '%s' is %" PRId64 ", outside its dimension %d "
			     "(0 to %" PRId64 ")", text, t->name, lo, d + 1, t->shape[d] - 1);
		else
			diag(DIAG_ERROR, ix->loc, "position '%s' of '%s' runs from %" PRId64 " to %" PRId64 " as its loop "
			     "counters run, outside its dimension %d (0 to %" PRId64 ")", text, t->name, lo, hi, d + 1,
			     t->shape[d] - 1);
		free(text);
		ok = false;
	}
	return ok;
}

/* The index vars of access n, each once: its positions' names, then the
 * other vars of its affine positions. */
int fe_access_vars(const Node *n, int *out)
{
	int k = 0;
	for (int d = 0; d < n->u.access.nidx; d++) {
		if (n->u.access.idx[d]->kind == N_ACCESS) {     /* a gather: its index's vars */
			int sub[MAX_ACCESS_VARS], ns = fe_access_vars(n->u.access.idx[d], sub);
			for (int i = 0; i < ns; i++) {
				int seen = 0;
				for (int j = 0; j < k; j++)
					seen |= out[j] == sub[i];
				if (!seen && k < MAX_ACCESS_VARS)
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
			if (!seen && k < MAX_ACCESS_VARS)
				out[k++] = v;
		}
	}
	return k;
}

/* Does var v occur in an affine position of the statement (its range is
 * inferred after the statement is read)? */
bool fe_in_affine(const Sema *s, int v)
{
	for (int i = 0; i < s->affuse.n; i++)
		for (int k = 0; k < s->affuse.v[i].f->nvar; k++)
			if (s->affuse.v[i].f->var[k] == v)
				return true;
	return false;
}

/*
 * A window that a loop counter moves (X[b*B + n, d]) and that lies inside
 * its tensor at the counter's first value but runs past an end at a later
 * one: the positions outside read zero, the rule for any position an
 * explicit range makes possible, but here it is most often a data set
 * that is not a whole number of mini-batches, whose last batch then comes
 * padded with zeros (and counts in a mean over the batch), or a loop that
 * runs longer than its data: a warning.  A window outside at the first
 * value too is padding the program asked for (a "same" convolution), and
 * no warning.  In a gather's index (E[idx[b*B + n], d]) a position outside
 * would read index 0 and gather E's first row, a value the data never
 * named, and its gradient would flow there: an error, wherever the
 * outside position comes from.  False after an error.
 */
bool fe_check_windows(Sema *s)
{
	bool ok = true;
	for (int i = 0; i < s->affuse.n; i++) {
		const AffUse *u = &s->affuse.v[i];
		const IxAffine *f = u->f;
		bool again = false;     /* a position met twice (a gather's index is checked twice) */
		for (int j = 0; j < i; j++)
			again |= !memcmp(&s->affuse.v[j].loc, &u->loc, sizeof u->loc);
		if (again || (f->ncounter == 0 && !u->gathers))
			continue;
		int64_t vlo = 0, vhi = 0;      /* the index vars' part */
		for (int m = 0; m < f->nvar; m++) {
			int64_t e = s->vars.v[f->var[m]].extent, c = f->vcoef[m];
			if (e < 1)
				return ok;      /* reported */
			if (c > 0)
				vhi += c * (e - 1);
			else
				vlo += c * (e - 1);
		}
		int64_t first_lo = f->shift + vlo, first_hi = f->shift + vhi;
		int64_t lo = u->lo + vlo, hi = u->hi + vhi;
		if (lo >= 0 && hi <= u->extent - 1)
			continue;
		char *text = loc_text(u->loc);
		if (u->gathers) {
			diag(DIAG_ERROR, u->loc, "'%s' can read outside dimension %d of %s (0 to %" PRId64 "; positions %"
			     PRId64 " to %" PRId64 "), and a position outside reads index 0, which would gather %s's "
			     "first element where the data names none; make the data a whole number of batches (pad "
			     "it, and mask the padding), or the loop or the range shorter", text, u->dim + 1, u->tensor,
			     u->extent - 1, lo, hi, u->gathers);
			ok = false;
		} else if (first_lo < 0 || first_hi > u->extent - 1) {
			;               /* padding the program asked for */
		} else if (f->ncounter == 1 && f->coef[0] > 0 && hi > u->extent - 1) {
			/* the first value at which it passes the end, and the first it
			 * reads nothing at */
			const Sym *c = &s->syms.v[u->counter];
			int64_t k = f->coef[0], from = (u->extent - 1 - first_hi) / k + 1;
			int64_t none = (u->extent - first_lo + k - 1) / k;
			char nothing[160] = "";
			if (none < c->size)
				snprintf(nothing, sizeof nothing, ", and from %s = %" PRId64 " on nothing of it", c->name, none);
			diag(DIAG_WARNING, u->loc, "'%s' reads past the end of dimension %d of %s (0 to %" PRId64 ") from %s "
			     "= %" PRId64 " on%s: positions past the end read zero%s, so the last mini-batch is padded "
			     "with zeros; make the data a whole number of batches, or the loop shorter", text, u->dim + 1,
			     u->tensor, u->extent - 1, c->name, from, nothing,
			     u->integer ? " (as a gather's index, the first element)" : "");
		} else {
			diag(DIAG_WARNING, u->loc, "'%s' reads outside dimension %d of %s (0 to %" PRId64 ") at later values "
			     "of the loop counters (positions %" PRId64 " to %" PRId64 "): positions outside read zero",
			     text, u->dim + 1, u->tensor, u->extent - 1, lo, hi);
		}
		free(text);
	}
	return ok;
}

/* The statement's index vars that only affine positions use take the
 * largest range from 0 that keeps every such access inside its tensor
 * for every value of the loop counters ("valid", as Tensor Comprehensions
 * infers ranges); false (reported) when there is none. */
bool fe_infer_ranges(Sema *s)
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
				int64_t ext = INT64_MAX, below = 0, ext0 = INT64_MAX;  /* ext0: at the counters' 0 */
				int cut = -1;           /* the use whose counters cut the range */
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
					if (a > 0 && lo < 0 && !neg) {
						neg = true;
						below = lo;
					}
					int64_t most = a > 0 ? (u->extent - 1 - hi) / a + 1 : lo / -a + 1;
					if (u->extent - 1 - hi < 0 || lo < 0)
						most = 0;
					int64_t lo0 = lo - u->lo + u->f->shift, hi0 = hi - u->hi + u->f->shift;
					int64_t most0 = a > 0 ? (u->extent - 1 - hi0) / a + 1 : lo0 / -a + 1;
					if (u->extent - 1 - hi0 < 0 || lo0 < 0)
						most0 = 0;
					if (most < ext)
						ext = most;
					if (most0 < ext0)
						ext0 = most0;
					if (most < most0 && cut < 0)
						cut = j;
				}
				if (!ready)
					continue;
				const Var *var = &s->vars.v[v];
				progress = true;
				if (neg) {
					diag(DIAG_ERROR, s->affuse.v[i].loc, "the range of index '%s' cannot be inferred: an inferred "
					     "range starts at 0, and at %s = 0 an access reads position %lld, before its tensor's first; "
					     "give it one with '%s in SIZE' on the left or in a reduction's brackets (positions "
					     "outside a tensor then read zero: padding)", var->name, var->name, (long long)below,
					     var->name);
					s->vars.v[v].extent = 1;        /* reported: no second error */
					ok = false;
					continue;
				}
				if (ext < 1) {
					diag(DIAG_ERROR, s->affuse.v[i].loc, "the range of index '%s' cannot be inferred: no value of "
					     "it keeps every access inside its tensor; give it one with '%s in SIZE' on the left "
					     "or in a reduction's brackets", var->name, var->name);
					s->vars.v[v].extent = 1;        /* reported: no second error */
					ok = false;
					continue;
				}
				if (ext < ext0 && cut >= 0 && s->opt->warnings) {
					/* X[b*B + n, d] with N not a multiple of B: every batch
					 * as short as the last one, not B long */
					const AffUse *u = &s->affuse.v[cut];
					char *text = loc_text(u->loc);
					diag(DIAG_WARNING, u->loc, "the range of '%s' is inferred as 0 to %" PRId64 ", which keeps "
					     "'%s' inside %s at every value of the loop counters (at their first value alone "
					     "it would be 0 to %" PRId64 "); for a window of another length give it one, '%s in "
					     "SIZE' (positions past the end then read zero)", var->name, ext - 1, text,
					     u->tensor, ext0 - 1, var->name);
					free(text);
				}
				fe_bind_extent(s, v, ext, s->affuse.v[i].loc,
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
