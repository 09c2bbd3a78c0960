"""``python -m harness count``: Keras' overhead as instructions per step,
counted by callgrind (``harness.count``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands, chosen_models, model_argument
from harness.core.profiles import PROFILES, get_profile
from workers.paths import PATHS, PHASES, integer, parse_list


def add(commands: Commands) -> None:
    """The ``count`` command."""
    count_p = commands.add_parser(
        "count",
        help="instructions per training step and mini-batch under callgrind: "
        "Keras' overhead as work that does not move with the machine's load",
    )
    count_p.add_argument(
        "--profile",
        default="count",
        help=f"one of {list(PROFILES)} or a blueprint .toml (default: count); "
        "its batch sizes, steps and [count] table",
    )
    count_p.add_argument("--models", default=None, help="default: the profile's")
    model_argument(count_p)
    count_p.add_argument(
        "--frameworks", default="all", help="default: jax,tensorflow,torch,mxnet"
    )
    count_p.add_argument("--phases", default=None, help="default: the profile's")
    count_p.add_argument(
        "--processes",
        type=integer,
        default=None,
        help="worker processes per framework (default: the profile's [count])",
    )
    count_p.add_argument(
        "--blocks",
        type=integer,
        default=None,
        help="counted blocks per path and process (default: the profile's [count])",
    )
    count_p.add_argument(
        "--jobs",
        type=integer,
        default=None,
        help="worker processes under callgrind at once (default: one per CPU; "
        "counts do not move with the load)",
    )
    count_p.add_argument(
        "--inject-work",
        metavar="PATH:FACTOR",
        default=None,
        help="add FACTOR times a path's own instructions to its counted blocks "
        "(e.g. native-torch:1.01), to check that report --compare finds a "
        "known change",
    )
    count_p.add_argument("--results", type=Path, default=Path("results"))
    count_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="count paths without a passing equivalence verdict too (marked)",
    )
    count_p.add_argument(
        "--render",
        type=Path,
        metavar="DIR",
        help="only analyse a count-* folder again (its count.jsonl)",
    )
    count_p.set_defaults(handler=count_command)


def count_command(args: argparse.Namespace) -> int:
    """The ``count`` command; raises ValueError for anything the user can fix."""
    from harness.count.measure import count, render
    from workers.frameworks import FRAMEWORKS

    if args.render is not None:
        if not (args.render / "count.jsonl").is_file():
            raise ValueError(f"{args.render} holds no count.jsonl of a count run")
        print(render(args.render, args.render.parent))
        return 0
    profile = get_profile(args.profile)
    settings = profile.count
    processes = settings.processes if args.processes is None else args.processes
    blocks = settings.blocks if args.blocks is None else args.blocks
    if not 1 <= processes <= 100 or not 1 <= blocks <= 1000:
        raise ValueError("--processes takes 1 to 100 and --blocks 1 to 1000")
    if args.jobs is not None and not 1 <= args.jobs <= 256:
        raise ValueError("--jobs takes 1 to 256")
    out = count(
        profile,
        models=chosen_models(args, ",".join(profile.models)),
        frameworks=parse_list(args.frameworks, list(FRAMEWORKS), "framework"),
        phases=parse_list(
            ",".join(profile.phases) if args.phases is None else args.phases,
            PHASES,
            "phase",
        ),
        results_dir=args.results,
        processes=processes,
        blocks=blocks,
        extra=_extra(args.inject_work),
        allow_unverified=args.allow_unverified,
        jobs=args.jobs,
    )
    print(render(out, args.results))
    print(f"written to {out}")
    return 0


def _extra(given: str | None) -> tuple[str, float] | None:
    """``--inject-work native-torch:1.01`` -> ``("native-torch", 1.01)``."""
    if given is None:
        return None
    path, _, factor = given.partition(":")
    try:
        value = float(factor)
    except ValueError:
        value = float("nan")
    if path not in PATHS or not 1 < value <= 2:
        raise ValueError(
            f"--inject-work wants PATH:FACTOR with a path of {', '.join(PATHS)} "
            f"and a factor above 1 and at most 2, got {given[:80]!r}"
        )
    return path, value
