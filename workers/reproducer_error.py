"""A reproducer's error against float64, written once for two uses: in
every reproducer ``harness fuzz --write`` makes (``workers.keras_code``
writes this function's source into it) and on the tool's own paths when a
finding is triaged (``harness.fuzz.report``), so plain Keras and the tool
are read alike.  NumPy only: the orchestrator imports it.
"""

from __future__ import annotations

import numpy as np


def error(value: object, expected: np.ndarray) -> float:
    """A reproducer's error: ``max |value - expected| / max |expected|``, the
    difference alone where float64 is all zeros."""
    got = np.asarray(value, np.float64)
    scale = np.abs(expected).max()  # absolute where float64 is all zeros
    return float(np.abs(got - expected).max() / (scale if scale > 0 else 1.0))
