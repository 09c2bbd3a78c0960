"""What a run's records say: cells, their statistics and the Keras/native ratios.

A cell is (model, path, phase, batch size).  Its samples pool every ``ok``
record of the cell, one record per fresh-process repeat: seconds per training
step (each entry of ``values["step_s"]``, one per process under the current
protocol) or seconds per inference mini-batch (the record's median over its
time window), so both phases read the same way.  Records are pooled only when
their environments agree (machine: its name, CPU, cores, memory and
accelerator, not its hostname; code revision, library versions, thread and
numeric settings, requested settings: ``harness.core.records.POOLED_KEYS``); records
that differ are refused with the first difference.  Records of several
machines are grouped by machine first (``harness.core.machines.group``) and shown
side by side (:func:`machine_cell_rows`, :func:`machine_overhead_rows`).

Every number the report prints and the plots draw is computed here, from typed
records (:class:`harness.core.records.Record`): the cell rows (median, spread — IQR,
a bootstrap 95% CI of the median, an ``unstable`` warning when the IQR exceeds
10% of the median —, equivalence verdict, latency percentiles, resource use,
fraction of the machine's matmul peak), the overhead rows (Keras time / native
time per model, framework, phase and batch size, with a bootstrap CI), the
compare rows (see :mod:`harness.stats.robust` for the test and its limits) and the
series of the plots.  A time measured without a passing equivalence verdict
(``run --allow-unverified``, or records from before the gate existed) is marked
``unverified`` in every row it enters.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from harness.core.machines import NAME_VARIABLE
from harness.core.pairing import PairCell, standings
from harness.core.records import Record, final, pooling_conflict
from harness.stats import paired, robust
from harness.stats.paired import is_wide
from workers.paths import PATHS

CellKey = tuple[str, str, str, int]
LATENCIES = ("p50", "p90", "p99")
# A value with the low and high ends of its 95% CI.
Interval = tuple[float, float, float]


def record_samples(record: Record) -> list[float]:
    """Seconds per training step or per inference mini-batch, one per timed
    repeat; empty for a record that did not time anything."""
    if record.status != "ok":
        return []
    values, s = record.values, record.summary
    if record.phase == "train":
        if values.get("step_s"):
            return [float(v) for v in values["step_s"]]
        return [float(s["median_step_s"])] if "median_step_s" in s else []
    # One sample per inference record: the rounds of one process' window are
    # not independent draws, the fresh processes of a cell's repeats are.
    if "median_batch_s" in s:
        return [float(s["median_batch_s"])]
    return [1.0 / float(s["batches_per_s"])] if s.get("batches_per_s") else []


def unverified(record: Record | None) -> bool:
    """A measured time that the equivalence gate did not vouch for."""
    return bool(record and record.status == "ok" and not record.verified)


@dataclass(frozen=True)
class PooledCell:
    """All records of one (model, path, phase, batch size), pooled (the
    planned cell is ``harness.core.cells.Cell``)."""

    model: str
    path: str
    phase: str
    batch_size: int
    records: tuple[Record, ...]

    @property
    def ok(self) -> list[Record]:
        return [r for r in self.records if r.status == "ok"]

    @cached_property
    def samples(self) -> list[float]:
        return [v for r in self.records for v in record_samples(r)]

    @cached_property
    def summary(self) -> robust.Summary | None:
        """Statistics of the pooled samples; None when nothing was timed."""
        return robust.summarize(self.samples) if self.samples else None

    @property
    def unverified(self) -> bool:
        return any(unverified(r) for r in self.records)

    @property
    def status(self) -> str:
        """The common status, or ``ok (k/n: 1 diverged)`` when only k of n
        repeats were timed, saying how the others ended."""
        statuses = [r.status for r in self.records]
        if len(set(statuses)) == 1:
            return statuses[0]
        if self.ok:
            others = Counter(s for s in statuses if s != "ok")
            how = ", ".join(f"{n} {status}" for status, n in sorted(others.items()))
            return f"ok ({len(self.ok)}/{len(statuses)}: {how})"
        return "/".join(dict.fromkeys(statuses))

    @property
    def equivalence(self) -> str:
        return "/".join(dict.fromkeys(r.equivalence for r in self.records))

    def summary_values(self, key: str) -> list[float]:
        """``summary[key]`` (or ``summary["resources"][key]``) of every ok
        record that has it."""
        out = []
        for r in self.ok:
            s = r.summary
            value = s.get(key, (s.get("resources") or {}).get(key))
            if isinstance(value, int | float):
                out.append(float(value))
        return out

    def median_of(self, key: str) -> float | None:
        values = self.summary_values(key)
        return statistics.median(values) if values else None

    def peak_fraction(self) -> float | None:
        """Achieved FLOP/s (``summary["flops"]`` per step or mini-batch over the
        median time) as a fraction of ``platform["matmul_peak_flops"]``."""
        flops = self.median_of("flops")
        peaks = [
            float(r.platform["matmul_peak_flops"])
            for r in self.ok
            if r.platform.get("matmul_peak_flops")
        ]
        if flops is None or not peaks or self.summary is None:
            return None
        if self.summary.median <= 0:
            return None
        return flops / self.summary.median / statistics.median(peaks)


def cells(recs: Iterable[Record]) -> dict[CellKey, PooledCell]:
    """Records grouped by (model, path, phase, batch size), in first-seen order,
    one per repeat (a repeat redone by ``--resume`` counts once: ``final``).

    Raises ValueError when the records of one cell come from different
    environments (``harness.core.records.POOLED_KEYS``): their samples are not
    draws from one population, so no median of them means anything."""
    grouped: dict[CellKey, list[Record]] = {}
    for r in final(recs):
        key = (r.model, r.path, r.phase, r.batch_size)
        grouped.setdefault(key, []).append(r)
    for key, group in grouped.items():
        conflict = pooling_conflict(group)
        if conflict:
            model, path, phase, batch = key
            # One name for two machines: the fix is a name, not another report.
            hint = (
                f"; give different machines different {NAME_VARIABLE} names"
                if conflict.startswith("platform.machine.")
                else ""
            )
            raise ValueError(
                f"refusing to pool the records of {model} {path} {phase} b{batch}: "
                f"their environments differ in {conflict}; report the runs "
                f"separately (or compare them with --compare){hint}"
            )
    return {k: PooledCell(*k, records=tuple(v)) for k, v in grouped.items()}


def _ms(seconds: float | None, digits: int = 3) -> float | None:
    return None if seconds is None else round(seconds * 1e3, digits)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _cell_row(cell: PooledCell) -> dict[str, Any]:
    s = cell.summary
    peak = cell.peak_fraction()
    row: dict[str, Any] = {
        "model": cell.model,
        "path": cell.path,
        "phase": cell.phase,
        "batch_size": cell.batch_size,
        "status": cell.status,
        "runs": len(cell.ok),
        "n": s.n if s else 0,
        "time_ms": _ms(s.median if s else None),
        "iqr_ms": _ms(s.iqr if s else None),
        "ci_low_ms": _ms(s.ci_low if s else None),
        "ci_high_ms": _ms(s.ci_high if s else None),
        "unstable": (
            f"IQR {s.rel_iqr:.0%} of median" if s and robust.unstable(s) else None
        ),
        "first_step_s": (
            _round(cell.median_of("first_step_s"), 3) if cell.phase == "train" else None
        ),
        "batches_per_s": (
            _round(cell.median_of("batches_per_s"), 2)
            if cell.phase == "infer"
            else None
        ),
    }
    for q in LATENCIES:
        row[f"latency_{q}_ms"] = _ms(cell.median_of(f"latency_{q}_s"))
    row["cpu_util"] = _round(cell.median_of("cpu_util"), 2)
    # getrusage per step or mini-batch: the process' CPU in user and kernel
    # mode, and its minor page faults
    row["user_ms"] = _ms(cell.median_of("usage_user_s"))
    row["sys_ms"] = _ms(cell.median_of("usage_sys_s"))
    row["minflt"] = _round(cell.median_of("usage_minflt"), 1)
    for key in ("peak_rss_mb", "peak_gpu_mb"):  # the largest of the repeats
        seen = cell.summary_values(key)
        row[key] = round(max(seen), 1) if seen else None
    row["peak_frac"] = _round(peak, 3)
    row["check"] = "above peak" if peak is not None and peak > 1.0 else None
    row["busy"] = busy_mark(cell.records)
    row["equivalence"] = cell.equivalence
    row["mark"] = "unverified" if cell.unverified else None
    return row


def cell_rows(recs: Iterable[Record]) -> list[dict[str, Any]]:
    """One row per cell: its status, median time and spread, verdict, marks."""
    return [_cell_row(c) for c in cells(recs).values()]


def cpu_per_step(recs: Iterable[Record]) -> dict[CellKey, dict[str, float]]:
    """Per cell with ``getrusage`` figures (``usage_*`` in its summaries):
    the median over its repeats of wall, user and system seconds per step or
    mini-batch, ``wait_s`` (wall less user and system: the time the process
    ran nothing, negative where threads ran side by side), minor page faults
    and voluntary and involuntary context switches per step or mini-batch,
    and ``records``, how many repeats these are of."""
    out: dict[CellKey, dict[str, float]] = {}
    for key, cell in cells(recs).items():
        wall = cell.median_of(
            "median_step_s" if cell.phase == "train" else "median_batch_s"
        )
        user, system = cell.median_of("usage_user_s"), cell.median_of("usage_sys_s")
        if wall is None or user is None or system is None:
            continue
        out[key] = {
            "wall_s": wall,
            "user_s": user,
            "sys_s": system,
            "wait_s": wall - user - system,
            "records": float(len(cell.summary_values("usage_user_s"))),
        }
        for name in ("minflt", "nvcsw", "nivcsw"):
            value = cell.median_of(f"usage_{name}")
            if value is not None:
                out[key][name] = value
    return out


def overhead_rows(
    recs: Iterable[Record], stops: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Per model, framework, phase and batch size: Keras and native medians and
    their ratio with a bootstrap 95% CI; None where either side has no time.
    Frameworks without a Keras backend have no row.  ``stops``: why each
    pair cell (by ``PairCell.name``) got no more processes, as the run's
    plan says when it ended (``harness.core.cells.Closing``); without one a
    cell's last record says, or ``unfinished``."""
    recs = list(recs)
    by_key = cells(recs)
    paired = {
        (c.model, c.framework, c.phase, c.batch_size): found
        for c, standing in standings(recs).items()
        if (found := standing.estimate()) is not None
    }
    keys = sorted(
        {
            (
                m,
                PATHS[p].framework if p in PATHS else c.records[-1].framework,
                ph,
                b,
            )
            for (m, p, ph, b), c in by_key.items()
        },
        key=lambda k: (k[0], k[2], k[1], k[3]),
    )
    rows = []
    for model, framework, phase, batch in keys:
        keras = by_key.get((model, f"keras-{framework}", phase, batch))
        native = by_key.get((model, f"native-{framework}", phase, batch))
        if keras is None and f"keras-{framework}" not in PATHS:
            continue  # no Keras backend for this framework (MXNet): no ratio
        ks = keras.summary if keras else None
        ns = native.summary if native else None
        ratio = low = high = None
        found = paired.get((model, framework, phase, batch))
        if found is not None:
            ratio, low, high = found.ratio, found.low, found.high
        elif keras and native and ks and ns and ns.median > 0:
            ratio = ks.median / ns.median
            low, high = robust.ratio_ci(keras.samples, native.samples)
        records_of = [
            *(keras.records if keras else ()),
            *(native.records if native else ()),
        ]
        wide = (
            ratio is not None
            and low is not None
            and high is not None
            and is_wide(ratio, low, high)
        )
        unverified = bool(
            (keras and keras.unverified) or (native and native.unverified)
        )
        rows.append(
            {
                "model": model,
                "framework": framework,
                "phase": phase,
                "batch_size": batch,
                "keras_ms": _ms(ks.median if ks else None),
                "native_ms": _ms(ns.median if ns else None),
                "overhead": _round(ratio, 3),
                "overhead_ci_low": _round(low, 3),
                "overhead_ci_high": _round(high, 3),
                "half_width": (
                    f"{(high - low) / 2 / ratio:.1%}"
                    if ratio and low is not None and high is not None
                    else None
                ),
                "pairs": (
                    f"{found.processes}x{found.blocks // max(found.processes, 1)}"
                    if found is not None
                    else "unpaired"
                ),
                "stopped": (
                    (stops or {}).get(PairCell(model, framework, phase, batch).name())
                    or _stopped(records_of)
                    if found is not None
                    else None
                ),
                "busy": busy_mark(records_of),
                "keras_equivalence": keras.equivalence if keras else None,
                "native_equivalence": native.equivalence if native else None,
                "mark": ", ".join(
                    m for m, on in (("unverified", unverified), ("wide", wide)) if on
                )
                or None,
            }
        )
    return rows


def _busy(record: Record) -> bool:
    """Measured while other processes took CPU time (``workers.resources``)."""
    return record.status == "ok" and record.summary.get("contended") is True


# A timing thread that waited for a CPU more than this share of its time was
# kept from it (a helper thread of its framework or another process on its
# CPU: docs/methodology.md, "Helper threads").
WAITED = 0.10


def waited(record: Record) -> float | None:
    """The share of ``record``'s time per step or mini-batch its timing
    thread spent ready to run but waiting for a CPU (median of its blocks);
    None where the worker did not say (an older worker, no schedstat)."""
    if record.status != "ok":
        return None
    ready = record.summary.get("usage_ready_s")
    wall = record.summary.get(
        "median_step_s" if record.phase == "train" else "median_batch_s"
    )
    if not isinstance(ready, int | float) or not isinstance(wall, int | float):
        return None
    return float(ready) / float(wall) if wall > 0 else None


# A block in which the worker's process (all its threads) computed for a share
# of its wall time this much below another block of the same process sat idle
# where the other did not: neither computing nor waiting for a CPU.  Issue
# 81: Keras on TensorFlow's blocks that jump (VGG16 inference 90 ms a batch,
# then 170) used the CPU time of the others, at 0.53 to 0.62 of their wall
# time against 1.0, their timing thread hardly waiting for a CPU: a timer or
# a hand-off between its threads (tf.data's), not noise (docs/methodology.md,
# "Idle blocks").  A process idle alike in every block (JAX at batch 1, where
# each call hands off between two threads) is steady, not marked.
IDLE = 0.25
# A process' CPU time from getrusage is exact for the thread that asks and
# up to one scheduler tick behind for each other thread then running on
# another CPU (Linux adds a running thread's time at each tick: 4 ms on the
# hosts measured, HZ 250; 10 ms at the coarsest, HZ 100).  A block's CPU
# share is then known to within TICK_S times the worker's other CPUs over
# the block's wall time: issue 81 measured it (docs/methodology.md, "Idle
# blocks"), up to 3.9 ms of a 20 ms block's CPU time unseen.  The mark
# counts only the difference beyond that: a smoke run's ffn blocks of a few
# milliseconds (native JAX "idle 54%" before) count for nothing, VGG16's
# inference blocks of 90 and 176 ms nearly all they differ by.  On one CPU
# the share is exact (no other thread runs while the timing thread asks).
TICK_S = 0.010


def _cpu_share(wall: object, usage: object, others: int) -> tuple[float, float] | None:
    """CPU seconds over wall seconds of one block (both per step or
    mini-batch), at most 1, and how far off it may be with ``others`` CPUs
    beside the timing thread's (``units``: the block's steps or mini-batches,
    which older workers did not send); None where any is missing or
    malformed."""
    if not isinstance(wall, int | float) or not isinstance(usage, dict) or wall <= 0:
        return None
    used = [usage.get("user_s"), usage.get("sys_s"), usage.get("units")]
    if not all(isinstance(u, int | float) and math.isfinite(u) for u in used):
        return None
    user_s, sys_s, units = (float(u) for u in used)  # type: ignore[arg-type]
    if units < 1:
        return None
    return min((user_s + sys_s) / float(wall), 1.0), TICK_S * others / (
        float(wall) * units
    )


def _other_cpus(record: Record) -> int | None:
    """The CPUs the record's worker process could run threads on besides
    its timing thread's (its ``cpu_affinity``), None where it does not say."""
    cpus = record.platform.get("cpu_affinity")
    if not isinstance(cpus, list) or not cpus:
        return None
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in cpus):
        return None
    return len(set(cpus)) - 1


def idle(record: Record) -> float | None:
    """How much more of one block's wall time than of another's ``record``'s
    process certainly spent computing nothing: the largest block's CPU share
    (CPU seconds over wall seconds, all its threads, at most 1: a block
    whose threads used two CPUs computed throughout, no more) less the
    smallest, each moved by as much as it may be off (``TICK_S``), at least
    0; None without two blocks and their usage (a worker timed alone, an
    older worker)."""
    if record.status != "ok":
        return None
    blocks = record.values.get("block_s")
    usage = record.values.get("usage")
    others = _other_cpus(record)
    if not isinstance(blocks, list) or not isinstance(usage, list) or others is None:
        return None
    if len(blocks) != len(usage):
        return None
    shares = [
        c
        for w, u in zip(blocks, usage, strict=True)
        if (c := _cpu_share(w, u, others)) is not None
    ]
    if len(shares) < 2:
        return None
    return max(0.0, max(s - e for s, e in shares) - min(s + e for s, e in shares))


def busy_mark(recs: Iterable[Record]) -> str | None:
    """``contended`` where a repeat met other processes' load, ``waited N%``
    where a timing thread waited for a CPU more than ``WAITED`` of its time
    (the largest share), ``idle N%`` where a block's process sat idle more
    than ``IDLE`` of its time beyond another block's (the largest), each
    where it holds; None for none."""
    recs = list(recs)
    marks = []
    if any(_busy(r) for r in recs):
        marks.append("contended")
    shares = [w for r in recs if (w := waited(r)) is not None]
    if shares and max(shares) > WAITED:
        marks.append(f"waited {max(shares):.0%}")
    idles = [i for r in recs if (i := idle(r)) is not None]
    if idles and max(idles) > IDLE:
        marks.append(f"idle {max(idles):.0%}")
    return ", ".join(marks) or None


def precision(recs: Iterable[Record]) -> tuple[float, int, int] | None:
    """The median 95% CI half-width of the paired overhead ratios in
    ``recs``, how many there are, and how many of them are ``wide``; None
    without any."""
    found = [s.estimate() for s in standings(list(recs)).values()]
    widths = [e.half_width for e in found if e is not None]
    if not widths:
        return None
    wide = sum(1 for e in found if e is not None and e.wide)
    return statistics.median(widths), len(widths), wide


def _stopped(recs: list[Record]) -> str | None:
    """Why a pair cell's adaptive repeats ended, from its last record that
    says (``harness.core.pairing``)."""
    reasons = [r.summary.get("stopped") for r in recs if r.summary.get("stopped")]
    return str(reasons[-1]) if reasons else "unfinished"


def per_process(cell: PooledCell) -> list[float]:
    """One sample per fresh process: the median of each ok record's samples.
    A paired process' blocks are not independent draws (they share its
    allocator, compiled code and neighbours), so a test that counted them
    as such calls unchanged cells changed (2026-11-24: 6 of 49 unchanged
    cells flagged at p < 0.05, up to 39 blocks from 3 processes a side)."""
    found = (record_samples(r) for r in cell.ok)
    return [statistics.median(samples) for samples in found if samples]


def compare_rows(old: Iterable[Record], new: Iterable[Record]) -> list[dict[str, Any]]:
    """Per cell timed in both record lists: old and new medians of the
    processes' medians (:func:`per_process`), the change, the Mann-Whitney
    p-value and a verdict (``slower``, ``faster``, ``same`` or ``too few
    samples``).

    Raises ValueError when no cell was timed in both."""
    old_cells, new_cells = cells(old), cells(new)
    rows = []
    for key, new_cell in new_cells.items():
        old_cell = old_cells.get(key)
        if old_cell is None:
            continue
        before, after = per_process(old_cell), per_process(new_cell)
        if not before or not after:
            continue
        c = robust.compare(before, after)
        model, path, phase, batch = key
        rows.append(
            {
                "model": model,
                "path": path,
                "phase": phase,
                "batch_size": batch,
                "n_old": c.n_old,
                "n_new": c.n_new,
                "old_ms": _ms(c.old_median),
                "new_ms": _ms(c.new_median),
                "change_pct": round(c.change * 100, 1),
                "p_value": float(f"{c.p_value:.3g}"),
                "verdict": c.verdict,
            }
        )
    if not rows:
        raise ValueError(
            "the two records files share no timed cell (model, path, phase, batch "
            "size); compare runs of the same models, paths and batch sizes"
        )
    return rows


PAIRED_ALPHA = 0.01  # a paired ratio's change is flagged below this p-value
# Below this many processes a side, the bootstrap p-value misses the variation
# between processes and is far too small (harness.stats.paired.compare): no verdict.
PAIRED_MIN_PROCESSES = 3


def compare_pair_rows(
    old: Iterable[Record], new: Iterable[Record]
) -> list[dict[str, Any]]:
    """Per Keras/native pair measured in both record lists: old and new
    overhead ratio, the change of the ratio with its 95% CI, and the p-value
    of a hierarchical bootstrap (``harness.stats.paired.compare``)."""
    old_pairs, new_pairs = standings(list(old)), standings(list(new))
    rows = []
    for cell, new_standing in new_pairs.items():
        old_standing = old_pairs.get(cell)
        if old_standing is None:
            continue
        before, after = old_standing.estimate(), new_standing.estimate()
        if before is None or after is None:
            continue
        c = paired.compare(old_standing.processes, new_standing.processes)
        verdict = "same"
        if min(before.processes, after.processes) < PAIRED_MIN_PROCESSES:
            verdict = "too few processes"
        elif before.wide or after.wide:
            verdict = "wide: no verdict"
        elif c.p < PAIRED_ALPHA:
            verdict = "higher" if c.change > 0 else "lower"
        rows.append(
            {
                "model": cell.model,
                "framework": cell.framework,
                "phase": cell.phase,
                "batch_size": cell.batch_size,
                "old_overhead": round(before.ratio, 3),
                "new_overhead": round(after.ratio, 3),
                "change_pct": round(c.change * 100, 1),
                "change_ci_low_pct": round(c.low * 100, 1),
                "change_ci_high_pct": round(c.high * 100, 1),
                "p_value": float(f"{c.p:.3g}"),
                "verdict": verdict,
            }
        )
    return rows


def machine_cell_rows(
    groups: Mapping[str, Sequence[Record]],
) -> list[dict[str, Any]]:
    """One row per cell any machine timed, in first-seen order: per machine
    (``groups``: records by machine name, the first the reference) the median
    in ms with its bootstrap 95% CI, and each further machine's median over
    the first's (``B/A``); None where a machine has no time for the cell."""
    per = {name: cells(recs) for name, recs in groups.items()}
    names = list(per)
    rows = []
    for key in dict.fromkeys(k for found in per.values() for k in found):
        model, path, phase, batch = key
        row: dict[str, Any] = {
            "model": model,
            "path": path,
            "phase": phase,
            "batch_size": batch,
        }
        reference = _summary(per[names[0]].get(key))
        for name in names:
            s = _summary(per[name].get(key))
            row[f"{name}_ms"] = _ms(s.median if s else None)
            row[f"{name}_ci_low_ms"] = _ms(s.ci_low if s else None)
            row[f"{name}_ci_high_ms"] = _ms(s.ci_high if s else None)
            if name != names[0]:
                row[f"{name}/{names[0]}"] = (
                    round(s.median / reference.median, 3)
                    if s and reference and reference.median > 0
                    else None
                )
        found = [(n, c) for n in names if (c := per[n].get(key)) is not None]
        row["status"] = (
            "; ".join(f"{n}: {c.status}" for n, c in found if c.status != "ok") or None
        )
        row["mark"] = "unverified" if any(c.unverified for _, c in found) else None
        rows.append(row)
    return rows


def _summary(cell: PooledCell | None) -> robust.Summary | None:
    return cell.summary if cell else None


def machine_overhead_rows(
    groups: Mapping[str, Sequence[Record]],
) -> list[dict[str, Any]]:
    """Per model, framework, phase and batch size any machine has a Keras/native
    ratio for: each machine's ratio with its 95% CI (the :func:`overhead_rows`
    of its records alone); None where it has none."""
    per = {
        name: {
            (r["model"], r["framework"], r["phase"], r["batch_size"]): r
            for r in overhead_rows(recs)
        }
        for name, recs in groups.items()
    }
    keys = sorted(
        {k for found in per.values() for k in found},
        key=lambda k: (k[0], k[2], k[1], k[3]),
    )
    rows = []
    for model, framework, phase, batch in keys:
        row: dict[str, Any] = {
            "model": model,
            "framework": framework,
            "phase": phase,
            "batch_size": batch,
        }
        marks: dict[str, None] = {}
        for name, found in per.items():
            r = found.get((model, framework, phase, batch), {})
            for column in ("overhead", "overhead_ci_low", "overhead_ci_high"):
                row[f"{name}_{column}"] = r.get(column)
            seen = (r.get("mark") or "").split(", ")
            marks.update(dict.fromkeys(m for m in seen if m))
        row["mark"] = ", ".join(marks) or None
        if any(row[f"{name}_overhead"] is not None for name in per):
            rows.append(row)
    return rows


def busy_cells(recs: Iterable[Record]) -> int:
    """How many cells have a repeat measured while the machine was busy."""
    return sum(1 for c in cells(recs).values() if any(_busy(r) for r in c.records))


def run_to_run(runs: list[list[Record]]) -> float | None:
    """The median run-to-run variation of the paired overhead ratios over
    ``runs`` of one machine, in time order (``harness.stats.paired.run_to_run``)."""
    ratios = []
    for recs in runs:
        found = {}
        for cell, standing in standings(recs).items():
            estimate = standing.estimate()
            if estimate is not None and not estimate.wide:
                found[
                    f"{cell.model} {cell.framework} {cell.phase} {cell.batch_size}"
                ] = estimate.ratio
        ratios.append(found)
    return paired.run_to_run(ratios)


def throughput(
    by_key: Mapping[CellKey, PooledCell],
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Inference samples per second per model and path, as (batch size,
    samples / s) points in batch-size order; cells without a time are left
    out."""
    lines: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for (model, path, phase, batch), cell in by_key.items():
        if phase == "infer" and cell.summary is not None and cell.summary.median > 0:
            lines.setdefault(model, {}).setdefault(path, []).append(
                (batch, batch / cell.summary.median)
            )
    for paths in lines.values():
        for points in paths.values():
            points.sort()
    return lines


def train_step_ms(
    by_key: Mapping[CellKey, PooledCell],
) -> list[tuple[str, str, int, Interval]]:
    """Per timed training cell, in cell order: (model, path, batch size,
    (median, CI low, CI high) in ms per step)."""
    out = []
    for (model, path, phase, batch), cell in by_key.items():
        s = cell.summary
        if phase == "train" and s is not None:
            out.append(
                (model, path, batch, (s.median * 1e3, s.ci_low * 1e3, s.ci_high * 1e3))
            )
    return out
