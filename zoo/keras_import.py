"""A user's ``.keras`` file -> a model document (``zoo.user_models``) and its
weights in canonical layout.

Only a Keras worker runs ``load`` (the orchestrator imports no framework);
``read_config`` and ``document_from_config`` read the archive's
``config.json`` with the standard library, so every refusal that the
architecture alone decides comes before Keras deserializes anything:

- a file that is not a Keras archive (a zip with ``config.json`` and
  ``model.weights.h5``), is larger than ``MAX_BYTES``, or whose members
  would unpack to more than that (a zip bomb): one sentence;
- a layer outside ``SUPPORTED`` (a ``Lambda``, a custom class, an
  ``Embedding``), an option the spec cannot express (dilation, groups, no
  bias, dropout, a regularizer or constraint, channels-first), a shared
  layer (called twice), a branch (a layer whose input is not the previous
  layer's output), a model inside the model, several inputs or outputs:
  one sentence naming the layer and what is supported.

Then ``keras.saving.load_model(..., safe_mode=True, compile=False)`` loads
the file and each parameter is read by layer and variable name, the way
``zoo.keras_models.variable`` assigns them.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from zoo.user_models import DEFAULT_WORKLOAD

MAX_BYTES = 4 << 30  # a file, or its members unpacked
MAX_CONFIG_BYTES = 16 << 20
# Keras class -> the spec's layer kind.
SUPPORTED = {
    "Dense": "dense",
    "Conv2D": "conv2d",
    "MaxPooling2D": "max_pool",
    "AveragePooling2D": "avg_pool",
    "Flatten": "flatten",
    "LSTM": "lstm",
}
_ACTIVATIONS = ("linear", "relu", "tanh", "sigmoid", "softmax")
_SUPPORTED_TEXT = (
    "Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten and LSTM in one "
    "chain from one input, activations linear, relu, tanh, sigmoid or softmax"
)
# Options that must hold Keras' default, or the spec would compute something
# else: (option, what it must be).
_MUST = {
    "Dense": (
        ("use_bias", True),
        ("kernel_regularizer", None),
        ("bias_regularizer", None),
        ("activity_regularizer", None),
        ("kernel_constraint", None),
        ("bias_constraint", None),
        ("lora_rank", None),
    ),
    "Conv2D": (
        ("use_bias", True),
        ("dilation_rate", [1, 1]),
        ("groups", 1),
        ("data_format", "channels_last"),
        ("kernel_regularizer", None),
        ("bias_regularizer", None),
        ("activity_regularizer", None),
        ("kernel_constraint", None),
        ("bias_constraint", None),
    ),
    "MaxPooling2D": (("data_format", "channels_last"),),
    "AveragePooling2D": (("data_format", "channels_last"),),
    "Flatten": (("data_format", "channels_last"),),
    "LSTM": (
        ("activation", "tanh"),
        ("recurrent_activation", "sigmoid"),
        ("use_bias", True),
        ("dropout", 0.0),
        ("recurrent_dropout", 0.0),
        ("return_state", False),
        ("go_backwards", False),
        ("stateful", False),
        ("kernel_regularizer", None),
        ("recurrent_regularizer", None),
        ("bias_regularizer", None),
        ("activity_regularizer", None),
        ("kernel_constraint", None),
        ("recurrent_constraint", None),
        ("bias_constraint", None),
    ),
}


def read_config(path: Path) -> dict[str, Any]:
    """The archive's ``config.json``, after checking the file is a Keras
    archive of a sane size (nothing unpacked but the config)."""
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValueError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if not path.is_file():
        raise ValueError(f"{path} is not a file")
    if size > MAX_BYTES:
        raise ValueError(
            f"{path} is {size / 2**30:.1f} GiB, more than the 4 GiB a model may be"
        )
    try:
        with zipfile.ZipFile(path) as archive:
            members = {info.filename: info for info in archive.infolist()}
            if "config.json" not in members or "model.weights.h5" not in members:
                raise ValueError(
                    f"{path} is a zip file but not a Keras archive (no config.json "
                    "and model.weights.h5); save the model with model.save('x.keras')"
                )
            unpacked = sum(info.file_size for info in members.values())
            if unpacked > MAX_BYTES:
                raise ValueError(
                    f"{path} would unpack to {unpacked / 2**30:.1f} GiB, more than "
                    "the 4 GiB a model may be"
                )
            if members["config.json"].file_size > MAX_CONFIG_BYTES:
                raise ValueError(f"{path}'s config.json is larger than 16 MiB")
            text = archive.read("config.json")
    except zipfile.BadZipFile:
        raise ValueError(
            f"{path} is not a Keras archive (not a zip file: a .h5 or SavedModel "
            "is not read; save the model with model.save('x.keras'))"
        ) from None
    try:
        config = json.loads(text)
    except ValueError:
        raise ValueError(f"{path} has a damaged config.json (not JSON)") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} has a damaged config.json (not an object)")
    return config


def _layers(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model's layer entries in order, checked to be one chain."""
    kind = config.get("class_name")
    inner = config.get("config")
    if kind not in ("Sequential", "Functional") or not isinstance(inner, dict):
        raise ValueError(
            f"the file holds a {kind!r}, not a Sequential or functional Keras "
            "model (a subclassed model's code cannot be read safely)"
        )
    layers = inner.get("layers")
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise ValueError("the file's config.json lists no layers")
    if kind == "Sequential":
        return layers
    for key in ("input_layers", "output_layers"):
        ends = inner.get(key)  # [name, 0, 0] for one, [[name, 0, 0], ...] for several
        if isinstance(ends, list) and ends and isinstance(ends[0], str):
            ends = [ends]
        if not isinstance(ends, list) or len(ends) != 1:
            raise ValueError(
                "the model has several inputs or outputs; only one chain from "
                "one input to one output is supported"
            )
    previous = None
    for entry in layers:
        name = entry.get("name") or entry.get("config", {}).get("name")
        nodes = entry.get("inbound_nodes", [])
        if entry.get("class_name") == "InputLayer":
            previous = name
            continue
        if len(nodes) > 1:
            raise ValueError(
                f"layer {name!r} is called {len(nodes)} times (a shared layer); "
                f"supported: {_SUPPORTED_TEXT}"
            )
        sources = _sources(nodes[0] if nodes else {})
        if sources != [previous]:
            raise ValueError(
                f"layer {name!r} takes {', '.join(map(str, sources)) or 'nothing'}, "
                f"not the layer before it ({previous}): a branch the spec cannot "
                f"express; supported: {_SUPPORTED_TEXT}"
            )
        previous = name
    return layers


def _sources(node: Any) -> list[Any]:
    """The layers whose outputs a node's call arguments name."""
    found: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("class_name") == "__keras_tensor__":
                history = value.get("config", {}).get("keras_history", [None])
                found.append(history[0])
                return
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(node)
    return found


def _pair(value: Any, what: str, name: str) -> int:
    """A square option (``3`` or ``[3, 3]``) as one number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and len(value) == 2 and value[0] == value[1]:
        return int(value[0])
    raise ValueError(
        f"layer {name!r} has {what} {value!r}; only square windows and strides "
        "are supported"
    )


def _entry(layer: Mapping[str, Any]) -> dict[str, Any] | None:
    """One layer's document entry (``None`` for the input layer)."""
    cls = layer.get("class_name")
    config = layer.get("config", {})
    name = config.get("name", "?")
    if cls == "InputLayer":
        return None
    if cls in ("Sequential", "Functional", "Model"):
        raise ValueError(
            f"layer {name!r} is a model inside the model; supported: {_SUPPORTED_TEXT}"
        )
    if cls not in SUPPORTED or layer.get("module") not in ("keras.layers", None):
        what = (
            "a custom class"
            if layer.get("module") not in ("keras.layers", None)
            else cls
        )
        raise ValueError(
            f"layer {name!r} ({what}) is not one the tool knows; "
            f"supported: {_SUPPORTED_TEXT}"
        )
    for option, default in _MUST.get(cls, ()):
        value = config.get(option, default)
        if value != default and not (
            option == "dilation_rate" and value in (1, [1, 1])
        ):
            raise ValueError(
                f"{cls} layer {name!r} has {option}={value!r}, which the tool does "
                f"not compute; it needs {option}={default!r}"
            )
    entry: dict[str, Any] = {"kind": SUPPORTED[cls], "name": name}
    activation = config.get("activation", "linear")
    if cls in ("Dense", "Conv2D"):
        if activation not in _ACTIVATIONS:
            raise ValueError(
                f"layer {name!r} has activation {activation!r}; supported: "
                f"{', '.join(_ACTIVATIONS)}"
            )
        entry["activation"] = activation
    if cls in ("Dense", "LSTM"):
        entry["units"] = config.get("units")
    if cls == "Conv2D":
        entry["filters"] = config.get("filters")
        entry["kernel_size"] = _pair(config.get("kernel_size"), "kernel_size", name)
        entry["strides"] = _pair(config.get("strides", 1), "strides", name)
        entry["padding"] = config.get("padding", "valid")
    if cls in ("MaxPooling2D", "AveragePooling2D"):
        size = _pair(config.get("pool_size"), "pool_size", name)
        strides = config.get("strides")
        entry["pool_size"] = size
        entry["strides"] = size if strides is None else _pair(strides, "strides", name)
        entry["padding"] = config.get("padding", "valid")
    if cls == "LSTM":
        entry["return_sequences"] = bool(config.get("return_sequences", False))
    return entry


def _input_shape(layers: list[dict[str, Any]]) -> list[Any]:
    for layer in layers:
        config = layer.get("config", {})
        shape = config.get("batch_shape") or config.get("batch_input_shape")
        if shape is None and layer.get("build_config"):
            shape = layer["build_config"].get("input_shape")
        if shape is not None:
            if not isinstance(shape, list) or any(
                not isinstance(d, int) for d in shape[1:]
            ):
                raise ValueError(
                    f"the model's input shape {shape} is not fixed; give every "
                    "axis but the batch a size (a fixed sequence length, say)"
                )
            return list(shape[1:])
    raise ValueError("the file does not say the model's input shape; build it first")


def _workload(config: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer and rate the model was compiled with, where the native
    paths write that optimizer out with Keras' constants; else the default."""
    compiled = config.get("compile_config") or {}
    optimizer = compiled.get("optimizer") if isinstance(compiled, dict) else None
    if not isinstance(optimizer, dict):
        return dict(DEFAULT_WORKLOAD)
    cls, options = optimizer.get("class_name"), optimizer.get("config", {})
    rate = options.get("learning_rate")
    extras = (
        "weight_decay",
        "clipnorm",
        "global_clipnorm",
        "clipvalue",
        "use_ema",
        "loss_scale_factor",
        "gradient_accumulation_steps",
    )
    if any(options.get(option) for option in extras):
        return dict(DEFAULT_WORKLOAD)
    plain = {
        "Adam": options.get("beta_1", 0.9) == 0.9
        and options.get("beta_2", 0.999) == 0.999
        and options.get("epsilon", 1e-7) == 1e-7
        and not options.get("amsgrad", False),
        "SGD": not options.get("momentum", 0.0) and not options.get("nesterov", False),
    }
    if cls in plain and plain[cls] and isinstance(rate, int | float):
        # Keras keeps the rate as a float32: 0.001 comes back 0.0010000000474974513
        rate = float(f"{rate:.8g}")
        return {**DEFAULT_WORKLOAD, "optimizer": cls.lower(), "learning_rate": rate}
    return dict(DEFAULT_WORKLOAD)


def document_from_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The model document of a Keras archive's config (no Keras needed)."""
    layers = _layers(config)
    entries = [e for e in (_entry(layer) for layer in layers) if e is not None]
    return {
        "input_shape": _input_shape(layers),
        "layers": entries,
        "workload": _workload(config),
    }


def load(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The document and canonical weights of the Keras file ``path``
    (inside a Keras worker)."""
    import keras

    from zoo.keras_models import variable
    from zoo.user_models import spec_from_document

    document = document_from_config(read_config(path))
    spec = spec_from_document("user model", document)  # refused before loading
    try:
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except Exception as exc:
        first = (
            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        )
        raise ValueError(f"Keras cannot load {path}: {first}") from None
    # each parameter by layer and variable name, as zoo.keras_models assigns it
    weights = {
        p.name: np.asarray(keras.ops.convert_to_numpy(variable(model, p)), np.float32)
        for p in spec.params
    }
    return document, weights
