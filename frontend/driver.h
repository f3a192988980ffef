/*
 * driver.h: the driver, the one part of trac above every layer.
 *
 *   cmdline.c    trac's command line: options, usage, --block/--place/--strategy
 *   pipeline.c   the pipeline, source -> IA plan, for trac and the fuzzer
 *   main.c       trac itself: the pipeline, then explain or C
 *
 * The layers (frontend.h, ir.h, opt.h, codegen.h) never include this file;
 * the driver includes them all.  tests/fuzz/fuzz_trac.c runs trac_pipeline
 * as main.c does, so the two cannot drift apart.
 */
#ifndef TRAC_DRIVER_H
#define TRAC_DRIVER_H

#include "frontend/frontend.h"
#include "optimizer/opt.h"
#include "codegen/codegen.h"

#define MAX_RANKS 1000000       /* the most ranks trac plans for (-P) */

/* ---- pipeline.c ---- */

/* --dump-after=PASS: the IR printed after a pass, then trac stops.  The
 * row's name is the option's value. */
#define DUMP_PASSES(X) \
	X(DUMP_PARSE, "parse")          /* the AST */ \
	X(DUMP_TRA, "tra")              /* TRA after autodiff and hoisting */ \
	X(DUMP_BLOCKING, "blocking")    /* TRA with its chunk shapes */ \
	X(DUMP_IA, "ia")                /* the chosen IA plan, with costs unless --no-costs */

typedef enum {
	DUMP_NONE,
#define X(id, name) id,
	DUMP_PASSES(X)
#undef X
} DumpPass;

/* The pass named `name`, or DUMP_NONE. */
DumpPass trac_dump_pass(const char *name);

/* What the caller does between passes (any hook may be NULL). */
typedef struct PipelineHooks {
	void *ctx;
	/* After lowering: true goes on; false stops with *status (0 or 1). */
	bool (*lowered)(void *ctx, const TraProg *p, int *status);
	/* Before contraction order: set the pins in *o, which name the program's tensors and statements. */
	void (*pins)(void *ctx, const TraProg *p, OptOptions *o);
	/* A phase has ended (-v). */
	void (*phase)(void *ctx, const char *name);
} PipelineHooks;

typedef struct Pipeline {
	/* in */
	FeOptions fe;
	OptOptions opt;
	DumpPass dump_after;
	bool costs;             /* in the IA dump */
	bool syntax_only;
	PipelineHooks hooks;
	/* out, freed by trac_pipeline_free */
	Arena *arena;           /* the AST's */
	Ast *ast;
	TraProg *prog;
	IaPlan *plan;
	char *ist_sizes[MAXSPLIT];      /* trac_ist_body: the split sizes' subnet extents */
} Pipeline;

/* Source file -> IA plan: parse, check and lower, autodiff, hoisting,
 * contraction order, blocking, the plan search, the memory check; the
 * verifiers after each pass.  Returns -1 with pl->plan set, or the exit
 * status where the pipeline stopped: 0 where asked to (a dump on `out`,
 * -fsyntax-only, a hook), 1 on errors in the program (reported). */
int trac_pipeline(Pipeline *pl, int file, FILE *out);
void trac_pipeline_free(Pipeline *pl);

/* IST loops (HACKING.md "IST"): whether every split size of program p
 * divides among nranks (else the first that does not, in *loop, *split);
 * and IST loop `loop`'s body compiled apart, for a plan of nranks ranks:
 * base's options with each split size H bound to H / nranks, one rank,
 * only that loop's body (FeOptions.ist_local).  trac_ist_body returns as
 * trac_pipeline does; trac_ist_body_free frees what it made. */
bool trac_ist_divides(const TraProg *p, int nranks, const IstLoop **loop, int *split);
int trac_ist_body(const Pipeline *base, const TraProg *whole, int nranks, int loop, int file, Pipeline *body);
void trac_ist_body_free(Pipeline *body);

/* ---- cmdline.c ---- */

typedef struct Cmdline {
	const char *input;
	const char *output;
	bool emit_c;
	bool explain;
	ExplainFormat explain_format;
	bool verbose;
	uint64_t seed;
	const char *machine;            /* --machine FILE (or TRAC_MACHINE) */
	struct {
		bool print;             /* -M, -MM: print the rule and stop */
		bool write;             /* -MD, -MMD: write it and go on */
		bool no_stdlib;         /* -MM, -MMD: leave out stdlib files */
		bool phony;             /* -MP */
		const char *file;       /* -MF */
		Vec(const char *) targets;      /* -MT, -MQ (already quoted) */
	} deps;
	Vec(Define) defines;
	Vec(const char *) incdirs;
	Vec(const char *) blockspecs;   /* --block NAME=B..., resolved after sema */
	Vec(const char *) placespecs;   /* --place NAME=PLACEMENT */
	Vec(const char *) nnzspecs;     /* --nnz NAME=COUNT */
	Vec(const char *) stratspecs;   /* --strategy LINE=STRATEGY */
	Vec(int) ranks;                 /* -P: the rank counts to plan for, increasing */
	bool ranks_default;             /* no -P: counts whose plan is over --mem-per-rank are left out */
	Pipeline pipe;                  /* what the options ask of the pipeline */
} Cmdline;

/* Parse argv into *c (defaults first); --help and --version print and exit 0,
 * a usage error exits 2. */
void cmdline_parse(int argc, char **argv, Cmdline *c);

/* --block NAME=..., --place NAME=... and --strategy LINE=... as pins in *o,
 * now that the program's tensors and statements are known; exits 2 on a
 * name or line the program does not have. */
void cmdline_resolve_pins(const Cmdline *c, const TraProg *p, OptOptions *o);

_Noreturn void cmdline_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
