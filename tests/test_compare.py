from __future__ import annotations

import math

import numpy as np
import pytest

from equivalence.compare import (
    TOLERANCES,
    compare,
    compare_trajectory,
    quantity_error,
    relative_error,
    step_tolerance,
)


def _arrays(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "logits": rng.standard_normal((4, 10)).astype(np.float32),
        "loss": np.float32(2.3),
        "grad:fc/kernel": rng.standard_normal((6, 10)).astype(np.float32),
    }


def test_relative_error_is_scale_free() -> None:
    a = np.array([3.0, 4.0])
    assert relative_error(a, a) == 0.0
    assert relative_error(a, a * (1 + 1e-3)) == pytest.approx(1e-3 / (1 + 1e-3))
    assert relative_error(a * 1e6, a * 1e6 * (1 + 1e-3)) == pytest.approx(
        relative_error(a, a * (1 + 1e-3))
    )


@pytest.mark.parametrize(
    "b", [np.zeros(3), np.array([1.0, np.nan]), np.array([1.0, np.inf])]
)
def test_shape_mismatch_and_non_finite_are_infinite(b: np.ndarray) -> None:
    assert relative_error(np.ones(2), b) == math.inf


def test_identical_outputs_agree() -> None:
    pair = compare("m", "p", _arrays(0), "q", _arrays(0))
    assert pair.ok
    assert pair.failures == ()


def test_rounding_noise_within_tolerance_agrees() -> None:
    a = _arrays(0)
    b = {k: v * np.float32(1 + 1e-6) for k, v in a.items()}
    assert compare("m", "p", a, "q", b).ok


def test_a_permuted_gradient_is_caught_and_named() -> None:
    a = _arrays(0)
    b = dict(a)
    b["grad:fc/kernel"] = a["grad:fc/kernel"][::-1]  # rows in the wrong order
    pair = compare("m", "p", a, "q", b)
    assert not pair.ok
    assert [e.quantity for e in pair.failures] == ["grad:fc/kernel"]
    assert pair.worst_grad().error > 1e3 * TOLERANCES["grad"]


def test_a_missing_quantity_fails() -> None:
    a = _arrays(0)
    b = {k: v for k, v in a.items() if k != "loss"}
    assert [e.quantity for e in compare("m", "p", a, "q", b).failures] == ["loss"]


def _trajectory(seed: int, steps: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    arrays = {"loss": rng.uniform(1, 2, steps)}
    for t in range(1, steps + 1):
        arrays[f"step{t}/fc1/kernel"] = rng.standard_normal((5, 4)).astype(np.float32)
        arrays[f"step{t}/fc1/bias"] = rng.standard_normal(4).astype(np.float32)
    return arrays


def test_trajectory_tolerance_grows_linearly_and_vgg_geometrically() -> None:
    assert step_tolerance("ffn", 10) == pytest.approx(10 * step_tolerance("ffn", 1))
    assert step_tolerance("vgg16", 2) == pytest.approx(60 * step_tolerance("vgg16", 1))
    # variants share their family's schedule
    assert step_tolerance("vgg-rysia", 2) == step_tolerance("vgg16", 2)


def test_a_model_family_without_a_trajectory_entry_gets_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from equivalence import compare, reference

    monkeypatch.delitem(compare.TRAJECTORY_TOLERANCE, "vgg16")
    base, growth = compare.DEFAULT_TRAJECTORY_TOLERANCE
    assert step_tolerance("vgg16", 3) == pytest.approx(3 * base * growth**2)
    assert reference.trajectory_floor("vgg16", 2) == 0.0  # not chaotic by default


def test_identical_trajectories_agree_at_every_step() -> None:
    pair = compare_trajectory("ffn", "p", _trajectory(0), "q", _trajectory(0))
    assert pair.ok
    assert {e.quantity for e in pair.entries} >= {"step3/loss", "step3/fc1/bias"}


def test_a_trajectory_parting_at_one_step_is_caught_at_that_step() -> None:
    a = _trajectory(0)
    b = {k: v.copy() for k, v in a.items()}
    b["step2/fc1/bias"] = b["step2/fc1/bias"] * np.float32(1.01)
    b["loss"][2] *= 1.01
    failures = compare_trajectory("ffn", "p", a, "q", b).failures
    assert [e.quantity for e in failures] == ["step2/fc1/bias", "step3/loss"]


def test_a_shorter_trajectory_fails() -> None:
    short = {k: v for k, v in _trajectory(0).items() if not k.startswith("step3/")}
    short["loss"] = short["loss"][:2]
    failures = compare_trajectory("ffn", "p", _trajectory(0), "q", short).failures
    assert {e.quantity for e in failures} == {
        "step3/loss",
        "step3/fc1/kernel",
        "step3/fc1/bias",
    }


def test_a_gradient_zero_in_exact_arithmetic_is_judged_on_its_layers_scale() -> None:
    """An attention layer's key bias has no gradient in exact arithmetic:
    two correct computations' rounding noise is ~100% apart relative to
    itself, but tiny against the key kernel's gradient; a computation that
    gives it a real gradient is still far off."""
    rng = np.random.default_rng(0)
    kernel = rng.standard_normal((8, 2, 4))
    noise_a, noise_b = (rng.standard_normal((2, 4)) * 1e-9 for _ in range(2))
    a = {"grad:att/key/kernel": kernel, "grad:att/key/bias": noise_a}
    b = {"grad:att/key/kernel": kernel, "grad:att/key/bias": noise_b}
    assert relative_error(noise_a, noise_b) > 0.5
    assert quantity_error(a, b, "grad:att/key/bias") < 1e-8
    wrong = {**b, "grad:att/key/bias": rng.standard_normal((2, 4))}
    assert quantity_error(a, wrong, "grad:att/key/bias") > 0.1
    # the bias after a training step: Adam's steps on noise, on the same scale
    a = {"step1/att/key/kernel": kernel, "step1/att/key/bias": noise_a}
    b = {"step1/att/key/kernel": kernel, "step1/att/key/bias": noise_b}
    assert quantity_error(a, b, "step1/att/key/bias") < 1e-8
    # any other bias is judged on its own scale
    a = {"grad:att/query/kernel": kernel, "grad:att/query/bias": noise_a}
    b = {"grad:att/query/kernel": kernel, "grad:att/query/bias": noise_b}
    assert quantity_error(a, b, "grad:att/query/bias") > 0.5
