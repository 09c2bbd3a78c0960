"""The building blocks of the JAX models, from ``jax.numpy`` and ``jax.lax``.

Activations are ``(N, H, W, C)`` (or ``(N, features)``), kernels as in Keras.
Every framework's ``ops.py`` offers these functions with the same signatures;
a layer's weights are ``params["<name>/kernel"]`` and ``params["<name>/bias"]``
and its settings (a convolution's padding) come from the spec.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from native.jax.common import Params
from zoo.specs import ModelSpec

_NHWC = ("NHWC", "HWIO", "NHWC")


def dense(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``h @ kernel + bias``; kernel ``(in, out)``."""
    return h @ params[f"{name}/kernel"] + params[f"{name}/bias"]


def conv2d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Stride-1 convolution with the layer's padding (Keras' ``valid`` or
    ``same``); kernel ``(kh, kw, in, out)``."""
    padding = spec.layer(name).padding.upper()
    y = lax.conv_general_dilated(
        h, params[f"{name}/kernel"], (1, 1), padding, dimension_numbers=_NHWC
    )
    return y + params[f"{name}/bias"]


def max_pool(h: jax.Array, size: int) -> jax.Array:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    window = (1, size, size, 1)
    return lax.reduce_window(h, -jnp.inf, lax.max, window, window, "VALID")


def avg_pool(h: jax.Array, size: int) -> jax.Array:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    window = (1, size, size, 1)
    return lax.reduce_window(h, 0.0, lax.add, window, window, "VALID") / (size * size)


def flatten(h: jax.Array) -> jax.Array:
    return h.reshape(h.shape[0], -1)  # (N, H, W, C) -> (N, H*W*C), H, W, C order


def relu(h: jax.Array) -> jax.Array:
    return jnp.maximum(h, 0)
