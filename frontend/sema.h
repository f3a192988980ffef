/*
 * sema.h: what the checker's files share; included by them alone (the
 * frontend's interface is frontend.h).
 *
 *   sema.c     the walk over items, names, expressions, assignments
 *   defs.c     def declarations and their inlining at each call
 *   imports.c  import: finding a file and checking its items in place
 */
#ifndef TRAC_SEMA_H
#define TRAC_SEMA_H

#include "frontend/frontend.h"

#define MAX_DEPTH 200           /* nesting in recursive walks, as the parser's */
#define MAX_STATEMENTS 10000    /* after inlining defs: compile time grows faster than linearly */
#define MAX_LOOP_DEPTH 32       /* repeat blocks inside one another */

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
 * (constants only), in which case it adopts its context's. */
typedef struct Ty {
	bool typed;
	DType t;
} Ty;

/* An affine position of the statement being checked, in a dim of
 * `extent`: its index vars, and the positions lo .. hi its constant and
 * loop counters add. */
typedef struct AffUse {
	const IxAffine *f;
	int64_t lo, hi, extent;
	Loc loc;
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
	/* IST loops (repeat ... split ... every ...) */
	int nist;                       /* seen so far, in source order */
	int ist_depth;                  /* loop depth + 1 of the IST loop being checked, else 0 */
	bool ist_skip;                  /* compiling an IST body apart: outside it, statements are skipped */
} Sema;

/* sema.c */
Sym *fe_lookup(Sema *s, const char *name);
bool fe_declare(Sema *s, Sym sym);                 /* in the innermost scope; false (reported) if taken there */
bool fe_sym_live(const Sym *sym, Loc use);        /* false: poisoned, or expired (reported) */
const char *fe_local_name(Sema *s, const char *name);      /* a def's locals carry its name */
void fe_check_item(Sema *s, Item *it);
void fe_check_items(Sema *s, Item **items, int n);

/* defs.c */
void fe_check_def(Sema *s, Item *it);
void fe_inline_call(Sema *s, Item *it, Item *def);         /* it: NAME = def(args) */

/* imports.c */
void fe_check_import(Sema *s, Item *it);

#endif
