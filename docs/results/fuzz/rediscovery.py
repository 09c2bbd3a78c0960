"""How soon `harness fuzz` meets the known Keras bugs from an empty folder
(issue 80: "both known Keras bugs found in most 10-minute campaigns").

    python docs/results/fuzz/rediscovery.py shares [--draws 1000] [--seeds 1,2,3]

prints, as one line of JSON, how many of N drawn models each known Keras
bug of ``equivalence.keras_known`` can show on, per Hypothesis seed and
together (a seed fixes the draws: the same counts on every run and
machine; Hypothesis draws near its earlier draws, so one seed's share
moves a lot, and several are summed): a model the bug applies to on some
checked path (the padded pool: a ``same`` average pool of three or more
padded unevenly), trained a step where the bug moves a step.

    python docs/results/fuzz/rediscovery.py campaigns --runs 10 --budget 600 --out DIR
    python docs/results/fuzz/rediscovery.py table DIR/rediscovery.jsonl

runs campaigns one after another, each as a user runs it (``python -m
harness fuzz --budget 600``) from an empty folder ``DIR/<i>``, watches its
findings file, and ends it (Ctrl-C: its findings kept) once every bug of
``--bugs`` has been named by a finding (``harness.fuzz.findings.known_bugs``)
or its budget is spent.  Each campaign's row (seconds from the command's
start, workers' start included, and models checked, to each known bug
met) is printed and appended to ``DIR/rediscovery.jsonl``; ``table``
prints those rows as the Markdown table docs/results/fuzz/README.md shows.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, seed, settings

from equivalence.keras_known import KNOWN
from harness.core import jsonl
from harness.fuzz.draw import Drawn, drawn_models
from harness.fuzz.findings import known_bugs, read_findings
from workers.paths import PATHS
from zoo.user_models import spec_from_document

BUGS = (
    "keras-tensorflow-sparse-gradient-optimizers",
    "keras-torch-padded-average-pool",
)
POLL_S = 2.0
STOP_S = 120.0  # a stopped campaign's time to close its workers


def can_show(drawn: Drawn) -> list[str]:
    """The known Keras bugs ``drawn`` can show: each applies to it on a
    path the campaign checks, and a bug of a training step's quantities
    needs a step."""
    spec = spec_from_document("drawn", drawn.document)
    paths = (*PATHS, *drawn.modes)
    return [
        k.name
        for k in KNOWN
        if k.bug
        and any(k.applies(spec, p) for p in paths)
        and (drawn.steps > 0 or not k.quantities.startswith("step"))
    ]


def shares(draws: int, draw_seed: int) -> Counter[str]:
    counts: Counter[str] = Counter()

    @seed(draw_seed)
    @settings(
        max_examples=draws, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(drawn_models())
    def count(drawn: Drawn) -> None:
        counts["models"] += 1
        counts.update(can_show(drawn))

    count()
    return counts


def _models(log: Path) -> int:
    """Models checked so far, from the campaign's last progress line."""
    found = re.findall(r"; model (\d+),", log.read_text(errors="replace"))
    return int(found[-1]) if found else 0


def campaign(folder: Path, budget: float, bugs: tuple[str, ...]) -> dict[str, object]:
    """One campaign from the empty ``folder`` (module docstring): its row."""
    folder.mkdir(parents=True)
    log = folder / "fuzz.log"
    command = [sys.executable, "-m", "harness", "fuzz", "--budget", f"{budget:g}"]
    began = time.monotonic()
    met: dict[str, dict[str, object]] = {}
    with log.open("w") as out:
        run = subprocess.Popen(
            [*command, "--folder", str(folder)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its workers too get the Ctrl-C
        )
        while run.poll() is None:
            time.sleep(POLL_S)
            try:
                findings = read_findings(folder)
            except ValueError:
                continue  # a line half written: read on the next poll
            for finding in findings.values():
                for bug in known_bugs(finding):
                    met.setdefault(
                        bug,
                        {
                            "s": round(time.monotonic() - began),
                            "models": _models(log),
                            "finding": finding.id,
                        },
                    )
            if all(b in met for b in bugs):
                os.killpg(run.pid, signal.SIGINT)
                try:
                    run.wait(STOP_S)
                except subprocess.TimeoutExpired:
                    os.killpg(run.pid, signal.SIGKILL)
                break
    return {
        "folder": folder.name,
        "budget_s": budget,
        "wall_s": round(time.monotonic() - began),
        "models": _models(log),
        "stopped_early": all(b in met for b in bugs),
        "met": met,
    }


def table(rows: list[dict[str, Any]], bugs: tuple[str, ...]) -> list[str]:
    """``campaigns``' rows as a Markdown table: per campaign, the seconds
    and models checked to each of ``bugs`` ("-": not met), and the count
    of campaigns that met each and all."""
    head = ["campaign", "models", "wall (s)", *(f"`{b}` s (model)" for b in bugs)]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for row in rows:
        met = row["met"]
        cells = [
            f"{met[b]['s']} ({met[b]['models']})" if b in met else "-" for b in bugs
        ]
        lines.append(
            f"| {row['folder']} | {row['models']} | {row['wall_s']} | "
            + " | ".join(cells)
            + " |"
        )
    every = sum(all(b in row["met"] for b in bugs) for row in rows)
    each = ", ".join(f"`{b}` {sum(b in row['met'] for row in rows)}" for b in bugs)
    lines.append(f"\nOf {len(rows)} campaigns: {each}; all of them {every}.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    share_p = sub.add_parser("shares")
    share_p.add_argument("--draws", type=int, default=1000)
    share_p.add_argument("--seeds", default="1,2,3")
    camp_p = sub.add_parser("campaigns")
    camp_p.add_argument("--runs", type=int, default=10)
    camp_p.add_argument("--budget", type=float, default=600.0)
    camp_p.add_argument("--out", type=Path, required=True)
    camp_p.add_argument("--bugs", default=",".join(BUGS))
    table_p = sub.add_parser("table")
    table_p.add_argument("rows", type=Path, help="a campaigns' rediscovery.jsonl")
    table_p.add_argument("--bugs", default=",".join(BUGS))
    args = parser.parse_args()
    if args.what == "table":
        rows = jsonl.objects(args.rows)
        print("\n".join(table(rows, tuple(args.bugs.split(",")))))
        return
    if args.what == "shares":
        by_seed = {int(n): shares(args.draws, int(n)) for n in args.seeds.split(",")}
        total = sum(by_seed.values(), Counter())
        print(json.dumps({"by_seed": by_seed, "total": total}))
        return
    # Ctrl-C ends a campaign as it ends a user's, also where this script runs
    # in the background (a shell starts it with Ctrl-C ignored, which a child
    # would inherit; a handler is not inherited)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    bugs = tuple(args.bugs.split(","))
    for i in range(args.runs):
        folder = args.out / f"{i:02d}"
        if folder.exists():
            continue  # a campaign of an earlier invocation: kept as it is
        row = campaign(folder, args.budget, bugs)
        print(json.dumps(row), flush=True)
        jsonl.append(args.out / "rediscovery.jsonl", row, noun="campaign's row")


if __name__ == "__main__":
    main()
