#!/usr/bin/python3
"""
grad.py: grad(loss, W) against central finite differences, in f64.

Each case is a .tra program computing a scalar `loss` from a param W (read
from w0.npy) and inputs, with `dW = grad(loss, W); output dW;`, and the same
loss written with numpy.  The gradient trac computes is compared with the
central finite difference of the numpy loss at every element of W, on 1 and
2 ranks.  Together the cases exercise every rule of the backward pass: each
elementwise function's derivative, joins with broadcasting, sums, max, min,
mean, diagonals, transposes, where, fan-out (a value read twice), gradients
with respect to inputs, and several grads of one loss.

Environment: TRAC, MPIRUN.  Arguments: case names to run only those.
"""
import os, subprocess, sys, textwrap
import numpy as np
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import mpi_env, run_cases


TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
env = mpi_env()
r = np.random.default_rng(3)
CASES = []

def case(name, body, W, loss, inputs=None, wrt="W", block=2, rtol=1e-6):
    CASES.append(dict(name=name, body=textwrap.dedent(body), W=W, loss=loss, inputs=inputs or {},
                      wrt=wrt, block=block, rtol=rtol))

def decl(name, a):
    dims = ", ".join(str(n) for n in a.shape)
    return "%s%s : %s" % (name, "[%s]" % dims if a.ndim else "", "i64" if a.dtype.kind == "i" else "f64")

W = r.standard_normal((4, 3)); X = r.standard_normal((5, 4)); v = r.standard_normal(3)
Wp = np.abs(W) + 0.5

case("sum_of_product", "loss = X[n, d] * W[d, h];", W, lambda W, X: (X @ W).sum(), dict(X=X))
case("matmul_square", "Y[n, h] = X[n, d] * W[d, h];\nloss = Y[n, h] * Y[n, h];", W,
     lambda W, X: ((X @ W) ** 2).sum(), dict(X=X))
case("exp_log_sqrt", "loss = sum[d, h](exp(W[d, h]) + log(W[d, h]) + sqrt(W[d, h]));", Wp,
     lambda W: (np.exp(W) + np.log(W) + np.sqrt(W)).sum())
case("tanh_sigmoid", "loss = sum[d, h](tanh(W[d, h]) * sigmoid(W[d, h]));", W,
     lambda W: (np.tanh(W) / (1 + np.exp(-W))).sum())
case("relu_abs", "loss = sum[d, h](relu(W[d, h]) * 3 + abs(W[d, h]) * W[d, h]);", W,
     lambda W: (np.maximum(W, 0) * 3 + np.abs(W) * W).sum())
case("pow_div", "loss = sum[d, h](W[d, h] ** 3 / (1 + W[d, h] ** 2));", W,
     lambda W: (W ** 3 / (1 + W ** 2)).sum())
case("broadcast_add", "Z[d, h] = W[d, h] + v[h];\nloss = sum[d, h](Z[d, h] * Z[d, h] * v[h]);", W,
     lambda W, v: (((W + v) ** 2) * v).sum(), dict(v=v))
case("row_max", "m[d] = max[h](W[d, h]);\nloss = sum[d](m[d] * m[d]);", W,
     lambda W: (W.max(1) ** 2).sum())
case("col_min", "m[h] = min[d](W[d, h] * v[h]);\nloss = sum[h](m[h]);", W,
     lambda W, v: (W * v).min(0).sum(), dict(v=v))
case("mean", "loss = mean[d, h](W[d, h] * W[d, h]) + mean[d](sum[h](W[d, h]));", W,
     lambda W: (W ** 2).mean() + W.sum(1).mean())
S = r.standard_normal((4, 4))
case("diagonal", "d[i] = W[i, i];\nloss = sum[i](d[i] * d[i]) + W[i, j] * W[j, i];", S,
     lambda W: (np.diag(W) ** 2).sum() + (W * W.T).sum(), block=3)
case("transpose", "T[h, d] = W[d, h];\nloss = sum[h, d](T[h, d] * X[d, h]);", W,
     lambda W, X2: (W.T * X2.T).sum(), dict(X=r.standard_normal((4, 3))))
case("where", "loss = sum[d, h](where(W[d, h] > 0, W[d, h] * W[d, h], -W[d, h]));", W,
     lambda W: np.where(W > 0, W * W, -W).sum())
case("fan_out", "A[n, h] = X[n, d] * W[d, h];\nc[h] = sum[d](W[d, h]);\nloss = sum[n, h](A[n, h] * c[h]);", W,
     lambda W, X: ((X @ W) * W.sum(0)).sum(), dict(X=X))
case("softmax_xent", """
    import "nn.tra";
    Z[n, h] = X[n, d] * W[d, h];
    loss = softmax_xent(Z, Y);""", W,
     lambda W, X, Y: (lambda Z: (Y * (np.log(np.exp(Z - Z.max(1, keepdims=True)).sum(1, keepdims=True))
                                      + Z.max(1, keepdims=True) - Z)).sum(1).mean())(X @ W),
     dict(X=X, Y=np.eye(3)[r.integers(0, 3, 5)]))
case("softmax_xent_labels", """
    import "nn.tra";
    Z[n, h] = X[n, d] * W[d, h];
    loss = softmax_xent_labels(Z, lab);""", W,
     lambda W, X, lab: (lambda Z: (np.log(np.exp(Z - Z.max(1, keepdims=True)).sum(1)) + Z.max(1)
                                   - Z[np.arange(len(lab)), lab]).mean())(X @ W),
     dict(X=X, lab=r.integers(0, 3, 5)))
case("wrt_input", "loss = sum[n, h](relu(X[n, d] * W0[d, h]));", X,
     lambda X, W0: np.maximum(X @ W0, 0).sum(), dict(W0=W), wrt="X")
case("two_layer", """
    H[n, h] = tanh(X[n, d] * W[d, h]);
    O[n] = H[n, h] * v[h];
    loss = mean[n]((O[n] - y[n]) ** 2);""", W,
     lambda W, X, v, y: ((np.tanh(X @ W) @ v - y) ** 2).mean(), dict(X=X, v=v, y=r.standard_normal(5)))


def program(c):
    lines = []
    body = c["body"]
    imports = [l for l in body.splitlines() if l.strip().startswith("import")]
    body = "\n".join(l for l in body.splitlines() if not l.strip().startswith("import"))
    lines += imports
    wrt = c["wrt"]
    if wrt == "W":
        lines.append('param %s = "w0.npy";' % decl("W", c["W"]))
    for k, a in c["inputs"].items():
        lines.append("input %s;" % decl(k, a))
    if wrt != "W":
        lines.append("input %s;" % decl(wrt, c["W"]))
    lines.append(body)
    lines.append("d%s = grad(loss, %s);" % (wrt, wrt))
    lines.append("output d%s;" % wrt)
    lines.append("output loss;")
    return "\n".join(lines) + "\n"


def numeric_grad(f, W, eps=1e-6):
    g = np.zeros_like(W)
    for idx in np.ndindex(W.shape):
        Wp, Wm = W.copy(), W.copy()
        Wp[idx] += eps
        Wm[idx] -= eps
        g[idx] = (f(Wp) - f(Wm)) / (2 * eps)
    return g


def run(c, tmp):
    d = os.path.join(tmp, c["name"])
    os.makedirs(d)
    src = os.path.join(d, "p.tra")
    with open(src, "w") as f:
        f.write(program(c))
    np.save(os.path.join(d, "w0.npy"), c["W"])
    args = []
    for k, a in c["inputs"].items():
        np.save(os.path.join(d, k + ".npy"), a)
        args.append("%s=%s.npy" % (k, k))
    if c["wrt"] != "W":
        np.save(os.path.join(d, c["wrt"] + ".npy"), c["W"])
        args.append("%s=%s.npy" % (c["wrt"], c["wrt"]))
    p = subprocess.run([TRAC, "--block", str(c["block"]), src, "-o", os.path.join(d, "prog")],
                       capture_output=True, text=True)
    if p.returncode:
        return ["trac failed:\n" + p.stderr + "\n" + program(c)]
    f = lambda W: c["loss"](W, *c["inputs"].values())
    want = numeric_grad(f, c["W"])
    errors = []
    for n in (1, 2):
        p = subprocess.run([MPIRUN, "-np", str(n), "./prog"] + args, cwd=d, capture_output=True, text=True, env=env)
        if p.returncode:
            errors.append("%d ranks: exit %d\n%s" % (n, p.returncode, p.stderr))
            continue
        loss = np.load(os.path.join(d, "loss.npy"))
        if abs(loss - f(c["W"])) > 1e-9 * max(1, abs(f(c["W"]))):
            errors.append("%d ranks: loss %r, numpy says %r" % (n, float(loss), f(c["W"])))
        got = np.load(os.path.join(d, "d%s.npy" % c["wrt"]))
        err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-12)
        if not err <= c["rtol"]:
            errors.append("%d ranks: gradient max relative error %.3g\n got %s\n want %s" % (n, err, got, want))
    return errors


sys.exit(run_cases(CASES, run))
