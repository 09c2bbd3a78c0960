"""``prelu``: Keras' ``PReLU``, ``max(h, 0) + alpha * min(h, 0)`` with a
trained ``alpha`` per value of an example, or shared along the axes
``target`` names (Keras' ``shared_axes``, counted from 1 as Keras counts
them after the batch: ``(1, 2)`` is one alpha per channel of images)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Param, Pick, Shape, one_input


@dataclass(frozen=True)
class Options:
    """Keras' ``PReLU`` argument: the axes (counted from 1 after the batch)
    that share one ``alpha`` (``shared_axes``; empty: Keras' ``None``, an
    alpha per value)."""

    shared_axes: tuple[int, ...] = ()


def alpha_shape(layer: Layer, shape: Shape) -> Shape:
    return tuple(
        1 if axis + 1 in layer.options.shared_axes else side
        for axis, side in enumerate(shape)
    )


def _shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    shared = layer.options.shared_axes
    wrong = [a for a in shared if not 1 <= a <= len(shapes[0])]
    if wrong or len(set(shared)) != len(shared):
        raise ValueError(
            f"prelu layer {layer.name!r} shares axes {list(shared)}; each "
            f"must be an axis of its input {shapes[0]} (1 to {len(shapes[0])}), once"
        )
    return one_input(layer, shapes)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n = layer.name
    return [Param(f"{n}/alpha", alpha_shape(layer, shapes[0]), "prelu", n, "alpha")]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return 0, 3 * math.prod(out)  # two clamps, a product and a sum, fused


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    shared = list(layer.options.shared_axes) or None
    return keras.layers.PReLU(shared_axes=shared, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(
        cls, name, config, (("alpha_regularizer", None), ("alpha_constraint", None))
    )
    shared = config.get("shared_axes")
    if isinstance(shared, int) and not isinstance(shared, bool):
        shared = [shared]
    entry: dict[str, Any] = {"kind": "prelu", "name": name}
    if shared:
        entry["shared_axes"] = shared
    return entry


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    shared = list(range(1, len(shape)))  # every axis but the channels
    return {"shared_axes": shared if pick.boolean() else []}


KIND = Kind(
    name="prelu",
    summary="a ReLU with a trained slope below 0",
    options=Options,
    shape=_shape,
    params=params,
    flops=flops,
    keras=keras,
    keras_classes=("PReLU",),
    read=read,
    draw=draw,
    draw_ranks=(1, 2, 3),
)
