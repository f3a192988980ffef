"""ffnn: the TRA paper's two-layer network learns a random linear labelling."""
import numpy as np


def data(shapes, rng):
    n, d = shapes["X"]
    l = shapes["Y"][1]
    X = rng.standard_normal((n, d))
    T = rng.standard_normal((d, l))
    return {"X": X, "Y": np.eye(l)[(X @ T).argmax(1)]}


def check(X, Y, W1, b1, W2, b2):
    Z = np.maximum(X @ W1 + b1, 0) @ W2 + b2
    acc = (Z.argmax(1) == Y.argmax(1)).mean()
    print("ffnn: training accuracy after 20 steps %.3f (chance %.2f)" % (acc, 1 / Y.shape[1]))
    return acc > 3 / Y.shape[1]
