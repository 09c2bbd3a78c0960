"""The deliberate faults change exactly what they claim, and name where."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from native import faults
from zoo.specs import MODELS, VARIANTS
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
    assert faulty.layer("block1_conv1").padding == "valid"
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
        ("same-padding-symmetric", "padding", "symmetric"),
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
