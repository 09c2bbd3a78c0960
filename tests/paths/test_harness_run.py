"""``harness run`` end to end on the smallest model, every path, both phases."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

import harness.bench.run
from harness.bench.run import run
from harness.core import records
from harness.core.gate import verify
from harness.core.profiles import PROFILES
from harness.report.analysis import overhead_rows
from harness.report.tables import report
from tests.tiers import COMMAND_FRAMEWORK, Sizes, full_only
from workers.paths import OPTIONAL_FRAMEWORKS, PATHS, PHASES

pytestmark = pytest.mark.paths

# The smoke profile with NumPy's matmul peak alone: a framework's own peak
# probe starts its framework once more per run (the front door's run,
# tests/paths/test_front_door.py, times PyTorch's).
SMOKE = PROFILES["smoke"].model_copy(update={"peak_frameworks": False})


@pytest.mark.sized
def test_smoke_run_records_every_cell_behind_the_gate(
    gated: Path, capsys: pytest.CaptureFixture[str], size: Sizes
) -> None:
    full_only(
        size,
        "harness run through every path (27 s); the fast tier runs nox -s "
        "bench's own commands through PyTorch (test_front_door.py)",
    )
    out = run(
        SMOKE,
        models=["ffn"],
        paths=list(PATHS),
        phases=list(PHASES),
        results_dir=gated,
    )
    assert "equivalence ffn: cached verdicts still valid" in capsys.readouterr().err
    recs = records.read(out)
    assert {(r.path, r.phase) for r in recs} == {
        (p, ph) for p in PATHS for ph in PHASES
    }
    for r in recs:
        optional = PATHS[r.path].framework in OPTIONAL_FRAMEWORKS
        allowed = ("ok", "unavailable") if optional else ("ok",)
        assert r.status in allowed, (r.path, r.error)
        if r.status == "ok":
            assert (r.equivalence, r.verified) == ("pass", True), r.path
    by_path = {(r.path, r.phase): r for r in recs}
    train = by_path["native-torch", "train"]
    # Keras and native torch shared one process: its paired blocks, at least
    # the smoke profile's pair_min_blocks, one sample each.
    assert train.values["partner"] == "keras-torch"
    assert len(train.values["step_s"]) >= 3
    assert len(by_path["keras-torch", "train"].values["step_s"]) == len(
        train.values["step_s"]
    )
    assert by_path["native-mxnet", "train"].values.get("partner") is None
    assert train.repeat == 0
    assert train.summary["flops"] > 0
    assert train.summary["cpu_util"] > 0
    assert train.summary["peak_rss_mb"] > 0
    # getrusage around every timed block and run: per step, in every record
    for r in recs:
        if r.status == "ok":
            assert len(r.values["usage"]) >= 1, r.path
            assert r.summary["usage_user_s"] > 0, r.path
    assert train.platform["matmul_peak_flops"] > 0
    assert train.platform["threads"]["intra_op"] >= 1
    assert train.platform["framework"] == "torch"
    assert train.platform["cpu_count"] >= 1
    assert train.platform["numerics"]["deterministic"] is False
    text = report(out, "table", "overhead")
    assert "keras-jax" in text
    assert "overhead" in text
    # No row marked unverified and no unverified cell among the doubts (the
    # legend above the per-model table names the mark).
    assert all("unverified" not in (row["mark"] or "") for row in overhead_rows(recs))
    assert "unverified:" not in text
    passed = len({r.path for r in recs if r.equivalence == "pass"})
    assert f"gate: {passed} of {len(PATHS)} model paths pass" in text
    # The verdicts are cached: a second gate reuses them without a check.
    lines: list[str] = []
    again = verify(["ffn"], ["native-torch"], gated, log=lines.append)
    assert again == {"ffn": {"native-torch": "pass"}}
    assert lines == ["equivalence ffn: cached verdicts still valid"]


def _failing_gate(*args: object, **kwargs: object) -> dict[str, dict[str, str]]:
    return {"ffn": {"keras-torch": "pass", "native-torch": "fail"}}


def test_the_gate_holds_back_an_unverified_path_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(harness.bench.run, "verify", _failing_gate)
    kwargs = {
        "models": ["ffn"],
        "paths": ["keras-torch", "native-torch"],
        "phases": ["train"],
        "results_dir": tmp_path,
    }
    held = {r.path: r for r in records.read(run(SMOKE, **kwargs))}
    assert held["native-torch"].status == "not-timed"
    assert "--allow-unverified" in held["native-torch"].error
    assert not held["native-torch"].values
    assert (held["keras-torch"].status, held["keras-torch"].verified) == (
        "ok",
        True,
    )
    out = run(SMOKE, allow_unverified=True, **kwargs)
    forced = {r.path: r for r in records.read(out)}
    assert forced["native-torch"].status == "ok"
    assert forced["native-torch"].verified is False
    assert forced["native-torch"].equivalence == "fail"
    assert "unverified" in report(out, "table", "overhead")


@pytest.mark.sized
def test_floors_time_every_native_path_against_its_idiomatic_step(
    tmp_path: Path, size: Sizes
) -> None:
    from harness.bench.floors import floors, native_frameworks

    # a command through one framework in the fast tier, every one in the full
    frameworks = native_frameworks() if size.full_only else [COMMAND_FRAMEWORK]
    out, rows = floors(
        PROFILES["smoke"],
        models=["ffn"],
        frameworks=frameworks,
        results_dir=tmp_path,
        runs=1,
    )
    assert [r["framework"] for r in rows] == frameworks
    assert all(r["native/idiomatic"] is not None for r in rows), rows
    recs = records.read(out)
    assert {r.api for r in recs} == {"path", "idiomatic"}
    assert all(len(r.values["step_s"]) == 1 for r in recs)


@pytest.mark.sized
def test_an_interrupted_run_resumes_without_redoing_finished_cells(
    gated: Path, size: Sizes
) -> None:
    full_only(
        size,
        "a resumed harness run through real workers (10 s); the fast tier "
        "resumes runs with stand-in workers (tests/test_hostile_run.py)",
    )
    kwargs = {
        "models": ["ffn"],
        "paths": ["native-torch", "keras-torch"],
        "phases": list(PHASES),
        "results_dir": gated,
    }
    out = run(SMOKE, **kwargs)
    lines = out.read_text().splitlines()
    assert len(lines) == 4
    out.write_text("\n".join(lines[:2]) + '\n{"model": "ffn", "torn')  # a crash
    again = run(SMOKE, resume=out, **kwargs)
    assert again == out
    recs = records.read(out)
    cells = [(r.path, r.phase, r.repeat) for r in recs]
    assert sorted(cells) == sorted(
        (p, ph, 0) for p in ("native-torch", "keras-torch") for ph in PHASES
    )
    kept = [json.loads(line) for line in lines[:2]]
    assert [dataclasses.asdict(r) for r in recs[:2]] == kept  # kept as they were


def test_selfcheck_times_a_step_with_both_timers(tmp_path: Path) -> None:
    from harness.bench.selfcheck import selfcheck

    (row,) = selfcheck(tmp_path, ("native-torch",), pairs=6)
    assert row["harness_ms"] > 0
    assert row["reference_ms"] > 0
    assert row["timer_overhead_%"] >= 0
    assert row["reference_timer"].startswith("torch.utils.benchmark")
