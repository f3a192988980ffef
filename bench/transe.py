#!/usr/bin/python3
"""
transe.py: issue 14's TransE benchmark, trac against PyTorch.

    transe.py [--entities V] [--relations R] [--dim D] [--batch B] [--steps S]
              [--reps N] [--ranks P] [--threads T] [--baseline TRAC]
    transe.py torch DIR STEPS      (the PyTorch side, run as its own process)

examples/transe.tra's computation at a larger size: V entities and R
relations embedded in D dims, B triples with a corrupted tail each, S steps
of full-batch SGD on the margin loss (each step: four gathers of B rows,
their scatter-add gradients, the update of both tables), then both tables
written.  trac runs on P ranks (default 2), PyTorch with T threads (default
2, torch.set_num_threads), whole processes timed (start-up, reading the
files, the steps, writing), alternating, medians of N runs.  Both start from
the same embeddings, so their final tables are compared too.  --baseline
TRAC also compiles the program with another trac (an older build tree's)
and times it in the same rotation: before and after, side by side.

Environment: TRAC, MPIRUN, PYTHON.
"""
import os, subprocess, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def make_data(d, V, R, D, B):
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    h = rng.integers(0, V, B)
    r = rng.integers(0, R, B)
    t = (h + 7 * r + 1) % V
    data = dict(h=h, r=r, t=t, neg=rng.integers(0, V, B),
                E0=rng.uniform(-0.5, 0.5, (V, D)).astype(np.float32),
                R0=rng.uniform(-0.5, 0.5, (R, D)).astype(np.float32))
    for k, a in data.items():
        np.save(os.path.join(d, k + ".npy"), a)


def torch_side(d, steps):
    import torch
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    ld = lambda k: torch.from_numpy(np.load(os.path.join(d, k + ".npy")))
    h, r, t, neg = (ld(k) for k in ("h", "r", "t", "neg"))
    E = ld("E0").clone().requires_grad_(True)
    R = ld("R0").clone().requires_grad_(True)
    for _ in range(steps):
        base = E[h] + R[r]
        pos = ((base - E[t]) ** 2).sum(1)
        ng = ((base - E[neg]) ** 2).sum(1)
        loss = torch.relu(1 + pos - ng).sum() / len(h)
        gE, gR = torch.autograd.grad(loss, [E, R])
        with torch.no_grad():
            E -= 1.0 * gE
            R -= 1.0 * gR
    np.save(os.path.join(d, "E_torch.npy"), E.detach().numpy())
    np.save(os.path.join(d, "R_torch.npy"), R.detach().numpy())


def timed(cmd, env=None):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        torch_side(sys.argv[2], int(sys.argv[3]))
        return
    V, R, D, B = arg("--entities", 200000), arg("--relations", 1000), arg("--dim", 64), arg("--batch", 16384)
    S, N, P, T = arg("--steps", 50), arg("--reps", 3), arg("--ranks", 2), arg("--threads", 2)
    trac = os.environ.get("TRAC", os.path.join(HERE, "..", "trac"))
    mpirun = os.environ.get("MPIRUN", "mpirun")
    python = os.environ.get("PYTHON", "/usr/bin/python3")
    d = os.path.join(os.environ.get("TMPDIR", "/tmp"), "trac-bench-transe-%d-%d-%d-%d" % (V, R, D, B))
    make_data(d, V, R, D, B)
    src = os.path.join(HERE, "..", "examples", "transe.tra")
    # the example's program with S steps and without its print
    with open(src) as f:
        text = f.read().replace("repeat 20 {", "repeat %d {" % S).replace("    print loss;\n", "")
    src2 = os.path.join(d, "transe_bench.tra")
    with open(src2, "w") as f:
        f.write(text)
    base = arg("--baseline", "")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", THREADS=str(T))

    def build(compiler, tag):
        exe = os.path.join(d, "transe" + tag)
        subprocess.run([compiler, "-P", str(P), "-D", "V=%d" % V, "-D", "NR=%d" % R, "-D", "D=%d" % D,
                        "-D", "B=%d" % B, src2, "-o", exe], check=True)
        return [mpirun, "-np", str(P), "--bind-to", "core", exe] + \
            ["%s=%s" % (k, os.path.join(d, k + ".npy")) for k in ("h", "r", "t", "neg", "E0", "R0")] + \
            ["E.out=" + os.path.join(d, "E_trac%s.npy" % tag), "Rel.out=" + os.path.join(d, "R_trac%s.npy" % tag)]
    args = build(trac, "")
    bargs = build(base, "_base") if base else None
    tt, tp, tb = [], [], []
    for _ in range(N):
        tt.append(timed(args, env))
        if bargs:
            tb.append(timed(bargs, env))
        tp.append(timed([python, os.path.abspath(__file__), "torch", d, str(S)], env))
    mt, mp = float(np.median(tt)), float(np.median(tp))
    diff = lambda x, y: max(np.abs(np.load(os.path.join(d, a + x + ".npy")) - np.load(os.path.join(d, a + y + ".npy"))).max()
                            for a in ("E", "R"))
    print("TransE V=%d R=%d D=%d B=%d, %d steps, whole processes, medians of %d" % (V, R, D, B, S, N))
    print("  trac %d ranks:     %.2f s  %.1f steps/s   (runs %s)" % (P, mt, S / mt, " ".join("%.2f" % x for x in tt)))
    if bargs:
        mb = float(np.median(tb))
        print("  baseline %d ranks: %.2f s  %.1f steps/s   (runs %s)" % (P, mb, S / mb, " ".join("%.2f" % x for x in tb)))
    print("  PyTorch %d threads: %.2f s  %.1f steps/s   (runs %s)" % (T, mp, S / mp, " ".join("%.2f" % x for x in tp)))
    print("  ratio (PyTorch time / trac time): %.2f; final tables differ by at most %.2g" % (mp / mt, diff("_trac", "_torch")))
    if bargs:
        print("  ratio (baseline time / trac time): %.2f; final tables differ by at most %.2g" % (
            mb / mt, diff("_trac", "_trac_base")))


main()
