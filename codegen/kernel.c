/*
 * kernel.c: block kernels, the function a join or map calls per pair or
 * chunk: kernelN(in, out, acc) computes out (+)= the kernel of the input
 * views (TrtView: a chunk's data, extents and offsets in the tensor).
 *
 * A product summed over shared labels with at most one label each in the
 * m, n and k roles becomes one BLIS gemm per batch index, on strided views
 * of the chunks (transposes are strides, never copies; ir/gemm.c plans the
 * calls).  Everything else becomes a loop nest: output labels outside (the
 * last, contiguous one innermost), reduced labels inside, the element
 * expression as a sequence of temporaries the C compiler can vectorise.
 * A kernel reading windows is a convolution's (conv.c); one with a sparse
 * input that drives it loops over that input's stored elements
 * (sparse.c), and a wrapper expands the sparse inputs it does not read as
 * they are stored.  emit_kernel picks among them.
 */
#include "codegen/emit.h"

void num_literal(Buf *b, double v, DType dt)
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
int kexpr_emit(KGen *g, const KExpr *e, const char *indent)
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
	/* the runtime's exp, log, tanh and pow (vmath.c), which vectorise */
	case KOP_EXP: buf_printf(b, "%s(t%d)", f32 ? "trt_expf" : "trt_exp", a[0]); break;
	case KOP_LOG: buf_printf(b, "%s(t%d)", f32 ? "trt_logf" : "trt_log", a[0]); break;
	case KOP_SQRT: buf_printf(b, "%s(t%d)", f32 ? "sqrtf" : "sqrt", a[0]); break;
	case KOP_ABS:
		if (integer)
			buf_printf(b, "t%d < 0 ? -t%d : t%d", a[0], a[0], a[0]);
		else
			buf_printf(b, "%s(t%d)", f32 ? "fabsf" : "fabs", a[0]);
		break;
	case KOP_TANH: buf_printf(b, "%s(t%d)", f32 ? "trt_tanhf" : "trt_tanh", a[0]); break;
	case KOP_SIGMOID: buf_printf(b, "1 / (1 + %s(-t%d))", f32 ? "trt_expf" : "trt_exp", a[0]); break;
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
			buf_printf(b, "%s(t%d, t%d)", f32 ? "trt_powf" : "trt_pow", a[0], a[1]);
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

/* Row-major strides of a view: s<name>[c] = product of n[c+1..], a dim's
 * extent a number where its label's is static (stat[lab[c]] >= 0:
 * static_extents), else the view's; stat NULL: the view's throughout. */
void emit_strides(Buf *b, const char *name, const char *view, int rank, const int *lab, const int64_t *stat)
{
	if (rank == 0)
		return;
	buf_printf(b, "\tint64_t s%s[%d];\n\ts%s[%d] = 1;\n", name, rank, name, rank - 1);
	for (int c = rank - 2; c >= 0; c--) {
		buf_printf(b, "\ts%s[%d] = s%s[%d] * ", name, c, name, c + 1);
		if (stat && stat[lab[c + 1]] >= 0)
			buf_printf(b, "%" PRId64 ";\n", stat[lab[c + 1]]);
		else
			buf_printf(b, "%s.n[%d];\n", view, c + 1);
	}
}

/* The extent of label l: the first chunk dim carrying it. */
void label_extent(Buf *b, const Kernel *k, int l)
{
	for (int i = 0; i < k->nin; i++)
		for (int c = 0; c < k->nindim[i]; c++)
			if (k->inlab[i][c] == l) {
				buf_printf(b, "in[%d].n[%d]", i, c);
				return;
			}
	tr_bug("label %d in no input", l);
}

/* Label l's extent in a loop kernel: a number where every chunk has the
 * same (stat[l] >= 0: static_extents), else the first input's dim
 * carrying it. */
void loop_extent(Buf *b, const Kernel *k, const int64_t *stat, int l)
{
	if (stat[l] >= 0)
		buf_printf(b, "%" PRId64, stat[l]);
	else
		label_extent(b, k, l);
}

/* The offset of an element of input/output `who` in terms of label loop vars. */
void offset_expr(Buf *b, const char *sname, int n, const int *lab)
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

static void emit_gemm_kernel(Buf *b, const Kernel *k, DType dt, const Contraction *c)
{
	const char *T = ctype(dt);
	static const char *oname[3] = {"a", "b", "c"};

	buf_printf(b, "\tconst %s *a = in[0].p, *b = in[1].p;\n\t%s *c = out->p;\n", T, T);
	emit_strides(b, "a", "in[0]", k->nindim[0], NULL, NULL);
	emit_strides(b, "b", "in[1]", k->nindim[1], NULL, NULL);
	emit_strides(b, "c", "(*out)", k->noutdim, NULL, NULL);
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

void combine_expr(Buf *b, AggKind agg, const char *x, const char *y)
{
	switch (agg) {
	case AGG_ADD: buf_printf(b, "%s + %s", x, y); return;
	case AGG_MAX: buf_printf(b, "%s > %s ? %s : %s", y, x, y, x); return;
	case AGG_MIN: buf_printf(b, "%s < %s ? %s : %s", y, x, y, x); return;
	}
}

/* Elements of the output's innermost dim a reducing loop kernel computes
 * at once (see emit_loop_kernel); in row mode, rows at once, and the
 * terms of a row it computes before it adds them. */
#define RED_TILE 128
#define ROW_TILE 4
#define ROW_PIECE 256

/* Does input i carry label l? */
static bool in_has_label(const Kernel *k, int i, int l)
{
	for (int c = 0; c < k->nindim[i]; c++)
		if (k->inlab[i][c] == l)
			return true;
	return false;
}

/* Row mode's reduced label: the one label a kernel reduces, when some input
 * has it as its innermost (contiguous) chunk dim and no input that runs
 * along both it and the output's last label jl is contiguous along jl
 * (relu(A) B summed: B's rows stream along jl, the tile's reads); else -1. */
static int row_label(const Kernel *k, const bool *reduced, int jl)
{
	int lr = -1, along = 0;
	for (int l = 0; l < k->nlab; l++)
		if (reduced[l]) {
			if (lr >= 0)
				return -1;
			lr = l;
		}
	for (int i = 0; lr >= 0 && i < k->nin; i++) {
		if (k->nindim[i] == 0 || !kx_uses(k->expr, i))
			continue;
		int last = k->inlab[i][k->nindim[i] - 1];
		if (last == jl && in_has_label(k, i, lr))
			return -1;
		along |= last == lr;
	}
	return along ? lr : -1;
}

/* At depth: a loop over label lab's extent (named n) in tiles of step
 * (first index named t, width w); returns the depth inside it. */
static int open_tiles(Buf *b, const Kernel *k, const int64_t *stat, int lab, const char *n, const char *t,
                      const char *w, int step, int depth)
{
	char indent[64];
#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	buf_printf(b, "%sconst int64_t %s = ", INDENT(), n);
	loop_extent(b, k, stat, lab);
	buf_puts(b, ";\n");
	buf_printf(b, "%sfor (int64_t %s = 0; %s < %s; %s += %d) {\n", INDENT(), t, t, n, t, step);
	depth++;
	buf_printf(b, "%sconst int64_t %s = %s - %s < %d ? %s - %s : %d;\n", INDENT(), w, n, t, step, n, t, step);
#undef INDENT
	return depth;
}

/* Row mode's middle (see emit_loop_kernel), at depth inside the tile's
 * loop with r[] set: each piece of the rows' terms into tb, then added
 * into r[] in order; leaves the nest in the store loop over the tile's rows
 * (l<jl> set), at the depth it returns. */
static int emit_row_terms(KGen *g, const char *A, int lr, int jl, int depth)
{
	Buf *b = g->b;
	const Kernel *k = g->k;
	const char *T = ctype(g->dt);
	char indent[64];
#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	depth = open_tiles(b, k, g->stat, lr, "nk", "kt", "nq", ROW_PIECE, depth);
	buf_printf(b, "%s%s tb[%d][%d];\n", INDENT(), T, ROW_TILE, ROW_PIECE);
	buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++) {\n", INDENT());
	depth++;
	buf_printf(b, "%sconst int64_t l%d = jt + jj;\n", INDENT(), jl);
	buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
	buf_printf(b, "%sfor (int64_t kk = 0; kk < nq; kk++) {\n", INDENT());
	depth++;
	buf_printf(b, "%sconst int64_t l%d = kt + kk;\n", INDENT(), lr);
	emit_loads(b, k, T, -1, INDENT());
	int v = kexpr_emit(g, k->expr, INDENT());
	buf_printf(b, "%stb[jj][kk] = t%d;\n", INDENT(), v);
	depth--;
	buf_printf(b, "%s}\n", INDENT());
	depth--;
	buf_printf(b, "%s}\n", INDENT());
	/* a whole tile's rows in a loop of constant count, which unrolls: its
	 * sums are independent, their additions overlap */
	for (int whole = 1; whole >= 0; whole--) {
		if (whole)
			buf_printf(b, "%sif (nt == %d)\n", INDENT(), ROW_TILE);
		else
			buf_printf(b, "%selse\n", INDENT());
		buf_printf(b, "%s\tfor (int64_t kk = 0; kk < nq; kk++)\n", INDENT());
		buf_printf(b, "%s\t\tfor (int64_t jj = 0; jj < %s; jj++)\n", INDENT(), whole ? xprintf("%d", ROW_TILE) : "nt");
		buf_printf(b, "%s\t\t\tr[jj] = ", INDENT());
		combine_expr(b, k->red, "r[jj]", xprintf("(%s)tb[jj][kk]", A));
		buf_puts(b, ";\n");
	}
	depth--;
	buf_printf(b, "%s}\n", INDENT());
	buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++) {\n", INDENT());
	depth++;
	buf_printf(b, "%sconst int64_t l%d = jt + jj;\n", INDENT(), jl);
#undef INDENT
	return depth;
}

/* Whether e computes an op whose scalar form costs well beyond the add
 * that sums it: a call (exp, log, tanh, sigmoid, **) or a division or
 * square root, which vectorised run many to one. */
static bool costly_terms(const KExpr *e)
{
	if (!e || e->kind != KX_OP)
		return false;
	switch (e->op) {
	case KOP_EXP: case KOP_LOG: case KOP_SQRT: case KOP_TANH: case KOP_SIGMOID: case KOP_POW: case KOP_DIV:
		return true;
	default:
		break;
	}
	for (int i = 0; i < kop_arity(e->op); i++)
		if (costly_terms(e->arg[i]))
			return true;
	return false;
}

/*
 * A loop nest: output labels outside, the output's last (contiguous) one
 * innermost, so the C compiler vectorises the element expression along it.
 * In- and output chunks do not overlap, and the pointers are restrict, but
 * for an op made in place (ia_elementwise_in_place): there the output is
 * the chunk of input alias, read at each element before it is written
 * there (ivdep still vectorises the loop).
 *
 * A reduction would put its reduced labels innermost, and a sum over them
 * in one scalar does not vectorise without reordering the additions.  So a
 * reducing kernel takes the output's last label in tiles of RED_TILE: per
 * tile, an array of accumulators, the reduced loops, and inside them the
 * tile's loop, which vectorises.  Every output element still adds its terms
 * in the same order as the scalar loop would: the result is bit for bit the
 * same, only faster.  Sums of f32 accumulate in double.
 *
 * A kernel reducing to one scalar (a loss: the mean over the rows of
 * log(1 + exp(-|z|))) has no output label to tile, and its one sum is a
 * chain of additions: its terms, where they cost more than the chain
 * (costly_terms: exp, log, a division), are computed in pieces of
 * ROW_PIECE along the innermost reduced label into a buffer, a loop that
 * vectorises, then added into the sum in order, bit for bit the scalar
 * loop's (logreg's loss over 100000 rows, 100 steps: 0.092-0.109 -> 0.023
 * s, Zen 4, 2026-11-29).  A sum of products or differences stays one
 * loop: the chain bounds it either way.
 *
 * The tile's loop reads its inputs along the output's last label.  When
 * the kernel reduces one label and an input is contiguous along it instead
 * (a row's sum, max or log-sum-exp over a matrix by rows), those reads are
 * strided, and the tile's loop a gather; unless an input along both labels
 * is contiguous along the output's (relu(A) B summed over B's rows: the
 * tile streams B's rows, 16x faster there than rows).  Row mode takes ROW_TILE rows at
 * a time, computes each row's terms into a buffer in pieces of ROW_PIECE
 * along the reduced label (contiguous reads; exp and log vectorise there),
 * then adds each row's terms in order, the rows side by side.  The order
 * of the additions is again the scalar loop's.  GCN's row reductions over
 * 21168 x 40 chunks (sum of products, exp(z - m) summed): 2.2-2.7x faster
 * (Zen 4, 2026-11-29).
 *
 * A loop kernel computes in its output's type; inputs of another type (a
 * conversion, f64(x)) are read as what they are and converted on load.
 */
static void emit_loop_kernel(Buf *b, const Kernel *k, const int64_t *stat, DType dt, const DType *indt, int alias)
{
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
		buf_printf(b, "\tconst %s *%sp%d = in[%d].p;\n", ctype(indt[i]), i == alias ? "" : "restrict ", i, i);
	buf_printf(b, "\t%s *%spo = out->p;\n", T, alias >= 0 ? "" : "restrict ");
	emit_strides(b, "0", "in[0]", k->nindim[0], k->inlab[0], stat);
	if (k->nin > 1)
		emit_strides(b, "1", "in[1]", k->nindim[1], k->inlab[1], stat);
	emit_strides(b, "o", "(*out)", k->noutdim, k->outlab, stat);
	bool tiled = k->reduces && k->noutdim > 0;
	int jl = k->noutdim > 0 ? k->outlab[k->noutdim - 1] : -1;   /* the innermost output label */
	int lr = tiled ? row_label(k, reduced, jl) : -1;            /* row mode's reduced label */

#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	for (int c = 0; c < k->noutdim - (tiled ? 1 : 0); c++) {
		int l = k->outlab[c];
		/* chunks do not overlap, and an input made in place is read at
		 * each element before it is written: no need to check for it
		 * at run time, on any output loop (gcc unrolls an innermost
		 * loop of 2 or 4 and vectorises the one around it, whose
		 * check failed on an output made in place of its input, so
		 * that cnn's pooling masks, [512, 4, 6, 6, 2, 2] chunks, ran
		 * as scalars) */
		if (!k->reduces)
			buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), l, l);
		loop_extent(b, k, stat, l);
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
	int tile = lr >= 0 ? ROW_TILE : RED_TILE;
	if (tiled) {
		depth = open_tiles(b, k, stat, jl, "nj", "jt", "nt", tile, depth);
		buf_printf(b, "%s%s r[%d];\n", INDENT(), A, tile);
		buf_printf(b, "%sfor (int64_t jj = 0; jj < nt; jj++)\n", INDENT());
		buf_printf(b, "%s\tr[jj] = %s;\n", INDENT(), acc_init);
	} else if (k->reduces) {
		buf_printf(b, "%s%s r = %s;\n", INDENT(), A, acc_init);
	}
	/* a kernel reducing to one scalar: its innermost reduced label in
	 * pieces when the terms are worth vectorising (see above) */
	int inner = -1;
	for (int l = 0; l < k->nlab; l++)
		if (reduced[l])
			inner = l;
	bool pieces = k->reduces && !tiled && inner >= 0 && costly_terms(k->expr);
	KGen g = {b, k, dt, 0, stat};
	int v = -1;
	char tv[16] = "";
	if (lr >= 0) {
		depth = emit_row_terms(&g, A, lr, jl, depth);
	} else {
		if (k->reduces)
			for (int l = 0; l < k->nlab; l++) {
				if (!reduced[l])
					continue;
				if (pieces && l == inner) {
					depth = open_tiles(b, k, stat, l, "nk", "kt", "nq", ROW_PIECE, depth);
					buf_printf(b, "%s%s tb[%d];\n", INDENT(), T, ROW_PIECE);
					buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
					buf_printf(b, "%sfor (int64_t kk = 0; kk < nq; kk++) {\n", INDENT());
					depth++;
					buf_printf(b, "%sconst int64_t l%d = kt + kk;\n", INDENT(), l);
					continue;
				}
				buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), l, l);
				loop_extent(b, k, stat, l);
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
		v = kexpr_emit(&g, k->expr, INDENT());
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
			if (pieces) {   /* the piece's terms, then added in order */
				buf_printf(b, "%stb[kk] = %s;\n", INDENT(), tv);
				depth--;
				buf_printf(b, "%s}\n", INDENT());
				buf_printf(b, "%sfor (int64_t kk = 0; kk < nq; kk++)\n", INDENT());
				buf_printf(b, "%s\tr = ", INDENT());
				combine_expr(b, k->red, "r", xprintf("(%s)tb[kk]", A));
			} else {
				buf_printf(b, "%sr = ", INDENT());
				combine_expr(b, k->red, "r", tv);
			}
			buf_puts(b, ";\n");
			for (int l = 0; l < k->nlab; l++)
				if (reduced[l]) {
					depth--;
					buf_printf(b, "%s}\n", INDENT());
				}
			v = -1;
		}
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

/*
 * Each label's extent where every chunk has the same and it is at most
 * max, -1 where not: a chunk dim of a tensor within one block, or of a
 * whole number of blocks.  A loop kernel writes it as a number
 * (loop_extent) up to STATIC_MAX, so the C compiler unrolls the short loop
 * (a pooling window's 2 x 2, a one-hot's classes) and vectorises the loop
 * around it.  Longer loops keep their extents from the views: given 512
 * as a number, gcc 12 compiled attention's row max (row mode) and
 * nnsearch's product 1.3-1.7x slower.  Every view a kernel gets is a
 * whole chunk of its relation's type (rt_view).
 */
#define STATIC_MAX 16

void static_extents(const Kernel *k, const KernelIn *ki, int64_t max, int64_t *stat)
{
	for (int l = 0; l < 2 * MAXDIM; l++)
		stat[l] = -1;
	for (int j = 0; j < k->nin; j++)
		for (int c = 0; c < k->nindim[j]; c++) {
			const RelType *t = ki->inty[j];
			int d = t->chunkdim[c];
			int64_t x = t->extent[d], bl = t->block[d];
			int64_t n = x <= bl ? x : bl;
			if (bl > 0 && (x <= bl || x % bl == 0) && n <= max)
				stat[k->inlab[j][c]] = n;
		}
	if (ki->vlab >= 0)
		stat[ki->vlab] = ki->vlen;
}

/*
 * A label whose chunks have two lengths, a block and what the last block
 * leaves, both at most max (gcn_sparse's 7 classes in blocks of 4: 4 and
 * 3), the last (contiguous) chunk dim of input *in, *dim, and not a
 * driver's label: 1 and the lengths in len[], else 0.  emit_kernel then
 * writes the kernel twice, each with the label's length as a number, and
 * calls the one the view's length picks: with the length from the view,
 * gcc's vector loop of 4 or 3 floats ran gcn_sparse's A (H1 W2) at 0.094 s
 * where the two versions took 0.052 (V = 8000, 50 epochs, 2 ranks,
 * 2026-11-29).  The innermost loops are what the number speeds up, so
 * only a last dim's label (a row's length), the first such of the inputs:
 * one label, two versions.
 */
static bool split_label(const Kernel *k, const KernelIn *ki, int64_t max, int *lab, int *in, int *dim,
                        int64_t len[2])
{
	for (int j = 0; j < k->nin; j++) {
		int c = k->nindim[j] - 1;
		if (c < 0)
			continue;
		const RelType *t = ki->inty[j];
		int d = t->chunkdim[c];
		int64_t x = t->extent[d], bl = t->block[d];
		bool driver = false;
		for (int e = 0; e < ki->nd; e++)
			driver |= ki->dlab[e] == k->inlab[j][c];
		if (bl > 0 && x > bl && x % bl != 0 && bl <= max && !driver) {
			*lab = k->inlab[j][c], *in = j, *dim = c;
			len[0] = bl, len[1] = x % bl;
			return true;
		}
	}
	return false;
}

/* Does e read label l's index (idx(l))? */
static bool kx_reads_idx(const KExpr *e, int l)
{
	if (e->kind == KX_IDX)
		return e->in == l;
	if (e->kind != KX_OP)
		return false;
	for (int i = 0; i < kop_arity(e->op); i++)
		if (kx_reads_idx(e->arg[i], l))
			return true;
	return false;
}

/* Where chunk dims lab[0..n) carry label l (its dim), -1 if none, -2 if
 * more than one. */
static int label_dim(const int *lab, int n, int l)
{
	int at = -1;
	for (int c = 0; c < n; c++)
		if (lab[c] == l)
			at = at == -1 ? c : -2;
	return at;
}

/* May output labels a and b (b the next output dim's) run as one loop?
 * Every chunk that carries either carries both, once each, b right after
 * a; and the expression reads neither's index. */
static bool merges(const Kernel *k, int a, int b)
{
	if (a == b || kx_reads_idx(k->expr, a) || kx_reads_idx(k->expr, b))
		return false;
	for (int i = 0; i <= k->nin; i++) {
		const int *lab = i < k->nin ? k->inlab[i] : k->outlab;
		int n = i < k->nin ? k->nindim[i] : k->noutdim;
		int pa = label_dim(lab, n, a), pb = label_dim(lab, n, b);
		if (!(pa == -1 && pb == -1) && !(pa >= 0 && pb == pa + 1))
			return false;
	}
	return true;
}

/*
 * A loop kernel over fewer dims: chunks are dense and stored by rows, so
 * output labels a and b that every chunk carrying them carries side by
 * side (merges) are one dim of n(a) * n(b) elements, and one loop.  cnn's
 * pooling and its gradient's joins ran six loops deep over [512, 4, 6, 6,
 * 2, 2] chunks, the innermost 2 long: one loop of 295k elements instead,
 * which vectorises (issue 33).  Fills *ck with the kernel over the merged
 * labels (renumbered in order; its expression in arena a) and emits the
 * views of the chunks as ck sees them, in and out pointing at them;
 * false (nothing emitted) when no labels merge.
 */
static bool coalesce(Buf *b, Arena *a, const Kernel *k, const int64_t *stat, Kernel *ck, int64_t *cstat)
{
	int head[2 * MAXDIM], labmap[2 * MAXDIM];
	bool any = false;
	for (int l = 0; l < k->nlab; l++)
		head[l] = l;
	for (int c = 1; c < k->noutdim; c++)
		if (merges(k, k->outlab[c - 1], k->outlab[c])) {
			head[k->outlab[c]] = head[k->outlab[c - 1]];
			any = true;
		}
	if (!any)
		return false;
	/* the heads numbered in order, then the labels merged into them (a
	 * head may be numbered after them: Y[b, a] = X[b, a], a first) */
	int n = 0;
	for (int l = 0; l < k->nlab; l++)
		if (head[l] == l) {
			labmap[l] = n;
			cstat[n++] = stat[l];
		}
	for (int l = 0; l < k->nlab; l++)
		if (head[l] != l) {
			int h = labmap[l] = labmap[head[l]];
			cstat[h] = cstat[h] >= 0 && stat[l] >= 0 && cstat[h] * stat[l] <= STATIC_MAX ? cstat[h] * stat[l] : -1;
		}
	*ck = *k;
	ck->nlab = n;
	KExpr *repl[2];
	for (int i = 0; i < k->nin; i++)
		repl[i] = kx_in(a, i);
	ck->expr = kx_relabel(a, k->expr, repl, labmap);
	buf_printf(b, "\tTrtView cv[%d], co = *out;\n", k->nin);
	for (int i = 0; i <= k->nin; i++) {
		const int *lab = i < k->nin ? k->inlab[i] : k->outlab;
		int nd = i < k->nin ? k->nindim[i] : k->noutdim, m = 0;
		int *clab = i < k->nin ? ck->inlab[i] : ck->outlab;
		const char *from = i < k->nin ? xprintf("in[%d]", i) : "(*out)", *to = i < k->nin ? xprintf("cv[%d]", i) : "co";
		if (i < k->nin)
			buf_printf(b, "\t%s = %s;\n", to, from);
		for (int c = 0; c < nd; c++) {
			if (head[lab[c]] != lab[c]) {
				buf_printf(b, "\t%s.n[%d] *= %s.n[%d];\n", to, m - 1, from, c);
				continue;
			}
			if (m != c)
				buf_printf(b, "\t%s.n[%d] = %s.n[%d];\n\t%s.off[%d] = %s.off[%d];\n", to, m, from, c, to, m, from, c);
			clab[m++] = labmap[lab[c]];
		}
		buf_printf(b, "\t%s.rank = %d;\n", to, m);
		if (i < k->nin)
			ck->nindim[i] = m;
		else
			ck->noutdim = m;
	}
	buf_puts(b, "\tin = cv;\n\tout = &co;\n");
	return true;
}

/* What kind of code kernel k is (c: its calls when a contraction). */
enum { KC_CONV, KC_DRIVEN, KC_GEMM, KC_LOOPS };

static int kernel_kind(const Kernel *k, const KernelIn *ki, Contraction *c)
{
	if (k->nwin)
		return KC_CONV;
	if (ki->d >= 0)
		return KC_DRIVEN;
	if (!ki->sparse && contraction_plan(k, ki->inty, ki->dt, c))
		return KC_GEMM;
	return KC_LOOPS;
}

/* The code of kernel k (op i's, of kind kind) inside its function: a
 * convolution, a driven loop over a sparse input, BLIS's calls c, or a
 * loop nest. */
static void kernel_code(Emit *e, int i, const Kernel *k, const KernelIn *ki, int kind, const Contraction *c)
{
	Buf *b = e->b;
	switch (kind) {
	case KC_CONV:
		emit_conv_kernel(b, k, ki->dt);
		return;
	case KC_DRIVEN:
		emit_driven_kernel(b, k, ki, e->in_place[i]);
		return;
	case KC_GEMM:
		emit_gemm_kernel(b, k, ki->dt, c);
		return;
	}
	Arena *a = arena_new();
	Kernel ck;
	int64_t stat[2 * MAXDIM], cstat[2 * MAXDIM];
	static_extents(k, ki, STATIC_MAX, stat);
	if (coalesce(b, a, k, stat, &ck, cstat))
		emit_loop_kernel(b, &ck, cstat, ki->dt, ki->indt, e->in_place[i]);
	else
		emit_loop_kernel(b, k, stat, ki->dt, ki->indt, e->in_place[i]);
	arena_free(a);
}

/*
 * Op i's kernel k: a convolution's, a sparse-driven one, BLIS gemm calls or
 * a loop nest.  With a sparse input (or a mask) the kernel is kernelN_body
 * and kernelN a wrapper that expands the sparse inputs the body does not
 * read as they are stored (KernelIn.expand).  A driven kernel or a loop
 * nest with a label of two lengths (split_label) is two functions, each
 * with one length as a number, and kernelN (or its body) calls the one
 * the view's length picks.
 */
void emit_kernel(Emit *e, int i, const Kernel *k)
{
	Buf *b = e->b;
	Buf desc = {0};
	KernelIn ki;
	kernel_reads(e->p, i, k, &ki);
	/* ia_elementwise_in_place takes no reduction or window, and a sparse
	 * input only for a sparse result of its pattern: an op made in place
	 * has a loop nest on dense chunks, or one over the pattern's elements,
	 * each read at q before the result's is written there */
	if (e->in_place[i] >= 0 && (k->nwin || (ki.sparse && !ki.sparse_out) || k->reduces))
		tr_bug("op %d made in place with a kernel that is no dense loop nest", i);
	/* a driven kernel or a loop nest with a label of two lengths: twice */
	Contraction c;
	int kind = kernel_kind(k, &ki, &c);
	int vin = 0, vdim = 0;
	int64_t vlen[2];
	bool two = (kind == KC_DRIVEN || kind == KC_LOOPS) &&
	           split_label(k, &ki, kind == KC_DRIVEN ? DRIVEN_STATIC_MAX : STATIC_MAX, &ki.vlab, &vin, &vdim, vlen);
	/* each version's code, kept when the length is in it: a loop nest
	 * whose dims run as one loop (coalesce) has it from the views */
	Buf code[2] = {{0}};
	for (int v = 0; v < 2 && two; v++) {
		ki.vlen = vlen[v];
		e->b = &code[v];
		kernel_code(e, i, k, &ki, kind, &c);
		e->b = b;
	}
	two = two && strcmp(code[0].s, code[1].s) != 0;
	kernel_print(&desc, k);
	for (int v = 0; v < 2 && two; v++)
		buf_printf(b, "/* %s%s, label %d %" PRId64 " long */\nstatic void kernel" HOLE "_%" PRId64
		           "(const TrtView *in, TrtView *out, int acc)\n{\n%s}\n\n",
		           desc.s, ki.sampled ? ", at the mask's elements" : "", ki.vlab, vlen[v], vlen[v], code[v].s);
	buf_free(&code[0]);
	buf_free(&code[1]);
	ki.vlab = -1;
	buf_printf(b, "/* %s%s */\nstatic void kernel" HOLE "%s(const TrtView *in, TrtView *out, int acc)\n{\n",
	           desc.s, ki.sampled ? ", at the mask's elements" : "", ki.sparse ? "_body" : "");
	buf_free(&desc);
	if (two)
		buf_printf(b, "\tif (in[%d].n[%d] == %" PRId64 ")\n\t\tkernel" HOLE "_%" PRId64 "(in, out, acc);\n"
		           "\telse\n\t\tkernel" HOLE "_%" PRId64 "(in, out, acc);\n", vin, vdim, vlen[0], vlen[0], vlen[1]);
	else
		kernel_code(e, i, k, &ki, kind, &c);
	buf_puts(b, "}\n\n");
	if (!ki.sparse)
		return;
	buf_printf(b, "static void kernel" HOLE "(const TrtView *in, TrtView *out, int acc)\n{\n\tTrtView v[%d];\n"
	           "\tvoid *dense[2] = {NULL, NULL};\n", ki.n);
	for (int j = 0; j < ki.n; j++) {
		buf_printf(b, "\tv[%d] = in[%d];\n", j, j);
		if (j < ki.nk && ki.expand[j])
			buf_printf(b, "\tdense[%d] = trt_view_dense(&v[%d], sizeof(%s));\n", j, j, ctype(ki.indt[j]));
	}
	buf_puts(b, "\tkernel" HOLE "_body(v, out, acc);\n\tfree(dense[0]);\n\tfree(dense[1]);\n}\n\n");
}
