"""Which Keras releases a finding's reproducer fails on
(``harness fuzz --write DIR --releases OLD``): the script of
``harness.fuzz.report`` run on the backend it fails on, in the overlay of
each release ``harness bisect`` builds (``harness.versions.overlay``),
bisected for the first release that gives a wrong value.

It assumes what a bisection assumes: once a release is wrong, every later
one is, until a fix; the newest release must be wrong (else none is
named).  A release whose Keras cannot run on this environment's backends
(an old Keras on a new TensorFlow) is skipped toward newer ones and listed
as such.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from packaging.version import Version

from harness.fuzz.report import run_script, wrong
from harness.versions.bisect import between, pip_releases
from harness.versions.overlay import prepare


def first_affected(
    releases: Sequence[str], affected: Callable[[str], bool | None]
) -> tuple[str | None, dict[str, bool | None]]:
    """The first of ``releases`` (in order) that ``affected`` says is
    affected, by binary search from the newest (which must be), and every
    release tried with its answer; a release that cannot run is skipped
    toward newer ones."""
    tried: dict[str, bool | None] = {}

    def ask(release: str) -> bool | None:
        if release not in tried:
            tried[release] = affected(release)
        return tried[release]

    if not releases or not ask(releases[-1]):
        return None, tried
    low, high = 0, len(releases) - 1  # releases[high] is affected
    while low < high:
        probe = (low + high) // 2
        while probe < high and ask(releases[probe]) is None:
            probe += 1  # cannot run: the next newer one
        if probe == high:
            break  # nothing between that runs: releases[high] is the first seen
        if ask(releases[probe]):
            high = probe
        else:
            low = probe + 1
    return releases[high], tried


def bisect_releases(
    script: Path, backend: str, oldest: str
) -> tuple[str | None, dict[str, bool | None]]:
    """The first release from ``oldest`` to the newest pip has on which
    ``script`` gives a wrong value on ``backend``, and every release tried."""
    available = pip_releases()
    finals = [v for v in available if not Version(v).is_prerelease]
    newest = max(finals, key=Version) if finals else oldest
    releases = between(oldest, newest, available) if newest != oldest else [oldest]

    def affected(release: str) -> bool | None:
        try:
            overlay = prepare(release)
        except ValueError:
            return None
        return wrong(run_script(script, backend, overlay.environment()))

    return first_affected(releases, affected)
