"""``python -m harness report``: tables from a run's records, a comparison
of two runs or of several machines, or plots (``harness.report``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.common import Commands


def add(commands: Commands) -> None:
    """The ``report`` command."""
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
        "--versions",
        type=Path,
        nargs="?",
        const=Path("results") / "versions",
        metavar="DIR",
        help="the overhead per library release, from what 'harness versions' "
        "wrote in DIR (default: results/versions); with --plots, versions.png",
    )
    rep_p.add_argument(
        "--converge",
        type=Path,
        nargs="?",
        const=Path("results") / "converge",
        metavar="DIR",
        help="time to accuracy per path, from the newest records 'harness "
        "converge' wrote in DIR (or that file; default: results/converge); "
        "with --plots, converge.png",
    )
    rep_p.add_argument(
        "--plots",
        type=Path,
        metavar="DIR",
        help="write the run's plots (PNG), its report as Markdown (report.md, "
        "the plots inline) and as one self-contained HTML file (report.html) "
        "into DIR and print their file names",
    )
    rep_p.add_argument(
        "--check",
        action="store_true",
        help="then exit 1 unless every cell repeat of the run is ok (how many "
        "failed, diverged or were not timed is printed) and the gate found no "
        "float64 reference implementation wrong",
    )
    rep_p.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    """The ``report`` command: tables, a comparison of two runs or of several
    machines, or plots.  A results folder given for the records file is read
    as ``--results FOLDER`` (its newest run).

    Raises ValueError or FileNotFoundError for anything the user can fix."""
    from harness.core.records import ACCEPTED, outcome
    from harness.report import html
    from harness.report.tables import (
        latest_run,
        load,
        machines_report,
        plots_by_machine,
        render_report,
        report,
    )
    from zoo import files

    if args.machines:
        if args.records or args.compare or args.plots or args.check:
            raise ValueError(
                "--machines takes its result sets alone; drop the records file, "
                "--compare, --plots and --check"
            )
        print(machines_report(args.machines, args.format, args.table))
        return 0
    for chosen, handler in (
        (args.compare, _compare),
        (args.versions, _versions),
        (args.converge, _converge),
    ):
        if chosen:
            return handler(args)
    results: Path = args.results
    records_path: Path | None = args.records
    if records_path is not None and records_path.is_dir():
        results, records_path = records_path, None
    elif records_path is not None and not records_path.exists():
        raise FileNotFoundError(
            f"{records_path} does not exist; give a records file (run-*.jsonl) "
            "or a results folder"
        )
    records_path = records_path or latest_run(results)
    # what the gate found wrong with a float64 reference, said whichever form
    # the report takes (--check fails on it)
    sound = _references(records_path)
    _trainings(records_path)
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
        inline = [p.relative_to(args.plots).as_posix() for p in written]
        files.write_text(
            markdown,
            render_report(records_path, recs, "markdown", args.table, inline) + "\n",
        )
        page = html.write(markdown)
        print("\n".join(str(p) for p in [markdown, page, *written]))
    else:
        print(report(records_path, args.format, args.table))
        if args.format in ("table", "markdown"):
            _explained(results)
            _counted(results)
            _operators(results)
            _agreement(results, records_path, args.format)
    if args.check:
        counts, line = outcome(load(records_path))
        print(line, file=sys.stderr)
        return 0 if set(counts) <= ACCEPTED and sound else 1
    return 0


def _versions(args: argparse.Namespace) -> int:
    """``--versions DIR``: the overhead per release (``harness.versions``)."""
    from harness.versions import report as versions_report
    from zoo import files

    if args.records or args.compare or args.machines or args.check:
        raise ValueError(
            "--versions DIR takes a versions folder alone (with --format or "
            "--plots); drop the records file, --compare, --machines and --check"
        )
    if args.plots:
        if args.plots.exists() and not args.plots.is_dir():
            raise ValueError(f"--plots {args.plots} is a file; give a folder")
        markdown = files.folder(args.plots, follow=True) / "versions.md"
        files.write_text(
            markdown, versions_report.text(args.versions, "markdown") + "\n"
        )
        drawn = versions_report.plot(args.versions, args.plots)
        print("\n".join(str(p) for p in [markdown, drawn] if p is not None))
        return 0
    print(versions_report.text(args.versions, args.format))
    return 0


def _converge(args: argparse.Namespace) -> int:
    """``--converge DIR``: time to accuracy per path (``harness.converge``);
    1 when a path did not train or its curve differs, or the ensemble's
    vote found one of its implementations wrong or none to judge."""
    from harness.converge import report as converge_report

    if args.records or args.compare or args.machines or args.check:
        raise ValueError(
            "--converge DIR takes a converge folder or records file alone (with "
            "--plots); drop the records file, --compare, --machines and --check"
        )
    if not args.converge.exists():
        raise FileNotFoundError(f"{args.converge} does not exist")
    found = converge_report.load(converge_report.latest(args.converge))
    print(converge_report.text(found))
    if args.plots:
        if args.plots.exists() and not args.plots.is_dir():
            raise ValueError(f"--plots {args.plots} is a file; give a folder")
        print(converge_report.plot(found, args.plots))
    print(found.closing())
    return 0 if found.ok else 1


def _references(records_path: Path) -> bool:
    """Say what the gate found wrong with the float64 reference that judged
    the run's paths (its plan and verdicts beside its records), one line per
    model, to stderr (the report itself stays parseable in every format);
    whether nothing was."""
    from harness.bench.run import run_references
    from harness.core.gate import reference_line

    wrong = run_references(records_path, records_path.parent)
    for model, sentence in wrong.items():
        print(reference_line(model, sentence), file=sys.stderr)
    return not wrong


def _trainings(records_path: Path) -> None:
    """Under each user model's name, the training step its cells timed, as
    ``--model`` said it before the run (``zoo.user_models.training_of``),
    from the run's model store; to stderr, like ``_references`` (the
    records read quietly: the report warns about their lines once)."""
    from harness.core.records import scan
    from zoo.user_models import find, training_of

    store = records_path.parent / "models"
    for model in sorted({r.model for r in scan(records_path).records}):
        try:
            spec = find(model, store)
        except ValueError as exc:  # a damaged entry: said, not trusted
            print(
                f"{model}: its stored description is unreadable ({exc})",
                file=sys.stderr,
            )
            continue
        if spec is not None:
            print(f"{model}: trained with {training_of(spec)}", file=sys.stderr)


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


def _compare(args: argparse.Namespace) -> int:
    """``--compare OLD NEW``: two timing runs' records, or two count runs."""
    from harness.report.tables import compare_report

    if args.records or args.plots or args.check:
        raise ValueError(
            "--compare OLD NEW takes its two files alone; drop the records "
            "file, --plots and --check"
        )
    old, new = args.compare
    if not _count_runs(old, new):
        print(compare_report(old, new, args.format))
    return 0


def _count_runs(old: Path, new: Path) -> bool:
    """``--compare`` of two ``harness count`` runs (their folders or
    ``count.jsonl`` files): printed, and True; False when neither is one.
    ValueError for one count run against something else."""
    from harness.count.measure import compare_runs, count_run

    runs = [count_run(old), count_run(new)]
    if runs == [None, None]:
        return False
    if None in runs:
        raise ValueError(
            "--compare takes two count runs (count-* folders) or two records "
            f"files, not one of each: {old} and {new}"
        )
    print(compare_runs(runs[0], runs[1]))  # type: ignore[arg-type]
    return True


def _counted(results: Path) -> None:
    """The ``harness count`` section: the newest count run's tables, when
    there is one."""
    from harness.count.measure import latest, render

    found = latest(results)
    if found is not None:
        print()
        print(render(found, results))
        print(f"(from {found})")


def _agreement(results: Path, records_path: Path, fmt: str) -> None:
    """Cells that several commands measured: their figures side by side and
    whether they agree (``harness.report.agreement``)."""
    from harness.report import agreement
    from harness.report.tables import render

    found = agreement.rows(agreement.gather(results, records_path))
    if not found:
        return
    print()
    print("One answer per cell: the same cell as each command measured it")
    print(render(found, fmt))
    differ = sum(1 for r in found if r["agree"] != "yes")
    if differ:
        print(
            f"{differ} of {len(found)} cells differ between commands beyond their "
            "95% intervals (column why)."
        )


def _operators(results: Path) -> None:
    """The ``harness ops`` section: the newest ops run's headline figures,
    when there is one; an ``ops.json`` that cannot be read or shown
    (``harness.ops.report.load``) is named on stderr and the section left
    out."""
    from harness.core import jsonl
    from harness.ops.report import analyse, latest, load, markdown

    found = latest(results)
    if found is not None:
        # the analysis the run wrote (its bootstrap takes a minute), else anew
        try:
            analysis = load(found) if (found / "ops.json").exists() else analyse(found)
        except (OSError, ValueError) as exc:  # zoo.files.Refused included
            jsonl.warn(f"warning: {exc}; the operators section is left out")
            return
        print()
        print(markdown(analysis, every_operator=False))
        print(f"(every operator's table and plots: {found}/ops.md, ops-*.png)")
