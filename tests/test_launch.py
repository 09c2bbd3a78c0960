"""The orchestrator survives workers that cannot start, crash or hang.

Fake interpreters (small shell scripts) stand in for broken environments, so
these tests need no framework.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import READY, fake_python
from workers import launch, paths
from workers.launch import Worker
from workers.messages import Evaluate, Train, TrainAnswer

EVALUATE = Evaluate(model="ffn", weights="w.npz", data="d.npz", out="o.npz")
TRAIN = Train(model="ffn", weights="w.npz", data="d.npz", steps=1)


def _recording_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> Path:
    """Makes the fake worker run ``body`` after writing its pid (kept by
    ``exec``) to the file returned, so a test can check the worker is gone."""
    pid_file = tmp_path / "pid"
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH", fake_python(tmp_path, f"echo $$ > {pid_file}\n{body}")
    )
    return pid_file


def _gone(pid_file: Path) -> bool:
    """Whether the process is gone, reaped too (a zombie still has its pid)."""
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    return False


def test_missing_interpreter_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_PYTHON_TORCH", "/nonexistent/python")
    with Worker("native-torch") as worker:
        response = worker.call(EVALUATE, timeout=5)
    assert response.status == "unavailable"
    assert "/nonexistent/python" in response.error


def test_worker_that_dies_at_start_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(tmp_path, "echo 'no module named torch' >&2; exit 3"),
    )
    with Worker("native-torch") as worker:
        response = worker.call(EVALUATE, timeout=5)
    assert response.status == "crashed"
    assert "code 3" in response.error
    assert "no module named torch" in response.stderr_tail


def test_hanging_worker_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH", fake_python(tmp_path, f"echo '{READY}'; exec sleep 60")
    )
    with Worker("native-torch") as worker:
        assert worker.failure is None
        response = worker.call(TRAIN, timeout=0.5)
        assert response.status == "timeout"
        # the worker is gone; later calls answer at once with the same failure
        assert worker.call(TRAIN, timeout=0.5).status == "timeout"


def test_worker_that_crashes_mid_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(tmp_path, f"echo '{READY}'; read line; exit 139"),
    )
    with Worker("native-torch") as worker:
        response = worker.call(TRAIN, timeout=5)
    assert response.status == "crashed"
    assert "code 139" in response.error


def test_unknown_path_is_refused() -> None:
    with pytest.raises(ValueError, match="known paths: keras-jax"):
        Worker("native-caffe")


def test_an_unknown_name_lists_the_known_ones_in_one_short_sentence() -> None:
    """The known models grow by a variant per layer kind: the sentence
    lists names up to ``LISTED_CHARS`` and counts the rest."""
    known = [f"kind-{i:03d}" for i in range(100)]
    with pytest.raises(ValueError, match="unknown model resnet") as caught:
        paths.parse_list("resnet", known, "model")
    said = str(caught.value)
    assert said.startswith("unknown model resnet; known models: kind-000, kind-001")
    assert said.endswith(", kind-019 and 80 more")
    assert len(said) < 300
    with pytest.raises(ValueError, match=r"known models: a, b$"):
        paths.parse_list("c", ["a", "b"], "model")


def test_a_worker_exits_when_closed_or_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Exits with 0 once its stdin closes, as the real worker does.
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(tmp_path, f"echo '{READY}'; cat > /dev/null; exit 0"),
    )
    for kill, code in [(False, 0), (True, -signal.SIGKILL)]:
        worker = Worker("native-torch")
        proc = worker._proc
        assert proc is not None
        worker.close(kill=kill)
        assert proc.returncode == code


def test_a_reply_is_decoded_into_the_requests_answer_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = '{"status": "ok", "result": {"first_step_s": 0.5, "step_s": [0.25]}}'
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(tmp_path, f"echo '{READY}'; read line; echo '{answer}'; cat"),
    )
    with Worker("native-torch") as worker:
        reply = worker.call(TRAIN, timeout=5)
    assert reply.ok
    assert reply.answer == TrainAnswer(first_step_s=0.5, step_s=[0.25])


@pytest.mark.parametrize(
    ("line", "status", "words"),
    [
        ("not json at all", "crashed", "not a message"),
        ('{"status": "ok", "result": {"step_s": "fast"}}', "error", "malformed answer"),
        ('{"status": "ok", "result": {"bogus": 1}}', "error", "unknown field"),
    ],
)
def test_a_malformed_reply_is_a_failure_not_a_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    line: str,
    status: str,
    words: str,
) -> None:
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(tmp_path, f"echo '{READY}'; read line; echo '{line}'; cat"),
    )
    with Worker("native-torch") as worker:
        reply = worker.call(TRAIN, timeout=5)
    assert reply.status == status
    assert reply.error is not None
    assert words in reply.error


# A worker that misbehaves in any way ends by the call's timeout at the
# latest.  Which limit ended it is read from the reply, never from a clock: a
# failure that must come at once is a "crashed" reply naming its cause (had it
# waited for the call's 30 s timeout, it would be a "timeout" reply), and a
# timeout's error names the limit that fired ("no answer within 1 s").  The
# fake workers exit after 60 s whatever happens, so a regression cannot hang.


def _misbehaving(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    body: str,
    *,
    timeout: float = 30,
) -> tuple[str, str]:
    """One training request to a fake worker that runs ``body``, checked to
    fail with an error and to leave no worker behind; the reply's status and
    error."""
    pid = _recording_pid(tmp_path, monkeypatch, body)
    with Worker("native-torch") as worker:
        reply = worker.call(TRAIN, timeout=timeout)
        assert reply.error is not None
        assert _gone(pid)
    return reply.status, reply.error


def test_half_a_line_then_silence_times_out_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, error = _misbehaving(
        tmp_path,
        monkeypatch,
        f"""echo '{READY}'; read line; printf '{{"status": "o'; exec sleep 60""",
        timeout=1,
    )
    assert status == "timeout"
    assert "no answer within 1 s" in error
    assert "13 bytes of a line" in error


@pytest.mark.parametrize("garbage", ["garbage! " * 40, "[" * 100_000])
def test_a_garbage_line_ends_the_worker_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, garbage: str
) -> None:
    # A deeply nested array makes json.loads raise RecursionError.
    status, error = _misbehaving(  # crashed: at once, not by the timeout
        tmp_path,
        monkeypatch,
        f"echo '{READY}'; read line; echo '{garbage}'; exec sleep 60",
    )
    assert status == "crashed"
    prefix = "native-torch worker wrote a line that is not a message: "
    assert error.startswith(prefix + repr(garbage[:40]).rstrip("'"))
    assert len(error) <= len(prefix) + 80


def test_bytes_that_are_not_utf8_are_a_crash_not_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, error = _misbehaving(
        tmp_path,
        monkeypatch,
        f"echo '{READY}'; read line; printf '\\377\\376 not text\\n'; exec sleep 60",
    )
    assert status == "crashed"
    assert "not a message: '\\\\xff\\\\xfe not text'" in error


def test_a_worker_that_closes_its_output_and_runs_on_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "EXIT_WAIT", 1.0)
    status, error = _misbehaving(
        tmp_path,
        monkeypatch,
        f"echo '{READY}'; read line; exec 1>&-; exec sleep 60",
    )  # crashed by EXIT_WAIT, not a timeout of the call's 30 s
    assert status == "crashed"
    assert "closed its output but did not exit within 1 s" in error


def test_a_line_longer_than_the_cap_is_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "MAX_LINE", 4096)
    status, error = _misbehaving(
        tmp_path,
        monkeypatch,
        f"echo '{READY}'; read line; printf '%020000d' 0; exec sleep 60",
    )
    assert status == "crashed"
    assert "more than 4096 bytes without a newline" in error


def test_two_messages_in_one_write_are_both_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = '{"status": "ok", "result": {"first_step_s": 0.5, "step_s": [0.25]}}'
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        fake_python(
            tmp_path, f"printf '%s\\n%s\\n' '{READY}' '{answer}'; cat > /dev/null"
        ),
    )
    with Worker("native-torch") as worker:
        assert worker.failure is None
        reply = worker.call(TRAIN, timeout=1)
    assert reply.ok
    assert reply.answer == TrainAnswer(first_step_s=0.5, step_s=[0.25])


def test_half_a_line_at_start_up_fails_within_the_start_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pid = _recording_pid(
        tmp_path, monkeypatch, """printf '{"status": "rea'; exec sleep 60"""
    )
    with Worker("native-torch", start_timeout=1) as worker:
        assert worker.failure is not None
        assert worker.failure.status == "timeout"
        assert worker.failure.error is not None
        assert "no answer within 1 s" in worker.failure.error
        assert _gone(pid)
        assert worker.call(TRAIN, timeout=1) is worker.failure


def test_a_worker_that_stops_reading_its_requests_times_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A request larger than a pipe's buffer would block a plain write forever.
    pid = _recording_pid(tmp_path, monkeypatch, f"echo '{READY}'; exec sleep 60")
    big = Evaluate(model="ffn", weights="w" * 300_000, data="d.npz", out="o.npz")
    with Worker("native-torch") as worker:
        reply = worker.call(big, timeout=1)
        assert reply.status == "timeout"
        assert "within 1 s" in str(reply.error)
        assert _gone(pid)


def test_mxnet_is_found_in_the_environment_nox_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `python -m equivalence` run by hand from .nox/bench finds MXNet where
    # `nox -s bench` built it, without HARNESS_PYTHON_MXNET; the variable
    # still wins, and without either a path runs this interpreter.
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path)
    monkeypatch.delenv("HARNESS_PYTHON_MXNET", raising=False)
    assert paths.interpreter("mxnet") == paths.sys.executable
    built = tmp_path / ".nox" / "mxnet-env" / "bin" / "python"
    built.parent.mkdir(parents=True)
    built.touch()
    assert paths.interpreter("mxnet") == str(built)
    assert paths.interpreter("torch") == paths.sys.executable
    monkeypatch.setenv("HARNESS_PYTHON_MXNET", "/elsewhere/python")
    assert paths.interpreter("mxnet") == "/elsewhere/python"


def test_a_worker_skips_the_imports_it_never_uses() -> None:
    # In a process of its own: the test process keeps its modules.
    script = (
        "import sys\n"
        "from workers.serve import skip_unused_imports\n"
        "print(skip_unused_imports('torch'))\n"
        "for name in ('sklearn', 'jax'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError:\n"
        "        print(name, 'left out')\n"
        "print(skip_unused_imports('jax'))\n"  # already skipped: none again
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == [
        "['sklearn', 'pandas', 'matplotlib', 'jax']",
        "sklearn left out",
        "jax left out",
        "[]",
    ]
