"""Plots of a run's records (``python -m harness report --plots DIR``).

matplotlib is imported only here and only when plotting, with the Agg backend
(files, no display), so the tables never need it.  The figures, each written
only when the records hold a time for it:

- ``overhead.png``: Keras over native time per model and framework, one panel
  per phase, with bootstrap 95% CI error bars, on a logarithmic ratio axis
  labelled in plain factors (``0.5x``, ``1x``, ``2x``, ``10x``, ``30x``), each
  bar going up or down from the dashed 1x line (no overhead), so one 30x bar
  does not flatten the 1.1x ones.  A ``wide`` ratio (CI half-width above
  10%) is drawn pale and hatched.
- ``throughput.png``: inference samples per second against batch size, one
  line per path, one panel per model; only when some path was timed at
  several batch sizes.
- ``train_step.png``: median training step time per path per model, with
  bootstrap 95% CI error bars, on a log scale (models differ by orders of
  magnitude).
- ``modes-<model>.png``: where the run timed execution modes
  (``harness.report.modes``), per phase the steady-state time of every mode
  of every API and framework (log scale, 95% CI) beside its first step, the
  best mode of each marked with a star and a black edge.

Colours, the same in every figure: one hue per framework, in the order of
``workers.paths.PATHS`` (:func:`framework_colour`); Keras a dark shade of it,
native a light one (:func:`path_colour`), so the two paths of a framework
read as a pair; a mode other than the path's default is hatched (bars) or
dashed (lines), in ``workers.paths.MODES`` order.  The overhead figure, one
bar per framework, takes the framework's own colour.

A cell that has no time is not left out: where its bar would be stands an
``x`` with a short label, and the panel's title names it, saying why, from
its records' statuses (``harness.core.records.STATUSES``): ``held back``
(``not-timed``: the equivalence gate held it back), ``failed`` (``error``,
``crashed``, ``timeout``, ``diverged`` or a status this harness does not
know), ``unavailable`` (its framework is not installed here), else ``no
ratio`` (``no time`` for a path: nothing of it recorded, or no ratio
computable).  The throughput figure, of lines, names them in its titles.

:func:`explain_bars` draws one more kind, on demand and from numbers the
caller computed: ``explain-<model>-<framework>.png``, a stacked bar per phase
of where one Keras step's time goes (native work, extra kernels, layers and
optimizer, fit loop, input conversion) against the measured Keras step.

The numbers come from :mod:`harness.report.analysis`; this module only lays them out
and draws.
"""

from __future__ import annotations

import colorsys
import contextlib
import functools
import math
import numbers
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from workers.paths import MODES, PATHS, get_path
from zoo import files

RGB = tuple[float, float, float]
# Base colours, one per framework in the order of ``PATHS``; a framework past
# them, or one this registry does not know (an old record's), is grey.
_PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#8172b3", "#c44e52", "#937860")
_UNKNOWN = "#8c8c8c"
# Keras' shade darkens the framework's colour and native's lightens it, in
# lightness alone: the hue stays, so the pair reads as one framework.
_KERAS_LIGHTNESS, _NATIVE_LIGHTENING = 0.7, 0.45
# A path's mode, by its place in MODES (the default, first, plain).
# (No "x" hatch: an x marks a cell without a time; "//" marks a wide ratio.)
_MODE_HATCHES = ("", "..", "oo", "--")
_MODE_LINES = ("-", "--", ":", "-.")
_SHADES = "dark: Keras, light: native"
# Record statuses (``harness.core.records.STATUSES``) that say why a cell
# has no time without its having failed.
_HELD_BACK, _UNAVAILABLE = "not-timed", "unavailable"


@contextlib.contextmanager
def _pyplot() -> Iterator[Any]:
    """Matplotlib's pyplot (Agg) with its ``$...$`` math off while the body
    draws: a record's name is text, and one holding ``$\\frac$`` must not
    end the drawing in a math parser's error."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False}):
        yield plt


def _drawn(what: str, draw: Callable[[], Path | None]) -> Path | None:
    """``draw()``'s file; None when drawing or writing it fails (a record
    Matplotlib cannot lay out, a name refused as a file name, a full disk),
    which is named on stderr in one line, the other plots still drawn."""
    try:
        return draw()
    except (ValueError, OSError) as exc:
        said = " ".join(str(exc).split())[:300] or type(exc).__name__
        print(
            f"warning: {what} is not drawn ({said}); the other plots are written",
            file=sys.stderr,
        )
        return None


def _frameworks() -> list[str]:
    return list(dict.fromkeys(p.framework for p in PATHS.values()))


def framework_colour(framework: str) -> RGB:
    """The framework's colour (RGB, 0 to 1): one of a fixed palette by its
    place in ``workers.paths.PATHS``; grey for one it does not name."""
    known = _frameworks()
    place = known.index(framework) if framework in known else len(_PALETTE)
    code = _PALETTE[place] if place < len(_PALETTE) else _UNKNOWN
    red, green, blue = (int(code[i : i + 2], 16) / 255 for i in (1, 3, 5))
    return red, green, blue


def path_colour(api: str, framework: str) -> RGB:
    """The colour of ``api`` (``keras`` or ``native``) on ``framework``: the
    framework's hue, dark for Keras and light for native."""
    hue, lightness, saturation = colorsys.rgb_to_hls(*framework_colour(framework))
    if api == "keras":
        lightness *= _KERAS_LIGHTNESS
    else:
        lightness += (1.0 - lightness) * _NATIVE_LIGHTENING
    return colorsys.hls_to_rgb(hue, lightness, saturation)


@dataclass(frozen=True)
class _Look:
    """How one series is drawn: its colour, and its mode's hatch (bars) and
    line style (lines)."""

    colour: RGB
    mode_rank: int = 0  # the mode's place in MODES, 0 for the default
    keras: bool = False

    @property
    def hatch(self) -> str:
        return _MODE_HATCHES[min(self.mode_rank, len(_MODE_HATCHES) - 1)]

    @property
    def line(self) -> str:
        return _MODE_LINES[min(self.mode_rank, len(_MODE_LINES) - 1)]


def _mode_look(api: str, framework: str, mode: str) -> _Look:
    modes = MODES.get((api, framework), ())
    rank = modes.index(mode) if mode in modes else 0
    return _Look(path_colour(api, framework), rank, api == "keras")


def _look(path: str) -> _Look:
    try:
        info = get_path(path)
    except ValueError:  # a path of an older registry
        return _Look(framework_colour(""))
    return _mode_look(info.api, info.framework, info.mode)


def _mode_rank(api: str, framework: str, mode: str) -> tuple[int, int, int, str]:
    """Framework pairs together, in registry order: Keras, then native, each
    default mode first."""
    known = _frameworks()
    place = known.index(framework) if framework in known else len(known)
    modes = MODES.get((api, framework), ())
    return place, api != "keras", modes.index(mode) if mode in modes else 0, mode


def _path_rank(path: str) -> tuple[tuple[int, int, int, str], str]:
    try:
        info = get_path(path)
    except ValueError:  # a path of an older registry: last
        return (len(_frameworks()), 0, 0, ""), path
    return _mode_rank(info.api, info.framework, info.mode), path


def _why_untimed(group: Iterable[PooledCell | None], nothing: str) -> str:
    """Why the cells of ``group`` (None: a cell never run) have no time, in
    a few words read from their records' statuses: ``held back``,
    ``failed``, ``unavailable``, else ``nothing``."""
    statuses = {r.status for cell in group if cell is not None for r in cell.records}
    if _HELD_BACK in statuses:
        return "held back"
    if statuses - {"ok", _HELD_BACK, _UNAVAILABLE}:
        return "failed"
    if _UNAVAILABLE in statuses:
        return "unavailable"
    return nothing


def _label(model: str, batch: int, several: bool) -> str:
    return f"{model}\nbatch {batch}" if several else model


def _title(head: str, notes: Sequence[str], inches: float = 6.0) -> str:
    """``head`` with ``notes`` (cells drawn without a time) under it,
    wrapped to a panel ``inches`` wide."""
    if not notes:
        return head
    text = "no time: " + "; ".join(notes)
    return head + "\n" + textwrap.fill(text, int(inches * 10))


def _mark(
    ax: Any,
    xy: tuple[float, float],
    label: str,
    colour: RGB,
    transform: Any,
    *,
    upright: bool = True,
) -> None:
    """An ``x`` in ``colour`` at ``xy`` (in ``transform``'s coordinates)
    where a cell with no time would have its bar, ``label`` going up from it
    (``upright``) or right of it."""
    from matplotlib.lines import Line2D

    line = Line2D(
        [xy[0]],
        [xy[1]],
        marker="x",
        markersize=7,
        markeredgewidth=2,
        linestyle="",
        color=colour,
        transform=transform,
        clip_on=False,
    )
    if upright:
        ax.add_line(line)  # its x (a bar's place) is data: keep it in view
    else:
        # at a fixed place in the axes, so no data: a panel with nothing
        # else drawn keeps an empty log axis, as matplotlib lays one out
        ax.add_artist(line)
    ax.annotate(
        label,
        xy=xy,
        xycoords=transform,
        xytext=(0, 7) if upright else (8, 0),
        textcoords="offset points",
        rotation=90 if upright else 0,
        ha="center" if upright else "left",
        va="bottom" if upright else "center",
        fontsize="x-small",
        color="dimgrey",
    )


def _slot(group: int, series: int, count: int) -> float:
    """The x of a bar: its group's place, shifted to its series' slot."""
    return group + (series - (count - 1) / 2) * 0.8 / max(count, 1)


def _grouped_bars(
    ax: Any,
    groups: list[str],
    series: dict[str, dict[str, Interval]],
    faded: set[tuple[str, str]] | None = None,
    *,
    looks: Mapping[str, _Look] | None = None,
    base: float = 0.0,
    missing: Mapping[tuple[str, str], str] | None = None,
    legend: str | None = None,
    outside: bool = False,
) -> None:
    """Bars per group (x) and series, in ``series`` order: value with (low,
    high) errors, rising (or falling) from ``base``, in the series' look
    (``looks``; matplotlib's colour cycle for one not there); the bars of
    ``faded`` (series, group) pairs pale and hatched; for each ``missing``
    (series, group) an ``x`` and its label where the bar would be: on the
    ``base`` line when it is above 0, at the foot of the axes otherwise.
    ``legend``: the legend's title; ``outside``: the legend right of the
    axes, not over the bars."""
    from matplotlib.patches import Patch

    looks = looks or {}
    handles: list[Any] = []
    for i, (name, points) in enumerate(series.items()):
        look = looks.get(name)
        xs, ys, lows, highs, pale = [], [], [], [], []
        for g, group in enumerate(groups):
            if group in points:
                value, low, high = points[group]
                xs.append(_slot(g, i, len(series)))
                ys.append(value - base)
                lows.append(max(value - low, 0.0))
                highs.append(max(high - value, 0.0))
                pale.append((name, group) in (faded or set()))
        style = {} if look is None else {"color": look.colour, "hatch": look.hatch}
        bars = ax.bar(
            xs,
            ys,
            0.8 / max(len(series), 1),
            bottom=base,
            yerr=[lows, highs],
            capsize=2,
            label=name,
            **style,
        )
        for bar, dim in zip(bars, pale, strict=True):
            if dim:
                bar.set_alpha(0.35)  # a wide ratio: shown, no finding
                bar.set_hatch("//")
        # a series may have no bar (every cell held back): its look, not
        # whatever an empty container would show
        handles.append(
            bars
            if look is None
            else Patch(facecolor=look.colour, hatch=look.hatch, label=name)
        )
        for g, group in enumerate(groups):
            why = (missing or {}).get((name, group))
            if why is None:
                continue
            colour = look.colour if look else framework_colour("")
            x = _slot(g, i, len(series))
            if base > 0:
                _mark(ax, (x, base), why, colour, ax.transData)
            else:
                _mark(ax, (x, 0.02), why, colour, ax.get_xaxis_transform())
    ax.set_xticks(range(len(groups)), groups)
    place = {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if outside else {}
    ax.legend(
        handles=handles,
        fontsize="small",
        title=legend,
        title_fontsize="small",
        **place,
    )


def _ratio_axis(ax: Any, ends: list[float]) -> None:
    """A logarithmic ratio axis over ``ends`` (the CI ends drawn) and 1:
    ticks as plain factors (0.5x, 1x, 2x, 3x, 5x, 10x...), the 1x line
    dashed."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    ax.set_yscale("log")
    positive = [e for e in ends if e > 0]
    low, high = min([1.0, *positive]), max([1.0, *positive])
    ax.set_ylim(min(low / 1.5, 0.5), max(high * 1.5, 2.0))
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")


def _overhead(
    plt: Any, recs: list[Record], by_key: Mapping[CellKey, PooledCell], out: Path
) -> Path | None:
    rows = overhead_rows(recs)
    if not any(r["overhead"] is not None for r in rows):
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
        missing: dict[tuple[str, str], str] = {}
        notes: list[str] = []
        for r in rows:
            if r["phase"] != phase:
                continue
            model, framework, batch = r["model"], r["framework"], r["batch_size"]
            group = _label(model, batch, len(batches[model]) > 1)
            if group not in groups:
                groups.append(group)
            points = series.setdefault(framework, {})
            if r["overhead"] is None:
                pair = {
                    api: by_key.get((model, f"{api}-{framework}", phase, batch))
                    for api in ("keras", "native")
                }
                untimed = [
                    (api, cell)
                    for api, cell in pair.items()
                    if cell is None or cell.summary is None
                ]
                missing[framework, group] = _why_untimed(
                    (cell for _, cell in untimed), "no ratio"
                )
                sides = ", ".join(
                    f"{api}-{framework} "
                    + ("not run" if cell is None else _why_untimed([cell], "no time"))
                    for api, cell in untimed
                )
                where = group.replace("\n", " ")
                notes.append(f"{where} on {framework} ({sides or 'no ratio'})")
                continue
            points[group] = (r["overhead"], r["overhead_ci_low"], r["overhead_ci_high"])
            if "wide" in (r["mark"] or "").split(", "):
                faded.add((framework, group))
        ordered = dict(sorted(series.items(), key=lambda item: _rank(item[0])))
        _grouped_bars(
            ax,
            groups,
            ordered,
            faded,
            looks={f: _Look(framework_colour(f)) for f in ordered},
            base=1.0,
            missing=missing,
            legend="framework",
        )
        _ratio_axis(ax, [e for p in ordered.values() for v in p.values() for e in v])
        head = f"{phase}: Keras / native time (95% CI, log scale)"
        if faded:
            head += (
                f"\npale, hatched: wide (CI half-width above {paired.WIDE:.0%}), "
                "no finding"
            )
        ax.set_title(_title(head, notes), fontsize="medium")
        ax.set_ylabel("Keras / native (x)")
    return _save(plt, fig, out / "overhead.png")


def _rank(framework: str) -> tuple[int, str]:
    known = _frameworks()
    return (known.index(framework) if framework in known else len(known)), framework


def _throughput(
    plt: Any, by_key: Mapping[CellKey, PooledCell], out: Path
) -> Path | None:
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
        for path, points in sorted(
            lines[model].items(), key=lambda i: _path_rank(i[0])
        ):
            look = _look(path)
            ax.plot(
                [b for b, _ in points],
                [v for _, v in points],
                marker="o" if look.keras else "s",
                linestyle=look.line,
                color=look.colour,
                label=path,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        untimed: dict[tuple[str, str], list[str]] = {}
        for (m, path, phase, batch), cell in by_key.items():
            if m == model and phase == "infer" and cell.summary is None:
                why = _why_untimed([cell], "no time")
                untimed.setdefault((path, why), []).append(str(batch))
        notes = [
            f"{path} {why}, batch {', '.join(sizes)}"
            for (path, why), sizes in sorted(
                untimed.items(), key=lambda i: _path_rank(i[0][0])
            )
        ]
        ax.set_title(_title(f"{model}: inference throughput", notes, 5.0))
        ax.set_xlabel("batch size")
        ax.set_ylabel("samples / s")
        ax.legend(fontsize="small", title=_SHADES, title_fontsize="small")
    return _save(plt, fig, out / "throughput.png")


def _train_step(
    plt: Any, by_key: Mapping[CellKey, PooledCell], out: Path
) -> Path | None:
    timed = train_step_ms(by_key)
    if not timed:
        return None
    batches: dict[str, set[int]] = {}
    for model, _, phase, batch in by_key:
        if phase == "train":
            batches.setdefault(model, set()).add(batch)
    series: dict[str, dict[str, Interval]] = {}
    groups: list[str] = []
    missing: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    for (model, path, phase, batch), cell in by_key.items():
        if phase != "train":
            continue
        group = _label(model, batch, len(batches[model]) > 1)
        if group not in groups:
            groups.append(group)
        series.setdefault(path, {})
        if cell.summary is None:
            missing[path, group] = _why_untimed([cell], "no time")
            where = group.replace("\n", " ")
            notes.append(f"{where} on {path} ({missing[path, group]})")
    for model, path, batch, interval in timed:
        series[path][_label(model, batch, len(batches[model]) > 1)] = interval
    ordered = dict(sorted(series.items(), key=lambda item: _path_rank(item[0])))
    width = max(6.0, 1.8 * len(groups))
    fig, ax = plt.subplots(figsize=(width, 4.5))
    _grouped_bars(
        ax,
        groups,
        ordered,
        looks={path: _look(path) for path in ordered},
        missing=missing,
        legend=_SHADES,
        outside=True,
    )
    ax.set_yscale("log")
    ax.set_title(_title("training step time (median, 95% CI)", notes, width))
    ax.set_ylabel("ms per step")
    return _save(plt, fig, out / "train_step.png")


def _untimed_modes(
    by_key: Mapping[CellKey, PooledCell], model: str
) -> dict[tuple[str, str, str], dict[str, str]]:
    """(api, framework, mode) -> phase -> why, for the cells of ``model`` at
    its training batch size that have no time (the cells the modes table
    would show had they one: ``harness.report.modes.timings``)."""
    train_batch = {m: b for m, _, phase, b in by_key if phase == "train"}
    out: dict[tuple[str, str, str], dict[str, str]] = {}
    for (m, path, phase, batch), cell in by_key.items():
        wanted = train_batch.get(m, batch)
        if m != model or batch != wanted or cell.summary is not None:
            continue
        try:
            info = get_path(path)
        except ValueError:  # a path of an older registry
            continue
        key = (info.api, info.framework, info.mode)
        out.setdefault(key, {})[phase] = _why_untimed([cell], "no time")
    return out


def _modes(
    plt: Any, recs: list[Record], by_key: Mapping[CellKey, PooledCell], out: Path
) -> list[Path]:
    from matplotlib.patches import Patch

    from harness.report import modes

    if not modes.has_modes(recs):
        return []

    def draw(
        model: str, timings: dict[tuple[str, str, str], dict[str, modes.Timing]]
    ) -> Path:
        marks = modes.ranks(timings)
        untimed = _untimed_modes(by_key, model)
        order = sorted({*timings, *untimed}, key=lambda key: _mode_rank(*key))
        labels = [f"{api}-{framework} {mode}" for api, framework, mode in order]
        fig, axes = plt.subplots(
            2, 2, figsize=(11, 1.2 + 0.32 * len(order) * 2), squeeze=False
        )
        for row, phase in enumerate(modes.PHASES):
            steady, first = axes[row]
            for i, key in enumerate(order):
                look = _mode_look(*key)
                t = timings.get(key, {}).get(phase)
                if t is None:
                    why = untimed.get(key, {}).get(phase)
                    if why is not None:
                        for ax in (steady, first):
                            at = ax.get_yaxis_transform()  # x: axes, y: rows
                            _mark(ax, (0.02, i), why, look.colour, at, upright=False)
                    continue
                best = marks.get((*key, phase)) == "best"
                # the fastest of its API and framework: a black edge and a star
                edge = {"edgecolor": "black", "linewidth": 1.5} if best else {}
                steady.barh(
                    i,
                    t.median * 1e3,
                    xerr=[[(t.median - t.low) * 1e3], [(t.high - t.median) * 1e3]],
                    color=look.colour,
                    hatch=look.hatch,
                    capsize=2,
                    **edge,
                )
                if t.first is not None:
                    first.barh(i, t.first, color=look.colour, hatch=look.hatch, **edge)
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
                ax.set_ylim(len(order) - 0.5, -0.5)  # the first row on top
                ax.set_xscale("log")
                ax.tick_params(axis="x", which="minor", labelbottom=False)
                ax.set_title(title, fontsize="medium")
        pairs = dict.fromkeys((api, framework) for api, framework, _ in order)
        axes[0][1].legend(
            handles=[
                Patch(color=path_colour(api, fw), label=f"{api}-{fw}")
                for api, fw in pairs
            ],
            fontsize="small",
            title=_SHADES + "\nhatched: a mode not the default",
            title_fontsize="small",
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
        )
        fig.suptitle(f"{model}: execution modes (* fastest verified mode)")
        return _save(plt, fig, out / f"modes-{files.file_name(model)}.png")

    written = []
    for model, timings in modes.timings(recs).items():
        what = f"the modes plot of {model!r:.80}"
        path = _drawn(what, functools.partial(draw, model, timings))
        if path is not None:
            written.append(path)
    return written


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Save ``fig`` as a PNG at ``path`` by ``files.write_figure`` (never
    through a link planted there) and close it; the path written.  Each
    part of its name that comes from a record went through
    ``files.file_name`` (a model may hold any character, ``/`` included)."""
    try:
        fig.tight_layout()
        return files.write_figure(path, fig, 120)
    finally:
        plt.close(fig)


def write_plots(records: list[Record], out_dir: Path) -> list[Path]:
    """Draw the figures the records hold a time for into ``out_dir``
    (created if needed) and return their paths; raises ImportError without
    matplotlib."""
    files.folder(out_dir, follow=True)
    by_key = cells(records)
    with _pyplot() as plt:
        written = [
            _drawn(
                "the overhead plot", lambda: _overhead(plt, records, by_key, out_dir)
            ),
            _drawn("the throughput plot", lambda: _throughput(plt, by_key, out_dir)),
            _drawn("the train step plot", lambda: _train_step(plt, by_key, out_dir)),
        ]
        modes_ = _modes(plt, records, by_key, out_dir)
    return [p for p in written if p is not None] + modes_


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
    files.folder(out_dir, follow=True)
    written = []
    with _pyplot() as plt:
        for (model, framework), bars in groups.items():
            bars.sort(key=_phase_rank)
            batches = ", ".join(str(b) for b in dict.fromkeys(b.batch for b in bars))
            title = f"{model} on {framework}: where a Keras step goes (batch {batches})"
            name = f"explain-{files.file_name(model)}-{files.file_name(framework)}.png"
            path = _drawn(
                f"the explain plot of {model!r:.80} on {framework!r:.80}",
                functools.partial(_draw_explain, plt, title, bars, out_dir / name),
            )
            if path is not None:
                written.append(path)
    return written


def _phase_rank(bar: _ExplainBar) -> tuple[int, str]:
    """Train first, infer second, any other phase after them by name."""
    known = bar.phase in _PHASE_ORDER
    return (_PHASE_ORDER.index(bar.phase) if known else len(_PHASE_ORDER), bar.phase)


# --- operators (``harness ops``) -----------------------------------------------


def op_curves(rows: Sequence[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """``ops-<operator>.png`` per operator: time per call against work per
    call (FLOPs, or elements for memory-bound operators), log-log, one line
    per path (keras.ops solid, the native operator dashed, in the path's
    colour, :func:`path_colour`) with 95% intervals, one panel per
    direction.  Where a line is flat the fixed per-call cost dominates;
    where it climbs with slope 1 the work does.  ``rows``:
    ``harness.ops.report`` rows; only timed ones drawn."""
    timed = [r for r in rows if r["status"] == "ok"]
    files.folder(out_dir, follow=True)
    written = []
    with _pyplot() as plt:
        for op in sorted({r["op"] for r in timed}):
            mine = [r for r in timed if r["op"] == op]
            path = _drawn(
                f"the plot of operator {op!r:.80}",
                functools.partial(_op_curve, plt, op, mine, out_dir),
            )
            if path is not None:
                written.append(path)
    return written


def _op_curve(
    plt: Any, op: str, mine: Sequence[Mapping[str, Any]], out_dir: Path
) -> Path:
    """``ops-<operator>.png`` of :func:`op_curves`: ``mine``, the timed rows
    of operator ``op``."""
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
                color=_look(path).colour,
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
    return _save(plt, fig, out_dir / f"ops-{files.file_name(op)}.png")
