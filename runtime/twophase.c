/*
 * twophase.c: trt_twophase, a contraction run by a two-phase schedule.
 *
 * The compiler planned, per join group (one chunk of each input meeting in
 * the kernel), the rank that runs it (optimizer/twophase.c, after Jankov et
 * al.'s two-phase execution of aggregated join trees).  Here every rank
 * works out from that table, the inputs' placements and the output's, the
 * same communication schedule, and runs its part:
 *
 *   1. each chunk a rank holds goes, once, to every other rank that runs a
 *      join group reading it: one nonblocking message per chunk per
 *      destination (no keys travel: both ends know which chunk comes next);
 *   2. a counter per join group of the chunks it still lacks; at zero the
 *      join group's kernel runs, accumulating (acc = 1 after the first) into
 *      one chunk per output tuple (local pre-aggregation);
 *   3. when all of a rank's join groups of an output tuple have run, the sum
 *      goes to the tuple's rank under the output's placement, which combines
 *      the sums of all ranks once they are in.
 *
 * Receives are posted before anything is sent, so no message is ever
 * unexpected and big ones go straight into their chunks (under a memory
 * budget, within a window per peer: Tp.window).  Messages between
 * two ranks match in the order posted (MPI's non-overtaking rule): both ends
 * enumerate the chunks in the same order (input, then chunk number), and
 * partial sums to one rank are posted in output-tuple order even when they
 * are ready in another.
 *
 * Determinism.  Kernels fire as chunks arrive, but the join groups of one
 * output tuple accumulate in join-group order (a group that is ready waits
 * for the ones before it), and sums are combined in rank order: the result
 * depends on the data and the rank count only, never on message timing.
 *
 * Bytes counted for --profile are chunk bytes only: the plan's prediction
 * exactly, when run on the rank count it was planned for.
 *
 * Progress.  MPI moves a message only inside MPI calls, and over TCP a big
 * one needs many (a rendezvous, then the data in fragments): tested only
 * between two gemms of tens of milliseconds, a chunk advances one step per
 * gemm, and a rank out of work waits for its peer's next gemm to end (a
 * 4000^3 matmul on 2 ranks took 1.4x the time of waiting for every input
 * first).  So while the schedule runs, a second thread makes every MPI call
 * (`progress`): it tests the receives every few tens of microseconds,
 * sleeping between, posts the sums the main thread hands it, and hands back
 * the receives that completed.  MPI is initialised MPI_THREAD_SERIALIZED
 * (init.c) and the main thread makes no MPI call while the thread runs.
 * Idle, the thread sleeps twice as long each time, up to 0.5 ms.  It runs
 * only when some ranks are on other nodes (or TRAC_PROGRESS_THREAD=1): on
 * one node shared memory moves a message in one call, and the thread's
 * wake-ups cost more than they save (2 ranks on 2 cores: a 4000^3 matmul
 * 1.35x slower).  Otherwise, or with TRAC_PROGRESS_THREAD=0, the main thread
 * tests between kernels itself.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt.h"

enum { TAG_TP_IN = 7301, TAG_TP_SUM = 7302 };

int rt_no_overlap;

/* A message being received: an input chunk (side 0, 1) or a partial sum
 * (side 2, chunk = output tuple, from = the sending rank). */
typedef struct Msg {
	int side;
	int from;
	int64_t chunk;
	Chunk *c;                       /* made, and held, when the receive is posted */
	size_t nb;
	int pieces;                     /* still to arrive */
} Msg;

/* A send to one rank: an input chunk, or a partial sum; held while its
 * pieces travel. */
typedef struct Out {
	Chunk *c;
	size_t n;
	int tag, left;                  /* left: pieces not complete; -1 not posted */
} Out;

/* Posts n bytes at p in pieces of at most rt_msg_limit; returns the count. */
static int post_pieces(MPI_Request **reqs, int64_t *nreq, int64_t *cap, int64_t **owner, int64_t who,
                       int send, char *p, size_t n, int peer, int tag)
{
	int pieces = 0;
	size_t lim = (size_t)rt_msg_limit;
	for (size_t off = 0; off < n; off += lim) {
		size_t len = n - off < lim ? n - off : lim;
		if (*nreq == *cap) {
			*cap = *cap ? 2 * *cap : 64;
			*reqs = rt_realloc(*reqs, sizeof **reqs * (size_t)*cap);
			if (owner)
				*owner = rt_realloc(*owner, sizeof **owner * (size_t)*cap);
		}
		if (owner)
			(*owner)[*nreq] = who;
		if (send)
			MPI_Isend(p + off, (int)len, MPI_BYTE, peer, tag, rt.comm, &(*reqs)[*nreq]);
		else
			MPI_Irecv(p + off, (int)len, MPI_BYTE, peer, tag, rt.comm, &(*reqs)[*nreq]);
		(*nreq)++;
		pieces++;
	}
	return pieces;
}

/* A send the main thread asks the progress thread to post. */
typedef struct Send {
	char *p;
	size_t n;
	int peer, tag;
} Send;

/* The progress thread and what the two threads hand each other, under mu. */
typedef struct Prog {
	int on;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* signalled when done grows */
	int stop;                       /* main: no more sends will come */
	Send *q;                        /* sends asked for, not yet posted */
	int64_t nq, cq;
	int *done;                      /* completed receive requests, not yet taken */
	int64_t ndone, cdone;
	int *idx;                       /* the thread's MPI_Testsome indices */
} Prog;

/* The whole state of one call. */
typedef struct Tp {
	const TrtRel *in[2];
	const TrtJoin *j;
	TrtKernel k;
	const TrtType *out;
	TrtPlace p;
	TrtAgg agg;
	int me, nr;
	int nl, nfree, rfree[TRT_MAXDIM], jn;
	int64_t jf[TRT_MAXDIM];         /* join-space frontiers */
	int64_t njoin, nagg, nchunk[2];
	int *jsite;                     /* per join group: its rank */
	int *holder[2];                 /* per chunk: its rank, -1 every rank */
	char *want[2];                  /* [c * nr + d]: chunk c goes to rank d (set up only) */
	Chunk **have[2];                /* per chunk: here (held or received), else NULL */
	int *uses[2];                   /* per received chunk: my join groups still to read it */
	/* my join groups, by output tuple: mine[gfirst[g] .. gfirst[g+1]) */
	int64_t *mine, *gfirst, *gnext;
	int *missing;                   /* per join group (all, only mine used) */
	int64_t *rev_first[2], *rev;    /* per chunk: my join groups reading it, when received */
	Chunk **acc;                    /* per output tuple: my sum */
	int *ysite;                     /* per output tuple: its rank */
	int *nsum;                      /* per output tuple of mine (ysite == me): sums still to come */
	Chunk ***sums;                  /* per output tuple of mine: per rank, its sum */
	char *contrib;                  /* [g * nr + rank]: the rank runs a join group of g */
	/* sums to send, per destination in output-tuple order */
	int64_t **outq, *outn, *outpos;
	char *done;                     /* per output tuple: my join groups of it have run */
	int64_t left;                   /* output tuples of mine not yet final */
	TrtRel *res;
	MPI_Request *sreq;
	int64_t nsreq, csreq;
	/* receives: requests (several per message when it comes in pieces),
	 * the message each belongs to, how many are still open */
	MPI_Request *rreq;
	int64_t nrreq, crreq, *rown, pending;
	int64_t inputs;                 /* input chunks still to arrive */
	Msg *msg;
	int64_t nmsg, cmsg;
	int *idx;
	int64_t cidx;
	int64_t nmine;
	/* Under a memory budget each pair of ranks keeps at most `window`
	 * bytes in flight each way (rt.budget / 8 over the peers, one message
	 * at least): receives are posted per source in the order both ends
	 * know, as earlier ones complete (rq, rin), and sends likewise per
	 * destination (sq, sin); a chunk is held only while its message
	 * travels, so what has arrived may be spilled until its kernels run.
	 * The main thread makes the MPI calls then (no progress thread).
	 * Without a budget the window is infinite: everything is posted at
	 * once, as before. */
	double window;
	int64_t **rq, *rqn, *rqnext, unposted;
	double *rin;
	Out **sq;
	int64_t *sqn, *sqcap, *sqnext, *sdest, *sidx, csown;
	double *sin;
	int *stest;
	/* output tuples whose next join group of mine may have become
	 * runnable: a ring, each tuple in it at most once */
	int64_t *ring, rhead, rlen;
	char *queued;
	/* under a budget, the output tuples that run now: [tfrom, tend), a
	 * tile of them whose sums take at most half the budget (tile_end) */
	int64_t tfrom, tend;
	Prog prog;
} Tp;

static void key_of(const int64_t *f, int n, int64_t lin, int64_t *key)
{
	for (int d = n - 1; d >= 0; d--) {
		key[d] = lin % f[d];
		lin /= f[d];
	}
}

/* The chunks of join group jg: left key, right key, output key. */
static void group_keys(const Tp *t, int64_t jg, int64_t *lk, int64_t *rk, int64_t *ok)
{
	int64_t jk[TRT_MAXDIM];
	key_of(t->jf, t->jn, jg, jk);
	memcpy(lk, jk, sizeof *lk * (size_t)t->nl);
	const TrtJoin *j = t->j;
	for (int d = 0, f = 0; d < t->in[1]->type.nkey; d++) {
		int m = -1;
		for (int i = 0; i < j->nmatch; i++)
			if (j->rkey[i] == d)
				m = i;
		rk[d] = m >= 0 ? jk[j->lkey[m]] : jk[t->nl + f++];
	}
	rt_key_pick(ok, jk, j->ngroup, j->group);
}

/* Output tuple g is complete here: combine the ranks' sums in rank order. */
static void finish_tuple(Tp *t, int64_t g)
{
	int64_t key[TRT_MAXDIM];
	rt_key_from_linear(t->out, g, key);
	int64_t n = rt_chunk_shape(t->out, key, NULL);
	Chunk *res = NULL;
	for (int q = 0; q < t->nr; q++) {
		Chunk *c = q == t->me ? t->acc[g] : t->sums[g] ? t->sums[g][q] : NULL;
		if (!t->contrib[g * t->nr + q])
			continue;
		if (!res) {
			res = c;
			continue;
		}
		size_t mark = rt_pin_mark();
		rt_combine(t->out->dtype, rt_chunk_mut(res), rt_chunk_data(c), n, t->agg);
		rt_pin_release(mark);
		rt_chunk_unref(c);
	}
	if (t->sums[g])
		free(t->sums[g]);
	t->sums[g] = NULL;
	t->acc[g] = NULL;
	rt_rel_push(t->res, key, res);
	t->left--;
}

/* ---- posting within the window ---- */

static void grow_idx(Tp *t)
{
	if (t->nrreq + 1 > t->cidx) {
		t->cidx = 2 * (t->nrreq + 1);
		t->idx = rt_realloc(t->idx, sizeof *t->idx * (size_t)t->cidx);
	}
}

/* Posts source from's next receives while its window allows. */
static void post_recvs(Tp *t, int from)
{
	while (t->rqnext[from] < t->rqn[from]) {
		int64_t k = t->rq[from][t->rqnext[from]];
		Msg *m = &t->msg[k];
		if (t->rin[from] > 0 && t->rin[from] + (double)m->nb > t->window)
			break;
		size_t mark = rt_pin_mark();
		m->c = rt_chunk_new(m->nb);
		char *p = rt_chunk_hold(m->c, 1);
		rt_pin_release(mark);
		int64_t t0 = rt_span_begin();
		m->pieces = post_pieces(&t->rreq, &t->nrreq, &t->crreq, &t->rown, k, 0, p, m->nb, from,
		                        m->side < 2 ? TAG_TP_IN : TAG_TP_SUM);
		if (t0)
			rt_trace_span(RT_SPAN_RECV, t0, from, (double)m->nb, 0, m->side < 2 ? "chunk" : "sum");
		rt_count_recv((double)m->nb);
		t->pending += m->pieces;
		t->unposted--;
		t->rin[from] += (double)m->nb;
		t->rqnext[from]++;
		grow_idx(t);
	}
}

/* Posts destination d's next sends while its window allows. */
static void post_sends(Tp *t, int d)
{
	while (t->sqnext[d] < t->sqn[d]) {
		int64_t k = t->sqnext[d];
		Out *o = &t->sq[d][k];
		if (t->sin[d] > 0 && t->sin[d] + (double)o->n > t->window)
			break;
		char *p = rt_chunk_hold(o->c, 0);
		int64_t first = t->nsreq, t0 = rt_span_begin();
		o->left = post_pieces(&t->sreq, &t->nsreq, &t->csreq, NULL, 0, 1, p, o->n, d, o->tag);
		if (t0)
			rt_trace_span(RT_SPAN_SEND, t0, d, (double)o->n, 0, o->tag == TAG_TP_IN ? "chunk" : "sum");
		rt_count_sent((double)o->n);
		if (t->nsreq > t->csown) {
			t->csown = 2 * t->nsreq;
			t->sdest = rt_realloc(t->sdest, sizeof *t->sdest * (size_t)t->csown);
			t->sidx = rt_realloc(t->sidx, sizeof *t->sidx * (size_t)t->csown);
			t->stest = rt_realloc(t->stest, sizeof *t->stest * (size_t)t->csown);
		}
		for (int64_t q = first; q < t->nsreq; q++) {
			t->sdest[q] = d;
			t->sidx[q] = k;
		}
		if (!o->left)
			rt_chunk_unhold(o->c);
		t->sin[d] += (double)o->n;
		t->sqnext[d]++;
	}
}

static void queue_send(Tp *t, int d, Chunk *c, size_t n, int tag)
{
	if (t->sqn[d] == t->sqcap[d]) {
		t->sqcap[d] = t->sqcap[d] ? 2 * t->sqcap[d] : 16;
		t->sq[d] = rt_realloc(t->sq[d], sizeof *t->sq[d] * (size_t)t->sqcap[d]);
	}
	t->sq[d][t->sqn[d]++] = (Out){c, n, tag, -1};
	post_sends(t, d);
}

/* Takes the sends that completed; returns how many pieces did. */
static int test_sends(Tp *t)
{
	int out = 0;
	if (t->nsreq == 0)
		return 0;
	MPI_Testsome((int)t->nsreq, t->sreq, &out, t->stest, MPI_STATUSES_IGNORE);
	if (out == MPI_UNDEFINED)
		return 0;
	for (int i = 0; i < out; i++) {
		int64_t q = t->stest[i];
		int d = (int)t->sdest[q];
		Out *o = &t->sq[d][t->sidx[q]];
		if (--o->left == 0) {
			rt_chunk_unhold(o->c);
			t->sin[d] -= (double)o->n;
			post_sends(t, d);
		}
	}
	return out;
}

static void windows_new(Tp *t)
{
	int nr = t->nr;
	t->window = rt.budget > 0 ? rt.budget / 8 / (nr > 1 ? nr - 1 : 1) : 1e300;
	t->rq = rt_alloc(sizeof *t->rq * (size_t)nr);
	t->rqn = rt_alloc(sizeof *t->rqn * (size_t)nr);
	t->rqnext = rt_alloc(sizeof *t->rqnext * (size_t)nr);
	t->rin = rt_alloc(sizeof *t->rin * (size_t)nr);
	t->sq = rt_alloc(sizeof *t->sq * (size_t)nr);
	t->sqn = rt_alloc(sizeof *t->sqn * (size_t)nr);
	t->sqcap = rt_alloc(sizeof *t->sqcap * (size_t)nr);
	t->sqnext = rt_alloc(sizeof *t->sqnext * (size_t)nr);
	t->sin = rt_alloc(sizeof *t->sin * (size_t)nr);
	for (int q = 0; q < nr; q++) {
		t->rq[q] = NULL;
		t->sq[q] = NULL;
		t->rqn[q] = t->rqnext[q] = t->sqn[q] = t->sqcap[q] = t->sqnext[q] = 0;
		t->rin[q] = t->sin[q] = 0;
	}
}

static void windows_free(Tp *t)
{
	for (int d = 0; d < t->nr; d++) {
		free(t->rq[d]);
		free(t->sq[d]);
	}
	free(t->rq);
	free(t->rqn);
	free(t->rqnext);
	free(t->rin);
	free(t->sq);
	free(t->sqn);
	free(t->sqcap);
	free(t->sqnext);
	free(t->sin);
	free(t->sdest);
	free(t->sidx);
	free(t->stest);
}

/* The end: the sends the windows held back, then all of them complete. */
static void sends_end(Tp *t)
{
	int64_t t0 = rt_span_begin();
	for (int d = 0; d < t->nr; d++)
		while (t->sqnext[d] < t->sqn[d])
			if (!test_sends(t))
				nanosleep(&(struct timespec){0, 20000}, NULL);
	MPI_Waitall((int)t->nsreq, t->sreq, MPI_STATUSES_IGNORE);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "sends");
	for (int d = 0; d < t->nr; d++)
		for (int64_t q = 0; q < t->sqn[d]; q++)
			if (t->sq[d][q].left > 0)
				rt_chunk_unhold(t->sq[d][q].c);
}

/* Post a sum, or hand it to the progress thread to post. */
static void send_sum(Tp *t, Chunk *c, size_t n, int d)
{
	Prog *g = &t->prog;
	if (!g->on) {
		queue_send(t, d, c, n, TAG_TP_SUM);
		return;
	}
	char *p = c->data;      /* (no budget: resident) */
	int64_t t0 = rt_span_begin();
	pthread_mutex_lock(&g->mu);
	if (g->nq == g->cq) {
		g->cq = g->cq ? 2 * g->cq : 16;
		g->q = rt_realloc(g->q, sizeof *g->q * (size_t)g->cq);
	}
	g->q[g->nq++] = (Send){p, n, d, TAG_TP_SUM};
	pthread_mutex_unlock(&g->mu);
	if (t0)
		rt_trace_span(RT_SPAN_SEND, t0, d, (double)n, 0, "sum");
	rt_count_sent((double)n);
}

/* Post the sums to rank d that are ready, in output-tuple order. */
static void flush_sums(Tp *t, int d)
{
	while (t->outpos[d] < t->outn[d] && t->done[t->outq[d][t->outpos[d]]]) {
		int64_t g = t->outq[d][t->outpos[d]++];
		Chunk *c = t->acc[g];
		int64_t key[TRT_MAXDIM];
		rt_key_from_linear(t->out, g, key);
		send_sum(t, c, rt_chunk_bytes(t->out, key), d);
	}
}

/* My join groups of output tuple g have all run. */
static void tuple_done(Tp *t, int64_t g)
{
	t->done[g] = 1;
	if (rt.budget > 0)
		rt_chunk_unhold(t->acc[g]);
	if (t->ysite[g] != t->me) {
		flush_sums(t, t->ysite[g]);
		return;
	}
	if (t->nsum[g] == 0)
		finish_tuple(t, g);
}

static void poll_arrivals(Tp *t, int block);

static void enqueue(Tp *t, int64_t g)
{
	if (t->queued[g] || t->gfirst[g] == t->gfirst[g + 1] || g >= t->tend)
		return;
	t->queued[g] = 1;
	t->ring[(t->rhead + t->rlen++) % t->nagg] = g;
}

/* Run g's join groups that are next in order and ready, looking for
 * arrivals after each (so messages progress while kernels run).  Under a
 * budget, one, g queued again behind its tile's other tuples: the tile's
 * tuples take turns, so an input chunk is read by all of them while it is
 * in memory, not once per tuple. */
static void advance(Tp *t, int64_t g)
{
	int64_t end = t->gfirst[g + 1];
	while (t->gnext[g] < end && t->missing[t->mine[t->gnext[g]]] == 0) {
		int64_t jg = t->mine[t->gnext[g]];
		int acc = t->gnext[g] > t->gfirst[g];
		int64_t lk[TRT_MAXDIM], rk[TRT_MAXDIM], ok[TRT_MAXDIM];
		group_keys(t, jg, lk, rk, ok);
		int64_t c[2] = {rt_key_linear(&t->in[0]->type, lk), rt_key_linear(&t->in[1]->type, rk)};
		size_t mark = rt_pin_mark();
		if (!acc) {
			t->acc[g] = rt_chunk_new(rt_chunk_bytes(t->out, ok));
			if (rt.budget > 0)
				rt_chunk_hold(t->acc[g], 1);    /* its tile's: stays (tile_end) */
		}
		TrtView in[2] = {
			rt_view(&t->in[0]->type, lk, t->have[0][c[0]]),
			rt_view(&t->in[1]->type, rk, t->have[1][c[1]]),
		};
		TrtView ov = rt_view_mut(t->out, ok, t->acc[g]);
		t->k(in, &ov, acc);
		rt_pin_release(mark);
		t->gnext[g]++;
		poll_arrivals(t, 0);
		/* a received chunk is freed after its last reader here */
		for (int i = 0; i < 2; i++)
			if (t->uses[i][c[i]] > 0 && --t->uses[i][c[i]] == 0) {
				rt_chunk_unref(t->have[i][c[i]]);
				t->have[i][c[i]] = NULL;
			}
		if (rt.budget > 0 && t->gnext[g] < end) {
			enqueue(t, g);
			return;
		}
	}
	if (t->gnext[g] == end && end > t->gfirst[g] && !t->done[g])
		tuple_done(t, g);
}

/* A message is in: an input chunk counts down its join groups, a sum may
 * finish its output tuple. */
static void arrived(Tp *t, Msg *m)
{
	int nr = t->nr;
	rt_chunk_unhold(m->c);
	t->rin[m->from] -= (double)m->nb;
	post_recvs(t, m->from);
	if (m->side == 2) {
		int64_t g = m->chunk;
		if (!t->sums[g]) {
			t->sums[g] = rt_alloc(sizeof *t->sums[g] * (size_t)nr);
			memset(t->sums[g], 0, sizeof *t->sums[g] * (size_t)nr);
		}
		t->sums[g][m->from] = m->c;
		if (--t->nsum[g] == 0 && (t->done[g] || !t->contrib[g * nr + t->me]))
			finish_tuple(t, g);
		return;
	}
	int i = m->side;
	int64_t c = m->chunk;
	t->have[i][c] = m->c;
	t->inputs--;
	for (int64_t q = t->rev_first[i][c]; q < t->rev_first[i][c + 1]; q++) {
		int64_t jg = t->rev[i * t->nmine + q];
		if (--t->missing[jg] == 0) {
			int64_t lk[TRT_MAXDIM], rk[TRT_MAXDIM], ok[TRT_MAXDIM];
			group_keys(t, jg, lk, rk, ok);
			enqueue(t, rt_key_linear(t->out, ok));
		}
	}
}

/* The progress thread: every MPI call while the schedule runs. */
static void *progress(void *arg)
{
	Tp *t = arg;
	Prog *g = &t->prog;
	Send *mine = NULL;
	int64_t cmine = 0;
	int64_t open = t->nrreq;        /* receive requests not complete */
	long nap = 20000;               /* ns; doubles while nothing happens */
	for (;;) {
		pthread_mutex_lock(&g->mu);
		int64_t n = g->nq;
		int stop = g->stop;
		if (n > cmine) {
			cmine = n;
			mine = rt_realloc(mine, sizeof *mine * (size_t)cmine);
		}
		if (n)
			memcpy(mine, g->q, sizeof *mine * (size_t)n);
		g->nq = 0;
		pthread_mutex_unlock(&g->mu);
		for (int64_t i = 0; i < n; i++)
			post_pieces(&t->sreq, &t->nsreq, &t->csreq, NULL, 0, 1, mine[i].p, mine[i].n, mine[i].peer,
			            mine[i].tag);
		int outcount = 0;
		if (open > 0) {
			MPI_Testsome((int)t->nrreq, t->rreq, &outcount, g->idx, MPI_STATUSES_IGNORE);
			if (outcount == MPI_UNDEFINED)
				outcount = 0;
		} else if (t->nsreq > 0) {
			int flag;               /* our sums still travel: keep them moving */
			MPI_Testall((int)t->nsreq, t->sreq, &flag, MPI_STATUSES_IGNORE);
		}
		if (outcount > 0) {
			pthread_mutex_lock(&g->mu);
			if (g->ndone + outcount > g->cdone) {
				g->cdone = 2 * (g->ndone + outcount);
				g->done = rt_realloc(g->done, sizeof *g->done * (size_t)g->cdone);
			}
			memcpy(g->done + g->ndone, g->idx, sizeof *g->idx * (size_t)outcount);
			g->ndone += outcount;
			pthread_cond_signal(&g->cv);
			pthread_mutex_unlock(&g->mu);
			open -= outcount;
		}
		if (stop && open == 0)
			break;
		if (outcount == 0 && n == 0) {
			nanosleep(&(struct timespec){0, nap}, NULL);
			nap = nap < 500000 ? 2 * nap : 500000;
		} else
			nap = 20000;
	}
	free(mine);
	return NULL;
}

/* Start the progress thread if MPI and the environment allow it. */
static void progress_start(Tp *t)
{
	Prog *g = &t->prog;
	const char *e = getenv("TRAC_PROGRESS_THREAD");
	int want = e && *e ? strcmp(e, "0") != 0 : !rt.one_node;
	if (!rt.threads || t->nr < 2 || !want || rt.budget > 0)
		return;
	g->idx = rt_alloc(sizeof *g->idx * (size_t)(t->nrreq + 1));
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->on = pthread_create(&g->th, NULL, progress, t) == 0;
	if (!g->on) {
		pthread_mutex_destroy(&g->mu);
		pthread_cond_destroy(&g->cv);
		free(g->idx);
	}
}

/* The main thread has taken in everything and asked for every send. */
static void progress_stop(Tp *t)
{
	Prog *g = &t->prog;
	if (!g->on)
		return;
	pthread_mutex_lock(&g->mu);
	g->stop = 1;
	pthread_mutex_unlock(&g->mu);
	pthread_join(g->th, NULL);
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cv);
	free(g->q);
	free(g->done);
	free(g->idx);
	g->on = 0;
}

/* Take in what has arrived; with block, wait for at least one message
 * piece when any is still to come. */
static void poll_arrivals(Tp *t, int block)
{
	if (t->pending == 0)
		return;
	int outcount;
	Prog *g = &t->prog;
	if (g->on) {
		pthread_mutex_lock(&g->mu);
		if (block && g->ndone == 0) {
			int64_t t0 = rt_span_begin();
			while (g->ndone == 0)
				pthread_cond_wait(&g->cv, &g->mu);
			if (t0)
				rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "arrivals");
		}
		outcount = (int)g->ndone;
		if (outcount)
			memcpy(t->idx, g->done, sizeof *t->idx * (size_t)outcount);
		g->ndone = 0;
		pthread_mutex_unlock(&g->mu);
	} else if (rt.budget > 0) {
		/* sends complete too, freeing their windows: test both, and
		 * while blocked nap between tests (20 us, doubling to 0.5 ms) */
		int64_t t0 = block ? rt_span_begin() : 0;
		long nap = 20000;
		for (;;) {
			test_sends(t);
			MPI_Testsome((int)t->nrreq, t->rreq, &outcount, t->idx, MPI_STATUSES_IGNORE);
			if (outcount == MPI_UNDEFINED || outcount > 0 || !block)
				break;
			nanosleep(&(struct timespec){0, nap}, NULL);
			nap = nap < 500000 ? 2 * nap : 500000;
		}
		if (t0)
			rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "arrivals");
	} else if (block) {
		int64_t t0 = rt_span_begin();
		MPI_Waitsome((int)t->nrreq, t->rreq, &outcount, t->idx, MPI_STATUSES_IGNORE);
		if (t0)
			rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "arrivals");
	} else
		MPI_Testsome((int)t->nrreq, t->rreq, &outcount, t->idx, MPI_STATUSES_IGNORE);
	if (outcount == MPI_UNDEFINED)
		rt_bug("two-phase schedule waits for nothing");
	t->pending -= outcount;
	for (int n = 0; n < outcount; n++) {
		Msg *m = &t->msg[t->rown[t->idx[n]]];
		if (--m->pieces == 0)
			arrived(t, m);
	}
}

/* ---- setting up: the call's tables, the same on every rank ---- */

/* The call's arguments, checked, and the join's key space: the left key,
 * then the right's free dims. */
static void tp_begin(Tp *t, const TrtRel *l, const TrtRel *r, const TrtJoin *j, TrtKernel k,
                     const TrtType *out, TrtPlace p, const TrtTwoPhase *s)
{
	memset(t, 0, sizeof *t);
	t->in[0] = l;
	t->in[1] = r;
	t->j = j;
	t->k = k;
	t->out = out;
	t->p = p;
	t->agg = s->agg;
	t->me = rt.rank;
	t->nr = rt.nranks;
	rt_check_type(out);
	if (!k || j->ngroup < 0 || out->nkey != j->ngroup || p.kind != TRT_PART || s->planned < 1)
		rt_bug("two-phase schedule without a kernel, an aggregation or a partitioned result");
	for (int i = 0; i < 2; i++)
		if (t->in[i]->place.kind == TRT_ANY)
			rt_bug("two-phase schedule over partial aggregates");

	const TrtType *lt = &l->type, *rtt = &r->type;
	t->nl = lt->nkey;
	for (int d = 0; d < rtt->nkey; d++) {
		int matched = 0;
		for (int i = 0; i < j->nmatch; i++)
			matched |= j->rkey[i] == d;
		if (!matched)
			t->rfree[t->nfree++] = d;
	}
	t->jn = t->nl + t->nfree;
	if (t->jn > TRT_MAXDIM)
		rt_bug("join key of %d dims", t->jn);
	t->njoin = 1;
	for (int d = 0; d < t->jn; d++) {
		t->jf[d] = d < t->nl ? rt_frontier(lt, d) : rt_frontier(rtt, t->rfree[d - t->nl]);
		t->njoin *= t->jf[d];
	}
	if (t->njoin != s->njoin)
		rt_bug("two-phase schedule for %lld join groups, the join has %lld", (long long)s->njoin,
		       (long long)t->njoin);
	t->nagg = rt_nkeys(out);
	t->nchunk[0] = rt_nkeys(lt);
	t->nchunk[1] = rt_nkeys(rtt);
}

/* Who runs what (jsite): planned rank q's groups on q modulo the ranks. */
static void assign_groups(Tp *t, const TrtTwoPhase *s)
{
	t->jsite = rt_alloc(sizeof *t->jsite * (size_t)(t->njoin + 1));
	for (int64_t g = 0; g < t->njoin; g++)
		t->jsite[g] = -1;
	for (int q = 0; q < s->planned; q++)
		for (int64_t i = 0; i < s->njobs[q]; i++) {
			int64_t g = s->jobs[q][i];
			if (g < 0 || g >= t->njoin || t->jsite[g] >= 0)
				rt_bug("two-phase schedule names join group %lld twice or out of range", (long long)g);
			t->jsite[g] = q % t->nr;
		}
	for (int64_t g = 0; g < t->njoin; g++)
		if (t->jsite[g] < 0)
			rt_bug("two-phase schedule leaves join group %lld out", (long long)g);
}

/* Where every input chunk is (holder), and the ones here (have); the
 * inputs must be dense. */
static void locate_chunks(Tp *t)
{
	for (int i = 0; i < 2; i++) {
		const TrtRel *x = t->in[i];
		int64_t nc = t->nchunk[i], expect = 0;
		t->holder[i] = rt_alloc(sizeof *t->holder[i] * (size_t)(nc + 1));
		t->have[i] = rt_alloc(sizeof *t->have[i] * (size_t)(nc + 1));
		t->uses[i] = rt_alloc(sizeof *t->uses[i] * (size_t)(nc + 1));
		memset(t->have[i], 0, sizeof *t->have[i] * (size_t)(nc + 1));
		memset(t->uses[i], 0, sizeof *t->uses[i] * (size_t)(nc + 1));
		int64_t key[TRT_MAXDIM];
		for (int64_t c = 0; c < nc; c++) {
			rt_key_from_linear(&x->type, c, key);
			t->holder[i][c] = x->place.kind == TRT_ALL ? -1 : trt_site(&x->place, &x->type, key);
			expect += t->holder[i][c] < 0 || t->holder[i][c] == t->me;
		}
		for (int64_t n = 0; n < x->n; n++) {
			int64_t c = rt_key_linear(&x->type, x->keys + n * x->type.nkey);
			if (t->have[i][c])
				rt_bug("two-phase input holds a key twice");
			t->have[i][c] = x->chunks[n];
		}
		if (x->n != expect)
			rt_bug("two-phase input has %lld tuples here, its placement %lld: not dense",
			       (long long)x->n, (long long)expect);
	}
}

/* Join group jg's input chunk numbers (c[0], c[1]); returns its output
 * tuple. */
static int64_t group_chunks(const Tp *t, int64_t jg, int64_t c[2])
{
	int64_t lk[TRT_MAXDIM], rk[TRT_MAXDIM], ok[TRT_MAXDIM];
	group_keys(t, jg, lk, rk, ok);
	c[0] = rt_key_linear(&t->in[0]->type, lk);
	c[1] = rt_key_linear(&t->in[1]->type, rk);
	return rt_key_linear(t->out, ok);
}

/* The transfers: chunk c of input i to rank d, once (want); which ranks
 * contribute to each output tuple (contrib); per join group of mine the
 * chunks it waits for (missing), per received chunk its readers here
 * (uses). */
static void plan_transfers(Tp *t)
{
	int nr = t->nr, me = t->me;
	for (int i = 0; i < 2; i++) {
		t->want[i] = rt_alloc((size_t)(t->nchunk[i] * nr + 1));
		memset(t->want[i], 0, (size_t)(t->nchunk[i] * nr + 1));
	}
	t->contrib = rt_alloc((size_t)(t->nagg * nr + 1));
	memset(t->contrib, 0, (size_t)(t->nagg * nr + 1));
	t->missing = rt_alloc(sizeof *t->missing * (size_t)(t->njoin + 1));
	t->nmine = 0;
	for (int64_t g = 0; g < t->njoin; g++) {
		int64_t c[2];
		int64_t o = group_chunks(t, g, c);
		int d = t->jsite[g];
		t->missing[g] = 0;
		for (int i = 0; i < 2; i++) {
			int h = t->holder[i][c[i]];
			if (h >= 0 && h != d)
				t->want[i][c[i] * nr + d] = 1;
			if (d == me && h >= 0 && h != me) {
				t->missing[g]++;
				t->uses[i][c[i]]++;
			}
		}
		t->contrib[o * nr + d] = 1;
		t->nmine += d == me;
	}
}

/* My join groups by output tuple, in join-group order (mine, gfirst,
 * gnext); and by the received chunk they read (rev_first, rev). */
static void index_groups(Tp *t)
{
	int64_t nmine = t->nmine;
	t->gfirst = rt_alloc(sizeof *t->gfirst * (size_t)(t->nagg + 2));
	t->gnext = rt_alloc(sizeof *t->gnext * (size_t)(t->nagg + 1));
	t->mine = rt_alloc(sizeof *t->mine * (size_t)(nmine + 1));
	memset(t->gfirst, 0, sizeof *t->gfirst * (size_t)(t->nagg + 2));
	int64_t *jout = rt_alloc(sizeof *jout * (size_t)(nmine + 1));
	int64_t *jcs = rt_alloc(sizeof *jcs * (size_t)(2 * nmine + 1));
	for (int64_t g = 0, m = 0; g < t->njoin; g++) {
		if (t->jsite[g] != t->me)
			continue;
		jout[m] = group_chunks(t, g, &jcs[2 * m]);
		t->gfirst[jout[m] + 1]++;
		m++;
	}
	for (int64_t g = 0; g < t->nagg; g++)
		t->gfirst[g + 1] += t->gfirst[g];
	for (int64_t g = 0; g < t->nagg; g++)
		t->gnext[g] = t->gfirst[g];
	for (int64_t g = 0, m = 0; g < t->njoin; g++)
		if (t->jsite[g] == t->me) {
			t->mine[t->gnext[jout[m]]++] = g;
			m++;
		}
	for (int64_t g = 0; g < t->nagg; g++)
		t->gnext[g] = t->gfirst[g];
	for (int i = 0; i < 2; i++) {
		t->rev_first[i] = rt_alloc(sizeof *t->rev_first[i] * (size_t)(t->nchunk[i] + 2));
		memset(t->rev_first[i], 0, sizeof *t->rev_first[i] * (size_t)(t->nchunk[i] + 2));
		for (int64_t m = 0; m < nmine; m++)
			t->rev_first[i][jcs[2 * m + i] + 1]++;
		for (int64_t c = 0; c < t->nchunk[i]; c++)
			t->rev_first[i][c + 1] += t->rev_first[i][c];
	}
	int64_t *fill[2];
	t->rev = rt_alloc(sizeof *t->rev * (size_t)(2 * nmine + 1));
	for (int i = 0; i < 2; i++) {
		fill[i] = rt_alloc(sizeof *fill[i] * (size_t)(t->nchunk[i] + 1));
		memcpy(fill[i], t->rev_first[i], sizeof *fill[i] * (size_t)t->nchunk[i]);
	}
	for (int64_t g = 0, m = 0; g < t->njoin; g++)
		if (t->jsite[g] == t->me) {
			for (int i = 0; i < 2; i++)
				t->rev[i * nmine + fill[i][jcs[2 * m + i]]++] = g;
			m++;
		}
	free(fill[0]);
	free(fill[1]);
	free(jout);
	free(jcs);
}

/* Output tuples: their ranks (ysite), the sums each of mine waits for
 * (nsum), the sums I send, per destination in tuple order (outq). */
static void plan_outputs(Tp *t)
{
	int nr = t->nr, me = t->me;
	t->ysite = rt_alloc(sizeof *t->ysite * (size_t)(t->nagg + 1));
	t->nsum = rt_alloc(sizeof *t->nsum * (size_t)(t->nagg + 1));
	t->acc = rt_alloc(sizeof *t->acc * (size_t)(t->nagg + 1));
	t->sums = rt_alloc(sizeof *t->sums * (size_t)(t->nagg + 1));
	t->done = rt_alloc((size_t)(t->nagg + 1));
	t->outq = rt_alloc(sizeof *t->outq * (size_t)nr);
	t->outn = rt_alloc(sizeof *t->outn * (size_t)nr);
	t->outpos = rt_alloc(sizeof *t->outpos * (size_t)nr);
	memset(t->outn, 0, sizeof *t->outn * (size_t)nr);
	memset(t->outpos, 0, sizeof *t->outpos * (size_t)nr);
	memset(t->done, 0, (size_t)(t->nagg + 1));
	for (int64_t g = 0; g < t->nagg; g++) {
		int64_t key[TRT_MAXDIM];
		rt_key_from_linear(t->out, g, key);
		t->ysite[g] = trt_site(&t->p, t->out, key);
		t->nsum[g] = 0;
		t->acc[g] = NULL;
		t->sums[g] = NULL;
		if (t->ysite[g] == me) {
			t->left++;
			for (int q = 0; q < nr; q++)
				t->nsum[g] += q != me && t->contrib[g * nr + q];
		} else if (t->contrib[g * nr + me]) {
			t->outn[t->ysite[g]]++;
		}
	}
	for (int d = 0; d < nr; d++) {
		t->outq[d] = rt_alloc(sizeof *t->outq[d] * (size_t)(t->outn[d] + 1));
		t->outn[d] = 0;
	}
	for (int64_t g = 0; g < t->nagg; g++)
		if (t->ysite[g] != me && t->contrib[g * nr + me])
			t->outq[t->ysite[g]][t->outn[t->ysite[g]]++] = g;
}

/* ---- running ---- */

/* 1. Every message to receive (input chunks, then sums), per source in the
 * order both ends know; then posted, before any send (all of them, without
 * a budget). */
static void post_all_recvs(Tp *t)
{
	int nr = t->nr, me = t->me;
	windows_new(t);
	int64_t *rqcap = rt_alloc(sizeof *rqcap * (size_t)nr);
	memset(rqcap, 0, sizeof *rqcap * (size_t)nr);
	for (int i = 0; i < 3; i++) {
		int64_t nc = i < 2 ? t->nchunk[i] : t->nagg;
		for (int64_t c = 0; c < nc; c++) {
			int64_t key[TRT_MAXDIM];
			for (int q = 0; q < (i < 2 ? 1 : nr); q++) {
				int from;
				const TrtType *ty = i < 2 ? &t->in[i]->type : t->out;
				if (i < 2) {
					from = t->holder[i][c];
					if (from < 0 || from == me || !t->want[i][c * nr + me])
						continue;
				} else {
					if (t->ysite[c] != me || q == me || !t->contrib[c * nr + q])
						continue;
					from = q;
				}
				rt_key_from_linear(ty, c, key);
				size_t nb = rt_chunk_bytes(ty, key);
				if (t->nmsg == t->cmsg) {
					t->cmsg = t->cmsg ? 2 * t->cmsg : 64;
					t->msg = rt_realloc(t->msg, sizeof *t->msg * (size_t)t->cmsg);
				}
				Msg *m = &t->msg[t->nmsg];
				m->side = i;
				m->from = from;
				m->chunk = c;
				m->c = NULL;
				m->nb = nb;
				m->pieces = 0;
				if (t->rqn[from] == rqcap[from]) {
					rqcap[from] = rqcap[from] ? 2 * rqcap[from] : 16;
					t->rq[from] = rt_realloc(t->rq[from], sizeof *t->rq[from] * (size_t)rqcap[from]);
				}
				t->rq[from][t->rqn[from]++] = t->nmsg;
				t->nmsg++;
				t->unposted++;
				t->inputs += i < 2;
			}
		}
	}
	free(rqcap);
	for (int q = 0; q < nr; q++)
		post_recvs(t, q);
	grow_idx(t);
}

/* 2. My chunks to every rank that needs them, in the same order. */
static void send_inputs(Tp *t)
{
	for (int i = 0; i < 2; i++)
		for (int64_t c = 0; c < t->nchunk[i]; c++) {
			if (t->holder[i][c] != t->me)
				continue;
			int64_t key[TRT_MAXDIM];
			rt_key_from_linear(&t->in[i]->type, c, key);
			size_t nb = rt_chunk_bytes(&t->in[i]->type, key);
			for (int d = 0; d < t->nr; d++)
				if (d != t->me && t->want[i][c * t->nr + d])
					queue_send(t, d, t->have[i][c], nb, TAG_TP_IN);
		}
	free(t->want[0]);
	free(t->want[1]);
}

/* The end of the tile of output tuples from `from`: all of them without a
 * budget; under one, as many (at least one) as have join groups here and
 * whose sums take half the budget.  A tile's sums are held (never evicted)
 * while its inputs stream by, each input chunk read once a tile, as a
 * join's output tiles are (local.c's join_order); with every tuple at
 * once and nothing held, the sums -- temporaries, which the store evicts
 * before the chunks of the relations the op reads -- of
 * the 12000^2 matmul's two-phase join (288 MB a rank in 384M) were
 * evicted and written again between their kernels: 5.2e9 bytes written a
 * rank for 4.6e8 planned. */
static int64_t tile_end(const Tp *t, int64_t from)
{
	if (rt.budget <= 0)
		return t->nagg;
	double b = 0;
	int64_t g = from;
	for (; g < t->nagg; g++) {
		if (t->gfirst[g] == t->gfirst[g + 1])
			continue;
		int64_t key[TRT_MAXDIM];
		rt_key_from_linear(t->out, g, key);
		double nb = (double)rt_chunk_bytes(t->out, key);
		if (b > 0 && b + nb > rt.budget / 2)
			break;
		b += nb;
	}
	return g;
}

/* Has every join group of mine in the current tile run?  Then the next
 * tile's tuples are queued; returns whether one began. */
static int next_tile(Tp *t)
{
	if (t->tend >= t->nagg)
		return 0;
	for (int64_t g = t->tfrom; g < t->tend; g++)
		if (t->gnext[g] != t->gfirst[g + 1])
			return 0;
	t->tfrom = t->tend;
	t->tend = tile_end(t, t->tfrom);
	for (int64_t g = t->tfrom; g < t->tend; g++)
		enqueue(t, g);
	return 1;
}

/* 3. What can run on chunks here runs while the rest travels; each arrival
 * queues the output tuples of the current tile whose join groups it
 * completes.  Returns when every join group has run and every sum is in
 * and sent. */
static void run_groups(Tp *t)
{
	t->ring = rt_alloc(sizeof *t->ring * (size_t)(t->nagg + 1));
	t->queued = rt_alloc((size_t)(t->nagg + 1));
	memset(t->queued, 0, (size_t)(t->nagg + 1));
	t->tfrom = 0;
	t->tend = tile_end(t, 0);
	for (int64_t g = 0; g < t->nagg; g++)
		enqueue(t, g);
	progress_start(t);
	while (rt_no_overlap && t->inputs > 0)
		poll_arrivals(t, 1);    /* --no-overlap: everything in first */
	for (;;) {
		while (t->rlen > 0) {
			int64_t g = t->ring[t->rhead];
			t->rhead = (t->rhead + 1) % t->nagg;
			t->rlen--;
			t->queued[g] = 0;
			advance(t, g);
		}
		if (next_tile(t))
			continue;
		if (t->pending == 0 && t->unposted == 0)
			break;
		poll_arrivals(t, 1);
	}
	for (int64_t g = 0; g < t->nagg; g++)
		if (t->gnext[g] != t->gfirst[g + 1])
			rt_bug("two-phase schedule ends with join groups not run");
	progress_stop(t);
	if (t->left != 0)
		rt_bug("two-phase schedule ends with %lld output tuples unfinished", (long long)t->left);
	sends_end(t);
}

/* Everything the call made but its result. */
static void tp_free(Tp *t)
{
	for (int64_t g = 0; g < t->nagg; g++)
		if (t->acc[g])
			rt_chunk_unref(t->acc[g]);      /* sums sent */
	for (int i = 0; i < 2; i++) {
		free(t->holder[i]);
		free(t->have[i]);
		free(t->uses[i]);
		free(t->rev_first[i]);
	}
	for (int d = 0; d < t->nr; d++)
		free(t->outq[d]);
	windows_free(t);
	free(t->outq);
	free(t->outn);
	free(t->outpos);
	free(t->done);
	free(t->ysite);
	free(t->nsum);
	free(t->acc);
	free(t->sums);
	free(t->contrib);
	free(t->missing);
	free(t->mine);
	free(t->gfirst);
	free(t->gnext);
	free(t->rev);
	free(t->jsite);
	free(t->sreq);
	free(t->rreq);
	free(t->rown);
	free(t->msg);
	free(t->idx);
	free(t->ring);
	free(t->queued);
}

TrtRel *trt_twophase(const TrtRel *l, const TrtRel *r, const TrtJoin *j, TrtKernel k,
                     const TrtType *out, TrtPlace p, const TrtTwoPhase *s)
{
	Tp t;
	tp_begin(&t, l, r, j, k, out, p, s);
	assign_groups(&t, s);
	locate_chunks(&t);
	plan_transfers(&t);
	index_groups(&t);
	plan_outputs(&t);
	post_all_recvs(&t);
	t.res = trt_rel_new(out, p);
	send_inputs(&t);
	run_groups(&t);
	tp_free(&t);
	rt_rel_sort(t.res);
	return t.res;
}
