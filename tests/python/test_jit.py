"""lazytensor.jit (trace / save / load over the library's saved programs)
and eager mode from Python (set_eager / is_eager)."""
import io

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn

RNG = np.random.default_rng(8)


def mlp_ref(model, x):
    w1, b1 = model[0].weight.numpy(), model[0].bias.numpy()
    w2, b2 = model[2].weight.numpy(), model[2].bias.numpy()
    return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2


def test_trace_runs_the_compiled_graph_on_new_inputs_with_the_captured_weights(tmp_path):
    lt.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))  # init still pending
    example = lt.zeros(2, 4)
    traced = lt.jit.trace(model, example)
    assert [(dt.name, s) for dt, s in traced.inputs] == [("float32", (2, 4))]
    assert [(dt.name, s) for dt, s in traced.outputs] == [("float32", (2, 3))]
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    want = mlp_ref(model, x)
    np.testing.assert_allclose(traced(lt.from_numpy(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    # a pending input is computed first; the weights are the trace's even after training
    opt = lt.optim.SGD(model.parameters(), lr=0.5)
    model(lt.from_numpy(x)).sum().backward()
    opt.step()
    lt.mark_step()
    assert np.abs(mlp_ref(model, x) - want).max() > 1e-3  # the model moved
    y = traced(lt.from_numpy(x) * 1.0)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    assert not y.requires_grad
    # saved and loaded, by path and through a file object
    path = tmp_path / "mlp.ltp"
    traced.save(path)
    loaded = lt.jit.load(path)
    np.testing.assert_allclose(loaded(lt.from_numpy(x)).numpy(), want, rtol=1e-5, atol=1e-6)
    buf = io.BytesIO()
    lt.jit.save(traced, buf)
    buf.seek(0)
    again = lt.jit.load(buf, map_location="cpu")
    np.testing.assert_allclose(again(lt.from_numpy(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_several_inputs_and_outputs():
    def f(a, b):
        return (a * b).sum(1), a - b

    a = RNG.standard_normal((3, 2))
    b = RNG.standard_normal((3, 2))
    traced = lt.jit.trace(f, (lt.zeros(3, 2, dtype=lt.float64), lt.ones(3, 2, dtype=lt.float64)))
    s, d = traced(lt.from_numpy(a), lt.from_numpy(b))
    np.testing.assert_allclose(s.numpy(), (a * b).sum(1))
    np.testing.assert_allclose(d.numpy(), a - b)
    assert s.dtype == lt.float64


def test_errors_name_the_python_function(tmp_path):
    traced = lt.jit.trace(lambda a: a * 2.0, lt.zeros(2, 4))
    with pytest.raises(lt.LazyTensorError, match=r"lazytensor.jit .*input 0 is float32 \[3, 4\], "
                       r"the program takes float32 \[2, 4\]"):
        traced(lt.zeros(3, 4))
    with pytest.raises(lt.LazyTensorError, match=r"input 0 is int64 \[2, 4\]"):
        traced(lt.zeros(2, 4, dtype=lt.int64))
    with pytest.raises(TypeError, match="takes 1 input tensors, got 2"):
        traced(lt.zeros(2, 4), lt.zeros(2, 4))
    with pytest.raises(lt.LazyTensorError, match="lazytensor.jit.trace: .*holds no pending graph"):
        lt.jit.trace(lambda a: a, lt.zeros(2))
    with pytest.raises(TypeError, match="lazytensor.jit.trace: the traced function's result"):
        lt.jit.trace(lambda a: 3, lt.zeros(2))
    with pytest.raises(TypeError, match="lazytensor.jit.trace: example_inputs"):
        lt.jit.trace(lambda a: a, np.zeros(2))
    with pytest.raises(lt.LazyTensorError, match="lazytensor.jit.load: .*missing.ltp"):
        lt.jit.load(tmp_path / "missing.ltp")
    bad = tmp_path / "bad.ltp"
    bad.write_bytes(b"not a program")
    with pytest.raises(lt.LazyTensorError, match="lazytensor.jit.load: "):
        lt.jit.load(bad)
    with pytest.raises(TypeError, match="lazytensor.jit.save: expected a traced program"):
        lt.jit.save(lambda a: a, tmp_path / "x.ltp")


def test_eager_mode_from_python_runs_each_op_and_trace_still_works():
    assert not lt.is_eager()
    x = lt.from_numpy(np.arange(4.0, dtype=np.float32))
    lt.wait_device_ops()
    before = lt.metric("ExecuteTime")["count"]
    lt.set_eager(True)
    try:
        assert lt.is_eager()
        y = (x + 1.0) * 2.0
        lt.wait_device_ops()
        assert lt.metric("ExecuteTime")["count"] >= before + 2  # ran without a read
        traced = lt.jit.trace(lambda a: a * 3.0, x)  # eager is off while tracing
        assert lt.is_eager()
        np.testing.assert_array_equal(traced(x).numpy(), np.arange(4.0) * 3)
    finally:
        lt.set_eager(False)
    assert not lt.is_eager()
    np.testing.assert_array_equal(y.numpy(), (np.arange(4.0) + 1) * 2)
    lt.wait_device_ops()
    before = lt.metric("ExecuteTime")["count"]
    z = x + 1.0
    lt.wait_device_ops()
    assert lt.metric("ExecuteTime")["count"] == before  # lazy again: nothing ran
    np.testing.assert_array_equal(z.numpy(), np.arange(4.0) + 1)
