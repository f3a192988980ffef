/*
 * emit.h: what the files of codegen/'s C emitter share; included by them
 * alone (the layer's interface is codegen.h).
 *
 *   emit.c    cg_emit: the file's layout, definitions written once however
 *             many plans have them (share), each plan's and IST body's
 *             definitions and body
 *   tables.c  the const tables: tensors, ops, programs, relation types, key
 *             predicates, two-phase schedules, IST descriptors
 *   body.c    a plan's body, runN: each op's properties decided once
 *             (OpProps), then one emitter per IA op kind, and the frees,
 *             checkpoints and loops around them
 *   kernel.c  block kernels: the element expression, BLIS gemm, loop
 *             nests, and which of them (and of conv.c's, sparse.c's) a
 *             join or map gets, with a sparse kernel's wrapper
 *   conv.c    convolution kernels: direct loops and register tiles
 *   sparse.c  kernels driven by a sparse input's stored elements
 *
 * emit.c's top comment describes the emitted file.
 */
#ifndef TRAC_EMIT_H
#define TRAC_EMIT_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"

/* ---- emit.c: the file, and what it defines once ---- */

/* What the file defines once however many plans use it: a definition's
 * text names it with HOLE, which becomes its number among its kind's. */
#define HOLE "\001"
typedef enum { D_TYPE, D_KERNEL, D_PRED, D_SCHED, D_RUN, D_IST, ND } DefKind;

typedef struct Def {
	DefKind kind;
	char *text;
	uint64_t hash;
	int id;
	int next;               /* the next in its hash bucket, or -1 */
} Def;

enum { NBUCKET = 4096 };

typedef struct Emit {
	Buf *b;
	const IaPlan *p;
	int *tensor_index;      /* TRA tensor -> runtime table index (inputs), -1 */
	int *output_index;      /* TRA tensor -> runtime table index (outputs), -1 */
	int (*def)[ND];         /* per op of p: the number of its type, kernel, ... */
	int *in_place;          /* per op of p: the input whose chunks it is made in, or -1
	                         * (ia_elementwise_in_place) */
	Vec(Def) defs;          /* every definition emitted so far */
	int bucket[NBUCKET];    /* by hash: the last def there, or -1 */
	int ndef[ND];           /* definitions of each kind */
	/* IST loops: the bodies (CgOptions.ist), and while a plan is emitted
	 * each loop's body function and descriptor numbers */
	const CgOptions *o;
	int plan;               /* the plan being emitted */
	bool local;             /* emitting an IST body */
	int ist_loop;           /* which (the loop's number) */
	int *ist_run, *ist_desc;
	/* the plan's site maps (emit_site_maps): per op, per key dim, its map's
	 * id (0 none); per id, the plan's flops per stored element of the
	 * class's sparse inputs and per line (index value) of its dims */
	int *mapbase, *map;
	int nmap;
	double *map_elem, *map_line;
} Emit;

const char *ctype(DType t);                     /* "float", ... */
const char *cdtype(DType t);                    /* "TRT_F32", ... */
void c_string(Buf *b, const char *s);           /* a C string literal */
void place_literal(Buf *b, const Place *p);     /* (TrtPlace){...} */
void end_call_at(Buf *b, const Place *p);       /* a call's last argument, its result's placement, and ");" */
void int_list(Buf *b, int n, const int *v);     /* {1, 2, 3} */

/* ---- tables.c: the const tables ---- */

void emit_tensors(Emit *e);                     /* fills e->tensor_index, e->output_index */
void emit_ops(Emit *e, int k);                  /* opsK, for --profile */
void emit_programs(Emit *e, const IaPlan *const *plans, int nplans, const int *run, const CgOptions *o);
void emit_site_maps(Emit *e);                   /* e->mapbase, e->map, e->nmap, the costs, for e->p */
void emit_site_maps_free(Emit *e);
void emit_type(Emit *e, int i);                 /* op i's type, HOLE its number */
void emit_pred(Emit *e, const KeyPred *p);      /* a filter's key predicate, HOLE its number */
void emit_schedule(Emit *e, int i);             /* op i's two-phase schedule, HOLE its number */
bool ist_param(const IaPlan *p, int t);         /* in an IST body: does it train param t? */
/* IST loop `loop`'s descriptor, e->p its body (e->def, e->tensor_index the
 * body's), main_plan the program's plan; HOLE its number. */
void emit_ist_desc(Emit *e, int loop, const IaPlan *main_plan);

/* ---- body.c: a plan's body ---- */

/* How a body writes a loop op, and the endloop that closes it. */
typedef enum {
	LOOP_INNER,             /* for (it = 0; ...), between trt_loop_begin and trt_loop_end */
	LOOP_OUTER,             /* the same, outermost: from where --resume says, a checkpoint per iteration */
	LOOP_IST_RUN,           /* an IST loop in the program: one trt_ist call runs its body */
	LOOP_IST_BODY,          /* the IST loop in its own body: for (...; trt_ist_next(...); ) */
} LoopKind;

/* How an op reads an input with holes or stored sparse. */
typedef enum {
	READ_AS_IS,             /* as it is */
	READ_COMPLETE,          /* completed first (trt_complete): absent tuples, zero blocks made */
	READ_DENSE,             /* made dense first (trt_densify) */
} ReadKind;

/*
 * One op of a plan's body with everything decided about how it is written
 * (op_props, body.c): its inputs and how each is read, its sparsity, the
 * IST body's local mode, its loop, and the relations freed after it.  The
 * emitters (one per IA op kind, body.c) read these and test no mode or
 * type flag of their own.  Out-of-core execution adds its decisions here:
 * where each chunk an op reads or makes lives, what to fetch before it
 * and what to evict after it.
 */
typedef struct OpProps {
	int i;                          /* its number in the plan */
	const IaOp *op;
	int nin, in[MAXIN];             /* its inputs (ia_inputs) */
	ReadKind read[MAXIN];           /* how it reads input j */
	char arg[MAXIN][24];            /* the name it reads input j by: r<in>, or w<i>_<j> when made whole */
	bool insparse[MAXIN];           /* input j is sparse */
	bool sparse;                    /* its result is sparse */
	bool masked;                    /* a join sampled at a mask, its third input */
	int pattern;                    /* a sparse join's result: the input whose pattern it keeps, or -1 */
	InPlace inplace;                /* a scatter into its base, a store of one (ia_in_place) */
	bool own;                       /* LOAD: a reference of its own, freed as any relation: it
	                                 * outlives a store of its param (load_outlives_store) */
	bool span;                      /* trt_op_begin/end around it: not in an IST body */
	bool ist_given;                 /* in an IST body: an init, whose value trt_ist_next gives, or its store */
	LoopKind loop;                  /* LOOP, ENDLOOP: how the loop is written */
	int loop_op;                    /* ENDLOOP: the loop op it closes */
	int outer;                      /* an outermost loop: its number among them (resume, checkpoints) */
	char iter[48];                  /* COUNTER: the iteration it reads */
	Vec(int) frees;                 /* relations freed after it: it reads them last */
	Vec(int) frees_after;           /* ENDLOOP: freed past the loop's end: read last inside it */
} OpProps;

void emit_body(Emit *e);                        /* runN (HOLE), or an IST body's */

/* ---- kernel.c: block kernels ---- */

/* Writes the element expression's temporaries. */
typedef struct KGen {
	Buf *b;
	const Kernel *k;
	DType dt;
	int ntmp;
	const int64_t *stat;    /* a loop kernel's labels' static extents (kernel.c), or NULL */
} KGen;

void emit_kernel(Emit *e, int i, const Kernel *k);      /* op i's kernel (and wrapper), HOLE its number */
void num_literal(Buf *b, double v, DType dt);
int kexpr_emit(KGen *g, const KExpr *e, const char *indent);   /* returns the temporary holding e */
void emit_strides(Buf *b, const char *name, const char *view, int rank, const int *lab, const int64_t *stat);
void label_extent(Buf *b, const Kernel *k, int l);
void offset_expr(Buf *b, const char *sname, int n, const int *lab);
void combine_expr(Buf *b, AggKind agg, const char *x, const char *y);

/* ---- conv.c: convolutions ---- */

void emit_conv_kernel(Buf *b, const Kernel *k, DType dt);

/* ---- sparse.c: kernels over sparse chunks ---- */

/*
 * How a kernel reads its inputs, decided once (kernel_reads) before its
 * text is written: their types, and with a sparse one, which input drives
 * the loop and how each other sparse input is read.
 */
typedef struct KernelIn {
	int n;                          /* the op's inputs: a sampled join's mask is the third */
	int nk;                         /* the kernel's own */
	DType dt;                       /* the output's, which the kernel computes in */
	DType indt[2];
	const RelType *inty[2];
	bool sampled;                   /* a join sampled at its mask: the mask drives */
	bool sparse;                    /* a sparse input, or sampled: a body and a wrapper */
	bool sparse_out;                /* the result keeps the driver's pattern */
	int d;                          /* the driver: an input, nk for the mask, or -1 */
	int nd;                         /* the driver's chunk dims, labelled dlab */
	const int *dlab;
	bool byq[2];                    /* sparse with the driver's pattern: its value at q */
	bool byfind[2];                 /* sparse, 2-d, labelled as the driver: trt_csr_find */
	bool expand[2];                 /* sparse, expanded to a dense chunk by the wrapper */
	int vlab;                       /* a label this version of the kernel has at vlen, or -1 */
	int64_t vlen;
} KernelIn;

/* Each label's extent (stat[l]) where every chunk has the same and it is at
 * most max, else -1 (ki->vlab's is ki->vlen); a loop's extent with it as a
 * number (kernel.c). */
void static_extents(const Kernel *k, const KernelIn *ki, int64_t max, int64_t *stat);
void loop_extent(Buf *b, const Kernel *k, const int64_t *stat, int l);

void kernel_reads(const IaPlan *p, int i, const Kernel *k, KernelIn *ki);
void emit_driven_kernel(Buf *b, const Kernel *k, const KernelIn *ki, int alias);

/* The longest extent a driven kernel (sparse.c) writes as a number where
 * every chunk has it (static_extents): an SpMM's feature loop of 40
 * floats, a row of B, then 2 vectors and a half with no loop around them,
 * is 22% faster a stored element (15.5 -> 12.1 ns, gcn_sparse's A by a
 * 40-wide H, one rank's blocks, 2026-11-29); of 128, 8%. */
#define DRIVEN_STATIC_MAX 128

#endif
