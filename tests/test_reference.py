"""Judging against float64 (``equivalence.reference``): a path passes a
quantity when its error against float64 is at most MULTIPLE times the largest
error of the correct float32 baselines (plus FLOOR), a path's own
implementation's left out; three float64 runs vote on the reference; an odd
one out fails the check (``python -m equivalence`` exits 1) with every path
still judged, named a dtype fault or wrong model code by what it measurably
is; and each wrong input is caught."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

import equivalence.__main__ as equivalence_cli
from equivalence.check import (
    Case,
    ModelReport,
    ReferenceRun,
    decide,
    missing_framework,
    run_name,
)
from equivalence.compare import step_tolerance
from equivalence.reference import (
    FLOOR,
    IMPLEMENTATIONS,
    MULTIPLE,
    allowance_note,
    allowed,
    judge,
    needed_multiple,
    own_implementation,
    per_step,
    thinned,
    trajectory_floor,
    vote,
    witnessed,
)
from tests.helpers import JUDGED_PATHS, judged
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
    result = judge("m", "p", other, reference, {"native-torch": baseline})
    assert result.ok, result.failures
    assert needed_multiple(result) <= MULTIPLE


def test_a_bfloat16_path_fails_on_what_it_rounded() -> None:
    reference, baseline = _case()
    wrong = {**baseline, "logits": _bfloat16(reference["logits"])}
    result = judge("m", "p", wrong, reference, {"native-torch": baseline})
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
    assert judge("m", "p", near, reference, {"native-torch": baseline}).ok
    assert not judge("m", "p", far, reference, {"native-torch": baseline}).ok


def test_the_floor_spares_a_baseline_that_is_exact_by_luck() -> None:
    reference = {"loss": np.array([2.0])}
    exact = {"loss": np.array([2.0])}
    one_ulp = {"loss": np.array([2.0 * (1 + 2**-23)])}
    ten_ulps = {"loss": np.array([2.0 * (1 + 2e-5)])}
    assert judge("m", "p", one_ulp, reference, {"native-torch": exact}).ok
    assert not judge("m", "p", ten_ulps, reference, {"native-torch": exact}).ok


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
    result = judge("m", "p", path, reference, {"native-torch": baseline})
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
    failing = {
        e.quantity
        for e in judge(model, "p", off, reference, {"native-torch": baseline}).failures
    }
    assert failing == ({"grad:w"} if floored else {"grad:w", "step2/w"})
    assert trajectory_floor(model, 2) == (step_tolerance(model, 2) if floored else 0)


def test_a_lucky_baseline_does_not_fail_correct_paths() -> None:
    # VGG16 on an AVX2 host, in small: one ReLU gate whose float64
    # pre-activation lies within float32's rounding of zero.  Most float32
    # computations flip it (3e-4 off on a nearly cancelling gradient); one
    # baseline kept it (2e-6 off).  Alone, it would fail every path that
    # flipped; the largest of the agreeing baselines does not.
    reference = {"grad:b": np.array([1.0, -1.0 + 1e-3])}
    flipped = {"grad:b": np.array([1.0, -1.0 + 1e-3 + 4e-4])}
    lucky = {"grad:b": np.array([1.0, -1.0 + 1e-3 + 2.5e-6])}
    baselines = {
        "native-torch": lucky,
        "native-jax": flipped,
        "native-tensorflow": flipped,
    }
    for path in ("keras-jax", "native-jax", "native-torch", "native-mxnet"):
        assert judge("m", path, flipped, reference, baselines).ok, path
    # The one lucky baseline alone fails a correct path: what the max repairs.
    assert not judge("m", "keras-jax", flipped, reference, {"native-torch": lucky}).ok


def test_a_path_is_not_allowed_what_its_own_code_got_wrong() -> None:
    # A fault that shows only in float32 sits in its implementation's
    # baseline too: that baseline may not excuse the path, others may.
    reference, good = _case()
    wrong = {**good, "logits": _bfloat16(reference["logits"])}
    baselines = {"native-torch": wrong, "native-jax": good}
    assert own_implementation("native-torch@compile") == "native-torch"
    assert own_implementation("keras-torch") is None
    assert not judge("m", "native-torch", wrong, reference, baselines).ok
    assert not judge("m", "native-torch@compile", wrong, reference, baselines).ok
    # the Keras path's allowance does take the faulty baseline: a correct
    # Keras path is never failed by it
    assert judge("m", "keras-torch", good, reference, baselines).ok


def _runs(
    off: dict[str, float],
) -> dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Three implementations' (float64 run, float32 baseline); ``off``: a
    relative fault on the logits of some, in both their runs (as a source
    fault is)."""
    reference, baseline = _case()
    runs = {}
    for impl in IMPLEMENTATIONS:
        factor = 1 + off.get(impl, 0.0)
        run = {**reference, "logits": reference["logits"] * factor}
        base = {**baseline, "logits": baseline["logits"] * np.float32(factor)}
        runs[impl] = (run, base)
    return runs


def test_three_float64_runs_that_agree_judge_with_the_first() -> None:
    result = vote("m", _runs({}))
    assert result.reference == "native-torch"
    assert result.agreeing == IMPLEMENTATIONS
    assert result.odd is None
    assert result.sentence is None


@pytest.mark.parametrize("faulty", IMPLEMENTATIONS)
def test_the_odd_one_out_is_named_and_the_others_judge(faulty: str) -> None:
    result = vote("m", _runs({faulty: 1e-3}))
    assert result.odd == faulty
    assert faulty not in result.agreeing
    assert len(result.agreeing) == 2
    assert result.reference == result.agreeing[0]
    assert result.sentence is not None
    assert f"{faulty}'s model code is wrong" in result.sentence
    assert "on logits by" in result.sentence


def test_a_float64_run_that_failed_is_the_odd_one_out() -> None:
    runs = _runs({})
    del runs["native-jax"]
    result = vote("m", runs, {"native-jax": "crashed"})
    assert (result.reference, result.odd) == ("native-torch", "native-jax")
    assert result.sentence is not None
    assert "runs failed (crashed)" in result.sentence


def test_nothing_is_judged_when_no_two_float64_runs_agree() -> None:
    result = vote("m", _runs({"native-torch": 1e-3, "native-jax": -1e-3}))
    assert result.reference is None
    assert result.sentence is not None
    assert "no two float64 runs" in result.sentence


def test_float64_runs_must_agree_far_closer_than_a_path() -> None:
    # Off by a tenth of what a path is allowed: a path would pass, a float64
    # run is the odd one out (1% of the allowance).
    scale = 0.1 * allowed(0.0) / math.sqrt(2)
    result = vote("m", _runs({"native-tensorflow": scale}))
    assert result.odd == "native-tensorflow"
    same = vote("m", _runs({"native-tensorflow": 1e-15}))
    assert same.odd is None


# --- an odd one out: a failure of the tool's own trust ----------------------------


@pytest.mark.parametrize("fault", ["float32", "float32-as-float64", "crashed"])
def test_an_odd_one_out_fails_the_case_with_every_path_still_judged(
    fault: str,
) -> None:
    sound = judged()
    assert (sound.paths_pass, sound.reference_sound, sound.ok) == (True, True, True)
    report = judged(odd="native-torch", fault=fault)
    # every correct path is judged and keeps its pass ...
    assert report.verdicts == dict.fromkeys(JUDGED_PATHS, "pass")
    assert set(report.judgements) == set(JUDGED_PATHS)
    assert report.paths_pass
    # ... but the judges were not sound, and that fails the case
    assert report.vote is not None
    assert report.vote.odd == "native-torch"
    assert not report.vote.sound
    assert not report.reference_sound
    assert not report.ok


@pytest.mark.parametrize("fault", ["float32", "float32-as-float64"])
def test_a_float64_run_computed_in_float32_is_named_a_dtype_fault(fault: str) -> None:
    decided = judged(odd="native-torch", fault=fault).vote
    assert decided is not None
    assert decided.fault is not None
    assert decided.sentence is not None
    assert decided.fault.startswith("native-torch's float64 run computed in float32")
    assert decided.fault.endswith("(a dtype fault, not its model code)")
    assert "model code is wrong" not in decided.sentence
    # the measured fact behind it: the dtype it returned, else how far off
    # it is against what float32 computations are
    if fault == "float32":
        assert "it returned float32 arrays for 3 of its 4 quantities" in (
            decided.sentence
        )
    else:
        assert "as far from native-jax's float64 run as a float32 computation" in (
            decided.sentence
        )


def test_a_disagreement_beyond_float32_rounding_is_still_the_model_code() -> None:
    decided = judged(odd="native-torch", fault="model-code").vote
    assert decided is not None
    assert decided.fault == "native-torch's model code is wrong"
    assert "dtype" not in str(decided.sentence)
    # float32 arrays that are also far beyond float32's rounding: both said
    runs = _runs({"native-jax": 1e-3})
    runs["native-jax"] = (
        {k: np.asarray(v, np.float32) for k, v in runs["native-jax"][0].items()},
        runs["native-jax"][1],
    )
    both = vote("m", runs)
    assert both.fault == (
        "native-jax's float64 run computed in float32 (a dtype fault), and its "
        "model code may be wrong too"
    )
    assert "farther off than float32 rounding explains" in str(both.sentence)


def test_the_allowances_an_odd_one_out_leaves_thinner_are_said() -> None:
    paths = ["keras-jax", "native-jax", "native-jax@jit", "native-tensorflow"]
    paths.append("native-torch")
    decided = judged(odd="native-torch").vote
    assert decided is not None
    assert thinned(decided, paths) == (
        "with native-torch out of the vote, allowances rest on fewer float32 "
        "baselines: native-tensorflow's float32 baseline alone for native-jax, "
        "native-jax@jit; native-jax's float32 baseline alone for "
        "native-tensorflow; native-jax's and native-tensorflow's float32 "
        "baselines for keras-jax"
    )
    # native-torch's own allowance never had its own baseline: unchanged
    assert allowance_note(decided, "native-torch") is None
    assert allowance_note(decided, "native-jax") == (
        "native-tensorflow's float32 baseline alone"
    )
    full = judged().vote
    assert full is not None
    assert thinned(full, paths) is None
    assert allowance_note(full, "native-jax") is None


def test_a_witness_raises_an_allowance_at_most_multiple_fold_never_lowers_one() -> None:
    assert witnessed(1e-6, []) == 1e-6
    assert witnessed(1e-6, [5e-7]) == 1e-6  # never lower
    assert witnessed(1e-7, [5e-7, 2e-7]) == 5e-7  # raised to what witnesses saw
    assert witnessed(1e-7, [1.0]) == allowed(1e-7)  # at most MULTIPLE-fold
    # a witness lacking the quantity witnesses nothing, the others still do
    assert witnessed(1e-7, [math.inf]) == 1e-7
    assert witnessed(1e-7, [math.inf, 5e-7]) == 5e-7
    assert witnessed(math.inf, [1e-7]) == math.inf  # a baseline lacking it: no room


def _after_a_vote(
    paths: dict[str, float], faults: dict[str, str] | None = None
) -> ModelReport:
    """gap-cnn's case of issue 65 in stand-in arrays: native TensorFlow's
    model code is wrong (voted out), native JAX's float32 run sums the
    conv-bias gradient the accurate way (7e-8 off) and every other float32
    computation the sequential way (5e-6 off).  ``paths``: each path's
    relative error on that gradient."""
    rng = np.random.default_rng(0)
    reference = {
        "logits": rng.standard_normal((4, 10)),
        "loss": np.asarray(2.3),
        "grad:conv/bias": rng.standard_normal(8),
    }

    def off(error: float) -> dict[str, np.ndarray]:
        arrays = {q: np.asarray(a, np.float32) for q, a in reference.items()}
        bias = reference["grad:conv/bias"]
        arrays["grad:conv/bias"] = np.asarray(bias * (1 + error), np.float32)
        return arrays

    report = ModelReport(Case("gap-cnn"))
    for path, error in paths.items():
        report.outcomes[path] = Reply("ok")
        report.evaluated[path] = off(error)
    wrong = {**reference, "logits": reference["logits"] * 1.001}
    runs = {
        run_name("native-torch", "float64"): ReferenceRun(reference, None),
        run_name("native-jax", "float64"): ReferenceRun(reference, None),
        run_name("native-tensorflow", "float64"): ReferenceRun(wrong, None),
        run_name("native-torch", "float32"): ReferenceRun(off(5e-6), None),
        run_name("native-jax", "float32"): ReferenceRun(off(7e-8), None),
        run_name("native-tensorflow", "float32"): ReferenceRun(off(5e-6), None),
    }
    decide(report, runs, {}, faults)
    assert report.vote is not None
    assert report.vote.odd == "native-tensorflow"
    return report


def test_after_a_vote_other_frameworks_witness_for_a_path_left_one_baseline() -> None:
    # Issue 65: with native TensorFlow voted out, native PyTorch's allowance
    # rested on JAX's float32 run alone, which sums the accurate way; its
    # own ordinary rounding was failed (m 30).  Keras on TensorFlow, which
    # sums as native PyTorch does, passed: it witnesses.
    alone = _after_a_vote({"native-torch": 5e-6, "keras-torch": 5e-6})
    assert alone.verdicts["native-torch"] == "fail"  # its own framework: no witness
    assert alone.allowance_note("native-torch") == (
        "native-jax's float32 baseline alone"
    )
    paths = {"native-torch": 5e-6, "keras-torch": 5e-6, "keras-tensorflow": 5e-6}
    witnessed_report = _after_a_vote(paths)
    assert witnessed_report.verdicts["native-torch"] == "pass"
    assert witnessed_report.witnesses["native-torch"] == ("keras-tensorflow",)
    assert witnessed_report.allowance_note("native-torch") == (
        "native-jax's float32 baseline and 1 witness"
    )
    fewer = witnessed_report.thinned()
    assert fewer is not None
    assert "witnesses: keras-tensorflow, keras-torch (paths that passed" in fewer
    # a witness never excuses a real difference: ten times its allowance at most
    wrong = _after_a_vote({**paths, "native-torch": 1e-3})
    assert wrong.verdicts["native-torch"] == "fail"
    # nor does a path given a deliberate fault witness
    faulty = _after_a_vote(paths, {"keras-tensorflow": "missing-bias"})
    assert faulty.verdicts["native-torch"] == "fail"
    assert "native-torch" not in faulty.witnesses


def _stand_in_checker(odd: str | None, fault: str) -> type:
    """A stand-in for ``equivalence.check.Checker`` in ``main``: no worker,
    each case judged on stand-in arrays (``tests.helpers.judged``)."""

    class StandIn:
        def __init__(self, paths: list[str], **_: object) -> None:
            self.workers = {
                p: SimpleNamespace(platform={}, failure=None) for p in paths
            }

        def __enter__(self) -> StandIn:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def check(self, case: Case, *_: object, **__: object) -> ModelReport:
            return judged(case, tuple(self.workers), odd=odd, fault=fault)

    return StandIn


@pytest.mark.parametrize("odd", [None, "native-torch"])
def test_an_odd_one_out_exits_non_zero_with_every_correct_path_still_judged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    monkeypatch.setattr(equivalence_cli, "Checker", _stand_in_checker(odd, "float32"))
    argv = ["--models", "ffn", "--paths", ",".join(JUDGED_PATHS)]
    code = equivalence_cli.main([*argv, "--steps", "0", "--epochs", "0"])
    out = capsys.readouterr().out
    lines = out.splitlines()
    verdicts = {
        words[0]: words[-1]
        for words in map(str.split, lines)
        if words and words[0] in JUDGED_PATHS
    }
    assert verdicts == dict.fromkeys(JUDGED_PATHS, "pass")  # passes kept
    if odd is None:
        assert code == 0
        assert lines[-1] == "all paths agree"
        assert "FEWER BASELINES" not in out
        return
    assert code == 1
    assert "all paths agree" not in out
    assert lines[-1] == (
        "every path agrees with the float64 reference, but a reference "
        "implementation was found wrong, which fails the check: in ffn, "
        "native-torch's float64 run computed in float32 (a dtype fault, not "
        "its model code)"
    )
    assert "ODD ONE OUT: native-torch's float64 run computed in float32" in out
    # beside the verdicts: which allowances rest on one baseline
    fewer = next(line for line in lines if line.startswith("FEWER BASELINES: "))
    assert "native-tensorflow's float32 baseline alone for native-jax" in fewer
    # keras-jax witnesses for native-tensorflow: another framework's kernels
    assert "native-jax's float32 baseline and 1 witness for native-tensorflow" in fewer
    assert "witnesses: keras-jax (paths" in fewer
    assert lines.index(fewer) > max(
        i for i, line in enumerate(lines) if line.split()[:1] == ["native-torch"]
    )


# --- perturbed float64 runs (issue 74) -----------------------------------------


def _vanishing(
    noise: float, seed: int = 0
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A beta gradient that is zero in exact arithmetic, over terms of size
    about 1: the float64 reference holds float64's noise on it, a float32
    computation float32's, and a perturbed float64 run what rounding at
    float32's scale moves it by (``noise``, relative to the terms)."""
    rng = np.random.default_rng(seed)
    reference = {"grad:bn/beta": rng.standard_normal(8) * 1e-16}
    float32 = {"grad:bn/beta": rng.standard_normal(8) * noise}
    perturbed = {"grad:bn/beta": rng.standard_normal(8) * noise}
    return reference, float32, perturbed


def test_a_vanishing_quantity_is_judged_on_the_scale_of_the_terms_that_cancel() -> None:
    # Noise against noise is ~100% off for every path: without a perturbed run
    # a correct path is judged on its own noise, with it on the terms' scale
    # (m about 1); a wrong value a thousand times the noise still fails.
    reference, float32, perturbed = _vanishing(1e-8)
    other = _vanishing(1e-8, seed=1)[1]
    baselines = {"native-torch": other}
    runs = [perturbed]
    for given in ([], runs):  # a baseline's distance alone, or with perturbed runs
        result = judge("m", "keras-jax", float32, reference, baselines, perturbed=given)
        assert result.ok
        assert 0.1 < needed_multiple(result) < MULTIPLE
        # ~100% off, as the correct path is, but a thousand times farther
        wrong = {"grad:bn/beta": float32["grad:bn/beta"] + 1e-5}
        assert not judge(
            "m", "keras-jax", wrong, reference, baselines, perturbed=given
        ).ok
    # where the baselines happen to be exact, the perturbed runs allow rounding
    exact = {"native-torch": reference}
    assert not judge("m", "keras-jax", float32, reference, exact).ok
    assert judge("m", "keras-jax", float32, reference, exact, perturbed=runs).ok


def test_a_perturbed_run_raises_an_allowance_never_lowers_one() -> None:
    reference, baseline = _case()
    bf16 = {**baseline, "logits": _bfloat16(reference["logits"])}
    baselines = {"native-jax": baseline}
    alone = judge("m", "keras-jax", bf16, reference, baselines)
    assert not alone.ok
    # a perturbed run that moved nothing (or lacks the quantity) allows what
    # the baselines allow, no less
    still = [reference, {}]
    same = judge("m", "keras-jax", bf16, reference, baselines, perturbed=still)
    assert same.entries == alone.entries
    # one that moved the logits as far as bfloat16 does excuses it there
    moved = [{**reference, "logits": _bfloat16(reference["logits"])}]
    assert judge("m", "keras-jax", bf16, reference, baselines, perturbed=moved).ok


def test_float64_runs_agree_on_a_vanishing_quantity_by_their_perturbed_runs() -> None:
    # MobileNetV2 (issue 74): a moving mean of values a batch normalization
    # centred is noise in every run, and two float64 runs' noises are ~100%
    # apart: no two agreed and no model got a verdict.  Their perturbed runs
    # set the bar on the terms' scale; a real difference still disagrees.
    runs, exact, moved = {}, {}, {}
    for number, impl in enumerate(IMPLEMENTATIONS):
        reference, float32, perturbed = _vanishing(1e-8, seed=number)
        runs[impl], moved[impl] = (reference, float32), perturbed
        exact[impl] = (reference, reference)  # baselines exact by luck
    assert vote("m", runs).sentence is None  # the baselines' distance
    assert vote("m", exact).reference is None
    assert vote("m", exact, perturbed=moved).sentence is None
    for given in (runs, exact):
        off = dict(given)
        reference, float32 = given["native-jax"]
        off["native-jax"] = (
            {"grad:bn/beta": reference["grad:bn/beta"] + 1e-5},
            float32,
        )
        assert vote("m", off, perturbed=moved).odd == "native-jax"
