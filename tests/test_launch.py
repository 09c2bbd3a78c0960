"""The orchestrator survives workers that cannot start, crash or hang.

Fake interpreters (small shell scripts) stand in for broken environments, so
these tests need no framework.
"""

from __future__ import annotations

import signal
import stat
from pathlib import Path

import pytest

from workers.launch import Worker
from workers.messages import Evaluate, Train, TrainAnswer

READY = '{"status": "ready", "platform": {}}'  # what a worker says once started
EVALUATE = Evaluate(model="ffn", weights="w.npz", data="d.npz", out="o.npz")
TRAIN = Train(model="ffn", weights="w.npz", data="d.npz", steps=1)


def _fake_python(tmp_path: Path, body: str) -> str:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


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
        _fake_python(tmp_path, "echo 'no module named torch' >&2; exit 3"),
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
        "HARNESS_PYTHON_TORCH", _fake_python(tmp_path, f"echo '{READY}'; exec sleep 60")
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
        _fake_python(tmp_path, f"echo '{READY}'; read line; exit 139"),
    )
    with Worker("native-torch") as worker:
        response = worker.call(TRAIN, timeout=5)
    assert response.status == "crashed"
    assert "code 139" in response.error


def test_unknown_path_is_refused() -> None:
    with pytest.raises(ValueError, match="known paths: keras-jax"):
        Worker("native-caffe")


def test_a_worker_exits_when_closed_or_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Exits with 0 once its stdin closes, as the real worker does.
    monkeypatch.setenv(
        "HARNESS_PYTHON_TORCH",
        _fake_python(tmp_path, f"echo '{READY}'; cat > /dev/null; exit 0"),
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
        _fake_python(tmp_path, f"echo '{READY}'; read line; echo '{answer}'; cat"),
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
        _fake_python(tmp_path, f"echo '{READY}'; read line; echo '{line}'; cat"),
    )
    with Worker("native-torch") as worker:
        reply = worker.call(TRAIN, timeout=5)
    assert reply.status == status
    assert reply.error is not None
    assert words in reply.error
