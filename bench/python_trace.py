#!/usr/bin/env python3
"""The Python-side cost of one traced op: `c = a + b` through the ctypes binding
(python/lazytensor), which records a graph node and computes nothing, against
the same line in PyTorch eager (which computes), both on 4x4 f32 tensors.
ns/op is the median of 7 runs of N ops (the Tensor's creation, the call into
the library, the result's release when it dies). Without torch it prints
ours only.

    /usr/bin/python3 bench/python_trace.py [N]
prints
    bench python_trace_op <ns> ns/op ratio <r> vs torch_eager
(r = torch's ns / ours, as every bench here: above 1, tracing an op from Python
costs less than PyTorch eager running it). The figure includes the library's
own tracing, so it depends on the build: measure a RelWithDebInfo or Release
build (LAZYTENSOR_LIB=build/liblazytensor.so after scripts/run.sh).
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import numpy as np  # noqa: E402

import lazytensor as lt  # noqa: E402


def per_op_ns(a, b, n):
    runs = []
    for _ in range(7):
        t0 = time.perf_counter_ns()
        for _ in range(n):
            c = a + b  # noqa: F841 (released at the next iteration, as in a real loop)
        runs.append((time.perf_counter_ns() - t0) / n)
    return statistics.median(runs)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    x = np.ones((4, 4), dtype=np.float32)
    a, b = lt.from_numpy(x), lt.from_numpy(x)
    lt.mark_step()
    ours = per_op_ns(a, b, n)
    try:
        import torch
    except ImportError:
        print("bench python_trace_op %.0f ns/op (torch not installed: no ratio)" % ours)
        return
    torch.set_num_threads(1)
    ta, tb = torch.ones(4, 4), torch.ones(4, 4)
    theirs = per_op_ns(ta, tb, n)
    print("bench python_trace_op %.0f ns/op ratio %.2f vs torch_eager (%.0f ns/op)" %
          (ours, theirs / ours, theirs))


if __name__ == "__main__":
    main()
