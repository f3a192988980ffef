/*
 * gather.c: look-ups by an index's values (trt_gather) and their adjoint,
 * the scatter-add (trt_scatter).
 *
 * A gather's result is keyed by the index's key dims, then the table's but
 * the gathered one (`dim`); element (i, o) is the table's element with
 * index value v = index[i] along dim and o along the others.  A *piece* is
 * what one index element reads from one table chunk: the elements along
 * the table's other chunk dims, in the table chunk's order.  Pieces are
 * copied through two offset lists (into the table chunk and into the
 * result chunk), or by one memcpy when both are contiguous.
 *
 * A table partitioned across ranks is looked up: each rank sends, per
 * owner, one request (the table key's linear index and the row in its
 * chunk) per piece it needs, and the owner sends the pieces back, all in
 * one MPI_Alltoallv each way; so the rows move, never the table.  The
 * scatter sends each piece (with its result key and row) to the ranks
 * holding the result's tuple; each rank sums the pieces of one result row
 * in double, by source rank (its own among them) then arrival, and adds
 * the sum, times the op's scale, once: results do not depend on message
 * timing, and a row many indices name rounds once into its base.  The
 * result starts as zeros or as a base: its chunks taken over when the
 * compiler says the base dies there (copied only where another relation
 * shares one), else copied.
 *
 * An index value outside the gathered dim is a run-time error naming the
 * index and the table: every rank checks its own elements and the ranks
 * agree (rt_agree), so the job exits 1 with one line and writes nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* One (table or rows chunk, result chunk) pair of layouts: the offsets of
 * a piece's elements on both sides, and the stride of a row on each. */
typedef struct Piece {
	int64_t n;                      /* elements in the piece */
	int64_t *src, *dst;             /* their offsets; NULL when contiguous from 0 */
} Piece;

/* Row-major strides of a chunk of type t at key, per key dim (0 for a
 * key dim with no chunk dim). */
static void key_strides(const TrtType *t, const int64_t *key, int64_t *st)
{
	int64_t n[TRT_MAXDIM], s = 1;
	rt_chunk_shape(t, key, n);
	for (int d = 0; d < t->nkey; d++)
		st[d] = 0;
	for (int c = t->nchunk - 1; c >= 0; c--) {
		st[t->chunkdim[c]] = s;
		s *= n[c];
	}
}

/* The piece between a table-shaped chunk (tt at tkey, row dim `dim`) and a
 * rows-shaped chunk (rt at rkey, whose dims ni.. are the table's others):
 * element q runs over the table's other chunk dims in the table's chunk
 * order. */
static Piece piece_of(const TrtType *tt, const int64_t *tkey, int dim, const TrtType *rt, const int64_t *rkey,
                      int ni)
{
	int64_t ts[TRT_MAXDIM], rs[TRT_MAXDIM], n[TRT_MAXDIM];
	key_strides(tt, tkey, ts);
	key_strides(rt, rkey, rs);
	rt_chunk_shape(tt, tkey, n);
	int od[TRT_MAXDIM], nod = 0;           /* table chunk dims but the row's */
	int64_t len[TRT_MAXDIM];
	Piece p = {1, NULL, NULL};
	for (int c = 0; c < tt->nchunk; c++)
		if (tt->chunkdim[c] != dim) {
			len[nod] = n[c];
			p.n *= n[c];
			od[nod++] = tt->chunkdim[c];
		}
	p.src = rt_alloc(sizeof *p.src * (size_t)(p.n ? p.n : 1));
	p.dst = rt_alloc(sizeof *p.dst * (size_t)(p.n ? p.n : 1));
	int64_t at[TRT_MAXDIM] = {0};
	int contiguous = 1;
	for (int64_t q = 0; q < p.n; q++) {
		int64_t s = 0, d = 0;
		for (int i = 0; i < nod; i++) {
			int kd = od[i];
			s += at[i] * ts[kd];
			d += at[i] * rs[ni + kd - (kd > dim)];
		}
		p.src[q] = s;
		p.dst[q] = d;
		contiguous &= s == q && d == q;
		for (int i = nod - 1; i >= 0; i--) {
			if (++at[i] < len[i])
				break;
			at[i] = 0;
		}
	}
	if (contiguous) {
		free(p.src);
		free(p.dst);
		p.src = p.dst = NULL;
	}
	return p;
}

static void piece_free(Piece *p)
{
	free(p->src);
	free(p->dst);
}

/* Pieces between a table-shaped chunk and one rows-shaped chunk: the
 * table chunk's layout, for fixed keys along the other dims, is one of
 * two (the last block along dim may be short), so two entries hold every
 * piece one rows chunk needs, with the table chunk's strides (last: the
 * last block's number along dim). */
typedef struct PieceCache {
	int valid[2];
	Piece p[2];
	int64_t st[2][TRT_MAXDIM];
} PieceCache;

static const Piece *cached_piece(PieceCache *c, const TrtType *tt, const int64_t *tkey, int dim, int64_t last,
                                 const TrtType *rt, const int64_t *rkey, int ni, const int64_t **st)
{
	int e = tkey[dim] == last;
	if (!c->valid[e]) {
		c->p[e] = piece_of(tt, tkey, dim, rt, rkey, ni);
		key_strides(tt, tkey, c->st[e]);
		c->valid[e] = 1;
	}
	*st = c->st[e];
	return &c->p[e];
}

static void cache_free(PieceCache *c)
{
	for (int e = 0; e < 2; e++)
		if (c->valid[e])
			piece_free(&c->p[e]);
	c->valid[0] = c->valid[1] = 0;
}

/* dst[dst offsets] = src[src offsets] over a piece. */
static void piece_copy(const Piece *p, size_t es, char *dst, const char *src)
{
	if (!p->src && !p->dst) {
		memcpy(dst, src, (size_t)p->n * es);
		return;
	}
	for (int64_t q = 0; q < p->n; q++) {
		int64_t s = p->src ? p->src[q] : q, d = p->dst ? p->dst[q] : q;
		memcpy(dst + d * es, src + s * es, es);
	}
}

/* The step of key dim d in t's linear keys (rt_key_linear's order): a key
 * one block further along d is this much further. */
static int64_t key_step(const TrtType *t, int d)
{
	int64_t step = 1;
	for (int x = d + 1; x < t->nkey; x++)
		step *= rt_frontier(t, x);
	return step;
}

/* The table's key and row for index value v and the other dims' key okey
 * (the result's dims ni..). */
static void table_key(const TrtType *tt, int dim, int64_t v, const int64_t *okey, int64_t *tkey, int64_t *row)
{
	for (int d = 0, o = 0; d < tt->nkey; d++)
		tkey[d] = d == dim ? v / tt->block[dim] : okey[o++];
	*row = v % tt->block[dim];
}

/* Each index element of one index chunk: its value, and its offset base
 * in a rows-shaped chunk (rs: that chunk's strides per key dim). */
typedef struct IxElems {
	int64_t n;
	int64_t *val, *base;
} IxElems;

static IxElems ix_elems(const TrtRel *ix, int64_t t, const int64_t *rs)
{
	const TrtType *it = &ix->type;
	const int64_t *key = ix->keys + t * it->nkey;
	int64_t n[TRT_MAXDIM], at[TRT_MAXDIM] = {0};
	IxElems e;
	e.n = rt_chunk_shape(it, key, n);
	e.val = rt_alloc(sizeof *e.val * (size_t)(e.n ? e.n : 1));
	e.base = rt_alloc(sizeof *e.base * (size_t)(e.n ? e.n : 1));
	const void *p = rt_chunk_data(ix->chunks[t]);
	for (int64_t q = 0; q < e.n; q++) {
		e.val[q] = it->dtype == TRT_I32 ? ((const int32_t *)p)[q] : ((const int64_t *)p)[q];
		int64_t b = 0;
		for (int c = 0; c < it->nchunk; c++)
			b += at[c] * rs[it->chunkdim[c]];
		e.base[q] = b;
		for (int c = it->nchunk - 1; c >= 0; c--) {
			if (++at[c] < n[c])
				break;
			at[c] = 0;
		}
	}
	return e;
}

static void ix_free(IxElems *e)
{
	free(e->val);
	free(e->base);
}

/* The first index value of ix outside 0..extent-1 on this rank, as an
 * error line naming both tensors, or NULL. */
static char *check_range(const TrtRel *ix, int64_t extent, const char *iname, const char *tname, int dim)
{
	const TrtType *it = &ix->type;
	size_t mark = rt_pin_mark();
	for (int64_t t = 0; t < ix->n; t++) {
		const int64_t *key = ix->keys + t * it->nkey;
		int64_t n[TRT_MAXDIM], at[TRT_MAXDIM] = {0};
		int64_t cnt = rt_chunk_shape(it, key, n);
		rt_pin_release(mark);           /* an index chunk at a time */
		const void *p = rt_chunk_data(ix->chunks[t]);
		for (int64_t q = 0; q < cnt; q++) {
			int64_t v = it->dtype == TRT_I32 ? ((const int32_t *)p)[q] : ((const int64_t *)p)[q];
			if (v < 0 || v >= extent) {
				char where[256];
				int len = 0;
				for (int d = 0; d < it->nkey; d++) {
					int64_t g = key[d] * it->block[d];
					for (int c = 0; c < it->nchunk; c++)
						if (it->chunkdim[c] == d)
							g += at[c];
					len += snprintf(where + len, sizeof where - (size_t)len, "%s%" PRId64, d ? ", " : "", g);
				}
				size_t sz = 512 + strlen(iname) + strlen(tname);
				char *msg = rt_alloc(sz);
				snprintf(msg, sz, "%s: index %s[%s] = %" PRId64 " is outside dimension %d of %s "
				         "(0 to %" PRId64 ")", rt_progname(), iname, where, v, dim + 1, tname, extent - 1);
				rt_pin_release(mark);
				return msg;
			}
			for (int c = it->nchunk - 1; c >= 0; c--) {
				if (++at[c] < n[c])
					break;
				at[c] = 0;
			}
		}
	}
	rt_pin_release(mark);
	return NULL;
}

/* ---- the exchange: one all-to-all of byte buffers ---- */

typedef struct Bufs {
	char **p;
	int64_t *len, *cap;
} Bufs;

static Bufs bufs_new(void)
{
	Bufs b;
	b.p = rt_alloc(sizeof *b.p * (size_t)rt.nranks);
	b.len = rt_alloc(sizeof *b.len * (size_t)rt.nranks);
	b.cap = rt_alloc(sizeof *b.cap * (size_t)rt.nranks);
	for (int r = 0; r < rt.nranks; r++) {
		b.p[r] = NULL;
		b.len[r] = b.cap[r] = 0;
	}
	return b;
}

static void *bufs_add(Bufs *b, int r, size_t n)
{
	if (b->len[r] + (int64_t)n > b->cap[r]) {
		b->cap[r] = 2 * (b->len[r] + (int64_t)n) + 256;
		b->p[r] = rt_realloc(b->p[r], (size_t)b->cap[r]);
	}
	void *at = b->p[r] + b->len[r];
	b->len[r] += (int64_t)n;
	return at;
}

static void bufs_free(Bufs *b)
{
	for (int r = 0; r < rt.nranks; r++)
		free(b->p[r]);
	free(b->p);
	free(b->len);
	free(b->cap);
}

/* Every rank's out[r] to rank r; returns what arrived, per source, in one
 * buffer (*off[r] where rank r's part starts, *off[nranks] its end). */
static char *exchange(const Bufs *out, int64_t **off, const char *what)
{
	int nr = rt.nranks;
	int *sc = rt_alloc(sizeof *sc * (size_t)nr), *rc = rt_alloc(sizeof *rc * (size_t)nr);
	int *sd = rt_alloc(sizeof *sd * (size_t)nr), *rd = rt_alloc(sizeof *rd * (size_t)nr);
	double sent = 0;
	for (int r = 0; r < nr; r++) {
		if (out->len[r] > INT32_MAX)
			trt_fatal("%s: more than 2 GiB for one rank in one exchange", what);
		sc[r] = (int)out->len[r];
		if (r != rt.rank)
			sent += (double)sc[r];
	}
	int64_t t0 = rt_span_begin();
	MPI_Alltoall(sc, 1, MPI_INT, rc, 1, MPI_INT, rt.comm);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "counts");
	int64_t stot = 0, rtot = 0;
	*off = rt_alloc(sizeof **off * (size_t)(nr + 1));
	for (int r = 0; r < nr; r++) {
		sd[r] = (int)stot;
		rd[r] = (int)rtot;
		(*off)[r] = rtot;
		stot += sc[r];
		rtot += rc[r];
	}
	(*off)[nr] = rtot;
	if (stot > INT32_MAX || rtot > INT32_MAX)
		trt_fatal("%s: more than 2 GiB in one exchange", what);
	/* one rank's buffer (the other rank's, on 2) is sent as it lies; any
	 * more are copied into one */
	int only = -1, nsend = 0;
	for (int r = 0; r < nr; r++)
		if (sc[r]) {
			only = r;
			nsend++;
		}
	char *sbuf = nsend == 1 ? out->p[only] : rt_alloc((size_t)(stot ? stot : 1));
	char *rbuf = rt_alloc((size_t)(rtot ? rtot : 1));
	if (nsend == 1)
		sd[only] = 0;
	else
		for (int r = 0; r < nr; r++)
			if (sc[r])
				memcpy(sbuf + sd[r], out->p[r], (size_t)sc[r]);
	rt_count_buf((double)(stot + rtot));
	t0 = rt_span_begin();
	MPI_Alltoallv(sbuf, sc, sd, MPI_BYTE, rbuf, rc, rd, MPI_BYTE, rt.comm);
	if (t0) {
		/* one call sends and receives: the send span, then what it
		 * received as a receive span at its end */
		rt_trace_span(RT_SPAN_SEND, t0, -1, sent, 0, what);
		rt_trace_span(RT_SPAN_RECV, rt_trace_clock(), -1, (double)(rtot - rc[rt.rank]), 0, what);
	}
	rt_count_sent(sent);
	rt_count_recv((double)(rtot - rc[rt.rank]));
	rt_count_buf(-(double)stot);
	if (nsend != 1)
		free(sbuf);
	free(sc);
	free(rc);
	free(sd);
	free(rd);
	return rbuf;
}

/* Frees what exchange returned: the buffer it received (no longer live in
 * --profile's communication buffers) and its offsets. */
static void exchange_free(char *in, int64_t *off)
{
	if (off)
		rt_count_buf(-(double)off[rt.nranks]);
	free(in);
	free(off);
}

/* ---- gather ---- */

/* A request: the table chunk's linear key and the row in it. */
typedef struct Req {
	int64_t klin, row;
} Req;

/* Where a requested piece lands: the result tuple (its key o's) and its
 * offset base. */
typedef struct Dest {
	int64_t tuple, base;
} Dest;

/* The owner's side of a look-up: per requesting rank, the requested rows'
 * pieces, in request order (in, with roff[r] where rank r's start).  The
 * requests name this rank's blocks interleaved, in the order of the
 * requester's indices: each table tuple's piece and strides are made once,
 * not again at each change of block (examples/transe.tra at V = 200000 in
 * blocks of 10000 rows, ten a rank: a piece made and freed for nearly
 * every row). */
static Bufs owners_reply(const TrtRel *table, const KeyIndex *tix, int dim, const char *in, const int64_t *roff)
{
	const TrtType *tt = &table->type;
	size_t es = rt_dtype_size(tt->dtype);
	Bufs reply = bufs_new();
	int64_t n = table->n ? table->n : 1, pclin = -1, pos = -1;
	Piece *pcs = rt_alloc(sizeof *pcs * (size_t)n);
	int64_t (*tss)[TRT_MAXDIM] = rt_alloc(sizeof *tss * (size_t)n);
	char *made = rt_alloc((size_t)n);
	memset(made, 0, (size_t)n);
	int budget = rt.budget > 0;     /* pins matter only under one (store.c) */
	size_t mark = rt_pin_mark();
	for (int r = 0; r < rt.nranks; r++)
		for (int64_t at = roff[r]; at < roff[r + 1]; at += (int64_t)sizeof(Req)) {
			Req rq;
			memcpy(&rq, in + at, sizeof rq);
			if (rq.klin != pclin) {
				if (budget)
					rt_pin_release(mark);   /* a table chunk at a time */
				int64_t tkey[TRT_MAXDIM];
				rt_key_from_linear(tt, rq.klin, tkey);
				pos = rt_index_find(tix, table, tkey);
				if (pos < 0)
					rt_bug("a looked-up table chunk is not on its owner");
				if (!made[pos]) {
					key_strides(tt, tkey, tss[pos]);
					/* the piece in its own order (only its table
					 * side is used): the requester knows the layout */
					pcs[pos] = piece_of(tt, tkey, dim, tt, tkey, 0);
					made[pos] = 1;
				}
				pclin = rq.klin;
			}
			const Piece *pc = &pcs[pos];
			char *dst = bufs_add(&reply, r, (size_t)pc->n * es);
			const char *src = (const char *)rt_chunk_data(table->chunks[pos]) + rq.row * tss[pos][dim] * (int64_t)es;
			if (!pc->src)
				memcpy(dst, src, (size_t)pc->n * es);
			else
				for (int64_t q = 0; q < pc->n; q++)
					memcpy(dst + q * (int64_t)es, src + pc->src[q] * (int64_t)es, es);
		}
	rt_pin_release(mark);
	for (int64_t t = 0; t < table->n; t++)
		if (made[t])
			piece_free(&pcs[t]);
	free(pcs);
	free(tss);
	free(made);
	return reply;
}

TrtRel *trt_gather(const TrtRel *table, const TrtRel *index, int dim, const TrtType *out, TrtPlace p,
                   const char *iname, const char *tname)
{
	const TrtType *tt = &table->type, *it = &index->type;
	int ni = it->nkey, no = out->nkey;
	size_t es = rt_dtype_size(out->dtype);

	char *bad = check_range(index, tt->extent[dim], iname, tname, dim);
	if (rt.nranks > 1)
		rt_agree(bad);
	else if (bad) {
		fprintf(stderr, "%s\n", bad);
		rt_exit(1);
	}

	KeyIndex tix;
	rt_index_init(&tix);
	for (int64_t t = 0; t < table->n; t++)
		rt_index_add(&tix, table, t);
	int remote = table->place.kind != TRT_ALL && rt.nranks > 1;
	Bufs reqs = bufs_new();
	Dest **dest = rt_alloc(sizeof *dest * (size_t)rt.nranks);
	int64_t *ndest = rt_alloc(sizeof *ndest * (size_t)rt.nranks), *capdest = rt_alloc(sizeof *capdest * (size_t)rt.nranks);
	for (int r = 0; r < rt.nranks; r++) {
		dest[r] = NULL;
		ndest[r] = capdest[r] = 0;
	}

	TrtRel *o = trt_rel_new(out, p);
	/* the other dims' keys: the table's key dims but dim, over their frontiers */
	int64_t nother = 1;
	for (int d = ni; d < no; d++)
		nother *= rt_frontier(out, d);
	/* within a result chunk only the table key's block along dim varies
	 * (its other dims are the chunk's): each block's owner and, here, its
	 * tuple, found once a result chunk (stamped with the chunk's number),
	 * not once a row (transe's gathers of 32768 rows of 32 floats from
	 * 2 blocks: the lookups were most of their time) */
	int64_t nblock = rt_frontier(tt, dim), stamp = 0, tstep = key_step(tt, dim);
	int budget = rt.budget > 0;     /* pins matter only under one (store.c) */
	int64_t *bstamp = rt_alloc(sizeof *bstamp * (size_t)nblock), *bpos = rt_alloc(sizeof *bpos * (size_t)nblock);
	int *bowner = rt_alloc(sizeof *bowner * (size_t)nblock);
	memset(bstamp, 0, sizeof *bstamp * (size_t)nblock);
	for (int64_t t = 0; t < index->n; t++) {
		const int64_t *ikey = index->keys + t * ni;
		for (int64_t k = 0; k < nother; k++) {
			int64_t okey[TRT_MAXDIM], rest = k;
			memcpy(okey, ikey, sizeof *okey * (size_t)ni);
			for (int d = no - 1; d >= ni; d--) {
				okey[d] = rest % rt_frontier(out, d);
				rest /= rt_frontier(out, d);
			}
			size_t mark = rt_pin_mark();   /* a result chunk at a time */
			Chunk *c = rt_chunk_new(rt_chunk_bytes(out, okey));
			char *dst = rt_chunk_mut(c);
			int64_t os[TRT_MAXDIM];
			key_strides(out, okey, os);
			IxElems e = ix_elems(index, t, os);
			int64_t tkey[TRT_MAXDIM], row, block = tt->block[dim];
			PieceCache pcache;
			memset(&pcache, 0, sizeof pcache);
			table_key(tt, dim, 0, okey + ni, tkey, &row);  /* all but tkey[dim], the same for the chunk */
			int64_t tlin0 = rt_key_linear(tt, tkey);       /* the table key's, but for its block */
			stamp++;
			for (int64_t q = 0; q < e.n; q++) {
				int64_t b = e.val[q] / block;
				row = e.val[q] - b * block;
				tkey[dim] = b;
				if (bstamp[b] != stamp) {
					bstamp[b] = stamp;
					bowner[b] = remote ? trt_site(&table->place, tt, tkey) : rt.rank;
					bpos[b] = bowner[b] == rt.rank ? rt_index_find(&tix, table, tkey) : -1;
					if (bowner[b] == rt.rank && bpos[b] < 0)
						rt_bug("a table chunk missing where its placement puts it");
				}
				int owner = bowner[b];
				if (owner != rt.rank) {
					Req rq = {tlin0 + b * tstep, row};
					memcpy(bufs_add(&reqs, owner, sizeof rq), &rq, sizeof rq);
					if (ndest[owner] == capdest[owner]) {
						capdest[owner] = 2 * capdest[owner] + 64;
						dest[owner] = rt_realloc(dest[owner], sizeof **dest * (size_t)capdest[owner]);
					}
					Dest *d = &dest[owner][ndest[owner]++];
					d->tuple = o->n;
					d->base = e.base[q];
					continue;
				}
				int64_t pos = bpos[b];
				const int64_t *ts;
				const Piece *pc = cached_piece(&pcache, tt, tkey, dim, nblock - 1, out, okey, ni, &ts);
				size_t one = budget ? rt_pin_mark() : 0;        /* the table's chunk for this piece only */
				piece_copy(pc, es, dst + e.base[q] * (int64_t)es,
				           (const char *)rt_chunk_data(table->chunks[pos]) + row * ts[dim] * (int64_t)es);
				if (budget)
					rt_pin_release(one);
			}
			cache_free(&pcache);
			ix_free(&e);
			rt_rel_push(o, okey, c);
			rt_pin_release(mark);
		}
	}

	if (remote) {
		/* the requests to the owners; the pieces back, in request order */
		int64_t *roff;
		char *in = exchange(&reqs, &roff, "row numbers");
		Bufs reply = owners_reply(table, &tix, dim, in, roff);
		exchange_free(in, roff);
		in = exchange(&reply, &roff, "rows");
		bufs_free(&reply);
		size_t mark = rt_pin_mark();
		for (int r = 0; r < rt.nranks; r++) {
			int64_t at = roff[r], tuple = -1;
			Piece pc = {0};
			for (int64_t i = 0; i < ndest[r]; i++) {
				const Dest *d = &dest[r][i];
				if (d->tuple != tuple) {
					rt_pin_release(mark);   /* a result chunk at a time */
					/* the table key only for its layout: any value in the chunk */
					const int64_t *okey = o->keys + d->tuple * no;
					int64_t tkey[TRT_MAXDIM], row;
					table_key(tt, dim, 0, okey + ni, tkey, &row);
					piece_free(&pc);
					pc = piece_of(tt, tkey, dim, out, okey, ni);
					tuple = d->tuple;
				}
				Piece flat = {pc.n, NULL, pc.dst};  /* the reply is in piece order */
				char *dst = rt_chunk_mut(o->chunks[d->tuple]);
				piece_copy(&flat, es, dst + d->base * (int64_t)es, in + at);
				at += pc.n * (int64_t)es;
			}
			piece_free(&pc);
		}
		rt_pin_release(mark);
		exchange_free(in, roff);
	}
	for (int r = 0; r < rt.nranks; r++)
		free(dest[r]);
	free(dest);
	free(ndest);
	free(capdest);
	free(bstamp);
	free(bpos);
	free(bowner);
	bufs_free(&reqs);
	rt_index_free(&tix);
	rt_rel_sort(o);
	return o;
}

/* ---- scatter-add ---- */

/* A piece to add: its result tuple's linear key, its row there, and its
 * values, in the result piece's order.  Adds hold them in arrival order,
 * the order the pieces of one row are summed in. */
typedef struct Add {
	int64_t lin, row;
	const char *val;
} Add;
typedef struct Adds {
	Add *v;
	int64_t n, cap;
} Adds;

/* The elements of the piece of the result tuple at linear key lin. */
static Piece result_piece(const TrtType *out, int dim, int64_t lin, int64_t *os)
{
	int64_t okey[TRT_MAXDIM];
	rt_key_from_linear(out, lin, okey);
	key_strides(out, okey, os);
	return piece_of(out, okey, dim, out, okey, 0);
}

/* The elements of a piece of the result tuple at linear key lin: its
 * chunk's length along every chunk dim but dim's; *rows (unless NULL) its
 * length along dim's (1 when dim has no chunk dim). */
static int64_t piece_len(const TrtType *out, int dim, int64_t lin, int64_t *rows)
{
	int64_t okey[TRT_MAXDIM], n[TRT_MAXDIM], len = 1, r = 1;
	rt_key_from_linear(out, lin, okey);
	rt_chunk_shape(out, okey, n);
	for (int c = 0; c < out->nchunk; c++)
		if (out->chunkdim[c] != dim)
			len *= n[c];
		else
			r = n[c];
	if (rows)
		*rows = r;
	return len;
}

static void add_one(Adds *adds, int64_t lin, int64_t row, const char *val)
{
	if (adds->n == adds->cap) {
		adds->cap = 2 * adds->cap + 256;
		adds->v = rt_realloc(adds->v, sizeof *adds->v * (size_t)adds->cap);
	}
	adds->v[adds->n++] = (Add){lin, row, val};
}

/* The pieces in buf (len bytes: key and row, then values), appended;
 * plen[lin] the length of a piece of the tuple at linear key lin, -1 until
 * known. */
static void parse_pieces(Adds *adds, const TrtType *out, int dim, const char *buf, int64_t len, int64_t nkeys,
                         const int64_t *at, int64_t *plen)
{
	size_t es = rt_dtype_size(out->dtype);
	for (int64_t a = 0; a < len;) {
		int64_t hdr[2];
		memcpy(hdr, buf + a, sizeof hdr);
		a += (int64_t)sizeof hdr;
		if (hdr[0] < 0 || hdr[0] >= nkeys || at[hdr[0]] < 0)
			rt_bug("scattered rows sent to a rank without their tuple");
		if (plen[hdr[0]] < 0)
			plen[hdr[0]] = piece_len(out, dim, hdr[0], NULL);
		add_one(adds, hdr[0], hdr[1], buf + a);
		a += plen[hdr[0]] * (int64_t)es;
	}
}

enum { RADIX_BITS = 11 };

/* v[0 .. n), in arrival order, stably sorted by result tuple (by_row 0)
 * or by row (1), each below top: a least-significant-digit radix sort,
 * RADIX_BITS a pass, so that the pieces of one row keep their arrival
 * order (qsort's merge sort and its comparison calls took a third of
 * examples/transe.tra's time). */
static void sort_adds(Add *v, int64_t n, uint64_t top, int by_row)
{
	if (n < 2)
		return;
	Add *tmp = rt_alloc(sizeof *tmp * (size_t)n), *from = v, *to = tmp;
	int64_t count[(1 << RADIX_BITS) + 1];
	uint64_t mask = (1 << RADIX_BITS) - 1;
#define ADD_KEY(a) ((uint64_t)(by_row ? (a).row : (a).lin))
	for (int shift = 0; shift < 64 && (top >> shift) > 0; shift += RADIX_BITS) {
		memset(count, 0, sizeof count);
		for (int64_t i = 0; i < n; i++)
			count[((ADD_KEY(from[i]) >> shift) & mask) + 1]++;
		for (int d = 0; d < 1 << RADIX_BITS; d++)
			count[d + 1] += count[d];
		for (int64_t i = 0; i < n; i++)
			to[count[(ADD_KEY(from[i]) >> shift) & mask]++] = from[i];
		Add *t = from;
		from = to;
		to = t;
	}
#undef ADD_KEY
	if (from != v)
		memcpy(v, from, sizeof *from * (size_t)n);
	free(tmp);
}

/* acc[q] += piece q, in double; dst[src[q]] += scale * acc[q], rounded to
 * the element type once.  One definition per element type, the type's
 * switch outside the loops. */
#define PIECE_SUM(name, T)                                                      \
	__attribute__((target_clones("avx512f", "avx2", "default")))           \
	static void name##_add(double *acc, const char *val, int64_t n)        \
	{                                                                       \
		const T *v = (const T *)val;                                    \
		for (int64_t q = 0; q < n; q++)                                 \
			acc[q] += (double)v[q];                                 \
	}                                                                       \
	static void name##_put(char *dst, const int64_t *src, const double *acc, int64_t n, double scale) \
	{                                                                       \
		T *o = (T *)dst;                                                \
		for (int64_t q = 0; q < n; q++)                                 \
			o[src ? src[q] : q] += (T)(scale * acc[q]);             \
	}
PIECE_SUM(piece_f32, float)
PIECE_SUM(piece_f64, double)
PIECE_SUM(piece_i32, int32_t)
PIECE_SUM(piece_i64, int64_t)
#undef PIECE_SUM

/* The summing loops by element type (TrtDtype's order). */
static const struct {
	void (*add)(double *acc, const char *val, int64_t n);
	void (*put)(char *dst, const int64_t *src, const double *acc, int64_t n, double scale);
} piece_sum[] = {
	[TRT_F32] = {piece_f32_add, piece_f32_put},
	[TRT_F64] = {piece_f64_add, piece_f64_put},
	[TRT_I32] = {piece_i32_add, piece_i32_put},
	[TRT_I64] = {piece_i64_add, piece_i64_put},
};

/* The most bytes of double sums a result chunk's rows take at once: the
 * pieces then go, in arrival order, straight into their row's sums, read
 * as they lie in the buffers they came in, with no sort by row
 * (examples/transe.tra at B = 32768: its six scatters 0.31-0.35 -> 0.27
 * s).  Only while the chunk's rows are at most ACC_ROWS_PER_ADD times its
 * pieces, so that clearing the sums costs no more than adding them. */
#define ACC_MAX ((double)(16 << 20))
#define ACC_ROWS_PER_ADD 4
#define AHEAD 8          /* adds ahead whose sums and piece are prefetched (transe's scatters 1.1x) */

/* The pieces added into o: those of one result row summed first, in
 * double and in arrival order, then added once, times scale, so a row
 * many indices name rounds once into its base, not once per piece.  A row
 * no piece names is left as it is. */
static void add_pieces(TrtRel *o, const int64_t *at, int dim, Adds *adds, double scale)
{
	const TrtType *out = &o->type;
	TrtDtype dt = out->dtype;
	size_t es = rt_dtype_size(dt);
	void (*add)(double *, const char *, int64_t) = piece_sum[dt].add;
	void (*put)(char *, const int64_t *, const double *, int64_t, double) = piece_sum[dt].put;
	double *acc = NULL;
	char *named = NULL;
	int64_t os[TRT_MAXDIM];
	Piece pc = {0};
	size_t mark = rt_pin_mark();
	sort_adds(adds->v, adds->n, (uint64_t)rt_nkeys(out), 0);
	for (int64_t i = 0, j; i < adds->n; i = j) {
		int64_t lin = adds->v[i].lin;
		for (j = i; j < adds->n && adds->v[j].lin == lin; j++)
			;
		rt_pin_release(mark);   /* a result chunk at a time */
		piece_free(&pc);
		pc = result_piece(out, dim, lin, os);
		int64_t rows, n = piece_len(out, dim, lin, &rows);
		char *base = (char *)rt_chunk_mut(o->chunks[at[lin]]);
		if ((double)rows * (double)n * sizeof *acc <= ACC_MAX && rows <= ACC_ROWS_PER_ADD * (j - i)) {
			acc = rt_realloc(acc, sizeof *acc * (size_t)(rows * n + 1));
			named = rt_realloc(named, (size_t)rows + 1);
			memset(acc, 0, sizeof *acc * (size_t)(rows * n));
			memset(named, 0, (size_t)rows);
			for (int64_t k = i; k < j; k++) {
				if (k + AHEAD < j) {
					const double *a = acc + adds->v[k + AHEAD].row * n;
					const char *v = adds->v[k + AHEAD].val;
					for (int64_t b = 0; b < n * (int64_t)sizeof *acc; b += 64)
						__builtin_prefetch((const char *)a + b, 1, 3);
					for (int64_t b = 0; b < n * (int64_t)es; b += 64)
						__builtin_prefetch(v + b, 0, 3);
				}
				add(acc + adds->v[k].row * n, adds->v[k].val, n);
				named[adds->v[k].row] = 1;
			}
			for (int64_t r = 0; r < rows; r++)
				if (named[r])
					put(base + r * os[dim] * (int64_t)es, pc.src, acc + r * n, n, scale);
			continue;
		}
		sort_adds(adds->v + i, j - i, (uint64_t)rows, 1);
		acc = rt_realloc(acc, sizeof *acc * (size_t)(n ? n : 1));
		for (int64_t k = i, m; k < j; k = m) {
			int64_t row = adds->v[k].row;
			for (int64_t q = 0; q < n; q++)
				acc[q] = 0;
			for (m = k; m < j && adds->v[m].row == row; m++)
				add(acc, adds->v[m].val, n);
			put(base + row * os[dim] * (int64_t)es, pc.src, acc, n, scale);
		}
	}
	rt_pin_release(mark);
	piece_free(&pc);
	free(acc);
	free(named);
}

/* The scatter's result before any row is added: the base's chunks, each
 * taken over when in place and no other relation shares it, else copied;
 * at[lin] is the tuple of linear key lin, or -1. */
static TrtRel *scatter_base(TrtRel *base, int in_place, const TrtType *out, TrtPlace p, int64_t *at)
{
	if (base->type.nkey != out->nkey || base->type.dtype != out->dtype || base->place.kind != p.kind)
		rt_bug("a scatter's base is not of its result's type and placement");
	TrtRel *o = in_place ? base : trt_rel_new(out, p);
	for (int64_t t = 0; t < base->n; t++) {
		Chunk *c = base->chunks[t];
		size_t mark = rt_pin_mark();
		if (!in_place || c->refs > 1) {
			Chunk *copy = rt_chunk_new(c->nbytes);
			memcpy(rt_chunk_mut(copy), rt_chunk_data(c), c->nbytes);
			if (in_place) {
				rt_chunk_unref(c);
				base->chunks[t] = copy;
			} else {
				rt_rel_push(o, base->keys + t * out->nkey, copy);
			}
		}
		rt_pin_release(mark);
		at[rt_key_linear(out, base->keys + t * out->nkey)] = t;
	}
	return o;
}

TrtRel *trt_scatter(const TrtRel *rows, const TrtRel *index, TrtRel *base, int in_place, double scale, int dim,
                    const TrtType *out, TrtPlace p, const char *iname, const char *tname)
{
	const TrtType *rt_ = &rows->type, *it = &index->type;
	int ni = it->nkey;
	size_t es = rt_dtype_size(out->dtype);

	char *bad = check_range(index, out->extent[dim], iname, tname, dim);
	if (bad)
		trt_fatal("%s", bad);   /* the forward gather checked the same values */

	/* the result: every tuple this rank holds under p, zero or the base's */
	int64_t nkeys = rt_nkeys(out);
	int64_t *at = rt_alloc(sizeof *at * (size_t)(nkeys ? nkeys : 1));     /* linear key -> tuple, or -1 */
	for (int64_t lin = 0; lin < nkeys; lin++)
		at[lin] = -1;
	TrtRel *o = base ? scatter_base(base, in_place, out, p, at) : trt_rel_new(out, p);
	int64_t key[TRT_MAXDIM];
	for (int64_t lin = 0; !base && rt_next_key_here(out, p, &lin, key); lin++) {
		size_t nb = rt_chunk_bytes(out, key), mark = rt_pin_mark();
		Chunk *c = rt_chunk_new(nb);
		memset(rt_chunk_mut(c), 0, nb);
		at[lin] = o->n;
		rt_rel_push(o, key, c);
		rt_pin_release(mark);
	}

	KeyIndex iix;
	rt_index_init(&iix);
	for (int64_t t = 0; t < index->n; t++)
		rt_index_add(&iix, index, t);
	/* rows everywhere: each rank adds what lands on it; else each piece
	 * goes to the ranks holding its result tuple.  A piece travels as its
	 * result key and row, then its values in the result piece's order.
	 * This rank's own pieces are added (own) where they lie in the rows'
	 * chunks when a piece lies there whole, in the result piece's order,
	 * and no budget may move a chunk (store.c): no copy, and no header to
	 * parse again (transe's scatters 1.4x); else their values wait in
	 * mine, each Add's val an offset there until mine is whole */
	int everywhere = rows->place.kind == TRT_ALL || rt.nranks == 1;
	Bufs send = bufs_new(), mine = bufs_new();
	int direct = rt.budget == 0;
	Adds own = {0};
	int64_t *buffered = NULL, nbuffered = 0, capbuffered = 0;
	/* within a rows chunk only the result key's block along dim varies:
	 * a piece's linear key is lin0 + its block times step, and each
	 * block's owner is found once a rows chunk (stamped with the chunk's
	 * number), not once a row (two divisions a key dim each) */
	int64_t step = key_step(out, dim), nblock = rt_frontier(out, dim), stamp = 0;
	int64_t *bstamp = rt_alloc(sizeof *bstamp * (size_t)nblock);
	int *bowner = rt_alloc(sizeof *bowner * (size_t)nblock);
	memset(bstamp, 0, sizeof *bstamp * (size_t)nblock);
	for (int64_t t = 0; t < rows->n; t++) {
		const int64_t *rkey = rows->keys + t * rt_->nkey;
		int64_t pos = rt_index_find(&iix, index, rkey);
		if (pos < 0)
			rt_bug("scattered rows without their index chunk");
		int64_t rs[TRT_MAXDIM];
		key_strides(rt_, rkey, rs);
		size_t mark = rt_pin_mark();   /* a rows chunk at a time */
		IxElems e = ix_elems(index, pos, rs);
		const char *src = rt_chunk_data(rows->chunks[t]);
		PieceCache pcache;
		memset(&pcache, 0, sizeof pcache);
		int64_t okey[TRT_MAXDIM], row, block = out->block[dim];
		table_key(out, dim, 0, rkey + ni, okey, &row);
		int64_t lin0 = rt_key_linear(out, okey);
		stamp++;
		for (int64_t q = 0; q < e.n; q++) {
			int64_t b = e.val[q] / block, lin = lin0 + b * step;
			row = e.val[q] - b * block;
			okey[dim] = b;
			if (bstamp[b] != stamp) {
				bstamp[b] = stamp;
				bowner[b] = trt_site(&p, out, okey);
			}
			int owner = bowner[b];
			/* the piece: rows side as dst offsets, the result's as src */
			const int64_t *os;
			const Piece *pcp = cached_piece(&pcache, out, okey, dim, nblock - 1, rt_, rkey, ni, &os);
			Piece pc = *pcp;
			for (int r = 0; r < rt.nranks; r++) {
				int to = p.kind == TRT_ALL ? r != rt.rank : r == owner && r != rt.rank;
				if (r == rt.rank ? at[lin] < 0 : everywhere || !to)
					continue;
				if (r == rt.rank && direct && !pc.dst) {
					add_one(&own, lin, row, src + e.base[q] * (int64_t)es);
					continue;
				}
				char *d;
				if (r == rt.rank) {
					if (nbuffered == capbuffered) {
						capbuffered = 2 * capbuffered + 256;
						buffered = rt_realloc(buffered, sizeof *buffered * (size_t)capbuffered);
					}
					buffered[nbuffered++] = own.n;
					add_one(&own, lin, row, (const char *)(intptr_t)mine.len[r]);
					d = bufs_add(&mine, r, (size_t)pc.n * es);
				} else {
					int64_t hdr[2] = {lin, row};
					memcpy(bufs_add(&send, r, sizeof hdr), hdr, sizeof hdr);
					d = bufs_add(&send, r, (size_t)pc.n * es);
				}
				if (!pc.dst)
					memcpy(d, src + e.base[q] * (int64_t)es, (size_t)pc.n * es);
				else
					for (int64_t k = 0; k < pc.n; k++)
						memcpy(d + k * (int64_t)es, src + (e.base[q] + pc.dst[k]) * (int64_t)es, es);
			}
		}
		cache_free(&pcache);
		ix_free(&e);
		rt_pin_release(mark);
	}
	for (int64_t i = 0; i < nbuffered; i++)
		own.v[buffered[i]].val = mine.p[rt.rank] + (intptr_t)own.v[buffered[i]].val;
	free(buffered);
	int64_t *roff = NULL;
	char *in = everywhere ? NULL : exchange(&send, &roff, "rows");
	/* every piece for this rank, by source rank, then added */
	Adds adds = {0};
	int64_t *plen = rt_alloc(sizeof *plen * (size_t)(nkeys ? nkeys : 1));
	for (int64_t lin = 0; lin < nkeys; lin++)
		plen[lin] = -1;
	for (int r = 0; r < rt.nranks; r++) {
		if (r == rt.rank)
			for (int64_t i = 0; i < own.n; i++)     /* in arrival order, as another rank's */
				add_one(&adds, own.v[i].lin, own.v[i].row, own.v[i].val);
		else if (!everywhere)
			parse_pieces(&adds, out, dim, in + roff[r], roff[r + 1] - roff[r], nkeys, at, plen);
	}
	free(plen);
	free(own.v);
	free(bstamp);
	free(bowner);
	add_pieces(o, at, dim, &adds, scale);
	free(adds.v);
	exchange_free(in, roff);
	bufs_free(&mine);
	bufs_free(&send);
	rt_index_free(&iix);
	free(at);
	free(bad);
	return o;
}
