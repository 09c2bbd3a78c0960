"""The machine's attainable float32 matmul rate: the best of NumPy's BLAS and
each framework's own matmul, every one timed in a process of its own.

No deep-learning framework is imported here.  ``measure_matmul_peak`` runs
``python -m workers.peak_probe SOURCE SECONDS`` once per source, one after
the other, and reads back each one's FLOP/s (``2*n**3 / t`` for square float32
``n`` x ``n`` matrices) and the kernel it ran; the best figure is the ceiling.
That is a roofline ceiling for dense compute on this CPU as its libraries
reach it, *not* the vendor's theoretical peak (no clock times vector width
times cores arithmetic): a path's FLOP/s divided by it says how much of the
attainable dense rate the path used.  The orchestrator measures it once per
run, before the workers start, so the ceiling and the timings share the
machine's state.

Why more than NumPy, and why a process of its own: a host may pin OpenBLAS to
an older kernel family (``OPENBLAS_CORETYPE=Haswell``: AVX2 on a CPU with
AVX-512) while XLA and oneDNN use every vector unit, and NumPy's figure alone
was then below what a native JAX cell reached.  The NumPy probe runs with the
orchestrator's environment less ``NUMPY_UNSET``, so OpenBLAS picks its kernel
from the CPU; a framework's probe runs with that framework's interpreter and
the thread settings and CPUs its workers get, whose environments keep every
variable (a framework's workers run with them).  A framework that is not
installed, a probe that crashes, times out or prints no answer, is a source
``skipped`` with its reason, never a failed run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from pydantic import Field

from workers.frameworks import FRAMEWORKS
from workers.launch import PROJECT_ROOT
from workers.paths import interpreter

# Environment variables that set BLAS and OpenMP thread counts; a peak means
# little without the thread count it ran with.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
# Removed from the NumPy probe's environment (only there): they pin OpenBLAS
# to a kernel family and cache size other than the CPU's own.
NUMPY_UNSET = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
PROBE_MODULE = "workers.peak_probe"
SIZE = 2048  # workers.peak_probe.SIZE
REPEATS = 5  # workers.peak_probe.REPEATS
# Seconds a probe may take besides its timed repeats: its interpreter and
# framework start, the untimed first product, a slow machine's products.
PROBE_START_S = 120.0
REASON_CHARS = 300  # of a failed probe's output, in its reason
# The largest matmul rate a probe's answer or a record read back may hold:
# 1e16 FLOP/s (1e7 GFLOP/s), some 500 times the float32 rate of the largest
# two-socket CPU server (about 2e13); a figure above it (1e300: a hand edit)
# is no measurement, rather than a 291-digit header.
MAX_FLOPS_PER_S = 1e16
# The longest kernel or source name a peak may hold (``openblas 0.3.29
# SkylakeX``, ``torch 2.5.1 mkl AVX512``): a longer one is no answer.
MAX_KERNEL_CHARS = 200
# A matmul rate as a record holds it: finite, positive, at most the bound.
Rate = Annotated[float, Field(gt=0, le=MAX_FLOPS_PER_S, allow_inf_nan=False)]
# A kernel's or a source's name as a record holds it.
KernelName = Annotated[str, Field(min_length=1, max_length=MAX_KERNEL_CHARS)]


class MatmulPeak(TypedDict):
    """What ``measure_matmul_peak`` returns (JSON-ready).  ``flops_per_s``
    is the best source's figure (None when no source gave one);
    ``sources`` holds every source's answer, or its ``reason``."""

    flops_per_s: float | None
    median_flops_per_s: float | None
    best: str | None
    kernel: str | None
    size: int
    repeats: int
    seconds: float
    threads: dict[str, str | None]
    cpu_count: int | None
    sources: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Probe:
    """One probe process: its source (``numpy`` or a framework), interpreter,
    environment and the CPUs it starts on (None: unpinned)."""

    source: str
    python: str
    env: dict[str, str]
    cpus: tuple[int, ...] | None = None

    def argv(self, seconds: float, size: int, repeats: int) -> list[str]:
        cpus = [] if self.cpus is None else ["--cpus", ",".join(map(str, self.cpus))]
        return [
            self.python,
            "-m",
            PROBE_MODULE,
            self.source,
            repr(seconds),
            "--size",
            str(size),
            "--repeats",
            str(repeats),
            *cpus,
        ]


# Runs a probe's argv with its environment and a timeout in seconds.
Runner = Callable[[list[str], dict[str, str], float], subprocess.CompletedProcess[str]]


def numpy_environment(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without ``NUMPY_UNSET``: the NumPy probe's environment."""
    return {name: value for name, value in env.items() if name not in NUMPY_UNSET}


def probes(
    frameworks: Iterable[str],
    *,
    threads_env: Mapping[str, str] | None = None,
    cpus: tuple[int, ...] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[Probe]:
    """NumPy's probe (this interpreter, ``env`` less ``NUMPY_UNSET``), then
    one per framework (its interpreter, ``env`` with the workers' thread
    variables ``threads_env``, started on the workers' ``cpus``).  ``env``:
    this process' environment unless given.

    Raises ValueError, in one sentence, for a framework that is not known."""
    base = dict(os.environ if env is None else env)
    base["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PROJECT_ROOT), base.get("PYTHONPATH", "")) if p
    )
    found = [Probe("numpy", sys.executable, numpy_environment(base))]
    for framework in frameworks:
        if framework not in FRAMEWORKS:
            raise ValueError(
                f"unknown framework {framework!r} for a matmul peak; "
                f"known: {', '.join(FRAMEWORKS)}"
            )
        child = {**base, **(threads_env or {})}
        child.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        child.pop("KERAS_BACKEND", None)
        found.append(Probe(framework, interpreter(framework), child, cpus))
    return found


def _run(
    argv: list[str], env: dict[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _tail(text: str) -> str:
    text = " ".join(text.split())
    return ("..." + text[-REASON_CHARS:]) if len(text) > REASON_CHARS else text


def _skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason}


def _rate(value: Any) -> bool:
    """Whether ``value`` is a finite FLOP/s figure from 0 (excluded) to
    ``MAX_FLOPS_PER_S``."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= MAX_FLOPS_PER_S
    )


def read_answer(
    source: str, returncode: int, stdout: str, stderr: str
) -> dict[str, Any]:
    """A probe's entry of ``sources`` from what its process did: its answer
    when it exited 0 with an ``ok`` answer of positive finite rates and a
    named kernel; otherwise ``{"status": "skipped", "reason": ...}``."""
    if returncode != 0:
        return _skipped(
            f"the {source} probe exited with status {returncode}: "
            f"{_tail(stderr) or '(no output)'}"
        )
    answer = None
    for line in reversed(stdout.splitlines()):  # libraries may print before it
        try:
            answer = json.loads(line)
        except ValueError:
            continue
        break
    if not isinstance(answer, dict):
        return _skipped(
            f"the {source} probe printed no answer: {_tail(stdout) or '(no output)'}"
        )
    wrong = _wrong(source, answer)
    if wrong is not None:
        return _skipped(wrong)
    return {**answer, "flops_per_s": float(answer["flops_per_s"])}


def _wrong(source: str, answer: dict[str, Any]) -> str | None:
    """Why a probe's ``answer`` holds no figure; None when it holds one."""
    status = answer.get("status")
    if status == "unavailable":
        return (
            f"{source} is not installed for its interpreter: "
            f"{_tail(str(answer.get('error')))}"
        )
    if status != "ok":
        return f"the {source} probe answered status {status!r:.40}"
    if not (
        _rate(answer.get("flops_per_s")) and _rate(answer.get("median_flops_per_s"))
    ):
        return (
            f"the {source} probe answered no positive finite rate of at most "
            f"{MAX_FLOPS_PER_S:.0e} FLOP/s"
        )
    kernel = answer.get("kernel")
    if not (isinstance(kernel, str) and kernel.strip()):
        return f"the {source} probe did not name its kernel"
    if len(kernel) > MAX_KERNEL_CHARS:
        return (
            f"the {source} probe named a kernel of {len(kernel):,} characters, "
            f"more than {MAX_KERNEL_CHARS}"
        )
    return None


def run_probe(
    probe: Probe, seconds: float, size: int, repeats: int, runner: Runner = _run
) -> dict[str, Any]:
    """``probe``'s entry of ``sources`` (``read_answer``), with the probe's
    ``python``, the CPUs it started on (``start_cpus``: None for unpinned)
    and ``wall_s``, its interpreter's start and import included."""
    timeout = PROBE_START_S + 3 * repeats * seconds
    started = time.monotonic()
    try:
        done = runner(probe.argv(seconds, size, repeats), probe.env, timeout)
    except subprocess.TimeoutExpired:
        entry = _skipped(f"the {probe.source} probe took over {timeout:.0f} s")
    except OSError as exc:
        entry = _skipped(
            f"cannot start {probe.python} for the {probe.source} probe: {exc}"
        )
    else:
        entry = read_answer(probe.source, done.returncode, done.stdout, done.stderr)
    return {
        **entry,
        "python": probe.python,
        "start_cpus": None if probe.cpus is None else list(probe.cpus),
        "wall_s": time.monotonic() - started,
    }


def best_source(sources: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The source with the highest ``ok`` figure; None when none has one."""
    rated = {
        name: float(entry["flops_per_s"])
        for name, entry in sources.items()
        if entry.get("status") == "ok"
    }
    return max(rated, key=rated.__getitem__) if rated else None


def measure_matmul_peak(
    *,
    size: int = SIZE,
    repeats: int = REPEATS,
    seconds: float = 1.0,
    frameworks: Iterable[str] = (),
    threads_env: Mapping[str, str] | None = None,
    cpus: tuple[int, ...] | None = None,
    runner: Runner = _run,
    log: Callable[[str], None] | None = None,
) -> MatmulPeak:
    """The best float32 matmul FLOP/s of NumPy's BLAS and of each of
    ``frameworks`` (their workers' ``threads_env`` and ``cpus``), each source
    timed in a process of its own: one untimed product, then ``repeats``
    repeats of back-to-back products, each at least ``seconds`` long; a
    source's best repeat is its figure, the median shows its noise.
    ``log``: one line per source as it ends."""
    if size < 1 or repeats < 1 or not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(
            "measure_matmul_peak needs size >= 1, repeats >= 1 and seconds > 0, "
            f"not size={size}, repeats={repeats}, seconds={seconds}."
        )
    sources: dict[str, dict[str, Any]] = {}
    for probe in probes(frameworks, threads_env=threads_env, cpus=cpus):
        entry = run_probe(probe, seconds, size, repeats, runner)
        sources[probe.source] = entry
        if log is not None:
            log(_line(probe.source, entry))
    best = best_source(sources)
    chosen = sources[best] if best is not None else {}
    return {
        "flops_per_s": chosen.get("flops_per_s"),
        "median_flops_per_s": chosen.get("median_flops_per_s"),
        "best": best,
        "kernel": chosen.get("kernel"),
        "size": size,
        "repeats": repeats,
        "seconds": seconds,
        "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "cpu_count": os.cpu_count(),
        "sources": sources,
    }


def _line(source: str, entry: Mapping[str, Any]) -> str:
    took = f" ({entry['wall_s']:.1f} s)"
    if entry.get("status") != "ok":
        return f"matmul peak, {source}: skipped: {entry.get('reason')}{took}"
    rate = float(entry["flops_per_s"]) / 1e9
    return f"matmul peak, {source} ({entry['kernel']}): {rate:.1f} GFLOP/s{took}"


def fraction_of_peak(flops: float, seconds: float, peak: float) -> float:
    """The share of ``peak`` FLOP/s that ``flops`` done in ``seconds`` reached."""
    if not (seconds > 0 and peak > 0 and math.isfinite(seconds * peak)):
        raise ValueError(
            "fraction_of_peak needs a positive, finite time and peak, "
            f"not seconds={seconds} and peak={peak}."
        )
    return flops / seconds / peak
