#!/usr/bin/python3
"""
twophase.py: contractions run by two-phase schedules (issue 9), compiled by
trac with --strategy LINE=two-phase, run under mpirun on 1 to 4 ranks,
compared with numpy.

Each case is planned for 2, 3 and 4 ranks and run on 1, 2, 3 and 4 (a
schedule planned for one count runs on any: planned rank r's join groups
on r modulo the count).  Inputs are pinned to placements that make the
schedule send chunks (not co-partitioned, or on one rank), and extents do
not divide by the blocks.  On the rank count planned for, --profile's bytes
sent by the two-phase op must be its prediction exactly.

Environment: TRAC, MPIRUN (from make check).  Arguments: case names to run
only those.
"""
import os, re, subprocess, sys, textwrap
import numpy as np
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import mpi_env, run_cases


TRAC = os.environ.get("TRAC", "trac")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
RUN_RANKS = [1, 2, 3, 4]
env = mpi_env()

CASES = []

def case(name, src, inputs, expect, block=4, planned=(2, 3, 4), pins=(), tol=None):
    """src: its contraction on line 1 of the program's statements (the
    line is found by its '#2p' mark); expect: inputs -> {output: array}."""
    CASES.append(dict(name=name, src=textwrap.dedent(src).lstrip(), inputs=inputs, expect=expect,
                      block=block, planned=planned, pins=list(pins), tol=tol))

r = np.random.default_rng(9)
def rnd(*shape, dt=np.float32):
    return r.standard_normal(shape).astype(dt)

case("matmul", """
    size I = 37, K = 53, J = 29;
    input A[I, K];
    input B[K, J];
    C[i, j] = A[i, k] * B[k, j];    #2p
    output C;
""", dict(A=rnd(37, 53), B=rnd(53, 29)), lambda x: dict(C=x["A"] @ x["B"]), block=8,
    pins=["A=part(0)", "B=part(1)"])

case("matmul_copartitioned_f64", """
    size I = 23, K = 41, J = 19;
    input A[I, K] : f64;
    input B[K, J] : f64;
    C[i, j] = A[i, k] * B[k, j];    #2p
    output C;
""", dict(A=rnd(23, 41, dt=np.float64), B=rnd(41, 19, dt=np.float64)), lambda x: dict(C=x["A"] @ x["B"]),
    block=6, pins=["A=part(1)", "B=part(0)"])

case("one_rank_inputs", """
    size I = 17, K = 30, J = 11;
    input A[I, K];
    input B[K, J];
    C[j, i] = A[i, k] * B[k, j];    #2p
    output C;
""", dict(A=rnd(17, 30), B=rnd(30, 11)), lambda x: dict(C=(x["A"] @ x["B"]).T), block=5,
    pins=["A=part()", "B=part()"])

case("batched", """
    size B = 5, I = 6, K = 7, J = 4;
    input X[B, I, K];
    input Y[B, K, J];
    Z[b, i, j] = X[b, i, k] * Y[b, k, j];    #2p
    output Z;
""", dict(X=rnd(5, 6, 7), Y=rnd(5, 7, 4)), lambda x: dict(Z=np.einsum("bik,bkj->bij", x["X"], x["Y"])),
    block=3, pins=["X=part(1)", "Y=part(0)"])

case("two_summed_labels", """
    size I = 9, J = 5, K = 7, A = 6;
    input X[I, J, K];
    input W[J, K, A];
    M[i, a] = X[i, j, k] * W[j, k, a];    #2p
    output M;
""", dict(X=rnd(9, 5, 7), W=rnd(5, 7, 6)), lambda x: dict(M=np.einsum("ijk,jka->ia", x["X"], x["W"])),
    block=3, pins=["X=part(2)", "W=part(2)"])

case("dot_to_scalar", """
    size I = 13, J = 10;
    input A[I, J];
    input B[I, J];
    s = A[i, j] * B[i, j];    #2p
    output s;
""", dict(A=rnd(13, 10), B=rnd(13, 10)), lambda x: dict(s=np.float32((x["A"].astype(np.float64) * x["B"]).sum())),
    block=4, pins=["A=part(0)", "B=part(1)"], tol=1e-5)

case("max_product", """
    size I = 11, K = 14, J = 9;
    input A[I, K];
    input B[K, J];
    C[i, j] = max[k](A[i, k] * B[k, j]);    #2p
    output C;
""", dict(A=rnd(11, 14), B=rnd(14, 9)), lambda x: dict(C=(x["A"][:, :, None] * x["B"][None, :, :]).max(1)),
    block=4, pins=["A=part(0)", "B=part(1)"])

case("chain", """
    size I = 21, K = 18, J = 15, L = 12;
    input A[I, K];
    input B[K, J];
    input D[J, L];
    C[i, j] = A[i, k] * B[k, j];    #2p
    E[i, l] = relu(C[i, j]) * D[j, l];    #2p
    output E;
""", dict(A=rnd(21, 18), B=rnd(18, 15), D=rnd(15, 12)),
    lambda x: dict(E=np.maximum(x["A"] @ x["B"], 0) @ x["D"]), block=5, pins=["A=part(1)", "D=part(0)"])


def run(c, tmp):
    d = os.path.join(tmp, c["name"])
    os.makedirs(d)
    src = os.path.join(d, c["name"] + ".tra")
    with open(src, "w") as f:
        f.write(c["src"])
    for k, a in c["inputs"].items():
        np.save(os.path.join(d, k + ".npy"), a)
    lines = [i + 1 for i, l in enumerate(c["src"].splitlines()) if "#2p" in l]
    flags = ["--block", str(c["block"])]
    for l in lines:
        flags += ["--strategy", "%d=two-phase" % l]
    for p in c["pins"]:
        flags += ["--place", p]
    want = c["expect"](c["inputs"])
    errors = []
    for planned in c["planned"]:
        exe = os.path.join(d, "prog%d" % planned)
        p = subprocess.run([TRAC, "-P", str(planned), *flags, "--explain=json", src], capture_output=True,
                           text=True)
        if p.returncode != 0:
            return ["trac --explain failed:\n" + p.stderr]
        if p.stdout.count('"strategy": "two-phase"') < len(lines):
            errors.append("planned for %d: not every marked statement is two-phase" % planned)
        p = subprocess.run([TRAC, "-P", str(planned), *flags, src, "-o", exe], capture_output=True, text=True)
        if p.returncode != 0:
            return ["trac failed:\n" + p.stderr]
        first = None
        for n in RUN_RANKS:
            for f in os.listdir(d):
                if f.endswith(".npy") and f[:-4] not in c["inputs"]:
                    os.unlink(os.path.join(d, f))
            args = [MPIRUN, "-np", str(n), exe] + ["%s=%s.npy" % (k, k) for k in c["inputs"]]
            if n == planned:
                args.append("--profile")
            p = subprocess.run(args, cwd=d, capture_output=True, text=True, env=env)
            what = "planned for %d, %d ranks" % (planned, n)
            if p.returncode != 0:
                errors.append("%s: exit %d\n%s" % (what, p.returncode, p.stderr))
                continue
            if n == planned:
                ops = re.findall(r"bytes: op=\d+ kind=twophase sent=(\d+) keys=(\d+) chunks=(\d+) pred=(\d+)",
                                 p.stdout)
                for sent, keys, chunks, pred in ops:
                    if int(keys) != 0 or int(chunks) != int(pred):
                        errors.append("%s: the two-phase op sent %s bytes, predicted %s" % (what, chunks, pred))
            for k, ref in want.items():
                ref = np.asarray(ref)
                path = os.path.join(d, k + ".npy")
                if not os.path.exists(path):
                    errors.append("%s: no output %s" % (what, k))
                    continue
                got = np.load(path)
                if got.shape != ref.shape or got.dtype != ref.dtype:
                    errors.append("%s: %s is %s %s, expected %s %s" % (what, k, got.dtype, got.shape,
                                                                     ref.dtype, ref.shape))
                    continue
                tol = c["tol"] or (1e-12 if ref.dtype == np.float64 else 3e-6)
                scale = max(np.abs(ref).max(), 1e-30)
                err = np.abs(got.astype(np.float64) - ref).max() / scale
                if not err <= tol:
                    errors.append("%s: %s max relative error %.3g > %.1g" % (what, k, err, tol))
                if first is None:
                    first = got
                elif not np.allclose(first, got, rtol=1e-5, atol=1e-6):
                    errors.append("%s: %s differs from the 1-rank run" % (what, k))
            if n == planned and not errors:
                # --no-overlap waits for every chunk before the first kernel:
                # the same sums in the same order, so the same bits
                outs = {k: np.load(os.path.join(d, k + ".npy")) for k in want}
                p = subprocess.run(args[:-1] + ["--no-overlap"], cwd=d, capture_output=True, text=True, env=env)
                if p.returncode != 0:
                    errors.append("%s --no-overlap: exit %d\n%s" % (what, p.returncode, p.stderr))
                for k, ref in outs.items():
                    got = np.load(os.path.join(d, k + ".npy"))
                    if got.tobytes() != ref.tobytes():
                        errors.append("%s: %s with --no-overlap differs from the overlapped run" % (what, k))
    return errors


if __name__ == "__main__":
    sys.exit(run_cases(CASES, run, prefix="trac-twophase."))
