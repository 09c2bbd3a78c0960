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

The optimizers follow Keras 3's update formulas exactly (see
``native/torch/common.py``): plain SGD, and Adam with the bias correction
folded into the step size and epsilon outside the square root (inside when
the workload's ``epsilon_inside_sqrt`` says so), all as variable updates
inside the graph.

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment makes every
parameter and input float64: the third float64 run the equivalence checker
votes with (``equivalence.reference``).  Nothing else differs.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

import native
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, Objective
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


def loss(outputs: tf.Tensor, y: tf.Tensor, objective: Objective) -> tf.Tensor:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective
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
    if name == "binary_crossentropy":
        if from_logits:
            log_p = tf.math.log_sigmoid(outputs)
            log_not_p = tf.math.log_sigmoid(-outputs)
        else:
            p = tf.clip_by_value(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = tf.math.log(p), tf.math.log(1 - p)
        per_output = y * log_p + (1 - y) * log_not_p
        return -tf.reduce_mean(tf.reduce_mean(per_output, axis=1))
    if name == "mean_squared_error":
        return tf.reduce_mean(tf.reduce_mean(tf.square(y - outputs), axis=1))
    if name == "mean_absolute_error":
        return tf.reduce_mean(tf.reduce_mean(tf.abs(y - outputs), axis=1))
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
    graph (``graph``) or one compiled by XLA (``xla``)."""
    if mode == "eager":
        return function
    return tf.function(function, jit_compile=mode == "xla")  # type: ignore[no-any-return]


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
    return t.numpy()  # a copy, also of a variable's current value


@dataclass
class TrainState:
    params: Params
    m: Params  # Adam's first moments (empty for SGD)
    v: Params  # Adam's second moments (empty for SGD)
    step: tf.Variable  # int64 count of steps taken
    workload: Workload


def make_train_state(params: Params, workload: Workload) -> TrainState:
    adam = workload.optimizer == "adam"
    m = {k: tf.Variable(tf.zeros_like(p)) for k, p in params.items()} if adam else {}
    v = {k: tf.Variable(tf.zeros_like(p)) for k, p in params.items()} if adam else {}
    return TrainState(params, m, v, tf.Variable(0, dtype=tf.int64), workload)


def state_params(state: TrainState) -> Params:
    return state.params


def _sgd(state: TrainState, grads: dict[str, tf.Tensor]) -> None:
    lr = state.workload.learning_rate
    for name, g in grads.items():
        state.params[name].assign_sub(lr * g)


def _adam(state: TrainState, grads: dict[str, tf.Tensor]) -> None:
    w = state.workload
    # As Keras computes it: the powers of beta in the parameters' dtype.
    t = tf.cast(state.step + 1, DTYPE)
    alpha = w.learning_rate * tf.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    eps = w.epsilon
    for name, g in grads.items():
        p, m, v = state.params[name], state.m[name], state.v[name]
        m.assign_add((g - m) * (1 - w.beta_1))
        v.assign_add((g * g - v) * (1 - w.beta_2))
        root = tf.sqrt(v + eps) if w.epsilon_inside_sqrt else tf.sqrt(v) + eps
        p.assign_sub(m * alpha / root)


@functools.cache
def step_function(apply: Apply, workload: Workload, mode: str) -> Callable[..., Any]:
    """``(params, m, v, step, x, y) -> None``, the train step in ``mode``,
    updating the state's variables."""
    update = _sgd if workload.optimizer == "sgd" else _adam

    # A graph takes the variables themselves (TensorFlow traces dicts of
    # variables, not arbitrary objects) and rebuilds the state view inside.
    def step(  # noqa: PLR0917 (a graph's positional signature)
        params: Params,
        m: Params,
        v: Params,
        count: tf.Variable,
        x: tf.Tensor,
        y: tf.Tensor,
    ) -> None:
        grads, updates = _taped_training(apply, params, x, y, count)
        update(TrainState(params, m, v, count, workload), grads)
        for name, value in updates.items():  # state: set, not trained
            params[name].assign(value)
        count.assign_add(1)

    return _for_mode(step, mode)


def run_step(
    apply: Apply, state: TrainState, x: tf.Tensor, y: tf.Tensor, mode: str
) -> TrainState:
    """``train_step`` in ``mode``."""
    step = step_function(apply, state.workload, mode)
    step(state.params, state.m, state.v, state.step, x, y)
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
