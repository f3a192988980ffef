/*
 * codegen.h: the one header of the codegen/ layer.
 *
 *   emit.c   IA plans -> one C file: tables of tensors, types and ops,
 *            a generated kernel per join or map, and main(), straight-line
 *            SPMD code calling libtracrt in plan order (with tables.c,
 *            body.c, kernel.c, conv.c and sparse.c, which share emit.h)
 *   cc.c     finding the runtime and running the C compiler (mpicc, or $CC)
 */
#ifndef TRAC_CODEGEN_H
#define TRAC_CODEGEN_H

#include "ir/ir.h"

typedef struct CgOptions {
	const char *program;    /* name for messages and --help */
	const char *source;     /* the .tra file, for the header comment */
	uint64_t seed;          /* default --seed baked in */
	/* the IST loops' bodies, each compiled apart for one rank on the
	 * subnet: ist[k * nist + i] is loop i's under plans[k] */
	const IaPlan *const *ist;
	int nist;
} CgOptions;

/* ---- emit.c ---- */

/* plans[0..nplans): one program's plans for increasing rank counts; the
 * executable runs the one for the rank count it meets (trt_init). */
void cg_emit(Buf *out, const IaPlan *const *plans, int nplans, const CgOptions *o);

/* ---- cc.c ---- */

/* Compile C source text into an executable at `out`.  Returns false (after
 * printing why) if the compiler could not be run or failed. */
bool cg_compile(const char *csource, const char *out, bool verbose);

/* The temporary file beside path that an output (-o) is written to, made
 * now, so that a folder that cannot take it is an error before any work;
 * NULL after printing why (path is a folder, or the folder cannot take a
 * file).  It is removed on any exit or signal until cg_output_commit
 * renames it onto path (false after printing why). */
char *cg_output_temp(const char *path);
bool cg_output_commit(char *tmp, const char *path);

/* Where the runtime is: its header's folder and its library file. */
bool cg_runtime(const char **incdir, const char **lib);

#endif
