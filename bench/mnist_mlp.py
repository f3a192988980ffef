#!/usr/bin/python3
"""
mnist_mlp.py: examples/mnist_mlp.tra on the whole of Fashion-MNIST (2 epochs
of batch-100 SGD, 1,200 steps, then the 10,000 test images), trac on 2
ranks against PyTorch with 2 threads, whole processes, side by side.

    make bench-mnist                      # or: bench/mnist_mlp.py [--reps N]

Both start from the same initial weights (nn.Linear's uniform init, from
examples/mnist_mlp.py's data()) and run the same recipe (examples/
mnist_mlp.py's torch_train).  Each run is a whole process: reading the
.npy files, training, testing; runs alternate, and the table gives each
side's median wall time, its test accuracy, and trac's speed relative to
PyTorch.

Environment: TRAC (default ./trac), MPIRUN, PYTHON.
"""
import os, statistics, subprocess, sys, tempfile, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "examples")
sys.path.insert(0, EXAMPLES)
sys.dont_write_bytecode = True
import mnist_mlp                        # noqa: E402

TRAC = os.path.abspath(os.environ.get("TRAC", "./trac"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
REPS = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 3
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1")
env.pop("OPENBLAS_CORETYPE", None)

TORCH = """
import sys, numpy as np
sys.path.insert(0, %r)
import mnist_mlp
a = [np.load(k + ".npy") for k in "X labels Xt tlabels W1init W2init".split()]
acc, W1, W2 = mnist_mlp.torch_train(*a, threads=2)
print("acc = %%.9g" %% acc)
""" % EXAMPLES


def timed(args, cwd):
    t = time.perf_counter()
    p = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if p.returncode:
        sys.exit("%s failed:\n%s%s" % (args[0], p.stdout, p.stderr))
    acc = [l for l in p.stdout.splitlines() if l.startswith("acc = ")]
    return dt, float(acc[-1].split("=")[1])


def main():
    with tempfile.TemporaryDirectory(prefix="trac-mnist.") as d:
        shapes = dict(X=(60000, 784), Xt=(10000, 784), W1init=(784, 256), W2init=(256, 10))
        for k, v in mnist_mlp.data(shapes, np.random.default_rng(0)).items():
            np.save(os.path.join(d, k + ".npy"), np.asarray(v, np.int64 if "labels" in k else np.float32))
        exe = os.path.join(d, "mnist_mlp")
        subprocess.run([TRAC, "-P", "2", os.path.join(EXAMPLES, "mnist_mlp.tra"), "-o", exe], check=True)
        trac_args = [MPIRUN, "-np", "2", exe] + ["%s=%s.npy" % (k, k) for k in
                                                 "X labels Xt tlabels W1init W2init".split()]
        torch_args = [PYTHON, "-c", TORCH]
        runs = {"trac": [], "torch": []}
        for _ in range(REPS):
            runs["trac"].append(timed(trac_args, d))
            runs["torch"].append(timed(torch_args, d))
        med = {k: statistics.median(t for t, _ in v) for k, v in runs.items()}
        print("Fashion-MNIST MLP 784-256-10, 2 epochs of batch-100 SGD (1,200 steps), whole processes, %d runs each"
              % REPS)
        print("%-22s %14s %14s" % ("", "trac 2 ranks", "PyTorch 2 thr"))
        print("%-22s %14.2f %14.2f" % ("median seconds", med["trac"], med["torch"]))
        print("%-22s %14s %14s" % ("seconds, each run", " ".join("%.2f" % t for t, _ in runs["trac"]),
                                   " ".join("%.2f" % t for t, _ in runs["torch"])))
        print("%-22s %14.4f %14.4f" % ("test accuracy", runs["trac"][0][1], runs["torch"][0][1]))
        print("trac's speed relative to PyTorch: %.2f (target >= 1.0); accuracy difference %.2f points "
              "(target <= 1.5)" % (med["torch"] / med["trac"], 100 * abs(runs["trac"][0][1] - runs["torch"][0][1])))


main()
