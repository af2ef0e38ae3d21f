"""PyTorch peer of lazytensor-train's accuracy: the same model (--model mlp:
784-512-512-10, ReLU; --model cnn: two conv 3x3 / batch norm / ReLU / max-pool 2
blocks of 32 and 64 channels, then 3136-128 ReLU, dropout 0.25, 128-10, the
test set evaluated in eval mode), Adam lr 1e-3, batch 128 with the last partial batch dropped, pixels
scaled to [0, 1], and the same learning-rate schedules (constant, or a half
cosine from lr to 0 over the run). Prints the test accuracy after each epoch.
Usage: python3 bench/train_accuracy_torch.py --epochs 5 --seed 1 --schedule cosine [--model cnn]"""
import argparse
import gzip
import math
import os

import torch

import torch_models

ap = argparse.ArgumentParser()
ap.add_argument("--epochs", type=int, default=5)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--schedule", choices=["constant", "cosine"], default="cosine")
ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
ap.add_argument("--model", choices=["mlp", "cnn"], default="mlp")
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
if a.model == "cnn":
    # the rows as [N, 1, 28, 28] images
    xtr, xte = xtr.reshape(-1, 1, 28, 28), xte.reshape(-1, 1, 28, 28)
model = torch_models.build(a.model)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
nb = xtr.shape[0] // 128
planned, step = a.epochs * nb, 0
for e in range(1, a.epochs + 1):
    model.train()
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
    model.eval()  # batch norm's running statistics, no dropout
    with torch.no_grad():
        # in chunks: the CNN's activations of the whole test set at once are large
        hits = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item()
                   for i in range(0, xte.shape[0], 1000))
        acc = hits / xte.shape[0]
    print(f"epoch {e}: test accuracy {acc:.4f}", flush=True)
