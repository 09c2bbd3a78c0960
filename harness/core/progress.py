"""One progress line for the commands that measure unit after unit.

``run`` (a unit: one worker process' cells), ``explain`` (one request of a
sweep, or one profiled phase) and ``ops`` (one case and direction) start their
console lines alike::

    [4/10  40% ####------ 03:10 elapsed, ~04:45 left]

units finished of those planned, the share done, elapsed time and an
estimate of the time left (tqdm's ``format_meter``: the rate so far,
extrapolated; none before the first unit ends).
"""

from __future__ import annotations

import time

from tqdm import tqdm

_DONE = "[{n_fmt}/{total_fmt} {percentage:3.0f}% {bar:10} {elapsed} elapsed"


def line(
    done: int, total: int, elapsed: float, budget_left: float | None = None
) -> str:
    """``[4/10  40% ####------ 03:10 elapsed, ~04:45 left]``: ``done`` of
    ``total`` units finished in ``elapsed`` seconds (a total below ``done``
    counts as ``done``).  With ``budget_left`` (a run within a budget,
    whose units beyond it are never started) the time left is the
    budget's: ``03:10 elapsed, 06:50 of the budget left]``."""
    total = max(total, done, 1)
    if budget_left is not None:
        left = tqdm.format_interval(max(0.0, budget_left))
        shape = _DONE + f", {left} of the budget left]"
    else:
        shape = _DONE + (", ~{remaining} left]" if done and elapsed > 0 else "]")
    return str(tqdm.format_meter(done, total, elapsed, bar_format=shape, ascii="-#"))


class Progress:
    """A command's units: how many are planned (:meth:`add` when more are),
    how many are finished, and since when it runs."""

    def __init__(self, total: int = 0, deadline: float | None = None) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()
        self.deadline = deadline  # a run within a budget: its end, monotonic

    def add(self, units: int) -> None:
        self.total += units

    def advance(self, units: int = 1) -> None:
        self.done += units

    def line(self, done: int | None = None) -> str:
        """The progress line now; ``done``: the units finished when the one
        being reported on is not counted yet."""
        finished = self.done if done is None else done
        now = time.monotonic()
        left = None if self.deadline is None else self.deadline - now
        return line(finished, self.total, now - self.start, left)
