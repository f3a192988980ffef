"""mf: matrix factorisation recovers held-out entries of a low-rank matrix."""
import numpy as np


def data(shapes, rng):
    m, n = shapes["R"]
    U, V = rng.random((m, 16)) * 0.5, rng.random((n, 16)) * 0.5
    O = (rng.random((m, n)) < 0.3).astype(float)
    return {"R": U @ V.T, "O": O}     # the unobserved entries are held out


def check(R, O, U, V):
    pred = U @ V.T
    seen = np.sqrt((((pred - R) * O) ** 2).sum() / O.sum())
    held = np.sqrt((((pred - R) * (1 - O)) ** 2).sum() / (1 - O).sum())
    scale = np.sqrt((R ** 2).mean())
    print("mf: RMSE on observed entries %.4f, held out %.4f (data RMS %.3f)" % (seen, held, scale))
    return held < 0.2 * scale
