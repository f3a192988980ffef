/*
 * vmath.c: expf over 16M floats, one core, by each candidate for the
 * kernels' vectorised maps (issue 33): glibc's scalar expf (what gcc calls
 * without -ffast-math), glibc's libmvec (_ZGVdN8v_expf, AVX2, or
 * _ZGVeN16v_expf, AVX-512), SLEEF's finz_ expf (1.0 ulp), and trac's
 * trt_expf in a loop gcc vectorises (runtime/vmath.c, on SLEEF).  Prints
 * each one's best CPU time of 7, its rate, and how far its results are
 * from glibc's expf (ulps, and the share of elements that differ).
 * bench.py's "vmath" section runs it beside numpy's np.exp.
 *
 * With --all it measures instead trac's exp on a CPU with FMA (trac_rt.h's
 * trt_expf_fma, which kernels inline) over every one of the 2^32 floats,
 * in a loop gcc vectorises as a kernel's: its largest error from the exact
 * value (double's exp, exact to 2^-29 of a float's ulp), its largest
 * difference from glibc's expf in ulps and the share that differ, and its
 * special values (infinities, zeros, NaN) against glibc's.  About two
 * minutes.
 *
 *   bench/vmath [N]
 *   bench/vmath --all
 */
#define _POSIX_C_SOURCE 200809L
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trac_rt.h"

/* glibc's libmvec and SLEEF, declared here with the ISA they need */
__attribute__((target("avx2"))) __m256 _ZGVdN8v_expf(__m256);
__attribute__((target("avx512f"))) __m512 _ZGVeN16v_expf(__m512);
__attribute__((target("avx2"))) __m256 Sleef_finz_expf8_u10avx2(__m256);
__attribute__((target("avx512f"))) __m512 Sleef_finz_expf16_u10avx512f(__m512);

static long n = 16L << 20;
static float *x, *y, *ref;

static double cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void glibc_scalar(void)
{
	for (long i = 0; i < n; i++)
		y[i] = expf(x[i]);
}

__attribute__((target("avx2"))) static void mvec8(void)
{
	for (long i = 0; i < n; i += 8)
		_mm256_storeu_ps(y + i, _ZGVdN8v_expf(_mm256_loadu_ps(x + i)));
}

__attribute__((target("avx512f"))) static void mvec16(void)
{
	for (long i = 0; i < n; i += 16)
		_mm512_storeu_ps(y + i, _ZGVeN16v_expf(_mm512_loadu_ps(x + i)));
}

__attribute__((target("avx2,fma"))) static void sleef8(void)
{
	for (long i = 0; i < n; i += 8)
		_mm256_storeu_ps(y + i, Sleef_finz_expf8_u10avx2(_mm256_loadu_ps(x + i)));
}

__attribute__((target("avx512f"))) static void sleef16(void)
{
	for (long i = 0; i < n; i += 16)
		_mm512_storeu_ps(y + i, Sleef_finz_expf16_u10avx512f(_mm512_loadu_ps(x + i)));
}

/* as a kernel's loop: gcc vectorises it through trt_expf's simd variants */
static void trac(void)
{
	float *restrict o = y;
	const float *restrict in = x;
	for (long i = 0; i < n; i++)
		o[i] = trt_expf(in[i]);
}

static void copy(void)
{
	memcpy(y, x, sizeof *x * (size_t)n);
}

static int64_t ord(float f)
{
	int32_t i;
	memcpy(&i, &f, sizeof i);
	return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static void run(const char *name, void (*f)(void))
{
	double best = 1e30;
	for (int r = 0; r < 7; r++) {
		double t = cpu();
		f();
		t = cpu() - t;
		best = t < best ? t : best;
	}
	int64_t worst = 0, differ = 0;
	if (ref)
		for (long i = 0; i < n; i++) {
			int64_t d = ord(y[i]) - ord(ref[i]);
			d = d < 0 ? -d : d;
			worst = d > worst ? d : worst;
			differ += d != 0;
		}
	printf("%-34s %8.4f s  %6.3f G/s   %lld ulp  %6.2f%%\n", name, best, (double)n / best / 1e9,
	       (long long)worst, 100.0 * (double)differ / (double)n);
}

/* --all: every float, in blocks of 2^16 */
__attribute__((target("avx2,fma"))) static void kernel_block(const float *restrict in, float *restrict o)
{
	for (int i = 0; i < 1 << 16; i++)
		o[i] = trt_expf_fma(in[i]);
}

static int all_floats(void)
{
	static float in[1 << 16], o[1 << 16];
	double worst = 0;
	float wx = 0;
	int64_t glibc_worst = 0, differ = 0, finite = 0, special = 0;
	for (uint64_t base = 0; base < 1ull << 32; base += 1 << 16) {
		for (int i = 0; i < 1 << 16; i++) {
			uint32_t b = (uint32_t)(base + (uint64_t)i);
			memcpy(&in[i], &b, sizeof b);
		}
		kernel_block(in, o);
		for (int i = 0; i < 1 << 16; i++) {
			float x = in[i], y = o[i], g = expf(x);
			if (isnan(x) || isinf(g) || g == 0) {
				int same = isnan(x) ? isnan(y) : memcmp(&y, &g, sizeof y) == 0;
				special += !same;
				if (!same && special <= 10)
					printf("expf(%a) = %a, glibc %a\n", x, y, g);
				continue;
			}
			int64_t d = ord(y) - ord(g);
			d = d < 0 ? -d : d;
			glibc_worst = d > glibc_worst ? d : glibc_worst;
			differ += d != 0;
			finite++;
			double e = exp((double)x);
			int ex;
			frexp(e, &ex);
			double u = fabs((double)y - e) / ldexp(1.0, (ex - 1 < -126 ? -126 : ex - 1) - 23);
			if (u > worst)
				worst = u, wx = x;
		}
	}
	printf("trac's exp (trt_expf_fma) over every float: %lld finite results, at most %.4f ulp from the exact "
	       "value (at %a); from glibc's expf at most %lld ulp, %.2f%% differ; %lld special values unlike "
	       "glibc's\n", (long long)finite, worst, wx, (long long)glibc_worst, 100.0 * (double)differ / (double)finite,
	       (long long)special);
	return special != 0;
}

int main(int argc, char **argv)
{
	__builtin_cpu_init();
	if (argc > 1 && strcmp(argv[1], "--all") == 0) {
		if (!__builtin_cpu_supports("fma")) {
			fprintf(stderr, "vmath --all: this CPU has no FMA; kernels call SLEEF's exp\n");
			return 1;
		}
		return all_floats();
	}
	if (argc > 1)
		n = atol(argv[1]) / 16 * 16;
	x = aligned_alloc(64, sizeof *x * (size_t)n);
	y = aligned_alloc(64, sizeof *y * (size_t)n);
	/* arguments in [-20, 20) (a softmax's shifted logits, activations),
	 * from a fixed generator: below -87 the results are denormal, and both
	 * vector libraries slow down there (bench/README.md, "Vectorised
	 * maps") */
	uint64_t s = 1;
	for (long i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (float)((double)(s >> 11) * 0x1p-53 * 40.0 - 20.0);
	}
	memset(y, 0, sizeof *y * (size_t)n);
	int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	int avx512 = __builtin_cpu_supports("avx512f");
	printf("expf over %ld floats in [-20, 20), one core; CPU seconds, best of 7; "
	       "ulps from glibc's expf\n", n);
	run("memcpy (the memory's pace)", copy);
	run("glibc expf, scalar", glibc_scalar);
	ref = malloc(sizeof *ref * (size_t)n);
	memcpy(ref, y, sizeof *y * (size_t)n);
	if (avx512) {
		run("glibc libmvec _ZGVeN16v_expf", mvec16);
		run("SLEEF finz_expf16_u10avx512f", sleef16);
	}
	if (avx2) {
		run("glibc libmvec _ZGVdN8v_expf", mvec8);
		run("SLEEF finz_expf8_u10avx2", sleef8);
	}
	run("trac trt_expf (runtime/vmath.c)", trac);
	return 0;
}
