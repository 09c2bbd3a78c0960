"""Deliberate mistakes in the PyTorch path, for the fault-sensitivity suite.

Imported only by the worker when a request names a fault, never for timing:
importing registers each mistake beside the correct code it imitates.

- ``adam-eps-inside-sqrt``: Keras' Adam with epsilon inside the square root,
  ``w -= m * alpha / sqrt(v + eps)``, where Keras has ``sqrt(v) + eps``.
"""

from __future__ import annotations

import math

import torch

from native.torch import common
from native.torch.common import Params, TrainState


@torch.no_grad()
def adam_eps_inside_sqrt(state: TrainState, grads: Params) -> None:
    w = state.workload
    t = state.step + 1
    alpha = w.learning_rate * math.sqrt(1 - w.beta_2**t) / (1 - w.beta_1**t)
    for name, p in state.params.items():
        g, m, v = grads[name], state.m[name], state.v[name]
        m.add_(g - m, alpha=1 - w.beta_1)
        v.add_(g * g - v, alpha=1 - w.beta_2)
        p.sub_(m * alpha / (v + w.epsilon).sqrt())


common._OPTIMIZERS["adam-eps-inside-sqrt"] = adam_eps_inside_sqrt
