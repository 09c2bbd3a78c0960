"""CPU use and peak memory of a worker while it serves one request.

Sampled from the orchestrator, in a thread that wakes every ``interval_s``
(0.2 s: a few microseconds of work each time), so the worker being measured
runs no extra code.  CPU utilization is the worker's CPU time (user + system,
all its threads) over the wall time of the request, in cores: 2.0 means two
cores busy all along.  Peak resident memory is the largest RSS seen by the
sampler, so a peak shorter than the interval can be missed; the number is a
lower bound.  Needs ``psutil`` (the ``harness`` extra); without it the
sampler records nothing and says so.

Contention: the CPU time every other process of the machine took meanwhile,
from the system-wide counters (busy time of all CPUs, less this worker's and
the orchestrator's own CPU time), as ``others_cpu`` in cores, and the time
the hypervisor stole from this machine's CPUs as ``steal_frac`` (a share of
all CPUs' time; Linux only).  Two reads of ``/proc/stat`` per request, and
short-lived processes count too.  ``CONTENDED_CORES`` and ``CONTENDED_STEAL``
are where a measurement counts as taken on a busy machine.

GPU memory, where the worker uses an NVIDIA GPU: the device memory NVML
reports for the worker's process id (``nvidia-ml-py``, the ``harness``
extra), summed over the GPUs and sampled with the rest, as ``peak_gpu_mb``:
what the process holds, its framework's caching allocator and CUDA context
included, again a lower bound of the peak.  Without NVML or a GPU (this
project's CPU builds) the key is absent.  NVML lists host process ids, so in
a container with its own PID namespace it may not find the worker.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

# A request measured while other processes took this many cores on average,
# or while this share of CPU time was stolen, was measured on a busy machine.
# A quiet 2-core machine here shows 0.01-0.05 cores of background work.
CONTENDED_CORES = 0.15
CONTENDED_STEAL = 0.05

# The clock a request's wall time is read from; tests put a fake one in its
# place, with a fake ``psutil``, and assert on exact results.
clock: Callable[[], float] = time.perf_counter


def contended(resources: dict[str, Any]) -> bool:
    """Whether a request's resources say the machine was busy meanwhile."""
    others = resources.get("others_cpu")
    steal = resources.get("steal_frac")
    return (isinstance(others, float) and others > CONTENDED_CORES) or (
        isinstance(steal, float) and steal > CONTENDED_STEAL
    )


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
        self._psutil: Any = None
        self._start_machine = (0.0, 0.0, 0.0, 0.0)
        self._start_wall = 0.0
        self._result: dict[str, Any] = {}
        self._gpu = _GpuMemory(pid)
        self._peak_gpu = 0

    def __enter__(self) -> Sampler:
        try:
            import psutil

            self._process = psutil.Process(self.pid)
            self._start_cpu = self._cpu()
            self._psutil = psutil
            self._start_machine = self._machine()
        except Exception as exc:  # no psutil, or the process is already gone
            self._error = f"{type(exc).__name__}: {exc}"
            return self
        self._start_wall = clock()
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
            self._gpu.close()
            return
        self._stop.set()
        self._thread.join()
        wall = clock() - self._start_wall
        try:
            cpu = self._cpu() - self._start_cpu
            self._sample()
        except Exception:  # the worker exited (crash): keep what was sampled
            cpu = float("nan")
        busy, steal, own, total = (
            end - start
            for end, start in zip(self._machine(), self._start_machine, strict=True)
        )
        self._result = {
            "cpu_util": cpu / wall if wall > 0 else float("nan"),
            "peak_rss_mb": self._peak_rss / 2**20,
            "wall_s": wall,
            "interval_s": self.interval_s,
        }
        if wall > 0 and total > 0 and not math.isnan(cpu):
            self._result["others_cpu"] = max(0.0, (busy - cpu - own) / wall)
            self._result["steal_frac"] = steal / total
        if self._gpu.available:
            self._result["peak_gpu_mb"] = self._peak_gpu / 2**20
        self._gpu.close()

    def result(self) -> dict[str, Any]:
        return dict(self._result)

    def _machine(self) -> tuple[float, float, float, float]:
        """CPU seconds of the whole machine: busy (all but idle and iowait),
        stolen, this orchestrator's own, and all."""
        t = self._psutil.cpu_times()
        total = float(sum(t))
        idle = float(t.idle + getattr(t, "iowait", 0.0))
        steal = float(getattr(t, "steal", 0.0))
        me = self._psutil.Process().cpu_times()
        return total - idle - steal, steal, float(me.user + me.system), total

    def _cpu(self) -> float:
        """The worker's CPU seconds, its finished child processes' included."""
        t = self._process.cpu_times()
        children = getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        return float(t.user + t.system + children)

    def _sample(self) -> None:
        self._peak_rss = max(self._peak_rss, int(self._process.memory_info().rss))
        if self._gpu.available:
            self._peak_gpu = max(self._peak_gpu, self._gpu.used_bytes())

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._sample()
            except Exception:  # the worker exited; __exit__ reports what was seen
                return


class _GpuMemory:
    """Device memory one process holds on the NVIDIA GPUs NVML can see."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._nvml: Any = None
        self._handles: list[Any] = []
        try:
            import pynvml  # nvidia-ml-py

            pynvml.nvmlInit()
        except Exception:  # no nvidia-ml-py, or no driver: no GPU to sample
            return
        self._nvml = pynvml
        try:
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception:  # a driver that answers nothing useful
            self.close()

    @property
    def available(self) -> bool:
        return bool(self._handles)

    def used_bytes(self) -> int:
        used = 0
        for handle in self._handles:
            for proc in self._nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                # usedGpuMemory is None where the driver withholds it
                if proc.pid == self.pid and proc.usedGpuMemory:
                    used += int(proc.usedGpuMemory)
        return used

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml, self._handles = None, []
