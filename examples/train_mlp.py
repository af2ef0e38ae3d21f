#!/usr/bin/env python3
"""lazytensor-train's default job as a PyTorch script: the MLP 784-512-512-10
with ReLU on Fashion-MNIST (pixels / 255), Adam lr 1e-3 falling to 0 along a
half cosine over the run, batch 128 (the last partial batch dropped), seed 1,
one epoch; prints the mean training loss and the test accuracy per epoch.

The port to lazytensor is the import block below and nothing else: the
lazytensor lines replace torch's, and mark_step() (the step barrier: one
graph per training step) does nothing under PyTorch. --torch runs the same
script on PyTorch (1.13) instead.

    /usr/bin/python3 examples/train_mlp.py [--epochs N] [--limit-steps N] [--torch]
"""
import argparse
import gzip
import math
import os
import sys
import time

import numpy as np

if "--torch" in sys.argv:
    import torch
    import torch.nn as nn
    import torch.optim as optim

    def mark_step():
        pass
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import lazytensor as torch  # noqa: E402
    import lazytensor.nn as nn  # noqa: E402
    import lazytensor.optim as optim  # noqa: E402
    from lazytensor import mark_step  # noqa: E402

DATA = os.environ.get("LT_DATA_DIR", "/usr/share/datasets/fashion-mnist")


def load(split):
    """Images [n, 784] float32 in [0, 1] and labels [n] int64 of the IDX files."""
    with gzip.open(os.path.join(DATA, split + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784)
    with gzip.open(os.path.join(DATA, split + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x.astype(np.float32) / 255, y.astype(np.int64)


def evaluate(model, x, y, chunk=1000):
    model.eval()
    hits = 0
    with torch.no_grad():
        for s in range(0, len(x), chunk):
            pred = model(torch.from_numpy(x[s:s + chunk])).argmax(1).numpy()
            hits += int((pred == y[s:s + chunk]).sum())
    model.train()
    return hits / len(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit-steps", type=int, default=0)
    ap.add_argument("--torch", action="store_true", help="run on PyTorch")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    xtr, ytr = load("train")
    xte, yte = load("t10k")
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = optim.Adam(model.parameters(), lr=a.lr)
    loss_fn = nn.CrossEntropyLoss()
    mark_step()  # the parameters' init
    per_epoch = len(xtr) // a.batch
    planned = a.epochs * per_epoch
    if a.limit_steps:
        planned = min(planned, a.limit_steps)
    order = np.random.default_rng(a.seed)  # the shuffles (the same under both)
    step, acc = 0, float("nan")
    for epoch in range(1, a.epochs + 1):
        perm = order.permutation(len(xtr))
        t0, total, n = time.perf_counter(), 0.0, 0
        for b in range(per_epoch):
            if step >= planned:
                break
            for g in opt.param_groups:
                g["lr"] = 0.5 * a.lr * (1 + math.cos(math.pi * step / planned))
            i = perm[b * a.batch:(b + 1) * a.batch]
            x, y = torch.from_numpy(xtr[i]), torch.from_numpy(ytr[i])
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            mark_step()
            total = total + loss.detach()  # summed where it is, read once an epoch
            step, n = step + 1, n + 1
        dt = time.perf_counter() - t0
        acc = evaluate(model, xte, yte)
        print("epoch %d: %d steps in %.1f s (%.2f ms/step), mean loss %.4f, test accuracy %.4f"
              % (epoch, n, dt, 1e3 * dt / max(n, 1), float(total) / max(n, 1), acc), flush=True)
        if step >= planned:
            break
    print("final: steps %d test_accuracy %.4f" % (step, acc))


if __name__ == "__main__":
    main()
