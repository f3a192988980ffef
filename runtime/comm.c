/*
 * comm.c: the two communication ops, trt_bcast and trt_shuffle, and the
 * point-to-point helpers trt_write uses.
 *
 * Zero copy.  A chunk goes from the sender's chunk straight into the
 * receiver's new chunk: there is no packing buffer on either side, so Open
 * MPI's shared-memory transport copies each byte once (CMA) and no memory is
 * touched that the result does not keep.  Fresh memory is dear (the kernel
 * zeroes every page on first touch, at about the speed of a memcpy), so a
 * packing buffer and its unpacking cost three times what the data's own
 * copy does.  An exchange has three steps:
 *
 *   1. tuple counts: one MPI_Alltoall (shuffle) or MPI_Allgather (bcast) of
 *      an int64 per rank;
 *   2. keys: one message per peer, nkey int64s per tuple, and at once,
 *      without waiting, the chunks;
 *   3. each receiver, once a peer's keys are in, knows each incoming chunk's
 *      size, allocates it and posts its receive; both sides cut the same
 *      messages from the same sequence of chunk sizes (plan_messages).
 * So an exchange costs the counts' collective and one round trip.
 *
 * Message shapes.  A chunk of SMALL bytes or more travels alone, as one
 * contiguous message (what CMA copies in one go).  A run of smaller chunks
 * travels together as one message described by an hindexed datatype over
 * their addresses, so a relation of many tiny chunks is not many tiny
 * messages.  No message is longer than rt_msg_limit bytes (MPI counts are
 * ints): a bigger chunk goes in several pieces.  Messages between two ranks
 * in one round share a tag, and MPI delivers them in the order posted.
 *
 * Broadcast is direct: every rank sends its tuples to every other rank at
 * once (nonblocking), which for the few ranks of one node moves the same
 * bytes as MPI_Allgatherv's ring with no staging buffer.
 *
 * Bytes counted for --profile are each tuple's key and chunk, per receiver:
 * the measure the cost model predicts (chunk bytes) plus 8 bytes per key dim.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int64_t rt_msg_limit = INT_MAX;

#define SMALL ((size_t)64 << 10)        /* chunks below this travel in groups */
#define GROUP ((size_t)1 << 20)         /* the most bytes in one group message */

enum { TAG_KEYS = 7101, TAG_CHUNKS = 7102 };

/* ---- the exchange engine ---- */

typedef struct Piece {
	char *p;
	size_t n;
} Piece;

/* What one rank sends to, or receives from, one peer: memory pieces in
 * stream order. */
typedef struct Side {
	Piece *v;
	int64_t n, cap;
} Side;

static void side_add(Side *s, void *p, size_t n)
{
	if (n == 0)
		return;                 /* both ends skip empty chunks alike */
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = rt_realloc(s->v, sizeof *s->v * (size_t)s->cap);
	}
	s->v[s->n].p = p;
	s->v[s->n].n = n;
	s->n++;
}

static Side *sides_new(int nr)
{
	Side *s = rt_alloc(sizeof *s * (size_t)nr);
	memset(s, 0, sizeof *s * (size_t)nr);
	return s;
}

static void sides_free(Side *s, int nr)
{
	for (int i = 0; i < nr; i++)
		free(s[i].v);
	free(s);
}

typedef struct Reqs {
	MPI_Request *v;
	int n, cap;
} Reqs;

static MPI_Request *req_slot(Reqs *r)
{
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->v = rt_realloc(r->v, sizeof *r->v * (size_t)r->cap);
	}
	return &r->v[r->n++];
}

/* Posts one message over pieces v[0..n) (the first starting `off` bytes in,
 * `len` bytes in all when n == 1). */
static void post(Reqs *rq, int send, int peer, int tag, const Piece *v, int n, size_t off,
                 size_t len)
{
	MPI_Request *req = req_slot(rq);

	if (n == 1) {
		if (send)
			MPI_Isend(v[0].p + off, (int)len, MPI_BYTE, peer, tag, rt.comm, req);
		else
			MPI_Irecv(v[0].p + off, (int)len, MPI_BYTE, peer, tag, rt.comm, req);
		return;
	}
	int *lens = rt_alloc(sizeof *lens * (size_t)n);
	MPI_Aint *addr = rt_alloc(sizeof *addr * (size_t)n);
	for (int i = 0; i < n; i++) {
		lens[i] = (int)v[i].n;
		MPI_Get_address(v[i].p, &addr[i]);
	}
	MPI_Datatype t;
	MPI_Type_create_hindexed(n, lens, addr, MPI_BYTE, &t);
	MPI_Type_commit(&t);
	if (send)
		MPI_Isend(MPI_BOTTOM, 1, t, peer, tag, rt.comm, req);
	else
		MPI_Irecv(MPI_BOTTOM, 1, t, peer, tag, rt.comm, req);
	MPI_Type_free(&t);      /* freed when the message completes */
	free(lens);
	free(addr);
}

/* Cuts one side into messages, the same cuts at both ends (they see the same
 * sequence of piece sizes), and posts them. */
static void plan_messages(Reqs *rq, int send, int peer, int tag, const Side *s)
{
	size_t limit = (size_t)rt_msg_limit, group = GROUP < limit ? GROUP : limit;
	int64_t first = 0;              /* the pending group: pieces [first, i) */
	size_t gbytes = 0;

	for (int64_t i = 0; i <= s->n; i++) {
		int big = i < s->n && (s->v[i].n >= SMALL || s->v[i].n > group);
		int full = i < s->n && !big && gbytes + s->v[i].n > group;
		if (i == s->n || big || full) {
			/* flush the group, in hindexed messages of at most INT_MAX pieces */
			while (first < i) {
				int64_t cnt = i - first < INT_MAX ? i - first : INT_MAX;
				post(rq, send, peer, tag, s->v + first, (int)cnt, 0, s->v[first].n);
				first += cnt;
			}
			gbytes = 0;
		}
		if (i == s->n)
			break;
		if (big) {
			for (size_t off = 0; off < s->v[i].n; off += limit) {
				size_t len = s->v[i].n - off < limit ? s->v[i].n - off : limit;
				post(rq, send, peer, tag, s->v + i, 1, off, len);
			}
			first = i + 1;
		} else {
			gbytes += s->v[i].n;
		}
	}
}

/* --trace: the span of posting one side's messages, with its bytes. */
static void trace_side(int64_t t0, int send, int peer, int tag, const Side *s)
{
	double bytes = 0;

	for (int64_t i = 0; i < s->n; i++)
		bytes += (double)s->v[i].n;
	if (s->n)
		rt_trace_span(send ? RT_SPAN_SEND : RT_SPAN_RECV, t0, peer, bytes, 0,
		              tag == TAG_KEYS ? "keys" : "chunks");
}

/* Posts the sends (or receives) of sides[d] for every peer d; the own
 * rank's side is empty. */
static void post_all(Reqs *rq, int send, const Side *sides, int tag)
{
	for (int d = 0; d < rt.nranks; d++) {
		int64_t t0 = rt_span_begin();
		plan_messages(rq, send, d, tag, &sides[d]);
		if (t0)
			trace_side(t0, send, d, tag, &sides[d]);
	}
}

static void wait_all(Reqs *rq, const char *what)
{
	int64_t t0 = rt_span_begin();
	MPI_Waitall(rq->n, rq->v, MPI_STATUSES_IGNORE);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, what);
	free(rq->v);
	memset(rq, 0, sizeof *rq);
}

/* One exchange, steps 2 and 3: per peer, the keys and the chunks this rank
 * sends and receives.  The caller fills ks, kr and cs, exchange_keys posts
 * them and returns with the keys in; the caller then adds the chunks those
 * keys announce to cr, and exchange_end receives them and waits for all. */
typedef struct Exchange {
	Side *ks, *kr;                  /* keys sent, received */
	Side *cs, *cr;                  /* chunks sent, received */
	Reqs rest;                      /* every message but the key receives */
	int nr;
} Exchange;

static Exchange exchange_new(int nr)
{
	Exchange x = {0};
	x.ks = sides_new(nr);
	x.kr = sides_new(nr);
	x.cs = sides_new(nr);
	x.cr = sides_new(nr);
	x.nr = nr;
	return x;
}

/* Our chunks leave with the keys, without waiting for a round trip. */
static void exchange_keys(Exchange *x)
{
	Reqs keys_in = {0};
	post_all(&keys_in, 0, x->kr, TAG_KEYS);
	post_all(&x->rest, 1, x->ks, TAG_KEYS);
	post_all(&x->rest, 1, x->cs, TAG_CHUNKS);
	wait_all(&keys_in, "keys");
}

static void exchange_end(Exchange *x)
{
	post_all(&x->rest, 0, x->cr, TAG_CHUNKS);
	wait_all(&x->rest, "chunks");
	sides_free(x->ks, x->nr);
	sides_free(x->kr, x->nr);
	sides_free(x->cs, x->nr);
	sides_free(x->cr, x->nr);
}

/* ---- point to point, for trt_write ---- */

/* Point to point, in pieces that fit an int count; the receiver posts the
 * same pieces, and MPI keeps messages of one tag and peer in order. */
void rt_send_bytes(const void *buf, size_t n, int dest, int tag)
{
	const char *p = buf;
	int64_t t0 = rt_span_begin();

	rt_count_sent((double)n);
	do {
		size_t piece = n < (size_t)rt_msg_limit ? n : (size_t)rt_msg_limit;
		MPI_Send(p, (int)piece, MPI_BYTE, dest, tag, rt.comm);
		p += piece;
		n -= piece;
	} while (n);
	if (t0)
		rt_trace_span(RT_SPAN_SEND, t0, dest, (double)(p - (const char *)buf), 0, NULL);
}

void rt_recv_bytes(void *buf, size_t n, int src, int tag)
{
	char *p = buf;
	int64_t t0 = rt_span_begin();

	rt_count_recv((double)n);
	do {
		size_t piece = n < (size_t)rt_msg_limit ? n : (size_t)rt_msg_limit;
		MPI_Recv(p, (int)piece, MPI_BYTE, src, tag, rt.comm, MPI_STATUS_IGNORE);
		p += piece;
		n -= piece;
	} while (n);
	if (t0)
		rt_trace_span(RT_SPAN_RECV, t0, src, (double)(p - (char *)buf), 0, NULL);
}

/* ---- the ops ---- */

/*
 * A tuple travels as a key record, then its chunk.  A dense chunk's size
 * follows from its key; a sparse one's does not, so its record carries it:
 * the key's nkey int64s, then (sparse only) the chunk's bytes.
 */
static int record_len(const TrtType *t)
{
	return t->nkey + (t->sparse ? 1 : 0);
}

static size_t chunk_bytes(const TrtType *t, const int64_t *rec, const Chunk *c)
{
	if (!t->sparse)
		return rt_chunk_bytes(t, rec);
	return c ? c->nbytes : (size_t)rec[t->nkey];
}

/* The records of r's tuples idx[0..n) (all of them when idx is NULL). */
static void pack_records(const TrtRel *r, const int64_t *idx, int64_t n, int64_t *out)
{
	int nk = r->type.nkey, w = record_len(&r->type);
	for (int64_t i = 0; i < n; i++) {
		int64_t t = idx ? idx[i] : i;
		memcpy(out + i * w, r->keys + t * nk, sizeof(int64_t) * (size_t)nk);
		if (r->type.sparse)
			out[i * w + nk] = (int64_t)r->chunks[t]->nbytes;
	}
}

static double tuple_bytes(const TrtType *t, const int64_t *key, const Chunk *c)
{
	return (double)(sizeof(int64_t) * (size_t)record_len(t) + chunk_bytes(t, key, c));
}

/* A new relation holding the same tuples as r, sharing its chunks. */
static TrtRel *share(const TrtRel *r, TrtPlace p)
{
	TrtRel *out = trt_rel_new(&r->type, p);

	for (int64_t i = 0; i < r->n; i++)
		rt_rel_push(out, r->keys + i * r->type.nkey, rt_chunk_ref(r->chunks[i]));
	return out;
}

/* Appends to out ntup tuples with the given keys and new (unfilled) chunks,
 * and adds their chunks to the receiving side. */
static void receive_into(TrtRel *out, const int64_t *recs, int64_t ntup, Side *side)
{
	const TrtType *t = &out->type;

	for (int64_t i = 0; i < ntup; i++) {
		const int64_t *key = recs + i * record_len(t);
		rt_check_key(t, key);
		size_t cb = chunk_bytes(t, key, NULL);
		Chunk *c = rt_chunk_new(cb);
		side_add(side, rt_chunk_data(c), cb);
		rt_count_recv(tuple_bytes(t, key, NULL));
		rt_rel_push(out, key, c);
	}
}

/* Every rank ends with every tuple of r.  From TRT_ANY, a key held by several
 * ranks arrives once per holder: duplicates are kept, in rank order, for a
 * later trt_agg to combine. */
TrtRel *trt_bcast(const TrtRel *r)
{
	const TrtType *t = &r->type;
	TrtPlace all = { .kind = TRT_ALL };
	int nr = rt.nranks, me = rt.rank, nk = t->nkey;

	if (r->place.kind == TRT_ALL || nr == 1) {
		TrtRel *out = share(r, all);
		rt_rel_sort(out);
		return out;
	}

	/* 1. counts */
	int64_t mine = r->n;
	int64_t *ntup = rt_alloc(sizeof *ntup * (size_t)nr);
	int64_t t0 = rt_span_begin();
	MPI_Allgather(&mine, 1, MPI_INT64_T, ntup, 1, MPI_INT64_T, rt.comm);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "counts");

	/* 2. key records: ours to everyone, theirs into one array per peer */
	int w = record_len(t);
	int64_t *mine_recs = r->keys;
	if (t->sparse) {
		mine_recs = rt_alloc(sizeof(int64_t) * (size_t)(r->n * w + 1));
		pack_records(r, NULL, r->n, mine_recs);
	}
	int64_t **keys = rt_alloc(sizeof *keys * (size_t)nr);
	Exchange x = exchange_new(nr);
	for (int s = 0; s < nr; s++) {
		keys[s] = NULL;
		if (s == me)
			continue;
		keys[s] = rt_alloc(sizeof(int64_t) * (size_t)(ntup[s] * w + 1));
		side_add(&x.kr[s], keys[s], sizeof(int64_t) * (size_t)(ntup[s] * w));
		side_add(&x.ks[s], mine_recs, sizeof(int64_t) * (size_t)(r->n * w));
	}
	/* 3. chunks: ours leave with the keys; theirs land straight in the
	 * output's new chunks once their keys say how big they are.  Our own
	 * tuples are shared. */
	for (int s = 0; s < nr; s++)
		if (s != me)
			for (int64_t i = 0; i < r->n; i++)
				side_add(&x.cs[s], rt_chunk_data(r->chunks[i]), chunk_bytes(t, r->keys + i * nk, r->chunks[i]));
	exchange_keys(&x);

	TrtRel *out = trt_rel_new(t, all);
	double sent = 0;
	for (int64_t i = 0; i < r->n; i++)
		sent += tuple_bytes(t, r->keys + i * nk, r->chunks[i]);
	for (int s = 0; s < nr; s++) {
		if (s == me)
			for (int64_t i = 0; i < r->n; i++)
				rt_rel_push(out, r->keys + i * nk, rt_chunk_ref(r->chunks[i]));
		else
			receive_into(out, keys[s], ntup[s], &x.cr[s]);
	}
	exchange_end(&x);
	rt_count_sent(sent * (nr - 1));
	rt_count_keys((double)(sizeof(int64_t) * (size_t)(r->n * w)) * (nr - 1));

	for (int s = 0; s < nr; s++)
		free(keys[s]);
	free(keys);
	if (mine_recs != r->keys)
		free(mine_recs);
	free(ntup);
	rt_rel_sort(out);
	return out;
}

/* Every tuple goes to its site under p.  Tuples that stay keep their chunk. */
TrtRel *trt_shuffle(const TrtRel *r, TrtPlace p)
{
	const TrtType *t = &r->type;
	int nr = rt.nranks, me = rt.rank, nk = t->nkey;

	if (p.kind != TRT_PART)
		rt_bug("shuffle to a placement other than TRT_PART");
	for (int i = 0; i < p.ndims; i++)
		if (p.dims[i] < 0 || p.dims[i] >= nk)
			rt_bug("shuffle on key dim %d of %d", p.dims[i], nk);

	/* From TRT_ALL every rank already has its share: keep it, send nothing. */
	if (r->place.kind == TRT_ALL) {
		TrtRel *out = trt_rel_new(t, p);
		for (int64_t i = 0; i < r->n; i++) {
			const int64_t *key = r->keys + i * nk;
			if (trt_site(&p, t, key) == me)
				rt_rel_push(out, key, rt_chunk_ref(r->chunks[i]));
		}
		rt_rel_sort(out);
		return out;
	}

	/* 1. counts */
	int *site = rt_alloc(sizeof *site * (size_t)(r->n + 1));
	int64_t *scount = rt_alloc(sizeof *scount * (size_t)nr);
	int64_t *rcount = rt_alloc(sizeof *rcount * (size_t)nr);
	memset(scount, 0, sizeof *scount * (size_t)nr);
	for (int64_t i = 0; i < r->n; i++) {
		site[i] = trt_site(&p, t, r->keys + i * nk);
		scount[site[i]]++;
	}
	int64_t t0 = rt_span_begin();
	MPI_Alltoall(scount, 1, MPI_INT64_T, rcount, 1, MPI_INT64_T, rt.comm);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "counts");

	/* 2. key records, gathered per destination in tuple order */
	int w = record_len(t);
	int64_t **skeys = rt_alloc(sizeof *skeys * (size_t)nr);
	int64_t **rkeys = rt_alloc(sizeof *rkeys * (size_t)nr);
	int64_t *fill = rt_alloc(sizeof *fill * (size_t)nr);
	Exchange x = exchange_new(nr);
	for (int d = 0; d < nr; d++) {
		skeys[d] = rkeys[d] = NULL;
		fill[d] = 0;
		if (d == me)
			continue;
		skeys[d] = rt_alloc(sizeof(int64_t) * (size_t)(scount[d] * w + 1));
		rkeys[d] = rt_alloc(sizeof(int64_t) * (size_t)(rcount[d] * w + 1));
		side_add(&x.ks[d], skeys[d], sizeof(int64_t) * (size_t)(scount[d] * w));
		side_add(&x.kr[d], rkeys[d], sizeof(int64_t) * (size_t)(rcount[d] * w));
	}
	for (int64_t i = 0; i < r->n; i++) {
		int d = site[i];
		if (d != me)
			pack_records(r, &i, 1, skeys[d] + fill[d]++ * w);
	}
	/* 3. chunks: ours leave with the keys (see trt_bcast) */
	double sent = 0;
	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * nk;
		if (site[i] == me)
			continue;
		side_add(&x.cs[site[i]], rt_chunk_data(r->chunks[i]), chunk_bytes(t, key, r->chunks[i]));
		sent += tuple_bytes(t, key, r->chunks[i]);
	}
	exchange_keys(&x);

	TrtRel *out = trt_rel_new(t, p);
	for (int s = 0; s < nr; s++) {
		if (s == me) {
			for (int64_t i = 0; i < r->n; i++)
				if (site[i] == me)
					rt_rel_push(out, r->keys + i * nk, rt_chunk_ref(r->chunks[i]));
		} else {
			receive_into(out, rkeys[s], rcount[s], &x.cr[s]);
		}
	}
	exchange_end(&x);
	rt_count_sent(sent);
	rt_count_keys((double)(sizeof(int64_t) * (size_t)((r->n - scount[me]) * w)));

	for (int d = 0; d < nr; d++) {
		free(skeys[d]);
		free(rkeys[d]);
	}
	free(skeys);
	free(rkeys);
	free(fill);
	free(site);
	free(scount);
	free(rcount);
	rt_rel_sort(out);
	return out;
}
