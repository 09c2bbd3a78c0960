"""The building blocks of the PyTorch models, from ``torch.nn.functional``.

Activations are ``(N, C, H, W)`` (or ``(N, features)``, ``(N, T, F)``),
kernels ``(out, in, ...)`` as ``F.linear`` and ``F.conv2d`` want them.  Every
framework's ``ops.py`` offers these functions with the same signatures
(``native.protocol.Ops``); ``native.compose`` walks a spec over them.  A
layer's weights are ``params["<name>/kernel"]`` and ``params["<name>/bias"]``
(absent with ``use_bias=False``: ``params.get`` gives None, which ``F.linear``
and the convolutions take as no bias) and its settings (strides, padding,
``return_sequences``) come from the spec.

PyTorch pads both sides of an axis alike, Keras' ``same`` puts an odd extra
position after (``zoo.specs.same_padding``): where the two differ, the input
is padded explicitly (``F.pad``) and the window then runs unpadded.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from native import compose
from native.layout import native_axes
from native.protocol import score_masks, unmasked
from native.torch.common import Params
from zoo.kinds import conv_transpose
from zoo.kinds.adapted import EPSILON
from zoo.kinds.gaussian import dropout_deviation
from zoo.kinds.global_pool import over_features
from zoo.kinds.repeat_vector import INTERLEAVED
from zoo.specs import Layer, ModelSpec, padding_of

Pads = tuple[int, int, int, int]  # F.pad's order: left, right, top, bottom


def _side(layer: Layer, side: int) -> tuple[int, int]:
    """The padding (before, after) ``layer`` puts on an axis of ``side``.
    A ``same`` padding is written out here, not read from ``zoo``: the float64
    references must not share the one place a wrong split could sit in
    (issue 74; JAX's is XLA's, TensorFlow's its own ``SAME``).  PyTorch's
    ``padding="same"`` takes no stride, so: as many outputs as
    ``ceil(side / stride)``, the padding that needs, the odd one after."""
    if layer.options.padding != "same" or layer.mistake:  # a mistake's: as zoo has it
        return padding_of(layer, side)
    outputs = math.ceil(side / layer.options.stride)
    total = max((outputs - 1) * layer.options.stride + layer.options.window - side, 0)
    return total // 2, total - total // 2


def _pads(layer: Layer, h: torch.Tensor) -> Pads:
    top, bottom = _side(layer, h.shape[2])
    left, right = _side(layer, h.shape[3])
    return left, right, top, bottom


def _symmetric(pads: Pads) -> tuple[int, int] | None:
    """``(rows, columns)`` padding when both sides of each axis agree."""
    left, right, top, bottom = pads
    return (top, left) if (left, top) == (right, bottom) else None


def dense(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """``h @ kernel.T + bias`` over the last axis; kernel ``(out, in)``."""
    return F.linear(h, params[f"{name}/kernel"], params.get(f"{name}/bias"))


def time_distributed(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' ``TimeDistributed(Dense)``: the dense block on every step."""
    return dense(h, params, spec, name)


def conv2d(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """Convolution with the layer's strides, padding (Keras' ``valid`` or
    ``same``) and dilation; kernel ``(out, in, kh, kw)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], params.get(f"{name}/bias")
    pads = _pads(layer, h)
    both = _symmetric(pads)
    if both is None:
        h, both = F.pad(h, pads), (0, 0)
    o = layer.options
    return F.conv2d(
        h, kernel, bias, stride=o.stride, padding=both, dilation=o.dilation_rate
    )


def conv2d_transpose(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' ``Conv2DTranspose``: the full scatter of ``conv_transpose2d``
    (no padding), positions ``[start, start + out)`` of each axis kept
    (``zoo.kinds.conv_transpose``), zeros past its end, then the bias;
    kernel ``(in, out, kh, kw)``."""
    layer = spec.layer(name)
    full = F.conv_transpose2d(h, params[f"{name}/kernel"], stride=layer.options.stride)
    pads = []  # F.pad's order, last axis first: negative widths crop
    for axis in (3, 2):
        side = h.shape[axis]
        begin = conv_transpose.start(layer, side)
        end = begin + conv_transpose.side_out(layer, side)
        pads += [-begin, end - full.shape[axis]]
    if any(pads):
        full = F.pad(full, pads)
    bias = params.get(f"{name}/bias")
    return full if bias is None else full + bias.reshape(1, -1, 1, 1)


def _depthwise(
    h: torch.Tensor, kernel: torch.Tensor, bias: Any, layer: Layer
) -> torch.Tensor:
    """Each channel convolved with its own kernels ``(C * m, 1, kh, kw)``
    (a convolution of ``C`` groups), padded as ``conv2d`` pads."""
    pads = _pads(layer, h)
    both = _symmetric(pads)
    if both is None:
        h, both = F.pad(h, pads), (0, 0)
    groups = h.shape[1]
    return F.conv2d(
        h, kernel, bias, stride=layer.options.stride, padding=both, groups=groups
    )


def depthwise_conv2d(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Each channel ``c`` convolved with its ``multiplier`` kernels, output
    channel ``c * m + k``, with the layer's strides and padding; kernel
    ``(C * m, 1, kh, kw)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], params.get(f"{name}/bias")
    return _depthwise(h, kernel, bias, layer)


def separable_conv2d(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """``depthwise_conv2d`` with the ``depthwise_kernel`` (no bias), then the
    ``pointwise_kernel`` ``(filters, C * m, 1, 1)`` as a 1x1 convolution with
    the bias."""
    layer = spec.layer(name)
    mixed = _depthwise(h, params[f"{name}/depthwise_kernel"], None, layer)
    pointwise = params[f"{name}/pointwise_kernel"]
    return F.conv2d(mixed, pointwise, params.get(f"{name}/bias"))


def max_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The largest value of each window, with the layer's strides and padding
    (padded with -inf, which never wins)."""
    layer = spec.layer(name)
    pads = _pads(layer, h)
    if any(pads):
        h = F.pad(h, pads, value=float("-inf"))
    return F.max_pool2d(h, layer.options.pool_size, layer.options.stride)


def avg_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The mean of each window over its positions inside the input: padded
    windows are divided by how many of their positions are real, as Keras
    does."""
    layer = spec.layer(name)
    pads = _pads(layer, h)
    if not any(pads):
        return F.avg_pool2d(h, layer.options.pool_size, layer.options.stride)
    sums = F.avg_pool2d(
        F.pad(h, pads),
        layer.options.pool_size,
        layer.options.stride,
        divisor_override=1,
    )
    ones = F.pad(h.new_ones((1, 1, *h.shape[2:])), pads)
    return sums / F.avg_pool2d(
        ones, layer.options.pool_size, layer.options.stride, divisor_override=1
    )


def flatten(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    if h.ndim == 4:  # Keras' order (native.layout): channels last first
        h = h.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
    return h.flatten(1)  # -> (N, H*W*C), or a sequence's (N, T*F)


def lstm(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates.  The input projection is done step by step,
    as Keras does: one projection of all steps up front measured no faster
    here, and slower in JAX.  One bias only (not ``nn.LSTM``'s two), or none
    with ``use_bias=False``.  Kernel ``(4u, F)``, recurrent kernel ``(4u,
    u)``, bias ``(4u,)``."""
    layer = spec.layer(name)
    return _lstm_over(
        h,
        _weights(params, name),
        layer.options.units,
        layer.options.return_sequences,
        act=_cell_activation(layer.options.activation),
    )


Weights = tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]


def _weights(params: Params, prefix: str) -> Weights:
    """A recurrent layer's kernel, recurrent kernel and bias (None without)
    under ``prefix``: the layer's name, or a bidirectional one's direction."""
    kernel, recurrent = params[f"{prefix}/kernel"], params[f"{prefix}/recurrent_kernel"]
    return kernel, recurrent, params.get(f"{prefix}/bias")


def _lstm_over(
    h: torch.Tensor,
    weights: Weights,
    units: int,
    sequences: bool,
    backward: bool = False,
    *,
    act: Activation = torch.tanh,
) -> torch.Tensor:
    """``lstm``'s recurrence over ``(N, T, F)``, steps ``T-1..0`` when
    ``backward``: every step's hidden state ``(N, T, u)`` in the order read
    with ``sequences``, else the last ``(N, u)``; ``act`` the cell's
    activation (Keras' tanh by default)."""
    kernel, recurrent, bias = weights
    h, inputs, states = unmasked(h)

    def step(x_t: torch.Tensor, state: States) -> States:
        hidden, c = state
        z = _gated(x_t, kernel, inputs, bias) + _gated(hidden, recurrent, states)
        i, f, g, o = z.chunk(4, dim=1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * act(g)
        return torch.sigmoid(o) * act(c), c

    zeros = h.new_zeros(h.shape[0], units)
    return _recur(h, step, (zeros, zeros), sequences, backward)


def _gated(
    v: torch.Tensor,
    w: torch.Tensor,
    masks: torch.Tensor | None,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``F.linear(v, w, bias)``; with ``masks`` (``native.protocol.Masked``:
    one per gate) each gate's block of ``w``'s rows takes ``v`` times its
    own mask."""
    if masks is None:
        return F.linear(v, w, bias)
    blocks = w.chunk(masks.shape[0], dim=0)
    parts = [F.linear(v * masks[g], b) for g, b in enumerate(blocks)]
    out = torch.cat(parts, dim=1)
    return out if bias is None else out + bias


States = tuple[torch.Tensor, ...]  # a recurrence's state: (h,), or (h, c)
Activation = Callable[[torch.Tensor], torch.Tensor]


def _recur(
    h: torch.Tensor,
    step: Callable[[torch.Tensor, States], States],
    state: States,
    sequences: bool,
    backward: bool,
) -> torch.Tensor:
    """``state = step(x_t, state)`` over the steps of ``(N, T, F)`` (``T-1..0``
    when ``backward``): every step's hidden state ``state[0]`` ``(N, T, u)``
    in the order read with ``sequences``, else the last ``(N, u)``."""
    outputs = []
    # unbind, not h[:, t]: the backward of unbind stacks the step gradients
    # once, where T slices would each add a full (N, T, F) tensor.
    steps = h.unbind(dim=1)  # (N, T, F) -> T x (N, F)
    for x_t in steps[::-1] if backward else steps:
        state = step(x_t, state)
        if sequences:
            outputs.append(state[0])
    return torch.stack(outputs, dim=1) if sequences else state[0]


def embedding(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Each token id's row of the table ``(vocab, dim)``: ``(N, T) -> (N, T,
    dim)``."""
    return F.embedding(h, params[f"{name}/embeddings"])


def _pads1d(layer: Layer, h: torch.Tensor) -> tuple[int, int]:
    return _side(layer, h.shape[2])  # of (N, F, T)


def conv1d(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """Convolution over time with the layer's strides, padding (``causal``:
    the window's span less one before) and dilation; kernel ``(out, in,
    k)``.  Sequences are ``(N, T, F)`` between layers in every
    framework, ``(N, F, T)`` inside this one."""
    layer = spec.layer(name)
    h = h.transpose(1, 2)  # (N, T, F) -> (N, F, T)
    before, after = _pads1d(layer, h)
    if before != after:
        h, before = F.pad(h, (before, after)), 0
    kernel, bias = params[f"{name}/kernel"], params.get(f"{name}/bias")
    o = layer.options
    y = F.conv1d(
        h, kernel, bias, stride=o.stride, padding=before, dilation=o.dilation_rate
    )
    return y.transpose(1, 2)  # (N, F, T) -> (N, T, F)


def max_pool1d(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The largest value of each window over time (padded with -inf)."""
    layer = spec.layer(name)
    h = h.transpose(1, 2)  # (N, T, F) -> (N, F, T)
    pads = _pads1d(layer, h)
    if any(pads):
        h = F.pad(h, pads, value=float("-inf"))
    return F.max_pool1d(h, layer.options.pool_size, layer.options.stride).transpose(
        1, 2
    )


def avg_pool1d(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The mean of each window over its positions inside the sequence."""
    layer = spec.layer(name)
    h = h.transpose(1, 2)  # (N, T, F) -> (N, F, T)
    pads = _pads1d(layer, h)
    if not any(pads):
        return F.avg_pool1d(h, layer.options.pool_size, layer.options.stride).transpose(
            1, 2
        )
    size, stride = layer.options.pool_size, layer.options.stride
    sums = F.avg_pool1d(F.pad(h, pads), size, stride) * size
    ones = F.pad(h.new_ones((1, 1, h.shape[2])), pads)
    counts = F.avg_pool1d(ones, size, stride) * size
    return (sums / counts).transpose(1, 2)


def global_avg_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The mean over every position: rows and columns of ``(N, C, H, W)``,
    time steps of ``(N, T, F)``, or each step's features (``_pooled``)."""
    return h.mean(dim=(2, 3)) if h.dim() == 4 else _pooled(h, spec, name).mean(dim=1)


def _pooled(h: torch.Tensor, spec: ModelSpec, name: str) -> torch.Tensor:
    """What a global pool reduces over a sequence's steps: ``h`` ``(N, T,
    F)``, or pooled ``channels_first`` with its features first
    (``zoo.kinds.global_pool.over_features``)."""
    return h.transpose(1, 2) if over_features(spec.layer(name)) else h


def gru(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """Keras' GRU (``reset_after=True``) written out: ``x_t W + b_in`` and
    ``h U + b_rec`` each split into gates ``z, r, h`` (Keras' order, not
    ``nn.GRU``'s ``r, z, n``); ``z`` and ``r`` sigmoid of their sums; the
    candidate ``tanh(x_h + r * rec_h)``; ``h = z * h + (1 - z) *
    candidate``.  Kernel ``(3u, F)``, recurrent kernel ``(3u, u)``, bias
    ``(2, 3u)`` (none with ``use_bias=False``)."""
    layer = spec.layer(name)
    return _gru_over(
        h,
        _weights(params, name),
        layer.options.units,
        layer.options.return_sequences,
        act=_cell_activation(layer.options.activation),
    )


def _gru_over(
    h: torch.Tensor,
    weights: Weights,
    units: int,
    sequences: bool,
    backward: bool = False,
    *,
    act: Activation = torch.tanh,
) -> torch.Tensor:
    """``gru``'s recurrence over ``(N, T, F)`` (steps ``T-1..0`` when
    ``backward``), returning its states as ``_lstm_over`` does."""
    kernel, recurrent, bias = weights
    b_in, b_rec = (None, None) if bias is None else (bias[0], bias[1])
    h, inputs, states = unmasked(h)

    def step(x_t: torch.Tensor, state: States) -> States:
        x_z, x_r, x_h = _gated(x_t, kernel, inputs, b_in).chunk(3, dim=1)
        h_z, h_r, h_h = _gated(state[0], recurrent, states, b_rec).chunk(3, dim=1)
        z, r = torch.sigmoid(x_z + h_z), torch.sigmoid(x_r + h_r)
        return (z * state[0] + (1 - z) * act(x_h + r * h_h),)

    return _recur(h, step, (h.new_zeros(h.shape[0], units),), sequences, backward)


def simple_rnn(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' SimpleRNN written out: ``h = tanh(x_t W + h U + b)`` from ``h =
    0``.  Kernel ``(u, F)``, recurrent kernel ``(u, u)``, bias ``(u,)`` (none
    with ``use_bias=False``)."""
    layer = spec.layer(name)
    return _simple_rnn_over(
        h,
        _weights(params, name),
        layer.options.units,
        layer.options.return_sequences,
        act=_cell_activation(layer.options.activation),
    )


def _simple_rnn_over(
    h: torch.Tensor,
    weights: Weights,
    units: int,
    sequences: bool,
    backward: bool = False,
    *,
    act: Activation = torch.tanh,
) -> torch.Tensor:
    """``simple_rnn``'s recurrence over ``(N, T, F)`` (steps ``T-1..0`` when
    ``backward``), returning its states as ``_lstm_over`` does."""
    kernel, recurrent, bias = weights
    h, inputs, states = unmasked(h)

    def step(x_t: torch.Tensor, state: States) -> States:
        x = _gated(x_t, kernel, inputs, bias)
        return (act(x + _gated(state[0], recurrent, states)),)

    return _recur(h, step, (h.new_zeros(h.shape[0], units),), sequences, backward)


def _cell_activation(name: str | None) -> Activation:
    """The activation inside a recurrent cell, where Keras' default has a
    tanh (``zoo.kinds.recurrent.Recurrent``)."""
    return compose.activation_function(sys.modules[__name__], name)


_RECURRENCES = {"lstm": _lstm_over, "gru": _gru_over, "simple_rnn": _simple_rnn_over}


def bidirectional(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' ``Bidirectional`` over its ``lstm``, ``gru`` or ``simple_rnn``
    (``cell``): the ``forward/`` copy over steps ``0..T-1``, the ``backward/``
    copy over ``T-1..0`` (its states put back in time order with
    ``return_sequences``), merged by ``concat`` (forward first, along the
    features), ``sum``, ``ave`` or ``mul``."""
    layer = spec.layer(name)
    over, units = _RECURRENCES[layer.options.cell], layer.options.units
    sequences = layer.options.return_sequences
    act = _cell_activation(layer.options.activation)
    # each direction's own input: a pair in a training step with dropout
    first, second = h if isinstance(h, tuple) else (h, h)
    ahead = over(first, _weights(params, f"{name}/forward"), units, sequences, act=act)
    behind = over(
        second, _weights(params, f"{name}/backward"), units, sequences, True, act=act
    )
    if sequences:  # Keras' flip: the backward copy's step t at position t
        behind = behind.flip(1)
    if layer.options.merge_mode == "concat":
        return torch.cat((ahead, behind), dim=-1)
    if layer.options.merge_mode == "sum":
        return ahead + behind
    if layer.options.merge_mode == "ave":
        return (ahead + behind) / 2
    return ahead * behind  # "mul"


def layer_norm(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Over Keras' last axis (the channels of images, axis 1 of ``(N, C, H,
    W)`` here): ``(h - mean) / sqrt(variance + epsilon) * gamma + beta``, the
    variance without Bessel's correction, as Keras has it."""
    epsilon = spec.layer(name).options.epsilon
    axis, shape = (1, (-1, 1, 1)) if h.dim() == 4 else (-1, (-1,))
    mean = h.mean(dim=axis, keepdim=True)
    variance = (h - mean).square().mean(dim=axis, keepdim=True)
    mean, variance = compose.moved_statistics(
        perturb, spec, name, (mean, variance), h.shape[axis]
    )
    scaled = (h - mean) * torch.rsqrt(variance + epsilon)
    gamma, beta = params[f"{name}/gamma"], params[f"{name}/beta"]
    return scaled * gamma.reshape(shape) + beta.reshape(shape)


def _channels(h: torch.Tensor) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes a batch normalization averages over, and the shape its
    per-channel vectors broadcast as: channels are axis 1 of images ``(N, C,
    H, W)``, the last axis otherwise."""
    if h.dim() == 4:
        return (0, 2, 3), (1, -1, 1, 1)
    return tuple(range(h.dim() - 1)), (-1,)


def _normalized(
    h: Any, stats: tuple[Any, Any], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """As Keras' ``ops.batch_normalization`` writes it: ``h * inv + (beta -
    mean * inv)`` with ``inv = gamma / sqrt(variance + epsilon)`` (no gamma
    or beta: ``scale`` or ``center`` off)."""
    _, shape = _channels(h)
    (mean, variance), epsilon = stats, spec.layer(name).options.epsilon
    inv = torch.rsqrt(variance + epsilon)
    if f"{name}/gamma" in params:
        inv = inv * params[f"{name}/gamma"]
    shift = -mean * inv
    if f"{name}/beta" in params:
        shift = shift + params[f"{name}/beta"]
    return h * inv.reshape(shape) + shift.reshape(shape)


def batch_norm(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Inference: over the channels with the moving statistics."""
    mean, variance = params[f"{name}/moving_mean"], params[f"{name}/moving_variance"]
    return _normalized(h, (mean, variance), params, spec, name)


def batch_norm_train(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Training: with the batch's mean and variance over every axis but the
    channels' (the variance without Bessel's correction, as Keras has it);
    also returns those statistics, detached, for the moving averages."""
    axes, shape = _channels(h)
    mean = h.mean(dim=axes)
    variance = (h - mean.reshape(shape)).square().mean(dim=axes)
    out = _normalized(h, (mean, variance), params, spec, name)
    return out, mean.detach(), variance.detach()


def dropout(
    h: torch.Tensor, spec: ModelSpec, name: str, rng: object, index: int
) -> torch.Tensor:
    """Each element kept with probability ``1 - rate`` and scaled by ``1 /
    (1 - rate)`` (``F.dropout``, PyTorch's own generator); with
    ``shared_axes``, one Bernoulli draw broadcast along them (an image's
    axes in ``(N, C, H, W)``: ``native.layout.native_axes``)."""
    o = spec.layer(name).options
    if not o.shared_axes:
        return F.dropout(h, o.rate, training=True)
    axes = native_axes(o.shared_axes, h.ndim - 1, "oihw")  # this file's layout
    shape = [1 if a in axes else side for a, side in enumerate(h.shape)]
    keep = torch.empty(shape, dtype=h.dtype, device=h.device).bernoulli_(1 - o.rate)
    return h * keep / (1 - o.rate)


def dropout_mask(
    h: torch.Tensor, size: tuple[int, int], rate: float, rng: object, index: int
) -> torch.Tensor:
    """Masks ``(count, N, width)`` of a recurrent layer's cells
    (``native.protocol.Ops.dropout_mask``), PyTorch's own generator."""
    count, width = size
    keep = torch.empty((count, h.shape[0], width), dtype=h.dtype, device=h.device)
    return keep.bernoulli_(1 - rate) / (1 - rate)


def gaussian_noise(
    h: torch.Tensor, spec: ModelSpec, name: str, rng: object, index: int
) -> torch.Tensor:
    """``h + stddev * n``, ``n`` standard normal per value."""
    return h + spec.layer(name).options.stddev * torch.randn_like(h)


def gaussian_dropout(
    h: torch.Tensor, spec: ModelSpec, name: str, rng: object, index: int
) -> torch.Tensor:
    """``h * (1 + s * n)``, ``n`` standard normal per value, ``s = sqrt(rate
    / (1 - rate))``."""
    s = dropout_deviation(spec.layer(name).options)
    return h * (1 + s * torch.randn_like(h))


def attention(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' ``MultiHeadAttention`` over one sequence ``(N, T, F)`` as query,
    key and value: each projected by ``(heads * key_dim, F)`` weights plus
    biases and split into heads ``(N, heads, T, key_dim)``, the query scaled
    by ``1 / sqrt(key_dim)``, softmax over the keys of ``q . k``, the values
    mixed by those weights, projected back by ``(F, heads * key_dim)`` (no
    biases with ``use_bias=False``); in a training step with ``dropout`` the
    weights times their masks (``native.protocol.Masked``)."""
    layer = spec.layer(name)
    h, masks = score_masks(h)
    n, steps, _ = h.shape

    def project(part: str) -> torch.Tensor:
        kernel = params[f"{name}/{part}/kernel"]
        bias = params.get(f"{name}/{part}/bias")
        heads = F.linear(h, kernel, bias).view(
            n, steps, layer.options.num_heads, layer.options.key_dim
        )
        return heads.transpose(1, 2)  # (N, T, h, k) -> (N, h, T, k)

    q, k, v = project("query"), project("key"), project("value")
    q = q / math.sqrt(layer.options.key_dim)  # Keras scales the query
    weights = torch.softmax(q @ k.transpose(2, 3), dim=-1)  # (N, h, T, T)
    if masks is not None:  # (heads, N, T * T), one per head: dropped weights
        weights = weights * masks.transpose(0, 1).reshape(weights.shape)
    mixed = (weights @ v).transpose(1, 2).reshape(n, steps, -1)  # (N, T, h*k)
    kernel = params[f"{name}/attention_output/kernel"]
    return F.linear(mixed, kernel, params.get(f"{name}/attention_output/bias"))


def dot_attention(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Keras' ``Attention`` of ``(query, value)`` or ``(query, value, key)``
    (the key the value when absent), each ``(N, T, F)``: softmax over the
    value's steps of ``query @ key^T`` (unscaled), times the value."""
    query, value = h[0], h[1]
    key = h[2] if len(h) > 2 else value
    weights = torch.softmax(query @ key.transpose(1, 2), dim=-1)  # (N, Tq, Tv)
    return weights @ value  # (N, Tq, Fv)


def add(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The sum of the outputs the layer takes (a residual connection)."""
    total = h[0]
    for other in h[1:]:
        total = total + other
    return total


def subtract(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The first of the two outputs the layer takes minus the second."""
    return h[0] - h[1]


def multiply(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The elementwise product of the outputs the layer takes."""
    total = h[0]
    for other in h[1:]:
        total = total * other
    return total


def average(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The sum of the outputs the layer takes divided by how many there are."""
    total = h[0]
    for other in h[1:]:
        total = total + other
    return total / len(h)


def maximum(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The elementwise largest of the outputs the layer takes."""
    total = h[0]
    for other in h[1:]:
        total = torch.maximum(total, other)
    return total


def minimum(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The elementwise smallest of the outputs the layer takes."""
    total = h[0]
    for other in h[1:]:
        total = torch.minimum(total, other)
    return total


def concatenate(
    h: tuple[torch.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The outputs joined along Keras' last axis: the features of ``(N, F)``
    or ``(N, T, F)``, the channels (axis 1) of images ``(N, C, H, W)``."""
    return torch.cat(h, dim=1 if h[0].dim() == 4 else -1)


def global_max_pool(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The largest value over every position: rows and columns of ``(N, C,
    H, W)``, time steps of ``(N, T, F)`` (``amax``: ties share the gradient,
    as in JAX and TensorFlow), or each step's features (``_pooled``)."""
    return h.amax(dim=(2, 3)) if h.dim() == 4 else _pooled(h, spec, name).amax(dim=1)


def activation(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The identity: ``native.compose`` applies the layer's activation."""
    return h


def prelu(h: torch.Tensor, params: Params, spec: ModelSpec, name: str) -> torch.Tensor:
    """``relu(h) - alpha * relu(-h)`` as Keras writes it; alpha ``(C, H,
    W)`` over images (1 on the shared axes), the input's shape otherwise."""
    return torch.relu(h) - params[f"{name}/alpha"] * torch.relu(-h)


def rescaling(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """``h * scale + offset`` with the layer's two numbers."""
    layer = spec.layer(name)
    return h * layer.options.scale + layer.options.offset


def normalization(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """``(h - mean) / max(sqrt(variance), 1e-7)`` per feature of Keras' last
    axis (the channels, axis 1, of images), with the adapted statistics."""
    _, shape = _channels(h)
    mean = params[f"{name}/mean"].reshape(shape)
    deviation = torch.sqrt(params[f"{name}/variance"]).clamp_min(EPSILON)
    return (h - mean) / deviation.reshape(shape)


def _keras_order(h: torch.Tensor) -> torch.Tensor:
    """Images ``(N, C, H, W) -> (N, H, W, C)``, Keras' element order; other
    ranks are the same in every layout."""
    return h.permute(0, 2, 3, 1) if h.dim() == 4 else h


def _own_order(h: torch.Tensor) -> torch.Tensor:
    """Back from Keras' order: images ``(N, H, W, C) -> (N, C, H, W)``."""
    return h.permute(0, 3, 1, 2) if h.dim() == 4 else h


def reshape(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The values in Keras' element order (images channels last) reshaped to
    ``(N, *target)``; an image result laid out ``(N, C, H, W)`` again."""
    target = spec.layer(name).options.target_shape
    return _own_order(_keras_order(h).reshape(h.shape[0], *target))


def permute(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """The axes after the batch in Keras' order (images channels last)
    reordered as ``target`` (counted from 1); an image back to ``(N, C, H,
    W)``."""
    target = spec.layer(name).options.dims
    return _own_order(_keras_order(h).permute(0, *target))


def repeat_vector(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """``(N, F) -> (N, n, F)``: the row repeated ``n`` times (the mistake
    ``repeat-interleaved``: each feature repeated in place, then reshaped)."""
    layer = spec.layer(name)
    n = layer.options.n
    if layer.mistake == INTERLEAVED:
        return h.repeat_interleave(n, dim=1).reshape(h.shape[0], n, h.shape[1])
    return h.unsqueeze(1).repeat(1, n, 1)


def zero_padding(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Zeros before and after the steps of ``(N, T, F)``, or on the top,
    bottom, left and right of ``(N, C, H, W)``."""
    t = spec.layer(name).options.padding
    if h.dim() == 4:
        return F.pad(h, (t[2], t[3], t[0], t[1]))  # F.pad: last axis first
    return F.pad(h, (0, 0, t[0], t[1]))


def cropping(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Steps cut from the start and end of ``(N, T, F)``, or rows and columns
    from the top, bottom, left and right of ``(N, C, H, W)``."""
    t = spec.layer(name).options.cropping
    if h.dim() == 4:
        rows, cols = h.shape[2], h.shape[3]
        return h[:, :, t[0] : rows - t[1], t[2] : cols - t[3]]
    return h[:, t[0] : h.shape[1] - t[1]]


def upsampling(
    h: torch.Tensor, params: Params, spec: ModelSpec, name: str
) -> torch.Tensor:
    """Nearest: each step of ``(N, T, F)`` repeated ``target[0]`` times, or
    each row of ``(N, C, H, W)`` ``target[0]`` times and each column
    ``target[1]`` times."""
    t = spec.layer(name).options.size
    if h.dim() == 4:
        return h.repeat_interleave(t[0], dim=2).repeat_interleave(t[1], dim=3)
    return h.repeat_interleave(t[0], dim=1)


def gelu(h: torch.Tensor) -> torch.Tensor:
    """Keras' default GELU, the exact one: ``h / 2 * (1 + erf(h / sqrt(2)))``."""
    return 0.5 * h * (1 + torch.erf(h / math.sqrt(2)))


def gelu_tanh(h: torch.Tensor) -> torch.Tensor:
    """GELU by its tanh approximation: only the fault ``gelu-tanh`` asks."""
    inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
    return 0.5 * h * (1 + torch.tanh(inner))


def relu(h: torch.Tensor) -> torch.Tensor:
    return torch.relu(h)


def tanh(h: torch.Tensor) -> torch.Tensor:
    return torch.tanh(h)


def sigmoid(h: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(h)


def softmax(h: torch.Tensor, image: bool) -> torch.Tensor:
    """Over Keras' last axis: the channels, axis 1 of an image ``(N, C, H,
    W)`` here (issue 74's campaign: over the width, the last axis here, it
    turned a one-channel image into ones)."""
    return torch.softmax(h, dim=1 if image else -1)


def elu(h: torch.Tensor, slope: float) -> torch.Tensor:
    """``h`` above 0, ``slope * (exp(h) - 1)`` below (Keras' alpha)."""
    return F.elu(h, slope)


def selu(h: torch.Tensor) -> torch.Tensor:
    """``SELU_SCALE * elu(h)`` with ``SELU_ALPHA`` (``F.selu``'s constants)."""
    return F.selu(h)


def silu(h: torch.Tensor) -> torch.Tensor:
    """``h * sigmoid(h)`` (Keras' swish)."""
    return F.silu(h)


def softplus(h: torch.Tensor) -> torch.Tensor:
    """``log(1 + exp(h))`` as ``logaddexp(h, 0)``: stable at both ends and
    exact above ``F.softplus``' threshold, as Keras' is."""
    return torch.logaddexp(h, h.new_zeros(()))


def leaky_relu(h: torch.Tensor, slope: float) -> torch.Tensor:
    """``h`` above 0, ``slope * h`` at and below (gradient ``slope`` at
    exactly 0, as Keras on TensorFlow and on PyTorch, TensorFlow's, PyTorch's
    and MXNet's own have it; Keras on JAX takes 1 there,
    docs/findings/keras-jax-leaky-relu-at-zero.md)."""
    return torch.where(h > 0, h, h * slope)


def relu6(h: torch.Tensor) -> torch.Tensor:
    """``min(max(h, 0), 6)``."""
    return F.relu6(h)


def outputs(h: torch.Tensor, rank: int) -> torch.Tensor:
    """The model's output in Keras' order: an image's ``(N, C, H, W)`` as
    ``(N, H, W, C)``."""
    return _keras_order(h)


def perturb(h: torch.Tensor, scale: float, seed: int, index: int) -> torch.Tensor:
    """``h * (1 + d)``, ``d`` uniform in ``[-scale, scale]`` from a generator
    seeded by ``seed`` and ``index`` (``native.protocol.Ops.perturb``)."""
    generator = torch.Generator(device=h.device).manual_seed(seed * 100_003 + index)
    u = torch.rand(h.shape, generator=generator, dtype=h.dtype, device=h.device)
    return h * (1 + (2 * u - 1) * scale)


def perturb_gradient(
    w: torch.Tensor, scale: float, seed: int, index: int
) -> torch.Tensor:
    """``w`` in value, its gradient times ``1 + d`` (``d`` as ``perturb``
    draws it; ``native.protocol.Ops.perturb_gradient``)."""
    moved = perturb(w, scale, seed, index)
    return moved - (moved - w).detach()
