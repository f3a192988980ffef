/*
 * spmm_lib.c: the sparse kernels of issue 13 run by the libraries trac was
 * measured against (bench/spmm.py drives it; bench/README.md has the table).
 *
 *     spmm_lib DIR LIB THREADS REPS
 *
 * DIR holds raw little-endian files written by spmm.py: indptr.i64,
 * indices.i64, data.f32 (the csr matrix A, n x n), X.f32 (n x d, row-major),
 * U.f32 and W.f32 (n x k, row-major) and meta.txt ("n d k nnz").  LIB is
 * graphblas or rsb.  For each kernel it prints one line
 *
 *     KERNEL SECONDS CHECKSUM
 *
 * with the median of REPS timed calls (the matrices are built once,
 * outside the timing):
 *     spmm     Y = A X         (n x d)
 *     spmmT    Y = A^T X       (the backward pass's orientation)
 *     sddmm    S = A .* (U W^T) at A's pattern (GraphBLAS only: a masked
 *              mxm, then times A; librsb has no sampled product)
 * The checksum is the sum of the result's elements, which spmm.py compares
 * with scipy's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <GraphBLAS.h>
#include <rsb.h>

static int64_t n, d, k, nnz;
static int64_t *indptr, *indices;
static float *data, *X, *U, *W;

static void *slurp(const char *dir, const char *name, size_t bytes)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	void *p = malloc(bytes ? bytes : 1);
	if (!p || fread(p, 1, bytes, f) != bytes) {
		fprintf(stderr, "%s: short read\n", path);
		exit(1);
	}
	fclose(f);
	return p;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *t, int reps)
{
	qsort(t, reps, sizeof *t, cmp_double);
	return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

static double sum(const float *v, int64_t len)
{
	double s = 0;
	for (int64_t i = 0; i < len; i++)
		s += v[i];
	return s;
}

#define CHECK(call) do { GrB_Info info_ = (call); \
	if (info_ != GrB_SUCCESS) { fprintf(stderr, "%s: GraphBLAS error %d\n", #call, (int)info_); exit(1); } } while (0)

/* a dense n x m row-major float matrix as a full GraphBLAS matrix (a copy) */
static GrB_Matrix grb_dense(const float *v, int64_t rows, int64_t cols)
{
	GrB_Matrix m;
	size_t bytes = (size_t)rows * cols * sizeof(float);
	void *copy = malloc(bytes);
	memcpy(copy, v, bytes);
	CHECK(GxB_Matrix_import_FullR(&m, GrB_FP32, rows, cols, &copy, bytes, false, NULL));
	return m;
}

static double grb_sum(GrB_Matrix m)
{
	float s = 0;
	CHECK(GrB_Matrix_reduce_FP32(&s, NULL, GrB_PLUS_MONOID_FP32, m, NULL));
	return s;
}

static void graphblas(int threads, int reps)
{
	CHECK(GrB_init(GrB_NONBLOCKING));
	CHECK(GxB_Global_Option_set(GxB_NTHREADS, threads));
	GrB_Matrix A, Xm, Um, Wm;
	CHECK(GrB_Matrix_import_FP32(&A, GrB_FP32, n, n, (const GrB_Index *)indptr,
				   (const GrB_Index *)indices, data, n + 1, nnz, nnz, GrB_CSR_FORMAT));
	Xm = grb_dense(X, n, d);
	Um = grb_dense(U, n, k);
	Wm = grb_dense(W, n, k);
	double *t = malloc(reps * sizeof *t);
	struct { const char *name; GrB_Matrix mask, a, b; GrB_Descriptor desc; int64_t cols; } kern[] = {
		{"spmm", NULL, A, Xm, NULL, d},
		{"spmmT", NULL, A, Xm, GrB_DESC_T0, d},
		{"sddmm", A, Um, Wm, GrB_DESC_ST1, n},
	};
	for (size_t i = 0; i < sizeof kern / sizeof kern[0]; i++) {
		double check = 0;
		for (int r = 0; r < reps; r++) {
			GrB_Matrix C;
			CHECK(GrB_Matrix_new(&C, GrB_FP32, n, kern[i].cols));
			double t0 = now();
			CHECK(GrB_mxm(C, kern[i].mask, NULL, GrB_PLUS_TIMES_SEMIRING_FP32, kern[i].a, kern[i].b,
				    kern[i].desc));
			if (kern[i].mask) /* the sampled product times A's values */
				CHECK(GrB_Matrix_eWiseMult_BinaryOp(C, NULL, NULL, GrB_TIMES_FP32, C, A, NULL));
			CHECK(GrB_Matrix_wait(C, GrB_MATERIALIZE));
			t[r] = now() - t0;
			check = grb_sum(C);
			GrB_Matrix_free(&C);
		}
		printf("%s %.6f %.6e\n", kern[i].name, median(t, reps), check);
	}
	free(t);
	GrB_finalize();
}

static void rsb(int threads, int reps)
{
	rsb_err_t err = rsb_lib_init(RSB_NULL_INIT_OPTIONS);
	if (err != RSB_ERR_NO_ERROR) {
		fprintf(stderr, "rsb_lib_init failed\n");
		exit(1);
	}
	rsb_int_t nt = threads;
	rsb_lib_set_opt(RSB_IO_WANT_EXECUTING_THREADS, &nt);
	/* librsb's indices are int */
	int *rp = malloc((n + 1) * sizeof *rp), *ja = malloc((nnz ? nnz : 1) * sizeof *ja);
	for (int64_t i = 0; i <= n; i++)
		rp[i] = (int)indptr[i];
	for (int64_t q = 0; q < nnz; q++)
		ja[q] = (int)indices[q];
	struct rsb_mtx_t *A = rsb_mtx_alloc_from_csr_const(data, rp, ja, nnz, RSB_NUMERICAL_TYPE_FLOAT, n, n,
							   RSB_DEFAULT_ROW_BLOCKING, RSB_DEFAULT_COL_BLOCKING,
							   RSB_FLAG_NOFLAGS, &err);
	if (!A || err != RSB_ERR_NO_ERROR) {
		fprintf(stderr, "rsb_mtx_alloc_from_csr_const failed\n");
		exit(1);
	}
	float *Y = malloc((size_t)n * d * sizeof *Y), one = 1, zero = 0;
	double *t = malloc(reps * sizeof *t);
	struct { const char *name; rsb_trans_t trans; } kern[] = {
		{"spmm", RSB_TRANSPOSITION_N},
		{"spmmT", RSB_TRANSPOSITION_T},
	};
	for (size_t i = 0; i < sizeof kern / sizeof kern[0]; i++) {
		for (int r = 0; r < reps; r++) {
			double t0 = now();
			err = rsb_spmm(kern[i].trans, &one, A, d, RSB_FLAG_WANT_ROW_MAJOR_ORDER, X, d, &zero, Y, d);
			t[r] = now() - t0;
			if (err != RSB_ERR_NO_ERROR) {
				fprintf(stderr, "rsb_spmm failed\n");
				exit(1);
			}
		}
		printf("%s %.6f %.6e\n", kern[i].name, median(t, reps), sum(Y, n * d));
	}
	rsb_mtx_free(A);
	rsb_lib_exit(RSB_NULL_EXIT_OPTIONS);
	free(t);
	free(Y);
	free(rp);
	free(ja);
}

int main(int argc, char **argv)
{
	if (argc != 5) {
		fprintf(stderr, "usage: spmm_lib DIR graphblas|rsb THREADS REPS\n");
		return 2;
	}
	const char *dir = argv[1];
	char path[4096];
	snprintf(path, sizeof path, "%s/meta.txt", dir);
	FILE *f = fopen(path, "r");
	if (!f || fscanf(f, "%ld %ld %ld %ld", &n, &d, &k, &nnz) != 4) {
		fprintf(stderr, "%s: cannot read n d k nnz\n", path);
		return 1;
	}
	fclose(f);
	indptr = slurp(dir, "indptr.i64", (n + 1) * sizeof *indptr);
	indices = slurp(dir, "indices.i64", nnz * sizeof *indices);
	data = slurp(dir, "data.f32", nnz * sizeof *data);
	X = slurp(dir, "X.f32", n * d * sizeof *X);
	U = slurp(dir, "U.f32", n * k * sizeof *U);
	W = slurp(dir, "W.f32", n * k * sizeof *W);
	int threads = atoi(argv[3]), reps = atoi(argv[4]);
	if (!strcmp(argv[2], "graphblas"))
		graphblas(threads, reps);
	else if (!strcmp(argv[2], "rsb"))
		rsb(threads, reps);
	else {
		fprintf(stderr, "spmm_lib: unknown library '%s'\n", argv[2]);
		return 2;
	}
	return 0;
}
