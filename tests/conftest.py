"""Shared test settings: the tier (``--tier fast|full``, ``tests/tiers.py``),
the ``sized`` marker, the table of what the session touched
(``tests/touched.py``), and two Hypothesis profiles, ``ci`` and ``explore``.

``ci`` (the default, ``nox -s tests`` and CI) is derandomized: every run draws
the same few examples, so a run is reproducible, but it never meets a case
outside them.  ``explore`` (``nox -s explore``) draws fresh random examples
for a wall-clock budget and keeps what fails in an example database committed
with the project (``tests/hypothesis-db``), so a found failure is replayed on
every later explore run until it is made an explicit ``@example``.

Hypothesis has no time limit of its own, so the budget is enforced here.  It
is switched on by ``HYPOTHESIS_EXPLORE_BUDGET_S`` (seconds of drawing, the
workers' start not counted), which also selects the ``explore`` profile;
then only the Hypothesis tests are run, each strategy-driven test takes its
``max_examples`` from the profile (``draws``), and each Hypothesis test gets
an equal share of what is left of the budget when it starts.  Once its share
is spent, every further draw is rejected before it runs anything, which ends
the test as passing within a few seconds, with the examples it did run.  A
failure ends the rejections: its shrinking and final replay run in full.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests import tiers
from workers.serve import REQUEST_LOG_ENV

EXAMPLE_DATABASE = Path(__file__).parent / "hypothesis-db"
EXPLORE_BUDGET_S = float(os.environ.get("HYPOTHESIS_EXPLORE_BUDGET_S") or 0)
# More than any budget can run (a path check takes seconds): the budget, not
# this number, ends an explore run.
EXPLORE_MAX_EXAMPLES = 10_000

# Derandomized, no deadline (frameworks compile on first use), no example
# database: a run is reproducible and a failure prints its replayable case.
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Random draws, found failures kept; rejected draws are the budget's doing,
# not a strategy's, so the health check on filtering does not apply.
settings.register_profile(
    "explore",
    derandomize=False,
    deadline=None,
    database=DirectoryBasedExampleDatabase(EXAMPLE_DATABASE),
    max_examples=EXPLORE_MAX_EXAMPLES,
    print_blob=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)
settings.load_profile("explore" if EXPLORE_BUDGET_S > 0 else "ci")


def draws(in_full: int) -> int:
    """``max_examples`` for a strategy-driven test: its own few in the full
    tier, the fast tier's share of them (``tests/tiers.py``), where they bound
    the suite's time; the explore profile's, which only the budget reaches,
    when exploring (a test's own setting overrides any profile).  Called as
    the test module is imported, after ``pytest_configure`` set the tier."""
    return EXPLORE_MAX_EXAMPLES if EXPLORE_BUDGET_S > 0 else tiers.draws_at(in_full)


# --- the tiers ---------------------------------------------------------------

# The test that holds the session's table against the registries: it runs
# after every other test.
TOUCHED_TEST = "tests/paths/test_touched.py"
JAX_CACHE_ENV = "JAX_COMPILATION_CACHE_DIR"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--tier",
        choices=tiers.TIERS,
        default=os.environ.get("ZOO_TEST_TIER", "fast"),
        help="fast: every code path at test sizes (nox -s tests, CI); full: "
        "today's sizes (nox -s tests-full)",
    )


def pytest_configure(config: pytest.Config) -> None:
    tiers.set_tier(config.getoption("--tier"))
    # Every worker of the session, those of the commands it runs included,
    # logs its requests here: the touched table (tests/touched.py).
    if REQUEST_LOG_ENV not in os.environ:
        handle, name = tempfile.mkstemp(prefix="zoo-requests-", suffix=".jsonl")
        os.close(handle)
        os.environ[REQUEST_LOG_ENV] = name
        config.add_cleanup(lambda: Path(name).unlink(missing_ok=True))
        config.add_cleanup(lambda: Path(f"{name}.unavailable").unlink(missing_ok=True))
    _share_jax_compilations(config)


def _share_jax_compilations(config: pytest.Config) -> None:
    """One JAX compilation cache for every worker the session starts (the
    same function compiled again in another process, a command's worker or
    the other pytest-xdist process, is read back): the same programs, the
    suite's time only.  JAX keeps no such cache unless the variable is set,
    which a run of the tool does not do."""
    if JAX_CACHE_ENV in os.environ:
        return
    cache = tempfile.mkdtemp(prefix="zoo-jax-cache-")
    os.environ[JAX_CACHE_ENV] = cache
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    config.add_cleanup(lambda: shutil.rmtree(cache, ignore_errors=True))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Under pytest-xdist, the controller holds the touched table once every
    worker has finished (``tests/paths/test_touched.py``; no worker saw the
    whole session): a gap fails the run, named."""
    if not session.config.pluginmanager.has_plugin("dsession"):
        return
    if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return  # interrupted, or nothing collected: nothing to hold
    from tests.touched import whole_suite

    if whole_suite(session.config, None) is not None:
        return
    try:
        from tests.paths import test_touched
    except pytest.skip.Exception:  # the frameworks are not installed
        return
    missing = test_touched.gaps()
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write("\n")  # after the progress line, which leaves none
        reporter.write_sep("=", "the touched table", red=missing is not None)
        reporter.write_line(
            f"FAILED: {missing}"
            if missing
            else "every path, mode, family, layer kind, option, fault and task touched",
            red=missing is not None,
        )
    if missing is not None:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def size(request: pytest.FixtureRequest) -> tiers.Sizes:
    """The tier's sizes, for a test marked ``sized`` (so that ``pytest -m
    sized`` lists every test the tier changes)."""
    if request.node.get_closest_marker("sized") is None:
        pytest.fail(f"{request.node.nodeid} reads the tier's sizes: mark it sized")
    return tiers.size()


def pytest_report_header(config: pytest.Config) -> str:
    return f"test tier: {tiers.tier()} ({tiers.size()})"


def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> None:
    """The touched table's test last; when exploring, only the Hypothesis
    tests (nothing else draws)."""
    items.sort(key=lambda item: item.nodeid.startswith(TOUCHED_TEST))
    if EXPLORE_BUDGET_S <= 0:
        return
    kept = [item for item in items if _is_hypothesis_test(item)]
    dropped = [item for item in items if not _is_hypothesis_test(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
    _BUDGET.tests_left = len(kept)


class _Budget:
    """What is left of the explore budget, shared out among the Hypothesis
    tests still to run, so that a slow first test cannot starve the rest and a
    quick one leaves its time to those after it."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.left_s = seconds
        self.tests_left = 0
        self.used_s: dict[str, float] = {}

    def share_s(self) -> float:
        return self.left_s / max(self.tests_left, 1)

    def spent(self, test: str, seconds: float) -> None:
        self.used_s[test] = seconds
        self.left_s = max(self.left_s - seconds, 0.0)
        self.tests_left -= 1


_BUDGET = _Budget(EXPLORE_BUDGET_S)


def _is_hypothesis_test(item: pytest.Item) -> bool:
    return bool(getattr(getattr(item, "obj", None), "is_hypothesis_test", False))


def _within(
    test: Callable[..., Any], deadline: float, protected: int
) -> Callable[..., Any]:
    """``test``, rejecting each draw made after ``deadline``, except the first
    ``protected`` calls (the explicit examples, then Hypothesis' replay of the
    last failure saved in the database, which comes before any new draw) and
    everything after a failure (shrinking it and replaying it)."""
    calls = 0
    failed = False

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls, failed
        calls += 1
        if not failed and calls > protected and time.monotonic() > deadline:
            event("not run: explore budget spent")
            assume(False)
        try:
            return test(*args, **kwargs)
        except Exception:
            failed = True
            raise

    return run


@pytest.fixture(autouse=True)
def _explore_budget(request: pytest.FixtureRequest) -> Iterator[None]:
    """Give a Hypothesis test its share of the explore budget.  The wrapper
    goes on ``.hypothesis.inner_test``, Hypothesis' own hook for running the
    test body differently; through ``functools.wraps`` Hypothesis still files
    the test's failures under its own key (its body and signature)."""
    given = request.function
    if EXPLORE_BUDGET_S <= 0 or not getattr(given, "is_hypothesis_test", False):
        yield
        return
    start = time.monotonic()
    body = given.hypothesis.inner_test
    explicit = len(getattr(given, "hypothesis_explicit_examples", ()))
    given.hypothesis.inner_test = _within(body, start + _BUDGET.share_s(), explicit + 1)
    try:
        yield
    finally:
        given.hypothesis.inner_test = body
        _BUDGET.spent(request.node.nodeid, time.monotonic() - start)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The budget against the time each test took (the examples each ran are
    in Hypothesis' statistics, ``--hypothesis-show-statistics``)."""
    if EXPLORE_BUDGET_S <= 0:
        return
    terminalreporter.section("explore budget")
    for test, seconds in _BUDGET.used_s.items():
        terminalreporter.write_line(f"{seconds:7.1f} s  {test}")
    used = sum(_BUDGET.used_s.values())
    terminalreporter.write_line(f"{used:7.1f} s of {_BUDGET.seconds:.0f} s budgeted")
