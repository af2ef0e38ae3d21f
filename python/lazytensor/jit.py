"""torch.jit.trace / save / load over the library's saved programs
(lt_program_create / _run / _save / _load, include/lazytensor.h; the file
format is docs/DEPLOY.md's, so a program saved here loads in C with
lt_program_load, in lazytensor-aot, and the other way round).

    traced = lazytensor.jit.trace(model, lt.zeros(64, 784))
    traced.save("model.ltp")
    f = lazytensor.jit.load("model.ltp")
    logits = f(images)            # images: float32 [64, 784], as traced

trace(func, example_inputs) runs func once on the example inputs (a Tensor
or a tuple of them) and compiles the graph of what it returns (a Tensor or a
tuple / list of them) into a program whose inputs are the example inputs'
places: calling it runs the compiled graph on new tensors of the same dtypes
and shapes, without tracing again. Everything else the graph reads (a
model's parameters, constants) is captured with its value as of the trace.
As torch.jit.trace, the trace records one path: Python control flow is
fixed by the example inputs. Differences from torch: the shapes are fixed
too (a new batch size needs a new trace); the outputs carry no autograd
graph (an export for inference); and trace first runs the step barrier
(lazytensor.mark_step), so that values still pending (a fresh model's init
draws) are computed once and captured, not recomputed by every call. Eager
mode is off during the trace (the graph must stay pending to be compiled)
and restored after.
"""
import ctypes
import os
import tempfile

from . import _lib
from ._lib import lib
from .tensor import (_ESHAPE, LazyTensorError, Tensor, _dtype_of, _error, check, is_eager,
                     mark_step, no_grad, set_eager, sync, wrap)


def _failed(fn):
    """The library's error of a failed call, named after the Python function."""
    e = _error()
    return LazyTensorError("%s: %s" % (fn, e), e.status)


def _tensors(fn, what, value):
    """value as a list of Tensors and whether it was a single one."""
    if isinstance(value, Tensor):
        return [value], True
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, Tensor) for v in value):
        return list(value), False
    raise TypeError("%s: %s must be a lazytensor.Tensor or a non-empty tuple or list of them, got "
                    "%s" % (fn, what, type(value).__name__))


def _seq(ts):
    return (_lib.c_tensor * max(len(ts), 1))(*[t._ptr for t in ts])


class TracedFunction:
    """A compiled program: call it with tensors of the traced dtypes and
    shapes; save(path) writes it. Made by trace() and load()."""

    def __init__(self, handle, single):
        self._h = handle
        self._single = single
        self.inputs = self._signature(False)
        self.outputs = self._signature(True)

    def _signature(self, output):
        out = []
        for i in range(lib.lt_program_count(self._h, output)):
            dt, nd = ctypes.c_int(), ctypes.c_int()
            shape = (ctypes.c_int64 * 8)()
            check(lib.lt_program_signature(self._h, output, i, ctypes.byref(dt), shape,
                                           ctypes.byref(nd)))
            out.append((_dtype_of(dt.value), tuple(shape[:nd.value])))
        return out

    def __call__(self, *inputs):
        fn = "lazytensor.jit (a traced program)"
        if len(inputs) != len(self.inputs):
            raise TypeError("%s: takes %d input tensors, got %d" % (fn, len(self.inputs),
                                                                  len(inputs)))
        for i, (t, (dt, shape)) in enumerate(zip(inputs, self.inputs)):
            if not isinstance(t, Tensor):
                raise TypeError("%s: input %d must be a lazytensor.Tensor, got %s"
                                % (fn, i, type(t).__name__))
            if t.dtype != dt or tuple(t.shape) != shape:
                raise LazyTensorError("%s: input %d is %s %s, the program takes %s %s (traced "
                                      "shapes are fixed: trace again for others)"
                                      % (fn, i, t.dtype.name, list(t.shape), dt.name,
                                         list(shape)), _ESHAPE)
        sync(*inputs)  # the program takes values: run what the inputs still need
        outs = (_lib.c_tensor * len(self.outputs))()
        if lib.lt_program_run(self._h, _seq(list(inputs)), len(inputs), outs) < 0:
            raise _failed(fn)
        res = [wrap(outs[i]) for i in range(len(self.outputs))]
        return res[0] if self._single and len(res) == 1 else tuple(res)

    def save(self, f):
        """Writes the program to f (a path, or a binary file object)."""
        if hasattr(f, "write"):
            fd, tmp = tempfile.mkstemp(prefix=".lazytensor-jit-", suffix=".ltp")
            os.close(fd)
            try:
                self.save(tmp)
                with open(tmp, "rb") as fh:
                    f.write(fh.read())
            finally:
                os.remove(tmp)
            return
        if lib.lt_program_save(self._h, os.fsencode(os.fspath(f))) < 0:
            raise _failed("lazytensor.jit: TracedFunction.save")

    def __del__(self):
        h, self._h = getattr(self, "_h", None), None
        if h and lib is not None:
            lib.lt_program_free(h)

    def __repr__(self):
        fmt = lambda sig: ", ".join("%s%s" % (dt.name, list(s)) for dt, s in sig)  # noqa: E731
        return "TracedFunction(inputs=[%s], outputs=[%s])" % (fmt(self.inputs),
                                                              fmt(self.outputs))


def trace(func, example_inputs, *args, **kwargs):
    """torch.jit.trace: func (a function or an nn.Module) run once on
    example_inputs and compiled; returns a TracedFunction. torch's other
    arguments (check_trace, strict, ...) are accepted and ignored."""
    fn = "lazytensor.jit.trace"
    if not callable(func):
        raise TypeError("%s: func must be callable, got %s" % (fn, type(func).__name__))
    inputs, _ = _tensors(fn, "example_inputs", example_inputs)
    eager = is_eager()
    set_eager(False)
    try:
        mark_step()  # parameters and inputs as values, captured or taken as inputs
        sync(*inputs)
        with no_grad():
            result = func(*inputs)
        outs, single = _tensors(fn, "the traced function's result", result)
        h = lib.lt_program_create(_seq(outs), len(outs), _seq(inputs), len(inputs))
        if not h:
            raise _failed(fn)
    finally:
        set_eager(eager)
    return TracedFunction(h, single)


def save(m, f):
    """torch.jit.save: m.save(f)."""
    if not isinstance(m, TracedFunction):
        raise TypeError("lazytensor.jit.save: expected a traced program (lazytensor.jit.trace), "
                        "got %s" % type(m).__name__)
    m.save(f)


def load(f, map_location=None, **kwargs):
    """torch.jit.load: a program from a file lt_program_save (TracedFunction.save,
    lazytensor-train --export) wrote, a path or a binary file object. One
    output is returned as a Tensor when called, several as a tuple."""
    if map_location is not None and str(map_location) not in ("cpu", "cpu:0"):
        raise ValueError("lazytensor.jit.load: map_location %r: lazytensor has the cpu device "
                         "only" % (map_location,))
    if hasattr(f, "read"):
        fd, tmp = tempfile.mkstemp(prefix=".lazytensor-jit-", suffix=".ltp")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(f.read())
            return load(tmp)
        finally:
            os.remove(tmp)
    path = os.fspath(f)
    h = lib.lt_program_load(os.fsencode(path))
    if not h:
        raise _failed("lazytensor.jit.load")
    return TracedFunction(h, True)


__all__ = ["trace", "save", "load", "TracedFunction"]
