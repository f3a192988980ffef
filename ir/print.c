/*
 * print.c: printers of TRA programs and IA plans, and --explain.
 *
 * Everything printed is deterministic: no pointers, no hash order, numbers
 * in %.3g.  The text form is an indented tree per statement, the way
 * PostgreSQL's EXPLAIN and SQLite's EXPLAIN QUERY PLAN read; with costs off
 * (golden tests) it prints only what the plan is, not what it costs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static void keys_print(Buf *b, int n, const int *k)
{
	buf_puts(b, "<");
	buf_ints(b, n, k, ",");
	buf_puts(b, ">");
}

static void pred_print(Buf *b, const KeyPred *p)
{
	for (int i = 0; i < p->neq; i++)
		buf_printf(b, "%sk%d==k%d", i ? " && " : "", p->eq[i][0], p->eq[i][1]);
}

/* ---- TRA ---- */

void tra_print(Buf *b, const TraProg *p)
{
	for (int i = 0; i < p->ops.n; i++) {
		const TraOp *op = &p->ops.v[i];
		buf_printf(b, "%%%d = %s", i, tra_op_name(op->kind));
		switch (op->kind) {
		case TRA_INPUT:
			buf_printf(b, " %s", p->tensors.v[op->u.input.tensor].name);
			break;
		case TRA_JOIN:
		case TRA_CONV:
			buf_printf(b, " %%%d %%%d on ", op->u.join.left, op->u.join.right);
			keys_print(b, op->u.join.on.nmatch, op->u.join.on.lkey);
			buf_puts(b, "=");
			keys_print(b, op->u.join.on.nmatch, op->u.join.on.rkey);
			buf_puts(b, " ");
			kernel_print(b, op->u.join.kernel);
			if (op->u.join.mask.on) {
				buf_printf(b, " sampled at %%%d ", op->u.join.mask.rel);
				keys_print(b, op->u.join.mask.nkey, op->u.join.mask.key);
			}
			break;
		case TRA_AGG:
			buf_printf(b, " %%%d %s group ", op->u.agg.in, agg_name(op->u.agg.agg));
			keys_print(b, op->u.agg.ngroup, op->u.agg.group);
			break;
		case TRA_MAP:
			buf_printf(b, " %%%d ", op->u.map.in);
			kernel_print(b, op->u.map.kernel);
			break;
		case TRA_REKEY:
			buf_printf(b, " %%%d ", op->u.rekey.in);
			keys_print(b, op->u.rekey.nkey, op->u.rekey.keymap);
			break;
		case TRA_FILTER:
			buf_printf(b, " %%%d ", op->u.filter.in);
			pred_print(b, &op->u.filter.pred);
			break;
		case TRA_OUTPUT:
			buf_printf(b, " %%%d -> %s\n", op->u.output.in, p->tensors.v[op->u.output.tensor].name);
			continue;
		case TRA_INIT:
		case TRA_LOAD:
			buf_printf(b, " %s", p->tensors.v[op->u.init.tensor].name);
			break;
		case TRA_RANGE:
			break;
		case TRA_COUNTER:
			buf_printf(b, " depth %d", op->u.counter.depth);
			break;
		case TRA_SLICE:
			buf_printf(b, " %%%d dim %d%s at %" PRId64 " stride %" PRId64, op->u.slice.in, op->u.slice.dim,
			           op->u.slice.scatter ? " scatter" : "", op->u.slice.shift, op->u.slice.stride);
			if (op->u.slice.off >= 0)
				buf_printf(b, " + %%%d", op->u.slice.off);
			break;
		case TRA_STORE:
		case TRA_PRINT:
			buf_printf(b, " %%%d %s %s\n", op->u.store.in, op->kind == TRA_STORE ? "->" : "as",
			           p->tensors.v[op->u.store.tensor].name);
			continue;
		case TRA_LOOP:
			buf_printf(b, " %" PRId64 " times\n", op->u.loop.count);
			continue;
		case TRA_GRAD:
			buf_printf(b, " %%%d wrt %s", op->u.grad.loss, p->tensors.v[op->u.grad.tensor].name);
			break;
		case TRA_GATHER:
		case TRA_SCATTER:
			buf_printf(b, " %%%d by %%%d dim %d", op->u.gather.src, op->u.gather.index, op->u.gather.dim);
			if (op->kind == TRA_SCATTER && op->u.gather.scale != 1)
				buf_printf(b, " times %.17g", op->u.gather.scale);
			if (op->kind == TRA_SCATTER && op->u.gather.base >= 0)
				buf_printf(b, " into %%%d", op->u.gather.base);
			break;
		case TRA_ENDLOOP:
			buf_puts(b, "\n");
			continue;
		}
		buf_puts(b, " : ");
		reltype_print(b, &op->type);
		buf_puts(b, "\n");
	}
}

/* ---- IA ---- */

/* One line describing an op, without its inputs. */
static void ia_op_print(Buf *b, const IaPlan *p, const IaOp *op)
{
	const TraProg *t = p->tra;
	buf_puts(b, ia_op_name(op->kind));
	switch (op->kind) {
	case IA_READ:
		buf_printf(b, " %s", t->tensors.v[op->u.read.tensor].name);
		break;
	case IA_BCAST:
		break;
	case IA_SHUFFLE:
		break;
	case IA_JOIN:
	case IA_CONV:
		buf_puts(b, " on ");
		keys_print(b, op->u.join.on.nmatch, op->u.join.on.lkey);
		buf_puts(b, "=");
		keys_print(b, op->u.join.on.nmatch, op->u.join.on.rkey);
		if (op->u.join.ngroup >= 0) {
			buf_printf(b, " %s group ", agg_name(op->u.join.kernel->red));
			keys_print(b, op->u.join.ngroup, op->u.join.group);
		}
		buf_puts(b, " [");
		kernel_print(b, op->u.join.kernel);
		buf_puts(b, "]");
		if (op->u.join.mask.on) {
			/* the elements it computes: its mask's stored ones, as planned */
			buf_puts(b, " sampled at ");
			keys_print(b, op->u.join.mask.nkey, op->u.join.mask.key);
			buf_printf(b, ": %.3g of %.3g elements", rel_stored(&op->type), rel_floats(&op->type));
		}
		break;
	case IA_TWOPHASE: {
		const TpSched *ts = op->u.join.sched;
		buf_puts(b, " on ");
		keys_print(b, op->u.join.on.nmatch, op->u.join.on.lkey);
		buf_puts(b, "=");
		keys_print(b, op->u.join.on.nmatch, op->u.join.on.rkey);
		buf_printf(b, " %s group ", agg_name(op->u.join.kernel->red));
		keys_print(b, op->u.join.ngroup, op->u.join.group);
		buf_puts(b, " [");
		kernel_print(b, op->u.join.kernel);
		buf_printf(b, "] %" PRId64 " join groups, %" PRId64 " aggregation groups, %s plan", ts->njoin, ts->nagg,
		           ts->variant);
		break;
	}
	case IA_AGG:
		buf_printf(b, " %s group ", agg_name(op->u.agg.agg));
		keys_print(b, op->u.agg.ngroup, op->u.agg.group);
		break;
	case IA_MAP:
		if (op->u.map.kernel) {
			buf_puts(b, " [");
			kernel_print(b, op->u.map.kernel);
			buf_puts(b, "]");
		} else {
			bool dup = false;
			for (int i = 0; i < op->u.map.nkey; i++)
				dup |= op->u.map.keymap[i] < 0;
			buf_puts(b, dup ? " replicate <" : " rekey <");
			for (int i = 0; i < op->u.map.nkey; i++)
				if (op->u.map.keymap[i] < 0)
					buf_printf(b, "%s*", i ? "," : "");
				else
					buf_printf(b, "%s%d", i ? "," : "", op->u.map.keymap[i]);
			buf_puts(b, ">");
		}
		break;
	case IA_FILTER:
		buf_puts(b, " ");
		pred_print(b, &op->u.filter.pred);
		break;
	case IA_WRITE:
		buf_printf(b, " %s", t->tensors.v[op->u.write.tensor].name);
		break;
	case IA_INIT:
	case IA_LOAD:
		buf_printf(b, " %s", t->tensors.v[op->u.init.tensor].name);
		break;
	case IA_RANGE:
		break;
	case IA_GATHER:
	case IA_LOOKUP:
	case IA_SCATTER:
		buf_printf(b, " dim %d", op->u.gather.dim);
		if (op->kind == IA_SCATTER && op->u.gather.scale != 1)
			buf_printf(b, " times %.17g", op->u.gather.scale);
		if (op->kind == IA_SCATTER && op->u.gather.base >= 0) {
			/* where the rows add: the base itself when it dies here */
			IaLoops life;
			ia_loops(p, &life);
			InPlace *ip = ia_in_place(p, &life);
			InPlace how = ip[op - p->ops.v];
			buf_puts(b, how == IP_PARAM ? " into base in place (the param's)" : how == IP_OWNED ? " into base in place"
			                                                                    : " into a copy of base");
			free(ip);
			ia_loops_free(&life);
		}
		break;
	case IA_COUNTER:
		buf_printf(b, " depth %d", op->u.counter.depth);
		break;
	case IA_HALO:           /* its bytes are exact, the plan's: printed with costs off too */
		for (int d = 0; d < op->type.nkey; d++)
			if (op->type.hext[d] > 0)
				buf_printf(b, " dim %d -%" PRId64 "+%" PRId64, d, op->type.hlo[d], op->type.hhi[d]);
		buf_printf(b, " sends %.0f bytes", op->bytes_sent);
		break;
	case IA_SLICE:
		buf_printf(b, " dim %d%s at %" PRId64 "%s", op->u.slice.dim, op->u.slice.scatter ? " scatter" : "",
		           op->u.slice.shift, op->u.slice.off >= 0 ? " + counter" : "");
		if (op->u.slice.stride != 1)
			buf_printf(b, " stride %" PRId64, op->u.slice.stride);
		break;
	case IA_STORE:
	case IA_PRINT:
		buf_printf(b, " %s", t->tensors.v[op->u.store.tensor].name);
		break;
	case IA_LOOP:
		buf_printf(b, " %" PRId64 " times", op->u.loop.count);
		return;
	case IA_ENDLOOP:
		return;
	}
	buf_puts(b, "  ");
	place_print(b, &op->place);
	buf_puts(b, " ");
	reltype_print(b, &op->type);
}

static void ia_op_costs(Buf *b, const IaOp *op)
{
	if (ia_op_moves(op->kind))
		buf_printf(b, "  moves %.3g floats", op->floats_moved);
	if (op->flops > 0)
		buf_printf(b, "  %.3g flops", op->flops);
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
		if (p->nranks > 1)
			buf_puts(b, "; the run places its blocks by their stored elements (from a csr or csc .npz)");
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

/* Per statement: the index of its last op (-1 if it has none). */
static int *stmt_last_ops(const IaPlan *p)
{
	int *last = xcalloc(p->tra->stmts.n + 1, sizeof *last);
	for (int s = 0; s < p->tra->stmts.n; s++)
		last[s] = -1;
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].stmt >= 0)
			last[p->ops.v[i].stmt] = i;
	return last;
}

/* The plan in program order: statements as trees of their ops, inputs and
 * outputs as they come, repeat blocks indented. */
static void print_plan(Buf *b, const IaPlan *p, bool costs, bool alts)
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
	int *last = stmt_last_ops(p);
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
	print_plan(b, p, costs, false);
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

static void json_explain(Buf *b, const IaPlan *p)
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
		json_str_field(b, ", ", "placement", pl.s);
		json_str_field(b, ", ", "type", ty.s);
		buf_printf(b, ", \"tuples\": %" PRId64 ", \"statement\": %d, \"text\": ", rel_ntuples(&op->type), op->stmt);
		json_str(b, desc.s);
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

/* ---- DOT ----
 *
 * The plan as a picture (trac --explain=dot | dot -Tsvg): data flows down,
 * from the inputs at the top to the outputs at the bottom.  Each statement
 * is a box headed by its source text and the strategy chosen for it; repeat
 * blocks are dashed boxes around theirs.  A node is an op that computes on
 * each rank, filled by where its tuples live (the legend says which colour
 * is which placement).  Data moves are edges, not nodes: a broadcast is a
 * thick red edge, a shuffle a thick dashed blue one, each labelled with the
 * floats it moves; a thin grey edge moves nothing.  A move read by several
 * ops (or by none) stays a small node so its floats are drawn once.
 */

enum { DOT_NUM = 24 };  /* room for dot_num's and dot_seconds' text */

/* Text escaped for a label.  Labels are Graphviz's HTML-like ones, which
 * it parses as XML: & < > " become entities, a control character a
 * space, and a byte that is not well-formed UTF-8 U+FFFD (overlong forms,
 * surrogates and code points past U+10FFFF included), as Graphviz refuses
 * each of them raw. */
static void dot_escape(Buf *b, const char *s)
{
	static const char *const entity[128] = {
		['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;",
	};
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		unsigned c = p[0];
		int n = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
		int k = 1;
		while (k < n && (p[k] & 0xC0) == 0x80)
			k++;
		if (k < n || (c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
		    (c == 0xF4 && p[1] >= 0x90))
			n = 0;
		if (n == 0)
			buf_puts(b, "&#xFFFD;");
		else if (c < 0x20 || c == 0x7F)
			buf_puts(b, " ");
		else if (c < 0x80 && entity[c])
			buf_puts(b, entity[c]);
		else
			buf_printf(b, "%.*s", n, (const char *)p);
		p += n ? n : 1;
	}
}

/* The one way text enters a label: printf's output, escaped, between the
 * markup open and close ("<b>" and "</b>", or "" and "").  All the text
 * below (numbers, placements, types, what an op does, statements, names)
 * is plain until it goes through here; only the legend is constant. */
static __attribute__((format(printf, 4, 5))) void dot_text(Buf *b, const char *open, const char *close,
                                                           const char *fmt, ...)
{
	Buf t = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&t, fmt, ap);
	va_end(ap);
	buf_puts(b, open);
	dot_escape(b, t.s ? t.s : "");
	buf_puts(b, close);
	buf_free(&t);
}

/* 16000000 -> "16M", 0.0949 -> "0.0949": three digits and an SI prefix,
 * in s */
static const char *dot_num(char s[DOT_NUM], double v)
{
	static const char prefix[] = " kMGTPE";
	int i = 0;
	while (v >= 999.5 && i < 6) {
		v /= 1000;
		i++;
	}
	snprintf(s, DOT_NUM, "%.3g%s", v, i ? (char[]){prefix[i], 0} : "");
	return s;
}

/* 2e-7 -> "< 1 µs", 0.0123 -> "12.3 ms", in s */
static const char *dot_seconds(char s[DOT_NUM], double t)
{
	if (t < 1e-6)
		snprintf(s, DOT_NUM, "< 1 µs");
	else if (t < 1e-3)
		snprintf(s, DOT_NUM, "%.3g µs", t * 1e6);
	else if (t < 1)
		snprintf(s, DOT_NUM, "%.3g ms", t * 1e3);
	else
		snprintf(s, DOT_NUM, "%.3g s", t);
	return s;
}

/* How many ranks an op's tuples are spread over: all of them, unless the
 * partitioning key dims have fewer values than there are ranks. */
static int64_t dot_sites(const IaOp *op, int nranks)
{
	if (op->place.kind != PL_PART)
		return nranks;
	int64_t n = 1;
	for (int i = 0; i < op->place.ndims && n < nranks; i++)
		n *= rel_frontier(&op->type, op->place.dims[i]);
	return n < nranks ? n : nranks;
}

/* Fill colours by placement; the legend repeats them. */
static const char *dot_fill(const IaOp *op, int nranks)
{
	switch (op->place.kind) {
	case PL_ALL: return "#fdd9b5";          /* every rank holds every tuple */
	case PL_PART: return dot_sites(op, nranks) > 1 ? "#d3ecd0" : "#e4e4e4";
	case PL_PARTIAL: return "#fff1a8";      /* partial sums, still to combine */
	}
	return "white";
}

static void dot_place(Buf *b, const IaOp *op, int nranks)
{
	const Place *pl = &op->place;
	switch (pl->kind) {
	case PL_ALL:
		buf_printf(b, "replicated on all %d ranks", nranks);
		return;
	case PL_PART:
		if (!pl->ndims) {
			buf_puts(b, "on one rank");
			return;
		}
		buf_printf(b, "partitioned on key%s ", pl->ndims > 1 ? "s" : "");
		buf_ints(b, pl->ndims, pl->dims, ",");
		int64_t sites = dot_sites(op, nranks);
		if (sites < nranks)
			buf_printf(b, ": on %" PRId64 " of %d ranks", sites, nranks);
		else
			buf_printf(b, " over %d ranks", nranks);
		return;
	case PL_PARTIAL:
		buf_puts(b, "partial sums on every rank");
		return;
	}
}

/* "8×4 tuples of 500×500 f32" */
static void dot_tuples(Buf *b, const RelType *t)
{
	if (t->nkey == 0 && t->nchunk == 0) {
		buf_printf(b, "a scalar, %s", dtype_name(t->dtype));
		return;
	}
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? "×" : "", rel_frontier(t, d));
	buf_printf(b, " tuple%s of ", rel_ntuples(t) == 1 ? "" : "s");
	if (t->nchunk == 0)
		buf_puts(b, "1");
	for (int c = 0; c < t->nchunk; c++)
		buf_printf(b, "%s%" PRId64, c ? "×" : "", t->block[t->chunkdim[c]]);
	buf_printf(b, " %s", dtype_name(t->dtype));
}

/* What an op does, in one line (its placement and type come below it). */
static void dot_what(Buf *k, const IaPlan *p, const IaOp *op)
{
	const TraProg *t = p->tra;
	buf_printf(k, "#%d %s", (int)(op - p->ops.v), ia_op_name(op->kind));
	switch (op->kind) {
	case IA_READ:
		buf_printf(k, " %s", t->tensors.v[op->u.read.tensor].name);
		break;
	case IA_BCAST:
	case IA_SHUFFLE:
		break;
	case IA_JOIN:
	case IA_CONV:
	case IA_TWOPHASE:       /* a two-phase op always aggregates (ngroup >= 0) */
		buf_puts(k, " on ");
		keys_print(k, op->u.join.on.nmatch, op->u.join.on.lkey);
		buf_puts(k, "=");
		keys_print(k, op->u.join.on.nmatch, op->u.join.on.rkey);
		if (op->u.join.ngroup >= 0) {
			buf_printf(k, ", %s into ", agg_name(op->u.join.kernel->red));
			keys_print(k, op->u.join.ngroup, op->u.join.group);
		}
		buf_puts(k, ": ");
		kernel_print(k, op->u.join.kernel);
		if (op->kind == IA_TWOPHASE)
			buf_printf(k, ", %" PRId64 " join groups by a two-phase schedule", op->u.join.sched->njoin);
		if (op->u.join.mask.on)
			buf_puts(k, ", sampled at its mask's elements");
		break;
	case IA_AGG:
		buf_printf(k, " %s into ", agg_name(op->u.agg.agg));
		keys_print(k, op->u.agg.ngroup, op->u.agg.group);
		break;
	case IA_MAP:
		if (op->u.map.kernel) {
			buf_puts(k, ": ");
			kernel_print(k, op->u.map.kernel);
		} else {
			buf_puts(k, " rekey ");
			keys_print(k, op->u.map.nkey, op->u.map.keymap);
		}
		break;
	case IA_FILTER:
		buf_puts(k, " ");
		pred_print(k, &op->u.filter.pred);
		break;
	case IA_WRITE:
		buf_printf(k, " %s", t->tensors.v[op->u.write.tensor].name);
		break;
	case IA_INIT:
	case IA_LOAD:
		buf_printf(k, " %s", t->tensors.v[op->u.init.tensor].name);
		break;
	case IA_RANGE:
		buf_printf(k, " 0..%" PRId64, op->type.extent[0] - 1);
		break;
	case IA_GATHER:
	case IA_LOOKUP:
		buf_printf(k, " rows of dim %d by the index's values", op->u.gather.dim);
		break;
	case IA_SCATTER:
		buf_printf(k, " rows%s added into dim %d at the index's values%s",
		           op->u.gather.scale != 1 ? " scaled" : "", op->u.gather.dim,
		           op->u.gather.base >= 0 ? ", into a base" : "");
		break;
	case IA_COUNTER:
		buf_printf(k, " depth %d", op->u.counter.depth);
		break;
	case IA_HALO:
		for (int d = 0; d < op->type.nkey; d++)
			if (op->type.hext[d] > 0)
				buf_printf(k, " dim %d, %" PRId64 " rows before and %" PRId64 " after", d, op->type.hlo[d],
				           op->type.hhi[d]);
		break;
	case IA_SLICE:
		buf_printf(k, " dim %d, %" PRId64 " of %" PRId64, op->u.slice.dim, op->type.extent[op->u.slice.dim],
		           p->ops.v[op->u.slice.in].type.extent[op->u.slice.dim]);
		break;
	case IA_STORE:
	case IA_PRINT:
		buf_printf(k, " %s", t->tensors.v[op->u.store.tensor].name);
		break;
	case IA_LOOP:
		buf_printf(k, " %" PRId64 " times", op->u.loop.count);
		break;
	case IA_ENDLOOP:
		break;
	}
}

typedef struct Dot {
	const IaPlan *p;
	Buf *b;
	bool costs;
	int *users;             /* per op: how many ops read it */
	double maxmoved;        /* the largest move, for edge widths */
} Dot;

/* The moves drawn as moves: a broadcast or a shuffle.  Ops that
 * communicate inside themselves (two-phase schedules, lookups, scatters)
 * are boxes. */
static bool dot_move(IaOpKind k)
{
	return k == IA_BCAST || k == IA_SHUFFLE;
}

/* A move with exactly one reader is drawn as an edge into that reader,
 * unless it moves the result of another move (then it stays a node). */
static bool dot_is_edge(const Dot *d, int i)
{
	const IaOp *op = &d->p->ops.v[i];
	int in[MAXIN];
	return dot_move(op->kind) && d->users[i] == 1 && ia_inputs(op, in) == 1 &&
	       !dot_move(d->p->ops.v[in[0]].kind);
}

/* Whether op i is a node of the picture. */
static bool dot_drawn(const Dot *d, int i)
{
	IaOpKind k = d->p->ops.v[i].kind;
	return k != IA_LOOP && k != IA_ENDLOOP && !dot_is_edge(d, i);
}

/* The statement of the node an edge from op i starts at. */
static int dot_source_stmt(const Dot *d, int i)
{
	if (dot_is_edge(d, i)) {
		int in[MAXIN];
		ia_inputs(&d->p->ops.v[i], in);
		i = in[0];
	}
	return d->p->ops.v[i].stmt;
}

static void dot_node(Dot *d, int i, int depth)
{
	const IaOp *op = &d->p->ops.v[i];
	Buf *b = d->b;
	char n[DOT_NUM], sec[DOT_NUM];
	if (!dot_drawn(d, i))
		return;
	buf_printf(b, "%*sop%d [", 2 * depth, "", i);
	if (dot_move(op->kind)) {
		bool bc = op->kind == IA_BCAST;
		buf_printf(b, "shape=ellipse, style=\"filled%s\", color=\"%s\", fillcolor=white, penwidth=2, label=<",
		           bc ? "" : ",dashed", bc ? "#c0392b" : "#2471a3");
		dot_text(b, "", "", "%s", bc ? "broadcast" : "shuffle");
		if (d->costs)
			dot_text(b, "<br/>", "", "%s floats", dot_num(n, op->floats_moved));
		buf_puts(b, ">];\n");
		return;
	}
	bool tensor = op->kind == IA_READ || op->kind == IA_WRITE || op->kind == IA_INIT ||
	              op->kind == IA_LOAD || op->kind == IA_STORE || op->kind == IA_PRINT;
	buf_printf(b, "shape=%s, fillcolor=\"%s\", label=<", tensor ? "note" : "box", dot_fill(op, d->p->nranks));
	Buf l = {0};
	dot_what(&l, d->p, op);
	dot_text(b, "<b>", "</b><br/>", "%s", l.s);
	buf_free(&l);
	dot_place(&l, op, d->p->nranks);
	buf_puts(&l, "\n");
	dot_tuples(&l, &op->type);
	if (d->costs && op->flops > 0)
		buf_printf(&l, "\n%s flops, %s", dot_num(n, op->flops), dot_seconds(sec, op->seconds));
	for (char *s = l.s, *nl; s; s = nl ? nl + 1 : NULL) {
		nl = strchr(s, '\n');
		if (nl)
			*nl = 0;
		dot_text(b, "<font point-size=\"9\">", nl ? "</font><br/>" : "</font>", "%s", s);
	}
	buf_free(&l);
	buf_puts(b, ">];\n");
}

/* The edge from op `from` (or the producer behind a move drawn as an
 * edge) into op `to`. */
static void dot_edge(Dot *d, int from, int to)
{
	const IaOp *mv = &d->p->ops.v[from];
	Buf *b = d->b;
	if (!dot_is_edge(d, from)) {
		buf_printf(b, "  op%d -> op%d", from, to);
		if (dot_move(mv->kind))
			buf_printf(b, " [color=\"%s\", penwidth=2%s]", mv->kind == IA_BCAST ? "#c0392b" : "#2471a3",
			           mv->kind == IA_BCAST ? "" : ", style=dashed");
		buf_puts(b, ";\n");
		return;
	}
	int in[MAXIN];
	ia_inputs(mv, in);
	bool bc = mv->kind == IA_BCAST;
	/* width 2 to 6 by the log of the floats moved, against the largest move */
	double w = 2;
	if (d->maxmoved > 1 && mv->floats_moved > 1)
		w = 2 + 4 * log10(mv->floats_moved) / log10(d->maxmoved);
	buf_printf(b, "  op%d -> op%d [color=\"%s\", penwidth=%.1f%s, fontcolor=\"%s\", label=<",
	           in[0], to, bc ? "#c0392b" : "#2471a3", d->costs ? w : 3.0, bc ? "" : ", style=dashed",
	           bc ? "#c0392b" : "#2471a3");
	Buf pl = {0};
	char n[DOT_NUM];
	if (!bc)
		place_print(&pl, &mv->place);
	dot_text(b, "", "", "%s%s", bc ? "broadcast" : "shuffle to ", bc ? "" : pl.s);
	if (d->costs)
		dot_text(b, "<br/>", "", "%s floats", dot_num(n, mv->floats_moved));
	dot_text(b, "", ">];\n", " (#%d)", from);
	buf_free(&pl);
}

/* A statement's box.  Its heading is a node, not the cluster's label, so
 * that edges coming in are routed around it instead of across it; invisible
 * edges keep it above the statement's first ops. */
static void dot_stmt(Dot *d, int s, int depth)
{
	const IaPlan *p = d->p;
	Buf *b = d->b;
	int line, col;
	loc_linecol(p->tra->stmts.v[s].loc, &line, &col);
	buf_printf(b, "%*ssubgraph cluster_s%d {\n", 2 * depth, "", s + 1);
	buf_printf(b, "%*s  style=\"rounded,filled\"; fillcolor=\"#f6f6f6\"; color=\"#999999\"; label=\"\";\n",
	           2 * depth, "");
	buf_printf(b, "%*s  s%d [shape=plaintext, style=\"\", label=<", 2 * depth, "", s + 1);
	dot_text(b, "<b>", "</b><br/>", "%s", p->tra->stmts.v[s].text);
	dot_text(b, "<font point-size=\"10\">", "", "line %d, strategy ", line);
	dot_text(b, "<b>", "</b>", "%s", strategy_name(p->strategy.v[s]));
	if (d->costs) {
		double moved = 0, flops = 0;
		for (int i = 0; i < p->ops.n; i++)
			if (p->ops.v[i].stmt == s) {
				moved += p->ops.v[i].floats_moved;
				flops += p->ops.v[i].flops;
			}
		char n1[DOT_NUM], n2[DOT_NUM];
		dot_text(b, "", "", ": %s floats moved, %s flops", dot_num(n1, moved), dot_num(n2, flops));
	}
	buf_puts(b, "</font>>];\n");
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].stmt == s)
			dot_node(d, i, depth + 1);
	/* the heading above each op not fed by another op of the statement */
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->stmt != s || !dot_drawn(d, i))
			continue;
		bool top = true;
		int in[MAXIN];
		int k = ia_inputs(op, in);
		for (int j = 0; j < k; j++)
			top &= dot_source_stmt(d, in[j]) != s;
		if (top)
			buf_printf(b, "%*s  s%d -> op%d [style=invis];\n", 2 * depth, "", s + 1, i);
	}
	buf_printf(b, "%*s}\n", 2 * depth, "");
}

/* One node: a table of the fill colours and edge styles, constant DOT (its
 * words hold no & < > ", so they need no dot_text). */
static void dot_legend(Dot *d)
{
	static const struct { const char *fill, *what; } fills[] = {
		{"#d3ecd0", "partitioned over the ranks"},
		{"#fdd9b5", "replicated on every rank"},
		{"#fff1a8", "partial sums on every rank"},
		{"#e4e4e4", "on one rank"},
	};
	Buf *b = d->b;
	buf_puts(b, "  legend [shape=plaintext, style=\"\", margin=0, label=<<table border=\"0\" cellborder=\"0\" "
	            "cellspacing=\"2\" cellpadding=\"2\">\n    <tr><td colspan=\"2\" align=\"left\"><b>legend</b></td></tr>\n");
	for (int i = 0; i < 4; i++)
		buf_printf(b, "    <tr><td bgcolor=\"%s\" border=\"1\" width=\"24\"> </td>"
		           "<td align=\"left\">%s</td></tr>\n", fills[i].fill, fills[i].what);
	buf_puts(b, "    <tr><td><font color=\"#c0392b\"><b>━━▶</b></font></td><td align=\"left\">broadcast: every tuple to every rank</td></tr>\n"
	            "    <tr><td><font color=\"#2471a3\"><b>╍╍▶</b></font></td><td align=\"left\">shuffle: each tuple to the rank its keys name</td></tr>\n"
	            "    <tr><td><font color=\"#888888\">──▶</font></td><td align=\"left\">local: no data moved</td></tr>\n"
	            "  </table>>];\n");
}

static void dot_explain(Buf *b, const IaPlan *p, bool costs)
{
	int n = p->ops.n;
	Dot d = {p, b, costs, xcalloc(n + 1, sizeof(int)), 0};
	for (int i = 0; i < n; i++) {
		int in[MAXIN];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			d.users[in[j]]++;
		if (ia_op_moves(p->ops.v[i].kind) && p->ops.v[i].floats_moved > d.maxmoved)
			d.maxmoved = p->ops.v[i].floats_moved;
	}

	buf_puts(b, "digraph plan {\n"
	            "  graph [rankdir=TB, newrank=true, nodesep=0.3, ranksep=0.5, fontname=\"Helvetica\", fontsize=12,\n"
	            "         labelloc=t, labeljust=l, ");
	dot_text(b, "label=<<b>", "</b>", "trac plan for %d ranks", p->nranks);
	if (costs) {
		char n1[DOT_NUM], n2[DOT_NUM], n3[DOT_NUM], sec[DOT_NUM];
		dot_text(b, "<br/><font point-size=\"10\">", "</font>", "%s floats moved, %s flops, peak %sB per rank, predicted %s",
		         dot_num(n1, p->total_floats_moved), dot_num(n2, p->total_flops), dot_num(n3, p->peak_bytes),
		         dot_seconds(sec, p->predicted_seconds));
	}
	buf_puts(b, ">];\n"
	            "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10, color=\"#555555\",\n"
	            "        margin=\"0.12,0.06\"];\n"
	            "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#888888\", arrowsize=0.7];\n");

	/* nodes in program order: statements as boxes, repeat blocks around
	 * them; invisible edges keep each statement below the one before it,
	 * and what the program does after a statement below that statement */
	bool *done = xcalloc(p->tra->stmts.n + 1, sizeof(bool));
	int *dlast = stmt_last_ops(p);
	Buf top = {0}, order = {0};
	int depth = 1, loops = 0, anchor = -1;
	for (int i = 0; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (op->kind == IA_LOOP) {
			buf_printf(b, "%*ssubgraph cluster_loop%d {\n", 2 * depth, "", ++loops);
			buf_printf(b, "%*s  style=\"rounded,dashed\"; color=\"#555555\"; penwidth=1.5;\n", 2 * depth, "");
			buf_printf(b, "%*s  ", 2 * depth, "");
			dot_text(b, "label=<<b>", "</b>>;\n", "repeat %" PRId64 " times", op->u.loop.count);
			depth++;
		} else if (op->kind == IA_ENDLOOP) {
			depth--;
			buf_printf(b, "%*s}\n", 2 * depth, "");
		} else if (op->stmt < 0) {
			dot_node(&d, i, depth);
			if (anchor < 0 && depth == 1 && (op->kind == IA_READ || op->kind == IA_INIT))
				buf_printf(&top, " op%d;", i);       /* the inputs on top */
			else if (anchor >= 0 && dot_drawn(&d, i))
				buf_printf(&order, "  op%d -> op%d [style=invis];\n", anchor, i);
		} else if (!done[op->stmt] && i == dlast[op->stmt]) {
			done[op->stmt] = true;
			dot_stmt(&d, op->stmt, depth);
			if (anchor >= 0)
				buf_printf(&order, "  op%d -> s%d [style=invis];\n", anchor, op->stmt + 1);
			for (int j = i; j < n; j++)
				if (p->ops.v[j].stmt == op->stmt && dot_drawn(&d, j))
					anchor = j;
		}
	}
	if (top.s)
		buf_printf(b, "  { rank=min;%s }\n", top.s);
	if (order.s)
		buf_puts(b, order.s);
	buf_free(&top);
	buf_free(&order);
	free(done);
	free(dlast);

	/* edges: into every op but the moves drawn as edges themselves */
	for (int i = 0; i < n; i++) {
		if (dot_is_edge(&d, i))
			continue;
		int in[MAXIN];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			dot_edge(&d, in[j], i);
	}
	dot_legend(&d);
	buf_puts(b, "}\n");
	free(d.users);
}

void ia_explain(Buf *b, const IaPlan *p, ExplainFormat f, bool costs)
{
	switch (f) {
	case EXPLAIN_TEXT:
		print_plan(b, p, costs, false);
		return;
	case EXPLAIN_ALL:
		print_plan(b, p, costs, true);
		return;
	case EXPLAIN_JSON:
		json_explain(b, p);
		return;
	case EXPLAIN_DOT:
		dot_explain(b, p, costs);
		return;
	}
}
