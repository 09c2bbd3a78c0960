"""``activation``: an activation as a layer of its own (Keras' ``Activation``,
``ReLU``, ``LeakyReLU``, ``ELU``, ``Softmax``): the identity, then
``Layer.activation`` as on any layer (``native.compose``), with its
``slope`` where it takes one (``LeakyReLU``'s negative slope, ``ELU``'s
alpha; 0: Keras' default).  No parameters."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    ACTIVATIONS,
    SLOPED,
    Kind,
    Layer,
    Mistake,
    Pick,
    Shape,
    no_params,
    one_input,
)

# Keras' LeakyReLU layer's default negative slope (the ``leaky_relu``
# activation function's is 0.2: ``SLOPED``).
LEAKY_RELU_LAYER_SLOPE = 0.3


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return 0, 0  # the activation's own count is added by the caller


@dataclass(frozen=True)
class Options:
    """The activation (``ACTIVATIONS``; ``None``: linear) and, for
    ``leaky_relu`` and ``elu``, its ``slope`` (Keras' ``negative_slope`` of
    ``LeakyReLU``, ``alpha`` of ``ELU``; ``None``: the function's default,
    ``SLOPED``)."""

    activation: str | None = None
    slope: float | None = None


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    n = layer.name
    if layer.activation == "leaky_relu":
        return keras.layers.LeakyReLU(negative_slope=layer.activation_slope, name=n)
    if layer.activation == "elu":
        return keras.layers.ELU(alpha=layer.activation_slope, name=n)
    return keras.layers.Activation(layer.activation or "linear", name=n)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": "activation", "name": name}
    if cls == "Activation":
        entry["activation"] = kw.activation(name, config)
    elif cls == "Softmax":
        axis = config.get("axis", -1)
        if axis not in (-1, [-1]):
            raise ValueError(
                f"Softmax layer {name!r} is over axis {axis!r}; the tool computes "
                "a softmax over the last axis only"
            )
        entry["activation"] = "softmax"
    elif cls == "ReLU":
        entry.update(_relu(name, config))
    elif cls == "LeakyReLU":
        slope = config.get("negative_slope", LEAKY_RELU_LAYER_SLOPE)
        entry.update(
            activation="leaky_relu", slope=_number(name, "negative_slope", slope)
        )
    else:  # ELU
        alpha = _number(name, "alpha", config.get("alpha", 1.0))
        entry.update(activation="elu", slope=alpha)
    if "slope" in entry and entry["slope"] == SLOPED.get(entry["activation"]):
        del entry["slope"]  # Keras' default for the activation, not written
    return entry


def _number(name: str, what: str, value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (0 < value < math.inf)
    ):
        raise ValueError(f"layer {name!r} has {what}={value!r}; it must be above 0")
    return float(value)


def _relu(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Keras' ReLU layer as an activation: plain, capped at 6, or leaky."""
    cap, slope = config.get("max_value"), config.get("negative_slope", 0.0)
    if config.get("threshold", 0.0):
        raise ValueError(
            f"ReLU layer {name!r} has threshold={config['threshold']!r}; the tool "
            "computes a ReLU at 0 only"
        )
    if cap is None and not slope:
        return {"activation": "relu"}
    if cap == 6 and not slope:
        return {"activation": "relu6"}
    if cap is None:
        return {
            "activation": "leaky_relu",
            "slope": _number(name, "negative_slope", slope),
        }
    raise ValueError(
        f"ReLU layer {name!r} has max_value={cap!r} and negative_slope={slope!r}; "
        "the tool computes a ReLU capped at 6 or leaky, not both"
    )


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    name = pick.one_of([a for a in ACTIVATIONS if a is not None])
    entry: dict[str, Any] = {"activation": name}
    if name in SLOPED and pick.boolean():
        entry["slope"] = pick.one_of([0.1, 0.5])
    return entry


MISTAKES = (
    Mistake(
        "slope-default",
        "a LeakyReLU or ELU layer computed with its activation function's "
        "default slope, not its own (LeakyReLU's 0.3 is not leaky_relu's 0.2)",
        "kinds-cnn",
        hits=lambda layer, shapes: bool(layer.options.slope),  # its own
        changes=lambda layer: {"slope": None},
    ),
)


KIND = Kind(
    name="activation",
    summary="an activation as a layer of its own",
    options=Options,
    shape=one_input,
    params=no_params,
    flops=flops,
    keras=keras,
    keras_classes=("Activation", "ReLU", "LeakyReLU", "ELU", "Softmax"),
    read=read,
    draw=draw,
    draw_ranks=(1, 2, 3),
    mistakes=MISTAKES,
)
