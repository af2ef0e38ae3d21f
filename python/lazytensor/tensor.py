"""Tensor: a Python object owning one reference to an lt_tensor.

Every op records into the lazy graph; values are computed when read
(numpy(), item(), float()) or at mark_step(). The reference is released when
the Python object dies (__del__), so a loop keeps no tensors alive.
"""
import ctypes

import numpy as np

from . import _lib
from ._lib import lib

# The library's dtype ids (lt_dtype) and their numpy types: the one list of
# dtypes here (tests/python/test_dtypes.py checks it against the library's
# table: every id, its size and kind). _NP is the numpy type a dtype's values
# come out as (numpy()); _RAW the numpy type of its stored bits (numpy_raw()).
# They differ for bf16 only: numpy has no 16-bit bfloat, so its values travel
# as float32 (converted by the library, lt_from_f32 / lt_to_f32) and its bits
# as uint16. Names as torch's (numpy's) follow.
BOOL, I32, I64, F32, F64, U8, I8, BF16 = range(8)
_NP = {BOOL: np.bool_, I32: np.int32, I64: np.int64, F32: np.float32, F64: np.float64,
       U8: np.uint8, I8: np.int8, BF16: np.float32}
_RAW = {**_NP, BF16: np.uint16}
# numpy dtype -> id: a float32 array is F32 (bf16 is asked for by name)
_FROM_NP = {np.dtype(v): k for k, v in _NP.items() if k != BF16}
_NAMES = {k: np.dtype(v).name for k, v in _NP.items()}  # "float32", "bool", ...
_NAMES[BF16] = "bfloat16"
_BY_NAME = {"bf16": BF16, "bfloat16": BF16}  # names numpy does not know
float32, float64, int32, int64, bool_, uint8, int8 = F32, F64, I32, I64, BOOL, U8, I8
bfloat16 = BF16
_FLOATS = (F32, F64, BF16)

_CPU = lib.lt_cpu(0)


class LazyTensorError(RuntimeError):
    """A failed call: the message is lt_last_error(), status the LT_E* code."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def _error(what=None):
    msg = lib.lt_last_error()
    msg = msg.decode("utf-8", "replace") if msg else ""
    status = lib.lt_last_status()
    lib.lt_clear_error()
    return LazyTensorError(msg or (what or "lazytensor call failed"), status)


def check(rc):
    """Raises for a negative status; returns rc."""
    if rc < 0:
        raise _error()
    return rc


def wrap(ptr):
    """A Tensor owning the new reference ptr (raises when ptr is NULL)."""
    if not ptr:
        raise _error()
    t = Tensor.__new__(Tensor)
    t._ptr = ptr
    return t


def _dtype_code(dtype):
    if dtype is None:
        return None
    if isinstance(dtype, int):
        return dtype
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        return _FROM_NP[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError("lazytensor: dtype %r is not supported" % (dtype,)) from None


def _shape_args(shape):
    shape = tuple(int(s) for s in shape)
    return (ctypes.c_int64 * max(len(shape), 1))(*shape), len(shape)


def _int_args(values):
    values = [int(v) for v in values]
    return (ctypes.c_int * max(len(values), 1))(*values), len(values)


def from_numpy(array):
    """A tensor with the array's dtype and shape. The data is copied once, by the
    library, straight from the array's memory when it is C-contiguous (no copy
    in Python); other layouts are made contiguous first."""
    a = np.asarray(array)
    if a.dtype not in _FROM_NP:
        raise TypeError("lazytensor: numpy dtype %s is not supported" % a.dtype)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    shape, nd = _shape_args(a.shape)
    return wrap(lib.lt_from_data(_CPU, _FROM_NP[a.dtype], shape, nd,
                                 a.ctypes.data_as(ctypes.c_void_p)))


def _from_f32(a, dtype):
    """A tensor of dtype from the values of a, each converted by the library from
    float32 as a cast converts it (bf16: rounded to nearest, ties to even).
    Float64 values are rounded to float32 first, as torch rounds a double on its
    way to bfloat16."""
    with np.errstate(over="ignore"):  # beyond f32's range is inf, as in torch
        a = np.asarray(a, dtype=np.float32)
    if not a.flags.c_contiguous:  # (ascontiguousarray would make a 0-d array 1-d)
        a = np.ascontiguousarray(a)
    shape, nd = _shape_args(a.shape)
    return wrap(lib.lt_from_f32(_CPU, dtype, shape, nd,
                                a.ctypes.data_as(ctypes.POINTER(ctypes.c_float))))


def from_numpy_raw(array, dtype):
    """A tensor of dtype whose stored bits are the array's, unconverted: for
    bfloat16 a uint16 array of bf16 bit patterns (what Tensor.numpy_raw()
    returns); for the other dtypes an array of their own numpy type."""
    code = _dtype_code(dtype)
    if code not in _RAW:
        raise TypeError("lazytensor: dtype %r is not supported" % (dtype,))
    a = np.asarray(array)
    if a.dtype != np.dtype(_RAW[code]):
        raise TypeError("lazytensor: from_numpy_raw of %s needs a %s array, got %s" %
                        (_NAMES[code], np.dtype(_RAW[code]).name, a.dtype))
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    shape, nd = _shape_args(a.shape)
    return wrap(lib.lt_from_data(_CPU, code, shape, nd, a.ctypes.data_as(ctypes.c_void_p)))


def tensor(data, dtype=None, requires_grad=False):
    """As torch.tensor: Python floats give float32, ints int64, bools bool; a
    numpy array keeps its dtype unless dtype is given. dtype=bfloat16 rounds
    each value to nearest even (through float32, as torch)."""
    if isinstance(data, Tensor):
        t = data.detach() if dtype is None else data.to(dtype)
    else:
        a = np.asarray(data)
        code = _dtype_code(dtype)
        if code == BF16:  # numpy has no bf16: the library converts from f32
            t = _from_f32(a, BF16)
        else:
            if code is not None:
                a = a.astype(_NP[code])
            elif not isinstance(data, np.ndarray) and a.dtype == np.float64:
                a = a.astype(np.float32)
            t = from_numpy(a)
    if requires_grad:
        t.requires_grad = True
    return t


def _make(fn, shape, dtype, *extra):
    s, nd = _shape_args(shape)
    return wrap(fn(_CPU, _dtype_code(dtype), s, nd, *extra))


def zeros(*shape, dtype=F32):
    return _make(lib.lt_zeros, _flat(shape), dtype)


def ones(*shape, dtype=F32):
    return _make(lib.lt_ones, _flat(shape), dtype)


def full(shape, value, dtype=F32):
    return _make(lib.lt_full, _flat((shape,)), dtype, float(value))


def rand(*shape, dtype=F32, low=0.0, high=1.0):
    return _make(lib.lt_rand_uniform, _flat(shape), dtype, low, high)


def randn(*shape, dtype=F32, mean=0.0, std=1.0):
    return _make(lib.lt_rand_normal, _flat(shape), dtype, mean, std)


def arange(start, stop=None, step=1, dtype=None):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = I64 if all(isinstance(v, int) for v in (start, stop, step)) else F32
    return wrap(lib.lt_arange(_CPU, _dtype_code(dtype), start, stop, step))


def eye(n, m=0, dtype=F32):
    return wrap(lib.lt_eye(_CPU, _dtype_code(dtype), n, m))


def randperm(n, dtype=I64):
    return wrap(lib.lt_randperm(_CPU, _dtype_code(dtype), n))


def manual_seed(seed):
    check(lib.lt_set_seed(_CPU, seed))


def _flat(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _scalar_for(t, v):
    """A 0-d tensor for a Python number next to t: it only raises t's category,
    as PyTorch's wrapped numbers do (f32 + 2.5 stays f32; i32 + 2.5 is f32)."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (bool, np.bool_)):
        dt = BOOL
    elif isinstance(v, (int, np.integer)):
        dt = I64
    elif isinstance(v, (float, np.floating)):
        # bf16 + 2.5 stays bf16 (a 0-d f32 only raises the category) and, as in
        # torch, the number enters the op as f32, not rounded to bf16 first
        dt = t.dtype if t.dtype in (F32, F64) else F32
    else:
        return NotImplemented
    return wrap(lib.lt_scalar(_CPU, dt, float(v)))


def _binop(name, swap=False):
    fn = getattr(lib, "lt_" + name)
    new = object.__new__

    def op(self, other):
        # the common case first, inline: this is the per-op cost of tracing
        if other.__class__ is Tensor:
            p = fn(other._ptr, self._ptr) if swap else fn(self._ptr, other._ptr)
        else:
            o = _scalar_for(self, other)
            if o is NotImplemented:
                return NotImplemented
            p = fn(o._ptr, self._ptr) if swap else fn(self._ptr, o._ptr)
        if not p:
            raise _error()
        t = new(Tensor)
        t._ptr = p
        return t

    op.__name__ = name
    return op


def _axes(dim):
    if dim is None:
        return _int_args(())
    if isinstance(dim, int):
        dim = (dim,)
    return _int_args(dim)


class Tensor:
    __slots__ = ("_ptr", "__weakref__")

    def __init__(self, data, dtype=None):
        t = tensor(data, dtype)
        self._ptr, t._ptr = t._ptr, None

    def __del__(self, _release=lib.lt_release):
        # _release bound at definition: still there while the interpreter exits
        try:
            ptr = self._ptr
        except AttributeError:  # __init__ failed before setting it
            return
        if ptr:
            _release(ptr)
            self._ptr = None

    # ---- facts
    @property
    def dtype(self):
        return lib.lt_get_dtype(self._ptr)

    @property
    def shape(self):
        nd = lib.lt_ndim(self._ptr)
        s = lib.lt_shape(self._ptr)
        return tuple(s[i] for i in range(nd))

    @property
    def ndim(self):
        return lib.lt_ndim(self._ptr)

    def numel(self):
        return lib.lt_numel(self._ptr)

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __repr__(self):
        try:
            return "lazytensor.Tensor(%s, dtype=%s)" % (np.array2string(self.numpy()),
                                                         _NAMES[self.dtype])
        except LazyTensorError as e:
            return "lazytensor.Tensor(<error: %s>)" % e

    # ---- values
    def numpy(self):
        """Runs what the value needs and returns it as a new numpy array, which
        the library writes into directly (no copy in Python)."""
        dt = self.dtype
        out = np.empty(self.shape, dtype=_NP[dt])
        if _RAW[dt] is not _NP[dt]:  # bf16: float32 values, widened exactly by the library
            check(lib.lt_to_f32(self._ptr, out.ctypes.data_as(ctypes.POINTER(ctypes.c_float)),
                                out.size))
        else:
            check(lib.lt_to_data(self._ptr, out.ctypes.data_as(ctypes.c_void_p), out.nbytes))
        return out

    def numpy_raw(self):
        """The stored bits as a new numpy array, unconverted: for bfloat16 a uint16
        array of bf16 bit patterns (from_numpy_raw takes it back); for the other
        dtypes the same as numpy()."""
        out = np.empty(self.shape, dtype=_RAW[self.dtype])
        check(lib.lt_to_data(self._ptr, out.ctypes.data_as(ctypes.c_void_p), out.nbytes))
        return out

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.numel() != 1:
            raise ValueError("item() needs a tensor of one element, this one has %d" % self.numel())
        v = ctypes.c_double()
        check(lib.lt_item(self._ptr, 0, ctypes.byref(v)))
        dt = self.dtype
        return bool(v.value) if dt == BOOL else v.value if dt in _FLOATS else int(v.value)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    # ---- operators
    __add__, __radd__ = _binop("add"), _binop("add", True)
    __sub__, __rsub__ = _binop("sub"), _binop("sub", True)
    __mul__, __rmul__ = _binop("mul"), _binop("mul", True)
    __truediv__, __rtruediv__ = _binop("div"), _binop("div", True)
    __pow__, __rpow__ = _binop("pow"), _binop("pow", True)
    __mod__, __rmod__ = _binop("remainder"), _binop("remainder", True)
    __floordiv__, __rfloordiv__ = _binop("floor_divide"), _binop("floor_divide", True)
    __matmul__ = _binop("matmul")
    __eq__, __ne__ = _binop("eq"), _binop("ne")
    __lt__, __le__, __gt__, __ge__ = _binop("lt"), _binop("le"), _binop("gt"), _binop("ge")
    __and__, __or__ = _binop("logical_and"), _binop("logical_or")
    __hash__ = object.__hash__

    def __rmatmul__(self, other):
        return wrap(lib.lt_matmul(_scalar_for(self, other)._ptr, self._ptr))

    def __neg__(self):
        return wrap(lib.lt_neg(self._ptr))

    def __abs__(self):
        return wrap(lib.lt_abs(self._ptr))

    def __invert__(self):
        return wrap(lib.lt_logical_not(self._ptr))

    def __getitem__(self, key):
        """Integers, slices (step > 0), None and ... as numpy basic indexing; an
        integer Tensor on the first axis selects rows (index_select)."""
        if isinstance(key, Tensor):
            return self.index_select(0, key)
        if not isinstance(key, tuple):
            key = (key,)
        nd = self.ndim
        used = sum(1 for k in key if k is not None and k is not Ellipsis)
        if used > nd:
            raise IndexError("too many indices: %d for %d dimensions" % (used, nd))
        if Ellipsis in key:
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (nd - used) + key[i + 1:]
        key = key + (slice(None),) * (nd - sum(1 for k in key if k is not None))
        shape = self.shape
        starts, stops, steps, squeeze, newaxes = [], [], [], [], []
        axis, out_axis = 0, 0
        for k in key:
            if k is None:
                newaxes.append(out_axis)
                out_axis += 1
                continue
            n = shape[axis]
            if isinstance(k, slice):
                st, sp, sz = k.indices(n)
                if sz <= 0:
                    raise IndexError("slice steps must be positive")
                starts.append(st)
                stops.append(max(sp, st))
                steps.append(sz)
                out_axis += 1
            elif isinstance(k, (int, np.integer)):
                i = int(k)
                if i < -n or i >= n:
                    raise IndexError("index %d is out of range for dimension %d of size %d" %
                                     (i, axis, n))
                i %= n
                starts.append(i)
                stops.append(i + 1)
                steps.append(1)
                squeeze.append(axis)
            else:
                raise TypeError("lazytensor: unsupported index %r" % (k,))
            axis += 1
        s0, n = _shape_args(starts)
        s1, _ = _shape_args(stops)
        s2, _ = _shape_args(steps)
        r = wrap(lib.lt_slice_n(self._ptr, s0, s1, s2, n))
        if squeeze:
            r = r.reshape(tuple(d for i, d in enumerate(r.shape) if i not in squeeze))
        for a in newaxes:
            r = r.unsqueeze(a)
        return r

    # ---- autograd
    @property
    def requires_grad(self):
        return lib.lt_get_requires_grad(self._ptr)

    @requires_grad.setter
    def requires_grad(self, on):
        check(lib.lt_set_requires_grad(self._ptr, bool(on)))

    def requires_grad_(self, on=True):
        self.requires_grad = on
        return self

    @property
    def grad(self):
        g = lib.lt_grad(self._ptr)
        return wrap(lib.lt_retain(g)) if g else None

    def zero_grad(self):
        check(lib.lt_zero_grad(self._ptr))

    def backward(self):
        check(lib.lt_backward(self._ptr))

    def detach(self):
        return wrap(lib.lt_detach(self._ptr))

    # ---- methods over the library's ops
    def to(self, dtype):
        return wrap(lib.lt_cast(self._ptr, _dtype_code(dtype)))

    def float(self):
        return self.to(F32)

    def double(self):
        return self.to(F64)

    def long(self):
        return self.to(I64)

    def clamp(self, min=None, max=None):
        lo = float("-inf") if min is None else float(min)
        hi = float("inf") if max is None else float(max)
        return wrap(lib.lt_clamp(self._ptr, lo, hi))

    def where(self, cond, other):
        return where(cond, self, other)

    def masked_fill(self, mask, value):
        return wrap(lib.lt_masked_fill(self._ptr, mask._ptr, float(value)))

    def tril(self, diagonal=0):
        return wrap(lib.lt_tril(self._ptr, diagonal))

    def triu(self, diagonal=0):
        return wrap(lib.lt_triu(self._ptr, diagonal))

    def var(self, dim=None, correction=1, keepdim=False):
        a, n = _axes(dim)
        return wrap(lib.lt_var(self._ptr, a, n, correction, keepdim))

    def std(self, dim=None, correction=1, keepdim=False):
        a, n = _axes(dim)
        return wrap(lib.lt_std(self._ptr, a, n, correction, keepdim))

    def norm(self, p=2, dim=None, keepdim=False):
        a, n = _axes(dim)
        return wrap(lib.lt_vector_norm(self._ptr, a, n, float(p), keepdim))

    def argmax(self, dim, keepdim=False):
        return wrap(lib.lt_argmax(self._ptr, dim, keepdim))

    def argmin(self, dim, keepdim=False):
        return wrap(lib.lt_argmin(self._ptr, dim, keepdim))

    def softmax(self, dim):
        return wrap(lib.lt_softmax(self._ptr, dim))

    def log_softmax(self, dim):
        return wrap(lib.lt_log_softmax(self._ptr, dim))

    def cumsum(self, dim):
        return wrap(lib.lt_cumsum(self._ptr, dim))

    def sort(self, dim=-1, descending=False):
        v, i = _lib.c_tensor(), _lib.c_tensor()
        check(lib.lt_sort(self._ptr, dim, descending, ctypes.byref(v), ctypes.byref(i)))
        return wrap(v.value), wrap(i.value)

    def argsort(self, dim=-1, descending=False):
        return wrap(lib.lt_argsort(self._ptr, dim, descending))

    def topk(self, k, dim=-1, largest=True):
        v, i = _lib.c_tensor(), _lib.c_tensor()
        check(lib.lt_topk(self._ptr, k, dim, largest, ctypes.byref(v), ctypes.byref(i)))
        return wrap(v.value), wrap(i.value)

    def reshape(self, *shape):
        s, nd = _shape_args(_flat(shape))
        return wrap(lib.lt_reshape(self._ptr, s, nd))

    view = reshape

    def permute(self, *dims):
        d, n = _int_args(_flat(dims))
        return wrap(lib.lt_permute(self._ptr, d, n))

    def transpose(self, dim0, dim1):
        return wrap(lib.lt_transpose(self._ptr, dim0, dim1))

    @property
    def T(self):
        return self.permute(tuple(reversed(range(self.ndim))))

    def expand(self, *shape):
        s, nd = _shape_args(_flat(shape))
        return wrap(lib.lt_expand(self._ptr, s, nd))

    def squeeze(self, dim):
        return wrap(lib.lt_squeeze(self._ptr, dim))

    def unsqueeze(self, dim):
        return wrap(lib.lt_unsqueeze(self._ptr, dim))

    def flatten(self, start_dim=0, end_dim=-1):
        return wrap(lib.lt_flatten(self._ptr, start_dim, end_dim))

    def flip(self, *dims):
        d, n = _int_args(_flat(dims))
        return wrap(lib.lt_flip(self._ptr, d, n))

    def roll(self, shifts, dims):
        shifts = (shifts,) if isinstance(shifts, int) else shifts
        dims = (dims,) if isinstance(dims, int) else dims
        s, ns = _shape_args(shifts)
        d, nd = _int_args(dims)
        return wrap(lib.lt_roll(self._ptr, s, ns, d, nd))

    def repeat(self, *repeats):
        s, n = _shape_args(_flat(repeats))
        return wrap(lib.lt_repeat(self._ptr, s, n))

    def pad(self, pads, value=0.0):
        s, n = _shape_args(pads)
        return wrap(lib.lt_pad_n(self._ptr, s, n, float(value)))

    def split(self, size, dim=0):
        out = (_lib.c_tensor * (self.shape[dim] // size + 2))()
        n = check(lib.lt_split_size(self._ptr, size, dim, out, len(out)))
        return [wrap(out[i]) for i in range(n)]

    def chunk(self, chunks, dim=0):
        out = (_lib.c_tensor * max(chunks, 1))()
        n = check(lib.lt_chunk(self._ptr, chunks, dim, out, len(out)))
        return [wrap(out[i]) for i in range(n)]

    def gather(self, dim, index):
        return wrap(lib.lt_gather(self._ptr, dim, index._ptr))

    def index_select(self, dim, index):
        return wrap(lib.lt_index_select(self._ptr, dim, index._ptr))

    def scatter(self, dim, index, src):
        return wrap(lib.lt_scatter(self._ptr, dim, index._ptr, src._ptr))

    def scatter_add(self, dim, index, src):
        return wrap(lib.lt_scatter_add(self._ptr, dim, index._ptr, src._ptr))

    def index_add(self, dim, index, src, alpha=1.0):
        return wrap(lib.lt_index_add(self._ptr, dim, index._ptr, src._ptr, float(alpha)))

    def bernoulli(self):
        """0/1 draws with self's probabilities (the device's RNG)."""
        return wrap(lib.lt_bernoulli(self._ptr))

    def one_hot(self, num_classes, dtype=I64):
        return wrap(lib.lt_one_hot(self._ptr, num_classes, _dtype_code(dtype)))

    def assign_(self, src):
        """Lazy in-place update (lt_assign): self takes src's value at the next step."""
        check(lib.lt_assign(self._ptr, _scalar_for(self, src)._ptr))
        return self


def _unary(name):
    fn = getattr(lib, "lt_" + name)

    def op(self):
        return wrap(fn(self._ptr))

    op.__name__ = name
    return op


def _reduce(name):
    fn = getattr(lib, "lt_" + name)

    def op(self, dim=None, keepdim=False):
        a, n = _axes(dim)
        return wrap(fn(self._ptr, a, n, keepdim))

    op.__name__ = name
    return op


for _n in _lib.UNARY:
    setattr(Tensor, _n, _unary(_n))
for _n in _lib.BINARY:
    setattr(Tensor, _n, _binop(_n))
for _n in _lib.REDUCE:
    setattr(Tensor, _n, _reduce(_n))


def where(cond, a, b):
    if not isinstance(a, Tensor):
        a = _scalar_for(b, a)
    if not isinstance(b, Tensor):
        b = _scalar_for(a, b)
    return wrap(lib.lt_where(cond._ptr, a._ptr, b._ptr))


def _seq(ts):
    return (_lib.c_tensor * len(ts))(*[t._ptr for t in ts])


def cat(ts, dim=0):
    return wrap(lib.lt_concat(_seq(ts), len(ts), dim))


def stack(ts, dim=0):
    return wrap(lib.lt_stack(_seq(ts), len(ts), dim))


def sync(*ts):
    """Runs what the tensors need now (one graph), waiting for it."""
    check(lib.lt_sync(_seq(ts), len(ts), True))


def mark_step():
    """The step barrier (lt_mark_step): every pending value runs as one graph."""
    check(lib.lt_mark_step(_CPU))


def clear_pending():
    """Drops every live tensor's pending graph (lt_clear_pending): reading one
    then fails. Returns how many were cleared."""
    return check(lib.lt_clear_pending(_CPU))


def wait_device_ops():
    check(lib.lt_wait_device_ops(_CPU))


def live_tensors():
    """Tensors alive in the library (a leak check)."""
    return lib.lt_device_live_tensors(_CPU)


class no_grad:
    """torch.no_grad as a context manager (lt_no_grad_begin / end)."""

    def __enter__(self):
        lib.lt_no_grad_begin()
        return self

    def __exit__(self, *exc):
        lib.lt_no_grad_end()
        return False


def metrics_report():
    """The library's text report of every counter and metric."""
    n = lib.lt_metrics_report(None, 0)
    buf = ctypes.create_string_buffer(n + 1)
    lib.lt_metrics_report(buf, n + 1)
    return buf.value.decode()


def counter(name):
    v = ctypes.c_int64()
    check(lib.lt_get_counter(name.encode(), ctypes.byref(v)))
    return v.value


def metric(name):
    """A timer's or value metric's stats as a dict (count, total, min, max, p50, p90, p99)."""
    st = _lib.MetricStats()
    check(lib.lt_get_metric(name.encode(), ctypes.byref(st)))
    return {f: getattr(st, f) for f, _ in _lib.MetricStats._fields_}
