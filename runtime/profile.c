/*
 * profile.c: --profile, the EXPLAIN ANALYZE of a compiled program.
 *
 * trt_op_begin/trt_op_end bracket each IA op.  Communication adds the bytes
 * it sends to and receives from other ranks to rt.sent and rt.recvd (always:
 * it is one addition), rel.c keeps rt.live, the bytes in chunks, and its
 * high-water marks; the bracket attributes the differences to the op.  At
 * trt_finish the ranks reduce (seconds and peaks: max over ranks, bytes: sum)
 * and rank 0 prints one table beside the plan's predictions, then one
 * `summary:` line of key=value pairs for scripts (bench/ reads it).
 *
 * What is measured, exactly:
 *  - seconds: the op's wall time, max over ranks, summed over its calls (an
 *    op inside a repeat block runs once per iteration);
 *  - bytes sent / received: chunk bytes and the key of each tuple (8 bytes
 *    per key dim) that leave or reach this rank, summed over ranks; the plan
 *    predicts chunk bytes only, so the two differ by the keys;
 *  - peak: the most bytes in chunks at once while the op ran, max over
 *    ranks; the plan's peak_bytes_per_rank is the prediction of the largest.
 *    Communication buffers are counted apart (buffers in the summary).
 *    Under a memory budget (store.c) these are resident bytes: chunks in
 *    the spill file do not count;
 *  - the process's peak resident set (VmHWM, max over ranks) and how much
 *    it grew from the start of the run (VmRSS then): all the memory, not
 *    only chunks.  Each rank's peaks (chunks, resident set, growth) have a
 *    line of their own, and the summary the leanest rank's (peak_min,
 *    rss_peak_min, rss_growth_min): with the maxima they bound every
 *    rank's against the plan's;
 *  - spill: bytes each op wrote to and read back from the ranks' spill
 *    files (summed over ranks; counted when the I/O thread's request is
 *    taken back, which may be an op later) and the seconds the main
 *    thread waited for them (max over ranks);
 *  - wait: with --profile the ranks meet in a barrier as each op starts, so
 *    that an op's seconds are its own; wait is the time the slowest-waiting
 *    rank spent there, that is, how unbalanced the ops before it were;
 *  - compute seconds: the seconds of the ops other than read, write, init
 *    and print, and the waits between two such ops.  With the barriers, it
 *    is the wall time of the computation: what a benchmark compares with a
 *    library call on data already in memory.  compute_cpu_s sums the ops' CPU
 *    time (max over ranks per op), the steadier figure on a shared machine;
 *    cpu_s likewise over every op (reads and writes too; a disk's fsync
 *    is no CPU time), the figure bench/predict.py compares with pred_s.
 *  - floor and roofline: the op's floor is the least time the machine model
 *    the plan was made with allows it (the cost model's op_floor: its flops
 *    at the model's best rate for its kind of kernel, its memory bytes at
 *    memcpy's rate, its bytes sent at the fastest collective's bandwidth,
 *    a file's at the disk's), its roofline floor / seconds: how close the
 *    run came to the hardware.  The summary's roofline is the floors' sum
 *    over total_s, compute_roofline the compute ops' over compute_s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

static double *op_seconds, *op_cpu, *op_wait, *op_sent, *op_keys, *op_recvd, *op_peak;
static double *op_spill_w, *op_spill_r, *op_spill_wait;
static int64_t *op_calls;
static double op_t0, op_cpu0, op_sent0, op_keys0, op_recvd0, t_start;
static double op_spill_w0, op_spill_r0, op_spill_wait0;
static double rss_start;                /* VmRSS when the run starts: MPI, BLIS, the program */
static int cur_op = -1;

void rt_count_sent(double bytes)
{
	rt.sent += bytes;
}

void rt_count_recv(double bytes)
{
	rt.recvd += bytes;
}

void rt_count_keys(double bytes)
{
	rt.sent_keys += bytes;
}

void rt_count_buf(double bytes)
{
	rt.buf_live += bytes;
	if (rt.buf_live > rt.buf_peak)
		rt.buf_peak = rt.buf_live;
}

/* This thread's CPU time: unlike wall time, it does not count the time
 * other jobs on the machine run instead of this rank (on a shared machine
 * the ratio of two CPU times is the steadier measure of compute-bound
 * work; MPI's waits spin, so they count as CPU time too). */
static double cpu_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double *zeros(int n)
{
	double *v = rt_alloc(sizeof *v * (size_t)(n + 1));
	memset(v, 0, sizeof *v * (size_t)(n + 1));
	return v;
}

void rt_profile_init(void)
{
	int n = rt.prog->nops;

	t_start = MPI_Wtime();
	if (!rt.profile)
		return;
	rss_start = rt_proc_status("VmRSS");
	op_seconds = zeros(n);
	op_cpu = zeros(n);
	op_wait = zeros(n);
	op_sent = zeros(n);
	op_keys = zeros(n);
	op_recvd = zeros(n);
	op_peak = zeros(n);
	op_spill_w = zeros(n);
	op_spill_r = zeros(n);
	op_spill_wait = zeros(n);
	op_calls = rt_alloc(sizeof *op_calls * (size_t)(n + 1));
	memset(op_calls, 0, sizeof *op_calls * (size_t)(n + 1));
}

static void profile_begin(int op)
{
	if (op < 0 || op >= rt.prog->nops || cur_op >= 0)
		rt_bug("trt_op_begin(%d) with %d ops, op %d open", op, rt.prog->nops, cur_op);
	cur_op = op;
	/* Ranks enter an op at different times when the previous ops were not
	 * balanced; waiting here keeps that wait out of the op's own time. */
	double t = MPI_Wtime();
	MPI_Barrier(MPI_COMM_WORLD);
	/* the CPU clock first: reading it is a system call (0.6 us here),
	 * which inside the op's wall time took 8% of a 7 us gemm's */
	op_cpu0 = cpu_seconds();
	op_t0 = MPI_Wtime();
	op_wait[op] += op_t0 - t;
	op_sent0 = rt.sent;
	op_keys0 = rt.sent_keys;
	op_recvd0 = rt.recvd;
	op_spill_w0 = rt.spill_w;
	op_spill_r0 = rt.spill_r;
	op_spill_wait0 = rt.spill_wait;
	rt.op_peak = rt.live;
}

static void profile_end(int op)
{
	if (op != cur_op)
		rt_bug("trt_op_end(%d) but op %d is open", op, cur_op);
	op_seconds[op] += MPI_Wtime() - op_t0;
	op_cpu[op] += cpu_seconds() - op_cpu0;
	op_sent[op] += rt.sent - op_sent0;
	op_keys[op] += rt.sent_keys - op_keys0;
	op_recvd[op] += rt.recvd - op_recvd0;
	if (rt.op_peak > op_peak[op])
		op_peak[op] = rt.op_peak;
	op_spill_w[op] += rt.spill_w - op_spill_w0;
	op_spill_r[op] += rt.spill_r - op_spill_r0;
	op_spill_wait[op] += rt.spill_wait - op_spill_wait0;
	op_calls[op]++;
	cur_op = -1;
}

/* --trace's op span starts after --profile's barrier, so that it is the
 * op's own time too, and ends before the profile's bookkeeping. */
void trt_op_begin(int op)
{
	rt.op = op;             /* for out-of-memory messages, and the chunk store */
	if (rt.profile)
		profile_begin(op);
	if (rt.trace)
		rt_trace_op_begin(op);
	rt_store_op(op);
}

void trt_op_end(int op)
{
	rt_store_op_end();
	if (rt.trace)
		rt_trace_op_end(op);
	if (rt.profile)
		profile_end(op);
	rt_progress_tick();
}

/* Ops that move data between files and memory rather than compute. */
static int is_io(const char *kind)
{
	return kind && (!strcmp(kind, "read") || !strcmp(kind, "write") ||
	                !strcmp(kind, "init") || !strcmp(kind, "print"));
}

/* Ops each rank runs on its own tuples: a rank's work. */
static int is_local(const char *kind)
{
	return kind && (!strcmp(kind, "join") || !strcmp(kind, "map") || !strcmp(kind, "agg") ||
	                !strcmp(kind, "filter"));
}

/* 1234567 -> "1.23M": the table's columns stay narrow and readable. */
static const char *human(char *buf, size_t len, double v)
{
	static const char *unit[] = {"", "k", "M", "G", "T", "P"};
	int u = 0;

	if (v < 0)
		v = 0;
	while (v >= 999.5 && u < 5) {
		v /= 1000;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%.0f", v);
	else
		snprintf(buf, len, "%.3g%s", v, unit[u]);
	return buf;
}

/* The run's profile reduced to rank 0 (seconds and peaks: max over ranks,
 * bytes: sum), and the sums rank 0 works out from it. */
typedef struct Report {
	int n;                                  /* ops */
	int64_t *calls;
	double *secs, *cpu, *wait, *sent, *keys, *recvd, *peak;
	double *sw, *sr, *swait;                /* spill bytes written, read, seconds waited */
	/* total s, peak chunk bytes, buffers, spill wait, over the budget,
	 * peak resident set, its growth */
	double max[7];
	double *mem;                            /* rank 0: each rank's peak chunk bytes, peak
	                                         * resident set and its growth: mem[3 rank + k] */
	double sum[4];                          /* sent, received, spill written, spill read */
	double *works;                          /* rank 0: each rank's seconds in local ops, then
	                                         * its CPU seconds: works[2 rank + k] */
	double pred_bytes, pred_secs, compute, compute_cpu, cpu_all, floor_all, floor_compute;
	double imbalance, cpu_imbalance;        /* the busiest rank's work over the average */
} Report;

/* Every rank's counts, reduced to rank 0.  Collective. */
static void report_reduce(Report *r, int n, double total)
{
	const TrtProgram *prog = rt.prog;
	memset(r, 0, sizeof *r);
	r->n = n;
	double rss[2] = {rt_proc_status("VmHWM"), rss_start};
	double mine_max[7] = {total, rt.peak, rt.buf_peak, rt.spill_wait, rt.over, rss[0], rss[0] - rss[1]};
	double mine_sum[4] = {rt.sent, rt.recvd, rt.spill_w, rt.spill_r};
	r->calls = rt_alloc(sizeof *r->calls * (size_t)(n + 1));
	double **per_op[] = {&r->secs, &r->cpu, &r->wait, &r->sent, &r->keys, &r->recvd, &r->peak,
	                     &r->sw, &r->sr, &r->swait};
	for (size_t i = 0; i < sizeof per_op / sizeof *per_op; i++)
		*per_op[i] = zeros(n);
	MPI_Reduce(op_seconds, r->secs, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_wait, r->wait, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_cpu, r->cpu, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_sent, r->sent, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_keys, r->keys, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_recvd, r->recvd, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_peak, r->peak, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(op_calls, r->calls, n, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
	MPI_Reduce(mine_max, r->max, 7, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	if (rt.budget > 0) {
		MPI_Reduce(op_spill_w, r->sw, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(op_spill_r, r->sr, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		MPI_Reduce(op_spill_wait, r->swait, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
	}
	/* each rank's own work: its local ops' seconds (the barrier before each
	 * op keeps waits out of them), and their CPU seconds, which on a shared
	 * machine leave out the time other jobs ran instead of the rank */
	double work[2] = {0, 0};
	r->works = rt.rank == 0 ? zeros(2 * rt.nranks) : NULL;
	for (int i = 0; i < n; i++)
		if (is_local(prog->ops[i].kind)) {
			work[0] += op_seconds[i];
			work[1] += op_cpu[i];
		}
	MPI_Gather(work, 2, MPI_DOUBLE, r->works, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	double mem[3] = {rt.peak, rss[0], rss[0] - rss[1]};
	r->mem = rt.rank == 0 ? zeros(3 * rt.nranks) : NULL;
	MPI_Gather(mem, 3, MPI_DOUBLE, r->mem, 3, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	MPI_Reduce(mine_sum, r->sum, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
}

static void report_free(Report *r)
{
	free(r->works);
	free(r->mem);
	free(r->secs);
	free(r->cpu);
	free(r->keys);
	free(r->wait);
	free(r->sent);
	free(r->recvd);
	free(r->peak);
	free(r->sw);
	free(r->sr);
	free(r->swait);
	free(r->calls);
}

/* The first line (program, ranks, seconds, BLAS) and the table's head. */
static void print_head(const TrtProgram *prog, const Report *r)
{
	char plan[48] = "";
	if (prog->planned_ranks > 0)
		snprintf(plan, sizeof plan, " (the plan for %d)", prog->planned_ranks);
	printf("profile: %s on %d rank%s%s, %.6f s; BLIS %s kernels, %d thread%s per rank\n",
	       prog->name, rt.nranks, rt.nranks == 1 ? "" : "s", plan, r->max[0], rt_blas_arch(),
	       rt_blas_threads(), rt_blas_threads() == 1 ? "" : "s");
	if (prog->planned_ranks > 0 && prog->planned_ranks != rt.nranks)
		printf("note: planned for %d rank%s, run on %d: predicted bytes, seconds and peak "
		       "are the plan's for %d\n", prog->planned_ranks,
		       prog->planned_ranks == 1 ? "" : "s", rt.nranks, prog->planned_ranks);
	printf("%4s  %-8s %-28s %6s %10s %10s %9s %9s %9s %9s %9s %8s %9s %10s %8s\n", "op", "kind",
	       "label", "calls", "seconds", "pred s", "wait", "sent", "received",
	       "pred sent", "peak mem", "GFLOP/s", "pred GF/s", "floor s", "roofline");
}

/* One row per op beside the plan's predictions; sums the predictions,
 * floors and compute seconds into r. */
static void print_ops(const TrtProgram *prog, Report *r)
{
	char h[4][32];
	for (int i = 0; i < r->n; i++) {
		const TrtOpInfo *o = &prog->ops[i];
		char gf[32] = "-", pgf[32] = "-", label[29];
		double secs = r->secs[i];
		/* flops and predictions are per call */
		double c = r->calls[i] > 0 ? (double)r->calls[i] : 1;
		if (o->flops > 0 && secs > 0)
			snprintf(gf, sizeof gf, "%.2f", o->flops * c / secs / 1e9);
		if (o->flops > 0 && o->pred_seconds > 0)
			snprintf(pgf, sizeof pgf, "%.2f", o->flops / o->pred_seconds / 1e9);
		snprintf(label, sizeof label, "%s", o->label ? o->label : "");
		char roof[32] = "-";
		if (o->floor_seconds > 0 && secs > 0)
			snprintf(roof, sizeof roof, "%.3f", o->floor_seconds * c / secs);
		r->floor_all += o->floor_seconds * c;
		if (!is_io(o->kind))
			r->floor_compute += o->floor_seconds * c;
		r->pred_bytes += o->pred_bytes * c;
		r->pred_secs += o->pred_seconds * c;
		r->cpu_all += r->cpu[i];
		/* a wait between two compute ops is the computation's own
		 * imbalance; one after reading the inputs is not */
		if (!is_io(o->kind)) {
			r->compute += secs + (i > 0 && !is_io(prog->ops[i - 1].kind) ? r->wait[i] : 0);
			r->compute_cpu += r->cpu[i];
		}
		printf("%4d  %-8s %-28s %6lld %10.6f %10.6f %9.6f %9s %9s %9s %9s %8s %9s %10.6f %8s\n", i,
		       o->kind ? o->kind : "?", label, (long long)r->calls[i], secs,
		       o->pred_seconds * c, r->wait[i], human(h[0], sizeof h[0], r->sent[i]),
		       human(h[1], sizeof h[1], r->recvd[i]),
		       human(h[2], sizeof h[2], o->pred_bytes * c),
		       human(h[3], sizeof h[3], r->peak[i]), gf, pgf, o->floor_seconds * c, roof);
	}
}

/* Peak memory, then the exact bytes of the ops that move data. */
static void print_memory(const TrtProgram *prog, const Report *r)
{
	char h[5][32];
	printf("peak memory per rank: %s bytes in chunks (plan: %s), %s in communication "
	       "buffers; the process's peak resident set %s, %s more than at the start\n",
	       human(h[0], sizeof h[0], r->max[1]),
	       prog->pred_peak_bytes > 0 ? human(h[1], sizeof h[1], prog->pred_peak_bytes) : "?",
	       human(h[2], sizeof h[2], r->max[2]), human(h[3], sizeof h[3], r->max[5]),
	       human(h[4], sizeof h[4], r->max[6]));
	if (rt.nranks > 1) {
		printf("peak memory of each rank (in chunks, resident set, its growth):");
		for (int k = 0; k < rt.nranks; k++)
			printf("%s %d: %s %s %s", k ? ";" : "", k, human(h[0], sizeof h[0], r->mem[3 * k]),
			       human(h[1], sizeof h[1], r->mem[3 * k + 1]), human(h[2], sizeof h[2], r->mem[3 * k + 2]));
		printf("\n");
	}
	/* chunk bytes (sent minus keys) are what the plan predicts */
	for (int i = 0; i < r->n; i++)
		if (r->sent[i] > 0 || prog->ops[i].pred_bytes > 0)
			printf("bytes: op=%d kind=%s sent=%.0f keys=%.0f chunks=%.0f pred=%.0f\n", i,
			       prog->ops[i].kind ? prog->ops[i].kind : "?", r->sent[i], r->keys[i],
			       r->sent[i] - r->keys[i],
			       prog->ops[i].pred_bytes * (r->calls[i] > 0 ? (double)r->calls[i] : 1));
}

/* Spilled chunks, under a budget: bytes to and from the spill files,
 * summed over the ranks, and the seconds the slowest rank waited for them. */
static void print_spill(const TrtProgram *prog, const Report *r)
{
	char h[4][32];
	if (rt.budget <= 0)
		return;
	printf("spill: budget %s bytes of chunks per rank; %s written, %s read back, %.6f s waited "
	       "(the most on one rank); %s over the budget at most, by pinned working sets\n",
	       human(h[0], sizeof h[0], rt.budget), human(h[1], sizeof h[1], r->sum[2]),
	       human(h[2], sizeof h[2], r->sum[3]), r->max[3], human(h[3], sizeof h[3], r->max[4]));
	for (int i = 0; i < r->n; i++)
		if (r->sw[i] > 0 || r->sr[i] > 0 || r->swait[i] > 0)
			printf("spill: op=%d kind=%s written=%.0f read=%.0f wait_s=%.6f\n", i,
			       prog->ops[i].kind ? prog->ops[i].kind : "?", r->sw[i], r->sr[i], r->swait[i]);
}

/* The ranks' work (works[2 q + k]: k 0 seconds, 1 CPU seconds) on a line
 * of its own with more than one rank; returns the busiest's over the
 * average. */
static double work_line(const char *what, const double *works, int k)
{
	double wmax = 0, wsum = 0;
	for (int q = 0; q < rt.nranks; q++) {
		wmax = works[2 * q + k] > wmax ? works[2 * q + k] : wmax;
		wsum += works[2 * q + k];
	}
	double imbalance = wsum > 0 ? wmax / (wsum / rt.nranks) : 1;
	if (rt.nranks > 1) {
		printf("work per rank (%s in local joins, maps and aggregations):", what);
		for (int q = 0; q < rt.nranks; q++)
			printf(" %.4f", works[2 * q + k]);
		printf("; the busiest %.2fx the average\n", imbalance);
	}
	return imbalance;
}

/* The busiest rank's share of what map m places per block (elems, or
 * lines when NULL) over the average. */
static double held(const RtSiteMap *m, const double *elems)
{
	double *mine = zeros(rt.nranks), all = 0, most = 0;
	for (int64_t b = 0; b < m->nblock; b++) {
		int64_t lines = m->extent - b * m->block;
		double v = elems ? elems[b] : (double)(lines < m->block ? lines : m->block);
		mine[m->site[b]] += v;
		all += v;
	}
	for (int q = 0; q < rt.nranks; q++)
		most = mine[q] > most ? mine[q] : most;
	free(mine);
	return all > 0 ? most / (all / rt.nranks) : 1;
}

/* Each rank's work and how unbalanced it is (r->imbalance, in seconds and
 * in CPU seconds); then how each placement of a sparse input's blocks
 * spreads the work it counted (by the map, by block modulo ranks), and
 * the rows and stored elements the ranks hold under the placement used. */
static void print_balance(Report *r)
{
	r->imbalance = work_line("seconds", r->works, 0);
	r->cpu_imbalance = work_line("CPU seconds", r->works, 1);
	RtSiteMap *maps;
	int nmaps = rt_site_maps(&maps);
	for (int i = 0; i < nmaps; i++) {
		const RtSiteMap *m = &maps[i];
		printf("placement: %s, %lld blocks of %lld, by %s%s: the busiest rank holds %.2fx the average "
		       "(block modulo ranks: %.2fx); rows %.2fx, stored elements %.2fx\n", m->what,
		       (long long)m->nblock, (long long)m->block,
		       m->by_plan ? "the plan's work on stored elements and rows" : "stored elements and rows",
		       rt_placement_hash ? ", counted but not used (--placement=hash)" : "",
		       m->avg > 0 ? (rt_placement_hash ? m->hash_max : m->max) / m->avg : 1,
		       m->avg > 0 ? m->hash_max / m->avg : 1, held(m, NULL), held(m, m->elems));
	}
}

/* The roofline line, and the summary line of key=value pairs for scripts. */
static void print_summary(const TrtProgram *prog, const Report *r)
{
	double total = r->max[0];
	double least[3];                /* the leanest rank's peaks: r->mem's columns' minima */
	for (int c = 0; c < 3; c++) {
		least[c] = r->mem[c];
		for (int k = 1; k < rt.nranks; k++)
			if (r->mem[3 * k + c] < least[c])
				least[c] = r->mem[3 * k + c];
	}
	printf("roofline: the ops' floors %.6f s of %.6f s in all (%.3f), %.6f s of the compute's %.6f s "
	       "(%.3f)\n", r->floor_all, total, total > 0 ? r->floor_all / total : 0,
	       r->floor_compute, r->compute, r->compute > 0 ? r->floor_compute / r->compute : 0);
	printf("summary: ranks=%d planned_ranks=%d total_s=%.6f compute_s=%.6f compute_cpu_s=%.6f pred_s=%.6f "
	       "sent=%.0f recvd=%.0f pred_sent=%.0f peak=%.0f pred_peak=%.0f buffers=%.0f "
	       "blis=%s threads=%d work_imbalance=%.4f work_cpu_imbalance=%.4f floor_s=%.6f roofline=%.4f "
	       "compute_roofline=%.4f budget=%.0f spill_written=%.0f spill_read=%.0f spill_wait_s=%.6f "
	       "over_budget=%.0f rss_peak=%.0f rss_growth=%.0f cpu_s=%.6f peak_min=%.0f rss_peak_min=%.0f "
	       "rss_growth_min=%.0f\n", rt.nranks, prog->planned_ranks, total,
	       r->compute, r->compute_cpu, r->pred_secs, r->sum[0], r->sum[1], r->pred_bytes, r->max[1],
	       prog->pred_peak_bytes, r->max[2], rt_blas_arch(), rt_blas_threads(), r->imbalance,
	       r->cpu_imbalance, r->floor_all,
	       total > 0 ? r->floor_all / total : 0, r->compute > 0 ? r->floor_compute / r->compute : 0,
	       rt.budget, r->sum[2], r->sum[3], r->max[3], r->max[4], r->max[5], r->max[6], r->cpu_all,
	       least[0], least[1], least[2]);
}

void rt_profile_report(void)
{
	const TrtProgram *prog = rt.prog;
	int n = prog ? prog->nops : 0;

	if (!rt.profile || !prog)
		return;
	Report r;
	report_reduce(&r, n, MPI_Wtime() - t_start);
	if (rt.rank == 0) {
		print_head(prog, &r);
		print_ops(prog, &r);
		print_memory(prog, &r);
		print_spill(prog, &r);
		print_balance(&r);
		print_summary(prog, &r);
		fflush(stdout);
	}
	report_free(&r);
}
