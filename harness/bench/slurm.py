"""``harness run --executor slurm``: a plan's units as a Slurm job array,
submitted and watched with submitit.

Each array task runs ``python -m harness run-cell PLAN INDEX --results DIR``
(``harness.cli.units``) on a node of its own (``--exclusive``: a timing owns
the whole machine while it runs), at most ``max_parallel`` at once, and
appends its records to the run's records file in ``DIR``, which must be on a
file system every node shares (appends are locked, ``records.append``).  The
gate has run before (``harness.bench.run``), once for each environment, on the
submitting machine; each task checks that its node computes the same verdict
keys (``harness.core.cells``), so a node with other code or libraries times
nothing.

A task that ends without its result (the node failed, it was pre-empted or
killed, it ran out of time: submitit's ``UncompletedJobError``) is an
infrastructure failure and is submitted again, up to ``attempts`` times.  A
task whose ``run-cell`` failed (it exited non-zero: its records could not be
written, or a bug) is not: resubmitting would fail the same way.  Each cell of
a unit that failed for good gets an ``error`` record saying why, so the run's
outcome counts it.

submitit's own folder (the task scripts, logs and pickles) is
``<results>/slurm/<run id>``.  ``cluster="local"`` runs the same tasks as
local processes through submitit's local executor, for tests on machines
without Slurm.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tabulate import tabulate

from harness.core import records
from harness.core.cells import Plan, Unit
from workers.launch import PROJECT_ROOT

if TYPE_CHECKING:
    from harness.bench.run import RunContext

POLL_S = 3.0  # seconds between looks at the array's states
STARTUP_S = 600.0  # a task's time beyond its calls' timeouts (start-up, gate keys)


@dataclass
class Slurm:
    """Runs units as a job array on ``partition``."""

    partition: str
    max_parallel: int = 4
    attempts: int = 3  # submissions of one unit, infrastructure failures included
    cluster: str = "slurm"
    jobs: list[dict[str, Any]] = field(default_factory=list)  # what ran where

    def execute(self, plan: Plan, units: list[Unit], context: RunContext) -> None:
        if not units:
            return
        import submitit
        from tqdm import tqdm

        executor = submitit.AutoExecutor(
            folder=context.results_dir.absolute() / "slurm" / plan.run_id / "%j",
            cluster=self.cluster,
        )
        timeout_s = plan.get_profile().timeout_s
        executor.update_parameters(
            name=f"harness-{plan.run_id}",
            timeout_min=math.ceil((2 * timeout_s + STARTUP_S) / 60),
            nodes=1,
            tasks_per_node=1,
            slurm_partition=self.partition,
            slurm_array_parallelism=self.max_parallel,
            slurm_additional_parameters={"exclusive": True},
        )
        tries = dict.fromkeys((u.index for u in units), 0)
        submitted = len(self.jobs)
        pending: list[Unit] = list(units)
        running: dict[Any, Unit] = {}
        bar = tqdm(total=len(units), unit="unit", desc="slurm", file=sys.stderr)
        try:
            while pending or running:
                if pending:
                    running |= self._submit(executor, pending, context)
                    for unit in pending:
                        tries[unit.index] += 1
                    pending = []
                time.sleep(POLL_S)
                if self.cluster == "slurm":
                    self._refresh(running)
                for job in [j for j in running if j.done()]:
                    unit = running.pop(job)
                    if self._ended(job, unit, tries[unit.index], plan, context):
                        bar.update(1)
                    else:
                        pending.append(unit)
                bar.set_postfix_str(self._states(running))
        finally:
            bar.close()
            for job in running:  # Ctrl-C: leave nothing queued behind
                job.cancel(check=False)
        self._print(submitted)

    def _submit(
        self, executor: Any, units: list[Unit], context: RunContext
    ) -> dict[Any, Unit]:
        """One job array of ``units``; prints its job id."""
        from submitit.helpers import CommandFunction

        plan = str(context.plan_path.absolute())
        results = str(context.results_dir.absolute())
        with executor.batch():
            jobs = [
                executor.submit(
                    CommandFunction(
                        [
                            sys.executable,
                            "-m",
                            "harness",
                            "run-cell",
                            plan,
                            str(unit.index),
                            "--results",
                            results,
                        ],
                        cwd=str(PROJECT_ROOT),
                    )
                )
                for unit in units
            ]
        ids = sorted({str(j.job_id).split("_")[0] for j in jobs})
        print(
            f"submitted {len(jobs)} units as job {', '.join(ids)} (partition "
            f"{self.partition}, one exclusive node each, at most "
            f"{self.max_parallel} at once)",
            file=sys.stderr,
        )
        return dict(zip(jobs, units, strict=True))

    def _print(self, first: int) -> None:
        """The table of this array's tasks, with the states Slurm holds for
        them now (a task is booked when its result appears, often before
        ``sacct`` has seen it end)."""
        booked = self.jobs[first:]
        if self.cluster == "slurm" and booked:
            self._refresh(entry["_job"] for entry in booked)
        rows = [
            {k: v for k, v in entry.items() if k != "_job"}
            | {"state": entry["_job"].state}
            for entry in booked
        ]
        print(tabulate(rows, headers="keys"), file=sys.stderr)

    @staticmethod
    def _refresh(jobs: Iterable[Any]) -> None:
        """One ``sacct`` call for every job (submitit's watcher is shared;
        left to itself it asks less and less often, up to every 10 min)."""
        for job in jobs:
            watcher = getattr(job, "watcher", None)
            if watcher is not None and hasattr(watcher, "update"):
                watcher.update()
            return

    @staticmethod
    def _states(running: dict[Any, Unit]) -> str:
        counts: dict[str, int] = {}
        for job in running:
            counts[job.state] = counts.get(job.state, 0) + 1
        return ", ".join(f"{n} {state.lower()}" for state, n in sorted(counts.items()))

    def _ended(
        self, job: Any, unit: Unit, tries: int, plan: Plan, context: RunContext
    ) -> bool:
        """Book a finished task; False when it is to be submitted again."""
        from submitit.core.utils import UncompletedJobError

        failure = job.exception()
        state = job.state
        infrastructure = isinstance(failure, UncompletedJobError)
        again = infrastructure and tries < self.attempts
        self.jobs.append(
            {
                "job": job.job_id,
                "unit": unit.index,
                "cell": unit.name(),
                "repeat": unit.repeat + 1,
                "state": state,
                "attempt": tries,
                "then": "resubmitted" if again else "",
                "_job": job,
            }
        )
        if again:
            print(
                f"unit {unit.index}: job {job.job_id} ended {state} without a "
                "result (an infrastructure failure); submitting it again",
                file=sys.stderr,
            )
            return False
        if failure is not None:
            reason = str(failure).strip().splitlines()
            why = (
                f"Slurm job {job.job_id} ended {state}"
                + (f" (infrastructure, {tries} attempts)" if infrastructure else "")
                + (f": {reason[-1][:300]}" if reason else "")
            )
            print(f"unit {unit.index}: {why}", file=sys.stderr)
            failed_unit(plan, unit, why, context.out)
        return True


def failed_unit(plan: Plan, unit: Unit, error: str, out: Path) -> None:
    """An ``error`` record for every cell of ``unit``, which never ran to
    the end: the run's outcome then counts it instead of missing it."""
    profile = plan.get_profile()
    for cell in unit.cells():
        records.append(
            out,
            records.make(
                plan.run_id,
                profile.name,
                profile_digest=profile.digest(),
                model=cell.model,
                path=cell.path,
                phase=cell.phase,
                status="error",
                batch_size=cell.batch_size,
                equivalence="unknown",
                repeat=unit.repeat,
                settings={} if cell.threads is None else {"threads": cell.threads},
                error=error,
            ),
        )
