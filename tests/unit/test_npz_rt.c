/*
 * test_npz_rt.c: sparse tensors read from and written to .npz and .npy
 * files (runtime/npz.c), run under mpirun -np 1..4 by tests/e2e/npz.sh on
 * fixtures that tests/e2e/npz.py makes with scipy.
 *
 *   test_npz_rt check cases.txt
 *       Every case of the list (a sparse file and the same tensor as a
 *       dense .npy), read as a sparse relation in many blockings, both
 *       chunk orders and five placements, checked tuple by tuple against
 *       the dense one read alike: a tuple exactly for each block with a
 *       nonzero, well-formed compressed rows (columns increasing, no
 *       zeros stored), and the same elements.  Then each case is written
 *       back as .npz and .npy (npz.py checks them with scipy and numpy)
 *       and its .npz or .npy read again.  Every deflated member is read
 *       forward (no rewind), and trt_balance's counts of a csr's or csc's
 *       stored elements per block agree with scipy's indptr, for which
 *       no member but indptr is inflated whole.
 *
 *   test_npz_rt bad X=in.npz O=out.npz
 *       Reads X as a 37 x 23 f32 sparse matrix and writes it to O: the
 *       exit status and the one line of a bad file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

static int nfail;

#define EXPECT(c) expect_((c) ? 1 : 0, #c, __LINE__)

static const char *where = "";          /* the case and read being checked */

static void expect_(int ok, const char *what, int line)
{
	if (!ok && nfail++ < 10)
		fprintf(stderr, "rank %d: test_npz_rt.c:%d: %s: failed: %s\n", trt_rank(), line, where, what);
}

/* ---- the cases, from npz.py's list ---- */

typedef struct Case {
	char name[64];
	TrtDtype dt;
	int rank;
	int64_t shape[3];
	char file[256], ref[256], outz[256], outn[256];
	int big;                        /* write with rt_npz_big */
	int few;                        /* big: two blockings, two placements */
} Case;

static TrtDtype dtype_of(const char *s)
{
	return !strcmp(s, "f32") ? TRT_F32 : !strcmp(s, "f64") ? TRT_F64 : !strcmp(s, "i32") ? TRT_I32 : TRT_I64;
}

/* Lines: name dtype rank extents... file ref outz outn big few
 * ("-" for no .npz output). */
static int load_cases(const char *path, Case **out)
{
	FILE *f = fopen(path, "r");
	Case *cs = NULL;
	int n = 0;
	char dt[8];

	if (!f) {
		perror(path);
		exit(2);
	}
	for (;;) {
		Case c;
		memset(&c, 0, sizeof c);
		if (fscanf(f, "%63s %7s %d", c.name, dt, &c.rank) != 3)
			break;
		for (int d = 0; d < c.rank; d++)
			if (fscanf(f, "%lld", (long long *)&c.shape[d]) != 1)
				exit(2);
		if (fscanf(f, "%255s %255s %255s %255s %d %d", c.file, c.ref, c.outz, c.outn, &c.big, &c.few) != 6)
			exit(2);
		c.dt = dtype_of(dt);
		cs = realloc(cs, sizeof *cs * (size_t)(n + 1));
		cs[n++] = c;
	}
	fclose(f);
	*out = cs;
	return n;
}

/* ---- blockings and placements ---- */

typedef struct Cfg {
	int64_t block[3];               /* -1: the extent */
	int nchunk;
	int chunkdim[3];
} Cfg;

static const Cfg cfg2[] = {
	{ { 8, 5 }, 2, { 0, 1 } },
	{ { 8, 5 }, 2, { 1, 0 } },
	{ { -1, -1 }, 2, { 0, 1 } },    /* one block */
	{ { 16, 64 }, 2, { 1, 0 } },    /* a block longer than the extent */
	{ { 5, 1 }, 1, { 0 } },         /* dim 1 a singleton */
	{ { 1, 7 }, 1, { 1 } },
	{ { 1, 1 }, 0, { 0 } },         /* one element a block */
};

static const Cfg cfg3[] = {
	{ { 4, 2, 3 }, 3, { 0, 1, 2 } },
	{ { 4, 2, 3 }, 3, { 2, 0, 1 } },
	{ { 6, 1, 7 }, 2, { 2, 0 } },
};

static const TrtPlace place2[] = {
	{ TRT_ALL, 0, { 0 } }, { TRT_PART, 1, { 0 } }, { TRT_PART, 1, { 1 } },
	{ TRT_PART, 2, { 0, 1 } }, { TRT_PART, 0, { 0 } },
};

static const TrtPlace place3[] = {
	{ TRT_ALL, 0, { 0 } }, { TRT_PART, 1, { 0 } }, { TRT_PART, 1, { 2 } },
	{ TRT_PART, 2, { 1, 2 } }, { TRT_PART, 0, { 0 } },
};

static TrtType type_of(const Case *c, const Cfg *g, int sparse)
{
	TrtType t;

	memset(&t, 0, sizeof t);
	t.dtype = c->dt;
	t.nkey = c->rank;
	for (int d = 0; d < c->rank; d++) {
		t.extent[d] = c->shape[d];
		t.block[d] = g->block[d] < 0 ? c->shape[d] : g->block[d];
	}
	t.nchunk = g->nchunk;
	for (int k = 0; k < g->nchunk; k++)
		t.chunkdim[k] = g->chunkdim[k];
	t.sparse = sparse;
	return t;
}

/* ---- checks ---- */

/* A sparse chunk of key is well formed: its rows and columns, rowptr from 0
 * up to nnz, columns increasing inside [0, ncol), no zero stored. */
static void check_chunk(const TrtType *t, const int64_t *key, const Chunk *c)
{
	int64_t nrow, ncol;
	RtCsr s = rt_csr_of(c, t->dtype);

	rt_csr_dims(t, key, &nrow, &ncol);
	EXPECT(s.nrow == nrow && s.ncol == ncol);
	EXPECT(s.nnz > 0);
	EXPECT(s.rowptr[0] == 0 && s.rowptr[s.nrow] == s.nnz);
	for (int64_t r = 0; r < s.nrow; r++) {
		EXPECT(s.rowptr[r] <= s.rowptr[r + 1]);
		for (int64_t k = s.rowptr[r]; k < s.rowptr[r + 1]; k++) {
			EXPECT(s.col[k] >= 0 && s.col[k] < s.ncol);
			EXPECT(k == s.rowptr[r] || s.col[k - 1] < s.col[k]);
			EXPECT(rt_elem(t->dtype, s.val, k) != 0);
		}
	}
}

/* Sparse s against dense d, both of the blocks placement p gives this
 * rank: s has a tuple exactly where d's block has a nonzero, in key order,
 * and it holds the same elements. */
static void check_rel(const TrtType *ts, const TrtRel *s, const TrtRel *d)
{
	int nk = ts->nkey;
	int64_t at = 0;

	for (int64_t i = 0; i < d->n; i++) {
		const int64_t *key = d->keys + i * nk;
		const void *dense = rt_chunk_data(d->chunks[i]);
		size_t bytes = rt_chunk_bytes(ts, key);
		Chunk *want = rt_csr_compress(ts, key, dense);
		int has = at < s->n && !rt_key_cmp(s->keys + at * nk, key, nk);
		EXPECT(has == (want != NULL));
		if (has) {
			const Chunk *c = s->chunks[at++];
			check_chunk(ts, key, c);
			EXPECT(want && c->nbytes == want->nbytes &&
			       !memcmp(rt_chunk_data(c), rt_chunk_data(want), c->nbytes));
			char *buf = malloc(bytes + 1);
			rt_csr_expand(ts, key, c, buf);
			EXPECT(!memcmp(buf, dense, bytes));
			free(buf);
		}
		rt_chunk_unref(want);
	}
	EXPECT(at == s->n);     /* no tuple outside d's keys, none out of order */
}

/* trt_balance's counts (rt_npz_block_counts: the stored elements per
 * block along a csr's rows or a csc's columns, from indptr alone) against
 * npz.py's count of each row (NAME_rows.npy) or column (NAME_cols.npy),
 * when there is one. */
static void check_counts(const Case *c, int x, const TrtType *t)
{
	char path[128], msg[512];
	NpyHeader h;
	int major = 0, fd = -1;

	for (; major < 2 && fd < 0; major++) {
		snprintf(path, sizeof path, "%s_%s.npy", c->name, major ? "cols" : "rows");
		TrtTensor lt = { "lines", TRT_INPUT, TRT_I64, 1, { c->shape[major] }, path, 0 };
		if (access(path, R_OK) == 0)
			fd = rt_npy_open(&lt, path, &h, msg, sizeof msg);
	}
	if (fd < 0)
		return;
	major--;
	int64_t nl = c->shape[major], f = rt_frontier(t, major);
	int64_t *lines = malloc(sizeof *lines * (size_t)nl);
	EXPECT(rt_pread_full(fd, lines, sizeof *lines * (size_t)nl, h.data_offset) ==
	       (ssize_t)(sizeof *lines * (size_t)nl));
	close(fd);
	double *got = calloc((size_t)f, sizeof *got), *want = calloc((size_t)f, sizeof *want);
	for (int64_t l = 0; l < nl; l++)
		want[l / t->block[major]] += (double)lines[l];
	int64_t inflated = rt_npz_inflated;
	int d = rt_npz_block_counts(&rt.prog->tensors[x], c->file, t, got);
	EXPECT(d == major);
	/* indptr's bytes at most: data's and indices' headers are read
	 * without inflating them */
	EXPECT(rt_npz_inflated - inflated <= (int64_t)sizeof(int64_t) * (c->shape[major] + 1) + 4096);
	for (int64_t b = 0; d == major && b < f; b++)
		EXPECT(got[b] == want[b]);
	free(lines);
	free(got);
	free(want);
}

/* ---- check mode ---- */

static void one_case(const Case *c, int k, int x)
{
	const Cfg *cfg = c->rank == 2 ? cfg2 : cfg3;
	const TrtPlace *place = c->rank == 2 ? place2 : place3;
	int ncfg = c->few ? 2 : c->rank == 2 ? (int)(sizeof cfg2 / sizeof *cfg2) : (int)(sizeof cfg3 / sizeof *cfg3);
	char buf[512];

	/* a big case: everywhere, or split along its long dim (placement 3) */
	for (int g = 0; g < ncfg; g++)
		for (int q = 0; q < 5; q += c->few ? 3 : 1) {
			TrtType ts = type_of(c, &cfg[g], 1), td = type_of(c, &cfg[g], 0);
			snprintf(buf, sizeof buf, "%s, blocking %d, placement %d", c->name, g, q);
			where = buf;
			TrtRel *s = trt_read(x, &ts, place[q]);
			TrtRel *d = trt_read(x + 1, &td, place[q]);
			check_rel(&ts, s, d);
			EXPECT(rt_npz_rewinds == 0);    /* each member read forward */
			if (q == 0)
				check_counts(c, x, &ts);
			trt_free(s);
			trt_free(d);
		}

	/* written from one blocking and placement, read back in another */
	int g = k % ncfg, q = k % 5, g2 = 1, q2 = (k + 3) % 5;
	TrtType ts = type_of(c, &cfg[g], 1), ts2 = type_of(c, &cfg[g2], 1), td2 = type_of(c, &cfg[g2], 0);
	snprintf(buf, sizeof buf, "%s, written from blocking %d, placement %d", c->name, g, q);
	where = buf;
	TrtRel *s = trt_read(x, &ts, place[q]);
	if (strcmp(c->outz, "-")) {
		rt_npz_big = c->big;
		trt_write(x + 2, s);
		rt_npz_big = 0;
	}
	trt_write(x + 3, s);
	TrtRel *back = trt_read(strcmp(c->outz, "-") ? x + 2 : x + 3, &ts2, place[q2]);
	TrtRel *d = trt_read(x + 1, &td2, place[q2]);
	check_rel(&ts2, back, d);
	trt_free(s);
	trt_free(back);
	trt_free(d);
}

static int check_mode(int argc, char **argv, const char *list)
{
	Case *cs;
	int n = load_cases(list, &cs);
	TrtTensor *tensors = calloc((size_t)(4 * n + 1), sizeof *tensors);

	/* per case: the sparse file, the dense one, the two outputs */
	for (int k = 0; k < n; k++) {
		TrtTensor t = { cs[k].name, TRT_INPUT, cs[k].dt, cs[k].rank, { 0 }, cs[k].file };
		memcpy(t.shape, cs[k].shape, sizeof cs[k].shape);
		tensors[4 * k] = t;
		t.path = cs[k].ref;
		tensors[4 * k + 1] = t;
		t.role = TRT_OUTPUT;
		t.path = cs[k].outz;
		tensors[4 * k + 2] = t;
		t.path = cs[k].outn;
		tensors[4 * k + 3] = t;
	}
	TrtProgram prog = { .abi = TRT_ABI, .name = "test_npz_rt", .tensors = tensors, .ntensors = 4 * n, .seed = 1 };
	trt_init(&argc, &argv, &prog, 1);
	for (int k = 0; k < n; k++)
		one_case(&cs[k], k, 4 * k);
	int total = 0;
	MPI_Allreduce(&nfail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (trt_rank() == 0)
		printf("%s: %d cases on %d rank%s\n", total ? "FAIL" : "ok", n, trt_nranks(),
		       trt_nranks() == 1 ? "" : "s");
	int st = trt_finish();
	free(tensors);
	free(cs);
	return total ? 1 : st;
}

/* ---- bad mode ---- */

static const TrtTensor bad_tensors[] = {
	{ "X", TRT_INPUT, TRT_F32, 2, { 37, 23 }, NULL },
	{ "O", TRT_OUTPUT, TRT_F32, 2, { 37, 23 }, NULL },
};

static int bad_mode(int argc, char **argv)
{
	TrtProgram prog = { .abi = TRT_ABI, .name = "test_npz_rt", .tensors = bad_tensors, .ntensors = 2, .seed = 1 };
	trt_init(&argc, &argv, &prog, 1);
	TrtType t = { TRT_F32, 2, { 37, 23 }, { 8, 5 }, 2, { 0, 1 }, 1 };
	TrtPlace p = { TRT_PART, 1, { 0 } };
	TrtRel *x = trt_read(0, &t, p);
	trt_write(1, x);
	trt_free(x);
	return trt_finish();
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "check")) {
		const char *list = argv[2];
		argv[2] = argv[0];
		return check_mode(argc - 2, argv + 2, list);
	}
	if (argc >= 2 && !strcmp(argv[1], "bad")) {
		argv[1] = argv[0];
		return bad_mode(argc - 1, argv + 1);
	}
	fprintf(stderr, "usage: test_npz_rt check cases.txt | test_npz_rt bad X=in.npz O=out.npz\n");
	return 2;
}
