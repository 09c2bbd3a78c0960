"""The checks of drawn noise every path's evaluation runs
(``workers.protocol.check_noise``): a dropout's (``check_dropout``, a draw
per value or shared along axes) and a normal draw's (``check_normal``,
Keras' GaussianNoise and GaussianDropout): what passes, and each way a
wrong draw is caught."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import keras_on_torch
from workers.launch import PROJECT_ROOT
from workers.protocol import check_apart, check_dropout, check_normal

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


# A draw shared along axes (Keras' SpatialDropout1D/2D, a noise_shape) -------


def _spatial(per_value: bool) -> tuple[np.ndarray, np.ndarray]:
    """A batch of images ``(16, 6, 6, 4)`` and their dropout at RATE: one
    draw per image channel, or (``per_value``) one per value."""
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 2.0, (16, 6, 6, 4)).astype(np.float32)
    shape = x.shape if per_value else (16, 1, 1, 4)
    kept = rng.random(shape) >= RATE
    return x, np.where(kept, x / np.float32(1 - RATE), 0).astype(np.float32)


def test_a_draw_shared_per_channel_passes() -> None:
    x, y = _spatial(per_value=False)
    assert check_dropout("drop", RATE, x, y, shared_axes=(1, 2)) is None


def test_a_draw_per_value_where_one_per_channel_is_due_is_caught() -> None:
    x, y = _spatial(per_value=True)
    problem = check_dropout("drop", RATE, x, y, shared_axes=(1, 2))
    assert problem is not None
    assert "shares a draw along axes [1, 2], yet 64 of its 64 draws" in problem


def test_a_shared_draw_at_the_wrong_rate_is_caught() -> None:
    """Over the draws, not the values: 64 channels all kept is 0.75 +- 0.65."""
    x, _ = _spatial(per_value=False)
    y = np.zeros_like(x)  # every channel of every image dropped
    problem = check_dropout("drop", RATE, x, y, shared_axes=(1, 2))
    assert problem is not None
    assert "kept 0.000 of 64 draws shared along axes [1, 2]" in problem


# Normal noise: Keras' GaussianNoise and GaussianDropout ---------------------

STDDEV = 0.1


def _normal(
    draws: str, stddev: float, mean: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(2)
    x = rng.uniform(-2.0, 2.0, 4096).astype(np.float32)
    n = rng.normal(mean, stddev, x.shape)
    y = x + n if draws == "added" else x * (1 + n)
    return x, y.astype(np.float32)


@pytest.mark.parametrize("draws", ["added", "multiplied"])
def test_normal_noise_of_the_right_deviation_passes(draws: str) -> None:
    x, y = _normal(draws, STDDEV)
    assert check_normal("noise layer 'n'", draws, STDDEV, x, y) is None


@pytest.mark.parametrize("draws", ["added", "multiplied"])
@pytest.mark.parametrize(
    ("stddev", "mean"),
    [
        (STDDEV**2, 0.0),  # the deviation taken as the variance
        (STDDEV * 1.5, 0.0),  # GaussianDropout's rate taken as its deviation
        (STDDEV, STDDEV),  # drawn about the wrong mean
        (0.0, 0.0),  # no noise at all
    ],
)
def test_normal_noise_drawn_wrong_is_caught(
    draws: str, stddev: float, mean: float
) -> None:
    x, y = _normal(draws, stddev, mean)
    problem = check_normal("noise layer 'n'", draws, STDDEV, x, y)
    assert problem is not None
    assert problem.startswith(f"noise layer 'n' drew 4096 values {draws} whose ")


def test_normal_noise_over_large_values_passes_despite_float32_rounding() -> None:
    """``y - x`` of float32 values near 1e4 carries their rounding (1e-3)
    into a deviation of 1e-3: the bound widens by what that can move."""
    rng = np.random.default_rng(3)
    x = rng.uniform(1e4, 2e4, 4096).astype(np.float32)
    y = (x + rng.normal(0, 1e-3, x.shape)).astype(np.float32)
    assert check_normal("noise layer 'n'", "added", 1e-3, x, y) is None


# Keras on PyTorch checks the masks its layers draw inside them (a recurrent
# cell's, an attention's dropout of its weights: workers.keras_runner's
# _recording); with Keras' masks drawn unscaled, or keeping every value, the
# first such layer is named.
CELL_MASKS = """
import sys
import tomllib
from pathlib import Path
from keras.src.layers.rnn import dropout_rnn_cell
from workers.keras_runner import KerasRunner
from zoo.data import make_batches
from zoo.user_models import spec_from_document
from zoo.weights import make_weights
table = Path(f"docs/results/kinds/{sys.argv[2]}.toml").read_text()
spec = spec_from_document("cells", tomllib.loads(table)["model"])
weights, (x, y) = make_weights(spec, 0), make_batches(spec, 0, 8, 1)
runner = KerasRunner("torch")
runner.evaluate(spec, weights, x[0], y[0])
print("right: passed")
drawn = dropout_rnn_cell.DropoutRNNCell._create_dropout_mask
def times(masks, factor):  # one mask, or Keras' list of one per gate
    return [m * factor for m in masks] if isinstance(masks, list) else masks * factor
wrong = {
    "unscaled": lambda self, step, rate: times(drawn(self, step, rate), 1 - rate),
    "none": lambda self, step, rate: times(drawn(self, step, 0.0), 1 / (1 - rate)),
}
if sys.argv[1] in wrong:
    dropout_rnn_cell.DropoutRNNCell._create_dropout_mask = wrong[sys.argv[1]]
else:  # an attention's weights dropped unscaled
    from keras.src.layers.regularization.dropout import Dropout
    call = Dropout.call
    Dropout.call = lambda self, x, training=False: call(self, x, training) * (
        1 - self.rate
    )
try:
    runner.evaluate(spec, weights, x[0], y[0])
except ValueError as exc:
    print("wrong:", exc)
"""


@pytest.mark.parametrize(
    ("table", "wrong", "caught"),
    [
        ("recurrent_dropout", "unscaled", "layer 'lstm' at rate 0.3 kept values off"),
        ("recurrent_dropout", "none", "layer 'lstm' at rate 0.3 kept"),
        # with recurrent_dropout: the masks per gate, the input's first
        ("recurrent_state_dropout", "unscaled", "input masks of lstm layer 'lstm'"),
        # an attention's weights: one mask per head
        ("attention_dropout", "weights", "scores masks of attention layer 'att1'"),
    ],
)
def test_keras_masks_inside_a_layer_are_checked(
    table: str, wrong: str, caught: str
) -> None:
    """Keras' own masks pass, on a recurrent layer's input alone
    (``dropout``), per gate (``recurrent_dropout``) and on an attention's
    weights (each layer's output recomputed from them, ``workers.masks``);
    drawn unscaled, or keeping every value, the first layer is named."""
    done = keras_on_torch(["-c", CELL_MASKS, wrong, table], cwd=PROJECT_ROOT)
    lines = done.stdout.strip().splitlines()
    assert "right: passed" in lines
    assert any(line.startswith("wrong: ") and caught in line for line in lines), (
        done.stdout
    )


def _masks(n: int, seed: int) -> np.ndarray:
    """A mask of ``n`` draws at ``RATE``, scaled as a dropout's output of ones."""
    kept = np.random.default_rng(seed).random(n) >= RATE
    return np.where(kept, 1 / (1 - RATE), 0.0).astype(np.float32)


def test_two_copies_drawing_their_own_pass_and_one_mask_twice_is_caught() -> None:
    """A Bidirectional's directions each draw their own mask (Keras' two
    cells): two independent draws agree on about ``(1 - r)^2 + r^2`` of
    them; one mask used twice on all."""
    ones = np.ones(4096, np.float32)
    first, second = _masks(4096, 1), _masks(4096, 2)
    assert check_apart("b", RATE, ones, [first, second]) is None
    problem = check_apart("b", RATE, ones, [first, first])
    assert problem is not None
    assert "drew alike in its copies on 1.000 of 4096" in problem
    assert "one mask, not one each" in problem
