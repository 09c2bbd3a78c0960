"""Factories the framework-free tests share, so that each test names only the
values that matter to it.

- :func:`record`: a measurement record (``harness.core.records.Record``),
  built by ``records.make`` as the harness builds one, with its timing derived
  from one number (``seconds``).
- :func:`fake_python`: a shell script standing in for a path's interpreter
  (set it as ``HARNESS_PYTHON_TORCH``); :data:`READY` and :data:`ANSWER` are
  the lines such a worker says.
- :func:`profile`: a shipped blueprint with some settings changed.
- :func:`verdicts`: a stand-in for ``harness.bench.run.verify`` that judges
  every path alike, so no equivalence check runs; :func:`no_framework` puts it
  in place with a fixed matmul peak, so ``harness run`` needs no framework.
- :class:`FakeClock`: a clock whose time moves only when a test's stand-in
  work says so; :func:`fake_clock` puts one in place of the timing loops'
  clock (``workers.timing.clock``), so a test asserts on what they computed,
  never on how fast the machine is.
- :func:`judged`: an equivalence case judged against float64 as the checker
  judges one, on stand-in arrays (no worker), with one reference
  implementation's float64 run wrong in a chosen way, or none.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import workers.timing
from equivalence.check import Case, ModelReport, ReferenceRun, decide, run_name
from equivalence.reference import IMPLEMENTATIONS, own_implementation
from harness.core import records
from harness.core.profiles import PROFILES, Profile, Settings
from workers.launch import PROJECT_ROOT, Reply

# What a worker says once it has started (workers.messages).
READY = '{"status": "ready", "platform": {}}'
# A worker's answer to a training request: a first step of 0.1 s, then one
# timed step of 0.01 s.
ANSWER = '{"status": "ok", "result": {"first_step_s": 0.1, "step_s": [0.01]}}'


def record(
    path: str = "native-torch",
    phase: str = "train",
    *,
    seconds: float | None = None,
    first: float | None = None,
    batches_per_round: int = 4,
    run_id: str = "r",
    profile: str = "test",
    model: str = "ffn",
    batch_size: int = 8,
    status: str = "ok",
    equivalence: str = "pass",
    verified: bool | None = None,
    **fields: Any,
) -> records.Record:
    """One record of ``model`` on ``path``, ``phase``, as ``harness run``
    writes it (:func:`harness.core.records.make`: the framework and api are
    the path's own).

    By default: repeat 0 of a verified ``ok`` training cell of ffn on
    native-torch at batch 8, run ``r`` of profile ``test``, one timed step of
    2 ms, no settings and no platform.

    - ``seconds``: the one timed sample, seconds per training step or per
      inference mini-batch, from which ``values`` and ``summary`` are made
      (training: ``step_s``, ``median_step_s``; inference: one round of
      ``batches_per_round`` mini-batches, ``median_batch_s``,
      ``batches_per_s``).  Unset: 2 ms for an ``ok`` record; a record of any
      other status times nothing (empty ``values`` and ``summary``).
    - ``first``: the first step's (round's) seconds, added to both as
      ``first_step_s`` (``first_round_s``); unset: left out.
    - ``verified``: unset, whether the harness would say so: ``ok`` with a
      passing verdict.
    - ``fields``: any other field of the record (``repeat``, ``settings``,
      ``platform``, ``error``...); ``values`` or ``summary`` given here
      replace the ones made from ``seconds``.
    """
    if seconds is None and status == "ok":
        seconds = 0.002
    timing = (
        {} if seconds is None else _timing(phase, seconds, first, batches_per_round)
    )
    if verified is None:
        verified = status == "ok" and equivalence == "pass"
    return records.make(
        run_id,
        profile,
        model=model,
        path=path,
        phase=phase,
        batch_size=batch_size,
        status=status,
        equivalence=equivalence,
        verified=verified,
        **{**timing, **fields},
    )


def _timing(
    phase: str, seconds: float, first: float | None, batches_per_round: int
) -> dict[str, dict[str, Any]]:
    """``values`` and ``summary`` of one timed sample (see :func:`record`)."""
    values: dict[str, Any]
    summary: dict[str, Any]
    if phase == "train":
        values = {"step_s": [seconds]}
        summary = {"median_step_s": seconds}
        first_key = "first_step_s"
    else:
        values = {
            "round_s": [seconds * batches_per_round],
            "batches_per_round": batches_per_round,
        }
        summary = {"median_batch_s": seconds, "batches_per_s": 1 / seconds}
        first_key = "first_round_s"
    if first is not None:
        values[first_key] = summary[first_key] = first
    return {"values": values, "summary": summary}


def fake_python(tmp_path: Path, body: str = "", *, answer: str | None = None) -> str:
    """A fake interpreter: an executable shell script ``tmp_path / "python"``
    that runs ``body`` whatever its arguments; its path, as a string (for
    ``HARNESS_PYTHON_TORCH`` and friends).

    ``answer``: after ``body``, the script says :data:`READY` and answers
    every request (one line read) with this line, as a healthy worker does.
    """
    if answer is not None:
        body += f"\necho '{READY}'\nwhile read line; do echo '{answer}'; done"
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def profile(blueprint: str = "smoke", /, **changes: Any) -> Profile:
    """The shipped blueprint ``blueprint`` (``PROFILES``) with ``changes``:
    a field of :class:`Settings` (``repeats=2``) changes the settings every
    model shares, any other (``paired=False``, ``name="x"``) the profile's own.

    The per-model replacements are dropped, so every model runs on the shared
    settings (unless ``per_model=`` is given).  Like ``model_copy``, nothing
    is validated."""
    base = PROFILES[blueprint]
    settings = {k: v for k, v in changes.items() if k in Settings.model_fields}
    top = {k: v for k, v in changes.items() if k not in settings}
    return base.model_copy(
        update={"base": base.base.model_copy(update=settings), "per_model": {}, **top}
    )


def verdicts(verdict: str = "pass") -> Callable[..., dict[str, dict[str, str]]]:
    """A stand-in for ``harness.bench.run.verify``: every path of every model
    judged ``verdict``, nothing checked and no gate cache written."""

    def verify(
        models: list[str], paths: list[str], *args: Any, **kwargs: Any
    ) -> dict[str, dict[str, str]]:
        return {m: dict.fromkeys(paths, verdict) for m in models}

    return verify


def no_framework(
    monkeypatch: pytest.MonkeyPatch, verdict: str = "pass"
) -> pytest.MonkeyPatch:
    """``harness run`` without a framework: the gate judges every path
    ``verdict`` (:func:`verdicts`) and the machine's matmul peak is 1 flop/s,
    not measured.  Returns ``monkeypatch``, for a fixture to hand on."""
    import harness.bench.run  # here: the other helpers need no orchestrator

    monkeypatch.setattr(harness.bench.run, "verify", verdicts(verdict))
    monkeypatch.setattr(
        harness.bench.run, "measure_matmul_peak", lambda **_: {"flops_per_s": 1}
    )
    return monkeypatch


class FakeClock:
    """A stand-in for ``time.perf_counter``: ``now`` moves only by
    :meth:`advance` (a fake closure's work took that long) and by ``read_s``
    at every reading, so that every time a loop measures is known exactly.

    Leave ``read_s`` at 0 unless the code busy-waits on the clock (a
    stretched block of ``workers.timing.time_paired``): a wait on a clock
    that never moves by itself would never end, so ``STUCK`` readings in a
    row without work raise instead of hanging."""

    STUCK = 10**7

    def __init__(self, read_s: float = 0.0) -> None:
        self.now, self.read_s, self._idle = 0.0, read_s, 0

    def __call__(self) -> float:
        now = self.now
        self.now += self.read_s
        self._idle += 1
        if self._idle > self.STUCK and not self.read_s:
            raise RuntimeError("a busy wait on a FakeClock without read_s")
        return now

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self._idle = 0


def fake_clock(monkeypatch: pytest.MonkeyPatch, read_s: float = 0.0) -> FakeClock:
    """A :class:`FakeClock` in place of ``workers.timing.clock``, the clock
    of every timing loop, for the rest of the test."""
    clock = FakeClock(read_s)
    monkeypatch.setattr(workers.timing, "clock", clock)
    return clock


# The paths :func:`judged` checks by default: a Keras path and each reference
# implementation's own.
JUDGED_PATHS = ("keras-jax", "native-jax", "native-tensorflow", "native-torch")


def judged(
    case: Case | None = None,
    paths: tuple[str, ...] = JUDGED_PATHS,
    *,
    odd: str | None = None,
    fault: str = "float32",
) -> ModelReport:
    """``case`` (default ffn) judged as ``Checker.check`` judges it
    (``equivalence.check.decide``), on stand-in arrays: a float64 reference
    (logits, loss, two gradients), every path and every reference
    implementation's float32 run that reference rounded to float32, each a
    few roundings differently, and every float64 run the reference itself,
    to rounding, but ``odd``'s, which is wrong by ``fault``:

    - ``float32``: it computed in float32 and returned float32 arrays;
    - ``float32-as-float64``: the same computation, returned as float64;
    - ``model-code``: its logits are 0.1% off, in both its runs, as a fault
      in its code is;
    - ``crashed``: its runs failed.
    """
    case = case or Case("ffn")
    rng = np.random.default_rng(0)
    reference = {
        "logits": rng.standard_normal((8, 10)),
        "loss": np.asarray(2.3),  # a worker's loss is a Python float
        "grad:fc1/kernel": rng.standard_normal((6, 10)),
        "grad:fc1/bias": rng.standard_normal(10),
    }

    def float32(k: int, dtype: type = np.float32) -> dict[str, np.ndarray]:
        """A float32 computation, ``k`` float32 roundings off (as k kernels
        that round differently would be); its loss a float64 array, as a
        worker's is."""
        return {
            q: np.asarray(
                np.asarray(a * (1 + k * 3e-8), np.float32),
                np.float64 if q == "loss" else dtype,
            )
            for q, a in reference.items()
        }

    def code_fault(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**arrays, "logits": arrays["logits"] * 1.001}

    report = ModelReport(case)
    for k, path in enumerate(paths, start=1):
        arrays = float32(k % 3 + 1)
        if path == odd and fault == "model-code" and own_implementation(path):
            arrays = code_fault(arrays)
        report.outcomes[path] = Reply("ok")
        report.evaluated[path] = arrays
    runs, failures = {}, {}
    for k, impl in enumerate(IMPLEMENTATIONS, start=1):
        float64 = {q: a * (1 + k * 1e-15) for q, a in reference.items()}
        baseline = float32(k)
        if impl == odd:
            float64 = {
                "float32": float32(10),
                "float32-as-float64": float32(10, np.float64),
                "model-code": code_fault(float64),
            }.get(fault, float64)
            baseline = code_fault(baseline) if fault == "model-code" else baseline
        if impl == odd and fault == "crashed":
            failures[run_name(impl, "float64")] = "crashed"
            continue
        runs[run_name(impl, "float64")] = ReferenceRun(float64, None)
        runs[run_name(impl, "float32")] = ReferenceRun(baseline, None)
    decide(report, runs, failures)
    return report


def keras_on_torch(
    args: list[str], cwd: Path | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with Keras on PyTorch in a process of its own (a
    test process imports no framework), the project importable; fails the
    test with the end of its standard error unless it exits 0."""
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT), "KERAS_BACKEND": "torch"}
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@contextlib.contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail, rather than hang the suite, when the body takes longer than
    ``seconds`` (a FIFO read, a blocked open): an alarm, never a timing."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    before = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)
