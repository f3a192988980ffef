/*
 * ist.c: independent subnet training (Yuan's thesis, chapter 2), the run
 * of an IST loop `repeat b in NB split H1, H2 every J { ... }`.
 *
 * The loop's body is a one-rank program on the subnet (its split sizes H/n,
 * emitted as its own body function); this file runs it on every rank and
 * does everything between the steps:
 *
 *  - Data share: rank s runs iterations b = s, s + n, s + 2n, ... of NB.
 *  - Rounds of J local iterations (the same number of rounds on every rank;
 *    a rank whose share is shorter still takes part in the exchanges).  At a
 *    round's start each split size's neurons are dealt afresh: a permutation
 *    drawn from the seed, the loop, the round and the size's position in
 *    the clause (the same on every rank, no communication); subnet s gets
 *    positions s*H/n .. (s+1)*H/n - 1 of it, sorted ascending.  On one rank
 *    that is the identity, so the loop is ordinary training bit for bit.
 *  - Each rank keeps every param whole (dense, row-major) and a holder per
 *    entry of a split param: every rank at the loop's start (-1), then the
 *    subnet that last trained it.  At a round's start every entry a subnet
 *    needs and its rank does not hold is sent by its holder (one
 *    MPI_Alltoallv, with index lists every rank computes alike from the
 *    splits); params with no split dim are trained whole on every subnet and
 *    averaged over the subnets at each exchange (as local SGD does).
 *  - During the body, rt.comm is MPI_COMM_SELF and rt.nranks 1: the body's
 *    ops never communicate.
 *  - At the end the params go back to the program's layout: each holder's
 *    entries to every rank (one MPI_Allgatherv), then each rank keeps the
 *    chunks its placement gives it.
 *
 * --ist-log=FILE writes, on rank r to FILE.r, one JSON line per split size
 * and round (the subnet of every neuron) and one per round with the bytes
 * this rank sent and received; tests drive a numpy reimplementation with
 * it.  --profile prints the exchange's bytes per round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static const char *ist_log;     /* --ist-log FILE */
static int log_opened;          /* FILE.r was started by this run */

/* Rounds run so far by each IST loop, over all its runs (an IST loop in an
 * epoch loop runs once per epoch): round numbers, and so splits, never
 * repeat. */
static int64_t *rounds_before;
static int nrounds_before;

int rt_ist_arg(int argc, char **argv, int *a, char *msg, size_t len)
{
	const char *arg = argv[*a];
	if (strcmp(arg, "--ist-log") && strncmp(arg, "--ist-log=", 10))
		return 0;
	const char *v = arg[9] == '=' ? arg + 10 : (*a + 1 < argc ? argv[++*a] : "");
	msg[0] = 0;
	if (!*v)
		snprintf(msg, len, "%s: --ist-log needs a file name", rt_progname());
	ist_log = v;
	return 1;
}

void rt_ist_help(void)
{
	printf("  --ist-log FILE  IST loops: each round's split of every split size, and the bytes\n"
	       "               each exchange sent, as JSON lines in FILE.RANK\n");
}

struct TrtIstRun {
	const TrtIst *d;
	int nsub;               /* subnets */
	int me;                 /* this rank's subnet, -1 on a rank past them */
	int nranks, rank;       /* the whole run's */
	int64_t mine;           /* iterations of this rank's share */
	int64_t rounds, round, k;       /* rounds of this run; the current one (-1 before) */
	int64_t first;          /* the loop's rounds in its earlier runs: round numbers go on */
	size_t *es;             /* per param: element bytes */
	int64_t *size;          /* per param: elements */
	char **whole;           /* per param: its values, whole */
	int **holder;           /* per split param: per entry, the rank holding it, -1 every rank */
	int **own;              /* per split param: per entry, its subnet this round, -1 none */
	int *owner[TRT_MAXSPLIT];       /* per split size: each neuron's subnet this round */
	int64_t *nbr[TRT_MAXSPLIT];     /* per split size: this subnet's neurons, ascending */
	double sent, recvd;     /* bytes of this rank's exchanges */
	double avg_sent;        /* of that, the unsplit params' averaging */
	FILE *log;
	const int64_t *outer;   /* the iterations of the blocks around the loop */
};

/* ---- whole tensors and relations ---- */

/* The elements of key's chunk between a chunk (chunk order) and the whole
 * tensor (row-major): into the chunk when to_chunk, else out of it.  A
 * chunk in key order is its block's runs one after another (rt_block_run),
 * each a memcpy; any other order element by element. */
static void block_copy(const TrtType *t, const int64_t *key, char *chunk, char *tensor, int to_chunk)
{
	RtBlock b;
	rt_block_of(t, key, &b);
	size_t es = rt_dtype_size(t->dtype);
	if (b.identity) {
		size_t len = (size_t)b.run * es;
		for (int64_t i = 0; i < b.nrun; i++) {
			char *w = tensor + (size_t)rt_block_run(t, &b, i) * es, *c = chunk + (size_t)i * len;
			memcpy(to_chunk ? c : w, to_chunk ? w : c, len);
		}
		return;
	}
	int64_t cs[TRT_MAXDIM] = {0}, idx[TRT_MAXDIM] = {0}, s = 1, total = 1;
	for (int c = t->nchunk - 1; c >= 0; c--) {
		cs[t->chunkdim[c]] = s;
		s *= b.cnt[t->chunkdim[c]];
	}
	for (int d = 0; d < t->nkey; d++)
		total *= b.cnt[d];
	for (int64_t e = 0; e < total; e++) {
		int64_t co = 0, to = 0;
		for (int d = 0; d < t->nkey; d++) {
			co += idx[d] * cs[d];
			to += (b.start[d] + idx[d]) * b.tstride[d];
		}
		if (to_chunk)
			memcpy(chunk + (size_t)co * es, tensor + (size_t)to * es, es);
		else
			memcpy(tensor + (size_t)to * es, chunk + (size_t)co * es, es);
		for (int d = t->nkey - 1; d >= 0; d--) {
			if (++idx[d] < b.cnt[d])
				break;
			idx[d] = 0;
		}
	}
}

/* The tuples of r on this rank, into the whole tensor `out`. */
static void rel_to_whole(const TrtRel *r, char *out)
{
	for (int64_t i = 0; i < r->n; i++) {
		size_t mark = rt_pin_mark();
		block_copy(&r->type, r->keys + i * r->type.nkey, (char *)rt_chunk_data(r->chunks[i]), out, 0);
		rt_pin_release(mark);
	}
}

/* The chunks of type t placed by p that this rank holds, from the whole tensor. */
static TrtRel *whole_to_rel(const TrtType *t, TrtPlace p, char *in)
{
	TrtRel *r = trt_rel_new(t, p);
	int64_t key[TRT_MAXDIM];
	for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) {
		size_t mark = rt_pin_mark();
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
		block_copy(t, key, rt_chunk_mut(c), in, 1);
		rt_rel_push(r, key, c);
		rt_pin_release(mark);
	}
	return r;
}

static const TrtTensor *tensor_of(const TrtIstRun *x, int p)
{
	return &rt.prog->tensors[x->d->params[p].tensor];
}

static int is_split(const TrtIstParam *q, int rank)
{
	for (int d = 0; d < rank; d++)
		if (q->split[d] >= 0)
			return 1;
	return 0;
}

/* ---- the split ---- */

static uint64_t mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15u;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* Round r's split of every split size: a permutation by Fisher-Yates from
 * (seed, loop, round, position), positions s*m .. (s+1)*m - 1 to subnet s. */
static void draw_split(TrtIstRun *x)
{
	const TrtIst *d = x->d;
	for (int z = 0; z < d->nsplit; z++) {
		int64_t h = d->extent[z], m = h / x->nsub;
		int64_t *perm = rt_alloc(sizeof *perm * (size_t)(h + 1));
		for (int64_t i = 0; i < h; i++)
			perm[i] = i;
		uint64_t st = mix(mix(mix(trt_seed() ^ 0x15700000u) + (uint64_t)d->loop) +
		                  (uint64_t)(x->first + x->round)) + (uint64_t)z;
		for (int64_t i = h - 1; i > 0; i--) {
			st = mix(st);
			int64_t j = (int64_t)((unsigned __int128)st * (uint64_t)(i + 1) >> 64);
			int64_t t = perm[i];
			perm[i] = perm[j];
			perm[j] = t;
		}
		for (int64_t i = 0; i < h; i++)
			x->owner[z][perm[i]] = (int)(i / m);
		int64_t n = 0;
		for (int64_t i = 0; i < h && x->me >= 0; i++)
			if (x->owner[z][i] == x->me)
				x->nbr[z][n++] = i;
		free(perm);
		if (x->log) {
			fprintf(x->log, "{\"loop\": %d, \"round\": %lld, \"nsub\": %d, \"size\": \"%s\", \"owner\": [",
			        d->loop, (long long)(x->first + x->round), x->nsub, d->split[z]);
			for (int64_t i = 0; i < h; i++)
				fprintf(x->log, "%s%d", i ? ", " : "", x->owner[z][i]);
			fprintf(x->log, "]}\n");
		}
	}
}

/* The subnet holding each entry of split param p this round, into own
 * (row-major), or -1 where its split dims' neurons are on different
 * subnets. */
static void entry_owners(const TrtIstRun *x, int p, int *own)
{
	const TrtTensor *t = tensor_of(x, p);
	const TrtIstParam *q = &x->d->params[p];
	int64_t idx[TRT_MAXDIM] = {0};
	for (int64_t e = 0; e < x->size[p]; e++) {
		int o = -1;
		for (int d = 0; d < t->rank; d++) {
			if (q->split[d] < 0)
				continue;
			int s = x->owner[q->split[d]][idx[d]];
			if (o != -1 && s != o) {
				o = -2;
				break;
			}
			o = s;
		}
		own[e] = o < 0 ? -1 : o;
		for (int d = t->rank - 1; d >= 0; d--) {
			if (++idx[d] < t->shape[d])
				break;
			idx[d] = 0;
		}
	}
}

/* ---- the exchange ---- */

/* Bytes of one collective begun at t0: counted, and with --trace a send
 * span over the call and a receive span after it. */
static void counted(int64_t t0, double sent, double recvd, const char *what)
{
	if (t0) {
		rt_trace_span(RT_SPAN_SEND, t0, -1, sent, 0, what);
		rt_trace_span(RT_SPAN_RECV, rt_span_begin(), -1, recvd, 0, what);
	}
	rt_count_sent(sent);
	rt_count_recv(recvd);
}

/* The unsplit params: the mean over the subnets (ranks past them add
 * zero), by one allreduce each; returns the bytes each rank sent (a ring
 * allreduce sends 2 (n-1)/n of the tensor). */
static double average_unsplit(TrtIstRun *x)
{
	const TrtIst *d = x->d;
	int nr = rt.nranks;
	double avg = 0;
	for (int p = 0; p < d->nparams && x->nsub > 1; p++) {
		if (x->holder[p])
			continue;
		TrtDtype dt = tensor_of(x, p)->dtype;
		if (x->me < 0)
			memset(x->whole[p], 0, (size_t)x->size[p] * x->es[p]);
		int64_t ta = rt_span_begin();
		MPI_Allreduce(MPI_IN_PLACE, x->whole[p], (int)x->size[p], dt == TRT_F64 ? MPI_DOUBLE : MPI_FLOAT,
		              MPI_SUM, MPI_COMM_WORLD);
		double b = 2.0 * (nr - 1) / nr * (double)x->size[p] * (double)x->es[p];
		counted(ta, b, b, "IST average");
		avg += b;
		for (int64_t e = 0; e < x->size[p]; e++)
			if (dt == TRT_F64)
				((double *)x->whole[p])[e] /= x->nsub;
			else
				((float *)x->whole[p])[e] /= (float)x->nsub;
	}
	return avg;
}

/* What a walk over the entries that move this round does. */
typedef enum { MOVES_COUNT, MOVES_PACK, MOVES_PLACE } Moves;

/* The IST exchange's walk over the entries of the split params whose owner
 * this round (o) is not their holder (h), in the order every rank knows
 * (param, then entry): MOVES_COUNT adds each entry's bytes to sc[o] when I
 * send it, to rc[h] when I receive it; MOVES_PACK copies those I send to
 * buf (rank o's part at disp[o]); MOVES_PLACE copies those I receive from
 * buf (rank h's part at disp[h]), and makes every owned entry's owner its
 * holder. */
static void walk_moves(TrtIstRun *x, Moves mode, int *sc, int *rc, char *buf, const int *disp)
{
	int nr = x->nranks, me = x->rank;
	int *fill = calloc((size_t)nr, sizeof *fill);
	for (int p = 0; p < x->d->nparams; p++) {
		if (!x->holder[p])
			continue;
		size_t es = x->es[p];
		for (int64_t e = 0; e < x->size[p]; e++) {
			int o = x->own[p][e], h = x->holder[p][e];
			if (o < 0)
				continue;
			char *v = x->whole[p] + (size_t)e * es;
			if (h >= 0 && h != o)
				switch (mode) {
				case MOVES_COUNT:
					if (h == me)
						sc[o] += (int)es;
					else if (o == me)
						rc[h] += (int)es;
					break;
				case MOVES_PACK:
					if (h == me) {
						memcpy(buf + (size_t)disp[o] + (size_t)fill[o], v, es);
						fill[o] += (int)es;
					}
					break;
				case MOVES_PLACE:
					if (o == me) {
						memcpy(v, buf + (size_t)disp[h] + (size_t)fill[h], es);
						fill[h] += (int)es;
					}
					break;
				}
			if (mode == MOVES_PLACE)
				x->holder[p][e] = o;
		}
	}
	free(fill);
}

/* Every entry a subnet needs this round and its rank does not hold, from
 * its holder; then the unsplit params averaged.  Collective. */
static void exchange(TrtIstRun *x)
{
	const TrtIst *d = x->d;
	int nr = x->nranks;
	int *sc = calloc((size_t)nr, sizeof *sc), *rc = calloc((size_t)nr, sizeof *rc);
	int *sd = calloc((size_t)nr + 1, sizeof *sd), *rd = calloc((size_t)nr + 1, sizeof *rd);
	for (int p = 0; p < d->nparams; p++)
		if (x->holder[p])
			entry_owners(x, p, x->own[p]);
	walk_moves(x, MOVES_COUNT, sc, rc, NULL, NULL);
	for (int r = 0; r < nr; r++) {
		sd[r + 1] = sd[r] + sc[r];
		rd[r + 1] = rd[r] + rc[r];
	}
	char *sbuf = rt_alloc((size_t)sd[nr] + 1), *rbuf = rt_alloc((size_t)rd[nr] + 1);
	walk_moves(x, MOVES_PACK, NULL, NULL, sbuf, sd);
	int64_t t0 = rt_span_begin();
	MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, MPI_COMM_WORLD);
	double sent = (double)sd[nr], recvd = (double)rd[nr];
	counted(t0, sent, recvd, "IST exchange");
	/* the received entries, in the senders' order; then the new holders */
	walk_moves(x, MOVES_PLACE, NULL, NULL, rbuf, rd);
	free(sbuf);
	free(rbuf);
	free(sc);
	free(rc);
	free(sd);
	free(rd);

	double avg = x->round > 0 ? average_unsplit(x) : 0;
	x->sent += sent + avg;
	x->recvd += recvd + avg;
	x->avg_sent += avg;
	if (x->log)
		fprintf(x->log, "{\"loop\": %d, \"round\": %lld, \"sent\": %.0f, \"received\": %.0f, \"averaged\": %.0f}\n",
		        d->loop, (long long)(x->first + x->round), sent, recvd, avg);
}

/* ---- the subnet's params ---- */

/* Row elements w[map[i]] into buf[i] (in), or back: memcpy of a constant
 * size for the sizes params have, so each is a load and a store, not a
 * call. */
#define GATHER_ROW(ES)                                                          \
	for (int64_t i = 0; i < n; i++)                                         \
		if (in)                                                         \
			memcpy(buf + i * (ES), w + map[i] * (ES), (ES));        \
		else                                                            \
			memcpy(w + map[i] * (ES), buf + i * (ES), (ES))
static void gather_row(char *buf, char *w, const int64_t *map, int64_t n, size_t es, int in)
{
	if (es == 4)
		GATHER_ROW(4);
	else if (es == 8)
		GATHER_ROW(8);
	else
		GATHER_ROW((int64_t)es);
}
#undef GATHER_ROW

/*
 * The subnet's slice of param p, between the whole param and buf (the
 * slice dense, row-major): into buf when in, else out of it.  Local index
 * i of a split dim d is whole index nbr[split][i], of any other i itself;
 * a row along the last dim is one memcpy when that dim is not split, else
 * its elements one by one; the rows' offsets are kept as the walk goes, not
 * divided out of each element's index (per element that was a third of an
 * IST step's time on mnist_ist).
 */
static void subnet_slice(const TrtIstRun *x, int p, char *buf, int in)
{
	const TrtTensor *t = tensor_of(x, p);
	const TrtIstParam *q = &x->d->params[p];
	size_t es = x->es[p];
	char *whole = x->whole[p];
	if (t->rank == 0) {
		memcpy(in ? buf : whole, in ? whole : buf, es);
		return;
	}
	int last = t->rank - 1;
	int64_t stride[TRT_MAXDIM], idx[TRT_MAXDIM] = {0}, s = 1, rows = 1;
	const int64_t *map[TRT_MAXDIM];
	for (int d = last; d >= 0; d--) {
		stride[d] = s;
		s *= t->shape[d];
		map[d] = q->split[d] >= 0 ? x->nbr[q->split[d]] : NULL;
		if (d < last)
			rows *= q->local->extent[d];
	}
	int64_t n = q->local->extent[last];
	for (int64_t r = 0; r < rows; r++, buf += (size_t)n * es) {
		int64_t base = 0;
		for (int d = 0; d < last; d++)
			base += (map[d] ? map[d][idx[d]] : idx[d]) * stride[d];
		char *w = whole + (size_t)base * es;
		if (!map[last])
			memcpy(in ? buf : w, in ? w : buf, (size_t)n * es);
		else
			gather_row(buf, w, map[last], n, es, in);
		for (int d = last - 1; d >= 0; d--) {
			if (++idx[d] < q->local->extent[d])
				break;
			idx[d] = 0;
		}
	}
}

static int64_t local_size(const TrtIstParam *q)
{
	int64_t n = 1;
	for (int d = 0; d < q->local->nkey; d++)
		n *= q->local->extent[d];
	return n;
}

/* The body's params: the subnet's slices of the whole ones, or back. */
static void subnet_copy(TrtIstRun *x, const TrtParams *local, int in)
{
	for (int p = 0; p < x->d->nparams; p++) {
		const TrtIstParam *q = &x->d->params[p];
		int v = 0;
		while (v < local->n && local->tensors[v] != q->tensor)
			v++;
		if (v == local->n)
			rt_bug("IST param %s is not the body's", tensor_of(x, p)->name);
		TrtRel **var = local->vars[v];
		size_t es = x->es[p];
		int64_t n = local_size(q);
		char *buf = rt_alloc((size_t)n * es + 1);
		if (in) {
			subnet_slice(x, p, buf, 1);
			trt_free(*var);
			*var = whole_to_rel(q->local, q->place, buf);
		} else if (*var) {
			rel_to_whole(*var, buf);
			subnet_slice(x, p, buf, 0);
		}
		free(buf);
	}
}

static void comm_self(void)
{
	rt.comm = MPI_COMM_SELF;
	rt.rank = 0;
	rt.nranks = 1;
}

static void comm_world(const TrtIstRun *x)
{
	rt.comm = MPI_COMM_WORLD;
	rt.rank = x->rank;
	rt.nranks = x->nranks;
}

int trt_ist_next(TrtIstRun *x, const TrtParams *local, int64_t *it)
{
	const TrtIst *d = x->d;
	for (;;) {
		int64_t end = (x->round + 1) * d->every;
		if (x->round >= 0 && x->k < end && x->k < x->mine) {
			*it = x->me + (int64_t)x->nsub * x->k++;
			return 1;
		}
		if (x->round >= 0 && x->me >= 0)
			subnet_copy(x, local, 0);
		if (x->round + 1 >= x->rounds)
			return 0;
		x->round++;
		x->k = x->round * d->every;
		comm_world(x);
		draw_split(x);
		exchange(x);
		comm_self();
		if (x->me >= 0)
			subnet_copy(x, local, 1);
	}
}

void trt_ist_end(TrtIstRun *x, const TrtParams *local)
{
	for (int v = 0; v < local->n; v++) {
		trt_free(*local->vars[v]);
		*local->vars[v] = NULL;
	}
}

/* The whole params on every rank: each holder's entries to every rank, the
 * unsplit params averaged once more.  Collective. */
static void gather_whole(TrtIstRun *x)
{
	const TrtIst *d = x->d;
	int nr = x->nranks, me = x->rank;
	int *cnt = calloc((size_t)nr, sizeof *cnt), *disp = calloc((size_t)nr + 1, sizeof *disp);
	for (int p = 0; p < d->nparams; p++)
		for (int64_t e = 0; x->holder[p] && e < x->size[p]; e++)
			if (x->holder[p][e] >= 0)
				cnt[x->holder[p][e]] += (int)x->es[p];
	for (int r = 0; r < nr; r++)
		disp[r + 1] = disp[r] + cnt[r];
	char *all = rt_alloc((size_t)disp[nr] + 1), *at = all + disp[me];
	for (int p = 0; p < d->nparams; p++)
		for (int64_t e = 0; x->holder[p] && e < x->size[p]; e++)
			if (x->holder[p][e] == me) {
				memcpy(at, x->whole[p] + (size_t)e * x->es[p], x->es[p]);
				at += x->es[p];
			}
	int64_t t0 = rt_span_begin();
	MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_BYTE, all, cnt, disp, MPI_BYTE, MPI_COMM_WORLD);
	double sent = (double)cnt[me] * (nr - 1);
	counted(t0, sent, (double)(disp[nr] - cnt[me]), "IST gather");
	int *off = calloc((size_t)nr, sizeof *off);
	for (int p = 0; p < d->nparams; p++)
		for (int64_t e = 0; x->holder[p] && e < x->size[p]; e++) {
			int h = x->holder[p][e];
			if (h >= 0 && h != me) {
				memcpy(x->whole[p] + (size_t)e * x->es[p], all + disp[h] + off[h], x->es[p]);
				off[h] += (int)x->es[p];
			}
		}
	free(off);
	free(all);
	free(cnt);
	free(disp);
	double avg = average_unsplit(x);
	x->sent += avg;
	if (x->log)
		fprintf(x->log, "{\"loop\": %d, \"gather\": %.0f, \"averaged\": %.0f}\n", d->loop, sent, avg);
	x->sent += sent;
}

int64_t trt_ist_counter(const TrtIstRun *x, int depth)
{
	if (!x->outer || depth < 0)
		rt_bug("IST loop %d has no repeat block around it at depth %d", x->d->loop, depth);
	return x->outer[depth];
}

void trt_ist(const TrtIst *d, const TrtParams *params, int (*body)(TrtIstRun *), const int64_t *outer)
{
	TrtIstRun x = {.d = d, .nsub = d->nsub, .nranks = rt.nranks, .rank = rt.rank, .outer = outer};
	if (rt.nranks < d->nsub)
		trt_fatal("IST loop %d splits its network among %d subnets, planned for %d ranks; run it on %d "
		          "ranks or more", d->loop, d->nsub, d->nsub, d->nsub);
	x.me = rt.rank < d->nsub ? rt.rank : -1;
	x.mine = x.me >= 0 && x.me < d->count ? (d->count - x.me + d->nsub - 1) / d->nsub : 0;
	int64_t most = (d->count + d->nsub - 1) / d->nsub;
	x.rounds = (most + d->every - 1) / d->every;
	if (d->loop >= nrounds_before) {
		rounds_before = rt_realloc(rounds_before, sizeof *rounds_before * (size_t)(d->loop + 1));
		memset(rounds_before + nrounds_before, 0, sizeof *rounds_before * (size_t)(d->loop + 1 - nrounds_before));
		nrounds_before = d->loop + 1;
	}
	x.first = rounds_before[d->loop];
	rounds_before[d->loop] += x.rounds;
	x.round = -1;
	int np = d->nparams;
	x.es = calloc((size_t)np + 1, sizeof *x.es);
	x.size = calloc((size_t)np + 1, sizeof *x.size);
	x.whole = calloc((size_t)np + 1, sizeof *x.whole);
	x.holder = calloc((size_t)np + 1, sizeof *x.holder);
	x.own = calloc((size_t)np + 1, sizeof *x.own);
	for (int z = 0; z < d->nsplit; z++) {
		x.owner[z] = rt_alloc(sizeof(int) * (size_t)(d->extent[z] + 1));
		x.nbr[z] = rt_alloc(sizeof(int64_t) * (size_t)(d->extent[z] + 1));
	}
	if (ist_log) {
		char path[4096];
		snprintf(path, sizeof path, "%s.%d", ist_log, rt.rank);
		x.log = fopen(path, log_opened ? "a" : "w");
		log_opened = 1;
		if (!x.log)
			trt_fatal("--ist-log: cannot write %s", path);
	}
	/* the params whole on every rank: the loop starts with every rank
	 * holding every entry */
	for (int p = 0; p < np; p++) {
		const TrtTensor *t = tensor_of(&x, p);
		x.es[p] = rt_dtype_size(t->dtype);
		x.size[p] = 1;
		for (int k = 0; k < t->rank; k++)
			x.size[p] *= t->shape[k];
		x.whole[p] = rt_alloc((size_t)x.size[p] * x.es[p] + 1);
		int v = 0;
		while (v < params->n && params->tensors[v] != d->params[p].tensor)
			v++;
		if (v == params->n || !*params->vars[v])
			rt_bug("IST param %s has no value", t->name);
		const TrtRel *r = *params->vars[v];
		if (r->place.kind == TRT_ALL) {
			rel_to_whole(r, x.whole[p]);
		} else {
			TrtRel *all = trt_bcast(r);
			rel_to_whole(all, x.whole[p]);
			trt_free(all);
		}
		if (is_split(&d->params[p], t->rank)) {
			x.holder[p] = rt_alloc(sizeof(int) * (size_t)(x.size[p] + 1));
			x.own[p] = rt_alloc(sizeof(int) * (size_t)(x.size[p] + 1));
			for (int64_t e = 0; e < x.size[p]; e++)
				x.holder[p][e] = -1;
		}
	}

	comm_self();
	body(&x);
	comm_world(&x);
	int64_t rounds = x.rounds;
	double sent_rounds = x.sent;
	gather_whole(&x);

	/* back into the program's layout */
	for (int p = 0; p < np; p++) {
		int v = 0;
		while (params->tensors[v] != d->params[p].tensor)
			v++;
		TrtRel *old = *params->vars[v];
		*params->vars[v] = whole_to_rel(&old->type, old->place, x.whole[p]);
		trt_free(old);
	}
	if (rt.profile) {
		double mine[3] = {sent_rounds, x.sent - sent_rounds, x.avg_sent}, all[3];
		MPI_Reduce(mine, all, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rt.rank == 0)
			printf("ist: loop %d, %d subnets, %lld rounds of %lld steps: exchanges sent %.0f bytes, %.0f per "
			       "round (%.0f of them averaging unsplit params); the final gather %.0f\n", d->loop, d->nsub,
			       (long long)rounds, (long long)d->every, all[0], rounds ? all[0] / (double)rounds : 0.0,
			       all[2], all[1]);
	}
	if (x.log)
		fclose(x.log);
	for (int p = 0; p < np; p++) {
		free(x.whole[p]);
		free(x.holder[p]);
		free(x.own[p]);
	}
	for (int z = 0; z < d->nsplit; z++) {
		free(x.owner[z]);
		free(x.nbr[z]);
	}
	free(x.es);
	free(x.size);
	free(x.whole);
	free(x.holder);
	free(x.own);
}
