"""Feed-forward net 784 -> 128 -> 64 -> 10 in PyTorch operators.

Layouts: x ``(N, 784)``; dense kernels ``(out, in)`` (as ``F.linear`` wants).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.protocol import Tap, no_tap
from native.torch.common import Params
from zoo.specs import MODELS

SPEC = MODELS["ffn"]


def apply(params: Params, x: torch.Tensor, tap: Tap = no_tap) -> torch.Tensor:
    h = torch.relu(F.linear(x, params["fc1/kernel"], params["fc1/bias"]))
    h = tap("fc1", h)
    h = torch.relu(F.linear(h, params["fc2/kernel"], params["fc2/bias"]))
    h = tap("fc2", h)
    h = F.linear(h, params["logits/kernel"], params["logits/bias"])
    return tap("logits", h)
