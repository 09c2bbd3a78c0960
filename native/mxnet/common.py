"""What every native MXNet model shares: weights, loss, gradients, optimizers.

Imperative mode (path ``native-mxnet``): ``mx.nd`` operators and
``mx.autograd``; ``native/mxnet/hybrid.py`` reuses everything here but the
parameters' container and the gradient pass.

Layouts (family ``oihw``, see ``native.layout``): ``FullyConnected`` weights
``(out, in)``, ``Convolution`` weights ``(out, in, kh, kw)``, image batches
``(N, C, H, W)``.  Parameters are a plain ``dict[str, NDArray]`` keyed by the
canonical names, each with a gradient buffer attached.

The optimizers (``zoo.optimizers``, whose docstring has the formulas) are
Keras 3's, written out with ``nd`` operations in place, in Keras' order of
operations: ``sgd`` (with ``momentum``, ``nesterov``), ``adam`` (with
``amsgrad``; epsilon inside the square root when the workload's
``epsilon_inside_sqrt`` says so), ``adamw`` (Adam with weight decay),
``rmsprop`` (``centered``, ``momentum``), ``adagrad`` and ``nadam``; any of
them with ``weight_decay``, applied to the trained parameters before the
update, after Keras' gradient clipping (``clipped``), at the step's rate
(``learning_rate``: a schedule's, with NumPy in the parameters' dtype).  A
frozen layer's parameters take no gradient (``grad_req="null"``) and no
step.  ``update`` is the one optimizer step, for both modes.
MXNet's engine is asynchronous: ``sync`` waits with ``mx.nd.waitall()``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

import native
from native.compose import train_forward
from native.mxnet.ops import softplus
from native.protocol import Apply
from zoo.losses import EPSILON, PAIRED, Heads, Objective, smoothed, total
from zoo.optimizers import OPTIMIZERS, slot_names
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


def _rows(
    outputs: nd.NDArray, y: nd.NDArray, name: str
) -> tuple[nd.NDArray, nd.NDArray]:
    """A model with a row of outputs per position, ``(N, T, C)`` per step or
    ``(N, H, W, C)`` per pixel (Keras' order: ``ops.outputs``): every
    position's row and target as rows of their own (Keras takes the mean
    over them all)."""
    if outputs.ndim <= 2:
        return outputs, y
    width = outputs.shape[-1]
    ids = name == "sparse_categorical_crossentropy"
    return outputs.reshape((-1, width)), y.reshape((-1,) if ids else (-1, width))


def loss(outputs: Any, y: Any, objective: Objective | Heads) -> nd.NDArray:
    """The training loss of ``objective`` (one output's, or several
    outputs' weighted sum: ``zoo.losses.total``) of ``_one_loss``."""
    return total(_one_loss, outputs, y, objective)  # type: ignore[no-any-return]


def _one_loss(outputs: nd.NDArray, y: nd.NDArray, objective: Objective) -> nd.NDArray:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``).

    The log-softmax is written out as ``z - logsumexp(z)`` with the row
    maximum taken out first, not with ``nd.log_softmax``: MXNet 1.9.1's CPU
    (oneDNN) kernel is about 3.5e-6 off in its log-probabilities, which a
    2-class bias gradient (a batch mean of softmax minus one-hot that nearly
    cancels) turned into a 7e-4 relative error against float64 (issue 14;
    the LSTM at seed 15, batch 4).  Every operator here is exact to float32
    rounding."""
    name, from_logits = objective.loss, objective.from_logits
    outputs, y = _rows(outputs, y, name)
    y = smoothed(y, objective, outputs.shape[-1])
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
    if name == "binary_focal_crossentropy":
        return nd.mean(nd.mean(_focal(outputs, y, objective), axis=1))
    if name == "binary_crossentropy":
        if from_logits:  # log_sigmoid(z) = -softplus(-z), both written stably
            log_p, log_not_p = -softplus(-outputs), -softplus(outputs)
        else:
            p = nd.clip(outputs, EPSILON, 1 - EPSILON)
            log_p, log_not_p = nd.log(p), nd.log(1 - p)
        return -nd.mean(nd.mean(y * log_p + (1 - y) * log_not_p, axis=1))
    if name in PAIRED:
        return nd.mean(_paired(name, outputs, y))
    return nd.mean(nd.mean(_regression(name, outputs - y), axis=1))


def _focal(z: nd.NDArray, y: nd.NDArray, objective: Objective) -> nd.NDArray:
    """The binary focal cross-entropy of each output (``zoo.losses``)."""
    p = nd.sigmoid(z) if objective.from_logits else z
    q = nd.clip(p, EPSILON, 1 - EPSILON)
    bce = -(y * nd.log(q) + (1 - y) * nd.log(1 - q))
    p_t = y * p + (1 - y) * (1 - p)
    focal = nd.power(1 - p_t, objective.gamma) * bce
    if objective.alpha is None:
        return focal
    return focal * (y * objective.alpha + (1 - y) * (1 - objective.alpha))


def _paired(name: str, o: nd.NDArray, t: nd.NDArray) -> nd.NDArray:
    """The loss of each row of outputs ``o`` and targets ``t`` for the losses
    that take them apart, not their difference (``zoo.losses``)."""
    if name == "hinge":  # targets of -1 or 1
        return nd.mean(nd.maximum(1.0 - t * o, 0.0), axis=1)
    if name == "poisson":
        return nd.mean(o - t * nd.log(o + EPSILON), axis=1)
    if name == "kl_divergence":
        t, p = nd.clip(t, EPSILON, 1.0), nd.clip(o, EPSILON, 1.0)
        return nd.sum(t * nd.log(t / p), axis=1)
    if name == "cosine_similarity":
        return -nd.sum(_unit(t) * _unit(o), axis=1)
    raise ValueError(f"unknown loss {name!r}")


def _unit(x: nd.NDArray) -> nd.NDArray:
    """Each row of ``x`` over its length, as Keras' ``ops.normalize``."""
    inverse = nd.rsqrt(nd.sum(nd.square(x), axis=1, keepdims=True))
    return x * nd.minimum(inverse, 1.0 / EPSILON)


def _regression(name: str, x: nd.NDArray) -> nd.NDArray:
    """A regression loss of each output's error ``x = o - t``."""
    if name == "mean_squared_error":
        return nd.square(x)
    if name == "mean_absolute_error":
        return nd.abs(x)
    if name == "huber":  # delta 1
        return nd.where(nd.abs(x) <= 1.0, 0.5 * nd.square(x), nd.abs(x) - 0.5)
    if name == "log_cosh":  # x + softplus(-2x) - log 2, the softplus stably
        return x + softplus(-2.0 * x) - math.log(2.0)
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
    copy: np.ndarray = t.asnumpy()  # a copy; waits for the value
    return copy


@dataclass
class TrainState:
    """A model's parameters and its optimizer's state.

    ``slots``: each slot the workload's optimizer keeps, by Keras' name, as
    arrays keyed like the parameters (``make_train_state`` says which);
    ``u_product``: Nadam's running product of its momentum schedule, one
    number for the whole model in the parameters' dtype (``None`` for every
    other optimizer)."""

    params: Any  # the parameters (a dict here, the block in hybrid.py)
    slots: dict[str, Params]  # slot name -> parameter name -> array
    u_product: np.floating[Any] | None  # a NumPy scalar, computed on the host
    step: int  # count of steps taken
    workload: Workload


def make_train_state(params: Params, workload: Workload) -> TrainState:
    """``params`` at step 0 with the slots of ``workload``'s optimizer (a
    ValueError for one ``zoo.optimizers`` does not know): zeros, but
    Adagrad's accumulator, which starts at ``initial_accumulator_value``
    (in the parameters' dtype, as Keras' constant initializer gives it)."""
    named = arrays(params)
    slots = {}
    for slot in slot_names(workload):
        if slot == "accumulator":
            value = workload.initial_accumulator_value
            slots[slot] = {
                k: nd.full(p.shape, value, ctx=p.context, dtype=p.dtype)
                for k, p in named.items()
            }
        else:
            slots[slot] = {k: nd.zeros_like(p) for k, p in named.items()}
    u_product = None
    if workload.optimizer == "nadam":
        u_product = _dtype(named)(1)
    return TrainState(params, slots, u_product, 0, workload)


def state_params(state: TrainState) -> Any:
    return state.params


def _dtype(params: Params) -> type[np.floating[Any]]:
    """The NumPy scalar type of the parameters (float32 here), in which the
    optimizers compute their step-dependent numbers as Keras does."""
    scalar: type[np.floating[Any]] = np.dtype(next(iter(params.values())).dtype).type
    return scalar


def learning_rate(state: TrainState, params: Params) -> float:
    """The rate of this step: the workload's, or its schedule's
    (``zoo.optimizers``) at the count of steps taken (Keras' ``iterations``,
    0 for the first), computed with NumPy in the parameters' dtype, as this
    module computes Adam's other step-dependent numbers."""
    w = state.workload
    s = w.schedule
    if s is None:
        return w.learning_rate
    dtype = _dtype(params)
    if s.kind == "piecewise_constant_decay":
        below = sum(1 for bound in s.boundaries if state.step > bound)
        return float(dtype(s.values[below]))
    t, lr0, steps = dtype(state.step), dtype(w.learning_rate), dtype(s.decay_steps)
    if s.kind in ("exponential_decay", "inverse_time_decay"):
        p = t / steps
        if s.staircase:
            p = np.floor(p)
        rate = dtype(s.decay_rate)
        if s.kind == "exponential_decay":
            return float(lr0 * rate**p)
        return float(lr0 / (dtype(1) + rate * p))
    # cosine_decay, from lr0, or after a linear warm-up from lr0 to its target
    start = lr0
    if s.warmup_target:
        target, warmup = dtype(s.warmup_target), dtype(s.warmup_steps)
        t = min(t, steps + warmup)
        if state.step < s.warmup_steps:
            return float((target - lr0) * (t / warmup) + lr0)
        start, t = target, t - warmup
    else:
        t = min(t, steps)
    cosine = dtype(0.5) * (dtype(1) + np.cos(dtype(math.pi) * (t / steps)))
    return float(start * (dtype(1 - s.alpha) * cosine + dtype(s.alpha)))


def clipped(w: Workload, grads: Params) -> Params:
    """The gradients as Keras' clipping leaves them (``zoo.optimizers``): by
    each one's norm, by their global norm, or each value; as they are when
    the workload clips none."""
    if w.clipnorm:
        c = w.clipnorm
        return {
            k: g * c / nd.maximum(nd.sqrt(nd.sum(g * g)), c) for k, g in grads.items()
        }
    if w.global_clipnorm:
        c = w.global_clipnorm
        norm = nd.sqrt(nd.add_n(*[nd.sum(g * g) for g in grads.values()]))
        scale = c * nd.minimum(1.0 / norm, 1.0 / c) + (norm - norm)
        return {k: nd.broadcast_mul(g, scale) for k, g in grads.items()}
    if w.clipvalue:
        v = w.clipvalue
        return {k: nd.clip(g, -v, v) for k, g in grads.items()}
    return grads


def _decay(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' weight decay (its base optimizer's ``_apply_weight_decay``),
    before the update, on the trained parameters (those in ``grads``):
    ``w = w - w * weight_decay * lr``, multiplied in that order, both
    factors in the parameters' dtype (MXNet casts a scalar to the array's)."""
    w = state.workload
    for name in grads:
        p = params[name]
        p[:] = p - p * w.weight_decay * lr


def _sgd(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' SGD: ``w -= lr * g``; with momentum (slot ``momentum``, ``b``)
    ``b = b * momentum - g * lr`` then ``w += b``, or with Nesterov
    ``w += b * momentum - g * lr`` with the new ``b``."""
    w = state.workload
    if not w.momentum:  # the plain step, unchanged: no slot
        for name, g in grads.items():
            params[name][:] = params[name] - lr * g
        return
    for name, g in grads.items():
        p, b = params[name], state.slots["momentum"][name]
        b[:] = b * w.momentum - g * lr
        p[:] = p + (b * w.momentum - g * lr if w.nesterov else b)


def _adam(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' Adam (and AdamW, whose decay ``update`` applies first):
    ``alpha = lr * sqrt(1 - beta_2**t) / (1 - beta_1**t)``; ``m += (g - m)
    * (1 - beta_1)``; ``v += (g*g - v) * (1 - beta_2)``; with AMSGrad ``vh
    = max(vh, v)`` stands for ``v``; ``w -= m * alpha / (sqrt(v) +
    epsilon)``, or ``sqrt(v + epsilon)`` when the workload's
    ``epsilon_inside_sqrt`` says so (a deliberate fault)."""
    w = state.workload
    dtype = _dtype(params)
    # As Keras computes it: the powers of beta in the parameters' dtype (in
    # float32 0.999 is 0.99900001, which moves sqrt(1 - beta_2**t) by 6e-6).
    # The rest of alpha NumPy takes to float64 (``1 - b2**t`` promotes), as
    # this step always has: now and then 1 ulp from Keras' float32 alpha,
    # kept so that the timed Adam step and its verdicts do not move.
    t, b1, b2 = dtype(state.step + 1), dtype(w.beta_1), dtype(w.beta_2)
    alpha = float(dtype(lr) * np.sqrt(1 - b2**t) / (1 - b1**t))
    eps = w.epsilon
    slots = state.slots
    for name, g in grads.items():
        p, m, v = params[name], slots["momentum"][name], slots["velocity"][name]
        m[:] = m + (g - m) * (1 - w.beta_1)
        v[:] = v + (g * g - v) * (1 - w.beta_2)
        if w.amsgrad:
            v_hat = slots["velocity_hat"][name]
            v_hat[:] = nd.maximum(v_hat, v)
            v = v_hat
        root = nd.sqrt(v + eps) if w.epsilon_inside_sqrt else nd.sqrt(v) + eps
        p[:] = p - m * alpha / root


def _rmsprop(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' RMSprop: ``v = rho * v + (1 - rho) * g*g``; centered, ``a =
    rho * a + (1 - rho) * g`` and ``d = v - a*a + epsilon``, else ``d = v +
    epsilon``; ``inc = lr * g / sqrt(d)``; with momentum ``b = momentum * b
    + inc`` and ``w -= b``, else ``w -= inc``."""
    w = state.workload
    rho, eps = w.rho, w.epsilon
    slots = state.slots
    for name, g in grads.items():
        p, v = params[name], slots["velocity"][name]
        v[:] = rho * v + (1 - rho) * (g * g)
        if w.centered:
            a = slots["average_gradient"][name]
            a[:] = rho * a + (1 - rho) * g
            denominator = v - a * a + eps
        else:
            denominator = v + eps
        increment = lr * g / nd.sqrt(denominator)
        if w.momentum > 0:
            b = slots["momentum"][name]
            b[:] = w.momentum * b + increment
            p[:] = p - b
        else:
            p[:] = p - increment


def _adagrad(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' Adagrad: ``s += g*g``; ``w -= lr * g / sqrt(s + epsilon)``
    (``s`` started at ``initial_accumulator_value``)."""
    w = state.workload
    for name, g in grads.items():
        p, s = params[name], state.slots["accumulator"][name]
        s[:] = s + g * g
        p[:] = p - lr * g / nd.sqrt(s + w.epsilon)


def _nadam(state: TrainState, params: Params, grads: Params, lr: float) -> None:
    """Keras' Nadam, with ``u(t) = beta_1 * (1 - 0.5 * 0.96**t)``: first
    ``u_product *= u(t)``, once for the model; then per parameter ``m += (g
    - m) * (1 - beta_1)``, ``v += (g*g - v) * (1 - beta_2)``, ``m_hat =
    u(t+1) * m / (1 - u_product * u(t+1)) + (1 - u(t)) * g / (1 -
    u_product)``, ``v_hat = v / (1 - beta_2**t)`` and ``w -= m_hat * lr /
    (sqrt(v_hat) + epsilon)``."""
    w = state.workload
    assert state.u_product is not None
    # Every step-dependent number in the parameters' dtype, as Keras casts
    # them (1 - beta_1 too: Nadam subtracts the cast beta, Adam does not).
    dtype = _dtype(params)
    one, half, decay = dtype(1), dtype(0.5), dtype(0.96)
    b1, b2 = dtype(w.beta_1), dtype(w.beta_2)
    t, t_next = dtype(state.step + 1), dtype(state.step + 2)
    u_t = b1 * (one - half * decay**t)
    u_next = b1 * (one - half * decay**t_next)
    # Once a step, before any parameter's update; Keras' own grouping,
    # (u_product * beta_1) * (1 - 0.5 * 0.96**t), not u_product * u(t).
    state.u_product = state.u_product * b1 * (one - half * decay**t)
    u_product = state.u_product
    m_scale, m_divisor = float(u_next), float(one - u_product * u_next)
    g_scale, g_divisor = float(one - u_t), float(one - u_product)
    v_divisor = float(one - b2**t)
    m_rate, v_rate = float(one - b1), float(one - b2)
    eps = w.epsilon
    slots = state.slots
    for name, g in grads.items():
        p, m, v = params[name], slots["momentum"][name], slots["velocity"][name]
        m[:] = m + (g - m) * m_rate
        v[:] = v + (g * g - v) * v_rate
        m_hat = m * m_scale / m_divisor + g * g_scale / g_divisor
        v_hat = v / v_divisor
        p[:] = p - m_hat * lr / (nd.sqrt(v_hat) + eps)


# The hand-written step of each optimizer of ``zoo.optimizers.OPTIMIZERS``.
_STEPS = {
    "sgd": _sgd,
    "adam": _adam,
    "adamw": _adam,
    "rmsprop": _rmsprop,
    "adagrad": _adagrad,
    "nadam": _nadam,
}
assert set(_STEPS) == set(OPTIMIZERS)


def update(
    state: TrainState, params: Params, grads: Params, updates: Params | None = None
) -> None:
    """One optimizer step on ``params`` (the state's parameter arrays) in
    place, with Keras' formulas, for the parameters in ``grads`` (the
    trained ones): first the weight decay, when the workload has one, then
    the optimizer's update; the state parameters the training forward pass
    set (``updates``: a batch normalization's moving statistics) take their
    new values instead, with no decay."""
    # Keras' order: the decay first, on the weights as they were, then the
    # update from the decayed weights (gradients taken before both).
    grads = clipped(state.workload, grads)
    lr = learning_rate(state, params)
    if state.workload.weight_decay:
        _decay(state, params, grads, lr)
    _STEPS[state.workload.optimizer](state, params, grads, lr)
    for name, value in (updates or {}).items():
        if value is not params[name]:  # a frozen layer's: held
            params[name][:] = value
    state.step += 1


def train_step(
    apply: Apply, state: TrainState, x: nd.NDArray, y: nd.NDArray
) -> TrainState:
    params = state.params
    for name in native.frozen_of(apply):
        if params[name].grad is not None:  # once: no gradient of a held one
            params[name].attach_grad(grad_req="null")
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
