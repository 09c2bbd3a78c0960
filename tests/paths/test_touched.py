"""The session touched every path, mode, model family, layer kind, fault and
worker task (``tests/touched.py``): run last (``tests/conftest.py`` moves it
there), and only when the whole suite ran, since a chosen few tests touch a
few paths by design."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import tiers, touched
from tests.paths.conftest import UNAVAILABLE
from tests.test_counting import needs_valgrind
from workers.paths import get_path
from workers.serve import REQUEST_LOG_ENV

TESTS = Path(__file__).resolve().parents[1]


def _excused(entry: str) -> str | None:
    """Why an entry of the table may be missing: its path could not start
    here (MXNet where it does not install), or, for a task, what it needs."""
    if entry == "count" and needs_valgrind.mark.args[0]:
        return needs_valgrind.mark.kwargs["reason"]
    for path, reason in UNAVAILABLE.items():
        if entry == path or entry.endswith(f" in {path}"):
            return reason
        info = get_path(path)
        if entry.startswith(f"{info.api}-{info.framework} in "):
            return reason
    return None


def _whole_suite(session: pytest.Session) -> str | None:
    """Why this session is not the whole suite, or None when it is."""
    ran = {Path(str(item.path)).resolve() for item in session.items}
    every = {p.resolve() for p in TESTS.rglob("test_*.py")}
    left_out = sorted(str(p.relative_to(TESTS)) for p in every - ran)
    if left_out:
        return f"{len(left_out)} test modules not run (e.g. {left_out[0]})"
    if session.config.getoption("keyword") or session.config.getoption("markexpr"):
        return "tests were chosen with -k or -m"
    return None


def test_the_session_touched_everything_the_registries_hold(
    request: pytest.FixtureRequest,
) -> None:
    partial = _whole_suite(request.session)
    if partial:
        pytest.skip(f"the touched table needs the whole suite: {partial}")
    table = touched.read(Path(os.environ[REQUEST_LOG_ENV]))
    gaps = touched.missing(table, _excused)
    assert not gaps, (
        f"the {tiers.tier()} tier no longer exercises, through a real worker: "
        + "; ".join(f"{kind}: {', '.join(names)}" for kind, names in gaps.items())
    )
