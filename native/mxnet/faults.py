"""Deliberate mistakes in the MXNet paths, for the fault-sensitivity suite.

Imported only by the worker when a request names a fault, never for timing:
importing registers each mistake beside the correct code it imitates (the
hybridized path uses the same optimizers, so it gets them too).

- ``adam-eps-inside-sqrt``: Keras' Adam with epsilon inside the square root,
  ``w -= m * alpha / sqrt(v + eps)``, where Keras has ``sqrt(v) + eps``.
"""

from __future__ import annotations

import math

from mxnet import nd

from native.mxnet import common
from native.mxnet.common import Params, TrainState


def adam_eps_inside_sqrt(state: TrainState, grads: Params) -> None:
    w = state.workload
    t = state.step + 1
    alpha = w.learning_rate * math.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m[:] = m + (g - m) * (1 - w.beta_1)
        v[:] = v + (g * g - v) * (1 - w.beta_2)
        p[:] = p - m * alpha / nd.sqrt(v + w.epsilon)


common._OPTIMIZERS["adam-eps-inside-sqrt"] = adam_eps_inside_sqrt
