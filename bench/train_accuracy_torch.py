"""PyTorch peer of lazytensor-train's accuracy: the same MLP (784-512-512-10,
ReLU), Adam lr 1e-3, batch 128 with the last partial batch dropped, pixels
scaled to [0, 1], and the same learning-rate schedules (constant, or a half
cosine from lr to 0 over the run). Prints the test accuracy after each epoch.
Usage: python3 bench/train_accuracy_torch.py --epochs 5 --seed 1 --schedule cosine"""
import argparse
import gzip
import math
import os

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--schedule", choices=["constant", "cosine"], default="cosine")
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)


def idx(name, images):
    with gzip.open(os.path.join(a.data, name), "rb") as f:
        raw = f.read()
    n = int.from_bytes(raw[4:8], "big")
    if images:
        return torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8).reshape(n, 784).float() / 255
    return torch.frombuffer(bytearray(raw[8:]), dtype=torch.uint8).long()


xtr, ytr = idx("train-images-idx3-ubyte.gz", True), idx("train-labels-idx1-ubyte.gz", False)
xte, yte = idx("t10k-images-idx3-ubyte.gz", True), idx("t10k-labels-idx1-ubyte.gz", False)
model = torch.nn.Sequential(
    torch.nn.Linear(784, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 512), torch.nn.ReLU(),
    torch.nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
nb = xtr.shape[0] // 128
planned, step = a.epochs * nb, 0
for e in range(1, a.epochs + 1):
    perm = torch.randperm(xtr.shape[0])
    for b in range(nb):
        if a.schedule == "cosine":
            for g in opt.param_groups:
                g["lr"] = 0.5 * 1e-3 * (1 + math.cos(math.pi * step / planned))
        i = perm[b * 128:(b + 1) * 128]
        opt.zero_grad(set_to_none=True)
        lossf(model(xtr[i]), ytr[i]).backward()
        opt.step()
        step += 1
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print(f"epoch {e}: test accuracy {acc:.4f}", flush=True)
