"""Starting workers and talking to them, from the framework-free orchestrator.

A ``Worker`` is one child process serving one path (``workers.serve``).  It
takes typed requests and gives typed replies (``workers.messages``).  Nothing
a worker does can take the orchestrator down: a worker that cannot import its
framework, crashes, or runs past its timeout turns into a ``Reply`` with
status ``unavailable``, ``crashed`` or ``timeout`` and a readable reason, and
the caller moves on to the next cell.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import selectors
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from workers.messages import Answer, Request, decode_answer, encode
from workers.paths import get_path, interpreter
from workers.resources import Sampler

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STDERR_TAIL = 2000


@dataclass(frozen=True)
class Reply:
    """What became of one request (or of a worker's start).

    ``status``: ``ok`` (``answer`` is set), ``error`` (the task raised:
    ``error`` and ``traceback``), ``crashed``, ``timeout`` or ``unavailable``
    (the worker is gone or never started: ``error`` and ``stderr_tail``).
    ``resources``: the worker's CPU use and peak memory while it served the
    request (``workers.resources``)."""

    status: str
    answer: Answer | None = None
    error: str | None = None
    traceback: str | None = None
    stderr_tail: str | None = None
    resources: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


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
        algorithms (``workers.numerics``), as the equivalence checks want."""
        self.path = get_path(path_id)
        self.python = interpreter(self.path.framework)
        self.platform: dict[str, Any] = {}
        self.failure: Reply | None = None
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
                    "workers.serve",
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
            self.failure = Reply(
                "unavailable", error=f"cannot start {self.python} for {path_id}: {exc}"
            )
            return
        hello = self._receive(start_timeout)
        if isinstance(hello, dict) and hello.get("status") == "ready":
            self.platform = hello.get("platform", {})
            return
        self.failure = (
            hello
            if isinstance(hello, Reply)
            else Reply("crashed", error=f"{path_id} worker did not say it was ready")
        )
        self.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, request: Request, timeout: float) -> Reply:
        """Send one request; its reply, or a failure reply: never raises."""
        if self.failure is not None:
            return self.failure
        assert self._proc is not None
        assert self._proc.stdin is not None
        with Sampler(self._proc.pid) as sampler:
            # If the process died, writing fails; _receive then says how it died.
            with contextlib.suppress(OSError):
                self._proc.stdin.write(json.dumps(encode(request)) + "\n")
                self._proc.stdin.flush()
            message = self._receive(timeout)
        resources = sampler.result()
        if isinstance(message, Reply):  # the worker is gone
            self.failure = dataclasses.replace(message, resources=resources)
            self.close()
            return self.failure
        if message.get("status") != "ok":
            return Reply(
                "error",
                error=str(message.get("error")),
                traceback=message.get("traceback"),
                stderr_tail=self.stderr_tail(),
                resources=resources,
            )
        try:
            answer = decode_answer(request, message.get("result"))
        except ValueError as exc:
            return Reply("error", error=f"malformed answer: {exc}", resources=resources)
        return Reply("ok", answer=answer, resources=resources)

    def _receive(self, timeout: float) -> dict[str, Any] | Reply:
        """The worker's next message, or the failure that ended it: no answer
        in ``timeout`` seconds, an exit, a message that is not JSON, or an
        ``unavailable`` message at start-up."""
        assert self._proc is not None
        assert self._proc.stdout is not None
        line = _readline(self._proc.stdout, timeout)
        if line is None:
            self._kill()
            return Reply(
                "timeout",
                error=f"{self.path.id} worker gave no answer within {timeout:.0f} s",
                stderr_tail=self.stderr_tail(),
            )
        if not line:
            code = self._proc.wait()
            return Reply(
                "crashed",
                error=f"{self.path.id} worker exited with code {code}",
                stderr_tail=self.stderr_tail(),
            )
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self._kill()
            return Reply(
                "crashed",
                error=f"{self.path.id} worker wrote a line that is not a message: "
                f"{line.strip()!r:.80}",
                stderr_tail=self.stderr_tail(),
            )
        if message.get("status") == "unavailable":
            return Reply(
                "unavailable",
                error=str(message.get("error")),
                stderr_tail=self.stderr_tail(),
            )
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


def thread_environment(threads: dict[str, Any]) -> dict[str, Any]:
    """``{"intra_op": n|"auto", "inter_op": m|"auto"}`` -> the counts
    (``auto``: this machine's cores for intra-op, 1 for inter-op) and the
    environment variables a worker is started with, which the frameworks read
    at start-up and ``workers.numerics`` applies to PyTorch."""
    intra = threads.get("intra_op", "auto")
    inter = threads.get("inter_op", "auto")
    intra = os.cpu_count() or 1 if intra == "auto" else int(intra)
    inter = 1 if inter == "auto" else int(inter)
    env = {
        "OMP_NUM_THREADS": str(intra),
        "MKL_NUM_THREADS": str(intra),
        "OPENBLAS_NUM_THREADS": str(intra),
        "TF_NUM_INTRAOP_THREADS": str(intra),
        "TF_NUM_INTEROP_THREADS": str(inter),
        "HARNESS_INTRA_OP_THREADS": str(intra),
        "HARNESS_INTER_OP_THREADS": str(inter),
    }
    return {"intra_op": intra, "inter_op": inter, "env": env}


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
