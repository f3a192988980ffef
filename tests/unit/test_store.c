/*
 * test_store.c: the chunk store (runtime/store.c) and the spill file
 * (runtime/spill.c) of out-of-core execution, on one rank: next uses from
 * the static schedule (loops included), eviction farthest first, inside an
 * op by its stream, clean and dirty chunks, pins and holds, reading ahead,
 * the file's extents, and joins and aggregations under a budget giving the
 * in-memory bits.  tests/e2e/spill.sh runs whole programs.
 *
 * The spill folder is $RT_TEST_DIR, else tests/tmp/store.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define K64 ((size_t)64 << 10)

/* The program whose schedule the tests follow (ops by number):
 *   0 read X   1 read Y   2 read Z   3 join X Y   4 map Z
 *   5 loop { 6 map X } 7
 *   8 map Y   9 store P (from 6)   10 loop { 11 load P   12 map P } 13 */
static const TrtOpInfo ops[] = {
	{"read", "X", 0, 0, 0, 0, 0, {0}, 0},
	{"read", "Y", 0, 0, 0, 0, 0, {0}, 0},
	{"read", "Z", 0, 0, 0, 0, 0, {0}, 0},
	{"join", "X Y", 0, 0, 0, 0, 2, {0, 1}, 0},
	{"map", "Z", 0, 0, 0, 0, 1, {2}, 0},
	{"loop", "", 0, 0, 0, 0, 0, {0}, 0},
	{"map", "X", 0, 0, 0, 0, 1, {0}, 0},
	{"endloop", "", 0, 0, 0, 0, 0, {0}, 0},
	{"map", "Y", 0, 0, 0, 0, 1, {1}, 0},
	{"store", "P", 0, 0, 0, 0, 1, {6}, 1},
	{"loop", "", 0, 0, 0, 0, 0, {0}, 0},
	{"load", "P", 0, 0, 0, 0, 0, {0}, 1},
	{"map", "P", 0, 0, 0, 0, 1, {11}, 0},
	{"endloop", "", 0, 0, 0, 0, 0, {0}, 0},
};
static const TrtTensor tensors[] = {{"T", TRT_INPUT, TRT_F32, 1, {1}, "unused.npy", 0}};
static const TrtProgram prog = {TRT_ABI, "test_store", tensors, 1, ops, 14, 1, 1, 0, -1, 0};

static const TrtType one = {.dtype = TRT_F32, .nkey = 1, .extent = {K64 / 4}, .block = {K64 / 4}, .nchunk = 1};

/* A relation of one 64 KiB chunk made "by" op op, its elements v, v+1, ... */
static TrtRel *rel_at(int op, float v)
{
	trt_op_begin(op);
	TrtRel *r = trt_rel_new(&one, (TrtPlace){TRT_ALL});
	int64_t key = 0;
	Chunk *c = rt_chunk_new(K64);
	float *p = rt_chunk_mut(c);
	for (size_t i = 0; i < K64 / 4; i++)
		p[i] = v + (float)i;
	rt_rel_push(r, &key, c);
	trt_op_end(op);
	return r;
}

static int intact(const Chunk *c, float v)
{
	size_t mark = rt_pin_mark();
	const float *p = rt_chunk_data(c);
	int ok = 1;
	for (size_t i = 0; i < K64 / 4; i++)
		ok &= p[i] == v + (float)i;
	rt_pin_release(mark);
	return ok;
}

/* Next uses from the schedule: by op and after it, through a loop's
 * iterations, and a param's value through its loads. */
static void test_next_use(void **state)
{
	(void)state;
	rt.budget = 1e9;
	TrtRel *x = rel_at(0, 0), *y = rel_at(1, 0), *z = rel_at(2, 0);
	trt_op_begin(3);
	assert_true(rt_store_when(x->chunks[0]) == 0);  /* op 3 reads X and Y now */
	assert_true(rt_store_when(y->chunks[0]) == 0);
	assert_true(rt_store_when(z->chunks[0]) == 1);  /* Z at op 4 */
	assert_true(x->chunks[0]->nu_after == 3);       /* X next at 6, Y at 8 */
	assert_true(y->chunks[0]->nu_after == 5);
	trt_op_end(3);
	trt_op_begin(5);
	trt_op_end(5);
	trt_loop_begin(4);
	trt_loop_iter(0);
	trt_op_begin(6);
	/* X again in the next iteration, 2 ops on; Y after the 3 iterations
	 * still to run (2 ops each), 2 ops after the loop's end; Z never */
	assert_true(x->chunks[0]->nu_after == 2);
	assert_true(y->chunks[0]->nu_now == 8);
	assert_true(z->chunks[0]->nu_now >= 1e29);
	trt_op_end(6);
	trt_loop_iter(3);
	trt_op_begin(6);                /* the last iteration: X is done */
	assert_true(x->chunks[0]->nu_after >= 1e29);
	assert_true(y->chunks[0]->nu_now == 2);
	trt_op_end(6);
	trt_loop_end();
	/* a store makes the param's value, which its loads' readers read */
	trt_op_begin(9);
	TrtRel *p = trt_rel_clone(x);
	assert_true(rt_store_when(p->chunks[0]) == 3);  /* x's chunk, now P's too */
	TrtRel *q = trt_rel_new(&one, (TrtPlace){TRT_ALL});
	int64_t key = 0;
	Chunk *c = rt_chunk_new(K64);
	rt_rel_push(q, &key, c);
	assert_true(c->nu_now == 3);    /* op 12 reads P (through load 11) */
	trt_op_end(9);
	trt_free(p);
	trt_free(q);
	trt_free(x);
	trt_free(y);
	trt_free(z);
	rt.budget = 0;
}

/* Over the budget, the chunk used farthest in the future goes first, and
 * comes back intact; a chunk in no relation counts as used next. */
static void test_evict_farthest(void **state)
{
	(void)state;
	rt.budget = 3.5 * K64;
	TrtRel *x = rel_at(0, 1), *y = rel_at(1, 2), *z = rel_at(2, 3);
	trt_op_begin(5);
	trt_op_end(5);
	trt_loop_begin(4);
	trt_loop_iter(0);
	trt_op_begin(6);                /* X now, Y in 8 ops, Z never */
	double w0 = rt.spill_w;
	Chunk *a = rt_chunk_new(K64);
	assert_non_null(x->chunks[0]->data);
	assert_non_null(y->chunks[0]->data);
	assert_null(z->chunks[0]->data);
	assert_true(z->chunks[0]->slot >= 0);
	Chunk *b = rt_chunk_new(K64);
	assert_null(y->chunks[0]->data);
	assert_non_null(x->chunks[0]->data);
	assert_true(rt.spill_w - w0 == 2 * K64);
	assert_true(rt.live <= rt.budget);
	trt_op_end(6);
	rt_chunk_unref(a);
	rt_chunk_unref(b);
	trt_loop_end();
	assert_true(intact(z->chunks[0], 3) && intact(y->chunks[0], 2) && intact(x->chunks[0], 1));
	trt_free(x);
	trt_free(y);
	trt_free(z);
	assert_true(rt.live == 0);
	assert_true(rt_spill_file_bytes() == 0);
	rt.budget = 0;
}

/* A chunk read back keeps its copy (clean): evicted again, it is not
 * written; written to, it is dirty and written again. */
static void test_dirty(void **state)
{
	(void)state;
	rt.budget = 1.5 * K64;
	TrtRel *x = rel_at(0, 5);
	Chunk *c = x->chunks[0];
	size_t mark = rt_pin_mark();
	Chunk *t = rt_chunk_new(K64);   /* pinned: x goes */
	rt_pin_release(mark);
	rt_chunk_unref(t);
	assert_null(c->data);
	double w = rt.spill_w, r = rt.spill_r;
	assert_true(intact(c, 5));      /* read back */
	assert_true(rt.spill_r - r == K64 && c->slot >= 0);
	mark = rt_pin_mark();
	t = rt_chunk_new(K64);
	rt_pin_release(mark);
	rt_chunk_unref(t);
	assert_null(c->data);
	assert_true(rt.spill_w == w);   /* clean: not written again */
	mark = rt_pin_mark();
	float *p = rt_chunk_mut(c);     /* dirty */
	p[0] = 42;
	rt_pin_release(mark);
	assert_true(c->slot < 0);
	mark = rt_pin_mark();
	t = rt_chunk_new(K64);
	rt_pin_release(mark);
	rt_chunk_unref(t);
	assert_null(c->data);
	assert_true(rt.spill_w - w == K64);
	mark = rt_pin_mark();
	assert_true(((const float *)rt_chunk_data(c))[0] == 42 && ((const float *)rt_chunk_data(c))[1] == 6);
	rt_pin_release(mark);
	trt_free(x);
	rt.budget = 0;
}

/* A pinned or held chunk is never evicted, whatever the budget: the
 * allocation goes over it, and rt.over says by how much. */
static void test_pins(void **state)
{
	(void)state;
	rt.over = 0;
	rt.budget = 3.5 * K64;
	TrtRel *x = rel_at(0, 7), *y = rel_at(1, 8);
	size_t mark = rt_pin_mark();
	const void *p = rt_chunk_data(x->chunks[0]);
	void *h = rt_chunk_hold(y->chunks[0], 0);
	rt.budget = 1.5 * K64;
	Chunk *t = rt_chunk_new(K64);
	assert_true(x->chunks[0]->data == p && y->chunks[0]->data == h);
	assert_true(rt.over == 1.5 * K64);
	rt_pin_release(mark);
	rt_chunk_unhold(y->chunks[0]);
	rt_chunk_unref(t);
	mark = rt_pin_mark();
	t = rt_chunk_new(K64);          /* now x and y may go: one does */
	assert_true(!x->chunks[0]->data || !y->chunks[0]->data);
	rt_pin_release(mark);
	rt_chunk_unref(t);
	assert_true(intact(x->chunks[0], 7) && intact(y->chunks[0], 8));
	trt_free(x);
	trt_free(y);
	rt.budget = 0;
	rt.over = 0;
}

/* Inside an op its stream ranks chunks: one it is done with goes before
 * one it reads later, and the later the farther; the chunks at its next
 * positions are read ahead, each once. */
static void test_stream(void **state)
{
	(void)state;
	rt.budget = 8 * K64;
	TrtRel *r[6];
	for (int i = 0; i < 6; i++)
		r[i] = rel_at(0, (float)(10 * i));      /* all read by ops 3 and 6 */
	trt_op_begin(3);
	/* the stream: r0 r1 r2 r3 r4 r5 r0 */
	Chunk ***cell = rt_alloc(sizeof *cell * 7);
	for (int i = 0; i < 6; i++)
		cell[i] = &r[i]->chunks[0];
	cell[6] = &r[0]->chunks[0];
	rt_stream_begin(cell, 7);
	rt_stream_at(2);
	double w0 = rt_store_when(r[0]->chunks[0]), w1 = rt_store_when(r[1]->chunks[0]);
	double w3 = rt_store_when(r[3]->chunks[0]), w5 = rt_store_when(r[5]->chunks[0]);
	assert_true(w1 == 3);           /* done here: op 6 reads it next */
	assert_true(w1 > w0 && w0 > w5 && w5 > w3 && w3 > 0);
	rt_stream_end();
	trt_op_end(3);

	/* everything spilled, then a stream over it: read ahead, once each */
	size_t mark = rt_pin_mark();
	Chunk *big = rt_chunk_new((size_t)(8 * K64));
	rt_pin_release(mark);
	rt_chunk_unref(big);
	trt_op_begin(3);
	double r0 = rt.spill_r;
	cell = rt_alloc(sizeof *cell * 6);
	for (int i = 0; i < 6; i++) {
		assert_null(r[i]->chunks[0]->data);
		cell[i] = &r[i]->chunks[0];
	}
	rt_stream_begin(cell, 6);
	/* a quarter of the budget ahead: positions 0 and 1 are on their way */
	assert_non_null(r[0]->chunks[0]->data);
	assert_non_null(r[1]->chunks[0]->data);
	assert_null(r[2]->chunks[0]->data);
	for (int i = 0; i < 6; i++) {
		rt_stream_at(i);
		assert_true(intact(r[i]->chunks[0], (float)(10 * i)));
	}
	rt_stream_end();
	trt_op_end(3);
	assert_true(rt.spill_r - r0 == 6 * K64);
	assert_true(rt.live <= rt.budget);
	for (int i = 0; i < 6; i++)
		trt_free(r[i]);
	rt.budget = 0;
}

/* The spill file's extents: freed ones are reused, neighbours merge, the
 * last one shrinks the file. */
static void test_extents(void **state)
{
	(void)state;
	int64_t a = rt_spill_alloc(5000), b = rt_spill_alloc(4096), c = rt_spill_alloc(1);
	assert_true(a == 0 && b == 8192 && c == 12288);
	rt_spill_free(b, 4096);
	assert_true(rt_spill_alloc(100) == 8192);       /* reused */
	rt_spill_free(8192, 100);
	rt_spill_free(a, 5000);                         /* merges with b's */
	assert_true(rt_spill_alloc(12288) == 0);
	rt_spill_free(0, 12288);
	rt_spill_free(c, 1);
	assert_true(rt_spill_file_bytes() == 0);
	assert_true(rt_spill_alloc(1) == 0);            /* the file is empty again */
	rt_spill_free(0, 1);
}

/* ---- ops under a budget: the in-memory bits ---- */

static double val(int which, int64_t i, int64_t j)
{
	return sin((double)(which * 7919 + i * 131 + j * 17)) * 3;
}

static TrtRel *mat(int which, int64_t m, int64_t n, int64_t bm, int64_t bn, TrtPlace p)
{
	TrtType t = {.dtype = TRT_F64, .nkey = 2, .extent = {m, n}, .block = {bm, bn}, .nchunk = 2, .chunkdim = {0, 1}};
	TrtRel *r = trt_rel_new(&t, p);
	int64_t key[2], shape[2];
	for (key[0] = 0; key[0] < rt_frontier(&t, 0); key[0]++)
		for (key[1] = 0; key[1] < rt_frontier(&t, 1); key[1]++) {
			size_t mark = rt_pin_mark();
			rt_chunk_shape(&t, key, shape);
			Chunk *c = rt_chunk_new(rt_chunk_bytes(&t, key));
			double *d = rt_chunk_mut(c);
			for (int64_t a = 0; a < shape[0]; a++)
				for (int64_t b = 0; b < shape[1]; b++)
					d[a * shape[1] + b] = val(which, key[0] * bm + a, key[1] * bn + b);
			rt_rel_push(r, key, c);
			rt_pin_release(mark);
		}
	return r;
}

static void kernel(const TrtView *in, TrtView *out, int acc)
{
	trt_dgemm(in[0].n[0], in[1].n[1], in[0].n[1], 1, in[0].p, in[0].n[1], 1, in[1].p, in[1].n[1], 1,
	          acc ? 1 : 0, out->p, out->n[1], 1);
}

static void same_bits(const TrtRel *a, const TrtRel *b)
{
	assert_true(a->n == b->n);
	for (int64_t i = 0; i < a->n; i++) {
		assert_true(!rt_key_cmp(a->keys + i * a->type.nkey, b->keys + i * b->type.nkey, a->type.nkey));
		size_t mark = rt_pin_mark();
		assert_true(a->chunks[i]->nbytes == b->chunks[i]->nbytes);
		assert_memory_equal(rt_chunk_data(a->chunks[i]), rt_chunk_data(b->chunks[i]), a->chunks[i]->nbytes);
		rt_pin_release(mark);
	}
}

/* C = A B fused with its sum, the join without it, and the aggregation of
 * that: the same bits under a budget a tenth of the data, which the
 * working set (a tile) keeps to. */
static void test_ops_under_budget(void **state)
{
	(void)state;
	TrtPlace all = {TRT_ALL};
	TrtJoin fused = {.nmatch = 1, .lkey = {1}, .rkey = {0}, .ngroup = 2, .group = {0, 2}};
	TrtJoin plain = {.nmatch = 1, .lkey = {1}, .rkey = {0}, .ngroup = -1};
	TrtType c2 = {.dtype = TRT_F64, .nkey = 2, .extent = {90, 70}, .block = {10, 10}, .nchunk = 2, .chunkdim = {0, 1}};
	TrtType c3 = {.dtype = TRT_F64, .nkey = 3, .extent = {90, 80, 70}, .block = {10, 10, 10}, .nchunk = 2,
	              .chunkdim = {0, 2}};
	int group[2] = {0, 2};
	TrtRel *res[2][3];
	/* under the budget first: the chunks made in memory after are not the
	 * store's, and would count against it */
	for (int pass = 0; pass < 2; pass++) {
		rt.budget = pass ? 0 : 64000;   /* A, B: 108 kB in 800-byte chunks; A B without the sum 400 kB */
		rt.over = 0;
		rt.peak = rt.op_peak = rt.live;
		TrtRel *a = mat(1, 90, 80, 10, 10, all), *b = mat(2, 80, 70, 10, 10, all);
		res[pass][0] = trt_join(a, b, &fused, kernel, &c2, all);
		res[pass][1] = trt_join(a, b, &plain, kernel, &c3, all);
		res[pass][2] = trt_agg(res[pass][1], 2, group, TRT_AGG_ADD, &c2, all);
		if (pass == 0) {
			assert_true(rt.over == 0);
			assert_true(rt.peak <= rt.budget);
			assert_true(rt.spill_w > 0);
		}
		trt_free(a);
		trt_free(b);
	}
	rt.budget = 1e9;                /* to read the spilled ones back */
	for (int k = 0; k < 3; k++) {
		same_bits(res[0][k], res[1][k]);
		trt_free(res[0][k]);
		trt_free(res[1][k]);
	}
	rt.budget = 0;
}

int main(int argc, char **argv)
{
	char dir[512], cmd[1200];
	snprintf(dir, sizeof dir, "%s", getenv("RT_TEST_DIR") ? getenv("RT_TEST_DIR") : "tests/tmp/store");
	snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "test_store: cannot make %s\n", dir);
	/* --spill-dir opens the spill file; each test sets its own budget */
	char *args[] = {argv[0], "--spill-dir", dir, NULL};
	int n = 3;
	char **av = args;
	(void)argc;
	trt_init(&n, &av, &prog, 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_extents),
		cmocka_unit_test(test_next_use),
		cmocka_unit_test(test_evict_farthest),
		cmocka_unit_test(test_dirty),
		cmocka_unit_test(test_pins),
		cmocka_unit_test(test_stream),
		cmocka_unit_test(test_ops_under_budget),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);
	trt_finish();
	return failed ? 1 : 0;
}
