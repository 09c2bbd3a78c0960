"""Which release made a cell dearer: a bisection over every release between
two (``python -m harness bisect``).

Given a cell's figure at two releases that differ, the releases pip lists
between them are visited by bisection, as asv's ``find`` does for commits:
an interval whose two ends differ (:func:`differ`: their intervals apart
and the change above the signal's floor) is split at its middle release,
and each half whose ends differ is split again, down to neighbouring
releases.  A change made by one release is found in about log2(n) visits
and named a *step*; a change made of several smaller ones is found as
several steps, each with its share of the whole; a change that grows by
less than the floor at every release, but adds up, leaves intervals whose
ends differ while no half's ends do: a *spread* over those releases,
reported as such.  The verdict is a step when one step carries at least
``STEP_SHARE`` of the change, else a slope with each part's share.

This module holds the search and its verdict, framework-free and fed any
``measure(release) -> Figure``; :mod:`harness.versions.signals` measures a
release (instruction counts or paired time ratios in an overlay
environment, :mod:`harness.versions.overlay`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from packaging.version import InvalidVersion, Version

from harness.versions.environments import run_pip
from zoo.user_models import plain_name

# One step carrying at least this share of the change is the change's step.
STEP_SHARE = 0.8
_AVAILABLE = re.compile(r"Available versions:\s*(.+)")


@dataclass(frozen=True)
class Figure:
    """A release's figure for the cell: a value with its low and high ends
    (a count's range over processes, a ratio's 95% CI), and what it is."""

    release: str
    value: float
    low: float
    high: float
    note: str = ""

    def text(self) -> str:
        return f"{self.value:.4g} [{self.low:.4g}, {self.high:.4g}]"


Measure = Callable[[str], Figure]


def differ(a: Figure, b: Figure, floor: float) -> bool:
    """Whether two releases' figures differ: their intervals do not overlap
    and the change is larger than ``floor`` of the first."""
    apart = a.high < b.low or b.high < a.low
    return apart and abs(b.value - a.value) > floor * abs(a.value)


def versions_of(text: str) -> list[str]:
    """The releases ``pip index versions`` lists in its output."""
    found = _AVAILABLE.search(text)
    if not found:
        raise ValueError("pip listed no releases (no 'Available versions' line)")
    return [v.strip() for v in found.group(1).split(",") if v.strip()]


def pip_releases(package: str = "keras") -> list[str]:
    """Every release of ``package`` pip can install here.

    Raises ValueError when pip cannot say."""
    done = run_pip([sys.executable, "-m", "pip", "index", "versions", package])
    if done.returncode != 0:
        raise ValueError(f"pip cannot list {package}'s releases: {done.stderr[-300:]}")
    return versions_of(done.stdout)


def between(old: str, new: str, available: Sequence[str]) -> list[str]:
    """``old``, every final release pip has between them, and ``new``, in
    release order.

    Raises ValueError, before anything is built, for a release pip does
    not have, an unreadable one, or two that are not in order."""
    try:
        listed = {Version(v): v for v in available if not Version(v).is_prerelease}
        first, last = Version(old), Version(new)
    except InvalidVersion as e:
        raise ValueError(f"not a release: {e}") from None
    missing = [v for v in (old, new) if Version(v) not in listed]
    if missing:
        raise ValueError(
            f"pip has no keras {' or '.join(missing)}; it has "
            f"{', '.join(sorted(listed.values(), key=Version)[-8:])} and older"
        )
    if not first < last:
        raise ValueError(f"give the older release first: {old} is not before {new}")
    found = [listed[v] for v in sorted(listed) if first <= v <= last]
    for release in found:  # each names an overlay's and a result's folder
        plain_name(release, "release")
    return found


@dataclass(frozen=True)
class Part:
    """Where the change happened: between two releases, neighbours (a step)
    or not (a spread), and its share of the whole change."""

    before: Figure
    after: Figure
    kind: str  # "step" or "spread"
    share: float


@dataclass
class Bisection:
    """What a bisection found: every figure it took, in the order taken, and
    the parts of the change."""

    releases: list[str]
    figures: dict[str, Figure] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    parts: list[Part] = field(default_factory=list)

    @property
    def visits(self) -> int:
        return len(self.order)

    @property
    def changed(self) -> bool:
        return bool(self.parts)

    def verdict(self) -> str:
        """One sentence: no change, the step, or the slope with its parts."""
        first, last = self.figures[self.releases[0]], self.figures[self.releases[-1]]
        span = (
            f"from {first.release} ({first.text()}) to {last.release} ({last.text()})"
        )
        if not self.parts:
            return f"no change {span} beyond the signal's noise"
        if len({p.share > 0 for p in self.parts}) > 1:
            described = "; ".join(
                f"{p.kind} {p.before.release} -> {p.after.release} "
                f"{p.after.value / p.before.value - 1:+.1%}"
                for p in self.parts
            )
            return f"up and down {span}, no one release's doing: {described}"
        steps = [p for p in self.parts if p.kind == "step"]
        main = max(steps, key=lambda p: abs(p.share), default=None)
        if main is not None and abs(main.share) >= STEP_SHARE:
            return (
                f"a step at {main.after.release}: {main.before.text()} at "
                f"{main.before.release}, {main.after.text()} at "
                f"{main.after.release} ({main.share:.0%} of the change {span})"
            )
        described = "; ".join(
            f"{p.kind} {p.before.release} -> {p.after.release} "
            f"{p.after.value / p.before.value - 1:+.1%} ({p.share:.0%})"
            for p in self.parts
        )
        return f"a slope, the change {span} made in parts: {described}"


def bisect(releases: Sequence[str], measure: Measure, floor: float) -> Bisection:
    """Bisect ``releases`` (oldest first, at least two) on ``measure``:
    the figures of both ends first, then every interval whose ends
    :func:`differ`, split at its middle."""
    if len(releases) < 2:
        raise ValueError("a bisection needs two releases at least")
    found = Bisection(list(releases))

    def figure(index: int) -> Figure:
        release = releases[index]
        if release not in found.figures:
            found.figures[release] = measure(release)
            found.order.append(release)
        return found.figures[release]

    first, last = figure(0), figure(len(releases) - 1)
    whole = last.value - first.value
    pending = [(0, len(releases) - 1)]
    intervals: list[tuple[int, int, str]] = []
    while pending:
        low, high = pending.pop()
        if not differ(figure(low), figure(high), floor):
            continue
        if high - low == 1:
            intervals.append((low, high, "step"))
            continue
        middle = (low + high) // 2
        halves = [(low, middle), (middle, high)]
        moved = [h for h in halves if differ(figure(h[0]), figure(h[1]), floor)]
        if not moved:
            intervals.append((low, high, "spread"))
            continue
        pending += reversed(moved)
    for low, high, kind in sorted(intervals):
        before, after = figure(low), figure(high)
        share = (after.value - before.value) / whole if whole else 0.0
        found.parts.append(Part(before, after, kind, share))
    return found
