"""``python -m harness run | report``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.paths import PATHS, PHASES, parse_list
from harness.profiles import PROFILES, get_profile
from zoo.specs import MODELS, VARIANTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness")
    commands = parser.add_subparsers(dest="command", required=True)
    run_p = commands.add_parser("run", help="time every model on every path")
    run_p.add_argument("--profile", default="default", help=f"one of {list(PROFILES)}")
    run_p.add_argument("--models", default=",".join(MODELS))
    run_p.add_argument("--paths", default="all")
    run_p.add_argument("--phases", default="all")
    run_p.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="folder for records (default: ./results)",
    )
    run_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="time paths without a passing equivalence verdict too (their "
        "records and report rows are marked unverified)",
    )
    floors_p = commands.add_parser(
        "floors", help="time each native path against its framework's idiomatic step"
    )
    floors_p.add_argument("--profile", default="default")
    floors_p.add_argument("--models", default=",".join(MODELS))
    floors_p.add_argument("--frameworks", default="all")
    floors_p.add_argument("--results", type=Path, default=Path("results"))
    rep_p = commands.add_parser("report", help="tables from a run's records")
    rep_p.add_argument(
        "records",
        type=Path,
        nargs="?",
        help="a run-*.jsonl file (default: the newest in --results)",
    )
    rep_p.add_argument("--results", type=Path, default=Path("results"))
    rep_p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    rep_p.add_argument(
        "--table",
        choices=("overhead", "cells"),
        default="overhead",
        help="which table csv and json print",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            from harness.run import run

            profile = get_profile(args.profile)
            models = parse_list(args.models, [*MODELS, *VARIANTS], "model")
            paths = parse_list(args.paths, list(PATHS), "path")
            phases = parse_list(args.phases, PHASES, "phase")
            out = run(
                profile,
                models=models,
                paths=paths,
                phases=phases,
                results_dir=args.results,
                allow_unverified=args.allow_unverified,
            )
            print(f"records written to {out}")
            return 0
        if args.command == "floors":
            from harness.floors import floors, native_frameworks, render

            out, rows = floors(
                get_profile(args.profile),
                models=parse_list(args.models, [*MODELS, *VARIANTS], "model"),
                frameworks=parse_list(
                    args.frameworks, native_frameworks(), "framework"
                ),
                results_dir=args.results,
            )
            print(render(rows))
            print(f"records written to {out}")
            return 0
        from harness.report import latest_run, report

        records_path = args.records or latest_run(args.results)
        print(report(records_path, args.format, args.table))
        return 0
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
