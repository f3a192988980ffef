/*
 * pdgemm.c: the baseline for trac's matmul on several ranks: ScaLAPACK's
 * pdgemm (C = A B, double) on a P x Q process grid with NB x NB blocks,
 * block-cyclic, the matrices already distributed (as trac's are once read).
 *
 *   mpirun -np P*Q bench/pdgemm M N K P Q NB REPS
 *
 * Prints one line per repetition, the slowest rank's time of the call and
 * the most CPU time a rank spent in it (steadier on a shared machine):
 *
 *   seconds=S cpu=C
 *
 * The BLAS under ScaLAPACK is whatever libblas.so.3 resolves to; bench.py
 * runs it on BLIS with the runtime's skx kernels (LD_LIBRARY_PATH to BLIS's
 * libblas, BLIS_ARCH_TYPE=0) and on OpenBLAS, and keeps the faster.
 * Debian: apt-get install libscalapack-openmpi-dev.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <mpi.h>

/* BLACS and ScaLAPACK have no C header in Debian: their Fortran symbols. */
void Cblacs_pinfo(int *me, int *np);
void Cblacs_get(int ctxt, int what, int *val);
void Cblacs_gridinit(int *ctxt, const char *order, int nprow, int npcol);
void Cblacs_gridinfo(int ctxt, int *nprow, int *npcol, int *myrow, int *mycol);
void Cblacs_gridexit(int ctxt);
int numroc_(const int *n, const int *nb, const int *iproc, const int *isrc, const int *nprocs);
void descinit_(int *desc, const int *m, const int *n, const int *mb, const int *nb,
               const int *irsrc, const int *icsrc, const int *ctxt, const int *lld, int *info);
void pdgemm_(const char *ta, const char *tb, const int *m, const int *n, const int *k,
             const double *alpha, const double *a, const int *ia, const int *ja, const int *desca,
             const double *b, const int *ib, const int *jb, const int *descb, const double *beta,
             double *c, const int *ic, const int *jc, const int *descc);

/* A local block-cyclic piece of an r x c matrix, filled with values in [0, 1). */
static double *local(int r, int c, int nb, int myrow, int mycol, int nprow, int npcol,
                     int ctxt, int *desc)
{
	int zero = 0, info;
	int lr = numroc_(&r, &nb, &myrow, &zero, &nprow);
	int lc = numroc_(&c, &nb, &mycol, &zero, &npcol);
	int lld = lr > 1 ? lr : 1;
	double *p = malloc(sizeof *p * (size_t)lld * (size_t)(lc > 1 ? lc : 1));
	if (!p) {
		fprintf(stderr, "pdgemm: out of memory\n");
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	for (long i = 0; i < (long)lld * lc; i++)
		p[i] = (double)((i * 2654435761u) % 1000) / 1000.0;
	descinit_(desc, &r, &c, &nb, &nb, &zero, &zero, &ctxt, &lld, &info);
	if (info) {
		fprintf(stderr, "pdgemm: descinit failed (%d)\n", info);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	if (argc != 8) {
		fprintf(stderr, "usage: pdgemm M N K P Q NB REPS\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	int m = atoi(argv[1]), n = atoi(argv[2]), k = atoi(argv[3]);
	int nprow = atoi(argv[4]), npcol = atoi(argv[5]), nb = atoi(argv[6]);
	int reps = atoi(argv[7]);
	int me, np, ctxt, myrow, mycol;

	Cblacs_pinfo(&me, &np);
	if (np != nprow * npcol) {
		fprintf(stderr, "pdgemm: %d ranks for a %d x %d grid\n", np, nprow, npcol);
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	Cblacs_get(0, 0, &ctxt);
	Cblacs_gridinit(&ctxt, "Row", nprow, npcol);
	Cblacs_gridinfo(ctxt, &nprow, &npcol, &myrow, &mycol);

	int da[9], db[9], dc[9], one = 1;
	double *a = local(m, k, nb, myrow, mycol, nprow, npcol, ctxt, da);
	double *b = local(k, n, nb, myrow, mycol, nprow, npcol, ctxt, db);
	double *c = local(m, n, nb, myrow, mycol, nprow, npcol, ctxt, dc);
	double alpha = 1, beta = 0;
	for (int r = 0; r < reps; r++) {
		struct timespec c0, c1;
		MPI_Barrier(MPI_COMM_WORLD);
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
		double t = MPI_Wtime();
		pdgemm_("N", "N", &m, &n, &k, &alpha, a, &one, &one, da, b, &one, &one, db, &beta, c,
		        &one, &one, dc);
		t = MPI_Wtime() - t;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
		double v[2] = { t, (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec) };
		double vmax[2];
		MPI_Reduce(v, vmax, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
		if (me == 0) {
			printf("seconds=%.6f cpu=%.6f\n", vmax[0], vmax[1]);
			fflush(stdout);
		}
	}
	free(a);
	free(b);
	free(c);
	Cblacs_gridexit(ctxt);
	MPI_Finalize();
	return 0;
}
