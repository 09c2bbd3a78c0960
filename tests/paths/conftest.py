"""Every path through its worker: one Checker (one process per path) for the session.

Keras and its backends are installed with the project, so a path of theirs that
cannot start fails the suite.  A framework that lives in an environment of its
own and may not install everywhere (MXNet) is dropped with its reason instead;
``test_optional_frameworks_are_available_or_explained`` reports it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from equivalence.check import Checker
from workers.paths import OPTIONAL_FRAMEWORKS, PATHS

for module in ("keras", "jax", "tensorflow", "torch"):
    pytest.importorskip(module)

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
            del c.workers[path]
        yield c


def require(checker: Checker, path: str) -> None:
    """Skip the calling test, with the reason, when ``path`` could not start."""
    if path not in checker.workers:
        pytest.skip(f"{path} unavailable: {UNAVAILABLE.get(path)}")
