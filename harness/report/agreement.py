"""One answer per cell: what ``harness run`` (the newest run of each
profile: the default's, the modes', ...) and ``harness explain`` measured
for the same model, path, phase, batch size and threads, side by side.

Each command's figure is a median with its 95% CI: a run's pooled cell
(``harness.report.analysis``), an explain cell's Keras ``fit`` level and its
native level (``harness.explain.decompose``).  Figures agree when their
intervals overlap.  Where they do not, the row says what differs between the
measurements that could move the figure: the training steps per timed call
(Keras' ``fit`` pays a fixed cost per call, spread over those steps), the
other paths sharing the worker (a Keras/native pair, explain's four levels,
a path alone), a busy machine.  When none of those differs the row says so:
then one of the commands measured something else, and that is a defect to
chase (docs/methodology.md, "One answer per cell").

Only cells measured at the same thread settings are compared; a figure at
two threads is another quantity, not a disagreement.  Framework-free.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.core import jsonl, records, validated
from harness.core.records import Record
from harness.report import explain_runs as explained
from harness.report.analysis import cells

CellKey = tuple[str, str, str, int, str]  # model, path, phase, batch, threads


@dataclass(frozen=True)
class Estimate:
    """One command's figure for one cell, in seconds."""

    source: str
    key: CellKey
    median: float
    low: float
    high: float
    steps: int | None  # training steps per timed call
    company: str  # what else the worker served
    busy: bool


# The most threads a worker's count may say (more is no setting: a hand edit).
MAX_THREADS = 100_000
# The most training steps per timed call an explain run may say.
MAX_STEPS = 10**9


def _count(value: Any, most: int) -> int | None:
    """``value`` when it is an integer from 1 to ``most``, else None."""
    ok = type(value) is int and 1 <= value <= most
    return value if ok else None


def threads_label(threads: Any) -> str:
    """``1 thread, own CPU, helpers free`` and the like, from a record's
    ``platform["threads"]`` (``helpers`` unrecorded: confined, as every
    worker was before the key); ``?`` where it was not recorded, or is no
    count from 1 to ``MAX_THREADS``."""
    if not isinstance(threads, dict):
        return "?"
    n = _count(threads.get("intra_op"), MAX_THREADS)
    if n is None:
        return "?"
    own = ", own CPU" if threads.get("isolated") is True else ""
    if own and threads.get("helpers") == "free":
        own += ", helpers free"
    return f"{n} thread{'s' if n != 1 else ''}{own}"


def from_run(recs: Iterable[Record], source: str) -> list[Estimate]:
    """A run's cells of the paths in their default mode (not those slowed on
    purpose by ``--inject-slowdown``)."""
    found = []
    for cell in cells(recs).values():
        if "@" in cell.path or cell.summary is None:
            continue
        first = cell.ok[0]
        if first.settings.get("threads") is not None:  # a sweep's count
            continue
        if first.settings.get("slowdown", 1.0) != 1.0:  # --inject-slowdown's
            continue
        partner = first.values.get("partner")
        steps = first.settings.get("steps") if cell.phase == "train" else None
        found.append(
            Estimate(
                source,
                (
                    cell.model,
                    cell.path,
                    cell.phase,
                    cell.batch_size,
                    threads_label(first.platform.get("threads")),
                ),
                cell.summary.median,
                cell.summary.ci_low,
                cell.summary.ci_high,
                _count(steps, MAX_STEPS),
                f"paired with {partner}" if partner else "alone",
                any(bool(r.summary.get("contended")) for r in cell.ok),
            )
        )
    return found


class _Parts(validated.Schema):
    native: explained.Figure | None = None


class _ExplainCell(validated.Schema):
    """What the comparison reads of a cell of an explain run's analysis."""

    model: explained.Name
    phase: explained.Name
    batch: explained.Batch
    paths: Annotated[list[explained.Name], Field(min_length=2)]
    total: explained.Figure | None = None
    parts: _Parts = Field(default_factory=_Parts)


def from_explain(folder: Path) -> list[Estimate]:
    """An explain run's Keras ``fit`` level and native level of each cell
    (nothing where its files cannot be read: ``harness.report.explain_runs``
    says so once; a cell of another shape is passed over)."""
    cells_ = explained.cells(folder)
    host = explained.host(folder) if cells_ is not None else None
    if cells_ is None or host is None:
        return []
    threads = threads_label(host.get("threads"))
    steps = host.get("train_steps")
    steps = steps if isinstance(steps, dict) else {}
    found = []
    for cell in cells_:
        if not validated.fits(_ExplainCell, cell):
            continue
        total, native = cell.get("total"), cell.get("parts", {}).get("native")
        if total is None or native is None:
            continue
        company = f"with {', '.join(cell['paths'][1:])}"
        for path, figure in ((cell["paths"][0], total), (cell["paths"][-1], native)):
            found.append(
                Estimate(
                    "explain",
                    (cell["model"], path, cell["phase"], cell["batch"], threads),
                    figure["us"] / 1e6,
                    figure["low"] / 1e6,
                    figure["high"] / 1e6,
                    _count(steps.get(cell["model"]), MAX_STEPS)
                    if cell["phase"] == "train"
                    else None,
                    company,
                    bool(cell.get("contended")),
                )
            )
    return found


def gather(results_dir: Path, records_path: Path | None = None) -> list[Estimate]:
    """The figures of the newest run of each profile under ``results_dir``
    (``records_path`` standing for its own profile's) and of each explain
    run there; a file that cannot be read, or whose cells cannot be pooled,
    is passed over silently (the report's own tables warn about its lines)."""
    newest: dict[str, Path] = {}
    for path in sorted(results_dir.glob("run-*.jsonl")):
        profile = _profile_of(path)
        if profile is not None:
            newest[profile] = path
    if records_path is not None and (mine := _profile_of(records_path)):
        newest[mine] = records_path
    found: list[Estimate] = []
    for profile, path in sorted(newest.items()):
        try:
            found += from_run(records.scan(path).records, f"run {profile}")
        except (OSError, ValueError):
            continue
    explained: dict[CellKey, Estimate] = {}  # the newest explain run's
    for folder in sorted(results_dir.glob("explain-*")):
        explained |= {e.key: e for e in from_explain(folder)}
    return found + list(explained.values())


def _profile_of(path: Path) -> str | None:
    """The profile named by the first record of a records file; None for a
    file that is no regular file or too large (``jsonl.open_regular``), or
    whose first line is too long, no JSON or no record."""
    try:
        with jsonl.open_regular(path) as f:
            line = f.readline(jsonl.MAX_LINE_BYTES + 1)
        if len(line) > jsonl.MAX_LINE_BYTES:
            return None
        first = json.loads(line.decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    profile = first.get("profile") if isinstance(first, dict) else None
    return profile if isinstance(profile, str) else None


def rows(estimates: Iterable[Estimate]) -> list[dict[str, Any]]:
    """A row per cell that more than one command measured at the same thread
    settings: each figure, whether the intervals overlap, and if not why."""
    by_key: dict[CellKey, list[Estimate]] = {}
    for e in estimates:
        if e.key[4] != "?":
            by_key.setdefault(e.key, []).append(e)
    out = []
    for key, found in by_key.items():
        if len({e.source for e in found}) < 2:
            continue
        model, path, phase, batch, threads = key
        agree = max(e.low for e in found) <= min(e.high for e in found)
        out.append(
            {
                "model": model,
                "path": path,
                "phase": phase,
                "batch": batch,
                "threads": threads,
                "figures": "; ".join(
                    f"{e.source}: {_ms(e.median)} [{_ms(e.low)}, {_ms(e.high)}]"
                    for e in found
                ),
                "agree": "yes" if agree else "NO",
                "why": None if agree else why(found),
            }
        )
    return out


def why(found: list[Estimate]) -> str:
    """What differs between the measurements of figures that disagree."""
    reasons = []
    steps = {e.steps for e in found if e.steps is not None}
    if len(steps) > 1:
        reasons.append(
            f"steps per timed call differ ({', '.join(map(str, sorted(steps)))}): "
            "Keras' fixed cost per fit call is spread over them"
        )
    if len({e.company for e in found}) > 1:
        reasons.append(
            "the worker served other paths beside it ("
            + "; ".join(f"{e.source}: {e.company}" for e in found)
            + ")"
        )
    busy = [e.source for e in found if e.busy]
    if busy:
        reasons.append(f"busy machine during {', '.join(busy)}")
    return "; ".join(reasons) or (
        "nothing recorded differs: one command measured something else"
    )


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"
