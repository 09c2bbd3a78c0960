"""Starting workers and talking to them, from the framework-free orchestrator.

A ``Worker`` is one child process serving one path (see ``harness.worker``).
Nothing a worker does can take the orchestrator down: a worker that cannot
import its framework, crashes, or runs past its timeout turns into a response
with status ``unavailable``, ``crashed`` or ``timeout`` and a readable reason,
and the caller moves on to the next cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from harness.paths import get_path, interpreter
from harness.resources import Sampler

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STDERR_TAIL = 2000


class Worker:
    """One path's worker process.  Use as a context manager."""

    def __init__(
        self,
        path_id: str,
        start_timeout: float = 300.0,
        env: dict[str, str] | None = None,
        deterministic: bool = False,
    ) -> None:
        """``deterministic``: the worker turns on its framework's deterministic
        algorithms (``harness.numerics``), as the equivalence checks want."""
        self.path = get_path(path_id)
        self.python = interpreter(self.path.framework)
        self.platform: dict[str, Any] = {}
        self.failure: dict[str, Any] | None = None
        # Lives as long as the worker; closed in close().
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        child_env = {**os.environ, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), child_env.get("PYTHONPATH", "")) if p
        )
        child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        child_env.pop("KERAS_BACKEND", None)
        try:
            self._proc: subprocess.Popen[str] | None = subprocess.Popen(
                [
                    self.python,
                    "-m",
                    "harness.worker",
                    path_id,
                    *(["--deterministic"] if deterministic else []),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                text=True,
                env=child_env,
                cwd=PROJECT_ROOT,
            )
        except OSError as exc:
            self._proc = None
            self.failure = {
                "status": "unavailable",
                "error": f"cannot start {self.python} for {path_id}: {exc}",
            }
            return
        hello = self._receive(start_timeout)
        if hello.get("status") == "ready":
            self.platform = hello.get("platform", {})
        else:
            self.failure = hello
            self.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, request: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Send one request; the response, or a failure response, never raises.
        The response carries the worker's CPU use and peak memory meanwhile
        (``resources``, see ``harness.resources``)."""
        if self.failure is not None:
            return self.failure
        assert self._proc is not None
        assert self._proc.stdin is not None
        with Sampler(self._proc.pid) as sampler:
            # If the process died, writing fails; _receive then says how it died.
            with contextlib.suppress(OSError):
                self._proc.stdin.write(json.dumps(request) + "\n")
                self._proc.stdin.flush()
            response = self._receive(timeout)
        response["resources"] = sampler.result()
        if response["status"] in ("crashed", "timeout"):
            self.failure = response
            self.close()
        return response

    def _receive(self, timeout: float) -> dict[str, Any]:
        assert self._proc is not None
        assert self._proc.stdout is not None
        line = _readline(self._proc.stdout, timeout)
        if line is None:
            self._kill()
            return {
                "status": "timeout",
                "error": f"{self.path.id} worker gave no answer within {timeout:.0f} s",
                "stderr_tail": self.stderr_tail(),
            }
        if not line:
            code = self._proc.wait()
            return {
                "status": "crashed",
                "error": f"{self.path.id} worker exited with code {code}",
                "stderr_tail": self.stderr_tail(),
            }
        message: dict[str, Any] = json.loads(line)
        if message.get("status") not in ("ok", "ready"):
            message.setdefault("stderr_tail", self.stderr_tail())
        return message

    def stderr_tail(self) -> str:
        if self._stderr.closed:
            return ""
        self._stderr.flush()
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - STDERR_TAIL))
        return self._stderr.read()

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def close(self, kill: bool = False) -> None:
        """End the worker: let it exit (its stdin closes), or with ``kill``
        end it at once.  A timing worker has nothing left to save once it has
        answered, and Python's exit with TensorFlow or JAX loaded takes 1-1.5 s
        here, eight times per repeat."""
        if self._proc is None:
            self._stderr.close()
            return
        if kill:
            self._kill()
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(OSError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._kill()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._proc = None
        self._stderr.close()


def _readline(stream: IO[str], timeout: float) -> str | None:
    """One line from ``stream``; ``""`` at end of file, ``None`` on timeout."""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if selector.select(remaining):
                return stream.readline()
