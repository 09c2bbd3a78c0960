"""``python -m equivalence``: compare every path pairwise, per model.

Prints, per model, the normwise relative error of the logits, the loss and the
worst parameter gradient for every pair of paths, then each path's verdict,
then every disagreement naming the pair and the parameter.  Exits 1 on any
disagreement or failed path, 2 on bad arguments.  ``--out`` writes the
verdicts as JSON for ``harness run`` to attach to its timings.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tabulate import tabulate

from equivalence.check import Case, Checker, ModelReport
from equivalence.compare import TOLERANCES
from harness.paths import PATHS, parse_list
from native.layout import FAULTS
from zoo.specs import MODELS, VARIANTS

VERDICT_SCHEMA_VERSION = 1


def _parse_faults(items: list[str], paths: list[str]) -> dict[str, str]:
    faults = {}
    for item in items:
        path, _, fault = item.partition(":")
        if path not in paths or fault not in FAULTS:
            raise ValueError(
                f"--fault wants PATH:FAULT with PATH one of {', '.join(paths)} and "
                f"FAULT one of {', '.join(sorted(FAULTS))}; got {item!r}"
            )
        faults[path] = fault
    return faults


def _print_report(report: ModelReport) -> None:
    print(f"\n== {report.case.describe()} ==")
    rows = []
    for pair in report.pairs:
        worst = pair.worst_grad()
        rows.append(
            [
                f"{pair.a} vs {pair.b}",
                f"{pair.error('logits'):.1e}",
                f"{pair.error('loss'):.1e}",
                f"{worst.error:.1e} ({worst.quantity.removeprefix('grad:')})",
                "agree" if pair.ok else "DISAGREE",
            ]
        )
    if rows:
        print(tabulate(rows, headers=["pair", "logits", "loss", "worst gradient", ""]))
    print("verdicts: " + ", ".join(f"{p} {v}" for p, v in report.verdicts.items()))
    for path, outcome in report.outcomes.items():
        if outcome["status"] == "unavailable":
            print(f"skipped {path}: {outcome['error']}")
        elif outcome["status"] != "ok":
            print(f"FAILED {path}: {outcome['error']}")
            print(outcome.get("traceback") or outcome.get("stderr_tail", ""))
    for pair in report.pairs:
        for e in pair.failures:
            print(
                f"DISAGREE {report.case.model}: {pair.a} vs {pair.b} on "
                f"{e.quantity.replace('grad:', 'gradient of ')}: error {e.error:.2e} "
                f"> tolerance {e.tolerance:.0e}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m equivalence",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--models",
        default=",".join(MODELS),
        help="comma-separated model ids (default: the four models)",
    )
    parser.add_argument("--paths", default="all", help="comma-separated path ids")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="PATH:FAULT",
        help="inject a deliberate layout fault into one path",
    )
    parser.add_argument("--out", type=Path, help="write the verdicts to this JSON file")
    parser.add_argument(
        "--timeout",
        type=float,
        default=900.0,
        help="seconds a worker may take for one model",
    )
    args = parser.parse_args(argv)
    try:
        models = parse_list(args.models, [*MODELS, *VARIANTS], "model")
        paths = parse_list(args.paths, list(PATHS), "path")
        faults = _parse_faults(args.fault, paths)
        if args.batch_size < 1:
            raise ValueError("--batch-size must be at least 1")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"tolerances (normwise relative error): {TOLERANCES}")
    reports = []
    with Checker(paths, timeout=args.timeout) as checker:
        for model in models:
            start = time.perf_counter()
            report = checker.check(Case(model, args.seed, args.batch_size), faults)
            _print_report(report)
            print(f"({time.perf_counter() - start:.1f} s)")
            reports.append(report)
    if args.out:
        _write_verdicts(args.out, reports, args, faults)
    bad = [r.case.model for r in reports if not r.ok]
    print("\nall paths agree" if not bad else f"\ndisagreement in: {', '.join(bad)}")
    return 1 if bad else 0


def _write_verdicts(
    out: Path,
    reports: list[ModelReport],
    args: argparse.Namespace,
    faults: dict[str, str],
) -> None:
    document = {
        "schema_version": VERDICT_SCHEMA_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "seed": args.seed,
        "batch_size": args.batch_size,
        "faults": faults,
        "tolerances": TOLERANCES,
        "models": {r.case.model: r.verdicts for r in reports},
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(out)


if __name__ == "__main__":
    sys.exit(main())
