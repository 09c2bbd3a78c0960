"""LeNet in TensorFlow operators.

Layouts: x ``(N, 28, 28, 1)``; conv kernels ``(kh, kw, in, out)``; the first
dense kernel ``(400, 120)`` with its inputs in ``H, W, C`` order, as Keras'
flatten gives them (no permutation needed in NHWC).
"""

from __future__ import annotations

import tensorflow as tf

from native.protocol import Tap, no_tap
from native.tensorflow.common import Params
from zoo.specs import MODELS

SPEC = MODELS["lenet"]


def _conv(h: tf.Tensor, params: Params, name: str) -> tf.Tensor:
    h = tf.nn.conv2d(h, params[f"{name}/kernel"], 1, "VALID")
    return tf.nn.relu(tf.nn.bias_add(h, params[f"{name}/bias"]))


def _dense(h: tf.Tensor, params: Params, name: str) -> tf.Tensor:
    return tf.nn.bias_add(
        tf.matmul(h, params[f"{name}/kernel"]), params[f"{name}/bias"]
    )


def apply(params: Params, x: tf.Tensor, tap: Tap = no_tap) -> tf.Tensor:
    h = _conv(x, params, "conv1")
    h = tap("conv1", h)  # (N, 24, 24, 6)
    h = tf.nn.avg_pool2d(h, 2, 2, "VALID")  # (N, 24, 24, 6) -> (N, 12, 12, 6)
    h = tap("pool1", h)
    h = _conv(h, params, "conv2")
    h = tap("conv2", h)  # (N, 10, 10, 16)
    h = tf.nn.avg_pool2d(h, 2, 2, "VALID")  # (N, 10, 10, 16) -> (N, 5, 5, 16)
    h = tap("pool2", h)
    h = tf.reshape(h, (tf.shape(h)[0], -1))  # (N, 5, 5, 16) -> (N, 400), H, W, C
    h = tf.nn.relu(_dense(h, params, "fc1"))
    h = tap("fc1", h)
    h = tf.nn.relu(_dense(h, params, "fc2"))
    h = tap("fc2", h)
    h = _dense(h, params, "logits")
    return tap("logits", h)
