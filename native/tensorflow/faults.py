"""Deliberate mistakes in the TensorFlow path, for the fault-sensitivity suite.

Imported only by the worker when a request names a fault, never for timing:
importing registers each mistake beside the correct code it imitates.

- ``adam-eps-inside-sqrt``: Keras' Adam with epsilon inside the square root,
  ``w -= m * alpha / sqrt(v + eps)``, where Keras has ``sqrt(v) + eps``.
"""

from __future__ import annotations

import tensorflow as tf

from native.tensorflow import common
from native.tensorflow.common import TrainState


def adam_eps_inside_sqrt(state: TrainState, grads: dict[str, tf.Tensor]) -> None:
    w = state.workload
    t = tf.cast(state.step + 1, tf.float32)
    alpha = w.learning_rate * tf.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m.assign_add((g - m) * (1 - w.beta_1))
        v.assign_add((g * g - v) * (1 - w.beta_2))
        p.assign_sub(m * alpha / tf.sqrt(v + w.epsilon))


common._OPTIMIZERS["adam-eps-inside-sqrt"] = adam_eps_inside_sqrt
