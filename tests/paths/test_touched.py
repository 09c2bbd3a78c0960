"""The session touched every path, mode, model family, layer kind, fault and
worker task (``tests/touched.py``): run last (``tests/conftest.py`` moves it
there), and only when the whole suite ran, since a chosen few tests touch a
few paths by design.  Under pytest-xdist (``nox -s tests`` runs two
processes) no one worker has seen the whole session: the controller holds the
table once every worker has finished (``tests/conftest.py``,
``pytest_sessionfinish``) with :func:`gaps` below."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import tiers, touched
from tests.paths.conftest import UNAVAILABLE
from tests.test_counting import needs_valgrind
from workers.paths import get_path
from workers.serve import REQUEST_LOG_ENV


def _excused(entry: str, unavailable: dict[str, str]) -> str | None:
    """Why an entry of the table may be missing: its path could not start
    here (MXNet where it does not install), or, for a task, what it needs."""
    if entry == "count" and needs_valgrind.mark.args[0]:
        return needs_valgrind.mark.kwargs["reason"]
    for path, reason in unavailable.items():
        if entry == path or entry.endswith(f" in {path}"):
            return reason
        info = get_path(path)
        if entry.startswith(f"{info.api}-{info.framework} in "):
            return reason
    return None


def gaps() -> str | None:
    """What the session's request log leaves untouched, in one sentence, or
    None."""
    log = Path(os.environ[REQUEST_LOG_ENV])
    unavailable = {**touched.read_unavailable(log), **UNAVAILABLE}
    found = touched.missing(
        touched.read(log), lambda entry: _excused(entry, unavailable)
    )
    if not found:
        return None
    return f"the {tiers.tier()} tier no longer exercises, through a real worker: " + (
        "; ".join(f"{kind}: {', '.join(names)}" for kind, names in found.items())
    )


def test_the_session_touched_everything_the_registries_hold(
    request: pytest.FixtureRequest,
) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        pytest.skip("under pytest-xdist the controller holds the table at the end")
    ran = [Path(str(item.path)).resolve() for item in request.session.items]
    partial = touched.whole_suite(request.config, ran)
    if partial:
        pytest.skip(f"the touched table needs the whole suite: {partial}")
    missing = gaps()
    assert missing is None, missing
