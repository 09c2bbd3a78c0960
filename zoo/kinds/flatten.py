"""``flatten``: ``(...) -> (features,)`` in Keras' element order (an image's
``H, W, C``: ``native.layout``).  No parameters, no arithmetic."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    Kind,
    Layer,
    NoOptions,
    Shape,
    no_flops,
    no_options,
    no_params,
)


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    return (math.prod(shapes[0]),)


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Flatten(name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(cls, name, config, kw.CHANNELS_LAST)
    return {"kind": "flatten", "name": name}


KIND = Kind(
    name="flatten",
    summary="every value of an example in one row, in Keras' order",
    options=NoOptions,
    shape=shape,
    params=no_params,
    flops=no_flops,
    keras=keras,
    keras_classes=("Flatten",),
    read=read,
    draw=no_options,
    draw_ranks=(2, 3),
)
