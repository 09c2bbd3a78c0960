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

from zoo.specs import Layer, ModelSpec, input_of, noise_of

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


# A draw of noise may miss its distribution by chance; each allowance is a
# distribution-free bound at this probability (Hoeffding's for a dropout's
# kept fraction, Dvoretzky-Kiefer-Wolfowitz's for a normal draw), so no check
# fails by luck in a lifetime of runs.  Kept values must be the input over
# ``1 - rate`` to a few float32 roundings (TensorFlow multiplies by the
# reciprocal).
DROPOUT_CHANCE = 1e-12
DROPOUT_SCALE_TOLERANCE = 8 * float(np.finfo(np.float32).eps)
_FLOAT32_EPS = float(np.finfo(np.float32).eps)
_NORMAL_PEAK = 1 / math.sqrt(2 * math.pi)  # the normal density's largest value


# The values a training pass that checks a layer's noise draws at the least
# (``noise_batch``): enough that a wrong distribution is caught (a normal of
# the wrong deviation lies ~0.16 or more from the right one; the bound is
# 0.08 at 4,096 draws), and at most ``NOISE_REPEATS`` copies of the batch.
NOISE_VALUES = 4096
NOISE_REPEATS = 256


def noise_batch(spec: ModelSpec, x: np.ndarray) -> np.ndarray:
    """The batch ``x`` repeated so that every layer that draws noise draws at
    least ``NOISE_VALUES`` values in one pass (at most ``NOISE_REPEATS``
    copies): a check of a draw on a few values would pass anything."""
    least = min(math.prod(input_of(spec, layer.name)) for layer in spec.noisy_layers())
    repeats = min(NOISE_REPEATS, math.ceil(NOISE_VALUES / (least * len(x))))
    return np.concatenate([x] * repeats) if repeats > 1 else x


def check_noise(layer: Layer, inputs: np.ndarray, outputs: np.ndarray) -> str | None:
    """``None`` when ``layer``, a kind that draws noise (``Kind.noise``), run
    in one training pass on ``inputs`` (a batch, Keras' layout), gave
    ``outputs`` as its kind must draw them; else what it did, in one
    sentence naming the layer.  A dropout: ``check_dropout``; normal noise:
    ``check_normal``."""
    noise = noise_of(layer)
    if noise is None:
        raise ValueError(f"{layer.kind} layer {layer.name!r} draws no noise")
    amount = getattr(layer.options, noise.amount)
    if noise.draws == "mask":
        shared = getattr(layer.options, "shared_axes", ())
        return check_dropout(layer.name, amount, inputs, outputs, shared)
    if noise.stddev is None:
        raise ValueError(f"{layer.kind} draws normal noise with no stddev rule")
    return check_normal(
        f"{layer.kind} layer {layer.name!r}",
        noise.draws,
        noise.stddev(layer.options),
        inputs,
        outputs,
    )


def check_dropout(
    name: str,
    rate: float,
    inputs: np.ndarray,
    outputs: np.ndarray,
    shared_axes: tuple[int, ...] = (),
) -> str | None:
    """``None`` when dropout layer ``name`` at ``rate``, run in training on
    ``inputs``, gave ``outputs`` as dropout must: each nonzero input either
    zero or scaled by ``1 / (1 - rate)``; along ``shared_axes`` (axes of the
    batch's array) one draw, every nonzero value of it kept or every one
    dropped; and the fraction of draws kept ``1 - rate`` within Hoeffding's
    bound at ``DROPOUT_CHANCE``; else what it did."""
    x = np.asarray(inputs, np.float64)
    y = np.asarray(outputs, np.float64)
    if x.shape != y.shape:
        return (
            f"dropout layer {name!r} changed the shape {inputs.shape} to "
            f"{outputs.shape}"
        )
    live = x != 0
    kept = live & (y != 0)
    expected = x[kept] / (1 - rate)
    scale = np.abs(y[kept] - expected) / np.abs(expected)
    if scale.size and scale.max() > DROPOUT_SCALE_TOLERANCE:
        return (
            f"dropout layer {name!r} at rate {rate} kept values off the input "
            f"over 1 - rate by up to {scale.max():.1e} relative"
        )
    what = "values"
    if shared_axes:  # one draw per cell of the other axes
        axes = tuple(shared_axes)
        dropped = (live & ~kept).any(axis=axes)
        live, kept = live.any(axis=axes), kept.any(axis=axes)
        mixed = int((kept & dropped).sum())
        if mixed:
            return (
                f"dropout layer {name!r} at rate {rate} shares a draw along axes "
                f"{list(axes)}, yet {mixed} of its {live.size} draws kept some "
                "values and dropped others"
            )
        what = f"draws shared along axes {list(axes)}"
    n = int(live.sum())
    if n == 0:
        return None  # nothing to drop: every input is zero
    fraction = float(kept.sum()) / n
    bound = math.sqrt(math.log(2 / DROPOUT_CHANCE) / (2 * n))
    if abs(fraction - (1 - rate)) > bound:
        return (
            f"dropout layer {name!r} at rate {rate} kept {fraction:.3f} of {n} "
            f"{what}, outside {1 - rate:.3f} +- {bound:.3f} (Hoeffding at "
            f"{DROPOUT_CHANCE:g})"
        )
    return None


def check_apart(
    name: str,
    rate: float,
    inputs: np.ndarray,
    copies: Sequence[np.ndarray],
) -> str | None:
    """``None`` when two copies of a dropout that each draw their own (two
    gates' masks, a Bidirectional's two directions: ``workers.masks``) drew
    apart: on the draws where the input is nonzero, the share on which both
    kept or both dropped must be ``(1 - rate)^2 + rate^2`` within
    Hoeffding's bound at ``DROPOUT_CHANCE``; one mask used twice agrees on
    every draw.  Each copy's outputs of ``inputs``."""
    first, second = (np.asarray(c, np.float64) != 0 for c in copies[:2])
    live = np.asarray(inputs, np.float64) != 0
    n = int(live.sum())
    if n == 0:
        return None
    agree = float((first == second)[live].mean())
    expected = (1 - rate) ** 2 + rate**2
    bound = math.sqrt(math.log(2 / DROPOUT_CHANCE) / (2 * n))
    if abs(agree - expected) > bound:
        return (
            f"dropout layer {name!r} at rate {rate} drew alike in its copies on "
            f"{agree:.3f} of {n} draws, outside {expected:.3f} +- {bound:.3f} "
            f"(Hoeffding at {DROPOUT_CHANCE:g}): one mask, not one each"
        )
    return None


def check_normal(
    what: str, draws: str, stddev: float, inputs: np.ndarray, outputs: np.ndarray
) -> str | None:
    """``None`` when ``outputs`` are ``inputs`` with normal noise of
    deviation ``stddev`` drawn per value as ``draws`` says (``added``: ``y -
    x`` of mean 0; ``multiplied``: ``y / x`` of mean 1, over the nonzero
    inputs); else what ``what`` (the layer, in words) drew.  The draws'
    standardized empirical distribution must lie within the
    Dvoretzky-Kiefer-Wolfowitz bound at ``DROPOUT_CHANCE`` of the standard
    normal's, widened by what float32's rounding of the outputs can move a
    draw (at most the normal's peak density times that shift)."""
    x = np.asarray(inputs, np.float64)
    y = np.asarray(outputs, np.float64)
    if x.shape != y.shape:
        return f"{what} changed the shape {inputs.shape} to {outputs.shape}"
    if draws == "added":
        z = (y - x).ravel() / stddev
        shift = _FLOAT32_EPS * float(np.abs(y).max(initial=0.0)) / stddev
    else:
        live = x != 0
        ratio = y[live] / x[live]
        z = (ratio - 1) / stddev
        shift = _FLOAT32_EPS * float(np.abs(ratio).max(initial=0.0)) / stddev
    n = z.size
    if n == 0:
        return None
    z = np.sort(z)
    cdf = 0.5 * (1 + np.array([math.erf(v) for v in z / math.sqrt(2)]))
    steps = np.arange(1, n + 1) / n
    distance = float(max((steps - cdf).max(), (cdf - (steps - 1 / n)).max()))
    bound = math.sqrt(math.log(2 / DROPOUT_CHANCE) / (2 * n)) + _NORMAL_PEAK * shift
    if distance > bound:
        mean = "mean 0" if draws == "added" else "mean 1"
        return (
            f"{what} drew {n} values {draws} whose distribution lies "
            f"{distance:.3f} from the normal of {mean} and deviation {stddev:g} "
            f"(at most {bound:.3f}: Dvoretzky-Kiefer-Wolfowitz at "
            f"{DROPOUT_CHANCE:g}); their deviation is {float(z.std()) * stddev:.3g}"
        )
    return None
