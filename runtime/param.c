/*
 * param.c: params' initial values, relation copies, print and loop progress.
 *
 * Random initial values are a pure function of (seed, tensor name, element
 * index in the whole tensor): a counter-based generator (the splitmix64
 * finaliser over the three), so any rank can make any chunk, and the values
 * do not depend on the rank count or the blocking.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;         /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* A uniform double in (0, 1] from the stream's element `i`, draw `k`. */
static double draw(uint64_t stream, uint64_t i, uint64_t k)
{
	uint64_t h = mix(stream ^ mix(2 * i + k));
	return ((double)(h >> 11) + 1.0) * 0x1p-53;
}

static double value(TrtInit kind, double a, double b, uint64_t stream, uint64_t i)
{
	switch (kind) {
	case TRT_INIT_ZEROS:
		return 0;
	case TRT_INIT_ONES:
		return 1;
	case TRT_INIT_UNIFORM:
		return a + (b - a) * (1.0 - draw(stream, i, 0));     /* [a, b) */
	case TRT_INIT_NORMAL: {
		double u1 = draw(stream, i, 0), u2 = draw(stream, i, 1);
		return a + b * sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
	}
	}
	rt_bug("bad initialiser %d", (int)kind);
}

TrtRel *trt_init_param(int tensor, const TrtType *t, TrtPlace p, TrtInit kind, double a, double b)
{
	const TrtProgram *prog = rt.prog;
	if (tensor < 0 || tensor >= prog->ntensors)
		rt_bug("init of tensor %d of %d", tensor, prog->ntensors);
	const TrtTensor *x = &prog->tensors[tensor];
	if (t->nkey != x->rank || t->nchunk != x->rank)
		rt_bug("init of %s with %d key dims", x->name, t->nkey);
	uint64_t stream = mix(mix(trt_seed()) ^ name_hash(x->name));

	TrtRel *r = trt_rel_new(t, p);
	int64_t nk = rt_nkeys(t), key[TRT_MAXDIM], n[TRT_MAXDIM], at[TRT_MAXDIM];
	for (int64_t lin = 0; lin < nk; lin++) {
		rt_key_from_linear(t, lin, key);
		if (p.kind == TRT_PART && trt_site(&p, t, key) != rt.rank)
			continue;
		int64_t count = rt_chunk_shape(t, key, n);
		Chunk *c = rt_chunk_new(rt_chunk_bytes(t, key));
		void *data = rt_chunk_data(c);
		memset(at, 0, sizeof at);
		for (int64_t e = 0; e < count; e++) {
			/* the element's index in the whole tensor, row-major */
			uint64_t g = 0;
			for (int d = 0; d < t->nkey; d++) {
				int ch = -1;
				for (int cc = 0; cc < t->nchunk; cc++)
					if (t->chunkdim[cc] == d)
						ch = cc;
				g = g * (uint64_t)t->extent[d] + (uint64_t)(key[d] * t->block[d] + at[ch]);
			}
			double v = value(kind, a, b, stream, g);
			if (t->dtype == TRT_F32)
				((float *)data)[e] = (float)v;
			else
				((double *)data)[e] = v;
			for (int cc = t->nchunk - 1; cc >= 0; cc--) {
				if (++at[cc] < n[cc])
					break;
				at[cc] = 0;
			}
		}
		rt_rel_push(r, key, c);
	}
	return r;
}

TrtRel *trt_rel_clone(const TrtRel *r)
{
	TrtRel *c = trt_rel_new(&r->type, r->place);
	for (int64_t i = 0; i < r->n; i++)
		rt_rel_push(c, r->keys + i * r->type.nkey, rt_chunk_ref(r->chunks[i]));
	return c;
}

/* ---- print and loops ---- */

#define MAX_LOOPS 16

static struct {
	int depth;
	int64_t count[MAX_LOOPS], iter[MAX_LOOPS];
	double start;
} loops;

void trt_loop_begin(int64_t count)
{
	if (loops.depth == 0)
		loops.start = MPI_Wtime();
	if (loops.depth < MAX_LOOPS) {
		loops.count[loops.depth] = count;
		loops.iter[loops.depth] = 0;
	}
	loops.depth++;
}

void trt_loop_iter(int64_t i)
{
	if (loops.depth > 0 && loops.depth <= MAX_LOOPS)
		loops.iter[loops.depth - 1] = i;
}

void trt_loop_end(void)
{
	if (loops.depth > 0)
		loops.depth--;
}

void trt_print(const TrtRel *r, const char *name)
{
	const TrtType *t = &r->type;
	double sq = 0, first = 0;
	int have = 0;

	/* each element counted once: under TRT_ALL only rank 0's copy */
	if (r->place.kind != TRT_ALL || rt.rank == 0)
		for (int64_t i = 0; i < r->n; i++) {
			TrtView v = rt_view(t, r->keys + i * t->nkey, r->chunks[i]);
			int64_t count = 1;
			for (int c = 0; c < v.rank; c++)
				count *= v.n[c];
			for (int64_t e = 0; e < count; e++) {
				double x = rt_elem(t->dtype, v.p, e);
				if (!have) {
					first = x;
					have = 1;
				}
				sq += x * x;
			}
		}
	/* a scalar lives on one rank: the sum of the (one) value over ranks */
	double mine[2] = {have ? first : 0, sq}, all[2];
	MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (rt.rank != 0 || rt.quiet)
		return;
	if (loops.depth > 0) {
		for (int l = 0; l < loops.depth && l < MAX_LOOPS; l++)
			printf("%siter %lld/%lld", l ? ", " : "", (long long)loops.iter[l] + 1, (long long)loops.count[l]);
		printf(" (%.2f s): ", MPI_Wtime() - loops.start);
	}
	if (t->nkey == 0) {
		printf("%s = %.9g\n", name, all[0]);
	} else {
		printf("%s: %s (", name, rt_dtype_name(t->dtype));
		for (int d = 0; d < t->nkey; d++)
			printf("%s%lld", d ? ", " : "", (long long)t->extent[d]);
		printf("%s), norm %.9g\n", t->nkey == 1 ? "," : "", sqrt(all[1]));
	}
	fflush(stdout);
}
