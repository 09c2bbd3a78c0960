"""The building blocks of the JAX models, from ``jax.numpy`` and ``jax.lax``.

Activations are ``(N, H, W, C)`` (or ``(N, features)``), kernels as in Keras.
Every framework's ``ops.py`` offers these functions with the same signatures;
a layer's weights are ``params["<name>/kernel"]`` and ``params["<name>/bias"]``
and its settings (a convolution's padding) come from the spec.

Each block computes through a ``jax.jit``-ed kernel of its own that takes only
the arrays it needs (window sizes and padding static).  Inside a jitted step
(mode ``jit``, ``native.jax.common``) the kernels are inlined into the one
program, which is unchanged; called eagerly (mode ``layerjit``,
``native.jax.modes``) each layer's forward pass and backward pass run as
compiled XLA computations of their own.  ``flatten`` is a reshape, left to
run as it is called.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from native.jax.common import Params
from zoo.specs import ModelSpec

_NHWC = ("NHWC", "HWIO", "NHWC")


@jax.jit
def _dense(h: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    return h @ kernel + bias


def dense(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``h @ kernel + bias``; kernel ``(in, out)``."""
    return _dense(h, params[f"{name}/kernel"], params[f"{name}/bias"])  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames="padding")
def _conv2d(
    h: jax.Array, kernel: jax.Array, bias: jax.Array, padding: str
) -> jax.Array:
    y = lax.conv_general_dilated(h, kernel, (1, 1), padding, dimension_numbers=_NHWC)
    return y + bias


def conv2d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Stride-1 convolution with the layer's padding (Keras' ``valid`` or
    ``same``); kernel ``(kh, kw, in, out)``."""
    kernel, bias = params[f"{name}/kernel"], params[f"{name}/bias"]
    return _conv2d(h, kernel, bias, spec.layer(name).padding.upper())  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames="size")
def max_pool(h: jax.Array, size: int) -> jax.Array:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    window = (1, size, size, 1)
    return lax.reduce_window(h, -jnp.inf, lax.max, window, window, "VALID")


@functools.partial(jax.jit, static_argnames="size")
def avg_pool(h: jax.Array, size: int) -> jax.Array:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    window = (1, size, size, 1)
    return lax.reduce_window(h, 0.0, lax.add, window, window, "VALID") / (size * size)


def flatten(h: jax.Array) -> jax.Array:
    return h.reshape(h.shape[0], -1)  # (N, H, W, C) -> (N, H*W*C), H, W, C order


@jax.jit
def relu(h: jax.Array) -> jax.Array:
    return jnp.maximum(h, 0)
