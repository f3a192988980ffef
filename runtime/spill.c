/*
 * spill.c: this rank's spill file, the thread that reads and writes it, and
 * the options that set them up (--mem-budget, --spill-dir).  What goes to
 * the file and when is store.c's.
 *
 * The file.  One per rank, in --spill-dir (default $TMPDIR, else /tmp),
 * opened O_TMPFILE: it has no name, so nothing is left behind however the
 * process ends, SIGKILL included; where the file system lacks O_TMPFILE, a
 * mkstemp name is unlinked at once (a window of one system call).  It is
 * opened at start-up when a budget is set or --spill-dir is given, and one
 * block is written to it, so a folder that is missing, not writable or
 * full is one line and status 1 on every rank before the first op.
 *
 * Extents.  A chunk's copy is one extent, its bytes rounded up to BLOCK;
 * freed extents go to a free list (by offset, neighbours merged, first fit)
 * and their blocks back to the file system (FALLOC_FL_PUNCH_HOLE), so the
 * file holds about what is spilled now, not the most ever spilled.
 *
 * The I/O thread.  Reads and writes run on one thread in the order asked
 * (an urgent read, one the main thread is about to wait for, goes first),
 * so that reading ahead and writing back overlap the computation.  The
 * thread makes no MPI call and touches nothing but the requests' buffers
 * and its queue; the main thread owns every chunk, and counts and traces a
 * request when it takes it back (rt_io_end).  A failed write ends the job
 * with one line naming the folder (ENOSPC: it is full) and status 1; the
 * outputs are safe, as they are written to a temporary name and renamed at
 * the end.
 */
#define _GNU_SOURCE                    /* O_TMPFILE, fallocate */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

#define BLOCK ((int64_t)4096)

struct IoReq {
	int write, urgent;
	char *buf;
	size_t n;
	int64_t off;
	int done, err;                  /* set by the thread, under mu */
	int64_t t0, t1;                 /* when the thread started and ended it */
	IoReq *next;
};

static struct {
	const char *dir;                /* --spill-dir, else $TMPDIR, else /tmp */
	int given;                      /* --spill-dir was given */
	int fd;
	int64_t end;                    /* the file's length in use */
	struct { int64_t off, len; } *free;
	int64_t nfree, cfree;
	double in_file;                 /* bytes of extents in use */
	/* the thread and its queue */
	int started;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* the queue grew, or a request is done */
	IoReq *head, *tail;
	int quit;
} sp = {.fd = -1};

/* ---- the options ---- */

/* "512M", "1.5G", "1048576": bytes (K, M, G, T are powers of 1024), or -1. */
static double parse_size(const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || errno || v < 0)
		return -1;
	static const char units[] = "KMGT";
	const char *u = *end ? strchr(units, *end == 'k' ? 'K' : *end) : NULL;
	if (u && *end) {
		for (const char *p = units; p <= u; p++)
			v *= 1024;
		end++;
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
	}
	return *end ? -1 : v;
}

static int set_budget(const char *what, const char *v, char *msg, size_t len)
{
	double b = parse_size(v);
	if (b <= 0) {
		snprintf(msg, len, "%s: %s needs a size in bytes (such as 64M or 2G), found '%s'", rt_progname(), what, v);
		return 0;
	}
	rt.budget = b;
	return 1;
}

int rt_spill_arg(int argc, char **argv, int *a, char *msg, size_t len)
{
	const char *arg = argv[*a];
	*msg = 0;
	if (!strcmp(arg, "--in-memory")) {
		rt.in_memory = 1;
		return 1;
	}
	int budget = !strncmp(arg, "--mem-budget", 12) && (!arg[12] || arg[12] == '=');
	int dir = !strncmp(arg, "--spill-dir", 11) && (!arg[11] || arg[11] == '=');
	if (!budget && !dir)
		return 0;
	size_t k = budget ? 12 : 11;
	const char *v = arg[k] == '=' ? arg + k + 1 : *a + 1 < argc ? argv[++*a] : "";
	if (dir) {
		if (!*v)
			snprintf(msg, len, "%s: --spill-dir needs a folder", rt_progname());
		sp.dir = v;
		sp.given = 1;
	} else {
		set_budget("--mem-budget", v, msg, len);
	}
	return 1;
}

void rt_spill_help(void)
{
	printf("  --mem-budget SIZE  hold at most SIZE bytes of chunks in memory per rank (512M, 2G):\n"
	       "               the others wait in a spill file (or TRAC_MEM_BUDGET=SIZE)\n");
	printf("  --spill-dir DIR    the folder of the spill files (default $TMPDIR, else /tmp)\n");
	printf("  --in-memory        stop before the run if the plan does not fit in the memory a rank\n"
	       "               can have, rather than run out of core\n");
}

/* ---- the file ---- */

/* Opens this rank's nameless file in the folder: the descriptor, or -1
 * with errno set. */
static int open_file(const char *dir)
{
#ifdef O_TMPFILE
	int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
#endif
	size_t n = strlen(dir) + 32;
	char *name = rt_alloc(n);
	snprintf(name, n, "%s/.trac-spill-XXXXXX", dir);
	int fd2 = mkstemp(name);
	if (fd2 >= 0)
		unlink(name);
	free(name);
	return fd2;
}

static const char *size_str(char *buf, size_t len, double b)
{
	static const char *unit[] = {"bytes", "KB", "MB", "GB", "TB"};
	int u = 0;
	while (b >= 1000 && u < 4) {
		b /= 1000;
		u++;
	}
	snprintf(buf, len, u ? "%.3g %s" : "%.0f %s", b, unit[u]);
	return buf;
}

/* A write to the file failed with error e: the end of the job. */
static void __attribute__((noreturn)) write_failed(int e, size_t n)
{
	char a[32], b[32];
	if (e == ENOSPC || e == EDQUOT)
		trt_fatal("the spill folder %s is full: rank %d could not write %s of chunks there (it holds "
		          "%s of them); free space there, give another folder with --spill-dir, or a larger "
		          "--mem-budget", sp.dir, rt.rank, size_str(a, sizeof a, (double)n),
		          size_str(b, sizeof b, sp.in_file));
	trt_fatal("rank %d could not write %s of chunks to its spill file in %s: %s", rt.rank,
	          size_str(a, sizeof a, (double)n), sp.dir, strerror(e));
}

/* Opens this rank's spill file in the folder: NULL, or the error's line
 * in msg. */
static const char *open_spill(char *msg, size_t len)
{
	static char block[BLOCK];
	sp.fd = open_file(sp.dir);
	int e = sp.fd < 0 ? errno : 0;
	if (!e && !rt_pwrite_full(sp.fd, block, sizeof block, 0))
		e = errno ? errno : EIO;
	if (e == ENOSPC || e == EDQUOT)
		snprintf(msg, len, "%s: the spill folder %s is full (--spill-dir)", rt_progname(), sp.dir);
	else if (e)
		snprintf(msg, len, "%s: cannot make a spill file in %s (--spill-dir): %s", rt_progname(),
		         sp.dir, strerror(e));
	if (!e && ftruncate(sp.fd, 0) < 0)
		(void)0;        /* the block stays: harmless */
	return e ? msg : NULL;
}

void rt_spill_init(void)
{
	const char *env = getenv("TRAC_MEM_BUDGET");
	char msg[1024];
	const char *err = NULL;
	if (env && *env && rt.budget == 0 && !set_budget("TRAC_MEM_BUDGET", env, msg, sizeof msg))
		err = msg;
	if (rt.budget == 0 && rt.prog->mem_budget > 0)
		rt.budget = rt.prog->mem_budget;        /* the plan's (trac --mem-per-rank) */
	if (!sp.dir) {
		const char *t = getenv("TMPDIR");
		sp.dir = t && *t ? t : "/tmp";
	}
	if (!err && (rt.budget > 0 || sp.given))
		err = open_spill(msg, sizeof msg);
	rt_agree(err);
}

const char *rt_spill_dir(void)
{
	return sp.dir;
}

/* A budget set after rt_spill_init (guard.c: the plan does not fit in
 * what this rank can have): NULL, or the error's line in msg. */
const char *rt_spill_start(double budget, char *msg, size_t len)
{
	rt.budget = budget;
	return sp.fd >= 0 ? NULL : open_spill(msg, len);
}

/* An extent of n bytes (rounded up to BLOCK): its offset. */
int64_t rt_spill_alloc(size_t n)
{
	int64_t len = ((int64_t)n + BLOCK - 1) / BLOCK * BLOCK;
	if (len == 0)
		len = BLOCK;
	sp.in_file += (double)len;
	for (int64_t i = 0; i < sp.nfree; i++)
		if (sp.free[i].len >= len) {
			int64_t off = sp.free[i].off;
			sp.free[i].off += len;
			sp.free[i].len -= len;
			if (sp.free[i].len == 0) {
				memmove(&sp.free[i], &sp.free[i + 1], sizeof *sp.free * (size_t)(sp.nfree - i - 1));
				sp.nfree--;
			}
			return off;
		}
	int64_t off = sp.end;
	sp.end += len;
	return off;
}

void rt_spill_free(int64_t off, size_t n)
{
	int64_t len = ((int64_t)n + BLOCK - 1) / BLOCK * BLOCK;
	if (len == 0)
		len = BLOCK;
	sp.in_file -= (double)len;
#ifdef FALLOC_FL_PUNCH_HOLE
	if (fallocate(sp.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len) < 0)
		(void)0;        /* the blocks stay allocated: only disk space */
#endif
	if (off + len == sp.end) {      /* the last extent: the file shrinks */
		sp.end = off;
		while (sp.nfree > 0 && sp.free[sp.nfree - 1].off + sp.free[sp.nfree - 1].len == sp.end)
			sp.end = sp.free[--sp.nfree].off;
		return;
	}
	int64_t i = 0;
	while (i < sp.nfree && sp.free[i].off < off)
		i++;
	if (i > 0 && sp.free[i - 1].off + sp.free[i - 1].len == off) {
		sp.free[i - 1].len += len;
		if (i < sp.nfree && off + len == sp.free[i].off) {
			sp.free[i - 1].len += sp.free[i].len;
			memmove(&sp.free[i], &sp.free[i + 1], sizeof *sp.free * (size_t)(sp.nfree - i - 1));
			sp.nfree--;
		}
		return;
	}
	if (i < sp.nfree && off + len == sp.free[i].off) {
		sp.free[i].off = off;
		sp.free[i].len += len;
		return;
	}
	if (sp.nfree == sp.cfree) {
		sp.cfree = sp.cfree ? 2 * sp.cfree : 64;
		sp.free = rt_realloc(sp.free, sizeof *sp.free * (size_t)sp.cfree);
	}
	memmove(&sp.free[i + 1], &sp.free[i], sizeof *sp.free * (size_t)(sp.nfree - i));
	sp.free[i].off = off;
	sp.free[i].len = len;
	sp.nfree++;
}

double rt_spill_file_bytes(void)
{
	return sp.in_file;
}

/* ---- the thread ---- */

static void *io_thread(void *arg)
{
	(void)arg;
	/* TRAC_SPILL_DELAY_US: each request that long late, a slow disk or a
	 * loaded machine on demand (tests/e2e/spill.sh) */
	const char *env = getenv("TRAC_SPILL_DELAY_US");
	long delay = env ? atol(env) : 0;
	pthread_mutex_lock(&sp.mu);
	for (;;) {
		while (!sp.head && !sp.quit)
			pthread_cond_wait(&sp.cv, &sp.mu);
		if (!sp.head)
			break;
		IoReq *q = sp.head;
		sp.head = q->next;
		if (!sp.head)
			sp.tail = NULL;
		pthread_mutex_unlock(&sp.mu);
		if (delay > 0)
			usleep((useconds_t)delay);
		int64_t t0 = rt_trace_clock();
		int err = 0;
		if (q->write) {
			if (!rt_pwrite_full(sp.fd, q->buf, q->n, q->off))
				err = errno ? errno : EIO;
		} else {
			ssize_t k = rt_pread_full(sp.fd, q->buf, q->n, q->off);
			if (k < 0 || (size_t)k != q->n)
				err = k < 0 ? errno : EIO;
		}
		int64_t t1 = rt_trace_clock();
		pthread_mutex_lock(&sp.mu);
		q->t0 = t0;
		q->t1 = t1;
		q->err = err;
		q->done = 1;
		pthread_cond_broadcast(&sp.cv);
	}
	pthread_mutex_unlock(&sp.mu);
	return NULL;
}

/* Without the thread (it could not start), requests run when asked. */
static void run_now(IoReq *q)
{
	q->t0 = rt_trace_clock();
	if (q->write) {
		if (!rt_pwrite_full(sp.fd, q->buf, q->n, q->off))
			q->err = errno ? errno : EIO;
	} else {
		ssize_t k = rt_pread_full(sp.fd, q->buf, q->n, q->off);
		if (k < 0 || (size_t)k != q->n)
			q->err = k < 0 ? errno : EIO;
	}
	q->t1 = rt_trace_clock();
	q->done = 1;
}

IoReq *rt_io_start(int write, char *buf, size_t n, int64_t off, int urgent)
{
	IoReq *q = rt_alloc(sizeof *q);
	memset(q, 0, sizeof *q);
	q->write = write;
	q->urgent = urgent;
	q->buf = buf;
	q->n = n;
	q->off = off;
	if (sp.fd < 0)
		rt_bug("spill I/O without a spill file");
	if (!sp.started) {
		pthread_mutex_init(&sp.mu, NULL);
		pthread_cond_init(&sp.cv, NULL);
		sp.started = pthread_create(&sp.th, NULL, io_thread, NULL) == 0 ? 1 : -1;
	}
	if (sp.started < 0) {
		run_now(q);
		return q;
	}
	pthread_mutex_lock(&sp.mu);
	if (urgent || !sp.head) {       /* an urgent one before every queued one */
		q->next = sp.head;
		sp.head = q;
		if (!sp.tail)
			sp.tail = q;
	} else {
		sp.tail->next = q;
		sp.tail = q;
	}
	pthread_cond_broadcast(&sp.cv);
	pthread_mutex_unlock(&sp.mu);
	return q;
}

int rt_io_writes(const IoReq *q)
{
	return q->write;
}

int rt_io_done(IoReq *q)
{
	if (sp.started < 0)
		return 1;
	pthread_mutex_lock(&sp.mu);
	int d = q->done;
	pthread_mutex_unlock(&sp.mu);
	return d;
}

/* Waits for q: a queued read becomes urgent.  The time waited is
 * rt.spill_wait's, and --trace's wait span. */
void rt_io_wait(IoReq *q)
{
	if (sp.started < 0)
		return;
	pthread_mutex_lock(&sp.mu);
	if (q->done) {
		pthread_mutex_unlock(&sp.mu);
		return;
	}
	int64_t t0 = rt_trace_clock();
	if (sp.head != q) {
		/* move it to the front, if it is still queued */
		IoReq *prev = NULL;
		for (IoReq *p = sp.head; p; prev = p, p = p->next)
			if (p == q) {
				prev->next = q->next;
				if (sp.tail == q)
					sp.tail = prev;
				q->next = sp.head;
				sp.head = q;
				break;
			}
	}
	while (!q->done)
		pthread_cond_wait(&sp.cv, &sp.mu);
	pthread_mutex_unlock(&sp.mu);
	int64_t t1 = rt_trace_clock();
	rt.spill_wait += (double)(t1 - t0) * 1e-9;
	if (rt.trace)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, q->write ? "spill write" : "spill read");
}

/* Takes back a request that is done: counts its bytes, traces it, and ends
 * the job when it failed. */
void rt_io_end(IoReq *q)
{
	if (q->err) {
		if (q->write)
			write_failed(q->err, q->n);
		trt_fatal("rank %d could not read its spill file in %s back: %s", rt.rank, sp.dir,
		          q->err == EIO ? "input/output error (the file is shorter than written)" : strerror(q->err));
	}
	if (q->write)
		rt.spill_w += (double)q->n;
	else
		rt.spill_r += (double)q->n;
	if (rt.trace)
		rt_trace_io(q->write, q->t0, q->t1, (double)q->n);
	free(q);
}

void rt_spill_finish(void)
{
	if (sp.started > 0) {
		pthread_mutex_lock(&sp.mu);
		sp.quit = 1;
		pthread_cond_broadcast(&sp.cv);
		pthread_mutex_unlock(&sp.mu);
		pthread_join(sp.th, NULL);
		sp.started = 0;
	}
	if (sp.fd >= 0)
		close(sp.fd);
	sp.fd = -1;
}
