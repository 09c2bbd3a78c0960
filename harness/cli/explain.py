"""``python -m harness explain``: Keras' overhead taken apart: levels, fixed
and per-sample cost, kernel and framework time (``harness.explain``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands, chosen_models, model_argument
from harness.core.profiles import get_profile
from workers.paths import PHASES, integer, parse_list


def add(commands: Commands) -> None:
    """The ``explain`` command."""
    exp_p = commands.add_parser(
        "explain",
        help="take Keras' overhead apart: levels, fixed and per-sample cost, "
        "kernel and framework time",
    )
    exp_p.add_argument("--profile", default="default")
    exp_p.add_argument("--models", default=None, help="default: ffn")
    model_argument(exp_p)
    exp_p.add_argument(
        "--frameworks", default="all", help="default: jax,tensorflow,torch"
    )
    exp_p.add_argument("--phases", default="all", help="default: train,infer")
    exp_p.add_argument(
        "--batch-sizes",
        default=None,
        help="the sweep, e.g. 1,4,16,64 (default: the model's batch size in the "
        "profile and three smaller by factors of 4)",
    )
    exp_p.add_argument(
        "--processes",
        type=integer,
        default=3,
        help="worker processes per cell, each timing every batch size (default 3)",
    )
    exp_p.add_argument("--results", type=Path, default=Path("results"))
    exp_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="measure levels without a passing equivalence verdict too (marked)",
    )
    exp_p.add_argument(
        "--render",
        type=Path,
        metavar="DIR",
        help="only analyse an explain-* folder again (its explain.jsonl)",
    )
    exp_p.set_defaults(handler=explain_command)


def explain_command(args: argparse.Namespace) -> int:
    """The ``explain`` command; raises ValueError for anything the user can fix."""
    from harness.explain.measure import FRAMEWORKS, PROCESSES, explain, render
    from zoo import files

    if args.render is not None:
        if not (args.render / "explain.jsonl").is_file():
            raise ValueError(f"{args.render} holds no explain.jsonl of an explain run")
        render(args.render)
        print(files.read_text(args.render / "explain.md"))
        return 0
    if not 1 <= args.processes <= 100:
        raise ValueError("--processes must be an integer from 1 to 100")
    sizes = None
    if args.batch_sizes is not None:
        sizes = [_batch(t) for t in args.batch_sizes.split(",")]
        if len(set(sizes)) != len(sizes):
            raise ValueError("--batch-sizes names a batch size twice")
    out = explain(
        get_profile(args.profile),
        models=chosen_models(args, "ffn"),
        frameworks=parse_list(args.frameworks, FRAMEWORKS, "framework"),
        phases=parse_list(args.phases, PHASES, "phase"),
        results_dir=args.results,
        batch_sizes=sizes,
        processes=args.processes or PROCESSES,
        allow_unverified=args.allow_unverified,
    )
    print(files.read_text(out / "explain.md"))
    print(f"written to {out}")
    return 0


def _batch(text: str) -> int:
    """One batch size of ``--batch-sizes``: an integer from 1 to 65536."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 65_536:
        raise ValueError(
            f"--batch-sizes takes integers from 1 to 65536, not {text[:80]!r}"
        )
    return value
