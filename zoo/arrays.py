"""Reading and writing named arrays as ``.npz``, reproducibly and atomically.

``numpy.savez`` stamps each member with the current time, so two saves of the
same arrays differ byte for byte.  Here every member gets a fixed timestamp, so
the same arrays always give the same file.  Files are written beside their
destination and renamed into place, so a crash never leaves half a file.
Pure NumPy and the standard library: usable in every environment.
"""

from __future__ import annotations

import os
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
                        member, np.ascontiguousarray(arrays[name]), allow_pickle=False
                    )
        Path(tmp).replace(dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read every array of an ``.npz`` into memory; pickled objects are refused."""
    with np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}
