"""PyTorch's execution modes: eager, or ``torch.compile``.

- ``eager`` (the default, ``native.torch.common``): every operator runs as it
  is called and autograd records it; the optimizer updates in place.
- ``compile``: ``torch.compile`` (the default inductor backend) compiles the
  forward pass with its loss, ``forward_and_loss(params, x, y) -> (logits, loss)``;
  ``torch.autograd.grad`` outside it runs the backward pass that AOTAutograd
  compiled together with it.  Inference is a second compiled function, the
  forward pass alone, called under ``torch.inference_mode`` (which the
  compiled graph is specialized to).  The hand-written optimizer stays eager
  (``common.update``): Adam's step size is a new Python float every step, and
  a compiled function recompiles for each new float it is handed.  Dynamo
  traces through Python, so the LSTM's loop over time steps is unrolled into
  one graph of T cells.

Compiled functions are cached per ``apply`` object as in the other
frameworks (``native.load_apply`` hands out one per forward pass); each
compiles on its first call, and again when its inputs' shapes change.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import torch

import native
from native.compose import train_forward
from native.protocol import Apply, Framework
from native.torch import common
from native.torch.common import Params, TrainState

MODES = {
    "eager": "every operator as it is called, autograd recording",
    "compile": "torch.compile (inductor) of forward pass and loss; optimizer eager",
}
DEFAULT = "eager"
assert tuple(MODES) == native.MODES["torch"]


@functools.cache
def _compiled_objective(apply: Apply) -> Any:
    goal, penalties = native.objective_of(apply), native.penalties_of(apply)

    def forward_and_loss(
        params: Params, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = apply(params, x)
        value = common.loss(logits, y, goal)
        if penalties:
            value = value + common.penalty(params, penalties)
        return logits, value

    return torch.compile(forward_and_loss)


@functools.cache
def _compiled_apply(apply: Apply) -> Any:
    return torch.compile(apply)


def _loss_and_grads(
    apply: Apply, params: Params, x: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, Params]:
    logits, loss = _compiled_objective(apply)(params, x, y)
    grads = torch.autograd.grad(loss, list(params.values()))
    return logits, loss, dict(zip(params, grads, strict=True))


@torch.inference_mode()
def _inference(apply: Apply, params: Params, x: torch.Tensor) -> torch.Tensor:
    return _compiled_apply(apply)(params, x)  # type: ignore[no-any-return]


@functools.cache
def _compiled_training(apply: Apply) -> Any:
    goal, penalties = native.objective_of(apply), native.penalties_of(apply)

    def training_loss(
        params: Params, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, Params]:
        logits, updates = train_forward(apply, params, x)
        value = common.loss(logits, y, goal)
        if penalties:
            value = value + common.penalty(params, penalties)
        return value, updates

    return torch.compile(training_loss)


def _train_step(
    apply: Apply, state: TrainState, x: torch.Tensor, y: torch.Tensor
) -> TrainState:
    loss, updates = _compiled_training(apply)(state.params, x, y)
    grads = common.training_grads(loss, state.params, updates)
    common.update(state, grads, updates)
    return state


def framework(mode: str) -> Framework:
    """The PyTorch surface in ``mode``: ``common`` itself for the default."""
    if mode not in MODES:
        raise ValueError(f"unknown PyTorch mode {mode!r}; known: {', '.join(MODES)}")
    if mode == DEFAULT:
        return cast("Framework", common)
    return native.in_mode(
        cast("Framework", common),
        mode,
        loss_and_grads=_loss_and_grads,
        inference=_inference,
        train_step=_train_step,
    )
