"""``python -m harness report``: tables from the records of a run.

Two tables: every cell (model, path, phase) with its time and equivalence
verdict, and per model, framework and phase the Keras time, the native time and
their ratio (Keras / native, above 1 means the high-level API costs time).
Times are seconds per training step and seconds per inference mini-batch (the
inverse of the throughput), so both phases read the same way.  A time measured
without a passing equivalence verdict (``run --allow-unverified``, or records
from before the gate existed) is marked ``unverified`` in every row it enters.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.paths import PATHS


def latest_run(results_dir: Path) -> Path:
    runs = sorted(results_dir.glob("run-*.jsonl"))
    if not runs:
        raise FileNotFoundError(
            f"no run records in {results_dir}; run 'python -m harness run' first"
        )
    return runs[-1]


def cell_time(record: dict[str, Any]) -> float | None:
    """Seconds per step (train) or per mini-batch (infer); None if it failed."""
    if record["status"] != "ok":
        return None
    s = record["summary"]
    return (
        float(s["median_step_s"])
        if record["phase"] == "train"
        else (1.0 / float(s["batches_per_s"]))
    )


def unverified(record: dict[str, Any] | None) -> bool:
    """A measured time that the equivalence gate did not vouch for."""
    return bool(record and record["status"] == "ok" and not record.get("verified"))


def _last_per_cell(
    recs: list[dict[str, Any]],
) -> dict[tuple[str, str, str], dict[str, Any]]:
    cells = {}
    for r in recs:
        cells[(r["model"], r["path"], r["phase"])] = r
    return cells


def cell_rows(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for (model, path, phase), r in _last_per_cell(recs).items():
        t = cell_time(r)
        rows.append(
            {
                "model": model,
                "path": path,
                "phase": phase,
                "batch_size": r["batch_size"],
                "status": r["status"],
                "time_ms": None if t is None else round(t * 1e3, 3),
                "first_step_s": (
                    round(r["summary"]["first_step_s"], 3)
                    if r["status"] == "ok" and phase == "train"
                    else None
                ),
                "batches_per_s": (
                    round(r["summary"]["batches_per_s"], 2)
                    if r["status"] == "ok" and phase == "infer"
                    else None
                ),
                "equivalence": r["equivalence"],
                "mark": "unverified" if unverified(r) else None,
            }
        )
    return rows


def overhead_rows(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cells = _last_per_cell(recs)
    keys = sorted(
        {
            (m, PATHS[p].framework if p in PATHS else r["framework"], ph)
            for (m, p, ph), r in cells.items()
        },
        key=lambda k: (k[0], k[2], k[1]),
    )
    rows = []
    for model, framework, phase in keys:
        keras = cells.get((model, f"keras-{framework}", phase))
        native = cells.get((model, f"native-{framework}", phase))
        kt = cell_time(keras) if keras else None
        nt = cell_time(native) if native else None
        rows.append(
            {
                "model": model,
                "framework": framework,
                "phase": phase,
                "keras_ms": None if kt is None else round(kt * 1e3, 3),
                "native_ms": None if nt is None else round(nt * 1e3, 3),
                "overhead": None if kt is None or nt is None else round(kt / nt, 3),
                "keras_equivalence": keras["equivalence"] if keras else None,
                "native_equivalence": native["equivalence"] if native else None,
                "mark": "unverified"
                if unverified(keras) or unverified(native)
                else None,
            }
        )
    return rows


def render(rows: list[dict[str, Any]], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]) if rows else [])
        writer.writeheader()
        writer.writerows(rows)
        return buffer.getvalue()
    table: str = tabulate(rows, headers="keys", missingval="—", floatfmt="g")
    return table


def report(records_path: Path, fmt: str, table: str) -> str:
    from harness.records import read

    recs = read(records_path)
    if not recs:
        raise ValueError(f"{records_path} holds no records")
    if fmt == "table":
        return (
            f"records: {records_path}\n\n"
            f"cells (time: ms per training step or per inference mini-batch)\n"
            f"{render(cell_rows(recs), fmt)}\n\n"
            f"Keras over native (overhead = keras_ms / native_ms)\n"
            f"{render(overhead_rows(recs), fmt)}"
        )
    rows = cell_rows(recs) if table == "cells" else overhead_rows(recs)
    return render(rows, fmt)
