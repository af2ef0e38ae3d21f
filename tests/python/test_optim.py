"""lazytensor.optim against torch 1.13's update rules written out in numpy
(torch.optim's single-tensor SGD / Adam / AdamW, step for step), and its
torch-style param_groups, zero_grad and state_dict."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.optim as optim
from lazytensor import nn

RNG = np.random.default_rng(11)
P0 = [RNG.standard_normal((3, 4)), RNG.standard_normal(4)]
GRADS = [[RNG.standard_normal(p.shape) for p in P0] for _ in range(4)]
LRS = [0.1, 0.05, 0.05, 0.02]


def params():
    return [nn.Parameter(lt.tensor(p)) for p in P0]  # float64


def set_grads(ps, gs):
    """Gives each parameter the grad g exactly: backward of sum(p * g)."""
    loss = None
    for p, g in zip(ps, gs):
        t = (p * lt.tensor(g)).sum()
        loss = t if loss is None else loss + t
    loss.backward()


def run(opt, ps, steps=4, lrs=LRS):
    for s in range(steps):
        opt.zero_grad()
        set_grads(ps, GRADS[s])
        for g in opt.param_groups:
            g["lr"] = lrs[s]
        opt.step()
        lt.mark_step()
    return [p.numpy() for p in ps]


# ---- torch 1.13's rules (torch/optim/sgd.py, adam.py, adamw.py), one parameter
def sgd_ref(p, grads, lrs, momentum=0.0, wd=0.0, nesterov=False):
    p, buf = p.copy(), None
    for g, lr in zip(grads, lrs):
        g = g + wd * p if wd else g
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
    return p, buf


def adam_ref(p, grads, lrs, betas=(0.9, 0.999), eps=1e-8, wd=0.0, decoupled=False):
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    b1s = betas if isinstance(betas, list) else [betas] * len(grads)
    for t, (g, lr, (b1, b2)) in enumerate(zip(grads, lrs, b1s), 1):
        if decoupled:
            p = p * (1 - lr * wd)
        elif wd:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        p = p - lr / bc1 * m / (np.sqrt(v) / np.sqrt(bc2) + eps)
    return p, m, v


def column(i):
    return [g[i] for g in GRADS]


@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
                                {"momentum": 0.5, "weight_decay": 0.1}])
def test_sgd_matches_torch_rules(kw):
    ps = params()
    got = run(optim.SGD(ps, lr=0.1, **kw), ps)
    for i in range(2):
        want, _ = sgd_ref(P0[i], column(i), LRS, kw.get("momentum", 0.0),
                          kw.get("weight_decay", 0.0), kw.get("nesterov", False))
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("cls,kw", [(optim.Adam, {}),
                                    (optim.Adam, {"betas": (0.8, 0.99), "eps": 1e-4,
                                                  "weight_decay": 0.1}),
                                    (optim.AdamW, {}),
                                    (optim.AdamW, {"weight_decay": 0.3})])
def test_adam_and_adamw_match_torch_rules(cls, kw):
    ps = params()
    got = run(cls(ps, **kw), ps)
    wd = kw.get("weight_decay", 1e-2 if cls is optim.AdamW else 0.0)
    for i in range(2):
        want, _, _ = adam_ref(P0[i], column(i), LRS, kw.get("betas", (0.9, 0.999)),
                              kw.get("eps", 1e-8), wd, cls is optim.AdamW)
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


def test_param_groups_have_their_own_options():
    ps = params()
    opt = optim.AdamW([{"params": [ps[0]], "weight_decay": 0.5},
                       {"params": [ps[1]], "weight_decay": 0.0, "lr": 0.3}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 0.3
    assert opt.param_groups[0]["betas"] == (0.9, 0.999)
    set_grads(ps, GRADS[0])
    opt.step()
    lt.mark_step()
    want0, _, _ = adam_ref(P0[0], column(0)[:1], [0.1], wd=0.5, decoupled=True)
    want1, _, _ = adam_ref(P0[1], column(1)[:1], [0.3], wd=0.0, decoupled=True)
    np.testing.assert_allclose(ps[0].numpy(), want0, rtol=1e-12)
    np.testing.assert_allclose(ps[1].numpy(), want1, rtol=1e-12)


def test_changed_weight_decay_and_betas_take_effect():
    """A scheduler's change of a group's options between steps is used by the
    next step: weight decay as data, betas by a rebuild that keeps the state."""
    ps = params()
    opt = optim.Adam(ps, lr=0.1)
    betas = [(0.9, 0.999), (0.9, 0.999), (0.5, 0.9), (0.5, 0.9)]
    for s in range(4):
        opt.zero_grad()
        set_grads(ps, GRADS[s])
        opt.param_groups[0]["betas"] = betas[s]
        opt.step()
        lt.mark_step()
    for i in range(2):
        want, _, _ = adam_ref(P0[i], column(i), [0.1] * 4, betas)
        np.testing.assert_allclose(ps[i].numpy(), want, rtol=1e-12)
    q = params()
    sgd = optim.SGD(q, lr=0.1)
    set_grads(q, GRADS[0])
    sgd.param_groups[0]["weight_decay"] = 0.5
    sgd.step()
    lt.mark_step()
    np.testing.assert_allclose(q[0].numpy(), P0[0] - 0.1 * (GRADS[0][0] + 0.5 * P0[0]),
                               rtol=1e-12)


def test_step_keeps_grads_and_zero_grad_zeroes_them():
    ps = params()
    opt = optim.SGD(ps, lr=0.1)
    set_grads(ps, GRADS[0])
    opt.step()
    lt.mark_step()
    np.testing.assert_array_equal(ps[0].grad.numpy(), GRADS[0][0])  # torch keeps the grads
    opt.zero_grad()  # torch 1.13's default: zeros, not None
    np.testing.assert_array_equal(ps[0].grad.numpy(), np.zeros((3, 4)))
    set_grads(ps, GRADS[1])  # the next backward adds to the zeros
    np.testing.assert_array_equal(ps[1].grad.numpy(), GRADS[1][1])
    opt.zero_grad(set_to_none=True)
    assert ps[0].grad is None and ps[1].grad is None


def test_parameter_without_grad_is_skipped():
    ps = params()
    opt = optim.Adam(ps, lr=0.1)
    (ps[0] * lt.tensor(GRADS[0][0])).sum().backward()
    opt.step()
    lt.mark_step()
    np.testing.assert_array_equal(ps[1].numpy(), P0[1])
    assert list(opt.state_dict()["state"]) == [0]


def test_state_dict_layout_is_torchs():
    ps = params()
    opt = optim.Adam(ps, lr=0.1)
    assert opt.state_dict()["state"] == {}
    run(opt, ps, steps=2)
    sd = opt.state_dict()
    assert sd["param_groups"] == [{"lr": LRS[1], "betas": (0.9, 0.999), "eps": 1e-8,
                                   "weight_decay": 0, "amsgrad": False, "maximize": False,
                                   "foreach": None, "capturable": False,
                                   "differentiable": False, "fused": False, "params": [0, 1]}]
    st = sd["state"][1]
    assert set(st) == {"step", "exp_avg", "exp_avg_sq"} and st["step"].item() == 2.0
    _, m, v = adam_ref(P0[1], column(1)[:2], LRS[:2])
    np.testing.assert_allclose(st["exp_avg"].numpy(), m, rtol=1e-12)
    np.testing.assert_allclose(st["exp_avg_sq"].numpy(), v, rtol=1e-12)
    q = params()
    sgd = optim.SGD(q, lr=0.1, momentum=0.9)
    run(sgd, q, steps=2)
    _, buf = sgd_ref(P0[0], column(0)[:2], LRS[:2], 0.9)
    np.testing.assert_allclose(sgd.state_dict()["state"][0]["momentum_buffer"].numpy(), buf,
                               rtol=1e-12)
    assert optim.SGD(q, lr=0.1).state_dict()["param_groups"][0]["momentum"] == 0


@pytest.mark.parametrize("make", [lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.2),
                                  lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)])
def test_load_state_dict_resumes_exactly(make):
    ps = params()
    a = make(ps)
    run(a, ps, steps=2)
    sd = a.state_dict()
    mid = [p.numpy() for p in ps]
    for s in (2, 3):  # a continues
        a.zero_grad()
        set_grads(ps, GRADS[s])
        a.step()
        lt.mark_step()
    qs = [nn.Parameter(lt.tensor(m)) for m in mid]
    b = make(qs)
    b.load_state_dict(sd)
    assert b.param_groups[0]["lr"] == LRS[1]  # the hyper-parameters come back too
    for s in (2, 3):
        b.zero_grad()
        set_grads(qs, GRADS[s])
        b.step()
        lt.mark_step()
    for p, q in zip(ps, qs):
        np.testing.assert_array_equal(q.numpy(), p.numpy())


def test_load_state_dict_accepts_numpy_state():
    ps = params()
    opt = optim.Adam(ps, lr=0.1)
    m, v = np.full(4, 0.5), np.full(4, 0.25)
    sd = {"state": {1: {"step": 3.0, "exp_avg": m, "exp_avg_sq": v}},
          "param_groups": [dict(opt.state_dict()["param_groups"][0])]}
    opt.load_state_dict(sd)
    (ps[1] * lt.tensor(GRADS[0][1])).sum().backward()
    opt.step()
    lt.mark_step()
    g = GRADS[0][1]
    m2, v2 = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    want = P0[1] - 0.1 / (1 - 0.9 ** 4) * m2 / (np.sqrt(v2) / np.sqrt(1 - 0.999 ** 4) + 1e-8)
    np.testing.assert_allclose(ps[1].numpy(), want, rtol=1e-12)


def test_errors_are_torchs():
    ps = params()
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        optim.Adam(ps, lr=-1)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1"):
        optim.AdamW(ps, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="required optimization parameter lr"):
        optim.SGD(ps)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD(ps, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        optim.SGD([{"params": ps}, {"params": ps[:1]}], lr=0.1)
    with pytest.raises(NotImplementedError, match="amsgrad"):
        optim.Adam(ps, amsgrad=True)
    with pytest.raises(NotImplementedError, match="dampening"):
        optim.SGD(ps, lr=0.1, dampening=0.5)
    opt = optim.SGD(ps, lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
