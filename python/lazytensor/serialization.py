"""lazytensor.save / lazytensor.load: torch.save / torch.load for tensors and
containers of them (a state_dict, an optimizer's state_dict, a checkpoint
dict of both with an epoch number).

    lt.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, "ckpt.pt")
    ckpt = lt.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])

What can be saved: Tensors (and nn.Parameters, which load as Parameters),
numpy arrays, dict / OrderedDict (keys of any savable kind but tensors),
list, tuple, str, int, float, bool and None, nested. A tensor held twice is
stored once and loads as one object held twice, as torch's. Anything else
(a module, a function) raises TypeError naming lazytensor.save: torch
pickles objects, this format does not (so loading runs no code).

The file is a numpy .npz archive (a zip, readable with numpy.load):
  __lazytensor__  a uint8 array, the UTF-8 JSON {"format": "lazytensor.save",
                  "version": 1, "root": NODE}
  t0, t1, ...     one array per tensor, in its dtype (bfloat16: the uint16
                  bits, Tensor.numpy_raw's); a0, a1, ... the numpy arrays
NODE is {"tensor": i, "dtype": name, "requires_grad": b, "parameter": b},
{"ndarray": i}, {"dict": [[KEY NODE, VALUE NODE], ...], "ordered": b},
{"list": [...]}, {"tuple": [...]} or {"value": a JSON number, string,
boolean or null} (floats inf and nan as JSON's Infinity / NaN).

save writes to a path through a temporary file in the same folder, renamed
over the target at the end, so a failed save leaves an earlier file whole;
f may also be a binary file object. load raises RuntimeError naming
lazytensor.load for a file that is not such an archive.
"""
import json
import os
import tempfile
import zipfile
from collections import OrderedDict

import numpy as np

from .tensor import BF16, Tensor, _dtype_code, _dtype_of, from_numpy, from_numpy_raw

_FORMAT, _VERSION, _META = "lazytensor.save", 1, "__lazytensor__"


class _Writer:
    def __init__(self):
        self.arrays, self.seen = {}, {}

    def node(self, obj):
        from .nn.modules import Parameter  # nn sits above the tensors
        if isinstance(obj, Tensor):
            key = id(obj)
            if key not in self.seen:
                i = len([k for k in self.arrays if k.startswith("t")])
                self.arrays["t%d" % i] = obj.numpy_raw() if obj.dtype == BF16 else obj.numpy()
                self.seen[key] = ({"tensor": i, "dtype": obj.dtype.name,
                                   "requires_grad": bool(obj.requires_grad),
                                   "parameter": isinstance(obj, Parameter)}, obj)
            return self.seen[key][0]
        if isinstance(obj, np.ndarray):
            if obj.dtype == object:
                raise TypeError("lazytensor.save: numpy arrays of Python objects cannot be saved")
            i = len([k for k in self.arrays if k.startswith("a")])
            self.arrays["a%d" % i] = obj
            return {"ndarray": i}
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, (Tensor, np.ndarray)):
                    raise TypeError("lazytensor.save: a tensor or array as a dict key cannot be "
                                    "saved")
                items.append([self.node(k), self.node(v)])
            return {"dict": items, "ordered": isinstance(obj, OrderedDict)}
        if isinstance(obj, (list, tuple)) and type(obj) in (list, tuple):
            return {type(obj).__name__: [self.node(v) for v in obj]}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return {"value": obj}
        if isinstance(obj, (np.integer, np.floating, np.bool_)):
            return {"value": obj.item()}
        raise TypeError("lazytensor.save: cannot save an object of type %s (tensors, numpy arrays, "
                        "dicts, lists, tuples, str, int, float, bool and None can be saved)"
                        % type(obj).__name__)


def save(obj, f):
    """torch.save: obj (see the module's docstring) to f, a path or a binary
    file object. Tensors' pending values are computed (a device read)."""
    w = _Writer()
    meta = {"format": _FORMAT, "version": _VERSION, "root": w.node(obj)}
    arrays = dict(w.arrays)
    arrays[_META] = np.frombuffer(json.dumps(meta).encode("utf-8"), np.uint8)
    if hasattr(f, "write"):
        np.savez(f, **arrays)
        return
    path = os.fspath(f)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".lazytensor-save-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # a file object: numpy adds no ".npz" to the name
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


class _Reader:
    def __init__(self, npz, name):
        self.npz, self.name, self.made = npz, name, {}

    def bad(self, why):
        return RuntimeError("lazytensor.load: %s is not a file lazytensor.save wrote (%s)"
                            % (self.name, why))

    def array(self, key):
        if key not in self.npz.files:
            raise self.bad("array %s is missing" % key)
        return self.npz[key]

    def node(self, n):
        from .nn.modules import Parameter
        if not isinstance(n, dict) or len(n) == 0:
            raise self.bad("a malformed entry")
        if "tensor" in n:
            i = n["tensor"]
            if i not in self.made:
                a = self.array("t%d" % i)
                dt = _dtype_of(_dtype_code(n.get("dtype", a.dtype.name)))
                t = from_numpy_raw(a, dt) if dt == BF16 else from_numpy(a)
                if t.dtype != dt:
                    raise self.bad("tensor t%d has dtype %s, the entry says %s" % (i, t.dtype, dt))
                if n.get("parameter"):
                    t = Parameter(t, requires_grad=bool(n.get("requires_grad", True)))
                elif n.get("requires_grad"):
                    t.requires_grad_(True)
                self.made[i] = t
            return self.made[i]
        if "ndarray" in n:
            return self.array("a%d" % n["ndarray"])
        if "dict" in n:
            d = OrderedDict() if n.get("ordered") else {}
            for k, v in n["dict"]:
                d[self.node(k)] = self.node(v)
            return d
        if "list" in n:
            return [self.node(v) for v in n["list"]]
        if "tuple" in n:
            return tuple(self.node(v) for v in n["tuple"])
        if "value" in n:
            return n["value"]
        raise self.bad("an entry of unknown kind %s" % sorted(n))


def load(f, map_location=None, weights_only=False, **kwargs):
    """torch.load of a file lazytensor.save wrote (a path or a binary file
    object); map_location may name the cpu only (lazytensor's one device).
    Nothing in the file is executed (no pickle)."""
    if map_location is not None and str(map_location) not in ("cpu", "cpu:0"):
        raise ValueError("lazytensor.load: map_location %r: lazytensor has the cpu device only"
                         % (map_location,))
    name = repr(f) if hasattr(f, "read") else repr(os.fspath(f))
    try:
        npz = np.load(f, allow_pickle=False)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise RuntimeError("lazytensor.load: %s is not a file lazytensor.save wrote (%s)"
                           % (name, e)) from None
    if not isinstance(npz, np.lib.npyio.NpzFile):
        raise RuntimeError("lazytensor.load: %s is not a file lazytensor.save wrote (a single "
                           "numpy array)" % name)
    with npz:
        r = _Reader(npz, name)
        if _META not in npz.files:
            raise r.bad("no %s entry" % _META)
        try:
            meta = json.loads(bytes(npz[_META]).decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            raise r.bad("its %s entry is not JSON: %s" % (_META, e)) from None
        if not isinstance(meta, dict) or meta.get("format") != _FORMAT:
            raise r.bad("format %r" % (meta.get("format") if isinstance(meta, dict) else None))
        if meta.get("version") != _VERSION:
            raise r.bad("version %r; this lazytensor reads version %d"
                        % (meta.get("version"), _VERSION))
        try:
            return r.node(meta.get("root"))
        except (KeyError, TypeError, ValueError, zipfile.BadZipFile, OSError) as e:
            raise r.bad("%s: %s" % (type(e).__name__, e)) from None


__all__ = ["save", "load"]
