"""``python -m harness selfcheck``: does the harness measure what it claims?

Two checks, per path that has a reference timer:

1. **Timer overhead.**  What one timed region costs on its own: two
   ``time.perf_counter`` calls and a call of an empty closure, measured over
   many iterations, as a fraction of one training step.  Must stay under 1%.
2. **Agreement.**  One fixed training step (``SELFCHECK_MODEL`` at its
   workload batch size) timed with the harness' own loop
   (``workers.timing.time_training`` around the worker's training closure)
   and with the framework's reference timer around the framework's own train
   step in a plain loop: ``torch.utils.benchmark.Timer.blocked_autorange``
   (with the harness' thread count; it defaults to one thread) for PyTorch;
   for JAX an explicit loop of steps ending in ``block_until_ready``.  Taken
   in adjacent pairs, their paired ratio must be within 3% of 1.

The measurements run in a worker of each path (request
``workers.messages.Selfcheck``, measured by
``workers.timing.time_against_reference``); this module only asks and
judges, and imports no framework.  Each worker measures as a default run's
does (one thread, on a CPU of its own: ``harness.core.placement``), and
each row says whether other processes took CPU meanwhile (``machine``:
``BUSY`` past ``workers.resources.CONTENDED_CORES``).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from harness.core.placement import kept_off, of_profile
from harness.core.profiles import get_profile
from harness.stats import robust
from workers.launch import Worker
from workers.messages import Selfcheck, SelfcheckAnswer
from workers.resources import contended
from zoo.data import batches_file
from zoo.models import get_spec
from zoo.weights import weights_file

SELFCHECK_MODEL = "lenet"
SELFCHECK_PATHS = ("native-torch", "native-jax")
MAX_OVERHEAD = 0.01
MAX_DIFFERENCE = 0.03
STEPS, PAIRS = 10, 60


def selfcheck(
    results_dir: Path, paths: tuple[str, ...] = SELFCHECK_PATHS, pairs: int = PAIRS
) -> list[dict[str, Any]]:
    """Orchestrator side: one row per path with both figures and the verdicts
    (``pairs``: how many pairs of timings each worker takes; fewer only where
    the verdict does not matter, in tests of the plumbing)."""
    spec = get_spec(SELFCHECK_MODEL)
    cache = results_dir / "cache"
    request = Selfcheck(
        model=spec.name,
        weights=str(weights_file(spec, 0, cache)),
        data=str(batches_file(spec, 1, spec.workload.batch_size, STEPS, cache)),
        steps=STEPS,
        pairs=pairs,
    )
    where = of_profile(get_profile("default"))  # as a default run measures
    rows = []
    for path in paths:
        with (
            kept_off(where),
            Worker(path, env=where.env, cpus=where.worker_cpus) as worker,
        ):
            reply = worker.call(request, 900.0)
        if not isinstance(reply.answer, SelfcheckAnswer):
            rows.append({"path": path, "verdict": f"{reply.status}: {reply.error}"})
            continue
        busy = contended(reply.resources or {})
        rows.append(
            {
                "path": path,
                "model": spec.name,
                **judge(reply.answer),
                "others_cpu": round(reply.resources.get("others_cpu", 0.0), 2),
                "machine": "BUSY" if busy else "quiet",
            }
        )
    return rows


def judge(result: SelfcheckAnswer) -> dict[str, Any]:
    """The figures of one worker's ``measure`` and the verdict on them.

    Agreement is judged on the pairs (``harness.stats.robust.paired_ratio``), not on
    the two medians: a step's time here drifts by several percent within one
    process, and two timers that measure the same loop (two plain loops, an
    A/A test) had medians 4% apart over 30 samples each, while their paired
    ratio was within 1%."""
    harness, reference = result.harness_s, result.reference_s
    harness_s = statistics.median(harness)
    overhead = result.timer_overhead_s / harness_s
    difference = robust.paired_ratio(harness, reference) - 1
    ok = overhead < MAX_OVERHEAD and abs(difference) <= MAX_DIFFERENCE
    return {
        "harness_ms": round(harness_s * 1e3, 3),
        "reference_ms": round(statistics.median(reference) * 1e3, 3),
        "reference_timer": result.reference_timer,
        "pairs": len(harness),
        "difference_%": round(100 * difference, 2),
        "timer_overhead_%": round(100 * overhead, 4),
        "verdict": "ok" if ok else "FAIL",
    }
