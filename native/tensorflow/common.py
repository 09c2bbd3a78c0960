"""What every native TensorFlow model shares: weights, loss, gradients, optimizers.

Layouts (family ``keras``, see ``native.layout``): TensorFlow takes Keras'
layouts as they are, so loading is the identity: dense kernels ``(in, out)``,
conv kernels ``(kh, kw, in, out)``, image batches ``(N, H, W, C)``.
Parameters are a plain ``dict[str, tf.Variable]`` keyed by canonical names.

Gradients come from ``tf.GradientTape``; the gradient, train-step and
inference functions run as ``tf.function`` graphs (without XLA: that is the
idiomatic variant the floors benchmark compares against), traced on their
first call, which the harness times apart as the first step.  They are cached
per ``apply`` object (``native.load_apply`` hands out one per forward pass).
The same functions run in the other execution modes of
``native.tensorflow.modes`` (``eager``: called as they are; ``xla``: graphs
compiled by XLA), named by ``mode`` below; this module runs ``graph``.

The optimizers follow Keras 3's update formulas exactly, operation by
operation in Keras' order (``zoo.optimizers`` has them), as variable updates
(``update``, eager, or traced into the train step's graph):

- ``sgd``: ``w -= lr * g``; with ``momentum`` (and ``nesterov``) a momentum
  slot.
- ``adam``, ``adamw``: the bias correction folded into the step size, the
  powers of the betas in the parameters' dtype; epsilon outside the square
  root (inside when the workload's ``epsilon_inside_sqrt`` says so); with
  ``amsgrad`` the running maximum of the second moments.
- ``rmsprop``: plain, ``centered``, with ``momentum``.
- ``adagrad``: the accumulator starting at ``initial_accumulator_value``.
- ``nadam``: the model's ``u_product`` updated once per step, before the
  parameters, in their dtype.

Weight decay (``weight_decay``, any optimizer; ``adamw``'s default 0.004)
shrinks each trained parameter before its update; a batch normalization's
moving statistics are set, never decayed.  Keras' gradient clipping
(``clipped``) comes first, and a learning-rate schedule gives each step its
rate (``learning_rate``, traced into the graph).  A frozen layer's
parameters are set to themselves (``native.compose``): no gradient, no step.
The train state keeps only the slots the optimizer uses (none for plain SGD).

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment makes every
parameter and input float64: the third float64 run the equivalence checker
votes with (``equivalence.reference``).  Nothing else differs.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

import native
from native import compose
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, PAIRED, Heads, Objective, smoothed, total
from zoo.optimizers import get_optimizer, slot_names
from zoo.specs import Workload

LAYOUT = "keras"
Params = dict[str, tf.Variable]
DTYPE = {"float32": tf.float32, "float64": tf.float64}[
    os.environ.get("HARNESS_NATIVE_DTYPE", "float32")
]


def init(arrays: Mapping[str, np.ndarray]) -> Params:
    return {name: tf.Variable(a, dtype=DTYPE) for name, a in arrays.items()}


def arrays(params: Params) -> Params:
    return params


def to_input(x: np.ndarray) -> tf.Tensor:
    if np.issubdtype(x.dtype, np.integer):
        return tf.constant(x, dtype=tf.int32)  # token ids (N, T)
    return tf.constant(x, dtype=DTYPE)  # already (N, H, W, C) or (N, T, F)


def to_labels(y: np.ndarray) -> tf.Tensor:
    if np.issubdtype(y.dtype, np.integer):  # class ids (N,)
        return tf.constant(y, dtype=tf.int32)
    return tf.constant(y, dtype=DTYPE)  # float rows (N, K)


def _rows(outputs: tf.Tensor, y: tf.Tensor, name: str) -> tuple[tf.Tensor, tf.Tensor]:
    """A model with a row of outputs per position, ``(N, T, C)`` per step or
    ``(N, H, W, C)`` per pixel (Keras' order: ``ops.outputs``): every
    position's row and target as rows of their own (Keras takes the mean
    over them all)."""
    if len(outputs.shape) <= 2:
        return outputs, y
    width = outputs.shape[-1]
    ids = name == "sparse_categorical_crossentropy"
    return tf.reshape(outputs, [-1, width]), tf.reshape(y, [-1] if ids else [-1, width])


def loss(outputs: Any, y: Any, objective: Objective | Heads) -> tf.Tensor:
    """The training loss of ``objective`` (one output's, or several
    outputs' weighted sum: ``zoo.losses.total``) of ``_one_loss``."""
    return total(_one_loss, outputs, y, objective)  # type: ignore[no-any-return]


def _one_loss(outputs: tf.Tensor, y: tf.Tensor, objective: Objective) -> tf.Tensor:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective.loss, objective.from_logits
    outputs, y = _rows(outputs, y, name)
    y = smoothed(y, objective, outputs.shape[-1])
    if name.endswith("categorical_crossentropy"):
        if from_logits:
            log_norm = tf.reduce_logsumexp(outputs, axis=1, keepdims=True)
            log_probs = outputs - log_norm
        else:  # probabilities: rescaled to sum 1, clipped, as Keras does
            p = outputs / tf.reduce_sum(outputs, axis=1, keepdims=True)
            log_probs = tf.math.log(tf.clip_by_value(p, EPSILON, 1 - EPSILON))
        if name == "sparse_categorical_crossentropy":
            return -tf.reduce_mean(tf.gather(log_probs, y, axis=1, batch_dims=1))
        return -tf.reduce_mean(tf.reduce_sum(y * log_probs, axis=1))
    if name == "binary_focal_crossentropy":
        return tf.reduce_mean(tf.reduce_mean(_focal(outputs, y, objective), axis=1))
    if name == "binary_crossentropy":
        if from_logits:
            log_p = tf.math.log_sigmoid(outputs)
            log_not_p = tf.math.log_sigmoid(-outputs)
        else:
            p = tf.clip_by_value(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = tf.math.log(p), tf.math.log(1 - p)
        per_output = y * log_p + (1 - y) * log_not_p
        return -tf.reduce_mean(tf.reduce_mean(per_output, axis=1))
    if name in PAIRED:
        return tf.reduce_mean(_paired(name, outputs, y))
    return tf.reduce_mean(tf.reduce_mean(_regression(name, outputs - y), axis=1))


def _focal(z: tf.Tensor, y: tf.Tensor, objective: Objective) -> tf.Tensor:
    """The binary focal cross-entropy of each output (``zoo.losses``)."""
    p = tf.sigmoid(z) if objective.from_logits else z
    q = tf.clip_by_value(p, EPSILON, 1 - EPSILON)
    bce = -(y * tf.math.log(q) + (1 - y) * tf.math.log(1 - q))
    p_t = y * p + (1 - y) * (1 - p)
    focal = tf.pow(1 - p_t, objective.gamma) * bce
    if objective.alpha is None:
        return focal
    return focal * (y * objective.alpha + (1 - y) * (1 - objective.alpha))


def _paired(name: str, o: Any, t: Any) -> Any:
    """The loss of each row for the losses that take outputs ``o`` and
    targets ``t`` apart (``zoo.losses``; a perturbed run's rounding of their
    terms added: ``native.compose.loss_rows``)."""
    return compose.loss_rows(_paired_rows, _paired_terms, name, o, t)


def _paired_rows(name: str, o: tf.Tensor, t: tf.Tensor) -> tf.Tensor:
    """``_paired``'s rows as Keras computes them (``zoo.losses``)."""
    if name == "hinge":  # targets of -1 or 1
        return tf.reduce_mean(tf.maximum(1.0 - t * o, 0.0), axis=1)
    if name == "poisson":
        return tf.reduce_mean(o - t * tf.math.log(o + EPSILON), axis=1)
    if name == "kl_divergence":
        t, p = tf.clip_by_value(t, EPSILON, 1.0), tf.clip_by_value(o, EPSILON, 1.0)
        return tf.reduce_sum(t * tf.math.log(t / p), axis=1)
    if name == "cosine_similarity":
        return -tf.reduce_sum(_unit(t) * _unit(o), axis=1)
    raise ValueError(f"unknown loss {name!r}")


def _paired_terms(name: str, o: tf.Tensor, t: tf.Tensor) -> tf.Tensor:
    """The magnitudes of the terms each row of ``_paired`` adds up, summed as
    the row sums them (``zoo.losses.PAIRED``'s comment)."""
    if name == "hinge":
        return tf.reduce_mean(1.0 + tf.abs(t * o), axis=1)
    if name == "poisson":
        return tf.reduce_mean(tf.abs(o) + tf.abs(t * tf.math.log(o + EPSILON)), axis=1)
    if name == "kl_divergence":
        t, p = tf.clip_by_value(t, EPSILON, 1.0), tf.clip_by_value(o, EPSILON, 1.0)
        return tf.reduce_sum(
            tf.abs(t * tf.math.log(t)) + tf.abs(t * tf.math.log(p)), axis=1
        )
    return tf.reduce_sum(tf.abs(_unit(t) * _unit(o)), axis=1)  # cosine_similarity


def _unit(x: tf.Tensor) -> tf.Tensor:
    """Each row of ``x`` over its length, as Keras' ``ops.normalize``."""
    inverse = tf.math.rsqrt(tf.reduce_sum(tf.square(x), axis=1, keepdims=True))
    return x * tf.minimum(inverse, 1.0 / EPSILON)


def _regression(name: str, x: tf.Tensor) -> tf.Tensor:
    """A regression loss of each output's error ``x = o - t``."""
    if name == "mean_squared_error":
        return tf.square(x)
    if name == "mean_absolute_error":
        return tf.abs(x)
    if name == "huber":  # delta 1
        return tf.where(tf.abs(x) <= 1.0, 0.5 * tf.square(x), tf.abs(x) - 0.5)
    if name == "log_cosh":  # x + softplus(-2x) - log 2, the softplus stably
        z = -2.0 * x
        softplus = tf.maximum(z, 0.0) + tf.math.log1p(tf.exp(-tf.abs(z)))
        return x + softplus - math.log(2.0)
    raise ValueError(f"unknown loss {name!r}")


def penalty(
    params: Params, penalties: tuple[tuple[str, float, float], ...]
) -> tf.Tensor:
    """The weight penalties (``native.penalties_of``) as Keras' ``L1L2``
    adds them to the loss: ``l1 * sum(|w|) + l2 * sum(w ** 2)`` for each
    (a factor of 0 leaves its term out, as Keras does)."""
    terms = []
    for name, l1, l2 in penalties:
        w = params[name]
        if l1:
            terms.append(l1 * tf.reduce_sum(tf.abs(w)))
        if l2:
            terms.append(l2 * tf.reduce_sum(tf.square(w)))
    return tf.add_n(terms) if terms else tf.zeros((), DTYPE)


def _objective(apply: Apply, params: Params, logits: tf.Tensor, y: tf.Tensor) -> Any:
    """The loss a step minimizes and reports: the objective's, plus the
    weight penalties where the model has any (none added otherwise)."""
    value = loss(logits, y, native.objective_of(apply))
    penalties = native.penalties_of(apply)
    if penalties:
        value = value + penalty(params, penalties)
    return value


def _taped(
    apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    """``loss_and_grads`` as plain operations, for every mode below to run
    (traced into a graph, or called as they are)."""
    with tf.GradientTape() as tape:
        logits = apply(params, x)
        value = _objective(apply, params, logits, y)
    grads = tape.gradient(value, params)
    # An embedding's gradient comes as IndexedSlices (the rows the batch
    # used): made dense, as it is compared and as Keras' Adam applies it
    # (every row's moments decay each step).
    return logits, value, {k: tf.convert_to_tensor(g) for k, g in grads.items()}


def _for_mode(function: Callable[..., Any], mode: str) -> Callable[..., Any]:
    """``function`` as ``mode`` runs it: itself (``eager``), a ``tf.function``
    graph (``graph``) or one compiled by XLA (``xla``).

    Traced without autograph: the code branches and loops on Python values
    only (recurrences run in ``tf.scan``), so autograph's rewriting of every
    function it reaches builds the same graphs (the same operations in every
    function of all twenty zoo models: docs/results/autograph_graphs.py) in
    up to twice the time; code that branched on a tensor would fail to
    trace, not change."""
    if mode == "eager":
        return function
    return tf.function(  # type: ignore[no-any-return]
        function, jit_compile=mode == "xla", autograph=False
    )


def _taped_training(
    apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor, step: tf.Variable
) -> tuple[dict[str, tf.Tensor], dict[str, tf.Tensor]]:
    """The gradients of the trained parameters through the forward pass as a
    training step runs it (``native.compose.train_forward``), and the new
    values of the state parameters it sets (a batch normalization's moving
    statistics, which get no gradient); ``step``, the count of steps taken,
    seeds dropout's draws."""
    with tf.GradientTape() as tape:
        logits, updates = train_forward(apply, params, x, rng=step)
        value = _objective(apply, params, logits, y)
    trained = {k: p for k, p in params.items() if k not in updates}
    grads = tape.gradient(value, trained)
    return {k: tf.convert_to_tensor(g) for k, g in grads.items()}, updates


@functools.cache
def grads_function(apply: Apply, mode: str) -> Callable[..., Any]:
    """``(params, x, y) -> (logits, loss, grads)`` in ``mode``."""
    return _for_mode(functools.partial(_taped, apply), mode)


@functools.cache
def apply_function(apply: Apply, mode: str) -> Callable[..., Any]:
    """``(params, x) -> logits`` in ``mode``."""
    return _for_mode(apply, mode)


def loss_and_grads(
    apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    return grads_function(apply, "graph")(params, x, y)  # type: ignore[no-any-return]


def inference(apply: Apply, params: Params, x: tf.Tensor) -> tf.Tensor:
    return apply_function(apply, "graph")(params, x)


def to_numpy(t: tf.Tensor) -> np.ndarray:
    return t.numpy()  # type: ignore[no-any-return]  # a copy, also of a variable's value


@dataclass
class TrainState:
    """Parameters plus the workload's optimizer state, all ``tf.Variable``s."""

    params: Params
    # Keras' slot name (``momentum``, ``velocity``, ``velocity_hat``,
    # ``average_gradient``, ``accumulator``) -> one variable per parameter;
    # only the slots the workload's optimizer uses (none for plain SGD).
    slots: dict[str, Params]
    # Nadam's running product of its momentum schedule, one number for the
    # whole model in the parameters' dtype (None for every other optimizer).
    u_product: tf.Variable | None
    step: tf.Variable  # int64 count of steps taken
    workload: Workload


def make_train_state(params: Params, workload: Workload) -> TrainState:
    """``params`` at step 0 with the slots of the workload's optimizer: zeros,
    but Adagrad's accumulator at ``initial_accumulator_value``, each in its
    parameter's dtype; Nadam's ``u_product`` at 1 in the parameters' dtype."""
    slots: dict[str, Params] = {}
    for slot in slot_names(workload):
        if slot == "accumulator":  # Adagrad's, as Keras' Constant initializer
            start = workload.initial_accumulator_value
            slots[slot] = {
                k: tf.Variable(tf.fill(tf.shape(p), tf.constant(start, p.dtype)))
                for k, p in params.items()
            }
        else:
            slots[slot] = {k: tf.Variable(tf.zeros_like(p)) for k, p in params.items()}
    nadam = workload.optimizer == "nadam"
    u_product = tf.Variable(tf.constant(1, DTYPE)) if nadam else None
    step = tf.Variable(0, dtype=tf.int64)
    return TrainState(params, slots, u_product, step, workload)


def state_params(state: TrainState) -> Params:
    return state.params


def state_variables(state: TrainState) -> tuple[Any, ...]:
    """What ``step_function``'s graph takes before ``x`` and ``y``: the
    state's variables (a graph traces dicts of variables, not a dataclass)."""
    return state.params, state.slots, state.u_product, state.step


Grads = dict[str, tf.Tensor]


def learning_rate(state: TrainState) -> Any:
    """The rate of this step: the workload's (a Python float: a constant
    rate's graph is what it always was), or its schedule's
    (``zoo.optimizers``) at the count of steps taken (Keras' ``iterations``,
    0 for the first), computed in the parameters' dtype."""
    w = state.workload
    s = w.schedule
    if s is None:
        return w.learning_rate
    if s.kind == "piecewise_constant_decay":
        bounds = tf.constant(s.boundaries, state.step.dtype)
        below = tf.reduce_sum(tf.cast(state.step > bounds, tf.int32))
        return tf.gather(tf.constant(s.values, DTYPE), below)
    t, lr0 = tf.cast(state.step, DTYPE), tf.constant(w.learning_rate, DTYPE)
    steps = tf.constant(s.decay_steps, DTYPE)
    if s.kind in ("exponential_decay", "inverse_time_decay"):
        p = t / steps
        if s.staircase:
            p = tf.floor(p)
        rate = tf.constant(s.decay_rate, DTYPE)
        if s.kind == "exponential_decay":
            return lr0 * tf.pow(rate, p)
        return lr0 / (1 + rate * p)
    # cosine_decay, from lr0, or after a linear warm-up from lr0 to its target
    if not s.warmup_target:
        return lr0 * _cosine(tf.minimum(t, steps) / steps, s.alpha)
    target = tf.constant(s.warmup_target, DTYPE)
    warmup = tf.constant(s.warmup_steps, DTYPE)
    t = tf.minimum(t, steps + warmup)
    warming = (target - lr0) * (t / warmup) + lr0
    decaying = target * _cosine((t - warmup) / steps, s.alpha)
    return tf.where(t < warmup, warming, decaying)


def _cosine(completed: tf.Tensor, alpha: float) -> tf.Tensor:
    """Keras' cosine decay factor at the fraction ``completed``."""
    cosine = 0.5 * (1.0 + tf.cos(tf.constant(math.pi, DTYPE) * completed))
    return (1 - alpha) * cosine + alpha


def clipped(w: Workload, grads: Grads) -> Grads:
    """The gradients as Keras' clipping leaves them (``zoo.optimizers``): by
    each one's norm, by their global norm, or each value; as they are when
    the workload clips none."""
    if w.clipnorm:
        c = w.clipnorm
        return {
            k: g * c / tf.maximum(tf.sqrt(tf.reduce_sum(tf.square(g))), c)
            for k, g in grads.items()
        }
    if w.global_clipnorm:
        c = w.global_clipnorm
        sums = [tf.reduce_sum(tf.square(g)) for g in grads.values()]
        norm = tf.sqrt(tf.reduce_sum(tf.stack(sums)))
        scale = c * tf.minimum(1.0 / norm, 1.0 / c) + (norm - norm)
        return {k: g * scale for k, g in grads.items()}
    if w.clipvalue:
        v = w.clipvalue
        return {k: tf.clip_by_value(g, -v, v) for k, g in grads.items()}
    return grads


def _weight_decay(state: TrainState, grads: Grads, lr: Any) -> None:
    """Keras' weight decay, before the update: ``w -= w * weight_decay * lr``
    on the trained parameters (those with a gradient), the two factors in the
    parameter's dtype, multiplied in Keras' order."""
    w = state.workload
    for name in grads:
        p = state.params[name]
        p.assign_sub(p * w.weight_decay * lr)


def _sgd(state: TrainState, grads: Grads, lr: Any) -> None:
    """SGD: ``w -= lr * g``; with momentum ``b = b * momentum - g * lr``, then
    ``w += b`` (Nesterov: ``w += b * momentum - g * lr`` with the new ``b``)."""
    w = state.workload
    if "momentum" not in state.slots:
        for name, g in grads.items():
            state.params[name].assign_sub(lr * g)
        return
    for name, g in grads.items():
        p, b = state.params[name], state.slots["momentum"][name]
        b.assign(b * w.momentum - g * lr)
        if w.nesterov:
            p.assign_add(b * w.momentum - g * lr)
        else:
            p.assign_add(b)


def _adam(state: TrainState, grads: Grads, lr: Any) -> None:
    """Adam and AdamW: the bias correction folded into the step size,
    ``alpha``; with ``amsgrad`` the running maximum of ``v`` divides; epsilon
    outside the square root (inside when ``epsilon_inside_sqrt`` says so)."""
    w = state.workload
    # As Keras computes it: the powers of beta in the parameters' dtype.
    t = tf.cast(state.step + 1, DTYPE)
    alpha = lr * tf.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    eps = w.epsilon
    for name, g in grads.items():
        p = state.params[name]
        m, v = state.slots["momentum"][name], state.slots["velocity"][name]
        m.assign_add((g - m) * (1 - w.beta_1))
        v.assign_add((g * g - v) * (1 - w.beta_2))
        if w.amsgrad:
            v_hat = state.slots["velocity_hat"][name]
            v_hat.assign(tf.maximum(v_hat, v))
            v = v_hat
        root = tf.sqrt(v + eps) if w.epsilon_inside_sqrt else tf.sqrt(v) + eps
        p.assign_sub(m * alpha / root)


def _rmsprop(state: TrainState, grads: Grads, lr: Any) -> None:
    """RMSprop: ``v = rho * v + (1 - rho) * g*g``; divides ``lr * g`` by
    ``sqrt(v + eps)``, or centered ``sqrt(v - a*a + eps)`` with ``a`` the
    running mean of ``g``; with momentum the step accumulates in ``b``."""
    w = state.workload
    rho, eps = w.rho, w.epsilon
    for name, g in grads.items():
        p, v = state.params[name], state.slots["velocity"][name]
        v.assign(rho * v + (1 - rho) * tf.square(g))
        if w.centered:
            a = state.slots["average_gradient"][name]
            a.assign(rho * a + (1 - rho) * g)
            denominator = v - tf.square(a) + eps  # Keras' order: (v - a*a) + eps
        else:
            denominator = v + eps
        increment = lr * g / tf.sqrt(denominator)
        if w.momentum > 0:
            b = state.slots["momentum"][name]
            b.assign(w.momentum * b + increment)
            p.assign_sub(b)
        else:
            p.assign_sub(increment)


def _adagrad(state: TrainState, grads: Grads, lr: Any) -> None:
    """Adagrad: ``s += g*g``; ``w -= lr * g / sqrt(s + eps)``."""
    w = state.workload
    for name, g in grads.items():
        p, s = state.params[name], state.slots["accumulator"][name]
        s.assign_add(tf.square(g))
        p.assign_sub(lr * g / tf.sqrt(s + w.epsilon))


def _nadam(state: TrainState, grads: Grads, lr: Any) -> None:
    """Nadam: the model's ``u_product`` first, once per step, then each
    parameter from Adam's moments with Nesterov's look-ahead."""
    w = state.workload
    # Every factor in the parameters' dtype, as Keras computes it: the steps
    # t and t + 1, 0.96 and the betas raised to them, and u_product.  Unlike
    # Adam, Keras' Nadam casts the betas first, so ``1 - beta_1`` is taken in
    # that dtype from the rounded beta (in float32 1 - f32(0.9) is 0.100000024,
    # not f32(0.1) as Adam's Python ``1 - 0.9`` gives: 2e-7 apart).
    t = tf.cast(state.step + 1, DTYPE)
    t_1 = tf.cast(state.step + 2, DTYPE)
    beta_1 = tf.constant(w.beta_1, DTYPE)
    beta_2 = tf.constant(w.beta_2, DTYPE)
    u_product = state.u_product
    assert u_product is not None  # make_train_state made it for Nadam
    # Keras' order: (u_product * beta_1) * (1 - 0.5 * 0.96**t), not u_product * u_t.
    u_product.assign(u_product * beta_1 * (1.0 - 0.5 * 0.96**t))
    u_product_t = u_product.read_value()  # after this step's update
    u_t = beta_1 * (1.0 - 0.5 * 0.96**t)
    u_t_1 = beta_1 * (1.0 - 0.5 * 0.96**t_1)
    u_product_t_1 = u_product_t * u_t_1
    beta_2_power = beta_2**t
    for name, g in grads.items():
        p = state.params[name]
        m, v = state.slots["momentum"][name], state.slots["velocity"][name]
        m.assign_add((g - m) * (1 - beta_1))
        v.assign_add((g * g - v) * (1 - beta_2))
        m_hat = u_t_1 * m / (1 - u_product_t_1) + (1 - u_t) * g / (1 - u_product_t)
        v_hat = v / (1 - beta_2_power)
        p.assign_sub(m_hat * lr / (tf.sqrt(v_hat) + w.epsilon))


# Each optimizer's update of the parameters from their gradients.
_STEPS: dict[str, Callable[[TrainState, Grads, Any], None]] = {
    "sgd": _sgd,
    "adam": _adam,
    "adamw": _adam,  # Adam with the workload's weight decay
    "rmsprop": _rmsprop,
    "adagrad": _adagrad,
    "nadam": _nadam,
}


def update(
    state: TrainState,
    grads: Mapping[str, Any],
    updates: Mapping[str, Any] | None = None,
) -> None:
    """One optimizer step in place on the state's variables, Keras' order:
    weight decay on the trained parameters (those in ``grads``) when the
    workload has any, the optimizer's update, then the state parameters set
    to ``updates`` (a batch normalization's moving statistics: no decay, no
    slots), and ``state.step`` counted.  Eager when called as it is; traced
    into the graph of ``step_function``."""
    # Gradients in each parameter's dtype, as Keras casts them (a tensor
    # already in it passes unchanged: no operation added).
    taken = clipped(
        state.workload, {k: tf.cast(g, state.params[k].dtype) for k, g in grads.items()}
    )
    lr = learning_rate(state)
    if state.workload.weight_decay:
        _weight_decay(state, taken, lr)
    _STEPS[get_optimizer(state.workload.optimizer).name](state, taken, lr)
    for name, value in (updates or {}).items():  # state: set, not trained
        if value is not state.params[name]:  # a frozen layer's: held
            state.params[name].assign(value)
    state.step.assign_add(1)


@functools.cache
def step_function(apply: Apply, workload: Workload, mode: str) -> Callable[..., Any]:
    """``(params, slots, u_product, step, x, y) -> None`` (``state_variables``
    then the batch), the train step in ``mode``, updating the state's
    variables with ``update``."""

    # A graph takes the variables themselves (TensorFlow traces dicts of
    # variables, not arbitrary objects) and rebuilds the state view inside.
    def step(  # noqa: PLR0917 (a graph's positional signature)
        params: Params,
        slots: dict[str, Params],
        u_product: tf.Variable | None,
        count: tf.Variable,
        x: tf.Tensor,
        y: tf.Tensor,
    ) -> None:
        grads, updates = _taped_training(apply, params, x, y, count)
        update(TrainState(params, slots, u_product, count, workload), grads, updates)

    return _for_mode(step, mode)


def run_step(
    apply: Apply, state: TrainState, x: tf.Tensor, y: tf.Tensor, mode: str
) -> TrainState:
    """``train_step`` in ``mode``."""
    step = step_function(apply, state.workload, mode)
    step(*state_variables(state), x, y)
    return state


def train_step(
    apply: Apply, state: TrainState, x: tf.Tensor, y: tf.Tensor
) -> TrainState:
    return run_step(apply, state, x, y, "graph")


def sync(value: Any) -> None:
    """Read values back: the last parameter of a train state (its update is the
    last one queued), or every tensor of a list of outputs."""
    if isinstance(value, TrainState):
        list(value.params.values())[-1].numpy()
        return
    for tensor in tf.nest.flatten(value):
        tensor.numpy()


def describe() -> dict[str, Any]:
    return {
        "framework": "tensorflow",
        "framework_version": tf.__version__,
        "device": "gpu" if tf.config.list_physical_devices("GPU") else "cpu",
        "dtype": DTYPE.name,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "tf32_execution": tf.config.experimental.tensor_float_32_execution_enabled(),
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)"),
    }
