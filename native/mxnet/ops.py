"""Dense, convolution and pooling from MXNet operators, for either namespace.

Operator attributes (units, filters, kernel size) must be static for
``mx.sym``, so they come from the spec's canonical shapes, never from arrays.
"""

from __future__ import annotations

from typing import Any

from zoo.specs import ModelSpec


def dense(F: Any, h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    _, units = spec.param(f"{name}/kernel").shape  # canonical (in, out)
    return F.FullyConnected(
        h, params[f"{name}/kernel"], params[f"{name}/bias"], num_hidden=units
    )


def conv2d(F: Any, h: Any, params: Any, spec: ModelSpec, name: str) -> Any:
    k, _, _, filters = spec.param(f"{name}/kernel").shape  # canonical (kh,kw,i,o)
    pad = k // 2 if spec.layer(name).padding == "same" else 0
    return F.Convolution(
        h,
        params[f"{name}/kernel"],
        params[f"{name}/bias"],
        kernel=(k, k),
        num_filter=filters,
        pad=(pad, pad),
    )


def pool(F: Any, h: Any, size: int, kind: str) -> Any:
    """``kind`` is ``max`` or ``avg``; stride equals the window, no padding."""
    return F.Pooling(h, kernel=(size, size), stride=(size, size), pool_type=kind)
