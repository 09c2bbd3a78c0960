"""The dropout check every path's evaluation runs (``check_dropout``): what
passes, and each way a wrong dropout is caught."""

from __future__ import annotations

import numpy as np
import pytest

from workers.protocol import check_dropout

RATE = 0.25


def _dropped(keep: float, scale: float, n: int = 4096) -> tuple[np.ndarray, np.ndarray]:
    """Inputs, and outputs keeping a ``keep`` share of them scaled by ``scale``."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, n).astype(np.float32)
    kept = rng.random(n) < keep
    return x, np.where(kept, x * np.float32(scale), 0).astype(np.float32)


def test_a_correct_dropout_passes() -> None:
    x, y = _dropped(1 - RATE, 1 / (1 - RATE))
    assert check_dropout("drop", RATE, x, y) is None


def test_unscaled_kept_values_are_caught() -> None:
    x, y = _dropped(1 - RATE, 1.0)
    problem = check_dropout("drop", RATE, x, y)
    assert problem is not None
    assert "kept values off the input over 1 - rate" in problem


@pytest.mark.parametrize("keep", [1.0, RATE])  # no drops; rate read as keep
def test_a_wrong_kept_fraction_is_caught(keep: float) -> None:
    x, y = _dropped(keep, 1 / (1 - RATE))
    problem = check_dropout("drop", RATE, x, y)
    assert problem is not None
    assert "of 4096 values, outside 0.750 +- 0.059" in problem


def test_a_changed_shape_is_caught() -> None:
    x, y = _dropped(1 - RATE, 1 / (1 - RATE))
    assert "changed the shape" in str(check_dropout("drop", RATE, x, y[:-1]))


def test_zero_inputs_are_not_counted() -> None:
    """A zero input gives zero whether kept or dropped: the fraction is over
    the nonzero ones (a ReLU before a dropout zeroes about half)."""
    x, y = _dropped(1 - RATE, 1 / (1 - RATE))
    x_more = np.concatenate([x, np.zeros(4096, np.float32)])
    y_more = np.concatenate([y, np.zeros(4096, np.float32)])
    assert check_dropout("drop", RATE, x_more, y_more) is None
