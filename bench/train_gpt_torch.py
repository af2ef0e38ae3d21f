"""PyTorch peer of lazytensor-train --model gpt: the same character-level GPT
(bench/torch_models.py's GPT: context 64, width 128, 4 layers, 4 heads, MLP x4
with tanh gelu, pre-norm, learned positions), data (Debian's fortunes, bytes as
tokens, 90/10 split), recipe (AdamW lr 1e-3, betas 0.9/0.999, weight decay 0.1
on the Linear weights, grads clipped to global norm 1, 100 warm-up steps then a
cosine to lr / 10, batch 32 random windows of 65 characters from a generator
seeded with --seed) and evaluation (the first 256 windows at stride 64 of each
split). Prints progress and the parseable line
  final: steps N train_loss X val_loss Y
Usage: python3 bench/train_gpt_torch.py --steps 2000 --seed 1 --threads 2"""
import argparse
import time

import torch
import torch.nn.functional as F

import torch_models as tm

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=2000)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--lr", type=float, default=1e-3)
ap.add_argument("--warmup", type=int, default=100)
ap.add_argument("--weight-decay", type=float, default=0.1)
ap.add_argument("--clip", type=float, default=1.0)
ap.add_argument("--context", type=int, default=64)
ap.add_argument("--width", type=int, default=128)
ap.add_argument("--layers", type=int, default=4)
ap.add_argument("--heads", type=int, default=4)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--eval-every", type=int, default=500)
ap.add_argument("--eval-windows", type=int, default=256)
ap.add_argument("--log-every", type=int, default=100)
ap.add_argument("--data", default=tm.FORTUNES_DIR)
a = ap.parse_args()
torch.set_num_threads(a.threads)
torch.manual_seed(a.seed)

ids, vocab, n_train = tm.load_text(a.data)
t = a.context
model = tm.GPT(len(vocab), t, a.width, a.layers, a.heads)
opt = tm.gpt_optimizer(model, a.lr, a.weight_decay)
gen = torch.Generator().manual_seed(a.seed)
print("train_gpt_torch: %d characters (%d train), vocab %d, %d parameters, threads %d"
      % (ids.numel(), n_train, len(vocab), sum(p.numel() for p in model.parameters()), a.threads))
t0 = time.perf_counter()
run = 0.0
for s in range(a.steps):
    lr = tm.gpt_lr_at(a.lr, s, a.steps, a.warmup)
    for g in opt.param_groups:
        g["lr"] = lr
    x, y = tm.windows(ids, torch.randint(0, n_train - t, (a.batch,), generator=gen), t)
    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if a.clip > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
    opt.step()
    run += loss.item()
    if (s + 1) % a.log_every == 0 or s + 1 == a.steps:
        n = (s + 1) % a.log_every or a.log_every
        print("step %d/%d  lr %.2e  train loss %.4f  %.2f steps/s"
              % (s + 1, a.steps, lr, run / n, (s + 1) / (time.perf_counter() - t0)), flush=True)
        run = 0.0
    if a.eval_every and (s + 1) % a.eval_every == 0 and s + 1 < a.steps:
        print("step %d/%d  validation loss %.4f"
              % (s + 1, a.steps, tm.gpt_evaluate(model, ids, n_train, t, True, a.eval_windows)),
              flush=True)
trn = tm.gpt_evaluate(model, ids, n_train, t, False, a.eval_windows)
val = tm.gpt_evaluate(model, ids, n_train, t, True, a.eval_windows)
print("final: steps %d train_loss %.4f val_loss %.4f" % (a.steps, trn, val))
