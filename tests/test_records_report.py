from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path

import pytest

from harness import records
from harness.__main__ import main
from harness.report import cell_rows, overhead_rows, report


def _record(
    model: str, path: str, phase: str, value: float, status: str = "ok"
) -> records.Record:
    framework = path.split("-", 1)[1]
    summary = (
        {"median_step_s": value, "first_step_s": 1.0}
        if phase == "train"
        else {"batches_per_s": 1.0 / value, "median_batch_s": value}
    )
    return records.Record(
        run_id="r",
        profile="test",
        model=model,
        path=path,
        framework=framework,
        api=path.split("-", maxsplit=1)[0],
        phase=phase,
        status=status,
        batch_size=8,
        equivalence="pass",
        verified=True,
        summary=summary if status == "ok" else {},
        error=None if status == "ok" else "boom",
    )


def _write(tmp_path: Path) -> Path:
    out = tmp_path / "run-1.jsonl"
    for rec in [
        _record("ffn", "keras-torch", "train", 0.003),
        _record("ffn", "native-torch", "train", 0.002),
        _record("ffn", "keras-torch", "infer", 0.010),
        _record("ffn", "native-torch", "infer", 0.004),
        _record("ffn", "keras-jax", "train", 0.001),
        _record("ffn", "keras-tensorflow", "train", 0.0, status="crashed"),
    ]:
        records.append(out, rec)
    return out


def test_records_append_and_survive_a_torn_line(tmp_path: Path) -> None:
    out = _write(tmp_path)
    with out.open("a") as f:
        f.write('{"model": "half a rec')  # a crash in the middle of a write
    recs = records.read(out)
    assert len(recs) == 6
    assert recs[0]["schema_version"] == records.SCHEMA_VERSION


def test_overhead_is_keras_over_native_per_framework(tmp_path: Path) -> None:
    rows = {
        (r["framework"], r["phase"]): r
        for r in overhead_rows(records.read(_write(tmp_path)))
    }
    assert rows["torch", "train"]["overhead"] == pytest.approx(1.5)
    assert rows["torch", "infer"]["overhead"] == pytest.approx(2.5)
    assert rows["jax", "train"]["native_ms"] is None
    assert rows["jax", "train"]["overhead"] is None
    assert rows["tensorflow", "train"]["keras_ms"] is None  # the crashed cell


def test_csv_and_json_carry_the_same_rows(tmp_path: Path) -> None:
    out = _write(tmp_path)
    as_json = json.loads(report(out, "json", "overhead"))
    as_csv = list(csv.DictReader(io.StringIO(report(out, "csv", "overhead"))))
    assert [r["overhead"] for r in as_json] == [
        float(r["overhead"]) if r["overhead"] else None for r in as_csv
    ]
    text = report(out, "table", "overhead")
    assert "native-torch" in text
    assert "crashed" in text


def test_cli_errors_are_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--models", "resnet", "--results", str(tmp_path)]) == 2
    assert "unknown model resnet; known models: ffn" in capsys.readouterr().err
    assert main(["run", "--paths", "keras-caffe", "--results", str(tmp_path)]) == 2
    assert "unknown path keras-caffe" in capsys.readouterr().err
    assert main(["run", "--profile", "huge", "--results", str(tmp_path)]) == 2
    assert "known profiles: smoke" in capsys.readouterr().err
    assert main(["report", "--results", str(tmp_path / "none")]) == 2
    assert "no run records" in capsys.readouterr().err


def test_unverified_times_are_marked_in_every_row(tmp_path: Path) -> None:
    out = _write(tmp_path)
    forced = dataclasses.replace(
        _record("ffn", "native-torch", "train", 0.002),
        equivalence="fail",
        verified=False,
    )
    records.append(out, forced)
    recs = records.read(out)
    cells = {(r["path"], r["phase"]): r for r in cell_rows(recs)}
    assert cells["native-torch", "train"]["mark"] == "unverified"
    assert cells["keras-torch", "train"]["mark"] is None
    overhead = {(r["framework"], r["phase"]): r for r in overhead_rows(recs)}
    assert overhead["torch", "train"]["mark"] == "unverified"
    assert overhead["torch", "infer"]["mark"] is None
    assert "unverified" in report(out, "table", "overhead")


def test_a_cell_the_gate_held_back_has_no_time(tmp_path: Path) -> None:
    out = tmp_path / "run-2.jsonl"
    held = dataclasses.replace(
        _record("ffn", "native-torch", "train", 0.0, status="not-timed"),
        equivalence="fail",
        verified=False,
    )
    records.append(out, held)
    (row,) = cell_rows(records.read(out))
    assert row["status"] == "not-timed"
    assert row["time_ms"] is None
    assert row["mark"] is None  # nothing measured, nothing to mark
