/*
 * machine.c: the machine model the cost model predicts seconds with.
 *
 * Every collective is `latency + bytes / bandwidth`, bytes being what one
 * rank sends (bench/calibrate's convention); kernels run at a gemm rate
 * that depends on the block size, or at the generated loops' rate.  The
 * constants built in here (measured on the development machine, one node,
 * shared-memory MPI) are the reference model the tests plan with; host.c
 * derives a model for the machine trac runs on from it, and either can be
 * replaced by bench/calibrate's output:
 *
 *   mpirun -np 4 bench/calibrate > machine.model
 *   trac --machine machine.model ...        (or TRAC_MACHINE=machine.model)
 *
 * Keys read (others are ignored, so newer calibrate files still load):
 *
 *   bcast_latency_s, bcast_bandwidth_Bps        and likewise for allgatherv,
 *   alltoallv, allreduce, reduce_scatter;  memcpy_bandwidth_Bps;
 *   file_read_bandwidth_Bps (what one rank reads of an input's file, into
 *   new memory), file_write_bandwidth_Bps (rank 0 writing an output);
 *   first_touch_cold_bandwidth_Bps (memory new to the process: the
 *   kernel's, and on a virtual machine the host's, first touch);
 *   init_uniform_per_s, init_normal_per_s (the initialisers' values);
 *   loop_rate_flops, conv_rate_flops (a convolution's direct loop);
 *   conv_short_element_s (a multiply-add of a convolution along rows
 *   shorter than its register tiles: kernelcost.c's cost_conv; 0, the built-in
 *   model's: the loop rate's);
 *   gemm_f32_gflops_bB, gemm_f64_gflops_bB (by block B); gemm_stream_aliased_Bps
 *   (a thin gemm streaming an operand it reuses little whose rows are a
 *   multiple of 4 KiB apart: kernelcost.c's kernel_rate); gemm_pack_a_Bps,
 *   gemm_pack_b_Bps (BLIS packing an A or a B it reuses little, beyond what
 *   a cube of the volume packs; the built-in model has them 0: free);
 *   gemm_accumulate_c_Bps (a call's C read again where its k goes over
 *   chunks or looped calls: kernel_rate; the quick calibration's memcpy
 *   rate, 0 in the built-in model: free);
 *   scatter_row_s (what a scatter-add's row costs beyond its bytes: cost.c's
 *   cost_scatter); slice_row_s (a row of a window a slice copies, beyond its
 *   bytes: cost.c's cost_slice; the built-in model has it 0: free);
 *   sparse_element_s (the least a kernel over sparse inputs takes per stored
 *   element it visits: kernelcost.c's cost_join and cost_map; 0, the built-in
 *   model's: its flops alone);
 *   row_reduce_element_s (an element of a reduction along
 *   its input's contiguous rows: kernelcost.c's cost_map; 0, the built-in
 *   model's: the loop rate's); npz_element_s, npz_inflate_Bps, npz_zlib_Bps (a
 *   sparse input read from a scipy .npz: each stored element a rank keeps,
 *   and the bytes its deflated members inflate to, whole by libdeflate or
 *   streamed by zlib: cost.c's cost_read_seconds; the built-in model has
 *   them 0: free; without npz_zlib_Bps zlib's members take npz_inflate_Bps);
 *   cache_per_rank_bytes (the cache a rank has: its L2 and its share of
 *   the L3; an op whose bytes are more streams them through memory:
 *   plancost.c's op_floor, kernelcost.c's cost_join); cache_l2_bytes (a
 *   core's L2: the A operands of a join's BLIS calls, when more than it
 *   holds, are packed at memcpy's rate, kernelcost.c's cost_join; 0 or
 *   absent, cache_per_rank_bytes); cache_l1_bytes (a
 *   core's L1 data cache: a sparse kernel's gathers of rows from a dense
 *   chunk bigger than half of it cost their cache lines at
 *   sparse_gather_Bps, else at memcpy's rate: kernelcost.c's sparse_work;
 *   the built-in model has it 0: free);
 *   call_overhead_s, op_overhead_s, local_op_overhead_s;
 *   trac_shuffle_bandwidth_Bps, trac_bcast_bandwidth_Bps: the runtime's own
 *   exchanges, which shuffles and broadcasts are costed with when given
 *   (else alltoallv's and allgatherv's);  mem_per_rank_bytes.
 */
#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/opt.h"

static const char *coll_key[NCOLL] = {"bcast", "allgatherv", "alltoallv", "allreduce", "reduce_scatter"};

void machine_default(Machine *m)
{
	static const int blocks[] = {32, 64, 128, 256, 512, 1024, 2048, 4096};
	/* GFLOP/s of one BLIS thread by block: small blocks pay the packing */
	static const double f32[] = {4, 10, 20, 27, 31, 33, 34, 34};
	static const double f64[] = {2, 5, 10, 13.5, 15.5, 16.5, 17, 17};
	memset(m, 0, sizeof *m);
	for (int c = 0; c < NCOLL; c++) {
		m->latency[c] = 2e-6;
		m->bandwidth[c] = 2e9;
	}
	m->bandwidth[COLL_BCAST] = 4e9;
	/* an allreduce or a reduce-scatter costs 2-3 sends here */
	m->bandwidth[COLL_ALLREDUCE] = 1e9;
	m->bandwidth[COLL_REDUCE_SCATTER] = 8e8;
	m->memcpy_bw = 3e9;
	m->read_bw = 3e9;               /* a .npy from the page cache, 64 MB in 0.012-0.021 s */
	m->write_bw = 6e8;              /* with the fsync trt_write does */
	m->touch_bw = 2e9;
	m->uniform_rate = 7e8;          /* bench/README.md "Start-up", at the best run */
	m->normal_rate = 3e8;
	m->loop_rate = 8e8;
	m->gemm_alias_bw = 1.8e9;       /* bench/README.md "Thin gemms" */
	m->conv_rate = 2e10;            /* calibrate: 3.2e10 on a chunk in cache; conv3d whole, 1.1e10 at load 4-6 */
	m->ngemm = (int)(sizeof blocks / sizeof *blocks);
	for (int i = 0; i < m->ngemm; i++) {
		m->gemm_block[i] = blocks[i];
		m->gemm_rate[0][i] = f32[i] * 1e9;
		m->gemm_rate[1][i] = f64[i] * 1e9;
	}
	m->call_overhead = 2e-6;
	m->op_overhead = 2e-5;
	m->local_op_overhead = 3e-6;
	m->mem_per_rank = 0;
	m->cache_per_rank = 17 << 20;   /* a Zen 4's 1 MiB L2 and half its 32 MiB L3 */
	snprintf(m->source, sizeof m->source, "built-in");
}

/* Insert or replace a gemm rate measured at block b. */
static void set_gemm(Machine *m, int which, int b, double rate)
{
	int i = 0;
	while (i < m->ngemm && m->gemm_block[i] < b)
		i++;
	if (i < m->ngemm && m->gemm_block[i] == b) {
		m->gemm_rate[which][i] = rate;
		return;
	}
	if (m->ngemm == MAXGEMM)
		return;
	memmove(&m->gemm_block[i + 1], &m->gemm_block[i], (size_t)(m->ngemm - i) * sizeof m->gemm_block[0]);
	for (int w = 0; w < 2; w++)
		memmove(&m->gemm_rate[w][i + 1], &m->gemm_rate[w][i], (size_t)(m->ngemm - i) * sizeof m->gemm_rate[w][0]);
	m->ngemm++;
	m->gemm_block[i] = b;
	/* the other precision at this block: interpolated from its neighbours */
	int o = 1 - which;
	double lo = i > 0 ? m->gemm_rate[o][i - 1] : (i + 1 < m->ngemm ? m->gemm_rate[o][i + 1] : rate);
	double hi = i + 1 < m->ngemm ? m->gemm_rate[o][i + 1] : lo;
	m->gemm_rate[o][i] = (lo + hi) / 2;
	m->gemm_rate[which][i] = rate;
}

/* The keys that set one number: where it goes (an offset in Machine, or
 * for the runtime's own exchanges one of two locals), and whether 0 is a
 * value. */
typedef struct Scalar {
	const char *key;
	bool field;                     /* at: an offset in Machine; else 0 shuffle, 1 bcast */
	size_t at;
	bool zero_ok;
} Scalar;

#define FIELD(k, f, z) {k, true, offsetof(Machine, f), z}
static const Scalar scalars[] = {
	FIELD("memcpy_bandwidth_Bps", memcpy_bw, false),
	FIELD("file_read_bandwidth_Bps", read_bw, false),
	FIELD("file_write_bandwidth_Bps", write_bw, false),
	FIELD("file_read_call_s", read_call, true),
	FIELD("file_write_latency_s", write_latency, true),
	FIELD("first_touch_cold_bandwidth_Bps", touch_bw, false),
	FIELD("init_uniform_per_s", uniform_rate, false),
	FIELD("init_normal_per_s", normal_rate, false),
	FIELD("loop_rate_flops", loop_rate, false),
	FIELD("conv_rate_flops", conv_rate, false),
	FIELD("conv_short_element_s", conv_short, true),
	FIELD("gemm_stream_aliased_Bps", gemm_alias_bw, false),
	FIELD("gemm_pack_a_Bps", gemm_pack_a_bw, true),
	FIELD("gemm_pack_b_Bps", gemm_pack_b_bw, true),
	FIELD("gemm_accumulate_c_Bps", gemm_accum_bw, true),
	FIELD("scatter_row_s", scatter_row, true),
	FIELD("row_reduce_element_s", row_reduce, true),
	FIELD("slice_row_s", slice_row, true),
	FIELD("sparse_element_s", sparse_elem, true),
	FIELD("sparse_gather_Bps", sparse_gather_bw, true),
	FIELD("npz_element_s", npz_elem, true),
	FIELD("npz_inflate_Bps", inflate_bw, true),
	FIELD("npz_zlib_Bps", zlib_bw, true),
	FIELD("call_overhead_s", call_overhead, true),
	FIELD("op_overhead_s", op_overhead, true),
	FIELD("local_op_overhead_s", local_op_overhead, true),
	FIELD("mem_per_rank_bytes", mem_per_rank, true),
	FIELD("cache_per_rank_bytes", cache_per_rank, true),
	FIELD("cache_l2_bytes", cache_l2, true),
	FIELD("cache_l1_bytes", cache_l1, true),
	{"trac_shuffle_bandwidth_Bps", false, 0, false},
	{"trac_bcast_bandwidth_Bps", false, 1, false},
};
#undef FIELD

/* A gemm rate a file gives: f32 (0) or f64 (1), block, flop/s. */
typedef struct GemmGiven {
	int which, block;
	double rate;
} GemmGiven;

/* The file's rates merged in (set_gemm), then every block it does not
 * give dropped. */
static void set_gemm_table(Machine *m, const GemmGiven *given, int ngiven)
{
	for (int g = 0; g < ngiven; g++)
		set_gemm(m, given[g].which, given[g].block, given[g].rate);
	int kept = 0;
	for (int i = 0; i < m->ngemm; i++) {
		bool keep = false;
		for (int g = 0; g < ngiven && !keep; g++)
			keep = given[g].block == m->gemm_block[i];
		if (!keep)
			continue;
		m->gemm_block[kept] = m->gemm_block[i];
		m->gemm_rate[0][kept] = m->gemm_rate[0][i];
		m->gemm_rate[1][kept] = m->gemm_rate[1][i];
		kept++;
	}
	m->ngemm = kept;
}

bool machine_load(Machine *m, const char *path, Buf *err)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		buf_printf(err, "cannot read machine model '%s': %s", path, strerror(errno));
		return false;
	}
	char line[512];
	int lineno = 0, ngiven = 0;
	bool ok = true;
	GemmGiven given[2 * MAXGEMM];
	double trac_shuffle = 0, trac_bcast = 0;
	while (ok && fgets(line, sizeof line, f)) {
		lineno++;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '#' || *s == '\n' || !*s)
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			buf_printf(err, "%s:%d: expected key=value", path, lineno);
			ok = false;
			break;
		}
		*eq = 0;
		char *key = s, *val = eq + 1, *end;
		for (char *t = eq - 1; t >= key && (*t == ' ' || *t == '\t'); t--)
			*t = 0;
		errno = 0;
		double v = strtod(val, &end);
		bool num = end != val && !errno;
		while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
			end++;
		num &= !*end;
		bool known = false;
		for (int c = 0; c < NCOLL; c++) {
			size_t n = strlen(coll_key[c]);
			if (strncmp(key, coll_key[c], n) || key[n] != '_')
				continue;
			if (!strcmp(key + n, "_latency_s")) {
				known = true;
				if (num && v >= 0)
					m->latency[c] = v;
				else
					ok = false;
			} else if (!strcmp(key + n, "_bandwidth_Bps")) {
				known = true;
				if (num && v > 0)
					m->bandwidth[c] = v;
				else
					ok = false;
			}
		}
		int b;
		char prec[8];
		const Scalar *sc = NULL;
		for (size_t i = 0; !known && i < sizeof scalars / sizeof *scalars; i++)
			if (!strcmp(key, scalars[i].key))
				sc = &scalars[i];
		if (known) {
		} else if (sc) {
			known = true;
			ok = num && (sc->zero_ok ? v >= 0 : v > 0);
			if (ok)
				*(sc->field ? (double *)((char *)m + sc->at) : sc->at ? &trac_bcast : &trac_shuffle) = v;
		} else if (sscanf(key, "gemm_%3[f0-9]_gflops_b%d", prec, &b) == 2 && b > 0 &&
		           (!strcmp(prec, "f32") || !strcmp(prec, "f64"))) {
			known = true;
			ok = num && v > 0;
			if (ok && ngiven < 2 * MAXGEMM)
				given[ngiven++] = (GemmGiven){!strcmp(prec, "f64"), b, v * 1e9};
		}
		if (known && !ok)
			buf_printf(err, "%s:%d: '%s' needs a positive number", path, lineno, key);
	}
	fclose(f);
	/* A file's gemm rates replace the built-in table whole: a built-in
	 * block beyond the file's (4096, 34 GFLOP/s on an older machine) would
	 * otherwise stand between its largest block and the flat beyond.  A
	 * precision the file leaves out at a block is interpolated from the
	 * built-in neighbours as the block goes in (set_gemm). */
	if (ok && ngiven > 0)
		set_gemm_table(m, given, ngiven);
	/* the runtime's own exchanges, measured, over the MPI collectives */
	if (trac_shuffle > 0)
		m->bandwidth[COLL_ALLTOALL] = trac_shuffle;
	if (trac_bcast > 0)
		m->bandwidth[COLL_ALLGATHER] = trac_bcast;
	if (ok)
		snprintf(m->source, sizeof m->source, "%s", path);
	return ok;
}

/* Every key machine_load reads, with its value: a file that loads back
 * into the same model (host.c's cache). */
void machine_write(FILE *f, const Machine *m)
{
	for (int c = 0; c < NCOLL; c++) {
		fprintf(f, "%s_latency_s=%.17g\n", coll_key[c], m->latency[c]);
		fprintf(f, "%s_bandwidth_Bps=%.17g\n", coll_key[c], m->bandwidth[c]);
	}
	for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
		if (scalars[i].field)
			fprintf(f, "%s=%.17g\n", scalars[i].key, *(const double *)((const char *)m + scalars[i].at));
	for (int i = 0; i < m->ngemm; i++) {
		fprintf(f, "gemm_f32_gflops_b%d=%.17g\n", m->gemm_block[i], m->gemm_rate[0][i] / 1e9);
		fprintf(f, "gemm_f64_gflops_b%d=%.17g\n", m->gemm_block[i], m->gemm_rate[1][i] / 1e9);
	}
}

double machine_coll(const Machine *m, Coll c, double bytes)
{
	return m->latency[c] + bytes / m->bandwidth[c];
}

/* Linear in log(block) between the measured blocks; flat outside. */
double machine_gemm_rate(const Machine *m, DType t, double b)
{
	int w = t == DT_F64;
	if (m->ngemm == 0)
		return 1e10;
	if (b <= m->gemm_block[0])
		return m->gemm_rate[w][0] * (b >= 1 ? b / m->gemm_block[0] : 1.0 / m->gemm_block[0]);
	for (int i = 1; i < m->ngemm; i++)
		if (b <= m->gemm_block[i]) {
			double x = (log(b) - log(m->gemm_block[i - 1])) / (log(m->gemm_block[i]) - log(m->gemm_block[i - 1]));
			return m->gemm_rate[w][i - 1] + x * (m->gemm_rate[w][i] - m->gemm_rate[w][i - 1]);
		}
	return m->gemm_rate[w][m->ngemm - 1];
}
