"""Judging a path against a float64 reference, as PyTorch's accuracy checker does.

Two float32 paths that differ are not told apart by comparing them with each
other: which one is off?  So every path is measured against a float64 run of
the same model, weights and data (``REFERENCE``: the native PyTorch model with
every parameter and input in float64, ``HARNESS_NATIVE_DTYPE``), and that
error is set against the error a correct float32 computation makes on the same
case (``BASELINE``: the same native PyTorch model in float32, never given a
fault).  A path passes a quantity when

    error(path, float64) <= MULTIPLE * (error(baseline, float64) + FLOOR)

with the normwise relative error of ``equivalence.compare``.  The multiple
adapts the bound to the case: a gradient that nearly cancels (the LSTM's
2-class bias gradient) has a large float32 error for every correct
computation, and a well-conditioned one a small error, so one fixed tolerance
is too loose for the second and fragile for the first.  ``FLOOR``, about
float32's machine epsilon, keeps a quantity that the baseline happens to get
(nearly) exactly right from failing a path that rounded once differently.
A path's "m" (``needed_multiple``) is the multiple it needed: its largest
``error / (baseline error + FLOOR)``; it passes when that is at most
``MULTIPLE``.

``MULTIPLE`` comes from measurements (README, "Why MULTIPLE = 10").

A reference written with the same model code as one of the paths would share
that path's bugs.  So a second float64 run, the native JAX model with JAX's
64-bit mode (``CROSS_CHECK``: other code, other framework), is held against
the reference on every quantity: they must agree within ``CROSS_CHECK_SHARE``
of each quantity's allowance, or no path is judged (``cross_check``).
Framework-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from equivalence.compare import (
    TRAJECTORY_TOLERANCE,
    Entry,
    PairResult,
    quantity_error,
    step_tolerance,
)
from zoo.specs import get_spec

REFERENCE = "float64"  # the native PyTorch model in float64
BASELINE = "float32"  # the same model in float32, fault-free
CROSS_CHECK = "float64-jax"  # the native JAX model in float64
REFERENCE_PATH = "native-torch"
CROSS_CHECK_PATH = "native-jax"
REFERENCE_ENV = {"HARNESS_NATIVE_DTYPE": "float64"}
BASELINE_ENV = {"HARNESS_NATIVE_DTYPE": "float32"}
# The two float64 runs must agree within this share of what a path is
# allowed: the reference's own doubt stays negligible against the judgement.
CROSS_CHECK_SHARE = 0.01

# Measured over 42 cases (README, "Why MULTIPLE = 10"): a correct path needed
# at most 3.41; MXNet's old log_softmax (3.5e-6 off) needs 19.1 on the LSTM at
# seed 15, batch 4, and a bfloat16 computation thousands.
MULTIPLE = 10.0
# The least error a float32 result is credited with (float32's machine epsilon
# is 1.2e-7), so that a baseline that is exact by luck allows some rounding.
FLOOR = 1e-7


def allowed(baseline_error: float) -> float:
    """The largest error against float64 a path may have on a quantity whose
    float32 baseline has ``baseline_error``."""
    return MULTIPLE * (baseline_error + FLOOR)


def judge(
    model: str,
    path: str,
    arrays: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    baseline: Mapping[str, np.ndarray],
) -> PairResult:
    """``path``'s every quantity against float64, each with its own allowance.

    A quantity the reference has and the path lacks (or the path has and the
    reference lacks) counts as an infinite error.  After a training step of
    a chaotic model, at least ``trajectory_floor``."""
    entries = []
    for quantity in sorted(set(arrays) | set(reference), key=_walking_order):
        error = quantity_error(arrays, reference, quantity)
        base = quantity_error(baseline, reference, quantity)
        # a quantity the reference or the baseline lacks allows nothing
        limit = allowed(base) if base < math.inf else 0.0
        step = _step(quantity)
        if step is not None and limit > 0:
            limit = max(limit, trajectory_floor(model, step))
        entries.append(Entry(quantity, error, limit))
    return PairResult(model, path, REFERENCE, tuple(entries))


def _walking_order(quantity: str) -> tuple[int, int, str]:
    """Logits, loss, gradients, then each training step's quantities in step
    order: the order a reader follows a difference in."""
    step = _step(quantity)
    if step is not None:
        return (3, step, quantity)
    kind = {"logits": 0, "loss": 1}.get(quantity, 2)
    return (kind, 0, quantity)


def _step(quantity: str) -> int | None:
    """``t`` of a ``step<t>/...`` quantity, else ``None``."""
    head, slash, _ = quantity.partition("/")
    digits = head.removeprefix("step")
    return (
        int(digits) if slash and head.startswith("step") and digits.isdigit() else None
    )


def trajectory_floor(model: str, step: int) -> float:
    """The least error allowed after training step ``step`` of a model whose
    trajectories are chaotic (growth above 1 in
    ``equivalence.compare.TRAJECTORY_TOLERANCE``: VGG16 under Adam at 0.01),
    else 0.  There Adam turns the rounding of nearly-zero gradient entries
    into full-size steps of either sign, so after two steps the baseline's
    own error is one draw of a chaotic process: at batch 16, seed 0,
    native TensorFlow was 8.7e-4 from float64 on a kernel where the baseline
    was 1.8e-5 (m = 48), while after one step every path needed m <= 1.  The
    measured spread of correct paths (``step_tolerance``) bounds it instead."""
    growth = TRAJECTORY_TOLERANCE[get_spec(model).module][1]
    return step_tolerance(model, step) if growth > 1 else 0.0


def cross_check(
    reference: Mapping[str, np.ndarray],
    second: Mapping[str, np.ndarray],
    baseline: Mapping[str, np.ndarray],
) -> str | None:
    """One sentence when the two float64 runs disagree on a quantity by more
    than ``CROSS_CHECK_SHARE`` of its allowance (or one lacks it), else
    ``None``."""
    for quantity in sorted(set(reference) | set(second), key=_walking_order):
        error = quantity_error(second, reference, quantity)
        limit = CROSS_CHECK_SHARE * allowed(
            quantity_error(baseline, reference, quantity)
        )
        if not error <= limit:
            return (
                f"the float64 runs of {REFERENCE_PATH} and {CROSS_CHECK_PATH} "
                f"disagree on {quantity} by {error:.1e} (allowed {limit:.1e}): one "
                "of the two models is wrong, so no path can be judged"
            )
    return None


def per_step(trajectory: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A trajectory (``workers.runs.trajectory``) with its ``loss`` vector
    split into one ``step<t>/loss`` per step, so each step is judged alone."""
    arrays = {k: v for k, v in trajectory.items() if k != "loss"}
    for t, loss in enumerate(np.atleast_1d(trajectory.get("loss", [])), start=1):
        arrays[f"step{t}/loss"] = np.asarray([loss])
    return arrays


def needed_multiple(result: PairResult) -> float:
    """The multiple of ``baseline error + FLOOR`` that ``result`` (from
    ``judge``) needed on its worst quantity, its "m" (``inf`` for a missing
    quantity or a NaN)."""
    return max(
        (
            MULTIPLE * e.error / e.tolerance if e.tolerance > 0 else math.inf
            for e in result.entries
        ),
        default=0.0,
    )
