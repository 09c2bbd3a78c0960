"""Helpers the recurrent kinds (``lstm``, ``gru``, ``simple_rnn``) share: the
shape rule, the Keras words and the fuzz draw."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import ACTIVATIONS, Layer, Mask, Pick, Shape

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
    the rate of Keras' masks on every step's input in a training step;
    ``recurrent_dropout``: the rate of its masks on the state before each
    step; both drawn by the cell once per sequence (``cell_masks``)."""

    units: int
    return_sequences: bool = False
    use_bias: bool = True
    activation: str | None = TANH
    dropout: float = 0.0
    recurrent_dropout: float = 0.0


# The gates of each cell, in Keras' order (LSTM ``i, f, c, o``; GRU ``z, r,
# h``; SimpleRNN's one).  Keras 3.15's cell (``DropoutRNNCell``) draws its
# masks once per sequence, on the first step, and returns them again at
# every other.  With ``recurrent_dropout`` it switches to its first
# implementation (``implementation=1``), which multiplies the state, and the
# input with ``dropout``, by a mask of their own before each gate's product;
# with ``dropout`` alone its second multiplies every step's input by one
# mask before the one product of all gates, which is one mask for every
# gate.
GATES = {"lstm": 4, "gru": 3, "simple_rnn": 1}


def cell_masks(
    layer: Layer, cell: str, copies: tuple[str, ...] = ()
) -> tuple[Mask, ...]:
    """The masks ``layer`` (a recurrent layer, or a Bidirectional of
    ``copies`` over ``cell``) draws inside its cells per sequence in a
    training step (``GATES``' comment): with ``recurrent_dropout`` one per
    gate on the state, and one per gate on the input with ``dropout`` too;
    with ``dropout`` alone one on the input for every gate; none
    without either."""
    o = layer.options
    gates = GATES[cell] if o.recurrent_dropout else 1
    found = []
    for copy in copies or ("",):
        prefix = f"{layer.name}/{copy}" if copy else layer.name
        if o.dropout:
            found.append(
                Mask(
                    f"{prefix}/input_masks", copy, "input", gates, o.dropout, "dropout"
                )
            )
        if o.recurrent_dropout:
            found.append(
                Mask(
                    f"{prefix}/state_masks",
                    copy,
                    "state",
                    gates,
                    o.recurrent_dropout,
                    "recurrent_dropout",
                )
            )
    return tuple(found)


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
    for option in ("dropout", "recurrent_dropout"):
        rate = getattr(o, option)
        if not 0.0 <= rate < 1.0:
            raise ValueError(
                f"{layer.kind} layer {layer.name!r} has {option} {rate!r}; it "
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
    dropout, recurrent_dropout = pick.one_of([0.0, 0.3]), pick.one_of([0.0, 0.25])
    return (
        drawn
        | cell_activation_words(activation)
        | ({"dropout": dropout} if dropout else {})
        | ({"recurrent_dropout": recurrent_dropout} if recurrent_dropout else {})
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
            recurrent_dropout=layer.options.recurrent_dropout,
            name=layer.name,
            **kw.regularizer_args(keras, layer, REGULARIZERS),
        )

    return keras


def read(kind: str, cls: str, name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    kw.must(cls, name, config, kw.RECURRENT)
    dropout = config.get("dropout", 0.0)
    recurrent_dropout = config.get("recurrent_dropout", 0.0)
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
        **({"recurrent_dropout": recurrent_dropout} if recurrent_dropout else {}),
        **kw.regularizers(cls, name, config, REGULARIZERS),
    }
