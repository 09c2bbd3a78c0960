"""The report's opening (``harness.report.summary``): the answer's geometric
mean and interval against hand-computed ones, findings that pick up explain
and count records for their cell and fall back to the command without
them, the baseline from floors records, and every doubt (busy, wide,
unverified, failed) said with its reason; then the report in that order.

Framework-free: records and result files are made here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.core import records
from harness.report import doubts, summary, tables
from harness.report.analysis import cell_rows, overhead_rows
from harness.report.summary import Ratio
from harness.report.tables import render_report
from tests.helpers import record

MACHINE = {"machine": {"name": "box", "cpu_isa": "avx avx2 fma", "cores": 2}}


def _pairs(
    ratio: float,
    *,
    framework: str = "torch",
    model: str = "ffn",
    phase: str = "train",
    spread: float = 0.002,
    seed: int = 0,
    processes: int = 3,
    **fields: Any,
) -> list[records.Record]:
    """Paired Keras/native records of one cell whose processes' ratios
    scatter by ``spread`` (log-normal), 20 block pairs each."""
    rng = np.random.default_rng(seed)
    extra = fields.pop("summary", {})  # every record's, Keras' and native's
    platform = fields.pop("platform", MACHINE)
    out = []
    for repeat in range(processes):
        native = list(0.001 * np.exp(rng.normal(0, 0.01, 20)))
        factor = ratio * np.exp(rng.normal(0, spread))
        for api, blocks in (
            ("keras", [n * factor for n in native]),
            ("native", native),
        ):
            partner = f"{'native' if api == 'keras' else 'keras'}-{framework}"
            values = {"block_s": blocks, "partner": partner}
            values |= {"step_s": blocks} if phase == "train" else {}
            key = "median_step_s" if phase == "train" else "median_batch_s"
            out.append(
                record(
                    f"{api}-{framework}",
                    phase,
                    model=model,
                    batch_size=128,
                    repeat=repeat,
                    values=values,
                    summary={key: float(np.median(blocks))} | extra,
                    platform=platform,
                    **fields,
                )
            )
    return out


# --- the answer -----------------------------------------------------------------


def test_the_geometric_mean_and_its_interval_are_the_hand_computed_ones() -> None:
    # By hand: the mean of ln 2 and ln 1.5 is ln sqrt(3); each standard error
    # is ln(high/low) / (2 * 1.959964): ln 1.25 / 3.919928 = 0.0569253 and
    # ln 1.5 / 3.919928 = 0.1034369; the mean's is sqrt(0.0569253^2 +
    # 0.1034369^2) / 2 = 0.0590332, so the interval is sqrt(3) * exp(-+1.959964
    # * 0.0590332) = 1.542807 and 1.944515.
    g, low, high = summary.geometric_mean([(2.0, 1.8, 2.25), (1.5, 1.2, 1.8)])
    assert g == pytest.approx(1.7320508, rel=1e-6)
    assert low == pytest.approx(1.542807, rel=1e-5)
    assert high == pytest.approx(1.944515, rel=1e-5)


def test_a_wrong_mean_or_a_narrowed_interval_would_be_caught() -> None:
    # The arithmetic mean (1.75) is not the answer, and two measurements do
    # not make the interval narrower than their own widths allow.
    g, low, high = summary.geometric_mean([(2.0, 1.8, 2.25), (1.5, 1.2, 1.8)])
    assert g != pytest.approx(1.75, rel=1e-3)
    assert high - low > 0.3
    with pytest.raises(ValueError, match="positive"):
        summary.geometric_mean([(2.0, 0.0, 2.2)])
    with pytest.raises(ValueError, match="no estimate"):
        summary.geometric_mean([])


def _ratio(model: str, value: float, marks: tuple[str, ...] = (), **kw: Any) -> Ratio:
    fields: dict[str, Any] = {"framework": "torch", "phase": "train", "batch": 128}
    fields |= kw
    return Ratio(
        model=model,
        value=value,
        low=value * 0.9,
        high=value * 1.1,
        marks=marks,
        **fields,
    )


def test_the_answer_reads_each_model_once_median_and_range_first() -> None:
    found = [
        _ratio("ffn", 2.0),
        _ratio("ffn", 9.0, phase="infer", batch=1),  # a single sample: its own row
        _ratio("ffn", 5.0, phase="infer", batch=32),  # another batch: not read
        _ratio("ffn", 3.0, phase="infer"),
        _ratio("gru", 6.0),
        _ratio("lenet", 4.0, ("wide",)),
        _ratio("lstm", 50.0, ("unverified",)),
        _ratio("vgg", 1.0),
    ]
    rows = {(r["framework"], r["what"]): r for r in summary.answer(found)}
    assert list(rows) == [
        ("torch", "training"),
        ("torch", "inference"),
        ("torch", "inference, batch 1"),
    ]
    train = rows["torch", "training"]
    assert train["models read"] == "3 of 5"
    assert train["median"] == "2.00x"
    assert train["lowest to highest"] == "1.00x (vgg) to 6.00x (gru)"
    g, low, high = summary.geometric_mean(
        [(v, v * 0.9, v * 1.1) for v in (2.0, 6.0, 1.0)]
    )
    assert train["geometric mean [95% CI]"] == f"{g:.2f}x [{low:.2f}, {high:.2f}]"
    # wide and unverified out of every figure, named with why
    assert train["left out"] == "lenet (too uncertain), lstm (unverified)"
    assert rows["torch", "inference"]["lowest to highest"] == "3.00x (ffn)"
    assert rows["torch", "inference, batch 1"]["median"] == "9.00x"
    (line,) = summary.carried(found)
    assert line.startswith(
        "torch: training median 2.00x over these 3 models, 1.00x (vgg) to "
        "6.00x (gru) (2 left out: see Doubts); inference 3.00x (ffn); "
        "inference, batch 1 9.00x (ffn)"
    )
    per_model = {r["model"]: r for r in summary.per_model(found)}
    assert per_model["lenet"]["torch train"] == "4.00 (wide)"
    assert per_model["ffn"]["torch infer"] == "3.00"


def test_a_pair_the_gate_held_back_is_one_of_the_models_left_out() -> None:
    """The issue's TensorFlow training "mean over four models": the fifth,
    held back by the gate, had no ratio and vanished.  It is named."""
    rows = [
        {
            "model": "ffn",
            "framework": "tensorflow",
            "phase": "train",
            "batch_size": 128,
            "overhead": None,
            "keras_equivalence": "infer-only",
            "native_equivalence": "pass",
        },
        {
            "model": "ffn",
            "framework": "tensorflow",
            "phase": "infer",
            "batch_size": 7,
            "overhead": None,
            "keras_equivalence": "pass",
            "native_equivalence": "pass",
        },  # another batch: not in the answer
    ]
    missing = summary.unrated(rows)
    assert [m.why for m in missing] == ["held back", "no ratio"]
    found = [_ratio("lenet", 2.0, framework="tensorflow")]
    (row,) = summary.answer(found, missing)
    assert row["models read"] == "1 of 2"
    assert row["left out"] == "ffn (held back)"
    (line,) = summary.carried(found, missing)
    assert line.endswith("(1 left out: see Doubts)")


def test_a_mean_that_took_a_wide_ratio_would_be_caught() -> None:
    """The wrong answer the issue saw: a mean over every ratio, wide ones
    too.  Two models, one wide: the answer is the other one alone."""
    found = [_ratio("ffn", 2.0), _ratio("lenet", 8.0, ("wide",))]
    (row,) = summary.answer(found)
    assert row["median"] == "2.00x"
    assert row["geometric mean [95% CI]"].startswith("2.00x")
    assert row["models read"] == "1 of 2"


def test_the_answer_from_records_is_the_geometric_mean_of_the_table() -> None:
    recs = _pairs(2.0) + _pairs(3.0, model="lenet", seed=1)
    rows = overhead_rows(recs)
    found = summary.ratios(rows)
    (answer,) = summary.answer(found)
    by_model = {r["model"]: r for r in rows}
    g, low, high = summary.geometric_mean(
        [
            (
                by_model[m]["overhead"],
                by_model[m]["overhead_ci_low"],
                by_model[m]["overhead_ci_high"],
            )
            for m in ("ffn", "lenet")
        ]
    )
    assert answer["geometric mean [95% CI]"] == f"{g:.2f}x [{low:.2f}, {high:.2f}]"
    assert g == pytest.approx(6**0.5, rel=0.02)


# --- findings -------------------------------------------------------------------


def _explain_run(results: Path, cell: dict[str, Any], name: str = "box") -> Path:
    folder = results / "explain-20261127-000000"
    folder.mkdir(parents=True)
    host = {"kind": "host", "host": {"machine": {"name": name}}}
    (folder / "explain.jsonl").write_text(json.dumps(host) + "\n")
    (folder / "explain.json").write_text(json.dumps({"schema": 1, "cells": [cell]}))
    return folder


def _figure(us: float) -> dict[str, float]:
    return {"us": us, "low": us * 0.9, "high": us * 1.1}


LSTM_EXPLAINED = {
    "model": "lstm",
    "framework": "torch",
    "phase": "train",
    "batch": 64,
    "total": _figure(9000.0),
    "parts": {
        "native": _figure(1000.0),
        "layers and optimizer": _figure(7200.0),
        "fit loop": _figure(500.0),
        "input conversion": _figure(300.0),
    },
}


def test_a_finding_picks_up_the_explain_record_of_its_cell(tmp_path: Path) -> None:
    _explain_run(tmp_path, LSTM_EXPLAINED)
    lstm = _ratio("lstm", 9.0, batch=64)
    (finding,) = summary.findings([lstm, _ratio("ffn", 1.2)], tmp_path, "box", "p")
    assert finding.ratio == lstm
    assert finding.command is None
    text = finding.text()
    assert "layers and optimizer 7.2 ms (80%)" in text
    assert "fit loop" not in text  # 6% of the step: below the share named
    assert "native work 11%" in text
    assert "explain-20261127-000000" in text


def test_a_finding_without_records_gives_the_command_that_explains_it(
    tmp_path: Path,
) -> None:
    # An explain run of another machine and one of another shape explain
    # nothing here.
    _explain_run(tmp_path / "a", LSTM_EXPLAINED, name="other-box")
    broken = {k: v for k, v in LSTM_EXPLAINED.items() if k != "total"}
    _explain_run(tmp_path / "b", broken)
    for results in (tmp_path / "a", tmp_path / "b", tmp_path / "none"):
        (finding,) = summary.findings(
            [_ratio("lstm", 9.0, batch=64)], results, "box", "default"
        )
        assert finding.where == ()
        assert finding.command == (
            "python -m harness explain --profile default --models lstm "
            f"--frameworks torch --phases train --results {results}"
        )


def test_a_finding_at_another_batch_asks_explain_to_sweep_it(tmp_path: Path) -> None:
    found = [_ratio("ffn", 2.0), _ratio("ffn", 30.0, phase="infer", batch=1)]
    found.append(_ratio("ffn", 5.0, phase="infer"))
    (small, _) = summary.findings(found, tmp_path, "box", "default")
    assert small.ratio.batch == 1
    assert small.command is not None
    assert small.command.endswith(" --batch-sizes 1,128")


def test_a_finding_picks_up_the_count_record_of_its_cell(tmp_path: Path) -> None:
    folder = tmp_path / "count-20261127-000000"
    folder.mkdir()
    pair = {
        "model": "ffn",
        "framework": "torch",
        "phase": "train",
        "batch": 128,
        "work_ratio": 2.5,
        "added_non_kernel": 4.6e6,
        "top_added": [["interpreter libpython _PyEval_EvalFrameDefault", 1.2e6]],
    }
    (folder / "count.json").write_text(json.dumps({"pairs": [pair]}))
    (finding,) = summary.findings([_ratio("ffn", 3.0)], tmp_path, "box", "p")
    assert finding.command is None
    assert "Keras does 2.50x native's work and adds 4.6 M" in finding.text()
    assert "_PyEval_EvalFrameDefault (1.2 M)" in finding.text()


def test_only_large_verified_overheads_are_findings_largest_first(
    tmp_path: Path,
) -> None:
    found = [_ratio(f"m{i}", 1.0 + i) for i in range(8)]
    found += [_ratio("x", 99.0, ("unverified",)), _ratio("y", 1.4)]
    found += [_ratio("z", 50.0, ("wide",))]  # too uncertain: no finding
    picked = summary.findings(found, tmp_path, "box", "p")
    assert [f.ratio.model for f in picked] == ["m7", "m6", "m5", "m4", "m3"]
    assert len(summary.large(found)) == 7  # m1 to m7: "5 of 7" in the report
    # One finding per model, framework and phase: its largest ratio.
    twice = [_ratio("ffn", 3.0), _ratio("ffn", 6.0, batch=1), _ratio("ffn", 2.0)]
    (only,) = summary.findings(twice, tmp_path, "box", "p")
    assert (only.ratio.value, only.ratio.batch) == (6.0, 1)


# --- the baseline ---------------------------------------------------------------


def _floors(
    results: Path,
    native_s: float,
    idiomatic_s: float,
    *,
    model: str = "lstm",
    batch_size: int = 64,
    spread: float = 0.01,
) -> None:
    """A floors record file: the native path's and the idiomatic step's
    three times each, ``spread`` apart around ``native_s`` and
    ``idiomatic_s``."""
    path = results / "floors-20261127-000000.jsonl"
    for api, where, seconds in (
        ("path", "native-torch", native_s),
        ("idiomatic", "idiomatic-torch", idiomatic_s),
    ):
        records.append(
            path,
            records.make(
                "f",
                "default",
                model=model,
                path=where,
                framework="torch",
                api=api,
                phase="train",
                status="ok",
                batch_size=batch_size,
                equivalence="not checked",
                values={"step_s": [seconds * (1 + d) for d in (-spread, 0, spread)]},
                summary={"median_step_s": seconds},
                platform=MACHINE,
            ),
        )


def test_keras_over_the_idiomatic_step_stands_beside_keras_over_native(
    tmp_path: Path,
) -> None:
    _floors(tmp_path, 0.1585, 0.0733)  # native 2.16x nn.LSTM's step
    floored = summary.floors(tmp_path, "box")
    assert summary.floors(tmp_path, "another-box") == {}
    (row,) = summary.baseline([_ratio("lstm", 5.7, batch=64)], floored)
    assert row["native step"] == "native slower"
    assert row["native / idiomatic"].startswith("2.16 ")
    assert row["Keras / idiomatic"].startswith(f"{5.7 * 0.1585 / 0.0733:.2f} ")
    said = summary.standing([row], floored.values())
    assert said.startswith("native slower than the idiomatic step: lstm on torch")
    assert "(Keras over the idiomatic step larger than over native there)" in said
    assert said.endswith("from floors-20261127-000000.jsonl")


# --- doubts ---------------------------------------------------------------------


def test_a_busy_a_wide_an_unverified_and_a_failed_cell_are_doubted() -> None:
    recs = (
        _pairs(2.0, summary={"contended": True})
        + _pairs(2.0, model="lenet", spread=0.4, seed=3)
        + _pairs(1.5, model="lstm", equivalence="unchecked", verified=False)
        + [
            record(
                "keras-torch",
                model="vgg16",
                status="failed",
                error="worker died: out of memory\ntraceback...",
                platform=MACHINE,
            ),
            record(
                "native-torch",
                model="gru",
                status="not-timed",
                equivalence="fail",
                platform=MACHINE,
            ),
        ]
    )
    found = doubts.of_run(recs, overhead_rows(recs))
    text = "\n".join(d.text() for d in found)
    assert "busy: ffn keras-torch train b128 (contended)" in text
    assert "busy: ffn native-torch train b128 (contended)" in text
    assert "wide: lenet train on torch b128" in text
    assert (
        "unverified: lstm keras-torch train b128 (equivalence verdict 'unchecked'"
        in text
    )
    assert (
        "failed: vgg16 keras-torch train b8 (1 of 1 repeats: worker died: out of "
        "memory)" in text
    )
    assert "held back: gru native-torch train b8 (equivalence verdict 'fail')" in text
    assert doubts.counted(found) == (
        "1 failed cell, 1 held back cell, 2 unverified cells, 2 busy cells, "
        "1 wide ratio"
    )
    quiet = _pairs(2.0)
    assert doubts.of_run(quiet, overhead_rows(quiet)) == []
    assert doubts.counted([]) == "none"


def test_a_cell_faster_than_the_peak_is_a_doubt() -> None:
    fast = _pairs(
        2.0,
        platform={**MACHINE, "matmul_peak_flops": 1e9},
        summary={"flops": 1e7},  # 1e7 FLOP in about 1 ms: 1e10 FLOP/s
    )
    found = doubts.of_run(fast, overhead_rows(fast))
    assert {d.kind for d in found} == {"above peak"}
    assert found[0].reason.endswith("of the machine's matmul peak")


def test_the_header_the_doubts_and_the_cells_table_count_alike(
    tmp_path: Path,
) -> None:
    """One computation: the header's count of busy cells is the number of
    busy lines under Doubts and of rows the cells table marks busy."""
    recs = _pairs(2.0, summary={"contended": True}) + _pairs(3.0, model="lenet", seed=1)
    path = tmp_path / "run-20261127-101500-1.jsonl"
    for r in recs:
        records.append(path, r)
    text = render_report(path, recs, "table", "overhead")
    assert "doubts: 2 busy cells (each named under Doubts, below)" in text
    assert text.count("\nbusy: ffn ") == 2
    cells_table = text[text.index("\ncells (") :]
    marked = [
        line for line in cells_table.splitlines() if line.rstrip().endswith("pass")
    ]
    assert sum("contended" in line for line in marked) == 2


# --- the report, in the order a reader asks ----------------------------------------


def test_the_report_leads_with_its_answer_and_ends_with_the_cells(
    tmp_path: Path,
) -> None:
    recs = _pairs(2.0) + _pairs(3.0, model="lenet", seed=1)
    path = tmp_path / "run-20261127-101500-1.jsonl"
    for r in recs:
        records.append(path, r)
    text = render_report(path, recs, "markdown", "overhead", ["overhead.png"])
    order = [
        "machine: box",
        "## The answer",
        "## Per model",
        "## Findings",
        "## Doubts",
        "![overhead](overhead.png)",
        "## Keras over native, every batch size",
        "## cells",
    ]
    places = [text.index(heading) for heading in order]
    assert places == sorted(places)
    assert "gate: 4 of 4 model paths pass" in text
    assert "no AVX-512" in text
    assert "(2026-11-27 10:15)" in text
    assert "lenet train on torch (batch 128): Keras/native 3.00" in text


def test_every_column_of_the_detailed_tables_is_said_in_words() -> None:
    """A column added to the cells or ratio table without its words in the
    legend (``tables.COLUMNS``) is named here."""
    recs = _pairs(2.0, summary={"contended": True, "flops": 1.0})
    rows = [*cell_rows(recs), *overhead_rows(recs)]
    shown = {key for row in tables._combine_ci(rows) for key in row}
    unsaid = sorted(
        k for k in shown if k not in tables.COLUMNS and not k.startswith("latency_")
    )
    assert not unsaid, f"say what these columns mean in tables.COLUMNS: {unsaid}"
    text = tables._with_legend(overhead_rows(recs), "table")
    assert "pairs: processes x Keras/native block pairs per process" in text
    assert "stopped: why it got no more processes" in text


def test_a_findings_command_names_the_results_folder_as_typed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "results").mkdir()
    (finding,) = summary.findings(
        [_ratio("lstm", 5.0)], tmp_path / "results", "box", "default"
    )
    assert finding.command is not None
    assert finding.command.endswith("--results results")
    assert str(tmp_path) not in finding.text()


def test_the_header_names_the_peak_its_source_and_kernel() -> None:
    peak = {
        "sources": {
            "numpy": {"status": "ok", "flops_per_s": 2e11, "kernel": "SkylakeX"},
            "jax": {"status": "ok", "flops_per_s": 2.5e11, "kernel": "xla cpu"},
            "mxnet": {"status": "skipped", "reason": "not installed"},
            "torch": {"status": "ok", "flops_per_s": "fast", "kernel": "mkl"},
        }
    }
    recs = _pairs(2.0, platform={**MACHINE, "matmul_peak": peak})
    lines = summary.header(Path("run-x.jsonl"), recs, [])
    assert (
        "matmul peak: 250 GFLOP/s float32, from jax (xla cpu); others: numpy 200; "
        "not measured: mxnet, torch" in lines
    )
    old = _pairs(2.0, platform={**MACHINE, "matmul_peak_flops": 1e11})
    assert "matmul peak: 100 GFLOP/s float32 (NumPy's BLAS, kernel unknown)" in (
        summary.header(Path("run-x.jsonl"), old, [])
    )
