"""The reference models in Keras 3, built from the framework-free specs.

Import this only in a process whose ``KERAS_BACKEND`` is already set: Keras
picks its backend once per process, at import.
"""

from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np

from zoo.specs import Layer, ModelSpec


def _keras_layer(layer: Layer) -> keras.layers.Layer:
    if layer.kind == "dense":
        return keras.layers.Dense(layer.size, layer.activation, name=layer.name)
    if layer.kind == "conv2d":
        return keras.layers.Conv2D(
            layer.size,
            layer.kernel,
            padding=layer.padding,
            activation=layer.activation,
            name=layer.name,
        )
    if layer.kind == "avg_pool":
        return keras.layers.AveragePooling2D(layer.size, name=layer.name)
    if layer.kind == "max_pool":
        return keras.layers.MaxPooling2D(layer.size, name=layer.name)
    if layer.kind == "flatten":
        return keras.layers.Flatten(name=layer.name)
    if layer.kind == "lstm":
        return keras.layers.LSTM(layer.size, name=layer.name)
    raise ValueError(f"layer {layer.name!r} has unknown kind {layer.kind!r}")


def build(spec: ModelSpec, input_shape: tuple[int, ...] | None = None) -> keras.Model:
    """The Keras model of ``spec``; ``input_shape`` overrides the spec's
    (a different LSTM sequence length, for instance)."""
    inputs = keras.Input(shape=input_shape or spec.input_shape, name="input")
    h = inputs
    for layer in spec.layers:
        h = _keras_layer(layer)(h)
    return keras.Model(inputs, h, name=spec.name)


def set_weights(
    model: keras.Model, spec: ModelSpec, canonical: Mapping[str, np.ndarray]
) -> None:
    """Assign canonical weights by (layer name, variable name), checking shapes."""
    for p in spec.params:
        variables = {v.name: v for v in model.get_layer(p.layer).weights}
        variable = variables[p.role]
        if tuple(variable.shape) != p.shape:
            raise ValueError(
                f"{p.name}: Keras variable has shape {tuple(variable.shape)}, "
                f"canonical has {p.shape}"
            )
        variable.assign(canonical[p.name])


def get_weights(model: keras.Model, spec: ModelSpec) -> dict[str, np.ndarray]:
    """The model's current weights, keyed by canonical name."""
    out = {}
    for p in spec.params:
        variables = {v.name: v for v in model.get_layer(p.layer).weights}
        out[p.name] = keras.ops.convert_to_numpy(variables[p.role].value)
    return out
