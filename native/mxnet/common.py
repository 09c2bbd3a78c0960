"""What every native MXNet model shares: weights, loss, gradients, optimizers.

Imperative mode (path ``native-mxnet``): ``mx.nd`` operators and
``mx.autograd``; ``native/mxnet/hybrid.py`` reuses everything here but the
parameters' container and the gradient pass.

Layouts (family ``oihw``, see ``native.layout``): ``FullyConnected`` weights
``(out, in)``, ``Convolution`` weights ``(out, in, kh, kw)``, image batches
``(N, C, H, W)``.  Parameters are a plain ``dict[str, NDArray]`` keyed by the
canonical names, each with a gradient buffer attached.

The optimizers follow Keras 3's update formulas exactly (see
``native/torch/common.py``; epsilon inside the square root when the workload's
``epsilon_inside_sqrt`` says so), written with ``nd`` operations in place.
MXNet's engine is asynchronous: ``sync`` waits with ``mx.nd.waitall()``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

import native
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, Objective
from zoo.specs import Workload

LAYOUT = "oihw"
CTX = mx.gpu() if mx.context.num_gpus() > 0 else mx.cpu()
# name -> NDArray; inside a hybridized block the same names map to Symbols
Params = dict[str, Any]


def init(arrays: Mapping[str, np.ndarray]) -> Params:
    params = {}
    for name, a in arrays.items():
        params[name] = nd.array(a, ctx=CTX, dtype="float32")
        params[name].attach_grad()
    return params


def arrays(params: Params) -> Params:
    return params


def to_input(x: np.ndarray) -> nd.NDArray:
    if x.ndim == 4:
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    # Token ids (N, T) too: MXNet's Embedding takes float indices (exact
    # below 2**24).
    return nd.array(np.ascontiguousarray(x), ctx=CTX, dtype="float32")


def to_labels(y: np.ndarray) -> nd.NDArray:
    # Class ids as float32 too: nd.pick takes float indices.
    return nd.array(y, ctx=CTX, dtype="float32")


def loss(outputs: nd.NDArray, y: nd.NDArray, objective: Objective) -> nd.NDArray:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``).

    The log-softmax is written out as ``z - logsumexp(z)`` with the row
    maximum taken out first, not with ``nd.log_softmax``: MXNet 1.9.1's CPU
    (oneDNN) kernel is about 3.5e-6 off in its log-probabilities, which a
    2-class bias gradient (a batch mean of softmax minus one-hot that nearly
    cancels) turned into a 7e-4 relative error against float64 (issue 14;
    the LSTM at seed 15, batch 4).  Every operator here is exact to float32
    rounding."""
    name, from_logits = objective
    if name.endswith("categorical_crossentropy"):
        if from_logits:
            shifted = outputs - nd.max(outputs, axis=1, keepdims=True).detach()
            log_norm = nd.log(nd.sum(nd.exp(shifted), axis=1, keepdims=True))
            log_probs = shifted - log_norm
        else:  # probabilities: rescaled to sum 1, clipped, as Keras does
            p = outputs / nd.sum(outputs, axis=1, keepdims=True)
            log_probs = nd.log(nd.clip(p, EPSILON, 1 - EPSILON))
        if name == "sparse_categorical_crossentropy":
            return -nd.mean(nd.pick(log_probs, y, axis=1))
        return -nd.mean(nd.sum(y * log_probs, axis=1))
    if name == "binary_crossentropy":
        if from_logits:  # log_sigmoid(z) = -softplus(-z), both written stably
            log_p = -nd.Activation(-outputs, act_type="softrelu")
            log_not_p = -nd.Activation(outputs, act_type="softrelu")
        else:
            p = nd.clip(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = nd.log(p), nd.log(1 - p)
        return -nd.mean(nd.mean(y * log_p + (1 - y) * log_not_p, axis=1))
    if name == "mean_squared_error":
        return nd.mean(nd.mean(nd.square(y - outputs), axis=1))
    if name == "mean_absolute_error":
        return nd.mean(nd.mean(nd.abs(y - outputs), axis=1))
    raise ValueError(f"unknown loss {name!r}")


def penalty(
    params: Mapping[str, nd.NDArray], penalties: tuple[tuple[str, float, float], ...]
) -> nd.NDArray:
    """The weight penalties (``native.penalties_of``), Keras' ``L1L2``:
    ``l1 * sum(|w|) + l2 * sum(w ** 2)`` for each penalized parameter ``w``
    (a factor of 0 adds no term), as a ``(1,)`` array like the loss."""
    terms = []
    for name, l1, l2 in penalties:
        w = params[name]
        if l1:
            terms.append(l1 * nd.sum(nd.abs(w)))
        if l2:
            terms.append(l2 * nd.sum(nd.square(w)))
    return nd.add_n(*terms) if len(terms) > 1 else terms[0]


def objective(
    apply: Apply, params: Mapping[str, nd.NDArray], logits: nd.NDArray, y: nd.NDArray
) -> nd.NDArray:
    """The loss a training step minimizes: ``loss`` over the batch, plus the
    model's weight penalties (``penalty``) when it has any (nothing added
    otherwise, so a model without them records the same operators)."""
    value = loss(logits, y, native.objective_of(apply))
    penalties = native.penalties_of(apply)
    return value + penalty(params, penalties) if penalties else value


def loss_and_grads(
    apply: Apply, params: Params, x: nd.NDArray, y: nd.NDArray
) -> tuple[nd.NDArray, nd.NDArray, Params]:
    with autograd.record():
        logits = apply(params, x)
        value = objective(apply, params, logits, y)
    value.backward()
    return logits, value, {name: p.grad for name, p in params.items()}


def inference(apply: Apply, params: Params, x: nd.NDArray) -> nd.NDArray:
    return apply(params, x)


def to_numpy(t: nd.NDArray) -> np.ndarray:
    return t.asnumpy()  # a copy; waits for the value


@dataclass
class TrainState:
    params: Any  # the parameters (a dict here, the block in hybrid.py)
    m: Params  # Adam's first moments (empty for SGD)
    v: Params  # Adam's second moments (empty for SGD)
    step: int  # count of steps taken
    workload: Workload


def make_train_state(params: Params, workload: Workload) -> TrainState:
    adam = workload.optimizer == "adam"
    m = {k: nd.zeros_like(p) for k, p in arrays(params).items()} if adam else {}
    v = {k: nd.zeros_like(p) for k, p in arrays(params).items()} if adam else {}
    return TrainState(params, m, v, 0, workload)


def state_params(state: TrainState) -> Any:
    return state.params


def _sgd(state: TrainState, params: Params, grads: Params) -> None:
    lr = state.workload.learning_rate
    for name, g in grads.items():
        params[name][:] = params[name] - lr * g


def _adam(state: TrainState, params: Params, grads: Params) -> None:
    w = state.workload
    # As Keras computes it: the powers of beta in float32 (0.999 is 0.99900001
    # there, which moves sqrt(1 - beta_2**t) by 6e-6).
    t, b1, b2 = np.float32(state.step + 1), np.float32(w.beta_1), np.float32(w.beta_2)
    alpha = float(np.float32(w.learning_rate) * np.sqrt(1 - b2**t) / (1 - b1**t))
    eps = w.epsilon
    for name, g in grads.items():
        p, m, v = params[name], state.m[name], state.v[name]
        m[:] = m + (g - m) * (1 - w.beta_1)
        v[:] = v + (g * g - v) * (1 - w.beta_2)
        root = nd.sqrt(v + eps) if w.epsilon_inside_sqrt else nd.sqrt(v) + eps
        p[:] = p - m * alpha / root


def update(
    state: TrainState, params: Params, grads: Params, updates: Params | None = None
) -> None:
    """One optimizer step on ``params`` (the state's parameter arrays) in
    place, with Keras' formulas, for the parameters in ``grads``; the state
    parameters the training forward pass set (``updates``: a batch
    normalization's moving statistics) take their new values instead."""
    (_sgd if state.workload.optimizer == "sgd" else _adam)(state, params, grads)
    for name, value in (updates or {}).items():
        params[name][:] = value
    state.step += 1


def train_step(
    apply: Apply, state: TrainState, x: nd.NDArray, y: nd.NDArray
) -> TrainState:
    params = state.params
    with autograd.record():
        logits, updates = train_forward(apply, params, x)
        value = objective(apply, params, logits, y)
    value.backward()
    grads = {name: p.grad for name, p in params.items() if name not in updates}
    update(state, params, grads, updates)
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
