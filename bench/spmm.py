#!/usr/bin/python3
"""
spmm.py: issue 13's sparse kernels, trac beside scipy, PyTorch, GraphBLAS and
librsb, on one graph (bench/README.md has the table).

    spmm.py [--nodes V] [--edges N] [--features D] [--rank K] [--reps R]

The graph is gcn_sparse.py's (ogbn-arxiv's size by default: 169,343 nodes,
2.48M stored elements, skewed degrees), its normalised adjacency A.  Kernels:

    spmm    Y = A X        X dense V x D (D = 128 by default)
    spmmT   Y = A^T X      the backward pass's orientation
    sddmm   S = A .* (U W^T), U and W dense V x K (K = 64), at A's pattern

Each library's figure is the median of R calls of the kernel alone, data
already in memory (spmm_lib.c for GraphBLAS and librsb; in-process timing for
scipy and PyTorch).  trac's is the op's time from --profile (the join that
is the kernel, on every rank; the slowest rank's), medians of R whole runs,
on 1 and 2 ranks (sddmm: its two joins, the sampled sums and the product
with A's values, added).  Every result's sum is checked against scipy's.

Environment: TRAC, MPIRUN (make bench-spmm sets them); gcc builds spmm_lib.c.
"""
import os, subprocess, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gcn_sparse  # noqa: E402  (its graph)

PROGRAM = """\
size V = %(V)d, D = %(D)d, K = %(K)d;
input A[V, V] : sparse;
input X[V, D];
input U[V, K];
input W[V, K];
Y[i, d] = A[i, j] * X[j, d];
T[j, d] = A[i, j] * X[i, d];
%(sddmm)s
output Y; output T;%(sddmm_out)s
"""


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def timed(f, reps):
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        r = f()
        t.append(time.perf_counter() - t0)
    return float(np.median(t)), r


def main():
    import scipy.sparse as sp
    V, E = arg("--nodes", 169343), arg("--edges", 1166243)
    D, K, reps = arg("--features", 128), arg("--rank", 64), arg("--reps", 5)
    trac, mpirun = os.environ.get("TRAC", "trac"), os.environ.get("MPIRUN", "mpirun")
    work = os.path.abspath(os.environ.get("BENCH_WORK", "bench-work"))
    d = os.path.join(work, "gcn-%d-%d" % (V, E))
    gcn_sparse.make_data(d, V, E)
    kd = os.path.join(d, "spmm-%d-%d" % (D, K))
    os.makedirs(kd, exist_ok=True)
    A = sp.load_npz(os.path.join(d, "A.npz")).tocsr()
    rng = np.random.default_rng(1)
    X = rng.standard_normal((V, D)).astype(np.float32)
    U = rng.standard_normal((V, K)).astype(np.float32)
    W = rng.standard_normal((V, K)).astype(np.float32)
    for name, a in [("indptr.i64", A.indptr.astype(np.int64)), ("indices.i64", A.indices.astype(np.int64)),
                    ("data.f32", A.data.astype(np.float32)), ("X.f32", X), ("U.f32", U), ("W.f32", W)]:
        a.tofile(os.path.join(kd, name))
    for name, a in [("X", X), ("U", U), ("W", W)]:
        np.save(os.path.join(kd, name + ".npy"), a)
    with open(os.path.join(kd, "meta.txt"), "w") as f:
        f.write("%d %d %d %d\n" % (V, D, K, A.nnz))
    print("graph: %d nodes, %d stored elements; D = %d, K = %d; medians of %d" % (V, A.nnz, D, K, reps))

    rows = np.repeat(np.arange(V), np.diff(A.indptr))
    res = {}  # kernel -> {who: seconds}
    ref = {}
    AT = A.T.tocsr()
    for kern, f in [("spmm", lambda: A @ X), ("spmmT", lambda: A.T @ X),
                    ("sddmm", lambda: A.data * np.einsum("qk,qk->q", U[rows], W[A.indices]))]:
        s, r = timed(f, reps)
        res.setdefault(kern, {})["scipy"] = s
        ref[kern] = float(np.sum(r, dtype=np.float64))
    s, _ = timed(lambda: AT @ X, reps)
    res["spmmT"]["scipy, A^T made csr first"] = s

    try:
        import torch
        torch.set_num_threads(2)
        At = torch.sparse_csr_tensor(torch.from_numpy(A.indptr.astype(np.int64)),
                                     torch.from_numpy(A.indices.astype(np.int64)),
                                     torch.from_numpy(A.data.astype(np.float32)), size=A.shape)
        Xt, Ut, Wt = (torch.from_numpy(a) for a in (X, U, W))
        ATt = At.t().to_sparse_csr()
        for kern, f in [("spmm", lambda: At @ Xt), ("spmmT", lambda: ATt @ Xt),
                        ("sddmm", lambda: torch.sparse.sampled_addmm(At, Ut, Wt.t(), beta=0.0).values()
                         * At.values())]:
            try:
                s, r = timed(f, reps)
            except RuntimeError as e:
                print("torch %s: %s" % (kern, str(e).splitlines()[0]))
                continue
            got = float(r.to_dense().sum() if r.layout != torch.strided else r.sum())
            res[kern]["torch, 2 threads"] = s
            check(kern, "torch", got, ref[kern])
    except ImportError:
        print("torch: not installed")

    exe = os.path.join(work, "spmm_lib")
    subprocess.run(["gcc", "-O2", os.path.join(HERE, "spmm_lib.c"),
                    "-o", exe, "-lgraphblas", "-lrsb"], check=True)
    for lib in ["graphblas", "rsb"]:
        for threads in [1, 2]:
            out = subprocess.run([exe, kd, lib, str(threads), str(reps)], check=True,
                                 capture_output=True, text=True).stdout
            for line in out.split("\n"):
                if line:
                    kern, s, got = line.split()
                    res[kern]["%s, %d thread%s" % (lib, threads, "s" if threads > 1 else "")] = float(s)
                    check(kern, lib, float(got), ref[kern])

    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    env.pop("OPENBLAS_CORETYPE", None)
    # trac's sddmm is a sampled join (the sums over k only at A's
    # elements) then the product with A's values: both joins of S's
    # statement, added per run
    src = os.path.join(kd, "spmm.tra")
    with open(src, "w") as f:
        f.write(PROGRAM % {"V": V, "D": D, "K": K,
                           "sddmm": "S[i, j] = A[i, j] * (U[i, k] * W[j, k]);", "sddmm_out": " output S;"})
    for ranks in [1, 2]:
        prog = os.path.join(kd, "spmm%d" % ranks)
        subprocess.run([trac, "-P", str(ranks), src, "-o", prog], check=True)
        times = {}
        for _ in range(reps):
            run = {}
            outs = ["Y=" + os.path.join(kd, "tY.npy"), "T=" + os.path.join(kd, "tT.npy"),
                    "S=" + os.path.join(kd, "tS.npz")]
            p = subprocess.run([mpirun, "-np", str(ranks), prog, "A=" + os.path.join(d, "A.npz")] +
                               ["%s=%s" % (t, os.path.join(kd, t + ".npy")) for t in "XUW"] + outs +
                               ["--profile"], env=env, check=True, capture_output=True, text=True)
            for line in p.stdout.split("\n") + p.stderr.split("\n"):
                f = line.split()
                if len(f) > 3 and f[1] == "join":
                    label = line[line.index("join") + 4:].strip()
                    key = {"Y": "spmm", "T": "spmmT", "S": "sddmm"}.get(label[:1])
                    secs = float(line.split()[-11])     # seconds: the 11th from the end
                    if key:
                        run[key] = run.get(key, 0) + secs
            for key, secs in run.items():
                times.setdefault(key, []).append(secs)
        for kern, t in times.items():
            res[kern]["trac, %d rank%s" % (ranks, "s" if ranks > 1 else "")] = float(np.median(t))
        check("spmm", "trac", float(np.load(os.path.join(kd, "tY.npy")).sum(dtype=np.float64)), ref["spmm"])
        check("spmmT", "trac", float(np.load(os.path.join(kd, "tT.npy")).sum(dtype=np.float64)), ref["spmmT"])
        check("sddmm", "trac", float(sp.load_npz(os.path.join(kd, "tS.npz")).sum()), ref["sddmm"])

    flops = {"spmm": 2 * A.nnz * D, "spmmT": 2 * A.nnz * D, "sddmm": 2 * A.nnz * K}
    for kern in ["spmm", "spmmT", "sddmm"]:
        print("%s (%.2e flops):" % (kern, flops[kern]))
        base = res[kern]["scipy"]
        for who, s in sorted(res[kern].items(), key=lambda kv: kv[1]):
            print("    %-28s %9.4f s  %6.2f GFLOP/s  %5.2fx scipy" % (who, s, flops[kern] / s / 1e9, base / s))


def check(kern, who, got, want):
    if abs(got - want) > 1e-3 * (1 + abs(want)):
        print("%s %s: sum %.6g, scipy's %.6g: WRONG" % (who, kern, got, want))
        sys.exit(1)


if __name__ == "__main__":
    main()
