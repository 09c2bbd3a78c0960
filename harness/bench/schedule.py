"""Where a run's time goes: ``harness run`` within a budget (issue 81).

A run may be given ``budget_s`` seconds of wall time, the gate's and the
matmul peak's included (``--budget``; the profile's ``budget_s``).  Its
timing is spent in two tiers:

1. **Every cell covered.**  The planned units (``harness.core.cells``:
   repeat 0 of every cell, then repeat 1, ... up to each model's
   ``repeats``), in the plan's order, one worker per path (or pair) and
   repeat; a unit is started only when what it is predicted to cost fits in
   the time left.  These processes are also the calibration: what each
   worker's start and each cell's process took, on this machine
   (:class:`Costs`).
2. **The answer narrowed.**  Then one worker at a time for the Keras/native
   pair cells whose overhead interval is above ``ratio_target``: the
   framework and cells where the next process shrinks the intervals most
   per predicted second.  A cell's next process is expected to shrink its
   95% CI half-width ``h`` after ``n`` processes by ``h (1 - sqrt((n - 1) /
   n))``: the spread between processes dominating, the interval goes as
   ``1 / sqrt(n)`` and the estimator widens it by ``sqrt(n / (n - 1))``
   (``harness.stats.paired.replicates``); a worker serves the
   cells of its framework with the most shrink per second, its start paid
   once, so a wide and cheap cell goes first, and a cell already narrow, or
   so costly that a process buys little, last.  While a cell too uncertain
   to be read (``harness.stats.paired.WIDE``: the answer leaves it out) can
   be given a process, only such cells are: every model in the answer
   before any is refined; but not a cell the processes it may still get
   (``max_repeats``, ``cell_budget_s``, the run's time left) are not
   expected to bring under it.

The run stops when nothing left fits in its budget or every cell has a
reason to stop (``pairing.stop_reason``: ``target``, ``max_repeats``, and
``budget`` for a cell's own ``cell_budget_s``).  Every pair cell's reason is
kept in the plan (:func:`stops`): ``run_budget`` where the run's time could
not buy its next process, ``unstarted`` where it ran out before the cell's
first, ``held_back`` where the gate kept a side from timing, ``failed``
where no process of it gave blocks.

Without a budget the planned units all run, then the narrowing goes on
until every cell stops by its own caps.

Framework-free.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.core import pairing, records
from harness.core.cells import (
    Cell,
    Closing,
    Plan,
    StopReason,
    Unit,
    cell_of,
    unit_seed,
)
from harness.core.profiles import Profile
from harness.stats.paired import WIDE, RatioEstimate

# Why a pair cell got no more processes (the plan's ``Closing.stops``),
# beside ``pairing.stop_reason``'s.
RUN_BUDGET: StopReason = "run_budget"
UNSTARTED: StopReason = "unstarted"
HELD_BACK: StopReason = "held_back"
FAILED: StopReason = "failed"
OWN: dict[str, StopReason] = {
    "target": "target",
    "budget": "budget",
    "max_repeats": "max_repeats",
}


def groups(units: Sequence[Unit]) -> list[list[Unit]]:
    """Consecutive units one worker serves (same paths and repeat), in
    order."""
    out: list[list[Unit]] = []
    for unit in units:
        if out and (out[-1][0].paths, out[-1][0].repeat) == (unit.paths, unit.repeat):
            out[-1].append(unit)
        else:
            out.append([unit])
    return out


@dataclass
class Costs:
    """What this machine has shown a worker's start and a cell's process to
    take: a worker's start (and whatever a unit costs outside its timed
    request) by the paths it serves, each cell's process by its records'
    ``wall_s`` (the worker's time for the request)."""

    start_s: dict[tuple[str, ...], list[float]] = field(default_factory=dict)
    cell_s: dict[Cell, list[float]] = field(default_factory=dict)

    def learn(
        self, group: Sequence[Unit], took_s: float, written: Iterable[records.Record]
    ) -> None:
        """``group`` took ``took_s`` seconds and wrote ``written``: each ok
        record's request time is its cell's (a pair's once, by its Keras
        side); when one worker served the whole group, the rest of
        ``took_s`` is that worker's start."""
        firsts = {u.paths[0] for u in group}  # a pair's time, counted once
        inside = 0.0
        for record in written:
            wall = record.summary.get("wall_s")
            if record.status != "ok" or not isinstance(wall, int | float):
                continue
            cell = cell_of(record)
            if cell.path in firsts:
                self.cell_s.setdefault(cell, []).append(float(wall))
                inside += float(wall)
        if len({(u.paths, u.repeat) for u in group}) == 1:
            self.start_s.setdefault(group[0].paths, []).append(
                max(0.0, took_s - inside)
            )

    def start(self, paths: tuple[str, ...]) -> float:
        """A worker's start for ``paths``: the median seen, else the largest
        of any other's (a guess that errs long), else 0."""
        seen = self.start_s.get(paths)
        if seen:
            return statistics.median(seen)
        others = [statistics.median(s) for s in self.start_s.values() if s]
        return max(others, default=0.0)

    def process(self, unit: Unit) -> float:
        """One process of ``unit``'s cell: the median seen, else the median of
        the cells its paths have measured, else 0."""
        cell = unit.cells()[0]
        seen = self.cell_s.get(cell)
        if seen:
            return statistics.median(seen)
        alike = [
            statistics.median(s)
            for c, s in self.cell_s.items()
            if c.path == cell.path and s
        ]
        return statistics.median(alike) if alike else 0.0

    def fitting(self, group: Sequence[Unit], left_s: float) -> list[Unit]:
        """The units of one worker's ``group``, in order, whose predicted cost
        (the worker's start once, then each process) fits in ``left_s``; a
        unit that does not fit is passed over for a cheaper one after it."""
        spent = self.start(group[0].paths)
        chosen = []
        for unit in group:
            cost = self.process(unit)
            if spent + cost <= left_s:
                chosen.append(unit)
                spent += cost
        return chosen


@dataclass(frozen=True)
class _Want:
    """One pair cell's next process: what it is expected to shrink the
    cell's half-width by, and what it is predicted to cost."""

    shrink: float
    cost_s: float
    last: Unit
    wide: bool  # above ``paired.WIDE`` and within reach of it (:func:`_reach`)
    after: int  # its highest repeat so far, the plan's or (resumed) the records'


def _pair_slots(plan: Plan) -> dict[pairing.PairCell, list[Unit]]:
    """Every pair cell of ``plan`` and its units so far, in order."""
    out: dict[pairing.PairCell, list[Unit]] = {}
    for unit in plan.units:
        if unit.paired:
            out.setdefault(unit.pair_cell(), []).append(unit)
    return out


def _reach(
    found: RatioEstimate, more_allowed: int, cost_s: float, left_s: float
) -> bool:
    """Whether processes the cell may still get (``more_allowed``, and as
    many as ``left_s`` pays for at ``cost_s`` each) are expected to bring
    its half-width under ``paired.WIDE``: ``n'`` processes with ``h
    sqrt((n - 1) / (n' - 1)) <= WIDE`` (module docstring).  A cell out of
    reach is refined only as any read one is, not first."""
    n = max(found.processes, 2)
    needed = 1 + (n - 1) * (found.half_width / WIDE) ** 2 - found.processes
    affordable = more_allowed if cost_s <= 0 else min(more_allowed, left_s / cost_s)
    return needed <= affordable


def _wants(
    plan: Plan,
    profile: Profile,
    recs: list[records.Record],
    costs: Costs,
    left_s: float,
) -> dict[tuple[str, ...], list[_Want]]:
    """The pair cells that want another process, by the paths of their
    worker: none that ``stop_reason`` stops, none whose processes gave no
    blocks (held back or failing), none at ``max_repeats`` attempts."""
    standing = pairing.standings(recs)
    out: dict[tuple[str, ...], list[_Want]] = {}
    for cell, units in _pair_slots(plan).items():
        settings = profile.settings(cell.model)
        have = standing.get(cell)
        # A resumed run's plan lacks the extra processes it had: its records
        # count them.
        attempts = max(len(units), len(have.repeats)) if have else len(units)
        if have is None or not have.repeats or attempts >= settings.max_repeats:
            continue
        reason, found = pairing.stop_reason(
            have, len(have.repeats), profile, cell.model
        )
        if reason is not None or found is None:
            continue
        shrink = found.half_width * (1.0 - _narrower(found.processes))
        last = units[-1]
        cost = costs.process(last)
        spare_s = settings.cell_budget_s - have.spent_s
        more = settings.max_repeats - attempts
        reach = _reach(found, more, cost, min(left_s, spare_s))
        after = max(last.repeat, *have.repeats)
        want = _Want(shrink, cost, last, found.wide and reach, after)
        out.setdefault(last.paths, []).append(want)
    return out


def _narrower(n: int) -> float:
    """What one more process is expected to leave of a half-width after
    ``n`` processes (module docstring); one process' interval has no spread
    between processes in it, so from one on ``1 / sqrt`` alone."""
    return math.sqrt((n - 1) / n) if n > 1 else math.sqrt(n / (n + 1))


def _best_prefix(
    wants: list[_Want], start_s: float, left_s: float
) -> tuple[float, list[_Want]]:
    """Of ``wants`` by shrink per second, the first ones that together
    shrink most per second (the worker's start counted once) and fit in
    ``left_s``: (shrink per second, those)."""
    ranked = sorted(wants, key=lambda w: -w.shrink / max(w.cost_s, 1e-9))
    best: tuple[float, list[_Want]] = (0.0, [])
    shrink, spent = 0.0, start_s
    for i, want in enumerate(ranked):
        if spent + want.cost_s > left_s:
            break
        shrink += want.shrink
        spent += want.cost_s
        score = shrink / max(spent, 1e-9)
        if score > best[0]:
            best = (score, ranked[: i + 1])
    return best


def narrowing(
    plan: Plan, recs: list[records.Record], costs: Costs, left_s: float
) -> list[Unit]:
    """The next worker's units in tier 2 (module docstring), numbered after
    the plan's last unit and sharing one repeat number (one worker serves
    them: a cell's repeats may skip numbers); empty when no pair cell wants
    a process or none fits in ``left_s``."""
    profile = plan.get_profile()
    wanted = _wants(plan, profile, recs, costs, left_s)
    # A wide cell is not read at all (``paired.WIDE``): while one within
    # reach of being read fits, only such cells are refined.
    wide = {
        paths: kept
        for paths, wants in wanted.items()
        if (kept := [w for w in wants if w.wide])
    }
    fits = any(
        costs.start(paths) + w.cost_s <= left_s
        for paths, wants in wide.items()
        for w in wants
    )
    best: tuple[float, list[_Want]] = (0.0, [])
    for paths, wants in (wide if fits else wanted).items():
        found = _best_prefix(wants, costs.start(paths), left_s)
        if found[0] > best[0]:
            best = found
    chosen = best[1]
    if not chosen:
        return []
    repeat = max(w.after for w in chosen) + 1
    chosen.sort(key=lambda w: w.last.index)  # the plan's order of cells
    units = []
    for i, want in enumerate(chosen):
        last = want.last
        units.append(
            last.model_copy(
                update={
                    "index": len(plan.units) + i,
                    "repeat": repeat,
                    "seed": unit_seed(profile.seed, repeat, last.name()),
                }
            )
        )
    return units


def stops(plan: Plan, recs: list[records.Record]) -> dict[str, StopReason]:
    """Why each pair cell of ``plan`` got no more processes, by its name
    (``PairCell.name``): ``pairing.stop_reason``'s reason, else
    ``unstarted``, ``held_back``, ``failed``, or ``run_budget``."""
    profile = plan.get_profile()
    standing = pairing.standings(recs)
    final = records.final(recs)
    seen = {cell_of(r).name() for r in final}
    held = {cell_of(r).name() for r in final if r.status == "not-timed"}
    out: dict[str, StopReason] = {}
    for cell, units in _pair_slots(plan).items():
        have = standing.get(cell)
        if have is None or not have.repeats:
            sides = {c.name() for c in units[0].cells()}
            if not sides & seen:
                out[cell.name()] = UNSTARTED
            else:
                out[cell.name()] = HELD_BACK if sides & held else FAILED
            continue
        reason, _ = pairing.stop_reason(have, len(have.repeats), profile, cell.model)
        if reason is None and len(units) >= profile.settings(cell.model).max_repeats:
            reason = "max_repeats"  # attempts that failed count
        out[cell.name()] = OWN[reason] if reason else RUN_BUDGET
    return out


def closing_line(closing: Closing) -> str:
    """The run's last line: its time against its budget and how many pair
    cells stopped for each reason."""
    counts = Counter(closing.stops.values())
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    line = closing.time_line()
    return f"{line}; pair cells stopped: {reasons}" if reasons else line
