"""The PyTorch twins of lazytensor-train's models, shared by the peer scripts
(train_accuracy_torch.py, train_step_torch.py, train_gpt_torch.py), and the
GPT's data and recipe pieces that must match tools/train/train_gpt.c."""
import math
import os

import torch
import torch.nn.functional as F


def build(name, hidden=512):
    """'cnn' takes [B, 1, 28, 28] images; 'mlp' takes rows of 784 pixels."""
    if name == "cnn":
        return torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
            torch.nn.MaxPool2d(2),
            torch.nn.Flatten(),
            torch.nn.Linear(3136, 128), torch.nn.ReLU(), torch.nn.Dropout(0.25),
            torch.nn.Linear(128, 10))
    return torch.nn.Sequential(
        torch.nn.Linear(784, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, 10))


# ---- the character-level GPT (tools/train/model_gpt.c) ------------------------------------

class Block(torch.nn.Module):
    """Pre-norm: x + attn(ln1(x)), x + mlp(ln2(x)); causal attention written as
    matmul / mask / softmax (torch 1.13 has no scaled_dot_product_attention)."""

    def __init__(self, width, heads, ratio, context):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.proj = torch.nn.Linear(width, width)
        self.ln2 = torch.nn.LayerNorm(width)
        self.fc = torch.nn.Linear(width, ratio * width)
        self.fc2 = torch.nn.Linear(ratio * width, width)
        self.register_buffer("causal", torch.ones(context, context).tril().bool(),
                             persistent=False)

    def forward(self, x):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
        s = s.masked_fill(~self.causal[:t, :t], float("-inf"))
        o = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(o)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self, vocab, context=64, width=128, layers=4, heads=4, ratio=4):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, width)
        self.wpe = torch.nn.Embedding(context, width)
        self.blocks = torch.nn.ModuleList(
            [Block(width, heads, ratio, context) for _ in range(layers)])
        self.lnf = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe.weight[:t]
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.lnf(x))


def gpt_optimizer(model, lr=1e-3, weight_decay=0.1):
    """AdamW, betas (0.9, 0.999), eps 1e-8; decay on the Linear weights only."""
    decay = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    ids = {id(p) for p in decay}
    rest = [p for p in model.parameters() if id(p) not in ids]
    return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.999), eps=1e-8)


def gpt_lr_at(lr, s, steps, warmup):
    """train_gpt.c's gpt_lr_at: linear warm-up, then a half cosine to lr / 10."""
    if s < warmup:
        return lr * (s + 1) / warmup
    span = steps - warmup - 1
    p = min(1.0, (s - warmup) / span) if span > 0 else 1.0
    return lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * p)))


FORTUNES_DIR = "/usr/share/games/fortunes"


def load_text(d=FORTUNES_DIR):
    """lt_nn_text_load: the regular files of d (no links, no '.', '.dat' or
    '.u8' names) in byte order of their names, concatenated; token ids are the
    places of the bytes among the distinct bytes; the first 9/10 train."""
    names = sorted(n for n in os.listdir(d)
                   if not n.startswith(".") and not n.endswith(".dat") and not n.endswith(".u8")
                   and os.path.isfile(os.path.join(d, n))
                   and not os.path.islink(os.path.join(d, n)))
    data = b"".join(open(os.path.join(d, n), "rb").read() for n in names)
    vocab = sorted(set(data))
    lut = torch.zeros(256, dtype=torch.long)
    lut[torch.tensor(vocab)] = torch.arange(len(vocab))
    ids = lut[torch.frombuffer(bytearray(data), dtype=torch.uint8).long()]
    return ids, vocab, len(data) * 9 // 10


def windows(ids, starts, t):
    """x = ids[s:s+t], y = ids[s+1:s+t+1] for each start s."""
    w = ids[torch.as_tensor(starts).view(-1, 1) + torch.arange(t + 1)]
    return w[:, :-1], w[:, 1:]


def gpt_evaluate(model, ids, n_train, t, validation, max_windows=256, chunk=32):
    """train_gpt.c's gpt_evaluate: the first windows at stride t of a split."""
    begin, end = (n_train, ids.numel()) if validation else (0, n_train)
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
