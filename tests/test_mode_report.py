"""Execution modes as paths (``workers.paths``) and their report
(``harness.report.modes``), on records made here."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.core import records
from harness.report import modes
from harness.report.tables import report
from tests.helpers import record
from workers.paths import MODE_PATHS, MODES, PATHS, default_mode, get_path


def test_every_mode_is_a_path_of_its_own_beside_the_default() -> None:
    for path in PATHS.values():
        assert path.mode in MODES[path.api, path.framework]
        assert not path.mode_path
        assert path.base == path.id
    for path_id, path in MODE_PATHS.items():
        assert path.mode_path
        assert path_id == f"{path.base}@{path.mode}"
        assert path.base in PATHS
        assert path.mode != default_mode(path.api, path.framework)
    # every mode of every API and framework is timed by exactly one path
    timed = {
        (p.api, p.framework, p.mode) for p in [*PATHS.values(), *MODE_PATHS.values()]
    }
    wanted = {(api, fw, mode) for (api, fw), modes in MODES.items() for mode in modes}
    assert timed == wanted
    assert get_path("native-tensorflow@xla").framework == "tensorflow"


def test_an_unknown_mode_is_refused_in_one_sentence() -> None:
    with pytest.raises(
        ValueError, match=r"unknown path 'keras-torch@xla'; known paths: "
    ) as e:
        get_path("keras-torch@xla")
    assert "\n" not in str(e.value)


# Three processes each: seconds per step and first step.
TIMES = {
    "keras-torch": (0.0030, 0.5),
    "keras-torch@compile": (0.0020, 14.0),
    "native-torch": (0.0010, 0.1),
    "native-torch@compile": (0.0015, 12.0),
    "native-tensorflow": (0.0020, 1.0),
    "native-tensorflow@eager": (0.00202, 0.2),
    "native-tensorflow@xla": (0.0100, 3.0),
}


def _write(tmp_path: Path, times: dict[str, tuple[float, float]], **kw: bool) -> Path:
    out = tmp_path / "run-1.jsonl"
    for repeat, jitter in enumerate((1.0, 1.01, 0.99)):
        for path, (seconds, first) in times.items():
            for phase in ("train", "infer"):
                verified = kw.get(path.replace("@", "_").replace("-", "_"), True)
                timed = record(
                    path,
                    phase,
                    seconds=seconds * jitter,
                    first=first * jitter,
                    batches_per_round=1,
                    repeat=repeat,
                    profile="modes",
                    equivalence="pass" if verified else "fail",
                )
                records.append(out, timed)
    return out


def test_the_fastest_verified_mode_of_each_api_and_framework_is_marked(
    tmp_path: Path,
) -> None:
    recs = records.read(_write(tmp_path, TIMES))
    assert modes.has_modes(recs)
    found = modes.timings(recs)["ffn"]
    marks = modes.ranks(found)
    assert marks["keras", "torch", "compile", "train"] == "best"
    assert ("keras", "torch", "eager", "train") not in marks
    assert marks["native", "torch", "eager", "infer"] == "best"
    # graph and eager TensorFlow are 1% apart with 1% jitter: the CIs of
    # three processes overlap, so the order is not known
    assert marks["native", "tensorflow", "graph", "train"] == "best"
    assert marks["native", "tensorflow", "eager", "train"] == "tie"
    assert ("native", "tensorflow", "xla", "train") not in marks
    compiled = found["keras", "torch", "compile"]["train"]
    assert compiled.first == pytest.approx(14.0)
    assert compiled.first_max == pytest.approx(14.0 * 1.01)
    assert compiled.processes == 3


def test_a_faster_mode_the_gate_failed_is_never_the_best(tmp_path: Path) -> None:
    # native-tensorflow@xla made the fastest, but its verdict is a failure
    times = dict(TIMES, **{"native-tensorflow@xla": (0.0001, 3.0)})
    out = _write(tmp_path, times, native_tensorflow_xla=False)
    rows = modes.rows(records.read(out))
    xla = next(r for r in rows if r["framework"] == "tensorflow" and r["mode"] == "xla")
    assert "UNVERIFIED" in xla["train_ms_per_step"]
    assert "BEST" not in xla["train_ms_per_step"]
    assert not xla["verified"]
    graph = next(
        r for r in rows if r["framework"] == "tensorflow" and r["mode"] == "graph"
    )
    assert graph["train_ms_per_step"].endswith("BEST")


def test_the_report_shows_the_modes_table_only_for_a_run_with_modes(
    tmp_path: Path,
) -> None:
    text = report(_write(tmp_path, TIMES), "markdown", "cells")
    assert "execution modes" in text
    assert "| compile" in text.replace("  ", " ")
    plain = tmp_path / "plain"
    plain.mkdir()
    defaults = {p: t for p, t in TIMES.items() if "@" not in p}
    assert "execution modes" not in report(_write(plain, defaults), "markdown", "cells")


def test_a_modes_plot_is_drawn_per_model(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    from harness.report.plots import write_plots

    written = write_plots(records.read(_write(tmp_path, TIMES)), tmp_path / "plots")
    assert "modes-ffn.png" in [p.name for p in written]
    assert (tmp_path / "plots" / "modes-ffn.png").stat().st_size > 1000
