"""``dense``: ``h @ kernel + bias`` over the last axis (Keras' ``Dense``), on
features ``(F,)`` or on each step of a sequence ``(T, F)``.  Kernel
``(in, out)``, bias ``(out,)``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Param, Pick, Shape, bias, pick_activation


@dataclass(frozen=True)
class Options:
    """Keras' ``Dense`` arguments: ``units`` outputs, the ``activation``
    after (``None``: linear), and whether it has a bias."""

    units: int
    activation: str | None = None
    use_bias: bool = True


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    if len(given) not in (1, 2):
        raise ValueError(
            f"dense layer {layer.name!r} gets shape {given}; a dense layer takes "
            "features (F,) or a sequence (T, F): flatten images first"
        )
    return (*given[:-1], layer.options.units)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, units = layer.name, layer.options.units
    kernel = Param(f"{n}/kernel", (shapes[0][-1], units), "dense", n, "kernel")
    return [kernel, *bias(layer, units)]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    given = shapes[0]
    positions = math.prod(given[:-1])  # 1 for features, T on a sequence
    o: Options = layer.options
    added = math.prod(out) if o.use_bias else 0
    return positions * 2 * given[-1] * o.units, added


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    o: Options = layer.options
    return keras.layers.Dense(
        o.units,
        o.activation,
        use_bias=o.use_bias,
        name=layer.name,
        **kw.regularizer_args(keras, layer, kw.KERNEL_AND_BIAS),
    )


_MUST = (
    *kw.REGULARIZED,
    ("lora_rank", None),
    ("quantization_config", None),
)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    kw.must(cls, name, config, _MUST)
    return {
        "kind": "dense",
        "name": name,
        "activation": kw.activation(name, config),
        "units": config.get("units"),
        **kw.bias_words(config),
        **kw.regularizers(cls, name, config, kw.KERNEL_AND_BIAS),
    }


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    return {
        "units": pick.width(),
        "activation": pick_activation(pick),
        "use_bias": pick.boolean(),
    }


KIND = Kind(
    name="dense",
    summary="h @ kernel + bias over the last axis",
    options=Options,
    regularized=True,
    shape=shape,
    params=params,
    flops=flops,
    keras=keras,
    keras_classes=("Dense",),
    read=read,
    shift="bias",
    carries_shift=lambda layer: True,  # a constant row times the kernel
    draw=draw,
    draw_ranks=(1, 2),
)
