"""``repeat_vector``: a feature row ``(F,)`` repeated ``n`` times into a
sequence ``(n, F)`` (Keras' ``RepeatVector``), the usual bridge from an
encoder's state to a decoder's steps.  No parameters, no arithmetic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds.base import (
    Example,
    Kind,
    Layer,
    Mistake,
    Pick,
    Shape,
    needs_rank,
    no_flops,
    no_params,
)

# The mistake of repeating each feature in place (``repeat_interleave`` /
# ``np.repeat`` along the features) and reshaping to ``(n, F)``: the right
# shape, the values in another order.
INTERLEAVED = "repeat-interleaved"


@dataclass(frozen=True)
class Options:
    """Keras' ``RepeatVector`` argument: how many times the row repeats."""

    n: int


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    needs_rank(layer, shapes[0], (1,), "a feature row (batch, features)")
    if layer.options.n < 1:
        raise ValueError(
            f"repeat_vector layer {layer.name!r} has n={layer.options.n}; "
            "it repeats its row at least once"
        )
    return (layer.options.n, shapes[0][0])


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.RepeatVector(layer.options.n, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    n = config.get("n")
    if isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{cls} layer {name!r} has n={n!r}; a whole number")
    return {"kind": "repeat_vector", "name": name, "n": n}


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    return {"n": pick.integer(1, 4)}


MISTAKES = (
    Mistake(
        INTERLEAVED,
        "each feature repeated n times in place and reshaped to (n, F), "
        "not the whole row repeated",
        "kind-repeat-vector",
        changes=lambda layer: {"mistake": INTERLEAVED},
    ),
)


KIND = Kind(
    name="repeat_vector",
    summary="a feature row repeated n times into a sequence",
    options=Options,
    shape=shape,
    params=no_params,
    flops=no_flops,
    keras=keras,
    keras_classes=("RepeatVector",),
    read=read,
    example=Example(
        (5,),
        lambda: (
            Layer.of("encode", "dense", units=3, activation="tanh"),
            Layer.of("repeat", "repeat_vector", n=4),
            Layer.of("decode", "lstm", units=4),
        ),
    ),
    draw=draw,
    draw_ranks=(1,),
    mistakes=MISTAKES,
)
