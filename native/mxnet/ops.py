"""The building blocks of the MXNet models, for either operator namespace.

Activations are ``(N, C, H, W)`` (or ``(N, features)``), weights ``(out, in,
...)`` as ``FullyConnected`` and ``Convolution`` want them.  Every framework's
``ops.py`` offers these functions with the same signatures; a layer's weights
are ``params["<name>/kernel"]`` and ``params["<name>/bias"]`` and its settings
come from the spec.

Each function picks its namespace from its input (``namespace``): ``mx.nd``
for an ``NDArray`` (imperative), ``mx.sym`` for a ``Symbol`` (inside a
hybridized block).  Operator attributes (units, filters, kernel size) must be
static for ``mx.sym``, so they come from the spec's canonical shapes, never
from arrays.
"""

from __future__ import annotations

from typing import Any

import mxnet as mx

from zoo.specs import ModelSpec


def namespace(h: Any) -> Any:
    """``mx.sym`` for a symbol (a hybridized pass), else ``mx.nd``."""
    return mx.sym if isinstance(h, mx.sym.Symbol) else mx.nd


def dense(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """``h @ weight.T + bias``; weight ``(out, in)``."""
    _, units = spec.param(f"{name}/kernel").shape  # canonical (in, out)
    return namespace(h).FullyConnected(
        h, params[f"{name}/kernel"], params[f"{name}/bias"], num_hidden=units
    )


def conv2d(h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    """Stride-1 convolution with the layer's padding (Keras' ``valid`` or
    ``same``); weight ``(out, in, kh, kw)``."""
    k, _, _, filters = spec.param(f"{name}/kernel").shape  # canonical (kh,kw,i,o)
    pad = k // 2 if spec.layer(name).padding == "same" else 0
    return namespace(h).Convolution(
        h,
        params[f"{name}/kernel"],
        params[f"{name}/bias"],
        kernel=(k, k),
        num_filter=filters,
        pad=(pad, pad),
    )


def _pool(h: Any, size: int, kind: str) -> Any:
    return namespace(h).Pooling(
        h, kernel=(size, size), stride=(size, size), pool_type=kind
    )


def max_pool(h: Any, size: int) -> Any:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return _pool(h, size, "max")


def avg_pool(h: Any, size: int) -> Any:
    """``size`` x ``size`` windows, stride ``size``, no padding."""
    return _pool(h, size, "avg")


def flatten(h: Any) -> Any:
    return namespace(h).flatten(h)  # (N, C, H, W) -> (N, C*H*W), C, H, W order


def relu(h: Any) -> Any:
    return namespace(h).relu(h)
