#!/usr/bin/env python3
"""fashion_mnist.py: Fashion-MNIST's idx files (Debian's dataset-fashion-mnist,
under /usr/share/datasets/fashion-mnist) as .npy files trac programs read.

    fashion_mnist.py DIR [N [T]]

writes DIR/X.npy (the first N training images, f32 in [0, 1], one row of
784 pixels each), DIR/labels.npy (their classes, i64), DIR/Xt.npy and
DIR/tlabels.npy (the first T test images and classes).  N defaults to all
60000, T to all 10000.  Other scripts import load().
"""
import gzip
import os
import sys

import numpy as np

SRC = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def idx(path):
    """An idx file (LeCun's format: magic, dims, big-endian uint8 data) as an array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:2] != b"\0\0" or data[2] != 8:
        sys.exit("%s: not an idx file of unsigned bytes" % path)
    rank = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank))
    a = np.frombuffer(data, np.uint8, offset=4 + 4 * rank)
    if a.size != int(np.prod(shape)):
        sys.exit("%s: %d bytes of data for shape %s" % (path, a.size, shape))
    return a.reshape(shape)


def load(n=60000, t=10000):
    """(X, labels, Xt, tlabels): the first n training and t test images."""
    p = lambda name: os.path.join(SRC, name)
    if not os.path.exists(p("train-images-idx3-ubyte.gz")):
        sys.exit("no Fashion-MNIST under %s: install dataset-fashion-mnist (or set FASHION_MNIST_DIR)" % SRC)
    X = idx(p("train-images-idx3-ubyte.gz"))[:n].reshape(-1, 784).astype(np.float32) / 255
    L = idx(p("train-labels-idx1-ubyte.gz"))[:n].astype(np.int64)
    Xt = idx(p("t10k-images-idx3-ubyte.gz"))[:t].reshape(-1, 784).astype(np.float32) / 255
    Lt = idx(p("t10k-labels-idx1-ubyte.gz"))[:t].astype(np.int64)
    return X, L, Xt, Lt


if __name__ == "__main__":
    if not 2 <= len(sys.argv) <= 4:
        sys.exit(__doc__.strip().split("\n\n")[1])
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    X, L, Xt, Lt = load(*(int(a) for a in sys.argv[2:]))
    for name, a in dict(X=X, labels=L, Xt=Xt, tlabels=Lt).items():
        np.save(os.path.join(out, name + ".npy"), a)
    print("%s: %d training and %d test images" % (out, len(X), len(Xt)))
