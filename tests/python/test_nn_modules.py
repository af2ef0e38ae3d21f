"""lazytensor.nn's torch-style Module and layers: registration, state_dict,
modes, and each layer's and loss's values (numpy oracles of torch 1.13's
formulas) and gradients."""
from collections import OrderedDict

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F

RNG = np.random.default_rng(5)


def close(t, want, tol=1e-5):
    np.testing.assert_allclose(t.numpy(), want, rtol=tol, atol=tol)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
        self.scale = nn.Parameter(lt.tensor([2.0]))
        self.register_buffer("offset", lt.tensor([0.5]))
        self.register_buffer("scratch", lt.tensor([9.0]), persistent=False)
        self.shared = self.body[0]  # the same module twice: its parameters once
        self.note = lt.tensor([1.0])  # a plain tensor attribute: not registered

    def forward(self, x):
        return self.body(x) * self.scale + self.offset


# ---- Module
def test_registration_by_attribute():
    lt.manual_seed(1)
    m = Net()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "body.0.weight", "body.0.bias"]
    assert [n for n, _ in m.named_buffers()] == ["offset", "scratch"]
    assert len(m.parameters()) == 3 and m.parameters()[1] is m.body[0].weight
    assert [n for n, _ in m.named_modules()] == ["", "body", "body.0", "body.1"]
    # torch saves a module held twice under both paths
    assert list(m.state_dict()) == ["scale", "offset", "body.0.weight", "body.0.bias",
                                    "shared.weight", "shared.bias"]
    assert all(p.requires_grad for p in m.parameters())
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'scale'"):
        m.scale = lt.tensor([1.0])
    m.scale = nn.Parameter(lt.tensor([3.0]))  # replaced, still registered
    assert m.parameters()[0].numpy()[0] == 3.0
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nothing'"):
        m.nothing


def test_reassigned_layer_weight_is_used():
    lin = nn.Linear(2, 2)
    w = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    lin.weight = nn.Parameter(lt.from_numpy(w))
    lin.bias = nn.Parameter(lt.zeros(2))
    x = np.array([[1.0, 1.0]], np.float32)
    close(lin(lt.from_numpy(x)), x @ w.T)  # torch's layout: [out, in]


def test_train_eval_reach_every_submodule():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5)))
    assert m.training and m[1][0].training
    m.eval()
    assert not m.training and not m[1][0].training
    x = lt.ones(4, 2)
    close(m[1](x), np.ones((4, 2)))  # dropout off in eval mode
    m.train()
    assert m[1][0].training


def test_zero_grad_zeroes_or_drops():
    m = nn.Linear(3, 2)
    m(lt.ones(1, 3)).sum().backward()
    m.zero_grad()  # torch 1.13: zeros
    close(m.weight.grad, np.zeros((2, 3)))
    m.zero_grad(set_to_none=True)
    assert m.weight.grad is None and m.bias.grad is None


def test_state_dict_round_trip_and_errors():
    lt.manual_seed(2)
    a, b = Net(), Net()
    x = lt.from_numpy(RNG.standard_normal((5, 4)).astype(np.float32))
    lt.mark_step()
    sd = a.state_dict()
    assert all(not v.requires_grad for v in sd.values())  # detached values
    res = b.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    np.testing.assert_array_equal(b(x).numpy(), a(x).numpy())
    # values as of the call: a later update of the parameter does not change them
    before = sd["scale"].numpy()
    a.scale.assign_(a.scale * 10.0)
    lt.mark_step()
    np.testing.assert_array_equal(sd["scale"].numpy(), before)
    # numpy values are accepted
    b.load_state_dict(OrderedDict((k, v.numpy()) for k, v in a.state_dict().items()))
    np.testing.assert_array_equal(b.scale.numpy(), a.scale.numpy())
    bad = dict(sd)
    del bad["offset"]
    bad["extra"] = sd["scale"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "offset"'):
        b.load_state_dict(bad)
    with pytest.raises(RuntimeError, match='Unexpected key\\(s\\) in state_dict: "extra"'):
        b.load_state_dict(bad)
    res = b.load_state_dict(bad, strict=False)
    assert res.missing_keys == ["offset"] and res.unexpected_keys == ["extra"]
    wrong = dict(sd, scale=np.zeros(2, np.float32))
    with pytest.raises(RuntimeError, match="size mismatch for scale"):
        b.load_state_dict(wrong)


# ---- layers
def test_linear_is_x_wt_plus_b_with_torch_layout_and_init():
    lt.manual_seed(3)
    lin = nn.Linear(16, 3)
    x = RNG.standard_normal((2, 16)).astype(np.float32)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert w.shape == (3, 16) and b.shape == (3,)  # torch's [out, in]
    # kaiming_uniform_(a=sqrt(5)) and the bias: U(-1/sqrt(in), 1/sqrt(in)) = U(-0.25, 0.25)
    assert np.abs(w).max() <= 0.25 and np.abs(b).max() <= 0.25
    assert w.std() > 0.1  # spread over the range (U(-0.25, 0.25) has std 0.144)
    assert lin.weight.requires_grad and lin.weight.grad is None  # a leaf parameter
    close(lin(lt.from_numpy(x)), x @ w.T + b)
    # 3-d input: the last axis is the features, as torch
    x3 = RNG.standard_normal((2, 5, 16)).astype(np.float32)
    close(lin(lt.from_numpy(x3)), x3 @ w.T + b)
    assert nn.Linear(4, 2, bias=False).bias is None
    assert [n for n, _ in nn.Linear(4, 2, bias=False).named_parameters()] == ["weight"]
    sd = nn.Linear(5, 7).state_dict()
    assert [(k, tuple(v.shape)) for k, v in sd.items()] == [("weight", (7, 5)), ("bias", (7,))]


def test_linear_loads_a_torch_state_dict_and_matches_its_outputs():
    # a torch.nn.Linear(4, 3)'s state_dict as numpy: weight [3, 4], bias [3]
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    lin = nn.Linear(4, 3)
    lin.load_state_dict({"weight": w, "bias": b})
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    close(lin(lt.from_numpy(x)), x @ w.T + b)  # torch's F.linear
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        lin.load_state_dict({"weight": w.T.copy(), "bias": b})


def test_linear_gradients_have_torch_layout():
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    g = RNG.standard_normal((5, 3)).astype(np.float32)
    for lin in (nn.Linear(4, 3), nn.Linear(4, 3, bias=False)):
        lin.weight = nn.Parameter(lt.from_numpy(w))
        if lin.bias is not None:
            lin.bias = nn.Parameter(lt.from_numpy(b))
        xt = lt.from_numpy(x).requires_grad_()
        (lin(xt) * lt.from_numpy(g)).sum().backward()
        close(lin.weight.grad, g.T @ x)  # d(x W^T)/dW = g^T x, [out, in]
        close(xt.grad, g @ w)
        if lin.bias is not None:
            close(lin.bias.grad, g.sum(0))


def test_functional_linear_matches_the_module():
    w = RNG.standard_normal((3, 4)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32)
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    close(F.linear(lt.from_numpy(x), lt.from_numpy(w), lt.from_numpy(b)), x @ w.T + b)
    close(F.linear(lt.from_numpy(x), lt.from_numpy(w)), x @ w.T)
    with pytest.raises(lt.LazyTensorError, match=r"linear: mat1 and mat2 shapes cannot be "
                       r"multiplied \(2x3 and 4x3\)"):
        F.linear(lt.from_numpy(x[:, :3].copy()), lt.from_numpy(w))
    with pytest.raises(lt.LazyTensorError, match=r"\(10x3 and 4x3\)"):
        nn.Linear(4, 3)(lt.ones(2, 5, 3))


def conv_ref(x, w, b, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, o, h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1))
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + kh, j:j + kw], w)
    return out + b[None, :, None, None]


def test_conv2d_module():
    conv = nn.Conv2d(2, 3, 3, padding=1)
    assert conv.weight.shape == (3, 2, 3, 3) and conv.bias.shape == (3,)
    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    close(conv(lt.from_numpy(x)), conv_ref(x, conv.weight.numpy(), conv.bias.numpy(), 1), 1e-4)
    same = nn.Conv2d(2, 3, 5, padding="same", bias=False)
    assert same(lt.from_numpy(x)).shape == (2, 3, 5, 5) and same.bias is None
    with pytest.raises(NotImplementedError, match="padding_mode"):
        nn.Conv2d(2, 3, 3, padding_mode="reflect")


def test_batchnorm2d_training_eval_and_running_statistics():
    bn = nn.BatchNorm2d(3, momentum=0.2)
    x = (RNG.standard_normal((4, 3, 2, 2)) * 3 + 1).astype(np.float32)
    mean, var = x.mean((0, 2, 3)), x.var((0, 2, 3))
    want = (x - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    close(bn(lt.from_numpy(x)), want, 1e-4)
    lt.mark_step()
    unbiased = x.var((0, 2, 3), ddof=1)
    close(bn.running_mean, 0.2 * mean, 1e-5)
    close(bn.running_var, 0.8 + 0.2 * unbiased, 1e-4)
    assert bn.state_dict()["num_batches_tracked"].item() == 1
    assert "running_mean" not in [n for n, _ in bn.named_parameters()]
    bn.eval()
    rm, rv = 0.2 * mean, 0.8 + 0.2 * unbiased
    close(bn(lt.from_numpy(x)), (x - rm[None, :, None, None]) / np.sqrt(rv[None, :, None, None]
                                                                         + 1e-5), 1e-4)
    other = nn.BatchNorm2d(3)
    other.load_state_dict(bn.state_dict())
    assert other.state_dict()["num_batches_tracked"].item() == 1
    close(other.running_var, rv, 1e-4)
    with pytest.raises(ValueError, match="expected 4D input"):
        bn(lt.ones(3, 3))


def test_layernorm_and_its_gradient():
    ln = nn.LayerNorm(4)
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    y = ln(lt.from_numpy(x))
    (y * lt.from_numpy(np.arange(4, dtype=np.float32))).sum().backward()
    mu, var = x.mean(1, keepdims=True), x.var(1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    close(y, xhat)
    close(ln.weight.grad, (xhat * np.arange(4)).sum(0), 1e-4)  # d/dweight = sum xhat * dy
    close(ln.bias.grad, np.full(4, 3.0) * np.arange(4), 1e-5)
    assert nn.LayerNorm(4, elementwise_affine=False).weight is None


def test_embedding_padding_idx():
    e = nn.Embedding(5, 3, padding_idx=1)
    idx = np.array([[1, 4], [1, 0]])
    y = e(lt.tensor(idx))
    (y * 2.0).sum().backward()
    w = e.weight.numpy()
    np.testing.assert_array_equal(w[1], np.zeros(3))  # zero at init
    close(y, w[idx])
    g = np.zeros((5, 3))
    np.add.at(g, idx.ravel(), 2.0)
    g[1] = 0  # padding_idx gets no gradient
    close(e.weight.grad, g)


def test_pooling_flatten_activations():
    x = RNG.standard_normal((1, 2, 4, 4)).astype(np.float32)
    blocks = x.reshape(1, 2, 2, 2, 2, 2)
    close(nn.MaxPool2d(2)(lt.from_numpy(x)), blocks.max((3, 5)))
    close(nn.AvgPool2d(2)(lt.from_numpy(x)), blocks.mean((3, 5)), 1e-6)
    assert nn.Flatten()(lt.from_numpy(x)).shape == (1, 32)
    close(nn.Tanh()(lt.from_numpy(x)), np.tanh(x))
    close(nn.Sigmoid()(lt.from_numpy(x)), 1 / (1 + np.exp(-x)))
    close(nn.Softmax(dim=1)(lt.from_numpy(x)), np.exp(x) / np.exp(x).sum(1, keepdims=True))
    c = np.sqrt(2 / np.pi)
    close(nn.GELU("tanh")(lt.from_numpy(x)), 0.5 * x * (1 + np.tanh(c * (x + 0.044715 * x**3))))


def test_containers():
    seq = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 3)), ("act", nn.ReLU())]))
    assert list(seq.state_dict()) == ["fc.weight", "fc.bias"]
    assert len(seq) == 2 and isinstance(seq[-1], nn.ReLU) and len(seq[:1]) == 1
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    assert len(ml.parameters()) == 6 and list(ml.state_dict())[-1] == "2.bias"
    md = nn.ModuleDict({"a": nn.Linear(1, 1)})
    assert "a" in md and [n for n, _ in md.named_parameters()] == ["a.weight", "a.bias"]


# ---- losses
def log_softmax(z):
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_ignore_index_label_smoothing(reduction):
    z = RNG.standard_normal((5, 4)).astype(np.float32)
    y = np.array([0, 3, -100, 1, 3])
    ls = 0.1
    lp = log_softmax(z)
    keep = y != -100
    per = np.where(keep, -(1 - ls) * lp[np.arange(5), np.where(keep, y, 0)]
                   - ls / 4 * lp.sum(1), 0.0)
    want = {"mean": per.sum() / keep.sum(), "sum": per.sum(), "none": per}[reduction]
    got = nn.CrossEntropyLoss(reduction=reduction, label_smoothing=ls)(lt.from_numpy(z),
                                                                       lt.from_numpy(y))
    close(got, want)


def test_cross_entropy_gradient_and_probability_targets():
    z = RNG.standard_normal((3, 4)).astype(np.float32)
    y = np.array([2, 0, 3])
    tz = nn.Parameter(lt.from_numpy(z))
    F.cross_entropy(tz, lt.from_numpy(y)).backward()
    p = np.exp(log_softmax(z))
    close(tz.grad, (p - np.eye(4)[y]) / 3)
    t = RNG.random((3, 4)).astype(np.float32)
    t /= t.sum(1, keepdims=True)
    close(F.cross_entropy(lt.from_numpy(z), lt.from_numpy(t), label_smoothing=0.2),
          -((t * 0.8 + 0.05) * log_softmax(z)).sum(1).mean())


def test_nll_mse_bce_losses():
    z = RNG.standard_normal((4, 3)).astype(np.float32)
    lp = log_softmax(z)
    y = np.array([0, 2, 1, 2])
    close(nn.NLLLoss(ignore_index=2)(lt.from_numpy(lp), lt.from_numpy(y)),
          -(lp[0, 0] + lp[2, 1]) / 2)
    t = RNG.standard_normal((4, 3)).astype(np.float32)
    close(nn.MSELoss(reduction="sum")(lt.from_numpy(z), lt.from_numpy(t)), ((z - t) ** 2).sum(),
          1e-4)
    yb = (RNG.random((4, 3)) > 0.5).astype(np.float32)
    pw = np.array([1.0, 2.0, 0.5], np.float32)
    w = RNG.random((4, 3)).astype(np.float32)
    sp = np.log1p(np.exp(-np.abs(z))) + np.maximum(-z, 0)  # -log sigmoid(z)
    per = w * ((1 - yb) * z + (1 + (pw - 1) * yb) * sp)
    got = nn.BCEWithLogitsLoss(weight=lt.from_numpy(w), pos_weight=lt.from_numpy(pw))(
        lt.from_numpy(z), lt.from_numpy(yb))
    close(got, per.mean())
    with pytest.raises(NotImplementedError, match="CrossEntropyLoss: a class weight"):
        nn.CrossEntropyLoss(weight=lt.ones(3))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.mse_loss(lt.ones(2), lt.ones(2), reduction="avg")


def test_clip_grad_norm_():
    p = nn.Parameter(lt.tensor([3.0, 0.0]))
    q = nn.Parameter(lt.tensor([4.0]))
    ((p * p).sum() + (q * q).sum()).backward()  # grads (6, 0), (8): norm 10
    total = nn.utils.clip_grad_norm_([p, q], 5.0)
    close(total, 10.0)
    scale = 5.0 / (10.0 + 1e-6)
    close(p.grad, [6 * scale, 0.0])
    close(q.grad, [8 * scale])
    r = nn.Parameter(lt.tensor([0.3]))
    (r * r).sum().backward()
    close(nn.utils.clip_grad_norm_(r, 1.0), 0.6)
    close(r.grad, [0.6])  # under max_norm: unchanged
