/*
 * store.c: the chunk store.  Under a memory budget (--mem-budget, or
 * TRAC_MEM_BUDGET; later the plan's --mem-per-rank), which chunks are in
 * memory, which wait in this rank's spill file (spill.c), which go there
 * next and which come back ahead of their use: out-of-core execution
 * (issue 32).  Without a budget nothing here runs but the bookkeeping of
 * live relations, and every chunk stays in memory as before.
 *
 * Residency.  A chunk's data is resident (Chunk.data) or only in the spill
 * file (Chunk.slot, its offset there).  A resident chunk with a copy in the
 * file is clean, one without is dirty.  rt.live counts resident bytes
 * only, and is held to the budget: before a chunk is made or read back,
 * unpinned resident chunks are evicted -- a clean one is freed, a dirty one
 * written first -- until it fits.  Writing a chunk (rt_chunk_mut) drops its
 * copy: a fused aggregation accumulating into a chunk read back makes it
 * dirty again.
 *
 * Pins.  Code touches chunk data only through rt_chunk_data / rt_chunk_mut
 * (and rt_view, rt_csr_of on them), which make the chunk resident and pin
 * it in the current pin scope: rt_pin_mark, then rt_pin_release(mark) ends
 * the scope and unpins what it pinned.  Every op releases at its end, and
 * inside at the points where it is done with a working set (a join after
 * each kernel call): that is what bounds an op's memory by its working set.
 * A new chunk is pinned in the scope that made it.  Asynchronous users
 * (a message in flight) hold a chunk instead (rt_chunk_hold/unhold).  A
 * pinned or held chunk is never evicted; when the pinned ones alone exceed
 * the budget the allocation goes ahead and rt.over records by how much.
 *
 * What to evict: the chunk used farthest in the future (Belady), from the
 * static schedule, not from guesses about the past.  The plan's ops table
 * (TrtProgram.ops) gives each op's inputs (op ids; a param's loads and
 * stores share its var) and its repeat blocks; trt_loop_* say where the
 * loops are at run time.  At each op's begin every live relation's next
 * use is worked out (next_use: ops from now to its next reader, counting
 * the iterations still to run of the loops around) and given to its
 * chunks, the smallest where relations share one.  Inside an op, the op
 * declares its access stream (rt_stream_begin: the chunk cells it will
 * touch, in order) and says where it is (rt_stream_at); a chunk's next
 * position in the stream then ranks it below every op-level use, and a
 * chunk the op has finished with falls back to its relation's next use
 * after this op.  Ties go least recently pinned first.  A chunk in no live
 * relation and no stream (a temporary) counts as used by the next op.
 *
 * Reading ahead.  At each step of a stream the chunks at its next
 * positions that are in the file are read by the I/O thread (up to a
 * quarter of the budget ahead), each into free memory or memory that
 * evicting chunks the op is done with makes (never one it reads later:
 * that would only be read again), so the reads overlap the kernels; at
 * an op's end, the chunks of the relations the next op reads start coming
 * back likewise (room from chunks used after that op only).  The main
 * thread waits only for a chunk it needs now (rt.spill_wait).
 * Dirty victims found while reading ahead are written back then, so that
 * a later eviction finds them clean.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define FAR 1e30                        /* never used again */
#define UNKNOWN 1.0                     /* no schedule: as if the next op read it */
#define AHEAD_POSITIONS 512             /* stream positions a read-ahead looks at */

/* ---- lists: resident chunks, spilled chunks, chunks with I/O in flight ---- */

static Chunk resident = {.prev = &resident, .next = &resident};
static Chunk spilled = {.prev = &spilled, .next = &spilled};
static Chunk **busy;                    /* chunks whose io is set */
static int64_t nbusy, cbusy;
static double evicting;                 /* bytes whose eviction waits for a write */
static int64_t clock_;                  /* pin stamps */

static void unlist(Chunk *c)
{
	if (!c->next)
		return;
	c->prev->next = c->next;
	c->next->prev = c->prev;
	c->prev = c->next = NULL;
}

static void list_add(Chunk *head, Chunk *c)
{
	unlist(c);
	c->prev = head->prev;
	c->next = head;
	head->prev->next = c;
	head->prev = c;
}

static void busy_add(Chunk *c)
{
	if (nbusy == cbusy) {
		cbusy = cbusy ? 2 * cbusy : 64;
		busy = rt_realloc(busy, sizeof *busy * (size_t)cbusy);
	}
	busy[nbusy++] = c;
}

static void busy_del(Chunk *c)
{
	for (int64_t i = 0; i < nbusy; i++)
		if (busy[i] == c) {
			busy[i] = busy[--nbusy];
			return;
		}
	rt_bug("a chunk's I/O is not listed");
}

/* ---- moving data ---- */

static void drop_data(Chunk *c)
{
	if (c->pins || c->io || c->slot < 0 || !c->data)
		rt_bug("evicting a chunk pinned, busy or without a copy");
	rt_data_free(c->data, c->mapped);
	c->data = NULL;
	c->mapped = 0;
	rt_live_add(-(double)c->nbytes);
	list_add(&spilled, c);
}

static void start_write(Chunk *c)
{
	c->slot = rt_spill_alloc(c->nbytes);
	c->io = rt_io_start(1, c->data, c->nbytes, c->slot, 0);
	busy_add(c);
}

static void start_read(Chunk *c, int urgent)
{
	c->data = rt_data_alloc(c->nbytes, &c->mapped);
	if (!c->data)
		rt_oom(c->nbytes, "a chunk read back from the spill file");
	rt_live_add((double)c->nbytes);
	list_add(&resident, c);
	c->io = rt_io_start(0, c->data, c->nbytes, c->slot, urgent);
	busy_add(c);
}

/* c's I/O is done: take it back; an eviction waiting for the write ends. */
static void finish_io(Chunk *c)
{
	rt_io_end(c->io);
	c->io = NULL;
	busy_del(c);
	if (c->evict) {
		c->evict = 0;
		evicting -= (double)c->nbytes;
		if (c->pins == 0)
			drop_data(c);
	}
}

/* Takes back every request that is done. */
static void reap(void)
{
	for (int64_t i = 0; i < nbusy;) {
		Chunk *c = busy[i];
		if (rt_io_done(c->io))
			finish_io(c);           /* busy[i] is now another one */
		else
			i++;
	}
}

/* ---- when each chunk is used next ---- */

static struct {
	int on;
	int64_t id;                     /* the stream's number; Chunk.sid */
	Chunk ***cell;                  /* the chunk pointers it will read, in order */
	int64_t *next;                  /* position -> the same cell's next, or -1 */
	int64_t n, cur;
} st;

static int64_t epoch;                   /* op begins so far */
static int between;                     /* after an op's end, before the next one's begin */

static double when(const Chunk *c)
{
	if (st.on && c->sid == st.id && c->spos >= 0) {
		double w = (double)(c->spos - st.cur) / ((double)st.n + 1.0);
		return w > 0 ? w : 0;
	}
	if (c->epoch != epoch)
		return UNKNOWN;
	return st.on || between ? c->nu_after : c->nu_now;
}

typedef struct Victim {
	Chunk *c;
	double when;
} Victim;

static int by_when(const void *a, const void *b)
{
	const Victim *x = a, *y = b;
	if (x->when != y->when)
		return x->when > y->when ? -1 : 1;
	return x->c->stamp < y->c->stamp ? -1 : x->c->stamp > y->c->stamp;
}

/* Makes room for need more resident bytes by evicting unpinned chunks used
 * after `limit`, farthest first: a clean one is freed, a dirty one written
 * (freed when the write is done).  With wait, waits for those writes;
 * returns whether the room is there now. */
static int evict(double need, double limit, int wait)
{
	reap();
	if (rt.live + need <= rt.budget)
		return 1;
	if (rt.live - evicting + need > rt.budget) {
		int64_t n = 0, cap = 64;
		Victim *v = rt_alloc(sizeof *v * (size_t)cap);
		for (Chunk *c = resident.next; c != &resident; c = c->next) {
			if (c->pins || c->io || c->evict)
				continue;
			double w = when(c);
			if (w <= limit)
				continue;
			if (n == cap)
				v = rt_realloc(v, sizeof *v * (size_t)(cap *= 2));
			v[n++] = (Victim){c, w};
		}
		qsort(v, (size_t)n, sizeof *v, by_when);
		for (int64_t i = 0; i < n && rt.live - evicting + need > rt.budget; i++) {
			Chunk *c = v[i].c;
			if (c->slot >= 0) {
				drop_data(c);
			} else {
				start_write(c);
				c->evict = 1;
				evicting += (double)c->nbytes;
			}
		}
		free(v);
	}
	while (wait && rt.live + need > rt.budget) {
		/* a chunk on its way out first; else I/O in flight (a read
		 * ahead, a dirty chunk written back), which holds chunks no
		 * eviction may take (a slow I/O thread went 4 KB over the
		 * budget here).  After any wait, what it held and whatever else
		 * finished meanwhile is a candidate like the others: choose
		 * again (waiting for the outgoing chunk alone and stopping
		 * when nothing was busy left 24 finished read-aheads resident
		 * and a chunk 4 KB over; spill.sh's transe on one core) */
		Chunk *w = NULL;
		for (int64_t i = 0; i < nbusy && !w; i++)
			if (busy[i]->evict)
				w = busy[i];
		for (int64_t i = 0; i < nbusy && !w; i++)
			if (!busy[i]->pins)
				w = busy[i];
		if (!w)
			break;
		rt_io_wait(w->io);
		finish_io(w);
		reap();
		evict(need, limit, 0);
	}
	return rt.live + need <= rt.budget;
}

/* Room for a new resident chunk of n bytes: whatever must go goes. */
void rt_store_reserve(size_t n)
{
	if (!evict((double)n, -1, 1) && rt.live + (double)n - rt.budget > rt.over)
		rt.over = rt.live + (double)n - rt.budget;
}

/* ---- pins ---- */

static Chunk **pins;
static size_t npins, cpins;

static void pin(Chunk *c)
{
	c->stamp = ++clock_;
	if (npins && pins[npins - 1] == c)
		return;
	if (npins == cpins) {
		cpins = cpins ? 2 * cpins : 256;
		pins = rt_realloc(pins, sizeof *pins * cpins);
	}
	pins[npins++] = c;
	c->pins++;
}

/* c's data in memory, and for writing without a copy in the file. */
static void make_resident(Chunk *c, int write)
{
	if (!c->data) {
		rt_store_reserve(c->nbytes);
		start_read(c, 1);
	}
	/* a read must be in before the data is used; a write before the data
	 * changes (reading the data meanwhile is fine) */
	if (c->io && (!rt_io_writes(c->io) || write)) {
		rt_io_wait(c->io);
		finish_io(c);
	}
	if (write && c->slot >= 0) {
		rt_spill_free(c->slot, c->nbytes);
		c->slot = -1;
	}
}

void *rt_store_pin(const Chunk *cc, int write)
{
	Chunk *c = (Chunk *)cc;
	pin(c);
	make_resident(c, write);
	return c->data;
}

size_t rt_pin_mark(void)
{
	return npins;
}

void rt_pin_release(size_t mark)
{
	while (npins > mark) {
		Chunk *c = pins[--npins];
		if (c)
			c->pins--;
	}
}

void *rt_chunk_hold(const Chunk *cc, int write)
{
	Chunk *c = (Chunk *)cc;
	c->pins++;
	c->stamp = ++clock_;
	if (rt.budget > 0)
		make_resident(c, write);
	return c->data;
}

void rt_chunk_unhold(const Chunk *cc)
{
	Chunk *c = (Chunk *)cc;
	if (c->pins <= 0)
		rt_bug("unholding a chunk not held");
	c->pins--;
}

/* A new chunk (rel.c): resident, dirty, pinned in the current scope. */
void rt_store_add(Chunk *c)
{
	list_add(&resident, c);
	c->epoch = -1;
	pin(c);
}

/* A chunk freed (rel.c): its I/O waited for, its copy and pins gone. */
void rt_store_drop(Chunk *c)
{
	if (c->io) {
		rt_io_wait(c->io);
		rt_io_end(c->io);
		c->io = NULL;
		busy_del(c);
		if (c->evict)
			evicting -= (double)c->nbytes;
		c->evict = 0;
	}
	if (c->slot >= 0)
		rt_spill_free(c->slot, c->nbytes);
	c->slot = -1;
	for (size_t i = npins; c->pins > 0 && i-- > 0;)
		if (pins[i] == c) {
			pins[i] = NULL;
			c->pins--;
		}
	if (c->pins)
		rt_bug("a chunk freed while held");
	unlist(c);
}

/* ---- reading ahead ---- */

/* Starts reading the chunks at the stream's current and next positions
 * that are in the file: up to a quarter of the budget ahead, each only
 * into free room or room that evicting chunks the op is done with makes
 * (dirty ones are written meanwhile). */
static void read_ahead(void)
{
	if (!st.on)
		return;
	double window = rt.budget / 4, ahead = 0;
	for (int64_t q = st.cur; q < st.n && q <= st.cur + AHEAD_POSITIONS; q++) {
		Chunk *c = *st.cell[q];
		if (!c)
			continue;
		if (c->data) {
			if (c->io && !rt_io_writes(c->io))
				ahead += (double)c->nbytes;
			continue;
		}
		if (ahead + (double)c->nbytes > window && ahead > 0)
			break;
		/* room from chunks this op is done with (next used by a later
		 * op: 1 or more), never from ones it reads later, which a read
		 * ahead would only have to read again */
		if (!evict((double)c->nbytes, 1 - 1e-9, 0))
			break;
		start_read(c, 0);
		ahead += (double)c->nbytes;
	}
}

/* ---- streams: an op's accesses, in order ---- */

void rt_stream_begin(Chunk ***cell, int64_t n)
{
	if (rt.budget <= 0) {
		free(cell);
		return;
	}
	rt_stream_end();
	st.on = 1;
	st.id++;
	st.cell = cell;
	st.n = n;
	st.cur = 0;
	st.next = rt_alloc(sizeof *st.next * (size_t)(n + 1));
	/* each position's next one of the same cell, by a hash of the cells */
	int64_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	struct { Chunk **k; int64_t p; } *h = rt_alloc(sizeof *h * (size_t)cap);
	memset(h, 0, sizeof *h * (size_t)cap);
	for (int64_t p = n - 1; p >= 0; p--) {
		uint64_t i = ((uint64_t)(uintptr_t)cell[p] >> 3) * 0x9e3779b97f4a7c15ull;
		for (i &= (uint64_t)(cap - 1); h[i].k && h[i].k != cell[p]; i = (i + 1) & (uint64_t)(cap - 1))
			;
		st.next[p] = h[i].k ? h[i].p : -1;
		h[i].k = cell[p];
		h[i].p = p;
	}
	free(h);
	for (int64_t p = 0; p < n; p++) {
		Chunk *c = *cell[p];
		if (c && c->sid != st.id) {
			c->sid = st.id;
			c->spos = p;
		}
	}
	read_ahead();
}

void rt_stream_at(int64_t p)
{
	if (!st.on)
		return;
	if (p > st.n)
		p = st.n;
	for (int64_t q = st.cur; q < p; q++) {
		Chunk *c = *st.cell[q];
		if (c) {
			c->sid = st.id;
			c->spos = st.next[q];
		}
	}
	if (p < st.n && *st.cell[p]) {
		(*st.cell[p])->sid = st.id;
		(*st.cell[p])->spos = p;
	}
	st.cur = p;
	read_ahead();
}

void rt_stream_end(void)
{
	if (!st.on)
		return;
	st.on = 0;
	free(st.cell);
	free(st.next);
	st.cell = NULL;
	st.next = NULL;
}

/* ---- the schedule: the plan's ops, their inputs, the loops ---- */

enum { K_OTHER, K_LOAD, K_STORE, K_LOOP, K_ENDLOOP };
#define MAX_LOOPS 32

static struct {
	int ready;
	int nops;
	int *kind;                      /* per op */
	int *end;                       /* per LOOP op: its ENDLOOP */
	int *first, *rd;                /* value v's readers: rd[first[v] .. first[v+1]) */
	int depth;                      /* repeat blocks open at run time */
	int lop[MAX_LOOPS];             /* each one's LOOP op, or -1 */
	int64_t count[MAX_LOOPS], iter[MAX_LOOPS];
} sch;

static int kind_of(const char *k)
{
	if (!k)
		return K_OTHER;
	if (!strcmp(k, "load"))
		return K_LOAD;
	if (!strcmp(k, "store"))
		return K_STORE;
	if (!strcmp(k, "loop"))
		return K_LOOP;
	if (!strcmp(k, "endloop"))
		return K_ENDLOOP;
	return K_OTHER;
}

/* The value op i makes: itself, its param's (nops + var - 1) for a load or
 * a store, -1 for a loop's ops. */
static int value_of(int i)
{
	const TrtOpInfo *o = &rt.prog->ops[i];
	switch (sch.kind[i]) {
	case K_LOAD:
	case K_STORE:
		return o->var > 0 ? sch.nops + o->var - 1 : -1;
	case K_LOOP:
	case K_ENDLOOP:
		return -1;
	}
	return i;
}

static void build_schedule(void)
{
	const TrtProgram *p = rt.prog;
	int n = p->nops, nvar = 0;
	sch.nops = n;
	sch.kind = rt_alloc(sizeof *sch.kind * (size_t)(n + 1));
	sch.end = rt_alloc(sizeof *sch.end * (size_t)(n + 1));
	int stack[MAX_LOOPS], depth = 0;
	for (int i = 0; i < n; i++) {
		sch.kind[i] = kind_of(p->ops[i].kind);
		sch.end[i] = -1;
		if (p->ops[i].var > nvar)
			nvar = p->ops[i].var;
		if (sch.kind[i] == K_LOOP && depth < MAX_LOOPS)
			stack[depth++] = i;
		else if (sch.kind[i] == K_ENDLOOP && depth > 0)
			sch.end[stack[--depth]] = i;
	}
	for (int d = 0; d < depth; d++)
		sch.end[stack[d]] = n;          /* (a table without its endloop) */
	int nval = n + nvar;
	sch.first = rt_alloc(sizeof *sch.first * (size_t)(nval + 2));
	memset(sch.first, 0, sizeof *sch.first * (size_t)(nval + 2));
	int total = 0;
	for (int pass = 0; pass < 2; pass++) {
		int *fill = pass ? rt_alloc(sizeof *fill * (size_t)(nval + 1)) : NULL;
		if (pass) {
			for (int v = 0; v < nval; v++)
				sch.first[v + 1] += sch.first[v];
			memcpy(fill, sch.first, sizeof *fill * (size_t)(nval + 1));
			sch.rd = rt_alloc(sizeof *sch.rd * (size_t)(total + 1));
		}
		for (int j = 0; j < n; j++)
			for (int k = 0; k < p->ops[j].nin && k < 3; k++) {
				int x = p->ops[j].in[k];
				int v = x >= 0 && x < n ? value_of(x) : -1;
				if (v < 0)
					continue;
				if (pass)
					sch.rd[fill[v]++] = j;
				else {
					sch.first[v + 1]++;
					total++;
				}
			}
		free(fill);
	}
	sch.ready = 1;
}

static double remaining(int d)
{
	int64_t r = sch.count[d] - sch.iter[d] - 1;
	return r > 0 ? (double)r : 0;
}

/* Ops from op cur to reader j's next run (j == cur counts as now when eq),
 * with the iterations still to run of the loops open around cur. */
static double dist(int cur, int j, int eq)
{
	double extra = 0;
	if (j > cur || (eq && j == cur)) {
		for (int d = sch.depth - 1; d >= 0 && d < MAX_LOOPS; d--) {
			int l = sch.lop[d];
			if (l < 0)
				continue;
			if (j < sch.end[l])
				return (double)(j - cur) + extra;
			extra += remaining(d) * (sch.end[l] - l);
		}
		return (double)(j - cur) + extra;
	}
	for (int d = sch.depth - 1; d >= 0 && d < MAX_LOOPS; d--) {
		int l = sch.lop[d];
		if (l < 0)
			continue;
		if (j > l && remaining(d) > 0)
			return (double)(sch.end[l] - cur) + (double)(j - l) + extra;
		extra += remaining(d) * (sch.end[l] - l);
	}
	return FAR;
}

/* ---- relations: their next use, given to their chunks ---- */

static TrtRel rels = {.prev = &rels, .next = &rels};

void rt_store_rel_new(TrtRel *r)
{
	r->op = rt.op;
	r->epoch = -1;
	r->prev = rels.prev;
	r->next = &rels;
	rels.prev->next = r;
	rels.prev = r;
}

void rt_store_rel_free(TrtRel *r)
{
	if (!r->next)
		return;
	r->prev->next = r->next;
	r->next->prev = r->prev;
	r->prev = r->next = NULL;
}

static void rel_next(TrtRel *r)
{
	if (r->epoch == epoch)
		return;
	r->epoch = epoch;
	int cur = rt.op, v = -1;
	if (sch.ready && r->op >= 0 && r->op < sch.nops && cur >= 0 && cur < sch.nops)
		v = value_of(r->op);
	if (v < 0) {
		r->nu_now = r->nu_after = UNKNOWN;
		return;
	}
	r->nu_now = r->nu_after = FAR;
	for (int k = sch.first[v]; k < sch.first[v + 1]; k++) {
		double a = dist(cur, sch.rd[k], 1), b = dist(cur, sch.rd[k], 0);
		r->nu_now = a < r->nu_now ? a : r->nu_now;
		r->nu_after = b < r->nu_after ? b : r->nu_after;
	}
}

static void give(Chunk *c, const TrtRel *r)
{
	if (c->epoch != epoch) {
		c->epoch = epoch;
		c->nu_now = r->nu_now;
		c->nu_after = r->nu_after;
		return;
	}
	c->nu_now = r->nu_now < c->nu_now ? r->nu_now : c->nu_now;
	c->nu_after = r->nu_after < c->nu_after ? r->nu_after : c->nu_after;
}

/* c joins relation r (rel.c's rt_rel_push and rt_rel_set). */
void rt_store_note(TrtRel *r, Chunk *c)
{
	if (rt.budget <= 0 || !c)
		return;
	rel_next(r);
	give(c, r);
}

/* trt_op_begin: the next use of every live relation, from op `op` on. */
void rt_store_op(int op)
{
	if (rt.budget <= 0)
		return;
	if (!sch.ready && rt.prog && rt.prog->nops > 0)
		build_schedule();
	epoch++;
	between = 0;
	for (TrtRel *r = rels.next; r != &rels; r = r->next) {
		rel_next(r);
		for (int64_t i = 0; i < r->n; i++)
			if (r->chunks[i])
				give(r->chunks[i], r);
	}
	reap();
}

/* The op that runs after op: the next in the table, past loop ops and a
 * param's loads, back at the loop's start when op ends an iteration with
 * more to run; -1 when the table does not say. */
static int op_after(int op)
{
	int next = op + 1;
	for (int steps = 0; next < sch.nops && steps < 16; steps++) {
		int k = sch.kind[next];
		if (k == K_ENDLOOP) {
			int d = sch.depth - 1;
			if (d >= 0 && d < MAX_LOOPS && sch.lop[d] >= 0 && sch.end[sch.lop[d]] == next && remaining(d) > 0)
				next = sch.lop[d] + 1;
			else
				next++;
		} else if (k == K_LOOP || k == K_LOAD) {
			next++;
		} else {
			return next;
		}
	}
	return -1;
}

/* Between ops: the chunks of the relations the next op reads that are in
 * the file, read ahead in their relations' order (up to a quarter of the
 * budget), into room only chunks used after that op make. */
static void read_next_op(void)
{
	int op = rt.op, next = sch.ready && op >= 0 && op < sch.nops ? op_after(op) : -1;
	if (next < 0)
		return;
	const TrtOpInfo *o = &rt.prog->ops[next];
	double window = rt.budget / 4, ahead = 0;
	for (int k = 0; k < o->nin && k < 3; k++) {
		int v = o->in[k] >= 0 && o->in[k] < sch.nops ? value_of(o->in[k]) : -1;
		for (TrtRel *r = rels.next; v >= 0 && r != &rels; r = r->next) {
			if (r->op < 0 || r->op >= sch.nops || value_of(r->op) != v)
				continue;
			for (int64_t i = 0; i < r->n; i++) {
				Chunk *c = r->chunks[i];
				if (!c || c->data || c->io)
					continue;
				if (ahead + (double)c->nbytes > window || !evict((double)c->nbytes, 1 + 1e-9, 0))
					return;
				start_read(c, 0);
				ahead += (double)c->nbytes;
			}
		}
	}
}

/* trt_op_end: the op's pins end with it, and the next op's inputs start
 * coming back. */
void rt_store_op_end(void)
{
	if (rt.budget <= 0)
		return;
	rt_stream_end();
	rt_pin_release(0);
	between = 1;
	read_next_op();
}

void rt_store_loop_begin(int64_t count)
{
	int d = sch.depth++;
	if (d >= MAX_LOOPS)
		return;
	int op = rt.op;
	sch.lop[d] = sch.ready && op >= 0 && op < sch.nops && sch.kind[op] == K_LOOP ? op : -1;
	sch.count[d] = count;
	sch.iter[d] = 0;
}

void rt_store_loop_iter(int64_t i)
{
	if (sch.depth > 0 && sch.depth <= MAX_LOOPS)
		sch.iter[sch.depth - 1] = i;
}

void rt_store_loop_end(void)
{
	if (sch.depth > 0)
		sch.depth--;
}

/* The next use the store sees for c now (for tests and --profile): ops
 * from now, a fraction inside the current op's stream. */
double rt_store_when(const Chunk *c)
{
	return when(c);
}
