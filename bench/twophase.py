#!/usr/bin/python3
"""
twophase.py: two-phase schedules (issue 9) beside the IA plans, on the
matmul shapes of the two-phase paper's Tables 2-4, scaled to this machine.

    make bench-twophase                         # every shape, 2, 3 and 4 ranks
    make bench-twophase BENCH='--quick'         # 3 repetitions, 2 ranks only
    make bench-twophase BENCH='square3 --ranks=2'

For each shape and rank count P: `trac --explain=json -P P` gives the plan
the search chooses and the predicted seconds of each strategy's best plan
(the two-phase one among them).  Then two programs are compiled and run
side by side on P ranks, alternately, repetition by repetition: the chosen
plan and its rival (when two-phase is chosen, the best IA strategy; else
the two-phase plan, forced with --strategy).  Times are --profile's
compute_s (the ops between reading and writing), medians compared.  Every
run of a two-phase plan on the rank count it was planned for checks that
the bytes its two-phase op sent are the prediction exactly.

This machine has 2 cores: 3 and 4 ranks are oversubscribed, so their times
measure the total work more than its balance across ranks; the 2-rank rows
are the ones that compare the plans as the cost model does.

Shapes (the paper's, scaled; N x K times K x M):
    strips16   Table 2: 1500 x 32000 times 32000 x 1000, the summed dim in
               16 strips of 2000 (the paper's 80 strips of 4K, scaled)
    strips15   the same in 15 strips (2134): strips do not divide the ranks
    square3    Table 3: 3072^3 in 1024 tiles, 3 x 3 x 3 (square tiles)
    square2    2048^3 in 1024 tiles, 2 x 2 x 2
    inner      Table 4, 1K x 1K x 1000K: 500 x 200000 times 200000 x 500
    wide       Table 4, 1K x 40K x 40K: 250 x 8000 times 8000 x 8000

Environment (from make): TRAC, MPIRUN, PYTHON, builddir.  Work files go to
$TRAC_BENCH_DIR/twophase (default bench-work/twophase); inputs are kept.
"""
import json, os, re, statistics, subprocess, sys

BUILD = os.path.abspath(os.environ.get("builddir", "."))
TRAC = os.environ.get("TRAC", os.path.join(BUILD, "trac"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
WORK = os.path.join(os.path.abspath(os.environ.get("TRAC_BENCH_DIR", os.path.join(BUILD, "bench-work"))),
                    "twophase")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
ENV.pop("TRAC_PROFILE", None)

QUICK = "--quick" in sys.argv
REPS = 3 if QUICK else 5
RANKS = [2] if QUICK else [2, 3, 4]
for a in sys.argv[1:]:
    if a.startswith("--reps="):
        REPS = int(a[7:])
    if a.startswith("--ranks="):
        RANKS = [int(x) for x in a[8:].split(",")]
ONLY = [a for a in sys.argv[1:] if not a.startswith("--")]

# name: (N, K, M, --block flags)
SHAPES = [
    ("strips16", 1500, 32000, 1000, ["--block", "A=1500x2000"]),
    ("strips15", 1500, 32000, 1000, ["--block", "A=1500x2134"]),
    ("square3", 3072, 3072, 3072, ["--block", "1024"]),
    ("square2", 2048, 2048, 2048, ["--block", "1024"]),
    ("inner", 500, 200000, 500, []),
    ("wide", 250, 8000, 8000, []),
]

LOG = []


def say(s=""):
    print(s, flush=True)
    LOG.append(s)


def run(cmd, check=True):
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV, cwd=WORK)
    if check and p.returncode != 0:
        raise RuntimeError("%s failed (exit %d):\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:],
                                                           p.stderr[-2000:]))
    return p


def inputs(n, k, m):
    import numpy as np
    names = []
    for name, shape in (("A", (n, k)), ("B", (k, m))):
        path = os.path.join(WORK, "%s-%dx%d.npy" % (name, *shape))
        if not os.path.exists(path):
            r = np.random.default_rng(hash(shape) % 1000)
            np.save(path, r.standard_normal(shape, dtype=np.float32))
        names.append("%s=%s" % (name, path))
    return names


def source(n, k, m):
    path = os.path.join(WORK, "mm-%dx%dx%d.tra" % (n, k, m))
    with open(path, "w") as f:
        f.write("size N = %d, K = %d, M = %d;\ninput A[N, K];\ninput B[K, M];\n"
                "C[i, j] = A[i, k] * B[k, j];\noutput C;\n" % (n, k, m))
    return path


def profile(out):
    s = re.search(r"^summary: .*", out, re.M)
    if not s:
        raise RuntimeError("no profile summary:\n" + out[-2000:])
    kv = dict(x.split("=", 1) for x in s.group(0)[len("summary: "):].split())
    ops = re.findall(r"bytes: op=\d+ kind=twophase sent=\d+ keys=(\d+) chunks=(\d+) pred=(\d+)", out)
    return float(kv["compute_s"]), ops


def main():
    os.makedirs(WORK, exist_ok=True)
    rows = []
    say("two-phase schedules beside the IA plans: %d repetitions, medians of compute_s" % REPS)
    for name, n, k, m, flags in SHAPES:
        if ONLY and name not in ONLY:
            continue
        src = source(n, k, m)
        args = inputs(n, k, m)
        for P in RANKS:
            ex = json.loads(run([TRAC, "-P", str(P), *flags, "--explain=json", src]).stdout)
            st = ex["statements"][0]
            pred = {st["strategy"]: ex["predicted_seconds"]}
            for a in st["alternatives"]:
                if a["feasible"]:
                    pred[a["strategy"]] = a["predicted_seconds"]
            chosen = st["strategy"]
            ia = {s: t for s, t in pred.items() if s != "two-phase"}
            best_ia = min(ia, key=lambda s: ia[s])
            rival = best_ia if chosen == "two-phase" else "two-phase"
            if rival not in pred:
                say("%-9s P=%d: chosen %s, no %s plan" % (name, P, chosen, rival))
                continue
            # the rival at the chosen plan's blocks, as --explain=all costs it
            text = run([TRAC, "-P", str(P), *flags, "--explain", src]).stdout
            blocks = re.search(r"^blocks: (.*)$", text, re.M).group(1)
            pin = []
            for t in blocks.split(", "):
                tname, b = t.split()
                pin += ["--block", "%s=%s" % (tname, b)]
            exes = {}
            for strat in (chosen, rival):
                exe = os.path.join(WORK, "%s-P%d-%s" % (name, P, strat))
                force = [] if strat == chosen else ["--strategy", "4=" + strat]
                run([TRAC, "-P", str(P), *flags, *pin, *force, src, "-o", exe])
                got = json.loads(run([TRAC, "-P", str(P), *flags, *pin, *force, "--explain=json", src]).stdout)
                pred[strat] = got["predicted_seconds"]
                exes[strat] = exe
            times = {s: [] for s in exes}
            bytes_ok = True
            for rep in range(REPS):
                for s, exe in exes.items():
                    out = run([MPIRUN, "-np", str(P), exe, *args, "C=" + os.path.join(WORK, "C.npy"),
                               "--profile"]).stdout
                    t, ops = profile(out)
                    times[s].append(t)
                    for keys, chunks, p in ops:
                        bytes_ok &= int(keys) == 0 and int(chunks) == int(p)
            tp, iat = statistics.median(times["two-phase"]), statistics.median(times[best_ia if chosen == "two-phase" else chosen])
            row = dict(shape=name, P=P, chosen=chosen, ia=best_ia if chosen == "two-phase" else chosen,
                       pred_tp=pred["two-phase"], pred_ia=pred[best_ia if chosen == "two-phase" else chosen],
                       meas_tp=tp, meas_ia=iat, bytes_ok=bytes_ok)
            rows.append(row)
            say("%-9s P=%d  chosen %-12s | predicted: two-phase %.3f s, %s %.3f s | measured: two-phase %.3f s, "
                "%s %.3f s, ratio %.3f | bytes %s" % (name, P, chosen, row["pred_tp"], row["ia"], row["pred_ia"],
                                                      tp, row["ia"], iat, tp / iat,
                                                      "= prediction" if bytes_ok else "DIFFER"))
    say()
    say("| shape | ranks | chosen | predicted two-phase / best IA | measured two-phase / best IA (s) | ratio | bytes |")
    say("|---|---|---|---|---|---|---|")
    for r in rows:
        say("| %s | %d%s | %s | %.3f / %.3f (%s) | %.3f / %.3f | %.3f | %s |" % (
            r["shape"], r["P"], "" if r["P"] <= 2 else " (oversubscribed)", r["chosen"], r["pred_tp"], r["pred_ia"],
            r["ia"], r["meas_tp"], r["meas_ia"], r["meas_tp"] / r["meas_ia"], "exact" if r["bytes_ok"] else "DIFFER"))
    with open(os.path.join(WORK, "results.txt"), "w") as f:
        f.write("\n".join(LOG) + "\n")


if __name__ == "__main__":
    main()
