#!/usr/bin/python3
"""
ffnn_torch.py: one training iteration of the FFNN (forward, backward,
update) in trac on 2 ranks against PyTorch on the same 2 cores.

    make bench-ffnn                       # or: bench/ffnn_torch.py [--quick]

The network is examples/ffnn.tra's (relu hidden layer, softmax
cross-entropy, SGD) with its backward pass from grad(); the sizes are the
TRA paper's Google-speech shape scaled to this machine (N=2000, D=1600,
H=4000, L=10).  PyTorch runs the same f32 computation with 2 intra-op
threads.  Both sides repeat the iteration, alternating runs, and the table
gives medians: the time per iteration, trac's speed relative to PyTorch
(target >= 1.0), and trac's backward pass relative to its forward pass
(target <= 3), from --profile's per-op times attributed to the statements.

Environment: TRAC (default ./trac), MPIRUN, PYTHON.  Unsets
OPENBLAS_CORETYPE inside this process only (PyTorch's OpenBLAS).
"""
import os, re, statistics, subprocess, sys, tempfile, time
import numpy as np

os.environ.pop("OPENBLAS_CORETYPE", None)
import torch

TRAC = os.path.abspath(os.environ.get("TRAC", "./trac"))
MPIRUN = os.environ.get("MPIRUN", "mpirun")
QUICK = "--quick" in sys.argv
N, D, H, L = (1000, 800, 1000, 10) if QUICK else (2000, 1600, 4000, 10)
STEPS, REPS = (3, 3) if QUICK else (5, 5)
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

PROGRAM = """
import "nn.tra";
size N = %d, D = %d, H = %d, L = %d, STEPS = %d;
const lr = 0.1;
input X[N, D];
input Y[N, L];
param W1[D, H] = normal(0, 0.02);
param b1[H] = zeros;
param W2[H, L] = normal(0, 0.02);
param b2[L] = zeros;
repeat STEPS {
    A[n, h] = relu(X[n, d] * W1[d, h] + b1[h]);
    Z[n, l] = A[n, h] * W2[h, l] + b2[l];
    loss = softmax_xent(Z, Y);
    dW1 = grad(loss, W1);
    db1 = grad(loss, b1);
    dW2 = grad(loss, W2);
    db2 = grad(loss, b2);
    W1[d, h] -= lr * dW1[d, h];
    b1[h] -= lr * db1[h];
    W2[h, l] -= lr * dW2[h, l];
    b2[l] -= lr * db2[l];
}
""" % (N, D, H, L, STEPS)

PROFILE_ROW = re.compile(r"\s*(\d+)\s+(\w+)\s+(.*?)\s+(\d+)\s+([\d.]+)\s")


def trac_run(d):
    """Seconds per iteration: forward, backward, update, total (from --profile)."""
    p = subprocess.run([MPIRUN, "-np", "2", "./ffnn", "X=x.npy", "Y=y.npy", "--profile"],
                       cwd=d, capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit("trac's ffnn failed:\n" + p.stderr)
    parts = {"forward": 0.0, "backward": 0.0, "update": 0.0}
    for line in p.stdout.splitlines():
        m = PROFILE_ROW.match(line)
        if not m or m.group(2) in ("read", "write", "init", "loop", "endloop"):
            continue
        label, secs = m.group(3), float(m.group(5))
        if "grad(" in label:
            parts["backward"] += secs
        elif "-=" in label:
            parts["update"] += secs
        else:
            parts["forward"] += secs
    parts = {k: v / STEPS for k, v in parts.items()}
    parts["total"] = sum(parts.values())
    return parts


def torch_run(X, Y, params):
    torch.set_num_threads(2)
    W1, b1, W2, b2 = params
    t0 = time.perf_counter()
    loss = None
    f = b = u = 0.0
    for _ in range(STEPS):
        t = time.perf_counter()
        Z = torch.relu(X @ W1 + b1) @ W2 + b2
        loss = torch.nn.functional.cross_entropy(Z, Y)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        with torch.no_grad():
            for p in (W1, b1, W2, b2):
                p -= 0.1 * p.grad
                p.grad = None
        t3 = time.perf_counter()
        f, b, u = f + t1 - t, b + t2 - t1, u + t3 - t2
    return {"forward": f / STEPS, "backward": b / STEPS, "update": u / STEPS,
            "total": (time.perf_counter() - t0) / STEPS}


def main():
    r = np.random.default_rng(0)
    X = r.standard_normal((N, D)).astype(np.float32)
    labels = r.integers(0, L, N)
    Y = np.eye(L, dtype=np.float32)[labels]
    with tempfile.TemporaryDirectory() as d:
        np.save(os.path.join(d, "x.npy"), X)
        np.save(os.path.join(d, "y.npy"), Y)
        with open(os.path.join(d, "ffnn.tra"), "w") as f:
            f.write(PROGRAM)
        p = subprocess.run([TRAC, "-P", "2", "ffnn.tra", "-o", "ffnn"], cwd=d, capture_output=True, text=True)
        if p.returncode:
            sys.exit("trac failed:\n" + p.stderr)
        tX, tY = torch.tensor(X), torch.tensor(labels)
        params = [torch.tensor(r.standard_normal(s).astype(np.float32) * 0.02, requires_grad=True)
                  for s in ((D, H), (H,), (H, L), (L,))]
        print("FFNN N=%d D=%d H=%d L=%d, %d steps per run, %d runs each, alternating" % (N, D, H, L, STEPS, REPS))
        print("load average before: %.2f" % os.getloadavg()[0])
        tr, pt = [], []
        for _ in range(REPS):
            tr.append(trac_run(d))
            pt.append(torch_run(tX, tY, params))
        print("load average after:  %.2f" % os.getloadavg()[0])
    med = lambda runs, k: statistics.median(x[k] for x in runs)
    print("%-10s %12s %12s" % ("seconds", "trac 2 ranks", "PyTorch 2 thr"))
    for k in ("forward", "backward", "update", "total"):
        print("%-10s %12.4f %12.4f" % (k, med(tr, k), med(pt, k)))
    speed = med(pt, "total") / med(tr, "total")
    ratio = med(tr, "backward") / med(tr, "forward")
    print("trac speed relative to PyTorch: %.2fx (target >= 1.0)" % speed)
    print("trac backward / forward: %.2f (target <= 3)" % ratio)


main()
