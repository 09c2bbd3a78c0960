from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from native import layout
from zoo.specs import MODELS, VARIANTS, Layer, ModelSpec, Workload
from zoo.weights import make_weights

ALL_SPECS = [*MODELS.values(), *VARIANTS.values()]


def _tiny_cnn(h: int, w: int, c: int, filters: int) -> ModelSpec:
    return ModelSpec(
        "tiny",
        (h, w, c),
        3,
        (
            Layer("conv", "conv2d", filters, 1, "valid", "relu"),
            Layer("flatten", "flatten"),
            Layer("out", "dense", 3),
        ),
        Workload("none", "sgd", 0.1, 2),
    )


@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2**16),
)
def test_oihw_round_trip_is_exact(h: int, w: int, c: int, f: int, seed: int) -> None:
    spec = _tiny_cnn(h, w, c, f)
    canonical = make_weights(spec, seed)
    native = layout.to_native(spec, canonical, "oihw")
    back = layout.to_canonical(spec, native, "oihw")
    for name, a in canonical.items():
        np.testing.assert_array_equal(back[name], a)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("family", layout.FAMILIES)
def test_every_model_round_trips(spec: ModelSpec, family: str) -> None:
    canonical = make_weights(spec, 3)
    back = layout.to_canonical(spec, layout.to_native(spec, canonical, family), family)
    assert all(np.array_equal(back[k], v) for k, v in canonical.items())


def test_flatten_permutation_matches_an_explicit_loop() -> None:
    spec = _tiny_cnn(2, 3, 4, 4)
    p = spec.param("out/kernel")
    kernel = np.arange(2 * 3 * 4 * 3, dtype=np.float32).reshape(24, 3)
    native = layout.to_native(spec, {**make_weights(spec, 0), p.name: kernel}, "oihw")[
        p.name
    ]
    for h in range(2):
        for w in range(3):
            for c in range(4):
                keras_row = (h * 3 + w) * 4 + c  # H, W, C flatten order
                torch_col = (c * 2 + h) * 3 + w  # C, H, W flatten order
                np.testing.assert_array_equal(native[:, torch_col], kernel[keras_row])


def test_conv_kernel_goes_to_out_in_kh_kw() -> None:
    spec = MODELS["lenet"]
    canonical = make_weights(spec, 0)
    k = canonical["conv2/kernel"]  # (3, 3, 6, 16)
    native = layout.to_native(spec, canonical, "oihw")["conv2/kernel"]
    assert native.shape == (16, 6, 3, 3)
    assert native[5, 4, 1, 2] == k[1, 2, 4, 5]


def test_keras_family_is_the_identity() -> None:
    spec = MODELS["lstm"]
    canonical = make_weights(spec, 0)
    native = layout.to_native(spec, canonical, "keras")
    assert all(native[k] is v for k, v in canonical.items())


def test_bad_names_give_one_clear_sentence() -> None:
    spec = MODELS["ffn"]
    with pytest.raises(ValueError, match="unknown layout family 'nhwc'"):
        layout.to_native(spec, make_weights(spec, 0), "nhwc")
