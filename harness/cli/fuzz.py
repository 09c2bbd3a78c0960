"""``python -m harness fuzz``: draw models from the whole vocabulary, check
each on every path against float64, shrink and keep what disagrees
(``harness.fuzz``); ``--write DIR`` writes each kept finding as a report."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands
from harness.fuzz.findings import Finding

# A campaign's default length: long enough to meet the two known Keras bugs
# from a fresh start on a 2-core machine (docs/findings/README.md).
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
    fuzz_p.set_defaults(handler=fuzz_command)


def fuzz_command(args: argparse.Namespace) -> int:
    """0 when the campaign found nothing new, 1 when it did; 130 when
    interrupted (its findings kept)."""
    from harness.fuzz.campaign import Campaign
    from harness.fuzz.checking import WorkerCheck
    from harness.fuzz.findings import TRIAGE, read_findings
    from harness.fuzz.report import write_all

    if not 0 < args.budget <= 7 * 86_400:
        raise ValueError(
            f"--budget must be from 1 second to a week, got {args.budget:g}"
        )
    folder = args.folder.absolute()
    if args.write is not None:
        findings = read_findings(folder)
        written = write_all(findings, args.write, folder / "models")
        print(f"wrote {len(written)} findings to {args.write}")
        if args.releases:
            for finding in findings.values():
                _releases(finding, args.write, args.releases)
        return 0
    print(
        f"fuzz: drawing models for {args.budget:g} s into {folder}; every path "
        "against float64, each disagreement shrunk and kept"
    )
    with WorkerCheck(folder / "models") as check:
        campaign = Campaign(
            folder, args.budget, check, say=lambda line: print(line, flush=True)
        )
        tally = campaign.run()
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
    if tally.interrupted:
        return 130
    return 1 if tally.new else 0


def _releases(finding: Finding, folder: Path, oldest: str) -> None:
    """The releases section of a finding's page, for a finding of Keras
    paths of one backend (the backend its reproducer fails on)."""
    from harness.fuzz.report import releases_section
    from harness.versions.correctness import bisect_releases

    paths = finding.signature.split(" | ")[1].split(",")
    backends = {p.removeprefix("keras-") for p in paths if p.startswith("keras-")}
    if len(backends) != 1 or len(backends) != len(paths):
        return  # not one Keras backend's: no release of Keras to name
    backend = backends.pop()
    print(f"{finding.id}: its reproducer on {backend}, release by release")
    first, tried = bisect_releases(folder / f"{finding.id}.py", backend, oldest)
    page = folder / f"{finding.id}.md"
    page.write_text(page.read_text() + releases_section(backend, tried, first))
