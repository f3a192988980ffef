/*
 * emit.c: an IA plan -> C.
 *
 * The emitted file reads top to bottom like the plan: const tables for the
 * program's tensors, the ops (for --profile) and every relation type; one
 * kernel function per join or map; then the plan's body, one runtime call
 * per IA op, each relation freed right after its last reader.  One file
 * holds a plan per rank count (-P LIST): each plan's types, kernels,
 * predicates, schedules and body are written once however many plans have
 * them (share), and main runs the body of the plan trt_init picks.
 *
 * Kernels.  A product summed over shared labels with at most one label each
 * in the m, n and k roles becomes one BLIS gemm per batch index, on strided
 * views of the chunks (transposes are strides, never copies).  Everything
 * else becomes a loop nest: output labels outside (the last, contiguous one
 * innermost), reduced labels inside, the element expression as a sequence
 * of temporaries the C compiler can vectorise.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

/* What the file defines once however many plans use it: a definition's
 * text names it with HOLE, which becomes its number among its kind's. */
#define HOLE "\001"
typedef enum { D_TYPE, D_KERNEL, D_PRED, D_SCHED, D_RUN, D_IST, ND } DefKind;

typedef struct Def {
	DefKind kind;
	char *text;
	uint64_t hash;
	int id;
	int next;               /* the next in its hash bucket, or -1 */
} Def;

enum { NBUCKET = 4096 };

typedef struct Emit {
	Buf *b;
	const IaPlan *p;
	int *tensor_index;      /* TRA tensor -> runtime table index (inputs), -1 */
	int *output_index;      /* TRA tensor -> runtime table index (outputs), -1 */
	int (*def)[ND];         /* per op of p: the number of its type, kernel, ... */
	Vec(Def) defs;          /* every definition emitted so far */
	int bucket[NBUCKET];    /* by hash: the last def there, or -1 */
	int ndef[ND];           /* definitions of each kind */
	/* IST loops: the bodies (CgOptions.ist), and while a plan is emitted
	 * each loop's body function and descriptor numbers */
	const CgOptions *o;
	int plan;               /* the plan being emitted */
	bool local;             /* emitting an IST body */
	int ist_loop;           /* which (the loop's number) */
	int *ist_run, *ist_desc;
} Emit;

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

static const char *ctype(DType t)
{
	static const char *const name[] = {[DT_F32] = "float", [DT_F64] = "double", [DT_I32] = "int32_t",
	                                   [DT_I64] = "int64_t"};
	return name[t];
}

static const char *cdtype(DType t)
{
	static const char *const name[] = {[DT_F32] = "TRT_F32", [DT_F64] = "TRT_F64", [DT_I32] = "TRT_I32",
	                                   [DT_I64] = "TRT_I64"};
	return name[t];
}

static void c_string(Buf *b, const char *s)
{
	buf_quote(b, s, false);
}

static void place_literal(Buf *b, const Place *p)
{
	static const char *kinds[] = {"TRT_ALL", "TRT_PART", "TRT_ANY"};
	buf_printf(b, "(TrtPlace){%s, %d, {", kinds[p->kind], p->ndims);
	buf_ints(b, p->ndims, p->dims, ", ");
	buf_puts(b, "}}");
}

/* The end of a runtime call whose last argument is its result's placement. */
static void end_call_at(Buf *b, const Place *p)
{
	place_literal(b, p);
	buf_puts(b, ");\n");
}

static void int_list(Buf *b, int n, const int *v)
{
	buf_puts(b, "{");
	buf_ints(b, n, v, ", ");
	buf_puts(b, "}");
}

/* ---- tables ---- */

static void emit_tensors(Emit *e)
{
	Buf *b = e->b;
	const TraProg *t = e->p->tra;
	int n = 0;

	/* outputs first: NAME= names a param's output rather than the param */
	buf_puts(b, "static const TrtTensor tensors[] = {\n");
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < t->tensors.n; i++) {
			const Tensor *ten = &t->tensors.v[i];
			bool out = pass == 0;
			if (out ? !ten->output : ten->role == TENSOR_TEMP)
				continue;
			(out ? e->output_index : e->tensor_index)[i] = n++;
			const char *role = out ? "TRT_OUTPUT" : ten->role == TENSOR_INPUT ? "TRT_INPUT" : "TRT_PARAM";
			buf_puts(b, "\t{");
			c_string(b, ten->name);
			buf_printf(b, ", %s, %s, %d, {", role, cdtype(ten->dtype), ten->rank);
			for (int d = 0; d < ten->rank; d++)
				buf_printf(b, "%s%" PRId64, d ? ", " : "", ten->shape[d]);
			buf_puts(b, "}, ");
			const char *path = out ? ten->outpath : ten->path;
			if (path)
				c_string(b, path);
			else
				buf_puts(b, "NULL");
			buf_puts(b, !out && ten->sparse ? ", 1},\n" : "},\n");
		}
	if (n == 0)
		buf_puts(b, "\t{NULL, TRT_INPUT, TRT_F32, 0, {0}, NULL},\n");
	buf_puts(b, "};\n\n");
}

/* Plan k's ops, for --profile: opsK. */
static void emit_ops(Emit *e, int k)
{
	Buf *b = e->b;
	const TraProg *t = e->p->tra;
	buf_printf(b, "static const TrtOpInfo ops%d[] = {\n", k);
	for (int i = 0; i < e->p->ops.n; i++) {
		const IaOp *op = &e->p->ops.v[i];
		Buf label = {0};
		if (op->stmt >= 0)
			buf_printf(&label, "%s", t->stmts.v[op->stmt].text);
		else if (op->kind == IA_READ)
			buf_printf(&label, "read %s", t->tensors.v[op->u.read.tensor].name);
		else if (op->kind == IA_WRITE)
			buf_printf(&label, "write %s", t->tensors.v[op->u.write.tensor].name);
		buf_printf(b, "\t{\"%s\", ", ia_op_name(op->kind));
		c_string(b, label.s ? label.s : "");
		double bytes = op->bytes_sent;
		if (op->kind == IA_LOOP && op->u.loop.ist) {   /* an IST run: its exchanges and gather, f32 */
			int l = op->u.loop.ist - 1;
			const IaPlan *body = e->o->ist[e->plan * e->o->nist + l];
			IstTraffic tr = ist_traffic(body->tra, &e->p->tra->ist.v[l], e->p->nranks);
			bytes = 4 * ((double)(tr.rounds - 1) * (tr.exchange + tr.average) + tr.gather);
		}
		buf_printf(b, ", %.17g, %.17g, %.17g},\n", bytes, op->seconds, op->flops);
		buf_free(&label);
	}
	buf_puts(b, "};\n\n");
}

/* The program under each plan, increasing rank counts, and main: the
 * runtime picks the plan, main runs its body. */
static void emit_programs(Emit *e, const IaPlan *const *plans, int nplans, const int *run, const CgOptions *o)
{
	Buf *b = e->b;
	const IaPlan *p0 = plans[0];
	int ntensors = 0;
	for (int i = 0; i < p0->tra->tensors.n; i++)
		ntensors += (e->tensor_index[i] >= 0) + (e->output_index[i] >= 0);
	int nloops = 0, depth = 0;      /* outermost repeat blocks, for checkpoints */
	for (int i = 0; i < p0->ops.n; i++) {
		nloops += p0->ops.v[i].kind == IA_LOOP && depth == 0;
		depth += p0->ops.v[i].kind == IA_LOOP ? 1 : p0->ops.v[i].kind == IA_ENDLOOP ? -1 : 0;
	}
	buf_puts(b, "static const TrtProgram programs[] = {\n");
	for (int k = 0; k < nplans; k++) {
		buf_puts(b, "\t{TRT_ABI, ");
		c_string(b, o->program);
		buf_printf(b, ", tensors, %d, ops%d, %d, %" PRIu64 "u, %d, %.17g, %d, %d},\n", ntensors, k,
		           plans[k]->ops.n, o->seed, plans[k]->nranks, plans[k]->peak_bytes, plans[k]->peak_op, nloops);
	}
	buf_puts(b, "};\n\nstatic int (*const run[])(void) = {");
	for (int k = 0; k < nplans; k++)
		buf_printf(b, "%srun%d", k ? ", " : "", run[k]);
	buf_printf(b, "};\n\nint main(int argc, char **argv)\n{\n\treturn run[trt_init(&argc, &argv, programs, %d)]();\n}\n",
	           nplans);
}

static void emit_type(Emit *e, int i)
{
	const RelType *t = &e->p->ops.v[i].type;
	Buf *b = e->b;
	buf_printf(b, "static const TrtType type" HOLE " = {%s, %d, {", cdtype(t->dtype), t->nkey);
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? ", " : "", t->extent[d]);
	buf_puts(b, "}, {");
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? ", " : "", t->block[d]);
	buf_printf(b, "}, %d, ", t->nchunk);
	int_list(b, t->nchunk, t->chunkdim);
	bool halo = false;
	for (int d = 0; d < t->nkey; d++)
		halo |= t->hext[d] > 0;
	if (halo) {                     /* a halo's rows and its data's extent */
		const int64_t *h[3] = {t->hlo, t->hhi, t->hext};
		buf_printf(b, ", %d", t->sparse);
		for (int j = 0; j < 3; j++) {
			buf_puts(b, ", {");
			for (int d = 0; d < t->nkey; d++)
				buf_printf(b, "%s%" PRId64, d ? ", " : "", h[j][d]);
			buf_puts(b, "}");
		}
		buf_puts(b, "};\n");
		return;
	}
	buf_puts(b, t->sparse ? ", 1};\n" : "};\n");
}

/* ---- kernels ---- */

typedef struct KGen {
	Buf *b;
	const Kernel *k;
	DType dt;
	int ntmp;
} KGen;

static void num_literal(Buf *b, double v, DType dt)
{
	if (dtype_is_int(dt)) {
		/* sema lets only whole numbers into integer kernels; the
		 * identities of max and min (-inf, inf) become the type's bounds */
		const char *bits = dt == DT_I32 ? "32" : "64";
		double lim = dt == DT_I32 ? 2147483647.0 : 9223372036854775807.0;
		if (v >= lim || v <= -lim)
			buf_printf(b, "INT%s_%s", bits, v > 0 ? "MAX" : "MIN");
		else
			buf_printf(b, "INT%s_C(%.0f)", bits, isnan(v) ? 0 : trunc(v));
	} else if (isinf(v))
		buf_printf(b, "%s(INFINITY)", v < 0 ? "-" : "");
	else if (isnan(v))
		buf_puts(b, "(NAN)");
	else {
		char s[64];
		snprintf(s, sizeof s, dt == DT_F32 ? "%.9g" : "%.17g", v);
		buf_printf(b, "%s%s%s", s, strpbrk(s, ".e") ? "" : ".0", dt == DT_F32 ? "f" : "");
	}
}

/* Emit temporaries computing e; returns the temporary's number.  The
 * element values of the inputs are x0 and x1. */
static int kexpr_emit(KGen *g, const KExpr *e, const char *indent)
{
	Buf *b = g->b;
	const char *T = ctype(g->dt);
	bool f32 = g->dt == DT_F32, integer = dtype_is_int(g->dt);
	int a[3] = {0};
	int t;

	switch (e->kind) {
	case KX_IN:
		t = g->ntmp++;
		buf_printf(b, "%s%s t%d = x%d;\n", indent, T, t, e->in);
		return t;
	case KX_CONST:
		t = g->ntmp++;
		buf_printf(b, "%s%s t%d = ", indent, T, t);
		num_literal(b, e->val, g->dt);
		buf_puts(b, ";\n");
		return t;
	case KX_IDX:
		/* the element's index in the whole tensor: the chunk's offset
		 * along the dim carrying the label, plus the loop index */
		t = g->ntmp++;
		for (int i = 0; i < g->k->nin; i++)
			for (int c = 0; c < g->k->nindim[i]; c++)
				if (g->k->inlab[i][c] == e->in) {
					buf_printf(b, "%s%s t%d = (%s)(in[%d].off[%d] + l%d);\n", indent, T, t, T, i, c, e->in);
					return t;
				}
		tr_bug("index label %d in no input", e->in);
	case KX_OP:
		break;
	}
	for (int i = 0; i < kop_arity(e->op); i++)
		a[i] = kexpr_emit(g, e->arg[i], indent);
	t = g->ntmp++;
	buf_printf(b, "%s%s t%d = ", indent, T, t);
	switch (e->op) {
	case KOP_NEG: buf_printf(b, "-t%d", a[0]); break;
	case KOP_EXP: buf_printf(b, "%s(t%d)", f32 ? "expf" : "exp", a[0]); break;
	case KOP_LOG: buf_printf(b, "%s(t%d)", f32 ? "logf" : "log", a[0]); break;
	case KOP_SQRT: buf_printf(b, "%s(t%d)", f32 ? "sqrtf" : "sqrt", a[0]); break;
	case KOP_ABS:
		if (integer)
			buf_printf(b, "t%d < 0 ? -t%d : t%d", a[0], a[0], a[0]);
		else
			buf_printf(b, "%s(t%d)", f32 ? "fabsf" : "fabs", a[0]);
		break;
	case KOP_TANH: buf_printf(b, "%s(t%d)", f32 ? "tanhf" : "tanh", a[0]); break;
	case KOP_SIGMOID: buf_printf(b, "1 / (1 + %s(-t%d))", f32 ? "expf" : "exp", a[0]); break;
	case KOP_RELU: buf_printf(b, "t%d > 0 ? t%d : 0", a[0], a[0]); break;
	case KOP_ADD: buf_printf(b, "t%d + t%d", a[0], a[1]); break;
	case KOP_SUB: buf_printf(b, "t%d - t%d", a[0], a[1]); break;
	case KOP_MUL: buf_printf(b, "t%d * t%d", a[0], a[1]); break;
	case KOP_DIV:
		if (integer)    /* truncates toward zero; x / 0 is 0, as numpy (which warns) */
			buf_printf(b, "trt_idiv%s(t%d, t%d)", g->dt == DT_I32 ? "32" : "64", a[0], a[1]);
		else
			buf_printf(b, "t%d / t%d", a[0], a[1]);
		break;
	case KOP_POW:
		if (e->arg[1]->kind == KX_CONST && e->arg[1]->val == 2)
			buf_printf(b, "t%d * t%d", a[0], a[0]);
		else if (e->arg[1]->kind == KX_CONST && e->arg[1]->val == 1)
			buf_printf(b, "t%d", a[0]);
		else
			buf_printf(b, "%s(t%d, t%d)", f32 ? "powf" : "pow", a[0], a[1]);
		break;
	case KOP_LT: buf_printf(b, "t%d < t%d", a[0], a[1]); break;
	case KOP_LE: buf_printf(b, "t%d <= t%d", a[0], a[1]); break;
	case KOP_GT: buf_printf(b, "t%d > t%d", a[0], a[1]); break;
	case KOP_GE: buf_printf(b, "t%d >= t%d", a[0], a[1]); break;
	case KOP_EQ: buf_printf(b, "t%d == t%d", a[0], a[1]); break;
	case KOP_NE: buf_printf(b, "t%d != t%d", a[0], a[1]); break;
	case KOP_WHERE: buf_printf(b, "t%d != 0 ? t%d : t%d", a[0], a[1], a[2]); break;
	case KOP_STOP: buf_printf(b, "t%d", a[0]); break;
	}
	buf_puts(b, ";\n");
	return t;
}

/* Row-major strides of a view: s<name>[c] = product of n[c+1..]. */
static void emit_strides(Buf *b, const char *name, const char *view, int rank)
{
	if (rank == 0)
		return;
	buf_printf(b, "\tint64_t s%s[%d];\n\ts%s[%d] = 1;\n", name, rank, name, rank - 1);
	for (int c = rank - 2; c >= 0; c--)
		buf_printf(b, "\ts%s[%d] = s%s[%d] * %s.n[%d];\n", name, c, name, c + 1, view, c + 1);
}

/* The extent of label l: the first chunk dim carrying it. */
static void label_extent(Buf *b, const Kernel *k, int l)
{
	for (int i = 0; i < k->nin; i++)
		for (int c = 0; c < k->nindim[i]; c++)
			if (k->inlab[i][c] == l) {
				buf_printf(b, "in[%d].n[%d]", i, c);
				return;
			}
	tr_bug("label %d in no input", l);
}

/* The offset of an element of input/output `who` in terms of label loop vars. */
static void offset_expr(Buf *b, const char *sname, int n, const int *lab)
{
	if (n == 0) {
		buf_puts(b, "0");
		return;
	}
	for (int c = 0; c < n; c++)
		buf_printf(b, "%sl%d * s%s[%d]", c ? " + " : "", lab[c], sname, c);
}

/* The element of each input the expression reads (but input skip), as x<i>
 * of type T, at the loop labels' offsets. */
static void emit_loads(Buf *b, const Kernel *k, const char *T, int skip, const char *indent)
{
	for (int i = 0; i < k->nin; i++) {
		if (i == skip || !kx_uses(k->expr, i))
			continue;
		char sname[16];
		snprintf(sname, sizeof sname, "%d", i);
		buf_printf(b, "%sconst %s x%d = (%s)p%d[", indent, T, i, T, i);
		offset_expr(b, sname, k->nindim[i], k->inlab[i]);
		buf_puts(b, "];\n");
	}
}

/* ---- contractions: BLIS gemm on strided views (ir/gemm.c plans the calls) ---- */

static void emit_gemm_kernel(Emit *e, const Kernel *k, DType dt, const Contraction *c)
{
	Buf *b = e->b;
	const char *T = ctype(dt);
	static const char *oname[3] = {"a", "b", "c"};

	buf_printf(b, "\tconst %s *a = in[0].p, *b = in[1].p;\n\t%s *c = out->p;\n", T, T);
	emit_strides(b, "a", "in[0]", k->nindim[0]);
	emit_strides(b, "b", "in[1]", k->nindim[1]);
	emit_strides(b, "c", "(*out)", k->noutdim);
	/* each group's length, and its stride in each operand: its innermost
	 * label's */
	for (int i = 0; i < c->ngroup; i++) {
		const LabGroup *g = &c->g[i];
		buf_printf(b, "\tconst int64_t eg%d = ", i);
		for (int t = 0; t < g->n; t++) {
			buf_puts(b, t ? " * " : "");
			label_extent(b, k, g->lab[t]);
		}
		buf_puts(b, ";\n");
		for (int o = 0; o < 3; o++)
			if (g->pos[o] >= 0)
				buf_printf(b, "\tconst int64_t %sg%d = s%s[%d];\n", oname[o], i, oname[o], g->pos[o]);
	}
	int gm = c->use[ROLE_M], gn = c->use[ROLE_N], gk = c->use[ROLE_K];
	buf_printf(b, "\tconst int64_t m = %s, n = %s, k = eg%d;\n",
	           gm >= 0 ? xprintf("eg%d", gm) : "1", gn >= 0 ? xprintf("eg%d", gn) : "1", gk);
	buf_printf(b, "\tconst int64_t rsa = %s, csa = ag%d;\n", gm >= 0 ? xprintf("ag%d", gm) : "1", gk);
	buf_printf(b, "\tconst int64_t rsb = bg%d, csb = %s;\n", gk, gn >= 0 ? xprintf("bg%d", gn) : "1");
	buf_printf(b, "\tconst int64_t rsc = %s, csc = %s;\n",
	           gm >= 0 ? xprintf("cg%d", gm) : "1", gn >= 0 ? xprintf("cg%d", gn) : "1");

	/* loops over the other groups: independent products outside, extra k
	 * groups (accumulating into one C) inside */
	int depth = 1;
	bool extra_k = false;
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < c->ngroup; i++) {
			if (i == gm || i == gn || i == gk || (c->g[i].role == ROLE_K) != (pass == 1))
				continue;
			extra_k |= pass == 1;
			buf_printf(b, "%.*sfor (int64_t ig%d = 0; ig%d < eg%d; ig%d++)\n", depth, "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t",
			           i, i, i, i);
			depth++;
		}
	buf_printf(b, "%.*strt_%sgemm(m, n, k, 1", depth, "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t", dt == DT_F64 ? "d" : "s");
	for (int o = 0; o < 3; o++) {
		buf_printf(b, ", %s", oname[o]);
		for (int i = 0; i < c->ngroup; i++)
			if (i != gm && i != gn && i != gk && c->g[i].pos[o] >= 0)
				buf_printf(b, " + ig%d * %sg%d", i, oname[o], i);
		if (o == 0)
			buf_puts(b, ", rsa, csa");
		else if (o == 1) {
			buf_puts(b, ", rsb, csb, acc");
			for (int i = 0; i < c->ngroup; i++)
				if (i != gk && c->g[i].role == ROLE_K)
					buf_printf(b, " || ig%d", i);
			buf_puts(b, " ? 1 : 0");
		} else
			buf_puts(b, ", rsc, csc);\n");
	}
	(void)extra_k;
}

/* ---- loop kernels ---- */

static void combine_expr(Buf *b, AggKind agg, const char *x, const char *y)
{
	switch (agg) {
	case AGG_ADD: buf_printf(b, "%s + %s", x, y); return;
	case AGG_MAX: buf_printf(b, "%s > %s ? %s : %s", y, x, y, x); return;
	case AGG_MIN: buf_printf(b, "%s < %s ? %s : %s", y, x, y, x); return;
	}
}

/* Elements of the output's innermost dim a reducing loop kernel computes
 * at once (see emit_loop_kernel). */
#define RED_TILE 128

/*
 * A loop nest: output labels outside, the output's last (contiguous) one
 * innermost, so the C compiler vectorises the element expression along it.
 * In- and output chunks never overlap: the pointers are restrict.
 *
 * A reduction would put its reduced labels innermost, and a sum over them
 * in one scalar does not vectorise without reordering the additions.  So a
 * reducing kernel takes the output's last label in tiles of RED_TILE: per
 * tile, an array of accumulators, the reduced loops, and inside them the
 * tile's loop, which vectorises.  Every output element still adds its terms
 * in the same order as the scalar loop would: the result is bit for bit the
 * same, only faster.  (A kernel reducing to one scalar stays scalar.)  Sums
 * of f32 accumulate in double.
 *
 * A loop kernel computes in its output's type; inputs of another type (a
 * conversion, f64(x)) are read as what they are and converted on load.
 */
static void emit_loop_kernel(Emit *e, const Kernel *k, DType dt, const DType *indt)
{
	Buf *b = e->b;
	const char *T = ctype(dt);
	bool reduced[2 * MAXDIM] = {0};
	int depth = 0;
	char indent[64];

	for (int l = 0; l < k->nlab; l++) {
		reduced[l] = true;
		for (int c = 0; c < k->noutdim; c++)
			if (k->outlab[c] == l)
				reduced[l] = false;
	}
	for (int i = 0; i < k->nin; i++)
		buf_printf(b, "\tconst %s *restrict p%d = in[%d].p;\n", ctype(indt[i]), i, i);
	buf_printf(b, "\t%s *restrict po = out->p;\n", T);
	emit_strides(b, "0", "in[0]", k->nindim[0]);
	if (k->nin > 1)
		emit_strides(b, "1", "in[1]", k->nindim[1]);
	emit_strides(b, "o", "(*out)", k->noutdim);
	bool tiled = k->reduces && k->noutdim > 0;
	int jl = k->noutdim > 0 ? k->outlab[k->noutdim - 1] : -1;   /* the innermost output label */

#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	for (int c = 0; c < k->noutdim - (tiled ? 1 : 0); c++) {
		int l = k->outlab[c];
		/* chunks do not overlap: no need to check for it at run time */
		if (c == k->noutdim - 1 && !k->reduces)
			buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), l, l);
		label_extent(b, k, l);
		buf_printf(b, "; l%d++) {\n", l);
		depth++;
	}
	/* a sum of f32 adds in double: summed in f32, one element after the
	 * other, a loss over 20M elements came out 5e-3 off (numpy sums
	 * pairwise, PyTorch in cascades: 1e-7) */
	const char *A = k->reduces && k->red == AGG_ADD && dt == DT_F32 ? "double" : T;
	const char *acc_init = NULL;
	if (k->reduces) {
		Buf init = {0};
		num_literal(&init, k->red == AGG_ADD ? 0 : k->red == AGG_MAX ? -INFINITY : INFINITY, dt);
		acc_init = xprintf("%s", init.s);
		buf_free(&init);
	}
	if (tiled) {
		buf_printf(b, "%sconst int64_t nj = ", INDENT());
		label_extent(b, k, jl);
		buf_puts(b, ";\n");
		buf_printf(b, "%sfor (int64_t jt = 0; jt < nj; jt += %d) {\n", INDENT(), RED_TILE);
		depth++;
		buf_printf(b, "%sconst int64_t nt = nj - jt < %d ? nj - jt : %d;\n", INDENT(), RED_TILE, RED_TILE);
		buf_printf(b, "%s%s r[%d];\n", INDENT(), A, RED_TILE);
		buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++)\n", INDENT());
		buf_printf(b, "%s\tr[jj] = %s;\n", INDENT(), acc_init);
	} else if (k->reduces) {
		buf_printf(b, "%s%s r = %s;\n", INDENT(), A, acc_init);
	}
	if (k->reduces)
		for (int l = 0; l < k->nlab; l++) {
			if (!reduced[l])
				continue;
			buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), l, l);
			label_extent(b, k, l);
			buf_printf(b, "; l%d++) {\n", l);
			depth++;
		}
	if (tiled) {
		buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++) {\n", INDENT());
		depth++;
		buf_printf(b, "%sconst int64_t l%d = jt + jj;\n", INDENT(), jl);
	}
	emit_loads(b, k, T, -1, INDENT());
	KGen g = {b, k, dt, 0};
	int v = kexpr_emit(&g, k->expr, INDENT());
	char tv[16];
	snprintf(tv, sizeof tv, "t%d", v);
	if (tiled) {
		buf_printf(b, "%sr[jj] = ", INDENT());
		combine_expr(b, k->red, "r[jj]", tv);
		buf_puts(b, ";\n");
		depth--;
		buf_printf(b, "%s}\n", INDENT());
		for (int l = 0; l < k->nlab; l++)
			if (reduced[l]) {
				depth--;
				buf_printf(b, "%s}\n", INDENT());
			}
		buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++) {\n", INDENT());
		depth++;
		buf_printf(b, "%sconst int64_t l%d = jt + jj;\n", INDENT(), jl);
		v = -1;
	} else if (k->reduces) {
		buf_printf(b, "%sr = ", INDENT());
		combine_expr(b, k->red, "r", tv);
		buf_puts(b, ";\n");
		for (int l = 0; l < k->nlab; l++)
			if (reduced[l]) {
				depth--;
				buf_printf(b, "%s}\n", INDENT());
			}
		v = -1;
	}
	buf_printf(b, "%s%s *o = &po[", INDENT(), T);
	offset_expr(b, "o", k->noutdim, k->outlab);
	buf_puts(b, "];\n");
	const char *val = v >= 0 ? tv : tiled ? "r[jj]" : "r";
	buf_printf(b, "%s*o = acc ? ", INDENT());
	combine_expr(b, k->red, "*o", val);
	buf_printf(b, " : %s;\n", val);
	while (depth > 0) {
		depth--;
		buf_printf(b, "%s}\n", INDENT());
	}
#undef INDENT
}

/* ---- convolutions: a direct loop ---- */

/* Lanes of a convolution's dot product (partial sums that vectorise). */
#define CONV_LANES 16

/*
 * A convolution's register tile: CONV_TILE_O kernels (values of an output
 * label the weights carry and in1 does not) times CONV_TILE_V vectors of
 * CONV_VEC_BYTES along the output row, 12 vector registers held across
 * every summed label; each step loads CONV_TILE_V vectors of in1 and
 * CONV_TILE_O weights for CONV_TILE_O * CONV_TILE_V multiply-adds, where
 * a row added into the output row loads and stores the output once per
 * multiply-add.
 */
#define CONV_TILE_O 4
#define CONV_TILE_V 3
#define CONV_VEC_BYTES 32

/* n tabs (up to 31) */
static const char *tabs(int n)
{
	static const char t[] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
	return t + sizeof t - 1 - n;
}

/* The window of kernel k that reads in1's chunk dim ch, or -1. */
static int conv_win(const Kernel *k, int ch)
{
	for (int w = 0; w < k->nwin; w++)
		if (k->win[w].dim == ch)
			return w;
	return -1;
}

/* in1's element at each window dim, skipping the step where one other than
 * J's falls outside in1's chunk, and x0: where in1's row for J = 0 is. */
static void conv_windows(Buf *b, const Kernel *k, int J, bool withj, int depth)
{
	int cj = k->nindim[1] - 1;
	for (int c = 0; c < k->nindim[1]; c++) {
		int w = conv_win(k, c);
		if (w < 0 || (c == cj && !withj))
			continue;
		int own = k->inlab[1][c], lab = k->win[w].lab;
		buf_printf(b, "%sconst int64_t w%d = ", tabs(depth), c);
		if (own == J)
			buf_printf(b, "g%d", own);
		else
			buf_printf(b, "l%d + g%d", own, own);
		buf_printf(b, " + (%" PRId64 ") * (l%d + g%d) + (%" PRId64 ") - in[1].off[%d];\n", k->win[w].coef, lab, lab,
		           k->win[w].shift, c);
		if (own != J)
			buf_printf(b, "%sif (w%d < 0 || w%d >= in[1].n[%d])\n%s\tcontinue;\n", tabs(depth), c, c, c, tabs(depth));
	}
	if (withj)
		buf_printf(b, "%sconst int64_t x0 = %s;\n", tabs(depth), conv_win(k, cj) >= 0 ? xprintf("w%d", cj) : "0");
}

/* The offset terms " + l<lab> * <s>[c]" of a chunk's dims c (labels lab[c],
 * n of them) but skip whose label is in take (every label when take is
 * NULL), as the rows below and the tiles' tables sum them. */
static void conv_terms(Buf *b, const int *lab, int n, const char *s, int skip, const bool *take)
{
	for (int c = 0; c < n; c++)
		if (c != skip && (!take || take[lab[c]]))
			buf_printf(b, " + l%d * %s[%d]", lab[c], s, c);
}

/* in1's offset terms but its last dim's: a window dim's at its element
 * w<c>, a plain dim's at its label. */
static void conv_in1_terms(Buf *b, const Kernel *k)
{
	for (int c = 0; c < k->nindim[1] - 1; c++) {
		if (conv_win(k, c) >= 0)
			buf_printf(b, " + w%d * s1[%d]", c, c);
		else
			buf_printf(b, " + l%d * s1[%d]", k->inlab[1][c], c);
	}
}

/* The rows at J = 0 of in1 (xr), in0 (wr) and the output (orow). */
static void conv_in1_row(Buf *b, const Kernel *k, const char *T, int depth)
{
	buf_printf(b, "%sconst %s *xr = p1 + x0", tabs(depth), T);
	conv_in1_terms(b, k);
	buf_puts(b, ";\n");
}

static void conv_in0_row(Buf *b, const Kernel *k, const char *T, int jw, int depth)
{
	buf_printf(b, "%sconst %s *wr = p0", tabs(depth), T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", jw, NULL);
	buf_puts(b, ";\n");
}

static void conv_out_row(Buf *b, const Kernel *k, const char *T, int jout, int depth)
{
	buf_printf(b, "%s%s *orow = po", tabs(depth), T);
	conv_terms(b, k->outlab, k->noutdim, "so", jout, NULL);
	buf_puts(b, ";\n");
}


/*
 * One register tile at depth (inside the loop over jt, the tile's first
 * J): nob kernels from l<O> on (O's dims oo in the output, o0 in in0; one
 * when there is no such label) times nv vectors of vl elements,
 * summed over the nq window offsets of the table xo (in1), wo (in0).
 * rem: the last vector, whose lanes before thv a tile has added already.
 */
static void conv_tile(Buf *b, const Kernel *k, const char *T, int oo, int o0, int nob, int nv, int vl,
                      bool rem, const bool *isout, int depth)
{
	const char *t = tabs(depth);
	buf_printf(b, "%s%s *orow = po + jt", t, T);
	conv_terms(b, k->outlab, k->noutdim, "so", k->noutdim - 1, NULL);
	buf_printf(b, ";\n%sconst %s *wb = p0", t, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, isout);
	buf_puts(b, ";\n");
	for (int i = 0; i < nob; i++)
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%scvec a%d_%d = {0};\n", t, i, v);
	buf_printf(b, "%sif (%s) {\n", t, rem ? "0" : "acc");
	for (int i = 0; i < nob; i++)
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%s\tmemcpy(&a%d_%d, orow%s + %d, sizeof(cvec));\n", t, i, v,
			           i ? xprintf(" + %d * so[%d]", i, oo) : "", v * vl);
	buf_printf(b, "%s}\n", t);
	buf_printf(b, "%sfor (int64_t q = 0; q < nq; q++) {\n", t);
	buf_printf(b, "%s\tconst %s *xr = p1 + xo[q] + jt, *wr = wb + wo[q];\n", t, T);
	for (int v = 0; v < nv; v++)
		buf_printf(b, "%s\tcvec xv%d;\n%s\tmemcpy(&xv%d, xr + %d, sizeof(cvec));\n", t, v, t, v, v * vl);
	for (int i = 0; i < nob; i++) {
		buf_printf(b, "%s\t{\n%s\t\tconst %s s = wr[%s];\n%s\t\tconst cvec w = {s", t, t, T,
		           i ? xprintf("%d * s0[%d]", i, o0) : "0", t);
		for (int q = 1; q < vl; q++)
			buf_puts(b, ", s");
		buf_puts(b, "};\n");
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%s\t\ta%d_%d += w * xv%d;\n", t, i, v, v);
		buf_printf(b, "%s\t}\n", t);
	}
	buf_printf(b, "%s}\n", t);
	for (int i = 0; i < nob; i++) {
		const char *orow = i ? xprintf("orow + %d * so[%d]", i, oo) : "orow";
		if (rem) {
			/* only the lanes from thv on: the ones before are a tile's */
			buf_printf(b, "%s{\n%s\t%s lane[%d];\n%s\tmemcpy(lane, &a%d_0, sizeof lane);\n", t, t, T, vl, t, i);
			buf_printf(b, "%s\tfor (int64_t j = thv - jt; j < %d; j++)\n%s\t\t(%s)[j] += lane[j];\n%s}\n", t, vl,
			           t, orow, t);
			continue;
		}
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%smemcpy(%s + %d, &a%d_%d, sizeof(cvec));\n", t, orow, v * vl, i, v);
	}
}

/* Open a loop over label l at *depth. */
static void conv_loop(Buf *b, int l, int *depth)
{
	buf_printf(b, "%sfor (int64_t l%d = 0; l%d < n%d; l%d++) {\n", tabs(*depth), l, l, l, l);
	(*depth)++;
}

/* Close loops down to depth to. */
static void conv_close(Buf *b, int *depth, int to)
{
	while (*depth > to)
		buf_printf(b, "%s}\n", tabs(--*depth));
}

/* What a convolution's kernel knows of its labels. */
typedef struct Conv {
	const Kernel *k;
	const char *T;
	int J, cj;                      /* the innermost label, in1's dim of it */
	int jout, jw;                   /* J's dim in the output, in0, or -1 */
	bool isout[2 * MAXDIM];         /* the output's labels */
	bool summed[2 * MAXDIM];        /* the labels summed over, but J */
	bool by1[2 * MAXDIM];           /* the labels in1 is read by */
} Conv;

/*
 * The window offsets' table of a tiled kernel: the loops over the output's
 * labels in1 is read by (but skip) opened at *depth, and inside them, for
 * each step of the summed labels but J whose windows fall inside in1, its
 * offset in in1 (xo; with withj, J's window's x0 included, and in xs too)
 * and in in0 (wo); nq of them.
 */
static void conv_table(Buf *b, const Conv *cv, int skip, bool withj, int *depth)
{
	const Kernel *k = cv->k;
	buf_puts(b, "\tint64_t nqmax = 1;\n");
	for (int l = 0; l < k->nlab; l++)
		if (cv->summed[l])
			buf_printf(b, "\tnqmax *= n%d;\n", l);
	buf_puts(b, "\tint64_t *xo = trt_scratch(3 * sizeof(int64_t) * (size_t)nqmax), *wo = xo + nqmax, *xs = wo + nqmax;\n");
	buf_puts(b, "\t(void)xs;\n");
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && cv->by1[l] && l != skip)
			conv_loop(b, l, depth);
	int d0 = *depth;
	buf_printf(b, "%sint64_t nq = 0;\n", tabs(*depth));
	for (int l = 0; l < k->nlab; l++)
		if (cv->summed[l])
			conv_loop(b, l, depth);
	conv_windows(b, k, cv->J, withj, *depth);
	buf_printf(b, "%sxo[nq] = %s", tabs(*depth), withj ? "x0" : "0");
	conv_in1_terms(b, k);
	buf_printf(b, ";\n%swo[nq] = 0", tabs(*depth));
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->summed);
	buf_puts(b, ";\n");
	if (withj)
		buf_printf(b, "%sxs[nq] = x0;\n", tabs(*depth));
	buf_printf(b, "%snq++;\n", tabs(*depth));
	conv_close(b, depth, d0);
}

/*
 * The register-tiled kernel (see emit_conv_kernel).  For each value of the
 * output's labels in1 is read by, a table lists the steps of the summed
 * labels whose windows fall inside in1: in1's offset (xo, J = 0), in0's
 * (wo) and where in1's row starts (xs).  Over J's [tlo, tie) every window
 * offset reads in1 inside its chunk: tiles of CONV_TILE_V vectors cover
 * [tlo, thi), tiles of one vector [thi, thv), and a last vector ending at
 * tie adds its lanes from thv on (rem).  What is left at the edges is a
 * row of in1 times a weight added into the output's row, its range
 * clipped to where in1 is read inside, per table entry.
 */
static void emit_conv_tiled(Buf *b, const Conv *cv, int O, int oo, int o0, DType dt)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj, depth = 1;
	int vl = CONV_VEC_BYTES / (dt == DT_F32 ? 4 : 8), tw = CONV_TILE_V * vl;

	buf_printf(b, "\ttypedef %s cvec __attribute__((vector_size(%d)));\n", T, CONV_VEC_BYTES);
	int w = conv_win(k, cj);
	if (w >= 0) {
		int lab = k->win[w].lab;
		buf_printf(b, "\tconst int64_t xa = g%d + (%" PRId64 ") * g%d + (%" PRId64 ") - in[1].off[%d];\n", J,
		           k->win[w].coef, lab, k->win[w].shift, cj);
		buf_printf(b, "\tconst int64_t xb = xa + (%" PRId64 ") * (n%d - 1);\n", k->win[w].coef, lab);
	} else {
		buf_puts(b, "\tconst int64_t xa = 0, xb = 0;\n");
	}
	buf_puts(b, "\tconst int64_t xmin = xa < xb ? xa : xb, xmax = xa < xb ? xb : xa;\n");
	buf_printf(b, "\tconst int64_t tlo = xmin >= 0 ? 0 : -xmin < n%d ? -xmin : n%d;\n", J, J);
	buf_printf(b, "\tint64_t tie = in[1].n[%d] - xmax < n%d ? in[1].n[%d] - xmax : n%d;\n", cj, J, cj, J);
	buf_puts(b, "\tif (tie < tlo)\n\t\ttie = tlo;\n");
	buf_printf(b, "\tconst int64_t thi = tlo + (tie - tlo) / %d * %d;\n", tw, tw);
	buf_printf(b, "\tconst int64_t thv = tlo + (tie - tlo) / %d * %d;\n", vl, vl);
	buf_printf(b, "\tconst int rem = tie > thv && tie - tlo >= %d;\n", vl);
	buf_puts(b, "\tconst int64_t tend = rem ? tie : thv;\n");
	/* the tiles write what they cover */
	buf_printf(b, "\tif (!acc && (tlo > 0 || thv < n%d))\n", J);
	buf_printf(b, "\t\tfor (int64_t r = 0; r < nout / n%d; r++) {\n", J);
	buf_printf(b, "\t\t\tmemset(po + r * n%d, 0, sizeof(%s) * (size_t)tlo);\n", J, T);
	buf_printf(b, "\t\t\tmemset(po + r * n%d + thv, 0, sizeof(%s) * (size_t)(n%d - thv));\n\t\t}\n", J, T, J);
	conv_table(b, cv, J, true, &depth);
	/* the tiles, then the edges, for each value of the other labels */
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && !cv->by1[l] && l != O)
			conv_loop(b, l, &depth);
	int d0 = depth;
	static const int nobs[] = {CONV_TILE_O, 2, 1};
	if (O >= 0)
		buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), O);
	for (int i = 0; i < 3; i++) {
		if (O < 0 && nobs[i] > 1)
			continue;
		if (O >= 0)
			buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d) {\n", tabs(depth++), O, nobs[i], O, O, nobs[i]);
		buf_printf(b, "%sfor (int64_t jt = tlo; jt < thi; jt += %d) {\n", tabs(depth), tw);
		conv_tile(b, k, T, oo, o0, nobs[i], CONV_TILE_V, vl, false, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		buf_printf(b, "%sfor (int64_t jt = thi; jt < thv; jt += %d) {\n", tabs(depth), vl);
		conv_tile(b, k, T, oo, o0, nobs[i], 1, vl, false, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		buf_printf(b, "%sif (rem) {\n%s\tconst int64_t jt = tie - %d;\n", tabs(depth), tabs(depth), vl);
		conv_tile(b, k, T, oo, o0, nobs[i], 1, vl, true, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		conv_close(b, &depth, d0);
	}
	buf_printf(b, "%sif (tlo > 0 || tend < n%d)\n", tabs(depth), J);
	if (O >= 0)
		buf_printf(b, "%s\tfor (int64_t l%d = 0; l%d < n%d; l%d++)\n", tabs(depth), O, O, O, O);
	buf_printf(b, "%s%sfor (int64_t q = 0; q < nq; q++) {\n", tabs(depth), O >= 0 ? "\t\t" : "\t");
	depth += O >= 0 ? 3 : 2;
	const char *t = tabs(depth);
	buf_printf(b, "%sconst int64_t lo = xs[q] < 0 ? -xs[q] : 0;\n", t);
	buf_printf(b, "%sconst int64_t hi = in[1].n[%d] - xs[q] < n%d ? in[1].n[%d] - xs[q] : n%d;\n", t, cj, J, cj, J);
	buf_printf(b, "%sconst int64_t e0 = hi < tlo ? hi : tlo, e1 = lo > tend ? lo : tend;\n", t);
	buf_printf(b, "%sconst %s *xr = p1 + xo[q];\n", t, T);
	buf_printf(b, "%sconst %s wv = p0[wo[q]", t, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->isout);
	buf_puts(b, "];\n");
	conv_out_row(b, k, T, k->noutdim - 1, depth);
	buf_printf(b, "%sfor (int64_t j = lo; j < e0; j++)\n%s\torow[j] += wv * xr[j];\n", t, t);
	buf_printf(b, "%sfor (int64_t j = e1; j < hi; j++)\n%s\torow[j] += wv * xr[j];\n", t, t);
	buf_printf(b, "%s}\n", tabs(depth - 1));
	depth = d0;
	conv_close(b, &depth, 1);
}

/* The kernel's gradient's tiles: CONV_DOT_P values of P by CONV_DOT_Q of
 * Q, 9 vectors of partial sums, 3 + 3 loads for 9 multiply-adds. */
#define CONV_DOT_P 3
#define CONV_DOT_Q 3

/*
 * One tile of the kernel's gradient at depth (see emit_conv_dot_tiled):
 * npb values of P from l<P> on (its dims pdo in the output, pd0 in in0;
 * npb is 1 when there is no such label) by nqb values of Q from l<Q> on
 * (its dim qo in the output; in1 is read at x0q + coef * Q + J along its
 * last dim).  [jlo, jhi) is where every Q of the tile reads in1 inside its
 * chunk, vectors over [jlo, jv); the rest of each Q's range is summed one
 * element at a time.
 */
static void conv_dot_tile(Buf *b, const Conv *cv, int pdo, int pd0, int npb, int Q, int qo, int nqb, int64_t coef,
                          int vl, int depth)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj;
	const char *t = tabs(depth), *t1 = tabs(depth + 1), *t2 = tabs(depth + 2);
	buf_printf(b, "%s{\n", t);
	buf_printf(b, "%sconst int64_t xq = x0q + (%" PRId64 ") * l%d, xz = xq + (%" PRId64 ");\n", t1, coef, Q,
	           coef * (nqb - 1));
	buf_printf(b, "%sconst int64_t xmn = xq < xz ? xq : xz, xmx = xq < xz ? xz : xq;\n", t1);
	buf_printf(b, "%sconst int64_t jlo = xmn >= 0 ? 0 : -xmn < n%d ? -xmn : n%d;\n", t1, J, J);
	buf_printf(b, "%sint64_t jhi = in[1].n[%d] - xmx < n%d ? in[1].n[%d] - xmx : n%d;\n", t1, cj, J, cj, J);
	buf_printf(b, "%sif (jhi < jlo)\n%s\tjhi = jlo;\n", t1, t1);
	buf_printf(b, "%sconst int64_t jv = jlo + (jhi - jlo) / %d * %d;\n", t1, vl, vl);
	buf_printf(b, "%sconst %s *gb = p0", t1, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->isout);
	buf_puts(b, ";\n");
	conv_out_row(b, k, T, -1, depth + 1);
	for (int i = 0; i < npb; i++)
		for (int q = 0; q < nqb; q++)
			buf_printf(b, "%scvec a%d_%d = {0};\n%s%s r%d_%d = 0;\n", t1, i, q, t1, T, i, q);
	buf_printf(b, "%sfor (int64_t q = 0; q < nq; q++) {\n", t1);
	buf_printf(b, "%sconst %s *gr = gb + wo[q], *xr = p1 + xo[q] + xq;\n", t2, T);
	buf_printf(b, "%sfor (int64_t j = jlo; j < jv; j += %d) {\n", t2, vl);
	for (int q = 0; q < nqb; q++)
		buf_printf(b, "%s\tcvec x%d;\n%s\tmemcpy(&x%d, xr + (%" PRId64 ") + j, sizeof(cvec));\n", t2, q, t2, q,
		           coef * q);
	for (int i = 0; i < npb; i++) {
		buf_printf(b, "%s\tcvec g%d;\n%s\tmemcpy(&g%d, gr%s + j, sizeof(cvec));\n", t2, i, t2, i,
		           i ? xprintf(" + %d * s0[%d]", i, pd0) : "");
		for (int q = 0; q < nqb; q++)
			buf_printf(b, "%s\ta%d_%d += g%d * x%d;\n", t2, i, q, i, q);
	}
	buf_printf(b, "%s}\n", t2);
	for (int q = 0; q < nqb; q++) {
		buf_printf(b, "%s{\n", t2);
		buf_printf(b, "%s\tconst int64_t x1 = xq + (%" PRId64 ");\n", t2, coef * q);
		buf_printf(b, "%s\tconst int64_t lo = x1 < 0 ? -x1 : 0;\n", t2);
		buf_printf(b, "%s\tconst int64_t hi = in[1].n[%d] - x1 < n%d ? in[1].n[%d] - x1 : n%d;\n", t2, cj, J, cj,
		           J);
		buf_printf(b, "%s\tconst int64_t e0 = hi < jlo ? hi : jlo, e1 = lo > jv ? lo : jv;\n", t2);
		for (int r = 0; r < 2; r++) {
			buf_printf(b, "%s\tfor (int64_t j = %s; j < %s; j++) {\n", t2, r ? "e1" : "lo", r ? "hi" : "e0");
			buf_printf(b, "%s\t\tconst %s xv = xr[(%" PRId64 ") + j];\n", t2, T, coef * q);
			for (int i = 0; i < npb; i++)
				buf_printf(b, "%s\t\tr%d_%d += gr[%sj] * xv;\n", t2, i, q,
				           i ? xprintf("%d * s0[%d] + ", i, pd0) : "");
			buf_printf(b, "%s\t}\n", t2);
		}
		buf_printf(b, "%s}\n", t2);
	}
	buf_printf(b, "%s}\n", t1);
	for (int i = 0; i < npb; i++)
		for (int q = 0; q < nqb; q++) {
			buf_printf(b, "%s{\n%s\t%s lane[%d];\n%s\tmemcpy(lane, &a%d_%d, sizeof lane);\n", t1, t1, T, vl, t1, i,
			           q);
			buf_printf(b, "%s\tfor (int u = 0; u < %d; u++)\n%s\t\tr%d_%d += lane[u];\n", t1, vl, t1, i, q);
			buf_printf(b, "%s\torow[%s%s] += r%d_%d;\n%s}\n", t1, i ? xprintf("%d * so[%d]", i, pdo) : "0",
			           q ? xprintf(" + %d * so[%d]", q, qo) : "", i, q, t1);
		}
	buf_printf(b, "%s}\n", t);
}

/*
 * The kernel's gradient, register tiled (see emit_conv_kernel): J, the
 * label of in1's last dim, is summed and in0's last dim, and in1 is read
 * along it through a window whose other label Q is the output's and
 * nothing else's.  For each value of the output's labels in1 is read by
 * but Q, a table lists the steps of the other summed labels whose windows
 * fall inside in1 (conv_table: in1's offset but along J, xo, and in0's,
 * wo).  Then tiles of P (an output label of in0's that in1 is not read
 * by, if there is one) by Q sum their dot products over J and the table
 * (conv_dot_tile).
 */
static void emit_conv_dot_tiled(Buf *b, const Conv *cv, int P, int pdo, int pd0, int Q, int qo, DType dt)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj, depth = 1;
	int w = conv_win(k, cj), vl = CONV_VEC_BYTES / (dt == DT_F32 ? 4 : 8);
	int64_t coef = k->win[w].coef;

	buf_printf(b, "\tif (!acc)\n\t\tmemset(po, 0, sizeof(%s) * (size_t)nout);\n", T);
	buf_printf(b, "\ttypedef %s cvec __attribute__((vector_size(%d)));\n", T, CONV_VEC_BYTES);
	/* in1's element along J at Q = 0 and J = 0 */
	buf_printf(b, "\tconst int64_t x0q = g%d + (%" PRId64 ") * g%d + (%" PRId64 ") - in[1].off[%d];\n", J, coef, Q,
	           k->win[w].shift, cj);
	conv_table(b, cv, Q, false, &depth);
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && !cv->by1[l] && l != P)
			conv_loop(b, l, &depth);
	int d0 = depth;
	for (int ip = 0; ip < 2; ip++) {
		int npb = ip ? 1 : CONV_DOT_P;
		if (P < 0 && npb > 1)
			continue;
		if (P >= 0) {
			if (!ip)
				buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), P);
			buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d) {\n", tabs(depth), P, npb, P, P, npb);
			depth++;
		}
		buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), Q);
		buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d)\n", tabs(depth), Q, CONV_DOT_Q, Q, Q, CONV_DOT_Q);
		conv_dot_tile(b, cv, pdo, pd0, npb, Q, qo, CONV_DOT_Q, coef, vl, depth + 1);
		buf_printf(b, "%sfor (; l%d < n%d; l%d++)\n", tabs(depth), Q, Q, Q);
		conv_dot_tile(b, cv, pdo, pd0, npb, Q, qo, 1, coef, vl, depth + 1);
		conv_close(b, &depth, d0);
	}
	conv_close(b, &depth, 1);
}

/*
 * A convolution's kernel (IA_CONV): out (+)= the sum of in0 * in1 over the
 * labels the output lacks, in1 read through the kernel's windows: no
 * im2col copy.  Each label runs over the chunk of the first operand that
 * carries it as a plain dim (the output, in0, then in1 where no window
 * is); positions in the whole tensor are that chunk's offset plus the
 * loop index, and a window reads in1 at own + coef * lab + shift there,
 * zero (skipped) outside in1's chunk, which blocking makes the whole of
 * in1 along a window dim.
 *
 * The innermost loop is the label J of in1's last chunk dim, contiguous
 * in in1.  When J is the output's last dim and the weights (in0) do not
 * carry it (a convolution, or an input's gradient: the flipped kernel),
 * the output is made of register tiles (emit_conv_tiled, conv_tile): a
 * block of the output's rows for CONV_TILE_O kernels held in registers
 * across every summed label.  Otherwise, when J is still the output's,
 * the innermost loop adds a row of in1 times a weight into a row of the
 * output, its range clipped once per row to where in1 is read inside;
 * when it is not (the kernel's gradient), it is a dot product, summed in
 * CONV_LANES partial sums that vectorise.  bench/README.md "3D
 * convolution" measures it against im2col, gemm and PyTorch.
 */
static void emit_conv_kernel(Emit *e, const Kernel *k, DType dt)
{
	Buf *b = e->b;
	Conv cv = {.k = k, .T = ctype(dt), .J = k->inlab[1][k->nindim[1] - 1], .cj = k->nindim[1] - 1,
	           .jout = -1, .jw = -1};
	const char *T = cv.T;
	int J = cv.J, cj = cv.cj;
	int depth = 1, nsum = 0;

	buf_printf(b, "\tconst %s *restrict p0 = in[0].p;\n\tconst %s *restrict p1 = in[1].p;\n", T, T);
	buf_printf(b, "\t%s *restrict po = out->p;\n", T);
	emit_strides(b, "0", "in[0]", k->nindim[0]);
	emit_strides(b, "1", "in[1]", k->nindim[1]);
	emit_strides(b, "o", "(*out)", k->noutdim);
	buf_puts(b, "\tint64_t nout = 1;\n");
	for (int c = 0; c < k->noutdim; c++)
		buf_printf(b, "\tnout *= out->n[%d];\n", c);
	/* each label's range and offset in the whole tensor */
	for (int l = 0; l < k->nlab; l++) {
		const char *v = NULL;
		int pos = -1;
		for (int c = 0; c < k->noutdim && !v; c++)
			if (k->outlab[c] == l)
				v = "(*out)", pos = c, cv.isout[l] = true;
		for (int c = 0; c < k->nindim[0] && !v; c++)
			if (k->inlab[0][c] == l)
				v = "in[0]", pos = c;
		for (int c = 0; c < k->nindim[1] && !v; c++)
			if (k->inlab[1][c] == l && conv_win(k, c) < 0)
				v = "in[1]", pos = c;
		if (!v)
			tr_bug("convolution label %d on no plain dim", l);
		if (!cv.isout[l] && l != J)
			cv.summed[l] = true, nsum++;
		buf_printf(b, "\tconst int64_t n%d = %s.n[%d], g%d = %s.off[%d];\n", l, v, pos, l, v, pos);
		buf_printf(b, "\t(void)g%d;\n", l);
	}
	for (int c = 0; c < k->noutdim; c++)
		if (k->outlab[c] == J)
			cv.jout = c;
	for (int c = 0; c < k->nindim[0]; c++)
		if (k->inlab[0][c] == J)
			cv.jw = c;
	int jout = cv.jout, jw = cv.jw;
	for (int c = 0; c < k->nindim[1]; c++)
		cv.by1[k->inlab[1][c]] = true;
	for (int w = 0; w < k->nwin; w++)
		cv.by1[k->win[w].lab] = true;
	/* tiled: the tiles' kernels are an output label of in0's that in1 is
	 * not read by, if there is one */
	if (jout == k->noutdim - 1 && jw < 0 && nsum > 0 && (dt == DT_F32 || dt == DT_F64)) {
		int O = -1, oo = -1, o0 = -1;
		for (int c = 0; c < k->noutdim && O < 0; c++)
			for (int c0 = 0; c0 < k->nindim[0] && !cv.by1[k->outlab[c]]; c0++)
				if (k->inlab[0][c0] == k->outlab[c])
					O = k->outlab[c], oo = c, o0 = c0;
		emit_conv_tiled(b, &cv, O, oo, o0, dt);
		return;
	}
	/* the kernel's gradient tiled: Q, the other label of J's window, the
	 * output's and read nowhere else; P as O above */
	int wd = conv_win(k, cj), Q = wd >= 0 ? k->win[wd].lab : -1;
	bool dot = jout < 0 && jw == k->nindim[0] - 1 && Q >= 0 && cv.isout[Q] && (dt == DT_F32 || dt == DT_F64);
	for (int c = 0; dot && c < k->nindim[0]; c++)
		dot = k->inlab[0][c] != Q;
	for (int c = 0; dot && c < k->nindim[1]; c++)
		dot = k->inlab[1][c] != Q;
	for (int w = 0; dot && w < k->nwin; w++)
		dot = w == wd || k->win[w].lab != Q;
	if (dot) {
		int P = -1, pdo = -1, pd0 = -1, qo = -1;
		for (int c = 0; c < k->noutdim; c++)
			if (k->outlab[c] == Q)
				qo = c;
		for (int c = 0; c < k->noutdim && P < 0; c++)
			for (int c0 = 0; c0 < k->nindim[0] && !cv.by1[k->outlab[c]]; c0++)
				if (k->inlab[0][c0] == k->outlab[c])
					P = k->outlab[c], pdo = c, pd0 = c0;
		emit_conv_dot_tiled(b, &cv, P, pdo, pd0, Q, qo, dt);
		return;
	}
	buf_printf(b, "\tif (!acc)\n\t\tmemset(po, 0, sizeof(%s) * (size_t)nout);\n", T);
	/* the loops: the output's labels that in1 is read by (its rows stay
	 * in cache across the others: a convolution's kernels), the output's
	 * other labels, then the summed ones; J innermost */
	for (int pass = 0; pass < 3; pass++)
		for (int l = 0; l < k->nlab; l++) {
			int p = cv.isout[l] ? (cv.by1[l] ? 0 : 1) : 2;
			if (l != J && p == pass)
				conv_loop(b, l, &depth);
		}
	conv_windows(b, k, J, true, depth);
	buf_printf(b, "%sconst int64_t lo = x0 < 0 ? -x0 : 0;\n", tabs(depth));
	buf_printf(b, "%sconst int64_t hi = in[1].n[%d] - x0 < n%d ? in[1].n[%d] - x0 : n%d;\n", tabs(depth), cj, J, cj, J);
	conv_in1_row(b, k, T, depth);
	conv_in0_row(b, k, T, jw, depth);
	conv_out_row(b, k, T, jout, depth);
	const char *wj = jw < 0 ? "wr[0]" : jw == k->nindim[0] - 1 ? "wr[j]" : xprintf("wr[j * s0[%d]]", jw);
	if (jout >= 0) {
		const char *oj = jout == k->noutdim - 1 ? "orow[j]" : xprintf("orow[j * so[%d]]", jout);
		if (jw < 0) {
			buf_printf(b, "%sconst %s wv = wr[0];\n", tabs(depth), T);
			wj = "wv";
		}
		buf_printf(b, "%s#pragma GCC ivdep\n%sfor (int64_t j = lo; j < hi; j++)\n%s\t%s += %s * xr[j];\n",
		           tabs(depth), tabs(depth), tabs(depth), oj, wj);
	} else {
		const char *wq = jw < 0 ? "wr[0]" : jw == k->nindim[0] - 1 ? "wr[j + q]" : xprintf("wr[(j + q) * s0[%d]]", jw);
		buf_printf(b, "%s%s part[%d] = {0};\n", tabs(depth), T, CONV_LANES);
		buf_printf(b, "%sint64_t j = lo;\n", tabs(depth));
		buf_printf(b, "%sfor (; j + %d <= hi; j += %d)\n", tabs(depth), CONV_LANES, CONV_LANES);
		buf_printf(b, "%s\tfor (int q = 0; q < %d; q++)\n", tabs(depth), CONV_LANES);
		buf_printf(b, "%s\t\tpart[q] += %s * xr[j + q];\n", tabs(depth), wq);
		buf_printf(b, "%sfor (; j < hi; j++)\n%s\tpart[0] += %s * xr[j];\n", tabs(depth), tabs(depth), wj);
		buf_printf(b, "%s%s s = 0;\n%sfor (int q = 0; q < %d; q++)\n%s\ts += part[q];\n", tabs(depth), T, tabs(depth),
		           CONV_LANES, tabs(depth));
		buf_printf(b, "%sorow[0] += s;\n", tabs(depth));
	}
	conv_close(b, &depth, 1);
}

/* ---- kernels over sparse chunks ---- */

/*
 * A kernel with a sparse input runs over that input's stored elements when
 * it is zero wherever the input is (the *driver*): a sparse-dense product
 * (SpMM, either orientation), a sampled elementwise product, f(0) = 0 of a
 * sparse tensor.  The driver's rows are its first chunk dim's label, its
 * columns the others' (row-major); the labels no driver dim carries are
 * loops inside, the output's innermost last, so the C compiler vectorises
 * along it (SpMM's feature dim).  A dense output is zeroed first and
 * summed into (the driver is only chosen for sums); a sparse output has the
 * driver's pattern (kernel_sparse_pattern), so its element q is the
 * driver's q.  Any other sparse input is expanded to a dense chunk by the
 * wrapper (trt_view_dense), as are all of them when no input drives.
 */
static int sparse_driver(const Kernel *k, const RelType *const *inty, bool sparse_out)
{
	int pat = kernel_sparse_pattern(k, inty);
	if (sparse_out)
		return pat;
	for (int j = 0; j < k->nin; j++)
		if (inty[j]->sparse && kernel_hole_ok(k, j))
			return j;
	return -1;
}

/* A sampled contraction's inner sum as one dot product: the kernel
 * in0 * in1 summed over one label, both inputs dense of the output's type
 * and carrying it once.  Its position in each input, or false. */
static bool sampled_dot(const Kernel *k, DType dt, const DType *indt, const bool *byq, const bool *byfind, int lab,
                        int *pos)
{
	if (k->red != AGG_ADD || !kx_is_product(k->expr) || dtype_is_int(dt) || k->nin != 2)
		return false;
	for (int j = 0; j < 2; j++) {
		if (indt[j] != dt || byq[j] || byfind[j])
			return false;
		pos[j] = -1;
		for (int c = 0; c < k->nindim[j]; c++)
			if (k->inlab[j][c] == lab)
				pos[j] = pos[j] < 0 ? c : -2;
		if (pos[j] < 0)
			return false;
	}
	return true;
}

/* d: the driver (k's input, or k->nin for a sampled join's mask), its
 * chunk labels dlab[0..nd); byq[j]: input j is sparse with the driver's
 * pattern (a value per stored element, read at q); byfind[j]: input j is
 * sparse, 2-d, labelled as the driver, and read where the driver stores by
 * a search in its row (trt_csr_find). */
static void emit_driven_kernel(Emit *e, const Kernel *k, DType dt, const DType *indt, int d, int nd, const int *dlab,
                               const bool *byq, const bool *byfind, bool sparse_out)
{
	Buf *b = e->b;
	const char *T = ctype(dt);
	bool indriver[2 * MAXDIM] = {0}, inout[2 * MAXDIM] = {0};
	bool mask = d >= k->nin;        /* its values are not read */
	int depth = 0;
	char indent[64];

	for (int c = 0; c < nd; c++)
		indriver[dlab[c]] = true;
	for (int c = 0; c < k->noutdim; c++)
		inout[k->outlab[c]] = true;
	for (int j = 0; j < k->nin; j++)
		buf_printf(b, "\tconst %s *restrict p%d = in[%d].p;\n", ctype(indt[j]), j, j);
	buf_printf(b, "\t%s *restrict po = out->p;\n", T);
	buf_printf(b, "\tconst int64_t *restrict rp = in[%d].rowptr, *restrict ci = in[%d].col;\n", d, d);
	for (int j = 0; j < k->nin; j++)
		if (j != d && !byq[j] && !byfind[j]) {
			char name[16];
			snprintf(name, sizeof name, "%d", j);
			emit_strides(b, name, xprintf("in[%d]", j), k->nindim[j]);
		}
	if (!sparse_out) {
		emit_strides(b, "o", "(*out)", k->noutdim);
		buf_puts(b, "\tif (!acc) {\n\t\tint64_t no = 1;\n");
		for (int c = 0; c < k->noutdim; c++)
			buf_printf(b, "\t\tno *= out->n[%d];\n", c);
		buf_puts(b, "\t\tfor (int64_t q = 0; q < no; q++)\n\t\t\tpo[q] = 0;\n\t}\n");
	}
	/* the driver's column strides: its chunk dims after the first */
	if (nd > 2) {
		buf_printf(b, "\tint64_t cs[%d];\n\tcs[%d] = 1;\n", nd, nd - 1);
		for (int c = nd - 2; c >= 1; c--)
			buf_printf(b, "\tcs[%d] = cs[%d] * in[%d].n[%d];\n", c, c + 1, d, c + 1);
	}
#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	const char *row = nd > 0 ? xprintf("l%d", dlab[0]) : "r0";
	buf_printf(b, "%sfor (int64_t %s = 0; %s < %s; %s++) {\n", INDENT(), row, row,
	           nd > 0 ? xprintf("in[%d].n[0]", d) : "1", row);
	depth++;
	buf_printf(b, "%sfor (int64_t q = rp[%s]; q < rp[%s + 1]; q++) {\n", INDENT(), row, row);
	depth++;
	for (int c = 1; c < nd; c++) {
		buf_printf(b, "%sconst int64_t l%d = ci[q]", INDENT(), dlab[c]);
		if (nd > 2)
			buf_printf(b, " / cs[%d] %% in[%d].n[%d]", c, d, c);
		buf_puts(b, ";\n");
	}
	if (!mask)
		buf_printf(b, "%sconst %s x%d = (%s)p%d[q];\n", INDENT(), T, d, T, d);
	for (int j = 0; j < k->nin; j++) {
		if (j == d || !kx_uses(k->expr, j))
			continue;
		if (byq[j])
			buf_printf(b, "%sconst %s x%d = (%s)p%d[q];\n", INDENT(), T, j, T, j);
		if (byfind[j]) {
			buf_printf(b, "%sconst int64_t q%d = trt_csr_find(&in[%d], l%d, l%d);\n", INDENT(), j, j, dlab[0], dlab[1]);
			buf_printf(b, "%sconst %s x%d = q%d >= 0 ? (%s)p%d[q%d] : 0;\n", INDENT(), T, j, j, T, j, j);
		}
	}
	/* the other labels: the output's, in its order, then the reduced */
	int other[2 * MAXDIM], nother = 0;
	for (int c = 0; c < k->noutdim; c++)
		if (!indriver[k->outlab[c]])
			other[nother++] = k->outlab[c];
	int nout_other = nother;
	for (int l = 0; l < k->nlab; l++)
		if (!indriver[l] && !inout[l]) {
			bool used = false;
			for (int j = 0; j < k->nin; j++)
				for (int c = 0; c < k->nindim[j]; c++)
					used |= k->inlab[j][c] == l;
			if (used)
				other[nother++] = l;
		}
	bool red_inside = sparse_out && nother > nout_other;   /* sparse_out: no output label is other */
	int dpos[2];
	if (red_inside && nother == 1 && sampled_dot(k, dt, indt, byq, byfind, other[0], dpos)) {
		/* SDDMM: r = dot(U[i, :], V[j, :]) at the stored (i, j) */
		buf_printf(b, "%sconst %s r = trt_%sdot(in[0].n[%d], p0", INDENT(), T, dt == DT_F32 ? "s" : "d", dpos[0]);
		for (int j = 0; j < 2; j++) {
			if (j)
				buf_puts(b, ", p1");
			for (int c = 0; c < k->nindim[j]; c++)
				if (c != dpos[j])
					buf_printf(b, " + l%d * s%d[%d]", k->inlab[j][c], j, c);
			buf_printf(b, ", s%d[%d]", j, dpos[j]);
		}
		buf_puts(b, ");\n");
		buf_printf(b, "%spo[q] = acc ? po[q] + r : r;\n", INDENT());
		goto close;
	}
	if (red_inside) {
		Buf init = {0};
		num_literal(&init, k->red == AGG_ADD ? 0 : k->red == AGG_MAX ? -INFINITY : INFINITY, dt);
		buf_printf(b, "%s%s r = %s;\n", INDENT(), T, init.s);
		buf_free(&init);
	}
	for (int i = 0; i < nother; i++) {
		if (i == nother - 1 && !sparse_out)
			buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), other[i], other[i]);
		label_extent(b, k, other[i]);
		buf_printf(b, "; l%d++) {\n", other[i]);
		depth++;
	}
	for (int j = 0; j < k->nin; j++) {
		if (j == d || byq[j] || byfind[j] || !kx_uses(k->expr, j))
			continue;
		char sname[16];
		snprintf(sname, sizeof sname, "%d", j);
		buf_printf(b, "%sconst %s x%d = (%s)p%d[", INDENT(), T, j, T, j);
		offset_expr(b, sname, k->nindim[j], k->inlab[j]);
		buf_puts(b, "];\n");
	}
	KGen g = {b, k, dt, 0};
	int v = kexpr_emit(&g, k->expr, INDENT());
	char tv[16];
	snprintf(tv, sizeof tv, "t%d", v);
	if (!sparse_out) {
		buf_printf(b, "%spo[", INDENT());
		offset_expr(b, "o", k->noutdim, k->outlab);
		buf_printf(b, "] += %s;\n", tv);
	} else if (red_inside) {
		buf_printf(b, "%sr = ", INDENT());
		combine_expr(b, k->red, "r", tv);
		buf_puts(b, ";\n");
	}
	for (int i = 0; i < nother; i++) {
		depth--;
		buf_printf(b, "%s}\n", INDENT());
	}
	if (sparse_out) {
		const char *val = red_inside ? "r" : tv;
		buf_printf(b, "%spo[q] = acc ? ", INDENT());
		combine_expr(b, k->red, "po[q]", val);
		buf_printf(b, " : %s;\n", val);
	}
close:
	while (depth > 0) {
		depth--;
		buf_printf(b, "%s}\n", INDENT());
	}
#undef INDENT
}

/* Does IA op a store its chunks with the pattern of mask op m's (same key,
 * same positions)?  m itself, or a join sampled at m, or a join keeping
 * such a relation's pattern. */
static bool same_pattern(const IaPlan *p, int a, int m)
{
	const IaOp *op = &p->ops.v[a];
	if (a == m)
		return true;
	if (op->kind != IA_JOIN || !op->type.sparse)
		return false;
	if (op->u.join.mask.on)
		return op->u.join.mask.rel == m;
	const RelType *jin[2] = {&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type};
	int pat = kernel_sparse_pattern(op->u.join.kernel, jin);
	return pat >= 0 && same_pattern(p, pat ? op->u.join.right : op->u.join.left, m);
}

static void emit_kernel(Emit *e, int i, const Kernel *k)
{
	Buf *b = e->b;
	Buf desc = {0};
	kernel_print(&desc, k);
	const IaOp *op = &e->p->ops.v[i];
	int in[MAXIN];
	int n = ia_inputs(op, in);
	bool sampled = op->kind == IA_JOIN && op->u.join.mask.on;
	int nk = sampled ? 2 : n;      /* the kernel's own inputs */
	DType dt = op->type.dtype;
	DType indt[2] = {dt, dt};
	const RelType *inty[2] = {&op->type, &op->type};
	bool sparse = sampled, byq[2] = {false, false}, byfind[2] = {false, false};
	for (int j = 0; j < nk; j++) {
		indt[j] = e->p->ops.v[in[j]].type.dtype;
		inty[j] = &e->p->ops.v[in[j]].type;
		sparse |= inty[j]->sparse;
	}
	bool sparse_out = op->type.sparse;
	int d = sampled ? 2 : sparse ? sparse_driver(k, inty, sparse_out) : -1;
	if (sparse_out && d < 0)
		tr_bug("op %d: a kernel's sparse output without a pattern input", i);
	/* the driver's labels; the other sparse inputs of a sparse result: by
	 * the driver's element when they share its pattern, else looked up in
	 * their row (2-d, labelled as the driver), not expanded */
	int nd = sampled ? k->noutdim : d >= 0 ? k->nindim[d] : 0;
	const int *dlab = sampled ? k->outlab : d >= 0 ? k->inlab[d] : NULL;
	for (int j = 0; j < nk && sparse_out; j++) {
		if (j == d || !inty[j]->sparse)
			continue;
		byq[j] = same_pattern(e->p, in[j], in[d]) || same_pattern(e->p, in[d], in[j]);
		byfind[j] = !byq[j] && nd == 2 && k->nindim[j] == 2 && k->inlab[j][0] == dlab[0] &&
		            k->inlab[j][1] == dlab[1];
	}
	buf_printf(b, "/* %s%s */\nstatic void kernel" HOLE "%s(const TrtView *in, TrtView *out, int acc)\n{\n",
	           desc.s, sampled ? ", at the mask's elements" : "", sparse ? "_body" : "");
	buf_free(&desc);
	Contraction c;
	if (k->nwin)
		emit_conv_kernel(e, k, dt);
	else if (d >= 0)
		emit_driven_kernel(e, k, dt, indt, d, nd, dlab, byq, byfind, sparse_out);
	else if (!sparse && contraction_plan(k, inty, dt, &c))
		emit_gemm_kernel(e, k, dt, &c);
	else
		emit_loop_kernel(e, k, dt, indt);
	buf_puts(b, "}\n\n");
	if (!sparse)
		return;
	/* the wrapper: sparse inputs other than the driver expanded */
	buf_printf(b, "static void kernel" HOLE "(const TrtView *in, TrtView *out, int acc)\n{\n\tTrtView v[%d];\n"
	           "\tvoid *dense[2] = {NULL, NULL};\n", n);
	for (int j = 0; j < n; j++) {
		buf_printf(b, "\tv[%d] = in[%d];\n", j, j);
		if (j < nk && inty[j]->sparse && j != d && !byq[j] && !byfind[j])
			buf_printf(b, "\tdense[%d] = trt_view_dense(&v[%d], sizeof(%s));\n", j, j, ctype(indt[j]));
	}
	buf_puts(b, "\tkernel" HOLE "_body(v, out, acc);\n\tfree(dense[0]);\n\tfree(dense[1]);\n}\n\n");
}

static void emit_pred(Emit *e, int i, const KeyPred *p)
{
	(void)i;
	buf_puts(e->b, "static int pred" HOLE "(const int64_t *k)\n{\n\treturn ");
	for (int j = 0; j < p->neq; j++)
		buf_printf(e->b, "%sk[%d] == k[%d]", j ? " && " : "", p->eq[j][0], p->eq[j][1]);
	if (p->neq == 0)
		buf_puts(e->b, "1");
	buf_puts(e->b, ";\n}\n\n");
}

/* ---- two-phase schedules ---- */

/* Op i's schedule as per-rank tables: the join groups each rank runs, in
 * increasing order (trt_twophase works out the messages from them). */
static void emit_schedule(Emit *e, int i)
{
	Buf *b = e->b;
	const IaOp *op = &e->p->ops.v[i];
	const TpSched *ts = op->u.join.sched;
	static const char *aggs[] = {"TRT_AGG_ADD", "TRT_AGG_MAX", "TRT_AGG_MIN"};
	int64_t *n = xcalloc((size_t)ts->nranks + 1, sizeof *n);
	buf_printf(b, "/* a two-phase schedule, %" PRId64 " join groups on %d ranks (%s plan) */\n",
	           ts->njoin, ts->nranks, ts->variant);
	for (int r = 0; r < ts->nranks; r++) {
		buf_printf(b, "static const int64_t twophase" HOLE "_rank%d[] = {", r);
		for (int64_t j = 0; j < ts->njoin; j++) {
			if (ts->site[j] != r)
				continue;
			buf_printf(b, "%s%s%" PRId64, n[r] ? "," : "", n[r] % 16 ? " " : "\n\t", j);
			n[r]++;
		}
		buf_puts(b, n[r] ? "\n};\n" : "0};\n");
	}
	buf_puts(b, "static const int64_t *const twophase" HOLE "_jobs[] = {");
	for (int r = 0; r < ts->nranks; r++)
		buf_printf(b, "%stwophase" HOLE "_rank%d", r ? ", " : "", r);
	buf_puts(b, "};\nstatic const int64_t twophase" HOLE "_njobs[] = {");
	for (int r = 0; r < ts->nranks; r++)
		buf_printf(b, "%s%" PRId64, r ? ", " : "", n[r]);
	buf_printf(b, "};\nstatic const TrtTwoPhase twophase" HOLE " = {%d, %" PRId64 ", twophase" HOLE "_jobs, "
	           "twophase" HOLE "_njobs, %s};\n\n", ts->nranks, ts->njoin, aggs[op->u.join.kernel->red]);
	free(n);
}

/* ---- main ---- */

/* Whether op reads its input j whole: a relation with holes (absent
 * tuples, zero blocks) is completed first when op would not compute the
 * zeros they stand for (optimizer/sparse.c).  A sparse one that is stored
 * becomes dense instead (trt_densify). */
static bool needs_whole(const IaPlan *p, const IaOp *op, int j)
{
	int in[MAXIN];
	int n = ia_inputs(op, in);
	if (op->kind == IA_HALO)        /* cut into halos from dense chunks, every one */
		return j == 0 && (p->ops.v[in[0]].type.holes || p->ops.v[in[0]].type.sparse);
	if (j >= n || !p->ops.v[in[j]].type.holes)
		return false;
	switch (op->kind) {
	case IA_JOIN:
	case IA_TWOPHASE:
		return j < 2 && !kernel_hole_ok(op->u.join.kernel, j);   /* a mask is read as it is */
	case IA_CONV:
		return true;
	case IA_MAP:
		return op->u.map.kernel && !kernel_hole_ok(op->u.map.kernel, 0);
	case IA_AGG:
		return op->u.agg.agg != AGG_ADD;
	case IA_STORE:
		return !p->ops.v[in[j]].type.sparse;
	case IA_WRITE:
		return !p->ops.v[in[j]].type.sparse;   /* a sparse one is written from its elements */
	case IA_GATHER:
	case IA_LOOKUP:
	case IA_SCATTER:
		return true;            /* rows and index read whole */
	default:
		return false;
	}
}

/* The name op i reads its input j by: the completed copy when it needs one. */
static const char *whole(Emit *e, int i, int j)
{
	const IaOp *op = &e->p->ops.v[i];
	int in[MAXIN];
	ia_inputs(op, in);
	return needs_whole(e->p, op, j) ? xprintf("w%d_%d", i, j) : xprintf("r%d", in[j]);
}

/* ---- IST loops ---- */

/* In an IST body: the params it trains (those it loads), in tensor order. */
static bool ist_param(const IaPlan *p, int t)
{
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].kind == IA_LOAD && p->ops.v[i].u.init.tensor == t)
			return true;
	return false;
}

/* An IST body's params as trt_ist_next takes them. */
static void emit_ist_vars(Emit *e)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	int n = 0;
	buf_puts(b, "\tstatic const int ist_tensors[] = {");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM && ist_param(p, t))
			buf_printf(b, "%s%d", n++ ? ", " : "", e->tensor_index[t]);
	buf_printf(b, "%s};\n\tTrtRel **const ist_vars[] = {", n ? "" : "-1");
	n = 0;
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM && ist_param(p, t))
			buf_printf(b, "%s&var%d", n++ ? ", " : "", t);
	buf_printf(b, "%s};\n\tconst TrtParams istp = {%d, ist_tensors, ist_vars};\n", n ? "" : "NULL", n);
}

/* The loop op of an IST loop: in the program, the IST run standing for
 * the whole loop; in its body, the loop over this rank's share. */
static void emit_ist_loop(Emit *e, int i)
{
	const IaOp *op = &e->p->ops.v[i];
	if (e->local) {
		buf_printf(e->b, "\tfor (int64_t it%d; trt_ist_next(ist, &istp, &it%d); ) {\n", i, i);
		return;
	}
	/* the iterations of the blocks around it, outermost first, for the
	 * body's counters of them */
	Vec(int) open = {0};
	for (int j = 0; j < i; j++)
		if (e->p->ops.v[j].kind == IA_LOOP)
			vec_push(&open, j);
		else if (e->p->ops.v[j].kind == IA_ENDLOOP)
			open.n--;
	buf_printf(e->b, "\ttrt_ist(&ist%d, &params, run%d, ", e->ist_desc[op->u.loop.ist - 1],
	           e->ist_run[op->u.loop.ist - 1]);
	for (int k = 0; k < open.n; k++)
		buf_printf(e->b, "%sit%d", k ? ", " : "(const int64_t[]){", open.v[k]);
	buf_puts(e->b, open.n ? "});\n" : "NULL);\n");
	vec_free(&open);
}

static void emit_main(Emit *e);
static void emit_defs(Emit *e);

/* IST loop `loop`'s body (CgOptions.ist) under plan e->plan: its
 * definitions, its body function and the loop's descriptor; the numbers
 * of the last two in e->ist_run and e->ist_desc. */
static void emit_ist_body(Emit *e, int loop)
{
	const IaPlan *main_plan = e->p;
	const IaPlan *p = e->o->ist[e->plan * e->o->nist + loop];
	const IstLoop *l = &main_plan->tra->ist.v[loop];
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
	Buf *out = e->b, text = {0};
	e->b = &text;
	emit_main(e);
	e->b = out;
	e->ist_run[loop] = share(e, D_RUN, &text);

	/* the descriptor */
	e->b = &text;
	Buf *b = &text;
	int np = 0;
	buf_puts(b, "static const TrtIstParam istparams" HOLE "[] = {\n");
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		int t = op->u.init.tensor;
		if (op->kind != IA_INIT || !ist_param(p, t))
			continue;
		const Tensor *ten = &p->tra->tensors.v[t];
		buf_printf(b, "\t{%d, {", e->tensor_index[t]);
		for (int d = 0; d < ten->rank; d++) {
			int z = -1;
			for (int k = 0; k < l->nsplit && ten->dimsize[d]; k++)
				if (!strcmp(l->split[k], ten->dimsize[d]))
					z = k;
			buf_printf(b, "%s%d", d ? ", " : "", z);
		}
		static const char *kinds[] = {"TRT_ALL", "TRT_PART", "TRT_ANY"};
		buf_printf(b, "%s}, &type%d, {%s, %d, {", ten->rank ? "" : "0", e->def[i][D_TYPE], kinds[op->place.kind],
		           op->place.ndims);
		buf_ints(b, op->place.ndims, op->place.dims, ", ");
		buf_puts(b, op->place.ndims ? "}}},\n" : "0}}},\n");
		np++;
	}
	if (!np)
		buf_puts(b, "\t{-1, {0}, NULL, {TRT_ALL, 0, {0}}},\n");
	buf_printf(b, "};\nstatic const TrtIst ist" HOLE " = {%d, %d, %d, {", loop, main_plan->nranks, l->nsplit);
	for (int k = 0; k < l->nsplit; k++) {
		buf_puts(b, k ? ", " : "");
		c_string(b, l->split[k]);
	}
	buf_puts(b, "}, {");
	for (int k = 0; k < l->nsplit; k++)
		buf_printf(b, "%s%" PRId64, k ? ", " : "", l->extent[k]);
	buf_printf(b, "}, %" PRId64 ", %" PRId64 ", %d, istparams" HOLE "};\n\n", l->every, l->count, np);
	e->b = out;
	e->ist_desc[loop] = share(e, D_IST, &text);

	free(e->def);
	free(e->tensor_index);
	e->def = main_def;
	e->tensor_index = main_index;
	e->p = main_plan;
	e->local = false;
}

static void emit_main(Emit *e)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	int n = p->ops.n;

	/* where each relation is freed: after its last reader, or, when that
	 * reader is inside a loop the relation is not, after that loop ends
	 * (free_after_loop: past the closing brace).  Loads are borrowed from
	 * the param's variable and never freed here, nor a scatter's result
	 * made in place on one (IP_PARAM); a base a scatter updates in place
	 * becomes its result, freed as that. */
	IaLoops life;
	ia_loops(p, &life);
	InPlace *inplace = ia_in_place(p, &life);
	const int *loopof = life.loopof, *endof = life.endof;
	int *free_at = xcalloc(n + 1, sizeof *free_at), *free_after_loop = xcalloc(n + 1, sizeof *free_after_loop);
	bool *taken = xcalloc(n + 1, sizeof *taken);
	for (int i = 0; i < n; i++)
		if (inplace[i] == IP_OWNED || inplace[i] == IP_PARAM)
			taken[p->ops.v[i].u.gather.base] = true;
	for (int i = 0; i < n; i++) {
		free_at[i] = free_after_loop[i] = -1;
		const IaOp *op = &p->ops.v[i];
		if (!ia_has_result(op->kind) || op->kind == IA_LOAD || inplace[i] == IP_PARAM || taken[i])
			continue;
		int at = life.dead_after[i];
		if (p->ops.v[at].kind == IA_ENDLOOP)    /* only a loop's end, never a reader, is an ENDLOOP */
			free_after_loop[i] = at;
		else
			free_at[i] = at;
	}

	if (e->local)
		buf_puts(b, "static BODY int run" HOLE "(TrtIstRun *ist)\n{\n");
	else
		buf_puts(b, "static BODY int run" HOLE "(void)\n{\n");
	/* sparse inputs place their blocks first, and the memory check adds
	 * what their files hold beyond the plan's estimate */
	bool sparse_in = false;
	for (int i = 0; i < n && !e->local; i++)
		if (p->ops.v[i].kind == IA_READ && p->ops.v[i].type.sparse) {
			buf_printf(b, "\ttrt_balance(%d, &type%d, %.17g, ", e->tensor_index[p->ops.v[i].u.read.tensor],
			           e->def[i][D_TYPE], rel_density(&p->ops.v[i].type));
			end_call_at(b, &p->ops.v[i].place);
			sparse_in = true;
		}
	if (sparse_in)
		buf_puts(b, "\ttrt_mem_recheck();\n");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "\tTrtRel *var%d = NULL;\t/* param %s */\n", t, p->tra->tensors.v[t].name);
	/* the params, for checkpoints: their runtime table indices and variables */
	int nparams = 0;
	buf_puts(b, "\tstatic const int param_tensors[] = {");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "%s%d", nparams++ ? ", " : "", e->tensor_index[t]);
	buf_printf(b, "%s};\n\tTrtRel **const param_vars[] = {", nparams ? "" : "-1");
	nparams = 0;
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "%s&var%d", nparams++ ? ", " : "", t);
	buf_printf(b, "%s};\n\tconst TrtParams params = {%d, param_tensors, param_vars};\n\t(void)params;\n",
	           nparams ? "" : "NULL", nparams);
	if (e->local)
		emit_ist_vars(e);
	int nloop = 0;                  /* outermost repeat blocks so far */
	for (int i = 0; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		buf_printf(b, "\n\t/* #%d %s */\n", i, ia_op_name(op->kind));
		if (!e->local)
			buf_printf(b, "\ttrt_op_begin(%d);\n", i);
		int in[MAXIN];
		int nin = ia_inputs(op, in);
		for (int j = 0; j < nin; j++)
			if (needs_whole(p, op, j))
				buf_printf(b, "\tTrtRel *w%d_%d = %s(r%d);\n", i, j,
				           op->kind == IA_HALO && p->ops.v[in[j]].type.sparse ? "trt_densify" : "trt_complete", in[j]);
		switch (op->kind) {
		case IA_READ:
			buf_printf(b, "\tTrtRel *r%d = trt_read(%d, &type%d, ", i, e->tensor_index[op->u.read.tensor], e->def[i][D_TYPE]);
			end_call_at(b, &op->place);
			break;
		case IA_BCAST:
			buf_printf(b, "\tTrtRel *r%d = trt_bcast(r%d);\n", i, op->u.bcast.in);
			break;
		case IA_SHUFFLE:
			buf_printf(b, "\tTrtRel *r%d = trt_shuffle(r%d, ", i, op->u.shuffle.in);
			end_call_at(b, &op->place);
			break;
		case IA_JOIN:
		case IA_CONV:           /* a join whose kernel reads windows */
		case IA_TWOPHASE:       /* the same join, run by its schedule */
			buf_printf(b, "\tstatic const TrtJoin join%d = {%d, ", i, op->u.join.on.nmatch);
			int_list(b, op->u.join.on.nmatch, op->u.join.on.lkey);
			buf_puts(b, ", ");
			int_list(b, op->u.join.on.nmatch, op->u.join.on.rkey);
			buf_printf(b, ", %d, ", op->u.join.ngroup);
			int_list(b, op->u.join.ngroup > 0 ? op->u.join.ngroup : 0, op->u.join.group);
			if (op->u.join.mask.on) {
				buf_printf(b, ", 2, %d, ", op->u.join.mask.nkey);
				int_list(b, op->u.join.mask.nkey, op->u.join.mask.key);
			} else if (op->type.sparse) {
				const RelType *jin[2] = {&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type};
				buf_printf(b, ", %d", kernel_sparse_pattern(op->u.join.kernel, jin));
			}
			buf_puts(b, "};\n");
			buf_printf(b, "\tTrtRel *r%d = %s(%s, %s, ", i,
			           op->kind == IA_TWOPHASE ? "trt_twophase" : op->u.join.mask.on ? "trt_join_sampled" : "trt_join",
			           whole(e, i, 0), whole(e, i, 1));
			if (op->u.join.mask.on)
				buf_printf(b, "r%d, ", in[2]);
			buf_printf(b, "&join%d, kernel%d, &type%d, ", i, e->def[i][D_KERNEL], e->def[i][D_TYPE]);
			place_literal(b, &op->place);
			if (op->kind == IA_TWOPHASE)
				buf_printf(b, ", &twophase%d", e->def[i][D_SCHED]);
			buf_puts(b, ");\n");
			break;
		case IA_AGG: {
			static const char *aggs[] = {"TRT_AGG_ADD", "TRT_AGG_MAX", "TRT_AGG_MIN"};
			buf_printf(b, "\tstatic const int group%d[] = ", i);
			int g0 = 0;
			int_list(b, op->u.agg.ngroup ? op->u.agg.ngroup : 1, op->u.agg.ngroup ? op->u.agg.group : &g0);
			buf_printf(b, ";\n\tTrtRel *r%d = trt_agg(%s, %d, group%d, %s, &type%d, ", i, whole(e, i, 0),
			           op->u.agg.ngroup, i, aggs[op->u.agg.agg], e->def[i][D_TYPE]);
			end_call_at(b, &op->place);
			break;
		}
		case IA_MAP: {
			buf_printf(b, "\tstatic const int keymap%d[] = ", i);
			int k0 = 0;
			int_list(b, op->u.map.nkey ? op->u.map.nkey : 1, op->u.map.nkey ? op->u.map.keymap : &k0);
			buf_printf(b, ";\n\tTrtRel *r%d = trt_map(%s, %d, keymap%d, ", i, whole(e, i, 0), op->u.map.nkey, i);
			if (op->u.map.kernel)
				buf_printf(b, "kernel%d", e->def[i][D_KERNEL]);
			else
				buf_puts(b, "NULL");
			buf_printf(b, ", &type%d, ", e->def[i][D_TYPE]);
			end_call_at(b, &op->place);
			break;
		}
		case IA_FILTER:
			buf_printf(b, "\tTrtRel *r%d = trt_filter(r%d, pred%d, ", i, op->u.filter.in, e->def[i][D_PRED]);
			end_call_at(b, &op->place);
			break;
		case IA_WRITE:
			buf_printf(b, "\ttrt_write(%d, %s);\n", e->output_index[op->u.write.tensor], whole(e, i, 0));
			break;
		case IA_INIT: {
			const Tensor *ten = &p->tra->tensors.v[op->u.init.tensor];
			if (e->local) {         /* an IST body's params come from trt_ist_next */
				buf_printf(b, "\tTrtRel *r%d = NULL;\n", i);
				break;
			}
			static const char *kinds[] = {"?", "TRT_INIT_ZEROS", "TRT_INIT_ONES", "TRT_INIT_UNIFORM",
			                              "TRT_INIT_NORMAL", "?"};
			if (ten->init == INIT_FILE)
				buf_printf(b, "\tTrtRel *r%d = trt_read(%d, &type%d, ", i, e->tensor_index[op->u.init.tensor],
				           e->def[i][D_TYPE]);
			else
				buf_printf(b, "\tTrtRel *r%d = trt_init_param(%d, &type%d, ", i, e->tensor_index[op->u.init.tensor],
				           e->def[i][D_TYPE]);
			place_literal(b, &op->place);
			if (ten->init != INIT_FILE)
				buf_printf(b, ", %s, %.17g, %.17g", kinds[ten->init], ten->init_a, ten->init_b);
			buf_puts(b, ");\n");
			break;
		}
		case IA_RANGE:
			buf_printf(b, "\tTrtRel *r%d = trt_range(&type%d, ", i, e->def[i][D_TYPE]);
			end_call_at(b, &op->place);
			break;
		case IA_GATHER:
		case IA_LOOKUP:
		case IA_SCATTER:
			buf_printf(b, "\tTrtRel *r%d = %s(%s, %s, ", i, op->kind == IA_SCATTER ? "trt_scatter" : "trt_gather",
			           whole(e, i, 0), whole(e, i, 1));
			if (op->kind == IA_SCATTER)     /* its base, whether it is updated in place, the rows' scale */
				buf_printf(b, "%s, %d, %.17g, ", op->u.gather.base >= 0 ? whole(e, i, 2) : "NULL",
				           inplace[i] == IP_OWNED || inplace[i] == IP_PARAM, op->u.gather.scale);
			buf_printf(b, "%d, &type%d, ", op->u.gather.dim, e->def[i][D_TYPE]);
			place_literal(b, &op->place);
			buf_puts(b, ", ");
			c_string(b, op->u.gather.itensor >= 0 ? p->tra->tensors.v[op->u.gather.itensor].name : "the index");
			buf_puts(b, ", ");
			c_string(b, op->u.gather.tensor >= 0 ? p->tra->tensors.v[op->u.gather.tensor].name : "the table");
			buf_puts(b, ");\n");
			break;
		case IA_COUNTER: {
			/* the loop variable of the enclosing repeat block at that depth;
			 * in an IST body, the blocks around the IST loop are trt_ist's */
			if (e->local && op->u.counter.depth < p->tra->ist.v[e->ist_loop].depth) {
				buf_printf(b, "\tTrtRel *r%d = trt_counter(&type%d, trt_ist_counter(ist, %d));\n", i,
				           e->def[i][D_TYPE], op->u.counter.depth);
				break;
			}
			if (e->local) {
				if (loopof[i] < 0)
					tr_bug("an IST body's counter outside its loop");
				buf_printf(b, "\tTrtRel *r%d = trt_counter(&type%d, it%d);\n", i, e->def[i][D_TYPE], loopof[i]);
				break;
			}
			int l = loopof[i], depth = -1;
			for (int k = l; k >= 0; k = life.parent[k])
				depth++;
			for (; l >= 0 && depth > op->u.counter.depth; depth--)
				l = life.parent[l];
			if (l < 0 || depth != op->u.counter.depth)
				tr_bug("a counter of loop depth %d outside it", op->u.counter.depth);
			buf_printf(b, "\tTrtRel *r%d = trt_counter(&type%d, it%d);\n", i, e->def[i][D_TYPE], l);
			break;
		}
		case IA_HALO:
			buf_printf(b, "\tTrtRel *r%d = trt_halo(%s, &type%d);\n", i, whole(e, i, 0), e->def[i][D_TYPE]);
			break;
		case IA_SLICE:
			buf_printf(b, "\tstatic const TrtWindow window%d = {%d, %" PRId64 ", %" PRId64 ", %d};\n", i,
			           op->u.slice.dim, op->u.slice.shift, op->u.slice.stride, op->u.slice.scatter);
			buf_printf(b, "\tTrtRel *r%d = trt_slice(%s, %s, &window%d, &type%d, ", i, whole(e, i, 0),
			           op->u.slice.off >= 0 ? whole(e, i, 1) : "NULL", i, e->def[i][D_TYPE]);
			end_call_at(b, &op->place);
			break;
		case IA_LOAD:
			buf_printf(b, "\tTrtRel *r%d = var%d;\n", i, op->u.init.tensor);
			break;
		case IA_STORE:
			/* a param's value is dense and whole */
			if (e->local && p->ops.v[op->u.store.in].kind == IA_INIT)
				;
			else if (inplace[i] == IP_KEPT)
				buf_printf(b, "\t/* var%d holds r%d: updated in place */\n", op->u.store.tensor, op->u.store.in);
			else if (p->ops.v[op->u.store.in].type.sparse)
				buf_printf(b, "\ttrt_free(var%d);\n\tvar%d = trt_densify(r%d);\n", op->u.store.tensor,
				           op->u.store.tensor, op->u.store.in);
			else
				buf_printf(b, "\ttrt_free(var%d);\n\tvar%d = trt_rel_clone(%s);\n", op->u.store.tensor,
				           op->u.store.tensor, whole(e, i, 0));
			break;
		case IA_PRINT:
			buf_printf(b, "\ttrt_print(r%d, ", op->u.store.in);
			c_string(b, p->tra->tensors.v[op->u.store.tensor].name);
			buf_puts(b, ");\n");
			break;
		case IA_LOOP:
			if (op->u.loop.ist) {
				emit_ist_loop(e, i);
				break;
			}
			buf_printf(b, "\ttrt_op_end(%d);\n\ttrt_loop_begin(%" PRId64 ");\n", i, op->u.loop.count);
			if (loopof[i] < 0)      /* outermost: where --resume may start */
				buf_printf(b, "\tfor (int64_t it%d = trt_resume(%d, %" PRId64 ", &params); it%d < %" PRId64
				           "; it%d++) {\n\ttrt_loop_iter(it%d);\n", i, nloop, op->u.loop.count, i,
				           op->u.loop.count, i, i);
			else
				buf_printf(b, "\tfor (int64_t it%d = 0; it%d < %" PRId64 "; it%d++) {\n\ttrt_loop_iter(it%d);\n",
				           i, i, op->u.loop.count, i, i);
			continue;
		case IA_ENDLOOP:
			if (!e->local)
				buf_printf(b, "\ttrt_op_end(%d);\n", i);
			break;
		}
		for (int j = 0; j < nin; j++)
			if (needs_whole(p, op, j))
				buf_printf(b, "\ttrt_free(w%d_%d);\n", i, j);
		if (op->kind != IA_ENDLOOP && !e->local)
			buf_printf(b, "\ttrt_op_end(%d);\n", i);
		for (int j = 0; j < n; j++)
			if (free_at[j] == i)
				buf_printf(b, "\ttrt_free(r%d);\n", j);
		int closes = -1;        /* the repeat block an ENDLOOP closes */
		for (int k = 0; op->kind == IA_ENDLOOP && k < i; k++)
			if (p->ops.v[k].kind == IA_LOOP && endof[k] == i)
				closes = k;
		bool ist = closes >= 0 && p->ops.v[closes].u.loop.ist;
		if (closes >= 0 && loopof[closes] < 0 && ist)       /* no checkpoints inside an IST run */
			nloop++;
		else if (closes >= 0 && loopof[closes] < 0)        /* the end of an outermost iteration */
			buf_printf(b, "\ttrt_checkpoint(%d, it%d, %" PRId64 ", &params);\n", nloop++, closes,
			           p->ops.v[closes].u.loop.count);
		if (op->kind == IA_ENDLOOP && e->local)
			buf_puts(b, "\t}\n");
		else if (op->kind == IA_ENDLOOP && !ist)
			buf_puts(b, "\t}\n\ttrt_loop_end();\n");
		for (int j = 0; j < n; j++)
			if (free_after_loop[j] == i)
				buf_printf(b, "\ttrt_free(r%d);\n", j);
	}
	if (e->local)
		buf_puts(b, "\ttrt_ist_end(ist, &istp);\n");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "\ttrt_free(var%d);\n", t);
	buf_puts(b, e->local ? "\treturn 0;\n}\n" : "\treturn trt_finish();\n}\n");
	ia_loops_free(&life);
	free(inplace);
	free(taken);
	free(free_at);
	free(free_after_loop);
}

/* One plan's definitions and body (shared with earlier plans where equal);
 * returns the body's number. */
static void emit_defs(Emit *e)
{
	const IaPlan *p = e->p;
	Buf *out = e->b;
	e->def = xcalloc((size_t)p->ops.n + 1, sizeof *e->def);
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
		const Kernel *kernel = op->kind == IA_JOIN || op->kind == IA_CONV || op->kind == IA_TWOPHASE ? op->u.join.kernel
		                       : op->kind == IA_MAP ? op->u.map.kernel : NULL;
		DefKind kind = ND;
		if (kernel) {
			emit_kernel(e, i, kernel);
			kind = D_KERNEL;
		} else if (op->kind == IA_FILTER) {
			emit_pred(e, i, &op->u.filter.pred);
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

static int emit_plan(Emit *e, int k)
{
	Buf *out = e->b;
	e->plan = k;
	int nist = e->p->tra->ist.n;
	e->ist_run = xcalloc((size_t)nist + 1, sizeof *e->ist_run);
	e->ist_desc = xcalloc((size_t)nist + 1, sizeof *e->ist_desc);
	for (int i = 0; i < nist; i++)
		emit_ist_body(e, i);
	emit_defs(e);
	emit_ops(e, k);
	Buf text = {0};
	e->b = &text;
	emit_main(e);
	e->b = out;
	int run = share(e, D_RUN, &text);
	free(e->def);
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
