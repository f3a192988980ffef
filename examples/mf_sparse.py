"""mf_sparse: factorising sparse observed ratings recovers the held-out ones."""
import numpy as np


def full(shapes, rng):
    m, n = shapes["R"]
    U, V = rng.random((m, 16)) * 0.5, rng.random((n, 16)) * 0.5
    O = (rng.random((m, n)) < 0.1).astype(float)
    return U @ V.T, O


def data(shapes, rng):
    R, O = full(shapes, rng)
    return {"R": R * O, "O": O}     # only the observed ratings are stored


def check(R, O, U, V):
    T, _ = full({"R": R.shape}, np.random.default_rng(0))   # example.py's generator
    pred = U @ V.T
    seen = np.sqrt((((pred - T) * O) ** 2).sum() / O.sum())
    held = np.sqrt((((pred - T) * (1 - O)) ** 2).sum() / (1 - O).sum())
    scale = np.sqrt((T ** 2).mean())
    print("mf_sparse: RMSE on observed entries %.4f, held out %.4f (data RMS %.3f)" % (seen, held, scale))
    return held < 0.2 * scale
