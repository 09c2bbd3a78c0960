"""Where Keras' cost goes: the measurements of ``harness explain``, taken apart.

One *cell* is a model, a framework and a phase.  Its worker processes each
served the four levels of ``workers.paths.levels_of`` (Keras ``fit`` on
NumPy, ``resident`` tensors, Keras' own ``step`` in a plain loop, the
``native`` path) and timed blocks of all four interleaved, in an order drawn
anew for every block (``workers.messages.Levels``), at every batch size of
the sweep.  So every block holds four times taken side by side, and the
difference of two neighbouring levels within a block cancels what the block
shared (a slow second, a hot core), as the paired ratio does.

The parts of a Keras step, at the cell's own batch size, each the
Hodges-Lehmann estimate of its per-block values with the hierarchical
bootstrap interval of ``harness.stats.paired.location`` (microseconds per step,
or per mini-batch for inference):

- ``input conversion`` = fit - resident (NumPy batches turned into tensors);
- ``fit loop`` = resident - step (``fit``/``predict``'s epoch iterator,
  callbacks, logs, per-call set-up);
- ``layers and optimizer`` = step - native, less the ``extra kernels``
  (Keras' layers, losses and optimizer as Python and framework calls);
- ``extra kernels`` = kernel time of the step level - kernel time of
  native, each block profiled on its own by the framework's profiler
  (``workers.profiling``), the two levels in alternation round by round:
  operators Keras runs that native code does not, or runs slower;
- ``native`` = the native path's time.

A profiler costs time of its own, per operator.  Where it slowed the step
or the native level by more than ``DISTORTED`` (Keras' LSTM on PyTorch:
5x, its backward runs hundreds of small operators per step), their kernel
times do not describe the timed steps: extra kernels are then not taken out
of ``layers and optimizer``, and the report says why.

Estimated separately, the parts need not add up to the measured Keras step
exactly (the HL of a sum is not the sum of HLs): ``closure`` says by how
much they miss it, as a share of the step.

The batch-size sweep fits ``t(b) = a + c * b`` per level (``harness.stats.sweep``):
``a`` the fixed cost per step, ``c`` the cost per sample, and the batch size
from which the fixed cost Keras adds is below 10% of its step.

Framework-free: the input is the JSON lines ``harness.explain.measure`` wrote.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from harness.stats import paired, sweep

LEVELS = ("fit", "resident", "step", "native")  # a Keras backend's cell
PARTS = (
    "native",
    "extra kernels",
    "layers and optimizer",
    "fit loop",
    "input conversion",
)
# Which levels each timed part is the difference of (indices into the
# cell's paths: fit, resident, step, native).
DIFFERENCES = {
    "input conversion": (0, 1),
    "fit loop": (1, 2),
    "layers and optimizer": (2, 3),
}
SHARE = 0.1  # the break-even batch: Keras' added fixed cost below this share
TOP = 5  # operators listed per path
# A level the profiler slows by more than this is not taken apart by kernel
# time: its profiled kernels no longer describe its timed steps.
DISTORTED = 1.5
US = 1e6
_V = TypeVar("_V")


def _interval(found: paired.Location | None) -> dict[str, float] | None:
    if found is None:
        return None
    return {"us": found.value, "low": found.low, "high": found.high}


def _per_block(
    processes: list[list[list[float]]], value: Callable[[list[float]], _V]
) -> list[list[_V]]:
    """``value(row)`` of every block, by process."""
    return [[value(row) for row in blocks] for blocks in processes]


def _difference(a: int, b: int, row: list[float]) -> float:
    """Level ``a``'s time less level ``b``'s in one block, in microseconds."""
    return (row[a] - row[b]) * US


def parts(
    processes: list[list[list[float]]],
    extra_kernels: paired.Location | None = None,
) -> dict[str, Any]:
    """The parts of one cell at one batch size from its blocks
    (``processes[p][i][k]``: seconds of level ``k`` in block ``i`` of process
    ``p``, levels fit, resident, step, native) and, when profiled, the
    kernel time the step level spends beyond native (``extra_kernels``,
    microseconds: ``extra_kernels`` below), which is taken out of
    ``layers and optimizer``; their two independent intervals are combined
    in quadrature around the difference.

    Raises ValueError when a block does not hold four positive times."""
    for blocks in processes:
        for row in blocks:
            if len(row) != 4 or not all(t > 0 for t in row):
                raise ValueError(
                    f"a block must hold four positive times (fit, resident, step, "
                    f"native), got {row!r:.80}"
                )
    found: dict[str, Any] = {}
    for name, (a, b) in DIFFERENCES.items():
        found[name] = _interval(
            paired.location(_per_block(processes, functools.partial(_difference, a, b)))
        )
    found["native"] = _interval(
        paired.location(_per_block(processes, lambda r: r[3] * US))
    )
    if extra_kernels is not None:
        extra = _interval(extra_kernels)
        assert extra is not None
        found["extra kernels"] = extra
        found["layers and optimizer"] = _less(found["layers and optimizer"], extra)
    total = _interval(paired.location(_per_block(processes, lambda r: r[0] * US)))
    gap = _interval(
        paired.location(_per_block(processes, lambda r: (r[0] - r[3]) * US))
    )
    assert total is not None
    assert gap is not None
    summed = sum(found[name]["us"] for name in PARTS if name in found)
    ratio = paired.estimate(_per_block(processes, lambda r: (r[0], r[3])))
    assert ratio is not None
    return {
        "parts": {name: found[name] for name in PARTS if name in found},
        "total": total,
        "gap": gap,
        "sum_of_parts_us": summed,
        "closure": (summed - total["us"]) / total["us"],
        "ratio": {"value": ratio.ratio, "low": ratio.low, "high": ratio.high},
        "processes": ratio.processes,
        "blocks": ratio.blocks,
    }


def _less(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    """``a - b`` for two independent estimates with intervals: each side of
    the interval widened in quadrature."""
    value = a["us"] - b["us"]
    below = math.hypot(a["us"] - a["low"], b["high"] - b["us"])
    above = math.hypot(a["high"] - a["us"], b["us"] - b["low"])
    return {"us": value, "low": value - below, "high": value + above}


def extra_kernels(answer: Mapping[str, Any]) -> paired.Location | None:
    """The kernel time of the ``step`` level beyond the ``native`` level's,
    microseconds per step: the HL estimate of their per-round differences
    (``workers.messages.ProfileAnswer``: the two were profiled in alternation,
    round by round), with its bootstrap interval over rounds."""
    paths = answer["paths"]
    if len(paths) != 4:
        return None
    step, native = 2, 3
    rounds = answer["kernel_s"]
    return paired.location([[(r[step] - r[native]) * US for r in rounds]])


def sweep_fits(
    by_batch: Mapping[int, list[list[list[float]]]], paths: list[str]
) -> dict[str, Any]:
    """Each level's ``t(b) = a + c * b`` (microseconds) and the break-even
    batch of the Keras ``fit`` level against native, from
    ``by_batch[b][p][i][k]`` (as ``parts``); empty with fewer than two
    batch sizes."""
    if len(by_batch) < 2:
        return {}
    fits = {
        path: sweep.fit(
            {
                b: [[row[k] for row in blocks] for blocks in ps]
                for b, ps in by_batch.items()
            }
        )
        for k, path in enumerate(paths)
    }
    found: dict[str, Any] = {"batches": sorted(by_batch)}
    if len(paths) == len(LEVELS):  # a Keras level against native
        breakeven = sweep.breakeven_batch(fits[paths[0]], fits[paths[-1]], SHARE)
        found["breakeven_batch"] = breakeven
        found["breakeven_extrapolated"] = breakeven is not None and breakeven > max(
            by_batch
        )
    found["fits"] = {
        path: {
            "fixed_us": f.fixed_s * US,
            "fixed_low": f.fixed_low * US,
            "fixed_high": f.fixed_high * US,
            "per_sample_us": f.per_sample_s * US,
            "per_sample_low": f.per_sample_low * US,
            "per_sample_high": f.per_sample_high * US,
            "worst_residual": f.worst_residual,
        }
        for path, f in fits.items()
    }
    return found


def profiles(answer: Mapping[str, Any] | None) -> dict[str, Any]:
    """Per path: the kernel share of a profiled step (the median over
    rounds), its kernel and wall time (HL over rounds), its top operators;
    and the operators only the Keras ``fit`` level or only native ran (from
    one ``workers.messages.ProfileAnswer``'s fields)."""
    if answer is None:
        return {}
    shown: dict[str, Any] = {}
    paths = answer["paths"]
    for k, path in enumerate(paths):
        wall = [r[k] for r in answer["wall_s"]]
        kernel = [r[k] for r in answer["kernel_s"]]
        names, seconds = answer["op_names"][k], answer["op_s"][k]
        ops = zip(names, seconds, answer["op_calls"][k], strict=True)
        shown[path] = {
            "wall_us": paired.hodges_lehmann(wall) * US,
            "kernel_us": paired.hodges_lehmann(kernel) * US,
            "kernel_share": statistics.median(
                kn / w for kn, w in zip(kernel, wall, strict=True) if w > 0
            ),
            "top": [[name, s * US, calls] for name, s, calls in list(ops)[:TOP]],
            **({"note": answer["notes"][k]} if answer["notes"][k] else {}),
        }
    shown["profiler"] = answer["profiler"]
    if len(paths) == 4:
        shown["one_sided"] = {
            "keras only": _only(answer, 0, 3),
            "native only": _only(answer, 3, 0),
        }
    return shown


def _only(answer: Mapping[str, Any], side: int, other: int) -> list[list[Any]]:
    """Operators path ``side`` ran and path ``other`` did not, with their
    microseconds per step."""
    theirs = set(answer["op_names"][other])
    return [
        [name, s * US]
        for name, s in zip(answer["op_names"][side], answer["op_s"][side], strict=True)
        if name not in theirs
    ]


def _slowdowns(
    shown: dict[str, Any], paths: list[str], processes: list[list[list[float]]]
) -> list[str]:
    """Record in ``shown`` how much the profiler slowed each level
    (``profiler_slowdown``: profiled wall time over the level's timed HL);
    the step and native levels slowed by more than ``DISTORTED``, whose
    kernel times then say little about the timed steps."""
    distorted = []
    for k, path in enumerate(paths):
        if path not in shown:
            continue
        timed = paired.hodges_lehmann([row[k] for ps in processes for row in ps])
        slowdown = shown[path]["wall_us"] / (timed * US)
        shown[path]["profiler_slowdown"] = slowdown
        if len(paths) == len(LEVELS) and k >= 2 and slowdown > DISTORTED:
            distorted.append(f"{path} {slowdown:.1f}x")
    return distorted


def cells(lines: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every cell of an explain run from its JSON lines (``harness.explain.measure``):
    ``levels`` lines (one per process, phase and batch size) and ``profile``
    lines (one per path and phase)."""
    measured: dict[tuple[str, str, str], dict[int, list[list[list[float]]]]] = {}
    meta: dict[tuple[str, str, str], dict[str, Any]] = {}
    profiled: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    batch_of: dict[tuple[str, str, str], int] = {}
    busy: dict[tuple[str, str, str], list[bool]] = {}
    unverified: set[tuple[str, str, str]] = set()
    for line in lines:
        if line.get("kind") not in ("levels", "profile"):
            continue
        key = (line["model"], line["framework"], line["phase"])
        busy.setdefault(key, []).append(
            bool(line.get("resources", {}).get("contended"))
        )
        if line.get("unverified"):
            unverified.add(key)
        if line["kind"] == "levels":
            answer = line["answer"]
            measured.setdefault(key, {}).setdefault(line["batch"], []).append(
                answer["blocks_s"]
            )
            meta[key] = {"paths": answer["paths"], "batch": line["main_batch"]}
        elif line["kind"] == "profile":
            profiled[key] = line["answer"]
            batch_of[key] = line["main_batch"]
    found = []
    for key in {**measured, **profiled}:
        by_batch = measured.get(key, {})
        answer = profiled.get(key)
        model, framework, phase = key
        if key in meta:
            paths, batch = meta[key]["paths"], meta[key]["batch"]
        else:  # profiled only (MXNet)
            assert answer is not None
            paths, batch = list(answer["paths"]), batch_of[key]
        cell: dict[str, Any] = {
            "model": model,
            "framework": framework,
            "phase": phase,
            "batch": batch,
            "paths": paths,
        }
        cell["profile"] = profiles(answer)
        extra = None if answer is None else extra_kernels(answer)
        if batch in by_batch:
            distorted = _slowdowns(cell["profile"], paths, by_batch[batch])
            if distorted:
                cell["profile"]["distorted"] = distorted
                extra = None  # no kernel figure to take out of the step
            if len(paths) == len(LEVELS):
                cell.update(parts(by_batch[batch], extra))
        cell["sweep"] = sweep_fits(by_batch, paths)
        cell["requests"], cell["contended"] = len(busy[key]), sum(busy[key])
        cell["unverified"] = key in unverified
        found.append(cell)
    return found
