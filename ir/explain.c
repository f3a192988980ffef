/*
 * explain.c: --explain's text and JSON: a plan as statements, each an
 * indented tree of its ops, the way PostgreSQL's EXPLAIN and SQLite's
 * EXPLAIN QUERY PLAN read, with its costs, its rule chain and its other
 * strategies (each the whole plan it makes, beside this plan's totals).
 * With costs off (golden tests) it prints only what the plan is, not what
 * it costs.  Deterministic: numbers in %.3g.  An out-of-core plan
 * (IaPlan.mem_budget) says so in its header, and each op that writes to
 * the spill file or reads from it says how many bytes, costs or not: where
 * its chunks live is part of the plan.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static void ia_op_costs(Buf *b, const IaOp *op)
{
	if (ia_op_moves(op->kind))
		buf_printf(b, "  moves %.3g floats", op->floats_moved);
	if (op->flops > 0)
		buf_printf(b, "  %.3g flops", op->flops);
}

/* An op's spill file traffic in an out-of-core plan, per rank and run. */
static void ia_op_spill(Buf *b, const IaOp *op)
{
	if (op->spill_written > 0)
		buf_printf(b, "  spills %.3g bytes", op->spill_written);
	if (op->spill_read > 0)
		buf_printf(b, "  reads back %.3g bytes", op->spill_read);
}

/* A two-phase op's schedule under it: what it sends, the stages of its
 * predicted time, and where its lineage came from. */
static void twophase_detail(Buf *b, const IaOp *op, int indent, bool costs)
{
	const TpSched *ts = op->u.join.sched;
	int64_t *jobs = xcalloc((size_t)ts->nranks + 1, sizeof *jobs);
	for (int64_t j = 0; j < ts->njoin; j++)
		jobs[ts->site[j]]++;
	buf_printf(b, "%*sjoin groups per rank:", indent, "");
	for (int r = 0; r < ts->nranks; r++)
		buf_printf(b, "%s%" PRId64, r ? "/" : " ", jobs[r]);
	free(jobs);
	buf_printf(b, "; chunks sent: %" PRId64 " inputs, %" PRId64 " partial sums\n", ts->in_msgs, ts->part_msgs);
	if (costs) {
		buf_printf(b, "%*sstages: inputs %.3g s + kernels %.3g s + partial sums %.3g s + combining %.3g s; "
		           "%.3g bytes sent, %.3g bytes per rank beyond its inputs\n", indent, "", ts->t_in,
		           ts->t_kernel, ts->t_partial, ts->t_combine, ts->bytes, ts->mem);
		buf_printf(b, "%*sgreedy (rule 1 for %" PRId64 " groups, rule 2 for %" PRId64 ") %.3g s, rule 1 only %.3g s, "
		           "rule 2 only %.3g s\n", indent, "", ts->by_rule[0], ts->by_rule[1], ts->variant_seconds[0],
		           ts->variant_seconds[1], ts->variant_seconds[2]);
	}
	buf_printf(b, "%*slineage from the blocking at compile time (dense chunks, static placements): no pilot run\n",
	           indent, "");
}

typedef struct Tree {
	const IaPlan *p;
	int *users;             /* per op: how many ops read it */
	bool *shown;
	Buf *b;
	bool costs;
	bool alts;              /* --explain=all: the other strategies too */
} Tree;

/* A statement's totals over its ops. */
typedef struct StmtCost {
	double moved, flops, seconds, peak;
} StmtCost;

static StmtCost stmt_cost(const IaPlan *p, int s)
{
	StmtCost c = {0};
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].stmt == s) {
			c.moved += p->ops.v[i].floats_moved;
			c.flops += p->ops.v[i].flops;
			c.seconds += p->ops.v[i].seconds;
			if (p->ops.v[i].live_bytes > c.peak)
				c.peak = p->ops.v[i].live_bytes;
		}
	return c;
}

/* A backward op: the statement whose adjoint it computes (autodiff). */
static void grad_of(Buf *b, const IaPlan *p, const IaOp *op)
{
	int of = op->tra >= 0 && op->tra < p->tra->ops.n ? p->tra->ops.v[op->tra].grad_of : 0;
	if (of <= 0 || of - 1 == op->stmt)
		return;
	Loc loc = p->tra->stmts.v[of - 1].loc;
	int line, col;
	loc_linecol(loc, &line, &col);
	const SrcFile *f = src_get(loc.file);
	if (f && loc.file > 0) {
		const char *base = strrchr(f->path, '/');
		buf_printf(b, "  (grad of %s:%d)", base ? base + 1 : f->path, line);
	} else {
		buf_printf(b, "  (grad of line %d)", line);
	}
}

static void tree_print(Tree *t, int i, int depth, int stmt)
{
	const IaOp *op = &t->p->ops.v[i];
	buf_printf(t->b, "%*s", 2 + 4 * depth, "");
	if (t->shown[i] || (op->stmt != stmt && depth > 0)) {
		/* made by an earlier statement or already printed: a reference */
		buf_printf(t->b, "-> #%d ", i);
		ia_op_print(t->b, t->p, op);
		buf_puts(t->b, "\n");
		return;
	}
	t->shown[i] = true;
	buf_printf(t->b, "#%d ", i);
	ia_op_print(t->b, t->p, op);
	if (t->costs)
		ia_op_costs(t->b, op);
	ia_op_spill(t->b, op);
	grad_of(t->b, t->p, op);
	buf_puts(t->b, "\n");
	if (op->kind == IA_TWOPHASE)
		twophase_detail(t->b, op, 6 + 4 * depth, t->costs);
	int in[MAXIN];
	int n = ia_inputs(op, in);
	for (int j = 0; j < n; j++)
		tree_print(t, in[j], depth + 1, stmt);
}

static void header_print(Buf *b, const IaPlan *p, bool costs)
{
	buf_printf(b, "plan for %d rank%s", p->nranks, p->nranks == 1 ? "" : "s");
	if (costs)
		buf_printf(b, ": %.3g floats moved, %.3g flops, peak %.3g bytes per rank, predicted %.3g s",
		           p->total_floats_moved, p->total_flops, p->peak_bytes, p->predicted_seconds);
	buf_puts(b, "\n");
	if (costs && p->machine)
		buf_printf(b, "machine model: %s\n", p->machine);
	if (p->mem_budget > 0)
		buf_printf(b, "out of core: %.3g bytes per rank in memory (its peak %.3g), the rest in a spill file: "
		           "%.3g bytes written, %.3g read back per rank\n", p->mem_budget, p->resident_peak,
		           p->spill_written, p->spill_read);
	/* the objective: always beside the costs; without them only when not
	 * the default, so plans of the default read as they always have */
	if (costs || p->objective != OBJ_SECONDS)
		buf_printf(b, "objective: %s\n", objective_order(p->objective));
	/* the blocks chosen, per input, param and output */
	bool first = true;
	for (int t = 0; t < p->tra->tensors.n; t++) {
		const Tensor *ten = &p->tra->tensors.v[t];
		for (int i = 0; i < p->ops.n; i++) {
			const IaOp *op = &p->ops.v[i];
			int who = op->kind == IA_READ ? op->u.read.tensor : op->kind == IA_INIT ? op->u.init.tensor
			          : op->kind == IA_WRITE ? op->u.write.tensor : -1;
			if (who != t || ten->rank == 0)
				continue;
			buf_puts(b, first ? "blocks:" : ",");
			first = false;
			buf_printf(b, " %s ", ten->name);
			for (int d = 0; d < op->type.nkey; d++)
				buf_printf(b, "%s%" PRId64, d ? "x" : "", op->type.block[d]);
			break;
		}
	}
	if (!first)
		buf_puts(b, "\n");
	/* what the plan assumed of each sparse input, which the run finds out */
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->kind != IA_READ || !op->type.sparse)
			continue;
		const Tensor *ten = &p->tra->tensors.v[op->u.read.tensor];
		double all = 1, longest = 1;
		for (int d = 0; d < ten->rank; d++) {
			all *= (double)ten->shape[d];
			longest = (double)ten->shape[d] > longest ? (double)ten->shape[d] : longest;
		}
		double stored = rel_density(&op->type) * all;
		buf_printf(b, "assumes: %s holds %.3g stored elements", ten->name, stored);
		if (ten->density > 0)
			buf_puts(b, " (--nnz)");
		else
			buf_printf(b, " (%.3g a row: an estimate; --nnz %s=COUNT gives the count)", stored / longest,
			           ten->name);
		if (p->nranks > 1 && op->place.kind == PL_PART && op->place.ndims > 0)
			buf_puts(b, "; the run places its blocks by their stored elements (from a csr or csc .npz)");
		else if (p->nranks > 1)
			buf_puts(b, op->place.kind == PL_ALL ? "; every rank reads it whole" : "; one rank reads it whole");
		buf_puts(b, "\n");
	}
}

/* A statement's rule chain as --explain=all says it. */
static const char *rule_chain(const char *rules)
{
	return *rules ? rules : "Table 1";
}

/*
 * Why another strategy lost, comparing its whole plan with the chosen one
 * (p's totals) by what decided (a->why, in the order tune.c compares
 * plans); with costs, by how much.  Never a statement's cost against a
 * plan's: the alternatives are whole plans, and so are the differences.
 */
static void alt_why(Buf *b, const IaAlt *a, const IaPlan *p, bool costs)
{
	double dt = a->seconds - p->predicted_seconds, df = a->floats - p->total_floats_moved;
	double db = a->bytes - p->total_bytes_sent;
	switch (a->why) {
	case ALT_NO_PLAN:
		buf_puts(b, "does not apply to this statement");
		return;
	case ALT_MEMORY:
		buf_puts(b, "its plan needs more memory per rank than --mem-per-rank");
		if (costs)
			buf_printf(b, " (%.3g bytes at its peak)", a->peak_bytes);
		return;
	case ALT_LEAD:
		if (a->work_ratio > 0)
			buf_printf(b, costs ? "the busiest rank does %.3gx the flops; " : "the busiest rank's flops differ",
			           a->work_ratio);
		else
			buf_puts(b, costs ? "" : "more floats moved");
		if (costs)
			buf_printf(b, "%+.3g floats moved, %+.3g s predicted", df, dt);
		return;
	case ALT_TIME:
		buf_puts(b, costs ? "" : "slower");
		if (costs)
			buf_printf(b, "%+.3g s predicted, %+.3g floats moved", dt, df);
		return;
	case ALT_BYTES:
		buf_printf(b, "predicted within %d%% of this plan's, where bytes sent decide", PLAN_TIE_PCT);
		if (costs)
			buf_printf(b, ": %+.3g bytes sent, %+.3g floats moved, %+.3g s predicted", db, df, dt);
		else
			buf_puts(b, db > 0 ? ": more bytes sent" : ": fewer bytes sent");
		return;
	case ALT_TIME_CLOSE:
		buf_printf(b, "predicted within %d%% of this plan's and the same bytes sent, where predicted time decides",
		           PLAN_TIE_PCT);
		if (costs)
			buf_printf(b, ": %+.3g s predicted, %+.3g floats moved", dt, df);
		return;
	case ALT_FLOATS:
		buf_puts(b, "the same predicted time and bytes sent, where floats moved decide");
		if (costs)
			buf_printf(b, ": %+.3g floats moved", df);
		return;
	case ALT_EQUAL:
		buf_puts(b, "costs the same as this plan, which the search found first");
		return;
	}
}

/* Statement s's other strategies, each costed as the whole plan it makes,
 * beside this plan's totals. */
static void alts_print(Tree *t, int s, int depth)
{
	const IaPlan *p = t->p;
	bool first = true;
	for (int i = 0; i < p->alts.n; i++) {
		const IaAlt *a = &p->alts.v[i];
		if (a->stmt != s)
			continue;
		if (first && t->costs)
			buf_printf(t->b, "%*s  other strategies, each costed as the whole plan (this plan: %.3g floats moved, "
			           "%.3g bytes sent, predicted %.3g s, peak %.3g bytes per rank):\n", 4 * depth, "",
			           p->total_floats_moved, p->total_bytes_sent, p->predicted_seconds, p->peak_bytes);
		first = false;
		buf_printf(t->b, "%*s  also considered: %s", 4 * depth, "", strategy_name(a->strategy));
		if (a->rules)
			buf_printf(t->b, " (%s)", rule_chain(a->rules));
		bool numbers = t->costs && a->why != ALT_NO_PLAN;
		if (numbers)
			buf_printf(t->b, ": %.3g floats moved, %.3g bytes sent, predicted %.3g s, peak %.3g bytes per rank; ",
			           a->floats, a->bytes, a->seconds, a->peak_bytes);
		else
			buf_puts(t->b, " (");
		alt_why(t->b, a, p, t->costs);
		buf_puts(t->b, numbers ? "\n" : ")\n");
	}
}

/* Print statement s's ops as trees from their roots, at indent `depth`. */
static void stmt_print(Tree *t, int s, int first, int depth)
{
	const IaPlan *p = t->p;
	Buf *b = t->b;
	int n = p->ops.n;

	if (s < 0) {
		for (int i = first; i < n && p->ops.v[i].stmt == s; i++)
			if (t->users[i] == 0 && p->ops.v[i].kind != IA_LOOP && p->ops.v[i].kind != IA_ENDLOOP)
				tree_print(t, i, depth, s);
		return;
	}
	int line, col;
	loc_linecol(p->tra->stmts.v[s].loc, &line, &col);
	/* a def's statement, inlined from an imported file, says which file */
	const SrcFile *f = src_get(p->tra->stmts.v[s].loc.file);
	const char *base = f && p->tra->stmts.v[s].loc.file > 0 ? strrchr(f->path, '/') : NULL;
	if (f && p->tra->stmts.v[s].loc.file > 0)
		buf_printf(b, "\n%*sstatement %d (%s:%d): %s\n", 4 * depth, "", s + 1, base ? base + 1 : f->path, line,
		           p->tra->stmts.v[s].text);
	else
		buf_printf(b, "\n%*sstatement %d (line %d): %s\n", 4 * depth, "", s + 1, line, p->tra->stmts.v[s].text);
	buf_printf(b, "%*s  strategy %s", 4 * depth, "", strategy_name(p->strategy.v[s]));
	if (t->costs) {
		StmtCost c = stmt_cost(p, s);
		buf_printf(b, ", %.3g floats moved, %.3g flops, predicted %.3g s, peak %.3g bytes per rank",
		           c.moved, c.flops, c.seconds, c.peak);
	}
	buf_puts(b, "\n");
	if (t->alts && p->rules.v[s])
		buf_printf(b, "%*s  derived by %s\n", 4 * depth, "", rule_chain(p->rules.v[s]));
	if (t->alts)
		alts_print(t, s, depth);
	for (int i = n - 1; i >= 0; i--)
		if (p->ops.v[i].stmt == s && t->users[i] == 0)
			tree_print(t, i, depth, s);
}

/* The plan in program order: statements as trees of their ops, inputs and
 * outputs as they come, repeat blocks indented. */
void ia_explain_text(Buf *b, const IaPlan *p, bool costs, bool alts)
{
	int n = p->ops.n;
	Tree t = {p, xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(bool)), b, costs, alts};
	bool *done = xcalloc(p->tra->stmts.n + 1, sizeof(bool));
	for (int i = 0; i < n; i++) {
		int in[MAXIN];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			if (p->ops.v[in[j]].stmt == p->ops.v[i].stmt)
				t.users[in[j]]++;
	}
	header_print(b, p, costs);
	int depth = 0;
	bool blank = false;
	/* a statement is shown where its last op runs: some of its ops may
	 * run earlier, hoisted out of the loop it is in */
	int *last = ia_stmt_last_ops(p);
	for (int i = 0; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->kind == IA_LOOP) {
			buf_printf(b, "\n%*srepeat %" PRId64 " times {\n", 4 * depth, "", op->u.loop.count);
			depth++;
			blank = false;
		} else if (op->kind == IA_ENDLOOP) {
			depth--;
			buf_printf(b, "%*s}\n", 4 * depth, "");
		} else if (op->stmt < 0) {
			if (!blank)
				buf_puts(b, "\n");
			blank = true;
			if (t.users[i] == 0)
				tree_print(&t, i, depth, -1);
		} else if (!done[op->stmt] && i == last[op->stmt]) {
			done[op->stmt] = true;
			stmt_print(&t, op->stmt, i, depth);
			blank = false;
		}
	}
	free(last);
	free(done);
	free(t.users);
	free(t.shown);
}

void ia_print(Buf *b, const IaPlan *p, bool costs)
{
	ia_explain_text(b, p, costs, false);
}

/* ---- JSON ---- */

static void json_str(Buf *b, const char *s)
{
	buf_quote(b, s, true);
}

static void json_num(Buf *b, double v)
{
	buf_printf(b, "%.6g", v);
}

/* sep, then "key": and the value */
static void json_num_field(Buf *b, const char *sep, const char *key, double v)
{
	buf_printf(b, "%s\"%s\": ", sep, key);
	json_num(b, v);
}

static void json_str_field(Buf *b, const char *sep, const char *key, const char *v)
{
	buf_printf(b, "%s\"%s\": ", sep, key);
	json_str(b, v);
}

void ia_explain_json(Buf *b, const IaPlan *p)
{
	buf_printf(b, "{\n  \"ranks\": %d,\n  \"total_floats_moved\": ", p->nranks);
	json_num(b, p->total_floats_moved);
	json_num_field(b, ",\n  ", "total_bytes_sent", p->total_bytes_sent);
	json_num_field(b, ",\n  ", "total_flops", p->total_flops);
	json_num_field(b, ",\n  ", "busiest_rank_flops", p->busiest_flops);
	json_num_field(b, ",\n  ", "predicted_seconds", p->predicted_seconds);
	json_num_field(b, ",\n  ", "peak_bytes_per_rank", p->peak_bytes);
	if (p->leanest_peak > 0) {
		json_num_field(b, ",\n  ", "leanest_peak_bytes_per_rank", p->leanest_peak);
	}
	if (p->mem_budget > 0) {
		json_num_field(b, ",\n  ", "mem_budget_bytes_per_rank", p->mem_budget);
		json_num_field(b, ",\n  ", "resident_peak_bytes_per_rank", p->resident_peak);
		json_num_field(b, ",\n  ", "spill_written_bytes_per_rank", p->spill_written);
		json_num_field(b, ",\n  ", "spill_read_bytes_per_rank", p->spill_read);
	}
	json_str_field(b, ",\n  ", "machine", p->machine ? p->machine : "built-in");
	json_str_field(b, ",\n  ", "objective", objective_name(p->objective));
	buf_puts(b, ",\n  \"params\": [");
	bool firstp = true;
	for (int t = 0; t < p->tra->tensors.n && t < p->varplace.n; t++) {
		if (p->tra->tensors.v[t].role != TENSOR_PARAM)
			continue;
		Buf pl = {0};
		place_print(&pl, &p->varplace.v[t]);
		buf_printf(b, "%s{ \"name\": ", firstp ? "" : ", ");
		json_str(b, p->tra->tensors.v[t].name);
		json_str_field(b, ", ", "placement", pl.s);
		buf_puts(b, " }");
		buf_free(&pl);
		firstp = false;
	}
	buf_puts(b, "],\n  \"statements\": [");
	for (int s = 0; s < p->tra->stmts.n; s++) {
		StmtCost c = stmt_cost(p, s);
		int line, col;
		loc_linecol(p->tra->stmts.v[s].loc, &line, &col);
		buf_printf(b, "%s\n    { \"line\": %d, \"text\": ", s ? "," : "", line);
		json_str(b, p->tra->stmts.v[s].text);
		json_str_field(b, ", ", "strategy", strategy_name(p->strategy.v[s]));
		if (p->rules.v[s]) {
			json_str_field(b, ", ", "rules", p->rules.v[s]);
		}
		json_num_field(b, ", ", "floats_moved", c.moved);
		json_num_field(b, ", ", "flops", c.flops);
		json_num_field(b, ", ", "predicted_seconds", c.seconds);
		json_num_field(b, ", ", "peak_bytes_per_rank", c.peak);
		buf_puts(b, ", \"alternatives\": [");
		bool firsta = true;
		for (int i = 0; i < p->alts.n; i++) {
			const IaAlt *a = &p->alts.v[i];
			if (a->stmt != s)
				continue;
			buf_printf(b, "%s{ \"strategy\": ", firsta ? "" : ", ");
			json_str(b, strategy_name(a->strategy));
			buf_printf(b, ", \"feasible\": %s", a->why != ALT_NO_PLAN ? "true" : "false");
			if (a->rules) {
				json_str_field(b, ", ", "rules", a->rules);
			}
			if (a->why != ALT_NO_PLAN) {
				json_num_field(b, ", ", "total_floats_moved", a->floats);
				json_num_field(b, ", ", "predicted_seconds", a->seconds);
				json_num_field(b, ", ", "peak_bytes_per_rank", a->peak_bytes);
			}
			Buf why = {0};
			alt_why(&why, a, p, true);
			json_str_field(b, ", ", "why", why.s ? why.s : "");
			buf_free(&why);
			buf_puts(b, " }");
			firsta = false;
		}
		buf_puts(b, "] }");
	}
	buf_puts(b, "\n  ],\n  \"ops\": [");
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		Buf desc = {0}, pl = {0}, ty = {0};
		int in[MAXIN];
		int n = ia_inputs(op, in);
		ia_op_print(&desc, p, op);
		place_print(&pl, &op->place);
		reltype_print(&ty, &op->type);
		buf_printf(b, "%s\n    { \"id\": %d, \"kind\": \"%s\", \"inputs\": [", i ? "," : "", i, ia_op_name(op->kind));
		for (int j = 0; j < n; j++)
			buf_printf(b, "%s%d", j ? ", " : "", in[j]);
		buf_puts(b, "], \"floats_moved\": ");
		json_num(b, op->floats_moved);
		json_num_field(b, ", ", "bytes_sent", op->bytes_sent);
		json_num_field(b, ", ", "flops", op->flops);
		json_num_field(b, ", ", "predicted_seconds", op->seconds);
		if (p->mem_budget > 0) {
			json_num_field(b, ", ", "spill_written", op->spill_written);
			json_num_field(b, ", ", "spill_read", op->spill_read);
		}
		json_str_field(b, ", ", "placement", pl.s);
		json_str_field(b, ", ", "type", ty.s);
		buf_printf(b, ", \"tuples\": %" PRId64 ", \"statement\": %d, \"text\": ", rel_ntuples(&op->type), op->stmt);
		json_str(b, desc.s);
		int of = op->tra >= 0 && op->tra < p->tra->ops.n ? p->tra->ops.v[op->tra].grad_of : 0;
		if (of > 0)
			buf_printf(b, ", \"grad_of\": %d", of - 1);
		if (op->kind == IA_TWOPHASE) {
			const TpSched *ts = op->u.join.sched;
			buf_printf(b, ", \"two_phase\": { \"join_groups\": %" PRId64 ", \"aggregation_groups\": %" PRId64
			           ", \"planned_ranks\": %d, \"plan\": ", ts->njoin, ts->nagg, ts->nranks);
			json_str(b, ts->variant);
			json_num_field(b, ", ", "greedy_seconds", ts->variant_seconds[0]);
			json_num_field(b, ", ", "rule1_only_seconds", ts->variant_seconds[1]);
			json_num_field(b, ", ", "rule2_only_seconds", ts->variant_seconds[2]);
			buf_printf(b, ", \"by_rule\": [%" PRId64 ", %" PRId64 "], \"stages\": [", ts->by_rule[0], ts->by_rule[1]);
			double st[4] = {ts->t_in, ts->t_kernel, ts->t_partial, ts->t_combine};
			for (int k = 0; k < 4; k++) {
				buf_puts(b, k ? ", " : "");
				json_num(b, st[k]);
			}
			buf_printf(b, "], \"input_chunks_sent\": %" PRId64 ", \"partial_sums_sent\": %" PRId64 ", \"mem\": ",
			           ts->in_msgs, ts->part_msgs);
			json_num(b, ts->mem);
			buf_puts(b, ", \"pilot\": \"none: lineage from the blocking (dense chunks, static placements)\" }");
		}
		buf_puts(b, " }");
		buf_free(&desc);
		buf_free(&pl);
		buf_free(&ty);
	}
	buf_puts(b, "\n  ]\n}\n");
}
