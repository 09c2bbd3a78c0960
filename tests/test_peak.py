from __future__ import annotations

import math

import pytest

from harness.core.peak import fraction_of_peak, measure_matmul_peak


def test_small_matmul_peak_is_positive_and_complete() -> None:
    # Tiny and short: the machine is shared, and speed is never asserted here.
    result = measure_matmul_peak(size=64, repeats=2, seconds=0.01)
    assert set(result) == {
        "flops_per_s",
        "median_flops_per_s",
        "size",
        "repeats",
        "threads",
        "cpu_count",
        "numpy_blas",
    }
    assert math.isfinite(result["flops_per_s"])
    assert result["flops_per_s"] >= result["median_flops_per_s"] > 0
    assert result["size"] == 64
    assert "OMP_NUM_THREADS" in result["threads"]
    assert isinstance(result["numpy_blas"], str)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="size >= 1"):
        measure_matmul_peak(size=0)


def test_fraction_of_peak_arithmetic() -> None:
    # 50 GFLOP in 2 s is 25 GFLOP/s, a quarter of a 100 GFLOP/s peak.
    assert fraction_of_peak(50e9, 2.0, 100e9) == pytest.approx(0.25)
    assert fraction_of_peak(0.0, 1.0, 1e9) == 0.0


@pytest.mark.parametrize(("seconds", "peak"), [(0.0, 1e9), (1.0, 0.0), (-1.0, 1e9)])
def test_fraction_of_peak_rejects_zero_time_or_peak(
    seconds: float, peak: float
) -> None:
    with pytest.raises(ValueError, match="positive, finite time and peak"):
        fraction_of_peak(1e9, seconds, peak)
