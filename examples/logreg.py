"""logreg: logistic regression by gradient descent, against numpy's."""
import numpy as np


def data(shapes, rng):
    n, d = shapes["X"]
    X = rng.standard_normal((n, d))
    w = rng.standard_normal(d)
    return {"X": X, "y": (X @ w + 0.3 * rng.standard_normal(n) > 0).astype(float)}


def check(X, y, w, b):
    """The same 100 steps in numpy, and the accuracy they reach."""
    v, c = np.zeros(X.shape[1]), 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-(X @ v + c)))
        v, c = v - X.T @ (p - y) / len(y), c - (p - y).mean()
    err = np.abs(w - v).max() / np.abs(v).max()
    acc = (((X @ w + b) > 0) == (y > 0.5)).mean()
    print("logreg: weights within %.1e of numpy's gradient descent, training accuracy %.3f" % (err, acc))
    return err < 1e-3 and acc > 0.9
