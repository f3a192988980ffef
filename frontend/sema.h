/*
 * sema.h: what the checker's files share; included by them alone (the
 * frontend's interface is frontend.h).  Its declarations are grouped by the
 * file that defines them:
 *
 *   sema.c     fe_compile; the walk over items
 *   names.c    the symbol table: scopes, did-you-mean, live and expired names
 *   consts.c   the one evaluator of sizes and consts
 *   index.c    a statement's index vars: extents, ranges, affine positions
 *   expr.c     the right side: expressions, types, implicit sums
 *   group.c    products regrouped to fit the index limit
 *   decl.c     size, const, input, param, output
 *   stmt.c     assignments, print, repeat (and its IST clause), grad
 *   defs.c     def declarations and their inlining at each call
 *   imports.c  import: finding a file and checking its items in place
 */
#ifndef TRAC_SEMA_H
#define TRAC_SEMA_H

#include "frontend/frontend.h"

#define MAX_DEPTH 200           /* nesting in recursive walks, as the parser's */
#define MAX_STATEMENTS 10000    /* after inlining defs: compile time grows faster than linearly */
#define MAX_LOOP_DEPTH 32       /* repeat blocks inside one another */
#define MAX_ACCESS_VARS (4 * MAXDIM * MAXDIM)   /* index vars of one access, counted (fe_access_vars) */

typedef enum { SYM_SIZE, SYM_CONST, SYM_TENSOR, SYM_DEF, SYM_COUNTER } SymKind;

typedef struct Sym {
	SymKind kind;
	const char *name;
	Loc loc;
	int64_t size;           /* SYM_SIZE; SYM_COUNTER: its loop's count */
	double value;           /* SYM_CONST */
	int tensor;             /* SYM_TENSOR */
	Item *def;              /* SYM_DEF */
	bool defined;           /* SYM_TENSOR: has a value (inputs always) */
	bool used;
	bool poisoned;          /* its definition had an error: stay quiet about it */
	int loop_depth;         /* repeat blocks around its definition; SYM_COUNTER: its loop's depth */
	bool expired;           /* defined in a repeat block that has ended */
	Loc expired_loc;
} Sym;

/* An expression's element type: typed by the tensors it reads, or untyped
 * (constants only), in which case it adopts its context's.  Soft: typed
 * only by the conditions of wheres whose branches are numbers
 * (where(X[i] > 0, 7, 2) is X's type alone); a typed context of another
 * type gives it its own, the conditions converted (expr.c settle). */
typedef struct Ty {
	bool typed, soft;
	DType t;
} Ty;

/* An affine position of the statement being checked, in dim `dim` of
 * tensor `tensor`, `extent` long: its index vars, and the positions lo ..
 * hi its constant and loop counters add; `counter` the sym of its first
 * loop counter (-1: none). */
typedef struct AffUse {
	const IxAffine *f;
	int64_t lo, hi, extent;
	Loc loc;
	const char *tensor;
	int dim, counter;
	bool integer;           /* the tensor's elements are integers */
	const char *gathers;    /* in a gather's index: the tensor it gathers from */
} AffUse;

typedef struct Sema {
	FeOptions *opt;
	Arena *arena;
	TraProg *prog;
	Vec(Sym) syms;
	Vec(int) cur;                   /* per tensor: current value op, -1 if none */
	bool *define_used;
	/* the statement being checked */
	Vec(Var) vars;
	Vec(int) scope;                 /* reduction-bound vars, innermost last */
	Node *rhs;                      /* its right side: the names its accesses index are indices */
	Vec(AffUse) affuse;      /* its affine positions, for ranges ("valid") */
	int loop_depth;                 /* repeat blocks around the current item */
	int scope_base;                 /* syms from here on are the innermost def's */
	const char *prefix;             /* "linear." inside an inlined def, for tensor names */
	Vec(Item *) calls;              /* defs being inlined, outermost first */
	Vec(char *) imports;            /* files imported so far (real paths) */
	Vec(char *) importing;          /* the import chain being read (real paths) */
	Vec(char *) shown;              /* the same files, as the user named them */
	Vec(int) files;                 /* source file of the items being checked */
	int depth;
	int nerr_before;
	bool too_many;                  /* MAX_STATEMENTS was reported */
	bool stop;                      /* a bad -D value was reported: check nothing more */
	/* IST loops (repeat ... split ... every ...) */
	int nist;                       /* seen so far, in source order */
	int ist_depth;                  /* loop depth + 1 of the IST loop being checked, else 0 */
} Sema;

/* ---- sema.c ---- */

void fe_check_item(Sema *s, Item *it);
void fe_check_items(Sema *s, Item **items, int n);

/* ---- names.c ---- */

#define ANY_SYM (-1)            /* fe_did_you_mean: a name of any kind */

Sym *fe_lookup(Sema *s, const char *name);      /* innermost first; NULL when undeclared */
bool fe_declare(Sema *s, Sym sym);              /* in the innermost scope; false (reported) if taken there */
Sym *fe_use_sym(Sema *s, Node *n, const char *what);    /* n's sym, used; NULL after "unknown WHAT" */
const char *fe_sym_what(const Sym *sym, const TraProg *p);      /* "a size", "an input", ... */
/* "; did you mean 'x'?" for the nearest name of kind `kind` (a SymKind or
 * ANY_SYM) or among extra[0..nextra), or "" */
const char *fe_did_you_mean(Sema *s, const char *name, int kind, const char *const *extra, int nextra);
bool fe_sym_live(const Sym *sym, Loc use);      /* false: poisoned, or expired (reported) */
void fe_ist_scope(const Sema *s, int first_sym, Loc loc);       /* enter an IST body; s NULL: leave it */
const char *fe_local_name(Sema *s, const char *name);   /* a def's locals carry its name */

/* ---- consts.c ---- */

bool fe_eval_size(Sema *s, Node *n, int64_t *out);      /* false: reported */
bool fe_eval_const(Sema *s, Node *n, double *out);      /* false: reported */

/* ---- index.c ---- */

int fe_new_var(Sema *s, const char *name, Loc loc, bool reduced);
int fe_find_var(Sema *s, const char *name, Loc loc);    /* the var a name denotes here, made on first use */
int fe_value_var(Sema *s, const char *name, Loc loc);   /* an index used as a value, or -1 */
bool fe_bind_extent(Sema *s, int v, int64_t extent, Loc loc, const char *why);
bool fe_range_extent(Sema *s, Node *range, int64_t *extent);    /* `i in N`: N, positive */
const char *fe_range_why(Sema *s, Loc loc);     /* "the range 'i in N'" */
void fe_needs_range(Sema *s, int v, const char *where);
bool fe_check_affine_index(Sema *s, Node *n, int d, const Tensor *t);   /* position d of access n */
bool fe_check_position(Sema *s, Node *ix, const Tensor *t, int d);      /* W[e, i] = ...: e, in t's dim d */
int fe_access_vars(const Node *n, int *out);    /* an access's vars, each once */
bool fe_in_affine(const Sema *s, int v);
bool fe_infer_ranges(Sema *s);                  /* the vars only affine positions use */
bool fe_check_windows(Sema *s);                 /* a window a loop moves past its tensor's end */

/* ---- expr.c ---- */

int fe_children(Node *n, Node ***slot);         /* a node's child slots, at most 3 */
int fe_count_var(const Node *n, int v);         /* occurrences of var v in n */
bool fe_check_rhs(Sema *s, Item *it, const Tensor *param, const int *lhs, Ty *ty);

/* ---- group.c ---- */

bool fe_group_products(Sema *s, Node **root, int nlhs, const int *lhs);  /* false: reported */

/* ---- decl.c ---- */

void fe_check_size(Sema *s, Item *it);
void fe_check_const(Sema *s, Item *it);
void fe_check_input(Sema *s, Item *it);
void fe_check_param(Sema *s, Item *it);
void fe_check_output(Sema *s, Item *it);
void fe_check_outputs(Sema *s, Ast *ast);       /* after the last item */

/* ---- stmt.c ---- */

void fe_check_assign(Sema *s, Item *it);
void fe_check_print(Sema *s, Item *it);
void fe_check_repeat(Sema *s, Item *it);

/* ---- defs.c ---- */

void fe_check_def(Sema *s, Item *it);
void fe_inline_call(Sema *s, Item *it, Item *def);      /* it: NAME = def(args) */

/* ---- imports.c ---- */

void fe_check_import(Sema *s, Item *it);

#endif
