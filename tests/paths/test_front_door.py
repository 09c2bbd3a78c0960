"""The front door as shipped: ``nox -s bench``'s own command sequence
(``noxfile.bench_steps``) on the smoke profile, each command a process of its
own through real workers, with ``--plots`` and ``--check``, as a user's
``nox -s bench -- smoke --models ffn --paths ...`` runs it.

One framework carries it (PyTorch: Keras and native in one paired worker,
the cheapest start); every other path is sent through its workers by the
gate's and the timed closures' tests.  ``nox -s fresh`` runs the whole of it
on a fresh clone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core import records
from tests.sessions import noxfile, run_step, said
from tests.tiers import COMMAND_PATHS
from workers.paths import PHASES

pytestmark = pytest.mark.paths

PATHS = COMMAND_PATHS


def test_the_bench_session_runs_to_its_checked_report_with_plots(
    verdicts: Path, tmp_path: Path
) -> None:
    sessions = noxfile()
    work = tmp_path / "checkout"
    # the session's verdicts, so the gate finds them cached
    shutil.copytree(verdicts, work / sessions.RESULTS)
    options = ["--models", "ffn", "--paths", ",".join(PATHS)]
    steps = sessions.bench_steps("smoke", options)
    assert [step.argv[0] for step in steps] == ["run", "report", "report"]
    assert "--plots" in steps[-1].argv
    assert "--check" in steps[-1].argv
    done = [run_step(step, work) for step in steps]
    for finished in done:
        assert finished.returncode == 0, said(finished)
    assert "equivalence ffn: cached verdicts still valid" in done[0].stderr
    results = work / sessions.RESULTS
    (run_file,) = results.glob("run-*.jsonl")
    recs = records.read(run_file)
    assert {(r.path, r.phase, r.status) for r in recs} == {
        (p, phase, "ok") for p in PATHS for phase in PHASES
    }
    assert all((r.equivalence, r.verified) == ("pass", True) for r in recs)
    by_path = {(r.path, r.phase): r for r in recs}
    train = by_path["native-torch", "train"]
    # Keras and native PyTorch shared one process: its paired blocks, at
    # least the smoke profile's pair_min_blocks, one sample each.
    assert train.values["partner"] == "keras-torch"
    assert len(train.values["step_s"]) >= 3
    keras = by_path["keras-torch", "train"]
    assert len(keras.values["step_s"]) == len(train.values["step_s"])
    assert train.summary["flops"] > 0
    assert train.summary["cpu_util"] > 0
    assert train.summary["peak_rss_mb"] > 0
    # getrusage around every timed block and run: per step, in every record
    for r in recs:
        assert len(r.values["usage"]) >= 1, r.path
        assert r.summary["usage_user_s"] > 0, r.path
    assert train.platform["matmul_peak_flops"] > 0
    assert train.platform["threads"]["intra_op"] >= 1
    assert train.platform["framework"] == "torch"
    assert train.platform["numerics"]["deterministic"] is False
    assert "overhead" in done[1].stdout
    report = results / "report"
    shown = done[2].stdout.split()
    assert str(Path(sessions.RESULTS) / "report" / "report.md") in shown
    assert (report / "report.md").stat().st_size > 0
    page = (report / "report.html").read_text()
    assert "<table" in page
    plots = sorted(report.glob("*.png"))
    assert plots, f"no plot in {report}: {sorted(p.name for p in report.iterdir())}"
    for plot in plots:
        assert plot.read_bytes().startswith(b"\x89PNG"), plot
        assert plot.name in (report / "report.md").read_text()
    # --check's closing line, on stderr where the session shows it
    assert "4 cell repeats: 4 ok" in done[2].stderr
