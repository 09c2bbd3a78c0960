"""Users' models: a description read from a ``.keras`` file or a blueprint's
``[model]`` table, kept in a store where every process finds it by name.

A user's model is described by a *document*, a plain JSON object in Keras'
words, the same whether it came from a Keras file (``zoo.keras_import``, in
a Keras worker) or from a table a user wrote::

    {"input_shape": [28, 28, 1],
     "layers": [{"kind": "conv2d", "name": "conv", "filters": 8,
                 "kernel_size": 3, "strides": 2, "padding": "same",
                 "activation": "tanh"},
                {"kind": "flatten"},
                {"kind": "dense", "units": 10}],
     "workload": {"optimizer": "adam", "learning_rate": 0.001,
                  "batch_size": 32}}

``spec_from_document`` checks it and makes the ``zoo.specs.ModelSpec``; a
layer's name defaults to ``<kind>_<position>``, the classes are the last
layer's outputs, the workload defaults to ``DEFAULT_WORKLOAD``: its ``loss``
(``zoo.losses``) is sparse categorical cross-entropy from logits unless the
file was compiled with another or the table names one (a named
cross-entropy takes probabilities unless ``from_logits = true``, as Keras'
losses do).

Each kind takes Keras' words for its options (its options record's fields,
``zoo.kinds``; ``python -m harness kinds`` lists them): an ``embedding``
``input_dim`` and ``output_dim``, an
``attention`` ``num_heads`` and ``key_dim``, a ``layer_norm`` ``epsilon``, a
``batch_norm`` (over the last axis) ``epsilon`` and ``momentum`` (each above
0 and below 1; Keras' defaults, 0.001 and 0.99, when left out), a
``dropout`` ``rate`` (at least 0, below 1; 0 when left out), a ``gru``
``units`` and ``return_sequences``, 1-D convolutions and pools like 2-D
ones.  A layer takes the previous layer's output unless its ``inputs``
lists the names of the earlier layers it takes: one for any kind (a branch
of a functional model), two or more for an ``add``, which always names them::

    {"input_shape": [16],
     "layers": [{"kind": "embedding", "name": "embed", "input_dim": 100,
                 "output_dim": 8},
                {"kind": "attention", "name": "att", "num_heads": 2,
                 "key_dim": 4},
                {"kind": "add", "name": "res", "inputs": ["embed", "att"]},
                {"kind": "layer_norm"},
                {"kind": "global_avg_pool"},
                {"kind": "dense", "units": 2}]}

``register`` names a model by its file's stem and a digest of its document
and its weights, ``<stem>-<12 hex digits>``, so two different files with one
name never pool and a changed file is a new model, never judged by an old
verdict.  It writes ``<store>/<name>/model.json`` (and ``weights.npz`` for a
file's own weights) once; ``find`` reads them back in any process:
``zoo.models.get_spec`` asks it for every name that is not a built-in model.
The store is ``$ZOO_MODEL_STORE`` (the orchestrator sets it, absolute, for
the workers it starts), else ``results/models`` under the current folder.

Standard library and NumPy only: the MXNet worker reads the store too.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
import typing
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from zoo import files
from zoo.arrays import digest, load_npz, save_npz
from zoo.kinds import KINDS as KIND_RECORDS
from zoo.kinds.base import CAUSAL, required, shown_options
from zoo.losses import DEFAULT as DEFAULT_OBJECTIVE
from zoo.losses import LOSSES, Objective, loss_options
from zoo.losses import OPTIONS as LOSS_OPTIONS
from zoo.optimizers import CLIPS, SCHEDULES, Schedule, check_option
from zoo.optimizers import DEFAULTS as OPTIMIZER_DEFAULTS
from zoo.optimizers import OPTIMIZERS as OPTIMIZER_RECORDS
from zoo.optimizers import defaults as optimizer_defaults
from zoo.specs import (
    IN_RANGE,
    INPUT,
    LAYER_KINDS,
    OPTIMIZERS,
    OUTPUT_RANKS,
    PADDINGS,
    Layer,
    ModelInput,
    ModelSpec,
    Workload,
    layer_outputs,
)

# The words of a model's document, and the most inputs or outputs it takes.
DOCUMENT_WORDS = ("input_shape", "inputs", "outputs", "classes", "layers", "workload")
MAX_INPUTS = 16
STORE_ENV = "ZOO_MODEL_STORE"
DEFAULT_STORE = Path("results") / "models"
# Keras' own defaults for what a file does not say: Adam at 0.001 and
# ``fit``'s batch of 32.
DEFAULT_WORKLOAD = {
    "optimizer": "adam",
    "learning_rate": 0.001,
    "batch_size": 32,
    "loss": DEFAULT_OBJECTIVE.loss,
    "from_logits": DEFAULT_OBJECTIVE.from_logits,
}


def words_of(kind: str) -> tuple[str, ...]:
    """The document's words for a ``kind`` layer's options: its options
    record's fields (Keras' argument names), ``regularize`` where Keras
    gives the kind weight regularizers."""
    record = KIND_RECORDS[kind]
    words = tuple(f.name for f in dataclasses.fields(record.options))
    return (*words, "regularize") if record.regularized else words


# Keras' other names for an activation.
_ACTIVATION_ALIASES = {"linear": None, "swish": "silu"}


_NAME = re.compile(r"[A-Za-z0-9_.]+")
_STEM_CHARS = 64
# The largest stored document read back (a model of thousands of layers is
# a few MB).
MAX_DOCUMENT_BYTES = 64 << 20
_STORED = re.compile(
    r"(?P<stem>[A-Za-z0-9_][A-Za-z0-9_.]{0,63})-(?P<digest>[0-9a-f]{12})"
)
# A name that becomes one folder or file name (a model, a stem, a release):
# no separator, no leading dot (so neither ``.`` nor ``..``), bounded.
PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}")
# How deep a document may nest (a model, its layers, a layer, its inputs).
MAX_DEPTH = 10


def plain_name(value: object, what: str) -> str:
    """``value`` when it is a plain name (``PLAIN_NAME``) that may become a
    path; else a ValueError in one sentence naming ``what`` it is."""
    if not isinstance(value, str) or not PLAIN_NAME.fullmatch(value):
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"{what} {shown} is not a plain name: letters, digits, _, . and -, "
            "not starting with a dot, no /, at most 128 characters"
        )
    return value


def store() -> Path:
    """The folder users' models are kept in (see the module docstring)."""
    return Path(os.environ.get(STORE_ENV) or DEFAULT_STORE)


def use_store(folder: Path) -> Path:
    """Make ``folder`` (absolute) the store of this process and of every
    worker it starts; the folder."""
    folder = folder.absolute()
    os.environ[STORE_ENV] = str(folder)
    return folder


def stem_of(file_name: str) -> str:
    """A file's stem as a model name's first part: letters, digits, ``_``
    and ``.``, anything else made ``_``."""
    stem = Path(file_name).name.removesuffix(".keras").removesuffix(".toml")
    stem = re.sub(r"[^A-Za-z0-9_.]", "_", stem).lstrip(".")[:_STEM_CHARS]
    return stem or "model"


# --- documents -----------------------------------------------------------------


def _field(where: str, mapping: Mapping[str, Any], key: str, kind: type) -> Any:
    value = mapping.get(key)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{where}: {key} must be a whole number, not {value!r}")
    if kind is float and (
        isinstance(value, bool) or not isinstance(value, int | float)
    ):
        raise ValueError(f"{where}: {key} must be a number, not {value!r}")
    if kind is str and not isinstance(value, str):
        raise ValueError(f"{where}: {key} must be text, not {value!r}")
    return value


def _layer(entry: Any, position: int, previous: str | None) -> Layer:
    where = f"layer {position + 1}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be a table of its kind and options")
    kind = entry.get("kind")
    if kind not in LAYER_KINDS:
        raise ValueError(
            f"{where} has kind {kind!r}; supported: {', '.join(LAYER_KINDS)}"
        )
    name = entry.get("name", f"{kind}_{position + 1}")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"{where}: name {name!r} must be letters, digits, _ or .")
    where = f"{kind} layer {name!r}"
    words = {"kind", "name", "inputs", "trainable", *words_of(kind)}
    unknown = sorted(set(entry) - words)
    if unknown:
        raise ValueError(
            f"{where} has {', '.join(unknown)}, which it does not take; it takes: "
            f"{', '.join(sorted(words - {'kind', 'name'})) or 'nothing'}"
        )
    trainable = entry.get("trainable", True)
    if not isinstance(trainable, bool):
        raise ValueError(f"{where}: trainable must be true or false")
    record = KIND_RECORDS[kind].options
    types = typing.get_type_hints(record)
    options = {
        option: _read_option(where, option, types[option], entry[option])
        for option in types
        if option in entry
    }
    lacking = [o for o in required(record) if o not in options]
    if lacking:
        raise ValueError(f"{where} needs {', '.join(lacking)}")
    regularize = _penalties(where, entry["regularize"]) if "regularize" in entry else ()
    inputs = _inputs(where, entry)
    if kind != "add" and previous is not None and inputs == (previous,):
        inputs = ()  # the previous layer's, named
    return Layer(name, kind, record(**options), inputs, regularize, trainable)


def check_entry(entry: Mapping[str, Any]) -> None:
    """A ValueError in one sentence unless one layer's document entry (with
    its name) reads as a ``Layer``: its kind, words and options (a reader
    asks this of each layer, so every layer's problem is named at once)."""
    layer_of(entry)


def layer_of(entry: Mapping[str, Any]) -> Layer:
    """The ``Layer`` of one layer's document entry (with its name), checked."""
    return _layer(entry, 0, None)


def _inputs(where: str, entry: Mapping[str, Any]) -> tuple[str, ...]:
    """A document entry's ``inputs``: the earlier layers it takes."""
    if "inputs" not in entry:
        return ()
    inputs = entry["inputs"]
    if not isinstance(inputs, list | tuple) or not all(
        isinstance(source, str) for source in inputs
    ):
        raise ValueError(
            f"{where}: inputs must be a list of earlier layers' names, not {inputs!r}"
        )
    return tuple(inputs)


def _read_option(where: str, word: str, kind: Any, value: Any) -> Any:  # noqa: PLR0911
    """One option's value, read as its record's field's type (``kind``):
    whole numbers, numbers in their range (``zoo.specs.IN_RANGE``),
    ``valid``/``same``, an activation's name, true or false, a list of whole
    numbers."""
    given = {word: value}
    optional = kind in (int | None, float | None, str | None)
    if optional and value is None:
        return None
    if word == "activation":
        name = _field(where, given, word, str)
        return _ACTIVATION_ALIASES.get(name, name)
    if kind in (int, int | None):
        return _field(where, given, word, int)
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"{where}: {word} must be true or false")
        return value
    if kind in (str, str | None):
        text = _field(where, given, word, str)
        if word == "padding" and text not in (*PADDINGS, CAUSAL):
            raise ValueError(
                f"{where}: padding must be valid, same or causal, not {value!r}"
            )
        return text
    if kind == tuple[int, ...]:
        if not isinstance(value, list | tuple) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise ValueError(f"{where}: {word} must be a list of whole numbers")
        return tuple(value)
    number = float(_field(where, given, word, float))
    within, what = IN_RANGE.get(word, (math.isfinite, "finite"))
    if not math.isfinite(number) or not within(number):
        raise ValueError(f"{where}: {word} must be {what}")
    return number


def _penalties(where: str, value: Any) -> tuple[tuple[str, float, float], ...]:
    """``regularize``: a list of ``[role, l1, l2]`` (a parameter's role such
    as ``kernel``, and its L1 and L2 factors)."""
    shape_ok = isinstance(value, list | tuple) and all(
        isinstance(entry, list | tuple)
        and len(entry) == 3
        and isinstance(entry[0], str)
        and all(
            isinstance(f, int | float) and not isinstance(f, bool) for f in entry[1:]
        )
        for entry in value
    )
    if not shape_ok:
        raise ValueError(
            f"{where}: regularize must be a list of [role, l1, l2], such as "
            '[["kernel", 0.0, 0.01]]'
        )
    return tuple((role, float(l1), float(l2)) for role, l1, l2 in value)


def _workload(document: Mapping[str, Any], outputs: int = 1) -> Workload:
    """The workload a document's table gives for a model of ``outputs``
    outputs."""
    given = document.get("workload", {})
    if not isinstance(given, Mapping):
        raise ValueError(f"workload must be a table of {', '.join(DEFAULT_WORKLOAD)}")
    unknown = sorted(
        set(given)
        - set(DEFAULT_WORKLOAD)
        - set(OPTIMIZER_DEFAULTS)
        - {"schedule", "loss_weights", *LOSS_OPTIONS}
    )
    if unknown:
        raise ValueError(
            f"workload has {', '.join(unknown)}; it takes: "
            f"{', '.join(DEFAULT_WORKLOAD)}, schedule, its loss' options "
            f"({', '.join(LOSS_OPTIONS)}) and its optimizer's options"
        )
    clips = [clip for clip in CLIPS if given.get(clip)]
    if len(clips) > 1:
        raise ValueError(
            f"workload: {' and '.join(clips)} are both set; Keras takes one of "
            f"{', '.join(CLIPS)}"
        )
    schedule = _schedule(given["schedule"]) if "schedule" in given else None
    given = {k: v for k, v in given.items() if k != "schedule"}
    options = {k: v for k, v in given.items() if k in OPTIMIZER_DEFAULTS}
    given = {k: v for k, v in given.items() if k not in OPTIMIZER_DEFAULTS}
    loss_options = _loss_options(given)
    given = {k: v for k, v in given.items() if k not in LOSS_OPTIONS}
    heads = _heads(given, outputs, loss_options)
    given = {k: v for k, v in given.items() if k != "loss_weights"}
    if heads[0]:  # a loss per output: the first stands for the workload's
        given["loss"], given["from_logits"] = heads[0][0][:2]
    w = {**DEFAULT_WORKLOAD, **given}
    if "loss" in given and "from_logits" not in given:
        w["from_logits"] = False  # as Keras' losses default
    if not isinstance(w["loss"], str) or not isinstance(w["from_logits"], bool):
        raise ValueError(
            f"workload: loss must be a name ({', '.join(LOSSES)}) and "
            "from_logits true or false"
        )
    if w["loss"] in LOSSES and not LOSSES[w["loss"]].takes_logits:
        w["from_logits"] = False
    if w["optimizer"] not in OPTIMIZERS:
        raise ValueError(
            f"workload: optimizer {w['optimizer']!r} is not one the native paths "
            f"write out; use one of: {', '.join(OPTIMIZERS)}"
        )
    settings: dict[str, Any] = {
        **optimizer_defaults(w["optimizer"]),
        **{
            option: check_option(w["optimizer"], option, value)
            for option, value in options.items()
        },
    }
    rate = _field("workload", w, "learning_rate", float)
    if schedule is not None and schedule.values:  # piecewise: its first value
        rate = schedule.values[0]
    batch = _field("workload", w, "batch_size", int)
    # a warm-up may start at 0 (keras.io's CosineDecay(0.0, ..., warmup_target))
    warms = schedule is not None and schedule.warmup_target > 0
    if not (0 < rate < 1e3 or (warms and rate == 0)) or not 0 < batch <= 1 << 16:
        raise ValueError(
            f"workload: learning_rate {rate} and batch_size {batch} must be "
            "positive (a batch at most 65,536)"
        )
    return Workload(
        "user",
        w["optimizer"],
        float(rate),
        batch,
        loss=w["loss"],
        from_logits=w["from_logits"],
        # one loss takes every option given (zoo.losses.check refuses one
        # it does not take); a list: each loss its own, the first's here
        **(_taken(w["loss"], loss_options) if heads[0] else loss_options),
        schedule=schedule,
        losses=heads[0],
        loss_weights=heads[1],
        **settings,
    )


def _loss_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """The loss options a workload gives (``LOSS_OPTIONS``), each a number
    (``zoo.losses.check`` judges their ranges and the loss that takes
    them)."""
    options = {k: given[k] for k in LOSS_OPTIONS if k in given}
    for option, value in options.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"workload: {option} must be a number, not {value!r}")
    return {k: float(v) for k, v in options.items()}


def _taken(loss: Any, options: Mapping[str, Any]) -> dict[str, Any]:
    """The options of ``options`` that ``loss`` takes, for a list of losses
    (each takes its own; ``_heads`` refuses an option none of them takes)."""
    facts = LOSSES.get(loss)
    if facts is None:
        return dict(options)  # ``zoo.losses.check`` names the unknown loss
    return {k: v for k, v in options.items() if k in facts.options}


def _heads(
    given: Mapping[str, Any], outputs: int, loss_options: Mapping[str, Any]
) -> tuple[tuple[Objective, ...], tuple[float, ...]]:
    """A workload's loss per output and ``loss_weights`` for a model of
    ``outputs`` outputs, as Keras' ``compile`` takes them: ``loss`` a list
    of names (``from_logits`` true or false for all, or a list), and a list
    of weights; empty where the workload gives one loss for every output
    (or the model has one output) and no weights."""
    loss: Any = given.get("loss")
    logits: Any = given.get("from_logits")
    weights = given.get("loss_weights", [])
    listed = isinstance(loss, list | tuple)
    if (listed or weights) and outputs < 2:
        raise ValueError(
            "workload: a list of losses or loss_weights is for a model of several "
            "outputs; this one has one"
        )
    if not isinstance(weights, list | tuple) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in weights
    ):
        raise ValueError("workload: loss_weights must be a list of numbers")
    objectives: tuple[Objective, ...] = ()
    if listed:
        flags = logits if isinstance(logits, list | tuple) else [logits] * len(loss)
        if len(flags) != len(loss) or not all(
            isinstance(n, str) and (f is None or isinstance(f, bool))
            for n, f in zip(loss, flags, strict=False)
        ):
            raise ValueError(
                "workload: loss is a list of names, and from_logits true or false "
                "or a list of them, one per loss"
            )
        objectives = tuple(
            Objective(
                n,
                bool(f) and n in LOSSES and LOSSES[n].takes_logits,
                **_taken(n, loss_options),
            )
            for n, f in zip(loss, flags, strict=True)
        )
        if loss_options and not any(set(_taken(n, loss_options)) for n in loss):
            raise ValueError(
                f"workload: {', '.join(loss_options)} is for a loss that takes "
                "it; none of these does"
            )
    elif isinstance(logits, list | tuple):
        raise ValueError("workload: from_logits is a list only beside a list of losses")
    return objectives, tuple(float(v) for v in weights)


def _schedule(value: Any) -> Schedule:
    """A workload's ``schedule`` table: its ``kind`` (``SCHEDULES``) and
    Keras' options of that kind, checked as Keras checks them."""
    where = "workload: schedule"
    if not isinstance(value, Mapping) or value.get("kind") not in SCHEDULES:
        raise ValueError(
            f"{where} must be a table whose kind is one of {', '.join(SCHEDULES)}"
        )
    kind = value["kind"]
    takes = SCHEDULES[kind][1]
    unknown = sorted(set(value) - {"kind", *takes})
    if unknown:
        raise ValueError(
            f"{where} {kind} has {', '.join(unknown)}; it takes {', '.join(takes)}"
        )
    if kind == "piecewise_constant_decay":
        bounds, values = value.get("boundaries"), value.get("values")
        if not isinstance(bounds, list | tuple) or not isinstance(values, list | tuple):
            bounds, values = [], []
        whole = all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
        rates = all(
            isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e3
            for v in values
        )
        if not whole or not rates or not bounds or len(values) != len(bounds) + 1:
            raise ValueError(
                f"{where}: boundaries must be whole numbers and values one more "
                "positive rate than there are boundaries"
            )
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"{where}: boundaries must increase")
        return Schedule(
            kind, boundaries=tuple(bounds), values=tuple(float(v) for v in values)
        )
    options: dict[str, Any] = {}
    for option in takes:
        if option not in value:
            continue
        number = value[option]
        if option == "staircase":
            if not isinstance(number, bool):
                raise ValueError(f"{where}: staircase must be true or false")
            options[option] = number
            continue
        kind_of = int if option.endswith("steps") else float
        checked = _field(where, value, option, kind_of)
        ranges = {
            "decay_steps": (0 < checked < 1 << 40, "positive"),
            "warmup_steps": (0 <= checked < 1 << 40, "at least 0"),
            "decay_rate": (0 <= checked < 1e6, "at least 0"),
            "alpha": (0 <= checked <= 1, "between 0 and 1"),
            "warmup_target": (0 <= checked < 1e3, "at least 0 (0: no warm-up)"),
        }
        ok, words = ranges[option]
        if not ok:
            raise ValueError(f"{where}: {option} must be {words}")
        options[option] = kind_of(checked)
    if "decay_steps" not in options:
        raise ValueError(f"{where} {kind} needs decay_steps")
    return Schedule(kind, **options)


def spec_from_document(
    name: str, document: Mapping[str, Any], weights: str = ""
) -> ModelSpec:
    """The spec a document describes; a ValueError in one sentence naming
    what is wrong."""
    _check_depth(document)
    if not isinstance(document, Mapping):
        raise ValueError("a model is a table of input_shape, layers and workload")
    unknown = sorted(set(document) - set(DOCUMENT_WORDS))
    if unknown:
        raise ValueError(
            f"a model has {', '.join(unknown)}; it takes: {', '.join(DOCUMENT_WORDS)}"
        )
    if ("input_shape" in document) == ("inputs" in document):
        raise ValueError(
            "a model gives input_shape (one input) or inputs (a list of tables of "
            "name and shape), one of the two"
        )
    named = _model_inputs(document)
    shape = named[0][1]
    renamed = {named[0][0]: INPUT} if named[0][0] != INPUT else {}
    entries = document.get("layers")
    if not isinstance(entries, list | tuple) or not entries:
        raise ValueError("a model needs a list of layers")
    if len(entries) > 1000:
        raise ValueError(f"a model of {len(entries)} layers is more than 1,000")
    built: list[Layer] = []
    for i, entry in enumerate(entries):
        layer = _layer(entry, i, built[-1].name if built else None)
        if renamed and set(layer.inputs) & set(renamed):
            layer = layer.replace(inputs=tuple(renamed.get(n, n) for n in layer.inputs))
        built.append(layer)
    layers = tuple(built)
    more = tuple(ModelInput(n, s) for n, s in named[1:])
    outputs = _output_names(document)
    if outputs == (layers[-1].name,):  # one output, the last layer's: as plain
        outputs = ()
    classes = _outputs(layers, shape, more, outputs)
    workload = _workload(document, max(len(outputs), 1))
    if not classes:  # the layers do not fit, or end in no row: ModelSpec says why
        ModelSpec(
            name, shape, classes, layers, workload, more_inputs=more, outputs=outputs
        )
    if "classes" in document and document["classes"] != classes:
        raise ValueError(
            f"classes is {document['classes']!r} but the model gives {classes} "
            "outputs per example"
        )
    return ModelSpec(
        name,
        shape,
        classes,
        layers,
        workload,
        weights=weights,
        more_inputs=more,
        outputs=outputs,
    )


def _shape(value: Any, what: str) -> tuple[int, ...]:
    """An input's shape: 1 to 3 positive whole numbers."""
    if (
        not isinstance(value, list | tuple)
        or not 1 <= len(value) <= 3
        or not all(
            isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in value
        )
    ):
        raise ValueError(
            f"{what} must be 1 to 3 positive whole numbers without the batch "
            f"(features, (steps, features) or (height, width, channels)), not {value!r}"
        )
    return tuple(value)


def _model_inputs(document: Mapping[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """Each input's name and shape: ``input_shape``'s one (named ``INPUT``),
    or ``inputs``' tables of ``name`` and ``shape`` in order."""
    if "input_shape" in document:
        return [(INPUT, _shape(document["input_shape"], "input_shape"))]
    given = document["inputs"]
    if not isinstance(given, list | tuple) or not 1 <= len(given) <= MAX_INPUTS:
        raise ValueError(
            f"inputs must be a list of 1 to {MAX_INPUTS} tables of name and shape"
        )
    named = []
    for i, entry in enumerate(given):
        where = f"input {i + 1}"
        if not isinstance(entry, Mapping) or set(entry) != {"name", "shape"}:
            raise ValueError(f"{where} must be a table of name and shape")
        named.append(
            (
                plain_name(entry["name"], where),
                _shape(entry["shape"], f"{where}'s shape"),
            )
        )
    return named


def _output_names(document: Mapping[str, Any]) -> tuple[str, ...]:
    """The layers whose outputs the model gives (``outputs``), in order;
    empty: its last layer's."""
    given = document.get("outputs", [])
    if not isinstance(given, list | tuple) or len(given) > MAX_INPUTS:
        raise ValueError(f"outputs must be a list of at most {MAX_INPUTS} layer names")
    return tuple(plain_name(n, "an output") for n in given)


def _outputs(
    layers: tuple[Layer, ...],
    input_shape: tuple[int, ...],
    more: tuple[ModelInput, ...] = (),
    outputs: tuple[str, ...] = (),
) -> int:
    """How many outputs each position of an example gets at the (first)
    output (0 when the layers end in no row or rows, or do not fit
    together: ``ModelSpec`` then says why)."""
    try:
        shapes = layer_outputs(layers, input_shape, more)
        final = shapes[outputs[0]] if outputs else shapes[layers[-1].name]
    except (ValueError, KeyError, IndexError):
        return 0
    return final[-1] if len(final) in OUTPUT_RANKS else 0


def _check_depth(document: Any) -> None:
    """Refuse a document nested deeper than ``MAX_DEPTH`` (walked without
    recursion, so no depth raises RecursionError)."""
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise ValueError(
                f"a model nests tables and lists more than {MAX_DEPTH} deep; a "
                "model is a table of input_shape, layers (a list of tables) and "
                "workload"
            )
        pending.extend((child, depth + 1) for child in children)


def document_of(spec: ModelSpec) -> dict[str, Any]:
    """``spec_from_document``'s inverse: the document of a spec, every option
    that differs from Keras' default written out."""
    layers = []
    for layer in spec.layers:
        entry: dict[str, Any] = {"kind": layer.kind, "name": layer.name}
        for option, value in shown_options(layer.options).items():
            entry[option] = list(value) if isinstance(value, tuple) else value
        if layer.regularize:
            entry["regularize"] = [list(r) for r in layer.regularize]
        if layer.inputs:
            entry["inputs"] = list(layer.inputs)
        if not layer.trainable:
            entry["trainable"] = False
        layers.append(entry)
    workload = _workload_document(spec.workload)
    document: dict[str, Any] = {"layers": layers, "workload": workload}
    if spec.more_inputs:
        document["inputs"] = [
            {"name": name, "shape": list(shape)}
            for name, shape in zip(spec.input_names, spec.input_shapes, strict=True)
        ]
    else:
        document["input_shape"] = list(spec.input_shape)
    if spec.outputs:
        document["outputs"] = list(spec.outputs)
    return document


def _workload_document(w: Workload) -> dict[str, Any]:
    """A workload as a document's ``workload`` table: what differs from the
    defaults written out (so a model on the defaults keeps its digest)."""
    workload: dict[str, Any] = {
        "optimizer": w.optimizer,
        "learning_rate": w.learning_rate,
        "batch_size": w.batch_size,
    }
    if w.losses:  # a loss per output
        workload.update(
            loss=[o.loss for o in w.losses],
            from_logits=[o.from_logits for o in w.losses],
            **loss_options(w.losses),
        )
    elif w.objective != DEFAULT_OBJECTIVE:  # a default-loss model keeps its digest
        workload.update(
            loss=w.loss, from_logits=w.from_logits, **loss_options([w.objective])
        )
    if w.loss_weights:
        workload["loss_weights"] = list(w.loss_weights)
    # the optimizer's options that are not its Keras defaults (so a model
    # on the defaults keeps its digest)
    for option, default in optimizer_defaults(w.optimizer).items():
        if getattr(w, option) != default:
            workload[option] = getattr(w, option)
    if w.schedule is not None:
        workload["schedule"] = _schedule_document(w.schedule)
    return workload


def _schedule_document(schedule: Schedule) -> dict[str, Any]:
    """A schedule as a workload's ``schedule`` table, every option given."""
    table: dict[str, Any] = {"kind": schedule.kind}
    for option in SCHEDULES[schedule.kind][1]:
        value = getattr(schedule, option)
        table[option] = list(value) if isinstance(value, tuple) else value
    return table


def training_of(spec: ModelSpec) -> str:
    """What a training step of ``spec`` is, in one line, as a command says it
    before it checks and times the model and as the report shows it under
    the model's name: the optimizer with every option it computes with, the
    loss, the frozen layers and the batch."""
    w = spec.workload
    options = [
        option
        for option in optimizer_defaults(w.optimizer)
        if option not in CLIPS or getattr(w, option)  # a clip only when on
    ]
    rate = f"learning_rate={w.learning_rate:g}"
    if w.schedule is not None:
        keras_class, arguments = SCHEDULES[w.schedule.kind][0], w.schedule
        shown = {k: v for k, v in vars(arguments).items() if v and k != "kind"}
        listed = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        rate = f"learning_rate={keras_class}({w.learning_rate:g}, {listed})"
    given = ", ".join(
        [rate]
        + [
            f"{option}={getattr(w, option)}"
            if isinstance(getattr(w, option), bool)
            else f"{option}={getattr(w, option):g}"
            for option in options
        ]
    )
    loss = "loss " + w.loss + (" from logits" if w.from_logits else "")
    if spec.several_outputs:  # each output's loss and weight
        loss = "losses " + " + ".join(
            f"{h.weight:g} x {h.objective.loss}"
            + (" from logits" if h.objective.from_logits else "")
            + f" ({h.layer})"
            for h in spec.heads
        )
    frozen = [
        layer.name
        for layer in spec.layers
        if not layer.trainable and any(p.layer == layer.name for p in spec.params)
    ]
    held = (
        f"{len(frozen)} frozen layer{'s' * (len(frozen) != 1)} ({_listed(frozen)})"
        if frozen
        else "no frozen layer"
    )
    keras_class = OPTIMIZER_RECORDS[w.optimizer].keras_class
    return f"{keras_class}({given}), {loss}, {held}, batch {w.batch_size}"


def _listed(names: list[str], shown: int = 3) -> str:
    """The first ``shown`` names, and how many more."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


# --- the store -----------------------------------------------------------------


def _content(text: str, arrays: Mapping[str, np.ndarray] | None) -> str:
    """The 12 hex digits a stored name ends in: a digest of the canonical
    document's ``text`` and of the weights, when the model has its own."""
    content = hashlib.sha256(text.encode())
    if arrays is not None:
        content.update(digest(arrays).encode())
    return content.hexdigest()[:12]


def _check_finite(arrays: Mapping[str, np.ndarray]) -> None:
    for key in sorted(arrays):
        if not np.isfinite(arrays[key]).all():
            raise ValueError(
                f"parameter {key} holds NaN or infinite values; a model's weights "
                "must be finite"
            )


def register(
    file_name: str,
    document: Mapping[str, Any],
    weights: Mapping[str, np.ndarray] | None = None,
    folder: Path | None = None,
) -> str:
    """Check ``document`` (and ``weights`` against it), keep both in the
    store and return the model's name, ``<stem>-<digest>``.  ``weights``:
    the file's own, in canonical layout; ``None``: drawn from a seed like
    the reference models'.  An entry of that name already there is kept
    when it holds that content, else (damaged, edited, a link) replaced
    whole by a rename."""
    spec = spec_from_document("user model", document)  # refuses before writing
    canonical = document_of(spec)
    text = json.dumps(canonical, sort_keys=True)
    arrays = None
    if weights is not None:
        arrays = {k: np.asarray(v, np.float32) for k, v in weights.items()}
        from zoo.weights import check_weights

        check_weights(spec, arrays)
        _check_finite(arrays)
    name = f"{stem_of(file_name)}-{_content(text, arrays)}"
    parent = (folder or store()).absolute()
    if _intact(parent, name):
        return name  # the same content is there already
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
    try:
        if arrays is not None:
            save_npz(scratch / "weights.npz", arrays)
        files.write_text(scratch / "model.json", text + "\n")
        _place(scratch, parent, name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    _load.cache_clear()  # an entry this process found damaged is whole now
    return name


def _place(scratch: Path, parent: Path, name: str) -> None:
    """Rename the written ``scratch`` to ``parent/name``; a damaged entry
    (or link) there is renamed aside first and removed, never followed."""
    target = parent / name
    for _ in range(3):
        try:
            scratch.rename(target)
            return
        except OSError:
            if _intact(parent, name):
                return  # another process registered the same content first
        aside = parent / f".{name}-damaged-{uuid.uuid4().hex[:8]}"
        try:
            target.rename(aside)  # moves a link itself, not what it names
        except FileNotFoundError:
            continue
        if aside.is_symlink() or not aside.is_dir():
            aside.unlink()
        else:
            shutil.rmtree(aside, ignore_errors=True)
    raise ValueError(f"stored model {name} in {parent} cannot be replaced")


def _intact(parent: Path, name: str) -> bool:
    """Whether ``parent/name`` is an entry that holds the content its name
    says (``False``: missing or damaged)."""
    try:
        return _read_entry(parent, name) is not None
    except ValueError:
        return False


def _read_entry(folder: Path, name: str) -> ModelSpec | None:
    """The stored model ``folder/name``, checked to hold the content its
    name's digest says; ``None`` when there is no such entry; a ValueError
    in one sentence naming the entry when it is damaged, changed or a link."""
    match = _STORED.fullmatch(name)
    if not match:
        return None
    entry = folder / name
    where = f"stored model {name} in {folder}"
    try:
        mode = os.lstat(entry).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"{where} cannot be read ({exc.strerror})") from None
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        what = "a link" if stat.S_ISLNK(mode) else "not a folder"
        raise ValueError(
            f"{where} is {what}; the store follows no links: remove it and give "
            "the model's file again"
        )
    try:
        document = files.read_json(entry / "model.json", MAX_DOCUMENT_BYTES)
        spec = spec_from_document(name, document)
        arrays = None
        if os.path.lexists(entry / "weights.npz"):
            arrays = load_npz(entry / "weights.npz")
    except FileNotFoundError:
        raise ValueError(
            f"{where} is damaged (no model.json); give the model's file again "
            "to replace it"
        ) from None
    except (OSError, ValueError, RecursionError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        if isinstance(exc, RecursionError):
            why = "it nests too deeply"
        raise ValueError(
            f"{where} cannot be read ({why}); give the model's file again to replace it"
        ) from None
    canonical = json.dumps(document_of(spec), sort_keys=True)
    if arrays is not None:
        arrays = {k: np.asarray(v) for k, v in arrays.items()}
    if _content(canonical, arrays) != match["digest"]:
        raise ValueError(
            f"{where} has been changed since it was stored: its document and "
            "weights no longer give the digest in its name; give the model's "
            "file again to replace it"
        )
    return spec_from_document(
        name, document, str(entry / "weights.npz") if arrays is not None else ""
    )


def find(name: str, folder: Path | None = None) -> ModelSpec | None:
    """The stored model ``name`` in ``folder`` (default: this process's
    store), checked to hold what its name's digest says; ``None``: not a
    stored model's name, or not there."""
    if not _STORED.fullmatch(name):
        return None
    return _load((folder or store()).absolute(), name)


@functools.cache
def _load(folder: Path, name: str) -> ModelSpec | None:
    return _read_entry(folder, name)
