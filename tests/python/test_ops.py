"""Every public op of the binding against numpy (or hand values where numpy has
no such function)."""
import math
import os
import re

import numpy as np
import pytest

import lazytensor as lt

RNG = np.random.default_rng(7)
A = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal((3, 4)).astype(np.float32)
P = (RNG.random((3, 4)) + 0.5).astype(np.float32)  # positive


def close(t, ref, tol=1e-5):
    got = t.numpy()
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


def test_roundtrip_dtypes():
    for dt in (np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8, np.int8):
        a = (RNG.standard_normal((2, 3)) * 5).astype(dt)
        t = lt.from_numpy(a)
        assert t.shape == (2, 3)
        got = t.numpy()
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)
    # a non-contiguous view is copied in its logical order
    a = np.arange(12, dtype=np.float32).reshape(3, 4).T
    np.testing.assert_array_equal(lt.from_numpy(a).numpy(), a)
    # torch.tensor's dtypes for Python data
    assert lt.tensor([1.5]).dtype == lt.F32
    assert lt.tensor([1]).dtype == lt.I64
    assert lt.tensor([True]).dtype == lt.BOOL
    assert lt.tensor(2.5).shape == () and lt.tensor(2.5).item() == 2.5


def test_creation():
    close(lt.zeros(2, 3), np.zeros((2, 3)))
    close(lt.ones((2, 3), dtype=lt.F64), np.ones((2, 3)))
    close(lt.full((2,), 7), [7, 7])
    close(lt.arange(5), np.arange(5))
    close(lt.arange(0, 1, 0.25), np.arange(0, 1, 0.25))
    close(lt.eye(3), np.eye(3))
    lt.manual_seed(3)
    u = lt.rand(1000).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.05
    n = lt.randn(2000).numpy()
    assert abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    assert sorted(lt.randperm(10).numpy().tolist()) == list(range(10))


@pytest.mark.parametrize("op,ref", [
    (lambda a, b: a + b, np.add), (lambda a, b: a - b, np.subtract),
    (lambda a, b: a * b, np.multiply), (lambda a, b: a / b, np.divide),
    (lambda a, b: a.maximum(b), np.maximum), (lambda a, b: a.minimum(b), np.minimum),
])
def test_binary(op, ref):
    close(op(lt.from_numpy(A), lt.from_numpy(B)), ref(A, B))
    # broadcasting and Python scalars on either side
    close(op(lt.from_numpy(A), lt.from_numpy(B[0])), ref(A, B[0]))
    close(op(lt.from_numpy(A), 2.5), ref(A, np.float32(2.5)))
    if ref not in (np.maximum, np.minimum):  # methods: the tensor comes first
        close(op(2.5, lt.from_numpy(P)), ref(np.float32(2.5), P))


def test_pow_mod_floordiv():
    close(lt.from_numpy(P) ** 2, P ** 2, 1e-4)
    close(lt.from_numpy(P).pow(lt.from_numpy(P)), P ** P, 1e-4)
    a = np.array([-7, 7, 5, -3], dtype=np.int64)
    b = np.array([2, -2, 3, 3], dtype=np.int64)
    close(lt.from_numpy(a) % lt.from_numpy(b), np.mod(a, b))
    close(lt.from_numpy(a) // lt.from_numpy(b), np.floor_divide(a, b))


def test_scalar_promotion():
    assert (lt.from_numpy(A) + 2.5).dtype == lt.F32  # a wrapped number keeps f32
    assert (lt.tensor([1, 2], dtype=lt.I32) + 1).dtype == lt.I32
    assert (lt.tensor([1, 2], dtype=lt.I32) + 1.5).dtype == lt.F32
    assert (lt.tensor([1, 2]) / 2).dtype == lt.F32  # true division


def test_comparisons_and_logic():
    a, b = lt.from_numpy(A), lt.from_numpy(B)
    for op, ref in [(a == b, A == B), (a != b, A != B), (a < b, A < B), (a <= b, A <= B),
                    (a > b, A > B), (a >= b, A >= B), (a > 0, A > 0)]:
        assert op.dtype == lt.BOOL
        np.testing.assert_array_equal(op.numpy(), ref)
    m, n = A > 0, B > 0
    np.testing.assert_array_equal(((a > 0) & (b > 0)).numpy(), m & n)
    np.testing.assert_array_equal(((a > 0) | (b > 0)).numpy(), m | n)
    np.testing.assert_array_equal((~(a > 0)).numpy(), ~m)
    close(lt.where(a > 0, a, b), np.where(m, A, B))
    close(lt.where(a > 0, a, 0.0), np.where(m, A, 0))
    close(a.masked_fill(a > 0, -1), np.where(m, -1, A))


UNARY = [
    ("neg", np.negative, A), ("abs", np.abs, A), ("sign", np.sign, A),
    ("relu", lambda x: np.maximum(x, 0), A), ("floor", np.floor, A * 3), ("ceil", np.ceil, A * 3),
    ("round", np.round, A * 3), ("exp", np.exp, A), ("log", np.log, P), ("log1p", np.log1p, P),
    ("sqrt", np.sqrt, P), ("rsqrt", lambda x: 1 / np.sqrt(x), P), ("sin", np.sin, A),
    ("cos", np.cos, A), ("tanh", np.tanh, A), ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), A),
    ("erf", np.vectorize(math.erf), A),
    ("gelu", np.vectorize(lambda x: 0.5 * x * (1 + math.erf(x / math.sqrt(2)))), A),
    ("gelu_tanh", lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
     A),
]


@pytest.mark.parametrize("name,ref,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, ref, x):
    close(getattr(lt.from_numpy(x), name)(), ref(x), 2e-5)


def _table_rows(macro):
    """The names of the rows of one table of include/lazytensor_ops.h in this tree."""
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "include", "lazytensor_ops.h")) as f:
        text = f.read()
    start = text.index("#define " + macro + "(X)")
    ends = [i for i in (text.find("#define", start + 1), text.find("clang-format on", start)) if i >= 0]
    body = text[start:min(ends)]
    return re.findall(r"^\s*X\((\w+),", body, re.M)


@pytest.mark.parametrize("macro,names", [("LT_UNARY_OPS", lt._lib.UNARY),
                                         ("LT_BINARY_OPS", lt._lib.BINARY),
                                         ("LT_REDUCE_OPS", lt._lib.REDUCE)])
def test_binding_has_the_tables_ops(macro, names):
    # The binding takes its lists from the library; they must be this tree's
    # table (a stale library would show here), and each op must be a method.
    assert names == _table_rows(macro)
    for n in names:
        assert callable(getattr(lt.Tensor, n)), n


def test_unary_references_name_table_ops():
    assert {u[0] for u in UNARY} <= set(lt._lib.UNARY)


def test_special_values():
    x = np.array([1.0, np.nan, np.inf, -np.inf], dtype=np.float32)
    t = lt.from_numpy(x)
    np.testing.assert_array_equal(t.isnan().numpy(), np.isnan(x))
    np.testing.assert_array_equal(t.isinf().numpy(), np.isinf(x))
    np.testing.assert_array_equal(t.isfinite().numpy(), np.isfinite(x))
    close(lt.from_numpy(A).clamp(-0.5, 0.5), np.clip(A, -0.5, 0.5))
    close(lt.from_numpy(A).clamp(min=0), np.maximum(A, 0))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod"])
def test_reductions(name):
    a = lt.from_numpy(A)
    ref = getattr(np, name)
    close(getattr(a, name)(), ref(A), 1e-4)
    # max / min with a dim give torch's (values, indices) pair: the values here
    pick = (lambda r: r.values) if name in ("max", "min") else (lambda r: r)
    close(pick(getattr(a, name)(1)), ref(A, axis=1), 1e-4)
    close(pick(getattr(a, name)(0, keepdim=True)), ref(A, axis=0, keepdims=True), 1e-4)


def test_other_reductions():
    a = lt.from_numpy(A)
    close(a.logsumexp(1), np.log(np.exp(A).sum(1)), 1e-5)
    close(a.var(1), A.var(1, ddof=1), 1e-5)
    close(a.std(), A.std(ddof=1), 1e-5)
    close(a.var(0, correction=0), A.var(0), 1e-5)
    close(a.norm(), np.linalg.norm(A), 1e-5)
    close(a.norm(1, dim=1), np.abs(A).sum(1), 1e-5)
    np.testing.assert_array_equal((a > 0).any(1).numpy(), (A > 0).any(1))
    np.testing.assert_array_equal((a > -5).all().numpy(), (A > -5).all())
    np.testing.assert_array_equal(a.argmax(1).numpy(), A.argmax(1))
    np.testing.assert_array_equal(a.argmin(0).numpy(), A.argmin(0))
    e = np.exp(A - A.max(1, keepdims=True))
    close(a.softmax(1), e / e.sum(1, keepdims=True), 1e-5)
    close(a.log_softmax(1), np.log(e / e.sum(1, keepdims=True)), 1e-5)
    close(a.cumsum(1), np.cumsum(A, 1), 1e-5)
    assert lt.tensor([True, False, True]).sum().dtype == lt.I64


def test_sort_topk():
    a = lt.from_numpy(A)
    v, i = a.sort(1)
    close(v, np.sort(A, 1))
    np.testing.assert_array_equal(i.numpy(), np.argsort(A, 1, kind="stable"))
    np.testing.assert_array_equal(a.argsort(1, descending=True).numpy(),
                                  np.argsort(-A, 1, kind="stable"))
    v, i = a.topk(2, 1)
    close(v, -np.sort(-A, 1)[:, :2])


def test_matmul():
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    w = RNG.standard_normal((4, 5)).astype(np.float32)
    close(lt.from_numpy(x) @ lt.from_numpy(w), x @ w, 1e-4)
    v = RNG.standard_normal(4).astype(np.float32)
    close(lt.from_numpy(w.T) @ lt.from_numpy(v), w.T @ v, 1e-4)
    close(lt.from_numpy(v) @ lt.from_numpy(v), v @ v, 1e-4)


def test_shape_ops():
    a = lt.from_numpy(A)
    close(a.reshape(4, 3), A.reshape(4, 3))
    close(a.reshape(-1), A.reshape(-1))
    close(a.T, A.T)
    close(a.transpose(0, 1), A.T)
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    close(lt.from_numpy(x).permute(2, 0, 1), x.transpose(2, 0, 1))
    close(lt.from_numpy(x).flatten(1), x.reshape(2, 12))
    close(a.unsqueeze(0), A[None])
    close(a.unsqueeze(0).squeeze(0), A)
    close(lt.from_numpy(A[0]).expand(3, 4), np.broadcast_to(A[0], (3, 4)))
    close(lt.cat([a, lt.from_numpy(B)], 1), np.concatenate([A, B], 1))
    close(lt.stack([a, lt.from_numpy(B)]), np.stack([A, B]))
    close(a.flip(1), A[:, ::-1])
    close(a.roll(1, 1), np.roll(A, 1, 1))
    close(a.repeat(2, 1), np.tile(A, (2, 1)))
    close(a.pad([1, 0, 0, 2], 9.0), np.pad(A, ((1, 0), (0, 2)), constant_values=9))
    parts = a.split(2, 1)
    assert len(parts) == 2
    close(parts[1], A[:, 2:])
    close(a.chunk(3, 0)[2], A[2:])
    close(a.tril(), np.tril(A))
    close(a.triu(1), np.triu(A, 1))


def test_indexing():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = lt.from_numpy(x)
    for key in [1, -1, (0, 2), slice(1, 3), (slice(None), slice(1, None, 2)),
                (Ellipsis, 2), (1, slice(None, None, 3), -2), (None, 0), (slice(0, 10),)]:
        np.testing.assert_array_equal(t[key].numpy(), x[key])
    idx = lt.tensor([2, 0, 2])
    np.testing.assert_array_equal(t[idx].numpy(), x[[2, 0, 2]])
    np.testing.assert_array_equal(t.index_select(1, lt.tensor([3, 1])).numpy(), x[:, [3, 1]])
    g = np.array([[0, 1], [2, 0], [1, 1]], dtype=np.int64)
    np.testing.assert_array_equal(lt.from_numpy(A).gather(1, lt.from_numpy(g)).numpy(),
                                  np.take_along_axis(A, g, 1))
    np.testing.assert_array_equal(lt.tensor([0, 2]).one_hot(3).numpy(), np.eye(3)[[0, 2]])
    src = np.ones((1, 4), dtype=np.float32)
    out = lt.zeros(3, 4).scatter_add(0, lt.tensor([[2, 0, 2, 1]]), lt.from_numpy(src)).numpy()
    ref = np.zeros((3, 4), np.float32)
    ref[[2, 0, 2, 1], [0, 1, 2, 3]] += 1
    np.testing.assert_array_equal(out, ref)


def test_casts_and_items():
    a = lt.from_numpy(A * 10)
    np.testing.assert_array_equal(a.to(lt.I32).numpy(), (A * 10).astype(np.int32))
    assert a.double().dtype == lt.F64 and a.long().dtype == lt.I64
    assert lt.tensor([3]).item() == 3 and isinstance(lt.tensor([3]).item(), int)
    assert float(lt.tensor(2.5)) == 2.5
    assert np.asarray(a).shape == (3, 4)
    assert "Tensor" in repr(lt.tensor([1.0]))


def test_nn_functional():
    logits = RNG.standard_normal((4, 5)).astype(np.float32)
    labels = np.array([0, 3, 4, 1])
    lp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ref = -lp[np.arange(4), labels].mean()
    close(lt.nn.cross_entropy(lt.from_numpy(logits), lt.from_numpy(labels)), ref, 1e-5)
    close(lt.nn.nll_loss(lt.from_numpy(lp), lt.from_numpy(labels)), ref, 1e-5)
    close(lt.nn.mse_loss(lt.from_numpy(A), lt.from_numpy(B)), ((A - B) ** 2).mean(), 1e-5)
    close(lt.nn.accuracy(lt.from_numpy(logits), lt.from_numpy(labels)),
          (logits.argmax(1) == labels).mean(), 1e-6)
    q = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    s = q @ q.transpose(0, 2, 1) / 2.0
    s = s + np.triu(np.full((3, 3), -np.inf, np.float32), 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    ref = (e / e.sum(-1, keepdims=True)) @ q
    tq = lt.from_numpy(q)
    close(lt.nn.scaled_dot_product_attention(tq, tq, tq, is_causal=True), ref, 1e-5)
    w = lt.from_numpy(A)
    close(lt.nn.embedding(lt.tensor([2, 0]), w), A[[2, 0]])
    x = lt.from_numpy(A)
    assert np.array_equal(lt.nn.dropout(x, 0.5, training=False).numpy(), A)


def conv2d_ref(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", win, w)
    return out + b[None, :, None, None]


def test_conv_pool_norm():
    x = RNG.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = RNG.standard_normal(4).astype(np.float32)
    tx = lt.from_numpy(x)
    close(lt.nn.conv2d(tx, lt.from_numpy(w), lt.from_numpy(b), stride=2, padding=1),
          conv2d_ref(x, w, b, 2, 1), 1e-4)
    blocks = x.reshape(2, 3, 3, 2, 3, 2)
    close(lt.nn.max_pool2d(tx, 2), blocks.max((3, 5)))
    close(lt.nn.avg_pool2d(tx, 2), blocks.mean((3, 5)), 1e-6)
    close(lt.nn.adaptive_avg_pool2d(tx, 1), x.mean((2, 3), keepdims=True), 1e-6)
    # conv_transpose2d of a 1x1 kernel, stride 1: a per-pixel matmul
    wt = RNG.standard_normal((3, 2, 1, 1)).astype(np.float32)
    close(lt.nn.conv_transpose2d(tx, lt.from_numpy(wt)),
          np.einsum("nchw,co->nohw", x, wt[:, :, 0, 0]), 1e-5)
    m, v = x.mean((0, 2, 3)), x.var((0, 2, 3))
    ref = (x - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + 1e-5)
    close(lt.nn.batch_norm(tx, None, None, training=True), ref, 1e-4)
    close(lt.nn.batch_norm(tx, lt.from_numpy(m), lt.from_numpy(v)), ref, 1e-4)
    lm, lv = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    close(lt.nn.layer_norm(tx, 6), (x - lm) / np.sqrt(lv + 1e-5), 1e-4)
    g = x.reshape(2, 1, -1)
    gn = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    close(lt.nn.group_norm(tx, 1), gn.reshape(x.shape), 1e-4)


def test_index_add_and_random():
    out = lt.zeros(3, 2).index_add(0, lt.tensor([2, 0, 2]), lt.ones(3, 2), alpha=2.0).numpy()
    np.testing.assert_array_equal(out, [[2, 2], [0, 0], [4, 4]])
    lt.manual_seed(9)
    draws = lt.full((2000,), 0.25).bernoulli().numpy()
    assert set(np.unique(draws)) <= {0, 1} and abs(draws.mean() - 0.25) < 0.05
    d = lt.nn.dropout(lt.ones(2000), 0.5, training=True).numpy()
    assert set(np.unique(d)) <= {0, 2} and abs(d.mean() - 1) < 0.1


def test_layers():
    lt.manual_seed(1)
    lin = lt.nn.Linear(4, 3)
    assert lin.weight.shape == (3, 4) and lin.bias.shape == (3,)  # torch's [out, in]
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    out = lin(lt.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, x @ lin.weight.numpy().T + lin.bias.numpy(), rtol=1e-5,
                               atol=1e-5)
    bound = 1 / math.sqrt(4)
    assert np.abs(lin.weight.numpy()).max() <= bound
    model = lt.nn.Sequential(lin, lt.nn.ReLU(), lt.nn.Linear(3, 2))
    assert len(model.parameters()) == 4
    r = model(lt.from_numpy(x)).numpy()
    h = np.maximum(out, 0)
    np.testing.assert_allclose(r, h @ model[2].weight.numpy().T + model[2].bias.numpy(),
                               rtol=1e-5, atol=1e-5)
    emb = lt.nn.Embedding(5, 2)
    np.testing.assert_array_equal(emb(lt.tensor([4, 1])).numpy(), emb.weight.numpy()[[4, 1]])


def test_metrics():
    (lt.from_numpy(A) * 3).numpy()
    rep = lt.metrics_report()
    assert "CompileTime" in rep or "ExecuteTime" in rep
    assert lt.counter("UncachedCompile") >= 1
    assert lt.metric("ExecuteTime")["count"] >= 1
    with pytest.raises(lt.LazyTensorError):
        lt.counter("NoSuchCounter")
