/*
 * halo.c: a convolution's input with its neighbours' boundary rows (the
 * two-phase paper's join of adjacent tiles).
 *
 * trt_halo's result has its input's keys and placement; along each halo
 * dim (TrtType.hext > 0) the chunk of key K holds the elements its reader
 * (a convolution's output chunk K) reads, [K*block - hlo, end + hhi)
 * clipped to the dim, which are input chunk K and pieces of its
 * neighbours (all of them when the halo is wider than a block: a chunk
 * holding the whole dim, for a kernel's gradient).  Which rank holds
 * which input chunk and which result chunk is trt_site's pure function of
 * the key, so every rank enumerates the same (result key, input key)
 * pieces in the same order: a sender packs the pieces it owns for each
 * result owner in that order, the owner unpacks them in that order, and
 * no piece carries a header.  One MPI_Alltoallv moves them all; pieces
 * whose two keys are on one rank are copied.  Under TRT_ALL every rank
 * makes every chunk from its own copy, sending nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* A box of a chunk: per chunk dim its first element (in the chunk) and
 * length. */
typedef struct Box {
	int64_t at[TRT_MAXDIM], cnt[TRT_MAXDIM];
} Box;

static void box_copy(char *dst, const int64_t *dn, const Box *db, const char *src, const int64_t *sn, const Box *sb,
                     int rank, size_t es)
{
	rt_box_copy(dst, dn, db->at, src, sn, sb->at, sb->cnt, rank, es);
}

/* Per-rank growable byte buffers. */
typedef struct Bufs {
	char **p;
	int64_t *len, *cap;
} Bufs;

static char *bufs_grow(Bufs *b, int r, size_t n)
{
	if (b->len[r] + (int64_t)n > b->cap[r]) {
		b->cap[r] = 2 * (b->len[r] + (int64_t)n);
		b->p[r] = rt_realloc(b->p[r], (size_t)b->cap[r]);
	}
	char *at = b->p[r] + b->len[r];
	b->len[r] += (int64_t)n;
	return at;
}

/* The input keys whose chunks meet result key K's: along a halo dim the
 * input chunks its range covers, along the others K's own. */
typedef struct Cover {
	int64_t lo[TRT_MAXDIM], hi[TRT_MAXDIM];    /* per key dim, inclusive */
	int64_t key[TRT_MAXDIM];                   /* the current one */
} Cover;

static int cover_first(Cover *v, const TrtType *xt, const TrtType *t, const int64_t *K)
{
	int64_t n[TRT_MAXDIM];
	rt_chunk_shape(t, K, n);
	for (int d = 0; d < t->nkey; d++)
		v->lo[d] = v->hi[d] = K[d];
	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		if (!t->hext[d])
			continue;
		if (!n[c])
			return 0;       /* nothing of the dim: an empty chunk */
		int64_t a = rt_chunk_first(t, d, K[d]);
		v->lo[d] = a / xt->block[d];
		v->hi[d] = (a + n[c] - 1) / xt->block[d];
	}
	memcpy(v->key, v->lo, sizeof v->key);
	return 1;
}

static int cover_next(Cover *v, int nkey)
{
	for (int d = nkey - 1; d >= 0; d--) {
		if (++v->key[d] <= v->hi[d])
			return 1;
		v->key[d] = v->lo[d];
	}
	return 0;
}

/* The piece of input chunk k in result chunk K: its box in each. */
static void piece(const TrtType *xt, const TrtType *t, const int64_t *k, const int64_t *K, Box *in, Box *out)
{
	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		int64_t xa = k[d] * xt->block[d], xn = xt->extent[d] - xa;
		xn = xn < xt->block[d] ? xn : xt->block[d];
		int64_t ta = rt_chunk_first(t, d, K[d]), tn[TRT_MAXDIM];
		rt_chunk_shape(t, K, tn);
		int64_t a = xa > ta ? xa : ta, e = xa + xn < ta + tn[c] ? xa + xn : ta + tn[c];
		in->at[c] = a - xa;
		out->at[c] = a - ta;
		in->cnt[c] = out->cnt[c] = e > a ? e - a : 0;
	}
}

static int owner(const TrtRel *r, const TrtType *t, const int64_t *key)
{
	return r->place.kind == TRT_ALL ? rt.rank : trt_site(&r->place, t, key);
}

TrtRel *trt_halo(const TrtRel *x, const TrtType *t)
{
	const TrtType *xt = &x->type;
	int nr = rt.nranks, me = rt.rank;
	size_t es = rt_dtype_size(t->dtype);
	rt_check_type(t);
	if (xt->sparse || t->sparse || x->place.kind == TRT_ANY || xt->nkey != t->nkey || xt->nchunk != t->nchunk)
		rt_bug("a halo of a sparse relation, of partials, or of another shape");
	TrtRel *out = trt_rel_new(t, x->place);
	KeyIndex ix;
	rt_index_init(&ix);
	for (int64_t i = 0; i < x->n; i++)
		rt_index_add(&ix, x, i);
	int64_t nkeys = rt_nkeys(t), K[TRT_MAXDIM], xn[TRT_MAXDIM], tn[TRT_MAXDIM];
	Cover v;
	Box bi, bo;

	/* pack what others' chunks need of ours, in (K, k) order */
	Bufs sb = {rt_alloc(sizeof(char *) * (size_t)nr), rt_alloc(sizeof(int64_t) * (size_t)nr),
	           rt_alloc(sizeof(int64_t) * (size_t)nr)};
	for (int r = 0; r < nr; r++)
		sb.p[r] = NULL, sb.len[r] = sb.cap[r] = 0;
	if (x->place.kind == TRT_PART)
		for (int64_t lin = 0; lin < nkeys; lin++) {
			rt_key_from_linear(t, lin, K);
			int dest = owner(x, t, K);
			if (dest == me || !cover_first(&v, xt, t, K))
				continue;
			do {
				if (owner(x, xt, v.key) != me)
					continue;
				int64_t pos = rt_index_find(&ix, x, v.key);
				if (pos < 0)
					rt_bug("a halo's input lacks a chunk of its own");
				piece(xt, t, v.key, K, &bi, &bo);
				int64_t cnt = 1;
				for (int c = 0; c < t->nchunk; c++)
					cnt *= bi.cnt[c];
				Box packed = {.cnt = {0}};
				memcpy(packed.cnt, bi.cnt, sizeof packed.cnt);
				rt_chunk_shape(xt, v.key, xn);
				size_t mark = rt_pin_mark();
				box_copy(bufs_grow(&sb, dest, (size_t)cnt * es), bi.cnt, &packed,
				         rt_chunk_data(x->chunks[pos]), xn, &bi, t->nchunk, es);
				rt_pin_release(mark);
			} while (cover_next(&v, t->nkey));
		}

	/* one exchange */
	int *sc = rt_alloc(sizeof(int) * (size_t)nr), *rc = rt_alloc(sizeof(int) * (size_t)nr);
	int *sd = rt_alloc(sizeof(int) * (size_t)nr), *rd = rt_alloc(sizeof(int) * (size_t)nr);
	int64_t stot = 0, rtot = 0;
	for (int r = 0; r < nr; r++) {
		if (sb.len[r] > INT32_MAX)
			trt_fatal("a halo exchange of more than 2 GiB for one rank");
		sc[r] = (int)sb.len[r];
	}
	char *sbuf = NULL, *rbuf = NULL;
	if (x->place.kind == TRT_PART && nr > 1) {
		int64_t t0 = rt_span_begin();
		MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, rt.comm);
		if (t0)
			rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "counts");
		for (int r = 0; r < nr; r++) {
			sd[r] = (int)stot;
			rd[r] = (int)rtot;
			stot += sc[r];
			rtot += rc[r];
		}
		if (stot > INT32_MAX || rtot > INT32_MAX)
			trt_fatal("a halo exchange of more than 2 GiB");
		sbuf = rt_alloc((size_t)(stot ? stot : 1));
		rbuf = rt_alloc((size_t)(rtot ? rtot : 1));
		for (int r = 0; r < nr; r++)
			if (sc[r])
				memcpy(sbuf + sd[r], sb.p[r], (size_t)sc[r]);
		rt_count_buf((double)(stot + rtot));
		t0 = rt_span_begin();
		MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, rt.comm);
		if (t0) {
			rt_trace_span(RT_SPAN_SEND, t0, -1, (double)stot, 0, "halo");
			rt_trace_span(RT_SPAN_RECV, rt_trace_clock(), -1, (double)rtot, 0, "halo");
		}
		rt_count_sent((double)stot);
		rt_count_recv((double)rtot);
		rt_count_buf(-(double)stot);
		free(sbuf);
	}
	for (int r = 0; r < nr; r++)
		free(sb.p[r]);
	free(sb.p);
	free(sb.len);
	free(sb.cap);

	/* our chunks: our pieces copied, the others' unpacked in order */
	for (int64_t lin = 0; lin < nkeys; lin++) {
		rt_key_from_linear(t, lin, K);
		if (owner(x, t, K) != me)
			continue;
		size_t mark = rt_pin_mark();   /* an output chunk at a time */
		Chunk *ch = rt_chunk_new(rt_chunk_bytes(t, K));
		rt_chunk_shape(t, K, tn);
		if (cover_first(&v, xt, t, K))
			do {
				piece(xt, t, v.key, K, &bi, &bo);
				int src = owner(x, xt, v.key);
				if (src == me) {
					int64_t pos = rt_index_find(&ix, x, v.key);
					if (pos < 0)
						rt_bug("a halo's input lacks a chunk of its own");
					rt_chunk_shape(xt, v.key, xn);
					box_copy(rt_chunk_mut(ch), tn, &bo, rt_chunk_data(x->chunks[pos]), xn, &bi, t->nchunk,
					         es);
				} else {
					int64_t cnt = 1;
					for (int c = 0; c < t->nchunk; c++)
						cnt *= bi.cnt[c];
					Box packed = {.cnt = {0}};
					memcpy(packed.cnt, bi.cnt, sizeof packed.cnt);
					box_copy(rt_chunk_mut(ch), tn, &bo, rbuf + rd[src], bi.cnt, &packed, t->nchunk, es);
					rd[src] += (int)((size_t)cnt * es);
				}
			} while (cover_next(&v, t->nkey));
		rt_rel_push(out, K, ch);
		rt_pin_release(mark);
	}
	if (rbuf) {
		rt_count_buf(-(double)rtot);
		free(rbuf);
	}
	free(sc);
	free(rc);
	free(sd);
	free(rd);
	rt_index_free(&ix);
	rt_rel_sort(out);
	return out;
}
