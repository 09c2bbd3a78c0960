"""Feed-forward net 784 -> 128 -> 64 -> 10 in MXNet operators.

Layouts: x ``(N, 784)``; ``FullyConnected`` weights ``(out, in)``.  ``F`` is
``mx.nd`` (imperative) or ``mx.sym`` (hybridized).
"""

from __future__ import annotations

from typing import Any

from mxnet import nd

from native.mxnet.ops import dense
from native.protocol import Tap, no_tap
from zoo.specs import MODELS

SPEC = MODELS["ffn"]


def apply(params: Any, x: Any, F: Any = nd, tap: Tap = no_tap) -> Any:
    h = F.relu(dense(F, x, params, SPEC, "fc1"))
    h = tap("fc1", h)
    h = F.relu(dense(F, h, params, SPEC, "fc2"))
    h = tap("fc2", h)
    h = dense(F, h, params, SPEC, "logits")
    return tap("logits", h)
