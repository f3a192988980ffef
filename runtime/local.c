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
 *
 * Under a memory budget (store.c) the inputs and outputs may not all fit:
 * a join lists its pairs first and runs them blocked (join_order), an
 * aggregation its inputs by runs of outputs (agg_order), each declaring
 * its accesses as a stream for the store to evict by and read ahead; every
 * output chunk still combines its pairs, or members, in the in-memory
 * order, so the results are the same to the bit.  Each kernel call's
 * chunks are pinned for that call only.
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

int64_t rt_in_place;

static Chunk *new_chunk(const TrtType *t, const int64_t *key)
{
	return rt_chunk_new(rt_chunk_bytes(t, key));
}

/* One pair of tuples that meet in the kernel: left, right and mask tuple
 * (-1 none), the output tuple, and its place among that tuple's pairs. */
typedef struct Pair {
	int64_t li, ri, mi, pos, seq;
} Pair;

/* Checks a join's arguments; its own key is the left key, then the right
 * dims not matched, rfree[0..*nfree): returns its dims. */
static int join_check(const TrtRel *l, const TrtRel *r, const TrtRel *ms, const TrtJoin *j, TrtKernel k,
                      const TrtType *out, TrtPlace p, int *rfree, int *nfree)
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
	*nfree = 0;
	for (int d = 0; d < rtt->nkey; d++) {
		int matched = 0;
		for (int i = 0; i < nm; i++) {
			if (j->lkey[i] < 0 || j->lkey[i] >= lt->nkey || j->rkey[i] < 0 ||
			    j->rkey[i] >= rtt->nkey)
				rt_bug("join match dim out of range");
			matched |= j->rkey[i] == d;
		}
		if (!matched)
			rfree[(*nfree)++] = d;
	}
	int jn = lt->nkey + *nfree;
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
	return jn;
}

/* The pairs, in the order the join visits them in memory -- per left
 * tuple, its matches in the right's sorted order -- and o's tuples, made
 * without chunks yet: one per pair, or with a fused aggregation one per
 * group, in order of its first pair. */
static Pair *join_pairs(const TrtRel *l, const TrtRel *r, const TrtRel *ms, const TrtJoin *j, const int *rfree,
                        int nfree, TrtRel *o, int64_t *npairs)
{
	const TrtType *lt = &l->type, *rtt = &r->type, *out = &o->type;
	int nm = j->nmatch, jn = lt->nkey + nfree;
	KeyIndex mix;           /* the mask's tuples by key */
	rt_index_init(&mix);
	for (int64_t i = 0; ms && i < ms->n; i++)
		rt_index_add(&mix, ms, i);
	MatchCtx m = { r, j->rkey, nm };        /* the right side, sorted by its match values */
	int64_t *ridx = rt_alloc(sizeof *ridx * (size_t)(r->n + 1));
	for (int64_t i = 0; i < r->n; i++)
		ridx[i] = i;
	rt_sort(ridx, r->n, cmp_match_tuples, &m);

	KeyIndex ix;
	rt_index_init(&ix);
	int64_t n = 0, cap = 64, *nseq = NULL, cseq = 0;
	Pair *pairs = rt_alloc(sizeof *pairs * (size_t)cap);
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
			if (j->ngroup < 0) {
				memcpy(ok, jk, sizeof *ok * (size_t)jn);
			} else {
				for (int g = 0; g < j->ngroup; g++)
					ok[g] = j->group[g] < 0 ? 0 : jk[j->group[g]];
				pos = rt_index_find(&ix, o, ok);
			}
			if (pos < 0) {
				rt_check_key(out, ok);
				rt_rel_push(o, ok, NULL);
				pos = o->n - 1;
				if (j->ngroup >= 0)
					rt_index_add(&ix, o, pos);
				if (o->n > cseq) {
					cseq = 2 * o->n;
					nseq = rt_realloc(nseq, sizeof *nseq * (size_t)cseq);
				}
				nseq[pos] = 0;
			}
			if (n == cap)
				pairs = rt_realloc(pairs, sizeof *pairs * (size_t)(cap *= 2));
			pairs[n++] = (Pair){li, ri, mi, pos, nseq[pos]++};
		}
	}
	rt_index_free(&ix);
	rt_index_free(&mix);
	free(ridx);
	free(nseq);
	*npairs = n;
	return pairs;
}

static int64_t *sort_key;               /* join_order's keys, for by_key */

static int by_key(int64_t a, int64_t b, const void *ctx)
{
	(void)ctx;
	return sort_key[a] < sort_key[b] ? -1 : sort_key[a] > sort_key[b];
}

/* The order to run the pairs in.  In memory, as visited.  Under a budget
 * the inputs and outputs may not fit, and the pairs are blocked, as an
 * out-of-core matmul is: with a fused aggregation, the output tuples in
 * tiles (boxes of their key space, halved along the longest side until a
 * tile's chunks take half the budget), a tile's pairs by their place in
 * their tuple's sequence (the k of C[i,j] += A[i,k] B[k,j]), so that a
 * tile's sums stay in memory while each step's inputs stream by; without
 * one, the left tuples in runs of a quarter of the budget, and each run's
 * pairs by right tuple (a block nested-loop join).  Either way each output
 * chunk sees its pairs in the order it does in memory, so the result is
 * the same to the bit.
 * In memory, a sparse left times a dense right summed (an SpMM: the GCN's
 * A H, A^T dZ) goes right tuple by right tuple: each dense block of rows
 * meets every sparse block that reads it while it is in cache, rather than
 * each output block reading all of them again.  An output chunk still sees
 * its pairs in the same order (both sides' tuples are sorted by key, so
 * along a summed key dim they rise together; checked, the memory order
 * kept where not): the same bits.  The GCN's three
 * SpMM ops, medians of 8 runs: 0.128 -> 0.119, 0.140 -> 0.123 and 0.143 ->
 * 0.135 s a rank (Zen 4, 2026-11-29). */
static int64_t *join_order(const TrtRel *l, const TrtRel *r, const TrtJoin *j, const TrtRel *o,
                           const Pair *pairs, int64_t n, double out_chunk)
{
	int64_t *order = rt_alloc(sizeof *order * (size_t)(n + 1));
	for (int64_t q = 0; q < n; q++)
		order[q] = q;
	if (rt.budget <= 0 && n >= 2 && l->type.sparse && !r->type.sparse && j->ngroup >= 0) {
		sort_key = rt_alloc(sizeof *sort_key * (size_t)(n + 1));
		for (int64_t q = 0; q < n; q++)
			sort_key[q] = pairs[q].ri * (l->n + 1) + pairs[q].li;
		rt_sort(order, n, by_key, NULL);
		/* each output's pairs still in their order (seq rising), else
		 * the order in memory */
		int64_t *next = sort_key;
		for (int64_t t = 0; t < o->n; t++)
			next[t] = 0;
		int kept = 1;
		for (int64_t q = 0; q < n && kept; q++) {
			const Pair *a = &pairs[order[q]];
			kept = a->seq == next[a->pos]++;
		}
		for (int64_t q = 0; q < n && !kept; q++)
			order[q] = q;
		free(sort_key);
		sort_key = NULL;
		return order;
	}
	if (rt.budget <= 0 || n < 2)
		return order;
	double in_bytes = 0, out_bytes = out_chunk * (double)o->n;
	for (int64_t i = 0; i < l->n; i++)
		in_bytes += (double)l->chunks[i]->nbytes;
	for (int64_t i = 0; i < r->n && r != l; i++)
		in_bytes += (double)r->chunks[i]->nbytes;
	if (in_bytes + out_bytes <= rt.budget / 2)
		return order;
	sort_key = rt_alloc(sizeof *sort_key * (size_t)(n + 1));
	if (j->ngroup >= 0) {
		const TrtType *out = &o->type;
		int64_t t[TRT_MAXDIM], f[TRT_MAXDIM], maxseq = 0;
		for (int g = 0; g < out->nkey; g++)
			t[g] = f[g] = rt_frontier(out, g);
		for (;;) {
			double cells = 1;
			int longest = -1;
			for (int g = 0; g < out->nkey; g++) {
				cells *= (double)t[g];
				if (t[g] > 1 && (longest < 0 || t[g] > t[longest]))
					longest = g;
			}
			if (longest < 0 || cells * out_chunk <= rt.budget / 2)
				break;
			t[longest] = (t[longest] + 1) / 2;
		}
		for (int64_t q = 0; q < n; q++)
			maxseq = pairs[q].seq > maxseq ? pairs[q].seq : maxseq;
		for (int64_t q = 0; q < n; q++) {
			const int64_t *ok = o->keys + pairs[q].pos * out->nkey;
			int64_t tile = 0;
			for (int g = 0; g < out->nkey; g++)
				tile = tile * ((f[g] + t[g] - 1) / t[g]) + ok[g] / t[g];
			sort_key[q] = tile * (maxseq + 1) + pairs[q].seq;
		}
	} else {
		double run = 0;
		int64_t block = 0, last = -1, nr = r->n + 1;
		for (int64_t q = 0; q < n; q++) {
			if (pairs[q].li != last) {
				double b = (double)l->chunks[pairs[q].li]->nbytes;
				if (run > 0 && run + b > rt.budget / 4) {
					block++;
					run = 0;
				}
				run += b;
				last = pairs[q].li;
			}
			sort_key[q] = block * nr + pairs[q].ri;
		}
	}
	rt_sort(order, n, by_key, NULL);
	free(sort_key);
	sort_key = NULL;
	return order;
}

/*
 * An elementwise op made in place (TrtJoin.inplace, trt_map_in_place):
 * its output chunk is input chunk c itself when nothing else holds c (a
 * relation that shares it, a param's value) and c is the output chunk's
 * size, and the kernel writes each element after reading it there.  The
 * op's input dies after it, so c ends up the output's alone.  Out of core
 * chunks move between memory and the spill file, and nothing is in place.
 * Returns c (a reference more), else a new chunk for the output's key.
 */
static Chunk *in_place_chunk(Chunk *c, const TrtType *out, const int64_t *key)
{
	if (rt.budget <= 0 && c->refs == 1 && c->data && c->nbytes == rt_chunk_bytes(out, key)) {
		rt_in_place++;
		return rt_chunk_ref(c);
	}
	return new_chunk(out, key);
}

/*
 * The same for a sparse result, whose chunk has the pattern of chunk pc
 * (of dtype pdt): c, an input chunk of that pattern (ia_elementwise_in_place
 * says so of its relation), when nothing else holds it and it has pc's
 * rows and elements, in the result's dtype; else a new chunk of pc's
 * pattern.  mf_sparse's E = O * (U V^T - R) and its gradient: each op
 * copied the mask's rows and columns (16 bytes an element) into a new
 * chunk, 17% of the run (Zen 4, 2026-11-29).
 */
static Chunk *in_place_csr(Chunk *c, TrtDtype cdt, const Chunk *pc, TrtDtype pdt, TrtDtype dt)
{
	if (rt.budget <= 0 && c->refs == 1 && c->data && cdt == dt) {
		RtCsr a = rt_csr_of(c, cdt), b = rt_csr_of(pc, pdt);
		if (a.nrow == b.nrow && a.ncol == b.ncol && a.nnz == b.nnz) {
			rt_in_place++;
			return rt_chunk_ref(c);
		}
	}
	return rt_csr_like(pc, pdt, dt);
}

static TrtRel *join(const TrtRel *l, const TrtRel *r, const TrtRel *ms, const TrtJoin *j,
                    TrtKernel k, const TrtType *out, TrtPlace p)
{
	const TrtType *lt = &l->type, *rtt = &r->type;
	int rfree[TRT_MAXDIM], nfree;
	join_check(l, r, ms, j, k, out, p, rfree, &nfree);
	size_t scope = rt_pin_mark();

	TrtRel *o = trt_rel_new(out, p);
	int64_t n;
	Pair *pairs = join_pairs(l, r, ms, j, rfree, nfree, o, &n);
	double out_chunk = 0;   /* the most bytes of an output chunk */
	for (int64_t q = 0; q < n; q++) {
		const Pair *a = &pairs[q];
		const Chunk *pc = j->pattern == 2 ? ms->chunks[a->mi] : j->pattern ? r->chunks[a->ri] : l->chunks[a->li];
		double b = out->sparse ? (double)pc->nbytes : (double)rt_chunk_bytes(out, o->keys + a->pos * out->nkey);
		out_chunk = b > out_chunk ? b : out_chunk;
	}
	int64_t *order = join_order(l, r, j, o, pairs, n, out_chunk);
	if (rt.budget > 0) {
		/* the stream: per pair its left, right, mask and output chunks */
		static Chunk *none;
		Chunk ***cell = rt_alloc(sizeof *cell * (size_t)(4 * n + 1));
		for (int64_t q = 0; q < n; q++) {
			const Pair *a = &pairs[order[q]];
			cell[4 * q] = &l->chunks[a->li];
			cell[4 * q + 1] = &r->chunks[a->ri];
			cell[4 * q + 2] = ms ? &ms->chunks[a->mi] : &none;
			cell[4 * q + 3] = &o->chunks[a->pos];
		}
		rt_stream_begin(cell, 4 * n);
	}
	for (int64_t q = 0; q < n; q++) {
		const Pair *a = &pairs[order[q]];
		size_t mark = rt_pin_mark();
		rt_stream_at(4 * q);
		const int64_t *lk = l->keys + a->li * lt->nkey, *rk = r->keys + a->ri * rtt->nkey;
		const int64_t *ok = o->keys + a->pos * out->nkey;
		int acc = o->chunks[a->pos] != NULL;
		const Chunk *pc = !out->sparse ? NULL : j->pattern == 2 ? ms->chunks[a->mi]
		                  : j->pattern ? r->chunks[a->ri] : l->chunks[a->li];
		TrtDtype pdt = j->pattern == 2 ? ms->type.dtype : j->pattern ? rtt->dtype : lt->dtype;
		if (!acc && j->inplace && j->ngroup < 0 && l != r) {
			Chunk *c = j->inplace == 1 ? l->chunks[a->li] : r->chunks[a->ri];
			rt_rel_set(o, a->pos, out->sparse ? in_place_csr(c, j->inplace == 1 ? lt->dtype : rtt->dtype, pc, pdt,
			                                                 out->dtype)
			                                  : in_place_chunk(c, out, ok));
		} else if (!acc) {
			rt_rel_set(o, a->pos, out->sparse ? rt_csr_like(pc, pdt, out->dtype) : new_chunk(out, ok));
		}
		TrtView in[3] = {
			rt_view(lt, lk, l->chunks[a->li]),
			rt_view(rtt, rk, r->chunks[a->ri]),
		};
		if (ms)
			in[2] = rt_view(&ms->type, ms->keys + a->mi * ms->type.nkey, ms->chunks[a->mi]);
		TrtView ov = rt_view_mut(out, ok, o->chunks[a->pos]);
		if (acc && out->sparse && ov.nnz != in[j->pattern].nnz)
			rt_bug("sparse join output combines chunks of %lld and %lld elements",
			       (long long)ov.nnz, (long long)in[j->pattern].nnz);
		k(in, &ov, acc);
		rt_pin_release(mark);
	}
	rt_stream_end();
	free(order);
	free(pairs);
	rt_pin_release(scope);
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

/* The order to combine an aggregation's inputs in: as they come, or under
 * a budget, when they do not fit, by runs of output tuples (in order of
 * their first member) of half the budget, so that a run's sums stay in
 * memory while its inputs stream by, each read once.  Each output still
 * combines its members in their order. */
static int64_t *agg_order(const TrtRel *r, const TrtRel *o, const int64_t *gpos)
{
	int64_t n = r->n, *order = rt_alloc(sizeof *order * (size_t)(n + 1));
	for (int64_t i = 0; i < n; i++)
		order[i] = i;
	double in = 0, outb = 0;
	for (int64_t i = 0; i < n; i++)
		in += (double)r->chunks[i]->nbytes;
	for (int64_t g = 0; g < o->n; g++)
		outb += (double)rt_chunk_bytes(&o->type, o->keys + g * o->type.nkey);
	if (rt.budget <= 0 || n < 2 || in + outb <= rt.budget / 2)
		return order;
	int64_t *run = rt_alloc(sizeof *run * (size_t)(o->n + 1)), k = 0;
	double bytes = 0;
	for (int64_t g = 0; g < o->n; g++) {
		double b = (double)rt_chunk_bytes(&o->type, o->keys + g * o->type.nkey);
		if (bytes > 0 && bytes + b > rt.budget / 2) {
			k++;
			bytes = 0;
		}
		bytes += b;
		run[g] = k;
	}
	sort_key = rt_alloc(sizeof *sort_key * (size_t)(n + 1));
	for (int64_t i = 0; i < n; i++)
		sort_key[i] = run[gpos[i]];
	rt_sort(order, n, by_key, NULL);
	free(sort_key);
	sort_key = NULL;
	free(run);
	return order;
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
	size_t scope = rt_pin_mark();

	/* the groups, in order of their first member, made without chunks */
	TrtRel *o = trt_rel_new(out, p);
	int64_t *gpos = rt_alloc(sizeof *gpos * (size_t)(r->n + 1)), *members = NULL;
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
			rt_rel_push(o, ok, NULL);
			pos = o->n - 1;
			rt_index_add(&ix, o, pos);
			members = rt_realloc(members, sizeof *members * (size_t)o->cap);
			members[pos] = 0;
		}
		members[pos]++;
		gpos[i] = pos;
	}
	rt_index_free(&ix);

	/* A group of one dense chunk shares it; any other is a new chunk. */
	int64_t *order = agg_order(r, o, gpos);
	if (rt.budget > 0) {
		Chunk ***cell = rt_alloc(sizeof *cell * (size_t)(2 * r->n + 1));
		for (int64_t q = 0; q < r->n; q++) {
			cell[2 * q] = &r->chunks[order[q]];
			cell[2 * q + 1] = &o->chunks[gpos[order[q]]];
		}
		rt_stream_begin(cell, 2 * r->n);
	}
	for (int64_t q = 0; q < r->n; q++) {
		int64_t i = order[q], pos = gpos[i];
		const int64_t *key = r->keys + i * t->nkey;
		int64_t n = rt_chunk_shape(t, key, NULL);
		size_t mark = rt_pin_mark();
		rt_stream_at(2 * q);
		if (!o->chunks[pos]) {
			Chunk *c;
			if (t->sparse) {
				c = rt_chunk_dense(t, key, r->chunks[i]);       /* a sparse chunk's sum is dense */
			} else if (members[pos] == 1) {
				c = rt_chunk_ref(r->chunks[i]);
			} else {
				c = rt_chunk_new(rt_chunk_bytes(out, o->keys + pos * out->nkey));
				memcpy(rt_chunk_mut(c), rt_chunk_data(r->chunks[i]), c->nbytes);
			}
			rt_rel_set(o, pos, c);
		} else if (t->sparse) {
			Chunk *d = rt_chunk_dense(t, key, r->chunks[i]);
			rt_combine(t->dtype, rt_chunk_mut(o->chunks[pos]), rt_chunk_data(d), n, agg);
			rt_chunk_unref(d);
		} else {
			rt_combine(t->dtype, rt_chunk_mut(o->chunks[pos]), rt_chunk_data(r->chunks[i]), n, agg);
		}
		rt_pin_release(mark);
	}
	rt_stream_end();
	free(order);
	free(members);
	free(gpos);
	rt_pin_release(scope);
	rt_rel_sort(o);
	return o;
}

static TrtRel *map(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                   const TrtType *out, TrtPlace p, int in_place)
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
	size_t scope = rt_pin_mark();
	if (k && rt.budget > 0) {
		Chunk ***cell = rt_alloc(sizeof *cell * (size_t)(r->n + 1));
		for (int64_t i = 0; i < r->n; i++)
			cell[i] = &r->chunks[i];
		rt_stream_begin(cell, r->n);
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
		size_t mark = rt_pin_mark();
		rt_stream_at(i);
		Chunk *c = out->sparse ? in_place ? in_place_csr(r->chunks[i], t->dtype, r->chunks[i], t->dtype, out->dtype)
		                                  : rt_csr_like(r->chunks[i], t->dtype, out->dtype)
		         : in_place && !t->sparse ? in_place_chunk(r->chunks[i], out, ok) : new_chunk(out, ok);
		TrtView in = rt_view(t, key, r->chunks[i]);
		TrtView ov = rt_view_mut(out, ok, c);
		k(&in, &ov, 0);
		rt_rel_push(o, ok, c);
		rt_pin_release(mark);
	}
	rt_stream_end();
	rt_pin_release(scope);
	rt_rel_sort(o);
	return o;
}

TrtRel *trt_map(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                const TrtType *out, TrtPlace p)
{
	return map(r, nkeymap, keymap, k, out, p, 0);
}

TrtRel *trt_map_in_place(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                         const TrtType *out, TrtPlace p)
{
	return map(r, nkeymap, keymap, k, out, p, 1);
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
