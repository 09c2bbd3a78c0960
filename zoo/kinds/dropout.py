"""``dropout``: in a training step each value zeroed with probability
``rate`` and the rest scaled by ``1 / (1 - rate)``; the identity in
inference (Keras' ``Dropout``).  One draw may be shared along axes
(``shared_axes``, counted from 1 after the batch): Keras' ``noise_shape``
with a 1 there, and its ``SpatialDropout1D`` (one draw per channel of a
sequence, ``(1,)``) and ``SpatialDropout2D`` (per channel of an image,
``(1, 2)``).  No parameters."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    Example,
    Kind,
    Layer,
    Noise,
    Pick,
    Shape,
    no_flops,
    no_params,
)

# The Keras classes read as a dropout, and the axes each shares a draw along
# (``None``: those its ``noise_shape`` says).
SHARED_BY_CLASS: dict[str, tuple[int, ...] | None] = {
    "Dropout": None,
    "SpatialDropout1D": (1,),
    "SpatialDropout2D": (1, 2),
}


@dataclass(frozen=True)
class Options:
    """Keras' ``Dropout`` arguments: the fraction ``rate`` dropped (0 when a
    document leaves it out, as it always has) and the axes that share one
    draw (``shared_axes``: Keras' ``noise_shape`` with a 1 on each; empty,
    a draw per value)."""

    rate: float = 0.0
    shared_axes: tuple[int, ...] = ()


def noise_shape(layer: Layer, rank: int) -> tuple[int | None, ...]:
    """Keras' ``noise_shape`` for an input of ``rank`` axes with the batch:
    1 on the shared axes, ``None`` (the input's size) elsewhere."""
    shared = layer.options.shared_axes
    return tuple(1 if axis in shared else None for axis in range(rank))[1:]


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    shared = layer.options.shared_axes
    rank = len(shapes[0])
    if any(not 1 <= a <= rank for a in shared) or len(set(shared)) != len(shared):
        raise ValueError(
            f"dropout layer {layer.name!r} shares its draw along axes "
            f"{list(shared)}; each must be an axis of its input {shapes[0]} "
            f"(1 to {rank}), once"
        )
    return shapes[0]


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    o: Options = layer.options
    noise = (None, *noise_shape(layer, len(shapes[0]) + 1)) if o.shared_axes else None
    return keras.layers.Dropout(o.rate, noise_shape=noise, name=layer.name)


def _read_noise_shape(name: str, noise: Any, built: Any) -> list[int]:
    """The axes a ``Dropout``'s ``noise_shape`` shares a draw along (a 1
    where the input's side is larger; ``None`` or the side: a draw each)."""
    if noise is None:
        return []
    sides = list(built) if built is not None else [None] * len(noise)
    if not isinstance(noise, list | tuple) or len(noise) != len(sides):
        raise ValueError(
            f"Dropout layer {name!r} has noise_shape={noise!r}, which the tool "
            f"does not compute: it is not one size per axis of its input {built}"
        )
    if noise[0] is not None:
        raise ValueError(
            f"Dropout layer {name!r} has noise_shape={noise!r}, which the tool "
            "does not compute: it shares a draw across the batch, where the "
            "tool draws each example's own"
        )
    shared = []
    for axis, (size, side) in enumerate(zip(noise, sides, strict=True)):
        if axis == 0 or size is None or size == side:
            continue
        if size != 1:
            known = "unknown: saved unbuilt" if side is None else side
            raise ValueError(
                f"Dropout layer {name!r} has noise_shape={noise!r}, which the "
                f"tool does not compute: its {size} on axis {axis} is neither 1 "
                f"(one draw along it) nor its input's size ({known})"
            )
        shared.append(axis)
    return shared


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    # The seed is not kept: trajectories are compared at rate 0
    # (zoo.specs.without_noise) and each path's draws checked on their own.
    kw.must(cls, name, config, kw.CHANNELS_LAST)
    shared = SHARED_BY_CLASS[cls]
    if shared is None:
        axes = _read_noise_shape(name, config.get("noise_shape"), built)
    else:
        axes = list(shared)
    entry: dict[str, Any] = {
        "kind": "dropout",
        "name": name,
        "rate": config.get("rate"),
    }
    if axes:
        entry["shared_axes"] = axes
    return entry


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """A rate of 0 or 0.5; over a sequence or images, in one draw of three,
    a draw per channel (Keras' spatial dropouts)."""
    entry: dict[str, Any] = {"rate": pick.one_of([0.0, 0.5])}
    if len(shape) > 1 and pick.integer(0, 2) == 0:
        entry["shared_axes"] = list(range(1, len(shape)))
    return entry


KIND = Kind(
    name="dropout",
    summary="values dropped at a rate in training; the identity in inference",
    options=Options,
    shape=shape,
    params=no_params,
    flops=no_flops,  # the identity in inference; a mask in training, uncounted
    keras=keras,
    keras_classes=tuple(SHARED_BY_CLASS),
    read=read,
    trains_differently=True,
    noise=Noise(amount="rate", draws="mask"),
    carries_shift=lambda layer: True,  # the identity in trajectories (rate 0)
    example=Example(  # Keras' SpatialDropout2D: one draw per image channel
        (6, 6, 2),
        lambda: (
            Layer.of("conv", "conv2d", filters=3, kernel_size=3, activation="relu"),
            Layer.of("drop", "dropout", rate=0.5, shared_axes=(1, 2)),
        ),
    ),
    draw=draw,
    draw_ranks=(1, 2, 3),
)
