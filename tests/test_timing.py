from __future__ import annotations

import time

import pytest

from workers.messages import InferAnswer
from workers.timing import (
    USAGE,
    time_inference,
    time_interleaved,
    time_latency,
    time_training,
    time_training_interleaved,
    with_latency,
)


def test_training_times_first_step_apart_then_runs() -> None:
    calls: list[int] = []
    result = time_training(calls.append, steps=4, runs=3)
    assert calls == [1, 4, 4, 4]
    assert len(result.step_s) == 3
    assert result.first_step_s >= 0


def test_inference_times_the_first_round_warms_up_then_runs_at_least_one() -> None:
    calls: list[None] = []

    def run() -> None:
        calls.append(None)
        if len(calls) == 1:  # the first round compiles
            time.sleep(0.05)

    result = time_inference(run, batches_per_round=5, window_s=0.0, warmup_rounds=2)
    assert len(calls) == 4  # the first round, two warm-up rounds, one timed round
    assert result.first_round_s >= 0.05 > result.warmup_s
    assert len(result.round_s) == 1
    assert result.batches_per_s > 0
    assert result.latency_s is None  # not asked for


def test_interleaved_training_alternates_the_variants() -> None:
    calls: list[tuple[str, int]] = []
    a, b = time_training_interleaved(
        [lambda n: calls.append(("a", n)), lambda n: calls.append(("b", n))],
        steps=3,
        runs=2,
    )
    assert calls == [("a", 1), ("b", 1), ("a", 3), ("b", 3), ("a", 3), ("b", 3)]
    assert len(a.step_s) == len(b.step_s) == 2


def test_training_warmup_runs_are_run_but_not_timed() -> None:
    calls: list[int] = []
    result = time_training(calls.append, steps=2, runs=1, warmup_runs=2)
    assert calls == [1, 2, 2, 2]
    assert len(result.step_s) == 1


def test_latency_percentiles_are_nearest_rank_values() -> None:
    delays = iter([0.0] + [0.001 * k for k in range(1, 101)])  # warm-up, then 1..100 ms
    answer = InferAnswer(
        first_round_s=0.0,
        warmup_s=0.0,
        round_s=[1.0],
        batches_per_round=1,
        batches_per_s=1.0,
    )
    result = with_latency(answer, lambda: time.sleep(next(delays)), samples=100)
    assert result.latency_s is not None
    assert len(result.latency_s) == 100
    p50, p90, p99 = result.latency_p50_s, result.latency_p90_s, result.latency_p99_s
    assert p50 is not None
    assert p90 is not None
    assert p99 is not None
    assert p50 <= p90 <= p99
    assert p99 in result.latency_s
    assert 0.050 <= p50 < 0.060  # sleep only ever oversleeps
    assert p99 >= 0.099
    assert result.round_s == answer.round_s  # the rest of the answer is kept


def test_latency_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        time_latency(lambda: None, samples=0)


def _spin(seconds: float) -> None:
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def test_usage_tells_work_from_waiting_per_step() -> None:
    # 20 ms of work per step against 20 ms of sleep per step: the CPU time
    # the process used per step says which is which, and sleeping is a
    # voluntary context switch every step.
    busy = time_training(lambda n: _spin(0.02 * n), steps=3, runs=2)
    idle = time_training(lambda n: time.sleep(0.02 * n), steps=3, runs=2)
    assert busy.usage is not None
    assert idle.usage is not None
    assert [set(u) for u in busy.usage] == [set(USAGE)] * 2
    assert all(u["user_s"] + u["sys_s"] > 0.01 for u in busy.usage)
    assert all(u["user_s"] + u["sys_s"] < 0.005 for u in idle.usage)
    # one sleep per run of three steps: a third of a switch per step
    assert all(u["nvcsw"] >= 1 / 3 for u in idle.usage)


def test_inference_usage_is_per_mini_batch_over_the_window() -> None:
    answer = time_inference(
        lambda: _spin(0.01), batches_per_round=4, window_s=0.05, warmup_rounds=0
    )
    assert answer.usage is not None
    assert len(answer.usage) == 1
    # about 10 ms per round of four: some 2.5 ms of CPU per mini-batch
    assert 0.0015 < answer.usage[0]["user_s"] + answer.usage[0]["sys_s"] < 0.005


def test_interleaved_usage_belongs_to_its_own_side() -> None:
    measured = time_interleaved(
        [lambda n: _spin(0.01 * n), lambda n: time.sleep(0.01 * n)],
        "train",
        steps=2,
        batches_per_round=1,
        window_s=0.0,
        min_blocks=3,
        max_blocks=3,
        warmup_runs=0,
        seed=1,
    )
    assert len(measured.usage) == 3
    for spun, slept in measured.usage:
        assert spun["user_s"] + spun["sys_s"] > 0.005 > slept["user_s"] + slept["sys_s"]
