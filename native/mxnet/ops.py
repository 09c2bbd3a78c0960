"""The building blocks of the MXNet models, for either operator namespace.

Activations are ``(N, C, H, W)`` (or ``(N, features)``, ``(N, T, F)``),
weights ``(out, in, ...)`` as ``FullyConnected`` and ``Convolution`` want
them.  Every framework's ``ops.py`` offers these functions with the same
signatures (``native.protocol.Ops``); ``native.compose`` walks a spec over
them.  A layer's weights are ``params["<name>/kernel"]`` and
``params["<name>/bias"]`` and its settings come from the spec.

Each function picks its namespace from its input (``namespace``): ``mx.nd``
for an ``NDArray`` (imperative), ``mx.sym`` for a ``Symbol`` (inside a
hybridized block).  Operator attributes (units, filters, kernel size,
padding) must be static for ``mx.sym``, so they come from the spec's
canonical shapes, never from arrays (padding, needing the input's height
and width, reads a symbol's from the spec: ``zoo.specs.input_of``).

MXNet pads both sides of an axis alike, Keras' ``same`` puts an odd extra
position after (``zoo.specs.same_padding``): where the two differ, the input
is padded explicitly (``pad``) and the window then runs unpadded.
"""

from __future__ import annotations

import functools
import math
import operator
import sys
from typing import Any

import mxnet as mx
import numpy as np

from native import compose
from native.layout import native_axes
from native.protocol import Masked, score_masks, unmasked
from zoo.kinds import conv_transpose
from zoo.kinds.adapted import EPSILON as NORMALIZATION_EPSILON
from zoo.kinds.base import SELU_ALPHA, SELU_SCALE
from zoo.kinds.gaussian import dropout_deviation
from zoo.kinds.global_pool import over_features
from zoo.kinds.repeat_vector import INTERLEAVED
from zoo.specs import (
    Layer,
    ModelSpec,
    input_of,
    layer_inputs,
    masks_of,
    padding_of,
)


def namespace(h: Any) -> Any:
    """``mx.sym`` for a symbol (a hybridized pass), else ``mx.nd``."""
    return mx.sym if isinstance(h, mx.sym.Symbol) else mx.nd


def _pads(h: Any, spec: ModelSpec, name: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for layer ``name``: from the array's own
    shape imperatively; a symbol has none, so a hybridized pass (traced
    once) works it out from the spec's shapes."""
    layer = spec.layer(name)
    if layer.options.padding == "valid" and not layer.mistake:
        return 0, 0, 0, 0
    if isinstance(h, mx.nd.NDArray):
        rows, cols = h.shape[2], h.shape[3]  # (N, C, H, W)
    else:
        rows, cols, _ = input_of(spec, name)
    return (*padding_of(layer, rows), *padding_of(layer, cols))


def _padded(h: Any, pads: tuple[int, int, int, int], value: float) -> Any:
    """``h`` padded explicitly (when the sides differ, or for a pool's
    ``value``); MXNet's ``pad`` takes the 4-D widths axis by axis."""
    top, bottom, left, right = pads
    widths = (0, 0, 0, 0, top, bottom, left, right)
    return namespace(h).pad(h, mode="constant", pad_width=widths, constant_value=value)


def _bias(params: Any, spec: ModelSpec, name: str, part: str = "bias") -> Any:
    """``params["<name>/<part>"]``, or None for a layer without biases
    (``use_bias=False``: the parameter does not exist)."""
    return params[f"{name}/{part}"] if spec.layer(name).options.use_bias else None


def _linear(op: Any, h: Any, weight: Any, bias: Any, **attrs: Any) -> Any:
    """``op(h, weight, bias, **attrs)`` (``FullyConnected``, ``Convolution``),
    or with ``no_bias`` when ``bias`` is None (a symbol must not be handed
    None: MXNet would make a bias variable of its own)."""
    if bias is None:
        return op(h, weight, no_bias=True, **attrs)
    return op(h, weight, bias, **attrs)


def _gated(
    v: Any,
    weight: Any,
    bias: Any,
    masks: Any,
    *,
    gates: int,
    num_hidden: int,
    over_steps: bool = False,
) -> Any:
    """``FullyConnected(v, weight, bias)`` of ``num_hidden`` outputs over the
    last axis; with ``masks`` (``native.protocol.Masked``: ``gates`` of
    them, ``(N, width)``, each the same at every step of a sequence ``v``
    when ``over_steps``) each gate's block of ``weight``'s rows takes ``v``
    times its own mask."""
    F = namespace(v)  # noqa: N806 (MXNet's name for the operator namespace)
    if masks is None:
        return _linear(
            F.FullyConnected, v, weight, bias, num_hidden=num_hidden, flatten=False
        )
    units = num_hidden // gates
    parts = []
    for g in range(gates):
        mask = F.reshape(F.slice_axis(masks, 0, g, g + 1), (-3, -2))  # (N, width)
        if over_steps:
            mask = F.expand_dims(mask, axis=1)
        block = F.slice_axis(weight, 0, g * units, (g + 1) * units)
        parts.append(
            F.FullyConnected(
                F.broadcast_mul(v, mask),
                block,
                no_bias=True,
                num_hidden=units,
                flatten=False,
            )
        )
    out = F.concat(*parts, dim=-1) if gates > 1 else parts[0]
    return out if bias is None else F.broadcast_add(out, bias)


def dense(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``h @ weight.T + bias`` over the last axis; weight ``(out, in)``."""
    _, units = spec.param(f"{name}/kernel").shape  # canonical (in, out)
    return _linear(
        namespace(h).FullyConnected,
        h,
        params[f"{name}/kernel"],
        _bias(params, spec, name),
        num_hidden=units,
        flatten=False,  # (N, T, F) stays a sequence, as in Keras
    )


def time_distributed(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``TimeDistributed(Dense)``: the dense block on every step."""
    return dense(h, params, spec, name)


def conv2d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Convolution with the layer's strides, padding (Keras' ``valid`` or
    ``same``) and dilation; weight ``(out, in, kh, kw)``."""
    k, _, _, filters = spec.param(f"{name}/kernel").shape  # canonical (kh,kw,i,o)
    stride = spec.layer(name).options.stride
    d = spec.layer(name).options.dilation_rate
    top, bottom, left, right = _pads(h, spec, name)
    if (top, left) != (bottom, right):
        h, top, left = _padded(h, (top, bottom, left, right), 0.0), 0, 0
    return _linear(
        namespace(h).Convolution,
        h,
        params[f"{name}/kernel"],
        _bias(params, spec, name),
        kernel=(k, k),
        stride=(stride, stride),
        dilate=(d, d),
        num_filter=filters,
        pad=(top, left),
    )


def _depthwise(h: Any, weight: Any, bias: Any, spec: ModelSpec, name: str) -> Any:
    """Layer ``name``'s depthwise convolution (its window, strides and
    padding, Keras' ``same`` padded as ``conv2d`` pads it): a ``Convolution``
    of one group per input channel, weight ``(C * m, 1, kh, kw)``, output
    channel ``c * m + k``."""
    layer = spec.layer(name)
    role = "depthwise_kernel" if layer.kind == "separable_conv2d" else "kernel"
    k, _, channels, depth = spec.param(f"{name}/{role}").shape  # (kh, kw, C, m)
    top, bottom, left, right = _pads(h, spec, name)
    if (top, left) != (bottom, right):
        h, top, left = _padded(h, (top, bottom, left, right), 0.0), 0, 0
    return _linear(
        namespace(h).Convolution,
        h,
        weight,
        bias,
        kernel=(k, k),
        stride=(layer.options.stride, layer.options.stride),
        num_filter=channels * depth,
        num_group=channels,
        pad=(top, left),
    )


def depthwise_conv2d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Each channel convolved on its own with ``multiplier`` kernels, with the
    layer's strides and padding, plus the bias; weight ``(C * m, 1, kh,
    kw)``."""
    return _depthwise(
        h, params[f"{name}/kernel"], _bias(params, spec, name), spec, name
    )


def separable_conv2d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The depthwise convolution (``depthwise_conv2d`` without a bias), then
    a 1x1 convolution by the pointwise weight ``(filters, C * m, 1, 1)``,
    plus the bias."""
    filters = spec.layer(name).options.filters
    spread = _depthwise(h, params[f"{name}/depthwise_kernel"], None, spec, name)
    return _linear(
        namespace(h).Convolution,
        spread,
        params[f"{name}/pointwise_kernel"],
        _bias(params, spec, name),
        kernel=(1, 1),
        num_filter=filters,
    )


def _dilated(h: Any, stride: int) -> Any:
    """``(N, C, H, W) -> (N, C, H * stride, W * stride)``: each position
    followed by ``stride - 1`` zeros along the rows and the columns."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    if stride == 1:
        return h
    gaps = [F.zeros_like(h)] * (stride - 1)
    h = F.reshape(F.stack(h, *gaps, axis=4), (0, 0, 0, -3))  # (N, C, H, W * s)
    gaps = [F.zeros_like(h)] * (stride - 1)
    return F.reshape(F.stack(h, *gaps, axis=3), (0, 0, -3, 0))  # (N, C, H * s, .)


def conv2d_transpose(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``Conv2DTranspose``, weight ``(in, out, kh, kw)``: a convolution
    with the flipped kernel over the input spread out by the strides
    (``_dilated``), padded so that it gives the full scatter's ``side_out``
    positions from ``start`` (zeros past its end), plus the bias.  Not
    ``Deconvolution``: MXNet 1.9.1's CPU (oneDNN) kernel fails ("could not
    execute a primitive") when its weight's gradient is summed with another,
    as a weight penalty's."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    layer = spec.layer(name)
    k, stride = layer.options.kernel_size, layer.options.stride
    # (H, W): the array's own (N, C, H, W), or the spec's for a symbol
    image = isinstance(h, mx.nd.NDArray)
    sides: tuple[int, ...] = h.shape[2:] if image else input_of(spec, name)[:2]
    pads = []
    for side in sides:
        begin = conv_transpose.start(layer, side)
        out = conv_transpose.side_out(layer, side)
        # the full scatter is the convolution over k - 1 zeros either side
        pads += [k - 1 - begin, out + begin - side * stride]
    kernel = F.transpose(F.flip(params[f"{name}/kernel"], axis=(2, 3)), (1, 0, 2, 3))
    return _linear(
        F.Convolution,
        _padded(_dilated(h, stride), (pads[0], pads[1], pads[2], pads[3]), 0.0),
        kernel,
        _bias(params, spec, name),
        kernel=(k, k),
        num_filter=layer.options.filters,
    )


def _pool(h: Any, spec: ModelSpec, name: str, kind: str) -> Any:
    layer = spec.layer(name)
    size = (layer.options.pool_size, layer.options.pool_size)
    stride = (layer.options.stride, layer.options.stride)
    pads = _pads(h, spec, name)
    if not any(pads):
        return namespace(h).Pooling(h, kernel=size, stride=stride, pool_type=kind)
    if kind == "max":  # -inf padding never wins
        padded = _padded(h, pads, float("-inf"))
        return namespace(h).Pooling(padded, kernel=size, stride=stride, pool_type="max")
    # The mean over the window's positions inside the input, as Keras has it.
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    sums = F.Pooling(_padded(h, pads, 0.0), kernel=size, stride=stride, pool_type="sum")
    ones = _padded(F.ones_like(h), pads, 0.0)
    counts = F.Pooling(ones, kernel=size, stride=stride, pool_type="sum")
    return sums / counts


def max_pool(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The largest value of each window, with the layer's strides and padding."""
    return _pool(h, spec, name, "max")


def avg_pool(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The mean of each window over its positions inside the input."""
    return _pool(h, spec, name, "avg")


def flatten(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    space = namespace(h)
    if len(input_of(spec, name)) == 3:  # images: Keras' order (native.layout)
        h = space.transpose(h, axes=(0, 2, 3, 1))  # (N, C, H, W) -> (N, H, W, C)
    return space.flatten(h)  # -> (N, H*W*C), or a sequence's (N, T*F)


def lstm(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates, run over time with ``contrib.foreach``
    (which also works hybridized, where the sequence length is not known in
    advance).  Weights ``(4u, F)``, ``(4u, u)``, bias ``(4u,)`` (none with
    ``use_bias=False``), as ``FullyConnected`` wants them."""
    return _lstm(h, _cell_weights(params, spec, name, name), spec, name)


def _cell_weights(
    params: Any, spec: ModelSpec, name: str, prefix: str
) -> tuple[Any, Any, Any]:
    """A recurrent cell's kernel, recurrent kernel and bias (None without
    ``use_bias``) under ``<prefix>/``: a layer's own, or one direction's of
    a ``bidirectional`` layer ``name``."""
    kernel, recurrent = params[f"{prefix}/kernel"], params[f"{prefix}/recurrent_kernel"]
    bias = params[f"{prefix}/bias"] if spec.layer(name).options.use_bias else None
    return kernel, recurrent, bias


def _input_masks(layer: Layer) -> int:
    """How many masks a recurrent ``layer``'s cells take on the input (a
    symbol's shape is not known): one per gate with ``recurrent_dropout``,
    else one for every gate (``zoo.kinds.recurrent.cell_masks``)."""
    counts = {mask.side: mask.count for mask in masks_of(layer)}
    return counts.get("input", 1)


def _lstm(h: Any, weights: tuple[Any, Any, Any], spec: ModelSpec, name: str) -> Any:
    """``lstm``'s recurrence over ``h`` with ``weights`` (``_cell_weights``),
    units and ``return_sequences`` from layer ``name``."""
    h, inputs, states_masks = unmasked(h)
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    kernel, recurrent, bias = weights
    layer = spec.layer(name)
    units = layer.options.units
    act = _cell_activation(layer.options.activation)
    takes = _input_masks(layer)

    def cell(x_t: Any, states: list[Any]) -> Any:
        state, c = states
        z = _gated(
            x_t, kernel, bias, inputs, gates=takes, num_hidden=4 * units
        ) + _gated(state, recurrent, None, states_masks, gates=4, num_hidden=4 * units)
        i, f, g, o = F.split(z, num_outputs=4, axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * act(g)
        state = F.sigmoid(o) * act(c)
        return state, [state, c]

    def zeros() -> Any:
        # (N, u) zeros built from the input, so the batch size may be symbolic;
        # one call per state, as foreach wants distinct inputs
        first = F.slice_axis(F.slice_axis(h, 1, 0, 1), 2, 0, 1)  # (N, 1, 1)
        return F.broadcast_axis(
            F.zeros_like(F.reshape(first, (0, 1))), axis=1, size=units
        )

    time_major = F.swapaxes(h, 0, 1)  # (N, T, F) -> (T, N, F)
    steps, (last, _) = F.contrib.foreach(cell, time_major, [zeros(), zeros()])
    # every step's hidden state (N, T, u), or the last (N, u)
    return F.swapaxes(steps, 0, 1) if layer.options.return_sequences else last


def embedding(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Each token id's row of the table ``(vocab, dim)``: ``(N, T) -> (N, T,
    dim)``; the table's gradient is dense."""
    vocab, dim = spec.param(f"{name}/embeddings").shape
    table = params[f"{name}/embeddings"]
    return namespace(h).Embedding(h, table, input_dim=vocab, output_dim=dim)


def _sequence_pads(h: Any, spec: ModelSpec, name: str) -> tuple[int, int]:
    """(before, after) for layer ``name`` over time: from the array's own
    ``(N, T, F)`` shape imperatively, from the spec's for a symbol."""
    steps = h.shape[1] if isinstance(h, mx.nd.NDArray) else input_of(spec, name)[0]
    return padding_of(spec.layer(name), steps)


def _as_rows(h: Any) -> Any:
    """``(N, T, F) -> (N, F, 1, T)``: a sequence as one-row images, so that
    MXNet's 2-D convolution, pooling and ``pad`` (4-D only) serve 1-D layers."""
    return namespace(h).expand_dims(namespace(h).swapaxes(h, 1, 2), axis=2)


def _from_rows(h: Any) -> Any:
    """``(N, F, 1, T) -> (N, T, F)``, ``_as_rows``' inverse."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    return F.swapaxes(F.reshape(h, (0, 0, -3)), 1, 2)


def conv1d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Convolution over time with the layer's strides, padding (``causal``:
    the window's span less one before) and dilation; weight ``(out, in,
    k)``, run as a one-row 2-D convolution (``_as_rows``)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    k, _, filters = spec.param(f"{name}/kernel").shape  # canonical (k, in, out)
    stride = spec.layer(name).options.stride
    d = spec.layer(name).options.dilation_rate
    before, after = _sequence_pads(h, spec, name)
    rows = _as_rows(h)
    if before != after:
        rows, before = _padded(rows, (0, 0, before, after), 0.0), 0
    y = _linear(
        F.Convolution,
        rows,
        F.expand_dims(params[f"{name}/kernel"], axis=2),  # (o, i, k) -> (o, i, 1, k)
        _bias(params, spec, name),
        kernel=(1, k),
        stride=(1, stride),
        dilate=(1, d),
        num_filter=filters,
        pad=(0, before),
    )
    return _from_rows(y)


def _pool1d(h: Any, spec: ModelSpec, name: str, kind: str) -> Any:
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    layer = spec.layer(name)
    size, stride = (1, layer.options.pool_size), (1, layer.options.stride)
    before, after = _sequence_pads(h, spec, name)
    rows = _as_rows(h)
    if not before + after:
        return _from_rows(F.Pooling(rows, kernel=size, stride=stride, pool_type=kind))
    pads = (0, 0, before, after)
    if kind == "max":  # -inf padding never wins
        padded = _padded(rows, pads, float("-inf"))
        return _from_rows(
            F.Pooling(padded, kernel=size, stride=stride, pool_type="max")
        )
    padded = _padded(rows, pads, 0.0)
    sums = F.Pooling(padded, kernel=size, stride=stride, pool_type="sum")
    ones = _padded(F.ones_like(rows), pads, 0.0)
    counts = F.Pooling(ones, kernel=size, stride=stride, pool_type="sum")
    return _from_rows(sums / counts)


def max_pool1d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The largest value of each window over time."""
    return _pool1d(h, spec, name, "max")


def avg_pool1d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The mean of each window over its positions inside the sequence."""
    return _pool1d(h, spec, name, "avg")


def global_avg_pool(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The mean over every position: rows and columns of ``(N, C, H, W)``,
    time steps of ``(N, T, F)`` (which of the two: from the spec, as a
    symbol has no shape), or each step's features (``_pooled``)."""
    images = len(input_of(spec, name)) == 3
    return namespace(h).mean(_pooled(h, spec, name), axis=(2, 3) if images else 1)


def _pooled(h: Any, spec: ModelSpec, name: str) -> Any:
    """What a global pool reduces over a sequence's steps: ``h`` ``(N, T,
    F)``, or pooled ``channels_first`` with its features first
    (``zoo.kinds.global_pool.over_features``)."""
    if over_features(spec.layer(name)):
        return namespace(h).transpose(h, axes=(0, 2, 1))
    return h


def gru(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' GRU (``reset_after=True``) written out: ``x_t W + b_in`` and
    ``h U + b_rec`` each split into gates ``z, r, h``; ``z`` and ``r``
    sigmoid of their sums; the candidate ``tanh(x_h + r * rec_h)``; ``h = z *
    h + (1 - z) * candidate``, unrolled over the sequence's steps (known from
    the array, or the spec for a symbol).  Not ``contrib.foreach``: MXNet
    1.9.1's cached graph of two stacked GRU loops after the padded 1-D
    convolutions of ``conv1d-gru`` computed wrong logits now and then, or
    crashed (docs/testing.md).  Weights ``(3u, F)``, ``(3u, u)``, bias ``(2,
    3u)`` (none with ``use_bias=False``)."""
    return _gru(h, _cell_weights(params, spec, name, name), spec, name)


def _gru(h: Any, weights: tuple[Any, Any, Any], spec: ModelSpec, name: str) -> Any:
    """``gru``'s recurrence over ``h`` with ``weights`` (``_cell_weights``),
    units and ``return_sequences`` from layer ``name``."""
    h, in_masks, state_masks = unmasked(h)
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    kernel, recurrent, bias = weights
    layer = spec.layer(name)
    units = layer.options.units
    act = _cell_activation(layer.options.activation)
    takes = _input_masks(layer)
    steps = h.shape[1] if isinstance(h, mx.nd.NDArray) else input_of(spec, name)[0]
    # (2, 3u) -> the input bias and the recurrent bias, each (3u,); none without
    input_bias, recurrent_bias = (
        (None, None)
        if bias is None
        else (F.reshape(F.slice_axis(bias, 0, row, row + 1), (-1,)) for row in (0, 1))
    )
    # every step's gate inputs at once: (N, T, F) -> (N, T, 3u), split by step
    inputs = _gated(
        h,
        kernel,
        input_bias,
        in_masks,
        gates=takes,
        num_hidden=3 * units,
        over_steps=True,
    )
    per_step = F.split(inputs, num_outputs=steps, axis=1, squeeze_axis=True)
    if steps == 1:
        per_step = [per_step]
    first = F.slice_axis(F.slice_axis(h, 1, 0, 1), 2, 0, 1)  # (N, 1, 1)
    state = F.broadcast_axis(F.zeros_like(F.reshape(first, (0, 1))), axis=1, size=units)
    states = []
    for x_t in per_step:
        x_z, x_r, x_h = F.split(x_t, num_outputs=3, axis=1)
        h_z, h_r, h_h = F.split(
            _gated(
                state,
                recurrent,
                recurrent_bias,
                state_masks,
                gates=3,
                num_hidden=3 * units,
            ),
            num_outputs=3,
            axis=1,
        )
        z, r = F.sigmoid(x_z + h_z), F.sigmoid(x_r + h_r)
        state = z * state + (1 - z) * act(x_h + r * h_h)
        states.append(state)
    # every step's hidden state (N, T, u), or the last (N, u)
    return F.stack(*states, axis=1) if layer.options.return_sequences else state


def simple_rnn(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``SimpleRNN``: ``h = tanh(x_t W + b + h U)`` from zeros,
    unrolled over the sequence's steps as ``gru`` is.  Weights ``(u, F)``,
    ``(u, u)``, bias ``(u,)`` (none with ``use_bias=False``)."""
    return _simple_rnn(h, _cell_weights(params, spec, name, name), spec, name)


def _simple_rnn(
    h: Any, weights: tuple[Any, Any, Any], spec: ModelSpec, name: str
) -> Any:
    """``simple_rnn``'s recurrence over ``h`` with ``weights``
    (``_cell_weights``), units and ``return_sequences`` from layer ``name``."""
    h, in_masks, state_masks = unmasked(h)
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    kernel, recurrent, bias = weights
    layer = spec.layer(name)
    units = layer.options.units
    act = _cell_activation(layer.options.activation)
    steps = h.shape[1] if isinstance(h, mx.nd.NDArray) else input_of(spec, name)[0]
    # every step's input term at once: (N, T, F) -> (N, T, u), split by step
    inputs = _gated(
        h, kernel, bias, in_masks, gates=1, num_hidden=units, over_steps=True
    )
    per_step = F.split(inputs, num_outputs=steps, axis=1, squeeze_axis=True)
    if steps == 1:
        per_step = [per_step]
    first = F.slice_axis(F.slice_axis(h, 1, 0, 1), 2, 0, 1)  # (N, 1, 1)
    state = F.broadcast_axis(F.zeros_like(F.reshape(first, (0, 1))), axis=1, size=units)
    states = []
    for x_t in per_step:
        state = act(
            x_t + _gated(state, recurrent, None, state_masks, gates=1, num_hidden=units)
        )
        states.append(state)
    # every step's hidden state (N, T, u), or the last (N, u)
    return F.stack(*states, axis=1) if layer.options.return_sequences else state


def _cell_activation(name: str | None) -> Any:
    """The activation inside a recurrent cell, where Keras' default has a
    tanh (``zoo.kinds.recurrent.Recurrent``)."""
    return compose.activation_function(sys.modules[__name__], name)


# The recurrence each ``bidirectional`` cell runs.
_CELLS = {"lstm": _lstm, "gru": _gru, "simple_rnn": _simple_rnn}


def bidirectional(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``Bidirectional``: the layer's ``cell`` (``_CELLS``) once over
    ``h`` with the ``forward/`` weights and once over ``h`` reversed in time
    with the ``backward/`` ones (its steps put back in time order with
    ``return_sequences``), merged by ``merge``: ``concat`` along the
    features, ``sum``, ``ave`` or ``mul``."""
    # each direction's own input: a pair in a training step with dropout
    first, second = h if isinstance(h, tuple) else (h, h)
    sequence, inputs, states = unmasked(second)  # read from the last step
    F = namespace(sequence)  # noqa: N806 (MXNet's name for the operator namespace)
    second = Masked(F.reverse(sequence, axis=1), inputs, states)
    layer = spec.layer(name)
    run = _CELLS[layer.options.cell]
    forward = run(
        first, _cell_weights(params, spec, name, f"{name}/forward"), spec, name
    )
    backward = run(
        second,
        _cell_weights(params, spec, name, f"{name}/backward"),
        spec,
        name,
    )
    if layer.options.return_sequences:
        backward = F.reverse(backward, axis=1)
    if layer.options.merge_mode == "concat":
        return F.concat(forward, backward, dim=-1)
    if layer.options.merge_mode == "sum":
        return forward + backward
    if layer.options.merge_mode == "ave":
        return (forward + backward) / 2
    return forward * backward


def dot_attention(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``Attention``: a softmax over the key's steps of ``query @
    key.T`` (no scaling; the key is the value when not given), times the
    value: ``(N, Tq, F), (N, Tv, Fv) -> (N, Tq, Fv)``."""
    F = namespace(h[0])  # noqa: N806 (MXNet's name for the operator namespace)
    query, value = h[0], h[1]
    key = h[2] if len(h) == 3 else value
    weights = F.softmax(F.batch_dot(query, key, transpose_b=True), axis=-1)
    return F.batch_dot(weights, value)


def layer_norm(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Over Keras' last axis (the channels of images, axis 1 of ``(N, C, H,
    W)`` here): ``(h - mean) / sqrt(variance + epsilon) * gamma + beta``, the
    variance without Bessel's correction, as Keras has it."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    epsilon = spec.layer(name).options.epsilon
    image = len(input_of(spec, name)) == 3  # from the spec: a symbol has no shape
    axis = 1 if image else -1
    centered = F.broadcast_sub(h, F.mean(h, axis=axis, keepdims=True))
    variance = F.mean(F.square(centered), axis=axis, keepdims=True)
    scaled = F.broadcast_mul(centered, F.rsqrt(variance + epsilon))
    gamma, beta = params[f"{name}/gamma"], params[f"{name}/beta"]
    if image:
        gamma, beta = F.reshape(gamma, (1, -1, 1, 1)), F.reshape(beta, (1, -1, 1, 1))
    return F.broadcast_add(F.broadcast_mul(scaled, gamma), beta)


def _channels(spec: ModelSpec, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The axes a batch normalization averages over, and the shape its
    per-channel vectors broadcast as: channels are axis 1 of images ``(N, C,
    H, W)``, the last axis otherwise (from the spec: a symbol has no shape)."""
    rank = len(input_of(spec, name)) + 1
    if rank == 4:
        return (0, 2, 3), (1, -1, 1, 1)
    return tuple(range(rank - 1)), (1,) * (rank - 1) + (-1,)


def _normalized(
    h: Any, stats: tuple[Any, Any], params: Any, spec: ModelSpec, name: str
) -> Any:
    """As Keras' ``ops.batch_normalization`` writes it: ``h * inv + (beta -
    mean * inv)`` with ``inv = gamma / sqrt(variance + epsilon)`` (no gamma
    or beta: ``scale`` or ``center`` off)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    _, shape = _channels(spec, name)
    (mean, variance), epsilon = stats, spec.layer(name).options.epsilon
    inv = F.rsqrt(variance + epsilon)
    if f"{name}/gamma" in params:
        inv = inv * params[f"{name}/gamma"]
    shift = -mean * inv
    if f"{name}/beta" in params:
        shift = shift + params[f"{name}/beta"]
    scaled = F.broadcast_mul(h, F.reshape(inv, shape))
    return F.broadcast_add(scaled, F.reshape(shift, shape))


def batch_norm(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Inference: over the channels with the moving statistics."""
    mean, variance = params[f"{name}/moving_mean"], params[f"{name}/moving_variance"]
    return _normalized(h, (mean, variance), params, spec, name)


def batch_norm_train(
    h: Any, params: Any, spec: ModelSpec, name: str
) -> tuple[Any, Any, Any]:
    """Training: with the batch's mean and variance over every axis but the
    channels' (the variance without Bessel's correction, as Keras has it);
    also returns those statistics for the moving averages."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    axes, shape = _channels(spec, name)
    mean = F.mean(h, axis=axes)
    centered = F.broadcast_sub(h, F.reshape(mean, shape))
    variance = F.mean(F.square(centered), axis=axes)
    out = _normalized(h, (mean, variance), params, spec, name)
    return out, F.stop_gradient(mean), F.stop_gradient(variance)


def dropout(h: Any, spec: ModelSpec, name: str, rng: Any, index: int) -> Any:
    """Each element kept with probability ``1 - rate`` and scaled by ``1 /
    (1 - rate)`` (``Dropout`` in mode ``always``: whether or not autograd
    records, MXNet's own random state); ``Dropout``'s ``axes`` share one
    draw along the layer's ``shared_axes`` (an image's in ``(N, C, H, W)``:
    ``native.layout.native_axes``; the rank from the array imperatively,
    from the spec for a symbol, which has none)."""
    o = spec.layer(name).options
    axes: tuple[int, ...] = ()
    if o.shared_axes:
        plain = isinstance(h, mx.nd.NDArray)
        rank = h.ndim - 1 if plain else len(input_of(spec, name))
        axes = native_axes(o.shared_axes, rank, "oihw")
    return namespace(h).Dropout(h, p=o.rate, mode="always", axes=axes)


def dropout_mask(
    h: Any, size: tuple[int, int], rate: float, rng: Any, index: int
) -> Any:
    """Masks ``(count, N, width)`` of a recurrent layer's cells
    (``native.protocol.Ops.dropout_mask``): ``Dropout`` in mode ``always`` of
    ones shaped from the sequence ``h`` (a symbol's batch is not known),
    MXNet's own random state."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    count, width = size
    first = F.slice_axis(F.slice_axis(h, 1, 0, 1), 2, 0, 1)  # (N, 1, 1)
    ones = F.ones_like(F.reshape(first, (1, -1, 1)))  # (1, N, 1)
    ones = F.broadcast_axis(ones, axis=(0, 2), size=(count, width))
    return F.Dropout(ones, p=rate, mode="always")


def gaussian_noise(h: Any, spec: ModelSpec, name: str, rng: Any, index: int) -> Any:
    """``h + n``, ``n`` normal of deviation ``stddev`` per value."""
    stddev = spec.layer(name).options.stddev
    return h + namespace(h).random.normal_like(h, loc=0.0, scale=stddev)


def gaussian_dropout(h: Any, spec: ModelSpec, name: str, rng: Any, index: int) -> Any:
    """``h * n``, ``n`` normal of mean 1 and deviation ``sqrt(rate / (1 -
    rate))`` per value."""
    s = dropout_deviation(spec.layer(name).options)
    return h * namespace(h).random.normal_like(h, loc=1.0, scale=s)


def attention(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Keras' ``MultiHeadAttention`` over one sequence ``(N, T, F)`` as query,
    key and value: each projected by ``(heads * key_dim, F)`` weights plus
    biases (unless ``use_bias=False``) and split into heads, the query scaled
    by ``1 / sqrt(key_dim)``, softmax over the keys of ``q . k``
    (``batch_dot`` over batch x heads), the values mixed by those weights,
    projected back by ``(F, heads * key_dim)``; in a training step with
    ``dropout`` the weights times their masks (``native.protocol.Masked``)."""
    h, masks = score_masks(h)
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    layer = spec.layer(name)
    heads, key_dim = layer.options.num_heads, layer.options.key_dim
    features = spec.param(f"{name}/attention_output/kernel").shape[-1]  # (h, k, F)

    def project(part: str) -> Any:  # (N, T, F) -> (N * heads, T, key_dim)
        y = _linear(
            F.FullyConnected,
            h,
            params[f"{name}/{part}/kernel"],
            _bias(params, spec, name, f"{part}/bias"),
            num_hidden=heads * key_dim,
            flatten=False,
        )
        y = F.transpose(F.reshape(y, (0, 0, heads, key_dim)), (0, 2, 1, 3))
        return F.reshape(y, (-3, 0, 0))  # (N, heads, T, k) -> (N * heads, T, k)

    q, k, v = project("query"), project("key"), project("value")
    q = q / math.sqrt(key_dim)  # Keras scales the query
    weights = F.softmax(F.batch_dot(q, k, transpose_b=True), axis=-1)  # (N*h, T, T)
    if masks is not None:  # (heads, N, T * T), one per head: dropped weights
        weights = weights * F.reshape_like(F.transpose(masks, (1, 0, 2)), weights)
    mixed = F.reshape(F.batch_dot(weights, v), (-4, -1, heads, 0, 0))  # (N,h,T,k)
    mixed = F.reshape(F.transpose(mixed, (0, 2, 1, 3)), (0, 0, -3))  # (N, T, h*k)
    return _linear(
        F.FullyConnected,
        mixed,
        params[f"{name}/attention_output/kernel"],
        _bias(params, spec, name, "attention_output/bias"),
        num_hidden=features,
        flatten=False,
    )


def _broadcasts(h: tuple[Any, ...], spec: ModelSpec, name: str) -> bool:
    """Whether merge ``name`` takes outputs of more than one shape (one with
    a side of 1 broadcast: ``zoo.kinds.merge.broadcast``), which a symbol's
    plain ``+``, ``*``, ``add_n``, ``maximum`` and ``minimum`` refuse: from
    the arrays' own shapes imperatively (no walk over the layers in a timed
    step), from the spec's for a symbol (traced once), which has none."""
    if all(isinstance(t, mx.nd.NDArray) for t in h):
        return len({t.shape for t in h}) > 1
    index = [layer.name for layer in spec.layers].index(name)
    return len(set(layer_inputs(spec)[index][0])) > 1


def _elementwise(
    h: tuple[Any, ...], spec: ModelSpec, name: str, same: Any, broadcast: str
) -> Any:
    """``h`` combined in order by ``same`` (one shape), or by MXNet's
    ``broadcast`` operator where the shapes differ."""
    if _broadcasts(h, spec, name):
        same = getattr(namespace(h[0]), broadcast)
    return functools.reduce(same, h)


def add(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """The sum of the outputs the layer takes (a residual connection)."""
    if _broadcasts(h, spec, name):
        return _elementwise(h, spec, name, operator.add, "broadcast_add")
    return namespace(h[0]).add_n(*h)


def subtract(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """The first output the layer takes minus the second."""
    return _elementwise(h, spec, name, operator.sub, "broadcast_sub")


def multiply(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """The elementwise product of the outputs the layer takes, in order."""
    return _elementwise(h, spec, name, operator.mul, "broadcast_mul")


def average(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """Their sum, added in order as Keras adds them, over their count."""
    return _elementwise(h, spec, name, operator.add, "broadcast_add") / len(h)


def maximum(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """The elementwise largest of the outputs the layer takes."""
    same = namespace(h[0]).maximum
    return _elementwise(h, spec, name, same, "broadcast_maximum")


def minimum(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """The elementwise smallest of the outputs the layer takes."""
    same = namespace(h[0]).minimum
    return _elementwise(h, spec, name, same, "broadcast_minimum")


def concatenate(h: tuple[Any, ...], params: Any, spec: ModelSpec, name: str) -> Any:
    """Joined along Keras' last axis: the channels, axis 1 of ``(N, C, H,
    W)``; the last axis of rows and sequences (the rank from the spec)."""
    rank = len(input_of(spec, name)) + 1
    return namespace(h[0]).concat(*h, dim=1 if rank == 4 else rank - 1)


def global_max_pool(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The largest value over every position: rows and columns of ``(N, C,
    H, W)``, time steps of ``(N, T, F)``; its gradient shared equally by the
    positions that tie for it, as ``jnp.max``, ``tf.reduce_max`` and
    ``torch.amax`` share it (MXNet's ``max`` gives each the whole: an
    upsampling before it makes ties).  The value is ``max``'s own, plus an
    exact zero that carries the shared gradient.  Over each step's features
    where pooled ``channels_first`` (``_pooled``)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    h = _pooled(h, spec, name)
    axes = (2, 3) if len(input_of(spec, name)) == 3 else 1
    ties = F.broadcast_equal(h, F.max(h, axis=axes, keepdims=True))  # no gradient
    share = F.broadcast_div(ties, F.sum(ties, axis=axes, keepdims=True))
    zero = F.sum((h - F.stop_gradient(h)) * share, axis=axes)
    return F.stop_gradient(F.max(h, axis=axes)) + zero


def activation(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The identity: ``native.compose`` applies the layer's activation."""
    return h


def prelu(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """As Keras' PReLU: ``relu(h) - alpha * relu(-h)``, ``alpha`` broadcast
    over the shared axes (an image's ``(C, H, W)``, ``native.layout``)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    alpha = F.expand_dims(params[f"{name}/alpha"], axis=0)  # the batch axis
    return F.relu(h) - F.broadcast_mul(alpha, F.relu(-h))


def rescaling(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``h * scale + offset``."""
    layer = spec.layer(name)
    return h * layer.options.scale + layer.options.offset


def normalization(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``(h - mean) / max(sqrt(variance), 1e-7)`` over the last axis (the
    channels of an image), as Keras' ``Normalization``."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    _, shape = _channels(spec, name)
    mean = F.reshape(params[f"{name}/mean"], shape)
    variance = F.reshape(params[f"{name}/variance"], shape)
    deviation = F.maximum(F.sqrt(variance), NORMALIZATION_EPSILON)
    return F.broadcast_div(F.broadcast_sub(h, mean), deviation)


def _channels_last(h: Any, spec: ModelSpec, name: str) -> Any:
    """``h`` in Keras' element order: an image ``(N, C, H, W) -> (N, H, W,
    C)``, anything else as it is (the rank from the spec)."""
    if len(input_of(spec, name)) == 3:
        return namespace(h).transpose(h, axes=(0, 2, 3, 1))
    return h


def _channels_first(h: Any, rank: int) -> Any:
    """``_channels_last``' inverse for a result of ``rank`` axes per example:
    an image ``(N, H, W, C) -> (N, C, H, W)``."""
    return namespace(h).transpose(h, axes=(0, 3, 1, 2)) if rank == 3 else h


def reshape(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """To ``target`` (one side may be -1) in Keras' element order."""
    target = spec.layer(name).options.target_shape
    moved = namespace(h).reshape(_channels_last(h, spec, name), (0, *target))
    return _channels_first(moved, len(target))


def permute(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The axes after the batch in ``target``'s order (from 1), in Keras'
    element order."""
    target = spec.layer(name).options.dims
    moved = namespace(h).transpose(_channels_last(h, spec, name), (0, *target))
    return _channels_first(moved, len(target))


def repeat_vector(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``(N, F) -> (N, n, F)``: the row repeated ``n`` times (the mistake
    ``repeat-interleaved``: each feature repeated in place, then reshaped)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    layer = spec.layer(name)
    n = layer.options.n
    if layer.mistake == INTERLEAVED:
        return F.reshape(F.repeat(h, repeats=n, axis=1), (0, n, -1))
    return F.repeat(F.expand_dims(h, axis=1), repeats=n, axis=1)


def _extent_axes(spec: ModelSpec, name: str) -> tuple[int, ...]:
    """The axes a border or upsampling layer changes: rows and columns of
    ``(N, C, H, W)``, the steps of ``(N, T, F)``."""
    return (2, 3) if len(input_of(spec, name)) == 3 else (1,)


def zero_padding(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Zeros added: ``target`` (before, after) steps, or (top, bottom, left,
    right) of an image; a sequence padded as one-row images (``_as_rows``)."""
    target = spec.layer(name).options.padding
    if _extent_axes(spec, name) == (1,):
        before, after = target
        return _from_rows(_padded(_as_rows(h), (0, 0, before, after), 0.0))
    top, bottom, left, right = target
    return _padded(h, (top, bottom, left, right), 0.0)


def cropping(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Values cut away: ``target`` (before, after) steps, or (top, bottom,
    left, right) of an image (ends counted back from each axis' end)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    target = spec.layer(name).options.cropping
    for i, axis in enumerate(_extent_axes(spec, name)):
        before, after = target[2 * i], target[2 * i + 1]
        if before or after:
            h = F.slice_axis(h, axis=axis, begin=before, end=-after if after else None)
    return h


def upsampling(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Each position repeated (nearest): ``target`` (steps,) of a sequence,
    (rows, columns) of an image."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    for axis, times in zip(
        _extent_axes(spec, name), spec.layer(name).options.size, strict=True
    ):
        if times != 1:
            h = F.repeat(h, repeats=times, axis=axis)
    return h


def gelu(h: Any) -> Any:
    """Keras' default GELU, the exact one: ``h / 2 * (1 + erf(h / sqrt(2)))``."""
    return 0.5 * h * (1 + namespace(h).erf(h / math.sqrt(2)))


def gelu_tanh(h: Any) -> Any:
    """GELU by its tanh approximation: only the fault ``gelu-tanh`` asks."""
    inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
    return 0.5 * h * (1 + namespace(h).tanh(inner))


def relu(h: Any) -> Any:
    return namespace(h).relu(h)


def tanh(h: Any) -> Any:
    return namespace(h).tanh(h)


def sigmoid(h: Any) -> Any:
    return namespace(h).sigmoid(h)


def softmax(h: Any, image: bool) -> Any:
    """Over Keras' last axis: the channels, axis 1 of an image ``(N, C, H,
    W)`` here (a symbol has no shape: ``image`` comes from the spec)."""
    return namespace(h).softmax(h, axis=1 if image else -1)


def elu(h: Any, slope: float) -> Any:
    """``h`` above 0, ``slope * (exp(h) - 1)`` below (Keras' alpha)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    return F.where(h > 0, h, slope * F.expm1(F.minimum(h, 0.0)))


def selu(h: Any) -> Any:
    """``SELU_SCALE * elu(h)`` with ``SELU_ALPHA``."""
    return SELU_SCALE * elu(h, SELU_ALPHA)


def silu(h: Any) -> Any:
    """``h * sigmoid(h)`` (Keras' swish)."""
    return h * namespace(h).sigmoid(h)


def softplus(h: Any) -> Any:
    """``log(1 + exp(h))``: ``h + log1p(exp(-h))`` above 0, ``log1p(exp(h))``
    at and below (exact to float32 at both ends, exp never above 1, the
    gradient ``sigmoid(h)``: 0.5 at exactly 0).  Not MXNet's ``softrelu``,
    which rounds ``1 + exp(h)`` before its log: 3e-3 off at h = -9 (issue
    74's campaign, finding 6613038fa1; docs/findings/log-one-plus-exp.md)."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    above = h > 0
    return F.where(above, h, F.zeros_like(h)) + F.log1p(F.exp(F.where(above, -h, h)))


def leaky_relu(h: Any, slope: float) -> Any:
    """``h`` at or above 0, ``slope * h`` below."""
    return namespace(h).LeakyReLU(h, act_type="leaky", slope=slope)


def relu6(h: Any) -> Any:
    """``min(max(h, 0), 6)``, with a gradient of 0 at exactly 0 and 6, as
    Keras', TensorFlow's and PyTorch's have it.  Not a bare ``clip``, whose
    gradient is 1 there: a channel a ReLU left all zero is normalized to
    exactly its beta (0 at the start), and the clip passed the whole
    gradient through every such position into the beta's (issue 74, a
    MobileNetV2: every beta ahead of a ``ReLU(6.)`` 4% to 36% off)."""
    arrays = namespace(h)
    inside = arrays.stop_gradient((h > 0) * (h < 6))
    return h * inside + arrays.stop_gradient(arrays.clip(h, 0.0, 6.0) - h * inside)


def outputs(h: Any, rank: int) -> Any:
    """The model's output in Keras' order: an image's ``(N, C, H, W)`` as
    ``(N, H, W, C)`` (the rank given: a symbol has no shape)."""
    return namespace(h).transpose(h, axes=(0, 2, 3, 1)) if rank == 3 else h


def perturb(h: Any, scale: float, seed: int, index: int) -> Any:
    """``h * (1 + d)``, ``d`` uniform in ``[-scale, scale]`` from NumPy's
    generator of ``(seed, index)`` (``native.protocol.Ops.perturb``).  MXNet
    is no reference implementation, so only its imperative arrays (whose
    shape is known) are ever perturbed, by the tests."""
    d = np.random.default_rng((seed, index)).uniform(-scale, scale, h.shape)
    return h * (1 + mx.nd.array(d, dtype=h.dtype, ctx=h.context))


def perturb_gradient(w: Any, scale: float, seed: int, index: int) -> Any:
    """``w`` in value, its gradient times ``1 + d`` (``d`` as ``perturb``
    draws it; ``native.protocol.Ops.perturb_gradient``)."""
    moved = perturb(w, scale, seed, index)
    return moved - mx.nd.stop_gradient(moved - w)
