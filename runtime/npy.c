/*
 * npy.c: .npy files' headers: parsed and checked against the tensor when
 * reading, made when writing; opening an input; the one line of a bad
 * file.  read.c and write.c move the data.
 *
 * Accepted: versions 1.0, 2.0 and 3.0, dtype exactly the tensor's (<f4 or
 * <f8; | and = are the same on a little-endian host), C order, the declared
 * shape.  Nothing is converted.  Every problem is one line:
 *
 *     prog: input A (a.npy): shape (1000, 700) expected, found (700, 1000)
 */
#define _GNU_SOURCE                    /* pread, pwrite */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "libtracrt reads and writes little-endian .npy data in place: little-endian hosts only"
#endif

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
		if (n >= 4 && !memcmp(buf, "PK\3\4", 4))    /* a zip: a .npz */
			snprintf(why, whylen, "not a .npy file but a .npz (a zip); a .npz of scipy.sparse is read "
			         "into an input declared ': sparse'");
		else
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

/* ---- the tensors of the program ---- */

const TrtTensor *rt_tensor_of(int tensor, const TrtType *t)
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

const char *rt_no_path(const TrtTensor *x, char *msg, size_t len)
{
	snprintf(msg, len, "%s: %s %s: no file given (add %s=path.npy)", rt_progname(),
	         rt_role_name(x->role), x->name, x->name);
	return msg;
}
