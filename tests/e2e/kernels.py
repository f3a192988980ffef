#!/usr/bin/python3
"""
kernels.py: the block kernels codegen emits (codegen/kernel.c), against
numpy.einsum, on 1, 2 and 3 ranks.

Contractions become BLIS gemm calls on strided views of the chunks: these
cases put every label role (batch, m, n, k) in every position, transpose
each operand, merge adjacent labels into one gemm dimension, loop over the
labels that do not merge, and make m, n or k one element long (extent 1, or
an edge chunk one element wide), where BLIS's stride checks bite.  Reducing
loop kernels are tiled along the output's last dim (128 elements): extents
above and below a tile, with blocks that do not divide them; a reduction
over a contiguous dim goes by rows, 4 at a time, in pieces of 256 terms.

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
RANKS = [1, 2, 3]
env = mpi_env()

r = np.random.default_rng(11)
CASES = []


def einsum_case(name, spec, shapes, block, dtype="f32", stmt=None):
    """A .tra statement computing numpy.einsum(spec) on random inputs X0, X1, ..."""
    ins, out = spec.split("->")
    ins = ins.split(",")
    names = ["X%d" % i for i in range(len(ins))]
    sizes = {}
    for lab, shp in zip(ins, shapes):
        for ch, n in zip(lab, shp):
            sizes[ch] = n
    dt = np.float32 if dtype == "f32" else np.float64
    suffix = "" if dtype == "f32" else " : f64"
    lines = ["size %s;" % ", ".join("%s = %d" % (c.upper(), n) for c, n in sorted(sizes.items()))]
    for nm, lab in zip(names, ins):
        lines.append("input %s[%s]%s;" % (nm, ", ".join(c.upper() for c in lab), suffix))
    acc = lambda nm, lab: "%s[%s]" % (nm, ", ".join(lab))
    rhs = " * ".join(acc(nm, lab) for nm, lab in zip(names, ins))
    lines.append(stmt or "%s = %s;" % (acc("Y", out) if out else "Y", rhs))
    lines.append("output Y;")
    inputs = {nm: r.standard_normal(shp).astype(dt) for nm, shp in zip(names, shapes)}
    expect = lambda x: dict(Y=np.einsum(spec, *[x[n].astype(np.float64) for n in names]).astype(dt))
    CASES.append(dict(name=name, src="\n".join(lines) + "\n", inputs=inputs, expect=expect,
                      block=block))


def case(name, src, inputs, expect, block, flags=None, ranks=None):
    """flags: trac's options instead of --block BLOCK; ranks: instead of RANKS."""
    CASES.append(dict(name=name, src=textwrap.dedent(src), inputs=inputs, expect=expect,
                      block=block, flags=flags, ranks=ranks))


# ---- matmul in every orientation: transposes are strides ----
einsum_case("mm_nn", "ik,kj->ij", [(9, 7), (7, 5)], 4)
einsum_case("mm_tn", "ki,kj->ij", [(7, 9), (7, 5)], 4)
einsum_case("mm_nt", "ik,jk->ij", [(9, 7), (5, 7)], 4)
einsum_case("mm_tt", "ki,jk->ij", [(7, 9), (5, 7)], 4)
einsum_case("mm_out_t", "ik,kj->ji", [(9, 7), (7, 5)], 4)
einsum_case("mm_f64", "ik,kj->ij", [(13, 11), (11, 6)], 5, dtype="f64")
einsum_case("mm_one_block", "ik,kj->ij", [(40, 30), (30, 20)], 64)

# ---- vectors: a role missing, or of length 1 ----
einsum_case("matvec", "ik,k->i", [(9, 7), (7,)], 4)
einsum_case("vecmat", "k,kj->j", [(7,), (7, 9)], 4)
einsum_case("matvec_t", "ki,k->i", [(7, 9), (7,)], 4)
einsum_case("dot", "k,k->", [(11,), (11,)], 4)
einsum_case("outer", "i,j->ij", [(9,), (5,)], 4)
einsum_case("m1", "ik,kj->ij", [(1, 7), (7, 5)], 4)
einsum_case("n1", "ik,kj->ij", [(9, 7), (7, 1)], 4)
einsum_case("k1", "ik,kj->ij", [(9, 1), (1, 5)], 4)
einsum_case("mnk1", "ik,kj->ij", [(1, 1), (1, 1)], 4)
# edge chunks one element wide along every dim (extent = 3 blocks + 1)
einsum_case("edge1", "ik,kj->ij", [(7, 7), (7, 7)], 3)
einsum_case("edge1_t", "ki,jk->ji", [(7, 7), (7, 7)], 3)

# ---- batch labels, in any position ----
einsum_case("bmm", "bik,bkj->bij", [(3, 5, 4), (3, 4, 6)], 3)
einsum_case("bmm_mid", "ibk,kbj->ibj", [(5, 3, 4), (4, 3, 6)], 3)
einsum_case("bmm_last", "ikb,kjb->ijb", [(5, 4, 3), (4, 6, 3)], 3)
einsum_case("bmm_out_perm", "bik,bkj->jbi", [(3, 5, 4), (3, 4, 6)], 4)

# ---- several labels per role: merged when adjacent, looped otherwise ----
einsum_case("k_merged", "abc,bcd->ad", [(5, 4, 3), (4, 3, 6)], 3)
einsum_case("k_merged_whole", "abc,bcd->ad", [(5, 4, 3), (4, 3, 6)], 8)
einsum_case("k_looped", "abc,cbd->ad", [(5, 4, 3), (3, 4, 6)], 3)
einsum_case("m_merged", "abc,cd->abd", [(5, 4, 3), (3, 6)], 8)
einsum_case("m_split", "abc,cd->adb", [(5, 4, 3), (3, 6)], 3)
einsum_case("n_merged", "ab,bcd->acd", [(5, 4), (4, 3, 6)], 8)
einsum_case("mttkrp_step", "ijk,jr->irk", [(6, 5, 4), (5, 3)], 4)
einsum_case("tucker_step", "pijk,jq->piqk", [(3, 4, 5, 2), (5, 3)], 4)
einsum_case("all_roles", "bmku,bknv->bmnuv", [(2, 3, 4, 2), (2, 4, 5, 3)], 3)

# ---- reductions in loop kernels: tiled along the output's last dim ----
S = r.standard_normal((300, 150)).astype(np.float32)
case("rowsum_tiled", """
    size I = 300, J = 150;
    input S[I, J];
    s[i] = sum[j](S[i, j]);
    m[i] = max[j](S[i, j]);
    n[i] = min[j](S[i, j] * 2);
    output s; output m; output n;
""", dict(S=S), lambda x: dict(s=x["S"].sum(1), m=x["S"].max(1), n=(x["S"] * 2).min(1)), block=200)
# a reduction over a contiguous dim goes by rows (row mode): 4 rows at a
# time (here 7: a tile and 3), each row's terms in pieces of 256 (here 601:
# two and 89), exp vectorised in the pieces; f64 and i32 alike
L = r.standard_normal((7, 601)).astype(np.float32)
case("rowmode_pieces", """
    size I = 7, J = 601;
    input L[I, J];
    input D[I, J] : f64;
    input K[I, J] : i32;
    lse[i] = log(sum[j](exp(L[i, j])));
    mx[i] = max[j](L[i, j] * L[i, j]);
    d[i] = sum[j](D[i, j] * D[i, j]);
    k[i] = sum[j](K[i, j]);
    output lse; output mx; output d; output k;
""", dict(L=L, D=L.astype(np.float64) * 3, K=(L * 100).astype(np.int32)),
    lambda x: dict(lse=np.log(np.exp(x["L"].astype(np.float64)).sum(1)).astype(np.float32),
                   mx=(x["L"] * x["L"]).max(1), d=(x["D"] * x["D"]).sum(1),
                   k=x["K"].sum(1, dtype=np.int32)), block=700)
# ... but not where an input along both labels is contiguous along the
# output's: relu(A) B summed (a map fused into a product, a loop kernel)
# streams B's rows in the tile (by rows, mnist_ist's layer ran 16x slower)
def kernel_body(text, desc):
    """The C of the kernel whose comment is desc."""
    at = text.find("/* %s */" % desc)
    return text[at:text.find("\n}\n", at)] if at >= 0 else None


def kernels_marked(text, cases, mark, what):
    """For each (kernel comment, expected) of cases: whether its C holds
    mark as expected, else an error saying it goes (or not) what."""
    errors = []
    for desc, want in cases:
        body = kernel_body(text, desc)
        if body is None:
            errors.append("no kernel %s in the emitted C" % desc)
        elif (mark in body) != want:
            errors.append("kernel %s %s %s" % (desc, "not" if want else "goes", what))
    return errors


def row_mode_choice(text):
    return kernels_marked(text, (("(relu(in0) * in1) ab,bc->ac sum", False), ("in0 ab->a sum", True)),
                          "tb[", "by rows")


RA = r.standard_normal((40, 600)).astype(np.float32)
RB = r.standard_normal((600, 300)).astype(np.float32)
CASES.append(dict(name="row_mode_choice", src=textwrap.dedent("""
    size I = 40, K = 600, J = 300;
    input A[I, K];
    input B[K, J];
    C[i, j] = relu(A[i, k]) * B[k, j];
    s[i] = sum[k](A[i, k]);
    output C; output s;
"""), inputs=dict(A=RA, B=RB), block=700, c_check=row_mode_choice,
    expect=lambda x: dict(C=(np.maximum(x["A"], 0).astype(np.float64) @ x["B"]).astype(np.float32),
                          s=x["A"].sum(1))))
def coalesced(text):
    """Labels side by side in every chunk run as one loop (codegen/kernel.c
    coalesce): the views the kernel reshapes, and how many dims they keep."""
    errors = []
    for desc, rank in (("(in0 + (2 * in1)) abcd,abcd->abcd", 1), ("(in0 * in1) abcd,cd->abcd", 2),
                       ("((in0 * in1) - 1) abcd,cd->abdc", 3), ("(in0 * in1) abcd,d->abcd", 2),
                       ("(in0 * in1) abcd,abcd->ab sum", 1)):
        body = kernel_body(text, desc)
        if body is None:
            errors.append("no kernel %s in the emitted C" % desc)
        elif "co.rank = %d;" % rank not in body:
            errors.append("kernel %s: its output not seen as %d dims" % (desc, rank))
    # extents the same in every chunk are numbers (static_extents): c, d
    # (3 x 2, one block) as one loop of 6; a and b (6 and 5 by blocks of 4)
    # as the chunk has them
    body = kernel_body(text, "(in0 * in1) abcd,cd->abcd") or ""
    if "l1 < 6;" not in body or "l0 < in[0].n[0];" not in body:
        errors.append("kernel (in0 * in1) abcd,cd->abcd: its loops not over 6 and the chunk's a x b")
    return errors


CX = r.standard_normal((6, 5, 3, 2)).astype(np.float32)
CY = r.standard_normal((6, 5, 3, 2)).astype(np.float32)
CV = r.standard_normal((3, 2)).astype(np.float32)
CASES.append(dict(name="coalesced_dims", src=textwrap.dedent("""
    size A = 6, B = 5, C = 3, D = 2;
    input X[A, B, C, D];
    input Y[A, B, C, D];
    input v[C, D];
    S[a, b, c, d] = X[a, b, c, d] + 2 * Y[a, b, c, d];
    W[a, b, c, d] = X[a, b, c, d] * v[c, d];
    T[a, b, d, c] = X[a, b, c, d] * v[c, d] - 1;
    U[a, b, c, d in D] = X[a, b, c, d] * f32(d);
    R[a, b] = sum[c, d](X[a, b, c, d] * Y[a, b, c, d]);
    output S; output W; output T; output U; output R;
"""), inputs=dict(X=CX, Y=CY, v=CV), block=4, c_check=coalesced,
    expect=lambda x: dict(S=x["X"] + 2 * x["Y"], W=x["X"] * x["v"],
                          T=(x["X"] * x["v"] - 1).transpose(0, 1, 3, 2),
                          U=x["X"] * np.arange(2, dtype=np.float32),
                          R=(x["X"].astype(np.float64) * x["Y"]).sum((2, 3)).astype(np.float32))))
def driven_static(text):
    """An SpMM's feature loop (40 in one block) written as a number
    (codegen/sparse.c, DRIVEN_STATIC_MAX), its rows (50 by blocks of 40) as
    the chunk has them."""
    body = kernel_body(text, "(in0 * in1) ab,bc->ac sum")
    if body is None:
        return ["no kernel (in0 * in1) ab,bc->ac sum in the emitted C"]
    if "< 40;" not in body or "< in[0].n[0];" not in body:
        return ["the SpMM's loops not over 40 and the chunk's rows"]
    # a known count up to 16 kept a loop, which gcc vectorises (unrolled
    # first, it became scalar multiply-adds), not one of 40
    if text.count("#pragma GCC unroll 1") != 1:
        return ["not one SpMM loop (of 16) kept from unrolling"]
    return []


SA = r.standard_normal((50, 30)).astype(np.float32)
SA[r.random((50, 30)) < 0.8] = 0
SB = r.standard_normal((30, 40)).astype(np.float32)
SG = r.standard_normal((30, 16)).astype(np.float32)
CASES.append(dict(name="spmm_static_width", src=textwrap.dedent("""
    size I = 50, J = 30, F = 40, G = 16;
    input A[I, J] : sparse;
    input B[J, F];
    input B16[J, G];
    C[i, f] = A[i, j] * B[j, f];
    D[i, g] = A[i, j] * B16[j, g];
    output C; output D;
"""), inputs=dict(A=SA, B=SB, B16=SG), block=40, c_check=driven_static,
    expect=lambda x: dict(C=(x["A"].astype(np.float64) @ x["B"]).astype(np.float32),
                          D=(x["A"].astype(np.float64) @ x["B16"]).astype(np.float32))))
def two_lengths(text):
    """A row length the blocks split in two lengths (7 in blocks of 4: 4 and
    3) is a number in each of two versions of the kernel (codegen/kernel.c,
    split_label): the SpMM's, the A^T Z's, the reduction's; not the map's,
    whose dims run as one loop whatever the row's length."""
    errors = []
    for desc, lab in (("(in0 * in1) ab,bc->ac sum", 2), ("(in0 * in1) ab,ac->bc sum", 2),
                      ("exp(in0) ab->a sum", 1)):
        for n in (4, 3):
            body = kernel_body(text, "%s, label %d %d long" % (desc, lab, n))
            if body is None:
                errors.append("no version of kernel %s for rows of %d" % (desc, n))
            elif "< %d;" % n not in body and "* %d;" % n not in body:
                errors.append("kernel %s for rows of %d: no loop over %d" % (desc, n, n))
    if "((in0 * 2) + 1) ab->ab, label" in text or kernel_body(text, "((in0 * 2) + 1) ab->ab") is None:
        errors.append("the map ((in0 * 2) + 1) ab->ab not one kernel")
    return errors


TA = r.standard_normal((50, 30)).astype(np.float32)
TA[r.random((50, 30)) < 0.8] = 0
TH = r.standard_normal((30, 7)).astype(np.float32)
TZ = r.standard_normal((50, 7)).astype(np.float32)
CASES.append(dict(name="two_lengths", src=textwrap.dedent("""
    size I = 50, J = 30, C = 7;
    input A[I, J] : sparse;
    input H[J, C];
    input Z[I, C];
    Y[i, c] = A[i, j] * H[j, c];
    G[j, c] = A[i, j] * Z[i, c];
    E[i, c] = Z[i, c] * 2 + 1;
    s[i] = log(sum[c](exp(Z[i, c])));
    output Y; output G; output E; output s;
"""), inputs=dict(A=TA, H=TH, Z=TZ), block=4, c_check=two_lengths,
    expect=lambda x: dict(Y=(x["A"].astype(np.float64) @ x["H"]).astype(np.float32),
                          G=(x["A"].T.astype(np.float64) @ x["Z"]).astype(np.float32),
                          E=x["Z"] * 2 + 1,
                          s=np.log(np.exp(x["Z"].astype(np.float64)).sum(1)).astype(np.float32))))
case("colsum_tiled", """
    size I = 300, J = 150;
    input S[I, J];
    c[j] = sum[i](S[i, j] * S[i, j]);
    output c;
""", dict(S=S), lambda x: dict(c=(x["S"].astype(np.float64) ** 2).sum(0).astype(np.float32)),
    block=140)
case("sum_to_scalar", """
    size I = 300, J = 150;
    input S[I, J];
    t = sum[i, j](S[i, j]);
    output t;
""", dict(S=S), lambda x: dict(t=np.float32(x["S"].astype(np.float64).sum())), block=64)
# a reduction to one scalar whose terms cost more than its chain of additions
# (exp, log, a division) computes them in pieces of 256 into a buffer, a
# loop that vectorises, then adds them in order (codegen/kernel.c,
# costly_terms): here 1000 in blocks of 600 (pieces of 256 and 88, 256 and
# 144), a 2-d max over 30 x 70 in blocks of 35; a sum of products stays one
# loop
def scalar_pieces(text):
    return kernels_marked(text, (("log((1 + exp(-abs(in0)))) a-> sum", True),
                                 ("(exp(in0) / (1 + (in0 * in0))) ab-> max", True), ("(in0 * in0) a-> sum", False)),
                          "tb[256]", "in pieces")


PZ = (r.standard_normal(1000) * 4).astype(np.float32)
PS = r.standard_normal((30, 70)).astype(np.float32)
CASES.append(dict(name="scalar_pieces", src=textwrap.dedent("""
    size N = 1000, I = 30, J = 70;
    input z[N];
    input S[I, J];
    l = sum[n](log(1 + exp(-abs(z[n]))));
    m = max[i, j](exp(S[i, j]) / (1 + S[i, j] * S[i, j]));
    q = sum[n](z[n] * z[n]);
    output l; output m; output q;
"""), inputs=dict(z=PZ, S=PS), flags=["--block", "z=600", "--block", "S=35"], c_check=scalar_pieces,
    expect=lambda x: dict(l=np.float32(np.log1p(np.exp(-np.abs(x["z"].astype(np.float64)))).sum()),
                          m=np.float32((np.exp(x["S"].astype(np.float64)) / (1 + x["S"].astype(np.float64) ** 2)).max()),
                          q=np.float32((x["z"].astype(np.float64) ** 2).sum()))))
case("reduce_middle", """
    size I = 7, J = 200, K = 5;
    input T[I, J, K];
    u[i, k] = sum[j](T[i, j, k]);
    output u;
""", dict(T=r.standard_normal((7, 200, 5)).astype(np.float32)),
    lambda x: dict(u=x["T"].sum(1)), block=150)

# ---- BLIS 0.9's small-path sgemm reads 8 bytes past C (runtime/rel.c,
# TAIL_PAD): X and B meet in 50 x 32 x 400 gemms whose C, a chunk of
# T[i, k, a] 400 x 50 x 32 floats, is a whole number of pages; without the
# pad after chunk data this segfaulted. ----
MI = 400
case("mttkrp_sup_overread", """
    size I = 200, J = 200, K = 200, R = 32;
    input X[I, J, K];
    input B[J, R];
    input C[K, R];
    M[i, a] = X[i, j, k] * B[j, a] * C[k, a];
    output M;
""", dict(X=r.standard_normal((MI, MI, MI), dtype=np.float32),
          B=r.standard_normal((MI, 32), dtype=np.float32),
          C=r.standard_normal((MI, 32), dtype=np.float32)),
    lambda x: dict(M=np.stack([np.einsum("jk,ja,ka->a", x["X"][i].astype(np.float64), x["B"],
                                         x["C"], optimize=True) for i in range(MI)]).astype(np.float32)),
    block=None, flags=["-P", "1", "--block", "X=400x400x50", "--block", "C=50x32",
                       "-D", "I=400", "-D", "J=400", "-D", "K=400"], ranks=[1])


# ---- a batch label innermost in a large input: the gemm calls would read
# every cache line of X for one element each (ir/gemm.c, strided_calls);
# the loop kernel runs along it instead ----
def batch_inner_loop(text):
    body = kernel_body(text, "(in0 * in1) abc,bc->ac sum")
    if body is None:
        return ["no kernel (in0 * in1) abc,bc->ac sum in the emitted C"]
    return ["the product over a unit-stride batch label calls gemm"] if "trt_sgemm" in body else []


CASES.append(dict(name="batch_innermost", src=textwrap.dedent("""
    size A = 20, B = 30, C = 24;
    input X[A, B, C];
    input Z[B, C];
    Y[a, c] = X[a, b, c] * Z[b, c];
    output Y;
"""), inputs=dict(X=r.standard_normal((20, 30, 24)).astype(np.float32),
                  Z=r.standard_normal((30, 24)).astype(np.float32)), block=32, c_check=batch_inner_loop,
    expect=lambda x: dict(Y=np.einsum("abc,bc->ac", x["X"].astype(np.float64), x["Z"]).astype(np.float32))))


# ---- an intermediate a later sum reduces keeps its operands' order
# (ir/build.c, keep_order): the sparse product's result is [n, h], each
# stored element's products side by side, not [h, n] (a column of the
# output a row) ----
def natural_order(text):
    if kernel_body(text, "(in0 * in1) ab,bc->ac sum") is None:
        return ["the sparse product's result not in its operands' order [n, h]"]
    return []


NA = r.standard_normal((300, 200)).astype(np.float32)
NA[r.random((300, 200)) < 0.95] = 0
NW = r.standard_normal((200, 24)).astype(np.float32)
CASES.append(dict(name="intermediate_order", src=textwrap.dedent("""
    size N = 300, D = 200, H = 24;
    input A[N, D] : sparse;
    input W[D, H];
    s[h] = sum[n](relu(A[n, d] * W[d, h]));
    output s;
"""), inputs=dict(A=NA, W=NW), block=100, c_check=natural_order,
    expect=lambda x: dict(s=np.maximum(x["A"].astype(np.float64) @ x["W"], 0).sum(0).astype(np.float32))))


def run(c, tmp):
    d = os.path.join(tmp, c["name"])
    os.makedirs(d)
    src = os.path.join(d, c["name"] + ".tra")
    with open(src, "w") as f:
        f.write(c["src"])
    for k, a in c["inputs"].items():
        np.save(os.path.join(d, k + ".npy"), a)
    exe = os.path.join(d, "prog")
    flags = c.get("flags") or ["--block", str(c["block"])]
    p = subprocess.run([TRAC] + flags + [src, "-o", exe],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return ["trac failed:\n" + p.stderr + "\n" + c["src"]]
    errors = []
    if c.get("c_check"):
        p = subprocess.run([TRAC] + flags + ["-S", src, "-o", exe + ".c"], capture_output=True, text=True)
        errors += ["trac -S failed:\n" + p.stderr] if p.returncode else c["c_check"](open(exe + ".c").read())
    want = c["expect"](c["inputs"])
    for n in c.get("ranks") or RANKS:
        args = [MPIRUN, "-np", str(n), exe] + ["%s=%s.npy" % (k, k) for k in c["inputs"]]
        p = subprocess.run(args, cwd=d, capture_output=True, text=True, env=env)
        if p.returncode != 0:
            errors.append("%d ranks: exit %d\n%s" % (n, p.returncode, p.stderr))
            continue
        for k, ref in want.items():
            ref = np.asarray(ref)
            got = np.load(os.path.join(d, k + ".npy"))
            if got.shape != ref.shape or got.dtype != ref.dtype:
                errors.append("%d ranks: %s is %s %s, expected %s %s"
                              % (n, k, got.dtype, got.shape, ref.dtype, ref.shape))
                continue
            tol = 1e-12 if ref.dtype == np.float64 else 1e-5
            scale = max(np.abs(ref).max(), 1e-30)
            err = np.abs(got.astype(np.float64) - ref).max() / scale
            if not err <= tol:
                errors.append("%d ranks: %s max relative error %.3g > %.1g" % (n, k, err, tol))
    return errors


sys.exit(run_cases(CASES, run))
