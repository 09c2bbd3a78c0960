"""The optimizers a model may train with: Keras' names, options, defaults
and update formulas, once.  Every native framework's ``common.py`` writes
each formula out by hand with its own operators; the Keras paths build
Keras' own optimizer from ``keras_arguments``; the draw of ``harness fuzz``
and the document reader take the options from ``OPTIMIZERS``.

Keras 3's formulas (``keras/src/optimizers``), for a parameter ``w`` with
gradient ``g`` at step ``t`` (1 for the first step), learning rate ``lr``;
every slot starts at zero unless said:

- **weight decay** (every optimizer, Keras' base optimizer, before the
  update; ``weight_decay`` 0 is none): ``w = w - w * weight_decay * lr``.
  ``adamw`` is ``adam`` whose ``weight_decay`` defaults to 0.004.
- **sgd**: without momentum ``w -= lr * g``.  With ``momentum`` (slot
  ``momentum``, ``b``): ``b = b * momentum - lr * g``; then ``w += b``, or
  with ``nesterov`` ``w += b * momentum - lr * g`` (the new ``b``).
- **adam**, **adamw** (slots ``momentum`` ``m``, ``velocity`` ``v``, and with
  ``amsgrad`` ``velocity_hat`` ``vh``): ``alpha = lr * sqrt(1 - beta_2**t) /
  (1 - beta_1**t)`` (the powers in the parameter's dtype); ``m += (g - m) *
  (1 - beta_1)``; ``v += (g*g - v) * (1 - beta_2)``; with ``amsgrad``
  ``vh = max(vh, v)`` and ``vh`` replaces ``v`` below; ``w -= m * alpha /
  (sqrt(v) + epsilon)``.
- **rmsprop** (slots ``velocity`` ``v``; ``average_gradient`` ``a`` when
  ``centered``; ``momentum`` ``b`` when ``momentum > 0``): ``v = rho * v +
  (1 - rho) * g*g``; centered: ``a = rho * a + (1 - rho) * g`` and ``d = v -
  a*a + epsilon``, else ``d = v + epsilon``; ``inc = lr * g / sqrt(d)``;
  with momentum ``b = momentum * b + inc; w -= b``, else ``w -= inc``.
- **adagrad** (slot ``accumulator`` ``s``, starting at
  ``initial_accumulator_value``): ``s += g*g``; ``w -= lr * g / sqrt(s +
  epsilon)``.
- **nadam** (slots ``momentum`` ``m``, ``velocity`` ``v``; one number for
  the whole model, ``u_product``, starting at 1): ``u(t) = beta_1 * (1 - 0.5
  * 0.96**t)``; each step first ``u_product *= u(t)``, then per parameter
  ``m += (g - m) * (1 - beta_1)``; ``v += (g*g - v) * (1 - beta_2)``;
  ``m_hat = u(t+1) * m / (1 - u_product * u(t+1)) + (1 - u(t)) * g / (1 -
  u_product)``; ``v_hat = v / (1 - beta_2**t)``; ``w -= m_hat * lr /
  (sqrt(v_hat) + epsilon)``.

- **gradient clipping** (every optimizer, Keras' base optimizer, on the
  gradients before the weight decay and the update; at most one of the
  three, 0 is off): ``clipnorm`` ``c`` scales each parameter's gradient
  ``g = g * c / max(norm(g), c)`` (``norm`` the square root of the sum of
  its squares); ``global_clipnorm`` ``c`` scales every gradient by one
  number, ``g = g * (c * min(1 / n, 1 / c))``, ``n`` the square root of the
  sum over every gradient of its sum of squares; ``clipvalue`` ``v`` clips
  each value to ``[-v, v]``.
- **a learning-rate schedule** (``Schedule``; ``None`` for a constant
  rate): the rate of step ``t`` (0 for the first step: Keras' optimizer
  reads its ``iterations`` before it counts the step) replaces
  ``learning_rate`` everywhere above, the weight decay's included.  With
  ``lr0`` the workload's ``learning_rate`` and ``p = t / decay_steps``
  (``floor`` of it with ``staircase``):
  ``exponential_decay`` ``lr0 * decay_rate ** p``; ``inverse_time_decay``
  ``lr0 / (1 + decay_rate * p)``; ``cosine_decay`` (no warm-up) ``lr0 *
  ((1 - alpha) * 0.5 * (1 + cos(pi * min(t, decay_steps) / decay_steps)) +
  alpha)``, with a warm-up (``warmup_target`` not 0) ``lr0 + (target - lr0)
  * t / warmup_steps`` for ``t < warmup_steps``, then the cosine decay from
  ``target`` at ``min(t, decay_steps + warmup_steps) - warmup_steps``;
  ``piecewise_constant_decay`` ``values[i]``, ``i`` the number of
  ``boundaries`` below ``t`` (``t <= boundaries[0]`` takes ``values[0]``).

A batch normalization's moving statistics are not trained: they take the
values the training forward pass set, with no decay and no slots used.

Standard library only: the MXNet environment reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Keras' AdamW default weight decay (every other optimizer's is none).
ADAMW_WEIGHT_DECAY = 0.004
# Keras' gradient clipping, at most one of them (0: off).
CLIPS = ("clipnorm", "global_clipnorm", "clipvalue")
# Options every optimizer takes (Keras' base optimizer).
COMMON_OPTIONS = ("weight_decay", *CLIPS)


@dataclass(frozen=True)
class Schedule:
    """A Keras learning-rate schedule (``keras.optimizers.schedules``; the
    formulas in the module docstring), from the workload's
    ``learning_rate`` (its ``initial_learning_rate``; a piecewise constant
    schedule's first value).  ``kind`` is one of ``SCHEDULES``; the other
    fields are Keras' options of that kind, 0 or empty where it has none."""

    kind: str
    decay_steps: int = 0
    decay_rate: float = 0.0
    staircase: bool = False
    alpha: float = 0.0
    warmup_steps: int = 0
    warmup_target: float = 0.0
    boundaries: tuple[int, ...] = ()
    values: tuple[float, ...] = ()

    def keras_arguments(self, initial: float) -> dict[str, object]:
        """Keras' constructor arguments of this schedule from ``initial``."""
        if self.kind == "piecewise_constant_decay":
            return {"boundaries": list(self.boundaries), "values": list(self.values)}
        given = {o: getattr(self, o) for o in SCHEDULES[self.kind][1]}
        if self.kind == "cosine_decay" and not self.warmup_target:
            given["warmup_target"], given["warmup_steps"] = None, 0
        return {"initial_learning_rate": initial, **given}


# Each schedule's Keras class and options (besides the initial rate).
SCHEDULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "exponential_decay": (
        "ExponentialDecay",
        ("decay_steps", "decay_rate", "staircase"),
    ),
    "inverse_time_decay": (
        "InverseTimeDecay",
        ("decay_steps", "decay_rate", "staircase"),
    ),
    "cosine_decay": (
        "CosineDecay",
        ("decay_steps", "alpha", "warmup_target", "warmup_steps"),
    ),
    "piecewise_constant_decay": ("PiecewiseConstantDecay", ("boundaries", "values")),
}


class KerasCall(tuple[str, dict[str, object]]):
    """``keras.optimizers.schedules.<class>(**arguments)``: built in a Keras
    worker (``build``), written as that code by its repr (a reproducer)."""

    def build(self, keras: Any) -> Any:
        return getattr(keras.optimizers.schedules, self[0])(**self[1])

    def __repr__(self) -> str:
        given = ", ".join(f"{k}={v!r}" for k, v in self[1].items())
        return f"keras.optimizers.schedules.{self[0]}({given})"


@dataclass(frozen=True)
class Optimizer:
    """One optimizer: ``name`` (the workload's word, Keras' class name in
    lower case), ``keras_class``, ``options`` (the ``zoo.specs.Workload``
    fields Keras' constructor takes for it besides ``learning_rate`` and
    ``weight_decay``), and the FLOPs of one parameter's update (plain, and
    each option that adds work), for ``harness.core.flops``."""

    name: str
    keras_class: str
    options: tuple[str, ...]
    flops_per_param: int

    @property
    def takes(self) -> tuple[str, ...]:
        """Every option a document may give this optimizer."""
        return (*self.options, *COMMON_OPTIONS)


OPTIMIZERS: dict[str, Optimizer] = {
    o.name: o
    for o in (
        # scale and subtract; momentum and Nesterov 2 and 2 more
        Optimizer("sgd", "SGD", ("momentum", "nesterov"), 2),
        # two moment updates, bias corrections, square root, divide
        Optimizer("adam", "Adam", ("beta_1", "beta_2", "epsilon", "amsgrad"), 12),
        Optimizer("adamw", "AdamW", ("beta_1", "beta_2", "epsilon", "amsgrad"), 12),
        Optimizer("rmsprop", "RMSprop", ("rho", "momentum", "epsilon", "centered"), 8),
        Optimizer("adagrad", "Adagrad", ("initial_accumulator_value", "epsilon"), 6),
        Optimizer("nadam", "Nadam", ("beta_1", "beta_2", "epsilon"), 16),
    )
}
# Each option's Keras default, as a ``Workload`` field's default; ``adamw``
# overrides ``weight_decay`` (``defaults``).
DEFAULTS: dict[str, float | bool] = {
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-7,
    "amsgrad": False,
    "momentum": 0.0,
    "nesterov": False,
    "rho": 0.9,
    "centered": False,
    "initial_accumulator_value": 0.1,
    "weight_decay": 0.0,
    "clipnorm": 0.0,
    "global_clipnorm": 0.0,
    "clipvalue": 0.0,
}
# The options that are true or false (the others are numbers).
SWITCHES = ("amsgrad", "nesterov", "centered")
# Each numeric option's range, as (low, high, whether low itself is allowed).
RANGES: dict[str, tuple[float, float, bool]] = {
    "beta_1": (0.0, 1.0, True),
    "beta_2": (0.0, 1.0, True),
    "epsilon": (0.0, 1.0, False),
    "momentum": (0.0, 1.0, True),
    "rho": (0.0, 1.0, False),
    "initial_accumulator_value": (0.0, 1e3, True),
    "weight_decay": (0.0, 1.0, True),
    "clipnorm": (0.0, 1e6, True),
    "global_clipnorm": (0.0, 1e6, True),
    "clipvalue": (0.0, 1e6, True),
}


def defaults(optimizer: str) -> dict[str, float | bool]:
    """The Keras defaults of ``optimizer``'s options."""
    given = {o: DEFAULTS[o] for o in OPTIMIZERS[optimizer].takes}
    if optimizer == "adamw":
        given["weight_decay"] = ADAMW_WEIGHT_DECAY
    return given


def slot_names(workload: Any) -> tuple[str, ...]:
    """The per-parameter slots Keras' optimizer keeps for ``workload``, by
    Keras' names, reading only the options of that optimizer: none for plain
    SGD, Adam's two moments for Adam.  Every framework's ``make_train_state``
    makes these and no others.  What each slot starts at (zero, but
    Adagrad's accumulator at ``initial_accumulator_value``) each framework
    says itself: a wrong start written here once would be shared by every
    float64 reference, which would then agree on it (issue 74)."""
    w, name = workload, get_optimizer(workload.optimizer).name
    if name == "sgd":
        return ("momentum",) if w.momentum else ()
    if name in ("adam", "adamw"):
        return ("momentum", "velocity") + (("velocity_hat",) if w.amsgrad else ())
    if name == "rmsprop":
        centered = ("average_gradient",) if w.centered else ()
        momentum = ("momentum",) if w.momentum > 0 else ()
        return ("velocity", *centered, *momentum)
    if name == "adagrad":
        return ("accumulator",)
    return ("momentum", "velocity")  # nadam


def get_optimizer(name: str) -> Optimizer:
    if name not in OPTIMIZERS:
        raise ValueError(
            f"optimizer {name!r} is not one the native paths write out; use one "
            f"of: {', '.join(OPTIMIZERS)}"
        )
    return OPTIMIZERS[name]


def check_option(optimizer: str, option: str, value: object) -> float | bool:
    """``value`` for ``option`` of ``optimizer``, checked; a ValueError in
    one sentence when the optimizer does not take it or it is out of range."""
    takes = get_optimizer(optimizer).takes
    if option not in takes:
        raise ValueError(
            f"workload: {optimizer} does not take {option}; it takes {', '.join(takes)}"
        )
    if option in SWITCHES:
        if not isinstance(value, bool):
            raise ValueError(f"workload: {option} must be true or false")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"workload: {option} must be a number, not {value!r}")
    low, high, closed = RANGES[option]
    if not (low <= value if closed else low < value) or not value < high:
        edge = "at least" if closed else "above"
        raise ValueError(
            f"workload: {option} must be {edge} {low:g} and below {high:g}"
        )
    return float(value)


def keras_arguments(workload: object) -> dict[str, object]:
    """The keyword arguments of Keras' optimizer class for ``workload`` (a
    ``zoo.specs.Workload``): the learning rate and every option it takes."""
    optimizer = get_optimizer(workload.optimizer)  # type: ignore[attr-defined]
    arguments: dict[str, object] = {
        "learning_rate": workload.learning_rate  # type: ignore[attr-defined]
    }
    for option in optimizer.options:
        arguments[option] = getattr(workload, option)
    decay = workload.weight_decay  # type: ignore[attr-defined]
    # Keras' ``None`` is no decay; AdamW refuses it and takes 0 instead.
    arguments["weight_decay"] = decay if decay or optimizer.name == "adamw" else None
    for clip in CLIPS:  # Keras' None is off
        arguments[clip] = getattr(workload, clip) or None
    schedule: Schedule | None = workload.schedule  # type: ignore[attr-defined]
    if schedule is not None:
        keras_class = SCHEDULES[schedule.kind][0]
        given = schedule.keras_arguments(workload.learning_rate)  # type: ignore[attr-defined]
        arguments["learning_rate"] = KerasCall((keras_class, given))
    return arguments


def keras_optimizer(keras: Any, workload: object) -> Any:
    """Keras' own optimizer for ``workload`` (``keras``: the module, in a
    Keras worker), its schedule built."""
    arguments = keras_arguments(workload)
    rate = arguments["learning_rate"]
    if isinstance(rate, KerasCall):
        arguments["learning_rate"] = rate.build(keras)
    keras_class = get_optimizer(workload.optimizer).keras_class  # type: ignore[attr-defined]
    return getattr(keras.optimizers, keras_class)(**arguments)


def plain(workload: object) -> bool:
    """Whether ``workload`` trains with plain SGD or plain Adam (no
    momentum, amsgrad or weight decay): what the idiomatic yardsticks of
    ``harness floors`` write out with their framework's stock optimizers."""
    w: Any = workload
    return w.optimizer in ("sgd", "adam") and not (
        w.momentum
        or w.amsgrad
        or w.weight_decay
        or any(getattr(w, clip) for clip in CLIPS)
        or w.schedule is not None
    )
