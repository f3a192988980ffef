/*
 * param.c: params' initial values, relation copies, print and loop progress.
 *
 * Random initial values are a pure function of (seed, tensor name, element
 * index in the whole tensor): a counter-based generator (the splitmix64
 * finaliser over the three), so any rank can make any chunk, and the values
 * do not depend on the rank count or the blocking.  With g an element's
 * row-major index:
 *
 *     stream      = mix(mix(seed) ^ fnv1a(name))
 *     draw(i, k)  = ((mix(stream ^ mix(2i + k)) >> 11) + 1) * 2^-53   in (0, 1]
 *     uniform(a, b) = a + (b - a) * (1 - draw(g, 0))                  in [a, b)
 *     normal(m, s)  = m + s * sqrt(-2 ln draw(g, 0)) * cos(2 pi draw(g, 1))
 *
 * computed in double and rounded once to the param's type.
 *
 * Params are made at memory speed: a chunk is filled run by run (RtBlock:
 * the pieces of it contiguous in the tensor, along which g counts up by
 * one), BLOCK elements at a time, by loops the compiler vectorises: the
 * hashing, 64-bit integer operations with no branch, into doubles, then a
 * loop storing them in the chunk's type.  Full blocks have a constant trip
 * count, since gcc -O2 vectorises only loops with no remainder.  On x86-64
 * the same loops are compiled a second time for AVX-512, which has 64-bit
 * multiplies and int64 -> double conversions in vector registers, and that
 * copy runs when the CPU has it.  The runtime is built with
 * -ffp-contract=off, so that both copies round alike: a fused multiply-add
 * would change last bits, and values would depend on the machine.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define INLINE static inline __attribute__((always_inline))

enum { BLOCK = 256 };           /* elements per pass: its doubles stay in L1 */

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;         /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

INLINE uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* draw(i, k) of the stream: (h >> 11) + 1 <= 2^53 converts exactly */
INLINE double draw(uint64_t stream, uint64_t i, uint64_t k)
{
	uint64_t h = mix(stream ^ mix(2 * i + k));
	return ((double)(h >> 11) + 1.0) * 0x1p-53;
}

/* The values of elements g .. g+n-1 into v, n <= BLOCK. */
INLINE void values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int n,
                   double *restrict v)
{
	double u2[BLOCK];

	switch (kind) {
	case TRT_INIT_ZEROS:
		for (int k = 0; k < n; k++)
			v[k] = 0;
		return;
	case TRT_INIT_ONES:
		for (int k = 0; k < n; k++)
			v[k] = 1;
		return;
	case TRT_INIT_UNIFORM:
		for (int k = 0; k < n; k++)
			v[k] = a + (b - a) * (1.0 - draw(stream, g + k, 0));
		return;
	case TRT_INIT_NORMAL:
		for (int k = 0; k < n; k++) {
			v[k] = draw(stream, g + k, 0);
			u2[k] = draw(stream, g + k, 1);
		}
		/* libm's log and cos: scalar calls */
		for (int k = 0; k < n; k++)
			v[k] = a + b * sqrt(-2.0 * log(v[k])) * cos(6.283185307179586476925 * u2[k]);
		return;
	}
	rt_bug("bad initialiser %d", (int)kind);
}

/* v[0..n) into out in type dt. */
INLINE void store(const double *restrict v, int n, TrtDtype dt, void *restrict out)
{
	if (dt == TRT_F32) {
		float *o = out;
		for (int k = 0; k < n; k++)
			o[k] = (float)v[k];
	} else {
		double *o = out;
		for (int k = 0; k < n; k++)
			o[k] = v[k];
	}
}

/* Elements g .. g+n-1 of the tensor into out, in type dt. */
INLINE void fill(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int64_t n,
                 TrtDtype dt, void *out)
{
	double v[BLOCK];
	size_t es = dt == TRT_F32 ? 4 : 8;
	char *o = out;

	for (; n >= BLOCK; n -= BLOCK, g += BLOCK, o += BLOCK * es) {
		values(kind, a, b, stream, g, BLOCK, v);
		store(v, BLOCK, dt, o);
	}
	if (n > 0) {
		values(kind, a, b, stream, g, (int)n, v);
		store(v, (int)n, dt, o);
	}
}

static void fill_plain(TrtInit kind, double a, double b, uint64_t stream, uint64_t g,
                       int64_t n, TrtDtype dt, void *out)
{
	fill(kind, a, b, stream, g, n, dt, out);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f,avx512dq,avx512vl")))
static void fill_avx512(TrtInit kind, double a, double b, uint64_t stream, uint64_t g,
                        int64_t n, TrtDtype dt, void *out)
{
	fill(kind, a, b, stream, g, n, dt, out);
}

static int have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	       __builtin_cpu_supports("avx512vl");
}
#else
#define fill_avx512 fill_plain
static int have_avx512(void)
{
	return 0;
}
#endif

int rt_fill_wide = -1;

void rt_init_values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int64_t n,
                    TrtDtype dt, void *out)
{
	if (rt_fill_wide < 0)
		rt_fill_wide = have_avx512();
	if (rt_fill_wide)
		fill_avx512(kind, a, b, stream, g, n, dt, out);
	else
		fill_plain(kind, a, b, stream, g, n, dt, out);
}

uint64_t rt_init_stream(uint64_t seed, const char *name)
{
	return mix(mix(seed) ^ name_hash(name));
}

TrtRel *trt_init_param(int tensor, const TrtType *t, TrtPlace p, TrtInit kind, double a, double b)
{
	const TrtProgram *prog = rt.prog;
	if (tensor < 0 || tensor >= prog->ntensors)
		rt_bug("init of tensor %d of %d", tensor, prog->ntensors);
	const TrtTensor *x = &prog->tensors[tensor];
	if (t->nkey != x->rank || t->nchunk != x->rank)
		rt_bug("init of %s with %d key dims", x->name, t->nkey);
	uint64_t stream = rt_init_stream(trt_seed(), x->name);
	size_t es = rt_dtype_size(t->dtype);

	TrtRel *r = trt_rel_new(t, p);
	int64_t nk = rt_nkeys(t), key[TRT_MAXDIM];
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		if (p.kind == TRT_PART && trt_site(&p, t, key) != rt.rank)
			continue;
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
		RtBlock bl;
		rt_block_of(t, key, &bl);
		/* a chunk in another order than the tensor's is made in the
		 * tensor's and transposed, as npy.c reads one */
		char *data = bl.identity ? rt_chunk_data(c) : rt_alloc(c->nbytes);
		for (int64_t i = 0; i < bl.nrun; i++)
			rt_init_values(kind, a, b, stream, (uint64_t)rt_block_run(t, &bl, i), bl.run,
			               t->dtype, data + (size_t)(i * bl.run) * es);
		if (!bl.identity) {
			rt_block_to_chunk(t, &bl, rt_chunk_data(c), data);
			free(data);
		}
		rt_rel_push(r, key, c);
	}
	return r;
}

TrtRel *trt_rel_clone(const TrtRel *r)
{
	TrtRel *c = trt_rel_new(&r->type, r->place);
	for (int64_t i = 0; i < r->n; i++)
		rt_rel_push(c, r->keys + i * r->type.nkey, rt_chunk_ref(r->chunks[i]));
	return c;
}

/* ---- print and loops ---- */

#define MAX_LOOPS 16

static struct {
	int depth;
	int64_t count[MAX_LOOPS], iter[MAX_LOOPS];
	double start;
} loops;

void trt_loop_begin(int64_t count)
{
	if (loops.depth == 0)
		loops.start = MPI_Wtime();
	if (loops.depth < MAX_LOOPS) {
		loops.count[loops.depth] = count;
		loops.iter[loops.depth] = 0;
	}
	loops.depth++;
}

void trt_loop_iter(int64_t i)
{
	if (loops.depth > 0 && loops.depth <= MAX_LOOPS)
		loops.iter[loops.depth - 1] = i;
}

void trt_loop_end(void)
{
	if (loops.depth > 0)
		loops.depth--;
}

void trt_print(const TrtRel *r, const char *name)
{
	const TrtType *t = &r->type;
	double sq = 0, first = 0;
	int have = 0;

	/* each element counted once: under TRT_ALL only rank 0's copy */
	if (r->place.kind != TRT_ALL || rt.rank == 0)
		for (int64_t i = 0; i < r->n; i++) {
			TrtView v = rt_view(t, r->keys + i * t->nkey, r->chunks[i]);
			int64_t count = 1;
			for (int c = 0; c < v.rank; c++)
				count *= v.n[c];
			for (int64_t e = 0; e < count; e++) {
				double x = t->dtype == TRT_F32 ? ((float *)v.p)[e] : ((double *)v.p)[e];
				if (!have) {
					first = x;
					have = 1;
				}
				sq += x * x;
			}
		}
	/* a scalar lives on one rank: the sum of the (one) value over ranks */
	double mine[2] = {have ? first : 0, sq}, all[2];
	MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rt.rank != 0 || rt.quiet)
		return;
	if (loops.depth > 0) {
		for (int l = 0; l < loops.depth && l < MAX_LOOPS; l++)
			printf("%siter %lld/%lld", l ? ", " : "", (long long)loops.iter[l] + 1, (long long)loops.count[l]);
		printf(" (%.2f s): ", MPI_Wtime() - loops.start);
	}
	if (t->nkey == 0) {
		printf("%s = %.9g\n", name, all[0]);
	} else {
		printf("%s: %s (", name, t->dtype == TRT_F32 ? "f32" : "f64");
		for (int d = 0; d < t->nkey; d++)
			printf("%s%lld", d ? ", " : "", (long long)t->extent[d]);
		printf("%s), norm %.9g\n", t->nkey == 1 ? "," : "", sqrt(all[1]));
	}
	fflush(stdout);
}
