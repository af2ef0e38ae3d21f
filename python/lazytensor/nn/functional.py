"""torch.nn.functional over the library's ops (lazytensor.h, lazytensor_nn.h).

    import lazytensor.nn.functional as F
    loss = F.cross_entropy(logits, target, label_smoothing=0.1)

Signatures and defaults are torch 1.13's. Arguments that change nothing in
the values (size_average / reduce of the old API are honoured as torch
honours them; inplace is accepted and ignored: a lazy op has no storage to
reuse) are accepted; options the library has no kernel for (a class weight in
the losses) raise NotImplementedError naming the function, instead of giving
different values.
"""
import ctypes

import numpy as np

from .. import _lib
from .._lib import lib
from ..tensor import _ESHAPE, BF16, F32, F64, LazyTensorError, _same_dtype, wrap

_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


def _reduction(fn, reduction, size_average=None, reduce=None):
    """torch's legacy size_average / reduce pair folded into a reduction, as
    torch._Reduction.legacy_get_string does; the library's enum value."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "none" if not reduce else "mean" if size_average else "sum"
    if reduction not in _REDUCTIONS:
        raise ValueError("%s: %r is not a valid value for reduction" % (fn, reduction))
    return _REDUCTIONS[reduction]


def _no_weight(fn, weight):
    if weight is not None:
        raise NotImplementedError("%s: a class weight is not supported by lazytensor" % fn)


def _opt(t):
    return t._ptr if t is not None else None


def _pair(v):
    """An {h, w} argument for the C API as (array, count): an int is one value
    for both axes (count 1), a sequence its entries (the library checks the
    count), None no array (count 0: the library's default)."""
    if v is None:
        return None, 0
    v = (v,) if isinstance(v, int) else tuple(v)
    return (ctypes.c_int64 * max(len(v), 1))(*v), len(v)


# ---- activations
def relu(input, inplace=False):
    return wrap(lib.lt_nn_relu(input._ptr))


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise ValueError("gelu: approximate must be 'none' or 'tanh', got %r" % (approximate,))
    fn = lib.lt_nn_gelu_tanh if approximate == "tanh" else lib.lt_nn_gelu
    return wrap(fn(input._ptr))


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def silu(input, inplace=False):
    return input * input.sigmoid()


def softmax(input, dim):
    return input.softmax(dim)


def log_softmax(input, dim):
    return input.log_softmax(dim)


def dropout(input, p=0.5, training=True, inplace=False):
    if not 0.0 <= p <= 1.0:
        raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
    return wrap(lib.lt_nn_dropout(input._ptr, p, training))


# ---- layers
def linear(input, weight, bias=None):
    """torch's F.linear: input @ weight.T + bias, weight [out, in] (torch's
    layout), bias [out] or None. A 2-d weight goes through the library's
    linear layer (lt_nn_linear_forward: the product and the bias in one op,
    rounded once in bf16, autocast as torch's) with weight.T as its [in, out]
    operand: a transposed view, which the cpu backend's matmul reads in place
    (no copy). nn.Linear's forward is this function."""
    if weight.ndim != 2:
        y = input @ weight
        return y + bias if bias is not None else y
    _same_dtype("linear", input, weight)  # torch: no promotion in a product
    if input.ndim < 1 or input.shape[-1] != weight.shape[1]:
        rows = int(np.prod(input.shape[:-1], dtype=np.int64)) if input.ndim > 1 else 1
        raise LazyTensorError("linear: mat1 and mat2 shapes cannot be multiplied (%dx%d and "
                              "%dx%d)" % (rows, input.shape[-1] if input.ndim else 1,
                                          weight.shape[1], weight.shape[0]), _ESHAPE)
    wt = weight.transpose(0, 1)
    s = _lib.Linear(wt._ptr, _opt(bias), weight.shape[1], weight.shape[0])
    # s borrows wt and bias: both stay referenced here until the call returns
    return wrap(lib.lt_nn_linear_forward(ctypes.byref(s), input._ptr))


def embedding(input, weight):
    return wrap(lib.lt_embedding(input._ptr, weight._ptr))


def one_hot(tensor, num_classes=-1):
    if num_classes < 0:
        num_classes = int(tensor.max().item()) + 1
    return tensor.one_hot(num_classes)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """PyTorch 2's F.scaled_dot_product_attention (torch 1.13 has none); no dropout."""
    if dropout_p:
        raise NotImplementedError("scaled_dot_product_attention: dropout_p > 0 is not supported")
    return wrap(lib.lt_scaled_dot_product_attention(
        query._ptr, key._ptr, value._ptr, _opt(attn_mask), is_causal,
        float("nan") if scale is None else float(scale)))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """NCHW; weight [O, C / groups, kh, kw]; padding an int or a pair."""
    if isinstance(padding, str):
        raise NotImplementedError("conv2d: string padding (%r) is not supported" % padding)
    _same_dtype("conv2d", input, weight)  # torch: "Input type (double) and bias type (float)"
    return wrap(lib.lt_conv2d_n(input._ptr, weight._ptr, _opt(bias), *_pair(stride),
                                *_pair(padding), *_pair(dilation), groups))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    _same_dtype("conv_transpose2d", input, weight)  # torch refuses mixed dtypes too
    return wrap(lib.lt_conv_transpose2d_n(input._ptr, weight._ptr, _opt(bias), *_pair(stride),
                                          *_pair(padding), *_pair(output_padding),
                                          *_pair(dilation), groups))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    if return_indices:
        raise NotImplementedError("max_pool2d: return_indices is not supported")
    return wrap(lib.lt_max_pool2d_n(input._ptr, *_pair(kernel_size), *_pair(stride),
                                    *_pair(padding), *_pair(dilation), ceil_mode))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return wrap(lib.lt_avg_pool2d_n(input._ptr, *_pair(kernel_size), *_pair(stride),
                                    *_pair(padding), ceil_mode, count_include_pad,
                                    divisor_override or 0))


def adaptive_avg_pool2d(input, output_size):
    return wrap(lib.lt_adaptive_avg_pool2d_n(input._ptr, *_pair(output_size)))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return wrap(lib.lt_batch_norm(input._ptr, _opt(running_mean), _opt(running_var), _opt(weight),
                                  _opt(bias), training, momentum, eps))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = (ctypes.c_int64 * len(normalized_shape))(*normalized_shape)
    return wrap(lib.lt_layer_norm(input._ptr, shape, len(normalized_shape), _opt(weight),
                                  _opt(bias), eps))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return wrap(lib.lt_group_norm(input._ptr, num_groups, _opt(weight), _opt(bias), eps))


# ---- losses
def _is_float(t):
    return t.dtype in (F32, F64, BF16)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Class indices (i32/i64 target) through lt_nn_cross_entropy_ex, with
    ignore_index and label smoothing as torch; class probabilities (a float
    target of input's shape) as torch: -sum(target' * log_softmax) over the
    class axis, target' = target (1 - ls) + ls / C, the mean over the batch."""
    _no_weight("cross_entropy", weight)
    red = _reduction("cross_entropy", reduction, size_average, reduce)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError("cross_entropy: label_smoothing must be between 0.0 and 1.0, got %s"
                         % label_smoothing)
    if _is_float(target):
        axis = 1 if input.ndim > 1 else 0
        c = input.shape[axis]
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / c
        loss = -(target * input.log_softmax(axis)).sum(axis)
        if red == 0:  # torch divides by the batch size (the elements of a loss row)
            return loss.sum() / float(max(loss.numel(), 1)) if loss.ndim else loss
        return loss.sum() if red == 1 else loss
    return wrap(lib.lt_nn_cross_entropy_ex(input._ptr, target._ptr, red, ignore_index,
                                           float(label_smoothing)))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    _no_weight("nll_loss", weight)
    red = _reduction("nll_loss", reduction, size_average, reduce)
    return wrap(lib.lt_nn_nll_loss(input._ptr, target._ptr, red, ignore_index))


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    red = _reduction("mse_loss", reduction, size_average, reduce)
    return wrap(lib.lt_nn_mse_loss(input._ptr, target._ptr, red))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    red = _reduction("l1_loss", reduction, size_average, reduce)
    d = (input - target).abs()
    return d.mean() if red == 0 else d.sum() if red == 1 else d


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """The library's stable form; weight (broadcast to input) scales each
    element's loss before the reduction, as torch."""
    red = _reduction("binary_cross_entropy_with_logits", reduction, size_average, reduce)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError("Target size (%s) must be the same as input size (%s)"
                         % (list(target.shape), list(input.shape)))
    if weight is None:
        return wrap(lib.lt_nn_bce_with_logits(input._ptr, target._ptr, _opt(pos_weight), red))
    loss = wrap(lib.lt_nn_bce_with_logits(input._ptr, target._ptr, _opt(pos_weight), 2)) * weight
    return loss.mean() if red == 0 else loss.sum() if red == 1 else loss


# ---- the library's own (no torch counterpart)
def accuracy(logits, labels):
    """Fraction of rows whose argmax equals the label (lt_nn_accuracy)."""
    return wrap(lib.lt_nn_accuracy(logits._ptr, labels._ptr))


__all__ = ["relu", "gelu", "tanh", "sigmoid", "silu", "softmax", "log_softmax", "dropout",
           "linear", "embedding", "one_hot", "scaled_dot_product_attention", "conv2d",
           "conv_transpose2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "batch_norm",
           "layer_norm", "group_norm", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
           "binary_cross_entropy_with_logits", "accuracy"]
