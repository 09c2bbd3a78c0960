from __future__ import annotations

import time

import pytest

from harness.timing import (
    time_inference,
    time_latency,
    time_training,
    time_training_interleaved,
)


def test_training_times_first_step_apart_then_repeats() -> None:
    calls: list[int] = []
    result = time_training(calls.append, steps=4, repeats=3)
    assert calls == [1, 4, 4, 4]
    assert len(result["step_s"]) == 3
    assert result["first_step_s"] >= 0


def test_inference_warms_up_then_runs_at_least_one_round() -> None:
    calls: list[None] = []
    result = time_inference(
        lambda: calls.append(None), batches_per_round=5, window_s=0.0, warmup_rounds=2
    )
    assert len(calls) == 3  # two warm-up rounds, one timed round
    assert len(result["round_s"]) == 1
    assert result["batches_per_s"] > 0


def test_interleaved_training_alternates_the_variants() -> None:
    calls: list[tuple[str, int]] = []
    result = time_training_interleaved(
        {"a": lambda n: calls.append(("a", n)), "b": lambda n: calls.append(("b", n))},
        steps=3,
        repeats=2,
    )
    assert calls == [("a", 1), ("b", 1), ("a", 3), ("b", 3), ("a", 3), ("b", 3)]
    assert len(result["a"]["step_s"]) == len(result["b"]["step_s"]) == 2


def test_training_warmup_repeats_are_run_but_not_timed() -> None:
    calls: list[int] = []
    result = time_training(calls.append, steps=2, repeats=1, warmup_repeats=2)
    assert calls == [1, 2, 2, 2]
    assert len(result["step_s"]) == 1


def test_latency_percentiles_are_nearest_rank_values() -> None:
    delays = iter([0.0] + [0.001 * k for k in range(1, 101)])  # warm-up, then 1..100 ms
    result = time_latency(lambda: time.sleep(next(delays)), samples=100)
    assert len(result["latency_s"]) == 100
    p50, p90, p99 = (result[f"latency_p{q}_s"] for q in (50, 90, 99))
    assert p50 <= p90 <= p99
    assert p99 in result["latency_s"]
    assert 0.050 <= p50 < 0.060  # sleep only ever oversleeps
    assert p99 >= 0.099


def test_latency_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        time_latency(lambda: None, samples=0)
