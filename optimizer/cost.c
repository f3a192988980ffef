/*
 * cost.c: the cost model.
 *
 * Section 5.3 of the TRA paper: because frontiers are known exactly, so are
 * the sizes of all relations, and the cost of a plan is the number of floats
 * it moves: a broadcast of f floats over s sites costs f*s, a shuffle f.
 * Beside that metric we compute what a run will actually do: bytes that
 * leave their site (exact, from the site function the runtime uses), flops,
 * peak bytes per rank (intermediates freed after their last use), and a
 * predicted time from a small machine model.
 *
 * A relation of partial aggregates (PL_PARTIAL) holds each key on up to r
 * sites; `copies` tracks that r (s for PL_ALL, 1 for PL_PART).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

/* The machine model: shared-memory MPI on one node, one BLIS thread per rank. */
static const struct {
	double latency;         /* seconds per message */
	double bandwidth;       /* bytes per second, per rank */
	double gemm_rate;       /* flop/s per rank in BLIS */
	double loop_rate;       /* flop/s per rank in generated loops */
} machine = {2e-6, 4e9, 5e10, 2e9};

#define ENUM_LIMIT 1000000      /* tuples enumerated exactly; above, estimates */

/* The runtime's site function (trt_site): row-major index over the
 * partitioning dims' frontiers, modulo the rank count. */
static int site_of(const Place *p, const RelType *t, const int64_t *key, int s)
{
	int64_t lin = 0;
	for (int i = 0; i < p->ndims; i++) {
		int d = p->dims[i];
		lin = lin * rel_frontier(t, d) + key[d];
	}
	return (int)(lin % s);
}

/* Bytes of the chunk at key (edge chunks are short). */
static double chunk_bytes(const RelType *t, const int64_t *key)
{
	double n = dtype_size(t->dtype);
	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		int64_t len = t->extent[d] - key[d] * t->block[d];
		n *= (double)(len < t->block[d] ? len : t->block[d]);
	}
	return n;
}

/* Per-site bytes of a relation placed by p; false if too many tuples. */
static bool per_site_bytes(const RelType *t, const Place *p, int s, double *site)
{
	int64_t n = rel_ntuples(t);
	int64_t key[MAXDIM] = {0};
	if (n > ENUM_LIMIT)
		return false;
	for (int i = 0; i < s; i++)
		site[i] = 0;
	for (int64_t k = 0; k < n; k++) {
		int64_t rest = k;
		for (int d = t->nkey - 1; d >= 0; d--) {
			key[d] = rest % rel_frontier(t, d);
			rest /= rel_frontier(t, d);
		}
		site[site_of(p, t, key, s)] += chunk_bytes(t, key);
	}
	return true;
}

static double rel_bytes(const RelType *t)
{
	return rel_floats(t) * dtype_size(t->dtype);
}

/* The most bytes one rank holds of a relation. */
static double max_rank_bytes(const IaOp *op, double copies, int s, double *scratch)
{
	switch (op->place.kind) {
	case PL_ALL:
		return rel_bytes(&op->type);
	case PL_PARTIAL:
		return rel_bytes(&op->type) * copies / s;
	case PL_PART:
		if (per_site_bytes(&op->type, &op->place, s, scratch)) {
			double m = 0;
			for (int i = 0; i < s; i++)
				m = scratch[i] > m ? scratch[i] : m;
			return m;
		}
		return rel_bytes(&op->type) / s;
	}
	return 0;
}

/* Bytes a shuffle sends: tuples whose site changes. */
static double shuffle_bytes(const IaOp *in, double in_copies, const Place *to, int s)
{
	const RelType *t = &in->type;
	if (in->place.kind == PL_ALL)
		return 0;               /* every site keeps its own part */
	if (in->place.kind == PL_PARTIAL || rel_ntuples(t) > ENUM_LIMIT)
		return rel_bytes(t) * in_copies * (s - 1) / s;
	double sent = 0;
	int64_t n = rel_ntuples(t), key[MAXDIM] = {0};
	for (int64_t k = 0; k < n; k++) {
		int64_t rest = k;
		for (int d = t->nkey - 1; d >= 0; d--) {
			key[d] = rest % rel_frontier(t, d);
			rest /= rel_frontier(t, d);
		}
		if (site_of(&in->place, t, key, s) != site_of(to, t, key, s))
			sent += chunk_bytes(t, key);
	}
	return sent;
}

static int kexpr_ops(const KExpr *e)
{
	if (e->kind != KX_OP)
		return 0;
	int n = 1;
	for (int i = 0; i < kop_arity(e->op); i++)
		n += kexpr_ops(e->arg[i]);
	return n;
}

/* Flops of a kernel over a whole relation: every label's full extent,
 * times the work per element. */
static double kernel_flops(const Kernel *k, int nin, const RelType *const *in)
{
	double n = 1;
	for (int l = 0; l < k->nlab; l++) {
		double ext = 1;
		for (int i = 0; i < nin && ext == 1; i++)
			for (int c = 0; c < in[i]->nchunk; c++)
				if (k->inlab[i][c] == l)
					ext = (double)in[i]->extent[in[i]->chunkdim[c]];
		n *= ext;
	}
	int per = kexpr_ops(k->expr) + (k->reduces ? 1 : 0);
	return n * (per ? per : 1);
}

void opt_cost(IaPlan *p)
{
	int s = p->nranks, n = p->ops.n;
	double *copies = xcalloc(n + 1, sizeof *copies);
	double *scratch = xcalloc(s + 1, sizeof *scratch);
	int *last = xcalloc(n + 1, sizeof *last);
	double *held = xcalloc(n + 1, sizeof *held);

	p->total_floats_moved = p->total_bytes_sent = p->total_flops = 0;
	p->peak_bytes = p->predicted_seconds = 0;
	for (int i = 0; i < n; i++) {
		int in[2];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			last[in[j]] = i;
		last[i] = last[i] > i ? last[i] : i;
	}

	/* ops inside repeat blocks run count times: their costs add up so */
	double times = 1;
	Vec(double) loops = {0};
	double live = 0;
	for (int i = 0; i < n; i++) {
		IaOp *op = &p->ops.v[i];
		if (op->kind == IA_LOOP) {
			vec_push(&loops, times);
			times *= (double)op->u.loop.count;
		} else if (op->kind == IA_ENDLOOP) {
			times = loops.v[--loops.n];
		}
		int in[2];
		int k = ia_inputs(op, in);
		const IaOp *a = k > 0 ? &p->ops.v[in[0]] : NULL;
		double size = dtype_size(op->type.dtype), seconds = 0;

		op->floats_moved = op->bytes_sent = op->flops = 0;
		switch (op->place.kind) {
		case PL_ALL: copies[i] = s; break;
		case PL_PART: copies[i] = 1; break;
		case PL_PARTIAL: copies[i] = 1; break;
		}
		switch (op->kind) {
		case IA_READ:
		case IA_WRITE:
		case IA_FILTER:
		case IA_INIT:
		case IA_LOAD:
		case IA_STORE:
		case IA_PRINT:
		case IA_LOOP:
		case IA_ENDLOOP:
			break;
		case IA_BCAST: {
			double f = rel_floats(&a->type) * (a->place.kind == PL_PARTIAL ? copies[in[0]] : 1);
			op->floats_moved = f * s;
			op->bytes_sent = a->place.kind == PL_ALL ? 0 : f * size * (s - 1);
			seconds = machine.latency * ceil(log2(s > 1 ? s : 2)) + f * size * (s - 1) / s / machine.bandwidth;
			break;
		}
		case IA_SHUFFLE: {
			double f = rel_floats(&a->type) * (a->place.kind == PL_PARTIAL ? copies[in[0]] : 1);
			op->floats_moved = a->place.kind == PL_ALL ? 0 : f;
			op->bytes_sent = shuffle_bytes(a, copies[in[0]], &op->place, s);
			seconds = machine.latency * (s - 1) + op->bytes_sent / s / machine.bandwidth;
			break;
		}
		case IA_JOIN: {
			const RelType *ts[2] = {&a->type, &p->ops.v[in[1]].type};
			op->flops = kernel_flops(op->u.join.kernel, 2, ts);
			bool gemm = kernel_is_gemm(op->u.join.kernel);
			double per_rank = op->flops / (op->place.kind == PL_ALL ? 1 : s);
			seconds = per_rank / (gemm ? machine.gemm_rate : machine.loop_rate);
			break;
		}
		case IA_AGG:
			op->flops = rel_floats(&a->type) * (a->place.kind == PL_PARTIAL ? copies[in[0]] : 1);
			seconds = op->flops / s / machine.loop_rate;
			break;
		case IA_MAP:
			if (op->u.map.kernel) {
				const RelType *ts[1] = {&a->type};
				op->flops = kernel_flops(op->u.map.kernel, 1, ts);
				seconds = op->flops / (op->place.kind == PL_ALL ? 1 : s) / machine.loop_rate;
			}
			break;
		}
		/* partial aggregates: each key on up to r sites */
		if (op->place.kind == PL_PARTIAL) {
			/* the partitioned input: a key of the output gathers partials
			 * from as many sites as its grouped-away partition dims span */
			double r = 1;
			for (int j = 0; j < k; j++) {
				const IaOp *x = &p->ops.v[in[j]];
				if (x->place.kind == PL_PARTIAL)
					r = copies[in[j]] > r ? copies[in[j]] : r;
				if (x->place.kind != PL_PART)
					continue;
				double span = 1;
				for (int d = 0; d < x->place.ndims; d++)
					span *= (double)rel_frontier(&x->type, x->place.dims[d]);
				r = span > r ? span : r;
			}
			copies[i] = r < s ? r : s;
		}
		op->seconds = seconds;
		p->total_floats_moved += op->floats_moved * times;
		p->total_bytes_sent += op->bytes_sent * times;
		p->total_flops += op->flops * times;
		p->predicted_seconds += seconds * times;

		/* memory: this op's output joins the live set; inputs used for
		 * the last time leave it after the op */
		if (op->kind == IA_INIT)
			last[i] = n;    /* a param's storage lives to the end */
		if (ia_has_result(op->kind) && op->kind != IA_LOAD) {
			held[i] = max_rank_bytes(op, copies[i], s, scratch);
			live += held[i];
		}
		if (live > p->peak_bytes)
			p->peak_bytes = live;
		for (int j = 0; j < k; j++)
			if (last[in[j]] == i) {
				live -= held[in[j]];
				held[in[j]] = 0;
			}
	}
	vec_free(&loops);
	free(copies);
	free(scratch);
	free(last);
	free(held);
}
