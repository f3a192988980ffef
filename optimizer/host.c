/*
 * host.c: the machine trac runs on, and the model trac derives for it.
 *
 * An installed trac with no model file (trac(1), --machine) costs plans
 * with a model of the machine it runs on: what the machine says about
 * itself (host_probe: /proc/cpuinfo's model name, clock and flags, the
 * online CPUs, /sys's cache sizes, the memory) turns the reference model's
 * gemm table into this machine's (machine_derive: the peak of one core
 * from its vector width and FMA, times the reference's fraction of peak at
 * each block), and the quick calibration (runtime/quickcal.c, a few
 * seconds the first time) measures what flags cannot tell: gemm through
 * the runtime's BLIS path, memory bandwidth, first touch, the loops.  Its
 * result is cached (host_cache_path) for the CPU it was measured on: a
 * cache whose CPU model, core count or format differs is measured again.
 *
 * Everything here but host_probe and the cache's file system calls is a
 * function of its arguments (tests/unit/test_host.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "optimizer/opt.h"

/* The cache's format: a cache of another version is measured again (2:
 * the file read into memory touched already; 3: zlib's inflating; 4: the
 * write's latency a small file's; 5: written over a small file, not the
 * 16 MiB one; 6: zlib's inflating beside libdeflate's; 7: a scatter's row
 * at its cost since gather.c's radix order; 8: the conv rate from the
 * measured gemm rate, host_after_quick; the least of five of the
 * computations, the gemm products in rounds; each write over a file of
 * its own size; 9: a convolution's short rows, conv_short_element_s; 10:
 * gemm_accumulate_c_Bps; 11: a scatter's row at its cost since gather.c
 * adds a rank's own pieces where they lie; 12: a slice's row since
 * slice.c's offset tables). */
#define CACHE_VERSION 12

/* What a scatter-add's row costs, seconds, at the 2.25 GHz of the AMD
 * EPYC of bench/README.md (the clock the constants below are at too):
 * examples/transe.tra's six scatters on 2 ranks, B = 8192 and 32768, on
 * the 2.6 GHz Zen 4, three runs each, took 0.084-0.087 us a row there,
 * 0.10 at 2.25 GHz, since runtime/gather.c adds a rank's own pieces where
 * they lie and sums them on the vector units (0.15 us a row there before,
 * 0.5-0.6 before its radix order).  At B = 131072, an op's pieces (19 MB)
 * beyond a rank's share of the L3, a row costs 0.10-0.12 us there (0.13-
 * 0.15 before). */
#define SCATTER_ROW_S 1.0e-7
#define SCATTER_ROW_HZ 2.25e9

/* A sparse input from a scipy .npz on the same EPYC (examples/gcn_sparse.tra,
 * V = 8000, 2 ranks, read A's seconds under --profile, 3 runs at load 1.5):
 * 5.3 ms with 123k elements a rank, 24.4 ms with 614k, the members stored:
 * 39 ns an element kept.  Deflated members are inflated whole by
 * libdeflate (runtime/zip.c): the GCN benchmark's 9.9 MB indices.npy in
 * 19.7 ms and data.npy in 12.3 ms, 6.2e8 bytes a second with the CRC (zlib
 * took 2.2-2.7e8, the rate of a member over 256 MiB and of every member
 * under a memory budget; the quick calibration measures both). */
#define NPZ_ELEM_S 3.9e-8
#define NPZ_INFLATE_BPS 6e8
#define NPZ_ZLIB_BPS 2.5e8

/* A reduction along its input's contiguous rows (max[c] and sum[c] of
 * attention's softmax): the generated loop takes the output's rows in
 * tiles, strided by the row, at 0.76-0.86 ns an element alone (512 x 512
 * chunks, sum and max) and 1.06 ns in examples/attention.tra at T = 4096
 * (8.9 ms for 8.4M elements a rank, load 1.5), where the loop rate says
 * 0.13. */
#define ROW_REDUCE_S 1.0e-9

/* A row of a window trt_slice copies (runtime/slice.c: an output chunk
 * that one input chunk serves is copied as loops over offset tables, the
 * rows along the last dim but one innermost, a row of 8 bytes one load
 * and store), beyond its bytes at the memcpy rate: cnn.tra at N = 1024 on
 * 2 ranks (--profile, five runs, 2026-11-30, the 2.44 GHz Zen 3), its
 * pooling windows' slices of 73.7k rows of 2 floats 0.26-0.31 ms a call
 * and their adjoints' scatters of 147k rows 0.37-0.69 ms, 1.5-2.8 ns a
 * row, 2.5 at 2.25 GHz.  (A row's offset summed over its dims a row: 8-10
 * ns on the Zen 4, 17 on the Zen 3; found and copied one by one before
 * that: 28-45 ns.) */
#define SLICE_ROW_S 2.5e-9

/* A multiply-add of a convolution along input rows shorter than its
 * register tiles (codegen/conv.c: 8-wide vectors and what they leave, the
 * window's offsets from a table per row), on the 2.6 GHz Zen 4:
 * examples/cnn.tra at N = 1024 on 2 ranks (--profile, 12 x 12 images,
 * 2.65M multiply-adds a rank a call), the forward conv 0.56 ns and dK's
 * 0.45, where the loop rate priced 0.15 (cnn's predicted seconds 0.6-0.75
 * of its run); 0.58 ns at 2.25 GHz. */
#define CONV_SHORT_S 5.8e-10

/* A stored element a kernel over sparse inputs visits, at least (whatever
 * its flops), beyond the dense rows it gathers from beyond the L1 (cost.c's
 * sparse_work), on the 2.6 GHz Zen 4 with the count given (--nnz; CPU
 * seconds per op, 2 ranks): examples/mf_sparse.tra at M = 3000, N = 2000,
 * 300k elements a rank, 1.5 ns an element for its elementwise products,
 * 1.7 for its products with V (16 floats a row, one vector); gcn_sparse.tra
 * at V = 8000, its products with H1 W2 in rows of 4 and 7 floats (a loop
 * shorter than a vector) 4.3-5.1 ns.  2.5 ns there, between them; 2.9 at
 * 2.25 GHz.  (It was 40 ns, fitted to mf_sparse planned with 16 elements
 * a row where its ratings hold 200: with the count given, that put
 * mf_sparse at 11x its run and led gcn_sparse to a plan 1.45x slower.) */
#define SPARSE_ELEM_S 2.9e-9

/* The reference model's f32 gemm rate at its largest block as a fraction
 * of its machine's peak (BLIS on AVX2 cores reaches 0.85-0.95 of it). */
#define REF_PEAK_FRACTION 0.9

/* A direct convolution's loop (codegen/conv.c's register tiles) as a
 * fraction of the f32 gemm rate at the largest block the quick
 * calibration times: both are bound by the FMA units, so this one
 * measurement carries over where a peak from flags does not (a Zen 4
 * splits an AVX-512 FMA into two 256-bit halves: its flags say 166
 * GFLOP/s a core at 2.6 GHz, 0.53 of which put conv3d's kernel at 88,
 * where it ran at 39-40 on 2 ranks, 0.38 of the quick calibration's
 * 105 at b1024; bench/calibrate's full model had 42.8 against 86.3,
 * 0.50; the reference model 20 against 33, 0.61). */
#define CONV_GEMM_FRACTION 0.45

/* The value of "key<spaces>: value" at line, or NULL. */
static const char *field(const char *line, const char *key, size_t *len)
{
	size_t n = strlen(key);
	if (strncmp(line, key, n) || (line[n] != ' ' && line[n] != '\t' && line[n] != ':'))
		return NULL;
	const char *s = line + n;
	while (*s == ' ' || *s == '\t')
		s++;
	if (*s != ':')
		return NULL;
	s++;
	while (*s == ' ' || *s == '\t')
		s++;
	const char *e = strchr(s, '\n');
	*len = e ? (size_t)(e - s) : strlen(s);
	while (*len && (s[*len - 1] == ' ' || s[*len - 1] == '\t' || s[*len - 1] == '\r'))
		(*len)--;
	return s;
}

/* Whether the space-separated list s (len bytes) holds word. */
static bool has_word(const char *s, size_t len, const char *word)
{
	size_t n = strlen(word);
	for (size_t i = 0; i + n <= len; i++)
		if ((i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t') && !strncmp(s + i, word, n) &&
		    (i + n == len || s[i + n] == ' ' || s[i + n] == '\t'))
			return true;
	return false;
}

void host_parse_cpuinfo(const char *text, HostInfo *h)
{
	int procs = 0;
	bool model = false, clock = false, flags = false;
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t len;
		const char *v;
		if ((v = field(line, "processor", &len)))
			procs++;
		else if (!model && (v = field(line, "model name", &len))) {
			model = true;
			if (len >= sizeof h->cpu)
				len = sizeof h->cpu - 1;
			memcpy(h->cpu, v, len);
			h->cpu[len] = 0;
		} else if (!clock && (v = field(line, "cpu MHz", &len))) {
			double mhz = strtod(v, NULL);
			clock = mhz > 0;
			if (clock)
				h->hz = mhz * 1e6;
		} else if (!flags && (v = field(line, "flags", &len))) {
			flags = true;
			h->vector_bits = has_word(v, len, "avx512f") ? 512 : has_word(v, len, "avx") ? 256 : 128;
			h->fma = has_word(v, len, "fma");
		}
	}
	if (procs > 0)
		h->cores = procs;
}

/* A /sys cache size: "32K", "16384K", "1M". */
static int64_t cache_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	int64_t scale = *end == 'K' ? 1024 : *end == 'M' ? 1 << 20 : *end == 'G' ? 1 << 30 : 1;
	return v > 0 ? (int64_t)v * scale : 0;
}

/* The first line of a small file, without its newline; false when absent. */
static bool read_line(const char *path, char *buf, size_t n)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	bool ok = fgets(buf, (int)n, f) != NULL;
	fclose(f);
	buf[strcspn(buf, "\n")] = 0;
	return ok;
}

/* The caches cpu0 sees, from /sys (sysconf's L3 on a virtual machine can
 * be the host's: 256 MiB here where the guest has 16). */
static void probe_caches(HostInfo *h)
{
	for (int i = 0; i < 8; i++) {
		char path[96], level[16], type[32], size[32];
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
		if (!read_line(path, level, sizeof level))
			break;
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
		if (!read_line(path, type, sizeof type) || !strcmp(type, "Instruction"))
			continue;
		snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		if (!read_line(path, size, sizeof size))
			continue;
		int64_t *at = !strcmp(level, "1") ? &h->l1d : !strcmp(level, "2") ? &h->l2 : !strcmp(level, "3") ? &h->l3 : NULL;
		if (at)
			*at = cache_bytes(size);
	}
#ifdef _SC_LEVEL1_DCACHE_SIZE
	if (!h->l1d)
		h->l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE) > 0 ? sysconf(_SC_LEVEL1_DCACHE_SIZE) : 0;
	if (!h->l2)
		h->l2 = sysconf(_SC_LEVEL2_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL2_CACHE_SIZE) : 0;
	if (!h->l3)
		h->l3 = sysconf(_SC_LEVEL3_CACHE_SIZE) > 0 ? sysconf(_SC_LEVEL3_CACHE_SIZE) : 0;
#endif
}

void host_probe(HostInfo *h)
{
	memset(h, 0, sizeof *h);
	h->vector_bits = 128;           /* x86-64's SSE2, when nothing says more */
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (f) {
		Buf b = {0};
		char chunk[4096];
		size_t n;
		while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
			buf_printf(&b, "%.*s", (int)n, chunk);
		fclose(f);
		if (b.s)
			host_parse_cpuinfo(b.s, h);
		free(b.s);
	}
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	if (online > 0)
		h->cores = (int)online;
	if (h->cores < 1)
		h->cores = 1;
	if (!*h->cpu)
		snprintf(h->cpu, sizeof h->cpu, "unknown");
	probe_caches(h);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	h->mem_bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
}

double host_peak_flops(const HostInfo *h, DType t)
{
	double lanes = h->vector_bits / (t == DT_F64 ? 64.0 : 32.0);
	/* two FMA pipes of 2 flops each, or an add and a multiply pipe */
	double per_lane = h->fma ? 4 : 2;
	/* a clock /proc/cpuinfo does not give: 2.5 GHz, a server core's */
	double hz = h->hz > 0 ? h->hz : 2.5e9;
	return lanes * per_lane * hz;
}

void machine_derive(Machine *m, const HostInfo *h)
{
	machine_default(m);
	for (int w = 0; w < 2; w++) {
		double top = m->gemm_rate[w][m->ngemm - 1];
		double peak = host_peak_flops(h, w ? DT_F64 : DT_F32) * REF_PEAK_FRACTION;
		for (int i = 0; i < m->ngemm; i++)
			m->gemm_rate[w][i] *= peak / top;
	}
	/* the reference's direct convolution ran at 0.53 of its f32 peak */
	m->conv_rate = 0.53 * host_peak_flops(h, DT_F32);
	/* a scatter-add's row (trt_scatter packs, sorts and sums each on its
	 * own), which the reference model has free: SCATTER_ROW_S on the
	 * EPYC at SCATTER_ROW_HZ, by this one's clock */
	double clock = SCATTER_ROW_HZ / (h->hz > 0 ? h->hz : 2.5e9);
	m->scatter_row = SCATTER_ROW_S * clock;
	/* likewise a .npz's elements and inflating, free in the reference,
	 * and a reduction along rows, the reference's at the loop rate */
	m->npz_elem = NPZ_ELEM_S * clock;
	m->row_reduce = ROW_REDUCE_S * clock;
	m->slice_row = SLICE_ROW_S * clock;
	m->conv_short = CONV_SHORT_S * clock;
	m->sparse_elem = SPARSE_ELEM_S * clock;
	m->inflate_bw = NPZ_INFLATE_BPS / clock;
	m->zlib_bw = NPZ_ZLIB_BPS / clock;
	/* a rank's cache: its core's L2 and its share of the L3 (a rank a
	 * core, as mpirun places them) */
	if (h->l2 > 0 || h->l3 > 0)
		m->cache_per_rank = (double)h->l2 + (double)h->l3 / h->cores;
	m->cache_l2 = (double)h->l2;
	m->cache_l1 = (double)h->l1d;
	snprintf(m->source, sizeof m->source, "derived from this machine (%s, %d cores, %d-bit vectors%s)", h->cpu,
	         h->cores, h->vector_bits, h->fma ? ", FMA" : "");
}

void host_after_quick(Machine *m)
{
	m->conv_rate = CONV_GEMM_FRACTION * m->gemm_rate[0][m->ngemm - 1];
	m->gemm_accum_bw = m->memcpy_bw;    /* kernelcost.c's kernel_rate: a C added into */
}

char *host_cache_path(void)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	if (xdg && *xdg == '/')
		return xprintf("%s/trac/machine", xdg);
	if (home && *home)
		return xprintf("%s/.cache/trac/machine", home);
	return NULL;
}

bool host_cache_load(Machine *m, const char *path, const HostInfo *h, Buf *why)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		buf_printf(why, "%s", errno == ENOENT ? "no cache yet" : strerror(errno));
		return false;
	}
	char line[512], cpu[sizeof h->cpu] = "";
	int version = 0, cores = 0;
	while (fgets(line, sizeof line, f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, "host_cpu=", 9))
			snprintf(cpu, sizeof cpu, "%.*s", (int)sizeof cpu - 1, line + 9);
		else if (!strncmp(line, "host_cores=", 11))
			cores = atoi(line + 11);
		else if (!strncmp(line, "host_model_version=", 19))
			version = atoi(line + 19);
	}
	fclose(f);
	if (version != CACHE_VERSION) {
		buf_printf(why, "the cache's format is %d, this trac's %d", version, CACHE_VERSION);
		return false;
	}
	if (strcmp(cpu, h->cpu) || cores != h->cores) {
		buf_printf(why, "the cache is of another machine (%s, %d cores)", cpu, cores);
		return false;
	}
	Machine got = *m;
	if (!machine_load(&got, path, why))
		return false;
	*m = got;
	return true;
}

bool host_make_parent(const char *path)
{
	char *dir = xstrdup(path);
	bool ok = true;
	for (char *s = strchr(dir + 1, '/'); ok && s; s = strchr(s + 1, '/')) {
		*s = 0;
		ok = mkdir(dir, 0755) == 0 || errno == EEXIST;
		*s = '/';
	}
	free(dir);
	return ok;
}

bool host_cache_save(const char *path, const Machine *m, const HostInfo *h)
{
	if (!host_make_parent(path))
		return false;
	char *tmp = xprintf("%s.XXXXXX", path);
	int fd = mkstemp(tmp);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	bool ok = f != NULL;
	if (ok) {
		fprintf(f, "# trac's model of this machine: derived from its CPU and measured by its quick\n"
		        "# calibration (trac(1), FILES); delete this file to measure again\n");
		fprintf(f, "host_model_version=%d\nhost_cpu=%s\nhost_cores=%d\n", CACHE_VERSION, h->cpu, h->cores);
		fprintf(f, "host_vector_bits=%d\nhost_fma=%d\nhost_hz=%.6g\n", h->vector_bits, h->fma, h->hz);
		fprintf(f, "host_l1d_bytes=%lld\nhost_l2_bytes=%lld\nhost_l3_bytes=%lld\nhost_mem_bytes=%.6g\n",
		        (long long)h->l1d, (long long)h->l2, (long long)h->l3, h->mem_bytes);
		machine_write(f, m);
		ok = !ferror(f);
		ok = fclose(f) == 0 && ok;
	} else if (fd >= 0) {
		close(fd);
	}
	ok = ok && rename(tmp, path) == 0;
	if (!ok && fd >= 0)
		remove(tmp);
	free(tmp);
	return ok;
}
