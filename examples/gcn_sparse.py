"""gcn_sparse: a two-layer GCN classifies the nodes of a stochastic block model."""
import numpy as np


def data(shapes, rng):
    v, f = shapes["X"]
    c = shapes["Y"][1]
    labels = rng.integers(0, c, v)
    same = labels[:, None] == labels[None, :]
    adj = (rng.random((v, v)) < np.where(same, 0.01, 0.0005)).astype(float)
    adj = np.maximum(adj, adj.T) + np.eye(v)
    dinv = 1 / np.sqrt(adj.sum(1))
    centers = rng.standard_normal((c, f))
    return {"A": adj * dinv[:, None] * dinv[None, :],
            "X": centers[labels] * 0.3 + rng.standard_normal((v, f)),
            "Y": np.eye(c)[labels], "M": (rng.random(v) < 0.1).astype(float)}


def check(A, X, Y, M, P, W1, W2):
    test = M < 0.5
    acc = (P[test] == Y[test].argmax(1)).mean()
    print("gcn_sparse: accuracy on the unlabelled nodes %.3f (chance %.2f)" % (acc, 1 / Y.shape[1]))
    return acc > 0.6
