/*
 * slice.c: loop counters and the windows they move (repeat b in NB with
 * X[b*B + n, d]).
 *
 * A counter is a 0-d i64 relation every rank makes from the generated
 * loop's variable.  A slice cuts the chunks of a window [off, off + extent)
 * along one key dim out of a relation every rank holds whole (TRT_ALL: the
 * data set is placed once, before the loop), so a step moves nothing; each
 * rank makes only the chunks its placement gives it.  Positions outside
 * the input read zero.  A window of stride 1 copies by runs along the
 * innermost chunk dim, one hash look-up per run piece; a strided one, or
 * a scatter (a window's adjoint: the input put back where a window took
 * it from), goes element by element.
 */
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

/* Elements [from, from + n) along the run of one output row, read from the
 * input at global positions g (g[kl] the first), into dst; zero where the
 * input has no chunk. */
static void copy_run(const TrtRel *in, const KeyIndex *ix, int64_t *g, int kl, int cl, int64_t n, char *dst,
                     size_t es)
{
	const TrtType *it = &in->type;
	int64_t key[TRT_MAXDIM], len[TRT_MAXDIM];
	while (n > 0) {
		for (int d = 0; d < it->nkey; d++)
			key[d] = g[d] / it->block[d];
		int64_t seg = (key[kl] + 1) * it->block[kl] - g[kl];
		if (seg > n)
			seg = n;
		int64_t pos = rt_index_find(ix, in, key);
		if (pos >= 0) {
			rt_chunk_shape(it, key, len);
			int64_t at = 0, stride = 1;
			for (int c = it->nchunk - 1; c >= 0; c--) {
				int d = it->chunkdim[c];
				at += (g[d] - key[d] * it->block[d]) * stride;
				stride *= len[c];
			}
			int64_t step = 1;
			for (int c = it->nchunk - 1; c > cl; c--)
				step *= len[c];
			const char *src = (const char *)rt_chunk_data(in->chunks[pos]) + (size_t)at * es;
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

/* Chunk `key` (len[c] along chunk dim c) of a strided window or a scatter,
 * element by element. */
static void window_elems(const TrtRel *in, const KeyIndex *ix, const TrtWindow *w, int64_t o, const TrtType *t,
                         const int64_t *key, const int64_t *len, char *dst, size_t es)
{
	const TrtType *it = &in->type;
	int64_t total = 1, idx[TRT_MAXDIM] = {0}, g[TRT_MAXDIM], ik[TRT_MAXDIM], ilen[TRT_MAXDIM];
	int64_t last[TRT_MAXDIM], pos = -1;
	int have = 0;
	for (int c = 0; c < t->nchunk; c++)
		total *= len[c];
	for (int64_t e = 0; e < total; e++) {
		for (int d = 0; d < t->nkey; d++)
			g[d] = key[d] * t->block[d];
		for (int c = 0; c < t->nchunk; c++)
			g[t->chunkdim[c]] += idx[c];
		int64_t j = g[w->dim], src = -1;
		if (!w->scatter)
			src = w->stride * j + o;
		else if ((j - o) % w->stride == 0)
			src = (j - o) / w->stride;
		g[w->dim] = src;
		int inside = src >= 0 && src < it->extent[w->dim];
		for (int d = 0; inside && d < it->nkey; d++)
			ik[d] = g[d] / it->block[d];
		if (inside && (!have || rt_key_cmp(ik, last, it->nkey))) {
			pos = rt_index_find(ix, in, ik);
			memcpy(last, ik, sizeof last);
			have = 1;
			if (pos >= 0)
				rt_chunk_shape(it, ik, ilen);
		}
		if (inside && pos >= 0) {
			int64_t at = 0;
			for (int c = 0; c < it->nchunk; c++) {
				int d = it->chunkdim[c];
				at = at * ilen[c] + g[d] - ik[d] * it->block[d];
			}
			memcpy(dst + (size_t)e * es, (const char *)rt_chunk_data(in->chunks[pos]) + (size_t)at * es, es);
		}
		for (int c = t->nchunk - 1; c >= 0; c--) {
			if (++idx[c] < len[c])
				break;
			idx[c] = 0;
		}
	}
}

TrtRel *trt_slice(const TrtRel *in, const TrtRel *off, const TrtWindow *w, const TrtType *t, TrtPlace p)
{
	int dim = w->dim;
	const TrtType *it = &in->type;
	int along = 0;          /* a partitioned input must keep whole along dim */
	for (int i = 0; in->place.kind == TRT_PART && i < in->place.ndims; i++)
		along |= in->place.dims[i] == w->dim;
	if (in->place.kind == TRT_ANY || along || (in->place.kind == TRT_PART && p.kind != TRT_PART) || it->sparse ||
	    t->sparse ||
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
	KeyIndex ix;
	rt_index_init(&ix);
	for (int64_t i = 0; i < in->n; i++)
		rt_index_add(&ix, in, i);

	size_t es = rt_dtype_size(t->dtype);
	int cl = t->nchunk - 1, kl = t->chunkdim[cl];
	TrtRel *r = trt_rel_new(t, p);
	int64_t key[TRT_MAXDIM], len[TRT_MAXDIM], idx[TRT_MAXDIM], g[TRT_MAXDIM];
	for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) {
		int64_t total = rt_chunk_shape(t, key, len);
		rt_pin_release(scope);          /* a chunk at a time */
		Chunk *c = rt_chunk_new((size_t)total * es);
		char *dst = rt_chunk_mut(c);
		memset(dst, 0, (size_t)total * es);
		if (w->stride != 1 || w->scatter) {
			window_elems(in, &ix, w, o, t, key, len, dst, es);
			rt_rel_push(r, key, c);
			continue;
		}
		int64_t run = len[cl];
		memset(idx, 0, sizeof idx);
		for (int64_t row = 0; total > 0 && row < total / run; row++) {
			for (int d = 0; d < t->nkey; d++)
				g[d] = key[d] * t->block[d];
			for (int ch = 0; ch < cl; ch++)
				g[t->chunkdim[ch]] += idx[ch];
			g[dim] += o;
			/* the run: where it starts and ends inside the input */
			int64_t from = 0, n = run;
			int inside = 1;
			for (int d = 0; d < t->nkey; d++)
				if (d != kl && (g[d] < 0 || g[d] >= it->extent[d]))
					inside = 0;
			if (inside) {
				if (g[kl] < 0)
					from = -g[kl];
				if (g[kl] + n > it->extent[kl])
					n = it->extent[kl] - g[kl];
				n -= from;
				g[kl] += from;
			}
			if (inside && n > 0)
				copy_run(in, &ix, g, kl, cl, n, dst + (size_t)(row * run + from) * es, es);
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
