/*
 * fuzz_trac.c: one fuzz input through the whole compiler up to C emission.
 *
 *   trac_pipeline (frontend/pipeline.c: the front end, the plan for the
 *   count, the IST bodies, as trac runs it) -> ia_explain, cg_emit
 *
 * The C compiler is not run: the harness checks that no input crashes trac,
 * trips a sanitizer or a verifier (tr_bug exits 4, which libFuzzer reports
 * as a crash), or runs away.  Each input is also planned for a rank count
 * and optimisation level taken from its own bytes, so one corpus covers
 * -P1..-P5 and -O0/-O2 deterministically.
 *
 * The same function serves libFuzzer (`make fuzz`, clang -fsanitize=fuzzer)
 * and the replay driver (replay.c, `make check`), which runs the stored
 * crashers in tests/fuzz/regress/ and the seed programs under the normal
 * (and the ASan + UBSan) build.
 */
#include <stdlib.h>
#include <string.h>

#include "frontend/driver.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Inputs bigger than this are not interesting and only slow the fuzzer. */
#define FUZZ_MAX_INPUT (256 * 1024)

static FILE *devnull;

static void setup(void)
{
	if (devnull)
		return;
	devnull = fopen("/dev/null", "w");
	if (!getenv("TRAC_FUZZ_VERBOSE"))
		diag_out = devnull;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	if (size > FUZZ_MAX_INPUT)
		return 0;
	setup();
	diag_reset();
	src_reset();

	/* fe_load's rules for what is text, without the file */
	if (memchr(data, 0, size))
		return 0;
	char *text = xmalloc(size + 1);
	memcpy(text, data, size);
	text[size] = 0;
	int file = src_add("fuzz.tra", text, size);

	unsigned h = 0;
	for (size_t i = 0; i < size; i++)
		h = h * 31 + data[i];

	Pipeline pl = {0};
	pl.fe.warnings = true;
	const char *inc[1] = {fe_stdlib_dir()};
	pl.fe.incdirs = inc;
	pl.fe.nincdirs = 1;
	static Machine machine;
	machine_default(&machine);
	pl.opt.level = (h >> 8) % 3 == 0 ? 0 : 2;
	int nranks = 1 + (int)(h % 5);
	pl.ranks = &nranks;
	pl.nranks = 1;
	pl.opt.verify = true;
	pl.opt.machine = &machine;
	pl.opt.alternatives = (h >> 12) % 4 == 0;
	pl.opt.objective = (h >> 24) % 4 == 0 ? OBJ_FLOATS : OBJ_SECONDS;      /* --objective */

	if (trac_pipeline(&pl, file, devnull) < 0) {
		Buf x = {0};
		ia_explain(&x, pl.plans[0], pl.opt.alternatives ? EXPLAIN_ALL : (ExplainFormat)((h >> 16) % 3), (h >> 20) & 1);
		buf_free(&x);
		Buf c = {0};
		CgOptions cg = {"fuzz", "fuzz.tra", 0, pl.ist, pl.prog->ist.n};
		cg_emit(&c, (const IaPlan *const *)pl.plans, pl.nplans, &cg);
		buf_free(&c);
	}
	trac_pipeline_free(&pl);
	return 0;
}
