"""The global pools: ``global_avg_pool`` (the mean over every position,
``GlobalAveragePooling1D``/``2D``) and ``global_max_pool`` (the largest,
``GlobalMaxPooling1D``/``2D``): a sequence ``(T, F)`` or images ``(H, W,
C)`` to ``(F,)``; a sequence pooled ``channels_first`` (Keras reads it as
``(F, T)``) to ``(T,)``, over each step's features.  No parameters.  They
differ in one word, so they share this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Pick, Shape, no_params

_CLASS = {
    "global_avg_pool": "GlobalAveragePooling",
    "global_max_pool": "GlobalMaxPooling",
}
DATA_FORMATS = ("channels_last", "channels_first")


@dataclass(frozen=True)
class Options:
    """Keras' ``data_format``: ``channels_last`` pools over the positions;
    ``channels_first``, of a sequence only, over each step's features (Keras
    reads ``(T, F)`` as ``F`` positions of ``T`` channels)."""

    data_format: str = "channels_last"


def over_features(layer: Layer) -> bool:
    """Whether ``layer`` pools each step's features (``channels_first``),
    not every position's channels."""
    return bool(layer.options.data_format == "channels_first")


def fixes_length(layer: Layer) -> bool:
    """Whether ``layer`` is a global pool over each step's features, whose
    output has one value per step: its model takes its own length only."""
    return layer.kind in _CLASS and over_features(layer)


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """A sequence's pool now and then over its features."""
    if len(shape) == 2 and pick.one_of([False, False, True]):
        return {"data_format": "channels_first"}
    return {}


def _kind(kind: str) -> Kind:
    stem = _CLASS[kind]

    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        if len(shapes[0]) not in (2, 3):
            raise ValueError(
                f"{kind} layer {layer.name!r} needs a sequence (T, F) or images "
                f"(H, W, C), not {shapes[0]}"
            )
        if layer.options.data_format not in DATA_FORMATS:
            raise ValueError(
                f"{kind} layer {layer.name!r} has data_format "
                f"{layer.options.data_format!r}; known: {', '.join(DATA_FORMATS)}"
            )
        if over_features(layer):
            if len(shapes[0]) != 2:
                raise ValueError(
                    f"{kind} layer {layer.name!r} pools channels_first, which the "
                    f"tool computes over a sequence (T, F) only, not {shapes[0]}"
                )
            return (shapes[0][0],)
        return (shapes[0][-1],)

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        # the sums (or compares), then one division each for the mean
        divisions = math.prod(out) if kind == "global_avg_pool" else 0
        return 0, math.prod(shapes[0]) + divisions

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        rank = "1D" if len(shapes[0]) == 2 else "2D"
        return getattr(keras.layers, stem + rank)(
            data_format=layer.options.data_format, name=layer.name
        )

    def read(
        cls: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        fixed: list[tuple[str, Any]] = [("keepdims", False)]
        if cls.endswith("2D"):  # images' channels first: not computed
            fixed += kw.CHANNELS_LAST
        kw.must(cls, name, config, fixed)
        data_format = config.get("data_format", "channels_last")
        entry = {"kind": kind, "name": name}
        # left out when Keras' default, so a file read before keeps its digest
        return entry | (
            {"data_format": data_format} if data_format != "channels_last" else {}
        )

    return Kind(
        name=kind,
        summary=f"the {'mean' if 'avg' in kind else 'largest'} over every position",
        options=Options,
        shape=shape,
        params=no_params,
        flops=flops,
        keras=keras,
        keras_classes=(stem + "1D", stem + "2D"),
        read=read,
        draw=draw,
        draw_ranks=(2, 3),
    )


KINDS = tuple(_kind(kind) for kind in _CLASS)
