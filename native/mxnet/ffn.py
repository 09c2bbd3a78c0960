"""Feed-forward net 784 -> 128 -> 64 -> 10 in MXNet operators.

Layouts: x ``(N, 784)``; ``FullyConnected`` weights ``(out, in)``.  The same
pass runs imperatively (``mx.nd``) and hybridized (``mx.sym``): ``native.mxnet.ops``
picks the namespace from ``x``.
"""

from __future__ import annotations

from typing import Any

from native.mxnet.common import Params
from native.mxnet.ops import dense, relu
from native.protocol import Tap, no_tap
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["ffn"]


def apply(params: Params, x: Any, spec: ModelSpec = SPEC, tap: Tap = no_tap) -> Any:
    h = relu(dense(x, params, spec, "fc1"))
    h = tap("fc1", h)
    h = relu(dense(h, params, spec, "fc2"))
    h = tap("fc2", h)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
