"""A finding's claim is a test: each plain-framework script in docs/findings
that a page quotes runs here and must still show what the page says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import tiers
from workers.launch import PROJECT_ROOT

FINDINGS = PROJECT_ROOT / "docs" / "findings"
SHAPES = PROJECT_ROOT / "docs" / "results" / "shapes"
FUZZ = PROJECT_ROOT / "docs" / "results" / "fuzz"


def _printed(script: Path, timeout: float = 600) -> list[Any]:
    """A findings script's output, one JSON value a line, run as a user runs
    it (the project root as its folder)."""
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )
    return [json.loads(line) for line in done.stdout.strip().splitlines()]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"
)
def test_nll_loss_of_a_channels_last_image_cannot_train() -> None:
    """docs/results/per_position.md: keras.io's U-Net is refused because
    PyTorch's nll_loss raises in the backward pass of a channels-last image
    of log-probabilities (what Keras' sparse cross-entropy from
    probabilities hands it), and trains on the same values made contiguous;
    when a PyTorch release fixes it, this fails and the page is stale."""
    said = _printed(FINDINGS / "nll_loss_channels_last.py", 300)[-1]
    assert said["channels_last_input"]
    assert said["raised"] == "grad_input must be contiguous"
    assert said["contiguous_trains"]


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("tensorflow", "jax", "torch")),
    reason="a Keras backend is not installed",
)
def test_keras_tensorflow_trains_a_cross_entropy_from_probabilities_unclipped() -> None:
    """docs/results/per_position.md: Keras on TensorFlow computes a sparse
    cross-entropy from a softmax's probabilities from its logits, unclipped,
    eagerly and in its train step alike, where Keras on JAX and PyTorch clip
    at 1e-7 (Keras' formula); the float64 losses tell which is which.  When
    Keras changes either, this fails and the page is stale."""
    lines = _printed(FINDINGS / "keras_tensorflow_unclipped_crossentropy.py")
    expected = lines[0]["float64"]
    assert expected["below_clip"] >= 1
    assert expected["exact"] - expected["clipped"] > 0.1
    by_backend = {line["backend"]: line for line in lines[1:]}
    assert set(by_backend) == {"tensorflow", "jax", "torch"}
    for backend, said in by_backend.items():
        formula = "exact" if backend == "tensorflow" else "clipped"
        for how in ("eager", "train_on_batch"):
            assert abs(said[how] - expected[formula]) < 1e-5 * expected[formula], (
                backend,
                how,
            )


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"
)
def test_the_unet_has_the_pixels_below_the_clip_its_page_says() -> None:
    """docs/results/per_position.md: in the check's first training-mode pass
    of keras.io's U-Net, 79 of 16,384 pixels put their true class below
    1e-7, and Keras on TensorFlow's loss there is the exact one, 3.7e-3
    from Keras' clipped formula (the whole of its step-1 difference)."""
    tiers.full_only(tiers.size(), "the U-Net's clipped pixels")
    said = _printed(SHAPES / "unet_clipped_pixels.py")[-1]
    assert (said["below_clip"], said["pixels"]) == (79, 16384)
    assert abs(said["keras_tensorflow"] - said["exact"]) < 1e-6 * said["exact"]
    assert round(said["keras_tensorflow_off"], 4) == 0.0037


def _script(path: Path) -> Any:
    """A script of docs/ as a module."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _survey() -> Any:
    """docs/findings/sparse_gradient_survey.py as a module."""
    return _script(FINDINGS / "sparse_gradient_survey.py")


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("tensorflow", "jax")),
    reason="a Keras backend is not installed",
)
def test_keras_tensorflows_sparse_adamax_is_wrong_only_on_opposite_signs() -> None:
    """docs/findings/sparse-gradient-optimizers.md: Keras' Adamax on
    TensorFlow's sparse embedding gradient (one row per token occurrence)
    steps as JAX's dense one when a repeated token's occurrences share a
    sign, and short of it when they do not (the largest magnitude of an
    occurrence, 3, where the row's is 2), as Adam is wrong on both; when
    Keras changes it, this fails and the page is stale."""
    tiers.full_only(tiers.size(), "the sparse-gradient survey's Adamax rows")
    survey = _survey()
    same, opposite = survey.CASES["same sign"], survey.CASES["opposite signs"]
    for targets, wrong in ((same, False), (opposite, True)):
        tf = survey.run("tensorflow", "Adamax", targets)
        jax = survey.run("jax", "Adamax", targets)
        assert isinstance(tf, float), tf
        assert isinstance(jax, float), jax
        assert (abs(tf - jax) > 1e-4 * abs(jax)) == wrong, (targets, tf, jax)
    adam = survey.run("tensorflow", "Adam", opposite)
    assert isinstance(adam, float)
    assert abs(adam - survey.numpy_expected("Adam", opposite)) > 1e-3


@pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None, reason="TensorFlow is not installed"
)
def test_keras_tensorflows_sgd_with_a_clip_is_wrong_on_a_repeated_token() -> None:
    """docs/findings/sparse-gradient-optimizers.md: SGD alone is right on
    TensorFlow's sparse embedding gradient, and wrong with each of Keras'
    gradient clips (taken per token occurrence), where the same optimizer
    on the dense table is right; when Keras changes it, this fails and the
    page is stale."""
    tiers.full_only(tiers.size(), "the sparse-gradient survey's SGD-with-a-clip rows")
    survey = _survey()
    opposite = survey.CASES["opposite signs"]
    for name in ("SGD", *(n for n in survey.OPTIMIZERS if "clip" in n)):
        expected = survey.numpy_expected(name, opposite)
        sparse = survey.run("tensorflow", name, opposite)
        dense = survey.run("tensorflow", name, opposite, dense=True)
        assert isinstance(expected, float), name
        assert isinstance(sparse, float), (name, sparse)
        assert isinstance(dense, float), (name, dense)
        assert abs(dense - expected) < 1e-5, (name, dense, expected)
        assert (abs(sparse - expected) > 1e-3) == (name != "SGD"), (name, sparse)


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("tensorflow", "jax", "torch")),
    reason="a Keras backend is not installed",
)
def test_keras_torch_pools_wrong_exactly_where_its_page_says() -> None:
    """docs/findings/padded-average-pool.md: Keras on PyTorch averages a
    `same` pool wrongly exactly when an axis is padded unevenly and the
    window is wider than two (10 steps at pool 3 pad one step each side and
    are right; at stride 2, or 5 steps, one step at the end and are wrong);
    JAX and TensorFlow are right everywhere.  When Keras releases the fix,
    this fails and the page is stale."""
    tiers.full_only(tiers.size(), "the padded pool's cases")
    rows = {row["case"]: row for row in _printed(FINDINGS / "padded_average_pool.py")}
    wrong = {case for case, row in rows.items() if row["wrong"]}
    assert wrong == {
        "1-D, 10 steps, pool 3, stride 2",
        "1-D, 5 steps, pool 3",
        "2-D, 4x5, pool 3",
        "2-D, 5x5, pool 3",
    }
    for case, row in rows.items():
        uneven = any(before != after for before, after in row["padding"])
        assert row["wrong"] == (["torch"] if case in wrong else []), case
        assert (case in wrong) == (uneven and "pool 2" not in case), case
    assert rows["1-D, 10 steps, pool 3"]["padding"] == [[1, 1]]


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="PyTorch is not installed"
)
def test_pytorchs_conv_gradient_raises_on_keras_one_channel_weight() -> None:
    """docs/findings/pytorch-conv-grad-weight.md: PyTorch's CPU convolution
    raises in the weight's gradient when the weight has one output channel
    (a transposed one: one input channel) and the strides Keras' kernel
    layout gives it, in float32 and float64; the same values with
    PyTorch's own channels-last strides, a contiguous input or weight, two
    output channels, one input channel or a 1x1 kernel give the float64
    gradient.  When PyTorch fixes it, this fails and the page is stale."""
    variants = _printed(FINDINGS / "torch_conv_grad_weight.py", 300)[-1]["variants"]
    raising = {
        "as Keras lays it out": "slow_conv2d: grad_weight must be contiguous",
        "float64": "slow_conv2d: grad_weight must be contiguous",
        "transposed, one input channel": "grad_weight needs to be contiguous",
    }
    for name, said in variants.items():
        assert said.get("raised") == raising.get(name), name
        if name not in raising:
            assert said["largest_difference"] < 1e-5, name
    keras, canonical = (
        variants["as Keras lays it out"],
        variants["weight made channels-last by PyTorch"],
    )
    assert keras["weight_channels_last"]
    assert canonical["weight_channels_last"]
    assert keras["weight_strides"][1:] == canonical["weight_strides"][1:]


def test_the_draw_holds_each_known_bug_as_often_as_its_page_says() -> None:
    """docs/results/fuzz/README.md: how many of 3,000 drawn models (1,000
    for each of three seeds: the same draws on every run) each known Keras
    bug can show on.  When the draw changes, this fails: run the script again
    and put its counts in the table (a steering that stopped drawing the
    padded pool would show here first)."""
    tiers.full_only(tiers.size(), "3,000 drawn models")
    done = subprocess.run(
        [sys.executable, str(FUZZ / "rediscovery.py"), "shares"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    total = json.loads(done.stdout)["total"]
    assert total["models"] == 3000
    page = (FUZZ / "README.md").read_text()
    rows = {
        cells[1]: int(cells[2])
        for line in page.splitlines()
        if line.startswith("| `keras-")
        and len(cells := [c.strip(" `") for c in line.split("|")]) > 3
    }
    assert set(rows) >= {
        "keras-tensorflow-sparse-gradient-optimizers",
        "keras-torch-padded-average-pool",
    }
    for bug, count in rows.items():
        assert total.get(bug, 0) == count, (bug, total)


def test_the_rediscovery_table_counts_only_the_bugs_each_campaign_met() -> None:
    """docs/results/fuzz/rediscovery.py's table: a campaign that met one bug
    of two counts for that one and not for "all"; the seconds and models to
    each are the row's."""
    module = _script(FUZZ / "rediscovery.py")
    met = {"s": 54, "models": 4, "finding": "d0e40bac2d"}
    rows = [
        {"folder": "00", "models": 58, "wall_s": 659, "met": {"a": met}},
        {"folder": "01", "models": 9, "wall_s": 90, "met": {"a": met, "b": met}},
    ]
    lines = module.table(rows, ("a", "b"))
    assert lines[2] == "| 00 | 58 | 659 | 54 (4) | - |"
    assert lines[-1].endswith("Of 2 campaigns: `a` 2, `b` 1; all of them 1.")
