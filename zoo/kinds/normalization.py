"""The learned normalizations: ``layer_norm`` (Keras' ``LayerNormalization``
over the last axis: ``gamma`` and ``beta`` ``(F,)``) and ``batch_norm``
(``BatchNormalization`` over the channels, the last axis: ``gamma`` unless
``scale=False``, ``beta`` unless ``center=False``, and the moving
statistics ``moving_mean``, ``moving_variance`` ``(F,)``, state a training
step sets from the batch).  They share the
scale and shift and this module."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    BATCH_NORM_MOMENTUM,
    LAYER_NORM_EPSILON,
    Kind,
    Layer,
    Mistake,
    Param,
    Pick,
    Shape,
    one_input,
)

# Per element of a layer normalization: the mean's sum, the centring, the
# square and its sum, the scaling by 1 / sqrt(variance + epsilon), gamma, beta.
LAYER_NORM_FLOPS_PER_ELEMENT = 7
# A batch normalization with its statistics: a multiply and an add per element
# (scale and shift folded per channel); training also takes the batch's mean
# and variance, about 4 more per element, which one forward count for both
# leaves out.
BATCH_NORM_FLOPS_PER_ELEMENT = 2


@dataclass(frozen=True)
class LayerNorm:
    """Keras' ``LayerNormalization`` argument: the ``epsilon`` added to the
    variance."""

    epsilon: float = LAYER_NORM_EPSILON


@dataclass(frozen=True)
class BatchNorm:
    """Keras' ``BatchNormalization`` arguments: the ``epsilon`` added to
    the variance, the ``momentum`` of the moving statistics (the share of
    the old value kept at each training step), and whether it has a
    ``beta`` added (``center``) and a ``gamma`` multiplied (``scale``;
    a convolution's before a ReLU often has none, Keras' ResNet blocks)."""

    epsilon: float = LAYER_NORM_EPSILON
    momentum: float = BATCH_NORM_MOMENTUM
    center: bool = True
    scale: bool = True


def _scale(
    layer: Layer, features: int, gamma: bool = True, beta: bool = True
) -> list[Param]:
    n = layer.name
    return [
        *([Param(f"{n}/gamma", (features,), "gamma", n, "gamma")] if gamma else []),
        *([Param(f"{n}/beta", (features,), "bias", n, "beta")] if beta else []),
    ]


def layer_norm_params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    return _scale(layer, shapes[0][-1])


def batch_norm_params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, features, o = layer.name, shapes[0][-1], layer.options
    return [
        *_scale(layer, features, gamma=o.scale, beta=o.center),
        Param(f"{n}/moving_mean", (features,), "moving_mean", n, "moving_mean"),
        Param(
            f"{n}/moving_variance",
            (features,),
            "moving_variance",
            n,
            "moving_variance",
        ),
    ]


def _per_element(per: int) -> Any:
    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        return 0, per * math.prod(shapes[0])

    return flops


def layer_norm_keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.LayerNormalization(
        epsilon=layer.options.epsilon, name=layer.name
    )


def batch_norm_keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    o: BatchNorm = layer.options
    return keras.layers.BatchNormalization(
        momentum=o.momentum,
        epsilon=o.epsilon,
        center=o.center,
        scale=o.scale,
        name=layer.name,
    )


_REGULARIZED = (
    ("beta_regularizer", None),
    ("gamma_regularizer", None),
    ("beta_constraint", None),
    ("gamma_constraint", None),
)
_SCALED = (("center", True), ("scale", True), *_REGULARIZED)


def layer_norm_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    kw.must(cls, name, config, (*_SCALED, ("rms_scaling", False)))
    axis = config.get("axis", -1)
    if axis not in (-1, [-1]):
        raise ValueError(
            f"LayerNormalization layer {name!r} normalizes over axis {axis!r}; "
            "the tool computes axis=-1 (the features) only"
        )
    return {"kind": "layer_norm", "name": name, "epsilon": config.get("epsilon", 1e-3)}


def batch_norm_read(
    cls: str, name: str, config: Mapping[str, Any], built: Any
) -> dict[str, Any]:
    # A frozen one (trainable=False) Keras 3 runs in inference mode in
    # training too (the moving statistics, none updated): ``native.compose``.
    plain = (*_REGULARIZED, ("renorm", False), ("synchronized", False))
    kw.must(cls, name, config, plain)
    _check_batch_norm_axis(name, config, built)
    entry = {
        "kind": "batch_norm",
        "name": name,
        "epsilon": config.get("epsilon", 1e-3),
        "momentum": config.get("momentum", 0.99),
    }
    for option in ("center", "scale"):  # written only when off, as tables do
        if config.get(option, True) is False:
            entry[option] = False
    return entry


def _check_batch_norm_axis(name: str, config: Mapping[str, Any], built: Any) -> None:
    """A BatchNormalization normalizes each channel, the last axis: Keras
    writes ``-1``, or the axis it was given, which counts the batch (``3``
    for images) and is the last when its built input has that many more."""
    axis = config.get("axis", -1)
    if isinstance(axis, list) and len(axis) == 1:
        axis = axis[0]
    last = len(built) - 1 if isinstance(built, list) else None
    if not isinstance(axis, bool) and (axis == -1 or (last and axis == last)):
        return
    of = f" of its input {built}" if isinstance(built, list) else ""
    raise ValueError(
        f"BatchNormalization layer {name!r} normalizes over axis {axis!r}{of}; "
        "the tool computes the last axis (the channels or features) only"
    )


def batch_norm_draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    """Keras' or PyTorch's epsilon, two momenta, and in one draw of four
    each, no gamma or no beta."""
    entry = {
        "epsilon": pick.one_of([0.001, 1e-5]),
        "momentum": pick.one_of([0.99, 0.5]),
    }
    for option in ("scale", "center"):
        if pick.integer(0, 3) == 0:
            entry[option] = False
    return entry


# PyTorch's nn.LayerNorm default, where Keras' LayerNormalization has 1e-3.
TORCH_LAYER_NORM_EPSILON = 1e-5


LAYER_NORM_MISTAKES = (
    Mistake(
        "layer-norm-epsilon",
        "layer normalization with PyTorch's default epsilon 1e-5 for Keras' 1e-3",
        "transformer-tiny",
        hits=lambda layer, shapes: layer.options.epsilon != TORCH_LAYER_NORM_EPSILON,
        changes=lambda layer: {"epsilon": TORCH_LAYER_NORM_EPSILON},
    ),
)
# PyTorch's convention (new = (1 - m) * moving + m * batch, m = 0.1) read as
# Keras' (new = m * moving + (1 - m) * batch, m = 0.99): the moving
# statistics kept with the weight the batch should get.
BATCH_NORM_MISTAKES = (
    Mistake(
        "batch-norm-momentum-swapped",
        "batch normalization's moving statistics updated with momentum and "
        "1 - momentum exchanged (PyTorch's convention for Keras')",
        "bn-dropout-cnn",
        steps=1,
        stage="update",
        changes=lambda layer: {"momentum": 1 - layer.options.momentum},
    ),
)


LAYER_NORM = Kind(
    name="layer_norm",
    summary="normalized over the last axis, then gamma and beta",
    options=LayerNorm,
    shape=one_input,
    params=layer_norm_params,
    flops=_per_element(LAYER_NORM_FLOPS_PER_ELEMENT),
    keras=layer_norm_keras,
    keras_classes=("LayerNormalization",),
    read=layer_norm_read,
    draw=lambda pick, shape: {"epsilon": pick.one_of([0.001, 1e-5])},
    draw_ranks=(1, 2, 3),
    mistakes=LAYER_NORM_MISTAKES,
)
BATCH_NORM = Kind(
    name="batch_norm",
    summary="normalized per channel by the batch (training) or moving statistics",
    options=BatchNorm,
    shape=one_input,
    params=batch_norm_params,
    flops=_per_element(BATCH_NORM_FLOPS_PER_ELEMENT),
    keras=batch_norm_keras,
    keras_classes=("BatchNormalization",),
    read=batch_norm_read,
    trains_differently=True,
    shift="beta",
    draw=batch_norm_draw,
    draw_ranks=(1, 2, 3),
    mistakes=BATCH_NORM_MISTAKES,
)
KINDS = (LAYER_NORM, BATCH_NORM)
