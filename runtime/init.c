/*
 * init.c: the program's life cycle (trt_init, trt_finish), its command line,
 * and how it ends on errors.
 *
 * Command line: NAME=path.npy for any tensor of the program, --seed N,
 * --profile, --trace FILE, --quiet, the checkpoint options, --help.  Every rank parses the same argv and so reaches the same
 * verdict alone; only rank 0 speaks.
 *
 * Two ways to end on an error, chosen by whether the ranks agree:
 *  - rt_exit (collective): every rank knows the job failed, rank 0 (or the
 *    lowest failing rank) has printed the one line, and every rank calls
 *    MPI_Finalize and exit(1).  Open MPI's mpirun then returns 1; a program
 *    run without mpirun (singleton) or under `mpirun -q` prints nothing but
 *    our line, and no stderr is lost to a killed process.
 *  - trt_fatal and rt_bug (one rank alone): print the line, MPI_Abort(1).
 *    mpirun kills the other ranks, adds its MPI_ABORT banner, returns 1.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

RtState rt = { .rank = 0, .nranks = 1 };

const char *rt_progname(void)
{
	if (rt.progname)
		return rt.progname;
	return rt.prog && rt.prog->name ? rt.prog->name : "trac";
}

const char *rt_role_name(TrtRole role)
{
	switch (role) {
	case TRT_INPUT: return "input";
	case TRT_OUTPUT: return "output";
	case TRT_PARAM: return "param";
	}
	return "tensor";
}

static int mpi_live(void)
{
	int init = 0, fin = 0;
	MPI_Initialized(&init);
	MPI_Finalized(&fin);
	return init && !fin;
}

void rt_exit(int status)
{
	fflush(stdout);
	fflush(stderr);
	if (mpi_live())
		MPI_Finalize();
	exit(status);
}

/* Collective: msg is this rank's error line, or NULL.  If any rank failed,
 * the lowest failing rank prints its line and the whole job exits 1. */
void rt_agree(const char *msg)
{
	int mine = msg ? rt.rank : rt.nranks, first = mine;

	int64_t t0 = rt_span_begin();
	if (mpi_live())
		MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, rt.comm);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "agree");
	if (first == rt.nranks)
		return;
	if (first == rt.rank)
		fprintf(stderr, "%s\n", msg);
	rt_exit(1);
}

/* Print "prog: WHAT" + the message, then MPI_Abort: one rank alone. */
static void __attribute__((noreturn)) abort_job(const char *what, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof line, fmt, ap);
	fprintf(stderr, "%s: %s%s\n", rt_progname(), what, line);
	fflush(stdout);
	fflush(stderr);
	if (mpi_live())
		MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

void trt_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	abort_job("", fmt, ap);
}

void rt_bug(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	abort_job("internal error: ", fmt, ap);
}

void *rt_alloc(size_t nbytes)
{
	void *p = malloc(nbytes ? nbytes : 1);

	if (!p)
		rt_oom(nbytes, "a buffer");
	return p;
}

void *rt_realloc(void *p, size_t nbytes)
{
	void *q = realloc(p, nbytes ? nbytes : 1);

	if (!q)
		rt_oom(nbytes, "a buffer");
	return q;
}

int trt_rank(void)
{
	return rt.rank;
}

int trt_nranks(void)
{
	return rt.nranks;
}

uint64_t trt_seed(void)
{
	return rt.seed;
}

/* ---- the command line ---- */

static void print_help(const TrtProgram *prog)
{
	char shape[256];

	printf("usage: [mpirun -np N] %s NAME=path.npy ... [--seed N] [--profile] [--trace FILE]\n"
	       "       [--quiet] [--checkpoint FILE [--checkpoint-every N]] [--resume FILE] [--help]\n\n",
	       rt_progname());
	printf("tensors:\n");
	for (int i = 0; i < prog->ntensors; i++) {
		const TrtTensor *t = &prog->tensors[i];
		rt_shape_str(shape, sizeof shape, t->rank, t->shape);
		printf("  %-12s %-6s %s %-20s", t->name, rt_role_name(t->role),
		       rt_dtype_name(t->dtype), shape);
		if (t->path)
			printf(" default %s", t->path);
		else if (t->role == TRT_OUTPUT)
			printf(" default %s.npy", t->name);
		else if (t->role == TRT_INPUT)
			printf(" required");
		if (t->sparse)
			printf(", sparse: a scipy .npz or a .npy");
		printf("\n");
	}
	printf("\noptions:\n");
	printf("  --seed N     seed of the random initialisers (default %llu)\n",
	       (unsigned long long)prog->seed);
	printf("  --profile    print each op's time and bytes sent at exit (or TRAC_PROFILE=1)\n");
	rt_trace_help();
	printf("  --placement balanced|hash  where a sparse input's blocks go: by their stored\n"
	       "               elements, read from the file first (default), or block modulo ranks\n");
	printf("  --no-overlap a two-phase op waits for all its input chunks before its first\n"
	       "               kernel (to measure what overlapping them saves)\n");
	printf("  --quiet      do not print the values the program prints (its 'print' statements)\n");
	rt_ckpt_help();
	rt_ist_help();
	printf("  --help       print this help and exit\n");
	printf("\nenvironment:\n");
	printf("  TRAC_BLIS_ARCH=auto|native|ID  BLIS kernels: auto picks skx on AVX-512 CPUs\n");
	printf("  BLIS_NUM_THREADS=N             BLIS threads per rank (default 1)\n");
	printf("  TRAC_TRACE_EVENTS=N            spans --trace keeps per rank (default 1000000)\n");
	printf("  TRAC_HUGEPAGES=1               big chunks on huge pages (faster first touch on\n"
	       "                                 bare metal, often slower on virtual machines)\n");
}

/* The tensor NAME= names: the first of that name in the table, which lists
 * a param's output entry before the param itself. */
static int find_tensor(const TrtProgram *prog, const char *name, size_t len)
{
	for (int i = 0; i < prog->ntensors; i++)
		if (strlen(prog->tensors[i].name) == len &&
		    !memcmp(prog->tensors[i].name, name, len))
			return i;
	return -1;
}

static int parse_seed(const char *s, uint64_t *seed)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return 0;
	*seed = v;
	return 1;
}

/* Parses argv into rt.paths and rt.seed; returns an error line or NULL. */
static const char *parse_args(int argc, char **argv, const TrtProgram *prog,
                              char *msg, size_t len)
{
	const char *pn = rt_progname();

	for (int a = 1; a < argc; a++) {
		const char *arg = argv[a];
		const char *eq = strchr(arg, '=');

		if (!strcmp(arg, "--profile")) {
			rt.profile = 1;
		} else if (!strcmp(arg, "--placement") || !strncmp(arg, "--placement=", 12)) {
			const char *v = arg[11] == '=' ? arg + 12 : (a + 1 < argc ? argv[++a] : "");
			if (!strcmp(v, "hash") || !strcmp(v, "balanced")) {
				rt_placement_hash = !strcmp(v, "hash");
			} else {
				snprintf(msg, len, "%s: --placement is 'balanced' or 'hash', found '%s'", pn, v);
				return msg;
			}
		} else if (!strcmp(arg, "--no-overlap")) {
			rt_no_overlap = 1;
		} else if (!strcmp(arg, "--quiet")) {
			rt.quiet = 1;
		} else if (rt_ckpt_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (rt_trace_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (rt_ist_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (!strcmp(arg, "--seed") || !strncmp(arg, "--seed=", 7)) {
			const char *v = arg[6] == '=' ? arg + 7 : (a + 1 < argc ? argv[++a] : "");
			if (!parse_seed(v, &rt.seed)) {
				snprintf(msg, len, "%s: --seed needs an unsigned integer, found '%s'", pn, v);
				return msg;
			}
		} else if (arg[0] != '-' && eq && eq > arg) {
			int i = find_tensor(prog, arg, (size_t)(eq - arg));
			if (i < 0) {
				size_t at = snprintf(msg, len, "%s: unknown tensor '%.*s' in '%s' (tensors:",
				                     pn, (int)(eq - arg), arg, arg);
				for (int t = 0; t < prog->ntensors && at < len; t++)
					at += snprintf(msg + at, len - at, " %s", prog->tensors[t].name);
				if (at < len)
					snprintf(msg + at, len - at, ")");
				return msg;
			}
			if (prog->tensors[i].role == TRT_PARAM && !prog->tensors[i].path) {
				snprintf(msg, len, "%s: param %s is initialised by the program, not read from a file",
				         pn, prog->tensors[i].name);
				return msg;
			}
			if (rt.paths[i]) {
				snprintf(msg, len, "%s: tensor %s given twice ('%s=%s' and '%s')",
				         pn, prog->tensors[i].name, prog->tensors[i].name,
				         rt.paths[i], arg);
				return msg;
			}
			if (!eq[1]) {
				snprintf(msg, len, "%s: empty path in '%s'", pn, arg);
				return msg;
			}
			rt.paths[i] = eq + 1;
		} else {
			snprintf(msg, len, "%s: unexpected argument '%s' (expected NAME=path.npy, "
			         "--seed N, --profile, --trace FILE, --placement hash|balanced, --no-overlap, --quiet, --checkpoint FILE, "
			         "--checkpoint-every N, --resume FILE or --help)", pn, arg);
			return msg;
		}
	}

	/* Defaults, and the inputs nobody named. */
	for (int i = 0; i < prog->ntensors; i++) {
		const TrtTensor *t = &prog->tensors[i];
		if (rt.paths[i])
			continue;
		if (t->path) {
			rt.paths[i] = t->path;
		} else if (t->role == TRT_OUTPUT) {
			char *p = rt_alloc(strlen(t->name) + 5);
			sprintf(p, "%s.npy", t->name);
			rt.paths[i] = p;        /* lives as long as the program */
		} else if (t->role == TRT_INPUT) {
			snprintf(msg, len, "%s: input %s: no file given (add %s=path.npy; see --help)",
			         pn, t->name, t->name);
			return msg;
		}
	}
	return NULL;
}

/* "1-8,16,32": the rank counts the program has plans for. */
static void plans_str(char *s, size_t len, const TrtProgram *progs, int n)
{
	size_t at = 0;
	*s = 0;
	for (int i = 0; i < n && at < len; i++) {
		int j = i;
		while (j + 1 < n && progs[j + 1].planned_ranks == progs[j].planned_ranks + 1)
			j++;
		if (j >= i + 2) {
			at += snprintf(s + at, len - at, "%s%d-%d", i ? "," : "", progs[i].planned_ranks,
			               progs[j].planned_ranks);
			i = j;
		} else
			at += snprintf(s + at, len - at, "%s%d", i ? "," : "", progs[i].planned_ranks);
	}
}

/* The plan for this run: the one made for its rank count, else the one for
 * the largest count below it (else the smallest), which runs on all ranks:
 * a tuple's site is its key's index modulo the ranks that run. */
static int choose_plan(const TrtProgram *progs, int n)
{
	int best = 0;
	for (int i = 0; i < n; i++)
		if (progs[i].planned_ranks <= rt.nranks &&
		    (progs[best].planned_ranks > rt.nranks || progs[i].planned_ranks > progs[best].planned_ranks))
			best = i;
	return best;
}

/*
 * Run as ./prog, without a launcher, the process is an MPI singleton: one
 * rank, no peer.  Open MPI then starts a helper daemon and its UCX layer,
 * 0.3-0.4 s of a run's start and exit here; alone, with ob1 (whose self
 * transport is all one rank needs), 0.04 s.  The user's own settings win.
 */
static void singleton_defaults(void)
{
	static const char *launched[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
	for (size_t i = 0; i < sizeof launched / sizeof *launched; i++)
		if (getenv(launched[i]))
			return;
	setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
	setenv("OMPI_MCA_pml", "ob1", 0);
}

/* Do all ranks share this node's memory (so shared memory carries every
 * message)?  Collective. */
static int on_one_node(void)
{
	MPI_Comm node;
	int here = 0, fewest = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &here);
	MPI_Comm_free(&node);
	MPI_Allreduce(&here, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	return fewest == rt.nranks;
}

int trt_init(int *argc, char ***argv, const TrtProgram *progs, int nprogs)
{
	char msg[1024];
	int init = 0;

	int level = MPI_THREAD_SINGLE;
	MPI_Initialized(&init);
	if (!init) {
		singleton_defaults();
		/* serialized: the two-phase schedule's progress thread makes the
		 * MPI calls while the main thread computes, never both at once */
		MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level);
	} else
		MPI_Query_thread(&level);
	rt.threads = level >= MPI_THREAD_SERIALIZED;
	rt.comm = MPI_COMM_WORLD;
	MPI_Comm_rank(MPI_COMM_WORLD, &rt.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &rt.nranks);
	rt.one_node = on_one_node();
	if (nprogs < 1)
		rt_bug("a program with no plan");
	int plan = choose_plan(progs, nprogs);
	const TrtProgram *prog = &progs[plan];
	rt.prog = prog;
	rt.op = -1;
	if (*argc > 0 && (*argv)[0] && *(*argv)[0]) {
		const char *slash = strrchr((*argv)[0], '/');
		rt.progname = slash ? slash + 1 : (*argv)[0];
	}
	if (prog->abi != TRT_ABI)
		rt_bug("program built for runtime ABI %d, this runtime is ABI %d",
		       prog->abi, TRT_ABI);
	if (prog->ntensors < 0 || prog->nops < 0)
		rt_bug("negative tensor or op count");
	rt.seed = prog->seed;

	for (int a = 1; a < *argc; a++)
		if (!strcmp((*argv)[a], "--help")) {
			if (rt.rank == 0) {
				print_help(prog);
				plans_str(msg, sizeof msg, progs, nprogs);
				printf("\nplans for %s ranks; on another count, the plan for the largest count below it\n",
				       msg);
			}
			rt_exit(0);
		}

	rt.paths = rt_alloc(sizeof *rt.paths * (size_t)(prog->ntensors + 1));
	memset(rt.paths, 0, sizeof *rt.paths * (size_t)(prog->ntensors + 1));
	const char *env = getenv("TRAC_PROFILE");
	if (env && *env && strcmp(env, "0"))
		rt.profile = 1;
	if (parse_args(*argc, *argv, prog, msg, sizeof msg)) {
		if (rt.rank == 0)
			fprintf(stderr, "%s\n", msg);
		rt_exit(1);
	}

	if (nprogs > 1 && prog->planned_ranks != rt.nranks && rt.rank == 0) {
		plans_str(msg, sizeof msg, progs, nprogs);
		fprintf(stderr, "%s: no plan for %d rank%s (plans for %s): running the plan for %d on all %d\n",
		        rt_progname(), rt.nranks, rt.nranks == 1 ? "" : "s", msg, prog->planned_ranks, rt.nranks);
	}

	rt_blas_init();
	rt_profile_init();
	rt_mem_check();
	rt_ckpt_init();
	rt_trace_init();
	return plan;
}

int trt_finish(void)
{
	rt_profile_report();
	rt_trace_write();
	fflush(stdout);
	if (mpi_live())
		MPI_Finalize();
	return 0;
}
