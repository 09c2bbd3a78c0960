"""``conv1d``: a convolution over a sequence's steps ``(T, F)`` with Keras'
strides and ``valid``/``same`` padding (``Conv1D``).  Kernel ``(k, in,
out)``, bias ``(out,)``."""

from __future__ import annotations

import math
from typing import Any

from zoo.kinds.base import Kind, Layer, Mistake, Param, Shape, bias, windowed
from zoo.kinds.conv2d import Convolution, draw_convolution, keras_builder, reader


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    return windowed(layer, shapes[0], 2, layer.options.filters)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    o: Convolution = layer.options
    n, k = layer.name, o.kernel_size
    kernel = Param(f"{n}/kernel", (k, shapes[0][-1], o.filters), "conv1d", n, "kernel")
    return [kernel, *bias(layer, o.filters)]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    o: Convolution = layer.options
    outputs = math.prod(out)
    matmul = 2 * o.kernel_size * shapes[0][-1] * outputs
    return matmul, outputs if o.use_bias else 0


def kernel_flipped(a: Any, p: Param) -> Any:
    # A true convolution (the kernel reversed in time, as np.convolve has it)
    # where Keras, like every framework, computes a correlation.
    return a[::-1].copy()


MISTAKES = (
    Mistake(
        "conv1d-kernel-flipped",
        "1-D convolution kernels reversed in time (a true convolution for "
        "Keras' correlation)",
        "conv1d-gru",
        params="conv1d",
        corrupt=kernel_flipped,
    ),
)


KIND = Kind(
    name="conv1d",
    summary="a convolution over a sequence's steps",
    options=Convolution,
    regularized=True,
    shape=shape,
    params=params,
    flops=flops,
    keras=keras_builder("Conv1D"),
    keras_classes=("Conv1D",),
    read=reader("conv1d"),
    shift="bias",
    draw=lambda pick, shape: draw_convolution(pick, shape, 1),
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
