"""The building blocks of the PyTorch models, from ``torch.nn.functional``.

Activations are ``(N, C, H, W)`` (or ``(N, features)``, ``(N, T, F)``),
kernels ``(out, in, ...)`` as ``F.linear`` and ``F.conv2d`` want them.  Every
framework's ``ops.py`` offers these functions with the same signatures
(``native.protocol.Ops``); ``native.compose`` walks a spec over them.  A
layer's weights are ``params["<name>/kernel"]`` and ``params["<name>/bias"]``
and its settings (strides, padding, ``return_sequences``) come from the spec.

PyTorch pads both sides of an axis alike, Keras' ``same`` puts an odd extra
position after (``zoo.specs.same_padding``): where the two differ, the input
is padded explicitly (``F.pad``) and the window then runs unpadded.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from native.torch.common import Params
from zoo.specs import Layer, ModelSpec, padding_of

Pads = tuple[int, int, int, int]  # F.pad's order: left, right, top, bottom


def _pads(layer: Layer, h: torch.Tensor) -> Pads:
    top, bottom = padding_of(layer, h.shape[2])
    left, right = padding_of(layer, h.shape[3])
    return left, right, top, bottom


def _symmetric(pads: Pads) -> tuple[int, int] | None:
    """``(rows, columns)`` padding when both sides of each axis agree."""
    left, right, top, bottom = pads
    return (top, left) if (left, top) == (right, bottom) else None


def dense(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """``h @ kernel.T + bias`` over the last axis; kernel ``(out, in)``."""
    return F.linear(h, params[f"{name}/kernel"], params[f"{name}/bias"])


def conv2d(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """Convolution with the layer's strides and padding (Keras' ``valid`` or
    ``same``); kernel ``(out, in, kh, kw)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], params[f"{name}/bias"]
    pads = _pads(layer, h)
    both = _symmetric(pads)
    if both is None:
        h, both = F.pad(h, pads), (0, 0)
    return F.conv2d(h, kernel, bias, stride=layer.stride, padding=both)


def max_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The largest value of each window, with the layer's strides and padding
    (padded with -inf, which never wins)."""
    layer = spec.layer(name)
    pads = _pads(layer, h)
    if any(pads):
        h = F.pad(h, pads, value=float("-inf"))
    return F.max_pool2d(h, layer.size, layer.stride)


def avg_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The mean of each window over its positions inside the input: padded
    windows are divided by how many of their positions are real, as Keras
    does."""
    layer = spec.layer(name)
    pads = _pads(layer, h)
    if not any(pads):
        return F.avg_pool2d(h, layer.size, layer.stride)
    sums = F.avg_pool2d(F.pad(h, pads), layer.size, layer.stride, divisor_override=1)
    ones = F.pad(h.new_ones((1, 1, *h.shape[2:])), pads)
    return sums / F.avg_pool2d(ones, layer.size, layer.stride, divisor_override=1)


def flatten(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    return h.flatten(1)  # (N, C, H, W) -> (N, C*H*W), C, H, W order


def lstm(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates.  The input projection is done step by step,
    as Keras does: one projection of all steps up front measured no faster
    here, and slower in JAX.  One bias only (not ``nn.LSTM``'s two).  Kernel
    ``(4u, F)``, recurrent kernel ``(4u, u)``, bias ``(4u,)``."""
    kernel, recurrent = params[f"{name}/kernel"], params[f"{name}/recurrent_kernel"]
    bias = params[f"{name}/bias"]
    layer = spec.layer(name)
    state = h.new_zeros(h.shape[0], layer.size)
    c = h.new_zeros(h.shape[0], layer.size)
    steps = []
    # unbind, not h[:, t]: the backward of unbind stacks the step gradients
    # once, where T slices would each add a full (N, T, F) tensor.
    for x_t in h.unbind(dim=1):  # (N, T, F) -> T x (N, F)
        z = F.linear(x_t, kernel, bias) + F.linear(state, recurrent)
        i, f, g, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        state = torch.sigmoid(o) * torch.tanh(c)
        if layer.return_sequences:
            steps.append(state)
    # every step's hidden state (N, T, u), or the last (N, u)
    return torch.stack(steps, dim=1) if layer.return_sequences else state


def relu(h: torch.Tensor) -> torch.Tensor:
    return torch.relu(h)


def tanh(h: torch.Tensor) -> torch.Tensor:
    return torch.tanh(h)


def sigmoid(h: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(h)


def softmax(h: torch.Tensor) -> torch.Tensor:
    return torch.softmax(h, dim=-1)
