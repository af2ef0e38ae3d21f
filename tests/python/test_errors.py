"""Failures raise LazyTensorError carrying lt_last_error() and the status;
the tensors involved keep working afterwards."""
import numpy as np
import pytest

import lazytensor as lt

EINVAL, ESHAPE, EDTYPE, EEXEC = -1, -2, -3, -7


def raises(fn, status=None, text=None):
    with pytest.raises(lt.LazyTensorError) as e:
        fn()
    got, msg = e.value.status, str(e.value)
    # the traceback's frames would keep fn's tensors alive (a cycle through e)
    del e
    if status is not None:
        assert got == status, (got, msg)
    if text is not None:
        assert text in msg, msg
    return got, msg


def test_shape_and_dtype_errors():
    a, b = lt.zeros(2, 3), lt.zeros(4, 5)
    raises(lambda: a @ b, ESHAPE, "lt_matmul")
    raises(lambda: a + b, ESHAPE)
    raises(lambda: a.reshape(7), ESHAPE)
    raises(lambda: lt.tensor([True]) @ lt.tensor([True]), EDTYPE)
    raises(lambda: lt.tensor([1, 2]).mean(), EDTYPE)
    raises(lambda: a.softmax(5), EINVAL)
    raises(lambda: lt.arange(0, 5, 0), EINVAL)
    # the operands are unharmed
    np.testing.assert_array_equal((a + 1.0).numpy(), np.ones((2, 3)))


def test_execution_error_keeps_tensors():
    w = lt.ones(3, 2)
    bad = lt.nn.embedding(lt.tensor([0, 7]), w)  # index out of range: fails when run
    raises(bad.numpy, EEXEC)
    assert (w.sum()).item() == 6.0
    # a failed graph stays pending on its tensor (the library's rule): once the
    # tensor dies, the next step runs without it
    del bad
    lt.mark_step()
    live = lt.live_tensors()
    bad = lt.nn.embedding(lt.tensor([9]), w)
    assert lt.clear_pending() >= 1
    raises(bad.numpy, text="")
    del bad
    assert lt.live_tensors() == live
    lt.mark_step()


def test_autograd_errors():
    x = lt.zeros(2, 2)
    raises(lambda: x.sum().backward())  # nothing requires grad, or not a graph
    y = lt.tensor([1.0, 2.0], requires_grad=True)
    raises(lambda: (y * 2.0).backward(), text="")  # not one element
    raises(lambda: lt.tensor([1, 2]).requires_grad_(), EDTYPE)


def test_python_side_errors():
    t = lt.zeros(2, 3)
    with pytest.raises(IndexError):
        t[5]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError):
        t[::-1]
    with pytest.raises(ValueError):
        t.item()
    with pytest.raises(TypeError):
        lt.from_numpy(np.zeros(2, dtype=np.complex64))
