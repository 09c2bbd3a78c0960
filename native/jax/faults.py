"""Deliberate mistakes in the JAX path, for the fault-sensitivity suite.

Imported only by the worker when a request names a fault, never for timing:
importing registers each mistake beside the correct code it imitates.

- ``adam-eps-inside-sqrt``: Keras' Adam with epsilon inside the square root,
  ``w -= m * alpha / sqrt(v + eps)``, where Keras has ``sqrt(v) + eps``.
"""

from __future__ import annotations

import jax.numpy as jnp

from native.jax import common
from native.jax.common import Params, TrainState


def adam_eps_inside_sqrt(state: TrainState, grads: Params) -> TrainState:
    w = state.workload
    t = (state.step + 1).astype(jnp.float32)
    alpha = w.learning_rate * jnp.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    m = {k: m + (grads[k] - m) * (1 - w.beta_1) for k, m in state.m.items()}
    v = {k: v + (grads[k] ** 2 - v) * (1 - w.beta_2) for k, v in state.v.items()}
    params = {
        k: p - m[k] * alpha / jnp.sqrt(v[k] + w.epsilon)
        for k, p in state.params.items()
    }
    return TrainState(params, m, v, state.step + 1, w)


common._OPTIMIZERS["adam-eps-inside-sqrt"] = adam_eps_inside_sqrt
