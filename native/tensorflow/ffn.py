"""Feed-forward net 784 -> 128 -> 64 -> 10 in TensorFlow operators.

Layouts: x ``(N, 784)``; dense kernels ``(in, out)`` as in Keras.
"""

from __future__ import annotations

import tensorflow as tf

from native.tensorflow.common import Params
from zoo.specs import MODELS

SPEC = MODELS["ffn"]


def apply(params: Params, x: tf.Tensor) -> tf.Tensor:
    h = tf.nn.relu(
        tf.nn.bias_add(tf.matmul(x, params["fc1/kernel"]), params["fc1/bias"])
    )
    h = tf.nn.relu(
        tf.nn.bias_add(tf.matmul(h, params["fc2/kernel"]), params["fc2/bias"])
    )
    return tf.nn.bias_add(tf.matmul(h, params["logits/kernel"]), params["logits/bias"])
