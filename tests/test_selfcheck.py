"""The self-check's comparison, with stand-in steps instead of a framework."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import pytest

from harness.bench import selfcheck
from harness.bench.selfcheck import judge
from harness.core.placement import of_profile
from harness.core.profiles import get_profile
from tests.helpers import FakeClock, fake_clock
from workers.launch import Reply
from workers.messages import SelfcheckAnswer
from workers.timing import time_against_reference


def _steps(clock: FakeClock, step_s: float) -> Callable[[int], None]:
    def run(n: int) -> None:
        clock.advance(n * step_s)

    return run


@pytest.mark.parametrize(
    ("harness_s", "difference", "verdict"),
    [(13 * 2.0**-12, 30.0, "FAIL"), (10 * 2.0**-12, 0.0, "ok")],
)
def test_a_harness_slower_than_the_reference_is_caught(
    monkeypatch: pytest.MonkeyPatch, harness_s: float, difference: float, verdict: str
) -> None:
    # The "jax" reference is a plain loop timed around direct(steps): no
    # framework import, so steps on a fake clock can stand in for the steps,
    # here 10/4096 s each.
    clock = fake_clock(monkeypatch)
    reference_s = 10 * 2.0**-12
    answer = time_against_reference(
        _steps(clock, harness_s), _steps(clock, reference_s), "jax", steps=10, pairs=20
    )
    assert answer.harness_s == [harness_s] * 20
    assert answer.reference_s == [reference_s] * 20
    row = judge(answer)
    assert row["difference_%"] == pytest.approx(difference)
    assert row["verdict"] == verdict


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


class _Worker:
    """Answers a self-check with fixed figures; ``busy`` cores taken by
    others meanwhile, as the resource sampler would say."""

    busy = 0.0
    seen: ClassVar[list[tuple[int, ...] | None]] = []

    def __init__(self, path: str, env: dict[str, str], cpus: tuple[int, ...]) -> None:
        self.seen.append(cpus)

    def __enter__(self) -> _Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def call(self, request: object, timeout: float) -> Reply:
        answer = _result([0.010] * 30, [0.010] * 30)
        return Reply("ok", answer=answer, resources={"others_cpu": self.busy})


@pytest.mark.parametrize(("busy", "said"), [(0.02, "quiet"), (0.9, "BUSY")])
def test_each_row_says_whether_the_machine_was_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy: float, said: str
) -> None:
    monkeypatch.setattr(selfcheck, "Worker", _Worker)
    monkeypatch.setattr(_Worker, "busy", busy)
    (row,) = selfcheck.selfcheck(tmp_path, paths=("native-torch",), pairs=2)
    assert (row["verdict"], row["machine"], row["others_cpu"]) == ("ok", said, busy)
    # measured as a default run measures: one thread on a CPU of its own
    assert _Worker.seen[-1] == of_profile(get_profile("default")).worker_cpus
