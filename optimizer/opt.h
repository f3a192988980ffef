/*
 * opt.h: the one header of the optimizer/ layer.
 *
 *   blocking.c   chunk shape per index: one block size per class of key dims
 *                that meet in joins, aggregations and rekeys
 *   rules.c      equivalence rules of the TRA paper over IA plans
 *   cost.c       the cost model: floats moved (the paper's metric), bytes
 *                sent, flops, peak memory per rank, predicted seconds
 *   search.c     from the TRA program to the plan that is run
 */
#ifndef TRAC_OPT_H
#define TRAC_OPT_H

#include "ir/ir.h"

typedef struct OptOptions {
	int level;              /* 0: Table 1 plan; 2: searched */
	int nranks;             /* sites planned for */
	int64_t block;          /* chunk size along every index; 0: automatic */
	double mem_per_rank;    /* bytes; 0: no limit */
	bool verify;            /* run the verifiers after every pass */
} OptOptions;

/* ---- autodiff.c ---- */

/* Replace every grad op by the TRA computing the gradient. */
void opt_autodiff(TraProg *p);

/* ---- hoist.c ---- */

/* Move loop-invariant computation out of repeat blocks. */
void opt_hoist(TraProg *p);

/* ---- blocking.c ---- */

/* Choose every key dim's block, consistently across joins; rewrites the
 * program's types. */
void opt_block(TraProg *p, const OptOptions *o);

/* ---- rules.c ---- */

/* The rules that never make a plan worse: drop no-op moves (R2-1, R2-4),
 * aggregate before shuffling (R2-5), fold aggregations into joins (R1-7). */
IaPlan *opt_rewrite_simple(IaPlan *p);

/* ---- cost.c ---- */

/* Fill every op's costs and the plan's totals. */
void opt_cost(IaPlan *p);

/* ---- search.c ---- */

/* The plan to run: Table 1's at -O0, rewritten at higher levels. */
IaPlan *opt_plan(const TraProg *tra, const OptOptions *o);

#endif
