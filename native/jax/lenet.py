"""LeNet in JAX operators.

Layouts: x ``(N, 28, 28, 1)``; conv kernels ``(kh, kw, in, out)``; the first
dense kernel ``(400, 120)`` with its inputs in ``H, W, C`` order, as Keras'
flatten gives them (no permutation needed in NHWC).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from native.jax.common import Params
from native.jax.ops import avg_pool, conv2d
from native.protocol import Tap, no_tap
from zoo.specs import MODELS

SPEC = MODELS["lenet"]


def apply(params: Params, x: jax.Array, tap: Tap = no_tap) -> jax.Array:
    h = jnp.maximum(conv2d(x, params["conv1/kernel"], params["conv1/bias"], "valid"), 0)
    h = tap("conv1", h)  # (N, 24, 24, 6)
    h = avg_pool(h, 2)  # (N, 24, 24, 6) -> (N, 12, 12, 6)
    h = tap("pool1", h)
    h = jnp.maximum(conv2d(h, params["conv2/kernel"], params["conv2/bias"], "valid"), 0)
    h = tap("conv2", h)  # (N, 10, 10, 16)
    h = avg_pool(h, 2)  # (N, 10, 10, 16) -> (N, 5, 5, 16)
    h = tap("pool2", h)
    h = h.reshape(h.shape[0], -1)  # (N, 5, 5, 16) -> (N, 400) in H, W, C order
    h = jnp.maximum(h @ params["fc1/kernel"] + params["fc1/bias"], 0)
    h = tap("fc1", h)
    h = jnp.maximum(h @ params["fc2/kernel"] + params["fc2/bias"], 0)
    h = tap("fc2", h)
    h = h @ params["logits/kernel"] + params["logits/bias"]
    return tap("logits", h)
