"""LSTM-128 over (T, 50) sequences, last hidden state -> 2 logits, in PyTorch.

The cell is written out: ``z = x_t W + h U + b`` split into gates in Keras'
order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o * tanh(c)`` with
sigmoid gates.  The input projection is done step by step, as Keras does: one
projection of all steps up front measured no faster here, and slower in JAX.
One bias only (no second PyTorch-style bias is needed because the cell is not
``nn.LSTM``).

Layouts: x ``(N, T, F)`` batch-first; kernel ``(4u, F)``, recurrent kernel
``(4u, u)``, bias ``(4u,)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.protocol import Tap, no_tap
from native.torch.common import Params
from native.torch.ops import dense
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["lstm"]


def apply(
    params: Params, x: torch.Tensor, spec: ModelSpec = SPEC, tap: Tap = no_tap
) -> torch.Tensor:
    kernel, recurrent = params["lstm/kernel"], params["lstm/recurrent_kernel"]
    bias = params["lstm/bias"]
    batch, units = x.shape[0], spec.layer("lstm").size
    h = x.new_zeros(batch, units)
    c = x.new_zeros(batch, units)
    # unbind, not x[:, t]: the backward of unbind stacks the step gradients
    # once, where T slices would each add a full (N, T, F) tensor.
    for x_t in x.unbind(dim=1):  # (N, T, F) -> T x (N, F)
        z = F.linear(x_t, kernel, bias) + F.linear(h, recurrent)
        i, f, g, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    h = tap("lstm", h)  # the last hidden state (N, u)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
