"""One answer per cell (``harness.report.agreement``): the same cell as run
and explain measured it, side by side, and a disagreement said with why."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from harness.report import agreement
from harness.report.agreement import Estimate, rows
from tests.helpers import record

ONE = "1 thread, own CPU"


def _estimate(
    source: str,
    median: float,
    half: float = 0.01,
    *,
    threads: str = ONE,
    steps: int | None = 2,
    company: str = "alone",
    busy: bool = False,
) -> Estimate:
    return Estimate(
        source,
        ("lstm", "keras-torch", "train", 64, threads),
        median,
        median - half,
        median + half,
        steps,
        company,
        busy,
    )


def test_overlapping_intervals_agree() -> None:
    (row,) = rows([_estimate("run default", 0.91), _estimate("explain", 0.925)])
    assert row["agree"] == "yes"
    assert row["why"] is None
    assert "run default: 910 ms [900 ms, 920 ms]" in row["figures"]


def test_a_figure_outside_the_others_interval_is_said_with_nothing_to_explain_it() -> (
    None
):
    (row,) = rows([_estimate("run default", 0.91), _estimate("run modes", 1.306)])
    assert row["agree"] == "NO"
    assert row["why"] == "nothing recorded differs: one command measured something else"


def test_what_differs_is_named() -> None:
    (row,) = rows(
        [
            _estimate("run default", 0.91, company="paired with native-torch"),
            _estimate("run modes", 0.6, steps=10, busy=True),
        ]
    )
    assert row["agree"] == "NO"
    assert "steps per timed call differ (2, 10)" in row["why"]
    assert "paired with native-torch" in row["why"]
    assert "busy machine during run modes" in row["why"]


def test_other_threads_or_one_command_alone_are_not_compared() -> None:
    assert (
        rows(
            [
                _estimate("run default", 0.9),
                _estimate("explain", 2.0, threads="2 threads"),
            ]
        )
        == []
    )
    assert rows([_estimate("run default", 0.9)]) == []
    assert (
        rows([_estimate("run default", 0.9), _estimate("explain", 2.0, threads="?")])
        == []
    )


def test_a_run_and_an_explain_folder_are_read(tmp_path: Path) -> None:
    threads = {"intra_op": 1, "inter_op": 1, "isolated": True}
    recs = [
        record(
            "keras-torch",
            seconds=s,
            repeat=i,
            settings={"steps": 2},
            platform={"threads": threads},
            values={"step_s": [s], "partner": "native-torch"},
        )
        for i, s in enumerate([0.90, 0.91, 0.92, 0.91, 0.90])
    ]
    (from_run,) = agreement.from_run(recs, "run test")
    slowed = [replace(r, settings={"steps": 2, "slowdown": 1.02}) for r in recs]
    assert agreement.from_run(slowed, "run slowed") == []
    assert from_run.key == ("ffn", "keras-torch", "train", 8, ONE)
    assert (from_run.steps, from_run.company) == (2, "paired with native-torch")
    folder = tmp_path / "explain-1"
    folder.mkdir()
    host = {"threads": threads, "train_steps": {"ffn": 2}}
    (folder / "explain.jsonl").write_text(json.dumps({"kind": "host", "host": host}))
    cell = {
        "model": "ffn",
        "framework": "torch",
        "phase": "train",
        "batch": 8,
        "paths": ["keras-torch", "keras-torch-resident", "native-torch"],
        "total": {"us": 1.3e6, "low": 1.2e6, "high": 1.4e6},
        "parts": {"native": {"us": 2e5, "low": 1.9e5, "high": 2.1e5}},
        "contended": 0,
    }
    (folder / "explain.json").write_text(json.dumps({"cells": [cell]}))
    keras, native = agreement.from_explain(folder)
    assert (keras.key[1], native.key[1]) == ("keras-torch", "native-torch")
    assert keras.median == 1.3
    (row,) = rows([from_run, keras])
    assert row["agree"] == "NO"
    assert "with keras-torch-resident, native-torch" in row["why"]
    # cells of another shape are passed over, the good one still read
    bad = [
        {**cell, "paths": "keras-torch"},
        {**cell, "total": {"us": "1"}},
        {**cell, "parts": {"native": None}, "batch": "8"},
        {k: v for k, v in cell.items() if k != "model"},
        "a cell",
    ]
    (folder / "explain.json").write_text(json.dumps({"cells": [*bad, cell]}))
    assert len(agreement.from_explain(folder)) == 2
    (folder / "explain.json").write_text(json.dumps({"cells": "none"}))
    assert agreement.from_explain(folder) == []
    (folder / "explain.jsonl").write_text(json.dumps({"host": "h"}))
    assert agreement.from_explain(folder) == []
