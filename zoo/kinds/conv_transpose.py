"""``conv2d_transpose``: Keras' ``Conv2DTranspose`` over images ``(H, W,
C)``, the gradient of a convolution with the same window: input position
``j`` adds ``x[j] @ kernel[k].T`` to output position ``j * strides + k -
before`` of each axis (``start``), positions outside the output dropped.
Each side grows to ``side * strides`` (``same``) or ``(side - 1) *
strides + max(kernel, strides)`` (``valid``).  Kernel ``(kh, kw, out,
in)`` (Keras' order: the output channels first), bias ``(out,)``."""

from __future__ import annotations

import math
from typing import Any

from zoo.kinds.base import (
    Kind,
    Layer,
    Mistake,
    Param,
    Shape,
    bias,
    needs_rank,
    same_padding,
)
from zoo.kinds.conv2d import (
    CONVOLUTION,
    Convolution,
    draw_convolution,
    keras_builder,
    reader,
)


def side_out(layer: Layer, side: int) -> int:
    """Positions on an axis of ``side`` input positions."""
    o: Convolution = layer.options
    if o.padding == "same":
        return side * o.strides
    return (side - 1) * o.strides + max(o.kernel_size, o.strides)


def start(layer: Layer, side: int) -> int:
    """Where the output begins in the full scatter of an axis of ``side``
    (the ``(side - 1) * strides + kernel`` positions every kernel tap
    reaches): the padding a forward convolution of the output puts before
    it (``same``), 0 for ``valid``."""
    o: Convolution = layer.options
    if o.padding != "same":
        return 0
    return same_padding(side_out(layer, side), o.kernel_size, o.strides)[0]


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    needs_rank(layer, shapes[0], (3,), "images (H, W, C)")
    if layer.options.dilation_rate != 1:
        raise ValueError(
            f"conv2d_transpose layer {layer.name!r} has dilation_rate "
            f"{layer.options.dilation_rate}; the tool computes a transposed "
            "convolution with a plain kernel only"
        )
    height, width, _ = shapes[0]
    return side_out(layer, height), side_out(layer, width), layer.options.filters


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    o: Convolution = layer.options
    n, k, c = layer.name, o.kernel_size, shapes[0][-1]
    kernel = Param(f"{n}/kernel", (k, k, o.filters, c), "conv2d_transpose", n, "kernel")
    return [kernel, *bias(layer, o.filters)]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    """Every input value times every tap and output channel; the bias once
    per output value."""
    o: Convolution = layer.options
    matmul = 2 * o.kernel_size * o.kernel_size * o.filters * math.prod(shapes[0])
    return matmul, math.prod(out) if o.use_bias else 0


def taps_unflipped(a: Any, p: Param) -> Any:
    # A transposed convolution written as a convolution of the dilated input
    # with the kernel as it is: its taps must be reversed in both axes.
    return a[::-1, ::-1].copy()


MISTAKES = (
    Mistake(
        "transpose-taps-unflipped",
        "a transposed convolution's kernel taps in the wrong spatial order",
        "kinds-cnn",
        params="conv2d_transpose",
        corrupt=taps_unflipped,
    ),
)


KIND = Kind(
    name="conv2d_transpose",
    summary="a transposed convolution over images (an upsampling one)",
    options=Convolution,
    regularized=True,
    shape=shape,
    params=params,
    flops=flops,
    keras=keras_builder("Conv2DTranspose"),
    keras_classes=("Conv2DTranspose",),
    read=reader("conv2d_transpose", (("output_padding", None), *CONVOLUTION)),
    shift="bias",
    draw=lambda pick, shape: draw_convolution(pick, shape, 2),
    draw_ranks=(3,),
    mistakes=MISTAKES,
)
