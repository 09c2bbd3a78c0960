"""Every path through its worker: one Checker (four processes) for the module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from equivalence.check import Checker
from harness.paths import PATHS

for module in ("keras", "jax", "tensorflow", "torch"):
    pytest.importorskip(module)


@pytest.fixture(scope="session")
def checker() -> Iterator[Checker]:
    with Checker(list(PATHS)) as c:
        for path, worker in c.workers.items():
            assert worker.failure is None, f"{path}: {worker.failure}"
        yield c
