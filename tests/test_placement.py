"""Where a worker measures (``harness.core.placement``): one thread on a CPU
of its own, the orchestrator on the others."""

from __future__ import annotations

import os
import threading

import pytest

from harness.core import placement
from harness.core.placement import kept_off, place
from workers.launch import RELEASE_VARIABLE

needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs two CPUs this process may use",
)


@pytest.fixture
def four_cpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement, "usable", lambda: [0, 1, 2, 3])


def test_one_thread_gets_the_last_cpu_and_the_orchestrator_the_rest(
    four_cpus: None,
) -> None:
    where = place({"intra_op": 1, "inter_op": 1})
    assert where.worker_cpus == (3,)
    assert where.orchestrator_cpus == (0, 1, 2)
    assert where.env["OMP_NUM_THREADS"] == "1"
    assert where.record()["isolated"] is True
    assert where.record()["worker_cpus"] == [3]


def test_all_cores_share_with_the_orchestrator(four_cpus: None) -> None:
    where = place({"intra_op": "auto", "inter_op": "auto"})
    assert where.worker_cpus == (0, 1, 2, 3)
    assert where.orchestrator_cpus is None
    assert where.record()["isolated"] is False


def test_a_sweep_count_is_that_many_cpus(four_cpus: None) -> None:
    where = place({"intra_op": 1}, count=2)
    assert where.worker_cpus == (2, 3)
    assert where.orchestrator_cpus == (0, 1)
    assert where.threads["intra_op"] == 2


def test_pinned_cpus_and_no_isolation(four_cpus: None) -> None:
    assert place({"intra_op": 1}, pin_cpus=(1,)).orchestrator_cpus == (0, 2, 3)
    # a sweep's count takes its own CPUs, whatever the profile pins
    assert place({"intra_op": 1}, pin_cpus=(1,), count=2).worker_cpus == (2, 3)
    unpinned = place({"intra_op": 1}, isolate=False)
    assert (unpinned.worker_cpus, unpinned.orchestrator_cpus) == (None, None)


def test_more_threads_than_cpus_is_refused_in_one_sentence(four_cpus: None) -> None:
    with pytest.raises(ValueError, match="need 8 CPUs; this process may use 4"):
        place({"intra_op": 8})


@needs_two_cpus
def test_kept_off_moves_every_thread_and_puts_them_back() -> None:
    home = os.sched_getaffinity(0)
    where = place({"intra_op": 1, "inter_op": 1})
    assert where.worker_cpus is not None
    assert where.orchestrator_cpus is not None
    seen: dict[str, set[int]] = {}
    waiting = threading.Event()
    old = threading.Thread(target=waiting.wait)
    old.start()
    try:
        with kept_off(where):
            seen["main"] = os.sched_getaffinity(0)
            seen["old"] = os.sched_getaffinity(old.native_id or 0)
            new = threading.Thread(
                target=lambda: seen.setdefault("new", os.sched_getaffinity(0))
            )
            new.start()
            new.join()
            # a placement asked for inside sees the CPUs the process had
            assert place({"intra_op": 1}).worker_cpus == where.worker_cpus
        after = os.sched_getaffinity(0)
    finally:
        waiting.set()
        old.join()
    off = set(where.orchestrator_cpus)
    assert seen == {"main": off, "old": off, "new": off}
    assert not off & set(where.worker_cpus)
    assert after == home


# --- helper threads: free (released to every CPU) or confined ------------------


def test_free_helpers_start_on_one_cpu_and_are_released_to_every_cpu(
    four_cpus: None,
) -> None:
    where = place({"intra_op": 1, "inter_op": 1}, helpers="free")
    assert where.worker_cpus == (3,)  # where its pools are sized
    assert where.helper_cpus == (0, 1, 2, 3)  # where its threads may run then
    assert where.env[RELEASE_VARIABLE] == "0,1,2,3"
    assert where.orchestrator_cpus == (0, 1, 2)  # off CPU 3, the computation's
    assert where.record()["helpers"] == "free"
    assert where.record()["helper_cpus"] == [0, 1, 2, 3]
    assert where.record()["isolated"] is True


def test_confined_helpers_share_the_workers_cpu(four_cpus: None) -> None:
    where = place({"intra_op": 1, "inter_op": 1}, helpers="confined")
    assert where.worker_cpus == (3,)
    assert where.helper_cpus is None
    assert RELEASE_VARIABLE not in where.env
    assert where.record()["helpers"] == "confined"


def test_a_sweep_or_named_cpus_stay_confined(four_cpus: None) -> None:
    swept = place({"intra_op": 1}, count=2, helpers="free")
    assert (swept.worker_cpus, swept.helpers) == ((2, 3), "confined")
    named = place({"intra_op": 1}, pin_cpus=(1,), helpers="free")
    assert (named.worker_cpus, named.helpers) == ((1,), "confined")
    unpinned = place({"intra_op": 1}, isolate=False, helpers="free")
    assert (unpinned.worker_cpus, unpinned.helpers) == (None, "confined")
