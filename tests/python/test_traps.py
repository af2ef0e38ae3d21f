"""PyTorch 1.13 code that would go wrong silently after `import lazytensor as
lt` in place of torch (issue #30): each case raises or behaves as in torch.
The expected dtypes, values and errors were taken from torch 1.13 by hand
(torch is not a dependency of the tests)."""
import pickle
import re

import numpy as np
import pytest

import lazytensor as lt


def vals(t):
    return t.numpy().tolist()


# ---- 1. foreign operands and scalar promotion

OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
       "/": lambda a, b: a / b, "**": lambda a, b: a ** b, "%": lambda a, b: a % b,
       "//": lambda a, b: a // b, "@": lambda a, b: a @ b, "==": lambda a, b: a == b,
       "<": lambda a, b: a < b, ">=": lambda a, b: a >= b, "&": lambda a, b: a & b}


# Python asks the tensor for `arr < t` as `t > arr`
MIRRORED = {"<": ">", ">=": "<=", "==": "=="}


def refused(sym, kind, swapped):
    """The TypeError's text for operator sym between a Tensor and a kind."""
    if not swapped:
        return re.escape("for %s: 'Tensor' and '%s'" % (sym, kind))
    if sym in MIRRORED:
        return re.escape("for %s: 'Tensor' and '%s'" % (MIRRORED[sym], kind))
    return re.escape("for %s: '%s' and 'Tensor'" % (sym, kind))


@pytest.mark.parametrize("sym", sorted(OPS))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_numpy_array_operand_refused_in_both_orders(sym, dt):
    # lt.ones(2) + np.ones(2) was a numpy array (the graph and autograd lost);
    # the error names the operator
    op, t, a = OPS[sym], lt.ones(2), np.ones(2, dt)
    with pytest.raises(TypeError, match=refused(sym, "ndarray", False)):
        op(t, a)
    with pytest.raises(TypeError, match=refused(sym, "ndarray", True)):
        op(a, t)


@pytest.mark.parametrize("sym", ["+", "*", "@", "=="])
def test_list_operand_refused_in_both_orders(sym):
    # [1, 2] + t was list concatenation's error; [1, 2] == t was False
    op, t = OPS[sym], lt.ones(2)
    with pytest.raises(TypeError, match=refused(sym, "list", False)):
        op(t, [1.0, 2.0])
    with pytest.raises(TypeError, match=refused(sym, "list", True)):
        op([1.0, 2.0], t)


def test_numpy_ufunc_on_tensor_refused():
    # np.exp(t) would also leave the graph with a numpy array
    with pytest.raises(TypeError):
        np.exp(lt.ones(2))
    np.testing.assert_array_equal(np.asarray(lt.ones(2)), [1, 1])  # an explicit read still works


# (tensor, op) -> torch 1.13's dtype and values
SCALARS = [
    ("int64 + 2.5", lambda: lt.tensor([1, 2]) + 2.5, "float32", [3.5, 4.5]),
    ("int32 + 3", lambda: lt.tensor([1, 2], dtype=lt.int32) + 3, "int32", [4, 5]),
    ("int32 + np.int64", lambda: lt.tensor([1, 2], dtype=lt.int32) + np.int64(3), "int32", [4, 5]),
    ("np.int64 - int32", lambda: np.int64(3) - lt.tensor([1, 2], dtype=lt.int32), "int32", [2, 1]),
    ("int32 + np.float64", lambda: lt.tensor([1, 2], dtype=lt.int32) + np.float64(2.5), "float32",
     [3.5, 4.5]),
    ("f32 + np.float64", lambda: lt.tensor([1.0, 2.0]) + np.float64(1.5), "float32", [2.5, 3.5]),
    ("np.float64 + f32", lambda: np.float64(1.5) + lt.tensor([1.0, 2.0]), "float32", [2.5, 3.5]),
    ("np.float32 * f32", lambda: np.float32(2) * lt.tensor([1.0, 2.0]), "float32", [2.0, 4.0]),
    ("np.float64 * int64", lambda: np.float64(0.5) * lt.tensor([1, 2]), "float32", [0.5, 1.0]),
    ("bool + 1", lambda: lt.tensor([True, False]) + 1, "int64", [2, 1]),
    ("f32 + True", lambda: lt.tensor([1.0, 2.0]) + True, "float32", [2.0, 3.0]),
    ("uint8 + np.int64", lambda: lt.tensor([1, 2], dtype=lt.uint8) + np.int64(3), "uint8", [4, 5]),
    ("f64 + 2.5", lambda: lt.tensor(np.array([1.0])) + 2.5, "float64", [3.5]),
    ("bf16 + 2.5", lambda: lt.tensor([1.0], dtype=lt.bfloat16) + 2.5, "bfloat16", [3.5]),
]


@pytest.mark.parametrize("case", SCALARS, ids=[c[0] for c in SCALARS])
def test_scalar_promotion_as_torch(case):
    _, fn, dt, want = case
    r = fn()
    assert isinstance(r, lt.Tensor), type(r)  # not a numpy array
    assert r.dtype == dt and vals(r) == want


def test_where_refuses_arrays():
    with pytest.raises(TypeError, match="where"):
        lt.where(lt.tensor([True, False]), lt.ones(2), np.zeros(2))


# ---- 2. products of two dtypes

def test_matmul_of_two_float_dtypes_raises():
    a = lt.ones(2, 2)
    b = lt.tensor(np.ones((2, 2)))  # from float64 numpy data: float64, as torch.from_numpy
    assert b.dtype == lt.float64
    for fn in (lambda: a @ b, lambda: b @ a, lambda: a.matmul(b), lambda: lt.matmul(a, b)):
        with pytest.raises(RuntimeError, match="matmul: expected both operands to have the same "
                                               "dtype, got float(32|64) and float(64|32)"):
            fn()
    with pytest.raises(lt.LazyTensorError):
        lt.ones(2, 2, dtype=lt.int64) @ a
    # one dtype is fine, and so is casting first
    assert vals(b @ b) == [[2.0, 2.0], [2.0, 2.0]]
    assert (a @ b.float()).dtype == lt.float32


# ---- 3. dtype objects

def test_dtype_is_an_object_that_equals_numpy_and_names():
    t = lt.ones(2)
    assert t.dtype is lt.float32 and not isinstance(t.dtype, int)
    assert t.dtype == np.float32 and t.dtype == np.dtype("float32") and t.dtype == "float32"
    assert t.dtype != np.float64 and t.dtype != "float64" and t.dtype != lt.float64
    assert lt.tensor([1]).dtype == np.int64 and lt.tensor([True]).dtype == np.bool_
    assert lt.tensor([1.0], dtype=lt.bfloat16).dtype == "bfloat16" == lt.bfloat16
    assert lt.bfloat16 != np.float32  # its values come out as float32, but it is not float32
    assert repr(lt.float32) == str(lt.float32) == "lazytensor.float32"
    assert repr(lt.bfloat16) == "lazytensor.bfloat16"
    assert lt.float32 != "no such dtype" and lt.float32 != 1.5 and lt.float32 != None  # noqa: E711
    # hashable, one object per dtype (a dict or set of them works), picklable
    assert len({lt.float32, lt.ones(1).dtype, lt.int64, lt.tensor([1]).dtype}) == 2
    assert {lt.float32: "f"}[lt.ones(1).dtype] == "f"
    assert pickle.loads(pickle.dumps(lt.int64)) is lt.int64
    # torch's attributes and short names
    assert lt.float32.is_floating_point and lt.bfloat16.is_floating_point
    assert not lt.int64.is_floating_point and not lt.bool_.is_floating_point
    assert (lt.float32.itemsize, lt.float64.itemsize, lt.bfloat16.itemsize, lt.int8.itemsize) == \
        (4, 8, 2, 1)
    assert (lt.float, lt.double, lt.long, lt.int, lt.bool) == \
        (lt.float32, lt.float64, lt.int64, lt.int32, lt.bool_)
    assert lt.ones(2).is_floating_point() and not lt.tensor([1]).is_floating_point()


@pytest.mark.parametrize("form", [lt.float64, np.float64, np.dtype("float64"), "float64", 4],
                         ids=["object", "np_type", "np_dtype", "name", "library_id"])
def test_every_dtype_form_is_accepted(form):
    for t in (lt.zeros(2, dtype=form), lt.tensor([1.0], dtype=form), lt.ones(2).to(form),
              lt.full((2,), 1.0, dtype=form), lt.arange(3, dtype=form)):
        assert t.dtype is lt.float64 and repr(t.dtype) == "lazytensor.float64"


# ---- 4. max / min with a dim

def test_max_min_with_dim_give_values_and_indices():
    t = lt.tensor([[1.0, 3.0, 3.0], [2.0, float("nan"), 1.0]])
    r = t.max(1)
    assert isinstance(r, tuple) and r._fields == ("values", "indices")
    values, indices = r  # unpacks as torch's
    # torch: values [3, nan], indices [1, 1] (the first maximum; NaN counts as the maximum)
    np.testing.assert_array_equal(values.numpy(), [3.0, np.nan])
    assert indices.dtype == lt.int64 and vals(indices) == [1, 1]
    m = t.min(dim=1, keepdim=True)
    assert m.values.shape == (2, 1) and m.indices.shape == (2, 1)
    np.testing.assert_array_equal(m.values.numpy(), [[1.0], [np.nan]])
    assert vals(m.indices) == [[0], [1]]
    # without a dim: the 0-d extreme, as before
    u = lt.tensor([[1.0, 5.0], [7.0, 2.0]])
    assert u.max().shape == () and u.max().item() == 7.0 and u.min().item() == 1.0
    assert vals(u.max(0).indices) == [1, 0] and vals(u.min(0).values) == [1.0, 2.0]
    assert vals(u.max(lt.tensor([[2.0, 2.0], [2.0, 9.0]]))) == [[2.0, 5.0], [7.0, 9.0]]
    # argmax / argmin without a dim: into the flattened tensor
    assert u.argmax().shape == () and u.argmax().item() == 2 and u.argmin().item() == 0
    assert vals(u.argmax(1)) == [1, 0]


def test_max_with_dim_gradient_goes_to_the_index():
    # torch: x.max(1).values.sum().backward() gives [[0, 1, 0]] (the first of the ties)
    x = lt.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    x.max(1).values.sum().backward()
    assert vals(x.grad) == [[0.0, 1.0, 0.0]]


# ---- 5. / 6. in-place ops and leaves

def test_grad_zero_in_place():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    g = x.grad
    assert g.zero_() is g and vals(x.grad) == [0.0, 0.0]  # the gradient itself, not a copy
    (x * 3.0).sum().backward()  # accumulates onto the zeros
    assert vals(x.grad) == [3.0, 3.0]
    x.grad = None  # torch's zero_grad(set_to_none=True)
    assert x.grad is None


@pytest.mark.parametrize("update", [
    lambda x: x.__iadd__(1.0), lambda x: x.__isub__(1.0), lambda x: x.__imul__(2.0),
    lambda x: x.__itruediv__(2.0), lambda x: x.add_(1.0), lambda x: x.sub_(1.0),
    lambda x: x.mul_(2.0), lambda x: x.div_(2.0), lambda x: x.zero_(), lambda x: x.fill_(3.0),
    lambda x: x.copy_(lt.ones(2)), lambda x: x.clamp_(0.0, 1.0)],
    ids=["+=", "-=", "*=", "/=", "add_", "sub_", "mul_", "div_", "zero_", "fill_", "copy_",
         "clamp_"])
def test_in_place_on_a_leaf_that_requires_grad(update):
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being used in "
                                           "an in-place operation"):
        update(x)
    assert vals(x) == [1.0, 2.0] and x.requires_grad
    # under no_grad: the same object takes the new value, still a leaf with its grad
    (x * x).sum().backward()
    with lt.no_grad():
        r = update(x)
    assert r is x and x.requires_grad and vals(x.grad) == [2.0, 4.0]
    assert vals(x) != [1.0, 2.0]


def test_augmented_assignment_keeps_the_object():
    # `x += 1` used to rebind x to a new tensor without grad, silently
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        x += 1
    same = x
    with lt.no_grad():
        x -= 0.5 * lt.tensor([2.0, 2.0])  # the hand-written optimizer's update
    assert x is same and x.requires_grad and vals(x) == [0.0, 1.0]
    (x * x).sum().backward()  # gradients of the new value
    assert vals(x.grad) == [0.0, 2.0]


def test_in_place_under_no_grad_updates_a_layer_parameter():
    lin = lt.nn.Linear(2, 1, bias=False)
    w = lin.weight
    with lt.no_grad():
        w.zero_()
        w += 1.0
    assert vals(lin(lt.tensor([[1.0, 2.0]]))) == [[3.0]]  # the layer sees the new weight


def test_in_place_on_values_without_grad_and_non_leaves():
    a = lt.zeros(2)
    b = a
    a += 1
    b.mul_(3)
    assert a is b and vals(a) == [3.0, 3.0]
    # on a non-leaf the new value keeps its history: d/dx sum((2x + 1)^2) = 4 (2x + 1)
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2.0
    y += 1.0
    (y * y).sum().backward()
    assert vals(x.grad) == [12.0, 20.0]
    # copy_ takes any dtype and broadcasts; its gradient reaches the source
    s = lt.tensor([1.0, 2.0], requires_grad=True)
    c = lt.zeros(2, 2, dtype=lt.float64).copy_(s)
    c.sum().backward()  # (before c is read: a read cuts the lazy graph)
    assert c.dtype == lt.float64 and vals(c) == [[1.0, 2.0], [1.0, 2.0]]
    assert vals(s.grad) == [2.0, 2.0]
    assert vals(lt.ones(2).add_(lt.ones(2), alpha=2)) == [3.0, 3.0]
    assert vals(lt.ones(2).sub_(lt.ones(2), alpha=3)) == [-2.0, -2.0]
    assert vals(lt.tensor([1, 2]).fill_(2.7)) == [2, 2]  # torch truncates
    assert vals(lt.ones(2).fill_(lt.tensor(5.0))) == [5.0, 5.0]


def test_in_place_dtype_and_shape_rules():
    i = lt.tensor([1, 2])
    # torch: "result type Float can't be cast to the desired output type Long"
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired "
                                           "output type int64"):
        i += 1.5
    with pytest.raises(RuntimeError, match="can't be cast"):
        i /= 2  # true division is a float
    i *= 2
    assert i.dtype == lt.int64 and vals(i) == [2, 4]
    f = lt.ones(2)
    with pytest.raises(RuntimeError, match=r"output with shape \[2\] doesn't match the broadcast "
                                           r"shape \[2, 2\]"):
        f += lt.ones(2, 2)
    f += lt.tensor(np.ones(2))  # float64 into float32: the same category, cast
    assert f.dtype == lt.float32 and vals(f) == [2.0, 2.0]


def test_in_place_on_a_copy_where_torch_has_a_view_is_refused():
    # lazytensor's t[i] is a new tensor: t[0].zero_() would change nothing in t
    w = lt.ones(2, 3)
    with pytest.raises(RuntimeError, match="copy of t"):
        w[0].zero_()
    with pytest.raises(TypeError):  # t[0] += 1 needs item assignment, which Tensor lacks
        w[0] += 1
    assert vals(w) == [[1.0] * 3] * 2
    # .data as torch's old optimizer idiom: p.data -= lr * g updates p
    p = lt.tensor([1.0, 2.0], requires_grad=True)
    same = p
    p.data -= 0.5 * lt.tensor([2.0, 2.0])
    assert p is same and p.requires_grad and vals(p) == [0.0, 1.0]
    with pytest.raises(RuntimeError, match="copy of x.data"):
        p.data.zero_()


# ---- 7. backward twice

def test_second_backward_through_a_graph_raises():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    loss = (x * x).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        loss.backward()
    assert vals(x.grad) == [2.0, 4.0]  # not doubled
    # retain_graph=True keeps it for one more
    loss2 = (x * x).sum()
    loss2.backward(retain_graph=True)
    loss2.backward()
    assert vals(x.grad) == [2.0 + 4.0, 4.0 + 8.0]
    with pytest.raises(RuntimeError, match="second time"):
        loss2.backward()
    # two forward passes accumulate, as torch's gradient accumulation
    x.grad = None
    for _ in range(2):
        (x * 3.0).sum().backward()
    assert vals(x.grad) == [6.0, 6.0]


def test_backward_with_a_gradient():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    (x * x).backward(lt.tensor([1.0, 0.5]))  # torch: grad 2x * v = [2, 2]
    assert vals(x.grad) == [2.0, 2.0]


# ---- 8. grad modes

def test_no_grad_context_manager_and_decorator():
    x = lt.tensor([1.0, 2.0], requires_grad=True)

    @lt.no_grad()
    def evaluate(v):
        assert not lt.is_grad_enabled()
        return (v * 2.0).sum()

    assert lt.is_grad_enabled()
    y = evaluate(x)
    assert lt.is_grad_enabled()
    with pytest.raises(RuntimeError):  # no graph to differentiate
        y.backward()
    with lt.no_grad():
        with lt.no_grad():
            pass
        assert not lt.is_grad_enabled()  # scopes nest
        with lt.enable_grad():
            assert lt.is_grad_enabled()
            z = (x * x).sum()
        assert not lt.is_grad_enabled()
    z.backward()
    assert vals(x.grad) == [2.0, 4.0]
    with lt.set_grad_enabled(False):
        assert not lt.is_grad_enabled()
    assert lt.is_grad_enabled()
    lt.set_grad_enabled(False)  # a plain call switches it off, as torch's
    assert not lt.is_grad_enabled()
    lt.set_grad_enabled(True)
    assert lt.is_grad_enabled()


def test_factories_take_requires_grad():
    for t in (lt.zeros(2, requires_grad=True), lt.ones(2, requires_grad=True),
              lt.randn(2, requires_grad=True), lt.rand(2, requires_grad=True),
              lt.full((2,), 1.0, requires_grad=True), lt.eye(2, requires_grad=True),
              lt.arange(0.0, 2.0, requires_grad=True)):
        assert t.requires_grad


def test_hand_written_sgd_matches_numpy():
    # every hand-written optimizer: backward, `w -= lr * w.grad` under no_grad,
    # w.grad.zero_(), one step per mark_step; the same w throughout
    rng = np.random.default_rng(0)
    xs, ys = rng.standard_normal((8, 3)), rng.standard_normal((8, 1))
    w0 = rng.standard_normal((3, 1))
    w, x, y = lt.tensor(w0, requires_grad=True), lt.tensor(xs), lt.tensor(ys)
    first, ref = w, w0.copy()
    for _ in range(5):
        ((x @ w - y) ** 2).mean().backward()
        with lt.no_grad():
            w -= 0.1 * w.grad
        w.grad.zero_()
        lt.mark_step()
        ref -= 0.1 * 2 * xs.T @ (xs @ ref - ys) / len(xs)
    assert w is first and w.requires_grad
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-12)


def test_float64_input_to_float32_linear_raises():
    # torch: "mat1 and mat2 must have the same dtype"; the layer once promoted to f64
    layer = lt.nn.Linear(3, 2)
    with pytest.raises(lt.LazyTensorError, match="linear: expected both operands"):
        layer(lt.tensor(np.ones((1, 3))))
    assert layer(lt.tensor(np.ones((1, 3), np.float32))).dtype == lt.float32


@pytest.mark.parametrize("make,fn", [
    (lambda: lt.nn.Conv2d(1, 2, 3), "conv2d"),
    (lambda: (lambda x, w=lt.randn(1, 2, 3, 3): lt.nn.functional.conv_transpose2d(x, w)),
     "conv_transpose2d"),
])
def test_float64_input_to_float32_convolution_raises(make, fn):
    # torch: "Input type (double) and bias type (float) should be the same";
    # the layer and the functional form once promoted to f64
    layer = make()
    with pytest.raises(lt.LazyTensorError, match=fn + ": expected both operands"):
        layer(lt.tensor(np.ones((1, 1, 5, 5))))
    assert layer(lt.tensor(np.ones((1, 1, 5, 5), np.float32))).dtype == lt.float32
