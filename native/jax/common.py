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

The optimizers follow Keras 3's update formulas exactly (see
``native/torch/common.py``): plain SGD, and Adam with the bias correction
folded into the step size and epsilon outside the square root (inside when
the workload's ``epsilon_inside_sqrt`` says so).

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment turns on JAX's
64-bit mode and makes every parameter and input float64: the second float64
run the equivalence checker holds its reference against
(``equivalence.reference``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import native
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, Objective
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


def loss(outputs: jax.Array, y: jax.Array, objective: Objective) -> jax.Array:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective
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
    if name == "binary_crossentropy":
        if from_logits:
            log_p, log_not_p = jax.nn.log_sigmoid(outputs), jax.nn.log_sigmoid(-outputs)
        else:
            p = jnp.clip(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = jnp.log(p), jnp.log(1 - p)
        return -(y * log_p + (1 - y) * log_not_p).mean(axis=1).mean()
    if name == "mean_squared_error":
        return ((y - outputs) ** 2).mean(axis=1).mean()
    if name == "mean_absolute_error":
        return jnp.abs(y - outputs).mean(axis=1).mean()
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
    data_fields=["params", "m", "v", "step"],
    meta_fields=["workload"],
)
@dataclass(frozen=True)
class TrainState:
    params: Params
    m: Params  # Adam's first moments (empty for SGD)
    v: Params  # Adam's second moments (empty for SGD)
    step: jax.Array  # int32 count of steps taken
    workload: Workload  # static: part of the compiled step, not traced


def make_train_state(params: Params, workload: Workload) -> TrainState:
    adam = workload.optimizer == "adam"
    m = {k: jnp.zeros_like(p) for k, p in params.items()} if adam else {}
    v = {k: jnp.zeros_like(p) for k, p in params.items()} if adam else {}
    return TrainState(params, m, v, jnp.zeros((), jnp.int32), workload)


def state_params(state: TrainState) -> Params:
    return state.params


def _sgd(state: TrainState, grads: Params) -> TrainState:
    lr = state.workload.learning_rate
    params = {**state.params, **{k: state.params[k] - lr * g for k, g in grads.items()}}
    return TrainState(params, state.m, state.v, state.step + 1, state.workload)


def _adam(state: TrainState, grads: Params) -> TrainState:
    w = state.workload
    t = (state.step + 1).astype(DTYPE)
    alpha = w.learning_rate * jnp.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    m, v, params, eps = dict(state.m), dict(state.v), dict(state.params), w.epsilon
    for k, g in grads.items():
        m[k] = m[k] + (g - m[k]) * (1 - w.beta_1)
        v[k] = v[k] + (g**2 - v[k]) * (1 - w.beta_2)
        root = jnp.sqrt(v[k] + eps) if w.epsilon_inside_sqrt else jnp.sqrt(v[k]) + eps
        params[k] = params[k] - m[k] * alpha / root
    return TrainState(params, m, v, state.step + 1, w)


def update(
    state: TrainState, grads: Params, updates: Params | None = None
) -> TrainState:
    """One optimizer step with Keras' formulas: the new state.  ``updates``:
    the state parameters a training forward pass set (a batch
    normalization's moving statistics), which take their new values instead
    of an optimizer step (their moments stay zero, never used)."""
    updates = updates or {}
    trained = {k: g for k, g in grads.items() if k not in updates}
    new = (_sgd if state.workload.optimizer == "sgd" else _adam)(state, trained)
    params = {**new.params, **updates}
    return TrainState(params, new.m, new.v, new.step, new.workload)


@functools.cache
def _jitted_step(apply: Apply) -> Any:
    loss_grad = jax.grad(training_objective(apply), has_aux=True)

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
