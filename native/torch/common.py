"""What every native PyTorch model shares: weights, loss, gradients, optimizers.

Layouts (family ``oihw``, see ``native.layout``): dense kernels ``(out, in)``
as ``F.linear`` wants them, conv kernels ``(out, in, kh, kw)``, image batches
``(N, C, H, W)``.  Parameters are a plain ``dict[str, Tensor]`` keyed by the
canonical names, each a leaf tensor with ``requires_grad``.

The optimizers follow Keras 3's update formulas exactly:

- SGD: ``w -= lr * g``.
- Adam: ``m += (g - m) * (1 - b1)``; ``v += (g*g - v) * (1 - b2)``;
  ``w -= m * lr * sqrt(1 - b2**t) / (1 - b1**t) / (sqrt(v) + eps)``, so the
  bias correction is folded into the step size and ``eps`` sits outside the
  square root, unlike ``torch.optim.Adam`` (inside, ``sqrt(v + eps)``, when
  the workload's ``epsilon_inside_sqrt`` says so).

Both update the parameters in place under ``no_grad``.

``HARNESS_NATIVE_DTYPE=float64`` in a worker's environment makes every
parameter and input float64: the same model, weights and data computed in
double precision, the reference the equivalence checker judges every path
against (``equivalence.reference``).  Nothing else differs.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import native
from native.compose import train_forward
from native.protocol import Apply
from zoo.losses import EPSILON, Objective
from zoo.specs import Workload

LAYOUT = "oihw"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
DTYPE = {"float32": torch.float32, "float64": torch.float64}[
    os.environ.get("HARNESS_NATIVE_DTYPE", "float32")
]
Params = dict[str, torch.Tensor]


def init(arrays: Mapping[str, np.ndarray]) -> Params:
    return {
        name: torch.tensor(a, dtype=DTYPE, device=DEVICE).requires_grad_()
        for name, a in arrays.items()
    }


def arrays(params: Params) -> Params:
    # Detached views of the same memory: a pass over them records no graph.
    return {name: p.detach() for name, p in params.items()}


def to_input(x: np.ndarray) -> torch.Tensor:
    if x.ndim == 4:
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    if np.issubdtype(x.dtype, np.integer):  # token ids (N, T)
        return torch.tensor(x, dtype=torch.int64, device=DEVICE)
    return torch.tensor(np.ascontiguousarray(x), dtype=DTYPE, device=DEVICE)


def to_labels(y: np.ndarray) -> torch.Tensor:
    if np.issubdtype(y.dtype, np.integer):  # class ids (N,)
        return torch.tensor(y, dtype=torch.int64, device=DEVICE)
    return torch.tensor(y, dtype=DTYPE, device=DEVICE)  # float rows (N, K)


def loss(outputs: torch.Tensor, y: torch.Tensor, objective: Objective) -> torch.Tensor:
    """The batch mean of ``objective``'s loss, Keras' formulas (``zoo.losses``)."""
    name, from_logits = objective
    if name.endswith("categorical_crossentropy"):
        if from_logits:
            log_probs = torch.log_softmax(outputs, dim=1)
        else:  # probabilities: rescaled to sum 1, clipped, as Keras does
            p = outputs / outputs.sum(dim=1, keepdim=True)
            log_probs = p.clamp(EPSILON, 1 - EPSILON).log()
        if name == "sparse_categorical_crossentropy":
            return -log_probs.gather(1, y[:, None]).mean()
        return -(y * log_probs).sum(dim=1).mean()
    if name == "binary_crossentropy":
        if from_logits:
            log_p, log_not_p = F.logsigmoid(outputs), F.logsigmoid(-outputs)
        else:
            p = outputs.clamp(EPSILON, 1 - EPSILON)
            log_p, log_not_p = p.log(), (1 - p).log()
        return -(y * log_p + (1 - y) * log_not_p).mean(dim=1).mean()
    if name == "mean_squared_error":
        return ((y - outputs) ** 2).mean(dim=1).mean()
    if name == "mean_absolute_error":
        return (y - outputs).abs().mean(dim=1).mean()
    raise ValueError(f"unknown loss {name!r}")


Penalties = tuple[tuple[str, float, float], ...]


def penalty(params: Mapping[str, torch.Tensor], penalties: Penalties) -> torch.Tensor:
    """The weight penalties (``native.penalties_of``), Keras' ``L1L2`` with no
    1/2: ``l1 * sum(|w|) + l2 * sum(w ** 2)`` of each parameter, summed; a
    factor of 0 adds no term, as in Keras.  Only called when ``penalties``
    is not empty: a model without them keeps its loss (and program) as is."""
    terms = []
    for name, l1, l2 in penalties:
        w = params[name]
        if l1:
            terms.append(l1 * w.abs().sum())
        if l2:
            terms.append(l2 * w.square().sum())
    if not terms:  # every factor 0
        return next(iter(params.values())).new_zeros(())
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


def loss_and_grads(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, Params]:
    logits = apply(params, x)
    value = loss(logits, y, native.objective_of(apply))
    if penalties := native.penalties_of(apply):
        value = value + penalty(params, penalties)
    grads = torch.autograd.grad(value, list(params.values()))
    return logits, value, dict(zip(params, grads, strict=True))


@torch.inference_mode()
def inference(apply: Apply, params: Params, x: torch.Tensor) -> torch.Tensor:
    return apply(params, x)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    # Always a copy (which waits for the value): on the CPU ``numpy()`` alone
    # would share memory with parameters that the optimizer updates in place.
    return t.detach().to("cpu", copy=True).numpy()


@dataclass
class TrainState:
    params: Params
    m: Params  # Adam's first moments (empty for SGD)
    v: Params  # Adam's second moments (empty for SGD)
    step: int  # count of steps taken
    workload: Workload


def make_train_state(params: Params, workload: Workload) -> TrainState:
    adam = workload.optimizer == "adam"
    m = {k: torch.zeros_like(p) for k, p in params.items()} if adam else {}
    v = {k: torch.zeros_like(p) for k, p in params.items()} if adam else {}
    return TrainState(params, m, v, 0, workload)


def state_params(state: TrainState) -> Params:
    return state.params


@torch.no_grad()
def _sgd(state: TrainState, grads: Params) -> None:
    lr = state.workload.learning_rate
    for name, g in grads.items():
        state.params[name].sub_(g, alpha=lr)


@torch.no_grad()
def _adam(state: TrainState, grads: Params) -> None:
    w = state.workload
    # As Keras computes it: the powers of beta in the parameters' dtype (in
    # float32, 0.999 is 0.99900001, which moves sqrt(1 - beta_2**t) by 6e-6).
    t = torch.tensor(state.step + 1, dtype=DTYPE)
    alpha = (w.learning_rate * (1 - w.beta_2**t).sqrt() / (1 - w.beta_1**t)).item()
    eps = w.epsilon
    for name, g in grads.items():
        p, m, v = state.params[name], state.m[name], state.v[name]
        m.add_(g - m, alpha=1 - w.beta_1)
        v.add_(g * g - v, alpha=1 - w.beta_2)
        root = (v + eps).sqrt() if w.epsilon_inside_sqrt else v.sqrt() + eps
        p.sub_(m * alpha / root)


def update(state: TrainState, grads: Params, updates: Params | None = None) -> None:
    """One optimizer step on the state's parameters in place, with Keras'
    formulas (eager in every mode: ``native.torch.modes``); ``updates``: the
    new values of the state parameters the training forward pass set (a
    batch normalization's moving statistics), copied in, not trained."""
    (_sgd if state.workload.optimizer == "sgd" else _adam)(state, grads)
    with torch.no_grad():
        for name, value in (updates or {}).items():
            state.params[name].copy_(value)
    state.step += 1


def training_grads(
    value: torch.Tensor, params: Params, updates: Params
) -> dict[str, torch.Tensor]:
    """The gradients of the loss ``value`` for the trained parameters: all but the
    state parameters the forward pass set (``updates``)."""
    trained = [name for name in params if name not in updates]
    grads = torch.autograd.grad(value, [params[name] for name in trained])
    return dict(zip(trained, grads, strict=True))


def train_step(
    apply: Apply, state: TrainState, x: torch.Tensor, y: torch.Tensor
) -> TrainState:
    logits, updates = train_forward(apply, state.params, x)
    value = loss(logits, y, native.objective_of(apply))
    if penalties := native.penalties_of(apply):
        value = value + penalty(state.params, penalties)
    update(state, training_grads(value, state.params, updates), updates)
    return state


def sync(value: Any) -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def describe() -> dict[str, Any]:
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "device": str(DEVICE),
        "dtype": str(DTYPE).removeprefix("torch."),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
