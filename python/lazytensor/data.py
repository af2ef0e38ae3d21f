"""Fashion-MNIST and the shuffling batch loader of lazytensor_nn.h."""
import ctypes

from . import _lib
from ._lib import lib
from .tensor import _CPU, check, wrap


class FashionMNIST:
    """The IDX files from dir (None: $LT_DATA_DIR or the Debian package's path)."""

    def __init__(self, train=True, dir=None):
        self._ds = _lib.Dataset()
        check(lib.lt_nn_fashion_mnist(dir.encode() if dir else None, train, ctypes.byref(self._ds)))
        self.n, self.features = self._ds.n, self._ds.features
        self.num_classes = self._ds.num_classes

    def __len__(self):
        return self.n

    def images(self, start=0, count=None):
        """Images [count, features] f32 in [0, 1]."""
        count = self.n - start if count is None else count
        return wrap(lib.lt_nn_dataset_images(ctypes.byref(self._ds), _CPU, start, count))

    def labels(self, start=0, count=None):
        import numpy as np
        count = self.n - start if count is None else count
        return np.ctypeslib.as_array(self._ds.labels, (self.n,))[start:start + count].copy()

    def __del__(self):
        if getattr(self, "_ds", None) is not None and lib is not None:
            lib.lt_nn_dataset_free(ctypes.byref(self._ds))
            self._ds = None


class Loader:
    """Batches (x [batch, features] f32, y [batch] i64) of a shuffled epoch; the
    last partial batch is dropped (every step the same graph)."""

    def __init__(self, dataset, batch, shuffle=True):
        self.dataset = dataset  # the loader reads the dataset's memory
        self._l = lib.lt_nn_loader_create(ctypes.byref(dataset._ds), _CPU, batch, shuffle)
        if not self._l:
            check(-1)

    def shuffle_ahead(self, epochs):
        check(lib.lt_nn_loader_shuffle_ahead(self._l, epochs))

    def epoch(self):
        """Starts the next epoch and yields its batches."""
        n = check(lib.lt_nn_loader_epoch(self._l))
        x, y = _lib.c_tensor(), _lib.c_tensor()
        for _ in range(n):
            if check(lib.lt_nn_loader_next(self._l, ctypes.byref(x), ctypes.byref(y))) != 1:
                return
            yield wrap(x.value), wrap(y.value)

    def __del__(self):
        if getattr(self, "_l", None) and lib is not None:
            lib.lt_nn_loader_free(self._l)
            self._l = None
