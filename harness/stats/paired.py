"""Keras' overhead over native code from paired blocks: estimate, interval, change.

The data of one cell (model, framework, phase, batch size) come from several
fresh worker processes; each process alternates Keras and native blocks and
gives a list of ``(keras_s, native_s)`` block pairs (seconds per step or per
mini-batch)::

    processes: list[list[tuple[float, float]]]

A pair's log ratio ``log(keras_s / native_s)`` cancels whatever the two blocks
of a pair share (a slow minute, a hot core).  The ratio of a cell is
``exp(HL)``, HL the Hodges-Lehmann estimate of all its blocks' log ratios
pooled: the median of every average of two of them (each with itself too), as
robust to outliers as the median and nearly as precise as the mean.

Blocks of one process are not independent (they share its allocator, its
compiled code, its core, its neighbours); processes are.  Intervals therefore
come from a *hierarchical* (two-stage) bootstrap: draw processes with
replacement, then each drawn process's blocks with replacement, and take the
HL estimate of the pooled draw.  The variation between processes stays in the
interval, which a bootstrap of pooled blocks would leave out.  The same
resampling of each run on its own gives :func:`compare` its p-value for "did
the ratio change between two runs?".

Small-sample correction: P processes drawn from P see only (P - 1) / P of the
variance between processes (the plug-in variance), so the replicates are
widened around the estimate by ``sqrt(P / (P - 1))`` (P >= 2).  What stays
uncorrected is the t-like tail of a spread estimated from a few processes:
when processes differ much more than their blocks' noise averages out to,
95% intervals from 4 processes cover the truth about 86% of the time (90% from
10), and an unchanged cell gets p < 0.01 about 4% of the time (see
:func:`compare`).  When blocks dominate, the second stage counts their noise
twice and intervals err on the wide side (99% coverage).

Everything is deterministic for a given ``seed``; NumPy only, no framework.

Speed: the HL estimate of one resample of n blocks is the median of
n(n+1)/2 Walsh averages; 2000 resamples of 300 blocks would be 90 million of
them.  :func:`_resampled_hl` forms none: it bisects over the sorted pair sums
of the pooled blocks, counting for every resample at once how many of its
Walsh averages lie below, which takes about 0.2 s for 10 processes x 30
blocks and 2000 resamples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Processes = Sequence[Sequence[tuple[float, float]]]

RESAMPLES = 2000
EXACT_MAX = 2000  # beyond this many values, HL uses a subset of Walsh averages
WALSH_SUBSET = 2_000_000  # how many Walsh averages that subset holds

# A ratio whose 95% CI half-width is above this share of it is ``wide``: shown,
# marked, and no finding (no summary, no comparison, no run-to-run figure).
WIDE = 0.10


def is_wide(ratio: float, low: float, high: float) -> bool:
    """Whether the interval ``[low, high]`` of ``ratio`` is too wide to hold
    a finding (half-width above ``WIDE`` of the ratio)."""
    return not ratio > 0 or (high - low) / 2 / ratio > WIDE


@dataclass(frozen=True)
class RatioEstimate:
    """Keras time over native time of one cell, with a bootstrap interval."""

    ratio: float  # exp(HL of all blocks' log ratios)
    low: float  # the interval, e.g. 95%, of the ratio
    high: float
    half_width: float  # (high - low) / 2 / ratio: 0.02 means +-2%
    processes: int  # processes with at least one block
    blocks: int  # blocks over all of them

    @property
    def wide(self) -> bool:
        return is_wide(self.ratio, self.low, self.high)


@dataclass(frozen=True)
class Change:
    """How a cell's ratio moved from an old run to a new one."""

    change: float  # new ratio / old ratio - 1: -0.05 means 5% less overhead
    low: float  # the interval, e.g. 95%, of ``change``
    high: float
    p: float  # two-sided bootstrap p-value of "the ratio did not change"


def log_ratios(pairs: Sequence[tuple[float, float]]) -> np.ndarray:
    """``log(keras_s / native_s)`` of every block pair.  Raises ValueError
    when a time is not a positive finite number."""
    a = np.asarray(pairs, dtype=float).reshape(-1, 2)
    if not np.all(np.isfinite(a) & (a > 0)):
        raise ValueError("a block time is not a positive finite number")
    logs: np.ndarray = np.log(a[:, 0]) - np.log(a[:, 1])
    return logs


def hodges_lehmann(x: Sequence[float] | np.ndarray) -> float:
    """The Hodges-Lehmann location estimate of ``x``: the median of all Walsh
    averages ``(x[i] + x[j]) / 2``, ``i <= j``.

    Exact up to ``EXACT_MAX`` values (about 2 million Walsh averages, 16 MB).
    Beyond, the median of ``WALSH_SUBSET`` averages of pairs drawn with a
    fixed seed (deterministic; off by far less than the estimate's own
    uncertainty).  Raises ValueError for an empty or non-finite sample.
    """
    v = np.asarray(x, dtype=float)
    if v.ndim != 1 or v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("x must be a non-empty 1-d list of finite numbers")
    if v.size <= EXACT_MAX:
        i, j = np.triu_indices(v.size)
    else:
        rng = np.random.default_rng(0)
        i, j = rng.integers(0, v.size, size=(2, WALSH_SUBSET))
    return float(np.median((v[i] + v[j]) / 2))


def estimate(
    processes: Processes,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> RatioEstimate | None:
    """The ratio of one cell and its ``level`` percentile interval from the
    hierarchical bootstrap (processes, then blocks within each, replicates
    widened for few processes: see the module docstring); None when there is
    no block at all.  Processes without blocks are left out.

    With a single process only its blocks are resampled: the interval then
    ignores the variation between processes and is optimistic (callers mark
    such a cell).  Raises ValueError for a time that is not positive.
    """
    _check(resamples, level)
    logs = [log_ratios(p) for p in processes if len(p)]
    if not logs:
        return None
    center, boot = replicates(logs, resamples, np.random.default_rng(seed))
    ratio = math.exp(center)
    lo, hi = np.exp(interval(boot, level))
    return RatioEstimate(
        ratio=ratio,
        low=float(lo),
        high=float(hi),
        half_width=float((hi - lo) / 2 / ratio),
        processes=len(logs),
        blocks=sum(len(x) for x in logs),
    )


@dataclass(frozen=True)
class Location:
    """A location (seconds, or a difference of seconds) with an interval."""

    value: float  # HL of every block's value, pooled
    low: float
    high: float
    processes: int
    blocks: int


def location(
    processes: Sequence[Sequence[float]],
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> Location | None:
    """``estimate`` for one value per block instead of a pair: the HL
    estimate of every block's value pooled (a time, or the difference of two
    sides' times in one block) and its hierarchical-bootstrap interval,
    widened for few processes alike.  None when there is no block; raises
    ValueError for a value that is not finite."""
    _check(resamples, level)
    values = [np.asarray(p, dtype=float) for p in processes if len(p)]
    if not values:
        return None
    if not all(np.all(np.isfinite(v)) for v in values):
        raise ValueError("a block value is not a finite number")
    center, boot = replicates(values, resamples, np.random.default_rng(seed))
    lo, hi = interval(boot, level)
    return Location(
        value=center,
        low=lo,
        high=hi,
        processes=len(values),
        blocks=sum(v.size for v in values),
    )


def compare(
    old: Processes,
    new: Processes,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> Change:
    """How the ratio of a cell changed from ``old`` to ``new`` (each the
    cell's processes in one run), with a ``level`` interval and a two-sided
    p-value, both from hierarchical bootstraps of each side on its own.

    ``d`` = HL(new log ratios) - HL(old log ratios); ``change`` =
    ``exp(d) - 1``.  p = 2 * min(share of resampled d <= 0, share >= 0),
    at least ``1 / resamples``, at most 1.

    How small p can get: never below ``1 / resamples``, so p < 0.01 needs
    more than 100 resamples (2000 give 0.0005), and is then reached when
    every resampled ``d`` falls on one side of 0.  Unlike the rank test of
    ``stats.compare`` (4 samples per side before p < 0.05 is possible), the
    number of processes sets no floor: one process per side already reaches
    0.0005.  It sets whether p can be believed.  With one process per side p
    knows nothing of how processes differ.  The share of unchanged cells
    given p < 0.01, simulated (400 cells each, 20 blocks of 2% noise per
    process, times a per-process factor of the standard deviation shown):

    ====================  =====  =====  =====  =====  =====
    processes per side      2      3      4      6      10
    ====================  =====  =====  =====  =====  =====
    per-process 0%         0.3%     0%     0%     0%   0.3%
    per-process 1%         3.5%   2.5%   2.0%   1.8%   1.3%
    per-process 3%          14%   5.5%   4.3%   3.5%   1.8%
    ====================  =====  =====  =====  =====  =====

    So: no verdict from fewer than 3 processes per side.  From 4 up, p < 0.01
    is about right when processes differ by 1% or less and up to 4 times too
    frequent when they differ by 3%, far more than their blocks' noise.

    Raises ValueError when a side has no block or a time is not positive.
    """
    _check(resamples, level)
    old_logs = [log_ratios(p) for p in old if len(p)]
    new_logs = [log_ratios(p) for p in new if len(p)]
    if not old_logs or not new_logs:
        raise ValueError("both sides need at least one block")
    rng = np.random.default_rng(seed)
    old_center, old_boot = replicates(old_logs, resamples, rng)
    new_center, new_boot = replicates(new_logs, resamples, rng)
    d, boot = new_center - old_center, new_boot - old_boot
    lo, hi = interval(boot, level)
    p = 2 * min(np.mean(boot <= 0), np.mean(boot >= 0))
    return Change(
        change=math.expm1(d),
        low=math.expm1(lo),
        high=math.expm1(hi),
        p=float(min(1.0, max(p, 1 / resamples))),
    )


def run_to_run(ratios_by_run: Sequence[dict[str, float]]) -> float | None:
    """How much one machine's ratios move from one run to the next.

    ``ratios_by_run`` holds, for runs in time order, each run's ratio per cell
    key.  The answer is the median, over every cell present in two
    consecutive runs, of ``|log(r_next / r_prev)|``, as a relative figure
    (``exp(m) - 1``: 0.05 means 5%); None when no cell is in two consecutive
    runs.  Raises ValueError for a ratio that is not positive and finite.
    """
    steps: list[float] = []
    for prev, nxt in itertools.pairwise(ratios_by_run):
        for key in prev.keys() & nxt.keys():
            a, b = prev[key], nxt[key]
            if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
                raise ValueError(f"ratio of {key!r} is not positive and finite")
            steps.append(abs(math.log(b / a)))
    return math.expm1(float(np.median(steps))) if steps else None


def _check(resamples: int, level: float) -> None:
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, not {level}")


def interval(samples: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``samples`` (bootstrap
    replicates): from the ``(1 - level) / 2`` to the ``(1 + level) / 2``
    quantile."""
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(samples, [tail, 100 - tail])
    return float(lo), float(hi)


def replicates(
    logs: list[np.ndarray], resamples: int, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    """The HL estimate of the pooled ``logs`` (one array of log ratios per
    process) and ``resamples`` bootstrap replicates of it, widened around it
    by ``sqrt(P / (P - 1))`` for P >= 2 processes."""
    center = hodges_lehmann(np.concatenate(logs))
    boot = _bootstrap(logs, resamples, rng)
    if len(logs) > 1:
        boot = center + math.sqrt(len(logs) / (len(logs) - 1)) * (boot - center)
    return center, boot


def _bootstrap(
    logs: list[np.ndarray], resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """HL estimates of ``resamples`` hierarchical resamples of ``logs`` (one
    array of log ratios per process): draw as many processes as there are,
    with replacement; from each drawn process, draw as many blocks as it has,
    with replacement; pool the draws."""
    sizes = np.array([x.size for x in logs])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    # Stage 1: which process fills each of the len(logs) slots of a resample.
    chosen = rng.integers(0, len(logs), size=(resamples, len(logs)))
    n = sizes[chosen][..., None]  # its block count, per slot
    # Stage 2: up to max(sizes) blocks per slot, only the first n of them used.
    slot = np.arange(sizes.max())
    picks = starts[chosen][..., None] + (rng.random((*n.shape[:2], slot.size)) * n)
    used = slot < n
    rows = np.broadcast_to(np.arange(resamples)[:, None, None], used.shape)
    total = int(sizes.sum())
    counts = np.bincount(
        (rows * total + picks.astype(np.int64))[used],
        minlength=resamples * total,
    ).reshape(resamples, total)
    return _resampled_hl(np.concatenate(logs), counts)


def _resampled_hl(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The HL estimate of every resample ``np.repeat(x, counts[r])``, without
    forming any resample's Walsh averages.

    In a resample with ``c[k]`` copies of ``x[k]``, how many of its Walsh
    averages are at most ``s / 2`` (``s`` a pair sum)?  Counting *ordered*
    pairs of copies, ``sum_k c[k] * C(s - x[k])``, with ``C(v)`` the number of
    copies at most ``v`` (a look-up in sorted ``x``), counts every pair of two
    different copies twice and every copy with itself once; adding the copies
    at most ``s / 2`` and halving gives the count of averages ``i <= j``.
    That count only grows with ``s``, and the median of the resample's Walsh
    averages is a Walsh average of ``x``, so a bisection over the sorted pair
    sums of ``x`` finds its lower middle value (rank ``(m + 1) // 2`` of
    ``m``) in about log2(len(x)**2) steps, for all resamples at once.  The
    upper middle value (rank ``m // 2 + 1``) is the same one when the count
    there reaches it, else the next larger pair sum of the resample.

    Comparisons allow a few units of rounding (``tol``), so a result can be
    off by that much (about 1e-15); beyond ``EXACT_MAX`` values, the
    candidate sums are a fixed-seed subset of ``WALSH_SUBSET`` (see
    :func:`hodges_lehmann`).
    """
    order = np.argsort(x, kind="stable")
    x, c = x[order], counts[:, order].astype(np.int64)
    if x.size <= EXACT_MAX:
        i, j = np.triu_indices(x.size)
    else:
        i, j = np.random.default_rng(0).integers(0, x.size, size=(2, WALSH_SUBSET))
    sums = np.unique(x[i] + x[j])  # candidate pair sums, sorted
    tol = 8 * np.finfo(float).eps * max(1.0, float(np.abs(x).max()))
    below = np.concatenate(  # below[r, q]: copies among the q smallest x
        [np.zeros((len(c), 1), np.int64), np.cumsum(c, axis=1)], axis=1
    )
    rows = np.arange(len(c))

    def look_up(s: np.ndarray) -> np.ndarray:
        """Per resample and block k: how many x are at most s[r] - x[k]."""
        found: np.ndarray = np.searchsorted(x, s[:, None] - x + tol, side="right")
        return found

    def count(s: np.ndarray) -> np.ndarray:
        """Per resample: how many of its Walsh averages are at most s[r] / 2."""
        ordered = np.einsum("rk,rk->r", c, below[rows[:, None], look_up(s)])
        itself = below[rows, np.searchsorted(x, (s + tol) / 2, side="right")]
        halved: np.ndarray = (ordered + itself) // 2
        return halved

    copies = c.sum(axis=1)
    m = copies * (copies + 1) // 2
    rank = (m + 1) // 2
    lo = np.full(len(c), -1)  # count(sums[lo]) < rank <= count(sums[hi])
    hi = np.full(len(c), sums.size - 1)
    while np.any(going := hi - lo > 1):
        mid = (lo + hi) // 2
        reached = count(sums[mid]) >= rank
        hi = np.where(going & reached, mid, hi)
        lo = np.where(going & ~reached, mid, lo)
    lower = sums[hi]
    # The next pair sum above `lower`: per block k held, the smallest held x
    # above lower - x[k]; `first_held[r, q]` is the first index >= q held.
    held = np.where(c > 0, np.arange(x.size), x.size)
    first_held = np.minimum.accumulate(
        np.concatenate([held, np.full((len(c), 1), x.size)], axis=1)[:, ::-1],
        axis=1,
    )[:, ::-1]
    nxt = first_held[rows[:, None], look_up(lower)]
    padded = np.append(x, np.inf)
    above = np.where((c > 0) & (nxt < x.size), x[None, :] + padded[nxt], np.inf)
    upper = np.where(count(lower) >= m // 2 + 1, lower, above.min(axis=1))
    result: np.ndarray = (lower + upper) / 4  # the mean of two pair sums, halved
    return result
