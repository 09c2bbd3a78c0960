"""The building blocks of the PyTorch models, from ``torch.nn.functional``.

Activations are ``(N, C, H, W)`` (or ``(N, features)``), kernels ``(out, in,
...)`` as ``F.linear`` and ``F.conv2d`` want them.  Every framework's
``ops.py`` offers these functions with the same signatures; a layer's weights
are ``params["<name>/kernel"]`` and ``params["<name>/bias"]`` and its settings
(a convolution's padding) come from the spec.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.torch.common import Params
from zoo.specs import ModelSpec


def dense(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """``h @ kernel.T + bias``; kernel ``(out, in)``."""
    return F.linear(h, params[f"{name}/kernel"], params[f"{name}/bias"])


def conv2d(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """Stride-1 convolution with the layer's padding (Keras' ``valid`` or
    ``same``, which ``F.conv2d`` takes by name); kernel ``(out, in, kh, kw)``."""
    kernel, bias = params[f"{name}/kernel"], params[f"{name}/bias"]
    return F.conv2d(h, kernel, bias, padding=spec.layer(name).padding)


def max_pool(h: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return F.max_pool2d(h, size)


def avg_pool(h: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return F.avg_pool2d(h, size)


def flatten(h: torch.Tensor) -> torch.Tensor:
    return h.flatten(1)  # (N, C, H, W) -> (N, C*H*W), C, H, W order


def relu(h: torch.Tensor) -> torch.Tensor:
    return torch.relu(h)
