"""The building blocks of the JAX models, from ``jax.numpy`` and ``jax.lax``.

Activations are ``(N, H, W, C)`` (or ``(N, features)``, ``(N, T, F)``),
kernels as in Keras.  Every framework's ``ops.py`` offers these functions with
the same signatures (``native.protocol.Ops``); ``native.compose`` walks a
spec over them.  A layer's weights are ``params["<name>/kernel"]`` and
``params["<name>/bias"]`` and its settings (strides, padding,
``return_sequences``) come from the spec.

Each block computes through a ``jax.jit``-ed kernel of its own that takes only
the arrays it needs (window sizes, strides and padding static).  Inside a
jitted step (mode ``jit``, ``native.jax.common``) the kernels are inlined into
the one program, which is unchanged; called eagerly (mode ``layerjit``,
``native.jax.modes``) each layer's forward pass and backward pass run as
compiled XLA computations of their own.  ``flatten`` is a reshape, left to
run as it is called.

Padding is given to XLA as numbers (``zoo.specs.padding_of``: Keras' ``same``
rule), the same numbers the NCHW frameworks pad with.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from native.jax.common import Params
from zoo.specs import Layer, ModelSpec, padding_of

_NHWC = ("NHWC", "HWIO", "NHWC")
Pads = tuple[tuple[int, int], tuple[int, int]]


def _pads(layer: Layer, h: jax.Array) -> Pads:
    return (padding_of(layer, h.shape[1]), padding_of(layer, h.shape[2]))


@jax.jit
def _dense(h: jax.Array, kernel: jax.Array, bias: jax.Array) -> jax.Array:
    return h @ kernel + bias


def dense(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``h @ kernel + bias`` over the last axis; kernel ``(in, out)``."""
    return _dense(h, params[f"{name}/kernel"], params[f"{name}/bias"])  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("stride", "pads"))
def _conv2d(
    h: jax.Array, kernel: jax.Array, bias: jax.Array, stride: int, pads: Pads
) -> jax.Array:
    strides = (stride, stride)
    y = lax.conv_general_dilated(h, kernel, strides, pads, dimension_numbers=_NHWC)
    return y + bias


def conv2d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Convolution with the layer's strides and padding (Keras' ``valid`` or
    ``same``); kernel ``(kh, kw, in, out)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], params[f"{name}/bias"]
    return _conv2d(h, kernel, bias, layer.stride, _pads(layer, h))  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("size", "stride", "pads"))
def _max_pool(h: jax.Array, size: int, stride: int, pads: Pads) -> jax.Array:
    window, steps = (1, size, size, 1), (1, stride, stride, 1)
    padding = ((0, 0), *pads, (0, 0))
    return lax.reduce_window(h, -jnp.inf, lax.max, window, steps, padding)


@functools.partial(jax.jit, static_argnames=("size", "stride", "pads"))
def _avg_pool(h: jax.Array, size: int, stride: int, pads: Pads) -> jax.Array:
    window, steps = (1, size, size, 1), (1, stride, stride, 1)
    padding = ((0, 0), *pads, (0, 0))
    sums = lax.reduce_window(h, 0.0, lax.add, window, steps, padding)
    if pads == ((0, 0), (0, 0)):
        return sums / (size * size)
    # Keras averages over the window's positions inside the input only.
    ones = jnp.ones((1, *h.shape[1:3], 1), h.dtype)
    return sums / lax.reduce_window(ones, 0.0, lax.add, window, steps, padding)


def max_pool(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The largest value of each window, with the layer's strides and padding."""
    layer = spec.layer(name)
    return _max_pool(h, layer.size, layer.stride, _pads(layer, h))  # type: ignore[no-any-return]


def avg_pool(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The mean of each window over its positions inside the input."""
    layer = spec.layer(name)
    return _avg_pool(h, layer.size, layer.stride, _pads(layer, h))  # type: ignore[no-any-return]


def flatten(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    return h.reshape(h.shape[0], -1)  # (N, H, W, C) -> (N, H*W*C), H, W, C order


@functools.partial(jax.jit, static_argnames="sequences")
def _lstm(
    x: jax.Array,
    kernel: jax.Array,
    recurrent: jax.Array,
    bias: jax.Array,
    sequences: bool,
) -> jax.Array:
    units = recurrent.shape[0]

    def cell(carry: tuple[jax.Array, jax.Array], x_t: jax.Array) -> Any:
        h, c = carry
        i, f, g, o = jnp.split(x_t @ kernel + bias + h @ recurrent, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h if sequences else None

    zeros = jnp.zeros((x.shape[0], units), x.dtype)
    time_major = x.swapaxes(0, 1)  # (N, T, F) -> (T, N, F)
    (h, _), hs = lax.scan(cell, (zeros, zeros), time_major)
    return hs.swapaxes(0, 1) if sequences else h  # (N, T, u) or (N, u)


def lstm(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates, run over time with ``lax.scan``.  The input
    projection is done step by step inside the scan, as Keras does: projecting
    all steps up front measured 40% slower in the forward pass under XLA on
    CPU.  Kernel ``(F, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)``."""
    return _lstm(  # type: ignore[no-any-return]
        h,
        params[f"{name}/kernel"],
        params[f"{name}/recurrent_kernel"],
        params[f"{name}/bias"],
        spec.layer(name).return_sequences,
    )


@jax.jit
def relu(h: jax.Array) -> jax.Array:
    return jnp.maximum(h, 0)


@jax.jit
def tanh(h: jax.Array) -> jax.Array:
    return jnp.tanh(h)


@jax.jit
def sigmoid(h: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(h)


@jax.jit
def softmax(h: jax.Array) -> jax.Array:
    return jax.nn.softmax(h, axis=-1)
