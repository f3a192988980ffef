/*
 * cc.c: finding the runtime, running the C compiler, and the temporary
 * files that go with it.
 *
 * The runtime (trac_rt.h, libtracrt.a) is looked for, in order:
 *   1. $TRAC_RUNTIME_DIR (a folder with both files; for tests and odd installs);
 *   2. the build tree, when this trac is the one built there;
 *   3. ../include and ../lib next to this trac's own folder (a moved install);
 *   4. the configured --prefix.
 * The compiler is $CC (default mpicc, the one configure found); the flags
 * are $CFLAGS if set, else -O3 -march=native -fno-math-errno
 * -fno-trapping-math: the program reads neither errno after a math
 * function nor the floating-point exception flags, and with them gcc
 * vectorises sqrt and if-converts a kernel's selects (relu, where, the
 * comparisons), which change no value.  No shell runs in between:
 * arguments go to the compiler as they are.
 *
 * Temporary files: the generated C goes to $TMPDIR (or /tmp) for the
 * compiler, and the output (-o, or the default) is written to a temporary
 * file beside it, made before any work (cg_output_temp: a folder that
 * cannot take it is an error before planning, not the linker's after) and
 * renamed onto it at the end (cg_output_commit).  Every one of them is
 * removed on any exit, by exit() (atexit) or by a signal (SIGINT, SIGTERM,
 * SIGHUP): trac leaves none behind, even on an internal error.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "codegen/codegen.h"

extern char **environ;

static bool is_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static bool try_dirs(const char *inc, const char *libdir, const char **incdir, const char **lib)
{
	char *h = xprintf("%s/trac_rt.h", inc);
	char *a = xprintf("%s/libtracrt.a", libdir);
	bool ok = is_file(h) && is_file(a);
	free(h);
	if (ok) {
		*incdir = xstrdup(inc);
		*lib = a;
	} else {
		free(a);
	}
	return ok;
}

bool cg_runtime(const char **incdir, const char **lib)
{
	const char *env = getenv("TRAC_RUNTIME_DIR");
	if (env && *env)
		return try_dirs(env, env, incdir, lib);

	bool in_build;
	char *self = tr_exe_dir(&in_build);
	if (self) {
		bool found = in_build && try_dirs(xprintf("%s/runtime", TRAC_SOURCE_DIR),
		                                  xprintf("%s/runtime", TRAC_BUILD_DIR), incdir, lib);
		if (!found)
			found = try_dirs(xprintf("%s/../include", self), xprintf("%s/../lib", self), incdir, lib);
		free(self);
		if (found)
			return true;
	}
	return try_dirs(TRAC_INCLUDEDIR, TRAC_LIBDIR, incdir, lib);
}

/* Split a flags string on blanks (no quoting: as make passes CFLAGS). */
typedef Vec(char *) StrVec;

static void split_flags(const char *s, StrVec *argv)
{
	while (*s) {
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s)
			break;
		const char *e = s;
		while (*e && *e != ' ' && *e != '\t')
			e++;
		char *w = xmalloc(e - s + 1);
		memcpy(w, s, e - s);
		w[e - s] = 0;
		vec_push(argv, w);
		s = e;
	}
}

/* ---- temporary files ---- */

enum { MAX_TEMPS = 4 };
static char *temps[MAX_TEMPS];
static volatile sig_atomic_t ntemps;

static void remove_temps(void)
{
	for (int i = 0; i < ntemps; i++)
		if (temps[i])
			unlink(temps[i]);
}

static void on_signal(int sig)
{
	remove_temps();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* path is removed on any exit until it is forgotten. */
static void track(char *path)
{
	static bool armed;
	if (!armed) {
		static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
		atexit(remove_temps);
		for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
			struct sigaction sa = {0}, old;
			if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
				continue;
			sa.sa_handler = on_signal;
			sigemptyset(&sa.sa_mask);
			sigaction(sigs[i], &sa, NULL);
		}
		armed = true;
	}
	for (int i = 0; i < ntemps; i++)
		if (!temps[i]) {
			temps[i] = path;
			return;
		}
	if (ntemps == MAX_TEMPS)
		tr_bug("more than %d temporary files", MAX_TEMPS);
	temps[ntemps] = path;
	ntemps++;
}

static void forget(const char *path)
{
	for (int i = 0; i < ntemps; i++)
		if (temps[i] == path)
			temps[i] = NULL;
}

/* Whether path names something other than a regular file (a device such
 * as /dev/null, a pipe): written through, never renamed over. */
static bool is_special(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

char *cg_output_temp(const char *path)
{
	struct stat st;
	const char *slash = strrchr(path, '/');
	int dirlen = slash ? (int)(slash - path) + 1 : 0;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(EISDIR));
		return NULL;
	}
	char *tmp;
	if (is_special(path)) {         /* (not opened now: a pipe's reader would see its end) */
		if (access(path, W_OK) < 0) {
			fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(errno));
			return NULL;
		}
		const char *tmpdir = getenv("TMPDIR");
		tmp = xprintf("%s/trac-out-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
	} else {
		tmp = xprintf("%.*s.%s.XXXXXX", dirlen, path, path + dirlen);
	}
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(errno));
		free(tmp);
		return NULL;
	}
	mode_t mask = umask(0);         /* mkstemp makes 0600: the mode open(2) gives */
	umask(mask);
	fchmod(fd, 0666 & ~mask);
	close(fd);
	track(tmp);
	return tmp;
}

/* The bytes of file tmp written into path (a device or pipe). */
static bool copy_into(const char *tmp, const char *path)
{
	int in = open(tmp, O_RDONLY), out = open(path, O_WRONLY);
	bool ok = in >= 0 && out >= 0;
	char buf[65536];
	ssize_t n;
	while (ok && (n = read(in, buf, sizeof buf)) != 0) {
		if (n < 0) {
			ok = errno == EINTR;
			continue;
		}
		for (ssize_t done = 0; ok && done < n;) {
			ssize_t w = write(out, buf + done, (size_t)(n - done));
			if (w < 0)
				ok = errno == EINTR;
			else
				done += w;
		}
	}
	int e = errno;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) < 0 && ok)
		ok = false, e = errno;
	errno = e;
	return ok;
}

bool cg_output_commit(char *tmp, const char *path)
{
	if (is_special(path)) {
		bool ok = copy_into(tmp, path);
		if (!ok)
			fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(errno));
		unlink(tmp);
		forget(tmp);
		free(tmp);
		return ok;
	}
	if (rename(tmp, path) < 0) {
		fprintf(stderr, "trac: error: cannot write '%s': %s\n", path, strerror(errno));
		return false;
	}
	forget(tmp);
	free(tmp);
	return true;
}

/* ---- the C compiler ---- */

bool cg_compile(const char *csource, const char *out, bool verbose)
{
	const char *incdir, *lib;
	if (!cg_runtime(&incdir, &lib)) {
		fprintf(stderr, "trac: error: cannot find the trac runtime (trac_rt.h and libtracrt.a); "
		        "set TRAC_RUNTIME_DIR to the folder that holds them\n");
		return false;
	}

	const char *tmpdir = getenv("TMPDIR");
	char *cpath = xprintf("%s/trac-XXXXXX.c", tmpdir && *tmpdir ? tmpdir : "/tmp");
	int fd = mkstemps(cpath, 2);
	if (fd < 0) {
		fprintf(stderr, "trac: error: cannot create a temporary file %s: %s\n", cpath, strerror(errno));
		free(cpath);
		return false;
	}
	track(cpath);
	size_t len = strlen(csource);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, csource + off, len - off);
		if (w < 0) {
			fprintf(stderr, "trac: error: cannot write %s: %s\n", cpath, strerror(errno));
			close(fd);
			unlink(cpath);
			forget(cpath);
			free(cpath);
			return false;
		}
		off += w;
	}
	close(fd);

	StrVec argv = {0};
	const char *cc = getenv("CC");
	split_flags(cc && *cc ? cc : TRAC_MPICC, &argv);
	const char *cflags = getenv("CFLAGS");
	split_flags(cflags ? cflags : "-O3 -march=native -fno-math-errno -fno-trapping-math", &argv);
	vec_push(&argv, xprintf("-I%s", incdir));
	vec_push(&argv, xstrdup(cpath));
	vec_push(&argv, xstrdup("-o"));
	vec_push(&argv, xstrdup(out));
	vec_push(&argv, xstrdup(lib));
	split_flags(TRAC_RT_DEPLIBS, &argv);
	vec_push(&argv, xstrdup("-lm"));
	vec_push(&argv, NULL);

	if (verbose) {
		fprintf(stderr, "trac: running");
		for (int i = 0; argv.v[i]; i++)
			fprintf(stderr, " %s", argv.v[i]);
		fprintf(stderr, "\n");
	}
	pid_t pid;
	int status = 0;
	int err = posix_spawnp(&pid, argv.v[0], NULL, NULL, argv.v, environ);
	bool ok = false;
	if (err) {
		fprintf(stderr, "trac: error: cannot run the C compiler '%s': %s%s\n", argv.v[0], strerror(err),
		        cc ? "" : " (is Open MPI installed? set CC to another MPI C compiler)");
	} else if (waitpid(pid, &status, 0) < 0) {
		fprintf(stderr, "trac: error: waiting for the C compiler: %s\n", strerror(errno));
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		/* the output's folder was tried before any work: the C is at fault */
		fprintf(stderr, "trac: internal error: the C compiler failed on the generated code;\n"
		        "trac: this is a bug in trac; please report it with the program that shows it\n"
		        "trac: (trac -S writes the C).\n");
		for (int i = 0; argv.v[i]; i++)
			free(argv.v[i]);
		vec_free(&argv);
		exit(4);                /* removes the temporary files */
	} else {
		ok = true;
	}
	unlink(cpath);
	forget(cpath);
	free(cpath);
	for (int i = 0; argv.v[i]; i++)
		free(argv.v[i]);
	vec_free(&argv);
	return ok;
}
