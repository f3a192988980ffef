/*
 * init.c: the program's life cycle (trt_init, trt_finish) and how it ends
 * on errors.  The command line is cmdline.c's.
 *
 * An error is one line on stderr and status 1, with nothing of MPI's
 * around it.  Two ways to end, chosen by whether the ranks agree:
 *  - rt_agree (collective): every rank knows the job failed; the lowest
 *    failing rank prints its line, and once it is out (a barrier) every
 *    rank leaves.
 *  - trt_fatal and rt_bug (one rank alone): print the line and leave,
 *    which ends the others.
 * Leaving (leave): under Open MPI's mpirun, the rank aborts the job
 * through PMIx (PMIx_Abort, from the PMIx library Open MPI has loaded):
 * mpirun then kills the other ranks and returns the status without a word
 * (it prints nothing for a job a rank aborted that way), where MPI_Abort
 * adds its own ten-line banner ("MPI_ABORT was invoked on rank ...") and
 * an exit after MPI_Finalize with a status but 0 makes mpirun print its
 * ten ("Primary job terminated normally, but 1 process returned a
 * non-zero exit code ...").  Without PMIx (another MPI), an agreed error
 * ends in MPI_Finalize and exit(1), one rank's in MPI_Abort, with what
 * the launcher prints.  A program run without a launcher (a singleton)
 * finalizes and exits: nothing else is printed.
 */
#define _GNU_SOURCE                    /* RTLD_NOLOAD */
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt.h"

RtState rt = { .rank = 0, .nranks = 1 };

const char *rt_progname(void)
{
	if (rt.progname)
		return rt.progname;
	return rt.prog && rt.prog->name ? rt.prog->name : "trac";
}

static int mpi_live(void)
{
	int init = 0, fin = 0;
	MPI_Initialized(&init);
	MPI_Finalized(&fin);
	return init && !fin;
}

/* Started by a launcher (mpirun, srun, ...), not as a singleton. */
int rt_launched(void)
{
	static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		if (getenv(vars[i]))
			return 1;
	return 0;
}

/* PMIx_Abort, when the MPI library has loaded PMIx's (Open MPI does, as
 * libpmix.so.2), else NULL. */
typedef int (*PmixAbort)(int status, const char msg[], const void *procs, size_t nprocs);

static PmixAbort pmix_abort(void)
{
	static const char *libs[] = {"libpmix.so.2", "libpmix.so"};
	for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
		void *h = dlopen(libs[i], RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			PmixAbort f = (PmixAbort)(uintptr_t)dlsym(h, "PMIx_Abort");
			if (f)
				return f;
		}
	}
	return NULL;
}

/* Ends the job with status (the error's line already printed); alone: no
 * other rank knows. */
static void __attribute__((noreturn)) leave(int status, int alone)
{
	rt_remove_temps();
	rt_progress_clear();
	fflush(stdout);
	fflush(stderr);
	if (mpi_live() && rt_launched()) {
		PmixAbort f = pmix_abort();
		/* mpirun kills the other ranks, prints nothing, and returns
		 * status; PMIx_Abort may return before it has */
		if (f && f(status, NULL, NULL, 0) == 0)
			_exit(status);
	}
	if (mpi_live() && alone)
		MPI_Abort(MPI_COMM_WORLD, status);
	if (mpi_live())
		MPI_Finalize();
	exit(status);
}

void rt_exit(int status)
{
	/* collective: the line rank 0 printed is out before any rank ends the job */
	if (status && mpi_live())
		MPI_Barrier(rt.comm);
	if (status)
		leave(status, 0);
	rt_progress_clear();
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
	if (first == rt.rank) {
		rt_progress_clear();
		fprintf(stderr, "%s\n", msg);
		fflush(stderr);
	}
	/* the line is out before any rank ends the job */
	if (mpi_live())
		MPI_Barrier(rt.comm);
	leave(1, 0);
}

/* Print "prog: WHAT" + the message, then end the job: one rank alone. */
static void __attribute__((noreturn)) abort_job(const char *what, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof line, fmt, ap);
	rt_progress_clear();
	fprintf(stderr, "%s: %s%s\n", rt_progname(), what, line);
	leave(1, 1);
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
 * transport is all one rank needs), 0.04 s.  Launched, MPI_Init opens
 * every PML it has before settling on ob1: cm and the network MTLs under
 * it (libfabric's ofi, psm, psm2; their probing is 0.1-0.2 s of it),
 * monitoring, vprotocol, UCX where installed.  A job whose ranks all run
 * on this host (Open MPI's OMPI_COMM_WORLD_LOCAL_SIZE equals its
 * OMPI_COMM_WORLD_SIZE) has no peer off the host, and ob1 with its
 * shared-memory transport is what Open MPI picks for it anyway: naming
 * ob1 makes MPI_Init 0.02 s from 0.22 on 2 ranks here (issue 33); a job
 * of one rank needs the self transport alone.  A job that spans hosts
 * keeps Open MPI's choice (UCX, the MTLs are how it reaches them).
 * More ranks on this host than it has cores (mpirun --oversubscribe): a
 * rank waiting for a message spins in Open MPI's progress loop on a core
 * another rank needs, and a 4-rank training loop on 2 cores ran 7.0 s
 * where with mpi_yield_when_idle (the waiting rank gives its core up,
 * sched_yield) it ran 0.8; with a core a rank, spinning is the faster
 * wait, and the default stays.  The user's own settings win.
 */
static void launch_defaults(void)
{
	const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *local = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (local && cores > 0 && atol(local) > cores)
		setenv("OMPI_MCA_mpi_yield_when_idle", "1", 0);
	if (size && !strcmp(size, "1")) {
		setenv("OMPI_MCA_pml", "ob1", 0);
		setenv("OMPI_MCA_btl", "self", 0);
		return;
	}
	if (size && local && !strcmp(size, local)) {
		setenv("OMPI_MCA_pml", "ob1", 0);
		return;
	}
	if (rt_launched())
		return;
	setenv("OMPI_MCA_ess_singleton_isolated", "1", 0);
	setenv("OMPI_MCA_pml", "ob1", 0);
}

/* TCP_NODELAY on fd when it is a TCP socket whose peer is host:port
 * (host as the URI writes it, dotted or colon-separated); 1 when set. */
static int nodelay_if_peer(int fd, const char *host, long port)
{
	struct sockaddr_storage a;
	socklen_t len = sizeof a;
	int type = 0;
	socklen_t tlen = sizeof type;
	char name[INET6_ADDRSTRLEN];
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM ||
	    getpeername(fd, (struct sockaddr *)&a, &len) < 0)
		return 0;
	if (a.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&a;
		if (ntohs(in->sin_port) != port || !inet_ntop(AF_INET, &in->sin_addr, name, sizeof name))
			return 0;
	} else if (a.ss_family == AF_INET6) {
		struct sockaddr_in6 *in = (struct sockaddr_in6 *)&a;
		if (ntohs(in->sin6_port) != port || !inet_ntop(AF_INET6, &in->sin6_addr, name, sizeof name))
			return 0;
	} else
		return 0;
	int one = 1;
	return !strcmp(name, host) && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

/*
 * Open MPI's PMIx client talks to its launcher's PMIx server over a TCP
 * socket without TCP_NODELAY: MPI_Finalize's fence sends a few small
 * messages back to back, and the later ones wait for the server's delayed
 * ACK (Nagle), 40-45 ms of every launched run's exit here (strace: the
 * client's writev at t, the server's read at t + 40 ms).  After MPI_Init
 * the runtime sets TCP_NODELAY on the socket whose peer is the server in
 * PMIX_SERVER_URI* (the URI the launcher hands the process, "id;tcp4://
 * host:port"): MPI_Finalize of one rank under mpirun 0.044 -> 0.003 s (issue
 * 33).  A socket option: what PMIx sends is unchanged, only when.  The
 * number of sockets set (0 without a PMIx server, or on another MPI).
 */
int rt_pmix_nodelay(void)
{
	static const char *vars[] = {"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
	                             "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"};
	const char *uri = NULL, *at = NULL;
	for (size_t i = 0; i < sizeof vars / sizeof *vars && !uri; i++)
		uri = getenv(vars[i]);
	if (uri && !(at = strstr(uri, "tcp4://")))
		at = strstr(uri, "tcp6://");
	const char *colon = at ? strrchr(at, ':') : NULL;
	if (!colon || colon < at + 7)
		return 0;
	char host[INET6_ADDRSTRLEN + 2], *end;
	long port = strtol(colon + 1, &end, 10);
	size_t hlen = (size_t)(colon - (at + 7));
	if (end == colon + 1 || port <= 0 || port > 65535 || hlen >= sizeof host)
		return 0;
	memcpy(host, at + 7, hlen);
	host[hlen] = 0;
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {      /* tcp6://[::1]:port */
		memmove(host, host + 1, hlen - 2);
		host[hlen - 2] = 0;
	}
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (d) {
		struct dirent *e;
		while ((e = readdir(d)))
			if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
				n += nodelay_if_peer(atoi(e->d_name), host, port);
		closedir(d);
	} else {
		for (int fd = 0; fd < 1024; fd++)
			n += nodelay_if_peer(fd, host, port);
	}
	return n;
}

/* Do all ranks share this node's memory (so shared memory carries every
 * message)?  Collective; rt.local is how many ranks this node runs. */
static int on_one_node(void)
{
	MPI_Comm node;
	int here = 0, fewest = 0;
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	MPI_Comm_size(node, &here);
	MPI_Comm_free(&node);
	rt.local = here;
	MPI_Allreduce(&here, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
	return fewest == rt.nranks;
}

/* A signal that ends the run (mpirun's SIGTERM when another rank fails,
 * ^C, the file-size limit): this rank's temporary files go first. */
static void on_signal(int sig)
{
	rt_remove_temps();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void catch_signals(void)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGXFSZ};
	for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction sa, old;
		if (sigaction(sigs[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL)
			continue;       /* ignored, or someone's own handler */
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_signal;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

int trt_init(int *argc, char ***argv, const TrtProgram *progs, int nprogs)
{
	char msg[1024];
	int init = 0;

	int level = MPI_THREAD_SINGLE;
	MPI_Initialized(&init);
	if (!init) {
		launch_defaults();
		/* serialized: the two-phase schedule's progress thread makes the
		 * MPI calls while the main thread computes, never both at once */
		MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &level);
		rt_pmix_nodelay();
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

	rt_cmdline(*argc, *argv, progs, nprogs);

	if (nprogs > 1 && prog->planned_ranks != rt.nranks && rt.rank == 0) {
		rt_plans_str(msg, sizeof msg, progs, nprogs);
		fprintf(stderr, "%s: no plan for %d rank%s (plans for %s): running the plan for %d on all %d\n",
		        rt_progname(), rt.nranks, rt.nranks == 1 ? "" : "s", msg, prog->planned_ranks, rt.nranks);
	}

	catch_signals();
	rt_check_files();
	rt_blas_init();
	rt_profile_init();
	rt_spill_init();
	rt_mem_check();
	rt_ckpt_init();
	rt_progress_init();
	rt_trace_init();        /* last: its clock starts at a barrier here */
	return plan;
}

int trt_finish(void)
{
	rt_prefault_end();
	rt_progress_end();
	rt_profile_report();
	rt_trace_write();
	rt_spill_finish();
	fflush(stdout);
	if (mpi_live())
		MPI_Finalize();
	return 0;
}
