/*
 * sparse.c: kernels over sparse chunks.
 *
 * A kernel with a sparse input runs over that input's stored elements when
 * it is zero wherever the input is (the *driver*): a sparse-dense product
 * (SpMM, either orientation), a sampled elementwise product, f(0) = 0 of a
 * sparse tensor.  The driver's rows are its first chunk dim's label, its
 * columns the others' (row-major); the labels no driver dim carries are
 * loops inside, the output's innermost last, so the C compiler vectorises
 * along it (SpMM's feature dim).  A dense output is zeroed first and
 * summed into (the driver is only chosen for sums); a sparse output has the
 * driver's pattern (kernel_sparse_pattern), so its element q is the
 * driver's q.  Any other sparse input is expanded to a dense chunk by the
 * wrapper (trt_view_dense, kernel.c), as are all of them when no input
 * drives.  A sampled join's mask drives its kernel the same way.
 *
 * kernel_reads decides all of this for one op, once, into a KernelIn that
 * kernel.c and the driven kernel here read.
 */
#include "codegen/emit.h"

/* The driver of a kernel with a sparse input: the pattern input of a
 * sparse result, else the first sparse input whose zeros it sums (its
 * holes are fine: kernel_hole_ok); -1 for none. */
static int sparse_driver(const Kernel *k, const RelType *const *inty, bool sparse_out)
{
	int pat = kernel_sparse_pattern(k, inty);
	if (sparse_out)
		return pat;
	for (int j = 0; j < k->nin; j++)
		if (inty[j]->sparse && kernel_hole_ok(k, j))
			return j;
	return -1;
}

/* Does k label input j's chunk dims as the driver's, dim for dim?  Only
 * then is its element at the driver's position (the same chunk of a
 * relation with the driver's pattern: X[i, j] * X[i, j], not X[i, j] *
 * X[j, i], which pairs a chunk with its transpose's). */
static bool labelled_as_driver(const Kernel *k, const KernelIn *ki, int j)
{
	if (k->nindim[j] != ki->nd)
		return false;
	for (int c = 0; c < ki->nd; c++)
		if (k->inlab[j][c] != ki->dlab[c])
			return false;
	return true;
}

/* How op i's kernel k reads its inputs (KernelIn). */
void kernel_reads(const IaPlan *p, int i, const Kernel *k, KernelIn *ki)
{
	const IaOp *op = &p->ops.v[i];
	int in[MAXIN];
	memset(ki, 0, sizeof *ki);
	ki->vlab = -1;
	ki->n = ia_inputs(op, in);
	ki->sampled = op->kind == IA_JOIN && op->u.join.mask.on;
	ki->nk = ki->sampled ? 2 : ki->n;
	ki->dt = op->type.dtype;
	ki->sparse = ki->sampled;
	for (int j = 0; j < 2; j++) {
		ki->indt[j] = j < ki->nk ? p->ops.v[in[j]].type.dtype : ki->dt;
		ki->inty[j] = j < ki->nk ? &p->ops.v[in[j]].type : &op->type;
		ki->sparse |= j < ki->nk && ki->inty[j]->sparse;
	}
	ki->sparse_out = op->type.sparse;
	ki->d = ki->sampled ? 2 : ki->sparse ? sparse_driver(k, ki->inty, ki->sparse_out) : -1;
	if (ki->sparse_out && ki->d < 0)
		tr_bug("op %d: a kernel's sparse output without a pattern input", i);
	/* the driver's labels; the other sparse inputs of a sparse result: by
	 * the driver's element when they share its pattern, else looked up in
	 * their row (2-d, labelled as the driver), not expanded */
	ki->nd = ki->sampled ? k->noutdim : ki->d >= 0 ? k->nindim[ki->d] : 0;
	ki->dlab = ki->sampled ? k->outlab : ki->d >= 0 ? k->inlab[ki->d] : NULL;
	for (int j = 0; j < ki->nk; j++) {
		if (j == ki->d || !ki->inty[j]->sparse)
			continue;
		if (ki->sparse_out) {
			bool aligned = labelled_as_driver(k, ki, j);
			ki->byq[j] = aligned && (ia_same_pattern(p, in[j], in[ki->d]) || ia_same_pattern(p, in[ki->d], in[j]));
			ki->byfind[j] = !ki->byq[j] && ki->nd == 2 && aligned;
		}
		ki->expand[j] = !ki->byq[j] && !ki->byfind[j];
	}
}

/* A sampled contraction's inner sum as one dot product: the kernel
 * in0 * in1 summed over one label, both inputs dense of the output's type
 * and carrying it once.  Its position in each input, or false. */
static bool sampled_dot(const Kernel *k, const KernelIn *ki, int lab, int *pos)
{
	if (k->red != AGG_ADD || !kx_is_product(k->expr) || dtype_is_int(ki->dt) || k->nin != 2)
		return false;
	for (int j = 0; j < 2; j++) {
		if (ki->indt[j] != ki->dt || ki->byq[j] || ki->byfind[j])
			return false;
		pos[j] = -1;
		for (int c = 0; c < k->nindim[j]; c++)
			if (k->inlab[j][c] == lab)
				pos[j] = pos[j] < 0 ? c : -2;
		if (pos[j] < 0)
			return false;
	}
	return true;
}

/* d: the driver (k's input, or k->nin for a sampled join's mask), its
 * chunk labels dlab[0..nd); byq[j]: input j is sparse with the driver's
 * pattern (a value per stored element, read at q, or an empty chunk,
 * zeros: trt_complete's for a key it lacked); byfind[j]: input j is
 * sparse, 2-d, labelled as the driver, and read where the driver stores by
 * a search in its row (trt_csr_find). */

/* A driven kernel's pointers and strides, a dense output zeroed unless it
 * is added into, and the driver's column strides (its chunk dims after the
 * first). */
static void driven_setup(Buf *b, const Kernel *k, const KernelIn *ki, const int64_t *stat, int alias)
{
	int d = ki->d, nd = ki->nd;
	for (int j = 0; j < k->nin; j++)
		buf_printf(b, "\tconst %s *%sp%d = in[%d].p;\n", ctype(ki->indt[j]), j == alias ? "" : "restrict ", j, j);
	buf_printf(b, "\t%s *%spo = out->p;\n", ctype(ki->dt), alias >= 0 ? "" : "restrict ");
	buf_printf(b, "\tconst int64_t *restrict rp = in[%d].rowptr, *restrict ci = in[%d].col;\n", d, d);
	/* an input of the driver's pattern stores its elements or none: the
	 * zero chunk trt_complete gives a key it lacks (a sampled join's
	 * output where an operand had a hole) is empty, read as zeros */
	for (int j = 0; j < k->nin; j++)
		if (ki->byq[j] && kx_uses(k->expr, j))
			buf_printf(b, "\tconst int e%d = in[%d].rowptr[in[%d].n[0]] == in[%d].rowptr[0];\n", j, j, j, j);
	for (int j = 0; j < k->nin; j++)
		if (j != d && !ki->byq[j] && !ki->byfind[j]) {
			char name[16];
			snprintf(name, sizeof name, "%d", j);
			emit_strides(b, name, xprintf("in[%d]", j), k->nindim[j], k->inlab[j], stat);
		}
	if (!ki->sparse_out) {
		emit_strides(b, "o", "(*out)", k->noutdim, k->outlab, stat);
		buf_puts(b, "\tif (!acc) {\n\t\tint64_t no = 1;\n");
		for (int c = 0; c < k->noutdim; c++)
			buf_printf(b, "\t\tno *= out->n[%d];\n", c);
		buf_puts(b, "\t\tfor (int64_t q = 0; q < no; q++)\n\t\t\tpo[q] = 0;\n\t}\n");
	}
	if (nd > 2) {
		buf_printf(b, "\tint64_t cs[%d];\n\tcs[%d] = 1;\n", nd, nd - 1);
		for (int c = nd - 2; c >= 1; c--)
			buf_printf(b, "\tcs[%d] = cs[%d] * in[%d].n[%d];\n", c, c + 1, d, c + 1);
	}
}

/* The labels no driver dim carries, looped over inside: the output's, in
 * its order (*nout of them), then the reduced ones an input reads. */
static int driven_others(const Kernel *k, const KernelIn *ki, int *other, int *nout)
{
	bool indriver[2 * MAXDIM] = {0}, inout[2 * MAXDIM] = {0};
	int n = 0;
	for (int c = 0; c < ki->nd; c++)
		indriver[ki->dlab[c]] = true;
	for (int c = 0; c < k->noutdim; c++)
		inout[k->outlab[c]] = true;
	for (int c = 0; c < k->noutdim; c++)
		if (!indriver[k->outlab[c]])
			other[n++] = k->outlab[c];
	*nout = n;
	for (int l = 0; l < k->nlab; l++)
		if (!indriver[l] && !inout[l]) {
			bool used = false;
			for (int j = 0; j < k->nin; j++)
				for (int c = 0; c < k->nindim[j]; c++)
					used |= k->inlab[j][c] == l;
			if (used)
				other[n++] = l;
		}
	return n;
}

/* SDDMM: r = dot(U[i, :], V[j, :]) at the stored (i, j), the label summed
 * at dims dpos of the two inputs (sampled_dot). */
static void driven_dot(Buf *b, const Kernel *k, const KernelIn *ki, const int *dpos, const char *indent)
{
	buf_printf(b, "%sconst %s r = trt_%sdot(in[0].n[%d], p0", indent, ctype(ki->dt), ki->dt == DT_F32 ? "s" : "d",
	           dpos[0]);
	for (int j = 0; j < 2; j++) {
		if (j)
			buf_puts(b, ", p1");
		for (int c = 0; c < k->nindim[j]; c++)
			if (c != dpos[j])
				buf_printf(b, " + l%d * s%d[%d]", k->inlab[j][c], j, c);
		buf_printf(b, ", s%d[%d]", j, dpos[j]);
	}
	buf_puts(b, ");\n");
	buf_printf(b, "%spo[q] = acc ? po[q] + r : r;\n", indent);
}

/* The longest loop of a known count gcc unrolls completely before it
 * vectorises (its max-completely-peel-times). */
#define PEEL_MAX 16

/* Inside the loop over the driver's elements, at depth: the loops over the
 * other labels (nother of them; red_inside: a sparse result's reduced
 * labels, summed into r), the dense inputs' elements, the expression, and
 * the result added into the output's element. */
static void driven_loops(Buf *b, const Kernel *k, const KernelIn *ki, const int64_t *stat, const int *other, int nother,
                         bool red_inside, bool rowacc, int depth)
{
	const char *T = ctype(ki->dt);
	char indent[64];

#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	if (red_inside) {
		Buf init = {0};
		num_literal(&init, k->red == AGG_ADD ? 0 : k->red == AGG_MAX ? -INFINITY : INFINITY, ki->dt);
		buf_printf(b, "%s%s r = %s;\n", INDENT(), T, init.s);
		buf_free(&init);
	}
	for (int i = 0; i < nother; i++) {
		if (i == nother - 1 && !ki->sparse_out)
			buf_printf(b, "%s#pragma GCC ivdep\n", INDENT());
		/* a loop of a known count up to PEEL_MAX is vectorised whole,
		 * not unrolled first: gcc 12 unrolled mf_sparse's 16 into
		 * scalar multiply-adds, the ivdep gone with the loop (its
		 * products 1.35x slower); longer ones it vectorises */
		if (i == nother - 1 && stat[other[i]] >= 0 && stat[other[i]] <= PEEL_MAX)
			buf_printf(b, "%s#pragma GCC unroll 1\n", INDENT());
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < ", INDENT(), other[i], other[i]);
		loop_extent(b, k, stat, other[i]);
		buf_printf(b, "; l%d++) {\n", other[i]);
		depth++;
	}
	for (int j = 0; j < k->nin; j++) {
		if (j == ki->d || ki->byq[j] || ki->byfind[j] || !kx_uses(k->expr, j))
			continue;
		char sname[16];
		snprintf(sname, sizeof sname, "%d", j);
		buf_printf(b, "%sconst %s x%d = (%s)p%d[", INDENT(), T, j, T, j);
		offset_expr(b, sname, k->nindim[j], k->inlab[j]);
		buf_puts(b, "];\n");
	}
	KGen g = {b, k, ki->dt, 0, NULL};
	int v = kexpr_emit(&g, k->expr, INDENT());
	char tv[16];
	snprintf(tv, sizeof tv, "t%d", v);
	if (rowacc) {
		buf_printf(b, "%sra[l%d] += %s;\n", INDENT(), other[0], tv);
	} else if (!ki->sparse_out) {
		buf_printf(b, "%spo[", INDENT());
		offset_expr(b, "o", k->noutdim, k->outlab);
		buf_printf(b, "] += %s;\n", tv);
	} else if (red_inside) {
		buf_printf(b, "%sr = ", INDENT());
		combine_expr(b, k->red, "r", tv);
		buf_puts(b, ";\n");
	}
	for (int i = 0; i < nother; i++) {
		depth--;
		buf_printf(b, "%s}\n", INDENT());
	}
	if (ki->sparse_out) {
		const char *val = red_inside ? "r" : tv;
		buf_printf(b, "%spo[q] = acc ? ", INDENT());
		combine_expr(b, k->red, "po[q]", val);
		buf_printf(b, " : %s;\n", val);
	}
#undef INDENT
}

/* How many stored elements ahead a driven kernel prefetches, and the most
 * cache lines of a row it prefetches. */
#define PREFETCH_AHEAD 16
#define PREFETCH_LINES 8

/*
 * The rows of the dense operands a 2-d driver's column picks (an SpMM's
 * B[j, :], the output row an A^T B adds into, an SDDMM's V[j, :]),
 * prefetched PREFETCH_AHEAD stored elements ahead: their addresses follow
 * the column indices, which the hardware's prefetchers cannot guess.  The
 * address is the operand's offset with the column at element q + ahead
 * and the inner labels at 0 (shadowed in a block), then a cache line at a
 * time along its last dim when an inner label runs along it (its stride
 * is 1).  gcn_sparse's SpMMs, B 10584 x 40 a chunk (1.7 MB, in L3 at
 * best): 25-30% faster.
 */
static void driven_prefetch(Buf *b, const Kernel *k, const KernelIn *ki, const int64_t *stat, const int *other,
                            int nother, const char *indent)
{
	int col = ki->dlab[1];
	const char *T = ctype(ki->dt);
	bool open = false;
	for (int j = 0; j <= k->nin; j++) {
		bool isout = j == k->nin;
		if (isout ? ki->sparse_out : j == ki->d || ki->byq[j] || ki->byfind[j] || !kx_uses(k->expr, j))
			continue;
		int n = isout ? k->noutdim : k->nindim[j];
		const int *lab = isout ? k->outlab : k->inlab[j];
		bool bycol = false, inner_last = false;
		for (int c = 0; c < n; c++)
			bycol |= lab[c] == col;
		for (int i = 0; i < nother && n > 0; i++)
			inner_last |= other[i] == lab[n - 1];
		if (!bycol)
			continue;
		if (!open) {
			buf_printf(b, "%sif (q + %d < rp[in[%d].n[0]]) {\n", indent, PREFETCH_AHEAD, ki->d);
			buf_printf(b, "%s\tconst int64_t l%d = ci[q + %d];\n", indent, col, PREFETCH_AHEAD);
			for (int i = 0; i < nother; i++)
				buf_printf(b, "%s\tconst int64_t l%d = 0;\n", indent, other[i]);
			open = true;
		}
		char sname[16];
		snprintf(sname, sizeof sname, isout ? "o" : "%d", j);
		const char *ptr = isout ? "po" : xprintf("p%d", j);
		if (inner_last) {
			buf_printf(b, "%s\tfor (int64_t f = 0; f < ", indent);
			loop_extent(b, k, stat, lab[n - 1]);
			buf_printf(b, " && f < %d * (int64_t)(64 / sizeof(%s)); f += 64 / sizeof(%s))\n", PREFETCH_LINES, T, T);
			buf_printf(b, "%s\t\t__builtin_prefetch(%s + ", indent, ptr);
			offset_expr(b, sname, n, lab);
			buf_printf(b, " + f, %d, 3);\n", isout);
		} else {
			buf_printf(b, "%s\t__builtin_prefetch(%s + ", indent, ptr);
			offset_expr(b, sname, n, lab);
			buf_printf(b, ", %d, 3);\n", isout);
		}
	}
	if (open)
		buf_printf(b, "%s}\n", indent);
}

/*
 * Whether a 2-d driver's row adds into one strided run of the output: the
 * output holds the row's label and one inner label of a static extent,
 * not the column's, and the inner label is not its last dim.  The row's
 * elements then add into a contiguous accumulator (ra), added into the
 * output once a row, rather than each element writing a strided run (an
 * output C^T of A W, [64, 1024] floats: its 64 elements a stored element
 * 4 KiB apart, in one cache set; mini-batches of a 2%-stored 1024 x 50000
 * A by 64 columns of W, one rank: 4.3-7.8 s, 10x the same into [64,
 * 1000]).
 */
static bool row_accumulates(const Kernel *k, const KernelIn *ki, const int64_t *stat, const int *other, int nother)
{
	if (ki->sparse_out || ki->nd != 2 || nother != 1 || stat[other[0]] < 0 || k->noutdim != 2)
		return false;
	int row = ki->dlab[0], col = ki->dlab[1];
	bool hasrow = false, hascol = false;
	for (int c = 0; c < k->noutdim; c++) {
		hasrow |= k->outlab[c] == row;
		hascol |= k->outlab[c] == col;
	}
	return hasrow && !hascol && k->outlab[k->noutdim - 1] == row && k->outlab[0] == other[0];
}

/*
 * A kernel driven by ki->d (an input, or a sampled join's mask: ki->nk)
 * over its chunk labels ki->dlab: a loop over its rows and each row's
 * stored elements q (those on its diagonal where it repeats a label), the
 * driver's value at q (not a mask's: it is not read), the other sparse inputs' (KernelIn.byq: at q; byfind: at q
 * when its element there is the driver's, else by a search in the driver's
 * row, trt_csr_find), then the other labels inside.
 */
void emit_driven_kernel(Buf *b, const Kernel *k, const KernelIn *ki, int alias)
{
	const char *T = ctype(ki->dt);
	int d = ki->d, nd = ki->nd, depth = 0;
	const int *dlab = ki->dlab;
	char indent[64];

	int64_t stat[2 * MAXDIM];
	static_extents(k, ki, DRIVEN_STATIC_MAX, stat);
	driven_setup(b, k, ki, stat, alias);
#define INDENT() (memset(indent, '\t', depth + 1), indent[depth + 1] = 0, indent)
	const char *row = nd > 0 ? xprintf("l%d", dlab[0]) : "r0";
	int other[2 * MAXDIM], nout;
	int nother = driven_others(k, ki, other, &nout);
	bool rowacc = row_accumulates(k, ki, stat, other, nother);
	buf_printf(b, "%sfor (int64_t %s = 0; %s < %s; %s++) {\n", INDENT(), row, row,
	           nd > 0 ? xprintf("in[%d].n[0]", d) : "1", row);
	depth++;
	if (rowacc) {
		buf_printf(b, "%sif (rp[%s] == rp[%s + 1])\n", INDENT(), row, row);
		buf_printf(b, "%s\tcontinue;\n", INDENT());
		buf_printf(b, "%s%s ra[%" PRId64 "];\n", INDENT(), T, stat[other[0]]);
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < %" PRId64 "; l%d++)\n", INDENT(), other[0], other[0],
		           stat[other[0]], other[0]);
		buf_printf(b, "%s\tra[l%d] = 0;\n", INDENT(), other[0]);
	}
	buf_printf(b, "%sfor (int64_t q = rp[%s]; q < rp[%s + 1]; q++) {\n", INDENT(), row, row);
	depth++;
	for (int c = 1; c < nd; c++) {
		/* a label the driver repeats (X[l, l], its diagonal) is the
		 * first dim's: the elements off it are skipped */
		int first = 0;
		while (dlab[first] != dlab[c])
			first++;
		if (first < c)
			buf_printf(b, "%sif (ci[q]", INDENT());
		else
			buf_printf(b, "%sconst int64_t l%d = ci[q]", INDENT(), dlab[c]);
		if (nd > 2)
			buf_printf(b, " / cs[%d] %% in[%d].n[%d]", c, d, c);
		buf_puts(b, first < c ? xprintf(" != l%d)\n%s\tcontinue;\n", dlab[c], INDENT()) : ";\n");
	}
	if (nd == 2 && nother > 0)
		driven_prefetch(b, k, ki, stat, other, nother, INDENT());
	if (d < k->nin)
		buf_printf(b, "%sconst %s x%d = (%s)p%d[q];\n", INDENT(), T, d, T, d);
	for (int j = 0; j < k->nin; j++) {
		if (j == d || !kx_uses(k->expr, j))
			continue;
		if (ki->byq[j])
			buf_printf(b, "%sconst %s x%d = e%d ? 0 : (%s)p%d[q];\n", INDENT(), T, j, j, T, j);
		if (ki->byfind[j]) {
			/* the driver's place first: inputs of one pattern (a
			 * mask and the ratings it marks) find their element at
			 * q, read in order, without a search of the row */
			buf_printf(b, "%sconst int64_t q%d = q >= in[%d].rowptr[l%d] && q < in[%d].rowptr[l%d + 1] && "
			           "in[%d].col[q] == l%d ? q : trt_csr_find(&in[%d], l%d, l%d);\n", INDENT(), j, j,
			           dlab[0], j, dlab[0], j, dlab[1], j, dlab[0], dlab[1]);
			buf_printf(b, "%sconst %s x%d = q%d >= 0 ? (%s)p%d[q%d] : 0;\n", INDENT(), T, j, j, T, j, j);
		}
	}
	bool red_inside = ki->sparse_out && nother > nout;     /* sparse_out: no output label is other */
	int dpos[2];
	if (red_inside && nother == 1 && sampled_dot(k, ki, other[0], dpos))
		driven_dot(b, k, ki, dpos, INDENT());
	else
		driven_loops(b, k, ki, stat, other, nother, red_inside, rowacc, depth);
	if (rowacc) {
		/* the row's sums into its run of the output */
		depth--;
		buf_printf(b, "%s}\n", INDENT());
		buf_printf(b, "%sfor (int64_t l%d = 0; l%d < %" PRId64 "; l%d++)\n", INDENT(), other[0], other[0],
		           stat[other[0]], other[0]);
		buf_printf(b, "%s\tpo[", INDENT());
		offset_expr(b, "o", k->noutdim, k->outlab);
		buf_puts(b, "] += ra[");
		buf_printf(b, "l%d];\n", other[0]);
	}
	while (depth > 0) {
		depth--;
		buf_printf(b, "%s}\n", INDENT());
	}
#undef INDENT
}
