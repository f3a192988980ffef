/*
 * rt.h: libtracrt's private header, shared by the runtime's files and its
 * unit test, never installed.  Compiled programs see only trac_rt.h.
 *
 * Invariants every file relies on:
 *  - A chunk is a small header (Chunk) and its data, one allocation of
 *    nbytes aligned to RT_ALIGN bytes.  The data is resident or, under a
 *    memory budget (--mem-budget), only in this rank's spill file
 *    (store.c); code reaches it only through rt_chunk_data (to read) and
 *    rt_chunk_mut (to write), or rt_view/rt_view_mut and rt_csr_of/rt_csr_mut
 *    on them, which make it resident and pin it until the current pin scope
 *    ends (rt_pin_mark/rt_pin_release).  A pinned chunk is never evicted.
 *  - Chunks are reference counted; a rank is single-threaded as far as
 *    chunks go (the spill I/O thread touches only the buffers it is handed),
 *    so counts are plain integers.
 *  - A relation stores its tuples as two parallel arrays: keys (n * nkey
 *    int64s, row by row) and chunk pointers, each owning one reference.
 *  - Every op that builds a relation sorts it by key (stably) before handing
 *    it out, so tuple order, and so every accumulation order, depends only on
 *    the data and the number of ranks, never on hashing, message timing or
 *    where the chunks were (memory or disk).
 */
#ifndef TRAC_RT_PRIVATE_H
#define TRAC_RT_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <mpi.h>

#include "trac_rt.h"

#define RT_ALIGN 64

typedef struct IoReq IoReq;          /* a spill read or write (spill.c) */

typedef struct Chunk {
	int64_t refs;
	size_t nbytes;
	char *data;                     /* the resident data, or NULL: in the spill file only */
	size_t mapped;                  /* bytes mapped for big data (rel.c), 0 if malloc'd */
	/* the chunk store (store.c); all zero without a budget */
	int pins;                       /* pin scopes and holds using the data */
	int evict;                      /* a write in flight frees the data when done */
	int64_t slot;                   /* its copy's offset in the spill file, -1 none
	                                 * (then the data, if any, is dirty) */
	IoReq *io;                      /* a read or write of it in flight, or NULL */
	struct Chunk *prev, *next;      /* the store's list of resident (or of spilled) chunks */
	double nu_now, nu_after;        /* next use, in ops from the current one: by it or
	                                 * later, after it (store.c) */
	int64_t epoch;                  /* the op whose begin set nu_now and nu_after */
	int64_t sid, spos;              /* the op's access stream, and the chunk's next
	                                 * position in it (-1 none left) */
	int64_t stamp;                  /* the last pin: ties go least recently used first */
} Chunk;

struct TrtRel {
	TrtType type;
	TrtPlace place;
	int64_t n, cap;                 /* tuples on this rank, allocated slots */
	int64_t *keys;                  /* n * type.nkey */
	Chunk **chunks;
	/* the chunk store's (store.c): every live relation, the op that made
	 * it and its next use at op `epoch` */
	int op;
	struct TrtRel *prev, *next;
	int64_t epoch;
	double nu_now, nu_after;
};

/* The process-wide state that trt_init fills in. */
typedef struct RtState {
	int rank, nranks;
	MPI_Comm comm;                  /* the ranks' communicator: MPI_COMM_WORLD, but
	                                 * MPI_COMM_SELF while an IST body runs (ist.c) */
	int threads;                    /* MPI_THREAD_SERIALIZED or better: a second
	                                 * thread may make the MPI calls (twophase.c) */
	int one_node;                   /* every rank shares this node's memory */
	int local;                      /* ranks on this node, this one included */
	const TrtProgram *prog;
	const char *progname;           /* basename of argv[0], for messages */
	const char **paths;             /* per tensor: file to read or write, or NULL */
	uint64_t seed;
	int profile;
	int trace;                      /* --trace: spans are recorded (trace.c) */
	int quiet;                      /* --quiet: no print output, no progress line */
	const char *log_path;           /* --log FILE, or NULL */
	double sent;                    /* bytes this rank sent to other ranks so far */
	double recvd;                   /* bytes this rank received from other ranks */
	double sent_keys;               /* the part of sent that was tuples' keys */
	double live;                    /* bytes in chunks on this rank now (rel.c) */
	double peak;                    /* high-water mark of live */
	double op_peak;                 /* high-water mark of live since trt_op_begin */
	double buf_live, buf_peak;      /* communication buffers (comm.c), likewise */
	double budget;                  /* --mem-budget: resident chunk bytes allowed, 0 none */
	int in_memory;                  /* --in-memory: never a budget of guard.c's */
	double spill_w, spill_r;        /* bytes written to and read from the spill file */
	double spill_wait;              /* seconds this rank waited for spill I/O */
	double over;                    /* most resident bytes over the budget (pinned) */
	int op;                         /* the IA op running (trt_op_begin), -1 before any */
} RtState;

extern RtState rt;

/* ---- init.c ---- */

const char *rt_progname(void);
int rt_launched(void);                  /* started by mpirun (or another launcher) */
int rt_pmix_nodelay(void);               /* TCP_NODELAY on PMIx's socket to its server: how many */
/* Collective: ends the job with status: 0 after MPI_Finalize; else the
 * error's line is printed (every rank knows of it) and nothing more is. */
void rt_exit(int status) __attribute__((noreturn));
void rt_agree(const char *msg);
void rt_bug(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void *rt_alloc(size_t nbytes);
void *rt_realloc(void *p, size_t nbytes);

/* ---- cmdline.c ---- */

const char *rt_role_name(TrtRole role);
/* --help (prints and exits), NAME=PATH, NAME.out=PATH and the options,
 * into rt.paths and rt; a bad argument ends the job.  rt.prog is set. */
void rt_cmdline(int argc, char **argv, const TrtProgram *progs, int nprogs);
void rt_plans_str(char *s, size_t len, const TrtProgram *progs, int n);        /* "1-8,16" */
int rt_path_given(int tensor);          /* the command line named tensor entry's file */
/* Collective, before the first op: every output and the --log file can be
 * written (a temporary file beside each), none is a file the run reads,
 * no two are one file; else the one line and status 1. */
void rt_check_files(void);
/* Whether path's folder takes a temporary file beside it (and path is no
 * folder): 0, or the errno. */
int rt_probe_write(const char *path);
int rt_ends_with(const char *s, const char *tail);

/* ---- progress.c ---- */

void rt_progress_init(void);            /* collective: the terminal, --log's file */
void rt_progress_end(void);
void rt_progress_clear(void);           /* before anything else is printed on stderr */
void rt_progress_tick(void);            /* at an op's end: redraw the line if it is due */

/* ---- rel.c ---- */

size_t rt_dtype_size(TrtDtype d);
ssize_t rt_pread_full(int fd, void *buf, size_t n, int64_t off);    /* bytes read (short at EOF), or -1 */
int rt_pwrite_full(int fd, const void *buf, size_t n, int64_t off);  /* 1, or 0 with errno set */
const char *rt_dtype_name(TrtDtype d);                 /* "f32", ..., "i64" */
double rt_elem(TrtDtype d, const void *p, int64_t e);  /* element e, as a double */
/* a[i] = agg(a[i], b[i]) for i < n: how partial aggregates combine (a NaN wins max and min) */
void rt_combine(TrtDtype dt, void *a, const void *b, int64_t n, TrtAgg agg);
int64_t rt_frontier(const TrtType *t, int d);
int64_t rt_nkeys(const TrtType *t);
int64_t rt_chunk_shape(const TrtType *t, const int64_t *key, int64_t *n);
int64_t rt_chunk_first(const TrtType *t, int d, int64_t k);  /* chunk k's first element along key dim d */
/* Copies the box of cnt[] elements at sat[] of a row-major array of shape
 * sn[] to the box at dat[] of one of shape dn[], a run of the last dim at
 * a time (rank dims, es bytes an element). */
void rt_box_copy(char *dst, const int64_t *dn, const int64_t *dat, const char *src, const int64_t *sn,
                 const int64_t *sat, const int64_t *cnt, int rank, size_t es);
size_t rt_chunk_bytes(const TrtType *t, const int64_t *key);  /* dense, even for a sparse t */
/* A new chunk: resident, pinned in the current pin scope (store.c). */
Chunk *rt_chunk_new(size_t nbytes);
/* c's data, resident and pinned in the current pin scope: to read, or to
 * write (its copy in the spill file, if any, is dropped). */
const void *rt_chunk_data(const Chunk *c);
void *rt_chunk_mut(const Chunk *c);
Chunk *rt_chunk_ref(Chunk *c);
void rt_chunk_unref(Chunk *c);
/* A view of key's chunk c (pinned as above): to read (p is not written),
 * or a kernel's output. */
TrtView rt_view(const TrtType *t, const int64_t *key, const Chunk *c);
TrtView rt_view_mut(const TrtType *t, const int64_t *key, const Chunk *c);
void rt_live_add(double bytes);                         /* rt.live and its high-water marks */
char *rt_data_alloc(size_t nbytes, size_t *mapped);     /* chunk data's memory, or NULL */
void rt_data_free(char *p, size_t mapped);
void rt_check_type(const TrtType *t);
void rt_check_key(const TrtType *t, const int64_t *key);
void rt_rel_push(TrtRel *r, const int64_t *key, Chunk *c);
void rt_rel_set(TrtRel *r, int64_t i, Chunk *c);       /* tuple i's chunk, pushed NULL */
void rt_rel_sort(TrtRel *r);
int rt_key_cmp(const int64_t *a, const int64_t *b, int n);
/* The position of key in r, whose keys are sorted and distinct (every op's
 * result), or -1: no index to build, for a relation looked up a few times. */
int64_t rt_rel_bsearch(const TrtRel *r, const int64_t *key);
void rt_key_pick(int64_t *out, const int64_t *key, int n, const int *dims);  /* out[i] = key[dims[i]] */
void rt_sort(int64_t *idx, int64_t n, int (*cmp)(int64_t, int64_t, const void *),
             const void *ctx);
int64_t rt_key_linear(const TrtType *t, const int64_t *key);
void rt_key_from_linear(const TrtType *t, int64_t lin, int64_t *key);
/* The keys of type t this rank holds under placement p (every key unless p
 * partitions), in linear order: from linear number *lin on, the next one
 * here into key and *lin, 1; 0 past the last.
 *     for (int64_t lin = 0; rt_next_key_here(t, p, &lin, key); lin++) */
int rt_next_key_here(const TrtType *t, TrtPlace p, int64_t *lin, int64_t *key);

/* A sparse chunk's data (TrtView says what rows and columns are): a header,
 * then rowptr (nrow + 1 int64s), col (nnz int64s) and the nnz values.
 * rt_csr_new returns a chunk with the header and rowptr[0] = 0 filled in;
 * the caller fills the rest.  rt_csr_of views a chunk's arrays (to read;
 * rt_csr_mut to write), pinned as rt_chunk_data pins. */
typedef struct RtCsr {
	int64_t nrow, ncol, nnz;
	int64_t *rowptr, *col;
	void *val;
} RtCsr;

size_t rt_csr_bytes(TrtDtype dt, int64_t nrow, int64_t nnz);
Chunk *rt_csr_new(TrtDtype dt, int64_t nrow, int64_t ncol, int64_t nnz);
RtCsr rt_csr_of(const Chunk *c, TrtDtype dt);
RtCsr rt_csr_mut(const Chunk *c, TrtDtype dt);
/* The rows and columns of key's chunk in a sparse relation of type t. */
void rt_csr_dims(const TrtType *t, const int64_t *key, int64_t *nrow, int64_t *ncol);

/* A class of dims' placement by block (rel.c; trt_balance fills it):
 * block b of every relation partitioned on a dim whose type names map id
 * (TrtType.map) alone lives on site[b].  weight[b] is the work
 * trt_balance counted for the block. */
enum { RT_MAXMAPS = 8 };
typedef struct RtSiteMap {
	int id;
	int64_t extent, block, nblock;
	int *site;
	double *weight;
	double *elems;                  /* per block: the sparse inputs' stored elements */
	double hash_max, max, avg;      /* per-rank weight: the busiest by block
	                                 * modulo ranks, by the map; the average */
	char what[128];                 /* what was counted, for --profile */
	int by_plan;                    /* weighed by the plan's flops (else an element, a line each) */
} RtSiteMap;

/* Map id (1..RT_MAXMAPS; NULL for another) made, with create, for a dim of
 * that extent and block, each block on block modulo ranks until placed. */
RtSiteMap *rt_site_map(int id, int64_t extent, int64_t block, int create);
int rt_site_maps(RtSiteMap **maps);
extern int rt_placement_hash;   /* --placement=hash (sparse.c) */
extern int rt_no_overlap;       /* --no-overlap (twophase.c) */
extern double rt_sparse_excess; /* bytes of sparse inputs beyond the plan's estimate, this rank */

/* ---- prefault.c: new chunk memory faulted in on an idle core ---- */

/* Hands the thread the new range p .. p+len to fault in ahead of the rank:
 * 1 if it took it, 0 if the caller is to (too small, no idle core). */
int rt_prefault(void *p, size_t len);
void rt_prefault_forget(void *p, size_t len);  /* before p .. p+len is cached or unmapped */
void rt_prefault_end(void);

/* ---- store.c: chunks in memory or on disk under the budget ---- */

void *rt_store_pin(const Chunk *c, int write);  /* rt_chunk_data/mut under a budget */
size_t rt_pin_mark(void);                       /* a pin scope's start */
void rt_pin_release(size_t mark);               /* unpins what was pinned since mark */
/* c resident and pinned until rt_chunk_unhold, whatever the scope (a
 * message in flight): its data. */
void *rt_chunk_hold(const Chunk *c, int write);
void rt_chunk_unhold(const Chunk *c);
/* An op's access stream: the chunk cells (addresses of chunk pointers, a
 * pointer NULL while its chunk is not made yet) it will touch, in order;
 * the store takes the array.  rt_stream_at(p): positions before p are
 * done, p is next.  Evictions then follow the stream, and the chunks at
 * its next positions are read ahead.  One stream at a time; the op's end
 * ends it. */
void rt_stream_begin(Chunk ***cell, int64_t n);
void rt_stream_at(int64_t p);
void rt_stream_end(void);
double rt_store_when(const Chunk *c);           /* the next use the store sees */
/* rel.c's and the op brackets' hooks */
void rt_store_reserve(size_t nbytes);
void rt_store_add(Chunk *c);
void rt_store_drop(Chunk *c);
void rt_store_note(TrtRel *r, Chunk *c);
void rt_store_rel_new(TrtRel *r);
void rt_store_rel_free(TrtRel *r);
void rt_store_op(int op);
void rt_store_op_end(void);
void rt_store_loop_begin(int64_t count);
void rt_store_loop_iter(int64_t i);
void rt_store_loop_end(void);

/* ---- spill.c: the spill file and its I/O thread ---- */

/* --mem-budget SIZE, --spill-dir DIR at argv[*a]: 1 and msg "" if taken, 1
 * and the error line in msg if malformed, 0 if not one. */
int rt_spill_arg(int argc, char **argv, int *a, char *msg, size_t len);
void rt_spill_help(void);
void rt_spill_init(void);               /* collective: TRAC_MEM_BUDGET, the folder, the file */
void rt_spill_finish(void);
const char *rt_spill_start(double budget, char *msg, size_t len);      /* guard.c's budget */
const char *rt_spill_dir(void);
int64_t rt_spill_alloc(size_t n);       /* an extent of the file: its offset */
void rt_spill_free(int64_t off, size_t n);
double rt_spill_file_bytes(void);       /* bytes of extents in use */
IoReq *rt_io_start(int write, char *buf, size_t n, int64_t off, int urgent);
int rt_io_writes(const IoReq *q);
int rt_io_done(IoReq *q);
void rt_io_wait(IoReq *q);
void rt_io_end(IoReq *q);               /* counts, traces, frees; a failure ends the job */

/* ---- sparse.c ---- */

/* Key's block of a sparse relation of type t, from its dense chunk (row-major
 * over the chunk dims in chunk order): a new sparse chunk of its nonzero
 * elements, or NULL when it has none.  rt_csr_expand is the way back. */
Chunk *rt_csr_compress(const TrtType *t, const int64_t *key, const void *dense);
void rt_csr_expand(const TrtType *t, const int64_t *key, const Chunk *sparse, void *dense);
/* A relation of sparse type t from dense r (of t's shapes), which it frees:
 * each chunk compressed, the all-zero ones dropped. */
TrtRel *rt_sparse_of(TrtRel *r, const TrtType *t);
/* Element idx (an index per key dim into the tensor) as a position in
 * key's chunk (row * ncol + col of its compressed rows), and back. */
int64_t rt_csr_cell(const TrtType *t, const int64_t *key, const int64_t *idx);
void rt_csr_index(const TrtType *t, const int64_t *key, int64_t cell, int64_t *idx);
/* element e is 0 (inline: read loops test every element) */
static inline int rt_elem_zero(TrtDtype dt, const void *v, int64_t e)
{
	switch (dt) {
	case TRT_F32: return ((const float *)v)[e] == 0;
	case TRT_F64: return ((const double *)v)[e] == 0;
	case TRT_I32: return ((const int32_t *)v)[e] == 0;
	case TRT_I64: return ((const int64_t *)v)[e] == 0;
	}
	rt_bug("bad dtype %d", (int)dt);
}
Chunk *rt_csr_like(const Chunk *c, TrtDtype from, TrtDtype dt);        /* same positions, values unset */
Chunk *rt_chunk_dense(const TrtType *t, const int64_t *key, const Chunk *c);  /* a dense copy */

/* Where the chunk of a key sits in its tensor (row-major over the key
 * dims): per key dim its first index and length, and its runs, the longest
 * pieces of the chunk contiguous in the tensor: nrun of run elements each,
 * in tensor order.  When identity is set (chunk dims in key-dim order) the
 * chunk's data is its runs one after the other; otherwise it is their
 * transpose (rt_gather). */
typedef struct RtBlock {
	int64_t start[TRT_MAXDIM], cnt[TRT_MAXDIM];
	int64_t tstride[TRT_MAXDIM];    /* the tensor's row-major strides */
	int identity;
	int d0;                         /* runs span key dims d0.. */
	int64_t run, nrun;
} RtBlock;

void rt_block_of(const TrtType *t, const int64_t *key, RtBlock *b);
int64_t rt_block_run(const TrtType *t, const RtBlock *b, int64_t i);
void rt_block_to_chunk(const TrtType *t, const RtBlock *b, void *dst, const void *src);
void rt_gather(void *dst, const void *src, int nd, const int64_t *n, const int64_t *stride,
               size_t es);

/* An open-addressing hash index from the keys of a relation's tuples to
 * their positions; it stores positions only, so the relation may grow. */
typedef struct KeyIndex {
	int64_t cap, n;
	int64_t *slot;                  /* position + 1, or 0 when empty */
} KeyIndex;

void rt_index_init(KeyIndex *ix);
int64_t rt_index_find(const KeyIndex *ix, const TrtRel *r, const int64_t *key);
void rt_index_add(KeyIndex *ix, const TrtRel *r, int64_t pos);
void rt_index_free(KeyIndex *ix);

/* ---- param.c ---- */

/* The stream of tensor name under seed, and its elements g .. g+n-1 as
 * initialiser kind(a, b) makes them, into out in type dt. */
uint64_t rt_init_stream(uint64_t seed, const char *name);
void rt_init_values(TrtInit kind, double a, double b, uint64_t stream, uint64_t g, int64_t n,
                    TrtDtype dt, void *out);
/* Which copy of its loops rt_init_values runs (RtFillCopy): -1 until it
 * asks the CPU (rt_fill_widest, the widest it has); the unit test sets
 * each the CPU has, to compare them. */
typedef enum { RT_FILL_PLAIN, RT_FILL_AVX2, RT_FILL_AVX512 } RtFillCopy;
extern int rt_fill_wide;
int rt_fill_widest(void);

/* ---- vmath.c ---- */

/* Whether trt_expf and the others run SLEEF's FMA family (the CPU has AVX2
 * and FMA) rather than the one without FMA. */
int rt_vmath_fma(void);

/* ---- comm.c ---- */

/* Largest element count one MPI call may carry; INT_MAX except in tests,
 * which lower it to exercise the large-message paths on small data. */
extern int64_t rt_msg_limit;
void rt_send_bytes(const void *buf, size_t n, int dest, int tag);
void rt_recv_bytes(void *buf, size_t n, int src, int tag);

/* ---- npy.c ---- */

#define NPY_MAXDIM 64             /* numpy 2's limit; more is a malformed header */

typedef struct NpyHeader {
	int major, minor;
	char descr[32];                 /* as written, e.g. "<f4" */
	int fortran;
	int rank;
	int64_t shape[NPY_MAXDIM];
	int64_t data_offset;            /* bytes before the data */
} NpyHeader;

int rt_npy_parse(const unsigned char *buf, size_t n, NpyHeader *h,
                 char *why, size_t whylen);
int rt_npy_check(const NpyHeader *h, const TrtTensor *t, int64_t filesize,
                 char *why, size_t whylen);
size_t rt_npy_head_len(const unsigned char *head, size_t n);
int rt_open_input(const TrtTensor *t, const char *path, int64_t *size, char *msg, size_t msglen);
int rt_npy_open(const TrtTensor *t, const char *path, NpyHeader *h,
                char *msg, size_t msglen);
const char *rt_errstr(int e);
/* "prog: input A (a.npy): why", the one line of a bad file */
void rt_tensor_msg(char *msg, size_t len, const TrtTensor *t, const char *path, const char *why);
size_t rt_npy_header(const TrtTensor *t, char *buf, size_t buflen);
size_t rt_npy_header_of(const char *descr, int rank, const int64_t *shape, char *buf, size_t buflen);
void rt_shape_str(char *buf, size_t len, int rank, const int64_t *shape);
/* The program's tensor `tensor`, checked against relation type t. */
const TrtTensor *rt_tensor_of(int tensor, const TrtType *t);
/* "prog: input A: no file given (add A=path.npy)" */
const char *rt_no_path(const TrtTensor *x, char *msg, size_t len);

/* ---- read.c ---- */

/* A tensor stored in global C order at data_offset of fd: each rank reads
 * the chunks placement p gives it (NULL and errno on failure, this rank
 * alone). */
TrtRel *rt_read_rel(int fd, int64_t data_offset, const TrtType *t, TrtPlace p);
/* Calls io(file, buf, bytes, offset) for each run of block b (data at
 * data_offset of the file), buf walking through the dense sub-block in
 * file order; 0 on the first failure.  rt_io_read is a pread of fd *file. */
int rt_each_run(const TrtType *t, const RtBlock *b, char *buf, int64_t data_offset,
                int (*io)(void *, char *, size_t, int64_t), void *file);
int rt_io_read(void *file, char *buf, size_t n, int64_t off);
/* A preadv (or, with write set, pwritev) of all the bytes of iov[0..n) at
 * off, retrying short transfers; 0 (errno set) on failure. */
int rt_pv_full(int fd, struct iovec *iov, int n, int64_t off, int write);

/* Reads (or writes) gathered into one preadv (pwritev) while they follow
 * each other in the file: at most RT_MAX_IOV buffers (or the system's
 * IOV_MAX).  flush(ctx, ...), when set, moves each batch instead of a
 * preadv (write.c's writes). */
enum { RT_MAX_IOV = 1024 };
typedef struct RtBatch {
	struct iovec iov[RT_MAX_IOV];
	int n, max;
	int64_t off, end;       /* the file's bytes [off, end) */
	int fd, ok;             /* ok: 0 (errno set) after a failure */
	int (*flush)(void *ctx, struct iovec *iov, int n, int64_t off);
	void *ctx;
} RtBatch;

void rt_batch_init(RtBatch *bt, int fd, int (*flush)(void *, struct iovec *, int, int64_t), void *ctx);
/* len bytes of the file at off into buf (or out of it), now or with the
 * next ones. */
void rt_batch_add(RtBatch *bt, int64_t off, char *buf, size_t len);
void rt_batch_flush(RtBatch *bt);
/* preadvs the reads have made (the tests count them) */
extern int64_t rt_read_calls;
/* output chunks made in place of an input's (local.c; the tests count them) */
extern int64_t rt_in_place;

/* ---- write.c ---- */

/* Rank 0 writes r at data_offset of fd, receiving the chunks others hold
 * (collective; 0, or an errno on rank 0). */
int rt_write_rel(int fd, int64_t data_offset, const TrtRel *r);
/* The temporary file beside path (.NAME.XXXXXX, open(2)'s mode), known
 * until it is renamed (rt_rename_durable) or removed (rt_remove_temp);
 * rt_remove_temps removes the ones still known (a signal's handler). */
int rt_make_temp(const char *path, char **tmpname);
int rt_rename_durable(const char *tmp, const char *path);   /* rename, then fsync the directory */
void rt_remove_temp(const char *tmp);
void rt_remove_temps(void);

/* ---- zip.c ---- */

/* A member of a zip, as its central directory lists it. */
typedef struct RtZipEntry {
	char name[64];                  /* "" when longer: none we look for */
	int flags, method;
	uint32_t crc;
	uint64_t csize, usize, local;   /* local: its local header's offset */
} RtZipEntry;

typedef struct RtZip {
	int fd;
	int64_t size;
	int64_t n;
	RtZipEntry *m;
} RtZip;

/* Reads the central directory of the zip in fd (size bytes): 1, or 0 and
 * why ("not a .npz (zip) file", "truncated zip file: ...", ...). */
int rt_zip_open(RtZip *z, int fd, int64_t size, char *why, size_t len);
void rt_zip_close(RtZip *z);
const RtZipEntry *rt_zip_find(const RtZip *z, const char *name);   /* or NULL */
int rt_zip_magic(const unsigned char *head, size_t n);  /* a file starting so is a zip */

/* A member holding a .npy array, opened: its header parsed, its bytes
 * read forward (a deflated one inflated as they are needed). */
typedef struct RtZipArr {
	struct RtZipStream *s;          /* zip.c's */
	char name[64];
	int64_t size;                   /* the member's bytes, uncompressed */
	NpyHeader h;
	size_t es;                      /* element size, once checked */
} RtZipArr;

int rt_arr_open(const RtZip *z, const char *name, RtZipArr *a, char *why, size_t len);
void rt_arr_close(RtZipArr *a);         /* also of one that did not open */
/* Checks that a holds n elements of dtype dt in one dimension. */
int rt_arr_check(RtZipArr *a, TrtDtype dt, int64_t n, char *why, size_t len);
/* Bytes [off, off + n) of the member (0 and why on failure). */
int rt_arr_read(RtZipArr *a, int64_t off, void *buf, size_t n, char *why, size_t len);
/* Elements first .. first+count-1 of a checked array: an index array's as
 * int64s, any array's as they are. */
int rt_arr_ints(RtZipArr *a, int64_t first, int64_t count, int64_t *out, char *why, size_t len);
int rt_arr_vals(RtZipArr *a, int64_t first, int64_t count, void *out, char *why, size_t len);
/* Deflated members inflated again from their start (a read before the
 * bytes read last): npz.c's readers go forward, so tests expect none. */
extern int64_t rt_npz_rewinds;
/* Collective: the deflated members of arrays a[0 .. n) (opened by every
 * rank, from one file) that are read whole, inflated once among the ranks
 * and broadcast (x and path name them in an error). */
void rt_arr_share(RtZipArr *const *a, int n, const TrtTensor *x, const char *path);
/* Bytes of deflated members inflated whole (a member's header is read
 * without: rt_npz_block_counts inflates indptr alone). */
extern int64_t rt_npz_inflated;

/* A zip written front to back into fd, its members stored.  err keeps the
 * first errno; zip64 asks for zip64 records even where none is needed. */
typedef struct RtZipOut {
	int fd, err, zip64;
	int64_t at;                     /* bytes so far */
	int n;
	struct {
		const char *name;
		uint32_t crc;
		int64_t size, off;
	} m[8];
} RtZipOut;

/* A member holding a .npy array: its header, then nbytes of data. */
void rt_zip_put_array(RtZipOut *zo, const char *name, const char *descr, int rank,
                      const int64_t *shape, const void *data, size_t nbytes);
/* A member holding the int64s a[0..n) as int32s (narrow) or int64s. */
void rt_zip_put_ints(RtZipOut *zo, const char *name, int narrow, const int64_t *a, int64_t n);
void rt_zip_finish(RtZipOut *zo);       /* the central directory, after the last member */

/* ---- npz.c ---- */

/* Stored elements per block along a csr's rows or a csc's columns (count[]
 * has the frontier's length): the dim, or -1 (coo, or unreadable). */
int rt_npz_block_counts(const TrtTensor *x, const char *path, const TrtType *t, double *count);
/* Whether trt_read should read path as a .npz: its name says so, or it
 * starts as a zip file does. */
int rt_npz_wanted(const char *path);
/* trt_read from a scipy.sparse .npz (collective; ends the job on a bad file). */
TrtRel *rt_npz_read(const TrtTensor *x, const char *path, const TrtType *t, TrtPlace p);
/* Writes sparse matrix r into fd (rank 0's) as a scipy csr .npz; collective:
 * rank 0 gathers the tuples.  Returns 0, or on rank 0 the first errno. */
int rt_npz_write(int fd, const TrtRel *r);
/* Tests set it to write zip64 records and int64 indices, as for a huge matrix. */
extern int rt_npz_big;

/* ---- checkpoint.c ---- */

/* A checkpoint option at argv[*a] (consuming its value): 1 and msg "" if
 * taken, 1 and the error line in msg if malformed, 0 if not one. */
int rt_ckpt_arg(int argc, char **argv, int *a, char *msg, size_t len);
void rt_ckpt_help(void);
void rt_ckpt_init(void);                /* collective: checks --resume's file, --checkpoint's folder */
const char *rt_ckpt_resume(void);       /* --resume's file, or NULL */

/* ---- guard.c ---- */

void rt_mem_check(void);                /* collective: refuse a plan that cannot fit */
void rt_oom(size_t nbytes, const char *what) __attribute__((noreturn));
double rt_proc_status(const char *field);       /* /proc/self/status's VmRSS, VmHWM: bytes, or -1 */

/* ---- blas.c ---- */

void rt_blas_init(void);
const char *rt_blas_arch(void);
int rt_blas_threads(void);
/* The BLIS rntm_t* a gemm of m x n x k is to run with (NULL: BLIS's
 * defaults), bcols when B is by columns and C by rows: calibrate
 * measures through it. */
void *rt_gemm_rntm(int64_t m, int64_t n, int64_t k, int bcols);
/* Whether a gemm of m x n x k with B by columns and C by rows copies B by
 * rows first (a small B under a tall C). */
int rt_gemm_by_rows(int64_t m, int64_t n, int64_t k);

/* ---- ist.c ---- */

/* --ist-log=FILE at argv[*a]: 1 and msg "" if taken, msg set on a bad value. */
int rt_ist_arg(int argc, char **argv, int *a, char *msg, size_t len);
void rt_ist_help(void);

/* ---- profile.c ---- */

void rt_profile_init(void);
void rt_profile_report(void);
void rt_count_sent(double bytes);
void rt_count_recv(double bytes);
void rt_count_keys(double bytes);       /* key bytes, already counted in sent */
void rt_count_buf(double bytes);        /* + when a buffer is allocated, - freed */

/* ---- trace.c ---- */

/* --trace=FILE: a timeline of spans, each a stretch of time on this rank.
 * Op spans come from trt_op_begin/end and repeat blocks' from
 * trt_loop_begin/iter/end; the others are recorded where they happen:
 *
 *     int64_t t0 = rt_span_begin();
 *     MPI_Send(...);
 *     if (t0)
 *             rt_trace_span(RT_SPAN_SEND, t0, dest, bytes, 0, NULL);
 *
 * so that without --trace a span costs a test of rt.trace at each end. */
typedef enum {
	RT_SPAN_SEND,           /* bytes to rank peer (or posted to it); what: "keys", ... */
	RT_SPAN_RECV,           /* bytes from rank peer (or a receive posted) */
	RT_SPAN_WAIT,           /* blocked in MPI until what ("counts", "chunks", ...) */
	RT_SPAN_READ,           /* tensor n read from its file: bytes this rank read */
	RT_SPAN_WRITE,          /* tensor n written to its file (rank 0): bytes */
	RT_SPAN_INIT,           /* param n initialised: bytes this rank made */
	RT_SPAN_CHECKPOINT,     /* the params written to the file what */
	RT_SPAN_SPILL_WRITE,    /* chunks written to the spill file: bytes (the I/O thread's lane) */
	RT_SPAN_SPILL_READ,     /* chunks read back from it: bytes (likewise) */
} RtSpan;

/* --trace at argv[*a] (consuming its value): 1 and msg "" if taken, 1 and
 * the error line in msg if malformed, 0 if not one. */
int rt_trace_arg(int argc, char **argv, int *a, char *msg, size_t len);
void rt_trace_help(void);
void rt_trace_init(void);               /* collective: the file, the common start */
void rt_trace_write(void);              /* collective, at trt_finish */
int64_t rt_trace_clock(void);           /* nanoseconds, never 0 */
void rt_trace_span(RtSpan kind, int64_t t0, int peer, double bytes, int64_t n, const char *what);
double rt_trace_bytes(const TrtRel *r);        /* the bytes in r's chunks here */
void rt_trace_op_begin(int op);
void rt_trace_op_end(int op);
void rt_trace_loop_begin(int64_t count);
void rt_trace_loop_iter(int64_t i);
void rt_trace_loop_end(void);
/* A spill write or read the I/O thread made from t0 to t1 (its own lane). */
void rt_trace_io(int write, int64_t t0, int64_t t1, double bytes);

/* The start of a span: the clock with --trace, else 0 without reading it. */
static inline int64_t rt_span_begin(void)
{
	return rt.trace ? rt_trace_clock() : 0;
}

#endif
