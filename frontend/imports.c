/*
 * imports.c: import "file.tra": the file found beside the importer, on the
 * -I path or in the stdlib, read once, its items checked in place (sema.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/sema.h"

#define MAX_IMPORT_DEPTH 32

static char *find_import(Sema *s, const char *path, int from_file)
{
	Vec(char *) tried = {0};
	char *found = NULL;
	if (path[0] == '/') {
		vec_push(&tried, xstrdup(path));
	} else {
		const char *from = src_get(from_file)->path;
		const char *slash = strrchr(from, '/');
		vec_push(&tried, slash ? xprintf("%.*s/%s", (int)(slash - from), from, path) : xstrdup(path));
		for (int i = 0; i < s->opt->nincdirs; i++)
			vec_push(&tried, xprintf("%s/%s", s->opt->incdirs[i], path));
		vec_push(&tried, xprintf("%s/%s", fe_stdlib_dir(), path));
	}
	for (int i = 0; i < tried.n && !found; i++) {
		struct stat st;
		if (stat(tried.v[i], &st) == 0 && S_ISREG(st.st_mode))
			found = xstrdup(tried.v[i]);
	}
	for (int i = 0; i < tried.n; i++)
		free(tried.v[i]);
	vec_free(&tried);
	return found;
}


void fe_check_import(Sema *s, Item *it)
{
	const char *path = it->u.import.path;
	int from = s->files.v[s->files.n - 1];
	char *file = find_import(s, path, from);
	if (!file) {
		Buf where = {0};
		buf_puts(&where, "the importing file's folder");
		for (int i = 0; i < s->opt->nincdirs; i++)
			buf_printf(&where, ", %s", s->opt->incdirs[i]);
		buf_printf(&where, " and %s", fe_stdlib_dir());
		diag(DIAG_ERROR, it->u.import.pathloc, "cannot find '%s' (looked in %s)", path, where.s);
		buf_free(&where);
		return;
	}
	char real[PATH_MAX];
	if (!realpath(file, real))
		snprintf(real, sizeof real, "%s", file);
	for (int i = 0; i < s->importing.n; i++)
		if (!strcmp(s->importing.v[i], real)) {
			Buf chain = {0};
			for (int j = i; j < s->importing.n; j++)
				buf_printf(&chain, "%s%s", j > i ? " imports " : "", s->shown.v[j]);
			diag(DIAG_ERROR, it->u.import.pathloc, "import cycle: %s imports %s", chain.s, file);
			buf_free(&chain);
			free(file);
			return;
		}
	for (int i = 0; i < s->imports.n; i++)
		if (!strcmp(s->imports.v[i], real)) {
			free(file);
			return;         /* imported already: once is enough */
		}
	if (s->importing.n >= MAX_IMPORT_DEPTH) {
		diag(DIAG_ERROR, it->u.import.pathloc, "imports nested more than %d deep", MAX_IMPORT_DEPTH);
		free(file);
		return;
	}
	const char *err;
	int fid = fe_load(file, &err);
	if (fid < 0) {
		diag(DIAG_ERROR, it->u.import.pathloc, "cannot read '%s': %s", file, err);
		free(file);
		return;
	}
	fe_add_dep(s->opt, file);
	vec_push(&s->imports, xstrdup(real));
	Ast *ast = fe_parse(s->arena, fid);
	if (diag_errors() > s->nerr_before) {
		free(file);
		return;
	}
	vec_push(&s->importing, xstrdup(real));
	vec_push(&s->shown, file);
	vec_push(&s->files, fid);
	fe_check_items(s, ast->items, ast->nitems);
	s->files.n--;
	free(s->importing.v[--s->importing.n]);
	free(s->shown.v[--s->shown.n]);
}

