"""``harness fuzz`` and the files it reads from a campaign folder, which may
be shared: a findings line whose id is a path, or whose model does not
build, is skipped before a worker starts; ``--write`` writes only under
plain names, through ``zoo.files``; ``--releases`` is refused where it
would do nothing; and a campaign keeps Hypothesis' files in its folder,
never in the current one.  No worker starts here (the checks are
stand-ins)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from equivalence.compare import Entry
from equivalence.keras_known import KNOWN_BUG
from harness.__main__ import main
from harness.core import jsonl
from harness.fuzz import checking, report
from harness.fuzz.findings import FINDINGS, Finding, finding_id, read_findings
from workers.paths import MODE_PATHS, PATHS
from zoo import files

ROOT = Path(__file__).resolve().parents[1]
SIGNATURE = "one Keras backend | keras-torch | forward at avg_pool"
DOCUMENT = {
    "input_shape": [4, 5, 2],
    "layers": [
        {"kind": "avg_pool", "name": "avg_pool_2", "pool_size": 3, "padding": "same"},
        {"kind": "flatten", "name": "head_flatten"},
        {"kind": "dense", "name": "outputs", "units": 1},
    ],
    "workload": {"optimizer": "sgd", "learning_rate": 0.01,
                 "loss": "mean_squared_error", "batch_size": 1},
}  # fmt: skip


def _line(**changed: Any) -> dict[str, Any]:
    """A findings line as a campaign writes it, with ``changed`` fields."""
    signature = changed.pop("signature", SIGNATURE)
    finding = Finding(
        id=finding_id(signature),
        signature=signature,
        kind=signature.split(" | ")[0],
        document=DOCUMENT,
        seed=0,
        batch_size=1,
        steps=0,
        paths=["keras-torch"],
        layers=3,
        seen=1,
        outcome={},
        optimizers=["sgd"],
    )
    return {**finding.line(), **changed}


def _folder(tmp_path: Path, *lines: dict[str, Any]) -> Path:
    folder = tmp_path / "campaign"
    for line in lines:
        jsonl.append(folder / FINDINGS, line)
    return folder


@pytest.fixture(autouse=True)
def _no_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting the workers fails the test: every refusal here comes first."""

    def started(*args: object) -> None:
        raise AssertionError("a worker was started")

    monkeypatch.setattr(report, "WorkerCheck", started)


@pytest.mark.parametrize(
    "changed",
    [
        {"id": "../../x"},  # a path where the id should be
        {"id": "0123456789"},  # ten hex digits, not the signature's
        {"kind": "a kind of its own"},
        {"signature": "../../x", "kind": "../../x"},  # an id of a bad signature
        {"steps": 10**9},  # not a case a campaign draws
    ],
)
def test_a_line_not_named_by_its_signature_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changed: dict[str, Any]
) -> None:
    """Found: a shared folder's ``findings.jsonl`` with an id ``../../x``
    made ``--write`` overwrite a file outside its folder.  Such a line is
    no finding: skipped, its line named on stderr; the good one is read."""
    folder = _folder(tmp_path, _line(), _line(**changed))
    found = read_findings(folder)
    assert list(found) == [finding_id(SIGNATURE)]
    assert "skipped 1 line" in capsys.readouterr().err


def test_a_finding_whose_model_does_not_build_is_skipped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a document without layers started every worker under
    ``--write`` and ended in a traceback after 113 s and 7 GB."""
    bad = _line(signature="one Keras backend | keras-jax | forward at dense")
    bad["document"] = {k: v for k, v in DOCUMENT.items() if k != "layers"}
    found = read_findings(_folder(tmp_path, _line(), bad))
    assert list(found) == [finding_id(SIGNATURE)]
    err = capsys.readouterr().err
    assert bad["id"] in err
    assert "a model needs a list of layers" in err


def test_write_refuses_findings_that_do_not_build_before_any_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _line()
    bad["document"] = {**DOCUMENT, "layers": []}
    folder = _folder(tmp_path, bad)
    out = tmp_path / "pages"
    assert main(["fuzz", "--folder", str(folder), "--write", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ")
    assert "no finding whose model builds" in err[-1]
    assert not out.exists()


def test_write_without_findings_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["fuzz", "--folder", str(tmp_path), "--write", str(tmp_path / "o")])
    assert code == 2
    assert "no findings to write" in capsys.readouterr().err


def test_a_page_is_never_written_under_an_id_that_is_a_path(tmp_path: Path) -> None:
    """Whatever reached ``write`` (a finding made in code, not read), its id
    names a file only when it is one plain name: before any check runs."""
    finding = Finding(**{**_line(), "id": "../x"})
    out = tmp_path / "pages"
    with pytest.raises(files.Refused, match="a finding's id"):
        report.write(finding, SimpleNamespace(), out)  # type: ignore[arg-type]
    assert list(tmp_path.rglob("x*")) == []


def test_a_document_without_a_loss_writes_its_page(tmp_path: Path) -> None:
    """Found: a finding whose workload left out ``loss`` (a default) gave a
    traceback under ``--write``: the page reads the spec's workload."""
    outputs = {"kind": "dense", "name": "outputs", "units": 3}
    layers = [*DOCUMENT["layers"][:-1], outputs]
    document = {**DOCUMENT, "layers": layers, "workload": {"optimizer": "sgd"}}
    (found,) = read_findings(_folder(tmp_path, _line(document=document))).values()
    checked = SimpleNamespace(
        verdicts={},
        localizations={},
        judgements={},
        notes=lambda path: [],
        vote=None,
        reference_error=None,
    )
    page = report.markdown(
        found, checked, ("r.py", "print(1)"), {}, "3.9", ("rounding", "x")
    )  # type: ignore[arg-type]
    assert "sgd at learning rate 0.001, loss sparse_categorical_crossentropy" in page


def test_releases_without_write_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: ``--releases`` was ignored without a word without ``--write``."""
    code = main(["fuzz", "--folder", str(tmp_path), "--releases", "3.0.0"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "error: --releases bisects the findings --write writes: give --write DIR too"
    )


def test_releases_with_nothing_to_bisect_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    several = "several paths | keras-jax,native-torch | forward at dense"
    folder = _folder(tmp_path, _line(signature=several))
    monkeypatch.setattr(report, "write_all", lambda found, out, store: [])
    argv = ["fuzz", "--folder", str(folder), "--write", str(tmp_path / "o")]
    assert main([*argv, "--releases", "3.0.0"]) == 0
    assert "no Keras release to bisect" in capsys.readouterr().out


def test_the_releases_section_is_appended_through_the_door(tmp_path: Path) -> None:
    page = files.write_text(tmp_path / "f.md", "# Finding\n")
    report.add_releases(page, "torch", {"3.1.0": True, "3.0.0": False}, "3.1.0")
    text = files.read_text(page)
    assert text.startswith("# Finding\n")
    assert "first affected: 3.1.0" in text
    link = tmp_path / "link.md"
    link.symlink_to(page)
    with pytest.raises(files.Refused, match="symbolic link"):
        report.add_releases(link, "torch", {}, None)


def test_a_campaign_keeps_hypothesis_out_of_the_current_folder(tmp_path: Path) -> None:
    """Found: a campaign wrote ``.hypothesis/`` (its constants cache) into
    the folder it was run from.  A fresh process, as the command is, runs a
    campaign on a stand-in check from an empty folder: nothing appears
    there, Hypothesis' files are in the campaign's folder."""
    here = tmp_path / "here"
    here.mkdir()
    campaign = tmp_path / "campaign"
    script = textwrap.dedent(
        f"""
        import itertools, sys
        from pathlib import Path
        sys.path.insert(0, {str(ROOT)!r})
        from tests.test_fuzz import stand_in
        from harness.fuzz.campaign import Campaign
        ticks = itertools.count()
        Campaign(Path({str(campaign)!r}), 20, stand_in, say=lambda line: None,
                 clock=lambda: float(next(ticks)), draw_seed=0).run()
        """
    )
    subprocess.run([sys.executable, "-c", script], cwd=here, check=True, timeout=600)
    assert list(here.iterdir()) == []
    assert (campaign / "hypothesis").is_dir()


class _Worker:
    """A worker that starts and closes at once, and says which it is."""

    def __init__(self, path: str, **options: object) -> None:
        self.path, self.failure, self.closed = path, None, False
        self.pid: int | None = os.getpid()

    def close(self) -> None:
        self.closed = True


class _Checker:
    def __init__(self, paths: list[str], timeout: float) -> None:
        self.workers: dict[str, Any] = {p: _Worker(p) for p in paths}
        self.references: dict[str, Any] = {}
        self.closed = False

    def check(self, case: object, paths: list[str]) -> object:
        raise RuntimeError("checked")

    def close(self) -> None:
        self.closed = True


def test_workers_holding_more_than_their_share_are_started_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The workers' compile caches grow with every drawn model: past
    ``WORKERS_MAX_BYTES`` together, they are all started again."""
    monkeypatch.setattr(checking, "Checker", _Checker)
    monkeypatch.setattr(checking, "register", lambda *a, **k: "drawn-0")
    check = checking.WorkerCheck(tmp_path)
    first = check.checker
    drawn = SimpleNamespace(document={}, seed=0, batch_size=2, steps=1, modes=[])
    per_worker = checking.WORKERS_MAX_BYTES // len(PATHS)
    monkeypatch.setattr(checking, "resident_bytes", lambda pid: per_worker)
    check(drawn)  # type: ignore[arg-type]
    assert check.checker is first  # within the cap: kept
    monkeypatch.setattr(checking, "resident_bytes", lambda pid: per_worker + 1024**2)
    check(drawn)  # type: ignore[arg-type]
    assert first.closed
    assert check.checker is not first
    assert check.restarts == 1
    cap = f"more than the {checking.WORKERS_MAX_BYTES / 1024**3:g} GiB a campaign"
    assert cap in capsys.readouterr().err
    assert checking.WORKERS_MAX_BYTES >= 6 * 1024**3
    assert checking.meminfo("MemTotal")  # read from /proc
    assert checking.resident_bytes(os.getpid()) > 0  # read from /proc


def test_mode_workers_are_started_on_demand_and_bounded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found: a 60-second campaign's 22 processes held 7.5 GB, a worker for
    every mode resident.  Now a mode's worker starts when a draw asks for
    it, at most ``MODE_WORKERS`` are kept (the least recently used closed
    first), and none starts when the machine is short of memory."""
    monkeypatch.setattr(checking, "Checker", _Checker)
    monkeypatch.setattr(checking, "Worker", _Worker)
    monkeypatch.setattr(checking, "available_bytes", lambda: 8 * 1024**3)
    check = checking.WorkerCheck(tmp_path)
    assert set(check.checker.workers) == set(PATHS)  # no mode's worker yet
    spe, xla, compiled = "keras-jax@spe", "keras-tensorflow@xla", "keras-torch@compile"
    assert check.ready([spe, xla]) == [spe, xla]
    first = check.checker.workers[spe]
    assert check.ready([xla]) == [xla]  # kept: no new worker
    assert check.ready([compiled]) == [compiled]
    assert first.closed  # the least recently used went
    assert spe not in check.checker.workers
    assert sum(p in MODE_PATHS for p in check.checker.workers) == checking.MODE_WORKERS
    monkeypatch.setattr(checking, "available_bytes", lambda: 1024**3)
    assert check.ready([spe]) == []
    assert f"{spe} is left out of this model's check" in capsys.readouterr().err


def test_the_memory_available_is_read_through_the_door(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    meminfo = files.write_text(tmp_path / "meminfo", "MemAvailable:    1024 kB\n")
    monkeypatch.setattr(checking, "MEMINFO", meminfo)
    assert checking.available_bytes() == 1024 * 1024
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(checking, "MEMINFO", fifo)
    assert checking.available_bytes() is None  # refused, never waited on


# --- triage by a run (issue 80) ------------------------------------------------


def _checked_again(
    failing: dict[str, float],
    *,
    stopped: tuple[str, ...] = (),
    odd: str | None = None,
    known: dict[str, str] | None = None,
) -> Any:
    """A finding's check again as ``report.triage`` reads it: each failing
    path's error on ``logits`` (allowed 1e-6; no arrays kept, so the triage
    reads the judge's error), the paths that stopped, a float64 run voted
    out, the known bugs the check names."""
    entries = {
        p: SimpleNamespace(failures=(Entry("logits", e, 1e-6),))
        for p, e in failing.items()
    }
    verdicts = dict.fromkeys(PATHS, "pass")
    verdicts |= dict.fromkeys(failing, "fail") | dict.fromkeys(stopped, "error")
    vote = SimpleNamespace(odd=odd, fault="its logits are off")
    return SimpleNamespace(
        verdicts=verdicts,
        judgements=entries,
        failing=lambda p: ["logits"] if p in failing else [],
        notes=lambda p: (
            [f"{KNOWN_BUG}: {(known or {})[p]}"] if p in (known or {}) else []
        ),
        vote=vote,
        reference_error=None,
        case=SimpleNamespace(model="ffn"),
        expected={},
        evaluated={},
        trajectories={},
    )


def _ran(**errors: float | str) -> dict[str, str]:
    """A reproducer's output per backend: its logits' error, or its failure."""
    return {
        b: e if isinstance(e, str) else f"logits: error {e}\n"
        for b, e in errors.items()
    }


RIGHT = {"jax": 3e-8, "tensorflow": 4e-8, "torch": 5e-8}


@pytest.mark.parametrize(
    ("checked", "outputs", "verdict", "said"),
    [
        (
            _checked_again({"keras-tensorflow": 3.3e-2}),
            _ran(**{**RIGHT, "tensorflow": 3.3e-2}),
            "Keras or its framework",
            "plain Keras on tensorflow is 0.033 off on logits",
        ),
        (
            _checked_again({}, stopped=("keras-torch",)),
            _ran(**{**RIGHT, "torch": "FAILED: RuntimeError: grad_weight"}),
            "Keras or its framework",
            "plain Keras on torch raises (RuntimeError: grad_weight)",
        ),
        (
            _checked_again({"keras-torch": 5e-2}),
            _ran(**RIGHT),
            "the tool's own",
            "and the tool's keras-torch 0.05 off",
        ),
        (
            _checked_again({"native-mxnet": 1e-7}, stopped=("native-jax",)),
            _ran(**RIGHT),
            "the tool's own",
            "native-jax stopped",
        ),
        (
            _checked_again({"keras-jax": 6e-6, "keras-torch": 2e-6}),
            _ran(**RIGHT),
            "rounding",
            "within 0.0001 (at most 6e-06)",
        ),
        (
            _checked_again(
                {"keras-torch": 6e-6, "keras-torch@compile": 6e-6},
                known={"keras-torch": "Nadam", "keras-torch@compile": "Nadam"},
            ),
            _ran(**RIGHT),
            "Keras or its framework",
            "the check names a known Keras bug on keras-torch, "
            "keras-torch@compile: Nadam",
        ),
        (
            _checked_again({"keras-jax": 1e-3}, odd="float64-torch"),
            _ran(**RIGHT),
            "not triaged",
            "the tool's float64 runs disagree (float64-torch: its logits are off)",
        ),
        (
            _checked_again(
                {"keras-tensorflow": 1e-2, "keras-torch": 6e-6},
                known={"keras-torch": "Nadam", "keras-tensorflow": "sparse"},
            ),
            _ran(**{**RIGHT, "tensorflow": 1e-2}),
            "Keras or its framework",
            "0.01 off on logits; within 0.0001 on jax 3e-08, torch 5e-08; the "
            "check names a known Keras bug on keras-torch: Nadam",
        ),
        (_checked_again({}), _ran(**RIGHT), "not shown again", "every path agrees"),
        (  # finding e30b03fb8f: against a float64 value of rounding's size
            _checked_again({"native-torch": 1.0}),
            _ran(jax=1.0, tensorflow=1.7e9, torch=1.7e9),
            "not triaged",
            "plain Keras on every backend parts from float64 on logits (jax 1, "
            "tensorflow 1.7e+09, torch 1.7e+09)",
        ),
        (
            _checked_again({"keras-jax": 1e-3}),
            dict.fromkeys(RIGHT, ""),
            "not triaged",
            "compares none of the quantities",
        ),
    ],
)
def test_a_finding_is_triaged_by_what_its_run_shows(
    checked: Any, outputs: dict[str, str], verdict: str, said: str
) -> None:
    """Each verdict from the run that shows it, and nothing else: the same
    tool failure reads as Keras', the tool's own or rounding only by what
    plain Keras printed beside it."""
    got, why = report.triage(checked, outputs)
    assert (got, said in why) == (verdict, True), why


STEP = "step1/dense_1/bias"
RIGHT_STEP = dict.fromkeys(RIGHT, f"{STEP}: error 0.0\ngrad:dense_1/bias: error 0.0\n")


def _stepped(
    model: str, gradient: float, plain_gradient: float, tool: str = "native-tensorflow"
) -> tuple[Any, dict[str, str]]:
    """Finding 2f453bff01's shape: a path of the tool's and plain Keras on
    TensorFlow off after Adam's first step on a bias whose float64 gradient
    is ``gradient`` everywhere; plain Keras' gradient of it off by
    ``plain_gradient`` (the difference itself where float64 is 0)."""
    checked = _checked_again({})
    checked.verdicts[tool] = "fail"
    checked.judgements = {tool: SimpleNamespace(failures=(Entry(STEP, 0.3, 1e-4),))}
    checked.failing = lambda p: [STEP] if p == tool else []
    checked.case.model = model
    checked.expected = {
        "grad:dense_1/bias": np.full(3, gradient),
        STEP: np.full(3, 0.5),
    }
    off = f"{STEP}: error 1.6e-3\ngrad:dense_1/bias: error {plain_gradient}\n"
    return checked, {**RIGHT_STEP, "tensorflow": off}


@pytest.mark.parametrize(
    ("model", "gradient", "plain_gradient", "verdict", "said"),
    [
        ("ffn", 0.0, 4.5e-8, "rounding", "dense_1/bias a gradient of exactly 0"),
        # the sparse-gradient bug's shape: a right gradient, a wrong step
        ("ffn", 0.2, 4.5e-8, "Keras or its framework", "0.0016 off on step1/"),
        # plain Keras' gradient itself off: not rounding
        ("ffn", 0.0, 1e-2, "Keras or its framework", "0.01 off on grad:"),
        # a batch normalization: the first batch's gradient is not the step's
        ("bn-dropout-cnn", 0.0, 4.5e-8, "Keras or its framework", "0.0016 off"),
    ],
)
def test_a_step_that_scales_rounding_of_a_zero_gradient_is_rounding(
    model: str, gradient: float, plain_gradient: float, verdict: str, said: str
) -> None:
    """Finding 2f453bff01: float64 gives a bias a gradient of exactly 0,
    TensorFlow 4.5e-8, and Adam's m / (sqrt(v) + eps) made that a third of a
    step: every backend's gradient right, the step rounding.  Only there:
    a right gradient with a wrong step where float64's is not 0 is a bug
    (TensorFlow's sparse-gradient optimizers), as is a wrong gradient."""
    checked, outputs = _stepped(model, gradient, plain_gradient)
    got, why = report.triage(checked, outputs)
    assert (got, said in why) == (verdict, True), why


@pytest.mark.parametrize(
    ("value", "verdict", "said"),
    [
        (3e-10, "rounding", "(at most 3e-10)"),
        (0.5, "the tool's own", "native-tensorflow 0.5 off"),
    ],
)
def test_the_tools_paths_are_measured_as_plain_keras_is(
    value: float, verdict: str, said: str
) -> None:
    """Finding 2f8e84f7b7: a gradient float64 says is exactly 0 was 1 off
    on native TensorFlow in the judge's error (normwise, relative to the
    larger side: any rounding against 0 is 100%) and 4e-10 off in plain
    Keras' (the difference itself), so it read as the tool's own.  The
    triage measures the tool's paths as the reproducer measures Keras:
    rounding noise is within, a real value where 0 is right is not."""
    quantity = "grad:dense_2/kernel"
    checked = _checked_again({})
    checked.verdicts["native-tensorflow"] = "fail"
    checked.judgements = {
        "native-tensorflow": SimpleNamespace(failures=(Entry(quantity, 1.0, 1e-3),))
    }
    checked.failing = lambda p: [quantity] if p == "native-tensorflow" else []
    checked.expected = {quantity: np.zeros((2, 3))}
    checked.evaluated = {"native-tensorflow": {quantity: np.full((2, 3), value)}}
    outputs = dict.fromkeys(RIGHT, f"{quantity}: error 4e-10\n")
    got, why = report.triage(checked, outputs)
    assert (got, said in why) == (verdict, True), why


@pytest.mark.parametrize(
    ("trajectory", "verdict"),
    [({}, "the tool's own"), ({"loss": np.array([0.3, 0.5])}, "rounding")],
)
def test_a_step_loss_is_read_from_the_trajectory_alone(
    trajectory: dict[str, Any], verdict: str
) -> None:
    """Found running this stop's hour through ``--write``: a path failing on
    ``step1/loss`` read its evaluation's loss (one number) as the steps'
    and raised; the steps' losses are the trajectory's, the judge's error
    where the check kept none."""
    checked = _checked_again({})
    checked.verdicts["native-jax"] = "fail"
    checked.judgements = {
        "native-jax": SimpleNamespace(failures=(Entry("step1/loss", 1e-2, 1e-6),))
    }
    checked.failing = lambda p: ["step1/loss"] if p == "native-jax" else []
    checked.expected = {"step1/loss": np.array([0.3])}
    checked.evaluated = {"native-jax": {"loss": np.float64(0.2)}}
    checked.trajectories = {"native-jax": trajectory}
    outputs = dict.fromkeys(RIGHT, "step1/loss: error 1e-08\n")
    got, why = report.triage(checked, outputs)
    assert got == verdict, why


def test_a_reproducer_that_times_out_is_no_verdict_on_keras(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Found: one reproducer's timeout on a busy machine raised through
    ``--write``, every later finding unwritten.  It is an answer now, and
    not "plain Keras raises"."""

    def slow(*args: object, **kwargs: object) -> None:
        raise subprocess.TimeoutExpired("reproducer", report.SCRIPT_TIMEOUT_S)

    monkeypatch.setattr(report.subprocess, "run", slow)
    said = report.run_script(tmp_path / "r.py", "jax")
    assert said == "TIMED OUT: no answer in 300 s"
    outputs = {**_ran(**RIGHT), "jax": said}
    got, why = report.triage(_checked_again({"native-torch": 1e-2}), outputs)
    assert got == "the tool's own", why
    assert "every backend but jax, which gave no answer" in why
    assert "raises" not in why


def test_the_tools_own_finding_is_written_as_a_failing_test() -> None:
    """Issue 80: a finding whose run shows the tool wrong is a failing test,
    not a page: a module ``tests/paths/`` takes, holding the finding's model
    and case as literals that read back to the same, and checking again
    exactly the paths that failed or stopped (the test that it fails where a
    path is wrong: tests/paths/test_keras_code.py)."""
    finding = Finding(**_line(seed=7, batch_size=3, steps=2))
    checked = _checked_again({"native-tensorflow": 1.0}, stopped=("native-jax",))
    text = report.failing_test(finding, checked, "plain Keras agrees; the tool's off")
    namespace: dict[str, Any] = {}
    exec(compile(text, "test_finding.py", "exec"), namespace)
    assert namespace["DOCUMENT"] == finding.document
    assert namespace["PATHS"] == ("native-jax", "native-tensorflow")
    assert f"test_finding_{finding.id}_agrees_with_float64" in namespace
    assert "Case(name, 7, 3, None, 1.0, 2)" in text
    assert "plain Keras agrees; the tool's off" in " ".join(text.split())


# --- a campaign as tasks sharing a folder (issue 80) -----------------------------

TASK = """
import sys, time
from pathlib import Path
from harness.fuzz.tasks import Ran, record
from harness.fuzz.findings import Finding, keep, sighted
folder = Path(sys.argv[1])
budget = float(sys.argv[sys.argv.index("--budget") + 1])
index, _, submitted = sys.argv[sys.argv.index("--task") + 1].partition(":")
if index == "2":
    sys.exit(3)  # a task that dies without its tally
line = {**__import__("json").loads(sys.argv[2]), "steps": 2 - int(index) % 2}
keep(folder, Finding(**line))
sighted(folder, line["id"], "adam")
n = int(index)
record(folder, Ran(n, 0, 10 + n, 1.0, budget, [line["id"]], 0, submitted))
"""


def test_tasks_share_a_folder_and_their_campaign_is_merged(tmp_path: Path) -> None:
    """Three tasks through submitit's local executor (Slurm's stand-in):
    each appends its tally and finds the same finding with a model of its
    own size (task 0's trains two steps, task 1's one); the task that dies
    is named, the tallies of the others read back, and the finding merged
    once, its smallest model kept and every task's sighting counted."""
    import json

    from harness.fuzz import tasks

    said: list[str] = []
    line = _line()
    command = [sys.executable, "-c", TASK, str(tmp_path), json.dumps(line)]
    ran = tasks.run_tasks(tmp_path, 7.0, 3, say=said.append, command=command)
    assert [(r.task, r.models, r.elapsed_s) for r in ran] == [
        (0, 10, 7.0),
        (1, 11, 7.0),
    ]
    assert len({r.submitted for r in ran}) == 1
    assert any(s.startswith("task 2 ended without its tally") for s in said), said
    (merged,) = read_findings(tmp_path).values()
    assert (merged.steps, merged.seen) == (1, 2)  # task 1's: one step, not two


def test_a_task_draws_from_a_seed_of_its_own() -> None:
    from harness.cli.fuzz import _task
    from harness.fuzz.tasks import task_seed

    assert _task(None) == (-1, "", None)
    assert _task("2:0000beef") == (2, "0000beef", task_seed("0000beef", 2))
    assert len({task_seed("0000beef", i) for i in range(100)}) == 100
    for bad in ("x:0000beef", "1:beef", "1:zzzzzzzz", "1"):
        with pytest.raises(
            ValueError, match=r"--task is INDEX:SUBMISSION|invalid literal"
        ):
            _task(bad)
