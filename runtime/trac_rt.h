/*
 * trac_rt.h: the interface of libtracrt, the only code linked into programs
 * that trac compiles.
 *
 * A compiled program is SPMD: every MPI rank runs the same straight-line code,
 * which calls the functions below in the order of the IA plan.  A physical
 * relation (TrtRel) is, on each rank, a list of (key, chunk) tuples.  Where a
 * tuple lives is a pure function of its key and the relation's placement
 * (TrtPlace), so ranks never exchange a directory.
 *
 * Keys and chunks.  A relation's static type (TrtType) gives, per key
 * dimension d, the tensor extent along d and the block (chunk size) along d;
 * key values range over [0, ceil(extent/block)) (the frontier).  Chunks are
 * dense row-major arrays over the chunk dimensions; chunk dimension c spans
 * key dimension chunkdim[c], and its length for key k is
 * min(block, extent - k*block), so edge chunks are short, never padded.
 * Key dimensions not spanned by a chunk dimension are either reduced inside
 * a kernel (the k of a blocked matmul before aggregation) or singletons.
 *
 * Memory.  Every function that returns a TrtRel gives the caller a new
 * relation; its inputs are not consumed.  trt_free releases a relation; chunks
 * are reference counted, so rekeying or broadcasting to the local rank shares
 * them instead of copying.
 *
 * Errors.  A bad input (missing file, wrong shape, ...) prints one line naming
 * the tensor, the file, what was expected and what was found, and the job
 * ends with exit status 1 on every rank.  A broken runtime invariant prints
 * "internal error" and aborts.
 *
 * Scalars are relations with nkey = 0 and nchunk = 0 holding one tuple of one
 * element.  Every relation a function returns is sorted by key on each rank,
 * so results never depend on hashing or message timing.
 *
 * Nothing here depends on the compiler; the compiler depends on this file only
 * through the C it emits.
 */
#ifndef TRAC_RT_H
#define TRAC_RT_H

#include <stddef.h>
#include <stdint.h>

#define TRT_MAXDIM 8            /* most key dims and chunk dims of a relation */
#define TRT_ABI 12              /* bumped when this interface changes */

typedef enum { TRT_F32, TRT_F64, TRT_I32, TRT_I64 } TrtDtype;

/* The static type of a relation; codegen emits these as const tables. */
typedef struct TrtType {
	TrtDtype dtype;
	int nkey;                       /* key arity, 0 for a scalar */
	int64_t extent[TRT_MAXDIM];     /* per key dim: tensor extent */
	int64_t block[TRT_MAXDIM];      /* per key dim: chunk size (>= 1) */
	int nchunk;                     /* chunk rank */
	int chunkdim[TRT_MAXDIM];       /* chunk dim c spans key dim chunkdim[c] */
	int sparse;                     /* chunks are compressed (below), and absent
	                                   tuples are zero blocks */
	/* a halo (trt_halo's result): along key dim d with hext[d] > 0, the
	 * chunk of key k holds elements [k*block - hlo, min((k+1)*block,
	 * extent) + hhi) of a dim of hext[d] elements, clipped to [0, hext);
	 * extent is the reader's, a convolution's output dim */
	int64_t hlo[TRT_MAXDIM], hhi[TRT_MAXDIM], hext[TRT_MAXDIM];
	/* per key dim: the run-time site map that places its blocks (1, 2,
	 * ...: the plan's classes of dims a sparse input's meet, which
	 * trt_balance fills from that input's counts), or 0 for none */
	int map[TRT_MAXDIM];
} TrtType;

/* Placement of a physical relation across ranks. */
typedef enum {
	TRT_ALL,        /* every rank holds every tuple */
	TRT_PART,       /* a tuple lives only on trt_site(place, type, key) */
	TRT_ANY,        /* tuples anywhere, one key possibly on several ranks
	                   (partial aggregates before their final combine) */
} TrtPlaceKind;

typedef struct TrtPlace {
	TrtPlaceKind kind;
	int ndims;                      /* TRT_PART: the partitioning key dims, in order */
	int dims[TRT_MAXDIM];
} TrtPlace;

/* The rank that owns a key under a TRT_PART placement: the key's row-major
 * linear index over the partitioning dims' frontiers, modulo the number of
 * ranks; when one partitioning dim has more than one block and its type
 * names a site map for it (TrtType.map), the rank that map gives its block.
 * With no partitioning dims every tuple is on rank 0.  Under TRT_ALL and
 * TRT_ANY the answer is the calling rank (the tuple may live here). */
int trt_site(const TrtPlace *p, const TrtType *t, const int64_t *key);

/* A chunk as kernels see it: dense row-major over the relation's chunk dims,
 * n[c] elements along chunk dim c.
 *
 * Sparse chunks (TrtType.sparse) are compressed rows: a row is an index of
 * chunk dim 0 (one row when the chunk has no dims) and a column the
 * row-major index over the other chunk dims.  Row r's stored elements are
 * p[rowptr[r] .. rowptr[r+1]), at columns col[...], increasing within a row;
 * an element not stored is zero.  A view of a dense chunk has rowptr NULL. */
typedef struct TrtView {
	void *p;
	int rank;
	int64_t n[TRT_MAXDIM];
	int64_t off[TRT_MAXDIM];        /* the chunk's first element along each chunk
	                                   dim, as an index into the whole tensor */
	const int64_t *rowptr;          /* sparse: n[0] + 1 offsets into col and p */
	const int64_t *col;             /* sparse: column of each stored element */
	int64_t nnz;                    /* sparse: stored elements */
} TrtView;

/* A block kernel.  For a join, in[0] is the left chunk and in[1] the right;
 * for a map, in[0] is the only input.  With acc == 0 the kernel writes every
 * element of *out; with acc == 1 it combines its result into *out with the
 * op's aggregation (gemm with beta = 1 for a sum). */
typedef void (*TrtKernel)(const TrtView *in, TrtView *out, int acc);

/* A key predicate for filters: nonzero keeps the tuple. */
typedef int (*TrtKeyPred)(const int64_t *key);

typedef enum { TRT_AGG_ADD, TRT_AGG_MAX, TRT_AGG_MIN } TrtAgg;

typedef struct TrtRel TrtRel;

/* ---- the program ---- */

typedef enum { TRT_INPUT, TRT_OUTPUT, TRT_PARAM } TrtRole;

/* A named tensor of the program, as the command line and the .npy files see it. */
typedef struct TrtTensor {
	const char *name;
	TrtRole role;
	TrtDtype dtype;
	int rank;
	int64_t shape[TRT_MAXDIM];
	const char *path;               /* default file, or NULL */
	int sparse;                     /* an input declared sparse: a .npz or a .npy */
} TrtTensor;

/* One IA op, as --profile reports it, and its place in the static
 * schedule: under a memory budget the runtime evicts the chunk whose next
 * reader is farthest away, and reads ahead what the next ops read. */
typedef struct TrtOpInfo {
	const char *kind;               /* "bcast", "shuffle", "join", ... ("load", "store",
	                                   "loop" and "endloop" mean what the IA's do) */
	const char *label;              /* short description for the profile table */
	double pred_bytes;              /* predicted bytes sent by this op, all ranks */
	double pred_seconds;            /* predicted time */
	double flops;                   /* floating-point operations, all ranks */
	double floor_seconds;           /* the machine model's least time for it (roofline) */
	int nin;                        /* the ops whose results it reads: in[0..nin), */
	int in[3];                      /* a load's result meaning its param's value */
	int var;                        /* load, store: its param's number + 1, the same for
	                                   all of one param's; else 0 */
} TrtOpInfo;

typedef struct TrtProgram {
	int abi;                        /* TRT_ABI */
	const char *name;               /* program name, for messages and --help */
	const TrtTensor *tensors;
	int ntensors;
	const TrtOpInfo *ops;
	int nops;
	uint64_t seed;                  /* default seed (--seed overrides) */
	int planned_ranks;              /* the rank count the plan was made for, 0 unknown */
	double pred_peak_bytes;         /* the plan's peak bytes per rank, 0 unknown */
	int pred_peak_op;               /* the op at that peak, -1 unknown */
	int nloops;                     /* outermost repeat blocks (checkpoints) */
	int depth;                      /* repeat blocks nested the deepest (--log's columns) */
	double mem_budget;              /* bytes of chunks a rank holds in memory, the rest
	                                   in its spill file (as --mem-budget), 0 none */
} TrtProgram;

/* Initialise MPI and BLIS, parse the command line (NAME=path, NAME.out=path,
 * --seed, --profile, --help, ...), check that every output can be written
 * and is no file the run reads.  Exits (status 0 for --help, 1 for errors)
 * when the command line or a file named there is bad.
 * progs[0..nprogs) are the program under its plans, one per rank count
 * (planned_ranks, increasing); all have the same tensors.  Returns the
 * index of the plan this run uses: the one for its rank count, else the
 * one for the largest count below it, else the first (a notice on stderr
 * says so), run on all the ranks there are. */
int trt_init(int *argc, char ***argv, const TrtProgram *progs, int nprogs);

/* Finish: print the profile if asked, finalize MPI.  Returns the exit status. */
int trt_finish(void);

int trt_rank(void);
int trt_nranks(void);
uint64_t trt_seed(void);        /* --seed N, or the program's default */

/* ---- relations ---- */

/* An empty relation of type t and placement p. */
TrtRel *trt_rel_new(const TrtType *t, TrtPlace p);
void trt_free(TrtRel *r);
int64_t trt_ntuples(const TrtRel *r);     /* tuples on this rank */

/* ---- input and output ---- */

/* Read tensor `tensor` (an input, or a param initialised from a file) from
 * the .npy named on the command line or by default, as a relation of type t:
 * each rank reads only the chunks placement p gives it.  For a sparse t the
 * file may also be a matrix as scipy.sparse.save_npz writes it (csr, csc or
 * coo, compressed or not; a path ending in .npz or a file starting as a zip
 * does): each rank reads what its blocks need as far as the format allows.
 * Either way duplicates are summed, zeros dropped, and blocks with nothing
 * left have no tuple. */
TrtRel *trt_read(int tensor, const TrtType *t, TrtPlace p);

/* Write relation r as tensor `tensor`'s .npy: to a temporary name in the
 * destination folder, renamed on success.  r must not be TRT_ANY.  Every
 * rank calls it.  A sparse matrix whose path ends in .npz is written as a
 * csr .npz that scipy.sparse.load_npz reads; any other sparse relation as
 * the dense .npy, absent blocks as zeros. */
void trt_write(int tensor, const TrtRel *r);

/* ---- params ---- */

typedef enum { TRT_INIT_ZEROS, TRT_INIT_ONES, TRT_INIT_UNIFORM, TRT_INIT_NORMAL } TrtInit;

/* A param's initial value: each rank makes the chunks placement p gives it.
 * Uniform(a, b) and normal(mean a, std b) values depend only on the seed,
 * the tensor's name and the element's index in the whole tensor, never on
 * the blocking or the number of ranks.  A param named on the command line
 * (NAME=path) is read from that file instead, as trt_read does. */
TrtRel *trt_init_param(int tensor, const TrtType *t, TrtPlace p, TrtInit kind, double a, double b);

/* The positions of an index, for an index used as a value: a relation of
 * type t (one key dim with its chunk dim, i64) whose element i is i.  Each
 * rank makes the chunks placement p (TRT_ALL or TRT_PART) gives it. */
TrtRel *trt_range(const TrtType *t, TrtPlace p);

/* A loop's counter: a 0-d i64 relation holding value, on every rank. */
TrtRel *trt_counter(const TrtType *t, int64_t value);

/* A window along one key dim: with pos = stride * i + shift + off, out's
 * element i is in's element pos (a gather), or, for a scatter, out's
 * element pos is in's element i and the others are zero. */
typedef struct TrtWindow {
	int dim;
	int64_t shift, stride;
	int scatter;
} TrtWindow;

/* The window w of relation in (dense: TRT_ALL, or TRT_PART on dims other
 * than w's, then p is in's placement), off a 0-d i64 on every rank or
 * NULL for 0: a relation of type t, zero where it reads outside in.  Each
 * rank makes the chunks placement p (TRT_ALL or TRT_PART) gives it;
 * nothing is sent.  A sparse in gives a sparse window (t sparse, its dims
 * but w's blocked as in's); a scatter's in is dense. */
TrtRel *trt_slice(const TrtRel *in, const TrtRel *off, const TrtWindow *w, const TrtType *t, TrtPlace p);

/* A new relation holding r's tuples, sharing their chunks. */
TrtRel *trt_rel_clone(const TrtRel *r);

/* ---- printing and loops ---- */

/* Rank 0 prints "name = value" for a scalar, or the tensor's shape and
 * Frobenius norm; inside a loop, prefixed by the iteration and the elapsed
 * time.  --quiet silences it; --log FILE writes it as a CSV row.  Every
 * rank calls it. */
void trt_print(const TrtRel *r, const char *name);

/* Bracket a repeat block and its iterations (print's prefix, --log's
 * columns, the progress line on a terminal). */
void trt_loop_begin(int64_t count);
void trt_loop_iter(int64_t i);
void trt_loop_end(void);

/* ---- checkpoints (--checkpoint FILE --checkpoint-every N, --resume FILE) ---- */

/* The params, for the two calls below: tensors[i] is param i's index in
 * TrtProgram.tensors and *vars[i] its relation (replaced on resume). */
typedef struct TrtParams {
	int n;
	const int *tensors;
	TrtRel **const *vars;
} TrtParams;

/* Before outermost repeat block `loop` (0, 1, ... in program order) of
 * `count` iterations: the first iteration to run.  0, unless --resume: then
 * count for a block the checkpoint is past, and for the block it was written
 * in, the iteration after it, with every param restored from it. */
int64_t trt_resume(int loop, int64_t count, const TrtParams *params);

/* At the end of iteration `iter` of outermost block `loop`: with
 * --checkpoint, every --checkpoint-every iterations, write the params (and
 * where the run is) to the checkpoint file, atomically.  Every rank calls it. */
void trt_checkpoint(int loop, int64_t iter, int64_t count, const TrtParams *params);

/* ---- IST: independent subnet training (ist.c) ---- */

/* A param an IST body trains: its tensor, which of its dims are split
 * (the split size's position in the clause, or -1) and its relation type
 * and placement in the body's one-rank plan (the subnet's extents). */
typedef struct TrtIstParam {
	int tensor;
	int split[TRT_MAXDIM];
	const TrtType *local;
	TrtPlace place;
} TrtIstParam;

#define TRT_MAXSPLIT 8
typedef struct TrtIst {
	int loop;                       /* the IST loop's number, 0 first in the source */
	int nsub;                       /* subnets: the plan's rank count */
	int nsplit;
	const char *split[TRT_MAXSPLIT];        /* the split sizes' names and extents */
	int64_t extent[TRT_MAXSPLIT];
	int64_t every, count;           /* J local iterations per round; NB iterations in all */
	int nparams;
	const TrtIstParam *params;
} TrtIst;

typedef struct TrtIstRun TrtIstRun;

/* Runs IST loop `ist` on the params of the program (`params`, in the
 * program's layout before and after): body is the loop's one-rank program
 * on the subnet, which calls trt_ist_next before each iteration and
 * trt_ist_end after the last; outer[] the iterations of the repeat blocks
 * around the loop, outermost first (NULL: none).  Every rank calls it. */
void trt_ist(const TrtIst *ist, const TrtParams *params, int (*body)(TrtIstRun *), const int64_t *outer);
/* In the body: the iteration of the repeat block around the IST loop at
 * `depth` (0 the outermost), from trt_ist's outer[]. */
int64_t trt_ist_counter(const TrtIstRun *x, int depth);
/* The next iteration of this rank's share (0 when none is left), the
 * rounds' exchanges and the subnet's params in `local` in between. */
int trt_ist_next(TrtIstRun *x, const TrtParams *local, int64_t *it);
void trt_ist_end(TrtIstRun *x, const TrtParams *local);

/* ---- communication ---- */

/* -> TRT_ALL.  From TRT_ANY, a key held by several ranks arrives once per
 * holder (duplicates kept, in rank order) for a later trt_agg to combine. */
TrtRel *trt_bcast(const TrtRel *r);
TrtRel *trt_shuffle(const TrtRel *r, TrtPlace p);     /* -> p (TRT_PART) */

/* A convolution's input with its neighbours' boundary rows: x (dense,
 * TRT_ALL or TRT_PART) as type t, whose halo dims (hext > 0) are x's
 * dims blocked alike, every other dim as x's.  The result has x's
 * placement; each rank sends each other rank exactly the pieces of its
 * chunks that rank's chunks hold (one MPI_Alltoallv), and copies its own. */
TrtRel *trt_halo(const TrtRel *x, const TrtType *t);

/* ---- local operations (no communication) ---- */

/* Local join: every pair of local tuples whose key dims lkey[i] and rkey[i]
 * agree for all i < nmatch meets in kernel k.  The join's output key is the
 * left key followed by the right key without its rkey dims (the TRA
 * convention).  With ngroup >= 0 the output key is further projected onto
 * join-output dims group[0..ngroup) and all pairs that map to one output key
 * accumulate into one chunk (the first call with acc = 0, the rest with
 * acc = 1): a join fused with its aggregation, whose join output is never
 * materialised.  out and p give the result's type and placement. */
typedef struct TrtJoin {
	int nmatch;
	int lkey[TRT_MAXDIM];
	int rkey[TRT_MAXDIM];
	int ngroup;                     /* -1: no aggregation */
	int group[TRT_MAXDIM];          /* an entry -1: the output dim has one chunk, key 0 */
	int pattern;                    /* a sparse output: the input (0 left, 1 right,
	                                   2 the mask) whose chunk's stored positions it keeps */
	int nmask;                      /* a sampled join: its mask's key dims, */
	int mkey[TRT_MAXDIM];           /* mask dim d is the join's key dim mkey[d] */
	int inplace;                    /* an elementwise join (no aggregation): 1 (2) its output
	                                   made in the left's (right's) chunks, which have its
	                                   layout (a sparse output: its pattern), where no other
	                                   relation shares them; 0 not */
} TrtJoin;

TrtRel *trt_join(const TrtRel *l, const TrtRel *r, const TrtJoin *j,
                 TrtKernel k, const TrtType *out, TrtPlace p);
/* A sampled join (SDDMM when it sums): as trt_join, but only where the
 * sparse relation m stores elements.  A pair of tuples whose join key has
 * no tuple of m (mask key dim d = join key dim j->mkey[d]) is skipped; the
 * others' output chunk has m's chunk's pattern (pattern 2), and the kernel
 * gets m's chunk as in[2], whose stored elements it loops over. */
TrtRel *trt_join_sampled(const TrtRel *l, const TrtRel *r, const TrtRel *m, const TrtJoin *j,
                         TrtKernel k, const TrtType *out, TrtPlace p);
/* The stored element at (row, col) of a 2-d sparse chunk (columns
 * increasing within a row, as every sparse chunk has them), or -1: a
 * sparse input read at a sampled join's mask positions. */
int64_t trt_csr_find(const TrtView *v, int64_t row, int64_t col);
/* sum over i < n of a[i * sa] * b[i * sb]: a sampled contraction's dot
 * product, in eight partial sums for unit strides, so that the compiler
 * keeps them in vector lanes (the order of the additions is fixed, so
 * results do not depend on it).  Inline, in the generated kernel's loop
 * over the mask's elements and with its flags: a call into the runtime,
 * built for any x86-64, took 11 ns an element at n = 16 (mf_sparse's U
 * V^T; its adds of the partial sums one after the other, SSE's four
 * lanes), inlined 3.4 (bench/README.md, "Sparse kernels"). */
#define TRT_DOT(name, T)                                                         \
	static inline T name(int64_t n, const T *a, int64_t sa, const T *b, int64_t sb) \
	{                                                                        \
		T s[8] = {0}, r = 0;                                             \
		int64_t i = 0;                                                   \
		if (sa == 1 && sb == 1)                                          \
			for (; i + 8 <= n; i += 8)                               \
				for (int u = 0; u < 8; u++)                      \
					s[u] += a[i + u] * b[i + u];             \
		for (; i < n; i++)                                               \
			r += a[i * sa] * b[i * sb];                              \
		return r + ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])); \
	}
TRT_DOT(trt_sdot, float)
TRT_DOT(trt_ddot, double)
#undef TRT_DOT
/* A kernel's scratch memory: at least nbytes, aligned to 64 bytes, the
 * runtime's, good until the next call (kernels run on the main thread
 * only); out of memory ends the run as a chunk's would.  A convolution's
 * table of window offsets. */
void *trt_scratch(size_t nbytes);

/* Local aggregation: tuples grouped by key dims group[0..ngroup) and
 * combined elementwise with agg.  Chunk shapes are unchanged (the output's
 * chunk dims are the input's, renumbered onto the group). */
TrtRel *trt_agg(const TrtRel *r, int ngroup, const int *group, TrtAgg agg,
                const TrtType *out, TrtPlace p);

/* Local map: output key dim i is input key dim keymap[i] (nkeymap = out's
 * nkey); each chunk goes through kernel k, or is shared unchanged when k is
 * NULL (a pure rekey).  In a rekey, keymap[i] = -1 inserts key dim i and
 * duplicates every tuple along it, once per value below out's frontier
 * there, the chunks shared (replication-based matmul). */
TrtRel *trt_map(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                const TrtType *out, TrtPlace p);
/* The same, its output made in r's chunks where no other relation shares
 * them: k elementwise, keymap the identity, out r's layout; r dies after. */
TrtRel *trt_map_in_place(const TrtRel *r, int nkeymap, const int *keymap, TrtKernel k,
                         const TrtType *out, TrtPlace p);

/* Local filter on keys. */
TrtRel *trt_filter(const TrtRel *r, TrtKeyPred pred, TrtPlace p);

/* ---- sparse relations and holes ----
 *
 * A sparse relation holds no tuple for a block with nothing stored, and a
 * dense one computed from it may lack tuples too; a missing tuple is a
 * zero block.  A join or map with a sparse output (out->sparse) keeps the
 * stored positions of its pattern input (a map's only one), computing
 * only there. */

/* r with a zero chunk for every key its placement gives this rank and r
 * lacks (r is not TRT_ANY). */
TrtRel *trt_complete(const TrtRel *r);
/* r dense and complete: a param's value. */
TrtRel *trt_densify(const TrtRel *r);
/* Before the first op, for each sparse input the program reads (planned
 * with the fraction `density` stored, in placement p): place the blocks of
 * its file's compressed dim d in the site map t->map names for that dim,
 * which every relation whose type names it follows, by the work the plan
 * gives a block (sparse.c): cost[d][0] flops per stored element, cost[d][1]
 * per line (both 0: an element each); and count what this rank
 * will hold beyond the plan's estimate; then trt_mem_recheck repeats the
 * memory check with it (guard.c). */
void trt_balance(int tensor, const TrtType *t, double density, const double cost[][2], TrtPlace p);
void trt_mem_recheck(void);
/* Kernels: a sparse view expanded into a dense array (the caller frees
 * it); v then views it. */
void *trt_view_dense(TrtView *v, size_t elsize);

/* ---- gathers ---- */

/* A look-up by value: the result (out, placed as the index, p) is keyed by
 * the index's key dims, then the table's without dim; its element (i, o)
 * is the table's element at index[i] along dim and o along the others.  A
 * table partitioned across ranks is looked up (the row numbers sent to
 * the rows' owners, the rows sent back); one on every rank is read here.
 * An index value outside dim is an error naming iname and tname (status
 * 1 on every rank).  Collective. */
TrtRel *trt_gather(const TrtRel *table, const TrtRel *index, int dim, const TrtType *out, TrtPlace p,
                   const char *iname, const char *tname);

/* The adjoint: a relation of type out placed by p, zero (base NULL) or
 * base's values (base: type out, placed by p, dense and whole) but where
 * rows (keyed as trt_gather's result) add into the row index[i] names
 * along dim, each times scale.  Rows on every rank add where they land;
 * placed rows are sent to the ranks holding their result tuple.  in_place:
 * the base is dead after this call and is returned, updated (a chunk
 * another relation shares is copied first); else its chunks are copied
 * once.  Collective. */
TrtRel *trt_scatter(const TrtRel *rows, const TrtRel *index, TrtRel *base, int in_place, double scale, int dim,
                    const TrtType *out, TrtPlace p, const char *iname, const char *tname);

/* ---- two-phase execution of a contraction ---- */

/* A two-phase schedule (made by trac's optimizer/twophase.c): the join
 * groups of a join, one per tuple of its key space (the left key, then the
 * right key's dims that are not matched), numbered row-major over their
 * frontiers, each run on one rank.  jobs[r] lists, increasing, the groups
 * rank r runs.  On another rank count than planned, planned rank r's groups
 * run on rank r modulo the count. */
typedef struct TrtTwoPhase {
	int planned;                    /* ranks planned for: jobs has as many lists */
	int64_t njoin;                  /* join groups */
	const int64_t *const *jobs;     /* per planned rank: its join groups, increasing */
	const int64_t *njobs;           /* per planned rank: how many */
	TrtAgg agg;                     /* how the sums of one output tuple combine */
} TrtTwoPhase;

/* A join fused with its aggregation (j->ngroup >= 0) by a two-phase
 * schedule.  Each rank sends each of its chunks, once, to every rank whose
 * join groups need it (nonblocking, one message per chunk per
 * destination); a rank runs a join group's kernel as soon as both of its
 * chunks are in, accumulating the groups of one output tuple into one chunk
 * in join-group order, and sends that sum to the tuple's rank under p (a
 * TRT_PART placement), which combines the sums it gets in rank order.  So
 * results never depend on message timing.  l and r are TRT_PART or TRT_ALL
 * and hold every key below their frontiers. */
TrtRel *trt_twophase(const TrtRel *l, const TrtRel *r, const TrtJoin *j, TrtKernel k,
                     const TrtType *out, TrtPlace p, const TrtTwoPhase *s);

/* ---- kernels' helpers ---- */

/* C = alpha * op(A) op(B) + beta * C on strided views (BLIS's general
 * strides: element (i, j) of A is a[i*rsa + j*csa]). */
void trt_sgemm(int64_t m, int64_t n, int64_t k, float alpha,
               const float *a, int64_t rsa, int64_t csa,
               const float *b, int64_t rsb, int64_t csb, float beta,
               float *c, int64_t rsc, int64_t csc);
void trt_dgemm(int64_t m, int64_t n, int64_t k, double alpha,
               const double *a, int64_t rsa, int64_t csa,
               const double *b, int64_t rsb, int64_t csb, double beta,
               double *c, int64_t rsc, int64_t csc);

/* ---- profiling ---- */

/* Bracket IA op `op` (an index into TrtProgram.ops); a no-op unless
 * --profile or TRAC_PROFILE=1. */
void trt_op_begin(int op);
void trt_op_end(int op);

/* ---- errors ---- */

/* One line to stderr ("PROGRAM: " and the message), then the whole job ends
 * with status 1 (MPI_Abort: for errors only one rank knows about). */
void trt_fatal(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Integer division in kernels: truncates toward zero, as C; x / 0 is 0 (as
 * numpy gives, with a warning) and INT_MIN / -1 wraps, so no input traps. */
static inline int32_t trt_idiv32(int32_t a, int32_t b)
{
	return b == 0 ? 0 : b == -1 ? (int32_t)(0u - (uint32_t)a) : a / b;
}

static inline int64_t trt_idiv64(int64_t a, int64_t b)
{
	return b == 0 ? 0 : b == -1 ? (int64_t)(0u - (uint64_t)a) : a / b;
}

/* exp, log, tanh and pow in kernels (vmath.c): SLEEF's, within 1.0 ulp,
 * declared simd so that gcc vectorises loops calling them; every vector
 * variant and the scalar give the same value for the same argument, so a
 * kernel's elements do not depend on where its loops split them.  (vmath.c
 * defines the variants itself, TRT_VMATH_DEFINES: gcc would make its own.) */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TRT_VMATH_DEFINES)
#define TRT_SIMD __attribute__((simd("notinbranch"), const, nothrow))
#else
#define TRT_SIMD
#endif

/*
 * exp in f32 on a CPU with FMA is trac's own, here in full so that a
 * kernel's loop inlines it: SLEEF's, called once a vector, bounds a map at
 * about 1e9 elements a second on a Zen 3 (its constants are loaded again in
 * every call), where this one inlined runs at 1.9e9 (bench/README.md,
 * "Vectorised maps").  It is plain C that gcc vectorises at any width:
 * x = n ln 2 + r with n = round(x / ln 2) (the 1.5 * 2^23 trick, whose low
 * bits are n) and ln 2 = hi + lo, r1 = x - n hi exactly by one fma, the
 * small c = -n lo beside it, r = r1 + c; e^r = 1 + q with
 * q = r1 + (c + r^2 p(r)), p of degree 4 fitted to (e^r - 1 - r) / r^2
 * over |r| <= ln 2 / 2; the result s1 (1 + q) s2 with
 * s1 s2 = 2^n split in two normal factors, so that a subnormal result
 * rounds in the last product only.  Arguments over 89 give infinity, under
 * -104 zero (the result there rounds to them anyway), NaN gives NaN.
 * Measured over every float (`bench/vmath --all`): at most 0.875 ulp from
 * the exact value, at most 1 ulp from glibc's expf, which is within 0.5.
 * Every step is one IEEE operation with an explicit fmaf, so its vector and
 * scalar forms agree bit for bit; vmath.c's trt_expf and its vector
 * variants compute this function too on a CPU with FMA.
 */
static inline float trt_expf_fma(float x)
{
	union { float f; uint32_t u; } t, s1, s2, y;
	const float shift = 0x1.8p23f;
	t.f = __builtin_fmaf(x, 0x1.715476p+0f, shift);
	float n = t.f - shift;
	uint32_t k = t.u - 0x4b400000u;         /* n, from t's low bits */
	float r1 = __builtin_fmaf(n, -0x1.62e43p-1f, x);  /* exact */
	float c = n * 0x1.05c610p-29f;          /* -n (ln 2 - hi) */
	float r = r1 + c;
	float p = __builtin_fmaf(0x1.6a23c6p-10f, r, 0x1.123a2p-7f);
	p = __builtin_fmaf(p, r, 0x1.5558f4p-5f);
	p = __builtin_fmaf(p, r, 0x1.555492p-3f);
	p = __builtin_fmaf(p, r, 0x1.fffffcp-2f);
	float q = r1 + __builtin_fmaf(p, r * r, c);
	/* over 89 infinity, under -104 zero, by masks: a select on a float
	 * comparison vectorises only under -fno-trapping-math.  Under -104, n
	 * is held at -150 and s2 is 0, so that s1 stays normal and the product
	 * is an exact 0: a subnormal or an underflow on the way costs the CPU
	 * a microcode assist (on the Zen 3, 1.2 ns an element against 0.6, a
	 * softmax's masked or far tail) */
	uint32_t over = 0u - (uint32_t)__builtin_isgreater(x, 89.0f);
	uint32_t under = 0u - (uint32_t)__builtin_isless(x, -104.0f);
	int32_t kc = (int32_t)k < -150 ? -150 : (int32_t)k;
	uint32_t k1 = (uint32_t)(kc >> 1);
	s1.u = (k1 + 127u) << 23;
	s2.u = ((uint32_t)kc - k1 + 127u) << 23 & ~under;
	y.f = __builtin_fmaf(s1.f, q, s1.f) * s2.f;
	y.u = ((y.u & ~over) | (0x7f800000u & over)) & ~under;
	return y.f;
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(TRT_VMATH_DEFINES) && \
	defined(__FMA__)
static inline float trt_expf(float x)
{
	return trt_expf_fma(x);
}
#else
TRT_SIMD float trt_expf(float x);
#endif
TRT_SIMD float trt_logf(float x);
TRT_SIMD float trt_tanhf(float x);
TRT_SIMD float trt_powf(float x, float y);
TRT_SIMD double trt_exp(double x);
TRT_SIMD double trt_log(double x);
TRT_SIMD double trt_tanh(double x);
TRT_SIMD double trt_pow(double x, double y);

#endif
