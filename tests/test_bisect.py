"""``harness bisect``: the search over releases with pip and the counts stood
in for: a step at a known release found in the expected number of visits,
a slope reported as one, a release pip lacks refused before anything is
measured, a cell no Keras release can change refused in one sentence, and
the overlay's requirements read from a wheel.

Framework-free."""

from __future__ import annotations

import json
import math
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from harness.versions import bisect, finding
from harness.versions.bisect import Figure
from harness.versions.finding import moved_calls, moved_functions, summary
from harness.versions.overlay import Overlay, requirements, unmet
from harness.versions.signals import Cell, check, measurer

PIP_OUTPUT = """keras (3.15.1)
Available versions: 3.15.1, 3.15.0, 3.14.1, 3.14.0, 3.13.2, 3.13.1, 3.13.0, \
3.12.4, 3.12.3, 3.12.2, 3.12.1, 3.12.0, 3.11.3, 3.11.2, 3.11.1, 3.11.0, \
3.10.0, 3.9.2, 3.9.0, 3.15.2rc1
  INSTALLED: 3.15.1
"""
RELEASES = bisect.between("3.10.0", "3.15.1", bisect.versions_of(PIP_OUTPUT))


class Counts:
    """A stand-in measurement: instructions per step at each release from
    ``level(index)``, with a 0.1% range, and the releases it was asked for."""

    def __init__(self, level: object) -> None:
        self.level = level
        self.asked: list[str] = []

    def __call__(self, release: str) -> Figure:
        self.asked.append(release)
        value = self.level(RELEASES.index(release))  # type: ignore[operator]
        return Figure(release, value, value * 0.9995, value * 1.0005)


def test_pip_s_releases_between_two_are_in_release_order() -> None:
    assert RELEASES[0] == "3.10.0"
    assert RELEASES[-1] == "3.15.1"
    assert len(RELEASES) == 17  # 3.10.0, fifteen between, 3.15.1
    assert "3.15.2rc1" not in RELEASES  # no pre-release
    assert RELEASES.index("3.11.0") < RELEASES.index("3.12.0")


@pytest.mark.parametrize("culprit", ["3.10.0", "3.11.0", "3.12.3", "3.15.0", "3.15.1"])
def test_a_step_is_found_at_its_release_in_about_log2_n_visits(culprit: str) -> None:
    at = RELEASES.index(culprit)
    measure = Counts(lambda i: 8e6 * (1.2 if i >= max(at, 1) else 1.0))
    found = bisect.bisect(RELEASES, measure, floor=0.003)
    expected = max(at, 1)
    (step,) = found.parts
    assert (step.kind, step.after.release) == ("step", RELEASES[expected])
    assert step.before.release == RELEASES[expected - 1]
    assert step.share == pytest.approx(1.0)
    # both ends, then one release per halving
    assert found.visits <= 2 + math.ceil(math.log2(len(RELEASES) - 1))
    assert len(set(measure.asked)) == len(measure.asked)  # none measured twice
    assert found.verdict().startswith(f"a step at {RELEASES[expected]}: ")


def test_two_steps_are_a_slope_with_each_step_s_share() -> None:
    # +21% at 3.11.0, +21% again at 3.13.0: neither carries 80% of the change
    at = (RELEASES.index("3.11.0"), RELEASES.index("3.13.0"))
    measure = Counts(lambda i: 1e6 * 1.21 ** sum(i >= a for a in at))
    found = bisect.bisect(RELEASES, measure, floor=0.003)
    assert [(p.kind, p.after.release) for p in found.parts] == [
        ("step", "3.11.0"),
        ("step", "3.13.0"),
    ]
    shares = [p.share for p in found.parts]
    assert sum(shares) == pytest.approx(1.0)
    assert shares[0] == pytest.approx(0.21 / 0.4641, rel=1e-3)
    assert found.verdict().startswith("a slope")


def test_a_rise_and_a_fall_are_said_as_such_not_as_one_step() -> None:
    # +70% at 3.12.0, then -33% at 3.14.0: 14% in all, but no release made it
    up, down = RELEASES.index("3.12.0"), RELEASES.index("3.14.0")
    measure = Counts(
        lambda i: (
            2.16e7 * (1.7 if up <= i < down else 1.0) * (1.14 if i >= down else 1.0)
        )
    )
    found = bisect.bisect(RELEASES, measure, floor=0.003)
    assert [(p.kind, p.after.release) for p in found.parts] == [
        ("step", "3.12.0"),
        ("step", "3.14.0"),
    ]
    verdict = found.verdict()
    assert verdict.startswith("up and down from 3.10.0")
    assert "step 3.11.3 -> 3.12.0 +70.0%" in verdict
    assert "step 3.13.2 -> 3.14.0 -32.9%" in verdict


def test_a_change_below_the_floor_at_every_release_is_a_spread() -> None:
    # 0.1% a release, 1.6% in all: no neighbouring pair differs
    found = bisect.bisect(RELEASES, Counts(lambda i: 1e6 * 1.001**i), floor=0.003)
    assert found.changed
    assert {p.kind for p in found.parts} == {"spread"}
    assert found.verdict().startswith("a slope")
    assert sum(p.share for p in found.parts) == pytest.approx(1.0)


def test_no_change_is_said_after_two_visits() -> None:
    found = bisect.bisect(RELEASES, Counts(lambda i: 5e6), floor=0.003)
    assert found.visits == 2
    assert found.verdict().startswith("no change from 3.10.0")


def test_a_noisy_figure_is_no_change() -> None:
    def wide(release: str) -> Figure:
        value = 1.2 if release == "3.15.1" else 1.0
        return Figure(release, value, value * 0.8, value * 1.25)

    assert not bisect.bisect(RELEASES, wide, floor=0.02).changed


def test_a_release_pip_lacks_is_refused_before_anything_is_measured() -> None:
    available = bisect.versions_of(PIP_OUTPUT)
    with pytest.raises(ValueError, match=r"pip has no keras 3\.9\.1"):
        bisect.between("3.9.1", "3.15.1", available)
    with pytest.raises(ValueError, match="older release first"):
        bisect.between("3.15.1", "3.10.0", available)
    with pytest.raises(ValueError, match="not a release"):
        bisect.between("three", "3.15.1", available)
    with pytest.raises(ValueError, match="no 'Available versions' line"):
        bisect.versions_of("ERROR: No matching distribution found for keras")


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("native-torch", "does not import Keras"),
        ("native-mxnet", "does not import Keras"),
        ("keras-caffe", "no path 'keras-caffe'"),
    ],
)
def test_a_cell_no_keras_release_changes_is_refused_in_one_sentence(
    path: str, said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        check(Cell("lenet", path, "train", "count"))


def test_the_signal_is_instructions_where_counts_repeat_and_time_for_jax() -> None:
    assert Cell("lenet", "keras-torch", "train", "count").signal == "instructions"
    assert Cell("lenet", "keras-tensorflow", "infer", "count").signal == "instructions"
    assert Cell("lenet", "keras-jax", "train", "count").signal == "time"


def test_the_overlay_adds_only_what_the_base_environment_lacks(tmp_path: Path) -> None:
    wheel = tmp_path / "keras-9.9.9-py3-none-any.whl"
    metadata = "\n".join(
        [
            "Name: keras",
            "Version: 9.9.9",
            "Requires-Dist: numpy",
            "Requires-Dist: optree>=0.20",
            "Requires-Dist: newthing",
            'Requires-Dist: tensorflow ; extra == "backend"',
        ]
    )
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("keras-9.9.9.dist-info/METADATA", metadata)
    wanted = requirements(wheel)
    assert [r.name for r in wanted] == ["numpy", "optree", "newthing"]
    have = {"numpy": "1.26.4", "optree": "0.13.0"}
    assert unmet(wanted, have) == ["optree>=0.20", "newthing"]
    assert unmet([Requirement("numpy>=1.2")], have) == []


def _count_run(folder: Path, keras_work: float, functions: dict[str, float]) -> None:
    """A count run's analysis of LeNet training on PyTorch, as the release's
    folder of a bisection holds it."""
    run = folder / "count-20261127-000000"
    run.mkdir(parents=True)
    rows = [
        {
            "model": "lenet",
            "phase": "train",
            "batch": 16,
            "path": path,
            "work": work,
            "work_spread": 0.0004,
            "work_block_spread": 0.0002,
            "functions": functions if path == "keras-torch" else {},
        }
        for path, work in (("keras-torch", keras_work), ("native-torch", 2e6))
    ]
    (run / "count.json").write_text(json.dumps({"paths": rows}))


def test_a_release_s_count_is_read_back_and_the_functions_that_moved_named(
    tmp_path: Path,
) -> None:
    cell = Cell("lenet", "keras-torch", "train", "count")
    _count_run(tmp_path / "keras-3.10.0", 8e6, {"interpreter a": 1e6, "kernel b": 5e5})
    _count_run(
        tmp_path / "keras-3.11.0", 9.6e6, {"interpreter a": 2.5e6, "kernel b": 5e5}
    )
    measure = measurer(cell, tmp_path, "python", log=lambda _: None)
    before, after = measure("3.10.0"), measure("3.11.0")  # read, not run
    assert (before.value, after.value) == (8e6, 9.6e6)
    assert before.low == pytest.approx(8e6 * (1 - 0.0002))
    assert "native 2 M" in before.note
    part = bisect.Part(before, after, "step", 1.0)
    moved = moved_functions(cell, part, tmp_path)
    assert moved[0] == ("interpreter a", 1e6, 2.5e6)
    found = bisect.Bisection(["3.10.0", "3.11.0"], {"3.10.0": before, "3.11.0": after})
    found.order, found.parts = ["3.10.0", "3.11.0"], [part]
    text = summary(cell, found, tmp_path, 90.0)
    assert "**a step at 3.11.0" in text
    assert "| 3.11.0 | 9.6e+06 [" in text
    # the cost counts what each release's measuring took, whichever run of
    # the bisection measured it; a time not kept, or not a time, is said
    assert "measuring 0.0 min (2 releases measured before times were kept)" in text
    (tmp_path / "keras-3.10.0" / "measure_s.txt").write_text("90\n")
    (tmp_path / "keras-3.11.0" / "measure_s.txt").write_text("nan\n")
    text = summary(cell, found, tmp_path, 6.0)
    assert "measuring 1.5 min (1 release measured before" in text
    assert "this run 0.1 min" in text


def test_the_keras_functions_whose_calls_moved_are_named_largest_first() -> None:
    before = {"calls": {"a.py:f": 10, "b.py:g": 5, "c.py:h": 7}}
    after = {"calls": {"a.py:f": 10, "b.py:g": 25, "d.py:new": 3}}
    assert moved_calls(before, after) == [
        ("b.py:g", 5, 25),
        ("c.py:h", 7, 0),
        ("d.py:new", 0, 3),
    ]
    assert moved_calls(None, after) == []


def _explain_run(folder: Path, step_us: float, parts: dict[str, float]) -> None:
    """A stand-in ``harness explain`` run of LeNet's PyTorch inference."""
    run = folder / "explain-20261127-120000-1"
    run.mkdir(parents=True)
    (run / "explain.jsonl").write_text(json.dumps({"kind": "host", "host": {}}) + "\n")

    def span(us: float) -> dict[str, float]:
        return {"us": us, "low": us * 0.95, "high": us * 1.05}

    cell = {
        "model": "lenet",
        "framework": "torch",
        "phase": "infer",
        "batch": 8,
        "total": span(step_us),
        "parts": {name: span(us) for name, us in parts.items()},
    }
    (run / "explain.json").write_text(json.dumps({"cells": [cell]}))


def test_explain_s_parts_before_and_after_are_read_and_ordered_by_their_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = Cell("lenet", "keras-torch", "infer", "count")
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(finding, "harness_in", lambda _o, *args: asked.append(args))
    sides = [Overlay(r, "python", tmp_path, (), 0) for r in ("3.11.3", "3.12.0")]
    _explain_run(
        tmp_path / "explain" / "keras-3.11.3",
        900.0,
        {"native": 400.0, "tree": 100.0, "loop": 300.0},
    )
    _explain_run(
        tmp_path / "explain" / "keras-3.12.0",
        1500.0,
        {"native": 400.0, "tree": 650.0, "loop": 350.0},
    )
    before, after = (finding.explain_cell(cell, o, tmp_path, "here") for o in sides)
    assert asked == []  # both read back, none run again
    rows = finding.explained_parts(before, after)
    assert [r[0] for r in rows] == ["step", "tree", "loop", "native"]
    assert rows[0][1] == (900.0, 855.0, 945.0)
    assert rows[1][2] is not None
    assert rows[1][2][0] == 650.0


def test_explain_is_run_at_the_profile_s_batch_where_no_run_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cell = Cell("lenet", "keras-torch", "infer", "count")
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(finding, "harness_in", lambda _o, *args: asked.append(args))
    # a run of another shape (no total) is passed over, so explain runs
    broken = tmp_path / "explain" / "keras-3.12.0" / "explain-20261127-120000-1"
    broken.mkdir(parents=True)
    (broken / "explain.jsonl").write_text('{"kind": "host", "host": {}}\n')
    (broken / "explain.json").write_text('{"cells": [{"model": "lenet"}]}')
    side = Overlay("3.12.0", "python", tmp_path, (), 0)
    assert finding.explain_cell(cell, side, tmp_path, "here") is None
    (args,) = asked
    assert args[0] == "explain"
    assert args[args.index("--batch-sizes") + 1] == "8"
    assert args[args.index("--results") + 1].endswith("explain/keras-3.12.0")
    assert finding.explained_parts(None, None) == []
