"""Robust statistics for timing samples: medians, spreads, bootstrap intervals.

Framework-free (NumPy and SciPy only).  Timings are not normal: they have a
hard floor (the work itself) and a long right tail (interrupts, page faults,
another process taking the core, a garbage collection), and they often come
in clusters.  A mean and a standard deviation are dragged by a single outlier
and a t-test assumes a shape the data do not have, so everything here rests on
ranks and order statistics instead: the median and the interquartile range
describe a sample, a percentile bootstrap gives the median's confidence
interval without assuming a distribution, and the Mann-Whitney U test decides
whether two samples differ.

The bootstrap uses a fixed-seed generator, so the same samples always give the
same interval and a report is reproducible to the digit.

Limits worth knowing:

- With tiny samples a rank test cannot reach significance at all.  Two
  samples of sizes m and n without ties have ``C(m + n, m)`` equally likely
  orderings under the null hypothesis, so the smallest two-sided p-value is
  ``2 / C(m + n, m)``: 0.1 for 3 against 3, 0.029 for 4 against 4.
  :func:`min_p_value` computes it and :class:`Comparison` says "too few
  samples" when it cannot go below the significance level.
- The test assumes independent samples.  Repeats timed inside one process
  share its state (allocator, caches, clock frequency, the neighbours on the
  machine), so pooled per-step samples overstate how much is known; samples
  from several fresh processes are worth more than many from one.
- Each cell is tested on its own at level 0.05: among twenty unchanged cells
  expect about one false "slower" or "faster".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

from harness.stats.paired import hodges_lehmann

RESAMPLES = 2000
SEED = 20240601
ALPHA = 0.05
UNSTABLE_REL_IQR = 0.10


@dataclass(frozen=True)
class Summary:
    """Order statistics of one sample, with a bootstrap 95% CI of its median."""

    n: int
    median: float
    q1: float
    q3: float
    iqr: float
    rel_iqr: float  # iqr / median: the spread as a fraction of the typical value
    ci_low: float
    ci_high: float


@dataclass(frozen=True)
class Comparison:
    """How a new sample relates to an old one (Mann-Whitney U, two-sided)."""

    n_old: int
    n_new: int
    old_median: float
    new_median: float
    change: float  # new median / old median - 1: +0.2 means 20% more time
    p_value: float
    min_p: float  # the smallest p-value these sample sizes can produce
    alpha: float = ALPHA

    @property
    def enough_samples(self) -> bool:
        """True when these sample sizes can reach significance at all."""
        return self.min_p < self.alpha

    @property
    def significant(self) -> bool:
        """True when the samples differ at level ``alpha``."""
        return self.p_value < self.alpha

    @property
    def verdict(self) -> str:
        """``slower``/``faster`` (new against old) when significant, else
        ``same``, or ``too few samples`` when no outcome could be significant."""
        if not self.enough_samples:
            return "too few samples"
        if not self.significant:
            return "same"
        return "slower" if self.new_median > self.old_median else "faster"


def _array(samples: Sequence[float], what: str = "samples") -> np.ndarray:
    x = np.asarray(samples, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{what} must be a non-empty list of numbers")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{what} hold a value that is not a finite number")
    return x


def _bootstrap_medians(
    x: np.ndarray, rng: np.random.Generator, resamples: int
) -> np.ndarray:
    """Medians of ``resamples`` resamples of ``x`` drawn with replacement."""
    idx = rng.integers(0, x.size, size=(resamples, x.size))
    medians: np.ndarray = np.median(x[idx], axis=1)
    return medians


def summarize(
    samples: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED
) -> Summary:
    """Median, quartiles, IQR, relative IQR and a 95% percentile-bootstrap CI
    of the median of ``samples``; deterministic for a given ``seed``.

    One sample gives the degenerate interval (x, x).  Raises ValueError for an
    empty sample or a non-finite value.
    """
    x = _array(samples)
    q1, median, q3 = (float(v) for v in np.percentile(x, [25, 50, 75]))
    iqr = q3 - q1
    rel_iqr = iqr / abs(median) if median else (0.0 if iqr == 0 else math.inf)
    if x.size == 1:
        low = high = median
    else:
        medians = _bootstrap_medians(x, np.random.default_rng(seed), resamples)
        low, high = (float(v) for v in np.percentile(medians, [2.5, 97.5]))
    return Summary(
        n=int(x.size),
        median=median,
        q1=q1,
        q3=q3,
        iqr=iqr,
        rel_iqr=rel_iqr,
        ci_low=low,
        ci_high=high,
    )


def ratio_ci(
    a: Sequence[float],
    b: Sequence[float],
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float]:
    """95% percentile-bootstrap CI of ``median(a) / median(b)``, resampling the
    two samples independently; deterministic for a given ``seed``.

    Raises ValueError for an empty sample, a non-finite value, or a ``b``
    whose resampled median can be zero.
    """
    xa, xb = _array(a, "a"), _array(b, "b")
    if np.any(xb == 0):
        raise ValueError("b holds a zero, so the ratio of medians is undefined")
    rng = np.random.default_rng(seed)
    ma = _bootstrap_medians(xa, rng, resamples)
    mb = _bootstrap_medians(xb, rng, resamples)
    low, high = np.percentile(ma / mb, [2.5, 97.5])
    return float(low), float(high)


def unstable(summary: Summary, threshold: float = UNSTABLE_REL_IQR) -> bool:
    """True when the sample's IQR exceeds ``threshold`` times its median:
    its median is then too uncertain to compare small differences."""
    return summary.rel_iqr > threshold


def min_p_value(n_old: int, n_new: int) -> float:
    """The smallest two-sided Mann-Whitney p-value for these sample sizes
    (exact test, no ties): ``2 / C(n_old + n_new, n_old)``, at most 1."""
    if n_old < 1 or n_new < 1:
        return 1.0
    return min(1.0, 2.0 / math.comb(n_old + n_new, n_old))


def compare(
    old: Sequence[float], new: Sequence[float], alpha: float = ALPHA
) -> Comparison:
    """Compare two samples with the two-sided Mann-Whitney U test.

    The test is non-parametric: it asks whether a draw from one sample tends
    to be larger than a draw from the other, using only ranks, so a few
    outliers in the long tail of a timing distribution cannot create or hide a
    difference.  Raises ValueError for an empty sample or a non-finite value.
    """
    x_old, x_new = _array(old, "old samples"), _array(new, "new samples")
    old_median, new_median = float(np.median(x_old)), float(np.median(x_new))
    p = float(mannwhitneyu(x_old, x_new, alternative="two-sided").pvalue)
    if math.isnan(p):  # every value tied: no evidence of any difference
        p = 1.0
    if old_median:
        change = new_median / old_median - 1
    else:
        change = 0.0 if new_median == old_median else math.inf
    return Comparison(
        n_old=int(x_old.size),
        n_new=int(x_new.size),
        old_median=old_median,
        new_median=new_median,
        change=change,
        p_value=p,
        min_p=min_p_value(int(x_old.size), int(x_new.size)),
        alpha=alpha,
    )


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> float:
    """How much larger ``a`` is than ``b`` (as a ratio), from paired samples:
    the Hodges-Lehmann estimate of the pairs' log ratios
    (:func:`harness.stats.paired.hodges_lehmann`: the median of the averages
    of every two of them, each with itself too).  As robust to outliers as
    their median and nearly as precise as their mean; pairing cancels
    whatever drifts slower than one pair.

    Raises ValueError for samples of different lengths, an empty sample, or a
    value that is not a positive finite number."""
    x, y = _array(a, "a"), _array(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length ({x.size} vs {y.size})")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("paired samples hold a value that is not positive")
    logs = np.log(x) - np.log(y)
    return float(np.exp(hodges_lehmann(logs)))
