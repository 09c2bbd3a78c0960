"""Every figure of a run to doubt, from one computation (issue 64).

The header counts these, the Doubts section lists them, the summary leaves
them out of its figures and says how many, and the tables' marks are the
same marks: a reader who counts the rows marked ``busy`` in the cells
table finds the header's number.

Two units, each named in the count:

- a **cell** (model, path, phase, batch size), one row of the cells table:
  ``failed`` (some repeat crashed, timed out, diverged or could not run),
  ``held back`` (the equivalence gate did not let it be timed), ``unverified``
  (timed without the gate's pass), ``above peak`` (faster than the
  machine's matmul peak allows: a missing sync, or a peak measured wrong),
  ``busy`` (a repeat met other processes' load), ``waited`` (not busy,
  but its timing thread waited for a CPU: ``harness.report.analysis.WAITED``)
  and ``idle`` (neither, but a block's process sat idle where another of
  its blocks computed: ``harness.report.analysis.IDLE``);
- a **ratio** (model, framework, phase, batch size), one row of the Keras
  over native table: ``wide`` (its 95% interval's half-width above
  ``harness.stats.paired.WIDE``: too uncertain to compare).

Framework-free.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.core.records import Record
from harness.report.analysis import PooledCell, busy_mark, cells
from harness.stats import paired

# Every kind of doubt, in the order a reader triages them, with its unit.
KINDS: dict[str, str] = {
    "failed": "cell",
    "held back": "cell",
    "unverified": "cell",
    "above peak": "cell",
    "busy": "cell",
    "waited": "cell",
    "idle": "cell",
    "wide": "ratio",
}
# What each kind means, in a reader's words (the Doubts section's legend).
MEANING: dict[str, str] = {
    "failed": "a repeat crashed, timed out, diverged or could not run",
    "held back": "the equivalence gate did not let it be timed",
    "unverified": "timed without the equivalence gate's pass",
    "above peak": (
        "faster than this machine's matmul peak allows: a missing sync, or a "
        "peak measured wrong"
    ),
    "busy": "other processes took CPU time while it was timed",
    "waited": "its timing thread waited for a CPU (a helper thread or a neighbour)",
    "idle": (
        "its process sat idle in some block where it computed in another, "
        "neither computing nor waiting for a CPU (a timer or a hand-off "
        "between its threads)"
    ),
    "wide": (
        f"the 95% interval's half-width is above {paired.WIDE:.0%}: too "
        "uncertain to compare"
    ),
}


@dataclass(frozen=True)
class Doubt:
    """One doubted cell or ratio: its kind (``KINDS``), where (the row it
    marks, in words) and why."""

    kind: str
    where: str
    reason: str

    def text(self) -> str:
        return f"{self.kind}: {self.where} ({self.reason})"


def _where(cell: PooledCell) -> str:
    return f"{cell.model} {cell.path} {cell.phase} b{cell.batch_size}"


def _cell_doubts(cell: PooledCell) -> list[Doubt]:
    where = _where(cell)
    found = []
    failed = [r for r in cell.records if r.status not in ("ok", "not-timed")]
    if failed:
        reasons = sorted({_first_line(r.error) or r.status for r in failed})
        found.append(
            Doubt(
                "failed",
                where,
                f"{len(failed)} of {len(cell.records)} repeats: {'; '.join(reasons)}",
            )
        )
    if cell.records and all(r.status == "not-timed" for r in cell.records):
        verdict = cell.records[-1].equivalence
        found.append(Doubt("held back", where, f"equivalence verdict '{verdict}'"))
    if cell.ok and cell.unverified:
        found.append(
            Doubt("unverified", where, f"equivalence verdict '{cell.equivalence}'")
        )
    peak = cell.peak_fraction() if cell.ok else None
    if peak is not None and peak > 1.0:
        found.append(
            Doubt("above peak", where, f"{peak:.2f} of the machine's matmul peak")
        )
    mark = busy_mark(cell.records)
    if mark:
        kind = (
            "busy" if "contended" in mark else "waited" if "waited" in mark else "idle"
        )
        found.append(Doubt(kind, where, mark))
    return found


def _first_line(text: str | None) -> str | None:
    if not text or not text.strip():
        return None
    return text.strip().splitlines()[0][:200]


def of_run(recs: Sequence[Record], overheads: Iterable[dict[str, Any]]) -> list[Doubt]:
    """Every doubt of a run's records and its overhead rows
    (``harness.report.analysis.overhead_rows``), in ``KINDS`` order."""
    found = [d for cell in cells(recs).values() for d in _cell_doubts(cell)]
    for row in overheads:
        if "wide" not in (row.get("mark") or "").split(", "):
            continue
        found.append(
            Doubt(
                "wide",
                f"{row['model']} {row['phase']} on {row['framework']} "
                f"b{row['batch_size']}",
                f"{row['overhead']:.2f} [{row['overhead_ci_low']:.2f}, "
                f"{row['overhead_ci_high']:.2f}], half-width {row['half_width']}",
            )
        )
    order = list(KINDS)
    return sorted(found, key=lambda d: order.index(d.kind))


def counted(found: Iterable[Doubt]) -> str:
    """How many of each kind, with its unit: ``3 busy cells, 1 wide ratio``;
    ``none`` for none."""
    counts = Counter(d.kind for d in found)
    parts = []
    for kind, unit in KINDS.items():
        n = counts.get(kind, 0)
        if n:
            parts.append(f"{n} {kind} {unit}{'s' if n > 1 else ''}")
    return ", ".join(parts) or "none"


def of_kind(found: Iterable[Doubt], kind: str) -> list[Doubt]:
    return [d for d in found if d.kind == kind]
