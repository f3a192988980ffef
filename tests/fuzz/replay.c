/*
 * replay.c: run fuzz inputs through the fuzz harness without libFuzzer.
 *
 *   replay FILE-OR-FOLDER...
 *
 * Each file is one input to LLVMFuzzerTestOneInput (fuzz_trac.c).  `make
 * check` replays tests/fuzz/regress/ (every crasher the fuzzer ever found,
 * minimised) and the seed programs; a crash, a sanitizer report or an
 * internal error (exit 4) fails the test, and the name of the input being
 * run is printed first so the failure names it.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "replay: cannot open '%s': %s\n", path, strerror(errno));
		return 1;
	}
	size_t cap = 1 << 16, n = 0, k;
	unsigned char *buf = malloc(cap);
	while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
		n += k;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	if (!buf) {
		fprintf(stderr, "replay: out of memory reading '%s'\n", path);
		return 1;
	}
	printf("replay: %s\n", path);
	fflush(stdout);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_path(const char *path)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: '%s': %s\n", path, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path);
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "replay: '%s': %s\n", path, strerror(errno));
		return 1;
	}
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		names = realloc(names, (n + 1) * sizeof *names);
		names[n] = malloc(strlen(path) + strlen(e->d_name) + 2);
		sprintf(names[n++], "%s/%s", path, e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof *names, cmp_names);  /* a stable order in logs */
	int fails = 0;
	for (size_t i = 0; i < n; i++) {
		fails += run_path(names[i]);
		free(names[i]);
	}
	free(names);
	return fails;
}

int main(int argc, char **argv)
{
	int fails = 0, count = 0;
	for (int i = 1; i < argc; i++, count++)
		fails += run_path(argv[i]);
	if (count == 0) {
		fprintf(stderr, "usage: replay FILE-OR-FOLDER...\n");
		return 2;
	}
	return fails ? 1 : 0;
}
