"""Plots of a run's records (``python -m harness report --plots DIR``).

matplotlib is imported only here and only when plotting, with the Agg backend
(files, no display), so the tables never need it.  Three figures, each written
only when the records hold data for it:

- ``overhead.png``: Keras over native time per model and framework, one panel
  per phase, with bootstrap 95% CI error bars; 1.0 means no overhead.
- ``throughput.png``: inference samples per second against batch size, one
  line per path, one panel per model; only when some path was timed at
  several batch sizes.
- ``train_step.png``: median training step time per path per model, with
  bootstrap 95% CI error bars, on a log scale (models differ by orders of
  magnitude).

The numbers come from :mod:`harness.analysis`; this module only lays them out
and draws.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.analysis import (
    Cell,
    CellKey,
    Interval,
    cells,
    overhead_rows,
    throughput,
    train_step_ms,
)
from harness.records import Record


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
) -> None:
    """Bars per group (x) and series (colour): value with (low, high) errors."""
    width = 0.8 / max(len(series), 1)
    for i, (name, points) in enumerate(series.items()):
        xs, ys, lows, highs = [], [], [], []
        for g, group in enumerate(groups):
            if group in points:
                value, low, high = points[group]
                xs.append(g + (i - (len(series) - 1) / 2) * width)
                ys.append(value)
                lows.append(max(value - low, 0.0))
                highs.append(max(high - value, 0.0))
        ax.bar(xs, ys, width, yerr=[lows, highs], capsize=2, label=name)
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
        _grouped_bars(ax, groups, series)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_title(f"{phase}: Keras / native time (95% CI)")
        ax.set_ylabel("overhead (x)")
    return _save(plt, fig, out / "overhead.png")


def _throughput(plt: Any, by_key: dict[CellKey, Cell], out: Path) -> Path | None:
    lines = throughput(by_key)
    if not any(len(p) > 1 for paths in lines.values() for p in paths.values()):
        return None
    models = sorted(lines)
    fig, axes = plt.subplots(
        1, len(models), figsize=(5 * len(models), 4), squeeze=False
    )
    for ax, model in zip(axes[0], models, strict=True):
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


def _train_step(plt: Any, by_key: dict[CellKey, Cell], out: Path) -> Path | None:
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


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
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
    return [p for p in written if p is not None]
