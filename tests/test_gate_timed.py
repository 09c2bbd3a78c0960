"""The gate holds the timed closures against the checked results, framework-free.

Every comparison is fed a deliberately wrong input (a parameter trained with
the wrong rate, logits computed in bfloat16, the wrong mini-batch, a missing
quantity) and must name it.  The timed faults enter the closures the harness
times and nothing else: shown with a stand-in runner in NumPy, served by the
real ``workers.serve`` task code.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from equivalence.compare import step_tolerance, tolerance
from harness.core.gate import PARAM_PREFIX, timed_disagreement, verdict_key
from native import faults
from workers import messages as m
from workers import serve
from workers.paths import get_path
from workers.protocol import Predictor, TrainCheck, Trainer, check_training
from zoo.arrays import load_npz, save_npz
from zoo.data import make_batches
from zoo.models import get_spec
from zoo.specs import ModelSpec
from zoo.weights import make_weights

STEPS = 2
RNG = np.random.default_rng(0)
PARAMS = {
    "fc1/kernel": RNG.normal(size=(6, 4)).astype(np.float32),
    "fc1/bias": RNG.normal(size=4).astype(np.float32),
}
LOGITS = RNG.normal(size=(STEPS, 3, 10)).astype(np.float32)


def _trajectory(params: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    arrays = {f"step{STEPS}/{k}": a for k, a in params.items()}
    arrays.update({f"step1/{k}": a * 0 for k, a in params.items()})
    arrays["loss"] = np.ones(STEPS)
    return arrays


def _timed(
    params: Mapping[str, np.ndarray], logits: np.ndarray
) -> dict[str, np.ndarray]:
    return {**{PARAM_PREFIX + k: a for k, a in params.items()}, "logits": logits}


def _disagreement(
    params: Mapping[str, np.ndarray] = PARAMS, logits: np.ndarray = LOGITS
) -> str | None:
    return timed_disagreement(
        "ffn", STEPS, _timed(params, logits), _trajectory(PARAMS), {"logits": LOGITS[0]}
    )


def test_closures_that_computed_what_was_checked_pass() -> None:
    assert _disagreement() is None
    # Rounding-sized differences stay within the tolerances.
    nudged = {k: a * np.float32(1 + 1e-7) for k, a in PARAMS.items()}
    assert _disagreement(nudged, LOGITS * np.float32(1 + 1e-7)) is None


def test_a_trainer_off_by_a_learning_rate_is_named_with_its_worst_parameter() -> None:
    trained = dict(PARAMS, **{"fc1/bias": PARAMS["fc1/bias"] * np.float32(1.01)})
    reason = _disagreement(trained)
    assert reason is not None
    assert reason.startswith(
        "the timed trainer's parameter fc1/bias after 2 steps differs from the "
        "path's checked trajectory by 9.90e-03"
    )
    assert f"(tolerance {step_tolerance('ffn', STEPS):.0e})" in reason
    assert "predictor" not in reason


def test_a_predictor_in_bfloat16_is_named_with_its_error() -> None:
    reason = _disagreement(logits=faults.bfloat16_rounded(LOGITS))
    assert reason is not None
    assert reason.startswith(
        "the timed predictor's logits of mini-batch 0 differ from the path's "
        "checked logits by "
    )
    assert f"(tolerance {tolerance('logits'):.0e})" in reason
    assert "trainer" not in reason


def test_the_predictor_is_compared_on_the_checked_mini_batch() -> None:
    # The checked logits are mini-batch 0's; the predictor's mini-batch 1 is
    # another batch, so comparing it would be a mistake the check must see.
    assert timed_disagreement(
        "ffn", STEPS, _timed(PARAMS, LOGITS), _trajectory(PARAMS), {"logits": LOGITS[1]}
    )
    assert (
        timed_disagreement(
            "ffn",
            STEPS,
            _timed(PARAMS, LOGITS),
            _trajectory(PARAMS),
            {"logits": LOGITS[1]},
            batch_index=1,
        )
        is None
    )


@pytest.mark.parametrize(
    ("timed", "named"),
    [
        ({"logits": LOGITS}, "fc1/bias after 2 steps differs from the path's "),
        (_timed({**PARAMS, "extra": np.ones(2)}, LOGITS), "parameter extra after"),
        (_timed(PARAMS, LOGITS[:0]), "logits of mini-batch 0 differ"),
        ({PARAM_PREFIX + k: a for k, a in PARAMS.items()}, "logits of mini-batch 0"),
        (_timed(PARAMS, LOGITS[:, :, :5]), "logits of mini-batch 0 differ"),
    ],
    ids=["no-params", "extra-param", "no-batches", "no-logits", "wrong-shape"],
)
def test_a_missing_or_misshapen_quantity_is_an_infinite_error(
    timed: dict[str, np.ndarray], named: str
) -> None:
    reason = timed_disagreement(
        "ffn", STEPS, timed, _trajectory(PARAMS), {"logits": LOGITS[0]}
    )
    assert reason is not None
    assert named in reason
    assert "by inf" in reason


def test_both_closures_wrong_are_both_named_in_one_sentence() -> None:
    wrong = {k: -a for k, a in PARAMS.items()}
    reason = _disagreement(wrong, -LOGITS)
    assert reason is not None
    assert reason.count("the timed ") == 2
    assert "trainer" in reason.split("; ")[0]
    assert "predictor" in reason.split("; ")[1]


def test_the_verdict_key_depends_on_the_faults_injected() -> None:
    args: dict[str, Any] = {
        "model": "ffn",
        "path": "native-torch",
        "weights_sha": "w",
        "sources": "s",
        "versions": {},
    }
    clean = verdict_key(**args)
    assert verdict_key(**args, faults={}) == clean
    fault = verdict_key(**args, faults={"native-torch": "timed-train-lr"})
    assert fault != clean
    other = verdict_key(**args, faults={"native-torch": "timed-infer-bfloat16"})
    assert other not in (clean, fault)


# --- the timed faults --------------------------------------------------------------


def test_timed_faults_stay_out_of_the_fault_suite() -> None:
    assert set(faults.TIMED_FAULTS).isdisjoint(faults.FAULTS)
    assert {f.closure for f in faults.TIMED_FAULTS.values()} == {
        "trainer",
        "predictor",
    }
    with pytest.raises(ValueError, match="unknown timed fault 'x'; known timed"):
        faults.inject_timed(get_spec("ffn"), {}, np.zeros(1), "x", "trainer")


def test_bfloat16_rounding_keeps_eight_bits_ties_to_even() -> None:
    values = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-9, -3.5], np.float32)
    rounded = faults.bfloat16_rounded(values)
    assert rounded.dtype == np.float32
    # 1 + 2**-8 is halfway between 1 and 1 + 2**-7: ties go to the even 1.
    assert rounded.tolist() == [1.0, 1.0, 1 + 2**-6, 1.0, -3.5]
    x = RNG.normal(size=1000).astype(np.float32)
    error = np.abs(faults.bfloat16_rounded(x) - x) / np.abs(x)
    assert 0 < error.max() <= 2**-8
    labels = np.arange(3)
    assert faults.bfloat16_rounded(labels) is labels


@pytest.mark.parametrize("name", sorted(faults.TIMED_FAULTS))
def test_a_timed_fault_changes_its_own_closure_only(name: str) -> None:
    spec = get_spec("ffn")
    weights = make_weights(spec, 0)
    xs, _ = make_batches(spec, 0, 4, 2)
    fault = faults.TIMED_FAULTS[name]
    other = {"trainer": "predictor", "predictor": "trainer"}[fault.closure]
    same = faults.inject_timed(spec, weights, xs, name, other)
    assert same == (spec, weights, xs)
    changed_spec, changed_weights, changed_xs = faults.inject_timed(
        spec, weights, xs, name, fault.closure
    )
    changed = (
        changed_spec != spec
        or not np.array_equal(changed_xs, xs)
        or any(not np.array_equal(changed_weights[k], weights[k]) for k in weights)
    )
    assert changed


# --- the worker task, served with a stand-in runner --------------------------------


class _Runner:
    """A runner in NumPy: logits are ``x @ kernel`` over the flattened input;
    one training step adds the learning rate to every parameter."""

    framework = "numpy"

    def evaluate(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: Any, y: Any
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        return _logits(weights, x), 0.0, {}

    def trainer(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: Any, ys: Any
    ) -> Trainer:
        params = {k: np.array(a) for k, a in weights.items()}

        def run(n: int) -> None:
            for k, a in params.items():
                params[k] = a + np.float32(n * spec.workload.learning_rate)

        return Trainer(run, lambda n: check_training(0.0, params))

    def predictor(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
    ) -> Predictor:
        # One array for every batch, as Keras' predict returns it.
        return Predictor(
            lambda: _logits(weights, xs.reshape(-1, *xs.shape[2:])), lambda o: [o]
        )


def _logits(weights: Mapping[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    kernel = weights["fc1/kernel"]
    return x.reshape(len(x), -1)[:, : kernel.shape[0]] @ kernel


def _serve(tmp_path: Path, request_type: type[m.Request], **fields: Any) -> Any:
    spec = get_spec("ffn")
    weights, data = tmp_path / "w.npz", tmp_path / "d.npz"
    save_npz(weights, make_weights(spec, 0))
    xs, ys = make_batches(spec, 0, 4, STEPS)
    save_npz(data, {"x": xs, "y": ys})
    request = request_type(model="ffn", weights=str(weights), data=str(data), **fields)
    runner: Any = _Runner()
    serve.handle(runner, request, get_path("native-torch"))
    return load_npz(tmp_path / "out.npz")


def test_timed_outputs_are_the_timed_closures_results(tmp_path: Path) -> None:
    out = str(tmp_path / "out.npz")
    timed = _serve(tmp_path, m.TimedOutputs, out=out, steps=STEPS)
    weights = make_weights(get_spec("ffn"), 0)
    rate = get_spec("ffn").workload.learning_rate
    for name, a in weights.items():
        np.testing.assert_allclose(
            timed[PARAM_PREFIX + name], a + STEPS * rate, rtol=1e-6
        )
    xs, _ = make_batches(get_spec("ffn"), 0, 4, STEPS)
    assert timed["logits"].shape == (STEPS, 4, weights["fc1/kernel"].shape[1])
    np.testing.assert_array_equal(timed["logits"][1], _logits(weights, xs[1]))


@pytest.mark.parametrize("name", sorted(faults.TIMED_FAULTS))
def test_a_timed_fault_reaches_the_timed_closures_and_not_the_checks(
    tmp_path: Path, name: str
) -> None:
    out = str(tmp_path / "out.npz")
    clean = _serve(tmp_path, m.TimedOutputs, out=out, steps=STEPS)
    faulty = _serve(tmp_path, m.TimedOutputs, out=out, steps=STEPS, fault=name)
    closure = faults.TIMED_FAULTS[name].closure
    trainer_differs = any(
        not np.array_equal(clean[k], faulty[k]) for k in clean if k != "logits"
    )
    predictor_differs = not np.array_equal(clean["logits"], faulty["logits"])
    assert (trainer_differs, predictor_differs) == (
        closure == "trainer",
        closure == "predictor",
    )
    checked = _serve(tmp_path, m.Evaluate, out=out)
    checked_faulty = _serve(tmp_path, m.Evaluate, out=out, fault=name)
    np.testing.assert_array_equal(checked["logits"], checked_faulty["logits"])


def test_outputs_per_batch_refuse_a_wrong_count() -> None:
    assert serve.per_batch([np.zeros((4, 3)), np.ones((4, 3))], (2, 4)).shape == (
        2,
        4,
        3,
    )
    assert serve.per_batch([np.zeros((8, 3))], (2, 4)).shape == (2, 4, 3)
    with pytest.raises(ValueError, match="gave 6 outputs for 2 mini-batches of 4"):
        serve.per_batch([np.zeros((6, 3))], (2, 4))


def test_the_wrappers_hand_out_what_they_checked() -> None:
    check: TrainCheck = check_training(0.5, PARAMS)
    assert set(check.params) == set(PARAMS)
    predictor = Predictor(lambda: [np.ones(2)], list)
    with pytest.raises(RuntimeError, match="no round has run"):
        predictor.outputs()
    predictor()
    assert [a.tolist() for a in predictor.outputs()] == [[1.0, 1.0]]
