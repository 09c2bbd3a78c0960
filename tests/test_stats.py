from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.stats import paired, robust


def _lognormal(seed: int, n: int, median: float, sigma: float = 0.02) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(median * rng.lognormal(0.0, sigma, n))


def test_summary_of_a_known_sample() -> None:
    s = robust.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.n, s.median, s.q1, s.q3, s.iqr) == (5, 3.0, 2.0, 4.0, 2.0)
    assert s.rel_iqr == pytest.approx(2.0 / 3.0)
    assert s.ci_low <= s.median <= s.ci_high
    assert robust.unstable(s)


def test_one_sample_has_a_degenerate_interval() -> None:
    s = robust.summarize([0.25])
    assert (s.n, s.median, s.ci_low, s.ci_high, s.iqr) == (1, 0.25, 0.25, 0.25, 0)
    assert not robust.unstable(s)


def test_bootstrap_is_reproducible_and_covers_the_median() -> None:
    x = _lognormal(1, 30, 0.01)
    a, b = robust.summarize(x), robust.summarize(x)
    assert a == b
    assert a.ci_low < a.median < a.ci_high
    assert not robust.unstable(a)  # 2% noise is far below a 10% IQR


def test_empty_or_non_finite_samples_are_refused() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        robust.summarize([])
    with pytest.raises(ValueError, match="finite"):
        robust.summarize([1.0, float("nan")])


@given(st.integers(0, 2**16), st.floats(0.5, 4.0))
def test_ratio_ci_brackets_the_ratio_of_medians(seed: int, factor: float) -> None:
    a = _lognormal(seed, 9, 0.002 * factor)
    b = _lognormal(seed + 1, 9, 0.002)
    low, high = robust.ratio_ci(a, b)
    assert low <= np.median(a) / np.median(b) <= high
    assert low == pytest.approx(factor, rel=0.1)


def test_ratio_ci_of_single_samples_is_the_ratio() -> None:
    assert robust.ratio_ci([3.0], [2.0]) == (1.5, 1.5)


def test_compare_finds_a_change_and_its_direction() -> None:
    old = _lognormal(2, 7, 0.01)
    slower = robust.compare(old, [1.2 * v for v in _lognormal(3, 7, 0.01)])
    assert slower.significant
    assert slower.verdict == "slower"
    assert slower.change == pytest.approx(0.2, abs=0.05)
    faster = robust.compare(old, [0.8 * v for v in _lognormal(4, 7, 0.01)])
    assert faster.verdict == "faster"
    assert faster.change == pytest.approx(-0.2, abs=0.05)
    same = robust.compare(old, _lognormal(5, 7, 0.01))
    assert (same.significant, same.verdict) == (False, "same")


def test_identical_samples_are_the_same() -> None:
    c = robust.compare([1.0] * 8, [1.0] * 8)
    assert (c.p_value, c.verdict, c.change) == (1.0, "same", 0.0)


@pytest.mark.parametrize(
    ("n_old", "n_new", "min_p"),
    [(1, 1, 1.0), (3, 3, 0.1), (4, 4, 2 / 70), (2, 20, 2 / 231)],
)
def test_minimum_p_value_of_the_rank_test(n_old: int, n_new: int, min_p: float) -> None:
    assert robust.min_p_value(n_old, n_new) == pytest.approx(min_p)


def test_three_against_three_can_never_be_significant() -> None:
    # Completely separated samples: the most extreme outcome there is.
    c = robust.compare([1.0, 1.01, 1.02], [2.0, 2.01, 2.02])
    assert c.p_value == pytest.approx(0.1)
    assert not c.enough_samples
    assert not c.significant
    assert c.verdict == "too few samples"


def test_paired_ratio_sees_through_drift_and_outliers() -> None:
    rng = np.random.default_rng(0)
    drift = np.linspace(0.02, 0.03, 60)  # both timers slow down alike
    b = drift * rng.lognormal(0, 0.05, 60)
    a = 1.1 * drift * rng.lognormal(0, 0.05, 60)
    a[7] *= 10  # one interrupted sample
    assert robust.paired_ratio(a, b) == pytest.approx(1.1, rel=0.02)
    assert robust.paired_ratio(b, b) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="differ in length"):
        robust.paired_ratio(a, b[:-1])


def test_paired_ratio_is_the_paired_modules_hodges_lehmann() -> None:
    # One Hodges-Lehmann estimate in the code base: the ratio is exp(HL) of
    # the pairs' log ratios, to the bit.
    rng = np.random.default_rng(1)
    a, b = rng.lognormal(-4, 0.3, 37), rng.lognormal(-4, 0.3, 37)
    want = float(np.exp(paired.hodges_lehmann(np.log(a) - np.log(b))))
    assert robust.paired_ratio(a, b) == want
    with pytest.raises(ValueError, match="not positive"):
        robust.paired_ratio([1.0, 0.0], [1.0, 1.0])
