"""A user's own arrays for a user's model (``--model FILE --data
ARRAYS.npz``): ``x_train``, ``y_train``, ``x_test``, ``y_test`` in one
``.npz``, read without pickle.

Every member's ``.npy`` header is read from the archive first: the names,
dtypes (real numbers for ``x``, integers for ``y``) and shapes (``x`` is
``(N, *input_shape)`` of the model, ``y`` is ``(N,)``) are checked and the
bytes they promise counted against ``zoo.datasets.MAX_BYTES`` before any
array is allocated; then the labels must lie in ``0 .. classes - 1`` and
the inputs be finite (``check_split``).
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from zoo.datasets import DataError, Split, regular_file, within_limit
from zoo.specs import ModelSpec

NAMES = ("x_train", "y_train", "x_test", "y_test")
WHAT = "an .npz of x_train, y_train, x_test, y_test"


def _header(
    archive: zipfile.ZipFile, member: str, path: Path
) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    with archive.open(member) as stream:
        try:
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                return np.lib.format.read_array_header_1_0(stream)
            return np.lib.format.read_array_header_2_0(stream)
        except ValueError as exc:
            raise DataError(f"{path}: {member} is not a NumPy array ({exc})") from None


def _check(
    name: str, shape: tuple[int, ...], dtype: np.dtype[Any], spec: ModelSpec
) -> int:
    """The samples of one array, after its dtype and shape are checked."""
    if dtype.hasobject:
        raise DataError(f"{name} holds Python objects; save numbers (no pickle)")
    wanted = "integer" if name.startswith("y") else "real"
    ok = dtype.kind in "iu" if wanted == "integer" else dtype.kind in "iuf"
    if not ok:
        raise DataError(f"{name} is {dtype}; it must hold {wanted} numbers")
    expected = (1,) if name.startswith("y") else (1, *spec.input_shape)
    if len(shape) != len(expected) or tuple(shape[1:]) != expected[1:]:
        form = (
            "(N,)"
            if name.startswith("y")
            else f"(N, {', '.join(map(str, spec.input_shape))})"
        )
        raise DataError(f"{name} has shape {shape}; {spec.name} needs {form}")
    return int(shape[0])


def load(path: Path, spec: ModelSpec) -> Split:
    """The four arrays of ``path`` as a ``Split`` for ``spec``."""
    regular_file(path, WHAT)
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise DataError(f"{path} is not an .npz file (not a zip archive)") from None
    with archive:
        members = {Path(n).stem: n for n in archive.namelist() if n.endswith(".npy")}
        missing = [n for n in NAMES if n not in members]
        if missing:
            raise DataError(f"{path} has no {', '.join(missing)}; {WHAT} is needed")
        total, counts = 0, {}
        for name in NAMES:
            shape, _, dtype = _header(archive, members[name], path)
            counts[name] = _check(name, shape, dtype, spec)
            total += math.prod(shape) * dtype.itemsize
        within_limit(total, str(path))
        for part in ("train", "test"):
            if counts[f"x_{part}"] != counts[f"y_{part}"]:
                raise DataError(
                    f"{path}: x_{part} has {counts[f'x_{part}']} samples, "
                    f"y_{part} {counts[f'y_{part}']}"
                )
    with np.load(path, allow_pickle=False) as arrays:
        x_train, y_train, x_test, y_test = (arrays[n] for n in NAMES)
    for name, y in (("y_train", y_train), ("y_test", y_test)):
        if len(y) and (y.min() < 0 or y.max() >= spec.classes):
            raise DataError(
                f"{path}: {name} holds labels outside 0..{spec.classes - 1}, "
                f"the classes {spec.name} scores"
            )
    return Split(
        x_train.astype(np.float32),
        y_train.astype(np.int32),
        x_test.astype(np.float32),
        y_test.astype(np.int32),
        source=str(path),
    )
