"""What every native TensorFlow model shares: weights, loss, gradients, optimizers.

Layouts (family ``keras``, see ``native.layout``): TensorFlow takes Keras'
layouts as they are, so loading is the identity: dense kernels ``(in, out)``,
conv kernels ``(kh, kw, in, out)``, image batches ``(N, H, W, C)``.
Parameters are a plain ``dict[str, tf.Variable]`` keyed by canonical names.

Gradients come from ``tf.GradientTape``; the gradient, train-step and
inference functions run as ``tf.function`` graphs (without XLA: that is the
idiomatic variant the floors benchmark compares against), traced on their
first call, which the harness times apart as the first step.

The optimizers follow Keras 3's update formulas exactly (see
``native/torch/common.py``): plain SGD, and Adam with the bias correction
folded into the step size and epsilon outside the square root, all as
variable updates inside the graph.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from native import layout
from native.protocol import Apply, Tensor
from zoo.specs import ModelSpec, Workload

LAYOUT = "keras"
Params = dict[str, tf.Variable]


def init(spec: ModelSpec, canonical: Mapping[str, np.ndarray]) -> Params:
    native = layout.to_native(spec, canonical, LAYOUT)
    return {name: tf.Variable(a, dtype=tf.float32) for name, a in native.items()}


def to_input(x: np.ndarray) -> tf.Tensor:
    return tf.constant(x, dtype=tf.float32)  # already (N, H, W, C) or (N, T, F)


def to_labels(y: np.ndarray) -> tf.Tensor:
    return tf.constant(y, dtype=tf.int32)


def cross_entropy(logits: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    """Mean negative log-likelihood of the true class, from logits."""
    log_probs = logits - tf.reduce_logsumexp(logits, axis=1, keepdims=True)
    return -tf.reduce_mean(tf.gather(log_probs, y, axis=1, batch_dims=1))


def _loss_and_grads(
    apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor
) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
    with tf.GradientTape() as tape:
        logits = apply(params, x)
        loss = cross_entropy(logits, y)
    return logits, loss, tape.gradient(loss, params)


@functools.cache
def _graph_grads(apply: Apply) -> Any:
    return tf.function(functools.partial(_loss_and_grads, apply))


@functools.cache
def _graph_apply(apply: Apply) -> Any:
    return tf.function(apply)


def evaluate(
    spec: ModelSpec, apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor
) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    logits, loss, grads = _graph_grads(apply)(params, x, y)
    native = {name: g.numpy() for name, g in grads.items()}
    return logits.numpy(), float(loss), layout.to_canonical(spec, native, LAYOUT)


def inference(apply: Apply, params: Params, x: tf.Tensor) -> tf.Tensor:
    return _graph_apply(apply)(params, x)


def to_numpy(t: tf.Tensor) -> np.ndarray:
    return t.numpy()  # a copy, also of a variable's current value


def export(spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
    native = {name: to_numpy(p) for name, p in params.items()}
    return layout.to_canonical(spec, native, LAYOUT)


def activations(
    apply: Apply, params: Params, x: tf.Tensor, taps: dict[str, np.ndarray]
) -> None:
    # Eager (no tf.function, no tape): every operator runs (and fails) as it is
    # reached.
    def record(name: str, h: Tensor) -> Tensor:
        taps[name] = to_numpy(h)
        return h

    apply(params, x, tap=record)


@dataclass
class TrainState:
    params: Params
    workload: Workload
    step: tf.Variable = field(default_factory=lambda: tf.Variable(0, dtype=tf.int64))
    m: Params = field(default_factory=dict)  # Adam's first moments
    v: Params = field(default_factory=dict)  # Adam's second moments


def make_train_state(spec: ModelSpec, params: Params) -> TrainState:
    state = TrainState(params, spec.workload)
    if spec.workload.optimizer != "sgd":  # Adam, or a fault's variant of it
        state.m = {k: tf.Variable(tf.zeros_like(p)) for k, p in params.items()}
        state.v = {k: tf.Variable(tf.zeros_like(p)) for k, p in params.items()}
    return state


def state_params(state: TrainState) -> Params:
    return state.params


def _sgd(state: TrainState, grads: dict[str, tf.Tensor]) -> None:
    lr = state.workload.learning_rate
    for name, p in state.params.items():
        p.assign_sub(lr * grads[name])


def _adam(state: TrainState, grads: dict[str, tf.Tensor]) -> None:
    w = state.workload
    t = tf.cast(state.step + 1, tf.float32)
    alpha = w.learning_rate * tf.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m.assign_add((g - m) * (1 - w.beta_1))
        v.assign_add((g * g - v) * (1 - w.beta_2))
        p.assign_sub(m * alpha / (tf.sqrt(v) + w.epsilon))


_OPTIMIZERS = {"sgd": _sgd, "adam": _adam}


@functools.cache
def graph_step(apply: Apply, workload: Workload, jit_compile: bool = False) -> Any:
    """The train step as a graph (``jit_compile``: compiled by XLA)."""
    update = _OPTIMIZERS[workload.optimizer]

    # The graph takes the variables themselves (TensorFlow traces dicts of
    # variables, not arbitrary objects) and rebuilds the state view inside.
    @tf.function(jit_compile=jit_compile)
    def step(  # noqa: PLR0917 (a graph's positional signature)
        params: Params,
        m: Params,
        v: Params,
        count: tf.Variable,
        x: tf.Tensor,
        y: tf.Tensor,
    ) -> None:
        _, _, grads = _loss_and_grads(apply, params, x, y)
        update(TrainState(params, workload, count, m, v), grads)
        count.assign_add(1)

    return step


def train_step(
    apply: Apply, state: TrainState, x: tf.Tensor, y: tf.Tensor
) -> TrainState:
    step = graph_step(apply, state.workload)
    step(state.params, state.m, state.v, state.step, x, y)
    return state


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
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "tf32_execution": tf.config.experimental.tensor_float_32_execution_enabled(),
        "onednn_opts": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default (on)"),
    }
