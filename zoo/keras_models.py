"""The reference models in Keras 3, built from the framework-free specs.

Every layer kind is Keras' own layer with Keras' defaults, as its module in
``zoo.kinds`` builds it (an ``attention`` layer is ``MultiHeadAttention``
over one sequence as query, key and value; a ``gru`` is ``GRU`` with
``reset_after=True``; a ``batch_norm``'s moving statistics are its
non-trainable variables).

Import this only in a process whose ``KERAS_BACKEND`` is already set: Keras
picks its backend once per process, at import.
"""

from __future__ import annotations

from collections.abc import Mapping

import keras
import numpy as np

from zoo.kinds import KINDS
from zoo.specs import ModelSpec, Param, layer_inputs


def build(spec: ModelSpec, input_shape: tuple[int, ...] | None = None) -> keras.Model:
    """The Keras model of ``spec`` in the functional API, from Keras' own
    layers only (so it saves as a ``.keras`` file ``--model`` reads back);
    ``input_shape`` overrides the spec's (a different LSTM sequence length,
    for instance).  A model whose first layer is an embedding takes int32
    token ids.  A model with several inputs or outputs is built with a
    ``keras.Input`` per input, named as the spec names it, and the list of
    its outputs in order."""
    shape = input_shape or spec.input_shape
    shapes = (shape, *spec.input_shapes[1:])
    inputs = [
        keras.Input(
            shape=given,
            dtype="int32" if spec.input_tokens(name) else "float32",
            name=name,
        )
        for name, given in zip(spec.input_names, shapes, strict=True)
    ]
    h = inputs[0]
    outputs: dict[str, keras.KerasTensor] = dict(
        zip(spec.input_names, inputs, strict=True)
    )
    for layer, (given, _) in zip(spec.layers, layer_inputs(spec, shape), strict=True):
        kind = KINDS[layer.kind]
        block = kind.keras(keras, layer, given)
        block.trainable = layer.trainable  # frozen: Keras trains none of it
        tensors = [outputs[name] for name in layer.inputs] if layer.inputs else [h]
        if kind.keras_call is not None:
            h = kind.keras_call(block, tensors)
        else:
            h = block(tensors[0]) if kind.takes == 1 else block(tensors)
        outputs[layer.name] = h
    if not spec.one_to_one:
        given = [outputs[head.layer] for head in spec.heads]
        return keras.Model(
            inputs, given if len(given) > 1 else given[0], name=spec.name
        )
    return keras.Model(inputs[0], h, name=spec.name)


def variable(model: keras.Model, param: Param) -> keras.Variable:
    """The Keras variable holding canonical parameter ``param``: the one at
    path ``<layer>/<role>`` (an attention layer's ``query/kernel``), else
    the layer's one variable whose path ends in the role (an LSTM's
    ``kernel`` lives in its cell, ``lstm/lstm_cell/kernel``; a bidirectional
    layer's ``forward/kernel`` in ``forward_lstm/lstm_cell/kernel``).  A
    layer named ``<model>__<layer>`` is that layer of a model nested in the
    model (``zoo.keras_import`` inlines one so)."""
    weights = _layer(model, param.layer).weights
    by_path = {v.path: v for v in weights}
    wanted = f"{param.layer}/{param.role}"
    if wanted in by_path:
        return by_path[wanted]
    head, _, tail = param.role.rpartition("/")
    found = [
        v
        for v in weights
        if v.path.endswith(f"/{param.role}")
        or (head and f"/{head}_" in f"/{v.path}" and v.path.endswith(f"/{tail}"))
    ]
    if len(found) == 1:
        return found[0]
    return {v.name: v for v in weights}[param.role]


def _layer(model: keras.Model, name: str) -> keras.Layer:
    """The layer ``name`` of ``model``, or ``<model>__<layer>`` of a model
    nested in it."""
    try:
        return model.get_layer(name)
    except ValueError:
        outer, joined, inner = name.partition("__")
        if not joined:
            raise
        return _layer(model.get_layer(outer), inner)


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
    for layer in model.layers:
        # A Normalization computes with copies of its statistics, which it
        # takes from its variables only here (else it keeps the old ones).
        if isinstance(layer, keras.layers.Normalization):
            layer.finalize_state()
