#!/usr/bin/python3
"""
gcn_sparse.py: issue 13's full-graph GCN benchmark, trac against PyTorch.

    gcn_sparse.py [--nodes V] [--edges N] [--reps R] [--ranks P] [--threads T]
                  [--epochs E] [--mem-per-rank 2G] [--no-torch] [--ordered]
    gcn_sparse.py --ooc SIZE [--nodes V] [--edges N] [--reps R] [--ranks P] [--epochs E]
    gcn_sparse.py torch DIR EPOCHS [W1 W2]   (the PyTorch side, run as its own process)

A graph of ogbn-arxiv's size by default (169,343 nodes, 1.17M undirected
edges) with skewed degrees: each edge's endpoints are drawn from a power law
over the nodes, so a few nodes have thousands of neighbours and most have a
handful; --ordered leaves the node ids in degree order, so the heavy rows
sit together in the first blocks (issue 33's test of the placement).  The
adjacency is symmetric, with self loops, normalised
D^-1/2 (A + I) D^-1/2 and saved as a scipy csr .npz (save_npz's default, deflated); 128 features, 40
classes, 10% of the nodes labelled.  Both sides run bench/gcn_sparse.tra's
computation: two layers (hidden 64), E epochs of full-batch gradient descent,
then write W1 and W2.  trac runs on P ranks (default 2), PyTorch with T
threads (default 2; torch.sparse CSR matmul), whole processes timed (start-up,
reading the files, the epochs, writing), alternating, medians of R runs.
The two sides' losses are compared: the same data, the same recipe, but not
the same initial weights (each side's own generator).

--ooc SIZE (make bench-gcn-ooc; issue 32): out of core.  trac compiles the
program twice, in memory and with --mem-per-rank SIZE; both run with the
same initial weights as PyTorch (W1=file W2=file; written once, seed 1),
PyTorch first, then the two trac plans alternating, each rank under
/usr/bin/time (its max resident set, measured from outside); it prints the
median times, their ratio, each rank's max RSS against the budget, and the
largest difference of the out-of-core weights from PyTorch's and from
trac's in-memory ones.  Exit status 1 when a weight differs by more than
--tol (1e-4).

trac plans with its model of this machine (--machine host: its cached
quick calibration, as an installed trac plans), not the build tree's fixed
reference model, unless TRAC_MACHINE names a model file; --ooc keeps the
reference model its figures were taken with.

Environment: TRAC, MPIRUN, PYTHON (make bench-gcn sets them), TRAC_MACHINE.
"""
import os, subprocess, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def make_data(d, V, E, F=128, C=40, shuffle=True):
    import scipy.sparse as sp
    if os.path.exists(os.path.join(d, "A.npz")):
        return
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    # power-law endpoints: node k drawn with weight (k + 1)^-0.9, then the
    # node ids shuffled so heavy nodes are spread over the blocks
    w = (np.arange(V) + 1.0) ** -0.9
    w /= w.sum()
    perm = rng.permutation(V)
    src = rng.choice(V, E, p=w)
    src = perm[src] if shuffle else src
    dst = rng.integers(0, V, E)
    A = sp.coo_matrix((np.ones(E), (src, dst)), shape=(V, V)).tocsr()
    A = ((A + A.T) > 0).astype(np.float64) + sp.identity(V, format="csr")
    deg = np.asarray(A.sum(1)).ravel()
    dinv = sp.diags(1 / np.sqrt(deg))
    A = (dinv @ A @ dinv).tocsr().astype(np.float32)
    A.sort_indices()
    sp.save_npz(os.path.join(d, "A.npz"), A)            # scipy's default: deflated
    labels = rng.integers(0, C, V)
    centers = rng.standard_normal((C, F))
    np.save(os.path.join(d, "X.npy"), (centers[labels] * 0.3 + rng.standard_normal((V, F))).astype(np.float32))
    np.save(os.path.join(d, "Y.npy"), np.eye(C, dtype=np.float32)[labels])
    np.save(os.path.join(d, "M.npy"), (rng.random(V) < 0.1).astype(np.float32))
    deg = np.diff(A.indptr)
    print("graph: %d nodes, %d stored elements, degree median %d, max %d" %
          (V, A.nnz, np.median(deg), deg.max()))


def torch_side(d, epochs, w1=None, w2=None):
    import scipy.sparse as sp
    import torch
    torch.manual_seed(0)
    a = sp.load_npz(os.path.join(d, "A.npz")).tocsr()
    A = torch.sparse_csr_tensor(torch.from_numpy(a.indptr.astype(np.int64)),
                                torch.from_numpy(a.indices.astype(np.int64)),
                                torch.from_numpy(a.data), size=a.shape)
    X = torch.from_numpy(np.load(os.path.join(d, "X.npy")))
    Y = torch.from_numpy(np.load(os.path.join(d, "Y.npy")))
    M = torch.from_numpy(np.load(os.path.join(d, "M.npy")))
    F, C = X.shape[1], Y.shape[1]
    if w1:
        W1 = torch.from_numpy(np.load(w1)).requires_grad_()
        W2 = torch.from_numpy(np.load(w2)).requires_grad_()
    else:
        W1 = (torch.randn(F, 64) * 0.1).requires_grad_()
        W2 = (torch.randn(64, C) * 0.1).requires_grad_()
    AX = A @ X
    for e in range(epochs):
        H1 = torch.relu(AX @ W1)
        Z = A @ (H1 @ W2)
        lse = torch.logsumexp(Z, 1)
        loss = (M * (Y * (lse[:, None] - Z)).sum(1)).sum() / M.sum()
        g1, g2 = torch.autograd.grad(loss, (W1, W2))
        with torch.no_grad():
            W1 -= 0.5 * g1
            W2 -= 0.5 * g2
        print("loss = %.9g" % loss.item(), flush=True)
    np.save(os.path.join(d, "torch_W1.npy"), W1.detach().numpy())
    np.save(os.path.join(d, "torch_W2.npy"), W2.detach().numpy())


def size_bytes(s):
    k = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(float(s[:-1]) * k[s[-1].upper()]) if s[-1].upper() in k else int(s)


def ooc(V, E, budget):
    """Issue 32's benchmark: the out-of-core plan against trac's in-memory
    plan and PyTorch's in-memory run, from the same initial weights."""
    import tempfile
    import scipy.sparse as sp
    reps, ranks, epochs = arg("--reps", 3), arg("--ranks", 2), arg("--epochs", 2)
    tol = arg("--tol", 1e-4)
    trac, mpirun = os.environ.get("TRAC", "trac"), os.environ.get("MPIRUN", "mpirun")
    work = os.path.abspath(os.environ.get("BENCH_WORK", "bench-work"))
    d = os.path.join(work, "gcn-%d-%d" % (V, E))
    make_data(d, V, E)
    nnz = sp.load_npz(os.path.join(d, "A.npz")).nnz
    F, C = np.load(os.path.join(d, "X.npy"), mmap_mode="r").shape[1], np.load(os.path.join(d, "Y.npy"), mmap_mode="r").shape[1]
    rng = np.random.default_rng(1)
    init = {"W1": os.path.join(d, "W1.init.npy"), "W2": os.path.join(d, "W2.init.npy")}
    np.save(init["W1"], (rng.standard_normal((F, 64)) * 0.1).astype(np.float32))
    np.save(init["W2"], (rng.standard_normal((64, C)) * 0.1).astype(np.float32))
    print("graph: %d nodes, %d stored elements; %d ranks, %d epochs, budget %s a rank" % (V, nnz, ranks, epochs, budget))
    plans = {"trac in memory": [], "trac out of core": ["--mem-per-rank", budget]}
    exes = {}
    for k, flags in plans.items():
        exes[k] = os.path.join(d, "gcn_ooc" if flags else "gcn_mem")
        cmd = [trac, "-P", str(ranks), "-D", "V=%d" % V, "-D", "E=%d" % epochs, "--nnz", "A=%d" % nnz] + flags + \
              [os.path.join(HERE, "gcn_sparse.tra")]
        subprocess.run(cmd + ["-o", exes[k]], check=True)
        plan = subprocess.run(cmd + ["--explain"], check=True, capture_output=True, text=True).stdout.splitlines()
        print("%s: %s" % (k, " | ".join(l for l in plan[:6] if l.startswith(("plan", "out of core", "blocks")))))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
    env.pop("OPENBLAS_CORETYPE", None)
    tmp = tempfile.mkdtemp(prefix="gcn-ooc-")
    outs = {k: os.path.join(tmp, k.split()[-1]) for k in plans}
    def run(k):
        os.makedirs(outs[k], exist_ok=True)
        rss = os.path.join(tmp, "rss.%s" % k.split()[-1])
        # each rank under /usr/bin/time: its own max resident set
        cmd = [mpirun, "-np", str(ranks), "sh", "-c",
               '/usr/bin/time -f %%M -o %s.$OMPI_COMM_WORLD_RANK "$@"' % rss, "sh", exes[k]] + \
              ["%s=%s" % (t, os.path.join(d, t + ".npy")) for t in "XYM"] + ["A=" + os.path.join(d, "A.npz")] + \
              ["%s=%s" % (w, f) for w, f in init.items()] + \
              ["%s.out=%s" % (w, os.path.join(outs[k], w + ".npy")) for w in init]
        t0 = time.time()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        t = time.time() - t0
        if p.returncode != 0:
            sys.exit("%s failed:\n%s%s" % (k, p.stdout, p.stderr))
        kb = [int(open("%s.%d" % (rss, r)).read().split()[-1]) for r in range(ranks)]
        return t, kb, " ".join(l.split("=")[-1].strip() for l in p.stdout.splitlines() if "loss" in l)
    t0 = time.time()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, os.path.abspath(__file__), "torch", d, str(epochs),
                        init["W1"], init["W2"]], env=dict(env, OMP_NUM_THREADS="2"), capture_output=True, text=True)
    ttorch = time.time() - t0
    if p.returncode != 0:
        sys.exit("torch failed:\n%s%s" % (p.stdout, p.stderr))
    print("PyTorch in memory: %.2f s, max RSS %d MB, losses %s" % (ttorch, int(p.stderr.split()[-1]) >> 10,
          " ".join(l.split("=")[-1].strip() for l in p.stdout.splitlines() if "loss" in l)))
    times, rss = {k: [] for k in plans}, {k: [] for k in plans}
    for rep in range(reps):
        for k in plans:
            t, kb, losses = run(k)
            times[k].append(t)
            rss[k].append(kb)
            print("%s: %.2f s, max RSS per rank %s MB, losses %s" % (k, t, " ".join(str(x >> 10) for x in kb), losses),
                  flush=True)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    peak = {k: [max(r[i] for r in v) << 10 for i in range(ranks)] for k, v in rss.items()}
    ok = True
    for w in init:
        ref = np.load(os.path.join(d, "torch_%s.npy" % w))
        a, b = np.load(os.path.join(outs["trac out of core"], w + ".npy")), np.load(os.path.join(outs["trac in memory"], w + ".npy"))
        da, db = np.abs(a - ref).max(), np.abs(a - b).max()
        ok &= bool(da <= tol)
        print("%s: out of core vs PyTorch max |diff| %.3g, vs trac in memory %.3g, in memory vs PyTorch %.3g" %
              (w, da, db, np.abs(b - ref).max()))
    print("whole processes, %d epochs, medians of %d: trac in memory %.2f s, out of core %.2f s, ratio %.2f" %
          (epochs, reps, med["trac in memory"], med["trac out of core"], med["trac out of core"] / med["trac in memory"]))
    print("max RSS per rank: in memory %s MB; out of core %s MB (budget %d MB)" %
          (" ".join(str(x >> 20) for x in peak["trac in memory"]), " ".join(str(x >> 20) for x in peak["trac out of core"]),
           size_bytes(budget) >> 20))
    print("runs: in memory %s; out of core %s" % (" ".join("%.2f" % t for t in times["trac in memory"]),
                                                  " ".join("%.2f" % t for t in times["trac out of core"])))
    if not ok:
        sys.exit("the out-of-core weights differ from PyTorch's by more than %g" % tol)


def main():
    V, E = arg("--nodes", 169343), arg("--edges", 1166243)
    reps, ranks, threads, epochs = arg("--reps", 3), arg("--ranks", 2), arg("--threads", 2), arg("--epochs", 5)
    trac, mpirun = os.environ.get("TRAC", "trac"), os.environ.get("MPIRUN", "mpirun")
    work = os.path.abspath(os.environ.get("BENCH_WORK", "bench-work"))
    ordered = "--ordered" in sys.argv
    if "--ooc" in sys.argv:
        return ooc(V, E, arg("--ooc", "1G"))
    d = os.path.join(work, "gcn-%d-%d%s" % (V, E, "-ordered" if ordered else ""))
    make_data(d, V, E, shuffle=not ordered)
    exe = os.path.join(d, "gcn_sparse")
    mem = arg("--mem-per-rank", "")
    model = [] if os.environ.get("TRAC_MACHINE") else ["--machine", "host"]
    subprocess.run([trac, "-P", str(ranks), "-D", "V=%d" % V, "-D", "E=%d" % epochs] + model +
                   (["--mem-per-rank", mem] if mem else []) +
                   [os.path.join(HERE, "gcn_sparse.tra"), "-o", exe], check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    cmds = {
        "trac": [mpirun, "-np", str(ranks), exe] + ["%s=%s" % (t, os.path.join(d, t + ".npy")) for t in "XYM"] +
                ["A=" + os.path.join(d, "A.npz"), "W1.out=" + os.path.join(d, "W1.npy"),
                 "W2.out=" + os.path.join(d, "W2.npy")],
        "torch": [sys.executable, os.path.abspath(__file__), "torch", d, str(epochs)],
    }
    if "--no-torch" in sys.argv:
        del cmds["torch"]
    times = {k: [] for k in cmds}
    for rep in range(reps):
        for k, cmd in cmds.items():
            t0 = time.time()
            p = subprocess.run(cmd, env=env, capture_output=True, text=True)
            times[k].append(time.time() - t0)
            if p.returncode != 0:
                sys.exit("%s failed:\n%s%s" % (k, p.stdout, p.stderr))
            if rep == 0:
                print("%s: %s" % (k, " ".join(l.split("=")[-1].strip() for l in p.stdout.splitlines()
                                                if "loss" in l)))
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    if "torch" not in med:
        print("whole process, %d epochs, medians of %d: trac %d ranks %.2f s" % (epochs, reps, ranks, med["trac"]))
        return
    print("whole process, %d epochs, medians of %d: trac %d ranks %.2f s, PyTorch %d threads %.2f s, "
          "speed ratio (torch / trac) %.2f" % (epochs, reps, ranks, med["trac"], threads, med["torch"],
                                              med["torch"] / med["trac"]))
    print("runs: trac %s; torch %s" % (" ".join("%.2f" % t for t in times["trac"]),
                                       " ".join("%.2f" % t for t in times["torch"])))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "torch":
        torch_side(sys.argv[2], int(sys.argv[3]), *sys.argv[4:6])
    else:
        main()
