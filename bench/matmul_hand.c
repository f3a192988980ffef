/*
 * matmul_hand.c: what trac's whole matmul program does on one rank, written
 * by hand with BLIS: A and B (n x n, f32) uniform in [-1, 1) from a seeded
 * generator, C = A B by one bli_sgemm, C written as C.npy.  The baseline of
 * bench.py's "parity" section, timed as a whole process, as a user meets
 * both.  With --durable it writes C as trac writes an output: to a
 * temporary name, fsync, renamed over OUT.npy, the folder fsynced (the same
 * work where the disk is slow to flush).
 *
 *   bench/matmul_hand N OUT.npy [--durable]
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blis.h>

/* splitmix64 of the element's index: a counter-based generator a careful
 * user would write (as fast as memory allows; vectorised by the compiler) */
static void uniform(float *x, long n, uint64_t seed)
{
	for (long i = 0; i < n; i++) {
		uint64_t z = seed + (uint64_t)i * 0x9e3779b97f4a7c15u;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		z ^= z >> 31;
		x[i] = (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
	}
}

int main(int argc, char **argv)
{
	int durable = argc == 4 && !strcmp(argv[3], "--durable");
	if (argc != 3 && !durable) {
		fprintf(stderr, "usage: matmul_hand N OUT.npy [--durable]\n");
		return 2;
	}
	long n = atol(argv[1]);
	if (!getenv("BLIS_ARCH_TYPE") && __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f"))
		setenv("BLIS_ARCH_TYPE", "0", 1);        /* what runtime/blas.c does */
	bli_init();
	if (!getenv("BLIS_NUM_THREADS"))
		bli_thread_set_num_threads(1);
	size_t bytes = sizeof(float) * (size_t)(n * n);
	float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
	if (!a || !b || !c) {
		fprintf(stderr, "matmul_hand: out of memory\n");
		return 1;
	}
	uniform(a, n * n, 1);
	uniform(b, n * n, 2);
	float one = 1, zero = 0;
	bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, n, n, n, &one, a, n, 1, b, n, 1, &zero, c, n, 1);

	/* .npy version 1.0: magic, header length, a dict padded to 64 bytes */
	char hdr[128];
	int len = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (%ld, %ld), }",
	                   n, n);
	int total = (10 + len + 1 + 63) / 64 * 64;
	memset(hdr + 10 + len, ' ', (size_t)(total - 10 - len - 1));
	hdr[total - 1] = '\n';
	memcpy(hdr, "\x93NUMPY\x01\x00", 8);
	hdr[8] = (char)((total - 10) & 0xff);
	hdr[9] = (char)((total - 10) >> 8);
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", argv[2]);
	FILE *f = fopen(durable ? tmp : argv[2], "wb");
	if (!f || fwrite(hdr, 1, (size_t)total, f) != (size_t)total || fwrite(c, 1, bytes, f) != bytes ||
	    fflush(f) || (durable && fsync(fileno(f))) || fclose(f) || (durable && rename(tmp, argv[2]))) {
		fprintf(stderr, "matmul_hand: cannot write %s\n", argv[2]);
		return 1;
	}
	if (durable) {
		char dir[4096];
		snprintf(dir, sizeof dir, "%s", argv[2]);
		int d = open(dirname(dir), O_RDONLY);
		if (d < 0 || fsync(d) || close(d)) {
			fprintf(stderr, "matmul_hand: cannot flush the folder of %s\n", argv[2]);
			return 1;
		}
	}
	free(a);
	free(b);
	free(c);
	return 0;
}
