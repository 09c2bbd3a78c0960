"""A user's own arrays for a user's model (``--model FILE --data
ARRAYS.npz``): ``x_train``, ``y_train``, ``x_test``, ``y_test`` in one
``.npz``, read without pickle.

The four members are ``x_train.npy``, ``y_train.npy``, ``x_test.npy`` and
``y_test.npy`` at the top of the archive, as ``numpy.savez(path,
x_train=..., ...)`` writes them (stored or deflated); other members are
never read, and one of the four in a folder of the archive is refused.
Every member's ``.npy`` header is read first (``zoo.arrays.npy_member``: a
header length field of at most 64 KiB, a member that unpacks to exactly the
bytes its header describes): the dtypes (real numbers for ``x``, integer
token ids when the model's first layer is an embedding, integers for
``y``) and shapes (``x`` is ``(N, *input_shape)`` of the model, ``y`` is
``(N,)``) are checked and the bytes they take once read (float32 inputs or
int32 ids, int32 labels) counted against ``zoo.datasets.USER_MAX_BYTES``
(1 GiB) before any array is allocated.  Each member is then unpacked a
chunk at a time into the array it becomes, its values checked as they come:
labels in ``0 .. classes - 1``, token ids in ``0 .. tokens - 1``, inputs
finite as float32 (``check_split`` sees the rest).
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from zoo.arrays import Member, NpzError, npy_member, open_npz, read_member
from zoo.datasets import DataError, Split, regular_file, within_limit
from zoo.specs import ModelSpec

NAMES = ("x_train", "y_train", "x_test", "y_test")
WHAT = "an .npz of x_train, y_train, x_test, y_test"
Check = Callable[[np.ndarray], None]


def _member(archive: zipfile.ZipFile, name: str, path: Path) -> Member:
    """The header of ``name.npy``, which must sit once at the top level."""
    file = f"{name}.npy"
    names = archive.namelist()
    if file not in names:
        nested = [n for n in names if n.rsplit("/", 1)[-1] == file]
        where = f" (it has {nested[0]}: save them at the top level)" if nested else ""
        raise DataError(f"{path} has no {file}{where}; {WHAT} is needed")
    if names.count(file) > 1:
        raise DataError(f"{path} holds {file} {names.count(file)} times")
    try:
        return npy_member(archive, file, f"{path}: {file}")
    except NpzError as exc:
        raise DataError(str(exc)) from None


def _check(name: str, member: Member, spec: ModelSpec) -> int:
    """The samples of one array, after its dtype and shape are checked."""
    dtype, shape = member.dtype, member.shape
    if name.startswith("y"):
        ok, wanted = dtype.kind in "iu", "integer numbers (class ids)"
    elif spec.tokens:
        ok = dtype.kind in "iu"
        wanted = (
            f"integer token ids: {spec.name} starts with an embedding of "
            f"{spec.tokens} tokens"
        )
    else:
        ok, wanted = dtype.kind in "iuf", "real numbers"
    if not ok:
        raise DataError(f"{name} is {dtype}; it must hold {wanted}")
    expected = (1,) if name.startswith("y") else (1, *spec.input_shape)
    if len(shape) != len(expected) or tuple(shape[1:]) != expected[1:]:
        form = (
            "(N,)"
            if name.startswith("y")
            else f"(N, {', '.join(map(str, spec.input_shape))})"
        )
        raise DataError(f"{name} has shape {shape}; {spec.name} needs {form}")
    return int(shape[0])


def _target(name: str, spec: ModelSpec) -> np.dtype[Any]:
    """What array ``name`` becomes: int32 labels and token ids, else float32."""
    return np.dtype(np.int32 if name.startswith("y") or spec.tokens else np.float32)


def _in_range(name: str, path: Path, spec: ModelSpec) -> Check | None:
    """The check of each chunk of array ``name`` as stored (None: none)."""
    if name.startswith("y"):
        top, what = spec.classes, f"labels outside 0..{spec.classes - 1}, the classes"
    elif spec.tokens:
        top = spec.tokens
        what = f"token ids outside 0..{top - 1}, the rows of the embedding"
    else:
        return None

    def check(values: np.ndarray) -> None:
        if len(values) and (values.min() < 0 or values.max() >= top):
            raise DataError(f"{path}: {name} holds {what} {spec.name} has")

    return check


def _finite(name: str, path: Path) -> Check:
    def check(values: np.ndarray) -> None:
        if values.dtype.kind == "f":
            with np.errstate(over="ignore"):
                finite = np.isfinite(values.astype(np.float32)).all()
            if not finite:
                raise DataError(
                    f"{path}: {name} holds NaN or inf "
                    "(or numbers beyond float32's range)"
                )

    return check


def load(path: Path, spec: ModelSpec) -> Split:
    """The four arrays of ``path`` as a ``Split`` for ``spec``."""
    regular_file(path, WHAT)
    try:
        with open_npz(path, follow=True) as archive:
            arrays = _read(archive, path, spec)
    except NpzError:
        raise DataError(f"{path} is not an .npz file (not a zip archive)") from None
    except OSError as exc:
        raise DataError(f"{path} cannot be read ({exc})") from None
    return Split(
        arrays["x_train"],
        arrays["y_train"],
        arrays["x_test"],
        arrays["y_test"],
        source=str(path),
    )


def _read(archive: zipfile.ZipFile, path: Path, spec: ModelSpec) -> dict[str, Any]:
    """The four arrays, each header checked before any is read."""
    members = {name: _member(archive, name, path) for name in NAMES}
    counts = {name: _check(name, m, spec) for name, m in members.items()}
    within_limit(
        sum(m.count * _target(n, spec).itemsize for n, m in members.items()),
        f"{path}, as its .npy headers say,",
        "USER_MAX_BYTES",
    )
    for part in ("train", "test"):
        if counts[f"x_{part}"] != counts[f"y_{part}"]:
            raise DataError(
                f"{path}: x_{part} has {counts[f'x_{part}']} samples, "
                f"y_{part} {counts[f'y_{part}']}"
            )
    arrays = {}
    for name, member in members.items():
        check = _in_range(name, path, spec) or _finite(name, path)
        try:
            arrays[name] = read_member(
                archive,
                member,
                f"{path}: {member.name}",
                _target(name, spec),
                check,
            )
        except NpzError as exc:
            raise DataError(str(exc)) from None
    return arrays
