/*
 * defs.c: def declarations, and their inlining: each call checks the def's
 * body again in a scope of its own, its formals bound to the call's
 * arguments, its tensors named "def.name" (sema.h).
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

/* "linear(X[n, d], W[d, h], b[h]) -> Y[n, h]" */
static char *signature(const Item *def)
{
	Buf b = {0};
	buf_printf(&b, "%s(", def->name);
	for (int i = 0; i < def->u.def.nparams; i++) {
		if (i)
			buf_puts(&b, ", ");
		fe_formal_print(&b, &def->u.def.params[i]);
	}
	buf_puts(&b, ") -> ");
	fe_formal_print(&b, &def->u.def.result);
	return b.s;
}

void fe_check_def(Sema *s, Item *it)
{
	const Formal *f = it->u.def.params;
	for (int i = 0; i < it->u.def.nparams; i++) {
		for (int j = 0; j < i; j++)
			if (!strcmp(f[i].name, f[j].name)) {
				diag(DIAG_ERROR, f[i].loc, "parameter '%s' is listed twice", f[i].name);
				return;
			}
		if (!strcmp(f[i].name, it->u.def.result.name)) {
			diag(DIAG_ERROR, it->u.def.result.loc, "the result '%s' has the name of a parameter", f[i].name);
			return;
		}
		if (f[i].nidx > MAXDIM) {
			diag(DIAG_ERROR, f[i].loc, "'%s' has %d dimensions; trac supports at most %d", f[i].name, f[i].nidx, MAXDIM);
			return;
		}
		for (int a = 0; a < f[i].nidx; a++)
			for (int b = 0; b < a; b++)
				if (!strcmp(f[i].idx[a], f[i].idx[b])) {
					diag(DIAG_ERROR, f[i].idxloc[a], "index '%s' appears twice in parameter '%s'",
					     f[i].idx[a], f[i].name);
					return;
				}
	}
	fe_declare(s, (Sym){.kind = SYM_DEF, .name = it->name, .loc = it->nameloc, .def = it, .used = true});
}

#define MAX_CALL_DEPTH 32

/*
 * Z = f(A, B): the def's body, checked and lowered in a scope where its
 * parameters name the arguments; Z takes the value of its result.  Index
 * names in the parameter list fix the arguments' shapes: every use of one
 * name must have one extent.
 */
void fe_inline_call(Sema *s, Item *it, Item *def)
{
	Node *call = it->u.assign.value;
	int np = def->u.def.nparams;
	const Formal *f = def->u.def.params;
	int before = diag_errors();

	if (it->u.assign.has_idx) {
		diag(DIAG_ERROR, it->nameloc, "a def's result is assigned whole: write %s = %s(...);", it->name, def->name);
		return;
	}
	if (call->u.call.nargs != np) {
		char *sig = signature(def);
		diag(DIAG_ERROR, call->loc, "'%s' takes %d argument%s, not %d", def->name, np, np == 1 ? "" : "s",
		     call->u.call.nargs);
		diag(DIAG_NOTE, def->nameloc, "'%s' is defined here as %s", def->name, sig);
		free(sig);
		return;
	}
	for (int i = 0; i < s->calls.n; i++)
		if (s->calls.v[i] == def) {
			diag(DIAG_ERROR, call->loc, "'%s' calls itself; defs cannot be recursive", def->name);
			return;
		}
	if (s->calls.n >= MAX_CALL_DEPTH) {
		diag(DIAG_ERROR, call->loc, "defs nested more than %d calls deep", MAX_CALL_DEPTH);
		return;
	}

	/* arguments: tensors whose shapes agree with the parameter lists */
	int targ[64];
	const char *idxname[64 * MAXDIM];
	int64_t idxext[64 * MAXDIM];
	Loc idxloc[64 * MAXDIM];
	int nidx = 0;
	if (np > 64) {
		diag(DIAG_ERROR, call->loc, "more than 64 arguments");
		return;
	}
	for (int i = 0; i < np; i++) {
		Node *a = call->u.call.args[i];
		Sym *sym = a->kind == N_NAME ? fe_lookup(s, a->u.name.name) : NULL;
		if (!sym || sym->kind != SYM_TENSOR) {
			diag(DIAG_ERROR, a->loc, "argument %d of '%s' must be the name of a tensor", i + 1, def->name);
			return;
		}
		if (!fe_sym_live(sym, a->loc))
			return;
		sym->used = true;
		const Tensor *t = &s->prog->tensors.v[sym->tensor];
		if (t->rank != f[i].nidx) {
			char *sig = signature(def);
			diag(DIAG_ERROR, a->loc, "argument %d of '%s' has %d dimension%s, but parameter %s has %d",
			     i + 1, def->name, t->rank, t->rank == 1 ? "" : "s", f[i].name, f[i].nidx);
			diag(DIAG_NOTE, def->nameloc, "'%s' is defined here as %s", def->name, sig);
			free(sig);
			return;
		}
		for (int d = 0; d < t->rank; d++) {
			int k;
			for (k = 0; k < nidx; k++)
				if (!strcmp(idxname[k], f[i].idx[d]))
					break;
			if (k == nidx) {
				idxname[nidx] = f[i].idx[d];
				idxext[nidx] = t->shape[d];
				idxloc[nidx++] = a->loc;
			} else if (idxext[k] != t->shape[d]) {
				int line, col;
				loc_linecol(idxloc[k], &line, &col);
				diag(DIAG_ERROR, a->loc, "argument %d of '%s' has extent %" PRId64 " in dimension %d, where "
				     "parameter %s's index '%s' is %" PRId64 " (from the argument at %d:%d)", i + 1, def->name,
				     t->shape[d], d + 1, f[i].name, f[i].idx[d], idxext[k], line, col);
				diag(DIAG_NOTE, f[i].idxloc[d], "'%s' is used here", f[i].idx[d]);
				return;
			}
		}
		targ[i] = sym->tensor;
	}

	/* the body, in its own scope */
	int mark = s->syms.n, base = s->scope_base;
	const char *prefix = s->prefix;
	s->scope_base = mark;
	s->prefix = xprintf("%s%s.", prefix ? prefix : "", def->name);
	vec_push(&s->calls, def);
	for (int i = 0; i < np; i++)
		vec_push(&s->syms, ((Sym){.kind = SYM_TENSOR, .name = f[i].name, .loc = f[i].loc,
		                          .tensor = targ[i], .defined = true, .used = true}));
	int nerr = s->nerr_before;
	for (int i = 0; i < def->u.def.nbody && diag_errors() < diag_max; i++)
		fe_check_item(s, def->u.def.body[i]);
	s->nerr_before = nerr;

	int result = -1;
	const Formal *r = &def->u.def.result;
	Sym *rs = fe_lookup(s, r->name);
	if (diag_errors() == before) {
		if (!rs || rs < s->syms.v + mark || rs->kind != SYM_TENSOR) {
			diag(DIAG_ERROR, r->loc, "def '%s' never assigns its result '%s'", def->name, r->name);
		} else {
			const Tensor *t = &s->prog->tensors.v[rs->tensor];
			if (t->rank != r->nidx)
				diag(DIAG_ERROR, r->loc, "the result '%s' has %d dimension%s, but '%s' declares %d",
				     r->name, t->rank, t->rank == 1 ? "" : "s", def->name, r->nidx);
			for (int d = 0; d < r->nidx && d < t->rank; d++)
				for (int k = 0; k < nidx; k++)
					if (!strcmp(idxname[k], r->idx[d]) && idxext[k] != t->shape[d])
						diag(DIAG_ERROR, r->idxloc[d], "the result's index '%s' is %" PRId64 " here but %"
						     PRId64 " in the arguments", r->idx[d], t->shape[d], idxext[k]);
			result = rs->tensor;
		}
	}
	if (diag_errors() > before)
		diag(DIAG_NOTE, call->loc, "in this call of '%s'", def->name);
	free((char *)s->prefix);
	s->prefix = prefix;
	s->calls.n--;
	s->syms.n = mark;
	s->scope_base = base;
	if (diag_errors() > before || result < 0)
		return;

	/* Z: a tensor of its own holding the result's value */
	Tensor t = s->prog->tensors.v[result];
	t.name = fe_local_name(s, it->name);
	t.loc = it->nameloc;
	t.role = TENSOR_TEMP;
	t.output = false;
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	s->cur.v[id] = fe_lower_value(s->prog, s->cur.v, result);
	fe_declare(s, (Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id,
	                    .defined = true, .loop_depth = s->loop_depth});
}

