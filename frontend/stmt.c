/*
 * stmt.c: the statements: assignments (a tensor's definition, a param's
 * update, a grad, a def's call), print, and repeat blocks with their IST
 * clause (split ... every ...).
 *
 * Each name is defined once: an assignment to a new name declares a tensor
 * of the left side's indices, whose extents the right side fixes; only a
 * param is updated, W[i, j] -= e reading as W[i, j] = W[i, j] - (e), and
 * stored back.  A statement with an error is not lowered; one without is
 * lowered at once (lower.c), s->cur following each tensor's current TRA
 * op.  A repeat block's names expire when it ends, and the params are read
 * afresh in each iteration.  An IST loop's body is checked and lowered in
 * place and marked (IstLoop.op, stmt0, nstmt): the driver takes it out
 * into the subnet's program (frontend/ist.c), leaving the loop empty.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/sema.h"

/* ---- assignments ---- */

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
			     aop_name(it->u.assign.op), it->name, fe_sym_what(t, s->prog));
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
			     it->name, fe_sym_what(t, s->prog), line, col);
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
			diag(DIAG_ERROR, ix->loc, "'%s' is %s, not an index", ix->u.name.name, fe_sym_what(clash, s->prog));
			ok = false;
			continue;
		}
		for (int j = 0; j < i; j++)
			if (lhs[j] >= 0 && !strcmp(s->vars.v[lhs[j]].name, ix->u.name.name)) {
				diag(DIAG_ERROR, ix->loc, "index '%s' appears twice on the left", ix->u.name.name);
				ok = false;
			}
		lhs[i] = fe_new_var(s, ix->u.name.name, ix->loc, false);
		ix->u.name.var = lhs[i];
		if (param) {
			char *why = arena_alloc(s->arena, 64 + strlen(it->name));
			sprintf(why, "dimension %d of %s", i + 1, it->name);
			fe_bind_extent(s, lhs[i], param->shape[i], ix->loc, why);
		}
		int64_t extent;
		if (ix->u.name.range && !fe_range_extent(s, ix->u.name.range, &extent))
			ok = false;
		else if (ix->u.name.range)
			ok &= fe_bind_extent(s, lhs[i], extent, ix->loc, fe_range_why(s, ix->loc));
	}
	return ok;
}

/* The param of the left side read as it is, W[i, j]. */
static Node *target_access(Sema *s, Item *it)
{
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
	w->height = 2;
	return w;
}

static Node *node2(Sema *s, NodeKind kind, BinOp op, Node *a, Node *b, Loc loc)
{
	Node *n = fe_ast_node(s->arena, kind, loc);
	n->u.binary.op = op;
	n->u.binary.a = a;
	n->u.binary.b = b;
	n->height = (a->height > b->height ? a->height : b->height) + 1;
	return n;
}

/* W[i, j] -= v: the right side becomes W[i, j] - v, the op '='. */
static void update_value(Sema *s, Item *it)
{
	static const BinOp ops[] = {B_ADD, B_ADD, B_SUB, B_MUL, B_DIV};
	it->u.assign.value = node2(s, N_BINARY, ops[it->u.assign.op], target_access(s, it), it->u.assign.value, it->loc);
	it->u.assign.op = A_SET;
}

/* Is position ix on the left one element of a dim (a loop counter, a
 * number, an expression) rather than an index name?  For a param a size
 * or const is one too. */
static bool one_position(Sema *s, const Node *ix, const Tensor *param)
{
	if (ix->kind != N_NAME)
		return true;
	const Sym *sym = ix->u.name.range ? NULL : fe_lookup(s, ix->u.name.name);
	return sym && (sym->kind == SYM_COUNTER || (param && (sym->kind == SYM_SIZE || sym->kind == SYM_CONST)));
}

/*
 * W[e, i] op= v with a position given by loop counters, sizes and numbers
 * (numpy's W[e, :] = v): the element there (the row, ...) gets the new
 * value, the rest of W keeps its own.  Rewritten as a whole update,
 *
 *   W[e', i] = where(e' == e, W[e', i] op v, W[e', i]);
 *
 * e' an index over W's dim, named e' so that no program can name it.
 * False (reported) when a position is not one, or outside W.  A curve of
 * losses is such a param, written element by element in the loops and
 * output at the end.
 */
static bool write_positions(Sema *s, Item *it, const Tensor *param)
{
	static const BinOp ops[] = {B_ADD, B_ADD, B_SUB, B_MUL, B_DIV};
	Node *cond = NULL;
	bool ok = true;
	for (int d = 0; d < it->u.assign.nidx; d++) {
		Node *ix = it->u.assign.idx[d];
		if (!one_position(s, ix, param))
			continue;
		if (!param) {
			char *text = loc_text(ix->loc);
			diag(DIAG_ERROR, ix->loc, "only a param can be written at a position such as '%s'; declare '%s' "
			     "as one (param %s[...] = zeros;) to fill it element by element", text, it->name, it->name);
			free(text);
			return false;
		}
		if (s->ist_depth) {
			diag(DIAG_ERROR, ix->loc, "writing a param at a position inside an IST loop is not supported yet: "
			     "the subnets' copies of an unsplit param are averaged");
			return false;
		}
		if (!fe_check_position(s, ix, param, d)) {
			ok = false;
			continue;
		}
		char *text = loc_text(ix->loc);
		Node *at = fe_ast_node(s->arena, N_NAME, ix->loc);
		at->u.name.name = arena_alloc(s->arena, strlen(text) + 2);
		sprintf((char *)at->u.name.name, "%s'", text);
		free(text);
		Node *var = fe_ast_node(s->arena, N_NAME, ix->loc);
		var->u.name.name = at->u.name.name;
		Node *eq = node2(s, N_BINARY, B_EQ, var, ix, ix->loc);
		cond = cond ? node2(s, N_BINARY, B_MUL, cond, eq, ix->loc) : eq;
		it->u.assign.idx[d] = at;
	}
	if (!cond || !ok)
		return ok;
	Node *v = it->u.assign.value;
	if (it->u.assign.op != A_SET)
		v = node2(s, N_BINARY, ops[it->u.assign.op], target_access(s, it), v, it->loc);
	Node *w = fe_ast_node(s->arena, N_WHERE, it->loc);
	w->u.where.cond = cond;
	w->u.where.a = v;
	w->u.where.b = target_access(s, it);
	w->height = (cond->height > v->height ? cond->height : v->height) + 1;
	it->u.assign.value = w;
	it->u.assign.op = A_SET;
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
void fe_check_assign(Sema *s, Item *it)
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
	if (!write_positions(s, it, param) || !lhs_indices(s, it, param, lhs))
		return;
	if (param && it->u.assign.op != A_SET)
		update_value(s, it);
	Ty ty = {0};
	if (!fe_check_rhs(s, it, param, lhs, &ty))
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
/* ---- print and repeat ---- */

/* print NAME; */
void fe_check_print(Sema *s, Item *it)
{
	Node *n = it->u.print.value;
	if (n->kind != N_NAME) {
		diag(DIAG_ERROR, n->loc, "print takes the name of a tensor");
		return;
	}
	Sym *sym = fe_lookup(s, n->u.name.name);
	if (!sym || sym->kind != SYM_TENSOR) {
		if (!sym)
			diag(DIAG_ERROR, n->loc, "unknown tensor '%s'%s", n->u.name.name,
			     fe_did_you_mean(s, n->u.name.name, SYM_TENSOR, NULL, 0));
		else if (sym->kind == SYM_CONST)
			diag(DIAG_ERROR, n->loc, "'%s' is a const, %g when the program compiles; print takes a tensor "
			     "computed when it runs", n->u.name.name, sym->value);
		else
			diag(DIAG_ERROR, n->loc, "'%s' is %s; print takes a tensor", n->u.name.name, fe_sym_what(sym, s->prog));
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
			     name, sym ? fe_sym_what(sym, s->prog) : "not declared");
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
	if (!fe_eval_size(s, it->u.repeat.every, &l->every))
		return false;
	if (l->every < 1) {
		diag(DIAG_ERROR, it->u.repeat.every->loc, "every takes the local iterations between exchanges, "
		     "at least 1; found %" PRId64, l->every);
		ok = false;
	}
	return ok;
}

/* repeat N { ... }: the body's temps exist only inside it.  An IST loop
 * (`split ... every ...`) is lowered as any, its body marked for the
 * driver to take out (frontend/ist.c). */
void fe_check_repeat(Sema *s, Item *it)
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
	if (!fe_eval_size(s, it->u.repeat.count, &n))
		return;
	IstLoop l = {.count = n, .depth = s->loop_depth};
	if (ist) {
		if (!check_split(s, it, &l))
			return;
		vec_push(&s->prog->ist, l);
		s->nist++;
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
		fe_ist_scope(s, first, l.loc);
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
		fe_ist_scope(NULL, 0, NOLOC);
		s->ist_depth = 0;
		/* the body stays, marked: the driver takes it out into a program
		 * of its own, leaving the loop empty (the IST run stands for
		 * it); nothing after reads its values */
		IstLoop *lp = &s->prog->ist.v[s->nist - 1];
		lp->op = loop_op;
		lp->stmt0 = nstmt;
		lp->nstmt = s->prog->stmts.n - nstmt;
		for (int t = 0; t < s->cur.n; t++)
			if (s->cur.v[t] > loop_op)
				s->cur.v[t] = -1;
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
		diag(DIAG_ERROR, loc, "unknown tensor '%s'%s", name, fe_did_you_mean(s, name, SYM_TENSOR, NULL, 0));
		return NULL;
	}
	if (!fe_sym_live(sym, loc))
		return NULL;
	if (sym->kind != SYM_TENSOR) {
		diag(DIAG_ERROR, loc, "'%s' is %s; grad takes %s", name, fe_sym_what(sym, s->prog), what);
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
