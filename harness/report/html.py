"""``report.html``: the Markdown report as one self-contained HTML file.

A report is shared by handing someone a file: ``report.md`` needs its PNGs
beside it and a Markdown viewer, so :func:`write` puts beside it a
``report.html`` with the same content that any browser shows alone, offline.
Nothing in it refers to anything outside it: every plot is embedded as a
``data:image/png;base64`` URI, the style sheet is inline, there is no script,
no external font or style sheet, and a link that points out of the document
(a web address, another file) is kept as its text only; links to ``#``
fragments of the page stay live.  A ``Content-Security-Policy`` in the page
repeats this to the browser (no loads but ``data:`` images and the inline
style).

The Markdown is parsed with markdown-it-py (CommonMark plus GitHub's pipe
tables and strikethrough) with raw HTML off, so HTML in the Markdown comes
out escaped, as text.  The page is a Jinja2 template shipped with the package
(``harness/templates/report.html.j2``).

An image must be a PNG file inside the report's folder, named by a relative
path: an absolute path, a path with ``..`` or one that leaves the folder
through a symbolic link, a missing file, a file that is not a PNG or one
larger than :data:`MAX_IMAGE_BYTES` is refused with a :class:`ValueError`
rather than left as a broken or outside reference.

Framework-free, and main-environment only (jinja2 and markdown-it-py are
orchestrator dependencies, the ``harness`` extra).
"""

from __future__ import annotations

import base64
import functools
import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath, PureWindowsPath
from urllib.parse import unquote, urlsplit

import jinja2
from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from zoo import files

# An embedded image is read whole into memory and grows by a third in base64:
# a plot is well under a megabyte, anything this large is a mistake.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TEMPLATE = "report.html.j2"

# A table cell that reads as a number (a time, a ratio, a count, a range
# ``low–high``, a percentage or a factor), or as a dash that stands for none.
_NUMBER = r"[-+−]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMERIC_CELL = re.compile(rf"{_NUMBER}(?:\s*[–-]\s*{_NUMBER})?\s*[%×x]?")
_NO_VALUE = {"", "—", "–", "-", "nan", "n/a"}
# Characters past which a text cell may wrap.
_LONG_CELL = 48


def page(markdown: str, folder: Path, title: str) -> str:
    """The HTML page of ``markdown``, its images read from ``folder`` and
    embedded; ``title`` is the page's title (escaped).  Raises
    :class:`ValueError` for an image that cannot be embedded (see the module
    docstring)."""
    parser = _parser()
    tokens = parser.parse(markdown)
    embedded: dict[Path, str] = {}
    slugs: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            token.attrSet("id", _slug(_text(tokens[index + 1].children), slugs))
        elif token.type == "inline" and token.children:
            token.children = _inline(token.children, folder, embedded)
    _style_columns(tokens)
    body = parser.renderer.render(tokens, parser.options, {})
    return _template().render(title=title, body=body)


def write(markdown_path: Path) -> Path:
    """Write the HTML page of the Markdown file ``markdown_path`` beside it
    (same stem, ``.html``), its images resolved against the file's folder and
    its title the first level-1 heading, else the file's name; returns the
    written path (written by ``zoo.files.write_text``: a link
    planted there is replaced, never written through)."""
    markdown = files.read_text(markdown_path)
    title = first_heading(markdown) or markdown_path.name
    html = page(markdown, markdown_path.parent, title)
    return files.write_text(markdown_path.with_suffix(".html"), html)


def first_heading(markdown: str) -> str | None:
    """The text of the first level-1 heading of ``markdown``, if any."""
    tokens = _parser().parse(markdown)
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.tag == "h1":
            return _text(tokens[index + 1].children).strip() or None
    return None


def embed_png(source: str, folder: Path) -> str:
    """The ``data:`` URI of the PNG that ``source`` (an image address from the
    Markdown) names inside ``folder``; :class:`ValueError` if it names
    anything else."""
    relative = unquote(source)
    parts = urlsplit(relative)
    if (
        parts.scheme
        or parts.netloc
        or relative.startswith(("/", "\\"))
        or PurePosixPath(relative).is_absolute()
        or PureWindowsPath(relative).is_absolute()
        or PureWindowsPath(relative).drive
    ):
        raise ValueError(
            f"image {source!r} is not a relative path inside the report's folder"
        )
    if ".." in PureWindowsPath(relative).parts:
        raise ValueError(f"image {source!r} climbs out of the report's folder (..)")
    base = folder.resolve()
    path = (base / relative).resolve()
    if not path.is_relative_to(base):
        raise ValueError(f"image {source!r} leads out of the report's folder")
    if not path.is_file():
        raise ValueError(f"image {source!r} is not a file in {folder}")
    # A regular file of at most MAX_IMAGE_BYTES, refused in one sentence
    # (``files.Refused`` is a ValueError) before a byte is read otherwise.
    data = files.read_bytes(path, MAX_IMAGE_BYTES)
    if not data.startswith(PNG_SIGNATURE):
        raise ValueError(f"image {source!r} is not a PNG (no PNG signature)")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


@functools.cache
def _parser() -> MarkdownIt:
    """CommonMark with GitHub's pipe tables and strikethrough; raw HTML is
    text, every link and image is left to :func:`_inline`, and a table sits in
    a box that scrolls sideways when it is wider than the page."""
    parser = _Parser("commonmark", {"html": False}).enable(["table", "strikethrough"])
    parser.add_render_rule("table_open", _table_open)
    parser.add_render_rule("table_close", _table_close)
    return parser


class _Parser(MarkdownIt):
    """markdown-it that leaves every link and image to :func:`_inline`, which
    keeps none that leaves the page: an image or link to ``file:`` or
    ``javascript:``, which markdown-it would leave as text, is refused or
    dropped like any other."""

    def validateLink(self, url: str) -> bool:  # noqa: N802 (markdown-it's name)
        return True


def _table_open(
    self: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    return '<div class="table-box">\n' + self.renderToken(tokens, idx, options, env)


def _table_close(
    self: RendererHTML,
    tokens: Sequence[Token],
    idx: int,
    options: OptionsDict,
    env: EnvType,
) -> str:
    return self.renderToken(tokens, idx, options, env) + "</div>\n"


@functools.cache
def _template() -> jinja2.Template:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("harness", "templates"),
        autoescape=jinja2.select_autoescape(("html", "j2"), default=True),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return environment.get_template(TEMPLATE)


def _inline(
    children: list[Token], folder: Path, embedded: dict[Path, str]
) -> list[Token]:
    """An inline run with its images embedded and its outward links reduced
    to their text (CommonMark links do not nest, so a close belongs to the
    last open)."""
    kept: list[Token] = []
    dropping = False
    for child in children:
        if child.type == "image":
            source = str(child.attrGet("src") or "")
            key = folder / unquote(source)
            if key not in embedded:
                embedded[key] = embed_png(source, folder)
            child.attrSet("src", embedded[key])
        elif child.type == "link_open":
            dropping = not str(child.attrGet("href") or "").startswith("#")
            if dropping:
                continue
        elif child.type == "link_close" and dropping:
            dropping = False
            continue
        kept.append(child)
    return kept


def _text(children: list[Token] | None) -> str:
    """The plain text of an inline run (an image counts as its alt text)."""
    text = []
    for child in children or []:
        if child.type in ("text", "code_inline"):
            text.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            text.append(" ")
        elif child.children:
            text.append(_text(child.children))
    return "".join(text)


def _slug(text: str, seen: dict[str, int]) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces
    as hyphens, ``-1``, ``-2`` ... after a repeat."""
    slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    return slug if count == 0 else f"{slug}-{count}"


def _style_columns(tokens: list[Token]) -> None:
    """Right-align each table column whose body cells are all numbers (or
    dashes for none), unless the Markdown aligned it; let a column of long
    text wrap (the style sheet keeps cells on one line)."""
    for start, token in enumerate(tokens):
        if token.type != "table_open":
            continue
        cells: dict[int, list[Token]] = {}
        texts: dict[int, list[str]] = {}
        column = 0
        in_body = False
        for index in range(start, len(tokens)):
            cell = tokens[index]
            if cell.type == "table_close":
                break
            if cell.type == "tbody_open":
                in_body = True
            elif cell.type == "tr_open":
                column = 0
            elif cell.type in ("th_open", "td_open"):
                cells.setdefault(column, []).append(cell)
                if in_body:
                    text = _text(tokens[index + 1].children).strip()
                    texts.setdefault(column, []).append(text)
                column += 1
        for column, values in texts.items():
            style = _column_style(values)
            if style is None:
                continue
            for cell in cells[column]:
                aligned = str(cell.attrGet("style") or "")
                if not (style.startswith("text-align") and "text-align" in aligned):
                    cell.attrSet("style", ";".join(filter(None, (aligned, style))))


def _column_style(values: list[str]) -> str | None:
    """The style of a table column of ``values`` (body cells): ``None`` for
    the style sheet's."""
    numbers = [value for value in values if value.lower() not in _NO_VALUE]
    if numbers and all(_NUMERIC_CELL.fullmatch(value) for value in numbers):
        return "text-align:right"
    if any(len(value) > _LONG_CELL for value in values):
        return "white-space:normal;min-width:16em"
    return None
