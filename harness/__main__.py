"""``python -m harness COMMAND``: the parser of every command (each in its
module of ``harness.cli``) and the one place errors become exit statuses."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from harness.cli import (
    bisect,
    converge,
    count,
    explain,
    floors,
    fuzz,
    kinds,
    ops,
    report,
    run,
    selfcheck,
    units,
    versions,
)
from zoo.user_models import use_store


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness")
    commands = parser.add_subparsers(dest="command", required=True)
    # in this order in --help
    for command in (
        run,
        units,
        floors,
        explain,
        count,
        versions,
        bisect,
        converge,
        fuzz,
        ops,
        selfcheck,
        report,
        kinds,
    ):
        command.add(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; every error the user can fix is one line on stderr."""
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    results = getattr(args, "results", None)
    if isinstance(results, Path):
        # Workers run in the project's folder: every path they are sent is
        # absolute, so a command run from anywhere finds its files.
        args.results = results = results.absolute()
        # Users' models (--model FILE) are kept beside the results, where this
        # process and every worker and unit it starts find them by name.
        use_store(results / "models")
    try:
        return handler(args)
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


if __name__ == "__main__":
    sys.exit(main())
