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

from native import load_apply, objective_of, penalties_of
from native.jax.common import init, penalty
from native.jax.common import loss as loss_of
from zoo.optimizers import plain
from zoo.specs import ModelSpec


def make_step(
    spec: ModelSpec, arrays: Mapping[str, np.ndarray]
) -> Callable[[jax.Array, jax.Array], Any]:
    """``step(x, y)``: one Optax step from ``arrays`` (this framework's layout)
    onwards, returning the new state to wait on."""
    if spec.trains_differently:
        raise ValueError(
            f"{spec.name} trains differently from how it infers (batch "
            "normalization or dropout), which the JAX yardstick's one pass "
            "does not compute"
        )
    w = spec.workload
    if not plain(w):
        raise ValueError(
            f"the idiomatic yardstick writes out plain SGD and Adam only, not "
            f"{w.optimizer} with these options"
        )
    if spec.frozen_names():
        raise ValueError(
            f"{spec.name} has frozen layers, which the yardstick's stock "
            "Optax step would train"
        )
    optimizer = (
        optax.sgd(w.learning_rate)
        if w.optimizer == "sgd"
        else optax.adam(w.learning_rate, b1=w.beta_1, b2=w.beta_2, eps=w.epsilon)
    )
    apply = load_apply("jax", spec)
    goal, penalties = objective_of(apply), penalties_of(apply)

    def loss(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
        total = loss_of(apply(params, x), y, goal)
        if penalties:  # the weight penalties, as the native step adds them
            total = total + penalty(params, penalties)
        return total

    loss_grad = jax.grad(loss)

    @functools.partial(jax.jit, donate_argnums=0)
    def update(state: Any, x: jax.Array, y: jax.Array) -> Any:
        params, opt_state = state
        grads = loss_grad(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    params = init(arrays)
    state = (params, optimizer.init(params))

    def step(x: jax.Array, y: jax.Array) -> Any:
        nonlocal state
        state = update(state, x, y)
        return state

    return step
