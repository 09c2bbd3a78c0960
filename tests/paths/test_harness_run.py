"""``harness run`` end to end on the smallest model, every path, both phases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import records
from harness.paths import OPTIONAL_FRAMEWORKS, PATHS, PHASES
from harness.profiles import PROFILES
from harness.report import report
from harness.run import run

pytestmark = pytest.mark.paths


def test_smoke_run_records_every_cell(tmp_path: Path) -> None:
    verdicts = tmp_path / "equivalence.json"
    verdicts.write_text(json.dumps({"models": {"ffn": {"native-torch": "pass"}}}))
    out = run(
        PROFILES["smoke"],
        models=["ffn"],
        paths=list(PATHS),
        phases=list(PHASES),
        results_dir=tmp_path,
        verdicts_path=verdicts,
    )
    recs = records.read(out)
    assert {(r["path"], r["phase"]) for r in recs} == {
        (p, ph) for p in PATHS for ph in PHASES
    }
    for r in recs:
        optional = PATHS[r["path"]].framework in OPTIONAL_FRAMEWORKS
        allowed = ("ok", "unavailable") if optional else ("ok",)
        assert r["status"] in allowed, (r["path"], r["error"])
    by_path = {(r["path"], r["phase"]): r for r in recs}
    train = by_path["native-torch", "train"]
    assert train["equivalence"] == "pass"
    assert by_path["keras-jax", "train"]["equivalence"] == "not checked"
    assert len(train["values"]["step_s"]) == PROFILES["smoke"].settings("ffn").repeats
    assert train["platform"]["framework"] == "torch"
    assert train["platform"]["cpu_count"] >= 1
    text = report(out, "table", "overhead")
    assert "keras-jax" in text
    assert "overhead" in text


def test_floors_time_every_native_path_against_its_idiomatic_step(
    tmp_path: Path,
) -> None:
    from harness.floors import floors, native_frameworks

    out, rows = floors(
        PROFILES["smoke"],
        models=["ffn"],
        frameworks=native_frameworks(),
        results_dir=tmp_path,
    )
    assert [r["framework"] for r in rows] == native_frameworks()
    assert all(r["native/idiomatic"] is not None for r in rows), rows
    recs = records.read(out)
    assert {r["api"] for r in recs} == {"path", "idiomatic"}
    assert all(len(r["values"]["step_s"]) == 1 for r in recs)
