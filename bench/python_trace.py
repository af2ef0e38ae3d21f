#!/usr/bin/env python3
"""The Python-side cost of tracing through the ctypes binding (python/lazytensor),
which records graph nodes and computes nothing, against PyTorch eager running
the same lines (which computes), and what that cost is beside the execution of
a training step.

    /usr/bin/python3 bench/python_trace.py [--ops N] [--steps N] [--hidden N]

prints, in the bench line format (docs/DESIGN.md, "Benchmarks"; ratio above 1:
lazytensor is better):

    bench python_trace_op <ns> ns/op ratio <torch_ns / ours> vs torch_eager
        elementwise ops on 4x4 f32 tensors (add, mul, sub, maximum, chained by
        4), one op per Python line; no sync in the timed part, one mark_step
        after it
    bench python_trace_mlp_forward <us> us ratio <torch_us / ours> vs torch_eager
        the forward of a small MLP (batch 8, 32-64-64-10, ReLU, parameters that
        require grad), traced; `# ...` says how many ops that is
    bench python_trace_mlp_step <ms> ms ratio <exec_ms / trace_ms> vs exec
        one training step of bench/train_step's MLP (784-512-512-10, batch 128,
        cross-entropy, backward, Adam; synthetic data) traced from Python, from
        its first op to lt_mark_step's call, against that step's execution
        (ExecuteTime's median over the timed steps, each starting on an idle
        device): above 1, the device takes longer to run a step than Python to
        trace it, so with mark_step's asynchronous execution the Python
        overhead hides behind the execution and does not decide the step time.
        `# ...` gives the ops the step traced (tensors the library created,
        those lt_backward and the optimizer make in C included), ns per op,
        mark_step's own time and the whole step; bench/train_step prints the
        same step driven from C.

Each figure is the median of 7 runs (this machine is shared). PyTorch runs in a
child process (Debian's /usr/bin/python3 with python3-torch, else python3 on
PATH) at our thread count ($LT_NUM_THREADS, else the CPUs this process may run
on; torch.set_num_threads), with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed
from its environment and ATEN_CPU_CAPABILITY the processor's best, as the C
benchmarks' peers (bench/bench_util.h; LT_CPU_ISA=avx2: the AVX2 kernels).
Without torch (or with LT_BENCH_NO_TORCH set) the first two lines have no
ratio and a `#` line says why. The figures include the library's own tracing,
so they depend on its build: measure a Release build (LAZYTENSOR_LIB=
build/liblazytensor.so, or an installed one).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPS = 7
EW_CHAIN = 4  # ops per chain: add, mul, sub, maximum
MLP_DIMS = (32, 64, 64, 10)
MLP_BATCH = 8


def _threads():
    n = os.environ.get("LT_NUM_THREADS")
    return int(n) if n else len(os.sched_getaffinity(0))


def _median_ns(fn, n):
    """ns per call of fn(), the median of REPS runs of n calls."""
    runs = []
    for _ in range(REPS):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(runs)


# ---- the lines, for both libraries ------------------------------------------------


def ew_chain(a, b):
    t = a + b
    t = t * b
    t = t - a
    return t.maximum(a)


# ---- PyTorch (the child process) ------------------------------------------------


def torch_peer(args):
    import torch
    torch.set_num_threads(args.threads)
    a, b = torch.ones(4, 4), torch.ones(4, 4)
    ew = _median_ns(lambda: ew_chain(a, b), args.ops // EW_CHAIN) / EW_CHAIN
    layers = []
    for i in range(len(MLP_DIMS) - 1):
        layers += [torch.nn.Linear(MLP_DIMS[i], MLP_DIMS[i + 1]), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    x = torch.ones(MLP_BATCH, MLP_DIMS[0])
    fwd = _median_ns(lambda: model(x), max(args.ops // 20, 1))
    print(json.dumps({"ew_ns": ew, "mlp_forward_ns": fwd, "threads": torch.get_num_threads()}))


def _cpu_isa():
    if os.environ.get("LT_CPU_ISA") == "avx2":
        return "avx2"
    try:
        with open("/proc/cpuinfo") as f:
            flags = set(next(line for line in f if line.startswith("flags")).split())
    except (OSError, StopIteration):
        return "default"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "avx512"
    return "avx2" if {"avx2", "fma"} <= flags else "default"


def run_torch_peer(args):
    """The child's figures, or (None, why not)."""
    if os.environ.get("LT_BENCH_NO_TORCH"):
        return None, "peer figures skipped (LT_BENCH_NO_TORCH)"
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    isa = _cpu_isa()
    env["ATEN_CPU_CAPABILITY"] = isa
    if os.environ.get("LT_CPU_ISA") == "avx2":
        env["OPENBLAS_CORETYPE"] = "Haswell"
    for py in ("/usr/bin/python3", "python3"):
        try:
            if subprocess.run([py, "-c", "import torch"], env=env, capture_output=True).returncode:
                continue
        except OSError:
            continue
        out = subprocess.run([py, os.path.abspath(__file__), "--torch-peer", "--ops",
                              str(args.ops), "--threads", str(args.threads)],
                             env=env, capture_output=True, text=True)
        if out.returncode != 0:
            return None, "the torch peer failed: " + out.stderr.strip().splitlines()[-1]
        print("# torch peer: %s, ATEN_CPU_CAPABILITY=%s, %d threads" %
              (py, isa, json.loads(out.stdout)["threads"]))
        return json.loads(out.stdout), None
    return None, "torch not importable by python3: no peer figure"


# ---- lazytensor -------------------------------------------------------------------


def lt_figures(args):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import numpy as np
    import lazytensor as lt
    from lazytensor import nn

    def created():
        return lt.counter("CreateTensor")

    # elementwise chains; each chain's result dies at the next call
    a, b = lt.ones(4, 4), lt.ones(4, 4)
    lt.mark_step()
    ew = _median_ns(lambda: ew_chain(a, b), args.ops // EW_CHAIN) / EW_CHAIN
    lt.mark_step()

    # the small MLP's forward
    layers = []
    for i in range(len(MLP_DIMS) - 1):
        layers += [nn.Linear(MLP_DIMS[i], MLP_DIMS[i + 1]), nn.ReLU()]
    model = nn.Sequential(*layers[:-1])
    x = lt.ones(MLP_BATCH, MLP_DIMS[0])
    lt.mark_step()
    c0 = created()
    model(x)
    fwd_ops = created() - c0
    fwd = _median_ns(lambda: model(x), max(args.ops // 20, 1))
    lt.mark_step()
    lt.wait_device_ops()

    # bench/train_step's MLP, one training step at a time, each on an idle device
    lt.manual_seed(1)
    dims = (784, args.hidden, args.hidden, 10)
    mlp = nn.Sequential(nn.Linear(dims[0], dims[1]), nn.ReLU(), nn.Linear(dims[1], dims[2]),
                        nn.ReLU(), nn.Linear(dims[2], dims[3]))
    opt = nn.Adam(mlp.parameters(), lr=1e-3)
    rng = np.random.default_rng(1)
    batches = [(lt.from_numpy(rng.random((128, 784), dtype=np.float32)),
                lt.from_numpy(np.arange(128, dtype=np.int64) % 10)) for _ in range(2)]
    lt.mark_step()
    lt.wait_device_ops()
    trace, mark, whole, ops, execs = [], [], [], [], []
    for step in range(args.warmup + args.steps):
        xb, yb = batches[step % 2]
        e0 = lt.metric("ExecuteTime")
        c0 = created()
        t0 = time.perf_counter_ns()
        loss = nn.cross_entropy(mlp(xb), yb)
        loss.backward()
        opt.step()
        t1 = time.perf_counter_ns()
        lt.mark_step()
        t2 = time.perf_counter_ns()
        lt.wait_device_ops()
        t3 = time.perf_counter_ns()
        e1 = lt.metric("ExecuteTime")
        del loss
        if step < args.warmup:  # the first steps compile
            continue
        assert e1["count"] == e0["count"] + 1, "one execution per step"
        trace.append(t1 - t0)
        mark.append(t2 - t1)
        whole.append(t3 - t0)
        ops.append(created() - c0)
        execs.append(e1["total"] - e0["total"])
    return {"ew_ns": ew, "mlp_forward_ns": fwd, "mlp_forward_ops": fwd_ops,
            "step_trace_ns": statistics.median(trace), "step_mark_ns": statistics.median(mark),
            "step_whole_ns": statistics.median(whole), "step_ops": statistics.median(ops),
            "step_exec_ns": statistics.median(execs), "dims": dims}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops", type=int, default=20000, help="traced ops per timed run")
    p.add_argument("--steps", type=int, default=10, help="timed training steps")
    p.add_argument("--warmup", type=int, default=3, help="training steps before them")
    p.add_argument("--hidden", type=int, default=512, help="the training MLP's hidden width")
    p.add_argument("--threads", type=int, default=_threads())
    p.add_argument("--torch-peer", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_peer:
        return torch_peer(args)
    ours = lt_figures(args)
    theirs, why = run_torch_peer(args)
    if theirs:
        print("bench python_trace_op %.0f ns/op ratio %.2f vs torch_eager (%.0f ns/op)" %
              (ours["ew_ns"], theirs["ew_ns"] / ours["ew_ns"], theirs["ew_ns"]))
        print("bench python_trace_mlp_forward %.1f us ratio %.2f vs torch_eager (%.1f us)" %
              (ours["mlp_forward_ns"] / 1e3, theirs["mlp_forward_ns"] / ours["mlp_forward_ns"],
               theirs["mlp_forward_ns"] / 1e3))
    else:
        print("# " + why)
        print("bench python_trace_op %.0f ns/op" % ours["ew_ns"])
        print("bench python_trace_mlp_forward %.1f us" % (ours["mlp_forward_ns"] / 1e3))
    print("# the MLP forward (batch %d, %s): %d ops traced, %.0f ns/op" %
          (MLP_BATCH, "-".join(map(str, MLP_DIMS)), ours["mlp_forward_ops"],
           ours["mlp_forward_ns"] / ours["mlp_forward_ops"]))
    tr, ex = ours["step_trace_ns"], ours["step_exec_ns"]
    print("bench python_trace_mlp_step %.3f ms ratio %.2f vs exec (%.3f ms)" %
          (tr / 1e6, ex / tr, ex / 1e6))
    print("# the training step (%s, batch 128, Adam; %d threads): %d ops traced in %.3f ms "
          "(%.0f ns/op), mark_step %.3f ms, execution %.3f ms, whole step %.3f ms; "
          "the same step from C: build/bench/train_step" %
          ("-".join(map(str, ours["dims"])), args.threads, ours["step_ops"], tr / 1e6,
           tr / ours["step_ops"], ours["step_mark_ns"] / 1e6, ex / 1e6,
           ours["step_whole_ns"] / 1e6))


if __name__ == "__main__":
    main()
