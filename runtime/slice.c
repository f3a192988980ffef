/*
 * slice.c: loop counters and the windows they move (repeat b in NB with
 * X[b*B + n, d]).
 *
 * A counter is a 0-d i64 relation every rank makes from the generated
 * loop's variable.  A slice cuts the chunks of a window [off, off + extent)
 * along one key dim out of a relation every rank holds whole (TRT_ALL: the
 * data set is placed once, before the loop), so a step moves nothing; each
 * rank makes only the chunks its placement gives it.  Positions outside
 * the input read zero.  Every window copies row by row along the innermost
 * chunk dim: a row whose window is on another dim (or of stride 1) is a
 * run of the input, copied with one hash look-up per run piece; a row
 * along a strided window (or a scatter: a window's adjoint, the input put
 * back where a window took it from) steps through the input, looking a
 * chunk up when it leaves the last one.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

TrtRel *trt_counter(const TrtType *t, int64_t value)
{
	if (t->nkey != 0 || t->dtype != TRT_I64)
		rt_bug("a counter of %d key dims, %s", t->nkey, rt_dtype_name(t->dtype));
	TrtRel *r = trt_rel_new(t, (TrtPlace){.kind = TRT_ALL});
	size_t mark = rt_pin_mark();
	Chunk *c = rt_chunk_new(sizeof value);
	memcpy(rt_chunk_mut(c), &value, sizeof value);
	rt_rel_push(r, &value, c);      /* no key dims: the key is not read */
	rt_pin_release(mark);
	return r;
}

/* The input chunk the last row read from: consecutive rows of an output
 * chunk mostly read the same input chunk, looked up once. */
typedef struct Found {
	int valid;
	int64_t key[TRT_MAXDIM], pos, len[TRT_MAXDIM];
} Found;

/* Input chunk `key`'s position in `in` (-1: none) and its shape in f->len. */
static int64_t find_chunk(const TrtRel *in, const KeyIndex *ix, const int64_t *key, Found *f)
{
	int nkey = in->type.nkey, same = f->valid;
	for (int d = 0; same && d < nkey; d++)
		same = f->key[d] == key[d];
	if (same)
		return f->pos;
	memcpy(f->key, key, (size_t)nkey * sizeof *key);
	f->valid = 1;
	f->pos = rt_index_find(ix, in, key);
	if (f->pos >= 0)
		rt_chunk_shape(&in->type, key, f->len);
	return f->pos;
}

/* The input chunk key of positions g: the last chunk's along each dim g
 * is still inside, divided out only where it left it (a 64-bit division a
 * dim a row was most of a pooling window's time). */
static void key_of(const TrtType *it, const int64_t *g, const Found *f, int64_t *key)
{
	for (int d = 0; d < it->nkey; d++) {
		int64_t lo = f->key[d] * it->block[d];
		key[d] = f->valid && g[d] >= lo && g[d] < lo + it->block[d] ? f->key[d] : g[d] / it->block[d];
	}
}

/* Where positions g (gkl along dim kl) sit in input chunk pos (key, shape
 * len): the element's address, and in *step the elements between
 * neighbours along chunk dim cl. */
static const char *elem_at(const TrtRel *in, int64_t pos, const int64_t *key, const int64_t *len,
                           const int64_t *g, int kl, int64_t gkl, int cl, size_t es, int64_t *step)
{
	const TrtType *it = &in->type;
	int64_t at = 0, stride = 1;
	for (int c = it->nchunk - 1; c >= 0; c--) {
		int d = it->chunkdim[c];
		at += ((d == kl ? gkl : g[d]) - key[d] * it->block[d]) * stride;
		stride *= len[c];
	}
	*step = 1;
	for (int c = it->nchunk - 1; c > cl; c--)
		*step *= len[c];
	return (const char *)rt_chunk_data(in->chunks[pos]) + (size_t)at * es;
}

/* Elements [from, from + n) along the run of one output row, read from the
 * input at global positions g (g[kl] the first), into dst; zero where the
 * input has no chunk. */
static void copy_run(const TrtRel *in, const KeyIndex *ix, Found *f, int64_t *g, int kl, int cl, int64_t n,
                     char *dst, size_t es)
{
	const TrtType *it = &in->type;
	int64_t key[TRT_MAXDIM];
	const int64_t *len = f->len;
	while (n > 0) {
		key_of(it, g, f, key);
		int64_t seg = (key[kl] + 1) * it->block[kl] - g[kl];
		if (seg > n)
			seg = n;
		int64_t pos = find_chunk(in, ix, key, f);
		if (pos >= 0) {
			int64_t step;
			const char *src = elem_at(in, pos, key, len, g, kl, g[kl], cl, es, &step);
			if (step == 1)
				memcpy(dst, src, (size_t)seg * es);
			else
				for (int64_t j = 0; j < seg; j++)
					memcpy(dst + (size_t)j * es, src + (size_t)(j * step) * es, es);
		}
		dst += (size_t)seg * es;
		g[kl] += seg;
		n -= seg;
	}
}

/* One element of size es from src to dst. */
static inline void copy_elem(char *dst, const char *src, size_t es)
{
	switch (es) {
	case 4: {
		uint32_t v;
		memcpy(&v, src, 4);
		memcpy(dst, &v, 4);
		break;
	}
	case 8: {
		uint64_t v;
		memcpy(&v, src, 8);
		memcpy(dst, &v, 8);
		break;
	}
	default:
		memcpy(dst, src, es);
	}
}

/* n elements of one output row along the innermost chunk dim kl, strided
 * where the window's dim is kl itself: element i reads the input at
 * position s0 + i * sstep along kl (the row's other positions g) into
 * dst + i * dstep elements; zero (left) where that is outside the input or
 * in no chunk of it.  The input chunk is looked up when s leaves it, not
 * per element. */
static void copy_steps(const TrtRel *in, const KeyIndex *ix, Found *f, const int64_t *g, int kl, int cl,
                       int64_t s0, int64_t sstep, int64_t n, char *dst, int64_t dstep, size_t es)
{
	const TrtType *it = &in->type;
	int64_t key[TRT_MAXDIM];
	const int64_t *len = f->len;
	key_of(it, g, f, key);          /* key[kl] is set below, as s moves */
	int64_t ext = it->extent[kl], blk = it->block[kl];
	int64_t cstart = 0, cend = 0, step = 1;
	const char *base = NULL;        /* the element at cstart in its chunk; NULL: no chunk */
	for (int64_t i = 0, s = s0; i < n; i++, s += sstep) {
		if (s < 0 || s >= ext)
			continue;
		if (s < cstart || s >= cend) {
			key[kl] = s / blk;
			cstart = key[kl] * blk;
			cend = cstart + blk < ext ? cstart + blk : ext;
			int64_t pos = find_chunk(in, ix, key, f);
			base = NULL;
			if (pos >= 0) {
				base = elem_at(in, pos, key, len, g, kl, cstart, cl, es, &step);
			}
		}
		if (base)
			copy_elem(dst + (size_t)(i * dstep) * es, base + (size_t)((s - cstart) * step) * es, es);
	}
}

/*
 * An output chunk (key, shape len) that one input chunk serves whole: the
 * dims the window does not move have the input's blocks and chunk dims
 * (the same key, the same positions), and its reads along the window's
 * dim fall in one input chunk.  Its copy is then a strided loop: a table
 * per chunk dim of each position's offset in the input chunk (along the
 * window's dim, the element it reads; -1: zero), the rows along the last
 * dim but one walked innermost from their outer positions' sum, with no
 * chunk looked up and no key worked out a row.  cnn's pooling windows and
 * their adjoints cut [512, 4, 6, 12, 2] chunks, rows of 2 floats: 28-45 ns
 * a row by rows (issue 33), 17 on the Zen 3 with each row's offset summed
 * over its dims, 1.5-2.8 ns with the tables.  dst is zeroed; 0 when the
 * chunk is not such (the row-by-row copy below then does it).
 */
static int copy_whole(const TrtRel *in, const KeyIndex *ix, const TrtWindow *w, int64_t o, const TrtType *t,
                      const int64_t *key, const int64_t *len, char *dst, size_t es)
{
	const TrtType *it = &in->type;
	int dim = w->dim, nc = t->nchunk, cd = -1, last = nc - 1;
	for (int c = 0; c < nc; c++) {
		if (it->chunkdim[c] != t->chunkdim[c])
			return 0;
		if (t->chunkdim[c] == dim)
			cd = c;
	}
	for (int d = 0; d < t->nkey; d++)
		if (d != dim && (it->block[d] != t->block[d] || it->extent[d] != t->extent[d]))
			return 0;
	int64_t n = cd >= 0 ? len[cd] : 1, j0 = key[dim] * t->block[dim], ikey[TRT_MAXDIM];
	int64_t *map = rt_alloc(sizeof *map * (size_t)n);
	memcpy(ikey, key, sizeof *ikey * (size_t)t->nkey);
	ikey[dim] = -1;
	int ok = 1;
	for (int64_t i = 0; i < n && ok; i++) {
		int64_t j = j0 + i, s = -1;
		if (!w->scatter)
			s = w->stride * j + o;
		else if ((j - o) % w->stride == 0)
			s = (j - o) / w->stride;
		if (s < 0 || s >= it->extent[dim]) {
			map[i] = -1;
			continue;
		}
		int64_t k = s / it->block[dim];
		ok = ikey[dim] < 0 || ikey[dim] == k;
		ikey[dim] = k;
		map[i] = s - k * it->block[dim];
	}
	int64_t pos = ok && ikey[dim] >= 0 ? rt_index_find(ix, in, ikey) : -1;
	if (!ok || pos < 0) {
		free(map);
		return ok;      /* no input chunk there: zeros */
	}
	int64_t ilen[TRT_MAXDIM], si[TRT_MAXDIM];
	rt_chunk_shape(it, ikey, ilen);
	si[last] = 1;
	for (int c = last - 1; c >= 0; c--)
		si[c] = si[c + 1] * ilen[c + 1];
	/* each position's offset in the input chunk along the chunk dims
	 * before the last, -1 where the window reads outside the input */
	int64_t *off[TRT_MAXDIM];
	for (int c = 0; c < last; c++) {
		off[c] = rt_alloc(sizeof *off[c] * (size_t)len[c]);
		for (int64_t i = 0; i < len[c]; i++) {
			int64_t x = c == cd ? map[i] : i;
			off[c][i] = x < 0 ? -1 : x * si[c];
		}
	}
	const char *src = rt_chunk_data(in->chunks[pos]);
	int64_t run = len[last], inner = last > 0 ? len[last - 1] : 1, outer = 1;
	for (int c = 0; c + 1 < last; c++)
		outer *= len[c];
	int64_t idx[TRT_MAXDIM] = {0};
	size_t rowb = (size_t)run * es;
	/* the rows along the last dim but one, for each position of the dims
	 * before it (cnn's pooling windows: 12 or 6 rows of 2 floats) */
	for (int64_t r = 0; r < outer; r++, dst += (size_t)inner * rowb) {
		int64_t at = 0;
		int skip = 0;
		for (int c = 0; c + 1 < last; c++) {
			skip |= off[c][idx[c]] < 0;
			at += off[c][idx[c]];
		}
		for (int c = last - 2; c >= 0 && ++idx[c] == len[c]; c--)
			idx[c] = 0;
		if (skip)
			continue;
		for (int64_t i = 0; i < inner; i++) {
			int64_t io = last > 0 ? off[last - 1][i] : 0;
			if (io < 0)
				continue;
			char *d = dst + (size_t)i * rowb;
			const char *s = src + (size_t)(at + io) * es;
			if (cd == last)
				for (int64_t e = 0; e < run; e++) {
					if (map[e] >= 0)
						copy_elem(d + (size_t)e * es, s + (size_t)map[e] * es, es);
				}
			else if (rowb == 8)
				copy_elem(d, s, 8);     /* a constant size: no call */
			else
				memcpy(d, s, rowb);
		}
	}
	for (int c = 0; c < last; c++)
		free(off[c]);
	free(map);
	return 1;
}

/*
 * A window of a sparse relation (A[b*B + n, j], A[i, j + 1]): each output
 * chunk's compressed rows from the input chunks its positions read, the
 * dims other than the window's blocked as the input's (verify.c), so an
 * element keeps its place in the other dims.  Along the rows' dim (chunk
 * dim 0) an output row is one input row, copied; along a column dim the
 * input chunks over the window's positions are walked row by row, each
 * element kept where the window reads it, at the column it moves to, and
 * a row put in column order where they came out of it (a negative stride,
 * a dim before the last).  An output chunk with nothing stored is left
 * out, as a sparse relation's all-zero blocks are.
 */
typedef struct Entries {
	int64_t n, cap;
	int64_t *col;
	char *val;
} Entries;

static void entry_add(Entries *e, int64_t col, const char *val, size_t es)
{
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 256;
		e->col = rt_realloc(e->col, sizeof *e->col * (size_t)e->cap);
		e->val = rt_realloc(e->val, es * (size_t)e->cap);
	}
	e->col[e->n] = col;
	memcpy(e->val + (size_t)e->n * es, val, es);
	e->n++;
}

typedef struct ColAt {
	int64_t col, at;
} ColAt;

static int colat_cmp(const void *a, const void *b)
{
	const ColAt *x = a, *y = b;
	return (x->col > y->col) - (x->col < y->col);
}

/* Entries from..e->n (one row) into column order. */
static void sort_row(Entries *e, int64_t from, size_t es)
{
	int64_t n = e->n - from;
	int sorted = 1;
	for (int64_t i = from + 1; sorted && i < e->n; i++)
		sorted = e->col[i - 1] < e->col[i];
	if (sorted)
		return;
	ColAt *ca = rt_alloc(sizeof *ca * (size_t)n);
	char *val = rt_alloc(es * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		ca[i] = (ColAt){e->col[from + i], from + i};
	qsort(ca, (size_t)n, sizeof *ca, colat_cmp);
	for (int64_t i = 0; i < n; i++) {
		e->col[from + i] = ca[i].col;
		memcpy(val + (size_t)i * es, e->val + (size_t)ca[i].at * es, es);
	}
	memcpy(e->val + (size_t)from * es, val, es * (size_t)n);
	free(ca);
	free(val);
}

/* Along a column dim (chunk dim cw > 0): the input chunks over the
 * window's positions, walked row by row, each element kept where the
 * window reads it, at the column it moves to, gathered in e and rowptr
 * (nrow + 1) first.  NULL when nothing is stored there. */
static Chunk *sparse_cols(const TrtRel *in, const TrtWindow *w, int64_t o, const TrtType *t,
                          const int64_t *key, Entries *e, int64_t *rowptr)
{
	const TrtType *it = &in->type;
	size_t es = rt_dtype_size(t->dtype);
	int dim = w->dim, cw = -1;
	for (int c = 1; c < t->nchunk; c++)
		if (t->chunkdim[c] == dim)
			cw = c;
	if (cw < 0)
		rt_bug("a sparse window along dim %d, no chunk dim", dim);
	int64_t nrow, ncol, len[TRT_MAXDIM], ilen[TRT_MAXDIM], ikey[TRT_MAXDIM];
	rt_csr_dims(t, key, &nrow, &ncol);
	rt_chunk_shape(t, key, len);
	memcpy(ikey, key, sizeof *ikey * (size_t)t->nkey);
	/* the input chunks kk = klo..khi along dim that the window reads */
	int64_t j0 = key[dim] * t->block[dim], nj = len[cw], inner = 1;
	int64_t a = w->stride * j0 + o, b = w->stride * (j0 + nj - 1) + o;
	int64_t lo = a < b ? a : b, hi = a < b ? b : a;
	lo = lo < 0 ? 0 : lo;
	hi = hi >= it->extent[dim] ? it->extent[dim] - 1 : hi;
	int64_t klo = lo / it->block[dim], khi = lo <= hi ? hi / it->block[dim] : klo - 1;
	for (int c = cw + 1; c < t->nchunk; c++)
		inner *= len[c];
	int64_t nk = khi - klo + 1 > 0 ? khi - klo + 1 : 0;
	RtCsr *src = rt_alloc(sizeof *src * (size_t)(nk + 1));
	int64_t *il = rt_alloc(sizeof *il * (size_t)(nk + 1));
	for (int64_t i = 0; i < nk; i++) {
		ikey[dim] = klo + i;
		int64_t pos = rt_rel_bsearch(in, ikey);
		src[i].nnz = -1;
		if (pos < 0)
			continue;
		src[i] = rt_csr_of(in->chunks[pos], t->dtype);
		rt_chunk_shape(it, ikey, ilen);
		il[i] = ilen[cw];
	}
	e->n = 0;
	rowptr[0] = 0;
	for (int64_t r = 0; r < nrow; r++) {
		int64_t from = e->n;
		for (int64_t i = 0; i < nk; i++) {
			const RtCsr *sc = &src[i];
			if (sc->nnz < 0)
				continue;
			int64_t first = (klo + i) * it->block[dim];
			for (int64_t k = sc->rowptr[r]; k < sc->rowptr[r + 1]; k++) {
				int64_t col = sc->col[k], q = first + col / inner % il[i] - o;
				if (q % w->stride)
					continue;
				int64_t jj = q / w->stride - j0;
				if (jj < 0 || jj >= nj)
					continue;
				int64_t up = col / inner / il[i], down = col % inner;
				entry_add(e, (up * nj + jj) * inner + down, (const char *)sc->val + (size_t)k * es, es);
			}
		}
		sort_row(e, from, es);
		rowptr[r + 1] = e->n;
	}
	free(src);
	free(il);
	if (!e->n)
		return NULL;
	Chunk *c = rt_csr_new(t->dtype, nrow, ncol, e->n);
	RtCsr s = rt_csr_mut(c, t->dtype);
	memcpy(s.rowptr, rowptr, sizeof *rowptr * (size_t)(nrow + 1));
	memcpy(s.col, e->col, sizeof *e->col * (size_t)e->n);
	memcpy(s.val, e->val, es * (size_t)e->n);
	return c;
}

/* Along the rows' dim: each output row is one input row, its columns the
 * same; counted first, so that the chunk is made at its size and each row
 * copied whole.  NULL when nothing is stored there. */
static Chunk *sparse_rows(const TrtRel *in, const TrtWindow *w, int64_t o, const TrtType *t,
                          const int64_t *key, int64_t *at)
{
	const TrtType *it = &in->type;
	size_t es = rt_dtype_size(t->dtype);
	int dim = w->dim;
	int64_t nrow, ncol, ikey[TRT_MAXDIM], nnz = 0, pos = -1, last = -1;
	RtCsr cur = {0};
	rt_csr_dims(t, key, &nrow, &ncol);
	memcpy(ikey, key, sizeof *ikey * (size_t)t->nkey);
	/* at[2r], at[2r + 1]: row r's input chunk (-1: none) and row there */
	for (int64_t r = 0; r < nrow; r++) {
		int64_t pr = w->stride * (key[dim] * t->block[dim] + r) + o;
		at[2 * r] = -1;
		if (pr < 0 || pr >= it->extent[dim])
			continue;
		int64_t k = pr / it->block[dim];
		if (k != last) {        /* consecutive rows: mostly the same chunk */
			ikey[dim] = last = k;
			pos = rt_rel_bsearch(in, ikey);
			if (pos >= 0)
				cur = rt_csr_of(in->chunks[pos], t->dtype);
		}
		if (pos < 0)
			continue;
		const int64_t *rp = cur.rowptr + (pr - k * it->block[dim]);
		at[2 * r] = pos;
		at[2 * r + 1] = pr - k * it->block[dim];
		nnz += rp[1] - rp[0];
	}
	if (!nnz)
		return NULL;
	Chunk *c = rt_csr_new(t->dtype, nrow, ncol, nnz);
	RtCsr s = rt_csr_mut(c, t->dtype);
	RtCsr in_s = {0};
	/* a run of rows that are consecutive rows of one input chunk (every
	 * window of stride 1, but at a chunk's edge) has its elements side by
	 * side there: copied at once, its row offsets shifted.  Two memcpy
	 * calls a row cost 30 ns a row where rows held 0.4 elements each
	 * (bench/sparse_batches.py on 2 ranks: the cut 0.39 -> 0.18 s) */
	for (int64_t r = 0, k = 0, was = -1; r < nrow;) {
		if (at[2 * r] < 0) {
			s.rowptr[++r] = k;
			continue;
		}
		int64_t e = r + 1;
		while (e < nrow && at[2 * e] == at[2 * r] && at[2 * e + 1] == at[2 * r + 1] + (e - r))
			e++;
		if (at[2 * r] != was)
			in_s = rt_csr_of(in->chunks[was = at[2 * r]], t->dtype);
		const int64_t *rp = in_s.rowptr + at[2 * r + 1];
		int64_t from = rp[0], n = rp[e - r] - from;
		memcpy(s.col + k, in_s.col + from, sizeof *s.col * (size_t)n);
		memcpy((char *)s.val + (size_t)k * es, (const char *)in_s.val + (size_t)from * es, es * (size_t)n);
		for (int64_t i = 1; i <= e - r; i++)
			s.rowptr[r + i] = k + rp[i] - from;
		k += n;
		r = e;
	}
	return c;
}

static TrtRel *slice_sparse(const TrtRel *in, const TrtWindow *w, int64_t o, const TrtType *t,
                            TrtPlace p)
{
	const TrtType *it = &in->type;
	if (w->scatter || !it->sparse || t->nchunk < 1 || t->nchunk != t->nkey)
		rt_bug("a sparse slice of %d chunk dims, %d key dims%s", t->nchunk, t->nkey, w->scatter ? ", a scatter" : "");
	for (int d = 0; d < t->nkey; d++)
		if (t->chunkdim[d] != it->chunkdim[d] || (d != w->dim && t->block[d] != it->block[d]))
			rt_bug("a sparse slice whose dims other than its window's are blocked anew");
	/* chunks are found by binary search in the input's sorted keys (rt.h):
	 * a loop's window is cut from the same input every step, and an index
	 * of its chunks, 12,800 a rank in bench/sparse_batches.py, cost more
	 * than the cut */
	size_t scope = rt_pin_mark();
	Entries e = {0};
	/* per output chunk: sparse_rows' row places (2 nrow), or
	 * sparse_cols' rowptr (nrow + 1) */
	int64_t *scratch = NULL, key[TRT_MAXDIM];
	TrtRel *r = trt_rel_new(t, p);
	for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) {
		int64_t nrow, ncol;
		rt_csr_dims(t, key, &nrow, &ncol);
		scratch = rt_realloc(scratch, sizeof *scratch * (size_t)(2 * nrow + 1));
		Chunk *c = w->dim == t->chunkdim[0] ? sparse_rows(in, w, o, t, key, scratch)
		                                   : sparse_cols(in, w, o, t, key, &e, scratch);
		if (c)
			rt_rel_push(r, key, c);
		rt_pin_release(scope);          /* the input chunks it read, and c */
	}
	free(e.col);
	free(e.val);
	free(scratch);
	rt_rel_sort(r);
	return r;
}

TrtRel *trt_slice(const TrtRel *in, const TrtRel *off, const TrtWindow *w, const TrtType *t, TrtPlace p)
{
	int dim = w->dim;
	const TrtType *it = &in->type;
	int along = 0;          /* a partitioned input must keep whole along dim */
	for (int i = 0; in->place.kind == TRT_PART && i < in->place.ndims; i++)
		along |= in->place.dims[i] == w->dim;
	if (in->place.kind == TRT_ANY || along || (in->place.kind == TRT_PART && p.kind != TRT_PART) ||
	    it->sparse != t->sparse ||
	    (off && (off->place.kind != TRT_ALL || off->type.nkey != 0 || off->type.dtype != TRT_I64 || off->n != 1)) ||
	    w->stride == 0 || dim < 0 || dim >= t->nkey ||
	    it->nkey != t->nkey || it->nchunk != t->nchunk || t->nchunk < 1 || it->dtype != t->dtype ||
	    p.kind == TRT_ANY)
		rt_bug("a slice of a relation not whole along its dim, or at an offset not on every rank");
	int64_t o = 0;
	size_t scope = rt_pin_mark();
	if (off)
		memcpy(&o, rt_chunk_data(off->chunks[0]), sizeof o);
	rt_pin_release(scope);
	o += w->shift;
	if (t->sparse)
		return slice_sparse(in, w, o, t, p);
	KeyIndex ix;
	rt_index_init(&ix);
	for (int64_t i = 0; i < in->n; i++)
		rt_index_add(&ix, in, i);

	size_t es = rt_dtype_size(t->dtype);
	int cl = t->nchunk - 1, kl = t->chunkdim[cl];
	Found found = {0};
	TrtRel *r = trt_rel_new(t, p);
	int64_t key[TRT_MAXDIM], len[TRT_MAXDIM], idx[TRT_MAXDIM], g[TRT_MAXDIM];
	for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) {
		int64_t total = rt_chunk_shape(t, key, len);
		rt_pin_release(scope);          /* a chunk at a time */
		Chunk *c = rt_chunk_new((size_t)total * es);
		char *dst = rt_chunk_mut(c);
		memset(dst, 0, (size_t)total * es);
		int64_t run = len[cl];
		memset(idx, 0, sizeof idx);
		int whole = total > 0 && copy_whole(in, &ix, w, o, t, key, len, dst, es);
		for (int64_t row = 0; !whole && total > 0 && row < total / run; row++) {
			for (int d = 0; d < t->nkey; d++)
				g[d] = key[d] * t->block[d];
			for (int ch = 0; ch < cl; ch++)
				g[t->chunkdim[ch]] += idx[ch];
			/* where the row reads: the window's dim moved (a slice's
			 * position j reads stride j + o, a scatter's j is input
			 * (j - o) / stride's, or zero) */
			int inside = 1, steps = 0;
			int64_t s0 = 0, sstep = 1, i0 = 0, dstep = 1, n = run, from = 0;
			int64_t j = g[dim];
			if (!w->scatter && w->stride == 1)
				g[dim] += o;
			else if (dim != kl && !w->scatter)
				g[dim] = w->stride * j + o;
			else if (dim != kl && (j - o) % w->stride == 0)
				g[dim] = (j - o) / w->stride;
			else if (dim != kl)
				inside = 0;
			else if (!w->scatter) {
				steps = 1;              /* along the row: every stride-th input element */
				s0 = w->stride * j + o;
				sstep = w->stride;
			} else {
				/* along the row: every |stride|-th output element, from
				 * the first whose j - o the stride divides */
				int64_t a = w->stride > 0 ? w->stride : -w->stride, rem = ((j - o) % a + a) % a;
				steps = 1;
				i0 = (a - rem) % a;
				s0 = (j + i0 - o) / w->stride;
				sstep = w->stride > 0 ? 1 : -1;
				dstep = a;
				n = i0 < run ? (run - i0 + a - 1) / a : 0;
			}
			for (int d = 0; d < t->nkey; d++)
				if (d != kl && (g[d] < 0 || g[d] >= it->extent[d]))
					inside = 0;
			if (inside && steps)
				copy_steps(in, &ix, &found, g, kl, cl, s0, sstep, n, dst + (size_t)(row * run + i0) * es, dstep, es);
			/* the run: where it starts and ends inside the input */
			if (inside && !steps) {
				if (g[kl] < 0)
					from = -g[kl];
				if (g[kl] + n > it->extent[kl])
					n = it->extent[kl] - g[kl];
				n -= from;
				g[kl] += from;
			}
			if (inside && !steps && n > 0)
				copy_run(in, &ix, &found, g, kl, cl, n, dst + (size_t)(row * run + from) * es, es);
			for (int ch = cl - 1; ch >= 0; ch--) {
				if (++idx[ch] < len[ch])
					break;
				idx[ch] = 0;
			}
		}
		rt_rel_push(r, key, c);
	}
	rt_pin_release(scope);
	rt_index_free(&ix);
	rt_rel_sort(r);
	return r;
}
