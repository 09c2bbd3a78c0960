"""``embedding``: each token id's row of a table, ``(T,) -> (T, dim)``
(Keras' ``Embedding``); the model's first layer only.  Table ``(vocab,
dim)``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Mistake, Param, Shape, no_flops


@dataclass(frozen=True)
class Options:
    """Keras' ``Embedding`` arguments: ``input_dim`` token ids, each a row
    of ``output_dim`` values."""

    input_dim: int
    output_dim: int


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    if len(shapes[0]) != 1:
        raise ValueError(
            f"embedding layer {layer.name!r} needs token ids (T,), not shape "
            f"{shapes[0]}"
        )
    return (*shapes[0], layer.options.output_dim)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n = layer.name
    table = (layer.options.input_dim, layer.options.output_dim)
    return [Param(f"{n}/embeddings", table, "embedding", n, "embeddings")]


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Embedding(
        layer.options.input_dim,
        layer.options.output_dim,
        name=layer.name,
        **kw.regularizer_args(keras, layer, REGULARIZERS),
    )


REGULARIZERS = {"embeddings_regularizer": "embeddings"}
_MUST = (
    ("mask_zero", False),
    ("activity_regularizer", None),
    ("embeddings_constraint", None),
    ("lora_rank", None),
    ("quantization_config", None),
)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(cls, name, config, _MUST)
    return {
        "kind": "embedding",
        "name": name,
        "input_dim": config.get("input_dim"),
        "output_dim": config.get("output_dim"),
        **kw.regularizers(cls, name, config, REGULARIZERS),
    }


def off_by_one(a: Any, p: Param) -> Any:
    # Token id t looks up row t + 1: a table indexed as if ids started at 0
    # where they start at 1 (or the padding row forgotten).
    return a[[*range(1, a.shape[0]), 0]]


MISTAKES = (
    Mistake(
        "embedding-off-by-one",
        "token id t looks up the embedding row of t + 1",
        "transformer-tiny",
        params="embedding",
        corrupt=off_by_one,
    ),
)


KIND = Kind(
    name="embedding",
    summary="each token id's row of a table (a gather: no arithmetic)",
    options=Options,
    regularized=True,
    shape=shape,
    params=params,
    flops=no_flops,
    keras=keras,
    keras_classes=("Embedding",),
    read=read,
    not_drawn="drawn as the first layer of a token model, never in the body",
    mistakes=MISTAKES,
)
