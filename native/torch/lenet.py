"""LeNet in PyTorch operators.

Layouts: x ``(N, 1, 28, 28)``; conv kernels ``(out, in, kh, kw)``; the first
dense kernel ``(120, 400)`` with its inputs in ``C, H, W`` order (its rows were
permuted from Keras' ``H, W, C`` order by ``native.layout``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.protocol import Tap, no_tap
from native.torch.common import Params
from zoo.specs import MODELS

SPEC = MODELS["lenet"]


def apply(params: Params, x: torch.Tensor, tap: Tap = no_tap) -> torch.Tensor:
    h = torch.relu(F.conv2d(x, params["conv1/kernel"], params["conv1/bias"]))
    h = tap("conv1", h)  # (N, 6, 24, 24)
    h = F.avg_pool2d(h, 2)  # (N, 6, 24, 24) -> (N, 6, 12, 12)
    h = tap("pool1", h)
    h = torch.relu(F.conv2d(h, params["conv2/kernel"], params["conv2/bias"]))
    h = tap("conv2", h)  # (N, 16, 10, 10)
    h = F.avg_pool2d(h, 2)  # (N, 16, 10, 10) -> (N, 16, 5, 5)
    h = tap("pool2", h)
    h = h.flatten(1)  # (N, 16, 5, 5) -> (N, 400) in C, H, W order
    h = torch.relu(F.linear(h, params["fc1/kernel"], params["fc1/bias"]))
    h = tap("fc1", h)
    h = torch.relu(F.linear(h, params["fc2/kernel"], params["fc2/bias"]))
    h = tap("fc2", h)
    h = F.linear(h, params["logits/kernel"], params["logits/bias"])
    return tap("logits", h)
