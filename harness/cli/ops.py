"""``python -m harness ops``: every operator of the models through keras.ops
and each framework's own operators, each checked against float64 first
(``harness.ops``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands
from workers.paths import parse_list


def add(commands: Commands) -> None:
    """The ``ops`` command."""
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
        "the checks catch it (gemm-transposed, conv-padding, inputs-bfloat16, "
        "layer-norm-epsilon, batch-norm-unbiased-variance, attention-unscaled, "
        "gru-gate-order)",
    )
    ops_p.add_argument(
        "--render",
        type=Path,
        metavar="DIR",
        help="only analyse an ops-* folder again",
    )
    ops_p.set_defaults(handler=ops_command)


def ops_command(args: argparse.Namespace) -> int:
    """The ``ops`` command: 0 when every search and timed check agreed with
    float64, 1 otherwise (a deliberate fault should give 1); raises
    ValueError for anything the user can fix."""
    from harness.ops.measure import FRAMEWORKS, get_ops_profile, ops
    from harness.ops.report import load, render
    from zoo import files
    from zoo.operators import OPERATORS

    if args.render is not None:
        if not (args.render / "gate.jsonl").is_file():
            raise ValueError(f"{args.render} holds no gate.jsonl of an ops run")
        analysis = render(args.render)
        print(files.read_text(args.render / "ops.md"))
    else:
        out = ops(
            get_ops_profile(args.profile),
            frameworks=parse_list(args.frameworks, FRAMEWORKS, "framework"),
            operators=parse_list(args.operators, list(OPERATORS), "operator"),
            results_dir=args.results,
            fault=args.fault,
        )
        analysis = load(out)  # ops() rendered it
        print(files.read_text(out / "ops.md"))
        print(f"written to {out}")
    agreed = all(v["ok"] for v in analysis["verdicts"]) and not any(
        r["status"] == "not-timed" for r in analysis["rows"]
    )
    return 0 if agreed else 1
