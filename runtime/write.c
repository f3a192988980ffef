/*
 * write.c: trt_write, a relation into its tensor's file, by rank 0.
 *
 * Rank 0 writes, slab by slab in file order (write_slabs: the other ranks
 * send it their chunks' portions of each slab), or chunk by chunk in key
 * order when the chunk dims are not in key order or the relation is sparse
 * (receiving the chunks it does not hold), to a temporary file beside the
 * destination (.NAME.XXXXXX), then fsyncs it, renames it and fsyncs the
 * directory (rt_rename_durable).  On any failure the temporary is
 * removed, so an output path holds either a complete file or what it held
 * before.  A file of at most OUT_BUFFERED bytes goes through the page
 * cache, its writeback started behind the writes every OUT_STAGE bytes
 * (sync_file_range), so that the fsync finds little left to do; a larger
 * one, while its writes follow each other in the file, through an aligned
 * buffer with O_DIRECT (Out, below), so that it does not fill the page
 * cache with dirty pages, each of them memory new to a virtual machine
 * (bench/README.md, "Writes" and "Whole-process parity").
 *
 * Under a memory budget (store.c) a write's slabs and direct-write stages
 * are an eighth of it each, rank 0 copying its own portions of a slab too
 * (the slab then holds the slab's bytes, not the chunks it meets).
 *
 * A matrix goes to a csr .npz when the path says so (npz.c); written to
 * a .npy, a sparse relation's chunks are expanded one at a time, the
 * absent ones as zeros.
 */
#define _GNU_SOURCE                    /* O_DIRECT, sync_file_range; mkstemp, posix_memalign */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt.h"

enum { TAG_WRITE = 7001 };

/* ---- the bytes ---- */

/*
 * Out: rank 0's writes of one file.  A file of at most OUT_BUFFERED bytes
 * (the .npy's data and a block for its header) is written through the page
 * cache, and each time the writes have gone OUT_STAGE bytes past where
 * writeback was last started, the disk is asked to start on them
 * (out_behind; a hint, the fsync that follows is what makes the file
 * last): the 64 MB C of a 4000^3 f32 product 0.151-0.196 s (median 0.175)
 * written, fsynced and renamed that way against 0.284-0.373 (0.314) direct
 * and 0.174-0.535 (0.215) buffered without writeback begun behind; at 256
 * MiB 0.47-0.60 against 0.77-0.92 direct, at 512 MiB 0.85-1.38 against
 * 1.01-1.31, at 1 GiB no steadier (2.2-4.9 s against 2.6-3.4), and more
 * dirty pages than a page cache should hold.  A larger file is opened
 * direct (out_open, at offset 0): the writes that follow each other from
 * there are copied into an aligned
 * stage and written a stage at a time with O_DIRECT, by a writer thread
 * while the next stage fills, so that receiving and copying overlap the
 * disk; the first write that does not follow (or a file system refusing
 * O_DIRECT) ends it: the stage's whole blocks go direct, O_DIRECT is
 * cleared, and the rest and every later write go through the page cache.
 * Each byte is written once, so no page is written both ways.  The writer
 * makes no MPI call.  The stages are a chunk (memory the ops freed, its
 * pages faulted in already, as the chunk cache gives it): two of
 * OUT_STAGE bytes, or one holding the whole file when it fits in one
 * (out_stage_bytes; optimizer/cost.c's write_stage_bytes says the same).
 */
enum { OUT_BLOCK = 4096, OUT_STAGE = 8 << 20, OUT_BUFFERED = 512 << 20 };

/* The bytes of one stage for data bytes of .npy data (a header is less
 * than a block), and in *nstage how many. */
static size_t out_stage_bytes(double data, int *nstage)
{
	double one = (ceil(data / OUT_BLOCK) + 1) * OUT_BLOCK, most = OUT_STAGE;
	if (rt.budget > 0 && rt.budget / 8 < most)     /* under a memory budget, an eighth of it */
		most = fmax(4 * OUT_BLOCK, floor(rt.budget / 8 / OUT_BLOCK) * OUT_BLOCK);
	*nstage = one > most ? 2 : 1;
	return one > most ? (size_t)most : (size_t)one;
}

typedef struct Out {
	int fd, direct;
	int64_t behind;         /* buffered: writeback started below this; -1: not asked */
	Chunk *stages;
	char *stage[2];         /* stage[cur] holds the file's bytes [at, at + n) */
	size_t len;             /* a stage's bytes */
	int cur;
	size_t n;
	int64_t at;
	/* the writer: writes wlen bytes of stage[1 - cur] at woff while busy */
	int threaded;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int busy, quit, err;    /* err: the errno of its first failure */
	size_t wlen;
	int64_t woff;
} Out;

static void *out_writer(void *arg)
{
	Out *o = arg;
	pthread_mutex_lock(&o->mu);
	for (;;) {
		while (!o->busy && !o->quit)
			pthread_cond_wait(&o->cv, &o->mu);
		if (!o->busy)
			break;
		const char *buf = o->stage[1 - o->cur];
		size_t len = o->wlen;
		int64_t off = o->woff;
		pthread_mutex_unlock(&o->mu);
		int ok = rt_pwrite_full(o->fd, buf, len, off), e = errno;
		if (!ok && e == EINVAL) {
			/* O_DIRECT refused after all: this and the rest buffered */
			int fl = fcntl(o->fd, F_GETFL);
			if (fl >= 0 && (fl & O_DIRECT) && fcntl(o->fd, F_SETFL, fl & ~O_DIRECT) == 0) {
				ok = rt_pwrite_full(o->fd, buf, len, off);
				e = errno;
			}
		}
		pthread_mutex_lock(&o->mu);
		if (!ok && !o->err)
			o->err = e ? e : EIO;
		o->busy = 0;
		pthread_cond_broadcast(&o->cv);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

/* Waits for the writer to be idle; 0 (errno set) when a write failed. */
static int out_wait(Out *o)
{
	pthread_mutex_lock(&o->mu);
	while (o->busy)
		pthread_cond_wait(&o->cv, &o->mu);
	int e = o->err;
	pthread_mutex_unlock(&o->mu);
	errno = e;
	return !e;
}

/* Out for fd, for a file of data bytes after its header: when mine (rank
 * 0 writes it) through the page cache with writeback behind the writes
 * if it is at most OUT_BUFFERED bytes, else direct if the file system
 * lets it. */
static Out out_open(int fd, int mine, double data)
{
	Out o = { .fd = fd, .behind = -1 };
	if (mine && data + OUT_BLOCK <= OUT_BUFFERED) {
		o.behind = 0;
		return o;
	}
	int fl = fcntl(fd, F_GETFL);
	if (mine && fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		int nstage;
		o.len = out_stage_bytes(data, &nstage);
		size_t mark = rt_pin_mark();
		o.stages = rt_chunk_new((size_t)nstage * o.len + OUT_BLOCK);
		uintptr_t p = (uintptr_t)rt_chunk_hold(o.stages, 1);    /* until out_undirect */
		rt_pin_release(mark);
		o.stage[0] = (char *)((p + OUT_BLOCK - 1) / OUT_BLOCK * OUT_BLOCK);
		o.stage[1] = nstage == 2 ? o.stage[0] + o.len : NULL;
		o.direct = 1;
	}
	return o;
}

/* Ends direct writing: the full stages written, the last one's whole
 * blocks direct, the rest through the page cache; 0 on failure (errno
 * set). */
static int out_undirect(Out *o)
{
	if (!o->direct)
		return 1;
	o->direct = 0;
	int ok = 1;
	if (o->threaded) {
		pthread_mutex_lock(&o->mu);
		o->quit = 1;
		pthread_cond_broadcast(&o->cv);
		pthread_mutex_unlock(&o->mu);
		pthread_join(o->th, NULL);
		pthread_mutex_destroy(&o->mu);
		pthread_cond_destroy(&o->cv);
		o->threaded = 0;
		if (o->err) {
			errno = o->err;
			ok = 0;
		}
	}
	const char *stage = o->stage[o->cur];
	size_t whole = o->n / OUT_BLOCK * OUT_BLOCK;
	if (ok && whole) {
		ok = rt_pwrite_full(o->fd, stage, whole, o->at);
		if (!ok && errno == EINVAL) {
			whole = 0;      /* O_DIRECT refused after all: all of it below */
			ok = 1;
		}
	}
	int fl = ok ? fcntl(o->fd, F_GETFL) : -1;
	if (ok && (fl < 0 || fcntl(o->fd, F_SETFL, fl & ~O_DIRECT) < 0))
		ok = 0;
	else if (ok && whole < o->n)
		ok = rt_pwrite_full(o->fd, stage + whole, o->n - whole, o->at + (int64_t)whole);
	rt_chunk_unhold(o->stages);
	rt_chunk_unref(o->stages);
	o->stages = NULL;
	o->stage[0] = o->stage[1] = NULL;
	return ok;
}

/* After a buffered write that ended at end: writeback started for what
 * lies between where it was last started and end, once that is OUT_STAGE
 * bytes.  A hint only: what it fails to start, the fsync writes. */
static void out_behind(Out *o, int64_t end)
{
#ifdef SYNC_FILE_RANGE_WRITE
	if (o->behind >= 0 && end - o->behind >= OUT_STAGE) {
		sync_file_range(o->fd, o->behind, end - o->behind, SYNC_FILE_RANGE_WRITE);
		o->behind = end;
	}
#else
	(void)o;
	(void)end;
#endif
}

/* Hands the full stage to the writer and takes the other (or with one
 * stage, or no thread, writes it here); 0 on failure (errno set). */
static int out_flip(Out *o)
{
	if (!o->threaded && o->stage[1]) {
		pthread_mutex_init(&o->mu, NULL);
		pthread_cond_init(&o->cv, NULL);
		o->threaded = pthread_create(&o->th, NULL, out_writer, o) == 0;
		if (!o->threaded) {
			pthread_mutex_destroy(&o->mu);
			pthread_cond_destroy(&o->cv);
			o->stage[1] = NULL;
		}
	}
	if (!o->stage[1]) {
		if (!rt_pwrite_full(o->fd, o->stage[0], o->n, o->at))
			return 0;
		o->at += (int64_t)o->n;
		o->n = 0;
		return 1;
	}
	if (!out_wait(o))
		return 0;
	pthread_mutex_lock(&o->mu);
	o->cur = 1 - o->cur;
	o->wlen = o->n;
	o->woff = o->at;
	o->busy = 1;
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
	o->at += (int64_t)o->n;
	o->n = 0;
	return 1;
}

/* Writes n bytes of buf at off; 0 on failure (errno set). */
static int out_write(Out *o, const char *buf, size_t n, int64_t off)
{
	if (o->direct && off != o->at + (int64_t)o->n && !out_undirect(o))
		return 0;
	if (!o->direct) {
		if (!rt_pwrite_full(o->fd, buf, n, off))
			return 0;
		out_behind(o, off + (int64_t)n);
		return 1;
	}
	while (n > 0) {
		size_t k = o->len - o->n < n ? o->len - o->n : n;
		memcpy(o->stage[o->cur] + o->n, buf, k);
		o->n += k;
		buf += k;
		n -= k;
		if (o->n == o->len && !out_flip(o))
			return 0;
	}
	return 1;
}

static int io_write(void *file, char *buf, size_t n, int64_t off)
{
	return out_write(file, buf, n, off);
}

/* An RtBatch's writes through o: one out_write each while it is direct,
 * one pwritev otherwise. */
static int out_flush(void *ctx, struct iovec *iov, int n, int64_t off)
{
	Out *o = ctx;

	if (!o->direct) {
		int64_t end = off;
		for (int i = 0; i < n; i++)
			end += (int64_t)iov[i].iov_len;
		if (!rt_pv_full(o->fd, iov, n, off, 1))
			return 0;
		out_behind(o, end);
		return 1;
	}
	for (int i = 0; i < n; off += (int64_t)iov[i].iov_len, i++)
		if (!out_write(o, iov[i].iov_base, iov[i].iov_len, off))
			return 0;
	return 1;
}

/* Writes chunk data (nbytes long) of key; returns 0 (errno set) on failure. */
static int write_chunk(Out *out, int64_t data_offset, const TrtType *t, const int64_t *key,
                       const void *data, size_t nbytes)
{
	RtBlock b;
	rt_block_of(t, key, &b);
	if (b.identity)
		return rt_each_run(t, &b, (char *)data, data_offset, io_write, out);

	size_t es = rt_dtype_size(t->dtype);
	int64_t cstride[TRT_MAXDIM], st[TRT_MAXDIM], s = 1;
	for (int k = t->nchunk - 1; k >= 0; k--) {
		cstride[k] = s;
		s *= b.cnt[t->chunkdim[k]];
	}
	for (int d = 0; d < t->nkey; d++)
		st[d] = 0;
	for (int k = 0; k < t->nchunk; k++)
		st[t->chunkdim[k]] = cstride[k];
	char *tmp = rt_alloc(nbytes);
	rt_gather(tmp, data, t->nkey, b.cnt, st, es);
	int ok = rt_each_run(t, &b, tmp, data_offset, io_write, out);
	free(tmp);
	return ok;
}


/* ---- trt_write ---- */

/* A broken tuple set would make rank 0 wait for a chunk nobody sends, so
 * each rank checks its own before any message moves.  A sparse relation
 * lacks the tuples of its zero blocks. */
static void check_complete(const TrtRel *r, const TrtTensor *x)
{
	const TrtType *t = &r->type;
	int64_t owned = 0, nk = rt_nkeys(t), key[TRT_MAXDIM];

	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *k = r->keys + i * t->nkey;
		rt_check_key(t, k);
		if (r->place.kind == TRT_PART && trt_site(&r->place, t, k) != rt.rank)
			rt_bug("writing %s: a tuple on rank %d belongs to rank %d", x->name,
			       rt.rank, trt_site(&r->place, t, k));
		if (i && rt_key_cmp(k - t->nkey, k, t->nkey) >= 0)
			rt_bug("writing %s: duplicate or unsorted keys", x->name);
	}
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		owned += r->place.kind == TRT_ALL || trt_site(&r->place, t, key) == rt.rank;
	}
	if (t->sparse ? r->n > owned : owned != r->n)
		rt_bug("writing %s: rank %d holds %lld of its %lld chunks", x->name, rt.rank,
		       (long long)r->n, (long long)owned);
}

/* The temporary files this rank has made and not yet renamed or removed,
 * for rt_remove_temps to remove when a signal ends the run (mpirun's
 * SIGTERM when another rank fails, ^C, the file-size limit). */
enum { MAX_TEMPS = 4 };
static char temps[MAX_TEMPS][4096];
static volatile sig_atomic_t temp_live[MAX_TEMPS];

static void temp_forget(const char *name)
{
	for (int i = 0; i < MAX_TEMPS; i++)
		if (temp_live[i] && !strcmp(temps[i], name))
			temp_live[i] = 0;
}

void rt_remove_temps(void)
{
	for (int i = 0; i < MAX_TEMPS; i++)
		if (temp_live[i]) {
			unlink(temps[i]);
			temp_live[i] = 0;
		}
}

void rt_remove_temp(const char *tmp)
{
	if (!tmp)
		return;         /* a device's: nothing made */
	unlink(tmp);
	temp_forget(tmp);
}

/* The temporary file beside path: <dir>/.<base>.XXXXXX.  A path that
 * names a character device (/dev/null) is opened and written into, with
 * *tmpname NULL: renamed over, the device would be replaced by a regular
 * file, for every process of the machine (root may). */
int rt_make_temp(const char *path, char **tmpname)
{
	struct stat st;
	if (stat(path, &st) == 0 && S_ISCHR(st.st_mode)) {
		*tmpname = NULL;
		return open(path, O_WRONLY | O_CLOEXEC);
	}
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
	char *name = rt_alloc(strlen(path) + 16);

	memcpy(name, path, dirlen);
	sprintf(name + dirlen, ".%s.XXXXXX", path + dirlen);
	int fd = mkstemp(name);
	if (fd >= 0) {
		/* mkstemp makes 0600; give the file the mode open(2) would. */
		mode_t mask = umask(0);
		umask(mask);
		fchmod(fd, 0666 & ~mask);
		for (int i = 0; i < MAX_TEMPS; i++)
			if (!temp_live[i] && strlen(name) < sizeof temps[i]) {
				strcpy(temps[i], name);
				temp_live[i] = 1;
				break;
			}
	}
	*tmpname = name;
	return fd;
}

/* Renames tmp onto path and makes the rename last: the directory is
 * fsynced too (as PostgreSQL's durable_rename does), so that a crash after
 * the program ends cannot bring back what path held before.  A directory
 * that cannot be opened or fsynced (EINVAL, EBADF: the file system does
 * not do it) leaves that to the file system.  0, or -1 with errno set. */
int rt_rename_durable(const char *tmp, const char *path)
{
	if (!tmp)
		return 0;       /* a device, written into (rt_make_temp) */
	if (rename(tmp, path) < 0)
		return -1;
	temp_forget(tmp);
	const char *slash = strrchr(path, '/');
	size_t len = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
	char *dir = rt_alloc(len + 1);
	memcpy(dir, slash ? path : ".", len);
	dir[len] = '\0';
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	free(dir);
	if (fd < 0)
		return 0;
	int e = fsync(fd) < 0 && errno != EINVAL && errno != EBADF ? errno : 0;
	close(fd);
	errno = e;
	return e ? -1 : 0;
}

int rt_ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && !strcmp(s + n - k, tail);
}

static int write_rel(Out *out, int64_t data_offset, const TrtRel *r);

/* Writes r as tensor x's .npy into fd (rank 0's; collective): 0, or on
 * rank 0 the first errno. */
static int write_npy(int fd, const TrtTensor *x, const TrtRel *r)
{
	char head[1024];
	int e = 0;

	size_t hlen = rt_npy_header(x, head, sizeof head);
	if (!hlen)
		rt_bug("npy header of %s does not fit", x->name);
	double data = (double)rt_dtype_size(x->dtype);
	for (int d = 0; d < x->rank; d++)
		data *= (double)x->shape[d];
	Out out = out_open(fd, rt.rank == 0, data);
	if (rt.rank == 0 && !out_write(&out, head, hlen, 0))
		e = errno;
	int e2 = write_rel(&out, (int64_t)hlen, r);
	if (rt.rank == 0 && !out_undirect(&out) && !e && !e2)
		e = errno ? errno : EIO;
	return e ? e : e2;
}

void trt_write(int tensor, const TrtRel *r)
{
	const TrtType *t = &r->type;
	const TrtTensor *x = rt_tensor_of(tensor, t);
	const char *path = rt.paths[tensor];
	char msg[1024];
	const char *err = NULL;
	char *tmpname = NULL;
	int fd = -1;

	if (r->place.kind == TRT_ANY)
		rt_bug("write of %s from a TRT_ANY relation", x->name);
	if (!path)
		rt_agree(rt_no_path(x, msg, sizeof msg));
	check_complete(r, x);

	if (rt.rank == 0) {
		fd = rt_make_temp(path, &tmpname);
		if (fd < 0) {
			rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(errno));
			err = msg;
		}
	}
	rt_agree(err);

	/* a matrix to a .npz is a csr .npz, however the plan stored it (its
	 * zeros dropped); anything else is a dense .npy */
	int64_t t0 = rt_span_begin();   /* rank 0's span: the file's bytes (as dense) */
	int e = t->nkey == 2 && rt_ends_with(path, ".npz") ? rt_npz_write(fd, r) : write_npy(fd, x, r);
	if (rt.rank != 0) {
		rt_agree(NULL);
		return;
	}
	if (e) {
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(e));
		err = msg;
	}
	if (!err && fsync(fd) < 0 && errno != EINVAL) {        /* EINVAL: a device, no syncing */
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(errno));
		err = msg;
	}
	if (close(fd) < 0 && !err) {
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(errno));
		err = msg;
	}
	if (!err && rt_rename_durable(tmpname, path) < 0) {
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(errno));
		err = msg;
	}
	if (t0) {
		double data = (double)rt_dtype_size(x->dtype);
		for (int d = 0; d < x->rank; d++)
			data *= (double)x->shape[d];
		rt_trace_span(RT_SPAN_WRITE, t0, -1, data, tensor, NULL);
	}
	if (err)
		rt_remove_temp(tmpname);
	free(tmpname);
	rt_agree(err);
}

/* The dense data of key's chunk in r, whose tuples before *at are behind
 * us: a dense relation's own chunk; a sparse relation's expanded into buf,
 * or zeros when r has no tuple of key. */
static const void *dense_of(const TrtRel *r, const int64_t *key, int64_t *at, void *buf)
{
	const TrtType *t = &r->type;

	if (!t->sparse)
		return rt_chunk_data(r->chunks[(*at)++]);      /* pinned in the caller's scope */
	if (*at < r->n && !rt_key_cmp(r->keys + *at * t->nkey, key, t->nkey))
		rt_csr_expand(t, key, r->chunks[(*at)++], buf);
	else
		memset(buf, 0, rt_chunk_bytes(t, key));
	return buf;
}

/*
 * A dense output whose chunk dims are in key-dim order is written slab by
 * slab in file order.  A slab is a stretch of the file: the elements whose
 * dims before p are at pre[] and whose dim p is in [a, a + h), within one
 * block of dim p, at most SLAB_MAX bytes (p is the first dim one index of
 * which is at most that: optimizer/cost.c's write_transient_bytes says the
 * same).  Each chunk it meets (those whose keys before and at p are the
 * slab's blocks) holds a contiguous portion of it, which its owner sends
 * rank 0; rank 0 then writes the slab's runs (a chunk's pieces contiguous
 * in the file: its block along d0, the last dim split, and the whole dims
 * after it) in file order, gathered into Out's direct stage (or pwritev
 * calls).  Written chunk by chunk in key order instead, an output split
 * along two dims jumps about the file, leaves O_DIRECT after its first
 * rows and goes through the page cache a few hundred bytes at a time
 * (conv3d's Y: bench/README.md, "Writes").
 */
enum { SLAB_MAX = 4 << 20 };

typedef struct Slab {
	int p, d0;
	int64_t hmax;                   /* a slab's most indices of dim p */
	int64_t pre[TRT_MAXDIM], a, h;  /* this slab */
	int64_t f;                      /* the chunks it meets */
} Slab;

/* The most bytes of a slab: SLAB_MAX, or under a memory budget an eighth
 * of it (16 KiB at least), as every rank computes alike. */
static double slab_max(void)
{
	if (rt.budget > 0 && rt.budget / 8 < SLAB_MAX)
		return rt.budget / 8 > 16384 ? rt.budget / 8 : 16384;
	return SLAB_MAX;
}

/* The first slab of t (dense, nkeys > 0), whose runs span dims d0.. */
static Slab slab_first(const TrtType *t, int d0)
{
	Slab s = { .d0 = d0 };
	double unit = (double)rt_dtype_size(t->dtype), most = slab_max();
	int p = t->nkey - 1;
	while (p > 0 && unit * (double)t->extent[p] <= most) {
		unit *= (double)t->extent[p];
		p--;
	}
	s.p = p;
	s.hmax = (int64_t)(most / unit);
	if (s.hmax < 1)
		s.hmax = 1;
	if (s.hmax > t->block[p])
		s.hmax = t->block[p];
	s.f = 1;
	for (int d = p + 1; d < t->nkey; d++)
		s.f *= rt_frontier(t, d);
	for (int d = 0; d < p; d++)
		s.pre[d] = 0;
	s.a = 0;
	s.h = s.hmax < t->extent[p] ? s.hmax : t->extent[p];
	return s;
}

/* The next slab in file order; 0 after the last. */
static int slab_next(const TrtType *t, Slab *s)
{
	int p = s->p;
	s->a += s->h;
	if (s->a == t->extent[p]) {
		int d = p - 1;
		while (d >= 0 && ++s->pre[d] == t->extent[d])
			s->pre[d--] = 0;
		if (d < 0)
			return 0;
		s->a = 0;
	}
	int64_t end = (s->a / t->block[p] + 1) * t->block[p];
	if (end > t->extent[p])
		end = t->extent[p];
	s->h = end - s->a < s->hmax ? end - s->a : s->hmax;
	return 1;
}

/* The key of the slab's chunk c (0 <= c < f, in key order). */
static void slab_key(const TrtType *t, const Slab *s, int64_t c, int64_t *key)
{
	for (int d = t->nkey - 1; d > s->p; d--) {
		int64_t fd = rt_frontier(t, d);
		key[d] = c % fd;
		c /= fd;
	}
	for (int d = 0; d < s->p; d++)
		key[d] = s->pre[d] / t->block[d];
	key[s->p] = s->a / t->block[s->p];
}

/* The slab's portion of the chunk whose block is b: its first element's
 * index in the chunk (*off) and its elements; cstride: the chunk's
 * strides. */
static int64_t slab_portion(const TrtType *t, const Slab *s, const RtBlock *b, int64_t *cstride,
                            int64_t *off)
{
	int64_t n = 1;
	for (int d = t->nkey - 1; d >= 0; d--) {
		cstride[d] = n;
		n *= b->cnt[d];
	}
	*off = (s->a - b->start[s->p]) * cstride[s->p];
	for (int d = 0; d < s->p; d++)
		*off += (s->pre[d] - b->start[d]) * cstride[d];
	return s->h * cstride[s->p];
}

/* The position of key among r's tuples (sorted, see check_complete),
 * which this rank owns. */
static int64_t tuple_of(const TrtRel *r, const int64_t *key)
{
	int64_t pos = rt_rel_bsearch(r, key);
	if (pos < 0)
		rt_bug("writing: rank %d lacks a chunk it owns", rt.rank);
	return pos;
}

/* A chunk the slab meets, at hand on rank 0: its portion's data, and the
 * chunk's block and strides. */
typedef struct Portion {
	const char *data;
	RtBlock b;
	int64_t cstride[TRT_MAXDIM];
} Portion;

/* Rank 0: the slab's runs in file order into bt. */
static void slab_runs(RtBatch *bt, const TrtType *t, const Slab *s, const Portion *po,
                      int64_t data_offset)
{
	size_t es = rt_dtype_size(t->dtype);
	int p = s->p, d0 = s->d0, nkey = t->nkey;
	int64_t tail = 1;
	for (int d = d0 + 1; d < nkey; d++)
		tail *= t->extent[d];

	int64_t base = s->a * po[0].b.tstride[p];
	for (int d = 0; d < p; d++)
		base += s->pre[d] * po[0].b.tstride[d];
	if (p >= d0) {
		/* the slab lies in one chunk's run */
		rt_batch_add(bt, data_offset + base * (int64_t)es, (char *)po[0].data,
		          (size_t)(s->h * po[0].b.tstride[p]) * es);
		return;
	}
	/* p < d0: the indices of dims p..d0-1 one by one, and for each the
	 * blocks along d0 */
	int64_t idx[TRT_MAXDIM], fd0 = rt_frontier(t, d0);
	for (int d = p; d < d0; d++)
		idx[d] = d == p ? s->a : 0;
	int64_t at = data_offset + base * (int64_t)es;
	for (;;) {
		/* the slab's chunk of these indices' blocks: its index among
		 * the slab's f, by the frontiers of dims p+1..d0 */
		int64_t c = 0;
		for (int d = p + 1; d < d0; d++)
			c = c * rt_frontier(t, d) + idx[d] / t->block[d];
		c *= fd0;
		for (int64_t kb = 0; kb < fd0; kb++) {
			const Portion *q = &po[c + kb];
			int64_t in = (idx[p] - s->a) * q->cstride[p];  /* from the portion's start */
			for (int d = p + 1; d < d0; d++)
				in += (idx[d] - q->b.start[d]) * q->cstride[d];
			size_t len = (size_t)(q->b.cnt[d0] * tail) * es;
			rt_batch_add(bt, at, (char *)q->data + (size_t)in * es, len);
			at += (int64_t)len;
		}
		int d = d0 - 1;
		while (d > p && ++idx[d] == t->extent[d])
			idx[d--] = 0;
		if (d == p && ++idx[p] == s->a + s->h)
			break;
	}
}

/* Under a budget, the order write_slabs reads this rank's chunks in, for
 * the chunk store to read them ahead. */
static void stream_slabs(const TrtRel *r, int d0)
{
	if (rt.budget <= 0)
		return;
	const TrtType *t = &r->type;
	Slab s = slab_first(t, d0);
	int64_t n = 0, cap = 64, key[TRT_MAXDIM];
	Chunk ***cell = rt_alloc(sizeof *cell * (size_t)cap);
	do
		for (int64_t c = 0; c < s.f; c++) {
			slab_key(t, &s, c, key);
			int site = r->place.kind == TRT_ALL ? 0 : trt_site(&r->place, t, key);
			if (site != rt.rank)
				continue;
			if (n == cap)
				cell = rt_realloc(cell, sizeof *cell * (size_t)(cap *= 2));
			cell[n++] = &r->chunks[tuple_of(r, key)];
		}
	while (slab_next(t, &s));
	rt_stream_begin(cell, n);
}

/* Writes dense r (chunk dims in key order, runs from dim d0) slab by slab:
 * rank 0 receives each slab's portions from their owners, then writes
 * the slab; the other ranks send theirs.  Returns 0, or on rank 0 the
 * first errno, after receiving every portion. */
static int write_slabs(Out *out, int64_t data_offset, const TrtRel *r, int d0)
{
	const TrtType *t = &r->type;
	size_t es = rt_dtype_size(t->dtype);
	Slab s = slab_first(t, d0);
	int64_t key[TRT_MAXDIM], cstride[TRT_MAXDIM], off;
	Portion *po = rt_alloc(sizeof *po * (size_t)s.f);
	RtBatch *bt = NULL;
	Chunk *bufc = NULL;
	int err = 0;

	if (rt.rank == 0) {
		bt = rt_alloc(sizeof *bt);
		rt_batch_init(bt, out->fd, out_flush, out);
		if ((r->place.kind == TRT_PART && rt.nranks > 1) || rt.budget > 0) {
			int64_t unit = 1;
			for (int d = s.p + 1; d < t->nkey; d++)
				unit *= t->extent[d];
			size_t mark = rt_pin_mark();
			bufc = rt_chunk_new((size_t)(s.hmax * unit) * es);      /* see rt_write_rel */
			rt_chunk_hold(bufc, 1);
			rt_pin_release(mark);
		}
	}
	stream_slabs(r, d0);
	int64_t step = 0;
	do {
		size_t mark = rt_pin_mark();
		char *buf = bufc ? bufc->data : NULL;
		for (int64_t c = 0; c < s.f; c++) {
			slab_key(t, &s, c, key);
			int site = r->place.kind == TRT_ALL ? 0 : trt_site(&r->place, t, key);
			if (site != rt.rank && rt.rank != 0)
				continue;
			RtBlock b;
			rt_block_of(t, key, &b);
			int64_t n = slab_portion(t, &s, &b, cstride, &off);
			const char *data = NULL;
			size_t one = rt_pin_mark();
			if (site == rt.rank) {
				rt_stream_at(step++);
				data = (const char *)rt_chunk_data(r->chunks[tuple_of(r, key)]) + (size_t)off * es;
			}
			if (rt.rank != 0) {
				rt_send_bytes(data, (size_t)n * es, 0, TAG_WRITE);
				rt_pin_release(one);
				continue;
			}
			if (site == 0 && rt.budget > 0) {
				/* under a budget, rank 0's own portions are copied too, so
				 * that a slab holds a slab's bytes, not its chunks */
				memcpy(buf, data, (size_t)n * es);
				rt_pin_release(one);
				data = buf;
				buf += (size_t)n * es;
			} else if (site != 0) {
				rt_recv_bytes(buf, (size_t)n * es, site, TAG_WRITE);
				data = buf;
				buf += (size_t)n * es;
			}
			po[c].data = data;
			po[c].b = b;
			memcpy(po[c].cstride, cstride, sizeof cstride);
		}
		if (rt.rank == 0 && bt->ok) {
			slab_runs(bt, t, &s, po, data_offset);
			rt_batch_flush(bt);
			if (!bt->ok)
				err = errno ? errno : EIO;
		}
		rt_pin_release(mark);
	} while (slab_next(t, &s));
	rt_stream_end();
	if (bufc)
		rt_chunk_unhold(bufc);
	rt_chunk_unref(bufc);
	free(bt);
	free(po);
	return err;
}

/* Writes r at data_offset through out (rank 0; the others send it their
 * chunks): 0, or on rank 0 the first errno, after receiving every chunk. */
static int write_rel(Out *out, int64_t data_offset, const TrtRel *r)
{
	const TrtType *t = &r->type;
	int64_t nk = rt_nkeys(t), key[TRT_MAXDIM], at = 0;
	size_t maxbytes = 0;
	int err = 0;

	/* A dense relation whose chunk dims are in key order goes slab by slab,
	 * in file order, so that its writes follow each other (direct, see
	 * Out); every rank decides so from the type alone */
	RtBlock b;
	if (nk > 0 && t->nkey > 0 && !t->sparse) {
		rt_key_from_linear(t, 0, key);
		rt_block_of(t, key, &b);
		if (b.identity)
			return write_slabs(out, data_offset, r, b.d0);
	}
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		size_t nb = rt_chunk_bytes(t, key);
		if (nb > maxbytes)
			maxbytes = nb;
	}
	/* else chunk by chunk in key order, with a buffer for a chunk received
	 * or a sparse chunk made dense: a chunk, so that pages the ops freed
	 * (the chunk cache's, faulted in already) take it, not new memory */
	Chunk *bufc = NULL;
	char *buf = NULL;
	if (t->sparse || (rt.rank == 0 && r->place.kind == TRT_PART && rt.nranks > 1)) {
		size_t mark = rt_pin_mark();
		bufc = rt_chunk_new(maxbytes);
		buf = rt_chunk_hold(bufc, 1);
		rt_pin_release(mark);
	}
	if (rt.budget > 0) {            /* the chunks in key order: read ahead */
		Chunk ***cell = rt_alloc(sizeof *cell * (size_t)(r->n + 1));
		for (int64_t i = 0; i < r->n; i++)
			cell[i] = &r->chunks[i];
		rt_stream_begin(cell, r->n);
	}
	if (rt.rank != 0) {
		/* every key this rank owns, in order (a sparse relation's absent
		 * ones as zeros): rank 0 expects them all */
		for (int64_t lin = 0; r->place.kind == TRT_PART && rt_next_key_here(t, r->place, &lin, key); lin++) {
			size_t mark = rt_pin_mark();
			rt_stream_at(at);
			rt_send_bytes(dense_of(r, key, &at, buf), rt_chunk_bytes(t, key), 0, TAG_WRITE);
			rt_pin_release(mark);
		}
		rt_stream_end();
		if (bufc)
			rt_chunk_unhold(bufc);
		rt_chunk_unref(bufc);
		return 0;
	}
	/* Rank 0: every key in order, from its own tuples or from their owner.
	 * After a failure it keeps receiving, so no sender is left blocked. */
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		size_t nb = rt_chunk_bytes(t, key);
		const void *data;
		int site = r->place.kind == TRT_ALL ? 0 : trt_site(&r->place, t, key);
		size_t mark = rt_pin_mark();
		if (site == 0) {
			rt_stream_at(at);
			data = dense_of(r, key, &at, buf);
		} else {
			rt_recv_bytes(buf, nb, site, TAG_WRITE);
			data = buf;
		}
		if (!err && !write_chunk(out, data_offset, t, key, data, nb))
			err = errno ? errno : EIO;
		rt_pin_release(mark);
	}
	rt_stream_end();
	if (bufc)
		rt_chunk_unhold(bufc);
	rt_chunk_unref(bufc);
	return err;
}

int rt_write_rel(int fd, int64_t data_offset, const TrtRel *r)
{
	Out out = out_open(fd, 0, 0);
	return write_rel(&out, data_offset, r);
}
