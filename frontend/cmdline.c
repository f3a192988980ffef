/*
 * cmdline.c: trac's command line (trac(1)).
 *
 * cmdline_parse turns argv into a Cmdline: what the driver does with the
 * plan (explain, -S, the executable), make dependency output, and the
 * Pipeline's options.  --block NAME=..., --place and --strategy name
 * tensors and lines of the program, so cmdline_resolve_pins turns them
 * into pins once the pipeline has the TRA program.  A usage error prints
 * one line and a hint, and exits 2.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "frontend/driver.h"

extern char **environ;

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
	"  -P LIST, --ranks LIST   plan for these rank counts (N or N,M,...): the executable\n"
	"                          carries a plan for each and runs the one for its rank count\n"
	"                          (default 1-8 and powers of two to 1024; --explain: 4)\n"
	"  --mem-per-rank SIZE     memory budget per rank for planning (512M, 8G)\n"
	"  --objective OBJ         what the plan search minimises first: seconds (default:\n"
	"                          predicted time) or floats (floats moved between ranks,\n"
	"                          the TRA paper's metric, among plans that spread the\n"
	"                          work; inputs may be read whole by every rank)\n"
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
	"  --nnz NAME=COUNT        plan with COUNT stored elements in sparse input NAME\n"
	"                          (default: 16 per row of its longest dim)\n"
	"  --strategy LINE=S       force the statement on LINE to strategy S: broadcast,\n"
	"                          broadcast-left, broadcast-right (which operand is\n"
	"                          everywhere), co-partition, replicate, local or\n"
	"                          two-phase (a per-chunk schedule)\n"
	"  --machine FILE          the machine model (bench/calibrate's output; default\n"
	"                          $TRAC_MACHINE, else the installed one, else this\n"
	"                          machine's: host, measured once and cached)\n"
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

_Noreturn void cmdline_usage_error(const char *fmt, ...)
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
		cmdline_usage_error("%s needs an integer of at least %" PRId64 ", not '%s'", opt, min, s);
	return v;
}

/* -P N or -P N,M,...: the rank counts to plan for, each once, increasing. */
static void parse_ranks(const char *v, Cmdline *o)
{
	o->ranks.n = 0;
	for (const char *s = v;;) {
		const char *comma = strchr(s, ',');
		char *one = comma ? xprintf("%.*s", (int)(comma - s), s) : xstrdup(s);
		int64_t n = parse_count("--ranks", one, 1);
		free(one);
		if (n > MAX_RANKS)
			cmdline_usage_error("--ranks %" PRId64 " is more than trac plans for (%d)", n, MAX_RANKS);
		int at = 0;
		while (at < o->ranks.n && o->ranks.v[at] < n)
			at++;
		if (at == o->ranks.n || o->ranks.v[at] != n) {
			vec_push(&o->ranks, 0);
			memmove(&o->ranks.v[at + 1], &o->ranks.v[at], (size_t)(o->ranks.n - 1 - at) * sizeof *o->ranks.v);
			o->ranks.v[at] = (int)n;
		}
		if (!comma)
			break;
		s = comma + 1;
	}
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
		cmdline_usage_error("%s needs a size such as 512M or 8G, not '%s'", opt, s);
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
		cmdline_usage_error("unknown option '%s'", a);
	if (*i + 1 >= argc)
		cmdline_usage_error("option '%s' needs a value", name);
	return argv[++*i];
}

static bool is_opt(const char *a, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(a, name, n) && (a[n] == 0 || a[n] == '=' || (name[1] != '-' && strlen(name) == 2));
}

static void parse_args(int argc, char **argv, Cmdline *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (a[0] != '-' || !strcmp(a, "-")) {
			if (o->input)
				cmdline_usage_error("more than one input file ('%s' and '%s')", o->input, a);
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
			o->pipe.syntax_only = true;
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
			o->pipe.fe.warnings = false;
		} else if (!strcmp(a, "-v")) {
			o->verbose = true;
		} else if (!strcmp(a, "--no-costs")) {
			o->pipe.costs = false;
		} else if (!strcmp(a, "-O0") || !strcmp(a, "-O1") || !strcmp(a, "-O2") || !strcmp(a, "-O")) {
			o->pipe.opt.level = a[2] ? a[2] - '0' : 2;
		} else if (!strncmp(a, "-O", 2) && a[1] == 'O') {
			cmdline_usage_error("unknown optimization level '%s'; use -O0, -O1 or -O2", a);
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
				cmdline_usage_error("unknown --explain format '%s'; use text, json, dot or all", f);
		} else if (!strncmp(a, "--dump-after", 12)) {
			const char *pass = optarg_of(argc, argv, &i, "--dump-after", 12);
			o->pipe.dump_after = trac_dump_pass(pass);
			if (o->pipe.dump_after == DUMP_NONE)
				cmdline_usage_error("unknown pass '%s' for --dump-after; use parse, tra, blocking or ia", pass);
		} else if (is_opt(a, "-o")) {
			o->output = optarg_of(argc, argv, &i, "-o", 2);
		} else if (is_opt(a, "-D")) {
			const char *d = optarg_of(argc, argv, &i, "-D", 2);
			const char *eq = strchr(d, '=');
			if (!eq || eq == d)
				cmdline_usage_error("-D needs NAME=VALUE, not '%s'", d);
			Define def = {xstrdup(d), eq + 1};
			((char *)def.name)[eq - d] = 0;
			vec_push(&o->defines, def);
		} else if (is_opt(a, "-I")) {
			vec_push(&o->incdirs, optarg_of(argc, argv, &i, "-I", 2));
		} else if (is_opt(a, "-P") || is_opt(a, "--ranks")) {
			const char *v = a[1] == 'P' ? optarg_of(argc, argv, &i, "-P", 2) : optarg_of(argc, argv, &i, "--ranks", 7);
			parse_ranks(v, o);
		} else if (is_opt(a, "--mem-per-rank")) {
			o->pipe.opt.mem_per_rank = parse_size("--mem-per-rank", optarg_of(argc, argv, &i, "--mem-per-rank", 14));
		} else if (is_opt(a, "--objective")) {
			const char *v = optarg_of(argc, argv, &i, "--objective", 11);
			if (!objective_parse(v, &o->pipe.opt.objective))
				cmdline_usage_error("unknown --objective '%s'; use seconds or floats", v);
		} else if (is_opt(a, "--block")) {
			const char *v = optarg_of(argc, argv, &i, "--block", 7);
			if (strchr(v, '='))
				vec_push(&o->blockspecs, v);
			else
				o->pipe.opt.block = parse_count("--block", v, 1);
		} else if (is_opt(a, "--strategy")) {
			vec_push(&o->stratspecs, optarg_of(argc, argv, &i, "--strategy", 10));
		} else if (is_opt(a, "--place")) {
			vec_push(&o->placespecs, optarg_of(argc, argv, &i, "--place", 7));
		} else if (is_opt(a, "--nnz")) {
			vec_push(&o->nnzspecs, optarg_of(argc, argv, &i, "--nnz", 5));
		} else if (is_opt(a, "--machine")) {
			o->machine = optarg_of(argc, argv, &i, "--machine", 9);
		} else if (is_opt(a, "--seed")) {
			o->seed = (uint64_t)parse_count("--seed", optarg_of(argc, argv, &i, "--seed", 6), 0);
		} else {
			cmdline_usage_error("unknown option '%s'", a);
		}
	}
	if (!o->input)
		cmdline_usage_error("no input file");
}

static double wall_seconds(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The quick calibration's output over *m: trac-calibrate run with its
 * stdout in a file beside the cache, read as a model file. */
static bool quick_calibrate(Machine *m, const char *cache, Buf *why)
{
	const char *helper = fe_calibrate_helper();
	if (!helper) {
		buf_printf(why, "no trac-calibrate installed");
		return false;
	}
	char *out = xprintf("%s.quick.%d", cache, (int)getpid());
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	char *dir = xstrdup(cache);
	*strrchr(dir, '/') = 0;                 /* its files go beside the cache */
	char *argv[] = {(char *)helper, dir, NULL};
	pid_t pid;
	int status = -1;
	bool ok = host_make_parent(out) && posix_spawn(&pid, helper, &fa, NULL, argv, environ) == 0 &&
	          waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	posix_spawn_file_actions_destroy(&fa);
	free(dir);
	if (!ok)
		buf_printf(why, "%s failed", helper);
	ok = ok && machine_load(m, out, why);
	if (ok)
		host_after_quick(m);
	remove(out);
	free(out);
	return ok;
}

/* The model of the machine trac runs on (optimizer/host.c): the cache of an
 * earlier quick calibration on this CPU, else a new one when trac plans and
 * TRAC_CALIBRATE is not 0 (then cached), else derived from the CPU alone. */
static void host_machine(Machine *m, bool plans)
{
	HostInfo h;
	host_probe(&h);
	machine_derive(m, &h);
	char *cache = host_cache_path();
	const char *env = getenv("TRAC_CALIBRATE");
	Buf why = {0};
	if (cache && host_cache_load(m, cache, &h, &why)) {
		snprintf(m->source, sizeof m->source, "%s (cached quick calibration of %s, %d cores)", cache, h.cpu,
		         h.cores);
	} else if (!cache || !plans || (env && !strcmp(env, "0"))) {
		if (cache && plans)
			buf_printf(&why, "; TRAC_CALIBRATE=0");
	} else {
		/* one calibration at a time (make -j of an installed trac's
		 * programs): the others wait, then read its cache */
		char *lock = xprintf("%s.lock", cache);
		int fd = host_make_parent(lock) ? open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644) : -1;
		if (fd >= 0)
			flock(fd, LOCK_EX);
		double t0 = wall_seconds();
		Machine q = *m;
		why.len = 0;
		bool waited = host_cache_load(m, cache, &h, &why);
		why.len = 0;
		if (waited) {
			snprintf(m->source, sizeof m->source, "%s (cached quick calibration of %s, %d cores, made "
			         "while this trac waited)", cache, h.cpu, h.cores);
		} else if (quick_calibrate(&q, cache, &why)) {
			*m = q;
			snprintf(m->source, sizeof m->source, "%s (quick calibration of %s, %d cores, just now in %.1f s)",
			         cache, h.cpu, h.cores, wall_seconds() - t0);
			if (!host_cache_save(cache, m, &h))
				fprintf(stderr, "trac: warning: cannot write the machine model's cache '%s'\n", cache);
		}
		if (fd >= 0)
			close(fd);
		free(lock);
	}
	if (why.s && !strstr(m->source, "calibration")) {
		size_t n = strlen(m->source);
		snprintf(m->source + n, sizeof m->source - n, "; %s", why.s);
	}
	free(why.s);
	free(cache);
}

/* The machine model: --machine FILE, else $TRAC_MACHINE, else the one
 * `make install` installed after `make calibrate`, else this machine's
 * (host_machine).  A trac in its build tree plans with the fixed reference
 * model the tests pin unless asked for "host" (--machine host,
 * TRAC_MACHINE=host). */
static const Machine *load_machine(Cmdline *c, bool plans)
{
	static Machine machine;
	const char *path = c->machine;
	machine_default(&machine);
	c->machine_how = "--machine";
	if (!path && getenv("TRAC_MACHINE") && *getenv("TRAC_MACHINE")) {
		path = getenv("TRAC_MACHINE");
		c->machine_how = "TRAC_MACHINE";
	}
	bool in_build = false;
	free(tr_exe_dir(&in_build));
	if (!path && (path = fe_machine_file()))
		c->machine_how = "installed by make calibrate && make install";
	if (path && !strcmp(path, "host")) {
		host_machine(&machine, plans);
		c->machine_how = "this machine's, as asked";
	} else if (path) {
		Buf err = {0};
		if (!machine_load(&machine, path, &err))
			cmdline_usage_error("%s", err.s);
		c->machine_how = xprintf("a file: %s", c->machine_how);
	} else if (!in_build) {
		host_machine(&machine, plans);
		c->machine_how = "this machine's: no model file";
	} else {
		c->machine_how = "the fixed reference model of a trac in its build tree, which the tests pin";
	}
	return &machine;
}

void cmdline_parse(int argc, char **argv, Cmdline *c)
{
	*c = (Cmdline){0};
	c->pipe.costs = true;
	c->pipe.fe.warnings = true;
	c->pipe.opt.level = 2;
	c->pipe.opt.verify = true;
	parse_args(argc, argv, c);
	c->pipe.fe.defines = c->defines.v;
	c->pipe.fe.ndefines = c->defines.n;
	c->pipe.fe.incdirs = c->incdirs.v;
	c->pipe.fe.nincdirs = c->incdirs.n;
	c->pipe.opt.machine = load_machine(c, !c->pipe.syntax_only && !c->deps.print);
	/* Without -P: an executable carries plans for 1-8 ranks and the powers
	 * of two to 1024; --explain and --dump-after show the plan for 4. */
	if (!c->ranks.n && (c->explain || c->pipe.dump_after != DUMP_NONE))
		vec_push(&c->ranks, 4);
	c->pipe.ranks_default = !c->ranks.n;
	for (int n = 1; c->pipe.ranks_default && n <= 1024; n = n < 8 ? n + 1 : 2 * n)
		vec_push(&c->ranks, n);
	c->pipe.ranks = c->ranks.v;
	c->pipe.nranks = c->ranks.n;
	c->pipe.opt.alternatives = c->explain && (c->explain_format == EXPLAIN_ALL || c->explain_format == EXPLAIN_JSON);
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
void cmdline_resolve_pins(const Cmdline *o, const TraProg *p, OptOptions *opt)
{
	Vec(BlockPin) bp = {0};
	Vec(PlacePin) pp = {0};
	for (int i = 0; i < o->blockspecs.n; i++) {
		const char *spec = o->blockspecs.v[i], *eq = strchr(spec, '=');
		int t = tensor_named(p, spec, (size_t)(eq - spec));
		if (t < 0)
			cmdline_usage_error("--block %s: no tensor named '%.*s'", spec, (int)(eq - spec), spec);
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role == TENSOR_TEMP && !ten->output)
			cmdline_usage_error("--block %s: '%s' is computed inside the program; block an input, param "
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
					cmdline_usage_error("--block %s: blocks are positive integers or *", spec);
				b = x;
				v = end;
			}
			if (!each && d >= ten->rank)
				cmdline_usage_error("--block %s: '%s' has %d dims", spec, ten->name, ten->rank);
			BlockPin pin = {t, each ? -1 : d, b};
			vec_push(&bp, pin);
			d++;
			if (*v == 'x')
				v++;
			else if (*v)
				cmdline_usage_error("--block %s: expected NAME=B or NAME=B0xB1x...", spec);
		}
		if (!each && d != ten->rank)
			cmdline_usage_error("--block %s: '%s' has %d dims, %d blocks given", spec, ten->name, ten->rank, d);
	}
	for (int i = 0; i < o->placespecs.n; i++) {
		const char *spec = o->placespecs.v[i], *eq = strchr(spec, '=');
		if (!eq)
			cmdline_usage_error("--place needs NAME=PLACEMENT, not '%s'", spec);
		int t = tensor_named(p, spec, (size_t)(eq - spec));
		if (t < 0)
			cmdline_usage_error("--place %s: no tensor named '%.*s'", spec, (int)(eq - spec), spec);
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role == TENSOR_TEMP)
			cmdline_usage_error("--place %s: only inputs and params have a placement to pin", spec);
		PlacePin pin = {t, place_all()};
		if (!opt_parse_place(eq + 1, &pin.place))
			cmdline_usage_error("--place %s: use all, part(D) or part(D,E), D and E dims of '%s'", spec, ten->name);
		for (int k = 0; k < pin.place.ndims; k++)
			if (pin.place.dims[k] >= ten->rank)
				cmdline_usage_error("--place %s: '%s' has %d dims", spec, ten->name, ten->rank);
		vec_push(&pp, pin);
	}
	Vec(NnzPin) np = {0};
	for (int i = 0; i < o->nnzspecs.n; i++) {
		const char *spec = o->nnzspecs.v[i], *eq = strchr(spec, '=');
		if (!eq)
			cmdline_usage_error("--nnz needs NAME=COUNT, not '%s'", spec);
		int t = tensor_named(p, spec, (size_t)(eq - spec));
		if (t < 0)
			cmdline_usage_error("--nnz %s: no tensor named '%.*s'", spec, (int)(eq - spec), spec);
		const Tensor *ten = &p->tensors.v[t];
		if (!ten->sparse)
			cmdline_usage_error("--nnz %s: '%s' is not a sparse input", spec, ten->name);
		char *end;
		double count = strtod(eq + 1, &end), all = 1;
		for (int d = 0; d < ten->rank; d++)
			all *= (double)ten->shape[d];
		if (end == eq + 1 || *end || !(count >= 0) || count > all)
			cmdline_usage_error("--nnz %s: a count of elements from 0 to %.17g", spec, all);
		NnzPin pin = {t, count};
		vec_push(&np, pin);
	}
	opt->nnzpins = np.v;
	opt->nnnzpins = np.n;
	Vec(StratPin) sp = {0};
	for (int i = 0; i < o->stratspecs.n; i++) {
		const char *spec = o->stratspecs.v[i], *eq = strchr(spec, '=');
		char *end;
		long line = strtol(spec, &end, 10);
		if (!eq || end != eq || line < 1)
			cmdline_usage_error("--strategy needs LINE=STRATEGY, not '%s'", spec);
		static const struct { const char *name; Strategy st; int side; } names[] = {
			{"broadcast", STRAT_BROADCAST, -1}, {"broadcast-left", STRAT_BROADCAST, 0},
			{"broadcast-right", STRAT_BROADCAST, 1}, {"co-partition", STRAT_COPARTITION, -1},
			{"replicate", STRAT_REPLICATE, -1}, {"local", STRAT_LOCAL, -1},
			{"two-phase", STRAT_TWOPHASE, -1}, {"lookup", STRAT_LOOKUP, -1},
		};
		int k = 0, nn = (int)(sizeof names / sizeof *names);
		while (k < nn && strcmp(names[k].name, eq + 1))
			k++;
		if (k == nn)
			cmdline_usage_error("--strategy %s: use broadcast, broadcast-left, broadcast-right, co-partition, "
			            "replicate, local, two-phase or lookup", spec);
		int stmt = -1;
		for (int st = 0; st < p->stmts.n && stmt < 0; st++) {
			int l, c;
			loc_linecol(p->stmts.v[st].loc, &l, &c);
			if (l == line)
				stmt = st;
		}
		if (stmt < 0)
			cmdline_usage_error("--strategy %s: no statement on line %ld", spec, line);
		StratPin pin = {stmt, names[k].st, names[k].side};
		vec_push(&sp, pin);
	}
	opt->stratpins = sp.v;
	opt->nstratpins = sp.n;
	opt->blockpins = bp.v;
	opt->nblockpins = bp.n;
	opt->placepins = pp.v;
	opt->nplacepins = pp.n;
	Buf err = {0};
	if (!opt_check_blocks(p, opt, &err))
		cmdline_usage_error("%s", err.s);
}

