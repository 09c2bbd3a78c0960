"""``gaussian_noise`` and ``gaussian_dropout``: Keras' ``GaussianNoise``
and ``GaussianDropout``, the identity in inference and in a training step
``h + n`` with ``n`` normal of mean 0 and deviation ``stddev``, and ``h *
n`` with ``n`` normal of mean 1 and deviation ``sqrt(rate / (1 - rate))``
(Keras 3.15, ``keras.src.layers.regularization``).  A fresh draw per value;
no parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds.base import (
    Example,
    Kind,
    Layer,
    Noise,
    Shape,
    no_flops,
    no_params,
    one_input,
)


@dataclass(frozen=True)
class NoiseOptions:
    """Keras' ``GaussianNoise`` argument: the normal's deviation ``stddev``
    (required, as in Keras; 0 adds nothing)."""

    stddev: float


@dataclass(frozen=True)
class DropoutOptions:
    """Keras' ``GaussianDropout`` argument: the ``rate`` of the dropout whose
    variance it matches, below 1 (required, as in Keras; 0 multiplies by
    1)."""

    rate: float


def dropout_deviation(options: DropoutOptions) -> float:
    """The multiplier's deviation, ``sqrt(rate / (1 - rate))``, as Keras."""
    return math.sqrt(options.rate / (1 - options.rate))


def _checked(amount: str, below: float | None) -> Any:
    def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
        value = getattr(layer.options, amount)
        if value < 0 or (below is not None and value >= below):
            bound = f"in [0, {below:g})" if below is not None else "at least 0"
            raise ValueError(
                f"{layer.kind} layer {layer.name!r} has {amount}={value!r}; it "
                f"must be {bound}"
            )
        return one_input(layer, shapes)

    return shape


def _reader(kind: str, amount: str) -> Any:
    def read(
        cls: str, name: str, config: Mapping[str, Any], built: Any
    ) -> dict[str, Any]:
        # The seed is not kept: trajectories are compared without noise
        # (zoo.specs.without_noise) and each path's draws checked on their own.
        return {"kind": kind, "name": name, amount: config.get(amount)}

    return read


def _keras(cls: str, amount: str) -> Any:
    def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
        return getattr(keras.layers, cls)(
            getattr(layer.options, amount), name=layer.name
        )

    return keras


KINDS = (
    Kind(
        name="gaussian_noise",
        summary="normal noise added in training; the identity in inference",
        options=NoiseOptions,
        shape=_checked("stddev", None),
        params=no_params,
        flops=no_flops,  # the identity in inference
        keras=_keras("GaussianNoise", "stddev"),
        keras_classes=("GaussianNoise",),
        read=_reader("gaussian_noise", "stddev"),
        trains_differently=True,
        noise=Noise(amount="stddev", draws="added", stddev=lambda o: o.stddev),
        example=Example(  # both kinds: the gaussian_dropout needs no model of its own
            (5,),
            lambda: (
                Layer.of("noise", "gaussian_noise", stddev=0.1),
                Layer.of("hidden", "dense", units=4, activation="relu"),
                Layer.of("multiplied", "gaussian_dropout", rate=0.3),
            ),
        ),
        draw=lambda pick, shape: {"stddev": pick.one_of([0.0, 0.1, 1.0])},
        draw_ranks=(1, 2, 3),
    ),
    Kind(
        name="gaussian_dropout",
        summary="values multiplied by normal noise of mean 1 in training; the "
        "identity in inference",
        options=DropoutOptions,
        shape=_checked("rate", 1.0),
        params=no_params,
        flops=no_flops,  # the identity in inference
        keras=_keras("GaussianDropout", "rate"),
        keras_classes=("GaussianDropout",),
        read=_reader("gaussian_dropout", "rate"),
        trains_differently=True,
        noise=Noise(amount="rate", draws="multiplied", stddev=dropout_deviation),
        draw=lambda pick, shape: {"rate": pick.one_of([0.0, 0.2, 0.5])},
        draw_ranks=(1, 2, 3),
    ),
)
