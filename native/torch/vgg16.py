"""VGG16 for 32x32 images in PyTorch operators.

The block structure and each convolution's padding are read from the spec, so
the Rysia paper's ten-convolution variant (``vgg-rysia``) runs through the
same function.

Layouts: x ``(N, 3, 32, 32)``; conv kernels ``(out, in, 3, 3)``; the first
dense kernel with its inputs in ``C, H, W`` order.
"""

from __future__ import annotations

import torch

from native.protocol import Tap, no_tap
from native.torch.common import Params
from native.torch.ops import conv2d, dense, flatten, max_pool, relu
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["vgg16"]


def apply(
    params: Params, x: torch.Tensor, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> torch.Tensor:
    h = x
    for layer in spec.layers:
        name = layer.name
        if layer.kind == "conv2d":
            # 'same' keeps (H, W); 'valid' trims kernel - 1 off each
            h = relu(conv2d(h, params, spec, name))
        elif layer.kind == "max_pool":
            h = max_pool(h, layer.size)  # (N, C, H, W) -> (N, C, H/2, W/2)
        elif layer.kind == "flatten":
            h = flatten(h)  # (N, C, H, W) -> (N, C*H*W)
        else:
            h = dense(h, params, spec, name)
            h = relu(h) if layer.activation == "relu" else h
        if layer.kind != "flatten":  # see ModelSpec.tapped_layers
            h = tap(name, h)
    return h
