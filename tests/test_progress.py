"""The one progress line of run, explain and ops."""

from __future__ import annotations

import pytest

from harness.core import progress


@pytest.mark.parametrize(
    ("done", "total", "elapsed", "shown"),
    [
        (0, 10, 3.0, "[0/10   0% ---------- 00:03 elapsed]"),  # no estimate yet
        (4, 10, 190.0, "[4/10  40% ####------ 03:10 elapsed, ~04:45 left]"),
        (10, 10, 600.0, "[10/10 100% ########## 10:00 elapsed, ~00:00 left]"),
        (3, 2, 4000.0, "[3/3 100% ########## 1:06:40 elapsed, ~00:00 left]"),
    ],
)
def test_the_line(done: int, total: int, elapsed: float, shown: str) -> None:
    assert progress.line(done, total, elapsed) == shown


def test_units_are_added_and_counted() -> None:
    p = progress.Progress(2)
    p.add(2)  # more rounds planned
    p.start -= 60  # a minute ago
    p.advance()
    assert p.line() == "[1/4  25% ##-------- 01:00 elapsed, ~03:00 left]"
    assert p.line(p.done + 1).startswith("[2/4  50% #####-----")


def test_a_run_within_a_budget_shows_the_budget_s_time_left() -> None:
    """Units beyond the budget are never started: the rate's estimate
    (1:37:29 left for a 10-minute run, as one was shown) would mislead."""
    assert progress.line(3, 145, 41.0, budget_left=559.0) == (
        "[3/145   2% ---------- 00:41 elapsed, 09:19 of the budget left]"
    )
    assert progress.line(3, 145, 700.0, budget_left=-100.0).endswith(
        "00:00 of the budget left]"
    )
    p = progress.Progress(145, deadline=progress.time.monotonic() + 600)
    assert "of the budget left]" in p.line()
