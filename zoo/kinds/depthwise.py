"""The convolutions that keep channels apart, over images ``(H, W, C)``
with Keras' strides and padding.

- ``depthwise_conv2d`` (``DepthwiseConv2D``): each input channel ``c``
  convolved on its own with ``depth_multiplier`` square kernels, output
  channel ``c * depth_multiplier + m``.  Kernel ``(kh, kw, C,
  depth_multiplier)``, bias ``(C * depth_multiplier,)``.
- ``separable_conv2d`` (``SeparableConv2D``): that depthwise convolution
  (no bias), then a 1x1 convolution to ``filters`` channels.  Depthwise
  kernel ``(kh, kw, C, multiplier)``, pointwise kernel ``(1, 1, C *
  multiplier, filters)``, bias ``(filters,)``.

They differ in one step, so they share this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    Kernel,
    Kind,
    Layer,
    Mistake,
    Param,
    Pick,
    Shape,
    bias,
    windowed,
)
from zoo.kinds.conv2d import CONVOLUTION, draw_convolution

# Keras' regularizer arguments -> the roles they penalize, per kind.
REGULARIZERS = {
    "depthwise_conv2d": {"depthwise_regularizer": "kernel", "bias_regularizer": "bias"},
    "separable_conv2d": {
        "depthwise_regularizer": "depthwise_kernel",
        "pointwise_regularizer": "pointwise_kernel",
        "bias_regularizer": "bias",
    },
}
_CLASSES = {
    "depthwise_conv2d": "DepthwiseConv2D",
    "separable_conv2d": "SeparableConv2D",
}
_CONSTRAINTS = (("depthwise_constraint", None), ("pointwise_constraint", None))


@dataclass(frozen=True)
class Depthwise(Kernel):
    """Keras' ``DepthwiseConv2D`` arguments: a square window of
    ``kernel_size``, its ``strides``, ``valid`` or ``same`` ``padding``,
    ``depth_multiplier`` kernels per input channel, the ``activation``
    after (``None``: linear), and whether it has a bias."""

    kernel_size: int
    strides: int = 1
    padding: str = "valid"
    depth_multiplier: int = 1
    activation: str | None = None
    use_bias: bool = True


@dataclass(frozen=True)
class Separable(Kernel):
    """Keras' ``SeparableConv2D`` arguments: ``filters``, the pointwise
    convolution's output channels, then the depthwise ones."""

    filters: int
    kernel_size: int
    strides: int = 1
    padding: str = "valid"
    depth_multiplier: int = 1
    activation: str | None = None
    use_bias: bool = True


def depth(layer: Layer) -> int:
    """Kernels per input channel (``depth_multiplier``)."""
    return int(layer.options.depth_multiplier)


def multiplier_major(a: Any, p: Param) -> Any:
    # Output channel k * C + c read as Keras' c * m + k: the (C, m) kernels
    # in multiplier-major order.
    kh, kw, channels, depth = a.shape
    return a.transpose(0, 1, 3, 2).reshape(kh, kw, channels * depth).reshape(a.shape)


# A separable convolution's depthwise kernel is loaded as a depthwise one.
DEPTHWISE_ORDER = Mistake(
    "depthwise-order",
    "a depthwise convolution's output channels in multiplier-major "
    "order (k * C + c, not Keras' c * m + k)",
    "kinds-cnn",
    hits=lambda layer, shapes: depth(layer) > 1,
    params="depthwise",
    corrupt=multiplier_major,
)


def _kind(kind: str) -> Kind:
    separable = kind == "separable_conv2d"
    table = REGULARIZERS[kind]

    def width(layer: Layer, channels: int) -> int:
        return layer.options.filters if separable else channels * depth(layer)

    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        return windowed(layer, shapes[0], 3, width(layer, shapes[0][-1]))

    def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
        n, k, c, m = layer.name, layer.options.kernel_size, shapes[0][-1], depth(layer)
        role = "depthwise_kernel" if separable else "kernel"
        found = [Param(f"{n}/{role}", (k, k, c, m), "depthwise", n, role)]
        if separable:
            found.append(
                Param(
                    f"{n}/pointwise_kernel",
                    (1, 1, c * m, layer.options.filters),
                    "conv2d",
                    n,
                    "pointwise_kernel",
                )
            )
        return [*found, *bias(layer, width(layer, c))]

    def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
        return {
            **draw_convolution(pick, shape, 2, filters=separable),
            "depth_multiplier": pick.integer(1, 2),
        }

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        positions = math.prod(out[:-1])
        spread = shapes[0][-1] * depth(layer)  # the depthwise outputs per position
        o = layer.options
        matmul = 2 * o.kernel_size * o.kernel_size * spread * positions
        if separable:
            matmul += 2 * spread * o.filters * positions
        return matmul, math.prod(out) if o.use_bias else 0

    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        o = layer.options
        common = {
            "strides": o.strides,
            "padding": o.padding,
            "depth_multiplier": o.depth_multiplier,
            "activation": o.activation,
            "use_bias": o.use_bias,
            "name": layer.name,
            **kw.regularizer_args(keras, layer, table),
        }
        if separable:
            return keras.layers.SeparableConv2D(o.filters, o.kernel_size, **common)
        return keras.layers.DepthwiseConv2D(o.kernel_size, **common)

    def read(
        cls: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        kw.must(cls, name, config, (*CONVOLUTION, *_CONSTRAINTS))
        window = kw.window(cls, name, config)
        if not separable:
            window.pop("filters")
        multiplier = config.get("depth_multiplier", 1)
        return {
            "kind": kind,
            "name": name,
            "activation": kw.activation(name, config),
            **window,
            **({"depth_multiplier": multiplier} if multiplier != 1 else {}),
            **kw.bias_words(config),
            **kw.regularizers(cls, name, config, table),
        }

    return Kind(
        name=kind,
        summary=(
            "a depthwise convolution, then a 1x1 one (separable)"
            if separable
            else "a convolution of each channel on its own (depthwise)"
        ),
        options=Separable if separable else Depthwise,
        regularized=True,
        shape=shape,
        params=params,
        flops=flops,
        keras=keras,
        keras_classes=(_CLASSES[kind],),
        read=read,
        shift="bias",
        draw=draw,
        draw_ranks=(3,),
        mistakes=(DEPTHWISE_ORDER,),
    )


KINDS = tuple(_kind(kind) for kind in _CLASSES)
