/*
 * profile.c: --profile, the EXPLAIN ANALYZE of a compiled program.
 *
 * trt_op_begin/trt_op_end bracket each IA op; communication adds the bytes it
 * sends to other ranks to rt.sent (always: it is one addition), and the
 * bracket attributes the difference to the op.  At trt_finish the ranks
 * reduce (seconds: max over ranks, bytes: sum) and rank 0 prints one table
 * beside the plan's predictions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static double *op_seconds, *op_bytes;
static int64_t *op_calls;
static double op_t0, op_sent0, t_start;
static int cur_op = -1;

void rt_count_sent(double bytes)
{
	rt.sent += bytes;
}

void rt_profile_init(void)
{
	int n = rt.prog->nops;

	t_start = MPI_Wtime();
	if (!rt.profile)
		return;
	op_seconds = rt_alloc(sizeof *op_seconds * (size_t)(n + 1));
	op_bytes = rt_alloc(sizeof *op_bytes * (size_t)(n + 1));
	op_calls = rt_alloc(sizeof *op_calls * (size_t)(n + 1));
	memset(op_seconds, 0, sizeof *op_seconds * (size_t)(n + 1));
	memset(op_bytes, 0, sizeof *op_bytes * (size_t)(n + 1));
	memset(op_calls, 0, sizeof *op_calls * (size_t)(n + 1));
}

void trt_op_begin(int op)
{
	if (!rt.profile)
		return;
	if (op < 0 || op >= rt.prog->nops || cur_op >= 0)
		rt_bug("trt_op_begin(%d) with %d ops, op %d open", op, rt.prog->nops, cur_op);
	cur_op = op;
	op_sent0 = rt.sent;
	op_t0 = MPI_Wtime();
}

void trt_op_end(int op)
{
	if (!rt.profile)
		return;
	if (op != cur_op)
		rt_bug("trt_op_end(%d) but op %d is open", op, cur_op);
	op_seconds[op] += MPI_Wtime() - op_t0;
	op_bytes[op] += rt.sent - op_sent0;
	op_calls[op]++;
	cur_op = -1;
}

void rt_profile_report(void)
{
	const TrtProgram *prog = rt.prog;
	int n = prog ? prog->nops : 0;

	if (!rt.profile || !prog)
		return;
	double total = MPI_Wtime() - t_start;
	double *secs = rt_alloc(sizeof *secs * (size_t)(n + 1));
	double *bytes = rt_alloc(sizeof *bytes * (size_t)(n + 1));
	MPI_Reduce(op_seconds, secs, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_bytes, bytes, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(&total, &secs[n], 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rt.rank == 0) {
		printf("profile: %s on %d rank%s, %.6f s; BLIS %s kernels, %d thread%s per rank\n",
		       prog->name, rt.nranks, rt.nranks == 1 ? "" : "s", secs[n], rt_blas_arch(),
		       rt_blas_threads(), rt_blas_threads() == 1 ? "" : "s");
		printf("%4s  %-8s %-28s %10s %14s %14s %10s %9s\n", "op", "kind", "label",
		       "seconds", "bytes sent", "pred bytes", "pred s", "GFLOP/s");
		for (int i = 0; i < n; i++) {
			const TrtOpInfo *o = &prog->ops[i];
			char gf[32] = "-";
			if (o->flops > 0 && secs[i] > 0)
				snprintf(gf, sizeof gf, "%.2f", o->flops / secs[i] / 1e9);
			printf("%4d  %-8s %-28s %10.6f %14.0f %14.0f %10.6f %9s\n", i,
			       o->kind ? o->kind : "?", o->label ? o->label : "", secs[i], bytes[i],
			       o->pred_bytes, o->pred_seconds, gf);
		}
		fflush(stdout);
	}
	free(secs);
	free(bytes);
}
