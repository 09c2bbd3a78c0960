"""The layers that only rearrange values, in Keras' element order (an image
is ``(H, W, C)`` whatever a framework's own layout: ``native.layout``):
``reshape`` to ``target_shape`` (Keras' ``Reshape``; a ``-1`` takes what is
left) and ``permute`` of the axes after the batch into the order ``dims``
gives (``Permute``, counted from 1).  No parameters, no arithmetic.  They share
this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds.base import Kind, Layer, Pick, Shape, no_flops, no_params


@dataclass(frozen=True)
class Reshape:
    """Keras' ``Reshape`` argument: the shape after the batch (one side may
    be -1)."""

    target_shape: tuple[int, ...]


@dataclass(frozen=True)
class Permute:
    """Keras' ``Permute`` argument: the axes after the batch, from 1, in
    their new order."""

    dims: tuple[int, ...]


def reshape_shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given, target = shapes[0], layer.options.target_shape
    free = [i for i, side in enumerate(target) if side == -1]
    known = math.prod(side for side in target if side != -1)
    if (
        not 1 <= len(target) <= 3
        or len(free) > 1
        or any(side < 1 and side != -1 for side in target)
        or known < 1
        or math.prod(given) % known
    ):
        raise ValueError(
            f"reshape layer {layer.name!r} cannot make {given} into "
            f"{list(target)}: 1 to 3 positive sides (one may be -1) holding "
            f"its {math.prod(given)} values"
        )
    out = tuple(math.prod(given) // known if side == -1 else side for side in target)
    if math.prod(out) != math.prod(given):
        raise ValueError(
            f"reshape layer {layer.name!r} cannot make {given} into {list(target)}: "
            f"{math.prod(out)} values are not its {math.prod(given)}"
        )
    return out


def permute_shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    given = shapes[0]
    dims = layer.options.dims
    if sorted(dims) != list(range(1, len(given) + 1)):
        raise ValueError(
            f"permute layer {layer.name!r} has dims {list(dims)}; for input "
            f"{given} they must order 1 to {len(given)}, each once"
        )
    return tuple(given[axis - 1] for axis in dims)


def reshape_keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Reshape(layer.options.target_shape, name=layer.name)


def permute_keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.Permute(layer.options.dims, name=layer.name)


def _ints(cls: str, name: str, word: str, value: Any) -> list[int]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ValueError(f"{cls} layer {name!r} has {word}={value!r}; whole numbers")
    return value


def reshape_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    target = _ints(cls, name, "target_shape", config.get("target_shape"))
    return {"kind": "reshape", "name": name, "target_shape": target}


def permute_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    return {
        "kind": "permute",
        "name": name,
        "dims": _ints(cls, name, "dims", config.get("dims")),
    }


def reshape_draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """To a feature row, a sequence of it, or (images) a sequence of rows."""
    size = math.prod(shape)
    options: list[list[int]] = [[size], [size, 1]]
    if len(shape) == 3:
        options.append([shape[0] * shape[1], shape[2]])
    if len(shape) == 2:
        options.append([shape[1], shape[0]])
    return {"target_shape": pick.one_of(options)}


def permute_draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    return {"dims": pick.permutation(list(range(1, len(shape) + 1)))}


RESHAPE = Kind(
    name="reshape",
    summary="the same values in another shape (Keras' element order)",
    options=Reshape,
    shape=reshape_shape,
    params=no_params,
    flops=no_flops,
    keras=reshape_keras,
    keras_classes=("Reshape",),
    read=reshape_read,
    draw=reshape_draw,
    draw_ranks=(1, 2, 3),
)
PERMUTE = Kind(
    name="permute",
    summary="the axes after the batch in another order",
    options=Permute,
    shape=permute_shape,
    params=no_params,
    flops=no_flops,
    keras=permute_keras,
    keras_classes=("Permute",),
    read=permute_read,
    draw=permute_draw,
    draw_ranks=(2, 3),
)
KINDS = (RESHAPE, PERMUTE)
