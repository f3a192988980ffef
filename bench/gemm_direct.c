/*
 * gemm_direct.c: the baseline for trac's matmul on one rank: BLIS's gemm
 * called directly on row-major m x k and k x n matrices, one thread, the
 * kernels libtracrt picks (skx on AVX-512, runtime/blas.c).
 *
 *   bench/gemm_direct f32|f64 M N K REPS
 *
 * Prints one line per repetition:
 *
 *   cold=SECONDS warm=SECONDS
 *
 * cold: C freshly allocated (its pages first touched by the call), as a
 * program that makes C pays; warm: the same call again on the same C, the
 * best case a library call can show; the same in CPU seconds (steadier on
 * a machine shared with other jobs).  bench/bench.py takes the medians.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <blis.h>

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *alloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1)) {
		fprintf(stderr, "gemm_direct: out of memory\n");
		exit(1);
	}
	return p;
}

int main(int argc, char **argv)
{
	if (argc != 6 || (strcmp(argv[1], "f32") && strcmp(argv[1], "f64"))) {
		fprintf(stderr, "usage: gemm_direct f32|f64 M N K REPS\n");
		return 2;
	}
	int f64 = !strcmp(argv[1], "f64");
	long m = atol(argv[2]), n = atol(argv[3]), k = atol(argv[4]);
	int reps = atoi(argv[5]);
	size_t es = f64 ? 8 : 4;

	if (!getenv("BLIS_ARCH_TYPE") && __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f"))
		setenv("BLIS_ARCH_TYPE", "0", 1);        /* what runtime/blas.c does */
	bli_init();
	if (!getenv("BLIS_NUM_THREADS"))
		bli_thread_set_num_threads(1);

	char *a = alloc(es * (size_t)(m * k)), *b = alloc(es * (size_t)(k * n));
	srand(1);
	for (long i = 0; i < m * k; i++) {
		if (f64)
			((double *)a)[i] = rand() / (double)RAND_MAX;
		else
			((float *)a)[i] = (float)(rand() / (double)RAND_MAX);
	}
	for (long i = 0; i < k * n; i++) {
		if (f64)
			((double *)b)[i] = rand() / (double)RAND_MAX;
		else
			((float *)b)[i] = (float)(rand() / (double)RAND_MAX);
	}
	double one = 1, zero = 0;
	float onef = 1, zerof = 0;
	for (int r = 0; r < reps; r++) {
		double t[2], cpu[2];
		/* a fresh C each repetition: malloc returns untouched pages for a
		 * big block (mmap), freed again below */
		char *c = alloc(es * (size_t)(m * n));
		for (int pass = 0; pass < 2; pass++) {
			double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
			if (f64)
				bli_dgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, (double *)a,
				          k, 1, (double *)b, n, 1, &zero, (double *)c, n, 1);
			else
				bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &onef, (float *)a,
				          k, 1, (float *)b, n, 1, &zerof, (float *)c, n, 1);
			t[pass] = clock_s(CLOCK_MONOTONIC) - t0;
			cpu[pass] = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
		}
		printf("cold=%.6f warm=%.6f cold_cpu=%.6f warm_cpu=%.6f arch=%s\n", t[0], t[1], cpu[0],
		       cpu[1], bli_arch_string(bli_arch_query_id()));
		fflush(stdout);
		free(c);
	}
	free(a);
	free(b);
	return 0;
}
