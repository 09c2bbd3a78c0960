"""The orchestrator-side sampler sees a worker's CPU use and memory."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from harness.numerics import thread_environment
from harness.resources import Sampler

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
