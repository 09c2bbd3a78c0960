"""Do two runs of one plan hold the same cells?  ``python cluster/same_cells.py
A B``: A and B are records files, or one results folder whose two newest runs
are compared.  Prints each cell repeat's outcome side by side and exits 1 on
any difference (``harness.core.cells.same_cells``: the cells, repeats, statuses,
verdicts and settings, not the times)."""

from __future__ import annotations

import sys
from pathlib import Path

from harness.core import records
from harness.core.cells import same_cells


def _files(args: list[str]) -> tuple[Path, Path]:
    if len(args) == 1 and Path(args[0]).is_dir():
        runs = sorted(Path(args[0]).glob("run-*.jsonl"))
        if len(runs) < 2:
            raise SystemExit(f"error: {args[0]} holds fewer than two runs")
        return runs[-2], runs[-1]
    if len(args) != 2:
        raise SystemExit("usage: python cluster/same_cells.py A.jsonl B.jsonl | DIR")
    return Path(args[0]), Path(args[1])


def main() -> int:
    a, b = _files(sys.argv[1:])
    left, right = records.final(records.read(a)), records.final(records.read(b))
    print(f"{a}: {records.outcome(left)[1]}")
    print(f"{b}: {records.outcome(right)[1]}")
    differences = same_cells(left, right)
    for line in differences:
        print(f"DIFFERENT {line}")
    if differences:
        return 1
    print(
        f"records equal: the same {len(left)} cell repeats in both, with the "
        "same statuses, verdicts and settings"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
