/*
 * ir.h: the one header of the ir/ layer.
 *
 * ir/ owns what every later phase shares: memory (arenas, vectors), source
 * files and locations, diagnostics, the block-kernel descriptors, and trac's
 * two intermediate representations with their printers and verifiers:
 *
 *   TRA (TraProg)  the logical program: tensor relations of (key, chunk)
 *                  tuples and the ops of the tensor relational algebra.
 *   IA  (IaPlan)   the physical plan: the same relations with a placement
 *                  across sites, bcast / shuffle and local ops (Table 1).
 *
 * Both IRs are arrays of ops in topological order; an op refers to its
 * inputs by index (as QBE's Ref), which keeps dumps stable and cloning cheap.
 * Nothing here knows the .tra syntax: the frontend builds TRA through this
 * interface.
 */
#ifndef TRAC_IR_H
#define TRAC_IR_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define MAXDIM 8                /* the most dims of a tensor, key or chunk (TRT_MAXDIM) */
#define MAXIN 3                 /* the most inputs of an op: a sampled join's two and its mask,
                                 * a scatter's rows, index and base */

/* ---- base.c: memory, vectors, bugs ---- */

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
bool ends_with(const char *s, const char *tail);     /* s NULL: false */
char *xprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* An arena: memory freed all at once when its phase ends. */
typedef struct Arena Arena;
Arena *arena_new(void);
void *arena_alloc(Arena *a, size_t n);          /* zeroed */
char *arena_strdup(Arena *a, const char *s);
void arena_free(Arena *a);

/* A growable array of T: Vec(int) v = {0}; vec_push(&v, 3); v.v[0], v.n. */
#define Vec(T) struct { T *v; int n, cap; }
#define vec_push(vec, x) do { \
		if ((vec)->n == (vec)->cap) { \
			(vec)->cap = (vec)->cap ? 2 * (vec)->cap : 8; \
			(vec)->v = xrealloc((vec)->v, (size_t)(vec)->cap * sizeof *(vec)->v); \
		} \
		(vec)->v[(vec)->n++] = (x); \
	} while (0)
#define vec_free(vec) (free((vec)->v), (vec)->v = NULL, (vec)->n = (vec)->cap = 0)

/* A growable string. */
typedef struct Buf { char *s; size_t len, cap; } Buf;
void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_vprintf(Buf *b, const char *fmt, va_list ap);
void buf_puts(Buf *b, const char *s);
void buf_ints(Buf *b, int n, const int *v, const char *sep);  /* v[0..n), sep between */
/* s as a C (or JSON) string literal: '"' and '\' escaped, control
 * characters in octal (\u) escapes */
void buf_quote(Buf *b, const char *s, bool json);
void buf_free(Buf *b);

/* A broken invariant: a bug in trac.  Prints where, and exits with status 4. */
#define tr_bug(...) tr_bug_at(__FILE__, __LINE__, __VA_ARGS__)
_Noreturn void tr_bug_at(const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The folder of the running executable (malloc'd), or NULL; *in_build:
 * it is the build tree's own, which finds its runtime and stdlib in the
 * source tree rather than beside itself. */
char *tr_exe_dir(bool *in_build);

/* Overflow-checked arithmetic on extents: false when the result overflows. */
bool mul_ok(int64_t a, int64_t b, int64_t *r);
bool add_ok(int64_t a, int64_t b, int64_t *r);
int64_t ceil_div(int64_t a, int64_t b);
uint64_t hash_keys(const int64_t *k, int n);              /* of n int64 words, for memos */

/* ---- base.c: source files and locations ---- */

typedef struct SrcFile {
	char *path;             /* as the user named it */
	char *text;             /* whole file, NUL-terminated */
	size_t len;
} SrcFile;

/* A span of source: byte offsets, turned into line:col only when printed. */
typedef struct Loc {
	int file;               /* index into the file table, -1 for none */
	uint32_t off, len;
} Loc;

extern const Loc NOLOC;

int src_add(const char *path, char *text, size_t len);   /* takes ownership of text */
const SrcFile *src_get(int file);
int src_count(void);
void src_reset(void);                                     /* forget all files (fuzzing) */
void loc_linecol(Loc loc, int *line, int *col);
Loc loc_span(Loc a, Loc b);                               /* from a's start to b's end */
char *loc_text(Loc loc);                                  /* the spanned text, one line, spaces squeezed */

/* ---- base.c: diagnostics ---- */

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } DiagKind;

/* Report "file:line:col: error: msg", the source line and a caret under the
 * span.  Errors are counted; after diag_max errors the compiler stops. */
void diag(DiagKind kind, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void vdiag(DiagKind kind, Loc loc, const char *fmt, va_list ap);
int diag_errors(void);
void diag_reset(void);
extern int diag_max;            /* error cap (default 20) */
extern bool diag_color;         /* set by the driver: a terminal and no NO_COLOR */
extern FILE *diag_out;          /* default stderr; tests redirect it */

/* ---- kernels: the block functions joins, maps and aggregations call ---- */

typedef enum { DT_F32, DT_F64, DT_I32, DT_I64 } DType;
const char *dtype_name(DType t);                          /* "f32", "f64", "i32", "i64" */
int dtype_size(DType t);
bool dtype_is_int(DType t);

typedef enum { AGG_ADD, AGG_MAX, AGG_MIN } AggKind;
const char *agg_name(AggKind a);

/*
 * Elementwise scalar operations inside a kernel expression: name, arity,
 * and weight, what one element of the op costs in the generated loops in
 * adds (the cost model prices each op's excess over an add at
 * KOP_WEIGHT_RATE, on top of a flop at the machine's loop rate:
 * optimizer/cost.c).  A weight is one plus the op's time per element
 * beyond an add's, in the flops of the loop rate it was measured beside
 * (bench/kops.c, bench.py `kops`: each op in a loop of its own as codegen
 * emits it, f32 over 2^20 floats, exp, log, tanh and pow on the runtime's
 * SLEEF functions), the median of three runs on the AVX2 EPYC of
 * bench/README.md at load 7: exp 0.72 ns an element, log 1.42, tanh 3.0,
 * sigmoid 0.85, pow 5.7 against an add's 0.30 and the loop rate's flop
 * 0.15.  Division, square root, comparisons and the rest ran at an add's
 * pace or faster (the loop's loads and stores bound them): 1; where, 2.0-2.6
 * with a third input stream of its own, is 1 as its condition is mostly
 * computed in the kernel; stop_gradient emits no code.
 */
#define KOPS(X) \
	X(NEG, "neg", 1, 1) X(EXP, "exp", 1, 4) X(LOG, "log", 1, 9) X(SQRT, "sqrt", 1, 1) \
	X(ABS, "abs", 1, 1) X(TANH, "tanh", 1, 20) X(SIGMOID, "sigmoid", 1, 5) X(RELU, "relu", 1, 1) \
	X(ADD, "+", 2, 1) X(SUB, "-", 2, 1) X(MUL, "*", 2, 1) X(DIV, "/", 2, 1) X(POW, "**", 2, 38) \
	X(LT, "<", 2, 1) X(LE, "<=", 2, 1) X(GT, ">", 2, 1) X(GE, ">=", 2, 1) X(EQ, "==", 2, 1) \
	X(NE, "!=", 2, 1) X(WHERE, "where", 3, 1) \
	X(STOP, "stop_gradient", 1, 0)
#define KOP_WEIGHT_RATE 6.5e9     /* the loop rate (flop/s) the weights were measured at */
typedef enum {
#define X(n, s, a, w) KOP_##n,
	KOPS(X)
#undef X
} KOp;
const char *kop_name(KOp op);
int kop_arity(KOp op);
double kop_weight(KOp op);

/* A kernel expression: a tree over the kernel's input elements. */
typedef enum { KX_IN, KX_CONST, KX_OP, KX_IDX } KExprKind;
typedef struct KExpr {
	KExprKind kind;
	int in;                 /* KX_IN: which input; KX_IDX: which label */
	double val;             /* KX_CONST */
	KOp op;                 /* KX_OP */
	struct KExpr *arg[3];
} KExpr;

KExpr *kx_in(Arena *a, int in);
KExpr *kx_const(Arena *a, double v);
KExpr *kx_op(Arena *a, KOp op, KExpr *x, KExpr *y, KExpr *z);
KExpr *kx_idx(Arena *a, int label);                       /* the element's index along a label, in the whole tensor */
KExpr *kx_subst(Arena *a, const KExpr *e, KExpr *const *repl);  /* KX_IN i -> repl[i] */
bool kx_is_product(const KExpr *e);                      /* in0 * in1 */
KExpr *kx_diff(Arena *a, const KExpr *e, int in);        /* d e / d in<in>, constants folded */
bool kx_is_zero(const KExpr *e);
bool kx_equal(const KExpr *a, const KExpr *b);           /* structurally */
bool kx_uses(const KExpr *e, int in);
bool kx_zero_with(const KExpr *e, int in);               /* e is 0 wherever input in is 0 */
int kx_nops(const KExpr *e);                             /* operators in e */
double kx_weight(const KExpr *e);                        /* its ops' weights summed (KOPS) */

/*
 * A block kernel: out[outlab] = red over the other labels of expr(in[inlab]).
 * Each chunk dim of each input and of the output carries a label (a loop
 * index); labels absent from the output are reduced with `red`, which is
 * also how the kernel combines into an existing chunk when called with acc.
 * A matmul chunk kernel is in0 * in1 with labels ik, kj -> ij and red add.
 */
typedef struct Kernel {
	int nin;                        /* 1 (map) or 2 (join) */
	int nlab;
	int nindim[2];
	int inlab[2][MAXDIM];
	int noutdim;
	int outlab[MAXDIM];
	AggKind red;
	bool reduces;                   /* some label is reduced */
	KExpr *expr;                    /* never NULL */
	/* A convolution's windows (TRA_CONV, IA_CONV; expr in0 * in1, red
	 * add): input 1's chunk dim win[w].dim, labelled L, is read at element
	 * pos(L) + coef * pos(win[w].lab) + shift, positions in the whole
	 * tensors (TrtView.off), zero outside input 1.  Of L and lab, one is
	 * a label of input 0 (summed) and the other the output's. */
	int nwin;
	struct { int dim, lab; int64_t coef, shift; } win[MAXDIM];
} Kernel;

/* A convolution kernel's register tile along input 1's rows, in bytes
 * (codegen/conv.c: CONV_TILE_V vectors of CONV_VEC_BYTES); what a row
 * leaves over runs as shorter vectors and scalars, which the cost model
 * prices at the loop rate (cost_conv). */
#define CONV_TILE_BYTES 96

Kernel *kernel_new(Arena *a, int nin);
Kernel *kernel_clone(Arena *a, const Kernel *k);
void kernel_print(Buf *b, const Kernel *k);                /* "relu(in0) ik,kj->ij sum" */
/* e with input i replaced by repl[i] and label l renumbered labmap[l]. */
KExpr *kx_relabel(Arena *a, const KExpr *e, KExpr *const *repl, const int *labmap);
/* outer . inner: a one-input, non-reducing kernel applied to the output of
 * a non-reducing kernel, reading inner's inputs; NULL when they do not compose. */
Kernel *kernel_compose(Arena *a, const Kernel *outer, const Kernel *inner);
/* Does e distribute over the aggregation agg (f(a (+) b) = f(a) (+) f(b))?
 * *uses_in: e reads its input at all. */
bool kx_distributes(const KExpr *e, AggKind agg, bool *uses_in);

/* ---- relation types ---- */

/* The static type of a tensor relation (the runtime's TrtType). */
typedef struct RelType {
	DType dtype;
	int nkey;
	int64_t extent[MAXDIM];         /* per key dim: tensor extent */
	int64_t block[MAXDIM];          /* per key dim: chunk size */
	int nchunk;
	int chunkdim[MAXDIM];           /* chunk dim c spans key dim chunkdim[c] */
	bool sparse;                    /* chunks compressed (and holes) */
	bool holes;                     /* tuples may be absent: zero blocks */
	float density;                  /* sparse: the fraction of elements stored, planning's
	                                 * estimate (rel_density) */
	/* a halo (IA_HALO's output): along key dim d with hext[d] > 0, chunk
	 * k holds the elements [k*block - hlo, min((k+1)*block, extent) + hhi)
	 * of a dim of hext[d] elements, clipped to it; extent is the reader's
	 * (a convolution's output dim), hext the data's */
	int64_t hlo[MAXDIM], hhi[MAXDIM], hext[MAXDIM];
} RelType;

/* A contraction kernel (in0 * in1 summed over the labels they share) as
 * BLIS calls (ir/gemm.c): its labels in groups by role, and the group BLIS
 * sees as m, n and k; every other group is a loop of calls.  codegen emits
 * these calls and the cost model prices them. */
enum { ROLE_BATCH, ROLE_M, ROLE_N, ROLE_K, NROLE };

typedef struct LabGroup {
	int role;
	int n;                          /* labels, outer to inner */
	int lab[2 * MAXDIM];
	double ext;                     /* static length: product of the labels' blocks */
	int pos[3];                     /* its innermost label's chunk dim in in0, in1 and
	                                   the output; -1 where the role is absent */
	double stride[3];               /* and its stride there, in elements, at the blocks' lengths */
} LabGroup;

typedef struct Contraction {
	int ngroup;
	LabGroup g[2 * MAXDIM];
	int use[NROLE];                 /* the group BLIS sees in each role but batch, or -1 */
} Contraction;

/* Whether k on inputs of types inty, computing in dt, is BLIS gemm calls,
 * and which (*c). */
bool contraction_plan(const Kernel *k, const RelType *const *inty, DType dt, Contraction *c);
/* The calls a chunk makes (the product of the looped groups' lengths) and
 * each call's m, n and k, at the blocks' lengths. */
double contraction_calls(const Contraction *c, double *m, double *n, double *k);

bool rel_type_eq(const RelType *a, const RelType *b);     /* the same relation type, field by field */
/* Both dense and complete (no holes), with one layout: dtype, key dims,
 * extents, blocks, halos, chunk order (an elementwise op's operands). */
bool rel_same_layout(const RelType *a, const RelType *b);
/* The same dtype, key dims, extents, blocks, halos and chunk order, dense
 * or sparse, holes or not. */
bool rel_same_dims(const RelType *a, const RelType *b);
int64_t rel_frontier(const RelType *t, int keydim);       /* ceil(extent / block) */
int64_t rel_chunk_len(const RelType *t, int keydim, int64_t k);   /* chunk k's length along keydim: the last may be short */
int64_t rel_block_len(const RelType *t, int keydim);      /* a whole chunk's length along keydim: min(block, extent) */
int64_t rel_chunk_off(const RelType *t, int keydim, int64_t k);   /* chunk k's first element along keydim */
int64_t rel_chunk_elems(const RelType *t, const int64_t *key);    /* elements in the chunk at key */
int64_t rel_ntuples(const RelType *t);
double rel_floats(const RelType *t);                      /* exact element count over all tuples */
double rel_density(const RelType *t);                     /* fraction stored: 1 unless sparse */
double rel_stored(const RelType *t);                      /* elements stored (estimated when sparse) */
double rel_bytes(const RelType *t);                       /* bytes of its chunks, indices included */
double rel_chunk_bytes(const RelType *t, const int64_t *key);     /* the chunk at key's, likewise */
int rel_chunkpos(const RelType *t, int keydim);           /* chunk dim spanning keydim, or -1 */
void reltype_print(Buf *b, const RelType *t);

/* Sparse relations (optimizer/sparse.c says which are): the input whose
 * stored positions kernel k's output keeps, or -1; whether input i may have
 * holes (absent tuples, zero blocks) that k, zero where i is, keeps zero. */
int kernel_sparse_pattern(const Kernel *k, const RelType *const *in);
bool kernel_hole_ok(const Kernel *k, int i);

/* ---- the program's tensors and statements, shared by TRA and IA ---- */

typedef enum { TENSOR_INPUT, TENSOR_PARAM, TENSOR_TEMP } TensorRole;

/* How a param starts: values by seed and element index, or from a file. */
typedef enum { INIT_NONE, INIT_ZEROS, INIT_ONES, INIT_UNIFORM, INIT_NORMAL, INIT_FILE } InitKind;

typedef struct Tensor {
	const char *name;
	Loc loc;
	TensorRole role;
	DType dtype;
	int rank;
	int64_t shape[MAXDIM];
	bool sparse;                    /* an input declared sparse */
	double density;                 /* sparse: the fraction of elements stored, as planned */
	const char *path;               /* input or INIT_FILE param: default file, or NULL */
	InitKind init;                  /* param */
	double init_a, init_b;          /* uniform(a, b), normal(mean, std) */
	bool output;                    /* written at the end of the run */
	const char *outpath;            /* output: default file, or NULL */
	Loc outloc;
	const char *dimsize[MAXDIM];    /* a dim declared by a plain size name: the name, else NULL */
} Tensor;

/* An IST loop (`repeat b in NB split H1, H2 every J`): its body is planned
 * apart, as a one-rank program on the subnet (see HACKING.md "IST"). */
enum { MAXSPLIT = 8 };
typedef struct IstLoop {
	Loc loc;                        /* the split clause */
	int nsplit;
	const char *split[MAXSPLIT];    /* the split sizes, in the clause's order */
	Loc splitloc[MAXSPLIT];
	int64_t extent[MAXSPLIT];       /* their extents in this program */
	int64_t every;                  /* J: local iterations per round */
	int64_t count;                  /* the loop's iterations, NB */
	int depth;                      /* repeat blocks around it */
	/* where sema lowered the body: the loop op (its body the ops up to
	 * its endloop) and the body's statements; the driver takes the body
	 * out of the program (frontend/ist.c), leaving the loop empty */
	int op, stmt0, nstmt;
} IstLoop;

typedef struct Stmt {
	Loc loc;
	char *text;                     /* the statement's source, one line */
} Stmt;

/* ---- tra.c: the tensor relational algebra ---- */

/* One input field of an op (ops.def's inputs column): where the op holds
 * it, and when it is an input (IN_END: no more fields).  tra.c's
 * ir_inputs and ir_remap read a row of them for either IR. */
typedef enum { IN_END, IN_ALWAYS, IN_NONNEG, IN_FLAG } InWhen;
typedef struct InField {
	unsigned short off;             /* the int holding the input op */
	unsigned short flag;            /* IN_FLAG: the bool saying it is there */
	InWhen when;
} InField;
int ir_inputs(const void *op, const InField *f, int *in);
void ir_remap(void *op, const InField *f, const int *map);
Kernel *ir_kernel(const void *op, size_t off);           /* the kernel at offset off, or NULL (0) */

typedef enum {
#define TRA_OP(n, s, in, k, m) TRA_##n,
#include "ops.def"
} TraOpKind;

const char *tra_op_name(TraOpKind k);

/* Key dims that must be equal (diagonals: X[i,i]). */
typedef struct KeyPred {
	int neq;
	int eq[MAXDIM][2];
} KeyPred;

/* What a join matches: left key dim lkey[i] equals right key dim rkey[i],
 * for i < nmatch.  The output key is the left key followed by the right
 * key's unmatched dims (ia_join_out_dim). */
typedef struct JoinSpec {
	int nmatch;
	int lkey[MAXDIM], rkey[MAXDIM];
} JoinSpec;

/* A sampled join's mask (optimizer/sparse.c): a sparse relation whose
 * stored positions are the only ones the join computes.  Its key dim d is
 * the join's output key dim key[d] (before any fused aggregation), and its
 * chunk dims are the output's in order; the result is sparse with the
 * mask's pattern, its values the join's there (the mask's own values are
 * not read).  SDDMM is the sampled contraction
 * O[i,j] * sum_k U[i,k] V[j,k]: only O's elements are computed. */
typedef struct JoinMask {
	bool on;
	int rel;                        /* the mask op */
	int nkey;
	int key[MAXDIM];
} JoinMask;

typedef struct TraOp {
	TraOpKind kind;
	int stmt;                       /* index into stmts, or -1 */
	int grad_of;                    /* a backward op (autodiff): 1 + the statement
	                                 * whose op's adjoint it computes; 0 if none */
	RelType type;
	union {
		struct { int tensor; } input;
		struct {
			int left, right;
			JoinSpec on;
			Kernel *kernel;
			JoinMask mask;          /* a sampled join: its third input */
		} join;
		struct { int in; int ngroup; int group[MAXDIM]; AggKind agg; } agg;
		struct { int in; Kernel *kernel; } map;
		struct { int in; int nkey; int keymap[MAXDIM]; } rekey;   /* out dim i = in dim keymap[i] */
		struct { int in; KeyPred pred; } filter;
		struct { int in; int tensor; } output;
		struct { int tensor; } init;            /* INIT, LOAD */
		struct { int in; int tensor; } store;   /* STORE, PRINT */
		struct { int64_t count; int ist; } loop;   /* ist: 0, or IST loop ist - 1 */
		struct { int depth; } counter;          /* the repeat block's nesting depth, 0 outermost */
		/* along key dim `dim`, with p = stride * i + shift + off:
		 * out[.., i, ..] = in[.., p, ..] (a window: gather), or, when
		 * scatter, out[.., p, ..] = in[.., i, ..] and zero between (its
		 * adjoint); zero outside the input.  off: a 0-d i64 op (a loop
		 * counter's multiple), or -1 */
		struct { int in, off; int dim; int64_t shift, stride; bool scatter; } slice;
		struct { int loss; int tensor; } grad;
		/* GATHER: src is the table, dim its gathered key dim; SCATTER:
		 * src is the rows (keyed like a gather's output), dim the
		 * result's dim the index's values address, base the relation
		 * the rows add into (typed as the result), or -1 for zeros, and
		 * scale what each row is multiplied by as it adds; tensor,
		 * itensor: the table's and the index's program tensors, for
		 * messages.  Every maker sets base and scale (-1 and 1 but for
		 * optimizer/scatter.c's scatters) */
		struct { int src, index, dim, tensor, itensor, base; double scale; } gather;
	} u;
} TraOp;

typedef struct TraProg {
	Arena *arena;                   /* kernels, names */
	Vec(Tensor) tensors;
	Vec(Stmt) stmts;
	Vec(TraOp) ops;
	Vec(IstLoop) ist;               /* the IST loops, in source order */
} TraProg;

/* An IST loop's traffic in floats, all ranks together, from its body's
 * program (its params at the subnet's extents) on n subnets: per round the
 * thesis's coordinator count (each split param's subnet slices: whole for
 * one split dim, 1/n for more), the exchange's expectation (that times
 * 1 - 1/n: an entry already on its next owner stays), the unsplit params'
 * averaging (2 (n-1)/n of each per rank, n ranks); per run the final
 * gather's.  Per step is per round / every. */
typedef struct IstTraffic {
	double thesis, exchange, average, gather;
	int64_t rounds;                 /* per run of the loop */
} IstTraffic;
IstTraffic ist_traffic(const TraProg *body, const IstLoop *l, int n);
/* Whether tensor is a param an IST body loads (one the loop trains). */
bool ist_param_loaded(const TraProg *body, int tensor);
/* Whether dim d of tensor ten is one of l's split sizes. */
bool ist_dim_split(const IstLoop *l, const Tensor *ten, int d);

TraProg *tra_new(void);
void tra_free(TraProg *p);
/* A copy of p whose vectors are its own; its kernels and names are p's
 * (p's arena must outlive it). */
TraProg *tra_copy(const TraProg *p);
int tra_add_tensor(TraProg *p, Tensor t);
int tra_add_stmt(TraProg *p, Loc loc);
int tra_push(TraProg *p, TraOp op);                       /* returns the op's index */
int tra_inputs(const TraOp *op, int *in);                 /* fills in[MAXIN], returns count */
int *tra_nreaders(const TraProg *p);                     /* per op, the ops reading it (n + 1; free it) */
void tra_op_remap(TraOp *op, const int *map);             /* inputs renumbered: old op -> map[old] */
Kernel *tra_op_kernel(const TraOp *op);                   /* its block kernel, or NULL */
void tra_print(Buf *b, const TraProg *p);
bool tra_verify(const TraProg *p, Buf *err);              /* false and a message on a broken invariant */
bool tra_has_result(TraOpKind k);                         /* false for output, store, print, loop, endloop */
bool tra_op_joins(TraOpKind k);                           /* a join of two relations on keys (u.join): join, conv */
/* A gather's result type: the index's key dims, then the table's but dim. */
RelType gather_type(const RelType *table, const RelType *index, int dim);

/* ---- build.c: building TRA from index-var schemas ---- */

/* A value under construction: key dim d of relation `op` is index var
 * var[d]; `pend` is an elementwise expression over in0 still to apply.  A
 * compile-time constant has op -1 and its value in pend. */
typedef struct TVal {
	int op;
	int nvar;
	int var[MAXDIM];
	KExpr *pend;
	bool fresh;             /* op made for this value alone: its kernel may absorb more */
} TVal;

typedef struct TraBuild {
	TraProg *prog;
	Arena *arena;
	int stmt;               /* the statement new ops belong to */
	Vec(int64_t) extent;    /* per index var */
	Vec(int) range;         /* per index var: its range op (tb_index), or -1 */
	int norder;             /* preferred chunk order of reductions' results */
	const int *order;
} TraBuild;

typedef enum { TB_SUM, TB_MAX, TB_MIN, TB_ARGMAX, TB_ARGMIN, TB_MEAN } TbRed;

void tb_init(TraBuild *b, TraProg *prog, int stmt);
void tb_free(TraBuild *b);
int tb_var(TraBuild *b, int64_t extent);                           /* a new index var */
TVal tb_rel(TraBuild *b, int op, int nvar, const int *var);          /* an op, its key dims named */
TVal tb_access(TraBuild *b, int op, int nvar, const int *var);       /* the same; a repeated var takes a diagonal */
TVal tb_const(TraBuild *b, double c);
TVal tb_index(TraBuild *b, int var);                                 /* var's position, an i64: a range */
TVal tb_counter(TraBuild *b, int depth);                             /* a repeat block's iteration, an i64 */
int tb_unit(TraBuild *b, double c, DType dt);                        /* c in the one empty key, on every iteration */
TVal tb_unary(TraBuild *b, KOp op, TVal v);
TVal tb_binary(TraBuild *b, KOp op, TVal x, TVal y);                 /* elementwise; joins when needed */
TVal tb_where(TraBuild *b, TVal c, TVal x, TVal y);
TVal tb_join_expr(TraBuild *b, TVal x, TVal y, KExpr *e);            /* e over in0 (x) and in1 (y) */
TVal tb_reduce(TraBuild *b, TVal v, TbRed red, int nr, const int *r);
TVal tb_convert(TraBuild *b, TVal v, DType to);
/* A convolution: w * x[.., own + coef * lab + shift, ..] along x's key dim
 * `dim` per window, one of own and lab a var of w; sum it with tb_reduce. */
typedef struct TbWin { int dim, own, lab; int64_t coef, shift; } TbWin;
TVal tb_conv(TraBuild *b, TVal w, TVal x, int nwin, const TbWin *win);
TVal tb_absorb(TraBuild *b, TVal v);                                 /* v as a fresh op, pend applied */
int tb_finish(TraBuild *b, TVal v, int n, const int *order);         /* keys and chunks in this order */
/* The builder's steps that contract.c, which builds its joins itself, shares */
int tb_join_keys(int *var, int nvar, const int *bvar, int nbvar, JoinSpec *on);
void tb_input_labels(Kernel *k, int in, const RelType *t, const int *var);  /* labels: var ids */
void tb_compact_labels(Kernel *k);                                   /* var ids -> 0.. */

/* ---- ia.c: the implementation algebra ---- */

typedef enum {
#define IA_OP(n, s, mv, in, k, m) IA_##n,
#include "ops.def"
} IaOpKind;

const char *ia_op_name(IaOpKind k);
bool ia_op_moves(IaOpKind k);
bool ia_has_result(IaOpKind k);                           /* false for write, store, print, loop, endloop */
bool ia_op_joins(IaOpKind k);                             /* a join of two relations on keys (u.join): join,
                                                           * conv, twophase */

typedef enum {
	PL_ALL,         /* every site holds every tuple */
	PL_PART,        /* each tuple on the site its dims hash to */
	PL_PARTIAL,     /* anywhere; one key may sit on several sites as partial aggregates */
} PlaceKind;

typedef struct Place {
	PlaceKind kind;
	int ndims;
	int dims[MAXDIM];               /* PL_PART: partitioning key dims, in order */
} Place;

Place place_all(void);
Place place_part(int ndims, const int *dims);
Place place_partial(void);
bool place_eq(const Place *a, const Place *b);
void place_print(Buf *b, const Place *p);                 /* "all", "part(0,2)", "partial" */
/* The rank a PL_PART relation keeps the tuple with this key on, among
 * nsites: the runtime's trt_site (row-major over the partitioning dims'
 * frontiers, modulo nsites); -1 for any other placement. */
int place_site(const Place *p, const RelType *t, const int64_t *key, int nsites);

/* What a statement's plan chose, for --explain. */
typedef enum { STRAT_NONE, STRAT_LOCAL, STRAT_BROADCAST, STRAT_COPARTITION, STRAT_REPLICATE, STRAT_OTHER,
               STRAT_TWOPHASE, STRAT_LOOKUP } Strategy;
const char *strategy_name(Strategy s);

/* What the plan search minimises first (trac --objective): predicted
 * seconds, ties broken by floats moved (the default); or floats moved
 * between ranks, the TRA paper's metric, among plans whose busiest rank
 * does about the same flops (opt.h, cost_cmp), ties broken by seconds. */
typedef enum { OBJ_SECONDS, OBJ_FLOATS, NOBJECTIVES } Objective;
#define OBJ_WORK_TIE_PCT 30     /* OBJ_FLOATS: busiest ranks' flops this close (%) tie */
#define PLAN_TIE_PCT 10         /* whole plans this close (%) in predicted time: bytes sent decide */
const char *objective_name(Objective o);       /* "seconds", "floats" */
const char *objective_order(Objective o);      /* the order in words, for --explain */
bool objective_parse(const char *s, Objective *o);     /* by name; false if none */

/*
 * A two-phase schedule (optimizer/twophase.c): the per-group plan of one
 * contraction, after Jankov et al., "Two-phase execution of aggregated join
 * trees".  Join groups are the tuples of the join's key space, numbered
 * row-major over its frontiers; each runs, whole, on one rank.  Aggregation
 * groups are the output's tuples; each ends on the rank the output's
 * placement (PL_PART) gives it.  The lineage follows from the blocking, so
 * the schedule is made at compile time; immutable once made.
 */
typedef struct TpSched {
	int nranks;                     /* the rank count it was planned for */
	int64_t njoin, nagg;
	const int *site;                /* per join group: its rank */
	const char *variant;            /* the greedy plan kept: "greedy", "rule 1 only", "rule 2 only" */
	double variant_seconds[3];      /* predicted T of each of the three */
	int64_t by_rule[2];             /* in the greedy plan: aggregation groups placed by rule 1, rule 2 */
	/* the prediction: the four stages of Eq. 6 (most loaded rank each) */
	double t_in, t_kernel, t_partial, t_combine;
	double seconds, bytes, floats, flops;
	double mem;                     /* most bytes a rank holds for it beyond its inputs */
	int64_t in_msgs, part_msgs;     /* chunks sent: inputs, partial sums */
} TpSched;

typedef struct IaOp {
	IaOpKind kind;
	int stmt;
	int tra;                        /* the TRA op it implements, or -1 */
	RelType type;
	Place place;
	/* costs, filled by opt_cost */
	double floats_moved;            /* the paper's metric: bcast f*s, shuffle f */
	double bytes_sent;              /* exact bytes that leave their site */
	double flops;
	double seconds;                 /* predicted */
	double live_bytes;              /* per rank, held while this op runs */
	double floor_seconds;           /* the machine's least time for it (cost.c, op_floor) */
	double spill_written;           /* out of core (mem_budget): bytes a rank writes to its */
	double spill_read;              /* spill file, and reads back, in one run of it (spill.c) */
	union {
		struct { int tensor; } read;
		struct { int in; } bcast;
		struct { int in; } shuffle;     /* target: place */
		/* IA_JOIN, and IA_TWOPHASE: a contraction run by a two-phase
		 * schedule, a join fused with its aggregation (ngroup >= 0, the
		 * kernel's red the aggregation) whose result is placed by `place` */
		struct {
			int left, right;
			JoinSpec on;
			int ngroup;                 /* -1: plain join; else fused local aggregation */
			int group[MAXDIM];          /* an IA_CONV's entry -1: a dim of one chunk, key 0 */
			Kernel *kernel;
			const TpSched *sched;       /* IA_TWOPHASE: its schedule; NULL for a join */
			JoinMask mask;              /* a sampled join (IA_JOIN only): its third input */
		} join;
		struct { int in; int ngroup; int group[MAXDIM]; AggKind agg; } agg;
		/* kernel NULL: a rekey, output dim i = input dim keymap[i]; an
		 * entry -1 inserts a dim and duplicates every tuple along it, one
		 * copy per key value below its frontier (the paper's insertDim and
		 * duplicate, a map of arity > 1: replication-based matmul) */
		struct { int in; int nkey; int keymap[MAXDIM]; Kernel *kernel; } map;
		struct { int in; KeyPred pred; } filter;
		struct { int in; int tensor; } write;
		struct { int tensor; } init;            /* INIT, LOAD */
		struct { int in; int tensor; } store;   /* STORE, PRINT */
		struct { int64_t count; int ist; } loop;   /* ist: 0, or IST loop ist - 1 */
		struct { int src, index, dim, tensor, itensor, base; double scale; } gather;   /* GATHER, LOOKUP, SCATTER: as TRA's */
		struct { int depth; } counter;
		struct { int in, off; int dim; int64_t shift, stride; bool scatter; } slice;
		struct { int in; } halo;        /* the rows it adds are its type's hlo, hhi */
	} u;
} IaOp;

/* What decides between two whole plans, in the order they are compared
 * (optimizer/tune.c, plan_cmp): why another strategy lost. */
typedef enum {
	ALT_NO_PLAN,            /* no plan of the strategy applies to the statement */
	ALT_MEMORY,             /* peak memory, against --mem-per-rank */
	ALT_LEAD,               /* --objective floats: the busiest rank's flops, then floats moved */
	ALT_TIME,               /* predicted time, more than PLAN_TIE_PCT apart */
	ALT_BYTES,              /* within PLAN_TIE_PCT on time: bytes sent */
	ALT_TIME_CLOSE,         /* within it, the same bytes sent: predicted time */
	ALT_FLOATS,             /* the same time and bytes sent: floats moved */
	ALT_EQUAL,              /* nothing: the plan found first is kept */
} AltWhy;

/* Another strategy for one statement, as the search costed it (the whole
 * program's plan with that strategy there), for --explain=all: its whole
 * plan's costs, compared with the chosen plan's totals. */
typedef struct IaAlt {
	int stmt;
	Strategy strategy;
	AltWhy why;                     /* what decided against it */
	double seconds, floats, bytes, peak_bytes;
	double work_ratio;              /* ALT_LEAD: its busiest rank's flops over the chosen
	                                 * plan's, 0 when they tie */
	const char *rules;              /* its statement's rule chain in that plan, or NULL */
} IaAlt;

typedef struct IaPlan {
	Arena *arena;
	const TraProg *tra;             /* tensors and statements */
	int nranks;                     /* the site count it was planned for */
	Vec(IaOp) ops;
	Vec(Strategy) strategy;         /* per statement */
	Vec(const char *) rules;        /* per statement: the equivalence rules that derive its
	                                 * implementation from Table 1 ("F-1, BMM"), "" for
	                                 * Table 1's own; NULL where no search chose it */
	Vec(Place) varplace;            /* per tensor: a param's placement */
	double total_floats_moved;
	double total_bytes_sent;
	double total_flops;
	double busiest_flops;           /* flops the busiest rank does (each op's by its
	                                 * placement's share); set by opt_plan */
	double peak_bytes;              /* per rank */
	int peak_op;                    /* the op at that peak */
	double predicted_seconds;
	/* from the search, for --explain (zero or empty at -O0) */
	Vec(IaAlt) alts;
	const char *machine;            /* the machine model's source */
	Objective objective;            /* what the search minimised */
	double leanest_peak;            /* the smallest peak of the plans tried */
	/* out of core: the resident bytes a rank may hold, the rest in its
	 * spill file (0: in memory); set before opt_cost, which prices the
	 * spill file's writes and reads (optimizer/spill.c) */
	double mem_budget;
	double spill_written, spill_read;       /* per rank, the loops' runs counted */
	double resident_peak;           /* per rank, the most held in memory at once */
} IaPlan;

IaPlan *ia_new(const TraProg *tra, int nranks);
void ia_free(IaPlan *p);
int ia_push(IaPlan *p, IaOp op);
int ia_inputs(const IaOp *op, int *in);                   /* fills in[MAXIN], returns count */
Kernel *ia_op_kernel(const IaOp *op);                     /* its block kernel, or NULL */
IaOp ia_op_remap(const IaOp *op, const int *map, Arena *a);     /* inputs renumbered by map, kernels cloned into a */
IaPlan *ia_plan_like(const IaPlan *old);       /* empty, with old's program, ranks, strategies and params' placements */
IaPlan *ia_clone(const IaPlan *p);             /* a copy (new arena, kernels cloned), costs and all */

/* The repeat blocks of a plan and how long each result lives, shared by
 * the cost model (peak memory) and codegen (where trt_free goes), so the
 * predicted peak and the program's own agree. */
typedef struct IaLoops {
	int *loopof;                    /* per op: the innermost LOOP around it, -1 outside all */
	int *parent;                    /* per LOOP: the LOOP around it, or -1 */
	int *endof;                     /* per LOOP: its ENDLOOP */
	int *dead_after;                /* per op: the op after which its result is not read
	                                 * again: its last reader, or the ENDLOOP of the outermost
	                                 * loop around that reader but not around the op; the op
	                                 * itself when nothing reads it */
	double *times;                  /* per op: how many times it runs, the product of the
	                                 * counts of the loops around it (a LOOP's own count
	                                 * included, its ENDLOOP's not) */
} IaLoops;
void ia_loops(const IaPlan *p, IaLoops *l);
int *ia_stmt_last_ops(const IaPlan *p);                    /* per statement: its last op, or -1 (malloc'd) */
void ia_loops_free(IaLoops *l);
/* Whether loop outer is loop inner or one around it, parent[] giving each
 * loop the one around it (-1: none); loop -1, outside every loop, is
 * around all.  (A value made in outer is visible in inner.) */
bool loop_within(const int *parent, int inner, int outer);
/* Where a scatter adds into its base in place rather than into a copy of
 * it (the base dies there), shared by the cost model and codegen: per op,
 * IP_OWNED, a scatter that takes over its base (the runtime still copies
 * any chunk another relation shares); IP_PARAM, one in place on a param's
 * own storage (the base a load, or a scatter IP_PARAM: the chain ends in
 * the store of that param, the first op after the load that loads or
 * stores it, and no other load of it is alive meanwhile), whose result is
 * borrowed like a load's; IP_KEPT, that store, which has nothing to do. */
typedef enum { IP_NONE, IP_OWNED, IP_PARAM, IP_KEPT } InPlace;
InPlace *ia_in_place(const IaPlan *p, const IaLoops *l);   /* per op; the caller frees it */
/* An elementwise join (no aggregation) or kernel map i whose result may
 * be made in the chunks of an input that dies at it: the input (0 left, 1
 * right), else -1.  That input is neither a load, an init nor a scatter
 * (their relations may be a param's own), nor both inputs, and has the
 * result's chunks laid out alike: dense, with no holes (completed, its
 * chunks are shared), or, for a sparse result (a join sampled at a mask
 * too), sparse with the result's pattern (ia_same_pattern); its key dims
 * are the result's.  The runtime still makes new chunks where an input's
 * are shared (and the cost model counts them), and under a memory budget
 * none is in place. */
int ia_elementwise_in_place(const IaPlan *p, const IaLoops *l, int i);
/* Does sparse op a store its chunks with the pattern of op m's (the same
 * keys' chunks, the same positions)?  m itself, or an op that keeps the
 * pattern of one that does: a join sampled at m, a join or map keeping an
 * input's pattern. */
bool ia_same_pattern(const IaPlan *p, int a, int m);
int ia_join_out_dim(int nleft, const JoinSpec *on, int rdim);
RelType ia_join_type(const RelType *l, const RelType *r, const JoinSpec *on);
/* A convolution's window w (kernel k, left input l, output out): whether
 * its own label is the left's (a kernel's gradient: the window dim stands
 * for the lab, so a chunk must hold the whole dim), and the rows a chunk
 * of the output reads before (lo) and after (hi) its own block. */
bool ia_conv_own_left(const Kernel *k, int w);
int ia_conv_own_dim(const Kernel *k, const RelType *l, int w);    /* the left's key dim of own, or -1 */
void ia_conv_reach(const Kernel *k, const RelType *l, const RelType *out, int w, int64_t *lo, int64_t *hi);
/* Where a local join computes given its inputs' placements (neither of
 * partials); false when matching tuples would not meet. */
bool ia_join_place(int nleft, const JoinSpec *on, const Place *l, const Place *r, Place *out);
/* Where a sampled join's mask must be for the join (type jt) computing in
 * jp; false when no placement of the mask meets it. */
bool ia_mask_place(const JoinMask *m, const RelType *jt, const Place *jp, Place *want);
/* The placement a group-by of relation type t placed by `in` leaves (partials
 * when a partitioning dim is grouped away). */
Place ia_agg_place(const RelType *t, const Place *in, int ngroup, const int *group);
bool ia_derive_place(const IaPlan *p, const IaOp *op, Place *out, Buf *why);
/* The classes of the plan's key dims that must sit on the same sites: the
 * dims a local op carries from an input to its result or matches between
 * its inputs, every dim a move (bcast, shuffle, halo) keeps, the values of
 * one tensor (its reads; a param's init, loads and stores).  Fills base
 * (ops.n + 1 entries: op i's dims are slots base[i]..base[i+1]-1) and of
 * (base[ops.n] entries: each slot's class); returns the number of classes.
 * A run-time site map (trt_balance) places one class's blocks: codegen
 * names it in the types of that class's relations alone. */
int ia_dim_classes(const IaPlan *p, int *base, int *of);


/* ---- print.c: --explain and dumps ---- */

typedef enum { EXPLAIN_TEXT, EXPLAIN_JSON, EXPLAIN_DOT, EXPLAIN_ALL } ExplainFormat;   /* ALL: text + alternatives */
void ia_print(Buf *b, const IaPlan *p, bool costs);       /* indented tree per statement */
void ia_explain(Buf *b, const IaPlan *p, ExplainFormat f, bool costs);
void ia_op_print(Buf *b, const IaPlan *p, const IaOp *op); /* one op, as --explain shows it */
/* explain.c: the text (alts: and each statement's other strategies), JSON */
void ia_explain_text(Buf *b, const IaPlan *p, bool costs, bool alts);
void ia_explain_json(Buf *b, const IaPlan *p);

/* ---- verify.c ---- */

bool ia_verify(const IaPlan *p, Buf *err);

#endif
