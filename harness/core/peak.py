"""The machine's attainable float32 matmul rate through NumPy's BLAS.

NumPy only, no deep-learning framework.  ``measure_matmul_peak`` times
``C = A @ B`` for square float32 matrices in the current process and reports
FLOP/s as ``2*n**3 / t``.  That is a roofline ceiling for dense compute on this
CPU as NumPy's BLAS reaches it with the current thread settings, *not* the
vendor's theoretical peak (no clock times vector width times cores
arithmetic): a path's FLOP/s divided by it says how much of the attainable
dense rate the path used.  The orchestrator measures it once per run, before
the workers start, so the ceiling and the timings share the machine's state.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from typing import TypedDict

import numpy as np

# Environment variables that set BLAS and OpenMP thread counts; a peak means
# little without the thread count it ran with.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


class MatmulPeak(TypedDict):
    """What ``measure_matmul_peak`` returns (JSON-ready)."""

    flops_per_s: float
    median_flops_per_s: float
    size: int
    repeats: int
    threads: dict[str, str | None]
    cpu_count: int | None
    numpy_blas: str


def _blas_description() -> str:
    """A short ``name version`` of NumPy's BLAS, or ``unknown``.

    ``show_config(mode="dicts")`` exists from NumPy 1.25 on; older NumPy (the
    MXNet environment's 1.23) only prints, so it gets ``unknown``.
    """
    try:
        config = np.show_config(mode="dicts")
    except TypeError:
        return "unknown"
    try:
        blas = config["Build Dependencies"]["blas"]
        return f"{blas['name']} {blas['version']}".strip()
    except (KeyError, TypeError):
        return "unknown"


def measure_matmul_peak(
    size: int = 2048, repeats: int = 5, seconds: float = 1.0
) -> MatmulPeak:
    """Best and median float32 matmul FLOP/s of NumPy's BLAS in this process.

    One untimed product warms up the BLAS (thread pool start, page faults);
    then each of ``repeats`` timed repeats runs the product back to back until
    at least ``seconds`` have passed, so a small ``size`` is still timed over
    many calls.  The best repeat is the ceiling; the median shows the noise.
    """
    if size < 1 or repeats < 1 or not seconds > 0:
        raise ValueError(
            "measure_matmul_peak needs size >= 1, repeats >= 1 and seconds > 0, "
            f"not size={size}, repeats={repeats}, seconds={seconds}."
        )
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.empty((size, size), dtype=np.float32)
    # Writing into ``c`` keeps allocation out of the timed loop.
    np.matmul(a, b, out=c)
    flops_per_product = 2 * size**3
    rates = []
    for _ in range(repeats):
        products = 0
        start = time.perf_counter()
        while True:
            np.matmul(a, b, out=c)
            products += 1
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        rates.append(flops_per_product * products / elapsed)
    return {
        "flops_per_s": max(rates),
        "median_flops_per_s": statistics.median(rates),
        "size": size,
        "repeats": repeats,
        "threads": {name: os.environ.get(name) for name in THREAD_VARIABLES},
        "cpu_count": os.cpu_count(),
        "numpy_blas": _blas_description(),
    }


def fraction_of_peak(flops: float, seconds: float, peak: float) -> float:
    """The share of ``peak`` FLOP/s that ``flops`` done in ``seconds`` reached."""
    if not (seconds > 0 and peak > 0 and math.isfinite(seconds * peak)):
        raise ValueError(
            "fraction_of_peak needs a positive, finite time and peak, "
            f"not seconds={seconds} and peak={peak}."
        )
    return flops / seconds / peak
