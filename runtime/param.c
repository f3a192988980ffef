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
 *                     (the rounding rarely giving b itself)
 *     normal(m, s)  = m + s * r * cos t   for even g = 2p,
 *                     m + s * r * sin t   for odd g = 2p + 1,
 *                     h = mix(stream ^ mix(2p)),
 *                     r = sqrt(-2 ln (((h >> 32) + 1) 2^-32)),
 *                     t = 2 pi ((h mod 2^32) + 1) 2^-32
 *
 * computed in double and rounded once to the param's type, but an f32
 * param's, computed in f32 from pair p's h and written straight into the
 * chunk (eight lanes a vector where doubles take four):
 *
 *     uniform(a, b) = fmaf(b - a, k 2^-24, a)   (a, b - a rounded to f32;
 *                     k = h >> 40 for g = 2p, (h mod 2^32) >> 8 for 2p + 1;
 *                     in [a, b), the rounding rarely giving b itself)
 *     normal(m, s)  as above, with shorter polynomials (normal32), within
 *                   2^-22 (1 + r) of the exact values
 *
 * (uniform32: one hash for two elements where f64's uniform takes one an
 * element, so as many 64-bit multiplies an element as bench/matmul_hand.c's
 * hand-written loop).
 * normal is Box-Muller, both halves of each pair, its two draws the halves
 * of one hash (32 bits each: |normal| <= 6.66, whose chance is 3e-11): ln,
 * cos and sin are this file's own (within 2 ulps), not the C library's, so
 * that they vectorise and the values are the same under any libm; their
 * polynomials are fused multiply-adds (fma, which IEEE 754 rounds once on
 * every machine).
 *
 * Params are made at memory speed: a chunk is filled run by run (RtBlock:
 * the pieces of it contiguous in the tensor, along which g counts up by
 * one), BLOCK elements at a time, by loops the compiler vectorises: the
 * hashing, 64-bit integer operations with no branch, into doubles, then a
 * loop storing them in the chunk's type.  The loops have constant trip
 * counts (BLOCK, or SMALL at a run's end), since gcc -O2 vectorises only
 * loops with no remainder, and no branch (selects are bit masks, integers
 * become doubles through their bits, u53).  On x86-64 the same loops are
 * compiled twice more, for AVX2 with FMA (4 doubles a vector, 64-bit
 * multiplies emulated) and for AVX-512 (which has them), and the widest
 * copy the CPU has runs; the plain copy's fma is a libm call (the
 * hardware's on a CPU with FMA, software on one without, slow but the same
 * values).  The runtime is built with -ffp-contract=off, so that every
 * copy rounds alike: a multiply-add the compiler fused in one copy and not
 * in another would change last bits, and values would depend on the
 * machine; the fused ones are written out (fma) and the same in all.
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

INLINE double bits_double(uint64_t u)
{
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

INLINE uint64_t double_bits(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	return u;
}

/* (double)v for v < 2^53, exactly, in operations that vectorise without
 * AVX-512's int64 -> double: each half as the mantissa of 2^52 */
INLINE double u53(uint64_t v)
{
	double hi = bits_double((v >> 26) | 0x4330000000000000ull) - 0x1p52;
	double lo = bits_double((v & 0x3ffffffull) | 0x4330000000000000ull) - 0x1p52;
	return hi * 0x1p26 + lo;
}

/* draw(i, k) of the stream: (h >> 11) + 1 <= 2^53 converts exactly, in
 * the vector copies through u53, in the plain one (where a scalar
 * conversion is faster) as it is */
INLINE double draw(uint64_t stream, uint64_t i, uint64_t k, int wide)
{
	uint64_t h = mix(stream ^ mix(2 * i + k));
	return ((wide ? u53(h >> 11) : (double)(h >> 11)) + 1.0) * 0x1p-53;
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
	uint64_t bits = double_bits(x);
	/* m halved (its exponent one less) when [1, 2) puts it above sqrt(2):
	 * in integers, as a select the compiler vectorises */
	uint64_t mb = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
	uint64_t big = mb > 0x3ff6a09e667f3bcdull;
	double m = bits_double(mb - (big << 52));
	double e = bits_double(((bits >> 52) + big) | 0x4330000000000000ull) - (0x1p52 + 1023);
	double f = m - 1.0, s = f / (2.0 + f), z = s * s;
	double p = 2.0 / 19;
	p = __builtin_fma(z, p, 2.0 / 17);
	p = __builtin_fma(z, p, 2.0 / 15);
	p = __builtin_fma(z, p, 2.0 / 13);
	p = __builtin_fma(z, p, 2.0 / 11);
	p = __builtin_fma(z, p, 2.0 / 9);
	p = __builtin_fma(z, p, 2.0 / 7);
	p = __builtin_fma(z, p, 2.0 / 5);
	p = __builtin_fma(z, p, 2.0 / 3);
	return __builtin_fma(e, 0.69314718055994530942, __builtin_fma(s * z, p, 2.0 * s));
}

/*
 * cos t and sin t for the angle t = 2 pi k 2^-32, 0 < k <= 2^32, within
 * 2^-52: t is k 2^-30 quarter turns, and the reduction to the nearest
 * quarter turn q is exact in integers: t = q pi/2 + x with |x| <= pi/4,
 * where Taylor series up to x^15 and x^16 are within 2^-54.
 */
INLINE void turn(uint64_t k, double *c, double *s)
{
	uint64_t q = (k + ((uint64_t)1 << 29)) >> 30;
	double x = (u53(k - (q << 30) + ((uint64_t)1 << 29)) - 0x1p29) * (3.14159265358979323846 * 0x1p-31);
	double x2 = x * x;
	double sp = -1.0 / 1307674368000;
	sp = __builtin_fma(x2, sp, 1.0 / 6227020800);
	sp = __builtin_fma(x2, sp, -1.0 / 39916800);
	sp = __builtin_fma(x2, sp, 1.0 / 362880);
	sp = __builtin_fma(x2, sp, -1.0 / 5040);
	sp = __builtin_fma(x2, sp, 1.0 / 120);
	sp = __builtin_fma(x2, sp, -1.0 / 6);
	double sn = __builtin_fma(x * x2, sp, x);
	double cp = 1.0 / 20922789888000;
	cp = __builtin_fma(x2, cp, -1.0 / 87178291200);
	cp = __builtin_fma(x2, cp, 1.0 / 479001600);
	cp = __builtin_fma(x2, cp, -1.0 / 3628800);
	cp = __builtin_fma(x2, cp, 1.0 / 40320);
	cp = __builtin_fma(x2, cp, -1.0 / 720);
	cp = __builtin_fma(x2, cp, 1.0 / 24);
	cp = __builtin_fma(x2, cp, -1.0 / 2);
	double cs = __builtin_fma(x2, cp, 1.0);
	/* quarter turns: (cos, sin) -> (-sin, cos) -> (-cos, -sin) -> (sin,
	 * -cos), as a bit mask (swap) and sign bits (negc, negs) */
	uint64_t swap = -(q & 1), negc = ((q + 1) & 2) << 62, negs = (q & 2) << 62;
	uint64_t ub = double_bits(sn), vb = double_bits(cs);
	*c = bits_double(((ub & swap) | (vb & ~swap)) ^ negc);
	*s = bits_double(((vb & swap) | (ub & ~swap)) ^ negs);
}

/*
 * f32 params' normal values: the same pairs' hashes, the Box-Muller math in
 * f32, eight values a vector on AVX2 where doubles take four.  What
 * follows mirrors the f64 functions above, with f32's fewer terms.
 */
INLINE float bits_float(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof f);
	return f;
}

INLINE uint32_t float_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof u);
	return u;
}

/* k 2^-32 rounded once to f32, 0 <= k < 2^32 (plus one in the low half,
 * c 0 or 1): both halves convert exactly (as int32, what AVX2 converts),
 * their sum rounds */
INLINE float frac32(uint32_t k, int32_t c)
{
	float hi = (float)(int32_t)(k >> 16), lo = (float)((int32_t)(k & 0xffffu) + c);
	return hi * 0x1p-16f + lo * 0x1p-32f;
}

/*
 * ln x for the draw x = (k + 1) 2^-32 in (0, 1], in f32 within 2 ulps:
 * ln's reduction above, the series up to s^9 (the next term below 2^-28 of
 * the sum), ln 2 in two parts (Cody and Waite: e ln2_hi is exact for |e|
 * <= 32).  x rounded to f32 loses k's low bits where x > 1/2, which near 1
 * would be most of ln x: there (e = 0, m is x) m - 1 is taken as -w, w =
 * 1 - x = (2^32 - 1 - k) 2^-32, which rounds to f32 alone.
 */
INLINE float ln_draw32(uint32_t k)
{
	float x = frac32(k, 1), w = frac32(~k, 0);
	uint32_t bits = float_bits(x);
	int32_t mb = (int32_t)((bits & 0x007fffffu) | 0x3f800000u);
	int32_t big = mb > 0x3fb504f3;                 /* sqrt(2), rounded down */
	int32_t eb = (int32_t)(bits >> 23) + big - 127;
	float m = bits_float((uint32_t)(mb - (big << 23)));
	uint32_t one = -(uint32_t)(eb == 0);
	float f = bits_float((float_bits(-w) & one) | (float_bits(m - 1.0f) & ~one));
	float e = (float)eb, s = f / (2.0f + f), z = s * s;
	float p = 2.0f / 9;
	p = __builtin_fmaf(z, p, 2.0f / 7);
	p = __builtin_fmaf(z, p, 2.0f / 5);
	p = __builtin_fmaf(z, p, 2.0f / 3);
	return __builtin_fmaf(e, 0x1.62e4p-1f,          /* ln 2 = 0x1.62e4p-1 + 0x1.7f7d1cp-20 */
	                      __builtin_fmaf(e, 0x1.7f7d1cp-20f, __builtin_fmaf(s * z, p, 2.0f * s)));
}

/* cos t and sin t in f32 for t = 2 pi k 2^-32 (k = 0 is a whole turn):
 * turn's exact reduction in 32-bit integers (k + 2^29 wraps past 2^32 to
 * the same quarter turn mod 4), the remainder rounded to f32, |x| <= pi/4,
 * Taylor series up to x^9 and x^10 (within 2^-27) */
INLINE void turn32(uint32_t k, float *c, float *s)
{
	uint32_t q = (k + (1u << 29)) >> 30;
	float x = (float)(int32_t)(k - (q << 30)) * (float)(3.14159265358979323846 * 0x1p-31);
	float x2 = x * x;
	float sp = 1.0f / 362880;
	sp = __builtin_fmaf(x2, sp, -1.0f / 5040);
	sp = __builtin_fmaf(x2, sp, 1.0f / 120);
	sp = __builtin_fmaf(x2, sp, -1.0f / 6);
	float sn = __builtin_fmaf(x * x2, sp, x);
	float cp = -1.0f / 3628800;
	cp = __builtin_fmaf(x2, cp, 1.0f / 40320);
	cp = __builtin_fmaf(x2, cp, -1.0f / 720);
	cp = __builtin_fmaf(x2, cp, 1.0f / 24);
	cp = __builtin_fmaf(x2, cp, -1.0f / 2);
	float cs = __builtin_fmaf(x2, cp, 1.0f);
	uint32_t swap = -(q & 1), negc = ((q + 1) & 2) << 30, negs = (q & 2) << 30;
	uint32_t ub = float_bits(sn), vb = float_bits(cs);
	*c = bits_float(((ub & swap) | (vb & ~swap)) ^ negc);
	*s = bits_float(((vb & swap) | (ub & ~swap)) ^ negs);
}

/* normal(a, b)'s f32 values of the n elements from g into out, g and n
 * even, n <= BLOCK: pair p's hash h as above, r = sqrt(-2 ln_draw32(h >>
 * 32)), turn32((h mod 2^32) + 1), out = a + (b r) cos t (sin t), a and b
 * rounded to f32; three loops, as normal's are in values() */
INLINE void normal32(float a, float b, uint64_t stream, uint64_t g, int n, float *restrict out)
{
	uint32_t u[BLOCK / 2], t[BLOCK / 2];
	float r[BLOCK / 2];

	for (int j = 0; j < n / 2; j++) {
		uint64_t h = mix(stream ^ mix(g + 2 * (uint64_t)j));
		u[j] = (uint32_t)(h >> 32);
		t[j] = (uint32_t)h + 1;
	}
	for (int j = 0; j < n / 2; j++)
		r[j] = b * sqrtf(-2.0f * ln_draw32(u[j]));
	for (int j = 0; j < n / 2; j++) {
		float c, s;
		turn32(t[j], &c, &s);
		out[2 * j] = a + r[j] * c;
		out[2 * j + 1] = a + r[j] * s;
	}
}

/* uniform(a, b)'s f32 values of the n elements from g into out, g and n
 * even, n <= BLOCK: pair p's hash h, as normal's, gives its two elements
 * the top 24 bits of each half, k, and out = a + (b - a) k 2^-24 in one
 * fma (a and b - a rounded to f32): one hash for two elements, where f64's
 * uniform takes one an element */
INLINE void uniform32(float a, float w, uint64_t stream, uint64_t g, int n, float *restrict out)
{
	for (int j = 0; j < n / 2; j++) {
		uint64_t h = mix(stream ^ mix(g + 2 * (uint64_t)j));
		out[2 * j] = __builtin_fmaf(w, (float)(int32_t)(h >> 40) * 0x1p-24f, a);
		out[2 * j + 1] = __builtin_fmaf(w, (float)(int32_t)((uint32_t)h >> 8) * 0x1p-24f, a);
	}
}

/* Elements g .. g+n-1 of an f32 param's normal(a, b) or uniform(a, b)
 * into out, written straight into it: whole blocks, then pieces of SMALL,
 * then the last few through v; an odd first element alone, as fill's. */
INLINE void fill32(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int64_t n,
                   float *out)
{
	float v[SMALL];
	int u = kind == TRT_INIT_UNIFORM;
	float fa = (float)a, fb = u ? (float)(b - a) : (float)b;

#define PAIRS(G, N, OUT) (u ? uniform32(fa, fb, stream, (G), (N), (OUT)) \
	                    : normal32(fa, fb, stream, (G), (N), (OUT)))
	if (g % 2 && n > 0) {
		PAIRS(g - 1, 2, v);
		*out++ = v[1];
		g++, n--;
	}
	for (; n >= BLOCK; n -= BLOCK, g += BLOCK, out += BLOCK)
		PAIRS(g, BLOCK, out);
	for (; n >= SMALL; n -= SMALL, g += SMALL, out += SMALL)
		PAIRS(g, SMALL, out);
	if (n > 0) {
		PAIRS(g, (int)(n + 1) / 2 * 2, v);
		memcpy(out, v, (size_t)n * sizeof *out);
	}
#undef PAIRS
}

/* The values of elements g .. g+n-1 into v, n <= BLOCK; for normal, g is
 * even and v has room for n rounded up to even. */
INLINE void values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int n,
                   double *restrict v, int wide)
{
	double r[BLOCK / 2];
	uint64_t h[BLOCK / 2];

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
			v[k] = a + (b - a) * (1.0 - draw(stream, g + k, 0, wide));
		return;
	case TRT_INIT_NORMAL:
		/* elements 2p and 2p+1: the two halves of Box-Muller on pair p,
		 * in three loops (gcc vectorises each; one loop holding all
		 * of it did not, with its constants spilled) */
		for (int j = 0; j < (n + 1) / 2; j++) {
			h[j] = mix(stream ^ mix(g + 2 * (uint64_t)j));
			r[j] = (u53(h[j] >> 32) + 1.0) * 0x1p-32;
		}
		for (int j = 0; j < (n + 1) / 2; j++)
			r[j] = sqrt(-2.0 * ln(r[j]));
		for (int j = 0; j < (n + 1) / 2; j++) {
			double c, s;
			turn((h[j] & 0xffffffffull) + 1, &c, &s);
			v[2 * j] = a + b * r[j] * c;
			v[2 * j + 1] = a + b * r[j] * s;
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
                 TrtDtype dt, void *out, int wide)
{
	double v[BLOCK];
	size_t es = dt == TRT_F32 ? 4 : 8;
	char *o = out;

	if ((kind == TRT_INIT_NORMAL || kind == TRT_INIT_UNIFORM) && dt == TRT_F32) {
		fill32(kind, a, b, stream, g, n, out);
		return;
	}

	/* normals come in pairs from an even element: an odd first element
	 * is made with its pair's first and alone, so blocks start even */
	if (kind == TRT_INIT_NORMAL && g % 2 && n > 0) {
		values(kind, a, b, stream, g - 1, 2, v, wide);
		store(v + 1, 1, dt, o);
		g++, n--, o += es;
	}
	for (; n >= BLOCK; n -= BLOCK, g += BLOCK, o += BLOCK * es) {
		values(kind, a, b, stream, g, BLOCK, v, wide);
		store(v, BLOCK, dt, o);
	}
	for (; n >= SMALL; n -= SMALL, g += SMALL, o += SMALL * es) {
		values(kind, a, b, stream, g, SMALL, v, wide);
		store(v, SMALL, dt, o);
	}
	if (n > 0) {
		values(kind, a, b, stream, g, (int)n, v, wide);
		store(v, (int)n, dt, o);
	}
}

static void fill_plain(TrtInit kind, double a, double b, uint64_t stream, uint64_t g,
                       int64_t n, TrtDtype dt, void *out)
{
	fill(kind, a, b, stream, g, n, dt, out, 0);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma")))
static void fill_avx2(TrtInit kind, double a, double b, uint64_t stream, uint64_t g,
                      int64_t n, TrtDtype dt, void *out)
{
	fill(kind, a, b, stream, g, n, dt, out, 1);
}

__attribute__((target("avx512f,avx512dq,avx512vl,fma")))
static void fill_avx512(TrtInit kind, double a, double b, uint64_t stream, uint64_t g,
                        int64_t n, TrtDtype dt, void *out)
{
	fill(kind, a, b, stream, g, n, dt, out, 1);
}

int rt_fill_widest(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	    __builtin_cpu_supports("avx512vl"))
		return RT_FILL_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return RT_FILL_AVX2;
	return RT_FILL_PLAIN;
}
#else
#define fill_avx2 fill_plain
#define fill_avx512 fill_plain
int rt_fill_widest(void)
{
	return RT_FILL_PLAIN;
}
#endif

int rt_fill_wide = -1;

void rt_init_values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int64_t n,
                    TrtDtype dt, void *out)
{
	if (rt_fill_wide < 0)
		rt_fill_wide = rt_fill_widest();
	switch ((RtFillCopy)rt_fill_wide) {
	case RT_FILL_PLAIN:
		fill_plain(kind, a, b, stream, g, n, dt, out);
		return;
	case RT_FILL_AVX2:
		fill_avx2(kind, a, b, stream, g, n, dt, out);
		return;
	case RT_FILL_AVX512:
		fill_avx512(kind, a, b, stream, g, n, dt, out);
		return;
	}
	rt_bug("bad copy of the initialisers' loops %d", rt_fill_wide);
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
	int64_t key[TRT_MAXDIM];
	for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) {
		size_t mark = rt_pin_mark();
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
		RtBlock bl;
		rt_block_of(t, key, &bl);
		/* a chunk in another order than the tensor's is made in the
		 * tensor's and transposed, as read.c reads one */
		char *data = bl.identity ? rt_chunk_mut(c) : rt_alloc(c->nbytes);
		for (int64_t i = 0; i < bl.nrun; i++)
			rt_init_values(kind, a, b, stream, (uint64_t)rt_block_run(t, &bl, i), bl.run,
			               t->dtype, data + (size_t)(i * bl.run) * es);
		if (!bl.identity) {
			rt_block_to_chunk(t, &bl, rt_chunk_mut(c), data);
			free(data);
		}
		rt_rel_push(r, key, c);
		rt_pin_release(mark);   /* one chunk at a time under a budget */
	}
	if (t0)
		rt_trace_span(RT_SPAN_INIT, t0, -1, rt_trace_bytes(r), tensor, NULL);
	return r;
}

/* The positions 0 .. extent-1 of one key dim; with no key dim, the one
 * empty key holding 0 (a value present on every iteration: autodiff's
 * seed). */
TrtRel *trt_range(const TrtType *t, TrtPlace p)
{
	if (t->nkey > 1 || t->nchunk != t->nkey || t->dtype != TRT_I64 || p.kind == TRT_ANY)
		rt_bug("a range of %d key dims, %d chunk dims, %s", t->nkey, t->nchunk, rt_dtype_name(t->dtype));
	TrtRel *r = trt_rel_new(t, p);
	if (t->nkey == 0) {
		int64_t none = 0;
		if (p.kind != TRT_PART || trt_site(&p, t, &none) == rt.rank) {
			Chunk *c = rt_chunk_new(sizeof(int64_t));
			*(int64_t *)rt_chunk_mut(c) = 0;
			rt_rel_push(r, &none, c);
		}
		return r;
	}
	for (int64_t k = 0; k < rt_frontier(t, 0); k++) {
		if (p.kind == TRT_PART && trt_site(&p, t, &k) != rt.rank)
			continue;
		size_t mark = rt_pin_mark();
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, &k));
		int64_t *v = rt_chunk_mut(c), n = (int64_t)(c->nbytes / sizeof *v), first = k * t->block[0];
		for (int64_t i = 0; i < n; i++)
			v[i] = first + i;
		rt_rel_push(r, &k, c);
		rt_pin_release(mark);
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
