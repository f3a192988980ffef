/*
 * frontend.h: the one header of the frontend/ layer.
 *
 * The frontend turns .tra text into a TRA program:
 *
 *   lexer.l, parser.y   text -> AST (reentrant flex + bison, byte-offset locations)
 *   ast.c               the AST's nodes and its printer
 *   sema.c              the checker, which annotates the AST; its files share sema.h:
 *     names.c             the symbol table: scopes, did-you-mean, expired names
 *     consts.c            the one evaluator of sizes and consts
 *     index.c             index vars, extents, ranges, affine positions
 *     expr.c              expressions, element types, implicit sums
 *     group.c             products regrouped to fit the index limit
 *     decl.c              size, const, input, param, output
 *     stmt.c              assign, print, repeat (and IST), grad
 *     defs.c, imports.c   defs inlined at each call; import
 *   lower.c             annotated AST -> TRA (ir/)
 *   paths.c             where the stdlib and machine model are; -M dependencies
 *
 * The driver (main.c, cmdline.c, pipeline.c) sits above every layer and has
 * its own header, driver.h.
 *
 * The AST is allocated in one arena that dies with the frontend.
 */
#ifndef TRAC_FRONTEND_H
#define TRAC_FRONTEND_H

#include "ir/ir.h"

/* ---- ast.c: the syntax tree ---- */

typedef enum {
	N_NUM,          /* 1.5 */
	N_STR,          /* "w0.npy" (param initialisers only) */
	N_NAME,         /* x: a size, const or rank-0 tensor; inside [] an index */
	N_ACCESS,       /* A[i, k] */
	N_UNARY,        /* -e */
	N_BINARY,       /* e op e */
	N_CALL,         /* f(e, ...): functions, defs, initialisers, f32/f64 */
	N_WHERE,        /* where(c, a, b) */
	N_REDUCE,       /* sum[i, j](e); also inserted by sema for implicit sums */
	N_GRAD,         /* grad(loss, W) */
	N_INDEX,        /* sema: an index name where a value is expected, its position (i64) */
	N_COUNTER,      /* sema: a loop counter (repeat b in N), an i64 scalar */
} NodeKind;

typedef enum {
	B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_LT, B_LE, B_GT, B_GE, B_EQ, B_NE,
} BinOp;

typedef enum { R_SUM, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN, R_MEAN } RedKind;

typedef struct Node Node;

/* sema: an affine index position, X[b*B + n], X[2*y + dy]: the index vars
 * var[i] times vcoef[i] plus shift plus the loop counters' multiples (the
 * counter of the repeat block at depth[i], times coef[i]); `expr` is the
 * position as written.  var[0] names the position in the access's idx. */
typedef struct IxAffine {
	Node *expr;
	int nvar;
	int var[MAXDIM];
	int64_t vcoef[MAXDIM];
	int64_t shift;
	int ncounter;
	int depth[MAXDIM];
	int64_t coef[MAXDIM];
} IxAffine;

/* An index variable of one statement: a name, its extent, where it was bound. */
typedef struct Var {
	const char *name;
	Loc loc;                /* first use */
	int64_t extent;         /* -1 until known */
	Loc extloc;             /* the use that fixed the extent */
	const char *extwhy;     /* "dimension 2 of B", for messages */
	bool reduced;           /* bound by a reduction (explicit or implicit) */
	bool value;             /* used as a value somewhere (N_INDEX) */
	bool single;            /* an affine position without index names (X[b, d]): extent 1, summed away */
} Var;

struct Node {
	NodeKind kind;
	Loc loc;
	DType dtype;            /* sema: element type of the value */
	int height;             /* parser: levels of nodes below, at most MAX_DEPTH */
	int nvar;               /* sema: the free index vars of the value, in order (any number) */
	int *var;
	union {
		double num;
		const char *str;
		/* sema: sym or var; range: `i in N` in an index list, else NULL */
		struct { const char *name; int sym; int var; Node *range; } name;
		/* gather: sema: 1 + the position that holds an access of an
		 * integer tensor (E[idx[b], d]), 0 for none */
		struct {
			const char *name;
			Loc nameloc;
			Node **idx;             /* sema: an affine position becomes its var's name */
			int nidx;
			int tensor;
			int gather;
			IxAffine **aff;         /* sema: per position, its affine form or NULL; NULL when none */
		} access;
		struct { Node *a; } unary;
		struct { BinOp op; Node *a, *b; } binary;
		struct {
			const char *name;
			Loc nameloc;
			Node **args;
			int nargs;
			KOp fn;                 /* sema: the function */
			int conv;               /* sema: f32()/f64() converts to this DType, else -1 */
		} call;
		struct { Node *cond, *a, *b; bool soft; int st; } where; /* soft: typed by cond alone, st (sema) */
		struct {
			RedKind red;
			const char **names;
			Loc *nameloc;
			Node **range;           /* per name: `i in N`'s N, or NULL; NULL when none has one */
			int nnames;
			int var[MAXDIM];        /* sema: the vars it binds */
			Node *body;
			bool implicit;          /* inserted by Einstein's rule */
		} reduce;
		struct { const char *loss, *wrt; Loc lossloc, wrtloc; } grad;
	} u;
};

typedef enum {
	I_SIZE, I_INPUT, I_PARAM, I_CONST, I_OUTPUT, I_IMPORT, I_DEF,
	I_ASSIGN, I_PRINT, I_REPEAT,
} ItemKind;

typedef enum { A_SET, A_ADD, A_SUB, A_MUL, A_DIV } AssignOp;

typedef struct Item Item;

/* A def's parameter or result: a name and its index names. */
typedef struct Formal {
	const char *name;
	Loc loc;
	const char **idx;
	Loc *idxloc;
	int nidx;
} Formal;

struct Item {
	ItemKind kind;
	Loc loc;                /* the whole item */
	const char *name;       /* the declared or assigned name */
	Loc nameloc;
	union {
		struct { Node *value; } size;
		struct {
			Node **dims;
			int ndims;
			bool has_dims;
			DType dtype;
			bool has_type;
			Loc typeloc;
			bool sparse;            /* ": sparse": absent elements are zero */
			Loc sparseloc;
			const char *path;       /* input default file */
			Node *init;             /* param initialiser */
		} decl;
		struct { Node *value; } cnst;
		struct { const char *path; } output;
		struct { const char *path; Loc pathloc; } import;
		struct { Formal *params; int nparams; Formal result; Item **body; int nbody; } def;
		struct { Node **idx; int nidx; bool has_idx; AssignOp op; Node *value; } assign;
		struct { Node *value; } print;
		struct {
			Node *count;
			const char *counter;    /* `repeat b in N`: b, else NULL */
			Loc counterloc;
			Item **body;
			int nbody;
			/* `split H1, H2 every J`: an IST loop (nsplit > 0) */
			const char **split;
			Loc *splitloc;
			int nsplit;
			Node *every;
			Loc istloc;             /* the clause */
		} repeat;
	} u;
};

typedef struct Ast {
	Arena *arena;
	int file;
	Item **items;
	int nitems;
} Ast;

Node *fe_ast_node(Arena *a, NodeKind kind, Loc loc);
Item *fe_ast_item(Arena *a, ItemKind kind, Loc loc);
const char *fe_binop_name(BinOp op);
const char *fe_red_name(RedKind r);
void fe_ast_print(Buf *b, const Ast *ast);     /* for tests and --dump-after=parse */
void fe_formal_print(Buf *b, const Formal *f);   /* "W[d, h]": a def's parameter or result */

/* ---- names.c (sema's symbol table) ---- */

int fe_edit_distance(const char *a, const char *b);    /* for did-you-mean; 99 past 64 characters */

/* ---- parse.c (parser.y): text -> AST ---- */

/* Parse source file `file` (from src_add).  Syntax errors are reported
 * through diag(); the returned AST holds what could be recovered. */
Ast *fe_parse(Arena *arena, int file);

/* Read a file into the source table: its index, or -1 with *err set. */
int fe_load(const char *path, const char **err);

/* ---- sema.c (and the files of sema.h) and lower.c: AST -> TRA ---- */

typedef struct Define {
	const char *name;
	const char *value;
} Define;

typedef struct FeOptions {
	Define *defines;        /* -D NAME=VALUE */
	int ndefines;
	const char **incdirs;   /* -I DIR, then the stdlib */
	int nincdirs;
	bool warnings;
	const char **deps;      /* sema fills: every file read (for -M) */
	int ndeps;
} FeOptions;

/* ---- paths.c ---- */

const char *fe_stdlib_dir(void);                        /* the installed or in-tree stdlib */
const char *fe_machine_file(void);                      /* the installed machine model, or NULL */
const char *fe_calibrate_helper(void);                  /* trac-calibrate (the quick calibration), or NULL */
void fe_add_dep(FeOptions *o, const char *path);        /* record a file read (for -M) */
char *fe_make_quote(const char *s);                     /* for make, as gcc -MQ: $ -> $$, ' ' -> '\ ' */

/* The rule "targets: deps" for -M, wrapped as gcc wraps it; `phony` (-MP)
 * adds an empty rule for each dep but the main file; `no_stdlib` (-MM)
 * leaves out the files under fe_stdlib_dir().  Targets go in as given. */
void fe_deps_rule(Buf *b, const char *const *targets, int ntargets, const FeOptions *o, bool phony,
                  bool no_stdlib);

/* Check the program and lower it to TRA.  NULL when there were errors
 * (reported through diag()). */
TraProg *fe_compile(Ast *ast, FeOptions *opt);

/* ---- lower.c: one checked statement -> TRA (called by sema) ---- */

/* What sema hands lower for one assignment: the annotated expression, the
 * statement's index vars and the target's index list. */
typedef struct Lowering {
	TraProg *prog;
	int *cur;               /* per tensor: the TRA op holding its current value, or -1 */
	int stmt;               /* statement index in prog */
	const Var *vars;
	int nvars;
	DType dtype;
} Lowering;

/* Lower `value` into ops computing a relation keyed by lhs[0..nlhs) in that
 * order (chunks in the same order); returns the op. */
int fe_lower_assign(Lowering *l, Node *value, int nlhs, const int *lhs);
int fe_lower_input(TraProg *prog, int tensor);
void fe_lower_param_init(TraProg *prog, int tensor);           /* init + store, at the top */
void fe_lower_store(Lowering *l, int op, int tensor);          /* a param's new value */
void fe_lower_print(Lowering *l, int tensor);
void fe_lower_loop(TraProg *prog, int64_t count, Loc loc);
void fe_lower_endloop(TraProg *prog);
void fe_lower_output(TraProg *prog, int *cur, int tensor);     /* at the end */
int fe_lower_value(TraProg *prog, int *cur, int tensor);       /* the op holding a tensor's value */
int fe_lower_grad(Lowering *l, int loss, int wrt);             /* a grad op */

#endif
