"""torch.nn's Module and layers over lazytensor_nn.h.

Module registers Parameters, buffers and submodules assigned as attributes,
as torch does, and gives parameters() / named_parameters() / state_dict() /
load_state_dict() / train() / eval() / zero_grad() over them. The layers are
torch 1.13's (constructor arguments, defaults, inits, forward), built on the
library's layers: the library draws their initial values (pending: run
lazytensor.mark_step() once the model is built) and computes their forward,
so a model matches lazytensor-train's layer for layer.

Linear.weight is torch's [out_features, in_features] (the library's own
layer keeps [in, out]; F.linear hands it a transposed view, which costs no
copy), so a torch state_dict loads as it is.

The C layer structs keep borrowed pointers: the Python Parameters own the
tensors (they adopted the init's references), and each forward points the
struct at the module's current attributes, so `layer.weight = Parameter(w)`
takes effect as in torch.
"""
import ctypes
from collections import OrderedDict, namedtuple

import numpy as np

from .. import _lib
from .._lib import lib
from ..tensor import (_CPU, F32, I64, Tensor, _dtype_code, _same_dtype, check, from_numpy, tensor,
                      wrap)
from . import functional as F
from .utils import zero_grad_


class Parameter(Tensor):
    """torch.nn.Parameter: a leaf Tensor that requires grad and that a Module
    registers as a parameter when it is assigned to an attribute."""

    __slots__ = ()

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = from_numpy(np.zeros((0,), np.float32))
        elif not isinstance(data, Tensor):
            data = tensor(data)  # torch.tensor's dtypes (Python floats: float32)
        # a leaf of its own (torch: Parameter(x) of a computed x is a leaf)
        p = cls._adopt(lib.lt_detach(data._ptr))
        p.requires_grad = requires_grad
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # Tensor.__init__ would make another tensor

    @classmethod
    def _adopt(cls, ptr):
        """A Parameter owning the reference ptr (a layer's init gave it)."""
        if not ptr:
            wrap(ptr)  # raises the library's error
        p = object.__new__(cls)
        p._ptr = ptr
        return p

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)


def _adopt(ptr):
    return Parameter._adopt(ptr) if ptr else None


def _adopt_affine(module, s):
    """The C layer's weight and bias (either may be NULL) as the module's
    parameters, registered as None where the layer has none, as torch."""
    for name in ("weight", "bias"):
        ptr = getattr(s, name)
        if ptr:
            setattr(module, name, _adopt(ptr))
        else:
            module.register_parameter(name, None)


def _sync_affine(module, s):
    """Points the C struct at the module's current weight and bias (a
    parameter may have been replaced since the last call)."""
    s.weight = module.weight._ptr if module.weight is not None else None
    s.bias = module.bias._ptr if module.bias is not None else None


def _device_ok(fn, device):
    if device is not None and str(device) not in ("cpu", "cpu:0"):
        raise ValueError("%s: lazytensor runs on the cpu device only, got %r" % (fn, device))


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _as_tensor(v):
    """A value of a state_dict as a Tensor: a Tensor, or anything numpy reads
    (numpy arrays, torch tensors through __array__, numbers)."""
    return v if isinstance(v, Tensor) else from_numpy(np.asarray(v))


class Module:
    """torch.nn.Module: subclasses call super().__init__() and define forward."""

    training = True

    def __init__(self):
        d = self.__dict__
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()
        d["training"] = True

    # ---- registration by attribute
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:  # a subclass that skipped Module.__init__
            Module.__init__(self)
        params, bufs, mods = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            self._drop(name)
            params[name] = value
        elif isinstance(value, Module):
            self._drop(name)
            mods[name] = value
        elif name in params:
            if value is not None:
                raise TypeError("cannot assign '%s' as parameter '%s' (lazytensor.nn.Parameter or "
                                "None expected)" % (type(value).__name__, name))
            params[name] = None
        elif name in bufs:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError("cannot assign '%s' as buffer '%s' (lazytensor.Tensor or None "
                                "expected)" % (type(value).__name__, name))
            bufs[name] = value
        elif name in mods:
            if value is not None:
                raise TypeError("cannot assign '%s' as child module '%s' (lazytensor.nn.Module "
                                "or None expected)" % (type(value).__name__, name))
            mods[name] = None
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name):
        d = self.__dict__
        d.pop(name, None)
        for k in ("_parameters", "_buffers", "_modules"):
            d[k].pop(name, None)
        d["_non_persistent"].discard(name)

    def __getattr__(self, name):  # only for names not found the usual way
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                return d[k][name]
        raise AttributeError("'%s' object has no attribute '%s'" % (type(self).__name__, name))

    def __delattr__(self, name):
        d = self.__dict__
        for k in ("_parameters", "_buffers", "_modules"):
            if k in d and name in d[k]:
                del d[k][name]
                d["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def register_parameter(self, name, param):
        if param is not None and not isinstance(param, Parameter):
            raise TypeError("cannot assign '%s' object to parameter '%s' (lazytensor.nn.Parameter "
                            "or None required)" % (type(param).__name__, name))
        if "_parameters" not in self.__dict__:
            Module.__init__(self)
        self._drop(name)
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError("cannot assign '%s' object to buffer '%s' (lazytensor.Tensor or None "
                            "required)" % (type(tensor).__name__, name))
        if "_parameters" not in self.__dict__:
            Module.__init__(self)
        self._drop(name)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError("%s is not a Module subclass" % type(module).__name__)
        if "_parameters" not in self.__dict__:
            Module.__init__(self)
        self._drop(name)
        self._modules[name] = module

    register_module = add_module

    # ---- traversal
    def named_children(self):
        seen = set()
        for name, m in self.__dict__.get("_modules", {}).items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate and id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, m in self.__dict__.get("_modules", {}).items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def _named_members(self, attr, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in m.__dict__.get(attr, {}).items():
                if v is None or id(v) in seen:
                    continue
                seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True):
        return self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        """The parameters in registration order, each once: a list (torch gives
        an iterator; a list serves every use of one, and the earlier
        lazytensor.nn returned a list)."""
        return [p for _, p in self.named_parameters(recurse=recurse)]

    def named_buffers(self, prefix="", recurse=True):
        return self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        return [b for _, b in self.named_buffers(recurse=recurse)]

    # ---- modes and grads
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad = requires_grad
        return self

    def zero_grad(self, set_to_none=False):
        """torch 1.13: each existing grad is zeroed in place (lazily), or
        dropped with set_to_none=True."""
        for p in self.parameters():
            zero_grad_(p, set_to_none)

    def apply(self, fn):
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    def to(self, *args, **kwargs):
        """Only the cpu device and the parameters' own dtype (nothing moves)."""
        for a in list(args) + list(kwargs.values()):
            if a is None or str(a) in ("cpu", "cpu:0"):
                continue
            code = None
            try:
                code = _dtype_code(a)
            except TypeError:
                pass
            if code is None or any(p.dtype != code for p in self.parameters()):
                raise NotImplementedError("Module.to(%r): lazytensor modules stay on the cpu in "
                                          "their dtype" % (a,))
        return self

    def cpu(self):
        return self

    def float(self):
        return self.to(F32)

    # ---- state
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Name -> Tensor, as torch. The tensors are detached values as of this
        call (torch's share storage and follow later updates; a lazy value is
        a snapshot: later steps do not change it)."""
        if destination is None:
            destination = OrderedDict()
        # every path to a module, as torch: a module held twice is saved twice
        for mprefix, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            m._save_to_state_dict(destination, mprefix + "." if mprefix else "", keep_vars)
        return destination

    def _state_entries(self, prefix):
        """(key, tensor) this module itself loads, for _load_from_state_dict."""
        out = [(prefix + n, p) for n, p in self._parameters.items() if p is not None]
        out += [(prefix + n, b) for n, b in self._buffers.items()
                if b is not None and n not in self._non_persistent]
        return out

    def _load_from_state_dict(self, state_dict, prefix, missing, errors):
        for key, t in self._state_entries(prefix):
            if key not in state_dict:
                missing.append(key)
                continue
            src = _as_tensor(state_dict[key])
            if tuple(src.shape) != tuple(t.shape):
                errors.append("size mismatch for %s: copying a param with shape %s from "
                              "checkpoint, the shape in current model is %s."
                              % (key, list(src.shape), list(t.shape)))
                continue
            check(lib.lt_assign(t._ptr, src._ptr))  # lazy: the next step barrier runs it

    def _expected_keys(self, prefix):
        return [k for k, _ in self._state_entries(prefix)]

    def load_state_dict(self, state_dict, strict=True):
        """Assigns the values (lazily, with the next step barrier) after
        checking every key and shape, as torch; numpy arrays and torch
        tensors are accepted as values."""
        missing, errors, expected = [], [], set()
        paths = list(self.named_modules(remove_duplicate=False))
        for mprefix, m in paths:
            p = mprefix + "." if mprefix else ""
            expected.update(m._expected_keys(p))
        unexpected = [k for k in state_dict if k not in expected]
        if strict and unexpected:
            errors.insert(0, "Unexpected key(s) in state_dict: %s. "
                          % ", ".join('"%s"' % k for k in unexpected))
        checks = []
        for mprefix, m in paths:
            m._load_from_state_dict(state_dict, mprefix + "." if mprefix else "", missing, checks)
        errors += checks
        if strict and missing:
            errors.insert(0, "Missing key(s) in state_dict: %s. "
                          % ", ".join('"%s"' % k for k in missing))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for %s:\n\t%s"
                               % (type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)

    # ---- calling
    def forward(self, *args, **kwargs):
        raise NotImplementedError('Module [%s] is missing the required "forward" function'
                                  % type(self).__name__)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = []
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append("(%s): %s" % (name, sub))
        head = type(self).__name__ + "(" + self.extra_repr()
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"

    def __dir__(self):
        d = self.__dict__
        extra = [k for a in ("_parameters", "_buffers", "_modules") for k in d.get(a, {})]
        return sorted(set(object.__dir__(self)) | set(extra))


# ---- containers
class Sequential(Module):
    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for name, m in args[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return mods[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    @property
    def layers(self):
        """The modules in order (the earlier lazytensor.nn's attribute)."""
        return list(self._modules.values())


class ModuleList(Module):
    def __init__(self, modules=None):
        super().__init__()
        for m in modules or ():
            self.append(m)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return ModuleList(list(self._modules.values())[i])
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k):
        return self._modules[k]

    def __setitem__(self, k, m):
        self.add_module(k, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, k):
        return k in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


# ---- layers over the library's structs
class Linear(Module):
    """torch.nn.Linear: y = x @ weight.T + bias, weight [out_features,
    in_features] as torch's, so torch state_dicts load as they are. Init as
    torch's: kaiming_uniform_(a=sqrt(5)) for the weight, which is
    U(-1/sqrt(in), 1/sqrt(in)), and the same bound for the bias."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _device_ok("Linear", device)
        s = _lib.Linear()
        check(lib.lt_nn_linear_init(ctypes.byref(s), _CPU, _dtype_code(dtype or F32), in_features,
                                    out_features, bool(bias)))
        self.in_features, self.out_features = in_features, out_features
        # The library draws weight [in, out] (its layout); the parameter is
        # its transpose, a pending op of the same draws, so the values are
        # lazytensor-train's layer for layer, in torch's layout.
        drawn = wrap(s.weight)
        self.weight = Parameter(drawn.transpose(0, 1))
        if s.bias:
            self.bias = _adopt(s.bias)
        else:
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return "in_features=%d, out_features=%d, bias=%s" % (self.in_features, self.out_features,
                                                             self.bias is not None)


def _two(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class Conv2d(Module):
    """torch.nn.Conv2d (zeros padding; padding an int, a pair, 'valid', or
    'same' for stride 1), weight [out, in / groups, kh, kw] as torch's."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        _device_ok("Conv2d", device)
        if padding_mode != "zeros":
            raise NotImplementedError("Conv2d: padding_mode %r is not supported (zeros only)"
                                      % padding_mode)
        k, st, dl = _two(kernel_size), _two(stride), _two(dilation)
        if padding == "valid":
            padding = 0
        elif padding == "same":
            if st != (1, 1):
                raise ValueError("padding='same' is not supported for strided convolutions")
            if any(d * (kk - 1) % 2 for d, kk in zip(dl, k)):
                raise NotImplementedError("Conv2d: padding='same' with an even receptive field "
                                          "is not supported")
            padding = tuple(d * (kk - 1) // 2 for d, kk in zip(dl, k))
        pd = _two(padding)
        arr = lambda v: (ctypes.c_int64 * 2)(*v)  # noqa: E731
        s = _lib.Conv2d()
        check(lib.lt_nn_conv2d_init_n(ctypes.byref(s), _CPU, _dtype_code(dtype or F32),
                                      in_channels, out_channels, arr(k), 2, arr(st), 2, arr(pd), 2,
                                      arr(dl), 2, groups, bool(bias)))
        self.__dict__["_s"] = s
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding, self.dilation = k, st, pd, dl
        self.padding_mode = padding_mode
        _adopt_affine(self, s)

    def forward(self, input):
        s = self._s
        _sync_affine(self, s)
        _same_dtype("conv2d", input, self.weight)  # torch: "Input type (double) and bias ..."
        return wrap(lib.lt_nn_conv2d_forward(ctypes.byref(s), input._ptr))

    def extra_repr(self):
        return "%d, %d, kernel_size=%s, stride=%s, padding=%s" % (
            self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding)


class BatchNorm2d(Module):
    """torch.nn.BatchNorm2d: batch statistics in training (the running ones
    updated in place with the step's graph), the running ones in eval mode.
    momentum=None (a cumulative average) is not supported."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        _device_ok("BatchNorm2d", device)
        if momentum is None:
            raise NotImplementedError("BatchNorm2d: momentum=None (cumulative average) is not "
                                      "supported")
        s = _lib.BatchNorm2d()
        check(lib.lt_nn_batchnorm2d_init(ctypes.byref(s), _CPU, _dtype_code(dtype or F32),
                                         num_features, bool(affine)))
        self.__dict__["_s"] = s
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _adopt_affine(self, s)
        # buffers: plain Tensors owning the init's references (no gradient)
        mean, var = wrap(s.running_mean), wrap(s.running_var)
        self.register_buffer("running_mean", mean if track_running_stats else None)
        self.register_buffer("running_var", var if track_running_stats else None)
        self.__dict__["_batches"] = 0  # torch's num_batches_tracked, kept on the host

    @property
    def num_batches_tracked(self):
        return tensor(self._batches, dtype=I64)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        Module._save_to_state_dict(self, destination, prefix, keep_vars)
        if self.track_running_stats:
            destination[prefix + "num_batches_tracked"] = self.num_batches_tracked

    def _expected_keys(self, prefix):
        keys = Module._expected_keys(self, prefix)
        return keys + [prefix + "num_batches_tracked"] if self.track_running_stats else keys

    def _load_from_state_dict(self, state_dict, prefix, missing, errors):
        Module._load_from_state_dict(self, state_dict, prefix, missing, errors)
        if self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key in state_dict:  # torch accepts older files without it
                self.__dict__["_batches"] = int(np.asarray(_as_tensor(state_dict[key])))

    def forward(self, input):
        if input.ndim != 4:
            raise ValueError("expected 4D input (got %dD input)" % input.ndim)
        if not self.track_running_stats:
            return F.batch_norm(input, None, None, self.weight, self.bias, True, self.momentum,
                                self.eps)
        s = self._s
        _sync_affine(self, s)
        s.running_mean, s.running_var = self.running_mean._ptr, self.running_var._ptr
        s.momentum, s.eps = float(self.momentum), float(self.eps)
        if self.training:
            self.__dict__["_batches"] += 1
        return wrap(lib.lt_nn_batchnorm2d_forward(ctypes.byref(s), input._ptr, self.training))

    def extra_repr(self):
        return "%d, eps=%g, momentum=%g, affine=%s, track_running_stats=%s" % (
            self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats)


class LayerNorm(Module):
    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        _device_ok("LayerNorm", device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(
            normalized_shape)
        s = _lib.LayerNorm()
        check(lib.lt_nn_layernorm_init(ctypes.byref(s), _CPU, _dtype_code(dtype or F32),
                                       (ctypes.c_int64 * len(shape))(*shape), len(shape),
                                       bool(elementwise_affine)))
        self.__dict__["_s"] = s
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        _adopt_affine(self, s)

    def forward(self, input):
        s = self._s
        _sync_affine(self, s)
        s.eps = float(self.eps)
        return wrap(lib.lt_nn_layernorm_forward(ctypes.byref(s), input._ptr))

    def extra_repr(self):
        return "%s, eps=%g, elementwise_affine=%s" % (self.normalized_shape, self.eps,
                                                      self.elementwise_affine)


class Embedding(Module):
    """torch.nn.Embedding: weight [num, dim] ~ N(0, 1); padding_idx's row is
    zero at init and gets no gradient (masked in the forward)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 device=None, dtype=None):
        super().__init__()
        _device_ok("Embedding", device)
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is not None:
            self.weight = Parameter(_weight)
        else:
            s = _lib.Embedding()
            check(lib.lt_nn_embedding_init(ctypes.byref(s), _CPU, _dtype_code(dtype or F32),
                                           num_embeddings, embedding_dim))
            self.weight = _adopt(s.weight)
        self._mask = None
        if padding_idx is not None:
            keep = np.ones((num_embeddings, 1), np.float32)
            keep[padding_idx] = 0
            self._mask = from_numpy(keep).to(self.weight.dtype)
            if _weight is None:  # torch zeroes the row at init (lt_assign: no autograd rule)
                masked = self.weight * self._mask
                check(lib.lt_assign(self.weight._ptr, masked._ptr))

    def forward(self, input):
        w = self.weight if self._mask is None else self.weight * self._mask
        return F.embedding(input, w)

    def extra_repr(self):
        return "%d, %d" % (self.num_embeddings, self.embedding_dim)


# ---- layers without state
class _Fn(Module):
    def extra_repr(self):
        return ""


class ReLU(_Fn):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.relu(input)


class GELU(_Fn):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)


class Tanh(_Fn):
    def forward(self, input):
        return input.tanh()


class Sigmoid(_Fn):
    def forward(self, input):
        return input.sigmoid()


class SiLU(_Fn):
    def __init__(self, inplace=False):
        super().__init__()

    def forward(self, input):
        return F.silu(input)


class Softmax(_Fn):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return input.softmax(self.dim if self.dim is not None else -1)


class LogSoftmax(Softmax):
    def forward(self, input):
        return input.log_softmax(self.dim if self.dim is not None else -1)


class Identity(_Fn):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Flatten(_Fn):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)


class Dropout(_Fn):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError("dropout probability has to be between 0 and 1, but got %s" % p)
        self.p = p

    def forward(self, input):
        return F.dropout(input, self.p, self.training)

    def extra_repr(self):
        return "p=%s" % self.p


class MaxPool2d(_Fn):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        if return_indices:
            raise NotImplementedError("MaxPool2d: return_indices is not supported")
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.dilation, self.ceil_mode = dilation, ceil_mode

    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)

    def extra_repr(self):
        return "kernel_size=%s, stride=%s, padding=%s" % (self.kernel_size, self.stride,
                                                          self.padding)


class AvgPool2d(_Fn):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride or kernel_size, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool2d(_Fn):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, input):
        return F.adaptive_avg_pool2d(input, self.output_size)


# ---- losses
class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        if size_average is not None or reduce is not None:
            reduction = ("none" if reduce is False else
                         "sum" if size_average is False else "mean")
        self.reduction = reduction


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(size_average, reduce, reduction)
        F._no_weight("CrossEntropyLoss", weight)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(size_average, reduce, reduction)
        F._no_weight("NLLLoss", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "Conv2d",
           "BatchNorm2d", "LayerNorm", "Embedding", "ReLU", "GELU", "Tanh", "Sigmoid", "SiLU",
           "Softmax", "LogSoftmax", "Identity", "Flatten", "Dropout", "MaxPool2d", "AvgPool2d",
           "AdaptiveAvgPool2d", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
           "BCEWithLogitsLoss"]
