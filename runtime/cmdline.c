/*
 * cmdline.c: the executable's command line, its --help, and the checks of
 * the files it names before the first op.
 *
 * One name per tensor.  NAME=PATH is the file a tensor is read from: an
 * input's, or a param's initial value (read instead of the program's
 * initialiser when the param has one).  NAME.out=PATH is the file an
 * output is written to; an output read from nothing (not an input, not a
 * param) takes NAME=PATH too.  The tensor table (TrtProgram.tensors) has
 * two entries for a tensor that is read and written, its output's first;
 * each role's path goes to its own entry of rt.paths.
 *
 * Every rank parses the same argv and so reaches the same verdict alone;
 * only rank 0 speaks.  The files' checks (rt_check_files, collective) are
 * rank 0's, which writes the outputs: each output's folder takes a
 * temporary file, no output or --log file is a file the run reads (an
 * input's, a param's, --resume's), and no two of them are one file.
 */
#define _GNU_SOURCE                    /* realpath */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

const char *rt_role_name(TrtRole role)
{
	switch (role) {
	case TRT_INPUT: return "input";
	case TRT_OUTPUT: return "output";
	case TRT_PARAM: return "param";
	}
	return "tensor";
}

/* ---- the tensors' entries ---- */

/* The entry of that name and role: reader (1) an input's or param's, else
 * (0) an output's; -1 when none. */
static int entry(const TrtProgram *prog, const char *name, size_t len, int reader)
{
	for (int i = 0; i < prog->ntensors; i++) {
		const TrtTensor *t = &prog->tensors[i];
		if (strlen(t->name) == len && !memcmp(t->name, name, len) && (t->role != TRT_OUTPUT) == reader)
			return i;
	}
	return -1;
}

/* The other entry of tensor i's name (its output's, or what it is read
 * as), or -1. */
static int twin(const TrtProgram *prog, int i)
{
	const TrtTensor *t = &prog->tensors[i];
	return entry(prog, t->name, strlen(t->name), t->role == TRT_OUTPUT);
}

/* Each tensor's name once, in the table's order, after "(tensors:". */
static size_t names(char *msg, size_t at, size_t len, const TrtProgram *prog, int outputs)
{
	for (int t = 0; t < prog->ntensors && at < len; t++) {
		const TrtTensor *x = &prog->tensors[t];
		if (outputs ? x->role == TRT_OUTPUT : twin(prog, t) < 0 || x->role != TRT_OUTPUT)
			at += (size_t)snprintf(msg + at, len - at, " %s", x->name);
	}
	if (at < len)
		at += (size_t)snprintf(msg + at, len - at, ")");
	return at;
}

/* ---- --help ---- */

/* Tensor i's row: name, roles, type and shape, then its files. */
static void help_row(const TrtProgram *prog, int i, int wname)
{
	const TrtTensor *t = &prog->tensors[i];
	int o = t->role == TRT_OUTPUT ? i : twin(prog, i);
	int r = t->role == TRT_OUTPUT ? twin(prog, i) : i;
	char roles[64], type[300];

	/* roles without blanks: a script may split the row on them */
	if (r >= 0 && o >= 0)
		snprintf(roles, sizeof roles, "%s,output", rt_role_name(prog->tensors[r].role));
	else
		snprintf(roles, sizeof roles, "%s", rt_role_name(t->role));
	size_t n = (size_t)snprintf(type, sizeof type, "%s ", rt_dtype_name(t->dtype));
	rt_shape_str(type + n, sizeof type - n, t->rank, t->shape);
	printf("  %-*s %-13s %-18s", wname, t->name, roles, type);
	if (r >= 0) {
		const TrtTensor *x = &prog->tensors[r];
		printf(" %s= %s", x->name, x->path ? x->path : x->role == TRT_PARAM ? "(its initialiser)" : "required");
		if (x->sparse)
			printf(", sparse: a scipy .npz or a .npy");
	}
	if (o >= 0) {
		const TrtTensor *x = &prog->tensors[o];
		printf("%s%s.out= ", r >= 0 ? "   " : " ", x->name);
		if (x->path)
			printf("%s", x->path);
		else
			printf("%s.npy", x->name);
	}
	printf("\n");
}

static void print_help(const TrtProgram *prog)
{
	int wname = 4;

	printf("usage: [mpirun -np N] %s NAME=path.npy ... NAME.out=path.npy ... [--seed N] [--quiet]\n"
	       "       [--log FILE] [--profile] [--trace FILE] [--checkpoint FILE [--checkpoint-every N]]\n"
	       "       [--resume FILE] [--help]\n\n",
	       rt_progname());
	printf("tensors: NAME=PATH is the file a tensor is read from (an input, a param's initial\n"
	       "value); NAME.out=PATH the file an output is written to (NAME=PATH too, for an output\n"
	       "that is not read); a file read is never written over\n");
	for (int i = 0; i < prog->ntensors; i++)
		if ((int)strlen(prog->tensors[i].name) > wname)
			wname = (int)strlen(prog->tensors[i].name);
	for (int pass = 0; pass < 2; pass++)      /* read ones first, then outputs alone */
		for (int i = 0; i < prog->ntensors; i++)
			if (pass == 0 ? prog->tensors[i].role != TRT_OUTPUT
			              : prog->tensors[i].role == TRT_OUTPUT && twin(prog, i) < 0)
				help_row(prog, i, wname);
	printf("\noptions:\n");
	printf("  --seed N     seed of the random initialisers (default %llu)\n",
	       (unsigned long long)prog->seed);
	printf("  --quiet      print nothing of the values the program prints (its 'print'\n"
	       "               statements), and no progress line\n");
	printf("  --log FILE   every value the program prints, as CSV rows (the loops' iterations,\n"
	       "               name, value) in FILE, written as the run goes\n");
	printf("  --profile    print each op's time and bytes sent at exit (or TRAC_PROFILE=1)\n");
	rt_trace_help();
	printf("  --placement balanced|hash  where a sparse input's blocks go: by their stored\n"
	       "               elements, read from the file first (default), or block modulo ranks\n");
	printf("  --no-overlap a two-phase op waits for all its input chunks before its first\n"
	       "               kernel (to measure what overlapping them saves)\n");
	rt_ckpt_help();
	rt_spill_help();
	rt_ist_help();
	printf("  --help       print this help and exit\n");
	printf("\nOn a terminal, rank 0 shows the outer repeat blocks' progress on stderr.\n");
	printf("\nenvironment:\n");
	printf("  TRAC_BLIS_ARCH=auto|native|ID  BLIS kernels: auto picks skx on AVX-512 CPUs\n");
	printf("  BLIS_NUM_THREADS=N             BLIS threads per rank (default 1)\n");
	printf("  TRAC_TRACE_EVENTS=N            spans --trace keeps per rank (default 1000000)\n");
	printf("  TRAC_HUGEPAGES=1               big chunks on huge pages (faster first touch on\n"
	       "                                 bare metal, often slower on virtual machines)\n");
}

/* "1-8,16,32": the rank counts the program has plans for. */
void rt_plans_str(char *s, size_t len, const TrtProgram *progs, int n)
{
	size_t at = 0;
	*s = 0;
	for (int i = 0; i < n && at < len; i++) {
		int j = i;
		while (j + 1 < n && progs[j + 1].planned_ranks == progs[j].planned_ranks + 1)
			j++;
		if (j >= i + 2) {
			at += snprintf(s + at, len - at, "%s%d-%d", i ? "," : "", progs[i].planned_ranks,
			               progs[j].planned_ranks);
			i = j;
		} else
			at += snprintf(s + at, len - at, "%s%d", i ? "," : "", progs[i].planned_ranks);
	}
}

/* ---- parsing ---- */

static int parse_seed(const char *s, uint64_t *seed)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return 0;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return 0;
	*seed = v;
	return 1;
}

static const char **given;              /* per entry: the argument that named its file */

/* NAME=PATH or NAME.out=PATH: the entry it names in *i, or an error line. */
static const char *tensor_arg(const TrtProgram *prog, const char *arg, int *i, char *msg, size_t len)
{
	const char *pn = rt_progname(), *eq = strchr(arg, '=');
	size_t n = (size_t)(eq - arg);
	int out = n > 4 && !memcmp(eq - 4, ".out", 4);

	if (out)
		n -= 4;
	int reader = entry(prog, arg, n, 1), writer = entry(prog, arg, n, 0);
	if (reader < 0 && writer < 0) {
		size_t at = (size_t)snprintf(msg, len, "%s: unknown tensor '%.*s' in '%s' (tensors:", pn, (int)n, arg, arg);
		names(msg, at, len, prog, 0);
		return msg;
	}
	if (out && writer < 0) {
		size_t at = (size_t)snprintf(msg, len, "%s: %s %.*s is not an output: '%s' names no file to write (outputs:",
		                             pn, rt_role_name(prog->tensors[reader].role), (int)n, arg, arg);
		if (names(msg, at, len, prog, 1) == at + 1)
			snprintf(msg + at, len - at, " none)");
		return msg;
	}
	*i = out || reader < 0 ? writer : reader;
	if (given[*i]) {
		snprintf(msg, len, "%s: tensor %.*s given twice ('%s' and '%s')", pn, (int)n, arg, given[*i], arg);
		return msg;
	}
	if (!eq[1]) {
		snprintf(msg, len, "%s: empty path in '%s'", pn, arg);
		return msg;
	}
	return NULL;
}

/* The executable's options (--help lists them), for a misspelt one's
 * nearest: the fewest insertions, deletions and substitutions, at most
 * two and fewer than half the name; NULL when none is that near. */
static const char *nearest_option(const char *arg)
{
	static const char *const opts[] = {
		"--checkpoint", "--checkpoint-every", "--help", "--in-memory", "--ist-log", "--log",
		"--mem-budget", "--no-overlap", "--placement", "--profile", "--quiet", "--resume", "--seed",
		"--spill-dir", "--trace",
	};
	size_t n = strcspn(arg, "=");
	const char *best = NULL;
	size_t bestd = 3;
	for (size_t k = 0; k < sizeof opts / sizeof *opts; k++) {
		size_t m = strlen(opts[k]), row[32];
		if (n >= 32 || m >= 32)
			continue;
		for (size_t j = 0; j <= m; j++)
			row[j] = j;
		for (size_t i = 1; i <= n; i++) {
			size_t diag = row[0];
			row[0] = i;
			for (size_t j = 1; j <= m; j++) {
				size_t up = row[j], d = diag + (arg[i - 1] != opts[k][j - 1]);
				d = d < up + 1 ? d : up + 1;
				row[j] = d < row[j - 1] + 1 ? d : row[j - 1] + 1;
				diag = up;
			}
		}
		if (row[m] < bestd && 2 * row[m] < n) {
			bestd = row[m];
			best = opts[k];
		}
	}
	return best;
}

/* Parses argv into rt.paths and rt's options; returns an error line or NULL. */
static const char *parse_args(int argc, char **argv, const TrtProgram *prog, char *msg, size_t len)
{
	const char *pn = rt_progname();

	for (int a = 1; a < argc; a++) {
		const char *arg = argv[a];
		const char *eq = strchr(arg, '=');

		if (!strcmp(arg, "--profile")) {
			rt.profile = 1;
		} else if (!strcmp(arg, "--placement") || !strncmp(arg, "--placement=", 12)) {
			const char *v = arg[11] == '=' ? arg + 12 : (a + 1 < argc ? argv[++a] : "");
			if (!strcmp(v, "hash") || !strcmp(v, "balanced")) {
				rt_placement_hash = !strcmp(v, "hash");
			} else {
				snprintf(msg, len, "%s: --placement is 'balanced' or 'hash', found '%s'", pn, v);
				return msg;
			}
		} else if (!strcmp(arg, "--no-overlap")) {
			rt_no_overlap = 1;
		} else if (!strcmp(arg, "--quiet")) {
			rt.quiet = 1;
		} else if (!strcmp(arg, "--log") || !strncmp(arg, "--log=", 6)) {
			const char *v = arg[5] == '=' ? arg + 6 : (a + 1 < argc ? argv[++a] : "");
			if (!*v) {
				snprintf(msg, len, "%s: --log needs a file", pn);
				return msg;
			}
			rt.log_path = v;
		} else if (rt_ckpt_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (rt_trace_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (rt_spill_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (rt_ist_arg(argc, argv, &a, msg, len)) {
			if (*msg)
				return msg;
		} else if (!strcmp(arg, "--seed") || !strncmp(arg, "--seed=", 7)) {
			const char *v = arg[6] == '=' ? arg + 7 : (a + 1 < argc ? argv[++a] : "");
			if (!parse_seed(v, &rt.seed)) {
				snprintf(msg, len, "%s: --seed needs an unsigned integer, found '%s'", pn, v);
				return msg;
			}
		} else if (arg[0] != '-' && eq && eq > arg) {
			int i;
			if (tensor_arg(prog, arg, &i, msg, len))
				return msg;
			rt.paths[i] = eq + 1;
			given[i] = arg;
		} else if (arg[0] == '-') {
			const char *near = nearest_option(arg);
			if (near)
				snprintf(msg, len, "%s: unknown option '%s'; did you mean '%s'? (see --help)", pn, arg, near);
			else
				snprintf(msg, len, "%s: unknown option '%s' (see --help)", pn, arg);
			return msg;
		} else {
			snprintf(msg, len, "%s: unexpected argument '%s' (expected NAME=path.npy, NAME.out=path.npy or an "
			         "option; see --help)", pn, arg);
			return msg;
		}
	}

	/* Defaults, and the inputs nobody named.  A param's entry keeps NULL
	 * when the program initialises it and no file was named. */
	for (int i = 0; i < prog->ntensors; i++) {
		const TrtTensor *t = &prog->tensors[i];
		if (rt.paths[i])
			continue;
		if (t->path) {
			rt.paths[i] = t->path;
		} else if (t->role == TRT_OUTPUT) {
			char *p = rt_alloc(strlen(t->name) + 5);
			sprintf(p, "%s.npy", t->name);
			rt.paths[i] = p;        /* lives as long as the program */
		} else if (t->role == TRT_INPUT) {
			snprintf(msg, len, "%s: input %s: no file given (add %s=path.npy; see --help)",
			         pn, t->name, t->name);
			return msg;
		}
	}
	return NULL;
}

void rt_cmdline(int argc, char **argv, const TrtProgram *progs, int nprogs)
{
	const TrtProgram *prog = rt.prog;
	char msg[1024];

	for (int a = 1; a < argc; a++)
		if (!strcmp(argv[a], "--help")) {
			if (rt.rank == 0) {
				print_help(prog);
				rt_plans_str(msg, sizeof msg, progs, nprogs);
				printf("\nplans for %s ranks; on another count, the plan for the largest count below it\n",
				       msg);
			}
			rt_exit(0);
		}
	rt.paths = rt_alloc(sizeof *rt.paths * (size_t)(prog->ntensors + 1));
	memset(rt.paths, 0, sizeof *rt.paths * (size_t)(prog->ntensors + 1));
	given = rt_alloc(sizeof *given * (size_t)(prog->ntensors + 1));
	memset(given, 0, sizeof *given * (size_t)(prog->ntensors + 1));
	const char *env = getenv("TRAC_PROFILE");
	if (env && *env && strcmp(env, "0"))
		rt.profile = 1;
	if (parse_args(argc, argv, prog, msg, sizeof msg)) {
		if (rt.rank == 0)
			fprintf(stderr, "%s\n", msg);
		rt_exit(1);
	}
}

int rt_path_given(int i)
{
	return given && given[i] != NULL;
}

/* ---- the files, before the first op ---- */

int rt_probe_write(const char *path)
{
	struct stat st;
	char *tmp = NULL;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return EISDIR;
	int fd = rt_make_temp(path, &tmp);
	int e = fd < 0 ? errno : 0;
	if (fd >= 0) {
		close(fd);
		rt_remove_temp(tmp);
	}
	free(tmp);
	return e;
}

/* Whether a and b name one file: the same one when both exist, else the
 * same name in the same folder (neither exists). */
static int same_file(const char *a, const char *b)
{
	struct stat sa, sb;
	int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;

	if (ea || eb)
		return ea && eb && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
	char da[PATH_MAX], db[PATH_MAX];
	const char *sla = strrchr(a, '/'), *slb = strrchr(b, '/');
	const char *ba = sla ? sla + 1 : a, *bb = slb ? slb + 1 : b;
	if (strcmp(ba, bb))
		return 0;
	snprintf(da, sizeof da, "%.*s", sla ? (int)(sla - a) + (sla == a) : 1, sla ? a : ".");
	snprintf(db, sizeof db, "%.*s", slb ? (int)(slb - b) + (slb == b) : 1, slb ? b : ".");
	char *ra = realpath(da, NULL), *rb = realpath(db, NULL);
	int same = ra && rb && !strcmp(ra, rb);
	free(ra);
	free(rb);
	return same;
}

/* A file the run writes: output entry i, or (i < 0) the --log file. */
static void writer_str(char *s, size_t len, const TrtProgram *prog, int i)
{
	if (i >= 0)
		snprintf(s, len, "output %s (%s)", prog->tensors[i].name, rt.paths[i]);
	else
		snprintf(s, len, "--log %s", rt.log_path);
}

/* Rank 0's verdict on the files written: an error line, or NULL. */
static const char *check_writes(const TrtProgram *prog, char *msg, size_t len)
{
	const char *pn = rt_progname();
	char w[600], hint[128];

	for (int i = -1; i < prog->ntensors; i++) {
		const char *path = i < 0 ? rt.log_path : rt.paths[i];
		if (i >= 0 && prog->tensors[i].role != TRT_OUTPUT)
			continue;
		if (!path)
			continue;
		writer_str(w, sizeof w, prog, i);
		if (i >= 0)
			snprintf(hint, sizeof hint, "%s.out=PATH", prog->tensors[i].name);
		else
			snprintf(hint, sizeof hint, "--log PATH");
		/* never over a file the run reads */
		for (int j = 0; j < prog->ntensors; j++) {
			const TrtTensor *r = &prog->tensors[j];
			if (r->role == TRT_OUTPUT || !rt.paths[j] || !same_file(path, rt.paths[j]))
				continue;
			snprintf(msg, len, "%s: %s: the file %s %s is read from; write it elsewhere (%s)", pn, w,
			         rt_role_name(r->role), r->name, hint);
			return msg;
		}
		const char *resume = rt_ckpt_resume();
		if (resume && same_file(path, resume)) {
			snprintf(msg, len, "%s: %s: the file --resume reads; write it elsewhere (%s)", pn, w, hint);
			return msg;
		}
		/* a .npz is a matrix's (scipy.sparse's csr, write.c): not a
		 * vector's, a scalar's or a higher tensor's, whose .npy bytes
		 * would sit under a name scipy and numpy read otherwise */
		if (i >= 0 && prog->tensors[i].rank != 2 && rt_ends_with(path, ".npz")) {
			snprintf(msg, len, "%s: %s: a .npz holds a matrix (scipy.sparse's csr), and %s has %d dimension%s; "
			         "write it to a .npy (%s)", pn, w, prog->tensors[i].name, prog->tensors[i].rank,
			         prog->tensors[i].rank == 1 ? "" : "s", hint);
			return msg;
		}
		/* nor two outputs into one file (a device such as /dev/null
		 * takes any number) */
		struct stat st;
		int device = stat(path, &st) == 0 && S_ISCHR(st.st_mode);
		for (int j = i + 1; j < prog->ntensors && !device; j++) {
			if (prog->tensors[j].role != TRT_OUTPUT || !same_file(path, rt.paths[j]))
				continue;
			snprintf(msg, len, "%s: %s and output %s both write %s; write one elsewhere (%s.out=PATH)", pn,
			         i < 0 ? "--log" : w, prog->tensors[j].name, rt.paths[j], prog->tensors[j].name);
			return msg;
		}
		int e = rt_probe_write(path);
		if (e) {
			if (i >= 0)
				rt_tensor_msg(msg, len, &prog->tensors[i], path, rt_errstr(e));
			else
				snprintf(msg, len, "%s: --log %s: %s", pn, path, rt_errstr(e));
			return msg;
		}
	}
	return NULL;
}

void rt_check_files(void)
{
	char msg[1024];

	rt_agree(rt.rank == 0 ? check_writes(rt.prog, msg, sizeof msg) : NULL);
}
