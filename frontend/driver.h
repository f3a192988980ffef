/*
 * driver.h: the driver, the one part of trac above every layer.
 *
 *   cmdline.c    trac's command line: options, usage, --block/--place/--strategy
 *   pipeline.c   the pipeline, source -> an IA plan per rank count, for trac
 *                and the fuzzer
 *   ist.c        IST loops' bodies: the subnet's program, cut from the TRA
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
	X(DUMP_BLOCKING, "blocking")    /* TRA at the first count's automatic chunk shapes */ \
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
	OptOptions opt;                 /* nranks: each count's, set by the pipeline */
	const int *ranks;               /* -P: the rank counts to plan for, increasing */
	int nranks;
	bool ranks_default;             /* no -P: a count over --mem-per-rank or that an IST
	                                 * split size does not divide is left out */
	DumpPass dump_after;
	bool costs;                     /* in the IA dump */
	bool syntax_only;
	PipelineHooks hooks;
	/* out, freed by trac_pipeline_free */
	Arena *arena;                   /* the AST's */
	Ast *ast;
	TraProg *prog;                  /* the front end's program, read only once made */
	int nplans;
	IaPlan **plans;                 /* per count kept, increasing */
	const IaPlan **ist;             /* plans[k]'s IST loop i's body: ist[k * prog->ist.n + i] */
	struct PipeState *state;        /* pipeline.c's */
} Pipeline;

/* Source file -> one IA plan per rank count.  The front end runs once:
 * parse, check and lower, autodiff, hoisting, contraction order, sparsity,
 * scatter fusion, the verifiers after each pass; the program it makes is
 * read only from then on, and each count of pl->ranks is planned from it
 * (opt_plan), then each plan's IST loops' bodies.  Returns -1 with the
 * plans set, or the exit status where the pipeline stopped: 0 where asked
 * to (a dump on `out`, -fsyntax-only, a hook), 1 on errors in the program
 * (reported). */
int trac_pipeline(Pipeline *pl, int file, FILE *out);
void trac_pipeline_free(Pipeline *pl);

/* ---- ist.c: IST loops' bodies (HACKING.md "IST") ---- */

/* Whether every split size of program p divides among nranks (else the
 * first that does not, in *loop, *split). */
bool trac_ist_divides(const TraProg *p, int nranks, const IstLoop **loop, int *split);
/* Each IST loop's body, which sema leaves in program p, taken out into a
 * program of its own (p's extents); p's loops are left empty. */
typedef struct IstBodies IstBodies;
IstBodies *trac_ist_split(TraProg *p);
/* IST loop `loop`'s body planned for a plan of nranks ranks: its split
 * sizes' dims cut to H / nranks, the front end's passes after lowering,
 * then the plan for one rank under o (o's pins are the program's: left
 * out).  `quiet`: the passes' warnings unsaid (a count after the first).
 * NULL after an error (reported).  The plan lives as long as b. */
IaPlan *trac_ist_plan(IstBodies *b, int loop, int nranks, const OptOptions *o, bool quiet);
void trac_ist_free(IstBodies *b);

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
	const char *machine_how;        /* where the model came from, for -v */
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
