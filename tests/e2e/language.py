#!/usr/bin/python3
"""
language.py: every construct of the .tra language, compiled by trac, run
under mpirun on 1, 2 and 4 ranks (1, 2, 3 and 4 for loop counters and index
arithmetic: a case's ranks=), compared with numpy (gradients and
convolutions with PyTorch).

Each case is a .tra program, its inputs (shapes chosen so extents do not
divide by the block size the case compiles with), and numpy code computing
the expected outputs.  numpy.einsum in explicit mode is the oracle for
implicit sums and diagonals.

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
RANKS = [1, 2, 4]
env = mpi_env()

CASES = []

def case(name, src, inputs, expect, block=3, tol=None, files=None, flags=(), outputs=None, ranks=RANKS):
    """inputs: {name: array}; expect: function(inputs) -> {output: array}."""
    CASES.append(dict(name=name, src=textwrap.dedent(src), inputs=inputs, expect=expect,
                      block=block, tol=tol, files=files or {}, flags=list(flags), ranks=ranks))

r = np.random.default_rng(7)
def rnd(*shape, dt=np.float32):
    return r.standard_normal(shape).astype(dt)

A = rnd(7, 5); B = rnd(5, 4); v = rnd(5); w = rnd(7); S = rnd(5, 5); T3 = rnd(4, 5, 3)
P = np.abs(rnd(7, 5)) + 0.5

# ---- arithmetic and elementwise functions ----
case("arith", """
    size I = 7, J = 5;
    input A[I, J];
    input P[I, J];
    C[i, j] = -A[i, j] * 2 + P[i, j] / 3 - 1;
    D[i, j] = A[i, j] ** 2 + P[i, j] ** 3;
    output C; output D;
""", dict(A=A, P=P), lambda x: dict(C=-x["A"] * 2 + x["P"] / 3 - 1, D=x["A"] ** 2 + x["P"] ** 3))

case("functions", """
    size I = 7, J = 5;
    input A[I, J];
    input P[I, J];
    E[i, j] = exp(A[i, j]) + log(P[i, j]) + sqrt(P[i, j]) + abs(A[i, j]);
    F[i, j] = tanh(A[i, j]) * sigmoid(A[i, j]) + relu(A[i, j]);
    output E; output F;
""", dict(A=A, P=P), lambda x: dict(
    E=np.exp(x["A"]) + np.log(x["P"]) + np.sqrt(x["P"]) + np.abs(x["A"]),
    F=np.tanh(x["A"]) / (1 + np.exp(-x["A"])) + np.maximum(x["A"], 0)))

case("compare_where", """
    size I = 7, J = 5;
    input A[I, J];
    input P[I, J];
    G[i, j] = (A[i, j] > 0) + (A[i, j] <= -0.5) * 2 + (A[i, j] == A[i, j]) * 4 + (A[i, j] != 0) * 8;
    H[i, j] = where(A[i, j] < 0, P[i, j], A[i, j] * 3);
    K[i, j] = where(A[i, j] >= 0, 1, 0);
    output G; output H; output K;
""", dict(A=A, P=P), lambda x: dict(
    G=((x["A"] > 0) + (x["A"] <= -0.5) * 2.0 + 4.0 + (x["A"] != 0) * 8.0).astype(np.float32),
    H=np.where(x["A"] < 0, x["P"], x["A"] * 3),
    K=np.where(x["A"] >= 0, 1.0, 0.0).astype(np.float32)))

def where_guard(x):
    X, Y = x["X"].astype(np.float64), x["Y"].astype(np.float64)
    with np.errstate(all="ignore"):
        G = np.where(X[:, None] > 0, np.log(X)[:, None], Y)
        R = np.where(X != 0, 1 / X, 0)[:, None] * Y
    return dict(G=G.astype(np.float32), R=R.astype(np.float32))
case("where_guard", """
    size I = 7, J = 5;
    input X[I];
    input Y[I, J];
    # the branch not taken is log of a negative (NaN) and 1/0 (inf):
    # where keeps it out, as numpy's does
    G[i, j] = where(X[i] > 0, log(X[i]), Y[i, j]);
    R[i, j] = where(X[i] != 0, 1 / X[i], 0) * Y[i, j];
    output G; output R;
""", dict(X=np.array([1.5, -1, 0, 2, -3, 0.5, 0], dtype=np.float32), Y=rnd(7, 5)), where_guard)

case("scalar_constant", """
    size I = 7, J = 5;
    const c = sqrt(J * 0.05) + relu(-1);
    input A[I, J];
    s = J * c + 1;
    t = s ** 2 - (s > 3);
    C[i, j] = A[i, j] * s + t;
    output C;
""", dict(A=A), lambda x: dict(C=x["A"] * 3.5 + (3.5 ** 2 - 1)))

# ---- implicit and explicit sums, broadcasting ----
case("matmul_bias", """
    size I = 7, K = 5, J = 4;
    input A[I, K];
    input B[K, J];
    input b[J];
    C[i, j] = A[i, k] * B[k, j] + b[j];
    output C;
""", dict(A=A, B=B, b=rnd(4)), lambda x: dict(C=np.einsum("ik,kj->ij", x["A"], x["B"]) + x["b"]))

case("implicit_sum_placement", """
    size I = 7, J = 5;
    input A[I, J];
    input v[J];
    input w[I];
    rows[i] = A[i, j];
    cols[j] = A[i, j];
    total = A[i, j];
    Av[i] = A[i, j] * v[j] + w[i];
    R[i] = relu(A[i, j] * v[j]);
    output rows; output cols; output total; output Av; output R;
""", dict(A=A, v=v, w=w), lambda x: dict(
    rows=np.einsum("ij->i", x["A"]), cols=np.einsum("ij->j", x["A"]), total=np.einsum("ij->", x["A"]),
    Av=np.einsum("ij,j->i", x["A"], x["v"]) + x["w"], R=np.maximum(np.einsum("ij,j->i", x["A"], x["v"]), 0)))

case("explicit_reductions", """
    size I = 7, J = 5;
    input A[I, J];
    s[i] = sum[j](A[i, j] * A[i, j]);
    mx[j] = max[i](A[i, j]);
    mn[i] = min[j](A[i, j]);
    all = sum[i, j](exp(A[i, j]));
    m = mean[i, j](A[i, j]);
    am[i] = argmax[j](A[i, j]);
    an[j] = argmin[i](A[i, j]);
    output s; output mx; output mn; output all; output m; output am; output an;
""", dict(A=A), lambda x: dict(
    s=(x["A"] ** 2).sum(1), mx=x["A"].max(0), mn=x["A"].min(1), all=np.exp(x["A"]).sum(),
    m=x["A"].mean(), am=x["A"].argmax(1).astype(np.float32), an=x["A"].argmin(0).astype(np.float32)))

case("argmax_ties", """
    size I = 7, J = 5;
    input A[I, J];
    am[i] = argmax[j](A[i, j]);
    output am;
""", dict(A=np.round(rnd(7, 5)).astype(np.float32)), lambda x: dict(am=x["A"].argmax(1).astype(np.float32)))

case("three_operands", """
    size I = 4, J = 5, K = 3, A = 6;
    input X[I, J, K];
    input B[J, A];
    input C[K, A];
    M[i, a] = X[i, j, k] * B[j, a] * C[k, a];
    output M;
""", dict(X=T3, B=rnd(5, 6), C=rnd(3, 6)), lambda x: dict(M=np.einsum("ijk,ja,ka->ia", x["X"], x["B"], x["C"])),
    block=2)

case("transpose_and_outer", """
    size I = 7, J = 5;
    input A[I, J];
    input v[J];
    input w[I];
    T[j, i] = A[i, j];
    O[i, j] = w[i] * v[j];
    output T; output O;
""", dict(A=A, v=v, w=w), lambda x: dict(T=x["A"].T, O=np.einsum("i,j->ij", x["w"], x["v"])))

case("batched", """
    size B = 4, I = 5, K = 3, J = 2;
    input X[B, I, K];
    input Y[B, K, J];
    Z[b, i, j] = X[b, i, k] * Y[b, k, j];
    output Z;
""", dict(X=rnd(4, 5, 3), Y=rnd(4, 3, 2)), lambda x: dict(Z=np.einsum("bik,bkj->bij", x["X"], x["Y"])), block=2)

# ---- diagonals, rank 0, f64, conversions ----
case("diagonal", """
    size N = 5;
    input S[N, N];
    d[i] = S[i, i];
    tr = S[i, i];
    y[i] = S[i, i] * S[i, j];
    output d; output tr; output y;
""", dict(S=S), lambda x: dict(d=np.einsum("ii->i", x["S"]), tr=np.einsum("ii->", x["S"]),
                               y=np.einsum("ii,ij->i", x["S"], x["S"])), block=2)

case("scalars", """
    size I = 7;
    input w[I];
    input s;
    const c = 2.5;
    t = sum[i](w[i]) * s + c;
    u[i] = w[i] * t;
    output t; output u;
""", dict(w=w, s=np.array(1.5, np.float32)), lambda x: dict(
    t=np.float32(x["w"].sum() * 1.5 + 2.5), u=x["w"] * (x["w"].sum() * 1.5 + 2.5)))

def sum_accuracy(x):
    a = x["A"].astype(np.float64)
    return dict(s=np.array((a * a).sum(), dtype=np.float32), c=(a * a).sum(axis=0).astype(np.float32))
case("sum_accuracy", """
    size I = 3000, J = 1000;
    input A[I, J];
    s = sum[i, j](A[i, j] * A[i, j]);     # 3M positive terms in one chunk
    c[j] = sum[i](A[i, j] * A[i, j]);
    output s; output c;
""", dict(A=rnd(3000, 1000)), sum_accuracy, block=4096, tol=2e-7)

case("f64_and_conversions", """
    size I = 7, J = 5;
    input A[I, J] : f64;
    input B[I, J];
    C[i, j] = A[i, j] * f64(B[i, j]);
    D[i, j] = f32(A[i, j]) + B[i, j];
    output C; output D;
""", dict(A=rnd(7, 5, dt=np.float64), B=A), lambda x: dict(
    C=x["A"] * x["B"].astype(np.float64), D=x["A"].astype(np.float32) + x["B"]))

case("sizes_and_consts", """
    size D = 2, N = 3 * D + 1, M = N - 2;
    const half = 1 / 2;
    input A[N, M];
    C[i, j] = A[i, j] * half + D;
    output C = "c_default.npy";
""", dict(A=A), lambda x: dict(c_default=x["A"] * 0.5 + 2))

# ---- defs, imports, stdlib ----
case("defs", """
    import "nn.tra";
    import "linalg.tra";
    size N = 7, D = 5, H = 4;
    input X[N, D];
    input W[D, H];
    input b[H];
    input S[D, D];
    Y = linear(X, W, b);
    P = softmax(Y);
    L = log_softmax(Y);
    T = transpose(X);
    t = trace(S);
    n = frobenius(X);
    output Y; output P; output L; output T; output t; output n;
""", dict(X=A, W=B, b=rnd(4), S=S), lambda x: (lambda Y: dict(
    Y=Y, P=np.exp(Y) / np.exp(Y).sum(1, keepdims=True),
    L=Y - np.log(np.exp(Y).sum(1, keepdims=True)), T=x["X"].T, t=np.trace(x["S"]),
    n=np.sqrt((x["X"] ** 2).sum())))(x["X"] @ x["W"] + x["b"]))

# ---- params, updates, loops ----
case("training_loop", """
    size N = 9, D = 5;
    const lr = 0.1;
    input X[N, D];
    input y[N];
    param w[D] = zeros;
    param b = ones;
    repeat 25 {
        r[n] = X[n, d] * w[d] + b - y[n];
        w[d] -= lr * mean[n](r[n] * X[n, d]);
        b -= lr * mean[n](r[n]);
    }
    output w; output b;
""", dict(X=rnd(9, 5, dt=np.float32), y=rnd(9)), None, tol=2e-5)

case("param_inits", """
    size N = 7, D = 5;
    param Z[N, D] = zeros;
    param O[N, D] : f64 = ones;
    param U[N, D] = uniform(-2, 3);
    param G[N, D] = normal(1, 0.5);
    s = sum[n, d](Z[n, d] + f32(O[n, d]));
    output s; output U; output G;
""", {}, None)

def train_ref(x):
    X, y = x["X"].astype(np.float64), x["y"].astype(np.float64)
    w, b = np.zeros(5), 1.0
    for _ in range(25):
        r = X @ w + b - y
        w, b = w - 0.1 * (r[:, None] * X).mean(0), b - 0.1 * r.mean()
    return dict(w=w.astype(np.float32), b=np.float32(b))
CASES[-2]["expect"] = train_ref

def init_check(x, out):
    """uniform and normal: the right range and moments, the same on every rank count."""
    assert out["s"] == 35.0, out["s"]
    U, G = out["U"], out["G"]
    assert U.min() >= -2 and U.max() < 3 and U.std() > 0.5, (U.min(), U.max())
    assert abs(G.mean() - 1) < 0.3 and 0.3 < G.std() < 0.7, (G.mean(), G.std())
    return None
CASES[-1]["check"] = init_check


# ---- integer element types (version 2) ----
L = np.array([0, 5, 3, 2, 9, 3, 1], dtype=np.int64)
k32 = np.array([1, -3, 4, 5, -7, 2, 3], dtype=np.int32)
def trunc_div(a, b):
    return np.where(b == 0, 0, np.trunc(a / np.where(b == 0, 1, b))).astype(a.dtype)
case("integers", """
    size N = 7, C = 3;
    input labels[N] : i64;
    input k[N] : i32;
    input X[N, C];
    A[n] = labels[n] * 2 - 7;
    Q[n] = (labels[n] - 3) / 2;
    T = sum[n](labels[n]);
    M = max[n](labels[n] * 1 + labels[n]);
    Z[n, c] = X[n, c] * f32(labels[n] > 2);
    W[n, c] = where(labels[n] - 3, X[n, c], -1.0);
    K[n] = i32(f64(k[n]) * 1.5) / (k[n] - 1);
    G[c] = argmax[n](i64(X[n, c] * 100.0));
    R[n] = abs(-labels[n]) + relu(3 - labels[n]) + min[c](i64(X[n, c] * 10.0));
    S[n, c] = X[n, c] * where(labels[n] > 2, 0.5, 2);
    output A; output Q; output T; output M; output Z; output W; output K; output G; output R; output S;
""", dict(labels=L, k=k32, X=rnd(7, 3)), lambda x: dict(
    S=x["X"] * np.where(x["labels"] > 2, np.float32(0.5), np.float32(2))[:, None],
    A=x["labels"] * 2 - 7, Q=trunc_div(x["labels"] - 3, np.int64(2)), T=np.int64(x["labels"].sum()),
    M=np.int64((2 * x["labels"]).max()), Z=x["X"] * (x["labels"] > 2).astype(np.float32)[:, None],
    W=np.where((x["labels"] - 3)[:, None] != 0, x["X"], np.float32(-1)),
    K=trunc_div(np.trunc(x["k"] * 1.5).astype(np.int32), x["k"] - np.int32(1)),
    G=np.argmax((x["X"] * np.float32(100)).astype(np.int64), axis=0),
    R=np.abs(x["labels"]) + np.maximum(3 - x["labels"], 0) + (x["X"] * np.float32(10)).astype(np.int64).min(axis=1)))

def sigmoid(z):
    return 1 / (1 + np.exp(-z))
def int_labels_grad(x):
    p = sigmoid(x["X"].astype(np.float64) @ x["w"]); y = (x["labels"] > 2).astype(np.float64)
    return dict(loss=np.float32(((p - y) ** 2).sum()),
                dw=(x["X"].T.astype(np.float64) @ (2 * (p - y) * p * (1 - p))).astype(np.float32))
case("int_labels_grad", """
    size N = 8, D = 5;
    input labels[N] : i64;
    input X[N, D];
    input w[D];
    p[n] = sigmoid(X[n, d] * w[d]);
    y[n] = f32(labels[n] > 2);
    loss = sum[n]((p[n] - y[n]) ** 2);
    dw = grad(loss, w);
    output loss; output dw;
""", dict(labels=np.array([0, 5, 3, 2, 9, 3, 1, 4], dtype=np.int64), X=rnd(8, 5), w=rnd(5)), int_labels_grad,
     tol=2e-5)


# ---- index variables as values, and `i in N` ranges (version 2) ----
case("one_hot", """
    size N = 7, C = 5;
    input labels[N] : i64;
    Y[n, c in C] = f32(labels[n] == c);
    output Y;
""", dict(labels=np.array([0, 4, 3, 2, 4, 3, 1], dtype=np.int64)), lambda x: dict(
    Y=(x["labels"][:, None] == np.arange(5)).astype(np.float32)))

case("identity", """
    size N = 7;
    I[i in N, j in N] = f32(i == j);
    D[i in N, j in 4] = 2 * i - j;
    output I; output D;
""", {}, lambda x: dict(I=np.eye(7, dtype=np.float32), D=2 * np.arange(7)[:, None] - np.arange(4)))

case("range_reductions", """
    size N = 7, K = 5;
    input x[N];
    input A[N, K];
    s = sum[i in N](f32(i) * x[i]);
    t = sum[i in N, k in K](f64(i * k));
    m[k] = max[i](A[i, k] * f32(N - i));
    a[i] = argmax[k in K](A[i, k] - f32(k) / 4);
    w[i] = sum[j](f32(j) * A[i, j]);
    output s; output t; output m; output a; output w;
""", dict(x=rnd(7), A=rnd(7, 5)), lambda x: dict(
    s=np.float32((np.arange(7) * x["x"]).sum()), t=np.float64(np.outer(np.arange(7), np.arange(5)).sum()),
    m=(x["A"] * (7 - np.arange(7))[:, None].astype(np.float32)).max(0),
    a=np.argmax(x["A"] - np.arange(5).astype(np.float32) / 4, axis=1).astype(np.float32),
    w=(x["A"] * np.arange(5).astype(np.float32)).sum(1)))
# argmax along an index its argument does not vary with: every position
# ties, the first (0) wins, as numpy's argmax of a constant row (a fuzzer's
# crasher: tests/fuzz/regress/build-argmax-constant.tra)
case("argmax_constant", """
    size N = 7, K = 5;
    input A[N, K];
    a[i] = argmax[j in K](A[i, 2]);
    b[i, k] = argmin[j in N](A[i, k] * 2.0);
    output a; output b;
""", dict(A=rnd(7, 5)), lambda x: dict(a=np.zeros(7, np.float32), b=np.zeros((7, 5), np.float32)))
def max_ties_grad(x):
    """max over a dim and 2x2 max pooling of a tensor full of ties: the
    gradient goes to the first maximal element only, as PyTorch's"""
    import torch
    F = torch.nn.functional
    X = torch.tensor(x["X"], dtype=torch.float64, requires_grad=True)
    m = X.max(dim=1).values
    P = F.max_pool2d(X[None, None], 2)[0, 0]
    n = torch.amin(X, dim=0)
    loss = (m * torch.arange(1, 6, dtype=torch.float64)).sum() + (P * P + P).sum()
    (dX,) = torch.autograd.grad(loss, [X])
    f = lambda a: a.detach().numpy().astype(np.float32)
    return dict(m=f(m), P=f(P), dX=f(dX))
case("max_ties", """
    size N = 5, M = 6;
    input X[N, M];
    m[i] = max[j](X[i, j]);
    P[y, x] = max[py in 2, px in 2](X[2*y + py, 2*x + px]);
    loss = sum[i](m[i] * f32(i + 1)) + sum[y, x](P[y, x] * P[y, x] + P[y, x]);
    dX = grad(loss, X);
    output m; output P; output dX;
""", dict(X=np.random.default_rng(5).integers(1, 3, (5, 6)).astype(np.float32)), max_ties_grad,
     block=4, ranks=[1, 2, 3, 4])
def falling_grad(x):
    A, W = x["A"], x["W"]
    dA = W[::-1].copy()
    dA[6::-2, ::-1] += 2 * A[6::-2, ::-1]
    return dict(R=A[::-1], S=A[6::-2, ::-1], dA=dA)
# positions that fall as their index rises: reversed and strided from the
# end, with the gradient put back where each element came from
case("falling_positions", """
    size N = 7, K = 5;
    input A[N, K];
    input W[N, K];
    R[i, k] = A[N - 1 - i, k];
    S[i, k] = A[N - 1 - 2*i, K - 1 - k];
    loss = sum[i, k](R[i, k] * W[i, k]) + sum[i, k](S[i, k] * S[i, k]);
    dA = grad(loss, A);
    output R; output S; output dA;
""", dict(A=rnd(7, 5), W=rnd(7, 5)), falling_grad, block=3, ranks=[1, 2, 3, 4])
def strided_rows(x):
    A, W = x["A"], x["W"]
    dA = np.zeros_like(A)
    dA[:, 1:11:2] += 2 * A[:, 1:11:2]
    dA += W[:, ::-1]
    dA[1:7:2, 0:12:3] += 1
    return dict(S=A[:, 1:11:2], R=A[:, ::-1], T=A[1:7:2, 0:12:3], dA=dA)
# windows strided along the innermost dim, reversed along it and strided
# along both, blocks that do not divide the extents; the gradient scatters
# each back (runtime/slice.c's stepping rows, its scatter by |stride|)
case("strided_rows", """
    size N = 7, K = 11, H = 5, R3 = 3, C4 = 4;
    input A[N, K];
    input W[N, K];
    S[i, k in H] = A[i, 2*k + 1];
    R[i, k] = A[i, K - 1 - k];
    T[i in R3, k in C4] = A[2*i + 1, 3*k];
    loss = sum[i, k](S[i, k] * S[i, k]) + sum[i, k](R[i, k] * W[i, k]) + sum[i, k](T[i, k]);
    dA = grad(loss, A);
    output S; output R; output T; output dA;
""", dict(A=rnd(7, 11), W=rnd(7, 11)), strided_rows, block=3, ranks=[1, 2, 3, 4])
def shifted_diagonals(x):
    X, W = x["X"].astype(np.float64), x["W"]
    Z = np.zeros((7, 7)); Z[:6, :6] = X
    D = np.array([Z[y, y + 1] for y in range(6)])
    F = np.array([X[2 * y, y] if 2 * y < 6 else 0 for y in range(6)])
    G = X * np.array([Z[y, y - 1] if y else 0 for y in range(6)])[None, :]
    K = np.array([X[5 - y, y] for y in range(6)])
    dX = np.zeros((6, 6))
    for y in range(5):
        dX[y, y + 1] += W[y]
    for y in range(3):
        dX[2 * y, y] += 2 * X[2 * y, y]
    out = dict(D=D, E=np.array([X[y + 1, y + 1] for y in range(5)]), F=F, G=G, K=K, dX=dX)
    return {k: v.astype(np.float32) for k, v in out.items()}
# an index name in two positions of one access, one of them shifted or
# strided: each position a window, the name a diagonal of them, and the
# gradient back on the elements read
case("shifted_diagonals", """
    size H = 6;
    input X[H, H];
    input W[H];
    D[y] = X[y, y + 1];
    E[y] = X[y + 1, y + 1];
    F[y] = X[2*y, y];
    G[i, y] = X[i, y] * X[y, y - 1];
    K[y] = X[H - 1 - y, y];
    loss = sum[y](D[y] * W[y]) + sum[y](F[y] * F[y]);
    dX = grad(loss, X);
    output D; output E; output F; output G; output K; output dX;
""", dict(X=rnd(6, 6), W=rnd(6)), shifted_diagonals, block=4, ranks=[1, 2, 3, 4])
def window_outside(x):
    A, B = x["A"], x["B"]
    S = np.zeros((2, 4, 5), np.float32); S[1] = A[0]
    T = np.zeros((4, 2, 5), np.float32); T[:, 1] = B[:, 0]
    dA = np.zeros_like(A); dA[0] = 2 * A[0]
    dB = np.zeros_like(B); dB[:, 0] = 1
    return dict(S=S, T=T, dA=dA, dB=dB)
# windows whose positions read outside the input on a dim before the last
# and on the last but one, each output chunk served by one input chunk
# (runtime/slice.c's copy_whole, its offset tables' -1), and their scatters
case("window_outside", """
    size N = 6, M = 4, K = 5, I2 = 2;
    input A[N, M, K];
    input B[M, N, K];
    S[i in I2, m, k] = A[3*i - 3, m, k];
    T[m, i in I2, k] = B[m, 3*i - 3, k];
    loss = sum[i, m, k](S[i, m, k] * S[i, m, k]) + sum[m, i, k](T[m, i, k]);
    dA = grad(loss, A);
    dB = grad(loss, B);
    output S; output T; output dA; output dB;
""", dict(A=rnd(6, 4, 5), B=rnd(4, 6, 5)), window_outside, block=3, ranks=[1, 2, 3])
case("index_arithmetic", """
    size N = 7, K = 5;
    input A[N, K];
    input B[K, N];
    def ramp(X[i, j]) -> Y[i, j] {
        Y[i, j] = X[i, j] * f32(i - 2 * j);
    }
    Z[i, j] = A[i, j] * f32(i + j);
    L[i, j] = where(i >= j, A[i, j], 0.0);
    T[i, j] = A[i, j] + f32(i) * 10.0 - f32(j / 2);
    RA = ramp(A);
    RB = ramp(B);
    output Z; output L; output T; output RA; output RB;
""", dict(A=rnd(7, 5), B=rnd(5, 7)), lambda x: (lambda i, j: dict(
    Z=x["A"] * (i + j).astype(np.float32), L=np.where(i >= j, x["A"], np.float32(0)),
    T=x["A"] + i.astype(np.float32) * 10 - (j // 2).astype(np.float32),
    RA=x["A"] * (i - 2 * j).astype(np.float32),
    RB=x["B"] * (j.T - 2 * i.T).astype(np.float32)))(*np.indices((7, 5))))

def index_grad(x):
    i, j = np.indices((7, 5))
    A, B, X = (x[k].astype(np.float64) for k in "ABX")
    Z = A * (i + j)
    onehot = (x["labels"][:, None] == np.arange(5)).astype(np.float64)
    return dict(loss=np.float32((Z * B + Z ** 2).sum()), dA=((i + j) * (B + 2 * Z)).astype(np.float32),
                dX=(2 * (X - onehot)).astype(np.float32))
case("index_grad", """
    size N = 7, K = 5;
    input A[N, K];
    input B[N, K];
    input X[N, K];
    input labels[N] : i64;
    Z[i, j] = A[i, j] * f32(i + j);
    loss = sum[i, j](Z[i, j] * B[i, j] + Z[i, j] ** 2);
    dA = grad(loss, A);
    l2 = sum[n, c in K]((X[n, c] - f32(labels[n] == c)) ** 2);
    dX = grad(l2, X);
    output loss; output dA; output dX;
""", dict(A=rnd(7, 5), B=rnd(7, 5), X=rnd(7, 5), labels=np.array([0, 4, 3, 2, 4, 3, 1], dtype=np.int64)),
     index_grad, tol=2e-5)

def one_hot_training(x):
    X, L = x["X"].astype(np.float64), x["labels"]
    Y = (L[:, None] == np.arange(3)).astype(np.float64)
    W = np.zeros((5, 3))
    for _ in range(6):
        Z = X @ W
        P = np.exp(Z - Z.max(1, keepdims=True))
        P /= P.sum(1, keepdims=True)
        W -= 0.5 * X.T @ (P - Y) / len(X)
    return dict(W=W.astype(np.float32))
case("one_hot_training", """
    import "nn.tra";
    size N = 8, D = 5, C = 3;
    input X[N, D];
    input labels[N] : i64;
    param W[D, C] = zeros;
    repeat 6 {
        Y[n, c in C] = f32(labels[n] == c);
        Z[n, c] = X[n, d] * W[d, c];
        loss = softmax_xent(Z, Y);
        dW = grad(loss, W);
        W[d, c] -= 0.5 * dW[d, c];
    }
    output W;
""", dict(X=rnd(8, 5), labels=np.array([0, 2, 1, 1, 0, 2, 2, 1], dtype=np.int64)), one_hot_training, tol=2e-5)

# ---- products regrouped to fit the index limit (issue 31, item 2) ----
def product_grouping(x):
    f = {k: v.astype(np.float64) for k, v in x.items()}
    Y = np.einsum("d,e,gihb,gifabc,hfac->de", f["T0"], f["T1"], f["T2"], f["T3"], f["T4"])
    P = np.einsum("abcdefgh,i,i->abcdefgh", f["X"], f["V"], f["U"])
    return dict(Y=Y.astype(np.float32), P=P.astype(np.float32), Q=Y.astype(np.float32), R=(2 * P).astype(np.float32))
case("product_grouping", """
    size N = 3, M = 2;
    input T0[N]; input T1[N];
    input T2[N, N, N, N];
    input T3[N, N, N, N, N, N];
    input T4[N, N, N, N];
    input X[M, M, M, M, M, M, M, M];
    input V[N]; input U[N];
    # left to right, T0 T1 T2 joined with T3 holds 10 indices: regrouped
    Y[d, e] = T0[d] * T1[e] * T2[g, i, h, b] * T3[g, i, f, a, b, c] * T4[h, f, a, c];
    # X V holds 9: V U first
    P[a, b, c, d, e, f, g, h] = X[a, b, c, d, e, f, g, h] * V[i] * U[i];
    # an explicit sum around a product that must be regrouped
    Q[d, e] = sum[g, i, h, b, f, a, c](T0[d] * T1[e] * T2[g, i, h, b] * T3[g, i, f, a, b, c] * T4[h, f, a, c]);
    R[a, b, c, d, e, f, g, h] = 2 * X[a, b, c, d, e, f, g, h] * V[i] * U[i];
    output Y; output P; output Q; output R;
""", dict(T0=rnd(3), T1=rnd(3), T2=rnd(3, 3, 3, 3), T3=rnd(3, 3, 3, 3, 3, 3), T4=rnd(3, 3, 3, 3),
          X=rnd(2, 2, 2, 2, 2, 2, 2, 2), V=rnd(3), U=rnd(3)), product_grouping, block=2, tol=1e-5, ranks=[1, 2, 3])

def product_many(x):
    want = x["X"].astype(np.float64)
    for k in range(8):
        want = want * float(x["V%d" % k].astype(np.float64) @ x["U%d" % k].astype(np.float64))
    return dict(Y=want.astype(np.float32))
case("product_grouping_many", """
    # 17 factors, grouped greedily (more than group.c searches exactly):
    # X V0 would hold 9 indices
    size M = 2, Z = 3;
    input X[M, M, M, M, M, M, M, M];
    input V0[Z]; input U0[Z];
    input V1[Z]; input U1[Z];
    input V2[Z]; input U2[Z];
    input V3[Z]; input U3[Z];
    input V4[Z]; input U4[Z];
    input V5[Z]; input U5[Z];
    input V6[Z]; input U6[Z];
    input V7[Z]; input U7[Z];
    Y[a, b, c, d, e, f, g, h] = X[a, b, c, d, e, f, g, h] *
        V0[z0] * U0[z0] * V1[z1] * U1[z1] * V2[z2] * U2[z2] * V3[z3] * U3[z3] * V4[z4] * U4[z4] * V5[z5] * U5[z5] * V6[z6] * U6[z6] * V7[z7] * U7[z7];
    output Y;
""", dict(X=rnd(2, 2, 2, 2, 2, 2, 2, 2), **{n: rnd(3) for k in range(8) for n in ("V%d" % k, "U%d" % k)}),
     product_many, block=2, tol=1e-5, ranks=[1, 2])

# ---- loop counters, windows that move with them, shifted positions ----
# (on 1, 2, 3 and 4 ranks, blocks that divide nothing)

def padded(X, lo, n):
    """X's rows lo .. lo+n-1, zero outside X (a window's padding)."""
    out = np.zeros((n,) + X.shape[1:], X.dtype)
    for i in range(n):
        if 0 <= lo + i < len(X):
            out[i] = X[lo + i]
    return out

def minibatch_sums(x):
    X = x["X"].astype(np.float64)
    A, C = np.zeros((3, 5)), np.zeros(2 * 4)
    for e in range(2):
        for b in range(4):
            Xb = padded(X, b * 3 + e, 3)
            A += Xb * (10 * e + b + 1)
            C[e * 4 + b] = Xb.sum()
    return dict(A=A.astype(np.float32), C=C.astype(np.float32))
case("loop_counter_window", """
    size N = 11, B = 3, NB = 4, D = 5, E = 2, K = E * NB;
    input X[N, D];
    param A[B, D] = zeros;
    param C[K] = zeros;
    repeat e in E {
        repeat b in NB {                      # the last window runs past X: zeros
            Xb[n in B, d] = X[b*B + n + e, d];
            A[n, d] += Xb[n, d] * f32(10 * e + b + 1);
            s = sum[n, d](Xb[n, d]);
            C[k] += where(k == e * NB + b, s, 0);
        }
    }
    output A; output C;
""", dict(X=rnd(11, 5)), minibatch_sums, block=2, tol=1e-5, ranks=[1, 2, 3, 4])

def shifts(x):
    X = x["X"]
    return dict(L=padded(X, -1, 7), R=padded(X, 1, 7) - X, V=X[2:] * 2,
                S=padded(X, -2, 7) + X + padded(X, 3, 7))
case("shifted_positions", """
    size N = 7, J = 5;
    input X[N, J];
    L[i in N, j] = X[i - 1, j];              # an explicit range: X[-1] reads zero
    R[i, j] = X[i + 1, j] - X[i, j];         # a plain use fixes i; X[7] reads zero
    V[i, j] = 2 * X[2 + i, j];               # inferred: the largest range in X, 5
    S[i, j] = X[i - 2, j] + X[i, j] + X[(i + 1) * 1 + 2, j];
    output L; output R; output V; output S;
""", dict(X=rnd(7, 5)), shifts, block=2, ranks=[1, 2, 3, 4])

def single_positions(x):
    X, l = x["X"].astype(np.float64), x["labels"]
    A = sum(X[b + 2] * l[b] for b in range(4))
    L = sum(l[2 * b] for b in range(4) if 2 * b < 7)
    s = X[1:].sum()
    return dict(A=A.astype(np.float32), L=np.float32(L), R=(X[3] - X[6]).astype(np.float32),
                s=np.float32(s), T=(X[:, 0] * 2).astype(np.float32))
case("single_positions", """
    size N = 7, D = 3, NB = 4;
    input X[N, D];
    input labels[N] : i64;
    param A[D] = zeros;
    param L = zeros;
    repeat b in NB {
        A[d] += X[b + 2, d] * f32(labels[b]);   # row b + 2, label b
        L += f32(labels[2 * b]);                # past the end: zero
    }
    R[d] = X[3, d] - X[N - 1, d];
    s = sum[i, d](X[i + 1, d]);                 # i inferred for the sum: 6
    T[i] = X[i, 0] + X[i, D - 3];
    output A; output L; output R; output s; output T;
""", dict(X=rnd(7, 3), labels=np.array([3, 1, 4, 1, 5, 9, 2], dtype=np.int64)), single_positions,
     block=2, tol=1e-5, ranks=[1, 2, 3, 4])

def minibatch_sgd(x):
    X, L = x["X"].astype(np.float64), x["labels"]
    W = np.zeros((5, 3))
    for e in range(2):
        for b in range(3):
            Xb, Lb = X[b * 4:b * 4 + 4], L[b * 4:b * 4 + 4]
            Y = (Lb[:, None] == np.arange(3)).astype(np.float64)
            Z = Xb @ W
            P = np.exp(Z - Z.max(1, keepdims=True))
            P /= P.sum(1, keepdims=True)
            W -= 0.5 / (1 + e) * Xb.T @ (P - Y) / len(Xb)
    return dict(W=W.astype(np.float32))
case("minibatch_sgd", """
    import "nn.tra";
    size N = 12, B = 4, NB = 3, D = 5, C = 3;
    input X[N, D];
    input labels[N] : i64;
    param W[D, C] = zeros;
    repeat e in 2 {
        repeat b in NB {
            Xb[n in B, d] = X[b*B + n, d];
            Y[n in B, c in C] = f32(labels[B*b + n] == c);
            Z[n, c] = Xb[n, d] * W[d, c];
            loss = softmax_xent(Z, Y);
            dW = grad(loss, W);
            W[d, c] -= (0.5 / (1 + f32(e))) * dW[d, c];
        }
    }
    output W;
""", dict(X=rnd(12, 5), labels=np.array([0, 2, 1, 1, 0, 2, 2, 1, 0, 0, 1, 2], dtype=np.int64)),
     minibatch_sgd, tol=2e-5, ranks=[1, 2, 3, 4])

def counter_schedule(x):
    """a learning rate computed from the loop counter (issue 31, item 5):
    a rank-0 statement whose value the counter gives each epoch"""
    X = x["X"].astype(np.float64)
    W, V = np.zeros(7), np.zeros(7)
    for e in range(3):
        lr = 0.1 / (1 + e)
        W -= lr * X
        for b in range(2):
            V += (e * 2 + b) * 0.5 * X
    return dict(W=W.astype(np.float32), V=V.astype(np.float32))
case("counter_schedule", """
    size N = 7, NB = 2;
    input X[N];
    param W[N] = zeros;
    param V[N] = zeros;
    repeat e in 3 {
        lr = 0.1 / (1 + f32(e));
        W[n] -= lr * X[n];
        repeat b in NB {
            step = e * NB + b;                 # an i64 scalar
            half = f32(step) * 0.5;
            V[n] += half * X[n];
        }
    }
    output W; output V;
""", dict(X=rnd(7)), counter_schedule, block=2, tol=1e-5, ranks=[1, 2, 3])
for level in ("-O0", "-O1"):
    case("counter_schedule" + level, CASES[-1]["src"], dict(X=CASES[-1]["inputs"]["X"]), counter_schedule,
         block=2, tol=1e-5, flags=[level], ranks=[1, 3])

def loss_curve(x):
    """a training curve: a param written element by element at positions
    the loop counters give (issue 31, item 5), and a row per epoch"""
    X, T = x["X"].astype(np.float64), x["T"].astype(np.float64)
    W = np.zeros(3)
    L, H, S = np.zeros((3, 2)), np.zeros((3, 3)), np.full(7, 1.0)
    for e in range(3):
        for b in range(2):
            Xb, Tb = X[b * 3:b * 3 + 3], T[b * 3:b * 3 + 3]
            R = Xb @ W - Tb
            loss = (R * R).sum() / 3
            L[e, b] = loss
            S[e * 2 + b + 1] += loss
            W -= 0.1 * 2 * Xb.T @ R / 3
        H[e] = W
    S[0] *= 3
    return dict(W=W.astype(np.float32), losses=L.astype(np.float32), hist=H.astype(np.float32),
                S=S.astype(np.float32))
case("loss_curve", """
    size N = 6, D = 3, E = 3, NB = 2, B = 3;
    input X[N, D];
    input T[N];
    param W[D] = zeros;
    param losses[E, NB] = zeros;        # the curve: one element per step
    param hist[E, D] = zeros;           # W after each epoch: a row per epoch
    param S[2 * E + 1] = ones;
    S[0] *= 3;                          # a fixed position, outside the loops
    repeat e in E {
        repeat b in NB {
            Xb[n in B, d] = X[b*B + n, d];
            Tb[n in B] = T[b*B + n];
            R[n] = Xb[n, d] * W[d] - Tb[n];
            loss = sum[n](R[n] * R[n]) / B;
            losses[e, b] = loss;
            S[e * NB + b + 1] += loss;
            dW = grad(loss, W);
            W[d] -= 0.1 * dW[d];
        }
        hist[e, d] = W[d];
    }
    output W; output losses; output hist; output S;
""", dict(X=rnd(6, 3), T=rnd(6)), loss_curve, block=2, tol=2e-5, ranks=[1, 2, 3])
for level in ("-O0", "-O1"):
    case("loss_curve" + level, CASES[-1]["src"], CASES[-1]["inputs"], loss_curve, block=2, tol=2e-5,
         flags=[level], ranks=[1, 3])

def window_grads(x):
    """gradients through windows and shifts, by PyTorch autograd"""
    import torch
    W = torch.tensor(x["W0"], dtype=torch.float64, requires_grad=True)
    X = torch.tensor(x["X"], dtype=torch.float64)
    Wc = W.detach().clone()
    for b in range(3):                      # a window that moves with b
        Wv = Wc.clone().requires_grad_(True)
        Wb = torch.zeros(2, 4, dtype=torch.float64)
        Wb[:len(Wv[b * 2 + 1:b * 2 + 3])] = Wv[b * 2 + 1:b * 2 + 3]
        loss = ((Wb * X[4:]) ** 2).sum()
        loss.backward()
        Wc = Wc - 0.1 * Wv.grad
    # shifted reads: Y[i] = W[i - 1] X[i] + W[i + 1] (zero outside W)
    Wm = torch.cat([torch.zeros(1, 4, dtype=torch.float64), W[:-1]])
    Wp = torch.cat([W[1:], torch.zeros(1, 4, dtype=torch.float64)])
    l2 = ((Wm * X + Wp) ** 2).sum()
    dW, = torch.autograd.grad(l2, W)
    return dict(W=Wc.numpy().astype(np.float32), dW=dW.numpy().astype(np.float32))
case("window_grad", """
    size N = 6, B = 2, NB = 3, D = 4;
    input X[N, D];
    input W0[N, D];
    param W[N, D] = "W0.npy";
    Y[i, d] = W[i - 1, d] * X[i, d] + W[i + 1, d];
    l2 = sum[i, d](Y[i, d] ** 2);
    dW = grad(l2, W);
    repeat b in NB {                         # the last window runs past W
        Wb[n in B, d] = W[b*B + n + 1, d];
        loss = sum[n, d]((Wb[n, d] * X[n + 4, d]) ** 2);
        g = grad(loss, W);
        W[i, d] -= 0.1 * g[i, d];
    }
    output W; output dW;
""", dict(X=rnd(6, 4), W0=rnd(6, 4)), window_grads, block=4, tol=2e-5, ranks=[1, 2, 3, 4])

# ---- gathers: the gradient adds into the rows read ----
def gather_sgd(x):
    """three SGD steps on two tables read by gathers with repeated
    indices, by PyTorch autograd: E - lr * dE (lr a 0-d input), and W
    through F = W - 0.05 dW, W = (W + F) / 2"""
    import torch
    E = torch.tensor(x["E0"], dtype=torch.float64)
    W = torch.tensor(x["W0"], dtype=torch.float64)
    h, t = (torch.tensor(x[n]) for n in ("h", "t"))
    X, lr = torch.tensor(x["X"], dtype=torch.float64), float(x["lr"])
    for _ in range(3):
        E.requires_grad_(True)
        W.requires_grad_(True)
        loss = (((E[h] - E[t] + X) ** 2) * W[h] + W[t]).sum()
        gE, gW = torch.autograd.grad(loss, [E, W])
        with torch.no_grad():
            E = E - lr * gE
            W = (W + (W - 0.05 * gW)) / 2
    return dict(E=E.detach().numpy().astype(np.float32), W=W.detach().numpy().astype(np.float32))
case("gather_sgd", """
    size V = 11, D = 5, B = 9;
    input h[B] : i64;
    input t[B] : i64;
    input X[B, D];
    input lr;
    input E0[V, D];
    input W0[V, D];
    param E[V, D] = "E0.npy";
    param W[V, D] = "W0.npy";
    repeat 3 {
        loss = sum[b, d]((E[h[b], d] - E[t[b], d] + X[b, d]) ** 2 * W[h[b], d] + W[t[b], d]);
        dE = grad(loss, E);
        dW = grad(loss, W);
        E[v, d] -= lr * dE[v, d];
        F[v, d] = W[v, d] - 0.05 * dW[v, d];
        W[v, d] = (W[v, d] + F[v, d]) / 2;
    }
    output E; output W;
""", dict(h=np.array([3, 3, 3, 3, 0, 10, 3, 7, 3], dtype=np.int64), t=np.array([3, 0, 0, 10, 10, 3, 5, 5, 3], dtype=np.int64),
       X=rnd(9, 5), lr=np.array(0.02, dtype=np.float32), E0=rnd(11, 5) * 0.5, W0=rnd(11, 5) * 0.5),
    gather_sgd, block=4, tol=1e-5, ranks=[1, 2, 3, 4])

def convolutions(x):
    """valid and same 2-d convolutions, a strided one, 2x2 max pooling and a
    3-d convolution, with the gradients of a loss through them wrt the
    kernel and the input, by PyTorch"""
    import torch
    F = torch.nn.functional
    t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    X, K, K3, X3 = t(x["X"]), t(x["K"]), t(x["K3"]), t(x["X3"])
    Y = F.conv2d(X[None], K)[0]
    Z = F.conv2d(X[None], K, padding=1)[0]
    S = F.conv2d(X[None], K, stride=2)[0]
    P = F.max_pool2d(Z[None], 2)[0]
    V = F.conv3d(X3[None], K3)[0]
    loss = (Y ** 2).sum() + (P * P).sum() + S.sum()
    loss3 = (V ** 2).sum()
    dK, dX = torch.autograd.grad(loss, [K, X])
    dK3, dX3 = torch.autograd.grad(loss3, [K3, X3])
    f = lambda a: a.detach().numpy().astype(np.float32)
    return dict(Y=f(Y), Z=f(Z), S=f(S), P=f(P), V=f(V), loss=f(loss), dK=f(dK), dX=f(dX), dK3=f(dK3), dX3=f(dX3))
case("convolution", """
    size C = 2, O = 3, H = 7, W = 6, R = 3;
    input X[C, H, W];
    input K[O, C, R, R];
    input X3[C, 5, H, W];
    input K3[O, C, 2, 3, 2];
    Y[o, y, x] = K[o, c, dy, dx] * X[c, y + dy, x + dx];                   # valid
    Z[o, y in H, x in W] = K[o, c, dy, dx] * X[c, y + dy - 1, x + dx - 1]; # same
    S[o, y, x] = K[o, c, dy, dx] * X[c, 2*y + dy, 2*x + dx];               # stride 2
    P[o, y, x] = max[py in 2, px in 2](Z[o, 2*y + py, 2*x + px]);          # 2x2 pooling
    V[o, t, y, x] = K3[o, c, dt, dy, dx] * X3[c, t + dt, y + dy, x + dx];  # 3-d, valid
    loss = sum[o, y, x](Y[o, y, x] ** 2) + sum[o, y, x](P[o, y, x] * P[o, y, x]) + sum[o, y, x](S[o, y, x]);
    loss3 = sum[o, t, y, x](V[o, t, y, x] ** 2);
    dK = grad(loss, K);
    dX = grad(loss, X);
    dK3 = grad(loss3, K3);
    dX3 = grad(loss3, X3);
    output Y; output Z; output S; output P; output V; output loss;
    output dK; output dX; output dK3; output dX3;
""", dict(X=rnd(2, 7, 6), K=rnd(3, 2, 3, 3), X3=rnd(2, 5, 7, 6), K3=rnd(3, 2, 2, 3, 2)), convolutions,
     block=4, tol=2e-5, ranks=[1, 2, 3, 4])

def conv_direct(x):
    """direct convolutions (TRA_CONV): batch, channels and kernels over several
    blocks, a dilated window, a pending weight expression, and the gradients
    wrt the kernel and the input through them, by PyTorch (inputs scaled
    down: partial sums over channel blocks add in another order on more
    ranks, and the runs are compared with each other to 1e-6 absolute)"""
    import torch
    F = torch.nn.functional
    t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    X, K, B = t(x["X"]), t(x["K"]), t(x["B"])
    Y = F.conv2d(X, K, padding=(1, 2)) + B[None, :, None, None]
    D = F.conv2d(X, 2 * K, dilation=(1, 2))
    loss = (torch.tanh(Y) ** 2).sum() + (D * D).sum() / 10
    dK, dX, dB = torch.autograd.grad(loss, [K, X, B])
    f = lambda a: a.detach().numpy().astype(np.float32)
    return dict(Y=f(Y), D=f(D), dK=f(dK), dX=f(dX), dB=f(dB))
case("convolution_direct", """
    size N = 5, C = 5, O = 4, H = 8, W = 11, R = 3;
    input X[N, C, H, W];
    input K[O, C, R, R];
    input B[O];
    Y[n, o, y in H, x in 13] = K[o, c, dy, dx] * X[n, c, y + dy - 1, x + dx - 2] + B[o];
    D[n, o, y, x] = (2 * K[o, c, dy, dx]) * X[n, c, y + dy, x + 2*dx];   # dilated along x
    loss = sum[n, o, y, x](tanh(Y[n, o, y, x]) ** 2) + sum[n, o, y, x](D[n, o, y, x] * D[n, o, y, x]) / 10;
    dK = grad(loss, K);
    dX = grad(loss, X);
    dB = grad(loss, B);
    output Y; output D; output dK; output dX; output dB;
""", dict(X=rnd(5, 5, 8, 11) / 4, K=rnd(4, 5, 3, 3) / 4, B=rnd(4)), conv_direct, block=3, tol=2e-5, ranks=[1, 2, 3, 4])

def conv_halo(x):
    """convolutions of an input partitioned along its window dims (halo
    exchanges: as the search splits X, or pinned by --place along t alone,
    or along y and x, with corner pieces), blocks of 7 dividing nothing, valid
    and padded, and the gradients wrt the kernel and the input, by PyTorch
    (inputs scaled down: the kernel's gradient sums over chunks in another
    order on more ranks, and the runs are compared to 1e-6 absolute)"""
    import torch
    F = torch.nn.functional
    t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    X, K = t(x["X"]), t(x["K"])
    V = F.conv3d(X[None], K)[0]
    Z = F.conv3d(F.pad(X, (1, 1, 1, 1, 0, 1))[None], K)[0]
    loss = (V ** 2).sum() + (torch.tanh(Z) ** 2).sum()
    dK, dX = torch.autograd.grad(loss, [K, X])
    f = lambda a: a.detach().numpy().astype(np.float32)
    return dict(V=f(V), Z=f(Z), loss=f(loss), dK=f(dK), dX=f(dX))
CONV_HALO = """
    size C = 2, O = 3, T = 20, H = 30, W = 40;
    input X[C, T, H, W];
    input K[O, C, 2, 3, 3];
    V[o, t, y, x] = K[o, c, dt, dy, dx] * X[c, t + dt, y + dy, x + dx];                            # valid
    Z[o, t in T, y in H, x in W] = K[o, c, dt, dy, dx] * X[c, t + dt, y + dy - 1, x + dx - 1];    # padded
    loss = sum[o, t, y, x](V[o, t, y, x] ** 2) + sum[o, t, y, x](tanh(Z[o, t, y, x]) ** 2);
    dK = grad(loss, K);
    dX = grad(loss, X);
    output V; output Z; output loss; output dK; output dX;
"""
for name, flags in [("convolution_halo", []), ("convolution_halo_t", ["--place", "X=part(1)"]),
                    ("convolution_halo_yx", ["--place", "X=part(2,3)"])]:
    case(name, CONV_HALO, dict(X=rnd(2, 20, 30, 40) / 4, K=rnd(3, 2, 2, 3, 3) / 4), conv_halo, block=7, tol=2e-5,
         flags=flags, ranks=[1, 2, 3, 4])

def conv_tiles(x):
    """convolutions big enough for the kernel's register tiles (codegen/conv.c,
    emit_conv_tiled): 7 kernels (tiles of 4, 2 and 1), rows of 61 and chunks
    of 40 and 21 along x (tiles of three vectors, of one, and edges), padded
    (the edges read outside X), dilated, 50 channels in chunks of 40 and 10
    (a chunk's partial sums added into the output), f32 and f64, and the
    gradients wrt the kernel and the input (the flipped kernel is tiled too),
    by PyTorch"""
    import torch
    F = torch.nn.functional
    t = lambda a: torch.tensor(a, dtype=torch.float64, requires_grad=True)
    X, K, X6, K6 = t(x["X"]), t(x["K"]), t(x["X6"]), t(x["K6"])
    Y = F.conv2d(X, K, padding=1)
    D = F.conv2d(X, K, dilation=(1, 2))
    Y6 = F.conv2d(X6, K6, padding=(0, 2))
    loss = (torch.tanh(Y) ** 2).sum() + (D * D).sum() / 10
    dK, dX = torch.autograd.grad(loss, [K, X])
    f = lambda a: a.detach().numpy().astype(np.float32)
    return dict(Y=f(Y), D=f(D), dK=f(dK), dX=f(dX), Y6=Y6.detach().numpy())
case("convolution_tiles", """
    size N = 2, C = 50, O = 7, H = 5, W = 61;
    input X[N, C, H, W];
    input K[O, C, 3, 3];
    input X6[N, 3, H, W] : f64;
    input K6[5, 3, 2, 5] : f64;
    Y[n, o, y in H, x in W] = K[o, c, dy, dx] * X[n, c, y + dy - 1, x + dx - 1];   # padded
    D[n, o, y, x] = K[o, c, dy, dx] * X[n, c, y + dy, x + 2*dx];                    # dilated
    Y6[n, o, y, x in W] = K6[o, c, dy, dx] * X6[n, c, y + dy, x + dx - 2];
    loss = sum[n, o, y, x](tanh(Y[n, o, y, x]) ** 2) + sum[n, o, y, x](D[n, o, y, x] * D[n, o, y, x]) / 10;
    dK = grad(loss, K);
    dX = grad(loss, X);
    output Y; output D; output dK; output dX; output Y6;
""", dict(X=rnd(2, 50, 5, 61) / 8, K=rnd(7, 50, 3, 3) / 8, X6=rnd(2, 3, 5, 61, dt=np.float64),
          K6=rnd(5, 3, 2, 5, dt=np.float64)), conv_tiles, block=40, tol=2e-5, ranks=[1, 2, 3, 4])

def conv_of_sparse(x):
    """a convolution of a sparse product (its halo made from dense chunks)"""
    H = x["A"].astype(np.float64) * x["B"]
    Y = np.zeros((38, 28))
    for dy in range(3):
        for dx in range(3):
            Y += x["K"][dy, dx] * H[dy:dy + 38, dx:dx + 28]
    return dict(Y=Y.astype(np.float32))
case("convolution_halo_sparse", """
    size N = 40, M = 30;
    input A[N, M] : sparse;
    input B[N, M];
    input K[3, 3];
    H[n, m] = A[n, m] * B[n, m];
    Y[y, x] = K[dy, dx] * H[y + dy, x + dx];
    output Y;
""", dict(A=rnd(40, 30) * (rnd(40, 30) > 1), B=rnd(40, 30), K=rnd(3, 3)), conv_of_sparse, block=8, tol=1e-5,
     ranks=[1, 2, 3, 4])

def run(c, tmp):
    d = os.path.join(tmp, c["name"])
    os.makedirs(d)
    src = os.path.join(d, c["name"] + ".tra")
    with open(src, "w") as f:
        f.write(c["src"])
    for k, a in c["inputs"].items():
        np.save(os.path.join(d, k + ".npy"), a)
    exe = os.path.join(d, "prog")
    p = subprocess.run([TRAC, "--block", str(c["block"]), *c["flags"], src, "-o", exe],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return ["trac failed:\n" + p.stderr]
    errors, first = [], None
    for n in c["ranks"]:
        for f in os.listdir(d):
            if f.endswith(".npy") and f[:-4] not in c["inputs"]:
                os.unlink(os.path.join(d, f))
        args = [MPIRUN, "-np", str(n), exe] + ["%s=%s.npy" % (k, k) for k in c["inputs"]]
        p = subprocess.run(args, cwd=d, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            errors.append("%d ranks: exit %d\n%s" % (n, p.returncode, p.stderr))
            continue
        out = {f[:-4]: np.load(os.path.join(d, f)) for f in os.listdir(d)
               if f.endswith(".npy") and f[:-4] not in c["inputs"]}
        if "check" in c:
            try:
                c["check"](c["inputs"], out)
            except AssertionError as e:
                errors.append("%d ranks: %s" % (n, e))
        if c["expect"]:
            want = c["expect"](c["inputs"])
            for k, ref in want.items():
                ref = np.asarray(ref)
                got = out.get(k)
                if got is None:
                    errors.append("%d ranks: no output %s" % (n, k))
                    continue
                if got.shape != ref.shape or got.dtype != ref.dtype:
                    errors.append("%d ranks: %s is %s %s, expected %s %s" % (n, k, got.dtype, got.shape,
                                                                           ref.dtype, ref.shape))
                    continue
                tol = c["tol"] or (0 if ref.dtype.kind == "i" else 1e-12 if ref.dtype == np.float64 else 2e-6)
                scale = max(np.abs(ref).max(), 1e-30)
                err = np.abs(got.astype(np.float64) - ref).max() / scale
                if not err <= tol:
                    errors.append("%d ranks: %s max relative error %.3g > %.1g" % (n, k, err, tol))
        # results do not depend on the rank count beyond rounding
        if first is None:
            first = out
        else:
            for k in first:
                if k in out and not np.allclose(first[k], out[k], rtol=1e-5, atol=1e-6):
                    errors.append("%d ranks: %s differs from the 1-rank run" % (n, k))
    return errors


sys.exit(run_cases(CASES, run))
