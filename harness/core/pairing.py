"""Paired cells: Keras on a backend and the native path of that framework,
timed in one worker process in alternating blocks (``workers.messages.Paired``).

The overhead ratio of a model, phase and batch size on framework X is Keras'
time over native time.  Timed in separate processes minutes apart, machine
noise enters it twice; timed side by side in one process, block after block
in random order, both sides meet the same noise and the ratio of each pair of
blocks cancels most of it (duet benchmarking; the alternation of PyTorch's
dynamo harness).  One pair cell is measured in several fresh processes: the
profile's ``repeats`` at least, then more, one round at a time, until the 95%
CI half-width of the ratio (``harness.stats.paired.estimate``: Hodges-Lehmann of the
blocks' log ratios, hierarchical bootstrap over processes and blocks) is at
most ``ratio_target``, or the cell's processes have taken ``cell_budget_s``
seconds, or ``max_repeats`` processes measured it.  The records of each
process say where the cell stood after it (``summary["ratio"]``,
``ratio_half_width``, ``stopped``: ``target``, ``budget``, ``max_repeats``,
or None while it goes on).

Every pair process writes two ordinary records, one per path, so the per-path
cells of the report stay as they were; their ``values`` hold the blocks
(``block_s``, and ``step_s`` for training), the order (``keras_first``) and
the partner path.  Frameworks without a Keras backend (MXNet) are not paired.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

from harness.core import records
from harness.core.profiles import Profile
from harness.core.resources import usage_summary
from harness.stats.paired import RatioEstimate, estimate
from workers.messages import PairedAnswer
from workers.paths import PATHS


@dataclass(frozen=True)
class PairCell:
    model: str
    framework: str
    phase: str
    batch_size: int
    threads: int | None = None  # a thread sweep's count; None: the profile's

    @property
    def keras(self) -> str:
        return f"keras-{self.framework}"

    @property
    def native(self) -> str:
        return f"native-{self.framework}"

    def name(self) -> str:
        threads = "" if self.threads is None else f" t{self.threads}"
        return (
            f"{self.model} {self.keras}|{self.native} {self.phase} b{self.batch_size}"
            f"{threads}"
        )


def paired_frameworks(profile: Profile, paths: list[str]) -> list[str]:
    """The frameworks whose Keras and native paths are both in ``paths``, in
    their default modes: the overhead ratio compares what users get by
    default (another mode of either is timed on its own)."""
    if not profile.paired:
        return []
    frameworks = dict.fromkeys(PATHS[p].framework for p in paths if p in PATHS)
    return [f for f in frameworks if f"keras-{f}" in paths and f"native-{f}" in paths]


@dataclass
class Standing:
    """What a pair cell's processes have given so far: their block pairs, the
    seconds they took and which repeats they were."""

    processes: list[list[tuple[float, float]]] = field(default_factory=list)
    spent_s: float = 0.0
    repeats: set[int] = field(default_factory=set)

    def add(self, repeat: int, keras_s: list[float], native_s: list[float]) -> None:
        self.processes.append(list(zip(keras_s, native_s, strict=True)))
        self.repeats.add(repeat)

    def estimate(self) -> RatioEstimate | None:
        return estimate(self.processes)


def standings(recs: list[records.Record]) -> dict[PairCell, Standing]:
    """Where every pair cell of ``recs`` (a run being resumed) stands: the
    processes whose two records are both ok."""
    by_process: dict[tuple[PairCell, int], dict[str, records.Record]] = {}
    for r in records.final(recs):
        if r.status == "ok" and isinstance(r.values.get("partner"), str):
            threads = r.settings.get("threads")
            cell = PairCell(
                r.model,
                r.framework,
                r.phase,
                r.batch_size,
                threads if isinstance(threads, int) else None,
            )
            by_process.setdefault((cell, r.repeat), {})[r.api] = r
    out: dict[PairCell, Standing] = {}
    for (cell, repeat), both in sorted(by_process.items(), key=lambda item: item[0][1]):
        if set(both) == {"keras", "native"}:
            standing = out.setdefault(cell, Standing())
            standing.add(
                repeat,
                both["keras"].values["block_s"],
                both["native"].values["block_s"],
            )
            standing.spent_s += float(both["keras"].summary.get("wall_s", 0.0))
    return out


def stop_reason(
    standing: Standing, repeats_done: int, profile: Profile, model: str
) -> tuple[str | None, RatioEstimate | None]:
    """Why the cell stops after ``repeats_done`` processes (``target``,
    ``budget``, ``max_repeats``), or None when it needs another process."""
    settings = profile.settings(model)
    found = standing.estimate()
    if repeats_done < settings.repeats:
        return None, found
    if found is not None and found.half_width <= settings.ratio_target:
        return "target", found
    if repeats_done >= settings.max_repeats:
        return "max_repeats", found
    if standing.spent_s >= settings.cell_budget_s:
        return "budget", found
    return None, found


def sides(answer: PairedAnswer, cell: PairCell) -> dict[str, dict[str, Any]]:
    """The values of each side's record (``keras``, ``native``)."""
    out = {}
    for api, partner in (("keras", cell.native), ("native", cell.keras)):
        blocks = getattr(answer, f"{api}_s")
        values: dict[str, Any] = {
            "block_s": blocks,
            "first_s": getattr(answer, f"{api}_first_s"),
            "keras_first": answer.keras_first,
            "partner": partner,
        }
        usage = getattr(answer, f"{api}_usage")
        if usage is not None:
            values["usage"] = usage  # per block, per step or mini-batch
        if cell.phase == "train":
            values["step_s"] = blocks  # one sample per block
            loss = getattr(answer, f"{api}_final_loss")
            if loss is not None:
                values["final_loss"] = loss
        out[api] = values
    return out


def summary(phase: str, values: dict[str, Any]) -> dict[str, Any]:
    """The figures of one side of a pair process, as ``harness.bench.measure.summarize``
    gives them for a cell of its own."""
    median = statistics.median(values["block_s"])
    usage = usage_summary(values.get("usage"))
    if phase == "train":
        return {"median_step_s": median, "first_step_s": values["first_s"], **usage}
    return {
        "median_batch_s": median,
        "batches_per_s": 1.0 / median,
        "first_round_s": values["first_s"],
        **usage,
    }
