/*
 * npy.c: .npy files: the header parser and checker, trt_read and trt_write.
 *
 * Accepted: versions 1.0, 2.0 and 3.0, dtype exactly the tensor's (<f4 or
 * <f8; | and = are the same on a little-endian host), C order, the declared
 * shape.  Nothing is converted.  Every problem is one line:
 *
 *     prog: input A (a.npy): shape (1000, 700) expected, found (700, 1000)
 *
 * Reading: every rank opens the file and checks the header itself, the ranks
 * agree on the verdict (rt_agree), and each reads only the chunks it owns,
 * straight into them: their runs (the pieces of a chunk contiguous in the
 * file) sorted by offset, one preadv per stretch of the file they cover
 * without a gap, so that chunks side by side in a row of blocks cost one
 * system call per row, not one per chunk row.  Chunks whose dims are a
 * permutation of the key dims are read in file order and transposed.
 *
 * Writing: rank 0 writes, slab by slab in file order (write_slabs: the
 * other ranks send it their chunks' portions of each slab), or chunk by
 * chunk in key order when the chunk dims are not in key order or the
 * relation is sparse (receiving the chunks it does not hold), to a
 * temporary file beside the destination (.NAME.XXXXXX), then fsyncs it, renames it and fsyncs the directory
 * (rt_rename_durable).  On any failure the temporary is removed, so an
 * output path holds either a complete file or what it held before.  While
 * the writes follow each other in the file they go through an aligned
 * buffer with O_DIRECT (Out, below): the file is fsynced anyway,
 * and through the page cache every page is memory new to the process's
 * machine, which on a virtual machine wrote at 150-300 MB/s against 650-770
 * MB/s direct (bench/README.md, "Writes").
 *
 * Sparse relations (TrtType.sparse) come from a scipy.sparse .npz or from
 * a dense .npy whose chunks are compressed as they are read, and go to a
 * .npz when the path says so and the tensor is a matrix: npz.c (a dense
 * matrix too, its zeros dropped, so that the file does not depend on how
 * the plan stored the tensor, which differs between -O levels).  Written
 * to a .npy, their chunks are expanded one at a time, the absent ones as
 * zeros.
 */
#define _GNU_SOURCE                    /* O_DIRECT; pread, preadv, mkstemp, posix_memalign */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rt.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libtracrt reads and writes little-endian .npy data in place: little-endian hosts only"
#endif

enum { TAG_WRITE = 7001 };

static const char magic[6] = "\x93NUMPY";

const char *rt_errstr(int e)
{
	return e == EISDIR ? "is a directory" : strerror(e);
}

/* A shape as numpy prints it: (), (5,), (3, 4). */
void rt_shape_str(char *buf, size_t len, int rank, const int64_t *shape)
{
	size_t at = snprintf(buf, len, "(");

	for (int d = 0; d < rank && at < len; d++)
		at += snprintf(buf + at, len - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
	if (at < len)
		snprintf(buf + at, len - at, rank == 1 ? ",)" : ")");
}

static const char *dtype_descr(TrtDtype d)
{
	static const char *const descr[] = {[TRT_F32] = "<f4", [TRT_F64] = "<f8", [TRT_I32] = "<i4", [TRT_I64] = "<i8"};
	rt_dtype_size(d);       /* checks d */
	return descr[d];
}

/* ---- the header ---- */

typedef struct Scan {
	const char *p, *end;
} Scan;

static void skip_ws(Scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

static int eat(Scan *s, char c)
{
	skip_ws(s);
	if (s->p < s->end && *s->p == c) {
		s->p++;
		return 1;
	}
	return 0;
}

static int scan_string(Scan *s, char *out, size_t len)
{
	skip_ws(s);
	if (s->p >= s->end || (*s->p != '\'' && *s->p != '"'))
		return 0;
	char q = *s->p++;
	const char *start = s->p;
	while (s->p < s->end && *s->p != q)
		s->p++;
	if (s->p >= s->end)
		return 0;
	size_t n = (size_t)(s->p - start);
	if (n >= len)
		n = len - 1;
	memcpy(out, start, n);
	out[n] = 0;
	s->p++;
	return 1;
}

/* Skips a value we do not interpret: up to the ',' or '}' at depth 0. */
static int skip_value(Scan *s, char *raw, size_t len)
{
	const char *start = s->p;
	int depth = 0;

	skip_ws(s);
	start = s->p;
	while (s->p < s->end) {
		char c = *s->p;
		if (c == '\'' || c == '"') {
			char tmp[2];
			if (!scan_string(s, tmp, sizeof tmp))
				return 0;
			continue;
		}
		if (depth == 0 && (c == ',' || c == '}'))
			break;
		if (c == '(' || c == '[' || c == '{')
			depth++;
		if (c == ')' || c == ']' || c == '}')
			depth--;
		s->p++;
	}
	if (raw) {
		size_t n = (size_t)(s->p - start);
		if (n >= len)
			n = len - 1;
		memcpy(raw, start, n);
		raw[n] = 0;
	}
	return s->p < s->end;
}

static int scan_shape(Scan *s, NpyHeader *h)
{
	h->rank = 0;
	if (!eat(s, '('))
		return 0;
	for (;;) {
		if (eat(s, ')'))
			return 1;
		skip_ws(s);
		/* digits only up to s->end: the header is not NUL-terminated */
		const char *q = s->p;
		int64_t v = 0;
		while (q < s->end && *q >= '0' && *q <= '9') {
			if (v > (INT64_MAX - (*q - '0')) / 10)
				return 0;
			v = v * 10 + (*q++ - '0');
		}
		if (q == s->p || h->rank == NPY_MAXDIM)
			return 0;
		h->shape[h->rank++] = v;
		s->p = q;
		if (s->p < s->end && *s->p == 'L')      /* Python 2's long */
			s->p++;
		if (!eat(s, ',')) {
			return eat(s, ')');
		}
	}
}

/* Parses the magic, version and header dict in buf[0..n), which holds the
 * file's first n bytes.  On failure writes the reason to why. */
int rt_npy_parse(const unsigned char *buf, size_t n, NpyHeader *h, char *why, size_t whylen)
{
	memset(h, 0, sizeof *h);
	if (n < 10 || memcmp(buf, magic, sizeof magic)) {
		snprintf(why, whylen, "not a .npy file");
		return 0;
	}
	h->major = buf[6];
	h->minor = buf[7];
	size_t hlen, start;
	if (h->major == 1) {
		hlen = buf[8] | (size_t)buf[9] << 8;
		start = 10;
	} else if (h->major == 2 || h->major == 3) {
		if (n < 12) {
			snprintf(why, whylen, "truncated .npy header");
			return 0;
		}
		hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
		start = 12;
	} else {
		snprintf(why, whylen, "unsupported .npy version %d.%d", h->major, h->minor);
		return 0;
	}
	if (n < start + hlen) {
		snprintf(why, whylen, "truncated .npy header");
		return 0;
	}
	h->data_offset = (int64_t)(start + hlen);

	Scan s = { (const char *)buf + start, (const char *)buf + start + hlen };
	int seen_descr = 0, seen_order = 0, seen_shape = 0;
	if (!eat(&s, '{'))
		goto bad;
	while (!eat(&s, '}')) {
		char key[32];
		if (!scan_string(&s, key, sizeof key) || !eat(&s, ':'))
			goto bad;
		if (!strcmp(key, "descr")) {
			skip_ws(&s);
			if (s.p < s.end && (*s.p == '\'' || *s.p == '"')) {
				if (!scan_string(&s, h->descr, sizeof h->descr))
					goto bad;
			} else if (!skip_value(&s, h->descr, sizeof h->descr)) {
				goto bad;
			}
			seen_descr = 1;
		} else if (!strcmp(key, "fortran_order")) {
			skip_ws(&s);
			if (s.end - s.p >= 4 && !memcmp(s.p, "True", 4)) {
				h->fortran = 1;
				s.p += 4;
			} else if (s.end - s.p >= 5 && !memcmp(s.p, "False", 5)) {
				h->fortran = 0;
				s.p += 5;
			} else {
				goto bad;
			}
			seen_order = 1;
		} else if (!strcmp(key, "shape")) {
			if (!scan_shape(&s, h))
				goto bad;
			seen_shape = 1;
		} else if (!skip_value(&s, NULL, 0)) {
			goto bad;
		}
		if (!eat(&s, ',')) {
			if (!eat(&s, '}'))
				goto bad;
			break;
		}
	}
	if (!seen_descr || !seen_order || !seen_shape) {
		snprintf(why, whylen, "malformed .npy header: no '%s'",
		         !seen_descr ? "descr" : !seen_order ? "fortran_order" : "shape");
		return 0;
	}
	return 1;
bad:
	snprintf(why, whylen, "malformed .npy header");
	return 0;
}

/* Checks a parsed header against the tensor's declaration and the file's
 * size; on failure writes the reason to why. */
int rt_npy_check(const NpyHeader *h, const TrtTensor *t, int64_t filesize,
                 char *why, size_t whylen)
{
	const char *want = dtype_descr(t->dtype);
	const char *d = h->descr;

	if (d[0] == '>' && !strcmp(d + 1, want + 1)) {
		snprintf(why, whylen, "big-endian data not supported; expected %s, found %s", want, d);
		return 0;
	}
	if (!strchr("<|=", d[0]) || strcmp(d + 1, want + 1)) {
		if (d[0] == '[' || d[0] == '{')
			snprintf(why, whylen, "dtype %s expected, found a structured dtype", want);
		else
			snprintf(why, whylen, "dtype %s expected, found %s", want, d);
		return 0;
	}
	if (h->fortran) {
		snprintf(why, whylen, "Fortran order not supported; save the array in C order");
		return 0;
	}
	int same = h->rank == t->rank;
	for (int i = 0; same && i < t->rank; i++)
		same = h->shape[i] == t->shape[i];
	if (!same) {
		char a[256], b[1024];
		rt_shape_str(a, sizeof a, t->rank, t->shape);
		rt_shape_str(b, sizeof b, h->rank, h->shape);
		snprintf(why, whylen, "shape %s expected, found %s", a, b);
		return 0;
	}
	int64_t need = (int64_t)rt_dtype_size(t->dtype);
	for (int i = 0; i < t->rank; i++)
		need *= t->shape[i];
	int64_t have = filesize - h->data_offset;
	if (have < need) {
		snprintf(why, whylen, "file is truncated: %lld bytes of data expected, %lld found",
		         (long long)need, (long long)(have > 0 ? have : 0));
		return 0;
	}
	return 1;
}

/* Reads n bytes at off, retrying short reads; returns bytes read or -1. */
ssize_t rt_pread_full(int fd, void *buf, size_t n, int64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + (int64_t)got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

/* Writes n bytes at off, retrying short writes; 0 on failure (errno set). */
int rt_pwrite_full(int fd, const void *buf, size_t n, int64_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t k = pwrite(fd, (const char *)buf + done, n - done, (off_t)(off + (int64_t)done));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return 0;
		}
		done += (size_t)k;
	}
	return 1;
}

/* The one line of a bad file: "prog: input A (a.npy): why". */
void rt_tensor_msg(char *msg, size_t len, const TrtTensor *t, const char *path, const char *why)
{
	snprintf(msg, len, "%s: %s %s (%s): %s", rt_progname(), rt_role_name(t->role),
	         t->name, path, why);
}

/* How many of a file's first bytes rt_npy_parse needs, given the first n
 * (at most 12): as many as the header says it has (bounded), or n when
 * they are no .npy's. */
size_t rt_npy_head_len(const unsigned char *head, size_t n)
{
	size_t want = n;

	if (n >= 10 && !memcmp(head, magic, sizeof magic)) {
		if (head[6] == 1)
			want = 10 + (head[8] | (size_t)head[9] << 8);
		else if (n >= 12)
			want = 12 + (head[8] | (size_t)head[9] << 8 | (size_t)head[10] << 16 |
			             (size_t)head[11] << 24);
		if (want > (1u << 20))          /* numpy itself refuses huge headers */
			want = 1u << 20;
	}
	return want;
}

/* Opens path for reading tensor t's data; returns the descriptor and the
 * file's size, or -1 with the one-line message in msg. */
int rt_open_input(const TrtTensor *t, const char *path, int64_t *size, char *msg, size_t len)
{
	struct stat st;

	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer */
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		rt_tensor_msg(msg, len, t, path, rt_errstr(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0) {
		rt_tensor_msg(msg, len, t, path, rt_errstr(errno));
		close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode)) {
		/* every rank reads its chunks at their offsets: a file it must be */
		rt_tensor_msg(msg, len, t, path, S_ISDIR(st.st_mode) ? rt_errstr(EISDIR) :
		              S_ISFIFO(st.st_mode) ? "a named pipe, not a file; every rank reads its part of the file at its offset" :
		              "not a regular file");
		close(fd);
		return -1;
	}
	*size = (int64_t)st.st_size;
	return fd;
}

/* Opens path and checks it holds tensor t; returns the descriptor, or -1
 * with the one-line message in msg. */
int rt_npy_open(const TrtTensor *t, const char *path, NpyHeader *h, char *msg, size_t len)
{
	char why[512];
	unsigned char head[12];
	int64_t size;

	int fd = rt_open_input(t, path, &size, msg, len);
	if (fd < 0)
		return -1;
	ssize_t n = rt_pread_full(fd, head, sizeof head, 0);
	if (n < 0) {
		rt_tensor_msg(msg, len, t, path, rt_errstr(errno));
		close(fd);
		return -1;
	}

	/* Read as much as the header claims (bounded), then parse it all. */
	size_t want = rt_npy_head_len(head, (size_t)n);
	unsigned char *buf = rt_alloc(want);
	n = rt_pread_full(fd, buf, want, 0);
	int ok = n >= 0 && rt_npy_parse(buf, (size_t)n, h, why, sizeof why) &&
	         rt_npy_check(h, t, size, why, sizeof why);
	if (n < 0)
		snprintf(why, sizeof why, "%s", rt_errstr(errno));
	free(buf);
	if (!ok) {
		rt_tensor_msg(msg, len, t, path, why);
		close(fd);
		return -1;
	}
	return fd;
}

/* Writes the v1.0 header for tensor t into buf; returns its length, a
 * multiple of 64 as numpy makes it, or 0 if buf is too small. */
size_t rt_npy_header(const TrtTensor *t, char *buf, size_t buflen)
{
	return rt_npy_header_of(dtype_descr(t->dtype), t->rank, t->shape, buf, buflen);
}

/* The same for an array of any numpy dtype (descr, e.g. "|S3"). */
size_t rt_npy_header_of(const char *descr, int rank, const int64_t *shape, char *buf, size_t buflen)
{
	char sh[256], dict[512];

	rt_shape_str(sh, sizeof sh, rank, shape);
	int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
	                 descr, sh);
	size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64;
	if (total > buflen || total - 10 > 65535)
		return 0;
	memcpy(buf, magic, sizeof magic);
	buf[6] = 1;
	buf[7] = 0;
	buf[8] = (char)((total - 10) & 0xff);
	buf[9] = (char)((total - 10) >> 8);
	memcpy(buf + 10, dict, (size_t)n);
	memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
	buf[total - 1] = '\n';
	return total;
}

/* ---- chunks in the file ---- */

/* Calls io(fd, buf, bytes, offset) for each run of block b, buf walking
 * through the dense sub-block in file order.  Returns 0 on the first
 * failure. */
static int each_run(const TrtType *t, const RtBlock *b, char *buf, int64_t data_offset,
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

static int io_read(void *file, char *buf, size_t n, int64_t off)
{
	ssize_t k = rt_pread_full(*(int *)file, buf, n, off);
	if (k >= 0 && (size_t)k < n)
		errno = EIO;            /* the file shrank after the check */
	return k >= 0 && (size_t)k == n;
}

/*
 * Out: rank 0's writes of one file.  Opened direct (out_open, at offset 0),
 * the writes that follow each other from there are copied into an aligned
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
enum { OUT_BLOCK = 4096, OUT_STAGE = 8 << 20 };

/* The bytes of one stage for data bytes of .npy data (a header is less
 * than a block), and in *nstage how many. */
static size_t out_stage_bytes(double data, int *nstage)
{
	double one = (ceil(data / OUT_BLOCK) + 1) * OUT_BLOCK;
	*nstage = one > OUT_STAGE ? 2 : 1;
	return one > OUT_STAGE ? (size_t)OUT_STAGE : (size_t)one;
}

typedef struct Out {
	int fd, direct;
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

/* Out for fd, direct when asked and the file system lets it, for a file
 * of data bytes after its header. */
static Out out_open(int fd, int direct, double data)
{
	Out o = { .fd = fd };
	int fl = fcntl(fd, F_GETFL);
	if (direct && fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
		int nstage;
		o.len = out_stage_bytes(data, &nstage);
		o.stages = rt_chunk_new((size_t)nstage * o.len + OUT_BLOCK);
		uintptr_t p = (uintptr_t)rt_chunk_data(o.stages);
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
	rt_chunk_unref(o->stages);
	o->stages = NULL;
	o->stage[0] = o->stage[1] = NULL;
	return ok;
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
	if (!o->direct)
		return rt_pwrite_full(o->fd, buf, n, off);
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

/* Reads chunk c, of block b whose chunk dims are not in key-dim order: in
 * file order, then transposed; returns 0 (errno set) on failure. */
static int read_transposed(int fd, int64_t data_offset, const TrtType *t, const RtBlock *b,
                           Chunk *c)
{
	char *tmp = rt_alloc(c->nbytes);
	int ok = each_run(t, b, tmp, data_offset, io_read, &fd);
	if (ok)
		rt_block_to_chunk(t, b, rt_chunk_data(c), tmp);
	free(tmp);
	return ok;
}

/* Writes chunk data (nbytes long) of key; returns 0 (errno set) on failure. */
static int write_chunk(Out *out, int64_t data_offset, const TrtType *t, const int64_t *key,
                       const void *data, size_t nbytes)
{
	RtBlock b;
	rt_block_of(t, key, &b);
	if (b.identity)
		return each_run(t, &b, (char *)data, data_offset, io_write, out);

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
	int ok = each_run(t, &b, tmp, data_offset, io_write, out);
	free(tmp);
	return ok;
}

/* ---- trt_read and trt_write ---- */

static const TrtTensor *tensor_of(int tensor, const TrtType *t)
{
	if (!rt.prog || tensor < 0 || tensor >= rt.prog->ntensors)
		rt_bug("no tensor %d", tensor);
	const TrtTensor *x = &rt.prog->tensors[tensor];
	rt_check_type(t);
	int ok = t->nkey == x->rank && t->dtype == x->dtype;
	for (int d = 0; ok && d < x->rank; d++)
		ok = t->extent[d] == x->shape[d];
	if (!ok)
		rt_bug("relation type does not match tensor %s", x->name);
	return x;
}

static const char *no_path(const TrtTensor *x, char *msg, size_t len)
{
	snprintf(msg, len, "%s: %s %s: no file given (add %s=path.npy)", rt_progname(),
	         rt_role_name(x->role), x->name, x->name);
	return msg;
}

TrtRel *trt_read(int tensor, const TrtType *t, TrtPlace p)
{
	const TrtTensor *x = tensor_of(tensor, t);
	const char *path = rt.paths[tensor];
	char msg[1024];
	NpyHeader h;
	int fd = -1;

	if (p.kind == TRT_ANY)
		rt_bug("read of %s into a TRT_ANY relation", x->name);
	if (!path)
		rt_agree(no_path(x, msg, sizeof msg));
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

/* Reads the file's bytes from off into the buffers of iov[0..n), or with
 * write set writes them there, retrying short transfers; returns 0 (errno
 * set) on failure. */
static int pv_full(int fd, struct iovec *iov, int n, int64_t off, int write)
{
	while (n > 0) {
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

/* Reads (or writes) gathered into one preadv (pwritev) while they follow
 * each other in the file: at most MAX_IOV buffers (or the system's
 * IOV_MAX) and MAX_CALL bytes. */
enum { MAX_IOV = 1024, MAX_CALL = 1 << 30 };

typedef struct Batch {
	struct iovec iov[MAX_IOV];
	int n, max;
	int64_t off, end;       /* the file's bytes [off, end) */
	int fd, ok;             /* ok: 0 (errno set) after a failure */
	Out *out;               /* writes: through it */
} Batch;

static void batch_flush(Batch *bt)
{
	if (bt->n && bt->ok && bt->out && bt->out->direct) {
		int64_t off = bt->off;
		for (int i = 0; bt->ok && i < bt->n; off += (int64_t)bt->iov[i].iov_len, i++)
			bt->ok = out_write(bt->out, bt->iov[i].iov_base, bt->iov[i].iov_len, off);
	} else if (bt->n && bt->ok) {
		bt->ok = pv_full(bt->fd, bt->iov, bt->n, bt->off, bt->out != NULL);
	}
	bt->n = 0;
}

/* Reads len bytes of the file at off into buf (or writes them from buf),
 * now or with the next ones. */
static void batch_add(Batch *bt, int64_t off, char *buf, size_t len)
{
	if (bt->n && (off != bt->end || bt->n == bt->max || bt->end - bt->off >= MAX_CALL))
		batch_flush(bt);
	if (!bt->n)
		bt->off = bt->end = off;
	bt->iov[bt->n].iov_base = buf;
	bt->iov[bt->n].iov_len = len;
	bt->n++;
	bt->end += (int64_t)len;
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
static void batch_band(Batch *bt, const TrtType *t, const RtBlock *first, const Seg *seg, int64_t ns,
                       int64_t data_offset)
{
	size_t es = rt_dtype_size(t->dtype);
	for (int64_t i = 0; bt->ok && i < first->nrun; i++) {
		int64_t row = rt_block_run(t, first, i);
		for (int64_t k = 0; k < ns; k++)
			batch_add(bt, data_offset + (row + seg[k].shift) * (int64_t)es,
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
	long iov_max = sysconf(_SC_IOV_MAX);
	Batch bt = { .fd = fd, .ok = 1, .max = iov_max > 0 && iov_max < MAX_IOV ? (int)iov_max : MAX_IOV };
	RtBlock b, first;

	if (nk > 0) {
		rt_key_from_linear(t, 0, key);
		rt_block_of(t, key, &b);
	}
	if (nk > 0 && !b.identity) {
		for (int64_t lin = 0; bt.ok && lin < nk; lin++) {
			rt_key_from_linear(t, lin, key);
			if (!owned(&p, t, key))
				continue;
			Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
			rt_rel_push(r, key, c);
			rt_block_of(t, key, &b);
			bt.ok = read_transposed(fd, data_offset, t, &b, c);
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
			for (int64_t s = 0; s < f; s++) {
				rt_key_from_linear(t, band * f + s, key);
				if (!owned(&p, t, key))
					continue;
				Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
				rt_rel_push(r, key, c);
				rt_block_of(t, key, &b);
				if (!ns)
					first = b;
				seg[ns++] = (Seg){ rt_chunk_data(c), (size_t)b.run * es,
				                   t->nkey ? (b.start[d0] - first.start[d0]) * b.tstride[d0] : 0 };
			}
			if (ns)
				batch_band(&bt, t, &first, seg, ns, data_offset);
		}
		free(seg);
		batch_flush(&bt);
	}
	if (!bt.ok) {
		int e = errno;
		trt_free(r);
		errno = e;
		return NULL;
	}
	return r;
}

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

/* The temporary file beside path: <dir>/.<base>.XXXXXX. */
int rt_make_temp(const char *path, char **tmpname)
{
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
	if (rename(tmp, path) < 0)
		return -1;
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

static int ends_with(const char *s, const char *tail)
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
	const TrtTensor *x = tensor_of(tensor, t);
	const char *path = rt.paths[tensor];
	char msg[1024];
	const char *err = NULL;
	char *tmpname = NULL;
	int fd = -1;

	if (r->place.kind == TRT_ANY)
		rt_bug("write of %s from a TRT_ANY relation", x->name);
	if (!path)
		rt_agree(no_path(x, msg, sizeof msg));
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
	int e = t->nkey == 2 && ends_with(path, ".npz") ? rt_npz_write(fd, r)
	                                                             : write_npy(fd, x, r);
	if (rt.rank != 0) {
		rt_agree(NULL);
		return;
	}
	if (e) {
		rt_tensor_msg(msg, sizeof msg, x, path, rt_errstr(e));
		err = msg;
	}
	if (!err && fsync(fd) < 0) {
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
		unlink(tmpname);
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
		return rt_chunk_data(r->chunks[(*at)++]);
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
 * (conv3d's Y: bench/README.md, "predicted seconds").
 */
enum { SLAB_MAX = 4 << 20 };

typedef struct Slab {
	int p, d0;
	int64_t hmax;                   /* a slab's most indices of dim p */
	int64_t pre[TRT_MAXDIM], a, h;  /* this slab */
	int64_t f;                      /* the chunks it meets */
} Slab;

/* The first slab of t (dense, nkeys > 0), whose runs span dims d0.. */
static Slab slab_first(const TrtType *t, int d0)
{
	Slab s = { .d0 = d0 };
	double unit = (double)rt_dtype_size(t->dtype);
	int p = t->nkey - 1;
	while (p > 0 && unit * (double)t->extent[p] <= SLAB_MAX) {
		unit *= (double)t->extent[p];
		p--;
	}
	s.p = p;
	s.hmax = (int64_t)(SLAB_MAX / unit);
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

/* The position of key among r's tuples (sorted, see check_complete). */
static int64_t tuple_of(const TrtRel *r, const int64_t *key)
{
	int64_t lo = 0, hi = r->n;
	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;
		int c = rt_key_cmp(r->keys + mid * r->type.nkey, key, r->type.nkey);
		if (c == 0)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	rt_bug("writing: rank %d lacks a chunk it owns", rt.rank);
	return -1;
}

/* A chunk the slab meets, at hand on rank 0: its portion's data, and the
 * chunk's block and strides. */
typedef struct Portion {
	const char *data;
	RtBlock b;
	int64_t cstride[TRT_MAXDIM];
} Portion;

/* Rank 0: the slab's runs in file order into bt. */
static void slab_runs(Batch *bt, const TrtType *t, const Slab *s, const Portion *po,
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
		batch_add(bt, data_offset + base * (int64_t)es, (char *)po[0].data,
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
			batch_add(bt, at, (char *)q->data + (size_t)in * es, len);
			at += (int64_t)len;
		}
		int d = d0 - 1;
		while (d > p && ++idx[d] == t->extent[d])
			idx[d--] = 0;
		if (d == p && ++idx[p] == s->a + s->h)
			break;
	}
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
	Batch *bt = NULL;
	Chunk *bufc = NULL;
	int err = 0;

	if (rt.rank == 0) {
		long iov_max = sysconf(_SC_IOV_MAX);
		bt = rt_alloc(sizeof *bt);
		*bt = (Batch){ .fd = out->fd, .ok = 1, .out = out,
		               .max = iov_max > 0 && iov_max < MAX_IOV ? (int)iov_max : MAX_IOV };
		if (r->place.kind == TRT_PART && rt.nranks > 1) {
			int64_t unit = 1;
			for (int d = s.p + 1; d < t->nkey; d++)
				unit *= t->extent[d];
			bufc = rt_chunk_new((size_t)(s.hmax * unit) * es);      /* see rt_write_rel */
		}
	}
	do {
		char *buf = bufc ? rt_chunk_data(bufc) : NULL;
		for (int64_t c = 0; c < s.f; c++) {
			slab_key(t, &s, c, key);
			int site = r->place.kind == TRT_ALL ? 0 : trt_site(&r->place, t, key);
			if (site != rt.rank && rt.rank != 0)
				continue;
			RtBlock b;
			rt_block_of(t, key, &b);
			int64_t n = slab_portion(t, &s, &b, cstride, &off);
			const char *data = NULL;
			if (site == rt.rank)
				data = (const char *)rt_chunk_data(r->chunks[tuple_of(r, key)]) + (size_t)off * es;
			if (rt.rank != 0) {
				rt_send_bytes(data, (size_t)n * es, 0, TAG_WRITE);
				continue;
			}
			if (site != 0) {
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
			batch_flush(bt);
			if (!bt->ok)
				err = errno ? errno : EIO;
		}
	} while (slab_next(t, &s));
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
		bufc = rt_chunk_new(maxbytes);
		buf = rt_chunk_data(bufc);
	}
	if (rt.rank != 0) {
		/* every key this rank owns, in order (a sparse relation's absent
		 * ones as zeros): rank 0 expects them all */
		for (int64_t lin = 0; r->place.kind == TRT_PART && lin < nk; lin++) {
			rt_key_from_linear(t, lin, key);
			if (trt_site(&r->place, t, key) == rt.rank)
				rt_send_bytes(dense_of(r, key, &at, buf), rt_chunk_bytes(t, key), 0, TAG_WRITE);
		}
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
		if (site == 0) {
			data = dense_of(r, key, &at, buf);
		} else {
			rt_recv_bytes(buf, nb, site, TAG_WRITE);
			data = buf;
		}
		if (!err && !write_chunk(out, data_offset, t, key, data, nb))
			err = errno ? errno : EIO;
	}
	rt_chunk_unref(bufc);
	return err;
}

int rt_write_rel(int fd, int64_t data_offset, const TrtRel *r)
{
	Out out = out_open(fd, 0, 0);
	return write_rel(&out, data_offset, r);
}
