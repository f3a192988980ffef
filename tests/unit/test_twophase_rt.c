/*
 * test_twophase_rt.c: trt_twophase (runtime/twophase.c) on random
 * schedules.  Run under mpirun -np 1..4 by tests/e2e/twophase.sh.
 *
 * A blocked matmul (extents that do not divide by the blocks) whose join
 * groups go to random ranks of a schedule planned for 1 to 5 ranks, inputs
 * partitioned on either dim, on one rank or everywhere, the result
 * partitioned three ways; sums and maxima.  Every rank checks the output
 * tuples it holds (exactly those its placement gives it) against the
 * product computed directly, the bytes it sent against the schedule's
 * transfers counted the slow way, and that a second run, with messages cut
 * into pieces of a few bytes, gives bitwise the same result.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

static int nfail;

#define EXPECT(c) expect_((c) ? 1 : 0, #c, __LINE__)

static void expect_(int ok, const char *what, int line)
{
	if (!ok && nfail++ < 5)
		fprintf(stderr, "rank %d: test_twophase_rt.c:%d: failed: %s\n", trt_rank(), line, what);
}

static double value(int which, int64_t i, int64_t j)
{
	return sin(1.0 + 0.37 * (double)i + 0.91 * (double)j + 2.3 * which);
}

/* A relation of matrix `which`, rows x cols in blocks, placed by p. */
static TrtRel *make(int which, const TrtType *t, TrtPlace p)
{
	TrtRel *r = trt_rel_new(t, p);
	int64_t key[2];
	for (int64_t lin = 0; lin < rt_nkeys(t); lin++) {
		rt_key_from_linear(t, lin, key);
		if (p.kind == TRT_PART && trt_site(&p, t, key) != trt_rank())
			continue;
		int64_t n[2];
		rt_chunk_shape(t, key, n);
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
		double *v = rt_chunk_mut(c);
		for (int64_t a = 0; a < n[0]; a++)
			for (int64_t b = 0; b < n[1]; b++)
				v[a * n[1] + b] = value(which, key[0] * t->block[0] + a, key[1] * t->block[1] + b);
		rt_rel_push(r, key, c);
	}
	return r;
}

static int use_max;

/* out[i,j] (+)= sum_k (or max_k) a[i,k] b[k,j] */
static void kernel(const TrtView *in, TrtView *out, int acc)
{
	const double *a = in[0].p, *b = in[1].p;
	double *c = out->p;
	int64_t m = in[0].n[0], k = in[0].n[1], n = in[1].n[1];
	for (int64_t i = 0; i < m; i++)
		for (int64_t j = 0; j < n; j++) {
			double s = use_max ? -INFINITY : 0;
			for (int64_t q = 0; q < k; q++) {
				double x = a[i * k + q] * b[q * n + j];
				s = use_max ? (x > s ? x : s) : s + x;
			}
			c[i * n + j] = !acc ? s : use_max ? (s > c[i * n + j] ? s : c[i * n + j]) : c[i * n + j] + s;
		}
}

static uint64_t lcg;

static int next_rand(int n)
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (int)((lcg >> 33) % (uint64_t)n);
}

/* The bytes this rank sends under the schedule, counted the slow way. */
static double expected_sent(const TrtType *ta, TrtPlace pa, const TrtType *tb, TrtPlace pb, const TrtType *tc,
                            TrtPlace pc, const int *site, int64_t fi, int64_t fk, int64_t fj)
{
	int me = trt_rank(), nr = trt_nranks();
	double sent = 0;
	const TrtType *t[2] = {ta, tb};
	TrtPlace p[2] = {pa, pb};
	for (int s = 0; s < 2; s++)
		for (int64_t lin = 0; lin < rt_nkeys(t[s]); lin++) {
			int64_t key[2];
			rt_key_from_linear(t[s], lin, key);
			if (p[s].kind != TRT_PART || trt_site(&p[s], t[s], key) != me)
				continue;
			for (int d = 0; d < nr; d++) {
				int need = 0;
				for (int64_t i = 0; i < fi; i++)
					for (int64_t k = 0; k < fk; k++)
						for (int64_t j = 0; j < fj; j++) {
							int64_t jk = (i * fk + k) * fj + j;
							int64_t want[2] = {s ? k : i, s ? j : k};
							need |= site[jk] == d && want[0] == key[0] && want[1] == key[1];
						}
				if (need && d != me)
					sent += (double)rt_chunk_bytes(t[s], key);
			}
		}
	for (int64_t i = 0; i < fi; i++)
		for (int64_t j = 0; j < fj; j++) {
			int64_t key[2] = {i, j};
			int mine = 0;
			for (int64_t k = 0; k < fk; k++)
				mine |= site[(i * fk + k) * fj + j] == me;
			if (mine && trt_site(&pc, tc, key) != me)
				sent += (double)rt_chunk_bytes(tc, key);
		}
	return sent;
}

static void one(int planned, TrtPlace pa, TrtPlace pb, TrtPlace pc, int agg)
{
	int64_t M = 11, K = 13, N = 7, bi = 3, bk = 4, bj = 2;
	TrtType ta = {TRT_F64, 2, {M, K}, {bi, bk}, 2, {0, 1}};
	TrtType tb = {TRT_F64, 2, {K, N}, {bk, bj}, 2, {0, 1}};
	TrtType tc = {TRT_F64, 2, {M, N}, {bi, bj}, 2, {0, 1}};
	int64_t fi = rt_frontier(&ta, 0), fk = rt_frontier(&ta, 1), fj = rt_frontier(&tb, 1);
	int64_t njoin = fi * fk * fj;
	use_max = agg == TRT_AGG_MAX;
	/* a random schedule, the same on every rank */
	int *site = malloc(sizeof *site * (size_t)njoin);
	int64_t **jobs = malloc(sizeof *jobs * (size_t)planned), *njobs = calloc((size_t)planned, sizeof *njobs);
	for (int q = 0; q < planned; q++)
		jobs[q] = malloc(sizeof **jobs * (size_t)(njoin + 1));
	for (int64_t g = 0; g < njoin; g++) {
		int q = next_rand(planned);
		jobs[q][njobs[q]++] = g;
		site[g] = q % trt_nranks();
	}
	TrtTwoPhase s = {planned, njoin, (const int64_t *const *)jobs, njobs, (TrtAgg)agg};
	TrtJoin j = {1, {1}, {0}, 2, {0, 2}};
	TrtRel *a = make(0, &ta, pa), *b = make(1, &tb, pb);

	double before = rt.sent;
	TrtRel *c = trt_twophase(a, b, &j, kernel, &tc, pc, &s);
	EXPECT(rt.sent - before == expected_sent(&ta, pa, &tb, pb, &tc, pc, site, fi, fk, fj));
	int64_t want = 0;
	for (int64_t lin = 0; lin < rt_nkeys(&tc); lin++) {
		int64_t key[2];
		rt_key_from_linear(&tc, lin, key);
		want += trt_site(&pc, &tc, key) == trt_rank();
	}
	EXPECT(c->n == want);
	for (int64_t x = 0; x < c->n; x++) {
		const int64_t *key = c->keys + 2 * x;
		EXPECT(trt_site(&pc, &tc, key) == trt_rank());
		EXPECT(x == 0 || rt_key_cmp(key - 2, key, 2) < 0);
		int64_t n[2];
		rt_chunk_shape(&tc, key, n);
		const double *v = rt_chunk_data(c->chunks[x]);
		for (int64_t p = 0; p < n[0]; p++)
			for (int64_t q = 0; q < n[1]; q++) {
				int64_t gi = key[0] * bi + p, gj = key[1] * bj + q;
				double e = use_max ? -INFINITY : 0;
				for (int64_t k = 0; k < K; k++) {
					double y = value(0, gi, k) * value(1, k, gj);
					e = use_max ? (y > e ? y : e) : e + y;
				}
				EXPECT(fabs(v[p * n[1] + q] - e) <= 1e-12 * (1 + fabs(e)));
			}
	}

	/* again, in messages of 24 bytes: bitwise the same */
	rt_msg_limit = 24;
	TrtRel *c2 = trt_twophase(a, b, &j, kernel, &tc, pc, &s);
	rt_msg_limit = 0x7fffffff;
	EXPECT(c2->n == c->n);
	for (int64_t x = 0; x < c->n && x < c2->n; x++)
		EXPECT(!memcmp(rt_chunk_data(c->chunks[x]), rt_chunk_data(c2->chunks[x]),
		               rt_chunk_bytes(&tc, c->keys + 2 * x)));
	trt_free(a);
	trt_free(b);
	trt_free(c);
	trt_free(c2);
	for (int q = 0; q < planned; q++)
		free(jobs[q]);
	free(jobs);
	free(njobs);
	free(site);
}

static const TrtProgram prog = {.abi = TRT_ABI, .name = "test_twophase_rt", .seed = 1};

int main(int argc, char **argv)
{
	trt_init(&argc, &argv, &prog, 1);
	TrtPlace all = {TRT_ALL, 0, {0}}, p0 = {TRT_PART, 1, {0}}, p1 = {TRT_PART, 1, {1}};
	TrtPlace p01 = {TRT_PART, 2, {0, 1}}, one_rank = {TRT_PART, 0, {0}};
	TrtPlace ins[] = {p0, p1, all, one_rank}, outs[] = {p0, p01, one_rank};
	lcg = 12345;
	int runs = 0;
	for (int planned = 1; planned <= 5; planned++)
		for (int x = 0; x < 4; x++)
			for (int y = 0; y < 4; y++)
				for (int o = 0; o < 3; o++) {
					one(planned, ins[x], ins[y], outs[o], (x + y + o) % 3 == 1 ? TRT_AGG_MAX : TRT_AGG_ADD);
					runs++;
				}
	int total = 0;
	MPI_Allreduce(&nfail, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (trt_rank() == 0)
		printf("%s: %d schedules on %d rank%s\n", total ? "FAIL" : "ok", runs, trt_nranks(),
		       trt_nranks() == 1 ? "" : "s");
	int st = trt_finish();
	return total ? 1 : st;
}
