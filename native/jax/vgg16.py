"""VGG16 for 32x32 images in JAX operators.

The block structure and each convolution's padding are read from the spec, so
the Rysia paper's ten-convolution variant (``vgg-rysia``) runs through the
same function.

Layouts: x ``(N, 32, 32, 3)``; conv kernels ``(3, 3, in, out)``; the first
dense kernel with its inputs in ``H, W, C`` order.
"""

from __future__ import annotations

import jax

from native.jax.common import Params
from native.jax.ops import conv2d, dense, flatten, max_pool, relu
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
            h = relu(conv2d(h, params, spec, name))
        elif layer.kind == "max_pool":
            h = max_pool(h, layer.size)  # (N, H, W, C) -> (N, H/2, W/2, C)
        elif layer.kind == "flatten":
            h = flatten(h)  # (N, H, W, C) -> (N, H*W*C)
        else:
            h = dense(h, params, spec, name)
            h = relu(h) if layer.activation == "relu" else h
        if layer.kind != "flatten":  # see ModelSpec.tapped_layers
            h = tap(name, h)
    return h
