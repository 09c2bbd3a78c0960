"""``python -m harness selfcheck``: does the harness measure what it claims?

Two checks, per path that has a reference timer:

1. **Timer overhead.**  What one timed region costs on its own: two
   ``time.perf_counter`` calls and a call of an empty closure, measured over
   many iterations, as a fraction of one training step.  Must stay under 1%.
2. **Agreement.**  One fixed training step (``SELFCHECK_MODEL`` at its
   workload batch size) timed with the harness' own loop
   (``harness.timing.time_training`` around the worker's training closure)
   and with the framework's reference timer around the framework's own train
   step in a plain loop: ``torch.utils.benchmark.Timer.blocked_autorange``
   (with the harness' thread count; it defaults to one thread) for PyTorch;
   for JAX an explicit loop of steps ending in ``block_until_ready``.  Taken
   in adjacent pairs, their paired ratio must be within 3% of 1.

The measurements run in a worker of each path (task ``selfcheck``); this
module's orchestrator half imports no framework.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import stats
from harness.launch import Worker
from harness.numerics import thread_environment
from harness.timing import time_training
from zoo.data import batches_file
from zoo.specs import get_spec
from zoo.weights import weights_file

SELFCHECK_MODEL = "lenet"
SELFCHECK_PATHS = ("native-torch", "native-jax")
MAX_OVERHEAD = 0.01
MAX_DIFFERENCE = 0.03
STEPS, PAIRS = 10, 60


def timer_overhead_s(iterations: int = 100_000) -> float:
    """Seconds one timed region costs beyond its work (the minimum over five
    batches of ``iterations``, so interruptions do not count)."""

    def nothing() -> None:
        return None

    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(iterations):
            t0 = time.perf_counter()
            nothing()
            _ = time.perf_counter() - t0
        best = min(best, (time.perf_counter() - start) / iterations)
    return best


def _reference_torch(direct: Callable[[int], None]) -> float:
    import torch
    from torch.utils import benchmark

    # Timer runs single-threaded unless told otherwise; the harness does not.
    timer = benchmark.Timer(
        stmt="direct(1)",
        globals={"direct": direct},
        num_threads=torch.get_num_threads(),
    )
    return float(timer.blocked_autorange(min_run_time=0.5).median)


def _reference_jax(direct: Callable[[int], None]) -> float:
    # ``direct(n)`` dispatches n steps and ends in ``jax.block_until_ready``.
    start = time.perf_counter()
    direct(STEPS)
    return (time.perf_counter() - start) / STEPS


REFERENCES = {"torch": _reference_torch, "jax": _reference_jax}
TIMERS = {
    "torch": "torch.utils.benchmark.Timer.blocked_autorange",
    "jax": "explicit loop ending in block_until_ready",
}


def measure(
    run: Callable[[int], None], direct: Callable[[int], None], framework: str
) -> dict[str, Any]:
    """Worker side: seconds per step by the harness (``run``, its training
    closure) and by the reference timer around ``direct`` (the framework's
    own train step called in a plain loop, no harness code), in ``PAIRS``
    adjacent pairs, which of the two goes first alternating; and the timer's
    own overhead."""
    # Both warm up alike (XLA on CPU keeps speeding up for a few steps after
    # compiling).
    for _ in range(3):
        run(STEPS)
        direct(STEPS)
    reference_timer = REFERENCES[framework]
    harness, reference = [], []
    for i in range(PAIRS):
        if i % 2:
            reference.append(reference_timer(direct))
        harness += time_training(run, STEPS, 1)["step_s"]
        if not i % 2:
            reference.append(reference_timer(direct))
    return {
        "harness_s": harness,
        "reference_s": reference,
        "reference_timer": TIMERS[framework],
        "timer_overhead_s": timer_overhead_s(),
    }


def selfcheck(
    results_dir: Path, paths: tuple[str, ...] = SELFCHECK_PATHS
) -> list[dict[str, Any]]:
    """Orchestrator side: one row per path with both figures and the verdicts."""
    spec = get_spec(SELFCHECK_MODEL)
    cache = results_dir / "cache"
    request = {
        "task": "selfcheck",
        "model": spec.name,
        "weights": str(weights_file(spec, 0, cache)),
        "data": str(batches_file(spec, 1, spec.workload.batch_size, STEPS, cache)),
    }
    env = thread_environment({})["env"]  # the threads a default run sets
    rows = []
    for path in paths:
        with Worker(path, env=env) as worker:
            response = worker.call(request, 900.0)
        if response["status"] != "ok":
            rows.append(
                {
                    "path": path,
                    "verdict": f"{response['status']}: {response.get('error')}",
                }
            )
            continue
        rows.append({"path": path, "model": spec.name, **judge(response["result"])})
    return rows


def judge(result: dict[str, Any]) -> dict[str, Any]:
    """The figures of one worker's ``measure`` and the verdict on them.

    Agreement is judged on the pairs (``harness.stats.paired_ratio``), not on
    the two medians: a step's time here drifts by several percent within one
    process, and two timers that measure the same loop (two plain loops, an
    A/A test) had medians 4% apart over 30 samples each, while their paired
    ratio was within 1%."""
    harness, reference = result["harness_s"], result["reference_s"]
    harness_s = statistics.median(harness)
    overhead = result["timer_overhead_s"] / harness_s
    difference = stats.paired_ratio(harness, reference) - 1
    ok = overhead < MAX_OVERHEAD and abs(difference) <= MAX_DIFFERENCE
    return {
        "harness_ms": round(harness_s * 1e3, 3),
        "reference_ms": round(statistics.median(reference) * 1e3, 3),
        "reference_timer": result["reference_timer"],
        "pairs": len(harness),
        "difference_%": round(100 * difference, 2),
        "timer_overhead_%": round(100 * overhead, 4),
        "verdict": "ok" if ok else "FAIL",
    }
