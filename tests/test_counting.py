"""The worker's side of harness count under a real callgrind: client
requests, one dump per counted region, counts that repeat, and extra work
calibrated to a known share.  Skipped where valgrind, its header or a C
compiler is missing (``nox -s count`` installs them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.count import callgrind
from harness.count.measure import VALGRIND_OPTIONS, build_requests
from workers import counting
from workers.launch import PROJECT_ROOT

needs_valgrind = pytest.mark.skipif(
    not (
        shutil.which("valgrind")
        and shutil.which("cc")
        and Path("/usr/include/valgrind/callgrind.h").exists()
    ),
    reason="valgrind, its header or a C compiler is missing: apt-get install "
    "valgrind gcc",
)

# A pure-Python block counted three times, then with 1% extra work
# calibrated as the worker calibrates it, three times.  The block is other
# work than the extra loop (dict lookups), so the calibration has to carry
# from one to the other; it allocates nothing, so its count stays put.
SCRIPT = """
import json
from workers import counting

TABLE = {str(i): i % 200 for i in range(1000)}
KEYS = list(TABLE) * 20

def block():
    total = 0
    for key in KEYS:
        total ^= TABLE[key]
    return total

callgrind = counting.Callgrind()
block()
callgrind.start()
callgrind.count(block, "warm")
plain = [callgrind.count(block, f"plain {i}") for i in range(3)]
loops = counting._calibrated(callgrind, block, 1.01, "t")
def region():
    block()
    counting.extra_work(loops)
callgrind.count(region, "warm extra")
extra = [callgrind.count(region, f"extra {i}") for i in range(3)]
callgrind.stop()
def counts(dumps, name):
    return [counting.instructions(d, f"{name} {i}") for i, d in enumerate(dumps)]
print(json.dumps(
    {"plain": counts(plain, "plain"), "extra": counts(extra, "extra"), "loops": loops}
))
"""


@needs_valgrind
def test_counts_repeat_and_extra_work_adds_its_share(tmp_path: Path) -> None:
    library = build_requests(tmp_path / "cache")
    out = tmp_path / "callgrind.out"
    env = {
        **os.environ,
        "PYTHONPATH": str(PROJECT_ROOT),
        "PYTHONHASHSEED": "0",
        counting.LIBRARY_ENV: str(library),
        counting.OUT_ENV: str(out),
    }
    done = subprocess.run(
        [
            "valgrind",
            *VALGRIND_OPTIONS,
            f"--callgrind-out-file={out}",
            f"--log-file={tmp_path / 'valgrind.log'}",
            sys.executable,
            "-c",
            SCRIPT,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    plain, extra = found["plain"], found["extra"]
    # After a warm-up block, blocks repeat; the extra work adds its share
    # (within a tenth of it: the heap the calibration left moves the block).
    assert max(plain) / min(plain) - 1 < 0.001, found
    share = sorted(extra)[1] / sorted(plain)[1] - 1
    assert 0.009 < share < 0.011, found
    # The dumps read back whole, each under its label.
    dumps = {
        callgrind.read(p).label: callgrind.read(p)
        for p in tmp_path.glob("callgrind.out.*")
    }
    assert dumps["plain 0"].total == plain[0]
    assert dumps["plain 0"].groups()["interpreter"] > 0.9 * plain[0]


def test_a_count_request_outside_callgrind_is_refused_in_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(counting.LIBRARY_ENV, raising=False)
    with pytest.raises(ValueError, match="needs a worker started by harness count"):
        counting.Callgrind()


@needs_valgrind
def test_a_count_request_on_a_real_cpu_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(counting.LIBRARY_ENV, str(build_requests(tmp_path)))
    monkeypatch.setenv(counting.OUT_ENV, str(tmp_path / "out"))
    with pytest.raises(ValueError, match="running under valgrind"):
        counting.Callgrind()
