"""lazytensor.save / lazytensor.load: round trips of tensors of every dtype,
state_dicts and checkpoints, the documented .npz layout, and the errors for
what cannot be saved and for files save did not write."""
import io
import json
import os
from collections import OrderedDict

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.optim as optim

RNG = np.random.default_rng(3)


def test_tensors_of_every_dtype_round_trip_with_their_dtype(tmp_path):
    arrays = {"f32": RNG.standard_normal((2, 3)).astype(np.float32),
              "f64": RNG.standard_normal(4),
              "i64": np.arange(-3, 3, dtype=np.int64),
              "i32": np.arange(5, dtype=np.int32).reshape(5, 1),
              "u8": np.array([0, 7, 255], np.uint8),
              "i8": np.array([-128, 0, 127], np.int8),
              "bool": np.array([True, False]),
              "scalar": np.array(2.5, np.float32)}
    obj = {k: lt.from_numpy(v) for k, v in arrays.items()}
    bf = lt.tensor([1.0, -2.5, 3.140625], dtype=lt.bfloat16)
    obj["bf16"] = bf
    path = tmp_path / "t.pt"
    lt.save(obj, path)
    back = lt.load(path)
    assert type(back) is dict and list(back) == list(obj)
    for k, a in arrays.items():
        assert back[k].dtype == obj[k].dtype and back[k].shape == a.shape
        np.testing.assert_array_equal(back[k].numpy(), a)
    assert back["bf16"].dtype == lt.bfloat16
    np.testing.assert_array_equal(back["bf16"].numpy_raw(), bf.numpy_raw())
    # a lone tensor, a path given as a str, a pending (computed) value
    t = lt.from_numpy(arrays["f32"]) * 2.0
    lt.save(t, str(tmp_path / "one"))
    assert os.path.exists(tmp_path / "one")  # the name as given: no ".npz" added
    np.testing.assert_array_equal(lt.load(str(tmp_path / "one")).numpy(), arrays["f32"] * 2)


def test_state_dicts_and_checkpoints_load_back(tmp_path):
    lt.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = optim.Adam(model.parameters(), lr=0.01)
    x = lt.from_numpy(RNG.standard_normal((5, 3)).astype(np.float32))
    model(x).sum().backward()
    opt.step()
    lt.mark_step()
    ckpt = {"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3,
            "betas": (0.9, 0.999), "note": "run 1", "best": float("inf"), "none": None}
    buf = io.BytesIO()  # a file object works as a path does
    lt.save(ckpt, buf)
    buf.seek(0)
    back = lt.load(buf, map_location="cpu")
    assert type(back["model"]) is OrderedDict and list(back["model"]) == list(ckpt["model"])
    assert back["epoch"] == 3 and back["betas"] == (0.9, 0.999) and back["note"] == "run 1"
    assert back["best"] == float("inf") and back["none"] is None
    assert list(back["opt"]["state"]) == [0, 1, 2, 3]  # int keys stay ints
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    fresh.load_state_dict(back["model"])
    np.testing.assert_array_equal(fresh(x).numpy(), model(x).numpy())
    opt2 = optim.Adam(fresh.parameters(), lr=0.5)
    opt2.load_state_dict(back["opt"])
    assert opt2.param_groups[0]["lr"] == 0.01
    np.testing.assert_array_equal(opt2.state_dict()["state"][0]["exp_avg"].numpy(),
                                  opt.state_dict()["state"][0]["exp_avg"].numpy())


def test_parameters_sharing_and_requires_grad_are_kept(tmp_path):
    p = nn.Parameter(lt.ones(2))
    t = lt.zeros(3).requires_grad_()
    lt.save({"p": p, "again": p, "list": [t, np.arange(3)]}, tmp_path / "s")
    back = lt.load(tmp_path / "s")
    assert isinstance(back["p"], nn.Parameter) and back["p"].requires_grad
    assert back["again"] is back["p"]  # one tensor held twice loads as one object
    assert back["list"][0].requires_grad and not isinstance(back["list"][0], nn.Parameter)
    assert isinstance(back["list"][1], np.ndarray)
    np.testing.assert_array_equal(back["list"][1], np.arange(3))


def test_the_file_is_the_documented_npz(tmp_path):
    path = tmp_path / "f.pt"
    lt.save({"w": lt.tensor([1.0, 2.0]), "n": 7}, path)
    with np.load(path, allow_pickle=False) as z:
        assert sorted(z.files) == ["__lazytensor__", "t0"]
        meta = json.loads(bytes(z["__lazytensor__"]).decode())
        np.testing.assert_array_equal(z["t0"], [1.0, 2.0])
    assert meta["format"] == "lazytensor.save" and meta["version"] == 1
    assert meta["root"]["dict"][1] == [{"value": "n"}, {"value": 7}]
    assert meta["root"]["dict"][0][1]["tensor"] == 0
    assert meta["root"]["dict"][0][1]["dtype"] == "float32"


def test_a_save_failing_while_writing_leaves_the_earlier_file(tmp_path, monkeypatch):
    import lazytensor.serialization as ser
    path = tmp_path / "keep.pt"
    lt.save({"a": lt.ones(1)}, path)

    def half_written(fh, **arrays):  # a disk that fills up half way
        fh.write(b"PK partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ser.np, "savez", half_written)
    with pytest.raises(OSError, match="No space left"):
        lt.save({"a": lt.zeros(1)}, path)
    monkeypatch.undo()
    np.testing.assert_array_equal(lt.load(path)["a"].numpy(), [1.0])
    assert os.listdir(tmp_path) == ["keep.pt"]  # the temporary file is gone


def test_what_cannot_be_saved_and_bad_files(tmp_path):
    path = tmp_path / "keep.pt"
    lt.save({"a": lt.ones(1)}, path)
    with pytest.raises(TypeError, match="lazytensor.save: cannot save an object of type Linear"):
        lt.save({"m": nn.Linear(2, 2)}, path)
    with pytest.raises(TypeError, match="lazytensor.save: cannot save an object of type function"):
        lt.save([lambda: 0], path)
    np.testing.assert_array_equal(lt.load(path)["a"].numpy(), [1.0])  # the earlier file is whole
    assert [f for f in os.listdir(tmp_path) if f != "keep.pt"] == []  # no temporary left
    with pytest.raises(FileNotFoundError):
        lt.load(tmp_path / "missing.pt")
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"hello")
    with pytest.raises(RuntimeError, match="lazytensor.load: .*bad.pt.* is not a file "
                       "lazytensor.save wrote"):
        lt.load(bad)
    np.savez(tmp_path / "plain.npz", x=np.ones(2))
    with pytest.raises(RuntimeError, match="lazytensor.load: .*\\(no __lazytensor__ entry\\)"):
        lt.load(tmp_path / "plain.npz")
    np.save(tmp_path / "one.npy", np.ones(2))
    with pytest.raises(RuntimeError, match="lazytensor.load: .*a single numpy array"):
        lt.load(tmp_path / "one.npy")
    data = path.read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[:len(data) // 2])
    with pytest.raises(RuntimeError, match="lazytensor.load: .*cut.pt"):
        lt.load(tmp_path / "cut.pt")
    meta = {"format": "lazytensor.save", "version": 99, "root": {"value": 1}}
    np.savez(tmp_path / "v99.npz", __lazytensor__=np.frombuffer(json.dumps(meta).encode(),
                                                                 np.uint8))
    with pytest.raises(RuntimeError, match="version 99; this lazytensor reads version 1"):
        lt.load(tmp_path / "v99.npz")
    meta = {"format": "lazytensor.save", "version": 1, "root": {"tensor": 5, "dtype": "float32"}}
    np.savez(tmp_path / "gone.npz", __lazytensor__=np.frombuffer(json.dumps(meta).encode(),
                                                                  np.uint8))
    with pytest.raises(RuntimeError, match="array t5 is missing"):
        lt.load(tmp_path / "gone.npz")
    with pytest.raises(ValueError, match="lazytensor.load: map_location 'cuda'"):
        lt.load(path, map_location="cuda")
