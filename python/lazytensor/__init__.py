"""lazytensor from Python: a ctypes binding over liblazytensor.so with numpy.

    import lazytensor as lt
    x = lt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = (x @ x).sum()
    y.backward()
    print(x.grad.numpy())

Ops record a lazy graph; values are computed when read (numpy(), item()) or at
lt.mark_step(). A failed call raises LazyTensorError (a RuntimeError) with
lt_last_error()'s message (README.md, section Python, has more).

Tensors behave as PyTorch 1.13's where a port would otherwise go wrong
silently:
- t.dtype is a dtype object (lt.float32, lt.int64, lt.bfloat16, ...; also
  lt.float, lt.double, lt.long, lt.int, lt.bool as in torch) that equals the
  numpy type and the name (t.dtype == np.float32, == "float32"); dtype
  arguments take any of these forms, and the library's integer ids.
- Operators take tensors and Python or numpy scalars (a scalar does not raise a
  tensor's dtype but for a higher category: int tensor + 2.5 is float32,
  f32 tensor + np.float64(1.5) stays float32); a numpy array or a list raises
  TypeError, in either order (convert it with lt.tensor first).
- matmul (@) of two dtypes raises, as torch does, rather than promoting.
- t.max(dim) / t.min(dim) give (values, indices); t.max() a 0-d tensor.
- In-place ops (x += y, add_, sub_, mul_, div_, zero_, fill_, copy_, ...)
  change the same object; on a leaf that requires grad only under
  `with lt.no_grad():` (the hand-written optimizer's `w -= lr * w.grad`).
  t[...] and x.data are copies here (views in torch): an in-place method on
  them raises; `p.data -= g` assigns into p.
- backward() uses its graph up: a second backward() of the same loss raises
  unless the first passed retain_graph=True.
- no_grad() is a context manager and a decorator; enable_grad(),
  set_grad_enabled(mode) and is_grad_enabled() as torch's.

Beyond the tensors: lt.nn (torch.nn's modules, torch's layouts and
state_dict names), lt.optim with lt.optim.lr_scheduler, lt.save / lt.load
(torch.save / torch.load; serialization.py has the file format), lt.jit
(trace / save / load of compiled programs), lt.set_eager / lt.is_eager and
lt.set_backend / lt.get_backend ("cpu", the default, or "ref", the interpreter).

bfloat16 (lt.bfloat16, also dtype="bf16" or "bfloat16"): numpy has no such
type, so its values travel as float32. lt.tensor(a, dtype=lt.bfloat16) rounds
each value to nearest, ties to even (float64 values are rounded to float32
first, as torch); t.numpy() of a bf16 tensor returns float32 values, exact.
For the bits themselves, t.numpy_raw() returns them as a uint16 array and
lt.from_numpy_raw(bits, lt.bfloat16) makes a bf16 tensor from such an array,
both unconverted (for the other dtypes they are numpy() and from_numpy with
the dtype checked).
"""
from . import data, jit, nn, optim
from .serialization import load, save
from .tensor import (BF16, BOOL, F32, F64, I8, I32, I64, U8, LazyTensorError, Tensor, arange,
                     bfloat16, bool_, cat, clear_pending, counter, dtype, enable_grad, eye, float32,
                     float64, from_numpy, from_numpy_raw, full, get_backend, int8, int32, int64,
                     is_eager, is_grad_enabled, live_tensors, manual_seed, mark_step, matmul,
                     metric, metrics_report, no_grad, ones, rand, randn, randperm, set_backend,
                     set_eager, set_grad_enabled, stack, sync, tensor, uint8, wait_device_ops,
                     where, zeros)

# torch's short names for dtypes (lt.float is float32, as torch.float). They
# are left out of __all__: `from lazytensor import *` must not shadow the
# builtins float, int and bool.
float, double, long, int, bool = float32, float64, int64, int32, bool_  # noqa: A001

__all__ = ["BF16", "BOOL", "F32", "F64", "I8", "I32", "I64", "U8", "LazyTensorError", "Tensor",
           "arange", "bfloat16", "bool_", "cat", "clear_pending", "counter", "data", "dtype",
           "enable_grad", "eye", "float32", "float64", "from_numpy", "from_numpy_raw", "full",
           "get_backend", "int8", "int32", "int64", "is_eager", "is_grad_enabled", "jit",
           "live_tensors", "load", "manual_seed", "mark_step", "matmul", "metric", "metrics_report",
           "nn", "no_grad", "optim", "ones", "rand", "randn", "randperm", "save", "set_backend",
           "set_eager", "set_grad_enabled", "stack", "sync", "tensor", "uint8", "wait_device_ops",
           "where", "zeros"]
