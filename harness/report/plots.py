"""Plots of a run's records (``python -m harness report --plots DIR``).

matplotlib is imported only here and only when plotting, with the Agg backend
(files, no display), so the tables never need it.  Three figures, each written
only when the records hold data for it:

- ``overhead.png``: Keras over native time per model and framework, one panel
  per phase, with bootstrap 95% CI error bars; 1.0 means no overhead.  A
  ``wide`` ratio (CI half-width above 10%) is drawn pale and hatched.
- ``throughput.png``: inference samples per second against batch size, one
  line per path, one panel per model; only when some path was timed at
  several batch sizes.
- ``train_step.png``: median training step time per path per model, with
  bootstrap 95% CI error bars, on a log scale (models differ by orders of
  magnitude).
- ``modes-<model>.png``: where the run timed execution modes
  (``harness.report.modes``), per phase the steady-state time of every mode
  of every API and framework (log scale, 95% CI) beside its first step, the
  best mode of each marked with a star.

:func:`explain_bars` draws one more kind, on demand and from numbers the
caller computed: ``explain-<model>-<framework>.png``, a stacked bar per phase
of where one Keras step's time goes (native work, extra kernels, layers and
optimizer, fit loop, input conversion) against the measured Keras step.

The numbers come from :mod:`harness.report.analysis`; this module only lays them out
and draws.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core import files
from harness.core.records import Record
from harness.report.analysis import (
    CellKey,
    Interval,
    PooledCell,
    cells,
    overhead_rows,
    throughput,
    train_step_ms,
)
from harness.stats import paired


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _label(model: str, batch: int, several: bool) -> str:
    return f"{model}\nbatch {batch}" if several else model


def _grouped_bars(
    ax: Any,
    groups: list[str],
    series: dict[str, dict[str, Interval]],
    faded: set[tuple[str, str]] | None = None,
) -> None:
    """Bars per group (x) and series (colour): value with (low, high) errors;
    the bars of ``faded`` (series, group) pairs pale and hatched."""
    width = 0.8 / max(len(series), 1)
    for i, (name, points) in enumerate(series.items()):
        xs, ys, lows, highs, pale = [], [], [], [], []
        for g, group in enumerate(groups):
            if group in points:
                value, low, high = points[group]
                xs.append(g + (i - (len(series) - 1) / 2) * width)
                ys.append(value)
                lows.append(max(value - low, 0.0))
                highs.append(max(high - value, 0.0))
                pale.append((name, group) in (faded or set()))
        bars = ax.bar(xs, ys, width, yerr=[lows, highs], capsize=2, label=name)
        for bar, dim in zip(bars, pale, strict=True):
            if dim:
                bar.set_alpha(0.35)  # a wide ratio: shown, no finding
                bar.set_hatch("//")
    ax.set_xticks(range(len(groups)), groups)
    ax.legend(fontsize="small")


def _overhead(plt: Any, recs: list[Record], out: Path) -> Path | None:
    rows = [r for r in overhead_rows(recs) if r["overhead"] is not None]
    if not rows:
        return None
    phases = sorted({r["phase"] for r in rows}, reverse=True)  # train, infer
    batches: dict[str, set[int]] = {}
    for r in rows:
        batches.setdefault(r["model"], set()).add(r["batch_size"])
    fig, axes = plt.subplots(
        1, len(phases), figsize=(6 * len(phases), 4.5), squeeze=False
    )
    for ax, phase in zip(axes[0], phases, strict=True):
        series: dict[str, dict[str, Interval]] = {}
        groups: list[str] = []
        faded: set[tuple[str, str]] = set()
        for r in rows:
            if r["phase"] != phase:
                continue
            group = _label(r["model"], r["batch_size"], len(batches[r["model"]]) > 1)
            if group not in groups:
                groups.append(group)
            series.setdefault(r["framework"], {})[group] = (
                r["overhead"],
                r["overhead_ci_low"],
                r["overhead_ci_high"],
            )
            if "wide" in (r["mark"] or "").split(", "):
                faded.add((r["framework"], group))
        _grouped_bars(ax, groups, series, faded)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        title = f"{phase}: Keras / native time (95% CI)"
        if faded:
            title += (
                f"\npale, hatched: wide (CI half-width above {paired.WIDE:.0%}), "
                "no finding"
            )
        ax.set_title(title)
        ax.set_ylabel("overhead (x)")
    return _save(plt, fig, out / "overhead.png")


def _throughput(plt: Any, by_key: dict[CellKey, PooledCell], out: Path) -> Path | None:
    lines = throughput(by_key)
    if not any(len(p) > 1 for paths in lines.values() for p in paths.values()):
        return None
    # Only the models timed at several batch sizes make a line; at most
    # three panels a row, so each stays readable on a page.
    models = sorted(m for m in lines if any(len(p) > 1 for p in lines[m].values()))
    columns = min(3, len(models))
    rows = math.ceil(len(models) / columns)
    fig, axes = plt.subplots(
        rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False
    )
    for ax in axes.flat[len(models) :]:
        ax.set_visible(False)
    for ax, model in zip(axes.flat, models, strict=False):
        for path, points in sorted(lines[model].items()):
            ax.plot(
                [b for b, _ in points], [v for _, v in points], marker="o", label=path
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{model}: inference throughput")
        ax.set_xlabel("batch size")
        ax.set_ylabel("samples / s")
        ax.legend(fontsize="small")
    return _save(plt, fig, out / "throughput.png")


def _train_step(plt: Any, by_key: dict[CellKey, PooledCell], out: Path) -> Path | None:
    series: dict[str, dict[str, Interval]] = {}
    groups: list[str] = []
    batches: dict[str, set[int]] = {}
    for model, _, phase, batch in by_key:
        if phase == "train":
            batches.setdefault(model, set()).add(batch)
    for model, path, batch, interval in train_step_ms(by_key):
        group = _label(model, batch, len(batches[model]) > 1)
        if group not in groups:
            groups.append(group)
        series.setdefault(path, {})[group] = interval
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(max(6.0, 1.8 * len(groups)), 4.5))
    _grouped_bars(ax, groups, dict(sorted(series.items())))
    ax.set_yscale("log")
    ax.set_title("training step time (median, 95% CI)")
    ax.set_ylabel("ms per step")
    return _save(plt, fig, out / "train_step.png")


def _modes(plt: Any, recs: list[Record], out: Path) -> list[Path]:
    from harness.report import modes

    if not modes.has_modes(recs):
        return []
    written = []
    for model, timings in modes.timings(recs).items():
        marks = modes.ranks(timings)
        order = sorted(timings)
        labels = [f"{api}-{framework} {mode}" for api, framework, mode in order]
        fig, axes = plt.subplots(
            2, 2, figsize=(11, 1.2 + 0.32 * len(order) * 2), squeeze=False
        )
        for row, phase in enumerate(modes.PHASES):
            steady, first = axes[row]
            for i, key in enumerate(order):
                t = timings[key].get(phase)
                if t is None:
                    continue
                best = marks.get((*key, phase)) == "best"
                colour = "#c44e52" if best else "#4c72b0"
                steady.barh(
                    i,
                    t.median * 1e3,
                    xerr=[[(t.median - t.low) * 1e3], [(t.high - t.median) * 1e3]],
                    color=colour,
                    capsize=2,
                )
                if t.first is not None:
                    first.barh(i, t.first, color=colour)
            names = [
                label + (" *" if marks.get((*key, phase)) == "best" else "")
                for label, key in zip(labels, order, strict=True)
            ]
            unit = "step" if phase == "train" else "mini-batch"
            for ax, title in (
                (steady, f"{phase}: ms per {unit} (median, 95% CI)"),
                (first, f"{phase}: first {unit} alone, s (compile)"),
            ):
                ax.set_yticks(range(len(order)), names, fontsize="small")
                ax.invert_yaxis()
                ax.set_xscale("log")
                ax.tick_params(axis="x", which="minor", labelbottom=False)
                ax.set_title(title, fontsize="medium")
        fig.suptitle(f"{model}: execution modes (* fastest verified mode)")
        written.append(_save(plt, fig, out / f"modes-{model}.png"))
    return written


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Save ``fig`` as a PNG at ``path``, its name made fit for a file name
    (a record's model may hold any character: ``files.file_name``) and
    written by ``files.replace`` (never through a link planted there); the
    path written."""
    fig.tight_layout()
    path = path.with_name(files.file_name(path.stem) + path.suffix)
    try:
        with files.replace(path) as handle:
            fig.savefig(handle, format="png", dpi=120)
    finally:
        plt.close(fig)
    return path


def write_plots(records: list[Record], out_dir: Path) -> list[Path]:
    """Draw the figures the records hold data for into ``out_dir`` (created if
    needed) and return their paths; raises ImportError without matplotlib."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    by_key = cells(records)
    written = [
        _overhead(plt, records, out_dir),
        _throughput(plt, by_key, out_dir),
        _train_step(plt, by_key, out_dir),
    ]
    return [p for p in written if p is not None] + _modes(plt, records, out_dir)


# Where one Keras step goes, bottom to top, each part with a fixed colour.
EXPLAIN_PARTS: dict[str, str] = {
    "native": "#4c72b0",
    "extra kernels": "#dd8452",
    "layers and optimizer": "#55a868",
    "fit loop": "#c44e52",
    "input conversion": "#8172b3",
}
_PHASE_ORDER = ("train", "infer")


def _number(value: Any, what: str) -> float:
    """``value`` as a float; ValueError unless it is a finite real number."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
    ):
        raise ValueError(f"{what} is not a finite number: {value!r}")
    return float(value)


def _estimate(entry: Any, what: str) -> Interval:
    """A ``{"us", "low", "high"}`` entry as (value, low, high) in microseconds;
    ``low`` and ``high`` default to the value when absent."""
    if not isinstance(entry, Mapping) or "us" not in entry:
        raise ValueError(f"{what} must be a mapping with a 'us' number: {entry!r}")
    value = _number(entry["us"], f"{what} 'us'")
    low = _number(entry.get("low", value), f"{what} 'low'")
    high = _number(entry.get("high", value), f"{what} 'high'")
    return value, low, high


@dataclass(frozen=True)
class _ExplainBar:
    """One checked bar of :func:`explain_bars`: a phase of one path."""

    phase: str
    batch: int
    parts: dict[str, Interval]  # in EXPLAIN_PARTS order, missing ones left out
    total: Interval | None


def _explain_bar(cell: Mapping[str, Any]) -> tuple[str, str, _ExplainBar]:
    """(model, framework, bar) of one cell; ValueError for a malformed cell."""
    try:
        model, framework = str(cell["model"]), str(cell["framework"])
        phase, raw_parts = str(cell["phase"]), cell["parts"]
        batch = _number(cell["batch"], "batch")
    except KeyError as missing:
        raise ValueError(f"an explain cell lacks {missing}: {cell!r}") from None
    if batch < 1 or not batch.is_integer():
        raise ValueError(f"batch of {model} on {framework} is not a whole number >= 1")
    if not isinstance(raw_parts, Mapping):
        raise ValueError(f"'parts' of {model} on {framework} is not a mapping")
    unknown = set(raw_parts) - set(EXPLAIN_PARTS)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}; known: {[*EXPLAIN_PARTS]}")
    where = f"{model} on {framework} ({phase})"
    parts = {
        name: _estimate(raw_parts[name], f"part {name!r} of {where}")
        for name in EXPLAIN_PARTS
        if name in raw_parts
    }
    total = cell.get("total")
    checked = None if total is None else _estimate(total, f"total of {where}")
    return model, framework, _ExplainBar(phase, int(batch), parts, checked)


def _draw_explain(plt: Any, title: str, bars: list[_ExplainBar], path: Path) -> Path:
    """Stacked bars (positive parts up from 0, negative ones hatched down from
    0) with the measured total as a black tick and its CI; saves to ``path``."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(5.5 + 1.3 * len(bars), 5))
    drawn: set[str] = set()
    netted = False  # some bar has a negative part
    for x, bar in enumerate(bars):
        up, down = 0.0, 0.0
        for name, (value, _, _) in bar.parts.items():
            drawn.add(name)
            if value >= 0:
                ax.bar(x, value, 0.6, bottom=up, color=EXPLAIN_PARTS[name])
                up += value
            else:
                ax.bar(
                    x,
                    value,
                    0.6,
                    bottom=down,
                    color=EXPLAIN_PARTS[name],
                    alpha=0.6,
                    hatch="//",
                    edgecolor="black",
                )
                down += value
        if down < 0:
            netted = True
            ax.plot(x, up + down, marker="D", color="white", markeredgecolor="black")
        if bar.total is not None:
            value, low, high = bar.total
            ax.hlines(value, x - 0.4, x + 0.4, color="black", linewidth=2.5)
            ax.errorbar(
                x,
                value,
                yerr=[[max(value - low, 0.0)], [max(high - value, 0.0)]],
                fmt="none",
                ecolor="black",
                capsize=4,
            )
    handles: list[Any] = [
        Patch(color=colour, label=name)
        for name, colour in EXPLAIN_PARTS.items()
        if name in drawn
    ][::-1]  # top of the stack first, as the bars read
    if any(bar.total is not None for bar in bars):
        handles.append(
            Line2D([], [], color="black", lw=2.5, label="measured Keras step (95% CI)")
        )
    if netted:
        ax.axhline(0.0, color="black", linewidth=0.8)
        handles += [
            Patch(
                facecolor="white",
                edgecolor="black",
                hatch="//",
                label="negative part (down from 0)",
            ),
            Line2D(
                [],
                [],
                ls="",
                marker="D",
                color="white",
                markeredgecolor="black",
                label="sum of parts, net",
            ),
        ]
    ax.set_xticks(
        range(len(bars)),
        [b.phase if b.phase != "infer" else "infer\n(per mini-batch)" for b in bars],
    )
    ax.set_xlim(-0.75, len(bars) - 0.25)
    ax.set_ylabel("µs per step (per mini-batch for infer)")
    ax.set_title(title, fontsize="medium")
    ax.legend(
        handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1)
    )
    return _save(plt, fig, path)


def explain_bars(cells: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """Where one Keras step goes, one figure per (model, framework):
    ``explain-<model>-<framework>.png`` in ``out_dir`` (created if needed).

    One stacked bar per phase present (train, then infer, then any other),
    its parts bottom to top in :data:`EXPLAIN_PARTS` order ("native", "extra
    kernels", "layers and optimizer", "fit loop", "input conversion"), in
    microseconds per step (per mini-batch for infer); a missing part is left
    out.  A negative part (e.g. a fit loop that made Keras *faster*) cannot be
    stacked: it is drawn hatched, going down from 0, and a white diamond marks
    the net sum of that bar's parts.  The measured total Keras
    step is a black tick with its 95% CI, to show how close the parts sum to
    it.  Each cell is ``{"model", "framework", "phase", "batch", "parts":
    {name: {"us", "low", "high"}}, "total": {"us", "low", "high"}}``
    (``total`` optional; ``low``/``high`` default to ``us``).

    Returns the written paths; an empty ``cells`` writes nothing.  Every cell
    is checked before anything is drawn: ValueError for a missing key, an
    unknown part, a value that is not a finite number or two cells of one
    model, framework and phase.  ImportError without matplotlib.
    """
    groups: dict[tuple[str, str], list[_ExplainBar]] = {}
    for cell in cells:
        model, framework, bar = _explain_bar(cell)
        bars = groups.setdefault((model, framework), [])
        if any(b.phase == bar.phase for b in bars):
            raise ValueError(f"two cells for {model} on {framework}, {bar.phase}")
        bars.append(bar)
    if not groups:
        return []
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (model, framework), bars in groups.items():
        bars.sort(key=_phase_rank)
        batches = ", ".join(str(b) for b in dict.fromkeys(b.batch for b in bars))
        title = f"{model} on {framework}: where a Keras step goes (batch {batches})"
        path = out_dir / f"explain-{model}-{framework}.png"
        written.append(_draw_explain(plt, title, bars, path))
    return written


def _phase_rank(bar: _ExplainBar) -> tuple[int, str]:
    """Train first, infer second, any other phase after them by name."""
    known = bar.phase in _PHASE_ORDER
    return (_PHASE_ORDER.index(bar.phase) if known else len(_PHASE_ORDER), bar.phase)


# --- operators (``harness ops``) -----------------------------------------------

_BACKEND_COLOURS = {
    "jax": "#4c72b0",
    "tensorflow": "#dd8452",
    "torch": "#55a868",
    "mxnet": "#8172b3",
}


def op_curves(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """``ops-<operator>.png`` per operator: time per call against work per
    call (FLOPs, or elements for memory-bound operators), log-log, one line
    per path (keras.ops solid, the native operator dashed, a colour per
    backend) with 95% intervals, one panel per direction.  Where a line is
    flat the fixed per-call cost dominates; where it climbs with slope 1 the
    work does.  ``rows``: ``harness.ops.report`` rows; only timed ones drawn."""
    plt = _pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    timed = [r for r in rows if r["status"] == "ok"]
    written = []
    for op in sorted({r["op"] for r in timed}):
        mine = [r for r in timed if r["op"] == op]
        directions = [
            d for d in ("forward", "backward") if any(r["direction"] == d for r in mine)
        ]
        fig, axes = plt.subplots(
            1, len(directions), figsize=(6 * len(directions), 4.5), squeeze=False
        )
        for ax, direction in zip(axes[0], directions, strict=True):
            for path in sorted({r["path"] for r in mine}):
                points = sorted(
                    (r["work"], r["call_s"], r["low_s"], r["high_s"])
                    for r in mine
                    if r["path"] == path and r["direction"] == direction
                )
                if not points:
                    continue
                x = [p[0] for p in points]
                y = [p[1] * 1e6 for p in points]
                err = [
                    [max(0.0, (p[1] - p[2]) * 1e6) for p in points],
                    [max(0.0, (p[3] - p[1]) * 1e6) for p in points],
                ]
                keras = path.startswith("keras-")
                ax.errorbar(
                    x,
                    y,
                    yerr=err,
                    marker="o" if keras else "s",
                    markersize=3,
                    linestyle="-" if keras else "--",
                    color=_BACKEND_COLOURS.get(path.split("-")[1], "#333333"),
                    label=path,
                    capsize=2,
                )
            ax.set_xscale("log")
            ax.set_yscale("log")
            unit = "FLOPs" if mine[0]["compute_bound"] else "elements"
            ax.set_xlabel(f"{unit} per call")
            ax.set_ylabel("µs per call (95% CI)")
            ax.set_title(f"{op}, {direction}")
            ax.legend(fontsize=7)
        written.append(_save(plt, fig, out_dir / f"ops-{op}.png"))
    return written
