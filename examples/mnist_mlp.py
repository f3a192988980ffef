"""mnist_mlp: a 784-256-10 MLP trained on Fashion-MNIST in mini-batches,
checked against PyTorch trained by the same recipe from the same weights:
the test accuracy within 1.5 points, the trained weights close."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist                    # noqa: E402

LR, B = 0.1, 100


def data(shapes, rng):
    """The first N training and T test images, and nn.Linear's initial
    weights (uniform within 1/sqrt(fan_in))."""
    n, t = shapes["X"][0], shapes["Xt"][0]
    X, L, Xt, Lt = fashion_mnist.load(n, t)
    d, h = shapes["W1init"]
    c = shapes["W2init"][1]
    return dict(X=X, labels=L, Xt=Xt, tlabels=Lt,
                W1init=rng.uniform(-1, 1, (d, h)) / np.sqrt(d), W2init=rng.uniform(-1, 1, (h, c)) / np.sqrt(h))


def torch_train(X, labels, Xt, tlabels, W1init, W2init, epochs=2, threads=None):
    """PyTorch's run of the program's recipe: (test accuracy, W1, W2)."""
    import torch
    if threads:
        torch.set_num_threads(threads)
    f = lambda a: torch.tensor(np.asarray(a), dtype=torch.float32)
    X, Xt, W1, W2 = f(X), f(Xt), f(W1init).requires_grad_(), f(W2init).requires_grad_()
    L, Lt = torch.tensor(np.asarray(labels), dtype=torch.int64), torch.tensor(np.asarray(tlabels), dtype=torch.int64)
    b1 = torch.zeros(W1.shape[1], requires_grad=True)
    b2 = torch.zeros(W2.shape[1], requires_grad=True)
    opt = torch.optim.SGD([W1, b1, W2, b2], lr=LR)
    for e in range(epochs):
        for b in range(len(X) // B):
            Z = torch.relu(X[b * B:(b + 1) * B] @ W1 + b1) @ W2 + b2
            loss = torch.nn.functional.cross_entropy(Z, L[b * B:(b + 1) * B])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        acc = ((torch.relu(Xt @ W1 + b1) @ W2 + b2).argmax(1) == Lt).float().mean().item()
    return acc, W1.detach().numpy(), W2.detach().numpy()


def check(X, labels, Xt, tlabels, W1init, W2init, acc, W1, W2):
    want, tW1, tW2 = torch_train(X, labels.astype(np.int64), Xt, tlabels.astype(np.int64), W1init, W2init)
    err = max(np.abs(W1 - tW1).max() / np.abs(tW1).max(), np.abs(W2 - tW2).max() / np.abs(tW2).max())
    print("mnist_mlp: %d steps of batch %d; test accuracy %.4f, PyTorch's %.4f; weights within %.1e of PyTorch's"
          % (2 * (len(X) // B), B, float(acc), want, err))
    return abs(float(acc) - want) <= 0.015 and err < 1e-3
