/*
 * main.c: the trac driver.  The pipeline, top to bottom:
 *
 *   fe_load, fe_parse      file -> AST
 *   fe_compile             sema + lowering: AST -> TRA
 *   opt_autodiff           grad(loss, W) -> backward TRA
 *   opt_hoist              loop-invariant code out of repeat blocks
 *   opt_block              chunk shapes
 *   opt_plan               TRA -> IA (Table 1), rewritten and costed
 *   ia_explain             --explain: print the plan and stop
 *   cg_emit, cg_compile    IA -> C -> MPI executable
 *
 * After the frontend, -M prints a make rule naming every file read and
 * stops; -MD writes that rule to a file and goes on (as gcc does).  -v
 * prints each phase's wall-clock time.
 * The verifiers run after every pass (they are cheap next to compiling C).
 * Exit status: 0 success, 1 an error in the program, 2 a usage error,
 * 4 an internal error (tr_bug).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "frontend/frontend.h"
#include "optimizer/opt.h"
#include "codegen/codegen.h"

#define MAX_RANKS 1000000       /* the most ranks trac plans for (-P) */

typedef struct Options {
	const char *input;
	const char *output;
	bool emit_c;
	bool syntax_only;
	bool explain;
	ExplainFormat explain_format;
	bool costs;
	const char *dump_after;
	bool verbose;
	uint64_t seed;
	FeOptions fe;
	OptOptions opt;
	struct {
		bool print;             /* -M, -MM: print the rule and stop */
		bool write;             /* -MD, -MMD: write it and go on */
		bool no_stdlib;         /* -MM, -MMD: leave out stdlib files */
		bool phony;             /* -MP */
		const char *file;       /* -MF */
		Vec(const char *) targets;      /* -MT, -MQ (already quoted) */
	} deps;
	Vec(Define) defines;
	Vec(const char *) incdirs;
	Vec(const char *) blockspecs;   /* --block NAME=B..., resolved after sema */
	Vec(const char *) placespecs;   /* --place NAME=PLACEMENT */
	Vec(const char *) stratspecs;   /* --strategy LINE=STRATEGY */
	const char *machine;            /* --machine FILE (or TRAC_MACHINE) */
} Options;

static const char usage[] =
	"usage: trac [options] file.tra\n"
	"\n"
	"Compile a tensor program in Einstein notation to an MPI executable.\n"
	"\n"
	"options:\n"
	"  -o FILE                 write the executable (or C with -S) to FILE\n"
	"                          (default: the source's name without .tra)\n"
	"  -S, --emit-c            write the generated C and stop\n"
	"  -D NAME=VALUE           override a size or const\n"
	"  -I DIR                  add a folder to the import search path\n"
	"  -P N, --ranks N         plan for N ranks (default 4); the program runs on any count\n"
	"  --mem-per-rank SIZE     memory budget per rank for planning (512M, 8G)\n"
	"  -O0, -O1, -O2           -O0: the initial plan of Table 1; -O2 (default): optimized\n"
	"  --explain[=text|json|dot|all]\n"
	"                          print the chosen plan and exit without compiling;\n"
	"                          all: text, and each statement's other strategies\n"
	"                          with their costs and why they lost\n"
	"  --no-costs              with --explain, leave out costs (for golden tests)\n"
	"  --block N               chunk size along every index (default: chosen with\n"
	"                          the plan)\n"
	"  --block NAME=B          tensor NAME (input, param or output) blocked B along\n"
	"  --block NAME=B0xB1x...  every dim, or Bi along dim i (* automatic); a block\n"
	"                          holds for every index its dim meets (repeatable)\n"
	"  --place NAME=PLACEMENT  pin an input's or param's placement: all, part(0),\n"
	"                          part(1,0), ... (default: chosen with the plan)\n"
	"  --strategy LINE=S       force the statement on LINE to strategy S: broadcast,\n"
	"                          broadcast-left, broadcast-right (which operand is\n"
	"                          everywhere), co-partition, replicate, local or\n"
	"                          two-phase (a per-chunk schedule)\n"
	"  --machine FILE          the machine model (bench/calibrate's output; default\n"
	"                          $TRAC_MACHINE, else built in)\n"
	"  --seed N                default random seed baked into the executable\n"
	"  -fsyntax-only           check the program and exit\n"
	"  -M, -MM                 print a make rule: the output depends on the source\n"
	"                          and every file it imports (-MM: but the stdlib); stop\n"
	"  -MD, -MMD               write that rule to the output's name with .d and go on\n"
	"  -MF FILE                write the rule to FILE (- for stdout)\n"
	"  -MT TARGET, -MQ TARGET  name the rule's target (-MQ quotes it for make)\n"
	"  -MP                     add an empty rule for each import, so deleting one\n"
	"                          does not break make\n"
	"  --dump-after=PASS       print the IR after PASS (parse, tra, blocking, ia) and exit\n"
	"  -w                      no warnings\n"
	"  -v                      show the phases, their times and the C compiler's command\n"
	"  --version, --help       print version or this help and exit\n"
	"\n"
	"environment: CC (default mpicc), CFLAGS (default -O3 -march=native), NO_COLOR,\n"
	"TRAC_RUNTIME_DIR.  Exit status: 0 success, 1 error in the program, 2 usage error,\n"
	"4 internal error.  See trac(1) and tra(5).\n";

static _Noreturn void usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void usage_error(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "trac: error: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntrac: try 'trac --help'\n");
	exit(2);
}

static int64_t parse_count(const char *opt, const char *s, int64_t min)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!*s || *end || errno || v < min)
		usage_error("%s needs an integer of at least %" PRId64 ", not '%s'", opt, min, s);
	return v;
}

/* 512M, 8G, 1.5G, 100000 (bytes) */
static double parse_size(const char *opt, const char *s)
{
	char *end;
	double v = strtod(s, &end);
	double mult = 1;
	switch (*end) {
	case 'k': case 'K': mult = 1024.0; end++; break;
	case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
	case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
	case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (end == s || *end || !(v > 0))
		usage_error("%s needs a size such as 512M or 8G, not '%s'", opt, s);
	return v * mult;
}

static void version(void)
{
	printf("trac %s\n", PACKAGE_VERSION);
	printf("built against %s and BLIS %s\n", TRAC_MPI_VERSION, TRAC_BLIS_VERSION);
}

/* The value of an option given as "-X VALUE", "-XVALUE", "--opt VALUE" or "--opt=VALUE". */
static const char *optarg_of(int argc, char **argv, int *i, const char *name, size_t namelen)
{
	const char *a = argv[*i];
	if (a[namelen] == '=')
		return a + namelen + 1;
	if (a[namelen] && name[1] != '-')
		return a + namelen;     /* -DNAME=V, -Idir, -ofile, -P4 */
	if (a[namelen])
		usage_error("unknown option '%s'", a);
	if (*i + 1 >= argc)
		usage_error("option '%s' needs a value", name);
	return argv[++*i];
}

static bool is_opt(const char *a, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(a, name, n) && (a[n] == 0 || a[n] == '=' || (name[1] != '-' && strlen(name) == 2));
}

static void parse_args(int argc, char **argv, Options *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !strcmp(a, "-")) {
			if (o->input)
				usage_error("more than one input file ('%s' and '%s')", o->input, a);
			o->input = a;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			fputs(usage, stdout);
			exit(0);
		} else if (!strcmp(a, "--version")) {
			version();
			exit(0);
		} else if (!strcmp(a, "-S") || !strcmp(a, "--emit-c")) {
			o->emit_c = true;
		} else if (!strcmp(a, "-fsyntax-only")) {
			o->syntax_only = true;
		} else if (!strcmp(a, "-M") || !strcmp(a, "-MM")) {
			o->deps.print = true;
			o->deps.no_stdlib |= a[2] == 'M';
		} else if (!strcmp(a, "-MD") || !strcmp(a, "-MMD")) {
			o->deps.write = true;
			o->deps.no_stdlib |= a[2] == 'M';
		} else if (!strcmp(a, "-MP")) {
			o->deps.phony = true;
		} else if (!strncmp(a, "-MF", 3)) {
			o->deps.file = optarg_of(argc, argv, &i, "-MF", 3);
		} else if (!strncmp(a, "-MT", 3)) {
			vec_push(&o->deps.targets, optarg_of(argc, argv, &i, "-MT", 3));
		} else if (!strncmp(a, "-MQ", 3)) {
			vec_push(&o->deps.targets, fe_make_quote(optarg_of(argc, argv, &i, "-MQ", 3)));
		} else if (!strcmp(a, "-w")) {
			o->fe.warnings = false;
		} else if (!strcmp(a, "-v")) {
			o->verbose = true;
		} else if (!strcmp(a, "--no-costs")) {
			o->costs = false;
		} else if (!strcmp(a, "-O0") || !strcmp(a, "-O1") || !strcmp(a, "-O2") || !strcmp(a, "-O")) {
			o->opt.level = a[2] ? a[2] - '0' : 2;
		} else if (!strncmp(a, "-O", 2) && a[1] == 'O') {
			usage_error("unknown optimization level '%s'; use -O0, -O1 or -O2", a);
		} else if (!strcmp(a, "--explain") || !strncmp(a, "--explain=", 10)) {
			o->explain = true;
			const char *f = a[9] == '=' ? a + 10 : "text";
			if (!strcmp(f, "text"))
				o->explain_format = EXPLAIN_TEXT;
			else if (!strcmp(f, "json"))
				o->explain_format = EXPLAIN_JSON;
			else if (!strcmp(f, "dot"))
				o->explain_format = EXPLAIN_DOT;
			else if (!strcmp(f, "all"))
				o->explain_format = EXPLAIN_ALL;
			else
				usage_error("unknown --explain format '%s'; use text, json, dot or all", f);
		} else if (!strncmp(a, "--dump-after", 12)) {
			o->dump_after = optarg_of(argc, argv, &i, "--dump-after", 12);
			if (strcmp(o->dump_after, "parse") && strcmp(o->dump_after, "tra") &&
			    strcmp(o->dump_after, "blocking") && strcmp(o->dump_after, "ia"))
				usage_error("unknown pass '%s' for --dump-after; use parse, tra, blocking or ia", o->dump_after);
		} else if (is_opt(a, "-o")) {
			o->output = optarg_of(argc, argv, &i, "-o", 2);
		} else if (is_opt(a, "-D")) {
			const char *d = optarg_of(argc, argv, &i, "-D", 2);
			const char *eq = strchr(d, '=');
			if (!eq || eq == d)
				usage_error("-D needs NAME=VALUE, not '%s'", d);
			Define def = {xstrdup(d), eq + 1};
			((char *)def.name)[eq - d] = 0;
			vec_push(&o->defines, def);
		} else if (is_opt(a, "-I")) {
			vec_push(&o->incdirs, optarg_of(argc, argv, &i, "-I", 2));
		} else if (is_opt(a, "-P") || is_opt(a, "--ranks")) {
			const char *v = a[1] == 'P' ? optarg_of(argc, argv, &i, "-P", 2) : optarg_of(argc, argv, &i, "--ranks", 7);
			o->opt.nranks = (int)parse_count("--ranks", v, 1);
			if (o->opt.nranks > MAX_RANKS)
				usage_error("--ranks %d is more than trac plans for (%d)", o->opt.nranks, MAX_RANKS);
		} else if (is_opt(a, "--mem-per-rank")) {
			o->opt.mem_per_rank = parse_size("--mem-per-rank", optarg_of(argc, argv, &i, "--mem-per-rank", 14));
		} else if (is_opt(a, "--block")) {
			const char *v = optarg_of(argc, argv, &i, "--block", 7);
			if (strchr(v, '='))
				vec_push(&o->blockspecs, v);
			else
				o->opt.block = parse_count("--block", v, 1);
		} else if (is_opt(a, "--strategy")) {
			vec_push(&o->stratspecs, optarg_of(argc, argv, &i, "--strategy", 10));
		} else if (is_opt(a, "--place")) {
			vec_push(&o->placespecs, optarg_of(argc, argv, &i, "--place", 7));
		} else if (is_opt(a, "--machine")) {
			o->machine = optarg_of(argc, argv, &i, "--machine", 9);
		} else if (is_opt(a, "--seed")) {
			o->seed = (uint64_t)parse_count("--seed", optarg_of(argc, argv, &i, "--seed", 6), 0);
		} else {
			usage_error("unknown option '%s'", a);
		}
	}
	if (!o->input)
		usage_error("no input file");
}

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

static int tensor_named(const TraProg *p, const char *name, size_t len)
{
	for (int i = 0; i < p->tensors.n; i++)
		if (strlen(p->tensors.v[i].name) == len && !strncmp(p->tensors.v[i].name, name, len))
			return i;
	return -1;
}

/* --block NAME=B[xB...] and --place NAME=PLACEMENT, now that the tensors
 * are known. */
static void resolve_pins(Options *o, const TraProg *p)
{
	Vec(BlockPin) bp = {0};
	Vec(PlacePin) pp = {0};
	for (int i = 0; i < o->blockspecs.n; i++) {
		const char *spec = o->blockspecs.v[i], *eq = strchr(spec, '=');
		int t = tensor_named(p, spec, (size_t)(eq - spec));
		if (t < 0)
			usage_error("--block %s: no tensor named '%.*s'", spec, (int)(eq - spec), spec);
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role == TENSOR_TEMP && !ten->output)
			usage_error("--block %s: '%s' is computed inside the program; block an input, param "
			            "or output it meets instead", spec, ten->name);
		const char *v = eq + 1;
		int d = 0;
		bool each = !strchr(v, 'x');
		while (*v) {
			int64_t b = 0;
			if (*v == '*') {
				v++;
			} else {
				char *end;
				long long x = strtoll(v, &end, 10);
				if (end == v || x < 1)
					usage_error("--block %s: blocks are positive integers or *", spec);
				b = x;
				v = end;
			}
			if (!each && d >= ten->rank)
				usage_error("--block %s: '%s' has %d dims", spec, ten->name, ten->rank);
			BlockPin pin = {t, each ? -1 : d, b};
			vec_push(&bp, pin);
			d++;
			if (*v == 'x')
				v++;
			else if (*v)
				usage_error("--block %s: expected NAME=B or NAME=B0xB1x...", spec);
		}
		if (!each && d != ten->rank)
			usage_error("--block %s: '%s' has %d dims, %d blocks given", spec, ten->name, ten->rank, d);
	}
	for (int i = 0; i < o->placespecs.n; i++) {
		const char *spec = o->placespecs.v[i], *eq = strchr(spec, '=');
		if (!eq)
			usage_error("--place needs NAME=PLACEMENT, not '%s'", spec);
		int t = tensor_named(p, spec, (size_t)(eq - spec));
		if (t < 0)
			usage_error("--place %s: no tensor named '%.*s'", spec, (int)(eq - spec), spec);
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role == TENSOR_TEMP)
			usage_error("--place %s: only inputs and params have a placement to pin", spec);
		PlacePin pin = {t, place_all()};
		if (!opt_parse_place(eq + 1, &pin.place))
			usage_error("--place %s: use all, part(D) or part(D,E), D and E dims of '%s'", spec, ten->name);
		for (int k = 0; k < pin.place.ndims; k++)
			if (pin.place.dims[k] >= ten->rank)
				usage_error("--place %s: '%s' has %d dims", spec, ten->name, ten->rank);
		vec_push(&pp, pin);
	}
	Vec(StratPin) sp = {0};
	for (int i = 0; i < o->stratspecs.n; i++) {
		const char *spec = o->stratspecs.v[i], *eq = strchr(spec, '=');
		char *end;
		long line = strtol(spec, &end, 10);
		if (!eq || end != eq || line < 1)
			usage_error("--strategy needs LINE=STRATEGY, not '%s'", spec);
		static const struct { const char *name; Strategy st; int side; } names[] = {
			{"broadcast", STRAT_BROADCAST, -1}, {"broadcast-left", STRAT_BROADCAST, 0},
			{"broadcast-right", STRAT_BROADCAST, 1}, {"co-partition", STRAT_COPARTITION, -1},
			{"replicate", STRAT_REPLICATE, -1}, {"local", STRAT_LOCAL, -1},
			{"two-phase", STRAT_TWOPHASE, -1},
		};
		int k = 0, nn = (int)(sizeof names / sizeof *names);
		while (k < nn && strcmp(names[k].name, eq + 1))
			k++;
		if (k == nn)
			usage_error("--strategy %s: use broadcast, broadcast-left, broadcast-right, co-partition, "
			            "replicate, local or two-phase", spec);
		int stmt = -1;
		for (int st = 0; st < p->stmts.n && stmt < 0; st++) {
			int l, c;
			loc_linecol(p->stmts.v[st].loc, &l, &c);
			if (l == line)
				stmt = st;
		}
		if (stmt < 0)
			usage_error("--strategy %s: no statement on line %ld", spec, line);
		StratPin pin = {stmt, names[k].st, names[k].side};
		vec_push(&sp, pin);
	}
	o->opt.stratpins = sp.v;
	o->opt.nstratpins = sp.n;
	o->opt.blockpins = bp.v;
	o->opt.nblockpins = bp.n;
	o->opt.placepins = pp.v;
	o->opt.nplacepins = pp.n;
	Buf err = {0};
	if (!opt_check_blocks(p, &o->opt, &err))
		usage_error("%s", err.s);
}

static void check_tra(const TraProg *p, const char *after)
{
	Buf err = {0};
	if (!tra_verify(p, &err))
		tr_bug("TRA program invalid after %s: %s", after, err.s);
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
static bool write_deps(const Options *o)
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
	fe_deps_rule(&b, targets, ntargets, &o->fe, o->deps.phony, o->deps.no_stdlib);

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

int main(int argc, char **argv)
{
	Options o = {.costs = true, .seed = 0};
	o.fe.warnings = true;
	o.opt.level = 2;
	o.opt.nranks = 4;
	o.opt.verify = true;
	parse_args(argc, argv, &o);
	o.fe.defines = o.defines.v;
	o.fe.ndefines = o.defines.n;
	o.fe.incdirs = o.incdirs.v;
	o.fe.nincdirs = o.incdirs.n;
	o.fe.nranks = o.opt.nranks;
	o.fe.block = o.opt.block;
	diag_color = isatty(2) && !getenv("NO_COLOR");
	Clock clock = {o.verbose, now()};
	if (o.verbose) {
		/* the source's folder: "dir" for dir/x.tra, "/" for /x.tra, "." for x.tra */
		const char *slash = strrchr(o.input, '/');
		int n = !slash || slash == o.input ? 1 : (int)(slash - o.input);
		fprintf(stderr, "trac %s\ntrac: imports from: %.*s", PACKAGE_VERSION, n, slash ? o.input : ".");
		for (int i = 0; i < o.incdirs.n; i++)
			fprintf(stderr, " %s", o.incdirs.v[i]);
		fprintf(stderr, " %s\n", fe_stdlib_dir());
	}
	static Machine machine;
	machine_default(&machine);
	if (!o.machine && getenv("TRAC_MACHINE") && *getenv("TRAC_MACHINE"))
		o.machine = getenv("TRAC_MACHINE");
	if (o.machine) {
		Buf merr = {0};
		if (!machine_load(&machine, o.machine, &merr))
			usage_error("%s", merr.s);
	}
	o.opt.machine = &machine;
	o.opt.alternatives = o.explain && (o.explain_format == EXPLAIN_ALL || o.explain_format == EXPLAIN_JSON);

	/* text -> AST */
	const char *err;
	int file = fe_load(o.input, &err);
	if (file < 0) {
		fprintf(stderr, "trac: error: cannot read '%s': %s\n", o.input, err);
		return 1;
	}
	Arena *arena = arena_new();
	Ast *ast = fe_parse(arena, file);
	if (diag_errors())
		return 1;
	phase_end(&clock, "read and parse");
	if (o.dump_after && !strcmp(o.dump_after, "parse")) {
		Buf b = {0};
		ast_print(&b, ast);
		fputs(b.s ? b.s : "", stdout);
		return 0;
	}

	/* AST -> TRA */
	TraProg *prog = fe_compile(ast, &o.fe);
	if (!prog)
		return 1;
	check_tra(prog, "lowering");
	phase_end(&clock, "check and lower");
	if ((o.deps.print || o.deps.write) && !write_deps(&o))
		return 1;
	if (o.deps.print)
		return 0;
	if (!tensors_fit(prog, o.opt.mem_per_rank))
		return 1;
	if (o.syntax_only)
		return 0;

	/* grad(loss, W) -> the backward computation, in TRA */
	opt_autodiff(prog);
	if (diag_errors())
		return 1;
	check_tra(prog, "autodiff");

	/* loop-invariant computation out of repeat blocks */
	if (o.opt.level > 0) {
		opt_hoist(prog);
		check_tra(prog, "hoisting");
	}
	phase_end(&clock, "autodiff");
	if (o.dump_after && !strcmp(o.dump_after, "tra")) {
		Buf b = {0};
		tra_print(&b, prog);
		fputs(b.s ? b.s : "", stdout);
		return 0;
	}

	/* sums of products in the cheapest order of pairwise contractions */
	resolve_pins(&o, prog);
	if (o.opt.level > 0)
		opt_contract(prog, &o.opt);
	check_tra(prog, "contraction order");

	/* chunk shapes */
	opt_block(prog, &o.opt);
	check_tra(prog, "blocking");
	phase_end(&clock, "blocking");
	if (o.dump_after && !strcmp(o.dump_after, "blocking")) {
		Buf b = {0};
		tra_print(&b, prog);
		fputs(b.s ? b.s : "", stdout);
		return 0;
	}

	/* TRA -> IA */
	IaPlan *plan = opt_plan(prog, &o.opt);
	phase_end(&clock, "plan search");
	if (o.dump_after && !strcmp(o.dump_after, "ia")) {
		Buf b = {0};
		ia_print(&b, plan, o.costs);
		fputs(b.s ? b.s : "", stdout);
		return 0;
	}
	if (o.opt.mem_per_rank > 0 && plan->peak_bytes > o.opt.mem_per_rank) {
		if (plan->leanest_peak > 0 && plan->leanest_peak < plan->peak_bytes)
			diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
			     "rank at its peak, the leanest found %.3g; give more memory or more ranks (-P)",
			     o.opt.mem_per_rank, plan->peak_bytes, plan->leanest_peak);
		else
			diag(DIAG_ERROR, NOLOC, "no plan fits --mem-per-rank %.3g: the cheapest plan needs %.3g bytes per "
			     "rank at its peak; give more memory or more ranks (-P)", o.opt.mem_per_rank, plan->peak_bytes);
		return 1;
	}
	if (o.explain) {
		Buf b = {0};
		ia_explain(&b, plan, o.explain_format, o.costs);
		fputs(b.s ? b.s : "", stdout);
		return 0;
	}

	/* IA -> C -> executable */
	char *name = program_name(o.input);
	CgOptions cg = {name, o.input, o.seed};
	Buf c = {0};
	cg_emit(&c, plan, &cg);
	phase_end(&clock, "emit C");
	if (o.emit_c) {
		char *out = o.output ? xstrdup(o.output) : strip_ext(o.input, ".c");
		return write_file(out, c.s) ? 0 : 1;
	}
	char *out = o.output ? xstrdup(o.output) : strip_ext(o.input, "");
	if (!strcmp(out, o.input))
		usage_error("the executable would overwrite the source '%s'; name it with -o", o.input);
	bool ok = cg_compile(c.s, out, o.verbose);
	phase_end(&clock, "C compiler");
	return ok ? 0 : 1;
}
