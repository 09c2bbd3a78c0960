"""The building blocks of the TensorFlow models, from ``tf.nn`` operators.

Activations are ``(N, H, W, C)`` (or ``(N, features)``), kernels as in Keras.
Every framework's ``ops.py`` offers these functions with the same signatures;
a layer's weights are ``params["<name>/kernel"]`` and ``params["<name>/bias"]``
and its settings (a convolution's padding) come from the spec.
"""

from __future__ import annotations

import tensorflow as tf

from native.tensorflow.common import Params
from zoo.specs import ModelSpec


def dense(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """``h @ kernel + bias``; kernel ``(in, out)``."""
    h = tf.matmul(h, params[f"{name}/kernel"])
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def conv2d(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Stride-1 convolution with the layer's padding (Keras' ``valid`` or
    ``same``); kernel ``(kh, kw, in, out)``."""
    padding = spec.layer(name).padding.upper()
    h = tf.nn.conv2d(h, params[f"{name}/kernel"], 1, padding)
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def max_pool(h: tf.Tensor, size: int) -> tf.Tensor:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return tf.nn.max_pool2d(h, size, size, "VALID")


def avg_pool(h: tf.Tensor, size: int) -> tf.Tensor:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return tf.nn.avg_pool2d(h, size, size, "VALID")


def flatten(h: tf.Tensor) -> tf.Tensor:
    return tf.reshape(h, (tf.shape(h)[0], -1))  # (N, H, W, C) -> (N, H*W*C)


def relu(h: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(h)
