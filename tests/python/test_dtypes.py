"""The binding's dtype list (lazytensor/tensor.py) against the library's dtype
table: the same ids, each with the library's size and kind, and no library
dtype missing (a dtype added to the library without its Python row fails
here)."""
import importlib

import numpy as np

import lazytensor as lt
from lazytensor._lib import lib

lt_tensor = importlib.import_module("lazytensor.tensor")  # lt.tensor is the function

# a library dtype name -> numpy's dtype.kind of its values: the name's first
# letter (i32 -> "i", u8 -> "u", f64 -> "f") but for these two (bf16's values
# come out as float32)
_KINDS = {"bool": "b", "bf16": "f"}


def _lib_kind(name):
    return _KINDS.get(name, name[0])


def test_every_library_dtype_has_its_numpy_type():
    n = 0
    while lib.lt_dtype_size(n) > 0:
        n += 1
    assert lib.lt_dtype_name(n) == b"?"
    assert sorted(lt_tensor._NP) == list(range(n))
    assert sorted(lt_tensor._RAW) == list(range(n))
    for code, np_type in lt_tensor._NP.items():
        name = lib.lt_dtype_name(code).decode()
        # the stored bits have the library's size; the values the library's kind
        assert np.dtype(lt_tensor._RAW[code]).itemsize == lib.lt_dtype_size(code), name
        assert np.dtype(np_type).kind == _lib_kind(name), name
        # the two types differ only where numpy lacks the dtype (bf16)
        assert (lt_tensor._RAW[code] is np_type) == (name != "bf16"), name


def test_dtype_objects_against_the_library():
    # one dtype object per library id, with the library's size and kind;
    # t.dtype gives it, and it equals its numpy type (bf16: no numpy type)
    assert len(lt_tensor._DTYPES) == len(lt_tensor._NP)
    for code, d in enumerate(lt_tensor._DTYPES):
        name = lib.lt_dtype_name(code).decode()
        assert isinstance(d, lt.dtype) and d._code == code and d == code, name
        assert d.itemsize == lib.lt_dtype_size(code), name
        assert d.is_floating_point == (_lib_kind(name) == "f"), name
        assert getattr(lt, d.name) is d and repr(d) == "lazytensor." + d.name, name
        assert lt.zeros(1, dtype=code).dtype is d, name
        if name != "bf16":
            assert d == lt_tensor._NP[code] and d == np.dtype(lt_tensor._NP[code]), name


def test_constants_and_names():
    # the upper-case names are the same dtype objects
    assert (lt.float32, lt.float64, lt.int32, lt.int64) == (lt.F32, lt.F64, lt.I32, lt.I64)
    assert (lt.bool_, lt.uint8, lt.int8, lt.bfloat16) == (lt.BOOL, lt.U8, lt.I8, lt.BF16)
    assert lt.F32 is lt.float32 and lt.BF16 is lt.bfloat16
    # the tables are keyed by the library's ids; a dtype object finds its row
    assert lt_tensor._NAMES == {0: "bool", 1: "int32", 2: "int64", 3: "float32", 4: "float64",
                                5: "uint8", 6: "int8", 7: "bfloat16"}
    assert lt_tensor._NAMES[lt.BF16] == "bfloat16"


def test_round_trip_every_dtype():
    for code, np_type in lt_tensor._NP.items():
        a = np.array([0, 1, 1, 0], dtype=np_type)
        t = lt.tensor(a, dtype=code)  # from_numpy alone reads float32 as F32
        assert t.dtype == code
        got = t.numpy()
        assert got.dtype == np.dtype(np_type)
        assert (got == a).all()
