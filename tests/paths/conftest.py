"""Every path through its worker: one Checker (one process per path) for the session.

Verdicts are checked once and reused: ``verdicts`` is a results folder for
the session into which every passing gate of a test without faults checks
(ffn on every path, here; the modes and levels in their modules), and a test
that runs a command (``harness run``, ``harness explain``) starts it in
``gated``, a copy of that folder, so the command finds its verdicts cached
(``cached verdicts still valid``) instead of starting every framework again.
What the gate itself does is tested where it is called with a checker.

Keras and its backends are installed with the project, so a path of theirs that
cannot start fails the suite.  A framework that lives in an environment of its
own and may not install everywhere (MXNet) is dropped with its reason instead;
``test_optional_frameworks_are_available_or_explained`` reports it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from equivalence.check import Checker
from harness.core.gate import verify
from tests import touched
from workers.paths import OPTIONAL_FRAMEWORKS, PATHS
from workers.serve import REQUEST_LOG_ENV

# Installed, not imported: this test process starts workers, and a framework
# imported here would hold gigabytes in it for the whole session.
for module in ("keras", "jax", "tensorflow", "torch"):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed", allow_module_level=True)

UNAVAILABLE: dict[str, str] = {}


@pytest.fixture(scope="session")
def checker() -> Iterator[Checker]:
    with Checker(list(PATHS)) as c:
        for path, worker in list(c.workers.items()):
            if worker.failure is None:
                continue
            assert PATHS[path].framework in OPTIONAL_FRAMEWORKS, (
                f"{path}: {worker.failure.error}"
            )
            UNAVAILABLE[path] = str(worker.failure.error)
            touched.note_unavailable(
                Path(os.environ[REQUEST_LOG_ENV]), path, UNAVAILABLE[path]
            )
            del c.workers[path]
        yield c


def require(checker: Checker, path: str) -> None:
    """Skip the calling test, with the reason, when ``path`` could not start."""
    if path not in checker.workers:
        pytest.skip(f"{path} unavailable: {UNAVAILABLE.get(path)}")


@pytest.fixture(scope="session")
def verdicts(checker: Checker, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's verdict folder, holding ffn's verdict on every path."""
    folder = tmp_path_factory.mktemp("verdicts")
    checked = verify(["ffn"], list(checker.workers), folder, checker=checker)
    assert set(checked["ffn"].values()) == {"pass"}, checked
    return folder


@pytest.fixture
def gated(verdicts: Path, tmp_path: Path) -> Path:
    """A results folder for one test, holding the session's verdicts so far."""
    shutil.copytree(verdicts, tmp_path, dirs_exist_ok=True)
    return tmp_path
