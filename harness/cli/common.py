"""What several commands share: the profile, models, paths and phases a run
selects (``run``, ``plan``, ``gate``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from harness.core.profiles import PROFILES, Profile, get_profile
from workers.paths import MODE_PATHS, PATHS, PHASES, parse_list
from workers.user_model import model_from_file
from zoo.specs import MODELS, VARIANTS

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What ``add_subparsers`` returns: each command module's ``add`` takes it."""


def executor_arguments(parser: argparse.ArgumentParser, local: str, slurm: str) -> None:
    """``--executor local|slurm`` and ``--partition``, for a command that runs
    its work here or as a Slurm job array (``run``, ``fuzz``); ``local`` and
    ``slurm`` say what each does for it."""
    parser.add_argument(
        "--executor",
        choices=("local", "slurm"),
        default="local",
        help=f"local (default): {local}; slurm: {slurm}",
    )
    parser.add_argument(
        "--partition", default=None, help="--executor slurm: the Slurm partition"
    )


def selection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--profile",
        default="default",
        help=f"one of {list(PROFILES)}, or a blueprint .toml file",
    )
    parser.add_argument("--models", default=None, help="default: the profile's")
    model_argument(parser)
    parser.add_argument("--paths", default=None, help="default: the profile's")
    parser.add_argument("--phases", default=None, help="default: the profile's")
    parser.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help="the results folder (default: ./results)",
    )


def model_argument(parser: argparse.ArgumentParser) -> None:
    """``--model FILE``: a user's model in place of ``--models``."""
    parser.add_argument(
        "--model",
        type=Path,
        metavar="FILE",
        help="your own model instead of --models: a Keras 3 file (.keras) or a "
        "[model] table (.toml), kept by name in RESULTS/models",
    )
    parser.add_argument(
        "--seq-len",
        type=int,
        default=0,
        metavar="N",
        help="with --model: the steps a Keras file's free-length sequence input "
        "(shape=(None, F)) is timed at (default 64; it is also checked shorter)",
    )


def chosen_models(args: argparse.Namespace, default: str) -> list[str]:
    """The model of ``--model FILE`` (read and kept in ``<results>/models``,
    ``workers.user_model``), or those ``--models`` names (``default`` when
    not given)."""
    if getattr(args, "model", None) is not None:
        if getattr(args, "models", None) is not None:
            raise ValueError("give --model FILE or --models, not both")
        # a blueprint's models are known names; any other is its own [model]
        own = [m for m in default.split(",") if m not in MODELS and m not in VARIANTS]
        if own:
            raise ValueError(
                f"the blueprint {getattr(args, 'profile', '')} describes its own "
                f"model ({own[0]}, its [model] table) and --model {args.model} was "
                "given too; give one of them"
            )
        seq_len = getattr(args, "seq_len", 0) or 0
        if seq_len < 0:
            raise ValueError(f"--seq-len must be a positive number, not {seq_len}")
        return [model_from_file(args.model, args.results / "models", seq_len)]
    names = default if args.models is None else args.models
    # a blueprint's own [model] is among its defaults (harness.core.profiles)
    return parse_list(names, [*MODELS, *VARIANTS, *default.split(",")], "model")


def selection(
    args: argparse.Namespace,
) -> tuple[Profile, list[str], list[str], list[str]]:
    """The profile and the models, paths and phases the options select."""
    profile = get_profile(args.profile)
    # An option given empty is an empty selection (refused), not the default.
    models = chosen_models(args, ",".join(profile.models))
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
