#!/usr/bin/env python3
"""predict.py: every example's predicted seconds against its measured ones,
with the model trac makes of this machine when nothing was calibrated
(issue 33: "with the built-in model, predicted seconds of every example
within 1.5x of measured").

    make bench-predict BENCH='--reps 3'
    bench/predict.py [--reps N] [--np N] [--only a,b] [--cache DIR] [--keep] [--ops N]

For each example of examples/Makefile's EXAMPLES, with the flags the
Makefile gives it and the larger sizes SIZES gives those whose run is too
short to measure (each said in the table): examples/Makefile compiles it
(trac -P NP with TRAC_MACHINE=host: the host model, as an installed trac
with no model file plans; the cache is a fresh folder unless --cache, so the
first compile runs the quick calibration and the others read its cache) and
generates its inputs (a sparse input as a scipy .npz, deflated, as
save_npz writes it; a program with one is compiled again with --nnz
NAME=COUNT, the count the file holds, as a user who knows their data plans:
mf_sparse's ratings hold 200 a row where the plan would assume 16); then it
runs REPS times on NP ranks with --profile, in rounds: one run of every
example a round, so that a slow spell of the host, which lasts minutes
here, slows one run of several examples, not the median of one.
Printed per example, medians of the runs:

    pred s    the plan's predicted seconds, every op (reads, initial
              values and writes included): --profile's pred_s
    run s     the program's own seconds, from its first op to its last
              (--profile's total_s): what the plan predicts
    cpu s     the busiest rank's CPU seconds in each op, summed (--profile's
              cpu_s): on a loaded machine the wall time counts other jobs'
              slices, which no model of the machine predicts (a rank
              spinning in MPI for the other one to be scheduled is still
              counted; a disk's fsync is not)
    proc cpu  the CPU seconds per rank of the whole process (mpirun and its
              ranks, user and system, over NP) less an empty program's (MPI
              spinning in every wait included)
    wall      the whole process (mpirun, MPI's start and end included)
    ratio     pred s / cpu s, the number the target is about (1.5x: within
              [0.67, 1.5]), and pred s / run s beside it
    plan      six hex digits naming the plan (its --explain --no-costs):
              tables whose calibrations plan an example two ways show it

With --ops N, each example's N ops whose measured seconds (--profile's,
the median of the runs) exceed their predicted ones the most, then the N
that fall shortest: where a ratio away from 1 comes from.
"""
import argparse
import hashlib
import os
import resource
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

SRC = os.environ.get("srcdir") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("builddir") or SRC
TRAC = os.environ.get("TRAC") or os.path.join(BUILD, "trac")
MPIRUN = os.environ.get("MPIRUN") or "mpirun"
PYTHON = os.environ.get("PYTHON") or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable)

# Sizes for the examples whose checked run (examples/Makefile) is too short
# to time against a model: each takes 0.3 s or more on 2 ranks here.
SIZES = {
    "matmul_common_dim": "-D K=128000",
    "mttkrp": "-D I=400 -D J=400 -D K=400",
    "attention": "-D T=4096",
    "logreg": "-D N=100000",
    "gcn": "-D V=4000",
    "gcn_sparse": "-D V=8000",     # example.py makes the graph dense first: 30000 was killed
    "mf": "-D M=1200 -D N=800",
    "mf_sparse": "-D M=3000 -D N=2000",
    "transe": "-D B=32768",
    "cnn": "-D N=1024",
    "conv3d": "-D T=8 -D H=136 -D W=240",
}


def makefile_flags():
    """EXAMPLES and each NAME_FLAGS of examples/Makefile."""
    text = open(os.path.join(SRC, "examples", "Makefile")).read()
    names = re.search(r"^EXAMPLES = (.*)$", text, re.M).group(1).split()
    flags = dict(re.findall(r"^(\w+)_FLAGS = (.*)$", text, re.M))
    return names, flags


NPZ = """import sys, numpy, scipy.sparse
for path in sys.argv[1:]:
    scipy.sparse.save_npz(path[:-4] + ".npz", scipy.sparse.csr_matrix(numpy.load(path)))
"""


def tensor_args(work, name):
    """NAME=path for each input, NAME.out=path for each output (as the Makefile's args).  A sparse
    input is given as a scipy .npz (save_npz's, deflated), made from the Makefile's .npy: what the
    cost model prices a sparse input's read as (a dense .npy read into a sparse relation is not)."""
    out, dense = [], []
    for line in open(os.path.join(work, name + ".tensors")):
        f = line.split()
        if len(f) < 2 or f[0] in ("tensors:", "value);"):
            continue
        if re.match(r"^input", f[1]):
            path = "%s/%s.in/%s.npy" % (work, name, f[0])
            if "sparse:" in f:
                dense.append(path)
                path = path[:-4] + ".npz"
            out.append("%s=%s" % (f[0], path))
        if re.search(r"output$", f[1]):
            out.append("%s.out=%s/%s.out/%s.npy" % (f[0], work, name, f[0]))
    if dense:
        subprocess.run([PYTHON, "-c", NPZ] + dense, check=True)
    return out


def npz_nnz(path):
    """The stored elements of a scipy .npz: the length of its indices.npy (read from the .npy
    header, without numpy)."""
    import ast
    import zipfile
    with zipfile.ZipFile(path) as z, z.open("indices.npy") as f:
        head = f.read(10)
        n = struct.unpack("<H", head[8:10])[0] if head[6] == 1 else struct.unpack("<I", head[8:10] + f.read(2))[0]
        return ast.literal_eval(f.read(n).decode("latin1"))["shape"][0]


def sparse_counts(args):
    """--nnz NAME=COUNT for each sparse input (a .npz among args): the count its data holds, as a
    user who knows their data gives it (without it the plan assumes 16 elements a row)."""
    return " ".join("--nnz %s=%d" % (a.split("=", 1)[0], npz_nnz(a.split("=", 1)[1]))
                    for a in args if a.endswith(".npz"))


def make(a, env, work, name, fl, *more):
    """examples/Makefile's build of NAME (with flags FL) into WORK, and the targets MORE."""
    return subprocess.run(["make", "-s", "-C", os.path.join(SRC, "examples"), "O=" + work, "TRAC=" + TRAC,
                           "PYTHON=" + PYTHON, "NP=%d" % a.np, "TRACFLAGS=-P %d -v" % a.np,
                           "%s_FLAGS=%s" % (name, fl), "%s/%s" % (work, name)] + list(more),
                          env=env, capture_output=True, text=True)


def plan_id(work, name, env):
    """Six hex digits naming the plan NAME was compiled with: its `--explain --no-costs` under the
    same flags and model.  Two calibrations can plan an example two ways; a ratio far from the
    others' with another plan is the model's error, not the host's (nnsearch's blocks of 50)."""
    cmd = open(os.path.join(work, name + ".flags")).read().split()
    r = subprocess.run(cmd + [name + ".tra", "--explain", "--no-costs"], cwd=os.path.join(SRC, "examples"),
                       env=env, capture_output=True, text=True)
    return hashlib.md5(r.stdout.encode()).hexdigest()[:6] if r.returncode == 0 else "?"


def children_cpu():
    """CPU seconds (user and system) of every process waited for so far: mpirun and its ranks."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def baseline(work, env, np_, reps):
    """CPU seconds per rank of a program that does nothing (a 1 x 1 x 1 matmul): MPI's and the
    runtime's start and end, which no plan predicts; the smallest of reps runs."""
    tra = os.path.join(work, "empty.tra")
    with open(tra, "w") as f:
        f.write("size I = 1;\ninput A[I, I];\nC[i, j] = A[i, k] * A[k, j];\noutput C;\n")
    exe = os.path.join(work, "empty")
    r = subprocess.run([TRAC, "-v", "-P", str(np_), tra, "-o", exe], env=env, check=True, capture_output=True,
                       text=True)
    model = re.search(r"trac: machine model: (.*)", r.stderr)
    print("# machine model: %s" % (model.group(1) if model else "?"))
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1), }"
    header += b" " * (127 - 10 - len(header)) + b"\n"
    with open(os.path.join(work, "empty-A.npy"), "wb") as f:        # a 1 x 1 .npy, without numpy
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + struct.pack("<f", 1))
    best = []
    for _ in range(reps):
        c0 = children_cpu()
        subprocess.run([MPIRUN, "-np", str(np_), "--bind-to", "none", exe, "A=" + os.path.join(work, "empty-A.npy"),
                        "C.out=" + os.path.join(work, "empty-C.npy")], env=env, check=True, capture_output=True)
        best.append((children_cpu() - c0) / np_)
    return min(best)


def summary(text):
    """--profile's summary line as {key: value}."""
    for line in text.splitlines():
        if line.startswith("summary:"):
            return {k: v for k, v in re.findall(r"(\w+)=(\S+)", line)}
    raise RuntimeError("no summary line in the profile:\n" + text[-2000:])


def op_times(text):
    """--profile's op lines as {op: (kind, label, seconds, predicted seconds)}: the label may hold
    spaces, the twelve columns after it do not."""
    ops = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 15 and f[0].isdigit() and f[1].isalpha():
            try:
                ops[int(f[0])] = (f[1], " ".join(f[2:-12]), float(f[-11]), float(f[-10]))
            except ValueError:
                pass
    return ops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--cache", help="the host model's cache folder (XDG_CACHE_HOME); default: a new one")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--ops", type=int, default=0, help="each example's N ops furthest over and under")
    a = ap.parse_args()
    names, flags = makefile_flags()
    if a.only:
        names = [n for n in names if n in a.only.split(",")]
    work = tempfile.mkdtemp(prefix="trac-predict-")
    env = dict(os.environ, TRAC_MACHINE="host", XDG_CACHE_HOME=a.cache or os.path.join(work, "cache"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("TRAC_CALIBRATE", None)
    commit = subprocess.run(["git", "-C", SRC, "log", "-1", "--format=%h"], capture_output=True,
                            text=True).stdout.strip()
    print("# bench/predict.py --reps %d --np %d, %s UTC, commit %s; %s" % (
        a.reps, a.np, time.strftime("%Y-%m-%d %H:%M", time.gmtime()), commit, open("/proc/loadavg").read().strip()))
    base = baseline(work, env, a.np, max(a.reps, 3))
    print("# proc cpu: each run's CPU seconds per rank (mpirun and its ranks, user and system) less %.3f s, "
          "an empty program's" % base)
    built = []              # (name, flags, tensor arguments), in the Makefile's order
    for name in names:
        fl = SIZES.get(name) or flags.get(name, "")         # SIZES replaces the Makefile's flags
        r = make(a, env, work, name, fl, "%s/%s.in/stamp" % (work, name))
        if r.returncode:
            print("%s: build failed\n%s%s" % (name, r.stdout, r.stderr))
            continue
        model = re.search(r"trac: machine model: (.*)", r.stderr)
        if model and "cached" not in model.group(1):
            print("# %s: machine model %s" % (name, model.group(1)))
        args = tensor_args(work, name)
        counts = sparse_counts(args)
        if counts:                  # compiled again, planned with the inputs' counts
            fl = (fl + " " + counts).strip()
            os.remove(os.path.join(work, name))
            r = make(a, env, work, name, fl)
            if r.returncode:
                print("%s: build failed\n%s%s" % (name, r.stdout, r.stderr))
                continue
        built.append((name, fl, args, plan_id(work, name, env)))
    # The runs go round the examples, one run of each a round, so that a slow spell of the host
    # (they last minutes here) slows one run of many examples, not every run of one.
    runs = {name: {"pred": [], "run": [], "cpu": [], "proc": [], "proc_cpu": []} for name, _, _, _ in built}
    ops = {name: {} for name, _, _, _ in built}    # op: (kind, label, [seconds], predicted)
    for rep in range(a.reps):
        t0 = time.time()
        for name, fl, args, _ in built:
            m = runs[name]
            os.makedirs(os.path.join(work, name + ".out"), exist_ok=True)
            t1, c0 = time.time(), children_cpu()
            p = subprocess.run([MPIRUN, "-np", str(a.np), "--bind-to", "none", os.path.join(work, name)] + args +
                               ["--profile"], env=env, capture_output=True, text=True)
            m["proc"].append(time.time() - t1)
            m["proc_cpu"].append((children_cpu() - c0) / a.np - base)
            if p.returncode:
                raise RuntimeError("%s failed:\n%s" % (name, p.stderr[-2000:]))
            s = summary(p.stdout)
            m["pred"].append(float(s["pred_s"]))
            m["run"].append(float(s["total_s"]))
            m["cpu"].append(float(s["cpu_s"]))
            for op, (kind, label, sec, pred) in op_times(p.stdout).items():
                ops[name].setdefault(op, (kind, label, [], pred))[2].append(sec)
        print("# round %d of %d: %.1f s" % (rep + 1, a.reps, time.time() - t0), flush=True)
    rows = []
    med = statistics.median
    for name, fl, _, plan in built:
        m = {k: med(v) for k, v in runs[name].items()}
        ratio = m["pred"] / m["cpu"]
        rows.append((name, fl, plan, m["pred"], m["run"], m["cpu"], m["proc_cpu"], m["pred"] / m["run"], ratio))
        print("%-18s %-28s plan %s  pred %7.3f  run %7.3f  cpu %7.3f  proc cpu %7.3f  wall %7.3f  pred/run %5.2f  "
              "pred/cpu %5.2f %s" % (name, fl, plan, m["pred"], m["run"], m["cpu"], m["proc_cpu"], m["proc"],
                                     m["pred"] / m["run"], ratio, "" if 1 / 1.5 <= ratio <= 1.5 else "OUTSIDE 1.5x"))
    print()
    print("| example | flags | plan | predicted s | run s | cpu s | process cpu s | predicted / run | predicted / cpu |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, fl, plan, p, r, c, pr, rr, ratio in rows:
        print("| %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f%s |" % (name, fl or "-", plan, p, r, c, pr, rr,
              ratio,
              "" if 1 / 1.5 <= ratio <= 1.5 else " **outside**"))
    if a.ops:
        print()
        for name, _, _, _ in built:
            by = sorted(((med(t) - pred, op, kind, label, med(t), pred) for op, (kind, label, t, pred)
                         in ops[name].items()), reverse=True)
            for d, op, kind, label, t, pred in by[:a.ops] + [x for x in by[-a.ops:] if x[0] < 0][::-1]:
                print("%-18s op %3d %-8s %-34s run %8.4f  pred %8.4f  %+8.4f s" % (name, op, kind, label[:34], t,
                                                                                     pred, d))
    inside = sum(1 for row in rows if 1 / 1.5 <= row[-1] <= 1.5)
    print("\nwithin 1.5x: %d of %d; load after: %s" % (inside, len(rows), open("/proc/loadavg").read().strip()))
    if a.keep:
        print("work folder: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if inside == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
