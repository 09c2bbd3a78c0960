"""``time_distributed``: Keras' ``TimeDistributed(Dense(...))``, the dense
layer applied to every step of a sequence ``(T, F) -> (T, units)``, as
token taggers write their per-step head.  Its arithmetic is ``dense``'s on
a sequence (kernel ``(F, units)``, bias ``(units,)``, the same parameter
kinds), so every framework's block is its dense block; the Keras path builds
the wrapper the user wrote.  Only a ``Dense`` inside is read (issue 79 has
the rest: a wrapped ``Conv2D``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import dense
from zoo.kinds.base import Example, Kind, Layer, Param, Pick, Shape, needs_rank


@dataclass(frozen=True)
class Options:
    """The wrapped ``Dense``'s arguments: ``units`` outputs per step, the
    ``activation`` after (``None``: linear), and whether it has a bias."""

    units: int
    activation: str | None = None
    use_bias: bool = True


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    needs_rank(layer, shapes[0], (2,), "a sequence (batch, steps, features)")
    return (shapes[0][0], layer.options.units)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    return dense.params(layer, shapes)


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    o: Options = layer.options
    inner = keras.layers.Dense(o.units, o.activation, use_bias=o.use_bias)
    return keras.layers.TimeDistributed(inner, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    inner = config.get("layer")
    if not isinstance(inner, Mapping) or not isinstance(inner.get("config"), Mapping):
        raise ValueError(f"{cls} layer {name!r} wraps no layer the file describes")
    wrapped = inner.get("class_name")
    if wrapped != "Dense" or inner.get("module") not in ("keras.layers", None):
        raise ValueError(
            f"{cls} layer {name!r} wraps a {wrapped!r}; the tool reads "
            "TimeDistributed(Dense) only"
        )
    entry = dense.read("Dense", name, inner["config"], built)
    if any(key.endswith("regularizer") or key == "regularize" for key in entry):
        raise ValueError(
            f"{cls} layer {name!r} wraps a Dense with a regularizer; the tool "
            "reads TimeDistributed(Dense) without one"
        )
    return {**entry, "kind": "time_distributed"}


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    return dense.draw(pick, shape)


KIND = Kind(
    name="time_distributed",
    summary="TimeDistributed(Dense): a dense layer on every step of a sequence",
    options=Options,
    shape=shape,
    params=params,
    flops=dense.flops,
    keras=keras,
    keras_classes=("TimeDistributed",),
    read=read,
    shift="bias",
    example=Example(
        (6, 3),
        lambda: (
            Layer.of("steps", "lstm", units=4, return_sequences=True),
            Layer.of("tags", "time_distributed", units=5, activation="tanh"),
        ),
    ),
    draw=draw,
    draw_ranks=(2,),
)
