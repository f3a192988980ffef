/*
 * parser.y: the .tra grammar (LANGUAGE.md), a pure bison parser with
 * locations.  Actions only build the AST; every check that needs names or
 * extents is sema's.  Syntax errors are reported in the user's words
 * ("expected ';' before 'B'"), never with bison's token names, and the parser
 * recovers at the next ';' or '}' so one run reports several errors.
 */
%require "3.6"
%define api.pure full
%define api.prefix {fe_yy}
%define api.location.type {Loc}
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {yyscan_t scanner}
%parse-param {struct Parse *ps}

%code requires {
#include "ir/ir.h"
#include "frontend/frontend.h"

typedef void *yyscan_t;

struct Parse {
	Arena *arena;
	int file;
	Vec(Item *) items;
	int depth;              /* expression nesting, limited */
	bool too_deep;          /* the nesting error was reported */
};

/* Lists built by the grammar: growable arrays in the heap, copied into the
 * arena when complete. */
typedef struct NodeList { Node **v; int n, cap; } NodeList;
typedef struct ItemList { Item **v; int n, cap; } ItemList;
typedef struct NameList { const char **v; Loc *loc; Node **range; int n, cap; } NameList;
typedef struct FormalList { Formal *v; int n, cap; } FormalList;
typedef struct Number { double value; bool integer, overflow; } Number;
}

%code provides {
/* bison names its types after the prefix (api.prefix fe_yy); flex's bridge,
 * in the scanner and its header, still says YYSTYPE and YYLTYPE */
#ifndef YYSTYPE
#define YYSTYPE FE_YYSTYPE
#define YYLTYPE FE_YYLTYPE
#endif
int fe_yylex(FE_YYSTYPE *lval, Loc *lloc, yyscan_t scanner);
}

%code {
#include <stdlib.h>
#include <string.h>

#define YYLLOC_DEFAULT(Cur, Rhs, N) do { \
		if (N) { \
			(Cur) = loc_span(YYRHSLOC(Rhs, 1), YYRHSLOC(Rhs, N)); \
		} else { \
			(Cur).file = YYRHSLOC(Rhs, 0).file; \
			(Cur).off = YYRHSLOC(Rhs, 0).off + YYRHSLOC(Rhs, 0).len; \
			(Cur).len = 0; \
		} \
	} while (0)

#define MAX_DEPTH 200           /* nested parentheses, calls and reductions */

static void yyerror(Loc *loc, yyscan_t scanner, struct Parse *ps, const char *msg)
{
	/* bison's stack is YYMAXDEPTH deep; past it, parsing stops */
	if (!strcmp(msg, "memory exhausted")) {
		if (ps->too_deep)
			return;         /* said already */
		msg = "program nested too deeply for the parser (parentheses, operators or blocks)";
	}
	diag(DIAG_ERROR, *loc, "%s", msg);
}

/* Every pass walks expressions recursively (Lua's enterlevel, STYLE.md), so
 * the parser keeps expression trees at most MAX_DEPTH nodes high: a node
 * over the limit is reported once and becomes a leaf, and no later pass
 * ever sees a deeper tree. */
static Node *grown(struct Parse *ps, Node *n, int nkids, Node **kids)
{
	int h = 0;
	for (int i = 0; i < nkids; i++)
		if (kids[i] && kids[i]->height > h)
			h = kids[i]->height;
	n->height = h + 1;
	if (n->height <= MAX_DEPTH)
		return n;
	if (!ps->too_deep)
		diag(DIAG_ERROR, n->loc, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
	ps->too_deep = true;
	Node *leaf = fe_ast_node(ps->arena, N_NUM, n->loc);
	return leaf;
}

static Node **nodes_copy(struct Parse *ps, NodeList *l, int *n)
{
	Node **v = arena_alloc(ps->arena, (l->n + 1) * sizeof *v);
	if (l->n)       /* l->v is NULL for an empty list (error recovery) */
		memcpy(v, l->v, l->n * sizeof *v);
	*n = l->n;
	free(l->v);
	return v;
}

static Item **items_copy(struct Parse *ps, ItemList *l, int *n)
{
	Item **v = arena_alloc(ps->arena, (l->n + 1) * sizeof *v);
	if (l->n)
		memcpy(v, l->v, l->n * sizeof *v);
	*n = l->n;
	free(l->v);
	return v;
}

/* The names and their locations; *range (when asked for) each name's
 * range, `i in N`, or NULL. */
static const char **names_copy(struct Parse *ps, NameList *l, Loc **loc, Node ***range, int *n)
{
	const char **v = arena_alloc(ps->arena, (l->n + 1) * sizeof *v);
	*loc = arena_alloc(ps->arena, (l->n + 1) * sizeof **loc);
	if (range)
		*range = arena_alloc(ps->arena, (l->n + 1) * sizeof **range);
	if (l->n) {
		memcpy(v, l->v, l->n * sizeof *v);
		memcpy(*loc, l->loc, l->n * sizeof **loc);
		if (range)
			memcpy(*range, l->range, l->n * sizeof **range);
	}
	*n = l->n;
	free(l->v);
	free(l->loc);
	free(l->range);
	return v;
}

static void names_push(NameList *l, const char *name, Loc loc, Node *range)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 4;
		l->v = xrealloc(l->v, l->cap * sizeof *l->v);
		l->loc = xrealloc(l->loc, l->cap * sizeof *l->loc);
		l->range = xrealloc(l->range, l->cap * sizeof *l->range);
	}
	l->v[l->n] = name;
	l->range[l->n] = range;
	l->loc[l->n++] = loc;
}

/* i in N: an index name with its range, in an index list */
static Node *ranged(struct Parse *ps, const char *name, Node *range, Loc loc)
{
	Node *n = fe_ast_node(ps->arena, N_NAME, loc);
	n->u.name.name = name;
	n->u.name.range = range;
	return grown(ps, n, 1, &range);
}

static Node *binary(struct Parse *ps, BinOp op, Node *a, Node *b, Loc loc)
{
	Node *n = fe_ast_node(ps->arena, N_BINARY, loc);
	n->u.binary.op = op;
	n->u.binary.a = a;
	n->u.binary.b = b;
	return grown(ps, n, 2, (Node *[]){a, b});
}

static Node *number(struct Parse *ps, Number v, Loc loc)
{
	Node *n = fe_ast_node(ps->arena, N_NUM, loc);
	if (v.overflow)
		diag(DIAG_ERROR, loc, "integer does not fit in 64 bits");
	n->u.num = v.value;
	return n;
}

static Node *reduce(struct Parse *ps, RedKind r, NameList *names, Node *body, Loc loc)
{
	Node *n = fe_ast_node(ps->arena, N_REDUCE, loc);
	n->u.reduce.red = r;
	n->u.reduce.names = names_copy(ps, names, &n->u.reduce.nameloc, &n->u.reduce.range, &n->u.reduce.nnames);
	n->u.reduce.body = body;
	return grown(ps, n, 1, &body);
}

/* mean[i, j](e): reductions with a name rather than a keyword; the index
 * list was parsed as expressions and must be plain names (or ranges). */
static Node *named_reduce(struct Parse *ps, const char *name, Loc nameloc, NodeList *idx, Node *body, Loc loc)
{
	NameList names = {0};
	bool ok = true;
	for (int i = 0; i < idx->n; i++) {
		if (idx->v[i]->kind != N_NAME) {
			diag(DIAG_ERROR, idx->v[i]->loc, "a reduction's indices must be plain names such as 'i'");
			ok = false;
		} else {
			names_push(&names, idx->v[i]->u.name.name, idx->v[i]->loc, idx->v[i]->u.name.range);
		}
	}
	free(idx->v);
	if (strcmp(name, "mean")) {
		static const char *const reductions[] = {"sum", "max", "min", "argmax", "argmin", "mean"};
		const char *near = NULL;
		int best = 3;           /* at most two edits away, and nearer than the name is long */
		for (size_t k = 0; k < sizeof reductions / sizeof *reductions; k++) {
			int d = fe_edit_distance(name, reductions[k]);
			if (d < best && d < (int)strlen(name)) {
				best = d;
				near = reductions[k];
			}
		}
		if (near)
			diag(DIAG_ERROR, nameloc, "unknown reduction '%s'; did you mean '%s'? The reductions are sum, max, "
			     "min, argmax, argmin and mean", name, near);
		else
			diag(DIAG_ERROR, nameloc, "unknown reduction '%s'; the reductions are sum, max, min, argmax, "
			     "argmin and mean", name);
		ok = false;
	}
	Node *n = reduce(ps, R_MEAN, &names, body, loc);
	if (!ok)
		n->u.reduce.nnames = 0;
	return n;
}

static void enter(struct Parse *ps, Loc loc)
{
	if (++ps->depth == MAX_DEPTH && !ps->too_deep) {
		diag(DIAG_ERROR, loc, "expression nested too deeply (more than %d levels)", MAX_DEPTH);
		ps->too_deep = true;
	}
}

/* A declaration's ": f64 sparse" (any part may be absent). */
#define decl_type(it, ty) do { \
		if ((ty)->has) { (it)->u.decl.dtype = (ty)->t; (it)->u.decl.has_type = true; (it)->u.decl.typeloc = (ty)->loc; } \
		(it)->u.decl.sparse = (ty)->sparse; \
		(it)->u.decl.sparseloc = (ty)->sparseloc; \
	} while (0)

static Item *decl(struct Parse *ps, ItemKind kind, const char *name, Loc nameloc, NodeList *dims, bool has_dims, Loc loc)
{
	Item *it = fe_ast_item(ps->arena, kind, loc);
	it->name = name;
	it->nameloc = nameloc;
	it->u.decl.has_dims = has_dims;
	it->u.decl.dtype = DT_F32;
	if (has_dims)
		it->u.decl.dims = nodes_copy(ps, dims, &it->u.decl.ndims);
	return it;
}
}

%union {
	Number num;
	const char *str;
	Node *node;
	Item *item;
	NodeList nodes;
	ItemList items;
	NameList names;
	FormalList formals;
	Formal formal;
	struct { NodeList v; bool has; } dims;
	struct { DType t; bool has; Loc loc; bool sparse; Loc sparseloc; } type;
	AssignOp aop;
	RedKind red;
}

%token END 0 "end of file"
%token <str> IDENT "identifier"
%token <num> NUMBER "number"
%token <str> STRING "string"
%token SIZE "'size'" INPUT "'input'" PARAM "'param'" CONST "'const'" OUTPUT "'output'"
%token IMPORT "'import'" DEF "'def'" RETURN "'return'" REPEAT "'repeat'" PRINT "'print'"
%token GRAD "'grad'" WHERE "'where'" IN "'in'" SUM "'sum'" MAX "'max'" MIN "'min'"
%token ARGMAX "'argmax'" ARGMIN "'argmin'" F32 "'f32'" F64 "'f64'" I32 "'i32'" I64 "'i64'"
%token SPARSE "'sparse'"
%token ARROW "'->'" POW "'**'" LE "'<='" GE "'>='" EQ "'=='" NE "'!='"
%token PLUSEQ "'+='" MINUSEQ "'-='" TIMESEQ "'*='" DIVEQ "'/='"

%type <node> expr primary index
%type <item> item stmt size_def const_def
%type <items> items stmts size_list const_list
%type <nodes> args args_ne indices dimlist
%type <names> names rnames
%type <formals> formals formals_ne
%type <formal> formal
%type <dims> dims_opt
%type <type> type_opt dtype
%type <str> path_opt
%type <aop> assign_op
%type <red> red

%nonassoc '<' LE '>' GE EQ NE
%left '+' '-'
%left '*' '/'
%precedence UMINUS
%right POW

%%

program:
	  items                         { for (int i = 0; i < $1.n; i++) vec_push(&ps->items, $1.v[i]); free($1.v); }
	;

items:
	  %empty                        { $$ = (ItemList){0}; }
	| items item                    { $$ = $1; if ($2) vec_push(&$$, $2); }
	| items SIZE size_list ';'      { $$ = $1; for (int i = 0; i < $3.n; i++) vec_push(&$$, $3.v[i]); free($3.v); }
	| items CONST const_list ';'    { $$ = $1; for (int i = 0; i < $3.n; i++) vec_push(&$$, $3.v[i]); free($3.v); }
	;

/* const lr = 0.1, decay = 0.99; */
const_list:
	  const_def                     { $$ = (ItemList){0}; vec_push(&$$, $1); }
	| const_list ',' const_def      { $$ = $1; vec_push(&$$, $3); }
	;

const_def:
	  IDENT '=' expr                { $$ = fe_ast_item(ps->arena, I_CONST, @$); $$->name = $1; $$->nameloc = @1; $$->u.cnst.value = $3; }
	;

/* size N = 1000, D = 64; */
size_list:
	  size_def                      { $$ = (ItemList){0}; vec_push(&$$, $1); }
	| size_list ',' size_def        { $$ = $1; vec_push(&$$, $3); }
	;

size_def:
	  IDENT '=' expr                { $$ = fe_ast_item(ps->arena, I_SIZE, @$); $$->name = $1; $$->nameloc = @1; $$->u.size.value = $3; }
	;

item:
	  INPUT IDENT dims_opt type_opt path_opt ';'
	                                {
	                                  $$ = decl(ps, I_INPUT, $2, @2, &$3.v, $3.has, @$);
	                                  decl_type($$, &$4);
	                                  $$->u.decl.path = $5;
	                                }
	| PARAM IDENT dims_opt type_opt '=' expr ';'
	                                {
	                                  $$ = decl(ps, I_PARAM, $2, @2, &$3.v, $3.has, @$);
	                                  decl_type($$, &$4);
	                                  $$->u.decl.init = $6;
	                                }
	| PARAM IDENT dims_opt type_opt ';'
	                                { $$ = NULL; diag(DIAG_ERROR, @2, "param '%s' needs an initialiser: zeros, ones, uniform(a, b), normal(mean, std) or a file name", $2); }
	| OUTPUT IDENT path_opt ';'     { $$ = fe_ast_item(ps->arena, I_OUTPUT, @$); $$->name = $2; $$->nameloc = @2; $$->u.output.path = $3; }
	| IMPORT STRING ';'             { $$ = fe_ast_item(ps->arena, I_IMPORT, @$); $$->u.import.path = $2; $$->u.import.pathloc = @2; }
	| DEF IDENT '(' formals ')' ARROW formal '{' stmts '}'
	                                {
	                                  $$ = fe_ast_item(ps->arena, I_DEF, @$);
	                                  $$->name = $2; $$->nameloc = @2;
	                                  $$->u.def.params = arena_alloc(ps->arena, ($4.n + 1) * sizeof(Formal));
	                                  if ($4.n)
	                                          memcpy($$->u.def.params, $4.v, $4.n * sizeof(Formal));
	                                  $$->u.def.nparams = $4.n; free($4.v);
	                                  $$->u.def.result = $7;
	                                  $$->u.def.body = items_copy(ps, &$9, &$$->u.def.nbody);
	                                }
	| stmt                          { $$ = $1; }
	| error ';'                     { $$ = NULL; yyerrok; }
	| error '}'                     { $$ = NULL; yyerrok; }
	;

stmts:
	  %empty                        { $$ = (ItemList){0}; }
	| stmts stmt                    { $$ = $1; if ($2) vec_push(&$$, $2); }
	| stmts error ';'               { $$ = $1; yyerrok; }
	;

stmt:
	  IDENT assign_op expr ';'      {
	                                  $$ = fe_ast_item(ps->arena, I_ASSIGN, @$); $$->name = $1; $$->nameloc = @1;
	                                  $$->u.assign.op = $2; $$->u.assign.value = $3;
	                                }
	| IDENT '[' indices ']' assign_op expr ';'
	                                {
	                                  $$ = fe_ast_item(ps->arena, I_ASSIGN, @$); $$->name = $1; $$->nameloc = @1;
	                                  $$->u.assign.idx = nodes_copy(ps, &$3, &$$->u.assign.nidx);
	                                  $$->u.assign.has_idx = true;
	                                  $$->u.assign.op = $5; $$->u.assign.value = $6;
	                                }
	| PRINT expr ';'                { $$ = fe_ast_item(ps->arena, I_PRINT, @$); $$->u.print.value = $2; }
	| REPEAT expr '{' stmts '}'     {
	                                  $$ = fe_ast_item(ps->arena, I_REPEAT, @$); $$->u.repeat.count = $2;
	                                  $$->u.repeat.body = items_copy(ps, &$4, &$$->u.repeat.nbody);
	                                }
	| REPEAT IDENT IN expr '{' stmts '}'
	                                {
	                                  $$ = fe_ast_item(ps->arena, I_REPEAT, @$); $$->u.repeat.count = $4;
	                                  $$->u.repeat.counter = $2; $$->u.repeat.counterloc = @2;
	                                  $$->u.repeat.body = items_copy(ps, &$6, &$$->u.repeat.nbody);
	                                }
	| REPEAT IDENT IN expr IDENT names IDENT expr '{' stmts '}'
	                                {
	                                  /* split and every are words only here: `repeat b in NB split H1, H2 every J` */
	                                  $$ = fe_ast_item(ps->arena, I_REPEAT, @$); $$->u.repeat.count = $4;
	                                  $$->u.repeat.counter = $2; $$->u.repeat.counterloc = @2;
	                                  $$->u.repeat.body = items_copy(ps, &$10, &$$->u.repeat.nbody);
	                                  if (strcmp($5, "split") || strcmp($7, "every")) {
	                                          diag(DIAG_ERROR, strcmp($5, "split") ? @5 : @7,
	                                               "expected 'split SIZES every COUNT' after the repeat count, found '%s'",
	                                               strcmp($5, "split") ? $5 : $7);
	                                          free($6.v); free($6.loc); free($6.range);
	                                  } else {
	                                          $$->u.repeat.split = names_copy(ps, &$6, &$$->u.repeat.splitloc, NULL,
	                                                                          &$$->u.repeat.nsplit);
	                                          $$->u.repeat.every = $8;
	                                          $$->u.repeat.istloc = loc_span(@5, @8);
	                                  }
	                                }
	| RETURN expr ';'               { $$ = NULL; diag(DIAG_ERROR, @1, "'return' is not supported; a def names its result after '->' and assigns it in its body"); }
	;

assign_op:
	  '='                           { $$ = A_SET; }
	| PLUSEQ                        { $$ = A_ADD; }
	| MINUSEQ                       { $$ = A_SUB; }
	| TIMESEQ                       { $$ = A_MUL; }
	| DIVEQ                         { $$ = A_DIV; }
	;

dims_opt:
	  %empty                        { $$.v = (NodeList){0}; $$.has = false; }
	| '[' dimlist ']'               { $$.v = $2; $$.has = true; }
	;

dimlist:
	  expr                          { $$ = (NodeList){0}; vec_push(&$$, $1); }
	| dimlist ',' expr              { $$ = $1; vec_push(&$$, $3); }
	;

type_opt:
	  %empty                        { $$ = (typeof($$)){.has = false, .t = DT_F32, .loc = @$}; }
	| ':' dtype                     { $$ = $2; }
	| ':' SPARSE                    { $$ = (typeof($$)){.has = false, .t = DT_F32, .loc = @2, .sparse = true, .sparseloc = @2}; }
	| ':' dtype SPARSE              { $$ = $2; $$.sparse = true; $$.sparseloc = @3; }
	| ':' SPARSE dtype              { $$ = $3; $$.sparse = true; $$.sparseloc = @2;
	                                  diag(DIAG_ERROR, @2, "the element type comes before 'sparse': write ': %s sparse'",
	                                       dtype_name($3.t)); }
	;

dtype:
	  F32                           { $$ = (typeof($$)){.has = true, .t = DT_F32, .loc = @1}; }
	| F64                           { $$ = (typeof($$)){.has = true, .t = DT_F64, .loc = @1}; }
	| I32                           { $$ = (typeof($$)){.has = true, .t = DT_I32, .loc = @1}; }
	| I64                           { $$ = (typeof($$)){.has = true, .t = DT_I64, .loc = @1}; }
	;

path_opt:
	  %empty                        { $$ = NULL; }
	| '=' STRING                    { $$ = $2; }
	;

/* def linear(X[n, d], W[d, h], b[h]) -> Y[n, h] { ... } */
formals:
	  %empty                        { $$ = (FormalList){0}; }
	| formals_ne                    { $$ = $1; }
	;

formals_ne:
	  formal                        { $$ = (FormalList){0}; vec_push(&$$, $1); }
	| formals_ne ',' formal         { $$ = $1; vec_push(&$$, $3); }
	;

formal:
	  IDENT                         { $$ = (Formal){.name = $1, .loc = @1}; }
	| IDENT '[' names ']'           {
	                                  $$ = (Formal){.name = $1, .loc = @$};
	                                  $$.idx = names_copy(ps, &$3, &$$.idxloc, NULL, &$$.nidx);
	                                }
	;

names:
	  IDENT                         { $$ = (NameList){0}; names_push(&$$, $1, @1, NULL); }
	| names ',' IDENT               { $$ = $1; names_push(&$$, $3, @3, NULL); }
	;

/* a reduction's indices: sum[i, j in N](e) */
rnames:
	  IDENT                         { $$ = (NameList){0}; names_push(&$$, $1, @1, NULL); }
	| IDENT IN expr                 { $$ = (NameList){0}; names_push(&$$, $1, @$, $3); }
	| rnames ',' IDENT              { $$ = $1; names_push(&$$, $3, @3, NULL); }
	| rnames ',' IDENT IN expr      { $$ = $1; names_push(&$$, $3, loc_span(@3, @5), $5); }
	;

indices:
	  index                         { $$ = (NodeList){0}; vec_push(&$$, $1); }
	| indices ',' index             { $$ = $1; vec_push(&$$, $3); }
	;

/* an index, or a name with its range: Y[n, c in C] */
index:
	  expr                          { $$ = $1; }
	| IDENT IN expr                 { $$ = ranged(ps, $1, $3, @$); }
	;

expr:
	  primary                       { $$ = $1; }
	| expr '+' expr                 { $$ = binary(ps, B_ADD, $1, $3, @$); }
	| expr '-' expr                 { $$ = binary(ps, B_SUB, $1, $3, @$); }
	| expr '*' expr                 { $$ = binary(ps, B_MUL, $1, $3, @$); }
	| expr '/' expr                 { $$ = binary(ps, B_DIV, $1, $3, @$); }
	| expr POW expr                 { $$ = binary(ps, B_POW, $1, $3, @$); }
	| expr '<' expr                 { $$ = binary(ps, B_LT, $1, $3, @$); }
	| expr LE expr                  { $$ = binary(ps, B_LE, $1, $3, @$); }
	| expr '>' expr                 { $$ = binary(ps, B_GT, $1, $3, @$); }
	| expr GE expr                  { $$ = binary(ps, B_GE, $1, $3, @$); }
	| expr EQ expr                  { $$ = binary(ps, B_EQ, $1, $3, @$); }
	| expr NE expr                  { $$ = binary(ps, B_NE, $1, $3, @$); }
	| '-' expr %prec UMINUS         { $$ = fe_ast_node(ps->arena, N_UNARY, @$); $$->u.unary.a = $2; $$ = grown(ps, $$, 1, &$2); }
	;

primary:
	  NUMBER                        { $$ = number(ps, $1, @1); }
	| STRING                        { $$ = fe_ast_node(ps->arena, N_STR, @1); $$->u.str = $1; }
	| IDENT                         { $$ = fe_ast_node(ps->arena, N_NAME, @1); $$->u.name.name = $1; }
	| IDENT '[' indices ']'         {
	                                  $$ = fe_ast_node(ps->arena, N_ACCESS, @$);
	                                  $$->u.access.name = $1; $$->u.access.nameloc = @1;
	                                  $$->u.access.idx = nodes_copy(ps, &$3, &$$->u.access.nidx);
	                                  $$ = grown(ps, $$, $$->u.access.nidx, $$->u.access.idx);
	                                }
	| IDENT '[' indices ']' '(' { enter(ps, @1); } expr ')'
	                                {
	                                  /* a named reduction: mean[i](e) */
	                                  ps->depth--;
	                                  $$ = named_reduce(ps, $1, @1, &$3, $7, @$);
	                                }
	| IDENT '(' { enter(ps, @1); } args ')'
	                                {
	                                  ps->depth--;
	                                  $$ = fe_ast_node(ps->arena, N_CALL, @$);
	                                  $$->u.call.name = $1; $$->u.call.nameloc = @1;
	                                  $$->u.call.args = nodes_copy(ps, &$4, &$$->u.call.nargs);
	                                  $$ = grown(ps, $$, $$->u.call.nargs, $$->u.call.args);
	                                }
	| dtype '(' expr ')'            {
	                                  $$ = fe_ast_node(ps->arena, N_CALL, @$); $$->u.call.name = dtype_name($1.t); $$->u.call.nameloc = @1;
	                                  $$->u.call.args = arena_alloc(ps->arena, sizeof(Node *)); $$->u.call.args[0] = $3; $$->u.call.nargs = 1;
	                                  $$ = grown(ps, $$, 1, &$3);
	                                }
	| WHERE '(' expr ',' expr ',' expr ')'
	                                {
	                                  $$ = fe_ast_node(ps->arena, N_WHERE, @$);
	                                  $$->u.where.cond = $3; $$->u.where.a = $5; $$->u.where.b = $7;
	                                  $$ = grown(ps, $$, 3, (Node *[]){$3, $5, $7});
	                                }
	| red '[' rnames ']' '(' { enter(ps, @1); } expr ')'
	                                { ps->depth--; $$ = reduce(ps, $1, &$3, $7, @$); }
	| GRAD '(' IDENT ',' IDENT ')'  {
	                                  $$ = fe_ast_node(ps->arena, N_GRAD, @$);
	                                  $$->u.grad.loss = $3; $$->u.grad.lossloc = @3;
	                                  $$->u.grad.wrt = $5; $$->u.grad.wrtloc = @5;
	                                }
	| '(' { enter(ps, @1); } expr ')'
	                                { ps->depth--; $$ = $3; $$->loc = @$; }
	;

red:
	  SUM                           { $$ = R_SUM; }
	| MAX                           { $$ = R_MAX; }
	| MIN                           { $$ = R_MIN; }
	| ARGMAX                        { $$ = R_ARGMAX; }
	| ARGMIN                        { $$ = R_ARGMIN; }
	;

args:
	  %empty                        { $$ = (NodeList){0}; }
	| args_ne                       { $$ = $1; }
	;

args_ne:
	  expr                          { $$ = (NodeList){0}; vec_push(&$$, $1); }
	| args_ne ',' expr              { $$ = $1; vec_push(&$$, $3); }
	;

%%

#include "frontend/lexer.h"

/* A token's name for a message: the alias without bison's quotes. */
static const char *token_words(yysymbol_kind_t k)
{
	const char *s = yysymbol_name(k);
	static char buf[64];
	size_t n = strlen(s);
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"' && n - 2 < sizeof buf) {
		memcpy(buf, s + 1, n - 2);
		buf[n - 2] = 0;
		return buf;
	}
	return s;
}

static int yyreport_syntax_error(const yypcontext_t *ctx, yyscan_t scanner, struct Parse *ps)
{
	yysymbol_kind_t expected[6];
	int n = yypcontext_expected_tokens(ctx, expected, 6);
	yysymbol_kind_t got = yypcontext_token(ctx);
	Loc loc = *yypcontext_location(ctx);
	struct LexState *ls = fe_yyget_extra(scanner);
	Buf b = {0};

	if (ls->lex_error) {
		/* the scanner already said what is wrong here */
		ls->lex_error = false;
		return 0;
	}
	/* a missing ';' is reported where it belongs: after the last token */
	bool semi = false;
	for (int i = 0; i < n; i++)
		semi |= !strcmp(yysymbol_name(expected[i]), "';'");
	if (semi && got != YYSYMBOL_YYEOF) {
		const SrcFile *f = src_get(loc.file);
		Loc at = {loc.file, ls->prev_end, 0};
		if (f && loc.len < 40)
			diag(DIAG_ERROR, at, "expected ';' before '%.*s'", (int)loc.len, f->text + loc.off);
		else
			diag(DIAG_ERROR, at, "expected ';'");
		return 0;
	}

	if (n > 0 && n <= 4) {
		buf_puts(&b, "expected ");
		for (int i = 0; i < n; i++) {
			buf_printf(&b, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ", token_words(expected[i]));
		}
		buf_puts(&b, got == YYSYMBOL_YYEOF ? " at " : " before ");
	} else {
		buf_puts(&b, "unexpected ");
	}
	if (got == YYSYMBOL_YYEOF) {
		buf_puts(&b, "end of file");
	} else {
		const SrcFile *f = src_get(loc.file);
		if (f && loc.len > 0 && loc.len < 40 && got != YYSYMBOL_STRING)
			buf_printf(&b, "'%.*s'", (int)loc.len, f->text + loc.off);
		else
			buf_puts(&b, token_words(got));
	}
	diag(DIAG_ERROR, loc, "%s", b.s);
	buf_free(&b);
	return 0;
}

Ast *fe_parse(Arena *arena, int file)
{
	const SrcFile *f = src_get(file);
	struct LexState ls = {file, 0, arena, 0, 0, false, 0};
	struct Parse ps = {arena, file, {0}, 0, false};
	yyscan_t scanner;
	Ast *ast = arena_alloc(arena, sizeof *ast);

	fe_yylex_init_extra(&ls, &scanner);
	YY_BUFFER_STATE buf = fe_yy_scan_bytes(f->text, (int)f->len, scanner);
	yyparse(scanner, &ps);
	fe_yy_delete_buffer(buf, scanner);
	fe_yylex_destroy(scanner);

	ast->arena = arena;
	ast->file = file;
	ast->items = arena_alloc(arena, (ps.items.n + 1) * sizeof *ast->items);
	if (ps.items.n)         /* memcpy from NULL is undefined even for 0 bytes */
		memcpy(ast->items, ps.items.v, ps.items.n * sizeof *ast->items);
	ast->nitems = ps.items.n;
	vec_free(&ps.items);
	return ast;
}
