/*
 * plancost.c: a whole IA plan's cost (opt_cost), what --explain prints and
 * tune.c compares: per op its floats moved, bytes sent, flops and seconds
 * from cost.c's primitives, its floor (--profile's roofline), the live
 * bytes and peak per rank, then spill.c's out-of-core pricing.  cost.c
 * holds the primitives the search costs candidates with.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

/* ---- a whole plan ---- */

/* The bytes an op touches in memory on its busiest rank, of each input
 * and of its result (op_footprint), and where they are (cached_inputs):
 * which inputs are still in the cache when it runs, and whether its
 * result leaves the cache before it is read. */
typedef struct Footprint {
	double in[MAXIN], result;
	bool cached[MAXIN], evicted;
} Footprint;

/*
 * An op's floor, --profile's roofline (issue 33): the least time the
 * model's machine allows its busiest rank, the largest of
 *   - its flops (a rank's share) at the model's best rate for its kind of
 *     kernel: a contraction BLIS runs at the best gemm block's rate of
 *     its type, a convolution at conv_rate, generated loops at loop_rate
 *     (the model's one rate for them, so a loop can beat its floor);
 *   - the bytes it reads and writes in memory (its inputs' and result's
 *     share; a slice's window, a gather's index and rows, not the whole
 *     relation they read from) at memcpy's rate, which moves 2 bytes per
 *     byte copied, its destination's lines fetched before they are
 *     written: an input still in a rank's cache (cached_inputs) is not
 *     counted, nor a result its reader finds there: the kernel's own rate,
 *     measured on data in the cache, is the floor of an op whose bytes
 *     stay in it (mf's 1.9 MB joins ran at 2.6 times their bytes at
 *     memory speed); a result made in
 *     place of its input (ia_elementwise_in_place) is written into lines
 *     just read, and counts half its bytes; an op whose result shares its
 *     input's chunks (a rekey, a filter, an aggregation of groups of one
 *     chunk) moves none;
 *   - the bytes it sends (a rank's share) at the fastest collective's
 *     bandwidth;
 *   - a file's bytes at read_bw or write_bw, and initial values at their
 *     generator's rate.
 * No latency, overhead or first touch: a floor, not a prediction.
 */
static double op_floor(const CostCtx *cc, const IaPlan *p, const IaOp *op, const int *in, int k,
                       const double *copies, bool in_place, const Footprint *f)
{
	const Machine *m = cc->m;
	const IaOp *a = k > 0 ? &p->ops.v[in[0]] : NULL, *b = k > 1 ? &p->ops.v[in[1]] : NULL;
	double rate = m->loop_rate, net = 0, mem = 0;
	for (int c = 0; c < NCOLL; c++)
		net = fmax(net, m->bandwidth[c]);
	switch (op->kind) {
	case IA_READ:
		return cost_rank_bytes(cc, &op->type, &op->place, 1) / m->read_bw;
	case IA_WRITE:
		return rel_bytes(&a->type) / m->write_bw;
	case IA_INIT:
		return fmax(cost_init(cc, &p->tra->tensors.v[op->u.init.tensor], &op->type, &op->place),
		            cost_rank_bytes(cc, &op->type, &op->place, 1) / (2 * m->memcpy_bw));
	case IA_BCAST:
	case IA_SHUFFLE:
		return op->bytes_sent / cc->nsites / net;
	case IA_LOAD:
	case IA_RANGE:
	case IA_COUNTER:
	case IA_STORE:
	case IA_PRINT:
	case IA_LOOP:
	case IA_ENDLOOP:
		return 0;
	case IA_CONV:
		rate = m->conv_rate;
		break;
	case IA_JOIN:
	case IA_TWOPHASE: {
		const RelType *t[2] = {&a->type, &b->type};
		Contraction g;
		if (!(op->kind == IA_JOIN && op->u.join.mask.on) && !t[0]->sparse && !t[1]->sparse &&
		    !dtype_is_int(op->type.dtype) && contraction_plan(op->u.join.kernel, t, op->type.dtype, &g))
			for (int i = 0; i < m->ngemm; i++)
				rate = i ? fmax(rate, m->gemm_rate[op->type.dtype == DT_F64][i])
				         : m->gemm_rate[op->type.dtype == DT_F64][i];
		break;
	}
	case IA_SLICE:
		/* the window copied out: its bytes read and written, not the
		 * whole relation it is cut from (a batch of X in a loop) */
		return cost_rank_bytes(cc, &op->type, &op->place, 1) / m->memcpy_bw;
	case IA_GATHER:
	case IA_LOOKUP:
		/* the index read, the rows fetched read and written: not the
		 * whole table (op_footprint's) */
		mem = f->in[1] + 2 * f->result;
		return fmax(mem / (2 * m->memcpy_bw), op->bytes_sent / cc->nsites / net);
	case IA_FILTER:
		return 0;
	case IA_MAP:
		if (!op->u.map.kernel)
			return 0;
		break;
	case IA_AGG:
		if (cost_rank_bytes(cc, &a->type, &a->place, copies[in[0]]) <=
		    cost_rank_bytes(cc, &op->type, &op->place, copies[op - p->ops.v]) * (1 + 1e-9))
			return 0;
		break;
	case IA_SCATTER:
	case IA_HALO:
		break;
	}
	/* in the cache, the kernel's rates were measured so */
	for (int j = 0; j < k; j++)
		mem += f->cached[j] ? 0 : f->in[j];
	mem += f->evicted ? f->result * (in_place ? 0.5 : 1) : 0;
	double flops = op->flops / (op->place.kind == PL_ALL ? 1 : cc->nsites);
	return fmax(fmax(flops / rate, mem / (2 * m->memcpy_bw)), op->bytes_sent / cc->nsites / net);
}

/* What opt_cost knows of a plan as it walks it: per op, the partial copies
 * of its result per key and the bytes of it a rank holds; the loops'
 * lifetimes, where scatters add (ia_in_place), the bytes live now and the
 * most live so far. */
typedef struct Walk {
	CostCtx cc;
	double *copies, *held;
	double *made, *transient;       /* per op: its result's bytes, what it holds besides */
	IaLoops life;
	InPlace *inplace;
	int *elem_ip;           /* per op: the input it is made in place of, or -1 */
	int *last;              /* life.dead_after, params' made to live to the end */
	double live, high;
	/* the cache (cached_inputs): per op the bytes it touches, their
	 * running sum up to it, the op that last used its data, the first
	 * op that reads its result (-1 none) */
	double *touch, *upto;
	int *used, *reader;
} Walk;

/* Where a join computes: its key space placed as its inputs a, b give. */
static Place join_space(const IaOp *op, const IaOp *a, const IaOp *b)
{
	if (a->place.kind == PL_ALL && b->place.kind == PL_ALL)
		return place_all();
	if (a->place.kind != PL_ALL)
		return a->place;
	Place jp = {.kind = PL_PART, .ndims = b->place.ndims};
	for (int d = 0; d < b->place.ndims; d++)
		jp.dims[d] = ia_join_out_dim(a->type.nkey, &op->u.join.on, b->place.dims[d]);
	return jp;
}

/* A join's (or convolution's) partial copies per key when it leaves
 * partial sums, computing over jp. */
static void join_copies(Walk *w, int i, const IaOp *op, const IaOp *a, const IaOp *b, const Place *jp)
{
	if (op->place.kind == PL_PARTIAL) {
		RelType jt = ia_join_type(&a->type, &b->type, &op->u.join.on);
		w->copies[i] = cost_partial_copies(&w->cc, &jt, jp, op->u.join.ngroup, op->u.join.group);
	}
}

/* Op i's cost as the plan has it (its result's partial copies in
 * w->copies[i]); *io: its seconds no plan saves (reading inputs, params'
 * initial values, writing outputs), which are not the plan's. */
static Cost op_cost(Walk *w, const IaPlan *p, int i, double *io)
{
	const CostCtx *cc = &w->cc;
	const IaOp *op = &p->ops.v[i];
	int in[MAXIN];
	int k = ia_inputs(op, in);
	const IaOp *a = k > 0 ? &p->ops.v[in[0]] : NULL;
	const IaOp *b = k > 1 ? &p->ops.v[in[1]] : NULL;
	Cost c = {0};
	*io = 0;
	w->copies[i] = 1;
	switch (op->kind) {
	case IA_READ:
		/* the search weighs what cost_read gives (a whole read, a
		 * partitioned one's calls); the op's time is every rank's share */
		c = cost_read(cc, &op->type, &op->place);
		*io = cost_read_seconds(cc, &op->type, &op->place) - c.seconds;
		return c;
	case IA_WRITE:
		*io = cost_write(cc, &a->type);
		return c;
	case IA_INIT:
		*io = cost_init(cc, &p->tra->tensors.v[op->u.init.tensor], &op->type, &op->place);
		return c;
	case IA_FILTER:
	case IA_LOAD:
	case IA_RANGE:
	case IA_COUNTER:
	case IA_STORE:
	case IA_PRINT:
	case IA_LOOP:
	case IA_ENDLOOP:
		return c;
	case IA_BCAST:
	case IA_SHUFFLE:
		c = cost_move(cc, &a->type, &a->place, w->copies[in[0]], &op->place);
		if (op->kind == IA_BCAST && a->place.kind == PL_PARTIAL)
			w->copies[i] = w->copies[in[0]];        /* every partial, everywhere */
		return c;
	case IA_JOIN: {
		Place jp = join_space(op, a, b);
		c = cost_join(cc, op->u.join.kernel, &a->type, &b->type, &op->u.join.on, &jp,
		              k > 2 ? &p->ops.v[in[2]].type : NULL);
		join_copies(w, i, op, a, b, &jp);
		return c;
	}
	case IA_CONV: {
		Place jp = join_space(op, a, b);
		c = cost_conv(cc, op->u.join.kernel, &a->type, &b->type, &op->u.join.on, &op->type, &jp);
		join_copies(w, i, op, a, b, &jp);
		return c;
	}
	case IA_AGG:
		c = cost_agg(cc, &a->type, &a->place, w->copies[in[0]], &op->type);
		if (op->place.kind == PL_PARTIAL)
			w->copies[i] = a->place.kind == PL_PARTIAL ? w->copies[in[0]]
			               : cost_partial_copies(cc, &a->type, &a->place, op->u.agg.ngroup, op->u.agg.group);
		return c;
	case IA_MAP:
		c = cost_map(cc, op->u.map.kernel, &a->type, &a->place);
		if (op->place.kind == PL_PARTIAL)
			w->copies[i] = w->copies[in[0]];
		return c;
	case IA_GATHER:
	case IA_LOOKUP:
		return cost_gather(cc, &a->type, &a->place, op->u.gather.dim, &b->type, &b->place, &op->type);
	case IA_SCATTER:
		return cost_scatter(cc, &a->type, &a->place, &b->type, &op->type, &op->place,
		                    op->u.gather.base < 0 ? SCATTER_ZEROS
		                    : w->inplace[i] != IP_NONE ? SCATTER_IN_PLACE : SCATTER_COPY);
	case IA_HALO:
		return cost_halo(cc, &a->type, &a->place, &op->type);
	case IA_SLICE:          /* the window copied out, locally */
		return cost_slice(cc, &op->type, &op->place);
	case IA_TWOPHASE: {
		/* planned with the schedule (twophase.c) */
		const TpSched *ts = op->u.join.sched;
		return (Cost){ts->seconds, ts->floats, ts->bytes, ts->flops, 0};
	}
	}
	tr_bug("bad IA op");
}

/*
 * The bytes of op i's result (full on the busiest rank) that are its
 * input's chunks, which the runtime shares rather than copies: a broadcast
 * keeps a rank's own tuples and a shuffle those that stay (comm.c), a
 * rekey or replication and a filter take their input's (local.c).  A
 * shuffle keeps what does not move: its input's share times one less the
 * fraction cost_move moves (op->bytes_sent over the input's bytes).
 */
static double shared_bytes(const Walk *w, const IaPlan *p, int i, double full)
{
	const IaOp *op = &p->ops.v[i];
	int in[MAXIN];
	if (ia_inputs(op, in) < 1)
		return 0;
	const IaOp *a = &p->ops.v[in[0]];
	double mine = cost_rank_bytes(&w->cc, &a->type, &a->place, w->copies[in[0]]);
	switch (op->kind) {
	case IA_BCAST:
	case IA_FILTER:
		return fmin(mine, full);
	case IA_MAP:
		return op->u.map.kernel ? 0 : fmin(mine, full);
	case IA_SHUFFLE: {
		if (a->place.kind == PL_ALL)
			return full;
		double whole = rel_bytes(&a->type) * (a->place.kind == PL_PARTIAL ? w->copies[in[0]] : 1);
		double moved = whole > 0 ? fmin(1, op->bytes_sent / whole) : 1;
		return fmin(mine * (1 - moved), full);
	}
	case IA_READ: case IA_WRITE: case IA_INIT: case IA_LOAD: case IA_RANGE:
	case IA_COUNTER: case IA_STORE: case IA_PRINT: case IA_LOOP: case IA_ENDLOOP:
	case IA_JOIN: case IA_CONV: case IA_AGG: case IA_GATHER: case IA_LOOKUP:
	case IA_SCATTER: case IA_HALO: case IA_SLICE: case IA_TWOPHASE:
		return 0;
	}
	tr_bug("bad IA op");
}

/* Op i's result joins the live set, the inputs it reads last leave it
 * after it: its live bytes, the plan's peak, and the first touch of memory
 * beyond the most held so far (the op's time, a read's and an initial
 * value's too: their rates are measured into memory touched already, and
 * a read's page faults cost as much as its copy; the runtime's chunk
 * cache reuses what ops free, and inside a loop only the first pass
 * touches).  times: its runs. */
static void op_memory(Walk *w, IaPlan *p, int i, double times)
{
	IaOp *op = &p->ops.v[i];
	int n = p->ops.n, in[MAXIN];
	int k = ia_inputs(op, in);
	double *held = w->held;
	if (op->kind == IA_INIT)
		w->last[i] = n;         /* a param's storage lives to the end */
	if (ia_has_result(op->kind) && op->kind != IA_LOAD) {
		if (w->inplace[i] == IP_OWNED || w->inplace[i] == IP_PARAM) {
			/* a scatter in place holds its base's chunks (a
			 * param's own: nothing more) */
			held[i] = w->made[i] = held[op->u.gather.base];
			w->live += held[i];
		} else if (w->elem_ip[i] >= 0) {
			/* an elementwise op in place takes the chunks its input
			 * holds alone, and makes the rest */
			int x = in[w->elem_ip[i]];
			held[i] = w->made[i] = cost_rank_bytes(&w->cc, &op->type, &op->place, w->copies[i]);
			w->live += held[i] - held[x];
			held[x] = 0;
		} else {
			double full = cost_rank_bytes(&w->cc, &op->type, &op->place, w->copies[i]);
			double shared = shared_bytes(w, p, i, full);
			/* the shared chunks are held once, by whichever of the
			 * input and the result is freed last */
			double take = k > 0 && w->last[in[0]] <= w->last[i] ? fmin(shared, held[in[0]]) : 0;
			if (take > 0)
				held[in[0]] -= take;
			held[i] = full - shared + take;
			w->live += full - shared;
			/* what spill.c's replay counts the op as making: a
			 * rekey's and a one-site broadcast's chunks as held,
			 * anything else's whole result */
			bool rekey = (op->kind == IA_MAP && !op->u.map.kernel) || (op->kind == IA_BCAST && w->cc.nsites == 1);
			w->made[i] = rekey ? held[i] : full;
		}
	}
	/* a two-phase schedule holds chunks received and partial sums while
	 * it runs (its mem counts its accumulators, which are the result's
	 * chunks, too: held already); a write, on rank 0, a band of the
	 * output or a chunk received */
	const IaOp *a = k > 0 ? &p->ops.v[in[0]] : NULL;
	double transient = op->kind == IA_TWOPHASE ? fmax(0, op->u.join.sched->mem - held[i])
	                   : op->kind == IA_WRITE ? write_transient_bytes(&w->cc, &a->type, &a->place,
	                                                                  p->tra->tensors.v[op->u.write.tensor].outpath)
	                   : 0;
	double now = w->live + transient;
	w->transient[i] = transient;
	op->live_bytes = now;
	if (now > w->high) {
		if (times == 1)
			op->seconds += (now - w->high) / w->cc.m->touch_bw;
		w->high = now;
	}
	if (now > p->peak_bytes) {
		p->peak_bytes = now;
		p->peak_op = i;
	}
	for (int j = 0; j < k; j++)
		if (w->last[in[j]] == i && held[in[j]] > 0) {
			w->live -= held[in[j]];
			held[in[j]] = 0;
		}
	if (op->kind == IA_ENDLOOP)
		for (int j = 0; j < i; j++)
			if (w->last[j] == i && held[j] > 0) {
				w->live -= held[j];
				held[j] = 0;
			}
}

/* Op i's bytes on the busiest rank (its partial copies counted). */
static double rank_bytes(const Walk *w, const IaPlan *p, int i)
{
	const IaOp *op = &p->ops.v[i];
	return cost_rank_bytes(&w->cc, &op->type, &op->place, w->copies[i]);
}

/*
 * The bytes op i touches of each input and of its result into *f, their
 * shares on the busiest rank: a gather's index and the rows it fetches,
 * not the whole table; a scatter in place of its base the rows it adds
 * into it, read and written, not the whole base; a slice's window; none
 * where the op moves no data or its result is its input's chunks (a
 * rekey, a filter).  Their sum is the op's step on the running count
 * reuse distances are measured on (w->upto).
 */
static double op_footprint(const Walk *w, const IaPlan *p, int i, const int *in, int k, Footprint *f)
{
	const IaOp *op = &p->ops.v[i];
	memset(f, 0, sizeof *f);
	switch (op->kind) {
	case IA_LOAD: case IA_STORE: case IA_PRINT: case IA_LOOP: case IA_ENDLOOP:
	case IA_RANGE: case IA_COUNTER: case IA_FILTER:
		return 0;
	case IA_MAP:
		if (!op->u.map.kernel)
			return 0;
		break;
	case IA_GATHER:
	case IA_LOOKUP:
		f->result = rank_bytes(w, p, i);
		f->in[0] = fmin(rank_bytes(w, p, in[0]), f->result);
		f->in[1] = rank_bytes(w, p, in[1]);
		return f->in[0] + f->in[1] + f->result;
	case IA_SCATTER:
		if (op->u.gather.base >= 0 && w->inplace[i] != IP_NONE) {
			f->in[0] = rank_bytes(w, p, in[0]);
			f->in[1] = rank_bytes(w, p, in[1]);
			f->in[2] = fmin(rank_bytes(w, p, in[2]), f->in[0]);
			f->result = f->in[2];
			return f->in[0] + f->in[1] + f->in[2];
		}
		break;
	case IA_SLICE:
		f->result = f->in[0] = rank_bytes(w, p, i);
		return 2 * f->result;
	case IA_READ: case IA_WRITE: case IA_INIT: case IA_BCAST: case IA_SHUFFLE: case IA_JOIN:
	case IA_AGG: case IA_TWOPHASE: case IA_CONV: case IA_HALO:
		break;
	}
	double b = f->result = ia_has_result(op->kind) ? rank_bytes(w, p, i) : 0;
	for (int j = 0; j < k; j++)
		b += f->in[j] = rank_bytes(w, p, in[j]);
	return b;
}

/*
 * Where op i's bytes are when it runs, into f (op_footprint's): an input
 * is in a rank's cache when the bytes touched since its last use (its
 * reuse distance on the running count w->upto) and the op's own together
 * fit in cache_per_rank, as in a cache that keeps what was used last;
 * inside a loop that runs more than once, an input last used before the
 * loop is met again a pass of the body later.  The result leaves the cache
 * before its first reader reads it when that reader finds it so, or,
 * read by none, when the op's own bytes do not fit.  transe's joins at B =
 * 32768 on 2 ranks (three arrays of 4 MB, under the 17 MB cache, made by
 * the gathers just before them) ran at 1.0-1.4 ns an element, their bytes
 * at memory speed, where a test of their own bytes alone priced them at
 * the loop rate, 0.17-0.35.  A cache keeps less than its size (CACHE_KEPT):
 * out = x * y + x over 12 MB a core kept its pace with both cores of the
 * Zen 3 at it (47-63 GB/s), where 16 MB ran at memory speed (11-12 GB/s),
 * its L2 and half its L3 16.5 MB.
 */
#define CACHE_KEPT 0.75
static void cached_inputs(const Walk *w, int i, const int *in, int k, Footprint *f)
{
	double cache = CACHE_KEPT * w->cc.m->cache_per_rank;
	int loop = w->life.loopof[i];
	for (int j = 0; j < k; j++) {
		int at = w->used[in[j]];
		double dist = loop >= 0 && at < loop && w->life.times[i] > 1
		              ? w->upto[w->life.endof[loop]] - w->upto[loop] - w->touch[i]
		              : w->upto[i - 1] - w->upto[at];
		f->cached[j] = dist + w->touch[i] <= cache;
	}
	int r = w->reader[i];
	f->evicted = r < 0 ? w->touch[i] > cache : w->upto[r - 1] - w->upto[i] + w->touch[r] > cache;
}

void opt_cost(IaPlan *p, const Machine *mach)
{
	Machine dflt;
	if (!mach) {
		machine_default(&dflt);
		mach = &dflt;
	}
	int n = p->ops.n;
	Walk w = {.cc = {mach, p->nranks, p->objective, p->mem_budget}};
	w.copies = xcalloc(n + 1, sizeof *w.copies);
	w.held = xcalloc(n + 1, sizeof *w.held);
	w.made = xcalloc(n + 1, sizeof *w.made);
	w.transient = xcalloc(n + 1, sizeof *w.transient);
	w.touch = xcalloc(n + 1, sizeof *w.touch);
	w.upto = xcalloc(n + 1, sizeof *w.upto);
	w.used = xcalloc(n + 1, sizeof *w.used);
	w.reader = xcalloc(n + 1, sizeof *w.reader);
	Cost *cost = xcalloc(n + 1, sizeof *cost);
	double *io = xcalloc(n + 1, sizeof *io);
	/* a relation read inside a loop it was made outside of lives to the
	 * loop's end, as the generated program frees it */
	ia_loops(p, &w.life);
	w.inplace = ia_in_place(p, &w.life);    /* before `last` changes */
	w.elem_ip = xcalloc(n + 1, sizeof *w.elem_ip);
	for (int i = 0; i < n; i++)
		w.elem_ip[i] = p->mem_budget > 0 ? -1 : ia_elementwise_in_place(p, &w.life, i);
	w.last = w.life.dead_after;

	/* each op's cost and partial copies, then the bytes each touches */
	for (int i = 0; i < n; i++) {
		IaOp *op = &p->ops.v[i];
		cost[i] = op_cost(&w, p, i, &io[i]);
		/* a sparse result made in place of an input of its pattern
		 * (ia_elementwise_in_place) makes no new chunk: its rows'
		 * offsets, columns and values are not copied from the
		 * pattern's into memory new to the op, which sparse_elem (a
		 * visit of an element by an op that does) includes: mf_sparse's
		 * elementwise ops over E, 60M elements a rank, 0.13 -> 0.05 s
		 * made in place, priced 0.164 -> 0.081 */
		if (w.elem_ip[i] >= 0 && op->type.sparse)
			cost[i].seconds = fmax(0, cost[i].seconds - cost_rank_bytes(&w.cc, &op->type, &op->place, 1) / mach->memcpy_bw);
		op->floats_moved = cost[i].floats;
		op->bytes_sent = cost[i].bytes;
		op->flops = cost[i].flops;
	}
	Footprint *fp = xcalloc(n + 1, sizeof *fp);
	for (int i = 0; i < n; i++) {
		int in[MAXIN], k = ia_inputs(&p->ops.v[i], in);
		w.touch[i] = op_footprint(&w, p, i, in, k, &fp[i]);
		w.upto[i] = (i > 0 ? w.upto[i - 1] : 0) + w.touch[i];
		w.reader[i] = -1;
	}
	/* each result's first reader, past rekeys and filters of it */
	for (int i = n - 1; i >= 0; i--) {
		int in[MAXIN], k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			w.reader[in[j]] = i;
	}
	for (int i = n - 1; i >= 0; i--) {
		int r = w.reader[i];
		if (r >= 0 && w.touch[r] == 0 && ia_has_result(p->ops.v[r].kind))
			w.reader[i] = w.reader[r];
	}

	p->total_floats_moved = p->total_bytes_sent = p->total_flops = 0;
	p->peak_bytes = p->predicted_seconds = 0;
	for (int i = 0; i < n; i++) {
		IaOp *op = &p->ops.v[i];
		/* ops inside repeat blocks run count times: their costs add up so */
		double times = w.life.times[i];
		Cost c = cost[i];
		int in[MAXIN], k = ia_inputs(op, in);
		cached_inputs(&w, i, in, k, &fp[i]);
		op->floor_seconds = op_floor(&w.cc, p, op, in, k, w.copies, w.elem_ip[i] >= 0, &fp[i]);
		/* no op is faster than its floor: a loop over bytes not in the
		 * cache streams them (the loop rate is measured in the cache;
		 * nnsearch's diff = X - q, 48 MB a rank, took 3.4 ms where the
		 * loop rate priced 1.2 and the floor 3.1) */
		c.seconds = fmax(c.seconds, op->floor_seconds - io[i]);
		op->seconds = c.seconds + io[i];
		op->spill_written = op->spill_read = 0;
		p->total_floats_moved += c.floats * times;
		p->total_bytes_sent += c.bytes * times;
		p->total_flops += c.flops * times;
		p->predicted_seconds += c.seconds * times;
		op_memory(&w, p, i, times);
		/* the last use of each input's data is now; a result that is
		 * its input's chunks was last used where they were */
		w.used[i] = k > 0 && w.touch[i] == 0 ? w.used[in[0]] : i;
		for (int j = 0; j < k && w.touch[i] > 0; j++)
			w.used[in[j]] = i;
	}
	/* out of core: the spill file's writes and reads, priced */
	p->spill_written = p->spill_read = 0;
	p->resident_peak = p->peak_bytes;
	if (p->mem_budget > 0 && p->peak_bytes > p->mem_budget)
		opt_spill(p, mach, w.made, w.transient, &w.life);
	free(w.copies);
	free(w.held);
	free(w.made);
	free(w.transient);
	free(w.touch);
	free(w.upto);
	free(w.used);
	free(w.reader);
	free(cost);
	free(io);
	free(fp);
	free(w.inplace);
	free(w.elem_ip);
	ia_loops_free(&w.life);
}

/*
 * What runtime/ist.c does on each rank around an IST loop's steps, in
 * seconds a run of the loop, priced as bytes at memcpy's rate:
 *   - per run, every param copied whole from the program's chunks and back
 *     (rel_to_whole, whole_to_rel), and each entry of a split param walked
 *     4 times: holder lists set, then gather_whole's count, pack and place,
 *     which copy every entry (its own or another rank's) one by one;
 *   - per round, each split param's entries walked 4 times (entry_owners,
 *     then walk_moves' count, pack and place), the exchanged entries copied
 *     twice (packed, placed); each param's subnet slice copied 4 times
 *     (subnet_slice and block_copy, in and out), an element of a slice
 *     whose last dim is split one at a time through its neuron's index
 *     (8 bytes more), and each row of a slice slice_row.
 * An entry's walk is its holder's and owner's ints, 8 bytes: a walk took
 * 0.8-1.6 ns an entry on the development machine, 8 bytes at its memcpy
 * rate 1 ns.  The body's tensors hold the subnet's shapes: a split dim's
 * whole extent is n times its own.
 */
#define IST_WALK_BYTES 8.0
static double ist_copies(const TraProg *body, const IstLoop *l, int n, const IstTraffic *tr, const Machine *m)
{
	double run = 0, round = 0, rows = 0;
	for (int i = 0; i < body->tensors.n; i++) {
		const Tensor *ten = &body->tensors.v[i];
		if (!ist_param_loaded(body, i))
			continue;
		double es = dtype_size(ten->dtype), whole = 1, sub = 1, prow = 1;
		bool last_split = false;
		int nsplit = 0;
		for (int d = 0; d < ten->rank; d++) {
			bool split = ist_dim_split(l, ten, d);
			nsplit += split;
			last_split = split && d == ten->rank - 1;
			whole *= (double)ten->shape[d] * (split ? n : 1);
			sub *= (double)ten->shape[d];
			if (d < ten->rank - 1)
				prow *= (double)ten->shape[d];
		}
		run += 2 * whole * es;
		round += 4 * sub * es + (last_split ? 2 * sub * 8 : 0);
		rows += 2 * prow;
		if (nsplit > 0) {
			run += 4 * whole * IST_WALK_BYTES + whole * es;
			round += 4 * whole * IST_WALK_BYTES;
		}
	}
	round += 2 * tr->exchange * 4 / n;
	return (run + (double)tr->rounds * round) / m->memcpy_bw + (double)tr->rounds * rows * m->slice_row;
}

/*
 * An IST loop's seconds a run (runtime/ist.c, trt_ist): each rank runs its
 * own steps (b = rank, rank + n, ...: the busiest ceil(count / n)) of the
 * body's plan for one subnet, whose ops inside the loop are one step
 * (their seconds at the times they run, over the loop op's); each round,
 * the split params' slices exchanged (an alltoallv of ist_traffic's
 * floats, each rank its share) and the unsplit ones averaged (an
 * allreduce); after the last, the params gathered (an allgatherv); and
 * the copies and walks around the steps (ist_copies).
 */
void opt_cost_ist(IaPlan *p, int loop, const IaPlan *body, const Machine *mach)
{
	Machine dflt;
	if (!mach) {
		machine_default(&dflt);
		mach = &dflt;
	}
	const IstLoop *l = &p->tra->ist.v[loop];
	int n = p->nranks;
	IaLoops bl;
	ia_loops(body, &bl);
	int at = -1;
	for (int i = 0; i < body->ops.n && at < 0; i++)
		if (body->ops.v[i].kind == IA_LOOP && body->ops.v[i].u.loop.ist == loop + 1)
			at = i;
	double step = 0;
	for (int i = at + 1; at >= 0 && i < bl.endof[at]; i++)
		step += body->ops.v[i].seconds * bl.times[i] / bl.times[at];
	ia_loops_free(&bl);
	IstTraffic tr = ist_traffic(body->tra, l, n);
	double most = (double)((l->count + n - 1) / n), f = 4;
	double round = 0, gather = 0;
	if (n > 1) {
		round = machine_coll(mach, COLL_ALLTOALL, tr.exchange * f / n) +
		        (tr.average > 0 ? machine_coll(mach, COLL_ALLREDUCE, tr.average * f / (2.0 * (n - 1))) : 0);
		gather = machine_coll(mach, COLL_ALLGATHER, tr.gather * f / n);
	}
	double run = most * step + (double)tr.rounds * round + gather + ist_copies(body->tra, l, n, &tr, mach);
	IaLoops pl;
	ia_loops(p, &pl);
	for (int i = 0; i < p->ops.n; i++) {
		IaOp *op = &p->ops.v[i];
		if (op->kind != IA_LOOP || op->u.loop.ist != loop + 1 || op->u.loop.count <= 0)
			continue;
		p->predicted_seconds += (run - op->seconds) * pl.times[i] / (double)op->u.loop.count;
		op->seconds = run;
	}
	ia_loops_free(&pl);
}
