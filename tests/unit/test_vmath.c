/*
 * test_vmath.c: the kernels' exp, log, tanh and pow (runtime/vmath.c).
 *
 * For f32 and f64, over arguments spread through every binade and the edge
 * cases (zeros, infinities, NaN, denormals, the overflow and underflow
 * thresholds):
 *   - every vector variant the CPU can run (_ZGVb/c/d/e..._trt_F) gives
 *     the scalar trt_F's value bit for bit, in every lane, so a kernel's
 *     element does not depend on where a loop, a chunk or a blocking puts
 *     it;
 *   - the value is within SLEEF's stated 1.0 ulp of the exact one (long
 *     double, whose 64 bits are exact enough for both; 2^-10 ulp allowed
 *     over it: tanh of a tiny x is 1.0000001 ulp off where the exact
 *     value sits a hair from a midpoint), and so within 1.0 ulp plus
 *     glibc's own error of glibc's function (expf, ...);
 *   - special values are glibc's: the same infinity, zero or NaN.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <immintrin.h>

#include "trac_rt.h"

int rt_vmath_fma(void);

/* the variants, as gcc calls them (x86-64 vector function ABI) */
#define DECL1(F, W4, W8, W16, V4, V8, V16)                                              \
	V4 _ZGVbN##W4##v_trt_##F(V4);                                                   \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##v_trt_##F(V8);                    \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##v_trt_##F(V8);                   \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##v_trt_##F(V16);
#define DECL2(F, W4, W8, W16, V4, V8, V16)                                              \
	V4 _ZGVbN##W4##vv_trt_##F(V4, V4);                                              \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##vv_trt_##F(V8, V8);               \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##vv_trt_##F(V8, V8);              \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##vv_trt_##F(V16, V16);
DECL1(expf, 4, 8, 16, __m128, __m256, __m512)
DECL1(logf, 4, 8, 16, __m128, __m256, __m512)
DECL1(tanhf, 4, 8, 16, __m128, __m256, __m512)
DECL2(powf, 4, 8, 16, __m128, __m256, __m512)
DECL1(exp, 2, 4, 8, __m128d, __m256d, __m512d)
DECL1(log, 2, 4, 8, __m128d, __m256d, __m512d)
DECL1(tanh, 2, 4, 8, __m128d, __m256d, __m512d)
DECL2(pow, 2, 4, 8, __m128d, __m256d, __m512d)

static int failures;

static void report(const char *fmt, ...)
{
	va_list ap;
	if (failures++ >= 20)
		return;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

/* Each variant on n arguments x (and y), through a buffer of its width:
 * lane j of call i is element i * width + j.  A variant the CPU lacks
 * leaves out[] as the scalar made it. */
enum { V_B, V_C, V_D, V_E, NVAR };
static const char *vname[NVAR] = {"SSE (b)", "AVX (c)", "AVX2 (d)", "AVX-512 (e)"};

static int have(int v)
{
	__builtin_cpu_init();
	switch (v) {
	case V_B: return 1;
	case V_C: return __builtin_cpu_supports("avx");
	case V_D: return __builtin_cpu_supports("avx2");
	case V_E: return __builtin_cpu_supports("avx512f");
	}
	return 0;
}

#define VARIANTS_F32(F, ARGS, CALL)                                                                      \
	static void vcall_##F(int v, const float *x, const float *y, float *o)                            \
	{                                                                                                 \
		(void)y;                                                                                  \
		switch (v) {                                                                              \
		case V_B: _mm_storeu_ps(o, _ZGVbN4##ARGS##_trt_##F CALL(_mm_loadu_ps)); return;          \
		case V_C: vc_##F(x, y, o); return;                                                        \
		case V_D: vd_##F(x, y, o); return;                                                        \
		case V_E: ve_##F(x, y, o); return;                                                        \
		}                                                                                         \
	}
#define X1(LOAD) (LOAD(x))
#define X2(LOAD) (LOAD(x), LOAD(y))

#define WIDE_F32(F, ARGS, CALL)                                                                          \
	__attribute__((target("avx"))) static void vc_##F(const float *x, const float *y, float *o)      \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm256_storeu_ps(o, _ZGVcN8##ARGS##_trt_##F CALL(_mm256_loadu_ps));                      \
	}                                                                                                 \
	__attribute__((target("avx2"))) static void vd_##F(const float *x, const float *y, float *o)     \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm256_storeu_ps(o, _ZGVdN8##ARGS##_trt_##F CALL(_mm256_loadu_ps));                      \
	}                                                                                                 \
	__attribute__((target("avx512f"))) static void ve_##F(const float *x, const float *y, float *o)  \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm512_storeu_ps(o, _ZGVeN16##ARGS##_trt_##F CALL(_mm512_loadu_ps));                     \
	}
#define WIDE_F64(F, ARGS, CALL)                                                                          \
	__attribute__((target("avx"))) static void vc_##F(const double *x, const double *y, double *o)   \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm256_storeu_pd(o, _ZGVcN4##ARGS##_trt_##F CALL(_mm256_loadu_pd));                      \
	}                                                                                                 \
	__attribute__((target("avx2"))) static void vd_##F(const double *x, const double *y, double *o)  \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm256_storeu_pd(o, _ZGVdN4##ARGS##_trt_##F CALL(_mm256_loadu_pd));                      \
	}                                                                                                 \
	__attribute__((target("avx512f"))) static void ve_##F(const double *x, const double *y, double *o) \
	{                                                                                                 \
		(void)y;                                                                                  \
		_mm512_storeu_pd(o, _ZGVeN8##ARGS##_trt_##F CALL(_mm512_loadu_pd));                      \
	}                                                                                                 \
	static void vcall_##F(int v, const double *x, const double *y, double *o)                         \
	{                                                                                                 \
		(void)y;                                                                                  \
		switch (v) {                                                                              \
		case V_B: _mm_storeu_pd(o, _ZGVbN2##ARGS##_trt_##F CALL(_mm_loadu_pd)); return;          \
		case V_C: vc_##F(x, y, o); return;                                                        \
		case V_D: vd_##F(x, y, o); return;                                                        \
		case V_E: ve_##F(x, y, o); return;                                                        \
		}                                                                                         \
	}

WIDE_F32(expf, v, X1) VARIANTS_F32(expf, v, X1)
WIDE_F32(logf, v, X1) VARIANTS_F32(logf, v, X1)
WIDE_F32(tanhf, v, X1) VARIANTS_F32(tanhf, v, X1)
WIDE_F32(powf, vv, X2) VARIANTS_F32(powf, vv, X2)
WIDE_F64(exp, v, X1)
WIDE_F64(log, v, X1)
WIDE_F64(tanh, v, X1)
WIDE_F64(pow, vv, X2)

/* all variants of one function on 16 lanes (f64: 8, twice) */
typedef void (*Vcall32)(int, const float *, const float *, float *);
typedef void (*Vcall64)(int, const double *, const double *, double *);

static void lanes32(Vcall32 f, int v, const float *x, const float *y, float *o)
{
	int w = v == V_B ? 4 : v == V_E ? 16 : 8;
	for (int i = 0; i < 16; i += w)
		f(v, x + i, y + i, o + i);
}

static void lanes64(Vcall64 f, int v, const double *x, const double *y, double *o)
{
	int w = v == V_B ? 2 : v == V_E ? 8 : 4;
	for (int i = 0; i < 16; i += w)
		f(v, x + i, y + i, o + i);
}

/* |got - exact| in ulps of the exact value's binade, for a type of p
 * mantissa bits and least normal exponent emin */
static double ulps(long double got, long double exact, int p, int emin)
{
	if (isnan(exact))
		return isnan(got) ? 0 : INFINITY;
	if (isinf(exact) || isinf(got))
		return got == exact ? 0 : INFINITY;
	int e;
	frexpl(exact, &e);
	if (e - 1 < emin)
		e = emin + 1;
	return (double)(fabsl(got - exact) / ldexpl(1.0L, e - p));
}

static int same_bits32(float a, float b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static int same_bits64(double a, double b)
{
	return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

/* the exact value's function, with glibc's for special results */
typedef struct Case32 {
	const char *name;
	Vcall32 vcall;
	float (*f1)(float);
	float (*f2)(float, float);
	float (*g1)(float);
	float (*g2)(float, float);
	long double (*e1)(long double);
	long double (*e2)(long double, long double);
	double glibc_ulps;
} Case32;

typedef struct Case64 {
	const char *name;
	Vcall64 vcall;
	double (*f1)(double);
	double (*f2)(double, double);
	double (*g1)(double);
	double (*g2)(double, double);
	long double (*e1)(long double);
	long double (*e2)(long double, long double);
	double glibc_ulps;
} Case64;

/* Arguments: every binade of the type (a stride through its bit patterns),
 * then the edge cases, then random pairs for pow. */
static float arg32(uint64_t i, int which)
{
	static const float edge[] = {
		0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 0x1p-149f, -0x1p-149f, 0x1p-126f,
		0x1.fffffcp-127f, 88.72283f, 88.72284f, 89.0f, -87.33654f, -103.97208f, -103.97209f,
		-104.0f, 1e-8f, -1e-8f, 9.0f, -9.0f, 10.0f, 20.0f, 0.5f, 2.0f, 3.0f, -8.0f, 1e30f, -1e30f,
		0x1p-20f, 1.0000001f, 0.99999994f, 3.4028235e38f, -3.4028235e38f,
	};
	enum { NEDGE = sizeof edge / sizeof edge[0] };
	if (i < NEDGE * NEDGE)
		return which ? edge[i % NEDGE] : edge[i / NEDGE];
	uint32_t u = (uint32_t)(i * 2654435761u) ^ (uint32_t)(which ? 0x5bd1e995u * i : 0);
	float x;
	memcpy(&x, &u, sizeof x);
	return x;
}

static double arg64(uint64_t i, int which)
{
	static const double edge[] = {
		0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0x1p-1074, -0x1p-1074, 0x1p-1022,
		709.782712893384, 709.7827128933841, 710.0, -708.3964185322641, -745.1332191019411,
		-745.1332191019412, -746.0, 1e-17, -1e-17, 19.0, -19.0, 20.0, 40.0, 0.5, 2.0, 3.0,
		-8.0, 1e300, -1e300, 0x1p-40, 1.0000000000000002, 0.9999999999999999, 1.7976931348623157e308,
	};
	enum { NEDGE = sizeof edge / sizeof edge[0] };
	if (i < NEDGE * NEDGE)
		return which ? edge[i % NEDGE] : edge[i / NEDGE];
	uint64_t u = i * 0x9e3779b97f4a7c15ull ^ (which ? i * 0xbf58476d1ce4e5b9ull : 0);
	double x;
	memcpy(&x, &u, sizeof x);
	return x;
}

enum { NARG = 1 << 20 };

static void check32(const Case32 *c)
{
	double worst = 0, worst_glibc = 0;
	float wx = 0;
	for (uint64_t i = 0; i < NARG; i += 16) {
		float x[16], y[16], s[16], v[16];
		for (int j = 0; j < 16; j++) {
			x[j] = arg32(i + j, 0);
			y[j] = arg32(i + j, 1);
			/* pow of a random pair mostly overflows: keep y small */
			if (c->f2 && i >= 4096 && isfinite(y[j]))
				y[j] = fmodf(y[j], 8.0f);
			s[j] = c->f1 ? c->f1(x[j]) : c->f2(x[j], y[j]);
		}
		for (int var = 0; var < NVAR; var++) {
			if (!have(var))
				continue;
			lanes32(c->vcall, var, x, y, v);
			for (int j = 0; j < 16; j++)
				if (!same_bits32(v[j], s[j]))
					report("%s %s(%a, %a) = %a, scalar %a\n", vname[var], c->name, x[j], y[j], v[j], s[j]);
		}
		for (int j = 0; j < 16; j++) {
			long double e = c->e1 ? c->e1(x[j]) : c->e2(x[j], y[j]);
			float g = c->g1 ? c->g1(x[j]) : c->g2(x[j], y[j]);
			/* specials as glibc's, the rest within 1 ulp of exact */
			if (!isfinite(g) || g == 0 || !isfinite(s[j]) || s[j] == 0) {
				if (!same_bits32(g, s[j]) && !(g == 0 && s[j] == 0 && signbit(g) == signbit(s[j]))) {
					/* a result within an ulp of the underflow or
					 * overflow edge may round either way */
					if (ulps((long double)s[j], e, 24, -126) > 1.0)
						report("%s(%a, %a) = %a, glibc %a\n", c->name, x[j], y[j], s[j], g);
				}
				continue;
			}
			double u = ulps(s[j], e, 24, -126), ug = ulps(s[j], g, 24, -126);
			if (u > worst)
				worst = u, wx = x[j];
			if (ug > worst_glibc)
				worst_glibc = ug;
			if (u > 1.0 + 0x1p-10)
				report("%s(%a, %a) = %a: %.3f ulp from exact %La\n", c->name, x[j], y[j], s[j], u, e);
			if (ug > 1.0 + c->glibc_ulps)
				report("%s(%a, %a) = %a: %.3f ulp from glibc's %a\n", c->name, x[j], y[j], s[j], ug, g);
		}
	}
	printf("%-6s f32: worst %.3f ulp from exact (at %a), %.0f from glibc\n", c->name, worst, wx, worst_glibc);
}

static void check64(const Case64 *c)
{
	double worst = 0, worst_glibc = 0;
	double wx = 0;
	for (uint64_t i = 0; i < NARG; i += 16) {
		double x[16], y[16], s[16], v[16];
		for (int j = 0; j < 16; j++) {
			x[j] = arg64(i + j, 0);
			y[j] = arg64(i + j, 1);
			if (c->f2 && i >= 4096 && isfinite(y[j]))
				y[j] = fmod(y[j], 8.0);
			s[j] = c->f1 ? c->f1(x[j]) : c->f2(x[j], y[j]);
		}
		for (int var = 0; var < NVAR; var++) {
			if (!have(var))
				continue;
			lanes64(c->vcall, var, x, y, v);
			for (int j = 0; j < 16; j++)
				if (!same_bits64(v[j], s[j]))
					report("%s %s(%a, %a) = %a, scalar %a\n", vname[var], c->name, x[j], y[j], v[j], s[j]);
		}
		for (int j = 0; j < 16; j++) {
			long double e = c->e1 ? c->e1(x[j]) : c->e2(x[j], y[j]);
			double g = c->g1 ? c->g1(x[j]) : c->g2(x[j], y[j]);
			if (!isfinite(g) || g == 0 || !isfinite(s[j]) || s[j] == 0) {
				/* SLEEF's f64 exp and pow overflow a little
				 * early: exp from 709.78271114955743, where the
				 * exact value is 1.7e-6 under DBL_MAX, and
				 * pow(DBL_MAX, 1); man/tra.5 says so */
				int sleef_edge = isinf(s[j]) && fabsl(e) >= 0x1.fffffffffffffp+1023L * (1 - 2e-6L) &&
				                 fabsl(e) <= 0x1.fffffffffffffp+1023L;
				if (!same_bits64(g, s[j]) && !(g == 0 && s[j] == 0 && signbit(g) == signbit(s[j])) &&
				    !sleef_edge) {
					if (ulps((long double)s[j], e, 53, -1022) > 1.0)
						report("%s(%a, %a) = %a, glibc %a\n", c->name, x[j], y[j], s[j], g);
				}
				continue;
			}
			double u = ulps(s[j], e, 53, -1022), ug = ulps(s[j], g, 53, -1022);
			if (u > worst)
				worst = u, wx = x[j];
			if (ug > worst_glibc)
				worst_glibc = ug;
			/* long double's 11 extra bits: exact to 2^-11 ulp */
			if (u > 1.0 + 0x1p-10)
				report("%s(%a, %a) = %a: %.3f ulp from exact %La\n", c->name, x[j], y[j], s[j], u, e);
			if (ug > 1.0 + c->glibc_ulps)
				report("%s(%a, %a) = %a: %.3f ulp from glibc's %a\n", c->name, x[j], y[j], s[j], ug, g);
		}
	}
	printf("%-6s f64: worst %.3f ulp from exact (at %a), %.0f from glibc\n", c->name, worst, wx, worst_glibc);
}

/* glibc's stated maximal errors on x86-64 (the glibc manual, "Known
 * Maximum Errors in Math Functions"): exp 1, log 1 (logf 1), tanh 2,
 * pow 1 */
static const Case32 cases32[] = {
	{"exp", vcall_expf, trt_expf, NULL, expf, NULL, expl, NULL, 1},
	{"log", vcall_logf, trt_logf, NULL, logf, NULL, logl, NULL, 1},
	{"tanh", vcall_tanhf, trt_tanhf, NULL, tanhf, NULL, tanhl, NULL, 2},
	{"pow", vcall_powf, NULL, trt_powf, NULL, powf, NULL, powl, 1},
};
static const Case64 cases64[] = {
	{"exp", vcall_exp, trt_exp, NULL, exp, NULL, expl, NULL, 1},
	{"log", vcall_log, trt_log, NULL, log, NULL, logl, NULL, 1},
	{"tanh", vcall_tanh, trt_tanh, NULL, tanh, NULL, tanhl, NULL, 2},
	{"pow", vcall_pow, NULL, trt_pow, NULL, pow, NULL, powl, 1},
};

static void test_f32(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases32 / sizeof cases32[0]; i++)
		check32(&cases32[i]);
	assert_int_equal(failures, 0);
}

/*
 * exp in f32 as a kernel computes it: a loop inlining trac_rt.h's
 * trt_expf_fma, which gcc vectorises for the CPU (here AVX2 and FMA, in
 * blocks of a constant 1024 so that -O2 vectorises it too), gives the
 * library's trt_expf bit for bit, and both are within 0.875 ulp of the
 * exact value (double's exp: exact to 2^-29 of a float's ulp) over every
 * 127th float from -104 to 89, the arguments whose result is neither 0 nor
 * infinity; beyond them and at the specials, the same bits and glibc's
 * infinities, zeros and NaNs.  `bench/vmath --all` measures every float.
 */
enum { KBLOCK = 1024 };

__attribute__((target("avx2,fma"))) static void kernel_expf(const float *restrict x, float *restrict y)
{
	for (int i = 0; i < KBLOCK; i++)
		y[i] = trt_expf_fma(x[i]);
}

static void test_expf_kernel(void **state)
{
	(void)state;
	if (!rt_vmath_fma()) {
		printf("no FMA: kernels call the library's exp (SLEEF's cinz_)\n");
		return;
	}
	static float x[KBLOCK], k[KBLOCK];
	const uint32_t lo = 0xc2d00000u, hi = 0x42b20000u;      /* -104, 89 */
	double worst = 0;
	float wx = 0;
	uint64_t u = 0, n = 0;
	while (u < (uint64_t)hi + (lo - 0x80000000u)) {
		for (int i = 0; i < KBLOCK; i++, u += 127) {
			/* u counts up through [0, 89] then down through [-0, -104] */
			uint32_t b = u <= hi ? (uint32_t)u : 0x80000000u + (uint32_t)(u - hi);
			memcpy(&x[i], &b, sizeof b);
		}
		kernel_expf(x, k);
		for (int i = 0; i < KBLOCK; i++, n++) {
			float s = trt_expf(x[i]);
			if (!same_bits32(k[i], s))
				report("kernel expf(%a) = %a, trt_expf %a\n", x[i], k[i], s);
			double e = exp((double)x[i]);
			if (isinf((float)e) || (float)e == 0) {
				/* over the largest float, or under half the least */
				if (!same_bits32(s, (float)e))
					report("kernel expf(%a) = %a, exact %a\n", x[i], s, e);
				continue;
			}
			double d = ulps(s, e, 24, -126);
			if (d > worst)
				worst = d, wx = x[i];
		}
	}
	/* and the edges, vectorised: over 89, under -104, the specials */
	static const float edge[] = {-INFINITY, -3.4028235e38f, -1e30f, -2000.0f, -150.0f, -104.5f, -104.0f,
	                             -103.97208f, -95.0f, -87.33654f, 88.72283f, 88.72284f, 89.0f, 89.5f,
	                             1e30f, 3.4028235e38f, INFINITY, NAN, -NAN, 0.0f, -0.0f, 0x1p-149f};
	for (int i = 0; i < KBLOCK; i++)
		x[i] = edge[i % (sizeof edge / sizeof edge[0])];
	kernel_expf(x, k);
	for (int i = 0; i < KBLOCK; i++) {
		float s = trt_expf(x[i]), g = expf(x[i]);
		if (!same_bits32(k[i], s))
			report("kernel expf(%a) = %a, trt_expf %a\n", x[i], k[i], s);
		if ((isnan(g) || isinf(g) || g == 0) && !same_bits32(s, g))
			report("kernel expf(%a) = %a, glibc %a\n", x[i], s, g);
	}
	printf("kernel exp f32: %llu arguments, worst %.3f ulp from exact (at %a)\n", (unsigned long long)n, worst,
	       wx);
	if (worst > 0.875)
		report("kernel exp f32: %.3f ulp from exact at %a\n", worst, wx);
	assert_int_equal(failures, 0);
}

static void test_f64(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof cases64 / sizeof cases64[0]; i++)
		check64(&cases64[i]);
	assert_int_equal(failures, 0);
}

int main(void)
{
	printf("SLEEF family: %s\n", rt_vmath_fma() ? "finz (AVX2 and FMA)" : "cinz (no FMA)");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_f32),
		cmocka_unit_test(test_f64),
		cmocka_unit_test(test_expf_kernel),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
