"""VGG16 for 32x32 images in JAX operators.

The block structure and each convolution's padding are read from the spec, so
the Rysia paper's ten-convolution variant (``vgg-rysia``) runs through the
same function.

Layouts: x ``(N, 32, 32, 3)``; conv kernels ``(3, 3, in, out)``; the first
dense kernel with its inputs in ``H, W, C`` order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from native.jax.common import Params
from native.jax.ops import conv2d, max_pool
from native.protocol import Tap, no_tap
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["vgg16"]


def apply(
    params: Params, x: jax.Array, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> jax.Array:
    h = x
    for layer in spec.layers:
        name = layer.name
        if layer.kind == "conv2d":
            # 'same' keeps (H, W); 'valid' trims kernel - 1 off each
            kernel, bias = params[f"{name}/kernel"], params[f"{name}/bias"]
            h = conv2d(h, kernel, bias, layer.padding)
            h = jnp.maximum(h, 0)
        elif layer.kind == "max_pool":
            h = max_pool(h, 2)  # (N, H, W, C) -> (N, H/2, W/2, C)
        elif layer.kind == "flatten":
            h = h.reshape(h.shape[0], -1)  # (N, H, W, C) -> (N, H*W*C)
        else:
            h = h @ params[f"{name}/kernel"] + params[f"{name}/bias"]
            h = jnp.maximum(h, 0) if layer.activation == "relu" else h
        if layer.kind != "flatten":  # see ModelSpec.tapped_layers
            h = tap(name, h)
    return h
