"""Helpers the recurrent kinds (``lstm``, ``gru``, ``simple_rnn``) share: the
shape rule, the Keras words and the fuzz draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Layer, Pick, Shape


@dataclass(frozen=True)
class Recurrent:
    """Keras' ``LSTM``, ``GRU`` and ``SimpleRNN`` arguments: ``units`` in
    the state, whether every step's state is returned
    (``return_sequences``) or the last, and whether it has biases."""

    units: int
    return_sequences: bool = False
    use_bias: bool = True


# Keras' regularizer arguments -> the roles they penalize.
REGULARIZERS = {**kw.KERNEL_AND_BIAS, "recurrent_regularizer": "recurrent_kernel"}


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    if len(given) != 2:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} needs a sequence (T, F), not {given}"
        )
    o: Recurrent = layer.options
    return (given[0], o.units) if o.return_sequences else (o.units,)


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
            layer.options.units,
            return_sequences=layer.options.return_sequences,
            use_bias=layer.options.use_bias,
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
