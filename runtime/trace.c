/*
 * trace.c: --trace=FILE, a timeline of the run: when each rank computes,
 * sends, receives, waits, reads and writes.
 *
 * The file is JSON in Chrome's Trace Event Format, which Perfetto
 * (ui.perfetto.dev) and chrome://tracing open:
 *
 *   {"displayTimeUnit":"ms","otherData":{...},"traceEvents":[
 *   {"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
 *   {"name":"read A","cat":"op","ph":"X","ts":12.345,"dur":678.901,"pid":0,"tid":0,"args":{...}},
 *   ...]}
 *
 * One process (pid) per rank, one lane (tid 0) in it, and under a memory
 * budget a second (tid 1) for the spill file's I/O thread: its reads and
 * writes, recorded when the main thread takes them back, overlapping the
 * ops as they did (a wait for one is a wait span on lane 0).  Every span is a
 * complete event ("ph":"X", ts and dur in microseconds since the common
 * start), and spans nest: a repeat block holds its iterations, an
 * iteration its ops, an op (an IA op, named by its kind and label) the
 * sends, receives, waits, reads and writes it made.  A nonblocking send or
 * receive is the span of posting it; the transfer itself shows as the wait
 * that follows.
 *
 * Clocks: CLOCK_MONOTONIC in nanoseconds, from a zero each rank takes as
 * it leaves one MPI_Barrier at the end of trt_init, so the ranks' lanes
 * line up to the barrier's skew (microseconds on one node).
 *
 * Each rank keeps its spans in memory, at most TRAC_TRACE_EVENTS (default
 * DEFAULT_MAX) of them; later ones are dropped and counted, and the file
 * says so (an instant event on the rank's lane and otherData).  Spans are
 * recorded as they end, so a dropped op may leave its children behind.  At
 * trt_finish each rank sorts its spans by start, formats them in pieces of
 * PIECE bytes and sends them to rank 0, which writes them, rank by rank,
 * to a temporary file beside FILE and renames it; a failure is one line
 * and exit status 1.  trt_init tries the folder first, so that a bad path
 * fails before the run rather than after it.
 *
 * Without --trace nothing here runs: each span costs a test of rt.trace at
 * either end (rt_span_begin in rt.h, and the caller's `if (t0)`).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rt.h"

#define DEFAULT_MAX 1000000     /* spans kept per rank: 56 MB at most */
#define PIECE ((size_t)1 << 20) /* bytes of JSON per message to rank 0 */
#define MAX_NEST 32             /* repeat blocks nest at most so deep (HACKING.md) */

enum { TAG_TRACE = 7401 };

/* What a span was; the kinds of RtSpan, then the op and loop spans that
 * this file records itself. */
enum { SPAN_OP = RT_SPAN_SPILL_READ + 1, SPAN_LOOP, SPAN_ITER };

typedef struct Event {
	int64_t t0, t1;                 /* rt_trace_clock's nanoseconds */
	double bytes;                   /* < 0: none */
	int64_t n;                      /* op: its index; iteration: its number
	                                   (0-based); loop: its count; read,
	                                   write, init: the tensor */
	int64_t of;                     /* iteration: its block's count */
	const char *what;               /* see RtSpan; NULL: none */
	int kind;                       /* RtSpan, SPAN_OP, ... */
	int peer;                       /* send, recv: the other rank, else -1 */
	int lane;                       /* tid: 0 the ops', 1 the spill I/O thread's */
} Event;

static struct {
	const char *path;               /* --trace's FILE, NULL without */
	int64_t zero;                   /* the common start */
	Event *ev;
	int64_t n, cap, max;            /* kept, allocated, most kept */
	int64_t dropped, first_drop;    /* spans dropped, when the first ended */
	int op;                         /* the op open, -1 none */
	int64_t op_t0;
	int io_lane;                    /* a span was recorded on the I/O thread's lane */
	int depth;                      /* repeat blocks open */
	int64_t loop_t0[MAX_NEST], iter_t0[MAX_NEST], iter[MAX_NEST], count[MAX_NEST];
} tr = {.op = -1};

/* ---- the command line ---- */

int rt_trace_arg(int argc, char **argv, int *a, char *msg, size_t len)
{
	const char *arg = argv[*a];

	*msg = 0;
	if (strncmp(arg, "--trace", 7) || (arg[7] && arg[7] != '='))
		return 0;
	const char *v = arg[7] == '=' ? arg + 8 : *a + 1 < argc ? argv[++*a] : NULL;
	if (!v || !*v) {
		snprintf(msg, len, "%s: --trace needs a file", rt_progname());
		return 1;
	}
	tr.path = v;
	return 1;
}

void rt_trace_help(void)
{
	printf("  --trace FILE            write a timeline of every rank's ops, messages and waits to\n"
	       "                          FILE (JSON; open it in ui.perfetto.dev or chrome://tracing)\n");
}

/* ---- recording ---- */

int64_t rt_trace_clock(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + 1;        /* never 0 */
}

/* A new span from t0 to t1, or NULL when the buffer is full. */
static Event *event(int64_t t0, int64_t t1)
{
	if (tr.n == tr.cap) {
		int64_t cap = tr.cap ? 2 * tr.cap : 4096;
		if (cap > tr.max)
			cap = tr.max;
		Event *v = cap > tr.cap ? realloc(tr.ev, sizeof *v * (size_t)cap) : NULL;
		if (!v) {
			/* full, or no memory for more: keep what there is */
			if (tr.dropped++ == 0)
				tr.first_drop = t1;
			return NULL;
		}
		tr.ev = v;
		tr.cap = cap;
	}
	Event *e = &tr.ev[tr.n++];
	memset(e, 0, sizeof *e);
	e->t0 = t0;
	e->t1 = t1;
	e->bytes = -1;
	e->peer = -1;
	return e;
}

void rt_trace_span(RtSpan kind, int64_t t0, int peer, double bytes, int64_t n, const char *what)
{
	Event *e = event(t0, rt_trace_clock());

	if (!e)
		return;
	e->kind = (int)kind;
	e->peer = peer;
	e->bytes = bytes;
	e->n = n;
	e->what = what;
}

void rt_trace_io(int write, int64_t t0, int64_t t1, double bytes)
{
	Event *e = event(t0, t1);

	if (!e)
		return;
	e->kind = write ? RT_SPAN_SPILL_WRITE : RT_SPAN_SPILL_READ;
	e->bytes = bytes;
	e->lane = 1;
	tr.io_lane = 1;
}

double rt_trace_bytes(const TrtRel *r)
{
	double b = 0;

	for (int64_t i = 0; r && i < r->n; i++)
		b += (double)r->chunks[i]->nbytes;
	return b;
}

void rt_trace_op_begin(int op)
{
	if (op < 0 || op >= rt.prog->nops || tr.op >= 0)
		rt_bug("trt_op_begin(%d) with %d ops, op %d open", op, rt.prog->nops, tr.op);
	tr.op = op;
	tr.op_t0 = rt_trace_clock();
}

void rt_trace_op_end(int op)
{
	if (op != tr.op)
		rt_bug("trt_op_end(%d) but op %d is open", op, tr.op);
	Event *e = event(tr.op_t0, rt_trace_clock());
	if (e) {
		e->kind = SPAN_OP;
		e->n = op;
	}
	tr.op = -1;
}

/* Repeat blocks deeper than MAX_NEST (none are) go unrecorded. */
void rt_trace_loop_begin(int64_t count)
{
	int d = tr.depth++;
	if (d >= MAX_NEST)
		return;
	tr.loop_t0[d] = rt_trace_clock();
	tr.iter_t0[d] = 0;
	tr.count[d] = count;
}

static void end_iteration(int d, int64_t now)
{
	if (!tr.iter_t0[d])
		return;
	Event *e = event(tr.iter_t0[d], now);
	if (e) {
		e->kind = SPAN_ITER;
		e->n = tr.iter[d];
		e->of = tr.count[d];
	}
	tr.iter_t0[d] = 0;
}

void rt_trace_loop_iter(int64_t i)
{
	int d = tr.depth - 1;
	if (d < 0 || d >= MAX_NEST)
		return;
	int64_t now = rt_trace_clock();
	end_iteration(d, now);
	tr.iter_t0[d] = now;
	tr.iter[d] = i;
}

void rt_trace_loop_end(void)
{
	int d = --tr.depth;
	if (d < 0 || d >= MAX_NEST) {
		if (tr.depth < 0)
			tr.depth = 0;
		return;
	}
	int64_t now = rt_trace_clock();
	end_iteration(d, now);
	Event *e = event(tr.loop_t0[d], now);
	if (e) {
		e->kind = SPAN_LOOP;
		e->n = tr.count[d];
	}
}

/* ---- the start ---- */

void rt_trace_init(void)
{
	char msg[1024];
	const char *err = NULL;

	if (!tr.path)
		return;
	const char *env = getenv("TRAC_TRACE_EVENTS");
	tr.max = DEFAULT_MAX;
	if (env && *env) {
		char *end;
		errno = 0;
		long long v = strtoll(env, &end, 10);
		if (*end || errno || v < 1) {
			snprintf(msg, sizeof msg, "%s: TRAC_TRACE_EVENTS needs a count of events (1 or more), "
			         "found '%s'", rt_progname(), env);
			err = msg;
		}
		tr.max = v;
	}
	/* the file's folder takes a temporary file: try it now, not after the run */
	int e = !err && rt.rank == 0 ? rt_probe_write(tr.path) : 0;
	if (e) {
		snprintf(msg, sizeof msg, "%s: --trace %s: %s", rt_progname(), tr.path, strerror(e));
		err = msg;
	}
	rt_agree(err);
	MPI_Barrier(MPI_COMM_WORLD);
	tr.zero = rt_trace_clock();
	rt.trace = 1;
}

/* ---- the file ---- */

/* JSON text, sent to rank 0 (or written by it) a piece at a time. */
typedef struct Text {
	char *p;
	size_t n, cap;
	void (*flush)(struct Text *);
	FILE *f;                        /* rank 0: the file, or NULL */
	int err;                        /* rank 0: the first write's errno, or 0 */
} Text;

static void reserve(Text *t, size_t more)
{
	if (t->n + more + 1 <= t->cap)
		return;
	while (t->n + more + 1 > t->cap)
		t->cap = t->cap ? 2 * t->cap : 256;
	t->p = rt_realloc(t->p, t->cap);
}

static void put(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(Text *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
	va_end(ap);
	if (k < 0)
		rt_bug("trace: vsnprintf failed");
	if ((size_t)k >= t->cap - t->n) {
		reserve(t, (size_t)k);
		va_start(ap, fmt);
		vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
		va_end(ap);
	}
	t->n += (size_t)k;
}

/* The length of the UTF-8 sequence at s, or 0 if it is not valid there. */
static int utf8_len(const unsigned char *s)
{
	int n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3 :
	        s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : 0;
	for (int i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;               /* overlong, a surrogate, beyond U+10FFFF */
	return n;
}

/* s inside a JSON string; a byte that is not UTF-8 (a file name may have
 * one) becomes U+FFFD. */
static void put_chars(Text *t, const char *s)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");

	while (*u) {
		int n = 1;
		reserve(t, 6);
		if (*u == '"' || *u == '\\') {
			t->p[t->n++] = '\\';
			t->p[t->n++] = (char)*u;
		} else if (*u < 0x20 || *u == 0x7f) {
			t->n += (size_t)snprintf(t->p + t->n, 7, "\\u%04x", *u);
		} else if (*u < 0x80) {
			t->p[t->n++] = (char)*u;
		} else if ((n = utf8_len(u)) > 0) {
			memcpy(t->p + t->n, u, (size_t)n);
			t->n += (size_t)n;
		} else {
			memcpy(t->p + t->n, "\\ufffd", 6);
			t->n += 6;
			n = 1;
		}
		u += n;
	}
}

/* The formatting of spans is the bulk of writing the file: its pieces go
 * in with memcpy and a conversion of integers of its own, not printf. */
static void lit(Text *t, const char *s)
{
	size_t n = strlen(s);
	reserve(t, n);
	memcpy(t->p + t->n, s, n);
	t->n += n;
}

static void num(Text *t, int64_t v)
{
	char d[24];
	int k = 0;
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	do
		d[k++] = (char)('0' + u % 10);
	while (u /= 10);
	reserve(t, (size_t)k + 1);
	if (v < 0)
		t->p[t->n++] = '-';
	while (k)
		t->p[t->n++] = d[--k];
}

static void put_str(Text *t, const char *s)
{
	lit(t, "\"");
	put_chars(t, s);
	lit(t, "\"");
}

/* A number JSON can hold. */
static void put_num(Text *t, double v)
{
	if (isfinite(v))
		put(t, "%.9g", v);
	else
		lit(t, "null");
}

/* Nanoseconds as microseconds with three decimals, exactly. */
static void put_us(Text *t, int64_t ns)
{
	if (ns < 0)
		ns = 0;
	num(t, ns / 1000);
	reserve(t, 4);
	t->p[t->n++] = '.';
	t->p[t->n++] = (char)('0' + ns / 100 % 10);
	t->p[t->n++] = (char)('0' + ns / 10 % 10);
	t->p[t->n++] = (char)('0' + ns % 10);
}

static const char *span_name(int kind)
{
	switch (kind) {
	case RT_SPAN_SEND: return "send";
	case RT_SPAN_RECV: return "recv";
	case RT_SPAN_WAIT: return "wait";
	case RT_SPAN_READ: return "read";
	case RT_SPAN_WRITE: return "write";
	case RT_SPAN_INIT: return "init";
	case RT_SPAN_CHECKPOINT: return "checkpoint";
	case RT_SPAN_SPILL_WRITE: return "spill write";
	case RT_SPAN_SPILL_READ: return "spill read";
	case SPAN_OP: return "op";
	case SPAN_LOOP: return "repeat";
	case SPAN_ITER: return "iteration";
	}
	return "?";
}

static const char *span_cat(int kind)
{
	switch (kind) {
	case RT_SPAN_SEND:
	case RT_SPAN_RECV:
	case RT_SPAN_WAIT: return "comm";
	case RT_SPAN_READ:
	case RT_SPAN_WRITE:
	case RT_SPAN_CHECKPOINT: return "io";
	case RT_SPAN_INIT: return "init";
	case RT_SPAN_SPILL_WRITE:
	case RT_SPAN_SPILL_READ: return "spill";
	case SPAN_OP: return "op";
	case SPAN_LOOP:
	case SPAN_ITER: return "loop";
	}
	return "?";
}

static const char *tensor_name(int64_t n)
{
	return n >= 0 && n < rt.prog->ntensors ? rt.prog->tensors[n].name : "?";
}

/* An op's name and arguments as JSON, made once per op: an op inside a
 * repeat block has a span per iteration. */
typedef struct OpJson {
	char *name;                     /* "\"name\",\"cat\":\"op\"" */
	char *args;
} OpJson;

static OpJson *op_json;

static char *text_str(Text *t)
{
	reserve(t, 1);
	t->p[t->n] = 0;
	return t->p;
}

static const OpJson *op_text(int op)
{
	if (!op_json) {
		op_json = rt_alloc(sizeof *op_json * (size_t)(rt.prog->nops + 1));
		memset(op_json, 0, sizeof *op_json * (size_t)(rt.prog->nops + 1));
	}
	OpJson *j = &op_json[op];
	if (j->name)
		return j;
	/* "read A", "join: C[i, j] = ...": the kind, and the label when it
	 * does not say it */
	const TrtOpInfo *o = &rt.prog->ops[op];
	const char *kind = o->kind ? o->kind : "?", *label = o->label ? o->label : "";
	size_t kl = strlen(kind);
	Text n = {0}, a = {0};
	lit(&n, "\"");
	if (!*label || strncmp(label, kind, kl) || (label[kl] != ' ' && label[kl])) {
		put_chars(&n, kind);
		lit(&n, *label ? ": " : "");
	}
	put_chars(&n, label);
	lit(&n, "\",\"cat\":\"op\"");
	lit(&a, "\"op\":");
	num(&a, op);
	lit(&a, ",\"kind\":");
	put_str(&a, kind);
	lit(&a, ",\"pred_s\":");
	put_num(&a, o->pred_seconds);
	lit(&a, ",\"pred_bytes_all_ranks\":");
	put_num(&a, o->pred_bytes);
	lit(&a, ",\"flops_all_ranks\":");
	put_num(&a, o->flops);
	j->name = text_str(&n);
	j->args = text_str(&a);
	return j;
}

static void put_event(Text *t, const Event *e)
{
	const OpJson *op = e->kind == SPAN_OP ? op_text((int)e->n) : NULL;

	lit(t, ",\n{\"name\":");
	if (op) {
		lit(t, op->name);
	} else {
		put_str(t, span_name(e->kind));
		lit(t, ",\"cat\":\"");
		lit(t, span_cat(e->kind));
		lit(t, "\"");
	}
	lit(t, ",\"ph\":\"X\",\"ts\":");
	put_us(t, e->t0 - tr.zero);
	lit(t, ",\"dur\":");
	put_us(t, e->t1 - e->t0);
	lit(t, ",\"pid\":");
	num(t, rt.rank);
	lit(t, e->lane ? ",\"tid\":1,\"args\":{" : ",\"tid\":0,\"args\":{");
	switch (e->kind) {
	case SPAN_OP:
		lit(t, op->args);
		break;
	case SPAN_LOOP:
		lit(t, "\"count\":");
		num(t, e->n);
		break;
	case SPAN_ITER:
		lit(t, "\"iteration\":");
		num(t, e->n + 1);
		lit(t, ",\"of\":");
		num(t, e->of);
		break;
	case RT_SPAN_SEND:
	case RT_SPAN_RECV:
		lit(t, "\"bytes\":");
		num(t, (int64_t)e->bytes);
		lit(t, ",\"peer\":");
		num(t, e->peer);
		if (e->what) {
			lit(t, ",\"what\":");
			put_str(t, e->what);
		}
		break;
	case RT_SPAN_WAIT:
		lit(t, "\"for\":");
		put_str(t, e->what);
		break;
	case RT_SPAN_READ:
	case RT_SPAN_WRITE:
	case RT_SPAN_INIT:
		lit(t, "\"tensor\":");
		put_str(t, tensor_name(e->n));
		if (e->kind != RT_SPAN_INIT) {
			lit(t, ",\"file\":");
			put_str(t, e->n >= 0 && e->n < rt.prog->ntensors ? rt.paths[e->n] : NULL);
		}
		if (e->bytes >= 0) {
			lit(t, ",\"bytes\":");
			num(t, (int64_t)e->bytes);
		}
		break;
	case RT_SPAN_CHECKPOINT:
		lit(t, "\"file\":");
		put_str(t, e->what);
		if (e->bytes >= 0) {
			lit(t, ",\"bytes\":");
			num(t, (int64_t)e->bytes);
		}
		break;
	case RT_SPAN_SPILL_WRITE:
	case RT_SPAN_SPILL_READ:
		lit(t, "\"bytes\":");
		num(t, (int64_t)e->bytes);
		break;
	}
	lit(t, "}}");
}

/* By start; of two that start together the longer (the parent) first, and
 * of two alike the later recorded (parents are recorded after children). */
static int by_start(const void *a, const void *b)
{
	const Event *x = a, *y = b;
	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	if (x->t1 != y->t1)
		return x->t1 > y->t1 ? -1 : 1;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* This rank's part of the file: its lane's names, then its spans (each
 * after a comma: the file's first event is rank 0's name). */
static void put_rank(Text *t)
{
	put(t, "%s\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
	    rt.rank ? "," : "", rt.rank, rt.rank);
	put(t, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
	    rt.rank, rt.rank);
	put(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"ops\"}}",
	    rt.rank);
	if (tr.io_lane)
		put(t, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,\"args\":{\"name\":"
		    "\"spill I/O\"}}", rt.rank);
	if (tr.dropped) {
		put(t, ",\n{\"name\":\"trace full: %lld later spans dropped (TRAC_TRACE_EVENTS=%lld)\","
		    "\"cat\":\"trace\",\"ph\":\"i\",\"s\":\"p\",\"ts\":", (long long)tr.dropped, (long long)tr.max);
		put_us(t, tr.first_drop - tr.zero);
		put(t, ",\"pid\":%d,\"tid\":0,\"args\":{\"dropped\":%lld}}", rt.rank, (long long)tr.dropped);
	}
	for (int64_t i = 0; i < tr.n; i++) {
		put_event(t, &tr.ev[i]);
		if (t->n >= PIECE)
			t->flush(t);
	}
	t->flush(t);
}

static void write_piece(Text *t)
{
	if (t->f && !t->err && t->n && fwrite(t->p, 1, t->n, t->f) != t->n)
		t->err = errno ? errno : EIO;
	t->n = 0;
}

/* A piece to rank 0: its length, then its bytes; length 0 ends the rank's. */
static void send_piece(Text *t)
{
	int64_t n = (int64_t)t->n;
	MPI_Send(&n, 1, MPI_INT64_T, 0, TAG_TRACE, MPI_COMM_WORLD);
	if (n)
		rt_send_bytes(t->p, t->n, 0, TAG_TRACE);
	t->n = 0;
}

/* Rank 0: rank r's pieces, up to its empty one, into the file. */
static void take_rank(Text *t, int r)
{
	for (;;) {
		int64_t n;
		MPI_Recv(&n, 1, MPI_INT64_T, r, TAG_TRACE, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (n == 0)
			return;
		reserve(t, (size_t)n);
		rt_recv_bytes(t->p, (size_t)n, r, TAG_TRACE);
		t->n = (size_t)n;
		write_piece(t);
	}
}

void rt_trace_write(void)
{
	char msg[1024];
	const char *err = NULL;

	if (!tr.path || !rt.trace)
		return;
	rt.trace = 0;           /* what follows is not traced */
	qsort(tr.ev, (size_t)tr.n, sizeof *tr.ev, by_start);
	int64_t mine[2] = {tr.n, tr.dropped}, all[2];
	MPI_Reduce(mine, all, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);

	Text t = {0};
	reserve(&t, PIECE);
	if (rt.rank != 0) {
		t.flush = send_piece;
		put_rank(&t);
		send_piece(&t);         /* the empty piece: the end */
	} else {
		char *tmp = NULL;
		int fd = rt_make_temp(tr.path, &tmp);
		t.f = fd >= 0 ? fdopen(fd, "w") : NULL;
		t.err = t.f ? 0 : errno;
		if (fd >= 0 && !t.f) {
			close(fd);
			rt_remove_temp(tmp);
		}
		t.flush = write_piece;
		put(&t, "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"program\":");
		put_str(&t, rt.prog->name);
		put(&t, ",\"ranks\":%d,\"clock\":\"CLOCK_MONOTONIC, from a common start after an "
		    "MPI_Barrier\",\"events\":%lld,\"events_dropped\":%lld,\"events_per_rank_max\":%lld},"
		    "\n\"traceEvents\":[", rt.nranks, (long long)all[0], (long long)all[1],
		    (long long)tr.max);
		put_rank(&t);
		for (int r = 1; r < rt.nranks; r++)
			take_rank(&t, r);
		put(&t, "\n]}\n");
		t.flush(&t);
		int e = t.err;
		if (t.f) {
			if (fflush(t.f) != 0 && !e)
				e = errno;
			if (fsync(fileno(t.f)) < 0 && errno != EINVAL && !e)   /* EINVAL: a device */
				e = errno;
			if (fclose(t.f) != 0 && !e)
				e = errno;
			if (!e && rt_rename_durable(tmp, tr.path) < 0)
				e = errno;
			if (e)
				rt_remove_temp(tmp);
		}
		if (e) {
			snprintf(msg, sizeof msg, "%s: --trace %s: %s", rt_progname(), tr.path, strerror(e));
			err = msg;
		}
		free(tmp);
	}
	free(t.p);
	for (int i = 0; op_json && i < rt.prog->nops; i++) {
		free(op_json[i].name);
		free(op_json[i].args);
	}
	free(op_json);
	op_json = NULL;
	free(tr.ev);
	tr.ev = NULL;
	tr.n = tr.cap = 0;
	rt_agree(err);
}
