"""The idiomatic JAX training step, for the floors benchmark
(``python -m harness floors``): the same forward pass and loss, one
``jax.jit``-compiled step with buffer donation, and Optax's optimizers in
place of the hand-written ones.

It is the yardstick for the native path, not a path itself: ``optax.adam``
places epsilon differently from Keras, so its trajectory is not Keras'.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np
import optax

from native import load_apply
from native.jax.common import init, loss_and_logits, to_input, to_labels
from zoo.specs import ModelSpec


def make_trainer(
    spec: ModelSpec, canonical: Mapping[str, np.ndarray]
) -> tuple[Callable[[np.ndarray, np.ndarray], object], Callable[[object], object]]:
    """``(prepare, step)``: ``prepare(x, y)`` puts a batch on the device and
    ``step(batch)`` runs one Optax step, returning the new state to wait on."""
    w = spec.workload
    optimizer = (
        optax.sgd(w.learning_rate)
        if w.optimizer == "sgd"
        else optax.adam(w.learning_rate, b1=w.beta_1, b2=w.beta_2, eps=w.epsilon)
    )
    loss_grad = jax.grad(
        functools.partial(loss_and_logits, load_apply("jax", spec)), has_aux=True
    )

    @functools.partial(jax.jit, donate_argnums=0)
    def update(state: Any, x: jax.Array, y: jax.Array) -> Any:
        params, opt_state = state
        grads, _ = loss_grad(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params = init(spec, canonical)
    state = (params, optimizer.init(params))

    def prepare(x: np.ndarray, y: np.ndarray) -> object:
        return to_input(x), to_labels(y)

    def step(batch: object) -> object:
        nonlocal state
        state = update(state, *batch)  # type: ignore[misc]
        return state

    return prepare, step
