"""harness.report.html: report.md as one self-contained report.html (plots
embedded as data: URIs, no reference to anything outside the file, raw HTML
escaped), wrong images refused; and the page as a person sees it, rendered by
headless Chromium where one is installed."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path

import pytest

from harness.report import html

# A colour no plot style uses, drawn as a solid block: found in a screenshot,
# it proves the embedded image was decoded and painted.
MAGENTA = (0.8, 0.1, 0.6)
REPORT = """\
# Benchmark report

Records: `run.jsonl`, see the [overhead](#keras-over-native) section.

## Keras over native

| model | framework | ratio |
|-------|-----------|------:|
| lenet | torch     | 1.08  |
| ffn   | jax       | 0.97  |

- ratios above **1** mean Keras costs time
- see the plot below

![overhead](overhead.png)
"""
# Attributes that make a browser load (or navigate to) what they name.
URL_ATTRIBUTES = {
    "src",
    "href",
    "srcset",
    "action",
    "formaction",
    "poster",
    "data",
    "background",
    "cite",
    "xlink:href",
}
# Elements that load or run something, whatever their attributes say.
FOREIGN_ELEMENTS = {"script", "link", "iframe", "frame", "object", "embed", "base"}
CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]*)|@import""", re.IGNORECASE)
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


class _References(HTMLParser):
    """Every reference of a page to something outside it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in FOREIGN_ELEMENTS:
            self.found.append(f"<{tag}> element")
        for name, given in attrs:
            value = (given or "").strip()
            if name in URL_ATTRIBUTES and not value.startswith(("data:", "#")):
                self.found.append(f"<{tag} {name}={value!r}>")
            elif name == "style":
                self._css(f"<{tag} style>", value)
            elif tag == "meta" and name == "http-equiv" and value.lower() == "refresh":
                self.found.append("<meta http-equiv=refresh>")
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self._css("<style>", data)

    def _css(self, where: str, css: str) -> None:
        for match in CSS_URL.finditer(css):
            target = (match.group(1) or "").strip()
            if match.group(0).lower() == "@import" or not target.startswith(
                ("data:", "#")
            ):
                self.found.append(f"{where} {match.group(0)!r}")


def _external_references(page: str) -> list[str]:
    """What in ``page`` refers to anything but a ``data:`` URI or a ``#``
    fragment, or is an element that loads or runs something."""
    parser = _References()
    parser.feed(page)
    parser.close()
    return parser.found


class _Tags(HTMLParser):
    """The start tags of a page, with their attributes, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {name: value or "" for name, value in attrs}))


def _tags(page: str, name: str) -> list[dict[str, str]]:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return [attrs for tag, attrs in parser.tags if tag == name]


def _plot(path: Path) -> bytes:
    """A small PNG drawn by matplotlib: a solid magenta block on white."""
    pytest.importorskip("matplotlib", reason="the test plot needs matplotlib")
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    figure = Figure(figsize=(4, 3), dpi=100)
    axes = figure.add_axes((0.1, 0.1, 0.8, 0.8))
    axes.add_patch(Rectangle((0.1, 0.1), 0.8, 0.8, color=MAGENTA))
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png")
    return path.read_bytes()


def _report(folder: Path, markdown: str = REPORT) -> tuple[Path, bytes]:
    png = _plot(folder / "overhead.png")
    path = folder / "report.md"
    path.write_text(markdown, encoding="utf-8")
    return path, png


# --- the checker checks ------------------------------------------------------


def test_the_checker_finds_outside_references() -> None:
    page = """<!DOCTYPE html><html><head>
    <link rel="stylesheet" href="https://cdn.example.com/x.css">
    <style>body { background: url("https://example.com/bg.png"); }</style>
    </head><body>
    <img src="https://example.com/plot.png" alt="x">
    <img src="plot.png">
    <img srcset="//example.com/a.png 2x" src="data:image/png;base64,AA">
    <a href="other.html">other</a><a href="#here">here</a>
    <div style="background-image: url(file:///etc/passwd)">x</div>
    <script>1</script><iframe src="data:text/html,x"></iframe>
    </body></html>"""
    found = _external_references(page)
    assert "<link> element" in found
    assert "<link href='https://cdn.example.com/x.css'>" in found
    assert "<img src='https://example.com/plot.png'>" in found
    assert "<img src='plot.png'>" in found
    assert "<img srcset='//example.com/a.png 2x'>" in found
    assert "<a href='other.html'>" in found
    assert "<script> element" in found
    assert "<iframe> element" in found
    assert sum(entry.startswith("<style>") for entry in found) == 1
    assert sum(entry.startswith("<div style>") for entry in found) == 1
    assert not any("#here" in entry or "data:image" in entry for entry in found)
    clean = '<p><a href="#x">x</a><img src="data:image/png;base64,AA"></p>'
    assert _external_references(clean) == []


# --- the page ----------------------------------------------------------------


def test_report_becomes_one_self_contained_page(tmp_path: Path) -> None:
    markdown, png = _report(tmp_path)
    page = html.page(markdown.read_text(encoding="utf-8"), tmp_path, "Bench <1>")

    assert _external_references(page) == []
    assert "<title>Bench &lt;1&gt;</title>" in page
    assert _tags(page, "table")
    headers = _tags(page, "th")
    assert len(headers) == 3
    assert "text-align:right" in headers[2].get("style", "")  # the numbers
    assert len(_tags(page, "li")) == 2
    assert [h["id"] for h in _tags(page, "h2")] == ["keras-over-native"]
    assert [a["href"] for a in _tags(page, "a")] == ["#keras-over-native"]
    (image,) = _tags(page, "img")
    prefix = "data:image/png;base64,"
    assert image["src"].startswith(prefix)
    assert base64.b64decode(image["src"][len(prefix) :], validate=True) == png
    assert image["alt"] == "overhead"


def test_write_puts_report_html_beside_report_md(tmp_path: Path) -> None:
    markdown, png = _report(tmp_path / "run")
    written = html.write(markdown)
    assert written == tmp_path / "run" / "report.html"
    page = written.read_text(encoding="utf-8")
    assert "<title>Benchmark report</title>" in page
    assert _external_references(page) == []
    assert base64.b64encode(png).decode("ascii") in page

    untitled = tmp_path / "run" / "cells.md"
    untitled.write_text("## cells\n\ntext\n", encoding="utf-8")
    assert "<title>cells.md</title>" in html.write(untitled).read_text("utf-8")


def test_the_template_ships_with_the_package() -> None:
    template = resources.files("harness").joinpath("templates", html.TEMPLATE)
    assert template.is_file()


def test_outside_links_are_kept_as_text_only(tmp_path: Path) -> None:
    markdown = (
        "See [the docs](https://example.com/docs), [a file](results/run.jsonl),\n"
        "[a page](//example.com/x), [unsafe](javascript:alert(1)) and "
        "[here](#top).\n"
    )
    page = html.page(markdown, tmp_path, "links")
    assert _external_references(page) == []
    assert "https://" not in page
    assert "example.com" not in page
    assert "run.jsonl" not in page
    assert "the docs" in page
    assert "a file" in page
    assert [a["href"] for a in _tags(page, "a")] == ["#top"]


def test_raw_html_comes_out_as_text(tmp_path: Path) -> None:
    markdown = (
        "<script>alert('block')</script>\n\n"
        'inline <script>alert("x")</script> and <img src="https://example.com/a.png">'
        "\n"
    )
    page = html.page(markdown, tmp_path, "raw")
    assert _external_references(page) == []
    assert not _tags(page, "script")
    assert not _tags(page, "img")
    assert page.count("&lt;script&gt;alert(") == 2  # both shown, as text
    assert "&lt;img src=&quot;https://example.com/a.png&quot;&gt;" in page


# --- wrong images ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("../outside.png", r"\.\."),
        ("plots/../../outside.png", r"\.\."),
        ("{absolute}", "not a relative path"),
        ("file://{absolute}", "not a relative path"),
        ("https://example.com/plot.png", "not a relative path"),
        ("missing.png", "not a file"),
        ("plots", "not a file"),
        ("notes.png", "not a PNG"),
        ("escape.png", "leads out"),
    ],
)
def test_wrong_images_are_refused(tmp_path: Path, source: str, reason: str) -> None:
    folder = tmp_path / "report"
    outside = tmp_path / "outside.png"
    _plot(outside)  # exists: a refusal is not just a missing file
    (folder / "plots").mkdir(parents=True)
    (folder / "notes.png").write_text("not an image\n", encoding="utf-8")
    (folder / "escape.png").symlink_to(outside)
    markdown = f"![plot]({source.format(absolute=outside)})\n"
    with pytest.raises(ValueError, match=reason):
        html.page(markdown, folder, "wrong")


def test_an_oversized_image_is_refused_before_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    png = _plot(tmp_path / "overhead.png")
    monkeypatch.setattr(html, "MAX_IMAGE_BYTES", len(png) - 1)
    read = []
    monkeypatch.setattr(Path, "open", lambda *args, **kwargs: read.append(args))
    with pytest.raises(ValueError, match="more than"):
        html.page("![plot](overhead.png)\n", tmp_path, "big")
    assert read == []
    monkeypatch.undo()
    monkeypatch.setattr(html, "MAX_IMAGE_BYTES", len(png))
    assert "data:image/png" in html.page("![plot](overhead.png)\n", tmp_path, "fits")


# --- in a browser ------------------------------------------------------------


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        f"no Chromium installed (apt-get install chromium): none of {BROWSERS} "
        "on PATH, so report.html is not rendered"
    )


def _chromium(browser: str, profile: Path, *arguments: str) -> str:
    """Run headless Chromium on its own profile, the network unreachable (no
    name resolves); its standard output."""
    command = [
        browser,
        "--headless",
        # Root in a container has no sandbox to give it; the page is ours.
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--force-color-profile=srgb",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--user-data-dir={profile}",
        *arguments,
    ]
    environment = {**os.environ, "HOME": str(profile)}
    finished = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=environment,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    return finished.stdout


def test_chromium_shows_the_report(tmp_path: Path) -> None:
    browser = _browser()
    np = pytest.importorskip("numpy")
    from matplotlib.image import imread

    markdown, _ = _report(tmp_path / "run")
    written = html.write(markdown)
    url = written.as_uri()
    screenshot = tmp_path / "shot.png"
    started = time.monotonic()
    dom = _chromium(
        browser,
        tmp_path / "profile",
        "--window-size=1200,1600",
        "--virtual-time-budget=1000",
        f"--screenshot={screenshot}",
        "--dump-dom",
        url,
    )
    elapsed = time.monotonic() - started

    assert screenshot.is_file()
    pixels = imread(screenshot)[..., :3]
    assert pixels.shape[:2] == (1600, 1200)
    rgb = (pixels * 255).round().astype(np.uint32)
    colours = np.unique(rgb[..., 0] << 16 | rgb[..., 1] << 8 | rgb[..., 2])
    assert len(colours) > 50, "the screenshot is blank"
    magenta = np.all(np.abs(pixels - np.array(MAGENTA)) < 0.03, axis=-1)
    # The block is 256x192 pixels in the PNG, shown at its own size.
    assert magenta.sum() > 20_000, "the embedded plot was not painted"

    assert "Benchmark report" in dom
    assert "framework" in dom
    assert [h.get("id") for h in _tags(dom, "h2")] == ["keras-over-native"]
    assert len(_tags(dom, "th")) == 3
    assert _external_references(dom) == []
    assert elapsed < 30, f"Chromium took {elapsed:.1f} s"
