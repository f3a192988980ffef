/*
 * main.c: trac.  The command line (cmdline.c), the pipeline from source
 * to IA plan (pipeline.c, shared with the fuzzer), then the plan's use:
 *
 *   ia_explain             --explain: print the plan and stop
 *   cg_emit, cg_compile    IA -> C -> MPI executable
 *
 * The pipeline plans each rank count of -P from one front end.  Between
 * its passes it calls back here: after lowering, -M prints a make rule
 * naming every file read and stops, -MD writes that rule to a file and
 * goes on (as gcc does); before contraction order, --block, --place and
 * --strategy become pins; -v prints each phase's wall-clock time.  The
 * output (-o) is tried before any work: its folder takes a temporary file
 * (cg_output_temp), which the output is written to and renamed from at the
 * end; no temporary file outlives trac.  Exit status: 0 success, 1 an
 * error in the program or an output that cannot be written, 2 a usage
 * error, 4 an internal error (tr_bug).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "frontend/driver.h"

/* "dir/model.tra" -> "dir/model" (or + suffix). */
static char *strip_ext(const char *path, const char *suffix)
{
	size_t n = strlen(path);
	if (n > 4 && !strcmp(path + n - 4, ".tra"))
		n -= 4;
	char *s = xmalloc(n + strlen(suffix) + 1);
	memcpy(s, path, n);
	strcpy(s + n, suffix);
	return s;
}

static char *program_name(const char *path)
{
	const char *base = strrchr(path, '/');
	return strip_ext(base ? base + 1 : path, "");
}

static bool write_file(const char *path, const char *text)
{
	char *tmp = xprintf("%s.tmp%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
		fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(errno));
		unlink(tmp);
		free(tmp);
		return false;
	}
	free(tmp);
	return true;
}

/* -M, -MD: the make rule "output: source imports..." on stdout or in a file,
 * as gcc writes it.  -M prints (to -MF FILE, or -o FILE, or stdout) and
 * stops, so its -o names the rule's file, not the output; -MD writes to -MF
 * FILE, else to the output's name with its suffix replaced by .d. */
static bool write_deps(const Cmdline *o, const FeOptions *fe)
{
	const char *out = o->deps.print ? NULL : o->output;
	char *target = out ? xstrdup(out) : strip_ext(o->input, o->emit_c ? ".c" : "");
	char *quoted = fe_make_quote(target);
	const char *const *targets = o->deps.targets.v;
	int ntargets = o->deps.targets.n;
	if (!ntargets) {
		targets = (const char *const *)&quoted;
		ntargets = 1;
	}
	Buf b = {0};
	fe_deps_rule(&b, targets, ntargets, fe, o->deps.phony, o->deps.no_stdlib);

	char *file = o->deps.file ? xstrdup(o->deps.file) : NULL;
	if (!file && o->deps.print && o->output)
		file = xstrdup(o->output);
	if (!file && !o->deps.print) {
		/* bin/model.x -> bin/model.d, bin/model -> bin/model.d */
		const char *base = strrchr(target, '/');
		base = base ? base + 1 : target;
		const char *dot = strrchr(base, '.');
		int n = dot && dot != base ? (int)(dot - target) : (int)strlen(target);
		file = xprintf("%.*s.d", n, target);
	}
	bool ok = true;
	if (!file || !strcmp(file, "-"))
		fputs(b.s, stdout);
	else
		ok = write_file(file, b.s);
	free(file);
	free(quoted);
	free(target);
	buf_free(&b);
	return ok;
}

/* -v: each phase's wall-clock time, on stderr, as the phase ends. */
typedef struct Clock {
	bool show;
	double start;           /* of the running phase */
} Clock;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void phase_end(Clock *c, const char *phase)
{
	double t = now();
	if (c->show)
		fprintf(stderr, "trac: %-18s %8.1f ms\n", phase, (t - c->start) * 1e3);
	c->start = t;
}

/* The pipeline's hooks: after lowering (-M, -MD) and before planning (pins). */
typedef struct Driver {
	Cmdline *cmd;
	Clock clock;
} Driver;

static bool lowered(void *ctx, const TraProg *p, int *status)
{
	(void)p;
	const Driver *d = ctx;
	const Cmdline *c = d->cmd;
	if ((c->deps.print || c->deps.write) && !write_deps(c, &c->pipe.fe)) {
		*status = 1;
		return false;
	}
	*status = 0;
	return !c->deps.print;
}

static void phase(void *ctx, const char *name)
{
	phase_end(&((Driver *)ctx)->clock, name);
}

static void pins(void *ctx, const TraProg *p, OptOptions *o)
{
	cmdline_resolve_pins(((Driver *)ctx)->cmd, p, o);
}

/* --explain of an IST loop under a plan for n ranks: the split, the
 * subnet's extents, the predicted floats, then the subnet's own plan. */
static void explain_ist(const IaPlan *plan, const IaPlan *body, int loop, ExplainFormat f, bool costs)
{
	const IstLoop *l = &plan->tra->ist.v[loop];
	int n = plan->nranks, line, col;
	loc_linecol(l->loc, &line, &col);
	int64_t most = (l->count + n - 1) / n;
	printf("\nIST loop %d (line %d) on %d rank%s: %" PRId64 " iterations dealt round-robin, at most %" PRId64
	       " a rank; rounds of %" PRId64 " local steps\n  split:", loop, line, n, n == 1 ? "" : "s", l->count,
	       most, l->every);
	for (int z = 0; z < l->nsplit; z++)
		printf("%s %s = %" PRId64 " -> %" PRId64 " neurons a subnet", z ? "," : "", l->split[z], l->extent[z],
		       l->extent[z] / n);
	printf("\n  subnet params:");
	bool any = false;
	for (int t = 0; t < body->tra->tensors.n; t++) {
		const Tensor *ten = &body->tra->tensors.v[t];
		bool loaded = false;
		for (int i = 0; i < body->ops.n && !loaded; i++)
			loaded = body->ops.v[i].kind == IA_LOAD && body->ops.v[i].u.init.tensor == t;
		if (ten->role != TENSOR_PARAM || !loaded)
			continue;
		printf("%s %s[", any ? "," : "", ten->name);
		for (int d = 0; d < ten->rank; d++)
			printf("%s%" PRId64, d ? ", " : "", ten->shape[d]);
		printf("]");
		any = true;
	}
	IstTraffic tr = ist_traffic(body->tra, l, n);
	printf("\n  predicted floats per round, all ranks: %.0f by the thesis's formula (a coordinator sending every "
	       "slice), %.0f exchanged here (x (1 - 1/n): slices already on their next owner stay), %.0f averaging "
	       "unsplit params; per step %.6g; the final gather %.0f\n", tr.thesis, tr.exchange, tr.average,
	       (tr.exchange + tr.average) / (double)l->every, tr.gather);
	printf("  the subnet's plan (one rank, no communication):\n");
	Buf b = {0};
	ia_explain(&b, body, f, costs);
	for (const char *c = b.s ? b.s : ""; *c;) {
		const char *nl = strchr(c, '\n');
		int len = nl ? (int)(nl - c) : (int)strlen(c);
		printf("    %.*s\n", len, c);
		c += len + (nl != NULL);
	}
	buf_free(&b);
}

/* --explain of each plan: one count as ever; several, the text of each in
 * turn, or in JSON the first count's object (the contract's fields, as for
 * one count) with "plans": each count's object, the first's too. */
static void explain(const IaPlan **plans, int n, ExplainFormat f, bool costs)
{
	if (f == EXPLAIN_JSON && n > 1) {
		Buf first = {0};
		ia_explain(&first, plans[0], f, costs);
		while (first.len && (first.s[first.len - 1] == '\n' || first.s[first.len - 1] == '}'))
			first.s[--first.len] = 0;
		fputs(first.s, stdout);
		fputs(",\n  \"plans\": [\n", stdout);
		buf_free(&first);
	}
	for (int k = 0; k < n; k++) {
		Buf b = {0};
		ia_explain(&b, plans[k], f, costs);
		if (f == EXPLAIN_JSON && n > 1) {
			while (b.len && b.s[b.len - 1] == '\n')
				b.s[--b.len] = 0;
			fputs(k ? ",\n" : "", stdout);
		} else if (k)
			fputs("\n", stdout);
		fputs(b.s ? b.s : "", stdout);
		buf_free(&b);
	}
	if (f == EXPLAIN_JSON && n > 1)
		fputs("\n  ]\n}\n", stdout);
}

int main(int argc, char **argv)
{
	static Cmdline cmd;
	cmdline_parse(argc, argv, &cmd);
	diag_color = isatty(2) && !getenv("NO_COLOR");
	Driver d = {&cmd, {cmd.verbose, now()}};
	if (cmd.verbose) {
		/* the source's folder: "dir" for dir/x.tra, "/" for /x.tra, "." for x.tra */
		const char *slash = strrchr(cmd.input, '/');
		int n = !slash || slash == cmd.input ? 1 : (int)(slash - cmd.input);
		fprintf(stderr, "trac %s\ntrac: imports from: %.*s", PACKAGE_VERSION, n, slash ? cmd.input : ".");
		for (int i = 0; i < cmd.incdirs.n; i++)
			fprintf(stderr, " %s", cmd.incdirs.v[i]);
		fprintf(stderr, " %s\n", fe_stdlib_dir());
		fprintf(stderr, "trac: machine model: %s (%s)\n", cmd.pipe.opt.machine->source, cmd.machine_how);
	}

	/* -o's file (or the default): its folder takes a temporary file now,
	 * before any work; the output goes there and is renamed at the end */
	char *out = NULL, *tmp = NULL;
	if (!cmd.explain && !cmd.pipe.syntax_only && !cmd.deps.print) {
		out = cmd.output ? xstrdup(cmd.output) : strip_ext(cmd.input, cmd.emit_c ? ".c" : "");
		if (!cmd.emit_c && !strcmp(out, cmd.input))
			cmdline_usage_error("the executable would overwrite the source '%s'; name it with -o", cmd.input);
		if (!(tmp = cg_output_temp(out)))
			return 1;
	}

	const char *err;
	int file = fe_load(cmd.input, &err);
	if (file < 0) {
		fprintf(stderr, "trac: error: cannot read '%s': %s\n", cmd.input, err);
		return 1;
	}
	Pipeline *pl = &cmd.pipe;
	pl->hooks = (PipelineHooks){&d, lowered, pins, phase};
	int status = trac_pipeline(pl, file, stdout);
	if (status >= 0)
		return status;
	int nplans = pl->nplans, nist = pl->prog->ist.n;
	const IaPlan **plans = (const IaPlan **)pl->plans, **ist = pl->ist;

	if (cmd.explain) {
		explain(plans, nplans, cmd.explain_format, cmd.pipe.costs);
		for (int k = 0; k < nplans && cmd.explain_format != EXPLAIN_JSON && cmd.explain_format != EXPLAIN_DOT; k++)
			for (int i = 0; i < nist; i++)
				explain_ist(plans[k], ist[k * nist + i], i, cmd.explain_format, cmd.pipe.costs);
		return 0;
	}

	/* IA -> C -> executable */
	char *name = program_name(cmd.input);
	CgOptions cg = {name, cmd.input, cmd.seed, ist, nist};
	Buf c = {0};
	cg_emit(&c, plans, nplans, &cg);
	phase_end(&d.clock, "emit C");
	if (cmd.emit_c) {
		FILE *f = fopen(tmp, "w");
		if (!f || fputs(c.s, f) < 0 || fclose(f) != 0) {
			fprintf(stderr, "trac: error: cannot write '%s': %s\n", out, strerror(errno));
			return 1;
		}
		return cg_output_commit(tmp, out) ? 0 : 1;
	}
	bool ok = cg_compile(c.s, tmp, cmd.verbose) && cg_output_commit(tmp, out);
	phase_end(&d.clock, "C compiler");
	return ok ? 0 : 1;
}
