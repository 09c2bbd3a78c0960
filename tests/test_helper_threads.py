"""Helper threads: a worker releasing its threads to every CPU (``helpers =
"free"``; the placements themselves: ``tests/test_placement.py``), and the
check that catches a thread of the worker taking the CPU its timed thread
needs (the timing thread's wait for a CPU, ``ready_s``, marked ``waited`` in
the report).

A stand-in worker (a Python process pinned to one CPU, no framework) times
paired blocks of work that leaves the GIL, as a framework's kernels do,
with a thread beside them that spins the same way, as a helper thread of a
framework might."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.core import pairing
from harness.core.records import Record
from harness.report import doubts
from harness.report.analysis import (
    IDLE,
    TICK_S,
    WAITED,
    busy_mark,
    idle,
    waited,
)
from tests.helpers import profile, record
from tests.test_placement import needs_two_cpus
from workers import launch, messages, timing
from workers.launch import RELEASE_VARIABLE

ROOT = Path(__file__).resolve().parent.parent


RELEASE = textwrap.dedent(
    """
    import json, os, sys, threading
    os.sched_setaffinity(0, [int(sys.argv[1])])
    from workers import launch
    early = {}
    ready, go = threading.Event(), threading.Event()

    def before():
        ready.set()
        go.wait()
        early["before"] = sorted(os.sched_getaffinity(0))

    old = threading.Thread(target=before)
    old.start()
    ready.wait()
    start = sorted(os.sched_getaffinity(0))
    released = launch.release_helpers()
    go.set()
    old.join()
    later = {}
    def after():
        later["after"] = sorted(os.sched_getaffinity(0))

    new = threading.Thread(target=after)
    new.start()
    new.join()
    main = sorted(os.sched_getaffinity(0))
    print(json.dumps([start, released, main, early["before"], later["after"]]))
    """
)


@needs_two_cpus
def test_release_lets_every_thread_use_the_helper_cpus(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker pinned to one CPU, its threads (one started before, one
    after) all on every CPU once released; a malformed value refused."""
    cpus = sorted(os.sched_getaffinity(0))
    env = {**os.environ, RELEASE_VARIABLE: ",".join(map(str, cpus))}
    done = subprocess.run(
        [sys.executable, "-c", RELEASE, str(cpus[-1])],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
        check=True,
    )
    start, released, main, before, after = json.loads(done.stdout)
    assert start == [cpus[-1]]
    assert released == main == before == after == cpus
    monkeypatch.setenv(RELEASE_VARIABLE, "none")
    with pytest.raises(ValueError, match="must list CPU numbers like 0,1"):
        launch.release_helpers()
    monkeypatch.delenv(RELEASE_VARIABLE)
    assert launch.release_helpers() is None  # unset: nothing to release


def test_the_default_profile_frees_helpers_and_records_it() -> None:
    from harness.core.profiles import get_profile

    assert get_profile("default").helpers == "free"
    assert profile("default", helpers="confined").digest() != (
        get_profile("default").digest()
    )


def _ready_share(answer: messages.PairedAnswer) -> dict[str, float | None]:
    """Each side's share of its time its timing thread waited for a CPU, as
    the report reads it from the records a pair process writes."""
    cell = pairing.PairCell("ffn", "torch", "train", 8)
    shares: dict[str, float | None] = {}
    for api, values in pairing.sides(answer, cell).items():
        made = record(
            f"{api}-torch",
            values=values,
            summary=pairing.summary("train", values),
        )
        shares[api] = waited(made)
        assert (busy_mark([made]) or "").startswith("waited") == (
            (shares[api] or 0.0) > WAITED
        )
    return shares


STAND_IN = textwrap.dedent(
    """
    import hashlib, json, os, sys, threading
    os.sched_setaffinity(0, [int(sys.argv[1])])
    from workers import messages, timing

    data = b"x" * (1 << 16)  # hashlib leaves the GIL for data this long

    def work(n=1):
        for _ in range(n * 40):
            hashlib.sha256(data).digest()

    stop = threading.Event()

    def spin():
        while not stop.is_set():
            hashlib.sha256(data).digest()

    if sys.argv[2] == "spin":
        threading.Thread(target=spin, daemon=True).start()
    answer = timing.time_paired(
        work, work, "train", steps=5, batches_per_round=1, window_s=0.0,
        min_blocks=6, max_blocks=6, warmup_runs=1, seed=0,
    )
    stop.set()
    print(json.dumps(messages.encode(answer)))
    """
)


@pytest.mark.skipif(
    not Path(timing.SCHEDSTAT).exists() or not hasattr(os, "sched_setaffinity"),
    reason="needs Linux' per-thread schedstat and CPU affinity",
)
def test_a_helper_thread_spinning_on_the_timed_cpu_is_caught() -> None:
    """With a spinning thread on its one CPU the timing thread waits for the
    CPU about half the time (the scheduler shares it between the two): the
    report marks the cell ``waited``.  Without the spinner nothing here says
    how long it waits: another process on the machine may take that CPU too,
    and a test never depends on the machine being quiet."""
    cpu = max(os.sched_getaffinity(0))
    done = subprocess.run(
        [sys.executable, "-c", STAND_IN, str(cpu), "spin"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=True,
    )
    answer = messages.decode_answer(
        messages.Paired(
            model="ffn", weights="-", data="-", phase="train", steps=5, window_s=0.0
        ),
        json.loads(done.stdout),
    )
    assert isinstance(answer, messages.PairedAnswer)
    shares = _ready_share(answer)
    assert all(share is not None and share > WAITED for share in shares.values())


def test_waited_reads_the_ready_share_and_an_older_record_has_none() -> None:
    quiet = record(summary={"median_step_s": 0.010, "usage_ready_s": 0.0005})
    kept = record(summary={"median_step_s": 0.010, "usage_ready_s": 0.004})
    older = record(summary={"median_step_s": 0.010})
    assert waited(quiet) == pytest.approx(0.05)
    assert busy_mark([quiet]) is None
    assert busy_mark([quiet, kept]) == "waited 40%"
    assert waited(older) is None
    assert busy_mark([older]) is None
    contended = record(
        summary={"median_step_s": 0.010, "usage_ready_s": 0.004, "contended": True}
    )
    assert busy_mark([contended]) == "contended, waited 40%"


def _blocks(*cpu_over_wall: float, units: int = 30) -> dict[str, object]:
    """A paired side's values: blocks of ``units`` steps of 10 ms whose
    process used the CPU for these shares of their wall time."""
    return {
        "block_s": [0.010] * len(cpu_over_wall),
        "usage": [
            {"user_s": 0.009 * c, "sys_s": 0.001 * c, "units": float(units)}
            for c in cpu_over_wall
        ],
    }


def _side(
    *cpu_over_wall: float, units: int = 30, cpus: tuple[int, ...] = (0, 1)
) -> Record:
    """A paired side's record (``_blocks``) of a worker on ``cpus``."""
    return record(
        values=_blocks(*cpu_over_wall, units=units),
        platform={"cpu_affinity": list(cpus)},
    )


def test_a_block_whose_process_sat_idle_is_marked_idle() -> None:
    """Issue 81: Keras on TensorFlow's blocks that jump computed for 0.54 of
    their wall time, the other blocks of the process for all of it (helper
    threads add CPU time: above 1): the largest difference marks the cell,
    a doubt of its own.  A process idle alike in every block (JAX at batch
    1, a hand-off between two threads at every call) is steady: no mark.
    Blocks of 1 s on one CPU: each share exact."""
    computing = _side(1.0, 1.04, 0.98, units=100, cpus=(0,))
    jumped = _side(1.03, 0.54, 1.0, units=100, cpus=(0,))
    steady = _side(0.10, 0.12, 0.11, units=100, cpus=(0,))
    # a fresh clone's smoke run: JAX's XLA on two CPUs in some blocks, not idle
    two_cpus = _side(2.05, 1.0, 1.9, units=100, cpus=(0,))
    assert idle(computing) == pytest.approx(0.02)
    assert idle(jumped) == pytest.approx(0.46)
    assert idle(steady) == pytest.approx(0.02)
    assert idle(two_cpus) == pytest.approx(0.0)
    assert busy_mark([computing, steady, two_cpus]) is None
    assert busy_mark([computing, jumped]) == "idle 46%"
    assert 0.46 > IDLE > 0.02
    found = doubts.of_run([computing, jumped], [])
    assert [(d.kind, d.reason) for d in found] == [("idle", "idle 46%")]
    assert doubts.counted(found) == "1 idle cell"


def test_an_idle_difference_counts_only_beyond_what_the_ticks_may_hide() -> None:
    """getrusage counts a thread running on another CPU up to a tick late
    (``TICK_S``, 10 ms at the coarsest): on two CPUs a block's share is off
    by up to 10 ms over its wall time.  Blocks of 2 steps of 10 ms (a smoke
    run's: native JAX's ffn marked "idle 54%") may hide half their CPU time:
    no difference counts; blocks of 10 s nearly all of it; on one CPU all of
    it.  VGG16's Keras-on-TensorFlow inference (issue 81): a block of 90 ms
    at 1.0 beside one of 176 ms at 0.55, at least 28% apart."""
    assert idle(_side(1.0, 0.46, units=2)) == 0.0
    assert busy_mark([_side(1.0, 0.46, units=2)]) is None
    assert idle(_side(1.0, 0.46, units=1000)) == pytest.approx(0.54 - 0.002)
    assert idle(_side(1.0, 0.46, units=2, cpus=(3,))) == pytest.approx(0.54)
    # eight CPUs: seven other threads' ticks
    assert idle(_side(1.0, 0.46, units=20, cpus=tuple(range(8)))) == 0.0
    vgg16 = record(
        values={
            "block_s": [0.090, 0.176],
            "usage": [
                {"user_s": 0.090, "sys_s": 0.0, "units": 1.0},
                {"user_s": 0.55 * 0.176, "sys_s": 0.0, "units": 1.0},
            ],
        },
        platform={"cpu_affinity": [0, 1]},
    )
    expected = (1.0 - TICK_S / 0.090) - (0.55 + TICK_S / 0.176)
    assert idle(vgg16) == pytest.approx(expected)
    assert expected > IDLE
    assert busy_mark([vgg16]) == f"idle {expected:.0%}"


def test_an_idle_share_needs_each_blocks_wall_and_cpu_time() -> None:
    """Blocks without usage (a worker timed alone, an older worker), a usage
    list of another length, one block, or a field that is no number: no
    share, and no mark, rather than a share made up."""
    on_two = {"cpu_affinity": [0, 1]}
    assert idle(record(platform=on_two)) is None
    short = _blocks(0.5, 1.0)
    short["usage"] = short["usage"][:1]  # type: ignore[index]
    assert idle(record(values=short, platform=on_two)) is None
    assert idle(_side(0.5)) is None
    wrong = _blocks(0.5, 1.0)
    wrong["usage"][0] = {"user_s": "0.004", "sys_s": 0.0, "units": 30.0}  # type: ignore[index]
    assert idle(record(values=wrong, platform=on_two)) is None
    zero = {**_blocks(0.5, 1.0), "block_s": [0.0, 0.010]}
    assert idle(record(values=zero, platform=on_two)) is None
    failed = record(status="failed", values=_blocks(0.5, 1.0), platform=on_two)
    assert idle(failed) is None
    assert busy_mark([record(values=short, platform=on_two)]) is None
    # an older worker: no block length (units), or no CPUs said
    older = _blocks(0.5, 1.0)
    for u in older["usage"]:  # type: ignore[attr-defined]
        del u["units"]
    assert idle(record(values=older, platform=on_two)) is None
    assert idle(record(values=_blocks(0.5, 1.0))) is None
    assert (
        idle(record(values=_blocks(0.5, 1.0), platform={"cpu_affinity": "0,1"})) is None
    )
