"""backward() and .grad against central finite differences (f64), and the
optimizers' first steps against hand-computed updates."""
import numpy as np
import pytest

import lazytensor as lt

RNG = np.random.default_rng(11)


def fd_grad(f, x, eps=1e-6):
    """Central differences of the scalar f (numpy in, float out) at x."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def lt_value(fn, x):
    return fn(lt.from_numpy(x)).item()


W = RNG.standard_normal((4, 3))
CASES = {
    "sum_mul": lambda t: (t * t * 3.0).sum(),
    "matmul_tanh": lambda t: (t @ lt.from_numpy(W)).tanh().sum(),
    "exp_log": lambda t: (t.exp() + 1.0).log().mean(),
    "div_sqrt": lambda t: (t / (t * t + 1.0).sqrt()).sum(),
    "softmax": lambda t: (t.softmax(1) * lt.from_numpy(np.arange(12.0).reshape(3, 4))).sum(),
    "logsumexp": lambda t: t.logsumexp(1).sum(),
    "sigmoid_gelu": lambda t: (t.sigmoid() + t.gelu()).sum(),
    "slice_reshape": lambda t: (t[1:, ::2].reshape(-1) ** 2).sum(),
    "max_min": lambda t: t.max(1).values.sum() - t.min(0).values.sum() + t.amax((0, 1)),
    "var_norm": lambda t: t.var(1).sum() + t.norm(),
    "cross_entropy": lambda t: lt.nn.cross_entropy(t, lt.tensor([0, 3, 1])),
    "transpose_cat": lambda t: (lt.cat([t, t.T @ t], 0) ** 2).mean(),
    "where_abs": lambda t: lt.where(t > 0, t * 2.0, t.abs() * 3.0).sum(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_matches_finite_differences(name):
    fn = CASES[name]
    x0 = RNG.standard_normal((3, 4))
    x = lt.from_numpy(x0)
    x.requires_grad = True
    fn(x).backward()
    g = x.grad
    assert g is not None and g.shape == (3, 4)
    np.testing.assert_allclose(g.numpy(), fd_grad(lambda v: lt_value(fn, v), x0), rtol=1e-4,
                               atol=1e-6)


def test_grad_accumulates_and_zero_grad():
    x = lt.tensor([1.0, 2.0], dtype=lt.F64, requires_grad=True)
    (x * x).sum().backward()
    (x * 3.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [2 + 3, 4 + 3])
    x.zero_grad()
    assert x.grad is None
    assert x.requires_grad and not x.detach().requires_grad


def test_no_grad():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    with lt.no_grad():
        y = x * 2.0
    assert not y.requires_grad


def test_linear_grads_by_hand():
    lt.manual_seed(2)
    lin = lt.nn.Linear(3, 2, dtype=lt.F64)
    x = RNG.standard_normal((5, 3))
    lin(lt.from_numpy(x)).sum().backward()
    # weight [out, in] as torch: each row's grad is the sum of the inputs
    np.testing.assert_allclose(lin.weight.grad.numpy(), x.sum(0)[None, :].repeat(2, 0))
    np.testing.assert_allclose(lin.bias.grad.numpy(), [5.0, 5.0])


def test_sgd_and_adam_steps():
    p = lt.tensor([1.0, -2.0], dtype=lt.F64, requires_grad=True)
    opt = lt.nn.SGD([p], lr=0.1)
    (p * p).sum().backward()  # grad 2p
    opt.step()
    lt.mark_step()
    np.testing.assert_allclose(p.numpy(), [1 - 0.2, -2 + 0.4])
    assert p.grad is None and opt.steps == 1
    q = lt.tensor([1.0, -2.0], dtype=lt.F64, requires_grad=True)
    adam = lt.nn.Adam([q], lr=0.01)
    (q * q).sum().backward()
    adam.step()
    lt.mark_step()
    # Adam's first step moves each entry by lr * sign(grad) (up to eps)
    np.testing.assert_allclose(q.numpy(), [1 - 0.01, -2 + 0.01], rtol=1e-6)
    adam.lr = 0.001
    assert adam.lr == 0.001


def test_training_reduces_loss():
    lt.manual_seed(4)
    x = RNG.standard_normal((32, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.ReLU(), lt.nn.Linear(8, 2))
    opt = lt.nn.Adam(model.parameters(), lr=0.05)
    tx, ty = lt.from_numpy(x), lt.from_numpy(y)
    lt.mark_step()
    first = None
    for _ in range(60):
        loss = lt.nn.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        lt.mark_step()
        v = loss.item()
        first = v if first is None else first
    assert v < 0.5 * first


def test_adamw_clip_assign_save_load(tmp_path):
    p = lt.tensor([3.0, 4.0], dtype=lt.F64, requires_grad=True)
    (p * p).sum().backward()  # grad (6, 8): norm 10
    norm = lt.nn.clip_grad_norm_([p], 1.0)
    np.testing.assert_allclose(norm.item(), 10.0)
    np.testing.assert_allclose(p.grad.numpy(), [0.6, 0.8], rtol=1e-5)
    opt = lt.nn.AdamW([p], lr=0.1, weight_decay=0.5)
    opt.step()
    lt.mark_step()
    # decay first (p *= 1 - lr * wd), then Adam's first step (lr * sign(grad))
    np.testing.assert_allclose(p.numpy(), [3 * 0.95 - 0.1, 4 * 0.95 - 0.1], rtol=1e-6)
    q = lt.zeros(2, dtype=lt.F64)
    q.assign_(p * 2.0)
    lt.sync(q)
    np.testing.assert_allclose(q.numpy(), 2 * p.numpy())
    path = str(tmp_path / "params.bin")
    lt.nn.save(path, [p, q])
    a, b = lt.zeros(2, dtype=lt.F64), lt.zeros(2, dtype=lt.F64)
    lt.nn.load(path, [a, b])
    np.testing.assert_array_equal(a.numpy(), p.numpy())
    np.testing.assert_array_equal(b.numpy(), q.numpy())
    with pytest.raises(lt.LazyTensorError):
        lt.nn.load(str(tmp_path / "missing.bin"), [a])
