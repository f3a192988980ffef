/*
 * print.c: printers of TRA programs and IA plans, and --explain.
 *
 * Everything printed is deterministic: no pointers, no hash order, numbers
 * in %.3g.  The text form is an indented tree per statement, the way
 * PostgreSQL's EXPLAIN and SQLite's EXPLAIN QUERY PLAN read; with costs off
 * (golden tests) it prints only what the plan is, not what it costs.
 */
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static void keys_print(Buf *b, int n, const int *k)
{
	buf_puts(b, "<");
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s%d", i ? "," : "", k[i]);
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
			buf_printf(b, " %%%d %%%d on ", op->u.join.left, op->u.join.right);
			keys_print(b, op->u.join.nmatch, op->u.join.lkey);
			buf_puts(b, "=");
			keys_print(b, op->u.join.nmatch, op->u.join.rkey);
			buf_puts(b, " ");
			kernel_print(b, op->u.join.kernel);
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
		buf_puts(b, " on ");
		keys_print(b, op->u.join.nmatch, op->u.join.lkey);
		buf_puts(b, "=");
		keys_print(b, op->u.join.nmatch, op->u.join.rkey);
		if (op->u.join.ngroup >= 0) {
			buf_printf(b, " %s group ", agg_name(op->u.join.kernel->red));
			keys_print(b, op->u.join.ngroup, op->u.join.group);
		}
		buf_puts(b, " [");
		kernel_print(b, op->u.join.kernel);
		buf_puts(b, "]");
		break;
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
			buf_puts(b, " rekey ");
			keys_print(b, op->u.map.nkey, op->u.map.keymap);
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

typedef struct Tree {
	const IaPlan *p;
	int *users;             /* per op: how many ops read it */
	bool *shown;
	Buf *b;
	bool costs;
} Tree;

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
	int in[2];
	int n = ia_inputs(op, in);
	for (int j = 0; j < n; j++)
		tree_print(t, in[j], depth + 1, stmt);
}

static void header_print(Buf *b, const IaPlan *p, bool costs)
{
	buf_printf(b, "plan for %d ranks", p->nranks);
	if (costs)
		buf_printf(b, ": %.3g floats moved, %.3g flops, peak %.3g bytes per rank, predicted %.3g s",
		           p->total_floats_moved, p->total_flops, p->peak_bytes, p->predicted_seconds);
	buf_puts(b, "\n");
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
	buf_printf(b, "\n%*sstatement %d (line %d): %s\n", 4 * depth, "", s + 1, line, p->tra->stmts.v[s].text);
	buf_printf(b, "%*s  strategy %s", 4 * depth, "", strategy_name(p->strategy.v[s]));
	if (t->costs) {
		double moved = 0, flops = 0;
		for (int i = 0; i < n; i++)
			if (p->ops.v[i].stmt == s) {
				moved += p->ops.v[i].floats_moved;
				flops += p->ops.v[i].flops;
			}
		buf_printf(b, ", %.3g floats moved, %.3g flops", moved, flops);
	}
	buf_puts(b, "\n");
	for (int i = n - 1; i >= 0; i--)
		if (p->ops.v[i].stmt == s && t->users[i] == 0)
			tree_print(t, i, depth, s);
}

/* The plan in program order: statements as trees of their ops, inputs and
 * outputs as they come, repeat blocks indented. */
void ia_print(Buf *b, const IaPlan *p, bool costs)
{
	int n = p->ops.n;
	Tree t = {p, xcalloc(n + 1, sizeof(int)), xcalloc(n + 1, sizeof(bool)), b, costs};
	bool *done = xcalloc(p->tra->stmts.n + 1, sizeof(bool));
	for (int i = 0; i < n; i++) {
		int in[2];
		int k = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < k; j++)
			if (p->ops.v[in[j]].stmt == p->ops.v[i].stmt)
				t.users[in[j]]++;
	}
	header_print(b, p, costs);
	int depth = 0;
	bool blank = false;
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
		} else if (!done[op->stmt]) {
			done[op->stmt] = true;
			stmt_print(&t, op->stmt, i, depth);
			blank = false;
		}
	}
	free(done);
	free(t.users);
	free(t.shown);
}

/* ---- JSON ---- */

static void json_str(Buf *b, const char *s)
{
	buf_puts(b, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_printf(b, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			buf_printf(b, "\\u%04x", *s);
		else
			buf_printf(b, "%c", *s);
	}
	buf_puts(b, "\"");
}

static void json_num(Buf *b, double v)
{
	buf_printf(b, "%.6g", v);
}

static void json_explain(Buf *b, const IaPlan *p)
{
	buf_printf(b, "{\n  \"ranks\": %d,\n  \"total_floats_moved\": ", p->nranks);
	json_num(b, p->total_floats_moved);
	buf_puts(b, ",\n  \"total_bytes_sent\": ");
	json_num(b, p->total_bytes_sent);
	buf_puts(b, ",\n  \"total_flops\": ");
	json_num(b, p->total_flops);
	buf_puts(b, ",\n  \"predicted_seconds\": ");
	json_num(b, p->predicted_seconds);
	buf_puts(b, ",\n  \"peak_bytes_per_rank\": ");
	json_num(b, p->peak_bytes);
	buf_puts(b, ",\n  \"statements\": [");
	for (int s = 0; s < p->tra->stmts.n; s++) {
		double moved = 0, flops = 0;
		int line, col;
		for (int i = 0; i < p->ops.n; i++)
			if (p->ops.v[i].stmt == s) {
				moved += p->ops.v[i].floats_moved;
				flops += p->ops.v[i].flops;
			}
		loc_linecol(p->tra->stmts.v[s].loc, &line, &col);
		buf_printf(b, "%s\n    { \"line\": %d, \"text\": ", s ? "," : "", line);
		json_str(b, p->tra->stmts.v[s].text);
		buf_puts(b, ", \"strategy\": ");
		json_str(b, strategy_name(p->strategy.v[s]));
		buf_puts(b, ", \"floats_moved\": ");
		json_num(b, moved);
		buf_puts(b, ", \"flops\": ");
		json_num(b, flops);
		buf_puts(b, " }");
	}
	buf_puts(b, "\n  ],\n  \"ops\": [");
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		Buf desc = {0}, pl = {0}, ty = {0};
		int in[2];
		int n = ia_inputs(op, in);
		ia_op_print(&desc, p, op);
		place_print(&pl, &op->place);
		reltype_print(&ty, &op->type);
		buf_printf(b, "%s\n    { \"id\": %d, \"kind\": \"%s\", \"inputs\": [", i ? "," : "", i, ia_op_name(op->kind));
		for (int j = 0; j < n; j++)
			buf_printf(b, "%s%d", j ? ", " : "", in[j]);
		buf_puts(b, "], \"floats_moved\": ");
		json_num(b, op->floats_moved);
		buf_puts(b, ", \"bytes_sent\": ");
		json_num(b, op->bytes_sent);
		buf_puts(b, ", \"flops\": ");
		json_num(b, op->flops);
		buf_puts(b, ", \"placement\": ");
		json_str(b, pl.s);
		buf_puts(b, ", \"type\": ");
		json_str(b, ty.s);
		buf_printf(b, ", \"tuples\": %" PRId64 ", \"statement\": %d, \"text\": ", rel_ntuples(&op->type), op->stmt);
		json_str(b, desc.s);
		buf_puts(b, " }");
		buf_free(&desc);
		buf_free(&pl);
		buf_free(&ty);
	}
	buf_puts(b, "\n  ]\n}\n");
}

/* ---- DOT ---- */

static void dot_str(Buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			buf_printf(b, "\\%c", *s);
		else if (*s == '\n')
			buf_puts(b, "\\n");
		else
			buf_printf(b, "%c", *s);
	}
}

static void dot_explain(Buf *b, const IaPlan *p, bool costs)
{
	buf_puts(b, "digraph plan {\n  rankdir=BT;\n  node [shape=box, fontname=\"Helvetica\", fontsize=10];\n"
	            "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	buf_printf(b, "  label=\"trac plan for %d ranks", p->nranks);
	if (costs)
		buf_printf(b, ": %.3g floats moved, predicted %.3g s", p->total_floats_moved, p->predicted_seconds);
	buf_puts(b, "\";\n");
	for (int s = -1; s < p->tra->stmts.n; s++) {
		buf_printf(b, "  subgraph cluster_%d {\n    style=rounded; color=gray;\n    label=\"", s + 1);
		if (s >= 0) {
			Buf l = {0};
			buf_printf(&l, "%s\nstrategy: %s", p->tra->stmts.v[s].text, strategy_name(p->strategy.v[s]));
			dot_str(b, l.s);
			buf_free(&l);
		} else {
			buf_puts(b, "inputs and outputs");
		}
		buf_puts(b, "\";\n");
		for (int i = 0; i < p->ops.n; i++) {
			const IaOp *op = &p->ops.v[i];
			if (op->stmt != s)
				continue;
			Buf l = {0};
			ia_op_print(&l, p, op);
			if (costs)
				ia_op_costs(&l, op);
			buf_printf(b, "    op%d [label=\"#%d ", i, i);
			dot_str(b, l.s);
			buf_printf(b, "\"%s];\n", ia_op_moves(op->kind) ? ", style=filled, fillcolor=\"#ffe0b0\"" :
			           op->kind == IA_READ || op->kind == IA_WRITE ? ", style=filled, fillcolor=\"#d8e8ff\"" : "");
			buf_free(&l);
		}
		buf_puts(b, "  }\n");
	}
	for (int i = 0; i < p->ops.n; i++) {
		int in[2];
		int n = ia_inputs(&p->ops.v[i], in);
		for (int j = 0; j < n; j++) {
			buf_printf(b, "  op%d -> op%d", in[j], i);
			if (costs && ia_op_moves(p->ops.v[i].kind))
				buf_printf(b, " [label=\"%.3g floats\", penwidth=2]", p->ops.v[i].floats_moved);
			buf_puts(b, ";\n");
		}
	}
	buf_puts(b, "}\n");
}

void ia_explain(Buf *b, const IaPlan *p, ExplainFormat f, bool costs)
{
	switch (f) {
	case EXPLAIN_TEXT:
		ia_print(b, p, costs);
		return;
	case EXPLAIN_JSON:
		json_explain(b, p);
		return;
	case EXPLAIN_DOT:
		dot_explain(b, p, costs);
		return;
	}
}
