"""``dot_attention``: Keras' ``Attention`` (dot-product, Luong style) over
two or three sequences it takes in this order: a query ``(Tq, F)``, a
value ``(Tv, Fv)`` and a key ``(Tv, F)`` (the value when not given).
Scores ``query @ key.T`` (no scaling), a softmax over the ``Tv`` steps,
then the weights times the value: ``(Tq, Fv)``.  No parameters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    ACTIVATION_FLOPS,
    Kind,
    Layer,
    Mistake,
    NoOptions,
    Shape,
    no_options,
    no_params,
)


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    query, value = shapes[0], shapes[1]
    key = shapes[2] if len(shapes) == 3 else value
    fits = (
        len(shapes) <= 3
        and all(len(s) == 2 for s in shapes)
        and query[1] == key[1]
        and key[0] == value[0]
    )
    if not fits:
        raise ValueError(
            f"dot_attention layer {layer.name!r} gets {list(shapes)}; it takes a "
            "query (Tq, F), a value (Tv, Fv) and optionally a key (Tv, F)"
        )
    return query[0], value[1]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    """The two products as matmul; the softmax (3 per score) elementwise."""
    (steps_q, features), (steps_v, values) = shapes[0], shapes[1]
    matmul = 2 * steps_q * steps_v * features + 2 * steps_q * steps_v * values
    return matmul, ACTIVATION_FLOPS["softmax"] * steps_q * steps_v


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Attention(name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(
        cls,
        name,
        config,
        (("use_scale", False), ("score_mode", "dot"), ("dropout", 0.0)),
    )
    return {"kind": "dot_attention", "name": name}


MISTAKES = (
    Mistake(
        "query-key-swapped",
        "a dot-product attention taking its query and key the wrong way round",
        "kinds-seq",
        # given a key of the query's shape: exchanging the two computes
        # another layer of the same shape
        hits=lambda layer, shapes: len(layer.inputs) == 3,
        changes=lambda layer: {"inputs": layer.inputs[::-1]},
    ),
)


KIND = Kind(
    name="dot_attention",
    summary="dot-product attention of a query over a value (and key)",
    options=NoOptions,
    shape=shape,
    params=no_params,
    flops=flops,
    keras=keras,
    keras_classes=("Attention",),
    read=read,
    takes=0,
    draw=no_options,  # the fuzzer gives it one sequence as query and value
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
