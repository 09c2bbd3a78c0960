"""``python -m harness selfcheck``: does the harness measure what it claims?

Two checks, per path that has a reference timer:

1. **Timer overhead.**  What one timed region costs on its own: two
   ``time.perf_counter`` calls and a call of an empty closure, measured over
   many iterations, as a fraction of one training step.  Must stay under 1%.
2. **Agreement.**  One fixed training step (``SELFCHECK_MODEL`` at its
   workload batch size) timed with the harness' own loop
   (``harness.timing.time_training``) and with the framework's reference
   timer: ``torch.utils.benchmark.Timer.blocked_autorange`` for PyTorch; for
   JAX an explicit loop that waits with ``block_until_ready`` after every
   step.  The two medians must agree within 3%.

The measurements run in a worker of each path (task ``selfcheck``); this
module's orchestrator half imports no framework.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.launch import Worker
from harness.timing import time_training
from zoo.data import batches_file
from zoo.specs import get_spec
from zoo.weights import weights_file

SELFCHECK_MODEL = "lenet"
SELFCHECK_PATHS = ("native-torch", "native-jax")
MAX_OVERHEAD = 0.01
MAX_DIFFERENCE = 0.03
STEPS, REPEATS = 10, 7


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


def _reference_torch(run: Callable[[int], None]) -> float:
    from torch.utils import benchmark

    timer = benchmark.Timer(stmt="run(1)", globals={"run": run})
    measurement = timer.blocked_autorange(min_run_time=2.0)
    return float(measurement.median)


def _reference_jax(run: Callable[[int], None]) -> float:
    # ``run(1)`` ends in ``jax.block_until_ready`` on the new train state, so
    # each timing below covers one step from dispatch to completion.
    times = []
    for _ in range(STEPS * REPEATS):
        start = time.perf_counter()
        run(1)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


REFERENCES = {"torch": _reference_torch, "jax": _reference_jax}


def measure(run: Callable[[int], None], framework: str) -> dict[str, Any]:
    """Worker side: the harness' and the reference's seconds per step, and the
    timer's own overhead, for the training closure ``run``."""
    harness = time_training(run, STEPS, REPEATS, warmup_repeats=1)
    return {
        "harness_step_s": statistics.median(harness["step_s"]),
        "reference_step_s": REFERENCES[framework](run),
        "reference_timer": {
            "torch": "torch.utils.benchmark.Timer.blocked_autorange",
            "jax": "block_until_ready after every step",
        }[framework],
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
        "data": str(
            batches_file(spec, 1, spec.workload.batch_size, STEPS * REPEATS, cache)
        ),
    }
    rows = []
    for path in paths:
        with Worker(path) as worker:
            response = worker.call(request, 900.0)
        if response["status"] != "ok":
            rows.append(
                {
                    "path": path,
                    "verdict": f"{response['status']}: {response.get('error')}",
                }
            )
            continue
        r = response["result"]
        overhead = r["timer_overhead_s"] / r["harness_step_s"]
        difference = r["harness_step_s"] / r["reference_step_s"] - 1
        ok = overhead < MAX_OVERHEAD and abs(difference) <= MAX_DIFFERENCE
        rows.append(
            {
                "path": path,
                "model": spec.name,
                "harness_ms": round(r["harness_step_s"] * 1e3, 3),
                "reference_ms": round(r["reference_step_s"] * 1e3, 3),
                "reference_timer": r["reference_timer"],
                "difference_%": round(100 * difference, 2),
                "timer_overhead_%": round(100 * overhead, 4),
                "verdict": "ok" if ok else "FAIL",
            }
        )
    return rows
