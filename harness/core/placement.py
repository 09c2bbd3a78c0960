"""Where a worker measures: its thread pools, its CPUs, and the orchestrator
kept off them while it measures.

The overhead of a high-level API is measured with one intra-op and one
inter-op thread (the shipped blueprints' ``[threads]``), the orchestrator,
its sampler thread and anything else it runs kept off the worker's CPU
(:func:`kept_off`).  At two intra-op threads on two shared vCPUs every small
operator is a parallel region whose threads must all be scheduled, so any
other process stalls it and the Keras/native ratio moves with the machine's
load (2.48 and 5.08 in two processes under load, issue 29); at one thread
plain scripts repeat to a fraction of a percent (docs/methodology.md, "One
thread per worker").  How a path scales with cores is a separate axis, the
``threads`` profile's sweep, reported apart and never pooled with this.

The worker's own CPU is the last this process may use (CPU 0 takes most of a
guest's interrupts); the orchestrator gets the rest.  What a framework runs
beside the computation (``helpers``): ``free`` (the default) starts the
worker on its own CPU, so that every thread pool sizes itself for one CPU
(XLA's sizes itself from the CPUs a process may use, whatever the thread
variables say), and once its frameworks are loaded the worker lets all its
threads use every CPU this process may (``workers.launch.release_helpers``),
so tf.data's pipeline and the inter-op or engine threads run beside the
computation as on a user's machine; ``confined`` keeps every thread of the
worker on its own CPU, where they take turns with the computation (and
Keras on TensorFlow waits 20-40 ms per ``predict`` call on a tf.data timer
that a second CPU never shows: docs/methodology.md, "Helper threads").  Where nothing is
left for the orchestrator (all cores asked for, or a one-CPU cgroup) the
two share, and the record says ``isolated: false``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.profiles import Profile
from workers.launch import RELEASE_VARIABLE, thread_environment


@dataclass(frozen=True)
class Placement:
    """One worker's threads and CPUs, and where the orchestrator waits."""

    threads: dict[str, Any]  # workers.launch.thread_environment's answer
    worker_cpus: tuple[int, ...] | None  # None: not pinned
    orchestrator_cpus: tuple[int, ...] | None  # None: shares the worker's
    # "free": the worker starts on worker_cpus (every thread pool sized for
    # them) and, once its frameworks are loaded, lets all its threads use
    # helper_cpus too; "confined": worker_cpus only, all along
    helpers: str = "confined"
    helper_cpus: tuple[int, ...] | None = None

    @property
    def env(self) -> dict[str, str]:
        env: dict[str, str] = dict(self.threads["env"])
        if self.helper_cpus is not None:
            env[RELEASE_VARIABLE] = ",".join(map(str, self.helper_cpus))
        return env

    def record(self) -> dict[str, Any]:
        """What records hold as ``platform["threads"]`` (and pool by)."""
        return {
            **self.threads,
            "worker_cpus": None if self.worker_cpus is None else list(self.worker_cpus),
            "isolated": self.orchestrator_cpus is not None,
            "helpers": self.helpers,
            "helper_cpus": (
                None if self.helper_cpus is None else list(self.helper_cpus)
            ),
        }


# The CPUs this process may use, pushed while kept_off has moved it off some.
_HOME: list[set[int]] = []


def usable() -> list[int]:
    """The CPUs this process may use, ascending (inside :func:`kept_off`,
    those it had before)."""
    if _HOME:
        return sorted(_HOME[0])
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def place(
    threads: dict[str, Any],
    *,
    pin_cpus: tuple[int, ...] | None = None,
    isolate: bool = True,
    count: int | None = None,
    helpers: str = "confined",
) -> Placement:
    """The placement of a worker with ``threads`` (a profile's
    ``[threads]``), or on a thread sweep ``count`` intra-op threads and one
    inter-op thread on ``count`` CPUs.  ``pin_cpus``: the profile's own CPUs
    for the worker.  ``isolate``: pin the worker to as many CPUs as it has
    intra-op threads and keep the orchestrator on the others.  ``helpers``
    ``free``: an isolated worker (not on a sweep, whose count is a number of
    CPUs, nor on the profile's own CPUs) starts on its own CPU and then
    lets its threads use every CPU, the orchestrator still kept off its own.

    Raises ValueError, in one sentence, when the worker would need more CPUs
    than this process may use."""
    cpus = usable()
    if count is not None:
        threads = {"intra_op": count, "inter_op": 1}
    if threads.get("intra_op", "auto") == "auto":  # all this process may use
        threads = {**threads, "intra_op": len(cpus)}
    resolved = thread_environment(threads)
    # A sweep's count is a number of CPUs: it takes them, whatever pin_cpus says.
    worker: tuple[int, ...] | None = pin_cpus if count is None else None
    if worker is None and (isolate or count is not None):
        need = int(resolved["intra_op"])
        if need > len(cpus):
            raise ValueError(
                f"{need} intra-op threads on CPUs of their own need {need} CPUs; "
                f"this process may use {len(cpus)}"
            )
        worker = tuple(cpus[len(cpus) - need :])
    rest = tuple(c for c in cpus if worker is None or c not in worker)
    keep_off = isolate and worker is not None and bool(rest)
    if helpers == "free" and keep_off and count is None and pin_cpus is None:
        return Placement(resolved, worker, rest, "free", tuple(cpus))
    return Placement(resolved, worker, rest if keep_off else None)


def of_profile(profile: Profile, count: int | None = None) -> Placement:
    """Where a worker of ``profile`` measures: its threads, CPUs and
    isolation, or on a thread sweep ``count`` threads on ``count`` CPUs."""
    return place(
        profile.threads,
        pin_cpus=profile.pin_cpus,
        isolate=profile.isolate,
        count=count,
        helpers=profile.helpers,
    )


@contextmanager
def kept_off(placement: Placement) -> Iterator[None]:
    """Every thread of this process (and every thread it starts meanwhile,
    the resource sampler's included) on ``placement.orchestrator_cpus``
    while the block runs; as before afterwards.  Nothing happens where the
    placement shares CPUs, or where this platform cannot pin."""
    target = placement.orchestrator_cpus
    if target is None or not hasattr(os, "sched_setaffinity"):
        yield
        return
    main = set(usable())
    before = {tid: _affinity(tid) or main for tid in _threads()}
    _HOME.append(main)
    for tid in _threads():
        _pin(tid, set(target))
    try:
        yield
    finally:
        for tid in _threads():
            _pin(tid, before.get(tid, main))
        _HOME.pop()


def _threads() -> list[int]:
    """This process' thread ids (Linux: /proc/self/task)."""
    try:
        return [int(task.name) for task in Path("/proc/self/task").iterdir()]
    except OSError:
        return [os.getpid()]


def _affinity(tid: int) -> set[int] | None:
    try:
        return os.sched_getaffinity(tid)
    except OSError:  # the thread ended meanwhile
        return None


def _pin(tid: int, cpus: set[int]) -> None:
    with suppress(OSError):  # the thread ended meanwhile
        os.sched_setaffinity(tid, cpus)
