"""``rescaling``: ``h * scale + offset`` (Keras' ``Rescaling``, the usual
first layer of an image model: ``scale=1/255``).  No parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds.base import Kind, Layer, Shape, no_params, one_input


@dataclass(frozen=True)
class Options:
    """Keras' ``Rescaling`` arguments: ``h * scale + offset``."""

    scale: float = 1.0
    offset: float = 0.0


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return 0, 2 * math.prod(out)


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Rescaling(
        layer.options.scale, layer.options.offset, name=layer.name
    )


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": "rescaling", "name": name}
    for word, default in (("scale", 1.0), ("offset", 0.0)):
        value = config.get(word, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(
                f"Rescaling layer {name!r} has {word}={value!r}; the tool computes "
                "one number for all values (not one per channel)"
            )
        if value != default:
            entry[word] = float(value)
    return entry


KIND = Kind(
    name="rescaling",
    summary="h * scale + offset",
    options=Options,
    shape=one_input,
    params=no_params,
    flops=flops,
    keras=keras,
    keras_classes=("Rescaling",),
    read=read,
    draw=lambda pick, shape: {
        "scale": pick.one_of([0.5, 2.0]),
        "offset": pick.one_of([0.0, -0.5]),
    },
    draw_ranks=(1, 2, 3),
)
