"""Helpers the recurrent kinds (``lstm``, ``gru``, ``simple_rnn``) share: the
shape rule, the Keras words and the fuzz draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import ACTIVATIONS, Layer, Pick, Shape

# Keras' activation inside a recurrent cell, its default.
TANH = "tanh"


@dataclass(frozen=True)
class Recurrent:
    """Keras' ``LSTM``, ``GRU`` and ``SimpleRNN`` arguments: ``units`` in
    the state, whether every step's state is returned
    (``return_sequences``) or the last, whether it has biases, and the
    ``activation`` inside the cell where Keras' default has a tanh (an
    LSTM's candidate and its output of the cell state, a GRU's candidate,
    a SimpleRNN's state; ``None``: linear), not after the layer
    (``Kind.inner_activation``).  Its gates stay sigmoids."""

    units: int
    return_sequences: bool = False
    use_bias: bool = True
    activation: str | None = TANH


# Keras' regularizer arguments -> the roles they penalize.
REGULARIZERS = {**kw.KERNEL_AND_BIAS, "recurrent_regularizer": "recurrent_kernel"}


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    o: Recurrent = layer.options
    if o.activation not in ACTIVATIONS:
        known = ", ".join(a or "linear" for a in ACTIVATIONS)
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} has activation {o.activation!r} in "
            f"its cell; known: {known}"
        )
    given = shapes[0]
    if len(given) != 2:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} needs a sequence (T, F), not {given}"
        )
    return (given[0], o.units) if o.return_sequences else (o.units,)


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """A recurrent kind's ``Kind.draw`` (on a sequence)."""
    drawn = {
        "units": pick.width(),
        "return_sequences": pick.boolean(),
        "use_bias": pick.boolean(),
    }
    activation = pick.one_of([TANH, *(a for a in ACTIVATIONS if a != TANH)])
    return drawn | cell_activation_words(activation)


def cell_activation_words(activation: str | None) -> dict[str, Any]:
    """The cell's ``activation`` in a document's words: written only when
    it is not Keras' tanh (so the documents of older files keep their
    digest), ``linear`` for none."""
    return {} if activation == TANH else {"activation": activation or "linear"}


def keras_builder(cls: str) -> Callable[[Any, Layer, tuple[Shape, ...]], Any]:
    """A recurrent kind's ``Kind.keras``: Keras' layer ``cls`` of the
    layer's units, ``return_sequences``, bias and regularizers."""

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        return getattr(keras.layers, cls)(
            layer.options.units,
            return_sequences=layer.options.return_sequences,
            use_bias=layer.options.use_bias,
            activation=layer.options.activation,
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
        **cell_activation_words(
            kw.activation(name, {"activation": config.get("activation", TANH)})
        ),
        **kw.regularizers(cls, name, config, REGULARIZERS),
    }
