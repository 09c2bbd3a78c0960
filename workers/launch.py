"""Starting workers and talking to them, from the framework-free orchestrator.

A ``Worker`` is one child process serving one path (``workers.serve``), or
two paths of one framework (a ``partner``, for ``workers.messages.Paired``),
optionally pinned to given CPUs.  It takes typed requests and gives typed
replies (``workers.messages``).  Nothing a worker does can take the
orchestrator down: a worker that cannot import its framework, crashes, or
runs past its timeout turns into a ``Reply`` with status ``unavailable``,
``crashed`` or ``timeout`` and a readable reason, and the caller moves on to
the next cell.

Every timeout is a hard limit.  The pipes are used through their file
descriptors, non-blocking, so no read or write waits past a deadline: a worker
that hangs in the middle of a line, stops reading its requests, writes bytes
that are not a message, writes without end, or closes its output and keeps
running is killed, and the call returns by its deadline (``EXIT_WAIT`` later
at most, for a worker whose output closed, to learn its exit code).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import os
import selectors
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.messages import Answer, Task, decode_answer, encode
from workers.paths import get_path, interpreter
from workers.resources import Sampler

PROJECT_ROOT = Path(__file__).resolve().parent.parent
STDERR_TAIL = 2000
# The longest line a worker may write, in bytes.  Answers are small (arrays
# travel as .npz files); a worker writing more without a newline is killed.
MAX_LINE = 64 * 2**20
# How long a worker whose output closed has to exit before it is killed.
EXIT_WAIT = 5.0
_CHUNK = 2**16  # bytes per read: one pipe buffer


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


class _End(enum.Enum):
    """Why ``_Lines.read`` gave no line."""

    EOF = "the worker closed its output"
    TIMEOUT = "no whole line by the deadline"
    TOO_LONG = "a line longer than MAX_LINE"


class _Lines:
    """Whole lines from a pipe, read as bytes from its file descriptor.

    ``read`` never blocks past its deadline: bytes are read in chunks into a
    buffer as they arrive, and a line is given only once its newline has come,
    so half a line followed by silence is a timeout.  Bytes after a newline stay
    in the buffer for the next ``read``."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._buffer = bytearray()
        self._scanned = 0  # the buffer holds no newline before this index
        self._eof = False

    @property
    def pending(self) -> int:
        """Bytes of an unfinished line."""
        return len(self._buffer)

    def read(self, deadline: float) -> bytes | _End:
        """The next line without its newline (the last one may lack it), or
        why there is none: ``EOF`` once the pipe is closed and drained,
        ``TIMEOUT`` at ``deadline`` (``time.monotonic``), ``TOO_LONG`` once a
        line passes ``MAX_LINE`` bytes."""
        with selectors.DefaultSelector() as selector:
            selector.register(self._fd, selectors.EVENT_READ)
            while True:
                newline = self._buffer.find(b"\n", self._scanned)
                if newline > MAX_LINE or (newline < 0 and self.pending > MAX_LINE):
                    return _End.TOO_LONG
                if newline >= 0:
                    line = bytes(self._buffer[:newline])
                    del self._buffer[: newline + 1]
                    self._scanned = 0
                    return line
                self._scanned = self.pending
                if self._eof:
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    self._scanned = 0
                    return line if line else _End.EOF
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return _End.TIMEOUT
                if not selector.select(remaining):
                    continue
                try:
                    chunk = os.read(self._fd, _CHUNK)
                except BlockingIOError:  # woken with nothing to read after all
                    continue
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True


def _write(fd: int, data: bytes, deadline: float) -> None:
    """Write ``data`` to the non-blocking pipe ``fd``, giving up at
    ``deadline`` or once the reader is gone; the reply that is then read (a
    timeout, or how the worker ended) says what happened."""
    view = memoryview(data)
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_WRITE)
        while view:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                return
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
            except OSError:  # the worker closed its stdin or died
                return


# glibc's allocator, fixed for every worker.  Left to itself it moves its
# mmap threshold with the sizes freed so far and gives freed memory back to
# the kernel whenever the heap's top passes a threshold that moves with it,
# so whether a step's tensors come from reused pages or from fresh page
# faults depends on the process' history.  Keras' LSTM on PyTorch here: steps
# of 0.85 s without faults and 1.7 s with 527,000 minor faults, in one
# process, drawn at random from step to step (docs/methodology.md, "The
# allocator").  Fixed, no allocation under 32 MiB is an mmap of its own and
# nothing freed is returned, so every step reuses warm pages; workers report
# the values as ``platform["allocator"]``.
ALLOCATOR_ENV = {
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(2**32),
}


class Worker:
    """One path's worker process.  Use as a context manager.

    ``start_timeout`` and each ``call``'s ``timeout`` are hard limits: past
    them the worker is killed and the failure is the reply."""

    def __init__(
        self,
        path_id: str,
        start_timeout: float = 300.0,
        env: dict[str, str] | None = None,
        deterministic: bool = False,
        *,
        partner: str | Sequence[str] | None = None,
        cpus: tuple[int, ...] | None = None,
        wrapper: Sequence[str] = (),
    ) -> None:
        """``deterministic``: the worker turns on its framework's deterministic
        algorithms (``workers.numerics``), as the equivalence checks want.

        ``partner``: a second path of the same framework the worker serves
        beside ``path_id`` (``workers.messages.Paired`` alternates the two);
        every other request goes to ``path_id``.  ``platform`` describes
        ``path_id``, ``partner_platform`` the partner.  Several partners (a
        list; ``workers.messages.Levels`` interleaves them all):
        ``partner_platforms`` describes each, ``partner`` is the first.

        ``cpus``: the CPUs the worker is pinned to (set in the child before
        its interpreter starts, so every thread it makes inherits it).  Either
        way the worker reports the CPUs it may run on as
        ``platform["cpu_affinity"]``.

        ``wrapper``: a command the interpreter runs under (``valgrind
        --tool=callgrind ...`` for ``harness count``); not with ``cpus``,
        whose pinning re-executes the interpreter, which a wrapper would
        not follow."""
        self.path = get_path(path_id)
        names = [partner] if isinstance(partner, str) else list(partner or [])
        self.partners = [get_path(name) for name in names]
        self.partner = self.partners[0] if self.partners else None
        for name, info in zip(names, self.partners, strict=True):
            if info.framework != self.path.framework or name == path_id:
                raise ValueError(
                    f"a worker's partner must be another path of its framework "
                    f"({self.path.framework}), not {name}"
                )
        self.cpus = _check_cpus(cpus)
        if wrapper and self.cpus is not None:
            raise ValueError("a worker run under a wrapper command is not pinned")
        self.python = interpreter(self.path.framework)
        self.platform: dict[str, Any] = {}
        self.partner_platform: dict[str, Any] = {}
        self.partner_platforms: list[dict[str, Any]] = []
        self.failure: Reply | None = None
        self.started = False  # it said it was ready
        self._lines: _Lines | None = None
        # Lives as long as the worker; closed in close().
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115
        child_env = {**os.environ, **ALLOCATOR_ENV, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PROJECT_ROOT), child_env.get("PYTHONPATH", "")) if p
        )
        child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        # A compile cache of the worker's own, empty, removed in close():
        # torch.compile's first step is then a cold compile in every process
        # (``workers.numerics.pin_compiler``), as JAX's and XLA's are.
        self._compile_cache = tempfile.TemporaryDirectory(prefix="harness-compile-")
        child_env["TORCHINDUCTOR_CACHE_DIR"] = self._compile_cache.name
        child_env.pop("KERAS_BACKEND", None)
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [
                    *wrapper,
                    self.python,
                    *_pinned(self.cpus),
                    "-m",
                    "workers.serve",
                    path_id,
                    *(arg for name in names for arg in ("--partner", name)),
                    *(["--deterministic"] if deterministic else []),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._stderr,
                env=child_env,
                cwd=PROJECT_ROOT,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            # SubprocessError: the pinning failed in the child (CPUs offline
            # or outside this process' cgroup).
            self._proc = None
            pinned = "" if self.cpus is None else f" pinned to CPUs {self.cpus}"
            self.failure = Reply(
                "unavailable",
                error=f"cannot start {self.python} for {path_id}{pinned}: {exc}",
            )
            return
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        os.set_blocking(self._proc.stdin.fileno(), False)
        self._lines = _Lines(self._proc.stdout.fileno())
        hello = self._receive(time.monotonic() + start_timeout, start_timeout)
        if isinstance(hello, dict) and hello.get("status") == "ready":
            self.platform = hello.get("platform", {})
            self.partner_platform = hello.get("partner_platform", {})
            self.partner_platforms = hello.get("partner_platforms", [])
            self.started = True
            return
        self.failure = (
            hello
            if isinstance(hello, Reply)
            else Reply("crashed", error=f"{path_id} worker did not say it was ready")
        )
        self.close(kill=True)

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def call(self, request: Task, timeout: float) -> Reply:
        """Send one request; its reply, or a failure reply: never raises, and
        returns within ``timeout`` seconds (``EXIT_WAIT`` more at most, for a
        worker that closed its output).  After a failure the worker is gone
        and every later call gives the same failure."""
        if self.failure is not None:
            return self.failure
        assert self._proc is not None
        assert self._proc.stdin is not None
        deadline = time.monotonic() + timeout
        with Sampler(self._proc.pid) as sampler:
            request_line = json.dumps(encode(request)) + "\n"
            _write(self._proc.stdin.fileno(), request_line.encode(), deadline)
            message = self._receive(deadline, timeout)
        resources = sampler.result()
        if isinstance(message, Reply):  # the worker is gone
            self.failure = dataclasses.replace(message, resources=resources)
            self.close(kill=True)
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

    def _receive(self, deadline: float, timeout: float) -> dict[str, Any] | Reply:
        """The worker's next message, or the failure that ended it: no whole
        line by ``deadline`` (``timeout`` seconds after the call began), an
        exit or closed output, a line that is not a JSON object in UTF-8 or is
        too long, or an ``unavailable`` message at start-up.  Except for
        ``unavailable``, a failure leaves the worker killed or exited."""
        assert self._proc is not None
        assert self._lines is not None
        line = self._lines.read(deadline)
        if line is _End.TIMEOUT:
            self._kill()
            half = self._lines.pending
            return self._failed(
                "timeout",
                f"gave no answer within {timeout:g} s"
                + (f" (it wrote {half} bytes of a line and stopped)" if half else ""),
            )
        if line is _End.TOO_LONG:
            self._kill()
            return self._failed(
                "crashed", f"wrote more than {MAX_LINE} bytes without a newline"
            )
        if line is _End.EOF:
            return self._failed("crashed", self._exit_after_eof())
        assert isinstance(line, bytes)
        try:
            message = json.loads(line.decode("utf-8"))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            message = None
        if not isinstance(message, dict):
            self._kill()
            shown = line.decode("utf-8", errors="backslashreplace").strip()
            return self._failed(
                "crashed", f"wrote a line that is not a message: {shown!r:.80}"
            )
        if message.get("status") == "unavailable":
            return Reply(
                "unavailable",
                error=str(message.get("error")),
                stderr_tail=self.stderr_tail(),
            )
        return message

    def _exit_after_eof(self) -> str:
        """How a worker whose output closed ended: its exit code, waited for
        ``EXIT_WAIT`` seconds at most, after which it is killed."""
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=EXIT_WAIT)
        except subprocess.TimeoutExpired:
            self._kill()
            return (
                f"closed its output but did not exit within {EXIT_WAIT:g} s, "
                "so it was killed"
            )
        return f"exited with code {code}"

    def _failed(self, status: str, what: str) -> Reply:
        """A failure reply naming the worker, with its stderr so far."""
        return Reply(
            status,
            error=f"{self.path.id} worker {what}",
            stderr_tail=self.stderr_tail(),
        )

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

    @property
    def pid(self) -> int | None:
        """The worker process' id while it runs (``None`` once it ended or
        when it never started)."""
        if self._proc is None or self._proc.poll() is not None:
            return None
        return self._proc.pid

    def close(self, kill: bool = False) -> None:
        """End the worker: let it exit (its stdin closes), or with ``kill``
        end it at once.  A timing worker has nothing left to save once it has
        answered, and Python's exit with TensorFlow or JAX loaded takes 1-1.5 s
        here, eight times per repeat."""
        if self._proc is None:
            self._stderr.close()
            self._compile_cache.cleanup()
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
        self._compile_cache.cleanup()


def _check_cpus(cpus: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """``cpus`` as a sorted tuple, or ValueError in one sentence when it
    cannot be an affinity on this machine."""
    if cpus is None:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError("pinning a worker to CPUs needs os.sched_setaffinity (Linux)")
    if not cpus or any(
        not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in cpus
    ):
        raise ValueError(
            f"cpus must be a non-empty tuple of CPU numbers, got {cpus!r:.80}"
        )
    return tuple(sorted(set(cpus)))


# Pins its own process to the CPUs in argv[1], then execs the interpreter on
# the rest of argv, so every thread the worker starts inherits the pinning.
# A small program in the child instead of a preexec_fn: forking a parent that
# has threads (a test process with JAX loaded) with a preexec_fn is unsafe.
_PIN_AND_EXEC = (
    "import json, os, sys\n"
    "try:\n"
    "    os.sched_setaffinity(0, [int(c) for c in sys.argv[1].split(',')])\n"
    "except (OSError, ValueError) as exc:\n"
    "    print(json.dumps({'status': 'unavailable', 'error': "
    "f'cannot pin the worker to CPUs {sys.argv[1]}: {exc}'}), flush=True)\n"
    "    sys.exit(1)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def _pinned(cpus: tuple[int, ...] | None) -> list[str]:
    """The interpreter arguments that pin the worker to ``cpus`` first."""
    if cpus is None:
        return []
    return ["-c", _PIN_AND_EXEC, ",".join(str(c) for c in cpus)]


# Set for a worker whose helper threads are free (``harness.core.placement``):
# the CPUs all its threads may use once its frameworks are loaded.
RELEASE_VARIABLE = "HARNESS_HELPER_CPUS"


def release_helpers() -> list[int] | None:
    """Let every thread of this process, and every thread it starts from
    now on, run on the CPUs ``RELEASE_VARIABLE`` names; the CPUs, or None
    where it is unset.  Called once the worker's frameworks are loaded and
    have sized their thread pools for the one CPU it started on.

    Raises ValueError, in one sentence, for a value that names no CPUs."""
    value = os.environ.get(RELEASE_VARIABLE)
    if not value:
        return None
    try:
        cpus = _check_cpus(tuple(int(c) for c in value.split(",")))
    except ValueError:
        cpus = None
    if not cpus:
        raise ValueError(
            f"{RELEASE_VARIABLE} must list CPU numbers like 0,1, got {value!r:.80}"
        )
    for task in Path("/proc/self/task").iterdir():
        with contextlib.suppress(OSError, ValueError):  # a thread that ended
            os.sched_setaffinity(int(task.name), cpus)
    return list(cpus)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (what a Slurm task, a
    container's cpuset or ``taskset`` leaves it), not the machine's count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def thread_environment(threads: dict[str, Any]) -> dict[str, Any]:
    """``{"intra_op": n|"auto", "inter_op": m|"auto"}`` -> the counts
    (``auto``: the CPUs this process may use for intra-op, 1 for inter-op)
    and the environment variables a worker is started with, which the
    frameworks read at start-up and ``workers.numerics`` applies to PyTorch."""
    intra = threads.get("intra_op", "auto")
    inter = threads.get("inter_op", "auto")
    intra = usable_cpus() if intra == "auto" else int(intra)
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
