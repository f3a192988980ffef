/*
 * interp.c: an in-process interpreter of IA plans over simulated sites.
 *
 * It executes a plan the way the paper defines the IA (section 4): a
 * physical relation is a set of (key, chunk, site) triples; bcast gives
 * every tuple every site, shuffle moves each tuple to the site its
 * partitioning dims give (the runtime's trt_site), local joins pair only
 * tuples on one site and local aggregations group by key *and* site.  So a
 * plan that is wrong about where tuples live computes a wrong answer here,
 * as it would on MPI ranks, and two plans are equivalent when the relations
 * they write are equal (the site projected away).  The rules' tests run
 * both sides of each rule here on random data (tests/unit/test_rules.c).
 *
 * Everything is f64 and simple: tuples in arrays, kernels evaluated
 * element by element from their expression trees.  Small data only.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

typedef struct Tup {
	int64_t key[MAXDIM];
	int site;
	double *v;              /* the chunk, dense row-major over its chunk dims */
} Tup;

typedef struct Rel {
	RelType type;
	PlaceKind kind;
	Vec(Tup) t;
} Rel;

typedef struct Interp {
	const IaPlan *p;
	int s;
	Rel **rel;              /* per op */
	Rel **var;              /* per tensor: a param's value */
	Dense *const *inputs;
	Buf *err;
	bool ok;
} Interp;

static void fail(Interp *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(Interp *in, const char *fmt, ...)
{
	if (!in->ok)
		return;
	in->ok = false;
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(in->err, fmt, ap);
	va_end(ap);
}

void dense_free(Dense *d)
{
	if (!d)
		return;
	free(d->v);
	free(d);
}

/* ---- chunks ---- */


static Rel *rel_new(const RelType *t, PlaceKind k)
{
	Rel *r = xcalloc(1, sizeof *r);
	r->type = *t;
	r->kind = k;
	return r;
}

static void rel_free(Rel *r)
{
	if (!r)
		return;
	for (int i = 0; i < r->t.n; i++)
		free(r->t.v[i].v);
	vec_free(&r->t);
	free(r);
}

static void push(Rel *r, const int64_t *key, int site, const double *v, int64_t n)
{
	Tup t = {.site = site, .v = xmalloc((size_t)(n ? n : 1) * sizeof(double))};
	memcpy(t.key, key, sizeof t.key);
	if (v)
		memcpy(t.v, v, (size_t)n * sizeof(double));
	else
		memset(t.v, 0, (size_t)(n ? n : 1) * sizeof(double));
	vec_push(&r->t, t);
}

static bool same_key(const int64_t *a, const int64_t *b, int n)
{
	return !memcmp(a, b, (size_t)n * sizeof *a);
}

/* Every key below the frontier, in row-major order: returns false at the end. */
static bool next_key(const RelType *t, int64_t *key)
{
	for (int d = t->nkey - 1; d >= 0; d--) {
		if (++key[d] < rel_frontier(t, d))
			return true;
		key[d] = 0;
	}
	return false;
}

/* A relation of a dense tensor (key dims = tensor dims, chunks in order),
 * tuples placed by p over s sites. */
static Rel *from_dense(const Dense *x, const RelType *t, const Place *p, int s)
{
	Rel *r = rel_new(t, p->kind);
	int64_t key[MAXDIM] = {0};
	do {
		int64_t n = rel_chunk_elems(t, key);
		double *v = xmalloc((size_t)(n ? n : 1) * sizeof *v);
		/* odometer over the chunk's elements */
		int64_t idx[MAXDIM] = {0};
		for (int64_t e = 0; e < n; e++) {
			int64_t flat = 0;
			for (int d = 0; d < x->rank; d++) {
				int c = rel_chunkpos(t, d);
				int64_t g = c >= 0 ? rel_chunk_off(t, d, key[d]) + idx[c] : key[d] * t->block[d];
				flat = flat * x->shape[d] + g;
			}
			v[e] = x->v[flat];
			for (int c = t->nchunk - 1; c >= 0; c--) {
				if (++idx[c] < rel_chunk_len(t, t->chunkdim[c], key[t->chunkdim[c]]))
					break;
				idx[c] = 0;
			}
		}
		if (p->kind == PL_ALL)
			for (int i = 0; i < s; i++)
				push(r, key, i, v, n);
		else
			push(r, key, place_site(p, t, key, s), v, n);
		free(v);
	} while (t->nkey > 0 && next_key(t, key));
	return r;
}

static Dense *to_dense(Interp *in, const Rel *r, const Tensor *ten);

/* A window of a along key dim `dim` from off on (zero outside a), placed
 * as op says. */
static Rel *do_slice(Interp *in, const Rel *a, int64_t off, const IaOp *op)
{
	const RelType *at = &a->type, *t = &op->type;
	Tensor whole = {.name = "a sliced relation", .rank = at->nkey};
	for (int d = 0; d < at->nkey; d++)
		whole.shape[d] = at->extent[d];
	Dense *x = to_dense(in, a, &whole);
	if (!x)
		return NULL;
	int dim = op->u.slice.dim;
	Dense y = {.rank = t->nkey};
	int64_t n = 1, inner = 1;
	for (int d = 0; d < t->nkey; d++) {
		y.shape[d] = t->extent[d];
		n *= t->extent[d];
		if (d > dim)
			inner *= t->extent[d];
	}
	y.v = xcalloc((size_t)(n ? n : 1), sizeof *y.v);
	for (int64_t e = 0; e < n; e++) {
		int64_t outer = e / inner / t->extent[dim], j = e / inner % t->extent[dim], src = -1;
		int64_t stride = op->u.slice.stride;
		if (!op->u.slice.scatter)
			src = stride * j + off;
		else if ((j - off) % stride == 0)
			src = (j - off) / stride;
		if (src >= 0 && src < at->extent[dim])
			y.v[e] = x->v[(outer * at->extent[dim] + src) * inner + e % inner];
	}
	Rel *r = from_dense(&y, t, &op->place, in->s);
	free(y.v);
	dense_free(x);
	return r;
}

/* A halo: each chunk of op's type cut from the whole of a (the
 * exchange's result: what moves is the cost model's and the runtime's). */
static Rel *do_halo(Interp *in, const Rel *a, const IaOp *op)
{
	Tensor whole = {.name = "a relation with halos", .rank = a->type.nkey};
	for (int d = 0; d < a->type.nkey; d++)
		whole.shape[d] = a->type.extent[d];
	Dense *x = to_dense(in, a, &whole);
	if (!x)
		return NULL;
	Rel *r = from_dense(x, &op->type, &op->place, in->s);
	dense_free(x);
	return r;
}

/* ---- kernels ---- */

typedef struct KEval {
	const Kernel *k;
	const RelType *t[2];
	const int64_t *key[2];
	const double *v[2];
	int64_t ext[2 * MAXDIM];        /* per label: its extent in these chunks */
	int64_t off[2 * MAXDIM];        /* per label: the chunk's offset in the tensor */
	int64_t at[2 * MAXDIM];         /* per label: the current index */
} KEval;

static double in_elem(KEval *e, int i)
{
	const Kernel *k = e->k;
	int64_t flat = 0;
	for (int c = 0; c < k->nindim[i]; c++)
		flat = flat * e->ext[k->inlab[i][c]] + e->at[k->inlab[i][c]];
	return e->v[i][flat];
}

static double kx_eval(KEval *e, const KExpr *x)
{
	switch (x->kind) {
	case KX_IN:
		return in_elem(e, x->in);
	case KX_CONST:
		return x->val;
	case KX_IDX:
		return (double)(e->off[x->in] + e->at[x->in]);
	case KX_OP:
		break;
	}
	double a = kx_eval(e, x->arg[0]);
	double b = kop_arity(x->op) > 1 ? kx_eval(e, x->arg[1]) : 0;
	switch (x->op) {
	case KOP_NEG: return -a;
	case KOP_STOP: return a;
	case KOP_EXP: return exp(a);
	case KOP_LOG: return log(a);
	case KOP_SQRT: return sqrt(a);
	case KOP_ABS: return fabs(a);
	case KOP_TANH: return tanh(a);
	case KOP_SIGMOID: return 1 / (1 + exp(-a));
	case KOP_RELU: return a > 0 ? a : 0;
	case KOP_ADD: return a + b;
	case KOP_SUB: return a - b;
	case KOP_MUL: return a * b;
	case KOP_DIV: return a / b;
	case KOP_POW: return pow(a, b);
	case KOP_LT: return a < b;
	case KOP_LE: return a <= b;
	case KOP_GT: return a > b;
	case KOP_GE: return a >= b;
	case KOP_EQ: return a == b;
	case KOP_NE: return a != b;
	case KOP_WHERE: return a != 0 ? b : kx_eval(e, x->arg[2]);
	}
	return NAN;
}

static double combine(AggKind a, double x, double y)
{
	switch (a) {
	case AGG_ADD: return x + y;
	case AGG_MAX: return y > x ? y : x;
	case AGG_MIN: return y < x ? y : x;
	}
	return NAN;
}

/* out (sized by the output's chunk) = the kernel over the inputs' chunks;
 * acc: combine into out with the kernel's reduction. */
static void run_kernel(const Kernel *k, int nin, const RelType *const *t, const int64_t *const *key,
                       const double *const *v, double *out, bool acc)
{
	KEval e = {.k = k};
	for (int l = 0; l < k->nlab; l++)
		e.ext[l] = 1;
	for (int i = 0; i < nin; i++) {
		e.t[i] = t[i];
		e.key[i] = key[i];
		e.v[i] = v[i];
		for (int c = 0; c < k->nindim[i]; c++) {
			int d = t[i]->chunkdim[c], l = k->inlab[i][c];
			e.ext[l] = rel_chunk_len(t[i], d, key[i][d]);
			e.off[l] = key[i][d] * t[i]->block[d];
		}
	}
	bool isout[2 * MAXDIM] = {0};
	for (int c = 0; c < k->noutdim; c++)
		isout[k->outlab[c]] = true;
	int64_t nout = 1, nred = 1;
	for (int l = 0; l < k->nlab; l++)
		*(isout[l] ? &nout : &nred) *= e.ext[l];
	for (int64_t o = 0; o < nout; o++) {
		int64_t rest = o;
		for (int c = k->noutdim - 1; c >= 0; c--) {
			int l = k->outlab[c];
			e.at[l] = rest % e.ext[l];
			rest /= e.ext[l];
		}
		double r = 0;
		bool first = true;
		for (int64_t q = 0; q < nred; q++) {
			int64_t rr = q;
			for (int l = k->nlab - 1; l >= 0; l--) {
				if (isout[l])
					continue;
				e.at[l] = rr % e.ext[l];
				rr /= e.ext[l];
			}
			double x = kx_eval(&e, k->expr);
			r = first ? x : combine(k->red, r, x);
			first = false;
		}
		out[o] = acc ? combine(k->red, out[o], r) : r;
	}
}

/* A convolution's kernel (Kernel.win) element by element: each label over
 * the chunk that carries it plainly (the output's, in0's, else in1's at a
 * dim no window reads), in1 read at each window's position, the terms
 * outside in1's chunk zero.  ot, okey: the output chunk's type and key. */
static void run_conv(const Kernel *k, const RelType *const *t, const int64_t *const *key, const double *const *v,
                     const RelType *ot, const int64_t *okey, double *out, bool acc)
{
	int64_t ext[2 * MAXDIM], off[2 * MAXDIM], at[2 * MAXDIM];
	bool isout[2 * MAXDIM] = {0}, set[2 * MAXDIM] = {0};
	int win[MAXDIM];
	for (int c = 0; c < k->nindim[1]; c++)
		win[c] = -1;
	for (int w = 0; w < k->nwin; w++)
		win[k->win[w].dim] = w;
	for (int c = 0; c < k->noutdim; c++) {
		int d = ot->chunkdim[c], l = k->outlab[c];
		ext[l] = rel_chunk_len(ot, d, okey[d]);
		off[l] = okey[d] * ot->block[d];
		isout[l] = set[l] = true;
	}
	for (int i = 0; i < 2; i++)
		for (int c = 0; c < k->nindim[i]; c++) {
			int d = t[i]->chunkdim[c], l = k->inlab[i][c];
			if (set[l] || (i == 1 && win[c] >= 0))
				continue;
			ext[l] = rel_chunk_len(t[i], d, key[i][d]);
			off[l] = key[i][d] * t[i]->block[d];
			set[l] = true;
		}
	int64_t nout = 1, nred = 1;
	for (int l = 0; l < k->nlab; l++) {
		if (!set[l])
			return;         /* verify.c's invariant: never here */
		*(isout[l] ? &nout : &nred) *= ext[l];
	}
	for (int64_t o = 0; o < nout; o++) {
		int64_t rest = o;
		for (int c = k->noutdim - 1; c >= 0; c--) {
			int l = k->outlab[c];
			at[l] = rest % ext[l];
			rest /= ext[l];
		}
		double r = 0;
		for (int64_t q = 0; q < nred; q++) {
			int64_t rr = q;
			for (int l = k->nlab - 1; l >= 0; l--) {
				if (isout[l])
					continue;
				at[l] = rr % ext[l];
				rr /= ext[l];
			}
			int64_t f0 = 0, f1 = 0;
			for (int c = 0; c < k->nindim[0]; c++)
				f0 = f0 * ext[k->inlab[0][c]] + at[k->inlab[0][c]];
			bool inside = true;
			for (int c = 0; c < k->nindim[1]; c++) {
				int d = t[1]->chunkdim[c], l = k->inlab[1][c];
				int64_t n = rel_chunk_len(t[1], d, key[1][d]), x = at[l];
				if (win[c] >= 0) {
					int lab = k->win[win[c]].lab;
					x = off[l] + at[l] + k->win[win[c]].coef * (off[lab] + at[lab]) + k->win[win[c]].shift -
					    rel_chunk_off(t[1], d, key[1][d]);
					inside &= x >= 0 && x < n;
				}
				f1 = f1 * n + x;
			}
			if (inside)
				r += v[0][f0] * v[1][f1];
		}
		out[o] = acc ? out[o] + r : r;
	}
}

/* ---- ops ---- */

static Rel *do_move(Interp *in, const Rel *a, const IaOp *op)
{
	int s = in->s;
	Rel *r = rel_new(&a->type, op->place.kind);
	int64_t n;
	if (op->kind == IA_BCAST) {
		r->kind = PL_ALL;
		if (a->kind == PL_ALL) {
			for (int i = 0; i < a->t.n; i++)
				push(r, a->t.v[i].key, a->t.v[i].site, a->t.v[i].v, rel_chunk_elems(&a->type, a->t.v[i].key));
			return r;
		}
		for (int i = 0; i < a->t.n; i++) {
			n = rel_chunk_elems(&a->type, a->t.v[i].key);
			for (int x = 0; x < s; x++)
				push(r, a->t.v[i].key, x, a->t.v[i].v, n);
		}
		if (a->kind == PL_PARTIAL)
			r->kind = PL_PARTIAL;   /* duplicates still to be combined */
		return r;
	}
	/* shuffle: from everywhere, each site keeps its share */
	for (int i = 0; i < a->t.n; i++) {
		const Tup *t = &a->t.v[i];
		int to = place_site(&op->place, &a->type, t->key, s);
		if (a->kind == PL_ALL && t->site != to)
			continue;
		push(r, t->key, to, t->v, rel_chunk_elems(&a->type, t->key));
	}
	r->kind = a->kind == PL_PARTIAL ? PL_PARTIAL : PL_PART;
	return r;
}

/* Find or add the tuple (key, site) in r; *fresh when added. */
static Tup *lookup(Rel *r, const int64_t *key, int site, bool *fresh)
{
	for (int i = 0; i < r->t.n; i++)
		if (r->t.v[i].site == site && same_key(r->t.v[i].key, key, r->type.nkey)) {
			*fresh = false;
			return &r->t.v[i];
		}
	*fresh = true;
	push(r, key, site, NULL, rel_chunk_elems(&r->type, key));
	return &r->t.v[r->t.n - 1];
}

/* A sampled join's mask tuple for join key jk on site s, or NULL: the
 * join computes nothing there. */
static const Tup *mask_tuple(const Rel *m, const JoinMask *jm, const int64_t *jk, int s)
{
	int64_t mk[MAXDIM] = {0};
	for (int d = 0; d < jm->nkey; d++)
		mk[d] = jk[jm->key[d]];
	for (int i = 0; i < m->t.n; i++)
		if (m->t.v[i].site == s && same_key(m->t.v[i].key, mk, jm->nkey))
			return &m->t.v[i];
	return NULL;
}

/* The elements a sampled join leaves out are zero: those its mask does
 * not hold (its chunk has the output's shape). */
static void mask_chunk(double *v, const Tup *m, int64_t n)
{
	for (int64_t e = 0; e < n; e++)
		if (m->v[e] == 0)
			v[e] = 0;
}

/* A join's block function: a plain kernel's (run_kernel) or a
 * convolution's (run_conv), out the chunk of type ot and key okey. */
typedef void BlockFn(const Kernel *k, const RelType *const *t, const int64_t *const *key, const double *const *v,
                     const RelType *ot, const int64_t *okey, double *out, bool acc);

static void join_block(const Kernel *k, const RelType *const *t, const int64_t *const *key, const double *const *v,
                       const RelType *ot, const int64_t *okey, double *out, bool acc)
{
	(void)ot, (void)okey;
	run_kernel(k, 2, t, key, v, out, acc);
}

static Rel *do_join(Interp *in, const Rel *l, const Rel *rr, const Rel *mask, const IaOp *op, BlockFn *block)
{
	Rel *r = rel_new(&op->type, op->place.kind);
	int nl = l->type.nkey;
	const JoinMask *jm = &op->u.join.mask;
	for (int i = 0; i < l->t.n; i++)
		for (int j = 0; j < rr->t.n; j++) {
			const Tup *a = &l->t.v[i], *b = &rr->t.v[j];
			if (a->site != b->site)
				continue;
			bool match = true;
			for (int m = 0; m < op->u.join.on.nmatch; m++)
				match &= a->key[op->u.join.on.lkey[m]] == b->key[op->u.join.on.rkey[m]];
			if (!match)
				continue;
			int64_t jk[MAXDIM] = {0};
			memcpy(jk, a->key, (size_t)nl * sizeof *jk);
			for (int d = 0; d < rr->type.nkey; d++)
				jk[ia_join_out_dim(nl, &op->u.join.on, d)] = b->key[d];
			const RelType *ts[2] = {&l->type, &rr->type};
			const int64_t *ks[2] = {a->key, b->key};
			const double *vs[2] = {a->v, b->v};
			const Tup *m = jm->on ? mask_tuple(mask, jm, jk, a->site) : NULL;
			if (jm->on && !m)
				continue;
			if (op->u.join.ngroup < 0) {
				push(r, jk, a->site, NULL, rel_chunk_elems(&r->type, jk));
				block(op->u.join.kernel, ts, ks, vs, &r->type, jk, r->t.v[r->t.n - 1].v, false);
				if (m)
					mask_chunk(r->t.v[r->t.n - 1].v, m, rel_chunk_elems(&r->type, jk));
				continue;
			}
			int64_t gk[MAXDIM] = {0};
			for (int g = 0; g < op->u.join.ngroup; g++)
				gk[g] = op->u.join.group[g] < 0 ? 0 : jk[op->u.join.group[g]];
			bool fresh;
			Tup *o = lookup(r, gk, a->site, &fresh);
			block(op->u.join.kernel, ts, ks, vs, &r->type, gk, o->v, !fresh);
			if (m)
				mask_chunk(o->v, m, rel_chunk_elems(&r->type, gk));
		}
	(void)in;
	return r;
}

/* A two-phase schedule: each join group's chunks meet on the site the
 * schedule gives it (a copy of each sent there), the site sums its join
 * groups per aggregation group, and each sum goes to the site the output's
 * partitioning gives the group.  Run on another site count, schedule site
 * s runs on s modulo the count, as in the runtime. */
static Rel *do_twophase(Interp *in, const Rel *l, const Rel *rr, const IaOp *op)
{
	const TpSched *ts = op->u.join.sched;
	int nl = l->type.nkey;
	RelType jt = ia_join_type(&l->type, &rr->type, &op->u.join.on);
	Rel *part = rel_new(&op->type, PL_PARTIAL);
	int64_t jk[MAXDIM] = {0};
	for (int64_t j = 0; j < ts->njoin && in->ok; j++) {
		int64_t rest = j;
		for (int d = jt.nkey - 1; d >= 0; d--) {
			jk[d] = rest % rel_frontier(&jt, d);
			rest /= rel_frontier(&jt, d);
		}
		int64_t rk[MAXDIM] = {0}, gk[MAXDIM] = {0};
		for (int d = 0; d < rr->type.nkey; d++)
			rk[d] = jk[ia_join_out_dim(nl, &op->u.join.on, d)];
		for (int g = 0; g < op->u.join.ngroup; g++)
			gk[g] = jk[op->u.join.group[g]];
		const Tup *a = NULL, *b = NULL;
		for (int i = 0; i < l->t.n && !a; i++)
			if (same_key(l->t.v[i].key, jk, nl))
				a = &l->t.v[i];
		for (int i = 0; i < rr->t.n && !b; i++)
			if (same_key(rr->t.v[i].key, rk, rr->type.nkey))
				b = &rr->t.v[i];
		if (!a || !b) {
			fail(in, "two-phase join group %" PRId64 " lacks a chunk", j);
			break;
		}
		const RelType *tys[2] = {&l->type, &rr->type};
		const int64_t *ks[2] = {a->key, b->key};
		const double *vs[2] = {a->v, b->v};
		bool fresh;
		Tup *o = lookup(part, gk, ts->site[j] % in->s, &fresh);
		run_kernel(op->u.join.kernel, 2, tys, ks, vs, o->v, !fresh);
	}
	Rel *r = rel_new(&op->type, PL_PART);
	for (int i = 0; i < part->t.n; i++) {
		const Tup *t = &part->t.v[i];
		bool fresh;
		Tup *o = lookup(r, t->key, place_site(&op->place, &op->type, t->key, in->s), &fresh);
		int64_t n = rel_chunk_elems(&r->type, t->key);
		for (int64_t e = 0; e < n; e++)
			o->v[e] = fresh ? t->v[e] : combine(op->u.join.kernel->red, o->v[e], t->v[e]);
	}
	rel_free(part);
	return r;
}

static Rel *do_agg(const Rel *a, const IaOp *op)
{
	Rel *r = rel_new(&op->type, op->place.kind);
	for (int i = 0; i < a->t.n; i++) {
		const Tup *t = &a->t.v[i];
		int64_t gk[MAXDIM] = {0};
		for (int g = 0; g < op->u.agg.ngroup; g++)
			gk[g] = t->key[op->u.agg.group[g]];
		bool fresh;
		Tup *o = lookup(r, gk, t->site, &fresh);
		int64_t n = rel_chunk_elems(&r->type, gk);
		for (int64_t e = 0; e < n; e++)
			o->v[e] = fresh ? t->v[e] : combine(op->u.agg.agg, o->v[e], t->v[e]);
	}
	return r;
}

static Rel *do_map(const Rel *a, const IaOp *op)
{
	Rel *r = rel_new(&op->type, op->place.kind);
	for (int i = 0; i < a->t.n; i++) {
		const Tup *t = &a->t.v[i];
		if (op->u.map.kernel) {
			push(r, t->key, t->site, NULL, rel_chunk_elems(&r->type, t->key));
			const RelType *ts[1] = {&a->type};
			const int64_t *ks[1] = {t->key};
			const double *vs[1] = {t->v};
			run_kernel(op->u.map.kernel, 1, ts, ks, vs, r->t.v[r->t.n - 1].v, false);
			continue;
		}
		int64_t k[MAXDIM] = {0};
		for (int d = 0; d < op->u.map.nkey; d++)
			k[d] = op->u.map.keymap[d] >= 0 ? t->key[op->u.map.keymap[d]] : 0;
		/* inserted dims: one copy per key value (an odometer) */
		for (;;) {
			push(r, k, t->site, t->v, rel_chunk_elems(&r->type, k));
			int d = op->u.map.nkey - 1;
			for (; d >= 0; d--) {
				if (op->u.map.keymap[d] >= 0)
					continue;
				if (++k[d] < rel_frontier(&r->type, d))
					break;
				k[d] = 0;
			}
			if (d < 0)
				break;
		}
	}
	return r;
}

static Rel *do_filter(const Rel *a, const IaOp *op)
{
	Rel *r = rel_new(&a->type, a->kind);
	for (int i = 0; i < a->t.n; i++) {
		const Tup *t = &a->t.v[i];
		bool keep = true;
		for (int e = 0; e < op->u.filter.pred.neq; e++)
			keep &= t->key[op->u.filter.pred.eq[e][0]] == t->key[op->u.filter.pred.eq[e][1]];
		if (keep)
			push(r, t->key, t->site, t->v, rel_chunk_elems(&a->type, t->key));
	}
	return r;
}

Dense *dense_zeros(const Tensor *t, int64_t *n)
{
	Dense *d = xcalloc(1, sizeof *d);
	d->rank = t->rank;
	*n = 1;
	for (int i = 0; i < t->rank; i++) {
		d->shape[i] = t->shape[i];
		*n *= t->shape[i];
	}
	d->v = xcalloc((size_t)(*n ? *n : 1), sizeof *d->v);
	return d;
}

/* A param's initial value: a deterministic stand-in for the runtime's
 * random initialisers (only plans are compared here). */
static Dense *init_dense(const Tensor *t, Dense *const *inputs, int tensor)
{
	if (t->init == INIT_FILE && inputs && inputs[tensor])
		return NULL;
	int64_t n;
	Dense *d = dense_zeros(t, &n);
	for (int64_t e = 0; e < n; e++)
		d->v[e] = t->init == INIT_ZEROS ? 0 : t->init == INIT_ONES ? 1 : sin(1.0 + (double)e * 0.7) * 0.5;
	return d;
}

/* The dense tensor a written relation holds; false if its tuples are not
 * one per key (copies under all must agree). */
static Dense *to_dense(Interp *in, const Rel *r, const Tensor *ten)
{
	if (r->kind == PL_PARTIAL) {
		fail(in, "%s is written from partial aggregates", ten->name);
		return NULL;
	}
	Dense *d = xcalloc(1, sizeof *d);
	d->rank = ten->rank;
	int64_t n = 1;
	for (int i = 0; i < ten->rank; i++) {
		d->shape[i] = ten->shape[i];
		n *= ten->shape[i];
	}
	d->v = xcalloc((size_t)(n ? n : 1), sizeof *d->v);
	char *seen = xcalloc((size_t)(n ? n : 1), 1);
	const RelType *t = &r->type;
	for (int i = 0; i < r->t.n; i++) {
		const Tup *tp = &r->t.v[i];
		int64_t m = rel_chunk_elems(t, tp->key);
		int64_t idx[MAXDIM] = {0};
		for (int64_t e = 0; e < m; e++) {
			int64_t flat = 0;
			for (int dd = 0; dd < ten->rank; dd++) {
				int c = rel_chunkpos(t, dd);
				flat = flat * ten->shape[dd] + tp->key[dd] * t->block[dd] + (c >= 0 ? idx[c] : 0);
			}
			if (seen[flat] && d->v[flat] != tp->v[e] && !(isnan(d->v[flat]) && isnan(tp->v[e])))
				fail(in, "%s holds two values at one element (tuples on several sites disagree)", ten->name);
			seen[flat] = 1;
			d->v[flat] = tp->v[e];
			for (int c = t->nchunk - 1; c >= 0; c--) {
				if (++idx[c] < rel_chunk_len(t, t->chunkdim[c], tp->key[t->chunkdim[c]]))
					break;
				idx[c] = 0;
			}
		}
	}
	for (int64_t e = 0; e < n; e++)
		if (!seen[e])
			fail(in, "%s has no value at element %" PRId64, ten->name, e);
	free(seen);
	return d;
}

static Rel *rel_copy(const Rel *a)
{
	Rel *r = rel_new(&a->type, a->kind);
	for (int i = 0; i < a->t.n; i++)
		push(r, a->t.v[i].key, a->t.v[i].site, a->t.v[i].v, rel_chunk_elems(&a->type, a->t.v[i].key));
	return r;
}

/* ---- gathers ---- */

/* Element g (a global index per key dim) in tuple t's chunk. */
static double *elem_at(const RelType *ty, const Tup *t, const int64_t *g)
{
	int64_t flat = 0;
	for (int c = 0; c < ty->nchunk; c++) {
		int d = ty->chunkdim[c];
		flat = flat * rel_chunk_len(ty, d, t->key[d]) + (g[d] - t->key[d] * ty->block[d]);
	}
	return &t->v[flat];
}

/* The tuple with this key, on `site` (or any site when site < 0). */
static Tup *find_tup(const Rel *r, const int64_t *key, int site)
{
	for (int i = 0; i < r->t.n; i++)
		if (same_key(r->t.v[i].key, key, r->type.nkey) && (site < 0 || r->t.v[i].site == site))
			return &r->t.v[i];
	return NULL;
}

/* Calls f for each element of key's chunk of t with its global index. */
#define FOR_ELEMS(t, key, g, body) do { \
		int64_t at_[MAXDIM] = {0}, n_ = rel_chunk_elems(t, key); \
		for (int64_t e_ = 0; e_ < n_; e_++) { \
			for (int d_ = 0; d_ < (t)->nkey; d_++) \
				g[d_] = (key)[d_] * (t)->block[d_]; \
			for (int c_ = 0; c_ < (t)->nchunk; c_++) \
				g[(t)->chunkdim[c_]] += at_[c_]; \
			body; \
			for (int c_ = (t)->nchunk - 1; c_ >= 0; c_--) { \
				if (++at_[c_] < rel_chunk_len(t, (t)->chunkdim[c_], (key)[(t)->chunkdim[c_]])) \
					break; \
				at_[c_] = 0; \
			} \
		} \
	} while (0)

/* The table's global index for a row element g of the gather's result
 * (index dims first), or false when the index value is out of range. */
static bool table_index(const RelType *tab, int gdim, int ni, const int64_t *g, double v, int64_t *tg)
{
	if (!(v >= 0 && v < (double)tab->extent[gdim]))
		return false;
	for (int d = 0, o = ni; d < tab->nkey; d++)
		tg[d] = d == gdim ? (int64_t)v : g[o++];
	return true;
}

/* gather (the table on the index's site) and lookup (anywhere) */
static Rel *do_gather(Interp *in, const Rel *tab, const Rel *ix, const IaOp *op)
{
	const RelType *ot = &op->type, *tt = &tab->type, *it = &ix->type;
	int gdim = op->u.gather.dim, ni = it->nkey;
	Rel *r = rel_new(ot, ix->kind);
	for (int i = 0; i < ix->t.n && in->ok; i++) {
		const Tup *x = &ix->t.v[i];
		int64_t okey[MAXDIM] = {0};
		memcpy(okey, x->key, (size_t)ni * sizeof *okey);
		do {
			push(r, okey, x->site, NULL, rel_chunk_elems(ot, okey));
			Tup *o = &r->t.v[r->t.n - 1];
			int64_t g[MAXDIM], tg[MAXDIM], tk[MAXDIM];
			FOR_ELEMS(ot, okey, g, {
				double v = *elem_at(it, x, g);
				if (!table_index(tt, gdim, ni, g, v, tg)) {
					fail(in, "op %d: index value %g outside 0..%" PRId64, (int)(op - in->p->ops.v), v,
					     tt->extent[gdim] - 1);
					return r;
				}
				for (int d = 0; d < tt->nkey; d++)
					tk[d] = tg[d] / tt->block[d];
				const Tup *src = find_tup(tab, tk, op->kind == IA_GATHER ? x->site : -1);
				if (!src) {
					fail(in, "op %d: the table's row is not %s", (int)(op - in->p->ops.v),
					     op->kind == IA_GATHER ? "on the index's site" : "anywhere");
					return r;
				}
				*elem_at(ot, o, g) = *elem_at(tt, src, tg);
			});
			/* the next key of the table's other dims */
			int d = ot->nkey - 1;
			for (; d >= ni; d--) {
				if (++okey[d] < rel_frontier(ot, d))
					break;
				okey[d] = 0;
			}
			if (d < ni)
				break;
		} while (true);
	}
	return r;
}

/* scatter-add: rows everywhere add only into their own site's result
 * tuples; placed rows into every copy of the result's tuple.  The result
 * starts as zeros, or as a copy of the base (placed as the result). */
static Rel *do_scatter(Interp *in, const Rel *rows, const Rel *ix, const Rel *base, const IaOp *op)
{
	const RelType *ot = &op->type, *rt = &rows->type, *it = &ix->type;
	int gdim = op->u.gather.dim, ni = it->nkey;
	Rel *r;
	if (base) {
		if (base->kind == PL_PARTIAL) {
			fail(in, "op %d scatters into partial aggregates", (int)(op - in->p->ops.v));
			return NULL;
		}
		r = rel_copy(base);
	} else {
		r = rel_new(ot, op->place.kind);
		int64_t key[MAXDIM] = {0};
		do {
			if (op->place.kind == PL_ALL)
				for (int s = 0; s < in->s; s++)
					push(r, key, s, NULL, rel_chunk_elems(ot, key));
			else
				push(r, key, place_site(&op->place, ot, key, in->s), NULL, rel_chunk_elems(ot, key));
		} while (ot->nkey > 0 && next_key(ot, key));
	}
	for (int i = 0; i < rows->t.n && in->ok; i++) {
		const Tup *x = &rows->t.v[i];
		const Tup *xi = find_tup(ix, x->key, x->site);
		if (!xi) {
			fail(in, "op %d: a row without its index on its site", (int)(op - in->p->ops.v));
			break;
		}
		int64_t g[MAXDIM], tg[MAXDIM], tk[MAXDIM];
		FOR_ELEMS(rt, x->key, g, {
			double v = *elem_at(it, xi, g);
			if (!table_index(ot, gdim, ni, g, v, tg)) {
				fail(in, "op %d: index value %g out of range", (int)(op - in->p->ops.v), v);
				return r;
			}
			for (int d = 0; d < ot->nkey; d++)
				tk[d] = tg[d] / ot->block[d];
			for (int k = 0; k < r->t.n; k++) {
				Tup *o = &r->t.v[k];
				if (same_key(o->key, tk, ot->nkey) && (rows->kind != PL_ALL || o->site == x->site))
					*elem_at(ot, o, tg) += op->u.gather.scale * *elem_at(rt, x, g);
			}
		});
	}
	return r;
}

/* The placement an op claims must be where its tuples are: partitioned
 * tuples on their site, one per key; everywhere, every key on every site. */
static void check_place(Interp *in, const Rel *r, const IaOp *op, int i)
{
	const RelType *t = &r->type;
	if (op->place.kind == PL_PART) {
		bool partials = r->kind == PL_PARTIAL;  /* shuffled partials: a key repeats until aggregated */
		for (int k = 0; k < r->t.n; k++) {
			const Tup *a = &r->t.v[k];
			if (a->site != place_site(&op->place, t, a->key, in->s)) {
				fail(in, "op %d claims a partitioning its tuples do not have", i);
				return;
			}
			for (int j = k + 1; j < r->t.n && !partials; j++)
				if (same_key(a->key, r->t.v[j].key, t->nkey)) {
					fail(in, "op %d holds one key twice but claims a partitioning", i);
					return;
				}
		}
	} else if (op->place.kind == PL_ALL && r->kind != PL_PARTIAL) {
		/* every key it holds (a filter leaves holes) on each site once */
		for (int k = 0; k < r->t.n; k++) {
			int copies = 0;
			unsigned long long seen = 0;
			for (int j = 0; j < r->t.n; j++)
				if (same_key(r->t.v[k].key, r->t.v[j].key, t->nkey)) {
					copies++;
					if (r->t.v[j].site < 64)
						seen |= 1ull << r->t.v[j].site;
				}
			if (copies != in->s || (in->s <= 64 && seen != (in->s == 64 ? ~0ull : (1ull << in->s) - 1))) {
				fail(in, "op %d claims every site but a key is on %d sites of %d", i, copies, in->s);
				return;
			}
		}
	}
}

/* The loops around the op being run: each one's first op and the passes
 * it has left. */
typedef struct Loops {
	Vec(int) start;
	Vec(int64_t) left;
} Loops;

/* An input's relation, from its value in in->inputs. */
static Rel *read_input(Interp *in, const IaOp *op)
{
	const Dense *d = in->inputs ? in->inputs[op->u.read.tensor] : NULL;
	if (!d) {
		fail(in, "no value for input %s", in->p->tra->tensors.v[op->u.read.tensor].name);
		return NULL;
	}
	return from_dense(d, &op->type, &op->place, in->s);
}

/* A param's initial value: its initialiser's stand-in, or its file's. */
static Rel *init_param(Interp *in, const IaOp *op)
{
	Dense *const *inputs = in->inputs;
	const Tensor *t = &in->p->tra->tensors.v[op->u.init.tensor];
	Dense *d = init_dense(t, inputs, op->u.init.tensor);
	if (!d && (!inputs || !inputs[op->u.init.tensor])) {
		fail(in, "no value for param %s", t->name);
		return NULL;
	}
	Rel *r = from_dense(d ? d : inputs[op->u.init.tensor], &op->type, &op->place, in->s);
	dense_free(d);
	return r;
}

static Rel *make_range(Interp *in, const IaOp *op)
{
	int64_t n = op->type.nkey ? op->type.extent[0] : 1;
	Dense d = {.rank = op->type.nkey, .shape = {n}};
	d.v = xcalloc((size_t)n, sizeof *d.v);
	for (int64_t e = 0; e < n; e++)
		d.v[e] = (double)e;
	Rel *r = from_dense(&d, &op->type, &op->place, in->s);
	free(d.v);
	return r;
}

/* The current pass of the loop at the counter's depth. */
static Rel *make_counter(Interp *in, int i, const Loops *lp)
{
	const IaOp *op = &in->p->ops.v[i];
	if (op->u.counter.depth >= lp->left.n) {
		fail(in, "op %d counts loop depth %d inside %d loops", i, op->u.counter.depth, (int)lp->left.n);
		return NULL;
	}
	const IaOp *l = &in->p->ops.v[lp->start.v[op->u.counter.depth]];
	double it = (double)(l->u.loop.count - lp->left.v[op->u.counter.depth]);
	Dense d = {.rank = 0, .v = &it};
	return from_dense(&d, &op->type, &op->place, in->s);
}

/* A join or convolution (block: its kernels') on inputs a, b and the mask
 * x[2] (when sampled). */
static Rel *run_join(Interp *in, int i, const Rel *a, const Rel *b, const int *x, BlockFn *block)
{
	const IaOp *op = &in->p->ops.v[i];
	if (a->kind == PL_PARTIAL || b->kind == PL_PARTIAL)
		fail(in, "op %d joins partial aggregates", i);
	const Rel *mask = NULL;
	if (op->u.join.mask.on) {
		mask = in->rel[x[2]];
		if (!mask || mask->kind == PL_PARTIAL) {
			fail(in, "op %d: its mask is partial aggregates or has no value", i);
			return NULL;
		}
	}
	return do_join(in, a, b, mask, op, block);
}

/* Op i's result (NULL: none, or a failure in in->err), its inputs a, b and
 * x[2]; a write's into outputs. */
static Rel *run_op(Interp *in, int i, const Rel *a, const Rel *b, const int *x, const Loops *lp, Dense **outputs)
{
	const IaPlan *p = in->p;
	const IaOp *op = &p->ops.v[i];
	switch (op->kind) {
	case IA_READ:
		return read_input(in, op);
	case IA_INIT:
		return init_param(in, op);
	case IA_RANGE:
		return make_range(in, op);
	case IA_COUNTER:
		return make_counter(in, i, lp);
	case IA_SLICE:
		if (a->kind == PL_PARTIAL || (b && b->kind != PL_ALL)) {
			fail(in, "op %d slices partials or at an offset not held everywhere", i);
			return NULL;
		}
		return do_slice(in, a, op->u.slice.shift + (b ? (int64_t)b->t.v[0].v[0] : 0), op);
	case IA_HALO:
		if (a->kind == PL_PARTIAL) {
			fail(in, "op %d exchanges the halos of partials", i);
			return NULL;
		}
		return do_halo(in, a, op);
	case IA_LOAD:
		if (!in->var[op->u.init.tensor]) {
			fail(in, "param %s loaded before it has a value", p->tra->tensors.v[op->u.init.tensor].name);
			return NULL;
		}
		return rel_copy(in->var[op->u.init.tensor]);
	case IA_STORE:
		rel_free(in->var[op->u.store.tensor]);
		in->var[op->u.store.tensor] = rel_copy(a);
		return NULL;
	case IA_PRINT:
	case IA_LOOP:
	case IA_ENDLOOP:
		return NULL;
	case IA_BCAST:
	case IA_SHUFFLE:
		return do_move(in, a, op);
	case IA_JOIN:
		return run_join(in, i, a, b, x, join_block);
	case IA_CONV:
		return run_join(in, i, a, b, x, run_conv);
	case IA_AGG:
		return do_agg(a, op);
	case IA_TWOPHASE:
		if (a->kind == PL_PARTIAL || b->kind == PL_PARTIAL)
			fail(in, "op %d runs a two-phase schedule over partial aggregates", i);
		return do_twophase(in, a, b, op);
	case IA_MAP:
		return do_map(a, op);
	case IA_GATHER:
	case IA_LOOKUP:
		return do_gather(in, a, b, op);
	case IA_SCATTER:
		if (op->u.gather.base >= 0 && !in->rel[x[2]]) {
			fail(in, "op %d: its base has no value", i);
			return NULL;
		}
		return do_scatter(in, a, b, op->u.gather.base >= 0 ? in->rel[x[2]] : NULL, op);
	case IA_FILTER:
		return do_filter(a, op);
	case IA_WRITE: {
		int t = op->u.write.tensor;
		Dense *d = to_dense(in, a, &p->tra->tensors.v[t]);
		if (outputs) {
			dense_free(outputs[t]);
			outputs[t] = d;
		} else {
			dense_free(d);
		}
		return NULL;
	}
	}
	tr_bug("bad IA op");
}

/* The op to run after op i, a loop's bound: past a loop that runs no
 * pass, back to the start of one with passes left. */
static int loop_step(const IaPlan *p, int i, Loops *lp)
{
	const IaOp *op = &p->ops.v[i];
	if (op->kind == IA_LOOP) {
		vec_push(&lp->start, i);
		vec_push(&lp->left, op->u.loop.count);
		if (op->u.loop.count > 0)
			return i;
		/* skip to the matching endloop */
		int depth = 0;
		for (i++; i < p->ops.n; i++) {
			if (p->ops.v[i].kind == IA_LOOP)
				depth++;
			else if (p->ops.v[i].kind == IA_ENDLOOP && depth-- == 0)
				break;
		}
		lp->start.n--;
		lp->left.n--;
		return i;
	}
	if (--lp->left.v[lp->left.n - 1] > 0)
		return lp->start.v[lp->start.n - 1];
	lp->start.n--;
	lp->left.n--;
	return i;
}

bool ia_interpret(const IaPlan *p, int sites, Dense *const *inputs, Dense **outputs, Buf *err)
{
	int n = p->ops.n, nt = p->tra->tensors.n;
	Interp in = {p, sites, xcalloc(n + 1, sizeof(Rel *)), xcalloc(nt + 1, sizeof(Rel *)), inputs, err, true};
	Loops lp = {0};
	for (int i = 0; i < n && in.ok; i++) {
		const IaOp *op = &p->ops.v[i];
		int x[MAXIN] = {-1, -1, -1};
		ia_inputs(op, x);
		Rel *a = x[0] >= 0 ? in.rel[x[0]] : NULL, *b = x[1] >= 0 ? in.rel[x[1]] : NULL;
		if ((x[0] >= 0 && !a) || (x[1] >= 0 && !b)) {
			fail(&in, "op %d reads op %d, which has no value", i, !a ? x[0] : x[1]);
			break;
		}
		if (op->kind == IA_LOOP || op->kind == IA_ENDLOOP) {
			i = loop_step(p, i, &lp);
			continue;
		}
		Rel *r = run_op(&in, i, a, b, x, &lp, outputs);
		if (r) {
			check_place(&in, r, op, i);
			rel_free(in.rel[i]);
			in.rel[i] = r;
		}
	}
	for (int i = 0; i < n; i++)
		rel_free(in.rel[i]);
	for (int i = 0; i < nt; i++)
		rel_free(in.var[i]);
	free(in.rel);
	free(in.var);
	vec_free(&lp.start);
	vec_free(&lp.left);
	return in.ok;
}
