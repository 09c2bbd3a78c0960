"""JAX's execution modes: one compiled program per step, or one per layer.

- ``jit`` (the default, ``native.jax.common``): the gradient computation, the
  train step (optimizer included, old state donated) and inference are each
  one ``jax.jit`` program; the per-layer kernels of ``ops.py`` are inlined
  into it, so XLA sees and fuses the whole step.
- ``layerjit``: nothing is compiled as a whole.  ``jax.value_and_grad`` runs
  eagerly over the forward pass, whose building blocks (``ops.py``: dense,
  conv2d, the pools, relu) are each a jitted kernel, so every layer's forward
  and backward pass runs as an XLA computation of its own; the cross-entropy
  is one more, so are the weight penalties where a model has any
  (``common.penalty``), and so is the optimizer update (``common.update``).
  What is left between them (``flatten``'s reshape, autodiff's bookkeeping)
  runs op by op.  The LSTM's ``lax.scan`` is already one compiled computation when
  called eagerly (and its transpose one more for the backward pass), so its
  recurrence is compiled in both modes; only the layers around it differ.

The gap between the two is what XLA's view of the whole step (fusion across
layers, no dispatch between them) is worth over compiled layers.  The kernels
are module-level ``jax.jit`` functions, compiled on their first call per
input shape and shared by every model; the gradient function is cached per
``apply`` object as in ``common`` (``native.load_apply`` hands out one per
forward pass).
"""

from __future__ import annotations

import functools
from typing import Any, cast

import jax

import native
from native.jax import common
from native.jax.common import Params, TrainState
from native.protocol import Apply, Framework

MODES = {
    "jit": "one jax.jit program per gradient, train step and inference",
    "layerjit": "one jax.jit kernel per layer, loss and update; the step eager",
}
DEFAULT = "jit"
assert tuple(MODES) == native.MODES["jax"]

_loss = jax.jit(common.loss, static_argnums=2)
_update = jax.jit(common.update)
_penalty = jax.jit(common.penalty, static_argnums=1)


@functools.cache
def _layer_grads(apply: Apply) -> Any:
    return jax.value_and_grad(common.objective(apply, _loss, _penalty), has_aux=True)


def _loss_and_grads(
    apply: Apply, params: Params, x: jax.Array, y: jax.Array
) -> tuple[jax.Array, jax.Array, Params]:
    (loss, logits), grads = _layer_grads(apply)(params, x, y)
    return logits, loss, grads


def _inference(apply: Apply, params: Params, x: jax.Array) -> jax.Array:
    return apply(params, x)


@functools.cache
def _layer_step_grads(apply: Apply) -> Any:
    return common.training_grad(
        apply, common.training_objective(apply, _loss, _penalty)
    )


def _train_step(
    apply: Apply, state: TrainState, x: jax.Array, y: jax.Array
) -> TrainState:
    key = common.step_key(state.step)
    grads, updates = _layer_step_grads(apply)(state.params, x, y, key)
    return _update(state, grads, updates)  # type: ignore[no-any-return]


def framework(mode: str) -> Framework:
    """The JAX surface in ``mode``: ``common`` itself for the default."""
    if mode not in MODES:
        raise ValueError(f"unknown JAX mode {mode!r}; known: {', '.join(MODES)}")
    if mode == DEFAULT:
        return cast("Framework", common)
    return native.in_mode(
        cast("Framework", common),
        mode,
        loss_and_grads=_loss_and_grads,
        inference=_inference,
        train_step=_train_step,
    )
