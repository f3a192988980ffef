/*
 * read.c: trt_read, a tensor from its file into the chunks each rank owns.
 *
 * Every rank opens the file and checks the header itself (npy.c), the
 * ranks agree on the verdict (rt_agree), and each reads only the chunks it
 * owns, straight into them: their runs (the pieces of a chunk contiguous
 * in the file) sorted by offset, one preadv per stretch of the file they
 * cover (a gap of a few KiB between two runs read and dropped), so that
 * chunks side by side in a row of blocks cost one system call per row, not
 * one per chunk row.  Chunks whose dims
 * are a permutation of the key dims are read in file order and transposed.
 * A sparse relation comes from a scipy.sparse .npz (npz.c) or from a dense
 * .npy whose chunks are compressed as they are read.
 *
 * Under a memory budget (store.c) a band is read in pieces of an eighth of
 * the budget, each piece's chunks free to go to the spill file once read.
 *
 * The batching of runs (RtBatch) serves write.c's writes too.
 */
#define _GNU_SOURCE                    /* preadv, pwritev */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt.h"

/* ---- runs, and batches of them ---- */

/* Calls io(fd, buf, bytes, offset) for each run of block b, buf walking
 * through the dense sub-block in file order.  Returns 0 on the first
 * failure. */
int rt_each_run(const TrtType *t, const RtBlock *b, char *buf, int64_t data_offset,
                    int (*io)(void *, char *, size_t, int64_t), void *file)
{
	size_t es = rt_dtype_size(t->dtype);

	for (int64_t i = 0; i < b->nrun; i++) {
		int64_t off = rt_block_run(t, b, i);
		if (!io(file, buf, (size_t)b->run * es, data_offset + off * (int64_t)es))
			return 0;
		buf += (size_t)b->run * es;
	}
	return 1;
}

int rt_io_read(void *file, char *buf, size_t n, int64_t off)
{
	ssize_t k = rt_pread_full(*(int *)file, buf, n, off);
	if (k >= 0 && (size_t)k < n)
		errno = EIO;            /* the file shrank after the check */
	return k >= 0 && (size_t)k == n;
}


int64_t rt_read_calls;

/* Reads the file's bytes from off into the buffers of iov[0..n), or with
 * write set writes them there, retrying short transfers; returns 0 (errno
 * set) on failure. */
int rt_pv_full(int fd, struct iovec *iov, int n, int64_t off, int write)
{
	while (n > 0) {
		rt_read_calls += !write;
		ssize_t k = write ? pwritev(fd, iov, n, (off_t)off) : preadv(fd, iov, n, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return 0;
		if (k == 0) {
			errno = EIO;            /* the file shrank after the check, or the disk is full */
			return 0;
		}
		off += k;
		for (; n > 0 && (size_t)k >= iov->iov_len; iov++, n--)
			k -= (ssize_t)iov->iov_len;
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 1;
}

enum { MAX_CALL = 1 << 30 };     /* bytes in one preadv or pwritev at most */

void rt_batch_init(RtBatch *bt, int fd, int (*flush)(void *, struct iovec *, int, int64_t), void *ctx)
{
	long iov_max = sysconf(_SC_IOV_MAX);
	memset(bt, 0, sizeof *bt);
	bt->fd = fd;
	bt->ok = 1;
	bt->max = iov_max > 0 && iov_max < RT_MAX_IOV ? (int)iov_max : RT_MAX_IOV;
	bt->flush = flush;
	bt->ctx = ctx;
}

void rt_batch_flush(RtBatch *bt)
{
	if (bt->n && bt->ok)
		bt->ok = bt->flush ? bt->flush(bt->ctx, bt->iov, bt->n, bt->off)
		                   : rt_pv_full(bt->fd, bt->iov, bt->n, bt->off, 0);
	bt->n = 0;
}

/*
 * A read batch steps over a gap of at most GAP_MAX bytes between two runs by
 * reading it into sink, whose bytes nobody looks at: one preadv then covers
 * the runs on both sides.  A column block of a row-major file is such a
 * pattern, a run per row with the other ranks' columns between: X of
 * 169343 x 128 floats in two column blocks took 0.135-0.18 s a rank as
 * 169343 preadvs of 256 bytes, 0.02 s as 331 preadvs of the rows whole.
 * A system call costs about what copying a few KiB from the page cache
 * does, hence the bound.  Writes (a flush of their own) never skip.
 */
enum { GAP_MAX = 8192 };
static char sink[GAP_MAX];

/* Reads len bytes of the file at off into buf (or writes them from buf),
 * now or with the next ones. */
void rt_batch_add(RtBatch *bt, int64_t off, char *buf, size_t len)
{
	if (bt->n && !bt->flush && off > bt->end && off - bt->end <= GAP_MAX && bt->n + 1 < bt->max
	    && bt->end - bt->off < MAX_CALL) {
		bt->iov[bt->n].iov_base = sink;
		bt->iov[bt->n].iov_len = (size_t)(off - bt->end);
		bt->n++;
		bt->end = off;
	}
	if (bt->n && (off != bt->end || bt->n == bt->max || bt->end - bt->off >= MAX_CALL))
		rt_batch_flush(bt);
	if (!bt->n)
		bt->off = bt->end = off;
	bt->iov[bt->n].iov_base = buf;
	bt->iov[bt->n].iov_len = len;
	bt->n++;
	bt->end += (int64_t)len;
}


/* ---- trt_read ---- */

/* Reads chunk c, of block b whose chunk dims are not in key-dim order: in
 * file order, then transposed; returns 0 (errno set) on failure. */
static int read_transposed(int fd, int64_t data_offset, const TrtType *t, const RtBlock *b,
                           Chunk *c)
{
	char *tmp = rt_alloc(c->nbytes);
	int ok = rt_each_run(t, b, tmp, data_offset, rt_io_read, &fd);
	if (ok)
		rt_block_to_chunk(t, b, rt_chunk_mut(c), tmp);
	free(tmp);
	return ok;
}


/* An owned chunk of a band: its data, its run's bytes, and how far its runs
 * are (in elements) after the band's first owned chunk's. */
typedef struct Seg {
	char *data;
	size_t len;
	int64_t shift;
} Seg;

/* A band's runs in file order, row by row of the band (first: its first
 * chunk's block; seg: its ns chunks), into bt: the reads rt_read_rel
 * makes of it. */
static void batch_band(RtBatch *bt, const TrtType *t, const RtBlock *first, const Seg *seg, int64_t ns,
                       int64_t data_offset)
{
	size_t es = rt_dtype_size(t->dtype);
	for (int64_t i = 0; bt->ok && i < first->nrun; i++) {
		int64_t row = rt_block_run(t, first, i);
		for (int64_t k = 0; k < ns; k++)
			rt_batch_add(bt, data_offset + (row + seg[k].shift) * (int64_t)es,
			          seg[k].data + (size_t)i * seg[k].len, seg[k].len);
	}
}

static int owned(const TrtPlace *p, const TrtType *t, const int64_t *key)
{
	return p->kind != TRT_PART || trt_site(p, t, key) == rt.rank;
}

TrtRel *rt_read_rel(int fd, int64_t data_offset, const TrtType *t, TrtPlace p)
{
	TrtRel *r = trt_rel_new(t, p);
	int64_t nk = rt_nkeys(t), key[TRT_MAXDIM];
	size_t es = rt_dtype_size(t->dtype);
	RtBatch bt;
	RtBlock b, first;

	rt_batch_init(&bt, fd, NULL, NULL);
	if (nk > 0) {
		rt_key_from_linear(t, 0, key);
		rt_block_of(t, key, &b);
	}
	if (nk > 0 && !b.identity) {
		for (int64_t lin = 0; bt.ok && lin < nk; lin++) {
			rt_key_from_linear(t, lin, key);
			if (!owned(&p, t, key))
				continue;
			size_t mark = rt_pin_mark();
			Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
			rt_rel_push(r, key, c);
			rt_block_of(t, key, &b);
			bt.ok = read_transposed(fd, data_offset, t, &b, c);
			rt_pin_release(mark);
		}
	} else if (nk > 0) {
		/* A band is the chunks whose keys differ only along dim d0, the
		 * last one split in blocks (the dims after it are whole): their
		 * runs take turns in the file, row by row of the band, and the
		 * band is read so, in file order. */
		int d0 = b.d0;
		int64_t f = t->nkey ? rt_frontier(t, d0) : 1;
		Seg *seg = rt_alloc(sizeof *seg * (size_t)f);
		for (int64_t band = 0; bt.ok && band < nk / f; band++) {
			int64_t ns = 0;
			size_t mark = rt_pin_mark();
			double bytes = 0;
			for (int64_t s = 0; s < f; s++) {
				rt_key_from_linear(t, band * f + s, key);
				if (!owned(&p, t, key))
					continue;
				size_t nb = rt_chunk_bytes(t, key);
				if (rt.budget > 0 && ns && bytes + (double)nb > rt.budget / 8) {
					/* under a budget, pieces of a band of an eighth of it */
					batch_band(&bt, t, &first, seg, ns, data_offset);
					rt_batch_flush(&bt);
					rt_pin_release(mark);
					ns = 0;
					bytes = 0;
				}
				bytes += (double)nb;
				Chunk *c = rt_chunk_new(nb);
				rt_rel_push(r, key, c);
				rt_block_of(t, key, &b);
				if (!ns)
					first = b;
				seg[ns++] = (Seg){ rt_chunk_mut(c), (size_t)b.run * es,
				                   t->nkey ? (b.start[d0] - first.start[d0]) * b.tstride[d0] : 0 };
			}
			if (ns)
				batch_band(&bt, t, &first, seg, ns, data_offset);
			if (rt.budget > 0) {
				/* its reads done, its chunks may go */
				rt_batch_flush(&bt);
				rt_pin_release(mark);
			}
		}
		free(seg);
		rt_batch_flush(&bt);
	}
	if (!bt.ok) {
		int e = errno;
		trt_free(r);
		errno = e;
		return NULL;
	}
	return r;
}

TrtRel *trt_read(int tensor, const TrtType *t, TrtPlace p)
{
	const TrtTensor *x = rt_tensor_of(tensor, t);
	const char *path = rt.paths[tensor];
	char msg[1024];
	NpyHeader h;
	int fd = -1;

	if (p.kind == TRT_ANY)
		rt_bug("read of %s into a TRT_ANY relation", x->name);
	if (!path)
		rt_agree(rt_no_path(x, msg, sizeof msg));
	if (t->sparse && rt_npz_wanted(path))
		return rt_npz_read(x, path, t, p);
	fd = rt_npy_open(x, path, &h, msg, sizeof msg);
	rt_agree(fd < 0 ? msg : NULL);

	/* a sparse relation from a dense file: its chunks read dense, then
	 * compressed one by one */
	TrtType dense = *t;
	dense.sparse = 0;
	const char *err = NULL;
	int64_t t0 = rt_span_begin();
	TrtRel *r = rt_read_rel(fd, h.data_offset, &dense, p);
	if (t0)
		rt_trace_span(RT_SPAN_READ, t0, -1, rt_trace_bytes(r), tensor, NULL);
	if (!r) {
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(errno));
		err = msg;
	}
	close(fd);
	rt_agree(err);
	return t->sparse ? rt_sparse_of(r, t) : r;
}
