/*
 * comm.c: the two communication ops, trt_bcast and trt_shuffle, and the
 * point-to-point helpers trt_write uses.
 *
 * Wire format: a tuple is its key (nkey int64s) followed by its chunk's
 * bytes; the chunk's size follows from the key, so nothing else is sent.
 * One packed buffer goes to each destination.
 *
 * Large messages: MPI counts and displacements are ints.  Each exchange picks
 * a unit of U bytes (a power of two, the same on every rank) small enough that
 * every count, measured in units, fits in rt_msg_limit, and sends a contiguous
 * datatype of U bytes; each destination's segment is padded to a whole number
 * of units.  U is 1 unless a rank moves more than 2 GiB at once, so the
 * padding is never more than a unit per peer.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

int64_t rt_msg_limit = INT_MAX;

static size_t tuple_bytes(const TrtType *t, const int64_t *key)
{
	return sizeof(int64_t) * (size_t)t->nkey + rt_chunk_bytes(t, key);
}

static char *pack_tuple(char *at, const TrtRel *r, int64_t i)
{
	const int64_t *key = r->keys + i * r->type.nkey;
	size_t kb = sizeof(int64_t) * (size_t)r->type.nkey;
	size_t cb = rt_chunk_bytes(&r->type, key);

	memcpy(at, key, kb);
	memcpy(at + kb, rt_chunk_data(r->chunks[i]), cb);
	return at + kb + cb;
}

/* Appends to out the tuples packed in buf[0..n). */
static void unpack(TrtRel *out, const char *buf, size_t n)
{
	const TrtType *t = &out->type;
	size_t kb = sizeof(int64_t) * (size_t)t->nkey;
	int64_t key[TRT_MAXDIM];
	const char *at = buf, *end = buf + n;

	while (at < end) {
		memcpy(key, at, kb);
		size_t cb = rt_chunk_bytes(t, key);
		if ((size_t)(end - at) < kb + cb)
			rt_bug("short tuple in a received message");
		Chunk *c = rt_chunk_new(cb);
		memcpy(rt_chunk_data(c), at + kb, cb);
		rt_rel_push(out, key, c);
		at += kb + cb;
	}
}

static int64_t units(int64_t bytes, int64_t unit)
{
	return (bytes + unit - 1) / unit;
}

/* The smallest power of two U with sum(ceil(count[i] / U)) <= rt_msg_limit.
 * Once U covers the largest count every segment is one unit, so the limit
 * must exceed the rank count (INT_MAX does). */
static int64_t pick_unit(const int64_t *count, int n)
{
	int64_t most = 0;

	for (int i = 0; i < n; i++)
		if (count[i] > most)
			most = count[i];
	for (int64_t u = 1;; u *= 2) {
		int64_t sum = 0;
		for (int i = 0; i < n; i++)
			sum += units(count[i], u);
		if (sum <= rt_msg_limit)
			return u;
		if (u >= most)
			rt_bug("%d messages cannot fit a limit of %lld units", n, (long long)rt_msg_limit);
	}
}

static MPI_Datatype unit_type(int64_t unit)
{
	MPI_Datatype t = MPI_BYTE;

	if (unit > 1) {
		MPI_Type_contiguous((int)unit, MPI_BYTE, &t);
		MPI_Type_commit(&t);
	}
	return t;
}

static void free_unit_type(MPI_Datatype t)
{
	if (t != MPI_BYTE)
		MPI_Type_free(&t);
}

/* Point to point, in pieces that fit an int count; the receiver posts the
 * same pieces, and MPI keeps messages of one tag and peer in order. */
void rt_send_bytes(const void *buf, size_t n, int dest, int tag)
{
	const char *p = buf;

	rt_count_sent((double)n);
	do {
		size_t piece = n < (size_t)rt_msg_limit ? n : (size_t)rt_msg_limit;
		MPI_Send(p, (int)piece, MPI_BYTE, dest, tag, MPI_COMM_WORLD);
		p += piece;
		n -= piece;
	} while (n);
}

void rt_recv_bytes(void *buf, size_t n, int src, int tag)
{
	char *p = buf;

	do {
		size_t piece = n < (size_t)rt_msg_limit ? n : (size_t)rt_msg_limit;
		MPI_Recv(p, (int)piece, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		p += piece;
		n -= piece;
	} while (n);
}

/* A new relation holding the same tuples as r, sharing its chunks. */
static TrtRel *share(const TrtRel *r, TrtPlace p)
{
	TrtRel *out = trt_rel_new(&r->type, p);

	for (int64_t i = 0; i < r->n; i++)
		rt_rel_push(out, r->keys + i * r->type.nkey, rt_chunk_ref(r->chunks[i]));
	return out;
}

/* Every rank ends with every tuple of r.  From TRT_ANY, a key held by several
 * ranks arrives once per holder: duplicates are kept, in rank order, for a
 * later trt_agg to combine. */
TrtRel *trt_bcast(const TrtRel *r)
{
	TrtPlace all = { .kind = TRT_ALL };
	int nr = rt.nranks, me = rt.rank;

	if (r->place.kind == TRT_ALL || nr == 1) {
		TrtRel *out = share(r, all);
		rt_rel_sort(out);
		return out;
	}

	int64_t mine = 0;
	for (int64_t i = 0; i < r->n; i++)
		mine += (int64_t)tuple_bytes(&r->type, r->keys + i * r->type.nkey);
	int64_t *count = rt_alloc(sizeof *count * (size_t)nr);
	MPI_Allgather(&mine, 1, MPI_INT64_T, count, 1, MPI_INT64_T, MPI_COMM_WORLD);

	/* Every rank computes the same unit from the same counts. */
	int64_t unit = pick_unit(count, nr);
	int *ucount = rt_alloc(sizeof *ucount * (size_t)nr);
	int *udispl = rt_alloc(sizeof *udispl * (size_t)nr);
	int64_t total = 0;
	for (int s = 0; s < nr; s++) {
		ucount[s] = (int)units(count[s], unit);
		udispl[s] = (int)total;
		total += ucount[s];
	}
	char *buf = rt_alloc((size_t)(total * unit));
	char *at = buf + (size_t)udispl[me] * (size_t)unit;
	for (int64_t i = 0; i < r->n; i++)
		at = pack_tuple(at, r, i);

	MPI_Datatype ut = unit_type(unit);
	MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, ucount, udispl, ut,
	               MPI_COMM_WORLD);
	free_unit_type(ut);
	rt_count_sent((double)mine * (nr - 1));

	/* Our own tuples are shared, not copied back out of the buffer. */
	TrtRel *out = trt_rel_new(&r->type, all);
	for (int s = 0; s < nr; s++) {
		if (s == me)
			for (int64_t i = 0; i < r->n; i++)
				rt_rel_push(out, r->keys + i * r->type.nkey, rt_chunk_ref(r->chunks[i]));
		else
			unpack(out, buf + (size_t)udispl[s] * (size_t)unit, (size_t)count[s]);
	}
	free(buf);
	free(count);
	free(ucount);
	free(udispl);
	rt_rel_sort(out);
	return out;
}

/* Every tuple goes to its site under p.  Tuples that stay keep their chunk. */
TrtRel *trt_shuffle(const TrtRel *r, TrtPlace p)
{
	const TrtType *t = &r->type;
	int nr = rt.nranks, me = rt.rank;

	if (p.kind != TRT_PART)
		rt_bug("shuffle to a placement other than TRT_PART");
	for (int i = 0; i < p.ndims; i++)
		if (p.dims[i] < 0 || p.dims[i] >= t->nkey)
			rt_bug("shuffle on key dim %d of %d", p.dims[i], t->nkey);

	/* From TRT_ALL every rank already has its share: keep it, send nothing. */
	if (r->place.kind == TRT_ALL) {
		TrtRel *out = trt_rel_new(t, p);
		for (int64_t i = 0; i < r->n; i++) {
			const int64_t *key = r->keys + i * t->nkey;
			if (trt_site(&p, t, key) == me)
				rt_rel_push(out, key, rt_chunk_ref(r->chunks[i]));
		}
		rt_rel_sort(out);
		return out;
	}

	int *site = rt_alloc(sizeof *site * (size_t)(r->n + 1));
	int64_t *scount = rt_alloc(sizeof *scount * (size_t)nr);
	int64_t *rcount = rt_alloc(sizeof *rcount * (size_t)nr);
	memset(scount, 0, sizeof *scount * (size_t)nr);
	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * t->nkey;
		site[i] = trt_site(&p, t, key);
		if (site[i] != me)
			scount[site[i]] += (int64_t)tuple_bytes(t, key);
	}
	MPI_Alltoall(scount, 1, MPI_INT64_T, rcount, 1, MPI_INT64_T, MPI_COMM_WORLD);

	/* The unit must fit both what we send and what we receive, on every rank. */
	int64_t su = pick_unit(scount, nr), ru = pick_unit(rcount, nr);
	int64_t unit = su > ru ? su : ru;
	MPI_Allreduce(MPI_IN_PLACE, &unit, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);

	int *sc = rt_alloc(sizeof *sc * (size_t)nr), *sd = rt_alloc(sizeof *sd * (size_t)nr);
	int *rc = rt_alloc(sizeof *rc * (size_t)nr), *rd = rt_alloc(sizeof *rd * (size_t)nr);
	int64_t stotal = 0, rtotal = 0;
	double sent = 0;
	for (int d = 0; d < nr; d++) {
		sc[d] = (int)units(scount[d], unit);
		sd[d] = (int)stotal;
		stotal += sc[d];
		rc[d] = (int)units(rcount[d], unit);
		rd[d] = (int)rtotal;
		rtotal += rc[d];
		sent += (double)scount[d];
	}

	char *sbuf = rt_alloc((size_t)(stotal * unit));
	char *rbuf = rt_alloc((size_t)(rtotal * unit));
	char **at = rt_alloc(sizeof *at * (size_t)nr);
	for (int d = 0; d < nr; d++)
		at[d] = sbuf + (size_t)sd[d] * (size_t)unit;
	for (int64_t i = 0; i < r->n; i++)
		if (site[i] != me)
			at[site[i]] = pack_tuple(at[site[i]], r, i);

	MPI_Datatype ut = unit_type(unit);
	MPI_Alltoallv(sbuf, sc, sd, ut, rbuf, rc, rd, ut, MPI_COMM_WORLD);
	free_unit_type(ut);
	rt_count_sent(sent);
	free(sbuf);

	TrtRel *out = trt_rel_new(t, p);
	for (int s = 0; s < nr; s++) {
		if (s == me) {
			for (int64_t i = 0; i < r->n; i++)
				if (site[i] == me)
					rt_rel_push(out, r->keys + i * t->nkey, rt_chunk_ref(r->chunks[i]));
		} else {
			unpack(out, rbuf + (size_t)rd[s] * (size_t)unit, (size_t)rcount[s]);
		}
	}
	free(rbuf);
	free(at);
	free(site);
	free(scount);
	free(rcount);
	free(sc);
	free(sd);
	free(rc);
	free(rd);
	rt_rel_sort(out);
	return out;
}
