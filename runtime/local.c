/*
 * local.c: the ops that touch only this rank's tuples: join (plain or fused
 * with its aggregation), aggregation, map and filter.
 *
 * Relations are small in tuples and large in data, so the bookkeeping here is
 * simple: the right side of a join is sorted by its join-key values and
 * searched by bisection, and output keys are found through a hash index
 * (KeyIndex).  Determinism comes from the order tuples are visited in (the
 * inputs' sorted order, the right matches in their sorted order), never from
 * the hash; every output is sorted by key before it is returned.
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef struct MatchCtx {
	const TrtRel *r;
	const int *dims;
	int n;
} MatchCtx;

/* Compares tuple a's values at the match dims with the values in key. */
static int cmp_match(const MatchCtx *m, int64_t a, const int64_t *key)
{
	const int64_t *ka = m->r->keys + a * m->r->type.nkey;

	for (int i = 0; i < m->n; i++)
		if (ka[m->dims[i]] != key[i])
			return ka[m->dims[i]] < key[i] ? -1 : 1;
	return 0;
}

static int cmp_match_tuples(int64_t a, int64_t b, const void *ctx)
{
	const MatchCtx *m = ctx;
	int64_t kb[TRT_MAXDIM];

	for (int i = 0; i < m->n; i++)
		kb[i] = m->r->keys[b * m->r->type.nkey + m->dims[i]];
	return cmp_match(m, a, kb);
}

static void check_out(const TrtType *out, TrtPlace p)
{
	rt_check_type(out);
	if (p.kind == TRT_PART)
		for (int i = 0; i < p.ndims; i++)
			if (p.dims[i] < 0 || p.dims[i] >= out->nkey)
				rt_bug("placement on key dim %d of %d", p.dims[i], out->nkey);
}

static Chunk *new_chunk(const TrtType *t, const int64_t *key)
{
	return rt_chunk_new(rt_chunk_bytes(t, key));
}

static TrtRel *join(const TrtRel *l, const TrtRel *r, const TrtRel *ms, const TrtJoin *j,
                    TrtKernel k, const TrtType *out, TrtPlace p)
{
	const TrtType *lt = &l->type, *rtt = &r->type;
	const TrtType *pt[3] = {lt, rtt, ms ? &ms->type : NULL};
	int nm = j->nmatch;

	check_out(out, p);
	if (!k)
		rt_bug("join without a kernel");
	if (out->sparse && (j->pattern < 0 || j->pattern > 2 || !pt[j->pattern] || !pt[j->pattern]->sparse))
		rt_bug("sparse join output with pattern input %d", j->pattern);
	if (ms && (!out->sparse || j->pattern != 2 || j->nmask != ms->type.nkey))
		rt_bug("a sampled join's mask of %d key dims", ms->type.nkey);
	if (nm < 0 || nm > lt->nkey || nm > rtt->nkey)
		rt_bug("join matches %d dims of %d and %d key dims", nm, lt->nkey, rtt->nkey);

	/* The join's own key: the left key, then the right dims not matched. */
	int jn = 0, rfree[TRT_MAXDIM], nfree = 0;
	for (int d = 0; d < rtt->nkey; d++) {
		int matched = 0;
		for (int i = 0; i < nm; i++) {
			if (j->lkey[i] < 0 || j->lkey[i] >= lt->nkey || j->rkey[i] < 0 ||
			    j->rkey[i] >= rtt->nkey)
				rt_bug("join match dim out of range");
			matched |= j->rkey[i] == d;
		}
		if (!matched)
			rfree[nfree++] = d;
	}
	jn = lt->nkey + nfree;
	if (jn > TRT_MAXDIM)
		rt_bug("join key of %d dims", jn);
	if (j->ngroup < 0 ? out->nkey != jn : out->nkey != j->ngroup)
		rt_bug("join output has %d key dims, expected %d", out->nkey,
		       j->ngroup < 0 ? jn : j->ngroup);
	for (int g = 0; g < j->ngroup; g++)     /* -1: a dim of one chunk, key 0 (a kernel's
	                                         * gradient's window dim, below) */
		if (j->group[g] < -1 || j->group[g] >= jn || (j->group[g] < 0 && rt_frontier(out, g) != 1))
			rt_bug("join groups on dim %d of %d", j->group[g], jn);
	for (int d = 0; ms && d < j->nmask; d++)
		if (j->mkey[d] < 0 || j->mkey[d] >= jn)
			rt_bug("mask dim %d is join dim %d of %d", d, j->mkey[d], jn);
	KeyIndex mix;           /* the mask's tuples by key */
	rt_index_init(&mix);
	for (int64_t i = 0; ms && i < ms->n; i++)
		rt_index_add(&mix, ms, i);

	/* The right side, sorted by its match values. */
	MatchCtx m = { r, j->rkey, nm };
	int64_t *ridx = rt_alloc(sizeof *ridx * (size_t)(r->n + 1));
	for (int64_t i = 0; i < r->n; i++)
		ridx[i] = i;
	rt_sort(ridx, r->n, cmp_match_tuples, &m);

	TrtRel *o = trt_rel_new(out, p);
	KeyIndex ix;
	rt_index_init(&ix);
	for (int64_t li = 0; li < l->n; li++) {
		const int64_t *lk = l->keys + li * lt->nkey;
		int64_t want[TRT_MAXDIM];
		rt_key_pick(want, lk, nm, j->lkey);

		int64_t lo = 0, hi = r->n;      /* first right tuple >= want */
		while (lo < hi) {
			int64_t mid = lo + (hi - lo) / 2;
			if (cmp_match(&m, ridx[mid], want) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (int64_t s = lo; s < r->n && !cmp_match(&m, ridx[s], want); s++) {
			int64_t ri = ridx[s];
			const int64_t *rk = r->keys + ri * rtt->nkey;
			int64_t jk[TRT_MAXDIM], ok[TRT_MAXDIM];
			memcpy(jk, lk, sizeof *jk * (size_t)lt->nkey);
			rt_key_pick(jk + lt->nkey, rk, nfree, rfree);
			int64_t mi = -1;
			if (ms) {
				int64_t mk[TRT_MAXDIM];
				rt_key_pick(mk, jk, j->nmask, j->mkey);
				if ((mi = rt_index_find(&mix, ms, mk)) < 0)
					continue;       /* nothing stored there: nothing computed */
			}

			int64_t pos = -1;
			int acc = 0;
			if (j->ngroup < 0) {
				memcpy(ok, jk, sizeof *ok * (size_t)jn);
			} else {
				for (int g = 0; g < j->ngroup; g++)
					ok[g] = j->group[g] < 0 ? 0 : jk[j->group[g]];
				pos = rt_index_find(&ix, o, ok);
				acc = pos >= 0;
			}
			if (pos < 0) {
				rt_check_key(out, ok);
				const Chunk *pc = j->pattern == 2 ? ms->chunks[mi] : j->pattern ? r->chunks[ri] : l->chunks[li];
				rt_rel_push(o, ok, out->sparse ? rt_csr_like(pc, out->dtype) : new_chunk(out, ok));
				pos = o->n - 1;
				if (j->ngroup >= 0)
					rt_index_add(&ix, o, pos);
			}
			TrtView in[3] = {
				rt_view(lt, lk, l->chunks[li]),
				rt_view(rtt, rk, r->chunks[ri]),
			};
			if (ms)
				in[2] = rt_view(&ms->type, ms->keys + mi * ms->type.nkey, ms->chunks[mi]);
			TrtView ov = rt_view(out, ok, o->chunks[pos]);
			if (acc && out->sparse && ov.nnz != in[j->pattern].nnz)
				rt_bug("sparse join output combines chunks of %lld and %lld elements",
				       (long long)ov.nnz, (long long)in[j->pattern].nnz);
			k(in, &ov, acc);
		}
	}
	rt_index_free(&ix);
	rt_index_free(&mix);
	free(ridx);
	rt_rel_sort(o);
	return o;
}

TrtRel *trt_join(const TrtRel *l, const TrtRel *r, const TrtJoin *j,
                 TrtKernel k, const TrtType *out, TrtPlace p)
{
	return join(l, r, NULL, j, k, out, p);
}

TrtRel *trt_join_sampled(const TrtRel *l, const TrtRel *r, const TrtRel *m, const TrtJoin *j,
                         TrtKernel k, const TrtType *out, TrtPlace p)
{
	if (!m || !m->type.sparse)
		rt_bug("a sampled join without a sparse mask");
	return join(l, r, m, j, k, out, p);
}

void *trt_scratch(size_t nbytes)
{
	static void *buf;
	static size_t cap;
	if (nbytes <= cap)
		return buf;
	size_t want = nbytes > 2 * cap ? nbytes : 2 * cap;
	free(buf);
	buf = NULL;
	cap = 0;
	if (posix_memalign(&buf, 64, want))
		rt_oom(want, "a kernel's scratch memory");
	cap = want;
	return buf;
}

int64_t trt_csr_find(const TrtView *v, int64_t row, int64_t col)
{
	int64_t lo = v->rowptr[row], hi = v->rowptr[row + 1];
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		if (v->col[mid] < col)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < v->rowptr[row + 1] && v->col[lo] == col ? lo : -1;
}

/* Eight partial sums, so the compiler keeps them in vector lanes (the
 * order of the additions is fixed, so results do not depend on it). */
#define DOT(name, T)                                                            \
	T name(int64_t n, const T *a, int64_t sa, const T *b, int64_t sb)      \
	{                                                                       \
		T s[8] = {0}, r = 0;                                            \
		int64_t i = 0;                                                  \
		if (sa == 1 && sb == 1)                                         \
			for (; i + 8 <= n; i += 8)                              \
				for (int u = 0; u < 8; u++)                     \
					s[u] += a[i + u] * b[i + u];            \
		for (; i < n; i++)                                              \
			r += a[i * sa] * b[i * sb];                             \
		return r + ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); \
	}
DOT(trt_sdot, float)
DOT(trt_ddot, double)
#undef DOT

/* a[i] = agg(a[i], b[i]); max and min let a NaN through, as numpy's do.
 * One definition per element type. */
#define COMBINE(name, T)                                                        \
	static void name(T *a, const T *b, int64_t n, TrtAgg agg)               \
	{                                                                       \
		switch (agg) {                                                  \
		case TRT_AGG_ADD:                                               \
			for (int64_t i = 0; i < n; i++)                         \
				a[i] += b[i];                                   \
			break;                                                  \
		case TRT_AGG_MAX:                                               \
			for (int64_t i = 0; i < n; i++)                         \
				if (b[i] > a[i] || b[i] != b[i])                \
					a[i] = b[i];                            \
			break;                                                  \
		case TRT_AGG_MIN:                                               \
			for (int64_t i = 0; i < n; i++)                         \
				if (b[i] < a[i] || b[i] != b[i])                \
					a[i] = b[i];                            \
			break;                                                  \
		}                                                               \
	}
COMBINE(combine_f32, float)
COMBINE(combine_f64, double)
COMBINE(combine_i32, int32_t)
COMBINE(combine_i64, int64_t)
#undef COMBINE

void rt_combine(TrtDtype dt, void *a, const void *b, int64_t n, TrtAgg agg)
{
	switch (dt) {
	case TRT_F32: combine_f32(a, b, n, agg); break;
	case TRT_F64: combine_f64(a, b, n, agg); break;
	case TRT_I32: combine_i32(a, b, n, agg); break;
	case TRT_I64: combine_i64(a, b, n, agg); break;
	}
}

TrtRel *trt_agg(const TrtRel *r, int ngroup, const int *group, TrtAgg agg,
                const TrtType *out, TrtPlace p)
{
	const TrtType *t = &r->type;

	check_out(out, p);
	if (out->sparse)
		rt_bug("a sparse aggregation");
	if (out->nkey != ngroup || out->dtype != t->dtype)
		rt_bug("aggregation to %d key dims (dtype %d) from a group of %d (dtype %d)",
		       out->nkey, (int)out->dtype, ngroup, (int)t->dtype);
	for (int g = 0; g < ngroup; g++)
		if (group[g] < 0 || group[g] >= t->nkey)
			rt_bug("aggregation groups on key dim %d of %d", group[g], t->nkey);

	/* A group of one shares its chunk; the second member makes it private. */
	TrtRel *o = trt_rel_new(out, p);
	char *owned = NULL;
	KeyIndex ix;
	rt_index_init(&ix);
	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * t->nkey;
		int64_t ok[TRT_MAXDIM];
		rt_key_pick(ok, key, ngroup, group);
		int64_t n = rt_chunk_shape(out, ok, NULL);
		if (n != rt_chunk_shape(t, key, NULL))
			rt_bug("aggregation changes a chunk of %lld elements into %lld",
			       (long long)rt_chunk_shape(t, key, NULL), (long long)n);

		int64_t pos = rt_index_find(&ix, o, ok);
		if (pos < 0) {
			rt_check_key(out, ok);
			/* a sparse chunk's sum is dense */
			rt_rel_push(o, ok, t->sparse ? rt_chunk_dense(t, key, r->chunks[i]) : rt_chunk_ref(r->chunks[i]));
			rt_index_add(&ix, o, o->n - 1);
			owned = rt_realloc(owned, (size_t)o->cap);
			owned[o->n - 1] = t->sparse;
			continue;
		}
		if (!owned[pos]) {
			size_t nb = rt_chunk_bytes(out, ok);
			Chunk *c = rt_chunk_new(nb);
			memcpy(rt_chunk_data(c), rt_chunk_data(o->chunks[pos]), nb);
			rt_chunk_unref(o->chunks[pos]);
			o->chunks[pos] = c;
			owned[pos] = 1;
		}
		if (t->sparse) {
			Chunk *d = rt_chunk_dense(t, key, r->chunks[i]);
			rt_combine(t->dtype, rt_chunk_data(o->chunks[pos]), rt_chunk_data(d), n, agg);
			rt_chunk_unref(d);
		} else {
			rt_combine(t->dtype, rt_chunk_data(o->chunks[pos]), rt_chunk_data(r->chunks[i]), n, agg);
		}
	}
	free(owned);
	rt_index_free(&ix);
	rt_rel_sort(o);
	return o;
}

TrtRel *trt_map(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                const TrtType *out, TrtPlace p)
{
	const TrtType *t = &r->type;

	check_out(out, p);
	if (nkeymap != out->nkey)
		rt_bug("map with %d key dims onto %d", nkeymap, out->nkey);
	int ndup = 0;
	for (int i = 0; i < nkeymap; i++) {
		if (keymap[i] < -1 || keymap[i] >= t->nkey || (keymap[i] == -1 && k))
			rt_bug("map takes key dim %d of %d", keymap[i], t->nkey);
		ndup += keymap[i] == -1;
	}

	TrtRel *o = trt_rel_new(out, p);
	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * t->nkey;
		int64_t ok[TRT_MAXDIM];
		for (int d = 0; d < nkeymap; d++)
			ok[d] = keymap[d] >= 0 ? key[keymap[d]] : 0;
		if (ndup) {
			/* keymap -1: a new key dim, the tuple duplicated along it
			 * (chunks shared), as an odometer over the new dims */
			for (;;) {
				rt_check_key(out, ok);
				rt_rel_push(o, ok, rt_chunk_ref(r->chunks[i]));
				int d = nkeymap - 1;
				for (; d >= 0; d--) {
					if (keymap[d] >= 0)
						continue;
					if (++ok[d] < rt_frontier(out, d))
						break;
					ok[d] = 0;
				}
				if (d < 0)
					break;
			}
			continue;
		}
		rt_check_key(out, ok);
		if (!k) {
			if (rt_chunk_shape(out, ok, NULL) != rt_chunk_shape(t, key, NULL) || out->dtype != t->dtype ||
			    out->sparse != t->sparse)
				rt_bug("rekey changes a chunk's size");
			rt_rel_push(o, ok, rt_chunk_ref(r->chunks[i]));
			continue;
		}
		if (out->sparse && !t->sparse)
			rt_bug("sparse map output from a dense input");
		Chunk *c = out->sparse ? rt_csr_like(r->chunks[i], out->dtype) : new_chunk(out, ok);
		TrtView in = rt_view(t, key, r->chunks[i]);
		TrtView ov = rt_view(out, ok, c);
		k(&in, &ov, 0);
		rt_rel_push(o, ok, c);
	}
	rt_rel_sort(o);
	return o;
}

TrtRel *trt_filter(const TrtRel *r, TrtKeyPred pred, TrtPlace p)
{
	check_out(&r->type, p);
	TrtRel *o = trt_rel_new(&r->type, p);
	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * r->type.nkey;
		if (pred(key))
			rt_rel_push(o, key, rt_chunk_ref(r->chunks[i]));
	}
	return o;
}
