"""The deliberate faults change exactly what they claim, and name where."""

from __future__ import annotations

import dataclasses
import importlib
import itertools
import pkgutil

import numpy as np
import pytest

import zoo.kinds
from equivalence.sensitivity import FAULT_CASES, mistake_case
from native import faults
from zoo.kinds import KINDS, MISTAKES
from zoo.kinds.base import Kind, Mistake
from zoo.models import get_spec
from zoo.specs import MODELS, VARIANTS, padding_of
from zoo.weights import make_weights


@pytest.mark.parametrize(
    ("model", "fault", "param"),
    [
        ("lenet", "unpermuted-flatten", "fc1/kernel"),
        ("lenet", "conv-hw-swapped", "conv1/kernel"),
        ("lstm", "lstm-gates-swapped", "lstm/kernel"),
        ("lenet", "missing-bias", "fc2/bias"),
        ("ffn", "missing-bias", "fc2/bias"),
        ("lstm", "missing-bias", "lstm/bias"),
    ],
)
def test_weight_faults_corrupt_exactly_their_parameters(
    model: str, fault: str, param: str
) -> None:
    spec = MODELS[model]
    canonical = make_weights(spec, 0)
    same_spec, broken = faults.inject(spec, canonical, fault)
    assert same_spec is spec
    kind = spec.param(param).kind
    changed = {p.name for p in spec.params if p.kind == kind}
    if fault == "missing-bias":
        changed = {param}
        assert not broken[param].any()
    if fault == "unpermuted-flatten":  # only the kernel right after the flatten
        changed = {param}
    for p in spec.params:
        same = np.array_equal(broken[p.name], canonical[p.name])
        assert same == (p.name not in changed), p.name
    assert faults.FAULTS[fault].target(spec).layer == spec.param(param).layer


def test_unpermuted_flatten_fault_reads_the_rows_in_chw_order() -> None:
    spec = MODELS["lenet"]
    canonical = make_weights(spec, 0)
    _, broken = faults.inject(spec, canonical, "unpermuted-flatten")
    kernel = canonical["fc1/kernel"]
    h, w, c = spec.param("fc1/kernel").feature_shape or (0, 0, 0)
    chw = kernel.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(kernel.shape)
    np.testing.assert_array_equal(broken["fc1/kernel"], chw)
    assert not np.array_equal(broken["fc1/kernel"], kernel)


def test_valid_padding_changes_one_layer_and_keeps_the_weights() -> None:
    spec = MODELS["vgg16"]
    canonical = make_weights(spec, 0)
    faulty, weights = faults.inject(spec, canonical, "valid-padding")
    changed = [
        a.name for a, b in zip(spec.layers, faulty.layers, strict=True) if a != b
    ]
    assert changed == ["block1_conv1"]
    assert faulty.layer("block1_conv1").options.padding == "valid"
    assert faulty.params == spec.params  # loading follows the declared weights
    assert weights.keys() == canonical.keys()
    assert faults.FAULTS["valid-padding"].target(spec) == faults.Location(
        "forward", "block1_conv1"
    )


def test_optimizer_fault_moves_adams_epsilon_only() -> None:
    spec = MODELS["lenet"]
    canonical = make_weights(spec, 0)
    faulty, weights = faults.inject(spec, canonical, "adam-eps-inside-sqrt")
    assert not spec.workload.epsilon_inside_sqrt  # Keras' Adam
    assert faulty.workload == dataclasses.replace(
        spec.workload, epsilon_inside_sqrt=True
    )
    assert faulty.layers == spec.layers
    assert all(np.array_equal(weights[k], a) for k, a in canonical.items())
    assert faults.FAULTS["adam-eps-inside-sqrt"].target(spec).stage == "update"


def test_faults_that_do_not_apply_are_refused() -> None:
    spec = MODELS["ffn"]
    with pytest.raises(ValueError, match="does not apply to model 'ffn'"):
        faults.inject(spec, make_weights(spec, 0), "adam-eps-inside-sqrt")
    with pytest.raises(ValueError, match="known faults"):
        faults.inject(spec, make_weights(spec, 0), "typo")


def test_every_model_has_a_fault_of_each_stage_it_can_have() -> None:
    applicable = {
        m: [f.name for f in faults.FAULTS.values() if f.applies(MODELS[m])]
        for m in MODELS
    }
    assert applicable["ffn"] == ["missing-bias"]
    assert "adam-eps-inside-sqrt" in applicable["lstm"]
    assert len(applicable["vgg16"]) == 5


def test_option_faults_change_one_layer_and_keep_every_shape() -> None:
    """The faults of the layer options users' models bring: one layer's pass
    changes, every output shape stays (so the path runs and is caught by its
    numbers, not by a crash)."""
    from zoo.specs import layer_shapes

    spec = VARIANTS["strided-cnn"]
    canonical = make_weights(spec, 0)
    for fault, field, value in (
        ("activation-swapped", "activation", "sigmoid"),
        ("same-padding-symmetric", "mistake", "same-padding-symmetric"),
    ):
        faulty, _ = faults.inject(spec, canonical, fault)
        changed = [a for a, b in zip(spec.layers, faulty.layers, strict=True) if a != b]
        assert [layer.name for layer in changed] == ["conv1"]
        assert getattr(faulty.layer("conv1"), field) == value
        assert layer_shapes(faulty) == layer_shapes(spec)
        assert faulty.params == spec.params
        assert faults.FAULTS[fault].target(spec) == faults.Location("forward", "conv1")


def test_symmetric_padding_applies_only_where_keras_pads_unevenly() -> None:
    applies = faults.FAULTS["same-padding-symmetric"].applies
    assert applies(VARIANTS["strided-cnn"])  # 3x3 stride 2 on 28: (0, 1)
    assert not applies(MODELS["vgg16"])  # 3x3 stride 1: (1, 1), nothing to get wrong
    assert not faults.FAULTS["activation-swapped"].applies(MODELS["lenet"])


def test_the_symmetric_mistake_pads_half_the_window_each_side() -> None:
    spec = VARIANTS["strided-cnn"]
    faulty, _ = faults.inject(spec, make_weights(spec, 0), "same-padding-symmetric")
    conv = faulty.layer("conv1")
    assert (
        conv.options.padding == "same"
    )  # the layer as declared, its mistake beside it
    assert padding_of(conv, 28) == (1, 1) != padding_of(spec.layer("conv1"), 28)
    assert "mistake='same-padding-symmetric'" in repr(conv)
    assert "mistake" not in repr(spec.layer("conv1"))  # quiet when not set


# --- the kinds' mistakes (``Kind.mistakes``) ----------------------------------


def _module_file(kind: Kind) -> str:
    """The file of the ``zoo.kinds`` module that makes ``kind``."""
    for info in pkgutil.iter_modules(zoo.kinds.__path__):
        made = vars(importlib.import_module(f"zoo.kinds.{info.name}")).values()
        if any(v is kind or (isinstance(v, tuple) and kind in v) for v in made):
            return f"zoo/kinds/{info.name}.py"
    raise AssertionError(f"no module of zoo/kinds makes kind {kind.name!r}")


def _declared_in(mistake: Mistake) -> str:
    """The module file(s) declaring a mistake of ``mistake``'s name."""
    files = {
        _module_file(k)
        for k in KINDS.values()
        if mistake.name in (m.name for m in k.mistakes)
    }
    return " or ".join(sorted(files)) or "the kind's module"


def _mistake_problem(mistake: Mistake) -> str | None:
    """What is wrong with ``mistake`` on the model it declares: it hits no
    layer there, or its injection changes nothing (the fault suite could not
    catch it); ``None`` when it does its work."""
    fault = faults.fault_of(mistake)
    spec = get_spec(mistake.model)
    where = _declared_in(mistake)
    if not fault.applies(spec):
        return (
            f"mistake {mistake.name!r} hits no layer of the model it declares, "
            f"{mistake.model!r}: open {where} and name a model it applies to "
            "(or mend its hits)"
        )
    weights = make_weights(spec, 0)
    faulty, wrong = fault.inject(spec, weights)
    same_pass = faulty.layers == spec.layers and faulty.workload == spec.workload
    if same_pass and all(np.array_equal(wrong[k], a) for k, a in weights.items()):
        return (
            f"mistake {mistake.name!r} changes nothing on its model "
            f"{mistake.model!r}: open {where} and mend how it enters"
        )
    return None


@pytest.mark.parametrize("name", list(MISTAKES))
def test_every_kinds_mistake_applies_to_its_model_and_changes_it(name: str) -> None:
    mistake = MISTAKES[name]
    assert _mistake_problem(mistake) is None, _mistake_problem(mistake)
    target = faults.FAULTS[name].target(get_spec(mistake.model))
    assert target.stage == mistake.stage


def test_a_mistake_that_changes_nothing_or_misses_its_model_is_named() -> None:
    idle = Mistake(
        "kernel-as-is",
        "a convolution kernel loaded as it is",
        "lenet",
        params="conv2d",
        corrupt=lambda a, p: a,
    )
    assert "changes nothing on its model 'lenet'" in (_mistake_problem(idle) or "")
    misplaced = dataclasses.replace(idle, model="ffn")  # no convolution there
    assert "hits no layer of the model it declares, 'ffn'" in (
        _mistake_problem(misplaced) or ""
    )
    # a kind's mistake is named with the module that declares it
    moved = dataclasses.replace(MISTAKES["conv-hw-swapped"], model="ffn")
    assert "open zoo/kinds/conv2d.py and name a model" in (
        _mistake_problem(moved) or ""
    )


def test_every_mistake_is_a_fault_with_its_own_case() -> None:
    declared = [m for kind in KINDS.values() for m in kind.mistakes]
    assert all(MISTAKES[m.name] is m for m in declared)  # one name, one mistake
    assert set(MISTAKES).isdisjoint(faults.CROSS_CUTTING)
    assert set(faults.FAULTS) == set(MISTAKES) | set(faults.CROSS_CUTTING)
    assert sorted(FAULT_CASES) == sorted(faults.FAULTS)
    # those of one case next to each other (the checker asks the references once)
    cases = [case for case, _ in itertools.groupby(FAULT_CASES.values())]
    assert len(cases) == len(set(cases))
    for name, mistake in MISTAKES.items():
        assert FAULT_CASES[name] == mistake_case(mistake)
        assert faults.FAULTS[name].description == mistake.description
        assert mistake.inject or mistake.corrupt or mistake.changes, name
        assert bool(mistake.params) == bool(mistake.corrupt), name
    assert _declared_in(MISTAKES["join-reversed"]) == "zoo/kinds/merge.py"
    assert _declared_in(MISTAKES["crop-swapped"]) == "zoo/kinds/borders.py"


def test_the_fast_tier_catches_each_fault_once_and_every_path_at_every_stage() -> None:
    from equivalence.sensitivity import fault_stage
    from tests import tiers

    paths = ("a", "b", "c", "d", "e")
    before = tiers.tier()
    try:
        tiers.set_tier("fast")
        fast = tiers.fault_pairs(paths)
        tiers.set_tier("full")
        full = tiers.fault_pairs(paths)
    finally:
        tiers.set_tier(before)
    assert len(full) == len(FAULT_CASES) * len(paths)
    assert {f for f, _ in fast} == set(FAULT_CASES)
    stages = {fault_stage(f) for f in FAULT_CASES}
    met = {(p, fault_stage(f)) for f, p in fast}
    assert met == {(p, s) for p in paths for s in stages}
    assert len(fast) < len(full)
