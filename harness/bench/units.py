"""``python -m harness plan | run-cell | gate``: a run taken apart into its
numbered units (``harness.core.cells``), for a scheduler to run anywhere.

The three steps of a run on machines that ``harness run`` does not drive
itself (a Kubernetes Indexed Job, a scheduler of one's own):

1. ``gate``: the equivalence verdicts, checked once per environment and
   cached in the results folder;
2. ``plan``: the units, each with its seed and its paths' verdict keys;
3. ``run-cell PLAN INDEX``: one unit, in a fresh worker, its records appended
   to the run's records file in the (shared) results folder.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

from tabulate import tabulate

from harness.bench.run import WEIGHTS_SEED, RunStoppedError
from harness.bench.run import run_cell as run_unit
from harness.core.cells import new_plan, write_plan
from harness.core.gate import verdict_keys, verify
from harness.core.profiles import Profile


def plan(
    args: argparse.Namespace,
    profile: Profile,
    models: list[str],
    paths: list[str],
    phases: list[str],
) -> int:
    """Write the plan; print how many units it has (and each with ``--list``)."""
    keys = verdict_keys(models, paths, args.results, weights_seed=WEIGHTS_SEED)
    written = new_plan(
        time.strftime("%Y%m%d-%H%M%S"),
        profile,
        models=models,
        paths=paths,
        phases=phases,
        keys=keys,
        allow_unverified=args.allow_unverified,
    )
    write_plan(written, args.out)
    if args.list:
        print(
            tabulate(
                [
                    {
                        "unit": u.index,
                        "repeat": u.repeat,
                        "cell": u.name(),
                        "seed": u.seed,
                        "verdict keys": " ".join(
                            (k or "none")[:12] for k in u.verdict_keys.values()
                        ),
                    }
                    for u in written.units
                ],
                headers="keys",
            )
        )
    pairs = sum(1 for u in written.units if u.paired)
    by_model = Counter(u.model for u in written.units)
    print(
        f"plan {written.run_id}: {len(written.units)} units (units 0 to "
        f"{len(written.units) - 1}; {pairs} Keras/native pairs; "
        + ", ".join(f"{m} {n}" for m, n in by_model.items())
        + f"), profile {profile.name}, written to {args.out}"
    )
    print(
        f"run one with: python -m harness run-cell {args.out} INDEX --results "
        f"{args.results}"
    )
    return 0


def run_cell(plan_path: Path, index: int, results_dir: Path) -> int:
    """Run one unit: 0 once its records are written, whatever they say (a
    crashed worker is a measured outcome, not a failed task); 1 when they
    could not be written."""
    try:
        written = run_unit(plan_path, index, results_dir)
    except RunStoppedError as stop:
        print(f"error: {stop}", file=sys.stderr)
        return stop.exit_code
    for record in written:
        print(
            f"unit {index}: {record.model} {record.path} {record.phase} "
            f"b{record.batch_size} repeat {record.repeat + 1}: {record.status}"
            + (f" ({record.error})" if record.error else "")
        )
    return 0


def gate(
    args: argparse.Namespace,
    profile: Profile,
    models: list[str],
    paths: list[str],
    phases: list[str],
) -> int:
    """Check (or reuse) every verdict: 0 when every path may be timed."""
    verdicts = verify(models, paths, args.results, timeout=profile.timeout_s)
    rows = [{"model": m, **found} for m, found in verdicts.items()]
    print(tabulate(rows, headers="keys"))
    timeable = all(
        v in ("pass", "unavailable")
        for found in verdicts.values()
        for v in found.values()
    )
    return 0 if timeable else 1
