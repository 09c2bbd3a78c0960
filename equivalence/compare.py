"""Pairwise comparison of two paths' outputs against one tolerance table: the
diagnostic table of ``python -m equivalence`` and the localization of two
float32 paths (verdicts come from ``equivalence.reference``).

The error measure is the normwise relative error in float64 of float32 results,
``||a - b||_2 / max(||a||_2, ||b||_2)``, so it does not depend on the size of
a tensor or on the scale of its entries.  A missing array, a shape mismatch or
a NaN counts as an infinite error.

Tolerances (float32, machine epsilon 1.2e-7).  Two correct paths differ only
by the order of floating-point sums (different convolution algorithms, fused
or split matmuls, the LSTM's time loop), which gives errors of a few epsilon
per reduction, growing mildly with depth.  Measured on this project's four
models with the four Keras and native-torch paths, batch 4 to 200 (see
docs/equivalence.md for the command): logits and loss at most
5e-7; gradients at most 3e-6, largest for VGG16's first convolutions where
backpropagation has accumulated through thirteen layers.

- ``logits`` and ``loss``: 1e-5, about 20x the largest error seen.
- gradients: 1e-4, about 30x the largest error seen, leaving room for the
  longer reductions of bigger batches and longer sequences.

A layout mistake (an un-permuted flatten, swapped kernel axes or gates) gives
errors of order 0.1 to 1, four orders of magnitude above these bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from zoo.models import get_spec
from zoo.specs import ZERO_GRADIENT_ROLES

TOLERANCES: dict[str, float] = {"logits": 1e-5, "loss": 1e-5, "grad": 1e-4}
# Trajectories: after training step t the loss and every parameter may differ
# by base * t * growth**(t - 1), per model family (``ModelSpec.module``).
# Measured with all eight paths, batch 16 (VGG16: 4 and 8), two seeds each
# (docs/equivalence.md): the worst pair's parameter error grows linearly
# for ffn (SGD; 2.4e-8 at step 1, 3.6e-7 at step 20), lenet (Adam; 7e-7 at
# step 1, 1e-5 at step 20) and lstm (Adam; 8e-6 at step 1, 1.7e-5 at step
# 10).  VGG16 under Adam at learning rate 0.01 is chaotic: 7e-5 after one step,
# 3.5e-3 after two, 4.6e-2 after three (different paths round gradients of
# nearly-zero entries to different signs, Adam turns each into a full-size
# step, and ReLUs that flip carry it on); so it is compared over two steps.
TRAJECTORY_TOLERANCE: dict[str, tuple[float, float]] = {
    "ffn": (1e-4, 1.0),
    "lenet": (1e-4, 1.0),
    "lstm": (1e-4, 1.0),
    "vgg16": (1e-3, 30.0),
}
# A model family without an entry (a new model) gets the non-chaotic one.
DEFAULT_TRAJECTORY_TOLERANCE = (1e-4, 1.0)
GRAD_PREFIX = "grad:"


def tolerance(quantity: str) -> float:
    """The tolerance of ``quantity``: an output's own ``logits:<layer>`` (a
    model with several) is judged as the logits."""
    if quantity.startswith(GRAD_PREFIX):
        return TOLERANCES["grad"]
    return TOLERANCES[quantity.partition(":")[0]]


def relative_error(a: np.ndarray, b: np.ndarray, floor: float = 0.0) -> float:
    """Normwise relative error, relative to the larger norm or ``floor``;
    ``inf`` for shape mismatches or non-finite values."""
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a64.shape != b64.shape:
        return math.inf
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        return math.inf
    scale = max(float(np.linalg.norm(a64)), float(np.linalg.norm(b64)), floor)
    if scale == 0.0:
        return 0.0
    return float(np.linalg.norm(a64 - b64)) / scale


@dataclass(frozen=True)
class Entry:
    quantity: str  # "logits", "loss" or "grad:<canonical parameter name>"
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


@dataclass(frozen=True)
class PairResult:
    model: str
    a: str
    b: str
    entries: tuple[Entry, ...]

    @property
    def ok(self) -> bool:
        return all(e.ok for e in self.entries)

    @property
    def failures(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if not e.ok)

    def error(self, quantity: str) -> float:
        return next(e.error for e in self.entries if e.quantity == quantity)

    def worst_grad(self) -> Entry:
        grads = [e for e in self.entries if e.quantity.startswith(GRAD_PREFIX)]
        return max(grads, key=lambda e: e.error / e.tolerance)


def quantity_error(
    a_arrays: Mapping[str, np.ndarray], b_arrays: Mapping[str, np.ndarray], key: str
) -> float:
    """``relative_error`` of ``key`` on both sides; ``inf`` if a side lacks it.

    The gradient of a parameter whose gradient is zero in exact arithmetic
    (``zoo.specs.ZERO_GRADIENT_ROLES``: an attention layer's key bias) is
    rounding noise in every computation, float64's too, and noise against
    noise is ~100% off: it is measured relative to the gradient of its
    layer's partner parameter instead, so a wrong computation that gives it
    a real gradient still shows."""
    if key not in a_arrays or key not in b_arrays:
        return math.inf
    return relative_error(
        a_arrays[key], b_arrays[key], _partner_norm(a_arrays, b_arrays, key)
    )


def _partner_norm(
    a_arrays: Mapping[str, np.ndarray], b_arrays: Mapping[str, np.ndarray], key: str
) -> float:
    """The larger norm of ``key``'s scale partner on both sides
    (``_scale_partner``), 0 for a quantity without one."""
    partner = _scale_partner(key)
    if partner not in a_arrays or partner not in b_arrays:
        return 0.0
    return max(
        float(np.linalg.norm(np.asarray(a_arrays[partner], np.float64))),
        float(np.linalg.norm(np.asarray(b_arrays[partner], np.float64))),
    )


def error_scale(
    a_arrays: Mapping[str, np.ndarray], b_arrays: Mapping[str, np.ndarray], key: str
) -> float:
    """The norm ``quantity_error`` divides ``key``'s difference by: the larger
    of the two sides' norms, or of its scale partner's; ``inf`` when a side
    lacks it."""
    if key not in a_arrays or key not in b_arrays:
        return math.inf
    return max(
        float(np.linalg.norm(np.asarray(a_arrays[key], np.float64))),
        float(np.linalg.norm(np.asarray(b_arrays[key], np.float64))),
        _partner_norm(a_arrays, b_arrays, key),
    )


def distance(
    a_arrays: Mapping[str, np.ndarray], b_arrays: Mapping[str, np.ndarray], key: str
) -> float:
    """The norm of the difference of ``key`` on both sides; ``inf`` when a
    side lacks it, the shapes differ or a value is not finite."""
    if key not in a_arrays or key not in b_arrays:
        return math.inf
    a64 = np.asarray(a_arrays[key], np.float64)
    b64 = np.asarray(b_arrays[key], np.float64)
    if a64.shape != b64.shape:
        return math.inf
    if not (np.isfinite(a64).all() and np.isfinite(b64).all()):
        return math.inf
    return float(np.linalg.norm(a64 - b64))


def _scale_partner(key: str) -> str:
    """For a parameter of a role in ``ZERO_GRADIENT_ROLES``, the quantity of
    its layer's partner parameter that sets its scale: ``grad:<layer>/<partner
    role>`` for its gradient ``grad:<layer>/<role>``, ``step<t>/<layer>/<partner
    role>`` for its value after training step ``t`` (its updates are Adam's
    steps on rounding noise: a zero-initialized one, Keras' default, holds
    nothing else); else ``""``.  Layer names hold no ``/`` (``zoo.specs``)."""
    head, _, name = key.partition(":") if key.startswith("grad:") else ("", "", key)
    if not head:
        step, _, name = key.partition("/")
        if not (step.startswith("step") and step[4:].isdigit()):
            return ""
        head = step
    layer, _, role = name.partition("/")
    if role not in ZERO_GRADIENT_ROLES:
        return ""
    joiner = ":" if head == "grad" else "/"
    return f"{head}{joiner}{layer}/{ZERO_GRADIENT_ROLES[role]}"


def compare(
    model: str,
    a: str,
    a_arrays: Mapping[str, np.ndarray],
    b: str,
    b_arrays: Mapping[str, np.ndarray],
) -> PairResult:
    """Compare every quantity either side produced; one side missing it fails."""
    entries = []
    for quantity in sorted(set(a_arrays) | set(b_arrays)):
        error = quantity_error(a_arrays, b_arrays, quantity)
        entries.append(Entry(quantity, error, tolerance(quantity)))
    return PairResult(model, a, b, tuple(entries))


def trajectory_tolerance(model: str) -> tuple[float, float]:
    """``(base, growth)`` of ``model``'s family (``TRAJECTORY_TOLERANCE``),
    else ``DEFAULT_TRAJECTORY_TOLERANCE``."""
    module = get_spec(model).module
    return TRAJECTORY_TOLERANCE.get(module, DEFAULT_TRAJECTORY_TOLERANCE)


def step_tolerance(model: str, step: int) -> float:
    """Tolerance for the loss and every parameter after training step ``step``.

    Each step adds its own rounding differences and carries the earlier ones
    forward, amplified by the optimizer; see ``TRAJECTORY_TOLERANCE``.
    """
    base, growth = trajectory_tolerance(model)
    return float(base * step * growth ** (step - 1))


def compare_trajectory(
    model: str,
    a: str,
    a_arrays: Mapping[str, np.ndarray],
    b: str,
    b_arrays: Mapping[str, np.ndarray],
) -> PairResult:
    """Compare two paths' trajectories (``workers.runs.trajectory``):
    quantities ``step<t>/loss`` and ``step<t>/<parameter>`` for every step."""
    entries = []
    steps = max(len(a_arrays.get("loss", ())), len(b_arrays.get("loss", ())))
    for t in range(1, steps + 1):
        tol = step_tolerance(model, t)
        try:
            loss_a, loss_b = a_arrays["loss"][t - 1], b_arrays["loss"][t - 1]
            error = relative_error(np.array([loss_a]), np.array([loss_b]))
        except (KeyError, IndexError):
            error = math.inf
        entries.append(Entry(f"step{t}/loss", error, tol))
        prefix = f"step{t}/"
        names = {k for k in (*a_arrays, *b_arrays) if k.startswith(prefix)}
        entries += [
            Entry(name, quantity_error(a_arrays, b_arrays, name), tol)
            for name in sorted(names)
        ]
    return PairResult(model, a, b, tuple(entries))
