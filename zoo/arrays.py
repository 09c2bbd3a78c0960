"""Reading and writing named arrays as ``.npz``, reproducibly and atomically.

``numpy.savez`` stamps each member with the current time, so two saves of the
same arrays differ byte for byte.  Here every member gets a fixed timestamp, so
the same arrays always give the same file.  Files are written beside their
destination and renamed into place, so a crash never leaves half a file.
``digest`` names a set of arrays by its content, so a worker can check that
the files it loaded hold what the orchestrator's gate verified.

Reading trusts nothing in the file (a model store's ``weights.npz``, a user's
``ARRAYS.npz``): each member's ``.npy`` header is read with its length field
checked first (at most :data:`MAX_HEADER` bytes), parsed as a literal
(never unpickled), and the member must unpack to exactly the bytes that
header describes, stored or deflated; the data is then read a chunk at a
time into one array of that size, so a zip bomb costs no more than the
arrays it claims to hold, and those can be counted before anything is
allocated (:func:`npy_members`).  Every problem is an :class:`NpzError`:
one sentence naming the file and the member.
Pure NumPy and the standard library (NumPy 1.23-safe): usable in every
environment.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import math
import os
import struct
import threading
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from zoo import files

_EPOCH = (1980, 1, 1, 0, 0, 0)
# The largest ``.npz`` opened: a dataset's arrays (``zoo.datasets.MAX_BYTES``,
# 4 GiB) with room to spare; what a member holds is counted from its header
# before anything is allocated.
MAX_FILE_BYTES = 8 << 30


def save_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` deterministically (sorted names, fixed dates)."""
    dest = Path(path)
    files.folder(dest.parent)
    with files.zip_writer(dest) as zf:
        for name in sorted(arrays):
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
            info.compress_type = zipfile.ZIP_STORED
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(
                    member, np.asarray(arrays[name], order="C"), allow_pickle=False
                )


# The longest ``.npy`` header read: NumPy writes some 128 bytes for any
# array of numbers (its own reader stops at 10,000); a longer length field is
# refused before a byte of the header is read.
MAX_HEADER = 1 << 16
# How much of a member is unpacked at a time.
CHUNK = 1 << 22
_MAGIC = b"\x93NUMPY"
_KEYS = {"descr", "fortran_order", "shape"}
# The compressions read: ``numpy.savez`` stores, ``savez_compressed``
# deflates (bzip2 and LZMA unpack a whole read at once, unbounded).
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


class NpzError(ValueError):
    """An ``.npz`` or one of its members that cannot be read, in one sentence."""


@dataclass(frozen=True)
class Member:
    """One ``.npy`` member of an ``.npz`` as its header describes it."""

    name: str  # the member's name in the archive, ``x_train.npy``
    shape: tuple[int, ...]
    dtype: np.dtype[Any]
    fortran: bool
    offset: int  # bytes before the data: magic, version, length, header

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


@contextlib.contextmanager
def open_npz(
    path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES, *, follow: bool = False
) -> Iterator[zipfile.ZipFile]:
    """``path`` as a zip archive through the door (``zoo.files.open_zip``: a
    regular file of at most ``limit`` bytes, a link followed only when
    ``follow``, a path the user named), refused in one sentence when it is
    not one (a missing or unreadable file is the ``OSError`` of opening
    it; a FIFO, a device, a link or a larger file a ``zoo.files.Refused``)."""
    try:
        with files.open_zip(path, limit, follow=follow) as archive:
            yield archive
    except files.Refused as exc:
        if str(exc).startswith(f"{path} is not a zip archive"):
            raise NpzError(f"{path} is not an .npz file ({exc})") from None
        raise


def _exactly(stream: files.Bounded, size: int, where: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise NpzError(f"{where} is truncated: {len(data)} of {size} bytes")
    return data


# CPython 3.11's parser is not safe to enter from two threads at once
# (``SystemError: AST constructor recursion depth mismatch``, met when the
# checker read two workers' replies side by side): one header at a time.
_PARSING = threading.Lock()


def _parse(text: bytes, version: int, where: str) -> tuple[Any, bool, tuple[int, ...]]:
    try:
        with _PARSING:
            header = ast.literal_eval(
                text.decode("utf-8" if version >= 3 else "latin1")
            )
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise NpzError(f"{where} has no readable .npy header ({exc})") from None
    if not isinstance(header, dict) or set(header) != _KEYS:
        raise NpzError(
            f"{where}'s .npy header is not a dict of {', '.join(sorted(_KEYS))}"
        )
    shape, fortran = header["shape"], header["fortran_order"]
    if not (
        isinstance(shape, tuple)
        and all(type(n) is int and n >= 0 for n in shape)
        and isinstance(fortran, bool)
    ):
        raise NpzError(
            f"{where}'s .npy header has shape {shape!r} and fortran_order "
            f"{fortran!r}; a tuple of counts and a bool belong there"
        )
    return header["descr"], fortran, shape


def npy_member(archive: zipfile.ZipFile, name: str, where: str) -> Member:
    """The header of member ``name``, checked before its data is read: the
    length field at most :data:`MAX_HEADER`, a literal dict of a dtype that
    holds no Python objects, a shape and an order, and the member's size in
    the archive exactly the header and the data that header describes.
    ``where`` names the member in errors (``path: name``)."""
    info = archive.getinfo(name)
    if info.compress_type not in _METHODS:
        raise NpzError(
            f"{where} is compressed with method {info.compress_type}; "
            "stored or deflated members (numpy.savez, savez_compressed) are read"
        )
    try:
        with files.member(archive, info, info.file_size, where) as stream:
            prefix = stream.read(len(_MAGIC) + 2)
            if (
                len(prefix) < len(_MAGIC) + 2
                or prefix[: len(_MAGIC)] != _MAGIC
                or prefix[-2] not in (1, 2, 3)
            ):
                raise NpzError(f"{where} is not a NumPy .npy array (no .npy magic)")
            version = prefix[-2]
            width = 2 if version == 1 else 4
            length = int.from_bytes(_exactly(stream, width, where), "little")
            if length > MAX_HEADER:
                raise NpzError(
                    f"{where} announces a .npy header of {length} bytes, more "
                    f"than the {MAX_HEADER} read (zoo.arrays.MAX_HEADER)"
                )
            text = _exactly(stream, length, where)
    except files.Refused as exc:
        raise NpzError(str(exc)) from None
    descr, fortran, shape = _parse(text, version, where)
    try:
        dtype = np.lib.format.descr_to_dtype(descr)
    except (ValueError, TypeError, KeyError, SyntaxError) as exc:
        raise NpzError(f"{where} has no NumPy dtype in its header ({exc})") from None
    if dtype.hasobject:
        raise NpzError(f"{where} holds Python objects; save numbers (no pickle)")
    if not dtype.itemsize:
        raise NpzError(f"{where} is of {dtype}, which has no bytes to read")
    member = Member(name, shape, dtype, fortran, len(prefix) + width + length)
    expected = member.offset + member.nbytes
    if info.file_size != expected:
        raise NpzError(
            f"{where} unpacks to {info.file_size} bytes, not the {expected} its "
            f".npy header describes ({shape} of {dtype})"
        )
    return member


def read_member(
    archive: zipfile.ZipFile,
    member: Member,
    where: str,
    dtype: np.dtype[Any] | None = None,
    check: Callable[[np.ndarray], None] | None = None,
) -> np.ndarray:
    """Member ``member``'s array, as ``dtype`` (None: its own), unpacked
    :data:`CHUNK` bytes at a time into the one array it fills: no more in
    memory than that array and one chunk.  ``check`` sees each chunk's
    values as stored, before any conversion (to refuse them)."""
    target = member.dtype if dtype is None else np.dtype(dtype)
    flat = np.empty(member.count, target)
    size = member.offset + member.nbytes
    try:
        with files.member(archive, member.name, size, where) as stream:
            _exactly(stream, member.offset, where)
            if dtype is None and check is None:  # the bytes as they are
                raw = flat.view(np.uint8)
                for start in range(0, len(raw), CHUNK):
                    size = min(CHUNK, len(raw) - start)
                    raw[start : start + size] = np.frombuffer(
                        _exactly(stream, size, where), np.uint8
                    )
            else:  # whole values, converted as they come
                step = max(1, CHUNK // member.dtype.itemsize)
                for start in range(0, member.count, step):
                    n = min(step, member.count - start)
                    data = _exactly(stream, n * member.dtype.itemsize, where)
                    values = np.frombuffer(data, member.dtype)
                    if check is not None:
                        check(values)
                    flat[start : start + n] = values
            if stream.read(1):  # the size was checked; this also checks the CRC
                raise NpzError(f"{where} goes on past its .npy data")
    except files.Refused as exc:
        raise NpzError(str(exc)) from None
    if member.fortran:
        return flat.reshape(member.shape[::-1]).T
    return flat.reshape(member.shape)


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` into memory, each member checked as
    :func:`npy_member` says; pickled objects, members that are not ``.npy``
    arrays and names given twice are refused (:class:`NpzError`)."""
    with open_npz(path) as archive:
        names = archive.namelist()
        arrays: dict[str, np.ndarray] = {}
        for name in names:
            where = f"{path}: {name}"
            if not name.endswith(".npy"):
                raise NpzError(f"{where} is not a .npy array")
            key = name[: -len(".npy")]
            if key in arrays:
                raise NpzError(f"{where} is in the archive twice")
            arrays[key] = read_member(archive, npy_member(archive, name, where), where)
    return arrays


_DIGEST_TAG = b"zoo.arrays.digest/1\0"


def digest(arrays: Mapping[str, np.ndarray]) -> str:
    """SHA-256 (hex) of ``arrays``' content: every name, dtype, shape and byte.

    Arrays are taken in sorted name order, each as its name, its dtype
    (``dtype.str``; the full description for structured dtypes), its shape
    and its C-contiguous bytes.  Every field is written with its length (and
    the shape with its rank) in front, so the encoding can be read back
    unambiguously: two different contents never hash the same bytes, not by
    moving a boundary between names, shapes or arrays either.  The memory
    layout of an array (Fortran order, strides) does not matter; its values do.
    """
    h = hashlib.sha256(_DIGEST_TAG)
    h.update(_count(len(arrays)))
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        if a.dtype.hasobject:
            raise ValueError(f"array {name!r} holds Python objects, not values")
        descr = np.lib.format.dtype_to_descr(a.dtype)
        _field(h, name.encode("utf-8"))
        _field(h, (descr if isinstance(descr, str) else repr(descr)).encode("utf-8"))
        h.update(_count(a.ndim))
        for n in a.shape:
            h.update(_count(n))
        h.update(_count(a.nbytes))
        # ``ascontiguousarray`` copies only what is not C-contiguous already; its
        # 1-d view for a 0-d array does not matter, the shape was written above.
        h.update(np.ascontiguousarray(a).reshape(-1).view(np.uint8).data)
    return h.hexdigest()


def _count(n: int) -> bytes:
    return struct.pack("<Q", n)


def _field(h: hashlib._Hash, data: bytes) -> None:
    h.update(_count(len(data)))
    h.update(data)
