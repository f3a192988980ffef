/*
 * ast.c: syntax-tree constructors, a printer, and reading source files.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "frontend/frontend.h"

Node *fe_ast_node(Arena *a, NodeKind kind, Loc loc)
{
	Node *n = arena_alloc(a, sizeof *n);
	n->kind = kind;
	n->loc = loc;
	return n;
}

Item *fe_ast_item(Arena *a, ItemKind kind, Loc loc)
{
	Item *it = arena_alloc(a, sizeof *it);
	it->kind = kind;
	it->loc = loc;
	return it;
}

const char *fe_binop_name(BinOp op)
{
	static const char *names[] = {"+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!="};
	return names[op];
}

const char *fe_red_name(RedKind r)
{
	static const char *names[] = {"sum", "max", "min", "argmax", "argmin", "mean"};
	return names[r];
}

/* ---- printing, as S-expressions ---- */

static void node_print(Buf *b, const Node *n);

/* "(head kid kid ...)" */
static void sexp(Buf *b, const char *head, Node *const *kids, int n)
{
	buf_printf(b, "(%s", head);
	for (int i = 0; i < n; i++) {
		buf_puts(b, " ");
		node_print(b, kids[i]);
	}
	buf_puts(b, ")");
}

static void node_print(Buf *b, const Node *n)
{
	if (!n) {
		buf_puts(b, "<null>");
		return;
	}
	switch (n->kind) {
	case N_NUM:
		buf_printf(b, "%.17g", n->u.num);
		return;
	case N_STR:
		buf_printf(b, "\"%s\"", n->u.str);
		return;
	case N_NAME:
		buf_puts(b, n->u.name.name);
		if (n->u.name.range) {
			buf_puts(b, " in ");
			node_print(b, n->u.name.range);
		}
		return;
	case N_ACCESS:
		buf_printf(b, "%s[", n->u.access.name);
		for (int i = 0; i < n->u.access.nidx; i++) {
			if (i)
				buf_puts(b, ", ");
			node_print(b, n->u.access.idx[i]);
		}
		buf_puts(b, "]");
		return;
	case N_UNARY:
		sexp(b, "-", &n->u.unary.a, 1);
		return;
	case N_BINARY:
		sexp(b, fe_binop_name(n->u.binary.op), (Node *const[]){n->u.binary.a, n->u.binary.b}, 2);
		return;
	case N_CALL:
		sexp(b, n->u.call.name, n->u.call.args, n->u.call.nargs);
		return;
	case N_WHERE:
		sexp(b, "where", (Node *const[]){n->u.where.cond, n->u.where.a, n->u.where.b}, 3);
		return;
	case N_REDUCE:
		buf_printf(b, "(%s%s[", n->u.reduce.implicit ? "implicit-" : "", fe_red_name(n->u.reduce.red));
		for (int i = 0; i < n->u.reduce.nnames; i++) {
			buf_printf(b, "%s%s", i ? ", " : "", n->u.reduce.names[i]);
			if (n->u.reduce.range && n->u.reduce.range[i]) {
				buf_puts(b, " in ");
				node_print(b, n->u.reduce.range[i]);
			}
		}
		buf_puts(b, "] ");
		node_print(b, n->u.reduce.body);
		buf_puts(b, ")");
		return;
	case N_GRAD:
		buf_printf(b, "(grad %s %s)", n->u.grad.loss, n->u.grad.wrt);
		return;
	case N_INDEX:
		buf_printf(b, "(index %s)", n->u.name.name);
		return;
	case N_COUNTER:
		buf_printf(b, "(counter %s)", n->u.name.name);
		return;
	}
}

static void items_print(Buf *b, Item **items, int n, int depth);

void fe_formal_print(Buf *b, const Formal *f)
{
	buf_puts(b, f->name);
	if (f->nidx) {
		buf_puts(b, "[");
		for (int i = 0; i < f->nidx; i++)
			buf_printf(b, "%s%s", i ? ", " : "", f->idx[i]);
		buf_puts(b, "]");
	}
}

static void item_print(Buf *b, const Item *it, int depth)
{
	static const char *aops[] = {"=", "+=", "-=", "*=", "/="};
	buf_printf(b, "%*s", 2 * depth, "");
	switch (it->kind) {
	case I_SIZE:
		buf_printf(b, "size %s = ", it->name);
		node_print(b, it->u.size.value);
		break;
	case I_INPUT:
	case I_PARAM:
		buf_printf(b, "%s %s", it->kind == I_INPUT ? "input" : "param", it->name);
		if (it->u.decl.has_dims) {
			buf_puts(b, "[");
			for (int i = 0; i < it->u.decl.ndims; i++) {
				if (i)
					buf_puts(b, ", ");
				node_print(b, it->u.decl.dims[i]);
			}
			buf_puts(b, "]");
		}
		buf_printf(b, " : %s", dtype_name(it->u.decl.dtype));
		if (it->u.decl.path)
			buf_printf(b, " = \"%s\"", it->u.decl.path);
		if (it->u.decl.init) {
			buf_puts(b, " = ");
			node_print(b, it->u.decl.init);
		}
		break;
	case I_CONST:
		buf_printf(b, "const %s = ", it->name);
		node_print(b, it->u.cnst.value);
		break;
	case I_OUTPUT:
		buf_printf(b, "output %s", it->name);
		if (it->u.output.path)
			buf_printf(b, " = \"%s\"", it->u.output.path);
		break;
	case I_IMPORT:
		buf_printf(b, "import \"%s\"", it->u.import.path);
		break;
	case I_DEF:
		buf_printf(b, "def %s(", it->name);
		for (int i = 0; i < it->u.def.nparams; i++) {
			if (i)
				buf_puts(b, ", ");
			fe_formal_print(b, &it->u.def.params[i]);
		}
		buf_puts(b, ") -> ");
		fe_formal_print(b, &it->u.def.result);
		buf_puts(b, " {\n");
		items_print(b, it->u.def.body, it->u.def.nbody, depth + 1);
		buf_printf(b, "%*s}", 2 * depth, "");
		break;
	case I_ASSIGN:
		buf_puts(b, it->name);
		if (it->u.assign.has_idx) {
			buf_puts(b, "[");
			for (int i = 0; i < it->u.assign.nidx; i++) {
				if (i)
					buf_puts(b, ", ");
				node_print(b, it->u.assign.idx[i]);
			}
			buf_puts(b, "]");
		}
		buf_printf(b, " %s ", aops[it->u.assign.op]);
		node_print(b, it->u.assign.value);
		break;
	case I_PRINT:
		buf_puts(b, "print ");
		node_print(b, it->u.print.value);
		break;
	case I_REPEAT:
		buf_puts(b, "repeat ");
		if (it->u.repeat.counter)
			buf_printf(b, "%s in ", it->u.repeat.counter);
		node_print(b, it->u.repeat.count);
		for (int i = 0; i < it->u.repeat.nsplit; i++)
			buf_printf(b, "%s%s", i ? ", " : " split ", it->u.repeat.split[i]);
		if (it->u.repeat.nsplit) {
			buf_puts(b, " every ");
			node_print(b, it->u.repeat.every);
		}
		buf_puts(b, " {\n");
		items_print(b, it->u.repeat.body, it->u.repeat.nbody, depth + 1);
		buf_printf(b, "%*s}", 2 * depth, "");
		break;
	}
	buf_puts(b, "\n");
}

static void items_print(Buf *b, Item **items, int n, int depth)
{
	for (int i = 0; i < n; i++)
		item_print(b, items[i], depth);
}

void fe_ast_print(Buf *b, const Ast *ast)
{
	items_print(b, ast->items, ast->nitems, 0);
}

/* ---- source files ---- */

/* The biggest source file trac reads: locations are 32-bit byte offsets,
 * and no real program comes near it. */
#define MAX_SOURCE_BYTES (64u << 20)

/* The offset of the first byte that is not part of well-formed UTF-8, or
 * len if there is none. */
static size_t utf8_check(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
		if (n == 0 || i + n > len || (n == 2 && c < 0xC2) || (n == 4 && c > 0xF4))
			return i;
		for (size_t k = 1; k < n; k++)
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
		i += n;
	}
	return len;
}

/* Reads a .tra file.  A source is text: no NUL bytes, well-formed UTF-8
 * (comments and strings may hold any), at most MAX_SOURCE_BYTES.  Reading
 * stops at the first sign that it is not, so /dev/zero or a huge binary is
 * refused at once. */
int fe_load(const char *path, const char **err)
{
	struct stat st;
	FILE *f;
	static char why[128];

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		*err = "is a directory";
		return -1;
	}
	if (!(f = fopen(path, "rb"))) {
		*err = strerror(errno);
		return -1;
	}
	Buf b = {0};
	char chunk[65536];
	size_t n;
	*err = NULL;
	while (!*err && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (memchr(chunk, 0, n)) {
			*err = "is not a text file (it contains NUL bytes)";
			break;
		}
		if (b.len + n > MAX_SOURCE_BYTES) {
			snprintf(why, sizeof why, "is too big for a program (more than %u MiB)", MAX_SOURCE_BYTES >> 20);
			*err = why;
			break;
		}
		if (b.len + n + 1 > b.cap) {
			b.cap = (b.len + n + 1) * 2;
			b.s = xrealloc(b.s, b.cap);
		}
		memcpy(b.s + b.len, chunk, n);
		b.len += n;
	}
	if (!*err && ferror(f))
		*err = strerror(errno);
	fclose(f);
	if (!*err) {
		if (!b.s)
			b.s = xcalloc(1, 1);
		b.s[b.len] = 0;
		size_t bad = utf8_check((const unsigned char *)b.s, b.len);
		if (bad < b.len) {
			int line = 1;
			for (size_t i = 0; i < bad; i++)
				line += b.s[i] == '\n';
			snprintf(why, sizeof why, "is not a text file (byte 0x%02x on line %d is not UTF-8)",
			         (unsigned char)b.s[bad], line);
			*err = why;
		}
	}
	if (*err) {
		free(b.s);
		return -1;
	}
	return src_add(path, b.s, b.len);
}
