/*
 * sparse.c: sparse chunks and relations with holes.
 *
 * A sparse relation (TrtType.sparse) stores each chunk as compressed rows
 * (trac_rt.h, TrtView) and holds no tuple for a block with nothing stored.
 * Dense relations computed from sparse ones may lack tuples too (a
 * sparse-dense product's rows with no element): a missing tuple is a zero
 * block.  Kernels that keep zeros (products, f(0) = 0) run on such
 * relations as they are; for the others the generated program completes
 * the relation first (trt_complete), and a param's value is made dense and
 * whole (trt_densify).
 */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* ---- chunks ---- */

/* A new sparse chunk with c's rows and columns, its values unset. */
Chunk *rt_csr_like(const Chunk *c, TrtDtype dt)
{
	RtCsr s = rt_csr_of(c, dt);
	Chunk *n = rt_csr_new(dt, s.nrow, s.ncol, s.nnz);
	RtCsr d = rt_csr_of(n, dt);
	memcpy(d.rowptr, s.rowptr, sizeof *s.rowptr * (size_t)(s.nrow + 1));
	memcpy(d.col, s.col, sizeof *s.col * (size_t)s.nnz);
	return n;
}

/* A dense copy of key's chunk c of a relation of type t (sparse or not). */
Chunk *rt_chunk_dense(const TrtType *t, const int64_t *key, const Chunk *c)
{
	TrtType dt = *t;
	dt.sparse = 0;
	Chunk *d = rt_chunk_new(rt_chunk_bytes(&dt, key));
	if (t->sparse)
		rt_csr_expand(t, key, c, rt_chunk_data(d));
	else
		memcpy(rt_chunk_data(d), rt_chunk_data(c), d->nbytes);
	return d;
}

void *trt_view_dense(TrtView *v, size_t elsize)
{
	int64_t nrow = v->rank ? v->n[0] : 1, ncol = 1;
	for (int c = 1; c < v->rank; c++)
		ncol *= v->n[c];
	char *d = calloc((size_t)(nrow * ncol) + 1, elsize);
	if (!d)
		rt_oom((size_t)(nrow * ncol) * elsize, "a dense copy of a sparse chunk");
	for (int64_t r = 0; v->rowptr && r < nrow; r++)
		for (int64_t q = v->rowptr[r]; q < v->rowptr[r + 1]; q++)
			memcpy(d + (size_t)(r * ncol + v->col[q]) * elsize, (const char *)v->p + (size_t)q * elsize, elsize);
	v->p = d;
	v->rowptr = v->col = NULL;
	v->nnz = 0;
	return d;
}

/* ---- relations ---- */

/* A zero chunk for key: an empty sparse one, or dense zeros. */
static Chunk *zero_chunk(const TrtType *t, const int64_t *key)
{
	if (t->sparse) {
		int64_t nrow, ncol;
		rt_csr_dims(t, key, &nrow, &ncol);
		Chunk *c = rt_csr_new(t->dtype, nrow, ncol, 0);
		memset(rt_csr_of(c, t->dtype).rowptr, 0, sizeof(int64_t) * (size_t)(nrow + 1));
		return c;
	}
	Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
	memset(rt_chunk_data(c), 0, c->nbytes);
	return c;
}

/* r with a zero chunk for every key its placement gives this rank and r
 * lacks; its own chunks shared. */
TrtRel *trt_complete(const TrtRel *r)
{
	const TrtType *t = &r->type;
	int nk = t->nkey;

	if (r->place.kind == TRT_ANY)
		rt_bug("completing a relation of partial aggregates");
	TrtRel *o = trt_rel_new(t, r->place);
	int64_t have = 0, n = rt_nkeys(t);
	int64_t key[TRT_MAXDIM];
	for (int64_t lin = 0; lin < n; lin++) {
		rt_key_from_linear(t, lin, key);
		while (have < r->n && rt_key_cmp(r->keys + have * nk, key, nk) < 0)
			have++;
		if (have < r->n && rt_key_cmp(r->keys + have * nk, key, nk) == 0) {
			for (; have < r->n && rt_key_cmp(r->keys + have * nk, key, nk) == 0; have++)
				rt_rel_push(o, key, rt_chunk_ref(r->chunks[have]));
			continue;
		}
		if (r->place.kind == TRT_PART && trt_site(&r->place, t, key) != rt.rank)
			continue;
		rt_rel_push(o, key, zero_chunk(t, key));
	}
	return o;
}

/* r as a dense relation, complete. */
TrtRel *trt_densify(const TrtRel *r)
{
	TrtRel *w = trt_complete(r);
	TrtType dt = w->type;
	dt.sparse = 0;
	TrtRel *o = trt_rel_new(&dt, w->place);
	for (int64_t i = 0; i < w->n; i++) {
		const int64_t *key = w->keys + i * dt.nkey;
		rt_rel_push(o, key, w->type.sparse ? rt_chunk_dense(&w->type, key, w->chunks[i])
		                                   : rt_chunk_ref(w->chunks[i]));
	}
	trt_free(w);
	return o;
}

