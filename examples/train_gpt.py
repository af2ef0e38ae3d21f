#!/usr/bin/env python3
"""lazytensor-train --model gpt as a PyTorch script: a character-level GPT
(context 64, width 128, 4 pre-norm blocks of 4-head causal attention and a
tanh-gelu MLP x4, learned positions) on the bytes of Debian's fortunes files
(split 90/10), AdamW lr 1e-3, betas 0.9/0.999, weight decay 0.1 on the
Linear weights only, grads clipped to global norm 1, 100 warm-up steps then a
half cosine to lr / 10, batch 32 random windows of 65 characters; prints the
training loss and, at the end, the mean loss over the first 256 windows (at
stride 64) of each split, as the C job does.

The port to lazytensor is the import block below and nothing else (see
train_mlp.py); --torch runs the same script on PyTorch (1.13).

    /usr/bin/python3 examples/train_gpt.py [--steps N] [--torch]
"""
import argparse
import math
import os
import sys
import time

import numpy as np

if "--torch" in sys.argv:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim

    def mark_step():
        pass
else:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import lazytensor as torch  # noqa: E402
    import lazytensor.nn as nn  # noqa: E402
    import lazytensor.nn.functional as F  # noqa: E402
    import lazytensor.optim as optim  # noqa: E402
    from lazytensor import mark_step  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"


def load_text(d=FORTUNES):
    """The C job's corpus (lt_nn_text_load): the regular files of d, no links,
    none named '.*', '*.dat' or '*.u8', in byte order of their names; token
    ids are the places of the bytes among the distinct bytes; 9/10 train."""
    names = sorted(n for n in os.listdir(d)
                   if not n.startswith(".") and not n.endswith((".dat", ".u8"))
                   and os.path.isfile(os.path.join(d, n))
                   and not os.path.islink(os.path.join(d, n)))
    data = np.frombuffer(b"".join(open(os.path.join(d, n), "rb").read() for n in names), np.uint8)
    vocab = np.unique(data)
    lut = np.zeros(256, np.int64)
    lut[vocab] = np.arange(len(vocab))
    return lut[data], len(vocab), len(data) * 9 // 10


def windows(ids, starts, t):
    w = ids[np.asarray(starts)[:, None] + np.arange(t + 1)]
    return torch.from_numpy(np.ascontiguousarray(w[:, :-1])), \
        torch.from_numpy(np.ascontiguousarray(w[:, 1:]))


class Block(nn.Module):
    """x + attn(ln1(x)), x + mlp(ln2(x)); causal attention written out."""

    def __init__(self, width, heads, ratio, context):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, ratio * width)
        self.fc2 = nn.Linear(ratio * width, width)
        self.register_buffer("future", torch.ones(context, context).tril() == 0,
                             persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        s = s.masked_fill(self.future[:t, :t], float("-inf"))
        o = (s.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab, context=64, width=128, layers=4, heads=4, ratio=4):
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.blocks = nn.ModuleList([Block(width, heads, ratio, context) for _ in range(layers)])
        self.lnf = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        x = self.wte(ids) + self.wpe.weight[:ids.shape[1]]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.lnf(x))


def lr_at(lr, s, steps, warmup):
    if s < warmup:
        return lr * (s + 1) / warmup
    span = steps - warmup - 1
    p = min(1.0, (s - warmup) / span) if span > 0 else 1.0
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * p)))


def evaluate(model, ids, n_train, t, validation, max_windows=256, chunk=32):
    begin, end = (n_train, len(ids)) if validation else (0, n_train)
    n = min(max_windows, (end - begin - 1) // t)
    chunk = min(chunk, n)
    n -= n % chunk
    total = 0.0
    with torch.no_grad():
        for w in range(0, n, chunk):
            x, y = windows(ids, [begin + (w + i) * t for i in range(chunk)], t)
            logits = model(x)
            total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)).item()
    return total / (n // chunk)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--torch", action="store_true", help="run on PyTorch")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    ids, vocab, n_train = load_text()
    t = a.context
    model = GPT(vocab, t)
    decay = [m.weight for m in model.modules() if isinstance(m, nn.Linear)]
    rest = [p for p in model.parameters() if all(p is not q for q in decay)]
    opt = optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                       {"params": rest, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.999),
                      eps=1e-8)
    mark_step()  # the parameters' init
    rng = np.random.default_rng(a.seed)  # the windows (the same under both)
    t0, run = time.perf_counter(), 0.0
    for s in range(a.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(a.lr, s, a.steps, a.warmup)
        x, y = windows(ids, rng.integers(0, n_train - t, a.batch), t)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        if a.clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        mark_step()
        run = run + loss.detach()
        if (s + 1) % a.log_every == 0 or s + 1 == a.steps:
            n = (s + 1) % a.log_every or a.log_every
            print("step %d/%d  train loss %.4f  %.2f steps/s"
                  % (s + 1, a.steps, float(run) / n, (s + 1) / (time.perf_counter() - t0)),
                  flush=True)
            run = 0.0
    trn = evaluate(model, ids, n_train, t, False)
    val = evaluate(model, ids, n_train, t, True)
    print("final: steps %d train_loss %.4f val_loss %.4f" % (a.steps, trn, val))


if __name__ == "__main__":
    main()
