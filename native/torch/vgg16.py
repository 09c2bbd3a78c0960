"""VGG16 for 32x32 images in PyTorch operators.

The block structure is read from the spec, so the Rysia paper's ten-convolution
variant (``vgg-rysia``) runs through the same function.

Layouts: x ``(N, 3, 32, 32)``; conv kernels ``(out, in, 3, 3)``; the first
dense kernel with its inputs in ``C, H, W`` order.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.torch.common import Params
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["vgg16"]


def apply(params: Params, x: torch.Tensor, spec: ModelSpec = SPEC) -> torch.Tensor:
    h = x
    for layer in spec.layers:
        name = layer.name
        if layer.kind == "conv2d":
            h = F.conv2d(h, params[f"{name}/kernel"], params[f"{name}/bias"], padding=1)
            h = torch.relu(h)  # 3x3 'same': padding 1 keeps (H, W)
        elif layer.kind == "max_pool":
            h = F.max_pool2d(h, 2)  # (N, C, H, W) -> (N, C, H/2, W/2)
        elif layer.kind == "flatten":
            h = h.flatten(1)  # (N, C, H, W) -> (N, C*H*W)
        else:
            h = F.linear(h, params[f"{name}/kernel"], params[f"{name}/bias"])
            h = torch.relu(h) if layer.activation == "relu" else h
    return h
