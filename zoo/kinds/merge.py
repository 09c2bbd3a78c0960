"""The merges, which take two or more earlier outputs of one shape (or, for
``concatenate``, of one shape but the last axis; the others broadcast, as
Keras' merge layers do, an axis of size 1 against any size: a
squeeze-and-excite block's ``(1, 1, C)`` weights times its ``(H, W, C)``
images): ``add`` (their sum, a
residual connection; Keras' ``Add``, and ``x + y`` written in a functional
model, which Keras saves as ``keras.ops.add``), ``subtract`` (the first
minus the second: exactly two), ``multiply``, ``average``, ``maximum``,
``minimum``, and ``concatenate`` (joined along the last axis: the
features, or an image's channels).  No parameters.  They differ in one
operation, so they share this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from zoo.kinds.base import Kind, Layer, Mistake, NoOptions, Shape, no_params

# kind -> Keras class, and the keras.ops function a functional model's
# ``x + y`` (``x - y``, ``x * y``) is saved as.
CLASSES = {
    "add": ("Add", "add"),
    "subtract": ("Subtract", "subtract"),
    "multiply": ("Multiply", "multiply"),
    "average": ("Average", None),
    "maximum": ("Maximum", "maximum"),
    "minimum": ("Minimum", "minimum"),
    "concatenate": ("Concatenate", None),
}
# Keras' operator functions read as merges (``zoo.keras_import``).
OPERATORS = {op: kind for kind, (_, op) in CLASSES.items() if op}


JOIN_REVERSED = Mistake(
    "join-reversed",
    "a concatenate or subtract taking its inputs in the reverse order",
    "kinds-cnn",
    # two different outputs: reversed, they compute something else
    hits=lambda layer, shapes: len(set(layer.inputs)) > 1,
    changes=lambda layer: {"inputs": layer.inputs[::-1]},
)
# The merges whose result depends on the order of their inputs.
ORDERED = ("concatenate", "subtract")


def broadcast(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    """The shape of an elementwise merge of ``shapes``: of one rank, each
    axis of one size or of size 1 in some (broadcast against the others),
    as Keras' merge layers take them; else a ValueError in one sentence."""
    ranks = {len(given) for given in shapes}
    sides = [
        {side for side in axis if side != 1} for axis in zip(*shapes, strict=False)
    ]
    if len(ranks) > 1 or any(len(axis) > 1 for axis in sides):
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} gets shapes {list(shapes)}; the "
            "outputs it merges must have one shape, or a side of 1 where "
            "another's is larger"
        )
    return tuple(max(axis) for axis in zip(*shapes, strict=True))


def _kind(kind: str) -> Kind:
    cls = CLASSES[kind][0]

    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        if kind == "concatenate":
            heads = {given[:-1] for given in shapes}
            if len(heads) > 1:
                raise ValueError(
                    f"concatenate layer {layer.name!r} gets shapes {list(shapes)}; "
                    "the outputs it joins along the last axis must agree on the "
                    "others"
                )
            return (*shapes[0][:-1], sum(given[-1] for given in shapes))
        return broadcast(layer, shapes)

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        if kind == "concatenate":
            return 0, 0  # a copy
        extra = math.prod(out) if kind == "average" else 0  # the division
        return 0, (len(shapes) - 1) * math.prod(out) + extra

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        return getattr(keras.layers, cls)(name=layer.name)

    def read(
        given: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        if kind == "concatenate":
            axis = config.get("axis", -1)
            rank = (
                len(built[0])
                if isinstance(built, list) and built and isinstance(built[0], list)
                else None
            )
            if axis != -1 and axis != (rank - 1 if rank else None):
                raise ValueError(
                    f"Concatenate layer {name!r} joins along axis {axis!r}; the "
                    "tool joins along the last axis (the features or channels) only"
                )
        return {"kind": kind, "name": name}

    return Kind(
        name=kind,
        summary=f"the {kind} of two or more earlier outputs",
        options=NoOptions,
        shape=shape,
        params=no_params,
        flops=flops,
        keras=keras,
        keras_classes=(cls,),
        read=read,
        takes=2 if kind == "subtract" else 0,
        # a sum passes each input's per-channel constant on
        carries_shift=(lambda layer: True) if kind == "add" else (lambda layer: False),
        mistakes=(JOIN_REVERSED,) if kind in ORDERED else (),
    )


KINDS = tuple(_kind(kind) for kind in CLASSES)
