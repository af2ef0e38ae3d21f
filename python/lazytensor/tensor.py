"""Tensor: a Python object owning one reference to an lt_tensor.

Every op records into the lazy graph; values are computed when read
(numpy(), item(), float()) or at mark_step(). The reference is released when
the Python object dies (__del__), so a loop keeps no tensors alive.
"""
import collections
import contextlib
import ctypes
import threading

import numpy as np

from . import _lib
from ._lib import lib

# The library's dtype ids (lt_dtype) and their numpy types: the one list of
# dtypes here (tests/python/test_dtypes.py checks it against the library's
# table: every id, its size and kind). _NP is the numpy type a dtype's values
# come out as (numpy()); _RAW the numpy type of its stored bits (numpy_raw()).
# They differ for bf16 only: numpy has no 16-bit bfloat, so its values travel
# as float32 (converted by the library, lt_from_f32 / lt_to_f32) and its bits
# as uint16. The tables are keyed by the ids (ints); the public names
# (lazytensor.float32, F32, ...) are the dtype objects below.
_BOOL, _I32, _I64, _F32, _F64, _U8, _I8, _BF16 = range(8)
_NP = {_BOOL: np.bool_, _I32: np.int32, _I64: np.int64, _F32: np.float32, _F64: np.float64,
       _U8: np.uint8, _I8: np.int8, _BF16: np.float32}
_RAW = {**_NP, _BF16: np.uint16}
# numpy dtype -> id: a float32 array is F32 (bf16 is asked for by name)
_FROM_NP = {np.dtype(v): k for k, v in _NP.items() if k != _BF16}
_NAMES = {k: np.dtype(v).name for k, v in _NP.items()}  # "float32", "bool", ...
_NAMES[_BF16] = "bfloat16"
_BY_NAME = {"bf16": _BF16, "bfloat16": _BF16}  # names numpy does not know
_FLOATS = (_F32, _F64, _BF16)
# PyTorch's promotion categories: bool < integer < floating. A Python number
# next to a tensor, and an in-place op's result, are judged by them.
_CATEGORY = {_BOOL: 0, _I32: 1, _I64: 1, _U8: 1, _I8: 1, _F32: 2, _F64: 2, _BF16: 2}


class dtype:
    """A tensor's dtype, as torch.dtype: lazytensor.float32, .int64, .bfloat16, ...

    t.dtype is one of these objects (one per dtype, so `is` works too). It
    compares equal to the other ways of naming the same dtype, so that code
    ported from numpy or from an earlier lazytensor keeps working: the numpy
    type or dtype (np.float32, np.dtype("float32")), the name ("float32",
    "bf16"), and the library's integer id (lt_dtype, what t.dtype was before).
    Every function that takes a dtype accepts all of these forms. The hash is
    the id's, so a dict keyed by ids finds a dtype object too."""

    __slots__ = ("_code", "name", "itemsize", "is_floating_point", "is_signed", "is_complex")

    def __init__(self, code):
        self._code = code
        self.name = _NAMES[code]
        self.itemsize = np.dtype(_RAW[code]).itemsize
        self.is_floating_point = code in _FLOATS
        self.is_signed = code not in (_BOOL, _U8)
        self.is_complex = False

    def __repr__(self):
        return "lazytensor." + self.name

    __str__ = __repr__

    def __eq__(self, other):
        if other.__class__ is dtype:
            return other is self
        if isinstance(other, bool):  # True / False are not dtype ids
            return False
        try:
            return _dtype_code(other) == self._code
        except (TypeError, ValueError):
            return False

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._code)

    def __reduce__(self):  # pickles as the module's own object
        return (_dtype_of, (self._code,))


_DTYPES = tuple(dtype(c) for c in range(len(_NP)))


def _dtype_of(code):
    """The dtype object of a library id."""
    return _DTYPES[code]


bool_, int32, int64, float32, float64, uint8, int8, bfloat16 = _DTYPES
# the names the binding had before dtype objects (now the same objects)
BOOL, I32, I64, F32, F64, U8, I8, BF16 = _DTYPES

_CPU = lib.lt_cpu(0)
_EINVAL, _ESHAPE, _EDTYPE = -1, -2, -3  # lt_status (include/lazytensor.h)


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


def _dtype_code(dt):
    """The library id of a dtype given in any of its forms: a dtype object, an
    id, a name, a numpy type or dtype. None stays None."""
    if dt is None:
        return None
    if dt.__class__ is dtype:
        return dt._code
    if isinstance(dt, int):
        return dt
    if isinstance(dt, str) and dt in _BY_NAME:
        return _BY_NAME[dt]
    try:
        return _FROM_NP[np.dtype(dt)]
    except (TypeError, KeyError, ValueError):
        raise TypeError("lazytensor: dtype %r is not supported" % (dt,)) from None


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
        if code == _BF16:  # numpy has no bf16: the library converts from f32
            t = _from_f32(a, _BF16)
        else:
            if code is not None:
                a = a.astype(_NP[code])
            elif not isinstance(data, np.ndarray) and a.dtype == np.float64:
                a = a.astype(np.float32)
            t = from_numpy(a)
    if requires_grad:
        t.requires_grad = True
    return t


def _leaf(t, requires_grad):
    """t, made a leaf that requires grad when asked (the factories' keyword)."""
    if requires_grad:
        t.requires_grad = True
    return t


def _make(fn, shape, dtype, *extra, requires_grad=False):
    s, nd = _shape_args(shape)
    return _leaf(wrap(fn(_CPU, _dtype_code(dtype), s, nd, *extra)), requires_grad)


def zeros(*shape, dtype=F32, requires_grad=False):
    return _make(lib.lt_zeros, _flat(shape), dtype, requires_grad=requires_grad)


def ones(*shape, dtype=F32, requires_grad=False):
    return _make(lib.lt_ones, _flat(shape), dtype, requires_grad=requires_grad)


def full(shape, value, dtype=F32, requires_grad=False):
    return _make(lib.lt_full, _flat((shape,)), dtype, float(value), requires_grad=requires_grad)


def rand(*shape, dtype=F32, low=0.0, high=1.0, requires_grad=False):
    return _make(lib.lt_rand_uniform, _flat(shape), dtype, low, high,
                 requires_grad=requires_grad)


def randn(*shape, dtype=F32, mean=0.0, std=1.0, requires_grad=False):
    return _make(lib.lt_rand_normal, _flat(shape), dtype, mean, std, requires_grad=requires_grad)


def arange(start, stop=None, step=1, dtype=None, requires_grad=False):
    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = _I64 if all(isinstance(v, int) for v in (start, stop, step)) else _F32
    return _leaf(wrap(lib.lt_arange(_CPU, _dtype_code(dtype), start, stop, step)), requires_grad)


def eye(n, m=0, dtype=F32, requires_grad=False):
    return _leaf(wrap(lib.lt_eye(_CPU, _dtype_code(dtype), n, m)), requires_grad)


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
        dt = _BOOL
    elif isinstance(v, (int, np.integer)):
        dt = _I64
    elif isinstance(v, (float, np.floating)):
        # bf16 + 2.5 stays bf16 (a 0-d f32 only raises the category) and, as in
        # torch, the number enters the op as f32, not rounded to bf16 first;
        # a numpy float64 scalar is a number too (f32 + np.float64(1.5) is f32)
        dt = lib.lt_get_dtype(t._ptr)
        dt = dt if dt in (_F32, _F64) else _F32
    else:
        return NotImplemented
    return wrap(lib.lt_scalar(_CPU, dt, float(v)))


# The operator each op is written with (the name of a method-only op is its own).
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**", "remainder": "%",
            "floor_divide": "//", "matmul": "@", "eq": "==", "ne": "!=", "lt": "<", "le": "<=",
            "gt": ">", "ge": ">=", "logical_and": "&", "logical_or": "|"}


def _foreign(name, t, other, swap):
    """An operand that is neither a Tensor nor a number: a numpy array, a list
    or a tuple is refused with a TypeError (converting it would take the
    result out of the graph, or hide a float64 promotion); anything else is
    NotImplemented, for Python's own TypeError."""
    if isinstance(other, (np.ndarray, list, tuple)):
        kinds = (type(other).__name__, "Tensor")
        raise TypeError("lazytensor: unsupported operand types for %s: '%s' and '%s' (numpy arrays "
                        "and lists are not converted implicitly: the result would leave the "
                        "graph; make a tensor first with lt.tensor(...))" %
                        ((_SYMBOLS.get(name, name),) + (kinds if swap else kinds[::-1])))
    return NotImplemented


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
                return _foreign(name, self, other, swap)
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
    # _ptr: the lt_tensor. Two flags, unset on most tensors (read with getattr):
    # _bw, the graph this tensor is the loss of was freed by backward();
    # _alias, what the tensor is a copy of where PyTorch would give a view
    # (basic indexing, .data), so that an in-place op on it is refused.
    __slots__ = ("_ptr", "_bw", "_alias", "__weakref__")
    # numpy must not take over an operator with an array (np.ones(2) + t would
    # be a numpy array, out of the graph): with None its operators and ufuncs
    # defer to Tensor's reflected ones, which refuse the array (_foreign).
    __array_ufunc__ = None

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
        """The dtype object (lazytensor.float32, ...), as torch's t.dtype."""
        return _DTYPES[lib.lt_get_dtype(self._ptr)]

    def _code(self):
        """The library's id of the dtype (the tables' key)."""
        return lib.lt_get_dtype(self._ptr)

    def is_floating_point(self):
        return lib.lt_get_dtype(self._ptr) in _FLOATS

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
                                                         _NAMES[self._code()])
        except LazyTensorError as e:
            return "lazytensor.Tensor(<error: %s>)" % e

    # ---- values
    def numpy(self):
        """Runs what the value needs and returns it as a new numpy array, which
        the library writes into directly (no copy in Python)."""
        dt = self._code()
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
        out = np.empty(self.shape, dtype=_RAW[self._code()])
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
        dt = self._code()
        return bool(v.value) if dt == _BOOL else v.value if dt in _FLOATS else int(v.value)

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
    __eq__, __ne__ = _binop("eq"), _binop("ne")
    __lt__, __le__, __gt__, __ge__ = _binop("lt"), _binop("le"), _binop("gt"), _binop("ge")
    __and__, __or__ = _binop("logical_and"), _binop("logical_or")
    __rand__, __ror__ = _binop("logical_and", True), _binop("logical_or", True)
    __hash__ = object.__hash__

    def __matmul__(self, other):
        if other.__class__ is Tensor:
            return _matmul("matmul", self, other)
        o = _scalar_for(self, other)
        if o is NotImplemented:
            return _foreign("matmul", self, other, False)
        return wrap(lib.lt_matmul(self._ptr, o._ptr))  # the library refuses a 0-d operand

    def __rmatmul__(self, other):
        o = _scalar_for(self, other)
        if o is NotImplemented:
            return _foreign("matmul", self, other, True)
        return wrap(lib.lt_matmul(o._ptr, self._ptr))

    def matmul(self, other):
        return _matmul("matmul", self, other)

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
        r._alias = "t[...] (lazytensor's indexing makes a new tensor, not a view of t)"
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
        """The gradient (the tensor's own: an in-place op on it, x.grad.zero_(),
        changes it), or None."""
        g = lib.lt_grad(self._ptr)
        return wrap(lib.lt_retain(g)) if g else None

    @grad.setter
    def grad(self, value):
        # x.grad = None is torch's zero_grad(set_to_none=True); the library has
        # no call that installs another tensor as a gradient
        if value is not None:
            raise TypeError("lazytensor: only None can be assigned to .grad (x.grad = None drops "
                            "the gradient; x.grad.zero_() or x.grad.copy_(g) change its value)")
        check(lib.lt_zero_grad(self._ptr))

    def zero_grad(self):
        check(lib.lt_zero_grad(self._ptr))

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Adds this loss's gradient to the .grad of each tensor that requires
        grad, as torch's backward(). As in PyTorch, the graph is used up: a
        second backward() through the same loss raises, unless the first one
        passed retain_graph=True (the library would add the same gradients
        again). Two losses from two forward passes accumulate, as in torch.
        gradient: for a loss of several elements, the vector the Jacobian is
        multiplied by (torch's grad_tensors)."""
        if create_graph or inputs is not None:
            raise NotImplementedError("backward: create_graph and inputs are not supported")
        if getattr(self, "_bw", False):
            raise LazyTensorError(
                "backward: Trying to backward through the graph a second time: the first "
                "backward() of this loss freed it (as PyTorch does). Specify retain_graph=True "
                "on the first backward() if you need to backward through the graph again.",
                _EINVAL)
        loss = self
        if gradient is not None:
            if not isinstance(gradient, Tensor):
                raise TypeError("backward: gradient must be a Tensor, not %s" %
                                type(gradient).__name__)
            if gradient.shape != self.shape:
                raise LazyTensorError("backward: gradient has shape %s but the tensor has shape %s"
                                      % (gradient.shape, self.shape), _ESHAPE)
            loss = (self * gradient.detach()).sum()
        check(lib.lt_backward(loss._ptr))
        if not retain_graph:
            self._bw = True

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
        src = _scalar_for(self, src)  # held: its reference must outlive the call
        check(lib.lt_assign(self._ptr, src._ptr))
        return self

    # ---- in place, as PyTorch's: the same Python object (and the same
    # lt_tensor: a layer's parameter is updated in the layer too) takes the new
    # value, lazily (lt_assign), keeping requires_grad and .grad. A leaf that
    # requires grad is updated only under no_grad(), as in torch; elsewhere
    # the new value keeps its history, so gradients flow through it.
    def _inplace_check(self, name):
        alias = getattr(self, "_alias", None)
        if alias:
            raise LazyTensorError(
                "%s: this tensor is a copy of %s, so an in-place change would not reach the "
                "original; use the out-of-place form and assign the result" % (name, alias),
                _EINVAL)
        if lib.lt_get_requires_grad(self._ptr) and not lib.lt_get_no_grad():
            raise LazyTensorError(
                "%s: a leaf Variable that requires grad is being used in an in-place operation. "
                "(Update it inside `with lazytensor.no_grad():`.)" % name, _EINVAL)

    def _take(self, name, value, result=True):
        """self takes value's value. An op's result (result true) must have
        self's shape and a dtype PyTorch casts to self's in place (not of a
        higher category: an int tensor cannot take a float result); a source
        (copy_, fill_) is broadcast to self's shape and cast to any dtype."""
        shape = self.shape
        if result:
            dc, vc = lib.lt_get_dtype(self._ptr), lib.lt_get_dtype(value._ptr)
            if _CATEGORY[vc] > _CATEGORY[dc]:
                raise LazyTensorError("%s: result type %s can't be cast to the desired output "
                                      "type %s" % (name, _NAMES[vc], _NAMES[dc]), _EDTYPE)
            if value.shape != shape:
                raise LazyTensorError("%s: output with shape %s doesn't match the broadcast shape "
                                      "%s" % (name, list(shape), list(value.shape)), _ESHAPE)
        elif not _broadcasts_to(value.shape, shape):
            raise LazyTensorError("%s: the source's shape %s does not broadcast to %s" %
                                  (name, list(value.shape), list(shape)), _ESHAPE)
        check(lib.lt_assign(self._ptr, value._ptr))
        self._bw = False  # a new value, a new graph
        return self

    def _inplace(self, name, fn, *args):
        self._inplace_check(name)
        r = fn(self, *args)
        if r is NotImplemented:
            return r
        return self._take(name, r)

    def add_(self, other, alpha=1):
        return self._inplace("add_", _add_alpha, other, alpha)

    def sub_(self, other, alpha=1):
        return self._inplace("sub_", _sub_alpha, other, alpha)

    def mul_(self, other):
        return self._inplace("mul_", Tensor.__mul__, other)

    def div_(self, other):
        return self._inplace("div_", Tensor.__truediv__, other)

    def pow_(self, other):
        return self._inplace("pow_", Tensor.__pow__, other)

    def clamp_(self, min=None, max=None):
        return self._inplace("clamp_", Tensor.clamp, min, max)

    def neg_(self):
        return self._inplace("neg_", Tensor.__neg__)

    def zero_(self):
        return self.fill_(0, _name="zero_")

    def fill_(self, value, _name="fill_"):
        """Every element takes value (a number or a one-element tensor), cast to
        self's dtype as torch's fill_ (2.7 into an int tensor is 2)."""
        self._inplace_check(_name)
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise LazyTensorError("%s: only supports 0-dimension value tensor but got "
                                      "tensor with %d dimensions" % (_name, value.ndim), _EINVAL)
            v = value.reshape(())
        else:
            v = wrap(lib.lt_scalar(_CPU, lib.lt_get_dtype(self._ptr), float(value)))
        return self._take(_name, v, result=False)

    def copy_(self, src):
        """self takes src's values, broadcast to self's shape and cast to its dtype
        (any dtype, as torch's copy_); gradients flow to src."""
        self._inplace_check("copy_")
        if not isinstance(src, Tensor):
            raise TypeError("copy_: argument 'src' must be Tensor, not %s" % type(src).__name__)
        return self._take("copy_", src, result=False)

    def uniform_(self, a=0.0, b=1.0):
        self._inplace_check("uniform_")
        return self._take("uniform_", rand(self.shape, dtype=lib.lt_get_dtype(self._ptr), low=a,
                                           high=b))

    def normal_(self, mean=0.0, std=1.0):
        self._inplace_check("normal_")
        return self._take("normal_", randn(self.shape, dtype=lib.lt_get_dtype(self._ptr),
                                           mean=mean, std=std))

    @property
    def data(self):
        """torch's .data: the value without autograd. Assigning to it
        (p.data = v, p.data -= lr * g) updates p in place without recording;
        lazytensor has no views, so an in-place method on p.data itself
        (p.data.zero_()) is refused: it would change a copy."""
        d = wrap(lib.lt_detach(self._ptr))
        d._alias = "x.data (write x.data = ..., or update x under lazytensor.no_grad())"
        return d

    @data.setter
    def data(self, value):
        if not isinstance(value, Tensor):
            raise TypeError("data: the new value must be a Tensor, not %s" % type(value).__name__)
        lib.lt_no_grad_begin()
        try:
            check(lib.lt_assign(self._ptr, value._ptr))
        finally:
            lib.lt_no_grad_end()
        self._bw = False


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
    if _n != "matmul":  # Tensor.matmul checks the dtypes (_matmul)
        setattr(Tensor, _n, _binop(_n))
for _n in _lib.REDUCE:
    setattr(Tensor, _n, _reduce(_n))

# torch.return_types.max / .min: t.max(dim) is a (values, indices) pair
max_result = collections.namedtuple("max", ("values", "indices"))
min_result = collections.namedtuple("min", ("values", "indices"))


def _extremum(name, result):
    reduce_, arg = getattr(lib, "lt_" + name), getattr(lib, "lt_arg" + name)

    def op(self, dim=None, keepdim=False):
        """As torch's: t.max() over every element, a 0-d tensor; t.max(dim,
        keepdim=False) a named pair (values, indices), the int64 indices of the
        first extreme element along dim (NaN counts as the extreme, as in
        torch); t.max(other) the elementwise maximum. The values' gradient goes
        to the elements at indices, as torch's (t.amax(dim) shares it among
        ties). The same for min."""
        if isinstance(dim, Tensor):
            return getattr(self, name + "imum")(dim)
        if dim is None:
            if keepdim:
                raise TypeError("%s(): keepdim needs a dim" % name)
            return wrap(reduce_(self._ptr, *_int_args(()), False))
        if not isinstance(dim, (int, np.integer)):
            raise TypeError("%s(): dim must be an int (for several dims use a%s)" % (name, name))
        dim = int(dim)
        idx = wrap(arg(self._ptr, dim, True))
        if self.ndim == 0:  # torch: the value itself, index 0
            return result(wrap(reduce_(self._ptr, *_int_args(()), False)), idx)
        values = self.gather(dim, idx)  # the gradient to the index, as torch's
        if not keepdim:
            values, idx = values.squeeze(dim), idx.squeeze(dim)
        return result(values, idx)

    op.__name__ = name
    return op


Tensor.max = _extremum("max", max_result)
Tensor.min = _extremum("min", min_result)
Tensor.amax = _reduce("max")  # several dims at once, the gradient shared among ties
Tensor.amin = _reduce("min")


def _argext(name):
    fn = getattr(lib, "lt_" + name)

    def op(self, dim=None, keepdim=False):
        """torch's %s: without dim, the index into the flattened tensor."""
        if dim is None:
            flat = self.reshape(-1)  # held: its reference must outlive the call
            r = wrap(fn(flat._ptr, 0, False))
            return r.reshape((1,) * self.ndim) if keepdim else r
        return wrap(fn(self._ptr, dim, keepdim))

    op.__name__ = name
    op.__doc__ = op.__doc__ % name
    return op


Tensor.argmax = _argext("argmax")
Tensor.argmin = _argext("argmin")


def _augmented(symbol, method):
    """x op= y: in place, as PyTorch (x stays the same object; a leaf that
    requires grad only under no_grad()). On a copy where torch has a view
    (t[i] += 1, p.data -= g) the result is computed out of place: Python then
    stores it back itself (p.data = ...; t[i] = ... is refused for want of
    __setitem__, loudly)."""

    def op(self, other):
        if getattr(self, "_alias", None):
            return method(self, other)
        return self._inplace(symbol, method, other)

    return op


for _op in ("add", "sub", "mul", "truediv", "pow", "mod", "floordiv", "and", "or"):
    _m = getattr(Tensor, "__%s__" % _op)
    _f = _augmented(_SYMBOLS.get(_m.__name__, _m.__name__) + "=", _m)
    _f.__name__ = "__i%s__" % _op
    setattr(Tensor, _f.__name__, _f)


def _add_alpha(t, other, alpha):
    return t + (other if alpha == 1 else other * alpha)


def _sub_alpha(t, other, alpha):
    return t - (other if alpha == 1 else other * alpha)


def _broadcasts_to(src, shape):
    """Whether a value of shape src broadcasts to shape (lt_assign's rule)."""
    if len(src) > len(shape):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(shape)))


def _same_dtype(fn, a, b):
    """PyTorch's rule for products (matmul, linear, ...): both operands of one
    dtype, no promotion (an f32 layer given float64 data raises rather than
    computing in float64). Raises LazyTensorError naming fn."""
    da, db = lib.lt_get_dtype(a._ptr), lib.lt_get_dtype(b._ptr)
    if da != db:
        raise LazyTensorError(
            "%s: expected both operands to have the same dtype, got %s and %s (PyTorch does "
            "not promote here; cast one with .to(...))" % (fn, _NAMES[da], _NAMES[db]), _EDTYPE)


def _matmul(fn, a, b):
    if not isinstance(b, Tensor):
        raise TypeError("%s: argument 'other' must be Tensor, not %s" % (fn, type(b).__name__))
    _same_dtype(fn, a, b)
    return wrap(lib.lt_matmul(a._ptr, b._ptr))


def matmul(input, other):
    """torch.matmul (operands of one dtype, as torch)."""
    return _matmul("matmul", input, other)


def where(cond, a, b):
    if not isinstance(a, Tensor):
        a = _scalar_for(b, a)
    if not isinstance(b, Tensor):
        b = _scalar_for(a, b)
    if a is NotImplemented or b is NotImplemented:
        raise TypeError("where: the values must be Tensors or numbers (a numpy array or list is "
                        "not converted implicitly; make it a tensor with lt.tensor(...))")
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


def set_eager(mode):
    """Eager mode on or off (lt_set_eager; LT_EAGER=1 sets it at start): on,
    every op runs as soon as it is traced (queued, asynchronously), as
    PyTorch does; the mode for finding which op of a lazy graph misbehaves.
    Autograd and the optimizers work in both modes."""
    lib.lt_set_eager(bool(mode))


def is_eager():
    """Whether eager mode is on (lt_get_eager)."""
    return bool(lib.lt_get_eager())


def set_backend(name):
    """Chooses the backend that compiles and runs graphs from the next one on
    (lt_set_backend): "cpu" (fused LLVM kernels and oneDNN products, the
    default) or "ref" (the interpreter, the oracle). LT_BACKEND in the
    environment is the choice until this is called. Tensors alive keep their
    values across a switch. An unknown name raises LazyTensorError listing
    the known ones; a name that is not a str raises TypeError."""
    if not isinstance(name, str):
        raise TypeError("set_backend: the backend's name must be a str, not %s" %
                        type(name).__name__)
    check(lib.lt_set_backend(name.encode()))


def get_backend():
    """The name of the backend the next graph runs on (lt_get_backend)."""
    name = lib.lt_get_backend()
    if not name:
        raise _error()
    return name.decode()


def clear_pending():
    """Drops every live tensor's pending graph (lt_clear_pending): reading one
    then fails. Returns how many were cleared."""
    return check(lib.lt_clear_pending(_CPU))


def wait_device_ops():
    check(lib.lt_wait_device_ops(_CPU))


def live_tensors():
    """Tensors alive in the library (a leak check)."""
    return lib.lt_device_live_tensors(_CPU)


class no_grad(contextlib.ContextDecorator):
    """torch.no_grad, a context manager or a decorator (@no_grad()): ops inside
    record nothing for autograd (lt_no_grad_begin / end, per thread, nested),
    and in-place updates of leaves that require grad are allowed:
    `with lt.no_grad(): w -= lr * w.grad`."""

    def __enter__(self):
        lib.lt_no_grad_begin()
        return self

    def __exit__(self, *exc):
        lib.lt_no_grad_end()
        return False


def is_grad_enabled():
    """False inside no_grad() (this thread), as torch.is_grad_enabled."""
    return not lib.lt_get_no_grad()


def _leave_no_grad():
    """Closes every open no-grad scope of this thread; returns how many."""
    n = 0
    while lib.lt_get_no_grad():
        lib.lt_no_grad_end()
        n += 1
    return n


class enable_grad(contextlib.ContextDecorator):
    """torch.enable_grad: autograd records again inside, even within no_grad();
    the no-grad scopes open outside are reopened on exit."""

    def __init__(self):
        self._closed = threading.local()

    def __enter__(self):
        stack = self._closed.__dict__.setdefault("stack", [])
        stack.append(_leave_no_grad())
        return self

    def __exit__(self, *exc):
        for _ in range(self._closed.stack.pop()):
            lib.lt_no_grad_begin()
        return False


class set_grad_enabled:
    """torch.set_grad_enabled(mode): takes effect when called (a plain call
    switches autograd off or on for this thread); used with `with`, the mode
    before it comes back at the end."""

    def __init__(self, mode):
        self._mode = bool(mode)
        if self._mode:
            self._closed = _leave_no_grad()
        else:
            lib.lt_no_grad_begin()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._mode:
            for _ in range(self._closed):
                lib.lt_no_grad_begin()
        else:
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
