"""The losses a model may train with: the framework-free facts, once.

A model's loss is its workload's ``objective`` (``zoo.specs.Workload``): a
loss name of ``LOSSES`` and, for the cross-entropies, ``from_logits``.  Every
native framework writes each one out by hand in ``common.loss(outputs, y,
objective)`` with Keras 3's formulas, the Keras paths build Keras' own
(``keras_loss``), the float64 reference is the native code in float64, and
``harness.core.flops`` counts ``Loss.flops_per_output``.

Keras' formulas (``keras.src.backend.*.nn``, Keras 3.15), per example, then
the mean over the batch (Keras' ``sum_over_batch_size``):

- ``sparse_categorical_crossentropy``: ``-log p[y]`` for an int class id
  ``y``; ``categorical_crossentropy``: ``-sum(t * log p)`` for a one-hot row
  ``t``.  From logits ``log p = log_softmax(z)``; from probabilities (a model
  that ends in a softmax, ``from_logits=False``) Keras first rescales the row
  to sum 1 and clips it to ``[EPSILON, 1 - EPSILON]``.
- ``binary_crossentropy``: the mean over the outputs of ``-(t log p + (1 - t)
  log(1 - p))`` for 0/1 targets ``t``; from logits ``log p = log_sigmoid(z)``
  and ``log(1 - p) = log_sigmoid(-z)``; from probabilities ``p`` is clipped.
- ``mean_squared_error`` and ``mean_absolute_error``: the mean over the
  outputs of ``(t - o)**2`` and ``|t - o|`` for real targets.
- ``huber``: the mean over the outputs of ``e**2 / 2`` where ``e = |o - t|``
  is at most ``delta`` and ``delta * e - delta**2 / 2`` beyond it; Keras'
  default ``delta`` of 1 only (``Huber``'s config does not even save
  another).  ``log_cosh``: the mean of ``log(cosh(o - t))``, written as
  Keras writes it, ``x + softplus(-2 x) - log 2`` (every framework's
  softplus as ``max(z, 0) + log1p(exp(-|z|))``: MXNet's ``softrelu`` loses
  digits, docs/findings/log-one-plus-exp.md).

Keras on TensorFlow computes a cross-entropy from probabilities otherwise:
when the probabilities come straight from a softmax or sigmoid activation it
reaches back to the logits before it (``_keras_logits``) and ignores
``from_logits``, so it never clips.  ``reaches_back`` says when that happens;
the checker judges that path against float64 as usual (the two forms agree
to float32 rounding unless a probability is below ``EPSILON``) and says so in
its verdict.

Framework-free, and importable with NumPy 1.23 (the MXNet environment).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

# Keras' backend.epsilon(): the clip of probabilities in its cross-entropies.
EPSILON = 1e-7


class Objective(NamedTuple):
    """What a model trains on: a loss of ``LOSSES``; ``from_logits`` says
    whether a cross-entropy takes the outputs as logits (else probabilities;
    always ``False`` for the regression losses).  Hashable: JAX takes it as a
    static argument."""

    loss: str = "sparse_categorical_crossentropy"
    from_logits: bool = True


@dataclass(frozen=True)
class Loss:
    """One loss's facts.  ``targets``: what a label is (``ids``: an int class
    id per example; ``one_hot``, ``binary``, ``real``: a float row as wide as
    the outputs); ``least_outputs``: the narrowest output it takes;
    ``activation``: the final activation whose output Keras on TensorFlow
    reaches back through (None: it never does); ``keras_class``: its class
    in ``keras.losses``; ``flops_per_output``: FLOPs per output and example
    (``harness.core.flops``: a log-softmax is an exp, a sum, a log and a
    subtraction per output, and the pick; a squared error a subtraction, a
    square and the sum)."""

    targets: str
    least_outputs: int
    activation: str | None
    keras_class: str
    flops_per_output: int
    takes_logits: bool  # whether ``from_logits`` means anything


LOSSES: dict[str, Loss] = {
    "sparse_categorical_crossentropy": Loss(
        "ids", 2, "softmax", "SparseCategoricalCrossentropy", 5, True
    ),
    "categorical_crossentropy": Loss(
        "one_hot", 2, "softmax", "CategoricalCrossentropy", 6, True
    ),
    "binary_crossentropy": Loss("binary", 1, "sigmoid", "BinaryCrossentropy", 8, True),
    "mean_squared_error": Loss("real", 1, None, "MeanSquaredError", 3, False),
    "mean_absolute_error": Loss("real", 1, None, "MeanAbsoluteError", 3, False),
    # a subtraction, an absolute value, a comparison, a square (or a scaled
    # value) and the sum
    "huber": Loss("real", 1, None, "Huber", 5, False),
    # a subtraction, the softplus' five (a product, an absolute value, an
    # exp, a log1p, a maximum and its sum), two additions and the sum
    "log_cosh": Loss("real", 1, None, "LogCosh", 9, False),
}
DEFAULT = Objective()


class Heads(NamedTuple):
    """The loss of a model with several outputs, as Keras compiles one: a
    loss per output (``objectives``, in the model's output order) and its
    weight (Keras' ``loss_weights``, 1 where none is given); the training
    loss is the sum of each output's loss times its weight.  Hashable, as
    ``Objective``."""

    objectives: tuple[Objective, ...]
    weights: tuple[float, ...]


def total(of: Any, outputs: Any, targets: Any, goal: Objective | Heads) -> Any:
    """The training loss of ``outputs`` against ``targets`` under ``goal``,
    with ``of(outputs, targets, objective)`` one framework's loss of one
    output: that loss for one output; for several (``Heads``; ``outputs``
    and ``targets`` tuples in the model's output order) the sum of each
    output's loss times its weight, as Keras adds them (framework-free:
    only ``*`` and ``+`` on the framework's tensors)."""
    if not isinstance(goal, Heads):
        return of(outputs, targets, goal)
    summed: Any = None
    for objective, weight, out, target in zip(
        goal.objectives, goal.weights, outputs, targets, strict=True
    ):
        value = of(out, target, objective) * weight
        summed = value if summed is None else summed + value
    return summed


# The names Keras takes for each (``keras.losses.get``): a string, or the
# ``config`` of a loss function saved by reference.
_ALIASES = {
    **{name: name for name in LOSSES},
    "mse": "mean_squared_error",
    "MSE": "mean_squared_error",
    "mae": "mean_absolute_error",
    "MAE": "mean_absolute_error",
}
# Options of a Keras loss class that must hold these values, else it computes
# another loss than the one written out.
_PLAIN_OPTIONS = {
    "reduction": "sum_over_batch_size",
    "label_smoothing": 0.0,
    "axis": -1,
    "ignore_class": None,
    "delta": 1.0,
}
_KNOWN_TEXT = (
    "sparse or one-hot categorical cross-entropy, binary cross-entropy, "
    "mean squared or mean absolute error, Huber (delta 1) or log-cosh"
)


def check(objective: Objective, outputs: int, model: str = "the model") -> None:
    """A ValueError in one sentence unless ``objective`` is a known loss
    that ``outputs`` outputs per example can train on."""
    facts = LOSSES.get(objective.loss)
    if facts is None:
        raise ValueError(
            f"{model}'s loss {objective.loss!r} is not one the tool writes out; "
            f"known: {', '.join(LOSSES)}"
        )
    if not facts.takes_logits and objective.from_logits:
        raise ValueError(f"{objective.loss} takes no from_logits; leave it out")
    if outputs < facts.least_outputs:
        raise ValueError(
            f"{model} gives {outputs} output(s) per example, and "
            f"{objective.loss} needs at least {facts.least_outputs}"
        )


def from_keras(loss: Any) -> Objective:
    """The objective of a Keras ``compile_config``'s ``loss`` (a name, a
    serialized loss object or function); a ValueError in one sentence for
    one the tool does not write out."""
    # A loss given by name takes probabilities, as Keras' functions default.
    if isinstance(loss, str) and loss in _ALIASES:
        return Objective(_ALIASES[loss], False)
    if isinstance(loss, Mapping):
        cls, config = loss.get("class_name"), loss.get("config")
        if cls == "function" and isinstance(config, str) and config in _ALIASES:
            return Objective(_ALIASES[config], False)
        by_class = {facts.keras_class: name for name, facts in LOSSES.items()}
        if cls in by_class and isinstance(config, Mapping):
            for option, plain in _PLAIN_OPTIONS.items():
                if option in config and config[option] != plain:
                    raise ValueError(
                        f"the model was compiled with {cls}({option}="
                        f"{config[option]!r}); the tool computes it with "
                        f"{option}={plain!r} only"
                    )
            name = by_class[cls]
            logits = bool(config.get("from_logits", False))
            return Objective(name, logits and LOSSES[name].takes_logits)
    shown = loss.get("class_name", loss) if isinstance(loss, Mapping) else loss
    raise ValueError(
        f"the model was compiled with loss {shown!r}; the tool computes "
        f"{_KNOWN_TEXT} (one loss for the one output)"
    )


def keras_loss(keras: Any, objective: Objective) -> Any:
    """Keras' own loss object for ``objective`` (``keras``: the module, in a
    Keras worker; this module imports no framework)."""
    facts = LOSSES[objective.loss]
    cls = getattr(keras.losses, facts.keras_class)
    return cls(from_logits=objective.from_logits) if facts.takes_logits else cls()


def reaches_back(objective: Objective, final_activation: str | None) -> bool:
    """Whether Keras on TensorFlow computes ``objective`` from the logits
    before the model's final activation instead (``_keras_logits``): a
    cross-entropy whose outputs come straight from its activation."""
    facts = LOSSES[objective.loss]
    return facts.activation is not None and final_activation == facts.activation


def draw_targets(
    rng: np.random.Generator, objective: Objective, shape: tuple[int, ...], outputs: int
) -> np.ndarray:
    """Targets for ``shape`` examples (``(count, batch)``) of a model with
    ``outputs`` outputs: int32 class ids ``shape``, or float32 rows
    ``(*shape, outputs)`` (one-hot, 0/1, or standard normal)."""
    targets = LOSSES[objective.loss].targets
    if targets == "ids":
        return rng.integers(0, outputs, size=shape).astype(np.int32)
    if targets == "one_hot":
        ids = rng.integers(0, outputs, size=shape)
        return np.eye(outputs, dtype=np.float32)[ids]
    if targets == "binary":
        return rng.integers(0, 2, size=(*shape, outputs)).astype(np.float32)
    return rng.standard_normal((*shape, outputs)).astype(np.float32)


def describe(objective: Objective) -> str:
    """``sparse_categorical_crossentropy (from logits)``, as reports say it."""
    if not LOSSES[objective.loss].takes_logits:
        return objective.loss
    given = "logits" if objective.from_logits else "probabilities"
    return f"{objective.loss} (from {given})"
