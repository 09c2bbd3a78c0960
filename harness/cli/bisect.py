"""``python -m harness bisect``: which Keras release between two changed a
cell, by bisection over every release pip has between them
(``harness.versions.bisect``), each measured in an overlay of that one
release over this environment (``harness.versions.overlay``)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness.cli.common import Commands


def add(commands: Commands) -> None:
    """The ``bisect`` command."""
    bis_p = commands.add_parser(
        "bisect",
        help="find the Keras release between two that changed one cell",
    )
    bis_p.add_argument("--model", required=True, help="e.g. lenet")
    bis_p.add_argument("--path", required=True, help="a Keras path, e.g. keras-torch")
    bis_p.add_argument("--phase", required=True, choices=("train", "infer"))
    bis_p.add_argument(
        "--between",
        nargs=2,
        required=True,
        metavar=("OLD", "NEW"),
        help="two Keras releases, the older first (e.g. 3.10.0 3.15.1)",
    )
    bis_p.add_argument(
        "--profile",
        default="count",
        help="the profile that sets the batch size, steps and processes "
        "(default: count)",
    )
    bis_p.add_argument("--results", type=Path, default=Path("results"))
    bis_p.set_defaults(handler=bisect_command)


def bisect_command(args: argparse.Namespace) -> int:
    """The ``bisect`` command: the releases, their figures as they come, and
    the verdict, also written to ``<results>/bisect-<cell>/bisect.md``."""
    from harness.core.profiles import get_profile
    from harness.versions import bisect, finding, signals
    from zoo import files
    from zoo.user_models import plain_name

    # The model and path name the results' folder: one plain name each.
    plain_name(args.model, "--model")
    plain_name(args.path, "--path")
    cell = signals.Cell(args.model, args.path, args.phase, args.profile)
    signals.check(cell)
    get_profile(args.profile).require([args.phase], [args.model])
    old, new = args.between
    releases = bisect.between(old, new, bisect.pip_releases())
    out = files.folder(args.results / f"bisect-{cell.name}")
    print(
        f"{cell.name}: {len(releases)} releases from {old} to {new}, by "
        f"{cell.signal} (a change must exceed {cell.floor:.1%} and the ranges); "
        f"into {out}",
        file=sys.stderr,
    )
    started = time.monotonic()
    measure = signals.measurer(
        cell, out, sys.executable, log=lambda s: print(s, file=sys.stderr)
    )
    found = bisect.bisect(releases, measure, cell.floor)
    elapsed = time.monotonic() - started
    text = finding.summary(cell, found, out, elapsed)
    files.write_text(out / "bisect.md", text)
    print(text)
    if found.changed:
        written = finding.write(cell, found, out, sys.executable)
        print(f"finding: {written}")
    return 0
