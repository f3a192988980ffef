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
 * Under a memory budget (store.c) every message is posted within a window
 * of bytes in flight per peer and direction (Exchange, below), so that a
 * chunk is resident only while it travels.
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

/* A piece of a stream of bytes between two ranks: tuple idx's chunk of
 * rel (made when its receive is posted, if it is not there yet), or, when
 * rel is NULL, the n bytes at p. */
typedef struct Piece {
	const TrtRel *rel;
	int64_t idx;
	char *p;
	size_t n;
} Piece;

/* One message: pieces [first, first + cnt), or when cnt is 1 the bytes
 * [off, off + len) of one. */
typedef struct Msg {
	int64_t first, cnt;
	size_t off, len;
} Msg;

/* What one rank sends to, or receives from, one peer: pieces in stream
 * order, the messages they are cut into, and how far they are posted. */
typedef struct Side {
	Piece *v;
	int64_t n, cap;
	Msg *m;
	int64_t nm, cm, next;           /* messages; the next to post */
	double inflight;                /* bytes of messages posted, not complete */
	int send, peer, tag;
} Side;

static void side_add(Side *s, const TrtRel *rel, int64_t idx, void *p, size_t n)
{
	if (n == 0)
		return;                 /* both ends skip empty chunks alike */
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = rt_realloc(s->v, sizeof *s->v * (size_t)s->cap);
	}
	s->v[s->n++] = (Piece){rel, idx, p, n};
}

static Side *sides_new(int nr, int send, int tag)
{
	Side *s = rt_alloc(sizeof *s * (size_t)nr);
	memset(s, 0, sizeof *s * (size_t)nr);
	for (int d = 0; d < nr; d++) {
		s[d].send = send;
		s[d].peer = d;
		s[d].tag = tag;
	}
	return s;
}

static void sides_free(Side *s, int nr)
{
	for (int i = 0; i < nr; i++) {
		free(s[i].v);
		free(s[i].m);
	}
	free(s);
}

static void msg_add(Side *s, int64_t first, int64_t cnt, size_t off, size_t len)
{
	if (s->nm == s->cm) {
		s->cm = s->cm ? 2 * s->cm : 16;
		s->m = rt_realloc(s->m, sizeof *s->m * (size_t)s->cm);
	}
	s->m[s->nm++] = (Msg){first, cnt, off, len};
}

/* Cuts one side into messages, the same cuts at both ends (they see the
 * same sequence of piece sizes, and the same window: a group of small
 * chunks is no bigger than it). */
static void plan_messages(Side *s, double window)
{
	size_t limit = (size_t)rt_msg_limit, group = GROUP < limit ? GROUP : limit;
	if (window < (double)group)
		group = window > 1 ? (size_t)window : 1;
	int64_t first = 0;              /* the pending group: pieces [first, i) */
	size_t gbytes = 0;

	for (int64_t i = 0; i <= s->n; i++) {
		int big = i < s->n && (s->v[i].n >= SMALL || s->v[i].n > group);
		int full = i < s->n && !big && gbytes + s->v[i].n > group;
		if (i == s->n || big || full) {
			/* flush the group, in hindexed messages of at most INT_MAX pieces */
			while (first < i) {
				int64_t cnt = i - first < INT_MAX ? i - first : INT_MAX;
				msg_add(s, first, cnt, 0, s->v[first].n);
				first += cnt;
			}
			gbytes = 0;
		}
		if (i == s->n)
			break;
		if (big) {
			for (size_t off = 0; off < s->v[i].n; off += limit)
				msg_add(s, i, 1, off, s->v[i].n - off < limit ? s->v[i].n - off : limit);
			first = i + 1;
		} else {
			gbytes += s->v[i].n;
		}
	}
}

static size_t msg_bytes(const Side *s, const Msg *g)
{
	if (g->cnt == 1)
		return g->len;
	size_t b = 0;
	for (int64_t i = 0; i < g->cnt; i++)
		b += s->v[g->first + i].n;
	return b;
}

/* A piece's bytes, resident and held while its message travels; a
 * received chunk is made now (and pinned by nothing else, so that once in
 * it may be spilled before the op ends). */
static char *piece_data(Piece *pc, int send)
{
	if (!pc->rel)
		return pc->p;
	TrtRel *rel = (TrtRel *)pc->rel;
	if (!rel->chunks[pc->idx]) {
		size_t mark = rt_pin_mark();
		rt_rel_set(rel, pc->idx, rt_chunk_new(pc->n));
		char *p = rt_chunk_hold(rel->chunks[pc->idx], 1);
		rt_pin_release(mark);
		return p;
	}
	return rt_chunk_hold(rel->chunks[pc->idx], !send);
}

static void piece_done(const Piece *pc)
{
	if (pc->rel)
		rt_chunk_unhold(pc->rel->chunks[pc->idx]);
}

/* Every message of an exchange in flight, and which side's it is. */
typedef struct Engine {
	MPI_Request *req;
	struct { Side *s; int64_t m; } *own;    /* s NULL: a message of keys */
	int *spare;                             /* free slots of req */
	int n, cap, nspare;
	int64_t open;
	double window;                          /* the most bytes in flight per side */
	int *idx;
} Engine;

static int slot(Engine *e)
{
	if (e->nspare)
		return e->spare[--e->nspare];
	if (e->n == e->cap) {
		e->cap = e->cap ? 2 * e->cap : 64;
		e->req = rt_realloc(e->req, sizeof *e->req * (size_t)e->cap);
		e->own = rt_realloc(e->own, sizeof *e->own * (size_t)e->cap);
		e->spare = rt_realloc(e->spare, sizeof *e->spare * (size_t)e->cap);
		e->idx = rt_realloc(e->idx, sizeof *e->idx * (size_t)e->cap);
	}
	return e->n++;
}

/* Posts message m of side s. */
static void post_msg(Engine *e, Side *s, int64_t m)
{
	const Msg *g = &s->m[m];
	int k = slot(e);
	MPI_Request *req = &e->req[k];
	e->own[k].s = s;
	e->own[k].m = m;
	e->open++;
	s->inflight += (double)msg_bytes(s, g);
	if (g->cnt == 1) {
		char *p = piece_data(&s->v[g->first], s->send) + g->off;
		if (s->send)
			MPI_Isend(p, (int)g->len, MPI_BYTE, s->peer, s->tag, rt.comm, req);
		else
			MPI_Irecv(p, (int)g->len, MPI_BYTE, s->peer, s->tag, rt.comm, req);
		return;
	}
	int n = (int)g->cnt;
	int *lens = rt_alloc(sizeof *lens * (size_t)n);
	MPI_Aint *addr = rt_alloc(sizeof *addr * (size_t)n);
	for (int i = 0; i < n; i++) {
		lens[i] = (int)s->v[g->first + i].n;
		MPI_Get_address(piece_data(&s->v[g->first + i], s->send), &addr[i]);
	}
	MPI_Datatype t;
	MPI_Type_create_hindexed(n, lens, addr, MPI_BYTE, &t);
	MPI_Type_commit(&t);
	if (s->send)
		MPI_Isend(MPI_BOTTOM, 1, t, s->peer, s->tag, rt.comm, req);
	else
		MPI_Irecv(MPI_BOTTOM, 1, t, s->peer, s->tag, rt.comm, req);
	MPI_Type_free(&t);      /* freed when the message completes */
	free(lens);
	free(addr);
}

/* Posts side s's next messages while its bytes in flight stay within the
 * window (one at least); --trace: the span of posting them. */
static void post_side(Engine *e, Side *s)
{
	int64_t t0 = rt_span_begin(), first = s->next;
	while (s->next < s->nm && (s->inflight == 0 || s->inflight + (double)msg_bytes(s, &s->m[s->next]) <= e->window))
		post_msg(e, s, s->next++);
	if (t0 && s->next > first) {
		double bytes = 0;
		for (int64_t m = first; m < s->next; m++)
			bytes += (double)msg_bytes(s, &s->m[m]);
		rt_trace_span(s->send ? RT_SPAN_SEND : RT_SPAN_RECV, t0, s->peer, bytes, 0,
		              s->tag == TAG_KEYS ? "keys" : "chunks");
	}
}

static void post_sides(Engine *e, Side *sides, int nr)
{
	for (int d = 0; d < nr; d++) {
		if (!sides[d].m)
			plan_messages(&sides[d], e->window);
		post_side(e, &sides[d]);
	}
}

/* Waits for messages until none of side set `which` (or any, NULL) is
 * open, posting each side's next messages as its window frees. */
static void engine_run(Engine *e, const Side *which, int nwhich, const char *what)
{
	for (;;) {
		int left = 0;
		for (int k = 0; k < e->n && !left; k++)
			left = e->req[k] != MPI_REQUEST_NULL &&
			       (!which || (e->own[k].s >= which && e->own[k].s < which + nwhich));
		if (!left)
			return;
		int64_t t0 = rt_span_begin();
		int out = 0;
		MPI_Waitsome(e->n, e->req, &out, e->idx, MPI_STATUSES_IGNORE);
		if (t0)
			rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, what);
		if (out == MPI_UNDEFINED)
			rt_bug("an exchange waits for nothing");
		for (int i = 0; i < out; i++) {
			int k = e->idx[i];
			Side *s = e->own[k].s;
			e->spare[e->nspare++] = k;
			e->open--;
			if (!s)
				continue;
			const Msg *g = &s->m[e->own[k].m];
			for (int64_t q = 0; q < g->cnt; q++)
				piece_done(&s->v[g->first + q]);
			s->inflight -= (double)msg_bytes(s, g);
			post_side(e, s);
		}
	}
}

static void engine_free(Engine *e)
{
	free(e->req);
	free(e->own);
	free(e->spare);
	free(e->idx);
}

/* One exchange, steps 2 and 3: per peer, the keys and the chunks this rank
 * sends and receives.  The caller fills ks, kr and cs, exchange_keys posts
 * them and returns with the keys in; the caller then adds the chunks those
 * keys announce to cr, and exchange_end receives them and waits for all.
 * Under a memory budget each side keeps at most a window of bytes in
 * flight (an eighth of the budget over the peers, one message at least):
 * a chunk is held only while its message travels, so a received chunk may
 * be spilled as soon as it is in, and one sent read back just before it
 * leaves.  Each pair of ranks moves its messages in order, each end
 * posting the next as its window frees, so no side waits for another
 * peer's. */
typedef struct Exchange {
	Side *ks, *kr;                  /* keys sent, received */
	Side *cs, *cr;                  /* chunks sent, received */
	Engine e;
	int nr;
} Exchange;

static Exchange exchange_new(int nr)
{
	Exchange x = {0};
	x.ks = sides_new(nr, 1, TAG_KEYS);
	x.kr = sides_new(nr, 0, TAG_KEYS);
	x.cs = sides_new(nr, 1, TAG_CHUNKS);
	x.cr = sides_new(nr, 0, TAG_CHUNKS);
	x.nr = nr;
	x.e.window = rt.budget > 0 ? rt.budget / 8 / (nr > 1 ? nr - 1 : 1) : 1e300;
	return x;
}

/* Our chunks leave with the keys, without waiting for a round trip. */
static void exchange_keys(Exchange *x)
{
	Engine keys = {.window = x->e.window};  /* (one piece a side: all posted) */
	post_sides(&keys, x->kr, x->nr);
	post_sides(&x->e, x->ks, x->nr);
	post_sides(&x->e, x->cs, x->nr);
	engine_run(&keys, NULL, 0, "keys");
	engine_free(&keys);
}

static void exchange_end(Exchange *x)
{
	post_sides(&x->e, x->cr, x->nr);
	engine_run(&x->e, NULL, 0, "chunks");
	engine_free(&x->e);
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

/* Appends to out ntup tuples with the given keys and no chunks yet (made
 * when their receives are posted), and adds the chunks to the receiving
 * side. */
static void receive_into(TrtRel *out, const int64_t *recs, int64_t ntup, Side *side)
{
	const TrtType *t = &out->type;

	for (int64_t i = 0; i < ntup; i++) {
		const int64_t *key = recs + i * record_len(t);
		rt_check_key(t, key);
		size_t cb = chunk_bytes(t, key, NULL);
		rt_count_recv(tuple_bytes(t, key, NULL));
		rt_rel_push(out, key, cb ? NULL : rt_chunk_new(0));
		side_add(side, out, out->n - 1, NULL, cb);
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
		side_add(&x.kr[s], NULL, 0, (char *)keys[s], sizeof(int64_t) * (size_t)(ntup[s] * w));
		side_add(&x.ks[s], NULL, 0, (char *)mine_recs, sizeof(int64_t) * (size_t)(r->n * w));
	}
	/* 3. chunks: ours leave with the keys; theirs land straight in the
	 * output's new chunks once their keys say how big they are.  Our own
	 * tuples are shared. */
	for (int s = 0; s < nr; s++)
		if (s != me)
			for (int64_t i = 0; i < r->n; i++)
				side_add(&x.cs[s], r, i, NULL, chunk_bytes(t, r->keys + i * nk, r->chunks[i]));
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
		side_add(&x.ks[d], NULL, 0, (char *)skeys[d], sizeof(int64_t) * (size_t)(scount[d] * w));
		side_add(&x.kr[d], NULL, 0, (char *)rkeys[d], sizeof(int64_t) * (size_t)(rcount[d] * w));
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
		side_add(&x.cs[site[i]], r, i, NULL, chunk_bytes(t, key, r->chunks[i]));
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
