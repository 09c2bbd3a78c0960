"""The reference models in Keras 3, built from the framework-free specs.

Import this only in a process whose ``KERAS_BACKEND`` is already set: Keras
picks its backend once per process, at import.
"""

from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np

from zoo.specs import Layer, ModelSpec, Param


def _keras_layer(layer: Layer) -> keras.layers.Layer:
    if layer.kind == "dense":
        return keras.layers.Dense(layer.size, layer.activation, name=layer.name)
    if layer.kind == "conv2d":
        return keras.layers.Conv2D(
            layer.size,
            layer.kernel,
            strides=layer.stride,
            padding=layer.padding,
            activation=layer.activation,
            name=layer.name,
        )
    if layer.kind in ("avg_pool", "max_pool"):
        pool = (
            keras.layers.AveragePooling2D
            if layer.kind == "avg_pool"
            else keras.layers.MaxPooling2D
        )
        return pool(layer.size, layer.stride, layer.padding, name=layer.name)
    if layer.kind == "flatten":
        return keras.layers.Flatten(name=layer.name)
    if layer.kind == "lstm":
        return keras.layers.LSTM(
            layer.size, return_sequences=layer.return_sequences, name=layer.name
        )
    raise ValueError(f"layer {layer.name!r} has unknown kind {layer.kind!r}")


def build(spec: ModelSpec, input_shape: tuple[int, ...] | None = None) -> keras.Model:
    """The Keras model of ``spec``; ``input_shape`` overrides the spec's
    (a different LSTM sequence length, for instance)."""
    inputs = keras.Input(shape=input_shape or spec.input_shape, name="input")
    h = inputs
    for layer in spec.layers:
        h = _keras_layer(layer)(h)
    return keras.Model(inputs, h, name=spec.name)


def variable(model: keras.Model, param: Param) -> keras.Variable:
    """The Keras variable holding canonical parameter ``param``."""
    variables = {v.name: v for v in model.get_layer(param.layer).weights}
    return variables[param.role]


def set_weights(
    model: keras.Model, spec: ModelSpec, canonical: Mapping[str, np.ndarray]
) -> None:
    """Assign canonical weights by (layer name, variable name), checking shapes."""
    for p in spec.params:
        target = variable(model, p)
        if tuple(target.shape) != p.shape:
            raise ValueError(
                f"{p.name}: Keras variable has shape {tuple(target.shape)}, "
                f"canonical has {p.shape}"
            )
        target.assign(canonical[p.name])
