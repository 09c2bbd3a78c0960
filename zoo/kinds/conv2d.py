"""``conv2d``: a square convolution over images ``(H, W, C)`` with Keras'
strides, ``valid``/``same`` padding and ``dilation_rate`` (a dilated
kernel's taps ``dilation_rate`` apart, spanning ``(k - 1) * d + 1``
positions; Keras takes it with strides of 1 only) (``Conv2D``).  Kernel
``(kh, kw, in, out)``, bias ``(out,)``."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    SYMMETRIC_SAME,
    Kernel,
    Kind,
    Layer,
    Mistake,
    Param,
    Pick,
    Shape,
    bias,
    padding_of,
    pick_activation,
    window_out,
    windowed,
)


@dataclass(frozen=True)
class Convolution(Kernel):
    """Keras' ``Conv1D``, ``Conv2D`` and ``Conv2DTranspose`` arguments:
    ``filters`` output channels, a square window of ``kernel_size``, its
    ``strides``, ``valid`` or ``same`` ``padding`` (Conv1D's ``causal``
    too), the ``activation`` after (``None``: linear), whether it has a
    bias, and its ``dilation_rate`` (1: a plain kernel; a transposed
    convolution takes only 1)."""

    filters: int
    kernel_size: int
    strides: int = 1
    padding: str = "valid"
    activation: str | None = None
    use_bias: bool = True
    dilation_rate: int = 1


def dilated(layer: Layer) -> None:
    """A ValueError in one sentence for a dilated kernel with a stride,
    which Keras refuses too."""
    o: Convolution = layer.options
    if o.dilation_rate > 1 and o.strides > 1:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} has strides {o.strides} and "
            f"dilation_rate {o.dilation_rate}; Keras takes one of them above 1"
        )


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    dilated(layer)
    return windowed(layer, shapes[0], 3, layer.options.filters)


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    o: Convolution = layer.options
    n, k, c = layer.name, o.kernel_size, shapes[0][-1]
    kernel = Param(f"{n}/kernel", (k, k, c, o.filters), "conv2d", n, "kernel")
    return [kernel, *bias(layer, o.filters)]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    o: Convolution = layer.options
    outputs = math.prod(out)
    matmul = 2 * o.kernel_size * o.kernel_size * shapes[0][-1] * outputs
    return matmul, outputs if o.use_bias else 0


def keras_builder(cls: str) -> Callable[[Any, Layer, tuple[Shape, ...]], Any]:
    """A convolution kind's ``Kind.keras``: Keras' layer ``cls`` of the
    layer's filters, window, step, padding, activation, bias and
    regularizers (``Conv1D``, ``Conv2D``, ``Conv2DTranspose``)."""

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        o: Convolution = layer.options
        return getattr(keras.layers, cls)(
            o.filters,
            o.kernel_size,
            strides=o.strides,
            padding=o.padding,
            activation=o.activation,
            use_bias=o.use_bias,
            dilation_rate=o.dilation_rate,
            name=layer.name,
            **kw.regularizer_args(keras, layer, kw.KERNEL_AND_BIAS),
        )

    return keras


PLAIN = (
    ("groups", 1),
    *kw.CHANNELS_LAST,
    *kw.REGULARIZED,
)
# What a convolution kind that takes no dilation refuses.
CONVOLUTION = (("dilation_rate", 1), *PLAIN)


def reader(
    kind: str, refused: tuple[tuple[str, Any], ...] = CONVOLUTION
) -> Callable[[str, str, Mapping[str, Any], Any], dict[str, Any]]:
    """A convolution kind's ``Kind.read``: its window, activation, bias and
    regularizers, refusing what ``refused`` names; its ``dilation_rate``
    (a number, or Keras' square list of them) unless ``refused`` names it."""

    def read(
        cls: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        kw.must(cls, name, config, refused)
        entry = {
            "kind": kind,
            "name": name,
            "activation": kw.activation(name, config),
            **kw.window(cls, name, config),
            **kw.bias_words(config),
            **kw.regularizers(cls, name, config, kw.KERNEL_AND_BIAS),
        }
        dilation = config.get("dilation_rate", 1)
        if not kw.is_default(dilation, 1):
            number = kw.pair if "2D" in cls else kw.single
            entry["dilation_rate"] = number(dilation, "dilation_rate", name)
        return entry

    return read


def draw_convolution(
    pick: Pick, shape: Shape, axes: int, filters: bool = True
) -> dict[str, Any]:
    """A convolution kind's ``Kind.draw`` over ``axes`` spatial axes of
    ``shape``: its kernel (at most the smallest side), strides, padding,
    activation, bias and (``filters``) filters."""
    side = min(shape[:axes])
    kernel = pick.integer(1, max(1, min(3, side)))
    entry: dict[str, Any] = {
        "kernel_size": kernel,
        "strides": pick.integer(1, 2),
        "padding": pick.one_of(["valid", "same"]),
        "activation": pick_activation(pick),
        "use_bias": pick.boolean(),
    }
    if filters:
        entry["filters"] = pick.width()
    return entry


def pads_nothing(layer: Layer) -> bool:
    """Whether a convolution's every window lies inside its input (``valid``,
    or a 1x1 kernel): a per-channel constant input gives one output
    (``Kind.carries_shift``), where a padded border would break it."""
    o: Convolution = layer.options
    return o.padding == "valid" or o.kernel_size == 1


def hw_swapped(a: Any, p: Param) -> Any:
    return a.transpose(1, 0, 2, 3).copy()  # (kh, kw, ..) -> (kw, kh, ..)


def asymmetric_same(layer: Layer, shapes: tuple[Shape, ...]) -> bool:
    """A 'same' convolution whose Keras padding puts more after than before
    and which a symmetric ``window // 2`` padding leaves the same size: the
    case where a hand-written ``padding=k // 2`` runs and is silently off."""
    if layer.options.padding != "same":
        return False
    symmetric = dataclasses.replace(layer, mistake=SYMMETRIC_SAME)
    sides = shapes[0][:2]
    return any(padding_of(layer, n) != padding_of(symmetric, n) for n in sides) and all(
        window_out(layer, n) == window_out(symmetric, n) for n in sides
    )


MISTAKES = (
    Mistake(
        "conv-hw-swapped",
        "convolution kernels loaded with height and width exchanged",
        "lenet",
        params="conv2d",
        corrupt=hw_swapped,
    ),
    Mistake(
        "valid-padding",
        "the first 'same' convolution computed with 'valid' padding",
        "vgg16",
        batch_size=2,
        hits=lambda layer, shapes: layer.options.padding == "same",
        changes=lambda layer: {"padding": "valid"},
    ),
    Mistake(
        SYMMETRIC_SAME,
        "a 'same' convolution padded k//2 on both sides, not Keras' odd position after",
        "strided-cnn",
        hits=asymmetric_same,
        changes=lambda layer: {"mistake": SYMMETRIC_SAME},
    ),
)


KIND = Kind(
    name="conv2d",
    summary="a square convolution over images",
    options=Convolution,
    regularized=True,
    shape=shape,
    params=params,
    flops=flops,
    keras=keras_builder("Conv2D"),
    keras_classes=("Conv2D",),
    read=reader("conv2d", PLAIN),
    shift="bias",
    carries_shift=pads_nothing,
    draw=lambda pick, shape: draw_convolution(pick, shape, 2),
    draw_ranks=(3,),
    mistakes=MISTAKES,
)
