"""Helpers the recurrent kinds (``lstm``, ``gru``, ``simple_rnn``) share: the
shape rule, the Keras words and the fuzz draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Layer, Pick, Shape

# Keras' regularizer arguments -> the roles they penalize.
REGULARIZERS = {**kw.KERNEL_AND_BIAS, "recurrent_regularizer": "recurrent_kernel"}


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    if len(given) != 2:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} needs a sequence (T, F), not {given}"
        )
    return (given[0], layer.size) if layer.return_sequences else (layer.size,)


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """A recurrent kind's ``Kind.draw`` (on a sequence)."""
    return {
        "units": pick.width(),
        "return_sequences": pick.boolean(),
        "use_bias": pick.boolean(),
    }


def keras_builder(cls: str) -> Callable[[Any, Layer, tuple[Shape, ...]], Any]:
    """A recurrent kind's ``Kind.keras``: Keras' layer ``cls`` of the
    layer's units, ``return_sequences``, bias and regularizers."""

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        return getattr(keras.layers, cls)(
            layer.size,
            return_sequences=layer.return_sequences,
            use_bias=layer.use_bias,
            name=layer.name,
            **kw.regularizer_args(keras, layer, REGULARIZERS),
        )

    return keras


def read(kind: str, cls: str, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    kw.must(cls, name, config, kw.RECURRENT)
    return {
        "kind": kind,
        "name": name,
        "units": config.get("units"),
        "return_sequences": bool(config.get("return_sequences", False)),
        **kw.bias_words(config),
        **kw.regularizers(cls, name, config, REGULARIZERS),
    }
