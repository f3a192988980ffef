/*
 * print.c: printers of TRA programs and IA ops, the plan as a picture
 * (--explain=dot), and --explain's choice of format (explain.c writes the
 * text and JSON).
 *
 * Everything printed is deterministic: no pointers, no hash order, numbers
 * in %.3g.
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
void ia_op_print(Buf *b, const IaPlan *p, const IaOp *op)
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
	int *dlast = ia_stmt_last_ops(p);
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
		ia_explain_text(b, p, costs, false);
		return;
	case EXPLAIN_ALL:
		ia_explain_text(b, p, costs, true);
		return;
	case EXPLAIN_JSON:
		ia_explain_json(b, p);
		return;
	case EXPLAIN_DOT:
		dot_explain(b, p, costs);
		return;
	}
}
