"""The building blocks of the JAX models, from ``jax.numpy`` and ``jax.lax``.

Activations are ``(N, H, W, C)`` (or ``(N, features)``, ``(N, T, F)``),
kernels as in Keras.  Every framework's ``ops.py`` offers these functions with
the same signatures (``native.protocol.Ops``); ``native.compose`` walks a
spec over them.  A layer's weights are ``params["<name>/kernel"]`` and
``params["<name>/bias"]`` and its settings (strides, padding,
``return_sequences``) come from the spec.

Each block computes through a ``jax.jit``-ed kernel of its own that takes only
the arrays it needs (window sizes, strides and padding static).  Inside a
jitted step (mode ``jit``, ``native.jax.common``) the kernels are inlined into
the one program, which is unchanged; called eagerly (mode ``layerjit``,
``native.jax.modes``) each layer's forward pass and backward pass run as
compiled XLA computations of their own.  ``flatten``, ``reshape`` and
``permute`` only rearrange values, left to run as they are called.  A layer
with ``use_bias=False`` hands its kernel ``None`` for the bias it lacks.

Padding is given to XLA as numbers; a ``same`` padding's split is XLA's own
(``lax.padtype_to_pads``), never read from ``zoo``: a float64 reference must
not share with another the one place a wrong split could sit in (issue 74).
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from native import compose
from native.jax.common import Params
from native.protocol import score_masks, unmasked
from zoo.kinds import conv_transpose
from zoo.kinds.adapted import EPSILON as _ADAPTED_EPSILON
from zoo.kinds.base import SELU_ALPHA, SELU_SCALE
from zoo.kinds.gaussian import dropout_deviation
from zoo.kinds.global_pool import over_features
from zoo.kinds.repeat_vector import INTERLEAVED
from zoo.specs import Layer, ModelSpec, padding_of

_NHWC = ("NHWC", "HWIO", "NHWC")
Pads = tuple[tuple[int, int], tuple[int, int]]


def _side(layer: Layer, side: int) -> tuple[int, int]:
    """The padding (before, after) ``layer`` puts on an axis of ``side``:
    for ``same`` as XLA splits it (see the module docstring)."""
    if layer.options.padding != "same" or layer.mistake:  # a mistake's: as zoo has it
        return padding_of(layer, side)
    ((before, after),) = lax.padtype_to_pads(
        (side,), (layer.options.window,), (layer.options.stride,), "SAME"
    )
    return int(before), int(after)


def _pads(layer: Layer, h: jax.Array) -> Pads:
    return (_side(layer, h.shape[1]), _side(layer, h.shape[2]))


def _bias(params: Params, spec: ModelSpec, name: str) -> jax.Array | None:
    """``params["<name>/bias"]``, or ``None`` for a layer with
    ``use_bias=False`` (it has none): a kernel given ``None`` adds nothing,
    and traces a program of its own (the one with a bias is unchanged)."""
    return params[f"{name}/bias"] if spec.layer(name).options.use_bias else None


@jax.jit
def _dense(h: jax.Array, kernel: jax.Array, bias: jax.Array | None) -> jax.Array:
    return h @ kernel if bias is None else h @ kernel + bias


def dense(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``h @ kernel + bias`` over the last axis; kernel ``(in, out)``."""
    return _dense(h, params[f"{name}/kernel"], _bias(params, spec, name))  # type: ignore[no-any-return]


def time_distributed(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Keras' ``TimeDistributed(Dense)``: the dense block on every step."""
    return dense(h, params, spec, name)


@functools.partial(jax.jit, static_argnames=("stride", "pads", "dilation"))
def _conv2d(
    h: jax.Array,
    kernel: jax.Array,
    bias: jax.Array | None,
    stride: int,
    pads: Pads,
    *,
    dilation: int = 1,
) -> jax.Array:
    strides, dilations = (stride, stride), (dilation, dilation)
    y = lax.conv_general_dilated(
        h, kernel, strides, pads, rhs_dilation=dilations, dimension_numbers=_NHWC
    )
    return y if bias is None else y + bias


def conv2d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Convolution with the layer's strides, padding (Keras' ``valid`` or
    ``same``) and dilation; kernel ``(kh, kw, in, out)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], _bias(params, spec, name)
    o = layer.options
    return _conv2d(h, kernel, bias, o.stride, _pads(layer, h), dilation=o.dilation_rate)  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("stride", "pads"))
def _conv2d_transpose(
    h: jax.Array, kernel: jax.Array, bias: jax.Array | None, stride: int, pads: Pads
) -> jax.Array:
    # The scatter as a convolution of the input dilated by the strides with
    # the flipped kernel (kh, kw, out, in) -> HWIO; the padding picks the
    # output's positions of the full scatter (zeros past its end).
    flipped = kernel[::-1, ::-1].swapaxes(2, 3)
    strides, dilation = (1, 1), (stride, stride)
    y = lax.conv_general_dilated(
        h, flipped, strides, pads, lhs_dilation=dilation, dimension_numbers=_NHWC
    )
    return y if bias is None else y + bias


def conv2d_transpose(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Keras' ``Conv2DTranspose``: input position ``j`` adds ``x[j] @
    kernel[k].T`` to position ``j * strides + k`` of the full scatter, of
    which the output keeps ``side_out`` positions from ``start`` (a dilated
    convolution with the flipped kernel); kernel ``(kh, kw, out, in)``."""
    layer = spec.layer(name)
    k, s = layer.options.kernel_size, layer.options.stride

    def pads(side: int) -> tuple[int, int]:
        begin = conv_transpose.start(layer, side)
        dilated = (side - 1) * s + 1
        return k - 1 - begin, conv_transpose.side_out(layer, side) - dilated + begin

    kernel, bias = params[f"{name}/kernel"], _bias(params, spec, name)
    both = (pads(h.shape[1]), pads(h.shape[2]))
    return _conv2d_transpose(h, kernel, bias, s, both)  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("stride", "pads"))
def _depthwise(
    h: jax.Array,
    kernel: jax.Array,
    pointwise: jax.Array | None,
    bias: jax.Array | None,
    *,
    stride: int,
    pads: Pads,
) -> jax.Array:
    kh, kw, channels, m = kernel.shape
    grouped = kernel.reshape(kh, kw, 1, channels * m)  # output channel c * m + k
    strides = (stride, stride)
    y = lax.conv_general_dilated(
        h, grouped, strides, pads, dimension_numbers=_NHWC, feature_group_count=channels
    )
    if pointwise is not None:
        y = lax.conv_general_dilated(
            y, pointwise, (1, 1), "VALID", dimension_numbers=_NHWC
        )
    return y if bias is None else y + bias


def depthwise_conv2d(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Each channel convolved on its own by ``multiplier`` kernels (a grouped
    convolution, output channel ``c * multiplier + k``) with the layer's
    strides and padding; kernel ``(kh, kw, C, multiplier)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], _bias(params, spec, name)
    pads = _pads(layer, h)
    return _depthwise(h, kernel, None, bias, stride=layer.options.stride, pads=pads)  # type: ignore[no-any-return]


def separable_conv2d(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The depthwise convolution (no bias), then the pointwise kernel ``(1, 1,
    C * multiplier, filters)`` as a 1x1 convolution, then the bias."""
    layer = spec.layer(name)
    kernel = params[f"{name}/depthwise_kernel"]
    pointwise, bias = params[f"{name}/pointwise_kernel"], _bias(params, spec, name)
    pads = _pads(layer, h)
    return _depthwise(  # type: ignore[no-any-return]
        h, kernel, pointwise, bias, stride=layer.options.stride, pads=pads
    )


@functools.partial(jax.jit, static_argnames=("size", "stride", "pads"))
def _max_pool(h: jax.Array, size: int, stride: int, pads: Pads) -> jax.Array:
    window, steps = (1, size, size, 1), (1, stride, stride, 1)
    padding = ((0, 0), *pads, (0, 0))
    return lax.reduce_window(h, -jnp.inf, lax.max, window, steps, padding)


@functools.partial(jax.jit, static_argnames=("size", "stride", "pads"))
def _avg_pool(h: jax.Array, size: int, stride: int, pads: Pads) -> jax.Array:
    window, steps = (1, size, size, 1), (1, stride, stride, 1)
    padding = ((0, 0), *pads, (0, 0))
    sums = lax.reduce_window(h, 0.0, lax.add, window, steps, padding)
    if pads == ((0, 0), (0, 0)):
        return sums / (size * size)
    # Keras averages over the window's positions inside the input only.
    ones = jnp.ones((1, *h.shape[1:3], 1), h.dtype)
    return sums / lax.reduce_window(ones, 0.0, lax.add, window, steps, padding)


def max_pool(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The largest value of each window, with the layer's strides and padding."""
    layer = spec.layer(name)
    return _max_pool(h, layer.options.pool_size, layer.options.stride, _pads(layer, h))  # type: ignore[no-any-return]


def avg_pool(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The mean of each window over its positions inside the input."""
    layer = spec.layer(name)
    return _avg_pool(h, layer.options.pool_size, layer.options.stride, _pads(layer, h))  # type: ignore[no-any-return]


def flatten(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    return h.reshape(h.shape[0], -1)  # (N, H, W, C) -> (N, H*W*C), H, W, C order


Cell = tuple[jax.Array, jax.Array, jax.Array | None]


def _cell(params: Params, spec: ModelSpec, name: str, prefix: str) -> Cell:
    """A recurrent layer's kernel, recurrent kernel and bias (``None`` with
    ``use_bias=False``), read under ``prefix`` (the layer's name, or a
    bidirectional layer's ``<name>/forward``)."""
    bias = params[f"{prefix}/bias"] if spec.layer(name).options.use_bias else None
    return params[f"{prefix}/kernel"], params[f"{prefix}/recurrent_kernel"], bias


def _gated(v: jax.Array, w: jax.Array, masks: jax.Array | None) -> jax.Array:
    """``v @ w``; with ``masks`` (``native.protocol.Masked``: one per gate)
    each gate's block of ``w``'s columns takes ``v`` times its own mask."""
    if masks is None:
        return v @ w
    blocks = jnp.split(w, masks.shape[0], axis=1)
    return jnp.concatenate([(v * masks[g]) @ b for g, b in enumerate(blocks)], axis=-1)


@functools.partial(jax.jit, static_argnames=("sequences", "activation"))
def _lstm(
    x: jax.Array,
    kernel: jax.Array,
    recurrent: jax.Array,
    bias: jax.Array | None,
    sequences: bool,
    *,
    activation: str | None = "tanh",
    inputs: jax.Array | None = None,
    states: jax.Array | None = None,
) -> jax.Array:
    act = _cell_activation(activation)
    units = recurrent.shape[0]

    def cell(carry: tuple[jax.Array, jax.Array], x_t: jax.Array) -> Any:
        h, c = carry
        projected = _gated(x_t, kernel, inputs)
        projected = projected if bias is None else projected + bias
        i, f, g, o = jnp.split(projected + _gated(h, recurrent, states), 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * act(g)
        h = jax.nn.sigmoid(o) * act(c)
        return (h, c), h if sequences else None

    zeros = jnp.zeros((x.shape[0], units), x.dtype)
    time_major = x.swapaxes(0, 1)  # (N, T, F) -> (T, N, F)
    (h, _), hs = lax.scan(cell, (zeros, zeros), time_major)
    return hs.swapaxes(0, 1) if sequences else h  # (N, T, u) or (N, u)


def lstm(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates, run over time with ``lax.scan``.  The input
    projection is done step by step inside the scan, as Keras does: projecting
    all steps up front measured 40% slower in the forward pass under XLA on
    CPU.  Kernel ``(F, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)``
    (none with ``use_bias=False``)."""
    o = spec.layer(name).options
    cell = _cell(params, spec, name, name)
    x, inputs, states = unmasked(h)
    return _lstm(  # type: ignore[no-any-return]
        x,
        *cell,
        o.return_sequences,
        activation=o.activation,
        inputs=inputs,
        states=states,
    )


@jax.jit
def _embedding(ids: jax.Array, table: jax.Array) -> jax.Array:
    return jnp.take(table, ids, axis=0)  # (N, T) ids -> (N, T, dim)


def embedding(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Each token id's row of the table ``(vocab, dim)``."""
    return _embedding(h, params[f"{name}/embeddings"])  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("stride", "pads", "dilation"))
def _conv1d(
    h: jax.Array,
    kernel: jax.Array,
    bias: jax.Array | None,
    stride: int,
    pads: tuple[tuple[int, int]],
    *,
    dilation: int = 1,
) -> jax.Array:
    numbers = ("NWC", "WIO", "NWC")
    y = lax.conv_general_dilated(
        h, kernel, (stride,), pads, rhs_dilation=(dilation,), dimension_numbers=numbers
    )
    return y if bias is None else y + bias


def conv1d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Convolution over time with the layer's strides, padding (``causal``:
    the window's span less one before) and dilation; kernel ``(k, in,
    out)``, sequences ``(N, T, F)``."""
    layer = spec.layer(name)
    kernel, bias = params[f"{name}/kernel"], _bias(params, spec, name)
    pads = (_side(layer, h.shape[1]),)
    o = layer.options
    return _conv1d(h, kernel, bias, o.stride, pads, dilation=o.dilation_rate)  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("size", "stride", "pads", "kind"))
def _pool1d(
    h: jax.Array, size: int, stride: int, pads: tuple[int, int], kind: str
) -> jax.Array:
    window, steps, padding = (1, size, 1), (1, stride, 1), ((0, 0), pads, (0, 0))
    if kind == "max":
        return lax.reduce_window(h, -jnp.inf, lax.max, window, steps, padding)
    sums = lax.reduce_window(h, 0.0, lax.add, window, steps, padding)
    ones = jnp.ones((1, h.shape[1], 1), h.dtype)  # Keras counts real positions
    return sums / lax.reduce_window(ones, 0.0, lax.add, window, steps, padding)


def max_pool1d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The largest value of each window over time."""
    layer = spec.layer(name)
    pads = _side(layer, h.shape[1])
    return _pool1d(h, layer.options.pool_size, layer.options.stride, pads, "max")  # type: ignore[no-any-return]


def avg_pool1d(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The mean of each window over its positions inside the sequence."""
    layer = spec.layer(name)
    pads = _side(layer, h.shape[1])
    return _pool1d(h, layer.options.pool_size, layer.options.stride, pads, "avg")  # type: ignore[no-any-return]


@jax.jit
def _global_avg_pool(h: jax.Array) -> jax.Array:
    return jnp.mean(h, axis=tuple(range(1, h.ndim - 1)))  # (N, ..., C) -> (N, C)


def global_avg_pool(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The mean over every position (time steps, or rows and columns), or
    over each step's features (``_pooled``)."""
    return _global_avg_pool(_pooled(h, spec, name))  # type: ignore[no-any-return]


def _pooled(h: jax.Array, spec: ModelSpec, name: str) -> jax.Array:
    """What a global pool reduces over its second axis: ``h``, or a
    sequence pooled ``channels_first`` with its features first
    (``zoo.kinds.global_pool.over_features``)."""
    return h.swapaxes(1, 2) if over_features(spec.layer(name)) else h


@functools.partial(jax.jit, static_argnames=("sequences", "activation"))
def _gru(
    x: jax.Array,
    kernel: jax.Array,
    recurrent: jax.Array,
    bias: jax.Array | None,
    sequences: bool,
    *,
    activation: str | None = "tanh",
    inputs: jax.Array | None = None,
    states: jax.Array | None = None,
) -> jax.Array:
    act = _cell_activation(activation)

    def cell(h: jax.Array, x_t: jax.Array) -> Any:
        x_in = _gated(x_t, kernel, inputs)
        x_in = x_in if bias is None else x_in + bias[0]
        x_z, x_r, x_h = jnp.split(x_in, 3, axis=-1)
        h_in = _gated(h, recurrent, states)
        h_in = h_in if bias is None else h_in + bias[1]
        h_z, h_r, h_h = jnp.split(h_in, 3, axis=-1)
        z, r = jax.nn.sigmoid(x_z + h_z), jax.nn.sigmoid(x_r + h_r)
        h = z * h + (1 - z) * act(x_h + r * h_h)
        return h, h if sequences else None

    zeros = jnp.zeros((x.shape[0], recurrent.shape[0]), x.dtype)
    last, hs = lax.scan(cell, zeros, x.swapaxes(0, 1))  # over (T, N, F)
    return hs.swapaxes(0, 1) if sequences else last  # (N, T, u) or (N, u)


def gru(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Keras' GRU (``reset_after=True``) written out: ``x_t W + b_in`` and
    ``h U + b_rec`` each split into gates ``z, r, h``; ``z`` and ``r``
    sigmoid of their sums; the candidate ``tanh(x_h + r * rec_h)`` (the reset
    gate after the recurrent product); ``h = z * h + (1 - z) * candidate``.
    Kernel ``(F, 3u)``, recurrent kernel ``(u, 3u)``, bias ``(2, 3u)`` (none
    with ``use_bias=False``)."""
    o = spec.layer(name).options
    cell = _cell(params, spec, name, name)
    x, inputs, states = unmasked(h)
    return _gru(  # type: ignore[no-any-return]
        x,
        *cell,
        o.return_sequences,
        activation=o.activation,
        inputs=inputs,
        states=states,
    )


@functools.partial(jax.jit, static_argnames=("sequences", "activation"))
def _simple_rnn(
    x: jax.Array,
    kernel: jax.Array,
    recurrent: jax.Array,
    bias: jax.Array | None,
    sequences: bool,
    *,
    activation: str | None = "tanh",
    inputs: jax.Array | None = None,
    states: jax.Array | None = None,
) -> jax.Array:
    act = _cell_activation(activation)

    def cell(h: jax.Array, x_t: jax.Array) -> Any:
        projected = _gated(x_t, kernel, inputs)
        projected = projected if bias is None else projected + bias
        h = act(projected + _gated(h, recurrent, states))
        return h, h if sequences else None

    zeros = jnp.zeros((x.shape[0], recurrent.shape[0]), x.dtype)
    last, hs = lax.scan(cell, zeros, x.swapaxes(0, 1))  # over (T, N, F)
    return hs.swapaxes(0, 1) if sequences else last  # (N, T, u) or (N, u)


def simple_rnn(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Keras' SimpleRNN written out: ``h = tanh(x_t W + b + h U)`` from ``h =
    0``, run over time with ``lax.scan`` (the input projection step by step
    inside it, as the LSTM does).  Kernel ``(F, u)``, recurrent kernel ``(u,
    u)``, bias ``(u,)`` (none with ``use_bias=False``)."""
    o = spec.layer(name).options
    cell = _cell(params, spec, name, name)
    x, inputs, states = unmasked(h)
    return _simple_rnn(  # type: ignore[no-any-return]
        x,
        *cell,
        o.return_sequences,
        activation=o.activation,
        inputs=inputs,
        states=states,
    )


def _cell_activation(name: str | None) -> Any:
    """The activation inside a recurrent cell, where Keras' default has a
    tanh (``zoo.kinds.recurrent.Recurrent``)."""
    return compose.activation_function(sys.modules[__name__], name)


_RECURRENT = {"lstm": _lstm, "gru": _gru, "simple_rnn": _simple_rnn}


@functools.partial(
    jax.jit, static_argnames=("cell", "sequences", "merge", "activation")
)
def _bidirectional(
    x: Any,
    x_backward: Any,
    forward: Cell,
    backward: Cell,
    *,
    cell: str,
    sequences: bool,
    merge: str,
    activation: str | None,
) -> jax.Array:
    run = _RECURRENT[cell]
    x, inputs, states = unmasked(x)
    f = run(x, *forward, sequences, activation=activation, inputs=inputs, states=states)
    x_backward, inputs, states = unmasked(x_backward)
    b = run(
        x_backward[:, ::-1],
        *backward,
        sequences,
        activation=activation,
        inputs=inputs,
        states=states,
    )
    if sequences:
        b = b[:, ::-1]  # back in time order, as Keras flips it
    if merge == "concat":
        return jnp.concatenate((f, b), axis=-1)
    if merge == "sum":
        return f + b
    if merge == "ave":
        return (f + b) / 2
    return f * b  # "mul"


def bidirectional(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Keras' ``Bidirectional``: the layer's ``cell`` (``lstm``, ``gru`` or
    ``simple_rnn``, as those blocks compute it) over the steps forward with
    ``forward/`` parameters and backward with ``backward/`` ones, the backward
    states put back in time order, merged by ``merge`` (``concat``, ``sum``,
    ``ave``, ``mul``)."""
    layer = spec.layer(name)
    forward = _cell(params, spec, name, f"{name}/forward")
    backward = _cell(params, spec, name, f"{name}/backward")
    # each direction's own input: a pair in a training step with dropout
    first, second = h if isinstance(h, tuple) else (h, h)
    return _bidirectional(  # type: ignore[no-any-return]
        first,
        second,
        forward,
        backward,
        cell=layer.options.cell,
        sequences=layer.options.return_sequences,
        merge=layer.options.merge_mode,
        activation=layer.options.activation,
    )


@jax.jit
def _dot_attention(query: jax.Array, value: jax.Array, key: jax.Array) -> jax.Array:
    scores = jnp.einsum("nqf,nvf->nqv", query, key)  # (N, Tq, Tv), not scaled
    return jax.nn.softmax(scores, axis=-1) @ value  # (N, Tq, Fv)


def dot_attention(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Keras' ``Attention`` (dot product): ``softmax(query @ key^T) @ value``
    over ``h``, ``(query, value)`` or ``(query, value, key)`` (the key the
    value when not given), softmax over the value's steps."""
    query, value = h[0], h[1]
    key = h[2] if len(h) == 3 else value
    return _dot_attention(query, value, key)  # type: ignore[no-any-return]


def _layer_norm_moved(
    h: jax.Array,
    gamma: jax.Array,
    beta: jax.Array,
    epsilon: float,
    moved: Any = None,
) -> jax.Array:
    mean = jnp.mean(h, axis=-1, keepdims=True)
    variance = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)  # biased
    if moved is not None:  # a perturbed run's statistics (native.compose)
        mean, variance = moved((mean, variance))
    return (h - mean) * lax.rsqrt(variance + epsilon) * gamma + beta


_layer_norm = jax.jit(_layer_norm_moved, static_argnames="epsilon")


def layer_norm(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Over the last axis: ``(h - mean) / sqrt(variance + epsilon) * gamma +
    beta``, the variance without Bessel's correction, as Keras has it."""
    epsilon = spec.layer(name).options.epsilon
    gamma, beta = params[f"{name}/gamma"], params[f"{name}/beta"]
    if compose.PERTURB_SEED:  # not jitted alone: the step around it is
        return _layer_norm_moved(
            h,
            gamma,
            beta,
            epsilon,
            lambda stats: compose.moved_statistics(
                perturb, spec, name, stats, h.shape[-1]
            ),
        )
    return _layer_norm(h, gamma, beta, epsilon)  # type: ignore[no-any-return]


def _normalized(
    h: jax.Array,
    stats: tuple[jax.Array, jax.Array],
    params: Params,
    spec: ModelSpec,
    name: str,
) -> jax.Array:
    """As Keras' ``ops.batch_normalization`` writes it: ``h * inv + (beta -
    mean * inv)`` with ``inv = gamma / sqrt(variance + epsilon)`` (no gamma
    or beta: ``scale`` or ``center`` off)."""
    (mean, variance), epsilon = stats, spec.layer(name).options.epsilon
    inv = lax.rsqrt(variance + epsilon)
    if f"{name}/gamma" in params:
        inv = inv * params[f"{name}/gamma"]
    shift = -mean * inv
    if f"{name}/beta" in params:
        shift = shift + params[f"{name}/beta"]
    return h * inv + shift


def batch_norm(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Inference: over the last (channel) axis with the moving statistics."""
    stats = params[f"{name}/moving_mean"], params[f"{name}/moving_variance"]
    return _normalized(h, stats, params, spec, name)


def batch_norm_train(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Training: with the batch's mean and variance over every axis but the
    last (the variance without Bessel's correction, as Keras has it); also
    returns those statistics for the moving averages."""
    axes = tuple(range(h.ndim - 1))
    mean = jnp.mean(h, axis=axes)
    variance = jnp.mean(jnp.square(h - mean), axis=axes)
    return _normalized(h, (mean, variance), params, spec, name), mean, variance


def _key(rng: Any, index: int) -> Any:
    """Layer ``index``'s key: ``rng`` (a fixed key when none is given)
    folded with the index, as Keras' JAX backend draws from a seed."""
    return jax.random.fold_in(jax.random.key(0) if rng is None else rng, index)


def dropout(
    h: jax.Array, spec: ModelSpec, name: str, rng: Any, index: int
) -> jax.Array:
    """Each element kept with probability ``1 - rate`` and scaled by ``1 /
    (1 - rate)``, one draw shared along the layer's ``shared_axes`` (a
    channels-last layout: Keras' axes), from ``_key(rng, index)``."""
    o = spec.layer(name).options
    shape = tuple(1 if a in o.shared_axes else side for a, side in enumerate(h.shape))
    keep = jax.random.bernoulli(_key(rng, index), 1 - o.rate, shape)
    return jnp.where(keep, h / (1 - o.rate), jnp.zeros_like(h))


def dropout_mask(
    h: jax.Array, size: tuple[int, int], rate: float, rng: Any, index: int
) -> jax.Array:
    """Masks ``(count, N, width)`` of a recurrent layer's cells
    (``native.protocol.Ops.dropout_mask``), from ``_key(rng, index)``."""
    count, width = size
    keep = jax.random.bernoulli(_key(rng, index), 1 - rate, (count, h.shape[0], width))
    return keep.astype(h.dtype) / (1 - rate)


def gaussian_noise(
    h: jax.Array, spec: ModelSpec, name: str, rng: Any, index: int
) -> jax.Array:
    """``h + stddev * n``, ``n`` standard normal per value."""
    stddev = spec.layer(name).options.stddev
    return h + stddev * jax.random.normal(_key(rng, index), h.shape, h.dtype)


def gaussian_dropout(
    h: jax.Array, spec: ModelSpec, name: str, rng: Any, index: int
) -> jax.Array:
    """``h * (1 + s * n)``, ``n`` standard normal per value, ``s = sqrt(rate
    / (1 - rate))``."""
    s = dropout_deviation(spec.layer(name).options)
    return h * (1 + s * jax.random.normal(_key(rng, index), h.shape, h.dtype))


@jax.jit
def _attention(
    h: jax.Array, w: dict[str, jax.Array], masks: jax.Array | None = None
) -> jax.Array:
    def project(part: str) -> jax.Array:  # (N, T, F) -> (N, T, heads, key_dim)
        y = jnp.einsum("ntf,fhk->nthk", h, w[f"{part}/kernel"])
        return y + w[f"{part}/bias"] if f"{part}/bias" in w else y

    q, k, v = project("query"), project("key"), project("value")
    q = q / jnp.sqrt(jnp.asarray(q.shape[-1], q.dtype))  # Keras scales the query
    scores = jnp.einsum("nthk,nshk->nhts", q, k)  # (N, heads, T, T)
    weights = jax.nn.softmax(scores, axis=-1)
    if masks is not None:  # (heads, N, T * T), one per head: dropped weights
        weights = weights * masks.swapaxes(0, 1).reshape(weights.shape)
    mixed = jnp.einsum("nhts,nshk->nthk", weights, v)
    out = jnp.einsum("nthk,hkf->ntf", mixed, w["attention_output/kernel"])
    return out + w["attention_output/bias"] if "attention_output/bias" in w else out


def attention(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Keras' ``MultiHeadAttention`` over one sequence ``(N, T, F)`` as query,
    key and value: each projected to ``(N, T, heads, key_dim)`` by kernels
    ``(F, heads, key_dim)`` plus biases (none with ``use_bias=False``), the
    query scaled by ``1 / sqrt(key_dim)``, softmax over the keys of ``q .
    k``, the values mixed by those weights, projected back by ``(heads,
    key_dim, F)``; in a training step with ``dropout`` the weights times
    their masks (``native.protocol.Masked``)."""
    prefix = f"{name}/"
    w = {k.removeprefix(prefix): v for k, v in params.items() if k.startswith(prefix)}
    x, masks = score_masks(h)
    return _attention(x, w, masks)  # type: ignore[no-any-return]


def add(h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str) -> Any:
    """The sum of the outputs the layer takes (a residual connection)."""
    total = h[0]
    for other in h[1:]:
        total = total + other
    return total


@jax.jit
def _global_max_pool(h: jax.Array) -> jax.Array:
    rows = h.reshape(h.shape[0], -1, h.shape[-1])  # (N, ..., C) -> (N, P, C)
    at = jnp.argmax(rows, axis=1, keepdims=True)
    return jnp.take_along_axis(rows, at, axis=1)[:, 0]  # (N, C)


def global_max_pool(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The largest value over every position (time steps, or rows and
    columns), taken where ``argmax`` found it, and its gradient sent there.
    Not ``jnp.max``: under ``jit`` on XLA's CPU backend its gradient (which
    finds the maximum again by equality) lost whole entries, float64 too,
    behind a layer normalization (finding ea62e9c9a5, issue 74).  A tie's
    gradient goes to its first position, where PyTorch and TensorFlow share
    it; the two agree wherever the tied values are one function of the
    parameters (the same token twice), as exact ties are.  Over each step's
    features where pooled ``channels_first`` (``_pooled``)."""
    return _global_max_pool(_pooled(h, spec, name))  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames="kind")
def _merge(h: tuple[jax.Array, ...], kind: str) -> jax.Array:
    if kind == "concatenate":
        return jnp.concatenate(h, axis=-1)
    if kind == "subtract":
        return h[0] - h[1]
    combine = {
        "multiply": jnp.multiply,
        "average": jnp.add,
        "maximum": jnp.maximum,
        "minimum": jnp.minimum,
    }[kind]
    total = h[0]
    for other in h[1:]:  # pairwise in order, as Keras' merge layers
        total = combine(total, other)
    return total / len(h) if kind == "average" else total


def subtract(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The first output the layer takes minus the second."""
    return _merge(h, "subtract")  # type: ignore[no-any-return]


def multiply(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The elementwise product of the outputs the layer takes."""
    return _merge(h, "multiply")  # type: ignore[no-any-return]


def average(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The sum of the outputs the layer takes over their count."""
    return _merge(h, "average")  # type: ignore[no-any-return]


def maximum(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The elementwise largest of the outputs the layer takes."""
    return _merge(h, "maximum")  # type: ignore[no-any-return]


def minimum(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The elementwise smallest of the outputs the layer takes."""
    return _merge(h, "minimum")  # type: ignore[no-any-return]


def concatenate(
    h: tuple[jax.Array, ...], params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """The outputs the layer takes joined along the last axis (features, channels)."""
    return _merge(h, "concatenate")  # type: ignore[no-any-return]


def activation(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The identity: ``native.compose`` then applies the layer's activation."""
    return h


@jax.jit
def _prelu(h: jax.Array, alpha: jax.Array) -> jax.Array:
    return jax.nn.relu(h) - alpha * jax.nn.relu(-h)  # as Keras writes it


def prelu(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``max(h, 0) + alpha * min(h, 0)`` with the trained ``alpha`` (1 on the
    shared axes), written as Keras' ``relu(h) - alpha * relu(-h)``."""
    return _prelu(h, params[f"{name}/alpha"])  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames=("scale", "offset"))
def _rescaling(h: jax.Array, scale: float, offset: float) -> jax.Array:
    return h * scale + offset


def rescaling(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """``h * scale + offset`` with the layer's two numbers."""
    layer = spec.layer(name)
    return _rescaling(h, layer.options.scale, layer.options.offset)  # type: ignore[no-any-return]


@jax.jit
def _normalization(h: jax.Array, mean: jax.Array, variance: jax.Array) -> jax.Array:
    return (h - mean) / jnp.maximum(jnp.sqrt(variance), _ADAPTED_EPSILON)


def normalization(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """Over the last axis: ``(h - mean) / max(sqrt(variance), 1e-7)`` with
    the statistics ``adapt`` set, as Keras' ``Normalization``."""
    mean, variance = params[f"{name}/mean"], params[f"{name}/variance"]
    return _normalization(h, mean, variance)  # type: ignore[no-any-return]


def reshape(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The same values in the shape ``target`` (one side may be ``-1``), in
    Keras' element order, which is this layout's."""
    return h.reshape(h.shape[0], *spec.layer(name).options.target_shape)


def permute(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """The axes after the batch in the order ``target`` gives (counted from 1)."""
    return jnp.transpose(h, (0, *spec.layer(name).options.dims))


def repeat_vector(
    h: jax.Array, params: Params, spec: ModelSpec, name: str
) -> jax.Array:
    """``(N, F) -> (N, n, F)``: the row repeated ``n`` times (the mistake
    ``repeat-interleaved``: each feature repeated in place, then reshaped)."""
    layer = spec.layer(name)
    n = layer.options.n
    if layer.mistake == INTERLEAVED:
        return jnp.repeat(h, n, axis=1).reshape(h.shape[0], n, h.shape[1])
    return jnp.repeat(h[:, None, :], n, axis=1)


def _widths(layer: Layer) -> tuple[tuple[int, int], ...]:
    """A zero padding's or cropping's widths as ``(before, after)`` per
    axis: the batch's and the channels' ``(0, 0)`` around a sequence's steps
    or an image's rows and columns."""
    t = layer.options.widths
    pairs = tuple((t[i], t[i + 1]) for i in range(0, len(t), 2))
    return ((0, 0), *pairs, (0, 0))


@functools.partial(jax.jit, static_argnames="widths")
def _zero_padding(h: jax.Array, widths: tuple[tuple[int, int], ...]) -> jax.Array:
    return jnp.pad(h, widths)


def zero_padding(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Zeros added before and after a sequence's steps, or around an image:
    ``target`` ``(before, after)`` or ``(top, bottom, left, right)``."""
    return _zero_padding(h, _widths(spec.layer(name)))  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames="widths")
def _cropping(h: jax.Array, widths: tuple[tuple[int, int], ...]) -> jax.Array:
    kept = tuple(
        slice(before, side - after)
        for side, (before, after) in zip(h.shape, widths, strict=True)
    )
    return h[kept]


def cropping(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Values cut from a sequence's steps or an image's edges: ``target`` as
    ``zero_padding``'s."""
    return _cropping(h, _widths(spec.layer(name)))  # type: ignore[no-any-return]


@functools.partial(jax.jit, static_argnames="repeats")
def _upsampling(h: jax.Array, repeats: tuple[int, ...]) -> jax.Array:
    for axis, times in enumerate(repeats, start=1):
        h = jnp.repeat(h, times, axis=axis)
    return h


def upsampling(h: jax.Array, params: Params, spec: ModelSpec, name: str) -> jax.Array:
    """Each step (``target`` ``(steps,)``), or each row and column (``(rows,
    columns)``), repeated: Keras' nearest upsampling."""
    return _upsampling(h, tuple(spec.layer(name).options.size))  # type: ignore[no-any-return]


@jax.jit
def gelu(h: jax.Array) -> jax.Array:
    """Keras' default GELU, the exact one: ``h / 2 * (1 + erf(h / sqrt(2)))``."""
    return 0.5 * h * (1 + lax.erf(h / jnp.sqrt(jnp.asarray(2, h.dtype))))


@jax.jit
def gelu_tanh(h: jax.Array) -> jax.Array:
    """GELU by its tanh approximation: only the fault ``gelu-tanh`` asks."""
    inner = jnp.sqrt(jnp.asarray(2 / jnp.pi, h.dtype)) * (h + 0.044715 * h**3)
    return 0.5 * h * (1 + jnp.tanh(inner))


@jax.jit
def relu(h: jax.Array) -> jax.Array:
    # Not jnp.maximum(h, 0), whose gradient splits a tie, 0.5 at exactly 0:
    # a dead unit's bias (a Keras model's initial zeros) then reads a half
    # gradient where Keras and every framework have none (issue 60).
    return jax.nn.relu(h)


@jax.jit
def tanh(h: jax.Array) -> jax.Array:
    return jnp.tanh(h)


@jax.jit
def sigmoid(h: jax.Array) -> jax.Array:
    return jax.nn.sigmoid(h)


@jax.jit
def softmax(h: jax.Array, image: bool) -> jax.Array:
    """Over the last axis, the channels (Keras' layout here, images too)."""
    return jax.nn.softmax(h, axis=-1)


@functools.partial(jax.jit, static_argnames="slope")
def elu(h: jax.Array, slope: float) -> jax.Array:
    """``h`` above 0, ``slope * (exp(h) - 1)`` below (Keras' ``alpha``)."""
    return jnp.where(h > 0, h, slope * jnp.expm1(_negative(h)))


@jax.jit
def selu(h: jax.Array) -> jax.Array:
    """``SELU_SCALE * elu(h)`` with ``SELU_ALPHA``, Keras' constants."""
    below = SELU_ALPHA * jnp.expm1(_negative(h))
    return SELU_SCALE * jnp.where(h > 0, h, below)


@jax.jit
def silu(h: jax.Array) -> jax.Array:
    """``h * sigmoid(h)`` (Keras' ``swish`` too)."""
    return h * jax.nn.sigmoid(h)


@jax.jit
def softplus(h: jax.Array) -> jax.Array:
    """``log(1 + exp(h))``, computed stably as ``logaddexp(h, 0)``."""
    return jnp.logaddexp(h, jnp.zeros_like(h))


@functools.partial(jax.jit, static_argnames="slope")
def leaky_relu(h: jax.Array, slope: float) -> jax.Array:
    """``h`` above 0, ``slope * h`` at and below: gradient ``slope`` at
    exactly 0, as the other frameworks' (``native.torch.ops.leaky_relu``),
    not ``jax.nn.leaky_relu``'s 1."""
    return jnp.where(h > 0, h, slope * h)


@jax.jit
def relu6(h: jax.Array) -> jax.Array:
    # jax.nn.relu6, not a clip: its gradient is 0 at exactly 0 and 6, as
    # Keras', TensorFlow's and PyTorch's are (see relu).
    return jax.nn.relu6(h)


def _negative(h: jax.Array) -> jax.Array:
    """``h`` where it is at most 0, else 0: the exponential of an elu is
    taken there only, so a large ``h`` makes no inf whose zero gradient
    (``where``'s other branch) would read NaN."""
    return jnp.where(h > 0, jnp.zeros_like(h), h)


def outputs(h: jax.Array, rank: int) -> jax.Array:
    """The model's output: channels last already (Keras' order)."""
    return h


def perturb(h: jax.Array, scale: float, seed: int, index: int) -> jax.Array:
    """``h * (1 + d)``, ``d`` uniform in ``[-scale, scale]`` from the key of
    ``seed`` with ``index`` folded in (``native.protocol.Ops.perturb``)."""
    key = jax.random.fold_in(jax.random.PRNGKey(seed), index)
    d = jax.random.uniform(key, h.shape, h.dtype, minval=-scale, maxval=scale)
    return h * (1 + d)


def perturb_gradient(w: jax.Array, scale: float, seed: int, index: int) -> jax.Array:
    """``w`` in value, its gradient times ``1 + d`` (``d`` as ``perturb``
    draws it; ``native.protocol.Ops.perturb_gradient``)."""
    moved = perturb(w, scale, seed, index)
    return moved - lax.stop_gradient(moved - w)
