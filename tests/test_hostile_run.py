"""``harness run`` against a hostile world: full disks, Ctrl-C, bad results
folders, crashing and babbling workers, edited profiles, a float64 reference
implementation found wrong.  Each test feeds one
kind of bad input and checks that it ends in one sentence (or a correct
result), that no record is lost, and the exit status.

No framework is needed: the gate and the matmul peak are stubbed, and workers
are small shell scripts standing in for a path's interpreter
(``HARNESS_PYTHON_TORCH``), as in ``tests/test_launch.py``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import harness.bench.run
import harness.core.resources
from harness.__main__ import main
from harness.bench.run import run
from harness.core import gate, records
from harness.core.profiles import PROFILES
from tests.helpers import (
    ANSWER,
    READY,
    fake_python,
    no_framework,
    profile,
    record,
    verdicts,
)
from workers.launch import PROJECT_ROOT


@pytest.fixture
def no_gate(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Every path held back by the gate (no worker starts), no matmul peak."""
    return no_framework(monkeypatch, "fail")


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


ARGS = ["run", "--profile", "smoke", "--models", "ffn", "--paths", "native-torch"]


# --- the results folder ------------------------------------------------------


def test_results_that_is_a_file_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    a_file = tmp_path / "results"
    a_file.write_text("not a folder")
    assert main([*ARGS, "--results", str(a_file)]) == 2
    assert _one_error(capsys) == f"error: --results {a_file} is a file; give a folder\n"


@pytest.mark.parametrize(
    "where",
    [
        "file/inside",  # below a file
        "/proc/no-such-process/results",  # a folder that cannot be made
        "/proc/self",  # a folder no file can be written in
    ],
)
def test_results_that_cannot_be_written_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any, where: str
) -> None:
    (tmp_path / "file").write_text("")
    results = tmp_path / where if not where.startswith("/") else Path(where)
    assert main([*ARGS, "--results", str(results)]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"error: --results {results}: cannot write there (")
    assert err.count("\n") == 1


# --- a full disk ---------------------------------------------------------------


def test_a_device_is_never_appended_to_and_the_error_names_it() -> None:
    # /dev/full (every write fails with ENOSPC) is a device: the door
    # (zoo.files.open_append) refuses it before a byte is written; a disk
    # that fills is the short write below.
    with pytest.raises(records.RecordsWriteError, match="/dev/full") as caught:
        records.append(Path("/dev/full"), record())
    assert "is a character device, not a file to append to" in str(caught.value)


def test_a_short_write_is_undone_and_reported(tmp_path: Path) -> None:
    """A file size limit (RLIMIT_FSIZE) makes the kernel store only part of the
    line and return a short count: exactly what a filling disk does."""
    out = tmp_path / "run-1.jsonl"
    records.append(out, record())
    before = out.read_bytes()
    script = (
        "import resource, sys\n"
        "from pathlib import Path\n"
        "from harness.core import records\n"
        "from tests.helpers import record\n"
        f"out = Path({str(out)!r})\n"
        "limit = out.stat().st_size + 100  # room for 100 bytes of the next line\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
        "try:\n"
        "    records.append(out, record(repeat=1))\n"
        "except records.RecordsWriteError as exc:\n"
        "    print(exc)\n"
        "    sys.exit(3)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3, done.stderr
    assert f"could not write a record to {out}" in done.stdout
    assert "100 of" in done.stdout  # the short write, seen and undone
    assert out.read_bytes() == before  # no torn line left behind
    assert [r.repeat for r in records.read(out)] == [0]


def test_a_full_disk_mid_run_stops_cleanly_and_says_how_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    real_append = records.append
    calls = []

    def append_until_full(path: Path, record: records.Record) -> None:
        calls.append(record)
        if len(calls) == 2:
            raise records.RecordsWriteError(f"could not write a record to {path}")
        real_append(path, record)

    no_gate.setattr(records, "append", append_until_full)
    results = tmp_path / "results"
    args = [*ARGS, "--results", str(results), "--phases", "train,infer"]
    assert main(args) == 1
    err = _one_error(capsys)
    (out,) = results.glob("run-*.jsonl")
    assert f"error: could not write a record to {out}" in err
    assert (
        f"1 records kept in {out}; finish the run with: python -m harness run " in err
    )
    assert f"--resume {out} --profile smoke --models ffn --paths native-torch" in err
    # The record printed as measured before the failure is in the file; the
    # one that failed was never printed as measured.
    assert len(records.read(out)) == 1
    assert "r1 ffn native-torch infer b8: NOT-TIMED" not in err
    # Resuming (disk space back) finishes the run without redoing the first.
    no_gate.setattr(records, "append", real_append)
    assert main([*args, "--resume", str(out)]) == 1  # held back by the gate
    assert "resuming" in capsys.readouterr().err
    assert [(r.phase, r.status) for r in records.read(out)] == [
        ("train", "not-timed"),
        ("infer", "not-timed"),
    ]


# --- Ctrl-C ------------------------------------------------------------------------


def test_ctrl_c_keeps_the_records_and_exits_130(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    real_held_back = harness.bench.run.Measuring.held_back
    calls = []

    def interrupted_on_the_second(self: Any, *args: Any) -> records.Record:
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_held_back(self, *args)

    no_gate.setattr(harness.bench.run.Measuring, "held_back", interrupted_on_the_second)
    results = tmp_path / "results"
    assert main([*ARGS, "--results", str(results), "--phases", "train,infer"]) == 130
    err = _one_error(capsys)
    (out,) = results.glob("run-*.jsonl")
    assert err.endswith(
        f"interrupted\n1 records kept in {out}; finish the run with: python -m "
        f"harness run --resume {out} --profile smoke --models ffn --paths "
        f"native-torch --phases train,infer --results {results}\n"
    )


def test_ctrl_c_before_anything_was_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    no_gate.setattr(harness.bench.run, "verify", interrupted)
    assert main([*ARGS, "--results", str(tmp_path)]) == 130
    err = _one_error(capsys)
    assert err == "interrupted\nno cell was measured yet; start the run again\n"


_SIGINT_RUN = """
import signal
import sys
import harness.bench.run
import harness.core.resources

# Ctrl-C as in a terminal: a test run started in the background of a shell
# inherits SIGINT ignored, which Python (and so its workers) would keep.
signal.signal(signal.SIGINT, signal.default_int_handler)
from harness.__main__ import main

def verify(models, paths, *args, **kwargs):
    return {m: dict.fromkeys(paths, "pass") for m in models}

harness.bench.run.verify = verify
harness.bench.run.measure_matmul_peak = lambda **_: {"flops_per_s": 1}
sys.exit(main(sys.argv[1:]))
"""


def test_a_real_sigint_to_the_process_group_ends_in_one_line(tmp_path: Path) -> None:
    """Ctrl-C in a terminal signals the whole process group, workers included."""
    asked = tmp_path / "asked"  # the worker has the second cell's request
    fake = fake_python(
        tmp_path,
        f"echo '{READY}'\nread line\necho '{ANSWER}'\nread line\n"
        f"touch {asked}\nexec sleep 60",
    )
    results = tmp_path / "results"
    env = {**os.environ, "HARNESS_PYTHON_TORCH": fake, "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-c", _SIGINT_RUN, *ARGS, "--phases", "train,infer"]
    proc = subprocess.Popen(
        [*command, "--results", str(results)],
        cwd=PROJECT_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # a process group of its own, as in a terminal
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not asked.exists():
        time.sleep(0.1)  # until the second cell is under way, its worker asleep
    time.sleep(0.2)  # the worker's shell has become sleep
    found = list(results.glob("run-*.jsonl"))
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    (out,) = found
    assert f"1 records kept in {out}; finish the run with" in err
    assert [(r.phase, r.status) for r in records.read(out)] == [("train", "ok")]


# --- workers that crash or babble ------------------------------------------------


def _shared_worker_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, **changes: Any
) -> list[records.Record]:
    """The records of ffn and lenet trained on native-torch by one worker per
    path (``fresh_worker_per_cell = false``) that runs ``body``, every path
    passing the gate; ``changes``: of the smoke profile."""
    monkeypatch.setenv("HARNESS_PYTHON_TORCH", fake_python(tmp_path, body))
    monkeypatch.setattr(harness.bench.run, "verify", verdicts("pass"))
    shared = profile(fresh_worker_per_cell=False, **changes)
    out = run(
        shared,
        models=["ffn", "lenet"],
        paths=["native-torch"],
        phases=["train"],
        results_dir=tmp_path,
    )
    return records.read(out)


def test_a_crashed_worker_is_replaced_for_the_next_cell(
    tmp_path: Path, no_gate: Any
) -> None:
    """With one worker per path (``fresh_worker_per_cell = false``), a crash
    must not turn the path's remaining cells into copies of the crash."""
    starts = tmp_path / "starts"
    # The first worker crashes on its first request; later ones answer.
    body = (
        f"echo start >> {starts}\necho '{READY}'\nread line\n"
        f'if [ "$(wc -l < {starts})" -eq 1 ]; then exit 3; fi\n'
        f"echo '{ANSWER}'\nwhile read line; do echo '{ANSWER}'; done"
    )
    recs = _shared_worker_run(tmp_path, no_gate, body)
    assert [r.status for r in recs] == ["crashed", "ok"]
    assert starts.read_text().count("start") == 2


def test_a_worker_that_cannot_start_is_not_started_again_for_each_cell(
    tmp_path: Path, no_gate: Any
) -> None:
    """A start-up failure repeats itself (a missing module, a hang before
    ready): the path's other cells of the repeat share it, at no new wait."""
    starts = tmp_path / "starts"
    body = f"echo start >> {starts}\necho 'no module named torch' >&2\nexit 3"
    recs = _shared_worker_run(tmp_path, no_gate, body)
    assert [r.status for r in recs] == ["crashed", "crashed"]
    assert starts.read_text().count("start") == 1


def test_a_worker_that_writes_half_a_line_and_hangs_times_out_and_the_run_goes_on(
    tmp_path: Path, no_gate: Any
) -> None:
    body = f"echo '{READY}'\nread line\nprintf '{{\"status\": \"o'\nexec sleep 60"
    recs = _shared_worker_run(tmp_path, no_gate, body, timeout_s=1.0)
    assert [r.status for r in recs] == ["timeout", "timeout"]
    assert all("within 1 s" in str(r.error) for r in recs), recs
    counts, line = records.outcome(recs)
    assert counts == {"timeout": 2}
    assert line == "2 cell repeats: 2 timeout"


def test_a_diverged_answer_is_recorded_as_diverged(
    tmp_path: Path, no_gate: Any
) -> None:
    answer = (
        '{"status": "ok", "result": {"first_step_s": 0.1, "step_s": [0.01], '
        '"nonfinite": "loss nan after the last timed run"}}'
    )
    no_gate.setenv("HARNESS_PYTHON_TORCH", fake_python(tmp_path, answer=answer))
    no_gate.setattr(harness.bench.run, "verify", verdicts("pass"))
    out = run(
        PROFILES["smoke"],
        models=["ffn"],
        paths=["native-torch"],
        phases=["train"],
        results_dir=tmp_path,
    )
    (record,) = records.read(out)
    assert record.status == "diverged"
    assert record.error == "not finite: loss nan after the last timed run"
    assert record.summary == {}  # no time is shown for it
    assert record.values["step_s"] == [0.01]  # the raw measurement is kept


# --- exit status ----------------------------------------------------------------


def test_exit_status_is_zero_only_when_every_cell_repeat_is_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    no_gate.setenv("HARNESS_PYTHON_TORCH", fake_python(tmp_path, answer=ANSWER))
    no_gate.setattr(harness.bench.run, "verify", verdicts("pass"))
    # The host's other work is sampled for real: a busy moment (in CI it
    # happened) adds "measured on a BUSY MACHINE" to the line this test reads.
    no_gate.setattr(harness.core.resources, "contended", lambda resources: False)
    args = [*ARGS, "--phases", "train", "--results", str(tmp_path)]
    assert main(args) == 0
    assert capsys.readouterr().out.endswith("1 cell repeats: 1 ok\n")
    no_gate.setattr(harness.bench.run, "verify", verdicts("fail"))
    assert main([*ARGS, "--phases", "train", "--results", str(tmp_path / "b")]) == 1
    assert capsys.readouterr().out.endswith("1 cell repeats: 1 not-timed\n")
    # A path whose training alone disagrees with float64: its training is
    # held back (its inference timed), and the run did as it must.
    no_gate.setattr(harness.bench.run, "verify", verdicts("infer-only"))
    assert main([*ARGS, "--phases", "train", "--results", str(tmp_path / "c")]) == 0
    out = capsys.readouterr().out
    assert out.endswith("1 cell repeats: 1 not-timed (training not equivalent)\n")


@pytest.mark.parametrize("wrong", [False, True])
def test_a_reference_found_wrong_fails_the_run_and_its_report_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any, wrong: bool
) -> None:
    """The gate passed the path against the implementations that agree, so
    it is timed; but a reference implementation was found wrong, so the run
    (and ``report --check``) ends non-zero, saying what was wrong."""
    sentence = "native-torch's float64 run computed in float32 (a dtype fault)"

    def verify(models: list[str], paths: list[str], results: Path, **kw: Any) -> Any:
        kw["keys_out"].update({"ffn": {"native-torch": "key"}})
        entry = {"model": "ffn", "path": "native-torch", "verdict": "pass"}
        entry |= {"created": "now", **({"reference": sentence} if wrong else {})}
        gate._save(results / gate.CACHE_NAME, {"key": entry})
        return {"ffn": {"native-torch": "pass"}}

    no_gate.setenv("HARNESS_PYTHON_TORCH", fake_python(tmp_path, answer=ANSWER))
    no_gate.setattr(harness.bench.run, "verify", verify)
    no_gate.setattr(harness.core.resources, "contended", lambda resources: False)
    results = tmp_path / "results"
    code = main([*ARGS, "--phases", "train", "--results", str(results)])
    (out,) = results.glob("run-*.jsonl")
    (timed,) = records.read(out)
    assert (timed.status, timed.equivalence, timed.verified) == ("ok", "pass", True)
    said = f"REFERENCE WRONG for ffn: {sentence}"
    lines = capsys.readouterr().out.splitlines()
    assert code == (1 if wrong else 0)
    assert (said in lines) is wrong
    assert main(["report", str(out), "--check"]) == code
    assert (said in capsys.readouterr().err.splitlines()) is wrong
    # the same with the plots, as nox -s bench ends (this combination raised
    # UnboundLocalError at c0073ac)
    plotted = ["report", str(out), "--plots", str(tmp_path / "plots"), "--check"]
    assert main(plotted) == code
    assert (said in capsys.readouterr().err.splitlines()) is wrong
    assert (tmp_path / "plots" / "report.html").is_file()


def test_outcome_counts_final_records_and_unverified_ones(tmp_path: Path) -> None:
    out = tmp_path / "run-1.jsonl"
    records.append(out, record(verified=False))
    records.append(out, record(repeat=1, status="crashed"))
    records.append(out, record(repeat=1, verified=False))  # redone by --resume
    records.append(out, record(repeat=2, status="diverged"))
    counts, line = records.outcome(records.read(out))
    assert counts == {"ok": 2, "diverged": 1}
    assert line == "3 cell repeats: 1 diverged, 2 ok, 2 of the ok ones unverified"


def test_outcome_says_how_many_were_measured_on_a_busy_machine() -> None:
    quiet = record()
    busy = record(repeat=1)
    busy.summary.update(contended=True, others_cpu=0.9)
    _, line = records.outcome([quiet, busy])
    assert line == (
        "2 cell repeats: 2 ok, 1 of the ok ones measured on a BUSY MACHINE "
        "(other processes took CPU time meanwhile)"
    )
    assert "BUSY" not in records.outcome([quiet])[1]


# --- resume ------------------------------------------------------------------------


def test_resume_compares_profiles_by_content_not_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    smoke = (PROJECT_ROOT / "harness" / "blueprints" / "smoke.toml").read_text()
    renamed = tmp_path / "my-smoke.toml"
    renamed.write_text(smoke)
    edited = tmp_path / "smoke.toml"  # the shipped name, other content
    edited.write_text(smoke.replace("train_steps = 2", "train_steps = 3"))
    results = tmp_path / "results"
    base = [*ARGS[3:], "--results", str(results)]
    assert main(["run", "--profile", "smoke", "--phases", "train", *base]) == 1
    (out,) = results.glob("run-*.jsonl")
    capsys.readouterr()
    both = ["--phases", "train,infer", "--resume", str(out)]
    assert main(["run", "--profile", str(edited), *base, *both]) == 2
    err = _one_error(capsys)
    assert f"error: --resume: {out} was measured with other settings than" in err
    assert main(["run", "--profile", str(renamed), *base, *both]) == 1
    assert [r.phase for r in records.read(out)] == ["train", "infer"]


def test_resume_refuses_a_file_it_cannot_append_to(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_gate: Any
) -> None:
    folder = tmp_path / "run-x.jsonl"
    folder.mkdir()
    assert main([*ARGS, "--resume", str(folder), "--results", str(tmp_path)]) == 2
    assert _one_error(capsys) == f"error: --resume: no records file {folder}\n"
    if os.geteuid() != 0:  # root may append to a read-only file
        locked = tmp_path / "run-locked.jsonl"
        records.append(locked, record())
        locked.chmod(0o444)
        assert main([*ARGS, "--resume", str(locked), "--results", str(tmp_path)]) == 2
        assert "cannot append to" in _one_error(capsys)


@pytest.mark.parametrize(
    "case",
    [
        ("--models", "ffn,ffn", "model ffn given twice; name each model once"),
        ("--paths", "native-torch,native-torch", "path native-torch given twice"),
        ("--phases", "train,infer,train", "phase train given twice"),
        ("--models", "x" * 5_000_000, "unknown model xxxxxxxx"),
        ("--paths", ",,,", "unknown path ',,,'"),
        ("--models", "", "unknown model ''"),  # not the profile's whole list
        ("--phases", "train,\x00\xff", "unknown phase \x00\xff"),
    ],
)
def test_bad_selections_are_one_short_sentence(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_gate: Any,
    case: tuple[str, str, str],
) -> None:
    option, value, says = case
    args = ["run", "--profile", "smoke", option, value, "--results", str(tmp_path)]
    assert main(args) == 2
    err = _one_error(capsys)
    assert says in err
    assert err.count("\n") == 1
    assert len(err) < 400
    assert not list(tmp_path.glob("run-*.jsonl"))


def test_report_check_fails_unless_every_cell_repeat_is_ok(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run-1.jsonl"
    records.append(out, record(verified=False))
    assert main(["report", str(out), "--check"]) == 0
    assert (
        capsys.readouterr().err == "1 cell repeats: 1 ok, 1 of the ok ones unverified\n"
    )
    records.append(out, record(repeat=1, status="timeout"))
    assert main(["report", str(out), "--check"]) == 1
    assert capsys.readouterr().err.endswith(
        "2 cell repeats: 1 ok, 1 timeout, 1 of the ok ones unverified\n"
    )


# --- every number on a command line has bounds -------------------------------------

NINES = "9" * 5000


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--seed", "-1"], "--seed must be from 0 to 4294967295, got -1"),
        (["--seed", "99999999999999999999"], "--seed must be from 0 to 4294967295"),
        (["--seed", NINES], "argument --seed: not an integer: '999"),
        (["--batch-size", "0"], "--batch-size must be from 1 to 4096, got 0"),
        (["--batch-size", "1000000000"], "--batch-size must be from 1 to 4096"),
        (["--steps", "1000000"], "--steps must be from 0 to 1000"),
        (["--epochs", "-1"], "--epochs must be from 0 to 100"),
        (["--seq-len", "0"], "--seq-len must be from 1 to 10000"),
        (["--input-scale", "nan"], "--input-scale must be from 0 to 1000000, got nan"),
        (["--input-scale", "1e300"], "--input-scale must be from 0 to 1000000"),
        (["--timeout", "inf"], "--timeout must be from 1 to 86400, got inf"),
        (["--timeout", "0"], "--timeout must be from 1 to 86400, got 0.0"),
        (["--timeout", "soon"], "argument --timeout: not a number: 'soon'"),
        (["--models", "ffn,ffn"], "model ffn given twice"),
    ],
)
def test_equivalence_numbers_are_bounded(
    capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    from equivalence.__main__ import main as equivalence_main

    try:
        code = equivalence_main(argv)
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    assert code == 2
    err = _one_error(capsys)
    assert says in err
    assert len(err.splitlines()[-1]) < 200


@pytest.mark.parametrize("runs", ["0", "1001", "1e9", NINES])
def test_floors_runs_are_bounded(capsys: pytest.CaptureFixture[str], runs: str) -> None:
    try:
        code = main(["floors", "--runs", runs])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2
    err = _one_error(capsys)
    assert "--runs" in err
    assert len(err.splitlines()[-1]) < 200


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"schema_version": 99}\n', "line 1 has schema_version 99, newer than"),
        (b"\xff\xfe\x00binary", "is not a records file: it is not UTF-8 text"),
    ],
)
def test_resume_refuses_what_it_cannot_read_in_one_sentence(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_gate: Any,
    content: bytes,
    says: str,
) -> None:
    bad = tmp_path / "run-bad.jsonl"
    bad.write_bytes(content)
    assert main([*ARGS, "--resume", str(bad), "--results", str(tmp_path)]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"error: {bad} ")
    assert says in err
    assert bad.read_bytes() == content  # left as it was


@pytest.mark.parametrize("kind", ["fifo", "device", "folder", "huge"])
def test_a_blueprint_that_is_no_regular_file_is_one_sentence_not_a_hang(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    blueprint = tmp_path / f"{kind}.toml"
    if kind == "fifo":
        os.mkfifo(blueprint)  # reading it would wait for a writer forever
    elif kind == "device":
        blueprint.symlink_to("/dev/zero")  # reading it would never end
    elif kind == "folder":
        blueprint.mkdir()
    else:
        blueprint.write_bytes(b"#" * (17 * 2**20))
    assert main(["run", "--profile", str(blueprint)]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"error: cannot read blueprint '{blueprint}': ")
    assert err.count("\n") == 1


def test_plots_into_a_file_is_one_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run-1.jsonl"
    records.append(out, record())
    a_file = tmp_path / "plots"
    a_file.write_text("")
    assert main(["report", str(out), "--plots", str(a_file)]) == 2
    assert _one_error(capsys) == f"error: --plots {a_file} is a file; give a folder\n"


def test_resources_that_are_not_numbers_never_cost_a_record() -> None:
    from harness.core.resources import resource_summary

    summary = resource_summary(
        {"cpu_util": float("nan"), "peak_rss_mb": 12.0, "others_cpu": float("nan")}
    )
    assert summary == {"peak_rss_mb": 12.0, "contended": False}
