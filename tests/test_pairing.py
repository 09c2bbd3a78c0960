"""Paired Keras/native cells through the orchestrator: scheduling, adaptive
rounds, records, the report's ratios, busy machines and paired comparisons.

Fake workers (shell scripts standing in for the torch interpreter) answer
``Paired`` requests with blocks of a known ratio, so no framework is needed.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.bench.run import run
from harness.core import records
from harness.core.pairing import PairCell, Standing, standings, stop_reason
from harness.report.analysis import compare_pair_rows, overhead_rows
from harness.report.tables import compare_report, report
from tests.helpers import ANSWER, READY, fake_python, no_framework, profile, record

PAIRED = ["keras-torch", "native-torch"]


def _answer(ratio: float, blocks: int = 6, native_s: float = 0.001) -> str:
    native = [native_s * (1 + 0.001 * i) for i in range(blocks)]
    result = {
        "keras_first_s": 0.5,
        "native_first_s": 0.1,
        "keras_s": [n * ratio for n in native],
        "native_s": native,
        "keras_first": [i % 2 == 0 for i in range(blocks)],
    }
    return json.dumps({"status": "ok", "result": result})


def _fake_worker(tmp_path: Path, ratios: list[float]) -> str:
    """A paired worker whose n-th process (counted in a file) answers every
    request with blocks of ratio ``ratios[n % len(ratios)]``."""
    answers = tmp_path / "answers"
    answers.mkdir()
    for i, ratio in enumerate(ratios):
        (answers / str(i)).write_text(_answer(ratio) + "\n")
    starts = tmp_path / "starts"
    return fake_python(
        tmp_path,
        f"echo start >> {starts}\n"
        f"n=$(( ($(wc -l < {starts}) - 1) % {len(ratios)} ))\n"
        f"echo '{READY}'\n"
        f"while read line; do cat {answers}/$n; done",
    )


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Every path passes the gate, no matmul peak."""
    return no_framework(monkeypatch)


def _run(tmp_path: Path, profile: Any) -> list[records.Record]:
    out = run(
        profile,
        models=["ffn"],
        paths=PAIRED,
        phases=["train"],
        results_dir=tmp_path,
    )
    return records.read(out)


def test_a_pair_is_one_process_and_two_records(tmp_path: Path, gate: Any) -> None:
    gate.setenv("HARNESS_PYTHON_TORCH", _fake_worker(tmp_path, [3.0]))
    recs = _run(tmp_path, profile(repeats=1, max_repeats=1))
    assert [(r.path, r.status, r.repeat) for r in recs] == [
        ("keras-torch", "ok", 0),
        ("native-torch", "ok", 0),
    ]
    keras, native = recs
    assert keras.values["partner"] == "native-torch"
    assert native.values["partner"] == "keras-torch"
    assert len(keras.values["block_s"]) == len(native.values["block_s"]) == 6
    assert keras.summary["ratio"] == pytest.approx(3.0)
    assert keras.summary["stopped"] == "target"  # an exact ratio: CI of width 0
    (row,) = overhead_rows(recs)
    assert row["overhead"] == pytest.approx(3.0)
    assert row["pairs"] == "1x6"
    assert (tmp_path / "starts").read_text().count("start") == 1


def test_a_steady_ratio_stops_at_the_target_after_the_least_repeats(
    tmp_path: Path, gate: Any
) -> None:
    gate.setenv("HARNESS_PYTHON_TORCH", _fake_worker(tmp_path, [3.0]))
    recs = _run(tmp_path, profile(repeats=2, max_repeats=6))
    assert sorted({r.repeat for r in recs}) == [0, 1]
    assert recs[-1].summary["stopped"] == "target"
    assert recs[0].summary["stopped"] is None  # after one process: going on


def test_a_wandering_ratio_gets_more_processes_up_to_the_cap(
    tmp_path: Path, gate: Any
) -> None:
    """Processes disagree by +-20%: the CI stays wide, so rounds are added
    until ``max_repeats``; the records say why the cell stopped."""
    gate.setenv("HARNESS_PYTHON_TORCH", _fake_worker(tmp_path, [2.4, 1.6]))
    recs = _run(tmp_path, profile(repeats=2, max_repeats=5, cell_budget_s=1000.0))
    assert sorted({r.repeat for r in recs}) == [0, 1, 2, 3, 4]
    assert recs[-1].summary["stopped"] == "max_repeats"
    assert recs[-1].summary["ratio_half_width"] > 0.05


def test_the_budget_stops_a_wandering_ratio(tmp_path: Path, gate: Any) -> None:
    gate.setenv("HARNESS_PYTHON_TORCH", _fake_worker(tmp_path, [2.4, 1.6]))
    recs = _run(tmp_path, profile(repeats=2, max_repeats=50, cell_budget_s=1e-6))
    assert sorted({r.repeat for r in recs}) == [0, 1]
    assert recs[-1].summary["stopped"] == "budget"


def test_unpaired_profiles_time_each_path_alone(tmp_path: Path, gate: Any) -> None:
    gate.setenv("HARNESS_PYTHON_TORCH", fake_python(tmp_path, answer=ANSWER))
    recs = _run(tmp_path, profile(repeats=1, paired=False))
    assert [r.path for r in recs] == PAIRED
    assert all("partner" not in r.values for r in recs)
    (row,) = overhead_rows(recs)
    assert row["pairs"] == "unpaired"


# --- from records -----------------------------------------------------------------


def _pair_records(
    ratio: float, processes: int, seed: int, noise: float = 0.02, busy: bool = False
) -> list[records.Record]:
    rng = np.random.default_rng(seed)
    out = []
    for repeat in range(processes):
        native = list(0.001 * np.exp(rng.normal(0, noise, 20)))
        factor = np.exp(rng.normal(0, 0.005))
        keras = [n * ratio * factor * np.exp(rng.normal(0, noise)) for n in native]
        for api, blocks, partner in (
            ("keras", keras, "native-torch"),
            ("native", native, "keras-torch"),
        ):
            paired = record(
                f"{api}-torch",
                profile="p",
                batch_size=128,
                repeat=repeat,
                values={"block_s": blocks, "step_s": blocks, "partner": partner},
                summary={"median_step_s": float(np.median(blocks)), "contended": busy},
                platform={"hostname": "h"},
            )
            out.append(paired)
    return out


def test_compare_flags_a_5_percent_slowdown_of_native_and_not_a_rerun() -> None:
    old = _pair_records(4.0, 4, seed=1)
    slower_native = _pair_records(4.0 / 1.05, 4, seed=2)
    rerun = _pair_records(4.0, 4, seed=3)
    (changed,) = compare_pair_rows(old, slower_native)
    assert changed["verdict"] == "lower"
    assert changed["p_value"] < 0.01
    assert changed["change_ci_low_pct"] <= -4.76 <= changed["change_ci_high_pct"]
    (same,) = compare_pair_rows(old, rerun)
    assert same["verdict"] == "same"


def test_standings_need_both_sides_of_a_process() -> None:
    recs = _pair_records(2.0, 3, seed=0)
    recs[-1] = dataclasses.replace(recs[-1], status="crashed")  # native of r2
    (standing,) = standings(recs).values()
    assert standing.repeats == {0, 1}


def test_stop_reason_waits_for_the_least_repeats() -> None:
    standing = Standing()
    standing.add(0, [2.0] * 5, [1.0] * 5)
    two_to_four = profile(repeats=2, max_repeats=4)
    assert stop_reason(standing, 1, two_to_four, "ffn")[0] is None
    standing.add(1, [2.0] * 5, [1.0] * 5)
    assert stop_reason(standing, 2, two_to_four, "ffn")[0] == "target"
    assert PairCell("ffn", "torch", "train", 8).name() == (
        "ffn keras-torch|native-torch train b8"
    )


def test_a_busy_machine_is_said_in_the_report(tmp_path: Path) -> None:
    out = tmp_path / "run-1.jsonl"
    for r in _pair_records(2.0, 2, seed=0, busy=True):
        records.append(out, r)
    text = report(out, "table", "overhead")
    assert "BUSY MACHINE: 2 cells were measured while other processes took" in text
    assert "contended" in text
    quiet = tmp_path / "run-2.jsonl"
    for r in _pair_records(2.1, 2, seed=1):
        records.append(quiet, r)
    text = report(quiet, "table", "overhead")
    assert "BUSY" not in text
    # Two runs of this machine in the folder: their run-to-run variation.
    assert (
        "median run-to-run variation of the paired overhead ratios over 2 runs" in text
    )


def test_compare_report_shows_paired_ratios(tmp_path: Path) -> None:
    old, new = tmp_path / "run-1.jsonl", tmp_path / "run-2.jsonl"
    for r in _pair_records(4.0, 4, seed=1):
        records.append(old, r)
    for r in _pair_records(4.0 / 1.05, 4, seed=2):
        records.append(new, r)
    text = compare_report(old, new, "table")
    assert "change of the paired Keras/native overhead ratios" in text
    assert "paired ratios: 1 of 1 changed at p < 0.01" in text
