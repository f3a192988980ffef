/*
 * rel.c: chunks, relations and keys: the data structures every other file of
 * the runtime works on, and where tuples live (trt_site).
 *
 * A chunk's shape is never stored: it follows from the relation's TrtType and
 * the tuple's key (rt_chunk_shape), which is why chunks can be shared between
 * relations of the same chunk shape (a rekey, a local broadcast copy).
 *
 * Every chunk is made by rt_chunk_new and freed by rt_chunk_unref, which keep
 * rt.live (bytes of chunk data in memory on this rank) and its high-water
 * marks for --profile: the measured counterpart of the plan's peak bytes
 * per rank.  A chunk's header is malloc'd, its data allocated apart
 * (rt_data_alloc), so that under a memory budget the store (store.c) can
 * free the data of a chunk spilled to disk and read it back, the header
 * and the references to it staying put.  Big data is mapped and recycled
 * (see "chunks" below).
 */
#define _GNU_SOURCE                    /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include <malloc.h>                    /* mallopt */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt.h"

size_t rt_dtype_size(TrtDtype d)
{
	switch (d) {
	case TRT_F32: return 4;
	case TRT_F64: return 8;
	case TRT_I32: return 4;
	case TRT_I64: return 8;
	}
	rt_bug("bad dtype %d", (int)d);
}

const char *rt_dtype_name(TrtDtype d)
{
	static const char *const name[] = {[TRT_F32] = "f32", [TRT_F64] = "f64", [TRT_I32] = "i32", [TRT_I64] = "i64"};
	rt_dtype_size(d);       /* checks d */
	return name[d];
}

/* Element e of an array of dtype d, as a double (for norms and printing). */
double rt_elem(TrtDtype d, const void *p, int64_t e)
{
	switch (d) {
	case TRT_F32: return ((const float *)p)[e];
	case TRT_F64: return ((const double *)p)[e];
	case TRT_I32: return ((const int32_t *)p)[e];
	case TRT_I64: return (double)((const int64_t *)p)[e];
	}
	rt_bug("bad dtype %d", (int)d);
}

int64_t rt_frontier(const TrtType *t, int d)
{
	return (t->extent[d] + t->block[d] - 1) / t->block[d];
}

/* Number of keys in the frontier: the most tuples a relation of type t has
 * per copy.  Saturates rather than overflow. */
int64_t rt_nkeys(const TrtType *t)
{
	int64_t n = 1;

	for (int d = 0; d < t->nkey; d++) {
		int64_t f = rt_frontier(t, d);
		if (f && n > INT64_MAX / f)
			return INT64_MAX;
		n *= f;
	}
	return n;
}

/* Fills n[c] with chunk dim c's length for key (when n is not NULL) and
 * returns the element count. */
int64_t rt_chunk_first(const TrtType *t, int d, int64_t k)
{
	int64_t a = k * t->block[d];
	if (t->hext[d] > 0) {
		a -= t->hlo[d];
		a = a < 0 ? 0 : a < t->hext[d] ? a : t->hext[d];
	}
	return a;
}

int64_t rt_chunk_shape(const TrtType *t, const int64_t *key, int64_t *n)
{
	int64_t count = 1;

	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		int64_t len = t->extent[d] - key[d] * t->block[d];
		if (len > t->block[d])
			len = t->block[d];
		if (t->hext[d] > 0) {   /* a halo: the block and its neighbours' rows, clipped */
			int64_t a = rt_chunk_first(t, d, key[d]), e = key[d] * t->block[d] + len + t->hhi[d];
			e = e < t->hext[d] ? e : t->hext[d];
			len = e > a ? e - a : 0;
		}
		if (n)
			n[c] = len;
		count *= len;
	}
	return count;
}

void rt_box_copy(char *dst, const int64_t *dn, const int64_t *dat, const char *src, const int64_t *sn,
                 const int64_t *sat, const int64_t *cnt, int rank, size_t es)
{
	int64_t idx[TRT_MAXDIM] = {0}, nrun = 1;
	for (int c = 0; c < rank; c++)
		if (!cnt[c])
			return;
	for (int c = 0; c + 1 < rank; c++)
		nrun *= cnt[c];
	size_t run = rank ? (size_t)cnt[rank - 1] * es : es;
	for (int64_t r = 0; r < nrun; r++) {
		int64_t so = 0, doff = 0;
		for (int c = 0; c < rank; c++) {
			so = so * sn[c] + sat[c] + idx[c];
			doff = doff * dn[c] + dat[c] + idx[c];
		}
		memcpy(dst + (size_t)doff * es, src + (size_t)so * es, run);
		for (int c = rank - 2; c >= 0; c--) {
			if (++idx[c] < cnt[c])
				break;
			idx[c] = 0;
		}
	}
}

size_t rt_chunk_bytes(const TrtType *t, const int64_t *key)
{
	return (size_t)rt_chunk_shape(t, key, NULL) * rt_dtype_size(t->dtype);
}

void rt_check_type(const TrtType *t)
{
	if (t->nkey < 0 || t->nkey > TRT_MAXDIM || t->nchunk < 0 || t->nchunk > TRT_MAXDIM)
		rt_bug("relation type with %d key dims and %d chunk dims", t->nkey, t->nchunk);
	rt_dtype_size(t->dtype);        /* checks it */
	for (int d = 0; d < t->nkey; d++)
		if (t->extent[d] < 0 || t->block[d] < 1)
			rt_bug("key dim %d has extent %lld and block %lld", d,
			       (long long)t->extent[d], (long long)t->block[d]);
	for (int c = 0; c < t->nchunk; c++)
		if (t->chunkdim[c] < 0 || t->chunkdim[c] >= t->nkey)
			rt_bug("chunk dim %d spans key dim %d of %d", c, t->chunkdim[c], t->nkey);
}

void rt_check_key(const TrtType *t, const int64_t *key)
{
	for (int d = 0; d < t->nkey; d++)
		if (key[d] < 0 || key[d] >= rt_frontier(t, d))
			rt_bug("key dim %d value %lld outside frontier %lld", d,
			       (long long)key[d], (long long)rt_frontier(t, d));
}

/* ---- chunks ---- */

/*
 * Big chunks (BIG bytes and more) are mapped, not malloc'd: a chunk's pages
 * are faulted in and zeroed by the kernel on first touch, which on a virtual
 * machine costs as much as a memcpy of the data, once per new chunk.  So
 *  - a mapping of 2 MiB or more starts on a 2 MiB boundary, and with
 *    TRAC_HUGEPAGES=1 is advised MADV_HUGEPAGE: one fault per 2 MiB instead
 *    of 512.  Not by default: on the virtual machines we run on, a huge page
 *    new to the guest often comes from memory the host has taken back, and
 *    its first touch ran at 0.2-0.3 GB/s against 1-2 GB/s for 4 KiB pages
 *    (bench/README.md, "Start-up"), which made Tucker 1.5-1.8x slower;
 *  - a freed mapping goes to a small cache and the next chunk of about its
 *    size reuses it, already faulted in; a smaller chunk takes the head of
 *    a larger one, and the rest stays cached.  What is cached and what is
 *    live together stay within the peak of live chunk bytes (plus
 *    CACHE_MIN): a chunk freed below the high-water mark is kept, and a
 *    chunk no cached mapping fits is made of the cached pieces' pages,
 *    moved (mremap), and new memory for the rest, which is faulted in by
 *    one madvise(MADV_POPULATE_WRITE) rather than a trap per page (a 64
 *    MiB mapping here: 1.9-2.1 GB/s against 1.4-1.6; both calibrations
 *    measure the first touch so), or, by prefault.c's thread on an idle
 *    core, while the rank writes it.  So the process's chunk
 *    memory stays within the peak that --profile reports, and memory the
 *    run has held before is reused rather than touched anew, as the cost
 *    model assumes (optimizer/cost.c: only memory beyond the high-water
 *    mark costs a first touch).
 * glibc's malloc would return big blocks to the kernel on free (its mmap
 * threshold), and fault them in again on the next allocation.
 * Smaller chunks come from malloc's heap, and glibc gives the heap's free
 * top back to the kernel once it passes its trim threshold (128 KiB,
 * raised only as far as twice the biggest block it mapped and freed): a
 * loop step that frees its transients and makes them again then faults in
 * every page of a new chunk each step (mnist_mlp's dZ W2^T, a 100 KiB C:
 * 10 faults a call, twice the call's time; bench/README.md, "Roofline").
 * So, once, before the first chunk (heap_init), the heap keeps up to
 * CACHE_MIN free at its top, as the mapping cache does.  Setting one
 * threshold turns off glibc's moving of both, so the mapping threshold is
 * set where glibc's own moving stops, MALLOC_MAP (at 1 MiB every buffer of
 * 1-32 MiB the runtime mallocs outside chunks became a new mapping each
 * step: transe 1.2x slower).  Neither raises VmHWM: the heap only keeps
 * pages it has held.  Under a memory budget it keeps BUDGET_SLACK at most,
 * the process's own memory, inside trac.1's 16 MiB allowance.
 */
#define BIG ((size_t)256 << 10)
#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE ((size_t)4096)
#define CACHE_SLOTS 64
#define CACHE_MIN ((double)(64 << 20))
#define MALLOC_MAP ((size_t)32 << 20)
#define BUDGET_SLACK ((size_t)4 << 20)

static struct { void *p; size_t len; } cache[CACHE_SLOTS];
static int ncache;
static double cached;

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) / to * to;
}

static void *map_big(size_t len)
{
	/* best fit among cached mappings no more than 1/8 larger */
	int best = -1;
	for (int i = 0; i < ncache; i++)
		if (cache[i].len >= len && cache[i].len <= len + len / 8 &&
		    (best < 0 || cache[i].len < cache[best].len))
			best = i;
	if (best >= 0) {
		void *p = cache[best].p;
		cached -= (double)cache[best].len;
		cache[best] = cache[--ncache];
		return p;
	}
	/* else the head of the smallest larger one: its pages are faulted in
	 * already, which on a virtual machine is most of a new chunk's cost */
	for (int i = 0; i < ncache; i++)
		if (cache[i].len > len && (best < 0 || cache[i].len < cache[best].len))
			best = i;
	if (best >= 0) {
		char *p = cache[best].p;
		size_t rest = cache[best].len - len;
		cached -= (double)len;
		if (rest >= BIG) {
			cache[best].p = p + len;
			cache[best].len = rest;
		} else {
			munmap(p + len, rest);
			cached -= (double)rest;
			cache[best] = cache[--ncache];
		}
		return p;
	}
	/* else new memory, into which the cached pieces' pages move, the
	 * largest first (mremap: no copy, and no new first touch): Tucker's
	 * 85 MB transients take heads of its freed 170 MB chunks, and a 170
	 * MB chunk is then made of the pieces.  What the pieces do not cover
	 * is new to the process. */
	size_t align = len >= HUGE_PAGE ? HUGE_PAGE : PAGE;
	char *p = mmap(NULL, len + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	char *start = (char *)round_up((size_t)p, align);
	if (start > p)
		munmap(p, (size_t)(start - p));
	if (p + len + align > start + len)
		munmap(start + len, (size_t)(p + len + align - (start + len)));
	size_t off = 0;
	while (off < len && ncache > 0) {
		int big = 0;
		for (int i = 1; i < ncache; i++)
			if (cache[i].len > cache[big].len)
				big = i;
		char *q = cache[big].p;
		size_t take = cache[big].len < len - off ? cache[big].len : len - off;
		if (mremap(q, take, take, MREMAP_MAYMOVE | MREMAP_FIXED, start + off) == MAP_FAILED)
			break;          /* the rest stays new memory */
		cached -= (double)take;
		off += take;
		if (take == cache[big].len) {
			cache[big] = cache[--ncache];
		} else {
			cache[big].p = q + take;
			cache[big].len -= take;
		}
	}
#ifdef MADV_HUGEPAGE
	static int huge = -1;
	if (huge < 0)
		huge = getenv("TRAC_HUGEPAGES") && !strcmp(getenv("TRAC_HUGEPAGES"), "1");
	if (align == HUGE_PAGE && huge)
		madvise(start, len, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
	/* what the pieces did not cover is new: faulted in by one call
	 * (Linux 5.14; an older kernel refuses it and the first touch faults
	 * page by page as before) */
	if (off < len && !rt_prefault(start + off, len - off))
		madvise(start + off, len - off, MADV_POPULATE_WRITE);
#endif
	return start;
}

static void unmap_big(void *p, size_t len)
{
	rt_prefault_forget(p, len);     /* the thread is done with it */
	/* under a budget, what is cached and what is live stay within it */
	double room = rt.budget > 0 ? rt.budget : rt.peak + CACHE_MIN;
	if (ncache < CACHE_SLOTS && rt.live + cached + (double)len <= room) {
		cache[ncache].p = p;
		cache[ncache].len = len;
		ncache++;
		cached += (double)len;
		return;
	}
	munmap(p, len);
}

void rt_live_add(double bytes)
{
	rt.live += bytes;
	if (rt.live > rt.op_peak) {
		rt.op_peak = rt.live;
		if (rt.live > rt.peak)
			rt.peak = rt.live;
	}
}

/*
 * Chunk data has TAIL_PAD readable bytes after its end.  BLIS 0.9's small
 * ("sup") sgemm kernels read up to 8 bytes past the end of C (a 2-float
 * overread: C stored by rows with n % 16 in {2, 3, 10, 11, 14, 15}, or by
 * columns with m so, and k past about 200), which faults when C ends at a
 * page the process has not mapped -- a mapped chunk whose size is a whole
 * number of pages, such as mttkrp's 400 x 400 x 50 blocks.  Every C the
 * runtime hands BLIS is chunk data, so the pad here covers every gemm.
 * tests/unit/test_runtime.c measures the overread against a guard page.
 * The pad is not counted as live bytes (--profile's peak is the plan's).
 */
#define TAIL_PAD ((size_t)256)

static void heap_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)   /* glibc's */
	mallopt(M_MMAP_THRESHOLD, (int)MALLOC_MAP);
	/* under a budget (set before the first chunk: spill.c, guard.c) the
	 * heap's slack is part of trac.1's 16 MiB allowance, not the budget */
	mallopt(M_TRIM_THRESHOLD, rt.budget > 0 ? (int)BUDGET_SLACK : (int)CACHE_MIN);
#endif
}

char *rt_data_alloc(size_t nbytes, size_t *mapped)
{
	void *p = NULL;

	heap_init();
	*mapped = 0;
	if (nbytes > SIZE_MAX - HUGE_PAGE - TAIL_PAD)
		return NULL;
	if (nbytes >= BIG)
		p = map_big(*mapped = round_up(nbytes + TAIL_PAD, PAGE));
	else if (posix_memalign(&p, RT_ALIGN, nbytes + TAIL_PAD))
		p = NULL;
	return p;
}

void rt_data_free(char *p, size_t mapped)
{
	if (mapped)
		unmap_big(p, mapped);
	else
		free(p);
}

Chunk *rt_chunk_new(size_t nbytes)
{
	Chunk *c = malloc(sizeof *c);
	if (!c)
		rt_oom(sizeof *c, "a chunk's header");
	memset(c, 0, sizeof *c);
	c->refs = 1;
	c->nbytes = nbytes;
	c->slot = -1;
	c->spos = -1;
	if (rt.budget > 0)
		rt_store_reserve(nbytes);
	c->data = rt_data_alloc(nbytes, &c->mapped);
	if (!c->data) {
		free(c);
		rt_oom(nbytes, "a chunk");
	}
	rt_live_add((double)nbytes);
	if (rt.budget > 0)
		rt_store_add(c);
	return c;
}

const void *rt_chunk_data(const Chunk *c)
{
	return rt.budget > 0 ? rt_store_pin(c, 0) : c->data;
}

void *rt_chunk_mut(const Chunk *c)
{
	return rt.budget > 0 || c->slot >= 0 ? rt_store_pin(c, 1) : c->data;
}

Chunk *rt_chunk_ref(Chunk *c)
{
	c->refs++;
	return c;
}

void rt_chunk_unref(Chunk *c)
{
	if (c && --c->refs == 0) {
		if (c->next || c->io || c->slot >= 0 || c->pins)
			rt_store_drop(c);
		if (c->data) {
			rt_live_add(-(double)c->nbytes);
			rt_data_free(c->data, c->mapped);
		}
		free(c);
	}
}

static TrtView view(const TrtType *t, const int64_t *key, const Chunk *c, int write)
{
	TrtView v;

	memset(&v, 0, sizeof v);
	v.p = write ? rt_chunk_mut(c) : (void *)rt_chunk_data(c);
	v.rank = t->nchunk;
	rt_chunk_shape(t, key, v.n);
	for (int ch = 0; ch < t->nchunk; ch++)
		v.off[ch] = rt_chunk_first(t, t->chunkdim[ch], key[t->chunkdim[ch]]);
	if (t->sparse) {
		RtCsr s = write ? rt_csr_mut(c, t->dtype) : rt_csr_of(c, t->dtype);
		v.p = s.val;
		v.rowptr = s.rowptr;
		v.col = s.col;
		v.nnz = s.nnz;
	}
	return v;
}

TrtView rt_view(const TrtType *t, const int64_t *key, const Chunk *c)
{
	return view(t, key, c, 0);
}

TrtView rt_view_mut(const TrtType *t, const int64_t *key, const Chunk *c)
{
	return view(t, key, c, 1);
}

/* ---- sparse chunks ---- */

enum { CSR_HEAD = 4 * sizeof(int64_t) };        /* nrow, ncol, nnz, unused */

size_t rt_csr_bytes(TrtDtype dt, int64_t nrow, int64_t nnz)
{
	return CSR_HEAD + sizeof(int64_t) * (size_t)(nrow + 1 + nnz) + rt_dtype_size(dt) * (size_t)nnz;
}

Chunk *rt_csr_new(TrtDtype dt, int64_t nrow, int64_t ncol, int64_t nnz)
{
	if (nrow < 0 || ncol < 0 || nnz < 0)
		rt_bug("sparse chunk of %lld rows, %lld columns, %lld elements", (long long)nrow,
		       (long long)ncol, (long long)nnz);
	Chunk *c = rt_chunk_new(rt_csr_bytes(dt, nrow, nnz));
	int64_t *h = rt_chunk_mut(c);
	h[0] = nrow;
	h[1] = ncol;
	h[2] = nnz;
	h[3] = 0;
	h[4] = 0;               /* rowptr[0] */
	return c;
}

static RtCsr csr_at(const Chunk *c, int64_t *h, TrtDtype dt)
{
	RtCsr s;

	s.nrow = h[0];
	s.ncol = h[1];
	s.nnz = h[2];
	s.rowptr = h + 4;
	s.col = s.rowptr + s.nrow + 1;
	s.val = s.col + s.nnz;
	if (c->nbytes != rt_csr_bytes(dt, s.nrow, s.nnz))
		rt_bug("sparse chunk of %zu bytes holds %lld rows and %lld elements", c->nbytes,
		       (long long)s.nrow, (long long)s.nnz);
	return s;
}

/* To read: the arrays must not be written. */
RtCsr rt_csr_of(const Chunk *c, TrtDtype dt)
{
	return csr_at(c, (int64_t *)rt_chunk_data(c), dt);
}

RtCsr rt_csr_mut(const Chunk *c, TrtDtype dt)
{
	return csr_at(c, rt_chunk_mut(c), dt);
}

void rt_csr_dims(const TrtType *t, const int64_t *key, int64_t *nrow, int64_t *ncol)
{
	int64_t n[TRT_MAXDIM] = {0};

	rt_chunk_shape(t, key, n);
	*nrow = t->nchunk ? n[0] : 1;
	*ncol = 1;
	for (int c = 1; c < t->nchunk; c++)
		*ncol *= n[c];
}

/* ---- a chunk's place in its tensor ---- */

void rt_block_of(const TrtType *t, const int64_t *key, RtBlock *b)
{
	int spanned[TRT_MAXDIM] = { 0 };

	b->identity = 1;
	for (int c = 0; c < t->nchunk; c++) {
		if (spanned[t->chunkdim[c]])
			rt_bug("chunk dims span key dim %d twice", t->chunkdim[c]);
		spanned[t->chunkdim[c]] = 1;
		if (c && t->chunkdim[c] < t->chunkdim[c - 1])
			b->identity = 0;
	}
	int64_t s = 1;
	b->nrun = 1;
	for (int d = t->nkey - 1; d >= 0; d--) {
		b->tstride[d] = s;
		s *= t->extent[d];
		b->start[d] = key[d] * t->block[d];
		b->cnt[d] = t->extent[d] - b->start[d];
		if (b->cnt[d] > t->block[d])
			b->cnt[d] = t->block[d];
		if (!spanned[d] && b->cnt[d] != 1)
			rt_bug("key dim %d spans %lld elements but no chunk dim", d, (long long)b->cnt[d]);
		b->nrun *= b->cnt[d];
	}
	/* a run grows over the trailing dims the block spans whole */
	b->d0 = t->nkey ? t->nkey - 1 : 0;
	b->run = t->nkey ? b->cnt[b->d0] : 1;
	while (b->d0 > 0 && b->cnt[b->d0] == t->extent[b->d0]) {
		b->d0--;
		b->run *= b->cnt[b->d0];
	}
	b->nrun = b->run ? b->nrun / b->run : 0;
}

/* Run i's first element: its row-major index in the whole tensor. */
int64_t rt_block_run(const TrtType *t, const RtBlock *b, int64_t i)
{
	int64_t off = 0;

	for (int d = t->nkey - 1; d >= 0; d--) {
		int64_t at = b->start[d];
		if (d < b->d0) {
			at += i % b->cnt[d];
			i /= b->cnt[d];
		}
		off += at * b->tstride[d];
	}
	return off;
}

/* The elements of block b of chunk type t, dense row-major over the key
 * dims in src, into dst in chunk order. */
void rt_block_to_chunk(const TrtType *t, const RtBlock *b, void *dst, const void *src)
{
	int64_t bstride[TRT_MAXDIM], n[TRT_MAXDIM], st[TRT_MAXDIM], s = 1;

	for (int d = t->nkey - 1; d >= 0; d--) {
		bstride[d] = s;
		s *= b->cnt[d];
	}
	for (int k = 0; k < t->nchunk; k++) {
		n[k] = b->cnt[t->chunkdim[k]];
		st[k] = bstride[t->chunkdim[k]];
	}
	rt_gather(dst, src, t->nchunk, n, st, rt_dtype_size(t->dtype));
}

/* Copies a strided array into a dense row-major one of shape n[0..nd). */
void rt_gather(void *dst, const void *src, int nd, const int64_t *n, const int64_t *stride,
               size_t es)
{
	int64_t idx[TRT_MAXDIM] = { 0 }, total = 1;

	for (int d = 0; d < nd; d++)
		total *= n[d];
	if (total == 0)
		return;
	int64_t inner = nd ? n[nd - 1] : 1, is = nd ? stride[nd - 1] : 0;
	char *out = dst;
	for (int64_t done = 0; done < total; done += inner) {
		int64_t off = 0;
		for (int d = 0; d + 1 < nd; d++)
			off += idx[d] * stride[d];
		if (es == 4) {
			const float *s = (const float *)src + off;
			float *o = (float *)out;
			for (int64_t i = 0; i < inner; i++)
				o[i] = s[i * is];
		} else {
			const double *s = (const double *)src + off;
			double *o = (double *)out;
			for (int64_t i = 0; i < inner; i++)
				o[i] = s[i * is];
		}
		out += (size_t)inner * es;
		for (int d = nd - 2; d >= 0; d--) {
			if (++idx[d] < n[d])
				break;
			idx[d] = 0;
		}
	}
}

/* ---- relations ---- */

TrtRel *trt_rel_new(const TrtType *t, TrtPlace p)
{
	TrtRel *r = rt_alloc(sizeof *r);

	rt_check_type(t);
	if (p.ndims < 0 || p.ndims > t->nkey)
		rt_bug("placement on %d dims of a relation with %d key dims", p.ndims, t->nkey);
	memset(r, 0, sizeof *r);
	r->type = *t;
	r->place = p;
	rt_store_rel_new(r);
	return r;
}

void trt_free(TrtRel *r)
{
	if (!r)
		return;
	rt_store_rel_free(r);
	for (int64_t i = 0; i < r->n; i++)
		rt_chunk_unref(r->chunks[i]);
	free(r->keys);
	free(r->chunks);
	free(r);
}

int64_t trt_ntuples(const TrtRel *r)
{
	return r->n;
}

/* Appends a tuple; the relation takes over the caller's reference to c. */
void rt_rel_push(TrtRel *r, const int64_t *key, Chunk *c)
{
	int nk = r->type.nkey;

	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 8;
		r->keys = rt_realloc(r->keys, sizeof *r->keys * (size_t)(r->cap * (nk ? nk : 1)));
		r->chunks = rt_realloc(r->chunks, sizeof *r->chunks * (size_t)r->cap);
	}
	memcpy(r->keys + r->n * nk, key, sizeof *key * (size_t)nk);
	r->chunks[r->n++] = c;
	if (rt.budget > 0)
		rt_store_note(r, c);
}

/* Tuple i's chunk (pushed NULL, made later): r takes over the reference. */
void rt_rel_set(TrtRel *r, int64_t i, Chunk *c)
{
	r->chunks[i] = c;
	if (rt.budget > 0)
		rt_store_note(r, c);
}

int rt_key_cmp(const int64_t *a, const int64_t *b, int n)
{
	for (int i = 0; i < n; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

void rt_key_pick(int64_t *out, const int64_t *key, int n, const int *dims)
{
	for (int i = 0; i < n; i++)
		out[i] = key[dims[i]];
}

/* A stable merge sort of the positions idx[0..n): qsort is not stable and
 * has no context argument, and tuples are few. */
void rt_sort(int64_t *idx, int64_t n, int (*cmp)(int64_t, int64_t, const void *),
             const void *ctx)
{
	if (n < 2)
		return;
	int64_t *tmp = rt_alloc(sizeof *tmp * (size_t)n);
	for (int64_t w = 1; w < n; w *= 2) {
		for (int64_t lo = 0; lo < n; lo += 2 * w) {
			int64_t mid = lo + w < n ? lo + w : n;
			int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
			int64_t i = lo, j = mid, k = lo;
			while (i < mid && j < hi)
				tmp[k++] = cmp(idx[j], idx[i], ctx) < 0 ? idx[j++] : idx[i++];
			while (i < mid)
				tmp[k++] = idx[i++];
			while (j < hi)
				tmp[k++] = idx[j++];
		}
		memcpy(idx, tmp, sizeof *idx * (size_t)n);
	}
	free(tmp);
}

static int cmp_tuple(int64_t a, int64_t b, const void *ctx)
{
	const TrtRel *r = ctx;
	int nk = r->type.nkey;

	return rt_key_cmp(r->keys + a * nk, r->keys + b * nk, nk);
}

int64_t rt_rel_bsearch(const TrtRel *r, const int64_t *key)
{
	int nk = r->type.nkey;
	int64_t lo = 0, hi = r->n;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		int c = rt_key_cmp(r->keys + mid * nk, key, nk);
		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Sorts the tuples by key; tuples with equal keys keep their order. */
void rt_rel_sort(TrtRel *r)
{
	int nk = r->type.nkey;
	int64_t n = r->n, sorted = 1;

	for (int64_t i = 1; i < n && sorted; i++)
		sorted = rt_key_cmp(r->keys + (i - 1) * nk, r->keys + i * nk, nk) <= 0;
	if (sorted)
		return;
	int64_t *idx = rt_alloc(sizeof *idx * (size_t)n);
	for (int64_t i = 0; i < n; i++)
		idx[i] = i;
	rt_sort(idx, n, cmp_tuple, r);
	int64_t *keys = rt_alloc(sizeof *keys * (size_t)(n * nk + 1));
	Chunk **chunks = rt_alloc(sizeof *chunks * (size_t)n);
	for (int64_t i = 0; i < n; i++) {
		memcpy(keys + i * nk, r->keys + idx[i] * nk, sizeof *keys * (size_t)nk);
		chunks[i] = r->chunks[idx[i]];
	}
	free(r->keys);
	free(r->chunks);
	free(idx);
	r->keys = keys;
	r->chunks = chunks;
	r->cap = n;
}

/* Row-major position of key in the frontier, and back. */
int64_t rt_key_linear(const TrtType *t, const int64_t *key)
{
	int64_t lin = 0;

	for (int d = 0; d < t->nkey; d++)
		lin = lin * rt_frontier(t, d) + key[d];
	return lin;
}

void rt_key_from_linear(const TrtType *t, int64_t lin, int64_t *key)
{
	for (int d = t->nkey - 1; d >= 0; d--) {
		int64_t f = rt_frontier(t, d);
		key[d] = lin % f;
		lin /= f;
	}
}

int rt_next_key_here(const TrtType *t, TrtPlace p, int64_t *lin, int64_t *key)
{
	for (int64_t n = rt_nkeys(t); *lin < n; ++*lin) {
		rt_key_from_linear(t, *lin, key);
		if (p.kind != TRT_PART || trt_site(&p, t, key) == rt.rank)
			return 1;
	}
	return 0;
}

/* Site maps: the dims of one class of the plan's (those a sparse input's
 * balanced dim meets: codegen names the map in their types, TrtType.map)
 * place their blocks by the map rather than by block index modulo the
 * rank count.  The map belongs to the class, not to one relation, so every
 * relation partitioned on such a dim alone -- the sparse input, the dense
 * operands that meet it, the results -- agrees on where each block lives,
 * as co-partitioning needs; a relation of another class with the same
 * extent and block keeps the modulo rule.  A class can hold dims of other
 * extents with the same block (a convolution's output and its input, the
 * output's chunk k reading the input's chunk k): a block the map has is
 * placed by it, one past the map's end by the modulo rule. */
static RtSiteMap site_maps[RT_MAXMAPS];
static RtSiteMap *map_of[RT_MAXMAPS + 1];       /* by id */
static int nsite_maps;

RtSiteMap *rt_site_map(int id, int64_t extent, int64_t block, int create)
{
	if (id < 1 || id > RT_MAXMAPS)
		return NULL;
	if (map_of[id] || !create)
		return map_of[id];
	RtSiteMap *m = map_of[id] = &site_maps[nsite_maps++];
	memset(m, 0, sizeof *m);
	m->id = id;
	m->extent = extent;
	m->block = block;
	m->nblock = (extent + block - 1) / block;
	m->site = rt_alloc(sizeof *m->site * (size_t)m->nblock);
	m->weight = rt_alloc(sizeof *m->weight * (size_t)m->nblock);
	m->elems = rt_alloc(sizeof *m->elems * (size_t)m->nblock);
	for (int64_t b = 0; b < m->nblock; b++) {
		m->site[b] = (int)(b % rt.nranks);
		m->weight[b] = m->elems[b] = 0;
	}
	return m;
}

int rt_site_maps(RtSiteMap **maps)
{
	*maps = site_maps;
	return nsite_maps;
}

/* The row-major index over the partitioning dims, taken modulo the rank
 * count as it is built so that no frontier product can overflow (a dim of
 * one block adds nothing to it); when only one dim has more than one
 * block, its site map's rank if its type names one. */
int trt_site(const TrtPlace *p, const TrtType *t, const int64_t *key)
{
	int64_t lin = 0, nr = rt.nranks;

	if (p->kind != TRT_PART)
		return rt.rank;
	if (nsite_maps > 0) {
		int one = -1, n = 0;
		for (int i = 0; i < p->ndims; i++)
			if (rt_frontier(t, p->dims[i]) > 1) {
				one = p->dims[i];
				n++;
			}
		const RtSiteMap *m = n == 1 && t->map[one] ? rt_site_map(t->map[one], 0, 0, 0) : NULL;
		if (m && m->block != t->block[one])
			rt_bug("site map %d of blocks of %lld placing a dim of blocks of %lld", m->id,
			       (long long)m->block, (long long)t->block[one]);
		if (m && key[one] < m->nblock)
			return m->site[key[one]];
	}
	for (int i = 0; i < p->ndims; i++) {
		int d = p->dims[i];
		lin = (lin * (rt_frontier(t, d) % nr) + key[d] % nr) % nr;
	}
	return (int)lin;
}

/* ---- a hash index over a relation's keys ---- */

static uint64_t hash_key(const int64_t *key, int n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;

	for (int i = 0; i < n; i++) {
		h ^= (uint64_t)key[i];
		h *= 0xbf58476d1ce4e5b9ull;
		h ^= h >> 31;
	}
	return h;
}

void rt_index_init(KeyIndex *ix)
{
	memset(ix, 0, sizeof *ix);
}

int64_t rt_index_find(const KeyIndex *ix, const TrtRel *r, const int64_t *key)
{
	int nk = r->type.nkey;

	if (!ix->cap)
		return -1;
	for (uint64_t h = hash_key(key, nk);; h++) {
		int64_t s = ix->slot[h & (uint64_t)(ix->cap - 1)];
		if (!s)
			return -1;
		if (!rt_key_cmp(r->keys + (s - 1) * nk, key, nk))
			return s - 1;
	}
}

static void index_put(KeyIndex *ix, const TrtRel *r, int64_t pos)
{
	uint64_t h = hash_key(r->keys + pos * r->type.nkey, r->type.nkey);

	while (ix->slot[h & (uint64_t)(ix->cap - 1)])
		h++;
	ix->slot[h & (uint64_t)(ix->cap - 1)] = pos + 1;
}

void rt_index_add(KeyIndex *ix, const TrtRel *r, int64_t pos)
{
	if (2 * (ix->n + 1) > ix->cap) {
		KeyIndex old = *ix;
		ix->cap = old.cap ? 2 * old.cap : 16;
		ix->slot = rt_alloc(sizeof *ix->slot * (size_t)ix->cap);
		memset(ix->slot, 0, sizeof *ix->slot * (size_t)ix->cap);
		for (int64_t i = 0; i < old.cap; i++)
			if (old.slot[i])
				index_put(ix, r, old.slot[i] - 1);
		free(old.slot);
	}
	index_put(ix, r, pos);
	ix->n++;
}

void rt_index_free(KeyIndex *ix)
{
	free(ix->slot);
	rt_index_init(ix);
}
