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


def line(done: int, total: int, elapsed: float) -> str:
    """``[4/10  40% ####------ 03:10 elapsed, ~04:45 left]``: ``done`` of
    ``total`` units finished in ``elapsed`` seconds (a total below ``done``
    counts as ``done``)."""
    total = max(total, done, 1)
    shape = _DONE + (", ~{remaining} left]" if done and elapsed > 0 else "]")
    return str(tqdm.format_meter(done, total, elapsed, bar_format=shape, ascii="-#"))


class Progress:
    """A command's units: how many are planned (:meth:`add` when more are),
    how many are finished, and since when it runs."""

    def __init__(self, total: int = 0) -> None:
        self.total, self.done, self.start = total, 0, time.monotonic()

    def add(self, units: int) -> None:
        self.total += units

    def advance(self, units: int = 1) -> None:
        self.done += units

    def line(self, done: int | None = None) -> str:
        """The progress line now; ``done``: the units finished when the one
        being reported on is not counted yet."""
        finished = self.done if done is None else done
        return line(finished, self.total, time.monotonic() - self.start)
