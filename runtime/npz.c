/*
 * npz.c: sparse matrices in files -- scipy.sparse's .npz, read and written
 * -- and the compression of dense chunks into sparse ones.
 *
 * A .npz is a zip archive of .npy arrays, as numpy.savez makes it.
 * scipy.sparse.save_npz stores format.npy (the format's name: b'csr', or
 * 'csr' from old scipy), shape.npy (two integers), data.npy, and
 * indices.npy + indptr.npy (csr, csc) or row.npy + col.npy (coo).  Members
 * are stored or deflated, with zip64 records where numpy writes them (it
 * always forces zip64 local headers).  Index arrays are int32 or int64;
 * data is exactly the tensor's dtype, as for a .npy.
 *
 * Reading.  Every rank reads the zip's central directory and the members'
 * .npy headers, and the ranks agree on any problem there (rt_agree).  Then
 * each reads the elements it needs as far as the format allows: for csr,
 * the indptr entries of the rows its blocks cover, then only those rows'
 * stretches of indices and data (csc likewise by columns); for coo, every
 * triplet, keeping its own.  A stored member is read where the bytes are
 * (pread); a deflated one is inflated from its start up to the last byte
 * needed, through small buffers, what lies between being discarded.
 *
 * Elements go to a pile per block this rank owns; a pile is sorted by
 * position (stably: duplicates are summed in file order, as scipy sums
 * them), its duplicates summed and its zeros dropped, and becomes the
 * block's compressed chunk.  A block with nothing left has no tuple.
 *
 * Errors in the elements (an index out of range, indptr decreasing) are
 * found by the ranks that read them and agreed on at the end.  The ranks
 * together read every element, so a bad file fails on any rank count.  A
 * deflated member's CRC is checked by whichever ranks inflate it to its end
 * (at least one does, for the same reason); a stored member's is not
 * checked, as no rank reads all of it.
 *
 * Writing.  Rank 0 gathers the tuples and writes a csr .npz of stored
 * members, as save_npz(compressed=False) would: columns increasing within
 * rows, no duplicates, int32 indices when they fit.
 */
#define _POSIX_C_SOURCE 200809L        /* pread */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "rt.h"

int rt_npz_big;
int64_t rt_npz_rewinds;

enum { TAG_NPZ = 7002 };
enum { BATCH = 1 << 16 };               /* elements read or converted at a time */
enum { ZBUF = 1 << 16 };                /* compressed bytes read at a time */

/* ---- dense and sparse chunks ---- */

static int is_zero(TrtDtype dt, const void *v, int64_t e)
{
	switch (dt) {
	case TRT_F32: return ((const float *)v)[e] == 0;
	case TRT_F64: return ((const double *)v)[e] == 0;
	case TRT_I32: return ((const int32_t *)v)[e] == 0;
	case TRT_I64: return ((const int64_t *)v)[e] == 0;
	}
	rt_bug("bad dtype %d", (int)dt);
}

/* *acc += *x; integers wrap, as numpy's do. */
static void add_to(TrtDtype dt, void *acc, const void *x)
{
	switch (dt) {
	case TRT_F32: *(float *)acc += *(const float *)x; return;
	case TRT_F64: *(double *)acc += *(const double *)x; return;
	case TRT_I32: *(int32_t *)acc = (int32_t)((uint32_t)*(int32_t *)acc + (uint32_t)*(const int32_t *)x); return;
	case TRT_I64: *(int64_t *)acc = (int64_t)((uint64_t)*(int64_t *)acc + (uint64_t)*(const int64_t *)x); return;
	}
	rt_bug("bad dtype %d", (int)dt);
}

/* A dense chunk is row-major over the chunk dims in chunk order, so its
 * element e is row e / ncol, column e % ncol of the compressed rows. */
Chunk *rt_csr_compress(const TrtType *t, const int64_t *key, const void *dense)
{
	size_t es = rt_dtype_size(t->dtype);
	int64_t nrow, ncol, nnz = 0;

	rt_csr_dims(t, key, &nrow, &ncol);
	for (int64_t e = 0; e < nrow * ncol; e++)
		nnz += !is_zero(t->dtype, dense, e);
	if (!nnz)
		return NULL;
	Chunk *c = rt_csr_new(t->dtype, nrow, ncol, nnz);
	RtCsr s = rt_csr_of(c, t->dtype);
	int64_t k = 0;
	for (int64_t r = 0; r < nrow; r++) {
		for (int64_t j = 0; j < ncol; j++) {
			int64_t e = r * ncol + j;
			if (is_zero(t->dtype, dense, e))
				continue;
			s.col[k] = j;
			memcpy((char *)s.val + (size_t)k * es, (const char *)dense + (size_t)e * es, es);
			k++;
		}
		s.rowptr[r + 1] = k;
	}
	return c;
}

void rt_csr_expand(const TrtType *t, const int64_t *key, const Chunk *sparse, void *dense)
{
	size_t es = rt_dtype_size(t->dtype);
	RtCsr s = rt_csr_of(sparse, t->dtype);
	int64_t nrow, ncol;

	rt_csr_dims(t, key, &nrow, &ncol);
	if (s.nrow != nrow || s.ncol != ncol)
		rt_bug("sparse chunk of %lld x %lld where %lld x %lld belongs", (long long)s.nrow,
		       (long long)s.ncol, (long long)nrow, (long long)ncol);
	memset(dense, 0, (size_t)(nrow * ncol) * es);
	for (int64_t r = 0; r < nrow; r++)
		for (int64_t k = s.rowptr[r]; k < s.rowptr[r + 1]; k++)
			memcpy((char *)dense + (size_t)(r * ncol + s.col[k]) * es,
			       (const char *)s.val + (size_t)k * es, es);
}

TrtRel *rt_sparse_of(TrtRel *r, const TrtType *t)
{
	TrtRel *out = trt_rel_new(t, r->place);

	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + i * t->nkey;
		Chunk *c = rt_csr_compress(t, key, rt_chunk_data(r->chunks[i]));
		if (c)
			rt_rel_push(out, key, c);
		/* one dense chunk at a time beside the sparse ones */
		rt_chunk_unref(r->chunks[i]);
		r->chunks[i] = NULL;
	}
	trt_free(r);
	return out;
}

/* Element idx's position (idx: an index per key dim into the tensor) in
 * key's chunk: row-major over the chunk dims in chunk order, which is
 * row * ncol + col of its compressed rows. */
static int64_t cell_of(const TrtType *t, const int64_t *key, const int64_t *idx)
{
	int64_t cell = 0;

	for (int c = 0; c < t->nchunk; c++) {
		int d = t->chunkdim[c];
		int64_t start = key[d] * t->block[d];
		int64_t n = t->extent[d] - start < t->block[d] ? t->extent[d] - start : t->block[d];
		cell = cell * n + (idx[d] - start);
	}
	return cell;
}

/* The way back: the tensor index of position cell of key's chunk. */
static void index_of(const TrtType *t, const int64_t *key, int64_t cell, int64_t *idx)
{
	for (int d = 0; d < t->nkey; d++)
		idx[d] = key[d] * t->block[d];
	for (int c = t->nchunk - 1; c >= 0; c--) {
		int d = t->chunkdim[c];
		int64_t n = t->extent[d] - idx[d] < t->block[d] ? t->extent[d] - idx[d] : t->block[d];
		idx[d] += cell % n;
		cell /= n;
	}
}

/* ---- the zip directory ---- */

enum {
	LOCAL_SIG = 0x04034b50, CENTRAL_SIG = 0x02014b50, END_SIG = 0x06054b50,
	END64_SIG = 0x06064b50, LOC64_SIG = 0x07064b50,
	LOCAL_LEN = 30, CENTRAL_LEN = 46, END_LEN = 22, END64_LEN = 56, LOC64_LEN = 20,
};
#define MAX_DIR ((int64_t)64 << 20)     /* numpy's directories list a few arrays */
#define FFFF32 0xffffffffu

static uint32_t get16(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t get32(const unsigned char *p)
{
	return get16(p) | get16(p + 2) << 16;
}

static uint64_t get64(const unsigned char *p)
{
	return get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* A member as the central directory lists it. */
typedef struct Member {
	char name[64];                  /* "" when longer: none we look for */
	int flags, method;
	uint32_t crc;
	uint64_t csize, usize, local;   /* local: its local header's offset */
} Member;

typedef struct Zip {
	int fd;
	int64_t size;
	int64_t n;
	Member *m;
} Zip;

/* Reads n bytes at off, all of them; 0 with why ("truncated" when the file
 * ends first). */
static int read_at(int fd, void *buf, size_t n, int64_t off, char *why, size_t len)
{
	ssize_t k = rt_pread_full(fd, buf, n, off);
	if (k < 0)
		snprintf(why, len, "%s", rt_errstr(errno));
	else if ((size_t)k < n)
		snprintf(why, len, "truncated zip file");
	return k >= 0 && (size_t)k == n;
}

/* The zip64 extra field (id 1) of a central entry holds, in this order, the
 * 64-bit usize, csize and local offset whose 32-bit fields are FFFF32. */
static int zip64_extra(const unsigned char *x, size_t len, Member *m)
{
	while (len >= 4) {
		size_t id = get16(x), n = get16(x + 2);
		if (4 + n > len)
			return 0;
		if (id == 1) {
			uint64_t *field[3] = { &m->usize, &m->csize, &m->local };
			const unsigned char *v = x + 4;
			for (int f = 0; f < 3; f++) {
				if (*field[f] != FFFF32)
					continue;
				if (v + 8 > x + 4 + n)
					return 0;
				*field[f] = get64(v);
				v += 8;
			}
			return 1;
		}
		x += 4 + n;
		len -= 4 + n;
	}
	return m->usize != FFFF32 && m->csize != FFFF32 && m->local != FFFF32;
}

/* Finds the end of central directory record in the file's last bytes (it
 * ends the file, after a comment of up to 64 KiB); its offset, or -1. */
static int64_t find_end(Zip *z, unsigned char *rec, char *why, size_t len)
{
	int64_t tail = z->size < END_LEN + 65535 ? z->size : END_LEN + 65535;
	unsigned char *buf = rt_alloc((size_t)tail);
	int64_t at = -1;

	if (read_at(z->fd, buf, (size_t)tail, z->size - tail, why, len)) {
		for (int64_t i = tail - END_LEN; i >= 0; i--)
			if (get32(buf + i) == END_SIG && i + END_LEN + get16(buf + i + 20) == tail) {
				at = z->size - tail + i;
				memcpy(rec, buf + i, END_LEN);
				break;
			}
		if (at < 0) {
			unsigned char head[4] = { 0 };
			rt_pread_full(z->fd, head, sizeof head, 0);
			snprintf(why, len, get32(head) == LOCAL_SIG ? "truncated zip file: no end of central directory"
			                                            : "not a .npz (zip) file");
		}
	}
	free(buf);
	return at;
}

/* One central directory entry at p (left bytes of the directory there);
 * its length, or 0 when malformed. */
static size_t parse_entry(const unsigned char *p, size_t left, Member *m)
{
	if (left < CENTRAL_LEN || get32(p) != CENTRAL_SIG)
		return 0;
	size_t nlen = get16(p + 28), elen = get16(p + 30), clen = get16(p + 32);
	if (CENTRAL_LEN + nlen + elen + clen > left)
		return 0;
	memset(m, 0, sizeof *m);
	m->flags = (int)get16(p + 8);
	m->method = (int)get16(p + 10);
	m->crc = get32(p + 16);
	m->csize = get32(p + 20);
	m->usize = get32(p + 24);
	m->local = get32(p + 42);
	if (nlen < sizeof m->name)
		memcpy(m->name, p + CENTRAL_LEN, nlen);
	if (!zip64_extra(p + CENTRAL_LEN + nlen, elen, m))
		return 0;
	return CENTRAL_LEN + nlen + elen + clen;
}

/* Reads the central directory of the zip in fd (size bytes). */
static int zip_open(Zip *z, int fd, int64_t size, char *why, size_t len)
{
	unsigned char end[END_LEN], loc[LOC64_LEN], end64[END64_LEN];

	memset(z, 0, sizeof *z);
	z->fd = fd;
	z->size = size;
	int64_t at = find_end(z, end, why, len);
	if (at < 0)
		return 0;
	uint64_t count = get16(end + 10), dsize = get32(end + 12), doff = get32(end + 16);
	uint64_t limit = (uint64_t)at;  /* the directory ends before this */
	if (at >= LOC64_LEN) {
		if (!read_at(fd, loc, LOC64_LEN, at - LOC64_LEN, why, len))
			return 0;
		if (get32(loc) == LOC64_SIG) {
			uint64_t off = get64(loc + 8);
			if (off > (uint64_t)(at - LOC64_LEN) - END64_LEN ||
			    !read_at(fd, end64, END64_LEN, (int64_t)off, why, len) || get32(end64) != END64_SIG) {
				snprintf(why, len, "malformed zip file: bad zip64 end of central directory");
				return 0;
			}
			count = get64(end64 + 32);
			dsize = get64(end64 + 40);
			doff = get64(end64 + 48);
			limit = off;
		}
	}
	if (doff > limit || dsize > limit - doff || dsize > (uint64_t)MAX_DIR ||
	    count > dsize / CENTRAL_LEN) {
		snprintf(why, len, "malformed zip file: bad central directory");
		return 0;
	}
	unsigned char *dir = rt_alloc((size_t)dsize);
	z->m = rt_alloc(sizeof *z->m * (size_t)(count + 1));
	int ok = read_at(fd, dir, (size_t)dsize, (int64_t)doff, why, len);
	size_t pos = 0;
	for (z->n = 0; ok && (uint64_t)z->n < count; z->n++) {
		size_t k = parse_entry(dir + pos, (size_t)dsize - pos, &z->m[z->n]);
		if (!k) {
			snprintf(why, len, "malformed zip file: bad central directory");
			ok = 0;
		}
		pos += k;
	}
	free(dir);
	return ok;
}

static void zip_close(Zip *z)
{
	free(z->m);
	z->m = NULL;
}

/* The member of that name (the last, as Python's zipfile takes), or NULL. */
static const Member *zip_find(const Zip *z, const char *name)
{
	const Member *m = NULL;

	for (int64_t i = 0; i < z->n; i++)
		if (!strcmp(z->m[i].name, name))
			m = &z->m[i];
	return m;
}

/* ---- members: stored ones read where they lie, deflated ones inflated
 * forward ---- */

typedef struct Stream {
	int fd;
	char name[64];
	int deflated;
	int64_t data;                   /* file offset of the member's first byte */
	int64_t csize, usize;
	uint32_t crc;                   /* the directory's */
	z_stream z;                     /* deflated: */
	int zlive, ended;
	int64_t pos, cpos;              /* bytes inflated, compressed bytes fed */
	uint32_t run;                   /* CRC-32 of the bytes inflated */
	unsigned char *in, *skip;
} Stream;

static int stream_open(const Zip *z, const char *name, Stream *s, char *why, size_t len)
{
	const Member *m = zip_find(z, name);
	unsigned char h[LOCAL_LEN];

	memset(s, 0, sizeof *s);
	snprintf(s->name, sizeof s->name, "%s", name);
	if (!m) {
		snprintf(why, len, "no member %s", name);
		return 0;
	}
	if (m->flags & 1) {
		snprintf(why, len, "%s is encrypted", name);
		return 0;
	}
	if (m->method != 0 && m->method != Z_DEFLATED) {
		snprintf(why, len, "%s: compression method %d not supported (stored or deflated expected)",
		         name, m->method);
		return 0;
	}
	if (m->local > (uint64_t)z->size || !read_at(z->fd, h, LOCAL_LEN, (int64_t)m->local, why, len) ||
	    get32(h) != LOCAL_SIG) {
		snprintf(why, len, "malformed zip file: no local header for %s", name);
		return 0;
	}
	uint64_t data = m->local + LOCAL_LEN + get16(h + 26) + get16(h + 28);
	if (data > (uint64_t)z->size || m->csize > (uint64_t)z->size - data) {
		snprintf(why, len, "truncated zip file: %s goes past its end", name);
		return 0;
	}
	if (m->usize > (uint64_t)INT64_MAX / 2) {
		snprintf(why, len, "malformed zip file: %s is %llu bytes", name, (unsigned long long)m->usize);
		return 0;
	}
	s->fd = z->fd;
	s->data = (int64_t)data;
	s->csize = (int64_t)m->csize;
	s->usize = (int64_t)m->usize;
	s->crc = m->crc;
	s->deflated = m->method == Z_DEFLATED;
	if (!s->deflated && s->csize != s->usize) {
		snprintf(why, len, "malformed zip file: %s is stored in %lld bytes but holds %lld", name,
		         (long long)s->csize, (long long)s->usize);
		return 0;
	}
	if (s->deflated) {
		/* raw deflate: a zip member has no zlib header */
		if (inflateInit2(&s->z, -MAX_WBITS) != Z_OK)
			rt_oom(sizeof s->z, "an inflater");
		s->zlive = 1;
		s->run = (uint32_t)crc32(0, NULL, 0);
		s->in = rt_alloc(ZBUF);
	}
	return 1;
}

static void stream_close(Stream *s)
{
	if (s->zlive)
		inflateEnd(&s->z);
	s->zlive = 0;
	free(s->in);
	free(s->skip);
	s->in = s->skip = NULL;
}

/* Feeds the inflater from the file and runs it once. */
static int inflate_step(Stream *s, char *why, size_t len)
{
	if (!s->z.avail_in && s->cpos < s->csize) {
		size_t k = s->csize - s->cpos < ZBUF ? (size_t)(s->csize - s->cpos) : ZBUF;
		if (!read_at(s->fd, s->in, k, s->data + s->cpos, why, len))
			return 0;
		s->cpos += (int64_t)k;
		s->z.next_in = s->in;
		s->z.avail_in = (uInt)k;
	}
	int zr = inflate(&s->z, Z_NO_FLUSH);
	if (zr == Z_STREAM_END)
		s->ended = 1;
	if (zr == Z_OK || zr == Z_STREAM_END)
		return 1;
	if (zr == Z_MEM_ERROR)
		rt_oom(0, "an inflater");
	if (zr == Z_BUF_ERROR && !s->z.avail_in && s->cpos == s->csize)
		snprintf(why, len, "%s: deflate stream cut short", s->name);
	else
		snprintf(why, len, "%s: corrupt deflate stream (%s)", s->name, s->z.msg ? s->z.msg : zError(zr));
	return 0;
}

/* At the member's last byte: the stream must end there, with the CRC the
 * directory gives. */
static int check_end(Stream *s, char *why, size_t len)
{
	unsigned char extra;

	while (!s->ended) {
		s->z.next_out = &extra;
		s->z.avail_out = 1;
		if (!inflate_step(s, why, len))
			return 0;
		if (!s->z.avail_out) {
			snprintf(why, len, "%s: longer than the zip directory says", s->name);
			return 0;
		}
	}
	if (s->run != s->crc) {
		snprintf(why, len, "%s: CRC mismatch, the member is corrupt", s->name);
		return 0;
	}
	return 1;
}

/* The next n bytes of a deflated member into out. */
static int inflate_into(Stream *s, unsigned char *out, size_t n, char *why, size_t len)
{
	while (n) {
		uInt piece = n < (1u << 30) ? (uInt)n : 1u << 30;
		s->z.next_out = out;
		s->z.avail_out = piece;
		while (s->z.avail_out) {
			if (s->ended) {
				snprintf(why, len, "%s: deflate stream ends before the %lld bytes the zip directory says",
				         s->name, (long long)s->usize);
				return 0;
			}
			if (!inflate_step(s, why, len))
				return 0;
		}
		s->run = (uint32_t)crc32(s->run, out, piece);
		s->pos += piece;
		out += piece;
		n -= piece;
	}
	return s->pos < s->usize || check_end(s, why, len);
}

/* Back to a deflated member's first byte, to inflate it again from there:
 * a deflate stream cannot be entered in the middle.  The readers go
 * forward through each member; this is for those that cannot. */
static void stream_rewind(Stream *s)
{
	if (inflateReset(&s->z) != Z_OK)
		rt_bug("%s: inflateReset failed", s->name);
	s->z.avail_in = 0;
	s->ended = 0;
	s->pos = s->cpos = 0;
	s->run = (uint32_t)crc32(0, NULL, 0);
	rt_npz_rewinds++;
}

/* Reads bytes [off, off + n) of the member into buf: a stored member's
 * where they lie; a deflated one's by inflating on from the bytes read
 * before (what lies between is inflated and dropped), or from the start
 * again when off is before them. */
static int stream_read(Stream *s, int64_t off, void *buf, size_t n, char *why, size_t len)
{
	if (off < 0 || off > s->usize || (int64_t)n > s->usize - off)
		rt_bug("read of bytes %lld..+%zu of %s, which has %lld", (long long)off, n, s->name,
		       (long long)s->usize);
	if (!s->deflated)
		return read_at(s->fd, buf, n, s->data + off, why, len);
	if (off < s->pos)
		stream_rewind(s);
	while (s->pos < off) {
		if (!s->skip)
			s->skip = rt_alloc(ZBUF);
		size_t k = off - s->pos < ZBUF ? (size_t)(off - s->pos) : ZBUF;
		if (!inflate_into(s, s->skip, k, why, len))
			return 0;
	}
	return inflate_into(s, buf, n, why, len);
}

/* ---- the members' .npy arrays ---- */

typedef struct Arr {
	Stream s;
	NpyHeader h;
	size_t es;                      /* element size once checked */
} Arr;

/* Opens member name and parses its .npy header. */
static int arr_open(const Zip *z, const char *name, Arr *a, char *why, size_t len)
{
	unsigned char head[12];
	char w[256];

	memset(a, 0, sizeof *a);
	if (!stream_open(z, name, &a->s, why, len))
		return 0;
	size_t k = a->s.usize < 12 ? (size_t)a->s.usize : 12;
	if (!stream_read(&a->s, 0, head, k, why, len))
		return 0;
	size_t want = rt_npy_head_len(head, k);
	if ((int64_t)want > a->s.usize)
		want = (size_t)a->s.usize;
	unsigned char *buf = rt_alloc(want);
	memcpy(buf, head, k);
	int ok = stream_read(&a->s, (int64_t)k, buf + k, want - k, why, len);
	if (ok && !rt_npy_parse(buf, want, &a->h, w, sizeof w)) {
		snprintf(why, len, "%s: %s", name, w);
		ok = 0;
	}
	free(buf);
	return ok;
}

/* Checks that a holds n elements of dtype dt in one dimension. */
static int arr_check(Arr *a, TrtDtype dt, int64_t n, char *why, size_t len)
{
	TrtTensor t = { a->s.name, TRT_INPUT, dt, 1, { n }, NULL, 0 };
	char w[400];

	if (!rt_npy_check(&a->h, &t, a->s.usize, w, sizeof w)) {
		snprintf(why, len, "%s: %s", a->s.name, w);
		return 0;
	}
	a->es = rt_dtype_size(dt);
	return 1;
}

/* The dtype of an index array: int32 or int64, as scipy picks. */
static int index_dtype(const Arr *a, TrtDtype *dt, char *why, size_t len)
{
	const char *d = a->h.descr;

	if (d[0] && strchr("<|=", d[0]) && !strcmp(d + 1, "i4"))
		*dt = TRT_I32;
	else if (d[0] && strchr("<|=", d[0]) && !strcmp(d + 1, "i8"))
		*dt = TRT_I64;
	else {
		snprintf(why, len, "%s: dtype int32 or int64 expected, found %s", a->s.name, d);
		return 0;
	}
	return 1;
}

/* Elements first .. first+count-1 of a checked index array, as int64s. */
static int arr_ints(Arr *a, int64_t first, int64_t count, int64_t *out, char *why, size_t len)
{
	int64_t off = a->h.data_offset + first * (int64_t)a->es;

	if (!stream_read(&a->s, off, out, (size_t)count * a->es, why, len))
		return 0;
	/* widen in place from the back: element k's int32 sits below its int64 */
	for (int64_t k = a->es == 4 ? count - 1 : -1; k >= 0; k--) {
		int32_t v;
		memcpy(&v, (char *)out + 4 * k, 4);
		out[k] = v;
	}
	return 1;
}

static int arr_vals(Arr *a, int64_t first, int64_t count, void *out, char *why, size_t len)
{
	int64_t off = a->h.data_offset + first * (int64_t)a->es;
	return stream_read(&a->s, off, out, (size_t)count * a->es, why, len);
}

/* The characters of a numpy string scalar's dtype, bytes ('|S3', what
 * scipy writes) or unicode ('<U3', from older scipy), and the bytes of
 * each (*unit); 0 for any other dtype. */
static int string_width(const NpyHeader *h, int *unit)
{
	const char *d = h->descr;

	if (d[0] && strchr("<|=", d[0]))
		d++;
	if (h->rank != 0 || (d[0] != 'S' && d[0] != 'U'))
		return 0;
	*unit = d[0] == 'U' ? 4 : 1;
	int width = atoi(d + 1);
	return width > 0 && width <= 16 ? width : 0;
}

/* format.npy: the format's name, in ASCII. */
static int read_format(const Zip *z, char *fmt, size_t fmtlen, char *why, size_t len)
{
	Arr a;
	unsigned char buf[64];
	int unit = 1, width = 0;

	int ok = arr_open(z, "format.npy", &a, why, len);
	if (ok && !(width = string_width(&a.h, &unit))) {
		snprintf(why, len, "format.npy: a short string expected, found dtype %s", a.h.descr);
		ok = 0;
	}
	if (ok && a.s.usize - a.h.data_offset < width * unit) {
		snprintf(why, len, "format.npy: truncated");
		ok = 0;
	}
	ok = ok && stream_read(&a.s, a.h.data_offset, buf, (size_t)(width * unit), why, len);
	size_t n = 0;
	for (int i = 0; ok && i < width && n + 1 < fmtlen; i++) {
		uint32_t ch = unit == 4 ? get32(buf + 4 * i) : buf[i];
		if (!ch)
			break;
		fmt[n++] = ch >= ' ' && ch < 127 ? (char)ch : '?';
	}
	fmt[n] = 0;
	stream_close(&a.s);
	return ok;
}

/* shape.npy: the matrix's two extents. */
static int read_shape(const Zip *z, int64_t *shape, char *why, size_t len)
{
	Arr a;
	TrtDtype dt;

	int ok = arr_open(z, "shape.npy", &a, why, len) && index_dtype(&a, &dt, why, len) &&
	         arr_check(&a, dt, 2, why, len) && arr_ints(&a, 0, 2, shape, why, len);
	stream_close(&a.s);
	return ok;
}

/* ---- from the file's elements to blocks ---- */

/* The elements of one block, as read: position in the chunk and value. */
typedef struct Pile {
	int64_t n, cap;
	int64_t *cell;
	char *val;
} Pile;

typedef struct Reader {
	const TrtTensor *x;
	const TrtType *t;
	size_t es;
	int64_t f1;                     /* frontier of key dim 1 */
	char *own;                      /* per key, row-major: this rank keeps the block */
	Pile *pile;                     /* per key */
	int64_t nnz;                    /* stored elements in the file */
	Arr data, idx, ptr;             /* csr, csc: data, indices, indptr */
	Arr row, col;                   /* coo: data, row, col */
} Reader;

/* Element (i, j) of the matrix, of value v: into its block's pile, if this
 * rank keeps the block. */
static void keep(Reader *rd, int64_t i, int64_t j, const char *v)
{
	const TrtType *t = rd->t;
	int64_t idx[2] = { i, j }, key[2] = { i / t->block[0], j / t->block[1] };
	int64_t lin = key[0] * rd->f1 + key[1];

	if (!rd->own[lin])
		return;
	Pile *p = &rd->pile[lin];
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 16;
		p->cell = rt_realloc(p->cell, sizeof *p->cell * (size_t)p->cap);
		p->val = rt_realloc(p->val, rd->es * (size_t)p->cap);
	}
	p->cell[p->n] = cell_of(t, key, idx);
	memcpy(p->val + (size_t)p->n * rd->es, v, rd->es);
	p->n++;
}

/* indptr[l0 .. l0+k] in p: starts at 0, never decreases, ends at nnz. */
static int check_ptr(const Reader *rd, const int64_t *p, int64_t l0, int64_t k, int64_t lines,
                     char *why, size_t len)
{
	const char *name = rd->ptr.s.name;

	for (int64_t q = 0; q <= k; q++) {
		int64_t at = l0 + q;
		if (at == 0 && p[q] != 0) {
			snprintf(why, len, "%s: starts at %lld, not 0", name, (long long)p[q]);
			return 0;
		}
		if (at == lines && p[q] != rd->nnz) {
			snprintf(why, len, "%s: ends at %lld, not at the %lld elements of data.npy", name,
			         (long long)p[q], (long long)rd->nnz);
			return 0;
		}
		if (q > 0 && p[q] < p[q - 1]) {
			snprintf(why, len, "%s: decreases from %lld to %lld at entry %lld", name,
			         (long long)p[q - 1], (long long)p[q], (long long)at);
			return 0;
		}
		if (p[q] < 0 || p[q] > rd->nnz) {
			snprintf(why, len, "%s: entry %lld is %lld, outside [0, %lld]", name, (long long)at,
			         (long long)p[q], (long long)rd->nnz);
			return 0;
		}
	}
	return 1;
}

/* The elements of lines l0 .. l0+k-1 (rows of a csr, columns of a csc:
 * tensor dim major), whose indptr entries are p[0 .. k]. */
static int read_lines(Reader *rd, int major, const int64_t *p, int64_t l0, int64_t k,
                      int64_t *ix, char *val, char *why, size_t len)
{
	int64_t width = rd->t->extent[1 - major], q = 0;

	for (int64_t e0 = p[0]; e0 < p[k];) {
		int64_t m = p[k] - e0 < BATCH ? p[k] - e0 : BATCH;
		if (!arr_ints(&rd->idx, e0, m, ix, why, len) || !arr_vals(&rd->data, e0, m, val, why, len))
			return 0;
		for (int64_t i = 0; i < m; i++) {
			while (p[q + 1] <= e0 + i)
				q++;
			if (ix[i] < 0 || ix[i] >= width) {
				snprintf(why, len, "%s: index %lld in %s %lld is outside [0, %lld)", rd->idx.s.name,
				         (long long)ix[i], major ? "column" : "row", (long long)(l0 + q),
				         (long long)width);
				return 0;
			}
			if (major)
				keep(rd, ix[i], l0 + q, val + (size_t)i * rd->es);
			else
				keep(rd, l0 + q, ix[i], val + (size_t)i * rd->es);
		}
		e0 += m;
	}
	return 1;
}

/* csr (major 0: indptr runs over rows) or csc (major 1: over columns): the
 * lines of the blocks this rank owns, run by run of consecutive blocks, in
 * batches; a batch's p[0] is the last entry of the batch before. */
static int read_compressed(Reader *rd, int major, char *why, size_t len)
{
	const TrtType *t = rd->t;
	int64_t lines = t->extent[major], bl = t->block[major], f = rt_frontier(t, major);
	int64_t fo = rt_frontier(t, 1 - major);
	char *need = rt_alloc((size_t)f);
	int64_t *p = rt_alloc(sizeof *p * (BATCH + 1)), *ix = rt_alloc(sizeof *ix * BATCH);
	char *val = rt_alloc(rd->es * BATCH);
	int ok = 1;

	for (int64_t kb = 0; kb < f; kb++) {
		need[kb] = 0;
		for (int64_t ko = 0; ko < fo; ko++)
			need[kb] |= rd->own[major ? ko * rd->f1 + kb : kb * rd->f1 + ko];
	}
	for (int64_t kb = 0; ok && kb < f;) {
		if (!need[kb]) {
			kb++;
			continue;
		}
		int64_t ke = kb;
		while (ke < f && need[ke])
			ke++;
		int64_t lo = kb * bl, hi = ke * bl < lines ? ke * bl : lines;
		for (int64_t l0 = lo; ok && l0 < hi;) {
			int64_t k = hi - l0 < BATCH ? hi - l0 : BATCH;
			if (l0 == lo)
				ok = arr_ints(&rd->ptr, l0, k + 1, p, why, len);
			else
				ok = arr_ints(&rd->ptr, l0 + 1, k, p + 1, why, len);
			ok = ok && check_ptr(rd, p, l0, k, lines, why, len) &&
			     read_lines(rd, major, p, l0, k, ix, val, why, len);
			p[0] = p[k];
			l0 += k;
		}
		kb = ke;
	}
	free(need);
	free(p);
	free(ix);
	free(val);
	return ok;
}

/* coo: every triplet, in no order; each rank keeps its own. */
static int read_coo(Reader *rd, char *why, size_t len)
{
	int64_t *ri = rt_alloc(sizeof *ri * BATCH), *ci = rt_alloc(sizeof *ci * BATCH);
	char *val = rt_alloc(rd->es * BATCH);
	int ok = 1;

	for (int64_t e0 = 0; ok && e0 < rd->nnz;) {
		int64_t m = rd->nnz - e0 < BATCH ? rd->nnz - e0 : BATCH;
		ok = arr_ints(&rd->row, e0, m, ri, why, len) && arr_ints(&rd->col, e0, m, ci, why, len) &&
		     arr_vals(&rd->data, e0, m, val, why, len);
		for (int64_t i = 0; ok && i < m; i++) {
			Arr *bad = ri[i] < 0 || ri[i] >= rd->t->extent[0] ? &rd->row :
			           ci[i] < 0 || ci[i] >= rd->t->extent[1] ? &rd->col : NULL;
			if (bad) {
				int64_t v = bad == &rd->row ? ri[i] : ci[i];
				snprintf(why, len, "%s: index %lld of element %lld is outside [0, %lld)", bad->s.name,
				         (long long)v, (long long)(e0 + i),
				         (long long)rd->t->extent[bad == &rd->row ? 0 : 1]);
				ok = 0;
				break;
			}
			keep(rd, ri[i], ci[i], val + (size_t)i * rd->es);
		}
		e0 += m;
	}
	free(ri);
	free(ci);
	free(val);
	return ok;
}

static int cmp_cell(int64_t a, int64_t b, const void *ctx)
{
	const Pile *p = ctx;
	return p->cell[a] < p->cell[b] ? -1 : p->cell[a] > p->cell[b];
}

/* Puts a pile in position order, elements of one position in file order. */
static void pile_sort(Pile *p, size_t es)
{
	int64_t sorted = 1;

	for (int64_t i = 1; i < p->n && sorted; i++)
		sorted = p->cell[i - 1] <= p->cell[i];
	if (sorted)
		return;
	int64_t *ord = rt_alloc(sizeof *ord * (size_t)p->n), *cell = rt_alloc(sizeof *cell * (size_t)p->n);
	char *val = rt_alloc(es * (size_t)p->n);
	for (int64_t i = 0; i < p->n; i++)
		ord[i] = i;
	rt_sort(ord, p->n, cmp_cell, p);
	for (int64_t i = 0; i < p->n; i++) {
		cell[i] = p->cell[ord[i]];
		memcpy(val + (size_t)i * es, p->val + (size_t)ord[i] * es, es);
	}
	free(ord);
	free(p->cell);
	free(p->val);
	p->cell = cell;
	p->val = val;
}

/* Key's chunk from its pile: sorted, duplicates summed, zeros dropped;
 * NULL when nothing is left. */
static Chunk *pile_chunk(const Reader *rd, Pile *p, const int64_t *key)
{
	TrtDtype dt = rd->t->dtype;
	size_t es = rd->es;
	int64_t m = 0, nrow, ncol;

	pile_sort(p, es);
	for (int64_t i = 0; i < p->n;) {
		/* the sum of the run at i goes to slot m, which is never after i */
		int64_t j = i + 1;
		char *acc = p->val + (size_t)m * es;
		memmove(acc, p->val + (size_t)i * es, es);
		for (; j < p->n && p->cell[j] == p->cell[i]; j++)
			add_to(dt, acc, p->val + (size_t)j * es);
		p->cell[m] = p->cell[i];
		m += !is_zero(dt, acc, 0);
		i = j;
	}
	if (!m)
		return NULL;
	rt_csr_dims(rd->t, key, &nrow, &ncol);
	Chunk *c = rt_csr_new(dt, nrow, ncol, m);
	RtCsr s = rt_csr_of(c, dt);
	memset(s.rowptr + 1, 0, sizeof *s.rowptr * (size_t)nrow);
	for (int64_t i = 0; i < m; i++) {
		s.rowptr[p->cell[i] / ncol + 1]++;
		s.col[i] = p->cell[i] % ncol;
	}
	for (int64_t r = 0; r < nrow; r++)
		s.rowptr[r + 1] += s.rowptr[r];
	memcpy(s.val, p->val, (size_t)m * es);
	return c;
}

/* The relation of the piles: blocks in key order, the empty ones absent. */
static TrtRel *piles_to_rel(Reader *rd, TrtPlace p)
{
	TrtRel *r = trt_rel_new(rd->t, p);
	int64_t key[2];

	for (int64_t lin = 0; lin < rt_nkeys(rd->t); lin++) {
		Pile *pl = &rd->pile[lin];
		rt_key_from_linear(rd->t, lin, key);
		Chunk *c = pl->n ? pile_chunk(rd, pl, key) : NULL;
		if (c)
			rt_rel_push(r, key, c);
		free(pl->cell);
		free(pl->val);
		pl->cell = NULL;
		pl->val = NULL;
	}
	return r;
}

/* ---- trt_read of a .npz ---- */

int rt_npz_wanted(const char *path)
{
	size_t n = strlen(path);
	unsigned char head[4];

	if (n >= 4 && !strcmp(path + n - 4, ".npz"))
		return 1;
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return 0;
	ssize_t k = rt_pread_full(fd, head, sizeof head, 0);
	close(fd);
	return k == 4 && (get32(head) == LOCAL_SIG || get32(head) == END_SIG);
}

/* A zip with no format.npy: numpy's savez of some arrays, most likely. */
static void plain_npz(const Zip *z, char *why, size_t len)
{
	size_t at = (size_t)snprintf(why, len, "a .npz of arrays (");
	for (int64_t i = 0; i < z->n && at < len; i++) {
		const char *name = z->m[i].name, *dot = strrchr(name, '.');
		int n = dot && !strcmp(dot, ".npy") ? (int)(dot - name) : (int)strlen(name);
		if (i == 4 && z->n > 5) {
			at += (size_t)snprintf(why + at, len - at, ", ... %lld in all", (long long)z->n);
			break;
		}
		at += (size_t)snprintf(why + at, len - at, "%s%.*s", i ? ", " : "", n, name);
	}
	if (at < len)
		snprintf(why + at, len - at, "), not a scipy.sparse matrix (no format.npy): save the matrix "
		         "with scipy.sparse.save_npz, or the dense array with numpy.save as a .npy");
}

/* The directory, format, shape and the members' headers, which every rank
 * reads: the format's members left open in rd.  Returns the format (0 csr,
 * 1 csc, 2 coo) or -1 with why. */
static int open_npz(Reader *rd, const Zip *z, char *why, size_t len)
{
	const TrtTensor *x = rd->x;
	char fmt[32];
	int64_t shape[2];
	TrtDtype dt;

	if (!zip_find(z, "format.npy")) {
		plain_npz(z, why, len);
		return -1;
	}
	if (!read_format(z, fmt, sizeof fmt, why, len))
		return -1;
	int kind = !strcmp(fmt, "csr") ? 0 : !strcmp(fmt, "csc") ? 1 : !strcmp(fmt, "coo") ? 2 : -1;
	if (kind < 0) {
		snprintf(why, len, "sparse format '%s' not supported (csr, csc or coo expected)", fmt);
		return -1;
	}
	if (!read_shape(z, shape, why, len))
		return -1;
	if (shape[0] != x->shape[0] || shape[1] != x->shape[1]) {
		char a[64], b[64];
		rt_shape_str(a, sizeof a, 2, x->shape);
		rt_shape_str(b, sizeof b, 2, shape);
		snprintf(why, len, "shape %s expected, found %s", a, b);
		return -1;
	}
	if (!arr_open(z, "data.npy", &rd->data, why, len))
		return -1;
	if (rd->data.h.rank != 1) {
		char b[256];
		rt_shape_str(b, sizeof b, rd->data.h.rank, rd->data.h.shape);
		snprintf(why, len, "data.npy: a 1-D array expected, found shape %s", b);
		return -1;
	}
	rd->nnz = rd->data.h.shape[0];
	if (!arr_check(&rd->data, x->dtype, rd->nnz, why, len))
		return -1;
	if (kind == 2) {
		int ok = arr_open(z, "row.npy", &rd->row, why, len) && index_dtype(&rd->row, &dt, why, len) &&
		         arr_check(&rd->row, dt, rd->nnz, why, len) &&
		         arr_open(z, "col.npy", &rd->col, why, len) && index_dtype(&rd->col, &dt, why, len) &&
		         arr_check(&rd->col, dt, rd->nnz, why, len);
		return ok ? kind : -1;
	}
	int ok = arr_open(z, "indices.npy", &rd->idx, why, len) && index_dtype(&rd->idx, &dt, why, len) &&
	         arr_check(&rd->idx, dt, rd->nnz, why, len) &&
	         arr_open(z, "indptr.npy", &rd->ptr, why, len) && index_dtype(&rd->ptr, &dt, why, len) &&
	         arr_check(&rd->ptr, dt, x->shape[kind] + 1, why, len);
	return ok ? kind : -1;
}

TrtRel *rt_npz_read(const TrtTensor *x, const char *path, const TrtType *t, TrtPlace p)
{
	char why[512], msg[1024];
	int64_t size, key[TRT_MAXDIM] = { 0 };
	Reader rd;
	Zip z;

	memset(&rd, 0, sizeof rd);
	memset(&z, 0, sizeof z);
	if (t->nkey != 2) {
		snprintf(why, sizeof why, "a .npz holds a matrix, not a tensor of %d dimensions", t->nkey);
		rt_tensor_msg(msg, sizeof msg, x, path, why);
		rt_agree(msg);
	}
	if (rt_nkeys(t) > 0) {
		RtBlock b;
		rt_block_of(t, key, &b);        /* checks the chunk dims */
	}
	int fd = rt_open_input(x, path, &size, msg, sizeof msg);
	rt_agree(fd < 0 ? msg : NULL);
	rd.x = x;
	rd.t = t;
	rd.es = rt_dtype_size(t->dtype);
	rd.f1 = rt_frontier(t, 1);
	int kind = zip_open(&z, fd, size, why, sizeof why) ? open_npz(&rd, &z, why, sizeof why) : -1;
	if (kind < 0)
		rt_tensor_msg(msg, sizeof msg, x, path, why);
	rt_agree(kind < 0 ? msg : NULL);

	int64_t nk = rt_nkeys(t);
	rd.own = rt_alloc((size_t)nk);
	rd.pile = rt_alloc(sizeof *rd.pile * (size_t)nk);
	memset(rd.pile, 0, sizeof *rd.pile * (size_t)nk);
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		rd.own[lin] = p.kind != TRT_PART || trt_site(&p, t, key) == rt.rank;
	}
	int ok = kind == 2 ? read_coo(&rd, why, sizeof why) : read_compressed(&rd, kind, why, sizeof why);
	TrtRel *r = piles_to_rel(&rd, p);
	Arr *arrs[] = { &rd.data, &rd.idx, &rd.ptr, &rd.row, &rd.col };
	for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
		stream_close(&arrs[i]->s);
	free(rd.own);
	free(rd.pile);
	zip_close(&z);
	close(fd);
	if (!ok)
		rt_tensor_msg(msg, sizeof msg, x, path, why);
	rt_agree(ok ? NULL : msg);
	return r;
}

/* The stored elements per block along a compressed matrix's major dim
 * (rows of a csr, columns of a csc), from its indptr alone: what
 * trt_balance places blocks by.  Returns the dim, or -1 for a coo file or
 * one that does not read: the read itself reports what is wrong. */
int rt_npz_block_counts(const TrtTensor *x, const char *path, const TrtType *t, double *count)
{
	char why[512], msg[1024];
	int64_t size;
	Reader rd;
	Zip z;

	if (t->nkey != 2)
		return -1;
	memset(&rd, 0, sizeof rd);
	memset(&z, 0, sizeof z);
	int fd = rt_open_input(x, path, &size, msg, sizeof msg);
	if (fd < 0)
		return -1;
	rd.x = x;
	rd.t = t;
	rd.es = rt_dtype_size(t->dtype);
	int kind = zip_open(&z, fd, size, why, sizeof why) ? open_npz(&rd, &z, why, sizeof why) : -1;
	if (kind == 0 || kind == 1) {
		int64_t lines = t->extent[kind], bl = t->block[kind];
		int64_t *p = rt_alloc(sizeof *p * (BATCH + 1));
		for (int64_t b = 0; b < rt_frontier(t, kind); b++)
			count[b] = 0;
		/* forward through indptr: a batch's p[0] is the last entry of the
		 * batch before */
		for (int64_t l0 = 0; kind >= 0 && l0 < lines;) {
			int64_t k = lines - l0 < BATCH ? lines - l0 : BATCH;
			if (!(l0 == 0 ? arr_ints(&rd.ptr, 0, k + 1, p, why, sizeof why)
			              : arr_ints(&rd.ptr, l0 + 1, k, p + 1, why, sizeof why))) {
				kind = -1;
				break;
			}
			for (int64_t i = 0; i < k; i++)
				count[(l0 + i) / bl] += (double)(p[i + 1] - p[i]);
			p[0] = p[k];
			l0 += k;
		}
		free(p);
	} else {
		kind = -1;
	}
	Arr *arrs[] = { &rd.data, &rd.idx, &rd.ptr, &rd.row, &rd.col };
	for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
		stream_close(&arrs[i]->s);
	zip_close(&z);
	close(fd);
	return kind;
}

/* ---- writing a csr .npz ---- */

static void put16(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
	put16(p, v & 0xffff);
	put16(p + 2, v >> 16);
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

/* A zip written front to back, stored members only, each's CRC patched
 * into its local header once its bytes are out. */
typedef struct ZipOut {
	int fd, err;                    /* err: the first errno */
	int64_t at;                     /* bytes so far */
	int n;
	struct {
		const char *name;
		uint32_t crc;
		int64_t size, off;
	} m[8];
} ZipOut;

/* Whether v needs zip64's 64-bit field (or tests want one anyway). */
static int big(int64_t v)
{
	return rt_npz_big || v >= (int64_t)FFFF32;
}

static void zout(ZipOut *zo, const void *buf, size_t n)
{
	if (!zo->err && !rt_pwrite_full(zo->fd, buf, n, zo->at))
		zo->err = errno ? errno : EIO;
	zo->at += (int64_t)n;
}

/* DOS time 0, date 1980-01-01: the same bytes on every run. */
enum { DOS_DATE = 0x21 };

static void member_begin(ZipOut *zo, const char *name, int64_t size)
{
	unsigned char h[LOCAL_LEN + 64 + 20];
	size_t nlen = strlen(name);
	int z64 = big(size);

	if (zo->n == (int)(sizeof zo->m / sizeof *zo->m) || nlen > 64)
		rt_bug("zip member %s does not fit", name);
	put32(h, LOCAL_SIG);
	put16(h + 4, z64 ? 45 : 20);    /* version needed: 4.5 for zip64 */
	put16(h + 6, 0);
	put16(h + 8, 0);                /* stored */
	put16(h + 10, 0);
	put16(h + 12, DOS_DATE);
	put32(h + 14, 0);               /* CRC, patched in member_end */
	put32(h + 18, z64 ? FFFF32 : (uint32_t)size);
	put32(h + 22, z64 ? FFFF32 : (uint32_t)size);
	put16(h + 26, (uint32_t)nlen);
	put16(h + 28, z64 ? 20 : 0);
	memcpy(h + LOCAL_LEN, name, nlen);
	if (z64) {
		unsigned char *x = h + LOCAL_LEN + nlen;
		put16(x, 1);
		put16(x + 2, 16);
		put64(x + 4, (uint64_t)size);
		put64(x + 12, (uint64_t)size);
	}
	zo->m[zo->n].name = name;
	zo->m[zo->n].crc = (uint32_t)crc32(0, NULL, 0);
	zo->m[zo->n].size = size;
	zo->m[zo->n].off = zo->at;
	zo->n++;
	zout(zo, h, LOCAL_LEN + nlen + (z64 ? 20 : 0));
}

/* n more bytes of the member begun last. */
static void member_put(ZipOut *zo, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	for (size_t done = 0; done < n;) {
		uInt piece = n - done < (1u << 30) ? (uInt)(n - done) : 1u << 30;
		zo->m[zo->n - 1].crc = (uint32_t)crc32(zo->m[zo->n - 1].crc, p + done, piece);
		done += piece;
	}
	zout(zo, buf, n);
}

static void member_end(ZipOut *zo)
{
	unsigned char crc[4];
	int64_t off = zo->m[zo->n - 1].off;
	size_t nlen = strlen(zo->m[zo->n - 1].name);
	int64_t start = off + LOCAL_LEN + (int64_t)nlen + (big(zo->m[zo->n - 1].size) ? 20 : 0);

	if (zo->at - start != zo->m[zo->n - 1].size)
		rt_bug("zip member %s: %lld bytes written, %lld announced", zo->m[zo->n - 1].name,
		       (long long)(zo->at - start), (long long)zo->m[zo->n - 1].size);
	put32(crc, zo->m[zo->n - 1].crc);
	if (!zo->err && !rt_pwrite_full(zo->fd, crc, 4, off + 14))
		zo->err = errno ? errno : EIO;
}

/* The central directory and its end records (zip64 ones when needed). */
static void zip_finish(ZipOut *zo)
{
	int64_t doff = zo->at;
	unsigned char h[CENTRAL_LEN + 64 + 28];

	for (int i = 0; i < zo->n; i++) {
		size_t nlen = strlen(zo->m[i].name);
		int z64 = big(zo->m[i].size) || big(zo->m[i].off);
		put32(h, CENTRAL_SIG);
		put16(h + 4, 3 << 8 | (z64 ? 45 : 20));     /* made on unix */
		put16(h + 6, z64 ? 45 : 20);
		put16(h + 8, 0);
		put16(h + 10, 0);
		put16(h + 12, 0);
		put16(h + 14, DOS_DATE);
		put32(h + 16, zo->m[i].crc);
		put32(h + 20, z64 ? FFFF32 : (uint32_t)zo->m[i].size);
		put32(h + 24, z64 ? FFFF32 : (uint32_t)zo->m[i].size);
		put16(h + 28, (uint32_t)nlen);
		put16(h + 30, z64 ? 28 : 0);
		put16(h + 32, 0);
		put16(h + 34, 0);
		put16(h + 36, 0);
		put32(h + 38, 0644u << 16);                 /* rw-r--r-- */
		put32(h + 42, z64 ? FFFF32 : (uint32_t)zo->m[i].off);
		memcpy(h + CENTRAL_LEN, zo->m[i].name, nlen);
		if (z64) {
			unsigned char *x = h + CENTRAL_LEN + nlen;
			put16(x, 1);
			put16(x + 2, 24);
			put64(x + 4, (uint64_t)zo->m[i].size);
			put64(x + 12, (uint64_t)zo->m[i].size);
			put64(x + 20, (uint64_t)zo->m[i].off);
		}
		zout(zo, h, CENTRAL_LEN + nlen + (z64 ? 28 : 0));
	}
	int64_t dsize = zo->at - doff;
	int z64 = big(doff) || big(dsize);
	if (z64) {
		unsigned char e[END64_LEN + LOC64_LEN];
		int64_t e64 = zo->at;
		put32(e, END64_SIG);
		put64(e + 4, END64_LEN - 12);   /* the record's size after this field */
		put16(e + 12, 3 << 8 | 45);
		put16(e + 14, 45);
		put32(e + 16, 0);
		put32(e + 20, 0);
		put64(e + 24, (uint64_t)zo->n);
		put64(e + 32, (uint64_t)zo->n);
		put64(e + 40, (uint64_t)dsize);
		put64(e + 48, (uint64_t)doff);
		put32(e + END64_LEN, LOC64_SIG);
		put32(e + END64_LEN + 4, 0);
		put64(e + END64_LEN + 8, (uint64_t)e64);
		put32(e + END64_LEN + 16, 1);
		zout(zo, e, sizeof e);
	}
	unsigned char e[END_LEN];
	put32(e, END_SIG);
	put16(e + 4, 0);
	put16(e + 6, 0);
	put16(e + 8, (uint32_t)zo->n);
	put16(e + 10, (uint32_t)zo->n);
	put32(e + 12, z64 ? FFFF32 : (uint32_t)dsize);
	put32(e + 16, z64 ? FFFF32 : (uint32_t)doff);
	put16(e + 20, 0);
	zout(zo, e, sizeof e);
}

/* A member holding a .npy array: its header, then nbytes of data. */
static void put_array(ZipOut *zo, const char *name, const char *descr, int rank,
                      const int64_t *shape, const void *data, size_t nbytes)
{
	char head[256];
	size_t hlen = rt_npy_header_of(descr, rank, shape, head, sizeof head);

	if (!hlen)
		rt_bug("npy header of %s does not fit", name);
	member_begin(zo, name, (int64_t)(hlen + nbytes));
	member_put(zo, head, hlen);
	member_put(zo, data, nbytes);
	member_end(zo);
}

/* A member holding the int64s a[0..n) as int32s (narrow) or int64s. */
static void put_ints(ZipOut *zo, const char *name, int narrow, const int64_t *a, int64_t n)
{
	char head[256];
	size_t hlen = rt_npy_header_of(narrow ? "<i4" : "<i8", 1, &n, head, sizeof head);

	if (!hlen)
		rt_bug("npy header of %s does not fit", name);
	member_begin(zo, name, (int64_t)hlen + n * (narrow ? 4 : 8));
	member_put(zo, head, hlen);
	if (!narrow) {
		member_put(zo, a, (size_t)n * 8);
	} else {
		int32_t *buf = rt_alloc(sizeof *buf * BATCH);
		for (int64_t i = 0; i < n; i += BATCH) {
			int64_t m = n - i < BATCH ? n - i : BATCH;
			for (int64_t k = 0; k < m; k++)
				buf[k] = (int32_t)a[i + k];
			member_put(zo, buf, sizeof *buf * (size_t)m);
		}
		free(buf);
	}
	member_end(zo);
}

/* Rank 0: every tuple of r, sorted by key; the other ranks send theirs
 * (when r is partitioned) and get NULL.  Chunks are sparse, so of sizes
 * rank 0 cannot know: each rank sends its count, keys, sizes, then chunks. */
static TrtRel *gather(const TrtRel *r)
{
	const TrtType *t = &r->type;
	size_t kb = sizeof(int64_t) * (size_t)t->nkey;

	if (r->place.kind != TRT_PART || rt.nranks == 1)
		return rt.rank == 0 ? trt_rel_clone(r) : NULL;
	if (rt.rank != 0) {
		int64_t n = r->n;
		rt_send_bytes(&n, sizeof n, 0, TAG_NPZ);
		if (!n)
			return NULL;
		int64_t *sizes = rt_alloc(sizeof *sizes * (size_t)n);
		for (int64_t i = 0; i < n; i++)
			sizes[i] = (int64_t)r->chunks[i]->nbytes;
		rt_send_bytes(r->keys, kb * (size_t)n, 0, TAG_NPZ);
		rt_send_bytes(sizes, sizeof *sizes * (size_t)n, 0, TAG_NPZ);
		for (int64_t i = 0; i < n; i++)
			rt_send_bytes(rt_chunk_data(r->chunks[i]), (size_t)sizes[i], 0, TAG_NPZ);
		free(sizes);
		return NULL;
	}
	TrtRel *all = trt_rel_clone(r);
	for (int src = 1; src < rt.nranks; src++) {
		int64_t n;
		rt_recv_bytes(&n, sizeof n, src, TAG_NPZ);
		if (!n)
			continue;
		int64_t *keys = rt_alloc(kb * (size_t)n), *sizes = rt_alloc(sizeof *sizes * (size_t)n);
		rt_recv_bytes(keys, kb * (size_t)n, src, TAG_NPZ);
		rt_recv_bytes(sizes, sizeof *sizes * (size_t)n, src, TAG_NPZ);
		for (int64_t i = 0; i < n; i++) {
			Chunk *c = rt_chunk_new((size_t)sizes[i]);
			rt_recv_bytes(rt_chunk_data(c), (size_t)sizes[i], src, TAG_NPZ);
			rt_rel_push(all, keys + i * t->nkey, c);
		}
		free(keys);
		free(sizes);
	}
	rt_rel_sort(all);
	return all;
}

/* The stored cells of r's tuple i, in the chunk's order (its flat index
 * over the chunk dims, as index_of reads it): a sparse chunk's elements, a
 * dense chunk's nonzeros (a dense matrix written to a .npz drops its zeros,
 * as scipy.sparse.csr_matrix does), each to f. */
static void each_cell(const TrtRel *r, int64_t i, void (*f)(void *ctx, int64_t cell, const char *v), void *ctx)
{
	const TrtType *t = &r->type;
	size_t es = rt_dtype_size(t->dtype);
	if (t->sparse) {
		RtCsr s = rt_csr_of(r->chunks[i], t->dtype);
		for (int64_t row = 0; row < s.nrow; row++)
			for (int64_t k = s.rowptr[row]; k < s.rowptr[row + 1]; k++)
				f(ctx, row * s.ncol + s.col[k], (const char *)s.val + (size_t)k * es);
		return;
	}
	static const char zero[16];
	int64_t len[TRT_MAXDIM], n = rt_chunk_shape(t, r->keys + i * t->nkey, len);
	const char *v = rt_chunk_data(r->chunks[i]);
	for (int64_t cell = 0; cell < n; cell++)
		if (memcmp(v + (size_t)cell * es, zero, es))
			f(ctx, cell, v + (size_t)cell * es);
}

typedef struct CsrFill {
	const TrtType *t;
	const int64_t *key;
	int64_t *ptr, *at, *ind;
	char *val;
	size_t es;
} CsrFill;

static void count_cell(void *ctx, int64_t cell, const char *v)
{
	CsrFill *c = ctx;
	int64_t idx[2];
	(void)v;
	index_of(c->t, c->key, cell, idx);
	c->ptr[idx[0] + 1]++;
}

static void put_cell(void *ctx, int64_t cell, const char *v)
{
	CsrFill *c = ctx;
	int64_t idx[2];
	index_of(c->t, c->key, cell, idx);
	int64_t q = c->at[idx[0]]++;
	c->ind[q] = idx[1];
	memcpy(c->val + (size_t)q * c->es, v, c->es);
}

/* The matrix's rows (ptr: nrow + 1 offsets) from the tuples of r, which are
 * in key order: a row's elements come chunk by chunk along it, and within
 * a chunk, in either chunk order, by increasing column. */
static void build_csr(const TrtRel *r, int64_t *ptr, int64_t **ind_out, char **val_out)
{
	const TrtType *t = &r->type;
	int64_t nrow = t->extent[0];
	CsrFill c = {.t = t, .ptr = ptr, .es = rt_dtype_size(t->dtype)};

	memset(ptr, 0, sizeof *ptr * (size_t)(nrow + 1));
	for (int64_t i = 0; i < r->n; i++) {
		c.key = r->keys + 2 * i;
		each_cell(r, i, count_cell, &c);
	}
	for (int64_t i = 0; i < nrow; i++)
		ptr[i + 1] += ptr[i];
	int64_t nnz = ptr[nrow];
	c.at = rt_alloc(sizeof *c.at * (size_t)(nrow + 1));
	c.ind = rt_alloc(sizeof *c.ind * (size_t)(nnz ? nnz : 1));
	c.val = rt_alloc(c.es * (size_t)(nnz ? nnz : 1));
	memcpy(c.at, ptr, sizeof *c.at * (size_t)(nrow + 1));
	for (int64_t i = 0; i < r->n; i++) {
		c.key = r->keys + 2 * i;
		each_cell(r, i, put_cell, &c);
	}
	free(c.at);
	*ind_out = c.ind;
	*val_out = c.val;
}

static const char *dtype_descr(TrtDtype d)
{
	static const char *const descr[] = {[TRT_F32] = "<f4", [TRT_F64] = "<f8", [TRT_I32] = "<i4", [TRT_I64] = "<i8"};
	rt_dtype_size(d);       /* checks d */
	return descr[d];
}

int rt_npz_write(int fd, const TrtRel *r)
{
	const TrtType *t = &r->type;
	TrtRel *all = gather(r);

	if (rt.rank != 0)
		return 0;
	int64_t nrow = t->extent[0], ncol = t->extent[1];
	int64_t *ptr = rt_alloc(sizeof *ptr * (size_t)(nrow + 1)), *ind;
	char *val;
	build_csr(all, ptr, &ind, &val);
	int64_t nnz = ptr[nrow], shape[2] = { nrow, ncol };
	/* scipy's rule: int32 while every index and offset fits */
	int narrow = !rt_npz_big && nnz <= INT32_MAX && nrow <= INT32_MAX && ncol <= INT32_MAX;

	/* the members in save_npz's order */
	ZipOut zo = { .fd = fd };
	put_ints(&zo, "indices.npy", narrow, ind, nnz);
	put_ints(&zo, "indptr.npy", narrow, ptr, nrow + 1);
	put_array(&zo, "format.npy", "|S3", 0, NULL, "csr", 3);
	put_array(&zo, "shape.npy", "<i8", 1, (int64_t[]){ 2 }, shape, sizeof shape);
	put_array(&zo, "data.npy", dtype_descr(t->dtype), 1, &nnz, val, rt_dtype_size(t->dtype) * (size_t)nnz);
	zip_finish(&zo);
	free(ptr);
	free(ind);
	free(val);
	trt_free(all);
	return zo.err;
}
