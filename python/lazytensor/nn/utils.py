"""torch.nn.utils: gradient clipping; and the grad zeroing that Module and
the optimizers share."""
import ctypes
import math

from .. import _lib
from .._lib import lib
from ..tensor import Tensor, _scalar_for, _seq, check, wrap


def zero_grad_(p, set_to_none=False):
    """torch 1.13's zero_grad for one parameter: a grad that exists is zeroed
    in place (lazily: an lt_assign of 0, so that p.grad stays a tensor and
    the next backward adds to it), or dropped with set_to_none=True. A
    parameter without a grad keeps none."""
    g = lib.lt_grad(p._ptr)
    if not g:
        return
    if set_to_none:
        check(lib.lt_zero_grad(p._ptr))
        return
    zero = _scalar_for(p, 0.0)  # held across the call: the library borrows it
    check(lib.lt_assign(g, zero._ptr))


def _params(parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    return list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales the grads in place (lazily, lt_nn_clip_grad_norm) by
    min(max_norm / (norm + 1e-6), 1); returns the total norm, a 0-d Tensor.
    error_if_nonfinite reads the norm (one graph runs) to raise as torch."""
    params = _params(parameters)  # the library skips those without a grad
    norm_type = float(norm_type)
    out = _lib.c_tensor()
    check(lib.lt_nn_clip_grad_norm(_seq(params), len(params), float(max_norm), norm_type,
                                   ctypes.byref(out)))
    total = wrap(out.value)
    if error_if_nonfinite and not math.isfinite(total.item()):
        raise RuntimeError("The total norm of order %s for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped. To disable this error and scale "
                           "the gradients by the non-finite norm anyway, set "
                           "`error_if_nonfinite=False`" % norm_type)
    return total


def clip_grad_value_(parameters, clip_value):
    """Clamps each grad to [-clip_value, clip_value] in place (lazily)."""
    c = float(clip_value)
    for p in _params(parameters):
        g = lib.lt_grad(p._ptr)
        if g:
            clamped = wrap(lib.lt_clamp(g, -c, c))
            check(lib.lt_assign(g, clamped._ptr))


__all__ = ["clip_grad_norm_", "clip_grad_value_"]
