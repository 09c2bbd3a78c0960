"""harness versions: the matrix of releases, the environments it builds or
reuses (pip stood in for), the run in each, and the report across releases."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.__main__ import main
from harness.core import records
from harness.core.profiles import PROFILES, VersionSettings, parse_blueprint
from harness.versions import environments, matrix
from harness.versions import report as versions_report
from harness.versions import run as versions_run
from tests.helpers import record
from tests.sessions import noxfile
from tests.test_count import run_lines

PINS = matrix.project_pins()


def _settings(**lists: list[str]) -> VersionSettings:
    return VersionSettings.model_validate(lists)


# --- the matrix --------------------------------------------------------------


def test_every_listed_release_meets_every_other() -> None:
    found = matrix.combinations(_settings(keras=["3.6.0", "3.10.0"], jax=["0.9.2"]))
    assert [c.slug for c in found] == [
        "keras-3.6.0_jax-0.9.2",
        "keras-3.10.0_jax-0.9.2",
    ]
    assert found[0].release["tensorflow"] == PINS["tensorflow"]  # not listed: pin
    assert found[0].label == "keras 3.6.0, jax 0.9.2"


def test_nothing_listed_is_the_project_pins_alone() -> None:
    (only,) = matrix.combinations(_settings())
    assert only.release == PINS
    assert only.slug == f"keras-{PINS['keras']}"
    assert only.keras_requirement() is None


def test_requirements_replace_the_varied_backends_and_keep_keras_for_later() -> None:
    (c,) = matrix.combinations(_settings(keras=["3.6.0"], jax=["0.9.2"]))
    wanted = c.requirements()
    assert "jax==0.9.2" in wanted
    assert "jaxlib==0.9.2" in wanted
    assert f"keras=={PINS['keras']}" in wanted  # the backends resolve as pinned
    assert "torch==2.13.0" in wanted  # never an axis
    assert c.keras_requirement() == "keras==3.6.0"


def test_command_line_releases_replace_the_profiles() -> None:
    given = matrix.with_releases(
        PROFILES["versions"].versions, {"keras": "3.8.0, 3.9.0", "jax": None}
    )
    assert given.keras == ("3.8.0", "3.9.0")
    with pytest.raises(ValueError, match=r"^--keras must list distinct releases"):
        matrix.with_releases(given, {"keras": "3.8.0,latest"})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('torch = ["2.12.0"]', "versions.torch is not a known key"),
        ('keras = ["3.x"]', "each a release such as 3.6.0"),
        ('keras = ["3.6.0", "3.6.0"]', '"3.6.0" twice'),
    ],
)
def test_a_bad_versions_table_is_one_sentence(table: str, message: str) -> None:
    text = PROFILES_TEXT + f"\n[versions]\n{table}\n"
    with pytest.raises(ValueError, match=message):
        parse_blueprint("mine", text)


PROFILES_TEXT = (
    "[settings]\nrepeats = 1\ntrain_steps = 1\ninfer_batches = 1\n"
    "window_s = 0.1\nwarmup_rounds = 0\n"
)


def test_the_versions_profile_lists_releases_and_is_timed_like_the_others() -> None:
    versions = PROFILES["versions"]
    assert versions.versions.keras is not None
    assert len(versions.versions.keras) >= 3
    changed = versions.model_copy(update={"versions": _settings(keras=["3.0.0"])})
    assert changed.digest() == versions.digest()  # releases are no setting


# --- environments --------------------------------------------------------------


def _done(code: int, stderr: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], code, "", stderr)


class FakeBuild:
    """pip and venv stood in for: ``venv`` makes ``bin/python``, a script
    that prints ``releases`` as the gate's version probe does; ``pip`` answers
    each call with the next of ``answers``."""

    def __init__(
        self, releases: dict[str, str], answers: list[subprocess.CompletedProcess[str]]
    ) -> None:
        self.releases, self.answers, self.calls = releases, answers, []
        # the releases pip is asked about first: each exists unless missing
        self.asked: list[str] = []
        self.missing: tuple[str, ...] = ()

    def venv(self, home: Path) -> subprocess.CompletedProcess[str]:
        (home / "bin").mkdir(parents=True)
        python = home / "bin" / "python"
        shown = json.dumps(
            {d: self.releases[a] for a, dists in matrix.AXES.items() for d in dists}
        )
        python.write_text(f"#!/bin/sh\necho '{shown}'\n")
        python.chmod(0o755)
        return _done(0)

    def pip(self, python: Path, *args: str) -> subprocess.CompletedProcess[str]:
        self.calls.append(args)
        return self.answers.pop(0)

    def download(self, requirement: str) -> subprocess.CompletedProcess[str]:
        self.asked.append(requirement)
        if requirement in self.missing:
            return _done(
                1,
                f"ERROR: Could not find a version that satisfies the requirement "
                f"{requirement}\nERROR: No matching distribution found for "
                f"{requirement}",
            )
        return _done(0)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with the project's pyproject.toml, to build under."""
    root = tmp_path / "checkout"
    root.mkdir()
    source = Path(__file__).resolve().parent.parent / "pyproject.toml"
    (root / "pyproject.toml").write_text(source.read_text())
    return root


def _fake(
    monkeypatch: pytest.MonkeyPatch, releases: dict[str, str], *answers: Any
) -> FakeBuild:
    fake = FakeBuild(releases, list(answers))
    monkeypatch.setattr(environments, "_venv", fake.venv)
    monkeypatch.setattr(environments, "_pip", fake.pip)
    monkeypatch.setattr(environments, "_download", fake.download)
    return fake


def test_an_environment_is_built_once_and_reused(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (c,) = matrix.combinations(_settings(keras=["3.6.0"]), checkout)
    conflict = (
        "ERROR: pip's dependency resolver does not currently take into account "
        "all the packages that are installed.\ntensorflow-cpu 2.21.0 requires "
        "keras>=3.12.0, but you have keras 3.6.0 which is incompatible."
    )
    fake = _fake(monkeypatch, c.release, _done(0), _done(0, conflict))
    built = environments.prepare(c, checkout, log=lambda _: None)
    assert built.python is not None
    assert built.python.endswith("release-envs/keras-3.6.0/bin/python")
    assert fake.calls[1] == ("keras==3.6.0",)  # Keras over the pinned backends
    assert built.notes == [
        "installed anyway: tensorflow-cpu 2.21.0 requires keras>=3.12.0, but you "
        "have keras 3.6.0 which is incompatible."
    ]
    again = environments.prepare(c, checkout, log=lambda _: None)
    assert again.python == built.python
    assert again.notes == built.notes
    assert len(fake.calls) == 2  # nothing installed the second time


def test_an_environment_whose_pins_changed_is_built_again(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (c,) = matrix.combinations(_settings(keras=["3.6.0"]), checkout)
    fake = _fake(monkeypatch, c.release, _done(0), _done(0))
    environments.prepare(c, checkout, log=lambda _: None)
    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace("mlxtend==", "mlxtend>="))
    fake.answers += [_done(0), _done(0)]
    said: list[str] = []
    assert environments.prepare(c, checkout, log=said.append).python is not None
    assert len(fake.calls) == 4
    assert "changed; building it again" in said[0]


def test_what_pip_cannot_install_is_unavailable_with_its_reason(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (c,) = matrix.combinations(_settings(keras=["3.0.0"]), checkout)
    refusal = (
        "ERROR: Could not find a version that satisfies the requirement "
        "keras==3.0.0\nERROR: No matching distribution found for keras==3.0.0"
    )
    _fake(monkeypatch, c.release, _done(0), _done(1, refusal))
    found = environments.prepare(c, checkout, log=lambda _: None)
    assert found.python is None
    assert found.reason == (
        "pip: Could not find a version that satisfies the requirement keras==3.0.0"
    )
    home = checkout / environments.BUILT_UNDER / c.slug
    assert not home.exists()  # nothing half-built left behind
    # the next run builds it as new, not "changed"
    _fake(monkeypatch, c.release, _done(0), _done(0))
    said: list[str] = []
    assert environments.prepare(c, checkout, log=said.append).python is not None
    assert not any("again" in line for line in said), said


def test_a_release_that_does_not_exist_is_refused_before_anything_is_built(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (c,) = matrix.combinations(_settings(keras=["99.0"]), checkout)
    fake = _fake(monkeypatch, c.release)
    fake.missing = ("keras==99.0",)
    found = environments.prepare(c, checkout, log=lambda _: None)
    assert fake.asked == ["keras==99.0"]  # the only release not pinned
    assert fake.calls == []  # pip installed nothing, no venv made
    assert found.python is None
    assert found.reason == (
        "pip: Could not find a version that satisfies the requirement keras==99.0"
    )
    assert not (checkout / environments.BUILT_UNDER).exists()


def test_an_environment_with_other_releases_than_asked_is_refused(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (c,) = matrix.combinations(_settings(keras=["3.6.0"]), checkout)
    _fake(monkeypatch, {**c.release, "keras": "3.7.0"}, _done(0), _done(0))
    found = environments.prepare(c, checkout, log=lambda _: None)
    assert found.python is None
    assert "not {'keras': '3.6.0'" in (found.reason or "")


# --- a run and its report --------------------------------------------------------


def _pairs(ratio: float, seed: int, equivalence: str = "pass") -> list[records.Record]:
    """Three processes of ffn training on PyTorch, Keras ``ratio`` times
    native with 2% noise (as ``tests/test_pairing.py``)."""
    rng = np.random.default_rng(seed)
    out = []
    for repeat in range(3):
        native = list(0.001 * np.exp(rng.normal(0, 0.02, 20)))
        keras = [n * ratio * np.exp(rng.normal(0, 0.02)) for n in native]
        for api, blocks, partner in (
            ("keras", keras, "native-torch"),
            ("native", native, "keras-torch"),
        ):
            out.append(
                record(
                    f"{api}-torch",
                    profile="versions",
                    batch_size=128,
                    repeat=repeat,
                    equivalence=equivalence if api == "keras" else "pass",
                    values={"block_s": blocks, "step_s": blocks, "partner": partner},
                    summary={"median_step_s": float(np.median(blocks))},
                    platform={"hostname": "h"},
                )
            )
    return out


def _held_back(reason: str) -> list[records.Record]:
    return [
        record(
            "keras-torch",
            profile="versions",
            status="not-timed",
            equivalence="fail",
            error=reason,
        ),
        *[r for r in _pairs(1.0, 9) if r.path == "native-torch"],
    ]


def _versions_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runs: dict[str, Any]
) -> Path:
    """``run_versions`` over ``runs`` (release: records, or a reason it is
    unavailable), with environments and ``harness run`` stood in for."""
    found = matrix.combinations(_settings(keras=list(runs)))

    def prepare(c: matrix.Combination, **_: Any) -> environments.Environment:
        given = runs[c.release["keras"]]
        if isinstance(given, str):
            return environments.Environment(c, None, given)
        return environments.Environment(c, f"/envs/{c.slug}/python")

    def harness(python: str, command: str, *args: str) -> int:
        out = Path(args[args.index("--results") + 1])
        release = python.split("/")[2].removeprefix("keras-")
        for r in runs[release]:
            records.append(out / "run-20261125-000000.jsonl", r)
        return 0

    monkeypatch.setattr(versions_run, "prepare", prepare)
    monkeypatch.setattr(versions_run, "_harness", harness)
    status = versions_run.run_versions(
        PROFILES["versions"], "versions", found, tmp_path, log=lambda _: None
    )
    assert status == (1 if any(isinstance(v, str) for v in runs.values()) else 0)
    return versions_run.folder(tmp_path)


def test_a_release_that_changed_the_overhead_is_marked_and_a_rerun_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _versions_run(
        tmp_path,
        monkeypatch,
        {
            "3.10.0": _pairs(4.0 * 1.08, 2),  # 8% more overhead than 3.9.0
            "3.9.0": _pairs(4.0, 1),
            "3.11.0": _pairs(4.0 * 1.08, 3),  # as 3.10.0
        },
    )
    rows = versions_report.overhead_version_rows(versions_report.Versions(base))
    assert [r["releases"] for r in rows] == [  # in release order, not run order
        "keras 3.9.0",
        "keras 3.10.0",
        "keras 3.11.0",
    ]
    assert [r["verdict"] for r in rows] == [None, "higher", "same"]
    assert rows[1]["change_ci_low_pct"] <= 8.0 <= rows[1]["change_ci_high_pct"]
    assert rows[0]["overhead_ci_low"] <= 4.0 <= rows[0]["overhead_ci_high"]
    # The answer first: the one change, then how many were tested.
    text = versions_report.text(base, "markdown")
    answer = text.index("## The answer: what changed between releases")
    assert answer < text.index("## Overhead (Keras / native time) per release")
    assert "- ffn train on torch b128: overhead higher at keras 3.10.0" in text
    assert "1 of 2 changes from one release to the next were flagged" in text


def test_a_release_the_gate_fails_or_pip_cannot_build_is_shown_not_timed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _versions_run(
        tmp_path,
        monkeypatch,
        {
            "3.6.0": "pip: No matching distribution found for keras==3.6.0",
            "3.9.0": _pairs(4.0, 1),
            "3.10.0": _held_back("ffn: keras-torch fails: first off at dense_1"),
        },
    )
    v = versions_report.Versions(base)
    envs = versions_report.environment_rows(v)
    assert [(e["releases"], e["status"]) for e in envs] == [
        ("keras 3.6.0", "unavailable"),
        ("keras 3.9.0", "ok"),
        ("keras 3.10.0", "ok"),
    ]
    assert envs[0]["reason"] == "pip: No matching distribution found for keras==3.6.0"
    assert (
        "keras-torch fail (ffn: keras-torch fails: first off at dense_1)"
        in (envs[2]["verdicts"])
    )
    rows = versions_report.overhead_version_rows(v)
    assert [r["releases"] for r in rows] == ["keras 3.9.0"]  # nothing else timed


def test_report_versions_prints_tables_and_draws_the_plot(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = _versions_run(
        tmp_path, monkeypatch, {"3.9.0": _pairs(4.0, 1), "3.10.0": _pairs(4.4, 2)}
    )
    for release, lines in (("3.9.0", [8_000_000] * 2), ("3.10.0", [8_400_000] * 2)):
        counted = base / f"keras-{release}" / "count-20261125-000000"
        counted.mkdir()
        text = "".join(
            json.dumps(line) + "\n" for line in run_lines(lines, [2_000_000] * 2)
        )
        (counted / "count.jsonl").write_text(text)
    # nox -s versions' two reports, as the session runs them
    table, plotted = noxfile().versions_steps("versions", results=str(base.parent))[1:]
    assert "--plots" in plotted.argv
    assert main(list(table.argv)) == 0
    shown = capsys.readouterr().out
    assert "Overhead (Keras / native time) per release" in shown
    assert "higher" in shown
    assert "Instructions per step per release" in shown
    assert "changed" in shown  # Keras' count moved 5%
    assert main(list(plotted.argv)) == 0
    assert (base / "versions.png").stat().st_size > 0
    assert "| keras 3.10.0 |" in (base / "versions.md").read_text()


def test_report_versions_without_a_run_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--versions", str(tmp_path)]) == 2
    assert "run 'python -m harness versions' first" in capsys.readouterr().err


def test_a_held_back_path_says_the_reason_the_gate_cached(tmp_path: Path) -> None:
    for r in _held_back("not timed: equivalence verdict 'error'"):
        records.append(tmp_path / "run-20261125-000000.jsonl", r)
    cache = {
        "schema_version": 1,
        "verdicts": {
            "k1": {
                "created": "2026-11-25T09:39:07+0000",
                "model": "ffn",
                "path": "keras-torch",
                "verdict": "error",
                "reason": "AttributeError: module 'jax' has no attribute 'spmd_mode'",
            }
        },
    }
    (tmp_path / "verdicts.json").write_text(json.dumps(cache))
    found = versions_run.verdicts(tmp_path)
    assert found["keras-torch"] == {
        "equivalence": "fail",
        "reason": "ffn: AttributeError: module 'jax' has no attribute 'spmd_mode'",
    }
    assert found["native-torch"] == {"equivalence": "pass"}
    (tmp_path / "verdicts.json").write_text("{torn")
    assert versions_run.verdicts(tmp_path)["keras-torch"]["reason"].startswith(
        "not timed"
    )


@pytest.mark.parametrize(
    "damage",
    [
        {"folder": None},  # a line without its folder
        {"folder": "../elsewhere"},  # a folder outside the versions folder
        {"folder": "/etc"},
        {"label": 3},
        {"verdicts": {"keras-torch": "pass"}},  # a string where a table was
        {"notes": "one note"},
    ],
)
def test_a_manifest_line_the_report_cannot_read_is_skipped_and_named(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    damage: dict[str, Any],
) -> None:
    base = _versions_run(
        tmp_path, monkeypatch, {"3.9.0": _pairs(4.0, 1), "3.10.0": _pairs(4.0, 2)}
    )
    (tmp_path / "elsewhere").mkdir()
    manifest = base / versions_run.MANIFEST
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    bad = {**lines[-1], **damage}
    if damage.get("folder", "") is None:
        del bad["folder"]
    manifest.write_text(json.dumps(lines[0]) + "\n" + json.dumps(bad) + "\n")
    assert main(["report", "--versions", str(base)]) == 0
    out, err = capsys.readouterr()
    assert "skipped 1 line of" in err
    assert "keras 3.9.0" in out
    assert "keras 3.10.0" not in out
    # nothing usable: one sentence and a non-zero exit, not an empty table
    manifest.write_text(json.dumps(bad) + "\n")
    assert main(["report", "--versions", str(base)]) == 2
    assert "holds no manifest lines (1 line of another shape)" in (
        capsys.readouterr().err
    )
