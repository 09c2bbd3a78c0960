"""``python -m harness selfcheck``: the harness' timer overhead and its
agreement with each framework's reference timer (``harness.bench.selfcheck``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands


def add(commands: Commands) -> None:
    """The ``selfcheck`` command."""
    self_p = commands.add_parser(
        "selfcheck",
        help="the harness' timer overhead and its agreement with each "
        "framework's reference timer",
    )
    self_p.add_argument("--results", type=Path, default=Path("results"))
    self_p.set_defaults(handler=selfcheck_command)


def selfcheck_command(args: argparse.Namespace) -> int:
    """The ``selfcheck`` command: 0 when every check is ok."""
    from tabulate import tabulate

    from harness.bench.selfcheck import selfcheck

    rows = selfcheck(args.results)
    print(tabulate(rows, headers="keys"))
    if any(r.get("machine") == "BUSY" for r in rows):
        print(
            "BUSY MACHINE: other processes used the CPU while a check ran "
            "(column machine); a FAIL there may be the load's, not the timer's"
        )
    return 0 if rows and all(r["verdict"] == "ok" for r in rows) else 1
