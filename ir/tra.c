/*
 * tra.c: kernels, relation types and the TRA program.
 *
 * A TRA program is an array of ops in topological order: an op's inputs
 * always have smaller indices.  Tensors and statements are shared with the
 * IA plans made from it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

/* ---- element types and aggregations ---- */

const char *dtype_name(DType t)
{
	switch (t) {
	case DT_F32: return "f32";
	case DT_F64: return "f64";
	case DT_I32: return "i32";
	case DT_I64: return "i64";
	}
	tr_bug("bad dtype %d", (int)t);
}

int dtype_size(DType t)
{
	switch (t) {
	case DT_F32: return 4;
	case DT_F64: return 8;
	case DT_I32: return 4;
	case DT_I64: return 8;
	}
	tr_bug("bad dtype %d", (int)t);
}

bool dtype_is_int(DType t)
{
	return t == DT_I32 || t == DT_I64;
}

const char *agg_name(AggKind a)
{
	switch (a) {
	case AGG_ADD: return "sum";
	case AGG_MAX: return "max";
	case AGG_MIN: return "min";
	}
	tr_bug("bad aggregation %d", (int)a);
}

/* ---- kernel expressions ---- */

static const struct { const char *name; int arity; double weight; } kops[] = {
#define X(n, s, a, w) {s, a, w},
	KOPS(X)
#undef X
};

const char *kop_name(KOp op)
{
	return kops[op].name;
}

int kop_arity(KOp op)
{
	return kops[op].arity;
}

double kop_weight(KOp op)
{
	return kops[op].weight;
}

/* A node in the arena: e, its unset fields zero. */
static KExpr *kx_new(Arena *a, KExpr e)
{
	KExpr *n = arena_alloc(a, sizeof *n);
	*n = e;
	return n;
}

KExpr *kx_in(Arena *a, int in)
{
	return kx_new(a, (KExpr){.kind = KX_IN, .in = in});
}

KExpr *kx_const(Arena *a, double v)
{
	return kx_new(a, (KExpr){.kind = KX_CONST, .val = v});
}

KExpr *kx_op(Arena *a, KOp op, KExpr *x, KExpr *y, KExpr *z)
{
	return kx_new(a, (KExpr){.kind = KX_OP, .op = op, .arg = {x, y, z}});
}

KExpr *kx_idx(Arena *a, int label)
{
	return kx_new(a, (KExpr){.kind = KX_IDX, .in = label});
}

KExpr *kx_subst(Arena *a, const KExpr *e, KExpr *const *repl)
{
	switch (e->kind) {
	case KX_IN:
		return repl[e->in];
	case KX_IDX:
		return kx_idx(a, e->in);
	case KX_CONST:
		return kx_const(a, e->val);
	case KX_OP: {
		KExpr *arg[3] = {0};
		for (int i = 0; i < kop_arity(e->op); i++)
			arg[i] = kx_subst(a, e->arg[i], repl);
		return kx_op(a, e->op, arg[0], arg[1], arg[2]);
	}
	}
	tr_bug("bad kernel expression");
}

/* ---- derivatives ---- */

static bool is_const(const KExpr *e, double v)
{
	return e->kind == KX_CONST && e->val == v;
}

/* Constructors that fold constants, so derivatives stay small and an input
 * the derivative does not need really disappears from it. */
static KExpr *mk(Arena *a, KOp op, KExpr *x, KExpr *y, KExpr *z)
{
	switch (op) {
	case KOP_ADD:
		if (is_const(x, 0)) return y;
		if (is_const(y, 0)) return x;
		break;
	case KOP_SUB:
		if (is_const(y, 0)) return x;
		if (is_const(x, 0)) return mk(a, KOP_NEG, y, NULL, NULL);
		break;
	case KOP_MUL:
		if (is_const(x, 0) || is_const(y, 0)) return kx_const(a, 0);
		if (is_const(x, 1)) return y;
		if (is_const(y, 1)) return x;
		break;
	case KOP_DIV:
		if (is_const(x, 0)) return kx_const(a, 0);
		if (is_const(y, 1)) return x;
		break;
	case KOP_NEG:
		if (x->kind == KX_CONST) return kx_const(a, -x->val);
		if (x->kind == KX_OP && x->op == KOP_NEG) return x->arg[0];
		break;
	case KOP_WHERE:
		if (is_const(y, 0) && is_const(z, 0)) return kx_const(a, 0);
		break;
	default:
		break;
	}
	if (x->kind == KX_CONST && (!y || y->kind == KX_CONST) && kop_arity(op) <= 2 && op != KOP_WHERE) {
		/* both constant: fold the few cases derivatives make */
		double u = x->val, v = y ? y->val : 0;
		switch (op) {
		case KOP_ADD: return kx_const(a, u + v);
		case KOP_SUB: return kx_const(a, u - v);
		case KOP_MUL: return kx_const(a, u * v);
		case KOP_DIV: return kx_const(a, u / v);
		default: break;
		}
	}
	return kx_op(a, op, x, y, z);
}

/*
 * The derivative of e with respect to input `in`, as an expression over the
 * same inputs (forward-mode rules on the expression tree).  Comparisons and
 * indices have derivative 0; where(c, x, y) differentiates its arms; relu's
 * derivative at 0 is 0, abs's is 0 (subgradients, as PyTorch).
 */
KExpr *kx_diff(Arena *a, const KExpr *e, int in)
{
	KExpr *x, *dx, *dy;
	switch (e->kind) {
	case KX_IN:
		return kx_const(a, e->in == in);
	case KX_CONST:
	case KX_IDX:
		return kx_const(a, 0);
	case KX_OP:
		break;
	}
	x = e->arg[0];
	KExpr *ee = (KExpr *)e;
	dx = kx_diff(a, x, in);
	dy = kop_arity(e->op) > 1 ? kx_diff(a, e->arg[1], in) : NULL;
	switch (e->op) {
	case KOP_NEG:
		return mk(a, KOP_NEG, dx, NULL, NULL);
	case KOP_EXP:
		return mk(a, KOP_MUL, ee, dx, NULL);
	case KOP_LOG:
		return mk(a, KOP_DIV, dx, x, NULL);
	case KOP_SQRT:
		return mk(a, KOP_DIV, dx, mk(a, KOP_MUL, kx_const(a, 2), ee, NULL), NULL);
	case KOP_ABS:
		return mk(a, KOP_WHERE, kx_op(a, KOP_GT, x, kx_const(a, 0), NULL), dx,
		          mk(a, KOP_WHERE, kx_op(a, KOP_LT, x, kx_const(a, 0), NULL), mk(a, KOP_NEG, dx, NULL, NULL),
		             kx_const(a, 0)));
	case KOP_TANH:
		return mk(a, KOP_MUL, mk(a, KOP_SUB, kx_const(a, 1), kx_op(a, KOP_MUL, ee, ee, NULL), NULL), dx, NULL);
	case KOP_SIGMOID:
		return mk(a, KOP_MUL, mk(a, KOP_MUL, ee, mk(a, KOP_SUB, kx_const(a, 1), ee, NULL), NULL), dx, NULL);
	case KOP_RELU:
		return mk(a, KOP_WHERE, kx_op(a, KOP_GT, x, kx_const(a, 0), NULL), dx, kx_const(a, 0));
	case KOP_ADD:
		return mk(a, KOP_ADD, dx, dy, NULL);
	case KOP_SUB:
		return mk(a, KOP_SUB, dx, dy, NULL);
	case KOP_MUL:
		return mk(a, KOP_ADD, mk(a, KOP_MUL, dx, e->arg[1], NULL), mk(a, KOP_MUL, x, dy, NULL), NULL);
	case KOP_DIV:
		/* (dx * y - x * dy) / y^2, as dx / y - x * dy / y^2 */
		return mk(a, KOP_SUB, mk(a, KOP_DIV, dx, e->arg[1], NULL),
		          mk(a, KOP_DIV, mk(a, KOP_MUL, x, dy, NULL), mk(a, KOP_MUL, e->arg[1], e->arg[1], NULL), NULL), NULL);
	case KOP_POW:
		/* constant exponents only (sema): c * x^(c-1) * dx */
		if (e->arg[1]->kind != KX_CONST)
			tr_bug("pow with a variable exponent reached kx_diff");
		if (e->arg[1]->val == 0)
			return kx_const(a, 0);
		return mk(a, KOP_MUL, mk(a, KOP_MUL, kx_const(a, e->arg[1]->val),
		                         e->arg[1]->val == 2 ? x : mk(a, KOP_POW, x, kx_const(a, e->arg[1]->val - 1), NULL),
		                         NULL), dx, NULL);
	case KOP_LT: case KOP_LE: case KOP_GT: case KOP_GE: case KOP_EQ: case KOP_NE:
		return kx_const(a, 0);
	case KOP_WHERE:
		return mk(a, KOP_WHERE, x, dy, kx_diff(a, e->arg[2], in));
	case KOP_STOP:
		return kx_const(a, 0);
	}
	tr_bug("bad kernel op in kx_diff");
}

bool kx_equal(const KExpr *a, const KExpr *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case KX_IN:
	case KX_IDX:
		return a->in == b->in;
	case KX_CONST:
		return a->val == b->val;
	case KX_OP:
		if (a->op != b->op)
			return false;
		for (int i = 0; i < kop_arity(a->op); i++)
			if (!kx_equal(a->arg[i], b->arg[i]))
				return false;
		return true;
	}
	return false;
}

int kx_nops(const KExpr *e)
{
	if (e->kind != KX_OP)
		return 0;
	int n = 1;
	for (int i = 0; i < kop_arity(e->op); i++)
		n += kx_nops(e->arg[i]);
	return n;
}

/* A power of the constant 2 or 1 is emitted as a product or a copy
 * (codegen/kernel.c), weighed so. */
double kx_weight(const KExpr *e)
{
	if (e->kind != KX_OP)
		return 0;
	double w = kop_weight(e->op);
	if (e->op == KOP_POW && is_const(e->arg[1], 2))
		w = kop_weight(KOP_MUL);
	else if (e->op == KOP_POW && is_const(e->arg[1], 1))
		w = 0;
	for (int i = 0; i < kop_arity(e->op); i++)
		w += kx_weight(e->arg[i]);
	return w;
}

bool kx_is_zero(const KExpr *e)
{
	return is_const(e, 0);
}

bool kx_is_product(const KExpr *e)
{
	return e->kind == KX_OP && e->op == KOP_MUL &&
	       e->arg[0]->kind == KX_IN && e->arg[1]->kind == KX_IN &&
	       e->arg[0]->in == 0 && e->arg[1]->in == 1;
}

/* Whether e is zero wherever input `in` is, whatever the other inputs
 * are: what lets a kernel run only over a sparse input's stored elements.
 * (As scipy's, a product with a sparse factor is zero where the factor is
 * absent even when the other factor is infinite.) */
bool kx_zero_with(const KExpr *e, int in)
{
	switch (e->kind) {
	case KX_IN:
		return e->in == in;
	case KX_CONST:
		return e->val == 0;
	case KX_IDX:
		return false;
	case KX_OP:
		break;
	}
	const KExpr *const *a = (const KExpr *const *)e->arg;
	switch (e->op) {
	case KOP_NEG: case KOP_SQRT: case KOP_ABS: case KOP_TANH: case KOP_RELU: case KOP_STOP:
		return kx_zero_with(a[0], in);
	case KOP_EXP: case KOP_LOG: case KOP_SIGMOID:
		return false;
	case KOP_MUL:
		return kx_zero_with(a[0], in) || kx_zero_with(a[1], in);
	case KOP_DIV:
		return kx_zero_with(a[0], in);
	case KOP_POW:
		return kx_zero_with(a[0], in) && a[1]->kind == KX_CONST && a[1]->val > 0;
	case KOP_ADD: case KOP_SUB: case KOP_LT: case KOP_GT: case KOP_NE:
		return kx_zero_with(a[0], in) && kx_zero_with(a[1], in);
	case KOP_LE: case KOP_GE: case KOP_EQ:
		return false;
	case KOP_WHERE:
		return kx_zero_with(a[2], in) && (kx_zero_with(a[0], in) || kx_zero_with(a[1], in));
	}
	return false;
}

static bool same_labels(int n, const int *a, int m, const int *b)
{
	if (n != m)
		return false;
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The input whose pattern kernel k's output keeps, or -1. */
int kernel_sparse_pattern(const Kernel *k, const RelType *const *in)
{
	for (int i = 0; i < k->nin; i++)
		if (in[i]->sparse && !k->reduces && kx_zero_with(k->expr, i) &&
		    same_labels(k->nindim[i], k->inlab[i], k->noutdim, k->outlab))
			return i;
	return -1;
}

/* Whether a kernel reading input i, which may have holes, still computes
 * right without them: it is zero where i is, and what it combines a
 * missing zero into does not change (a sum, also when a fused aggregation
 * calls it with acc; max and min would see the zero). */
bool kernel_hole_ok(const Kernel *k, int i)
{
	return kx_zero_with(k->expr, i) && k->red == AGG_ADD;
}

bool kx_uses(const KExpr *e, int in)
{
	switch (e->kind) {
	case KX_IN:
		return e->in == in;
	case KX_CONST:
	case KX_IDX:
		return false;
	case KX_OP:
		for (int i = 0; i < kop_arity(e->op); i++)
			if (kx_uses(e->arg[i], in))
				return true;
		return false;
	}
	return false;
}

static void kx_print(Buf *b, const KExpr *e)
{
	switch (e->kind) {
	case KX_IN:
		buf_printf(b, "in%d", e->in);
		return;
	case KX_CONST:
		buf_printf(b, "%.17g", e->val);
		return;
	case KX_IDX:
		buf_printf(b, "idx(%c)", e->in < 26 ? 'a' + e->in : 'A' + e->in - 26);
		return;
	case KX_OP:
		if (kop_arity(e->op) == 2 && e->op != KOP_POW) {
			buf_puts(b, "(");
			kx_print(b, e->arg[0]);
			buf_printf(b, " %s ", kop_name(e->op));
			kx_print(b, e->arg[1]);
			buf_puts(b, ")");
		} else if (e->op == KOP_NEG) {
			buf_puts(b, "-");
			kx_print(b, e->arg[0]);
		} else {
			buf_printf(b, "%s(", e->op == KOP_POW ? "pow" : kop_name(e->op));
			for (int i = 0; i < kop_arity(e->op); i++) {
				if (i)
					buf_puts(b, ", ");
				kx_print(b, e->arg[i]);
			}
			buf_puts(b, ")");
		}
		return;
	}
}

/* ---- kernels ---- */

Kernel *kernel_new(Arena *a, int nin)
{
	Kernel *k = arena_alloc(a, sizeof *k);
	k->nin = nin;
	k->red = AGG_ADD;
	k->expr = nin == 2 ? kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL) : kx_in(a, 0);
	return k;
}

/* A deep copy: the expression too lives in `a`, so the copy outlives the
 * arena of the original (a plan rewritten and then freed). */
Kernel *kernel_clone(Arena *a, const Kernel *k)
{
	Kernel *c = arena_alloc(a, sizeof *c);
	*c = *k;
	KExpr *repl[2] = {kx_in(a, 0), kx_in(a, 1)};
	c->expr = kx_subst(a, k->expr, repl);
	return c;
}

static void labels_print(Buf *b, int n, const int *lab)
{
	for (int i = 0; i < n; i++)
		buf_printf(b, "%c", lab[i] < 26 ? 'a' + lab[i] : 'A' + lab[i] - 26);
}

void kernel_print(Buf *b, const Kernel *k)
{
	kx_print(b, k->expr);
	buf_puts(b, " ");
	for (int i = 0; i < k->nin; i++) {
		if (i)
			buf_puts(b, ",");
		labels_print(b, k->nindim[i], k->inlab[i]);
	}
	buf_puts(b, "->");
	labels_print(b, k->noutdim, k->outlab);
	if (k->reduces)
		buf_printf(b, " %s", agg_name(k->red));
	/* a convolution's windows: "in1[1]=b+c-1" (dim 1 of in1 at b + c - 1) */
	for (int w = 0; w < k->nwin; w++) {
		int own = k->inlab[1][k->win[w].dim], lab = k->win[w].lab;
		buf_printf(b, " in1[%d]=", k->win[w].dim);
		labels_print(b, 1, &own);
		if (k->win[w].coef == 1 || k->win[w].coef == -1)
			buf_puts(b, k->win[w].coef < 0 ? "-" : "+");
		else
			buf_printf(b, "%+" PRId64 "*", k->win[w].coef);
		labels_print(b, 1, &lab);
		if (k->win[w].shift)
			buf_printf(b, "%+" PRId64, k->win[w].shift);
	}
}

/* ---- relation types ---- */

/* The same dtype, key dims, extents, blocks, halos and chunk order. */
bool rel_same_dims(const RelType *a, const RelType *b)
{
	if (a->dtype != b->dtype || a->nkey != b->nkey || a->nchunk != b->nchunk)
		return false;
	for (int d = 0; d < a->nkey; d++)
		if (a->extent[d] != b->extent[d] || a->block[d] != b->block[d] || a->hlo[d] != b->hlo[d] ||
		    a->hhi[d] != b->hhi[d] || a->hext[d] != b->hext[d])
			return false;
	for (int c = 0; c < a->nchunk; c++)
		if (a->chunkdim[c] != b->chunkdim[c])
			return false;
	return true;
}

bool rel_type_eq(const RelType *a, const RelType *b)
{
	return rel_same_dims(a, b) && a->sparse == b->sparse && a->holes == b->holes && a->density == b->density;
}

bool rel_same_layout(const RelType *a, const RelType *b)
{
	return rel_same_dims(a, b) && !a->sparse && !b->sparse && !a->holes && !b->holes;
}

int64_t rel_frontier(const RelType *t, int d)
{
	return ceil_div(t->extent[d], t->block[d]);
}

int64_t rel_block_len(const RelType *t, int d)
{
	return t->block[d] < t->extent[d] ? t->block[d] : t->extent[d];
}

int64_t rel_chunk_len(const RelType *t, int d, int64_t k)
{
	int64_t len = t->extent[d] - k * t->block[d];
	len = len < t->block[d] ? len : t->block[d];
	if (t->hext[d] > 0) {           /* a halo: the block and its neighbours' rows, clipped */
		int64_t a = rel_chunk_off(t, d, k), e = k * t->block[d] + len + t->hhi[d];
		e = e < t->hext[d] ? e : t->hext[d];
		len = e > a ? e - a : 0;
	}
	return len;
}

int64_t rel_chunk_off(const RelType *t, int d, int64_t k)
{
	int64_t a = k * t->block[d];
	if (t->hext[d] > 0) {
		a -= t->hlo[d];
		a = a < 0 ? 0 : a < t->hext[d] ? a : t->hext[d];
	}
	return a;
}

int64_t rel_chunk_elems(const RelType *t, const int64_t *key)
{
	int64_t n = 1;
	for (int c = 0; c < t->nchunk; c++)
		n *= rel_chunk_len(t, t->chunkdim[c], key[t->chunkdim[c]]);
	return n;
}

int64_t rel_ntuples(const RelType *t)
{
	int64_t n = 1;
	for (int d = 0; d < t->nkey; d++)
		n *= rel_frontier(t, d);
	return n;
}

int rel_chunkpos(const RelType *t, int keydim)
{
	for (int c = 0; c < t->nchunk; c++)
		if (t->chunkdim[c] == keydim)
			return c;
	return -1;
}

double rel_floats(const RelType *t)
{
	double f = 1;
	for (int d = 0; d < t->nkey; d++) {
		double n = 0;
		if (rel_chunkpos(t, d) < 0)
			n = (double)rel_frontier(t, d);
		else if (t->hext[d] > 0)        /* a halo: its chunks overlap */
			for (int64_t k = 0; k < rel_frontier(t, d); k++)
				n += (double)rel_chunk_len(t, d, k);
		else
			n = (double)t->extent[d];
		f *= n;
	}
	return f;
}

void reltype_print(Buf *b, const RelType *t)
{
	buf_puts(b, "<");
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? "," : "", rel_frontier(t, d));
	buf_puts(b, "> [");
	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		buf_printf(b, "%s%" PRId64, c ? "," : "", rel_block_len(t, d));
		if (t->hext[d] > 0)
			buf_printf(b, "-%" PRId64 "+%" PRId64, t->hlo[d], t->hhi[d]);
		if (d != c)
			buf_printf(b, "@%d", d);
	}
	buf_printf(b, "] %s", dtype_name(t->dtype));
	if (t->sparse)
		buf_printf(b, " sparse %.3g", (double)t->density);
	else if (t->holes)
		buf_puts(b, " holes");
}

double rel_density(const RelType *t)
{
	return t->sparse ? t->density : 1;
}

double rel_stored(const RelType *t)
{
	return rel_floats(t) * rel_density(t);
}

/* A sparse chunk stores, besides its values, a column index (8 bytes) per
 * element and a row offset per row (rt_csr_bytes). */
double rel_bytes(const RelType *t)
{
	double b = rel_stored(t) * dtype_size(t->dtype);
	if (t->sparse) {
		int64_t rows = t->nchunk ? t->extent[t->chunkdim[0]] : 1;
		double colblocks = (double)rel_ntuples(t) / (double)(t->nchunk ? rel_frontier(t, t->chunkdim[0]) : 1);
		b += rel_stored(t) * 8 + ((double)rows + 1) * colblocks * 8 + 32.0 * (double)rel_ntuples(t);
	}
	return b;
}

/* The bytes of the chunk at key, as rel_bytes prices them: a sparse one's
 * stored elements (its density of the chunk's elements), their column
 * indices, its row offsets and its header. */
double rel_chunk_bytes(const RelType *t, const int64_t *key)
{
	double n = (double)rel_chunk_elems(t, key);
	if (!t->sparse)
		return n * dtype_size(t->dtype);
	int64_t rows = t->nchunk ? rel_chunk_len(t, t->chunkdim[0], key[t->chunkdim[0]]) : 1;
	double stored = n * rel_density(t);
	return stored * (dtype_size(t->dtype) + 8) + ((double)rows + 1) * 8 + 32;
}

/* ---- the program ---- */

const char *tra_op_name(TraOpKind k)
{
	static const char *names[] = {
#define TRA_OP(n, s, in, k, m) s,
#include "ops.def"
	};
	return names[k];
}

TraProg *tra_new(void)
{
	TraProg *p = xcalloc(1, sizeof *p);
	p->arena = arena_new();
	return p;
}

void tra_free(TraProg *p)
{
	if (!p)
		return;
	for (int i = 0; i < p->stmts.n; i++)
		free(p->stmts.v[i].text);
	vec_free(&p->tensors);
	vec_free(&p->stmts);
	vec_free(&p->ops);
	vec_free(&p->ist);
	arena_free(p->arena);
	free(p);
}

TraProg *tra_copy(const TraProg *p)
{
	TraProg *c = tra_new();
	for (int i = 0; i < p->tensors.n; i++)
		vec_push(&c->tensors, p->tensors.v[i]);
	for (int i = 0; i < p->stmts.n; i++) {
		Stmt st = {p->stmts.v[i].loc, xstrdup(p->stmts.v[i].text)};
		vec_push(&c->stmts, st);
	}
	for (int i = 0; i < p->ops.n; i++)
		vec_push(&c->ops, p->ops.v[i]);
	for (int i = 0; i < p->ist.n; i++)
		vec_push(&c->ist, p->ist.v[i]);
	return c;
}

int tra_add_tensor(TraProg *p, Tensor t)
{
	vec_push(&p->tensors, t);
	return p->tensors.n - 1;
}

int tra_add_stmt(TraProg *p, Loc loc)
{
	Stmt s = {loc, loc_text(loc)};
	vec_push(&p->stmts, s);
	return p->stmts.n - 1;
}

int tra_push(TraProg *p, TraOp op)
{
	vec_push(&p->ops, op);
	return p->ops.n - 1;
}

/* ---- ops.def's inputs and kernel columns ---- */

static int field_int(const void *op, unsigned off)
{
	return *(const int *)((const char *)op + off);
}

static bool field_holds(const void *op, const InField *f)
{
	switch (f->when) {
	case IN_END:
		return false;
	case IN_ALWAYS:
		return true;
	case IN_NONNEG:
		return field_int(op, f->off) >= 0;
	case IN_FLAG:
		return *(const bool *)((const char *)op + f->flag);
	}
	return false;
}

int ir_inputs(const void *op, const InField *f, int *in)
{
	int n = 0;
	for (int i = 0; i < MAXIN && f[i].when != IN_END; i++)
		if (field_holds(op, &f[i]))
			in[n++] = field_int(op, f[i].off);
	return n;
}

void ir_remap(void *op, const InField *f, const int *map)
{
	for (int i = 0; i < MAXIN && f[i].when != IN_END; i++)
		if (field_holds(op, &f[i])) {
			int *x = (int *)((char *)op + f[i].off);
			*x = map[*x];
		}
}

Kernel *ir_kernel(const void *op, size_t off)
{
	return off ? *(Kernel *const *)((const char *)op + off) : NULL;
}

/* Each TRA op's input fields and kernel field (0: none), from ops.def. */
static const struct {
	InField in[MAXIN];
	size_t kernel;
} tra_fields[] = {
#define OP_FIELDS TraOp
#define TRA_OP(n, s, in, k, m) [TRA_##n] = {INS in, k},
#include "ops.def"
};

int *tra_nreaders(const TraProg *p)
{
	int *n = xcalloc((size_t)p->ops.n + 1, sizeof *n);
	for (int i = 0; i < p->ops.n; i++) {
		int in[MAXIN];
		int k = tra_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			n[in[j]]++;
	}
	return n;
}

int tra_inputs(const TraOp *op, int *in)
{
	return ir_inputs(op, tra_fields[op->kind].in, in);
}

void tra_op_remap(TraOp *op, const int *map)
{
	ir_remap(op, tra_fields[op->kind].in, map);
}

Kernel *tra_op_kernel(const TraOp *op)
{
	return ir_kernel(op, tra_fields[op->kind].kernel);
}

/* The index's key dims, then the table's without dim; chunk dims likewise
 * (the index's, then the table's but the gathered one's), so each index
 * element's row is a run of the output chunk. */
RelType gather_type(const RelType *table, const RelType *index, int dim)
{
	RelType t = {.dtype = table->dtype, .nkey = index->nkey + table->nkey - 1};
	for (int d = 0; d < index->nkey; d++) {
		t.extent[d] = index->extent[d];
		t.block[d] = index->block[d];
	}
	for (int d = 0, o = index->nkey; d < table->nkey; d++)
		if (d != dim) {
			t.extent[o] = table->extent[d];
			t.block[o++] = table->block[d];
		}
	for (int c = 0; c < index->nchunk; c++)
		t.chunkdim[t.nchunk++] = index->chunkdim[c];
	for (int c = 0; c < table->nchunk; c++)
		if (table->chunkdim[c] != dim)
			t.chunkdim[t.nchunk++] = index->nkey + table->chunkdim[c] - (table->chunkdim[c] > dim);
	return t;
}

bool tra_has_result(TraOpKind k)
{
	switch (k) {
	case TRA_OUTPUT: case TRA_STORE: case TRA_PRINT: case TRA_LOOP: case TRA_ENDLOOP:
		return false;
	case TRA_INPUT: case TRA_JOIN: case TRA_AGG: case TRA_MAP: case TRA_REKEY: case TRA_FILTER:
	case TRA_INIT: case TRA_LOAD: case TRA_RANGE: case TRA_COUNTER: case TRA_SLICE: case TRA_GRAD:
	case TRA_GATHER: case TRA_SCATTER: case TRA_CONV:
		return true;
	}
	return false;
}

bool tra_op_joins(TraOpKind k)
{
	switch (k) {
	case TRA_JOIN: case TRA_CONV:
		return true;
	case TRA_INPUT: case TRA_AGG: case TRA_MAP: case TRA_REKEY: case TRA_FILTER: case TRA_OUTPUT:
	case TRA_INIT: case TRA_LOAD: case TRA_RANGE: case TRA_COUNTER: case TRA_SLICE: case TRA_STORE:
	case TRA_PRINT: case TRA_LOOP: case TRA_ENDLOOP: case TRA_GATHER: case TRA_SCATTER: case TRA_GRAD:
		return false;
	}
	return false;
}

/* ---- kernel algebra (the rules R1-2, R1-4 and R1-7 use it) ---- */

/* A copy of e with inputs replaced and index labels renumbered. */
KExpr *kx_relabel(Arena *a, const KExpr *e, KExpr *const *repl, const int *labmap)
{
	switch (e->kind) {
	case KX_IN:
		return repl[e->in];
	case KX_IDX:
		return kx_idx(a, labmap[e->in]);
	case KX_CONST:
		return kx_const(a, e->val);
	case KX_OP: {
		KExpr *x[3] = {0};
		for (int i = 0; i < kop_arity(e->op); i++)
			x[i] = kx_relabel(a, e->arg[i], repl, labmap);
		return kx_op(a, e->op, x[0], x[1], x[2]);
	}
	}
	return NULL;
}

static KExpr *kx_copy(Arena *a, const KExpr *e, int nin)
{
	int ident[2 * MAXDIM];
	KExpr *repl[2];
	for (int i = 0; i < 2 * MAXDIM; i++)
		ident[i] = i;
	for (int i = 0; i < nin; i++)
		repl[i] = kx_in(a, i);
	return kx_relabel(a, e, repl, ident);
}

/* outer . inner: a one-input, non-reducing kernel applied to the output of
 * a non-reducing kernel; the result reads inner's inputs. */
Kernel *kernel_compose(Arena *a, const Kernel *outer, const Kernel *inner)
{
	if (outer->nin != 1 || outer->reduces || inner->reduces)
		return NULL;
	int labmap[2 * MAXDIM];
	for (int l = 0; l < 2 * MAXDIM; l++)
		labmap[l] = -1;
	for (int c = 0; c < outer->nindim[0]; c++)
		labmap[outer->inlab[0][c]] = inner->outlab[c];
	Kernel *k = kernel_clone(a, inner);
	k->noutdim = outer->noutdim;
	for (int c = 0; c < outer->noutdim; c++) {
		if (labmap[outer->outlab[c]] < 0)
			return NULL;
		k->outlab[c] = labmap[outer->outlab[c]];
	}
	KExpr *repl[1] = {kx_copy(a, inner->expr, inner->nin)};
	for (int l = 0; l < 2 * MAXDIM; l++)
		if (labmap[l] < 0)
			labmap[l] = 0;
	k->expr = kx_relabel(a, outer->expr, repl, labmap);
	k->red = outer->red;
	k->reduces = false;
	return k;
}

/* Does f(x) distribute over the aggregation (f(a (+) b) = f(a) (+) f(b))?
 * *uses_in: f reads its input at all. */
bool kx_distributes(const KExpr *e, AggKind agg, bool *uses_in)
{
	switch (e->kind) {
	case KX_IN:
		*uses_in = true;
		return true;
	case KX_CONST:
		return false;   /* a constant alone is not applied per input */
	case KX_IDX:
		return false;
	case KX_OP:
		break;
	}
	const KExpr *x = e->arg[0], *y = kop_arity(e->op) > 1 ? e->arg[1] : NULL;
	switch (e->op) {
	case KOP_NEG:
		return agg == AGG_ADD && kx_distributes(x, agg, uses_in);
	case KOP_MUL:
		if (y && y->kind == KX_CONST)
			return (agg == AGG_ADD || y->val >= 0) && kx_distributes(x, agg, uses_in);
		if (x->kind == KX_CONST)
			return (agg == AGG_ADD || x->val >= 0) && kx_distributes(y, agg, uses_in);
		return false;
	case KOP_DIV:
		return y->kind == KX_CONST && (agg == AGG_ADD || y->val > 0) && kx_distributes(x, agg, uses_in);
	case KOP_ADD:
	case KOP_SUB:
		/* x + c is monotone: distributes over max and min, not sum */
		if (agg == AGG_ADD)
			return false;
		if (y->kind == KX_CONST)
			return kx_distributes(x, agg, uses_in);
		if (x->kind == KX_CONST && e->op == KOP_ADD)
			return kx_distributes(y, agg, uses_in);
		return false;
	case KOP_RELU: case KOP_EXP: case KOP_SIGMOID: case KOP_TANH:
		return agg != AGG_ADD && kx_distributes(x, agg, uses_in);
	default:
		return false;
	}
}

bool ist_dim_split(const IstLoop *l, const Tensor *ten, int d)
{
	for (int z = 0; z < l->nsplit && ten->dimsize[d]; z++)
		if (!strcmp(ten->dimsize[d], l->split[z]))
			return true;
	return false;
}

bool ist_param_loaded(const TraProg *body, int tensor)
{
	if (body->tensors.v[tensor].role != TENSOR_PARAM)
		return false;
	for (int k = 0; k < body->ops.n; k++)
		if (body->ops.v[k].kind == TRA_LOAD && body->ops.v[k].u.init.tensor == tensor)
			return true;
	return false;
}

IstTraffic ist_traffic(const TraProg *body, const IstLoop *l, int n)
{
	IstTraffic t = {0};
	int64_t most = (l->count + n - 1) / n;
	t.rounds = (most + l->every - 1) / l->every;
	for (int i = 0; i < body->tensors.n; i++) {
		const Tensor *ten = &body->tensors.v[i];
		if (!ist_param_loaded(body, i))
			continue;
		double whole = 1;
		int nsplit = 0;
		for (int d = 0; d < ten->rank; d++) {
			bool split = ist_dim_split(l, ten, d);
			nsplit += split;
			whole *= (double)ten->shape[d] * (split ? n : 1);
		}
		if (nsplit == 0) {
			t.average += n > 1 ? 2.0 * (n - 1) * whole : 0;
			t.gather += n > 1 ? 2.0 * (n - 1) * whole : 0;
			continue;
		}
		double slices = nsplit == 1 ? whole : whole / n;   /* what subnets hold */
		t.thesis += slices;
		t.exchange += slices * (1.0 - 1.0 / n);
		/* each entry some subnet held goes from its holder to the n - 1 others */
		double held = nsplit == 1 ? whole : whole * (1.0 - pow(1.0 - 1.0 / n, (double)t.rounds));
		t.gather += (n - 1) * held;
	}
	return t;
}
