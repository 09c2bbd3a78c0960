"""The convolution and pooling building blocks, from ``jax.lax``, in NHWC."""

from __future__ import annotations

import jax
from jax import lax

_NHWC = ("NHWC", "HWIO", "NHWC")


def conv2d(x: jax.Array, kernel: jax.Array, bias: jax.Array, padding: str) -> jax.Array:
    """Stride-1 convolution; ``padding`` is Keras' ``valid`` or ``same``."""
    y = lax.conv_general_dilated(
        x, kernel, (1, 1), padding.upper(), dimension_numbers=_NHWC
    )
    return y + bias


def max_pool(x: jax.Array, size: int) -> jax.Array:
    window = (1, size, size, 1)
    return lax.reduce_window(x, -jax.numpy.inf, lax.max, window, window, "VALID")


def avg_pool(x: jax.Array, size: int) -> jax.Array:
    window = (1, size, size, 1)
    return lax.reduce_window(x, 0.0, lax.add, window, window, "VALID") / (size * size)
