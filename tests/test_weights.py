from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from zoo.arrays import load_npz, save_npz
from zoo.data import make_batches
from zoo.specs import MODELS
from zoo.weights import check_weights, load_weights, make_weights, weights_file


def test_same_seed_same_file_byte_for_byte(tmp_path: Path) -> None:
    spec = MODELS["lenet"]
    a = weights_file(spec, 7, tmp_path / "a")
    b = weights_file(spec, 7, tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    c = weights_file(spec, 8, tmp_path / "c")
    assert a.read_bytes() != c.read_bytes()


def test_weights_match_the_spec_and_are_float32() -> None:
    spec = MODELS["lstm"]
    weights = make_weights(spec, 0)
    check_weights(spec, weights)
    assert all(w.dtype == np.float32 for w in weights.values())
    bias = weights["lstm/bias"]
    units = 128
    # forget gate (second block) carries +1, as Keras' unit_forget_bias
    assert bias[units : 2 * units].min() > 0.8
    assert abs(bias[:units]).max() <= 0.1


def test_orthogonal_recurrent_kernel() -> None:
    u = make_weights(MODELS["lstm"], 0)["lstm/recurrent_kernel"].astype(np.float64)
    np.testing.assert_allclose(u @ u.T, np.eye(128), atol=1e-5)


def test_wrong_weights_are_refused(tmp_path: Path) -> None:
    spec = MODELS["ffn"]
    weights = make_weights(spec, 0)
    weights["fc1/kernel"] = weights["fc1/kernel"].T
    with pytest.raises(ValueError, match=r"wrong shape \['fc1/kernel'\]"):
        check_weights(spec, weights)
    save_npz(tmp_path / "w.npz", weights)
    with pytest.raises(ValueError, match="do not match model ffn"):
        load_weights(spec, tmp_path / "w.npz")


def test_npz_round_trip_refuses_pickles(tmp_path: Path) -> None:
    save_npz(tmp_path / "ok.npz", {"a": np.arange(3), "b/c": np.ones((2, 2))})
    loaded = load_npz(tmp_path / "ok.npz")
    assert sorted(loaded) == ["a", "b/c"]
    np.save(tmp_path / "obj.npy", np.array([{"x": 1}], dtype=object))
    with zipfile.ZipFile(tmp_path / "bad.npz", "w") as zf:
        zf.write(tmp_path / "obj.npy", "obj.npy")
    with pytest.raises(ValueError, match="Python objects"):
        load_npz(tmp_path / "bad.npz")


def test_batches_are_reproducible_and_shaped() -> None:
    spec = MODELS["lenet"]
    x, y = make_batches(spec, 3, 5, 2)
    x2, y2 = make_batches(spec, 3, 5, 2)
    assert x.shape == (2, 5, 28, 28, 1)
    assert y.shape == (2, 5)
    assert y.max() < 10
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    with pytest.raises(ValueError, match="at least 1"):
        make_batches(spec, 0, 0, 1)
