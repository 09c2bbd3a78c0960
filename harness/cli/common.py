"""What several commands share: the profile, models, paths and phases a run
selects (``run``, ``plan``, ``gate``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from harness.core.profiles import PROFILES, Profile, get_profile
from workers.paths import MODE_PATHS, PATHS, PHASES, parse_list
from zoo.specs import MODELS, VARIANTS

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each command module's ``add`` takes it."""


def selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        default="default",
        help=f"one of {list(PROFILES)}, or a blueprint .toml file",
    )
    parser.add_argument("--models", default=None, help="default: the profile's")
    parser.add_argument("--paths", default=None, help="default: the profile's")
    parser.add_argument("--phases", default=None, help="default: the profile's")
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="the results folder (default: ./results)",
    )


def selection(
    args: argparse.Namespace,
) -> tuple[Profile, list[str], list[str], list[str]]:
    """The profile and the models, paths and phases the options select."""
    profile = get_profile(args.profile)
    # An option given empty is an empty selection (refused), not the default.
    models = parse_list(
        ",".join(profile.models) if args.models is None else args.models,
        [*MODELS, *VARIANTS],
        "model",
    )
    paths = parse_list(
        ",".join(profile.paths) if args.paths is None else args.paths,
        [*PATHS, *MODE_PATHS],
        "path",
    )
    phases = parse_list(
        ",".join(profile.phases) if args.phases is None else args.phases,
        PHASES,
        "phase",
    )
    return profile, models, paths, phases
