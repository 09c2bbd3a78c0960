"""LeNet in JAX operators.

Layouts: x ``(N, 28, 28, 1)``; conv kernels ``(kh, kw, in, out)``; the first
dense kernel ``(400, 120)`` with its inputs in ``H, W, C`` order, as Keras'
flatten gives them (no permutation needed in NHWC).
"""

from __future__ import annotations

import jax

from native.jax.common import Params
from native.jax.ops import avg_pool, conv2d, dense, flatten, relu
from native.protocol import Tap, no_tap
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["lenet"]


def apply(
    params: Params, x: jax.Array, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> jax.Array:
    h = relu(conv2d(x, params, spec, "conv1"))
    h = tap("conv1", h)  # (N, 24, 24, 6)
    h = avg_pool(h, 2)  # (N, 24, 24, 6) -> (N, 12, 12, 6)
    h = tap("pool1", h)
    h = relu(conv2d(h, params, spec, "conv2"))
    h = tap("conv2", h)  # (N, 10, 10, 16)
    h = avg_pool(h, 2)  # (N, 10, 10, 16) -> (N, 5, 5, 16)
    h = tap("pool2", h)
    h = flatten(h)  # (N, 5, 5, 16) -> (N, 400) in H, W, C order
    h = relu(dense(h, params, spec, "fc1"))
    h = tap("fc1", h)
    h = relu(dense(h, params, spec, "fc2"))
    h = tap("fc2", h)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
