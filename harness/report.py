"""``python -m harness report``: tables from the records of a run.

This module loads a records file (:func:`harness.records.scan`, warning on
stderr about lines that are JSON but no record) and renders what
:mod:`harness.analysis` computes from it, as a plain-text or GitHub Markdown
table, CSV or JSON.

Two tables: every cell (model, path, phase, batch size) with its median,
spread (IQR, a bootstrap 95% CI of the median, an ``unstable`` warning when the
IQR exceeds 10% of the median), its equivalence verdict and, when the records
carry them, latency percentiles, resource use and the fraction of the
machine's matmul peak; and per model, framework, phase and batch size the
Keras time, the native time and their ratio (Keras / native, above 1 means the
high-level API costs time) with a bootstrap CI.  A time measured without a
passing equivalence verdict is marked ``unverified`` in every row it enters.

``--compare OLD NEW`` tests every cell present in both files for a change
(see :mod:`harness.stats` for the test and its limits).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness import mode_report, stats
from harness.analysis import (
    PAIRED_ALPHA,
    busy_cells,
    cell_rows,
    compare_pair_rows,
    compare_rows,
    overhead_rows,
    run_to_run,
)
from harness.records import Record, scan
from workers.resources import CONTENDED_CORES, CONTENDED_STEAL

FORMATS = ("table", "markdown", "csv", "json")


def latest_run(results_dir: Path) -> Path:
    """The newest ``run-*.jsonl`` in ``results_dir``.

    Raises FileNotFoundError when there is none."""
    runs = sorted(results_dir.glob("run-*.jsonl"))
    if not runs:
        raise FileNotFoundError(
            f"no run records in {results_dir}; run 'python -m harness run' first"
        )
    return runs[-1]


def load(records_path: Path) -> list[Record]:
    """Every record of a records file; prints one warning line on stderr when
    some lines were JSON but no record.

    Raises FileNotFoundError for a missing file and ValueError for a file that
    holds no records, is not UTF-8 text, or holds a record of a newer or
    unknown schema version."""
    if not records_path.is_file():
        raise FileNotFoundError(
            f"{records_path} is not a records file; give a run-*.jsonl written by "
            "'python -m harness run'"
        )
    found = scan(records_path)
    warning = found.warning()
    if warning:
        print(warning, file=sys.stderr)
    if not found.records:
        raise ValueError(
            f"{records_path} holds no records; give a run-*.jsonl written by "
            "'python -m harness run'"
        )
    return found.records


def _combine_ci(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows for reading: each ``..ci_low..``/``..ci_high..`` pair of columns
    becomes one ``..ci95..`` column ("low–high") in the low column's place."""
    out = []
    for row in rows:
        shown: dict[str, Any] = {}
        for key, value in row.items():
            if "ci_high" in key:
                continue
            if "ci_low" in key:
                high = row[key.replace("ci_low", "ci_high")]
                shown[key.replace("ci_low", "ci95")] = (
                    None if value is None else f"{value:g}–{high:g}"
                )
                continue
            shown[key] = value
        out.append(shown)
    return out


def _drop_empty_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without the columns that are empty in every row (the optional
    measurements a run did not record, the marks nothing earned)."""
    keep = [k for k in (rows[0] if rows else {}) if any(r[k] is not None for r in rows)]
    return [{k: r[k] for k in keep} for r in rows]


def render(rows: list[dict[str, Any]], fmt: str) -> str:
    """Rows as JSON, CSV (every column, machine-readable), or a plain-text or
    GitHub Markdown table (CIs joined, empty columns dropped)."""
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    shown = _drop_empty_columns(_combine_ci(rows))
    table: str = tabulate(
        shown,
        headers="keys",
        missingval="—",
        floatfmt="g",
        tablefmt="github" if fmt == "markdown" else "simple",
    )
    return table


def _section(title: str, body: str, fmt: str) -> str:
    return f"## {title}\n\n{body}" if fmt == "markdown" else f"{title}\n{body}"


def report(records_path: Path, fmt: str, table: str) -> str:
    """The report of one records file: both tables for ``table`` and
    ``markdown``, else the ``table`` named (``cells`` or ``overhead``)."""
    return render_report(records_path, load(records_path), fmt, table)


def render_report(records_path: Path, recs: list[Record], fmt: str, table: str) -> str:
    """:func:`report` of records already loaded from ``records_path``."""
    if fmt in ("table", "markdown"):
        return "\n\n".join(
            [
                f"records: {records_path}",
                _section(
                    "cells (time: ms per training step or per inference "
                    "mini-batch; median, IQR and bootstrap 95% CI of the median "
                    "over every timed repeat)",
                    render(cell_rows(recs), fmt),
                    fmt,
                ),
                _section(
                    "Keras over native (overhead: paired cells, the Hodges-Lehmann "
                    "estimate of the block pairs' Keras/native ratio with a "
                    "bootstrap 95% CI over processes and blocks; unpaired ones, "
                    "keras_ms / native_ms)",
                    render(overhead_rows(recs), fmt),
                    fmt,
                ),
                *_modes_section(recs, fmt),
                "\n".join(_machine_notes(records_path, recs)),
            ]
        )
    rows = cell_rows(recs) if table == "cells" else overhead_rows(recs)
    return render(rows, fmt)


def _modes_section(recs: list[Record], fmt: str) -> list[str]:
    """The execution modes table (``harness.mode_report``), where the run
    timed modes other than the defaults."""
    if not mode_report.has_modes(recs):
        return []
    return [
        _section(
            "execution modes (ms per step / mini-batch: median and bootstrap 95% "
            "CI over fresh processes; first: the first step or round alone, "
            "compiling from an empty cache, median and largest over the "
            "processes; BEST: the fastest verified mode of its API and "
            "framework, TIE: its CI overlaps the best's)",
            render(mode_report.rows(recs), fmt),
            fmt,
        )
    ]


def _machine_notes(records_path: Path, recs: list[Record]) -> list[str]:
    """Whether the machine was busy, and how much the ratios of earlier runs
    of the same machine in the same folder moved from run to run."""
    notes = []
    busy = busy_cells(recs)
    if busy:
        notes.append(
            f"BUSY MACHINE: {busy} cells were measured while other processes took "
            f"more than {CONTENDED_CORES} cores (or the hypervisor stole more than "
            f"{CONTENDED_STEAL:.0%}); their times and ratios are suspect (column "
            "busy), measure again on a quiet machine or pin the workers "
            "(pin_cpus in the blueprint)"
        )
    host = next((r.platform.get("hostname") for r in recs), None)
    runs = []
    for path in sorted(records_path.parent.glob("run-*.jsonl")):
        try:
            found = scan(path).records
        except ValueError:
            continue
        if found and found[0].platform.get("hostname") == host:
            runs.append(found)
    variation = run_to_run(runs)
    if variation is not None:
        notes.append(
            f"machine {host}: median run-to-run variation of the paired overhead "
            f"ratios over {len(runs)} runs in {records_path.parent}: {variation:.1%}"
        )
    return notes


def _compare_notes(rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    few = {(r["n_old"], r["n_new"]) for r in rows if r["verdict"] == "too few samples"}
    for n_old, n_new in sorted(few):
        notes.append(
            f"with {n_old} old and {n_new} new samples the smallest possible "
            f"p-value is {stats.min_p_value(n_old, n_new):.3g}, so no change can "
            f"be significant at {stats.ALPHA}; time more repeats"
        )
    notes.append(
        f"each cell is tested alone at p < {stats.ALPHA}: among {len(rows)} "
        f"unchanged cells expect about {len(rows) * stats.ALPHA:.1f} false flags"
    )
    return notes


def compare_report(old_path: Path, new_path: Path, fmt: str) -> str:
    """Which cells got slower or faster from ``old_path`` to ``new_path``
    (two-sided Mann-Whitney U on the pooled samples, p < 0.05).

    Raises FileNotFoundError or ValueError for a missing or empty file, or for
    two files without a common timed cell."""
    old, new = load(old_path), load(new_path)
    rows = compare_rows(old, new)
    pairs = compare_pair_rows(old, new)
    if fmt in ("csv", "json"):
        return render(pairs or rows, fmt)
    notes = _compare_notes(rows)
    if pairs:
        flagged = sum(1 for r in pairs if r["verdict"] in ("higher", "lower"))
        notes.append(
            f"paired ratios: {flagged} of {len(pairs)} changed at p < "
            f"{PAIRED_ALPHA} (hierarchical bootstrap over processes and blocks)"
        )
    bullet = "- " if fmt == "markdown" else ""
    sections = [f"old: {old_path}\nnew: {new_path}"]
    if pairs:
        sections.append(
            _section(
                "change of the paired Keras/native overhead ratios (change = new "
                "/ old - 1, 95% CI, p-value)",
                render(pairs, fmt),
                fmt,
            )
        )
    sections += [
        _section(
            "change per cell (ms per step or mini-batch; change = new / old - 1)",
            render(rows, fmt),
            fmt,
        ),
        "\n".join(bullet + n for n in notes),
    ]
    return "\n\n".join(sections)
