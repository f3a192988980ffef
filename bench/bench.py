#!/usr/bin/python3
"""
bench.py: trac's runtime at hardware speed, measured side by side.

    make bench                          # everything (about 30 minutes)
    make bench BENCH='--quick'          # smaller sizes, 3 repetitions
    make bench BENCH='matmul1 pdgemm'   # only those sections
    make bench BENCH='--wait-quiet'     # wait for the load to drop before each section

Sections (bench/README.md has the targets and the results):

    matmul1   trac matmul on 1 rank vs bli_sgemm/bli_dgemm called directly
    pdgemm    trac matmul on 2 ranks vs ScaLAPACK pdgemm on 2 ranks
    scaling   trac matmul on 2 ranks vs 1 rank (parallel efficiency)
    einsum    MTTKRP, a matmul chain, the Tucker product, a batched matmul:
              trac on 2 ranks vs numpy (einsum optimize=True, or matmul)
    blocks    trac matmul on 1 rank by --block (what the optimizer should pick)
    vector    gcc -fopt-info-vec: the generated loop kernels vectorise
    vmath     exp over 16M floats: glibc, libmvec, SLEEF, trac, numpy; trac's map op
    kops      each kernel op's time per element against an add: ir.h's KOPS weights
    startup   params' random initial values and an .npy input at memory speed
    plantime  how long trac plans a 100-statement program and the paper's workloads
    scale     the paper's workloads and bench's programs planned for 16 to 1024
              ranks (--explain=json): predicted time, bytes sent, peak memory per rank
    calibrate bench/calibrate: the machine model's constants
    parity    whole processes: trac's matmul program vs bench/matmul_hand.c
    predict   the cost model's seconds against --profile's, op by op
    io        reads and writes of 32-324 MB on 1 and 2 ranks against the cost model
    roofline  the examples' ops (matmul, MNIST MLP, conv3d) against their floors
    overlap   a two-phase matmul on 2 ranks with its sends under the gemms vs
              --no-overlap, over shared memory and over TCP

Every comparison runs its contenders alternately, repetition by repetition,
in one session, and compares medians: the machine is shared and noisy, so a
single run proves nothing.  trac's time is the `compute_s` of --profile: the
wall time of the ops between reading the inputs and writing the outputs
(file I/O is not what the libraries it is compared with do either).  Every
trac run also checks the bytes each op sent against the plan's prediction.

Environment (from make): TRAC, MPICC, MPIRUN, PYTHON, BLIS_CFLAGS, BLIS_LIBS,
srcdir, builddir.  Work files go to $TRAC_BENCH_DIR (default
$builddir/bench-work): inputs are made once and kept.
"""
import json, os, re, shlex, shutil, statistics, subprocess, sys, time

SRC = os.path.abspath(os.environ.get("srcdir", os.path.dirname(os.path.abspath(__file__)) + "/.."))
BUILD = os.path.abspath(os.environ.get("builddir", "."))
TRAC = os.environ.get("TRAC", os.path.join(BUILD, "trac"))
MPICC = os.environ.get("MPICC", "mpicc")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
BLIS_CFLAGS = os.environ.get("BLIS_CFLAGS", "")
BLIS_LIBS = os.environ.get("BLIS_LIBS", "-lblis")
WORK = os.path.abspath(os.environ.get("TRAC_BENCH_DIR", os.path.join(BUILD, "bench-work")))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
OPENBLAS = LIBDIR + "/openblas-pthread"        # libopenblas0-pthread's libblas.so.3
BLISBLAS = LIBDIR + "/blis-openmp"             # libblis4-openmp's libblas.so.3

ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
ENV.pop("TRAC_PROFILE", None)

QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 5
for a in sys.argv[1:]:
    if a.startswith("--reps="):
        REPS = int(a[7:])
SECTIONS = [a for a in sys.argv[1:] if not a.startswith("--")]
ALL = ["calibrate", "vector", "vmath", "kops", "startup", "plantime", "scale", "matmul1", "blocks", "scaling", "pdgemm", "einsum",
       "parity", "predict", "io", "overlap", "roofline"]

LOG = []              # every line printed, for bench-work/results.txt
BYTES = []            # (workload, op, kind, chunks, keys, pred) from every trac run


def say(s=""):
    print(s, flush=True)
    LOG.append(s)


def med(v):
    return statistics.median(v) if v else float("nan")


def run(cmd, env=None, cwd=None, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env or ENV, cwd=cwd or WORK)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode,
                                                           p.stdout[-2000:], p.stderr[-2000:]))
    return p


def load():
    return os.getloadavg()[0]


# ---- building ----

def build_helpers():
    os.makedirs(WORK, exist_ok=True)
    flags = ["-O2", "-march=native"] + shlex.split(BLIS_CFLAGS)
    libs = shlex.split(BLIS_LIBS) + ["-lm"]
    # the runtime's headers beside the library they go with
    rtinc = os.path.join(BUILD, "runtime")
    if not os.path.exists(os.path.join(rtinc, "rt.h")):
        rtinc = os.path.join(SRC, "runtime")
    rt = ["-DWITH_TRACRT", "-I" + rtinc, os.path.join(BUILD, "runtime", "libtracrt.a")]
    for prog, extra in [("gemm_direct", []), ("matmul_hand", []), ("calibrate", rt)]:
        src = os.path.join(SRC, "bench", prog + ".c")
        run([MPICC, *flags, *extra[:2], src, *extra[2:], "-o", os.path.join(WORK, prog), *libs])
    have = os.path.exists(LIBDIR + "/libscalapack-openmpi.so")
    if have:
        run([MPICC, "-O2", os.path.join(SRC, "bench", "pdgemm.c"), "-o",
             os.path.join(WORK, "pdgemm"), "-lscalapack-openmpi"])
    return have


def compile_tra(src, name, ranks, defines=(), block=None):
    exe = os.path.join(WORK, name)
    cmd = [TRAC, "-P", str(ranks)]
    for d in defines:
        cmd += ["-D", d]
    if block:
        cmd += ["--block", str(block)]
    run(cmd + [src, "-o", exe])
    return exe


def make_inputs(name, arrays):
    """arrays: {tensor: (shape, dtype)}; files are made once, kept in WORK."""
    import numpy as np
    paths = {}
    for t, (shape, dt) in arrays.items():
        p = os.path.join(WORK, "%s-%s-%s-%s.npy" % (name, t, "x".join(map(str, shape)), dt))
        if not os.path.exists(p):
            rng = np.random.default_rng(sum(map(ord, name + t)))
            np.save(p, rng.random(shape, dtype=np.float32).astype({"f32": np.float32,
                                                                  "f64": np.float64}[dt]))
        paths[t] = p
    return paths


# ---- running ----

SUMMARY = re.compile(r"^summary: (.*)$", re.M)
BYTESLINE = re.compile(r"^bytes: op=(\d+) kind=(\S+) sent=(\S+) keys=(\S+) chunks=(\S+) pred=(\S+)$", re.M)


def run_trac(exe, ranks, inputs, workload=None):
    """One run; returns the profile's summary as a dict of floats/strings."""
    args = ["%s=%s" % (k, v) for k, v in inputs.items()]
    # the program's outputs go to WORK under their default names
    p = run([MPIRUN, "-np", str(ranks), "--bind-to", "none", exe, *args, "--profile"])
    m = SUMMARY.search(p.stdout)
    if not m:
        raise RuntimeError("no profile summary from %s:\n%s" % (exe, p.stdout[-3000:]))
    s = {}
    for kv in m.group(1).split():
        k, v = kv.split("=", 1)
        try:
            s[k] = float(v)
        except ValueError:
            s[k] = v
    s["bytes"] = [(int(a), b, float(c), float(d), float(e), float(f))
                  for a, b, c, d, e, f in BYTESLINE.findall(p.stdout)]
    s["text"] = p.stdout
    if workload:
        BYTES.append((workload, ranks, s["bytes"]))
    return s


def gemm_direct(dt, m, n, k):
    """(cold wall, warm wall, cold cpu, warm cpu) seconds of one bli_?gemm call"""
    p = run([os.path.join(WORK, "gemm_direct"), dt, str(m), str(n), str(k), "1"])
    return tuple(float(re.search(r"\b%s=(\S+)" % f, p.stdout).group(1))
                 for f in ("cold", "warm", "cold_cpu", "warm_cpu"))


def intel_avx512():
    """Whether the CPU is Intel's with AVX-512, where runtime/blas.c picks BLIS's skx kernels."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return False
    return "GenuineIntel" in info and re.search(r"\bavx512f\b", info) is not None


INTEL_AVX512 = intel_avx512()


def pdgemm(m, n, k, grid, nb, blas):
    env = dict(ENV, OMP_NUM_THREADS="1", BLIS_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    if blas == "blis":
        env.update(LD_LIBRARY_PATH=BLISBLAS)
        if INTEL_AVX512:                # runtime/blas.c's choice of kernels
            env.update(BLIS_ARCH_TYPE="0")
    else:
        env.pop("OPENBLAS_CORETYPE", None)
        env.update(LD_LIBRARY_PATH=OPENBLAS)
    p = run([MPIRUN, "-np", str(grid[0] * grid[1]), "--bind-to", "none",
             "-x", "LD_LIBRARY_PATH", "-x", "OMP_NUM_THREADS", "-x", "BLIS_NUM_THREADS",
             "-x", "OPENBLAS_NUM_THREADS",
             os.path.join(WORK, "pdgemm"), str(m), str(n), str(k), str(grid[0]), str(grid[1]),
             str(nb), "2"], env=env)
    last = p.stdout.strip().splitlines()[-1]              # the second call: warm
    return (float(re.search(r"seconds=(\S+)", last).group(1)),
            float(re.search(r"cpu=(\S+)", last).group(1)))


NUMPY = r"""
import sys, time, numpy as np
kind, reps = sys.argv[1], int(sys.argv[2])
x = [np.load(p) for p in sys.argv[3:]]
def einsum():
    return np.einsum(SPEC, *x, optimize=True)
def manual():
    return MANUAL
f = {"einsum": einsum, "manual": manual}[kind]
f()
for r in range(reps):
    t, c = time.perf_counter(), time.process_time()
    f()
    print("seconds=%.6f cpu=%.6f" % (time.perf_counter() - t, time.process_time() - c), flush=True)
"""


def numpy_time(spec, manual, paths, kind):
    """numpy on OpenBLAS with 2 threads: the median of 3 calls in one process."""
    env = dict(ENV, LD_LIBRARY_PATH=OPENBLAS, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
    env.pop("OPENBLAS_CORETYPE", None)      # let OpenBLAS pick its SkylakeX kernels
    code = NUMPY.replace("SPEC", repr(spec)).replace("MANUAL", manual)
    p = run([PYTHON, "-c", code, kind, "3", *paths], env=env)
    return (med([float(v) for v in re.findall(r"seconds=(\S+)", p.stdout)]),
            med([float(v) for v in re.findall(r"cpu=(\S+)", p.stdout)]))


def interleave(fns, reps=REPS):
    """Runs each function once per repetition, alternating; lists of results."""
    res = [[] for _ in fns]
    for r in range(reps):
        for i, f in enumerate(fns):
            res[i].append(f())
    return res


# ---- sections ----

def sec_calibrate():
    say("== calibrate: the machine model (bench/calibrate on 2 ranks)")
    p = run([MPIRUN, "-np", "2", "--bind-to", "none", os.path.join(WORK, "calibrate")]
            + (["--quick"] if QUICK else []))
    model = os.path.join(WORK, "machine.model")
    with open(model, "w") as f:
        f.write(p.stdout)
    for line in p.stdout.splitlines():
        say("  " + line)
    fitted = {}
    rate = conv_rate(model)
    if rate:
        fitted["conv_rate_flops"] = (rate, "the generated kernel, replacing calibrate's loop's")
    for key, v in io_rates(model).items():
        fitted[key] = (v, "trac's own %s op, replacing calibrate's" % ("write" if "write" in key else "read"))
    text = open(model).read()
    for key, (v, why) in fitted.items():
        text = re.sub(r"(?m)^%s=.*$" % key, "%s=%.4g" % (key, v), text)
        say("  %s=%.4g   (%s)" % (key, v, why))
    with open(model, "w") as f:
        f.write(text)
    say("  (written to %s)" % model)


def op_seconds(exe, args, env, kinds):
    """The seconds and predicted seconds of exe's ops of these kinds, REPS runs on 2 ranks
    (--profile): {kind: (seconds, predicted seconds)}."""
    out = {k: ([], []) for k in kinds}
    for _ in range(REPS):
        text = run([MPIRUN, "-np", "2", "--bind-to", "none", exe, *args, "--profile"], env=env).stdout
        for op, k, label, sec, pred in op_table(text):
            if k in out:
                out[k][0].append(sec)
                out[k][1].append(pred)
    return out


def model_value(model, key):
    """The machine model's value of key, or None."""
    for line in open(model):
        if line.startswith(key + "="):
            return float(line.split("=")[1])
    return None


def io_rates(model):
    """The disk's and the page cache's bytes per second as trac's own write and read ops meet
    them: bench/io.tra on 2 ranks, a 256 MiB input and output, each op's seconds (median of REPS)
    less what the cost model adds to its bytes (the write's latency and first stage's filling, the
    read's system calls: the op's predicted seconds less its bytes at calibrate's rate), so that
    the model, given these rates, predicts the ops' medians: {model key: rate}.  calibrate's own
    writes, back to back from one buffer, ran at 0.99 to 1.24 GB/s from one calibration to the next
    while trac's writes in the programs ran at 0.7 to 0.86; its reads, into memory it has just
    unmapped, at 1.43 GB/s while trac's, into memory new to a fresh process, ran at 1.07 to 1.29
    (bench/README.md, "Predicted against measured seconds")."""
    n = 4096 if QUICK else 16384
    exe = os.path.join(WORK, "io-rate")
    env = dict(ENV, TRAC_MACHINE=model)
    run([TRAC, "-P", "2", "-D", "N=%d" % n, os.path.join(SRC, "bench", "io.tra"), "-o", exe], env=env)
    x = make_inputs("io", {"X": ((n, 4096), "f32")})["X"]
    ops = op_seconds(exe, ["X=" + x, "Y=io-rate-Y.npy"], env, ["write", "read"])
    rates = {}
    # (op kind, model key, bytes the busiest rank moves, who moves them, what the model adds)
    for kind, key, b, who, what in [
            ("write", "file_write_bandwidth_Bps", n * 4096 * 4.0, "rank 0 writing it all", "latency and first stage"),
            ("read", "file_read_bandwidth_Bps", n * 4096 * 2.0, "each rank reading half", "system calls")]:
        secs, preds = ops[kind]
        bw = model_value(model, key)
        if len(secs) < REPS or not bw:
            say("  (no %s op measured: calibrate's %s kept)" % (kind, key))
            continue
        rest = max(0.0, preds[0] - b / bw)
        part = med(secs) - rest
        say("  # io.tra's %s on 2 ranks, %.0f MiB by the busiest (%s): %.4g s (median of %d; %.4g-%.4g), "
            "%.4g s of it the model's %s" % (kind, b / 2**20, who, med(secs), len(secs), min(secs), max(secs),
                                            rest, what))
        if part > 0:
            rates[key] = b / part
    return rates


def conv_rate(model):
    """The flop/s of the convolution kernel trac generates (codegen/conv.c), one rank's: calibrate's
    loop has constant bounds and a chunk in cache.  examples/conv3d.tra on 2 ranks (3 x 16 x 270 x
    480, ten 3x3x3 kernels; 135 x 240 output blocks), the conv op's seconds (median of 5) less what
    the cost model adds to its multiply-adds (its output's first touch, the op's overhead: the
    op's predicted seconds less its flops at the model's rate), so that the model, given this rate,
    predicts the op's median."""
    n = (3, 8, 136, 240) if QUICK else (3, 16, 270, 480)
    exe = os.path.join(WORK, "conv-rate")
    env = dict(ENV, TRAC_MACHINE=model)
    run([TRAC, "-P", "2", "-D", "T=%d" % n[1], "-D", "H=%d" % n[2], "-D", "W=%d" % n[3],
         os.path.join(SRC, "examples", "conv3d.tra"), "-o", exe], env=env)
    inputs = make_inputs("convrate", {"X": (n, "f32"), "K": ((10, 3, 3, 3, 3), "f32")})
    args = ["%s=%s" % (k, v) for k, v in inputs.items()] + ["Y=conv-rate-Y.npy"]
    secs, preds = op_seconds(exe, args, env, ["conv"])["conv"]
    rate = model_value(model, "conv_rate_flops")
    if len(secs) < REPS or not rate:
        say("  (no conv op measured: calibrate's conv_rate_flops kept)")
        return None
    out = 10 * (n[1] - 2) * (n[2] - 2) * (n[3] - 2)
    flops = 2.0 * out * 3 * 27 / 2                      # one rank's half
    rest = max(0.0, preds[0] - flops / rate)
    kernel = med(secs) - rest
    say("  # conv3d's conv op on 2 ranks: %.4g s (median of %d; %.4g-%.4g), %.4g s of it the model's "
        "first touch and overhead" % (med(secs), len(secs), min(secs), max(secs), rest))
    return flops / kernel if kernel > 0 else None


def matmul_inputs(dt, m, k, n):
    return make_inputs("mm", {"A": ((m, k), dt), "B": ((k, n), dt)})


def matmul_src(dt):
    return os.path.join(SRC, "examples/matmul.tra") if dt == "f32" else os.path.join(SRC, "bench/matmul64.tra")


def sec_matmul1():
    say("== matmul on 1 rank: trac vs bli_%sgemm called directly (target: speed ratio >= 0.95)"
        % "s/d")
    say("   speed ratio = direct seconds / trac seconds; direct 'cold' makes a new C, as trac does;")
    say("   'warm' calls again on the same C.  block: trac's --block (auto: the optimizer's choice)")
    say("   cpu: the same from CPU seconds (trac: compute_cpu_s), steadier when other jobs run")
    say("%-4s %5s %6s %9s %9s %9s %8s %8s %8s" % ("", "n", "block", "trac s", "cold s", "warm s",
                                                 "ratio", "ratio/w", "cpu"))
    sizes = [1000, 2000] if QUICK else [1000, 2000, 4000]
    for dt in ["f32", "f64"]:
        for n in sizes:
            paths = matmul_inputs(dt, n, n, n)
            for block in [None, n]:
                exe = compile_tra(matmul_src(dt), "mm1-%s-%d-%s" % (dt, n, block or "auto"), 1,
                                  ["I=%d" % n, "J=%d" % n, "K=%d" % n], block)
                t, d = interleave([lambda: run_trac(exe, 1, paths),
                                   lambda: gemm_direct(dt, n, n, n)])
                tt = med([x["compute_s"] for x in t])
                tc = med([x["compute_cpu_s"] for x in t])
                cold, warm, ccpu = (med([x[i] for x in d]) for i in (0, 1, 2))
                say("%-4s %5d %6s %9.4f %9.4f %9.4f %8.3f %8.3f %8.3f" % (
                    dt, n, block or "auto", tt, cold, warm, cold / tt, warm / tt, ccpu / tc))


def sec_blocks():
    say("== gemm by block size: trac matmul on 1 rank, n = 4000 f64 / f32, by --block")
    say("   (the optimizer's input: bigger blocks pack less often; see also calibrate's gemm_*)")
    n = 2000 if QUICK else 4000
    say("%-4s %6s %9s %8s %8s" % ("", "block", "trac s", "GFLOP/s", "per cpu s"))
    for dt in ["f32", "f64"]:
        paths = matmul_inputs(dt, n, n, n)
        blocks = [500, 1000, 2000, n] if n == 4000 else [500, 1000, n]
        exes = [compile_tra(matmul_src(dt), "mmb-%s-%d-%d" % (dt, n, b), 1,
                            ["I=%d" % n, "J=%d" % n, "K=%d" % n], b) for b in blocks]
        res = interleave([(lambda e=e: run_trac(e, 1, paths)) for e in exes])
        for b, r in zip(blocks, res):
            t, c = med([x["compute_s"] for x in r]), med([x["compute_cpu_s"] for x in r])
            say("%-4s %6d %9.4f %8.1f %8.1f" % (dt, b, t, 2.0 * n ** 3 / t / 1e9, 2.0 * n ** 3 / c / 1e9))


def sec_scaling():
    say("== matmul, 2 ranks vs 1 rank (target: parallel efficiency >= 0.9)")
    say("   efficiency = t(1 rank) / (2 t(2 ranks)); each planned for its rank count")
    say("   cpu: t and efficiency from CPU seconds (per rank), steadier when other jobs run")
    say("%-4s %5s %6s %9s %9s %8s %8s" % ("", "n", "block", "1 rank s", "2 ranks s", "effic.", "cpu"))
    n = 2000 if QUICK else 4000
    for dt in ["f64", "f32"]:
        paths = matmul_inputs(dt, n, n, n)
        for block in [None, n // 2]:
            e1 = compile_tra(matmul_src(dt), "sc1-%s-%d-%s" % (dt, n, block or "auto"), 1,
                             ["I=%d" % n, "J=%d" % n, "K=%d" % n], block)
            e2 = compile_tra(matmul_src(dt), "sc2-%s-%d-%s" % (dt, n, block or "auto"), 2,
                             ["I=%d" % n, "J=%d" % n, "K=%d" % n], block)
            r1, r2 = interleave([lambda: run_trac(e1, 1, paths),
                                 lambda: run_trac(e2, 2, paths, "matmul %s n=%d block=%s" %
                                                  (dt, n, block or "auto"))])
            t1, t2 = med([x["compute_s"] for x in r1]), med([x["compute_s"] for x in r2])
            c1, c2 = med([x["compute_cpu_s"] for x in r1]), med([x["compute_cpu_s"] for x in r2])
            say("%-4s %5d %6s %9.4f %9.4f %8.3f %8.3f" % (dt, n, block or "auto", t1, t2,
                                                         t1 / (2 * t2), c1 / (2 * c2)))


def sec_pdgemm(have):
    say("== matmul f64 on 2 ranks: trac vs ScaLAPACK pdgemm (target: time ratio <= 1.0)")
    if not have:
        say("   skipped: no ScaLAPACK (apt-get install libscalapack-openmpi-dev)")
        return
    say("   pdgemm: grids 1x2, 2x1, NB 64..256, BLAS = BLIS skx or OpenBLAS, each run once;")
    say("   the two fastest (by CPU time) run side by side with trac; the best median counts")
    say("   cpu: the ratio of the most CPU seconds a rank spent (pdgemm's best config by that)")
    say("%-15s %6s %9s %9s %-22s %8s %8s" % ("m x k x n", "block", "trac s", "pdgemm s", "(best config)",
                                            "ratio", "cpu"))
    shapes = [(2000, 2000, 2000)] if QUICK else [(2000, 2000, 2000), (4000, 4000, 4000),
                                                 (8000, 500, 8000)]
    for (m, k, n) in shapes:
        paths = make_inputs("mm", {"A": ((m, k), "f64"), "B": ((k, n), "f64")})
        configs = [(g, nb, blas) for g in [(1, 2), (2, 1)] for nb in [64, 128, 256]
                   for blas in ["blis", "openblas"]]
        if QUICK:
            configs = [(g, nb, blas) for g in [(1, 2), (2, 1)] for nb in [128, 256] for blas in ["blis"]]
        # screening: every config once; the two fastest then run side by side
        # with trac for all repetitions
        screen = sorted(((pdgemm(m, n, k, *c), c) for c in configs), key=lambda x: x[0][1])
        configs = [c for _, c in screen[:2]]
        blocks = [None] + ([] if QUICK else [max(m, n) // 2])
        exes = [compile_tra(matmul_src("f64"), "pd-%dx%dx%d-%s" % (m, k, n, b or "auto"), 2,
                            ["I=%d" % m, "K=%d" % k, "J=%d" % n], b) for b in blocks]
        fns = [(lambda e=e, b=b: run_trac(e, 2, paths, "matmul f64 %dx%dx%d block=%s" %
                                          (m, k, n, b or "auto")))
               for e, b in zip(exes, blocks)]
        fns += [(lambda c=c: pdgemm(m, n, k, c[0], c[1], c[2])) for c in configs]
        res = interleave(fns)
        pd = [(med([x[0] for x in r]), med([x[1] for x in r]), c) for r, c in zip(res[len(exes):], configs)]
        best, _, cfg = min(pd, key=lambda x: x[0])
        bestc = min(x[1] for x in pd)
        for b, r in zip(blocks, res[:len(exes)]):
            t, c = med([x["compute_s"] for x in r]), med([x["compute_cpu_s"] for x in r])
            say("%-15s %6s %9.4f %9.4f %-22s %8.3f %8.3f" % (
                "%dx%dx%d" % (m, k, n), b or "auto", t, best,
                "%dx%d NB=%d %s" % (cfg[0][0], cfg[0][1], cfg[1], cfg[2]), t / best, c / bestc))


EINSUM = [
    # name, .tra, {tensor: shape}, quick shape, einsum spec, numpy by hand
    ("mttkrp", "mttkrp.tra", dict(X=(600, 600, 600), B=(600, 32), C=(600, 32)),
     dict(X=(300, 300, 300), B=(300, 32), C=(300, 32)),
     "ijk,jr,kr->ir",
     "np.einsum('ijr,jr->ir', (x[0].reshape(-1, x[0].shape[2]) @ x[2]).reshape(x[0].shape[0], x[0].shape[1], -1), x[1])"),
    ("chain", "chain.tra", dict(A=(3000, 3000), B=(3000, 3000), C=(3000, 3000), D=(3000, 3000)),
     dict(A=(1500, 1500), B=(1500, 1500), C=(1500, 1500), D=(1500, 1500)),
     "ij,jk,kl,lm->im", "x[0] @ x[1] @ x[2] @ x[3]"),
    ("tucker", "tucker_staged.tra", dict(A=(96, 96), B=(96, 96), T=(96, 96, 96, 96), C=(96, 96), D=(96, 96)),
     dict(A=(64, 64), B=(64, 64), T=(64, 64, 64, 64), C=(64, 64), D=(64, 64)),
     "pi,qj,ijkl,rk,sl->pqrs",
     "np.einsum('pi,qj,ijkl,rk,sl->pqrs', *x, optimize=True)"),
    ("bmm", "bmm.tra", dict(X=(64, 512, 512), W=(64, 512, 512)),
     dict(X=(32, 256, 256), W=(32, 256, 256)),
     "bmk,bkn->bmn", "x[0] @ x[1]"),
]


def sec_einsum():
    say("== einsum workloads: trac on 2 ranks vs numpy on OpenBLAS, 2 threads (target: speed ratio >= 1.0)")
    say("   numpy: the faster of einsum(optimize=True) and a matmul formulation; ratio = numpy s / trac s")
    say("   cpu: numpy's CPU seconds / 2 threads over trac's most CPU seconds of a rank")
    say("%-8s %-34s %9s %9s %9s %8s %8s" % ("", "sizes", "trac s", "einsum s", "matmul s", "ratio", "cpu"))
    for name, tra, shapes, qshapes, spec, manual in EINSUM:
        shp = qshapes if QUICK else shapes
        paths = make_inputs(name, {t: (s, "f32") for t, s in shp.items()})
        defs = sizes_from(os.path.join(SRC, "bench", tra), shp)
        exe = compile_tra(os.path.join(SRC, "bench", tra), "es-" + name, 2, defs)
        order = list(shp.keys())
        plist = [paths[t] for t in order]
        inf = (float("inf"), float("inf"))
        t, e, mm = interleave([lambda: run_trac(exe, 2, paths, name),
                               lambda: numpy_time(spec, manual, plist, "einsum") if name != "bmm" or QUICK
                               else inf,
                               lambda: numpy_time(spec, manual, plist, "manual")])
        tt, tc = med([x["compute_s"] for x in t]), med([x["compute_cpu_s"] for x in t])
        et, ec = med([x[0] for x in e]), med([x[1] for x in e])
        mt, mc = med([x[0] for x in mm]), med([x[1] for x in mm])
        best, bestc = min(et, mt), min(ec, mc)
        say("%-8s %-34s %9.4f %9.4f %9.4f %8.3f %8.3f" % (
            name, " ".join("%s%s" % (k, list(v)) for k, v in shp.items())[:34], tt, et, mt, best / tt,
            bestc / 2 / tc))


VECTOR_TRA = """
size N = 300, M = 200;
input A[N, M];
input B[N, M];
input v[M];
C[i, j] = relu(A[i, j] * B[i, j]) * 2 - A[i, j];
D[i, j] = A[i, j] + v[j];
E[i, j] = exp(A[i, j]) + sqrt(abs(B[i, j]));
s[i] = A[i, j] * B[i, j];
m[i] = max[j](A[i, j] - B[i, j]);
c[j] = sum[i](A[i, j] * A[i, j]);
T[j, i] = A[i, j] * 3;
L[i, j] = log(abs(A[i, j]) + 1) * tanh(B[i, j]);
G[i, j] = sigmoid(A[i, j]) + abs(B[i, j]) ** 0.5;
Z[i, j] = exp(A[i, j] - max[k](A[i, k]));
S[i, j] = Z[i, j] / sum[k](Z[i, k]);
l[i] = log(sum[j](exp(A[i, j])));
output C; output D; output E; output s; output m; output c; output T;
output L; output G; output S; output l;
"""


def sec_vector():
    say("== generated loops vectorise: gcc -fopt-info-vec on the innermost loop of every loop kernel")
    src = os.path.join(WORK, "vector.tra")
    with open(src, "w") as f:
        f.write(VECTOR_TRA)
    c = os.path.join(WORK, "vector.c")
    run([TRAC, "-S", "-P", "2", src, "-o", c])
    cflags = os.environ.get("CFLAGS", "-O3 -march=native -fno-math-errno -fno-trapping-math")
    p = run([MPICC, *shlex.split(cflags), "-fopt-info-vec-optimized", "-fopt-info-loop-optimized", "-c", c,
             "-o", os.path.join(WORK, "vector.o"), "-I" + os.path.join(SRC, "runtime")])
    done = {int(m) for m in re.findall(r"vector\.c:(\d+):\d+: optimized: loop vectorized", p.stderr)}
    # a copy gcc turns into memcpy (a row reduction's staging of its rows)
    libcall = {int(m) for m in re.findall(r"vector\.c:(\d+):\d+: optimized: Loop \d+ distributed: "
                                          r"split to 0 loops", p.stderr)}
    lines = open(c).read().splitlines()
    kernel, ok, bad = None, 0, 0
    for i, line in enumerate(lines, 1):
        # a kernel's comment, the line before its definition
        if line.startswith("static void kernel") and i > 1:
            m = re.match(r"/\* (.*) \*/", lines[i - 2])
            kernel = m.group(1) if m else None
        if "#pragma GCC ivdep" not in line:
            continue
        # the loop on line i + 1 and its body, to its closing brace
        end, depth = i + 1, 0
        while True:
            depth += lines[end - 1].count("{") - lines[end - 1].count("}")
            if depth <= 0 and end > i + 1:
                break
            end += 1
        if any("#pragma GCC ivdep" in lines[j - 1] for j in range(i + 2, end)):
            continue                    # an outer loop: its inner one is counted
        if (i + 1) in done:
            how = "vectorised"
        elif any(j in libcall for j in range(i - 6, end + 1)):
            how = "memcpy"
        else:
            how = "NOT VECTORISED"
        ok += how != "NOT VECTORISED"
        bad += how == "NOT VECTORISED"
        say("   %-14s line %4d  %-45s" % (how, i + 1, kernel))
    say("   %d of %d innermost loops vectorised or a memcpy (%s)" % (ok, ok + bad, cflags))


VMATH_NUMPY = """
import sys, time
import numpy as np
n = int(sys.argv[1])
s = np.uint64(1)
x = (np.random.default_rng(1).random(n) * 40 - 20).astype(np.float32)
y = np.empty_like(x)
best = 1e30
for _ in range(7):
    t = time.process_time()
    np.exp(x, out=y)
    best = min(best, time.process_time() - t)
print("%-34s %8.4f s  %6.3f G/s" % ("numpy np.exp (f32)", best, n / best / 1e9))
"""

VMATH_TRA = """
size N = 4096;
input X[N, N];
Y[i, j] = exp(X[i, j]);
output Y;
"""


def sec_vmath():
    """Issue 33: exp over 16M floats on one core, by glibc (scalar and libmvec), SLEEF, trac's
    trt_expf and numpy; then trac's map op Y = exp(X) over 16M floats, its --profile seconds."""
    n = 1 << 22 if QUICK else 1 << 24
    say("== vectorised maps: expf over %d floats, one core (target: trac >= 1e9 per second)" % n)
    exe = os.path.join(WORK, "vmath")
    run([MPICC, "-O3", "-march=native", "-fno-math-errno", "-I" + os.path.join(SRC, "runtime"),
         os.path.join(SRC, "bench", "vmath.c"), "-o", exe, os.path.join(BUILD, "runtime", "libtracrt.a"),
         *shlex.split(BLIS_LIBS), "-lmvec", "-lm"])
    for line in run([exe, str(n)]).stdout.splitlines():
        say("   " + line)
    say("   " + run([PYTHON, "-c", VMATH_NUMPY, str(n)]).stdout.strip())
    src = os.path.join(WORK, "vmath.tra")
    with open(src, "w") as f:
        f.write(VMATH_TRA)
    prog = os.path.join(WORK, "vmath-map")
    run([TRAC, "-P", "1", src, "-o", prog])
    xin = os.path.join(WORK, "vmath-x.npy")
    run([PYTHON, "-c", "import numpy as np; np.save(%r, (np.random.default_rng(2).random((4096, 4096)) * 40 - 20)"
         ".astype(np.float32))" % xin])
    secs = []
    for _ in range(REPS):
        p = run([prog, "X=" + xin, "Y=" + os.path.join(WORK, "vmath-y.npy"), "--profile"])
        ops = op_table(p.stdout)
        secs += [s for (_, kind, _, s, _) in ops if kind == "map"]
    best = min(secs)
    say("   trac map Y = exp(X), 4096 x 4096, 1 rank: op %.4f s median, %.4f s best: %.3f G/s at the best"
        % (med(secs), best, 4096 * 4096 / best / 1e9))


def sec_kops():
    """The cost model's weights of kernel ops (ir.h's KOPS): each op in a loop of its own as
    codegen emits it, over the quick calibration's 2^20 floats, against an add (bench/kops.c)."""
    say("== kernel ops against an add: the cost model's weights (ir/ir.h KOPS)")
    exe = os.path.join(WORK, "kops")
    run([MPICC, "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-I" + os.path.join(SRC, "runtime"),
         os.path.join(SRC, "bench", "kops.c"), "-o", exe, os.path.join(BUILD, "runtime", "libtracrt.a"),
         *shlex.split(BLIS_LIBS), "-lm"])
    for line in run([exe]).stdout.splitlines():
        say("   " + line)


ROOFLINE_INPUTS = {
    "matmul": "import numpy as np; r = np.random.default_rng(5)\n"
              "for k in 'AB': np.save(k + '.npy', r.random((4000, 4000), dtype=np.float32) * 2 - 1)",
    "mnist_mlp": "import numpy as np; r = np.random.default_rng(6)\n"
                 "np.save('X.npy', r.random((60000, 784), dtype=np.float32))\n"
                 "np.save('Xt.npy', r.random((10000, 784), dtype=np.float32))\n"
                 "np.save('labels.npy', r.integers(0, 10, 60000))\n"
                 "np.save('tlabels.npy', r.integers(0, 10, 10000))\n"
                 "np.save('W1init.npy', (r.standard_normal((784, 256)) * 0.05).astype(np.float32))\n"
                 "np.save('W2init.npy', (r.standard_normal((256, 10)) * 0.05).astype(np.float32))",
    "conv3d": "import numpy as np; r = np.random.default_rng(7)\n"
              "np.save('X.npy', r.random((3, 16, 270, 480), dtype=np.float32))\n"
              "np.save('K.npy', r.random((10, 3, 3, 3, 3), dtype=np.float32) - 0.5)",
}
# (example, ranks, trac's flags, inputs)
ROOFLINE_RUNS = [
    ("matmul", 1, ["-D", "I=4000", "-D", "K=4000", "-D", "J=4000"], "AB"),
    ("matmul", 2, ["-D", "I=4000", "-D", "K=4000", "-D", "J=4000"], "AB"),
    ("mnist_mlp", 1, ["-D", "EPOCHS=1"], ["X", "labels", "Xt", "tlabels", "W1init", "W2init"]),
    ("mnist_mlp", 2, ["-D", "EPOCHS=1"], ["X", "labels", "Xt", "tlabels", "W1init", "W2init"]),
    ("conv3d", 1, [], "XK"),
    ("conv3d", 2, [], "XK"),
]


def sec_roofline():
    """Issue 33: each example's ops against their floors (--profile's roofline column, from the
    machine model the plan was made with), and the whole run's and the computation's fractions."""
    say("== roofline: the examples' ops against the machine model's floors (floor / measured seconds)")
    for name, ranks, flags, inputs in ROOFLINE_RUNS:
        d = os.path.join(WORK, "roof-" + name)
        os.makedirs(d, exist_ok=True)
        if not os.path.exists(os.path.join(d, list(inputs)[0] + ".npy")):
            run([PYTHON, "-c", ROOFLINE_INPUTS[name]], cwd=d)
        exe = os.path.join(d, "%s-%d" % (name, ranks))
        run([TRAC, "-P", str(ranks), *flags, os.path.join(SRC, "examples", name + ".tra"), "-o", exe])
        runs = [run([MPIRUN, "-np", str(ranks), "--bind-to", "none", exe,
                     *["%s=%s.npy" % (k, k) for k in inputs], "--profile"], cwd=d).stdout for _ in range(REPS)]
        # the run of median total time
        tot = [float(re.search(r" total_s=([0-9.]+)", t).group(1)) for t in runs]
        text = runs[sorted(range(len(runs)), key=lambda i: tot[i])[len(runs) // 2]]
        summ = dict(kv.split("=", 1) for kv in re.search(r"^summary: (.*)$", text, re.M).group(1).split())
        say("   %s, %d rank%s (%s), the median of %d runs: whole run %s of its floor, computation %s"
            % (name, ranks, "s" if ranks > 1 else "", " ".join(flags) or "defaults", len(runs),
               summ["roofline"], summ["compute_roofline"]))
        say("      %-8s %-30s %10s %10s %8s" % ("kind", "label", "seconds", "floor s", "roofline"))
        on = False
        for line in text.splitlines():
            if line.lstrip().startswith("op  kind"):
                on = True
                continue
            m = OPLINE.match(line) if on else None
            if not m:
                on = False
                continue
            rest = m.group(3).split()
            secs = float(rest[-11])
            # the ops that take 2% of the run or more
            if secs >= 0.02 * float(summ["total_s"]):
                say("      %-8s %-30s %10.4f %10.4f %8s" % (m.group(2), " ".join(rest[:-12])[:30], secs,
                                                         float(rest[-2]), rest[-1]))


STARTUP_PARAM = "size N = %d;\nparam W[N, N] = %s;\ns = W[i, j];\nprint s;\n"
STARTUP_INPUT = "size N = %d;\ninput X[N, N];\ns = X[i, j];\nprint s;\n"


def first_op(text):
    """Seconds of op 0 (the init or the read) in a --profile table."""
    m = re.search(r"^\s+0\s+(init|read)\s+(?:read \S+\s+)?\d+\s+(\S+)", text, re.M)
    return float(m.group(2))


def sec_startup():
    n = 2000 if QUICK else 3000         # 9M floats: issue 33's normal
    say("== start-up (issue 16): a %d x %d f32 param's initial values, and the same from an .npy file" % (n, n))
    say("   op 0's seconds (--profile) and the whole process's wall time (mpirun included), medians of %d;"
        % REPS)
    say("   zeros is the floor: the chunk's pages faulted in and written once")
    runs = []                           # (label, ranks, exe, inputs)
    for init in ("zeros", "uniform(-1, 1)", "normal(0, 1)"):
        name = "startup-" + init.split("(")[0]
        src = os.path.join(WORK, name + ".tra")
        with open(src, "w") as f:
            f.write(STARTUP_PARAM % (n, init))
        for ranks in (1, 2):
            runs.append((init, ranks, compile_tra(src, "%s-%d" % (name, ranks), ranks), {}))
    src = os.path.join(WORK, "startup-input.tra")
    with open(src, "w") as f:
        f.write(STARTUP_INPUT % n)
    x = make_inputs("startup", {"X": ((n, n), "f32")})
    for ranks, block in ((1, None), (2, None), (2, n // 4), (2, n // 16)):
        label = "X.npy" + (" --block %d" % block if block else "")
        exe = compile_tra(src, "startup-input-%d-%s" % (ranks, block), ranks, block=block)
        runs.append((label, ranks, exe, x))

    def once(exe, ranks, inputs):
        def f():
            t0 = time.perf_counter()
            s = run_trac(exe, ranks, inputs)
            return first_op(s["text"]), time.perf_counter() - t0
        return f

    def copy_file():
        buf = bytearray(os.path.getsize(x["X"]))
        with open(x["X"], "rb", buffering=0) as f:
            t0 = time.perf_counter()
            f.readinto(buf)
            return time.perf_counter() - t0, 0.0

    res = interleave([once(exe, ranks, inputs) for _, ranks, exe, inputs in runs] + [copy_file])
    # first touches of fresh memory sometimes take 0.1 s on this virtual
    # machine (zeros too): the best run shows the code, the median the run
    say("   %-24s %5s %9s %9s %16s %10s" % ("initial value", "ranks", "op s", "best s",
                                          "M floats/s/rank", "process s"))
    say("   %-24s %5s %9s %9s %16s %10s" % ("", "", "median", "", "at best", "median"))
    for (label, ranks, _, _), r in zip(runs + [("the file, one read()", 1, 0, 0)], res):
        best = min(a for a, _ in r)
        say("   %-24s %5d %9.4f %9.4f %16.0f %10s" % (label, ranks, med([a for a, _ in r]), best,
                                                    n * n / ranks / best / 1e6,
                                                    "%.3f" % med([b for _, b in r]) if r[0][1] else "-"))


def plan_program(nstat):
    """A program of nstat statements: a chain of layers, each a matmul and
    an elementwise statement, the layers' widths alternating."""
    lines = ["size N = 4000, D = 512, H = 1024;", "input X[N, D];"]
    prev, dim = "X", "D"
    for i in range(nstat // 2):
        nd = "H" if dim == "D" else "D"
        lines += ["input W%d[%s, %s];" % (i, dim, nd),
                  "A%d[n, h] = %s[n, d] * W%d[d, h];" % (i, prev, i),
                  "B%d[n, h] = relu(A%d[n, h]) + 0.5 * A%d[n, h];" % (i, i, i)]
        prev, dim = "B%d" % i, nd
    lines.append("output %s;" % prev)
    return "\n".join(lines) + "\n"


def sec_plantime():
    say("== planning time: trac --explain=json on a 100-statement program (target: under 1 s)")
    say("   and on the TRA paper's workloads at their cluster sizes; medians of %d runs" % REPS)
    src = os.path.join(WORK, "plan100.tra")
    with open(src, "w") as f:
        f.write(plan_program(100))
    cases = [("100 statements", src, ["-P", str(p)]) for p in (2, 4, 10)]
    gold = os.path.join(SRC, "tests", "golden")
    for name in sorted(os.listdir(gold)):
        if name.startswith("paper_") and name.endswith(".tra"):
            text = open(os.path.join(gold, name)).read()
            m = re.search(r"^# args: (.*)$", text, re.M)
            cases.append((name[:-4], os.path.join(gold, name), shlex.split(m.group(1)) if m else []))
    say("%-22s %-28s %9s" % ("program", "options", "seconds"))
    for name, path, args in cases:
        ts = []
        for _ in range(REPS):
            t0 = time.time()
            run([TRAC, "--explain=json", *args, path], cwd=gold)
            ts.append(time.time() - t0)
        say("%-22s %-28s %9.3f" % (name, " ".join(args), med(ts)))


SCALE_RANKS = [16, 32, 64, 128, 256, 512, 1024]


def without_ranks(args):
    """args without its -P N (the paper's cluster size)."""
    out, i = [], 0
    while i < len(args):
        if args[i] in ("-P", "--ranks"):
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def sec_scale():
    say("== at scale: trac --explain=json -P %s on the TRA paper's workloads (tests/golden/paper_*,"
        % ",".join(map(str, SCALE_RANKS)))
    say("   their sizes and machine models) and bench's programs (their default sizes, the built-in model)")
    gold = os.path.join(SRC, "tests", "golden")
    cases = []
    for name in sorted(os.listdir(gold)):
        if name.startswith("paper_") and name.endswith(".tra"):
            m = re.search(r"^# args: (.*)$", open(os.path.join(gold, name)).read(), re.M)
            cases.append((name[:-4], os.path.join(gold, name), without_ranks(shlex.split(m.group(1)) if m else []), gold))
    for name in sorted(os.listdir(os.path.join(SRC, "bench"))):
        if name.endswith(".tra"):
            cases.append(("bench/" + name[:-4], os.path.join(SRC, "bench", name), [], os.path.join(SRC, "bench")))
    say("| workload | ranks | predicted s | bytes sent | bytes sent per rank | peak bytes per rank |")
    say("|---|---|---|---|---|---|")
    for name, path, args, cwd in cases:
        out = run([TRAC, "--explain=json", "-P", ",".join(map(str, SCALE_RANKS)), *args, path], cwd=cwd).stdout

        for p in json.loads(out)["plans"]:
            say("| %s | %d | %.4g | %.3g | %.3g | %.3g |" % (name, p["ranks"], p["predicted_seconds"],
                p["total_bytes_sent"], p["total_bytes_sent"] / p["ranks"], p["peak_bytes_per_rank"]))


def sizes_from(tra, shapes):
    """-D NAME=VALUE for the size names of a .tra's input declarations."""
    text = open(tra).read()
    defs = {}
    for t, shp in shapes.items():
        m = re.search(r"input\s+%s\s*\[([^\]]*)\]" % t, text)
        for nm, v in zip([s.strip() for s in m.group(1).split(",")], shp):
            defs[nm] = v
    return ["%s=%d" % kv for kv in defs.items()]


def sec_bytes():
    say("== bytes each op sent, measured by --profile vs the cost model's prediction")
    say("   chunks = sent - keys (8 bytes per key dim per tuple); the plan predicts chunk bytes")
    say("%-30s %3s %-8s %14s %10s %14s  %s" % ("workload", "op", "kind", "chunk bytes", "key bytes",
                                             "predicted", "verdict"))
    seen = set()
    for workload, ranks, ops in BYTES:
        if workload in seen:
            continue
        seen.add(workload)
        for op, kind, sent, keys, chunks, pred in ops:
            if chunks == pred:
                verdict = "equal"
            elif kind == "write":
                verdict = "output gathered to rank 0: not in the cost model"
            else:
                verdict = "DIFFERS by %.0f" % (chunks - pred)
            say("%-30s %3d %-8s %14.0f %10.0f %14.0f  %s" % (workload[:30], op, kind, chunks, keys, pred,
                                                           verdict))


# ---- whole processes: trac's matmul program against the same by hand ----

PARITY_TRA = """
size N = %d;
param A[N, N] = uniform(-1, 1);
param B[N, N] = uniform(-1, 1);
C[i, j] = A[i, k] * B[k, j];
output C;
"""


def wall(cmd):
    t = time.perf_counter()
    run(cmd)
    return time.perf_counter() - t


def sec_parity():
    """The issue's whole-process figure: A and B made uniform at random, C = A B, C.npy written;
    trac's executable (run as ./prog, and under mpirun -np 1) against bench/matmul_hand.c."""
    n = 2000 if QUICK else 4000
    say("== whole process, 1 rank: trac's matmul program vs the same by hand with BLIS (target: ratio >= 0.95)")
    say("   n = %d f32, params uniform(-1, 1), C written to .npy; wall seconds, medians of %d alternating runs"
        % (n, REPS))
    src = os.path.join(WORK, "parity-%d.tra" % n)
    with open(src, "w") as f:
        f.write(PARITY_TRA % n)
    exe = os.path.join(WORK, "parity-%d" % n)
    run([TRAC, "-P", "1", src, "-o", exe])
    out = os.path.join(WORK, "parity-C.npy")
    hand = os.path.join(WORK, "matmul_hand")
    mpirun = [MPIRUN, "-np", "1", "--bind-to", "none"]
    h_alone, h_mpi, h_dur, alone, mpi = interleave([
        lambda: wall([hand, str(n), out]),
        lambda: wall(mpirun + [hand, str(n), out]),
        lambda: wall(mpirun + [hand, str(n), out, "--durable"]),
        lambda: wall([exe, "C=" + out]),
        lambda: wall(mpirun + [exe, "C=" + out])])
    h, hm, hd, a, m = med(h_alone), med(h_mpi), med(h_dur), med(alone), med(mpi)
    say("%-40s %9s %8s" % ("", "wall s", "ratio"))
    say("%-40s %9.3f %8s" % ("by hand (bench/matmul_hand.c)", h, "1"))
    say("%-40s %9.3f %8.3f" % ("trac, ./prog", a, h / a))
    say("%-40s %9.3f %8s" % ("by hand, mpirun -np 1", hm, "1"))
    say("%-40s %9.3f %8.3f" % ("trac, mpirun -np 1 ./prog", m, hm / m))
    # trac writes an output durably (trac(1): fsync, rename, the folder's
    # fsync); the same by hand, where the disk is slow to flush
    say("%-40s %9.3f %8s" % ("by hand, mpirun -np 1, C durable", hd, "1"))
    say("%-40s %9.3f %8.3f" % ("trac, mpirun -np 1 ./prog (vs durable)", m, hd / m))


# ---- how well the cost model predicts ----

OPLINE = re.compile(r"^\s*(\d+)\s+(\w+)\s+(.*)$")


def op_table(text):
    """--profile's op table: [(op, kind, label, seconds, pred s)]."""
    ops, on = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("op  kind"):
            on = True
            continue
        if on:
            m = OPLINE.match(line)
            if not m:
                break
            rest = m.group(3).split()
            if len(rest) < 12:
                break
            # from the row's end: roofline, floor s, pred GF/s, GFLOP/s,
            # peak, pred sent, received, sent, wait, pred s, seconds
            ops.append((int(m.group(1)), m.group(2), " ".join(rest[:-12])[:30],
                        float(rest[-11]), float(rest[-10])))
    return ops


def predict_programs():
    """(name, .tra, ranks, defines, inputs): bench's programs, whole (inits and reads included)."""
    n = 2000 if QUICK else 4000
    out = []
    for dt, r in [("f32", 1), ("f64", 1), ("f32", 2), ("f64", 2)]:
        out.append(("matmul %s n=%d" % (dt, n), matmul_src(dt), r, ["I=%d" % n, "J=%d" % n, "K=%d" % n],
                    matmul_inputs(dt, n, n, n)))
    for name, tra, shapes, qshapes, spec, manual in EINSUM:
        shp = qshapes if QUICK else shapes
        out.append((name, os.path.join(SRC, "bench", tra), 2, sizes_from(os.path.join(SRC, "bench", tra), shp),
                    make_inputs(name, {t: (s, "f32") for t, s in shp.items()})))
    out.append(("ffnn train", os.path.join(SRC, "examples/ffnn.tra"), 2, [],
                make_inputs("ffnn", {"X": ((2000, 1600), "f32"), "Y": ((2000, 10), "f32")})))
    cx = (3, 8, 136, 240) if QUICK else (3, 16, 270, 480)
    out.append(("conv3d", os.path.join(SRC, "examples/conv3d.tra"), 2,
                ["T=%d" % cx[1], "H=%d" % cx[2], "W=%d" % cx[3]],
                make_inputs("convrate", {"X": (cx, "f32"), "K": ((10, 3, 3, 3, 3), "f32")})))
    return out


def calibrated(section):
    """The machine model ($TRAC_MACHINE, else make calibrate's) and the environment that makes trac
    use it; (None, None) after saying so when there is none."""
    model = os.environ.get("TRAC_MACHINE") or os.path.join(WORK, "machine.model")
    if not os.path.exists(model):
        say("== %s: no machine model; run make calibrate first" % section)
        return None, None
    return model, dict(ENV, TRAC_MACHINE=model)


def sec_predict():
    """Predicted seconds (the machine model: $TRAC_MACHINE, else bench-work/machine.model from
    make calibrate, else the built-in one) against --profile's measured seconds, per op and in all."""
    model, env = calibrated("predict")
    if not model:
        return
    say("== predicted vs measured seconds (machine model %s; target: within 25%%)" % model)
    say("   per op: every op taking >= 10%% of the run; ratio = predicted / measured (medians of %d runs)" % REPS)
    say("%-16s %5s %4s %-6s %-30s %9s %9s %7s" % ("program", "ranks", "op", "kind", "label", "meas s",
                                                 "pred s", "ratio"))
    worst, totals = [], []
    for name, tra, ranks, defs, inputs in predict_programs():
        exe = os.path.join(WORK, "pr-" + re.sub(r"\W+", "-", name) + "-%d" % ranks)
        cmd = [TRAC, "-P", str(ranks)] + sum([["-D", d] for d in defs], []) + [tra, "-o", exe]
        run(cmd, env=env)
        runs = interleave([lambda: run_trac(exe, ranks, inputs)])[0]
        tabs = [op_table(x["text"]) for x in runs]
        meas = {}
        for tab in tabs:
            for op, kind, label, sec, pred in tab:
                meas.setdefault(op, (kind, label, pred, []))[3].append(sec)
        total_m = sum(med(v[3]) for v in meas.values())
        total_p = sum(v[2] for v in meas.values())
        for op, (kind, label, pred, secs) in sorted(meas.items()):
            m = med(secs)
            if m >= 0.1 * total_m:
                say("%-16s %5d %4d %-6s %-30s %9.4f %9.4f %7.2f" % (name, ranks, op, kind, label, m, pred,
                                                                   pred / m if m else float("nan")))
                worst.append(pred / m if m else float("nan"))
        say("%-16s %5d %4s %-6s %-30s %9.4f %9.4f %7.2f" % (name, ranks, "all", "", "(every op)", total_m,
                                                           total_p, total_p / total_m))
        totals.append(total_p / total_m)
    inside = lambda v: sum(1 for r in v if 0.75 <= r <= 1.25)
    say("   within 25%%: %d of %d ops, %d of %d totals" % (inside(worst), len(worst), inside(totals),
                                                          len(totals)))


def sec_io():
    """trac's read and write ops (bench/io.tra: Y = 2 X, N x 4096 f32) at 32 to 324 MB on 1 and
    2 ranks against the machine model's prediction: the read's bytes and system calls (2 ranks
    split the rows: one preadv per row of 8 KiB), the write's latency, bytes and the receive.
    Each output replaces one of its size, as a program run again does."""
    model, env = calibrated("io")
    if not model:
        return
    say("== reads and writes, measured vs predicted (machine model %s; target: within 25%%)" % model)
    say("   ratio = predicted / measured, medians of %d runs" % REPS)
    say("%8s %5s %-6s %9s %9s %7s" % ("MB", "ranks", "op", "meas s", "pred s", "ratio"))
    rows = [2048, 8192] if QUICK else [2048, 4096, 8192, 20736]
    exes = []
    for n in rows:
        x = make_inputs("io", {"X": ((n, 4096), "f32")})["X"]
        for r in (1, 2):
            exe = os.path.join(WORK, "io-%d-%d" % (n, r))
            run([TRAC, "-P", str(r), "-D", "N=%d" % n, os.path.join(SRC, "bench", "io.tra"), "-o", exe], env=env)
            exes.append((n, r, exe, x))
    runs = interleave([lambda e=e: run([MPIRUN, "-np", str(e[1]), "--bind-to", "none", e[2], "X=" + e[3],
                                        "Y=io-Y-%d.npy" % e[0], "--profile"], env=env).stdout
                       for e in exes])
    ratios = []
    for (n, r, exe, x), outs in zip(exes, runs):
        meas = {}
        for text in outs:
            for op, kind, label, sec, pred in op_table(text):
                if kind in ("read", "write"):
                    meas.setdefault(kind, (pred, []))[1].append(sec)
        for kind in ("read", "write"):
            pred, secs = meas[kind]
            m = med(secs)
            ratios.append(pred / m)
            say("%8.0f %5d %-6s %9.4f %9.4f %7.2f" % (n * 4096 * 4 / 1e6, r, kind, m, pred, pred / m))
    say("   within 25%%: %d of %d" % (sum(1 for v in ratios if 0.75 <= v <= 1.25), len(ratios)))


# ---- overlap: the two-phase join's sends under the gemms, against waiting for every input ----

def sec_overlap():
    """A two-phase matmul on 2 ranks whose chunks travel while the gemms run, against the same
    executable with --no-overlap (every input chunk received before the first gemm), over shared
    memory and over TCP (--mca btl self,tcp, as between machines); whole processes."""
    n, b = (2000, 500) if QUICK else (4000, 1000)
    exe = os.path.join(WORK, "ov-mm-%d" % n)
    run([TRAC, "-P", "2", "-D", "I=%d" % n, "-D", "J=%d" % n, "-D", "K=%d" % n, "--strategy", "11=two-phase",
         "--block", str(b), os.path.join(SRC, "examples/matmul.tra"), "-o", exe])
    inputs = matmul_inputs("f32", n, n, n)
    args = ["%s=%s" % (k, v) for k, v in inputs.items()]
    say("== overlap: two-phase matmul f32 n=%d, blocks %d, 2 ranks: sends under the gemms vs --no-overlap"
        % (n, b))
    say("   wall seconds of whole processes, medians of %d alternating runs; ratio = no-overlap / overlap" % REPS)
    say("   overlap with the progress thread (TRAC_PROGRESS_THREAD=1, the default across nodes) and without")
    say("   (=0, the default on one node: the main thread tests for arrivals between kernels)")
    say("%-22s %11s %11s %11s %9s %9s" % ("transport", "thread s", "no thread", "no-overlap", "ratio",
                                         "no thread"))
    tcp = ["--mca", "btl", "self,tcp"]
    rows = [("shared memory", [], None), ("tcp (btl self,tcp)", tcp, None)]
    if os.geteuid() == 0 and shutil.which("tc"):
        rows.append(("tcp, lo at 1 Gbit/s", tcp, "1gbit"))
    else:
        say("   (not root or no tc: no row with the loopback throttled to a cluster network's speed)")
    for name, mca, rate in rows:
        if rate:      # the loopback as slow as a network between machines, for this row only
            run(["tc", "qdisc", "add", "dev", "lo", "root", "tbf", "rate", rate, "burst", "1mb",
                 "limit", "256mb"])
        try:
            base = [MPIRUN, "-np", "2", "--bind-to", "none"] + mca
            on, bare, off = interleave([lambda: wall(base + ["-x", "TRAC_PROGRESS_THREAD=1", exe] + args),
                                        lambda: wall(base + ["-x", "TRAC_PROGRESS_THREAD=0", exe] + args),
                                        lambda: wall(base + [exe] + args + ["--no-overlap"])])
        finally:
            if rate:
                run(["tc", "qdisc", "del", "dev", "lo", "root"])
        say("%-22s %11.3f %11.3f %11.3f %9.3f %9.3f" % (name, med(on), med(bare), med(off), med(off) / med(on),
                                                      med(off) / med(bare)))


def wait_quiet():
    """With --wait-quiet[=L], wait (up to 10 minutes) for the 1-minute load
    average to drop below L (default 0.5) before a section: other jobs on a
    2-core machine distort everything."""
    arg = [a for a in sys.argv if a.startswith("--wait-quiet")]
    if not arg:
        return
    limit = float(arg[0].split("=")[1]) if "=" in arg[0] else 0.5
    t0 = time.time()
    while load() >= limit and time.time() - t0 < 600:
        time.sleep(10)
    if load() >= limit:
        say("   (still busy after 10 minutes: load average %.2f)" % load())


def main():
    want = SECTIONS or ALL
    rev = subprocess.run(["git", "-C", SRC, "describe", "--always", "--dirty"], capture_output=True,
                         text=True).stdout.strip()
    say("trac bench: %s; trac %s (%s); %d repetitions; load average %.2f at start" %
        (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), TRAC, rev or "?", REPS, load()))
    have = build_helpers()
    for s in ALL:
        if s not in want:
            continue
        wait_quiet()
        t0 = time.time()
        say("   (load average %.2f)" % load())
        if s == "pdgemm":
            sec_pdgemm(have)
        else:
            globals()["sec_" + s]()
        say("   (%.0f s, load average %.2f)" % (time.time() - t0, load()))
        say()
    if BYTES:
        sec_bytes()
    with open(os.path.join(WORK, "results.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")
    say("results also in %s" % os.path.join(WORK, "results.txt"))


main()
