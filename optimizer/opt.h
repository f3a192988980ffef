/*
 * opt.h: the one header of the optimizer/ layer.
 *
 *   autodiff.c   grad(loss, W): the backward computation, as more TRA
 *   contract.c   contraction order: product-sum trees of the TRA program
 *                rebuilt as the cheapest sequence of pairwise contractions
 *   blocking.c   chunk shape per index: one block size per class of key dims
 *                that meet in joins, aggregations and rekeys; overrides
 *   machine.c    the machine model: collectives, gemm and loop rates, read
 *                from a bench/calibrate file or built in
 *   host.c       the machine trac runs on: its CPU, cores, caches and
 *                memory, the model derived from them, the quick
 *                calibration's cache file
 *   cost.c       the cost model: floats moved (the paper's metric), bytes
 *                sent, flops, peak memory per rank, predicted seconds
 *   rules.def    the equivalence rules of the TRA paper, one row each
 *   rules.c      the rules as rewrites of IA plans (matchers, rewriters)
 *   impls.def    the physical implementations of TRA units, one row each:
 *                unit kind, strategy, placements, rule chain, builder, cost
 *   build.c      the IA each implementation builds (Table 1, -O1, -O2)
 *   table1.c     the initial plan: each op by its Table 1 row (-O0)
 *   impls.c      the search's candidates: which rows match a unit, with
 *                which placements, at what cost
 *   search.c     one search over implementations and placements (search.h)
 *   tune.c       opt_plan: params, memory budget, strategies and blocks
 *                tuned around the search, by whole plans
 *   interp.c     an in-process IA interpreter over simulated sites (tests)
 */
#ifndef TRAC_OPT_H
#define TRAC_OPT_H

#include <math.h>

#include "ir/ir.h"

/* ---- machine.c: the machine model ---- */

/* The collectives the runtime's moves are made of. */
typedef enum { COLL_BCAST, COLL_ALLGATHER, COLL_ALLTOALL, COLL_ALLREDUCE, COLL_REDUCE_SCATTER, NCOLL } Coll;

#define MAXGEMM 32

typedef struct Machine {
	double latency[NCOLL];          /* seconds per call */
	double bandwidth[NCOLL];        /* bytes per second one rank sends */
	double memcpy_bw;               /* bytes per second, one rank */
	double read_bw;                 /* bytes per second one rank reads an input's file */
	double write_bw;                /* bytes per second rank 0 writes an output's file */
	double write_latency;           /* seconds per output file beyond its bytes */
	double read_call;               /* seconds per read system call beyond its bytes; 0: free */
	double touch_bw;                /* bytes per second of memory new to the process */
	double uniform_rate;            /* f32 values per second uniform() makes, one rank */
	double normal_rate;             /* likewise normal() */
	double loop_rate;               /* flop/s of generated loops, one rank */
	double gemm_alias_bw;           /* bytes per second a gemm streams an operand it reuses little
	                                   whose rows are a multiple of 4 KiB apart */
	double gemm_pack_a_bw;          /* bytes per second BLIS packs an A it reuses little, beyond
	                                   a cube's packing; 0: not measured, free */
	double gemm_pack_b_bw;          /* likewise a B */
	double gemm_accum_bw;           /* bytes per second a gemm call reads again a C it adds into
	                                   (its k over chunks or over looped calls), a C beyond the
	                                   L1; 0: free */
	double conv_rate;               /* flop/s of a convolution's direct loop, one rank */
	double conv_short;              /* seconds per multiply-add of a convolution along input
	                                   rows shorter than a register tile; 0, the built-in
	                                   model's: the loop rate's */
	int ngemm;
	int gemm_block[MAXGEMM];        /* block sizes measured, increasing */
	double gemm_rate[2][MAXGEMM];   /* flop/s by block size: f32, f64 */
	double scatter_row;             /* seconds per row a scatter-add adds, beyond its bytes;
	                                   the built-in model has it 0: free */
	double slice_row;               /* seconds per row of a window trt_slice copies (a row
	                                   along its innermost chunk dim), beyond its bytes; the
	                                   built-in model has it 0: free */
	double sparse_elem;             /* seconds at least per stored element a kernel over sparse
	                                   inputs visits; the built-in model has it 0: free */
	double sparse_gather_bw;        /* bytes per second (whole cache lines) a kernel over a
	                                   sparse input gathers dense rows at (kernelcost.c's
	                                   sparse_work); 0: memcpy_bw's */
	double row_reduce;              /* seconds per element of a reduction along its input's
	                                   contiguous rows (the generated loop strided); the
	                                   built-in model has it 0: the loop rate's */
	double npz_elem;                /* seconds per stored element a rank reads from a scipy .npz
	                                   (npz.c's piles); the built-in model has it 0: free */
	double inflate_bw;              /* bytes per second a .npz's deflated member inflates into
	                                   whole (libdeflate); 0: free */
	double zlib_bw;                 /* the same through zlib's stream: a member over 256 MiB,
	                                   and every member under a memory budget (runtime/zip.c);
	                                   0: inflate_bw's rate */
	double call_overhead;           /* seconds per kernel call (one tuple) */
	double op_overhead;             /* seconds per IA op that communicates */
	double local_op_overhead;       /* seconds per local IA op */
	double mem_per_rank;            /* bytes; 0: unknown */
	double cache_per_rank;          /* bytes of cache a rank has (its L2 and its share of the
	                                   L3): an op whose bytes fit runs at its compute rate, one
	                                   beyond also streams them at memcpy_bw (plancost.c's
	                                   op_floor, kernelcost.c's cost_join) */
	double cache_l2;                /* bytes of a core's L2: the A operands a join's BLIS calls
	                                   pack are packed from beyond it at memory's pace when
	                                   they are more (kernelcost.c's cost_join); 0: unknown,
	                                   cache_per_rank instead */
	double cache_l1;                /* bytes of a core's L1 data cache: a kernel over a sparse
	                                   input gathering rows of a dense chunk bigger than half
	                                   of it pays their lines at sparse_gather_bw (kernelcost.c's
	                                   sparse_work);
	                                   0, the built-in model's: unknown, gathers free */
	char source[256];               /* "built-in", or the file read */
} Machine;

/* The built-in model (measured on the development machine). */
void machine_default(Machine *m);

/* Read key=value lines (bench/calibrate's output) over *m; false with a
 * message in *err when the file cannot be read or a line is malformed.
 * Unknown keys are ignored, so newer calibrate files still load. */
bool machine_load(Machine *m, const char *path, Buf *err);

/* Every key machine_load reads, one per line: a file that loads back into
 * the same model. */
void machine_write(FILE *f, const Machine *m);

/* ---- host.c: the machine trac runs on ---- */

/* What the machine says about itself (/proc/cpuinfo, sysconf, /sys). */
typedef struct HostInfo {
	char cpu[128];                  /* /proc/cpuinfo's model name; "" unknown */
	int cores;                      /* online CPUs */
	int vector_bits;                /* widest vector: 128 (SSE), 256 (AVX), 512 (AVX-512F) */
	bool fma;                       /* fused multiply-add (FMA3) */
	double hz;                      /* the clock /proc/cpuinfo gives; 0 unknown */
	int64_t l1d, l2, l3;            /* cache bytes; 0 unknown */
	double mem_bytes;               /* physical memory; 0 unknown */
} HostInfo;

/* /proc/cpuinfo's text into h's cpu, cores (its processor lines), vector
 * width, fma and hz; what the text lacks keeps h's value. */
void host_parse_cpuinfo(const char *text, HostInfo *h);

/* This machine: /proc/cpuinfo, then sysconf and /sys for the caches and
 * memory. */
void host_probe(HostInfo *h);

/* Peak flop/s of one core in f32 or f64: lanes x 2 FMA pipes x 2 flops x
 * clock (without FMA, an add and a multiply pipe). */
double host_peak_flops(const HostInfo *h, DType t);

/* The reference model with what h tells rescaled: gemm rates from the
 * peak, a convolution's loop likewise. */
void machine_derive(Machine *m, const HostInfo *h);

/* The rates the quick calibration's measurements over *m imply for what
 * it does not time: a convolution's loop, from the f32 gemm rate at the
 * largest block. */
void host_after_quick(Machine *m);

/* The quick calibration's cache file: $XDG_CACHE_HOME/trac/machine, else
 * $HOME/.cache/trac/machine; NULL without either. */
char *host_cache_path(void);

/* Read the cache at path over *m when it was written on this CPU (h's
 * model name, cores and the cache's format); false, with why, when it is
 * missing, unreadable or of another machine. */
bool host_cache_load(Machine *m, const char *path, const HostInfo *h, Buf *why);

/* mkdir -p of path's folder; false when it cannot be made. */
bool host_make_parent(const char *path);

/* Write m as the cache at path for h: a temporary file in its folder
 * (made if missing) renamed over it; false when it cannot. */
bool host_cache_save(const char *path, const Machine *m, const HostInfo *h);

/* Seconds of a collective moving `bytes` per rank. */
double machine_coll(const Machine *m, Coll c, double bytes);

/* Flop/s of a gemm whose smallest dimension is b (interpolated). */
double machine_gemm_rate(const Machine *m, DType t, double b);

/* ---- options ---- */

/* A --block override: every dim of a tensor, or one dim (dim >= 0). */
typedef struct BlockPin {
	int tensor;
	int dim;                /* -1: every dim */
	int64_t block;          /* 0: automatic */
} BlockPin;

/* A --place pin: an input's or param's placement, fixed for the search. */
typedef struct PlacePin {
	int tensor;
	Place place;
} PlacePin;

/* A --nnz pin: how many elements a sparse input stores, for planning. */
typedef struct NnzPin {
	int tensor;
	double count;
} NnzPin;

/* A --strategy pin: the strategy a statement's joins must use (side:
 * for broadcast, 0 the left operand everywhere, 1 the right, -1 either). */
typedef struct StratPin {
	int stmt;
	Strategy strategy;
	int side;
} StratPin;

typedef struct OptOptions {
	int level;              /* 0: Table 1 plan; 1: never-worse rules; 2: search */
	int nranks;             /* sites planned for */
	int64_t block;          /* chunk size along every index; 0: automatic */
	const BlockPin *blockpins;
	int nblockpins;
	const PlacePin *placepins;
	int nplacepins;
	const StratPin *stratpins;
	int nstratpins;
	const NnzPin *nnzpins;
	int nnnzpins;
	double mem_per_rank;    /* bytes; 0: no limit */
	double spill_budget;    /* > 0: plans run out of core in this many resident bytes
	                         * a rank, spilling is priced (tune.c sets it when no plan
	                         * fits mem_per_rank or the machine's memory) */
	Objective objective;    /* what the search minimises first (--objective) */
	bool verify;            /* run the verifiers after every pass */
	bool alternatives;      /* cost each statement's other strategies (--explain=all, json) */
	const Machine *machine; /* NULL: the built-in model */
	/* the blocks earlier plans of this program under these options chose,
	 * by rank count (opt_plan's chain; NULL: each call plans its own) */
	struct BlockMemo *memo;
} OptOptions;

/* Parse "all", "part(0)", "part(1,0)" into *p; false if malformed. */
bool opt_parse_place(const char *s, Place *p);

/* ---- autodiff.c ---- */

/* Replace every grad op by the TRA computing the gradient (reverse mode). */
void opt_autodiff(TraProg *p);

/* ---- hoist.c ---- */

/* Move loop-invariant computation out of repeat blocks. */
void opt_hoist(TraProg *p);

/* ---- contract.c ---- */

/* Rebuild every maximal product-sum tree (joins of product kernels under
 * sum aggregations) as the cheapest order of pairwise contractions: exact
 * up to 8 operands, greedy beyond; intermediates of more than `limit`
 * elements are never chosen.  Returns the number of trees reordered;
 * *largest (if not NULL): the most elements an intermediate of the orders
 * chosen holds, so that any limit at least that orders alike. */
int opt_contract_within(TraProg *p, double limit, double *largest);
/* The limit for nranks ranks: the memory of all of them (--mem-per-rank,
 * else the machine model's) in f64 elements; INFINITY when unknown. */
double opt_contract_limit(const OptOptions *o, int nranks);
/* opt_contract_within at o's limit for o->nranks. */
int opt_contract(TraProg *p, const OptOptions *o);
/* Before autodiff: every tree in its cheapest order whose intermediates
 * are none bigger than the largest of the order lowering made, so that no
 * rank count's bound is crossed that lowering's order did not cross; the
 * backward pass then follows the cheaper forward (Z = A H W: A (H W)). */
int opt_contract_forward(TraProg *p);

/* sparse.c: which relations are stored sparse or may have holes (marks
 * every op's type; run after the passes that add ops, before blocking) */
void opt_sparsity(TraProg *p, const OptOptions *o);

/* ---- scatter.c ---- */

/* Sums A + k * S of scatter-adds S (k a constant, or one times a 0-d
 * relation) into scatters that add into A (TRA_SCATTER's base); after
 * opt_sparsity, before opt_block.  Returns the joins folded. */
int opt_fuse_scatters(TraProg *p);


/* ---- blocking.c ---- */

/* The classes of key dims that must share a block size: dims a join
 * matches, dims an aggregation or rekey carries through, the values of one
 * param.  Every class has one extent. */
typedef struct BlockClasses {
	int n;                  /* classes */
	int nslot;
	int *of;                /* per (op, key dim) slot: its class */
	int *base;              /* per op: its first slot */
	int64_t *extent;        /* per class */
	int64_t *block;         /* per class: the block chosen */
	bool *pinned;           /* per class: set by an override */
	DType *dtype;           /* per class: the element type of an op carrying it */
	bool *sparse;           /* per class: a dim of a sparse relation (opt_block_cap) */
	bool *whole;            /* per class: one chunk always (a kernel's gradient's window
	                         * dim, or a tie whose block is below its reach) */
	int *tie;               /* per class: the class whose block it takes (union-find
	                         * root): a convolution's window dim and its output's */
	int64_t *reach;         /* per tie root: the most rows a window reads beyond a block */
} BlockClasses;

/* The classes of p's key dims, each with the block p's types give it. */
BlockClasses *opt_block_classes(const TraProg *p);
void opt_block_classes_free(BlockClasses *c);
/* Automatic blocks for every class, then the overrides (opt_block_pins). */
bool opt_block_choose(BlockClasses *c, const TraProg *p, const OptOptions *o, Buf *err);
/* The classes --block pins, with its blocks; false (message in *err) when
 * two overrides give one class different blocks. */
bool opt_block_pins(BlockClasses *c, const TraProg *p, const OptOptions *o, Buf *err);
/* Every op's type at the classes' blocks (c NULL: as p has them), into
 * types[] (one per op); p is left alone. */
void opt_block_types(const TraProg *p, const BlockClasses *c, RelType *types);
/* The largest block class k may have on nranks: a sparse relation's dims
 * get SPARSE_BLOCKS_PER_RANK blocks a rank at least, so that the executable
 * can spread a skewed pattern's heavy blocks over the ranks (trt_balance),
 * up to SPARSE_MAX_BLOCKS blocks; INT64_MAX for any other class or one
 * rank. */
enum { SPARSE_BLOCKS_PER_RANK = 4, SPARSE_MAX_BLOCKS = 1024 };
int64_t opt_block_cap(const BlockClasses *c, int k, int nranks);
/* Whether every sparse input plan p reads partitioned over the ranks has
 * those blocks along each of its dims (the automatic blocks keep every
 * sparse dim within its cap; the search's may pass it where no sparse
 * input is partitioned: one read by one rank and broadcast). */
bool opt_plan_placeable(const IaPlan *p);
/* The automatic block of an extent planned for nranks. */
int64_t opt_auto_block(int64_t extent, int nranks, const Machine *m, DType t);

/* The automatic blocks for o->nranks and the overrides (opt_block_choose),
 * written into the program's types: what --dump-after=blocking shows, and
 * where the search starts (opt_plan chooses them itself: the pipeline's
 * program keeps lowering's blocks).  Overrides that contradict each other
 * are reported by opt_check_blocks; here the first one wins. */
void opt_block(TraProg *p, const OptOptions *o);
bool opt_check_blocks(const TraProg *p, const OptOptions *o, Buf *err);

/* ---- cost.c ---- */

/* The cost of one op or fragment. */
typedef struct Cost {
	double seconds;         /* predicted, the search's objective */
	double floats;          /* the paper's metric */
	double bytes;           /* bytes that leave their site */
	double flops;
	double work;            /* flops the busiest rank does: each op's flops times its
	                         * placement's share (cost_share); OBJ_FLOATS's premise */
} Cost;

static inline Cost cost_add(Cost a, Cost b)
{
	return (Cost){a.seconds + b.seconds, a.floats + b.floats, a.bytes + b.bytes, a.flops + b.flops,
	              a.work + b.work};
}

static inline Cost cost_scale(Cost a, double k)
{
	return (Cost){a.seconds * k, a.floats * k, a.bytes * k, a.flops * k, a.work * k};
}

/* -1, 0, 1: a against b, equal within a relative tol */
static inline int cost_cmp_measure(double a, double b, double tol)
{
	double t = tol * fmax(fabs(a), fabs(b));
	return a < b - t ? -1 : a > b + t ? 1 : 0;
}

/* The TRA paper ranks plans by floats moved on the premise that their
 * flops are fixed and spread over the ranks (its plans are hand-derived
 * so).  Under OBJ_FLOATS the search holds plans to it: the busiest rank's
 * flops (Cost.work) come first, plans within WORK_TIE of each other a tie
 * (4 of 5 ranks busy ties with 5; one rank, or every rank, doing all of a
 * contraction does not), then floats moved.  Floats first alone makes
 * every rank, or one, do everything: nothing moves. */
#define WORK_TIE (OBJ_WORK_TIE_PCT / 100.0)

/* -1, 0, 1: by what objective o ranks before predicted seconds: under
 * OBJ_FLOATS the busiest rank's flops within WORK_TIE, then floats moved
 * (within a relative 1e-9); nothing (0) under OBJ_SECONDS.  Infinite
 * seconds (no plan) compare 0 here: cost_cmp puts them last. */
static inline int cost_cmp_lead(Objective o, Cost a, Cost b)
{
	if (o != OBJ_FLOATS || isinf(a.seconds) || isinf(b.seconds))
		return 0;
	int w = cost_cmp_measure(a.work, b.work, WORK_TIE);
	return w ? w : cost_cmp_measure(a.floats, b.floats, 1e-9);
}

/* The one order of costs under objective o, -1, 0, 1 (infinite seconds,
 * no plan, is worst under both):
 *   OBJ_SECONDS   seconds (within a relative 1e-6), then floats moved
 *   OBJ_FLOATS    the busiest rank's flops (within WORK_TIE), floats
 *                 moved (within a relative 1e-9), then seconds */
static inline int cost_cmp(Objective o, Cost a, Cost b)
{
	if (isinf(a.seconds) || isinf(b.seconds))
		return isinf(a.seconds) ? (isinf(b.seconds) ? 0 : 1) : -1;
	int c = cost_cmp_lead(o, a, b);
	if (!c)
		c = cost_cmp_measure(a.seconds, b.seconds, 1e-6);
	if (!c)
		c = cost_cmp_measure(a.floats, b.floats, 1e-9);
	return c;
}

typedef struct CostCtx {
	const Machine *m;
	int nsites;             /* sites (ranks) planned for */
	Objective objective;    /* how the search compares costs (cost_cmp) */
	double budget;          /* > 0: the plan runs out of core in this many bytes a rank */
} CostCtx;

/* The most of a relation one rank holds, as a fraction of the whole
 * (by volume: edge chunks are short).  PL_ALL is 1. */
double cost_share(const CostCtx *c, const RelType *t, const Place *p);
/* Sites that hold partials of one key when a relation partitioned on p is
 * grouped onto `group` (1 when no partitioning dim is grouped away). */
double cost_partial_copies(const CostCtx *c, const RelType *t, const Place *p, int ngroup, const int *group);
/* Reading an input's file in placement p.  A partitioned input costs
 * nothing: the input layout is free, as the paper has it (inputs are
 * where the plan wants them).  PL_ALL is every rank reading the whole file
 * itself: the time to read it at the machine's file_read_bandwidth_Bps,
 * and no floats, since nothing moves between ranks (Amazon-XML's X read
 * where it is needed, as the TRA paper counts it).  The search offers
 * PL_ALL for an input when --place pins it, or under --objective floats
 * (the paper's convention: inputs free where they are needed); never
 * unpinned under seconds (at page-cache speed it made "read A everywhere"
 * every matmul's plan). */
Cost cost_read(const CostCtx *c, const RelType *t, const Place *p);
double cost_read_seconds(const CostCtx *c, const RelType *t, const Place *p); /* the busiest rank's share, whatever the place */
/* Writing an output: seconds, and the bytes its staging holds a while. */
double cost_write(const CostCtx *c, const RelType *t);
double write_transient_bytes(const CostCtx *c, const RelType *t, const Place *p, const char *path);
/* A param's initial values made on this rank: seconds. */
double cost_init(const CostCtx *c, const Tensor *x, const RelType *t, const Place *p);
/* Bytes one rank holds of a relation: copies > 1 for partials. */
double cost_rank_bytes(const CostCtx *c, const RelType *t, const Place *p, double copies);
/* Moving a relation (copies: its partial copies) from `from` to `to`
 * (PL_ALL: a broadcast; PL_PART: a shuffle). */
Cost cost_move(const CostCtx *c, const RelType *t, const Place *from, double copies, const Place *to);
/* A halo (IA_HALO) of x placed by xp, h its type: the bytes of the pieces
 * whose two keys are on different sites, exactly. */
Cost cost_halo(const CostCtx *c, const RelType *x, const Place *xp, const RelType *h);
Cost cost_slice(const CostCtx *c, const RelType *t, const Place *p);

/* A gather of `rows` (its result) from a table placed by tp by an index
 * placed by ip: local when the table is everywhere, else a lookup (row
 * numbers to the rows' owners, rows back). */
Cost cost_gather(const CostCtx *c, const RelType *table, const Place *tp, int gdim, const RelType *index,
                 const Place *ip, const RelType *rows);
/* A scatter-add of `rows` placed by rp into `out` placed by op: into
 * zeros (the result's share written), into a copy of a base (its share
 * read and written) or into the base in place (only the rows touched). */
typedef enum { SCATTER_ZEROS, SCATTER_COPY, SCATTER_IN_PLACE } ScatterInto;
Cost cost_scatter(const CostCtx *c, const RelType *rows, const Place *rp, const RelType *index,
                  const RelType *out, const Place *op, ScatterInto into);

/* Fill every op's costs and the plan's totals (peak memory included; out
 * of core, p->mem_budget > 0, the spill file's bytes and their price). */
void opt_cost(IaPlan *p, const Machine *m);
/* IST loop `loop` of p (its LOOP op, which the runtime's trt_ist runs),
 * priced from body, the loop's plan for one subnet: its op's seconds a run
 * and p's total with them. */
void opt_cost_ist(IaPlan *p, int loop, const IaPlan *body, const Machine *m);
/* spill.c: the spill file's writes and reads of p run in p->mem_budget
 * resident bytes a rank, per op and in all, priced into the ops' seconds
 * and the plan's; made: each op's result bytes, transient: what it holds
 * besides, life: the plan's loops and lifetimes. */
void opt_spill(IaPlan *p, const Machine *m, const double *made, const double *transient, const IaLoops *life);

/* ---- kernelcost.c: a kernel op's flops and seconds where it runs ---- */

/* A local join (fused with its aggregation when grouped), computing over
 * its key space (ia_join_type) placed by `jp`; mask: a sampled join's
 * mask (only its stored elements computed), or NULL. */
Cost cost_join(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r, const JoinSpec *on,
               const Place *jp, const RelType *mask);
/* A convolution (IA_CONV), a join whose right input is read through
 * windows, out its result type. */
Cost cost_conv(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r, const JoinSpec *on,
               const RelType *out, const Place *jp);
/* A local aggregation of a relation placed by p (copies: partials). */
Cost cost_agg(const CostCtx *c, const RelType *in, const Place *p, double copies, const RelType *out);
/* A local map with a kernel (NULL: a rekey, free). */
Cost cost_map(const CostCtx *c, const Kernel *k, const RelType *in, const Place *p);

/* ---- rules.def, rules.c: the equivalence rules ---- */

typedef enum {
#define RULE(id, name, kind, meaning, condition) RULE_##id,
#include "optimizer/rules.def"
	NRULES
} RuleId;

const char *rule_name(RuleId r);        /* "R2-6" */
const char *rule_meaning(RuleId r);
const char *rule_condition(RuleId r);

/* Does rule r apply at op i of p (its side condition holds)? */
bool rule_match(RuleId r, const IaPlan *p, int i);
/* The plan with rule r applied at op i (a new plan; p is left alone);
 * NULL when it does not match.  `variant` picks among a rule's right sides
 * (R2-6: 0 bcast the left, 1 bcast the right, 2 co-shuffle). */
IaPlan *rule_apply(RuleId r, const IaPlan *p, int i, int variant);

/* The rules that never make a plan worse, to a fixpoint: drop moves that
 * move nothing (R2-1, R2-4), two-phase aggregation (R2-5), joins fused
 * with their aggregation.  This is -O1. */
IaPlan *opt_rewrite_simple(IaPlan *p);


/* ---- impls.def, build.c, table1.c: the physical implementations ---- */

#define RB(r) (1u << RULE_##r)

/* What a row implements (impls.def's unit column): one kind per set of rows
 * that compete for a unit. */
typedef enum {
	U_INPUT, U_PARAM, U_RANGE, U_COUNTER, U_SLICE, U_UNARY, U_SINK, U_STORE,
	U_JOIN, U_SAMPLED, U_CONV, U_AGG, U_CONTRACT, U_SAMPLED_CONTRACT, U_CONV_CONTRACT,
	U_GATHER, U_SCATTER, NUNITS
} UnitKind;

typedef enum {
#define IMPL(id, unit, strat, at, rules, build, cost, what) IM_##id,
#include "optimizer/impls.def"
	NIMPLS
} ImplKind;

const char *impl_name(ImplKind k);      /* "BMM" */
const char *impl_what(ImplKind k);      /* the IA it builds, in words */
UnitKind impl_unit(ImplKind k);
Strategy impl_strategy(ImplKind k);
unsigned impl_rules(ImplKind k);        /* its rule chain: bits of RuleId */

/* Where IA ops go: a plan, each op's placement derived as it is pushed.
 * An op whose placement cannot be derived is a bug when `strict`; else it
 * sets `failed` (a rewrite that does not apply). */
typedef struct Emit {
	IaPlan *p;
	bool strict;
	bool failed;
} Emit;

int emit_op(Emit *e, IaOp op);
/* op `in` moved to placement `to`: a broadcast (PL_ALL) or a shuffle */
int emit_move(Emit *e, int in, const Place *to, int stmt, int tra);

/* What an implementation is built for: a TRA op, or a contraction (its
 * aggregation and its join).  The rewrites describe IA ops this way. */
typedef struct Unit {
	const TraOp *op;                /* the op; a contraction's aggregation */
	const TraOp *join;              /* a contraction's join, else NULL */
	int tra;                        /* the built ops' IaOp.tra */
} Unit;

/* The kind of unit u is: which rows of impls.def implement it. */
UnitKind unit_kind(const Unit *u);

/* The IA of implementation k of unit u on inputs x[] (ops of e's plan,
 * placed as k needs them); `mid` is the shuffle target inside it, `out`
 * where its result is (the read's partitioning, the two-phase result's),
 * tp a two-phase schedule.  Returns the op holding the result, or -1. */
int impl_build(Emit *e, ImplKind k, const Unit *u, const int *x, const Place *mid, const Place *out,
               const TpSched *tp);
/* Partial sums at op `part` of unit u's result, moved to mid and added up. */
int impl_finish_partial(Emit *e, int part, const Place *mid, const Unit *u);

/* RMM: join-space dim o is the left's lmap[o] and the right's rmap[o], or -1
 * where the side is duplicated; a side replicated into the join space. */
void rmm_keymaps(const TraOp *j, const RelType *lt, const RelType *rt, const RelType *jt, int *lmap, int *rmap);
RelType rep_type(const RelType *jt, const RelType *st, const int *keymap);
/* The halo op's type a convolution j needs of its right input (type rt,
 * the left's lt), or false when it reads the input as it is; *on its join
 * keys then (a kernel's gradient's window matched to its own dim when
 * tiled: fused with its sum). */
bool conv_halo_type(const TraOp *j, const RelType *lt, const RelType *rt, bool tiled, RelType *ht, JoinSpec *on);
/* Join output dim `dim` under keys `from` as a dim under keys `to` (nl left
 * dims, nright right ones): -1 for a right dim `to` matches. */
int conv_join_dim(int nl, const JoinSpec *from, const JoinSpec *to, int dim, int nright);

/* The initial plan: each op by its Table 1 row (table1.c), at the
 * program's blocks, or (opt_table1_at) with op i of type types[i]. */
IaPlan *opt_table1(const TraProg *tra, int nranks);
IaPlan *opt_table1_at(const TraProg *tra, int nranks, const RelType *types);

/* ---- twophase.c: two-phase execution of a contraction (Jankov et al.) ---- */

/*
 * The planner's input, the paper's lineage (section 5.1) with its costs:
 * join groups of one chunk from each of two inputs, each in one aggregation
 * group.  Chunks are numbered per input, groups from 0.  Times in seconds.
 */
typedef struct TpProblem {
	int nsite;
	int64_t njoin, nagg, nchunk[2];
	int64_t *jin;                   /* [2 * njoin]: join group j reads chunks jin[2j], jin[2j+1] */
	int64_t *jagg;                  /* per join group: its aggregation group */
	int *holder[2];                 /* per chunk: the site holding it; -1 every site */
	double *tf[2];                  /* per chunk: t_F, sending it */
	double *chunk_bytes[2];
	double *tpi;                    /* per join group: t_pi, its kernel */
	double *tg;                     /* per aggregation group: t_g, sending its (partial) result */
	double *tsig;                   /* per aggregation group: t_Sigma, one combine */
	double *gbytes;                 /* per aggregation group: its result's bytes */
	int *gsite;                     /* per aggregation group: its site when fixed, else -1 */
	double flops;                   /* of every join group */
	double mem_limit;               /* bytes a site may hold for the schedule; 0: none */
	double elem_bytes;              /* for floats moved */
	bool paper;                     /* exactly Eq. 6: no pre-aggregation, receivers only */
} TpProblem;

typedef enum { TP_GREEDY, TP_RULE1, TP_RULE2, TP_NVARIANT } TpVariant;

/* A plan: the paper's X and Y as a site per group, and its cost. */
typedef struct TpPlan {
	int *x;                         /* per join group */
	int *y;                         /* per aggregation group */
	int64_t by_rule[2];             /* aggregation groups the greedy placed by rule 1, rule 2 */
	double t_in, t_kernel, t_partial, t_combine;    /* Eq. 6's four maxima */
	double seconds;                 /* their sum */
	double bytes, mem;              /* bytes sent; most bytes a site holds for it */
	int64_t in_msgs, part_msgs;
	bool fits;                      /* mem within mem_limit */
} TpPlan;

TpProblem *tp_problem_new(int nsite, int64_t njoin, int64_t nagg, int64_t nchunk0, int64_t nchunk1);
void tp_problem_free(TpProblem *pb);
/* The greedy of the paper's Fig. 5 (completed-group comparison), or one
 * rule alone. */
TpPlan *tp_plan_greedy(const TpProblem *pb, TpVariant v);
/* Fill a plan's costs from its x and y (-1: not placed, left out). */
void tp_plan_cost(const TpProblem *pb, TpPlan *pl);
void tp_plan_free(TpPlan *pl);

/* A contraction's lineage from its blocking: the join of l and r fused
 * with its aggregation onto `out`, inputs placed by pl and pr, aggregation
 * groups fixed where po puts them (NULL: free).  NULL when it has more join
 * groups than a schedule may have. */
TpProblem *tp_lineage(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r,
                      const JoinSpec *on, int ngroup, const int *group, const RelType *out, const Place *pl,
                      const Place *pr, const Place *po);

/* The search's two-phase candidate for a contraction: the cheapest of the
 * greedy's three plans for inputs placed by pl, pr and the result by po (a
 * partitioning of the output), within mem_limit bytes per rank (0: none).
 * Memoised; the schedule lives to the end of the process.  NULL when none
 * applies. */
const TpSched *opt_twophase_candidate(const CostCtx *c, const Kernel *k, const RelType *l, const RelType *r,
                                      const JoinSpec *on, int ngroup, const int *group, const RelType *out,
                                      const Place *pl, const Place *pr, const Place *po,
                                      double mem_limit);
/* Whether TRA op t's relation has a chunk at every key below its frontier
 * (no filter upstream): what a two-phase schedule assumes. */
bool opt_twophase_dense(const TraProg *p, int t);
/* Free every schedule once the memo holds more than `bytes`: only where no
 * plan made before refers to one (opt_plan calls it before it plans, so a
 * plan must not outlive the next opt_plan when memos grow that big).  It
 * also renews the greedy's work budget for the plan to come. */
void opt_twophase_trim(double bytes);

/* ---- tune.c ---- */

/* The plan to run on o->nranks ranks: Table 1's at -O0, rewritten at -O1,
 * at the automatic blocks for the count; searched at -O2, jointly with the
 * blocks of classes not pinned (the program is left alone).  With
 * --mem-per-rank, the cheapest plan that fits; when none does, the
 * cheapest plan (the caller reports its peak).  With o->alternatives,
 * plan->alts holds each statement's other strategies.  A function of
 * (tra, o) alone: at -O2 the search also tries the blocks its plan for
 * opt_prior_count ranks chose, found in o->memo or planned first. */
IaPlan *opt_plan(const TraProg *tra, const OptOptions *o);
/* The count whose plan's blocks the plan for nranks also tries: the
 * largest of 1-8 and the powers of two (the default -P list) below it
 * that the program's IST splits divide; 0 for none. */
int opt_prior_count(const TraProg *tra, int nranks);
/* Blocks chosen by the plans of one program, by count: planning a list
 * of counts through one memo plans each chain once. */
typedef struct BlockMemo BlockMemo;
BlockMemo *opt_block_memo_new(void);
void opt_block_memo_free(BlockMemo *m);

/* ---- interp.c: the IA interpreter ---- */

/* A dense tensor, row-major, f64. */
typedef struct Dense {
	int rank;
	int64_t shape[MAXDIM];
	double *v;
} Dense;

/* Run plan p over `sites` simulated sites: inputs[t] is tensor t's value
 * for inputs (and params read from files); outputs[t] is filled for every
 * written tensor (allocated).  Params start from their initialisers'
 * deterministic stand-ins (zeros, ones, or a hash of the index).  False
 * with a message when the plan breaks an invariant at run time (a join of
 * tuples on different sites, a partial relation written, ...). */
bool ia_interpret(const IaPlan *p, int sites, Dense *const *inputs, Dense **outputs, Buf *err);
void dense_free(Dense *d);
/* Tensor t's shape, its n elements zero. */
Dense *dense_zeros(const Tensor *t, int64_t *n);

#endif
