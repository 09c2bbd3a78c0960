"""Helpers the recurrent kinds (``lstm``, ``gru``, ``simple_rnn``) share: the
shape rule, the Keras words and the fuzz draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import ACTIVATIONS, Layer, Noise, Pick, Shape

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
    (``Kind.inner_activation``).  Its gates stay sigmoids.  ``dropout``:
    the rate of Keras' input dropout in a training step, one mask per
    sequence drawn by the cell and applied to every step's input
    (``INPUT_DROPOUT``); Keras' ``recurrent_dropout`` (masks per gate on
    the state) is refused."""

    units: int
    return_sequences: bool = False
    use_bias: bool = True
    activation: str | None = TANH
    dropout: float = 0.0


# Keras' input dropout of a recurrent layer without recurrent dropout: the
# cell draws one mask of the input's features per sequence (Keras 3.15's
# ``DropoutRNNCell.get_dropout_mask`` on the first step) and every step's
# input is multiplied by it, so it is a dropout of the sequence that shares
# one draw along the steps (axis 1), drawn before the cell runs.  With
# ``recurrent_dropout`` Keras draws one mask per gate instead, inside the
# cell: refused.
INPUT_DROPOUT = Noise(amount="dropout", draws="mask", shared_axes=(1,))


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
    if not 0.0 <= o.dropout < 1.0:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} has dropout {o.dropout!r}; it "
            "must be at least 0 and below 1"
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
    dropout = pick.one_of([0.0, 0.3])
    return (
        drawn
        | cell_activation_words(activation)
        | ({"dropout": dropout} if dropout else {})
    )


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
            dropout=layer.options.dropout,
            name=layer.name,
            **kw.regularizer_args(keras, layer, REGULARIZERS),
        )

    return keras


def read(kind: str, cls: str, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    if config.get("recurrent_dropout", 0.0):
        raise ValueError(
            f"{cls} layer {name!r} has recurrent_dropout="
            f"{config['recurrent_dropout']!r}, which the tool does not compute "
            "(Keras draws a mask per gate inside the cell then, on the input "
            "and on the state); it needs recurrent_dropout=0.0"
        )
    kw.must(cls, name, config, kw.RECURRENT)
    dropout = config.get("dropout", 0.0)
    return {
        "kind": kind,
        "name": name,
        "units": config.get("units"),
        "return_sequences": bool(config.get("return_sequences", False)),
        **kw.bias_words(config),
        **cell_activation_words(
            kw.activation(name, {"activation": config.get("activation", TANH)})
        ),
        **({"dropout": dropout} if dropout else {}),
        **kw.regularizers(cls, name, config, REGULARIZERS),
    }
