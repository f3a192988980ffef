/*
 * paths.c: where trac finds its files, the files a compilation reads, and
 * the make rule that names them (-M, -MD).
 *
 * The stdlib folder, in order: $TRAC_STDLIB_DIR; the source tree's stdlib/
 * when this trac is the one in the build tree; ../share/trac/stdlib next to
 * this trac's own folder (a moved install); the configured one.  This is the
 * order codegen/cc.c uses for the runtime.
 *
 * The rule is written as gcc writes it (libcpp's mkdeps): the same quoting
 * of targets and prerequisites, the same wrapping at column 72, and with -MP
 * an empty rule for each prerequisite but the main file.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "frontend/frontend.h"

static bool is_dir(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *fe_stdlib_dir(void)
{
	static char *dir;
	if (dir)
		return dir;
	const char *env = getenv("TRAC_STDLIB_DIR");
	if (env && *env)
		return dir = xstrdup(env);
	bool in_build;
	char *self = tr_exe_dir(&in_build);
	if (self) {
		char *rel = in_build ? xprintf("%s/stdlib", TRAC_SOURCE_DIR) : xprintf("%s/../share/trac/stdlib", self);
		free(self);
		if (in_build || is_dir(rel))
			return dir = rel;
		free(rel);
	}
	return dir = xstrdup(TRAC_STDLIBDIR);
}

/* The machine model `make install` put beside the stdlib, if any; never
 * for a trac in its build tree, whose plans the tests pin. */
const char *fe_machine_file(void)
{
	bool in_build;
	char *self = tr_exe_dir(&in_build);
	if (!self || in_build) {
		free(self);
		return NULL;
	}
	static char *path;
	struct stat st;
	free(path);
	path = xprintf("%s/../share/trac/machine.model", self);
	free(self);
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
		return path;
	free(path);
	path = xstrdup(TRAC_MACHINE_FILE);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) ? path : NULL;
}

/* trac-calibrate, the quick calibration (runtime/quickcal.c): the build
 * tree's for a trac in it, else in ../libexec/trac beside this trac's
 * folder (a moved install), else the configured one. */
const char *fe_calibrate_helper(void)
{
	static char *path;
	bool in_build;
	char *self = tr_exe_dir(&in_build);
	free(path);
	path = !self ? NULL : in_build ? xprintf("%s/runtime/trac-calibrate", TRAC_BUILD_DIR)
	                               : xprintf("%s/../libexec/trac/trac-calibrate", self);
	free(self);
	if (path && access(path, X_OK) == 0)
		return path;
	free(path);
	path = xstrdup(TRAC_CALIBRATE_HELPER);
	return access(path, X_OK) == 0 ? path : NULL;
}

void fe_add_dep(FeOptions *o, const char *path)
{
	for (int i = 0; i < o->ndeps; i++)
		if (!strcmp(o->deps[i], path))
			return;
	o->deps = xrealloc(o->deps, (o->ndeps + 1) * sizeof *o->deps);
	o->deps[o->ndeps++] = xstrdup(path);
}

/* `s` as make reads it in a rule: '$' doubled, blanks and '#' escaped with
 * a backslash (doubling the backslashes just before a blank), as gcc's -MQ
 * and default targets. */
char *fe_make_quote(const char *s)
{
	Buf b = {0};
	for (const char *p = s; *p; p++) {
		if (*p == ' ' || *p == '\t') {
			for (const char *q = p - 1; q >= s && *q == '\\'; q--)
				buf_puts(&b, "\\");
			buf_puts(&b, "\\");
		} else if (*p == '$') {
			buf_puts(&b, "$");
		} else if (*p == '#') {
			buf_puts(&b, "\\");
		}
		buf_printf(&b, "%c", *p);
	}
	return b.s ? b.s : xstrdup("");
}

static bool in_stdlib(const char *path)
{
	const char *dir = fe_stdlib_dir();
	size_t n = strlen(dir);
	return !strncmp(path, dir, n) && path[n] == '/';
}

/* One word of a rule, wrapped the way gcc wraps: a word that would pass
 * column 72 goes on a new line, after " \" on the line before. */
static void rule_word(Buf *b, int *col, const char *word, bool first)
{
	int n = (int)strlen(word);
	if (!first) {
		if (*col + 1 + n > 72) {
			buf_puts(b, " \\\n");
			*col = 0;
		}
		buf_puts(b, " ");
		(*col)++;
	}
	buf_puts(b, word);
	*col += n;
}

void fe_deps_rule(Buf *b, const char *const *targets, int ntargets, const FeOptions *o, bool phony,
                  bool no_stdlib)
{
	int col = 0;
	for (int i = 0; i < ntargets; i++)
		rule_word(b, &col, targets[i], i == 0);
	buf_puts(b, ":");
	col++;
	for (int i = 0; i < o->ndeps; i++) {
		if (no_stdlib && i > 0 && in_stdlib(o->deps[i]))
			continue;
		char *q = fe_make_quote(o->deps[i]);
		rule_word(b, &col, q, false);
		free(q);
	}
	buf_puts(b, "\n");
	if (!phony)
		return;
	/* -MP: each import also a target of its own, with no recipe, so that
	 * make does not stop when one is deleted; the main file is left out */
	for (int i = 1; i < o->ndeps; i++) {
		if (no_stdlib && in_stdlib(o->deps[i]))
			continue;
		char *q = fe_make_quote(o->deps[i]);
		buf_printf(b, "%s:\n", q);
		free(q);
	}
}
