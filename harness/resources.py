"""CPU use and peak memory of a worker while it serves one request.

Sampled from the orchestrator, in a thread that wakes every ``interval_s``
(0.2 s: a few microseconds of work each time), so the worker being measured
runs no extra code.  CPU utilization is the worker's CPU time (user + system,
all its threads) over the wall time of the request, in cores: 2.0 means two
cores busy all along.  Peak resident memory is the largest RSS seen by the
sampler, so a peak shorter than the interval can be missed; the number is a
lower bound.  Needs ``psutil`` (the ``harness`` extra); without it the
sampler records nothing and says so.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any


class Sampler:
    """``with Sampler(pid) as s: ...`` then ``s.result()``."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.pid, self.interval_s = pid, interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._peak_rss = 0
        self._error: str | None = None
        self._process: Any = None
        self._start_cpu = 0.0
        self._start_wall = 0.0
        self._result: dict[str, Any] = {}

    def __enter__(self) -> Sampler:
        try:
            import psutil

            self._process = psutil.Process(self.pid)
            self._start_cpu = self._cpu()
        except Exception as exc:  # no psutil, or the process is already gone
            self._error = f"{type(exc).__name__}: {exc}"
            return self
        self._start_wall = time.perf_counter()
        self._sample()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._thread is None:
            self._result = {"error": self._error}
            return
        self._stop.set()
        self._thread.join()
        wall = time.perf_counter() - self._start_wall
        try:
            cpu = self._cpu() - self._start_cpu
            self._sample()
        except Exception:  # the worker exited (crash): keep what was sampled
            cpu = float("nan")
        self._result = {
            "cpu_util": cpu / wall if wall > 0 else float("nan"),
            "peak_rss_mb": self._peak_rss / 2**20,
            "wall_s": wall,
            "interval_s": self.interval_s,
        }

    def result(self) -> dict[str, Any]:
        return dict(self._result)

    def _cpu(self) -> float:
        times = self._process.cpu_times()
        return float(times.user + times.system)

    def _sample(self) -> None:
        self._peak_rss = max(self._peak_rss, int(self._process.memory_info().rss))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception:  # the worker exited; __exit__ reports what was seen
                return
