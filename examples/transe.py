"""transe: TransE on a synthetic knowledge graph, against the same SGD
steps in numpy (float64)."""
import numpy as np


def data(shapes, rng):
    """A graph where tail = head + relation offset (mod V): learnable by
    translations; negatives are random tails."""
    v, d = shapes["E0"]
    nr = shapes["R0"][0]
    b = shapes["h"][0]
    h = rng.integers(0, v, b)
    r = rng.integers(0, nr, b)
    t = (h + 7 * r + 1) % v
    neg = rng.integers(0, v, b)
    return {"h": h, "r": r, "t": t, "neg": neg,
            "E0": rng.uniform(-0.5, 0.5, (v, d)), "R0": rng.uniform(-0.5, 0.5, (nr, d))}


def steps(h, r, t, neg, E0, R0, n=20, lr=1.0, margin=1.0):
    E, R = E0.astype(np.float32).astype(np.float64), R0.astype(np.float32).astype(np.float64)
    h, r, t, neg = (a.astype(np.int64) for a in (h, r, t, neg))
    losses = []
    for _ in range(n):
        dp = E[h] + R[r] - E[t]
        dn = E[h] + R[r] - E[neg]
        act = (margin + (dp ** 2).sum(1) - (dn ** 2).sum(1)) > 0
        losses.append(np.maximum(margin + (dp ** 2).sum(1) - (dn ** 2).sum(1), 0).mean())
        g = act[:, None] * 2 / len(h)
        gp, gn = g * dp, g * dn
        dE, dR = np.zeros_like(E), np.zeros_like(R)
        np.add.at(dE, h, gp - gn)
        np.add.at(dE, t, -gp)
        np.add.at(dE, neg, gn)
        np.add.at(dR, r, gp - gn)
        E -= lr * dE
        R -= lr * dR
    return E, R, losses


def check(h, r, t, neg, E0, R0, E, Rel):
    Eref, Rref, losses = steps(h, r, t, neg, E0, R0)
    err = max(np.abs(E - Eref).max() / np.abs(Eref).max(), np.abs(Rel - Rref).max() / np.abs(Rref).max())
    print("transe: embeddings within %.1e of numpy's SGD; margin loss %.4f -> %.4f" % (err, losses[0], losses[-1]))
    return err < 1e-4 and losses[-1] < losses[0]
