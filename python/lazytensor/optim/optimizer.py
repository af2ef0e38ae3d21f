"""torch.optim for lazytensor: SGD, Adam and AdamW with torch 1.13's
arguments, parameter groups, update rules and state_dict.

    import lazytensor.optim as optim
    opt = optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    opt.zero_grad(); loss.backward(); opt.step(); lazytensor.mark_step()

Each parameter group is one library optimizer (lt_nn_optim): step() traces
its lazy in-place updates from the parameters' grads, which it leaves in
place as torch does (lt_nn_optim_step_grads; the earlier lazytensor.nn.SGD
and friends drop them). A group's lr and weight_decay may be changed between
steps through param_groups, as torch schedulers do; both enter the step's
graph as data, so changing them does not recompile. A change of the other
hyper-parameters (momentum, betas, eps) rebuilds the group's optimizer with
its state carried over.

state_dict() / load_state_dict() have torch's layout ({"state": {index:
{...}}, "param_groups": [...]}, the same keys and per-parameter entries:
step, exp_avg, exp_avg_sq for Adam/AdamW, momentum_buffer for SGD) and go
through the library's checkpoint format (lt_nn_checkpoint_save / _load, the
OPTM section of lazytensor_nn.h), so the values are the library's own. The
state tensors of state_dict() are copies as of the call.
"""
import ctypes
import os
import struct
import tempfile

import numpy as np

from .. import _lib
from .._lib import lib
from ..nn.utils import zero_grad_
from ..tensor import F32, F64, Tensor, _dtype_code, check, from_numpy, tensor

_SGD, _ADAM, _ADAMW = 0, 1, 2
_NP = {F32: np.float32, F64: np.float64}


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


# ---- the library's checkpoint file, OPTM section only (layout: lazytensor_nn.h)
def _fnv1a(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def _read_optm(data):
    """(cfg dict, steps, [(pstep, [arrays])]) of a file lt_nn_checkpoint_save
    wrote with no tensors and one optimizer."""
    if data[:8] != b"LTPARAMS":
        raise ValueError("not a lazytensor checkpoint")
    _ver, count = struct.unpack_from("<II", data, 8)
    if count != 0:
        raise ValueError("unexpected tensors in the optimizer's checkpoint")
    (nsec,), pos = struct.unpack_from("<I", data, 16), 20
    for _ in range(nsec):
        tag = data[pos:pos + 4]
        _sver, size = struct.unpack_from("<IQ", data, pos + 4)
        pos += 16
        if tag == b"OPTM":
            break
        pos += size
    else:
        raise ValueError("no optimizer section in the checkpoint")
    kind, n, nstate, nesterov = struct.unpack_from("<4I", data, pos)
    lr, momentum, wd, b1, b2, eps = struct.unpack_from("<6d", data, pos + 16)
    (steps,) = struct.unpack_from("<q", data, pos + 64)
    pos += 72
    per = []
    for _ in range(n):
        dt, nd = struct.unpack_from("<II", data, pos)
        shape = struct.unpack_from("<%dq" % nd, data, pos + 8)
        (pstep,) = struct.unpack_from("<q", data, pos + 8 + 8 * nd)
        pos += 16 + 8 * nd
        npdt = np.dtype(_NP[dt])
        nbytes = int(np.prod(shape, dtype=np.int64)) * npdt.itemsize
        arrays = []
        for _ in range(nstate):
            arrays.append(np.frombuffer(data, npdt, nbytes // npdt.itemsize, pos)
                          .reshape(shape).copy())
            pos += nbytes
        per.append((pstep, arrays))
    cfg = dict(kind=kind, lr=lr, momentum=momentum, nesterov=bool(nesterov), weight_decay=wd,
               beta1=b1, beta2=b2, eps=eps)
    return cfg, steps, per


def _write_optm(cfg, steps, params, per, nstate):
    """The bytes of a checkpoint with no tensors and this optimizer state."""
    out = [struct.pack("<4I", cfg["kind"], len(params), nstate, int(cfg["nesterov"])),
           struct.pack("<6d", cfg["lr"], cfg["momentum"], cfg["weight_decay"], cfg["beta1"],
                       cfg["beta2"], cfg["eps"]),
           struct.pack("<q", steps)]
    for p, (pstep, arrays) in zip(params, per):
        shape = p.shape
        out.append(struct.pack("<II", _dtype_code(p.dtype), len(shape)))
        out.append(struct.pack("<%dq" % len(shape), *shape))
        out.append(struct.pack("<q", pstep))
        for a in arrays[:nstate]:
            out.append(np.ascontiguousarray(a, dtype=_NP[p.dtype]).tobytes())
    payload = b"".join(out)
    body = (b"LTPARAMS" + struct.pack("<II", 2, 0) + struct.pack("<I", 1) + b"OPTM" +
            struct.pack("<IQ", 1, len(payload)) + payload)
    return body + struct.pack("<Q", _fnv1a(body))


class _TempFile:
    def __enter__(self):
        fd, self.path = tempfile.mkstemp(prefix="lazytensor-optim-", suffix=".ckpt")
        os.close(fd)
        return self.path

    def __exit__(self, *exc):
        try:
            os.remove(self.path)
        except OSError:
            pass
        return False


def _handle_save(handle):
    with _TempFile() as path:
        check(lib.lt_nn_checkpoint_save(None, 0, handle, path.encode()))
        with open(path, "rb") as f:
            return _read_optm(f.read())


def _handle_load(handle, data):
    with _TempFile() as path:
        with open(path, "wb") as f:
            f.write(data)
        check(lib.lt_nn_checkpoint_load(None, 0, handle, path.encode()))


# ---- optimizers
class Optimizer:
    """torch.optim.Optimizer over the library's optimizers; subclasses give
    the kind, the defaults, the checks and the state's names."""

    _kind = _SGD
    _state_names = ()

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.param_groups = []
        self._handles, self._applied, self._own_wd = [], [], []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    # ---- groups
    def add_param_group(self, param_group):
        group = dict(param_group)
        ps = group["params"]
        if isinstance(ps, Tensor):
            ps = [ps]
        elif isinstance(ps, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        group["params"] = list(ps)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 "optimization parameter " + name)
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]) or \
                len({id(p) for p in group["params"]}) != len(group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self._check(group)
        cfg = self._cfg(group)
        self.param_groups.append(group)
        self._handles.append(self._create(cfg, group["params"]))
        self._applied.append(cfg)
        self._own_wd.append(False)

    def _create(self, cfg, params):
        c = lib.lt_nn_optim_defaults(cfg["kind"])
        for k, v in cfg.items():
            setattr(c, k, v)
        seq = (_lib.c_tensor * len(params))(*[p._ptr for p in params])
        h = lib.lt_nn_optim_create(ctypes.byref(c), seq, len(params))
        if not h:
            check(-1)
        return h

    def _cfg(self, group):
        """The group's lt_nn_optim_config fields."""
        raise NotImplementedError

    def _check(self, group):
        pass

    def _sync(self, i):
        """Brings group i's library optimizer to the group's values: lr and
        weight decay as data (no recompilation), the rest by a rebuild."""
        group, have = self.param_groups[i], self._applied[i]
        self._check(group)
        want = self._cfg(group)
        if want == have:
            return
        other = [k for k in want if k not in ("lr", "weight_decay") and want[k] != have[k]]
        if other:
            self._install(i, want, self._group_state(i))
            return
        h = self._handles[i]
        if want["lr"] != have["lr"]:
            check(lib.lt_nn_optim_set_lr(h, want["lr"]))
        if want["weight_decay"] != have["weight_decay"] or self._own_wd[i]:
            for k in range(len(group["params"])):
                check(lib.lt_nn_optim_set_param_weight_decay(h, k, want["weight_decay"]))
            self._own_wd[i] = True
        self._applied[i] = want

    # ---- steps
    def zero_grad(self, set_to_none=False):
        """torch 1.13's default: each existing grad zeroed in place (lazily),
        set_to_none=True drops them."""
        for group in self.param_groups:
            for p in group["params"]:
                zero_grad_(p, set_to_none)

    def step(self, closure=None):
        """Traces the update of every parameter that has a grad (the others are
        skipped, as torch); nothing runs before the caller's step barrier."""
        loss = closure() if closure is not None else None
        for i, group in enumerate(self.param_groups):
            self._sync(i)
            ps = group["params"]
            grads = (_lib.c_tensor * len(ps))(*[lib.lt_grad(p._ptr) or None for p in ps])
            check(lib.lt_nn_optim_step_grads(self._handles[i], grads))
        return loss

    # ---- state
    def _group_state(self, i):
        """Group i's per-parameter state in torch's names: [(step, {name:
        array})], step 0 for a parameter never updated."""
        cfg, _steps, per = _handle_save(self._handles[i])
        return [(pstep, dict(zip(self._names(cfg), arrays))) for pstep, arrays in per]

    def _names(self, cfg):
        if cfg["kind"] == _SGD:
            return ("momentum_buffer",) if cfg["momentum"] != 0 else ()
        return ("exp_avg", "exp_avg_sq")

    def _install(self, i, cfg, per):
        """A new library optimizer for group i with config cfg and the given
        state (missing entries are zeros, as a fresh optimizer's)."""
        params = self.param_groups[i]["params"]
        handle = self._create(cfg, params)
        names = self._names(cfg)
        rows = []
        for p, (pstep, st) in zip(params, per):
            arrays = [np.asarray(st[n], dtype=_NP[p.dtype]) if st.get(n) is not None
                      else np.zeros(p.shape, _NP[p.dtype]) for n in names]
            for n, a in zip(names, arrays):
                if a.shape != tuple(p.shape):
                    lib.lt_nn_optim_free(handle)
                    raise ValueError("loaded state %s has shape %s, its parameter %s"
                                     % (n, a.shape, tuple(p.shape)))
            rows.append((int(pstep), arrays))
        steps = max([r[0] for r in rows] + [0])
        try:
            _handle_load(handle, _write_optm(cfg, steps, params, rows, len(names)))
        except Exception:
            lib.lt_nn_optim_free(handle)
            raise
        lib.lt_nn_optim_free(self._handles[i])
        self._handles[i], self._applied[i], self._own_wd[i] = handle, cfg, False

    def state_dict(self):
        state, groups, index = {}, [], 0
        for i, group in enumerate(self.param_groups):
            self._sync(i)
            g = {k: v for k, v in group.items() if k != "params"}
            g["params"] = list(range(index, index + len(group["params"])))
            groups.append(g)
            for pstep, st in self._group_state(i):
                if pstep > 0:  # torch has no state for a parameter never stepped
                    state[index] = self._torch_state(pstep, st)
                index += 1
        return {"state": state, "param_groups": groups}

    def _torch_state(self, pstep, st):
        return {k: from_numpy(v) for k, v in st.items()}

    def load_state_dict(self, state_dict):
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        new_groups = []
        for g, s in zip(groups, saved):
            ng = dict(s)
            ng["params"] = g["params"]
            self._check(ng)
            new_groups.append(ng)
        state = state_dict["state"]
        for i, (g, s) in enumerate(zip(new_groups, saved)):
            per = []
            for idx in s["params"]:
                st = state.get(idx, state.get(str(idx)))
                if st is None:
                    per.append((0, {}))
                    continue
                st = {k: (None if v is None else np.asarray(v)) for k, v in st.items()}
                step = st.pop("step", None)
                per.append((int(step) if step is not None else 1, st))
            self.param_groups[i] = g
            self._install(i, self._cfg(g), per)

    @property
    def state(self):
        """Per-parameter state keyed by the parameter, as torch's (copies)."""
        out, index = {}, 0
        sd = self.state_dict()["state"]
        for group in self.param_groups:
            for p in group["params"]:
                if index in sd:
                    out[p] = sd[index]
                index += 1
        return out

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += "\nParameter Group %d" % i
            for k in sorted(g):
                if k != "params":
                    s += "\n    %s: %s" % (k, g[k])
        return s + "\n)"

    def __del__(self):
        for h in getattr(self, "_handles", ()):
            if h and lib is not None:
                lib.lt_nn_optim_free(h)
        self._handles = []


class SGD(Optimizer):
    """torch.optim.SGD: dampening 0 only; maximize is not supported."""

    _kind = _SGD

    def __init__(self, params, lr=required, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        if lr is not required and lr < 0.0:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if momentum < 0.0:
            raise ValueError("Invalid momentum value: {}".format(momentum))
        if weight_decay < 0.0:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                        foreach=foreach, differentiable=differentiable)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, defaults)

    def _check(self, g):
        if g["dampening"] != 0:
            raise NotImplementedError("SGD: dampening is not supported by lazytensor")
        if g.get("maximize"):
            raise NotImplementedError("SGD: maximize is not supported by lazytensor")

    def _cfg(self, g):
        return dict(kind=_SGD, lr=float(g["lr"]), momentum=float(g["momentum"]),
                    nesterov=bool(g["nesterov"]), weight_decay=float(g["weight_decay"]),
                    beta1=0.9, beta2=0.999, eps=1e-8)

    def _torch_state(self, pstep, st):
        b = st.get("momentum_buffer")
        return {"momentum_buffer": from_numpy(b) if b is not None else None}


class Adam(Optimizer):
    """torch.optim.Adam (amsgrad and maximize are not supported)."""

    _kind = _ADAM

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def _check(self, g):
        name = type(self).__name__
        if g.get("amsgrad"):
            raise NotImplementedError("%s: amsgrad is not supported by lazytensor" % name)
        if g.get("maximize"):
            raise NotImplementedError("%s: maximize is not supported by lazytensor" % name)

    def _cfg(self, g):
        b1, b2 = g["betas"]
        return dict(kind=self._kind, lr=float(g["lr"]), momentum=0.0, nesterov=False,
                    weight_decay=float(g["weight_decay"]), beta1=float(b1), beta2=float(b2),
                    eps=float(g["eps"]))

    def _torch_state(self, pstep, st):
        return {"step": tensor(float(pstep)), "exp_avg": from_numpy(st["exp_avg"]),
                "exp_avg_sq": from_numpy(st["exp_avg_sq"])}


class AdamW(Adam):
    """torch.optim.AdamW: decoupled decay, p *= 1 - lr * weight_decay."""

    _kind = _ADAMW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False):
        _check_adam_args(lr, betas, eps, weight_decay)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        foreach=foreach, maximize=maximize, capturable=capturable)
        Optimizer.__init__(self, params, defaults)


def _check_adam_args(lr, betas, eps, weight_decay):
    if not 0.0 <= lr:
        raise ValueError("Invalid learning rate: {}".format(lr))
    if not 0.0 <= eps:
        raise ValueError("Invalid epsilon value: {}".format(eps))
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
    if not 0.0 <= weight_decay:
        raise ValueError("Invalid weight_decay value: {}".format(weight_decay))


__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
