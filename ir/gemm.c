/*
 * gemm.c: a contraction kernel as BLIS calls.
 *
 * codegen (emit_gemm_kernel) emits the calls contraction_plan chooses, and
 * the cost model (optimizer/kernelcost.c, kernel_rate) prices those same calls:
 * one decision, two readers.
 */
#include <string.h>

#include "ir/ir.h"

/*
 * A join kernel in0 * in1 summed over the labels the inputs share and the
 * output lacks is a contraction.  Each label has a role by where it occurs:
 *
 *   batch  in0, in1 and out        m  in0 and out
 *   k      in0 and in1             n  in1 and out
 *
 * Labels of one role that are adjacent, in the same order, in every operand
 * holding them merge into one group (a dense chunk's dims x, y with y right
 * after x are one dim of length n_x n_y and y's stride), so "abc,bcd->ad"
 * is one gemm with k = n_b n_c.  One group per role is what BLIS sees as m,
 * n and k: of all the choices, the one gemm_estimate thinks fastest (BLIS
 * is slow on matrices without a unit stride, a call costs microseconds,
 * short dims waste its micro-kernel).  Every other group
 * is a loop around the gemm call: batch, m and n groups index independent
 * products, extra k groups accumulate (beta = 1 after their first index).
 * Transposed operands are strides, never copies; trt_sgemm/trt_dgemm give
 * the stride of a dimension of length 1 the value BLIS accepts.
 *
 * A product with no k group (an outer or elementwise product) or with no m
 * and no n group (a dot product per batch index) is a loop kernel instead:
 * one BLIS call per element or per row costs more than it computes.  So is
 * one whose calls loop over an input's unit stride (a batch label innermost,
 * "abc,bc->ac"): each call would read every cache line of the input for
 * one element of it, where the loop kernel runs along the lines.
 */

/* The operands (0 in0, 1 in1, 2 out) that hold a label of each role. */
static const bool role_in[NROLE][3] = {
	[ROLE_BATCH] = {true, true, true}, [ROLE_M] = {true, false, true},
	[ROLE_N] = {false, true, true}, [ROLE_K] = {true, true, false},
};

static int operand_n(const Kernel *k, int o)
{
	return o < 2 ? k->nindim[o] : k->noutdim;
}

static const int *operand_lab(const Kernel *k, int o)
{
	return o < 2 ? k->inlab[o] : k->outlab;
}

/* Position of label l in operand o; -1 if absent, -2 if there twice. */
static int label_pos(const Kernel *k, int o, int l)
{
	int pos = -1;
	for (int c = 0; c < operand_n(k, o); c++)
		if (operand_lab(k, o)[c] == l)
			pos = pos == -1 ? c : -2;
	return pos;
}

/* The static length of label l: the block of the key dim carrying it in the
 * first input that has it (chunks at the edge are shorter). */
static double label_block(const Kernel *k, const RelType *const *inty, int l)
{
	for (int i = 0; i < k->nin; i++)
		for (int c = 0; c < k->nindim[i]; c++)
			if (k->inlab[i][c] == l) {
				int d = inty[i]->chunkdim[c];
				int64_t bl = inty[i]->block[d];
				return (double)(bl < inty[i]->extent[d] ? bl : inty[i]->extent[d]);
			}
	return 1;
}

/* Whether operand o has unit stride along one of groups x, y (or -1). */
static bool unit_in(const Kernel *k, const Contraction *c, int o, int x, int y)
{
	int g[2] = {x, y};
	for (int i = 0; i < 2; i++)
		if (g[i] >= 0 &&
		    label_pos(k, o, c->g[g[i]].lab[c->g[g[i]].n - 1]) == operand_n(k, o) - 1)
			return true;
	return false;
}

/* The calls a choice of groups (use[]) makes, and each one's m, n and k. */
static double shape(const Contraction *c, const int *use, double *m, double *n, double *k)
{
	double calls = 1;
	*m = *n = *k = 1;
	for (int i = 0; i < c->ngroup; i++) {
		double e = c->g[i].ext;
		if (i == use[ROLE_M])
			*m = e;
		else if (i == use[ROLE_N])
			*n = e;
		else if (i == use[ROLE_K])
			*k = e;
		else
			calls *= e;
	}
	return calls;
}

/*
 * A rough time for a choice of the groups BLIS sees (use[]): every other
 * group is a loop of calls, each paying a fixed cost, and BLIS runs slower
 * when a matrix has no unit stride (it packs A and B element by element,
 * and updates C through a scratch tile), and on short dimensions (a
 * micro-tile is 32 x 12 and k is unrolled by 4..8).  Only the ranking
 * matters: it keeps, for instance, a 64 x 64 x 64 product on unit strides
 * called 4096 times ahead of one call with n = 4096 on a stride-4096 C.
 */
static double gemm_estimate(const Kernel *k, const Contraction *c, const int *use)
{
	double m, n, kk;
	double calls = shape(c, use, &m, &n, &kk);
	double rate = 5e10;
	if (!unit_in(k, c, 0, use[ROLE_M], use[ROLE_K]) && m > 1)
		rate /= 2;
	if (!unit_in(k, c, 1, use[ROLE_K], use[ROLE_N]) && n > 1)
		rate /= 2;
	if (!unit_in(k, c, 2, use[ROLE_M], use[ROLE_N]) && m > 1 && n > 1)
		rate /= 4;
	rate *= (m < 32 ? m / 32 : 1) * (n < 12 ? n / 12 : 1) * (kk < 64 ? (kk + 8) / 72 : 1);
	return calls * (2e-6 + 2 * m * n * kk / rate);
}

/* Whether the calls loop over an input's unit stride: the innermost label
 * of a matrix BLIS sees (so not along either of its dims) is a looped
 * group, and every call reads each of its cache lines for one element. */
static bool strided_calls(const Kernel *k, const Contraction *c)
{
	static const int roles[2][2] = {{ROLE_M, ROLE_K}, {ROLE_K, ROLE_N}};
	for (int o = 0; o < 2; o++) {
		int x = c->use[roles[o][0]], y = c->use[roles[o][1]];
		if (x < 0 || y < 0 || c->g[x].ext <= 1 || c->g[y].ext <= 1)
			continue;
		int last = operand_lab(k, o)[operand_n(k, o) - 1];
		for (int i = 0; i < c->ngroup; i++)
			if (i != c->use[ROLE_M] && i != c->use[ROLE_N] && i != c->use[ROLE_K] && c->g[i].ext > 1)
				for (int t = 0; t < c->g[i].n; t++)
					if (c->g[i].lab[t] == last)
						return true;
	}
	return false;
}

bool contraction_plan(const Kernel *k, const RelType *const *inty, DType dt, Contraction *c)
{
	memset(c, 0, sizeof *c);
	if (k->nin != 2 || !kx_is_product(k->expr) || (k->reduces && k->red != AGG_ADD))
		return false;
	if (inty[0]->dtype != dt || inty[1]->dtype != dt || dtype_is_int(dt))
		return false;   /* BLIS multiplies floats only */
	for (int l = 0; l < k->nlab; l++) {
		int p[3];
		for (int o = 0; o < 3; o++)
			if ((p[o] = label_pos(k, o, l)) == -2)
				return false;           /* a diagonal: not a strided matrix */
		int role;
		if (p[0] >= 0 && p[1] >= 0)
			role = p[2] >= 0 ? ROLE_BATCH : ROLE_K;
		else if (p[0] >= 0 && p[2] >= 0)
			role = ROLE_M;
		else if (p[1] >= 0 && p[2] >= 0)
			role = ROLE_N;
		else if (p[0] < 0 && p[1] < 0 && p[2] < 0)
			continue;               /* a label no operand uses */
		else
			return false;           /* reduced inside one input */
		LabGroup *g = &c->g[c->ngroup++];
		g->role = role;
		g->n = 1;
		g->lab[0] = l;
		g->ext = label_block(k, inty, l);
	}

	/* merge groups whose labels are adjacent in every operand of the role */
	for (bool changed = true; changed;) {
		changed = false;
		for (int i = 0; i < c->ngroup && !changed; i++)
			for (int j = 0; j < c->ngroup && !changed; j++) {
				LabGroup *x = &c->g[i], *y = &c->g[j];
				if (i == j || x->role != y->role)
					continue;
				bool adjacent = true;
				for (int o = 0; o < 3; o++)
					if (role_in[x->role][o])
						adjacent &= label_pos(k, o, y->lab[0]) ==
						            label_pos(k, o, x->lab[x->n - 1]) + 1;
				if (!adjacent)
					continue;
				for (int t = 0; t < y->n; t++)
					x->lab[x->n++] = y->lab[t];
				x->ext *= y->ext;
				c->g[j] = c->g[--c->ngroup];
				changed = true;
			}
	}

	/* the groups BLIS sees: the choice with the least estimated time */
	int cand[NROLE][2 * MAXDIM + 1], ncand[NROLE] = {0};
	for (int r = ROLE_M; r < NROLE; r++) {
		for (int i = 0; i < c->ngroup; i++)
			if (c->g[i].role == r)
				cand[r][ncand[r]++] = i;
		if (ncand[r] == 0)
			cand[r][ncand[r]++] = -1;
	}
	double best = -1;
	for (int a = 0; a < ncand[ROLE_M]; a++)
		for (int b2 = 0; b2 < ncand[ROLE_N]; b2++)
			for (int d = 0; d < ncand[ROLE_K]; d++) {
				int use[NROLE] = {-1, cand[ROLE_M][a], cand[ROLE_N][b2], cand[ROLE_K][d]};
				double t = gemm_estimate(k, c, use);
				if (best < 0 || t < best) {
					best = t;
					memcpy(c->use, use, sizeof use);
				}
			}
	if (strided_calls(k, c))
		return false;
	for (int i = 0; i < c->ngroup; i++)
		for (int o = 0; o < 3; o++) {
			LabGroup *g = &c->g[i];
			g->pos[o] = role_in[g->role][o] ? label_pos(k, o, g->lab[g->n - 1]) : -1;
			g->stride[o] = 1;
			for (int d = g->pos[o] + 1; g->pos[o] >= 0 && d < operand_n(k, o); d++)
				g->stride[o] *= label_block(k, inty, operand_lab(k, o)[d]);
		}
	return c->use[ROLE_K] >= 0 && (c->use[ROLE_M] >= 0 || c->use[ROLE_N] >= 0);
}

double contraction_calls(const Contraction *c, double *m, double *n, double *k)
{
	return shape(c, c->use, m, n, k);
}
