"""``conv1d``: a convolution over a sequence's steps ``(T, F)`` with Keras'
strides, ``valid``/``same``/``causal`` padding (``causal``: ``window - 1``
zeros before, none after, so a step sees itself and the steps before it, as
a TCN or WaveNet stacks them) and ``dilation_rate`` (``Conv1D``).  Kernel
``(k, in, out)``, bias ``(out,)``."""

from __future__ import annotations

import math
from typing import Any

from zoo.kinds.base import (
    CAUSAL,
    PADDINGS,
    Example,
    Kind,
    Layer,
    Mistake,
    Param,
    Pick,
    Shape,
    bias,
    windowed,
)
from zoo.kinds.conv2d import (
    PLAIN,
    Convolution,
    dilated,
    draw_convolution,
    keras_builder,
    pads_nothing,
    reader,
)


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    dilated(layer)
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


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """A convolution's draw over the steps; in one draw of three, causal
    padding, and at a stride of 1 a dilation of 2 where the dilated kernel
    fits (a TCN's or WaveNet's stack)."""
    entry = draw_convolution(pick, shape, 1)
    if pick.integer(0, 2) == 0:
        entry["padding"] = CAUSAL
    k = entry["kernel_size"]
    if entry["strides"] == 1 and k > 1 and 2 * (k - 1) + 1 <= shape[0]:
        entry["dilation_rate"] = pick.one_of([1, 2])
    return entry


def causal_as_same(layer: Layer) -> dict[str, Any]:
    return {"padding": "same"}


MISTAKES = (
    Mistake(
        "causal-as-same",
        "a causal convolution padded as 'same' (half the window after: each "
        "step sees steps after it)",
        "kind-conv1d",
        hits=lambda layer, shapes: layer.options.padding == CAUSAL,
        changes=causal_as_same,
    ),
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
    read=reader("conv1d", PLAIN),
    shift="bias",
    carries_shift=pads_nothing,
    paddings=(*PADDINGS, CAUSAL),
    example=Example(  # a TCN's block: a causal dilated convolution
        (8, 2),
        lambda: (
            Layer.of(
                "causal",
                "conv1d",
                filters=3,
                kernel_size=2,
                padding=CAUSAL,
                dilation_rate=2,
                activation="relu",
            ),
        ),
    ),
    draw=draw,
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
