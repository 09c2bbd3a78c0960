"""Execution modes side by side: what each mode of each framework costs per
steady-state step and how long its first step takes (``harness report``,
for a run that timed paths of ``workers.paths.MODE_PATHS``, such as the
``modes`` profile's).

Per model, one row per API, framework and mode: the median seconds per
training step and per inference mini-batch with the bootstrap 95% CI of the
median over the run's fresh processes (``harness.report.analysis.PooledCell``), and the
first step (training) or first round (inference) of each process, alone:
compilation, tracing and allocation, from an empty compile cache in every
process (``workers.launch``).  The fastest verified mode of each API and
framework is marked ``best``, per phase; a mode whose CI overlaps the
best's is marked ``tie``, since its order against the best is not known.

The modes of one framework are timed in separate processes, minutes apart
(unpaired, ``paired = false`` in the profile): their differences are large
(factors, not percents), and a mode's first step would spoil a paired
partner's blocks.  Framework-free, and numbers only: ``harness.report.tables``
renders the rows and ``harness.report.plots.mode_bars`` draws them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.core.records import Record
from harness.report.analysis import PooledCell, cells
from workers.paths import MODE_PATHS, get_path

PHASES = ("train", "infer")
# The summary key of each phase's first step or first round, alone.
FIRST = {"train": "first_step_s", "infer": "first_round_s"}


@dataclass(frozen=True)
class Timing:
    """One phase of one mode: the steady-state median with its 95% CI
    (seconds per step or mini-batch), the first step or round (median and
    largest over the processes, seconds) and whether the gate passed it."""

    median: float
    low: float
    high: float
    first: float | None
    first_max: float | None
    verified: bool
    processes: int


def has_modes(recs: Iterable[Record]) -> bool:
    """Whether the records time any path of ``MODE_PATHS``."""
    return any(r.path in MODE_PATHS for r in recs)


def _mode_key(path: str) -> tuple[str, str, str] | None:
    try:
        info = get_path(path)
    except ValueError:  # a path of an older registry
        return None
    return info.api, info.framework, info.mode


def timings(
    recs: Iterable[Record],
) -> dict[str, dict[tuple[str, str, str], dict[str, Timing]]]:
    """model -> (api, framework, mode) -> phase -> ``Timing``, at the
    model's training batch size (inference at the same size; other sizes of
    a sweep are in the cells table)."""
    by_key = cells(recs)
    train_batch = {
        model: batch for model, _, phase, batch in by_key if phase == "train"
    }
    out: dict[str, dict[tuple[str, str, str], dict[str, Timing]]] = {}
    for (model, path, phase, batch), cell in by_key.items():
        key = _mode_key(path)
        wanted = train_batch.get(model, batch)
        if key is None or batch != wanted or cell.summary is None:
            continue
        out.setdefault(model, {}).setdefault(key, {})[phase] = _timing(cell)
    return out


def _timing(cell: PooledCell) -> Timing:
    s = cell.summary
    assert s is not None
    firsts = cell.summary_values(FIRST[cell.phase])
    return Timing(
        median=s.median,
        low=s.ci_low,
        high=s.ci_high,
        first=cell.median_of(FIRST[cell.phase]),
        first_max=max(firsts) if firsts else None,
        verified=not cell.unverified,
        processes=len(cell.ok),
    )


def ranks(
    modes: dict[tuple[str, str, str], dict[str, Timing]],
) -> dict[tuple[str, str, str, str], str]:
    """(api, framework, mode, phase) -> ``best`` or ``tie`` among the
    verified modes of one API and framework; a lone mode gets no mark."""
    marks: dict[tuple[str, str, str, str], str] = {}
    groups: dict[tuple[str, str, str], list[tuple[str, Timing]]] = {}
    for (api, framework, mode), phases in modes.items():
        for phase, t in phases.items():
            if t.verified:
                groups.setdefault((api, framework, phase), []).append((mode, t))
    for (api, framework, phase), members in groups.items():
        if len(members) < 2:
            continue
        best_mode, best = min(members, key=lambda item: item[1].median)
        marks[api, framework, best_mode, phase] = "best"
        for mode, t in members:
            if mode != best_mode and t.low <= best.high:
                marks[api, framework, mode, phase] = "tie"
    return marks


def rows(recs: Iterable[Record]) -> list[dict[str, Any]]:
    """One row per model, API, framework and mode: both phases' steady-state
    times (ms) with their CI, the first step / round (s, median and the
    largest over the processes) and the marks."""
    out = []
    for model, modes in timings(recs).items():
        marks = ranks(modes)
        for (api, framework, mode), phases in sorted(modes.items()):
            row: dict[str, Any] = {
                "model": model,
                "api": api,
                "framework": framework,
                "mode": mode,
            }
            for phase in PHASES:
                t = phases.get(phase)
                unit = "step" if phase == "train" else "batch"
                mark = marks.get((api, framework, mode, phase))
                row[f"{phase}_ms_per_{unit}"] = (
                    None if t is None else _interval_ms(t, mark)
                )
                row[f"{phase}_first_s"] = None if t is None else _first(t)
            row["verified"] = all(t.verified for t in phases.values())
            out.append(row)
    return out


def _interval_ms(t: Timing, mark: str | None) -> str:
    text = f"{_ms(t.median)} [{_ms(t.low)}, {_ms(t.high)}]"
    if not t.verified:
        text += " UNVERIFIED"
    return f"{text} {mark.upper()}" if mark else text


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:,.0f}"


def _first(t: Timing) -> str | None:
    if t.first is None:
        return None
    if t.first_max is None or t.processes < 2:
        return f"{t.first:.2f}"
    return f"{t.first:.2f} (max {t.first_max:.2f})"
