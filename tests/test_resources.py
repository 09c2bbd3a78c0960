"""The orchestrator-side sampler sees a worker's CPU use and memory: what it
computes on a fake ``psutil`` and clock (``FakeMachine``), exactly, and that it
reads psutil's counters of a real process (counted, not timed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace
from typing import NamedTuple

import pytest

from harness.core.resources import usage_summary
from tests.helpers import FakeClock
from workers import resources
from workers.launch import thread_environment
from workers.resources import Sampler, contended

pytest.importorskip("psutil")


class _CpuTimes(NamedTuple):
    """The machine's CPU seconds, as ``psutil.cpu_times()`` gives them."""

    user: float
    system: float
    idle: float
    iowait: float
    steal: float


class FakeMachine:
    """Stands in for ``psutil``: a worker process ``pid`` and the machine
    around it, whose counters move only by :meth:`run`, as ``clock`` does."""

    def __init__(self, pid: int, clock: FakeClock, cores: int = 2) -> None:
        self.pid, self.clock, self.cores = pid, clock, cores
        self.rss = 0
        self.worker_s = self.own_s = 0.0  # CPU seconds of worker, orchestrator
        self.busy_s = self.idle_s = self.steal_s = 0.0  # of the whole machine

    def run(
        self,
        seconds: float,
        *,
        worker: float = 0.0,
        own: float = 0.0,
        others: float = 0.0,
        steal: float = 0.0,
        rss_mb: int = 0,
    ) -> None:
        """``seconds`` pass with the worker on ``worker`` cores, the
        orchestrator on ``own``, other processes on ``others``, ``steal``
        cores stolen, the rest idle; then the worker holds ``rss_mb``."""
        self.clock.advance(seconds)
        self.worker_s += worker * seconds
        self.own_s += own * seconds
        self.busy_s += (worker + own + others) * seconds
        self.steal_s += steal * seconds
        self.idle_s += (self.cores - worker - own - others - steal) * seconds
        self.rss = rss_mb * 2**20

    # What the sampler reads of psutil's API.
    def Process(self, pid: int | None = None) -> SimpleNamespace:
        if pid is None:  # the orchestrator itself
            return SimpleNamespace(
                cpu_times=lambda: SimpleNamespace(user=self.own_s, system=0.0)
            )
        assert pid == self.pid
        return SimpleNamespace(
            cpu_times=lambda: SimpleNamespace(user=self.worker_s, system=0.0),
            memory_info=lambda: SimpleNamespace(rss=self.rss),
        )

    def cpu_times(self) -> _CpuTimes:
        return _CpuTimes(self.busy_s, 0.0, self.idle_s, 0.0, self.steal_s)


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> FakeMachine:
    """A :class:`FakeMachine` in place of ``psutil``, its clock in place of
    the sampler's, and no NVML."""
    clock = FakeClock()
    monkeypatch.setattr(resources, "clock", clock)
    fake = FakeMachine(4242, clock)
    monkeypatch.setitem(sys.modules, "psutil", fake)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    return fake


def test_a_busy_process_shows_cpu_use_and_memory(machine: FakeMachine) -> None:
    machine.run(0.0, rss_mb=10)
    with Sampler(machine.pid, interval_s=0.05) as sampler:
        machine.run(0.75, worker=1.0, rss_mb=60)  # one core busy
    result = sampler.result()
    assert result["cpu_util"] == 1.0
    assert result["peak_rss_mb"] == 60
    assert result["wall_s"] == 0.75
    assert result["others_cpu"] == 0.0


def test_a_real_busy_process_shows_cpu_use_and_memory() -> None:
    """psutil's counters of a real process: counted, not timed."""
    busy = "x = bytearray(50 * 2**20)\nprint('ready', flush=True)\nwhile True: pass\n"
    with subprocess.Popen(
        [sys.executable, "-c", busy], stdout=subprocess.PIPE
    ) as child:  # closes the pipe and waits
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == b"ready\n"  # past start-up and bytes
            with Sampler(child.pid, interval_s=0.05) as sampler:
                time.sleep(0.3)
            result = sampler.result()
        finally:
            child.kill()
    assert result["cpu_util"] > 0
    assert result["peak_rss_mb"] > 50
    assert result["wall_s"] > 0
    assert {"others_cpu", "steal_frac"} <= set(result)


def test_a_vanished_process_gives_a_reason_not_a_crash() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with Sampler(child.pid) as sampler:
        pass
    assert "error" in sampler.result()


def test_thread_settings_become_explicit_environment() -> None:
    fixed = thread_environment({"intra_op": 2, "inter_op": 1})
    assert fixed["env"]["OMP_NUM_THREADS"] == "2"
    assert fixed["env"]["TF_NUM_INTEROP_THREADS"] == "1"
    auto = thread_environment({})
    assert auto["intra_op"] >= 1
    assert auto["inter_op"] == 1


class _FakeNvml:
    """Stands in for ``pynvml``: two GPUs, the worker on the second."""

    def __init__(self, pid: int, used: list[int]) -> None:
        self.pid, self.used, self.shutdowns = pid, used, 0

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetComputeRunningProcesses(
        self, handle: int
    ) -> list[SimpleNamespace]:
        other = SimpleNamespace(pid=self.pid + 1, usedGpuMemory=10 * 2**30)
        if handle == 0:
            return [other]
        now = self.used.pop(0) if len(self.used) > 1 else self.used[0]
        return [other, SimpleNamespace(pid=self.pid, usedGpuMemory=now)]


def test_gpu_memory_is_the_peak_the_worker_itself_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    try:
        fake = _FakeNvml(child.pid, [100 * 2**20, 300 * 2**20, 200 * 2**20])
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        with Sampler(child.pid, interval_s=0.05) as sampler:
            time.sleep(0.3)
        result = sampler.result()
    finally:
        child.kill()
        child.wait()
    assert result["peak_gpu_mb"] == pytest.approx(300)  # not the other process'
    assert fake.shutdowns == 1


def test_without_nvml_there_is_no_gpu_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    with Sampler(os.getpid(), interval_s=0.05) as sampler:
        time.sleep(0.1)
    assert "peak_gpu_mb" not in sampler.result()
    assert sampler.result()["peak_rss_mb"] > 0


def test_another_busy_process_marks_the_machine_contended(
    machine: FakeMachine,
) -> None:
    """The worker sleeps; a process outside the run spins a core: the
    sampler counts that core as the machine's other work, and neither the
    worker's nor the orchestrator's own CPU time."""
    with Sampler(machine.pid, interval_s=0.05) as sampler:
        machine.run(1.0, worker=0.25, own=0.125, others=1.0)
    result = sampler.result()
    assert result["others_cpu"] == 1.0
    assert result["cpu_util"] == 0.25  # the worker's own use is apart
    assert result["steal_frac"] == 0.0
    assert contended(result)
    assert not contended({"others_cpu": 0.01, "steal_frac": 0.0})
    assert contended({"others_cpu": 0.0, "steal_frac": 0.2})
    assert not contended({})


def test_time_the_hypervisor_stole_is_a_share_of_all_cpus(
    machine: FakeMachine,
) -> None:
    with Sampler(machine.pid, interval_s=0.05) as sampler:
        machine.run(2.0, worker=1.0, steal=0.5)  # of 2 cores
    result = sampler.result()
    assert result["steal_frac"] == 0.25
    assert result["others_cpu"] == 0.0  # stolen time is not other work
    assert contended(result)


def test_usage_summary_takes_medians_and_skips_what_is_not_there() -> None:
    usage = [
        {"user_s": 0.1, "sys_s": 0.01, "minflt": 4.0},
        {"user_s": 0.3, "sys_s": 0.03, "minflt": 0.0},
        {"user_s": 0.2, "sys_s": 0.02, "minflt": 1.0},
    ]
    assert usage_summary(usage) == {
        "usage_user_s": 0.2,
        "usage_sys_s": 0.02,
        "usage_minflt": 1.0,
    }
    assert usage_summary(None) == {}  # an older worker's answer
    assert usage_summary([{"user_s": float("nan")}]) == {}  # no median of NaN
