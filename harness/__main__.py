"""``python -m harness run | report``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from harness.core.profiles import PROFILES, Profile, get_profile
from workers.paths import MODE_PATHS, PATHS, PHASES, integer, parse_list
from zoo.specs import MODELS, VARIANTS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness")
    commands = parser.add_subparsers(dest="command", required=True)
    run_p = commands.add_parser("run", help="time every model on every path")
    _selection_arguments(run_p)
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
    _cluster_arguments(run_p)
    _unit_parsers(commands)
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
    exp_p = commands.add_parser(
        "explain",
        help="take Keras' overhead apart: levels, fixed and per-sample cost, "
        "kernel and framework time",
    )
    exp_p.add_argument("--profile", default="default")
    exp_p.add_argument("--models", default="ffn", help="default: ffn")
    exp_p.add_argument(
        "--frameworks", default="all", help="default: jax,tensorflow,torch"
    )
    exp_p.add_argument("--phases", default="all", help="default: train,infer")
    exp_p.add_argument(
        "--batch-sizes",
        default=None,
        help="the sweep, e.g. 1,4,16,64 (default: the model's batch size in the "
        "profile and three smaller by factors of 4)",
    )
    exp_p.add_argument(
        "--processes",
        type=integer,
        default=3,
        help="worker processes per cell, each timing every batch size (default 3)",
    )
    exp_p.add_argument("--results", type=Path, default=Path("results"))
    exp_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="measure levels without a passing equivalence verdict too (marked)",
    )
    exp_p.add_argument(
        "--render",
        type=Path,
        metavar="DIR",
        help="only analyse an explain-* folder again (its explain.jsonl)",
    )
    ops_p = commands.add_parser(
        "ops",
        help="time every operator of the models through keras.ops and each "
        "framework's own operators, each checked against float64 first",
    )
    ops_p.add_argument(
        "--profile", default="default", help="smoke, default (the default) or large"
    )
    ops_p.add_argument(
        "--operators", default="all", help="e.g. matmul,relu (default: all)"
    )
    ops_p.add_argument(
        "--frameworks", default="all", help="default: jax,tensorflow,torch,mxnet"
    )
    ops_p.add_argument("--results", type=Path, default=Path("results"))
    ops_p.add_argument(
        "--fault",
        default=None,
        help="inject a deliberate operator fault into the native paths, to see "
        "the checks catch it (gemm-transposed, conv-padding, inputs-bfloat16)",
    )
    ops_p.add_argument(
        "--render",
        type=Path,
        metavar="DIR",
        help="only analyse an ops-* folder again",
    )
    self_p = commands.add_parser(
        "selfcheck",
        help="the harness' timer overhead and its agreement with each "
        "framework's reference timer",
    )
    self_p.add_argument("--results", type=Path, default=Path("results"))
    rep_p = commands.add_parser("report", help="tables from a run's records")
    rep_p.add_argument(
        "records",
        type=Path,
        nargs="?",
        help="a run-*.jsonl file (default: the newest in --results)",
    )
    rep_p.add_argument("--results", type=Path, default=Path("results"))
    rep_p.add_argument(
        "--format",
        choices=("table", "markdown", "csv", "json"),
        default="table",
        help="markdown renders the tables for GitHub",
    )
    rep_p.add_argument(
        "--table",
        choices=("overhead", "cells", "machines"),
        default="overhead",
        help="which table csv and json print",
    )
    rep_p.add_argument(
        "--compare",
        nargs=2,
        type=Path,
        metavar=("OLD", "NEW"),
        help="test every cell timed in both records files for a change",
    )
    rep_p.add_argument(
        "--machines",
        nargs="+",
        type=Path,
        metavar="RESULTS",
        help="records files or results folders (each one's newest run) of at "
        "least two machines, shown side by side",
    )
    rep_p.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        help="write the run's plots (PNG) and its tables as Markdown "
        "(report.md) into DIR and print their file names",
    )
    rep_p.add_argument(
        "--check",
        action="store_true",
        help="then exit 1 unless every cell repeat of the run is ok (how many "
        "failed, diverged or were not timed is printed)",
    )
    return parser


def _cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``run``'s choice of executor."""
    parser.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help="local (default): here, one unit after another; slurm: a job "
        "array through submitit, one exclusive node per unit",
    )
    parser.add_argument(
        "--partition", default=None, help="--executor slurm: the Slurm partition"
    )
    parser.add_argument(
        "--max-parallel",
        type=integer,
        default=None,
        help="--executor slurm: at most this many units at once (default 4)",
    )


def _unit_parsers(commands: Any) -> None:
    """``plan``, ``run-cell`` and ``gate``: a run taken apart into units."""
    plan_p = commands.add_parser(
        "plan", help="write the numbered units of a run (what run-cell runs)"
    )
    _selection_arguments(plan_p)
    plan_p.add_argument("--out", type=Path, required=True, help="the plan (JSON)")
    plan_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="its units time paths without a passing verdict too",
    )
    plan_p.add_argument(
        "--list", action="store_true", help="print every unit, one a line"
    )
    cell_p = commands.add_parser(
        "run-cell",
        help="run one unit of a plan in a fresh worker and append its records",
    )
    cell_p.add_argument("plan", type=Path, help="a plan written by harness plan")
    cell_p.add_argument("index", type=integer, help="the unit's number")
    cell_p.add_argument("--results", type=Path, default=Path("results"))
    gate_p = commands.add_parser(
        "gate", help="the equivalence gate alone: check (or reuse) every verdict"
    )
    _selection_arguments(gate_p)


def _selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        default="default",
        help=f"one of {list(PROFILES)}, or a blueprint .toml file",
    )
    parser.add_argument("--models", default=None, help="default: the profile's")
    parser.add_argument("--paths", default=None, help="default: the profile's")
    parser.add_argument("--phases", default=None, help="default: the profile's")
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="the results folder (default: ./results)",
    )


def _selection(
    args: argparse.Namespace,
) -> tuple[Profile, list[str], list[str], list[str]]:
    """The profile and the models, paths and phases the options select."""
    profile = get_profile(args.profile)
    # An option given empty is an empty selection (refused), not the default.
    models = parse_list(
        ",".join(profile.models) if args.models is None else args.models,
        [*MODELS, *VARIANTS],
        "model",
    )
    paths = parse_list(
        ",".join(profile.paths) if args.paths is None else args.paths,
        [*PATHS, *MODE_PATHS],
        "path",
    )
    phases = parse_list(
        ",".join(profile.phases) if args.phases is None else args.phases,
        PHASES,
        "phase",
    )
    return profile, models, paths, phases


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error the user can fix is one line on stderr."""
    args = _parser().parse_args(argv)
    try:
        return _command(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a folder made read-only meanwhile
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _command(args: argparse.Namespace) -> int:
    """The chosen command; its exit status."""
    commands = {
        "run": lambda: _run(args, *_selection(args)),
        "plan": lambda: _units(args),
        "run-cell": lambda: _units(args),
        "gate": lambda: _units(args),
        "floors": lambda: _floors(args),
        "explain": lambda: _explain(args),
        "ops": lambda: _ops(args),
        "selfcheck": lambda: _selfcheck(args),
    }
    return commands.get(args.command, lambda: _report(args))()


def _units(args: argparse.Namespace) -> int:
    """``plan``, ``run-cell`` and ``gate`` (``harness.bench.units``)."""
    from harness.bench.units import gate, plan, run_cell

    if args.command == "run-cell":
        return run_cell(args.plan, args.index, args.results)
    command = {"plan": plan, "gate": gate}[args.command]
    return command(args, *_selection(args))


def _floors(args: argparse.Namespace) -> int:
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


def _selfcheck(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from harness.bench.selfcheck import selfcheck

    rows = selfcheck(args.results)
    print(tabulate(rows, headers="keys"))
    return 0 if rows and all(r["verdict"] == "ok" for r in rows) else 1


def _run(
    args: argparse.Namespace,
    profile: Profile,
    models: list[str],
    paths: list[str],
    phases: list[str],
) -> int:
    """The ``run`` command: 0 when every cell repeat is ok, 1 when any
    failed, diverged or was held back by the gate (the counts are printed),
    130 on Ctrl-C; how to resume when the run stopped early."""
    from harness.bench.run import RunStoppedError, run
    from harness.core.records import outcome, read

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
    return 0 if set(counts) <= {"ok"} else 1


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
        )
        if value is not None
    ]
    if args.allow_unverified:
        options.append("--allow-unverified")
    return (
        f"{kept} records kept in {out}; finish the run with: python -m harness "
        f"run --resume {out} " + " ".join(options)
    )


def _explain(args: argparse.Namespace) -> int:
    """The ``explain`` command; raises ValueError for anything the user can fix."""
    from harness.explain.measure import FRAMEWORKS, PROCESSES, explain, render

    if args.render is not None:
        if not (args.render / "explain.jsonl").is_file():
            raise ValueError(f"{args.render} holds no explain.jsonl of an explain run")
        render(args.render)
        print((args.render / "explain.md").read_text())
        return 0
    if not 1 <= args.processes <= 100:
        raise ValueError("--processes must be an integer from 1 to 100")
    sizes = None
    if args.batch_sizes is not None:
        sizes = [_batch(t) for t in args.batch_sizes.split(",")]
        if len(set(sizes)) != len(sizes):
            raise ValueError("--batch-sizes names a batch size twice")
    out = explain(
        get_profile(args.profile),
        models=parse_list(args.models, [*MODELS, *VARIANTS], "model"),
        frameworks=parse_list(args.frameworks, FRAMEWORKS, "framework"),
        phases=parse_list(args.phases, PHASES, "phase"),
        results_dir=args.results,
        batch_sizes=sizes,
        processes=args.processes or PROCESSES,
        allow_unverified=args.allow_unverified,
    )
    print((out / "explain.md").read_text())
    print(f"written to {out}")
    return 0


def _ops(args: argparse.Namespace) -> int:
    """The ``ops`` command: 0 when every search and timed check agreed with
    float64, 1 otherwise (a deliberate fault should give 1); raises
    ValueError for anything the user can fix."""
    from harness.ops.measure import FRAMEWORKS, get_ops_profile, ops
    from harness.ops.report import render
    from zoo.operators import OPERATORS

    if args.render is not None:
        if not (args.render / "gate.jsonl").is_file():
            raise ValueError(f"{args.render} holds no gate.jsonl of an ops run")
        analysis = render(args.render)
        print((args.render / "ops.md").read_text())
    else:
        profile = get_profile("default")
        out = ops(
            get_ops_profile(args.profile),
            frameworks=parse_list(args.frameworks, FRAMEWORKS, "framework"),
            operators=parse_list(args.operators, list(OPERATORS), "operator"),
            results_dir=args.results,
            threads=dict(profile.threads),
            fault=args.fault,
        )
        analysis = json.loads((out / "ops.json").read_text())  # ops() rendered it
        print((out / "ops.md").read_text())
        print(f"written to {out}")
    agreed = all(v["ok"] for v in analysis["verdicts"]) and not any(
        r["status"] == "not-timed" for r in analysis["rows"]
    )
    return 0 if agreed else 1


def _batch(text: str) -> int:
    """One batch size of ``--batch-sizes``: an integer from 1 to 65536."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65_536:
        raise ValueError(
            f"--batch-sizes takes integers from 1 to 65536, not {text[:80]!r}"
        )
    return value


def _explained(results: Path) -> None:
    """The ``harness explain`` section: each cell from the newest run that
    measured it, when there is one."""
    from harness.explain.measure import markdown, newest_cells

    found = newest_cells(results)
    if found:
        print()
        print(markdown([cell for _, cell in found]))
        runs = sorted({str(run) for run, _ in found})
        print(f"(from {', '.join(runs)}; plots: explain-*.png there)")


def _operators(results: Path) -> None:
    """The ``harness ops`` section: the newest ops run's headline figures,
    when there is one."""
    from harness.ops.report import analyse, latest, markdown

    found = latest(results)
    if found is not None:
        # the analysis the run wrote (its bootstrap takes a minute), else anew
        rendered = found / "ops.json"
        analysis = (
            json.loads(rendered.read_text()) if rendered.exists() else analyse(found)
        )
        print()
        print(markdown(analysis, every_operator=False))
        print(f"(every operator's table and plots: {found}/ops.md, ops-*.png)")


def _report(args: argparse.Namespace) -> int:
    """The ``report`` command: tables, a comparison of two runs or of several
    machines, or plots.

    Raises ValueError or FileNotFoundError for anything the user can fix."""
    from harness.core.records import outcome
    from harness.report.tables import (
        compare_report,
        latest_run,
        load,
        machines_report,
        plots_by_machine,
        render_report,
        report,
    )

    if args.machines:
        if args.records or args.compare or args.plots or args.check:
            raise ValueError(
                "--machines takes its result sets alone; drop the records file, "
                "--compare, --plots and --check"
            )
        print(machines_report(args.machines, args.format, args.table))
        return 0
    if args.compare:
        if args.records or args.plots or args.check:
            raise ValueError(
                "--compare OLD NEW takes its two files alone; drop the records "
                "file, --plots and --check"
            )
        old, new = args.compare
        print(compare_report(old, new, args.format))
        return 0
    records_path = args.records or latest_run(args.results)
    if args.plots:
        if args.plots.exists() and not args.plots.is_dir():
            raise ValueError(f"--plots {args.plots} is a file; give a folder")

        recs = load(records_path)
        try:
            written = plots_by_machine(recs, args.plots)
        except ImportError:
            raise ValueError(
                "plots need matplotlib, which is not installed; install the "
                "harness extra (pip install -e '.[harness]')"
            ) from None
        markdown = args.plots / "report.md"
        markdown.write_text(
            render_report(records_path, recs, "markdown", args.table) + "\n"
        )
        print("\n".join(str(p) for p in [markdown, *written]))
    else:
        print(report(records_path, args.format, args.table))
        if args.format in ("table", "markdown"):
            _explained(args.results)
            _operators(args.results)
    if args.check:
        counts, line = outcome(load(records_path))
        print(line, file=sys.stderr)
        return 0 if set(counts) <= {"ok"} else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
