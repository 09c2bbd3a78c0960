"""Content digests name arrays by every name, dtype, shape and byte, and a
worker refuses files whose digest is not the one the gate checked.

Pure NumPy: the worker-side check is driven through ``workers.serve.handle``
with a stand-in runner, which the check stops before it is ever used.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from workers import messages as m
from workers.paths import get_path
from workers.protocol import Runner
from workers.serve import handle
from zoo.arrays import digest, load_npz, save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.weights import make_weights

NAMES = st.text(min_size=1, max_size=8)
DTYPES = st.sampled_from(["<f4", "<f8", "<i4", "<i8", "<u2", "|u1", "|b1", ">f4"])
ARRAYS = DTYPES.flatmap(
    lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=3))
)
SETS = st.dictionaries(NAMES, ARRAYS, min_size=1, max_size=4)


def test_a_digest_is_sha256_hex() -> None:
    d = digest({"a": np.arange(3, dtype=np.float32)})
    assert re.fullmatch("[0-9a-f]{64}", d)


@given(SETS)
def test_the_digest_is_stable_and_content_only(arrays: dict[str, np.ndarray]) -> None:
    """Copies, reversed insertion order and Fortran layout change nothing."""
    again = {k: np.array(arrays[k], copy=True) for k in reversed(list(arrays))}
    fortran = {k: np.array(a, order="F") for k, a in arrays.items()}
    assert digest(arrays) == digest(again) == digest(fortran)


@given(SETS, st.data())
def test_one_changed_byte_changes_the_digest(
    arrays: dict[str, np.ndarray], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(arrays)))
    a = arrays[name]
    assume(a.nbytes > 0)
    raw = bytearray(np.ascontiguousarray(a).tobytes())
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= 1 << data.draw(st.integers(0, 7))
    changed = np.frombuffer(bytes(raw), dtype=a.dtype).reshape(a.shape)
    assert digest(arrays) != digest({**arrays, name: changed})


@given(SETS, st.data())
def test_a_renamed_array_changes_the_digest(
    arrays: dict[str, np.ndarray], data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(arrays)))
    new = data.draw(NAMES.filter(lambda n: n not in arrays))
    renamed = {(new if k == name else k): a for k, a in arrays.items()}
    assert digest(arrays) != digest(renamed)


@given(SETS, ARRAYS, NAMES)
def test_an_added_array_changes_the_digest(
    arrays: dict[str, np.ndarray], extra: np.ndarray, name: str
) -> None:
    assume(name not in arrays)
    assert digest(arrays) != digest({**arrays, name: extra})


def test_a_single_value_changes_the_digest() -> None:
    weights = make_weights(get_spec("ffn"), 0)
    nudged = {k: a.copy() for k, a in weights.items()}
    nudged["fc1/kernel"][3, 7] = np.nextafter(
        nudged["fc1/kernel"][3, 7], np.float32(np.inf)
    )
    assert digest(weights) != digest(nudged)


def test_the_same_bytes_under_another_dtype_change_the_digest() -> None:
    a = np.linspace(-1, 1, 12, dtype=np.float32)
    assert digest({"a": a}) != digest({"a": a.view(np.int32)})
    assert digest({"a": a}) != digest({"a": a.view(">f4")})


@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 6), (12, 1), (1, 12), (2, 3, 2)])
def test_the_same_bytes_in_another_shape_change_the_digest(
    shape: tuple[int, ...],
) -> None:
    a = np.arange(12, dtype=np.float32)
    assert digest({"a": a}) != digest({"a": a.reshape(shape)})


def test_a_scalar_is_not_a_one_element_vector() -> None:
    one = np.float32(1.0)
    assert digest({"a": np.asarray(one)}) != digest({"a": np.asarray([one])})


@pytest.mark.parametrize(
    ("left", "right"),
    [
        # the same bytes in total, split between arrays in other ways
        ({"x": np.arange(4)}, {"x": np.arange(2), "y": np.arange(2, 4)}),
        ({"ab": np.arange(2)}, {"a": np.arange(2), "b": np.arange(0)}),
        ({"a": np.zeros(0)}, {}),
        ({"a": np.zeros((0, 2))}, {"a": np.zeros((2, 0))}),
    ],
)
def test_moving_a_boundary_changes_the_digest(
    left: dict[str, np.ndarray], right: dict[str, np.ndarray]
) -> None:
    assert digest(left) != digest(right)


def test_object_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="holds Python objects"):
        digest({"a": np.array([object()])})


# --- the worker refuses files the gate did not check ----------------------------


class _Runner:
    """Stands in for a framework: ``evaluate`` answers with zeros and
    remembers the weights it was given."""

    framework = "none"

    def __init__(self) -> None:
        self.weights: dict[str, np.ndarray] | None = None

    def evaluate(
        self, spec: Any, weights: Any, x: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        self.weights = dict(weights)
        return np.zeros((len(x), spec.classes), np.float32), 0.0, {}


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str]:
    spec = get_spec("ffn")
    x, y = make_batches(spec, 0, 4, 2)
    save_npz(tmp_path / "w.npz", make_weights(spec, 0))
    save_npz(tmp_path / "d.npz", {"x": x, "y": y})
    return str(tmp_path / "w.npz"), str(tmp_path / "d.npz")


def _evaluate(files: tuple[str, str], tmp_path: Path, **fields: Any) -> _Runner:
    weights, data = files
    request = m.Evaluate(
        model="ffn", weights=weights, data=data, out=str(tmp_path / "o.npz"), **fields
    )
    runner = _Runner()
    handle(cast(Runner, runner), request, get_path("native-torch"))
    return runner


def test_matching_digests_are_served(files: tuple[str, str], tmp_path: Path) -> None:
    weights, data = files
    runner = _evaluate(
        files,
        tmp_path,
        weights_digest=digest(load_npz(weights)),
        data_digest=digest(load_npz(data)),
    )
    assert runner.weights is not None


def test_the_weights_are_checked_before_a_fault_is_injected(
    files: tuple[str, str], tmp_path: Path
) -> None:
    weights, _ = files
    runner = _evaluate(
        files,
        tmp_path,
        fault="missing-bias",
        weights_digest=digest(load_npz(weights)),
    )
    assert runner.weights is not None
    assert digest(runner.weights) != digest(load_npz(weights))  # the fault did act


@pytest.mark.parametrize("which", ["weights", "data"])
def test_a_wrong_digest_is_refused_in_one_sentence(
    files: tuple[str, str], tmp_path: Path, which: str
) -> None:
    weights, data = files
    file = weights if which == "weights" else data
    actual = digest(load_npz(file))
    wrong = "9f8e7d6c5b4a" + "0" * 52
    words = (
        f"{which} file {file} holds other arrays than the gate checked (digest "
        f"{actual[:12]}, expected 9f8e7d6c5b4a); delete it to have it rebuilt"
    )
    with pytest.raises(ValueError, match="^" + re.escape(words) + "$"):
        _evaluate(files, tmp_path, **{f"{which}_digest": wrong})


def test_a_changed_file_is_refused(files: tuple[str, str], tmp_path: Path) -> None:
    """The digest the gate took, then the file rewritten with one value
    changed: refused."""
    _, data = files
    checked = digest(load_npz(data))
    arrays = load_npz(data)
    arrays["x"][1, 2, 3] += 1
    save_npz(data, arrays)
    with pytest.raises(ValueError, match=f"^data file {re.escape(data)} holds other"):
        _evaluate(files, tmp_path, data_digest=checked)
