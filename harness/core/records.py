"""Measurement records: one immutable record per cell, as JSON Lines.

Schema history:
- 1: first version (model, path, phase, status, batch size, raw values,
  summary, settings, platform, equivalence verdict).
- 2: ``verified`` (timed with a passing equivalence verdict from the gate);
  status ``not-timed`` for a cell the gate held back; the worker's pinned
  numeric settings under ``platform["numerics"]``.
- 3: ``repeat`` (which fresh-process repeat of the cell this is; a cell has
  one record per repeat); ``summary`` gains ``flops`` (per step or
  mini-batch, from the spec), ``cpu_util`` and ``peak_rss_mb`` (sampled by
  the orchestrator; ``peak_gpu_mb`` too where NVML sees the worker on a
  GPU) and, for inference, ``latency_p50_s``/``p90``/``p99``;
  ``platform`` gains ``matmul_peak_flops`` and ``threads``.
- 4: ``profile_digest`` (the SHA-256 of the profile's resolved settings, so
  ``--resume`` compares profiles by content, not by name); status
  ``diverged`` for a cell whose run produced NaN or inf (loss, parameters or
  outputs; ``error`` says which), which is never ``ok``.  Later, still
  version 4 because the key is optional: ``platform["machine"]``
  (:func:`harness.core.machines.identity`: the machine's name, from
  ``HARNESS_MACHINE`` or the short hostname, its CPU model, cores, memory and
  accelerator).  Records are pooled on it instead of the hostname; a record
  without it goes by its hostname's name.  Likewise optional: ``values["usage"]``
  (``getrusage`` of the worker process around each timed run or block, per
  step or mini-batch: ``workers.timing.USAGE``) and their medians in
  ``summary`` as ``usage_user_s``, ``usage_sys_s``, ``usage_minflt``,
  ``usage_majflt``, ``usage_nvcsw`` and ``usage_nivcsw``.

:func:`read` returns typed :class:`Record` objects: records of versions 1 to
``SCHEMA_VERSION`` are read (the fields an older version lacks take the
dataclass defaults), a newer or unknown version is refused, a line that is no
JSON is skipped by the policy of :mod:`harness.core.jsonl` (the torn last
line of a crash mid-write with a warning), and a JSON line that is no record
(a missing, unknown or wrongly typed field, a name longer than
``MAX_NAME_CHARS`` or a text longer than ``MAX_TEXT_CHARS``, or times per step
that are not finite numbers from ``MIN_STEP_S`` to ``MAX_STEP_S``, or a
matmul peak outside ``harness.core.peak.MAX_FLOPS_PER_S`` or a kernel name
longer than ``harness.core.peak.MAX_KERNEL_CHARS``) is skipped and counted
(:func:`scan`).  Only a regular file of at most
``jsonl.MAX_FILE_BYTES`` is read, and no line longer than
``jsonl.MAX_LINE_BYTES`` (:func:`harness.core.jsonl.read`).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.core import jsonl, machines, peak
from workers.paths import get_path

SCHEMA_VERSION = 4
# Every status a record may have (``Record.status``).  A record of another
# status (a newer harness', a hand edit) is read, counted as not ok, and named
# in a warning (``Scan.unknown``).
STATUSES = (
    "ok",
    "not-timed",
    "diverged",
    "error",
    "crashed",
    "timeout",
    "unavailable",
)


# The longest name a record may hold (a model, a path, a phase, a status, a
# profile, a run id, a machine) and the longest text (an error, which names
# at most the last 2,000 characters of a worker's stderr): a record read that
# holds a longer one is no record (a hand edit, a hostile file), rather than a
# megabyte of text carried into tables and plots.
MAX_NAME_CHARS = 200
MAX_TEXT_CHARS = 64 * 1024
Name = Annotated[str, Field(max_length=MAX_NAME_CHARS)]
Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
# A time per step, mini-batch or round a record may hold: a nanosecond to
# eleven days.  A time outside (1e-308 s, 1e308 s: a hand edit) is no
# measurement and its record no record, rather than an inf or NaN ratio.
MIN_STEP_S = 1e-9
MAX_STEP_S = 1e6


@dataclass(frozen=True)
class Record:
    __pydantic_config__ = ConfigDict(extra="forbid")

    run_id: Name
    profile: Name
    model: Name
    path: Name
    framework: Name
    api: Name
    phase: Name
    # "ok"; how it failed: "error", "crashed", "timeout", "unavailable";
    # "diverged" when the timed run produced NaN or inf; or "not-timed" when
    # the equivalence gate held it back (STATUSES)
    status: Name
    batch_size: int
    equivalence: Name  # the path's verdict for this model: pass, fail, error...
    verified: bool = False  # timed with a passing verdict
    repeat: int = 0  # which fresh-process repeat of the cell
    values: dict[str, Any] = field(default_factory=dict)  # every raw measurement
    summary: dict[str, Any] = field(default_factory=dict)  # medians and friends
    settings: dict[str, Any] = field(default_factory=dict)  # what was asked for
    platform: dict[str, Any] = field(default_factory=dict)
    error: Text | None = None
    profile_digest: Name | None = None  # the profile's content (schema 4)
    schema_version: int = SCHEMA_VERSION


def make(
    run_id: str,
    profile: str,
    *,
    model: str,
    path: str,
    phase: str,
    batch_size: int,
    status: str,
    equivalence: str,
    host: Mapping[str, Any] | None = None,
    platform: Mapping[str, Any] | None = None,
    framework: str | None = None,
    api: str | None = None,
    **fields: Any,
) -> Record:
    """A record of this schema version, as every command builds one.

    ``framework`` and ``api`` are the path's own (``workers.paths``) unless
    given (floors' idiomatic steps are no registered path).  ``platform`` is
    the machine's (``host``: :func:`host_platform`, taken once per run), then
    what the caller adds (the worker's, the threads) over it.  ``fields``:
    the rest of :class:`Record` (``repeat``, ``values``, ``error``...)."""
    if framework is None or api is None:
        registered = get_path(path)
        framework = registered.framework if framework is None else framework
        api = registered.api if api is None else api
    return Record(
        run_id=run_id,
        profile=profile,
        model=model,
        path=path,
        framework=framework,
        api=api,
        phase=phase,
        status=status,
        batch_size=batch_size,
        equivalence=equivalence,
        platform={**(host or {}), **(platform or {})},
        **fields,
    )


# A record that could not be written whole (disk full, quota, a read-only or
# vanished folder); the file holds every record written before it.
RecordsWriteError = jsonl.WriteError


def append(path: Path, record: Record) -> None:
    """Append one record as one line and ``fsync`` it, so a crash can lose the
    record being written but never corrupt earlier ones
    (:func:`harness.core.jsonl.append`).

    A write that stores only part of the line (disk full, a quota, a file size
    limit) or fails is undone (the file is cut back to its length before) and
    raises :class:`RecordsWriteError` naming the file, so no record is ever
    reported as measured and then silently missing.  Ctrl-C cannot tear a line
    either: SIGINT waits until the line is written or undone.  Processes that
    append to one file at once (cluster tasks) take turns (``fcntl.lockf``)."""
    jsonl.append(path, asdict(record), sort_keys=True, noun="record")


@dataclass(frozen=True)
class Scan:
    """What a records file holds: its records, the numbers (from 1) of the
    lines that are JSON but no record (not an object, a missing or unknown
    field, a field of the wrong type), and its torn last line, if any."""

    path: Path
    records: list[Record]
    skipped: tuple[int, ...] = ()
    torn: int | None = None  # the last line, cut short by a crash mid-write
    # (line, status) of every record whose status is none of STATUSES
    unknown: tuple[tuple[int, str], ...] = ()

    def warning(self) -> str | None:
        """One line saying which lines were skipped; None when none were."""
        if not self.skipped:
            return None
        return jsonl.skipped_warning(self.path, self.skipped, ("a record", "records"))

    def status_warning(self) -> str | None:
        """One line naming the records of a status this code does not know,
        e.g. ``'ok-partial'``; None when there are none."""
        if not self.unknown:
            return None
        lines: dict[str, list[int]] = {}
        for number, status in self.unknown:
            lines.setdefault(status, []).append(number)
        named = "; ".join(
            f"{status!r} (line{'s' if len(found) > 1 else ''} "
            + ", ".join(str(n) for n in found[: jsonl.SHOWN])
            + (", ..." if len(found) > jsonl.SHOWN else "")
            + ")"
            for status, found in lines.items()
        )
        return (
            f"warning: {self.path} has records of a status this code does not "
            f"know: {named}; they are read as not ok (it knows "
            f"{', '.join(STATUSES)})"
        )

    def warnings(self) -> list[str]:
        """Every line a reader of the file should see on stderr: the lines
        skipped (:meth:`warning`), the unknown statuses, the torn last line."""
        torn = jsonl.Lines(self.path, [], torn=self.torn).warning()
        found = (self.warning(), self.status_warning(), torn)
        return [w for w in found if w is not None]


def scan(path: Path) -> Scan:
    """Every record of a JSON Lines file, typed, with the lines skipped.

    Lines are read by the policy of :mod:`harness.core.jsonl`: a line that is
    not JSON is skipped, the torn last line of a crash mid-write named in
    ``Scan.torn``, one elsewhere (a torn line a resumed run appended after)
    without a word; a JSON line that is no record is skipped and named in
    ``Scan.skipped``.  Versions 1 to ``SCHEMA_VERSION`` are read, the fields
    an older version lacks taking the defaults of :class:`Record`.  A record
    whose status is none of ``STATUSES`` is read (its cell counts as not ok)
    and named in ``Scan.unknown``: unlike a newer schema version, which may
    change what any field means and is refused, it misleads nothing else.

    Raises ValueError, in one sentence naming the file, for a file that is not
    UTF-8 text and for a record of a newer or unknown ``schema_version``."""
    try:
        lines = jsonl.read(path)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not a records file: it is not UTF-8 text (byte "
            f"{exc.start}); give a run-*.jsonl written by 'python -m harness run'"
        ) from None
    recs: list[Record] = []
    skipped = list(lines.unreadable)
    unknown: list[tuple[int, str]] = []
    for number, data in lines.values:
        record = _record(path, number, data)
        if record is None:
            skipped.append(number)
            continue
        recs.append(record)
        if record.status not in STATUSES:
            unknown.append((number, record.status))
    return Scan(path, recs, tuple(sorted(skipped)), lines.torn, tuple(unknown))


def read(path: Path) -> list[Record]:
    """The records of a JSON Lines file (see :func:`scan`, which also says
    which lines were skipped); what a reader should hear of
    (:meth:`Scan.warnings`) goes to stderr, once per process."""
    found = scan(path)
    for warning in found.warnings():
        jsonl.warn(warning)
    return found.records


# Reading checks each field's type strictly (a bool is no int, a string no
# number) and refuses unknown fields (``Record.__pydantic_config__``).  It
# validates JSON text: in strict mode only JSON input may stand for a dataclass.
_READER = TypeAdapter(Record)


# The parts of a record the report computes with are checked as well: a
# record whose times are not finite non-negative numbers (a hand-edited file)
# is no record, rather than a crash or a wrong table later.
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
# A time per step, mini-batch or round, and a rate per second, within
# MIN_STEP_S to MAX_STEP_S.
StepSeconds = Annotated[float, Field(ge=MIN_STEP_S, le=MAX_STEP_S, allow_inf_nan=False)]
PerSecond = Annotated[
    float, Field(ge=1 / MAX_STEP_S, le=1 / MIN_STEP_S, allow_inf_nan=False)
]


class _Measured(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)


class _Values(_Measured):
    step_s: list[StepSeconds] | None = None
    round_s: list[StepSeconds] | None = None
    first_step_s: StepSeconds | None = None
    batches_per_round: Annotated[int, Field(ge=1)] | None = None
    batches_per_s: PerSecond | None = None


class _Summary(_Measured):
    median_step_s: StepSeconds | None = None
    first_step_s: StepSeconds | None = None
    first_round_s: StepSeconds | None = None
    median_batch_s: StepSeconds | None = None
    batches_per_s: PerSecond | None = None
    flops: Seconds | None = None
    latency_p50_s: StepSeconds | None = None
    latency_p90_s: StepSeconds | None = None
    latency_p99_s: StepSeconds | None = None
    cpu_util: Seconds | None = None
    peak_rss_mb: Seconds | None = None
    peak_gpu_mb: Seconds | None = None
    usage_user_s: Seconds | None = None
    usage_sys_s: Seconds | None = None
    usage_minflt: Seconds | None = None
    usage_ready_s: Seconds | None = None


class _PeakSource(_Measured):
    status: Name
    flops_per_s: peak.Rate | None = None
    median_flops_per_s: peak.Rate | None = None
    kernel: peak.KernelName | None = None


class _MatmulPeak(_Measured):
    """The run's matmul peak (``harness.core.peak.MatmulPeak``) as the
    report's header shows it: every rate within ``peak.MAX_FLOPS_PER_S``,
    every kernel and source name within ``peak.MAX_KERNEL_CHARS``."""

    flops_per_s: peak.Rate | None = None
    median_flops_per_s: peak.Rate | None = None
    best: peak.KernelName | None = None
    kernel: peak.KernelName | None = None
    sources: dict[peak.KernelName, _PeakSource] = Field(default_factory=dict)


class _Platform(_Measured):
    matmul_peak_flops: peak.Rate | None = None
    matmul_peak: _MatmulPeak | None = None


def _named(platform: dict[str, Any]) -> bool:
    """Whether the names the report shows of a record's machine (its
    hostname, its identity's name and CPU model), where they are text, are
    no longer than ``MAX_NAME_CHARS``."""
    machine = platform.get("machine")
    machine = machine if isinstance(machine, dict) else {}
    names = (platform.get("hostname"), machine.get("name"), machine.get("cpu_model"))
    return all(len(n) <= MAX_NAME_CHARS for n in names if isinstance(n, str))


def _measured(record: Record) -> bool:
    """Whether the numbers the report reads from ``record`` are numbers."""
    try:
        _Values.model_validate(record.values)
        _Summary.model_validate(record.summary)
        _Platform.model_validate(record.platform)
    except ValidationError:
        return False
    return _named(record.platform)


def _record(path: Path, number: int, data: Any) -> Record | None:
    """The record line ``number`` of ``path`` holds; None when it holds none.

    Raises ValueError for a newer or unknown ``schema_version``."""
    if not isinstance(data, dict) or "schema_version" not in data:
        return None
    version = data["schema_version"]
    if type(version) is not int or not 1 <= version <= SCHEMA_VERSION:
        newer = type(version) is int and version > SCHEMA_VERSION
        raise ValueError(
            f"{path} line {number} has schema_version {version!r}, "
            + ("newer than" if newer else "not one of")
            + f" the versions this code reads (1 to {SCHEMA_VERSION})"
            + ("; report it with the harness that wrote it" if newer else "")
        )
    try:
        record = _READER.validate_json(json.dumps(data), strict=True)
    except ValidationError:
        return None
    return record if _measured(record) else None


def final(recs: Iterable[Record]) -> list[Record]:
    """The last record of every cell repeat, in first-seen order.

    ``--resume`` redoes a repeat whose record failed (crashed, timed out,
    diverged) and appends the new record after the old one: the new one is
    the repeat's outcome, the old one is history.  Records before schema 3
    carry no repeat number and are all kept."""
    last: dict[tuple[Any, ...], Record] = {}
    for i, r in enumerate(recs):
        if r.schema_version < 3:  # the version that added repeat
            last[(i,)] = r
        else:
            threads = r.settings.get("threads")  # a thread sweep's count
            key = (r.run_id, r.model, r.path, r.phase, r.batch_size, r.repeat)
            last[(*key, threads if isinstance(threads, int) else None)] = r
    return list(last.values())


# The gate's verdict for a path whose forward pass and gradients agree with
# float64 and whose optimizer update does not (``harness.core.gate``): its
# inference is timed, its training held back.
INFER_ONLY = "infer-only"
# How ``outcome`` counts such a held-back training cell: the run did what it
# must (no timing of a training that is not equivalent) and says why, so it
# is no failure of the run (``ACCEPTED``).
HELD_BACK_TRAINING = "not-timed (training not equivalent)"
ACCEPTED = frozenset({"ok", HELD_BACK_TRAINING})


def verified(verdict: str, phase: str) -> bool:
    """Whether a cell of ``phase`` may be timed under the gate's ``verdict``:
    a pass (or a path not installed here, which then reports itself); an
    ``infer-only`` path for inference."""
    return verdict in ("pass", "unavailable") or (
        verdict == INFER_ONLY and phase == "infer"
    )


def _ending(record: Record) -> str:
    held = record.status == "not-timed" and record.equivalence == INFER_ONLY
    return HELD_BACK_TRAINING if held else record.status


def outcome(recs: Iterable[Record]) -> tuple[Counter[str], str]:
    """How every cell repeat ended (the status of its final record, a
    training cell held back as ``infer-only`` counted as
    ``HELD_BACK_TRAINING``), and one line saying so, e.g. ``46 cell repeats:
    1 diverged, 44 ok, 1 not-timed``, and how many of the ok ones were
    measured on a busy machine.  A run went as it must when every count is
    in ``ACCEPTED``."""
    last = final(recs)
    counts = Counter(_ending(r) for r in last)
    unverified = sum(1 for r in last if r.status == "ok" and not r.verified)
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    if unverified:
        parts.append(f"{unverified} of the ok ones unverified")
    busy = sum(1 for r in last if r.status == "ok" and r.summary.get("contended"))
    if busy:
        parts.append(
            f"{busy} of the ok ones measured on a BUSY MACHINE (other processes "
            "took CPU time meanwhile)"
        )
    return counts, f"{len(last)} cell repeats: " + (", ".join(parts) or "none")


# What must agree between records before their samples are pooled into one
# cell: the machine, the code, the libraries, the numeric, thread and
# allocator settings and what was asked for.  Measured quantities (the matmul
# peak) may differ.
# The machine is compared by what it is (``machines.POOLED``), not by its
# hostname, so that the nodes of one machine type named alike pool.
POOLED_KEYS = (
    "machine",
    "cpu_model",
    "cpu_count",
    "os",
    "python",
    "git_revision",
    "threads",
    "framework_version",
    "keras_version",
    "device",
    "numerics",
    "xla_flags",
    "allocator",
)


# Settings that differ between the processes of one cell by design: the seed
# of a paired process' block order (``workers.messages.Paired.seed``).
PER_PROCESS_SETTINGS = ("seed",)
# Numeric settings that name something of one process: the empty compile
# cache every worker starts with (``workers.numerics.pin_compiler``).
PER_PROCESS_NUMERICS = ("inductor_cache_dir",)


def environment(record: Record) -> dict[str, Any]:
    """The parts of a record's environment that ``POOLED_KEYS`` names, and its
    settings (steps, window...), as ``platform.<key>`` / ``settings``; the
    machine as ``platform.machine.<key>`` for each of ``machines.POOLED``
    (records without an identity: the name of their hostname)."""
    found = {
        f"platform.machine.{k}": v for k, v in machines.pooled(record.platform).items()
    }
    found |= {
        f"platform.{k}": record.platform[k]
        for k in POOLED_KEYS
        if k in record.platform and k != "machine"
    }
    numerics = found.get("platform.numerics")
    if isinstance(numerics, dict):
        found["platform.numerics"] = {
            k: v for k, v in numerics.items() if k not in PER_PROCESS_NUMERICS
        }
    settings = {
        k: v for k, v in record.settings.items() if k not in PER_PROCESS_SETTINGS
    }
    return found | {"settings": settings}


def pooling_conflict(recs: Iterable[Record]) -> str | None:
    """The first environment key on which ``recs`` disagree, as
    ``"key (a vs b)"``; ``None`` when they may be pooled.  A key that some
    records lack (older schemas, failed cells) is not a conflict."""
    seen: dict[str, Any] = {}
    for r in recs:
        if r.status != "ok":
            continue
        for key, value in environment(r).items():
            if key not in seen:
                seen[key] = value
            elif value != seen[key]:
                return f"{key} ({seen[key]!r} vs {value!r})"
    return None


def host_platform() -> dict[str, Any]:
    """What the orchestrator can tell about the machine, without any framework.

    Raises ValueError for a ``HARNESS_MACHINE`` that is no machine name."""
    return {
        "machine": machines.identity(),
        "python": platform.python_version(),
        "orchestrator_python": sys.executable,
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "cpu_model": machines.cpu_model(),
        "cpu_count": os.cpu_count(),
        "git_revision": _git_revision(),
        "thread_env": {
            k: os.environ.get(k)
            for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
        },
    }


def _git_revision() -> str:
    root = Path(__file__).resolve().parents[2]
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=root,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")
