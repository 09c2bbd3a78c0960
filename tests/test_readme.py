"""The front door's text: README at most 250 lines (the rest lives in docs/),
and every relative link of README and docs/ reaching a file that exists, so
moving a section cannot leave a reader at a dead link."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_LINES = 250
# [text](target) in Markdown, the target up to a '#' anchor or the ')'.
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def relative_links(page: Path) -> list[str]:
    """The targets of ``page``'s links that are paths in this project (not
    web addresses, not anchors within the page)."""
    found = LINK.findall(page.read_text())
    return [t for t in found if "://" not in t and not t.startswith("mailto:")]


def dead_links(page: Path) -> list[str]:
    return [t for t in relative_links(page) if not (page.parent / t).exists()]


def test_the_readme_is_the_front_door_not_the_manual() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines, at most {README_LINES}: move "
        "reference material to docs/ and link it"
    )


@pytest.mark.parametrize(
    "page",
    [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_every_relative_link_reaches_a_file(page: Path) -> None:
    assert dead_links(page) == []


def test_a_dead_link_is_caught(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text("# there\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md), [anchor](there.md#there), [web](https://example.org/x), "
        "[gone](docs/missing.md#part)\n"
    )
    assert relative_links(page) == ["there.md", "there.md", "docs/missing.md"]
    assert dead_links(page) == ["docs/missing.md"]
