#!/usr/bin/python3
"""
conv3d.py: examples/conv3d.tra, ten 3x3x3 kernels over 3 x 16 x 270 x 480
(the two-phase paper's 3D convolution, scaled), trac on 2 ranks against
PyTorch's conv3d with 2 threads, whole processes, side by side; then a
training step's gradients through it (bench/conv3d_grad.tra: the loss
sum(Y^2), dK and dX) against PyTorch's autograd.

    make bench-conv3d                     # or: bench/conv3d.py [--reps N]

Each run is a whole process: reading X and K from .npy, the convolution
(and the gradients), writing Y (loss, dK, dX) to .npy; runs alternate, and
the tables give the medians.

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

TORCH_GRAD = """
import numpy as np, torch
torch.set_num_threads(2)
X = torch.tensor(np.load("X.npy"), requires_grad=True)
K = torch.tensor(np.load("K.npy"), requires_grad=True)
Y = torch.nn.functional.conv3d(X[None], K)[0]
loss = (Y * Y).sum()
dK, dX = torch.autograd.grad(loss, [K, X])
np.save("losst.npy", loss.detach().numpy())
np.save("dKt.npy", dK.numpy())
np.save("dXt.npy", dX.numpy())
"""


def timed(args, cwd):
    t = time.perf_counter()
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode:
        sys.exit("%s failed:\n%s%s" % (args[0], p.stdout, p.stderr))
    return time.perf_counter() - t


def table(title, runs, errs):
    med = {k: statistics.median(v) for k, v in runs.items()}
    print("%s, whole processes, %d runs each" % (title, REPS))
    print("%-22s %14s %14s" % ("", "trac 2 ranks", "PyTorch 2 thr"))
    print("%-22s %14.2f %14.2f" % ("median seconds", med["trac"], med["torch"]))
    print("%-22s %14s %14s" % ("seconds, each run", " ".join("%.2f" % t for t in runs["trac"]),
                               " ".join("%.2f" % t for t in runs["torch"])))
    print("trac's speed relative to PyTorch: %.2f (target >= 1.0); max relative difference %s"
          % (med["torch"] / med["trac"], ", ".join("of %s %.1e" % e for e in errs)))


def relerr(d, a, b):
    a, b = np.load(os.path.join(d, a)), np.load(os.path.join(d, b))
    return float(np.abs(a.astype(np.float64) - b).max() / np.abs(b).max())


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
        table("3D convolution, 10 kernels 3x3x3 over 3 x 16 x 270 x 480", runs,
              [("Y", relerr(d, "Y.npy", "Yt.npy"))])
        exe = os.path.join(d, "conv3d_grad")
        subprocess.run([TRAC, "-P", "2", os.path.join(HERE, "conv3d_grad.tra"), "-o", exe], check=True)
        runs = {"trac": [], "torch": []}
        for _ in range(REPS):
            runs["trac"].append(timed([MPIRUN, "-np", "2", exe, "X=X.npy", "K=K.npy", "loss=loss.npy",
                                       "dK=dK.npy", "dX=dX.npy"], d))
            runs["torch"].append(timed([PYTHON, "-c", TORCH_GRAD], d))
        print()
        table("Its gradients (loss sum(Y^2), dK and dX)", runs,
              [(n, relerr(d, n + ".npy", n + "t.npy")) for n in ("loss", "dK", "dX")])


main()
