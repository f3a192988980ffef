/*
 * decl.c: the declarations: size, const, input, param and output items.
 *
 * A size is a positive integer and a const a real, both known when the
 * program compiles (consts.c evaluates them) and both overridden by -D
 * NAME=VALUE (each -D must name one: fe_compile reports those unused; a
 * bad value stops the check).
 * An input or param declares a tensor of at most MAXDIM positive dims
 * whose elements fit in 64 bits; its dims keep the names of the sizes that
 * give them (an IST loop splits by them).  An input is read at the start,
 * a param is initialised there; an output is resolved after the last item,
 * when every name it may refer to exists.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

/* ---- sizes and consts ---- */

static const Define *find_define(Sema *s, const char *name, int *index)
{
	for (int i = 0; i < s->opt->ndefines; i++)
		if (!strcmp(s->opt->defines[i].name, name)) {
			*index = i;
			return &s->opt->defines[i];
		}
	return NULL;
}

/* A -D value that is wrong is one error and the end of the check: every
 * later use of the name would otherwise report again (issue 31). */
static void bad_define(Sema *s, const Define *d, const char *why)
{
	diag(DIAG_ERROR, NOLOC, "-D %s=%s: %s", d->name, d->value, why);
	s->stop = true;
}

/* size N = 64;  (-D N=128 overrides it).  A size whose expression is in
 * error is declared 1, so that its uses say nothing more. */
void fe_check_size(Sema *s, Item *it)
{
	int64_t v;
	int di;
	const Define *d = find_define(s, it->name, &di);
	if (d) {
		char *end;
		errno = 0;
		long long dv = strtoll(d->value, &end, 10);
		s->define_used[di] = true;
		if (*end || end == d->value || errno)
			return bad_define(s, d, "a size must be an integer");
		if (dv < 1)
			return bad_define(s, d, "a size must be positive");
	}
	bool ok = fe_eval_size(s, it->u.size.value, &v);
	if (d) {
		v = strtoll(d->value, NULL, 10);
	} else if (!ok) {
		v = 1;
	} else if (v < 1) {
		diag(DIAG_ERROR, it->u.size.value->loc, "size '%s' is %" PRId64 "; sizes must be positive", it->name, v);
		v = 1;
	}
	fe_declare(s, (Sym){.kind = SYM_SIZE, .name = it->name, .loc = it->nameloc, .size = v});
}

/* const lr = 0.1;  (-D lr=0.01 overrides it).  A const whose expression
 * is in error is declared 1, so that its uses say nothing more. */
void fe_check_const(Sema *s, Item *it)
{
	double v;
	int di;
	const Define *d = find_define(s, it->name, &di);
	if (d) {
		char *end;
		s->define_used[di] = true;
		strtod(d->value, &end);
		if (*end || end == d->value)
			return bad_define(s, d, "a const must be a number");
	}
	bool ok = fe_eval_const(s, it->u.cnst.value, &v);
	if (d)
		v = strtod(d->value, NULL);
	else if (!ok)
		v = 1;
	fe_declare(s, (Sym){.kind = SYM_CONST, .name = it->name, .loc = it->nameloc, .value = v});
}

/* ---- tensors ---- */

/* The rank of an input or param, into t; false (reported) above MAXDIM. */
static bool decl_rank(Item *it, Tensor *t)
{
	if (it->u.decl.ndims > MAXDIM) {
		diag(DIAG_ERROR, it->nameloc, "'%s' has %d dimensions; trac supports at most %d", it->name,
		     it->u.decl.ndims, MAXDIM);
		return false;
	}
	t->rank = it->u.decl.ndims;
	return true;
}

/* Its dims, into t's shape (and the names of the sizes that give them);
 * false (reported) when one is not a positive size, or when the elements
 * do not fit in 64 bits. */
static bool decl_dims(Sema *s, Item *it, Tensor *t)
{
	int64_t total = 1;
	bool ok = true;
	for (int d = 0; d < t->rank; d++) {
		if (it->u.decl.dims[d]->kind == N_NAME)
			t->dimsize[d] = it->u.decl.dims[d]->u.name.name;
		if (!fe_eval_size(s, it->u.decl.dims[d], &t->shape[d])) {
			ok = false;
		} else if (t->shape[d] < 1) {
			diag(DIAG_ERROR, it->u.decl.dims[d]->loc, "extent %" PRId64 " is not positive", t->shape[d]);
			ok = false;
		} else if (!mul_ok(total, t->shape[d], &total) || !mul_ok(total, dtype_size(t->dtype), &(int64_t){0})) {
			diag(DIAG_ERROR, it->nameloc, "'%s' has more elements than fit in 64 bits", it->name);
			ok = false;
		}
	}
	return ok;
}

/* input X[N, D] : f32 = "x.npy";  input S[N, D] : sparse; */
void fe_check_input(Sema *s, Item *it)
{
	Tensor t = {.name = it->name, .loc = it->nameloc, .role = TENSOR_INPUT,
	            .dtype = it->u.decl.dtype, .path = it->u.decl.path, .sparse = it->u.decl.sparse};
	if (!decl_rank(it, &t) || !decl_dims(s, it, &t))
		return;
	int id = tra_add_tensor(s->prog, t);
	vec_push(&s->cur, -1);
	Sym sym = {.kind = SYM_TENSOR, .name = it->name, .loc = it->nameloc, .tensor = id, .defined = true};
	if (fe_declare(s, sym))
		s->cur.v[id] = fe_lower_input(s->prog, id);
}

/* param W[D, H] = zeros | ones | uniform(a, b) | normal(mean, std) | "w0.npy"; */
void fe_check_param(Sema *s, Item *it)
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

	if (!decl_rank(it, &t))
		return;
	ok = decl_dims(s, it, &t);
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
		ok &= fe_eval_const(s, init->u.call.args[0], &t.init_a);
		ok &= fe_eval_const(s, init->u.call.args[1], &t.init_b);
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

/* ---- outputs ---- */

/* output NAME; or output NAME = "y.npy";  where it stands, a name declared
 * so far must be a tensor (fe_check_outputs resolves it at the end). */
void fe_check_output(Sema *s, Item *it)
{
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
		diag(DIAG_ERROR, it->nameloc, "'%s' is %s; only tensors can be outputs", it->name, fe_sym_what(sym, s->prog));
		return;
	}
}

/* Whether output `it`'s file is one an input or param is read from (said):
 * the executable would write over a file it reads (tra(5), OUTPUTS). */
static bool reads_file(const TraProg *p, const char *path, const Item *it)
{
	for (int i = 0; i < p->tensors.n; i++) {
		const Tensor *t = &p->tensors.v[i];
		if (!t->path || strcmp(t->path, path) != 0)
			continue;
		diag(DIAG_ERROR, it->nameloc, "output '%s' is written to \"%s\", which %s '%s' is read from: "
		     "the run would write over its own input; name another file", it->name, path,
		     t->role == TENSOR_INPUT ? "input" : "param", t->name);
		return true;
	}
	return false;
}

/* Outputs, after the last item: each names a tensor that has a value then. */
void fe_check_outputs(Sema *s, Ast *ast)
{
	if (s->too_many)
		return;         /* the statements after the limit were never checked */
	for (int i = 0; i < ast->nitems; i++) {
		Item *it = ast->items[i];
		if (it->kind != I_OUTPUT)
			continue;
		Sym *sym = fe_lookup(s, it->name);
		if (!sym) {
			diag(DIAG_ERROR, it->nameloc, "output '%s' is never defined%s", it->name, fe_did_you_mean(s, it->name, SYM_TENSOR, NULL, 0));
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
		if (it->u.output.path && reads_file(s->prog, it->u.output.path, it))
			continue;
		if (t->rank != 2 && ends_with(it->u.output.path, ".npz")) {
			diag(DIAG_ERROR, it->nameloc, "output '%s' is written to \"%s\", but a .npz holds a matrix "
			     "(scipy.sparse's csr) and '%s' has %d dimension%s; name a .npy", it->name,
			     it->u.output.path, it->name, t->rank, t->rank == 1 ? "" : "s");
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
