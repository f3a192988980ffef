/*
 * fuzz_trac.c: one fuzz input through the whole compiler up to C emission.
 *
 *   text -> fe_parse -> fe_compile -> opt_autodiff -> opt_hoist -> opt_contract
 *        -> opt_block -> opt_plan -> ia_explain, cg_emit
 *
 * (the driver's pipeline, frontend/main.c; keep the two in step)
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

#include "frontend/frontend.h"
#include "optimizer/opt.h"
#include "codegen/codegen.h"

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

	FeOptions fe = {0};
	fe.warnings = true;
	fe.nranks = 1 + (int)(h % 5);
	const char *inc[1] = {fe_stdlib_dir()};
	fe.incdirs = inc;
	fe.nincdirs = 1;
	static Machine machine;
	machine_default(&machine);
	OptOptions opt = {0};
	opt.level = (h >> 8) % 3 == 0 ? 0 : 2;
	opt.nranks = fe.nranks;
	opt.verify = true;
	opt.machine = &machine;
	opt.alternatives = (h >> 12) % 4 == 0;

	Arena *arena = arena_new();
	Ast *ast = fe_parse(arena, file);
	TraProg *prog = NULL;
	IaPlan *plan = NULL;
	if (diag_errors())
		goto done;
	prog = fe_compile(ast, &fe);
	if (!prog)
		goto done;
	Buf err = {0};
	if (!tra_verify(prog, &err))
		tr_bug("TRA program invalid after lowering: %s", err.s);
	opt_autodiff(prog);
	if (diag_errors())
		goto done;
	if (!tra_verify(prog, &err))
		tr_bug("TRA program invalid after autodiff: %s", err.s);
	if (opt.level > 0) {
		opt_hoist(prog);
		if (!tra_verify(prog, &err))
			tr_bug("TRA program invalid after hoisting: %s", err.s);
		opt_contract(prog, &opt);
		if (!tra_verify(prog, &err))
			tr_bug("TRA program invalid after contraction order: %s", err.s);
	}
	opt_block(prog, &opt);
	if (!tra_verify(prog, &err))
		tr_bug("TRA program invalid after blocking: %s", err.s);
	plan = opt_plan(prog, &opt);
	if (diag_errors())
		goto done;
	Buf x = {0};
	ia_explain(&x, plan, opt.alternatives ? EXPLAIN_ALL : (ExplainFormat)((h >> 16) % 3), (h >> 20) & 1);
	buf_free(&x);
	Buf c = {0};
	CgOptions cg = {"fuzz", "fuzz.tra", 0};
	cg_emit(&c, plan, &cg);
	buf_free(&c);
done:
	if (plan)
		ia_free(plan);
	if (prog)
		tra_free(prog);
	for (int i = 0; i < fe.ndeps; i++)
		free((char *)fe.deps[i]);
	free(fe.deps);
	arena_free(arena);
	return 0;
}
