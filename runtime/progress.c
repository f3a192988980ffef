/*
 * progress.c: what a run shows as it goes: the values the program prints
 * (trt_print), the repeat blocks it is in (trt_loop_*), a progress line
 * on a terminal, and --log's CSV file.
 *
 * Print.  Rank 0 prints "name = value" for a scalar, a tensor's shape and
 * Frobenius norm otherwise, prefixed inside a loop by each block's
 * iteration and the seconds since the outermost block began.  --quiet
 * silences it.
 *
 * The progress line.  When rank 0's stderr is a terminal and the run is
 * not --quiet, rank 0 keeps one line at the bottom of it while a repeat
 * block runs: each block's iteration of its count, the seconds since the
 * outermost block began and an estimate of those left (from the share of
 * the outermost block done, nested blocks counting as fractions of their
 * iteration).  It appears half a second into the block, is redrawn at
 * most four times a second (after a loop iteration or an op), and is
 * cleared when the outermost block ends, before a value is printed and
 * before an error's line.  Under mpirun a rank's stderr is a pipe to
 * mpirun and its stdout mpirun's pseudo-terminal, whatever the user's
 * are, so there the terminals are mpirun's own stderr and stdout (the
 * launcher is the rank's parent on rank 0's node: /proc/PPID/fd).  A
 * printed value goes to stdout, a stream apart from stderr all the way to
 * the terminal, so the line is cleared on stdout, in order with the value,
 * when stdout is the same terminal.
 *
 * --log FILE.  Rank 0 writes every printed value as a CSV row: the
 * iteration (from 1, as print shows it) of each repeat block it is in,
 * outermost first (TrtProgram.depth columns, iter1 ..; empty for the
 * blocks it is not in), the name and the value (a tensor's norm).  The
 * file is written as the run goes, flushed at each iteration of an
 * outermost block, so it can be followed while the run goes on; it is not
 * written through a temporary file, and --quiet leaves it be.
 */
#define _GNU_SOURCE                    /* O_NOCTTY */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

#define MAX_LOOPS 16

static struct {
	int depth;
	int64_t count[MAX_LOOPS], iter[MAX_LOOPS];
	double start;           /* when the outermost block began */
	double done0;           /* its share done then (after --resume, not 0) */
	int started;            /* done0 is known */
} loops;

static struct {
	int on;                 /* rank 0, a terminal, not --quiet */
	int width;              /* the terminal's columns */
	int stdout_too;         /* stdout is the same terminal */
	int shown;              /* a line is on it */
	double last;            /* when it was drawn */
} bar;

static FILE *logfile;

/* ---- the terminal ---- */

/* Whether fd of this process ends on a terminal; if so its device and
 * columns.  Under a launcher, fd is the launcher's (its child's fds are
 * pipes or its own pseudo-terminal), as /proc shows it. */
static int terminal(int fd, dev_t *dev, int *width)
{
	struct winsize ws;
	struct stat st;
	char path[64];
	int own = isatty(fd) && !(fd == 1 && rt_launched()), f = fd;

	if (!own && rt_launched()) {
		snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)getppid(), fd);
		f = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
		if (f >= 0 && !isatty(f)) {
			close(f);
			f = -1;
		}
	} else if (!own) {
		f = -1;
	}
	if (f < 0)
		return 0;
	*dev = fstat(f, &st) == 0 ? st.st_rdev : 0;
	*width = ioctl(f, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
	if (f != fd)
		close(f);
	return 1;
}

static void bar_write(const char *s, size_t n)
{
	while (n) {
		ssize_t k = write(2, s, n);
		if (k <= 0)
			return;
		s += k;
		n -= (size_t)k;
	}
}

void rt_progress_clear(void)
{
	if (!bar.shown)
		return;
	bar_write("\r\033[K", 4);
	bar.shown = 0;
}

/* The outermost block's share done: iterations before this one, and of
 * this one the nested blocks' shares. */
static double share_done(void)
{
	double f = 0, unit = 1;
	for (int l = 0; l < loops.depth && l < MAX_LOOPS; l++) {
		if (loops.count[l] <= 0)
			break;
		unit /= (double)loops.count[l];
		f += (double)loops.iter[l] * unit;
	}
	return f;
}

static void seconds_str(char *s, size_t len, double t)
{
	if (t < 60)
		snprintf(s, len, "%.1f s", t);
	else if (t < 3600)
		snprintf(s, len, "%d:%02d", (int)(t / 60), (int)fmod(t, 60));
	else
		snprintf(s, len, "%d:%02d:%02d", (int)(t / 3600), (int)fmod(t / 60, 60), (int)fmod(t, 60));
}

static void draw(double now)
{
	char line[512], a[32], b[32];
	size_t n = 0;
	double el = now - loops.start, f = share_done();

	n += (size_t)snprintf(line + n, sizeof line - n, "\riter");
	for (int l = 0; l < loops.depth && l < MAX_LOOPS && n < sizeof line; l++)
		n += (size_t)snprintf(line + n, sizeof line - n, "%s %lld/%lld", l ? "," : "",
		                      (long long)loops.iter[l] + 1, (long long)loops.count[l]);
	seconds_str(a, sizeof a, el);
	if (n < sizeof line)
		n += (size_t)snprintf(line + n, sizeof line - n, "  %s", a);
	if (f > loops.done0 && n < sizeof line) {
		seconds_str(b, sizeof b, el * (1 - f) / (f - loops.done0));
		n += (size_t)snprintf(line + n, sizeof line - n, ", about %s left", b);
	}
	if (n >= sizeof line)
		n = sizeof line - 1;
	if ((int)n > bar.width)         /* "\r" and width - 1 columns: no wrap */
		n = (size_t)bar.width;
	memcpy(line + n, "\033[K", 3);
	bar_write(line, n + 3);
	bar.shown = 1;
	bar.last = now;
}

/* Draws the line when it is due. */
static void tick(void)
{
	if (!bar.on || loops.depth == 0)
		return;
	double now = MPI_Wtime();
	if (now - loops.start >= 0.5 && now - bar.last >= 0.25)
		draw(now);
}

void rt_progress_tick(void)
{
	if (bar.on)
		tick();
}

/* ---- --log ---- */

static void log_header(void)
{
	for (int l = 0; l < rt.prog->depth; l++)
		fprintf(logfile, "iter%d,", l + 1);
	fprintf(logfile, "name,value\n");
}

static void log_row(const char *name, double value)
{
	for (int l = 0; l < rt.prog->depth; l++) {
		if (l < loops.depth && l < MAX_LOOPS)
			fprintf(logfile, "%lld", (long long)loops.iter[l] + 1);
		fputc(',', logfile);
	}
	/* names are the program's identifiers: no quoting needed */
	fprintf(logfile, "%s,%.9g\n", name, value);
}

/* ---- life cycle ---- */

void rt_progress_init(void)
{
	dev_t err_dev = 0, out_dev = 0;
	int w = 80, w2;
	char msg[1024];
	const char *err = NULL;

	if (rt.rank == 0) {
		bar.on = !rt.quiet && terminal(2, &err_dev, &w);
		bar.width = w > 1 ? w - 1 : 1;
		bar.stdout_too = bar.on && terminal(1, &out_dev, &w2) && out_dev == err_dev;
	}
	if (rt.rank == 0 && rt.log_path) {
		logfile = fopen(rt.log_path, "w");
		if (logfile) {
			log_header();
		} else {
			snprintf(msg, sizeof msg, "%s: --log %s: %s", rt_progname(), rt.log_path, rt_errstr(errno));
			err = msg;
		}
	}
	rt_agree(err);
}

void rt_progress_end(void)
{
	rt_progress_clear();
	if (logfile && fclose(logfile) != 0)
		fprintf(stderr, "%s: --log %s: %s\n", rt_progname(), rt.log_path, rt_errstr(errno));
	logfile = NULL;
}

/* ---- loops ---- */

void trt_loop_begin(int64_t count)
{
	if (loops.depth == 0) {
		loops.start = MPI_Wtime();
		loops.started = 0;
		bar.last = 0;
	}
	if (loops.depth < MAX_LOOPS) {
		loops.count[loops.depth] = count;
		loops.iter[loops.depth] = 0;
	}
	loops.depth++;
	rt_store_loop_begin(count);
	if (rt.trace)
		rt_trace_loop_begin(count);
}

void trt_loop_iter(int64_t i)
{
	if (loops.depth > 0 && loops.depth <= MAX_LOOPS)
		loops.iter[loops.depth - 1] = i;
	if (loops.depth > 0 && !loops.started) {        /* --resume may start past 0 */
		loops.done0 = share_done();
		loops.started = 1;
	}
	if (loops.depth == 1 && logfile)
		fflush(logfile);
	rt_store_loop_iter(i);
	if (rt.trace)
		rt_trace_loop_iter(i);
	tick();
}

void trt_loop_end(void)
{
	if (loops.depth > 0)
		loops.depth--;
	if (loops.depth == 0) {
		rt_progress_clear();
		if (logfile)
			fflush(logfile);
	}
	rt_store_loop_end();
	if (rt.trace)
		rt_trace_loop_end();
}

/* ---- print ---- */

void trt_print(const TrtRel *r, const char *name)
{
	const TrtType *t = &r->type;
	double sq = 0, first = 0;
	int have = 0;

	/* each element counted once: under TRT_ALL only rank 0's copy */
	if (r->place.kind != TRT_ALL || rt.rank == 0)
		for (int64_t i = 0; i < r->n; i++) {
			size_t mark = rt_pin_mark();
			TrtView v = rt_view(t, r->keys + i * t->nkey, r->chunks[i]);
			int64_t count = 1;
			for (int c = 0; c < v.rank; c++)
				count *= v.n[c];
			if (v.rowptr)
				count = v.nnz;          /* the others are zero */
			for (int64_t e = 0; e < count; e++) {
				double x = rt_elem(t->dtype, v.p, e);
				if (!have) {
					first = x;
					have = 1;
				}
				sq += x * x;
			}
			rt_pin_release(mark);
		}
	/* a scalar lives on one rank: the sum of the (one) value over ranks */
	double mine[2] = {have ? first : 0, sq}, all[2];
	int64_t t0 = rt_span_begin();
	MPI_Reduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
	if (t0)
		rt_trace_span(RT_SPAN_WAIT, t0, -1, -1, 0, "print");
	if (rt.rank != 0)
		return;
	if (logfile)
		log_row(name, t->nkey == 0 ? all[0] : sqrt(all[1]));
	if (rt.quiet)
		return;
	if (bar.shown && bar.stdout_too) {      /* in order with the value */
		fputs("\r\033[K", stdout);
		bar.shown = 0;
	}
	if (loops.depth > 0) {
		for (int l = 0; l < loops.depth && l < MAX_LOOPS; l++)
			printf("%siter %lld/%lld", l ? ", " : "", (long long)loops.iter[l] + 1, (long long)loops.count[l]);
		printf(" (%.2f s): ", MPI_Wtime() - loops.start);
	}
	if (t->nkey == 0) {
		printf("%s = %.9g\n", name, all[0]);
	} else {
		printf("%s: %s (", name, rt_dtype_name(t->dtype));
		for (int d = 0; d < t->nkey; d++)
			printf("%s%lld", d ? ", " : "", (long long)t->extent[d]);
		printf("%s), norm %.9g\n", t->nkey == 1 ? "," : "", sqrt(all[1]));
	}
	fflush(stdout);
}
