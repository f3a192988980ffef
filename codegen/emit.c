/*
 * emit.c: IA plans -> one C file.
 *
 * The emitted file reads top to bottom like the plan: const tables for the
 * program's tensors, the ops (for --profile) and every relation type
 * (tables.c); one kernel function per join or map (kernel.c, conv.c,
 * sparse.c); then the plan's body, one runtime call per IA op, each
 * relation freed right after its last reader (body.c).  One file holds a
 * plan per rank count (-P LIST): each plan's types, kernels, predicates,
 * schedules and body are written once however many plans have them
 * (share), and main runs the body of the plan trt_init picks.  An IST
 * loop's body, planned apart for one rank of its subnet, is written the
 * same way as a function of its own, with a descriptor trt_ist reads.
 */
#include "codegen/emit.h"

/* Writes the definition in *text (HOLE for its name) unless an equal one
 * of its kind is already written; frees *text; returns its number. */
static int share(Emit *e, DefKind kind, Buf *text)
{
	const char *t = text->s ? text->s : "";
	uint64_t h = 1469598103934665603u ^ (uint64_t)kind;
	for (const char *c = t; *c; c++)
		h = (h ^ (unsigned char)*c) * 1099511628211u;
	int at = (int)(h % NBUCKET);
	for (int d = e->bucket[at]; d >= 0; d = e->defs.v[d].next)
		if (e->defs.v[d].kind == kind && e->defs.v[d].hash == h && !strcmp(e->defs.v[d].text, t)) {
			buf_free(text);
			return e->defs.v[d].id;
		}
	Def d = {kind, xstrdup(t), h, e->ndef[kind]++, e->bucket[at]};
	char id[16];
	snprintf(id, sizeof id, "%d", d.id);
	for (const char *c = t, *hole; *c; c = hole + 1) {
		hole = strchr(c, HOLE[0]);
		if (!hole) {
			buf_puts(e->b, c);
			break;
		}
		buf_printf(e->b, "%.*s%s", (int)(hole - c), c, id);
	}
	vec_push(&e->defs, d);
	e->bucket[at] = e->defs.n - 1;
	buf_free(text);
	return d.id;
}

const char *ctype(DType t)
{
	static const char *const name[] = {[DT_F32] = "float", [DT_F64] = "double", [DT_I32] = "int32_t",
	                                   [DT_I64] = "int64_t"};
	return name[t];
}

const char *cdtype(DType t)
{
	static const char *const name[] = {[DT_F32] = "TRT_F32", [DT_F64] = "TRT_F64", [DT_I32] = "TRT_I32",
	                                   [DT_I64] = "TRT_I64"};
	return name[t];
}

void c_string(Buf *b, const char *s)
{
	buf_quote(b, s, false);
}

void place_literal(Buf *b, const Place *p)
{
	static const char *kinds[] = {"TRT_ALL", "TRT_PART", "TRT_ANY"};
	buf_printf(b, "(TrtPlace){%s, %d, {", kinds[p->kind], p->ndims);
	buf_ints(b, p->ndims, p->dims, ", ");
	buf_puts(b, "}}");
}

void end_call_at(Buf *b, const Place *p)
{
	place_literal(b, p);
	buf_puts(b, ");\n");
}

void int_list(Buf *b, int n, const int *v)
{
	buf_puts(b, "{");
	buf_ints(b, n, v, ", ");
	buf_puts(b, "}");
}

/* The body of e->p as a definition (shared with an equal one); returns its
 * number. */
static int share_body(Emit *e)
{
	Buf *out = e->b, text = {0};
	e->b = &text;
	emit_body(e);
	e->b = out;
	return share(e, D_RUN, &text);
}

/* The definitions of e->p's ops (shared with earlier plans' where equal):
 * types, kernels, predicates, schedules; their numbers in e->def. */
static void emit_defs(Emit *e)
{
	const IaPlan *p = e->p;
	Buf *out = e->b;
	e->def = xcalloc((size_t)p->ops.n + 1, sizeof *e->def);
	/* elementwise ops made in a dying input's chunks; not in an IST body */
	e->in_place = xcalloc((size_t)p->ops.n + 1, sizeof *e->in_place);
	IaLoops life;
	ia_loops(p, &life);
	for (int i = 0; i < p->ops.n; i++)
		e->in_place[i] = e->local ? -1 : ia_elementwise_in_place(p, &life, i);
	ia_loops_free(&life);
	emit_site_maps(e);
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		Buf text = {0};
		e->b = &text;
		if (ia_has_result(op->kind)) {
			emit_type(e, i);
			e->b = out;
			e->def[i][D_TYPE] = share(e, D_TYPE, &text);
			e->b = &text;
		}
		const Kernel *kernel = ia_op_kernel(op);
		DefKind kind = ND;
		if (kernel) {
			emit_kernel(e, i, kernel);
			kind = D_KERNEL;
		} else if (op->kind == IA_FILTER) {
			emit_pred(e, &op->u.filter.pred);
			kind = D_PRED;
		}
		e->b = out;
		if (kind != ND)
			e->def[i][kind] = share(e, kind, &text);
		if (op->kind == IA_TWOPHASE) {
			e->b = &text;
			emit_schedule(e, i);
			e->b = out;
			e->def[i][D_SCHED] = share(e, D_SCHED, &text);
		}
	}
}

/* IST loop `loop`'s body (CgOptions.ist) under plan e->plan: its
 * definitions, its body function and the loop's descriptor; the numbers
 * of the last two in e->ist_run and e->ist_desc.  The body's tensors are
 * the program's, found by name and role. */
static void emit_ist_body(Emit *e, int loop)
{
	const IaPlan *main_plan = e->p;
	const IaPlan *p = e->o->ist[e->plan * e->o->nist + loop];
	int (*main_def)[ND] = e->def;
	int *main_index = e->tensor_index;
	int nt = p->tra->tensors.n;
	e->tensor_index = xcalloc((size_t)nt + 1, sizeof(int));
	for (int t = 0; t < nt; t++) {
		e->tensor_index[t] = -1;
		for (int u = 0; u < main_plan->tra->tensors.n; u++)
			if (!strcmp(main_plan->tra->tensors.v[u].name, p->tra->tensors.v[t].name) &&
			    main_plan->tra->tensors.v[u].role == p->tra->tensors.v[t].role)
				e->tensor_index[t] = main_index[u];
	}
	e->p = p;
	e->local = true;
	e->ist_loop = loop;
	emit_defs(e);
	e->ist_run[loop] = share_body(e);
	emit_site_maps_free(e);

	Buf *out = e->b, text = {0};
	e->b = &text;
	emit_ist_desc(e, loop, main_plan);
	e->b = out;
	e->ist_desc[loop] = share(e, D_IST, &text);

	free(e->def);
	free(e->in_place);
	free(e->tensor_index);
	e->def = main_def;
	e->tensor_index = main_index;
	e->p = main_plan;
	e->local = false;
}

/* Plan k (e->p): its IST bodies, definitions, ops table and body; returns
 * the body's number. */
static int emit_plan(Emit *e, int k)
{
	e->plan = k;
	int nist = e->p->tra->ist.n;
	e->ist_run = xcalloc((size_t)nist + 1, sizeof *e->ist_run);
	e->ist_desc = xcalloc((size_t)nist + 1, sizeof *e->ist_desc);
	for (int i = 0; i < nist; i++)
		emit_ist_body(e, i);
	emit_defs(e);
	emit_ops(e, k);
	int run = share_body(e);
	emit_site_maps_free(e);
	free(e->def);
	free(e->in_place);
	e->def = NULL;
	free(e->ist_run);
	free(e->ist_desc);
	return run;
}

/* The plans, one per rank count (increasing), of one TRA program: the
 * tensors once, then each plan's types, kernels, predicates, schedules and
 * body where no earlier plan has an equal one, then the programs and main. */
void cg_emit(Buf *out, const IaPlan *const *plans, int nplans, const CgOptions *o)
{
	const IaPlan *p = plans[0];
	int nt = p->tra->tensors.n;
	Emit *e = xcalloc(1, sizeof *e);
	e->b = out;
	e->p = p;
	e->o = o;
	e->tensor_index = xcalloc(nt + 1, sizeof(int));
	e->output_index = xcalloc(nt + 1, sizeof(int));
	for (int i = 0; i < nt; i++)
		e->tensor_index[i] = e->output_index[i] = -1;
	for (int i = 0; i < NBUCKET; i++)
		e->bucket[i] = -1;

	buf_printf(out, "/* Generated by trac from %s for ", o->source);
	for (int k = 0; k < nplans; k++)
		buf_printf(out, "%s%d", k ? (k + 1 < nplans ? ", " : " and ") : "", plans[k]->nranks);
	buf_printf(out, " rank%s.  Do not edit. */\n", nplans == 1 && p->nranks == 1 ? "" : "s");
	buf_puts(out, "#include <math.h>\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n#include \"trac_rt.h\"\n\n");
	/* a plan's body is straight-line calls into the runtime: optimising it
	 * gains nothing and, with a body per rank count, costs most of the C
	 * compiler's time */
	buf_puts(out, "#if defined(__GNUC__) && !defined(__clang__)\n#define BODY __attribute__((optimize(\"O0\")))\n"
	         "#else\n#define BODY\n#endif\n\n");
	emit_tensors(e);
	int *run = xcalloc((size_t)nplans, sizeof *run);
	for (int k = 0; k < nplans; k++) {
		if (plans[k]->tra->tensors.n != nt)
			tr_bug("plans of one program with different tensors");
		e->p = plans[k];
		buf_printf(out, "/* ---- the plan for %d rank%s ---- */\n\n", plans[k]->nranks, plans[k]->nranks == 1 ? "" : "s");
		run[k] = emit_plan(e, k);
	}
	emit_programs(e, plans, nplans, run, o);
	for (int d = 0; d < e->defs.n; d++)
		free(e->defs.v[d].text);
	vec_free(&e->defs);
	free(run);
	free(e->tensor_index);
	free(e->output_index);
	free(e);
}
