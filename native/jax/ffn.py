"""Feed-forward net 784 -> 128 -> 64 -> 10 in JAX operators.

Layouts: x ``(N, 784)``; dense kernels ``(in, out)`` as in Keras.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from native.jax.common import Params
from native.protocol import Tap, no_tap
from zoo.specs import MODELS

SPEC = MODELS["ffn"]


def apply(params: Params, x: jax.Array, tap: Tap = no_tap) -> jax.Array:
    h = jnp.maximum(x @ params["fc1/kernel"] + params["fc1/bias"], 0)
    h = tap("fc1", h)
    h = jnp.maximum(h @ params["fc2/kernel"] + params["fc2/bias"], 0)
    h = tap("fc2", h)
    h = h @ params["logits/kernel"] + params["logits/bias"]
    return tap("logits", h)
