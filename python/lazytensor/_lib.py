"""Loads liblazytensor.so and declares the C functions the binding calls.

Where the library is looked for, first found wins:
 1. $LAZYTENSOR_LIB (a file, or a name for the dynamic loader);
 2. the package's own folder (a copy put beside __init__.py);
 3. the path `cmake --install` recorded in _install.py (relative to this folder,
    so a DESTDIR or a moved prefix still works): the library installed with
    this copy of the package;
 4. the lib folders of the prefix the package is installed in, when it sits in
    <prefix>/lib/pythonX.Y/{site,dist}-packages (pip install into the prefix
    or venv that `cmake --install --prefix` filled);
 5. the build folders of the source tree this package sits in (build/, ...);
 6. the system's search path (ctypes.util.find_library: ldconfig's cache,
    LD_LIBRARY_PATH), e.g. /usr/local/lib after `cmake --install build` and ldconfig.
"""
import ctypes
import ctypes.util
import os
import sysconfig

c_tensor = ctypes.c_void_p


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("index", ctypes.c_int)]


class MetricStats(ctypes.Structure):
    _fields_ = [("count", ctypes.c_int64), ("total", ctypes.c_double), ("min", ctypes.c_double),
                ("max", ctypes.c_double), ("p50", ctypes.c_double), ("p90", ctypes.c_double),
                ("p99", ctypes.c_double)]


class OptimConfig(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("lr", ctypes.c_double), ("momentum", ctypes.c_double),
                ("nesterov", ctypes.c_bool), ("weight_decay", ctypes.c_double),
                ("beta1", ctypes.c_double), ("beta2", ctypes.c_double), ("eps", ctypes.c_double)]


class Linear(ctypes.Structure):
    _fields_ = [("weight", c_tensor), ("bias", c_tensor), ("in_", ctypes.c_int64),
                ("out", ctypes.c_int64)]


class Embedding(ctypes.Structure):
    _fields_ = [("weight", c_tensor), ("num", ctypes.c_int64), ("dim", ctypes.c_int64)]


class LayerNorm(ctypes.Structure):
    _fields_ = [("weight", c_tensor), ("bias", c_tensor),
                ("normalized_shape", ctypes.c_int64 * 8), ("nnorm", ctypes.c_int),
                ("eps", ctypes.c_double)]


class Dataset(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int64), ("rows", ctypes.c_int64), ("cols", ctypes.c_int64),
                ("features", ctypes.c_int64), ("images", ctypes.POINTER(ctypes.c_uint8)),
                ("labels", ctypes.POINTER(ctypes.c_int64)), ("num_classes", ctypes.c_int64)]


def _installed_library(here):
    """The path _install.py records (written by cmake --install only), or None."""
    try:
        from . import _install
    except ImportError:
        return None
    return os.path.normpath(os.path.join(here, _install.LIBRARY))


def _prefix_libdirs(here):
    """<prefix>/lib, its multiarch folder and lib64, when this package lies in
    <prefix>/lib*/pythonX.Y/{site,dist}-packages/lazytensor; else nothing."""
    site = os.path.dirname(here)
    pyver = os.path.dirname(site)
    if os.path.basename(site) not in ("site-packages", "dist-packages") or \
            not os.path.basename(pyver).startswith("python"):
        return []
    prefix = os.path.dirname(os.path.dirname(pyver))
    arch = sysconfig.get_config_var("MULTIARCH")
    dirs = [os.path.join(prefix, "lib")]
    if arch:
        dirs.append(os.path.join(prefix, "lib", arch))
    return dirs + [os.path.join(prefix, "lib64")]


def _candidates():
    env = os.environ.get("LAZYTENSOR_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "liblazytensor.so")
    recorded = _installed_library(here)
    if recorded:
        yield recorded
    for d in _prefix_libdirs(here):
        yield os.path.join(d, "liblazytensor.so.0")
    root = os.path.dirname(os.path.dirname(here))
    for b in ("build", "build-clang", "build-release"):
        yield os.path.join(root, b, "liblazytensor.so")
    found = ctypes.util.find_library("lazytensor")
    if found:
        yield found


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("lazytensor: liblazytensor.so not found; set LAZYTENSOR_LIB, install the "
                      "library (cmake --install build) or build it (cmake --build build). "
                      "Tried: " + ", ".join(tried))


lib = _load()

T, I, I64, D, B = c_tensor, ctypes.c_int, ctypes.c_int64, ctypes.c_double, ctypes.c_bool
P64 = ctypes.POINTER(ctypes.c_int64)
PI = ctypes.POINTER(ctypes.c_int)
PT = ctypes.POINTER(c_tensor)

_SIGS = {
    # errors, memory, tensors
    "lt_last_error": (ctypes.c_char_p, []),
    "lt_last_status": (I, []),
    "lt_clear_error": (None, []),
    "lt_cpu": (Device, [I]),
    "lt_retain": (T, [T]),
    "lt_release": (None, [T]),
    "lt_device_live_tensors": (I64, [Device]),
    "lt_get_dtype": (I, [T]),
    "lt_dtype_name": (ctypes.c_char_p, [I]),
    "lt_dtype_size": (ctypes.c_size_t, [I]),
    "lt_ndim": (I, [T]),
    "lt_shape": (P64, [T]),
    "lt_numel": (I64, [T]),
    "lt_from_data": (T, [Device, I, P64, I, ctypes.c_void_p]),
    "lt_full": (T, [Device, I, P64, I, D]),
    "lt_zeros": (T, [Device, I, P64, I]),
    "lt_ones": (T, [Device, I, P64, I]),
    "lt_scalar": (T, [Device, I, D]),
    "lt_arange": (T, [Device, I, D, D, D]),
    "lt_eye": (T, [Device, I, I64, I64]),
    "lt_to_data": (I, [T, ctypes.c_void_p, ctypes.c_size_t]),
    "lt_from_f32": (T, [Device, I, P64, I, ctypes.POINTER(ctypes.c_float)]),
    "lt_to_f32": (I, [T, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t]),
    "lt_item": (I, [T, I64, ctypes.POINTER(D)]),
    "lt_clamp": (T, [T, D, D]),
    "lt_where": (T, [T, T, T]),
    "lt_masked_fill": (T, [T, T, D]),
    "lt_tril": (T, [T, I64]),
    "lt_triu": (T, [T, I64]),
    "lt_cast": (T, [T, I]),
    "lt_var": (T, [T, PI, I, D, B]),
    "lt_std": (T, [T, PI, I, D, B]),
    "lt_vector_norm": (T, [T, PI, I, D, B]),
    "lt_argmax": (T, [T, I, B]),
    "lt_argmin": (T, [T, I, B]),
    "lt_softmax": (T, [T, I]),
    "lt_log_softmax": (T, [T, I]),
    "lt_cumsum": (T, [T, I]),
    "lt_sort": (I, [T, I, B, PT, PT]),
    "lt_argsort": (T, [T, I, B]),
    "lt_topk": (I, [T, I64, I, B, PT, PT]),
    "lt_scaled_dot_product_attention": (T, [T, T, T, T, B, D]),
    "lt_conv2d_n": (T, [T, T, T, P64, I, P64, I, P64, I, I64]),
    "lt_conv_transpose2d_n": (T, [T, T, T, P64, I, P64, I, P64, I, P64, I, I64]),
    "lt_max_pool2d_n": (T, [T, P64, I, P64, I, P64, I, P64, I, B]),
    "lt_avg_pool2d_n": (T, [T, P64, I, P64, I, P64, I, B, B, I64]),
    "lt_adaptive_avg_pool2d_n": (T, [T, P64, I]),
    "lt_batch_norm": (T, [T, T, T, T, T, B, D, D]),
    "lt_group_norm": (T, [T, I64, T, T, D]),
    "lt_index_add": (T, [T, I, T, T, D]),
    "lt_flatten": (T, [T, I, I]),
    "lt_layer_norm": (T, [T, P64, I, T, T, D]),
    "lt_reshape": (T, [T, P64, I]),
    "lt_permute": (T, [T, PI, I]),
    "lt_transpose": (T, [T, I, I]),
    "lt_expand": (T, [T, P64, I]),
    "lt_squeeze": (T, [T, I]),
    "lt_unsqueeze": (T, [T, I]),
    "lt_slice_n": (T, [T, P64, P64, P64, I]),
    "lt_concat": (T, [PT, I, I]),
    "lt_stack": (T, [PT, I, I]),
    "lt_pad_n": (T, [T, P64, I, D]),
    "lt_flip": (T, [T, PI, I]),
    "lt_roll": (T, [T, P64, I, PI, I]),
    "lt_repeat": (T, [T, P64, I]),
    "lt_split_size": (I, [T, I64, I, PT, I]),
    "lt_chunk": (I, [T, I, I, PT, I]),
    "lt_gather": (T, [T, I, T]),
    "lt_index_select": (T, [T, I, T]),
    "lt_one_hot": (T, [T, I64, I]),
    "lt_embedding": (T, [T, T]),
    "lt_scatter_add": (T, [T, I, T, T]),
    "lt_scatter": (T, [T, I, T, T]),
    "lt_assign": (I, [T, T]),
    "lt_sync": (I, [PT, I, B]),
    "lt_mark_step": (I, [Device]),
    "lt_wait_device_ops": (I, [Device]),
    "lt_clear_pending": (I, [Device]),
    "lt_set_eager": (None, [B]),
    # autograd
    "lt_set_requires_grad": (I, [T, B]),
    "lt_get_requires_grad": (B, [T]),
    "lt_backward": (I, [T]),
    "lt_grad": (T, [T]),
    "lt_zero_grad": (I, [T]),
    "lt_detach": (T, [T]),
    "lt_no_grad_begin": (None, []),
    "lt_no_grad_end": (None, []),
    # random numbers
    "lt_set_seed": (I, [Device, ctypes.c_uint64]),
    "lt_rand_uniform": (T, [Device, I, P64, I, D, D]),
    "lt_rand_normal": (T, [Device, I, P64, I, D, D]),
    "lt_bernoulli": (T, [T]),
    "lt_dropout": (T, [T, D, B]),
    "lt_randperm": (T, [Device, I, I64]),
    # metrics
    "lt_get_counter": (I, [ctypes.c_char_p, P64]),
    "lt_get_metric": (I, [ctypes.c_char_p, ctypes.POINTER(MetricStats)]),
    "lt_metrics_report": (I, [ctypes.c_char_p, ctypes.c_size_t]),
    "lt_counters_reset": (None, []),
    "lt_cache_entries": (I64, []),
    # nn
    "lt_nn_linear_init": (I, [ctypes.POINTER(Linear), Device, I, I64, I64, B]),
    "lt_nn_linear_free": (None, [ctypes.POINTER(Linear)]),
    "lt_nn_linear_forward": (T, [ctypes.POINTER(Linear), T]),
    "lt_nn_embedding_init": (I, [ctypes.POINTER(Embedding), Device, I, I64, I64]),
    "lt_nn_embedding_free": (None, [ctypes.POINTER(Embedding)]),
    "lt_nn_embedding_forward": (T, [ctypes.POINTER(Embedding), T]),
    "lt_nn_params_sync": (I, [PT, I]),
    "lt_nn_relu": (T, [T]),
    "lt_nn_gelu": (T, [T]),
    "lt_nn_gelu_tanh": (T, [T]),
    "lt_nn_dropout": (T, [T, D, B]),
    "lt_nn_cross_entropy": (T, [T, T]),
    "lt_nn_accuracy": (T, [T, T]),
    "lt_nn_mse_loss": (T, [T, T, I]),
    "lt_nn_nll_loss": (T, [T, T, I, I64]),
    "lt_nn_optim_defaults": (OptimConfig, [I]),
    "lt_nn_optim_create": (ctypes.c_void_p, [ctypes.POINTER(OptimConfig), PT, I]),
    "lt_nn_optim_step": (I, [ctypes.c_void_p]),
    "lt_nn_optim_set_lr": (I, [ctypes.c_void_p, D]),
    "lt_nn_optim_set_param_weight_decay": (I, [ctypes.c_void_p, I, D]),
    "lt_nn_optim_steps": (I64, [ctypes.c_void_p]),
    "lt_nn_optim_free": (None, [ctypes.c_void_p]),
    "lt_nn_clip_grad_norm": (I, [PT, I, D, D, PT]),
    "lt_nn_params_save": (I, [PT, I, ctypes.c_char_p]),
    "lt_nn_params_load": (I, [PT, I, ctypes.c_char_p]),
    "lt_nn_fashion_mnist": (I, [ctypes.c_char_p, B, ctypes.POINTER(Dataset)]),
    "lt_nn_dataset_free": (None, [ctypes.POINTER(Dataset)]),
    "lt_nn_dataset_images": (T, [ctypes.POINTER(Dataset), Device, I64, I64]),
    "lt_nn_loader_create": (ctypes.c_void_p, [ctypes.POINTER(Dataset), Device, I64, B]),
    "lt_nn_loader_shuffle_ahead": (I, [ctypes.c_void_p, I]),
    "lt_nn_loader_epoch": (I64, [ctypes.c_void_p]),
    "lt_nn_loader_next": (I, [ctypes.c_void_p, PT, PT]),
    "lt_nn_loader_free": (None, [ctypes.c_void_p]),
    # py-traps additions (tensor.py: no_grad's state for in-place ops and enable_grad)
    "lt_get_no_grad": (B, []),
}

# ---- py-nn additions: the layers, losses and optimizer calls of lazytensor.nn
# (Conv2d, BatchNorm2d, LayerNorm modules) and lazytensor.optim (torch-style
# steps that keep the grads, state_dict through the checkpoint file).


class Conv2d(ctypes.Structure):
    _fields_ = [("weight", c_tensor), ("bias", c_tensor), ("in_", ctypes.c_int64),
                ("out", ctypes.c_int64), ("groups", ctypes.c_int64),
                ("kernel", ctypes.c_int64 * 2), ("stride", ctypes.c_int64 * 2),
                ("padding", ctypes.c_int64 * 2), ("dilation", ctypes.c_int64 * 2)]


class BatchNorm2d(ctypes.Structure):
    _fields_ = [("weight", c_tensor), ("bias", c_tensor), ("running_mean", c_tensor),
                ("running_var", c_tensor), ("num_features", ctypes.c_int64),
                ("momentum", ctypes.c_double), ("eps", ctypes.c_double)]


_SIGS.update({
    "lt_nn_conv2d_init_n": (I, [ctypes.POINTER(Conv2d), Device, I, I64, I64, P64, I, P64, I, P64,
                                I, P64, I, I64, B]),
    "lt_nn_conv2d_free": (None, [ctypes.POINTER(Conv2d)]),
    "lt_nn_conv2d_forward": (T, [ctypes.POINTER(Conv2d), T]),
    "lt_nn_batchnorm2d_init": (I, [ctypes.POINTER(BatchNorm2d), Device, I, I64, B]),
    "lt_nn_batchnorm2d_free": (None, [ctypes.POINTER(BatchNorm2d)]),
    "lt_nn_batchnorm2d_forward": (T, [ctypes.POINTER(BatchNorm2d), T, B]),
    "lt_nn_layernorm_init": (I, [ctypes.POINTER(LayerNorm), Device, I, P64, I, B]),
    "lt_nn_layernorm_free": (None, [ctypes.POINTER(LayerNorm)]),
    "lt_nn_layernorm_forward": (T, [ctypes.POINTER(LayerNorm), T]),
    "lt_nn_cross_entropy_ex": (T, [T, T, I, I64, D]),
    "lt_nn_bce_with_logits": (T, [T, T, T, I]),
    "lt_nn_optim_step_grads": (I, [ctypes.c_void_p, PT]),
    "lt_nn_optim_param_steps": (I64, [ctypes.c_void_p, I]),
    "lt_nn_checkpoint_save": (I, [PT, I, ctypes.c_void_p, ctypes.c_char_p]),
    "lt_nn_checkpoint_load": (I, [PT, I, ctypes.c_void_p, ctypes.c_char_p]),
})
# ---- end of py-nn additions

# ---- py-rest additions: saved programs (lazytensor.jit) and eager mode
_SIGS.update({
    "lt_get_eager": (B, []),
    "lt_set_backend": (I, [ctypes.c_char_p]),
    "lt_get_backend": (ctypes.c_char_p, []),
    "lt_program_create": (ctypes.c_void_p, [PT, I, PT, I]),
    "lt_program_run": (I, [ctypes.c_void_p, PT, I, PT]),
    "lt_program_free": (None, [ctypes.c_void_p]),
    "lt_program_save": (I, [ctypes.c_void_p, ctypes.c_char_p]),
    "lt_program_load": (ctypes.c_void_p, [ctypes.c_char_p]),
    "lt_program_count": (I, [ctypes.c_void_p, B]),
    "lt_program_signature": (I, [ctypes.c_void_p, B, I, PI, P64, PI]),
})



def _op_names(fn):
    """The names of one op table of lazytensor_ops.h, as the loaded library has them."""
    f = getattr(lib, fn)
    f.restype = ctypes.c_char_p
    f.argtypes = [ctypes.c_int]
    names = []
    while True:
        n = f(len(names))
        if n is None:
            return names
        names.append(n.decode())


# The ops come from the library (its tables, include/lazytensor_ops.h), not
# from a list here: the binding then binds exactly the ops of the library it
# loaded, whichever build or install that is.
_UNARY = _op_names("lt_unary_op_name")
_BINARY = _op_names("lt_binary_op_name")
_REDUCE = _op_names("lt_reduce_op_name")
for _n in _UNARY:
    _SIGS["lt_" + _n] = (T, [T])
for _n in _BINARY:
    _SIGS["lt_" + _n] = (T, [T, T])
for _n in _REDUCE:
    _SIGS["lt_" + _n] = (T, [T, PI, I, B])

for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

UNARY, BINARY, REDUCE = _UNARY, _BINARY, _REDUCE
