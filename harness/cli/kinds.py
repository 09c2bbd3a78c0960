"""``python -m harness kinds``: every layer kind the tool computes, from the
registry (``zoo.kinds``): its ``[model]`` word, the Keras classes a
``.keras`` file may hold for it, its options in the document's words, and
what it computes.  This is the list of layers users read (docs/user_models.md
points here), so it cannot drift from what the door takes."""

from __future__ import annotations

import argparse

from harness.cli.common import Commands


def add(commands: Commands) -> None:
    """``kinds``: the layer kinds, one a row."""
    kinds_p = commands.add_parser(
        "kinds", help="list every layer kind: its Keras classes and options"
    )
    kinds_p.add_argument(
        "--markdown", action="store_true", help="a Markdown table (for docs)"
    )
    kinds_p.set_defaults(handler=kinds_command)


def rows() -> list[list[str]]:
    """One row per kind: its word, its Keras classes, its options in the
    document's words, what it computes, and the module that holds it."""
    from zoo.kinds import KINDS, MODULE_FILES
    from zoo.user_models import words_of

    table = []
    for name, kind in KINDS.items():
        words = words_of(name)
        table.append(
            [
                name,
                ", ".join(kind.keras_classes),
                ", ".join(words),
                kind.summary,
                MODULE_FILES[name],
            ]
        )
    return table


def kinds_command(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    headers = ["kind", "Keras classes", "options", "computes", "module"]
    style = "github" if args.markdown else "simple"
    print(tabulate(rows(), headers=headers, tablefmt=style))
    return 0
