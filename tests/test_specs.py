from __future__ import annotations

import math

import pytest

from zoo.specs import MODELS, VARIANTS, get_spec


def _count(name: str) -> int:
    return sum(math.prod(p.shape) for p in get_spec(name).params)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # 784*128+128 + 128*64+64 + 64*10+10
        ("ffn", 109_386),
        # conv 5*5*1*6+6, conv 3*3*6*16+16, 400*120+120, 120*84+84, 84*10+10
        ("lenet", 156 + 880 + 48_120 + 10_164 + 850),
        # 4u(F+u)+4u with u=128, F=50, then 128*2+2
        ("lstm", 4 * 128 * (50 + 128) + 4 * 128 + 258),
    ],
)
def test_parameter_counts_match_hand_counts(name: str, expected: int) -> None:
    assert _count(name) == expected


def test_vgg16_has_thirteen_convolutions_and_a_512_512_head() -> None:
    spec = MODELS["vgg16"]
    convs = [p for p in spec.params if p.kind == "conv2d"]
    assert len(convs) == 13
    assert [p.shape for p in spec.params if p.name.startswith("fc")] == [
        (512, 512),
        (512,),
        (512, 512),
        (512,),
    ]
    assert spec.param("fc1/kernel").feature_shape == (1, 1, 512)


def test_rysia_variant_is_a_configuration_of_the_same_builder() -> None:
    spec = VARIANTS["vgg-rysia"]
    assert sum(p.kind == "conv2d" for p in spec.params) == 10
    assert spec.param("fc1/kernel").shape == (2 * 2 * 512, 512)
    assert spec.param("fc2/kernel").shape == (512, 256)
    assert spec.module == "vgg16"


def test_lenet_flatten_feeds_400_features_in_hwc() -> None:
    p = MODELS["lenet"].param("fc1/kernel")
    assert (p.kind, p.feature_shape, p.shape) == (
        "dense_after_flatten",
        (5, 5, 16),
        (400, 120),
    )


def test_unknown_model_lists_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known models: ffn, lenet, lstm, vgg-rysia"):
        get_spec("resnet")


def test_workloads_follow_the_issue() -> None:
    w = {
        n: (s.workload.optimizer, s.workload.learning_rate, s.workload.batch_size)
        for n, s in MODELS.items()
    }
    assert w == {
        "ffn": ("sgd", 0.01, 128),
        "lenet": ("adam", 0.001, 200),
        "vgg16": ("adam", 0.01, 128),
        "lstm": ("adam", 0.01, 128),
    }


def test_every_workload_uses_keras_adam_epsilon() -> None:
    """Epsilon outside the square root, as Keras' Adam has it; only a
    deliberate fault (``native.faults``) moves it inside."""
    specs = [*MODELS.values(), *VARIANTS.values()]
    assert not any(s.workload.epsilon_inside_sqrt for s in specs)
