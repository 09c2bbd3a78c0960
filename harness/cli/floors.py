"""``python -m harness floors``: each native path against its framework's
idiomatic step (``harness.bench.floors``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands
from harness.core.profiles import get_profile
from workers.paths import integer, parse_list
from zoo.specs import MODELS, VARIANTS


def add(commands: Commands) -> None:
    """The ``floors`` command."""
    floors_p = commands.add_parser(
        "floors", help="time each native path against its framework's idiomatic step"
    )
    floors_p.add_argument("--profile", default="default")
    floors_p.add_argument("--models", default=",".join(MODELS))
    floors_p.add_argument("--frameworks", default="all")
    floors_p.add_argument("--results", type=Path, default=Path("results"))
    floors_p.add_argument(
        "--runs",
        type=integer,
        default=5,
        help="timed runs of each step, interleaved in one process (default 5)",
    )
    floors_p.set_defaults(handler=floors_command)


def floors_command(args: argparse.Namespace) -> int:
    """The ``floors`` command: the table and where its records went."""
    from harness.bench.floors import floors, native_frameworks, render

    if not 1 <= args.runs <= 1000:
        raise ValueError("--runs must be an integer from 1 to 1000")
    out, rows = floors(
        get_profile(args.profile),
        models=parse_list(args.models, [*MODELS, *VARIANTS], "model"),
        frameworks=parse_list(args.frameworks, native_frameworks(), "framework"),
        results_dir=args.results,
        runs=args.runs,
    )
    print(render(rows))
    print(f"records written to {out}")
    return 0
