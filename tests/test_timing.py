"""The timing loops of ``workers.timing`` on a fake clock and fake getrusage
counters (``FakeProcess``), so that what they compute is asserted exactly;
one test reads the real getrusage.  Times are multiples of powers of two:
sums and differences of clock readings are then exact."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.helpers import FakeClock, fake_clock
from workers import timing
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


class FakeProcess:
    """A fake clock and fake ``getrusage`` counters that move only as the
    stand-in work says: ``work(s)`` is ``s`` seconds on the CPU, ``sleep(s)``
    ``s`` seconds waiting (one voluntary context switch), ``queue(s)`` ``s``
    seconds ready to run but waiting for a CPU (``ready_s``)."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.used = dict.fromkeys((*USAGE, "ready_s"), 0.0)

    def rusage(self) -> tuple[float, ...]:
        return tuple(self.used[key] for key in (*USAGE, "ready_s"))

    def queue(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.used["ready_s"] += seconds

    def work(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.used["user_s"] += seconds

    def sleep(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.used["nvcsw"] += 1


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    return fake_clock(monkeypatch)


@pytest.fixture
def process(monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> FakeProcess:
    fake = FakeProcess(clock)
    monkeypatch.setattr(timing, "_rusage", fake.rusage)
    return fake


def _usage(units: int, **used: float) -> dict[str, float]:
    """A usage row of a region of ``units`` steps or mini-batches: ``used``,
    every other counter 0."""
    return {**dict.fromkeys((*USAGE, "ready_s"), 0.0), **used, "units": float(units)}


def test_training_times_first_step_apart_then_runs(clock: FakeClock) -> None:
    calls: list[int] = []

    def run(n: int) -> None:
        calls.append(n)
        clock.advance(n * 2.0**-6)

    result = time_training(run, steps=4, runs=3)
    assert calls == [1, 4, 4, 4]
    assert result.first_step_s == 2.0**-6
    assert result.step_s == [2.0**-6] * 3  # per step, not per run


def test_inference_times_the_first_round_warms_up_then_runs_at_least_one(
    clock: FakeClock,
) -> None:
    calls: list[None] = []

    def run() -> None:
        calls.append(None)
        clock.advance(0.125)
        if len(calls) == 1:  # the first round compiles
            clock.advance(0.5)

    result = time_inference(run, batches_per_round=5, window_s=0.0, warmup_rounds=2)
    assert len(calls) == 4  # the first round, two warm-up rounds, one timed round
    assert result.first_round_s == 0.625
    assert result.warmup_s == 2 * 0.125
    assert result.round_s == [0.125]
    assert result.batches_per_s == 5 / 0.125
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


def test_latency_percentiles_are_nearest_rank_values(clock: FakeClock) -> None:
    ms = 2.0**-10  # about a millisecond
    delays = iter([3.0] + [k * ms for k in range(1, 101)])  # warm-up, then 1..100
    answer = InferAnswer(
        first_round_s=0.0,
        warmup_s=0.0,
        round_s=[1.0],
        batches_per_round=1,
        batches_per_s=1.0,
    )
    result = with_latency(answer, lambda: clock.advance(next(delays)), samples=100)
    assert result.latency_s == [k * ms for k in range(1, 101)]  # no warm-up call
    assert result.latency_p50_s == 50 * ms
    assert result.latency_p90_s == 90 * ms
    assert result.latency_p99_s == 99 * ms
    assert result.round_s == answer.round_s  # the rest of the answer is kept


def test_latency_needs_a_sample() -> None:
    with pytest.raises(ValueError, match="at least one sample"):
        time_latency(lambda: None, samples=0)


def test_usage_tells_work_from_waiting_per_step(process: FakeProcess) -> None:
    # 1/64 s of work per step against 1/64 s of sleep per step: the CPU time
    # the process used per step says which is which, and sleeping is a
    # voluntary context switch every step.
    busy = time_training(lambda n: process.work(2.0**-6 * n), steps=3, runs=2)
    idle = time_training(lambda n: process.sleep(2.0**-6 * n), steps=3, runs=2)
    assert busy.usage == [_usage(3, user_s=2.0**-6)] * 2
    # one sleep per run of three steps: a third of a switch per step
    assert idle.usage == [_usage(3, nvcsw=1 / 3)] * 2
    # held off the CPU (a helper thread on it): the wait, per step
    kept = time_training(lambda n: process.queue(2.0**-6 * n), steps=3, runs=2)
    assert kept.usage == [_usage(3, ready_s=2.0**-6)] * 2


def test_usage_is_read_from_getrusage() -> None:
    """The real counters: CPU work (a fixed amount of it, not a time) shows as
    CPU seconds, a sleep as at least one voluntary context switch."""

    def work(n: int) -> None:
        sum(range(200_000 * n))

    busy = time_training(work, steps=3, runs=2)
    idle = time_training(lambda n: time.sleep(0.001 * n), steps=3, runs=2)
    assert busy.usage is not None
    assert idle.usage is not None
    # the timing thread's wait for a CPU where the kernel says (Linux)
    ready = {"ready_s"} if Path(timing.SCHEDSTAT).exists() else set()
    assert [set(u) for u in busy.usage] == [set(USAGE) | ready | {"units"}] * 2
    assert [u["units"] for u in busy.usage] == [3.0, 3.0]
    assert all(u["user_s"] + u["sys_s"] > 0 for u in busy.usage)
    assert all(u["nvcsw"] >= 1 / 3 for u in idle.usage)


def test_inference_usage_is_per_mini_batch_over_the_window(
    process: FakeProcess,
) -> None:
    answer = time_inference(
        lambda: process.work(2.0**-6),
        batches_per_round=4,
        window_s=0.06,
        warmup_rounds=0,
    )
    # the window is reached by the fourth round (1/16 s), one reading over
    # all four: 1/64 s of CPU per round of four mini-batches
    assert answer.round_s == [2.0**-6] * 4
    assert answer.usage == [_usage(16, user_s=2.0**-8)]
    assert answer.batches_per_s == 4 * 4 / 2.0**-4


def test_interleaved_usage_belongs_to_its_own_side(process: FakeProcess) -> None:
    measured = time_interleaved(
        [lambda n: process.work(2.0**-6 * n), lambda n: process.sleep(2.0**-6 * n)],
        "train",
        steps=2,
        batches_per_round=1,
        window_s=0.0,
        min_blocks=3,
        max_blocks=3,
        warmup_runs=0,
        seed=1,
    )
    assert measured.blocks_s == [[2.0**-6, 2.0**-6]] * 3
    # each side's usage is its own, per step: its work, or one sleep per block
    assert measured.usage == [[_usage(2, user_s=2.0**-6), _usage(2, nvcsw=0.5)]] * 3
