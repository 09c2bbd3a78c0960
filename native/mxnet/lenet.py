"""LeNet in MXNet operators.

Layouts: x ``(N, 1, 28, 28)``; ``Convolution`` weights ``(out, in, kh, kw)``;
the first dense weight ``(120, 400)`` with its inputs in ``C, H, W`` order
(its rows were permuted from Keras' ``H, W, C`` order by ``native.layout``).
The same pass runs imperatively (``mx.nd``) and hybridized (``mx.sym``):
``native.mxnet.ops`` picks the namespace from ``x``.
"""

from __future__ import annotations

from typing import Any

from native.mxnet.common import Params
from native.mxnet.ops import avg_pool, conv2d, dense, flatten, relu
from native.protocol import Tap, no_tap
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["lenet"]


def apply(params: Params, x: Any, spec: ModelSpec = SPEC, tap: Tap = no_tap) -> Any:
    h = relu(conv2d(x, params, spec, "conv1"))
    h = tap("conv1", h)  # (N, 6, 24, 24)
    h = avg_pool(h, 2)  # (N, 6, 24, 24) -> (N, 6, 12, 12)
    h = tap("pool1", h)
    h = relu(conv2d(h, params, spec, "conv2"))
    h = tap("conv2", h)  # (N, 16, 10, 10)
    h = avg_pool(h, 2)  # (N, 16, 10, 10) -> (N, 16, 5, 5)
    h = tap("pool2", h)
    h = flatten(h)  # (N, 16, 5, 5) -> (N, 400) in C, H, W order
    h = relu(dense(h, params, spec, "fc1"))
    h = tap("fc1", h)
    h = relu(dense(h, params, spec, "fc2"))
    h = tap("fc2", h)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
