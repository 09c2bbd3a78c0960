"""Judging against float64 (``equivalence.reference``): a path passes a
quantity when its error against float64 is at most MULTIPLE times a correct
float32 computation's error (plus FLOOR), and each wrong input is caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from equivalence.check import missing_framework
from equivalence.compare import step_tolerance
from equivalence.reference import (
    FLOOR,
    MULTIPLE,
    allowed,
    cross_check,
    judge,
    needed_multiple,
    per_step,
    trajectory_floor,
)
from workers.launch import Reply


def _case(seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A float64 'reference' and its float32 rounding (the 'baseline')."""
    rng = np.random.default_rng(seed)
    reference = {
        "logits": rng.standard_normal((8, 10)),
        "loss": np.float64(2.3),
        "grad:fc/kernel": rng.standard_normal((6, 10)),
    }
    baseline = {k: np.asarray(v, np.float32) for k, v in reference.items()}
    return reference, baseline


def _bfloat16(a: np.ndarray) -> np.ndarray:
    """``a`` rounded to bfloat16 (8 significant bits) and back."""
    bits = np.asarray(a, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x8000)) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def test_a_correct_float32_path_passes_with_room() -> None:
    reference, baseline = _case()
    # Another correct float32 computation: different rounding, same size.
    other = {k: np.asarray(v * (1 + 2e-8), np.float32) for k, v in reference.items()}
    result = judge("m", "p", other, reference, baseline)
    assert result.ok, result.failures
    assert needed_multiple(result) <= MULTIPLE


def test_a_bfloat16_path_fails_on_what_it_rounded() -> None:
    reference, baseline = _case()
    wrong = {**baseline, "logits": _bfloat16(reference["logits"])}
    result = judge("m", "p", wrong, reference, baseline)
    assert not result.ok
    assert [e.quantity for e in result.failures] == ["logits"]
    assert needed_multiple(result) > MULTIPLE


def test_the_allowance_follows_the_baseline_error() -> None:
    # A nearly cancelling quantity: the baseline's own float32 error is large,
    # so a path as far off passes, and one 20x farther fails.
    reference = {"grad:b": np.array([1.0, -1.0 + 1e-5])}
    baseline = {"grad:b": np.array([1.0, -1.0 + 1.1e-5])}
    base = abs(1.1e-5 - 1e-5) / math.hypot(1.0, 1.0 - 1e-5)
    assert allowed(base) == pytest.approx(MULTIPLE * (base + FLOOR))
    near = {"grad:b": np.array([1.0, -1.0 + 0.9e-5])}
    far = {"grad:b": np.array([1.0, -1.0 + 3e-5])}
    assert judge("m", "p", near, reference, baseline).ok
    assert not judge("m", "p", far, reference, baseline).ok


def test_the_floor_spares_a_baseline_that_is_exact_by_luck() -> None:
    reference = {"loss": np.array([2.0])}
    exact = {"loss": np.array([2.0])}
    one_ulp = {"loss": np.array([2.0 * (1 + 2**-23)])}
    ten_ulps = {"loss": np.array([2.0 * (1 + 2e-5)])}
    assert judge("m", "p", one_ulp, reference, exact).ok
    assert not judge("m", "p", ten_ulps, reference, exact).ok


@pytest.mark.parametrize("damage", ["missing", "extra", "nan", "shape"])
def test_missing_or_broken_quantities_fail(damage: str) -> None:
    reference, baseline = _case()
    path = dict(baseline)
    if damage == "missing":
        del path["grad:fc/kernel"]
    elif damage == "extra":
        path["grad:other"] = np.ones(3, np.float32)
    elif damage == "nan":
        path["logits"] = np.full_like(baseline["logits"], np.nan)
    else:
        path["logits"] = baseline["logits"][:4]
    result = judge("m", "p", path, reference, baseline)
    assert not result.ok
    assert needed_multiple(result) == math.inf


def test_per_step_splits_the_loss_vector() -> None:
    trajectory = {"loss": np.array([2.0, 1.5]), "step1/w": np.ones(2)}
    assert sorted(per_step(trajectory)) == ["step1/loss", "step1/w", "step2/loss"]
    assert per_step(trajectory)["step2/loss"].tolist() == [1.5]


@pytest.mark.parametrize(
    ("path", "error", "excused"),
    [
        ("native-mxnet", "cannot start mxnet-not-installable for native-mxnet", True),
        ("native-mxnet", "ModuleNotFoundError: No module named 'mxnet'", True),
        (
            "native-mxnet",
            "ImportError: cannot import name 'x'",
            False,
        ),
        ("native-torch", "cannot start /nowhere/python for native-torch", False),
        ("native-jax", "ModuleNotFoundError: No module named 'jax'", False),
    ],
)
def test_only_a_missing_optional_framework_is_excused(
    path: str, error: str, excused: bool
) -> None:
    assert missing_framework(path, Reply("unavailable", error=error)) is excused
    assert not missing_framework(path, Reply("crashed", error=error))


@pytest.mark.parametrize(("model", "floored"), [("vgg16", True), ("lstm", False)])
def test_only_a_chaotic_trajectory_gets_its_measured_floor(
    model: str, floored: bool
) -> None:
    # An exact baseline allows 1e-6; after step 2 of VGG16 (chaotic under
    # Adam) the measured trajectory tolerance is allowed, of the LSTM not.
    reference = {"step2/w": np.ones(4), "grad:w": np.ones(4)}
    baseline = {k: np.ones(4) for k in reference}
    off = {k: np.ones(4) * (1 + 1e-4) for k in reference}
    failing = {e.quantity for e in judge(model, "p", off, reference, baseline).failures}
    assert failing == ({"grad:w"} if floored else {"grad:w", "step2/w"})
    assert trajectory_floor(model, 2) == (step_tolerance(model, 2) if floored else 0)


def test_the_two_float64_runs_must_agree_closely() -> None:
    reference, baseline = _case()
    # Another float64 computation: rounding at float64's level agrees.
    second = {k: np.asarray(v) * (1 + 1e-15) for k, v in reference.items()}
    assert cross_check(reference, second, baseline) is None
    # A second model off by what a path would be allowed (and more than 1% of
    # it) stops the judgement, naming the quantity.
    wrong = {**second, "grad:fc/kernel": reference["grad:fc/kernel"] * (1 + 1e-6)}
    sentence = cross_check(reference, wrong, baseline)
    assert sentence is not None
    assert "disagree on grad:fc/kernel" in sentence
    missing = {k: v for k, v in second.items() if k != "loss"}
    assert cross_check(reference, missing, baseline) is not None
