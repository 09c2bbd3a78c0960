"""Reading and writing named arrays as ``.npz``, reproducibly and atomically.

``numpy.savez`` stamps each member with the current time, so two saves of the
same arrays differ byte for byte.  Here every member gets a fixed timestamp, so
the same arrays always give the same file.  Files are written beside their
destination and renamed into place, so a crash never leaves half a file.
``digest`` names a set of arrays by its content, so a worker can check that
the files it loaded hold what the orchestrator's gate verified.
Pure NumPy and the standard library (NumPy 1.23-safe): usable in every
environment.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

_EPOCH = (1980, 1, 1, 0, 0, 0)


def save_npz(path: str | os.PathLike[str], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` to ``path`` deterministically (sorted names, fixed dates)."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w") as zf:
            for name in sorted(arrays):
                info = zipfile.ZipInfo(f"{name}.npy", date_time=_EPOCH)
                info.compress_type = zipfile.ZIP_STORED
                with zf.open(info, "w", force_zip64=True) as member:
                    np.lib.format.write_array(
                        member, np.asarray(arrays[name], order="C"), allow_pickle=False
                    )
        Path(tmp).replace(dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` into memory; pickled objects are refused."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


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
