"""``python -m harness fuzz``: draw models from the whole vocabulary, check
each on every path against float64, shrink and keep what disagrees
(``harness.fuzz``); ``--write DIR`` writes each kept finding as a report."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from harness.cli.common import Commands, executor_arguments
from harness.fuzz.findings import Finding

# A campaign's default length: ten such campaigns from empty folders met both
# known Keras bugs in eight, one of them in all ten, on a 2-core machine
# (docs/results/fuzz/README.md).
DEFAULT_BUDGET_S = 600.0


def add(commands: Commands) -> None:
    """The ``fuzz`` command."""
    fuzz_p = commands.add_parser(
        "fuzz",
        help="find bugs by drawing models: every path against float64, "
        "disagreements shrunk and kept",
    )
    fuzz_p.add_argument(
        "--budget",
        type=float,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"how long to draw (default {DEFAULT_BUDGET_S:g}); Ctrl-C ends "
        "it sooner, keeping what was found",
    )
    fuzz_p.add_argument(
        "--folder",
        type=Path,
        default=Path("results") / "fuzz",
        help="the campaign's folder: findings.jsonl, the Hypothesis database, "
        "the drawn models (default: results/fuzz; a later campaign there "
        "resumes)",
    )
    fuzz_p.add_argument(
        "--write",
        type=Path,
        default=None,
        metavar="DIR",
        help="instead of drawing: write every kept finding as DIR/<id>.md",
    )
    fuzz_p.add_argument(
        "--releases",
        default=None,
        metavar="OLDEST",
        help="with --write: run each Keras finding's reproducer on every "
        "release from OLDEST to the newest (overlays, as harness bisect "
        "builds them) and name the first affected",
    )
    fuzz_p.add_argument(
        "--tasks",
        type=int,
        default=1,
        metavar="N",
        help="run the campaign as N tasks sharing --folder, each with workers "
        "of its own and draws of its own (harness.fuzz.tasks); default 1",
    )
    executor_arguments(
        fuzz_p,
        "the --tasks as processes here",
        "the --tasks as a job array on --partition (the folder on a file system "
        "every node shares)",
    )
    # one task of a submission: "INDEX:SUBMISSION" (harness.fuzz.tasks)
    fuzz_p.add_argument("--task", default=None, help=argparse.SUPPRESS)
    fuzz_p.set_defaults(handler=fuzz_command)


def fuzz_command(args: argparse.Namespace) -> int:
    """0 when the campaign found nothing new, 1 when it did; 130 when
    interrupted (its findings kept)."""
    from harness.fuzz.campaign import Campaign
    from harness.fuzz.checking import WorkerCheck
    from harness.fuzz.findings import TRIAGE, known_bugs
    from harness.fuzz.tasks import Ran, record

    if not 0 < args.budget <= 7 * 86_400:
        raise ValueError(
            f"--budget must be from 1 second to a week, got {args.budget:g}"
        )
    if args.releases is not None and args.write is None:
        raise ValueError(
            "--releases bisects the findings --write writes: give --write DIR too"
        )
    if not 1 <= args.tasks <= 1000:
        raise ValueError(f"--tasks must be from 1 to 1000, got {args.tasks}")
    if args.executor == "slurm" and not args.partition:
        raise ValueError("--executor slurm needs --partition NAME")
    if args.partition and args.executor != "slurm":
        raise ValueError("--partition goes with --executor slurm")
    folder = args.folder.absolute()
    if args.write is not None:
        return _write(folder, args.write, args.releases)
    if args.tasks > 1 or args.executor == "slurm":
        return _tasks(folder, args)
    task, submitted, draw_seed = _task(args.task)
    prefix = f"[task {task}] " if submitted else ""
    print(
        f"{prefix}fuzz: drawing models for {args.budget:g} s into {folder}; "
        "every path against float64, each disagreement shrunk and kept"
    )
    began = time.monotonic()
    with WorkerCheck(folder / "models") as check:
        campaign = Campaign(
            folder,
            args.budget,
            check,
            say=lambda line: print(prefix + line, flush=True),
            draw_seed=draw_seed,
        )
        tally = campaign.run()
    record(
        folder,
        Ran(
            task,
            campaign.draw_seed,
            tally.models,
            tally.checking_s,
            time.monotonic() - began,
            list(tally.new),
            check.restarts,
            submitted,
        ),
    )
    findings = campaign.findings
    print(
        f"\n{tally.models} models drawn and checked, {tally.rate:.1f} s each "
        f"(workers kept up; {check.restarts} restarts); {len(tally.new)} new "
        f"findings, {len(tally.again)} earlier ones seen again; "
        f"{len(findings)} in {folder / 'findings.jsonl'}"
    )
    for ident in tally.new:
        f = findings[ident]
        print(f"  {ident} ({f.layers} layers, seen {f.seen}x): {f.signature}")
        print(f"    {TRIAGE[f.kind]}")
    met = sorted({bug for f in findings.values() for bug in known_bugs(f)})
    print(f"known Keras bugs the findings name: {', '.join(met) or 'none'}")
    if tally.interrupted:
        return 130
    # a task's findings are its submission's to report (``_tasks``): a
    # non-zero exit would read as the task failing
    return 1 if tally.new and not submitted else 0


def _task(given: str | None) -> tuple[int, str, int | None]:
    """``--task INDEX:SUBMISSION``: the task's number, its submission and its
    draw seed (``harness.fuzz.tasks.task_seed``); a campaign on its own is
    task -1 of none, drawing from a new seed."""
    from harness.fuzz.tasks import task_seed

    if given is None:
        return -1, "", None
    index, _, submitted = given.partition(":")
    if not (index.isdigit() and len(submitted) == 8):
        raise ValueError(f"--task is INDEX:SUBMISSION, got {given!r}")
    int(submitted, 16)  # a ValueError when it is not hexadecimal
    return int(index), submitted, task_seed(submitted, int(index))


def _tasks(folder: Path, args: argparse.Namespace) -> int:
    """``--tasks N``: the campaign as N tasks sharing ``folder``
    (``harness.fuzz.tasks``), then the merged campaign: its rate against
    each task's, and its findings merged."""
    from harness.fuzz.findings import read_findings
    from harness.fuzz.tasks import run_tasks

    began = time.monotonic()
    ran = run_tasks(
        folder,
        args.budget,
        args.tasks,
        executor=args.executor,
        partition=args.partition,
    )
    wall_min = (time.monotonic() - began) / 60
    models = sum(r.models for r in ran)
    print(
        f"\n{len(ran)} of {args.tasks} tasks ended with their tally: {models} "
        f"models in {wall_min:.1f} min, {models / wall_min:.1f} models a minute "
        "together (their workers' start included)"
    )
    for r in ran:
        print(
            f"  task {r.task}: {r.models} models, "
            f"{r.models / (r.elapsed_s / 60):.1f} a minute, "
            f"{r.checking_s / max(r.models, 1):.1f} s each checking; "
            f"{len(r.new)} new findings, {r.restarts} worker restarts"
        )
    new = [ident for r in ran for ident in r.new]
    findings = read_findings(folder)
    print(
        f"findings merged: {len(set(new))} new ({len(new) - len(set(new))} found "
        f"by more than one task, kept once); {len(findings)} in "
        f"{folder / 'findings.jsonl'}"
    )
    for ident in sorted(set(new)):
        f = findings[ident]
        print(f"  {ident} ({f.layers} layers, seen {f.seen}x): {f.signature}")
    return 1 if new else 0


def _write(folder: Path, out: Path, oldest: str | None) -> int:
    """``--write``: every finding of ``folder`` that reads and builds
    (``read_findings`` names the others) written to ``out``, before a
    worker starts; with ``oldest``, the releases of each Keras finding."""
    from harness.fuzz.findings import FINDINGS, read_findings
    from harness.fuzz.report import write_all

    findings = read_findings(folder)
    if not findings:
        raise ValueError(
            f"{folder / FINDINGS} does not exist: no findings to write; run a "
            f"campaign with --folder {folder} first"
        )
    written = write_all(findings, out, folder / "models")
    print(f"wrote {len(written)} findings to {out}, each triaged by a run:")
    for page, (verdict, why) in written:
        print(f"  {page.name}: {verdict}: {why}")
    counts = Counter(verdict for _, (verdict, _) in written)
    print("  " + ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common()))
    if oldest is not None:
        pages = {p.stem for p, _ in written if p.suffix == ".md"}  # not a test
        keras = {
            f.id: b for f in findings.values() if f.id in pages and (b := _backend(f))
        }
        if not keras:
            print(
                "--releases: no finding is of one Keras backend's paths alone, "
                "so there is no Keras release to bisect"
            )
        for finding in findings.values():
            if finding.id in keras:
                _releases(finding, keras[finding.id], out, oldest)
    return 0


def _backend(finding: Finding) -> str:
    """The Keras backend a finding's paths are all of; ``""`` when they are
    not one Keras backend's (no release of Keras to name)."""
    paths = finding.signature.split(" | ")[1].split(",")
    backends = {p.removeprefix("keras-") for p in paths if p.startswith("keras-")}
    if len(backends) != 1 or len(backends) != len(paths):
        return ""
    return backends.pop()


def _releases(finding: Finding, backend: str, folder: Path, oldest: str) -> None:
    """The releases section of a finding's page: its reproducer run on
    ``backend`` over Keras releases from ``oldest``."""
    from harness.fuzz.report import add_releases
    from harness.versions.correctness import bisect_releases
    from zoo import files

    print(f"{finding.id}: its reproducer on {backend}, release by release")
    script = files.inside(folder, f"{finding.id}.py", "a finding's id")
    first, tried = bisect_releases(script, backend, oldest)
    page = files.inside(folder, f"{finding.id}.md", "a finding's id")
    add_releases(page, backend, tried, first)
