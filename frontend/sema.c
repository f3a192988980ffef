/*
 * sema.c: the checks between syntax and TRA: fe_compile, and the walk over
 * the program's items.
 *
 * Sema walks the items in order, keeping one scope of names (sizes, consts,
 * tensors, defs), and for each assignment:
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
 * NULL if any error occurred.  The checker's files, which share sema.h:
 *
 *   sema.c     fe_compile; the walk over items
 *   names.c    the symbol table: scopes, did-you-mean, live and expired names
 *   consts.c   the one evaluator of sizes and consts
 *   index.c    a statement's index vars: extents, ranges, affine positions
 *   expr.c     the right side: expressions, types, implicit sums
 *   decl.c     size, const, input, param, output
 *   stmt.c     assignments, print, repeat (and its IST clause), grad
 *   defs.c     def declarations and their inlining at each call
 *   imports.c  import: finding a file and checking its items in place
 */
#include <limits.h>
#include <stdlib.h>

#include "frontend/sema.h"

/* A definition that failed still declares its name, poisoned, so later uses
 * of it do not each report that it does not exist.  It failed with an
 * error of its own, or quietly, reading a name that was poisoned before
 * (`B[n] = A[n] * 2` after A's error): then it declared nothing. */
static void poison_on_error(Sema *s, Item *it)
{
	Sym *old = fe_lookup(s, it->name);
	bool param = old && old->kind == SYM_TENSOR && !old->poisoned && old->tensor >= 0 &&
	             s->prog->tensors.v[old->tensor].role == TENSOR_PARAM;     /* an update's */
	if (diag_errors() > 0 &&        /* quiet failures follow an error */
	    (!old || (old < s->syms.v + s->scope_base && (diag_errors() > s->nerr_before || !param))))
		vec_push(&s->syms, ((Sym){.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc,
		                          .tensor = -1, .poisoned = true}));
}

/* One item, in the scope the items before it made. */
void fe_check_item(Sema *s, Item *it)
{
	if (s->stop)
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
	case I_SIZE:
		fe_check_size(s, it);
		return;
	case I_CONST:
		fe_check_const(s, it);
		return;
	case I_INPUT:
		fe_check_input(s, it);
		poison_on_error(s, it);
		return;
	case I_OUTPUT:
		fe_check_output(s, it);
		return;
	case I_ASSIGN:
		fe_check_assign(s, it);
		poison_on_error(s, it);
		return;
	case I_PARAM:
		fe_check_param(s, it);
		poison_on_error(s, it);
		return;
	case I_IMPORT:
		fe_check_import(s, it);
		return;
	case I_DEF:
		fe_check_def(s, it);
		return;
	case I_PRINT:
		fe_check_print(s, it);
		return;
	case I_REPEAT:
		fe_check_repeat(s, it);
		return;
	}
}

void fe_check_items(Sema *s, Item **items, int n)
{
	for (int i = 0; i < n && diag_errors() < diag_max; i++)
		fe_check_item(s, items[i]);
}

/* The program: its items in order, then its outputs; the -D defines it
 * never declared are errors, its unused inputs and params warnings. */
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

	fe_check_items(&s, ast->items, ast->nitems);
	if (!s.stop)
		fe_check_outputs(&s, ast);

	for (int i = 0; i < opt->ndefines && !s.stop; i++)
		if (!s.define_used[i])
			diag(DIAG_ERROR, NOLOC, "-D %s=%s: the program declares no size or const named '%s'",
			     opt->defines[i].name, opt->defines[i].value, opt->defines[i].name);
	bool any_output = false;
	for (int i = 0; i < s.prog->tensors.n; i++)
		any_output |= s.prog->tensors.v[i].output;
	if (opt->warnings && diag_errors() == 0) {
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
