#!/usr/bin/python3
"""
sparse.py: sparse inputs (LANGUAGE.md, "Sparse tensors"), compiled by trac
with small blocks, run under mpirun on 1, 2, 3 and 4 ranks, compared with
scipy.sparse and numpy; gradients with PyTorch autograd.

Each case is a .tra program with sparse inputs (random patterns with empty
rows, empty columns and empty blocks, extents that do not divide by the
block), and the expected outputs.  Every case runs with its sparse inputs
stored as each file kind a sparse input accepts (FORMATS), and the plan is
made for as many ranks as it runs on and for 4.

Environment: TRAC, MPIRUN (from make check).  Arguments: case names.
"""
import os, subprocess, sys, textwrap
import numpy as np
import scipy.sparse as sp
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import mpi_env, run_cases

TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
RANKS = [1, 2, 3, 4]
FORMATS = os.environ.get("SPARSE_FORMATS", "csr coo-z").split()
env = mpi_env()

CASES = []


def case(name, src, inputs, expect, sparse=("A",), block=3, tol=2e-5, flags=(), emits=(), formats=None,
         npz=()):
    """emits: text the emitted C (trac -S) must hold; formats: the file
    kinds to run with, FORMATS when None; npz: outputs written as a csr
    .npz, which scipy must find in canonical form (each row's columns
    ascending, none twice)."""
    CASES.append(dict(name=name, src=textwrap.dedent(src), inputs=inputs, expect=expect,
                      sparse=set(sparse), block=block, tol=tol, flags=list(flags), emits=list(emits),
                      formats=formats, npz=set(npz)))


r = np.random.default_rng(11)


def sprand(m, n, density, dt=np.float32):
    """A random sparse matrix with an empty row, an empty column and an
    empty 3x3 block, as a dense array."""
    a = (r.random((m, n)) < density) * r.standard_normal((m, n))
    a[1, :] = 0
    a[:, 2] = 0
    a[3:6, 3:6] = 0
    return a.astype(dt)


def rnd(*shape, dt=np.float32):
    return r.standard_normal(shape).astype(dt)


A = sprand(11, 11, 0.3)
R = sprand(10, 7, 0.35)
X = rnd(11, 5); Xr = rnd(7, 4); u = rnd(11); B = rnd(11, 11)
P = np.abs(rnd(11, 11)) + 0.5
f64 = lambda a: a.astype(np.float64)

case("spmm", """
    size V = 11, F = 5;
    input A[V, V] : sparse;
    input X[V, F];
    Y[i, f] = A[i, j] * X[j, f];
    Z[j, f] = A[i, j] * X[i, f];
    output Y; output Z;
""", dict(A=A, X=X), lambda x: dict(Y=f64(x["A"]) @ x["X"], Z=f64(x["A"]).T @ x["X"]))

for strategy in ("replicate", "broadcast-left", "broadcast-right"):      # line 5 is Y's
    case("spmm_" + strategy, CASES[0]["src"], dict(A=A, X=X), CASES[0]["expect"],
         flags=("--strategy", "5=" + strategy))

case("spmm_rect", """
    size M = 10, N = 7, F = 4;
    input R[M, N] : sparse;
    input X[N, F];
    Y[i, f] = R[i, j] * X[j, f];
    W[j, f] = R[i, j] * Y[i, f];
    output Y; output W;
""", dict(R=R, X=Xr), lambda x: dict(Y=f64(x["R"]) @ x["X"], W=f64(x["R"]).T @ (f64(x["R"]) @ x["X"])),
     sparse=("R",))

case("elementwise", """
    size V = 11;
    input A[V, V] : sparse;
    input B[V, V];
    input P[V, V];
    input u[V];
    E[i, j] = A[i, j] * B[i, j];
    Q[i, j] = A[i, j] / P[i, j];
    T[i, j] = 2 * tanh(relu(A[i, j])) - abs(A[i, j]);
    S[i, j] = A[i, j] * u[i];
    output E; output Q; output T; output S;
""", dict(A=A, B=B, P=P, u=u), lambda x: dict(
    E=f64(x["A"]) * x["B"], Q=f64(x["A"]) / x["P"],
    T=2 * np.tanh(np.maximum(f64(x["A"]), 0)) - np.abs(f64(x["A"])), S=f64(x["A"]) * x["u"][:, None]))

case("dense_results", """
    size V = 11;
    input A[V, V] : sparse;
    input B[V, V];
    C[i, j] = A[i, j] + B[i, j];
    D[i, j] = exp(A[i, j]);
    G[i, j] = where(A[i, j] > 0, B[i, j], 1);
    output C; output D; output G;
""", dict(A=A, B=B), lambda x: dict(C=f64(x["A"]) + x["B"], D=np.exp(f64(x["A"])),
                                    G=np.where(x["A"] > 0, x["B"], 1.0)))

case("reductions", """
    size V = 11;
    input A[V, V] : sparse;
    d[i] = A[i, j];
    c[j] = sum[i](A[i, j] * A[i, j]);
    m[i] = max[j](A[i, j]);
    n[j] = min[i](A[i, j]);
    t = sum[i, j](A[i, j]);
    output d; output c; output m; output n; output t;
""", dict(A=A), lambda x: dict(d=f64(x["A"]).sum(1), c=(f64(x["A"]) ** 2).sum(0), m=f64(x["A"]).max(1),
                               n=f64(x["A"]).min(0), t=f64(x["A"]).sum()))

case("chain", """
    size V = 11, F = 5, H = 3;
    input A[V, V] : sparse;
    input X[V, F];
    input W[F, H];
    Y[i, h] = relu(A[i, j] * X[j, f] * W[f, h]);
    Z[i, h] = A[i, j] * Y[j, h];
    output Z;
""", dict(A=A, X=X, W=rnd(5, 3)), lambda x: dict(
    Z=f64(x["A"]) @ np.maximum(f64(x["A"]) @ x["X"] @ x["W"], 0)))


# Windows of a sparse input (LANGUAGE.md, "Index arithmetic and ranges"):
# shifted, strided, reversed and moved by a loop counter, along rows and
# along columns; each is cut from the compressed rows (runtime/slice.c's
# slice_sparse), never made dense.
Xw = rnd(7, 4)
case("windows", """
    size M = 10, N = 7, F = 4;
    input R[M, N] : sparse;
    input X[N, F];
    Y[i, j] = R[i + 1, j];
    Z[i, j in N] = R[i, j - 1];
    S[i, j] = R[2*i, j];
    T[i, j in N] = R[i, N - 1 - j];
    Q[i, j] = R[i + 1, j + 2];
    P[i, f] = R[i + 1, j] * X[j, f];
    output Y; output Z; output S; output T; output Q; output P;
""", dict(R=R, X=Xw), lambda x: dict(
    Y=x["R"][1:], Z=np.pad(x["R"][:, :-1], ((0, 0), (1, 0))), S=x["R"][0::2], T=x["R"][:, ::-1],
    Q=x["R"][1:, 2:], P=f64(x["R"][1:]) @ x["X"]), sparse=("R",),
     emits=("trt_slice(",), npz=("T", "Z"))


# A product whose output is stored transposed to the sparse rows (Y[h, n],
# as its left side orders it): a row's elements add into a contiguous
# accumulator, added into the output once a row (codegen/sparse.c,
# row_accumulates), empty rows and all.  (An intermediate, as in
# sum[n](relu(A[n, d] * W[d, h])), keeps its operands' order [n, h]:
# kernels.py's intermediate_order.)
case("row_accumulator", """
    size N = 10, D = 11, H = 8;
    input A[N, D] : sparse;
    input W[D, H];
    Y[h, n] = A[n, d] * W[d, h];
    output Y;
""", dict(A=sprand(10, 11, 0.3), W=rnd(11, 8)), lambda x: dict(
    Y=(f64(x["A"]) @ x["W"]).T), block=4, emits=("ra[l",))

def batches(x, rows):
    """Mini-batches of 4 rows (the last padded with zeros), or of 3
    columns, times W, summed over the batch."""
    Rp = np.zeros((12, 9)); Rp[:10, :7] = x["R"]
    s = np.stack([(Rp[b * 4:(b + 1) * 4, :7] @ x["W"]).sum(0) for b in range(3)])
    c = np.stack([(Rp[:10, b * 3:(b + 1) * 3] @ x["V"]).sum(0) for b in range(3)])
    return dict(s=s, c=c)


case("window_batches", """
    size M = 10, N = 7, B = 4, NB = 3, H = 3, C = 3, K = 2;
    input R[M, N] : sparse;
    input W[N, H];
    input V[C, K];
    param s[NB, H] = zeros;
    param c[NB, K] = zeros;
    repeat b in NB {
        Rb[n in B, j] = R[b*B + n, j];
        s[b, h] = sum[n](Rb[n, j] * W[j, h]);
        Rc[i, m in C] = R[i, b*C + m];
        c[b, k] = sum[i](Rc[i, m] * V[m, k]);
    }
    output s; output c;
""", dict(R=R, W=rnd(7, 3), V=rnd(3, 2)), lambda x: batches(x, 4), sparse=("R",))


# A sparse tensor of three dims (from a .npy: its zeros dropped), its
# columns the last two dims flattened: windows along the middle dim
# (reversed: a row's elements then come out of column order) and the
# last, and along the rows.
S3 = sprand(20, 6, 0.4).reshape(4, 5, 6)
case("window_rank3", """
    size A = 4, Bd = 5, C = 6;
    input S[A, Bd, C] : sparse;
    Y[i, j, k] = S[i, j + 1, k];
    Z[i, j in Bd, k] = S[i, Bd - 1 - j, k];
    U[i, j, k in C] = S[i, j, k - 2];
    V[i, j, k] = S[i + 1, j, 2*k];
    output Y; output Z; output U; output V;
""", dict(S=S3), lambda x: dict(
    Y=x["S"][:, 1:], Z=x["S"][:, ::-1], U=np.pad(x["S"][:, :, :-2], ((0, 0), (0, 0), (2, 0))),
    V=x["S"][1:, :, 0::2]), sparse=("S",), block=2, formats=("npy",))


def batch_sgd(x):
    """Two epochs of mini-batch SGD on a sparse design matrix, batches of 4
    rows (the last padded with zeros), and the gradient with respect to
    the sparse input through a window: its pattern's elements alone."""
    Rp = np.zeros((12, 7)); Rp[:10] = x["R"]
    yp = np.zeros(12); yp[:10] = x["y"]
    W = np.zeros(7)
    for e in range(2):
        for b in range(3):
            Rb, yb = Rp[b * 4:(b + 1) * 4], yp[b * 4:(b + 1) * 4]
            W -= 0.1 * 2 * Rb.T @ (Rb @ W - yb)
    g = np.zeros((10, 7)); g[1:] = x["V"][:9]
    return dict(W=W, g=g * (x["R"] != 0))


case("window_sgd", """
    size M = 10, N = 7, B = 4, NB = 3;
    input R[M, N] : sparse;
    input y[M];
    input V[M, N];
    param W[N] = zeros;
    repeat 2 {
        repeat b in NB {
            Rb[n in B, j] = R[b*B + n, j];
            loss = sum[n]((Rb[n, j] * W[j] - y[b*B + n]) ** 2);
            dW = grad(loss, W);
            W[j] -= 0.1 * dW[j];
        }
    }
    l2 = sum[i, j](R[i + 1, j] * V[i, j]);
    g = grad(l2, R);
    output W; output g;
""", dict(R=R, y=rnd(10), V=rnd(10, 7)), batch_sgd, sparse=("R",))

def gcn_grad(x):
    import torch
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    A, X = t(x["A"]), t(x["X"])
    W = t(x["W"]).requires_grad_()
    V2 = t(x["V2"]).requires_grad_()
    H = torch.relu(A @ X @ W)
    Z = A @ H @ V2
    loss = (Z ** 2).sum()
    loss.backward()
    return dict(loss=loss.detach().numpy().astype(np.float32), dW=W.grad.numpy(), dV=V2.grad.numpy())


case("grad", """
    size V = 11, F = 5, H = 4, C = 3;
    input A[V, V] : sparse;
    input X[V, F];
    param W[F, H] = "W.npy";
    param V2[H, C] = "V2.npy";
    H1[i, h] = relu(A[i, j] * X[j, f] * W[f, h]);
    Z[i, c] = A[i, j] * H1[j, h] * V2[h, c];
    loss = sum[i, c](Z[i, c] ** 2);
    dW = grad(loss, W);
    dV = grad(loss, V2);
    output loss; output dW; output dV;
""", dict(A=A, X=X, W=rnd(5, 4), V2=rnd(4, 3)), gcn_grad, tol=1e-4)


def grad_sparse(x):
    import torch
    A = torch.tensor(x["A"], dtype=torch.float64, requires_grad=True)
    X = torch.tensor(x["X"], dtype=torch.float64)
    loss = (torch.tanh(A @ X) ** 2).sum()
    loss.backward()
    return dict(dA=(A.grad * (A != 0)).numpy())


case("grad_sparse_input", """
    size V = 11, F = 5;
    input A[V, V] : sparse;
    input X[V, F];
    loss = sum[i, f](tanh(A[i, j] * X[j, f]) ** 2);
    dA = grad(loss, A);
    output dA;
""", dict(A=A, X=X), grad_sparse, tol=1e-4)


# Sampled products (SDDMM): the inner sum computed only at O's elements;
# K = 5 is two blocks of 3, so the sampled sums add over blocks too.
O = (sprand(10, 7, 0.4) != 0).astype(np.float32)
Rm = (O * rnd(10, 7)).astype(np.float32)
U0, V0 = rnd(10, 5), rnd(7, 5)

case("sddmm", """
    size M = 10, N = 7, K = 5;
    input O[M, N] : sparse;
    input R[M, N] : sparse;
    input A[M, N] : sparse;
    input U[M, K];
    input V[N, K];
    E[i, j] = O[i, j] * (U[i, k] * V[j, k] - R[i, j]);
    S[i, j] = A[i, j] * (U[i, k] * V[j, k]);
    T[i, j] = relu(A[i, j]) * (U[i, k] * V[j, k]) * 2;
    output E; output S; output T;
""", dict(O=O, R=Rm, A=R, U=U0, V=V0), lambda x: dict(
    E=f64(x["O"]) * (f64(x["U"]) @ f64(x["V"]).T - x["R"]),
    S=f64(x["A"]) * (f64(x["U"]) @ f64(x["V"]).T),
    T=np.maximum(f64(x["A"]), 0) * (f64(x["U"]) @ f64(x["V"]).T) * 2), sparse=("O", "R", "A"))

# R of another pattern than O: R's element at O's place q is found by a
# search of its row (trt_csr_find) where the two differ, at q where R's
# element there is O's (codegen/sparse.c); rows here hold elements O has
# not and lack some it has, so both ways are taken.
R2 = sprand(10, 7, 0.5)
case("sddmm_other_pattern", """
    size M = 10, N = 7, K = 5;
    input O[M, N] : sparse;
    input R[M, N] : sparse;
    input U[M, K];
    input V[N, K];
    E[i, j] = O[i, j] * (U[i, k] * V[j, k] - R[i, j]);
    output E;
""", dict(O=O, R=R2, U=U0, V=V0), lambda x: dict(
    E=f64(x["O"]) * (f64(x["U"]) @ f64(x["V"]).T - x["R"])), sparse=("O", "R"))


def mf_grad(x):
    import torch
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    O, R = t(x["O"]), t(x["R"])
    U = t(x["U"]).requires_grad_()
    V = t(x["V"]).requires_grad_()
    E = O * (U @ V.T - R)
    loss = (E * E).sum() / O.sum() + 0.01 * ((U * U).sum() + (V * V).sum())
    loss.backward()
    return dict(loss=loss.detach().numpy(), dU=U.grad.numpy(), dV=V.grad.numpy())


case("sddmm_grad", """
    size M = 10, N = 7, K = 5;
    input O[M, N] : sparse;
    input R[M, N] : sparse;
    param U[M, K] = "U.npy";
    param V[N, K] = "V.npy";
    E[i, j] = O[i, j] * (U[i, k] * V[j, k] - R[i, j]);
    loss = sum[i, j](E[i, j] * E[i, j]) / sum[i, j](O[i, j])
         + 0.01 * (sum[i, k](U[i, k] * U[i, k]) + sum[j, k](V[j, k] * V[j, k]));
    dU = grad(loss, U);
    dV = grad(loss, V);
    output loss; output dU; output dV;
""", dict(O=O, R=Rm, U=U0, V=V0), mf_grad, sparse=("O", "R"), tol=1e-4)



def sliced_sddmm(x):
    import torch
    t = lambda a: torch.tensor(a, dtype=torch.float64)
    O = t(x["O"])
    U = t(x["U"]).requires_grad_()
    V = t(x["V"])
    E = O * (U @ V.T)
    loss = (E * E[:, 2:3]).sum()
    loss.backward()
    return dict(Un=(U - 0.1 * U.grad).detach().numpy().astype(np.float32))


# issue 34: a constant index into a sampled product (E[i, 2] with E = O U V
# and O sparse) made the contraction's result sparse and then sliced it, an
# internal error at -O1 and -O2 (TRA program invalid: a slice of a sparse
# relation); what a slice reads is now stored dense.
case("sddmm_sliced", """
    size M = 6, N = 4, K = 3;
    input O[M, N] : sparse;
    param U[M, K] = "U.npy";
    param V[N, K] = "V.npy";
    E[i, j] = O[i, j] * U[i, k] * V[j, k];
    loss = sum[i, j](E[i, j] * E[i, 2]);
    dU = grad(loss, U);
    U[i, k] -= 0.1 * dU[i, k];
    Un[i, k] = U[i, k];
    output Un;
""", dict(O=(np.where(r.random((6, 4)) < 0.6, rnd(6, 4), 0) * (np.arange(6) != 1)[:, None]).astype(np.float32), U=np.abs(rnd(6, 3)) * 0.3, V=np.abs(rnd(4, 3)) * 0.3), sliced_sddmm,
    sparse=("O",), tol=1e-4, flags=("-O1",))
case("sddmm_sliced_o2", CASES[-1]["src"], CASES[-1]["inputs"], sliced_sddmm, sparse=("O",), tol=1e-4)

def write_input(d, k, a, c, fmt):
    if k in c["sparse"] and fmt != "npy":
        m = {"csr": sp.csr_matrix, "csc": sp.csc_matrix, "coo": sp.coo_matrix}[fmt.split("-")[0]](a)
        sp.save_npz(os.path.join(d, k + ".npz"), m, compressed=fmt.endswith("-z"))
        return k + ".npz"
    np.save(os.path.join(d, k + ".npy"), a)
    return k + ".npy"


def run(c, tmp):
    errors = []
    for fmt in c["formats"] or FORMATS:
        for planned in sorted({0, 4}):
            errors += run_one(c, tmp, fmt, planned)
    return errors


def run_one(c, tmp, fmt, planned):
    d = os.path.join(tmp, "%s-%s-%d" % (c["name"], fmt, planned))
    os.makedirs(d)
    src = os.path.join(d, c["name"] + ".tra")
    with open(src, "w") as f:
        f.write(c["src"])
    files = {k: write_input(d, k, a, c, fmt) for k, a in c["inputs"].items()}
    errors, first = [], None
    exe = {}
    if c["emits"]:
        res = subprocess.run([TRAC, "-P", "2", "--block", str(c["block"]), *c["flags"], "-S", src, "-o",
                              os.path.join(d, "prog.c")], capture_output=True, text=True)
        text = open(os.path.join(d, "prog.c")).read() if res.returncode == 0 else res.stderr
        errors += ["the emitted C lacks '%s'" % e for e in c["emits"] if e not in text]
    for n in RANKS:
        p = planned or n
        if p not in exe:
            exe[p] = os.path.join(d, "prog%d" % p)
            res = subprocess.run([TRAC, "-P", str(p), "--block", str(c["block"]), *c["flags"], src,
                                  "-o", exe[p]],
                                 capture_output=True, text=True)
            if res.returncode != 0:
                return ["%s: trac -P %d failed:\n%s" % (fmt, p, res.stderr)]
        for f in os.listdir(d):
            if f.startswith("out_"):
                os.unlink(os.path.join(d, f))
        want = c["expect"](c["inputs"])
        ext = lambda k: ".npz" if k in c["npz"] else ".npy"
        args = [MPIRUN, "-np", str(n), exe[p]] + ["%s=%s" % (k, v) for k, v in files.items()] + \
               ["%s.out=out_%s%s" % (k, k, ext(k)) for k in want]
        res = subprocess.run(args, cwd=d, capture_output=True, text=True, env=env)
        tag = "%s, planned for %d, %d ranks" % (fmt, p, n)
        if res.returncode != 0:
            errors.append("%s: exit %d\n%s" % (tag, res.returncode, res.stderr))
            continue
        out = {}
        for k in want:
            if k not in c["npz"]:
                out[k] = np.load(os.path.join(d, "out_%s.npy" % k))
                continue
            m = sp.load_npz(os.path.join(d, "out_%s.npz" % k))
            if not m.has_canonical_format:
                errors.append("%s: %s.npz is not in canonical form (columns out of order or twice)" % (tag, k))
            out[k] = m.toarray()
        for k, ref in want.items():
            ref = np.asarray(ref, dtype=np.float64)
            got = out[k]
            if got.shape != ref.shape:
                errors.append("%s: %s has shape %s, expected %s" % (tag, k, got.shape, ref.shape))
                continue
            scale = max(np.abs(ref).max(), 1e-30)
            err = np.abs(got.astype(np.float64) - ref).max() / scale
            if not err <= c["tol"]:
                errors.append("%s: %s max relative error %.3g > %.1g" % (tag, k, err, c["tol"]))
        if first is None:
            first = out
        else:
            # runs on other rank counts sum in other orders: within the
            # case's tolerance of the largest value, as against numpy (an
            # element that cancels to near zero differs by its terms'
            # rounding, not its own)
            for k in first:
                scale = max(np.abs(first[k]).max(), 1e-30)
                diff = np.abs(first[k].astype(np.float64) - out[k]).max() / scale
                if not diff <= max(c["tol"], 1e-5):
                    errors.append("%s: %s differs from the first run by %.3g" % (tag, k, diff))
    return errors


# Rows of more than PREFETCH_AHEAD (16) stored elements in blocks of 64:
# the driven kernels prefetch the dense rows (X's, Z's, V's) the column
# 16 elements ahead picks (codegen/sparse.c, driven_prefetch), up to each
# block's last element; the prefetch changes no value.
AL = sprand(150, 130, 0.3)
XL, UL, VL = rnd(130, 40), rnd(150, 24), rnd(130, 24)
case("prefetch_rows", """
    size M = 150, N = 130, F = 40, K = 24;
    input A[M, N] : sparse;
    input X[N, F];
    input W[M, F];
    input U[M, K];
    input V[N, K];
    Y[i, f] = A[i, j] * X[j, f];
    Z[j, f] = A[i, j] * W[i, f];
    S[i, j] = A[i, j] * (U[i, k] * V[j, k]);
    output Y; output Z; output S;
""", dict(A=AL, X=XL, W=rnd(150, 40), U=UL, V=VL), lambda x: dict(
    Y=f64(x["A"]) @ x["X"], Z=f64(x["A"]).T @ x["W"],
    S=f64(x["A"]) * (f64(x["U"]) @ f64(x["V"]).T)), block=64, tol=1e-4,
     emits=("__builtin_prefetch(p1 + l1 * s1[0]", "__builtin_prefetch(po + l1 * so[0]",
            "__builtin_prefetch(p1 + l2 * s1[0] + l1 * s1[1] + f, 0, 3)"))

sys.exit(run_cases(CASES, run, prefix="trac-sparse."))
