"""``dropout``: in a training step each value zeroed with probability
``rate`` and the rest scaled by ``1 / (1 - rate)``; the identity in
inference (Keras' ``Dropout``).  No parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Shape, no_flops, no_params, one_input


@dataclass(frozen=True)
class Options:
    """Keras' ``Dropout`` argument: the fraction ``rate`` dropped (0 when a
    document leaves it out, as it always has)."""

    rate: float = 0.0


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Dropout(layer.options.rate, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    # A mask shared along an axis (one per channel, say) draws something else.
    # The seed is not kept: trajectories are compared at rate 0
    # (zoo.specs.without_dropout) and each path's dropout checked on its own.
    kw.must(cls, name, config, (("noise_shape", None),))
    return {"kind": "dropout", "name": name, "rate": config.get("rate")}


KIND = Kind(
    name="dropout",
    summary="values dropped at a rate in training; the identity in inference",
    options=Options,
    shape=one_input,
    params=no_params,
    flops=no_flops,  # the identity in inference; a mask in training, uncounted
    keras=keras,
    keras_classes=("Dropout",),
    read=read,
    trains_differently=True,
    draw=lambda pick, shape: {"rate": pick.one_of([0.0, 0.5])},
    draw_ranks=(1, 2, 3),
)
