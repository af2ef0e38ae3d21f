"""lazytensor.optim.lr_scheduler: each scheduler's learning rates against
hand values and closed forms of torch 1.13's schedules, the optimizer
stepping with them, state_dict round trips and torch's warnings and errors."""
import math
import warnings

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.optim as optim
from lazytensor.optim import lr_scheduler as S


def two_groups(opt_cls=optim.SGD, **kw):
    p, q = nn.Parameter(lt.zeros(1)), nn.Parameter(lt.zeros(1))
    return opt_cls([{"params": [p]}, {"params": [q], "lr": 0.5}], lr=1.0, **kw)


def run(opt, sched, n):
    """get_last_lr() after construction and after each of n steps."""
    out = [sched.get_last_lr()]
    for _ in range(n):
        opt.step()
        sched.step()
        out.append(sched.get_last_lr())
    return np.array(out)


def test_step_multistep_exponential_linear_lambda_follow_their_formulas():
    e = np.arange(9)[:, None]
    base = np.array([[1.0, 0.5]])
    o = two_groups()
    np.testing.assert_allclose(run(o, S.StepLR(o, step_size=3, gamma=0.5), 8),
                               base * 0.5 ** (e // 3))
    o = two_groups()
    # milestone 5 given twice: gamma ** 2 there
    got = run(o, S.MultiStepLR(o, milestones=[2, 5, 5], gamma=0.1), 8)
    np.testing.assert_allclose(got, base * 0.1 ** ((e >= 2) + 2 * (e >= 5)))
    o = two_groups()
    np.testing.assert_allclose(run(o, S.ExponentialLR(o, gamma=0.9), 8), base * 0.9 ** e)
    o = two_groups()
    factor = 0.25 + 0.75 * np.minimum(e, 4) / 4  # start 0.25 to 1.0 over 4 epochs
    np.testing.assert_allclose(run(o, S.LinearLR(o, 0.25, 1.0, total_iters=4), 8), base * factor)
    o = two_groups()
    got = run(o, S.LambdaLR(o, [lambda k: 1.0 / (k + 1), lambda k: 0.5 ** k]), 8)
    np.testing.assert_allclose(got, np.hstack([1.0 / (e + 1), 0.5 * 0.5 ** e]))
    o = two_groups()
    np.testing.assert_allclose(run(o, S.LambdaLR(o, lambda k: k + 1.0), 3),
                               base * (np.arange(4)[:, None] + 1.0))


def test_chainable_forms_compose_with_an_lr_set_by_hand():
    o = two_groups()
    s = S.LinearLR(o, 0.25, 1.0, total_iters=4)
    run(o, s, 2)
    o.param_groups[0]["lr"] = 2.0  # set by hand: the next factor applies to it, as torch
    o.step()
    s.step()  # epoch 3: lr * (1 + 0.75 / (4 * 0.25 + 2 * 0.75)) = lr * 1.3
    np.testing.assert_allclose(s.get_last_lr(), [2.6, 0.5 * (0.25 + 0.75 * 3 / 4)])
    o = two_groups()
    s = S.ExponentialLR(o, gamma=0.5)
    o.param_groups[1]["lr"] = 4.0
    o.step()
    s.step()
    assert s.get_last_lr() == [0.5, 2.0]


def test_cosine_annealing_is_torchs_recursive_form():
    o = two_groups()
    t, lo = 4, 0.01
    got = run(o, S.CosineAnnealingLR(o, T_max=t, eta_min=lo), 6)
    base = np.array([1.0, 0.5])
    for k in range(t + 1):  # the closed form up to T_max
        np.testing.assert_allclose(got[k], lo + (base - lo) * (1 + math.cos(math.pi * k / t)) / 2)
    # past T_max torch's recursion climbs back: T_max + 1 adds (1 - cos(pi / T)) / 2 of the range
    np.testing.assert_allclose(got[t + 1], lo + (base - lo) * (1 - math.cos(math.pi / t)) / 2)
    np.testing.assert_allclose(got[t + 2], lo + (base - lo) * (1 + math.cos(math.pi * 6 / t)) / 2)


def test_the_optimizer_steps_with_the_scheduled_lr():
    p = nn.Parameter(lt.zeros(1))
    opt = optim.SGD([p], lr=1.0)
    sched = S.StepLR(opt, step_size=2, gamma=0.5)
    for _ in range(5):
        opt.zero_grad()
        p.sum().backward()  # grad 1: p moves by -lr
        opt.step()
        sched.step()
        lt.mark_step()
    np.testing.assert_allclose(p.numpy(), [-(1 + 1 + 0.5 + 0.5 + 0.25)])
    assert opt.param_groups[0]["lr"] == 0.25 and opt.param_groups[0]["initial_lr"] == 1.0


def test_state_dict_resumes_and_lambdas_are_saved_as_torch():
    o = two_groups()
    s = S.StepLR(o, step_size=2, gamma=0.5)
    run(o, s, 3)
    sd = s.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3 and sd["base_lrs"] == [1.0, 0.5]
    o2 = two_groups()
    s2 = S.StepLR(o2, step_size=99, gamma=0.9)
    s2.load_state_dict(sd)
    for g, lr in zip(o2.param_groups, s.get_last_lr()):  # the optimizer's state is loaded too
        g["lr"] = lr
    np.testing.assert_allclose(run(o2, s2, 3)[1:], run(o, s, 3)[1:])

    class Scale:
        def __init__(self):
            self.k = 2.0

        def __call__(self, epoch):
            return self.k

    fn = Scale()
    o = two_groups()
    s = S.LambdaLR(o, [fn, lambda e: 1.0])
    fn.k = 3.0
    sd = s.state_dict()
    assert sd["lr_lambdas"] == [{"k": 3.0}, None]  # functions are not saved
    other = Scale()
    S.LambdaLR(two_groups(), [other, lambda e: 1.0]).load_state_dict(sd)
    assert other.k == 3.0 and "lr_lambdas" in sd


def test_closed_form_warnings_and_errors():
    o = two_groups()
    s = S.ExponentialLR(o, gamma=0.5)
    with pytest.warns(UserWarning, match="before `optimizer.step\\(\\)`"):
        s.step()
    with pytest.warns(UserWarning, match="epoch parameter"):
        s.step(3)  # the closed form: base * gamma ** 3
    assert s.get_last_lr() == [0.125, 0.0625]
    o = two_groups()
    s = S.StepLR(o, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # optimizer.step() first: no warning
        o.step()
        s.step()
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        S.StepLR([], 2)
    with pytest.raises(KeyError, match="'initial_lr' is not specified in param_groups\\[0\\]"):
        S.StepLR(two_groups(), 2, last_epoch=4)
    with pytest.raises(ValueError, match="Starting multiplicative factor"):
        S.LinearLR(two_groups(), start_factor=1.5)
    with pytest.raises(ValueError, match="Expected 2 lr_lambdas, but got 1"):
        S.LambdaLR(two_groups(), [lambda e: 1.0])
