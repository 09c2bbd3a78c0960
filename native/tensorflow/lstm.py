"""LSTM-128 over (T, 50) sequences, last hidden state -> 2 logits, in TensorFlow.

The cell is written out: ``z = x_t W + h U + b`` split into gates in Keras'
order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o * tanh(c)`` with
sigmoid gates, and run over time with ``tf.scan``.  The input projection is
done step by step, as Keras does (measured a few percent faster here than one
projection of all steps up front).

Layouts: x ``(N, T, F)`` batch-first; kernel ``(F, 4u)``, recurrent kernel
``(u, 4u)``, bias ``(4u,)``, as in Keras.
"""

from __future__ import annotations

import tensorflow as tf

from native.protocol import Tap, no_tap
from native.tensorflow.common import Params
from native.tensorflow.ops import dense
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["lstm"]


def apply(
    params: Params, x: tf.Tensor, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> tf.Tensor:
    kernel, recurrent = params["lstm/kernel"], params["lstm/recurrent_kernel"]
    bias = params["lstm/bias"]
    batch, units = tf.shape(x)[0], spec.layer("lstm").size

    def cell(
        carry: tuple[tf.Tensor, tf.Tensor], x_t: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        h, c = carry
        z = tf.nn.bias_add(tf.matmul(x_t, kernel), bias) + tf.matmul(h, recurrent)
        i, f, g, o = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    zeros = tf.zeros((batch, units), x.dtype)
    time_major = tf.transpose(x, (1, 0, 2))  # (N, T, F) -> (T, N, F)
    hs, _ = tf.scan(cell, time_major, initializer=(zeros, zeros))
    h = tap("lstm", hs[-1])  # the last hidden state (N, u)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
