from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.__main__ import main
from harness.core import records
from harness.core.profiles import PROFILES
from harness.report.analysis import cell_rows, cpu_per_step, overhead_rows
from harness.report.tables import report
from tests.helpers import record
from tests.test_report_html import _external_references


def _write(tmp_path: Path) -> Path:
    out = tmp_path / "run-1.jsonl"
    for rec in [
        record("keras-torch", seconds=0.003),
        record("native-torch", seconds=0.002),
        record("keras-torch", "infer", seconds=0.010),
        record("native-torch", "infer", seconds=0.004),
        record("keras-jax", seconds=0.001),
        record("keras-tensorflow", status="crashed", error="boom"),
    ]:
        records.append(out, rec)
    return out


def test_records_append_and_survive_a_torn_line(tmp_path: Path) -> None:
    out = _write(tmp_path)
    with out.open("a") as f:
        f.write('{"model": "half a rec')  # a crash in the middle of a write
    recs = records.read(out)
    assert len(recs) == 6
    assert all(isinstance(r, records.Record) for r in recs)
    assert recs[0].schema_version == records.SCHEMA_VERSION
    assert recs[-1] == record("keras-tensorflow", status="crashed", error="boom")


def test_overhead_is_keras_over_native_per_framework(tmp_path: Path) -> None:
    out = _write(tmp_path)
    records.append(out, record("native-mxnet", seconds=0.002))
    rows = {(r["framework"], r["phase"]): r for r in overhead_rows(records.read(out))}
    assert ("mxnet", "train") not in rows  # MXNet has no Keras backend
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


def test_report_takes_a_results_folder_for_its_records_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path)
    assert main(["report", "--results", str(tmp_path), "--format", "json"]) == 0
    by_option = capsys.readouterr().out
    assert main(["report", str(tmp_path), "--format", "json"]) == 0
    assert capsys.readouterr().out == by_option  # its newest run, as --results
    assert main(["report", str(tmp_path), "--check"]) == 1  # a crashed cell
    assert "crashed" in capsys.readouterr().err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert capsys.readouterr().err == (
        f"error: no run records in {empty}; run 'python -m harness run' first\n"
    )
    gone = tmp_path / "gone"
    assert main(["report", str(gone)]) == 2
    assert capsys.readouterr().err == (
        f"error: {gone} does not exist; give a records file (run-*.jsonl) or a "
        "results folder\n"
    )


def test_unverified_times_are_marked_in_every_row(tmp_path: Path) -> None:
    out = _write(tmp_path)
    forced = record("native-torch", seconds=0.002, equivalence="fail")
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
    held = record("native-torch", status="not-timed", equivalence="fail")
    records.append(out, held)
    (row,) = cell_rows(records.read(out))
    assert row["status"] == "not-timed"
    assert row["time_ms"] is None
    assert row["mark"] is None  # nothing measured, nothing to mark


def _timed(
    path: str,
    phase: str,
    samples: list[float],
    batch_size: int = 8,
    *,
    summary: dict[str, object] | None = None,
    platform: dict[str, object] | None = None,
) -> records.Record:
    values: dict[str, object] = (
        {"step_s": samples}
        if phase == "train"
        else {"round_s": [2 * s for s in samples], "batches_per_round": 2}
    )
    timed = record(
        path,
        phase,
        seconds=samples[0],
        model="lenet",
        batch_size=batch_size,
        platform=platform,
        values=values,
    )
    return dataclasses.replace(timed, summary={**timed.summary, **(summary or {})})


def test_repeats_of_a_cell_are_pooled(tmp_path: Path) -> None:
    out = tmp_path / "run-3.jsonl"
    train_0 = _timed("native-torch", "train", [0.001, 0.002, 0.003])
    records.append(out, train_0)
    train_1 = _timed("native-torch", "train", [0.004, 0.005])
    records.append(out, dataclasses.replace(train_1, repeat=1))
    records.append(out, _timed("native-torch", "infer", [0.001, 0.001, 0.001]))
    failed = _timed("native-torch", "train", [1.0])
    records.append(out, dataclasses.replace(failed, status="error", repeat=2))
    rows = {r["phase"]: r for r in cell_rows(records.read(out))}
    train, infer = rows["train"], rows["infer"]
    assert (train["n"], train["runs"], train["status"]) == (5, 2, "ok (2/3: 1 error)")
    assert train["time_ms"] == pytest.approx(3.0)
    assert train["iqr_ms"] == pytest.approx(2.0)
    assert train["ci_low_ms"] <= 3.0 <= train["ci_high_ms"]
    assert train["unstable"] == "IQR 67% of median"
    assert infer["time_ms"] == pytest.approx(1.0)  # each round is two batches
    assert infer["unstable"] is None


def test_a_repeat_redone_after_a_crash_counts_once(tmp_path: Path) -> None:
    """A resumed run redoes repeat 1, which crashed: 2 of 2 repeats are ok,
    not "ok (2/3)"."""
    out = tmp_path / "run-4.jsonl"
    first = _timed("native-torch", "train", [0.001, 0.002])
    records.append(out, first)
    crashed = dataclasses.replace(first, repeat=1, status="crashed", values={})
    records.append(out, crashed)
    records.append(out, dataclasses.replace(first, repeat=1))
    (row,) = cell_rows(records.read(out))
    assert (row["runs"], row["status"]) == (2, "ok")
    # The crash alone, never redone, still shows.
    records.append(out, dataclasses.replace(crashed, repeat=2))
    (row,) = cell_rows(records.read(out))
    assert (row["runs"], row["status"]) == (2, "ok (2/3: 1 crashed)")


def test_a_diverged_cell_is_shown_as_diverged_and_not_timed(tmp_path: Path) -> None:
    out = tmp_path / "run-5.jsonl"
    good = _timed("native-torch", "train", [0.001, 0.002])
    records.append(out, good)
    diverged = dataclasses.replace(
        _timed("keras-torch", "train", [0.001, 0.002]),
        status="diverged",
        error="not finite: loss nan after the last timed run",
    )
    records.append(out, diverged)
    rows = {r["path"]: r for r in cell_rows(records.read(out))}
    assert rows["keras-torch"]["status"] == "diverged"
    assert rows["keras-torch"]["time_ms"] is None
    assert rows["native-torch"]["status"] == "ok"
    text = report(out, "table", "cells")
    assert "diverged" in text


def test_records_from_different_environments_are_not_pooled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env: dict[str, object] = {
        "git_revision": "abc",
        "framework_version": "2.13.0",
        "threads": {"intra_op": 2},
    }
    same = tmp_path / "run-same.jsonl"
    for repeat in range(2):
        timed = _timed("native-torch", "train", [0.001], platform=dict(env))
        records.append(same, dataclasses.replace(timed, repeat=repeat))
    records.append(  # a measured quantity may differ, and a failed repeat
        same,
        dataclasses.replace(
            _timed("native-torch", "train", [0.001], platform={**env, "peak": 1.0}),
            repeat=2,
        ),
    )
    assert records.pooling_conflict(records.read(same)) is None
    assert cell_rows(records.read(same))[0]["n"] == 3
    # every worker's own empty compile cache is no difference; another
    # numeric setting is
    caches = [
        _timed(
            "native-torch",
            "train",
            [0.001],
            platform={**env, "numerics": {"inductor_cache_dir": f"/tmp/c{i}", **more}},
        )
        for i, more in enumerate([{}, {}, {"torch_automatic_dynamic_shapes": True}])
    ]
    assert records.pooling_conflict(caches[:2]) is None
    assert "torch_automatic_dynamic_shapes" in (records.pooling_conflict(caches) or "")

    for key, value in [
        ("git_revision", "def"),
        ("framework_version", "2.12.0"),
        ("threads", {"intra_op": 1}),
    ]:
        mixed = tmp_path / f"run-{key}.jsonl"
        records.append(mixed, _timed("native-torch", "train", [0.001], platform=env))
        other = _timed("native-torch", "train", [0.001], platform={**env, key: value})
        records.append(mixed, dataclasses.replace(other, repeat=1))
        assert key in (records.pooling_conflict(records.read(mixed)) or "")
        assert main(["report", str(mixed)]) == 2
        err = capsys.readouterr().err
        assert "refusing to pool the records of lenet native-torch train b8" in err
        assert f"platform.{key}" in err

    steps = tmp_path / "run-steps.jsonl"
    records.append(steps, _timed("native-torch", "train", [0.001]))
    records.append(
        steps,
        dataclasses.replace(
            _timed("native-torch", "train", [0.001]), settings={"steps": 3}, repeat=1
        ),
    )
    with pytest.raises(ValueError, match="differ in settings"):
        cell_rows(records.read(steps))


def test_optional_measurements_enter_the_table_when_present(tmp_path: Path) -> None:
    out = tmp_path / "run-4.jsonl"
    fast = {"flops": 2e9, "latency_p50_s": 0.001, "latency_p99_s": 0.004}
    records.append(
        out,
        _timed(
            "native-torch",
            "infer",
            [0.001] * 5,
            summary={**fast, "resources": {"cpu_util": 0.9, "peak_rss_mb": 512.0}},
            platform={"matmul_peak_flops": 1e12},
        ),
    )
    records.append(
        out,
        _timed(
            "keras-torch",
            "infer",
            [0.01] * 5,
            summary={"flops": 2e9, "peak_gpu_mb": 900.0},
            platform={"matmul_peak_flops": 1e12},
        ),
    )
    rows = {r["path"]: r for r in cell_rows(records.read(out))}
    native, keras = rows["native-torch"], rows["keras-torch"]
    assert native["peak_frac"] == pytest.approx(2.0)
    assert native["check"] == "above peak"
    assert keras["peak_frac"] == pytest.approx(0.2)
    assert keras["check"] is None
    assert native["latency_p50_ms"] == pytest.approx(1.0)
    assert native["latency_p99_ms"] == pytest.approx(4.0)
    assert native["latency_p90_ms"] is None
    assert (native["cpu_util"], native["peak_rss_mb"]) == (0.9, 512.0)
    assert (native["peak_gpu_mb"], keras["peak_gpu_mb"]) == (None, 900.0)
    text = report(out, "table", "cells")
    assert "above peak" in text
    assert "latency_p99_ms" in text
    assert "latency_p90_ms" not in text  # a column nobody recorded is left out
    # Without the optional fields the same columns are simply absent.
    assert "peak_frac" not in report(_write(tmp_path), "table", "cells")


def _used(path: str, wall: float, user: float, system: float, repeat: int) -> Any:
    usage = {"usage_user_s": user, "usage_sys_s": system, "usage_minflt": 2.0}
    return record(
        path,
        seconds=wall,
        repeat=repeat,
        summary={"median_step_s": wall, **usage},
    )


def test_cpu_time_per_step_splits_wall_time(tmp_path: Path) -> None:
    out = tmp_path / "run-5.jsonl"
    for repeat, user in enumerate([0.0020, 0.0024, 0.0022]):
        records.append(out, _used("keras-torch", 0.003, user, 0.0002, repeat))
    records.append(out, record("native-torch", seconds=0.001))  # no usage: none
    found = cpu_per_step(records.read(out))
    assert set(found) == {("ffn", "keras-torch", "train", 8)}
    cell = found[("ffn", "keras-torch", "train", 8)]
    assert cell["user_s"] == pytest.approx(0.0022)  # the median of the repeats
    assert cell["wait_s"] == pytest.approx(0.003 - 0.0022 - 0.0002)
    assert (cell["records"], cell["minflt"]) == (3.0, 2.0)
    row = next(r for r in cell_rows(records.read(out)) if r["path"] == "keras-torch")
    assert (row["user_ms"], row["sys_ms"], row["minflt"]) == (2.2, 0.2, 2.0)


def test_overhead_carries_a_bootstrap_ci(tmp_path: Path) -> None:
    out = tmp_path / "run-5.jsonl"
    rng = np.random.default_rng(0)
    for path, base in (("keras-torch", 0.003), ("native-torch", 0.002)):
        samples = [float(v) for v in base * rng.lognormal(0, 0.02, 9)]
        records.append(out, _timed(path, "train", samples))
    (row,) = overhead_rows(records.read(out))
    assert row["overhead_ci_low"] < row["overhead"] < row["overhead_ci_high"]
    assert row["overhead"] == pytest.approx(1.5, rel=0.05)
    text = report(out, "table", "overhead")
    assert f"{row['overhead_ci_low']:g}–{row['overhead_ci_high']:g}" in text


def test_markdown_renders_github_tables(tmp_path: Path) -> None:
    text = report(_write(tmp_path), "markdown", "overhead")
    assert "## cells" in text
    assert "## Keras over native" in text
    assert "| model " in text
    assert "|---" in text.replace(":", "-")


def test_plots_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from harness.report.plots import write_plots

    out = _write(tmp_path)
    for batch in (16, 32):
        records.append(out, _timed("native-torch", "infer", [0.004], batch))
        records.append(out, _timed("keras-torch", "infer", [0.005], batch))
    written = write_plots(records.read(out), tmp_path / "plots")
    assert [p.name for p in written] == [
        "overhead.png",
        "throughput.png",
        "train_step.png",
    ]
    assert all(p.stat().st_size > 1000 for p in written)
    assert main(["report", str(out), "--plots", str(tmp_path / "cli")]) == 0
    assert "overhead.png" in capsys.readouterr().out
    assert (tmp_path / "cli" / "train_step.png").is_file()
    markdown = (tmp_path / "cli" / "report.md").read_text()
    assert "| model" in markdown  # GitHub Markdown tables
    # Every plot inline, and the same report as one self-contained page.
    for png in ("overhead.png", "throughput.png", "train_step.png"):
        assert f"]({png})" in markdown
    page = (tmp_path / "cli" / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 3
    assert _external_references(page) == []


def test_a_run_resumes_only_on_the_machine_code_and_profile_that_began_it(
    tmp_path: Path,
) -> None:
    from harness.bench.run import _check_resumable

    host: dict[str, object] = {
        "git_revision": "abc",
        "hostname": "vm",
        "threads": {"intra_op": 2},
    }
    smoke = PROFILES["smoke"]
    test = smoke.model_copy(update={"name": "test"})  # the same content
    out = tmp_path / "run-1.jsonl"
    timed = _timed("native-torch", "train", [0.001], platform=host)
    records.append(out, dataclasses.replace(timed, profile_digest=smoke.digest()))
    _check_resumable(out, test, {**host, "matmul_peak_flops": 1e11})
    with pytest.raises(ValueError, match="other settings than profile 'default'"):
        _check_resumable(out, PROFILES["default"], host)
    edited = smoke.model_copy(update={"seed": 99})
    with pytest.raises(ValueError, match="other settings than profile 'smoke'"):
        _check_resumable(out, edited, host)
    with pytest.raises(ValueError, match="git_revision 'abc', this machine has 'x'"):
        _check_resumable(out, test, {**host, "git_revision": "x"})
    with pytest.raises(ValueError, match="threads"):
        _check_resumable(out, test, {**host, "threads": {"intra_op": 1}})
    # Records before schema 4 name their profile only.
    old = tmp_path / "run-2.jsonl"
    records.append(old, timed)
    _check_resumable(old, test, host)
    with pytest.raises(ValueError, match="profile 'test', not 'default'"):
        _check_resumable(old, PROFILES["default"], host)
