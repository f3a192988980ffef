#!/usr/bin/python3
"""
torch_ffnn.py: the FFNN example's training step against PyTorch autograd.

The network of examples/ffnn.tra (relu hidden layer, softmax cross-entropy
over one-hot labels, SGD), with the same initial weights read from files:
  1. the gradients of all four params at the first step, against
     torch.autograd, within 1e-4 relative;
  2. the 20-step loss curve against the same training in PyTorch, within
     1e-4 relative;
  3. results identical (to rounding) on 1, 2 and 4 ranks.

Environment: TRAC, MPIRUN.  Skips (exit 77) when torch is not installed.
"""
import os, re, subprocess, sys, tempfile
import numpy as np
try:
    import torch
except ImportError:
    print("torch not installed (apt-get install python3-torch): skipped")
    sys.exit(77)

sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import mpi_env

TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
env = mpi_env()
N, D, H, L, STEPS, LR = 96, 40, 24, 6, 20, 0.5

PROGRAM = """
import "nn.tra";
size N = %d, D = %d, H = %d, L = %d;
const lr = %g;
input X[N, D];
input Y[N, L];
param W1[D, H] = "w1.npy";
param b1[H] = "b1.npy";
param W2[H, L] = "w2.npy";
param b2[L] = "b2.npy";
repeat %%d {
    A[n, h] = relu(X[n, d] * W1[d, h] + b1[h]);
    Z[n, l] = A[n, h] * W2[h, l] + b2[l];
    loss = softmax_xent(Z, Y);
    dW1 = grad(loss, W1);
    db1 = grad(loss, b1);
    dW2 = grad(loss, W2);
    db2 = grad(loss, b2);
    %%s
    W1[d, h] -= lr * dW1[d, h];
    b1[h] -= lr * db1[h];
    W2[h, l] -= lr * dW2[h, l];
    b2[l] -= lr * db2[l];
    print loss;
}
""" % (N, D, H, L, LR)


def main():
    r = np.random.default_rng(5)
    data = dict(x=r.standard_normal((N, D)).astype(np.float32),
                y=np.eye(L, dtype=np.float32)[r.integers(0, L, N)],
                w1=(r.standard_normal((D, H)) * 0.3).astype(np.float32),
                b1=(r.standard_normal(H) * 0.1).astype(np.float32),
                w2=(r.standard_normal((H, L)) * 0.3).astype(np.float32),
                b2=(r.standard_normal(L) * 0.1).astype(np.float32))
    fails = []
    with tempfile.TemporaryDirectory() as d:
        for k, a in data.items():
            np.save(os.path.join(d, k + ".npy"), a)
        # the gradients: one step, gradients kept in params g* that are outputs
        grads = PROGRAM % (1, "gW1[d, h] = dW1[d, h]; gb1[h] = db1[h]; gW2[h, l] = dW2[h, l]; gb2[l] = db2[l];")
        grads = grads.replace('param b2[L] = "b2.npy";', 'param b2[L] = "b2.npy";\nparam gW1[D, H] = zeros;\n'
                              'param gb1[H] = zeros;\nparam gW2[H, L] = zeros;\nparam gb2[L] = zeros;')
        grads += "output gW1; output gb1; output gW2; output gb2;\n"
        curve = PROGRAM % (STEPS, "")
        for name, src in (("grads", grads), ("curve", curve)):
            with open(os.path.join(d, name + ".tra"), "w") as f:
                f.write(src)
            p = subprocess.run([TRAC, "--block", "17", name + ".tra", "-o", name], cwd=d, capture_output=True, text=True)
            if p.returncode:
                print(p.stderr)
                return 1

        # PyTorch, f32 as trac
        t = {k: torch.tensor(a, requires_grad=k[0] in "wb") for k, a in data.items()}
        def loss_of(w1, b1, w2, b2):
            Z = torch.relu(t["x"] @ w1 + b1) @ w2 + b2
            return (-(t["y"] * torch.log_softmax(Z, 1)).sum(1)).mean()
        params = [t["w1"], t["b1"], t["w2"], t["b2"]]
        loss = loss_of(*params)
        ref_grads = torch.autograd.grad(loss, params)
        ref_curve = []
        ps = [p.detach().clone().requires_grad_(True) for p in params]
        for _ in range(STEPS):
            loss = loss_of(*ps)
            ref_curve.append(float(loss))
            gs = torch.autograd.grad(loss, ps)
            ps = [(p - LR * g).detach().requires_grad_(True) for p, g in zip(ps, gs)]

        runs = {}
        for n in (1, 2, 4):
            args = ["X=x.npy", "Y=y.npy"]
            p = subprocess.run([MPIRUN, "-np", str(n), "./grads"] + args, cwd=d, capture_output=True, text=True, env=env)
            if p.returncode:
                fails.append("grads on %d ranks failed: %s" % (n, p.stderr))
                continue
            got = [np.load(os.path.join(d, k + ".npy")) for k in ("gW1", "gb1", "gW2", "gb2")]
            for name, g, ref in zip(("dW1", "db1", "dW2", "db2"), got, ref_grads):
                ref = ref.numpy()
                err = np.abs(g - ref).max() / np.abs(ref).max()
                print("%d ranks: %s max relative error vs torch.autograd %.2e" % (n, name, err))
                if not err <= 1e-4:
                    fails.append("%d ranks: %s relative error %.2e" % (n, name, err))
            p = subprocess.run([MPIRUN, "-np", str(n), "./curve"] + args, cwd=d, capture_output=True, text=True, env=env)
            if p.returncode:
                fails.append("curve on %d ranks failed: %s" % (n, p.stderr))
                continue
            curve_got = [float(m) for m in re.findall(r"loss = (\S+)", p.stdout)]
            if len(curve_got) != STEPS:
                fails.append("%d ranks: %d losses printed, expected %d" % (n, len(curve_got), STEPS))
                continue
            err = max(abs(a - b) / abs(b) for a, b in zip(curve_got, ref_curve))
            print("%d ranks: 20-step loss curve max relative error vs PyTorch %.2e (%.5f -> %.5f)" %
                  (n, err, curve_got[0], curve_got[-1]))
            if not err <= 1e-4:
                fails.append("%d ranks: loss curve relative error %.2e" % (n, err))
            runs[n] = curve_got
        if 1 in runs:
            for n in runs:
                diff = max(abs(a - b) / abs(a) for a, b in zip(runs[1], runs[n]))
                if diff > 1e-5:
                    fails.append("%d ranks: loss curve differs from 1 rank by %.2e" % (n, diff))
    for f in fails:
        print("FAIL: " + f)
    return 1 if fails else 0

sys.exit(main())
