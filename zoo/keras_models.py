"""The reference models in Keras 3, built from the framework-free specs.

Every layer kind of ``zoo.specs`` is Keras' own layer with Keras' defaults
(an ``attention`` layer is ``MultiHeadAttention`` over one sequence as query,
key and value; a ``gru`` is ``GRU`` with ``reset_after=True``; a
``batch_norm``'s moving statistics are its non-trainable variables).

Import this only in a process whose ``KERAS_BACKEND`` is already set: Keras
picks its backend once per process, at import.
"""

from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np

from zoo.specs import Layer, ModelSpec, Param, layer_shapes


def _keras_layer(layer: Layer, shape: tuple[int, ...]) -> keras.layers.Layer:
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
    if layer.kind in ("lstm", "gru"):
        recurrent = keras.layers.LSTM if layer.kind == "lstm" else keras.layers.GRU
        return recurrent(
            layer.size, return_sequences=layer.return_sequences, name=layer.name
        )
    return _newer_layer(layer, shape)


def _newer_layer(  # noqa: PLR0911 (one Keras layer per kind)
    layer: Layer, shape: tuple[int, ...]
) -> keras.layers.Layer:
    """The kinds after the first four models' (``shape``: the layer's input,
    without the batch)."""
    n = layer.name
    if layer.kind == "embedding":
        return keras.layers.Embedding(layer.vocab, layer.size, name=n)
    if layer.kind == "conv1d":
        return keras.layers.Conv1D(
            layer.size,
            layer.kernel,
            strides=layer.stride,
            padding=layer.padding,
            activation=layer.activation,
            name=n,
        )
    if layer.kind in ("avg_pool1d", "max_pool1d"):
        pool = (
            keras.layers.AveragePooling1D
            if layer.kind == "avg_pool1d"
            else keras.layers.MaxPooling1D
        )
        return pool(layer.size, layer.stride, layer.padding, name=n)
    if layer.kind == "global_avg_pool":
        if len(shape) == 2:
            return keras.layers.GlobalAveragePooling1D(name=n)
        return keras.layers.GlobalAveragePooling2D(name=n)
    if layer.kind == "layer_norm":
        return keras.layers.LayerNormalization(epsilon=layer.norm_epsilon, name=n)
    if layer.kind == "attention":
        return keras.layers.MultiHeadAttention(layer.heads, layer.size, name=n)
    if layer.kind == "add":
        return keras.layers.Add(name=n)
    if layer.kind == "batch_norm":
        return keras.layers.BatchNormalization(
            momentum=layer.norm_momentum, epsilon=layer.norm_epsilon, name=n
        )
    if layer.kind == "dropout":
        return keras.layers.Dropout(layer.rate, name=n)
    raise ValueError(f"layer {layer.name!r} has unknown kind {layer.kind!r}")


def build(spec: ModelSpec, input_shape: tuple[int, ...] | None = None) -> keras.Model:
    """The Keras model of ``spec`` in the functional API, from Keras' own
    layers only (so it saves as a ``.keras`` file ``--model`` reads back);
    ``input_shape`` overrides the spec's (a different LSTM sequence length,
    for instance).  A model whose first layer is an embedding takes int32
    token ids."""
    shape = input_shape or spec.input_shape
    dtype = "int32" if spec.tokens else "float32"
    inputs = keras.Input(shape=shape, dtype=dtype, name="input")
    h = inputs
    outputs: dict[str, keras.KerasTensor] = {}
    for layer, (given, _) in zip(spec.layers, layer_shapes(spec, shape), strict=True):
        block = _keras_layer(layer, given)
        if layer.kind == "add":
            h = block([outputs[name] for name in layer.inputs])
        else:
            h = outputs[layer.inputs[0]] if layer.inputs else h
            # Self-attention: the sequence is query, value and key.
            h = block(h, h) if layer.kind == "attention" else block(h)
        outputs[layer.name] = h
    return keras.Model(inputs, h, name=spec.name)


def variable(model: keras.Model, param: Param) -> keras.Variable:
    """The Keras variable holding canonical parameter ``param``: the one at
    path ``<layer>/<role>`` (an attention layer's ``query/kernel``), else the
    layer's one variable named ``role`` (an LSTM's ``kernel`` lives in its
    cell, ``lstm/lstm_cell/kernel``)."""
    weights = model.get_layer(param.layer).weights
    by_path = {v.path: v for v in weights}
    wanted = f"{param.layer}/{param.role}"
    if wanted in by_path:
        return by_path[wanted]
    return {v.name: v for v in weights}[param.role]


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
