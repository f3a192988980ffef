/*
 * blas.c: BLIS set-up and the gemm wrappers kernels call.
 *
 * Threads: one BLIS thread per rank unless BLIS_NUM_THREADS says otherwise,
 * since the ranks already fill the cores.
 *
 * Kernels: Debian's BLIS 0.9 picks its `haswell` kernels on Intel's AVX-512
 * CPUs whenever it cannot tell how many FMA units the core has (always so
 * under a hypervisor), and those run about 1.5x slower there than its `skx`
 * ones.  Not on AMD's: on an EPYC with AVX-512 (Zen 4, family 25, whose
 * vector units are 256 bits wide) BLIS picks `zen3`, which ran a 4000^3
 * sgemm at 108 GFLOP/s against skx's 99, and skx has none of BLIS's
 * small-matrix kernels: 64 x 40 x 10584 took 1.18 ms on skx, 0.65 on zen3,
 * and the GCN benchmark's whole process 1.18-1.24 s against 1.12-1.14.
 * BLIS reads BLIS_ARCH_TYPE (a number: the arch_t enum value, BLIS_ARCH_SKX
 * is 0; a name such as "haswell" is read as 0 too) once, inside bli_init, so
 * rt_blas_init sets it before calling bli_init:
 *
 *   TRAC_BLIS_ARCH unset or "auto"  skx if the CPU is Intel's with AVX-512 F,
 *                                   DQ, CD, BW and VL, this BLIS has skx
 *                                   kernels, and BLIS_ARCH_TYPE is unset;
 *                                   else BLIS's pick
 *   TRAC_BLIS_ARCH=native           BLIS's own pick (or BLIS_ARCH_TYPE's)
 *   TRAC_BLIS_ARCH=skx, =3, ...     that sub-configuration, by name or number
 */
#define _POSIX_C_SOURCE 200809L        /* pread, posix_memalign, mkstemp, setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blis.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "rt.h"

static int intel_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_cpu_init();
	return __builtin_cpu_is("intel") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
	       __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl");
#else
	return 0;
#endif
}

/* The arch_t of a name or number, or -1. */
static int arch_id(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s && !*end)
		return v >= 0 && v < BLIS_NUM_ARCHS ? (int)v : -1;
	for (int i = 0; i < BLIS_NUM_ARCHS; i++)
		if (!strcmp(s, bli_arch_string((arch_t)i)))
			return i;
	return -1;
}

static void set_arch(int id)
{
	char num[16];

	snprintf(num, sizeof num, "%d", id);
	setenv("BLIS_ARCH_TYPE", num, 1);
}

/* TRAC_GEMM_PATH: which of BLIS's gemm paths calls take (rt_gemm_rntm). */
enum { PATH_UNSET, PATH_AUTO, PATH_BLIS, PATH_PACKED };
static int path;
static rntm_t packed;           /* BLIS's global settings, the small path off */

/* The path a TRAC_GEMM_PATH value names, or -1. */
static int path_of(const char *s)
{
	if (!s || !*s || !strcmp(s, "auto"))
		return PATH_AUTO;
	if (!strcmp(s, "blis"))
		return PATH_BLIS;
	if (!strcmp(s, "packed"))
		return PATH_PACKED;
	return -1;
}

/* After BLIS's thread count is set: packed takes it. */
static void path_init(void)
{
	int p = path_of(getenv("TRAC_GEMM_PATH"));
	path = p < 0 ? PATH_AUTO : p;
	bli_rntm_init_from_global(&packed);
	bli_rntm_disable_l3_sup(&packed);
}

void rt_blas_init(void)
{
	const char *want = getenv("TRAC_BLIS_ARCH");

	if (!want || !*want || !strcmp(want, "auto")) {
#ifdef BLIS_CONFIG_SKX
		if (!getenv("BLIS_ARCH_TYPE") && intel_avx512())
			set_arch(BLIS_ARCH_SKX);
#endif
	} else if (strcmp(want, "native")) {
		int id = arch_id(want);
		if (id < 0) {
			/* The environment is the same on every rank. */
			if (rt.rank == 0)
				fprintf(stderr, "%s: TRAC_BLIS_ARCH=%s: expected auto, native, or a BLIS "
				        "sub-configuration such as skx or haswell\n", rt_progname(), want);
			rt_exit(1);
		}
		set_arch(id);
	}
	bli_init();
	if (!getenv("BLIS_NUM_THREADS"))
		bli_thread_set_num_threads(1);
	if (path_of(getenv("TRAC_GEMM_PATH")) < 0) {
		if (rt.rank == 0)
			fprintf(stderr, "%s: TRAC_GEMM_PATH=%s: expected auto, blis or packed\n", rt_progname(),
			        getenv("TRAC_GEMM_PATH"));
		rt_exit(1);
	}
	path_init();
}

const char *rt_blas_arch(void)
{
	return bli_arch_string(bli_arch_query_id());
}

int rt_blas_threads(void)
{
	return (int)bli_thread_get_num_threads();
}

/*
 * BLIS checks a matrix's strides (bli_check_matrix_strides) and rejects
 * some that are harmless: a dimension of length 1 has no stride that
 * matters, yet rs == cs == 1 is refused for a 2 x 1 matrix, as is a row
 * stride below n * cs.  Kernels pass the strides of the chunk dims they
 * view, which for a missing role (a matrix-vector product) or an edge chunk
 * one element long may be such values, so a dimension of length 1 gets the
 * stride a dense matrix would have there.
 */
static void fix_strides(int64_t rows, int64_t cols, int64_t *rs, int64_t *cs)
{
	if (rows == 1 && cols == 1) {
		*rs = *cs = 1;
	} else if (rows == 1) {
		*rs = cols * *cs;
	} else if (cols == 1) {
		*cs = rows * *rs;
	}
}

/* A product into a column-major C as the row-major C^T = B^T A^T: the
 * operands, their extents and strides swapped, C's row stride csc.  One
 * definition per element type. */
#define AS_TRANSPOSE(name, T)                                                   \
	static void name(int64_t *m, int64_t *n, const T **a, int64_t *rsa, int64_t *csa, \
	                 const T **b, int64_t *rsb, int64_t *csb, int64_t *rsc, int64_t csc) \
	{                                                                       \
		int64_t t;                                                      \
		const T *x = *a;                                                \
		*a = *b, *b = x;                                                \
		t = *m, *m = *n, *n = t;                                        \
		t = *rsa, *rsa = *csb, *csb = t;                                \
		t = *csa, *csa = *rsb, *rsb = t;                                \
		*rsc = csc;                                                     \
	}
AS_TRANSPOSE(as_transpose, float)
AS_TRANSPOSE(as_transpose_d, double)
#undef AS_TRANSPOSE

/*
 * B's rows a multiple of 4 KiB apart (a chunk whose inner dims are powers
 * of two times a little, Tucker's 48 x 96 x 96 floats) share cache sets,
 * and BLIS's packing of B misses on every row: 96 x 442368 x 96 runs at
 * 0.55 of the speed it has with the rows 16 floats further apart (bench/
 * README.md, "Thin gemms").  When B is reused little (m < UNALIAS_M) and
 * large, the product goes in panels of UNALIAS_N columns, each panel of B
 * copied first to rows UNALIAS_PAD elements longer: a copy of B in pieces
 * that stay in cache, and no scratch the size of B.
 */
enum { UNALIAS_M = 512, UNALIAS_N = 4096, UNALIAS_PAD = 16 };

static void *scratch;
static size_t scratch_cap;

static void *scratch_get(size_t bytes)
{
	if (bytes > scratch_cap) {
		free(scratch);
		scratch = NULL;
		if (posix_memalign(&scratch, 64, bytes) != 0)
			rt_oom(bytes, "gemm scratch");
		scratch_cap = bytes;
	}
	return scratch;
}

static int aliased(int64_t m, int64_t k, int64_t n, int64_t rsb, int64_t csb, size_t size)
{
	int64_t ld = rsb > csb ? rsb : csb, unit = rsb < csb ? rsb : csb;
	return m < UNALIAS_M && n > UNALIAS_N && unit == 1 && k > 1 && ((size_t)ld * size) % 4096 == 0 &&
	       (size_t)k * (size_t)n * size >= ((size_t)1 << 22);
}

/*
 * BLIS's path for a call.  Below its thresholds (on zen3 f32 m < 512, n <
 * 200 or k < 240; f64 256, 256, 220) BLIS 0.9 takes its small/unpacked
 * ("sup") kernels, which pay off only on small or very thin calls: a
 * 500 x 334 x 1000 sgemm, the chunk a 2-rank 4000^3 plan makes, runs at
 * 57 GFLOP/s there and at 72 packed; 96 x 442368 x 96 at 25 against 51;
 * 1000 x 1000 x 64 at 41 against 67; 100^3 at 70 against 47 and 1000 x 32
 * x 1000 at 74 against 56 the other way (bench/README.md, "BLIS's small
 * path").  So a call with every dim at least SUP_DIM and a volume of at
 * least SUP_VOLUME goes packed; any other keeps BLIS's own choice, but
 * for a B by columns under a C by rows (a product with a transposed
 * weight, X W^T, as every layer's backward has), where the small path lost
 * on every shape measured (zen3 kernels on a Zen 4, 2026-11-29: 10584 x
 * 64 x 40 0.96 ms against 0.65 packed, 2000 x 100 x 50 0.39 against 0.24,
 * 4000 x 32 x 64 0.25 against 0.21; B by rows, 10584 x 64 x 40 was 0.49
 * against 0.63 the other way; a small B under a tall C is copied by rows
 * instead, which beat both: rt_gemm_by_rows).  And a small C over a long k (fewer than
 * SMALL_C elements, k at least 4 times its longer side: a weight's
 * gradient over a batch or a graph's rows) keeps BLIS's choice, the small
 * path, which won there (same machine: 128 x 64 x 10584 1.58-1.72 ms
 * against 1.97-2.01 packed, 100 x 100 x 100000 22.4 against 33.7, 64 x 64
 * x 20000 1.84 against 2.09; at 128 x 128 x 50000 packed was 5% faster,
 * at 256 x 256 x 10000 17%): the GCN's dW1 = AX^T dH 0.107 -> 0.073 s.
 * calibrate measures its gemms through the same choice.
 * TRAC_GEMM_PATH=blis leaves every call to BLIS, =packed sends every call
 * packed; unset or "auto", the rule above.
 */
enum { SUP_DIM = 64, SMALL_C = 128 * 128 };
#define SUP_VOLUME (128.0 * 128.0 * 128.0)

void *rt_gemm_rntm(int64_t m, int64_t n, int64_t k, int bcols)
{
	if (path == PATH_UNSET)         /* calibrate calls BLIS without rt_blas_init */
		path_init();
	int64_t side = m > n ? m : n;
	if (path == PATH_BLIS || (path == PATH_AUTO && !bcols &&
	                          (m < SUP_DIM || n < SUP_DIM || k < SUP_DIM ||
	                           (double)m * (double)n * (double)k < SUP_VOLUME ||
	                           ((double)m * (double)n < SMALL_C && k >= 4 * side))))
		return NULL;
	return &packed;
}

/*
 * Short products: k of at most SHORT_K, f32 (a batch's gradient through a
 * 10-class layer, dZ W2^T: 100 x 256 x 10 a call).  BLIS spends most of
 * such a call packing: 100 x 256 x 10 in 42-80 us, where a kernel that
 * keeps six rows of C by 16 columns in registers and streams B's rows
 * takes 6 us, at the FMA rate (two rows by 32 took 7.1: eight sums hide
 * less than an fma's latency; 1000 x 1000 x 8: 1.6-2.7 ms against
 * 0.28-0.39 ms; k = 32 breaks even).  It needs AVX2 and FMA, and C or C^T
 * in rows: a column-major C is computed as C^T = B^T A^T.  B goes in
 * panels of SHORT_N columns, copied first when its rows are not
 * contiguous (pack_b).
 */
enum { SHORT_K = 16, SHORT_N = 4096 };

#if defined(__x86_64__) && defined(__GNUC__)
/* the first r lanes of a mask for maskload and maskstore: from mask_lanes + 8 - r */
static const int32_t mask_lanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1};

/* C[i, j] = sum_p a_i[p] B[p, j] + beta C[i, j], two rows i of C at once:
 * row 0's a_i[p] at ap[p * lda], row 1's at ap[p * lda + 1], already
 * scaled by alpha; B's rows ldb apart.  Every element is the same chain of
 * fmas, p in order from 0, then beta's: the same value whatever its
 * column's place in the blocking, and whichever kernel its row takes. */
__attribute__((target("avx2,fma")))
static void short_rows2(int64_t n, int64_t k, const float *ap, int64_t lda,
                        const float *b, int64_t ldb, float beta, float *c0, float *c1)
{
	int64_t j = 0;
	for (; j + 32 <= n; j += 32) {
		/* named, not arrays: gcc keeps an array of vectors in memory */
		__m256 x0 = _mm256_setzero_ps(), x1 = x0, x2 = x0, x3 = x0;
		__m256 y0 = x0, y1 = x0, y2 = x0, y3 = x0;
		for (int64_t p = 0; p < k; p++) {
			const float *bp = b + p * ldb + j;
			__m256 s = _mm256_broadcast_ss(&ap[p * lda]), t = _mm256_broadcast_ss(&ap[p * lda + 1]);
			__m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
			__m256 b2 = _mm256_loadu_ps(bp + 16), b3 = _mm256_loadu_ps(bp + 24);
			x0 = _mm256_fmadd_ps(s, b0, x0), y0 = _mm256_fmadd_ps(t, b0, y0);
			x1 = _mm256_fmadd_ps(s, b1, x1), y1 = _mm256_fmadd_ps(t, b1, y1);
			x2 = _mm256_fmadd_ps(s, b2, x2), y2 = _mm256_fmadd_ps(t, b2, y2);
			x3 = _mm256_fmadd_ps(s, b3, x3), y3 = _mm256_fmadd_ps(t, b3, y3);
		}
		if (beta != 0) {
			__m256 bb = _mm256_set1_ps(beta);
			x0 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c0 + j), x0);
			x1 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c0 + j + 8), x1);
			x2 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c0 + j + 16), x2);
			x3 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c0 + j + 24), x3);
			y0 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c1 + j), y0);
			y1 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c1 + j + 8), y1);
			y2 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c1 + j + 16), y2);
			y3 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(c1 + j + 24), y3);
		}
		_mm256_storeu_ps(c0 + j, x0), _mm256_storeu_ps(c0 + j + 8, x1);
		_mm256_storeu_ps(c0 + j + 16, x2), _mm256_storeu_ps(c0 + j + 24, x3);
		_mm256_storeu_ps(c1 + j, y0), _mm256_storeu_ps(c1 + j + 8, y1);
		_mm256_storeu_ps(c1 + j + 16, y2), _mm256_storeu_ps(c1 + j + 24, y3);
	}
	/* the last columns 8 at a time, the last few masked: nothing read or
	 * written past column n */
	for (; j < n; j += 8) {
		__m256i mask = _mm256_loadu_si256((const __m256i *)(mask_lanes + 8 - (n - j < 8 ? n - j : 8)));
		__m256 x = _mm256_setzero_ps(), y = x;
		for (int64_t p = 0; p < k; p++) {
			__m256 bv = _mm256_maskload_ps(b + p * ldb + j, mask);
			x = _mm256_fmadd_ps(_mm256_broadcast_ss(&ap[p * lda]), bv, x);
			y = _mm256_fmadd_ps(_mm256_broadcast_ss(&ap[p * lda + 1]), bv, y);
		}
		if (beta != 0) {
			__m256 bb = _mm256_set1_ps(beta);
			x = _mm256_fmadd_ps(bb, _mm256_maskload_ps(c0 + j, mask), x);
			y = _mm256_fmadd_ps(bb, _mm256_maskload_ps(c1 + j, mask), y);
		}
		_mm256_maskstore_ps(c0 + j, mask, x);
		_mm256_maskstore_ps(c1 + j, mask, y);
	}
}

/* The same for six rows of C, rsc apart, by 16 columns: twelve sums in
 * registers, for an fma's latency (5 cycles on zen2) at two a cycle; row
 * r's a_i[p] at ap[p * 6 + r].  Columns past the last 16 go by pairs. */
__attribute__((target("avx2,fma")))
static void short_rows6(int64_t n, int64_t k, const float *ap, const float *b, int64_t ldb,
                        float beta, float *c, int64_t rsc)
{
	int64_t j = 0;
	for (; j + 16 <= n; j += 16) {
		__m256 x0 = _mm256_setzero_ps(), x1 = x0, y0 = x0, y1 = x0, z0 = x0, z1 = x0;
		__m256 u0 = x0, u1 = x0, v0 = x0, v1 = x0, w0 = x0, w1 = x0;
		const float *bp = b + j, *a = ap;
		for (int64_t p = 0; p < k; p++, bp += ldb, a += 6) {
			__m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8), s;
			s = _mm256_broadcast_ss(a);
			x0 = _mm256_fmadd_ps(s, b0, x0), x1 = _mm256_fmadd_ps(s, b1, x1);
			s = _mm256_broadcast_ss(a + 1);
			y0 = _mm256_fmadd_ps(s, b0, y0), y1 = _mm256_fmadd_ps(s, b1, y1);
			s = _mm256_broadcast_ss(a + 2);
			z0 = _mm256_fmadd_ps(s, b0, z0), z1 = _mm256_fmadd_ps(s, b1, z1);
			s = _mm256_broadcast_ss(a + 3);
			u0 = _mm256_fmadd_ps(s, b0, u0), u1 = _mm256_fmadd_ps(s, b1, u1);
			s = _mm256_broadcast_ss(a + 4);
			v0 = _mm256_fmadd_ps(s, b0, v0), v1 = _mm256_fmadd_ps(s, b1, v1);
			s = _mm256_broadcast_ss(a + 5);
			w0 = _mm256_fmadd_ps(s, b0, w0), w1 = _mm256_fmadd_ps(s, b1, w1);
		}
		float *cj = c + j;
		if (beta != 0) {
			__m256 bb = _mm256_set1_ps(beta);
#define BETA(r0, r1, row)                                                                         \
	r0 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(cj + (row) * rsc), r0),                          \
	r1 = _mm256_fmadd_ps(bb, _mm256_loadu_ps(cj + (row) * rsc + 8), r1)
			BETA(x0, x1, 0), BETA(y0, y1, 1), BETA(z0, z1, 2);
			BETA(u0, u1, 3), BETA(v0, v1, 4), BETA(w0, w1, 5);
#undef BETA
		}
		_mm256_storeu_ps(cj, x0), _mm256_storeu_ps(cj + 8, x1);
		_mm256_storeu_ps(cj + rsc, y0), _mm256_storeu_ps(cj + rsc + 8, y1);
		_mm256_storeu_ps(cj + 2 * rsc, z0), _mm256_storeu_ps(cj + 2 * rsc + 8, z1);
		_mm256_storeu_ps(cj + 3 * rsc, u0), _mm256_storeu_ps(cj + 3 * rsc + 8, u1);
		_mm256_storeu_ps(cj + 4 * rsc, v0), _mm256_storeu_ps(cj + 4 * rsc + 8, v1);
		_mm256_storeu_ps(cj + 5 * rsc, w0), _mm256_storeu_ps(cj + 5 * rsc + 8, w1);
	}
	if (j < n)
		for (int r = 0; r < 6; r += 2)
			short_rows2(n - j, k, ap + r, 6, b + j, ldb, beta, c + r * rsc + j, c + (r + 1) * rsc + j);
}

/* C = alpha A B + beta C with C's rows contiguous (rsc apart) and B's too
 * (ldb apart), k <= SHORT_K: rows by six, the rest by pairs; an odd last
 * row goes with itself twice */
__attribute__((target("avx2,fma")))
static void short_gemm_rows(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
                            int64_t rsa, int64_t csa, const float *b, int64_t ldb, float beta,
                            float *c, int64_t rsc)
{
	float ap[6 * SHORT_K];
	int64_t i = 0;

	for (; i + 6 <= m; i += 6) {
		for (int64_t p = 0; p < k; p++)
			for (int r = 0; r < 6; r++)
				ap[p * 6 + r] = alpha * a[(i + r) * rsa + p * csa];
		short_rows6(n, k, ap, b, ldb, beta, c + i * rsc, rsc);
	}
	for (; i < m; i += 2) {
		int64_t i1 = i + 1 < m ? i + 1 : i;
		for (int64_t p = 0; p < k; p++) {
			ap[p * 2] = alpha * a[i * rsa + p * csa];
			ap[p * 2 + 1] = alpha * a[i1 * rsa + p * csa];
		}
		if (i1 == i) {          /* the odd row: its own result, C read once */
			float row[SHORT_N];
			for (int64_t j0 = 0; j0 < n; j0 += SHORT_N) {
				int64_t w = n - j0 < SHORT_N ? n - j0 : SHORT_N;
				float *ci = c + i * rsc + j0;
				memcpy(row, ci, sizeof(float) * (size_t)w);
				short_rows2(w, k, ap, 2, b + j0, ldb, beta, ci, row);
			}
		} else {
			short_rows2(n, k, ap, 2, b, ldb, beta, c + i * rsc, c + i1 * rsc);
		}
	}
}

/* p[x * w + j] = B[x, j] for x < k <= 16, j < w: a panel of B whose
 * rows are not contiguous, in rows.  A B whose columns are (rsb == 1, dZ
 * W2^T's W2^T) goes 8 x 8 at a time, each block transposed in registers:
 * 0.3 us for 10 x 256 where the element loop took 1.1 us.  The thin
 * kernels' B^T is the same call with B's roles swapped (k = n <= 16). */
__attribute__((target("avx2,fma")))
static void pack_b(int64_t w, int64_t k, const float *b, int64_t rsb, int64_t csb, float *p)
{
	int64_t j = 0;
	if (rsb == 1)
		for (; j + 8 <= w; j += 8)
			for (int64_t x0 = 0; x0 < k; x0 += 8) {
				int64_t kr = k - x0 < 8 ? k - x0 : 8;
				__m256i mask = _mm256_loadu_si256((const __m256i *)(mask_lanes + 8 - kr));
				const float *q = b + j * csb + x0;
				__m256 r0 = _mm256_maskload_ps(q, mask), r1 = _mm256_maskload_ps(q + csb, mask);
				__m256 r2 = _mm256_maskload_ps(q + 2 * csb, mask), r3 = _mm256_maskload_ps(q + 3 * csb, mask);
				__m256 r4 = _mm256_maskload_ps(q + 4 * csb, mask), r5 = _mm256_maskload_ps(q + 5 * csb, mask);
				__m256 r6 = _mm256_maskload_ps(q + 6 * csb, mask), r7 = _mm256_maskload_ps(q + 7 * csb, mask);
				__m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
				__m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
				__m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
				__m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
				__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
				__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
				__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
				__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
				__m256 col[8] = {
					_mm256_permute2f128_ps(u0, u4, 0x20), _mm256_permute2f128_ps(u1, u5, 0x20),
					_mm256_permute2f128_ps(u2, u6, 0x20), _mm256_permute2f128_ps(u3, u7, 0x20),
					_mm256_permute2f128_ps(u0, u4, 0x31), _mm256_permute2f128_ps(u1, u5, 0x31),
					_mm256_permute2f128_ps(u2, u6, 0x31), _mm256_permute2f128_ps(u3, u7, 0x31),
				};
				for (int64_t x = 0; x < kr; x++)
					_mm256_storeu_ps(p + (x0 + x) * w + j, col[x]);
			}
	for (int64_t x = 0; x < k; x++)
		for (int64_t jj = j; jj < w; jj++)
			p[x * w + jj] = b[x * rsb + jj * csb];
}

/* Whether this CPU has AVX2 and FMA, which the short and thin kernels
 * need: checked once. */
static int avx2_fma(void)
{
	static int ok = -1;
	if (ok < 0) {
		__builtin_cpu_init();
		ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
	}
	return ok;
}

/* C = alpha A B + beta C by the short kernel, if this call is one it
 * takes; 0 if not (BLIS then) */
static int sgemm_short(int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t rsa, int64_t csa,
                       const float *b, int64_t rsb, int64_t csb, float beta,
                       float *c, int64_t rsc, int64_t csc)
{
	if (!avx2_fma() || k > SHORT_K || (csc != 1 && rsc != 1))
		return 0;
	if (csc != 1)                   /* column-major C: C^T = B^T A^T */
		as_transpose(&m, &n, &a, &rsa, &csa, &b, &rsb, &csb, &rsc, csc);
	if (csb == 1) {
		short_gemm_rows(m, n, k, alpha, a, rsa, csa, b, rsb, beta, c, rsc);
		return 1;
	}
	float *p = scratch_get(sizeof(float) * SHORT_K * SHORT_N);
	for (int64_t j0 = 0; j0 < n; j0 += SHORT_N) {
		int64_t w = n - j0 < SHORT_N ? n - j0 : SHORT_N;
		pack_b(w, k, b + j0 * csb, rsb, csb, p);
		short_gemm_rows(m, w, k, alpha, a, rsa, csa, p, w, beta, c + j0, rsc);
	}
	return 1;
}

/*
 * Thin products: n of at most THIN_N and any k, f32 (a batch through a
 * 10-class layer: mnist_mlp's Z = A W2, 100 x 10 x 256 a call, and dW2 =
 * A^T dZ, 256 x 10 x 100).  BLIS's 16-lane register kernel wastes 6 of its
 * lanes at n = 10 and packs each call; these waste lanes only in the last
 * eight of k (or of m).  Which kernel runs
 * depends on which way A is contiguous:
 *  - A's rows along k (csa == 1): each element is the dot product of a row
 *    of A and a row of B^T (B transposed once a call, 8 x 8 in registers,
 *    unless its columns are contiguous already), two rows of C by up to five
 *    columns in registers, eight lanes of k each, then one tree of sums;
 *  - A's columns (rsa == 1): C^T = B^T A^T, up to six of C^T's n rows by
 *    16 of its m columns in registers over the whole k, A's rows streamed
 *    and B broadcast in place, into scratch a panel of THIN_M rows of C at a
 *    time, then transposed into C 8 x 8 in registers.
 * Every element is the same sums whatever its place in the blocking, as in
 * the short kernel.  BLIS keeps the calls where these are not faster
 * (thin_pays).
 */
enum { THIN_N = 16, THIN_M = 512, DOT_J = 5, OUTER_J = 6, OUTER_K = 128 };

/* r[x] = (r_0[x], ..., r_7[x]): an 8 x 8 block transposed in registers */
__attribute__((target("avx2,fma"), always_inline))
static inline void transpose8(__m256 r[8])
{
	__m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
	__m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
	__m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
	__m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
	__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
	r[0] = _mm256_permute2f128_ps(u0, u4, 0x20), r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
	r[2] = _mm256_permute2f128_ps(u2, u6, 0x20), r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
	r[4] = _mm256_permute2f128_ps(u0, u4, 0x31), r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
	r[6] = _mm256_permute2f128_ps(u2, u6, 0x31), r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* (sum of v0, of v1, of v2, of v3), each by the same tree:
 * ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)) */
__attribute__((target("avx2,fma"), always_inline))
static inline __m128 hsum4(__m256 v0, __m256 v1, __m256 v2, __m256 v3)
{
	__m256 t = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
	return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* C[i, j] = alpha a_i . bt_j + beta C[i, j] for R rows a_i of A (rsa apart)
 * by JW rows bt_j of B^T (ldb apart), both contiguous along k; C's columns
 * contiguous.  R and JW are constants, so the sums stay in registers. */
__attribute__((target("avx2,fma"), always_inline))
static inline void dot_block(const int R, const int JW, int64_t k, float alpha, const float *a,
                             int64_t rsa, const float *bt, int64_t ldb, float beta, float *c,
                             int64_t rsc)
{
	__m256 s[2][DOT_J], x[2], z = _mm256_setzero_ps();
	int64_t p = 0;

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		#pragma GCC unroll 8
		for (int j = 0; j < DOT_J; j++)
			s[r][j] = z;
	for (; p + 8 <= k; p += 8) {
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			x[r] = _mm256_loadu_ps(a + r * rsa + p);
		#pragma GCC unroll 8
		for (int j = 0; j < JW; j++) {
			__m256 y = _mm256_loadu_ps(bt + j * ldb + p);
			__asm__("" : "+x"(y));  /* one load for R fmas: gcc would fold it into each */
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				s[r][j] = _mm256_fmadd_ps(x[r], y, s[r][j]);
		}
	}
	if (p < k) {            /* the last k % 8, masked: zeros past k */
		__m256i mask = _mm256_loadu_si256((const __m256i *)(mask_lanes + 8 - (k - p)));
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			x[r] = _mm256_maskload_ps(a + r * rsa + p, mask);
		#pragma GCC unroll 8
		for (int j = 0; j < JW; j++) {
			__m256 y = _mm256_maskload_ps(bt + j * ldb + p, mask);
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				s[r][j] = _mm256_fmadd_ps(x[r], y, s[r][j]);
		}
	}
	#pragma GCC unroll 8
	for (int r = 0; r < R; r++) {
		float o[8];
		_mm_storeu_ps(o, hsum4(s[r][0], s[r][1], s[r][2], s[r][3]));
		if (JW > 4)
			_mm_storeu_ps(o + 4, hsum4(s[r][4], z, z, z));
		#pragma GCC unroll 8
		for (int j = 0; j < JW; j++) {
			float *cj = c + r * rsc + j;
			*cj = beta != 0 ? fmaf(beta, *cj, alpha * o[j]) : alpha * o[j];
		}
	}
}

typedef void DotFn(int64_t k, float alpha, const float *a, int64_t rsa, const float *bt,
                   int64_t ldb, float beta, float *c, int64_t rsc);
#define DOT(R, JW)                                                                              \
	__attribute__((target("avx2,fma")))                                                     \
	static void dot_##R##_##JW(int64_t k, float alpha, const float *a, int64_t rsa,         \
	                           const float *bt, int64_t ldb, float beta, float *c, int64_t rsc) \
	{                                                                                       \
		dot_block(R, JW, k, alpha, a, rsa, bt, ldb, beta, c, rsc);                      \
	}
DOT(1, 1) DOT(1, 2) DOT(1, 3) DOT(1, 4) DOT(1, 5)
DOT(2, 1) DOT(2, 2) DOT(2, 3) DOT(2, 4) DOT(2, 5)
#undef DOT
static DotFn *const dot_fns[2][DOT_J] = {
	{ dot_1_1, dot_1_2, dot_1_3, dot_1_4, dot_1_5 },
	{ dot_2_1, dot_2_2, dot_2_3, dot_2_4, dot_2_5 },
};

/* C = alpha A B^T... by rows of A and B^T: rows by pairs, columns in as few
 * groups of at most DOT_J as n needs, as even as they go (16: 4 x 4) */
static void thin_dot(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t rsa,
                     const float *bt, int64_t ldb, float beta, float *c, int64_t rsc)
{
	int64_t groups = (n + DOT_J - 1) / DOT_J;

	for (int64_t i = 0; i < m; i += 2) {
		int r = m - i < 2 ? 1 : 2;
		for (int64_t g = 0, j = 0; g < groups; g++) {
			int64_t w = (n - j + (groups - g) - 1) / (groups - g);
			dot_fns[r - 1][w - 1](k, alpha, a + i * rsa, rsa, bt + j * ldb, ldb, beta,
			                      c + i * rsc + j, rsc);
			j += w;
		}
	}
}

/* C[i, j] = T[j, i] + beta C[i, j] for i < m, j < n: T's rows ldt apart,
 * C's rsc apart and its columns contiguous; 8 x 8 blocks transposed in
 * registers, the last columns and rows by elements */
__attribute__((target("avx2,fma")))
static void put_transposed(int64_t m, int64_t n, const float *t, int64_t ldt, float beta,
                           float *c, int64_t rsc)
{
	__m256 bb = _mm256_set1_ps(beta);
	int64_t i = 0, n8 = n - n % 8;

	for (; i + 8 <= m; i += 8)
		for (int64_t j = 0; j < n8; j += 8) {
			__m256 r[8];
			for (int x = 0; x < 8; x++)
				r[x] = _mm256_loadu_ps(t + (j + x) * ldt + i);
			transpose8(r);
			for (int x = 0; x < 8; x++) {
				float *cx = c + (i + x) * rsc + j;
				_mm256_storeu_ps(cx, beta != 0 ? _mm256_fmadd_ps(bb, _mm256_loadu_ps(cx), r[x]) : r[x]);
			}
		}
	for (int64_t ii = 0; ii < m; ii++)
		for (int64_t j = ii < i ? n8 : 0; j < n; j++) {
			float *cx = c + ii * rsc + j;
			*cx = beta != 0 ? fmaf(beta, *cx, t[j * ldt + ii]) : t[j * ldt + ii];
		}
}

/* T[r, i] = alpha sum_p a[p lda + r csa] b[p ldb + i] for r < R, i < w
 * (T's rows ldt apart; a is B, read in place): R rows of C^T by 16 of its columns in registers over the whole
 * k, 2 R sums (five rows for n = 10: ten sums, as many as cover an fma's
 * latency), the last columns 8 at a time, masked.  Every element is one
 * chain of fmas, p in order from 0, wherever the blocking puts it. */
__attribute__((target("avx2,fma"), always_inline))
static inline void outer_block(const int R, int64_t w, int64_t k, float alpha, const float *a,
                               int64_t lda, int64_t csa, const float *b, int64_t ldb, float *t,
                               int64_t ldt, int first, int last)
{
	__m256 z = _mm256_setzero_ps(), al = _mm256_set1_ps(alpha);
	int64_t i = 0, off[OUTER_J];

	#pragma GCC unroll 8
	for (int r = 0; r < R; r++)
		off[r] = r * csa;

	for (; i + 16 <= w; i += 16) {
		__m256 s[OUTER_J][2];
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			s[r][0] = first ? z : _mm256_loadu_ps(t + r * ldt + i);
			s[r][1] = first ? z : _mm256_loadu_ps(t + r * ldt + i + 8);
		}
		const float *bp = b + i, *ap = a;
		for (int64_t p = 0; p < k; p++, bp += ldb, ap += lda) {
			__m256 b0 = _mm256_loadu_ps(bp), b1 = _mm256_loadu_ps(bp + 8);
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++) {
				__m256 x = _mm256_broadcast_ss(ap + off[r]);
				s[r][0] = _mm256_fmadd_ps(x, b0, s[r][0]);
				s[r][1] = _mm256_fmadd_ps(x, b1, s[r][1]);
			}
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++) {
			_mm256_storeu_ps(t + r * ldt + i, last ? _mm256_mul_ps(al, s[r][0]) : s[r][0]);
			_mm256_storeu_ps(t + r * ldt + i + 8, last ? _mm256_mul_ps(al, s[r][1]) : s[r][1]);
		}
	}
	for (; i < w; i += 8) {
		__m256i mask = _mm256_loadu_si256((const __m256i *)(mask_lanes + 8 - (w - i < 8 ? w - i : 8)));
		__m256 s[OUTER_J];
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			s[r] = first ? z : _mm256_maskload_ps(t + r * ldt + i, mask);
		const float *bp = b + i, *ap = a;
		for (int64_t p = 0; p < k; p++, bp += ldb, ap += lda) {
			__m256 bv = _mm256_maskload_ps(bp, mask);
			#pragma GCC unroll 8
			for (int r = 0; r < R; r++)
				s[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(ap + off[r]), bv, s[r]);
		}
		#pragma GCC unroll 8
		for (int r = 0; r < R; r++)
			_mm256_maskstore_ps(t + r * ldt + i, mask, last ? _mm256_mul_ps(al, s[r]) : s[r]);
	}
}

typedef void OuterFn(int64_t w, int64_t k, float alpha, const float *a, int64_t lda,
                     int64_t csa, const float *b, int64_t ldb, float *t, int64_t ldt,
                     int first, int last);
#define OUTER(R)                                                                                \
	__attribute__((target("avx2,fma")))                                                     \
	static void outer_##R(int64_t w, int64_t k, float alpha, const float *a, int64_t lda,   \
	                      int64_t csa, const float *b, int64_t ldb, float *t, int64_t ldt,  \
	                      int first, int last)                                              \
	{                                                                                       \
		outer_block(R, w, k, alpha, a, lda, csa, b, ldb, t, ldt, first, last);          \
	}
OUTER(1) OUTER(2) OUTER(3) OUTER(4) OUTER(5) OUTER(6)
#undef OUTER
static OuterFn *const outer_fns[OUTER_J] = { outer_1, outer_2, outer_3, outer_4, outer_5, outer_6 };

/* C = alpha A B + beta C for A's columns contiguous (rsa == 1, csa apart)
 * and C's (rsc apart): C^T = B^T A^T a panel of THIN_M rows of C at a time,
 * C^T's rows in as few groups of at most OUTER_J as n needs, as even as they
 * go (10: 5 + 5), into scratch t, then transposed into C */
static void thin_outer(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t csa,
                       const float *b, int64_t rsb, int64_t csb, float beta, float *c, int64_t rsc)
{
	int64_t groups = (n + OUTER_J - 1) / OUTER_J;
	float *t = scratch_get(sizeof(float) * (size_t)(n * THIN_M));

	for (int64_t i0 = 0; i0 < m; i0 += THIN_M) {
		int64_t w = m - i0 < THIN_M ? m - i0 : THIN_M;
		for (int64_t p0 = 0; p0 < k; p0 += OUTER_K) {
			int64_t kc = k - p0 < OUTER_K ? k - p0 : OUTER_K;
			for (int64_t g = 0, j = 0; g < groups; g++) {
				int64_t r = (n - j + (groups - g) - 1) / (groups - g);
				outer_fns[r - 1](w, kc, alpha, b + j * csb + p0 * rsb, rsb, csb, a + i0 + p0 * csa, csa,
				                 t + j * w, w, p0 == 0, p0 + kc == k);
				j += r;
			}
		}
		put_transposed(w, n, t, w, beta, c + i0 * rsc, rsc);
	}
}

/*
 * Which calls the thin kernels take, measured against BLIS 0.9 on zen2
 * (bench/README.md, "Roofline"): BLIS's kernels lose lanes only when n is
 * not a multiple of 4, and at n = 8, 12 and 16 keep up or win (1000 x 16 x
 * 256 by rows 0.83 of BLIS's speed here), so those stay BLIS's; n = 4 pays
 * for the dot products only (1.4-4x; by columns 0.6-2.4x).  The dot products
 * need k of 64 or more (at 17, 1000 x 10 rows ran at half of BLIS's speed).
 * A by columns streams k rows of A per 16 of C's rows, in pieces of
 * OUTER_K rows (a stripe's rows then stay within the TLB's reach: 4000 x 7
 * x 256 in 0.53 ms a call against 0.76 whole), k at most 256 (4000 x 10 x
 * 512: 0.70 of BLIS's speed on zen2; on a Zen 4 with BLIS's zen3 kernels,
 * 2026-11-29, pieces of 128 made it 1.72x, but A of 20-40 MB at k of
 * 1000-5000 ran at 0.70-0.90x).  The choice depends on n and k alone, not
 * on m, so that a row of a product takes the kernel the product takes; a
 * row alone with A's k strided (m = 1, csa != 1) is A by columns.
 */
static int thin_pays(int64_t n, int64_t k, int dot)
{
	if (dot)
		return (n % 4 != 0 || n == 4) && k >= 64;
	return n % 4 != 0 && k <= 256;
}

/* C = alpha A B + beta C by a thin kernel, if this call is one they take;
 * 0 if not (BLIS then) */
static int sgemm_thin(int64_t m, int64_t n, int64_t k, float alpha,
                      const float *a, int64_t rsa, int64_t csa,
                      const float *b, int64_t rsb, int64_t csb, float beta,
                      float *c, int64_t rsc, int64_t csc)
{
	if (!avx2_fma() || (csc != 1 && rsc != 1))
		return 0;
	if (csc != 1)                   /* column-major C: C^T = B^T A^T */
		as_transpose(&m, &n, &a, &rsa, &csa, &b, &rsb, &csb, &rsc, csc);
	if (n > THIN_N)
		return 0;
	if (csa == 1 && thin_pays(n, k, 1)) {
		if (rsb == 1) {         /* B^T's rows contiguous: read in place */
			thin_dot(m, n, k, alpha, a, rsa, b, csb, beta, c, rsc);
		} else {
			float *bt = scratch_get(sizeof(float) * (size_t)n * (size_t)k);
			pack_b(k, n, b, csb, rsb, bt);
			thin_dot(m, n, k, alpha, a, rsa, bt, k, beta, c, rsc);
		}
		return 1;
	}
	if ((rsa == 1 || (m == 1 && csa != 1)) && thin_pays(n, k, 0)) {
		thin_outer(m, n, k, alpha, a, csa, b, rsb, csb, beta, c, rsc);
		return 1;
	}
	return 0;
}
#else
static int sgemm_short(int64_t m, int64_t n, int64_t k, float alpha,
                       const float *a, int64_t rsa, int64_t csa,
                       const float *b, int64_t rsb, int64_t csb, float beta,
                       float *c, int64_t rsc, int64_t csc)
{
	(void)m, (void)n, (void)k, (void)alpha, (void)a, (void)rsa, (void)csa;
	(void)b, (void)rsb, (void)csb, (void)beta, (void)c, (void)rsc, (void)csc;
	return 0;               /* no AVX2 kernel on this target: BLIS */
}
#define sgemm_thin sgemm_short
#endif

/*
 * trt_sgemm and trt_dgemm: one definition per element type, since BLIS's
 * calls are typed.  An empty product (k = 0) only scales C, and beta == 0
 * clears C even of NaNs, as BLAS does.
 * A matrix-vector product (n of 1) goes to BLIS's gemv: BLIS 0.9's gemm
 * takes such a call through its small-matrix path, whose skx kernels run
 * 50000 x 50 by a vector in 2.0 ms where gemv takes 0.19 (logreg's X w and
 * X^T g, 100 iterations: 0.68 s of program against 0.24 predicted).  A row
 * vector (m of 1) stays with gemm, so that a row of a product is the row
 * alone, bit for bit, as test_gemm_thin checks.
 * A C by columns goes to BLIS as C^T = B^T A^T, C^T by rows: the path
 * choice (rt_gemm_rntm) was measured on C by rows, and BLIS's small path
 * took a C by columns where the packed one wins (the GCN's dH1 = dZ W2^T,
 * four chunks of 21168 x 64 x 40 from a cold cache, as C^T with W2 by
 * rows: 12.1 ms against 7.9, Zen 4, 2026-11-29).
 */
/* B by columns (each column contiguous) under C by rows: rt_gemm_rntm's bcols */
#define BCOLS(rsb, csb, csc) ((rsb) == 1 && (csb) != 1 && (csc) == 1)

/*
 * A small B by columns under a tall C by rows (a thin layer's backward,
 * dX = dY W^T: the GCN's (A^T dZ) W2^T, 21168 x 64 x 40 a call) is faster
 * copied by rows first, where BLIS's own choice is its small path: that
 * path with B by rows beat the packed one rt_gemm_rntm sends B by columns
 * to (Zen 4, zen3 kernels, 2026-11-29 21:15, medians of 11, the copy
 * included: 21168 x 64 x 40 1.05-1.45 ms against 1.54-2.08, 21168 x 40 x
 * 64 1.78x, 50000 x 50 x 20 1.75x, 4000 x 32 x 64 1.65x, 5000 x 48 x 100
 * 1.31x, 1000 x 250 x 32 1.22x, 2000 x 100 x 50 1.34x).  Not where C is
 * wide or B big (4096 x 1024 x 32 0.61x, 64 x 4096 x 48 0.31x): B of at
 * most BY_ROWS_B elements, m at least 4 n.  Where the packed path would
 * be taken anyway, it packs B itself, and a copy is only more work.
 */
enum { BY_ROWS_B = 128 * 128 };

int rt_gemm_by_rows(int64_t m, int64_t n, int64_t k)
{
	if (k * n > BY_ROWS_B || m < 4 * n || rt_gemm_rntm(m, n, k, 0))   /* sets path the first time */
		return 0;
	return path == PATH_AUTO;
}
#define GEMM(name, T, blis_gemm, blis_gemv, TRANSPOSE, SHORT)                   \
	void name(int64_t m, int64_t n, int64_t k, T alpha,                     \
	          const T *a, int64_t rsa, int64_t csa,                         \
	          const T *b, int64_t rsb, int64_t csb, T beta,                 \
	          T *c, int64_t rsc, int64_t csc)                               \
	{                                                                       \
		if (m <= 0 || n <= 0)                                           \
			return;                                                 \
		if (k <= 0) {                                                   \
			for (int64_t i = 0; i < m; i++)                         \
				for (int64_t j = 0; j < n; j++) {               \
					T *p = c + i * rsc + j * csc;           \
					*p = beta == 0 ? 0 : beta * *p;         \
				}                                               \
			return;                                                 \
		}                                                               \
		fix_strides(m, k, &rsa, &csa);                                  \
		fix_strides(k, n, &rsb, &csb);                                  \
		fix_strides(m, n, &rsc, &csc);                                  \
		if (SHORT)                                                      \
			return;                                                 \
		if (n == 1) {                   /* c = A b */                   \
			blis_gemv(BLIS_NO_TRANSPOSE, BLIS_NO_CONJUGATE, m, k, &alpha, \
			          (T *)a, rsa, csa, (T *)b, rsb, &beta, c, rsc); \
			return;                                                 \
		}                                                               \
		if (rsc == 1 && csc != 1) {     /* C by columns: C^T = B^T A^T */ \
			TRANSPOSE(&m, &n, &a, &rsa, &csa, &b, &rsb, &csb, &rsc, csc); \
			csc = 1;                                                \
		}                                                               \
		int bcols = BCOLS(rsb, csb, csc);                               \
		if (bcols && rt_gemm_by_rows(m, n, k)) { /* B copied by rows */ \
			T *p = scratch_get(sizeof(T) * (size_t)(k * n));        \
			for (int64_t j = 0; j < n; j++)                         \
				for (int64_t x = 0; x < k; x++)                 \
					p[x * n + j] = b[x * rsb + j * csb];    \
			b = p, rsb = n, csb = 1, bcols = 0;                     \
		}                                                               \
		if (!aliased(m, k, n, rsb, csb, sizeof(T))) {                   \
			blis_gemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, n, k, &alpha, \
			          (T *)a, rsa, csa, (T *)b, rsb, csb, &beta, c, rsc, csc, \
			          NULL, rt_gemm_rntm(m, n, k, bcols));          \
			return;                                                 \
		}                                                               \
		/* panels of B copied to unaliased rows (csb == 1) or columns, \
		 * B's layout kept */                                           \
		int64_t nb = UNALIAS_N, ld = csb == 1 ? nb + UNALIAS_PAD : k + UNALIAS_PAD; \
		int64_t prs = csb == 1 ? ld : 1, pcs = csb == 1 ? 1 : ld;     \
		T *p = scratch_get(sizeof(T) * (size_t)(csb == 1 ? k : nb) * (size_t)ld); \
		for (int64_t j0 = 0; j0 < n; j0 += nb) {                        \
			int64_t w = n - j0 < nb ? n - j0 : nb;                  \
			if (csb == 1)                                           \
				for (int64_t i = 0; i < k; i++)                 \
					memcpy(p + i * ld, b + i * rsb + j0, sizeof(T) * (size_t)w); \
			else                                                    \
				for (int64_t j = 0; j < w; j++)                 \
					memcpy(p + j * ld, b + (j0 + j) * csb, sizeof(T) * (size_t)k); \
			blis_gemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, m, w, k, &alpha, \
			          (T *)a, rsa, csa, p, prs, pcs, &beta, c + j0 * csc, rsc, csc, \
			          NULL, rt_gemm_rntm(m, w, k, bcols));          \
		}                                                               \
	}
#define SGEMM_SHORT (sgemm_short(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) || \
                     sgemm_thin(m, n, k, alpha, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc))
GEMM(trt_sgemm, float, bli_sgemm_ex, bli_sgemv, as_transpose, SGEMM_SHORT)
GEMM(trt_dgemm, double, bli_dgemm_ex, bli_dgemv, as_transpose_d, 0)   /* f64 short products: BLIS's */
#undef SGEMM_SHORT
#undef GEMM
