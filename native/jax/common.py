"""What every native JAX model shares: weights, loss, gradients, optimizers.

Layouts (family ``keras``, see ``native.layout``): JAX takes Keras' layouts as
they are, so loading is the identity: dense kernels ``(in, out)``, conv
kernels ``(kh, kw, in, out)`` (``HWIO``), image batches ``(N, H, W, C)``.
Parameters are a plain ``dict[str, jax.Array]`` keyed by canonical names.

The gradient, train-step and inference functions are ``jax.jit``-compiled
once per forward pass (``native.load_apply`` hands out one ``apply`` object
per pass); compilation happens on the first call, which the harness times
apart as the first step.  The train step donates the old state, as an
idiomatic JAX training loop does.

The optimizers follow Keras 3's update formulas exactly (``zoo.optimizers``
has them), in the order Keras computes them, written out with ``jax.numpy``
(``update``, the one step the compiled train step runs too):

- ``sgd``: plain (no slot), with ``momentum``, with ``nesterov``;
- ``adam`` and ``adamw``: the bias corrections folded into the step size,
  their powers in the parameters' dtype, epsilon outside the square root
  (inside when the workload's ``epsilon_inside_sqrt``, a fault, says so);
  ``amsgrad``'s running maximum of the second moments;
- ``rmsprop``: plain, ``centered``, with ``momentum``;
- ``adagrad``: the accumulator starting at ``initial_accumulator_value``;
- ``nadam``: the model's ``u_product`` updated once per step, before the
  parameters, in their dtype;
- weight decay (``weight_decay``, any optimizer; ``adamw``'s by default)
  before the update, on the trained parameters only;
- Keras' gradient clipping (``clipped``) before it, and a learning-rate
  schedule's rate of the step (``learning_rate``, traced: the schedule lives
  in the compiled step; a constant rate stays a Python float).

A frozen layer's parameters get no gradient (``training_grad``
differentiates the others only) and no step.

The optimizer state (``TrainState``) keeps only the slots the optimizer
uses, so plain SGD's and Adam's compiled steps are what they always were.

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment turns on JAX's
64-bit mode and makes every parameter and input float64: the second float64
run the equivalence checker holds its reference against
(``equivalence.reference``).
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import native
from native import compose
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, PAIRED, Heads, Objective, smoothed, total
from zoo.optimizers import OPTIMIZERS, slot_names
from zoo.specs import Workload

LAYOUT = "keras"
Params = dict[str, jax.Array]
if os.environ.get("HARNESS_NATIVE_DTYPE") == "float64":
    jax.config.update("jax_enable_x64", True)
DTYPE = {"float32": jnp.float32, "float64": jnp.float64}[
    os.environ.get("HARNESS_NATIVE_DTYPE", "float32")
]


def init(arrays: Mapping[str, np.ndarray]) -> Params:
    return {name: jnp.asarray(a, dtype=DTYPE) for name, a in arrays.items()}


def arrays(params: Params) -> Params:
    return params


def to_input(x: np.ndarray) -> jax.Array:
    if np.issubdtype(x.dtype, np.integer):
        return jnp.asarray(x, dtype=jnp.int32)  # token ids (N, T)
    return jnp.asarray(x, dtype=DTYPE)  # already (N, H, W, C) or (N, T, F)


def to_labels(y: np.ndarray) -> jax.Array:
    if np.issubdtype(y.dtype, np.integer):  # class ids (N,)
        return jnp.asarray(y, dtype=jnp.int32)
    return jnp.asarray(y, dtype=DTYPE)  # float rows (N, K)


def _rows(outputs: jax.Array, y: jax.Array, name: str) -> tuple[jax.Array, jax.Array]:
    """A model with a row of outputs per position, ``(N, T, C)`` per step or
    ``(N, H, W, C)`` per pixel (Keras' order: ``ops.outputs``): every
    position's row and target as rows of their own (Keras takes the mean
    over them all)."""
    if outputs.ndim <= 2:
        return outputs, y
    width = outputs.shape[-1]
    ids = name == "sparse_categorical_crossentropy"
    return outputs.reshape((-1, width)), y.reshape((-1,) if ids else (-1, width))


def loss(outputs: Any, y: Any, objective: Objective | Heads) -> jax.Array:
    """The training loss of ``objective`` (one output's, or several
    outputs' weighted sum: ``zoo.losses.total``) of ``_one_loss``."""
    return total(_one_loss, outputs, y, objective)  # type: ignore[no-any-return]


def _one_loss(outputs: jax.Array, y: jax.Array, objective: Objective) -> jax.Array:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective.loss, objective.from_logits
    outputs, y = _rows(outputs, y, name)
    y = smoothed(y, objective, outputs.shape[-1])
    if name.endswith("categorical_crossentropy"):
        if from_logits:
            log_norm = jax.scipy.special.logsumexp(outputs, axis=1, keepdims=True)
            log_probs = outputs - log_norm
        else:  # probabilities: rescaled to sum 1, clipped, as Keras does
            p = outputs / jnp.sum(outputs, axis=1, keepdims=True)
            log_probs = jnp.log(jnp.clip(p, EPSILON, 1 - EPSILON))
        if name == "sparse_categorical_crossentropy":
            return -jnp.take_along_axis(log_probs, y[:, None], axis=1).mean()
        return -jnp.sum(y * log_probs, axis=1).mean()
    if name == "binary_focal_crossentropy":
        return _focal(outputs, y, objective).mean(axis=1).mean()
    if name == "binary_crossentropy":
        if from_logits:
            log_p, log_not_p = jax.nn.log_sigmoid(outputs), jax.nn.log_sigmoid(-outputs)
        else:
            p = jnp.clip(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = jnp.log(p), jnp.log(1 - p)
        return -(y * log_p + (1 - y) * log_not_p).mean(axis=1).mean()
    if name in PAIRED:
        return _paired(name, outputs, y).mean()
    return _regression(name, outputs - y).mean(axis=1).mean()


def _focal(z: jax.Array, y: jax.Array, objective: Objective) -> jax.Array:
    """The binary focal cross-entropy of each output (``zoo.losses``)."""
    p = jax.nn.sigmoid(z) if objective.from_logits else z
    q = jnp.clip(p, EPSILON, 1 - EPSILON)
    bce = -(y * jnp.log(q) + (1 - y) * jnp.log(1 - q))
    p_t = y * p + (1 - y) * (1 - p)
    focal = (1 - p_t) ** objective.gamma * bce
    if objective.alpha is None:
        return focal
    return focal * (y * objective.alpha + (1 - y) * (1 - objective.alpha))


def _paired(name: str, o: Any, t: Any) -> Any:
    """The loss of each row for the losses that take outputs ``o`` and
    targets ``t`` apart (``zoo.losses``; a perturbed run's rounding of their
    terms added: ``native.compose.loss_rows``)."""
    return compose.loss_rows(_paired_rows, _paired_terms, name, o, t)


def _paired_rows(name: str, o: jax.Array, t: jax.Array) -> jax.Array:
    """``_paired``'s rows as Keras computes them (``zoo.losses``)."""
    if name == "hinge":  # targets of -1 or 1
        return jnp.maximum(1.0 - t * o, 0.0).mean(axis=1)
    if name == "poisson":
        return (o - t * jnp.log(o + EPSILON)).mean(axis=1)
    if name == "kl_divergence":
        t, p = jnp.clip(t, EPSILON, 1.0), jnp.clip(o, EPSILON, 1.0)
        return jnp.sum(t * jnp.log(t / p), axis=1)
    if name == "cosine_similarity":
        return -jnp.sum(_unit(t) * _unit(o), axis=1)
    raise ValueError(f"unknown loss {name!r}")


def _paired_terms(name: str, o: jax.Array, t: jax.Array) -> jax.Array:
    """The magnitudes of the terms each row of ``_paired`` adds up, summed as
    the row sums them (``zoo.losses.PAIRED``'s comment)."""
    if name == "hinge":
        return (1.0 + jnp.abs(t * o)).mean(axis=1)
    if name == "poisson":
        return (jnp.abs(o) + jnp.abs(t * jnp.log(o + EPSILON))).mean(axis=1)
    if name == "kl_divergence":
        t, p = jnp.clip(t, EPSILON, 1.0), jnp.clip(o, EPSILON, 1.0)
        return jnp.sum(jnp.abs(t * jnp.log(t)) + jnp.abs(t * jnp.log(p)), axis=1)
    return jnp.sum(jnp.abs(_unit(t) * _unit(o)), axis=1)  # cosine_similarity


def _unit(x: jax.Array) -> jax.Array:
    """Each row of ``x`` over its length, as Keras' ``ops.normalize``."""
    inverse = jax.lax.rsqrt(jnp.sum(x**2, axis=1, keepdims=True))
    return x * jnp.minimum(inverse, 1.0 / EPSILON)


def _regression(name: str, x: jax.Array) -> jax.Array:
    """A regression loss of each output's error ``x = o - t``."""
    if name == "mean_squared_error":
        return x**2
    if name == "mean_absolute_error":
        return jnp.abs(x)
    if name == "huber":  # delta 1
        return jnp.where(jnp.abs(x) <= 1.0, 0.5 * x**2, jnp.abs(x) - 0.5)
    if name == "log_cosh":  # x + softplus(-2x) - log 2, the softplus stably
        z = -2.0 * x
        return x + jnp.maximum(z, 0) + jnp.log1p(jnp.exp(-jnp.abs(z))) - math.log(2.0)
    raise ValueError(f"unknown loss {name!r}")


def penalty(params: Params, penalties: tuple[tuple[str, float, float], ...]) -> Any:
    """The weight penalties (``native.penalties_of``) added to the loss:
    ``l1 * sum(|w|) + l2 * sum(w ** 2)`` for each, as Keras' ``L1L2`` (no
    1/2; a factor of 0 adds no term)."""
    total: Any = 0
    for name, l1, l2 in penalties:
        w = params[name]
        if l1:
            total = total + l1 * jnp.sum(jnp.abs(w))
        if l2:
            total = total + l2 * jnp.sum(jnp.square(w))
    return total


def objective(
    apply: Apply,
    of: Callable[..., Any] = loss,
    penalize: Callable[..., Any] = penalty,
) -> Callable[..., Any]:
    """``(params, x, y) -> (loss, logits)``: the loss first, as
    ``jax.grad(has_aux=True)`` wants (``of``: ``loss``, or a compiled one in
    ``native.jax.modes``, called with the pass's ``native.objective_of``),
    plus ``penalize``'s weight penalties where the model has any (nothing
    added where it has none: the program is unchanged)."""
    goal, penalties = native.objective_of(apply), native.penalties_of(apply)

    def value(params: Params, x: jax.Array, y: jax.Array) -> Any:
        logits = apply(params, x)
        total = of(logits, y, goal)
        if penalties:
            total = total + penalize(params, penalties)
        return total, logits

    return value


def training_objective(
    apply: Apply,
    of: Callable[..., Any] = loss,
    penalize: Callable[..., Any] = penalty,
) -> Callable[..., Any]:
    """``(params, x, y, rng) -> (loss, updates)``: the loss of the forward
    pass as a training step runs it (``native.compose.train_forward``), with
    the weight penalties as ``objective``'s, and the new values of the state
    parameters it sets."""
    goal, penalties = native.objective_of(apply), native.penalties_of(apply)

    def value(params: Params, x: jax.Array, y: jax.Array, rng: Any) -> Any:
        logits, updates = train_forward(apply, params, x, rng)
        total = of(logits, y, goal)
        if penalties:
            total = total + penalize(params, penalties)
        return total, updates

    return value


def training_grad(apply: Apply, objective: Callable[..., Any]) -> Callable[..., Any]:
    """``jax.grad`` of a ``training_objective`` taken for the parameters
    that are not a frozen layer's only (``native.frozen_of``): ``(params, x,
    y, rng) -> (grads, updates)``, so no program, jitted or eager, spends
    time on a gradient Keras does not take."""
    held = native.frozen_of(apply)
    if not held:
        return jax.grad(objective, has_aux=True)  # the program as it always was

    def split(trained: Params, frozen: Params, *rest: Any) -> Any:
        return objective({**trained, **frozen}, *rest)

    grad = jax.grad(split, has_aux=True)

    def call(params: Params, *rest: Any) -> Any:
        trained = {k: v for k, v in params.items() if k not in held}
        return grad(trained, {k: params[k] for k in held}, *rest)

    return call


def step_key(step: jax.Array) -> jax.Array:
    """The random key of training step ``step`` (dropout's): a fixed seed
    folded with the count, so every step draws anew and a run repeats."""
    return jax.random.fold_in(jax.random.key(0), step)


@functools.cache
def _jitted_grads(apply: Apply) -> Any:
    return jax.jit(jax.value_and_grad(objective(apply), has_aux=True))


@functools.cache
def _jitted_apply(apply: Apply) -> Any:
    return jax.jit(apply)


def loss_and_grads(
    apply: Apply, params: Params, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array, Params]:
    (loss, logits), grads = _jitted_grads(apply)(params, x, y)
    return logits, loss, grads


def inference(apply: Apply, params: Params, x: jax.Array) -> jax.Array:
    return _jitted_apply(apply)(params, x)  # type: ignore[no-any-return]


def to_numpy(t: jax.Array) -> np.ndarray:
    # A copy, not a view of a device buffer that a train step may donate.
    return np.array(t)


@functools.partial(
    jax.tree_util.register_dataclass,
    data_fields=["params", "slots", "u_product", "step"],
    meta_fields=["workload"],
)
@dataclass(frozen=True)
class TrainState:
    """The parameters and the optimizer's state after ``step`` steps.

    ``slots`` holds the per-parameter arrays the workload's optimizer keeps,
    by Keras' slot name (``zoo.optimizers.slot_names``): none for plain
    SGD, ``momentum`` and ``velocity`` for Adam.  Its keys flatten in sorted
    order, so plain SGD's and Adam's states flatten to the same leaves as
    ever and their compiled steps do not change."""

    params: Params
    slots: dict[str, Params]  # slot name -> per-parameter arrays
    u_product: jax.Array | None  # Nadam's product of the u(t) so far; else None
    step: jax.Array  # int32 count of steps taken
    workload: Workload  # static: part of the compiled step, not traced


def make_train_state(params: Params, workload: Workload) -> TrainState:
    """``params`` at step 0 with the slots of ``workload``'s optimizer (a
    ValueError for one that is not written out here)."""

    def start(p: jax.Array, slot: str) -> jax.Array:
        # Adagrad's accumulator starts at its option, as Keras' Constant
        # initializer fills it; every other slot at zero.
        if slot == "accumulator":
            return jnp.full_like(p, workload.initial_accumulator_value)
        return jnp.zeros_like(p)

    slots = {
        slot: {k: start(p, slot) for k, p in params.items()}
        for slot in slot_names(workload)
    }
    # Nadam's u_product is one number for the model, in the parameters' dtype.
    nadam = workload.optimizer == "nadam"
    u_product = jnp.ones((), DTYPE) if nadam else None
    return TrainState(params, slots, u_product, jnp.zeros((), jnp.int32), workload)


def state_params(state: TrainState) -> Params:
    return state.params


def _slots(state: TrainState) -> dict[str, Params]:
    """A copy of the state's slots to set new arrays in."""
    return {name: dict(arrays) for name, arrays in state.slots.items()}


def _sgd(state: TrainState, grads: Params, lr: Any) -> TrainState:
    """Keras' SGD: ``w -= lr * g``; with momentum ``b = b * momentum - g *
    lr``, then ``w += b``, or with Nesterov ``w += b * momentum - g * lr``."""
    w = state.workload
    if w.momentum == 0:  # no slot; the same operations as ever
        new = {k: state.params[k] - lr * g for k, g in grads.items()}
        return replace(state, params={**state.params, **new}, step=state.step + 1)
    slots, params = _slots(state), dict(state.params)
    b = slots["momentum"]
    for k, g in grads.items():
        b[k] = b[k] * w.momentum - g * lr
        step = b[k] * w.momentum - g * lr if w.nesterov else b[k]
        params[k] = params[k] + step
    return replace(state, params=params, slots=slots, step=state.step + 1)


def _adam(state: TrainState, grads: Params, lr: Any) -> TrainState:
    """Keras' Adam and AdamW (whose decay ``update`` applies): the bias
    corrections folded into the step size ``alpha``, epsilon outside the
    square root (inside where the workload's ``epsilon_inside_sqrt``, a
    fault, says so); with ``amsgrad`` the running maximum of ``v`` in its
    place."""
    w = state.workload
    # The powers in the parameters' dtype, as Keras computes them; plain
    # Python floats (1 - beta_1) elsewhere, as Keras' own are.
    t = (state.step + 1).astype(DTYPE)
    alpha = lr * jnp.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    slots, params, eps = _slots(state), dict(state.params), w.epsilon
    m, v = slots["momentum"], slots["velocity"]
    for k, g in grads.items():
        m[k] = m[k] + (g - m[k]) * (1 - w.beta_1)
        v[k] = v[k] + (g**2 - v[k]) * (1 - w.beta_2)
        second = v[k]
        if w.amsgrad:
            vh = slots["velocity_hat"]
            vh[k] = second = jnp.maximum(vh[k], v[k])
        root = (
            jnp.sqrt(second + eps) if w.epsilon_inside_sqrt else jnp.sqrt(second) + eps
        )
        params[k] = params[k] - m[k] * alpha / root
    return replace(state, params=params, slots=slots, step=state.step + 1)


def _rmsprop(state: TrainState, grads: Params, lr: Any) -> TrainState:
    """Keras' RMSprop: ``v = rho * v + (1 - rho) * g**2``; centered, the
    mean gradient ``a`` too and ``v - a**2`` under the square root; epsilon
    inside it; with momentum the increments accumulate in ``b``."""
    w = state.workload
    rho, eps = w.rho, w.epsilon
    slots, params = _slots(state), dict(state.params)
    v = slots["velocity"]
    for k, g in grads.items():
        v[k] = rho * v[k] + (1 - rho) * g**2
        if w.centered:
            a = slots["average_gradient"]
            a[k] = rho * a[k] + (1 - rho) * g
            denominator = v[k] - a[k] ** 2 + eps
        else:
            denominator = v[k] + eps
        increment = lr * g / jnp.sqrt(denominator)
        if w.momentum > 0:
            b = slots["momentum"]
            b[k] = w.momentum * b[k] + increment
            increment = b[k]
        params[k] = params[k] - increment
    return replace(state, params=params, slots=slots, step=state.step + 1)


def _adagrad(state: TrainState, grads: Params, lr: Any) -> TrainState:
    """Keras' Adagrad: ``s += g**2`` (``s`` starting at the workload's
    ``initial_accumulator_value``), ``w -= lr * g / sqrt(s + epsilon)``."""
    w = state.workload
    eps = w.epsilon
    slots, params = _slots(state), dict(state.params)
    s = slots["accumulator"]
    for k, g in grads.items():
        s[k] = s[k] + g**2
        params[k] = params[k] - lr * g / jnp.sqrt(s[k] + eps)
    return replace(state, params=params, slots=slots, step=state.step + 1)


def _nadam(state: TrainState, grads: Params, lr: Any) -> TrainState:
    """Keras' Nadam: first the model's ``u_product`` takes this step's
    ``u(t) = beta_1 * (1 - 0.5 * 0.96**t)``, then every parameter its
    Nesterov-corrected Adam step."""
    w = state.workload
    assert state.u_product is not None  # made by make_train_state for nadam
    # As Keras: the step counts, beta_1, beta_2 and 0.96 in the parameters'
    # dtype, so that 1 - beta_1 and every power are computed in it.
    t, t_next = (state.step + 1).astype(DTYPE), (state.step + 2).astype(DTYPE)
    beta_1, beta_2 = jnp.asarray(w.beta_1, DTYPE), jnp.asarray(w.beta_2, DTYPE)
    decay = jnp.asarray(0.96, DTYPE)
    # Once per step, before any parameter, in Keras' order of products.
    u_product = state.u_product * w.beta_1 * (1.0 - 0.5 * decay**t)
    u_t = beta_1 * (1.0 - 0.5 * decay**t)
    u_next = beta_1 * (1.0 - 0.5 * decay**t_next)
    u_product_next = u_product * u_next
    beta_2_power = beta_2**t
    eps = w.epsilon
    slots, params = _slots(state), dict(state.params)
    m, v = slots["momentum"], slots["velocity"]
    for k, g in grads.items():
        m[k] = m[k] + (g - m[k]) * (1 - beta_1)
        v[k] = v[k] + (g**2 - v[k]) * (1 - beta_2)
        m_hat = u_next * m[k] / (1 - u_product_next) + (1 - u_t) * g / (1 - u_product)
        v_hat = v[k] / (1 - beta_2_power)
        params[k] = params[k] - m_hat * lr / (jnp.sqrt(v_hat) + eps)
    return replace(
        state, params=params, slots=slots, u_product=u_product, step=state.step + 1
    )


_STEPS: dict[str, Callable[[TrainState, Params, Any], TrainState]] = {
    "sgd": _sgd,
    "adam": _adam,
    "adamw": _adam,
    "rmsprop": _rmsprop,
    "adagrad": _adagrad,
    "nadam": _nadam,
}
assert set(_STEPS) == set(OPTIMIZERS)


def _decayed(params: Params, trained: Params, workload: Workload, lr: Any) -> Params:
    """Keras' weight decay of the ``trained`` parameters, before the update:
    ``w - w * weight_decay * lr`` (Python floats, or the schedule's rate in
    the parameters' dtype, taking that dtype as Keras' casts do)."""
    wd = workload.weight_decay
    return {**params, **{k: params[k] - params[k] * wd * lr for k in trained}}


def learning_rate(state: TrainState) -> Any:
    """The rate of this step: the workload's (a Python float: the program of
    a constant rate is what it always was), or its schedule's
    (``zoo.optimizers``) at the count of steps taken (Keras' ``iterations``,
    0 for the first), computed in the parameters' dtype."""
    w = state.workload
    s = w.schedule
    if s is None:
        return w.learning_rate
    if s.kind == "piecewise_constant_decay":
        below = jnp.sum(state.step > jnp.asarray(s.boundaries))
        return jnp.asarray(s.values, DTYPE)[below]
    t, lr0 = state.step.astype(DTYPE), jnp.asarray(w.learning_rate, DTYPE)
    steps = jnp.asarray(s.decay_steps, DTYPE)
    if s.kind in ("exponential_decay", "inverse_time_decay"):
        p = t / steps
        if s.staircase:
            p = jnp.floor(p)
        rate = jnp.asarray(s.decay_rate, DTYPE)
        if s.kind == "exponential_decay":
            return lr0 * rate**p
        return lr0 / (1 + rate * p)
    # cosine_decay, from lr0, or after a linear warm-up from lr0 to its target
    if not s.warmup_target:
        return lr0 * _cosine(jnp.minimum(t, steps) / steps, s.alpha)
    target = jnp.asarray(s.warmup_target, DTYPE)
    warmup = jnp.asarray(s.warmup_steps, DTYPE)
    t = jnp.minimum(t, steps + warmup)
    warming = (target - lr0) * (t / warmup) + lr0
    decaying = target * _cosine((t - warmup) / steps, s.alpha)
    return jnp.where(t < warmup, warming, decaying)


def _cosine(completed: jax.Array, alpha: float) -> jax.Array:
    """Keras' cosine decay factor at the fraction ``completed``."""
    cosine = 0.5 * (1.0 + jnp.cos(jnp.asarray(math.pi, DTYPE) * completed))
    return (1 - alpha) * cosine + alpha


def clipped(w: Workload, grads: Params) -> Params:
    """The gradients as Keras' clipping leaves them (``zoo.optimizers``): by
    each one's norm, by their global norm, or each value; as they are when
    the workload clips none."""
    if w.clipnorm:
        c = w.clipnorm
        return {
            k: g * c / jnp.maximum(jnp.sqrt(jnp.sum(g**2)), c) for k, g in grads.items()
        }
    if w.global_clipnorm:
        c = w.global_clipnorm
        norm = jnp.sqrt(jnp.sum(jnp.stack([jnp.sum(g**2) for g in grads.values()])))
        scale = c * jnp.minimum(1.0 / norm, 1.0 / c) + (norm - norm)
        return {k: g * scale for k, g in grads.items()}
    if w.clipvalue:
        v = w.clipvalue
        return {k: jnp.clip(g, -v, v) for k, g in grads.items()}
    return grads


def update(
    state: TrainState, grads: Params, updates: Params | None = None
) -> TrainState:
    """One optimizer step with Keras' formulas: the new state.  ``updates``:
    the state parameters a training forward pass set (a batch
    normalization's moving statistics), which take their new values instead
    of an optimizer step or weight decay (their slots are never used).
    Weight decay, where the workload has one, comes first, as Keras'."""
    updates = updates or {}
    w = state.workload
    trained = clipped(w, {k: g for k, g in grads.items() if k not in updates})
    lr = learning_rate(state)
    if w.weight_decay:
        state = replace(state, params=_decayed(state.params, trained, w, lr))
    new = _STEPS[w.optimizer](state, trained, lr)
    return replace(new, params={**new.params, **updates})


@functools.cache
def _jitted_step(apply: Apply) -> Any:
    loss_grad = training_grad(apply, training_objective(apply))

    def step(state: TrainState, x: jax.Array, y: jax.Array) -> TrainState:
        grads, updates = loss_grad(state.params, x, y, step_key(state.step))
        return update(state, grads, updates)

    return jax.jit(step, donate_argnums=0)


def train_step(
    apply: Apply, state: TrainState, x: jax.Array, y: jax.Array
) -> TrainState:
    return _jitted_step(apply)(state, x, y)  # type: ignore[no-any-return]


def sync(value: Any) -> None:
    jax.block_until_ready(value)


def describe() -> dict[str, Any]:
    return {
        "framework": "jax",
        "framework_version": jax.__version__,
        "device": str(jax.devices()[0]),
        "dtype": jnp.dtype(DTYPE).name,
        "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "cpu_count": os.cpu_count(),
    }
