#!/usr/bin/python3
"""
gather.py: gathers (E[idx[b], d]) compiled by trac, run under mpirun on 1,
2, 3 and 4 ranks, against numpy and PyTorch autograd.

Each case compiles three times: as the search plans it, and with the
statement on its `line` forced to look rows up in the partitioned table
(--strategy LINE=lookup) and to replicate it (LINE=broadcast), so both
implementations run on every rank count.  Extents do not divide by the
block (3).  Indices repeat and come out of order.

Environment: TRAC, MPIRUN (from make check).  Arguments: case names to run
only those.
"""
import os, subprocess, sys, textwrap
import numpy as np
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import mpi_env, run_cases

TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
RANKS = [1, 2, 3, 4]
env = mpi_env()

CASES = []

def case(name, src, inputs, expect, line=None, block=3, tol=None):
    """inputs: {name: array}; expect: function(inputs) -> {output: array};
    line: the gather statement forced to each implementation."""
    CASES.append(dict(name=name, src=textwrap.dedent(src), inputs=inputs, expect=expect,
                      line=line, block=block, tol=tol))

r = np.random.default_rng(14)
def rnd(*shape, dt=np.float32):
    return r.standard_normal(shape).astype(dt)

V, D, B, NR = 13, 5, 7, 4
E = rnd(V, D); Rel = rnd(NR, D)
idx = np.array([3, 12, 0, 3, 7, 12, 1], dtype=np.int64)        # repeated, out of order
h = np.array([0, 5, 5, 12, 2, 9, 0], dtype=np.int64)
t = np.array([4, 4, 11, 1, 2, 0, 7], dtype=np.int64)
rr = np.array([3, 0, 3, 1, 2, 0, 3], dtype=np.int32)

case("embedding", """
    size V = 13, D = 5, B = 7;
    input E[V, D];
    input idx[B] : i64;
    Z[b, d] = E[idx[b], d];
    output Z;
""", dict(E=E, idx=idx), lambda x: dict(Z=x["E"][x["idx"]]), line=5)

case("transe_score", """
    size V = 13, R = 4, D = 5, B = 7;
    input E[V, D];
    input Rel[R, D];
    input h[B] : i64;
    input r[B] : i32;
    input t[B] : i64;
    s[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[t[b], d]) ** 2);
    output s;
""", dict(E=E, Rel=Rel, h=h, r=rr, t=t), lambda x: dict(
    s=((x["E"][x["h"]].astype(np.float64) + x["Rel"][x["r"]] - x["E"][x["t"]]) ** 2).sum(1).astype(np.float32)),
    line=8, tol=1e-6)

j = np.array([6, 0, 6, 2, 5, 1, 1, 3, 4, 0, 2], dtype=np.int64)    # 11 rows of Z's 7
k = np.array([4, 0, 2, 2, 1], dtype=np.int32)                     # columns of E
case("gather_of_gathered", """
    size V = 13, D = 5, B = 7, C = 11, K = 5;
    input E[V, D];
    input idx[B] : i64;
    input j[C] : i64;
    input k[K] : i32;
    Z[b, d] = E[idx[b], d];
    W[c, d] = Z[j[c], d] * 2;
    Y[c, d] = E[idx[j[c]], d];
    G[v, q] = E[v, k[q]] + 1;
    output W; output Y; output G;
""", dict(E=E, idx=idx, j=j, k=k), lambda x: dict(
    W=x["E"][x["idx"]][x["j"]] * 2, Y=x["E"][x["idx"][x["j"]]], G=x["E"][:, x["k"]] + 1), line=8)

def gather_windows(x):
    G = x["E"][x["idx"]].astype(np.float64)
    Y = G[:, 1:]
    Z = G[:, ::-1] + np.pad(G, ((0, 0), (2, 0)))[:, :5]
    dG = np.zeros_like(G)
    dG[:, 1:] += x["Wt"]
    dG[:, ::-1] += 2 * Z
    dG[:, :3] += 2 * Z[:, 2:]
    dE = np.zeros((13, 5))
    np.add.at(dE, x["idx"], dG)
    return dict(Y=Y.astype(np.float32), Z=Z.astype(np.float32), dE=dE.astype(np.float32))
# index arithmetic beside a gather's position: a window of the gathered
# rows (shifted, reversed, padded), and the gradient back through both
case("gather_windows", """
    size V = 13, D = 5, B = 7, D4 = 4;
    input E[V, D];
    input idx[B] : i64;
    input Wt[B, D4];
    Y[b, j] = E[idx[b], j + 1];
    Z[b, j in D] = E[idx[b], D - 1 - j] + E[idx[b], j - 2];
    loss = sum[b, j](Y[b, j] * Wt[b, j]) + sum[b, j](Z[b, j] * Z[b, j]);
    dE = grad(loss, E);
    output Y; output Z; output dE;
""", dict(E=E, idx=idx, Wt=rnd(7, 4)), gather_windows, tol=1e-5)

I2 = np.array([[1, 12, 1], [0, 0, 5], [7, 3, 12], [11, 2, 2]], dtype=np.int32)
case("index_matrix", """
    size V = 13, D = 5, N = 4, K = 3;
    input E[V, D];
    input I2[N, K] : i32;
    P[n, k, d] = E[I2[n, k], d];
    M[n, d] = sum[k](E[I2[n, k], d]) / 3;
    output P; output M;
""", dict(E=E, I2=I2), lambda x: dict(P=x["E"][x["I2"]], M=x["E"][x["I2"]].sum(1) / np.float32(3)),
    line=5, tol=1e-6)


lab = np.arange(13, dtype=np.int64) * 3 - 7
w1 = rnd(13)
ix32 = np.array([12, 0, 3, 3, 5, 12, 1], dtype=np.int32)
def vector_grad(x):
    dw = np.zeros(13, np.float64)
    np.add.at(dw, x["idx"], 2 * x["w"][x["idx"]].astype(np.float64))
    return dict(y=x["lab"][x["idx"]] * 2, z=x["w"][x["idx"]], dw=dw.astype(np.float32))
case("vector_and_int_table", """
    size V = 13, B = 7;
    input lab[V] : i64;
    input w[V];
    input idx[B] : i32;
    y[b] = lab[idx[b]] * 2;
    z[b] = w[idx[b]];
    l = sum[b](z[b] * z[b]);
    dw = grad(l, w);
    output y; output z; output dw;
""", dict(lab=lab, w=w1, idx=ix32), vector_grad, line=6, tol=2e-6)


# A scatter sums the pieces of one row in double in arrival order (by source
# rank, then in the order the index holds them) whatever order it sorts them
# in first (runtime/gather.c's radix sort must be stable): 1 + 1e30 - 1e30
# is 0 that way, 1 in another (reversed, say).
big = np.array([1, 1e30, -1e30, 2, 3], dtype=np.float32)
case("scatter_order", """
    size V = 4, B = 5;
    input w[V];
    input c[B];
    input idx[B] : i64;
    l = sum[b](w[idx[b]] * c[b]);
    dw = grad(l, w);
    output dw;
""", dict(w=rnd(4), c=big, idx=np.array([2, 2, 2, 0, 0], dtype=np.int64)),
    lambda x: dict(dw=np.array([5, 0, 0, 0], dtype=np.float32)), line=None, block=5)


def torch_grads(x):
    import torch
    Et = torch.tensor(x["E"], dtype=torch.float64, requires_grad=True)
    Rt = torch.tensor(x["Rel"], dtype=torch.float64, requires_grad=True)
    hh, tt, rq = (torch.tensor(x[n].astype(np.int64)) for n in ("h", "t", "r"))
    s = ((Et[hh] + Rt[rq] - Et[tt]) ** 2).sum(1)
    loss = (s * torch.arange(1, 8, dtype=torch.float64)).sum()
    loss.backward()
    return dict(loss=np.float32(loss.item()), dE=Et.grad.numpy().astype(np.float32),
                dR=Rt.grad.numpy().astype(np.float32))
case("transe_grad", """
    size V = 13, R = 4, D = 5, B = 7;
    input E[V, D];
    input Rel[R, D];
    input h[B] : i64;
    input r[B] : i32;
    input t[B] : i64;
    s[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[t[b], d]) ** 2);
    loss = sum[b](s[b] * f32(b + 1));
    dE = grad(loss, E);
    dR = grad(loss, Rel);
    output loss; output dE; output dR;
""", dict(E=E, Rel=Rel, h=h, r=rr, t=t), torch_grads, line=8, tol=2e-6)


def chain_grad(x):
    import torch
    Et = torch.tensor(x["E"], dtype=torch.float64, requires_grad=True)
    i, jj, kk = (torch.tensor(x[n].astype(np.int64)) for n in ("idx", "j", "k"))
    W = Et[i][jj]
    G = Et[:, kk]
    loss = (W ** 2).sum() + (G * G * torch.arange(1, 6, dtype=torch.float64)).sum()
    loss.backward()
    return dict(loss=np.float32(loss.item()), dE=Et.grad.numpy().astype(np.float32))
case("chain_grad", """
    size V = 13, D = 5, B = 7, C = 11, K = 5;
    input E[V, D];
    input idx[B] : i64;
    input j[C] : i64;
    input k[K] : i32;
    Z[b, d] = E[idx[b], d];
    W[c, d] = Z[j[c], d];
    G[v, q] = E[v, k[q]];
    loss = sum[c, d](W[c, d] ** 2) + sum[v, q](G[v, q] * G[v, q] * f32(q + 1));
    dE = grad(loss, E);
    output loss; output dE;
""", dict(E=E, idx=idx, j=j, k=k), chain_grad, line=8, tol=2e-6)


def torch_sgd(x):
    """Three SGD steps of TransE's margin loss with corrupted tails."""
    import torch
    Et = torch.tensor(x["E0"], dtype=torch.float64, requires_grad=True)
    Rt = torch.tensor(x["R0"], dtype=torch.float64, requires_grad=True)
    hh, tt, rq, nn = (torch.tensor(x[n].astype(np.int64)) for n in ("h", "t", "r", "neg"))
    for _ in range(3):
        pos = ((Et[hh] + Rt[rq] - Et[tt]) ** 2).sum(1)
        neg = ((Et[hh] + Rt[rq] - Et[nn]) ** 2).sum(1)
        loss = torch.relu(1 + pos - neg).sum() / 7
        gE, gR = torch.autograd.grad(loss, [Et, Rt])
        with torch.no_grad():
            Et -= 0.1 * gE
            Rt -= 0.1 * gR
    return dict(E=Et.detach().numpy().astype(np.float32), Rel=Rt.detach().numpy().astype(np.float32))
neg = np.array([9, 9, 3, 0, 12, 6, 2], dtype=np.int64)
case("transe_sgd", """
    size V = 13, R = 4, D = 5, B = 7;
    input h[B] : i64;
    input r[B] : i32;
    input t[B] : i64;
    input neg[B] : i64;
    param E[V, D] = "E0.npy";
    param Rel[R, D] = "R0.npy";
    repeat 3 {
        pos[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[t[b], d]) ** 2);
        ng[b] = sum[d]((E[h[b], d] + Rel[r[b], d] - E[neg[b], d]) ** 2);
        loss = sum[b](relu(1 + pos[b] - ng[b])) / 7;
        dE = grad(loss, E);
        dR = grad(loss, Rel);
        E[v, d] -= 0.1 * dE[v, d];
        Rel[q, d] -= 0.1 * dR[q, d];
    }
    output E; output Rel;
""", dict(E0=rnd(V, D) * 0.5, R0=rnd(NR, D) * 0.5, h=h, r=rr, t=t, neg=neg), torch_sgd, line=11, tol=1e-5)


def sgd_into_base(x):
    """Three SGD steps, by PyTorch autograd: E read by three gathers with
    repeated indices, stepped by a 0-d lr (in place on E's storage); W's
    step F = W - 0.05 dW copies W, which is read again."""
    import torch
    E = torch.tensor(x["E0"], dtype=torch.float64)
    W = torch.tensor(x["W0"], dtype=torch.float64)
    hh, tt, nn = (torch.tensor(x[n].astype(np.int64)) for n in ("h", "t", "neg"))
    lr = float(x["lr"])
    for _ in range(3):
        E.requires_grad_(True)
        W.requires_grad_(True)
        loss = (((E[hh] - E[tt]) ** 2) * W[hh] - E[nn] * W[nn]).sum()
        gE, gW = torch.autograd.grad(loss, [E, W])
        with torch.no_grad():
            E = E - lr * gE
            W = (W + (W - 0.05 * gW)) / 2
    return dict(E=E.numpy().astype(np.float32), W=W.numpy().astype(np.float32))
case("sgd_into_base", """
    size V = 13, D = 5, B = 7;
    input h[B] : i64;
    input t[B] : i64;
    input neg[B] : i64;
    input lr;
    param E[V, D] = "E0.npy";
    param W[V, D] = "W0.npy";
    repeat 3 {
        loss = sum[b, d]((E[h[b], d] - E[t[b], d]) ** 2 * W[h[b], d] - E[neg[b], d] * W[neg[b], d]);
        dE = grad(loss, E);
        dW = grad(loss, W);
        E[v, d] -= lr * dE[v, d];
        F[v, d] = W[v, d] - 0.05 * dW[v, d];
        W[v, d] = (W[v, d] + F[v, d]) / 2;
    }
    output E; output W;
""", dict(E0=rnd(V, D) * 0.5, W0=rnd(V, D) * 0.5, h=h, t=t, neg=neg, lr=np.array(0.05, dtype=np.float32)),
    sgd_into_base, line=10, tol=1e-5)


def example_sgd(x):
    """examples/transe.tra's 20 steps (lr 1, margin 1, mean over the
    batch) by PyTorch autograd"""
    import torch
    E = torch.tensor(x["E0"], dtype=torch.float64)
    R = torch.tensor(x["R0"], dtype=torch.float64)
    hh, rq, tt, nn = (torch.tensor(x[n].astype(np.int64)) for n in ("h", "r", "t", "neg"))
    for _ in range(20):
        E.requires_grad_(True)
        R.requires_grad_(True)
        pos = ((E[hh] + R[rq] - E[tt]) ** 2).sum(1)
        ng = ((E[hh] + R[rq] - E[nn]) ** 2).sum(1)
        loss = torch.relu(1 + pos - ng).sum() / len(hh)
        gE, gR = torch.autograd.grad(loss, [E, R])
        with torch.no_grad():
            E, R = E - gE, R - gR
    return dict(E=E.numpy().astype(np.float32), Rel=R.numpy().astype(np.float32))
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "transe.tra")) as f:
    transe_src = f.read().replace("size V = 2000, NR = 16, D = 32, B = 4096;", "size V = 37, NR = 5, D = 6, B = 50;")
assert "V = 37" in transe_src
tr = np.random.default_rng(3)
th = tr.integers(0, 37, 50)
case("transe_example", transe_src, dict(h=th, r=tr.integers(0, 5, 50), t=(th + 3) % 37, neg=tr.integers(0, 37, 50),
                                        E0=rnd(37, 6) * 0.3, R0=rnd(5, 6) * 0.3), example_sgd, tol=1e-4)


def run(c, tmp):
    d = os.path.join(tmp, c["name"])
    os.makedirs(d)
    src = os.path.join(d, c["name"] + ".tra")
    with open(src, "w") as f:
        f.write(c["src"])
    for key, a in c["inputs"].items():
        np.save(os.path.join(d, key + ".npy"), a)
    want = c["expect"](c["inputs"])
    variants = [("searched", [])]
    if c["line"]:
        variants += [(s, ["--strategy", "%d=%s" % (c["line"], s)]) for s in ("lookup", "broadcast")]
    errors = []
    for vname, flags in variants:
        exe = os.path.join(d, "prog-" + vname)
        p = subprocess.run([TRAC, "--block", str(c["block"]), *flags, src, "-o", exe], capture_output=True, text=True)
        if p.returncode != 0:
            errors.append("%s: trac failed:\n%s" % (vname, p.stderr))
            continue
        for n in RANKS:
            outs = {k: os.path.join(d, "%s-%s-%d.npy" % (k, vname, n)) for k in want}
            # every input but the files the source names (params' initial values)
            args = [MPIRUN, "-np", str(n), exe] + ["%s=%s.npy" % (k, k) for k in c["inputs"]
                                                   if '"%s.npy"' % k not in c["src"]]
            args += ["%s.out=%s" % (k, f) for k, f in outs.items()]
            p = subprocess.run(args, cwd=d, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                errors.append("%s, %d ranks: exit %d\n%s" % (vname, n, p.returncode, p.stderr))
                continue
            for k, ref in want.items():
                ref = np.asarray(ref)
                got = np.load(outs[k])
                if got.shape != ref.shape or got.dtype != ref.dtype:
                    errors.append("%s, %d ranks: %s is %s %s, expected %s %s" % (
                        vname, n, k, got.dtype, got.shape, ref.dtype, ref.shape))
                    continue
                tol = c["tol"] or 0
                err = np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30)
                if not err <= tol:
                    errors.append("%s, %d ranks: %s max relative error %.3g > %.1g" % (vname, n, k, err, tol))
    return errors


sys.exit(run_cases(CASES, run))
