"""Feed-forward net 784 -> 128 -> 64 -> 10 in TensorFlow operators.

Layouts: x ``(N, 784)``; dense kernels ``(in, out)`` as in Keras.
"""

from __future__ import annotations

import tensorflow as tf

from native.protocol import Tap, no_tap
from native.tensorflow.common import Params
from zoo.specs import MODELS

SPEC = MODELS["ffn"]


def apply(params: Params, x: tf.Tensor, tap: Tap = no_tap) -> tf.Tensor:
    h = tf.nn.relu(
        tf.nn.bias_add(tf.matmul(x, params["fc1/kernel"]), params["fc1/bias"])
    )
    h = tap("fc1", h)
    h = tf.nn.relu(
        tf.nn.bias_add(tf.matmul(h, params["fc2/kernel"]), params["fc2/bias"])
    )
    h = tap("fc2", h)
    h = tf.nn.bias_add(tf.matmul(h, params["logits/kernel"]), params["logits/bias"])
    return tap("logits", h)
