#!/usr/bin/env python3
"""Trains lazytensor-train's default MLP from Python: 784-512-512-10 with ReLU
on Fashion-MNIST, Adam lr 1e-3 falling to 0 along a half cosine, batch 128,
seed 1, one epoch (--epochs N), then the test accuracy. The same graph per step
as the C job (tools/train/train.c): forward, cross-entropy, backward, the
optimizer's lazy update, mark_step; the loss is summed on the device and read
once per epoch.

With --compare (the default when build/lazytensor-train exists) it then runs
the C main job with the same settings and prints both accuracies and step
times side by side.

    PYTHONPATH=python /usr/bin/python3 examples/train_mlp.py [--epochs N] [--limit-steps N]
"""
import argparse
import math
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import lazytensor as lt  # noqa: E402
from lazytensor import nn  # noqa: E402


def train(args):
    lt.manual_seed(args.seed)
    train_set, test_set = lt.data.FashionMNIST(True), lt.data.FashionMNIST(False)
    # the C job's order of parameter draws: layer by layer, weight then bias
    model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, 10))
    opt = nn.Adam(model.parameters(), lr=args.lr)
    loader = lt.data.Loader(train_set, args.batch, shuffle=True)
    loader.shuffle_ahead(args.epochs)
    test_x = test_set.images()
    test_y = test_set.labels()
    loss_sum = lt.tensor(0.0, dtype=lt.F64)
    lt.mark_step()  # graph 1: the init, the shuffles, the uploads
    lt.wait_device_ops()
    planned = args.epochs * (len(train_set) // args.batch)
    if args.limit_steps:
        planned = min(planned, args.limit_steps)
    total, train_s, acc = 0, 0.0, float("nan")
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        first = loss_sum.item()
        steps = 0
        for x, y in loader.epoch():
            if args.limit_steps and total >= args.limit_steps:
                break
            opt.lr = 0.5 * args.lr * (1 + math.cos(math.pi * total / planned))
            loss = nn.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            loss_sum = loss_sum + loss.to(lt.F64)
            lt.mark_step()
            total += 1
            steps += 1
        lt.wait_device_ops()
        dt = time.perf_counter() - t0
        train_s += dt
        mean_loss = (loss_sum.item() - first) / max(steps, 1)
        with lt.no_grad():
            pred = model(test_x).argmax(1).numpy()
        acc = float((pred == test_y).mean())
        print("epoch %d: %d steps in %.2f s (%.1f steps/s, %.3f ms/step), mean loss %.4f, "
              "test accuracy %.4f" % (epoch, steps, dt, steps / dt, 1e3 * dt / max(steps, 1),
                                      mean_loss, acc))
        if args.limit_steps and total >= args.limit_steps:
            break
    return acc, 1e3 * train_s / max(total, 1), total


def c_job(args):
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                       "lazytensor-train")
    cmd = [exe, "--epochs", str(args.epochs), "--seed", str(args.seed), "--batch",
           str(args.batch), "--lr", str(args.lr)]
    if args.limit_steps:
        cmd += ["--limit-steps", str(args.limit_steps)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"summary: (\d+) steps, ([\d.]+) steps/s, final test accuracy ([\d.]+)", out)
    steps, rate, acc = int(m.group(1)), float(m.group(2)), float(m.group(3))
    return acc, 1e3 / rate, steps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--limit-steps", type=int, default=0)
    p.add_argument("--compare", dest="compare", action="store_true", default=None)
    p.add_argument("--no-compare", dest="compare", action="store_false")
    args = p.parse_args()
    acc, ms, steps = train(args)
    print("python: %d steps, %.3f ms/step, test accuracy %.4f" % (steps, ms, acc))
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build",
                       "lazytensor-train")
    if args.compare or (args.compare is None and os.access(exe, os.X_OK)):
        cacc, cms, csteps = c_job(args)
        print("C job:  %d steps, %.3f ms/step, test accuracy %.4f" % (csteps, cms, cacc))
        print("python vs C: accuracy %+.4f (%s 0.01), step time x%.2f" %
              (acc - cacc, "within" if abs(acc - cacc) <= 0.01 else "NOT within", ms / cms))


if __name__ == "__main__":
    main()
