"""The global pools: ``global_avg_pool`` (the mean over every position,
``GlobalAveragePooling1D``/``2D``) and ``global_max_pool`` (the largest,
``GlobalMaxPooling1D``/``2D``): a sequence ``(T, F)`` or images ``(H, W,
C)`` to ``(F,)``.  No parameters.  They differ in one word, so they share
this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, NoOptions, Shape, no_options, no_params

_CLASS = {
    "global_avg_pool": "GlobalAveragePooling",
    "global_max_pool": "GlobalMaxPooling",
}


def _kind(kind: str) -> Kind:
    stem = _CLASS[kind]

    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        if len(shapes[0]) not in (2, 3):
            raise ValueError(
                f"{kind} layer {layer.name!r} needs a sequence (T, F) or images "
                f"(H, W, C), not {shapes[0]}"
            )
        return (shapes[0][-1],)

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        # the sums (or compares), then one division each for the mean
        divisions = math.prod(out) if kind == "global_avg_pool" else 0
        return 0, math.prod(shapes[0]) + divisions

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        rank = "1D" if len(shapes[0]) == 2 else "2D"
        return getattr(keras.layers, stem + rank)(name=layer.name)

    def read(
        cls: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        kw.must(cls, name, config, (*kw.CHANNELS_LAST, ("keepdims", False)))
        return {"kind": kind, "name": name}

    return Kind(
        name=kind,
        summary=f"the {'mean' if 'avg' in kind else 'largest'} over every position",
        options=NoOptions,
        shape=shape,
        params=no_params,
        flops=flops,
        keras=keras,
        keras_classes=(stem + "1D", stem + "2D"),
        read=read,
        draw=no_options,
        draw_ranks=(2, 3),
    )


KINDS = tuple(_kind(kind) for kind in _CLASS)
