"""LeNet in MXNet operators.

Layouts: x ``(N, 1, 28, 28)``; ``Convolution`` weights ``(out, in, kh, kw)``;
the first dense weight ``(120, 400)`` with its inputs in ``C, H, W`` order
(its rows were permuted from Keras' ``H, W, C`` order by ``native.layout``).
``F`` is ``mx.nd`` (imperative) or ``mx.sym`` (hybridized).
"""

from __future__ import annotations

from typing import Any

from mxnet import nd

from native.mxnet.ops import conv2d, dense, pool
from native.protocol import Tap, no_tap
from zoo.specs import MODELS

SPEC = MODELS["lenet"]


def apply(params: Any, x: Any, F: Any = nd, tap: Tap = no_tap) -> Any:
    h = F.relu(conv2d(F, x, params, SPEC, "conv1"))
    h = tap("conv1", h)  # (N, 6, 24, 24)
    h = pool(F, h, 2, "avg")  # (N, 6, 24, 24) -> (N, 6, 12, 12)
    h = tap("pool1", h)
    h = F.relu(conv2d(F, h, params, SPEC, "conv2"))
    h = tap("conv2", h)  # (N, 16, 10, 10)
    h = pool(F, h, 2, "avg")  # (N, 16, 10, 10) -> (N, 16, 5, 5)
    h = tap("pool2", h)
    h = F.flatten(h)  # (N, 16, 5, 5) -> (N, 400) in C, H, W order
    h = F.relu(dense(F, h, params, SPEC, "fc1"))
    h = tap("fc1", h)
    h = F.relu(dense(F, h, params, SPEC, "fc2"))
    h = tap("fc2", h)
    h = dense(F, h, params, SPEC, "logits")
    return tap("logits", h)
