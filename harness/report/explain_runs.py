"""An explain run's analysis as the report reads it back.

``harness report`` reads each ``explain-*`` folder's ``explain.json`` (the
cells ``harness.explain.measure.render`` wrote) and the first line of its
``explain.jsonl`` (the run's host), and prints what the cells hold.  Both are
read through the project's one door for files (``zoo.files``): a regular
file only, no link followed, at most ``ANALYSIS_BYTES`` (a FIFO never hangs
the report, a link to ``/dev/zero`` is never read), and JSON that parses.
A file that fails, or holds no list of cells or no host, is named once on
stderr in one sentence (``jsonl.warn``) and its run is left out; the
report goes on with the others.

What a cell must hold to be printed is :class:`Cell` (every field the
explain section shows, of its type and within a physical range: a time of
at most ``MAX_US`` microseconds either way, a name of at most
``records.MAX_NAME_CHARS`` characters); the comparisons of
``harness.report.agreement`` and ``harness.report.summary`` check the few
fields they use with their own schemas, built from the types here.

Framework-free.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, model_validator

from harness.core import jsonl, records, validated
from zoo import files

# The largest explain.json read: a run of every model, framework and phase
# writes well under a megabyte.
ANALYSIS_BYTES = 64 * 1024 * 1024
# A time a cell may hold, in microseconds, either way (a part may be
# negative): at most the longest step a record may hold.
MAX_US = records.MAX_STEP_S * 1e6
# A ratio, a share or a slowdown a cell may hold (Keras over native, a
# closure, the profiler's slowdown): a million times is no measurement.
MAX_RATIO = 1e6
# The longest operator name a profile may list (a TensorFlow op's scope
# path is the longest seen, well under it).
MAX_OP_CHARS = 1000

Name = Annotated[str, Field(min_length=1, max_length=records.MAX_NAME_CHARS)]
OpName = Annotated[str, Field(max_length=MAX_OP_CHARS)]
Micros = Annotated[float, Field(ge=-MAX_US, le=MAX_US, allow_inf_nan=False)]
Ratio = Annotated[float, Field(ge=-MAX_RATIO, le=MAX_RATIO, allow_inf_nan=False)]
Batch = Annotated[int, Field(ge=1, le=10**9)]


class Figure(validated.Schema):
    """A median in microseconds with its 95% interval."""

    us: Micros
    low: Micros
    high: Micros


class _Ratio(validated.Schema):
    value: Ratio
    low: Ratio
    high: Ratio


class _Fit(validated.Schema):
    fixed_us: Micros
    fixed_low: Micros
    fixed_high: Micros
    per_sample_us: Micros
    per_sample_low: Micros
    per_sample_high: Micros
    worst_residual: Ratio


class _Sweep(validated.Schema):
    """A cell's sweep: empty (one batch size), or its fits."""

    batches: list[Batch] | None = None
    fits: dict[Name, _Fit] | None = None
    breakeven_batch: Annotated[float, Field(ge=0, le=1e12)] | None = None
    breakeven_extrapolated: bool | None = None

    @model_validator(mode="after")
    def _whole(self) -> _Sweep:
        if (self.batches is None) != (self.fits is None):
            raise ValueError("a sweep with batches and no fits, or fits and none")
        if self.breakeven_batch is not None and self.breakeven_extrapolated is None:
            raise ValueError("a break-even batch without whether it is extrapolated")
        return self


class _Level(validated.Schema):
    """One level's profile."""

    kernel_share: Ratio | None
    kernel_us: Micros
    top: list[tuple[OpName, Micros, Ratio]]
    profiler_slowdown: Ratio | None = None


class _Profile(validated.Schema):
    """A cell's profile: empty, or the profiler and, under each level's path
    (checked by :class:`Cell`, which knows the paths), its figures."""

    profiler: Name | None = None
    distorted: list[Name] | None = None
    one_sided: dict[Name, list[tuple[OpName, Micros]]] | None = None

    @model_validator(mode="after")
    def _named(self) -> _Profile:
        if (self.model_extra or self.model_fields_set) and self.profiler is None:
            raise ValueError("a profile that does not name its profiler")
        return self


class Cell(validated.Schema):
    """What the explain section (``harness.explain.measure.markdown``) shows
    of a cell: its name, its parts (with the Keras step, the ratio and the
    closure they come with), its sweep and its profile."""

    model: Name
    framework: Name
    phase: Name
    batch: Batch
    paths: list[Name]
    unverified: bool = False
    contended: Annotated[int, Field(ge=0)] = 0
    requests: Annotated[int, Field(ge=0)] | None = None
    parts: dict[Name, Figure] | None = None
    total: Figure | None = None
    ratio: _Ratio | None = None
    sum_of_parts_us: Micros | None = None
    closure: Ratio | None = None
    processes: Annotated[int, Field(ge=0)] | None = None
    blocks: Annotated[int, Field(ge=0)] | None = None
    sweep: _Sweep | None = None
    profile: _Profile | None = None

    @model_validator(mode="after")
    def _whole(self) -> Cell:
        if self.contended and self.requests is None:
            raise ValueError("a busy cell that does not say of how many requests")
        if self.parts is not None:
            shown = (self.ratio, self.sum_of_parts_us, self.closure)
            if any(v is None for v in (*shown, self.processes, self.blocks)):
                raise ValueError("parts without the figures they come with")
            if self.total is None or self.total.us <= 0:
                raise ValueError("parts without a positive Keras step")
        levels = (self.profile.model_extra or {}) if self.profile else {}
        for path in self.paths:
            if path in levels:
                _Level.model_validate_json(json.dumps(levels[path]), strict=True)
        return self


class _Analysis(validated.Schema):
    cells: list[Any]


class _Host(validated.Schema):
    host: dict[str, Any]


def _left_out(reason: str) -> None:
    """Say once on stderr why an explain run is left out of the report."""
    jsonl.warn(f"warning: {reason}; that explain run is left out of the report")


def _unread(path: Path, exc: OSError) -> str:
    """Why ``path`` was not read: the door's own sentence, or the system's."""
    if isinstance(exc, files.Refused):
        return str(exc)
    return f"{path} cannot be read ({exc.strerror or exc})"


def cells(folder: Path) -> list[Any] | None:
    """The cells (as written, each for its reader's schema to check) of
    ``folder``'s ``explain.json``; None, said once on stderr, when it cannot
    be read or holds no list of cells."""
    path = folder / "explain.json"
    try:
        found = files.read_object(path, ANALYSIS_BYTES)
    except OSError as exc:  # files.Refused included
        _left_out(_unread(path, exc))
        return None
    if not validated.fits(_Analysis, found):
        _left_out(f"{path} holds no list of cells")
        return None
    cells_: list[Any] = found["cells"]
    return cells_


def host(folder: Path) -> dict[str, Any] | None:
    """The host of ``folder``'s explain run (the first line of its
    ``explain.jsonl``, at most ``jsonl.MAX_LINE_BYTES``); None, said once on
    stderr, when it cannot be read or names no host."""
    path = folder / "explain.jsonl"
    try:
        with files.opened(path, jsonl.MAX_FILE_BYTES) as handle:
            line = handle.readline(jsonl.MAX_LINE_BYTES + 1)
        if len(line) > jsonl.MAX_LINE_BYTES:
            raise files.Refused(f"{path}'s first line is longer than it may be")
        try:
            first = files.parse_json(line.decode("utf-8"), f"{path} line 1")
        except UnicodeDecodeError:
            raise files.Refused(f"{path} is not UTF-8 text") from None
    except OSError as exc:  # files.Refused included
        _left_out(_unread(path, exc))
        return None
    if not validated.fits(_Host, first):
        _left_out(f"{path}'s first line names no host")
        return None
    found: dict[str, Any] = first["host"]
    return found
