/*
 * test_cost.c: the cost model's arithmetic.  Frontiers and sizes (edge
 * chunks short), the most loaded rank's share under a partitioning (the
 * runtime's site function), the paper's metric for moves (broadcast f*s,
 * shuffle f, nothing when already placed), partial copies, the machine
 * model's file and interpolation, the paper's predicted costs of its
 * matmul plans (Table 4) under the layouts it states, thin gemms' seconds,
 * the seconds of reads (their system calls and first touch too, a sparse
 * one's .npz elements and inflating), initial
 * values (an f64 value two f32s) and writes, of scatter-adds into a base (each row's piece too),
 * of a slice's window (each row too), of a sparse kernel's elements,
 * of kernels by their ops' weights (a reduction along rows at its own
 * rate), of an IST loop from its body's plan;
 * the order of costs under each objective (cost_cmp).
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "frontend/frontend.h"
#include "optimizer/opt.h"

static RelType type2(int64_t e0, int64_t b0, int64_t e1, int64_t b1)
{
	RelType t = {.dtype = DT_F32, .nkey = 2, .nchunk = 2, .chunkdim = {0, 1}};
	t.extent[0] = e0;
	t.block[0] = b0;
	t.extent[1] = e1;
	t.block[1] = b1;
	return t;
}

/* The same, sparse, with density d of its elements stored. */
static RelType sparse2(int64_t e0, int64_t b0, int64_t e1, int64_t b1, float d)
{
	RelType t = type2(e0, b0, e1, b1);
	t.sparse = true;
	t.density = d;
	return t;
}

/* The built-in model with a sparse kernel's stored element at 1 us (the
 * built-in model has it free). */
static Machine sparse_machine(void)
{
	Machine m;
	machine_default(&m);
	m.sparse_elem = 1e-6;
	return m;
}

static void test_sizes(void **state)
{
	(void)state;
	RelType t = type2(10, 4, 7, 4);
	assert_int_equal(rel_frontier(&t, 0), 3);
	assert_int_equal(rel_frontier(&t, 1), 2);
	assert_int_equal(rel_ntuples(&t), 6);
	assert_true(rel_floats(&t) == 70);
	/* a key dim no chunk spans counts its frontier (the k of a blocked
	 * matmul's join before its sum) */
	RelType j = {.dtype = DT_F32, .nkey = 3, .nchunk = 2, .chunkdim = {0, 2}};
	j.extent[0] = 10, j.block[0] = 5;
	j.extent[1] = 8, j.block[1] = 2;
	j.extent[2] = 6, j.block[2] = 6;
	assert_true(rel_floats(&j) == 10 * 4 * 6);
}

static void test_shares(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c2 = {&m, 2}, c3 = {&m, 3};
	RelType t = type2(10, 4, 7, 4);        /* dim 0: blocks 4, 4, 2 */
	int d0 = 0, d1 = 1;
	Place p0 = place_part(1, &d0), p1 = place_part(1, &d1), all = place_all();
	/* two sites: blocks 0 and 2 (6 rows of 10) on site 0 */
	assert_true(fabs(cost_share(&c2, &t, &p0) - 0.6) < 1e-12);
	/* three sites: one block each, the largest 4 of 10 */
	assert_true(fabs(cost_share(&c3, &t, &p0) - 0.4) < 1e-12);
	/* dim 1 (blocks 4, 3) on two sites: 4 of 7 */
	assert_true(fabs(cost_share(&c2, &t, &p1) - 4.0 / 7) < 1e-12);
	assert_true(cost_share(&c3, &t, &all) == 1);
	/* both dims on three sites: combos (0,0) (1,1) (2,0)? row-major index
	 * mod 3 over 3 x 2 combos: sites 0,1,2,0,1,2 */
	Place p01 = place_part(2, (int[]){0, 1});
	double want = 0;
	for (int s = 0; s < 3; s++) {
		double load = 0;
		for (int a = 0; a < 3; a++)
			for (int b = 0; b < 2; b++)
				if ((a * 2 + b) % 3 == s)
					load += (a == 2 ? 2.0 : 4.0) / 10 * (b == 1 ? 3.0 : 4.0) / 7;
		want = load > want ? load : want;
	}
	assert_true(fabs(cost_share(&c3, &t, &p01) - want) < 1e-12);
	/* bytes one rank holds */
	assert_true(fabs(cost_rank_bytes(&c2, &t, &p0, 1) - 0.6 * 70 * 4) < 1e-9);
	assert_true(cost_rank_bytes(&c2, &t, &all, 1) == 70 * 4);
}

static void test_moves(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 4};
	RelType t = type2(16, 4, 8, 4);        /* 128 floats */
	int d0 = 0, d1 = 1;
	Place p0 = place_part(1, &d0), p1 = place_part(1, &d1), all = place_all(), partial = place_partial();
	Cost b = cost_move(&c, &t, &p0, 1, &all);
	assert_true(b.floats == 128 * 4);                /* broadcast: f * s */
	assert_true(b.bytes == 128 * 4 * 3);             /* every tuple to 3 other ranks */
	Cost s = cost_move(&c, &t, &p0, 1, &p1);
	assert_true(s.floats == 128);                    /* shuffle: f */
	/* part(0) -> part(1): 4 x 2 blocks, site (i mod 4) -> (j mod 4) */
	double moved = 0;
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 2; j++)
			if (i % 4 != j % 4)
				moved += 16;
	assert_true(s.bytes == moved * 4);
	Cost none = cost_move(&c, &t, &p0, 1, &p0);     /* already so */
	assert_true(none.floats == 0 && none.bytes == 0 && none.seconds == 0);
	Cost from_all = cost_move(&c, &t, &all, 1, &p1); /* each keeps its share */
	assert_true(from_all.floats == 0 && from_all.bytes == 0);
	Cost again = cost_move(&c, &t, &all, 1, &all);
	assert_true(again.floats == 0);
	/* partial sums held on 3 sites: every copy moves */
	Cost ps = cost_move(&c, &t, &partial, 3, &p0);
	assert_true(ps.floats == 128 * 3);
	/* partial copies: part(k) grouped away over 5 blocks, on 4 sites */
	RelType j = {.dtype = DT_F32, .nkey = 3, .nchunk = 2, .chunkdim = {0, 2}};
	j.extent[0] = 8, j.block[0] = 4;
	j.extent[1] = 10, j.block[1] = 2;
	j.extent[2] = 8, j.block[2] = 4;
	Place pk = place_part(1, &d1);
	int group[2] = {0, 2};
	assert_true(cost_partial_copies(&c, &j, &pk, 2, group) == 4);
	assert_true(cost_partial_copies(&c, &j, &p0, 2, group) == 1);
	/* seconds grow with bytes */
	RelType big = type2(1600, 400, 800, 400);
	assert_true(cost_move(&c, &big, &p0, 1, &all).seconds > b.seconds);
}

static void test_machine(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	char path[] = "/tmp/trac-machine-XXXXXX";
	int fd = mkstemp(path);
	assert_true(fd >= 0);
	FILE *f = fdopen(fd, "w");
	fputs("# a calibrate file\nranks=4\nblis_arch=skx\nalltoallv_latency_s=1e-5\n"
	      "alltoallv_bandwidth_Bps=1e9\nloop_rate_flops=2e9\nconv_rate_flops=3e10\ngemm_f32_gflops_b256=20\n"
	      "gemm_f32_gflops_b1024=40\nsome_new_key=7\n", f);
	fclose(f);
	Buf err = {0};
	assert_true(machine_load(&m, path, &err));
	assert_true(m.latency[COLL_ALLTOALL] == 1e-5);
	assert_true(m.bandwidth[COLL_ALLTOALL] == 1e9);
	assert_true(m.loop_rate == 2e9);
	assert_true(m.conv_rate == 3e10);
	assert_true(fabs(machine_gemm_rate(&m, DT_F32, 256) - 20e9) < 1);
	assert_true(fabs(machine_gemm_rate(&m, DT_F32, 1024) - 40e9) < 1);
	double mid = machine_gemm_rate(&m, DT_F32, 512);
	assert_true(mid > 20e9 && mid < 40e9);
	/* the file's table replaces the built-in one: flat beyond its largest
	 * block (the built-in 4096 entry gone), and below its smallest scaled
	 * from it; f64 interpolated as the blocks went in */
	assert_true(m.ngemm == 2);
	assert_true(fabs(machine_gemm_rate(&m, DT_F32, 4000) - 40e9) < 1);
	assert_true(fabs(machine_gemm_rate(&m, DT_F32, 128) - 10e9) < 1);
	assert_true(machine_gemm_rate(&m, DT_F64, 1024) > 0);
	assert_true(fabs(machine_coll(&m, COLL_ALLTOALL, 1e9) - (1e-5 + 1)) < 1e-9);
	f = fopen(path, "w");
	fputs("alltoallv_bandwidth_Bps=fast\n", f);
	fclose(f);
	assert_false(machine_load(&m, path, &err));
	assert_non_null(strstr(err.s, "alltoallv_bandwidth_Bps"));
	unlink(path);
	buf_free(&err);
}

/* ---- Table 4 of the TRA paper ---- */

static TraProg *compile(const char *text)
{
	diag_reset();
	int file = src_add("t.tra", xstrdup(text), strlen(text));
	Arena *a = arena_new();
	FeOptions fo = {.warnings = false};
	TraProg *p = fe_compile(fe_parse(a, file), &fo);
	assert_non_null(p);
	return p;
}

/* The floats moved by matmul planned on 10 sites, I and J cut in ni and
 * nj blocks (RMM's Front(X)[0] and Front(Y)[1]; 5 x 5 fits Table 4), K in
 * 10, with the layout the thesis states for the strategy, which is forced. */
static double mm_cost(int64_t I, int64_t K, int64_t J, int ni, int nj, Strategy st, int side, const char *la,
                      const char *lb)
{
	char src[256];
	snprintf(src, sizeof src, "size I = %lld, K = %lld, J = %lld;\ninput A[I, K];\ninput B[K, J];\n"
	         "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", (long long)I, (long long)K, (long long)J);
	TraProg *p = compile(src);
	BlockPin bp[] = {{0, 0, I / ni}, {0, 1, K / 10}, {1, 1, J / nj}};
	PlacePin pp[2] = {{0, place_all()}, {1, place_all()}};
	assert_true(opt_parse_place(la, &pp[0].place));
	assert_true(opt_parse_place(lb, &pp[1].place));
	StratPin sp = {0, st, side};
	OptOptions o = {.nranks = 10, .level = 2, .verify = true, .blockpins = bp, .nblockpins = 3,
	                .placepins = pp, .nplacepins = 2, .stratpins = &sp, .nstratpins = 1};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	assert_int_equal(plan->strategy.v[0], st);
	double f = plan->total_floats_moved;
	ia_free(plan);
	tra_free(p);
	return f;
}

/* A broadcast on one site shares its input's chunks (runtime/comm.c,
 * trt_bcast): it takes them over when its input dies there, so it costs
 * no seconds and no memory, and the output's first touch is the join's:
 * A and B held (2 x 8 MB), then C (8 MB) new at the join. */
static void test_bcast_one_site(void **state)
{
	(void)state;
	TraProg *p = compile("size I = 1000, K = 2000, J = 1000;\ninput A[I, K];\ninput B[K, J];\n"
	                     "C[i, j] = A[i, k] * B[k, j];\noutput C;\n");
	Machine m;
	machine_default(&m);
	StratPin sp = {0, STRAT_BROADCAST, 0};
	OptOptions o = {.nranks = 1, .level = 2, .verify = true, .block = 500, .machine = &m,
	                .stratpins = &sp, .nstratpins = 1};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	int nbcast = 0;
	double c = 4.0 * 1000 * 1000, ab = 4.0 * 1000 * 2000 * 2;
	for (int i = 0; i < plan->ops.n; i++) {
		const IaOp *op = &plan->ops.v[i];
		if (op->kind == IA_BCAST) {
			nbcast++;
			assert_true(op->seconds == 0);
			assert_true(op->live_bytes <= ab);
		} else if (op->kind == IA_JOIN) {
			assert_true(op->live_bytes == ab + c);
			assert_true(op->seconds >= c / m.touch_bw);
		}
	}
	assert_true(nbcast >= 1);
	assert_true(plan->peak_bytes == ab + c);
	ia_free(plan);
	tra_free(p);
}

/* A broadcast on 2 sites keeps each rank's own chunks (trt_bcast), so its
 * result adds only what it receives, and X's chunks, read again after it
 * (D = C * X), are held once: at the product A 2 MB, X whole 4 MB, C 2 MB
 * a rank, not X's own 2 MB more (issue 32: plans were over the runs). */
static void test_bcast_shares(void **state)
{
	(void)state;
	TraProg *p = compile("size N = 1000, F = 1000;\ninput A[N, N];\ninput X[N, F];\n"
	                     "C[i, f] = A[i, j] * X[j, f];\nD[i, f] = C[i, f] * X[i, f];\noutput D;\n");
	StratPin sp = {0, STRAT_BROADCAST, 1};
	OptOptions o = {.nranks = 2, .level = 2, .verify = true, .stratpins = &sp, .nstratpins = 1};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	double mb = 1e6;
	int nbcast = 0, contraction = 0;
	for (int i = 0; i < plan->ops.n; i++) {
		const IaOp *op = &plan->ops.v[i];
		if (op->kind == IA_BCAST) {
			nbcast++;
			assert_int_equal(plan->ops.v[op->u.bcast.in].kind, IA_READ);
			assert_true(op->live_bytes == 2 * mb + 4 * mb);        /* A's share, X whole */
		} else if (op->kind == IA_JOIN && !contraction++) {          /* the product */
			assert_true(op->live_bytes == 2 * mb + 4 * mb + 2 * mb);
		}
	}
	assert_int_equal(nbcast, 1);
	assert_true(plan->peak_bytes >= 8 * mb && plan->peak_bytes < 8.1 * mb);
	ia_free(plan);
	tra_free(p);
}

/* A convolution is one conv op whose flops are two per multiply-add: the
 * output's elements times the summed labels' extents (padding included),
 * in the forward op and in its gradients' (dK: the kernel's elements times
 * the output's positions; dX: the input's elements times kernels and taps),
 * at the machine's conv rate. */
static void test_conv(void **state)
{
	(void)state;
	TraProg *p = compile("size N = 3, C = 2, O = 5, H = 9, W = 7, R = 3;\ninput X[N, C, H, W];\n"
	                     "input K[O, C, R, R];\n"
	                     "Y[n, o, y in H, x in W] = K[o, c, dy, dx] * X[n, c, y + dy - 1, x + dx - 1];\n"
	                     "l = sum[n, o, y, x](Y[n, o, y, x]);\ndK = grad(l, K);\ndX = grad(l, X);\n"
	                     "output Y;\noutput dK;\noutput dX;\n");
	OptOptions o = {.nranks = 1, .level = 2, .verify = true};
	opt_autodiff(p);
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	double want[3] = {2.0 * 3 * 5 * 9 * 7 * 2 * 3 * 3,     /* Y: N O H W outputs, C R R taps */
	                  2.0 * 5 * 2 * 3 * 3 * 3 * 9 * 7,     /* dK: O C R R outputs, N H W positions */
	                  2.0 * 3 * 2 * 9 * 7 * 5 * 3 * 3};    /* dX: N C H W outputs, O R R taps */
	int nconv = 0;
	for (int i = 0; i < plan->ops.n; i++) {
		const IaOp *op = &plan->ops.v[i];
		if (op->kind != IA_CONV)
			continue;
		assert_true(nconv < 3);
		assert_true(fabs(op->flops - want[nconv]) < 0.5);
		nconv++;
	}
	assert_int_equal(nconv, 3);
	ia_free(plan);
	tra_free(p);
}

/* A join's seconds (IA_JOIN) in the plan of one rank with whole chunks,
 * on machine m (NULL: the built-in one with first touches free (touch) or
 * not). */
static double join_seconds_on(const char *text, double *flops, bool touch, const Machine *mach)
{
	TraProg *p = compile(text);
	Machine m;
	machine_default(&m);
	if (!touch)
		m.touch_bw = 1e300;
	if (mach)
		m = *mach;
	OptOptions o = {.nranks = 1, .level = 2, .verify = true, .block = 1 << 30, .machine = &m};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	double s = -1;
	for (int i = 0; i < plan->ops.n; i++)
		if (plan->ops.v[i].kind == IA_JOIN) {
			s = plan->ops.v[i].seconds;
			*flops = plan->ops.v[i].flops;
		}
	ia_free(plan);
	tra_free(p);
	assert_true(s > 0);
	return s;
}

static double join_seconds_touch(const char *text, double *flops, bool touch)
{
	return join_seconds_on(text, flops, touch, NULL);
}

static double join_seconds(const char *text, double *flops)
{
	return join_seconds_touch(text, flops, false);
}

/* What a call of m x k x n streams in a join beyond the cache: BLIS's A
 * at memcpy's rate (kernelcost.c's kernel_rate and cost_join). */
static double streamed(const Machine *m, double i, double k, double j)
{
	(void)j;
	return 4.0 * i * k / m->memcpy_bw;
}

/* A thin gemm (96 x J x 96) runs at the rate of a cube of its volume, its
 * operands streamed (the join is beyond the cache), but
 * when B's and C's rows are a multiple of 4 KiB apart (J = 262144) the
 * runtime copies B's panels first (kn elements at memcpy bandwidth); C
 * aliased streams (mn elements at the aliased bandwidth) when B is not
 * copied; a dim of 4 bounds the rate by the operands' streaming through
 * memory. */
static void test_thin_gemm(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	double f0, f1, f2;
	double plain = join_seconds("size I = 96, K = 96, J = 262000;\ninput A[I, K];\ninput B[K, J];\n"
	                            "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f0);
	double alias = join_seconds("size I = 96, K = 96, J = 262144;\ninput A[I, K];\ninput B[K, J];\n"
	                            "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f1);
	/* each a join beyond the cache: its call's operands stream too */
	double cube0 = f0 / machine_gemm_rate(&m, DT_F32, cbrt(96.0 * 96 * 262000)) + streamed(&m, 96, 96, 262000);
	double cube1 = f1 / machine_gemm_rate(&m, DT_F32, cbrt(96.0 * 96 * 262144)) + streamed(&m, 96, 96, 262144);
	assert_true(fabs(plain - cube0) < 0.01 * cube0 + 1e-4);
	double extra = 4.0 * 96 * 262144 / m.memcpy_bw;         /* B copied; C's aliasing then free */
	assert_true(fabs(alias - (cube1 + extra)) < 0.01 * alias + 1e-4);
	/* B reused 4096 times is not copied, and C aliased with k short streams */
	double f3;
	double calias = join_seconds("size I = 4096, K = 64, J = 4096;\ninput A[I, K];\ninput B[K, J];\n"
	                             "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f3);
	double cube3 = f3 / machine_gemm_rate(&m, DT_F32, cbrt(4096.0 * 4096 * 64)) + streamed(&m, 4096, 64, 4096);
	assert_true(fabs(calias - (cube3 + 4.0 * 4096 * 4096 / m.gemm_alias_bw)) < 0.01 * calias + 1e-4);
	double thin = join_seconds("size I = 4000, K = 4000, J = 4;\ninput A[I, K];\ninput B[K, J];\n"
	                           "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f2);
	double bytes = 4.0 * (4000.0 * 4000 + 4000 * 4 + 4000 * 4);
	assert_true(thin >= bytes / m.memcpy_bw * 0.99);

	/* the join's output is memory new to the process: its first touch is
	 * the join's too (reads have theirs in their rate) */
	double touched = join_seconds_touch("size I = 96, K = 96, J = 262000;\ninput A[I, K];\ninput B[K, J];\n"
	                                    "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f0, true);
	assert_true(fabs(touched - plain - 4.0 * 96 * 262000 / m.touch_bw) < 1e-9 * touched);

	/* a machine that measured BLIS's packing: the row-major product packs
	 * B (kn elements, reused 96 times) beyond a cube; with C column-major
	 * BLIS computes the transposed product, whose A is that operand */
	Machine pk = m;
	pk.touch_bw = 1e300;
	pk.gemm_pack_b_bw = 4e9;
	pk.gemm_pack_a_bw = 2e9;
	double packed = join_seconds_on("size I = 96, K = 96, J = 262000;\ninput A[I, K];\ninput B[K, J];\n"
	                                "C[i, j] = A[i, k] * B[k, j];\noutput C;\n", &f0, false, &pk);
	double bbytes = 4.0 * 96 * 262000;
	assert_true(fabs(packed - plain - bbytes / 4e9) < 1e-6 * packed);
	double col = join_seconds_on("size I = 96, K = 96, J = 262000;\ninput A[I, K];\ninput B[J, K];\n"
	                             "C[j, i] = A[i, k] * B[j, k];\noutput C;\n", &f0, false, &pk);
	double colfree = join_seconds("size I = 96, K = 96, J = 262000;\ninput A[I, K];\ninput B[J, K];\n"
	                              "C[j, i] = A[i, k] * B[j, k];\noutput C;\n", &f0);
	/* its packing priced replaces its streaming at memcpy's rate */
	assert_true(fabs(col - colfree - (bbytes / 2e9 - bbytes / m.memcpy_bw)) < 1e-6 * col);

	/* a B under 4 MB packed afresh each call, because each call has its
	 * own (a slice of a batch, Tucker's T2 = B T1): its bytes at the
	 * packing rate, every call; shared by the calls, packed from cache */
	const char *batched = "size N = 8, I = 48, K = 96, J = 4608;\ninput A[I, K];\ninput B[N, K, J];\n"
	                      "C[n, i, j] = A[i, k] * B[n, k, j];\noutput C;\n";
	const char *shared = "size N = 8, I = 48, K = 96, J = 4608;\ninput A[N, I, K];\ninput B[K, J];\n"
	                     "C[n, i, j] = A[n, i, k] * B[k, j];\noutput C;\n";
	double slice = 4.0 * 96 * 4608;
	assert_true(slice < 4 << 20);
	double bp = join_seconds_on(batched, &f0, false, &pk), bfree = join_seconds(batched, &f0);
	assert_true(fabs(bp - bfree - 8 * slice / 4e9) < 1e-6 * bp);
	double sp = join_seconds_on(shared, &f0, false, &pk), sfree = join_seconds(shared, &f0);
	assert_true(fabs(sp - sfree) < 1e-9 * sp);

	/* a C added into by each call after the first reads it again, at
	 * gemm_accum_bw when it is beyond the L1: k and p summed in orders that do
	 * not merge, one of them 64 looped calls into a C of 1 MiB; free in
	 * the built-in model, and for a C within the L1 */
	const char *looped = "size I = 512, J = 512, P = 64, K = 64;\ninput A[I, P, K];\ninput B[K, P, J];\n"
	                     "C[i, j] = A[i, p, k] * B[k, p, j];\noutput C;\n";
	Machine ac = m;
	ac.touch_bw = 1e300;
	ac.gemm_accum_bw = 1e9;
	ac.cache_l1 = 32768;
	double cfree = join_seconds(looped, &f0), cpaid = join_seconds_on(looped, &f0, false, &ac);
	assert_true(fabs(cpaid - cfree - 63 * 4.0 * 512 * 512 / 1e9) < 1e-6 * cpaid);
	ac.cache_l1 = 2 << 20;
	assert_true(fabs(join_seconds_on(looped, &f0, false, &ac) - cfree) < 1e-9 * cfree);
}

/* A call beyond the cache packs its A from memory at memcpy's rate beside
 * its flops, however thin, and is never faster than its operands'
 * streaming: the arxiv-size GCN's AX W1 (84672 x 128 a rank) with W1 in
 * two column blocks of 32 packs AX twice, and ran 1.35x slower than in one
 * block of 64 (0.046 s a step against 0.034 on 2 ranks, the Zen 3), where
 * the streaming bound alone, A's packing dropped, priced the two thin
 * calls at 0.8 of the wide one and the search chose them. */
static void test_thin_calls_pack(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.touch_bw = 1e300;
	m.memcpy_bw = 4.7e9;            /* the Zen 3's host model: BLIS at 70 GFLOP/s */
	for (int i = 0; i < m.ngemm; i++)
		m.gemm_rate[0][i] = 7e10;
	const char *fmt = "size I = 84672, K = 128, J = %d;\ninput A[I, K];\ninput B[K, J];\n"
	                  "C[i, j] = A[i, k] * B[k, j];\noutput C;\n";
	char text[256];
	double f32, f64;
	snprintf(text, sizeof text, fmt, 32);
	double s32 = join_seconds_on(text, &f32, false, &m);
	snprintf(text, sizeof text, fmt, 64);
	double s64 = join_seconds_on(text, &f64, false, &m);
	double a = 4.0 * 84672 * 128;
	assert_true(a > m.cache_per_rank);
	/* the second block of columns packs A again */
	assert_true(2 * s32 - s64 > 0.9 * a / m.memcpy_bw);
	double packed = f32 / machine_gemm_rate(&m, DT_F32, cbrt(84672.0 * 128 * 32)) + a / m.memcpy_bw;
	double stream = 4.0 * (84672.0 * 128 + 128 * 32 + 84672 * 32) / m.memcpy_bw;
	assert_true(fabs(s32 - fmax(packed, stream)) < 0.01 * s32 + 1e-4);
}

/* The calls' A beyond a core's L2, though within the rank's cache (its L2
 * and its share of the L3), are packed at memory's pace too: BLIS packs
 * from the L3 no faster (examples/gcn_sparse.tra's AX W1, 3.2 MB of AX a
 * rank, ran at 43 GFLOP/s on the Zen 3, priced at 80).  Without an L2 in
 * the model (a file's, the built-in one's) the rank's cache decides. */
static void test_thin_calls_l2(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.touch_bw = 1e300;
	m.memcpy_bw = 6e9;
	m.cache_per_rank = 17e6;
	for (int i = 0; i < m.ngemm; i++)
		m.gemm_rate[0][i] = 8e10;
	const char *text = "size I = 4000, K = 200, J = 64;\ninput A[I, K];\ninput B[K, J];\n"
	                   "C[i, j] = A[i, k] * B[k, j];\noutput C;\n";
	double f, a = 4.0 * 4000 * 200;
	assert_true(a < m.cache_per_rank);
	double within = join_seconds_on(text, &f, false, &m);
	m.cache_l2 = 512 << 10;
	double beyond = join_seconds_on(text, &f, false, &m);
	assert_true(fabs(beyond - within - a / m.memcpy_bw) < 0.01 * beyond);
	m.cache_l2 = 4 << 20;
	assert_true(fabs(join_seconds_on(text, &f, false, &m) - within) < 1e-9 * within);
}

/* A scatter-add's seconds: into zeros the result's share is written, into
 * a copy of a base read and written, in place neither; the rows' bytes
 * the same each way.  In a plan, an SGD step folded into scatters on the
 * param's own storage (ia_in_place) costs about the same whatever the
 * table's extent, and no rank holds more than the table and the batch. */
static void test_scatter(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 2};
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	RelType rows = type2(6, 3, 5, 5), out = type2(1000, 250, 5, 5);
	RelType idx = {.dtype = DT_I64, .nkey = 1, .nchunk = 1, .chunkdim = {0}, .extent = {6}, .block = {3}};
	Cost z = cost_scatter(&c, &rows, &part0, &idx, &out, &part0, SCATTER_ZEROS);
	Cost y = cost_scatter(&c, &rows, &part0, &idx, &out, &part0, SCATTER_COPY);
	Cost i = cost_scatter(&c, &rows, &part0, &idx, &out, &part0, SCATTER_IN_PLACE);
	double share = rel_bytes(&out) * cost_share(&c, &out, &part0) / m.memcpy_bw;
	assert_true(fabs(z.seconds - i.seconds - share) < 1e-12 && fabs(y.seconds - i.seconds - 2 * share) < 1e-12);
	assert_true(z.bytes == i.bytes && y.bytes == i.bytes && i.bytes > 0 && z.flops == i.flops);
	/* every row's piece costs scatter_row where it is added, not only its
	 * bytes: 6 rows, 3 on the busiest rank; split over two chunks of the
	 * result along d, 6 pieces there */
	Machine m2 = m;
	m2.scatter_row = m.scatter_row + 1e-3;
	CostCtx c2 = {&m2, 2};
	Cost i2 = cost_scatter(&c2, &rows, &part0, &idx, &out, &part0, SCATTER_IN_PLACE);
	assert_true(fabs(i2.seconds - i.seconds - 3e-3) < 1e-12);
	RelType rows2 = type2(6, 3, 10, 5), out2 = type2(1000, 250, 10, 5);
	Cost j = cost_scatter(&c, &rows2, &part0, &idx, &out2, &part0, SCATTER_IN_PLACE);
	Cost j2 = cost_scatter(&c2, &rows2, &part0, &idx, &out2, &part0, SCATTER_IN_PLACE);
	assert_true(fabs(j2.seconds - j.seconds - 6e-3) < 1e-12);

	double secs[2], peak[2];
	for (int k = 0; k < 2; k++) {
		char *src = xprintf("size V = %d, D = 8, B = 40;\ninput h[B] : i64;\ninput t[B] : i64;\n"
		                    "param E[V, D] = normal(0, 1);\nrepeat 3 {\n"
		                    "l = sum[b, d]((E[h[b], d] - E[t[b], d]) ** 2);\ndE = grad(l, E);\n"
		                    "E[v, d] -= 0.1 * dE[v, d];\n}\noutput E;\n", k ? 400000 : 4000);
		TraProg *p = compile(src);
		OptOptions o = {.nranks = 2, .level = 2, .verify = true};
		opt_autodiff(p);
		opt_sparsity(p, &o);
		assert_int_equal(opt_fuse_scatters(p), 2);
		opt_block(p, &o);
		IaPlan *plan = opt_plan(p, &o);
		secs[k] = 0;
		int n = 0;
		IaLoops life;
		ia_loops(plan, &life);
		InPlace *ip = ia_in_place(plan, &life);
		for (int j = 0; j < plan->ops.n; j++)
			if (plan->ops.v[j].kind == IA_SCATTER) {
				assert_true(plan->ops.v[j].u.gather.base >= 0 && ip[j] == IP_PARAM);
				secs[k] += plan->ops.v[j].seconds;
				n++;
			}
		free(ip);
		ia_loops_free(&life);
		assert_int_equal(n, 2);
		/* inside the loop a rank holds its share of the table (the
		 * param's own storage, with the init's chunks it shares) and a
		 * few batch-sized relations: no zeroed table, no dense sum */
		double share = 0;
		peak[k] = 0;
		CostCtx cc = {&m, 2};
		for (int j = 0, in = 0; j < plan->ops.n; j++) {
			const IaOp *op = &plan->ops.v[j];
			if (op->kind == IA_LOAD)
				share = cost_rank_bytes(&cc, &op->type, &op->place, 1);
			in += op->kind == IA_LOOP;
			in -= op->kind == IA_ENDLOOP;
			if (in)
				peak[k] = fmax(peak[k], op->live_bytes);
		}
		assert_true(peak[k] < share + 40 * 8 * 4 * 16);
		ia_free(plan);
		tra_free(p);
		free(src);
	}
	/* a 100 times larger table: its share zeroed would cost 0.6 ms more
	 * per scatter; in place the rows cost the same (placements may differ) */
	assert_true(secs[1] < 3 * secs[0]);
}

/* A kernel's element costs its ops' weights in adds (ir.h's KOPS) at the
 * loop rate they were measured at, its flops one per op: exp(x) + 1 is
 * its exp's weight and an add's, 2 flops; a power of 2 is a product,
 * stop_gradient nothing (but an element costs a flop at least); a product
 * summed (BLIS's contraction) is 2 flops and 2 adds either way.  At
 * another loop rate (the built-in model's) an op costs its flop at that
 * rate and its weight beyond an add at the weights' rate.  With every op
 * at one flop (before the weights) exp(x) + 1 cost the same as -x + 1. */
/* A map over a 2-d input labelled 0 and 1 to the labels out[0 .. nout),
 * reducing the others by red. */
static Kernel *map2(Arena *a, int nout, const int *out, AggKind red, KExpr *expr)
{
	Kernel *k = kernel_new(a, 1);
	k->nlab = 2;
	k->nindim[0] = 2;
	k->inlab[0][0] = 0;
	k->inlab[0][1] = 1;
	k->noutdim = nout;
	for (int i = 0; i < nout; i++)
		k->outlab[i] = out[i];
	k->reduces = nout < 2;
	k->red = red;
	k->expr = expr;
	return k;
}

static void test_kernel_weights(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	double ref_rate = m.loop_rate;
	m.loop_rate = KOP_WEIGHT_RATE;
	CostCtx c = {&m, 2};
	Arena *a = arena_new();
	RelType t = type2(1000, 500, 2000, 1000);
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	KExpr *x = kx_in(a, 0), *one = kx_const(a, 1);
	KExpr *ex[] = {
		kx_op(a, KOP_ADD, kx_op(a, KOP_EXP, x, NULL, NULL), one, NULL),
		kx_op(a, KOP_ADD, kx_op(a, KOP_NEG, x, NULL, NULL), one, NULL),
		kx_op(a, KOP_POW, x, kx_const(a, 2), NULL),
		kx_op(a, KOP_POW, x, kx_const(a, 3), NULL),
		kx_op(a, KOP_STOP, x, NULL, NULL),
	};
	double want[] = {kop_weight(KOP_EXP) + kop_weight(KOP_ADD), 2, kop_weight(KOP_MUL), kop_weight(KOP_POW), 0};
	assert_true(kop_weight(KOP_EXP) >= 2 && kop_weight(KOP_POW) > kop_weight(KOP_EXP) &&
	            kop_weight(KOP_ADD) == 1 && kop_weight(KOP_MUL) == 1);
	double share = cost_share(&c, &t, &part0), elems = 1000.0 * 2000, secs[5];
	for (int i = 0; i < 5; i++) {
		assert_true(kx_weight(ex[i]) == want[i]);
		Kernel *k = kernel_new(a, 1);
		k->nlab = 2;
		k->nindim[0] = k->noutdim = 2;
		k->inlab[0][1] = k->outlab[1] = 1;
		k->expr = ex[i];
		Cost y = cost_map(&c, k, &t, &part0);
		assert_true(y.flops == elems * (kx_nops(ex[i]) ? kx_nops(ex[i]) : 1));
		/* at least one add's time an element */
		double w = want[i] > 0 ? want[i] : 1;
		secs[i] = y.seconds;
		double base = 4 * share * m.call_overhead + m.local_op_overhead;
		assert_true(fabs(y.seconds - base - elems * share * w / m.loop_rate) < 1e-9 * y.seconds);
	}
	assert_true(secs[0] > 2 * secs[1]);
	m.loop_rate = ref_rate;
	Kernel *k = kernel_new(a, 1);
	k->nlab = 2;
	k->nindim[0] = k->noutdim = 2;
	k->inlab[0][1] = k->outlab[1] = 1;
	k->expr = ex[0];
	Cost y = cost_map(&c, k, &t, &part0);
	double per = 2 / ref_rate + (kop_weight(KOP_EXP) - 1) / KOP_WEIGHT_RATE;
	assert_true(fabs(y.seconds - 4 * share * m.call_overhead - m.local_op_overhead - elems * share * per) <
	            1e-9 * y.seconds);
	/* a product (summed: a contraction, at BLIS's rate) weighs its flops */
	const KExpr *prod = kernel_new(a, 2)->expr;
	assert_true(kx_is_product(prod) && kx_weight(prod) == kx_nops(prod));
	arena_free(a);
}

/* A halo's bytes are exact: Y[y] = K[d] * X[y + d] with X (10^6) cut in
 * blocks of 4e5 and split on 2 or 3 sites; Y's chunk 0 reads X's 0..400001
 * (2 rows of X's chunk 1, on site 1), chunk 1 X's 400000..800001 (2 rows
 * of chunk 2, on site 0 of 2 or site 2 of 3), chunk 2 X's chunk 2 alone:
 * 4 floats, 16 bytes, either way.  On one site nothing moves. */
static void test_halo(void **state)
{
	(void)state;
	for (int sites = 1; sites <= 3; sites++) {
		TraProg *p = compile("size N = 1000000, R = 3;\ninput X[N];\ninput K[R];\nY[y] = K[d] * X[y + d];\n"
		                     "output Y;\n");
		PlacePin pp = {0, {.kind = PL_PART, .ndims = 1, .dims = {0}}};
		OptOptions o = {.nranks = sites, .level = 2, .verify = true, .block = 400000, .placepins = &pp,
		                .nplacepins = 1};
		opt_block(p, &o);
		IaPlan *plan = opt_plan(p, &o);
		int nhalo = 0;
		for (int i = 0; i < plan->ops.n; i++) {
			const IaOp *op = &plan->ops.v[i];
			if (op->kind != IA_HALO)
				continue;
			nhalo++;
			assert_int_equal(op->type.hlo[0], 0);
			assert_int_equal(op->type.hhi[0], 2);
			assert_int_equal(op->type.hext[0], 1000000);
			assert_int_equal(rel_frontier(&op->type, 0), 3);
			assert_int_equal(rel_chunk_len(&op->type, 0, 0), 400002);
			assert_int_equal(rel_chunk_len(&op->type, 0, 1), 400002);
			assert_int_equal(rel_chunk_off(&op->type, 0, 1), 400000);
			assert_int_equal(rel_chunk_len(&op->type, 0, 2), 200000);
			assert_true(rel_floats(&op->type) == 1000004);
			assert_true(op->bytes_sent == (sites == 1 ? 0 : 16));
			assert_true(plan->ops.v[op->u.halo.in].place.kind == PL_PART);
		}
		assert_int_equal(nhalo, 1);
		ia_free(plan);
		tra_free(p);
	}
}

static void test_table4(void **state)
{
	(void)state;
	static const struct { int64_t I, K, J; double bmm, cmm, rmm; } rows[] = {
		{40000, 40000, 40000, 1.6e10, 1.6e10, 1.6e10},          /* two general matrices */
		{10000, 640000, 10000, 6.4e10, 1.0e9, 6.4e10},          /* a common large dim */
		{80000, 10000, 80000, 8.0e9, 6.4e10, 8.0e9},            /* two large dims */
	};
	for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
		/* BMM: both partitioned on dim 0, B broadcast; CMM: A on dim 1,
		 * B on dim 0; RMM: both on dim 0 (the thesis's layouts) */
		double bmm = mm_cost(rows[i].I, rows[i].K, rows[i].J, 10, 5, STRAT_BROADCAST, 1, "part(0)", "part(0)");
		double cmm = mm_cost(rows[i].I, rows[i].K, rows[i].J, 5, 5, STRAT_COPARTITION, -1, "part(1)", "part(0)");
		double rmm = mm_cost(rows[i].I, rows[i].K, rows[i].J, 5, 5, STRAT_REPLICATE, -1, "part(0)", "part(0)");
		if (fabs(bmm - rows[i].bmm) > 1e-9 * rows[i].bmm || fabs(cmm - rows[i].cmm) > 1e-9 * rows[i].cmm ||
		    fabs(rmm - rows[i].rmm) > 1e-9 * rows[i].rmm)
			fail_msg("row %zu: BMM %.3g CMM %.3g RMM %.3g, Table 4 says %.3g %.3g %.3g", i, bmm, cmm, rmm,
			         rows[i].bmm, rows[i].cmm, rows[i].rmm);
	}
}

/* Reads, initial values and writes are predicted per op, at the machine's
 * rates, and left out of the plan's seconds, which the search compares (a
 * partitioned read's calls aside, free in the built-in model), as
 * are first touches of memory. */
static void test_io(void **state)
{
	(void)state;
	TraProg *p = compile("size N = 1000;\ninput A[N, N];\nparam W[N, N] = normal(0, 1);\n"
	                     "C[i, j] = A[i, k] * W[k, j];\noutput C;\n");
	Machine m;
	machine_default(&m);
	m.read_bw = 1e9;
	m.write_bw = 5e8;
	m.write_latency = 0.01;
	m.normal_rate = 1e8;
	BlockPin bp[] = {{0, 0, 500}, {0, 1, 1000}};
	OptOptions o = {.nranks = 2, .level = 2, .verify = true, .machine = &m, .blockpins = bp, .nblockpins = 2};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	double ops = 0, io = 0, high = 0;
	int seen = 0;
	for (int i = 0; i < plan->ops.n; high = fmax(high, plan->ops.v[i].live_bytes), i++) {
		const IaOp *op = &plan->ops.v[i];
		double share = cost_rank_bytes(&(CostCtx){&m, 2}, &op->type, &op->place, 1);
		switch (op->kind) {
		case IA_READ:           /* this rank's share of the file, into memory new
			                 * to the process: its first touch too */
			assert_true(op->live_bytes > high);
			assert_true(fabs(op->seconds - share / 1e9 - (op->live_bytes - high) / m.touch_bw) <
			            1e-12 + 1e-9 * op->seconds);
			io += op->seconds;
			seen |= 1;
			break;
		case IA_INIT:           /* its values, this rank's share, and their memory */
			assert_true(op->live_bytes > high);
			assert_true(fabs(op->seconds - share / 4 / 1e8 - (op->live_bytes - high) / m.touch_bw) <
			            1e-9 * op->seconds);
			io += op->seconds;
			seen |= 2;
			break;
		case IA_WRITE: {        /* rank 0 gets the other half and writes the whole
			                 * through the page cache (a file's latency and its
			                 * bytes): no overlap below a stage; a slab received
			                 * is held beside C, its first touch the write's
			                 * beyond the most held before */
			double b = 1000.0 * 1000 * 4;
			assert_true(op->live_bytes >= b / 2 + 500 * 4000);
			double want = 0.01 + machine_coll(&m, COLL_ALLGATHER, b / 2) + b / m.memcpy_bw + b / 5e8 +
			              fmax(0, op->live_bytes - high) / m.touch_bw;
			assert_true(fabs(op->seconds - want) < 1e-9 * want);
			io += op->seconds;
			seen |= 4;
			break;
		}
		default:
			ops += op->seconds;
		}
	}
	assert_int_equal(seen, 7);
	/* the plan's seconds are its ops' but for first touches (at most the
	 * peak's), which are the ops' time and no plan's choice */
	assert_true(io > 0 && plan->predicted_seconds <= ops * (1 + 1e-9) &&
	            ops - plan->predicted_seconds <= plan->peak_bytes / m.touch_bw * (1 + 1e-9));
	assert_true(ops - plan->predicted_seconds > 0);
	ia_free(plan);
	tra_free(p);

	/* 36 MB: the first stage filled, then the slower of filling and the
	 * disk, then the last stage written (through the page cache, its
	 * writeback started behind every stage: no stage held) */
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			m.write_bw = 5e10;      /* a disk faster than the copy */
		p = compile("size N = 3000;\ninput A[N, N];\nB[i, j] = A[i, j] * 2;\noutput B;\n");
		OptOptions o2 = {.nranks = 2, .level = 2, .verify = true, .machine = &m};
		opt_block(p, &o2);
		plan = opt_plan(p, &o2);
		double b = 3000.0 * 3000 * 4, stage = 8 << 20;
		double fill = (machine_coll(&m, COLL_ALLGATHER, b / 2) + b / m.memcpy_bw) / b;
		double want = 0.01 + stage * fill + (b - stage) * fmax(fill, 1 / m.write_bw) +
		              stage / m.write_bw;
		int writes = 0;
		high = 0;
		for (int i = 0; i < plan->ops.n; high = fmax(high, plan->ops.v[i].live_bytes), i++)
			if (plan->ops.v[i].kind == IA_WRITE) {
				const IaOp *op = &plan->ops.v[i];
				want += fmax(0, op->live_bytes - high) / m.touch_bw;
				assert_true(op->live_bytes >= b / 2);
				assert_true(fabs(op->seconds - want) < 1e-9 * want);
				writes++;
			}
		assert_int_equal(writes, 1);
		ia_free(plan);
		tra_free(p);
	}

	/* the runtime's stages (runtime/write.c, Out): none up to 512 MiB, a
	 * file the page cache takes; above, two of 8 MiB and a block */
	CostCtx c1 = {&m, 1};
	Place all = place_all();
	RelType small = type2(3000, 3000, 3000, 3000), big = type2(16384, 16384, 16384, 16384);
	assert_true(write_transient_bytes(&c1, &small, &all, NULL) == 0);
	assert_true(write_transient_bytes(&c1, &big, &all, NULL) == 2 * (8 << 20) + 4096);

	/* a sparse matrix of 10^6 x 10^6 with 10^7 elements in blocks of
	 * 125000, on 2 ranks: to a .npz (or no default path) it is gathered on
	 * rank 0 and made a csr, its bytes twice (runtime/npz.c), not a dense
	 * block of 62.5 GB; to a .npy its chunks go dense one at a time */
	CostCtx c2 = {&m, 2};
	int d0 = 0;
	Place rows = place_part(1, &d0);
	RelType sp = type2(1000000, 1000000, 125000, 125000);
	sp.sparse = true;
	sp.density = 1e-5;
	double block = 125000.0 * 125000 * 4;
	assert_true(write_transient_bytes(&c2, &sp, &rows, "r.npz") == 2 * rel_bytes(&sp));
	assert_true(write_transient_bytes(&c2, &sp, &rows, NULL) == 2 * rel_bytes(&sp));
	assert_true(2 * rel_bytes(&sp) < 1e9);
	assert_true(write_transient_bytes(&c2, &sp, &rows, "r.npy") >= block);
}

/* A read's system calls (the runtime's rt_read_rel): a rank whose chunks
 * split the file's rows reads each row of each chunk and the other ranks'
 * bytes between, up to 8 KiB of them, in stretches of 512 runs and gaps,
 * past that each run on its own; one that owns whole bands of chunks
 * reads stretches of up to 1024 runs; chunks not in key order are read
 * run by run. */
static void test_read_calls(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.read_bw = 1e9;
	m.read_call = 1e-6;
	CostCtx c1 = {&m, 1}, c2 = {&m, 2};
	RelType t = type2(1000, 500, 1000, 500);        /* four 500 x 500 chunks */
	int d0 = 0, d1 = 1;
	Place p0 = place_part(1, &d0), p1 = place_part(1, &d1), all = place_all();
	double half = 500.0 * 1000 * 4, whole = 2 * half;
	struct { const CostCtx *c; Place *p; double bytes, calls; } rows[] = {
		{&c2, &p1, whole, 2},           /* every other chunk along a row, runs and gaps of 2000
		                                 * bytes: 2 x 500 runs, 2 x 500 gaps */
		{&c2, &p0, half, 1},            /* a band of 500 rows x 2 chunks: 1000 runs, one preadv */
		{&c2, &all, whole, 2},          /* 2000 runs in stretches of 1024 */
		{&c1, &p1, whole, 2},           /* one rank owns every chunk */
	};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		double want = rows[i].bytes / 1e9 + rows[i].calls * 1e-6;
		assert_true(fabs(cost_read_seconds(rows[i].c, &t, rows[i].p) - want) < 1e-12);
	}
	/* a read every rank makes whole is the plan's (cost_read); of a
	 * partitioned one, only its calls, which its layout decides */
	assert_true(fabs(cost_read(&c2, &t, &all).seconds - (whole / 1e9 + 2e-6)) < 1e-12);
	assert_true(fabs(cost_read(&c2, &t, &p1).seconds - (half / 1e9 + 2e-6)) < 1e-12);
	/* gaps of 12000 bytes: a preadv per run, 2 chunks x 500 */
	RelType wide = type2(1000, 500, 6000, 3000);
	assert_true(fabs(cost_read_seconds(&c2, &wide, &p1) - (3e6 * 4 / 1e9 + 1000e-6)) < 1e-12);
	assert_true(fabs(cost_read(&c2, &t, &p0).seconds - 1e-6) < 1e-12);
	/* chunk dims transposed: read run by run, 4 chunks x 500 */
	RelType tt = t;
	tt.chunkdim[0] = 1;
	tt.chunkdim[1] = 0;
	assert_true(fabs(cost_read_seconds(&c2, &tt, &all) - (whole / 1e9 + 2000e-6)) < 1e-12);
	/* one chunk: one run */
	RelType one = type2(1000, 1000, 1000, 1000);
	assert_true(fabs(cost_read_seconds(&c2, &one, &all) - (whole / 1e9 + 1e-6)) < 1e-12);
	/* the built-in model has calls free */
	machine_default(&m);
	assert_true(m.read_call == 0);
}

/* A sparse input read from a scipy .npz: each element of the rows a rank
 * reads at npz_elem, and the busiest rank inflating all of indices (int32)
 * and data, and indptr, at inflate_bw, or zlib_bw where zlib streams a
 * member; free in the built-in model, set in the derived one. */
static void test_npz_read(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	assert_true(m.npz_elem == 0 && m.inflate_bw == 0);
	m.read_bw = 1e9;
	CostCtx c2 = {&m, 2};
	RelType t = sparse2(1000, 500, 1000, 500, 0.01f);      /* 10000 elements */
	int d0 = 0, d1 = 1;
	Place p0 = place_part(1, &d0), p1 = place_part(1, &d1), all = place_all();
	double bytes0 = cost_read_seconds(&c2, &t, &p0), bytes1 = cost_read_seconds(&c2, &t, &p1);
	double bytesall = cost_read_seconds(&c2, &t, &all);
	m.npz_elem = 1e-6;
	m.inflate_bw = 1e8;
	double inflated = 10000.0 * (4 + 4) + 1001.0 * 4;
	/* split by rows: its 5000 elements; by columns or whole: every row's */
	assert_true(fabs(cost_read_seconds(&c2, &t, &p0) - bytes0 - (5000e-6 + inflated / 1e8)) < 1e-9);
	assert_true(fabs(cost_read_seconds(&c2, &t, &p1) - bytes1 - (10000e-6 + inflated / 1e8)) < 1e-9);
	assert_true(fabs(cost_read_seconds(&c2, &t, &all) - bytesall - (10000e-6 + inflated / 1e8)) < 1e-9);
	/* under a memory budget every member streams through zlib, at zlib_bw
	 * when the model has it, else at inflate_bw */
	CostCtx b2 = {&m, 2, OBJ_SECONDS, 1e9};
	assert_true(fabs(cost_read_seconds(&b2, &t, &p0) - cost_read_seconds(&c2, &t, &p0)) < 1e-12);
	m.zlib_bw = 5e7;
	assert_true(fabs(cost_read_seconds(&b2, &t, &p0) - bytes0 - (5000e-6 + inflated / 5e7)) < 1e-9);
	assert_true(fabs(cost_read_seconds(&c2, &t, &p0) - bytes0 - (5000e-6 + inflated / 1e8)) < 1e-9);
	/* without one, a member over 256 MiB streams too: 50M elements' indices
	 * (200 MB) and indptr go whole, data as f64 (400 MB) through zlib */
	RelType big = type2(100000, 100000, 100000, 100000);
	big.sparse = true;
	big.dtype = DT_F64;
	big.density = 0.005;                            /* 50M elements */
	m.npz_elem = 0;
	double bigbytes = cost_read_seconds(&c2, &big, &all);
	m.inflate_bw = m.zlib_bw = 0;
	bigbytes -= cost_read_seconds(&c2, &big, &all);
	assert_true(fabs(bigbytes / (5e7 * 4 / 1e8 + 100001.0 * 4 / 1e8 + 5e7 * 8 / 5e7) - 1) < 1e-6);
	/* a dense input's read is unchanged */
	RelType d = type2(1000, 500, 1000, 500);
	assert_true(fabs(cost_read_seconds(&c2, &d, &p0) - 500.0 * 1000 * 4 / 1e9) < 1e-12);
}

/* Initial values: the rates are of f32 values, and an f64 value costs
 * two (runtime/param.c makes two f32 values a hash). */
static void test_init_dtype(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c2 = {&m, 2};
	RelType t = type2(1000, 500, 100, 100), d = t;
	d.dtype = DT_F64;
	int d0 = 0;
	Place p0 = place_part(1, &d0);
	for (int k = 0; k < 2; k++) {
		Tensor x = {.init = k ? INIT_NORMAL : INIT_UNIFORM};
		double rate = k ? m.normal_rate : m.uniform_rate;
		assert_true(fabs(cost_init(&c2, &x, &t, &p0) - 50000 / rate) < 1e-12);
		assert_true(fabs(cost_init(&c2, &x, &d, &p0) - 2 * 50000 / rate) < 1e-12);
	}
}

/* A reduction along its input's contiguous rows (max[c] of x[n, c]: the
 * chunk's last dim reduced) costs row_reduce an element when that is more
 * than the loop rate says; one along the other dim (max[n]: the tile's
 * loop contiguous) keeps the loop rate, as does the built-in model (0). */
static void test_row_reduce(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 2};
	Arena *a = arena_new();
	RelType t = type2(1000, 500, 2000, 1000);
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	/* rows: max over label 1, the contiguous */
	Kernel *rows = map2(a, 1, (int[]){0}, AGG_MAX, kx_in(a, 0)), *cols = map2(a, 1, (int[]){1}, AGG_MAX, kx_in(a, 0));
	double r0 = cost_map(&c, rows, &t, &part0).seconds, c0 = cost_map(&c, cols, &t, &part0).seconds;
	assert_true(fabs(r0 - c0) < 1e-15);
	m.row_reduce = 5e-9;                    /* the reference loop rate: 1.25 ns */
	double r1 = cost_map(&c, rows, &t, &part0).seconds, c1 = cost_map(&c, cols, &t, &part0).seconds;
	double share = cost_share(&c, &t, &part0), elems = 1000.0 * 2000;
	assert_true(fabs(c1 - c0) < 1e-15);
	double base = 4 * share * m.call_overhead + m.local_op_overhead;
	assert_true(fabs(r1 - base - elems * share * 5e-9) < 1e-9 * r1);
	/* a join reducing along the rows of both inputs runs the same loop
	 * (nnsearch's dist[n] = proj[n, e] * diff[n, e]): no gemm, row_reduce
	 * an element; its sum over the rows' other dim is the loop rate's */
	Kernel *dot[2];
	for (int i = 0; i < 2; i++) {
		Kernel *k = dot[i] = kernel_new(a, 2);
		k->nlab = 2;
		for (int j = 0; j < 2; j++) {
			k->nindim[j] = 2;
			k->inlab[j][0] = 0;
			k->inlab[j][1] = 1;
		}
		k->noutdim = 1;
		k->outlab[0] = i ? 1 : 0;
		k->reduces = true;
		k->red = AGG_ADD;
		k->expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL);
	}
	JoinSpec on = {.nmatch = 2, .lkey = {0, 1}, .rkey = {0, 1}};
	double j1 = cost_join(&c, dot[0], &t, &t, &on, &part0, NULL).seconds;
	double k1 = cost_join(&c, dot[1], &t, &t, &on, &part0, NULL).seconds;
	m.row_reduce = 0;
	double j0 = cost_join(&c, dot[0], &t, &t, &on, &part0, NULL).seconds;
	assert_true(fabs(j0 - base - elems * share * 2 / m.loop_rate) < 1e-9 * j0);
	assert_true(fabs(j1 - base - elems * share * 5e-9) < 1e-9 * j1);
	assert_true(fabs(cost_join(&c, dot[1], &t, &t, &on, &part0, NULL).seconds - k1) < 1e-15);
	/* not a join whose tile runs along an input's rows: gcn's
	 * A[i, j] * relu(H[j, c]) summed over j (no gemm: the relu), the tile
	 * over c, H's contiguous dim; the loop rate's with row_reduce or not */
	Kernel *prod = kernel_new(a, 2);
	prod->nlab = 3;
	prod->nindim[0] = prod->nindim[1] = 2;
	prod->inlab[0][0] = 0;
	prod->inlab[0][1] = 1;
	prod->inlab[1][0] = 1;
	prod->inlab[1][1] = 2;
	prod->noutdim = 2;
	prod->outlab[0] = 0;
	prod->outlab[1] = 2;
	prod->reduces = true;
	prod->red = AGG_ADD;
	prod->expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_op(a, KOP_RELU, kx_in(a, 1), NULL, NULL), NULL);
	JoinSpec mm = {.nmatch = 1, .lkey = {1}, .rkey = {0}};
	RelType h = type2(2000, 1000, 64, 64);
	double p0 = cost_join(&c, prod, &t, &h, &mm, &part0, NULL).seconds;
	m.row_reduce = 5e-9;
	assert_true(fabs(cost_join(&c, prod, &t, &h, &mm, &part0, NULL).seconds - p0) < 1e-15);
	assert_true(fabs(cost_join(&c, dot[0], &t, &t, &on, &part0, NULL).seconds - j1) < 1e-15);
	m.row_reduce = 0;
	/* a reduction to one scalar stays a scalar loop, one add after another
	 * (mf's sum[i, j](E[i, j] * E[i, j])): row_reduce an element too */
	Kernel *all = map2(a, 0, NULL, AGG_ADD, kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 0), NULL));
	double s0 = cost_map(&c, all, &t, &part0).seconds;
	assert_true(fabs(s0 - base - elems * share * 2 / m.loop_rate) < 1e-9 * s0);
	m.row_reduce = 5e-9;
	double s1 = cost_map(&c, all, &t, &part0).seconds;
	assert_true(fabs(s1 - base - elems * share * 5e-9) < 1e-9 * s1);
	arena_free(a);
}

/* A convolution's register tiles run along input 1's rows (cost_conv):
 * a row shorter than a tile (CONV_TILE_BYTES, 24 floats) runs at the loop
 * rate, or at conv_short a multiply-add when that is slower, cnn.tra's 12
 * x 12 images; a row of whole tiles at the conv rate;
 * a row of 36, its 24 at the conv rate and 12 at the loop rate.  A 1-d
 * convolution Y[x] = K[d] * X[x + d - 1] of row length L. */
static double conv_row_secs(const CostCtx *c, Arena *a, int64_t L)
{
	Kernel *k = kernel_new(a, 2);
	k->nlab = 2;
	k->nindim[0] = k->nindim[1] = 1;
	k->inlab[0][0] = 1;
	k->inlab[1][0] = 0;
	k->noutdim = 1;
	k->outlab[0] = 0;
	k->reduces = true;
	k->red = AGG_ADD;
	k->expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL);
	k->nwin = 1;
	k->win[0].dim = 0;
	k->win[0].lab = 1;
	k->win[0].coef = 1;
	k->win[0].shift = -1;
	RelType K = {.dtype = DT_F32, .nkey = 1, .nchunk = 1, .chunkdim = {0}, .extent = {3}, .block = {3}};
	RelType X = {.dtype = DT_F32, .nkey = 1, .nchunk = 1, .chunkdim = {0}, .extent = {L}, .block = {L}};
	JoinSpec on = {0};
	Place all = place_all();
	return cost_conv(c, k, &K, &X, &on, &X, &all).seconds;
}

static void test_conv_rows(void **state)
{
	(void)state;
	Arena *a = arena_new();
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 2};
	double rate = m.loop_rate;
	m.loop_rate = m.conv_rate = 1e300;
	double base[4], secs[4];
	int64_t L[4] = {12, 96, 120, 36};
	for (int i = 0; i < 4; i++)
		base[i] = conv_row_secs(&c, a, L[i]);
	m.loop_rate = rate;
	m.conv_rate = 10 * rate;
	for (int i = 0; i < 4; i++)
		secs[i] = conv_row_secs(&c, a, L[i]) - base[i];
	double flop = 2.0 * 3 / rate;           /* a row element's flops at the loop rate */
	assert_true(fabs(secs[0] - 12 * flop) < 1e-9 * secs[0]);
	assert_true(fabs(secs[1] - 96 * flop / 10) < 1e-9 * secs[1]);
	assert_true(fabs(secs[2] - 120 * flop / 10) < 1e-9 * secs[2]);
	assert_true(fabs(secs[3] - (24 * flop / 10 + 12 * flop)) < 1e-9 * secs[3]);
	/* a multiply-add along a short row at conv_short when that is the
	 * slower (cnn's 12-wide rows ran at a quarter of the loop rate), at
	 * the loop rate when it is not; whole tiles unchanged */
	m.conv_short = 4 * 2 / rate;
	assert_true(fabs(conv_row_secs(&c, a, 12) - base[0] - 4 * 12 * flop) < 1e-9 * secs[0]);
	assert_true(fabs(conv_row_secs(&c, a, 36) - base[3] - (24 * flop / 10 + 4 * 12 * flop)) < 1e-9 * secs[3]);
	assert_true(fabs(conv_row_secs(&c, a, 96) - base[1] - secs[1]) < 1e-9 * secs[1]);
	m.conv_short = 1 / rate;
	assert_true(fabs(conv_row_secs(&c, a, 12) - base[0] - secs[0]) < 1e-9 * secs[0]);
	arena_free(a);
}

/* A slice's window (trt_slice) copies its bytes and finds each row along
 * the result's innermost chunk dim at slice_row: cnn.tra's pooling window
 * [N, F, HP, WP, 2] at N = 1024, F = 4, HP = WP = 6, a rank's half, is
 * 73728 rows of 2 floats; the same bytes in rows of 12, 12288 rows.  The
 * built-in model (slice_row 0) prices its bytes alone, as before. */
static void test_slice(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 2};
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	RelType win = {.dtype = DT_F32, .nkey = 5, .nchunk = 5, .chunkdim = {0, 1, 2, 3, 4},
	               .extent = {1024, 4, 6, 6, 2}, .block = {512, 4, 6, 6, 2}};
	RelType rows12 = {.dtype = DT_F32, .nkey = 4, .nchunk = 4, .chunkdim = {0, 1, 2, 3},
	                  .extent = {1024, 4, 6, 12}, .block = {512, 4, 6, 12}};
	double bytes = 512.0 * 4 * 6 * 6 * 2 * 4;
	Cost k = cost_slice(&c, &win, &part0);
	assert_true(fabs(k.seconds - bytes / m.memcpy_bw - m.local_op_overhead) < 1e-12);
	assert_true(fabs(cost_slice(&c, &rows12, &part0).seconds - k.seconds) < 1e-12);
	m.slice_row = 4e-8;
	Cost k2 = cost_slice(&c, &win, &part0), k12 = cost_slice(&c, &rows12, &part0);
	assert_true(fabs(k2.seconds - k.seconds - 73728 * 4e-8) < 1e-12);
	assert_true(fabs(k12.seconds - k.seconds - 12288 * 4e-8) < 1e-12);
	/* an innermost dim longer than its block: rows of the block */
	rows12.extent[3] = 24;
	rows12.block[3] = 12;
	Cost k24 = cost_slice(&c, &rows12, &part0);
	assert_true(fabs(k24.seconds - 2 * bytes / m.memcpy_bw - m.local_op_overhead - 2 * 12288 * 4e-8) < 1e-12);
}

/* A kernel over sparse inputs takes sparse_elem at least per stored
 * element it visits, whatever its flops: a map over a sparse relation's
 * elements (1000 x 2000 at density 0.01: 20000 stored, 10000 on the
 * busiest of 2 ranks); a sampled join at its mask's beside its flops.  A
 * dense kernel, and the built-in model (sparse_elem 0), price their flops
 * as before. */
static void test_sparse_elements(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	CostCtx c = {&m, 2};
	Arena *a = arena_new();
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	RelType sp = sparse2(1000, 500, 2000, 1000, 0.01f), dense = type2(1000, 500, 2000, 1000);
	Kernel *id = map2(a, 2, (int[]){0, 1}, AGG_ADD, kx_op(a, KOP_NEG, kx_in(a, 0), NULL, NULL));
	Kernel *mul = kernel_new(a, 2);
	mul->nlab = 2;
	for (int i = 0; i < 2; i++) {
		mul->nindim[i] = 2;
		mul->inlab[i][0] = 0;
		mul->inlab[i][1] = 1;
	}
	mul->noutdim = 2;
	mul->outlab[0] = 0;
	mul->outlab[1] = 1;
	mul->expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL);
	JoinSpec on = {.nmatch = 2, .lkey = {0, 1}, .rkey = {0, 1}};
	double stored = 1000.0 * 2000 * (double)sp.density;
	double m0 = cost_map(&c, id, &sp, &part0).seconds, d0s = cost_map(&c, id, &dense, &part0).seconds;
	double j0 = cost_join(&c, mul, &dense, &dense, &on, &part0, &sp).seconds;
	m.sparse_elem = 1e-6;
	double m1 = cost_map(&c, id, &sp, &part0).seconds, d1s = cost_map(&c, id, &dense, &part0).seconds;
	double j1 = cost_join(&c, mul, &dense, &dense, &on, &part0, &sp).seconds;
	double flops = stored / m.loop_rate;    /* one op an element */
	assert_true(fabs(d1s - d0s) < 1e-15);
	assert_true(fabs(m1 - m0 - (stored * 1e-6 - flops) / 2) < 1e-12);
	/* a sampled join's visits beside its flops */
	assert_true(fabs(j1 - j0 - stored * 1e-6 / 2) < 1e-12);
	/* flops above the floor: those */
	m.sparse_elem = 1e-12;
	assert_true(fabs(cost_map(&c, id, &sp, &part0).seconds - m0) < 1e-15);
	arena_free(a);
}

/* in0[a, b] * in1[r[0], r[1]] summed over b into [a, c] (labels a 0, b 1,
 * c 2): A H with r = {1, 2}, U V^T with r = {2, 1}. */
static Kernel *product(Arena *a, const int *r)
{
	Kernel *k = kernel_new(a, 2);
	k->nlab = 3;
	k->nindim[0] = k->nindim[1] = 2;
	k->inlab[0][0] = 0;
	k->inlab[0][1] = 1;
	k->inlab[1][0] = r[0];
	k->inlab[1][1] = r[1];
	k->noutdim = 2;
	k->outlab[0] = 0;
	k->outlab[1] = 2;
	k->reduces = true;
	k->red = AGG_ADD;
	k->expr = kx_op(a, KOP_MUL, kx_in(a, 0), kx_in(a, 1), NULL);
	return k;
}

/* A sampled join (SDDMM: U[a, b] V[c, b] at a mask's elements [a, c])
 * visits the mask's elements once for each chunk of the summed dim b: K =
 * 16 in two chunks of 8 made mf_sparse's U V^T 1.55x slower, and a plan
 * priced as if it were not chose it. */
static void test_sampled_passes(void **state)
{
	(void)state;
	Machine m = sparse_machine();
	CostCtx c = {&m, 2};
	Arena *a = arena_new();
	int d0 = 0;
	Place part0 = place_part(1, &d0);
	RelType mask = sparse2(1000, 500, 2000, 1000, 0.01f);
	RelType u1 = type2(1000, 500, 16, 16), v1 = type2(2000, 1000, 16, 16);
	RelType u2 = type2(1000, 500, 16, 8), v2 = type2(2000, 1000, 16, 8);
	Kernel *k = product(a, (int[]){2, 1});
	JoinSpec on = {.nmatch = 1, .lkey = {1}, .rkey = {1}};
	double one = cost_join(&c, k, &u1, &v1, &on, &part0, &mask).seconds;
	double two = cost_join(&c, k, &u2, &v2, &on, &part0, &mask).seconds;
	double visits = 1000.0 * 2000 * (double)mask.density / 2;     /* the busiest of 2 ranks */
	/* one pass more over the mask's elements, and 4 more kernel calls
	 * (2 a, 2 b, 2 c: 8 tuples, not 4), half of them on the busiest rank */
	assert_true(fabs(two - one - visits * m.sparse_elem - 2 * m.call_overhead) < 1e-9);
	arena_free(a);
}

/* An SpMM's visits follow its placement: A[i, j] H[j, c] (A 1000 x 2000 at
 * density 0.01, 20000 stored; H 2000 x 40) split by A's rows visits half
 * of A's elements on the busiest of 2 ranks, split by H's columns (A
 * broadcast) all of them on each: gcn_sparse's column split priced its
 * sparse products as the row split's, and ran 1.92 s against 1.46.  Each
 * chunk of A is visited once for each block of H's columns it meets: with
 * H's 40 columns in two blocks, the row split visits its half twice
 * (the arxiv-size GCN's A H1 W2 in blocks of 10 columns took 7.1 ns an
 * element a block where one block of 40 took 11.3 in all), and the two
 * splits visit alike.  A row of H gathered at each element costs its
 * cache lines at the gathers' rate when H's chunk is more than the L1. */
static void test_sparse_visits_split(void **state)
{
	(void)state;
	Machine m = sparse_machine();
	CostCtx c = {&m, 2};
	Arena *a = arena_new();
	RelType sp = sparse2(1000, 500, 2000, 1000, 0.01f), h = type2(2000, 1000, 40, 40);
	RelType h2 = type2(2000, 1000, 40, 20);
	Kernel *mm = product(a, (int[]){1, 2});
	JoinSpec on = {.nmatch = 1, .lkey = {1}, .rkey = {0}};
	int rows = 0, cols = 2;         /* the join's keys: i, j, c */
	Place by_rows = place_part(1, &rows), by_cols = place_part(1, &cols);
	double stored = 1000.0 * 2000 * (double)sp.density;
	double r = cost_join(&c, mm, &sp, &h, &on, &by_rows, NULL).seconds;
	double k = cost_join(&c, mm, &sp, &h, &on, &by_cols, NULL).seconds;
	/* the difference: half of A's visits, and the 2 calls more the
	 * busiest rank makes (H's one block of columns is on one rank) */
	assert_true(r >= stored / 2 * 1e-6 && r < stored / 2 * 1e-6 * 1.01);
	assert_true(fabs(k - r - stored / 2 * 1e-6 - 2 * m.call_overhead) < 1e-9);
	/* H's columns in two blocks: twice half, or once all */
	double r2 = cost_join(&c, mm, &sp, &h2, &on, &by_rows, NULL).seconds;
	double k2 = cost_join(&c, mm, &sp, &h2, &on, &by_cols, NULL).seconds;
	assert_true(r2 >= stored * 1e-6 && r2 < stored * 1e-6 * 1.01);
	assert_true(k2 >= stored * 1e-6 && k2 < stored * 1e-6 * 1.01);
	/* H's chunk (1000 x 40 floats) beyond an L1 of 32 KiB: a row of 40
	 * floats an element, three cache lines, at memcpy's rate, or at the
	 * sparse gathers' when measured; within half an L1 of 1 MiB, none */
	m.cache_l1 = 32 << 10;
	double g = cost_join(&c, mm, &sp, &h, &on, &by_rows, NULL).seconds;
	assert_true(fabs(g - r - stored / 2 * 192 / m.memcpy_bw) < 1e-9);
	m.sparse_gather_bw = 2e10;
	g = cost_join(&c, mm, &sp, &h, &on, &by_rows, NULL).seconds;
	assert_true(fabs(g - r - stored / 2 * 192 / 2e10) < 1e-9);
	m.cache_l1 = 1 << 20;
	assert_true(fabs(cost_join(&c, mm, &sp, &h, &on, &by_rows, NULL).seconds - r) < 1e-12);
	/* flops alone (the built-in model): the two splits alike */
	m.sparse_elem = 0;
	m.cache_l1 = 0;
	assert_true(fabs(cost_join(&c, mm, &sp, &h2, &on, &by_rows, NULL).seconds -
	                 cost_join(&c, mm, &sp, &h2, &on, &by_cols, NULL).seconds) < 1e-12);
	arena_free(a);
}

static void push_op(IaPlan *p, IaOpKind kind, int64_t count, int ist, double seconds)
{
	IaOp op = {.kind = kind, .seconds = seconds};
	if (kind == IA_LOOP) {
		op.u.loop.count = count;
		op.u.loop.ist = ist;
	}
	vec_push(&p->ops, op);
}

/* An IST loop's op (trt_ist runs the whole loop) is priced from its body's
 * plan: the busiest rank's steps (ceil(20 / 2) = 10) of the body's ops
 * inside the loop, a round's exchange every 5 steps (nothing to send here:
 * the latency), the final gather; the plan's total adds it each time the
 * loop op runs (3 epochs). */
static void test_ist_loop(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	TraProg *tra = tra_new();
	IstLoop l = {.every = 5, .count = 20};
	vec_push(&tra->ist, l);
	IaPlan *p = ia_new(tra, 2), *body = ia_new(tra, 1);
	push_op(p, IA_LOOP, 3, 0, 0);
	push_op(p, IA_LOOP, 20, 1, 0);
	push_op(p, IA_ENDLOOP, 0, 0, 0);
	push_op(p, IA_ENDLOOP, 0, 0, 0);
	p->predicted_seconds = 0.5;
	push_op(body, IA_COUNTER, 0, 0, 7);             /* before the loop: not a step's */
	push_op(body, IA_LOOP, 20, 1, 0);
	push_op(body, IA_COUNTER, 0, 0, 1e-3);
	push_op(body, IA_LOOP, 4, 0, 0);                /* a loop inside the step: 4 times */
	push_op(body, IA_COUNTER, 0, 0, 1e-4);
	push_op(body, IA_ENDLOOP, 0, 0, 0);
	push_op(body, IA_ENDLOOP, 0, 0, 0);
	opt_cost_ist(p, 0, body, &m);
	double step = 1e-3 + 4 * 1e-4;
	double run = 10 * step + 2 * m.latency[COLL_ALLTOALL] + m.latency[COLL_ALLGATHER];
	assert_true(fabs(p->ops.v[1].seconds - run) < 1e-15);
	assert_true(p->ops.v[0].seconds == 0);
	assert_true(fabs(p->predicted_seconds - (0.5 + 3 * run)) < 1e-12);
	ia_free(p);
	ia_free(body);
	tra_free(tra);
}

/* What runtime/ist.c does around the steps (plancost.c, ist_copies): a
 * param W[4, 6] split along its last dim H on 2 subnets (the body holds
 * W[4, 3]), 20 steps in rounds of 5: 2 rounds a run.  Per run W copied out
 * of its chunks and back (2 x 24 floats), its 24 entries walked 4 times (8
 * bytes each: holder and owner) and copied once by the gather; per round
 * its entries walked 4 times more, the exchanged half of them copied twice,
 * the subnet's slice (12 floats) copied 4 times, each element gathered
 * through its neuron's index (8 bytes, in and out), and its 4 rows each way
 * at slice_row.  Without them the loop priced only the steps and the
 * messages, and mnist_ist's IST loop op was predicted 0.137 s against 0.23 s
 * of CPU. */
static void test_ist_copies(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.memcpy_bw = 1e9;
	m.slice_row = 1e-7;
	TraProg *tra = tra_new();
	Tensor w = {.name = "W", .role = TENSOR_PARAM, .dtype = DT_F32, .rank = 2, .shape = {4, 3},
	            .dimsize = {"D", "H"}};
	vec_push(&tra->tensors, w);
	TraOp load = {.kind = TRA_LOAD, .stmt = -1, .u.init.tensor = 0};
	vec_push(&tra->ops, load);
	IstLoop l = {.nsplit = 1, .split = {"H"}, .every = 5, .count = 20};
	vec_push(&tra->ist, l);
	IaPlan *p = ia_new(tra, 2), *body = ia_new(tra, 1);
	push_op(p, IA_LOOP, 20, 1, 0);
	push_op(p, IA_ENDLOOP, 0, 0, 0);
	push_op(body, IA_LOOP, 20, 1, 0);
	push_op(body, IA_COUNTER, 0, 0, 1e-3);
	push_op(body, IA_ENDLOOP, 0, 0, 0);
	opt_cost_ist(p, 0, body, &m);
	double run = 2 * 24 * 4 + 4 * 24 * 8 + 24 * 4;
	double round = 4 * 12 * 4 + 2 * 12 * 8 + 4 * 24 * 8 + 2 * (12 * 4 / 2);
	double copies = (run + 2 * round) / m.memcpy_bw + 2 * 8 * m.slice_row;
	double msgs = 2 * machine_coll(&m, COLL_ALLTOALL, 12 * 4 / 2) + machine_coll(&m, COLL_ALLGATHER, 24 * 4 / 2);
	assert_true(fabs(p->ops.v[0].seconds - (10 * 1e-3 + msgs + copies)) < 1e-15);
	ia_free(p);
	ia_free(body);
	tra_free(tra);
}

/* The two objectives' orders of costs (cost_cmp): seconds then floats
 * moved by default; under --objective floats the busiest rank's flops
 * (within WORK_TIE: the paper's premise, the work spread), then floats
 * moved, then seconds; no plan (infinite seconds) last under both; the
 * names trac's --objective takes. */
static void test_objective(void **state)
{
	(void)state;
	/* the same work spread alike: floats decide under floats */
	Cost fast = {.seconds = 1.0, .floats = 1e8, .work = 1e9}, frugal = {.seconds = 6.0, .floats = 0, .work = 1e9};
	assert_int_equal(cost_cmp(OBJ_SECONDS, fast, frugal), -1);
	assert_int_equal(cost_cmp(OBJ_SECONDS, frugal, fast), 1);
	assert_int_equal(cost_cmp(OBJ_FLOATS, fast, frugal), 1);
	assert_int_equal(cost_cmp(OBJ_FLOATS, frugal, fast), -1);
	/* equal first measures: the second decides */
	Cost a = {.seconds = 2.0, .floats = 5e6, .work = 1e9}, b = {.seconds = 2.0 * (1 + 1e-8), .floats = 7e6, .work = 1e9};
	assert_int_equal(cost_cmp(OBJ_SECONDS, a, b), -1);     /* a tie on seconds: fewer floats */
	assert_int_equal(cost_cmp(OBJ_FLOATS, a, b), -1);
	Cost c = {.seconds = 3.0, .floats = 5e6 * (1 + 1e-12), .work = 1e9};
	assert_int_equal(cost_cmp(OBJ_FLOATS, a, c), -1);      /* a tie on floats: faster */
	assert_int_equal(cost_cmp(OBJ_FLOATS, c, a), 1);
	assert_int_equal(cost_cmp(OBJ_SECONDS, a, a), 0);
	assert_int_equal(cost_cmp(OBJ_FLOATS, a, a), 0);
	/* the busiest rank's flops first under floats: doing all of the work
	 * on one rank of five (or on every rank) loses to spreading it, however
	 * many floats spreading moves; 4 of 5 ranks busy ties with 5 */
	Cost spread = {.seconds = 2.0, .floats = 1e7, .work = 1e9}, one = {.seconds = 6.0, .floats = 0, .work = 5e9};
	Cost four = {.seconds = 2.5, .floats = 1e6, .work = 1.25e9};
	assert_int_equal(cost_cmp(OBJ_FLOATS, spread, one), -1);
	assert_int_equal(cost_cmp(OBJ_FLOATS, one, spread), 1);
	assert_int_equal(cost_cmp(OBJ_FLOATS, four, spread), -1);
	assert_int_equal(cost_cmp(OBJ_SECONDS, four, spread), 1);  /* work does not count by default */
	Cost slow_one = {.seconds = 1.0, .floats = 0, .work = 5e9};
	assert_int_equal(cost_cmp(OBJ_SECONDS, slow_one, spread), -1);
	/* the measures ranked before seconds: only under floats */
	assert_int_equal(cost_cmp_lead(OBJ_SECONDS, fast, frugal), 0);
	assert_int_equal(cost_cmp_lead(OBJ_SECONDS, spread, one), 0);
	assert_int_equal(cost_cmp_lead(OBJ_FLOATS, fast, frugal), 1);
	assert_int_equal(cost_cmp_lead(OBJ_FLOATS, spread, one), -1);
	assert_int_equal(cost_cmp_lead(OBJ_FLOATS, a, c), 0);
	/* no plan is worst, however few floats it would move */
	Cost none = {.seconds = INFINITY, .floats = 0, .work = 0};
	for (Objective o = OBJ_SECONDS; o < NOBJECTIVES; o++) {
		assert_int_equal(cost_cmp(o, none, fast), 1);
		assert_int_equal(cost_cmp(o, fast, none), -1);
		assert_int_equal(cost_cmp(o, none, none), 0);
		assert_int_equal(cost_cmp_lead(o, none, fast), 0);
	}
	/* the option's names */
	Objective o = OBJ_SECONDS;
	assert_true(objective_parse("floats", &o) && o == OBJ_FLOATS);
	assert_true(objective_parse("seconds", &o) && o == OBJ_SECONDS);
	assert_false(objective_parse("bytes", &o));
	assert_string_equal(objective_name(OBJ_FLOATS), "floats");
	assert_string_equal(objective_name(OBJ_SECONDS), "seconds");
}

/* An op's floor (--profile's roofline) counts the bytes it touches: a
 * slice of a batch out of X, or a gather of rows out of a table, reads
 * and writes its result's bytes, not the whole relation it reads from
 * (a batch slice in a loop was given X's 188 MB a call, a floor 200x
 * its measured time). */
static void test_floor_touched(void **state)
{
	(void)state;
	TraProg *p = compile("size N = 60000, D = 784, B = 250, V = 100000, E = 64;\n"
	                     "input X[N, D];\ninput T[V, E];\ninput I[B] : i64;\n"
	                     "repeat 240 {\n  Xb[n in B, d] = X[b*B + n, d];\n"
	                     "  R[n, e] = T[I[n], e];\n  s = sum[n, d](Xb[n, d]) + sum[n, e](R[n, e]);\n"
	                     "  print s;\n}\n");
	Machine m;
	machine_default(&m);
	OptOptions o = {.nranks = 1, .level = 2, .verify = true, .machine = &m};
	opt_block(p, &o);
	IaPlan *plan = opt_plan(p, &o);
	int seen = 0;
	for (int i = 0; i < plan->ops.n; i++) {
		const IaOp *op = &plan->ops.v[i];
		double result = rel_bytes(&op->type);
		if (op->kind == IA_SLICE) {
			assert_true(op->floor_seconds > 0);
			assert_true(op->floor_seconds <= 2 * result / m.memcpy_bw);
			seen |= 1;
		} else if (op->kind == IA_GATHER || op->kind == IA_LOOKUP) {
			assert_true(op->floor_seconds > 0);
			assert_true(op->floor_seconds <= 4 * result / m.memcpy_bw);
			seen |= 2;
		}
	}
	assert_int_equal(seen, 3);
	ia_free(plan);
	tra_free(p);
}

/* An op made in place of its input writes into the lines it has just read:
 * its floor counts half its result's bytes; the same op on an input that
 * lives on (so not in place) counts them all. */
static void test_floor_in_place(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.loop_rate = 1e15;     /* bytes, not flops, bound these ops */
	for (int keep = 0; keep < 4; keep++) {
		/* 4 MB a relation: beyond a cache of 0 bytes, within one of 12
		 * MB (the 9 MB of it plancost.c counts as kept) */
		m.cache_per_rank = keep < 2 ? 0 : 12e6;
		TraProg *p = compile(keep % 2 ? "size N = 2000, M = 500;\ninput X[N, M];\nY[i, j] = X[i, j] + 1;\n"
		                            "output Y;\noutput X;\n"
		                          : "size N = 2000, M = 500;\ninput X[N, M];\nY[i, j] = X[i, j] + 1;\n"
		                            "output Y;\n");
		OptOptions o = {.nranks = 1, .level = 2, .verify = true, .machine = &m};
		opt_block(p, &o);
		IaPlan *plan = opt_plan(p, &o);
		IaLoops life;
		ia_loops(plan, &life);
		int seen = 0;
		for (int i = 0; i < plan->ops.n; i++) {
			const IaOp *op = &plan->ops.v[i];
			if (op->kind != IA_MAP || !op->u.map.kernel)
				continue;
			double bytes = rel_bytes(&op->type);
			assert_int_equal(ia_elementwise_in_place(plan, &life, i), keep % 2 ? -1 : 0);
			/* in the cache, the loop's rate alone (its flops at 1e15) */
			double want = keep < 2 ? (keep ? 2 : 1.5) * bytes / (2 * m.memcpy_bw) : op->flops / m.loop_rate;
			assert_true(fabs(op->floor_seconds - want) < 1e-9 * op->floor_seconds);
			/* and no op is predicted faster than its floor */
			assert_true(op->seconds >= op->floor_seconds);
			seen++;
		}
		assert_int_equal(seen, 1);
		ia_loops_free(&life);
		ia_free(plan);
		tra_free(p);
	}
}

/* An input is in the cache when little was touched since its last use:
 * Y = X * s right after X was read runs at the loop's rate; with a sum
 * over a 40 MB Z between X's read and it, its floor streams X's 2 MB (its
 * result, read next by the write, stays).  A 16 MB cache either way: X
 * and Y together fit. */
static void test_floor_reuse(void **state)
{
	(void)state;
	Machine m;
	machine_default(&m);
	m.loop_rate = 1e15;     /* bytes, not flops, bound these ops */
	m.cache_per_rank = 16e6;
	for (int between = 0; between < 2; between++) {
		TraProg *p = compile(between ? "size N = 1000, M = 500, K = 20000;\ninput X[N, M];\ninput Z[K, M];\n"
		                               "s = sum[k, m](Z[k, m]);\nY[i, j] = X[i, j] * s;\noutput Y;\n"
		                             : "size N = 1000, M = 500;\ninput X[N, M];\nY[i, j] = X[i, j] * 2;\n"
		                               "output Y;\n");
		OptOptions o = {.nranks = 1, .level = 2, .verify = true, .machine = &m};
		opt_block(p, &o);
		IaPlan *plan = opt_plan(p, &o);
		int seen = 0;
		for (int i = 0; i < plan->ops.n; i++) {
			const IaOp *op = &plan->ops.v[i];
			double x = rel_bytes(&op->type);
			if (!(op->kind == IA_JOIN || op->kind == IA_MAP) || x != 4 * 1000 * 500)
				continue;       /* Y's op, not the sum's */
			double want = between ? x / (2 * m.memcpy_bw) : op->flops / m.loop_rate;
			assert_true(fabs(op->floor_seconds - want) < 1e-9 * want);
			seen++;
		}
		assert_int_equal(seen, 1);
		ia_free(plan);
		tra_free(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_shares),
		cmocka_unit_test(test_moves),
		cmocka_unit_test(test_machine),
		cmocka_unit_test(test_table4),
		cmocka_unit_test(test_conv),
		cmocka_unit_test(test_bcast_one_site),
		cmocka_unit_test(test_bcast_shares),
		cmocka_unit_test(test_thin_gemm),
		cmocka_unit_test(test_thin_calls_pack),
		cmocka_unit_test(test_thin_calls_l2),
		cmocka_unit_test(test_halo),
		cmocka_unit_test(test_io),
		cmocka_unit_test(test_read_calls),
		cmocka_unit_test(test_init_dtype),
		cmocka_unit_test(test_npz_read),
		cmocka_unit_test(test_sampled_passes),
		cmocka_unit_test(test_ist_loop),
		cmocka_unit_test(test_ist_copies),
		cmocka_unit_test(test_row_reduce),
		cmocka_unit_test(test_scatter),
		cmocka_unit_test(test_conv_rows),
		cmocka_unit_test(test_slice),
		cmocka_unit_test(test_sparse_elements),
		cmocka_unit_test(test_sparse_visits_split),
		cmocka_unit_test(test_kernel_weights),
		cmocka_unit_test(test_objective),
		cmocka_unit_test(test_floor_touched),
		cmocka_unit_test(test_floor_in_place),
		cmocka_unit_test(test_floor_reuse),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
