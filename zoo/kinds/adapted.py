"""``normalization``: Keras' ``Normalization`` over the last axis,
``(h - mean) / max(sqrt(variance), 1e-7)`` with the ``mean`` and
``variance`` ``(F,)`` that ``adapt`` set: state (``STATE_KINDS``) that no
training step changes, read with the weights."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, NoOptions, Param, Shape, no_options, one_input

# Keras' ``backend.epsilon()``, the least standard deviation it divides by.
EPSILON = 1e-7


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, features = layer.name, shapes[0][-1]
    return [
        Param(f"{n}/mean", (features,), "adapted_mean", n, "mean"),
        Param(f"{n}/variance", (features,), "adapted_variance", n, "variance"),
    ]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return 0, 2 * math.prod(out)  # a subtraction and a division


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Normalization(axis=-1, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(cls, name, config, (("invert", False), ("mean", None), ("variance", None)))
    axis = config.get("axis", -1)
    rank = len(built) if isinstance(built, list) else None
    if axis not in (-1, [-1]) and not (rank and axis in (rank - 1, [rank - 1])):
        raise ValueError(
            f"Normalization layer {name!r} keeps axis {axis!r}; the tool "
            "normalizes each feature of the last axis only (axis=-1)"
        )
    return {"kind": "normalization", "name": name}


KIND = Kind(
    name="normalization",
    summary="(h - mean) / sqrt(variance) with statistics adapt() set",
    options=NoOptions,
    shape=one_input,
    params=params,
    flops=flops,
    keras=keras,
    keras_classes=("Normalization",),
    read=read,
    draw=no_options,
    draw_ranks=(1, 2, 3),
)
