"""``python -m harness run``: time every model on every path, here one unit
after another or as a Slurm job array (``--executor``)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from harness.cli.common import (
    Commands,
    executor_arguments,
    selection,
    selection_arguments,
)
from workers.paths import PATHS, integer


def add(commands: Commands) -> None:
    """The ``run`` command."""
    run_p = commands.add_parser("run", help="time every model on every path")
    selection_arguments(run_p)
    run_p.add_argument(
        "--resume",
        type=Path,
        default=None,
        help="a run-*.jsonl of an interrupted run: time only its missing cells "
        "and append to it",
    )
    run_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="time paths without a passing equivalence verdict too (their "
        "records and report rows are marked unverified)",
    )
    run_p.add_argument(
        "--inject-slowdown",
        action="append",
        default=[],
        metavar="PATH:FACTOR",
        help="make a native path's paired blocks slower by FACTOR (e.g. "
        "native-torch:1.05), to check that report --compare catches a known change",
    )
    run_p.add_argument(
        "--budget",
        type=duration,
        default=None,
        metavar="TIME",
        help="wall time for the whole run, the gate's included (600, 600s, 10m, "
        "1h): planned processes while they fit, then more where they narrow "
        "the answer most; default: the profile's budget_s",
    )
    _cluster_arguments(run_p)
    run_p.set_defaults(handler=run_command)


# The most a run's budget may be: the profile's bound on budget_s.
MOST_BUDGET_S = 7 * 86_400
UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def duration(text: str) -> float:
    """``--budget``'s seconds from ``600``, ``600s``, ``10m``, ``1.5h``;
    ArgumentTypeError, in one sentence, for anything else."""
    number = text.strip().rstrip("minsh")
    unit = text.strip()[len(number) :]
    try:
        seconds = float(number) * UNITS[unit]
    except (KeyError, ValueError):
        seconds = math.nan
    if not 0 < seconds <= MOST_BUDGET_S:
        raise argparse.ArgumentTypeError(
            f"--budget wants a time above 0 and at most 7 days, as 600, 600s, "
            f"10m or 1h; got {text[:40]!r}"
        )
    return seconds


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``run``'s choice of executor."""
    executor_arguments(
        parser,
        "here, one unit after another",
        "a job array through submitit, one exclusive node per unit",
    )
    parser.add_argument(
        "--max-parallel",
        type=integer,
        default=None,
        help="--executor slurm: at most this many units at once (default 4)",
    )


def run_command(args: argparse.Namespace) -> int:
    """The ``run`` command: 0 when every cell repeat is ok, 1 when any
    failed, diverged or was held back by the gate (the counts are printed)
    or when the gate found a float64 reference implementation wrong (the
    paths it judged were timed, and the closing lines say what was wrong),
    130 on Ctrl-C; how to resume when the run stopped early."""
    profile, models, paths, phases = selection(args)
    if args.budget is not None:
        profile = profile.model_copy(update={"budget_s": args.budget})
    from harness.bench.run import RunStoppedError, run, run_references
    from harness.core.gate import reference_line
    from harness.core.records import ACCEPTED, outcome, read

    executor = None
    if args.executor == "slurm":
        from harness.bench.slurm import Slurm

        if not args.partition:
            raise ValueError("--executor slurm needs --partition NAME")
        if args.max_parallel is not None and not 1 <= args.max_parallel <= 10_000:
            raise ValueError("--max-parallel must be an integer from 1 to 10000")
        executor = Slurm(args.partition, max_parallel=args.max_parallel or 4)
    elif args.partition is not None or args.max_parallel is not None:
        raise ValueError("--partition and --max-parallel go with --executor slurm")
    try:
        out = run(
            profile,
            models=models,
            paths=paths,
            phases=phases,
            results_dir=args.results,
            allow_unverified=args.allow_unverified,
            resume=args.resume,
            slowdown=_slowdowns(args.inject_slowdown),
            executor=executor,
        )
    except RunStoppedError as stop:
        print(f"{'' if stop.exit_code == 130 else 'error: '}{stop}", file=sys.stderr)
        print(_resume_hint(args, stop.out), file=sys.stderr)
        return stop.exit_code
    counts, line = outcome(read(out))
    print(f"records written to {out}")
    print(line)
    wrong = run_references(out, args.results)
    for model, sentence in wrong.items():
        print(reference_line(model, sentence))
    return 0 if set(counts) <= ACCEPTED and not wrong else 1


def _slowdowns(given: list[str]) -> dict[str, float]:
    """``--inject-slowdown native-torch:1.05`` -> ``{"native-torch": 1.05}``."""
    out = {}
    for item in given:
        path, _, factor = item.partition(":")
        try:
            value = float(factor)
        except ValueError:
            value = float("nan")
        if path not in PATHS or PATHS[path].api != "native" or not 1 <= value <= 10:
            raise ValueError(
                f"--inject-slowdown wants NATIVE_PATH:FACTOR with a factor from 1 "
                f"to 10, got {item[:80]!r}"
            )
        out[path] = value
    return out


def _resume_hint(args: argparse.Namespace, out: Path) -> str:
    """One line: how many records ``out`` keeps and the command that
    finishes the run (or that nothing was measured yet)."""
    from harness.core import records

    kept = len(records.read(out)) if out.is_file() else 0
    if not kept:
        return "no cell was measured yet; start the run again"
    options = [
        f"--{name} {value}"
        for name, value in (
            ("profile", args.profile),
            ("models", args.models),
            ("paths", args.paths),
            ("phases", args.phases),
            ("results", args.results),
            ("budget", args.budget),
        )
        if value is not None
    ]
    if args.allow_unverified:
        options.append("--allow-unverified")
    return (
        f"{kept} records kept in {out}; finish the run with: python -m harness "
        f"run --resume {out} " + " ".join(options)
    )
