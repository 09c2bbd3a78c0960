"""Feed-forward net 784 -> 128 -> 64 -> 10 in PyTorch operators.

Layouts: x ``(N, 784)``; dense kernels ``(out, in)`` (as ``F.linear`` wants).
"""

from __future__ import annotations

import torch

from native.protocol import Tap, no_tap
from native.torch.common import Params
from native.torch.ops import dense, relu
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["ffn"]


def apply(
    params: Params, x: torch.Tensor, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> torch.Tensor:
    h = relu(dense(x, params, spec, "fc1"))
    h = tap("fc1", h)
    h = relu(dense(h, params, spec, "fc2"))
    h = tap("fc2", h)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
