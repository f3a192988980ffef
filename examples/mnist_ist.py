"""mnist_ist: a 784-512-512-10 network with per-neuron standardisation
trained on Fashion-MNIST by independent subnet training (mnist_ist.tra).

As an example (examples/Makefile, on a subset): the accuracy the program
prints must be what its trained weights give (the inference recomputed in
numpy: statistics on the first S training images, then the test images),
and within 5 points of PyTorch's synchronous SGD by the same recipe.

Run directly, it trains the program by IST and, with the split clause
removed, by trac's data-parallel synchronous SGD, on the same ranks and
data, and prints both test accuracies and the bytes each sent:

    python3 mnist_ist.py [NP [TRAC_FLAGS...]]      # e.g. 2 -D EPOCHS=2
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist                    # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
S, EPS = 2000, 1e-5


def recipe(path=os.path.join(HERE, "mnist_ist.tra")):
    """The program's sizes and consts that make the recipe."""
    src = open(path).read()
    get = lambda k: float(re.search(r"\b%s = ([0-9.e-]+)" % k, src).group(1))
    return dict(B=int(get("B")), EPOCHS=int(get("EPOCHS")), lr=get("lr"))


def data(shapes, rng):
    n, t = shapes["X"][0], shapes["Xt"][0]
    X, L, Xt, Lt = fashion_mnist.load(n, t)
    return dict(X=X, labels=L, Xt=Xt, tlabels=Lt)


def standardise(U, mu=None, sd=None):
    if mu is None:
        mu = U.mean(0)
        sd = np.sqrt(((U - mu) ** 2).mean(0) + EPS)
    return (U - mu) / sd, mu, sd


def infer(X, Xt, W1, W2, W3, b3):
    """The program's inference: each neuron's statistics with the full
    network on the first S training images, then the test images."""
    s = min(S, len(X))
    A1, m1, s1 = standardise(X[:s] @ W1)
    _, m2, s2 = standardise(np.maximum(A1, 0) @ W2)
    At1 = np.maximum(standardise(Xt @ W1, m1, s1)[0], 0)
    At2 = np.maximum(standardise(At1 @ W2, m2, s2)[0], 0)
    return At2 @ W3 + b3


def torch_sync(X, labels, Xt, tlabels, epochs, lr, B, seed=0):
    """PyTorch's synchronous SGD by the program's recipe (its own initial
    weights of the same distributions): the test accuracy."""
    import torch
    torch.manual_seed(seed)
    f = lambda a: torch.tensor(np.asarray(a), dtype=torch.float32)
    X, Xt = f(X), f(Xt)
    L = torch.tensor(np.asarray(labels), dtype=torch.int64)
    d, h, c = X.shape[1], 512, 10
    W1 = (torch.randn(d, h) * 0.05).requires_grad_()
    W2 = (torch.randn(h, h) * 0.0625).requires_grad_()
    W3 = (torch.randn(h, c) * 0.0625).requires_grad_()
    b3 = torch.zeros(c, requires_grad=True)

    def norm(U):
        mu = U.mean(0)
        return (U - mu) / torch.sqrt(((U - mu) ** 2).mean(0) + EPS)
    opt = torch.optim.SGD([W1, W2, W3, b3], lr=lr)
    for _ in range(epochs):
        for b in range(len(X) // B):
            Z = torch.relu(norm(torch.relu(norm(X[b * B:(b + 1) * B] @ W1)) @ W2)) @ W3 + b3
            loss = torch.nn.functional.cross_entropy(Z, L[b * B:(b + 1) * B])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        Zt = infer(X.numpy(), Xt.numpy(), W1.numpy(), W2.numpy(), W3.numpy(), b3.numpy())
    return float((Zt.argmax(1) == np.asarray(tlabels)).mean())


def check(X, labels, Xt, tlabels, acc, W1, W2, W3, b3):
    r = recipe()
    mine = float((infer(X, Xt, W1, W2, W3, b3).argmax(1) == tlabels).mean())
    want = torch_sync(X, labels, Xt, tlabels, r["EPOCHS"], r["lr"], r["B"])
    print("mnist_ist: test accuracy %.4f (its weights give %.4f); PyTorch's synchronous SGD %.4f"
          % (float(acc), mine, want))
    return abs(mine - float(acc)) <= 1.5 / len(Xt) and abs(float(acc) - want) <= 0.05


def run_both(np_, flags, trac=None, mpirun="mpirun", mpiflags=(), wall=False):
    """Both trainings on np_ ranks: {"ist"|"sync": (accuracy, bytes sent, seconds, ist lines)};
    mpiflags go to mpirun (e.g. --mca btl self,tcp).  The seconds are --profile's total, or with
    wall, the wall time of a second whole run without --profile (whose barrier before every op
    costs a network round trip each)."""
    trac = trac or os.environ.get("TRAC") or os.path.join(HERE, "..", "trac")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    out = {}
    with tempfile.TemporaryDirectory(prefix="trac-ist.") as d:
        X, L, Xt, Lt = fashion_mnist.load()
        for k, a in dict(X=X, labels=L, Xt=Xt, tlabels=Lt).items():
            np.save(os.path.join(d, k + ".npy"), a)
        src = open(os.path.join(HERE, "mnist_ist.tra")).read()
        variants = {"ist": src, "sync": re.sub(r"(repeat b in NB) split [^{\n]*\{", r"\1 {", src)}
        for name, text in variants.items():
            with open(os.path.join(d, name + ".tra"), "w") as f:
                f.write(text)
            subprocess.run([trac, "-P", str(np_)] + flags + ["-I", HERE, os.path.join(d, name + ".tra"),
                            "-o", os.path.join(d, name)], check=True, env=env)
            args = [mpirun, "-np", str(np_), *mpiflags, os.path.join(d, name)] + \
                   ["%s=%s.npy" % (k, k) for k in ("X", "labels", "Xt", "tlabels")] + ["--profile"]
            p = subprocess.run(args, cwd=d, env=env, capture_output=True, text=True, check=True)
            acc = float([x for x in p.stdout.splitlines() if x.startswith("acc = ")][-1].split("=")[1])
            summ = [x for x in p.stdout.splitlines() if x.startswith("summary:")][-1]
            field = lambda k: float(re.search(r"\b%s=([0-9.e+-]+)" % k, summ).group(1))
            secs = field("total_s")
            if wall:
                t0 = time.time()
                subprocess.run(args[:-1], cwd=d, env=env, capture_output=True, check=True)
                secs = time.time() - t0
            out[name] = (acc, field("sent"), secs, [x for x in p.stdout.splitlines() if x.startswith("ist:")])
    return out


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    res = run_both(n, sys.argv[2:])
    for name, what in (("ist", "IST"), ("sync", "synchronous SGD (data-parallel)")):
        acc, sent, secs, _ = res[name]
        print("%-32s on %d ranks: test accuracy %.4f, %.3g bytes sent, %.2f s" % (what, n, acc, sent, secs))
