/*
 * zip.c: the zip archives .npz files are, both ways: the central directory
 * and each member's bytes when reading, a zip of stored members when
 * writing.  npz.c reads and writes scipy.sparse's matrices through it.
 *
 * A .npz is a zip of .npy arrays, as numpy.savez makes it.  Members are
 * stored or deflated, with zip64 records where numpy writes them (it
 * always forces zip64 local headers).
 *
 * Reading.  rt_zip_open reads the central directory; rt_arr_open opens a
 * member holding a .npy array and parses its header.  A stored member's
 * bytes are read where they lie (pread); a deflated one is inflated whole
 * by libdeflate when it fits (whole_fits), else forward from the bytes
 * read before, through small buffers, what lies between being discarded.
 * A deflate stream cannot be entered in the middle, so a read before the
 * last bytes read inflates the member again
 * from its start (rt_npz_rewinds counts it; npz.c's readers go forward
 * through each member and never do).  A member's .npy header is read
 * without inflating the member whole (inflate_head).  A deflated member's
 * CRC is checked when it is inflated to its end.
 *
 * Writing.  A zip is written front to back, its members stored, each's
 * CRC patched into its local header once its bytes are out, then the
 * central directory and its end records (zip64 ones when an offset or
 * size needs them, or RtZipOut.zip64 asks for them).  A write error is
 * kept in RtZipOut.err, and nothing more is written after it.
 */
#define _POSIX_C_SOURCE 200809L        /* pread */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libdeflate.h>
#include <zlib.h>

#include "rt.h"

int64_t rt_npz_rewinds;
int64_t rt_npz_inflated;

enum { BATCH = 1 << 16 };               /* indices converted at a time */
enum { ZBUF = 1 << 16 };                /* compressed bytes read at a time */

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
static int zip64_extra(const unsigned char *x, size_t len, RtZipEntry *m)
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
static int64_t find_end(RtZip *z, unsigned char *rec, char *why, size_t len)
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
static size_t parse_entry(const unsigned char *p, size_t left, RtZipEntry *m)
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
int rt_zip_open(RtZip *z, int fd, int64_t size, char *why, size_t len)
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

void rt_zip_close(RtZip *z)
{
	free(z->m);
	z->m = NULL;
}

int rt_zip_magic(const unsigned char *head, size_t n)
{
	return n >= 4 && (get32(head) == LOCAL_SIG || get32(head) == END_SIG);
}

/* The member of that name (the last, as Python's zipfile takes), or NULL. */
const RtZipEntry *rt_zip_find(const RtZip *z, const char *name)
{
	const RtZipEntry *m = NULL;

	for (int64_t i = 0; i < z->n; i++)
		if (!strcmp(z->m[i].name, name))
			m = &z->m[i];
	return m;
}


/* ---- members: stored ones read where they lie, deflated ones inflated
 * forward ---- */

typedef struct RtZipStream RtZipStream;

struct RtZipStream {
	int fd;
	char name[64];
	int deflated, by_whole;         /* by_whole: whole_fits, decided at open */
	int64_t data;                   /* file offset of the member's first byte */
	int64_t csize, usize;
	uint32_t crc;                   /* the directory's */
	z_stream z;                     /* deflated: */
	int zlive, ended;
	int64_t pos, cpos;              /* bytes inflated, compressed bytes fed */
	uint32_t run;                   /* CRC-32 of the bytes inflated */
	unsigned char *in, *skip;
	unsigned char *whole;           /* by_whole: the member, once read */
};

/*
 * A deflated member of at most WHOLE_MAX bytes is inflated whole, once, by
 * libdeflate, and read from there: 1.7-2.1x zlib's speed on save_npz's
 * members (a 10 MB indices.npy 34 -> 20 ms, data.npy 26 -> 12 ms here),
 * and its CRC-32 at 3x.  A bigger one, and every one when the run has a
 * memory budget (the runtime's own memory is what trac.1 allows besides
 * the chunks: a few buffers), is inflated forward through zlib.
 */
#define WHOLE_MAX ((int64_t)256 << 20)

static int whole_fits(const RtZipStream *s)
{
	return rt.budget <= 0 && s->usize <= WHOLE_MAX;
}

static int stream_open(const RtZip *z, const char *name, RtZipStream *s, char *why, size_t len)
{
	const RtZipEntry *m = rt_zip_find(z, name);
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
	s->by_whole = s->deflated && whole_fits(s);
	if (s->deflated && !s->by_whole) {
		/* raw deflate: a zip member has no zlib header */
		if (inflateInit2(&s->z, -MAX_WBITS) != Z_OK)
			rt_oom(sizeof s->z, "an inflater");
		s->zlive = 1;
		s->run = (uint32_t)crc32(0, NULL, 0);
		s->in = rt_alloc(ZBUF);
	}
	return 1;
}

static void stream_close(RtZipStream *s)
{
	if (s->zlive)
		inflateEnd(&s->z);
	s->zlive = 0;
	free(s->in);
	free(s->skip);
	free(s->whole);
	s->in = s->skip = s->whole = NULL;
}

/* Feeds the inflater from the file and runs it once. */
static int inflate_step(RtZipStream *s, char *why, size_t len)
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
static int check_end(RtZipStream *s, char *why, size_t len)
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
static int inflate_into(RtZipStream *s, unsigned char *out, size_t n, char *why, size_t len)
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
static void stream_rewind(RtZipStream *s)
{
	if (inflateReset(&s->z) != Z_OK)
		rt_bug("%s: inflateReset failed", s->name);
	s->z.avail_in = 0;
	s->ended = 0;
	s->pos = s->cpos = 0;
	s->run = (uint32_t)crc32(0, NULL, 0);
	rt_npz_rewinds++;
}

/* The member inflated whole into s->whole, its length and CRC checked;
 * on failure s->whole stays NULL. */
static int inflate_whole(RtZipStream *s, char *why, size_t len)
{
	unsigned char *in = rt_alloc(s->csize ? (size_t)s->csize : 1);
	unsigned char *out = rt_alloc(s->usize ? (size_t)s->usize : 1);
	size_t got = 0;
	enum libdeflate_result r = LIBDEFLATE_BAD_DATA;
	int ok = read_at(s->fd, in, (size_t)s->csize, s->data, why, len);
	rt_npz_inflated += s->usize;
	if (ok) {
		struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
		if (!d)
			rt_oom(0, "an inflater");
		r = libdeflate_deflate_decompress(d, in, (size_t)s->csize, out, (size_t)s->usize, &got);
		libdeflate_free_decompressor(d);
	}
	free(in);
	if (ok && r == LIBDEFLATE_INSUFFICIENT_SPACE) {
		snprintf(why, len, "%s: longer than the zip directory says", s->name);
		ok = 0;
	} else if (ok && (r == LIBDEFLATE_SHORT_OUTPUT || (r == LIBDEFLATE_SUCCESS && (int64_t)got != s->usize))) {
		snprintf(why, len, "%s: deflate stream ends before the %lld bytes the zip directory says",
		         s->name, (long long)s->usize);
		ok = 0;
	} else if (ok && r != LIBDEFLATE_SUCCESS) {
		snprintf(why, len, "%s: corrupt deflate stream", s->name);
		ok = 0;
	} else if (ok && (uint32_t)libdeflate_crc32(0, out, (size_t)s->usize) != s->crc) {
		snprintf(why, len, "%s: CRC mismatch, the member is corrupt", s->name);
		ok = 0;
	}
	if (ok)
		s->whole = out;
	else
		free(out);
	return ok;
}

/* Bytes [off, off + n) lie in the member: a reader's bug otherwise. */
static void check_span(const RtZipStream *s, int64_t off, size_t n)
{
	if (off < 0 || off > s->usize || (int64_t)n > s->usize - off)
		rt_bug("read of bytes %lld..+%zu of %s, which has %lld", (long long)off, n, s->name,
		       (long long)s->usize);
}

/* Reads bytes [off, off + n) of the member into buf: a stored member's
 * where they lie; a deflated one's from the member inflated whole (on the
 * first read), or, streamed, by inflating on from the bytes read before
 * (what lies between is inflated and dropped), or from the start again
 * when off is before them. */
static int stream_read(RtZipStream *s, int64_t off, void *buf, size_t n, char *why, size_t len)
{
	check_span(s, off, n);
	if (!s->deflated)
		return read_at(s->fd, buf, n, s->data + off, why, len);
	if (s->by_whole) {
		if (!s->whole && !inflate_whole(s, why, len))
			return 0;
		memcpy(buf, s->whole + off, n);
		return 1;
	}
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

/* Bytes [off, off + n) near the start of a member read whole, before it is
 * (its .npy header, rt_arr_open): the member's first off + n bytes
 * inflated through zlib and dropped, so that opening a member costs what
 * its header takes.  rt_npz_block_counts opens data.npy and indices.npy
 * for their headers and reads only indptr.npy's values: inflated whole at
 * open, each rank inflated the whole matrix twice, once there and once to
 * read it (GCN's 20 MB adjacency, 40 ms a rank).  The member's CRC is
 * checked when it is inflated whole. */
static int inflate_head(RtZipStream *s, int64_t off, void *buf, size_t n, char *why, size_t len)
{
	z_stream z;
	size_t want = (size_t)off + n;
	unsigned char *out = rt_alloc(want ? want : 1), *in = rt_alloc(ZBUF);
	int64_t cpos = 0;
	int ok = 1;

	memset(&z, 0, sizeof z);
	if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
		rt_oom(sizeof z, "an inflater");
	z.next_out = out;
	z.avail_out = (uInt)want;
	while (ok && z.avail_out) {
		if (!z.avail_in) {
			size_t k = s->csize - cpos < ZBUF ? (size_t)(s->csize - cpos) : ZBUF;
			if (!k) {
				snprintf(why, len, "%s: deflate stream cut short", s->name);
				ok = 0;
				break;
			}
			ok = read_at(s->fd, in, k, s->data + cpos, why, len);
			cpos += (int64_t)k;
			z.next_in = in;
			z.avail_in = (uInt)k;
			if (!ok)
				break;
		}
		int zr = inflate(&z, Z_NO_FLUSH);
		if (zr == Z_MEM_ERROR)
			rt_oom(0, "an inflater");
		if (zr == Z_STREAM_END && z.avail_out) {
			snprintf(why, len, "%s: deflate stream ends before the %lld bytes the zip directory says",
			         s->name, (long long)s->usize);
			ok = 0;
		} else if (zr != Z_OK && zr != Z_STREAM_END) {
			snprintf(why, len, "%s: corrupt deflate stream (%s)", s->name, z.msg ? z.msg : zError(zr));
			ok = 0;
		}
	}
	inflateEnd(&z);
	if (ok)
		memcpy(buf, out + off, n);
	free(out);
	free(in);
	return ok;
}

/* A read of a member's header: as stream_read, but a member read whole is
 * not inflated for it. */
static int stream_read_head(RtZipStream *s, int64_t off, void *buf, size_t n, char *why, size_t len)
{
	if (s->by_whole && !s->whole) {
		check_span(s, off, n);
		return inflate_head(s, off, buf, n, why, len);
	}
	return stream_read(s, off, buf, n, why, len);
}

/* ---- the members' .npy arrays ---- */

/*
 * Collective, on the arrays of one file that every rank has opened: the
 * deflated members read whole are inflated once among the ranks, member k
 * (of those not inflated yet, in the order given) by rank k mod ranks, and
 * broadcast from there, rather than each rank inflating all of them.  A
 * .npz's data.npy and indices.npy are the bulk of a sparse input's read:
 * GCN's adjacency (two members of 9.9 MB) took 45-50 ms a rank to inflate
 * both, 20-30 ms to inflate one, a broadcast of the other 2-3 ms.  A
 * member that does not inflate (corrupt, its CRC wrong) ends the job with
 * its message, x's and path's, from the rank that inflated it.
 */
void rt_arr_share(RtZipArr *const *a, int n, const TrtTensor *x, const char *path)
{
	int k = 0, ok = 1;
	char why[512], msg[1024];
	RtZipStream *share[8];

	if (rt.nranks < 2)
		return;
	for (int i = 0; i < n && k < (int)(sizeof share / sizeof *share); i++)
		if (a[i]->s && a[i]->s->by_whole && !a[i]->s->whole && a[i]->s->usize > 0)
			share[k++] = a[i]->s;
	if (k == 0)
		return;
	for (int i = 0; i < k && ok; i++)
		if (i % rt.nranks == rt.rank)
			ok = inflate_whole(share[i], why, sizeof why);
	if (!ok)
		rt_tensor_msg(msg, sizeof msg, x, path, why);
	rt_agree(ok ? NULL : msg);
	for (int i = 0; i < k; i++) {
		RtZipStream *s = share[i];
		if (i % rt.nranks != rt.rank)
			s->whole = rt_alloc((size_t)s->usize);
		MPI_Bcast(s->whole, (int)s->usize, MPI_BYTE, i % rt.nranks, rt.comm);
	}
}

int rt_arr_open(const RtZip *z, const char *name, RtZipArr *a, char *why, size_t len)
{
	unsigned char head[12];
	char w[256];

	memset(a, 0, sizeof *a);
	snprintf(a->name, sizeof a->name, "%s", name);
	a->s = rt_alloc(sizeof *a->s);
	if (!stream_open(z, name, a->s, why, len))
		return 0;
	a->size = a->s->usize;
	size_t k = a->size < 12 ? (size_t)a->size : 12;
	if (!stream_read_head(a->s, 0, head, k, why, len))
		return 0;
	size_t want = rt_npy_head_len(head, k);
	if ((int64_t)want > a->size)
		want = (size_t)a->size;
	unsigned char *buf = rt_alloc(want);
	memcpy(buf, head, k);
	int ok = stream_read_head(a->s, (int64_t)k, buf + k, want - k, why, len);
	if (ok && !rt_npy_parse(buf, want, &a->h, w, sizeof w)) {
		snprintf(why, len, "%s: %s", name, w);
		ok = 0;
	}
	free(buf);
	return ok;
}

void rt_arr_close(RtZipArr *a)
{
	if (a->s)
		stream_close(a->s);
	free(a->s);
	a->s = NULL;
}

int rt_arr_check(RtZipArr *a, TrtDtype dt, int64_t n, char *why, size_t len)
{
	TrtTensor t = { a->name, TRT_INPUT, dt, 1, { n }, NULL, 0 };
	char w[400];

	if (!rt_npy_check(&a->h, &t, a->size, w, sizeof w)) {
		snprintf(why, len, "%s: %s", a->name, w);
		return 0;
	}
	a->es = rt_dtype_size(dt);
	return 1;
}

int rt_arr_read(RtZipArr *a, int64_t off, void *buf, size_t n, char *why, size_t len)
{
	return stream_read(a->s, off, buf, n, why, len);
}

int rt_arr_ints(RtZipArr *a, int64_t first, int64_t count, int64_t *out, char *why, size_t len)
{
	int64_t off = a->h.data_offset + first * (int64_t)a->es;

	if (!stream_read(a->s, off, out, (size_t)count * a->es, why, len))
		return 0;
	/* widen in place from the back: element k's int32 sits below its int64 */
	for (int64_t k = a->es == 4 ? count - 1 : -1; k >= 0; k--) {
		int32_t v;
		memcpy(&v, (char *)out + 4 * k, 4);
		out[k] = v;
	}
	return 1;
}

int rt_arr_vals(RtZipArr *a, int64_t first, int64_t count, void *out, char *why, size_t len)
{
	int64_t off = a->h.data_offset + first * (int64_t)a->es;
	return stream_read(a->s, off, out, (size_t)count * a->es, why, len);
}

/* ---- writing: a zip of stored members ---- */

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

/* Whether v needs zip64's 64-bit field (or the caller wants one anyway). */
static int big(const RtZipOut *zo, int64_t v)
{
	return zo->zip64 || v >= (int64_t)FFFF32;
}

static void zout(RtZipOut *zo, const void *buf, size_t n)
{
	if (!zo->err && !rt_pwrite_full(zo->fd, buf, n, zo->at))
		zo->err = errno ? errno : EIO;
	zo->at += (int64_t)n;
}

/* DOS time 0, date 1980-01-01: the same bytes on every run. */
enum { DOS_DATE = 0x21 };

static void member_begin(RtZipOut *zo, const char *name, int64_t size)
{
	unsigned char h[LOCAL_LEN + 64 + 20];
	size_t nlen = strlen(name);
	int z64 = big(zo, size);

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
static void member_put(RtZipOut *zo, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	for (size_t done = 0; done < n;) {
		uInt piece = n - done < (1u << 30) ? (uInt)(n - done) : 1u << 30;
		zo->m[zo->n - 1].crc = (uint32_t)crc32(zo->m[zo->n - 1].crc, p + done, piece);
		done += piece;
	}
	zout(zo, buf, n);
}

static void member_end(RtZipOut *zo)
{
	unsigned char crc[4];
	int64_t off = zo->m[zo->n - 1].off;
	size_t nlen = strlen(zo->m[zo->n - 1].name);
	int64_t start = off + LOCAL_LEN + (int64_t)nlen + (big(zo, zo->m[zo->n - 1].size) ? 20 : 0);

	if (zo->at - start != zo->m[zo->n - 1].size)
		rt_bug("zip member %s: %lld bytes written, %lld announced", zo->m[zo->n - 1].name,
		       (long long)(zo->at - start), (long long)zo->m[zo->n - 1].size);
	put32(crc, zo->m[zo->n - 1].crc);
	if (!zo->err && !rt_pwrite_full(zo->fd, crc, 4, off + 14))
		zo->err = errno ? errno : EIO;
}

/* The central directory and its end records (zip64 ones when needed). */
void rt_zip_finish(RtZipOut *zo)
{
	int64_t doff = zo->at;
	unsigned char h[CENTRAL_LEN + 64 + 28];

	for (int i = 0; i < zo->n; i++) {
		size_t nlen = strlen(zo->m[i].name);
		int z64 = big(zo, zo->m[i].size) || big(zo, zo->m[i].off);
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
	int z64 = big(zo, doff) || big(zo, dsize);
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
void rt_zip_put_array(RtZipOut *zo, const char *name, const char *descr, int rank,
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
void rt_zip_put_ints(RtZipOut *zo, const char *name, int narrow, const int64_t *a, int64_t n)
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

