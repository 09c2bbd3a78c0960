"""The one interface both runners meet: what a worker asks of a path.

``workers.serve`` turns each typed request (``workers.messages``) into calls
of a ``Runner``; ``workers.keras_runner.KerasRunner`` (the Keras paths) and
``workers.native_runner.NativeRunner`` (the hand-written paths) implement it.
The closures ``trainer`` and ``predictor`` return are what the harness times;
``evaluate``, ``activations`` and ``session`` are what the equivalence checks
compare.  The closures come wrapped (``Trainer``, ``Predictor``): still called
as ``run(n)`` and ``run()``, they also say afterwards, outside any timed
region, whether the run left NaN or inf behind (``Trainer.finish``,
``Predictor.nonfinite``), so a diverged run is never recorded as a timing.
``NativeRunner`` has two more (``NativeOnly``): the reference loop the
self-check times and the idiomatic step the floors benchmark times.

Framework-free and NumPy 1.23-safe: the MXNet worker imports it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from zoo.specs import ModelSpec

Weights = Mapping[str, np.ndarray]  # canonical (Keras-layout) arrays by name
NAMED = 3  # parameters a non-finite sentence names at most


@dataclass(frozen=True)
class TrainCheck:
    """What a training run left behind, checked after its timing.

    ``final_loss``: the mean cross-entropy of the last mini-batch trained, at
    the parameters after the last run, or ``None`` when it is not finite.
    ``nonfinite``: ``None`` when the loss and every parameter are finite, else
    one sentence saying which are not.  ``params``: those parameters by
    canonical name, in canonical layout, so the gate can compare what the
    timed closure trained with what the checks trained (``TimedOutputs``)."""

    final_loss: float | None
    nonfinite: str | None
    params: Mapping[str, np.ndarray] = field(
        default_factory=dict, repr=False, compare=False
    )


class Trainer:
    """``run(n)``, the closure the harness times, and what it left behind.

    ``check(n)`` is the runner's: the loss of the last mini-batch of a run of
    ``n`` steps (batch ``n - 1``) at the current parameters, and those
    parameters, through ``check_training``.  Calling ``run`` costs one
    attribute store beyond the runner's closure; ``finish`` runs nothing
    timed."""

    __slots__ = ("_check", "_run", "steps")

    def __init__(
        self, run: Callable[[int], None], check: Callable[[int], TrainCheck]
    ) -> None:
        self._run, self._check = run, check
        self.steps = 0  # the step count of the latest run

    def __call__(self, n: int) -> None:
        self.steps = n
        self._run(n)

    def finish(self) -> TrainCheck:
        """The final loss and whether anything is NaN or inf (after timing)."""
        return self._check(self.steps)


class Predictor:
    """``run()``, the closure the harness times, keeping the outputs of its
    latest call (in the framework's own tensors; ``to_numpy`` reads them back
    only when asked, after timing)."""

    __slots__ = ("_outputs", "_run", "_to_numpy")

    def __init__(
        self, run: Callable[[], Any], to_numpy: Callable[[Any], Sequence[np.ndarray]]
    ) -> None:
        self._run, self._to_numpy = run, to_numpy
        self._outputs: Any = None

    def __call__(self) -> None:
        self._outputs = self._run()

    def nonfinite(self) -> str | None:
        """``None`` when the latest round's outputs are all finite, else a
        sentence saying how many of how many values are NaN or inf."""
        return check_outputs(self.outputs())

    def outputs(self) -> list[np.ndarray]:
        """The latest round's outputs as NumPy arrays (read back after timing)."""
        if self._outputs is None:
            raise RuntimeError("no round has run yet")
        return [np.asarray(a) for a in self._to_numpy(self._outputs)]


def check_training(loss: float, params: Mapping[str, np.ndarray]) -> TrainCheck:
    """The final loss and parameters of a training run, judged."""
    bad = [name for name, a in params.items() if not np.isfinite(a).all()]
    total = len(params)
    parts = []
    if not math.isfinite(loss):
        parts.append(f"loss {loss} after the last timed run")
    if bad:
        named = ", ".join(bad[:NAMED]) + (", ..." if len(bad) > NAMED else "")
        holds = "holds" if len(bad) == 1 else "hold"
        when = "" if parts else " after the last timed run"
        parts.append(
            f"{len(bad)} of {total} parameters {holds} NaN or inf{when}: {named}"
        )
    elif parts:
        parts.append(f"all {total} parameters are finite")
    return TrainCheck(
        final_loss=loss if math.isfinite(loss) else None,
        nonfinite="; ".join(parts) or None,
        params=dict(params),
    )


def check_outputs(outputs: Sequence[np.ndarray]) -> str | None:
    """``None`` when every value of ``outputs`` is finite, else how many of
    how many are not."""
    total = sum(int(np.size(a)) for a in outputs)
    bad = sum(int(np.size(a)) - int(np.count_nonzero(np.isfinite(a))) for a in outputs)
    if not bad:
        return None
    return f"{bad} of {total} output values of the last timed round are NaN or inf"


class Session(Protocol):
    """A training run step by step, for the trajectory and accuracy checks
    (``workers.runs``)."""

    def step(self, x: np.ndarray, y: np.ndarray, with_loss: bool = True) -> float:
        """One optimizer step; the loss at the parameters before it (NaN when
        ``with_loss`` is false)."""

    def params(self) -> dict[str, np.ndarray]:
        """The current parameters in canonical layout."""

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The forward pass at the current parameters."""


class Runner(Protocol):
    framework: str

    def evaluate(
        self, spec: ModelSpec, weights: Weights, x: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        """Logits, mean cross-entropy and canonical-layout gradients of one batch."""

    def output_losses(
        self, spec: ModelSpec, logits: np.ndarray, y: np.ndarray
    ) -> dict[str, float]:
        """Each output's own loss, by its layer, of a model with several:
        this path's loss function on this path's packed ``logits`` against
        the packed targets ``y`` (``{}`` for one output)."""

    def activations(
        self, spec: ModelSpec, weights: Weights, x: np.ndarray
    ) -> tuple[dict[str, np.ndarray], str | None]:
        """Every tapped layer's output (canonical layout), and the error that
        stopped the forward pass part-way (``None`` if it ran through)."""

    def session(self, spec: ModelSpec, weights: Weights) -> Session:
        """A fresh training run from ``weights``."""

    def trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Trainer:
        """``run(n)``: ``n`` optimizer steps over the first ``n`` resident
        batches of ``xs``/``ys``, finished (synchronized) on return;
        ``run.finish()`` afterwards: the final loss and what is not finite."""

    def predictor(self, spec: ModelSpec, weights: Weights, xs: np.ndarray) -> Predictor:
        """``run()``: the forward pass over every resident batch of ``xs``,
        finished (synchronized) on return; ``run.nonfinite()`` afterwards:
        whether the latest round's outputs hold NaN or inf."""

    def describe(self) -> dict[str, Any]:
        """Versions, device, threads and numeric settings, for the records."""


@runtime_checkable
class NativeOnly(Protocol):
    """What only the native runner offers."""

    def direct_trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Callable[[int], None]:
        """``direct(n)``: ``n`` train steps over the resident batches (cycling)
        by the framework's own functions in a plain loop, then a wait: the
        reference the self-check times against ``trainer``."""

    def idiomatic_trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Callable[[int], None]:
        """Like ``trainer``, with the framework's idiomatic fast training step
        (``native.<framework>.idiomatic``), for the floors benchmark."""


# A dropout's kept fraction may miss ``1 - rate`` by chance; the allowance is
# Hoeffding's bound at this probability, so no check fails by luck in a
# lifetime of runs.  Kept values must be the input over ``1 - rate`` to a few
# float32 roundings (TensorFlow multiplies by the reciprocal).
DROPOUT_CHANCE = 1e-12
DROPOUT_SCALE_TOLERANCE = 8 * float(np.finfo(np.float32).eps)


def check_dropout(
    name: str, rate: float, inputs: np.ndarray, outputs: np.ndarray
) -> str | None:
    """``None`` when dropout layer ``name`` at ``rate``, run in training on
    ``inputs``, gave ``outputs`` as dropout must: each nonzero input either
    zero or scaled by ``1 / (1 - rate)``, and the fraction kept ``1 - rate``
    within Hoeffding's bound at ``DROPOUT_CHANCE``; else what it did."""
    x = np.asarray(inputs, np.float64).ravel()
    y = np.asarray(outputs, np.float64).ravel()
    if x.shape != y.shape:
        return (
            f"dropout layer {name!r} changed the shape {inputs.shape} to "
            f"{outputs.shape}"
        )
    live = x != 0
    n = int(live.sum())
    if n == 0:
        return None  # nothing to drop: every input is zero
    kept = live & (y != 0)
    expected = x[kept] / (1 - rate)
    scale = np.abs(y[kept] - expected) / np.abs(expected)
    if scale.size and scale.max() > DROPOUT_SCALE_TOLERANCE:
        return (
            f"dropout layer {name!r} at rate {rate} kept values off the input "
            f"over 1 - rate by up to {scale.max():.1e} relative"
        )
    fraction = float(kept.sum()) / n
    bound = math.sqrt(math.log(2 / DROPOUT_CHANCE) / (2 * n))
    if abs(fraction - (1 - rate)) > bound:
        return (
            f"dropout layer {name!r} at rate {rate} kept {fraction:.3f} of {n} "
            f"values, outside {1 - rate:.3f} +- {bound:.3f} (Hoeffding at "
            f"{DROPOUT_CHANCE:g})"
        )
    return None
