/*
 * guard.c: memory, checked before the run starts and reported when it runs
 * out.
 *
 * Before the first op, every rank compares what the plan needs on it with
 * what it can have, and the job stops at once (status 1 on every rank, one
 * line from the lowest failing rank) when the plan cannot fit: better than
 * the kernel's OOM killer an hour into the run.
 *
 *   need   the plan's predicted peak bytes per rank (TrtProgram.pred_peak_bytes,
 *          for planned_ranks ranks), scaled to this run's rank count: a
 *          partitioned relation shrinks with more ranks, a replicated one
 *          does not, so peak * min(1, planned / ranks) is a lower bound of
 *          what each rank needs -- the check never refuses a plan that fits.
 *          A sparse input's file may hold more elements than the plan
 *          assumed: trt_mem_recheck, once trt_balance has read the counts,
 *          adds this rank's share of the excess (values and column
 *          indices of the input itself; what is computed from it is not
 *          scaled, so the need stays a lower bound).
 *   have   the least of: the address-space limit (ulimit -v) less what the
 *          process maps already; the data-segment limit likewise; the
 *          cgroup's memory.max less memory.current; the node's
 *          MemAvailable.  The last two are shared by the ranks on the node
 *          (MPI_COMM_TYPE_SHARED), so each rank gets its share.
 *
 * Under a memory budget (--mem-budget, store.c) the need is at most the
 * budget: what does not fit waits in the spill file.  With no budget (none
 * given, none planned), a plan over what a rank can have runs out of core
 * rather than stop: that rank's budget becomes three quarters of what it
 * can have, less trac.1's allowance, and its spill file is opened (one
 * line says so); --in-memory restores the refusal.
 *
 * TRAC_MEM_CHECK=0 turns the check off (the test of out-of-memory during
 * the run uses it).  An allocation that fails during the run is reported by
 * rt_oom, naming the op that was running, never a segfault.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "rt.h"

/* "1.5 GB" */
static const char *bytes_str(char *buf, size_t len, double b)
{
	static const char *unit[] = {"bytes", "KB", "MB", "GB", "TB", "PB", "EB"};
	int u = 0;
	while (b >= 1000 && u < 6) {
		b /= 1000;
		u++;
	}
	snprintf(buf, len, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
	return buf;
}

/* The number in a one-number file (cgroup v2), or -1 ("max", missing). */
static double read_number(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[64];
	double v = -1;
	if (!f)
		return -1;
	if (fgets(line, sizeof line, f) && strncmp(line, "max", 3))
		v = strtod(line, NULL);
	fclose(f);
	return v;
}

/* A field of /proc/self/status or /proc/meminfo in bytes ("VmSize:   1234 kB"), or -1. */
static double read_kb_field(const char *path, const char *field)
{
	FILE *f = fopen(path, "r");
	char line[256];
	double v = -1;
	size_t n = strlen(field);
	if (!f)
		return -1;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			v = strtod(line + n + 1, NULL) * 1024;
			break;
		}
	fclose(f);
	return v;
}

/* A field of /proc/self/status in bytes (VmRSS, VmHWM), or -1. */
double rt_proc_status(const char *field)
{
	return read_kb_field("/proc/self/status", field);
}

/* This process's cgroup (v2) folder, or NULL. */
static const char *cgroup_dir(char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "r");
	char line[512];
	const char *dir = NULL;
	if (!f)
		return NULL;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "0::", 3)) {
			line[strcspn(line, "\n")] = 0;
			snprintf(buf, len, "/sys/fs/cgroup%s", line + 3);
			dir = buf;
			break;
		}
	fclose(f);
	return dir;
}

/* The bytes this rank can still have, and which limit says so. */
static double available(int local_ranks, const char **why)
{
	double have = -1;
	*why = NULL;
	struct rlimit rl;
	double vm = read_kb_field("/proc/self/status", "VmSize");
	if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && vm >= 0) {
		have = (double)rl.rlim_cur - vm;
		*why = "the address-space limit (ulimit -v) less what this rank maps already";
	}
	double data = read_kb_field("/proc/self/status", "VmData");
	if (getrlimit(RLIMIT_DATA, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && data >= 0 &&
	    (have < 0 || (double)rl.rlim_cur - data < have)) {
		have = (double)rl.rlim_cur - data;
		*why = "the data-segment limit (ulimit -d) less what this rank uses already";
	}
	char dir[600], path[700];
	if (cgroup_dir(dir, sizeof dir)) {
		snprintf(path, sizeof path, "%s/memory.max", dir);
		double max = read_number(path);
		snprintf(path, sizeof path, "%s/memory.current", dir);
		double cur = read_number(path);
		if (max > 0 && cur >= 0 && (have < 0 || (max - cur) / local_ranks < have)) {
			have = (max - cur) / local_ranks;
			*why = local_ranks > 1 ? "this rank's share of the cgroup's memory.max" : "the cgroup's memory.max";
		}
	}
	double avail = read_kb_field("/proc/meminfo", "MemAvailable");
	if (avail >= 0 && (have < 0 || avail / local_ranks < have)) {
		have = avail / local_ranks;
		*why = local_ranks > 1 ? "this rank's share of the node's available memory" : "the node's available memory";
	}
	return have;
}

/* "op #12 join (C[i, j] = A[i, k] * B[k, j])" */
static void op_str(char *buf, size_t len, int op)
{
	const TrtProgram *p = rt.prog;
	if (!p || op < 0 || op >= p->nops) {
		snprintf(buf, len, "before the first op");
		return;
	}
	const TrtOpInfo *o = &p->ops[op];
	if (o->label && *o->label) {
		int n = (int)strlen(o->label);
		while (n > 0 && (o->label[n - 1] == ';' || o->label[n - 1] == ' '))
			n--;    /* a statement's text, without its ';' */
		snprintf(buf, len, "op #%d %s (%.*s)", op, o->kind, n, o->label);
	} else
		snprintf(buf, len, "op #%d %s", op, o->kind);
}

static void check(double extra);

void rt_mem_check(void)
{
	check(0);
}

/* Again, once the sparse inputs' files have told how many elements they
 * hold (trt_balance): the plan's peak plus what this rank's share of them
 * exceeds the estimate by. */
void trt_mem_recheck(void)
{
	double most = 0;
	MPI_Allreduce(&rt_sparse_excess, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
	if (most > 0)
		check(rt_sparse_excess);
}

static void check(double extra)
{
	const TrtProgram *p = rt.prog;
	const char *env = getenv("TRAC_MEM_CHECK");
	char msg[1024];
	const char *err = NULL;

	if (env && !strcmp(env, "0"))
		return;
	int local = 1;
	MPI_Comm node;
	if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
		MPI_Comm_size(node, &local);
		MPI_Comm_free(&node);
	}
	double need = p->pred_peak_bytes;
	if (p->planned_ranks > 0 && p->planned_ranks < rt.nranks)
		need *= (double)p->planned_ranks / rt.nranks;
	need += extra;
	if (rt.budget > 0 && rt.budget < need)
		need = rt.budget;       /* the rest waits in the spill file (store.c) */
	const char *why;
	double have = available(local, &why);
	/* Out of core rather than refused: with no budget given or planned,
	 * a plan over what this rank can have runs under a budget of three
	 * quarters of it, less the allowance trac.1 states for what the
	 * process holds beyond its chunks (and what one op may hold over the
	 * budget); --in-memory refuses instead. */
	double budget = have * 0.75 - (double)(16 << 20);
	int ooc = need > 0 && have >= 0 && need > have && rt.budget == 0 && !rt.in_memory &&
	          extra == 0 && budget >= (double)(1 << 20);
	if (ooc)
		err = rt_spill_start(budget, msg, sizeof msg);
	else if (need > 0 && have >= 0 && need > have) {
		char a[32], b[32], op[512];
		op_str(op, sizeof op, p->pred_peak_op);
		if (need == rt.budget)
			snprintf(msg, sizeof msg, "%s: --mem-budget %s is more than the %s rank %d can have (%s)",
			         rt_progname(), bytes_str(a, sizeof a, need), bytes_str(b, sizeof b, have), rt.rank, why);
		else
			snprintf(msg, sizeof msg, "%s: the plan needs %s per rank at its peak, at %s%s, more than the %s "
			         "rank %d can have (%s); run on more ranks or machines, or plan for them (trac -P, "
			         "--mem-per-rank%s), or under --mem-budget%s", rt_progname(), bytes_str(a, sizeof a, need), op,
			         extra > 0 ? ", with the sparse inputs' elements its estimate lacked" : "",
			         bytes_str(b, sizeof b, have), rt.rank, why, extra > 0 ? ", --nnz" : "",
			         rt.in_memory ? " (without --in-memory: out of core)" : "");
		err = msg;
	}
	/* one line for the job: the lowest rank that runs out of core says so */
	int first = ooc && !err ? rt.rank : rt.nranks, lowest = first;
	MPI_Allreduce(&first, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	if (lowest == rt.rank) {
		char a[32], b[32], c[32];
		fprintf(stderr, "%s: the plan needs %s per rank at its peak, more than the %s rank %d can have (%s): "
		        "running out of core, at most %s of chunks in memory a rank and the rest in a spill file in "
		        "%s (--mem-budget, --spill-dir; --in-memory stops instead)\n", rt_progname(),
		        bytes_str(a, sizeof a, need), bytes_str(b, sizeof b, have), rt.rank, why,
		        bytes_str(c, sizeof c, budget), rt_spill_dir());
	}
	rt_agree(err);
}

void rt_oom(size_t nbytes, const char *what)
{
	char a[32], b[32], c[32], op[512];
	op_str(op, sizeof op, rt.op);
	trt_fatal("out of memory on rank %d: cannot allocate %s for %s, in %s (this rank holds %s of chunks; "
	          "the plan predicted %s at its peak)", rt.rank, bytes_str(a, sizeof a, (double)nbytes), what, op,
	          bytes_str(b, sizeof b, rt.live), bytes_str(c, sizeof c, rt.prog ? rt.prog->pred_peak_bytes : 0));
}
