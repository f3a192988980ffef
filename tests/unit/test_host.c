/*
 * test_host.c: the model of the machine trac runs on (optimizer/host.c).
 * /proc/cpuinfo's text parsed (x86 with AVX2 and FMA, AVX-512, SSE only,
 * a text without flags), the peak of one core from vector width, FMA and
 * clock, the derived model's gemm table scaled to that peak, its conv rate
 * from the quick calibration's gemm rate, and the quick
 * calibration's cache: written and read back to the same model, refused
 * when the CPU, the core count or the format differ, missing, and its path
 * from XDG_CACHE_HOME or HOME.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "optimizer/opt.h"

/* Two processors of an AMD EPYC (Zen 2) under KVM, as /proc/cpuinfo shows them. */
static const char epyc[] =
	"processor\t: 0\n"
	"vendor_id\t: AuthenticAMD\n"
	"cpu family\t: 23\n"
	"model\t\t: 49\n"
	"model name\t: AMD EPYC\n"
	"cpu MHz\t\t: 2245.784\n"
	"cache size\t: 512 KB\n"
	"flags\t\t: fpu vme de pse sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 bmi2\n"
	"\n"
	"processor\t: 1\n"
	"vendor_id\t: AuthenticAMD\n"
	"model name\t: AMD EPYC\n"
	"cpu MHz\t\t: 2245.784\n"
	"flags\t\t: fpu vme de pse sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 bmi2\n";

static void cpuinfo_avx2(void **state)
{
	(void)state;
	HostInfo h = {0};
	host_parse_cpuinfo(epyc, &h);
	assert_string_equal(h.cpu, "AMD EPYC");
	assert_int_equal(h.cores, 2);
	assert_int_equal(h.vector_bits, 256);
	assert_true(h.fma);
	assert_true(fabs(h.hz - 2245.784e6) < 1);
}

static void cpuinfo_others(void **state)
{
	(void)state;
	HostInfo h = {0};
	host_parse_cpuinfo("processor : 0\nmodel name : Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz\n"
	                   "cpu MHz : 2400.000\nflags : sse2 avx avx2 fma avx512f avx512dq\n", &h);
	assert_string_equal(h.cpu, "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz");
	assert_int_equal(h.vector_bits, 512);
	assert_true(h.fma);
	/* avx512dq is not avx512f; "fma4" or "xfma" are not fma */
	host_parse_cpuinfo("processor : 0\nflags : sse2 avx512dq fma4 xfma\n", &h);
	assert_int_equal(h.vector_bits, 128);
	assert_false(h.fma);
	/* no flags, no model name: what h had stays */
	HostInfo k = {.cores = 3, .vector_bits = 128, .cpu = "kept"};
	host_parse_cpuinfo("Processor : ARMv7\nBogoMIPS : 38.40\n", &k);
	assert_int_equal(k.cores, 3);
	assert_string_equal(k.cpu, "kept");
}

static void peaks(void **state)
{
	(void)state;
	HostInfo h = {.vector_bits = 256, .fma = true, .hz = 2e9};
	/* 8 lanes x 2 FMA pipes x 2 flops x 2 GHz */
	assert_true(fabs(host_peak_flops(&h, DT_F32) - 64e9) < 1);
	assert_true(fabs(host_peak_flops(&h, DT_F64) - 32e9) < 1);
	h.vector_bits = 512;
	assert_true(fabs(host_peak_flops(&h, DT_F32) - 128e9) < 1);
	h = (HostInfo){.vector_bits = 128, .fma = false, .hz = 3e9};
	assert_true(fabs(host_peak_flops(&h, DT_F32) - 24e9) < 1);
	/* the derived model's largest block runs at 0.9 of the peak, the
	 * smaller ones in the reference's proportion */
	Machine ref, m;
	machine_default(&ref);
	h = (HostInfo){.cpu = "x", .cores = 2, .vector_bits = 256, .fma = true, .hz = 2e9};
	machine_derive(&m, &h);
	assert_int_equal(m.ngemm, ref.ngemm);
	assert_true(fabs(m.gemm_rate[0][m.ngemm - 1] - 0.9 * 64e9) < 1);
	assert_true(fabs(m.gemm_rate[1][m.ngemm - 1] - 0.9 * 32e9) < 1);
	assert_true(fabs(m.gemm_rate[0][0] / m.gemm_rate[0][m.ngemm - 1] -
	                 ref.gemm_rate[0][0] / ref.gemm_rate[0][ref.ngemm - 1]) < 1e-12);
	assert_non_null(strstr(m.source, "derived"));
	/* a scatter's row, free in the built-in model, costs this machine
	 * what it cost the 2.25 GHz EPYC measured, by the clock */
	assert_true(ref.scatter_row == 0 && fabs(m.scatter_row - 1.0e-7 * 2.25 / 2) < 1e-15);
	/* likewise a .npz's element, and its inflating until calibrated */
	assert_true(ref.row_reduce == 0 && fabs(m.row_reduce - 1e-9 * 2.25 / 2) < 1e-18);
	/* and a slice's row (trt_slice finding and copying it) */
	assert_true(ref.slice_row == 0 && fabs(m.slice_row - 2.5e-9 * 2.25 / 2) < 1e-18);
	/* and a convolution's multiply-add along rows shorter than a tile */
	assert_true(ref.conv_short == 0 && fabs(m.conv_short - 5.8e-10 * 2.25 / 2) < 1e-18);
	assert_true(ref.sparse_elem == 0 && fabs(m.sparse_elem - 2.9e-9 * 2.25 / 2) < 1e-18);
	assert_true(ref.npz_elem == 0 && fabs(m.npz_elem - 3.9e-8 * 2.25 / 2) < 1e-18);
	assert_true(ref.inflate_bw == 0 && fabs(m.inflate_bw - 6e8 * 2 / 2.25) < 1e-3);
	assert_true(ref.zlib_bw == 0 && fabs(m.zlib_bw - 2.5e8 * 2 / 2.25) < 1e-3);
	/* twice the vector width, twice the rates */
	Machine w;
	h.vector_bits = 512;
	machine_derive(&w, &h);
	assert_true(fabs(w.gemm_rate[0][3] - 2 * m.gemm_rate[0][3]) < 1);
	/* a rank's cache: its core's L2 and its share of the L3; the
	 * reference's when the machine does not say */
	assert_true(m.cache_per_rank == ref.cache_per_rank && ref.cache_per_rank == 17 << 20);
	h.l2 = 2 << 20;
	h.l3 = 64 << 20;
	h.cores = 8;
	machine_derive(&w, &h);
	assert_true(w.cache_per_rank == (2 << 20) + (8 << 20));
	/* after the quick calibration, a convolution's loop runs at 0.45 of
	 * the measured f32 gemm rate at the largest block, whatever the
	 * flags said (a Zen 4's 512-bit FMA is two 256-bit halves) */
	double before = w.conv_rate;
	w.gemm_rate[0][w.ngemm - 1] = 105e9;
	w.gemm_rate[1][w.ngemm - 1] = 52e9;
	host_after_quick(&w);
	assert_true(fabs(w.conv_rate - 0.45 * 105e9) < 1 && w.conv_rate < before);
}

static char dir[64];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof dir, "/tmp/test_host.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	return system(cmd);
}

static void cache_round_trip(void **state)
{
	(void)state;
	HostInfo h = {.cpu = "AMD EPYC", .cores = 2, .vector_bits = 256, .fma = true, .hz = 2.2e9, .l3 = 16 << 20};
	Machine m, got;
	machine_derive(&m, &h);
	m.memcpy_bw = 7.25e9;
	m.bandwidth[COLL_ALLTOALL] = 1.5e9;
	m.gemm_rate[0][2] = 12.345e9;
	char *path = xprintf("%s/a/b/machine", dir);      /* folders made as needed */
	Buf why = {0};
	assert_false(host_cache_load(&got, path, &h, &why));
	assert_string_equal(why.s, "no cache yet");
	assert_true(host_cache_save(path, &m, &h));
	machine_default(&got);
	why.len = 0;
	assert_true(host_cache_load(&got, path, &h, &why));
	assert_true(got.memcpy_bw == m.memcpy_bw);
	assert_true(got.cache_per_rank == m.cache_per_rank && m.cache_per_rank == 8 << 20);  /* half the L3 */
	assert_true(got.bandwidth[COLL_ALLTOALL] == m.bandwidth[COLL_ALLTOALL]);
	assert_int_equal(got.ngemm, m.ngemm);
	for (int i = 0; i < m.ngemm; i++) {
		assert_int_equal(got.gemm_block[i], m.gemm_block[i]);
		assert_true(got.gemm_rate[0][i] == m.gemm_rate[0][i]);
		assert_true(got.gemm_rate[1][i] == m.gemm_rate[1][i]);
	}
	assert_true(got.conv_rate == m.conv_rate);
	/* no temporary file is left beside it */
	char *ls = xprintf("test $(ls '%s/a/b' | wc -l) = 1", dir);
	assert_int_equal(system(ls), 0);
	free(ls);

	/* another CPU, or the same with other cores: measured again, the
	 * model untouched */
	HostInfo other = h;
	snprintf(other.cpu, sizeof other.cpu, "Intel(R) Xeon(R)");
	machine_default(&got);
	why.len = 0;
	assert_false(host_cache_load(&got, path, &other, &why));
	assert_non_null(strstr(why.s, "another machine"));
	assert_true(got.memcpy_bw == 3e9);
	other = h;
	other.cores = 4;
	assert_false(host_cache_load(&got, path, &other, &why));
	/* a cache of another format */
	FILE *f = fopen(path, "w");
	fprintf(f, "host_model_version=0\nhost_cpu=AMD EPYC\nhost_cores=2\nmemcpy_bandwidth_Bps=1\n");
	fclose(f);
	why.len = 0;
	assert_false(host_cache_load(&got, path, &h, &why));
	assert_non_null(strstr(why.s, "format"));
	assert_true(got.memcpy_bw == 3e9);
	free(why.s);
	free(path);
}

static void cache_path(void **state)
{
	(void)state;
	setenv("XDG_CACHE_HOME", "/x/cache", 1);
	setenv("HOME", "/home/u", 1);
	char *p = host_cache_path();
	assert_string_equal(p, "/x/cache/trac/machine");
	free(p);
	setenv("XDG_CACHE_HOME", "relative", 1);        /* the XDG spec ignores a relative path */
	p = host_cache_path();
	assert_string_equal(p, "/home/u/.cache/trac/machine");
	free(p);
	unsetenv("XDG_CACHE_HOME");
	unsetenv("HOME");
	assert_null(host_cache_path());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cpuinfo_avx2),
		cmocka_unit_test(cpuinfo_others),
		cmocka_unit_test(peaks),
		cmocka_unit_test_setup_teardown(cache_round_trip, make_dir, remove_dir),
		cmocka_unit_test(cache_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
