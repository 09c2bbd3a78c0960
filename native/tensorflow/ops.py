"""The building blocks of the TensorFlow models, from ``tf.nn`` operators.

Activations are ``(N, H, W, C)`` (or ``(N, features)``, ``(N, T, F)``),
kernels as in Keras.  Every framework's ``ops.py`` offers these functions with
the same signatures (``native.protocol.Ops``); ``native.compose`` walks a
spec over them.  A layer's weights are ``params["<name>/kernel"]`` and
``params["<name>/bias"]`` and its settings (strides, padding,
``return_sequences``) come from the spec.

``valid`` and ``same`` padding are TensorFlow's own (its ``SAME`` is Keras'
rule, ``zoo.specs.same_padding``); a layer computing a deliberate mistake
(``Layer.mistake``) is padded by numbers (``zoo.specs.padding_of``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from native import compose
from native.protocol import Masked, score_masks, unmasked
from native.tensorflow.common import Params
from zoo.kinds import conv_transpose
from zoo.kinds.adapted import EPSILON as NORMALIZATION_EPSILON
from zoo.kinds.base import CAUSAL
from zoo.kinds.bidirectional import cell_layer
from zoo.kinds.gaussian import dropout_deviation
from zoo.kinds.global_pool import over_features
from zoo.kinds.repeat_vector import INTERLEAVED
from zoo.specs import Layer, ModelSpec, padding_of


def _padding(layer: Layer, h: tf.Tensor) -> Any:
    if not layer.mistake:
        return layer.options.padding.upper()
    rows, cols = padding_of(layer, h.shape[1]), padding_of(layer, h.shape[2])
    return [[0, 0], list(rows), list(cols), [0, 0]]


def dense(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """``h @ kernel + bias`` over the last axis; kernel ``(in, out)``."""
    h = tf.matmul(h, params[f"{name}/kernel"])  # (N, T, F) @ (F, u) broadcasts
    if not spec.layer(name).options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def time_distributed(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' ``TimeDistributed(Dense)``: the dense block on every step."""
    return dense(h, params, spec, name)


def conv2d(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Convolution with the layer's strides and padding (Keras' ``valid`` or
    ``same``); kernel ``(kh, kw, in, out)``."""
    layer = spec.layer(name)
    o = layer.options
    # tf.nn.convolution, not conv2d: TensorFlow's CPU kernels take no dilation
    # in a float64 gradient, which convolution's space-to-batch form avoids
    h = tf.nn.convolution(
        h,
        params[f"{name}/kernel"],
        o.stride,
        _padding(layer, h),
        dilations=o.dilation_rate,
    )
    if not layer.options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def max_pool(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The largest value of each window, with the layer's strides and padding."""
    layer = spec.layer(name)
    return tf.nn.max_pool2d(
        h, layer.options.pool_size, layer.options.stride, layer.options.padding.upper()
    )


def avg_pool(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The mean of each window over its positions inside the input (``SAME``
    leaves the padding out of the count, as Keras does)."""
    layer = spec.layer(name)
    return tf.nn.avg_pool2d(
        h, layer.options.pool_size, layer.options.stride, layer.options.padding.upper()
    )


def flatten(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    return tf.reshape(h, (tf.shape(h)[0], -1))  # (N, H, W, C) -> (N, H*W*C)


def lstm(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates, run over time with ``tf.scan``.  The input
    projection is done step by step, as Keras does (measured a few percent
    faster here than one projection of all steps up front).  Kernel
    ``(F, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)`` (none with
    ``use_bias=False``)."""
    return _lstm(h, params, spec.layer(name), name)


def _lstm(h: tf.Tensor, params: Params, layer: Layer, prefix: str) -> tf.Tensor:
    """``lstm`` of ``layer``'s options with the parameters under ``prefix``."""
    kernel = params[f"{prefix}/kernel"]
    recurrent = params[f"{prefix}/recurrent_kernel"]
    bias = params[f"{prefix}/bias"] if layer.options.use_bias else None
    act = _cell_activation(layer)
    h, inputs, states = unmasked(h)

    def cell(
        carry: tuple[tf.Tensor, tf.Tensor], x_t: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor]:
        h, c = carry
        projected = _gated(x_t, kernel, inputs)
        if bias is not None:
            projected = tf.nn.bias_add(projected, bias)
        z = projected + _gated(h, recurrent, states)
        i, f, g, o = tf.split(z, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * act(g)
        return tf.sigmoid(o) * act(c), c

    zeros = tf.zeros((tf.shape(h)[0], layer.options.units), h.dtype)
    time_major = tf.transpose(h, (1, 0, 2))  # (N, T, F) -> (T, N, F)
    hs, _ = tf.scan(cell, time_major, initializer=(zeros, zeros))
    if layer.options.return_sequences:
        return tf.transpose(hs, (1, 0, 2))  # (T, N, u) -> (N, T, u)
    return hs[-1]  # the last hidden state (N, u)


def _gated(v: tf.Tensor, w: tf.Tensor, masks: tf.Tensor | None) -> tf.Tensor:
    """``v @ w``; with ``masks`` (``native.protocol.Masked``: one per gate)
    each gate's block of ``w``'s columns takes ``v`` times its own mask."""
    if masks is None:
        return tf.matmul(v, w)
    blocks = tf.split(w, masks.shape[0], axis=1)
    parts = [tf.matmul(v * masks[g], b) for g, b in enumerate(blocks)]
    return tf.concat(parts, axis=-1)


def embedding(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Each token id's row of the table ``(vocab, dim)``: ``(N, T) -> (N, T,
    dim)``."""
    return tf.gather(params[f"{name}/embeddings"], h)


def conv1d(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Convolution over time with the layer's strides, padding and dilation
    (``tf.nn.convolution``, as ``conv2d``); kernel ``(k, in, out)``,
    sequences ``(N, T, F)``.  ``causal`` (which TensorFlow's kernels lack)
    and a deliberate mistake's padding are padded by hand."""
    layer = spec.layer(name)
    o = layer.options
    padding = o.padding.upper()
    if layer.mistake or o.padding == CAUSAL:
        h = tf.pad(h, [[0, 0], list(padding_of(layer, h.shape[1])), [0, 0]])
        padding = "VALID"
    kernel = params[f"{name}/kernel"]
    h = tf.nn.convolution(h, kernel, o.stride, padding, dilations=o.dilation_rate)
    if not layer.options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def max_pool1d(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The largest value of each window over time."""
    layer = spec.layer(name)
    return tf.nn.max_pool1d(
        h, layer.options.pool_size, layer.options.stride, layer.options.padding.upper()
    )


def avg_pool1d(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The mean of each window over its positions inside the sequence."""
    layer = spec.layer(name)
    return tf.nn.avg_pool1d(
        h, layer.options.pool_size, layer.options.stride, layer.options.padding.upper()
    )


def global_avg_pool(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The mean over every position (time steps, or rows and columns), or
    over each step's features (``_pooled``)."""
    h = _pooled(h, spec, name)
    return tf.reduce_mean(h, axis=list(range(1, len(h.shape) - 1)))


def _pooled(h: tf.Tensor, spec: ModelSpec, name: str) -> tf.Tensor:
    """What a global pool reduces over its middle axes: ``h``, or a sequence
    pooled ``channels_first`` with its features first
    (``zoo.kinds.global_pool.over_features``)."""
    return tf.transpose(h, (0, 2, 1)) if over_features(spec.layer(name)) else h


def gru(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Keras' GRU (``reset_after=True``) written out: ``x_t W + b_in`` and
    ``h U + b_rec`` each split into gates ``z, r, h``; ``z`` and ``r``
    sigmoid of their sums; the candidate ``tanh(x_h + r * rec_h)``; ``h = z *
    h + (1 - z) * candidate``, run over time with ``tf.scan``.  Kernel
    ``(F, 3u)``, recurrent kernel ``(u, 3u)``, bias ``(2, 3u)`` (none with
    ``use_bias=False``)."""
    return _gru(h, params, spec.layer(name), name)


def _gru(h: tf.Tensor, params: Params, layer: Layer, prefix: str) -> tf.Tensor:
    """``gru`` of ``layer``'s options with the parameters under ``prefix``."""
    kernel = params[f"{prefix}/kernel"]
    recurrent = params[f"{prefix}/recurrent_kernel"]
    bias = params[f"{prefix}/bias"] if layer.options.use_bias else None
    act = _cell_activation(layer)
    h, inputs, states = unmasked(h)

    def cell(state: tf.Tensor, x_t: tf.Tensor) -> tf.Tensor:
        x = _gated(x_t, kernel, inputs)
        if bias is not None:
            x = x + bias[0]
        x_z, x_r, x_h = tf.split(x, 3, axis=-1)
        rec = _gated(state, recurrent, states)
        if bias is not None:
            rec = rec + bias[1]
        h_z, h_r, h_h = tf.split(rec, 3, axis=-1)
        z, r = tf.sigmoid(x_z + h_z), tf.sigmoid(x_r + h_r)
        return z * state + (1 - z) * act(x_h + r * h_h)

    zeros = tf.zeros((tf.shape(h)[0], layer.options.units), h.dtype)
    time_major = tf.transpose(h, (1, 0, 2))  # (N, T, F) -> (T, N, F)
    hs = tf.scan(cell, time_major, initializer=zeros)
    if layer.options.return_sequences:
        return tf.transpose(hs, (1, 0, 2))  # (T, N, u) -> (N, T, u)
    return hs[-1]  # the last hidden state (N, u)


def simple_rnn(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Keras' SimpleRNN written out: ``h = tanh(x_t W + b + h U)`` from ``h =
    0``, run over time with ``tf.scan``, the input projection step by step as
    in ``lstm``.  Kernel ``(F, u)``, recurrent kernel ``(u, u)``, bias
    ``(u,)`` (none with ``use_bias=False``)."""
    return _simple_rnn(h, params, spec.layer(name), name)


def _simple_rnn(h: tf.Tensor, params: Params, layer: Layer, prefix: str) -> tf.Tensor:
    """``simple_rnn`` of ``layer``'s options with the parameters under
    ``prefix``."""
    kernel = params[f"{prefix}/kernel"]
    recurrent = params[f"{prefix}/recurrent_kernel"]
    bias = params[f"{prefix}/bias"] if layer.options.use_bias else None
    act = _cell_activation(layer)
    h, inputs, states = unmasked(h)

    def cell(state: tf.Tensor, x_t: tf.Tensor) -> tf.Tensor:
        projected = _gated(x_t, kernel, inputs)
        if bias is not None:
            projected = tf.nn.bias_add(projected, bias)
        return act(projected + _gated(state, recurrent, states))

    zeros = tf.zeros((tf.shape(h)[0], layer.options.units), h.dtype)
    time_major = tf.transpose(h, (1, 0, 2))  # (N, T, F) -> (T, N, F)
    hs = tf.scan(cell, time_major, initializer=zeros)
    if layer.options.return_sequences:
        return tf.transpose(hs, (1, 0, 2))  # (T, N, u) -> (N, T, u)
    return hs[-1]  # the last hidden state (N, u)


def _cell_activation(layer: Layer) -> Callable[[tf.Tensor], tf.Tensor]:
    """The activation inside ``layer``'s cell, where Keras' default has a
    tanh (``zoo.kinds.recurrent.Recurrent``)."""
    ops = sys.modules[__name__]
    return compose.activation_function(ops, layer.options.activation)


_CELLS = {"lstm": _lstm, "gru": _gru, "simple_rnn": _simple_rnn}


def bidirectional(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' ``Bidirectional`` over its ``lstm``, ``gru`` or ``simple_rnn``
    cell: one copy (``<name>/forward/...``) reads the steps in order, the
    other (``<name>/backward/...``) in reverse, its steps flipped back to time
    order with ``return_sequences``; merged by ``concat`` (forward first),
    ``sum``, ``ave`` or ``mul``."""
    layer = spec.layer(name)
    inner, run = cell_layer(layer), _CELLS[layer.options.cell]
    # each direction's own input: a pair in a training step with dropout
    first, second = h if isinstance(h, tuple) else (h, h)
    forward = run(first, params, inner, f"{name}/forward")
    sequence, inputs, states = unmasked(second)  # read from the last step
    second = Masked(tf.reverse(sequence, axis=[1]), inputs, states)
    backward = run(second, params, inner, f"{name}/backward")
    if layer.options.return_sequences:
        backward = tf.reverse(backward, axis=[1])  # back in time order
    if layer.options.merge_mode == "concat":
        return tf.concat([forward, backward], axis=-1)
    if layer.options.merge_mode == "sum":
        return forward + backward
    if layer.options.merge_mode == "ave":
        return (forward + backward) / 2
    if layer.options.merge_mode == "mul":
        return forward * backward
    raise ValueError(f"unknown merge {layer.options.merge_mode!r} of layer {name!r}")


def dot_attention(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' dot-product ``Attention`` of ``(query, value[, key])``, each
    ``(N, T, F)``: softmax over the value's steps of ``query @ key^T`` (no
    scaling; the key is the value when not given), times the value."""
    query, value = h[0], h[1]
    key = h[2] if len(h) == 3 else value
    scores = tf.matmul(query, key, transpose_b=True)  # (N, Tq, Tv)
    return tf.matmul(tf.nn.softmax(scores, axis=-1), value)  # (N, Tq, Fv)


def conv2d_transpose(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' ``Conv2DTranspose``: the full scatter (``tf.nn.conv2d_transpose``,
    ``VALID``, ``(side - 1) * strides + kernel`` per axis), then each axis'
    output positions from ``start`` on (zeros past its end); kernel ``(kh,
    kw, out, in)``."""
    layer = spec.layer(name)
    kernel = params[f"{name}/kernel"]
    sides = h.shape[1], h.shape[2]
    full = [
        (side - 1) * layer.options.stride + layer.options.kernel_size for side in sides
    ]
    shape = [tf.shape(h)[0], *full, kernel.shape[2]]
    h = tf.nn.conv2d_transpose(h, kernel, shape, layer.options.stride, "VALID")
    begins = [conv_transpose.start(layer, side) for side in sides]
    ends = [
        b + conv_transpose.side_out(layer, s)
        for b, s in zip(begins, sides, strict=True)
    ]
    short = [max(end - f, 0) for end, f in zip(ends, full, strict=True)]
    if any(short):  # valid with strides > kernel: zeros after the scatter
        h = tf.pad(h, [[0, 0], [0, short[0]], [0, short[1]], [0, 0]])
    h = h[:, begins[0] : ends[0], begins[1] : ends[1], :]
    if not layer.options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def _depthwise(h: tf.Tensor, kernel: tf.Tensor, layer: Layer) -> tf.Tensor:
    """Each channel convolved on its own with the layer's strides and
    padding; kernel ``(kh, kw, C, m)``, output channel ``c * m + k``."""
    strides = [1, layer.options.stride, layer.options.stride, 1]
    return tf.nn.depthwise_conv2d(h, kernel, strides, _padding(layer, h))


def depthwise_conv2d(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' ``DepthwiseConv2D`` (``tf.nn.depthwise_conv2d``): each channel
    ``c`` convolved with its ``m`` kernels into channels ``c * m + k``;
    kernel ``(kh, kw, C, m)``, bias ``(C * m,)``."""
    layer = spec.layer(name)
    h = _depthwise(h, params[f"{name}/kernel"], layer)
    if not layer.options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def separable_conv2d(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Keras' ``SeparableConv2D``: the depthwise convolution (kernel ``(kh,
    kw, C, m)``), then the 1x1 ``pointwise_kernel`` ``(1, 1, C * m,
    filters)``, then the bias."""
    layer = spec.layer(name)
    h = _depthwise(h, params[f"{name}/depthwise_kernel"], layer)
    h = tf.nn.conv2d(h, params[f"{name}/pointwise_kernel"], 1, "VALID")
    if not layer.options.use_bias:
        return h
    return tf.nn.bias_add(h, params[f"{name}/bias"])


def layer_norm(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Over the last axis: ``(h - mean) / sqrt(variance + epsilon) * gamma +
    beta``, the variance without Bessel's correction, as Keras has it."""
    epsilon = spec.layer(name).options.epsilon
    mean = tf.reduce_mean(h, axis=-1, keepdims=True)
    variance = tf.reduce_mean(tf.square(h - mean), axis=-1, keepdims=True)
    mean, variance = compose.moved_statistics(
        perturb, spec, name, (mean, variance), h.shape[-1]
    )
    scaled = (h - mean) * tf.math.rsqrt(variance + epsilon)
    return scaled * params[f"{name}/gamma"] + params[f"{name}/beta"]


def _normalized(
    h: Any, stats: tuple[Any, Any], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """As Keras' ``ops.batch_normalization`` writes it: ``h * inv + (beta -
    mean * inv)`` with ``inv = gamma / sqrt(variance + epsilon)`` (no gamma
    or beta: ``scale`` or ``center`` off)."""
    (mean, variance), epsilon = stats, spec.layer(name).options.epsilon
    inv = tf.math.rsqrt(variance + epsilon)
    if f"{name}/gamma" in params:
        inv = inv * params[f"{name}/gamma"]
    shift = -mean * inv
    if f"{name}/beta" in params:
        shift = shift + params[f"{name}/beta"]
    return h * inv + shift


def batch_norm(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Inference: over the last (channel) axis with the moving statistics."""
    mean, variance = params[f"{name}/moving_mean"], params[f"{name}/moving_variance"]
    return _normalized(h, (mean, variance), params, spec, name)


def batch_norm_train(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """Training: with the batch's mean and variance over every axis but the
    last (the variance without Bessel's correction, as Keras has it); also
    returns those statistics for the moving averages."""
    axes = list(range(len(h.shape) - 1))
    mean = tf.reduce_mean(h, axis=axes)
    variance = tf.reduce_mean(tf.square(h - mean), axis=axes)
    return _normalized(h, (mean, variance), params, spec, name), mean, variance


def _seed(rng: Any, index: int) -> tf.Tensor:
    """Layer ``index``'s stateless seed ``(rng, index)``: ``rng`` the train
    step's count (0 when none is given).  Stateless, as Keras' TensorFlow
    backend draws: op determinism (which the equivalence checks turn on)
    refuses an unseeded random op."""
    step = tf.cast(0 if rng is None else rng, tf.int64)
    return tf.stack([step, tf.constant(index, tf.int64)])


def dropout(
    h: tf.Tensor, spec: ModelSpec, name: str, rng: Any, index: int
) -> tf.Tensor:
    """Each element kept with probability ``1 - rate`` and scaled by ``1 /
    (1 - rate)``, one draw shared along the layer's ``shared_axes`` (a
    channels-last layout: Keras' axes), drawn from ``_seed(rng, index)``."""
    o = spec.layer(name).options
    noise = None
    if o.shared_axes:
        sides = tf.unstack(tf.shape(h), num=h.shape.rank)
        noise = tf.stack([1 if a in o.shared_axes else s for a, s in enumerate(sides)])
    return tf.nn.experimental.stateless_dropout(
        h, o.rate, _seed(rng, index), noise_shape=noise
    )


def dropout_mask(
    h: tf.Tensor, size: tuple[int, int], rate: float, rng: Any, index: int
) -> tf.Tensor:
    """Masks ``(count, N, width)`` of a recurrent layer's cells
    (``native.protocol.Ops.dropout_mask``), from ``_seed(rng, index)``."""
    count, width = size
    ones = tf.ones(tf.stack([count, tf.shape(h)[0], width]), h.dtype)
    return tf.nn.experimental.stateless_dropout(ones, rate, _seed(rng, index))


def gaussian_noise(
    h: tf.Tensor, spec: ModelSpec, name: str, rng: Any, index: int
) -> tf.Tensor:
    """``h + stddev * n``, ``n`` standard normal per value."""
    n = tf.random.stateless_normal(tf.shape(h), _seed(rng, index), dtype=h.dtype)
    return h + spec.layer(name).options.stddev * n


def gaussian_dropout(
    h: tf.Tensor, spec: ModelSpec, name: str, rng: Any, index: int
) -> tf.Tensor:
    """``h * (1 + s * n)``, ``n`` standard normal per value, ``s = sqrt(rate
    / (1 - rate))``."""
    n = tf.random.stateless_normal(tf.shape(h), _seed(rng, index), dtype=h.dtype)
    return h * (1 + dropout_deviation(spec.layer(name).options) * n)


def attention(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Keras' ``MultiHeadAttention`` over one sequence ``(N, T, F)`` as query,
    key and value: each projected to ``(N, T, heads, key_dim)`` by kernels
    ``(F, heads, key_dim)`` plus biases, the query scaled by
    ``1 / sqrt(key_dim)``, softmax over the keys of ``q . k``, the values
    mixed by those weights, projected back by ``(heads, key_dim, F)`` (no
    biases with ``use_bias=False``); in a training step with ``dropout`` the
    weights times their masks (``native.protocol.Masked``)."""
    use_bias = spec.layer(name).options.use_bias
    h, masks = score_masks(h)

    def project(part: str) -> tf.Tensor:  # (N, T, F) -> (N, T, heads, key_dim)
        projected = tf.einsum("ntf,fhk->nthk", h, params[f"{name}/{part}/kernel"])
        if not use_bias:
            return projected
        return projected + params[f"{name}/{part}/bias"]

    q, k, v = project("query"), project("key"), project("value")
    q = q / tf.sqrt(tf.cast(q.shape[-1], q.dtype))  # Keras scales the query
    scores = tf.einsum("nthk,nshk->nhts", q, k)  # (N, heads, T, T)
    weights = tf.nn.softmax(scores, axis=-1)
    if masks is not None:  # (heads, N, T * T), one per head: dropped weights
        weights = weights * tf.reshape(
            tf.transpose(masks, (1, 0, 2)), tf.shape(weights)
        )
    mixed = tf.einsum("nhts,nshk->nthk", weights, v)
    out = tf.einsum("nthk,hkf->ntf", mixed, params[f"{name}/attention_output/kernel"])
    if not use_bias:
        return out
    return out + params[f"{name}/attention_output/bias"]


def add(h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str) -> Any:
    """The sum of the outputs the layer takes (a residual connection); added
    in order where one broadcasts (``tf.add_n`` takes one shape)."""
    if len({tuple(t.shape) for t in h}) == 1:
        return tf.add_n(list(h))
    out = h[0]
    for other in h[1:]:
        out = out + other
    return out


def subtract(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The first output the layer takes minus the second."""
    return h[0] - h[1]


def multiply(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The elementwise product of the outputs the layer takes, in their order."""
    out = h[0]
    for other in h[1:]:
        out = out * other
    return out


def average(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The elementwise mean of the outputs the layer takes: summed in their
    order, then divided by their count, as Keras does."""
    out = h[0]
    for other in h[1:]:
        out = out + other
    return out / len(h)


def maximum(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The elementwise largest of the outputs the layer takes."""
    out = h[0]
    for other in h[1:]:
        out = tf.maximum(out, other)
    return out


def minimum(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The elementwise smallest of the outputs the layer takes."""
    out = h[0]
    for other in h[1:]:
        out = tf.minimum(out, other)
    return out


def concatenate(
    h: tuple[tf.Tensor, ...], params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The outputs the layer takes joined along the last axis (features, or
    an image's channels)."""
    return tf.concat(list(h), axis=-1)


def global_max_pool(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """The largest value over every position (time steps, or rows and
    columns), or over each step's features (``_pooled``)."""
    h = _pooled(h, spec, name)
    return tf.reduce_max(h, axis=list(range(1, len(h.shape) - 1)))


def activation(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The identity: ``native.compose`` applies the layer's activation."""
    return h


def prelu(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """``relu(h) - alpha * relu(-h)`` as Keras writes it (``max(h, 0) + alpha
    * min(h, 0)``); alpha as the input without the batch, 1 on shared axes."""
    return tf.nn.relu(h) - params[f"{name}/alpha"] * tf.nn.relu(-h)


def rescaling(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """``h * scale + offset``."""
    layer = spec.layer(name)
    return h * layer.options.scale + layer.options.offset


def normalization(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """Over the last axis: ``(h - mean) / max(sqrt(variance), 1e-7)`` with the
    adapted ``mean`` and ``variance`` ``(F,)``, as Keras' ``Normalization``."""
    mean, variance = params[f"{name}/mean"], params[f"{name}/variance"]
    return (h - mean) / tf.maximum(tf.sqrt(variance), NORMALIZATION_EPSILON)


def reshape(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """``(N, ...) -> (N, *target)`` in Keras' element order (the layout's own)."""
    return tf.reshape(h, [tf.shape(h)[0], *spec.layer(name).options.target_shape])


def permute(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """The axes after the batch in the order ``target`` gives (from 1)."""
    return tf.transpose(h, [0, *spec.layer(name).options.dims])


def repeat_vector(
    h: tf.Tensor, params: Params, spec: ModelSpec, name: str
) -> tf.Tensor:
    """``(N, F) -> (N, n, F)``: the row repeated ``n`` times (the mistake
    ``repeat-interleaved``: each feature repeated in place, then reshaped)."""
    layer = spec.layer(name)
    n = layer.options.n
    if layer.mistake == INTERLEAVED:
        return tf.reshape(tf.repeat(h, n, axis=1), [tf.shape(h)[0], n, h.shape[1]])
    return tf.repeat(h[:, None, :], n, axis=1)


def _widths(h: tf.Tensor, spec: ModelSpec, name: str) -> list[tuple[int, int]]:
    """A zero padding's or cropping's widths, (before, after) per axis of a
    sequence's steps or an image's rows and columns."""
    t = spec.layer(name).options.widths
    return [(t[2 * axis], t[2 * axis + 1]) for axis in range(len(h.shape) - 2)]


def zero_padding(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Zeros added before and after the steps, or the rows and columns."""
    return tf.pad(h, [[0, 0], *map(list, _widths(h, spec, name)), [0, 0]])


def cropping(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Values cut from before and after the steps, or the rows and columns."""
    cuts = [
        slice(before, h.shape[axis + 1] - after)
        for axis, (before, after) in enumerate(_widths(h, spec, name))
    ]
    return h[(slice(None), *cuts)]


def upsampling(h: tf.Tensor, params: Params, spec: ModelSpec, name: str) -> tf.Tensor:
    """Each step, or each row and each column, repeated ``target`` times
    (nearest)."""
    for axis, times in enumerate(spec.layer(name).options.size, start=1):
        h = tf.repeat(h, times, axis=axis)
    return h


def gelu(h: tf.Tensor) -> tf.Tensor:
    """Keras' default GELU, the exact one: ``h / 2 * (1 + erf(h / sqrt(2)))``."""
    return 0.5 * h * (1 + tf.math.erf(h / tf.sqrt(tf.constant(2, h.dtype))))


def gelu_tanh(h: tf.Tensor) -> tf.Tensor:
    """GELU by its tanh approximation: only the fault ``gelu-tanh`` asks."""
    inner = math.sqrt(2 / math.pi) * (h + 0.044715 * h**3)
    return 0.5 * h * (1 + tf.tanh(inner))


def relu(h: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(h)


def tanh(h: tf.Tensor) -> tf.Tensor:
    return tf.tanh(h)


def sigmoid(h: tf.Tensor) -> tf.Tensor:
    return tf.sigmoid(h)


def softmax(h: tf.Tensor, image: bool) -> tf.Tensor:
    """Over the last axis, the channels (Keras' layout here, images too)."""
    return tf.nn.softmax(h, axis=-1)


def elu(h: tf.Tensor, slope: float) -> tf.Tensor:
    """``h`` above 0, ``slope * (exp(h) - 1)`` below, as Keras' TensorFlow
    backend computes it from ``tf.nn.elu``."""
    res = tf.nn.elu(h)
    if slope == 1:
        return res
    return tf.where(h > 0, res, slope * res)


def selu(h: tf.Tensor) -> tf.Tensor:
    """``SELU_SCALE * elu(h)`` with ``SELU_ALPHA`` (``tf.nn.selu``'s constants)."""
    return tf.nn.selu(h)


def silu(h: tf.Tensor) -> tf.Tensor:
    """``h * sigmoid(h)``."""
    return tf.nn.silu(h)


def softplus(h: tf.Tensor) -> tf.Tensor:
    """``log(1 + exp(h))``, computed stably."""
    return tf.math.softplus(h)


def leaky_relu(h: tf.Tensor, slope: float) -> tf.Tensor:
    """``h`` above 0, ``slope * h`` below: ``tf.nn.leaky_relu`` as Keras'
    TensorFlow backend calls it, but in a float64 run, where that op's
    ``alpha``, a float32 attribute, would be ``f32(slope)`` (0.2 in float32
    is 1.5e-8 off: finding d8b231ec1c, native TensorFlow's float64 run
    voted out as computed in float32), the slope in the tensor's dtype."""
    if h.dtype == tf.float64:
        return tf.where(h > 0, h, h * tf.constant(slope, tf.float64))
    return tf.nn.leaky_relu(h, alpha=slope)


def relu6(h: tf.Tensor) -> tf.Tensor:
    """``min(max(h, 0), 6)``."""
    return tf.nn.relu6(h)


def outputs(h: tf.Tensor, rank: int) -> tf.Tensor:
    """The model's output: channels last already (Keras' order)."""
    return h


def perturb(h: tf.Tensor, scale: float, seed: int, index: int) -> tf.Tensor:
    """``h * (1 + d)``, ``d`` uniform in ``[-scale, scale]`` drawn statelessly
    from ``(seed, index)`` (``native.protocol.Ops.perturb``)."""
    d = tf.random.stateless_uniform(
        tf.shape(h), (seed, index), minval=-scale, maxval=scale, dtype=h.dtype
    )
    return h * (1 + d)


def perturb_gradient(w: tf.Tensor, scale: float, seed: int, index: int) -> tf.Tensor:
    """``w`` in value, its gradient times ``1 + d`` (``d`` as ``perturb``
    draws it; ``native.protocol.Ops.perturb_gradient``)."""
    moved = perturb(w, scale, seed, index)
    return moved - tf.stop_gradient(moved - w)
