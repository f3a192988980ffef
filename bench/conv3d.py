#!/usr/bin/python3
"""
conv3d.py: examples/conv3d.tra, ten 3x3x3 kernels over 3 x 16 x 270 x 480
(the two-phase paper's 3D convolution, scaled), trac on 2 ranks against
PyTorch's conv3d with 2 threads, whole processes, side by side.

    make bench-conv3d                     # or: bench/conv3d.py [--reps N]

Each run is a whole process: reading X and K from .npy, the convolution,
writing Y (.npy); runs alternate, and the table gives the medians.

Environment: TRAC (default ./trac), MPIRUN, PYTHON.
"""
import os, statistics, subprocess, sys, tempfile, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TRAC = os.path.abspath(os.environ.get("TRAC", "./trac"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
env.pop("OPENBLAS_CORETYPE", None)

TORCH = """
import numpy as np, torch
torch.set_num_threads(2)
X, K = torch.tensor(np.load("X.npy")), torch.tensor(np.load("K.npy"))
np.save("Yt.npy", torch.nn.functional.conv3d(X[None], K)[0].numpy())
"""


def timed(args, cwd):
    t = time.perf_counter()
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit("%s failed:\n%s%s" % (args[0], p.stdout, p.stderr))
    return time.perf_counter() - t


def main():
    with tempfile.TemporaryDirectory(prefix="trac-conv3d.") as d:
        r = np.random.default_rng(0)
        np.save(os.path.join(d, "X.npy"), r.standard_normal((3, 16, 270, 480)).astype(np.float32))
        np.save(os.path.join(d, "K.npy"), r.standard_normal((10, 3, 3, 3, 3)).astype(np.float32))
        exe = os.path.join(d, "conv3d")
        subprocess.run([TRAC, "-P", "2", os.path.join(HERE, "..", "examples", "conv3d.tra"), "-o", exe], check=True)
        runs = {"trac": [], "torch": []}
        for _ in range(REPS):
            runs["trac"].append(timed([MPIRUN, "-np", "2", exe, "X=X.npy", "K=K.npy", "Y=Y.npy"], d))
            runs["torch"].append(timed([PYTHON, "-c", TORCH], d))
        Y, Yt = np.load(os.path.join(d, "Y.npy")), np.load(os.path.join(d, "Yt.npy"))
        err = np.abs(Y - Yt).max() / np.abs(Yt).max()
        med = {k: statistics.median(v) for k, v in runs.items()}
        print("3D convolution, 10 kernels 3x3x3 over 3 x 16 x 270 x 480, whole processes, %d runs each" % REPS)
        print("%-22s %14s %14s" % ("", "trac 2 ranks", "PyTorch 2 thr"))
        print("%-22s %14.2f %14.2f" % ("median seconds", med["trac"], med["torch"]))
        print("%-22s %14s %14s" % ("seconds, each run", " ".join("%.2f" % t for t in runs["trac"]),
                                   " ".join("%.2f" % t for t in runs["torch"])))
        print("trac's speed relative to PyTorch: %.2f (target >= 1.0); max relative difference of Y %.1e"
              % (med["torch"] / med["trac"], err))


main()
