"""cnn: a small convolutional network (3x3 convolution with padding, relu,
2x2 max pooling, linear, softmax) trained by 20 SGD steps; checked against
PyTorch trained the same way from the same initial weights."""
import numpy as np


def data(shapes, rng):
    n, c, h, w = shapes["X"]
    X = rng.uniform(0, 0.5, (n, c, h, w))
    label = rng.integers(0, 2, n)
    for i in range(n):                  # a bright square where the class says
        y0 = 1 if label[i] == 0 else h - 5
        X[i, :, y0:y0 + 4, y0:y0 + 4] += 1
    return {"X": X, "Y": np.eye(2)[label], "K0": rng.normal(0, 0.3, shapes["K0"]),
            "W0": rng.normal(0, 0.1, shapes["W0"])}


def torch_train(X, Y, K0, W0, steps=20, lr=0.05):
    import torch
    F = torch.nn.functional
    t = lambda a, g=True: torch.tensor(a, dtype=torch.float64, requires_grad=g)
    X, Y, K, Wl = t(X, False), t(Y, False), t(K0), t(W0)
    bk, b = t(np.zeros(K0.shape[0])), t(np.zeros(W0.shape[-1]))
    for _ in range(steps):
        Z = torch.relu(F.conv2d(X, K, padding=1) + bk[:, None, None])
        P = F.max_pool2d(Z, 2)
        logits = torch.einsum("nfyx,fyxl->nl", P, Wl) + b
        loss = -(Y * torch.log_softmax(logits, 1)).sum(1).mean()
        gs = torch.autograd.grad(loss, [K, bk, Wl, b])
        with torch.no_grad():
            for p, g in zip([K, bk, Wl, b], gs):
                p -= lr * g
    return {"K": K.detach().numpy(), "bk": bk.detach().numpy(), "Wl": Wl.detach().numpy(), "b": b.detach().numpy()}


def check(X, Y, K0, W0, K, bk, Wl, b):
    want = torch_train(X, Y, K0, W0)
    err = max(np.abs(got - want[k]).max() / np.abs(want[k]).max() for k, got in dict(K=K, bk=bk, Wl=Wl, b=b).items())
    print("cnn: 20 SGD steps; trained weights within %.1e of PyTorch's (relative)" % err)
    return err < 1e-4
