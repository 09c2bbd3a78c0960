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

from typing import Any

import mxnet as mx

from zoo.specs import ModelSpec, input_of, padding_of


def namespace(h: Any) -> Any:
    """``mx.sym`` for a symbol (a hybridized pass), else ``mx.nd``."""
    return mx.sym if isinstance(h, mx.sym.Symbol) else mx.nd


def _pads(h: Any, spec: ModelSpec, name: str) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) for layer ``name``: from the array's own
    shape imperatively; a symbol has none, so a hybridized pass (traced
    once) works it out from the spec's shapes."""
    layer = spec.layer(name)
    if layer.padding == "valid":
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


def dense(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``h @ weight.T + bias`` over the last axis; weight ``(out, in)``."""
    _, units = spec.param(f"{name}/kernel").shape  # canonical (in, out)
    return namespace(h).FullyConnected(
        h,
        params[f"{name}/kernel"],
        params[f"{name}/bias"],
        num_hidden=units,
        flatten=False,  # (N, T, F) stays a sequence, as in Keras
    )


def conv2d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Convolution with the layer's strides and padding (Keras' ``valid`` or
    ``same``); weight ``(out, in, kh, kw)``."""
    k, _, _, filters = spec.param(f"{name}/kernel").shape  # canonical (kh,kw,i,o)
    stride = spec.layer(name).stride
    top, bottom, left, right = _pads(h, spec, name)
    if (top, left) != (bottom, right):
        h, top, left = _padded(h, (top, bottom, left, right), 0.0), 0, 0
    return namespace(h).Convolution(
        h,
        params[f"{name}/kernel"],
        params[f"{name}/bias"],
        kernel=(k, k),
        stride=(stride, stride),
        num_filter=filters,
        pad=(top, left),
    )


def _pool(h: Any, spec: ModelSpec, name: str, kind: str) -> Any:
    layer = spec.layer(name)
    size, stride = (layer.size, layer.size), (layer.stride, layer.stride)
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
    return namespace(h).flatten(h)  # (N, C, H, W) -> (N, C*H*W), C, H, W order


def lstm(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """The cell written out: ``z = x_t W + h U + b`` split into gates in
    Keras' order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o *
    tanh(c)`` with sigmoid gates, run over time with ``contrib.foreach``
    (which also works hybridized, where the sequence length is not known in
    advance).  Weights ``(4u, F)``, ``(4u, u)``, bias ``(4u,)``, as
    ``FullyConnected`` wants them."""
    F = namespace(h)  # noqa: N806 (MXNet's name for the operator namespace)
    kernel, recurrent = params[f"{name}/kernel"], params[f"{name}/recurrent_kernel"]
    bias = params[f"{name}/bias"]
    layer = spec.layer(name)
    units = layer.size

    def cell(x_t: Any, states: list[Any]) -> Any:
        state, c = states
        z = F.FullyConnected(
            x_t, kernel, bias, num_hidden=4 * units
        ) + F.FullyConnected(state, recurrent, no_bias=True, num_hidden=4 * units)
        i, f, g, o = F.split(z, num_outputs=4, axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        state = F.sigmoid(o) * F.tanh(c)
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
    return F.swapaxes(steps, 0, 1) if layer.return_sequences else last


def relu(h: Any) -> Any:
    return namespace(h).relu(h)


def tanh(h: Any) -> Any:
    return namespace(h).tanh(h)


def sigmoid(h: Any) -> Any:
    return namespace(h).sigmoid(h)


def softmax(h: Any) -> Any:
    return namespace(h).softmax(h, axis=-1)
