/*
 * paths.c: where trac finds its files, and the files a compilation reads.
 *
 * The stdlib folder, in order: $TRAC_STDLIB_DIR; the source tree's stdlib/
 * when this trac is the one in the build tree; ../share/trac/stdlib next to
 * this trac's own folder (a moved install); the configured one.
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
	char self[PATH_MAX], build[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash)
			*slash = 0;
		if (realpath(TRAC_BUILD_DIR, build) && !strcmp(build, self))
			return dir = xprintf("%s/stdlib", TRAC_SOURCE_DIR);
		char *rel = xprintf("%s/../share/trac/stdlib", self);
		if (is_dir(rel))
			return dir = rel;
		free(rel);
	}
	return dir = xstrdup(TRAC_STDLIBDIR);
}

void fe_add_dep(FeOptions *o, const char *path)
{
	for (int i = 0; i < o->ndeps; i++)
		if (!strcmp(o->deps[i], path))
			return;
	o->deps = xrealloc(o->deps, (o->ndeps + 1) * sizeof *o->deps);
	o->deps[o->ndeps++] = xstrdup(path);
}
