"""LSTM-128 over (T, 50) sequences, last hidden state -> 2 logits, in JAX.

The cell is written out: ``z = x_t W + h U + b`` split into gates in Keras'
order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o * tanh(c)`` with
sigmoid gates, and run over time with ``lax.scan``.

Layouts: x ``(N, T, F)`` batch-first; kernel ``(F, 4u)``, recurrent kernel
``(u, 4u)``, bias ``(4u,)``, as in Keras.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from native.jax.common import Params
from zoo.specs import MODELS

SPEC = MODELS["lstm"]


def apply(params: Params, x: jax.Array) -> jax.Array:
    recurrent = params["lstm/recurrent_kernel"]
    batch, units = x.shape[0], recurrent.shape[0]
    # The input projection of every time step at once: (N, T, F) -> (N, T, 4u).
    projected = x @ params["lstm/kernel"] + params["lstm/bias"]

    def cell(carry: tuple[jax.Array, jax.Array], z_x: jax.Array) -> Any:
        h, c = carry
        i, f, g, o = jnp.split(z_x + h @ recurrent, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), None

    zeros = jnp.zeros((batch, units), x.dtype)
    (h, _), _ = lax.scan(cell, (zeros, zeros), projected.swapaxes(0, 1))  # time-major
    return h @ params["logits/kernel"] + params["logits/bias"]
