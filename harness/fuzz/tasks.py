"""A campaign as tasks sharing one folder (``harness fuzz --tasks N``): N
processes, each a whole campaign (``harness fuzz --task I``) with workers
of its own, drawing from a seed of its own, on this machine (``--executor
local``) or as a Slurm job array (``--executor slurm --partition P``),
submitted and watched with submitit as ``harness run --executor slurm``
submits its units (``harness.bench.slurm``).

What the tasks share, and why it is safe with writers at once: the findings
file and the sightings file (``harness.fuzz.findings``: whole lines
appended under a lock; where two tasks keep the same finding, the reader
takes the smallest model), the Hypothesis example database (one file per
example, written to a scratch name and renamed: Hypothesis'
``DirectoryBasedExampleDatabase``; every task replays the others' failing
draws, which shrinks a finding further) and the model store (entries named
by their content, written whole by a rename: ``zoo.user_models.register``).
Each task draws its own part of the space: its own seed, the task's number
apart.  Each appends its tally to ``campaigns.jsonl`` when it ends; the
submitting process reads them back (``CampaignSchema``) and prints the
merged campaign: models per minute of all tasks together against each
one's, and the findings merged.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness.core import jsonl
from harness.core.validated import Count, Schema, checked
from workers.launch import PROJECT_ROOT
from zoo import files

CAMPAIGNS = "campaigns.jsonl"
STARTUP_S = 600.0  # a task's time beyond its budget: workers' start, the last check
POLL_S = 5.0


@dataclass(frozen=True)
class Ran:
    """One campaign's tally as ``campaigns.jsonl`` keeps it: the task it was
    (``-1``: a campaign on its own), its draw seed, models checked, seconds
    spent checking them, seconds from its start to its end (workers'
    start included), its new findings and its workers' restarts."""

    task: int
    draw_seed: int
    models: int
    checking_s: float
    elapsed_s: float
    new: list[str]
    restarts: int
    submitted: str  # the submission it belongs to ("": none)


class CampaignSchema(Schema):
    task: Annotated[int, Field(ge=-1, le=10_000)]
    draw_seed: Annotated[int, Field(ge=0, lt=2**32)]
    models: Count
    checking_s: Annotated[float, Field(ge=0)]
    elapsed_s: Annotated[float, Field(ge=0)]
    new: list[Annotated[str, Field(pattern=r"^[0-9a-f]{10}$")]]
    restarts: Count
    submitted: Annotated[str, Field(max_length=64)]


def record(folder: Path, ran: Ran) -> None:
    """Append one campaign's tally to the folder's ``campaigns.jsonl``."""
    files.folder(folder, follow=True)
    jsonl.append(folder / CAMPAIGNS, asdict(ran))


def read(folder: Path, submitted: str) -> list[Ran]:
    """The tallies of one submission's tasks (none when there is no file);
    lines of another shape are skipped and named."""
    try:
        lines, _ = checked(
            folder / CAMPAIGNS, CampaignSchema, ("a campaign", "campaigns")
        )
    except FileNotFoundError:
        return []
    return sorted(
        (Ran(**line) for line in lines if line["submitted"] == submitted),
        key=lambda ran: ran.task,
    )


def task_seed(submitted: str, task: int) -> int:
    """Task ``task``'s draw seed: the submission's, the task's number apart."""
    return (int(submitted, 16) + 1_000_003 * task) % 2**32


def run_tasks(
    folder: Path,
    budget_s: float,
    tasks: int,
    *,
    executor: str = "local",
    partition: str | None = None,
    say: Callable[[str], None] = print,
    command: list[str] | None = None,
) -> list[Ran]:
    """Submit ``tasks`` campaigns of ``budget_s`` seconds into ``folder``
    and wait for them (module docstring); their tallies.  A task that ended
    without its tally (a crash, a node lost) is named, not retried: what it
    found is in the shared files already.  ``command``: each task's command
    before its ``--budget`` and ``--task`` (a test's stand-in; default
    ``python -m harness fuzz --folder FOLDER``)."""
    import submitit
    from submitit.helpers import CommandFunction

    submitted = f"{time.time_ns() % 2**32:08x}"
    pool = submitit.AutoExecutor(
        folder=folder.absolute() / "tasks" / submitted / "%j",
        cluster="slurm" if executor == "slurm" else "local",
    )
    parameters: dict[str, Any] = {
        "name": f"harness-fuzz-{submitted}",
        "timeout_min": math.ceil((budget_s + STARTUP_S) / 60),
        "nodes": 1,
        "tasks_per_node": 1,
    }
    if executor == "slurm":
        parameters |= {"slurm_partition": partition, "slurm_array_parallelism": tasks}
    pool.update_parameters(**parameters)
    command = command or [
        *(sys.executable, "-m", "harness", "fuzz", "--folder", str(folder.absolute()))
    ]
    with pool.batch():
        jobs = [
            pool.submit(
                CommandFunction(
                    [
                        *command,
                        "--budget",
                        f"{budget_s:g}",
                        "--task",
                        f"{i}:{submitted}",
                    ],
                    cwd=str(PROJECT_ROOT),
                )
            )
            for i in range(tasks)
        ]
    say(
        f"fuzz: {tasks} tasks of {budget_s:g} s submitted ({executor}"
        f"{f', partition {partition}' if partition else ''}; job "
        f"{', '.join(sorted({str(j.job_id).split('_')[0] for j in jobs}))}), "
        f"sharing {folder}"
    )
    try:
        while not all(job.done() for job in jobs):
            time.sleep(POLL_S)
    finally:
        for job in jobs:
            if not job.done():  # Ctrl-C: leave nothing running behind
                job.cancel(check=False)
    for i, job in enumerate(jobs):
        exc = job.exception()
        if exc is not None:
            say(f"task {i} ended without its tally: {str(exc).strip()[-300:]}")
    return read(folder, submitted)
