/*
 * search.h: what the three files of the plan search share; included by
 * them alone (the optimizer's interface is opt.h).
 *
 *   impls.c    the candidates: each TRA op's implementations, their
 *              placements and their costs
 *   search.c   one search: the dynamic program over placements, the
 *              choice of implementations from the sinks back, the IA plan
 *   tune.c     around it: params' placements, the memory budget,
 *              strategies tried whole, alternatives for --explain=all,
 *              block sizes; opt_plan
 *
 * search.c's top comment describes the whole.
 */
#ifndef TRAC_SEARCH_H
#define TRAC_SEARCH_H

#include <math.h>

#include "optimizer/opt.h"

#define MAXDOM 40               /* placements considered per relation */
#define ANYPL (-1)              /* an input taken wherever it is */

/* ---- impls.c: placements of one relation ---- */

typedef struct Dom {
	int n;
	Place p[MAXDOM];
} Dom;

Place place_norm(const RelType *t, Place p);
int dom_find(const Dom *d, const RelType *t, Place p);
void dom_add(Dom *d, Place p);
void dom_make(Dom *d, const RelType *t);

/* ---- impls.c: implementations ---- */

/* One candidate: a row of impls.def with its placements and cost. */
typedef struct Impl {
	ImplKind kind;
	int inpl[MAXIN];        /* each input's placement (its dom index), or ANYPL */
	int out;                /* the result's placement (dom index); -1: no result */
	Place mid;              /* shuffle target over the result, or RMM's over the join space */
	Cost cost;              /* its own, times the loop count */
	double mem;             /* bytes per rank it holds at once */
	int side;               /* broadcast: the input everywhere (0 left, 1 right) */
	const TpSched *tp;      /* IM_TWOPHASE: its schedule */
} Impl;

typedef Vec(Impl) Impls;

/* A set of rules (bits by RuleId) and the text --explain shows for it. */
typedef struct RuleChain {
	unsigned mask;
	const char *text;
} RuleChain;

typedef struct Search {
	Arena *scratch;         /* what lives as long as the search; search_free frees it */
	const TraProg *tra;     /* read only: the search's blocks are in `types` */
	RelType *types;         /* per op: its type at the blocks searched */
	const OptOptions *o;
	CostCtx cc;
	int n;
	int *uses;              /* per op: readers */
	int *absorbed;          /* per join: the aggregation that absorbs it, or -1 */
	double *times;          /* per op: how often it runs */
	int *loopof;            /* per op: the innermost LOOP around it, or -1 */
	int *depth;             /* per op: loop depth */
	Dom *dom;
	Impls *impls;
	Place *varplace;        /* per tensor (params) */
	double budget;          /* per-rank bytes an implementation may hold; 0: none */
	Strategy *force;        /* per statement: the strategy its joins must use, or STRAT_NONE */
	int *forceside;         /* per statement: for broadcast, the side everywhere, or -1 */
	/* the dynamic program */
	size_t *domoff;         /* per op: its placements' first entry in best, avail */
	Cost *best, *avail;     /* per (op, placement) */
	Cost *home;             /* [n]: min over best */
	/* extraction */
	int *choice;            /* per op: impl index, -1 none */
	uint64_t *req;          /* per op: placements its readers need */
	bool *anyreq;
	/* moves between placements, per op (lazily): [dom.n][dom.n] */
	Cost **move;
	/* the implementations of ops that depend on neither params'
	 * placements nor forcing, made once per budget (gen_all: unfiltered) */
	Impls *cache;
	double *cache_budget;
	bool *cached;
	bool gen_all;
	bool quick;             /* choosing blocks: no two-phase schedules (their planning is dear) */
	Vec(RuleChain) chains;  /* rule chains' texts made so far (record_rules) */
} Search;


static inline const RelType *type_of(Search *s, int t)
{
	return &s->types[t];
}

static inline Cost *at(const Search *s, Cost *a, int t, int i)
{
	return &a[s->domoff[t] + (size_t)i];
}

static inline Cost inf_cost(void)
{
	return (Cost){INFINITY, INFINITY, INFINITY, INFINITY, INFINITY};
}

Cost move_cost(Search *s, int t, int q, int p);  /* op t's result from placement q to p, times its count */
int find_out(Search *s, int t, Place p);
int unit_inputs(const Search *s, int t, int *in);   /* a contraction's: its join's */
bool free_layout(const RelType *t, const Place *p);
void make_impls(Search *s);

/* ---- search.c ---- */

/* A search of tra at blocks bc (NULL: the program's own). */
void search_init(Search *s, const TraProg *tra, const OptOptions *o, const Machine *m, const BlockClasses *bc);
void search_free(Search *s);
/* What prev, a search of the same program at the same count and mode at
 * other blocks, computed for ops whose types (and their candidates'
 * inputs') are the same here: their candidates and moves, taken over. */
void search_inherit(Search *s, Search *prev);
void *search_scratch(Search *s, size_t n, size_t size);        /* n zeroed elements */
void norm_varplace(Search *s);
IaPlan *plan_once(Search *s);   /* the cheapest plan for s's params' placements and budget */
/* The plan of the implementations s->choice names (every unit's input is
 * moved where its implementation takes it): plan_once's last step. */
IaPlan *search_build(Search *s);
void classify(IaPlan *p);       /* each statement's strategy, as the plan shows it */
void verify_plan(const IaPlan *p, const char *after, const OptOptions *o);

#endif
