/*
 * vmath.c: the transcendental functions of kernels -- exp, log, tanh and
 * pow, in f32 (trt_expf, ...) and f64 (trt_exp, ...) -- on vector units.
 *
 * They are SLEEF's (libsleef), whose u10 functions are within 1.0 ulp of
 * the exact value (glibc's expf is within 0.5; its vector libmvec, which
 * gcc uses only under -ffast-math, within 4: bench/README.md has the
 * measurement that chose SLEEF), but for exp in f32 on a CPU with FMA:
 * that is trac's own trt_expf_fma (trac_rt.h, within 0.875 ulp), which a
 * kernel inlines, since SLEEF's called once a vector bounds a map at about
 * 1e9 elements a second.  trac_rt.h declares each one
 * __attribute__((simd)), so that gcc vectorises a kernel's loop by calling
 * the vector variants defined here under the x86-64 vector ABI's names:
 * _ZGVbN4v_trt_expf (SSE, 4 floats), _ZGVcN8v_ (AVX), _ZGVdN8v_ (AVX2),
 * _ZGVeN16v_ (AVX-512); a loop's vectorised epilogue calls a narrower one
 * and its last elements the scalar.
 *
 * The invariant: every variant and the scalar compute the same function,
 * bit for bit, so an element's value does not depend on where in a loop,
 * a chunk or a blocking it falls, and so not on the rank count.  SLEEF
 * makes that possible: its finz_ functions give the same results at every
 * vector width on a CPU with FMA (avx512f, avx2, avx2128 and the scalar
 * purecfma), its cinz_ ones on any CPU without using FMA.  Every function
 * here takes the finz_ family when the CPU has AVX2 and FMA (vm_fma, asked
 * once at load), the cinz_ family otherwise (the AVX variant then runs
 * SLEEF's AVX code, the SSE one its SSE2 code; the AVX-512 one is only
 * ever called on a CPU with FMA).  So results are the same on every
 * machine with AVX2 and FMA, and on every machine without; the two differ
 * in last bits.
 * exp in f32 keeps the invariant by computing trt_expf_fma in every
 * variant too where the CPU has FMA, and SLEEF's cinz_ expf where not.
 * tests/unit/test_vmath.c checks the variants against each other, a
 * kernel's inlined exp against them, and the accuracy against glibc and
 * long double.
 *
 * Elsewhere than x86-64 with gcc the functions are plain scalar calls of
 * SLEEF's dispatching scalar functions.
 */
#include <math.h>
#include <string.h>

#include <sleef.h>

#define TRT_VMATH_DEFINES       /* trac_rt.h: no simd clones of our own */
#include "rt.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>

static int vm_fma;

__attribute__((constructor)) static void vm_init(void)
{
	__builtin_cpu_init();
	vm_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int rt_vmath_fma(void)
{
	return vm_fma;
}

/* SLEEF's functions used here, declared again: sleef.h declares those of
 * an ISA only when the file is compiled for it (__AVX2__ and so on) */
#define SL_DECL(SF, T, W4, W8, W16, V4, V8, V16, ARGS)                                       \
	T Sleef_finz_##SF##1_u10purecfma ARGS(T);                                            \
	T Sleef_cinz_##SF##1_u10purec ARGS(T);                                               \
	V4 Sleef_finz_##SF##W4##_u10avx2128 ARGS(V4);                                        \
	V4 Sleef_cinz_##SF##W4##_u10sse2 ARGS(V4);                                           \
	__attribute__((target("avx"))) V8 Sleef_finz_##SF##W8##_u10avx2 ARGS(V8);            \
	__attribute__((target("avx"))) V8 Sleef_cinz_##SF##W8##_u10avx ARGS(V8);             \
	__attribute__((target("avx512f"))) V16 Sleef_finz_##SF##W16##_u10avx512f ARGS(V16);
#define ONE(V) (V)
#define TWO(V) (V, V)
#define SL_F32(SF, ARGS) SL_DECL(SF, float, 4, 8, 16, __m128, __m256, __m512, ARGS)
#define SL_F64(SF, ARGS) SL_DECL(SF, double, 2, 4, 8, __m128d, __m256d, __m512d, ARGS)
SL_F32(expf, ONE) SL_F32(logf, ONE) SL_F32(tanhf, ONE) SL_F32(powf, TWO)
SL_F64(expd, ONE) SL_F64(logd, ONE) SL_F64(tanhd, ONE) SL_F64(powd, TWO)

/*
 * One function F of one argument: the scalar trt_F and its four vector
 * variants.  SF is SLEEF's name for it (expf, expd), W4 W8 W16 its widths
 * in SSE, AVX and AVX-512 registers (4, 8, 16 floats; 2, 4, 8 doubles),
 * V4 V8 V16 the register types.
 */
#define VM_UNARY(F, T, SF, W4, W8, W16, V4, V8, V16)                                         \
	T trt_##F(T x)                                                                       \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##1_u10purecfma(x) : Sleef_cinz_##SF##1_u10purec(x); \
	}                                                                                    \
	V4 _ZGVbN##W4##v_trt_##F(V4 x)                                                       \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W4##_u10avx2128(x) : Sleef_cinz_##SF##W4##_u10sse2(x); \
	}                                                                                    \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##v_trt_##F(V8 x)                        \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W8##_u10avx2(x) : Sleef_cinz_##SF##W8##_u10avx(x); \
	}                                                                                    \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##v_trt_##F(V8 x)                       \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W8##_u10avx2(x) : Sleef_cinz_##SF##W8##_u10avx(x); \
	}                                                                                    \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##v_trt_##F(V16 x)                 \
	{                                                                                    \
		return Sleef_finz_##SF##W16##_u10avx512f(x);                                 \
	}

#define VM_BINARY(F, T, SF, W4, W8, W16, V4, V8, V16)                                        \
	T trt_##F(T x, T y)                                                                  \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##1_u10purecfma(x, y) : Sleef_cinz_##SF##1_u10purec(x, y); \
	}                                                                                    \
	V4 _ZGVbN##W4##vv_trt_##F(V4 x, V4 y)                                                \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W4##_u10avx2128(x, y) : Sleef_cinz_##SF##W4##_u10sse2(x, y); \
	}                                                                                    \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##vv_trt_##F(V8 x, V8 y)                 \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W8##_u10avx2(x, y) : Sleef_cinz_##SF##W8##_u10avx(x, y); \
	}                                                                                    \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##vv_trt_##F(V8 x, V8 y)                \
	{                                                                                    \
		return vm_fma ? Sleef_finz_##SF##W8##_u10avx2(x, y) : Sleef_cinz_##SF##W8##_u10avx(x, y); \
	}                                                                                    \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##vv_trt_##F(V16 x, V16 y)         \
	{                                                                                    \
		return Sleef_finz_##SF##W16##_u10avx512f(x, y);                              \
	}

/* the vector ABI's names are not declared anywhere: these are for the
 * compiler to call, and -Wmissing-prototypes wants them declared */
#define VM_DECL1(F, W4, W8, W16, V4, V8, V16)                                                \
	V4 _ZGVbN##W4##v_trt_##F(V4);                                                        \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##v_trt_##F(V8);                         \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##v_trt_##F(V8);                        \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##v_trt_##F(V16);
#define VM_DECL2(F, W4, W8, W16, V4, V8, V16)                                                \
	V4 _ZGVbN##W4##vv_trt_##F(V4, V4);                                                   \
	__attribute__((target("avx"))) V8 _ZGVcN##W8##vv_trt_##F(V8, V8);                    \
	__attribute__((target("avx2"))) V8 _ZGVdN##W8##vv_trt_##F(V8, V8);                   \
	__attribute__((target("avx512f"))) V16 _ZGVeN##W16##vv_trt_##F(V16, V16);

#define VM_F32(X) X(logf, logf) X(tanhf, tanhf)
#define VM_F64(X) X(exp, expd) X(log, logd) X(tanh, tanhd)

#define DECL_F32(F, SF) VM_DECL1(F, 4, 8, 16, __m128, __m256, __m512)
#define DECL_F64(F, SF) VM_DECL1(F, 2, 4, 8, __m128d, __m256d, __m512d)
DECL_F32(expf, expf)
VM_F32(DECL_F32)
VM_F64(DECL_F64)
VM_DECL2(powf, 4, 8, 16, __m128, __m256, __m512)
VM_DECL2(pow, 2, 4, 8, __m128d, __m256d, __m512d)

/*
 * exp in f32 with FMA is trac's own trt_expf_fma (trac_rt.h), which a
 * kernel compiled for the CPU inlines; the scalar and every variant here
 * compute it too, lane by lane, so that a kernel compiled without FMA, or
 * code calling the library, gets the same bits.  Without FMA it is SLEEF's
 * cinz_ expf like the others.
 */
__attribute__((target("avx2,fma"))) static void vm_expf_lanes(const float *x, float *y, int n)
{
	for (int i = 0; i < n; i++)
		y[i] = trt_expf_fma(x[i]);
}

float trt_expf(float x)
{
	if (!vm_fma)
		return Sleef_cinz_expf1_u10purec(x);
	float y;
	vm_expf_lanes(&x, &y, 1);
	return y;
}

__m128 _ZGVbN4v_trt_expf(__m128 x)
{
	if (!vm_fma)
		return Sleef_cinz_expf4_u10sse2(x);
	float a[4], b[4];
	_mm_storeu_ps(a, x);
	vm_expf_lanes(a, b, 4);
	return _mm_loadu_ps(b);
}

#define VM_EXPF_WIDE(NAME, TARGET, V, W, STORE, LOAD, NOFMA)                                 \
	__attribute__((target(TARGET))) V NAME(V x)                                          \
	{                                                                                    \
		if (!vm_fma)                                                                 \
			return NOFMA;                                                        \
		float a[W], b[W];                                                            \
		STORE(a, x);                                                                 \
		vm_expf_lanes(a, b, W);                                                      \
		return LOAD(b);                                                              \
	}
VM_EXPF_WIDE(_ZGVcN8v_trt_expf, "avx", __m256, 8, _mm256_storeu_ps, _mm256_loadu_ps,
             Sleef_cinz_expf8_u10avx(x))
VM_EXPF_WIDE(_ZGVdN8v_trt_expf, "avx2", __m256, 8, _mm256_storeu_ps, _mm256_loadu_ps,
             Sleef_cinz_expf8_u10avx(x))

/* only ever called on a CPU with AVX-512, which has FMA */
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_trt_expf(__m512 x)
{
	float a[16], b[16];
	_mm512_storeu_ps(a, x);
	vm_expf_lanes(a, b, 16);
	return _mm512_loadu_ps(b);
}

#define DEF_F32(F, SF) VM_UNARY(F, float, SF, 4, 8, 16, __m128, __m256, __m512)
#define DEF_F64(F, SF) VM_UNARY(F, double, SF, 2, 4, 8, __m128d, __m256d, __m512d)
VM_F32(DEF_F32)
VM_F64(DEF_F64)
VM_BINARY(powf, float, powf, 4, 8, 16, __m128, __m256, __m512)
VM_BINARY(pow, double, powd, 2, 4, 8, __m128d, __m256d, __m512d)

#else

int rt_vmath_fma(void)
{
	return 0;
}

float trt_expf(float x) { return Sleef_expf_u10(x); }
float trt_logf(float x) { return Sleef_logf_u10(x); }
float trt_tanhf(float x) { return Sleef_tanhf_u10(x); }
float trt_powf(float x, float y) { return Sleef_powf_u10(x, y); }
double trt_exp(double x) { return Sleef_exp_u10(x); }
double trt_log(double x) { return Sleef_log_u10(x); }
double trt_tanh(double x) { return Sleef_tanh_u10(x); }
double trt_pow(double x, double y) { return Sleef_pow_u10(x, y); }

#endif
