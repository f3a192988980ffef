/*
 * checkpoint.c: training that survives interruption.
 *
 *   ./model ... --checkpoint FILE [--checkpoint-every N]    (default N = 1)
 *   ./model ... --resume FILE [--checkpoint FILE ...]
 *
 * The generated main calls trt_resume before each outermost repeat block and
 * trt_checkpoint at the end of each of its iterations.  A checkpoint holds
 * every param's value and where the run was: outermost block L, its last
 * completed iteration k.  Resuming runs the program from the top as usual
 * -- inputs read, params initialised, the code before the blocks run again
 * -- but the blocks before L run no iteration, and block L restores the
 * params and starts at iteration k + 1.  Only params carry values from one
 * iteration to the next (temps are the iteration's own; init is counter
 * based), so on the same rank count the resumed run computes bit for bit
 * what the uninterrupted run would have; on another rank count, what any
 * run on that count would have.  (A program that reads params between two
 * outermost blocks, outside both, sees their initial values there when it
 * resumes in a later block: such programs are rare, and trac's stdlib and
 * examples have none.)
 *
 * The file, little-endian, written by rank 0 to a temporary file beside
 * FILE, fsynced and renamed, so FILE always holds a whole checkpoint:
 *
 *   offset  size
 *        0     8  magic "TRACCKP1"
 *        8     8  program identity: FNV-1a 64 of the tensor table (every
 *                 tensor's name, role, element type and shape)
 *       16     8  the seed of the run that wrote it
 *       24     4  outermost repeat block L (0-based, program order)
 *       28     4  number of params P
 *       32     8  k, the last completed iteration of block L (0-based)
 *       40     8  block L's iteration count
 *       48     8  the rank count that wrote it (for messages only)
 *       56     8  0 (reserved)
 *       64  P*160 one entry per param, in the program's param order:
 *                 name (64 bytes, NUL-padded), dtype (4: 0 f32, 1 f64),
 *                 rank (4), shape (8 x 8), data offset (8), data bytes (8),
 *                 8 bytes reserved
 *        ...      each param's elements in C order (the layout of its .npy),
 *                 at its data offset, a multiple of 64
 *
 * The params are stored in the global layout, so a checkpoint written on 4
 * ranks resumes on 2: each rank reads only the chunks it owns.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt.h"

#define MAGIC "TRACCKP1"
#define HEADER 64
#define ENTRY 160
#define NAME 64

static struct {
	const char *path;               /* --checkpoint */
	int64_t every;                  /* --checkpoint-every */
	const char *resume;             /* --resume */
	/* the checkpoint being resumed, after rt_ckpt_init */
	int loop;
	int64_t iter, count, ranks;
	int nparams;
	unsigned char *entries;         /* nparams * ENTRY bytes */
	int64_t size;                   /* of the file */
	int done;                       /* params restored */
} ck = {.every = 1, .loop = -1};

/* ---- the command line ---- */

int rt_ckpt_arg(int argc, char **argv, int *a, char *msg, size_t len)
{
	const char *arg = argv[*a];
	static const char *names[] = {"--checkpoint", "--checkpoint-every", "--resume"};
	int which = -1;
	const char *v = NULL;

	*msg = 0;
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(names[i]);
		if (!strncmp(arg, names[i], n) && (arg[n] == 0 || arg[n] == '=')) {
			which = i;
			v = arg[n] == '=' ? arg + n + 1 : *a + 1 < argc ? argv[++*a] : NULL;
		}
	}
	if (which < 0)
		return 0;
	if (!v || !*v) {
		snprintf(msg, len, "%s: %s needs %s", rt_progname(), names[which], which == 1 ? "a count" : "a file");
		return 1;
	}
	if (which == 0) {
		ck.path = v;
	} else if (which == 2) {
		ck.resume = v;
	} else {
		char *end;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		if (*end || errno || n < 1) {
			snprintf(msg, len, "%s: --checkpoint-every needs a count of iterations (1 or more), found '%s'",
			         rt_progname(), v);
			return 1;
		}
		ck.every = n;
	}
	return 1;
}

void rt_ckpt_help(void)
{
	printf("  --checkpoint FILE       write the params to FILE as training goes (atomically)\n");
	printf("  --checkpoint-every N    every N iterations of an outermost repeat block (default 1)\n");
	printf("  --resume FILE           continue from FILE's checkpoint, as if never interrupted\n");
}

/* ---- the file ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 0x100000001b3ull;
	return h;
}

/* The program's identity: its tensor table. */
static uint64_t program_hash(void)
{
	const TrtProgram *p = rt.prog;
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < p->ntensors; i++) {
		const TrtTensor *t = &p->tensors[i];
		int32_t v[3] = {(int32_t)t->role, (int32_t)t->dtype, (int32_t)t->rank};
		h = fnv(h, t->name ? t->name : "", strlen(t->name ? t->name : "") + 1);
		h = fnv(h, v, sizeof v);
		h = fnv(h, t->shape, sizeof t->shape[0] * (size_t)(t->rank > 0 ? t->rank : 0));
	}
	return h;
}

static void put64(unsigned char *b, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static void put32(unsigned char *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *b)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static uint32_t get32(const unsigned char *b)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

/* n bytes at off, or 0 with errno set (EIO for a file that ends early) */
static int read_full(int fd, void *buf, size_t n, off_t off)
{
	ssize_t k = rt_pread_full(fd, buf, n, off);
	if (k >= 0 && (size_t)k < n)
		errno = EIO;
	return k >= 0 && (size_t)k == n;
}

/* Opens and checks --resume's file; on failure, the message in msg. */
static int open_resume(char *msg, size_t len)
{
	const char *pn = rt_progname(), *path = ck.resume;
	unsigned char h[HEADER];
	struct stat st;

	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0) {
		snprintf(msg, len, "%s: --resume %s: %s", pn, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(msg, len, "%s: --resume %s: %s", pn, path,
		         S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
		close(fd);
		return -1;
	}
	ck.size = (int64_t)st.st_size;
	if (!read_full(fd, h, HEADER, 0) || memcmp(h, MAGIC, 8)) {
		snprintf(msg, len, "%s: --resume %s: not a trac checkpoint", pn, path);
		close(fd);
		return -1;
	}
	if (get64(h + 8) != program_hash()) {
		snprintf(msg, len, "%s: --resume %s: written by another program (its tensors differ from %s's)",
		         pn, path, pn);
		close(fd);
		return -1;
	}
	ck.loop = (int)get32(h + 24);
	ck.nparams = (int)get32(h + 28);
	ck.iter = (int64_t)get64(h + 32);
	ck.count = (int64_t)get64(h + 40);
	ck.ranks = (int64_t)get64(h + 48);
	if (ck.loop < 0 || ck.loop >= rt.prog->nloops || ck.iter < 0 || ck.iter >= ck.count ||
	    ck.nparams < 0 || ck.nparams > rt.prog->ntensors) {
		snprintf(msg, len, "%s: --resume %s: a damaged checkpoint (repeat block %d, iteration %lld of %lld)",
		         pn, path, ck.loop, (long long)ck.iter, (long long)ck.count);
		close(fd);
		return -1;
	}
	if ((uint64_t)get64(h + 16) != rt.seed) {
		snprintf(msg, len, "%s: --resume %s: written with --seed %llu, this run has --seed %llu",
		         pn, path, (unsigned long long)get64(h + 16), (unsigned long long)rt.seed);
		close(fd);
		return -1;
	}
	ck.entries = rt_alloc((size_t)ck.nparams * ENTRY + 1);
	if (!read_full(fd, ck.entries, (size_t)ck.nparams * ENTRY, HEADER)) {
		snprintf(msg, len, "%s: --resume %s: a truncated checkpoint", pn, path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

void rt_ckpt_init(void)
{
	char msg[1024];
	const char *err = NULL;

	if ((ck.path || ck.resume) && rt.prog->nloops == 0) {
		snprintf(msg, sizeof msg, "%s: %s: the program has no repeat block to %s", rt_progname(),
		         ck.path ? "--checkpoint" : "--resume", ck.path ? "checkpoint" : "resume");
		err = msg;
	} else if (ck.resume && open_resume(msg, sizeof msg) < 0) {
		err = msg;
	} else if (ck.path && rt.rank == 0) {     /* its folder takes the temporary file */
		int e = rt_probe_write(ck.path);
		if (e) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(e));
			err = msg;
		}
	}
	rt_agree(err);
}

const char *rt_ckpt_resume(void)
{
	return ck.resume;
}

/* The entry of tensor x in the checkpoint, after checking it is x. */
static const unsigned char *find_entry(const TrtTensor *x, char *msg, size_t len)
{
	for (int i = 0; i < ck.nparams; i++) {
		const unsigned char *e = ck.entries + (size_t)i * ENTRY;
		if (strncmp((const char *)e, x->name, NAME - 1))
			continue;
		int ok = (int)get32(e + NAME) == (int)x->dtype && (int)get32(e + NAME + 4) == x->rank;
		for (int d = 0; ok && d < x->rank; d++)
			ok = (int64_t)get64(e + NAME + 8 + 8 * d) == x->shape[d];
		int64_t off = (int64_t)get64(e + NAME + 72), nbytes = (int64_t)get64(e + NAME + 80);
		if (!ok || off < 0 || nbytes < 0 || off > ck.size || nbytes > ck.size - off) {
			snprintf(msg, len, "%s: --resume %s: param %s is damaged in the checkpoint", rt_progname(),
			         ck.resume, x->name);
			return NULL;
		}
		return e;
	}
	snprintf(msg, len, "%s: --resume %s: no param %s in the checkpoint", rt_progname(), ck.resume, x->name);
	return NULL;
}

/* Replaces every param's relation by the checkpoint's values, in the same
 * type and placement. */
static void restore(const TrtParams *params)
{
	char msg[1024];
	const char *err = NULL;

	int fd = open(ck.resume, O_RDONLY);
	if (fd < 0) {
		snprintf(msg, sizeof msg, "%s: --resume %s: %s", rt_progname(), ck.resume, strerror(errno));
		err = msg;
	}
	rt_agree(err);
	for (int i = 0; i < params->n && !err; i++) {
		const TrtTensor *x = &rt.prog->tensors[params->tensors[i]];
		TrtRel **var = params->vars[i];
		if (!*var)
			rt_bug("param %s has no value before its repeat block", x->name);
		const unsigned char *e = find_entry(x, msg, sizeof msg);
		TrtRel *r = NULL;
		if (e) {
			r = rt_read_rel(fd, (int64_t)get64(e + NAME + 72), &(*var)->type, (*var)->place);
			if (!r)
				snprintf(msg, sizeof msg, "%s: --resume %s: param %s: %s", rt_progname(), ck.resume,
				         x->name, strerror(errno));
		}
		err = r ? NULL : msg;
		rt_agree(err);
		trt_free(*var);
		*var = r;
	}
	close(fd);
}

int64_t trt_resume(int loop, int64_t count, const TrtParams *params)
{
	char msg[256];

	if (!ck.resume || ck.done || loop > ck.loop)
		return 0;
	if (loop < ck.loop)
		return count;           /* the checkpoint is past this block */
	if (count != ck.count) {
		snprintf(msg, sizeof msg, "%s: --resume %s: repeat block %d runs %lld iterations, the "
		         "checkpoint's ran %lld", rt_progname(), ck.resume, loop, (long long)count,
		         (long long)ck.count);
		rt_agree(msg);
	}
	restore(params);
	ck.done = 1;
	if (rt.rank == 0 && !rt.quiet) {
		printf("resumed from %s after iteration %lld of %lld (written on %lld rank%s)\n", ck.resume,
		       (long long)ck.iter + 1, (long long)ck.count, (long long)ck.ranks, ck.ranks == 1 ? "" : "s");
		fflush(stdout);
	}
	return ck.iter + 1;
}

void trt_checkpoint(int loop, int64_t iter, int64_t count, const TrtParams *params)
{
	char msg[1024];
	const char *err = NULL;
	char *tmp = NULL;
	int fd = -1;

	if (!ck.path || (iter + 1) % ck.every != 0)
		return;
	int64_t t0 = rt_span_begin();

	/* the header and the param table: the same on every rank */
	size_t tabsize = HEADER + (size_t)params->n * ENTRY;
	unsigned char *tab = rt_alloc(tabsize);
	memset(tab, 0, tabsize);
	memcpy(tab, MAGIC, 8);
	put64(tab + 8, program_hash());
	put64(tab + 16, rt.seed);
	put32(tab + 24, (uint32_t)loop);
	put32(tab + 28, (uint32_t)params->n);
	put64(tab + 32, (uint64_t)iter);
	put64(tab + 40, (uint64_t)count);
	put64(tab + 48, (uint64_t)rt.nranks);
	int64_t off = ((int64_t)tabsize + 63) / 64 * 64;
	for (int i = 0; i < params->n; i++) {
		const TrtTensor *x = &rt.prog->tensors[params->tensors[i]];
		unsigned char *e = tab + HEADER + (size_t)i * ENTRY;
		int64_t nbytes = (int64_t)rt_dtype_size(x->dtype);
		for (int d = 0; d < x->rank; d++)
			nbytes *= x->shape[d];
		strncpy((char *)e, x->name, NAME - 1);
		put32(e + NAME, (uint32_t)x->dtype);
		put32(e + NAME + 4, (uint32_t)x->rank);
		for (int d = 0; d < x->rank; d++)
			put64(e + NAME + 8 + 8 * d, (uint64_t)x->shape[d]);
		put64(e + NAME + 72, (uint64_t)off);
		put64(e + NAME + 80, (uint64_t)nbytes);
		off += (nbytes + 63) / 64 * 64;
	}

	if (rt.rank == 0) {
		fd = rt_make_temp(ck.path, &tmp);
		if (fd < 0 || !rt_pwrite_full(fd, tab, tabsize, 0)) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(errno));
			err = msg;
			if (fd >= 0) {
				close(fd);
				rt_remove_temp(tmp);
			}
		}
	}
	rt_agree(err);

	for (int i = 0; i < params->n; i++) {
		const TrtRel *r = *params->vars[i];
		const unsigned char *e = tab + HEADER + (size_t)i * ENTRY;
		if (!r)
			rt_bug("param %s has no value to checkpoint", rt.prog->tensors[params->tensors[i]].name);
		int e2 = rt_write_rel(fd, (int64_t)get64(e + NAME + 72), r);
		if (rt.rank == 0 && e2 && !err) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(e2));
			err = msg;
		}
	}
	if (rt.rank == 0) {
		if (!err && (ftruncate(fd, (off_t)off) < 0 || fsync(fd) < 0)) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(errno));
			err = msg;
		}
		if (close(fd) < 0 && !err) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(errno));
			err = msg;
		}
		if (!err && rt_rename_durable(tmp, ck.path) < 0) {
			snprintf(msg, sizeof msg, "%s: --checkpoint %s: %s", rt_progname(), ck.path, strerror(errno));
			err = msg;
		}
		if (err)
			rt_remove_temp(tmp);
		free(tmp);
	}
	free(tab);
	rt_agree(err);
	if (t0)         /* the file's bytes are rank 0's; the others send theirs */
		rt_trace_span(RT_SPAN_CHECKPOINT, t0, -1, rt.rank == 0 ? (double)off : -1, -1, ck.path);
}
