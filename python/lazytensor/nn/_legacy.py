"""The earlier lazytensor.nn's library optimizers and parameter files, kept
for the code written against them: nn.SGD / nn.Adam / nn.AdamW step as the C
API does (lt_nn_optim_step: the grads are dropped after the update; the rate
is the lr property), nn.save / nn.load write and read lists of tensors.
torch-style optimizers (param_groups, grads kept, state_dict) are
lazytensor.optim's."""
import ctypes

from .._lib import lib
from ..tensor import _seq, check


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
