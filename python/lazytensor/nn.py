"""Layers, losses and optimizers over lazytensor_nn.h.

Linear's weight is [in, out], the transpose of torch's [out, in] (the
library's layout: its forward needs no transpose). Parameters are Tensors that
share the layer's lt_tensor (each holds its own reference).
"""
import ctypes

from . import _lib
from ._lib import lib
from .tensor import _CPU, F32, Tensor, _dtype_code, _seq, _scalar_for, check, wrap


def _param(ptr):
    return wrap(lib.lt_retain(ptr)) if ptr else None


class Module:
    training = True

    def parameters(self):
        out = []
        for v in self.__dict__.values():
            if isinstance(v, Module):
                out += v.parameters()
            elif isinstance(v, (list, tuple)):
                for m in v:
                    if isinstance(m, Module):
                        out += m.parameters()
        return out + list(getattr(self, "_params", []))

    def train(self, on=True):
        self.training = on
        for v in self.__dict__.values():
            if isinstance(v, Module):
                v.train(on)
            elif isinstance(v, (list, tuple)):
                for m in v:
                    if isinstance(m, Module):
                        m.train(on)
        return self

    def eval(self):
        return self.train(False)

    def __call__(self, *args):
        return self.forward(*args)


class Linear(Module):
    """y = x @ weight + bias; PyTorch's default init from the device's RNG (left
    pending: call lazytensor.mark_step() once the model is built)."""

    def __init__(self, in_features, out_features, bias=True, dtype=F32):
        self._l = _lib.Linear()
        check(lib.lt_nn_linear_init(ctypes.byref(self._l), _CPU, _dtype_code(dtype), in_features,
                                    out_features, bias))
        self.in_features, self.out_features = in_features, out_features
        self.weight = _param(self._l.weight)
        self.bias = _param(self._l.bias)
        self._params = [p for p in (self.weight, self.bias) if p is not None]

    def forward(self, x):
        return wrap(lib.lt_nn_linear_forward(ctypes.byref(self._l), x._ptr))

    def __del__(self):
        if getattr(self, "_l", None) is not None and lib is not None:
            lib.lt_nn_linear_free(ctypes.byref(self._l))
            self._l = None


class Embedding(Module):
    def __init__(self, num_embeddings, embedding_dim, dtype=F32):
        self._l = _lib.Embedding()
        check(lib.lt_nn_embedding_init(ctypes.byref(self._l), _CPU, _dtype_code(dtype),
                                       num_embeddings, embedding_dim))
        self.weight = _param(self._l.weight)
        self._params = [self.weight]

    def forward(self, idx):
        return wrap(lib.lt_nn_embedding_forward(ctypes.byref(self._l), idx._ptr))

    def __del__(self):
        if getattr(self, "_l", None) is not None and lib is not None:
            lib.lt_nn_embedding_free(ctypes.byref(self._l))
            self._l = None


class ReLU(Module):
    def forward(self, x):
        return wrap(lib.lt_nn_relu(x._ptr))


class GELU(Module):
    def __init__(self, approximate="none"):
        self._fn = lib.lt_nn_gelu_tanh if approximate == "tanh" else lib.lt_nn_gelu

    def forward(self, x):
        return wrap(self._fn(x._ptr))


class Dropout(Module):
    def __init__(self, p=0.5):
        self.p = p

    def forward(self, x):
        return wrap(lib.lt_nn_dropout(x._ptr, self.p, self.training))


class Sequential(Module):
    def __init__(self, *layers):
        self.layers = list(layers)

    def forward(self, x):
        for m in self.layers:
            x = m(x)
        return x

    def __getitem__(self, i):
        return self.layers[i]


# ---- functional
def relu(x):
    return wrap(lib.lt_nn_relu(x._ptr))


def cross_entropy(logits, labels):
    """Mean cross-entropy of logits [N, C] and integer labels [N]."""
    return wrap(lib.lt_nn_cross_entropy(logits._ptr, labels._ptr))


def accuracy(logits, labels):
    return wrap(lib.lt_nn_accuracy(logits._ptr, labels._ptr))


_REDUCTIONS = {"mean": 0, "sum": 1, "none": 2}


def mse_loss(input, target, reduction="mean"):
    return wrap(lib.lt_nn_mse_loss(input._ptr, target._ptr, _REDUCTIONS[reduction]))


def nll_loss(logp, target, reduction="mean", ignore_index=-100):
    return wrap(lib.lt_nn_nll_loss(logp._ptr, target._ptr, _REDUCTIONS[reduction], ignore_index))


def scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=False, scale=None):
    return wrap(lib.lt_scaled_dot_product_attention(
        q._ptr, k._ptr, v._ptr, attn_mask._ptr if attn_mask is not None else None, is_causal,
        float("nan") if scale is None else float(scale)))


def embedding(idx, weight):
    return wrap(lib.lt_embedding(idx._ptr, weight._ptr))


def dropout(x, p=0.5, training=True):
    return wrap(lib.lt_nn_dropout(x._ptr, p, training))


def _pair(v):
    """An {h, w} argument for the C API as (array, count): an int is one value
    for both axes (count 1), a sequence its entries (the library checks the
    count), None no array (count 0: the library's default)."""
    if v is None:
        return None, 0
    v = (v,) if isinstance(v, int) else tuple(v)
    return (ctypes.c_int64 * max(len(v), 1))(*v), len(v)


def _opt(t):
    return t._ptr if t is not None else None


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv2d (NCHW; weight [O, C / groups, kh, kw])."""
    return wrap(lib.lt_conv2d_n(x._ptr, weight._ptr, _opt(bias), *_pair(stride), *_pair(padding),
                                *_pair(dilation), groups))


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return wrap(lib.lt_conv_transpose2d_n(x._ptr, weight._ptr, _opt(bias), *_pair(stride),
                                          *_pair(padding), *_pair(output_padding),
                                          *_pair(dilation), groups))


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    return wrap(lib.lt_max_pool2d_n(x._ptr, *_pair(kernel_size), *_pair(stride), *_pair(padding),
                                    *_pair(dilation), ceil_mode))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return wrap(lib.lt_avg_pool2d_n(x._ptr, *_pair(kernel_size), *_pair(stride), *_pair(padding),
                                    ceil_mode, count_include_pad, divisor_override or 0))


def adaptive_avg_pool2d(x, output_size):
    return wrap(lib.lt_adaptive_avg_pool2d_n(x._ptr, *_pair(output_size)))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return wrap(lib.lt_batch_norm(x._ptr, _opt(running_mean), _opt(running_var), _opt(weight),
                                  _opt(bias), training, momentum, eps))


def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    shape = (ctypes.c_int64 * len(normalized_shape))(*normalized_shape)
    return wrap(lib.lt_layer_norm(x._ptr, shape, len(normalized_shape), _opt(weight), _opt(bias),
                                  eps))


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    return wrap(lib.lt_group_norm(x._ptr, num_groups, _opt(weight), _opt(bias), eps))


def clip_grad_norm_(params, max_norm, norm_type=2.0):
    """Scales the grads in place (lazily); returns the total norm as a Tensor."""
    params = list(params)
    out = _lib.c_tensor()
    check(lib.lt_nn_clip_grad_norm(_seq(params), len(params), max_norm, norm_type,
                                   ctypes.byref(out)))
    return wrap(out.value)


def save(path, tensors):
    tensors = list(tensors)
    check(lib.lt_nn_params_save(_seq(tensors), len(tensors), path.encode()))


def load(path, tensors):
    tensors = list(tensors)
    check(lib.lt_nn_params_load(_seq(tensors), len(tensors), path.encode()))


# ---- optimizers
class Optimizer:
    """Lazy in-place updates of the parameters from their grads (the library's
    optimizer); step() also drops the grads, as the C API does."""

    _kind = 0

    def __init__(self, params, **cfg):
        self.params = list(params)
        c = lib.lt_nn_optim_defaults(self._kind)
        for k, v in cfg.items():
            if v is not None:
                setattr(c, k, v)
        self._o = lib.lt_nn_optim_create(ctypes.byref(c), _seq(self.params), len(self.params))
        if not self._o:
            check(-1)
        self._lr = c.lr

    def step(self):
        check(lib.lt_nn_optim_step(self._o))

    def zero_grad(self):
        for p in self.params:
            p.zero_grad()

    @property
    def lr(self):
        return self._lr

    @lr.setter
    def lr(self, value):
        check(lib.lt_nn_optim_set_lr(self._o, float(value)))
        self._lr = float(value)

    def set_param_weight_decay(self, i, weight_decay):
        check(lib.lt_nn_optim_set_param_weight_decay(self._o, i, float(weight_decay)))

    @property
    def steps(self):
        return lib.lt_nn_optim_steps(self._o)

    def __del__(self):
        if getattr(self, "_o", None) and lib is not None:
            lib.lt_nn_optim_free(self._o)
            self._o = None


class SGD(Optimizer):
    _kind = 0

    def __init__(self, params, lr=0.01, momentum=0.0, nesterov=False, weight_decay=0.0):
        super().__init__(params, lr=lr, momentum=momentum, nesterov=nesterov,
                         weight_decay=weight_decay)


class Adam(Optimizer):
    _kind = 1

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr=lr, beta1=betas[0], beta2=betas[1], eps=eps,
                         weight_decay=weight_decay)


class AdamW(Optimizer):
    _kind = 2

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr=lr, beta1=betas[0], beta2=betas[1], eps=eps,
                         weight_decay=weight_decay)


__all__ = ["Module", "Linear", "Embedding", "ReLU", "GELU", "Dropout", "Sequential", "relu",
           "cross_entropy", "accuracy", "mse_loss", "nll_loss", "scaled_dot_product_attention",
           "embedding", "dropout", "conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d",
           "adaptive_avg_pool2d", "batch_norm", "layer_norm", "group_norm", "clip_grad_norm_", "save", "load", "Optimizer", "SGD", "Adam",
           "AdamW", "Tensor", "_scalar_for"]
