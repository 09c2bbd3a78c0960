"""Localization walks forward, loss, backward, update and names the first
layer beyond tolerance; fed deliberately wrong arrays, it points at them."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np

from equivalence.check import Case, ModelReport, _contradiction, _raised
from equivalence.localize import Triple, localize
from native.faults import Location
from tests.helpers import keras_on_torch
from workers.launch import Reply
from zoo.models import get_spec
from zoo.specs import MODELS

SPEC = MODELS["lenet"]


def _case(seed: int = 0) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    activations = {
        name: rng.standard_normal((2, 3)).astype(np.float32)
        for name in SPEC.tapped_layers()
    }
    evaluated: dict[str, np.ndarray] = {"loss": np.float32(2.0)}
    for p in SPEC.params:
        evaluated[f"grad:{p.name}"] = rng.standard_normal(p.shape).astype(np.float32)
    return activations, evaluated


def _trajectory(steps: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    arrays = {"loss": np.ones(steps)}
    for t in range(1, steps + 1):
        for p in SPEC.params:
            arrays[f"step{t}/{p.name}"] = rng.standard_normal(p.shape)
    return arrays


def _copy(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: np.array(v, copy=True) for k, v in arrays.items()}


def test_agreeing_paths_have_no_location() -> None:
    act, ev = _case()
    loc = localize(
        SPEC,
        "p",
        "q",
        activations=(act, _copy(act)),
        evaluated=(ev, _copy(ev)),
        trajectory=(_trajectory(), _trajectory()),
    )
    assert loc.first is None
    assert all(e.ok for e in loc.errors)


def test_a_forward_difference_is_blamed_on_its_first_layer() -> None:
    act, ev = _case()
    bad_act, bad_ev = _copy(act), _copy(ev)
    for name in ("pool2", "fc1", "fc2", "logits"):  # everything after pool2 differs
        bad_act[name] = bad_act[name] + 1
    bad_ev["grad:conv1/kernel"] *= 2
    loc = localize(SPEC, "p", "q", activations=(bad_act, act), evaluated=(bad_ev, ev))
    assert loc.first == Location("forward", "pool2")
    forward = [e.layer for e in loc.errors if e.stage == "forward" and not e.ok]
    assert forward == ["pool2", "fc1", "fc2", "logits"]


def test_a_missing_activation_counts_as_a_difference() -> None:
    act, ev = _case()
    stopped = {k: v for k, v in act.items() if k in ("conv1", "pool1")}
    loc = localize(
        SPEC,
        "p",
        "q",
        activations=(stopped, act),
        evaluated=({}, ev),
        error="RuntimeError: shapes",
    )
    assert loc.first == Location("forward", "conv2")
    assert loc.error == "RuntimeError: shapes"


def test_a_backward_difference_is_blamed_from_the_logits_back() -> None:
    act, ev = _case()
    bad = _copy(ev)
    bad["grad:fc1/bias"] *= 1.5
    bad["grad:conv1/kernel"] *= 1.5
    loc = localize(SPEC, "p", "q", activations=(act, act), evaluated=(bad, ev))
    assert loc.first == Location("backward", "fc1")
    order = [e.layer for e in loc.errors if e.stage == "backward"]
    assert order == ["logits", "fc2", "fc1", "conv2", "conv1"]


def test_an_update_difference_names_the_step_and_layer() -> None:
    act, ev = _case()
    good, bad = _trajectory(3), _trajectory(3)
    for t in (2, 3):
        bad[f"step{t}/conv2/bias"] = bad[f"step{t}/conv2/bias"] + 1
    loc = localize(
        SPEC,
        "p",
        "q",
        activations=(act, act),
        evaluated=(ev, ev),
        trajectory=(bad, good),
    )
    assert loc.first == Location("update", "conv2")
    assert loc.step == 2


def test_against_float64_each_layer_is_allowed_the_baseline_error() -> None:
    # The float32 baseline is 1e-3 off at conv1 (a badly conditioned layer):
    # a path as far off there passes it, one 100x farther is blamed on it.
    reference, evaluated = _case()
    baseline = _copy(reference)
    baseline["conv1"] = reference["conv1"] * np.float32(1 + 1e-3)
    near, far = _copy(reference), _copy(reference)
    near["conv1"] = reference["conv1"] * np.float32(1 - 1e-3)
    far["conv1"] = reference["conv1"] * np.float32(1 + 1e-1)
    against = {
        "evaluated": (evaluated, evaluated),
        "baselines": [(baseline, evaluated, None)],
    }
    ok = localize(SPEC, "p", "float64", activations=(near, reference), **against)
    assert ok.first is None, ok.errors
    bad = localize(SPEC, "p", "float64", activations=(far, reference), **against)
    assert bad.first == Location("forward", "conv1")
    # Two float64 runs are held to a share of it: there the near one parts.
    odd = localize(
        SPEC, "p", "float64", activations=(near, reference), share=0.01, **against
    )
    assert odd.first == Location("forward", "conv1")
    # With the fixed pairwise tolerance (1e-5), even the near one is blamed.
    fixed = localize(
        SPEC, "p", "q", activations=(near, reference), evaluated=(evaluated, evaluated)
    )
    assert fixed.first == Location("forward", "conv1")


def test_a_contradiction_is_carried_to_the_localization() -> None:
    activations, _ = _case()
    same = {"logits": activations["logits"]}
    other = {"logits": activations["logits"] * np.float32(1.01)}
    assert _contradiction(activations, same, SPEC) is None
    sentence = _contradiction(activations, other, SPEC)
    assert sentence is not None
    assert "only the evaluated pass runs" in sentence
    # a model whose last layer is not named logits (a user's, a drawn one)
    renamed = dataclasses.replace(
        SPEC, layers=(*SPEC.layers[:-1], SPEC.layers[-1].replace(name="outputs"))
    )
    last = {"outputs": activations["logits"]}
    assert _contradiction(last, same, renamed) is None
    assert _contradiction(last, other, renamed) == sentence
    # several outputs: each output's tap against its own logits, named
    two = get_spec("wide-deep")
    taps = {h.layer: np.ones((2, h.shape[-1]), np.float32) for h in two.heads}
    own = {f"logits:{n}": a for n, a in taps.items()}
    assert _contradiction(taps, own, two) is None
    off = {**own, "logits:score": own["logits:score"] * np.float32(1.01)}
    said = _contradiction(taps, off, two)
    assert said is not None
    assert "of output 'score'" in said
    loc = localize(
        SPEC,
        "p",
        "float64",
        activations=(activations, activations),
        evaluated=({"loss": np.ones(1)}, {"loss": np.ones(1)}),
        contradiction=sentence,
    )
    assert loc.contradiction == sentence


def _first_off(  # noqa: PLR0917 (the case, then what differs)
    activations: dict[str, np.ndarray],
    reference: dict[str, np.ndarray],
    key: str,
    error: float,
    baseline: dict[str, np.ndarray],
    witnesses: Sequence[Triple] = (),
) -> Location | None:
    """Where a path ``error`` off the float64 ``reference`` on ``key``
    alone is localized, allowed what ``baseline`` and ``witnesses`` allow."""
    path = _copy(reference)
    path[key] = reference[key] * np.float32(1 + error)
    return localize(
        SPEC,
        "p",
        "float64",
        activations=(activations, activations),
        evaluated=(path, reference),
        baselines=[(activations, baseline, None)],
        witnesses=witnesses,
    ).first


def test_each_parameter_is_held_to_its_own_allowance() -> None:
    """Issue 65: a batch normalization's moving variance 3e-6 off (allowed
    1.5e-6) hid behind its layer's most lenient parameter and the walk went
    on.  Here conv1's kernel gradient has a lenient allowance (its baseline
    is 1e-3 off) and its bias a strict one (its baseline agrees): the bias
    2e-4 off is blamed on conv1, though it is far below the kernel's."""
    activations, reference = _case()
    baseline = _copy(reference)
    baseline["grad:conv1/kernel"] = reference["grad:conv1/kernel"] * np.float32(
        1 + 1e-3
    )

    def off(key: str) -> Location | None:
        """Where a path 2e-4 off on ``key`` alone is localized."""
        return _first_off(activations, reference, key, 2e-4, baseline)

    assert off("grad:conv1/bias") == Location("backward", "conv1")
    # the same error on the lenient parameter passes: the allowance is the
    # parameter's own, not its layer's strictest or most lenient
    assert off("grad:conv1/kernel") is None


def test_a_witness_allows_each_layer_what_it_allows_the_judgement() -> None:
    """Issue 65: after a vote a path's allowance may rest on one lucky
    baseline, and witnesses (other frameworks' passing paths) raise it, at
    most ``MULTIPLE``-fold.  The localizer allows each layer the same: a
    bias gradient 5e-6 off, where the lone baseline is exact and a witness
    1e-6 off, is no difference; 1e-3 off it still is one."""
    activations, reference = _case()
    witness = _copy(reference)
    witness["grad:conv1/bias"] = reference["grad:conv1/bias"] * np.float32(1 + 1e-6)

    def off(error: float, witnesses: list[Triple]) -> Location | None:
        exact = _copy(reference)
        key = "grad:conv1/bias"
        return _first_off(activations, reference, key, error, exact, witnesses)

    conv1 = Location("backward", "conv1")
    assert off(5e-6, []) == conv1  # the lone exact baseline allows 1e-6
    assert off(5e-6, [(activations, witness, None)]) is None
    assert off(1e-3, [(activations, witness, None)]) == conv1


def test_an_evaluation_that_raised_is_its_error_not_a_difference() -> None:
    """Issue 65: a dropout check that raised left the path without arrays,
    and the walk read them as an infinite loss error ("first difference in
    loss", with a CONTRADICTION blaming a compiled graph).  Now only its
    tapped forward pass is walked: agreeing there, no layer is named and
    the error is the localization's; a layer that differs there (a wrong
    padding whose shapes stopped the evaluation) is still named."""
    report = ModelReport(Case("lenet", 0, 4, steps=1))
    report.outcomes = {
        "native-torch": Reply(
            "error",
            error="ValueError: dropout layer 'drop' kept values off the input\n"
            "Traceback ...",
        ),
        "native-jax": Reply("ok"),
    }
    report.evaluated = {"native-jax": {}}
    report.trajectories = {"native-jax": {}}
    raised = _raised(report, "native-torch")
    assert raised == (
        "its evaluation raised (error): ValueError: dropout layer 'drop' kept "
        "values off the input"
    )
    assert _raised(report, "native-jax") is None
    report.evaluated["native-torch"] = {}
    assert "its training run raised" in str(_raised(report, "native-torch"))

    activations, reference = _case()
    walked = {
        "activations": (_copy(activations), activations),
        "evaluated": ({}, reference),  # nothing evaluated: every array missing
        "raised": raised,
    }
    loc = localize(SPEC, "native-torch", "float64", **walked)  # type: ignore[arg-type]
    assert loc.first is None, loc.errors
    assert loc.raised == raised
    assert {e.stage for e in loc.errors} == {"forward"}
    # without ``raised`` the missing arrays read as an infinite loss error
    assert localize(
        SPEC, "p", "q", activations=walked["activations"], evaluated=({}, reference)
    ).first == Location("loss", "loss")
    wrong = _copy(activations)
    wrong["conv2"] = np.zeros((2, 1), np.float32)  # its shape stopped the rest
    shaped = localize(
        SPEC,
        "native-torch",
        "float64",
        activations=(wrong, activations),
        evaluated=({}, reference),
        raised=raised,
    )
    assert shaped.first == Location("forward", "conv2")


def test_a_path_whose_set_up_raised_is_localized_nowhere() -> None:
    """Issue 74: a path whose tapped forward pass never ran (its set-up
    raised) was "localized" at the model's first layer, every layer at an
    infinite error; it names no layer, and says why."""
    _, evaluated = _case()
    reference, _ = _case(1)
    said = "ValueError: the weights do not fit"
    loc = localize(
        SPEC,
        "p",
        "float64",
        activations=({}, reference),
        evaluated=({}, evaluated),
        error=said,
        tapped=False,
    )
    assert loc.first is None
    assert loc.errors == ()
    assert loc.error == said
    # a pass that ran and stopped at its first layer names it
    stopped = localize(
        SPEC,
        "p",
        "float64",
        activations=({}, reference),
        evaluated=({}, evaluated),
        error=said,
        raised="its evaluation raised (error): " + said,
    )
    assert stopped.first == Location("forward", SPEC.tapped_layers()[0])


ONE_LAYER_TAPS = """
import json
import numpy as np
from workers.keras_runner import KerasRunner
from zoo.data import make_batches
from zoo.user_models import spec_from_document
from zoo.weights import make_weights
spec = spec_from_document("one-layer", {
    "input_shape": [3],
    "layers": [{"kind": "dense", "name": "outputs", "units": 2}],
    "workload": {"optimizer": "sgd", "loss": "mean_squared_error"},
})
x, _ = make_batches(spec, 0, 4, 1)
taps, error = KerasRunner("torch").activations(spec, make_weights(spec, 0), x[0])
print(json.dumps({k: list(v.shape) for k, v in taps.items()}))
"""


def test_a_one_layer_models_keras_tap_is_its_whole_batch() -> None:
    """Issue 74's campaign (findings 933e5f4ee2, 6e3308685d): a probe of one
    layer gives its output alone, not in a list, and the Keras paths'
    tapped pass took the batch's first example for it, so a one-layer model
    was "localized" at its layer (or its compiled pass said to part)."""
    done = keras_on_torch(["-c", ONE_LAYER_TAPS])
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {"outputs": [4, 2]}
