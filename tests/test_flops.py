from __future__ import annotations

import dataclasses
import math

import pytest

from harness.core.flops import (
    forward_flops,
    layer_flops,
    optimizer_flops,
    step_flops,
    train_flops,
)
from zoo.specs import MODELS, ModelSpec


def test_ffn_forward_matches_hand_count_at_batch_one() -> None:
    # Per dense layer 2*in*out + out (bias) + out (ReLU on the hidden layers).
    fc1 = 2 * 784 * 128 + 128 + 128
    fc2 = 2 * 128 * 64 + 64 + 64
    logits = 2 * 64 * 10 + 10
    assert forward_flops(MODELS["ffn"], 1) == fc1 + fc2 + logits == 218_762


def test_lenet_conv1_follows_the_conv_formula() -> None:
    # 5x5 kernel, 1 -> 6 channels, valid on 28x28 -> 24x24 outputs.
    conv1 = layer_flops(MODELS["lenet"])[0]
    outputs = 24 * 24 * 6
    assert conv1.name == "conv1"
    assert conv1.matmul == 2 * 5 * 5 * 1 * 6 * 24 * 24 == 172_800
    assert conv1.elementwise == outputs + outputs  # bias, ReLU


def test_vgg16_forward_per_sample_is_about_0_63_gflop() -> None:
    # Conv MACs by hand, 3x3 'same': 9*cin*cout*H*W per layer, block by block.
    conv_macs = (
        9 * (3 * 64 + 64 * 64) * 32 * 32
        + 9 * (64 * 128 + 128 * 128) * 16 * 16
        + 9 * (128 * 256 + 2 * 256 * 256) * 8 * 8
        + 9 * (256 * 512 + 2 * 512 * 512) * 4 * 4
        + 9 * (3 * 512 * 512) * 2 * 2
    )
    dense_macs = 512 * 512 + 512 * 512 + 512 * 10
    assert conv_macs + dense_macs == 313_725_952
    # Bias + ReLU on 276,480 conv and 1,024 hidden dense outputs, 10 logit
    # biases, 124,928 pooled inputs: under 0.2% on top of the MACs.
    elementwise = 2 * 276_480 + 2 * 1_024 + 10 + 124_928
    flops = forward_flops(MODELS["vgg16"], 1)
    assert flops == 2 * (conv_macs + dense_macs) + elementwise == 628_131_850
    assert 0.62e9 < flops < 0.64e9


def test_lstm_forward_matches_hand_count() -> None:
    t, f, u = 250, 50, 128
    per_step = 2 * f * 4 * u + 2 * u * 4 * u + 4 * u + 9 * u
    assert forward_flops(MODELS["lstm"], 1) == t * per_step + 2 * u * 2 + 2


def test_input_shape_overrides_the_spec() -> None:
    spec = MODELS["lstm"]
    short = forward_flops(spec, 1, input_shape=(25, 50))
    assert forward_flops(spec, 1) - 514 == 10 * (short - 514)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_is_linear_in_batch(name: str) -> None:
    spec = MODELS[name]
    assert forward_flops(spec, 7) == 7 * forward_flops(spec, 1)
    assert step_flops(spec, "infer", 7) == forward_flops(spec, 7)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_train_is_per_sample_work_times_batch_plus_one_update(name: str) -> None:
    spec = MODELS[name]
    per_sample = train_flops(spec, 2) - train_flops(spec, 1)
    assert train_flops(spec, 5) == 5 * per_sample + optimizer_flops(spec)
    assert step_flops(spec, "train", 5) == train_flops(spec, 5)


def test_vgg16_train_is_about_three_forwards() -> None:
    spec = MODELS["vgg16"]
    ratio = train_flops(spec, 128) / forward_flops(spec, 128)
    assert 2.9 < ratio < 3.1


def test_optimizer_cost_follows_the_workload() -> None:
    ffn, lenet = MODELS["ffn"], MODELS["lenet"]
    assert ffn.workload.optimizer == "sgd"
    assert optimizer_flops(ffn) == 2 * 109_386
    assert lenet.workload.optimizer == "adam"
    assert optimizer_flops(lenet) == 12 * sum(math.prod(p.shape) for p in lenet.params)


def test_a_frozen_layer_counts_the_backward_it_takes() -> None:
    """ffn with fc1 frozen takes no backward through it (nothing before it
    trains): its 2x forward matmul and its elementwise backward are not
    counted; with fc2 frozen instead, its input gradient still flows to fc1
    (1x its forward matmul kept, its weight gradient not); and a frozen
    layer has no optimizer update (issue 75)."""
    ffn = MODELS["ffn"]
    fc1, fc2 = (2 * 784 * 128, 128 + 128), (2 * 128 * 64, 64 + 64)

    def frozen(name: str) -> ModelSpec:
        layers = tuple(
            dataclasses.replace(layer, trainable=layer.name != name)
            for layer in ffn.layers
        )
        return dataclasses.replace(ffn, layers=layers)

    per_sample = train_flops(ffn, 1) - optimizer_flops(ffn)
    first, second = frozen("fc1"), frozen("fc2")
    assert train_flops(first, 1) - optimizer_flops(first) == (
        per_sample - 2 * fc1[0] - fc1[1]
    )
    assert train_flops(second, 1) - optimizer_flops(second) == (per_sample - fc2[0])
    assert optimizer_flops(first) == optimizer_flops(ffn) - 2 * (784 * 128 + 128)


def test_bad_phase_raises_one_clear_sentence() -> None:
    with pytest.raises(ValueError, match=r"unknown phase 'eval'; use one of: train"):
        step_flops(MODELS["ffn"], "eval", 1)


def test_bad_batch_raises() -> None:
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        forward_flops(MODELS["ffn"], 0)
