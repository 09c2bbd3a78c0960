"""The timing loops, shared by every path.  Framework-free.

Callers hand in closures that do the work *and wait for it* (a value read back,
``block_until_ready``, ``synchronize``): a loop here never measures dispatch
alone as long as that contract holds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any


def time_training(
    run: Callable[[int], None], steps: int, repeats: int, warmup_repeats: int = 0
) -> dict[str, Any]:
    """First step alone (compilation, tracing, allocation), ``warmup_repeats``
    untimed runs of ``steps`` steps, then ``repeats`` timings of ``steps``
    steady-state steps each, as seconds per step."""
    start = time.perf_counter()
    run(1)
    first = time.perf_counter() - start
    for _ in range(warmup_repeats):
        run(steps)
    per_step = []
    for _ in range(repeats):
        start = time.perf_counter()
        run(steps)
        per_step.append((time.perf_counter() - start) / steps)
    return {"first_step_s": first, "step_s": per_step}


def time_training_interleaved(
    runs: dict[str, Callable[[int], None]], steps: int, repeats: int
) -> dict[str, dict[str, Any]]:
    """``time_training`` for several variants of one step, their repeats taken
    in turn (A, B, A, B ...) so that drift on a shared machine hits all alike."""
    results: dict[str, dict[str, Any]] = {}
    for name, run in runs.items():
        start = time.perf_counter()
        run(1)
        results[name] = {"first_step_s": time.perf_counter() - start, "step_s": []}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run(steps)
            results[name]["step_s"].append((time.perf_counter() - start) / steps)
    return results


def time_inference(
    run: Callable[[], None], batches_per_round: int, window_s: float, warmup_rounds: int
) -> dict[str, Any]:
    """Rounds over the resident batches until ``window_s`` has passed (at least
    one round), after ``warmup_rounds`` untimed rounds."""
    start = time.perf_counter()
    for _ in range(warmup_rounds):
        run()
    warmup = time.perf_counter() - start
    rounds: list[float] = []
    window_start = time.perf_counter()
    while True:
        start = time.perf_counter()
        run()
        rounds.append(time.perf_counter() - start)
        if time.perf_counter() - window_start >= window_s:
            break
    elapsed = time.perf_counter() - window_start
    return {
        "warmup_s": warmup,
        "round_s": rounds,
        "batches_per_round": batches_per_round,
        "batches_per_s": len(rounds) * batches_per_round / elapsed,
    }


def time_latency(
    run: Callable[[], None], samples: int, warmup: int = 1
) -> dict[str, Any]:
    """``samples`` timings of ``run`` (one mini-batch, finished on return),
    after ``warmup`` untimed calls, and their 50th, 90th and 99th percentiles
    (nearest rank: the value of an actual call, never an interpolation)."""
    if samples < 1:
        raise ValueError("latency needs at least one sample")
    for _ in range(warmup):
        run()
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    ordered = sorted(times)
    return {
        "latency_s": times,
        **{f"latency_p{q}_s": _nearest_rank(ordered, q) for q in (50, 90, 99)},
    }


def _nearest_rank(ordered: list[float], q: int) -> float:
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]
