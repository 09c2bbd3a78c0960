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

from harness.cli.common import Commands, selection, selection_arguments
from workers.paths import integer


def add(commands: Commands) -> None:
    """``plan``, ``run-cell`` and ``gate``: a run taken apart into units."""
    plan_p = commands.add_parser(
        "plan", help="write the numbered units of a run (what run-cell runs)"
    )
    selection_arguments(plan_p)
    plan_p.add_argument("--out", type=Path, required=True, help="the plan (JSON)")
    plan_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="its units time paths without a passing verdict too",
    )
    plan_p.add_argument(
        "--list", action="store_true", help="print every unit, one a line"
    )
    plan_p.set_defaults(handler=plan_command)
    cell_p = commands.add_parser(
        "run-cell",
        help="run one unit of a plan in a fresh worker and append its records",
    )
    cell_p.add_argument("plan", type=Path, help="a plan written by harness plan")
    cell_p.add_argument("index", type=integer, help="the unit's number")
    cell_p.add_argument("--results", type=Path, default=Path("results"))
    cell_p.set_defaults(handler=run_cell_command)
    gate_p = commands.add_parser(
        "gate", help="the equivalence gate alone: check (or reuse) every verdict"
    )
    selection_arguments(gate_p)
    gate_p.set_defaults(handler=gate_command)


def plan_command(args: argparse.Namespace) -> int:
    """Write the plan; print how many units it has (and each with ``--list``)."""
    from tabulate import tabulate

    from harness.core.cells import new_plan, write_plan
    from harness.core.gate import verdict_keys
    from harness.core.seeds import WEIGHTS_SEED

    profile, models, paths, phases = selection(args)
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


def run_cell_command(args: argparse.Namespace) -> int:
    """Run one unit: 0 once its records are written, whatever they say (a
    crashed worker is a measured outcome, not a failed task); 1 when they
    could not be written."""
    from harness.bench.run import RunStoppedError
    from harness.bench.run import run_cell as run_unit

    index = args.index
    try:
        written = run_unit(args.plan, index, args.results)
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


def gate_command(args: argparse.Namespace) -> int:
    """Check (or reuse) every verdict: 0 when every path may be timed and
    no float64 reference implementation was found wrong (each named)."""
    from tabulate import tabulate

    from harness.core.gate import reference_line, verify, wrong_references

    profile, models, paths, _ = selection(args)
    keys: dict[str, dict[str, str]] = {}
    verdicts = verify(
        models, paths, args.results, timeout=profile.timeout_s, keys_out=keys
    )
    rows = [{"model": m, **found} for m, found in verdicts.items()]
    print(tabulate(rows, headers="keys"))
    timeable = all(
        v in ("pass", "unavailable")
        for found in verdicts.values()
        for v in found.values()
    )
    wrong = wrong_references(args.results, {m: k.values() for m, k in keys.items()})
    for model, sentence in wrong.items():
        print(reference_line(model, sentence))
    return 0 if timeable and not wrong else 1
