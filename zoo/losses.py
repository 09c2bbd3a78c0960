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
- ``label_smoothing`` ``s`` (one-hot and binary cross-entropy, the focal
  one) first moves each target toward the uniform: ``t * (1 - s) + s / C``
  over ``C`` classes, and ``t * (1 - s) + s / 2`` for a binary target
  (``smoothed``).
- ``binary_focal_crossentropy`` (Lin et al., 2017): the mean over the
  outputs of ``(1 - p_t) ** gamma * bce``, ``bce`` the binary cross-entropy
  from the probability ``p`` (``sigmoid(z)`` from logits; clipped as
  above), ``p_t = t p + (1 - t)(1 - p)`` (``p`` unclipped), times ``alpha
  t + (1 - alpha)(1 - t)`` with class balancing (``alpha`` given).
- ``mean_squared_error`` and ``mean_absolute_error``: the mean over the
  outputs of ``(t - o)**2`` and ``|t - o|`` for real targets.
- ``huber``: the mean over the outputs of ``e**2 / 2`` where ``e = |o - t|``
  is at most ``delta`` and ``delta * e - delta**2 / 2`` beyond it; Keras'
  default ``delta`` of 1 only (``Huber``'s config does not even save
  another).  ``log_cosh``: the mean of ``log(cosh(o - t))``, written as
  Keras writes it, ``x + softplus(-2 x) - log 2`` (every framework's
  softplus as ``max(z, 0) + log1p(exp(-|z|))``: MXNet's ``softrelu`` loses
  digits, docs/findings/log-one-plus-exp.md).
- ``hinge``: the mean over the outputs of ``max(1 - t o, 0)`` for targets
  ``t`` of -1 or 1 (Keras turns 0/1 targets into those first; the tool
  draws them as -1 and 1, which Keras leaves as they are).
- ``poisson``: the mean over the outputs of ``o - t log(o + EPSILON)`` for
  counts ``t``; the outputs must be at least 0 (``Loss.positive``: a model
  that ends in a linear layer takes the log of a negative number).
- ``kl_divergence``: the sum over the outputs of ``t log(t / p)``, both
  clipped to ``[EPSILON, 1]``, for target distributions ``t`` (rows that
  sum to 1) and probabilities ``p``.
- ``cosine_similarity``: ``-sum(unit(t) * unit(o))`` over the outputs,
  ``unit(x) = x * min(rsqrt(sum(x ** 2)), 1 / EPSILON)`` as Keras'
  ``ops.normalize`` writes it, for real targets.

Keras on TensorFlow computes a cross-entropy from probabilities otherwise:
when the probabilities come straight from a softmax or sigmoid activation it
reaches back to the logits before it (``_keras_logits``) and ignores
``from_logits``, so it never clips; the focal loss from logits takes its own
sigmoid of them, which it reaches back through alike.  ``reaches_back``
says when that happens; the checker judges that path against float64 as
usual (the two forms agree to float32 rounding unless a probability is below
``EPSILON``) and says so in its verdict.

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
    always ``False`` for the regression losses); and the options of the
    losses that take them (``Loss.options``), as Keras names them:
    ``label_smoothing`` (the one-hot and binary cross-entropies and the
    focal one), and the focal loss' ``gamma`` and ``alpha`` (``None``:
    Keras' ``apply_class_balancing=False``).  Hashable: JAX takes it as a
    static argument."""

    loss: str = "sparse_categorical_crossentropy"
    from_logits: bool = True
    label_smoothing: float = 0.0
    gamma: float = 2.0
    alpha: float | None = None


@dataclass(frozen=True)
class Loss:
    """One loss's facts.  ``targets``: what a label is (``ids``: an int class
    id per example; ``one_hot``, ``binary``, ``signs`` (-1 or 1),
    ``counts``, ``distribution`` (a row that sums to 1), ``real``: a float
    row as wide as the outputs); ``least_outputs``: the narrowest output it
    takes; ``activation``: the final activation of a model that gives it
    probabilities (or counts), which Keras on TensorFlow reaches back
    through for a cross-entropy (``reaches_back``; None: any activation);
    ``keras_class``: its class
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
    options: tuple[str, ...] = ()  # the ``Objective`` options it takes
    positive: bool = False  # whether its outputs must be at least 0


SMOOTHED = ("label_smoothing",)
FOCAL = ("label_smoothing", "gamma", "alpha")
LOSSES: dict[str, Loss] = {
    "sparse_categorical_crossentropy": Loss(
        "ids", 2, "softmax", "SparseCategoricalCrossentropy", 5, True
    ),
    "categorical_crossentropy": Loss(
        "one_hot", 2, "softmax", "CategoricalCrossentropy", 6, True, SMOOTHED
    ),
    "binary_crossentropy": Loss(
        "binary", 1, "sigmoid", "BinaryCrossentropy", 8, True, SMOOTHED
    ),
    # the binary cross-entropy's eight, a sigmoid's four, p_t's four, the
    # power's two, a product, and the class weight's four
    "binary_focal_crossentropy": Loss(
        "binary", 1, "sigmoid", "BinaryFocalCrossentropy", 23, True, FOCAL
    ),
    "mean_squared_error": Loss("real", 1, None, "MeanSquaredError", 3, False),
    "mean_absolute_error": Loss("real", 1, None, "MeanAbsoluteError", 3, False),
    # a subtraction, an absolute value, a comparison, a square (or a scaled
    # value) and the sum
    "huber": Loss("real", 1, None, "Huber", 5, False),
    # a subtraction, the softplus' five (a product, an absolute value, an
    # exp, a log1p, a maximum and its sum), two additions and the sum
    "log_cosh": Loss("real", 1, None, "LogCosh", 9, False),
    # a product, a subtraction, a maximum and the sum
    "hinge": Loss("signs", 1, None, "Hinge", 4, False),
    # an addition, a log, a product, a subtraction and the sum
    "poisson": Loss("counts", 1, "softplus", "Poisson", 5, False, positive=True),
    # two clips of two comparisons each, a division, a log, a product, the sum
    "kl_divergence": Loss("distribution", 2, "softmax", "KLDivergence", 8, False),
    # two squares and sums for the norms, two products, a product and the sum
    "cosine_similarity": Loss("real", 2, None, "CosineSimilarity", 8, False),
}
# The losses of the outputs and targets apart, not of their difference as
# the other regression losses (every framework's ``common._paired``).
PAIRED = ("hinge", "poisson", "kl_divergence", "cosine_similarity")
# A row of a paired loss is a sum whose terms may cancel (a KL divergence of
# two nearly equal distributions: ``t log t - t log p``), so float32 errs on
# it by its terms' rounding, up to the unit roundoff times the sum of their
# magnitudes, which may be far more than the row itself is; a perturbed
# reference run (``native.compose``) adds that to each row, so the judge
# allows it without resting on a draw's luck (finding 08de0aec85).  Each
# row's terms, per output (a mean where the loss averages them, a sum where
# it sums them): hinge ``1`` and ``t * o``; Poisson ``o`` and ``t * log(o +
# eps)``; KL ``t log t`` and ``t log p`` (``t``, ``p`` clipped as the loss
# clips them); cosine ``t_unit * o_unit`` (every framework's
# ``common._paired_terms``).
# The activations whose outputs are at least 0, which a ``positive`` loss
# takes the log of (``check_outputs``).
POSITIVE = ("relu", "relu6", "sigmoid", "softmax", "softplus")
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
    "kld": "kl_divergence",
    "KLD": "kl_divergence",
}
# Options of a Keras loss class that must hold these values, else it computes
# another loss than the one written out.
_PLAIN_OPTIONS = {
    "reduction": "sum_over_batch_size",
    "axis": -1,
    "ignore_class": None,
    "delta": 1.0,
}
_KNOWN_TEXT = (
    "sparse or one-hot categorical cross-entropy, binary cross-entropy "
    "(either with label smoothing), binary focal cross-entropy, mean squared "
    "or mean absolute error, Huber (delta 1), log-cosh, hinge, Poisson, "
    "KL divergence or cosine similarity"
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
    default = Objective()
    given = [
        option
        for option in OPTIONS
        if getattr(objective, option) != getattr(default, option)
        and option not in facts.options
    ]
    if given:
        raise ValueError(
            f"{model}'s loss {objective.loss} takes no {' or '.join(given)}; "
            "leave it out"
        )
    bounds = [
        f"{option} {value!r} must be in [0, 1]"
        for option, value in (
            ("label_smoothing", objective.label_smoothing),
            ("alpha", objective.alpha),
        )
        if value is not None and not 0 <= value <= 1
    ]
    if objective.gamma < 0:
        bounds.append(f"gamma {objective.gamma!r} must be at least 0")
    if bounds:
        raise ValueError(f"{model}'s loss {objective.loss}: {'; '.join(bounds)}")
    if outputs < facts.least_outputs:
        raise ValueError(
            f"{model} gives {outputs} output(s) per example, and "
            f"{objective.loss} needs at least {facts.least_outputs}"
        )


def check_outputs(
    objective: Objective, activation: str | None, model: str = "the model"
) -> None:
    """A ValueError in one sentence when ``objective`` takes the log of
    outputs (``Loss.positive``) that ``activation``, the output layer's,
    may make negative."""
    if LOSSES[objective.loss].positive and activation not in POSITIVE:
        raise ValueError(
            f"{model} trains on {objective.loss}, which takes the log of its "
            f"outputs, and ends in {activation or 'linear'} outputs that may be "
            f"negative; end it in {', '.join(POSITIVE)}"
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
            return _configured(name, config)
    shown = loss.get("class_name", loss) if isinstance(loss, Mapping) else loss
    raise ValueError(
        f"the model was compiled with loss {shown!r}; the tool computes "
        f"{_KNOWN_TEXT} (one loss for the one output)"
    )


def _configured(name: str, config: Mapping[str, Any]) -> Objective:
    """The objective of Keras' loss class of ``name`` saved with ``config``:
    its ``from_logits`` and the options ``Loss.options`` names (a focal
    loss' ``alpha`` only with ``apply_class_balancing``); a ValueError in
    one sentence for an option it holds that the loss does not take."""
    facts = LOSSES[name]
    logits = bool(config.get("from_logits", False)) and facts.takes_logits
    options: dict[str, Any] = {}
    if "label_smoothing" in facts.options:
        options["label_smoothing"] = float(config.get("label_smoothing", 0.0))
    elif config.get("label_smoothing", 0.0):
        raise ValueError(
            f"the model was compiled with {facts.keras_class}(label_smoothing="
            f"{config['label_smoothing']!r}); it takes none"
        )
    if "gamma" in facts.options:
        options["gamma"] = float(config.get("gamma", 2.0))
        if config.get("apply_class_balancing", False):
            options["alpha"] = float(config.get("alpha", 0.25))
    return Objective(name, logits, **options)


OPTIONS = ("label_smoothing", "gamma", "alpha")  # ``Objective``'s loss options


def loss_options(objectives: Any) -> dict[str, Any]:
    """The options of the losses ``objectives`` (one per output) set away
    from Keras' defaults, by name, as a workload table writes them: one
    value of an option for every loss that takes it, so two losses that
    take it with different values are refused in one sentence."""
    default, words = Objective(), {}
    for option in OPTIONS:
        values = {
            getattr(o, option) for o in objectives if option in LOSSES[o.loss].options
        }
        if len(values) > 1:
            raise ValueError(
                f"the model's losses take {option} {sorted(values, key=str)}; the "
                f"tool takes one {option} for every loss that takes it"
            )
        if values and (value := values.pop()) != getattr(default, option):
            words[option] = value
    return words


def smoothed(y: Any, objective: Objective, width: int) -> Any:
    """The targets ``y`` of a loss with ``label_smoothing`` ``s``: ``y * (1 -
    s) + s / width`` for one-hot rows of ``width`` classes, ``+ s / 2`` for
    binary targets, as Keras smooths them (framework-free: ``*`` and ``+``
    on the framework's tensor); ``y`` itself at 0."""
    s = objective.label_smoothing
    if not s:
        return y
    share = 1 / width if LOSSES[objective.loss].targets == "one_hot" else 0.5
    return y * (1 - s) + s * share


def keras_arguments(objective: Objective) -> dict[str, Any]:
    """The arguments of Keras' loss class (``Loss.keras_class``) that make
    ``objective``: ``from_logits`` and the options the loss takes."""
    facts = LOSSES[objective.loss]
    options: dict[str, Any] = {}
    if facts.takes_logits:
        options["from_logits"] = objective.from_logits
    if "label_smoothing" in facts.options:
        options["label_smoothing"] = objective.label_smoothing
    if "gamma" in facts.options:
        options["gamma"] = objective.gamma
        if objective.alpha is not None:
            options |= {"apply_class_balancing": True, "alpha": objective.alpha}
    return options


def keras_loss(keras: Any, objective: Objective) -> Any:
    """Keras' own loss object for ``objective`` (``keras``: the module, in a
    Keras worker; this module imports no framework)."""
    cls = getattr(keras.losses, LOSSES[objective.loss].keras_class)
    return cls(**keras_arguments(objective))


def reaches_back(objective: Objective, final_activation: str | None) -> bool:
    """Whether Keras on TensorFlow computes ``objective`` from the logits
    before a sigmoid or softmax instead (``_keras_logits``): a cross-entropy
    whose outputs come straight from its activation, or the focal loss from
    logits, which applies its sigmoid itself."""
    facts = LOSSES[objective.loss]
    if objective.from_logits:
        return objective.loss == "binary_focal_crossentropy"
    return facts.takes_logits and final_activation == facts.activation


def draw_targets(
    rng: np.random.Generator, objective: Objective, shape: tuple[int, ...], outputs: int
) -> np.ndarray:
    """Targets for ``shape`` examples (``(count, batch)``) of a model with
    ``outputs`` outputs: int32 class ids ``shape``, or float32 rows
    ``(*shape, outputs)`` (one-hot, 0/1, -1/1, Poisson counts of mean 2, a
    softmax of standard normals, or standard normal)."""
    targets = LOSSES[objective.loss].targets
    if targets == "ids":
        return rng.integers(0, outputs, size=shape).astype(np.int32)
    rows = (*shape, outputs)
    if targets == "one_hot":
        drawn: np.ndarray = np.eye(outputs)[rng.integers(0, outputs, size=shape)]
    elif targets == "binary":
        drawn = rng.integers(0, 2, size=rows)
    elif targets == "signs":
        drawn = 2 * rng.integers(0, 2, size=rows) - 1
    elif targets == "counts":
        drawn = rng.poisson(2.0, size=rows)
    elif targets == "distribution":
        z = rng.standard_normal(rows)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        drawn = e / e.sum(axis=-1, keepdims=True)
    else:
        drawn = rng.standard_normal(rows)
    return np.asarray(drawn, dtype=np.float32)


def describe(objective: Objective) -> str:
    """``sparse_categorical_crossentropy (from logits)``, as reports say it,
    with the options set away from Keras' defaults."""
    default = Objective()
    options = [
        f"{option} {getattr(objective, option):g}"
        for option in OPTIONS
        if option in LOSSES[objective.loss].options
        and getattr(objective, option) != getattr(default, option)
    ]
    if LOSSES[objective.loss].takes_logits:
        options.insert(
            0, "from logits" if objective.from_logits else "from probabilities"
        )
    return f"{objective.loss} ({', '.join(options)})" if options else objective.loss
