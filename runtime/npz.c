/*
 * npz.c: scipy.sparse's matrices in .npz files, read and written, through
 * zip.c's archives.
 *
 * scipy.sparse.save_npz stores format.npy (the format's name: b'csr', or
 * 'csr' from old scipy), shape.npy (two integers), data.npy, and
 * indices.npy + indptr.npy (csr, csc) or row.npy + col.npy (coo), in any
 * order in the zip.  Index arrays are int32 or int64; data is exactly the
 * tensor's dtype, as for a .npy.
 *
 * Reading.  Every rank reads the zip's central directory and the members'
 * .npy headers, and the ranks agree on any problem there (rt_agree).  Then
 * each reads the elements it needs as far as the format allows: for csr,
 * the indptr entries of the rows its blocks cover, then only those rows'
 * stretches of indices and data (csc likewise by columns); for coo, every
 * triplet, keeping its own.  Each member is read forward, so a deflated
 * one is inflated once, from its start up to the last byte needed.
 *
 * Elements go to a pile per block this rank owns; a pile is sorted by
 * position (stably: duplicates are summed in file order, as scipy sums
 * them), its duplicates summed and its zeros dropped, and becomes the
 * block's compressed chunk, as soon as the lines of its block are all read
 * (csr, csc; coo's at the end), so that the piles hold a run of lines, not
 * everything the rank reads.  A block with nothing left has no tuple.
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
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

int rt_npz_big;

enum { TAG_NPZ = 7002 };
enum { BATCH = 1 << 16 };               /* elements read at a time */

/* ---- the format and the shape ---- */

/* The dtype of an index array: int32 or int64, as scipy picks. */
static int index_dtype(const RtZipArr *a, TrtDtype *dt, char *why, size_t len)
{
	const char *d = a->h.descr;

	if (d[0] && strchr("<|=", d[0]) && !strcmp(d + 1, "i4"))
		*dt = TRT_I32;
	else if (d[0] && strchr("<|=", d[0]) && !strcmp(d + 1, "i8"))
		*dt = TRT_I64;
	else {
		snprintf(why, len, "%s: dtype int32 or int64 expected, found %s", a->name, d);
		return 0;
	}
	return 1;
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
static int read_format(const RtZip *z, char *fmt, size_t fmtlen, char *why, size_t len)
{
	RtZipArr a;
	unsigned char buf[64];
	int unit = 1, width = 0;

	int ok = rt_arr_open(z, "format.npy", &a, why, len);
	if (ok && !(width = string_width(&a.h, &unit))) {
		snprintf(why, len, "format.npy: a short string expected, found dtype %s", a.h.descr);
		ok = 0;
	}
	if (ok && a.size - a.h.data_offset < width * unit) {
		snprintf(why, len, "format.npy: truncated");
		ok = 0;
	}
	ok = ok && rt_arr_read(&a, a.h.data_offset, buf, (size_t)(width * unit), why, len);
	size_t n = 0;
	for (int i = 0; ok && i < width && n + 1 < fmtlen; i++) {
		uint32_t ch = unit == 4 ? (uint32_t)buf[4 * i] | (uint32_t)buf[4 * i + 1] << 8 |
		                          (uint32_t)buf[4 * i + 2] << 16 | (uint32_t)buf[4 * i + 3] << 24
		                        : buf[i];
		if (!ch)
			break;
		fmt[n++] = ch >= ' ' && ch < 127 ? (char)ch : '?';
	}
	fmt[n] = 0;
	rt_arr_close(&a);
	return ok;
}

/* shape.npy: the matrix's two extents. */
static int read_shape(const RtZip *z, int64_t *shape, char *why, size_t len)
{
	RtZipArr a;
	TrtDtype dt;

	int ok = rt_arr_open(z, "shape.npy", &a, why, len) && index_dtype(&a, &dt, why, len) &&
	         rt_arr_check(&a, dt, 2, why, len) && rt_arr_ints(&a, 0, 2, shape, why, len);
	rt_arr_close(&a);
	return ok;
}

/* ---- from the file's elements to blocks ---- */

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
	RtZipArr data, idx, ptr;             /* csr, csc: data, indices, indptr */
	RtZipArr row, col;                   /* coo: data, row, col */
	TrtRel *out;                    /* the blocks made so far */
} Reader;

/* Into block lin's pile: an element at position cell of its chunk. */
static void pile_add(Reader *rd, int64_t lin, int64_t cell, const char *v)
{
	Pile *p = &rd->pile[lin];
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 16;
		p->cell = rt_realloc(p->cell, sizeof *p->cell * (size_t)p->cap);
		p->val = rt_realloc(p->val, rd->es * (size_t)p->cap);
	}
	p->cell[p->n] = cell;
	char *to = p->val + (size_t)p->n * rd->es;
	if (rd->es == 4)                /* a fixed size: an inline copy, not a call */
		memcpy(to, v, 4);
	else
		memcpy(to, v, 8);
	p->n++;
}

/* Element (i, j) of the matrix, of value v: into its block's pile, if this
 * rank keeps the block. */
static void keep(Reader *rd, int64_t i, int64_t j, const char *v)
{
	const TrtType *t = rd->t;
	int64_t idx[2] = { i, j }, key[2] = { i / t->block[0], j / t->block[1] };
	int64_t lin = key[0] * rd->f1 + key[1];

	if (rd->own[lin])
		pile_add(rd, lin, rt_csr_cell(t, key, idx), v);
}

/* Line l's elements ix[0 .. m) (a run of one row of a csr, or of one
 * column of a csc), values val: keep's, with the line's block and offset
 * taken once and each element's block found by walking the blocks of the
 * other dim as its indices go up (a canonical file's do), dividing only
 * when one goes down.  Indices are in range. */
static void keep_line(Reader *rd, int major, int64_t l, const int64_t *ix, int64_t m, const char *val)
{
	const TrtType *t = rd->t;
	int o = 1 - major;
	int64_t bl = t->block[major], bo = t->block[o], kl = l / bl, rl = l - kl * bl;
	/* the position in the chunk: row-major over its chunk dims in order */
	int lfirst = t->chunkdim[0] == major;
	int64_t ext_l = t->extent[major] - kl * bl < bl ? t->extent[major] - kl * bl : bl;
	int64_t ko = -1, lo = 0, hi = 0, lin = 0, n_o = 0;
	int own = 0;

	if (t->nchunk != 2) {           /* not a 2-d chunk: element by element */
		for (int64_t i = 0; i < m; i++)
			keep(rd, major ? ix[i] : l, major ? l : ix[i], val + (size_t)i * rd->es);
		return;
	}
	for (int64_t i = 0; i < m; i++) {
		int64_t x = ix[i];
		if (x < lo || x >= hi) {
			ko = x >= hi && x < hi + bo ? ko + 1 : x / bo;
			lo = ko * bo;
			hi = lo + bo;
			n_o = t->extent[o] - lo < bo ? t->extent[o] - lo : bo;
			lin = major ? ko * rd->f1 + kl : kl * rd->f1 + ko;
			own = rd->own[lin];
		}
		if (own)
			pile_add(rd, lin, lfirst ? rl * n_o + (x - lo) : (x - lo) * ext_l + rl, val + (size_t)i * rd->es);
	}
}

/* indptr[l0 .. l0+k] in p: starts at 0, never decreases, ends at nnz. */
static int check_ptr(const Reader *rd, const int64_t *p, int64_t l0, int64_t k, int64_t lines,
                     char *why, size_t len)
{
	const char *name = rd->ptr.name;

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
		if (!rt_arr_ints(&rd->idx, e0, m, ix, why, len) || !rt_arr_vals(&rd->data, e0, m, val, why, len))
			return 0;
		for (int64_t i = 0; i < m; i++)
			if (ix[i] < 0 || ix[i] >= width) {
				while (p[q + 1] <= e0 + i)
					q++;
				snprintf(why, len, "%s: index %lld in %s %lld is outside [0, %lld)", rd->idx.name,
				         (long long)ix[i], major ? "column" : "row", (long long)(l0 + q),
				         (long long)width);
				return 0;
			}
		/* line by line: the batch's part of each */
		for (int64_t i = 0; i < m;) {
			while (p[q + 1] <= e0 + i)
				q++;
			int64_t end = p[q + 1] - e0 < m ? p[q + 1] - e0 : m;
			keep_line(rd, major, l0 + q, ix + i, end - i, val + (size_t)i * rd->es);
			i = end;
		}
		e0 += m;
	}
	return 1;
}

static void pile_flush(Reader *rd, int64_t lin);

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
			if (k > (l0 / bl + 1) * bl - l0)
				k = (l0 / bl + 1) * bl - l0;   /* within a block: its pile goes after */
			if (l0 == lo)
				ok = rt_arr_ints(&rd->ptr, l0, k + 1, p, why, len);
			else
				ok = rt_arr_ints(&rd->ptr, l0 + 1, k, p + 1, why, len);
			ok = ok && check_ptr(rd, p, l0, k, lines, why, len) &&
			     read_lines(rd, major, p, l0, k, ix, val, why, len);
			p[0] = p[k];
			l0 += k;
			/* blocks whose lines are all in become chunks now: the
			 * piles hold a run of lines' elements, not the rank's all */
			for (int64_t done = l0 >= hi ? ke : l0 / bl; ok && kb < done; kb++)
				for (int64_t ko = 0; ko < fo; ko++) {
					int64_t lin = major ? ko * rd->f1 + kb : kb * rd->f1 + ko;
					if (rd->own[lin])
						pile_flush(rd, lin);
				}
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
		ok = rt_arr_ints(&rd->row, e0, m, ri, why, len) && rt_arr_ints(&rd->col, e0, m, ci, why, len) &&
		     rt_arr_vals(&rd->data, e0, m, val, why, len);
		for (int64_t i = 0; ok && i < m; i++) {
			RtZipArr *bad = ri[i] < 0 || ri[i] >= rd->t->extent[0] ? &rd->row :
			           ci[i] < 0 || ci[i] >= rd->t->extent[1] ? &rd->col : NULL;
			if (bad) {
				int64_t v = bad == &rd->row ? ri[i] : ci[i];
				snprintf(why, len, "%s: index %lld of element %lld is outside [0, %lld)", bad->name,
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

/* Puts a pile in position order, elements of one position in file order;
 * 1 when its positions were already in order, each once (a canonical
 * file's). */
static int pile_sort(Pile *p, size_t es)
{
	int64_t k = 1;

	while (k < p->n && p->cell[k - 1] < p->cell[k])
		k++;
	if (k >= p->n)
		return 1;
	while (k < p->n && p->cell[k - 1] <= p->cell[k])
		k++;
	if (k >= p->n)
		return 0;
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
	return 0;
}

/* Elements of positions each once, in order: the zeros dropped (a file
 * may store them), the count left. */
static int64_t drop_zeros(TrtDtype dt, int64_t *cell, char *val, int64_t n)
{
	int64_t m = 0;

#define DROP(T) do { \
		T *v = (T *)val; \
		for (int64_t i = 0; i < n; i++) \
			if (v[i] != 0) { \
				cell[m] = cell[i]; \
				v[m++] = v[i]; \
			} \
	} while (0)
	switch (dt) {
	case TRT_F32: DROP(float); break;
	case TRT_F64: DROP(double); break;
	case TRT_I32: DROP(int32_t); break;
	case TRT_I64: DROP(int64_t); break;
	}
#undef DROP
	return m;
}

/* Key's chunk from its pile: sorted, duplicates summed, zeros dropped;
 * NULL when nothing is left. */
static Chunk *pile_chunk(const Reader *rd, Pile *p, const int64_t *key)
{
	TrtDtype dt = rd->t->dtype;
	size_t es = rd->es;
	int64_t m = 0, nrow, ncol;

	if (pile_sort(p, es)) {
		m = drop_zeros(dt, p->cell, p->val, p->n);
	} else {
		for (int64_t i = 0; i < p->n;) {
			/* the sum of the run at i goes to slot m, which is never after i */
			int64_t j = i + 1;
			char *acc = p->val + (size_t)m * es;
			if (m != i)
				memcpy(acc, p->val + (size_t)i * es, es);
			for (; j < p->n && p->cell[j] == p->cell[i]; j++)
				add_to(dt, acc, p->val + (size_t)j * es);
			p->cell[m] = p->cell[i];
			m += !rt_elem_zero(dt, acc, 0);
			i = j;
		}
	}
	if (!m)
		return NULL;
	rt_csr_dims(rd->t, key, &nrow, &ncol);
	Chunk *c = rt_csr_new(dt, nrow, ncol, m);
	RtCsr s = rt_csr_mut(c, dt);
	memset(s.rowptr + 1, 0, sizeof *s.rowptr * (size_t)nrow);
	/* cells ascend: each one's row by walking the rows, not dividing */
	for (int64_t i = 0, r = 0, end = ncol; i < m; i++) {
		while (p->cell[i] >= end) {
			r++;
			end += ncol;
		}
		s.rowptr[r + 1]++;
		s.col[i] = p->cell[i] - (end - ncol);
	}
	for (int64_t r = 0; r < nrow; r++)
		s.rowptr[r + 1] += s.rowptr[r];
	memcpy(s.val, p->val, (size_t)m * es);
	return c;
}

/* Block lin's pile, complete, into its chunk in rd->out (none when
 * nothing is left), and freed. */
static void pile_flush(Reader *rd, int64_t lin)
{
	Pile *pl = &rd->pile[lin];
	int64_t key[2];

	rt_key_from_linear(rd->t, lin, key);
	size_t mark = rt_pin_mark();
	Chunk *c = pl->n ? pile_chunk(rd, pl, key) : NULL;
	if (c)
		rt_rel_push(rd->out, key, c);
	rt_pin_release(mark);
	free(pl->cell);
	free(pl->val);
	memset(pl, 0, sizeof *pl);
}

/* The relation of the piles: blocks in key order, the empty ones absent. */
static TrtRel *piles_to_rel(Reader *rd)
{
	for (int64_t lin = 0; lin < rt_nkeys(rd->t); lin++)
		pile_flush(rd, lin);
	rt_rel_sort(rd->out);
	return rd->out;
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
	return k == 4 && rt_zip_magic(head, 4);
}

/* A zip with no format.npy: numpy's savez of some arrays, most likely. */
static void plain_npz(const RtZip *z, char *why, size_t len)
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
static int open_npz(Reader *rd, const RtZip *z, char *why, size_t len)
{
	const TrtTensor *x = rd->x;
	char fmt[32];
	int64_t shape[2];
	TrtDtype dt;

	if (!rt_zip_find(z, "format.npy")) {
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
	if (!rt_arr_open(z, "data.npy", &rd->data, why, len))
		return -1;
	if (rd->data.h.rank != 1) {
		char b[256];
		rt_shape_str(b, sizeof b, rd->data.h.rank, rd->data.h.shape);
		snprintf(why, len, "data.npy: a 1-D array expected, found shape %s", b);
		return -1;
	}
	rd->nnz = rd->data.h.shape[0];
	if (!rt_arr_check(&rd->data, x->dtype, rd->nnz, why, len)) {
		/* scipy's matrices are float64 unless asked: say both ways out */
		size_t at = strlen(why);
		if (x->dtype == TRT_F32 && !strcmp(rd->data.h.descr, "<f8"))
			snprintf(why + at, len - at, "; declare it ': f64 sparse', or save it as float32 "
			         "(A.astype(np.float32))");
		return -1;
	}
	if (kind == 2) {
		int ok = rt_arr_open(z, "row.npy", &rd->row, why, len) && index_dtype(&rd->row, &dt, why, len) &&
		         rt_arr_check(&rd->row, dt, rd->nnz, why, len) &&
		         rt_arr_open(z, "col.npy", &rd->col, why, len) && index_dtype(&rd->col, &dt, why, len) &&
		         rt_arr_check(&rd->col, dt, rd->nnz, why, len);
		return ok ? kind : -1;
	}
	int ok = rt_arr_open(z, "indices.npy", &rd->idx, why, len) && index_dtype(&rd->idx, &dt, why, len) &&
	         rt_arr_check(&rd->idx, dt, rd->nnz, why, len) &&
	         rt_arr_open(z, "indptr.npy", &rd->ptr, why, len) && index_dtype(&rd->ptr, &dt, why, len) &&
	         rt_arr_check(&rd->ptr, dt, x->shape[kind] + 1, why, len);
	return ok ? kind : -1;
}

TrtRel *rt_npz_read(const TrtTensor *x, const char *path, const TrtType *t, TrtPlace p)
{
	char why[512], msg[1024];
	int64_t size, key[TRT_MAXDIM] = { 0 };
	Reader rd;
	RtZip z;

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
	int kind = rt_zip_open(&z, fd, size, why, sizeof why) ? open_npz(&rd, &z, why, sizeof why) : -1;
	if (kind < 0)
		rt_tensor_msg(msg, sizeof msg, x, path, why);
	rt_agree(kind < 0 ? msg : NULL);

	RtZipArr *arrs[] = { &rd.data, &rd.idx, &rd.ptr, &rd.row, &rd.col };
	rt_arr_share(arrs, (int)(sizeof arrs / sizeof *arrs), x, path);

	int64_t nk = rt_nkeys(t);
	rd.own = rt_alloc((size_t)nk);
	rd.pile = rt_alloc(sizeof *rd.pile * (size_t)nk);
	memset(rd.pile, 0, sizeof *rd.pile * (size_t)nk);
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		rd.own[lin] = p.kind != TRT_PART || trt_site(&p, t, key) == rt.rank;
	}
	rd.out = trt_rel_new(t, p);
	int ok = kind == 2 ? read_coo(&rd, why, sizeof why) : read_compressed(&rd, kind, why, sizeof why);
	TrtRel *r = piles_to_rel(&rd);
	for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
		rt_arr_close(arrs[i]);
	free(rd.own);
	free(rd.pile);
	rt_zip_close(&z);
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
	RtZip z;

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
	int kind = rt_zip_open(&z, fd, size, why, sizeof why) ? open_npz(&rd, &z, why, sizeof why) : -1;
	if (kind == 0 || kind == 1) {
		int64_t lines = t->extent[kind], bl = t->block[kind];
		int64_t *p = rt_alloc(sizeof *p * (BATCH + 1));
		for (int64_t b = 0; b < rt_frontier(t, kind); b++)
			count[b] = 0;
		/* forward through indptr: a batch's p[0] is the last entry of the
		 * batch before */
		for (int64_t l0 = 0; kind >= 0 && l0 < lines;) {
			int64_t k = lines - l0 < BATCH ? lines - l0 : BATCH;
			if (!(l0 == 0 ? rt_arr_ints(&rd.ptr, 0, k + 1, p, why, sizeof why)
			              : rt_arr_ints(&rd.ptr, l0 + 1, k, p + 1, why, sizeof why))) {
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
	RtZipArr *arrs[] = { &rd.data, &rd.idx, &rd.ptr, &rd.row, &rd.col };
	for (size_t i = 0; i < sizeof arrs / sizeof *arrs; i++)
		rt_arr_close(arrs[i]);
	rt_zip_close(&z);
	close(fd);
	return kind;
}

/* ---- writing a csr .npz ---- */

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
		for (int64_t i = 0; i < n; i++) {
			size_t mark = rt_pin_mark();
			rt_send_bytes(rt_chunk_data(r->chunks[i]), (size_t)sizes[i], 0, TAG_NPZ);
			rt_pin_release(mark);
		}
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
			size_t mark = rt_pin_mark();
			Chunk *c = rt_chunk_new((size_t)sizes[i]);
			rt_recv_bytes(rt_chunk_mut(c), (size_t)sizes[i], src, TAG_NPZ);
			rt_rel_push(all, keys + i * t->nkey, c);
			rt_pin_release(mark);
		}
		free(keys);
		free(sizes);
	}
	rt_rel_sort(all);
	return all;
}

/* Is the element at v, of type dt, zero (-0.0 too, as scipy's
 * eliminate_zeros and csr_matrix of a dense array take it)? */
static int is_zero(const char *v, TrtDtype dt)
{
	switch (dt) {
	case TRT_F32: { float x; memcpy(&x, v, sizeof x); return x == 0; }
	case TRT_F64: { double x; memcpy(&x, v, sizeof x); return x == 0; }
	case TRT_I32: { int32_t x; memcpy(&x, v, sizeof x); return x == 0; }
	case TRT_I64: { int64_t x; memcpy(&x, v, sizeof x); return x == 0; }
	}
	return 0;
}

/* Each nonzero element of r's tuples, in key order: counted into the
 * ptr[row + 1] of its row of the matrix (at NULL), or put at at[row]++ of
 * ind (its column) and val.  A sparse chunk's stored elements and a dense
 * chunk's elements, their zeros dropped, stored or computed (relu(A) of a
 * sparse A keeps A's pattern, zeros where A is negative), as
 * scipy.sparse.csr_matrix does of a dense array: so that the file does
 * not depend on how the plan stored the tensor, which differs between -O
 * levels and between a sparse input and the same values dense. */
static void each_element(const TrtRel *r, int64_t *ptr, int64_t *at, int64_t *ind, char *val)
{
	const TrtType *t = &r->type;
	size_t es = rt_dtype_size(t->dtype);
	int64_t idx[2];

	for (int64_t i = 0; i < r->n; i++) {
		const int64_t *key = r->keys + 2 * i;
		size_t mark = rt_pin_mark();
		RtCsr s = {0};
		int64_t n = 0;
		const char *dense = NULL;
		if (t->sparse)
			s = rt_csr_of(r->chunks[i], t->dtype), n = s.rowptr[s.nrow];
		else {
			int64_t len[TRT_MAXDIM];
			n = rt_chunk_shape(t, key, len);
			dense = rt_chunk_data(r->chunks[i]);
		}
		int64_t row = 0;
		for (int64_t k = 0; k < n; k++) {
			int64_t cell;
			const char *v;
			if (dense) {
				v = dense + (size_t)k * es;
				cell = k;
			} else {
				while (s.rowptr[row + 1] <= k)
					row++;
				cell = row * s.ncol + s.col[k];
				v = (const char *)s.val + (size_t)k * es;
			}
			if (is_zero(v, t->dtype))
				continue;       /* stored or computed, a zero is dropped */
			rt_csr_index(t, key, cell, idx);
			if (!at) {
				ptr[idx[0] + 1]++;
				continue;
			}
			int64_t q = at[idx[0]]++;
			ind[q] = idx[1];
			memcpy(val + (size_t)q * es, v, es);
		}
		rt_pin_release(mark);
	}
}

/* The matrix's rows (ptr: nrow + 1 offsets) from the tuples of r, which are
 * in key order: a row's elements come chunk by chunk along it, and within
 * a chunk, in either chunk order, by increasing column. */
static void build_csr(const TrtRel *r, int64_t *ptr, int64_t **ind_out, char **val_out)
{
	size_t es = rt_dtype_size(r->type.dtype);
	int64_t nrow = r->type.extent[0];

	memset(ptr, 0, sizeof *ptr * (size_t)(nrow + 1));
	each_element(r, ptr, NULL, NULL, NULL);
	for (int64_t i = 0; i < nrow; i++)
		ptr[i + 1] += ptr[i];
	int64_t nnz = ptr[nrow], *at = rt_alloc(sizeof *at * (size_t)(nrow + 1));
	int64_t *ind = rt_alloc(sizeof *ind * (size_t)(nnz ? nnz : 1));
	char *val = rt_alloc(es * (size_t)(nnz ? nnz : 1));
	memcpy(at, ptr, sizeof *at * (size_t)(nrow + 1));
	each_element(r, ptr, at, ind, val);
	free(at);
	*ind_out = ind;
	*val_out = val;
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
	RtZipOut zo = { .fd = fd, .zip64 = rt_npz_big };
	rt_zip_put_ints(&zo, "indices.npy", narrow, ind, nnz);
	rt_zip_put_ints(&zo, "indptr.npy", narrow, ptr, nrow + 1);
	rt_zip_put_array(&zo, "format.npy", "|S3", 0, NULL, "csr", 3);
	rt_zip_put_array(&zo, "shape.npy", "<i8", 1, (int64_t[]){ 2 }, shape, sizeof shape);
	rt_zip_put_array(&zo, "data.npy", dtype_descr(t->dtype), 1, &nnz, val, rt_dtype_size(t->dtype) * (size_t)nnz);
	rt_zip_finish(&zo);
	free(ptr);
	free(ind);
	free(val);
	trt_free(all);
	return zo.err;
}

