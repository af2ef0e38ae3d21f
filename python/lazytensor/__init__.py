"""lazytensor from Python: a ctypes binding over liblazytensor.so with numpy.

    import lazytensor as lt
    x = lt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x @ x).sum()
    y.backward()
    print(x.grad.numpy())

Ops record a lazy graph; values are computed when read (numpy(), item()) or at
lt.mark_step(). A failed call raises LazyTensorError with lt_last_error()'s
message (README.md, section Python, has more).

bfloat16 (lt.bfloat16, also dtype="bf16" or "bfloat16"): numpy has no such
type, so its values travel as float32. lt.tensor(a, dtype=lt.bfloat16) rounds
each value to nearest, ties to even (float64 values are rounded to float32
first, as torch); t.numpy() of a bf16 tensor returns float32 values, exact.
For the bits themselves, t.numpy_raw() returns them as a uint16 array and
lt.from_numpy_raw(bits, lt.bfloat16) makes a bf16 tensor from such an array,
both unconverted (for the other dtypes they are numpy() and from_numpy with
the dtype checked).
"""
from . import data, nn
from .tensor import (BF16, BOOL, F32, F64, I8, I32, I64, U8, LazyTensorError, Tensor, arange,
                     bfloat16, bool_, cat, clear_pending, counter, eye, float32, float64,
                     from_numpy, from_numpy_raw, full, int8, int32, int64, live_tensors,
                     manual_seed, mark_step, metric, metrics_report, no_grad, ones, rand, randn,
                     randperm, stack, sync, tensor, uint8, wait_device_ops, where, zeros)

__all__ = ["BF16", "BOOL", "F32", "F64", "I8", "I32", "I64", "U8", "LazyTensorError", "Tensor",
           "arange", "bfloat16", "bool_", "cat", "clear_pending", "counter", "data", "eye",
           "float32", "float64", "from_numpy", "from_numpy_raw", "full", "int8", "int32", "int64",
           "live_tensors", "manual_seed", "mark_step", "metric", "metrics_report", "nn", "no_grad",
           "ones", "rand", "randn", "randperm", "stack", "sync", "tensor", "uint8",
           "wait_device_ops", "where", "zeros"]
