"""The layers that change a sequence's or an image's extent: ``zero_padding``
(zeros added before and after, Keras' ``ZeroPadding1D``/``2D``),
``cropping`` (values cut away, ``Cropping1D``/``2D``) and ``upsampling``
(each position repeated, ``UpSampling1D``/``2D`` with ``nearest``).
Each option is Keras' word: ``padding`` and ``cropping`` the widths,
``(before, after)`` on a sequence's steps, ``(top, bottom, left, right)``
on an image; ``size`` the repeats, ``(steps,)`` or ``(rows, columns)``.
No parameters.  They share this module."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import Kind, Layer, Mistake, Pick, Shape, no_flops, no_params


@dataclass(frozen=True)
class ZeroPadding:
    """Keras' ``ZeroPadding1D``/``2D`` argument, as flat widths."""

    padding: tuple[int, ...]

    @property
    def widths(self) -> tuple[int, ...]:
        return self.padding


@dataclass(frozen=True)
class Cropping:
    """Keras' ``Cropping1D``/``2D`` argument, as flat widths."""

    cropping: tuple[int, ...]

    @property
    def widths(self) -> tuple[int, ...]:
        return self.cropping


@dataclass(frozen=True)
class UpSampling:
    """Keras' ``UpSampling1D``/``2D`` argument: the repeats per axis."""

    size: tuple[int, ...]

    @property
    def widths(self) -> tuple[int, ...]:
        return self.size


def _rank(layer: Layer, given: Shape, per_axis: int) -> int:
    """The axes the layer works on (1: a sequence, 2: images), checked
    against its input and ``target``."""
    axes = len(given) - 1
    if axes not in (1, 2) or len(layer.options.widths) != per_axis * axes:
        what = "(before, after)" if per_axis == 2 else "(steps,)"
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} has {list(layer.options.widths)} for "
            f"input {given}; it takes a sequence (T, F) with {what} or images "
            "(H, W, C) with one pair per axis"
        )
    if any(side < (0 if per_axis == 2 else 1) for side in layer.options.widths):
        raise ValueError(f"{layer.kind} layer {layer.name!r} needs sizes of at least 0")
    return axes


def padding_shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    axes = _rank(layer, given, 2)
    t = layer.options.widths
    return (*(given[i] + t[2 * i] + t[2 * i + 1] for i in range(axes)), given[-1])


def cropping_shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    axes = _rank(layer, given, 2)
    t = layer.options.widths
    out = tuple(given[i] - t[2 * i] - t[2 * i + 1] for i in range(axes))
    if min(out) < 1:
        raise ValueError(
            f"cropping layer {layer.name!r} cuts {list(t)} from {given}, which "
            "leaves nothing"
        )
    return (*out, given[-1])


def upsampling_shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    axes = _rank(layer, given, 1)
    return (*(given[i] * layer.options.widths[i] for i in range(axes)), given[-1])


def _keras(stem: str, word: str) -> Any:
    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        t = layer.options.widths
        if len(shapes[0]) == 2:
            return getattr(keras.layers, f"{stem}1D")(
                t if stem != "UpSampling" else t[0], name=layer.name
            )
        value = ((t[0], t[1]), (t[2], t[3])) if stem != "UpSampling" else (t[0], t[1])
        return getattr(keras.layers, f"{stem}2D")(**{word: value}, name=layer.name)

    return keras


def _pairs(cls: str, name: str, value: Any) -> list[int]:
    """Keras' widths as (before, after) per axis: ``1``, ``[1, 2]`` (1-D:
    before and after; 2-D: symmetric per axis), ``[[1, 2], [3, 4]]``."""
    two = "2D" in cls

    def number(v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(
                f"{cls} layer {name!r} has widths {value!r}; whole numbers"
            )
        return v

    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * (4 if two else 2)
    if isinstance(value, list) and not two and len(value) == 2:
        return [number(v) for v in value]
    if isinstance(value, list) and two and len(value) == 2:
        out: list[int] = []
        for axis in value:
            out += (
                [number(v) for v in axis]
                if isinstance(axis, list)
                else [number(axis)] * 2
            )
        if len(out) == 4:
            return out
    raise ValueError(
        f"{cls} layer {name!r} has widths {value!r}, which the tool cannot read"
    )


def padding_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    kw.must(cls, name, config, kw.CHANNELS_LAST)
    return {
        "kind": "zero_padding",
        "name": name,
        "padding": _pairs(cls, name, config.get("padding", 1)),
    }


def cropping_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    kw.must(cls, name, config, kw.CHANNELS_LAST)
    return {
        "kind": "cropping",
        "name": name,
        "cropping": _pairs(cls, name, config.get("cropping", 1)),
    }


def upsampling_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    kw.must(cls, name, config, (*kw.CHANNELS_LAST, ("interpolation", "nearest")))
    size = config.get("size", 2)
    sizes = [size] if "1D" in cls and not isinstance(size, list) else size
    if isinstance(sizes, int) and not isinstance(sizes, bool):
        sizes = [sizes, sizes]
    if not isinstance(sizes, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in sizes
    ):
        raise ValueError(f"{cls} layer {name!r} has size={size!r}; whole numbers")
    return {"kind": "upsampling", "name": name, "size": sizes}


def _copies(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return no_flops(layer, shapes, out)


def _draw(word: str, per_axis: int) -> Callable[[Pick, Shape], dict[str, Any]]:
    """A ``Kind.draw`` of ``per_axis`` numbers per axis of a sequence or an
    image (``word`` in the document): widths of 0 to 2 (two per axis), or
    repeats of 1 or 2 (one per axis)."""

    def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
        sides = 1 if len(shape) == 2 else 2
        least = 0 if per_axis == 2 else 1
        return {word: [pick.integer(least, 2) for _ in range(per_axis * sides)]}

    return draw


def uneven_crop(layer: Layer, shapes: tuple[Shape, ...]) -> bool:
    t = layer.options.cropping
    return any(t[i] != t[i + 1] for i in range(0, len(t), 2))


def before_after_swapped(layer: Layer) -> dict[str, Any]:
    t = layer.options.cropping
    return {"cropping": tuple(t[i + 1 - 2 * (i % 2)] for i in range(len(t)))}


CROPPING_MISTAKES = (
    Mistake(
        "crop-swapped",
        "a cropping that cuts its before and after widths the wrong way round",
        "kinds-seq",
        hits=uneven_crop,
        changes=before_after_swapped,
    ),
)


ZERO_PADDING = Kind(
    name="zero_padding",
    summary="zeros added around a sequence or an image",
    options=ZeroPadding,
    shape=padding_shape,
    params=no_params,
    flops=_copies,
    keras=_keras("ZeroPadding", "padding"),
    keras_classes=("ZeroPadding1D", "ZeroPadding2D"),
    read=padding_read,
    draw=_draw("padding", 2),
    draw_ranks=(2, 3),
)
CROPPING = Kind(
    name="cropping",
    summary="values cut from the edges of a sequence or an image",
    options=Cropping,
    shape=cropping_shape,
    params=no_params,
    flops=_copies,
    keras=_keras("Cropping", "cropping"),
    keras_classes=("Cropping1D", "Cropping2D"),
    read=cropping_read,
    draw=_draw("cropping", 2),
    draw_ranks=(2, 3),
    mistakes=CROPPING_MISTAKES,
)
UPSAMPLING = Kind(
    name="upsampling",
    summary="each position repeated (nearest)",
    options=UpSampling,
    shape=upsampling_shape,
    params=no_params,
    flops=_copies,
    keras=_keras("UpSampling", "size"),
    keras_classes=("UpSampling1D", "UpSampling2D"),
    read=upsampling_read,
    draw=_draw("size", 1),
    draw_ranks=(2, 3),
)
KINDS = (ZERO_PADDING, CROPPING, UPSAMPLING)
