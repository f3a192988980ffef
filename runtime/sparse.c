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
#define _GNU_SOURCE             /* qsort_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rt.h"

/* ---- chunks ---- */

/* A new sparse chunk of element type dt with the rows and columns of c,
 * whose elements are of type from; its values unset. */
Chunk *rt_csr_like(const Chunk *c, TrtDtype from, TrtDtype dt)
{
	RtCsr s = rt_csr_of(c, from);
	Chunk *n = rt_csr_new(dt, s.nrow, s.ncol, s.nnz);
	RtCsr d = rt_csr_mut(n, dt);
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
		rt_csr_expand(t, key, c, rt_chunk_mut(d));
	else
		memcpy(rt_chunk_mut(d), rt_chunk_data(c), d->nbytes);
	return d;
}

/* A dense chunk is row-major over the chunk dims in chunk order, so its
 * element e is row e / ncol, column e % ncol of the compressed rows. */
Chunk *rt_csr_compress(const TrtType *t, const int64_t *key, const void *dense)
{
	size_t es = rt_dtype_size(t->dtype);
	int64_t nrow, ncol, nnz = 0;

	rt_csr_dims(t, key, &nrow, &ncol);
	for (int64_t e = 0; e < nrow * ncol; e++)
		nnz += !rt_elem_zero(t->dtype, dense, e);
	if (!nnz)
		return NULL;
	Chunk *c = rt_csr_new(t->dtype, nrow, ncol, nnz);
	RtCsr s = rt_csr_mut(c, t->dtype);
	int64_t k = 0;
	for (int64_t r = 0; r < nrow; r++) {
		for (int64_t j = 0; j < ncol; j++) {
			int64_t e = r * ncol + j;
			if (rt_elem_zero(t->dtype, dense, e))
				continue;
			s.col[k] = j;
			memcpy((char *)s.val + (size_t)k * es, (const char *)dense + (size_t)e * es, es);
			k++;
		}
		s.rowptr[r + 1] = k;
	}
	return c;
}

void rt_csr_expand(const TrtType *t, const int64_t *key, const Chunk *sparse, void *dense)
{
	size_t es = rt_dtype_size(t->dtype);
	RtCsr s = rt_csr_of(sparse, t->dtype);
	int64_t nrow, ncol;

	rt_csr_dims(t, key, &nrow, &ncol);
	if (s.nrow != nrow || s.ncol != ncol)
		rt_bug("sparse chunk of %lld x %lld where %lld x %lld belongs", (long long)s.nrow,
		       (long long)s.ncol, (long long)nrow, (long long)ncol);
	memset(dense, 0, (size_t)(nrow * ncol) * es);
	for (int64_t r = 0; r < nrow; r++)
		for (int64_t k = s.rowptr[r]; k < s.rowptr[r + 1]; k++)
			memcpy((char *)dense + (size_t)(r * ncol + s.col[k]) * es,
			       (const char *)s.val + (size_t)k * es, es);
}

TrtRel *rt_sparse_of(TrtRel *r, const TrtType *t)
{
	TrtRel *out = trt_rel_new(t, r->place);

	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * t->nkey;
		size_t mark = rt_pin_mark();
		Chunk *c = rt_csr_compress(t, key, rt_chunk_data(r->chunks[i]));
		if (c)
			rt_rel_push(out, key, c);
		rt_pin_release(mark);
		/* one dense chunk at a time beside the sparse ones */
		rt_chunk_unref(r->chunks[i]);
		r->chunks[i] = NULL;
	}
	trt_free(r);
	return out;
}

/* Element idx's position (idx: an index per key dim into the tensor) in
 * key's chunk: row-major over the chunk dims in chunk order, which is
 * row * ncol + col of its compressed rows. */
int64_t rt_csr_cell(const TrtType *t, const int64_t *key, const int64_t *idx)
{
	int64_t cell = 0;

	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		int64_t start = key[d] * t->block[d];
		int64_t n = t->extent[d] - start < t->block[d] ? t->extent[d] - start : t->block[d];
		cell = cell * n + (idx[d] - start);
	}
	return cell;
}

/* The way back: the tensor index of position cell of key's chunk. */
void rt_csr_index(const TrtType *t, const int64_t *key, int64_t cell, int64_t *idx)
{
	for (int d = 0; d < t->nkey; d++)
		idx[d] = key[d] * t->block[d];
	for (int c = t->nchunk - 1; c >= 0; c--) {
		int d = t->chunkdim[c];
		int64_t n = t->extent[d] - idx[d] < t->block[d] ? t->extent[d] - idx[d] : t->block[d];
		idx[d] += cell % n;
		cell /= n;
	}
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
		memset(rt_csr_mut(c, t->dtype).rowptr, 0, sizeof(int64_t) * (size_t)(nrow + 1));
		return c;
	}
	Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
	memset(rt_chunk_mut(c), 0, c->nbytes);
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
		size_t mark = rt_pin_mark();
		rt_rel_push(o, key, zero_chunk(t, key));
		rt_pin_release(mark);
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
		size_t mark = rt_pin_mark();
		rt_rel_push(o, key, w->type.sparse ? rt_chunk_dense(&w->type, key, w->chunks[i])
		                                   : rt_chunk_ref(w->chunks[i]));
		rt_pin_release(mark);
	}
	trt_free(w);
	return o;
}


/* ---- placing a skewed sparse input's blocks (the run-time placement) ----
 *
 * The plan partitions a sparse input by block, as every relation; which
 * rank holds which block it leaves to the run: a graph's heavy rows
 * cluster, and block index modulo the rank count would put them together.
 * Before the first op, trt_balance reads the stored elements per block
 * from the input's indptr (csr rows, csc columns; each rank reads the same
 * few bytes, so all agree without a message) and places the blocks the
 * way the two-phase paper's greedy does: heaviest first, each on the rank
 * with the least work so far (LPT).  A block's work is what the plan
 * gives it: its stored elements at the flops per element of the ops the
 * sparse input drives, plus its lines (the dense operands' rows that meet
 * it) at the flops per line of the dense ops the map places (codegen's
 * site_map_costs): after a sparse product the dense work
 * follows the rows, so a rank given few heavy blocks by their elements
 * alone had far less of it than one given many light ones.  The map is the
 * one the input's type names for the dim (TrtType.map: codegen numbers the
 * plan's classes of dims that meet a sparse input's), so every relation
 * of that class partitioned on such a dim alone follows it (rel.c,
 * trt_site); a second sparse input of the same class adds its counts.  Plans give a sparse dim SPARSE_BLOCKS_PER_RANK
 * blocks a rank (optimizer/blocking.c) so that there is something to
 * place.  --placement=hash keeps block modulo ranks, to compare. */

int rt_placement_hash;

static int heavier(const void *a, const void *b, void *w)
{
	double x = ((const double *)w)[*(const int64_t *)a], y = ((const double *)w)[*(const int64_t *)b];
	if (x != y)
		return x < y ? 1 : -1;
	return *(const int64_t *)a < *(const int64_t *)b ? -1 : 1;
}

static void place_lpt(RtSiteMap *m)
{
	int nr = rt.nranks;
	int64_t *order = rt_alloc(sizeof *order * (size_t)m->nblock);
	double *load = rt_alloc(sizeof *load * (size_t)nr), *hash = rt_alloc(sizeof *hash * (size_t)nr);
	double total = 0;

	for (int r = 0; r < nr; r++)
		load[r] = hash[r] = 0;
	for (int64_t b = 0; b < m->nblock; b++) {
		order[b] = b;
		hash[b % nr] += m->weight[b];
		total += m->weight[b];
	}
	qsort_r(order, (size_t)m->nblock, sizeof *order, heavier, m->weight);
	for (int64_t i = 0; i < m->nblock; i++) {
		int best = 0;
		for (int r = 1; r < nr; r++)
			if (load[r] < load[best])
				best = r;
		m->site[order[i]] = best;
		load[best] += m->weight[order[i]];
	}
	m->max = m->hash_max = 0;
	for (int r = 0; r < nr; r++) {
		m->max = load[r] > m->max ? load[r] : m->max;
		m->hash_max = hash[r] > m->hash_max ? hash[r] : m->hash_max;
	}
	m->avg = total / nr;
	if (rt_placement_hash)          /* counted, but left as it was */
		for (int64_t b = 0; b < m->nblock; b++)
			m->site[b] = (int)(b % nr);
	free(order);
	free(load);
	free(hash);
}

double rt_sparse_excess;

/* The bytes this rank will hold of the input beyond what the plan
 * planned: the planned density's share against the file's count (this
 * rank's blocks when partitioned on the counted dim, else an even share). */
static void count_excess(const TrtType *t, double density, TrtPlace p, int d, const double *count)
{
	double all = 1, total = 0, mine = 0;
	for (int k = 0; k < t->nkey; k++)
		all *= (double)t->extent[k];
	for (int64_t b = 0; b < rt_frontier(t, d); b++) {
		total += count[b];
		if (p.kind == TRT_PART && p.ndims == 1 && p.dims[0] == d) {
			int64_t key[TRT_MAXDIM] = { 0 };
			key[d] = b;
			mine += trt_site(&p, t, key) == rt.rank ? count[b] : 0;
		}
	}
	double share = p.kind == TRT_ALL ? 1 : 1.0 / rt.nranks;
	if (!(p.kind == TRT_PART && p.ndims == 1 && p.dims[0] == d))
		mine = total * share;
	double planned = density * all * share;
	if (mine > planned)             /* a value and a column index each */
		rt_sparse_excess += (mine - planned) * (double)(rt_dtype_size(t->dtype) + sizeof(int64_t));
}

void trt_balance(int tensor, const TrtType *t, double density, const double cost[][2], TrtPlace p)
{
	const TrtTensor *x = &rt.prog->tensors[tensor];
	const char *path = rt.paths[tensor];
	struct stat st;

	if (!t->sparse || !path || stat(path, &st) || !S_ISREG(st.st_mode) || !rt_npz_wanted(path))
		return;
	int64_t f[2] = { rt_frontier(t, 0), rt_frontier(t, 1) };
	double *count = rt_alloc(sizeof *count * (size_t)(f[0] > f[1] ? f[0] : f[1]));
	int d = rt_npz_block_counts(x, path, t, count);
	if (d >= 0 && rt.nranks > 1 && f[d] > rt.nranks) {
		RtSiteMap *m = rt_site_map(t->map[d], t->extent[d], t->block[d], 1);
		if (m) {
			int by_plan = cost[d][0] > 0 || cost[d][1] > 0;
			double elem = by_plan ? cost[d][0] : 1, line = by_plan ? cost[d][1] : 1;
			for (int64_t b = 0; b < m->nblock && b < f[d]; b++) {   /* a class's dims can differ in extent */
				int64_t lines = t->extent[d] - b * t->block[d];
				/* a second input of the class adds its elements, not the lines again */
				m->weight[b] += elem * count[b] + (m->what[0] ? 0 : line * (double)(lines < t->block[d] ? lines : t->block[d]));
				m->elems[b] += count[b];
			}
			size_t at = strlen(m->what);
			snprintf(m->what + at, sizeof m->what - at, "%s%s's %s", at ? ", " : "", x->name,
			         d ? "columns" : "rows");
			m->by_plan |= by_plan;
			place_lpt(m);
		}
	}
	if (d >= 0)
		count_excess(t, density, p, d, count);
	free(count);
}
