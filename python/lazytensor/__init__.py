"""lazytensor from Python: a ctypes binding over liblazytensor.so with numpy.

    import lazytensor as lt
    x = lt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x @ x).sum()
    y.backward()
    print(x.grad.numpy())

Ops record a lazy graph; values are computed when read (numpy(), item()) or at
lt.mark_step(). A failed call raises LazyTensorError with lt_last_error()'s
message (README.md, section Python, has more).
"""
from . import data, nn
from .tensor import (BOOL, F32, F64, I8, I32, I64, U8, LazyTensorError, Tensor, arange, bool_, cat,
                     clear_pending,
                     counter, eye, float32, float64, from_numpy, full, int8, int32, int64,
                     live_tensors, manual_seed, mark_step, metric, metrics_report, no_grad, ones,
                     rand, randn, randperm, stack, sync, tensor, uint8, wait_device_ops, where,
                     zeros)

__all__ = ["BOOL", "F32", "F64", "I8", "I32", "I64", "U8", "LazyTensorError", "Tensor", "arange",
           "bool_", "cat", "clear_pending", "counter", "data", "eye", "float32", "float64", "from_numpy", "full",
           "int8", "int32", "int64", "live_tensors", "manual_seed", "mark_step", "metric",
           "metrics_report", "nn", "no_grad", "ones", "rand", "randn", "randperm", "stack", "sync",
           "tensor", "uint8", "wait_device_ops", "where", "zeros"]
