"""Choosing the backend from Python (lt.set_backend / lt.get_backend over
lt_set_backend / lt_get_backend): LT_BACKEND is the default, a switch takes
effect at the next graph, tensors alive keep their values across it, and a bad
name raises, naming the known ones, with the choice left as it was."""
import os
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt


@pytest.fixture
def restore_backend():
    before = lt.get_backend()
    yield
    lt.set_backend(before)


def test_default_is_the_environments():
    env = dict(os.environ)
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(lt.__file__)))
    env["PYTHONPATH"] = pkg + os.pathsep + env.get("PYTHONPATH", "")
    code = "import lazytensor as lt; print(lt.get_backend())"
    for value, want in (("ref", "ref"), ("cpu", "cpu"), (None, "cpu")):
        if value is None:
            env.pop("LT_BACKEND", None)
        else:
            env["LT_BACKEND"] = value
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True)
        assert out.stdout.strip() == want, (value, out.stdout, out.stderr)


def test_switch_both_ways_with_tensors_alive(restore_backend):
    lt.set_backend("cpu")
    assert lt.get_backend() == "cpu"
    x = lt.tensor(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    a = x * 2
    np.testing.assert_array_equal(a.numpy(), [2, 4, 6])  # made by cpu
    lt.set_backend("ref")
    assert lt.get_backend() == "ref"
    b = a + 1  # ref reads cpu's value
    np.testing.assert_array_equal(b.numpy(), [3, 5, 7])
    lt.set_backend("cpu")
    c = b * a  # cpu reads ref's value and its own
    np.testing.assert_array_equal(c.numpy(), [6, 20, 42])
    np.testing.assert_array_equal(a.numpy(), [2, 4, 6])


def test_bad_name_raises_and_keeps_the_choice(restore_backend):
    before = lt.get_backend()
    with pytest.raises(lt.LazyTensorError) as e:
        lt.set_backend("gpu")
    msg = str(e.value)
    assert "lt_set_backend" in msg and "'gpu'" in msg and "ref, cpu" in msg, msg
    assert lt.get_backend() == before
    for bad in (None, 1, b"ref"):
        with pytest.raises(TypeError, match="set_backend"):
            lt.set_backend(bad)
    assert lt.get_backend() == before
