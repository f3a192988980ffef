/*
 * param.c: params' initial values, ranges (an index's positions), relation
 * copies.  A param named on the command line (W=PATH) is read from that
 * file instead of made by its initialiser.
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
 *                     (rounded to f32, rarely b itself)
 *     normal(m, s)  = m + s * r * cos t   for even g = 2p,
 *                     m + s * r * sin t   for odd g = 2p + 1,
 *                     r = sqrt(-2 ln draw(p, 0)), t = 2 pi draw(p, 1)
 *
 * computed in double and rounded once to the param's type.  normal is
 * Box-Muller, both halves of each pair of draws: ln, cos and sin are this
 * file's own (within 2 ulps), not the C library's, so that they vectorise
 * and the values are the same under any libm.
 *
 * Params are made at memory speed: a chunk is filled run by run (RtBlock:
 * the pieces of it contiguous in the tensor, along which g counts up by
 * one), BLOCK elements at a time, by loops the compiler vectorises: the
 * hashing, 64-bit integer operations with no branch, into doubles, then a
 * loop storing them in the chunk's type.  The loops have constant trip
 * counts (BLOCK, or SMALL at a run's end), since gcc -O2 vectorises only
 * loops with no remainder.  On x86-64 the same loops are compiled a second
 * time for AVX-512, which has 64-bit multiplies and int64 -> double
 * conversions in vector registers, and that copy runs when the CPU has it.
 * The runtime is built with -ffp-contract=off, so that both copies round
 * alike: a fused multiply-add would change last bits, and values would
 * depend on the machine.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define INLINE static inline __attribute__((always_inline))

/* elements per pass: a block's doubles stay in L1; a run's end goes in
 * SMALL pieces, also vectorised, and the last few (< SMALL) one by one */
enum { BLOCK = 256, SMALL = 32 };

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

/*
 * ln x for x in (0, 1], within 2 ulps; libm's log is a call per element,
 * this vectorises.  x = 2^e m with m in [sqrt(1/2), sqrt(2)) (exponent bits
 * as integers; m - 1 is exact), and ln m = 2 atanh(s) with s = (m-1)/(m+1),
 * |s| <= 0.1716: the series 2 (s + s^3/3 + s^5/5 + ...) up to s^19, where
 * the next term is below 2^-56 of the sum.
 */
INLINE double ln(double x)
{
	uint64_t bits;
	double m;

	memcpy(&bits, &x, sizeof bits);
	int64_t e = (int64_t)(bits >> 52) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	memcpy(&m, &bits, sizeof m);                /* [1, 2) */
	int big = m > 1.4142135623730951;
	m = big ? 0.5 * m : m;
	e = big ? e + 1 : e;
	double f = m - 1.0, s = f / (2.0 + f), z = s * s;
	double p = 2.0 / 19;
	p = 2.0 / 17 + z * p;
	p = 2.0 / 15 + z * p;
	p = 2.0 / 13 + z * p;
	p = 2.0 / 11 + z * p;
	p = 2.0 / 9 + z * p;
	p = 2.0 / 7 + z * p;
	p = 2.0 / 5 + z * p;
	p = 2.0 / 3 + z * p;
	return (double)e * 0.69314718055994530942 + (2.0 * s + s * z * p);
}

/*
 * cos t and sin t for the angle t = 2 pi draw of hash h, within 2^-52.
 * The draw is k 2^-53, so t is k 2^-51 quarter turns, and the reduction to
 * the nearest quarter turn q is exact in integers: t = q pi/2 + x with
 * |x| <= pi/4, where Taylor series up to x^15 and x^16 are within 2^-54.
 */
INLINE void turn(uint64_t h, double *c, double *s)
{
	int64_t k = (int64_t)(h >> 11) + 1;
	int64_t q = (k + ((int64_t)1 << 50)) >> 51;
	double x = (double)(k - (q << 51)) * (3.14159265358979323846 * 0x1p-52);
	double x2 = x * x;
	double sn = x * (1 + x2 * (-1.0 / 6 + x2 * (1.0 / 120 + x2 * (-1.0 / 5040 +
	            x2 * (1.0 / 362880 + x2 * (-1.0 / 39916800 + x2 * (1.0 / 6227020800 +
	            x2 * (-1.0 / 1307674368000))))))));
	double cs = 1 + x2 * (-1.0 / 2 + x2 * (1.0 / 24 + x2 * (-1.0 / 720 + x2 * (1.0 / 40320 +
	            x2 * (-1.0 / 3628800 + x2 * (1.0 / 479001600 + x2 * (-1.0 / 87178291200 +
	            x2 * (1.0 / 20922789888000))))))));
	/* quarter turns: (cos, sin) -> (-sin, cos) -> (-cos, -sin) -> (sin, -cos) */
	int swap = q & 1, negc = (q + 1) & 2, negs = q & 2;
	double c0 = swap ? sn : cs, s0 = swap ? cs : sn;
	*c = negc ? -c0 : c0;
	*s = negs ? -s0 : s0;
}

/* The values of elements g .. g+n-1 into v, n <= BLOCK; for normal, g is
 * even and v has room for n rounded up to even. */
INLINE void values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int n,
                   double *restrict v)
{
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
		/* elements 2p and 2p+1: the two halves of Box-Muller on pair p */
		for (int j = 0; j < (n + 1) / 2; j++) {
			uint64_t p = g / 2 + (uint64_t)j;
			double r = sqrt(-2.0 * ln(draw(stream, p, 0))), c, s;
			turn(mix(stream ^ mix(2 * p + 1)), &c, &s);
			v[2 * j] = a + b * r * c;
			v[2 * j + 1] = a + b * r * s;
		}
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

	/* normals come in pairs from an even element: an odd first element
	 * is made with its pair's first and alone, so blocks start even */
	if (kind == TRT_INIT_NORMAL && g % 2 && n > 0) {
		values(kind, a, b, stream, g - 1, 2, v);
		store(v + 1, 1, dt, o);
		g++, n--, o += es;
	}
	for (; n >= BLOCK; n -= BLOCK, g += BLOCK, o += BLOCK * es) {
		values(kind, a, b, stream, g, BLOCK, v);
		store(v, BLOCK, dt, o);
	}
	for (; n >= SMALL; n -= SMALL, g += SMALL, o += SMALL * es) {
		values(kind, a, b, stream, g, SMALL, v);
		store(v, SMALL, dt, o);
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
	if (rt_path_given(tensor))              /* W=PATH: its initial value is that file */
		return trt_read(tensor, t, p);
	if (t->nkey != x->rank || t->nchunk != x->rank)
		rt_bug("init of %s with %d key dims", x->name, t->nkey);
	if (t->dtype != TRT_F32 && t->dtype != TRT_F64)
		rt_bug("init of %s, of type %s: params are f32 or f64", x->name, rt_dtype_name(t->dtype));
	uint64_t stream = rt_init_stream(trt_seed(), x->name);
	size_t es = rt_dtype_size(t->dtype);
	int64_t t0 = rt_span_begin();

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
		 * tensor's and transposed, as read.c reads one */
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
	if (t0)
		rt_trace_span(RT_SPAN_INIT, t0, -1, rt_trace_bytes(r), tensor, NULL);
	return r;
}

TrtRel *trt_range(const TrtType *t, TrtPlace p)
{
	if (t->nkey != 1 || t->nchunk != 1 || t->dtype != TRT_I64 || p.kind == TRT_ANY)
		rt_bug("a range of %d key dims, %d chunk dims, %s", t->nkey, t->nchunk, rt_dtype_name(t->dtype));
	TrtRel *r = trt_rel_new(t, p);
	for (int64_t k = 0; k < rt_frontier(t, 0); k++) {
		if (p.kind == TRT_PART && trt_site(&p, t, &k) != rt.rank)
			continue;
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, &k));
		int64_t *v = rt_chunk_data(c), n = (int64_t)(c->nbytes / sizeof *v), first = k * t->block[0];
		for (int64_t i = 0; i < n; i++)
			v[i] = first + i;
		rt_rel_push(r, &k, c);
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
