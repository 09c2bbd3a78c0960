"""Shared test settings: one Hypothesis profile for CI and local runs alike."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

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
settings.load_profile("ci")
