"""What ``harness report`` reads beside a run, when it is hostile (issue 76):
an explain run's ``explain.json`` and ``explain.jsonl``, an ops run's
``ops.json``, a count run's ``count.json`` and the run's matmul peak.

Each is read through ``zoo.files`` within a limit and checked field by field
before a figure of it is printed: a FIFO never hangs the report, a link to
/dev/zero is never read, JSON that does not parse or a field out of range
is named once on stderr in one sentence, and the rest of the report goes on
(exit 0).  A plot's file name takes each part that comes from a record
through ``files.file_name``, and one plot that cannot be written is named
on stderr while the others are written.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.__main__ import main
from harness.core import jsonl, records
from harness.core.peak import MAX_FLOPS_PER_S
from harness.report import summary
from tests.helpers import record, within
from tests.test_report_folder import _run
from tests.test_report_summary import MACHINE, _pairs
from zoo import files

EXPLAIN = "explain-20261127-000000-1"
OPS = "ops-20261127-000000-1"
COUNT = "count-20261127-000000-1"

GOOD_CELL = {
    "model": "ffn",
    "framework": "torch",
    "phase": "train",
    "batch": 8,
    "paths": ["keras-torch", "native-torch"],
}
GOOD_OPS = {
    "run": OPS,
    "profile": "smoke",
    "matmul_peak_flops": 1e11,
    "host": {},
    "verdicts": [],
    "rows": [],
    "overheads": [],
}


@pytest.fixture(autouse=True)
def _fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test hears every warning (``jsonl.warn`` says each one once per
    process)."""
    monkeypatch.setattr(jsonl, "_said", set())


def _results(tmp_path: Path, ratio: float = 30.0) -> Path:
    """A results folder with one paired run (Keras ``ratio`` times native:
    a finding, so the report reads explain and count runs too)."""
    _run(tmp_path, _pairs(ratio))
    return tmp_path


def _explain(results: Path, analysis: Any = None, host: Any = None) -> Path:
    folder = results / EXPLAIN
    folder.mkdir()
    first = {"kind": "host", "host": {"machine": {"name": "box"}} | (host or {})}
    (folder / "explain.jsonl").write_text(json.dumps(first) + "\n")
    cells = {"schema": 1, "cells": [GOOD_CELL]}
    (folder / "explain.json").write_text(json.dumps(analysis or cells))
    return folder


def _ops(results: Path, analysis: dict[str, Any] | None = None) -> Path:
    folder = results / OPS
    folder.mkdir()
    (folder / "gate.jsonl").write_text("")
    (folder / "ops.json").write_text(json.dumps(analysis or GOOD_OPS))
    return folder


def _report(results: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """``harness report RESULTS --format markdown``: exit 0 within a minute,
    and its stdout and stderr."""
    with within(60):
        assert main(["report", str(results), "--format", "markdown"]) == 0
    found = capsys.readouterr()
    return found.out, found.err


def _fifo(path: Path) -> None:
    path.unlink()
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.unlink()
    path.symlink_to("/dev/zero")


def _garbage(path: Path) -> None:
    path.write_text('{"cells": [')


SPOILS: dict[str, Callable[[Path], None]] = {
    "a FIFO": _fifo,
    "a link to /dev/zero": _dev_zero,
    "no JSON": _garbage,
}


# --- the files are read through the door ----------------------------------------


def test_good_explain_and_ops_runs_are_shown(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = _results(tmp_path)
    _explain(results)
    _ops(results)
    out, err = _report(results, capsys)
    assert "### ffn train on torch (batch 8)" in out
    assert f"## Operators ({OPS}, profile smoke)" in out
    assert "warning" not in err


@pytest.mark.parametrize("spoil", list(SPOILS))
@pytest.mark.parametrize("name", ["explain.json", "explain.jsonl"])
def test_a_hostile_explain_file_is_named_once_and_the_report_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil: str, name: str
) -> None:
    results = _results(tmp_path)
    SPOILS[spoil](_explain(results) / name)
    _ops(results)
    out, err = _report(results, capsys)
    assert "## The answer" in out
    assert "## Operators" in out  # the rest of the report
    if name == "explain.json":  # the explain section reads no host
        assert "### ffn train on torch" not in out
    said = [line for line in err.splitlines() if str(results / EXPLAIN) in line]
    assert len(said) == 1, err
    assert said[0].startswith(f"warning: {results / EXPLAIN / name}")
    assert "Traceback" not in err


@pytest.mark.parametrize("spoil", list(SPOILS))
def test_a_hostile_ops_json_is_named_once_and_the_report_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil: str
) -> None:
    results = _results(tmp_path)
    _explain(results)
    SPOILS[spoil](_ops(results) / "ops.json")
    out, err = _report(results, capsys)
    assert "### ffn train on torch (batch 8)" in out
    assert "## Operators" not in out
    said = [line for line in err.splitlines() if "ops.json" in line]
    assert len(said) == 1, err
    assert said[0].startswith(f"warning: {results / OPS / 'ops.json'}")
    assert said[0].endswith("the operators section is left out")


@pytest.mark.parametrize("spoil", list(SPOILS))
def test_a_hostile_count_json_is_named_once_and_the_findings_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil: str
) -> None:
    results = _results(tmp_path)
    folder = results / COUNT
    folder.mkdir()
    (folder / "count.json").write_text(json.dumps({"pairs": []}))
    SPOILS[spoil](folder / "count.json")
    out, err = _report(results, capsys)
    assert "not explained yet" in out  # the finding, with its command
    said = [line for line in err.splitlines() if "count.json" in line]
    assert len(said) == 1, err
    assert said[0].startswith(f"warning: {folder / 'count.json'}")


# --- every field the report prints is checked -------------------------------------

OUT_OF_RANGE = {
    "a time of 1e300 µs": {
        **GOOD_CELL,
        "parts": {"native": {"us": 1e300, "low": 1.0, "high": 2.0}},
        "total": {"us": 2.0, "low": 1.0, "high": 3.0},
        "ratio": {"value": 1.0, "low": 1.0, "high": 1.0},
        "sum_of_parts_us": 2.0,
        "closure": 0.0,
        "processes": 1,
        "blocks": 1,
    },
    "a Keras step of 0 µs": {
        **GOOD_CELL,
        "parts": {"native": {"us": 1.0, "low": 1.0, "high": 2.0}},
        "total": {"us": 0.0, "low": 0.0, "high": 0.0},
        "ratio": {"value": 1.0, "low": 1.0, "high": 1.0},
        "sum_of_parts_us": 2.0,
        "closure": 0.0,
        "processes": 1,
        "blocks": 1,
    },
    "a 7 MB model name": {**GOOD_CELL, "model": "m" * 7_000_000},
    "a batch as text": {**GOOD_CELL, "batch": "8"},
    "a busy cell without its requests": {**GOOD_CELL, "contended": 3},
    "a profile without its profiler": {**GOOD_CELL, "profile": {"keras-torch": {}}},
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_an_explain_cell_out_of_range_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    results = _results(tmp_path, ratio=1.0)
    other = {**GOOD_CELL, "model": "lenet"}
    _explain(results, {"cells": [OUT_OF_RANGE[case], other]})
    out, err = _report(results, capsys)
    assert "### lenet train on torch (batch 8)" in out
    assert "### ffn" not in out
    assert "mmmmmmmmmm" not in out
    assert f"skipped 1 cell of {results / EXPLAIN / 'explain.json'}" in err


@pytest.mark.parametrize(
    "spoiled",
    [
        {"matmul_peak_flops": 1e300},
        {"matmul_peak_flops": -1.0},
        {"framework_peaks": {"jax": float("inf")}},
        {"profile": "p" * 7_000_000},
        {"rows": [{"op": "matmul", "case": "a", "direction": "forward"}]},
        {"overheads": [{"backend": "theano"}]},
        {"verdicts": [{"op": "matmul", "path": "x", "ok": "yes", "examples": 1}]},
    ],
)
def test_an_ops_json_out_of_range_is_refused_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoiled: dict[str, Any]
) -> None:
    results = _results(tmp_path, ratio=1.0)
    _ops(results, GOOD_OPS | spoiled)
    out, err = _report(results, capsys)
    assert "## Operators" not in out
    assert "ppppppppp" not in out + err
    (said,) = [line for line in err.splitlines() if "ops.json" in line]
    assert "is not an ops analysis the report can show" in said


def test_ops_render_says_a_bad_ops_json_in_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``harness ops`` reads back the ops.json it rendered the same way."""
    from harness.ops.report import load

    folder = _ops(tmp_path, GOOD_OPS | {"matmul_peak_flops": 1e300})
    with pytest.raises(ValueError, match="is not an ops analysis") as refused:
        load(folder)
    assert "\n" not in str(refused.value)
    _fifo(folder / "ops.json")
    with within(10), pytest.raises(ValueError, match="a FIFO"):
        load(folder)


# --- the matmul peak in the header ------------------------------------------------


def _peak(rate: float, kernel: str = "openblas 0.3.29 SkylakeX") -> dict[str, Any]:
    source = {"status": "ok", "flops_per_s": rate, "kernel": kernel}
    return {
        **MACHINE,
        "matmul_peak_flops": rate,
        "matmul_peak": {"flops_per_s": rate, "sources": {"numpy": source}},
    }


@pytest.mark.parametrize(
    "platform",
    [
        _peak(-1e12),  # once -1000 GFLOP/s
        _peak(1e300),  # once 291 digits
        _peak(MAX_FLOPS_PER_S * 10),
        _peak(1e11, kernel="k" * 7_000_000),
        {**MACHINE, "matmul_peak_flops": 1e300},
    ],
)
def test_a_record_with_an_impossible_peak_is_skipped_and_never_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], platform: dict[str, Any]
) -> None:
    out = _run(tmp_path, [*_pairs(2.0), *_pairs(2.0, model="lenet", platform=platform)])
    found = records.scan(out)
    assert {r.model for r in found.records} == {"ffn"}
    assert found.skipped
    report, err = _report(tmp_path, capsys)
    assert "matmul peak: not measured" in report
    assert "-1000 GFLOP/s" not in report
    assert "kkkkkkkkkk" not in report
    assert max(len(line) for line in report.splitlines()) < 2000
    assert f"skipped {len(found.skipped)} lines of {out}" in err


def test_the_header_shows_a_peak_in_range_and_not_one_made_outside(
    tmp_path: Path,
) -> None:
    """A record made in code (not read) with an impossible source is checked
    again by the header: its figure is never printed."""
    good = record(platform=_peak(2e11))
    assert summary._peak([good]).startswith("200 GFLOP/s float32, from numpy")
    for platform in (_peak(1e300), _peak(-1e12), _peak(1e11, kernel="k" * 300)):
        made = record(platform=platform)
        said = summary._peak([made])
        assert "GFLOP/s float32, from" not in said
        assert len(said) < 200


# --- plot names -------------------------------------------------------------------


def test_a_plot_name_from_a_record_keeps_no_folder(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from harness.report.plots import explain_bars, op_curves

    out = tmp_path / "plots"
    cell = {
        "framework": "../../torch",
        "phase": "train",
        "batch": 8,
        "parts": {"native": {"us": 10.0, "low": 9.0, "high": 11.0}},
    }
    written = explain_bars([{**cell, "model": "../../../etc/x"}], out)
    row = {
        "op": "a/../../b",
        "path": "keras-torch",
        "direction": "forward",
        "status": "ok",
        "work": 10.0,
        "call_s": 1e-6,
        "low_s": 1e-6,
        "high_s": 1e-6,
        "compute_bound": True,
    }
    written += op_curves([row], out)
    assert [p.parent for p in written] == [out, out]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]


def test_one_plot_that_cannot_be_written_is_named_and_the_others_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from harness.report.plots import explain_bars

    out = tmp_path / "plots"
    (out / "explain-bad-torch.png").mkdir(parents=True)  # in the way
    part = {"native": {"us": 10.0, "low": 9.0, "high": 11.0}}
    cells = [
        {"model": m, "framework": "torch", "phase": "train", "batch": 8, "parts": part}
        for m in ("bad", "good", "$\\frac$")  # a math parser's error, once
    ]
    written = explain_bars(cells, out)
    assert [p.name for p in written] == [
        "explain-good-torch.png",
        f"explain-{files.file_name('$' + chr(92) + 'frac$')}-torch.png",
    ]
    err = capsys.readouterr().err
    (said,) = err.splitlines()
    assert said.startswith("warning: the explain plot of 'bad' on 'torch' is not")
    assert said.endswith("the other plots are written")


def test_report_plots_goes_on_past_a_model_name_matplotlib_cannot_parse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    out = _run(tmp_path, [*_pairs(2.0), *_pairs(3.0, model="$\\frac$/../../x")])
    folder = tmp_path / "report"
    with within(120):
        assert main(["report", str(out), "--plots", str(folder)]) == 0
    capsys.readouterr()
    assert (folder / "overhead.png").is_file()  # both models in one figure
    assert (folder / "report.html").is_file()
