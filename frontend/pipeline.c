/*
 * pipeline.c: source -> IA plan, the passes in order.
 *
 *   fe_parse          text -> AST
 *   fe_compile        sema + lowering: AST -> TRA
 *   opt_autodiff      grad(loss, W) -> backward TRA
 *   opt_hoist         loop-invariant code out of repeat blocks     (-O1, -O2)
 *   opt_contract      sums of products in the cheapest order        (-O1, -O2)
 *   opt_sparsity      which relations are sparse, which have holes
 *   opt_fuse_scatters sums of scatter-adds into scatters into a base  (-O1, -O2)
 *   opt_block         chunk shapes
 *   opt_plan          TRA -> IA: Table 1, rewritten or searched, costed
 *
 * trac (main.c) and the fuzzer (tests/fuzz/fuzz_trac.c) both run this
 * function, so what the fuzzer checks is what trac runs.  The TRA verifier
 * runs after every pass that changes the program (opt_plan verifies its own
 * IA); a broken invariant is a bug (tr_bug, exit 4).
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/driver.h"

static const char *const dump_names[] = {
	[DUMP_NONE] = NULL,
#define X(id, name) [id] = name,
	DUMP_PASSES(X)
#undef X
};

DumpPass trac_dump_pass(const char *name)
{
	for (int i = DUMP_NONE + 1; i < (int)(sizeof dump_names / sizeof *dump_names); i++)
		if (!strcmp(dump_names[i], name))
			return (DumpPass)i;
	return DUMP_NONE;
}

/* --dump-after: true (and the IR printed on `out`) when `pass` is the one asked for. */
static bool dump(const Pipeline *pl, DumpPass pass, FILE *out)
{
	if (pl->dump_after != pass)
		return false;
	Buf b = {0};
	switch (pass) {
	case DUMP_NONE:
		return false;
	case DUMP_PARSE:
		fe_ast_print(&b, pl->ast);
		break;
	case DUMP_TRA:
	case DUMP_BLOCKING:
		tra_print(&b, pl->prog);
		break;
	case DUMP_IA:
		ia_print(&b, pl->plan, pl->costs);
		break;
	}
	fputs(b.s ? b.s : "", out);
	buf_free(&b);
	return true;
}

static void verify(const Pipeline *pl, const char *after)
{
	Buf err = {0};
	if (!tra_verify(pl->prog, &err))
		tr_bug("TRA program invalid after %s: %s", after, err.s);
}

static void phase_end(const Pipeline *pl, const char *name)
{
	if (pl->hooks.phase)
		pl->hooks.phase(pl->hooks.ctx, name);
}

/* A tensor bigger than --mem-per-rank on each of MAX_RANKS ranks fits on no
 * rank count: no plan can hold it, so say so before planning. */
static bool tensors_fit(const TraProg *p, double mem_per_rank)
{
	bool ok = true;
	if (mem_per_rank <= 0)
		return true;
	for (int i = 0; i < p->tensors.n; i++) {
		const Tensor *t = &p->tensors.v[i];
		double bytes = dtype_size(t->dtype);
		for (int d = 0; d < t->rank; d++)
			bytes *= (double)t->shape[d];
		if (bytes / MAX_RANKS > mem_per_rank) {
			diag(DIAG_ERROR, t->loc, "'%s' needs %.3g bytes: more than --mem-per-rank %.3g on each of %d ranks, "
			     "so it fits on no rank count", t->name, bytes, mem_per_rank, MAX_RANKS);
			ok = false;
		}
	}
	return ok;
}

/* The cheapest plan over --mem-per-rank is an error that says how far over. */
static bool plan_fits(const IaPlan *plan, double mem_per_rank)
{
	if (mem_per_rank <= 0 || plan->peak_bytes <= mem_per_rank)
		return true;
	if (plan->leanest_peak > 0 && plan->leanest_peak < plan->peak_bytes)
		diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
		     "rank at its peak, the leanest found %.3g; give more memory or more ranks (-P)",
		     mem_per_rank, plan->peak_bytes, plan->leanest_peak);
	else
		diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
		     "rank at its peak; give more memory or more ranks (-P)", mem_per_rank, plan->peak_bytes);
	return false;
}

int trac_pipeline(Pipeline *pl, int file, FILE *out)
{
	/* text -> AST */
	pl->arena = arena_new();
	pl->ast = fe_parse(pl->arena, file);
	if (diag_errors())
		return 1;
	phase_end(pl, "read and parse");
	if (dump(pl, DUMP_PARSE, out))
		return 0;

	/* AST -> TRA */
	pl->prog = fe_compile(pl->ast, &pl->fe);
	if (!pl->prog)
		return 1;
	verify(pl, "lowering");
	phase_end(pl, "check and lower");
	int status = 0;
	if (pl->hooks.lowered && !pl->hooks.lowered(pl->hooks.ctx, pl->prog, &status))
		return status;
	if (!tensors_fit(pl->prog, pl->opt.mem_per_rank))
		return 1;
	if (pl->syntax_only)
		return 0;

	/* grad(loss, W) -> the backward computation, in TRA */
	opt_autodiff(pl->prog);
	if (diag_errors())
		return 1;
	verify(pl, "autodiff");

	/* loop-invariant computation out of repeat blocks */
	if (pl->opt.level > 0) {
		opt_hoist(pl->prog);
		verify(pl, "hoisting");
	}
	phase_end(pl, "autodiff");
	if (dump(pl, DUMP_TRA, out))
		return 0;

	/* sums of products in the cheapest order of pairwise contractions */
	if (pl->hooks.pins)
		pl->hooks.pins(pl->hooks.ctx, pl->prog, &pl->opt);
	if (pl->opt.level > 0) {
		opt_contract(pl->prog, &pl->opt);
		verify(pl, "contraction order");
	}

	/* which relations are sparse, which may lack tuples */
	opt_sparsity(pl->prog, &pl->opt);

	/* sums of scatter-adds (a gathered table's gradient, its SGD step)
	 * into scatters that add into a base */
	if (pl->opt.level > 0) {
		opt_fuse_scatters(pl->prog);
		verify(pl, "scatter fusion");
	}

	/* chunk shapes */
	opt_block(pl->prog, &pl->opt);
	verify(pl, "blocking");
	phase_end(pl, "blocking");
	if (dump(pl, DUMP_BLOCKING, out))
		return 0;

	/* TRA -> IA */
	pl->plan = opt_plan(pl->prog, &pl->opt);
	if (diag_errors())
		return 1;
	phase_end(pl, "plan search");
	if (dump(pl, DUMP_IA, out))
		return 0;
	if (!plan_fits(pl->plan, pl->opt.mem_per_rank))
		return 1;
	return -1;
}

void trac_pipeline_free(Pipeline *pl)
{
	if (pl->plan)
		ia_free(pl->plan);
	if (pl->prog)
		tra_free(pl->prog);
	for (int i = 0; i < pl->fe.ndeps; i++)
		free((char *)pl->fe.deps[i]);
	free(pl->fe.deps);
	if (pl->arena)
		arena_free(pl->arena);
	pl->plan = NULL;
	pl->prog = NULL;
	pl->fe.deps = NULL;
	pl->fe.ndeps = 0;
	pl->arena = NULL;
}

bool trac_ist_divides(const TraProg *p, int nranks, const IstLoop **loop, int *split)
{
	for (int i = 0; i < p->ist.n; i++)
		for (int z = 0; z < p->ist.v[i].nsplit; z++)
			if (p->ist.v[i].extent[z] % nranks) {
				*loop = &p->ist.v[i];
				*split = z;
				return false;
			}
	return true;
}

int trac_ist_body(const Pipeline *base, const TraProg *whole, int nranks, int loop, int file, Pipeline *body)
{
	const IstLoop *l = &whole->ist.v[loop];
	*body = *base;
	int nd = base->fe.ndefines;
	Define *defs = xcalloc((size_t)(nd + l->nsplit) + 1, sizeof *defs);
	if (nd)
		memcpy(defs, base->fe.defines, (size_t)nd * sizeof *defs);
	for (int z = 0; z < l->nsplit; z++) {
		body->ist_sizes[z] = xprintf("%" PRId64, l->extent[z] / nranks);
		Define sub = {l->split[z], body->ist_sizes[z]};
		int at = 0;
		while (at < nd && strcmp(defs[at].name, sub.name))
			at++;
		defs[at] = sub;         /* after -D H1=...: the subnet's share of it */
		nd += at == nd;
	}
	body->fe.defines = defs;
	body->fe.ndefines = nd;
	body->fe.deps = NULL;
	body->fe.ndeps = 0;
	body->fe.ist_local = loop + 1;
	body->opt.nranks = 1;
	body->opt.prior = body->opt.chosen = NULL;
	body->dump_after = DUMP_NONE;
	body->syntax_only = false;
	body->hooks = (PipelineHooks){0};
	body->arena = NULL;
	body->ast = NULL;
	body->prog = NULL;
	body->plan = NULL;
	return trac_pipeline(body, file, stdout);
}

void trac_ist_body_free(Pipeline *body)
{
	trac_pipeline_free(body);
	for (int z = 0; z < MAXSPLIT; z++) {
		free(body->ist_sizes[z]);
		body->ist_sizes[z] = NULL;
	}
	free(body->fe.defines);
	body->fe.defines = NULL;
}
