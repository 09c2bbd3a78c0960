"""The numbered cells of a run: what ``harness plan`` writes, what
``harness run-cell`` runs one of, and what ``harness run`` loops over.

A *unit* is the work of one worker process: one cell (model, path, phase,
batch size and, on a thread sweep, thread count) for one repeat, or one
Keras/native pair cell (``harness.core.pairing``) for one repeat.  Every unit
carries what it needs to run anywhere the project is installed:

- its number in the plan (``index``, what a Slurm array task or a Kubernetes
  Indexed Job pod is given);
- ``seed``, a stable hash of the profile's seed, the repeat and the cell's
  name (CRC-32: the same on every machine and Python, unlike ``hash``), which
  orders a pair process' blocks;
- ``verdict_keys``: the gate's cache key of each of its paths
  (``harness.core.gate.verdict_key``).  ``run-cell`` times a path only when the
  results folder's ``verdicts.json`` holds a passing verdict under that key
  *and* the key computed again where the unit runs is the same one: a node
  whose code or libraries differ from what the gate checked times nothing.

The plan is a JSON file (:class:`Plan`, checked by pydantic when read) with
the whole profile in it, so a node needs the plan and the project, not the
blueprint file.  It is deterministic: the same profile, selection and code
give the same units, which is how ``--resume`` and a cluster run line up with
a local one.  The plan holds each cell's planned ``repeats``; the adaptive
processes of pair cells (more processes until the overhead ratio is known,
``pairing.stop_reason``) are appended as they are needed
(``harness.bench.schedule``), and when the run ends its ``closing`` says
what the run took and why each pair cell stopped.

Framework-free.
"""

from __future__ import annotations

import json
import math
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from harness.core import pairing, records
from harness.core.profiles import Profile
from workers.paths import PHASES, get_path
from zoo import files
from zoo.models import get_spec

PLAN_SCHEMA_VERSION = 1
# The most a plan file may hold: a unit is a few hundred bytes, so a sweep
# of a hundred thousand units stays well below it.
PLAN_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class Cell:
    """What the report pools: a model on a path, in a phase, at a batch size
    (and, on a thread sweep, a thread count), over its repeats."""

    model: str
    path: str
    phase: str
    batch_size: int
    threads: int | None = None

    def name(self) -> str:
        threads = "" if self.threads is None else f" t{self.threads}"
        return f"{self.model} {self.path} {self.phase} b{self.batch_size}{threads}"


def cell_of(record: records.Record) -> Cell:
    """The cell ``record`` measured."""
    threads = record.settings.get("threads")
    return Cell(
        record.model,
        record.path,
        record.phase,
        record.batch_size,
        threads if isinstance(threads, int) else None,
    )


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Unit(_Frozen):
    """One worker process' work: a cell, or a pair cell, for one repeat."""

    index: int = Field(ge=0)
    model: str
    paths: tuple[str, ...] = Field(min_length=1, max_length=2)  # (keras, native)
    phase: Literal[PHASES]  # type: ignore[valid-type]
    batch_size: int = Field(ge=1)
    threads: int | None = Field(None, ge=1)  # None: the profile's [threads]
    repeat: int = Field(ge=0)
    seed: int = Field(ge=0)
    verdict_keys: dict[str, str | None]

    @property
    def paired(self) -> bool:
        return len(self.paths) == 2

    def cells(self) -> list[Cell]:
        return [
            Cell(self.model, p, self.phase, self.batch_size, self.threads)
            for p in self.paths
        ]

    def pair_cell(self) -> pairing.PairCell:
        return pairing.PairCell(
            self.model,
            get_path(self.paths[0]).framework,
            self.phase,
            self.batch_size,
            self.threads,
        )

    def name(self) -> str:
        """``ffn keras-torch|native-torch train b128`` (`` t1`` on a sweep)."""
        threads = "" if self.threads is None else f" t{self.threads}"
        return (
            f"{self.model} {'|'.join(self.paths)} {self.phase} b{self.batch_size}"
            f"{threads}"
        )


# Why a pair cell got no more processes: ``pairing.stop_reason``'s three,
# and ``harness.bench.schedule``'s.
StopReason = Literal[
    "target",
    "budget",
    "max_repeats",
    "run_budget",
    "unstarted",
    "held_back",
    "failed",
]


class Closing(_Frozen):
    """How a run ended: its budget (None: none), the seconds it took from
    its start (the gate's included) to its last process, and why each pair
    cell (by ``PairCell.name``) got no more processes."""

    budget_s: float | None = Field(None, gt=0, allow_inf_nan=False)
    spent_s: float = Field(ge=0, allow_inf_nan=False)
    stops: dict[str, StopReason] = Field(default_factory=dict)

    def time_line(self) -> str:
        """``the run took 11 min 3 s of its 12 min 0 s budget (57 s to
        spare)``, or past it, or with no budget."""
        took = f"the run took {_minutes(self.spent_s)}"
        if self.budget_s is None:
            return f"{took} (no budget)"
        over = self.spent_s - self.budget_s
        said = (
            f"{_minutes(over)} past it" if over > 0 else f"{_minutes(-over)} to spare"
        )
        return f"{took} of its {_minutes(self.budget_s)} budget ({said})"

    def unstarted_line(self) -> str | None:
        """``not timed within the budget: 22 pair cells (tensorflow 11,
        torch 11)``: the pair cells the run's budget ran out before; None
        when there are none."""
        frameworks = Counter(
            name.split()[1].split("|")[0].removeprefix("keras-")
            for name, reason in self.stops.items()
            if reason == "unstarted"
        )
        if not frameworks:
            return None
        count = sum(frameworks.values())
        each = ", ".join(f"{f} {n}" for f, n in sorted(frameworks.items()))
        return (
            f"not timed within the budget: {count} pair cells ({each}); a "
            "larger --budget times them"
        )


def _minutes(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


class Plan(_Frozen):
    """A run's numbered units and everything a unit needs to run."""

    schema_version: Literal[1] = 1  # PLAN_SCHEMA_VERSION
    run_id: str
    profile: dict[str, Any]  # Profile.model_dump(by_alias=True, mode="json")
    profile_digest: str
    models: tuple[str, ...]
    paths: tuple[str, ...]
    phases: tuple[str, ...]
    allow_unverified: bool = False
    slowdown: dict[str, float] = Field(default_factory=dict)
    units: tuple[Unit, ...]
    closing: Closing | None = None  # written when the run ends

    @field_validator("run_id")
    @classmethod
    def _plain(cls, run_id: str) -> str:
        """One plain name: the run's records file is named after it."""
        return files.plain(run_id, "the run's id")

    @field_validator("slowdown")
    @classmethod
    def _factors(cls, slowdown: dict[str, float]) -> dict[str, float]:
        """Finite factors of at least 1 (what a timing worker accepts)."""
        for path, factor in slowdown.items():
            if not (math.isfinite(factor) and factor >= 1.0):
                raise ValueError(f"slowdown of {path[:80]!r} is {factor}, not >= 1")
        return slowdown

    def get_profile(self) -> Profile:
        return Profile.model_validate(self.profile, strict=False)


def unit_seed(profile_seed: int, repeat: int, name: str) -> int:
    """The stable seed of one unit (what orders a pair process' blocks)."""
    return zlib.crc32(f"{profile_seed} {repeat} {name}".encode())


def thread_counts(profile: Profile, cores: int | None = None) -> list[int | None]:
    """The thread axis: ``[None]`` (the profile's ``[threads]``) unless the
    profile sweeps; ``"sweep"`` is 1, 2, 4, ... and every core."""
    if profile.thread_counts is None:
        return [None]
    if profile.thread_counts != "sweep":
        return list(profile.thread_counts)
    cores = cores or len(os.sched_getaffinity(0))
    counts = []
    n = 1
    while n < cores:
        counts.append(n)
        n *= 2
    return [*counts, cores]


def _cells(
    profile: Profile, models: Sequence[str], paths: Sequence[str], phases: Sequence[str]
) -> list[tuple[str, str, int]]:
    """(model, phase, batch size) in run order; inference sweeps batch sizes."""
    out = []
    for model in models:
        settings = profile.settings(model)
        batch = settings.batch_size or get_spec(model).workload.batch_size
        for phase in phases:
            sizes = settings.infer_batch_sizes or (batch,)
            if phase == "train":
                sizes = (batch,)
            out += [(model, phase, b) for b in sizes]
    return out


def make_units(
    profile: Profile,
    models: Sequence[str],
    paths: Sequence[str],
    phases: Sequence[str],
    keys: dict[str, dict[str, str]],
) -> list[Unit]:
    """The planned units: round by round (repeat 0 of everything, then 1...),
    in each the cells measured alone with the path order rotated by the
    repeat (so drift on a shared machine spreads over all paths), then the
    pair cells, grouped by framework in an order rotated the same way.
    Grouped, one worker per path (or pair) and repeat serves all of its
    cells, every model's, unless the profile wants a fresh one per cell.
    ``keys``: the gate's verdict keys by model and path."""
    frameworks = pairing.paired_frameworks(profile, list(paths))
    paired = {p for f in frameworks for p in (f"keras-{f}", f"native-{f}")}
    units: list[Unit] = []
    for repeat in range(max(profile.settings(m).repeats for m in models)):
        shift = repeat % len(paths)
        order = [*paths[shift:], *paths[:shift]]
        turn = repeat % max(len(frameworks), 1)
        framework_order = [*frameworks[turn:], *frameworks[:turn]]
        singles, pairs = [], []
        for threads in thread_counts(profile):
            for model, phase, batch in _cells(profile, models, paths, phases):
                if repeat >= profile.settings(model).repeats:
                    continue
                for path in paths:
                    cell = (model, phase, batch, threads)
                    if path not in paired:
                        singles.append((order.index(path), (path,), cell))
                    elif path.startswith("keras-"):
                        framework = path.removeprefix("keras-")
                        place = framework_order.index(framework)
                        pairs.append((place, (path, f"native-{framework}"), cell))
        singles.sort(key=lambda s: s[0])  # stable: grouped by path, in order
        pairs.sort(key=lambda s: s[0])  # stable: grouped by framework
        for _, unit_paths, cell in singles + pairs:
            units.append(
                _unit(
                    len(units), profile.seed, unit_paths, cell, repeat=repeat, keys=keys
                )
            )
    return units


def _unit(
    index: int,
    profile_seed: int,
    paths: tuple[str, ...],
    cell: tuple[str, str, int, int | None],
    *,
    repeat: int,
    keys: dict[str, dict[str, str]],
) -> Unit:
    """Unit ``index``: ``cell`` (model, phase, batch size, threads) on
    ``paths`` for ``repeat``, seeded and keyed."""
    model, phase, batch, threads = cell
    found = keys.get(model, {})
    draft = Unit(
        index=index,
        model=model,
        paths=paths,
        phase=phase,
        batch_size=batch,
        threads=threads,
        repeat=repeat,
        seed=0,
        verdict_keys={p: found.get(p) for p in paths},
    )
    return draft.model_copy(
        update={"seed": unit_seed(profile_seed, repeat, draft.name())}
    )


def new_plan(
    run_id: str,
    profile: Profile,
    *,
    models: Sequence[str],
    paths: Sequence[str],
    phases: Sequence[str],
    keys: dict[str, dict[str, str]],
    allow_unverified: bool = False,
    slowdown: dict[str, float] | None = None,
) -> Plan:
    return Plan(
        run_id=run_id,
        profile=profile.model_dump(by_alias=True, mode="json", warnings=False),
        profile_digest=profile.digest(),
        models=tuple(models),
        paths=tuple(paths),
        phases=tuple(phases),
        allow_unverified=allow_unverified,
        slowdown=dict(slowdown or {}),
        units=tuple(make_units(profile, models, paths, phases, keys)),
    )


def write_plan(plan: Plan, out: Path) -> None:
    """Write ``plan`` whole or not at all (``zoo.files.write_text``)."""
    files.folder(out.parent, follow=True)
    files.write_text(out, plan.model_dump_json(indent=1) + "\n")


def read_plan(path: Path, *, follow: bool = False) -> Plan:
    """The plan in ``path``; ValueError, in one sentence, for anything else
    (no regular file, more than ``PLAN_BYTES``, a link unless ``follow``:
    the plan the user named on the command line: ``zoo.files``)."""
    try:
        text = files.read_bytes(path, PLAN_BYTES, follow=follow)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no plan file {path}; write one with 'python -m harness plan'"
        ) from None
    except files.Refused as exc:
        raise ValueError(f"{exc}; write a plan with 'python -m harness plan'") from None
    except OSError as exc:
        raise ValueError(f"cannot read plan {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise ValueError(
            f"{path} is not a plan: it is not JSON; write one with "
            "'python -m harness plan'"
        ) from None
    if isinstance(data, dict) and data.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise ValueError(
            f"{path} is a plan of schema version {data.get('schema_version')!r}; "
            f"this code reads version {PLAN_SCHEMA_VERSION}"
        )
    try:
        plan = Plan.model_validate_json(text)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise ValueError(
            f"{path} is not a plan this code reads ({where}: {error['msg']})"
        ) from None
    misplaced = next((i for i, u in enumerate(plan.units) if u.index != i), None)
    if misplaced is not None:
        raise ValueError(
            f"{path}: unit {misplaced} is numbered {plan.units[misplaced].index}; "
            "units are numbered 0, 1, 2... in order (plan the run again)"
        )
    try:
        profile = plan.get_profile()
    except ValidationError:
        raise ValueError(f"{path} holds a profile this code does not accept") from None
    if profile.digest() != plan.profile_digest:
        raise ValueError(
            f"{path}: its profile no longer has the digest it was planned with "
            "(edited by hand?); plan the run again"
        )
    return plan


PLAN_SUFFIX = ".cells.json"


def plan_file(results_dir: Path, run_id: str) -> Path:
    """Where ``harness run`` keeps a run's plan, beside its records."""
    return results_dir / f"run-{run_id}{PLAN_SUFFIX}"


def closing_of(records_path: Path) -> Closing | None:
    """How the run whose records are ``records_path`` ended (its plan's
    ``closing``, the plan beside the records); None when it has none (the
    run was interrupted, or is older than the key) or its plan is missing
    or unreadable."""
    run_id = records_path.stem.removeprefix("run-")
    try:
        return read_plan(plan_file(records_path.parent, run_id)).closing
    except (OSError, ValueError):
        return None


def _identity(record: records.Record) -> tuple[Any, ...]:
    """What two runs of one plan must agree on for a cell repeat: which cell
    and repeat, its outcome and verdict, and what was asked of the worker."""
    return (
        cell_of(record).name(),
        record.repeat,
        record.status,
        record.equivalence,
        record.verified,
        json.dumps(record.settings, sort_keys=True),
    )


def same_cells(a: Iterable[records.Record], b: Iterable[records.Record]) -> list[str]:
    """How two runs' records differ in their cells (not in their times):
    one line per cell repeat that only one of them has, or that they
    settled differently; empty when they ran the same cells alike."""
    left = {_identity(r)[:2]: _identity(r) for r in records.final(a)}
    right = {_identity(r)[:2]: _identity(r) for r in records.final(b)}
    lines = []
    for key in sorted(left.keys() | right.keys()):
        name = f"{key[0]} repeat {key[1] + 1}"
        if key not in right:
            lines.append(f"{name}: only in the first")
        elif key not in left:
            lines.append(f"{name}: only in the second")
        elif left[key] != right[key]:
            lines.append(f"{name}: {left[key][2:]} vs {right[key][2:]}")
    return lines
