/*
 * quickcal.c: trac-calibrate, the quick calibration an installed trac runs
 * the first time it plans on a machine with no model file (trac(1),
 * MACHINE MODEL; optimizer/host.c caches what it prints).
 *
 *   trac-calibrate [DIR] > model  (key=value lines, as bench/calibrate's)
 *
 * It measures in about a second, on one core, without MPI, what the
 * machine's flags cannot tell (bench/calibrate measures the full model in
 * minutes):
 *  - gemm GFLOP/s at blocks 32 to 1024 in f32 and f64, through the BLIS
 *    path the runtime takes (trt_sgemm, trt_dgemm after rt_blas_init): an
 *    n x n x n product of separately allocated b x b chunks, accumulating
 *    into the output chunk as trac's fused join does;
 *  - memcpy bandwidth over 64 MiB (beyond the caches of the machines trac
 *    runs on), and the bandwidth of memory new to the process;
 *  - the generated loops' rate (out = x * y + x over a 1024 x 1024 chunk);
 *  - the initialisers' values per second (rt_init_values);
 *  - libdeflate inflating a csr matrix's members as save_npz deflates them (a
 *    sparse input's .npz; the cost per element kept is the derived
 *    model's, by the clock);
 *  - a sparse kernel's gathers of dense rows (sparse_rates);
 *  - with a folder DIR (trac gives its cache's): a 16 MiB file read back
 *    from the page cache into memory touched already (the cost model adds
 *    a read's first touch at the rate above, as any op's), whole and half
 *    of it in 8 KiB pieces (the cost of a read call), and
 *    written as trac writes an output (fsync, rename, the folder's fsync),
 *    16 MiB and 1 MiB for the write's bandwidth (the line through the two
 *    medians) and 4 KiB for its latency (in wall seconds, the disk's).
 * Computation is timed in this thread's CPU seconds (the machine may be
 * shared; wall time would count others' slices), the least of five: what
 * another job costs us is still counted where a virtual machine's host
 * runs another guest on our core, and slows, never speeds, a run; the
 * gemm products take turns, five rounds of every block, so that a busy
 * spell of the host's slows one round of each, not every round of one
 * block (on this 2-core Zen 4, one calibration of three took medians of
 * 51-56 GFLOP/s at b64-b256 where the others had 92-106, and the plans
 * of every gemm example 1.5-1.7x slower).  Memory new to the process and
 * the files are timed in wall seconds (the kernel's and a virtual
 * machine's host's time is no CPU time of ours), the median of five and
 * of three.  It lives in runtime/
 * because it links libtracrt, which the compiler does not.
 */
#define _GNU_SOURCE                     /* MAP_ANONYMOUS */
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>

#include "rt.h"

#define REPS 5                  /* computation's and first touch's */
#define FILE_REPS 3             /* the files': 16 MiB written and fsynced each */

static double clock_of(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *t, int n)
{
	qsort(t, (size_t)n, sizeof *t, cmp_double);
	return t[n / 2];
}

static double least(const double *t, int n)
{
	double m = t[0];
	for (int i = 1; i < n; i++)
		m = t[i] < m ? t[i] : m;
	return m;
}

static void *alloc(size_t n)
{
	void *p = NULL;
	if (posix_memalign(&p, 64, n ? n : 1)) {
		fprintf(stderr, "trac-calibrate: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	memset(p, 0, n);
	return p;
}

/* An n x n x n product of b x b chunks, n = max(b, 256), separately
 * allocated, in f32 or f64. */
typedef struct Product {
	int f64, b, n, f;
	char **A, **B, **C;             /* f x f chunks each */
} Product;

static void product_make(Product *p, int f64, int b)
{
	p->f64 = f64;
	p->b = b;
	p->n = b < 256 ? 256 : b;
	p->f = p->n / b;
	int f = p->f;
	size_t cb = (f64 ? 8 : 4) * (size_t)b * (size_t)b;
	p->A = alloc(sizeof *p->A * (size_t)(f * f) * 3);
	p->B = p->A + f * f;
	p->C = p->B + f * f;
	for (int i = 0; i < f * f; i++) {
		p->A[i] = alloc(cb);
		p->B[i] = alloc(cb);
		p->C[i] = alloc(cb);
		for (size_t e = 0; e < (size_t)b * (size_t)b; e++)
			if (f64) {
				((double *)p->A[i])[e] = 1e-3 * (double)(e % 7);
				((double *)p->B[i])[e] = 1e-3 * (double)(e % 5);
			} else {
				((float *)p->A[i])[e] = 1e-3f * (float)(e % 7);
				((float *)p->B[i])[e] = 1e-3f * (float)(e % 5);
			}
	}
}

static void product_free(Product *p)
{
	for (int i = 0; i < p->f * p->f; i++) {
		free(p->A[i]);
		free(p->B[i]);
		free(p->C[i]);
	}
	free(p->A);
}

/* CPU seconds of one product, accumulating into each output chunk as
 * trac's fused join does. */
static double product_time(const Product *p)
{
	int b = p->b, f = p->f;
	double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
	for (int i = 0; i < f; i++)
		for (int k = 0; k < f; k++)
			for (int j = 0; j < f; j++) {
				if (p->f64)
					trt_dgemm(b, b, b, 1, (double *)p->A[i * f + k], b, 1, (double *)p->B[k * f + j], b, 1,
					          k ? 1 : 0, (double *)p->C[i * f + j], b, 1);
				else
					trt_sgemm(b, b, b, 1, (float *)p->A[i * f + k], b, 1, (float *)p->B[k * f + j], b, 1,
					          k ? 1 : 0, (float *)p->C[i * f + j], b, 1);
			}
	return clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
}

static void gemm_rates(void)
{
	static const int blocks[] = {32, 64, 128, 256, 512, 1024};
	enum { NB = sizeof blocks / sizeof *blocks };
	Product p[NB][2];
	double t[NB][2][REPS];
	for (int i = 0; i < NB; i++)
		for (int f64 = 0; f64 < 2; f64++)
			product_make(&p[i][f64], f64, blocks[i]);
	for (int r = 0; r < REPS; r++)
		for (int i = 0; i < NB; i++)
			for (int f64 = 0; f64 < 2; f64++) {
				product_time(&p[i][f64]);       /* its chunks and BLIS's buffers warm, as in a join's calls */
				t[i][f64][r] = product_time(&p[i][f64]);
			}
	for (int i = 0; i < NB; i++)
		for (int f64 = 0; f64 < 2; f64++) {
			double n = p[i][f64].n;
			printf("gemm_%s_gflops_b%d=%.4g\n", f64 ? "f64" : "f32", blocks[i],
			       2.0 * n * n * n / least(t[i][f64], REPS) / 1e9);
			product_free(&p[i][f64]);
		}
}

static void memory_rates(void)
{
	size_t n = (size_t)64 << 20;
	char *a = alloc(n), *b = alloc(n);
	double t[REPS];
	for (int r = 0; r < REPS; r++) {
		double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
		memcpy(b, a, n);
		t[r] = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	printf("memcpy_bandwidth_Bps=%.4g\n", (double)n / least(t, REPS));
	free(a);
	free(b);
	/* memory new to the process: mappings kept until all are made, so
	 * none reuses pages another handed back, faulted in as the runtime's
	 * chunks are (runtime/rel.c) */
	char *keep[REPS];
	for (int r = 0; r < REPS; r++) {
		keep[r] = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (keep[r] == MAP_FAILED)
			exit(1);
		double t0 = clock_of(CLOCK_MONOTONIC);
#ifdef MADV_POPULATE_WRITE
		madvise(keep[r], n, MADV_POPULATE_WRITE);      /* as rel.c's map_big */
#endif
		memset(keep[r], 1, n);
		t[r] = clock_of(CLOCK_MONOTONIC) - t0;
	}
	for (int r = 0; r < REPS; r++)
		munmap(keep[r], n);
	printf("first_touch_cold_bandwidth_Bps=%.4g\n", (double)n / median(t, REPS));
}

/* A fused elementwise kernel as trac generates one: out = x * y + x. */
static void __attribute__((noinline)) fused_f32(const float *restrict x, const float *restrict y,
                                                float *restrict o, long n)
{
	for (long i = 0; i < n; i++)
		o[i] = x[i] * y[i] + x[i];
}

static void loop_rates(void)
{
	long n = 1L << 20;
	int64_t m = (int64_t)1 << 22;   /* o also takes the initialisers' values */
	float *x = alloc(sizeof *x * (size_t)n), *y = alloc(sizeof *y * (size_t)n), *o = alloc(sizeof *o * (size_t)m);
	double t[REPS];
	for (int r = 0; r < REPS; r++) {
		double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
		for (int k = 0; k < 10; k++)
			fused_f32(x, y, o, n);
		t[r] = (clock_of(CLOCK_THREAD_CPUTIME_ID) - t0) / 10;
	}
	printf("loop_rate_flops=%.4g\n", 2.0 * (double)n / least(t, REPS));
	for (int k = 0; k < 2; k++) {
		for (int r = 0; r < REPS; r++) {
			double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
			rt_init_values(k ? TRT_INIT_NORMAL : TRT_INIT_UNIFORM, 0, 1, 7, 0, m, TRT_F32, o);
			t[r] = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
		}
		printf("init_%s_per_s=%.4g\n", k ? "normal" : "uniform", (double)m / least(t, REPS));
	}
	free(x);
	free(y);
	free(o);
}

/*
 * A kernel over a sparse input's compressed rows, as codegen emits the
 * product A[i, j] H[j, c] (codegen/sparse.c: each stored element's row of
 * H gathered at its column and added into the output's row, H's rows 16
 * elements ahead prefetched): H of 32768 rows of w floats (2 and 6 MiB,
 * beyond a core's L1 and L2, as the arxiv-size GCN's 21168 x 20-64 are),
 * 8192 rows of A with 32 elements at random columns, four passes.  Seconds an element
 * at w = 16 and 48 (one and three cache lines a row): the slope of the
 * line through them is what a line gathered costs (sparse_gather_Bps, its
 * bytes a second; 17-29e9 here, 3.0-4.2 ns an element at w = 16, 7.3-11.6
 * at 48).  What an element costs beside (the line's intercept, 0.5-1.3 ns
 * in five calibrations) is left to the derived model: too noisy a
 * difference of two small numbers.
 */
static void __attribute__((noinline)) csr_rows(const int64_t *restrict rp, const int64_t *restrict ci,
                                               const float *restrict a, const float *restrict h,
                                               float *restrict y, int64_t rows, int64_t w)
{
	for (int64_t i = 0; i < rows; i++)
		for (int64_t q = rp[i]; q < rp[i + 1]; q++) {
			int64_t j = ci[q];
			if (q + 16 < rp[rows])
				for (int64_t f = 0; f < w; f += 16)
					__builtin_prefetch(h + ci[q + 16] * w + f, 0, 3);
			for (int64_t c = 0; c < w; c++)
				y[i * w + c] += a[q] * h[j * w + c];
		}
}

static void sparse_rates(void)
{
	enum { HROWS = 32768, ROWS = 8192, PER = 32, N = ROWS * PER, PASSES = 4 };
	int64_t *rp = alloc(sizeof *rp * (ROWS + 1)), *ci = alloc(sizeof *ci * N);
	float *a = alloc(sizeof *a * N), *h = alloc(sizeof *h * HROWS * 48), *y = alloc(sizeof *y * ROWS * 48);
	uint32_t x = 12345;
	for (int i = 0; i <= ROWS; i++)
		rp[i] = (int64_t)i * PER;
	for (int q = 0; q < N; q++) {
		x = x * 1664525u + 1013904223u;
		ci[q] = (x >> 8) % HROWS;
		a[q] = 1e-3f;
	}
	double t[2][REPS], per[2];
	for (int r = 0; r < REPS; r++)          /* in rounds, as the gemm products */
		for (int k = 0; k < 2; k++) {
			double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
			for (int pass = 0; pass < PASSES; pass++)
				csr_rows(rp, ci, a, h, y, ROWS, k ? 48 : 16);
			t[k][r] = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
		}
	for (int k = 0; k < 2; k++)
		per[k] = least(t[k], REPS) / PASSES / N;
	double line = (per[1] - per[0]) / 2;
	if (line > 0)
		printf("sparse_gather_Bps=%.4g\n", 64 / line);
	free(rp);
	free(ci);
	free(a);
	free(h);
	free(y);
}

/* Inflating a .npz's deflated members (runtime/zip.c: raw deflate, a
 * member of at most 256 MiB whole by libdeflate, then its CRC-32; a bigger
 * one, or any under a memory budget, through zlib's stream): a csr
 * matrix's indices.npy and data.npy as scipy's save_npz deflates them
 * (zlib's default level), 512k elements in rows of 1-64, columns
 * increasing by gaps of 1-4096 and values 1/sqrt of the row's length (a
 * normalised adjacency's); bytes out per CPU second. */
static void inflate_rate(void)
{
	size_t n = (size_t)1 << 19, raw = n * 8;
	unsigned char *src = alloc(raw);
	uLong cap = compressBound((uLong)raw);
	unsigned char *z = alloc(cap);
	int32_t *ind = (int32_t *)src;
	float *val = (float *)(src + n * 4);
	uint32_t x = 12345;
	for (size_t i = 0; i < n;) {
		x = x * 1664525u + 1013904223u;
		size_t len = 1 + (x >> 26), at = 0;
		for (size_t k = 0; k < len && i < n; k++, i++) {
			x = x * 1664525u + 1013904223u;
			at += 1 + (x >> 20);
			ind[i] = (int32_t)at;
			val[i] = 1.0f / sqrtf((float)len);
		}
	}
	z_stream d = {0};
	bool ok = deflateInit2(&d, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK;
	d.next_in = src;
	d.avail_in = (uInt)raw;
	d.next_out = z;
	d.avail_out = (uInt)cap;
	ok = ok && deflate(&d, Z_FINISH) == Z_STREAM_END;
	uLong zlen = d.total_out;
	deflateEnd(&d);
	double t[REPS];
	unsigned char *whole = alloc(raw);
	struct libdeflate_decompressor *dd = libdeflate_alloc_decompressor();
	uint32_t want = (uint32_t)crc32(0, src, (uInt)raw);
	ok = ok && dd;
	for (int r = 0; ok && r < REPS; r++) {
		size_t got = 0;
		double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
		ok = libdeflate_deflate_decompress(dd, z, zlen, whole, raw, &got) == LIBDEFLATE_SUCCESS &&
		     got == raw && libdeflate_crc32(0, whole, raw) == want;
		t[r] = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	if (dd)
		libdeflate_free_decompressor(dd);
	if (ok)
		printf("npz_inflate_Bps=%.4g\n", (double)raw / least(t, REPS));
	/* the same through zlib's stream, with its CRC, as a member too big to
	 * hold whole (or any under a memory budget) is read */
	for (int r = 0; ok && r < REPS; r++) {
		z_stream i = {0};
		double t0 = clock_of(CLOCK_THREAD_CPUTIME_ID);
		ok = inflateInit2(&i, -MAX_WBITS) == Z_OK;
		i.next_in = z;
		i.avail_in = (uInt)zlen;
		i.next_out = whole;
		i.avail_out = (uInt)raw;
		ok = ok && inflate(&i, Z_FINISH) == Z_STREAM_END && i.total_out == raw &&
		     (uint32_t)crc32(0, whole, (uInt)raw) == want;
		inflateEnd(&i);
		t[r] = clock_of(CLOCK_THREAD_CPUTIME_ID) - t0;
	}
	if (ok)
		printf("npz_zlib_Bps=%.4g\n", (double)raw / least(t, REPS));
	free(whole);
	free(src);
	free(z);
}

/* Seconds to write n bytes to path as trac writes an output (runtime/
 * write.c): a temporary file, fsync, renamed over path, the folder's
 * fsync; a negative number when it cannot. */
static double write_file(const char *dir, const char *path, const char *buf, size_t n)
{
	char tmp[4200];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	double t0 = clock_of(CLOCK_MONOTONIC);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	bool ok = fd >= 0;
	for (size_t at = 0; ok && at < n;) {
		ssize_t w = write(fd, buf + at, n - at);
		ok = w > 0;
		at += ok ? (size_t)w : 0;
	}
	ok = ok && !fsync(fd);
	ok = fd >= 0 && !close(fd) && ok;
	ok = ok && !rename(tmp, path);
	int d = open(dir, O_RDONLY | O_DIRECTORY);
	if (d >= 0) {
		fsync(d);
		close(d);
	}
	if (!ok)
		remove(tmp);
	return ok ? clock_of(CLOCK_MONOTONIC) - t0 : -1;
}

enum { PIECE = 8 << 10 };

static void file_rates(const char *dir)
{
	size_t n = (size_t)16 << 20, small = (size_t)1 << 20;
	char path[4096], mpath[4200], spath[4200];
	snprintf(path, sizeof path, "%s/trac-calibrate.%d", dir, (int)getpid());
	snprintf(mpath, sizeof mpath, "%s.1m", path);
	snprintf(spath, sizeof spath, "%s.small", path);
	char *buf = alloc(n);
	memset(buf, 1, n);
	double tw[FILE_REPS], ts[FILE_REPS], tr[FILE_REPS], tl[FILE_REPS], tp[FILE_REPS];
	/* each size written over a file of its own size, as an output
	 * replaces its last run's: the first of each untimed */
	bool ok = write_file(dir, spath, buf, 4096) > 0 && write_file(dir, mpath, buf, small) > 0 &&
	          write_file(dir, path, buf, n) > 0;
	for (int r = 0; ok && r < FILE_REPS; r++) {
		tl[r] = write_file(dir, spath, buf, 4096);
		ts[r] = write_file(dir, mpath, buf, small);
		tw[r] = write_file(dir, path, buf, n);
		/* read back from the page cache into memory touched already:
		 * the cost model adds a read's first touch (touch_bw) */
		char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p != MAP_FAILED)
			memset(p, 0, n);
		int fd = open(path, O_RDONLY);
		double t0 = clock_of(CLOCK_MONOTONIC);
		ok = tl[r] > 0 && tw[r] > 0 && ts[r] > 0 && p != MAP_FAILED && fd >= 0 && read(fd, p, n) == (ssize_t)n;
		tr[r] = clock_of(CLOCK_MONOTONIC) - t0;
		/* half the file in PIECE-byte pieces a gap apart, one pread
		 * each, as trt_read reads a rank's share of a file split along a
		 * later dim (bench/calibrate's measure): the cost of a call */
		t0 = clock_of(CLOCK_MONOTONIC);
		for (size_t at = 0; ok && at < n / 2; at += PIECE)
			ok = pread(fd, p + at, PIECE, (off_t)(2 * at)) == (ssize_t)PIECE;
		tp[r] = clock_of(CLOCK_MONOTONIC) - t0;
		if (fd >= 0)
			close(fd);
		if (p != MAP_FAILED)
			munmap(p, n);
	}
	remove(path);
	remove(mpath);
	remove(spath);
	free(buf);
	if (!ok)
		return;
	/* the bandwidth: the line through (1 MiB, ts) and (16 MiB, tw); the
	 * latency: a 4 KiB output's whole write (a line's intercept from
	 * 1 MiB put it at 57 ms at load 4, where a small output's write
	 * took 0.5-7 ms: fsync's time grows with what it flushes).  Each
	 * over a file of its own size: renamed over the 16 MiB file the 4 KiB
	 * write took 8.0-8.6 ms here, freeing that file's blocks, against
	 * 0.4-1.2 ms over a small one; and the 1 MiB write, while it went
	 * over the 16 MiB file, put the bandwidth at 2.0e9 B/s, where a 3.8
	 * MB output (conv3d's Y) was fsynced at 0.7e9 */
	double w = median(tw, FILE_REPS), s = median(ts, FILE_REPS), bw = w > s ? (double)(n - small) / (w - s) : (double)n / w;
	double lat = median(tl, FILE_REPS) - 4096.0 / bw;
	double call = (median(tp, FILE_REPS) - median(tr, FILE_REPS) / 2) / (double)(n / 2 / PIECE);
	printf("file_read_bandwidth_Bps=%.4g\n", (double)n / median(tr, FILE_REPS));
	printf("file_read_call_s=%.3g\n", call > 0 ? call : 0);
	printf("file_write_bandwidth_Bps=%.4g\n", bw);
	printf("file_write_latency_s=%.3g\n", lat > 0 ? lat : 0);
}

int main(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: trac-calibrate [DIR] > model  (trac runs it; trac(1), --machine)\n");
		return 2;
	}
	rt_blas_init();                 /* BLIS as the runtime sets it up: one thread, its paths */
	printf("# trac-calibrate: the quick calibration (BLIS %s)\n", rt_blas_arch());
	memory_rates();
	loop_rates();
	inflate_rate();
	sparse_rates();
	gemm_rates();
	if (argc == 2)
		file_rates(argv[1]);
	return fflush(stdout) || ferror(stdout);
}
