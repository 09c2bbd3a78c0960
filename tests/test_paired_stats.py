"""harness.stats.paired: Hodges-Lehmann, the hierarchical bootstrap, changes between
runs and run-to-run variation, on synthetic block pairs (no framework)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.stats import paired

Pairs = list[list[tuple[float, float]]]


def _brute_hl(x: np.ndarray) -> float:
    """The definition, literally: the median of every (x[i] + x[j]) / 2, i <= j."""
    n = len(x)
    return float(np.median([(x[i] + x[j]) / 2 for i in range(n) for j in range(i, n)]))


def _cell(
    seed: int,
    processes: int,
    blocks: int,
    *,
    ratio: float = 2.0,
    block_noise: float = 0.03,
    process_noise: float = 0.02,
) -> Pairs:
    """Block pairs with Keras = native * ratio * a per-process lognormal factor
    * a per-block lognormal factor; native times vary from block to block."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(processes):
        factor = math.exp(rng.normal(0.0, process_noise))
        native = rng.uniform(0.009, 0.011, blocks)
        keras = native * ratio * factor * np.exp(rng.normal(0.0, block_noise, blocks))
        out.append(list(zip(keras.tolist(), native.tolist(), strict=True)))
    return out


finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)


# Hodges-Lehmann.


def test_log_ratios() -> None:
    got = paired.log_ratios([(2.0, 1.0), (1.0, 4.0)])
    np.testing.assert_allclose(got, [math.log(2), math.log(0.25)])
    with pytest.raises(ValueError, match="positive"):
        paired.log_ratios([(1.0, 0.0)])
    with pytest.raises(ValueError, match="positive"):
        paired.log_ratios([(math.nan, 1.0)])


def test_hl_of_symmetric_samples_is_their_median() -> None:
    assert paired.hodges_lehmann([1.0, 2.0, 3.0]) == 2.0
    assert paired.hodges_lehmann([-3.0, -1.0, 0.0, 1.0, 3.0]) == 0.0
    assert paired.hodges_lehmann([5.0]) == 5.0
    assert paired.hodges_lehmann([1.0, 2.0, 4.0, 5.0]) == 3.0


@given(st.lists(finite, min_size=1, max_size=40))
def test_hl_matches_the_definition(x: list[float]) -> None:
    v = np.array(x)
    assert paired.hodges_lehmann(v) == pytest.approx(_brute_hl(v), abs=1e-9)


@given(st.lists(finite, min_size=1, max_size=40), finite)
def test_hl_is_shift_equivariant(x: list[float], c: float) -> None:
    v = np.array(x)
    shifted = paired.hodges_lehmann(v + c)
    assert shifted == pytest.approx(paired.hodges_lehmann(v) + c, abs=1e-9)


def test_hl_shrugs_off_an_outlier() -> None:
    x = np.random.default_rng(3).normal(0.0, 1.0, 50)
    y = x.copy()
    y[0] = 1e6
    moved_hl = abs(paired.hodges_lehmann(y) - paired.hodges_lehmann(x))
    moved_mean = abs(float(y.mean() - x.mean()))
    assert moved_hl < 0.2
    assert moved_hl < moved_mean / 1e4


def test_hl_of_a_large_sample_is_close_to_exact() -> None:
    x = np.random.default_rng(4).lognormal(0.0, 0.5, paired.EXACT_MAX + 500)
    i, j = np.triu_indices(x.size)
    exact = float(np.median((x[i] + x[j]) / 2))
    got = paired.hodges_lehmann(x)
    assert got == paired.hodges_lehmann(x)  # deterministic
    assert got == pytest.approx(exact, abs=0.01 * float(x.std()))


def test_hl_refuses_empty_or_non_finite() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        paired.hodges_lehmann([])
    with pytest.raises(ValueError, match="finite"):
        paired.hodges_lehmann([1.0, math.inf])


@given(
    st.lists(st.integers(-20, 20), min_size=1, max_size=25),
    st.integers(0, 2**32 - 1),
)
def test_hl_of_resamples_matches_the_definition(x: list[int], seed: int) -> None:
    """The bootstrap's counting HL equals HL of each resample spelled out,
    ties (small integers, scaled) included."""
    v = np.array(x, dtype=float) / 7
    counts = np.random.default_rng(seed).integers(0, 3, size=(6, v.size))
    counts[:, 0] += counts.sum(axis=1) == 0  # no empty resample
    got = paired._resampled_hl(v, counts)
    want = [paired.hodges_lehmann(np.repeat(v, c)) for c in counts]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


# estimate.


def test_estimate_finds_a_known_ratio() -> None:
    e = paired.estimate(_cell(1, processes=6, blocks=20))
    assert e is not None
    assert e.ratio == pytest.approx(2.0, rel=0.02)
    assert e.low < 2.0 < e.high
    assert e.low < e.ratio < e.high
    assert 0.003 < e.half_width < 0.05
    assert e.half_width == pytest.approx((e.high - e.low) / 2 / e.ratio)
    assert (e.processes, e.blocks) == (6, 120)
    assert paired.estimate(_cell(1, processes=6, blocks=20)) == e  # deterministic


def test_more_processes_narrow_the_interval() -> None:
    few = paired.estimate(_cell(2, processes=3, blocks=20))
    many = paired.estimate(_cell(2, processes=12, blocks=20))
    assert few is not None
    assert many is not None
    assert many.half_width < few.half_width


def test_the_interval_holds_the_variation_between_processes() -> None:
    alike = paired.estimate(_cell(5, 6, 20, process_noise=0.0))
    apart = paired.estimate(_cell(5, 6, 20, process_noise=0.10))
    assert alike is not None
    assert apart is not None
    assert apart.half_width > 3 * alike.half_width


def test_one_process_still_gives_an_interval() -> None:
    e = paired.estimate(_cell(6, processes=1, blocks=30))
    assert e is not None
    assert e.processes == 1
    assert e.low < e.ratio < e.high
    one = paired.estimate([[(3.0, 1.5)]])
    assert one is not None
    assert (one.ratio, one.low, one.high, one.half_width) == pytest.approx(
        (2.0, 2.0, 2.0, 0.0)
    )


def test_processes_of_unequal_length() -> None:
    cell = _cell(7, processes=4, blocks=25)
    cell[1] = cell[1][:3]
    cell[2] = []
    e = paired.estimate(cell)
    assert e is not None
    assert (e.processes, e.blocks) == (3, 53)
    assert e.low < e.ratio < e.high


def test_no_block_no_estimate() -> None:
    assert paired.estimate([]) is None
    assert paired.estimate([[], []]) is None
    with pytest.raises(ValueError, match="resamples"):
        paired.estimate(_cell(1, 2, 5), resamples=0)


# compare.


def test_compare_sees_a_five_percent_change() -> None:
    old = _cell(10, 4, 20, block_noise=0.02, process_noise=0.01)
    new = _cell(11, 4, 20, ratio=2.0 / 1.05, block_noise=0.02, process_noise=0.01)
    c = paired.compare(old, new)
    assert c.p < 0.01
    assert c.low < 1 / 1.05 - 1 < c.high
    assert c.change == pytest.approx(1 / 1.05 - 1, abs=0.015)
    assert c.low < c.change < c.high


def test_compare_is_calibrated_on_unchanged_cells() -> None:
    """40 unchanged cells: p < 0.01 at most twice, p roughly uniform."""
    ps = np.array(
        [
            paired.compare(
                _cell(2 * s, 4, 20, block_noise=0.02, process_noise=0.01),
                _cell(2 * s + 1, 4, 20, block_noise=0.02, process_noise=0.01),
                resamples=500,
                seed=s,
            ).p
            for s in range(40)
        ]
    )
    assert np.sum(ps < 0.01) <= 2
    assert np.sum(ps < 0.05) <= 6
    assert 0.25 < np.median(ps) < 0.75


def test_compare_of_identical_data_finds_no_change() -> None:
    cell = _cell(12, 4, 20)
    c = paired.compare(cell, cell)
    assert c.change == 0.0
    assert c.p > 0.8
    assert c.low < 0 < c.high


def test_compare_needs_blocks_on_both_sides() -> None:
    with pytest.raises(ValueError, match="both sides"):
        paired.compare([], _cell(1, 2, 5))
    with pytest.raises(ValueError, match="both sides"):
        paired.compare(_cell(1, 2, 5), [[]])


# run_to_run.


def test_run_to_run_of_known_ratios() -> None:
    runs = [{"a": 2.0}, {"a": 2.1}, {"a": 2.0}]
    assert paired.run_to_run(runs) == pytest.approx(0.05)
    runs = [{"a": 2.0, "b": 1.0, "c": 1.0}, {"a": 2.0, "b": 1.05**2}, {"c": 3.0}]
    assert paired.run_to_run(runs) == pytest.approx(0.05)  # median of 0 and 2 log 1.05


def test_run_to_run_needs_a_cell_in_two_consecutive_runs() -> None:
    assert paired.run_to_run([]) is None
    assert paired.run_to_run([{"a": 2.0}]) is None
    assert paired.run_to_run([{"a": 2.0}, {"b": 2.0}, {"a": 3.0}]) is None
    with pytest.raises(ValueError, match="positive"):
        paired.run_to_run([{"a": 2.0}, {"a": 0.0}])


# work: what the bootstrap costs, counted rather than timed (its speed on a
# real machine is a benchmark's business, not a test's).


def test_estimate_resamples_all_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """2000 resamples of 10 processes x 30 blocks: one HL of the 300 pooled
    blocks (45,150 Walsh averages), then one ``_resampled_hl`` over a
    2000 x 300 table of counts for all resamples together; never an HL per
    resample (90 million Walsh averages, seconds instead of a fraction of one)."""
    calls: list[tuple[str, tuple[int, ...]]] = []
    hodges_lehmann, resampled_hl = paired.hodges_lehmann, paired._resampled_hl

    def counted_hl(x: np.ndarray) -> float:
        calls.append(("hodges_lehmann", np.shape(x)))
        return hodges_lehmann(x)

    def counted_resampled(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
        calls.append(("_resampled_hl", counts.shape))
        return resampled_hl(x, counts)

    monkeypatch.setattr(paired, "hodges_lehmann", counted_hl)
    monkeypatch.setattr(paired, "_resampled_hl", counted_resampled)
    assert paired.estimate(_cell(13, 10, 30)) is not None
    assert calls == [("hodges_lehmann", (300,)), ("_resampled_hl", (2000, 300))]
