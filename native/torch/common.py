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
  square root, unlike ``torch.optim.Adam``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from native import layout
from native.protocol import Apply, Tensor
from zoo.specs import ModelSpec, Workload

LAYOUT = "oihw"
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
Params = dict[str, torch.Tensor]


def init(spec: ModelSpec, canonical: Mapping[str, np.ndarray]) -> Params:
    native = layout.to_native(spec, canonical, LAYOUT)
    return {
        name: torch.tensor(a, dtype=torch.float32, device=DEVICE).requires_grad_()
        for name, a in native.items()
    }


def to_input(x: np.ndarray) -> torch.Tensor:
    if x.ndim == 4:
        x = x.transpose(0, 3, 1, 2)  # (N, H, W, C) -> (N, C, H, W)
    return torch.tensor(np.ascontiguousarray(x), dtype=torch.float32, device=DEVICE)


def to_labels(y: np.ndarray) -> torch.Tensor:
    return torch.tensor(y, dtype=torch.int64, device=DEVICE)


def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of the true class, from logits."""
    log_probs = torch.log_softmax(logits, dim=1)
    return -log_probs.gather(1, y[:, None]).mean()


def loss_and_grads(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, Params]:
    logits = apply(params, x)
    loss = cross_entropy(logits, y)
    grads = torch.autograd.grad(loss, list(params.values()))
    return logits, loss, dict(zip(params, grads, strict=True))


def evaluate(
    spec: ModelSpec, apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    logits, loss, grads = loss_and_grads(apply, params, x, y)
    native = {name: g.detach().cpu().numpy() for name, g in grads.items()}
    return (
        logits.detach().cpu().numpy(),
        float(loss.item()),
        layout.to_canonical(spec, native, LAYOUT),
    )


@torch.inference_mode()
def inference(apply: Apply, params: Params, x: torch.Tensor) -> torch.Tensor:
    return apply(params, x)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    # Always a copy (which waits for the value): on the CPU ``numpy()`` alone
    # would share memory with parameters that the optimizer updates in place.
    return t.detach().to("cpu", copy=True).numpy()


def export(spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
    native = {name: to_numpy(p) for name, p in params.items()}
    return layout.to_canonical(spec, native, LAYOUT)


@torch.no_grad()
def activations(
    apply: Apply, params: Params, x: torch.Tensor, taps: dict[str, np.ndarray]
) -> None:
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
        state.m = {k: torch.zeros_like(p) for k, p in params.items()}
        state.v = {k: torch.zeros_like(p) for k, p in params.items()}
    return state


def state_params(state: TrainState) -> Params:
    return state.params


@torch.no_grad()
def _sgd(state: TrainState, grads: Params) -> None:
    lr = state.workload.learning_rate
    for name, p in state.params.items():
        p.sub_(grads[name], alpha=lr)


@torch.no_grad()
def _adam(state: TrainState, grads: Params) -> None:
    w = state.workload
    t = state.step + 1
    alpha = w.learning_rate * math.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m.add_(g - m, alpha=1 - w.beta_1)
        v.add_(g * g - v, alpha=1 - w.beta_2)
        p.sub_(m * alpha / (v.sqrt() + w.epsilon))


_OPTIMIZERS = {"sgd": _sgd, "adam": _adam}


def train_step(
    apply: Apply, state: TrainState, x: torch.Tensor, y: torch.Tensor
) -> TrainState:
    _, _, grads = loss_and_grads(apply, state.params, x, y)
    _OPTIMIZERS[state.workload.optimizer](state, grads)
    state.step += 1
    return state


def sync(value: Any) -> None:
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def describe() -> dict[str, Any]:
    return {
        "framework": "torch",
        "framework_version": torch.__version__,
        "device": str(DEVICE),
        "intra_op_threads": torch.get_num_threads(),
        "inter_op_threads": torch.get_num_interop_threads(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
    }
