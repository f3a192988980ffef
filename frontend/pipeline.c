/*
 * pipeline.c: source -> one IA plan per rank count, the passes in order.
 *
 * The front end, once:
 *   fe_parse          text -> AST
 *   fe_compile        sema + lowering: AST -> TRA
 *   opt_contract_forward  products in a cheaper order that holds no   (-O1, -O2)
 *                     bigger intermediate, before the backward reads them
 *   opt_autodiff      grad(loss, W) -> backward TRA
 *   opt_hoist         loop-invariant code out of repeat blocks     (-O1, -O2)
 *   opt_contract      sums of products in the cheapest order        (-O1, -O2)
 *   opt_sparsity      which relations are sparse, which have holes
 *   opt_fuse_scatters sums of scatter-adds into scatters into a base  (-O1, -O2)
 * then, on the program it made (read only from then on), each rank count:
 *   opt_plan          TRA -> IA for the count: its blocks (the automatic
 *                     ones, then the search's), Table 1, rewritten or
 *                     searched, costed
 * and each plan's IST loops' bodies, as one-rank programs cut from the
 * program's TRA (ist.c: the bodies are taken out right after lowering).
 *
 * trac (main.c) and the fuzzer (tests/fuzz/fuzz_trac.c) both run
 * trac_pipeline, so what the fuzzer checks is what trac runs.  The TRA
 * verifier runs after every pass that changes the program (opt_plan
 * verifies its own IA); a broken invariant is a bug (tr_bug, exit 4).
 *
 * Nothing the front end does depends on the rank count but one bound: the
 * contraction order never chooses an intermediate bigger than the memory
 * of all ranks (--mem-per-rank, or the machine model's, times the count).
 * The front end orders with no bound and notes the largest intermediate
 * its orders hold; a count whose bound is below that (a few ranks of
 * little memory) plans a program of its own, ordered within its bound
 * (count_program).  Neither happens without a memory size.
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

/* What the pipeline holds besides its outputs. */
typedef struct PipeState {
	TraProg *unordered;             /* the program before contraction order, while a count may need it */
	double largest;                 /* elements of the largest intermediate the orders chosen hold */
	Vec(TraProg *) progs;           /* programs of counts ordered within their bound */
	IstBodies *ist;                 /* the IST loops' bodies (ist.c) */
	Vec(IaPlan *) istplans;         /* their plans */
	BlockMemo *memo;                /* the blocks each count's plan chose (opt_plan) */
} PipeState;

static void print_buf(Buf *b, FILE *out)
{
	fputs(b->s ? b->s : "", out);
	buf_free(b);
}

/* --dump-after=blocking: the program at the automatic blocks for the
 * count, where the search starts (the program itself keeps lowering's
 * single chunks: blocks are each plan's). */
static void dump_blocking(const TraProg *p, const OptOptions *o, FILE *out)
{
	TraProg view = *p;
	view.ops.v = xcalloc((size_t)p->ops.n + 1, sizeof *view.ops.v);
	memcpy(view.ops.v, p->ops.v, sizeof *view.ops.v * (size_t)p->ops.n);
	opt_block(&view, o);
	Buf b = {0};
	tra_print(&b, &view);
	print_buf(&b, out);
	free(view.ops.v);
}

static void verify(const TraProg *p, const char *after)
{
	Buf err = {0};
	if (!tra_verify(p, &err))
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

/* Does the plan fit --mem-per-rank (in memory, or out of core: its budget
 * is that)?  If not and `report`, an error that says how far over. */
static bool plan_fits(const IaPlan *plan, double mem_per_rank, bool report)
{
	if (mem_per_rank <= 0 || plan->peak_bytes <= mem_per_rank ||
	    (plan->mem_budget > 0 && plan->mem_budget <= mem_per_rank))
		return true;
	if (!report)
		return false;
	if (plan->leanest_peak > 0 && plan->leanest_peak < plan->peak_bytes)
		diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
		     "rank at its peak, the leanest found %.3g; give more memory or more ranks (-P)",
		     mem_per_rank, plan->peak_bytes, plan->leanest_peak);
	else
		diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
		     "rank at its peak; give more memory or more ranks (-P)", mem_per_rank, plan->peak_bytes);
	return false;
}

/* The passes after contraction order. */
static void late_passes(const Pipeline *pl, TraProg *p)
{
	/* which relations are sparse, which may lack tuples */
	opt_sparsity(p, &pl->opt);

	/* sums of scatter-adds (a gathered table's gradient, its SGD step)
	 * into scatters that add into a base */
	if (pl->opt.level > 0) {
		opt_fuse_scatters(p);
		verify(p, "scatter fusion");
	}
}

/* The front end, once: source -> the program every count plans.  Returns
 * -1 to go on, else the exit status. */
static int frontend(Pipeline *pl, int file, FILE *out)
{
	/* text -> AST */
	pl->arena = arena_new();
	pl->ast = fe_parse(pl->arena, file);
	if (diag_errors())
		return 1;
	phase_end(pl, "read and parse");
	if (pl->dump_after == DUMP_PARSE) {
		Buf b = {0};
		fe_ast_print(&b, pl->ast);
		print_buf(&b, out);
		return 0;
	}

	/* AST -> TRA */
	TraProg *p = pl->prog = fe_compile(pl->ast, &pl->fe);
	if (!p)
		return 1;
	verify(p, "lowering");
	if (p->ist.n) {
		/* IST loops' bodies, apart (ist.c) */
		((PipeState *)pl->state)->ist = trac_ist_split(p);
		verify(p, "IST bodies taken out");
	}
	phase_end(pl, "check and lower");
	int status = 0;
	if (pl->hooks.lowered && !pl->hooks.lowered(pl->hooks.ctx, p, &status))
		return status;
	if (!tensors_fit(p, pl->opt.mem_per_rank))
		return 1;
	if (pl->syntax_only)
		return 0;

	/* a product's forward order, before the backward pass reads its
	 * intermediates (no bigger ones than lowering's) */
	if (pl->opt.level > 0) {
		opt_contract_forward(p);
		verify(p, "forward contraction order");
	}

	/* grad(loss, W) -> the backward computation, in TRA */
	opt_autodiff(p);
	if (diag_errors())
		return 1;
	verify(p, "autodiff");

	/* loop-invariant computation out of repeat blocks */
	if (pl->opt.level > 0) {
		opt_hoist(p);
		verify(p, "hoisting");
	}
	phase_end(pl, "autodiff");
	if (pl->dump_after == DUMP_TRA) {
		Buf b = {0};
		tra_print(&b, p);
		print_buf(&b, out);
		return 0;
	}

	/* sums of products in the cheapest order of pairwise contractions,
	 * unbounded (count_program) */
	if (pl->hooks.pins)
		pl->hooks.pins(pl->hooks.ctx, p, &pl->opt);
	if (pl->opt.level > 0) {
		PipeState *st = pl->state;
		if (opt_contract_limit(&pl->opt, 1) < INFINITY)
			st->unordered = tra_copy(p);
		opt_contract_within(p, INFINITY, &st->largest);
		verify(p, "contraction order");
	}
	late_passes(pl, p);
	phase_end(pl, "TRA passes");
	return -1;
}

/* The program count nranks plans: the front end's, unless its bound on
 * intermediates (opt_contract_limit) is below one the front end's orders
 * chose; then one ordered within it. */
static const TraProg *count_program(Pipeline *pl, int nranks)
{
	PipeState *st = pl->state;
	double limit = opt_contract_limit(&pl->opt, nranks);
	if (!st->unordered || limit >= st->largest)
		return pl->prog;
	TraProg *p = tra_copy(st->unordered);
	opt_contract_within(p, limit, NULL);
	verify(p, "contraction order");
	late_passes(pl, p);
	vec_push(&st->progs, p);
	return p;
}

/* Drop the counts an IST loop's split sizes do not divide: from the
 * default counts silently, from -P's with an error.  Returns the counts
 * kept (*n of them), or NULL after the error. */
static int *ist_counts(const Pipeline *pl, int *n)
{
	int *keep = xcalloc((size_t)pl->nranks + 1, sizeof *keep);
	*n = 0;
	for (int k = 0; k < pl->nranks; k++) {
		const IstLoop *l;
		int z;
		if (trac_ist_divides(pl->prog, pl->ranks[k], &l, &z)) {
			keep[(*n)++] = pl->ranks[k];
			continue;
		}
		if (!pl->ranks_default) {
			diag(DIAG_ERROR, l->splitloc[z], "split size '%s' is %" PRId64 ", which %d ranks cannot share "
			     "equally; choose -P counts that divide it", l->split[z], l->extent[z], pl->ranks[k]);
			free(keep);
			return NULL;
		}
	}
	return keep;
}

/* Each count's plan.  --dump-after=blocking and ia show the first
 * count's.  A plan over --mem-per-rank is an error, or, among the
 * default counts, left out (an error when all are: the largest's).
 * Returns -1 with pl->plans set, else the exit status. */
static int plan_counts(Pipeline *pl, FILE *out)
{
	int ncount;
	int *counts = ist_counts(pl, &ncount);
	if (!counts)
		return 1;
	pl->plans = xcalloc((size_t)ncount + 1, sizeof *pl->plans);
	IaPlan *over = NULL;            /* the last plan left out */
	int status = -1;
	PipeState *st = pl->state;
	for (int k = 0; k < ncount && status < 0; k++) {
		OptOptions o = pl->opt;
		o.nranks = counts[k];
		o.memo = st->memo;      /* the counts' chains, planned once */
		const TraProg *p = count_program(pl, counts[k]);
		if (pl->dump_after == DUMP_BLOCKING) {
			dump_blocking(p, &o, out);
			status = 0;
			break;
		}
		IaPlan *plan = opt_plan(p, &o);
		if (!plan || diag_errors()) {
			if (plan)
				ia_free(plan);
			status = 1;
			break;
		}
		if (k == 0)
			phase_end(pl, "plan search");
		if (pl->dump_after == DUMP_IA) {
			Buf b = {0};
			ia_print(&b, plan, pl->costs);
			print_buf(&b, out);
			ia_free(plan);
			status = 0;
			break;
		}
		if (!plan_fits(plan, pl->opt.mem_per_rank, !pl->ranks_default)) {
			if (!pl->ranks_default) {
				ia_free(plan);
				status = 1;
				break;
			}
			if (over)
				ia_free(over);
			over = plan;            /* no plan for this count */
			continue;
		}
		pl->plans[pl->nplans++] = plan;
	}
	if (status < 0 && pl->nplans == 0) {
		plan_fits(over, pl->opt.mem_per_rank, true);    /* nothing fits: say so for the largest count */
		status = 1;
	}
	if (over)
		ia_free(over);
	if (status < 0 && ncount > 1)
		phase_end(pl, xprintf("%d more plans", ncount - 1));
	free(counts);
	return status;
}

/* Each plan's IST loops' bodies (ist.c). */
static int ist_bodies(Pipeline *pl)
{
	int nist = pl->prog->ist.n;
	PipeState *st = pl->state;
	pl->ist = xcalloc((size_t)(pl->nplans * nist) + 1, sizeof *pl->ist);
	for (int k = 0; k < pl->nplans; k++)
		for (int i = 0; i < nist; i++) {
			IaPlan *plan = trac_ist_plan(st->ist, i, pl->plans[k]->nranks, &pl->opt, k > 0);
			if (!plan)
				return 1;
			vec_push(&st->istplans, plan);
			if (!plan_fits(plan, pl->opt.mem_per_rank, true))
				return 1;
			pl->ist[k * nist + i] = plan;
			opt_cost_ist(pl->plans[k], i, plan, pl->opt.machine);   /* the loop op's seconds */
		}
	phase_end(pl, "IST bodies");
	return -1;
}

int trac_pipeline(Pipeline *pl, int file, FILE *out)
{
	pl->state = xcalloc(1, sizeof(PipeState));
	pl->state->memo = opt_block_memo_new();
	int status = frontend(pl, file, out);
	if (status < 0)
		status = plan_counts(pl, out);
	if (status < 0 && pl->prog->ist.n)
		status = ist_bodies(pl);
	return status;
}

void trac_pipeline_free(Pipeline *pl)
{
	PipeState *st = pl->state;
	for (int k = 0; k < pl->nplans; k++)
		ia_free(pl->plans[k]);
	free(pl->plans);
	free(pl->ist);
	if (st) {
		for (int i = 0; i < st->istplans.n; i++)
			ia_free(st->istplans.v[i]);
		vec_free(&st->istplans);
		trac_ist_free(st->ist);
		for (int i = 0; i < st->progs.n; i++)
			tra_free(st->progs.v[i]);
		vec_free(&st->progs);
		tra_free(st->unordered);
		opt_block_memo_free(st->memo);
		free(st);
	}
	if (pl->prog)
		tra_free(pl->prog);
	for (int i = 0; i < pl->fe.ndeps; i++)
		free((char *)pl->fe.deps[i]);
	free(pl->fe.deps);
	if (pl->arena)
		arena_free(pl->arena);
	pl->plans = NULL;
	pl->ist = NULL;
	pl->nplans = 0;
	pl->state = NULL;
	pl->prog = NULL;
	pl->fe.deps = NULL;
	pl->fe.ndeps = 0;
	pl->arena = NULL;
}
