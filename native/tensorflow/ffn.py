"""Feed-forward net 784 -> 128 -> 64 -> 10 in TensorFlow operators.

Layouts: x ``(N, 784)``; dense kernels ``(in, out)`` as in Keras.
"""

from __future__ import annotations

import tensorflow as tf

from native.protocol import Tap, no_tap
from native.tensorflow.common import Params
from native.tensorflow.ops import dense, relu
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["ffn"]


def apply(
    params: Params, x: tf.Tensor, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> tf.Tensor:
    h = relu(dense(x, params, spec, "fc1"))
    h = tap("fc1", h)
    h = relu(dense(h, params, spec, "fc2"))
    h = tap("fc2", h)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
