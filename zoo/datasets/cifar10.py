"""CIFAR-10 from its binary version (``cifar-10-binary.tar.gz``).

Expected in one folder (the archive's ``cifar-10-batches-bin``):
``data_batch_1.bin`` to ``data_batch_5.bin`` (training) and
``test_batch.bin``.  Each file is a run of 3,073-byte records: one label
byte (0 to 9), then the 32x32 image as 1,024 red, 1,024 green and 1,024
blue bytes, each row by row.  The real files hold 10,000 records each; here
every file must hold whole records and all six the same number of them, so
a truncated download, a missing batch or the Python (pickle) version is
refused, naming the file.

Images come out ``(N, 32, 32, 3)`` (canonical, channels last), scaled to
[0, 1] as ``raw / 255`` in float32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from zoo import files
from zoo.datasets import DataError, Split, read_exactly, regular_file

TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
TEST_FILE = "test_batch.bin"
SIDE, CHANNELS, CLASSES = 32, 3, 10
RECORD = 1 + SIDE * SIDE * CHANNELS


def load(where: Path) -> Split:
    """Both splits from ``where``, checked."""
    train = [read(where / name) for name in TRAIN_FILES]
    test = read(where / TEST_FILE)
    sizes = {len(labels) for _, labels in (*train, test)}
    if len(sizes) > 1:
        counts = ", ".join(
            f"{name} {len(labels)}"
            for name, (_, labels) in zip(
                (*TRAIN_FILES, TEST_FILE), (*train, test), strict=True
            )
        )
        raise DataError(
            f"the CIFAR-10 files in {where} hold different numbers of records "
            f"({counts}); every file of the dataset holds as many (10,000)"
        )
    images = np.concatenate([x for x, _ in train])
    labels = np.concatenate([y for _, y in train])
    return Split(
        scaled(images),
        labels.astype(np.int32),
        scaled(test[0]),
        test[1].astype(np.int32),
        source=f"CIFAR-10 binary files in {where}",
    )


def scaled(images: np.ndarray) -> np.ndarray:
    """``uint8`` images as float32 in [0, 1]."""
    return images.astype(np.float32) / np.float32(255)


def read(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One batch file as raw ``uint8`` images ``(N, 32, 32, 3)`` and labels."""
    if not (path.exists() or path.is_symlink()):
        found = (
            sorted(p.name for p in path.parent.glob("*"))
            if path.parent.is_dir()
            else []
        )
        hint = (
            " (that is the Python version; use the binary one, cifar-10-binary.tar.gz)"
            if any(
                not name.endswith(".bin") and name.startswith("data_batch")
                for name in found
            )
            else ""
        )
        if not hint and (path.parent.parent / path.name).is_file():
            hint = (
                f" ({path.name} is in {path.parent.parent}: CIFAR-10's files go in "
                f"its {path.parent.name}/ folder)"
            )
        raise DataError(
            f"{path} is missing: CIFAR-10's binary version needs "
            f"{', '.join((*TRAIN_FILES, TEST_FILE))} in {path.parent}{hint}"
        )
    regular_file(path, "a CIFAR-10 binary batch file")
    # The size first: a file of another size is refused unread.
    size = path.stat().st_size
    if not size or size % RECORD:
        raise DataError(
            f"{path} is {size} bytes, not a whole number of {RECORD}-byte "
            f"records (a label byte and a 32x32x3 image): truncated or another format"
        )
    try:
        with files.opened(path, size, follow=True) as stream:
            raw = read_exactly(stream, path, size, "its size on disk")
    except OSError as exc:
        raise DataError(f"{path} cannot be read ({exc.strerror or exc})") from exc
    records = np.frombuffer(raw, np.uint8).reshape(-1, RECORD)
    labels = records[:, 0]
    if int(labels.max()) >= CLASSES:
        raise DataError(
            f"{path} holds label {int(labels.max())} in record "
            f"{int(np.argmax(labels >= CLASSES))}; CIFAR-10's are 0 to 9 "
            f"(not the CIFAR-10 binary format?)"
        )
    planes = records[:, 1:].reshape(-1, CHANNELS, SIDE, SIDE)
    return np.ascontiguousarray(planes.transpose(0, 2, 3, 1)), labels
