#!/usr/bin/python3
"""
mf_sparse.py: examples/mf_sparse.tra (matrix factorisation of sparse
ratings, 200 steps of gradient descent) as whole processes, at a size
where the dense product U V^T is what costs: the sampled product (SDDMM)
against it.

    mf_sparse.py [--rows M] [--cols N] [--rank K] [--density D] [--ranks P]
                 [--reps R] [--trac PATH ...]

Ratings: O holds a 1 at a fraction D of the M x N positions (uniform), R the
rating there, from a rank-K product; both csr .npz.  Each trac given
(--trac, repeatable; default $TRAC) compiles the example for P ranks (-D
the sizes) and runs it R times under mpirun, alternating between the
compilers, whole processes timed (start-up, reading, the 200 steps,
writing).  Prints the median and every run, and each run's RMSE on the
observed ratings from the U and V it wrote (the runs must agree: both
compilers start from the same generator).

Environment: TRAC, MPIRUN.
"""
import os, subprocess, sys, time
import numpy as np
import scipy.sparse as sp

HERE = os.path.dirname(os.path.abspath(__file__))


def arg(name, default):
    if name in sys.argv:
        return type(default)(sys.argv[sys.argv.index(name) + 1])
    return default


def main():
    M, N, K = arg("--rows", 4000), arg("--cols", 4000), arg("--rank", 16)
    dens, P, reps = arg("--density", 0.01), arg("--ranks", 2), arg("--reps", 3)
    tracs = [sys.argv[i + 1] for i, a in enumerate(sys.argv) if a == "--trac"] or [os.environ.get("TRAC", "trac")]
    mpirun = os.environ.get("MPIRUN", "mpirun")
    work = os.path.abspath(os.environ.get("BENCH_WORK", "bench-work"))
    d = os.path.join(work, "mf-%d-%d-%g" % (M, N, dens))
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(5)
    O = sp.random(M, N, density=dens, format="csr", dtype=np.float32, random_state=5)
    O.data[:] = 1
    U0, V0 = rng.random((M, K)) * 0.5, rng.random((N, K)) * 0.5
    rows = np.repeat(np.arange(M), np.diff(O.indptr))
    R = O.copy()
    R.data = np.einsum("qk,qk->q", U0[rows], V0[O.indices]).astype(np.float32)
    sp.save_npz(os.path.join(d, "O.npz"), O)            # scipy's default: deflated
    sp.save_npz(os.path.join(d, "R.npz"), R)
    print("mf_sparse: %d x %d ratings, %d observed (%.2g), K = %d, %d ranks, medians of %d"
          % (M, N, O.nnz, dens, K, P, reps))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    src = os.path.join(HERE, "..", "examples", "mf_sparse.tra")
    exes = []
    for n, trac in enumerate(tracs):
        exe = os.path.join(d, "mf%d" % n)
        subprocess.run([trac, "-P", str(P), "-D", "M=%d" % M, "-D", "N=%d" % N, src, "-o", exe], check=True)
        exes.append(exe)
    times = [[] for _ in exes]
    rmse = [[] for _ in exes]
    for _ in range(reps):
        for n, exe in enumerate(exes):
            t0 = time.perf_counter()
            subprocess.run([mpirun, "-np", str(P), exe, "R=" + os.path.join(d, "R.npz"),
                            "O=" + os.path.join(d, "O.npz"), "U.out=" + os.path.join(d, "U%d.npy" % n),
                            "V.out=" + os.path.join(d, "V%d.npy" % n)],
                           env=env, check=True, capture_output=True)
            times[n].append(time.perf_counter() - t0)
            U, V = np.load(os.path.join(d, "U%d.npy" % n)), np.load(os.path.join(d, "V%d.npy" % n))
            pred = np.einsum("qk,qk->q", U[rows].astype(np.float64), V[O.indices].astype(np.float64))
            rmse[n].append(float(np.sqrt(np.mean((pred - R.data) ** 2))))
    for n, trac in enumerate(tracs):
        print("    %-40s median %8.3f s  runs %s  RMSE on observed %.4g"
              % (trac, np.median(times[n]), " ".join("%.3f" % t for t in times[n]), np.median(rmse[n])))


if __name__ == "__main__":
    main()
