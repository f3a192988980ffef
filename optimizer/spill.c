/*
 * spill.c: the price of running a plan out of core (issue 32).
 *
 * Under a budget (IaPlan.mem_budget) a rank holds at most that many bytes
 * of chunks in memory and the rest in its spill file (runtime/store.c,
 * spill.c).  opt_spill replays the plan's schedule as the runtime's chunk
 * store runs it, relation by relation on the busiest rank (each
 * relation's bytes as opt_cost's walk holds them), and gives each op the
 * bytes it writes to the spill file and reads back:
 *
 *  - before an op runs, its inputs are resident: what of them is in the
 *    file is read back;
 *  - its result joins the resident set; while the resident set (and the
 *    op's transient memory) is over the budget, the relation used farthest
 *    in the future goes (Belady's rule, which the runtime follows from the
 *    same static schedule; a relation read in a later iteration of a loop
 *    is next used there), its bytes without a copy in the file written
 *    (relations are immutable: a chunk read back keeps its copy, and goes
 *    again for free);
 *  - an op whose own working set (inputs, result, transient) is over the
 *    budget streams: it runs by tiles of its result of half the budget
 *    each (as the runtime's joins do), its inputs streamed through once
 *    per tile when they do not fit in the other half, and what of its
 *    result does not fit goes to the file as it is made.
 *
 * The bytes are priced at the machine model's file rates (read_bw,
 * write_bw; `make calibrate` measures them) and added to the op's seconds
 * and the plan's predicted seconds, so the search compares out-of-core
 * plans with their spilling priced.  The rule needs no case per op kind:
 * it reads only the ops' inputs, their bytes and the loops.  What the
 * runtime overlaps (its read-ahead) is not subtracted: the price is an
 * upper bound.  The plan's resident peak is the budget (or its in-memory
 * peak, when lower), or where more, what an op must hold at once: three
 * chunks of each of its inputs and of its result (the one in use, the
 * next, received or read ahead, and one in flight to a peer).
 */
#include <math.h>
#include <stdlib.h>

#include "optimizer/opt.h"

typedef struct Replay {
	const IaPlan *p;
	const IaLoops *life;
	const int *last;
	double *res;            /* per op: its result's bytes in memory */
	const double *made;     /* per op: its result's bytes */
	double *copy;           /* per op: its result's bytes with a copy in the file */
	double resident;        /* sum of res */
} Replay;

/* The op whose result op i reads as input j: a param's load reads the
 * param's storage (its INIT), which is what lives. */
static int source(const IaPlan *p, int x)
{
	const IaOp *op = &p->ops.v[x];
	if (op->kind != IA_LOAD)
		return x;
	for (int k = 0; k < p->ops.n; k++)
		if (p->ops.v[k].kind == IA_INIT && p->ops.v[k].u.init.tensor == op->u.init.tensor)
			return k;
	return x;
}

/* The bytes of op x's first chunk (the largest there is; a sparse one's
 * stored elements and indices, not its dense size). */
static double chunk_bytes(const IaOp *op)
{
	int64_t key[MAXDIM] = {0};
	return rel_chunk_bytes(&op->type, key);
}

static bool reads(const IaPlan *p, int k, int x)
{
	int in[MAXIN], n = ia_inputs(&p->ops.v[k], in);
	for (int j = 0; j < n; j++)
		if (source(p, in[j]) == x)
			return true;
	return false;
}

/* How far after op i relation x is next read: its next reader's distance,
 * or in a loop that reads it again in its next iteration, the rest of the
 * iteration and the way to that reader; infinite when nothing reads it. */
static double next_use(const Replay *r, int x, int i)
{
	const IaPlan *p = r->p;
	for (int k = i + 1; k <= r->last[x] && k < p->ops.n; k++)
		if (reads(p, k, x))
			return k - i;
	for (int l = r->life->loopof[i]; l >= 0; l = r->life->parent[l]) {
		if (l <= x)
			break;          /* made inside this loop: made again, not reread */
		for (int k = l + 1; k <= i; k++)
			if (reads(p, k, x))
				return (r->life->endof[l] - i) + (k - l);
	}
	return INFINITY;
}

/* Makes room for `need` more bytes beyond the resident set by evicting,
 * farthest next use first, relations op i does not touch; returns the
 * bytes written. */
static double evict(Replay *r, int i, const int *keep, int nkeep, double over)
{
	double written = 0;
	while (over > 0) {
		int v = -1;
		double far = -1;
		for (int x = 0; x < i; x++) {
			if (r->res[x] <= 0)
				continue;
			bool kept = false;
			for (int j = 0; j < nkeep; j++)
				kept |= keep[j] == x;
			if (kept)
				continue;
			double d = next_use(r, x, i);
			if (d > far) {
				far = d;
				v = x;
			}
		}
		if (v < 0)
			break;
		double go = fmin(r->res[v], over);
		/* bytes with a copy in the file go for free, the others are
		 * written first (every byte out of memory has its copy) */
		double copied = fmax(0, r->copy[v] - (r->made[v] - r->res[v]));
		double w = fmax(0, go - copied);
		written += w;
		r->copy[v] += w;
		r->res[v] -= go;
		r->resident -= go;
		over -= go;
	}
	return written;
}

void opt_spill(IaPlan *p, const Machine *m, const double *made, const double *transient, const IaLoops *life)
{
	int n = p->ops.n;
	double B = p->mem_budget;
	Replay r = {p, life, life->dead_after, .made = made};
	r.res = xcalloc((size_t)n + 1, sizeof *r.res);
	r.copy = xcalloc((size_t)n + 1, sizeof *r.copy);
	p->spill_written = p->spill_read = 0;
	p->resident_peak = 0;
	for (int i = 0; i < n; i++) {
		IaOp *op = &p->ops.v[i];
		double times = life->times[i];  /* ops in repeat blocks spill once an iteration */
		int in[MAXIN], keep[MAXIN + 1], k = ia_inputs(op, in);
		double read = 0, written = 0, inbytes = 0;
		for (int j = 0; j < k; j++) {
			int x = keep[j] = source(p, in[j]);
			read += made[x] - r.res[x];     /* back from the file */
			r.resident += made[x] - r.res[x];
			r.res[x] = made[x];
			inbytes += made[x];
		}
		keep[k] = i;
		double ws = inbytes + made[i] + transient[i];
		/* room for the result: others go */
		written += evict(&r, i, keep, k + 1, r.resident + made[i] + transient[i] - B);
		r.res[i] = made[i];
		r.copy[i] = 0;
		r.resident += made[i];
		if (ws > B && B > 0) {
			/* the op streams: tiles of its result of half the budget,
			 * what it reads -- its inputs and the chunks it receives
			 * (its transient bytes: a two-phase join's) -- read once
			 * more each tile after the first unless it fits in the
			 * other half, the received chunks that do not fit
			 * written once and read back; its result beyond the
			 * budget written as it is made */
			double tiles = fmax(1, ceil(made[i] / (B / 2)));
			double all = inbytes + transient[i], recv = fmin(transient[i], fmax(0, all - B / 2));
			if (all > B / 2)
				read += (tiles - 1) * all + recv;
			written += recv;
			double out = fmin(made[i], ws - B);
			written += out;
			r.copy[i] = out;
			r.res[i] -= out;
			r.resident -= out;
		}
		double least = ia_has_result(op->kind) ? chunk_bytes(op) : 0;
		for (int j = 0; j < k; j++)
			least += chunk_bytes(&p->ops.v[keep[j]]);
		p->resident_peak = fmax(p->resident_peak, fmax(fmin(p->peak_bytes, B), 3 * least));
		op->spill_written = written;
		op->spill_read = read;
		double secs = written / m->write_bw + read / m->read_bw;
		op->seconds += secs;
		p->predicted_seconds += secs * times;
		p->spill_written += written * times;
		p->spill_read += read * times;
		/* what dies after op i leaves memory and the file */
		for (int x = 0; x <= i; x++)
			if (r.last[x] == i) {
				r.resident -= r.res[x];
				r.res[x] = r.copy[x] = 0;
			}
	}
	free(r.res);
	free(r.copy);
}
