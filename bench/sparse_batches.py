#!/usr/bin/python3
"""
sparse_batches.py: mini-batches of a sparse input (LANGUAGE.md's index
arithmetic on a sparse input: A[b*B + n, d]), trac against scipy and
PyTorch.

    sparse_batches.py [--rows N] [--reps R]
    sparse_batches.py scipy DIR | torch DIR     (one side, run as its own process)

A bag-of-words-like csr matrix of N rows (524,288 by default) and 50,000
columns, 20 elements a row at random columns (10.5M stored), saved as
save_npz saves it by default (deflated), and W of 50,000 x 64.  Each side
computes bench/sparse_batches.tra: for each batch of 1024 rows, relu(A_b W)
summed over the batch's rows.  trac on 1 and 2 ranks (planned with
--machine host, as an installed trac plans, unless TRAC_MACHINE names a
model), scipy on one core, PyTorch's sparse CSR matmul on 2 threads; whole
processes (start-up, reading the files, the batches, writing s), alternating,
medians of R runs, and each side's s against scipy's.

Environment: TRAC, MPIRUN, PYTHON (make bench-sparse-batches sets them),
TRAC_MACHINE.
"""
import os, subprocess, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
D, H, B = 50000, 64, 1024


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def make_data(d, N):
    import scipy.sparse as sp
    if os.path.exists(os.path.join(d, "A.npz")):
        return
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(0)
    nnz = 20 * N
    rows = np.sort(rng.integers(0, N, nnz))
    A = sp.csr_matrix((rng.standard_normal(nnz).astype(np.float32), (rows, rng.integers(0, D, nnz))),
                      shape=(N, D))
    A.sum_duplicates()
    sp.save_npz(os.path.join(d, "A.npz"), A)
    np.save(os.path.join(d, "W.npy"), (rng.standard_normal((D, H)) * 0.1).astype(np.float32))


def side(which, d):
    """One side's computation, in this process (timed from outside)."""
    import scipy.sparse as sp
    A = sp.load_npz(os.path.join(d, "A.npz")).tocsr()
    W = np.load(os.path.join(d, "W.npy"))
    nb = A.shape[0] // B
    if which == "scipy":
        s = np.stack([np.maximum(A[b * B:(b + 1) * B] @ W, 0).sum(0) for b in range(nb)])
    else:
        import torch, warnings
        warnings.filterwarnings("ignore")      # sparse CSR is a beta feature
        torch.set_num_threads(2)
        Wt = torch.from_numpy(W)
        s = torch.zeros((nb, H))
        for b in range(nb):
            a = A[b * B:(b + 1) * B]
            t = torch.sparse_csr_tensor(torch.from_numpy(a.indptr).long(), torch.from_numpy(a.indices).long(),
                                        torch.from_numpy(a.data), size=a.shape)
            s[b] = torch.relu(t @ Wt).sum(0)
        s = s.numpy()
    np.save(os.path.join(d, "s_%s.npy" % which), s.astype(np.float32))


def main():
    if len(sys.argv) > 2 and sys.argv[1] in ("scipy", "torch"):
        side(sys.argv[1], sys.argv[2])
        return
    N, reps = arg("--rows", 524288), arg("--reps", 3)
    trac, mpirun, py = os.environ.get("TRAC", "trac"), os.environ.get("MPIRUN", "mpirun"), \
        os.environ.get("PYTHON", sys.executable)
    d = os.path.abspath(os.path.join(os.environ.get("BENCH_WORK", "bench-work"), "sparse_batches-%d" % N))
    make_data(d, N)
    import scipy.sparse as sp
    nnz = sp.load_npz(os.path.join(d, "A.npz")).nnz
    model = [] if os.environ.get("TRAC_MACHINE") else ["--machine", "host"]
    exe = os.path.join(d, "prog")
    subprocess.run([trac, "-P", "1,2", "-D", "N=%d" % N, "--nnz", "A=%d" % nnz] + model +
                   [os.path.join(HERE, "sparse_batches.tra"), "-o", exe], check=True)
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    runs = {"trac 1 rank": [mpirun, "-np", "1", exe], "trac 2 ranks": [mpirun, "-np", "2", exe],
            "scipy": [py, os.path.abspath(__file__), "scipy", "."],
            "PyTorch, 2 threads": [py, os.path.abspath(__file__), "torch", "."]}
    args = {"trac 1 rank": ["A=A.npz", "W=W.npy", "s.out=s_trac1.npy"],
            "trac 2 ranks": ["A=A.npz", "W=W.npy", "s.out=s_trac2.npy"]}
    times = {k: [] for k in runs}
    for _ in range(reps):
        for k, cmd in runs.items():
            t0 = time.perf_counter()
            subprocess.run(cmd + args.get(k, []), cwd=d, env=env, check=True, stdout=subprocess.DEVNULL)
            times[k].append(time.perf_counter() - t0)
    ref = np.load(os.path.join(d, "s_scipy.npy")).astype(np.float64)
    print("%d x %d, %d stored, batches of %d, W %d wide; whole processes, medians of %d" % (N, D, nnz, B, H, reps))
    for k, f in (("trac 1 rank", "s_trac1"), ("trac 2 ranks", "s_trac2"), ("scipy", "s_scipy"),
                 ("PyTorch, 2 threads", "s_torch")):
        err = np.abs(np.load(os.path.join(d, f + ".npy")) - ref).max() / np.abs(ref).max()
        print("   %-20s %7.2f s   (%s)   s within %.1e of scipy's" % (
            k, float(np.median(times[k])), " ".join("%.2f" % t for t in times[k]), err))


if __name__ == "__main__":
    main()
