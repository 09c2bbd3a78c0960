"""The orchestrator-side sampler sees a worker's CPU use and memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from harness.core.resources import usage_summary
from workers.launch import thread_environment
from workers.resources import Sampler, contended

pytest.importorskip("psutil")


def test_a_busy_process_shows_cpu_use_and_memory() -> None:
    busy = "import time\nx = bytearray(50 * 2**20)\nt = time.time()\n" + (
        "while time.time() - t < 1.5: pass\n"
    )
    child = subprocess.Popen([sys.executable, "-c", busy])
    try:
        time.sleep(0.3)  # past interpreter start-up
        with Sampler(child.pid, interval_s=0.05) as sampler:
            time.sleep(0.8)
        result = sampler.result()
    finally:
        child.wait()
    assert result["cpu_util"] > 0.5  # one core busy, less scheduling noise
    assert result["peak_rss_mb"] > 50
    assert result["wall_s"] == pytest.approx(0.8, abs=0.2)


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


def test_another_busy_process_marks_the_machine_contended() -> None:
    """The worker sleeps; a process outside the run spins a core: the
    sampler counts that core as the machine's other work."""
    spin = "import time\nt = time.time()\nwhile time.time() - t < 3: pass\n"
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3)"])
    other = subprocess.Popen([sys.executable, "-c", spin])
    try:
        time.sleep(0.3)
        with Sampler(worker.pid, interval_s=0.05) as sampler:
            time.sleep(1.0)
        result = sampler.result()
    finally:
        other.kill()
        worker.kill()
        other.wait()
        worker.wait()
    assert result["others_cpu"] > 0.5  # about one core
    assert result["cpu_util"] < 0.1  # the sleeping worker's own use is apart
    assert contended(result)
    assert not contended({"others_cpu": 0.01, "steal_frac": 0.0})
    assert contended({"others_cpu": 0.0, "steal_frac": 0.2})
    assert not contended({})


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
