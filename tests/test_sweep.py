"""harness.stats.sweep: the robust line t(b) = a + c b through a batch-size sweep,
its hierarchical bootstrap intervals and the break-even batch size, on
synthetic sweeps from known a and c (no framework)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats import paired, sweep
from tests.conftest import draws

FIXED_S = 1e-3  # a: 1 ms per step
PER_SAMPLE_S = 1e-5  # c: 10 µs per sample
BATCHES = (16, 32, 64, 128, 256)


def _sweep(
    seed: int,
    *,
    fixed: float = FIXED_S,
    per_sample: float = PER_SAMPLE_S,
    batches: tuple[int, ...] = BATCHES,
    processes: int = 5,
    blocks: int = 20,
    block_noise: float = 0.03,
    process_noise: float = 0.02,
) -> dict[int, list[list[float]]]:
    """Blocks of ``a + c b`` seconds times a lognormal per-process factor
    times a lognormal per-block factor, independently at each batch size."""
    rng = np.random.default_rng(seed)
    out: dict[int, list[list[float]]] = {}
    for b in batches:
        true = fixed + per_sample * b
        out[b] = [
            list(
                true
                * math.exp(rng.normal(0.0, process_noise))
                * np.exp(rng.normal(0.0, block_noise, blocks))
            )
            for _ in range(processes)
        ]
    return out


def _line(
    fixed: float, per_sample: float, batch_sizes: tuple[int, ...]
) -> sweep.LineFit:
    """A LineFit with given a and c (intervals collapsed onto them)."""
    return sweep.LineFit(
        fixed_s=fixed,
        fixed_low=fixed,
        fixed_high=fixed,
        per_sample_s=per_sample,
        per_sample_low=per_sample,
        per_sample_high=per_sample,
        batches=batch_sizes,
        centres_s=tuple(fixed + per_sample * b for b in batch_sizes),
        worst_residual=0.0,
    )


def test_fit_recovers_a_and_c_within_intervals() -> None:
    f = sweep.fit(_sweep(1))
    assert f.batches == BATCHES
    assert len(f.centres_s) == len(BATCHES)
    assert f.fixed_low <= FIXED_S <= f.fixed_high
    assert f.per_sample_low <= PER_SAMPLE_S <= f.per_sample_high
    assert f.fixed_low <= f.fixed_s <= f.fixed_high
    assert f.per_sample_low <= f.per_sample_s <= f.per_sample_high
    assert f.fixed_s == pytest.approx(FIXED_S, rel=0.05)
    assert f.per_sample_s == pytest.approx(PER_SAMPLE_S, rel=0.05)
    assert f.worst_residual < 0.03  # a line fits this sweep


def test_intervals_cover_the_truth() -> None:
    """Over 50 simulated sweeps the 95% intervals hold a and c at least 80%
    of the time (about 97% measured: the two-stage bootstrap errs wide)."""
    fits = [sweep.fit(_sweep(seed), resamples=200, seed=seed) for seed in range(50)]
    fixed = sum(f.fixed_low <= FIXED_S <= f.fixed_high for f in fits)
    per_sample = sum(
        f.per_sample_low <= PER_SAMPLE_S <= f.per_sample_high for f in fits
    )
    assert fixed >= 40
    assert per_sample >= 40


def test_deterministic_for_a_seed_and_seed_matters() -> None:
    data = _sweep(3)
    assert sweep.fit(data, seed=7) == sweep.fit(data, seed=7)
    assert sweep.fit(data, seed=7) != sweep.fit(data, seed=8)


def test_fit_resamples_each_batch_size_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """5 batch sizes x 5 processes x 20 blocks x 1000 resamples: one
    ``_resampled_hl`` over all 1000 resamples per batch size and one
    Theil-Sen fit of every resample together, counted rather than timed (the
    fit's speed on a real machine is a benchmark's business, not a test's)."""
    calls: list[tuple[str, tuple[int, ...]]] = []
    resampled_hl, theil_sen = paired._resampled_hl, sweep._theil_sen

    def counted_resampled(x: np.ndarray, counts: np.ndarray) -> np.ndarray:
        calls.append(("_resampled_hl", counts.shape))
        return resampled_hl(x, counts)

    def counted_theil_sen(
        x: np.ndarray, t: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        calls.append(("_theil_sen", t.shape))
        return theil_sen(x, t)

    monkeypatch.setattr(paired, "_resampled_hl", counted_resampled)
    monkeypatch.setattr(sweep, "_theil_sen", counted_theil_sen)
    sweep.fit(_sweep(4))
    assert calls == [("_resampled_hl", (1000, 100))] * 5 + [
        ("_theil_sen", (1, 5)),  # the line through the centres
        ("_theil_sen", (1000, 5)),  # every resample's line
    ]


def test_one_outlier_batch_size_does_not_drag_the_line() -> None:
    """Times x3 at one batch size of five: Theil-Sen keeps c within 20%; a
    least-squares line through the same centres does not."""
    data = _sweep(5)
    data[256] = [[3 * t for t in p] for p in data[256]]
    f = sweep.fit(data)
    assert f.per_sample_s == pytest.approx(PER_SAMPLE_S, rel=0.2)
    assert f.fixed_s == pytest.approx(FIXED_S, rel=0.2)
    assert f.worst_residual > 0.5  # the bad batch size shows as a misfit
    ols_slope, _ = np.polyfit(f.batches, f.centres_s, 1)
    assert abs(ols_slope / PER_SAMPLE_S - 1) > 0.2


def test_a_few_outlier_blocks_do_not_move_the_centres() -> None:
    clean = _sweep(6)
    dirty = {b: [list(p) for p in ps] for b, ps in clean.items()}
    for ps in dirty.values():
        ps[0][0] *= 50  # one block in a hundred, 50 times too slow
    a, b = sweep.fit(clean), sweep.fit(dirty)
    assert b.per_sample_s == pytest.approx(a.per_sample_s, rel=0.02)
    assert b.fixed_s == pytest.approx(a.fixed_s, rel=0.05)


def test_time_independent_of_batch_gives_c_interval_holding_zero() -> None:
    """A path whose time does not depend on b (wrong data, or a constant
    bottleneck) must not be read as having a per-sample cost."""
    f = sweep.fit(_sweep(8, per_sample=0.0))
    assert f.per_sample_low <= 0.0 <= f.per_sample_high
    assert f.fixed_s == pytest.approx(FIXED_S, rel=0.05)


def test_single_process_and_two_batch_sizes() -> None:
    data = _sweep(9, batches=(1, 100), processes=1)
    f = sweep.fit(data, resamples=50)
    assert f.batches == (1, 100)
    assert f.worst_residual < 1e-12  # two points lie on their line
    assert f.per_sample_s == pytest.approx(PER_SAMPLE_S, rel=0.2)


def test_processes_without_blocks_are_left_out() -> None:
    data = _sweep(10)
    with_empty = {b: [*ps, []] for b, ps in data.items()}
    assert sweep.fit(with_empty, seed=1) == sweep.fit(data, seed=1)


@given(
    per_sample=st.floats(1e-9, 1e-2),
    samples_worth=st.floats(1.0, 1e4),  # a = c times this many samples
    batch_sizes=st.sets(st.integers(1, 1024), min_size=2, max_size=6),
    blocks=st.integers(1, 4),
)
@settings(max_examples=draws(40))
def test_exact_line_is_recovered(
    per_sample: float, samples_worth: float, batch_sizes: set[int], blocks: int
) -> None:
    """Noise-free data on a line give back its a and c to 1e-9.  a is drawn
    as c times 1 to 10^4 samples, not freely: with a fixed cost of a tiny
    fraction of a sample, or of millions, rounding in ``a + c b`` alone
    already moves the recovered a or c by more than 1e-9."""
    fixed = per_sample * samples_worth
    data = {b: [[fixed + per_sample * b] * blocks] * 2 for b in batch_sizes}
    f = sweep.fit(data, resamples=20)
    assert f.fixed_s == pytest.approx(fixed, rel=1e-9)
    assert f.per_sample_s == pytest.approx(per_sample, rel=1e-9)
    assert f.worst_residual < 1e-12
    assert f.batches == tuple(sorted(batch_sizes))


def test_breakeven_holds_at_one() -> None:
    # added 1 µs < 10% of a Keras step of 20 + 1 µs at b = 1
    keras, native = _line(20e-6, 1e-6, (1, 2)), _line(19e-6, 1e-6, (1, 2))
    assert sweep.breakeven_batch(keras, native) == 1.0


def test_breakeven_crossing() -> None:
    # added 100 µs; 10% of a Keras step 200 µs + 1 µs b reaches it at b = 800
    keras, native = _line(200e-6, 1e-6, (1, 2)), _line(100e-6, 0.5e-6, (1, 2))
    b = sweep.breakeven_batch(keras, native)
    assert b == pytest.approx(800.0)
    # just beyond it the share holds, just before it does not
    assert b is not None
    for x, holds in ((b * 1.001, True), (b * 0.999, False)):
        assert (0.1 * (200e-6 + 1e-6 * x) > 100e-6) is holds
    # a larger share is reached sooner: 50% of (200 + b) µs > 100 µs at b = 0
    assert sweep.breakeven_batch(keras, native, share=0.5) == 1.0
    assert sweep.breakeven_batch(keras, native, share=0.25) == pytest.approx(200.0)


def test_breakeven_never() -> None:
    keras = _line(200e-6, 0.0, (1, 2))
    assert sweep.breakeven_batch(keras, _line(100e-6, 1e-6, (1, 2))) is None
    keras = _line(200e-6, -1e-7, (1, 2))
    assert sweep.breakeven_batch(keras, _line(100e-6, 1e-6, (1, 2))) is None


def test_breakeven_rejects_a_bad_share() -> None:
    line = _line(1e-4, 1e-6, (1, 2))
    for share in (0.0, -0.1, math.nan, math.inf):
        with pytest.raises(ValueError, match="share"):
            sweep.breakeven_batch(line, line, share=share)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "at least 2 batch sizes"),
        ({8: [[1e-3]]}, "at least 2 batch sizes"),
        ({0: [[1e-3]], 8: [[2e-3]]}, "at least 1"),
        ({-4: [[1e-3]], 8: [[2e-3]]}, "at least 1"),
        ({4: [[1e-3]], 8: []}, "batch size 8 has no timed block"),
        ({4: [[1e-3]], 8: [[], []]}, "batch size 8 has no timed block"),
        ({4: [[1e-3]], 8: [[2e-3, 0.0]]}, "not a positive finite number"),
        ({4: [[1e-3]], 8: [[2e-3, -1e-3]]}, "not a positive finite number"),
        ({4: [[math.nan]], 8: [[2e-3]]}, "not a positive finite number"),
        ({4: [[1e-3]], 8: [[math.inf]]}, "not a positive finite number"),
    ],
)
def test_bad_sweeps_raise(data: sweep.Sweep, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sweep.fit(data, resamples=10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"resamples": 0}, "resamples"),
        ({"level": 0.0}, "level"),
        ({"level": 1.0}, "level"),
        ({"level": 1.5}, "level"),
    ],
)
def test_bad_settings_raise(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        sweep.fit(_sweep(11), **kwargs)
