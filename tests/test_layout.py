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
            Layer.of(
                "conv", "conv2d", filters=filters, kernel_size=1, activation="relu"
            ),
            Layer.of("flatten", "flatten"),
            Layer.of("out", "dense", units=3),
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


def test_a_dense_kernel_after_a_flatten_is_a_plain_dense_kernel() -> None:
    """Every framework flattens images in Keras' H, W, C order (``flatten``
    in each ``ops.py``), so the kernel only has its axes swapped."""
    spec = _tiny_cnn(2, 3, 4, 4)
    p = spec.param("out/kernel")
    assert p.kind == "dense"
    assert p.feature_shape == (2, 3, 4)
    kernel = np.arange(2 * 3 * 4 * 3, dtype=np.float32).reshape(24, 3)
    weights = {**make_weights(spec, 0), p.name: kernel}
    native = layout.to_native(spec, weights, "oihw")[p.name]
    np.testing.assert_array_equal(native, kernel.T)


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


# --- operator operands -------------------------------------------------------------


@pytest.mark.parametrize(
    ("role", "shape", "native_shape"),
    [
        ("image", (2, 5, 7, 3), (2, 3, 5, 7)),
        ("conv_kernel", (3, 5, 4, 6), (6, 4, 3, 5)),
        ("dense_kernel", (4, 9), (9, 4)),
        ("plain", (4, 9), (4, 9)),
    ],
)
@given(seed=st.integers(0, 2**16))
def test_operands_round_trip_and_land_where_oihw_wants_them(
    role: str, shape: tuple[int, ...], native_shape: tuple[int, ...], seed: int
) -> None:
    a = np.random.default_rng(seed).standard_normal(shape)
    native = layout.operand_to_native(a, role, "oihw")
    assert native.shape == native_shape
    np.testing.assert_array_equal(layout.operand_to_canonical(native, role, "oihw"), a)
    assert layout.operand_to_native(a, role, "keras") is a
    if role == "image":  # pixel (n, h, w, c) is native[n, c, h, w]
        np.testing.assert_array_equal(native[1, 2, 4, 6], a[1, 4, 6, 2])
    if role == "conv_kernel":  # tap (i, j, in, out) is native[out, in, i, j]
        np.testing.assert_array_equal(native[5, 3, 2, 4], a[2, 4, 3, 5])


def test_an_operand_in_the_wrong_layout_is_told_apart() -> None:
    a = np.arange(2 * 3 * 3 * 2, dtype=float).reshape(2, 3, 3, 2)
    wrong = a.transpose(0, 3, 2, 1)  # N, C, W, H: the right shape, wrong order
    assert wrong.shape == layout.operand_to_native(a, "image", "oihw").shape
    assert not np.array_equal(wrong, layout.operand_to_native(a, "image", "oihw"))
    with pytest.raises(ValueError, match="unknown layout family"):
        layout.operand_to_native(a, "image", "nchw")


def test_every_parameter_kind_has_a_layout_both_ways() -> None:
    """A parameter kind of any model (a kind's ``params``) has its rule to
    and from a channels-first framework's layout."""
    kinds = {
        p.kind for spec in (*MODELS.values(), *VARIANTS.values()) for p in spec.params
    }
    for table in (layout._TO_OIHW, layout._FROM_OIHW):
        missing = sorted(kinds - set(table))
        assert not missing, (
            f"native/layout.py has no rule for parameter kind(s) {missing}: add "
            "one to _TO_OIHW and _FROM_OIHW (docs/extending.md, Adding a layer "
            "kind, step 3)"
        )
