/*
 * conv.c: a convolution's kernel (IA_CONV), a direct loop over its
 * windows with no im2col copy: register tiles for a convolution and an
 * input's gradient (emit_conv_tiled), for the kernel's gradient
 * (emit_conv_dot_tiled), and otherwise rows of the input times a weight
 * added into rows of the output.  emit_conv_kernel says which and why.
 */
#include "codegen/emit.h"

/* Lanes of a convolution's dot product (partial sums that vectorise). */
#define CONV_LANES 16

/*
 * A convolution's register tile: CONV_TILE_O kernels (values of an output
 * label the weights carry and in1 does not) times CONV_TILE_V vectors of
 * CONV_VEC_BYTES along the output row, 12 vector registers held across
 * every summed label; each step loads CONV_TILE_V vectors of in1 and
 * CONV_TILE_O weights for CONV_TILE_O * CONV_TILE_V multiply-adds, where
 * a row added into the output row loads and stores the output once per
 * multiply-add.
 */
#define CONV_TILE_O 4
#define CONV_TILE_V 3
#define CONV_VEC_BYTES 32
_Static_assert(CONV_TILE_V * CONV_VEC_BYTES == CONV_TILE_BYTES, "the cost model's tile (ir.h) is this one");

/* n tabs (up to 31) */
static const char *tabs(int n)
{
	static const char t[] = "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t";
	return t + sizeof t - 1 - n;
}

/* The window of kernel k that reads in1's chunk dim ch, or -1. */
static int conv_win(const Kernel *k, int ch)
{
	for (int w = 0; w < k->nwin; w++)
		if (k->win[w].dim == ch)
			return w;
	return -1;
}

/* in1's element at each window dim, skipping the step where one other than
 * J's falls outside in1's chunk, and x0: where in1's row for J = 0 is. */
static void conv_windows(Buf *b, const Kernel *k, int J, bool withj, int depth)
{
	int cj = k->nindim[1] - 1;
	for (int c = 0; c < k->nindim[1]; c++) {
		int w = conv_win(k, c);
		if (w < 0 || (c == cj && !withj))
			continue;
		int own = k->inlab[1][c], lab = k->win[w].lab;
		buf_printf(b, "%sconst int64_t w%d = ", tabs(depth), c);
		if (own == J)
			buf_printf(b, "g%d", own);
		else
			buf_printf(b, "l%d + g%d", own, own);
		buf_printf(b, " + (%" PRId64 ") * (l%d + g%d) + (%" PRId64 ") - in[1].off[%d];\n", k->win[w].coef, lab, lab,
		           k->win[w].shift, c);
		if (own != J)
			buf_printf(b, "%sif (w%d < 0 || w%d >= in[1].n[%d])\n%s\tcontinue;\n", tabs(depth), c, c, c, tabs(depth));
	}
	if (withj)
		buf_printf(b, "%sconst int64_t x0 = %s;\n", tabs(depth), conv_win(k, cj) >= 0 ? xprintf("w%d", cj) : "0");
}

/* The offset terms " + l<lab> * <s>[c]" of a chunk's dims c (labels lab[c],
 * n of them) but skip whose label is in take (every label when take is
 * NULL), as the rows below and the tiles' tables sum them. */
static void conv_terms(Buf *b, const int *lab, int n, const char *s, int skip, const bool *take)
{
	for (int c = 0; c < n; c++)
		if (c != skip && (!take || take[lab[c]]))
			buf_printf(b, " + l%d * %s[%d]", lab[c], s, c);
}

/* in1's offset terms but its last dim's: a window dim's at its element
 * w<c>, a plain dim's at its label. */
static void conv_in1_terms(Buf *b, const Kernel *k)
{
	for (int c = 0; c < k->nindim[1] - 1; c++) {
		if (conv_win(k, c) >= 0)
			buf_printf(b, " + w%d * s1[%d]", c, c);
		else
			buf_printf(b, " + l%d * s1[%d]", k->inlab[1][c], c);
	}
}

/* The rows at J = 0 of in1 (xr), in0 (wr) and the output (orow). */
static void conv_in1_row(Buf *b, const Kernel *k, const char *T, int depth)
{
	buf_printf(b, "%sconst %s *xr = p1 + x0", tabs(depth), T);
	conv_in1_terms(b, k);
	buf_puts(b, ";\n");
}

static void conv_in0_row(Buf *b, const Kernel *k, const char *T, int jw, int depth)
{
	buf_printf(b, "%sconst %s *wr = p0", tabs(depth), T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", jw, NULL);
	buf_puts(b, ";\n");
}

static void conv_out_row(Buf *b, const Kernel *k, const char *T, int jout, int depth)
{
	buf_printf(b, "%s%s *orow = po", tabs(depth), T);
	conv_terms(b, k->outlab, k->noutdim, "so", jout, NULL);
	buf_puts(b, ";\n");
}

/*
 * One register tile at depth (inside the loop over jt, the tile's first
 * J): nob kernels from l<O> on (O's dims oo in the output, o0 in in0; one
 * when there is no such label) times nv vectors of vl elements,
 * summed over the nq window offsets of the table xo (in1), wo (in0).
 * rem: the last vector, whose lanes before thv a tile has added already.
 */
static void conv_tile(Buf *b, const Kernel *k, const char *T, int oo, int o0, int nob, int nv, int vl,
                      bool rem, const bool *isout, int depth)
{
	const char *t = tabs(depth);
	buf_printf(b, "%s%s *orow = po + jt", t, T);
	conv_terms(b, k->outlab, k->noutdim, "so", k->noutdim - 1, NULL);
	buf_printf(b, ";\n%sconst %s *wb = p0", t, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, isout);
	buf_puts(b, ";\n");
	for (int i = 0; i < nob; i++)
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%scvec a%d_%d = {0};\n", t, i, v);
	buf_printf(b, "%sif (%s) {\n", t, rem ? "0" : "acc");
	for (int i = 0; i < nob; i++)
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%s\tmemcpy(&a%d_%d, orow%s + %d, sizeof(cvec));\n", t, i, v,
			           i ? xprintf(" + %d * so[%d]", i, oo) : "", v * vl);
	buf_printf(b, "%s}\n", t);
	buf_printf(b, "%sfor (int64_t q = 0; q < nq; q++) {\n", t);
	buf_printf(b, "%s\tconst %s *xr = p1 + xo[q] + jt, *wr = wb + wo[q];\n", t, T);
	for (int v = 0; v < nv; v++)
		buf_printf(b, "%s\tcvec xv%d;\n%s\tmemcpy(&xv%d, xr + %d, sizeof(cvec));\n", t, v, t, v, v * vl);
	for (int i = 0; i < nob; i++) {
		buf_printf(b, "%s\t{\n%s\t\tconst %s s = wr[%s];\n%s\t\tconst cvec w = {s", t, t, T,
		           i ? xprintf("%d * s0[%d]", i, o0) : "0", t);
		for (int q = 1; q < vl; q++)
			buf_puts(b, ", s");
		buf_puts(b, "};\n");
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%s\t\ta%d_%d += w * xv%d;\n", t, i, v, v);
		buf_printf(b, "%s\t}\n", t);
	}
	buf_printf(b, "%s}\n", t);
	for (int i = 0; i < nob; i++) {
		const char *orow = i ? xprintf("orow + %d * so[%d]", i, oo) : "orow";
		if (rem) {
			/* only the lanes from thv on: the ones before are a tile's */
			buf_printf(b, "%s{\n%s\t%s lane[%d];\n%s\tmemcpy(lane, &a%d_0, sizeof lane);\n", t, t, T, vl, t, i);
			buf_printf(b, "%s\tfor (int64_t j = thv - jt; j < %d; j++)\n%s\t\t(%s)[j] += lane[j];\n%s}\n", t, vl,
			           t, orow, t);
			continue;
		}
		for (int v = 0; v < nv; v++)
			buf_printf(b, "%smemcpy(%s + %d, &a%d_%d, sizeof(cvec));\n", t, orow, v * vl, i, v);
	}
}

/* Open a loop over label l at *depth. */
static void conv_loop(Buf *b, int l, int *depth)
{
	buf_printf(b, "%sfor (int64_t l%d = 0; l%d < n%d; l%d++) {\n", tabs(*depth), l, l, l, l);
	(*depth)++;
}

/* Close loops down to depth to. */
static void conv_close(Buf *b, int *depth, int to)
{
	while (*depth > to)
		buf_printf(b, "%s}\n", tabs(--*depth));
}

/* What a convolution's kernel knows of its labels. */
typedef struct Conv {
	const Kernel *k;
	const char *T;
	int J, cj;                      /* the innermost label, in1's dim of it */
	int jout, jw;                   /* J's dim in the output, in0, or -1 */
	bool isout[2 * MAXDIM];         /* the output's labels */
	bool summed[2 * MAXDIM];        /* the labels summed over, but J */
	bool by1[2 * MAXDIM];           /* the labels in1 is read by */
} Conv;

/*
 * The window offsets' table of a tiled kernel: the loops over the output's
 * labels in1 is read by (but skip) opened at *depth, and inside them, for
 * each step of the summed labels but J whose windows fall inside in1, its
 * offset in in1 (xo; with withj, J's window's x0 included, and in xs too)
 * and in in0 (wo); nq of them.
 */
static void conv_table(Buf *b, const Conv *cv, int skip, bool withj, int *depth)
{
	const Kernel *k = cv->k;
	buf_puts(b, "\tint64_t nqmax = 1;\n");
	for (int l = 0; l < k->nlab; l++)
		if (cv->summed[l])
			buf_printf(b, "\tnqmax *= n%d;\n", l);
	buf_puts(b, "\tint64_t *xo = trt_scratch(3 * sizeof(int64_t) * (size_t)nqmax), *wo = xo + nqmax, *xs = wo + nqmax;\n");
	buf_puts(b, "\t(void)xs;\n");
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && cv->by1[l] && l != skip)
			conv_loop(b, l, depth);
	int d0 = *depth;
	buf_printf(b, "%sint64_t nq = 0;\n", tabs(*depth));
	for (int l = 0; l < k->nlab; l++)
		if (cv->summed[l])
			conv_loop(b, l, depth);
	conv_windows(b, k, cv->J, withj, *depth);
	buf_printf(b, "%sxo[nq] = %s", tabs(*depth), withj ? "x0" : "0");
	conv_in1_terms(b, k);
	buf_printf(b, ";\n%swo[nq] = 0", tabs(*depth));
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->summed);
	buf_puts(b, ";\n");
	if (withj)
		buf_printf(b, "%sxs[nq] = x0;\n", tabs(*depth));
	buf_printf(b, "%snq++;\n", tabs(*depth));
	conv_close(b, depth, d0);
}

/*
 * The register-tiled kernel (see emit_conv_kernel).  For each value of the
 * output's labels in1 is read by, a table lists the steps of the summed
 * labels whose windows fall inside in1: in1's offset (xo, J = 0), in0's
 * (wo) and where in1's row starts (xs).  Over J's [tlo, tie) every window
 * offset reads in1 inside its chunk: tiles of CONV_TILE_V vectors cover
 * [tlo, thi), tiles of one vector [thi, thv), and a last vector ending at
 * tie adds its lanes from thv on (rem).  What is left at the edges is a
 * row of in1 times a weight added into the output's row, its range
 * clipped to where in1 is read inside, per table entry.
 */
static void emit_conv_tiled(Buf *b, const Conv *cv, int O, int oo, int o0, DType dt)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj, depth = 1;
	int vl = CONV_VEC_BYTES / (dt == DT_F32 ? 4 : 8), tw = CONV_TILE_V * vl;

	buf_printf(b, "\ttypedef %s cvec __attribute__((vector_size(%d)));\n", T, CONV_VEC_BYTES);
	int w = conv_win(k, cj);
	if (w >= 0) {
		int lab = k->win[w].lab;
		buf_printf(b, "\tconst int64_t xa = g%d + (%" PRId64 ") * g%d + (%" PRId64 ") - in[1].off[%d];\n", J,
		           k->win[w].coef, lab, k->win[w].shift, cj);
		buf_printf(b, "\tconst int64_t xb = xa + (%" PRId64 ") * (n%d - 1);\n", k->win[w].coef, lab);
	} else {
		buf_puts(b, "\tconst int64_t xa = 0, xb = 0;\n");
	}
	buf_puts(b, "\tconst int64_t xmin = xa < xb ? xa : xb, xmax = xa < xb ? xb : xa;\n");
	buf_printf(b, "\tconst int64_t tlo = xmin >= 0 ? 0 : -xmin < n%d ? -xmin : n%d;\n", J, J);
	buf_printf(b, "\tint64_t tie = in[1].n[%d] - xmax < n%d ? in[1].n[%d] - xmax : n%d;\n", cj, J, cj, J);
	buf_puts(b, "\tif (tie < tlo)\n\t\ttie = tlo;\n");
	buf_printf(b, "\tconst int64_t thi = tlo + (tie - tlo) / %d * %d;\n", tw, tw);
	buf_printf(b, "\tconst int64_t thv = tlo + (tie - tlo) / %d * %d;\n", vl, vl);
	buf_printf(b, "\tconst int rem = tie > thv && tie - tlo >= %d;\n", vl);
	buf_puts(b, "\tconst int64_t tend = rem ? tie : thv;\n");
	/* the tiles write what they cover */
	buf_printf(b, "\tif (!acc && (tlo > 0 || thv < n%d))\n", J);
	buf_printf(b, "\t\tfor (int64_t r = 0; r < nout / n%d; r++) {\n", J);
	buf_printf(b, "\t\t\tmemset(po + r * n%d, 0, sizeof(%s) * (size_t)tlo);\n", J, T);
	buf_printf(b, "\t\t\tmemset(po + r * n%d + thv, 0, sizeof(%s) * (size_t)(n%d - thv));\n\t\t}\n", J, T, J);
	conv_table(b, cv, J, true, &depth);
	/* the tiles, then the edges, for each value of the other labels */
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && !cv->by1[l] && l != O)
			conv_loop(b, l, &depth);
	int d0 = depth;
	static const int nobs[] = {CONV_TILE_O, 2, 1};
	if (O >= 0)
		buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), O);
	for (int i = 0; i < 3; i++) {
		if (O < 0 && nobs[i] > 1)
			continue;
		if (O >= 0)
			buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d) {\n", tabs(depth++), O, nobs[i], O, O, nobs[i]);
		buf_printf(b, "%sfor (int64_t jt = tlo; jt < thi; jt += %d) {\n", tabs(depth), tw);
		conv_tile(b, k, T, oo, o0, nobs[i], CONV_TILE_V, vl, false, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		buf_printf(b, "%sfor (int64_t jt = thi; jt < thv; jt += %d) {\n", tabs(depth), vl);
		conv_tile(b, k, T, oo, o0, nobs[i], 1, vl, false, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		buf_printf(b, "%sif (rem) {\n%s\tconst int64_t jt = tie - %d;\n", tabs(depth), tabs(depth), vl);
		conv_tile(b, k, T, oo, o0, nobs[i], 1, vl, true, cv->isout, depth + 1);
		buf_printf(b, "%s}\n", tabs(depth));
		conv_close(b, &depth, d0);
	}
	buf_printf(b, "%sif (tlo > 0 || tend < n%d)\n", tabs(depth), J);
	if (O >= 0)
		buf_printf(b, "%s\tfor (int64_t l%d = 0; l%d < n%d; l%d++)\n", tabs(depth), O, O, O, O);
	buf_printf(b, "%s%sfor (int64_t q = 0; q < nq; q++) {\n", tabs(depth), O >= 0 ? "\t\t" : "\t");
	depth += O >= 0 ? 3 : 2;
	const char *t = tabs(depth);
	buf_printf(b, "%sconst int64_t lo = xs[q] < 0 ? -xs[q] : 0;\n", t);
	buf_printf(b, "%sconst int64_t hi = in[1].n[%d] - xs[q] < n%d ? in[1].n[%d] - xs[q] : n%d;\n", t, cj, J, cj, J);
	buf_printf(b, "%sconst int64_t e0 = hi < tlo ? hi : tlo, e1 = lo > tend ? lo : tend;\n", t);
	buf_printf(b, "%sconst %s *xr = p1 + xo[q];\n", t, T);
	buf_printf(b, "%sconst %s wv = p0[wo[q]", t, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->isout);
	buf_puts(b, "];\n");
	conv_out_row(b, k, T, k->noutdim - 1, depth);
	buf_printf(b, "%sfor (int64_t j = lo; j < e0; j++)\n%s\torow[j] += wv * xr[j];\n", t, t);
	buf_printf(b, "%sfor (int64_t j = e1; j < hi; j++)\n%s\torow[j] += wv * xr[j];\n", t, t);
	buf_printf(b, "%s}\n", tabs(depth - 1));
	depth = d0;
	conv_close(b, &depth, 1);
}

/* The kernel's gradient's tiles: CONV_DOT_P values of P by CONV_DOT_Q of
 * Q, 9 vectors of partial sums, 3 + 3 loads for 9 multiply-adds. */
#define CONV_DOT_P 3
#define CONV_DOT_Q 3

/*
 * One tile of the kernel's gradient at depth (see emit_conv_dot_tiled):
 * npb values of P from l<P> on (its dims pdo in the output, pd0 in in0;
 * npb is 1 when there is no such label) by nqb values of Q from l<Q> on
 * (its dim qo in the output; in1 is read at x0q + coef * Q + J along its
 * last dim).  [jlo, jhi) is where every Q of the tile reads in1 inside its
 * chunk, vectors over [jlo, jv); the rest of each Q's range is summed one
 * element at a time.
 */
static void conv_dot_tile(Buf *b, const Conv *cv, int pdo, int pd0, int npb, int Q, int qo, int nqb, int64_t coef,
                          int vl, int depth)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj;
	const char *t = tabs(depth), *t1 = tabs(depth + 1), *t2 = tabs(depth + 2);
	buf_printf(b, "%s{\n", t);
	buf_printf(b, "%sconst int64_t xq = x0q + (%" PRId64 ") * l%d, xz = xq + (%" PRId64 ");\n", t1, coef, Q,
	           coef * (nqb - 1));
	buf_printf(b, "%sconst int64_t xmn = xq < xz ? xq : xz, xmx = xq < xz ? xz : xq;\n", t1);
	buf_printf(b, "%sconst int64_t jlo = xmn >= 0 ? 0 : -xmn < n%d ? -xmn : n%d;\n", t1, J, J);
	buf_printf(b, "%sint64_t jhi = in[1].n[%d] - xmx < n%d ? in[1].n[%d] - xmx : n%d;\n", t1, cj, J, cj, J);
	buf_printf(b, "%sif (jhi < jlo)\n%s\tjhi = jlo;\n", t1, t1);
	buf_printf(b, "%sconst int64_t jv = jlo + (jhi - jlo) / %d * %d;\n", t1, vl, vl);
	buf_printf(b, "%sconst %s *gb = p0", t1, T);
	conv_terms(b, k->inlab[0], k->nindim[0], "s0", -1, cv->isout);
	buf_puts(b, ";\n");
	conv_out_row(b, k, T, -1, depth + 1);
	for (int i = 0; i < npb; i++)
		for (int q = 0; q < nqb; q++)
			buf_printf(b, "%scvec a%d_%d = {0};\n%s%s r%d_%d = 0;\n", t1, i, q, t1, T, i, q);
	buf_printf(b, "%sfor (int64_t q = 0; q < nq; q++) {\n", t1);
	buf_printf(b, "%sconst %s *gr = gb + wo[q], *xr = p1 + xo[q] + xq;\n", t2, T);
	buf_printf(b, "%sfor (int64_t j = jlo; j < jv; j += %d) {\n", t2, vl);
	for (int q = 0; q < nqb; q++)
		buf_printf(b, "%s\tcvec x%d;\n%s\tmemcpy(&x%d, xr + (%" PRId64 ") + j, sizeof(cvec));\n", t2, q, t2, q,
		           coef * q);
	for (int i = 0; i < npb; i++) {
		buf_printf(b, "%s\tcvec g%d;\n%s\tmemcpy(&g%d, gr%s + j, sizeof(cvec));\n", t2, i, t2, i,
		           i ? xprintf(" + %d * s0[%d]", i, pd0) : "");
		for (int q = 0; q < nqb; q++)
			buf_printf(b, "%s\ta%d_%d += g%d * x%d;\n", t2, i, q, i, q);
	}
	buf_printf(b, "%s}\n", t2);
	for (int q = 0; q < nqb; q++) {
		buf_printf(b, "%s{\n", t2);
		buf_printf(b, "%s\tconst int64_t x1 = xq + (%" PRId64 ");\n", t2, coef * q);
		buf_printf(b, "%s\tconst int64_t lo = x1 < 0 ? -x1 : 0;\n", t2);
		buf_printf(b, "%s\tconst int64_t hi = in[1].n[%d] - x1 < n%d ? in[1].n[%d] - x1 : n%d;\n", t2, cj, J, cj,
		           J);
		buf_printf(b, "%s\tconst int64_t e0 = hi < jlo ? hi : jlo, e1 = lo > jv ? lo : jv;\n", t2);
		for (int r = 0; r < 2; r++) {
			buf_printf(b, "%s\tfor (int64_t j = %s; j < %s; j++) {\n", t2, r ? "e1" : "lo", r ? "hi" : "e0");
			buf_printf(b, "%s\t\tconst %s xv = xr[(%" PRId64 ") + j];\n", t2, T, coef * q);
			for (int i = 0; i < npb; i++)
				buf_printf(b, "%s\t\tr%d_%d += gr[%sj] * xv;\n", t2, i, q,
				           i ? xprintf("%d * s0[%d] + ", i, pd0) : "");
			buf_printf(b, "%s\t}\n", t2);
		}
		buf_printf(b, "%s}\n", t2);
	}
	buf_printf(b, "%s}\n", t1);
	for (int i = 0; i < npb; i++)
		for (int q = 0; q < nqb; q++) {
			buf_printf(b, "%s{\n%s\t%s lane[%d];\n%s\tmemcpy(lane, &a%d_%d, sizeof lane);\n", t1, t1, T, vl, t1, i,
			           q);
			buf_printf(b, "%s\tfor (int u = 0; u < %d; u++)\n%s\t\tr%d_%d += lane[u];\n", t1, vl, t1, i, q);
			buf_printf(b, "%s\torow[%s%s] += r%d_%d;\n%s}\n", t1, i ? xprintf("%d * so[%d]", i, pdo) : "0",
			           q ? xprintf(" + %d * so[%d]", q, qo) : "", i, q, t1);
		}
	buf_printf(b, "%s}\n", t);
}

/*
 * The kernel's gradient, register tiled (see emit_conv_kernel): J, the
 * label of in1's last dim, is summed and in0's last dim, and in1 is read
 * along it through a window whose other label Q is the output's and
 * nothing else's.  For each value of the output's labels in1 is read by
 * but Q, a table lists the steps of the other summed labels whose windows
 * fall inside in1 (conv_table: in1's offset but along J, xo, and in0's,
 * wo).  Then tiles of P (an output label of in0's that in1 is not read
 * by, if there is one) by Q sum their dot products over J and the table
 * (conv_dot_tile).
 */
static void emit_conv_dot_tiled(Buf *b, const Conv *cv, int P, int pdo, int pd0, int Q, int qo, DType dt)
{
	const Kernel *k = cv->k;
	const char *T = cv->T;
	int J = cv->J, cj = cv->cj, depth = 1;
	int w = conv_win(k, cj), vl = CONV_VEC_BYTES / (dt == DT_F32 ? 4 : 8);
	int64_t coef = k->win[w].coef;

	buf_printf(b, "\tif (!acc)\n\t\tmemset(po, 0, sizeof(%s) * (size_t)nout);\n", T);
	buf_printf(b, "\ttypedef %s cvec __attribute__((vector_size(%d)));\n", T, CONV_VEC_BYTES);
	/* in1's element along J at Q = 0 and J = 0 */
	buf_printf(b, "\tconst int64_t x0q = g%d + (%" PRId64 ") * g%d + (%" PRId64 ") - in[1].off[%d];\n", J, coef, Q,
	           k->win[w].shift, cj);
	conv_table(b, cv, Q, false, &depth);
	for (int l = 0; l < k->nlab; l++)
		if (cv->isout[l] && !cv->by1[l] && l != P)
			conv_loop(b, l, &depth);
	int d0 = depth;
	for (int ip = 0; ip < 2; ip++) {
		int npb = ip ? 1 : CONV_DOT_P;
		if (P < 0 && npb > 1)
			continue;
		if (P >= 0) {
			if (!ip)
				buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), P);
			buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d) {\n", tabs(depth), P, npb, P, P, npb);
			depth++;
		}
		buf_printf(b, "%sint64_t l%d = 0;\n", tabs(depth), Q);
		buf_printf(b, "%sfor (; l%d + %d <= n%d; l%d += %d)\n", tabs(depth), Q, CONV_DOT_Q, Q, Q, CONV_DOT_Q);
		conv_dot_tile(b, cv, pdo, pd0, npb, Q, qo, CONV_DOT_Q, coef, vl, depth + 1);
		buf_printf(b, "%sfor (; l%d < n%d; l%d++)\n", tabs(depth), Q, Q, Q);
		conv_dot_tile(b, cv, pdo, pd0, npb, Q, qo, 1, coef, vl, depth + 1);
		conv_close(b, &depth, d0);
	}
	conv_close(b, &depth, 1);
}

/*
 * A convolution's kernel (IA_CONV): out (+)= the sum of in0 * in1 over the
 * labels the output lacks, in1 read through the kernel's windows: no
 * im2col copy.  Each label runs over the chunk of the first operand that
 * carries it as a plain dim (the output, in0, then in1 where no window
 * is); positions in the whole tensor are that chunk's offset plus the
 * loop index, and a window reads in1 at own + coef * lab + shift there,
 * zero (skipped) outside in1's chunk, which blocking makes the whole of
 * in1 along a window dim.
 *
 * The innermost loop is the label J of in1's last chunk dim, contiguous
 * in in1.  When J is the output's last dim and the weights (in0) do not
 * carry it (a convolution, or an input's gradient: the flipped kernel),
 * the output is made of register tiles (emit_conv_tiled, conv_tile): a
 * block of the output's rows for CONV_TILE_O kernels held in registers
 * across every summed label.  Otherwise, when J is still the output's,
 * the innermost loop adds a row of in1 times a weight into a row of the
 * output, its range clipped once per row to where in1 is read inside;
 * when it is not (the kernel's gradient), it is a dot product, summed in
 * CONV_LANES partial sums that vectorise.  bench/README.md "3D
 * convolution" measures it against im2col, gemm and PyTorch.
 */
void emit_conv_kernel(Buf *b, const Kernel *k, DType dt)
{
	Conv cv = {.k = k, .T = ctype(dt), .J = k->inlab[1][k->nindim[1] - 1], .cj = k->nindim[1] - 1,
	           .jout = -1, .jw = -1};
	const char *T = cv.T;
	int J = cv.J, cj = cv.cj;
	int depth = 1, nsum = 0;

	buf_printf(b, "\tconst %s *restrict p0 = in[0].p;\n\tconst %s *restrict p1 = in[1].p;\n", T, T);
	buf_printf(b, "\t%s *restrict po = out->p;\n", T);
	emit_strides(b, "0", "in[0]", k->nindim[0], NULL, NULL);
	emit_strides(b, "1", "in[1]", k->nindim[1], NULL, NULL);
	emit_strides(b, "o", "(*out)", k->noutdim, NULL, NULL);
	buf_puts(b, "\tint64_t nout = 1;\n");
	for (int c = 0; c < k->noutdim; c++)
		buf_printf(b, "\tnout *= out->n[%d];\n", c);
	/* each label's range and offset in the whole tensor */
	for (int l = 0; l < k->nlab; l++) {
		const char *v = NULL;
		int pos = -1;
		for (int c = 0; c < k->noutdim && !v; c++)
			if (k->outlab[c] == l)
				v = "(*out)", pos = c, cv.isout[l] = true;
		for (int c = 0; c < k->nindim[0] && !v; c++)
			if (k->inlab[0][c] == l)
				v = "in[0]", pos = c;
		for (int c = 0; c < k->nindim[1] && !v; c++)
			if (k->inlab[1][c] == l && conv_win(k, c) < 0)
				v = "in[1]", pos = c;
		if (!v)
			tr_bug("convolution label %d on no plain dim", l);
		if (!cv.isout[l] && l != J)
			cv.summed[l] = true, nsum++;
		buf_printf(b, "\tconst int64_t n%d = %s.n[%d], g%d = %s.off[%d];\n", l, v, pos, l, v, pos);
		buf_printf(b, "\t(void)g%d;\n", l);
	}
	for (int c = 0; c < k->noutdim; c++)
		if (k->outlab[c] == J)
			cv.jout = c;
	for (int c = 0; c < k->nindim[0]; c++)
		if (k->inlab[0][c] == J)
			cv.jw = c;
	int jout = cv.jout, jw = cv.jw;
	for (int c = 0; c < k->nindim[1]; c++)
		cv.by1[k->inlab[1][c]] = true;
	for (int w = 0; w < k->nwin; w++)
		cv.by1[k->win[w].lab] = true;
	/* tiled: the tiles' kernels are an output label of in0's that in1 is
	 * not read by, if there is one */
	if (jout == k->noutdim - 1 && jw < 0 && nsum > 0 && (dt == DT_F32 || dt == DT_F64)) {
		int O = -1, oo = -1, o0 = -1;
		for (int c = 0; c < k->noutdim && O < 0; c++)
			for (int c0 = 0; c0 < k->nindim[0] && !cv.by1[k->outlab[c]]; c0++)
				if (k->inlab[0][c0] == k->outlab[c])
					O = k->outlab[c], oo = c, o0 = c0;
		emit_conv_tiled(b, &cv, O, oo, o0, dt);
		return;
	}
	/* the kernel's gradient tiled: Q, the other label of J's window, the
	 * output's and read nowhere else; P as O above */
	int wd = conv_win(k, cj), Q = wd >= 0 ? k->win[wd].lab : -1;
	bool dot = jout < 0 && jw == k->nindim[0] - 1 && Q >= 0 && cv.isout[Q] && (dt == DT_F32 || dt == DT_F64);
	for (int c = 0; dot && c < k->nindim[0]; c++)
		dot = k->inlab[0][c] != Q;
	for (int c = 0; dot && c < k->nindim[1]; c++)
		dot = k->inlab[1][c] != Q;
	for (int w = 0; dot && w < k->nwin; w++)
		dot = w == wd || k->win[w].lab != Q;
	if (dot) {
		int P = -1, pdo = -1, pd0 = -1, qo = -1;
		for (int c = 0; c < k->noutdim; c++)
			if (k->outlab[c] == Q)
				qo = c;
		for (int c = 0; c < k->noutdim && P < 0; c++)
			for (int c0 = 0; c0 < k->nindim[0] && !cv.by1[k->outlab[c]]; c0++)
				if (k->inlab[0][c0] == k->outlab[c])
					P = k->outlab[c], pdo = c, pd0 = c0;
		emit_conv_dot_tiled(b, &cv, P, pdo, pd0, Q, qo, dt);
		return;
	}
	buf_printf(b, "\tif (!acc)\n\t\tmemset(po, 0, sizeof(%s) * (size_t)nout);\n", T);
	/* the loops: the output's labels that in1 is read by (its rows stay
	 * in cache across the others: a convolution's kernels), the output's
	 * other labels, then the summed ones; J innermost */
	for (int pass = 0; pass < 3; pass++)
		for (int l = 0; l < k->nlab; l++) {
			int p = cv.isout[l] ? (cv.by1[l] ? 0 : 1) : 2;
			if (l != J && p == pass)
				conv_loop(b, l, &depth);
		}
	conv_windows(b, k, J, true, depth);
	buf_printf(b, "%sconst int64_t lo = x0 < 0 ? -x0 : 0;\n", tabs(depth));
	buf_printf(b, "%sconst int64_t hi = in[1].n[%d] - x0 < n%d ? in[1].n[%d] - x0 : n%d;\n", tabs(depth), cj, J, cj, J);
	conv_in1_row(b, k, T, depth);
	conv_in0_row(b, k, T, jw, depth);
	conv_out_row(b, k, T, jout, depth);
	const char *wj = jw < 0 ? "wr[0]" : jw == k->nindim[0] - 1 ? "wr[j]" : xprintf("wr[j * s0[%d]]", jw);
	if (jout >= 0) {
		const char *oj = jout == k->noutdim - 1 ? "orow[j]" : xprintf("orow[j * so[%d]]", jout);
		if (jw < 0) {
			buf_printf(b, "%sconst %s wv = wr[0];\n", tabs(depth), T);
			wj = "wv";
		}
		buf_printf(b, "%s#pragma GCC ivdep\n%sfor (int64_t j = lo; j < hi; j++)\n%s\t%s += %s * xr[j];\n",
		           tabs(depth), tabs(depth), tabs(depth), oj, wj);
	} else {
		const char *wq = jw < 0 ? "wr[0]" : jw == k->nindim[0] - 1 ? "wr[j + q]" : xprintf("wr[(j + q) * s0[%d]]", jw);
		buf_printf(b, "%s%s part[%d] = {0};\n", tabs(depth), T, CONV_LANES);
		buf_printf(b, "%sint64_t j = lo;\n", tabs(depth));
		buf_printf(b, "%sfor (; j + %d <= hi; j += %d)\n", tabs(depth), CONV_LANES, CONV_LANES);
		buf_printf(b, "%s\tfor (int q = 0; q < %d; q++)\n", tabs(depth), CONV_LANES);
		buf_printf(b, "%s\t\tpart[q] += %s * xr[j + q];\n", tabs(depth), wq);
		buf_printf(b, "%sfor (; j < hi; j++)\n%s\tpart[0] += %s * xr[j];\n", tabs(depth), tabs(depth), wj);
		buf_printf(b, "%s%s s = 0;\n%sfor (int q = 0; q < %d; q++)\n%s\ts += part[q];\n", tabs(depth), T, tabs(depth),
		           CONV_LANES, tabs(depth));
		buf_printf(b, "%sorow[0] += s;\n", tabs(depth));
	}
	conv_close(b, &depth, 1);
}
