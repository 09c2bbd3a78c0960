"""Fixed versus per-sample cost of a path, from a sweep over batch sizes.

A path's step time is measured at several batch sizes ``b``; for one path::

    sweep: {batch size: [process: [seconds per step of each timed block]]}

and modelled as a line, ``t(b) = a + c * b``: ``a`` the fixed cost of a step
(dispatch, Python, kernel launches: paid whatever the batch), ``c`` the cost
per sample (the kernels' arithmetic and memory traffic).  Keras adds mostly to
``a``; so the difference of two paths' ``a`` says how much Keras costs per
step, and :func:`breakeven_batch` from which batch size that stops mattering.

The fit is robust twice over, so that neither a few outlier blocks nor one
bad batch size (a cache cliff, a different kernel) can drag the line:

- the centre of each batch size is the Hodges-Lehmann estimate of all its
  blocks pooled (:func:`harness.stats.paired.hodges_lehmann`: the median of the
  Walsh averages, as robust as the median, nearly as precise as the mean);
- the line through those centres is Theil-Sen's: slope ``c`` the median of
  the slopes between every two batch sizes, intercept ``a`` the median of
  ``t_i - c * b_i``.  Up to about 29% of the batch sizes can be wrong before
  the slope follows them; a least-squares line follows a single one.

Intervals come from the hierarchical bootstrap of :mod:`harness.stats.paired`, run
for each batch size on its own: draw its processes with replacement, then the
blocks of each drawn process with replacement, and take the HL estimate of
the pooled draw (the same estimator as the point estimate, so estimate and
interval agree).  As there, each batch size's replicates are widened around
its centre by ``sqrt(P / (P - 1))`` for P >= 2 processes (P drawn from P see
only (P - 1) / P of the variance between processes).  Every resample refits
the line through its resampled centres; the intervals are the percentile
intervals of the refitted ``a`` and ``c``.  Processes of different batch
sizes are treated as independent (each batch size has its own processes).

Deterministic for a given ``seed``; NumPy only.  5 batch sizes x 5 processes
x 20 blocks x 1000 resamples take about 0.15 s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from harness.stats.paired import hodges_lehmann, interval, replicates

# batch size -> processes -> seconds per step of each timed block
Sweep = Mapping[int, Sequence[Sequence[float]]]

RESAMPLES = 1000


@dataclass(frozen=True)
class LineFit:
    """``t(b) = a + c * b`` fitted to one path's sweep, with intervals."""

    fixed_s: float  # a: seconds per step whatever the batch
    fixed_low: float  # its interval, e.g. 95%
    fixed_high: float
    per_sample_s: float  # c: seconds per sample
    per_sample_low: float
    per_sample_high: float
    batches: tuple[int, ...]  # the batch sizes fitted, ascending
    centres_s: tuple[float, ...]  # the HL centre of each, seconds per step
    # max |centre - (a + c b)| / centre over the batch sizes: how well a line
    # fits (0.05: some batch size is 5% off the line).
    worst_residual: float


def fit(
    sweep: Sweep,
    resamples: int = RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> LineFit:
    """The robust line through ``sweep`` and ``level`` percentile intervals
    of its intercept and slope from ``resamples`` hierarchical bootstrap
    resamples (see the module docstring).  Processes without blocks are left
    out.  Raises ValueError for fewer than two batch sizes, a batch size below
    1 or without blocks, a time that is not a positive finite number, fewer
    than one resample or a level outside (0, 1)."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie between 0 and 1, not {level}")
    batches = sorted(sweep)
    if len(batches) < 2:
        raise ValueError(
            f"a line needs at least 2 batch sizes, the sweep has {len(batches)}"
        )
    rng = np.random.default_rng(seed)
    centres, boot = [], []
    for b in batches:
        blocks = _blocks(b, sweep[b])
        centre, replicates = _centre(blocks, resamples, rng)
        centres.append(centre)
        boot.append(replicates)
    x = np.array(batches, dtype=float)
    t = np.array(centres)
    a, c = _theil_sen(x, t[None, :])
    boot_a, boot_c = _theil_sen(x, np.stack(boot, axis=1))
    a_low, a_high = interval(boot_a, level)
    c_low, c_high = interval(boot_c, level)
    fixed, per_sample = float(a[0]), float(c[0])
    return LineFit(
        fixed_s=fixed,
        fixed_low=a_low,
        fixed_high=a_high,
        per_sample_s=per_sample,
        per_sample_low=c_low,
        per_sample_high=c_high,
        batches=tuple(batches),
        centres_s=tuple(centres),
        worst_residual=float(np.max(np.abs(t - (fixed + per_sample * x)) / t)),
    )


def breakeven_batch(
    keras: LineFit, native: LineFit, share: float = 0.1
) -> float | None:
    """The batch size from which the fixed cost Keras adds, ``a_K - a_N``, is
    less than ``share`` of a Keras step ``a_K + c_K * b``: the smallest real
    ``b >= 1`` with ``a_K - a_N < share * (a_K + c_K * b)`` (the boundary
    itself where the inequality first holds just beyond it).

    1.0 when it already holds at ``b = 1``; None when it never does (fails at
    1 and ``c_K <= 0``).  May lie beyond the largest measured batch size, an
    extrapolation the caller should mark.  Raises ValueError unless ``share``
    is a positive finite number."""
    if not (math.isfinite(share) and share > 0):
        raise ValueError(f"share must be a positive finite number, not {share}")
    added = keras.fixed_s - native.fixed_s
    a, c = keras.fixed_s, keras.per_sample_s
    if added < share * (a + c):
        return 1.0
    if c <= 0:
        return None
    return (added / share - a) / c


def _blocks(batch: int, processes: Sequence[Sequence[float]]) -> list[np.ndarray]:
    """The block times of one batch size, one array per process with blocks.
    Raises ValueError for a bad batch size, no block or a bad time."""
    if batch < 1:
        raise ValueError(f"batch sizes must be at least 1, not {batch}")
    blocks = [np.asarray(p, dtype=float).ravel() for p in processes if len(p)]
    if not blocks:
        raise ValueError(f"batch size {batch} has no timed block")
    for times in blocks:
        if not np.all(np.isfinite(times) & (times > 0)):
            raise ValueError(
                f"a block time of batch size {batch} is not a positive finite number"
            )
    return blocks


def _centre(
    blocks: list[np.ndarray], resamples: int, rng: np.random.Generator
) -> tuple[float, np.ndarray]:
    """The HL centre of the pooled ``blocks`` (seconds) and ``resamples``
    hierarchical bootstrap replicates of it, widened for few processes.

    The bootstrap runs on times divided by their median: HL is scale
    equivariant and its resampled version compares with a tolerance of a few
    units of rounding relative to 1, which for raw seconds (1e-5 and less)
    would be coarse.  The point estimate is taken from the raw times."""
    scale = float(np.median(np.concatenate(blocks)))
    _, boot = replicates([x / scale for x in blocks], resamples, rng)
    return hodges_lehmann(np.concatenate(blocks)), boot * scale


def _theil_sen(x: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Theil-Sen intercepts and slopes of every row of ``t`` (rows: centres
    at the batch sizes ``x``, all distinct): slope the median of the slopes
    between every two points, intercept the median of ``t - slope * x``."""
    i, j = np.triu_indices(x.size, k=1)
    slopes = np.median((t[:, j] - t[:, i]) / (x[j] - x[i]), axis=1)
    intercepts = np.median(t - slopes[:, None] * x, axis=1)
    return intercepts, slopes
