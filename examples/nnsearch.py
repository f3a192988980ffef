"""nnsearch: the distances under the metric A, and the nearest point."""
import numpy as np


def data(shapes, rng):
    n, d = shapes["X"]
    m = rng.uniform(-1, 1, (d, d))
    return {"X": rng.uniform(-1, 1, (n, d)), "q": rng.uniform(-1, 1, d),
            "A": m @ m.T / d + np.eye(d)}     # positive definite


def check(X, q, A, dist, best):
    diff = X - q
    ref = np.einsum("nd,de,ne->n", diff, A, diff)
    err = abs(dist - ref).max() / abs(ref).max()
    # f32 rounding may swap near ties: the point found must be as near as the best
    near = ref[int(best)] <= ref.min() * (1 + 1e-5)
    print("nnsearch: distances to %.1e relative; nearest point %d (numpy's %d)%s"
          % (err, int(best), int(ref.argmin()), "" if near else ": NOT the nearest"))
    return err < 1e-4 and near
