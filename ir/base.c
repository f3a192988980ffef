/*
 * base.c: memory, strings, source files, locations and diagnostics.
 *
 * Everything every layer uses.  Diagnostics live here rather than in the
 * frontend because later phases (the optimizer's memory check, say) report
 * located errors too; they all print through diag().
 *
 * Invariants: a Loc stores byte offsets only; line and column are computed
 * when a message is printed.  The source-file table lives for the whole run.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ir/ir.h"

/* ---- memory ---- */

static _Noreturn void out_of_memory(size_t n)
{
	fprintf(stderr, "trac: out of memory (allocating %zu bytes)\n", n);
	exit(4);
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		out_of_memory(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		out_of_memory(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		out_of_memory(n);
	return p;
}

char *xstrdup(const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(xmalloc(n), s, n);
}

bool ends_with(const char *s, const char *tail)
{
	size_t n = s ? strlen(s) : 0, k = strlen(tail);
	return s && n >= k && !strcmp(s + n - k, tail);
}

char *xprintf(const char *fmt, ...)
{
	Buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(&b, fmt, ap);
	va_end(ap);
	return b.s ? b.s : xstrdup("");
}

/* Arenas: a list of big blocks; objects never freed one by one. */
typedef struct Block {
	struct Block *next;
	size_t used, size;
	_Alignas(16) char data[];
} Block;

struct Arena {
	Block *head;
};

Arena *arena_new(void)
{
	return xcalloc(1, sizeof(Arena));
}

void *arena_alloc(Arena *a, size_t n)
{
	n = (n + 15) & ~(size_t)15;
	if (!a->head || a->head->used + n > a->head->size) {
		size_t size = n > 65536 ? n : 65536;
		Block *b = xmalloc(sizeof(Block) + size);
		b->next = a->head;
		b->used = 0;
		b->size = size;
		a->head = b;
	}
	void *p = a->head->data + a->head->used;
	a->head->used += n;
	return memset(p, 0, n);
}

char *arena_strdup(Arena *a, const char *s)
{
	size_t n = strlen(s) + 1;
	return memcpy(arena_alloc(a, n), s, n);
}

void arena_free(Arena *a)
{
	if (!a)
		return;
	for (Block *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

/* ---- strings ---- */

void buf_vprintf(Buf *b, const char *fmt, va_list ap)
{
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		tr_bug("bad format '%s'", fmt);
	if (b->len + n + 1 > b->cap) {
		b->cap = (b->len + n + 1) * 2;
		b->s = xrealloc(b->s, b->cap);
	}
	vsnprintf(b->s + b->len, n + 1, fmt, ap);
	b->len += n;
}

void buf_printf(Buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void buf_puts(Buf *b, const char *s)
{
	buf_printf(b, "%s", s);
}

void buf_quote(Buf *b, const char *s, bool json)
{
	buf_puts(b, "\"");
	for (; *s; s++) {
		unsigned char c = *s;
		if (c == '"' || c == '\\')
			buf_printf(b, "\\%c", c);
		else if (c < 0x20)
			buf_printf(b, json ? "\\u%04x" : "\\%03o", c);
		else
			buf_printf(b, "%c", c);
	}
	buf_puts(b, "\"");
}

void buf_ints(Buf *b, int n, const int *v, const char *sep)
{
	for (int i = 0; i < n; i++)
		buf_printf(b, "%s%d", i ? sep : "", v[i]);
}

void buf_free(Buf *b)
{
	free(b->s);
	b->s = NULL;
	b->len = b->cap = 0;
}

_Noreturn void tr_bug_at(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fprintf(stderr, "trac: internal error at %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\ntrac: this is a bug in trac; please report it with the program that shows it.\n");
	exit(4);
}

bool mul_ok(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

bool add_ok(int64_t a, int64_t b, int64_t *r)
{
	return !__builtin_add_overflow(a, b, r);
}

int64_t ceil_div(int64_t a, int64_t b)
{
	return a / b + (a % b != 0);
}

/* FNV-1a over the keys' words. */
uint64_t hash_keys(const int64_t *k, int n)
{
	uint64_t h = 1469598103934665603ull;
	for (int i = 0; i < n; i++) {
		h ^= (uint64_t)k[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* ---- source files and locations ---- */

static Vec(SrcFile) files;

const Loc NOLOC = {-1, 0, 0};

int src_add(const char *path, char *text, size_t len)
{
	SrcFile f = {xstrdup(path), text, len};
	vec_push(&files, f);
	return files.n - 1;
}

const SrcFile *src_get(int file)
{
	if (file < 0 || file >= files.n)
		return NULL;
	return &files.v[file];
}

int src_count(void)
{
	return files.n;
}

/* Forget every source file (the fuzz harness compiles many in one process). */
void src_reset(void)
{
	for (int i = 0; i < files.n; i++) {
		free(files.v[i].path);
		free(files.v[i].text);
	}
	files.n = 0;
}

void loc_linecol(Loc loc, int *line, int *col)
{
	const SrcFile *f = src_get(loc.file);
	*line = 1;
	*col = 1;
	if (!f)
		return;
	size_t end = loc.off < f->len ? loc.off : f->len;
	for (size_t i = 0; i < end; i++) {
		if (f->text[i] == '\n') {
			++*line;
			*col = 1;
		} else if ((f->text[i] & 0xC0) != 0x80) {
			++*col;         /* count UTF-8 characters, not bytes */
		}
	}
}

Loc loc_span(Loc a, Loc b)
{
	if (a.file < 0)
		return b;
	if (b.file != a.file || b.off + b.len < a.off)
		return a;
	Loc r = a;
	r.len = b.off + b.len - a.off;
	return r;
}

char *loc_text(Loc loc)
{
	const SrcFile *f = src_get(loc.file);
	if (!f)
		return xstrdup("");
	Buf b = {0};
	bool space = false;
	for (uint32_t i = loc.off; i < loc.off + loc.len && i < f->len; i++) {
		char c = f->text[i];
		if (c == '#' || (c == '/' && i + 1 < f->len && f->text[i + 1] == '/')) {
			while (i < loc.off + loc.len && i < f->len && f->text[i] != '\n')
				i++;
			c = ' ';
		}
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
			space = true;
			continue;
		}
		if (space && b.len)
			buf_puts(&b, " ");
		space = false;
		buf_printf(&b, "%c", c);
	}
	return b.s ? b.s : xstrdup("");
}

/* ---- diagnostics ---- */

int diag_max = 20;
bool diag_color;
FILE *diag_out;
static int nerrors;

int diag_errors(void)
{
	return nerrors;
}

void diag_reset(void)
{
	nerrors = 0;
}

static const char *kind_word[] = {"error", "warning", "note"};
static const char *kind_color[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};

/* The source line containing byte off, and a caret line under [off, off+len). */
static void show_line(FILE *out, const SrcFile *f, size_t off, size_t len, DiagKind kind)
{
	size_t start = off, end = off;
	if (off > f->len)
		return;
	while (start > 0 && f->text[start - 1] != '\n')
		start--;
	while (end < f->len && f->text[end] != '\n')
		end++;
	/* A long line shows a window of it around the caret, "..." for the rest. */
	enum { WIDTH = 120, BEFORE = 40 };
	bool cut_left = false, cut_right = false;
	if (end - start > WIDTH) {
		if (off - start > BEFORE) {
			start = off - BEFORE;
			cut_left = true;
		}
		if (end - start > WIDTH) {
			end = start + WIDTH;
			cut_right = true;
		}
		while (cut_left && start < off && (f->text[start] & 0xC0) == 0x80)
			start++;        /* never split a UTF-8 character */
		while (cut_right && end > off && (f->text[end] & 0xC0) == 0x80)
			end--;
	}
	fprintf(out, "    %s%.*s%s\n    %s", cut_left ? "..." : "", (int)(end - start), f->text + start,
	        cut_right ? "..." : "", cut_left ? "   " : "");
	for (size_t i = start; i < off; i++) {
		if ((f->text[i] & 0xC0) != 0x80)
			fputc(f->text[i] == '\t' ? '\t' : ' ', out);
	}
	if (diag_color)
		fputs(kind_color[kind], out);
	fputc('^', out);
	for (size_t i = off + 1; i < off + len && i < end; i++) {
		if ((f->text[i] & 0xC0) != 0x80)
			fputc('~', out);
	}
	if (diag_color)
		fputs("\033[0m", out);
	fputc('\n', out);
}

void vdiag(DiagKind kind, Loc loc, const char *fmt, va_list ap)
{
	FILE *out = diag_out ? diag_out : stderr;
	const SrcFile *f = src_get(loc.file);

	if (kind == DIAG_ERROR && nerrors >= diag_max)
		return;
	if (diag_color)
		fputs("\033[1m", out);
	if (f) {
		int line, col;
		loc_linecol(loc, &line, &col);
		fprintf(out, "%s:%d:%d: ", f->path, line, col);
	} else {
		fputs("trac: ", out);
	}
	if (diag_color)
		fprintf(out, "%s%s:\033[0m\033[1m ", kind_color[kind], kind_word[kind]);
	else
		fprintf(out, "%s: ", kind_word[kind]);
	vfprintf(out, fmt, ap);
	if (diag_color)
		fputs("\033[0m", out);
	fputc('\n', out);
	if (f)
		show_line(out, f, loc.off, loc.len ? loc.len : 1, kind);
	if (kind == DIAG_ERROR && ++nerrors == diag_max)
		fprintf(out, "trac: too many errors (%d); stopping\n", diag_max);
}

void diag(DiagKind kind, Loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vdiag(kind, loc, fmt, ap);
	va_end(ap);
}

/* ---- where trac runs from ---- */

char *tr_exe_dir(bool *in_build)
{
	char self[PATH_MAX], build[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	*in_build = false;
	if (n <= 0)
		return NULL;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	*in_build = realpath(TRAC_BUILD_DIR, build) && !strcmp(build, self);
	return xstrdup(self);
}
