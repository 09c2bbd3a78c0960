"""The self-check's comparison, with stand-in steps instead of a framework."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.bench.selfcheck import judge
from workers.messages import SelfcheckAnswer
from workers.timing import time_against_reference


def _sleeper(step_s: float) -> Callable[[int], None]:
    def run(n: int) -> None:
        time.sleep(n * step_s)

    return run


def test_a_harness_slower_than_the_reference_is_caught() -> None:
    # The "jax" reference is a plain loop timed around direct(steps): no
    # framework import, so sleeps can stand in for the steps.
    answer = time_against_reference(
        _sleeper(0.0026), _sleeper(0.002), "jax", steps=10, pairs=20
    )
    row = judge(answer)
    assert row["difference_%"] > 15
    assert row["verdict"] == "FAIL"


def _result(
    harness: list[float], reference: list[float], overhead_s: float = 1e-7
) -> SelfcheckAnswer:
    return SelfcheckAnswer(
        harness_s=harness,
        reference_s=reference,
        reference_timer="loop",
        timer_overhead_s=overhead_s,
    )


def test_the_verdict_needs_both_agreement_and_low_overhead() -> None:
    drift = [0.010 * (1 + 0.02 * i) for i in range(20)]  # slow drift, both alike
    row = judge(_result([1.01 * d for d in drift], drift))
    assert row["verdict"] == "ok"
    assert row["difference_%"] == pytest.approx(1.0)
    assert row["pairs"] == 20
    assert judge(_result([1.04 * d for d in drift], drift))["verdict"] == "FAIL"
    assert judge(_result([0.96 * d for d in drift], drift))["verdict"] == "FAIL"
    slow_timer = _result(drift, drift, overhead_s=2e-4)  # 2% of 10 ms
    assert judge(slow_timer)["verdict"] == "FAIL"
