"""The files the harness reads back (the gate's cache, a plan, a kept matmul
peak, a callgrind dump, a wheel, a versions stamp, a bisection's measured
seconds and count analysis) go through ``zoo.files``: a FIFO, a link to
``/dev/zero``, malformed JSON or a field of the wrong type is refused in one
sentence, or, for a cache, treated as absent and said once, never a hang
or a traceback."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from harness.bench import run as bench_run
from harness.core import cells, gate, machines
from harness.core.profiles import load_blueprint
from harness.count import callgrind
from harness.versions import environments, overlay, signals
from harness.versions import run as versions_run
from tests.helpers import profile, within
from zoo import files


def _hostile(path: Path, kind: str) -> None:
    """Put at ``path`` what a reader must not hang on or follow."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "folder":
        path.mkdir()
    else:
        raise AssertionError(kind)


KINDS = ["fifo", "device", "folder"]


# --- the gate's cache -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_gate_cache_that_is_no_file_is_set_aside_once(
    tmp_path: Path, kind: str
) -> None:
    cache = tmp_path / gate.CACHE_NAME
    _hostile(cache, kind)
    said: list[str] = []
    with within(10):
        assert gate.cached(tmp_path) == {}  # only reads: says nothing
        assert gate._load(cache, said.append) == {}
    (line,) = said
    assert "set aside as verdicts.json.bad-" in line
    assert "not a regular file" in line or "symbolic link" in line
    assert not cache.exists()
    assert not cache.is_symlink()
    gate._save(cache, {})  # a new cache is a regular file
    assert gate._load(cache, said.append) == {}


def test_a_cached_verdict_the_gate_does_not_give_is_not_trusted(
    tmp_path: Path,
) -> None:
    cache = tmp_path / gate.CACHE_NAME
    entry = {"model": "ffn", "path": "native-torch", "created": "now"}
    gate._save(cache, {"k": {**entry, "verdict": "passed"}})
    assert gate.cached(tmp_path) == {}
    said: list[str] = []
    assert gate._load(cache, said.append) == {}
    assert "'passed' is not a verdict the gate gives" in said[0]
    gate._save(cache, {"k": {**entry, "verdict": "pass", "reason": 3}})
    assert gate.cached(tmp_path) == {}
    assert versions_run._gate_reasons(tmp_path) == {}


def test_the_sources_digest_follows_no_link(tmp_path: Path) -> None:
    for entry in ("zoo", "native", "workers", "equivalence", "harness/core"):
        (tmp_path / entry).mkdir(parents=True)
    (tmp_path / "harness/core/gate.py").write_text("")
    assert len(gate.sources_digest(tmp_path)) == 64
    (tmp_path / "zoo" / "zero.py").symlink_to("/dev/zero")
    with within(10), pytest.raises(files.Refused, match=r"zero\.py is a symbolic"):
        gate.sources_digest(tmp_path)


# --- a plan ---------------------------------------------------------------------


def _plan_document(tmp_path: Path) -> dict[str, Any]:
    plan = cells.new_plan(
        "7",
        profile(),
        models=["ffn"],
        paths=["native-torch"],
        phases=["train"],
        keys={},
    )
    cells.write_plan(plan, tmp_path / "cells.json")
    document: dict[str, Any] = json.loads((tmp_path / "cells.json").read_text())
    return document


@pytest.mark.parametrize("kind", KINDS)
def test_a_plan_that_is_no_file_is_one_sentence(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "cells.json"
    _hostile(path, kind)
    with within(10), pytest.raises(ValueError, match=r"is not (read|fol)") as caught:
        cells.read_plan(path)
    assert str(caught.value).startswith(str(path))
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"run_id": "../../elsewhere"}, "run_id"),
        ({"run_id": "a/b"}, "run_id"),
        ({"slowdown": {"native-torch": 0.5}}, "slowdown"),
        ({"slowdown": {"native-torch": "fast"}}, "slowdown"),
    ],
)
def test_a_plan_field_of_the_wrong_kind_is_one_sentence(
    tmp_path: Path, change: dict[str, Any], said: str
) -> None:
    document = {**_plan_document(tmp_path), **change}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=f"is not a plan this code reads .*{said}"):
        cells.read_plan(path)


def test_a_plan_written_over_a_link_replaces_the_link(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("kept")
    (tmp_path / "cells.json").symlink_to(target)
    _plan_document(tmp_path)
    assert target.read_text() == "kept"
    assert not (tmp_path / "cells.json").is_symlink()


def test_a_plan_the_user_names_through_a_link_is_read(tmp_path: Path) -> None:
    _plan_document(tmp_path)
    link = tmp_path / "mine.json"
    link.symlink_to(tmp_path / "cells.json")
    assert cells.read_plan(link, follow=True).run_id == "7"


# --- a kept matmul peak ----------------------------------------------------------


def _fake_peak(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    measured: list[int] = []

    def measure(**kw: Any) -> dict[str, Any]:
        measured.append(1)
        return {"flops_per_s": 1e11, "sources": {"numpy": {"status": "ok"}}}

    monkeypatch.setattr(bench_run, "measure_matmul_peak", measure)
    return measured


@pytest.mark.parametrize(
    "damage", ["fifo", "device", "not json", '{"flops_per_s": "fast"}']
)
def test_a_damaged_kept_peak_is_measured_again_and_said_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    measured = _fake_peak(monkeypatch)
    _plan_document(tmp_path)
    plan = cells.read_plan(tmp_path / "cells.json")
    assert bench_run.matmul_peak(tmp_path, plan)["flops_per_s"] == 1e11
    (kept,) = (tmp_path / "cache").glob("peak-7-*.json")
    assert bench_run.matmul_peak(tmp_path, plan)["flops_per_s"] == 1e11
    assert len(measured) == 1  # the kept one was used
    kept.unlink()
    if damage in ("fifo", "device"):
        _hostile(kept, damage)
    else:
        kept.write_text(damage)
    capsys.readouterr()
    with within(10):
        assert bench_run.matmul_peak(tmp_path, plan)["flops_per_s"] == 1e11
    assert len(measured) == 2
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "warning" in ln]
    assert len(warnings) == 1
    assert str(kept) in warnings[0]
    assert files.read_object(kept)["flops_per_s"] == 1e11  # a regular file again


def test_resuming_through_a_link_is_one_sentence(tmp_path: Path) -> None:
    records_file = tmp_path / "run-1.jsonl"
    records_file.write_text("")
    link = tmp_path / "run-2.jsonl"
    link.symlink_to(records_file)
    with pytest.raises(ValueError, match=r"--resume: cannot append to .*symbolic"):
        bench_run._open(tmp_path, link)


# --- a blueprint, /proc/cpuinfo ---------------------------------------------------


def test_a_blueprint_the_user_names_through_a_link_is_read(tmp_path: Path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(
        "[settings]\ntrain_steps = 3\nrepeats = 2\ninfer_batches = 4\n"
        "window_s = 3.0\nwarmup_rounds = 1\n"
    )
    link = tmp_path / "mine.toml"
    link.symlink_to(real)
    assert load_blueprint(link).settings("ffn").repeats == 2


@pytest.mark.parametrize("kind", KINDS)
def test_a_cpuinfo_that_is_no_file_says_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _hostile(tmp_path / "cpuinfo", kind)
    monkeypatch.setattr(machines, "CPUINFO", tmp_path / "cpuinfo")
    with within(10):
        assert machines.cpu_details()["cpu"] == "unknown"
        assert machines.cpu_model()


# --- a callgrind dump --------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_a_callgrind_dump_that_is_no_file_is_one_sentence(
    tmp_path: Path, kind: str
) -> None:
    dump = tmp_path / "callgrind.out.1"
    _hostile(dump, kind)
    with within(10), pytest.raises(callgrind.DumpError, match="cannot read"):
        callgrind.read(dump)


# --- a wheel, the stamps ------------------------------------------------------------


def test_a_wheel_that_is_no_zip_or_inflates_too_far_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "keras-9.9.9-py3-none-any.whl"
    wheel.write_text("not a zip")
    with pytest.raises(files.Refused, match="is not a zip archive"):
        overlay.requirements(wheel)
    wheel.unlink()
    _hostile(wheel, "device")
    with within(10), pytest.raises(files.Refused, match="symbolic link"):
        overlay.requirements(wheel)
    wheel.unlink()
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("keras-9.9.9.dist-info/METADATA", "Name: keras\n" * 10_000)
    monkeypatch.setattr(overlay, "METADATA_BYTES", 1024)
    with pytest.raises(files.Refused, match="METADATA is 120,000 bytes"):
        overlay.requirements(wheel)


def test_an_overlay_lock_that_is_a_link_is_refused(tmp_path: Path) -> None:
    under = tmp_path / overlay.UNDER
    under.mkdir(parents=True)
    (under / "keras-9.9.9.lock").symlink_to("/dev/zero")
    with within(10), pytest.raises(files.Refused, match="symbolic link"):
        overlay.prepare("9.9.9", root=tmp_path)


@pytest.mark.parametrize(
    "damage",
    ["fifo", "device", "{torn", '{"python": 3}', '{"python": "p", "added": "x"}'],
)
def test_a_damaged_stamp_is_a_build_not_finished_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    stamp = tmp_path / overlay.STAMP
    if damage in ("fifo", "device"):
        _hostile(stamp, damage)
    else:
        stamp.write_text(damage)
    with within(10):
        assert environments.read_stamp(stamp, overlay._Stamp, "overlay") is None
        assert environments.read_stamp(stamp, overlay._Stamp, "overlay") is None
    err = capsys.readouterr().err
    assert err.count("warning") == 1
    assert "its overlay is built again" in err
    stamp.unlink()
    files.write_json(stamp, {"python": "p", "added": ["numpy"]})
    kept = environments.read_stamp(stamp, overlay._Stamp, "overlay")
    assert kept is not None
    assert kept["added"] == ["numpy"]


def test_an_environment_stamp_with_notes_of_the_wrong_type_is_not_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stamp = tmp_path / environments.STAMP
    stamp.write_text(json.dumps({"wanted": {}, "notes": [1, 2]}))
    assert environments.read_stamp(stamp, environments._Stamp) is None
    assert "its environment is built again" in capsys.readouterr().err


# --- a bisection's measured seconds and count analysis --------------------------------


@pytest.mark.parametrize("damage", ["fifo", "device", "folder", "nan\n", "-3\n", "x"])
def test_measured_seconds_that_cannot_be_read_are_not_counted_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    path = tmp_path / signals.MEASURED_S
    if damage in KINDS:
        _hostile(path, damage)
    else:
        path.write_text(damage)
    with within(10):
        assert signals.measured_s(tmp_path) is None
    assert str(path) in capsys.readouterr().err
    assert signals.measured_s(tmp_path / "elsewhere") is None  # none written


def _analysis(folder: Path, row: dict[str, Any]) -> Path:
    run = folder / "count-20261127-000000"
    run.mkdir(parents=True)
    path = run / "count.json"
    path.write_text(json.dumps({"paths": [row]}))
    return path


GOOD_ROW = {"model": "lenet", "phase": "train", "path": "keras-torch", "work": 8e6}


@pytest.mark.parametrize(
    "change",
    [
        {"work": "8e6"},
        {"work": True},
        {"work": -1},
        {"work_spread": "wide"},
        {"functions": {"interpreter a": "many"}},
        {"functions": ["interpreter a"]},
    ],
)
def test_a_count_row_of_the_wrong_type_is_passed_over(
    tmp_path: Path, change: dict[str, Any]
) -> None:
    cell = signals.Cell("lenet", "keras-torch", "train", "count")
    _analysis(tmp_path, {**GOOD_ROW, **change})
    assert signals.counted_rows(cell, tmp_path) is None


@pytest.mark.parametrize("damage", ["fifo", "device", "{torn", '{"paths": 3}', "[]"])
def test_a_count_analysis_that_cannot_be_read_is_passed_over_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    cell = signals.Cell("lenet", "keras-torch", "train", "count")
    path = _analysis(tmp_path, GOOD_ROW)
    assert signals.counted_rows(cell, tmp_path) is not None
    path.unlink()
    if damage in KINDS:
        _hostile(path, damage)
    else:
        path.write_text(damage)
    with within(10):
        assert signals.counted_rows(cell, tmp_path) is None
    assert str(path) in capsys.readouterr().err
