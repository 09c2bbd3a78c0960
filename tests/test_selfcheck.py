"""The self-check's comparison, with stand-in steps instead of a framework."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.selfcheck import judge, measure


def _sleeper(step_s: float) -> Callable[[int], None]:
    def run(n: int) -> None:
        time.sleep(n * step_s)

    return run


def test_a_harness_slower_than_the_reference_is_caught() -> None:
    # The "jax" reference is a plain loop timed around direct(STEPS): no
    # framework import, so sleeps can stand in for the steps.
    slow = measure(_sleeper(0.0026), _sleeper(0.002), "jax")
    assert slow["ratio"] > 1.15
    assert judge(slow)["verdict"] == "FAIL"


def test_the_verdict_needs_both_agreement_and_low_overhead() -> None:
    fine = {
        "harness_step_s": 0.0100,
        "reference_step_s": 0.0101,
        "ratio": 0.99,
        "pairs": 15,
        "reference_timer": "loop",
        "timer_overhead_s": 1e-7,
    }
    row = judge(fine)
    assert row["verdict"] == "ok"
    assert row["difference_%"] == pytest.approx(-1.0)
    assert judge({**fine, "ratio": 1.04})["verdict"] == "FAIL"
    assert judge({**fine, "ratio": 0.96})["verdict"] == "FAIL"
    assert judge({**fine, "timer_overhead_s": 2e-4})["verdict"] == "FAIL"  # 2%
