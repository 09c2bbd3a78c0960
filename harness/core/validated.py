"""One check for the records a report reads back: a converge run's records,
a versions manifest, a count run's lines (``harness.core.records`` checks a
timing run's the same way).

Each reader names a schema of the fields it uses (strict types, finite
numbers; other fields allowed, records carry more).  :func:`objects` reads
the file by :mod:`harness.core.jsonl`'s policy and returns the lines that fit
the schema, as they were written; the lines that do not are named once on
stderr (file and line numbers), and when none is left it raises ValueError:
one sentence and a non-zero exit, never a traceback from a field a report
indexed, nor an empty table that exits 0.

Framework-free.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core import jsonl

# Numbers a report computes with: finite, and not negative where they count.
Finite = Annotated[float, Field(allow_inf_nan=False)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(ge=0)]


class Schema(BaseModel):
    """What a reader needs of a line: a base for each reader's schema."""

    model_config = ConfigDict(extra="allow", strict=True, populate_by_name=True)


def fits(schema: type[Schema], value: Any) -> bool:
    """Whether ``value`` (a JSON value) holds what ``schema`` asks for."""
    if not isinstance(value, dict):
        return False
    try:
        # As JSON text: strict mode takes JSON's own types (an int where a
        # float is asked) and nothing else.
        schema.model_validate_json(json.dumps(value), strict=True)
    except (ValidationError, ValueError):
        return False
    return True


def objects(
    path: Path, schema: type[Schema], noun: tuple[str, str]
) -> list[dict[str, Any]]:
    """The lines of ``path`` that fit ``schema`` (:func:`checked`)."""
    return checked(path, schema, noun)[0]


def checked(
    path: Path, schema: type[Schema], noun: tuple[str, str]
) -> tuple[list[dict[str, Any]], list[int]]:
    """The lines of ``path`` that fit ``schema``, and the numbers of those
    skipped; ``noun`` names one and several (``("a converge record",
    "converge records")``) in what is said.

    Raises ValueError when the file holds none, OSError when it cannot be
    read."""
    try:
        found = jsonl.read(path)
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text: it holds no {noun[1]}") from None
    kept, skipped = [], list(found.unreadable)
    for number, value in found.values:
        if fits(schema, value):
            kept.append(value)
        else:
            skipped.append(number)
    skipped.sort()
    if not kept:
        raise ValueError(
            f"{path} holds no {noun[1]}"
            + (
                f" ({len(skipped)} line{'s' * (len(skipped) != 1)} of another shape)"
                if skipped
                else ""
            )
        )
    if skipped:
        jsonl.warn(jsonl.skipped_warning(path, skipped, noun))
    if found.warning():
        jsonl.warn(str(found.warning()))
    return kept, skipped
