/*
 * kops.c: what each elementwise op of a kernel expression costs in the
 * generated loops, against an add: the weights of ir.h's KOPS table, which
 * the cost model prices a kernel's elements with (optimizer/kernelcost.c).
 *
 * Each op runs in a loop of its own as codegen/kernel.c emits it (f32, the
 * runtime's trt_expf and the others from libtracrt, compiled with codegen's
 * flags: -O3 -march=native -fno-math-errno -fno-trapping-math), over
 * 2^20 floats, the quick calibration's loop (runtime/quickcal.c, whose
 * out = x * y + x sets the loop rate, 2 flops an element).  Each is timed
 * in this thread's CPU seconds, the best of 7 of 10 passes each.  An op's
 * weight is one plus its time per element beyond an add's, in the fused
 * loop's flops (its time per element over 2):
 *
 *     weight = 1 + (t_op - t_add) / (t_fused / 2),   at least 1
 *
 * so a kernel of several ops costs each op's work beyond the loads and
 * stores an add already pays.  bench.py's "kops" section runs it.
 *
 *   bench/kops [N]
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trac_rt.h"

static long n = 1L << 20;
static float *x, *y, *z, *o;

static double cpu(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* One loop: o[i] = E, with t0, t1, t2 the elements of x, y, z. */
#define LOOP(NAME, E)                                                                         \
	static void __attribute__((noinline)) NAME(const float *restrict xs, const float *restrict ys, \
	                                           const float *restrict zs, float *restrict os, long len) \
	{                                                                                     \
		for (long i = 0; i < len; i++) {                                              \
			float t0 = xs[i], t1 = ys[i], t2 = zs[i];                             \
			(void)t1;                                                             \
			(void)t2;                                                             \
			os[i] = E;                                                            \
		}                                                                             \
	}

LOOP(l_fused, t0 * t1 + t0)
LOOP(l_add, t0 + t1)
LOOP(l_sub, t0 - t1)
LOOP(l_mul, t0 * t1)
LOOP(l_div, t0 / t1)
LOOP(l_neg, -t0)
LOOP(l_abs, fabsf(t0))
LOOP(l_relu, t0 > 0 ? t0 : 0)
LOOP(l_lt, t0 < t1)
LOOP(l_eq, t0 == t1)
LOOP(l_where, t2 != 0 ? t0 : t1)
LOOP(l_sqrt, sqrtf(t1))
LOOP(l_exp, trt_expf(t0))
LOOP(l_log, trt_logf(t1))
LOOP(l_tanh, trt_tanhf(t0))
LOOP(l_sigmoid, 1 / (1 + trt_expf(-t0)))
LOOP(l_pow, trt_powf(t1, t0 / 8))

typedef void (*Loop)(const float *restrict, const float *restrict, const float *restrict, float *restrict, long);

static double per_elem(Loop f)
{
	double best = 1e30;
	for (int r = 0; r < 7; r++) {
		double t = cpu();
		for (int k = 0; k < 10; k++)
			f(x, y, z, o, n);
		t = (cpu() - t) / 10;
		best = t < best ? t : best;
	}
	return best / (double)n;
}

int main(int argc, char **argv)
{
	static const struct { const char *name; Loop f; } ops[] = {
		{"add", l_add}, {"sub", l_sub}, {"mul", l_mul}, {"div", l_div}, {"neg", l_neg},
		{"abs", l_abs}, {"relu", l_relu}, {"lt (compare)", l_lt}, {"eq (compare)", l_eq},
		{"where", l_where}, {"sqrt", l_sqrt}, {"exp", l_exp}, {"log", l_log}, {"tanh", l_tanh},
		{"sigmoid", l_sigmoid}, {"pow", l_pow},
	};
	if (argc > 1)
		n = atol(argv[1]) / 16 * 16;
	x = aligned_alloc(64, sizeof *x * (size_t)n);
	y = aligned_alloc(64, sizeof *y * (size_t)n);
	z = aligned_alloc(64, sizeof *z * (size_t)n);
	o = aligned_alloc(64, sizeof *o * (size_t)n);
	/* x in [-20, 20) (logits, activations), y in [0.5, 20.5) (a log's,
	 * a square root's, a divisor's, a power's base), z half zero */
	uint64_t s = 1;
	for (long i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		double u = (double)(s >> 11) * 0x1p-53;
		x[i] = (float)(u * 40 - 20);
		y[i] = (float)(u * 20 + 0.5);
		z[i] = (float)(i & 1);
	}
	memset(o, 0, sizeof *o * (size_t)n);
	double fused = per_elem(l_fused), add = per_elem(l_add), flop = fused / 2;
	printf("kernel ops over %ld floats, one core: ns per element (best of 7), weight = 1 + (op - add) / "
	       "(fused / 2)\n", n);
	printf("%-14s %7.3f ns  (the loop rate: %.3g flop/s)\n", "x * y + x", 1e9 * fused, 1 / flop);
	for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
		double t = ops[i].f == l_add ? add : per_elem(ops[i].f), w = 1 + (t - add) / flop;
		printf("%-14s %7.3f ns  weight %5.2f\n", ops[i].name, 1e9 * t, w > 1 ? w : 1);
	}
	return 0;
}
