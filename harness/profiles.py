"""Benchmark profiles: what ``harness run`` measures, and how long and how hard.

A profile is a *blueprint*, a TOML file: which models, paths and phases to run,
the data seed and threads, base settings plus per-model replacements.  Three
ship in ``harness/blueprints/`` (``smoke``, ``default``, ``paper``; each file
explains its numbers); ``get_profile`` also loads a user's own ``.toml`` file.

A blueprint is data only: it is parsed with ``tomllib`` and every value is
checked against the schema below; model, path and phase names are looked up in
their registries, and nothing in a file is ever imported or executed.  A file
that breaks the schema fails with one sentence naming the file, the dotted
field and what that field allows.

Schema (every key is optional except the five marked required)::

    description = "..."              # a string
    models = ["ffn", ...] | "all"    # known models or variants; "all": MODELS
    paths = "all" | [...]            # ids of harness.paths.PATHS
    phases = "all" | [...]           # "train", "infer"
    seed = 1                         # data seed, an integer >= 0
    data = "synthetic"               # the only data source so far
    fresh_worker_per_cell = true     # else one worker per path serves all
    timeout_s = 1800                 # per cell, worker start-up excluded; > 0
    [threads]                        # integers >= 1 or "auto"
    intra_op = "auto"
    inter_op = "auto"
    [settings]                       # base settings for every model
    train_steps = 3                  # required, integer >= 1
    repeats = 3                      # required, integer >= 1
    infer_batches = 4                # required, integer >= 1
    window_s = 3.0                   # required, number > 0
    warmup_rounds = 1                # required, integer >= 0
    warmup_repeats = 0               # integer >= 0
    batch_size = 32                  # integer >= 1; unset: the workload's
    infer_batch_sizes = [1, 16, 128] # inference sweep; unset: batch_size only
    latency = false                  # also sample per-batch latencies
    [per_model.vgg16]                # replacements of [settings] for one model
    train_steps = 2

Per-model tables live under ``per_model``, not ``models``: TOML cannot hold
both the ``models`` list and ``[models.vgg16]`` tables.
"""

from __future__ import annotations

import difflib
import json
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from harness.paths import PATHS, PHASES
from zoo.specs import MODELS, VARIANTS

# The shipped blueprints, in the order the CLI lists them.
SHIPPED = ("smoke", "default", "paper")
DATA_SOURCES = ("synthetic",)
AUTO_THREADS: dict[str, int | str] = {"intra_op": "auto", "inter_op": "auto"}


@dataclass(frozen=True)
class Settings:
    train_steps: int  # timed optimizer steps per repeat
    repeats: int  # timed repeats of train_steps; the median is reported
    infer_batches: int  # resident mini-batches per inference round
    window_s: float  # inference time window (at least one round is timed)
    warmup_rounds: int  # untimed inference rounds first
    # untimed runs of train_steps after the first step: some runtimes (XLA on
    # CPU) keep getting faster for a few steps after compiling
    warmup_repeats: int = 0
    batch_size: int | None = None  # None: the workload's batch size
    # inference batch-size sweep; None: only batch_size (or the workload's)
    infer_batch_sizes: tuple[int, ...] | None = None
    latency: bool = False  # also sample per-batch inference latencies


@dataclass(frozen=True)
class Profile:
    name: str
    base: Settings
    per_model: dict[str, dict[str, Any]] = field(default_factory=dict)
    fresh_worker_per_cell: bool = True  # else one worker per path serves all
    timeout_s: float = 1800.0  # for one cell, worker start-up excluded
    models: tuple[str, ...] = tuple(MODELS)
    paths: tuple[str, ...] = tuple(PATHS)
    phases: tuple[str, ...] = PHASES
    seed: int = 1  # data seed
    data: str = "synthetic"
    # framework thread pools, {"intra_op": n, "inter_op": m}; each count an
    # integer or "auto" (harness.numerics.thread_environment resolves it)
    threads: dict[str, int | str] = field(default_factory=lambda: dict(AUTO_THREADS))
    description: str = ""

    def settings(self, model: str) -> Settings:
        return replace(self.base, **self.per_model.get(model, {}))


# --- the schema --------------------------------------------------------------


class _RejectedError(Exception):
    """A value a rule rejects; ``shown`` replaces the whole value in the message."""

    def __init__(self, shown: str | None = None) -> None:
        super().__init__(shown)
        self.shown = shown


@dataclass(frozen=True)
class _Rule:
    allowed: str  # what the field accepts, completing "<field> must be ..."
    check: Callable[[Any], Any]  # the converted value, or raises _RejectedError


def _show(value: Any) -> str:
    """``value`` as it would read in TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return str(value)


def _is_int(value: Any) -> bool:
    # TOML's true and false are Python bools, which are ints too.
    return isinstance(value, int) and not isinstance(value, bool)


def _integer(minimum: int) -> _Rule:
    def check(value: Any) -> int:
        if not _is_int(value) or value < minimum:
            raise _RejectedError
        return int(value)

    return _Rule(f"an integer >= {minimum}", check)


def _positive_number(value: Any) -> float:
    if not (_is_int(value) or isinstance(value, float)):
        raise _RejectedError
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        raise _RejectedError from None
    if not (math.isfinite(number) and number > 0):
        raise _RejectedError
    return number


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _RejectedError
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _RejectedError
    return value


def _choice(known: tuple[str, ...]) -> _Rule:
    def check(value: Any) -> str:
        if value not in known or not isinstance(value, str):
            raise _RejectedError
        return value

    return _Rule("one of " + ", ".join(json.dumps(k) for k in known), check)


def _thread_count(value: Any) -> int | str:
    if value == "auto" and isinstance(value, str):
        return value
    if not _is_int(value) or value < 1:
        raise _RejectedError
    return int(value)


def _distinct(items: list[Any]) -> None:
    for i, item in enumerate(items):
        if item in items[:i]:
            raise _RejectedError(f"{_show(item)} twice")


def _names(known: tuple[str, ...], everything: tuple[str, ...]) -> _Rule:
    """``"all"`` (meaning ``everything``) or a non-empty list from ``known``."""

    def check(value: Any) -> tuple[str, ...]:
        if value == "all" and isinstance(value, str):
            return everything
        if not isinstance(value, list) or not value:
            raise _RejectedError
        for item in value:
            if item not in known or not isinstance(item, str):
                raise _RejectedError(_show(item))
        _distinct(value)
        return tuple(value)

    return _Rule('"all" or a list of distinct names from ' + ", ".join(known), check)


def _batch_sizes(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise _RejectedError
    for item in value:
        if not _is_int(item) or item < 1:
            raise _RejectedError(_show(item))
    _distinct(value)
    return tuple(value)


_SETTINGS: dict[str, _Rule] = {
    "train_steps": _integer(1),
    "repeats": _integer(1),
    "infer_batches": _integer(1),
    "window_s": _Rule("a number > 0", _positive_number),
    "warmup_rounds": _integer(0),
    "warmup_repeats": _integer(0),
    "batch_size": _integer(1),
    "infer_batch_sizes": _Rule(
        "a non-empty list of distinct integers >= 1", _batch_sizes
    ),
    "latency": _Rule("true or false", _boolean),
}
# Settings without a default in the dataclass must be in [settings].
_REQUIRED = tuple(
    f.name
    for f in fields(Settings)
    if f.default is MISSING and f.default_factory is MISSING
)
_THREADS: dict[str, _Rule] = {
    "intra_op": _Rule('an integer >= 1 or "auto"', _thread_count),
    "inter_op": _Rule('an integer >= 1 or "auto"', _thread_count),
}
_ALL_MODELS = (*MODELS, *VARIANTS)
_TOP: dict[str, _Rule] = {
    "description": _Rule("a string", _string),
    "models": _names(_ALL_MODELS, tuple(MODELS)),
    "paths": _names(tuple(PATHS), tuple(PATHS)),
    "phases": _names(PHASES, PHASES),
    "seed": _integer(0),
    "data": _choice(DATA_SOURCES),
    "fresh_worker_per_cell": _Rule("true or false", _boolean),
    "timeout_s": _Rule("a number > 0", _positive_number),
}
_TABLES = ("threads", "settings", "per_model")


class _Checker:
    """Checks one parsed file; every error names ``label`` and a dotted field."""

    def __init__(self, label: str) -> None:
        self.label = label

    def fail(self, message: str) -> ValueError:
        return ValueError(f"{self.label}: {message}")

    def table(self, value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(f"{where} must be a table, got {_show(value)}")
        return value

    def keys(
        self, table: Mapping[str, Any], known: tuple[str, ...], where: str
    ) -> None:
        for key in table:
            if key not in known:
                close = difflib.get_close_matches(key, known, n=1)
                hint = f" (did you mean {close[0]}?)" if close else ""
                if not where and key in _SETTINGS:
                    hint = " (settings belong in the [settings] table)"
                raise self.fail(
                    f"{where}{key} is not a known key{hint}; known keys: "
                    + ", ".join(known)
                )

    def values(
        self, table: Mapping[str, Any], rules: Mapping[str, _Rule], where: str
    ) -> dict[str, Any]:
        self.keys(table, tuple(rules), where)
        out = {}
        for key, value in table.items():
            rule = rules[key]
            try:
                out[key] = rule.check(value)
            except _RejectedError as bad:
                shown = _show(value) if bad.shown is None else bad.shown
                raise self.fail(
                    f"{where}{key} must be {rule.allowed}, got {shown}"
                ) from None
        return out

    def settings(self, table: Any, where: str) -> dict[str, Any]:
        return self.values(self.table(table, where), _SETTINGS, f"{where}.")

    def profile(self, name: str, doc: dict[str, Any]) -> Profile:
        self.keys(doc, (*_TOP, *_TABLES), "")
        top = self.values({k: v for k, v in doc.items() if k in _TOP}, _TOP, "")
        threads = self.values(
            self.table(doc.get("threads", {}), "threads"), _THREADS, "threads."
        )
        base = self.settings(doc.get("settings", {}), "settings")
        for key in _REQUIRED:
            if key not in base:
                raise self.fail(
                    f"settings.{key} is missing; it must be {_SETTINGS[key].allowed}"
                )
        per_model = {}
        for model, table in self.table(doc.get("per_model", {}), "per_model").items():
            if model not in _ALL_MODELS:
                raise self.fail(
                    f"per_model.{model} is not a known model; known models: "
                    + ", ".join(_ALL_MODELS)
                )
            per_model[model] = self.settings(table, f"per_model.{model}")
        return Profile(
            name,
            Settings(**base),
            per_model,
            threads=AUTO_THREADS | threads,
            **top,
        )


def parse_blueprint(name: str, text: str, label: str | None = None) -> Profile:
    """The profile ``name`` from TOML ``text``; errors name ``label`` (the file)."""
    label = label or f"{name}.toml"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{label} is not valid TOML: {exc}") from None
    return _Checker(label).profile(name, doc)


def load_blueprint(path: str | Path) -> Profile:
    """The profile in the TOML file ``path``, named after the file's stem."""
    path = Path(path)
    try:
        raw = path.read_bytes()
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
    return parse_blueprint(path.stem, text, str(path))


def _shipped(name: str) -> Profile:
    text = resources.files("harness").joinpath("blueprints", f"{name}.toml")
    return parse_blueprint(name, text.read_text(encoding="utf-8"))


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
