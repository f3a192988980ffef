/*
 * calibrate.c: measure the machine model's constants on this machine and
 * print them as key=value lines, for the optimizer's cost model to read.
 *
 *   mpirun -np 2 bench/calibrate [--quick] > bench/machine.model
 *
 * What it measures, each as the median of several repetitions (the machine
 * is shared and noisy: never trust one run), the collectives as the fastest
 * (see coll_time):
 *
 *  - collectives on all ranks: MPI_Bcast, MPI_Allgatherv, MPI_Alltoallv,
 *    MPI_Allreduce and MPI_Reduce_scatter_block.  Each is fitted as
 *        seconds = latency + bytes / bandwidth
 *    where bytes is what one rank sends (bcast: the message, from the root;
 *    allgatherv: its own part times ranks - 1; alltoallv: its parts for the
 *    other ranks; allreduce and reduce_scatter: the vector).  latency is the
 *    time of an 8-byte call, bandwidth is taken from the largest message.
 *  - memcpy bandwidth on every rank at once, and the bandwidth of first
 *    touching fresh memory (the kernel zeroes each page: what a new chunk
 *    costs before anything is computed into it), with 4 KiB and 2 MiB pages.
 *  - gemm GFLOP/s by block size on each rank, one BLIS thread, the kernels
 *    the runtime would pick (skx on AVX-512): a blocked product of an n x n
 *    matrix with n/b x n/b separately allocated b x b chunks, accumulating
 *    into the output chunk (beta = 1) as trac's fused join does.  Every rank
 *    runs it at once, as in a real run, so memory bandwidth is shared.
 *  - the generated loops' rate: an elementwise multiply-add (a fused map) on
 *    a chunk, in flops per second;
 *  - memory new to the process (first_touch_cold_bandwidth_Bps): what a
 *    program's chunks cost up to its peak; reading a 256 MiB file into new
 *    memory and writing one (file_*_bandwidth_Bps), and what each read
 *    system call costs beyond its bytes (file_read_call_s);
 *  - the initialisers' values per second (WITH_TRACRT: rt_init_values);
 *  - fixed costs: one BLIS call (call_overhead_s), and, when built with
 *    libtracrt (-DWITH_TRACRT, as bench.py builds it), one runtime op: a
 *    shuffle (op_overhead_s) and a local map (local_op_overhead_s) of one
 *    tiny tuple per rank.
 *
 * Rank 0 prints; all ranks take part.
 */
#define _GNU_SOURCE                    /* MAP_ANONYMOUS, MADV_HUGEPAGE */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <blis.h>
#include <mpi.h>
#ifdef WITH_TRACRT
#include "rt.h"                 /* libtracrt's private header: op overheads */
#endif

static int rank, nranks, quick;

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void *xmalloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1)) {
		fprintf(stderr, "calibrate: out of memory (%zu bytes)\n", n);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(p, 1, n);
	return p;
}

/* ---- collectives ---- */

enum { BCAST, ALLGATHERV, ALLTOALLV, ALLREDUCE, REDUCE_SCATTER, NCOLL };
static const char *coll_name[NCOLL] = {"bcast", "allgatherv", "alltoallv", "allreduce",
                                       "reduce_scatter"};

/* One call moving `bytes` per rank (as defined above); returns seconds, the
 * max over ranks. */
static double coll_once(int kind, size_t bytes, char *sbuf, char *rbuf, int *cnt, int *dsp)
{
	int per = (int)(bytes / (size_t)(nranks > 1 ? nranks - 1 : 1));
	MPI_Barrier(MPI_COMM_WORLD);
	double t = MPI_Wtime();
	switch (kind) {
	case BCAST:
		MPI_Bcast(sbuf, (int)bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
		break;
	case ALLGATHERV:
		for (int r = 0; r < nranks; r++) {
			cnt[r] = per;
			dsp[r] = r * per;
		}
		MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, cnt, dsp, MPI_BYTE,
		               MPI_COMM_WORLD);
		break;
	case ALLTOALLV:
		for (int r = 0; r < nranks; r++) {
			cnt[r] = r == rank ? 0 : per;
			dsp[r] = r * per;
		}
		MPI_Alltoallv(sbuf, cnt, dsp, MPI_BYTE, rbuf, cnt, dsp, MPI_BYTE, MPI_COMM_WORLD);
		break;
	case ALLREDUCE:
		MPI_Allreduce(sbuf, rbuf, (int)(bytes / 8), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
		break;
	case REDUCE_SCATTER:
		MPI_Reduce_scatter_block(sbuf, rbuf, (int)(bytes / 8 / (size_t)nranks), MPI_DOUBLE,
		                         MPI_SUM, MPI_COMM_WORLD);
		break;
	}
	t = MPI_Wtime() - t;
	double tmax;
	MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	return tmax;
}

static double coll_time(int kind, size_t bytes, int reps)
{
	size_t cap = bytes * (size_t)(nranks + 1) + 64;
	char *sbuf = xmalloc(cap), *rbuf = xmalloc(cap);
	int *cnt = malloc(sizeof *cnt * (size_t)nranks), *dsp = malloc(sizeof *dsp * (size_t)nranks);
	double *t = malloc(sizeof *t * (size_t)reps);

	if (kind == ALLREDUCE || kind == REDUCE_SCATTER)
		for (size_t i = 0; i < cap / 8; i++)
			((double *)sbuf)[i] = 1.0;
	coll_once(kind, bytes, sbuf, rbuf, cnt, dsp);  /* warm up */
	for (int r = 0; r < reps; r++)
		t[r] = coll_once(kind, bytes, sbuf, rbuf, cnt, dsp);
	/* the fastest: with more processes than free cores (other jobs), a
	 * rank descheduled mid-call makes a microsecond call take milliseconds,
	 * and a model fitted to that shuns every exchange */
	double m = t[0];
	for (int r = 1; r < reps; r++)
		m = t[r] < m ? t[r] : m;
	free(sbuf);
	free(rbuf);
	free(cnt);
	free(dsp);
	free(t);
	return m;
}

static void calibrate_comm(void)
{
	size_t big = quick ? (size_t)16 << 20 : (size_t)64 << 20;
	int reps = quick ? 5 : 11;

	for (int k = 0; k < NCOLL; k++) {
		double lat = coll_time(k, 8 * (size_t)nranks, reps * 4);
		double mid = coll_time(k, (size_t)1 << 20, reps);
		double t = coll_time(k, big, reps);
		double bw = (double)big / (t > lat ? t - lat : t);
		if (rank == 0) {
			printf("%s_latency_s=%.3g\n", coll_name[k], lat);
			printf("%s_bandwidth_Bps=%.4g\n", coll_name[k], bw);
			printf("# %s: 1 MiB in %.3g s, %zu MiB in %.3g s\n", coll_name[k], mid,
			       big >> 20, t);
		}
	}
}

/* ---- memory ---- */

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Work done on one rank alone (gemm, loops, memcpy, first touch, a BLIS
 * call) is timed in this thread's CPU seconds, page faults included: on a
 * machine shared with other jobs, wall time would count their time slices
 * too.  Memory bandwidth and caches are still shared, as in a real run. */
static double cpu_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Seconds to write n bytes of a new mapping aligned to 2 MiB (advised
 * MADV_HUGEPAGE when huge), faulted in first by one MADV_POPULATE_WRITE
 * as the runtime's chunks are; unmapped unless keep, which then gets it. */
static double first_touch(size_t n, int huge, char **keep)
{
	size_t len = n + ((size_t)2 << 20);
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *q = (char *)(((size_t)p + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1));
#ifdef MADV_HUGEPAGE
	if (huge)
		madvise(q, n, MADV_HUGEPAGE);
#endif
	MPI_Barrier(MPI_COMM_WORLD);
	double t0 = now();      /* wall: a host backing the pages is no CPU time of ours */
#ifdef MADV_POPULATE_WRITE
	madvise(q, n, MADV_POPULATE_WRITE);     /* faulted in as runtime/rel.c's map_big does */
#endif
	memset(q, 1, n);
	double t = now() - t0;
	if (keep)
		*keep = p;
	else
		munmap(p, len);
	return t;
}

static void calibrate_memcpy(void)
{
	size_t n = (size_t)64 << 20;
	char *a = xmalloc(n), *b = xmalloc(n);
	double t[7];

	for (int r = 0; r < 7; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = cpu_now();
		memcpy(b, a, n);
		t[r] = cpu_now() - t0;
	}
	double m = median(t, 7), all;
	MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("memcpy_bandwidth_Bps=%.4g\n", (double)n / all);
	free(a);
	free(b);

	/* fresh memory: the kernel zeroes each page on first touch; runtime
	 * chunks of 2 MiB and more start on a 2 MiB boundary, on huge pages
	 * with TRAC_HUGEPAGES=1 (runtime/rel.c) */
	for (int huge = 0; huge < 2; huge++) {
		for (int r = 0; r < 5; r++)
			t[r] = first_touch(n, huge, NULL);
		m = median(t, 5);
		MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
		if (rank == 0)
			printf("first_touch%s_bandwidth_Bps=%.4g\n", huge ? "_huge" : "", (double)n / all);
	}

	/* memory new to the process, as the runtime maps it by default: the
	 * mappings above were handed back, so these five, all kept until the
	 * end, are pages the kernel (and a virtual machine's host) gives this
	 * process for the first time */
	char *keep[5];
	for (int r = 0; r < 5; r++)
		t[r] = first_touch(n, 0, &keep[r]);
	for (int r = 0; r < 5; r++)
		munmap(keep[r], n + ((size_t)2 << 20));
	m = median(t, 5);
	MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("first_touch_cold_bandwidth_Bps=%.4g\n", (double)n / all);
}

/* ---- files ----
 *
 * What trac's reads and writes cost: every rank reads its own 256 MiB file
 * (from the page cache, into new memory, as trt_read does), and rank 0
 * writes one as trt_write does: a new file beside the destination,
 * written 8 MiB at a time with O_DIRECT (the page cache's pages are
 * memory new to a virtual machine, and were 2-4x slower and 5x more
 * variable here), fsynced (so that a finished run's outputs survive a
 * crash) and renamed onto the destination, in the current directory,
 * which is fsynced too.  trt_write copies its bytes into two aligned
 * stages while a thread writes the other (runtime/write.c, Out), so the
 * copy overlaps the disk and is not timed here: the writes go straight
 * from an aligned buffer, and the cost model takes the larger of the
 * disk's time and the copy's (with what rank 0 receives). */

enum { STAGE = 8 << 20, PIECE = 8 << 10 };

/* Writes n bytes of buf to a new file renamed onto path, as trt_write
 * does; 1 on success. */
static int write_like_trac(const char *path, const char *buf, size_t n)
{
	char tmp[80];
	snprintf(tmp, sizeof tmp, "%s.new", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return 0;
	int fl = fcntl(fd, F_GETFL), direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
	int ok = 1;
	for (size_t at = 0; ok && at < n; at += STAGE) {
		size_t k = n - at < STAGE ? n - at : STAGE;
		ok = pwrite(fd, buf + at, k, (off_t)at) == (ssize_t)k;
		if (!ok && direct && errno == EINVAL) {
			fcntl(fd, F_SETFL, fl);         /* O_DIRECT refused: as trac, buffered */
			direct = 0;
			ok = pwrite(fd, buf + at, k, (off_t)at) == (ssize_t)k;
		}
	}
	ok = ok && !fsync(fd);
	ok = !close(fd) && ok;
	ok = ok && !rename(tmp, path);
	int dir = open(".", O_RDONLY | O_DIRECTORY);   /* the rename made to last, as trac's */
	if (dir >= 0) {
		fsync(dir);
		close(dir);
	}
	return ok;
}

static void calibrate_files(void)
{
	/* 256 MiB: 64 MiB files wrote at 940 MB/s back to back, the 64-340
	 * MB outputs of bench's programs at 540-760 (the virtual disk takes
	 * short bursts faster).  Each write replaces a file of its size, as a
	 * program run again replaces its outputs (deleting one costs about
	 * 0.2 s per GB on a disk mounted with discard).  One 256 MiB write
	 * takes 0.23-0.38 s here from one run to the next, so the median of
	 * 11 (3 with --quick).  A small file writes slower per byte (32 MiB
	 * in 12 ms more than its share of 256 MiB's time: the fsyncs, the
	 * rename, the disk's first request): so 32 MiB files too, and
	 *     seconds = file_write_latency_s + bytes / file_write_bandwidth_Bps
	 * through the two medians. */
	enum { REPS = 11 };
	int reps = quick ? 3 : REPS;
	size_t n = (size_t)256 << 20, small = (size_t)32 << 20;
	char rpath[64], wpath[64], spath[64];
	snprintf(rpath, sizeof rpath, "calibrate-%d.tmp", rank);
	snprintf(wpath, sizeof wpath, "calibrate-%d.out", rank);
	snprintf(spath, sizeof spath, "calibrate-%d.small", rank);
	char *buf = NULL;
	if (posix_memalign((void **)&buf, 4096, n))        /* O_DIRECT's alignment */
		abort();
	memset(buf, 1, n);
	FILE *f = fopen(rpath, "wb");
	int made = f && fwrite(buf, 1, n, f) == n;
	if (f && fclose(f))
		made = 0;
	if (rank == 0) {        /* the files the timed writes replace */
		write_like_trac(wpath, buf, n);
		write_like_trac(spath, buf, small);
	}
	double tw[REPS], ts[REPS], tr[REPS], tp[REPS];
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		int ok = rank != 0 || write_like_trac(wpath, buf, n);
		tw[r] = ok ? now() - t0 : 1e9;
		t0 = now();
		ok = rank != 0 || write_like_trac(spath, buf, small);
		ts[r] = ok ? now() - t0 : 1e9;
		MPI_Barrier(MPI_COMM_WORLD);
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		t0 = now();
		f = made ? fopen(rpath, "rb") : NULL;
		ok = f && p != MAP_FAILED && fread(p, 1, n, f) == n;
		if (f)
			fclose(f);
		tr[r] = ok ? now() - t0 : 1e9;
		if (p != MAP_FAILED)
			munmap(p, n);
		/* half the file in PIECE-byte pieces a gap apart, one pread each,
		 * as trt_read reads a rank's share of a file split along its last
		 * dim (one preadv per stretch) */
		size_t half = n / 2;
		p = mmap(NULL, half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int fd = made ? open(rpath, O_RDONLY) : -1;
		ok = fd >= 0 && p != MAP_FAILED;
		t0 = now();
		for (size_t at = 0; ok && at < half; at += PIECE)
			ok = pread(fd, p + at, PIECE, (off_t)(2 * at)) == (ssize_t)PIECE;
		tp[r] = ok ? now() - t0 : 1e9;
		if (fd >= 0)
			close(fd);
		if (p != MAP_FAILED)
			munmap(p, half);
	}
	remove(rpath);
	remove(wpath);
	remove(spath);
	free(buf);
	if (rank != 0)
		for (int r = 0; r < reps; r++)
			tw[r] = ts[r] = 0;      /* rank 0 writes */
	double v[4] = { median(tw, reps), median(tr, reps), median(tp, reps), median(ts, reps) }, all[4];
	MPI_Allreduce(v, all, 4, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0 && all[0] < 1e9 && all[1] < 1e9 && all[2] < 1e9 && all[3] < 1e9) {
		double calls = (double)(n / 2 / PIECE), call = (all[2] - all[1] / 2) / calls;
		/* the line through (32 MiB, ts) and (256 MiB, tw); the disk's
		 * noise can tilt it: then the big file's rate alone */
		double bw = all[0] > all[3] ? (double)(n - small) / (all[0] - all[3]) : 0;
		double lat = bw > 0 ? all[3] - (double)small / bw : -1;
		if (lat < 0 || bw <= 0) {
			bw = (double)n / all[0];
			lat = 0;
		}
		printf("# file write: %.4g s for 32 MiB, %.4g s for 256 MiB\n", all[3], all[0]);
		printf("file_write_latency_s=%.3g\n", lat);
		printf("file_write_bandwidth_Bps=%.4g\n", bw);
		printf("file_read_bandwidth_Bps=%.4g\n", (double)n / all[1]);
		printf("# file read in %d-byte pieces: %.4g s for half the file in %.0f calls, whole %.4g s\n",
		       PIECE, all[2], calls, all[1]);
		printf("file_read_call_s=%.3g\n", call > 0 ? call : 0);
	}
}

/* ---- gemm by block size ---- */

/* The BLIS path trac's runtime gives an m x n x k call (runtime/blas.c:
 * small calls keep BLIS's unpacked kernels, larger ones go packed). */
#ifdef WITH_TRACRT
#define RNTM(m, n, k) ((rntm_t *)rt_gemm_rntm(m, n, k, 0))
#else
#define RNTM(m, n, k) NULL
#endif

/* GFLOP/s of an n x n x n product made of b x b chunk gemms, median of reps,
 * the slowest rank's. */
static double blocked_gemm(int f64, int b, int n, int reps)
{
	int f = n / b;
	size_t es = f64 ? 8 : 4, cb = es * (size_t)b * (size_t)b;
	void **A = malloc(sizeof *A * (size_t)(f * f)), **B = malloc(sizeof *B * (size_t)(f * f));
	void **C = malloc(sizeof *C * (size_t)(f * f));
	double *t = malloc(sizeof *t * (size_t)reps);

	for (int i = 0; i < f * f; i++) {
		A[i] = xmalloc(cb);
		B[i] = xmalloc(cb);
		C[i] = xmalloc(cb);
		for (size_t e = 0; e < (size_t)b * (size_t)b; e++) {
			if (f64) {
				((double *)A[i])[e] = 1e-3 * (double)(e % 7);
				((double *)B[i])[e] = 1e-3 * (double)(e % 5);
			} else {
				((float *)A[i])[e] = 1e-3f * (float)(e % 7);
				((float *)B[i])[e] = 1e-3f * (float)(e % 5);
			}
		}
	}
	double one = 1, zero = 0;
	float onef = 1, zerof = 0;
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = cpu_now();
		for (int i = 0; i < f; i++)
			for (int k = 0; k < f; k++)
				for (int j = 0; j < f; j++) {
					if (f64)
						bli_dgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, b, b, b, &one,
						             A[i * f + k], b, 1, B[k * f + j], b, 1,
						             k ? &one : &zero, C[i * f + j], b, 1, NULL, RNTM(b, b, b));
					else
						bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, b, b, b, &onef,
						             A[i * f + k], b, 1, B[k * f + j], b, 1,
						             k ? &onef : &zerof, C[i * f + j], b, 1, NULL, RNTM(b, b, b));
				}
		t[r] = cpu_now() - t0;
	}
	double m = median(t, reps), all;
	MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	for (int i = 0; i < f * f; i++) {
		free(A[i]);
		free(B[i]);
		free(C[i]);
	}
	free(A);
	free(B);
	free(C);
	free(t);
	return 2.0 * (double)n * (double)n * (double)n / all / 1e9;
}

static void calibrate_gemm(void)
{
	/* 96 and 192 where the rate climbs fastest: a call of volume 76^3
	 * (Tucker's 96 x 96 x 48) read between 64 and 128 was 20% low */
	static const int blocks[] = {32, 64, 96, 128, 192, 256, 384, 500, 512, 768, 1000, 1024, 1536,
	                             2000, 2048, 3072};
	int nb = (int)(sizeof blocks / sizeof *blocks);
	int reps = quick ? 3 : 5;

	for (int f64 = 0; f64 < 2; f64++) {
		double best = 0;
		int bestb = 0;
		for (int i = 0; i < nb; i++) {
			int b = blocks[i];
			if (quick && b > 2000)
				continue;
			/* about 3000 on a side (1536 below blocks of 128, whose calls
			 * are many), at least two chunks per side below 1536 */
			int f = (b < 128 ? 1536 : 3072) / b > 0 ? (b < 128 ? 1536 : 3072) / b : 1;
			if (b <= 1536 && f < 2)
				f = 2;
			double g = blocked_gemm(f64, b, b * f, reps);
			if (rank == 0)
				printf("gemm_%s_gflops_b%d=%.1f\n", f64 ? "f64" : "f32", b, g);
			if (g > best) {
				best = g;
				bestb = b;
			}
			fflush(stdout);
		}
		if (rank == 0) {
			printf("gemm_%s_gflops=%.1f\n", f64 ? "f64" : "f32", best);
			printf("gemm_%s_best_block=%d\n", f64 ? "f64" : "f32", bestb);
		}
	}
}

/* Seconds of one m x n x k sgemm on row-major operands, median of reps,
 * the slowest rank's. */
static double one_sgemm(int m, int n, int k, int colc, int reps)
{
	float *a = xmalloc(sizeof *a * (size_t)m * (size_t)k), *b = xmalloc(sizeof *b * (size_t)k * (size_t)n);
	float *c = xmalloc(sizeof *c * (size_t)m * (size_t)n), one = 1, zero = 0;
	double t[9];
	for (size_t e = 0; e < (size_t)m * (size_t)k; e++)
		a[e] = 1e-3f * (float)(e % 7);
	for (size_t e = 0; e < (size_t)k * (size_t)n; e++)
		b[e] = 1e-3f * (float)(e % 5);
	memset(c, 0, sizeof *c * (size_t)m * (size_t)n);
	for (int r = 0; r < reps; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = cpu_now();
		if (colc)       /* B and C column-major, as Tucker's last product */
			bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, a, k, 1, b, 1, k, &zero, c, 1, m,
			             NULL, RNTM(m, n, k));
		else
			bli_sgemm_ex(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &one, a, k, 1, b, n, 1, &zero, c, n, 1,
			             NULL, RNTM(m, n, k));
		t[r] = cpu_now() - t0;
	}
	double med = median(t, reps), all;
	MPI_Allreduce(&med, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	free(a);
	free(b);
	free(c);
	return all;
}

/*
 * Thin gemms (kernelcost.c's kernel_rate): a 48 x n x 96 product reuses B and C
 * 48 times only, and like every call with a dim under 64 it runs on BLIS's
 * small/unpacked path (runtime/blas.c's rt_gemm_rntm), as the thin calls
 * of Tucker's and MTTKRP's chunks do (48 x 221184 x 48, 32 x 600 x 600);
 * thin calls with every dim 64 or more go packed and run at about the same
 * speed.  BLIS packs B from memory with little reuse, which a cube of the
 * same volume does not: the difference, over B's bytes, is
 * gemm_pack_b_Bps.  With C (and B) column-major BLIS computes the
 * transposed product, and the operand it packs with little reuse is its
 * A: gemm_pack_a_Bps.  With B's and C's rows 262144 floats apart (a
 * multiple of 4 KiB: the rows share cache sets) it takes longer again:
 * that difference over B's and C's bytes is gemm_stream_aliased_Bps.
 */
static void calibrate_thin_gemm(void)
{
	/* The excess is 10-50% of the call, so the four are measured in
	 * turn, PAIRS times, and each excess is the median of its pairs'
	 * differences: drift between them cancels. */
	enum { PAIRS = 7 };
	int reps = 3, n = 262000, pairs = quick ? 3 : PAIRS;
	double v = 48.0 * 96.0 * n, bytes = 4.0 * 96 * n;
	int side = (int)cbrt(v);
	double d[3][PAIRS], cube = 0, row = 0, col = 0, al = 0;
	for (int p = 0; p < pairs; p++) {
		double c = one_sgemm(side, side, side, 0, reps) * v / ((double)side * side * side);
		double r = one_sgemm(48, n, 96, 0, reps), cm = one_sgemm(48, n, 96, 1, reps);
		double a = one_sgemm(48, 262144, 96, 0, reps) * n / 262144.0;
		d[0][p] = r - c;
		d[1][p] = cm - c;
		d[2][p] = a - r;
		cube += c / pairs;
		row += r / pairs;
		col += cm / pairs;
		al += a / pairs;
	}
	double dr = median(d[0], pairs), dc = median(d[1], pairs), da = median(d[2], pairs);
	if (rank != 0)
		return;
	printf("# thin gemm 48 x %d x 96: %.4f s, column-major %.4f s, a cube of its volume %.4f s, "
	       "rows 4 KiB apart %.4f s\n", n, row, col, cube, al);
	if (dr > 0)
		printf("gemm_pack_b_Bps=%.4g\n", bytes / dr);
	if (dc > 0)
		printf("gemm_pack_a_Bps=%.4g\n", bytes / dc);
	if (da > 0)
		printf("gemm_stream_aliased_Bps=%.4g\n", (bytes + 4.0 * 48 * n) / da);   /* B's and C's */
}

/* The fixed cost of one BLIS call: a 4 x 4 x 4 product. */
static void calibrate_call(void)
{
	float a[16] = {0}, b[16] = {0}, c[16] = {0}, one = 1;
	double t[9];

	for (int r = 0; r < 9; r++) {
		double t0 = cpu_now();
		for (int i = 0; i < 10000; i++)
			bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, 4, 4, 4, &one, a, 4, 1, b, 4, 1, &one,
			          c, 4, 1);
		t[r] = (cpu_now() - t0) / 10000;
	}
	double m = median(t, 9), all;
	MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("call_overhead_s=%.3g\n", all);
}

#ifdef WITH_TRACRT
/*
 * The runtime's own exchanges (zero copy, runtime/comm.c) on a relation of
 * 1 MiB chunks, 16 MiB per rank: trt_shuffle moving every tuple, and
 * trt_bcast.  bytes = what one rank sends, as for the collectives.  The
 * receiving chunks come from the runtime's chunk cache after the first
 * repetition, as in a program's steady state; fresh memory costs more (see
 * first_touch_bandwidth_Bps).
 */
static void calibrate_trac_comm(void)
{
	enum { PER = 16, ELEMS = 131072 };      /* chunks per rank, doubles per chunk */
	TrtType t = { .dtype = TRT_F64, .nkey = 1, .extent = { (int64_t)nranks * PER * ELEMS },
	              .block = { ELEMS }, .nchunk = 1, .chunkdim = { 0 } };
	TrtPlace any = { TRT_ANY, 0, { 0 } }, part = { TRT_PART, 1, { 0 } };
	TrtRel *off = trt_rel_new(&t, any), *on = trt_rel_new(&t, part);
	for (int64_t k = 0; k < (int64_t)nranks * PER; k++) {
		/* off: the tuples whose site is the next rank; on: our own */
		for (int w = 0; w < 2; w++)
			if (k % nranks == (rank + (w ? 0 : 1)) % nranks) {
				Chunk *c = rt_chunk_new((size_t)ELEMS * 8);
				memset(rt_chunk_data(c), 1, (size_t)ELEMS * 8);
				rt_rel_push(w ? on : off, &k, c);
			}
	}
	int reps = quick ? 5 : 11;
	double *tsh = malloc(sizeof *tsh * (size_t)reps), *tbc = malloc(sizeof *tbc * (size_t)reps);
	for (int i = 0; i < reps; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = MPI_Wtime();
		TrtRel *s = trt_shuffle(off, part);
		MPI_Barrier(MPI_COMM_WORLD);
		tsh[i] = MPI_Wtime() - t0;
		trt_free(s);
		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		TrtRel *b = trt_bcast(on);
		MPI_Barrier(MPI_COMM_WORLD);
		tbc[i] = MPI_Wtime() - t0;
		trt_free(b);
	}
	double bytes = (double)PER * ELEMS * 8;
	if (rank == 0) {
		printf("trac_shuffle_bandwidth_Bps=%.4g\n", bytes / median(tsh, reps));
		printf("trac_bcast_bandwidth_Bps=%.4g\n", bytes * (nranks - 1) / median(tbc, reps));
	}
	free(tsh);
	free(tbc);
	trt_free(off);
	trt_free(on);
}

/* The fixed cost of a runtime op: a shuffle and a map of one tiny tuple per
 * rank, through libtracrt as compiled programs call it. */
static void calibrate_ops(void)
{
	TrtType t = { .dtype = TRT_F64, .nkey = 1, .extent = { nranks }, .block = { 1 },
	              .nchunk = 1, .chunkdim = { 0 } };
	TrtPlace mine = { TRT_PART, 1, { 0 } }, none = { TRT_PART, 0, { 0 } };
	TrtRel *r = trt_rel_new(&t, mine);
	int64_t key = rank;
	Chunk *c = rt_chunk_new(8);
	*(double *)rt_chunk_data(c) = 1;
	rt_rel_push(r, &key, c);
	double ts[41], tm[41];
	int keymap[1] = { 0 };

	for (int i = 0; i < 41; i++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = now();
		TrtRel *s = trt_shuffle(r, none);
		ts[i] = now() - t0;
		t0 = now();
		TrtRel *m = trt_map(r, 1, keymap, NULL, &t, mine);
		tm[i] = now() - t0;
		trt_free(s);
		trt_free(m);
	}
	double v[2] = { median(ts, 41), median(tm, 41) }, all[2];
	MPI_Allreduce(v, all, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("op_overhead_s=%.3g\n", all[0]);
		printf("local_op_overhead_s=%.3g\n", all[1]);
	}
	trt_free(r);
	if (nranks > 1)
		calibrate_trac_comm();

	/* the initialisers' values into warm memory (runtime/param.c) */
	int64_t n = (int64_t)1 << 22;
	float *out = xmalloc(sizeof *out * (size_t)n);
	double ti[2][7];
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 7; i++) {
			double t0 = now();
			rt_init_values(k ? TRT_INIT_NORMAL : TRT_INIT_UNIFORM, 0, 1, 7, 0, n, TRT_F32, out);
			ti[k][i] = now() - t0;
		}
	free(out);
	double rates[2] = { n / median(ti[0], 7), n / median(ti[1], 7) }, low[2];
	MPI_Allreduce(rates, low, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
	if (rank == 0) {
		printf("init_uniform_per_s=%.4g\n", low[0]);
		printf("init_normal_per_s=%.4g\n", low[1]);
	}
}
#endif

/* ---- generated loops ---- */

/* What a fused elementwise kernel looks like: out = x * y + x, one chunk. */
static void __attribute__((noinline)) fused_f32(const float *restrict x, const float *restrict y,
                                                float *restrict o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = x[i] * y[i] + x[i];
}

static void calibrate_loops(void)
{
	long n = 1L << 20;      /* a 1024 x 1024 f32 chunk: 4 MiB per operand */
	float *x = xmalloc(sizeof *x * (size_t)n), *y = xmalloc(sizeof *y * (size_t)n);
	float *o = xmalloc(sizeof *o * (size_t)n);
	double t[9];

	for (int r = 0; r < 9; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = cpu_now();
		for (int k = 0; k < 10; k++)
			fused_f32(x, y, o, n);
		t[r] = (cpu_now() - t0) / 10;
	}
	double m = median(t, 9), all;
	MPI_Allreduce(&m, &all, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (rank == 0)
		printf("loop_rate_flops=%.4g\n", 2.0 * (double)n / all);
	free(x);
	free(y);
	free(o);
}

/* ---- convolutions ---- */

/*
 * One chunk of a 3x3x3 convolution (O = 10 kernels over C = 3 channels of
 * a T x H x W = 8 x 64 x 126 block, "valid"), two ways:
 *   direct  the loop trac generates for IA_CONV (codegen/conv.c,
 *           emit_conv_kernel): per output row and kernel tap, a row of the
 *           input times a weight added into the row, innermost contiguous;
 *   im2col  the input's windows copied into a (C R^3) x (T' H' W') matrix,
 *           then one BLIS sgemm with the O x (C R^3) kernels.
 * conv_rate_flops is the direct loop's (2 flops a multiply-add), built at
 * -O3 as trac builds generated code; the im2col rate is printed as a
 * comment, to compare (bench/README.md).  `make calibrate` (bench.py's
 * conv_rate) replaces it with the rate of the kernel trac generates, timed
 * in a run of examples/conv3d.tra: this loop's bounds are constants and its
 * chunk fits in cache, and it ran 3-4x faster.
 */
enum { CV_O = 10, CV_C = 3, CV_R = 3, CV_T = 8, CV_H = 64, CV_W = 126 };
enum { CV_TO = CV_T - CV_R + 1, CV_HO = CV_H - CV_R + 1, CV_WO = CV_W - CV_R + 1 };

static void __attribute__((noinline, optimize("O3"))) conv_direct(const float *restrict k, const float *restrict x,
                                                                   float *restrict y)
{
	memset(y, 0, sizeof *y * CV_O * CV_TO * CV_HO * CV_WO);
	for (int o = 0; o < CV_O; o++)
		for (int t = 0; t < CV_TO; t++)
			for (int h = 0; h < CV_HO; h++) {
				float *yr = y + ((o * CV_TO + t) * CV_HO + h) * CV_WO;
				for (int c = 0; c < CV_C; c++)
					for (int dt = 0; dt < CV_R; dt++)
						for (int dh = 0; dh < CV_R; dh++)
							for (int dw = 0; dw < CV_R; dw++) {
								const float *xr = x + ((c * CV_T + t + dt) * CV_H + h + dh) * CV_W + dw;
								const float wv = k[(((o * CV_C + c) * CV_R + dt) * CV_R + dh) * CV_R + dw];
								for (int j = 0; j < CV_WO; j++)
									yr[j] += wv * xr[j];
							}
			}
}

static void __attribute__((noinline)) conv_im2col(const float *k, const float *x, float *col, float *y)
{
	const long n = (long)CV_TO * CV_HO * CV_WO, kk = CV_C * CV_R * CV_R * CV_R;
	for (int c = 0; c < CV_C; c++)
		for (int dt = 0; dt < CV_R; dt++)
			for (int dh = 0; dh < CV_R; dh++)
				for (int dw = 0; dw < CV_R; dw++) {
					float *cr = col + (((c * CV_R + dt) * CV_R + dh) * CV_R + dw) * n;
					for (int t = 0; t < CV_TO; t++)
						for (int h = 0; h < CV_HO; h++)
							memcpy(cr + (t * CV_HO + h) * CV_WO,
							       x + ((c * CV_T + t + dt) * CV_H + h + dh) * CV_W + dw, sizeof *cr * CV_WO);
				}
	float one = 1, zero = 0;
	bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, CV_O, n, kk, &one, (float *)k, kk, 1, col, n, 1, &zero, y, n, 1);
}

static void calibrate_conv(void)
{
	const long nx = (long)CV_C * CV_T * CV_H * CV_W, ny = (long)CV_O * CV_TO * CV_HO * CV_WO;
	const long nk = (long)CV_O * CV_C * CV_R * CV_R * CV_R;
	float *x = xmalloc(sizeof *x * nx), *k = xmalloc(sizeof *k * nk), *y = xmalloc(sizeof *y * ny);
	float *col = xmalloc(sizeof *col * (nk / CV_O) * (ny / CV_O));
	for (long i = 0; i < nx; i++)
		x[i] = (float)(i % 7) * 0.25f;
	for (long i = 0; i < nk; i++)
		k[i] = (float)(i % 5) * 0.5f;
	double td[7], ti[7];
	for (int r = 0; r < 7; r++) {
		MPI_Barrier(MPI_COMM_WORLD);
		double t0 = cpu_now();
		conv_direct(k, x, y);
		td[r] = cpu_now() - t0;
		t0 = cpu_now();
		conv_im2col(k, x, col, y);
		ti[r] = cpu_now() - t0;
	}
	double d = median(td, 7), i = median(ti, 7), dall, iall;
	MPI_Allreduce(&d, &dall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	MPI_Allreduce(&i, &iall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	double flops = 2.0 * (double)ny * CV_C * CV_R * CV_R * CV_R;
	if (rank == 0) {
		printf("# a 3x3x3 convolution chunk: direct loop %.3g flop/s, im2col + BLIS sgemm %.3g flop/s\n",
		       flops / dall, flops / iall);
		printf("conv_rate_flops=%.4g\n", flops / dall);
	}
	free(x);
	free(k);
	free(y);
	free(col);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
#ifdef WITH_TRACRT
	static const TrtProgram prog = { .abi = TRT_ABI, .name = "calibrate" };
	int one = 1;
	char *args[] = { argv[0], NULL }, **av = args;
	trt_init(&one, &av, &prog, 1);    /* BLIS as the runtime sets it up */
#endif
	for (int a = 1; a < argc; a++)
		if (!strcmp(argv[a], "--quick"))
			quick = 1;
		else if (!strcmp(argv[a], "--comm-only"))
			quick = 2;

	/* the runtime's kernel choice (runtime/blas.c): skx on Intel's AVX-512 */
	if (!getenv("BLIS_ARCH_TYPE") && __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f"))
		setenv("BLIS_ARCH_TYPE", "0", 1);
	bli_init();
	bli_thread_set_num_threads(1);

	if (rank == 0) {
		time_t now_t = time(NULL);
		char date[64];
		strftime(date, sizeof date, "%Y-%m-%d %H:%M", gmtime(&now_t));
		printf("# trac machine model: bench/calibrate on %d rank%s, %s UTC\n", nranks,
		       nranks == 1 ? "" : "s", date);
		printf("# seconds = latency + bytes / bandwidth; bytes = what one rank sends\n");
		printf("ranks=%d\n", nranks);
		printf("blis_arch=%s\n", bli_arch_string(bli_arch_query_id()));
		fflush(stdout);
	}
	if (nranks > 1)
		calibrate_comm();
	fflush(stdout);
#ifdef WITH_TRACRT
	calibrate_ops();
#endif
	if (quick != 2) {
		calibrate_call();
		calibrate_memcpy();
		calibrate_files();
		calibrate_loops();
		calibrate_conv();
		fflush(stdout);
		calibrate_gemm();
		calibrate_thin_gemm();
	}
#ifdef WITH_TRACRT
	return trt_finish();
#else
	MPI_Finalize();
	return 0;
#endif
}
