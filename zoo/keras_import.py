"""A user's ``.keras`` file -> a model document (``zoo.user_models``) and its
weights in canonical layout.

Only a Keras worker runs ``load`` (the orchestrator imports no framework);
``read_config`` and ``document_from_config`` read the archive's
``config.json`` with the standard library, so every refusal that the
architecture alone decides comes before Keras deserializes anything:

- a file that is not a Keras archive (a zip with ``config.json`` and
  ``model.weights.h5``), is larger than ``MAX_BYTES``, or whose members
  would unpack to more than that (a zip bomb): one sentence;
- a layer outside ``SUPPORTED`` (a ``Lambda``, a class of its own: rebuild
  it from built-in layers), an option its kind's module (``zoo.kinds``)
  does not compute (dilation, a recurrent or attention layer's own
  dropout, a mask, a regularizer other than L1/L2, a constraint,
  channels-first, ...), a shared layer (called twice), several inputs or
  outputs: one sentence naming the layer and what is supported, and every
  such layer of the file named at once.

A functional model is read from each layer's inbound node: a layer that
takes the previous layer's output is written plainly, one that takes an
earlier layer's (or the model's input, ``zoo.specs.INPUT``) names it in
``inputs`` (a merge always names the two or more it takes); ``x + y``,
``x - y``, ``x * y`` and ``keras.ops.maximum``/``minimum`` between two
tensors, which Keras saves as operations of ``keras.src.ops.numpy``, are
read as the merges of those names.  A ``Dropout`` of rate 0 is the
identity and is left out (a layer that takes it takes what it took); one
of any other rate below 1 is a ``dropout`` of that rate (its ``seed`` is
not kept: the tool compares training trajectories at rate 0,
``zoo.specs.without_noise``, and checks each path's dropout at its rate
on its own).  A ``BatchNormalization`` over the last axis is a
``batch_norm`` with its ``epsilon`` and ``momentum``; its moving statistics
are read with its weights.  A model used as a layer (a Sequential or
functional one: a pretrained base) is inlined, its layers named
``<model>__<layer>`` (``_inlined``).

Then ``keras.saving.load_model(..., safe_mode=True, compile=False)`` loads
the file and each parameter is read by layer and variable path (an
attention layer's ``query/kernel``), else name, the way
``zoo.keras_models.variable`` assigns them.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zoo import files
from zoo.kinds import BY_KERAS_CLASS, KINDS
from zoo.kinds.attention import CALL_TENSORS
from zoo.kinds.base import INPUT as SPEC_INPUT
from zoo.losses import OPTIONS as LOSS_OPTIONS
from zoo.losses import Objective, check_outputs, from_keras, loss_options
from zoo.losses import check as check_loss
from zoo.optimizers import OPTIMIZERS, SCHEDULES
from zoo.specs import OUTPUT_RANKS, not_one_row
from zoo.user_models import (
    DEFAULT_WORKLOAD,
    MAX_INPUTS,
    check_entry,
    layer_of,
    spec_from_document,
)

if TYPE_CHECKING:
    from zoo.specs import ModelSpec

MAX_BYTES = 4 << 30  # a file, or its members unpacked
MAX_CONFIG_BYTES = 16 << 20
# How deep a config may nest (Keras' own nest about a dozen levels).
MAX_CONFIG_DEPTH = 64
# ``model.weights.h5`` may hold the parameters (float32), an optimizer's
# state for each (Adam's two moments) and HDF5's own bookkeeping: at most
# WEIGHTS_PER_VALUE bytes per parameter value plus WEIGHTS_SLACK.
WEIGHTS_PER_VALUE = 4 * 4
WEIGHTS_SLACK = 4 << 20
# The steps a sequence of free length (``shape=(None, F)``) is read with when
# no ``--seq-len`` is given: it is checked at this length and at
# ``equivalence.check.SHORT_SEQ_LEN``, and timed at this length.
FREE_LENGTH = 64
# What of Keras' refusal the sentence keeps.
MAX_REASON_CHARS = 500
# The dtype policy every layer must compute in.
FLOAT32 = "float32"
# Keras class -> the spec's layer kind (each kind's module in ``zoo.kinds``
# names the classes it reads, and reads them).
SUPPORTED = {cls: kind.name for cls, kind in BY_KERAS_CLASS.items()}
_SUPPORTED_TEXT = (
    "Keras' built-in layers of the kinds docs/user_models.md lists (zoo/kinds), "
    "each called once"
)
# The model's input, as the source a layer takes (``zoo.specs.INPUT``).
INPUT = SPEC_INPUT
# ``x + y`` (and ``-``, ``*``, ``keras.ops.maximum``...) on two of a functional
# model's tensors is saved as an operation of this module, read as the merge.
OPERATIONS_MODULE = "keras.src.ops.numpy"
_OPERATIONS = {"Add": "add", "Subtract": "subtract", "Multiply": "multiply"}
_OPERATIONS |= {"Maximum": "maximum", "Minimum": "minimum"}
# What to do instead, for what stays refused.
_CUSTOM = (
    "a class of its own runs code the tool does not load from a file; rebuild it "
    "from Keras' built-in layers"
)


def _config_of(archive: zipfile.ZipFile, path: Path) -> tuple[dict[str, Any], bytes]:
    """The archive's ``config.json`` and its bytes, after checking it is a
    Keras archive whose members declare a sane size (the config itself read
    at most ``MAX_CONFIG_BYTES`` inflated, whatever its entry declares)."""
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
    try:
        text = files.member_bytes(
            archive, "config.json", MAX_CONFIG_BYTES, f"{path}: config.json"
        )
    except files.Refused as exc:
        if "inflates to more" in str(exc):
            raise ValueError(
                f"{path}'s config.json inflates to more than 16 MiB (its "
                "directory says less)"
            ) from None
        raise ValueError(
            f"{path} has a damaged config.json (it does not inflate to what "
            "the archive's directory says)"
        ) from None
    try:
        config = files.parse_json(text, f"{path}'s config.json")
    except files.Refused as exc:
        if "nests too deeply" in str(exc):
            raise ValueError(
                f"{path} has a config.json that nests too deeply"
            ) from None
        raise ValueError(f"{path} has a damaged config.json (not JSON)") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} has a damaged config.json (not an object)")
    _check_depth(path, config)
    return config, text


@contextlib.contextmanager
def _archive(path: Path) -> Iterator[zipfile.ZipFile]:
    """The user's ``.keras`` file as a zip archive through the door
    (``zoo.files``: a regular file of at most ``MAX_BYTES``; the path the
    user named may be a link), refused in one sentence otherwise."""
    try:
        with files.open_zip(path, MAX_BYTES, follow=True) as archive:
            yield archive
    except files.Refused as exc:
        message = str(exc)
        if "is a folder" in message:
            raise ValueError(f"{path} is a folder, not a Keras file") from None
        if "not a regular file" in message:
            kind = message.split(" is ", 1)[1].split(",", 1)[0]
            raise ValueError(
                f"{path} is not a regular file ({kind}: not a file a model is saved in)"
            ) from None
        if "more than the" in message:
            raise ValueError(
                f"{path} is {path.stat().st_size / 2**30:.1f} GiB, more than the "
                "4 GiB a model may be"
            ) from None
        if "not a zip archive" in message:
            raise ValueError(
                f"{path} is not a Keras archive (not a zip file: a .h5 or "
                "SavedModel is not read; save the model with model.save('x.keras'))"
            ) from None
        raise ValueError(f"{path}: {message}") from None
    except FileNotFoundError:
        raise ValueError(f"{path} cannot be read: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path} cannot be read: {exc.strerror or exc}") from None


def read_config(path: Path) -> dict[str, Any]:
    """The archive's ``config.json``, after checking the file is a Keras
    archive of a sane size (nothing unpacked but the config, itself read
    at most ``MAX_CONFIG_BYTES`` inflated)."""
    with _archive(path) as archive:
        return _config_of(archive, path)[0]


def _check_depth(path: Path, config: Any) -> None:
    """Refuse a config nested deeper than ``MAX_CONFIG_DEPTH`` (walked
    without recursion)."""
    pending: list[tuple[Any, int]] = [(config, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_CONFIG_DEPTH:
            raise ValueError(
                f"{path} has a config.json nested more than {MAX_CONFIG_DEPTH} deep, "
                "which no Keras model needs"
            )
        pending.extend((child, depth + 1) for child in children)


def weights_limit(spec: ModelSpec) -> int:
    """The most bytes ``model.weights.h5`` may take for ``spec``."""
    values = sum(int(np.prod(p.shape, dtype=np.int64)) for p in spec.params)
    return WEIGHTS_PER_VALUE * values + WEIGHTS_SLACK


def check_weights_member(path: Path, spec: ModelSpec) -> None:
    """Refuse, in one sentence, a ``model.weights.h5`` larger than the
    parameters ``spec`` reads from the config need (``weights_limit``):
    its declared size and what it inflates to (``load`` checks the second
    as it copies the member, ``_copy``)."""
    with _archive(path) as archive:
        limit = _weights_fit(archive, path, spec)
        try:
            with files.member(
                archive, "model.weights.h5", limit, f"{path}: model.weights.h5"
            ) as stream:
                while stream.read(files.CHUNK):
                    pass
        except files.Refused as exc:
            raise ValueError(_weights_refusal(path, limit, exc)) from None


def _weights_fit(archive: zipfile.ZipFile, path: Path, spec: ModelSpec) -> int:
    """``weights_limit(spec)`` once ``model.weights.h5``'s declared size is
    within it (what it inflates to is checked as it is read: ``_copy``,
    ``check_weights_member``)."""
    limit = weights_limit(spec)
    declared = archive.getinfo("model.weights.h5").file_size
    if declared > limit:
        raise ValueError(
            f"{path}'s model.weights.h5 is {declared:,} bytes, more than the "
            f"{limit:,} bytes its config's parameters need"
        )
    return limit


def _weights_refusal(path: Path, limit: int, exc: files.Refused) -> str:
    if "inflates to more" in str(exc):
        return (
            f"{path}'s model.weights.h5 inflates to more than the {limit:,} bytes "
            "its config's parameters need"
        )
    return (
        f"{path} has a damaged model.weights.h5 (it does not inflate to what "
        "the archive's directory says)"
    )


def _copy(
    archive: zipfile.ZipFile, path: Path, config: bytes, limit: int, dest: Path
) -> Path:
    """The archive Keras loads: the config the tool read (its bytes) and the
    weights and metadata inflated within their limits (``files.zip_copy``),
    so Keras never reads a member again without one."""
    try:
        return files.zip_copy(
            dest,
            archive,
            {"metadata.json": MAX_CONFIG_BYTES, "model.weights.h5": limit},
            {"config.json": config},
            path,
        )
    except files.Refused as exc:
        if "model.weights.h5" in str(exc):
            raise ValueError(_weights_refusal(path, limit, exc)) from None
        raise ValueError(str(exc)) from None


def keras_reason(exc: BaseException) -> str:
    """Keras' refusal as one line: its message's lines joined, traceback
    lines dropped, cut at ``MAX_REASON_CHARS``."""
    kept: list[str] = []
    skipping = False
    for raw in str(exc).splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Traceback (most recent call last)"):
            skipping = True
            continue
        if skipping and (raw.startswith((" ", "\t")) or line.startswith("File ")):
            continue
        skipping = False
        if line.startswith(('File "', "^")):
            continue
        kept.append(line)
    text = re.sub(r"\s+", " ", " ".join(kept)).strip() or type(exc).__name__
    if len(text) > MAX_REASON_CHARS:
        text = text[: MAX_REASON_CHARS - 3].rstrip() + "..."
    return text


Graph = list[tuple[dict[str, Any], list[str]]]


def _layers(config: Mapping[str, Any]) -> Graph:
    """The model's layer entries in order, each with the layers whose outputs
    it takes (``INPUT``: the model's input), a Dropout of rate 0 left out."""
    kind = config.get("class_name")
    inner = config.get("config")
    if kind not in ("Sequential", "Functional") or not isinstance(inner, dict):
        raise ValueError(
            f"the file holds a {kind!r}, not a Sequential or functional Keras "
            "model (a subclassed model's code cannot be read safely; build it "
            "with keras.Model(inputs, outputs) and save that)"
        )
    layers = inner.get("layers")
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        raise ValueError("the file's config.json lists no layers")
    if kind == "Sequential":
        chain: Graph = []
        previous = INPUT
        for entry in layers:
            if entry.get("class_name") != "InputLayer" and not _identity(entry):
                chain.append((entry, [previous]))
                previous = _name(entry)
        return _inlined(chain)
    return _inlined(_functional(inner, layers))


# The classes of a model used as a layer inside another.
MODELS = ("Sequential", "Functional")
# Joins a nested model's name and its layer's (no "." or "/": PyTorch's
# parameter names refuse them).
NESTED = "__"


def _inlined(graph: Graph) -> Graph:
    """``graph`` with every model used as a layer (a pretrained base, a
    block built as a Sequential) replaced by its own layers, each named
    ``<model>__<layer>`` (Keras finds its weights there:
    ``zoo.keras_models.variable``), taking what the model took."""
    flat: Graph = []
    ends: dict[str, str] = {}  # a nested model's name -> its last layer's
    for entry, given in graph:
        sources = [ends.get(source, source) for source in given]
        if entry.get("class_name") not in MODELS:
            flat.append((entry, sources))
            continue
        model = _name(entry)
        if len(set(sources)) != 1:
            raise ValueError(
                f"the model {model!r} inside the model takes {len(set(sources))} "
                "tensors; the tool reads a nested model of one input"
            )
        renamed = {INPUT: sources[0]}
        inner_config = entry.get("config")
        listed = inner_config.get("layers") if isinstance(inner_config, dict) else None
        layers = _layers(entry) if listed else []
        if not layers:
            raise ValueError(f"the model {model!r} inside the model has no layers")
        # A frozen model freezes every layer of it, as Keras' setter does.
        frozen = (
            isinstance(inner_config, dict) and inner_config.get("trainable") is False
        )
        for inner, taken in layers:
            name = f"{model}{NESTED}{_name(inner)}"
            renamed[_name(inner)] = name
            config = {**inner.get("config", {}), "name": name}
            if frozen:
                config["trainable"] = False
            entry_named = {**inner, "config": config, "name": name}
            flat.append((entry_named, [renamed[t] for t in taken]))
        ends[model] = _name(flat[-1][0])
    return flat


def ends(config: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The names of a model's input layers and output layers as its config
    lists them, in order (a Sequential's: none named, ``[]`` each); a
    ValueError for a list that names something else."""
    inner = config.get("config")
    if config.get("class_name") != "Functional" or not isinstance(inner, dict):
        return [], []
    found = []
    for key in ("input_layers", "output_layers"):
        given = inner.get(key)  # [name, 0, 0] for one, [[name, 0, 0], ...] or a dict
        if isinstance(given, dict):  # Keras' dict of named ends: its order
            renamed = [
                k
                for k, v in given.items()
                if not (isinstance(v, list) and v[:1] == [k])
            ]
            if renamed:
                raise ValueError(
                    f"the model's {key} are a dict whose key {renamed[0]!r} is not "
                    "its layer's name; name each by its layer (the tool matches "
                    "a loss per output by the output layer's name)"
                )
            given = list(given.values())
        if isinstance(given, list) and given and isinstance(given[0], str):
            given = [given]
        if (
            not isinstance(given, list)
            or not given
            or not all(
                isinstance(g, list) and g and isinstance(g[0], str) for g in given
            )
        ):
            raise ValueError(f"the model's config lists its {key} as {given!r}")
        if len(given) > MAX_INPUTS:
            raise ValueError(
                f"the model has {len(given)} {key.split('_')[0]}s; the tool takes "
                f"at most {MAX_INPUTS}"
            )
        found.append([str(g[0]) for g in given])
    return found[0], found[1]


def _functional(inner: Mapping[str, Any], layers: list[dict[str, Any]]) -> Graph:
    """A functional model's layers, each with its sources from its one
    inbound node.  Its first input is ``INPUT``, any other keeps its name;
    one output must be its last layer (several are named in the document's
    ``outputs``: ``output_names``)."""
    inputs, outputs = ends({"class_name": "Functional", "config": inner})
    output = outputs[0] if len(outputs) == 1 else None
    # Each layer name -> the source its output stands for (a Dropout of rate
    # 0 stands for what it takes).
    stands_for: dict[str, str] = {}
    graph: Graph = []
    for entry in layers:
        name = _name(entry)
        if entry.get("class_name") == "InputLayer":
            stands_for[name] = INPUT if name == inputs[0] else name
            continue
        nodes = entry.get("inbound_nodes", [])
        if len(nodes) != 1:
            what = f"called {len(nodes)} times (a shared layer)" if nodes else "unused"
            raise ValueError(f"layer {name!r} is {what}; supported: {_SUPPORTED_TEXT}")
        if entry.get("class_name") == "MultiHeadAttention":
            _check_attention_call(name, nodes[0])
        if entry.get("class_name") == "Attention":
            _check_dot_attention_call(name, nodes[0])
        unknown = [s for s in _sources(nodes[0]) if s not in stands_for]
        if unknown:
            raise ValueError(
                f"layer {name!r} takes {unknown[0]!r}, which is not an earlier "
                "layer of the model's config"
            )
        sources = [stands_for[source] for source in _sources(nodes[0])]
        if _identity(entry) and len(sources) == 1:
            stands_for[name] = sources[0]
            continue
        graph.append((entry, sources))
        stands_for[name] = name
    missing = [n for n in (*inputs, *outputs) if n not in stands_for]
    if missing:
        raise ValueError(
            f"the model's config names {missing[0]!r} among its inputs or outputs, "
            "which is none of its layers"
        )
    if output is not None and (not graph or stands_for[output] != _name(graph[-1][0])):
        raise ValueError(
            f"the model's output is {output!r}, not the last layer of its config; "
            "only a model that ends in its last layer is supported"
        )
    return graph


def _name(entry: Mapping[str, Any]) -> str:
    config = entry.get("config")
    inner = config.get("name") if isinstance(config, dict) else None
    return str(entry.get("name") or inner or "?")


def _identity(entry: Mapping[str, Any]) -> bool:
    """Whether ``entry`` is a Dropout of rate 0 (the identity, left out); a
    Dropout of any other rate is a layer (``_entry`` checks it)."""
    if entry.get("class_name") != "Dropout" or entry.get("module") not in (
        "keras.layers",
        None,
    ):
        return False
    config = entry.get("config")
    rate = config.get("rate") if isinstance(config, dict) else None
    return isinstance(rate, int | float) and not isinstance(rate, bool) and rate == 0


def _check_attention_call(name: str, node: Any) -> None:
    """A MultiHeadAttention call passes only its tensors (no mask, no causal
    mask, no scores returned)."""
    args = node.get("args", []) if isinstance(node, dict) else []
    kwargs = node.get("kwargs", {}) if isinstance(node, dict) else {}
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        return  # _sources finds what there is; the count is checked after
    extra = [
        key
        for key, value in kwargs.items()
        if key not in CALL_TENSORS and value not in (None, False)
    ]
    if len(args) > len(CALL_TENSORS) or extra:
        given = ", ".join(extra) or "a mask"
        raise ValueError(
            f"MultiHeadAttention layer {name!r} is called with {given}; supported: "
            "self-attention called on one sequence (no mask, no causal mask, no "
            "scores returned)"
        )


def _check_dot_attention_call(name: str, node: Any) -> None:
    """An Attention call passes only its list of tensors (no mask, no causal
    mask, no scores returned)."""
    kwargs = node.get("kwargs", {}) if isinstance(node, dict) else {}
    extra = [
        key
        for key, value in (kwargs.items() if isinstance(kwargs, dict) else [])
        if value not in (None, False)
    ]
    if extra:
        raise ValueError(
            f"Attention layer {name!r} is called with {', '.join(extra)}; supported: "
            "called on [query, value] or [query, value, key] alone (no mask, no "
            "causal mask, no scores returned)"
        )


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


def _entry(layer: Mapping[str, Any]) -> dict[str, Any]:
    """One layer's document entry, its options checked by its kind's module
    (``zoo.kinds``; not its inputs)."""
    cls = layer.get("class_name")
    config = layer.get("config", {})
    if not isinstance(config, dict):
        config = {}
    name = _name(layer)
    module = layer.get("module")
    if cls == "Model":
        raise ValueError(f"layer {name!r} is a subclassed model: {_CUSTOM}")
    if isinstance(module, str) and module.startswith("keras.src.ops"):
        entry = _operation(layer, str(cls), name, config)
        check_entry(entry)
        return entry
    kind = BY_KERAS_CLASS.get(str(cls))
    renamed = layer.get("registered_name") not in (None, cls)
    if module not in ("keras.layers", None) or (
        module is None and (kind is None or renamed)
    ):
        where = f" from {module!r}" if module else ""
        raise ValueError(f"layer {name!r} is {cls!r}{where}: {_CUSTOM}")
    if kind is None:
        raise ValueError(
            f"layer {name!r} ({cls}) is not one the tool knows; supported: "
            f"{_SUPPORTED_TEXT}"
        )
    _check_dtype(f"{cls} layer {name!r}", config)
    build = layer.get("build_config")
    built = build.get("input_shape") if isinstance(build, dict) else None
    entry = kind.read(str(cls), name, config, built)
    if config.get("trainable") is False:  # frozen: Keras trains none of it
        entry["trainable"] = False
    check_entry(entry)  # its options' values too, each layer's named at once
    return entry


def _operation(
    layer: Mapping[str, Any], cls: str, name: str, config: Mapping[str, Any]
) -> dict[str, Any]:
    """A Keras operation in a functional graph (``x * 0.5``,
    ``keras.ops.concatenate``: ``keras.src.ops.numpy``) as the layer that
    computes the same values, each exactly: between two tensors ``+ - *``,
    ``maximum`` and ``minimum`` are their merges; a tensor and a number
    ``+ - *`` a ``rescaling`` (``h * scale + offset``: ``x * c`` is ``h * c
    + 0``, ``c - x`` is ``h * -1 + c``); ``concatenate`` along the last axis
    a ``concatenate``; ``mean`` over every axis but the batch's and the
    last, a ``global_avg_pool``, and over a sequence's last one, the same
    pooled ``channels_first``; ``expand_dims`` a ``reshape``.  Anything
    else is refused in one sentence."""
    nodes = layer.get("inbound_nodes")
    node = nodes[0] if isinstance(nodes, list) and nodes else {}
    args = node.get("args", []) if isinstance(node, dict) else []
    args = args if isinstance(args, list) else []
    tensors = _sources(args)
    numbers = [
        a for a in args if isinstance(a, int | float) and not isinstance(a, bool)
    ]
    shape = _tensor_shape(args)
    if layer.get("module") == OPERATIONS_MODULE:
        if cls in _OPERATIONS and len(tensors) >= 2 and not numbers:
            return {"kind": _OPERATIONS[cls], "name": name}
        if (
            cls in _SCALAR
            and len(tensors) == 1
            and len(numbers) == 1
            and len(args) == 2
        ):
            tensor_first = not isinstance(args[0], int | float)
            scale, offset = _SCALAR[cls](float(numbers[0]), tensor_first)
            return {"kind": "rescaling", "name": name, "scale": scale, "offset": offset}
        rank = len(shape) if shape is not None else None
        if cls == "Concatenate" and config.get("axis", -1) in (-1, (rank or 0) - 1):
            return {"kind": "concatenate", "name": name}
        if cls == "Mean" and rank in (3, 4) and not config.get("keepdims", False):
            axis = config.get("axis")
            axes = {axis} if isinstance(axis, int) else set(axis or ())
            if axes == set(range(1, rank - 1)):
                return {"kind": "global_avg_pool", "name": name}
            if rank == 3 and axes in ({2}, {-1}):  # each step's features
                return {
                    "kind": "global_avg_pool",
                    "name": name,
                    "data_format": "channels_first",
                }
        if (
            cls == "ExpandDims"
            and shape is not None
            and isinstance(config.get("axis"), int)
        ):
            axis = (
                config["axis"]
                if config["axis"] >= 0
                else len(shape) + 1 + config["axis"]
            )
            if 1 <= axis <= len(shape):
                sides = list(shape[1:])
                return {
                    "kind": "reshape",
                    "name": name,
                    "target_shape": [*sides[: axis - 1], 1, *sides[axis - 1 :]],
                }
    raise ValueError(
        f"layer {name!r} is Keras' operation {cls} on a tensor, which the tool "
        "does not read so; it reads x + y, x - y, x * y, maximum and minimum "
        "between two tensors, a tensor and a number added, subtracted or "
        "multiplied, concatenate along the last axis, mean over every axis but "
        "the batch's and the last, and expand_dims; use Keras' layer for "
        "anything else (keras.layers.Reshape, say)"
    )


# A tensor and a number: ``op -> (c, tensor first) -> (scale, offset)`` of the
# ``rescaling`` that gives the same values exactly.
_SCALAR: dict[str, Callable[[float, bool], tuple[float, float]]] = {
    "Multiply": lambda c, first: (c, 0.0),
    "Add": lambda c, first: (1.0, c),
    "Subtract": lambda c, first: (1.0, -c) if first else (-1.0, c),
}


def _tensor_shape(args: list[Any]) -> list[Any] | None:
    """The shape (with the batch) Keras saved with an operation's first
    tensor argument, if it did."""
    for arg in args:
        if isinstance(arg, list):
            found = _tensor_shape(arg)
            if found is not None:
                return found
        if isinstance(arg, dict) and arg.get("class_name") == "__keras_tensor__":
            shape = arg.get("config", {}).get("shape")
            return list(shape) if isinstance(shape, list) else None
    return None


def _policy(dtype: Any) -> Any:
    """The name of a layer's dtype policy (Keras writes a DTypePolicy as a
    table with its name in its config, or a plain name)."""
    if isinstance(dtype, dict):
        inner = dtype.get("config")
        if dtype.get("class_name") in ("DTypePolicy", "FloatDTypePolicy") and (
            isinstance(inner, dict)
        ):
            return inner.get("name")
        return dtype.get("class_name") or dtype
    return dtype


def _check_dtype(where: str, config: Any) -> None:
    """Refuse a layer (or model) that computes in another dtype than
    float32 (a mixed, half or quantized policy)."""
    if not isinstance(config, dict) or config.get("dtype") is None:
        return
    policy = _policy(config["dtype"])
    if policy != FLOAT32:
        raise ValueError(
            f"{where} has dtype policy {policy!r}; the tool computes float32 "
            "only (save the model without a mixed or half-precision policy)"
        )


def _input_shape(
    config: Mapping[str, Any], seq_len: int = 0, name: str | None = None
) -> list[Any]:
    """The input's shape without the batch (``name``: the input layer's of a
    model with several).  A sequence of free length (``shape=(None,)``
    token ids, ``(None, F)`` steps) takes ``seq_len`` steps, or
    ``FREE_LENGTH``; any other free axis is refused."""
    inner = config.get("config", {})
    for layer in inner.get("layers", []) if isinstance(inner, dict) else []:
        if name is not None and _name(layer) != name:
            continue
        config = layer.get("config", {})
        shape = config.get("batch_shape") or config.get("batch_input_shape")
        if shape is None and layer.get("build_config"):
            shape = layer["build_config"].get("input_shape")
        if shape is None:
            continue
        if not isinstance(shape, list) or not 2 <= len(shape) <= 4:
            break
        given = list(shape[1:])
        if given[0] is None and len(given) <= 2:
            given[0] = seq_len or FREE_LENGTH
        elif seq_len:
            raise ValueError(
                f"--seq-len {seq_len} was given, but the model's input {shape} "
                "has no free sequence length"
            )
        if any(isinstance(d, bool) or not isinstance(d, int) for d in given):
            raise ValueError(
                f"the model's input shape {shape} is not fixed; give every axis "
                "but the batch a size (a sequence's length may be None)"
            )
        return given
    raise ValueError("the file does not say the model's input shape; build it first")


def _workload(
    config: Mapping[str, Any], probabilities: bool = False, outputs: Any = ()
) -> tuple[dict[str, Any], list[str]]:
    """The workload the file was compiled with: its loss
    (``zoo.losses.from_keras``), its optimizer with every option
    (``_optimizer``), the defaults for what the file does not say; and what
    of them the tool does not compute, as phrases.  An uncompiled model that
    ends in a softmax (``probabilities``) trains on the cross-entropy of its
    probabilities, not of logits (a softmax taken as logits is a softmax
    applied twice, which Keras on TensorFlow alone silently undoes)."""
    compiled = config.get("compile_config") or {}
    if not isinstance(compiled, dict):
        compiled = {}
    settings, problems = _optimizer(compiled)
    workload = {**DEFAULT_WORKLOAD, **settings}
    loss = compiled.get("loss")
    if len(outputs) > 1 and isinstance(loss, list | dict):
        # A loss per output (a list in their order, or a dict by name) and
        # their weights, as compile took them.
        try:
            goals = [from_keras(g) for g in _per_output(loss, outputs, "loss")]
            weights = compiled.get("loss_weights")
            if weights is not None:
                workload["loss_weights"] = _per_output(weights, outputs, "loss_weights")
        except ValueError as exc:
            problems.append(str(exc))
        else:
            workload.update(
                loss=[g.loss for g in goals], from_logits=[g.from_logits for g in goals]
            )
            try:
                workload.update(loss_options(goals))
            except ValueError as exc:
                problems.append(str(exc))
    elif loss is not None:
        try:
            goal = from_keras(loss)
        except ValueError as exc:
            problems.append(str(exc))
        else:
            workload.update(loss=goal.loss, from_logits=goal.from_logits)
            workload.update(loss_options([goal]))
        weights = compiled.get("loss_weights")
        if len(outputs) > 1 and weights is not None:
            try:
                workload["loss_weights"] = list(
                    _per_output(weights, outputs, "loss_weights")
                )
            except ValueError as exc:
                problems.append(str(exc))
    elif probabilities:
        workload.update(from_logits=False)
    return workload, problems


def _per_output(given: Any, outputs: Any, what: str) -> list[Any]:
    """A compile argument given per output (a list in the outputs' order,
    or a dict by output name) as a list in that order; a ValueError when it
    does not give one per output."""
    if isinstance(given, dict):
        if set(given) != set(outputs):
            raise ValueError(
                f"the model was compiled with {what} for {sorted(given)}; the tool "
                f"takes one for each of its outputs, {list(outputs)}"
            )
        return [given[name] for name in outputs]
    if not isinstance(given, list) or len(given) != len(outputs):
        raise ValueError(
            f"the model was compiled with {what} {given!r}; the tool takes one for "
            f"each of its {len(outputs)} outputs"
        )
    return given


# The options of Keras' base optimizer the tool does not compute, each with
# the value that means it is off (what the file must say, or leave out).
_OPTIMIZER_OFF: dict[str, Any] = {
    "use_ema": False,
    "loss_scale_factor": None,
    "gradient_accumulation_steps": None,
}
# The options of Keras' base optimizer that change nothing the tool computes
# while the ones above are off (the moving average's, the optimizer's name).
_OPTIMIZER_IDLE = ("name", "ema_momentum", "ema_overwrite_frequency")
_BY_KERAS_CLASS = {o.keras_class: o for o in OPTIMIZERS.values()}


def _optimizer(compiled: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The workload's optimizer, learning rate and every option of the
    optimizer the file was compiled with (Keras' defaults for what it leaves
    out: none when it was not compiled), and what of it the tool does not
    compute, each as a short phrase (empty when it takes it all)."""
    optimizer = compiled.get("optimizer")
    if optimizer is None:
        return {}, []
    if isinstance(optimizer, str):  # a name, as compile() takes it: defaults
        named = {o.name: o.keras_class for o in OPTIMIZERS.values()}
        optimizer = {"class_name": named.get(optimizer.lower(), optimizer)}
    if not isinstance(optimizer, dict):
        optimizer = {"class_name": optimizer}
    cls, module = optimizer.get("class_name"), optimizer.get("module")
    known = _BY_KERAS_CLASS.get(str(cls))
    # Keras' own class: saved as keras.optimizers', or on PyTorch as its
    # backend's subclass (keras.src.backend.torch.optimizers.torch_adam)
    own = module in ("keras.optimizers", None) or str(module).startswith("keras.src.")
    if optimizer.get("registered_name") not in (None, cls):
        own = False
    if known is None or not own:
        where = f" from {module!r}" if module not in ("keras.optimizers", None) else ""
        return {}, [
            f"optimizer {cls!r}{where} (the tool computes Keras' "
            f"{', '.join(_BY_KERAS_CLASS)})"
        ]
    options = optimizer.get("config")
    options = options if isinstance(options, dict) else {}
    settings, problem = _rate(options.get("learning_rate", 0.001))
    settings["optimizer"] = known.name
    problems = [problem] if problem else []
    for option in known.takes:  # its own, the weight decay and the clips
        if options.get(option) is not None:
            settings[option] = options[option]
    for option, off in _OPTIMIZER_OFF.items():
        if options.get(option, off) not in (off, None):
            problems.append(f"{option}={options[option]!r}")
    read = {"learning_rate", *known.takes, *_OPTIMIZER_OFF, *_OPTIMIZER_IDLE}
    problems += [
        f"{option}={options[option]!r}" for option in options if option not in read
    ]
    if problems:
        return {}, [f"optimizer {cls} with {', '.join(problems)}, not computed"]
    return settings, []


def _rate(rate: Any) -> tuple[dict[str, Any], str]:
    """The workload's ``learning_rate`` (and ``schedule``) of a saved
    optimizer's rate, or what of it the tool does not compute."""
    if isinstance(rate, dict):
        return _schedule(rate)
    if isinstance(rate, int | float) and not isinstance(rate, bool):
        # Keras keeps the rate as a float32: 0.001 comes back 0.0010000000474974513
        return {"learning_rate": float(f"{rate:.8g}")}, ""
    return {}, f"learning_rate {rate!r}"


_BY_SCHEDULE_CLASS = {keras_class: kind for kind, (keras_class, _) in SCHEDULES.items()}


def _schedule(rate: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The workload's ``learning_rate`` and ``schedule`` of a saved Keras
    schedule, or what of it the tool does not compute (a phrase)."""
    cls, config = rate.get("class_name"), rate.get("config")
    kind = _BY_SCHEDULE_CLASS.get(str(cls))
    module = rate.get("module")
    own = module in ("keras.optimizers.schedules", None) or str(module).startswith(
        "keras.src."
    )
    if kind is None or not own:
        known = ", ".join(_BY_SCHEDULE_CLASS)
        return {}, f"the learning-rate schedule {cls!r} (the tool computes {known})"
    config = dict(config) if isinstance(config, dict) else {}
    config.pop("name", None)
    if kind == "piecewise_constant_decay":
        values = config.get("values")
        first = values[0] if isinstance(values, list) and values else None
    else:
        first = config.pop("initial_learning_rate", None)
    if kind == "cosine_decay" and config.get("warmup_target") is None:
        config.pop("warmup_target", None)  # no warm-up: its steps are idle
        config.pop("warmup_steps", None)
    if not isinstance(first, int | float) or isinstance(first, bool):
        return {}, f"the learning-rate schedule {cls} without a readable rate"
    return {"learning_rate": float(first), "schedule": {"kind": kind, **config}}, ""


def document_from_config(config: Mapping[str, Any], seq_len: int = 0) -> dict[str, Any]:
    """The model document of a Keras archive's config (no Keras needed); a
    ValueError naming every reason the tool cannot take the model as the
    file has it, all at once (``_Refusal``): its layers, the input, the
    loss, the optimizer, and, when every layer reads, what the spec checks
    (shapes, the output head).  A free sequence length is read as
    ``seq_len`` (``_input_shape``)."""
    graph = _layers(config)
    refusal = _Refusal()
    try:
        _check_dtype("the model", config.get("config"))
    except ValueError as exc:
        refusal.add(str(exc))
    entries: list[dict[str, Any]] = []
    masks = _padding_masks(graph)
    for layer, given in graph:
        if _name(layer) in masks:
            continue  # the padding mask of an Embedding, refused at the Embedding
        sources = [source for source in given if source not in masks]
        try:
            entry = _entry(layer)
            entry.update(_inputs(layer, entry, sources, entries))
        except ValueError as exc:
            refusal.add_layer(_name(layer), str(exc))
            continue
        entries.append(entry)
    inputs, outputs = ends(config)
    input_words, shape = _document_inputs(config, seq_len, inputs, refusal)
    probabilities = bool(entries) and entries[-1].get("activation") == "softmax"
    workload, problems = _workload(config, probabilities, outputs)
    for problem in problems:
        refusal.add(problem)
    document: dict[str, Any] = {
        "layers": entries,
        "workload": workload,
        **input_words,
    }
    if len(outputs) > 1:
        document["outputs"] = outputs
    if (
        refusal.layers
        and entries
        and graph
        and _name(graph[-1][0]) == entries[-1]["name"]
    ):
        # The spec cannot be built around a refused layer, but the head can
        # be checked from the shape Keras built the last layer for.
        head = _head_problem(graph[-1][0], entries[-1], workload, bool(problems))
        if head:
            refusal.add(head)
    if not refusal.layers and shape:
        # What the spec checks (shapes, the head, options' ranges), with the
        # file's workload, or one any output row trains on when the loss or
        # optimizer is refused already.
        checked = document if not problems else {**document, "workload": _ANY_HEAD}
        try:
            spec_from_document("user model", checked)
        except ValueError as exc:
            refusal.add(str(exc))
    refusal.raise_if_any()
    return document


def _document_inputs(
    config: Mapping[str, Any], seq_len: int, inputs: list[str], refusal: _Refusal
) -> tuple[dict[str, Any], list[Any]]:
    """The document's ``input_shape`` (one input) or ``inputs`` (several:
    the first named ``INPUT``, as the layers take it), and the first
    input's shape (empty when one is refused: ``refusal`` says why)."""
    shapes = []
    names: list[str | None] = [*inputs] or [None]
    for name in names:
        try:
            shapes.append(
                _input_shape(config, seq_len, name if len(inputs) > 1 else None)
            )
        except ValueError as exc:
            refusal.add(str(exc))
            shapes.append([])
    shape = shapes[0] if all(shapes) else []
    if len(inputs) <= 1:
        return {"input_shape": shape}, shape
    return {
        "inputs": [
            {"name": INPUT if i == 0 else name, "shape": given}
            for i, (name, given) in enumerate(zip(inputs, shapes, strict=True))
        ]
    }, shape


def _head_problem(
    layer: Mapping[str, Any],
    entry: Mapping[str, Any],
    workload: Mapping[str, Any],
    unread: bool,
) -> str:
    """What is wrong with the model's head, judged from its last layer alone
    (``layer``, read as ``entry``) at the input shape Keras built it for:
    an output that is not one row, or one the file's loss cannot train on
    (``unread``: the loss or optimizer was refused, so not that); empty
    when nothing is, or the shape is not saved."""
    build = layer.get("build_config")
    built = build.get("input_shape") if isinstance(build, dict) else None
    if not isinstance(built, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in built[1:]
    ):
        return ""
    try:
        last = layer_of(entry)
        final = KINDS[last.kind].shape(last, (tuple(built[1:]),))
    except (ValueError, KeyError, IndexError, TypeError):
        return ""
    if len(final) not in OUTPUT_RANKS:
        return not_one_row("the model", final)
    if unread:
        return ""
    try:
        options = {k: workload[k] for k in LOSS_OPTIONS if k in workload}
        objective = Objective(workload["loss"], workload["from_logits"], **options)
        check_loss(objective, final[-1])
        check_outputs(objective, last.activation)
    except ValueError as exc:
        return str(exc)
    return ""


def _padding_masks(graph: Graph) -> set[str]:
    """The operations Keras saves to compute an ``Embedding(mask_zero=True)``'s
    padding mask (a ``NotEqual`` of the token ids), which the layers after it
    take as a second tensor: not layers the user wrote, so only the
    Embedding's ``mask_zero`` is named when the file is refused."""
    masked = any(
        layer.get("class_name") == "Embedding"
        and isinstance(layer.get("config"), dict)
        and layer["config"].get("mask_zero") is True
        for layer, _ in graph
    )
    return {
        _name(layer)
        for layer, _ in graph
        if masked
        and layer.get("class_name") == "NotEqual"
        and str(layer.get("module", "")).startswith("keras.src.ops")
    }


# A workload whose loss takes any row of outputs: the spec's checks of the
# shapes and the head, run when the file's own loss or optimizer is refused.
_ANY_HEAD = {**DEFAULT_WORKLOAD, "loss": "mean_squared_error", "from_logits": False}
# How many layers a refusal names for one reason before it counts the rest.
NAMED_LAYERS = 3


class _Refusal:
    """Every reason a file is refused, for one sentence: each problem of the
    model as a whole, and each layer's, layers with the same reason grouped
    into one phrase (a frozen base of 52 layers is one phrase, not 52)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        # reason -> the layers it stops, each with its own sentence
        self.layers: dict[str, list[tuple[str, str]]] = {}

    def add(self, problem: str) -> None:
        if problem not in self.problems:
            self.problems.append(problem)

    def add_layer(self, name: str, problem: str) -> None:
        # The reason without the layer's name, so that layers refused for the
        # same reason share it ("Conv1D layer 'c' uses ..." -> "Conv1D layer
        # uses ...").
        reason = problem.replace(f" {name!r}", "", 1)
        self.layers.setdefault(reason, []).append((name, problem))

    def raise_if_any(self) -> None:
        phrases: list[str] = []
        for reason, stopped in self.layers.items():
            if len(stopped) == 1:
                phrases.append(stopped[0][1])
                continue
            names = [name for name, _ in stopped]
            shown = ", ".join(repr(n) for n in names[:NAMED_LAYERS])
            more = len(names) - NAMED_LAYERS
            listed = f"{shown} and {more} more" if more > 0 else shown
            phrases.append(f"{len(names)} layers ({listed}): {reason}")
        phrases += self.problems
        if len(phrases) == 1:
            raise ValueError(phrases[0])
        if phrases:
            raise ValueError(
                f"{len(phrases)} things stop the tool: "
                + "; ".join(f"({i}) {p}" for i, p in enumerate(phrases, start=1))
            )


def _inputs(
    layer: Mapping[str, Any],
    entry: Mapping[str, Any],
    sources: list[str],
    entries: list[dict[str, Any]],
) -> dict[str, Any]:
    """The entry's ``inputs``, when it takes other than the previous
    layer's output; a ValueError when it takes more or fewer than its kind."""
    name, takes = entry["name"], KINDS[entry["kind"]].takes
    if layer.get("class_name") == "MultiHeadAttention" and len(set(sources)) > 1:
        raise ValueError(
            f"MultiHeadAttention layer {name!r} takes its query, value and key "
            f"from different layers ({', '.join(sources)}); the tool computes "
            "self-attention, one sequence as all three"
        )
    taken = sources if takes != 1 else sorted(set(sources))
    fits = (
        len(taken) == takes
        if takes > 1
        else len(taken) > 1
        if takes == 0
        else len(taken) == 1
    )
    if not fits:
        raise ValueError(
            f"layer {name!r} takes {len(taken)} tensor(s); a merge (Add, Concatenate, "
            "...) takes two or more, every other layer takes one (no mask, no "
            "initial state)"
        )
    previous = entries[-1]["name"] if entries else INPUT
    if takes != 1 or taken != [previous]:
        return {"inputs": list(taken)}
    return {}


def load(
    path: Path, seq_len: int = 0
) -> tuple[dict[str, Any], dict[str, np.ndarray], Any, Any]:
    """The document and canonical weights of the Keras file ``path``, the
    model as Keras loaded it (inside a Keras worker; the worker judges the
    reading against that model: ``workers.reader_check``) and the loss its
    compile config names, with its weights (``compiled_loss``).

    The file is opened once, through ``zoo.files``: its config is read and
    judged, and Keras loads a private copy holding that config and the
    weights inflated within ``weights_limit`` (``_copy``), never the file
    itself, which could say one size and inflate to another."""
    import keras

    from zoo.keras_models import variable

    with _archive(path) as archive, tempfile.TemporaryDirectory() as scratch:
        config, text = _config_of(archive, path)
        document = document_from_config(config, seq_len)
        spec = spec_from_document("user model", document)  # refused before loading
        limit = _weights_fit(archive, path, spec)  # no variable Keras builds is huge
        copy = _copy(archive, path, text, limit, Path(scratch) / "model.keras")
        try:
            model = keras.saving.load_model(copy, compile=False, safe_mode=True)
        except Exception as exc:
            reason = keras_reason(exc).replace(str(copy), str(path))
            raise ValueError(f"Keras cannot load {path}: {reason}") from None
    # Each parameter by layer and variable path, else name, as
    # zoo.keras_models assigns it: a layer of several sublayers (attention's
    # query, key, value and output) names its variables by path only.
    weights: dict[str, np.ndarray] = {}
    for p in spec.params:
        try:
            found = variable(model, p)
        except (KeyError, ValueError):
            raise ValueError(
                f"{path}: layer {p.layer!r} as Keras loads it holds no variable "
                f"{p.role!r} (at {p.layer}/{p.role} or by that name), which its "
                "config says it has"
            ) from None
        value = np.asarray(keras.ops.convert_to_numpy(found), np.float32)
        if value.shape != p.shape:
            raise ValueError(
                f"{path}: {p.name} as Keras loads it has shape {value.shape}, "
                f"where the config says {p.shape}"
            )
        if not np.isfinite(value).all():
            raise ValueError(
                f"{path}: parameter {p.name} holds NaN or infinite values; a "
                "model's weights must be finite"
            )
        weights[p.name] = value
    return document, weights, model, compiled_loss(config)


def compiled_loss(config: dict[str, Any]) -> Any:
    """The ``loss`` and ``loss_weights`` of a file's compile config as
    saved (``None`` when it was not compiled with a loss), for Keras itself
    to deserialize and weigh."""
    compiled = config.get("compile_config") or {}
    if not isinstance(compiled, dict) or compiled.get("loss") is None:
        return None
    return {"loss": compiled["loss"], "loss_weights": compiled.get("loss_weights")}
