"""The window pools, one kind each: ``max_pool`` and ``avg_pool`` over images
``(H, W, C)`` (``MaxPooling2D``, ``AveragePooling2D``), ``max_pool1d`` and
``avg_pool1d`` over a sequence ``(T, F)``.  The window is ``size``, its step
``strides`` (Keras' default: the window), ``valid``/``same`` padding; an
average counts the window's positions inside the input only, as Keras does.
No parameters.  The four differ in two words (max or average, one axis or
two), so they share this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Pick, Shape, no_params, same_padding, windowed


@dataclass(frozen=True)
class Pool:
    """Keras' pooling arguments: a square window of ``pool_size``, its
    ``strides`` (``None``: Keras' default, the window; a step equal to the
    window is kept as ``None``, so both read as one layer), ``valid`` or
    ``same`` ``padding``."""

    pool_size: int
    strides: int | None = None
    padding: str = "valid"

    def __post_init__(self) -> None:
        if self.strides == self.pool_size:
            object.__setattr__(self, "strides", None)

    @property
    def window(self) -> int:
        return self.pool_size

    @property
    def stride(self) -> int:
        return self.strides or self.pool_size


# kind -> (Keras class, rank of its input)
_CLASSES = {
    "max_pool": ("MaxPooling2D", 3),
    "avg_pool": ("AveragePooling2D", 3),
    "max_pool1d": ("MaxPooling1D", 2),
    "avg_pool1d": ("AveragePooling1D", 2),
}


def _draw(pick: Pick, shape: Shape, axes: int) -> dict[str, Any]:
    """A pool's window, padding and stride over ``axes`` spatial axes of
    ``shape`` (the fuzzer also draws the pools more often than other kinds:
    ``harness.fuzz.draw.POOLED``, with what the two weights were measured
    to give)."""
    sides = shape[:axes]
    # a window of one pools nothing; an odd window over an edge it does not
    # cover (``same``) is where padding rules differ, so it is drawn first,
    # and twice as often (a window of two averages an edge copy with itself)
    windows = [w for w in (3, 3, 2) if w <= min(sides)] or [min(sides)]
    window = pick.one_of(windows)
    padding = pick.one_of(["same", "same", "valid"])
    entry: dict[str, Any] = {"pool_size": window, "padding": padding}
    # the stride: Keras' default (the window), or 2, 1, 3.  With ``same``
    # padding, a stride that pads one edge alone (an odd total padding on
    # some axis) is drawn ten times as often: there one side's padding
    # must not count, and backends have done that differently
    strides: list[int | None] = [None, 2, 1, 3]
    if padding == "same":
        edge = [s for s in strides if any(_odd(n, window, s or window) for n in sides)]
        strides = edge * 9 + strides
    stride = pick.one_of(strides)
    if stride is not None:
        entry["strides"] = stride
    return entry


def _odd(side: int, window: int, stride: int) -> bool:
    """Whether ``same`` padding of a window over ``side`` steps is odd (one
    edge gets a step more than the other)."""
    before, after = same_padding(side, window, stride)
    return before != after


def _kind(name: str) -> Kind:
    cls, rank = _CLASSES[name]

    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        return windowed(layer, shapes[0], rank, shapes[0][-1])

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        # one compare or add per element a window reads, whatever the padding
        return 0, math.prod(out) * layer.options.pool_size ** (rank - 1)

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        pool = getattr(keras.layers, cls)
        o: Pool = layer.options
        return pool(o.pool_size, o.stride, o.padding, name=layer.name)

    def read(
        given: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        kw.must(given, name, config, kw.CHANNELS_LAST)
        return {"kind": _kind_name, "name": name, **kw.window(given, name, config)}

    _kind_name = name
    return Kind(
        name=name,
        summary=f"{'the largest' if 'max' in name else 'the mean'} of each window",
        options=Pool,
        shape=shape,
        params=no_params,
        flops=flops,
        keras=keras,
        keras_classes=(cls,),
        read=read,
        pool=True,
        draw=lambda pick, shape: _draw(pick, shape, rank - 1),
        draw_ranks=(rank,),
    )


KINDS = tuple(_kind(name) for name in _CLASSES)
