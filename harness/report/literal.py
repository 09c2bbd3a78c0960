"""Text from records, shown in Markdown as the text it is.

A record's strings (a model, a path, a machine, an error) are data: a report
must never render them as Markdown or HTML.  :func:`markdown` makes any text
literal inside a Markdown line or a GitHub table cell: every character that
could start an inline construct is escaped (emphasis, code spans, links and
images, strikethrough, table pipes), ``<`` that could open raw HTML or an
autolink and ``&`` that could open an entity are written as entities, and
line breaks and other control characters become spaces (a line stays one
line, a table row one row).  Characters that cannot start anything where
they stand are left as they are, so a report stays readable in plain text:
``p < 0.05``, ``stacked_lstm``.  :func:`code` is a code span of any text
(a command to run).

``report.html`` renders the Markdown with raw HTML off and escapes the text
again (``harness.report.html``), so the escaped Markdown shows there as the
same text.

Framework-free.
"""

from __future__ import annotations

import re
from pathlib import Path

# Characters escaped wherever they stand.
_ALWAYS = re.compile(r"([\\`*\[\]|~!])")
# ``<`` before what could open a tag, a comment or an autolink, ``&`` before
# what could open an entity.
_ANGLE = re.compile(r"<(?=[A-Za-z/!?])")
_AMPERSAND = re.compile(r"&(?=[A-Za-z#])")
# ``_`` opens or closes emphasis unless letters or digits stand on both sides.
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]")


def markdown(text: str) -> str:
    """``text`` as literal Markdown inline text (see the module docstring)."""
    text = _CONTROL.sub(" ", text)
    text = _AMPERSAND.sub("&amp;", text)
    text = _ANGLE.sub("&lt;", text)
    text = _ALWAYS.sub(r"\\\1", text)
    return _UNDERSCORE.sub(r"\\_", text)


def code(text: str) -> str:
    """``text`` as one Markdown code span, fenced by one more backtick than
    its longest run of them, on one line; a text holding ``<`` as
    :func:`markdown`'s literal text instead, so that no tag stands in the
    raw Markdown either."""
    text = _CONTROL.sub(" ", text)
    if "<" in text:
        return markdown(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def shown_path(path: Path) -> str:
    """``path`` as a reader types it: relative to the current folder when it
    lies inside it (``results``, not ``/home/me/clone/results``), else as
    given."""
    try:
        return str(path.absolute().relative_to(Path.cwd())) or "."
    except ValueError:
        return str(path)
