"""What every native MXNet model shares: weights, loss, gradients, optimizers.

Imperative mode (path ``native-mxnet``): ``F = mx.nd`` and ``mx.autograd``.

Layouts (family ``oihw``, see ``native.layout``): ``FullyConnected`` weights
``(out, in)``, ``Convolution`` weights ``(out, in, kh, kw)``, image batches
``(N, C, H, W)``.  Parameters are a plain ``dict[str, NDArray]`` keyed by the
canonical names, each with a gradient buffer attached.

The optimizers follow Keras 3's update formulas exactly (see
``native/torch/common.py``), written with ``nd`` operations in place.
MXNet's engine is asynchronous: ``sync`` waits with ``mx.nd.waitall()``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

from native import layout
from native.protocol import Apply, Tensor
from zoo.specs import ModelSpec, Workload

LAYOUT = "oihw"
CTX = mx.gpu() if mx.context.num_gpus() > 0 else mx.cpu()
Params = dict[str, nd.NDArray]


def init(spec: ModelSpec, canonical: Mapping[str, np.ndarray]) -> Params:
    params = {}
    for name, a in layout.to_native(spec, canonical, LAYOUT).items():
        params[name] = nd.array(a, ctx=CTX, dtype="float32")
        params[name].attach_grad()
    return params


def to_input(x: np.ndarray) -> nd.NDArray:
    if x.ndim == 4:
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    return nd.array(np.ascontiguousarray(x), ctx=CTX, dtype="float32")


def to_labels(y: np.ndarray) -> nd.NDArray:
    return nd.array(y, ctx=CTX, dtype="float32")  # nd.pick takes float indices


def cross_entropy(F: Any, logits: Any, y: Any) -> Any:
    """Mean negative log-likelihood of the true class, from logits."""
    return -F.mean(F.pick(F.log_softmax(logits, axis=1), y, axis=1))


def loss_and_grads(
    apply: Apply, params: Params, x: nd.NDArray, y: nd.NDArray
) -> tuple[nd.NDArray, nd.NDArray, Params]:
    with autograd.record():
        logits = apply(params, x)
        loss = cross_entropy(nd, logits, y)
    loss.backward()
    return logits, loss, {name: p.grad for name, p in params.items()}


def evaluate(
    spec: ModelSpec, apply: Apply, params: Params, x: nd.NDArray, y: nd.NDArray
) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    logits, loss, grads = loss_and_grads(apply, params, x, y)
    native = {name: g.asnumpy() for name, g in grads.items()}
    return (
        logits.asnumpy(),
        float(loss.asscalar()),
        layout.to_canonical(spec, native, LAYOUT),
    )


def inference(apply: Apply, params: Params, x: nd.NDArray) -> nd.NDArray:
    return apply(params, x)


def to_numpy(t: nd.NDArray) -> np.ndarray:
    return t.asnumpy()  # a copy; waits for the value


def export(spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
    native = {name: to_numpy(p) for name, p in params.items()}
    return layout.to_canonical(spec, native, LAYOUT)


def activations(
    apply: Apply, params: Params, x: nd.NDArray, taps: dict[str, np.ndarray]
) -> None:
    # Imperative (F = nd), outside autograd.record: every operator runs as it
    # is reached, and reading each output back surfaces an error of the
    # asynchronous engine at its layer.
    def record(name: str, h: Tensor) -> Tensor:
        taps[name] = to_numpy(h)
        return h

    apply(params, x, tap=record)


@dataclass
class TrainState:
    params: Params
    workload: Workload
    step: int = 0
    m: Params = field(default_factory=dict)  # Adam's first moments
    v: Params = field(default_factory=dict)  # Adam's second moments


def make_train_state(spec: ModelSpec, params: Params) -> TrainState:
    state = TrainState(params, spec.workload)
    if spec.workload.optimizer != "sgd":  # Adam, or a fault's variant of it
        state.m = {k: nd.zeros_like(p) for k, p in params.items()}
        state.v = {k: nd.zeros_like(p) for k, p in params.items()}
    return state


def state_params(state: TrainState) -> Params:
    return state.params


def _sgd(state: TrainState, grads: Params) -> None:
    lr = state.workload.learning_rate
    for name, p in state.params.items():
        p[:] = p - lr * grads[name]


def _adam(state: TrainState, grads: Params) -> None:
    w = state.workload
    t = state.step + 1
    alpha = w.learning_rate * math.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m[:] = m + (g - m) * (1 - w.beta_1)
        v[:] = v + (g * g - v) * (1 - w.beta_2)
        p[:] = p - m * alpha / (nd.sqrt(v) + w.epsilon)


_OPTIMIZERS = {"sgd": _sgd, "adam": _adam}


def update(state: TrainState, grads: Params) -> None:
    """One optimizer step on ``state`` in place, with Keras' formulas."""
    _OPTIMIZERS[state.workload.optimizer](state, grads)
    state.step += 1


def train_step(
    apply: Apply, state: TrainState, x: nd.NDArray, y: nd.NDArray
) -> TrainState:
    _, _, grads = loss_and_grads(apply, state.params, x, y)
    update(state, grads)
    return state


def sync(value: Any) -> None:
    nd.waitall()


def describe() -> dict[str, Any]:
    features = mx.runtime.Features()
    return {
        "framework": "mxnet",
        "framework_version": mx.__version__,
        "numpy_version": np.__version__,
        "device": str(CTX),
        "engine_type": os.environ.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice"),
        "cpu_worker_threads": os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1"),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "mkldnn": features.is_enabled("MKLDNN"),
    }
