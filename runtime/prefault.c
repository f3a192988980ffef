/*
 * prefault.c: new chunk memory faulted in by a second thread, on a core the
 * job leaves idle.
 *
 * On the virtual machines we run on, the first touch of memory new to a
 * process is most of what making a big chunk costs: 36 MB faulted in by
 * one madvise(MADV_POPULATE_WRITE) took 0.019-0.026 s, and normal(0, 1)'s
 * 9M floats written into it 0.022 more (rel.c's map_big; bench/README.md,
 * "Start-up").  When this host runs one rank of the job and the machine
 * has a core that rank is not bound to (mpirun -np 1 binds it to one;
 * ./prog alone may run anywhere), that core faults the chunk in while the
 * rank writes it: map_big hands the new range here, the thread populates
 * it front to back a PIECE at a time, and the rank writes behind it
 * (where it catches up, it faults a page in itself, as without the
 * thread).  The same 9M floats took 0.024-0.034 s so, against 0.044-0.049.
 *
 * What the thread touches.  Only ranges map_big handed it and unmap_big
 * has not taken back: before a mapping is cached or unmapped,
 * rt_prefault_forget drops its queued ranges and waits for the piece in
 * hand (a PIECE, under a millisecond), so the thread never populates memory
 * that has become another mapping's.  Populating does not change the data,
 * and the rank writes every page it would have written without it, so
 * results, peaks and the plan's memory are the same; the thread makes no
 * MPI call.
 *
 * When.  Not with more than one rank on this host (they use its cores),
 * not when BLIS runs threads of its own, not below PREFAULT_MIN (the hand
 * over costs a wake-up), and not with TRAC_PREFAULT=0; TRAC_PREFAULT=1 asks
 * for it whatever the rank count (a benchmark's side by side).  The thread
 * starts with the first range, on the cores the rank is not bound to, or
 * on the rank's own when it has more than one.
 */
#define _GNU_SOURCE                    /* CPU_SET, pthread_attr_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt.h"

#define PIECE ((size_t)1 << 20)
#define PREFAULT_MIN ((size_t)4 << 20)
#define QUEUE 64

static struct {
	int state;                      /* 0 undecided, 1 the thread runs, -1 never */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* a range queued, or the one in hand put down */
	struct { char *p; size_t len; } q[QUEUE];       /* first come first */
	int n;
	char *cur;                      /* the range in hand, or NULL */
	size_t curlen;
	atomic_int cancel;              /* drop the range in hand */
	int quit;
} pf;

static void *populate_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pf.mu);
	for (;;) {
		while (!pf.n && !pf.quit)
			pthread_cond_wait(&pf.cv, &pf.mu);
		if (pf.quit)
			break;
		char *p = pf.cur = pf.q[0].p;
		size_t len = pf.curlen = pf.q[0].len;
		memmove(pf.q, pf.q + 1, (size_t)--pf.n * sizeof pf.q[0]);
		atomic_store(&pf.cancel, 0);
		pthread_mutex_unlock(&pf.mu);
		for (size_t off = 0; off < len && !atomic_load(&pf.cancel); off += PIECE) {
#ifdef MADV_POPULATE_WRITE
			if (madvise(p + off, len - off < PIECE ? len - off : PIECE, MADV_POPULATE_WRITE))
				break;  /* a kernel before 5.14: the rank faults the rest */
#endif
		}
		pthread_mutex_lock(&pf.mu);
		pf.cur = NULL;
		pthread_cond_broadcast(&pf.cv);
	}
	pthread_mutex_unlock(&pf.mu);
	return NULL;
}

/* Whether the thread may run, and if so started: see the head comment. */
static int start(void)
{
	const char *env = getenv("TRAC_PREFAULT");
	int forced = env && !strcmp(env, "1");
	if (env && !strcmp(env, "0"))
		return -1;
	if (!forced && (rt.local != 1 || rt_blas_threads() > 1))
		return -1;
#ifdef MADV_POPULATE_WRITE
	/* a kernel before 5.14 refuses the advice whatever the range */
	if (madvise((void *)(uintptr_t)sysconf(_SC_PAGESIZE), 0, MADV_POPULATE_WRITE))
		return -1;
#else
	return -1;
#endif
	cpu_set_t own, other;
	if (sched_getaffinity(0, sizeof own, &own))
		return -1;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	if (CPU_COUNT(&own) < 2) {
		/* bound to one core (mpirun's default): the thread on the others */
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
		CPU_ZERO(&other);
		for (int c = 0; c < CPU_SETSIZE && c < ncpu; c++)
			if (!CPU_ISSET(c, &own))
				CPU_SET(c, &other);
		if (!CPU_COUNT(&other) || pthread_attr_setaffinity_np(&attr, sizeof other, &other)) {
			pthread_attr_destroy(&attr);
			return -1;
		}
	}
	pthread_mutex_init(&pf.mu, NULL);
	pthread_cond_init(&pf.cv, NULL);
	int ok = pthread_create(&pf.th, &attr, populate_thread, NULL) == 0;
	pthread_attr_destroy(&attr);
	return ok ? 1 : -1;
}

int rt_prefault(void *p, size_t len)
{
	if (len < PREFAULT_MIN)
		return 0;
	if (!pf.state)
		pf.state = start();
	if (pf.state < 0)
		return 0;
	pthread_mutex_lock(&pf.mu);
	int taken = pf.n < QUEUE;
	if (taken) {
		pf.q[pf.n].p = p;
		pf.q[pf.n].len = len;
		pf.n++;
		pthread_cond_broadcast(&pf.cv);
	}
	pthread_mutex_unlock(&pf.mu);
	return taken;
}

static int overlaps(const char *a, size_t alen, const char *b, size_t blen)
{
	return a < b + blen && b < a + alen;
}

void rt_prefault_forget(void *p, size_t len)
{
	if (pf.state <= 0)
		return;
	pthread_mutex_lock(&pf.mu);
	for (int i = 0; i < pf.n;)
		if (overlaps(pf.q[i].p, pf.q[i].len, p, len))
			memmove(pf.q + i, pf.q + i + 1, (size_t)(--pf.n - i) * sizeof pf.q[0]);
		else
			i++;
	while (pf.cur && overlaps(pf.cur, pf.curlen, p, len)) {
		atomic_store(&pf.cancel, 1);
		pthread_cond_wait(&pf.cv, &pf.mu);
	}
	pthread_mutex_unlock(&pf.mu);
}

void rt_prefault_end(void)
{
	if (pf.state <= 0)
		return;
	pthread_mutex_lock(&pf.mu);
	pf.quit = 1;
	pf.n = 0;
	atomic_store(&pf.cancel, 1);
	pthread_cond_broadcast(&pf.cv);
	pthread_mutex_unlock(&pf.mu);
	pthread_join(pf.th, NULL);
	pf.state = -1;
}
