"""bfloat16 through the binding: float32 values in (rounded to nearest even by
the library) and out (exact), the raw uint16 bits both ways, casts, creation
and errors. The test Python has no torch, so the expected values below were
computed with PyTorch 1.13 (the expression that gave each is in its comment)."""
import numpy as np
import pytest

import lazytensor as lt

# torch.tensor(X, dtype=torch.bfloat16) with
X = [0.1, 1.00390625, 1.01171875, -3.3, 1e39, -1e-40, 65504.0, 3.0e38]
# .float().tolist():
X_VALUES = [0.10009765625, 1.0, 1.015625, -3.296875, np.inf, -9.183549615799121e-41, 65536.0,
            3.00405527047391e+38]
# .view(torch.int16) read as uint16 (1.00390625 and 1.01171875 are ties: to even):
X_BITS = [15821, 16256, 16258, 49235, 32640, 32769, 18304, 32610]


def test_names_and_constants():
    assert lt.bfloat16 == lt.BF16 == 7
    for name in ("bf16", "bfloat16"):
        assert lt.zeros(2, dtype=name).dtype == lt.BF16
    assert lt.tensor([1.0], dtype="bfloat16").dtype == lt.BF16
    assert "dtype=bfloat16" in repr(lt.tensor([1.5], dtype=lt.bfloat16))


def test_values_in_round_to_nearest_even_and_out_exact():
    t = lt.tensor(X, dtype=lt.bfloat16)
    assert t.dtype == lt.BF16
    got = t.numpy()
    assert got.dtype == np.float32
    assert got.tolist() == [float(np.float32(v)) for v in X_VALUES]
    bits = t.numpy_raw()
    assert bits.dtype == np.uint16
    assert bits.tolist() == X_BITS
    # the float32 values are the bits widened: exact
    assert (got.view(np.uint32) == bits.astype(np.uint32) << 16).all()
    # a float32 array converts the same way as Python floats
    with np.errstate(over="ignore"):  # 1e39 is inf in float32
        x32 = np.array(X, np.float32)
    assert lt.tensor(x32, dtype="bf16").numpy_raw().tolist() == X_BITS


def test_shapes_kept():
    # 0-d stays 0-d; a non-contiguous array is read in its logical order
    s = lt.tensor(1.5, dtype=lt.bfloat16)
    assert s.shape == () and s.item() == 1.5
    assert lt.from_numpy_raw(np.uint16(0x3F80), lt.bfloat16).shape == ()
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = lt.tensor(m.T, dtype=lt.bfloat16)
    assert t.shape == (3, 2) and (t.numpy() == m.T).all()


def test_float64_is_rounded_to_float32_first():
    # torch.tensor([1 + 2**-8 + 2**-30], dtype=torch.float64).to(torch.bfloat16) is 1.0:
    # the double rounds to the f32 tie 1 + 2**-8, which goes to even (a direct
    # rounding would give 1.0078125)
    d = np.array([1.0 + 2 ** -8 + 2 ** -30])
    assert lt.tensor(d, dtype=lt.bfloat16).numpy().tolist() == [1.0]


def test_nan_and_infinities():
    t = lt.tensor([np.nan, np.inf, -np.inf, -0.0], dtype=lt.bfloat16)
    # torch.tensor(float('nan'), dtype=torch.bfloat16).view(torch.int16) is 0x7FC0
    assert t.numpy_raw().tolist() == [0x7FC0, 0x7F80, 0xFF80, 0x8000]
    v = t.numpy()
    assert np.isnan(v[0]) and v[1] == np.inf and v[2] == -np.inf
    assert v[3] == 0 and np.signbit(v[3])


def test_raw_bits_round_trip_every_pattern():
    bits = np.arange(1 << 16, dtype=np.uint64).astype(np.uint16).reshape(256, 256)
    t = lt.from_numpy_raw(bits, lt.bfloat16)
    assert t.dtype == lt.BF16 and t.shape == (256, 256)
    assert (t.numpy_raw() == bits).all()
    # numpy() widens every pattern exactly (NaNs with their payloads)
    assert (t.numpy().view(np.uint32) == bits.astype(np.uint32) << 16).all()
    # a non-contiguous array is made contiguous first
    assert (lt.from_numpy_raw(bits.T, "bf16").numpy_raw() == bits.T).all()


def test_arithmetic_and_promotion():
    a = lt.tensor([1.5, -2.25, 0.1], dtype=lt.bfloat16)
    b = lt.tensor([0.3, 4.0, 0.7], dtype=lt.bfloat16)
    # a * b, a + b in torch.bfloat16 (one rounding each)
    assert (a * b).dtype == lt.BF16
    assert (a * b).numpy().tolist() == [0.451171875, -9.0, 0.06982421875]
    assert (a + b).numpy().tolist() == [1.796875, 1.75, 0.80078125]
    # a + 0.001: a Python float keeps bf16 (torch: [1.5, -2.25, 0.10107421875])
    r = a + 0.001
    assert r.dtype == lt.BF16
    assert r.numpy().tolist() == [1.5, -2.25, 0.10107421875]
    # bf16 with f32 gives f32 (torch.promote_types)
    assert (a + lt.tensor([1.0, 1.0, 1.0])).dtype == lt.F32
    assert isinstance(a.sum().item(), float)


def test_casts():
    a = lt.tensor([1.5, -2.25, 0.1], dtype=lt.bfloat16)
    f = a.to(lt.float32)
    assert f.dtype == lt.F32
    assert f.numpy().tolist() == [1.5, -2.25, 0.10009765625]
    # torch.tensor([0.3, 4.0, 0.7]).to(torch.bfloat16)
    assert lt.tensor([0.3, 4.0, 0.7]).to("bfloat16").numpy().tolist() == [0.30078125, 4.0,
                                                                          0.69921875]
    # torch.tensor([257, 16777217]).to(torch.bfloat16): 256, 16777216
    assert lt.tensor([257, 16777217]).to(lt.bfloat16).numpy().tolist() == [256.0, 16777216.0]
    # torch.tensor([2.6, -2.6, 300.7]).bfloat16().to(torch.int32): truncation
    g = lt.tensor([2.6, -2.6, 300.7]).to(lt.bfloat16).to(lt.int32)
    assert g.numpy().tolist() == [2, -2, 300]
    # Tensor(data) with an existing tensor casts it
    assert lt.tensor(f, dtype="bf16").numpy_raw().tolist() == [0x3FC0, 0xC010, 0x3DCD]


def test_creation():
    # torch.arange(0, 3, 0.1, dtype=torch.bfloat16).view(torch.int16)
    want = [0, 15821, 15949, 16026, 16077, 16128, 16154, 16179, 16205, 16230, 16256, 16269,
            16282, 16294, 16307, 16320, 16333, 16346, 16358, 16371, 16384, 16390, 16397, 16403,
            16410, 16416, 16422, 16429, 16435, 16442]
    assert lt.arange(0, 3, 0.1, dtype=lt.bfloat16).numpy_raw().tolist() == want
    # torch.full((2,), 0.1, dtype=torch.bfloat16).view(torch.int16): 15821
    assert lt.full((2,), 0.1, dtype=lt.bfloat16).numpy_raw().tolist() == [15821, 15821]
    assert lt.ones(2, dtype="bf16").numpy_raw().tolist() == [0x3F80, 0x3F80]
    assert lt.eye(2, 3, dtype=lt.bfloat16).numpy().tolist() == [[1, 0, 0], [0, 1, 0]]


def test_errors():
    with pytest.raises(TypeError, match="from_numpy_raw of bfloat16 needs a uint16 array, got"):
        lt.from_numpy_raw(np.zeros(2, np.float32), lt.bfloat16)
    with pytest.raises(TypeError, match="needs a float32 array, got int16"):
        lt.from_numpy_raw(np.zeros(2, np.int16), lt.float32)
    with pytest.raises(TypeError, match="dtype 'float16' is not supported"):
        lt.tensor([1.0], dtype="float16")
    with pytest.raises(TypeError, match="dtype 'bfloat' is not supported"):
        lt.zeros(2, dtype="bfloat")
    # a numpy float32 array without a dtype stays float32 (bf16 is asked for by name)
    assert lt.from_numpy(np.zeros(2, np.float32)).dtype == lt.F32
    with pytest.raises(TypeError, match="numpy dtype uint16 is not supported"):
        lt.from_numpy(np.zeros(2, np.uint16))
    # the library's own check: a bad dtype id names the function
    with pytest.raises(lt.LazyTensorError, match="lt_full: invalid dtype 8"):
        lt.full((2,), 1.0, dtype=8)
