"""PyTorch peer of bench/train_step.c: the same model (--model mlp: 784-512-512-10,
ReLU; --model cnn: the CNN of lazytensor-train --model cnn, in training mode),
Adam lr 1e-3, cross-entropy, batch 128, on the first batches of Fashion-MNIST's
test set (or synthetic data when it is absent), torch.set_num_threads(N).
--model gpt: lazytensor-train's GPT step instead (torch_models.GPT, AdamW with
decay on the Linear weights, clipping at norm 1, cross-entropy over [B*T, V])
on random windows of --text (Debian's fortunes; random bytes when absent).
Prints 'median_ms <x>' and 'peak_rss_kb <y>' (ru_maxrss of this process)."""
import argparse
import gzip
import os
import resource
import statistics
import time

import torch

import torch_models

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--batch", type=int, default=128)
ap.add_argument("--hidden", type=int, default=512)
ap.add_argument("--warmup", type=int, default=5)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--data", default="")
ap.add_argument("--model", choices=["mlp", "cnn", "gpt"], default="mlp")
ap.add_argument("--text", default="")
a = ap.parse_args()

torch.set_num_threads(a.threads)
torch.manual_seed(0)


def gpt_bench():
    """The GPT's training step, timed as the others."""
    import torch.nn.functional as F
    if a.text and os.path.isdir(a.text):
        ids, vocab, n_train = torch_models.load_text(a.text)
        v = len(vocab)
    else:
        v, n_train = 96, 1 << 16
        ids = torch.randint(0, v, (n_train + 1,))
    t = 64
    model = torch_models.GPT(v, t)
    opt = torch_models.gpt_optimizer(model)
    gen = torch.Generator().manual_seed(1)
    times = []
    for i in range(a.warmup + a.steps):
        x, y = torch_models.windows(ids, torch.randint(0, n_train - t, (a.batch,), generator=gen), t)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, v), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            times.append((t1 - t0) * 1e3)
    print("median_ms %.4f" % statistics.median(times))
    print("final_loss %.4f" % loss.item())
    print("peak_rss_kb %d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


if a.model == "gpt":
    gpt_bench()
    raise SystemExit(0)
nbatches = a.warmup + a.steps
need = nbatches * a.batch
x = y = None
if a.data:
    img = os.path.join(a.data, "t10k-images-idx3-ubyte.gz")
    lab = os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")
    if os.path.exists(img) and os.path.exists(lab):
        with gzip.open(img, "rb") as f:
            raw = f.read()
        n = min(need, int.from_bytes(raw[4:8], "big"))
        x = torch.frombuffer(bytearray(raw[16:16 + n * 784]), dtype=torch.uint8)
        x = x.reshape(n, 784).float() / 255.0
        with gzip.open(lab, "rb") as f:
            y = torch.frombuffer(bytearray(f.read()[8:8 + n]), dtype=torch.uint8).long()
        del raw
if x is None:
    x = torch.rand(need, 784)
    y = torch.randint(0, 10, (need,))
nb = x.shape[0] // a.batch

if a.model == "cnn":
    # lazytensor-train's CNN; the rows become [B, 1, 28, 28] images
    x = x.reshape(-1, 1, 28, 28)
model = torch_models.build(a.model, a.hidden)
model.train()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = torch.nn.CrossEntropyLoss()
times = []
for i in range(nbatches):
    b = i % nb
    xb, yb = x[b * a.batch:(b + 1) * a.batch], y[b * a.batch:(b + 1) * a.batch]
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(xb), yb)
    loss.backward()
    opt.step()
    t1 = time.perf_counter()
    if i >= a.warmup:
        times.append((t1 - t0) * 1e3)
print("median_ms %.4f" % statistics.median(times))
print("final_loss %.4f" % loss.item())
print("peak_rss_kb %d" % resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
