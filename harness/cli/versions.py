"""``python -m harness versions``: the profile in one environment per
combination of library releases, each gated on its own
(``harness.versions``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands
from harness.core.profiles import PROFILES, get_profile


def add(commands: Commands) -> None:
    """The ``versions`` command."""
    ver_p = commands.add_parser(
        "versions",
        help="Keras' overhead release by release: one environment per "
        "combination of releases, the equivalence gate and the timings in each",
    )
    ver_p.add_argument(
        "--profile",
        default="versions",
        help=f"one of {list(PROFILES)} or a blueprint .toml (default: versions); "
        "its [versions] table lists the releases",
    )
    for axis, example in (
        ("keras", "3.6.0,3.15.1"),
        ("jax", "0.9.2"),
        ("tensorflow", "2.20.0"),
    ):
        ver_p.add_argument(
            f"--{axis}",
            default=None,
            metavar="RELEASES",
            help=f"comma-separated {axis} releases (e.g. {example}), in place "
            "of the profile's",
        )
    ver_p.add_argument("--results", type=Path, default=Path("results"))
    ver_p.add_argument(
        "--count",
        action="store_true",
        help="count instructions per step too (harness count, under valgrind) "
        "in every environment",
    )
    ver_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="time paths without a passing equivalence verdict too (marked)",
    )
    ver_p.add_argument(
        "--list",
        action="store_true",
        help="only print the combinations and where their environments go",
    )
    ver_p.set_defaults(handler=versions_command)


def versions_command(args: argparse.Namespace) -> int:
    """The ``versions`` command; raises ValueError for anything the user can
    fix."""
    from harness.versions import report
    from harness.versions.matrix import combinations, with_releases
    from harness.versions.run import folder, run_versions

    profile = get_profile(args.profile)
    settings = with_releases(
        profile.versions,
        {axis: getattr(args, axis) for axis in ("keras", "jax", "tensorflow")},
    )
    found = combinations(settings)
    if args.list:
        for c in found:
            print(f"{c.label}: {c.slug}")
        return 0
    profile_arg = args.profile
    if profile_arg not in PROFILES:  # a file: the child runs from the checkout
        profile_arg = str(Path(profile_arg).absolute())
    status = run_versions(
        profile,
        profile_arg,
        found,
        args.results,
        count=args.count,
        allow_unverified=args.allow_unverified,
    )
    print()
    print(report.text(folder(args.results), "table"))
    return status
