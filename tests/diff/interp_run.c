/*
 * interp_run.c: a .tra program's plans through the IA interpreter
 * (optimizer/interp.c), for the differential tests (tests/diff/).
 *
 *   interp_run FILE.tra INDIR OUTDIR BLOCK LEVEL:SITES ...
 *
 * For each LEVEL:SITES the program is planned as trac plans it (the same
 * pipeline, frontend/pipeline.c, at -OLEVEL -P SITES, --block BLOCK when
 * BLOCK > 0) and the plan is interpreted over SITES simulated sites.  An
 * input, or a param read from a file, is read from INDIR/NAME.f64 (f64,
 * row-major); each output is written to OUTDIR/LEVEL-SITES/NAME.f64.
 * Params with random initialisers start from the interpreter's stand-ins,
 * so difftest.py compares those programs' interpreted outputs only among
 * themselves.  Exit 0; 1 when the program does not compile; 3 when a plan
 * breaks an invariant under the interpreter (the message on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/driver.h"

static Dense *read_dense(const char *dir, const Tensor *t)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.f64", dir, t->name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	int64_t n;
	Dense *d = dense_zeros(t, &n);
	if (fread(d->v, sizeof *d->v, (size_t)n, f) != (size_t)n) {
		fprintf(stderr, "interp_run: %s: short file\n", path);
		exit(2);
	}
	fclose(f);
	return d;
}

static void write_dense(const char *dir, const char *name, const Dense *d)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/%s.f64", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f) {
		fprintf(stderr, "interp_run: %s: %s\n", path, strerror(errno));
		exit(2);
	}
	int64_t n = 1;
	for (int i = 0; i < d->rank; i++)
		n *= d->shape[i];
	fwrite(d->v, sizeof *d->v, (size_t)n, f);
	fclose(f);
}

/* One plan: 0, or the exit status. */
static int run(const char *text, size_t size, const char *indir, const char *outdir, long block, int level,
               int sites)
{
	diag_reset();
	src_reset();
	int file = src_add("prog.tra", xstrdup(text), size);
	Pipeline pl = {0};
	const char *inc[1] = {fe_stdlib_dir()};
	pl.fe.incdirs = inc;
	pl.fe.nincdirs = 1;
	static Machine machine;
	machine_default(&machine);
	pl.opt.level = level;
	pl.ranks = &sites;
	pl.nranks = 1;
	pl.opt.block = block;
	pl.opt.verify = true;
	pl.opt.machine = &machine;
	if (trac_pipeline(&pl, file, stderr) >= 0) {
		trac_pipeline_free(&pl);
		return 1;
	}
	const TraProg *p = pl.plans[0]->tra;
	Dense **in = xcalloc(p->tensors.n + 1, sizeof *in), **out = xcalloc(p->tensors.n + 1, sizeof *out);
	for (int t = 0; t < p->tensors.n; t++) {
		const Tensor *ten = &p->tensors.v[t];
		if (ten->role == TENSOR_INPUT || (ten->role == TENSOR_PARAM && ten->init == INIT_FILE))
			in[t] = read_dense(indir, ten);
	}
	Buf err = {0};
	int status = 0;
	if (!ia_interpret(pl.plans[0], sites, in, out, &err)) {
		fprintf(stderr, "interp_run: -O%d on %d sites: %s\n", level, sites, err.s ? err.s : "");
		status = 3;
	} else {
		char dir[4096];
		snprintf(dir, sizeof dir, "%s/%d-%d", outdir, level, sites);
		mkdir(dir, 0777);
		for (int t = 0; t < p->tensors.n; t++)
			if (p->tensors.v[t].output && out[t])
				write_dense(dir, p->tensors.v[t].name, out[t]);
	}
	for (int t = 0; t < p->tensors.n; t++) {
		dense_free(in[t]);
		dense_free(out[t]);
	}
	free(in);
	free(out);
	buf_free(&err);
	trac_pipeline_free(&pl);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: interp_run FILE.tra INDIR OUTDIR BLOCK LEVEL:SITES ...\n");
		return 2;
	}
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		fprintf(stderr, "interp_run: %s: %s\n", argv[1], strerror(errno));
		return 2;
	}
	char *text = NULL;
	size_t n = 0, cap = 0, got;
	do {
		if (n + 65536 + 1 > cap)
			text = xrealloc(text, cap = 2 * cap + 65536 + 1);
		got = fread(text + n, 1, 65536, f);
		n += got;
	} while (got > 0);
	text[n] = 0;
	fclose(f);
	int status = 0;
	for (int i = 5; i < argc && !status; i++) {
		int level, sites;
		if (sscanf(argv[i], "%d:%d", &level, &sites) != 2) {
			fprintf(stderr, "interp_run: %s: expected LEVEL:SITES\n", argv[i]);
			return 2;
		}
		status = run(text, n, argv[2], argv[3], atol(argv[4]), level, sites);
	}
	free(text);
	return status;
}
