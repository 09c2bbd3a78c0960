"""A finding's reproducer (``workers.keras_code``) rebuilds the very model
the Keras paths build, for every kind: written from the layer configs, run
as a script, it computes the same logits."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.fuzz.report import errors_of, run_script, wrong
from tests import tiers
from workers.launch import PROJECT_ROOT
from workers.paths import interpreter
from zoo.arrays import save_npz
from zoo.models import get_spec

pytestmark = pytest.mark.paths


ENV = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}


def _reproduce(args: list[str], script: Path, backend: str = "jax") -> str:
    """Write a reproducer with ``python -m workers.keras_code ARGS SCRIPT``
    (model, seed, batch, steps, expected) on ``backend`` and run it there:
    its output."""
    _write(args, script, backend)
    python = interpreter("jax")
    done = subprocess.run(
        [python, str(script), backend],
        env={**ENV, "KERAS_BACKEND": backend},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=script.parent,
    )
    return done.stdout


def _write(args: list[str], script: Path, backend: str = "jax") -> None:
    """Write a reproducer with ``python -m workers.keras_code ARGS SCRIPT``,
    Keras on ``backend`` (where ARGS ask for its own values, they are that
    backend's)."""
    python = interpreter("jax")
    subprocess.run(
        [python, "-m", "workers.keras_code", *args, str(script)],
        cwd=PROJECT_ROOT,
        env={**ENV, "KERAS_BACKEND": backend},
        check=True,
        capture_output=True,
        timeout=300,
    )


# Where a script is run to show it rebuilds the model, written and run on one
# backend: in the fast tier the one it sends a command through (Keras on
# JAX's recurrent layers compile for some 25 s a run; JAX's branch of the
# script is run by test_the_reproducer_sees_wrong_expected_values, the other
# two backends' by test_the_reproducers_gradients_are_each_backends_own).
def _rebuild_backends() -> list[str]:
    return ["jax", "torch"] if tiers.size().full_only else [tiers.COMMAND_FRAMEWORK]


@pytest.mark.parametrize(
    "model", ["kinds-seq", "wide-deep", "kinds-cnn", "transformer-tiny"]
)
def test_the_reproducer_rebuilds_the_same_model(model: str, tmp_path: Path) -> None:
    """wide-deep: two inputs (a list of mini-batches each), two outputs
    (packed as the tool packs them) and a weighted sum of two losses, as
    ``harness fuzz`` draws them."""
    if model not in ("kinds-seq", "wide-deep"):  # kinds-seq's kin
        tiers.full_only(tiers.size(), f"the reproducer of {model}")
    for backend in _rebuild_backends():
        _rebuilds(model, tmp_path / backend, backend)


def _rebuilds(model: str, folder: Path, backend: str) -> None:
    folder.mkdir()
    script = folder / "repro.py"
    output = _reproduce([model, "0", "2", "1", "keras"], script, backend)
    text = script.read_text()
    assert "np.array(" in text
    assert "keras.layers." in text
    errors = errors_of(output)
    trained = {f"grad:{p.name}" for p in get_spec(model).params if p.trainable}
    assert set(errors) == {"logits"} | trained, (backend, output)
    assert errors["logits"] < 1e-6, (backend, output)
    assert max(errors.values()) < 1e-5, (backend, output)


def test_the_reproducers_gradients_are_each_backends_own(tmp_path: Path) -> None:
    """The script's gradient code, one branch per backend, computes on
    TensorFlow and PyTorch what the tool's Keras path on JAX computed for
    the same model: rounding apart (the two backends' float32 kernels part
    by up to 1.3e-5 on a recurrent bias), below what a reproducer calls
    wrong."""
    script = tmp_path / "r.py"
    # A small model: the gradient code is what is tested, the kinds are
    # test_the_reproducer_rebuilds_the_same_model's (kinds-seq's recurrent
    # layers took 138 s here, mostly compiling).
    _write(["lenet", "0", "2", "0", "keras"], script)
    for backend in ("tensorflow", "torch"):
        output = run_script(script, backend)
        errors = errors_of(output)
        assert any(q.startswith("grad:") for q in errors), (backend, output)
        assert wrong(output) is False, (backend, output)


def test_the_reproducer_sees_wrong_expected_values(tmp_path: Path) -> None:
    spec = get_spec("lenet")  # what it sees does not depend on the kinds
    expected = tmp_path / "expected.npz"
    save_npz(expected, {"logits": np.ones((2, spec.classes), np.float64)})
    output = _reproduce([spec.name, "0", "2", "0", str(expected)], tmp_path / "r.py")
    assert wrong(output) is True
    # a wrong gradient alone
    param = next(p for p in spec.params if p.trainable)
    save_npz(expected, {f"grad:{param.name}": np.ones(param.shape, np.float64)})
    output = _reproduce([spec.name, "0", "2", "0", str(expected)], tmp_path / "g.py")
    assert set(errors_of(output)) == {f"grad:{param.name}"}, output
    assert wrong(output) is True


def test_a_reproducer_of_a_dropout_trains_deterministically(tmp_path: Path) -> None:
    """Issue 80: a reproducer wrote ``Dropout(rate=0.5)(h, training=False)``,
    which Keras overrides in training (a functional model passes its own
    ``training``), so the script trained with dropout on, unlike the tool's
    trajectories (compared at rate 0).  Written now at rate 0, named in its
    docstring, without ``training=``: two runs of two steps print the same
    errors (against fixed values: any tell a random draw)."""
    spec = get_spec("kind-dropout")
    assert spec.noisy
    kernel = next(p for p in spec.params if p.trainable)
    expected = tmp_path / "expected.npz"
    # a step's loss too (what a failure of the loss alone needs to be
    # triaged by a run), at a value far from it: seen wrong
    ones = np.ones(kernel.shape, np.float64)
    save_npz(expected, {f"step2/{kernel.name}": ones, "step2/loss": np.array(1e6)})
    script = tmp_path / "dropout.py"
    outputs = [_reproduce(["kind-dropout", "0", "4", "2", str(expected)], script)]
    text = script.read_text()
    assert "training=" not in text
    assert "Dropout(name='drop', rate=0.0" in text
    assert "Layers that draw noise (drop) are written at an amount" in text
    outputs.append(run_script(script, "jax"))
    assert set(errors_of(outputs[0])) == {f"step2/{kernel.name}", "step2/loss"}
    assert wrong(outputs[0]) is True
    assert outputs[0] == outputs[1]


FINDINGS = PROJECT_ROOT / "docs" / "findings"
# The gradients docs/findings/keras-jax-leaky-relu-at-zero.md shows, per backend.
LEAKY_AT_ZERO = {
    "jax": ("[1.  1.  0.2]", "[1. 1. 1. 1.]"),
    "tensorflow": ("[0.2 1.  0.2]", "[0.2 0.2 0.2 0.2]"),
    "torch": ("[0.2 1.  0.2]", "[0.2 0.2 0.2 0.2]"),
}


@pytest.mark.parametrize("backend", list(LEAKY_AT_ZERO))
def test_keras_backends_disagree_on_leaky_relu_at_zero(backend: str) -> None:
    """The finding page's claim, run: Keras on JAX takes LeakyReLU's
    gradient at exactly 0 as 1, on TensorFlow and PyTorch as the slope (the
    native models take the slope).  A Keras release that changes it fails
    here, and the page with it."""
    done = subprocess.run(
        [interpreter(backend), "keras_jax_leaky_relu_at_zero.py", backend],
        env={**ENV, "KERAS_BACKEND": backend},
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=FINDINGS,
    )
    at_zero, beta = LEAKY_AT_ZERO[backend]
    assert f"leaky_relu: {at_zero}" in done.stdout
    assert f"beta gradient: {beta}" in done.stdout


def test_keras_torch_nadam_takes_a_short_first_step() -> None:
    """The claim of docs/findings/keras-torch-nadam.md, run: Keras' Nadam on
    PyTorch takes its first step 1 - 6.4e-6 of the exact one (its velocity
    not corrected as it was accumulated); on JAX it is exact to float32.  A
    Keras release that fixes it fails here, and the page with it."""
    said = {}
    for backend in ("jax", "torch"):
        said[backend] = subprocess.run(
            [interpreter(backend), "keras_torch_nadam.py", backend],
            env={**ENV, "KERAS_BACKEND": backend},
            check=True,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=FINDINGS,
        ).stdout
    assert "step / exact step: [1.0, 1.0, 1.0]" in said["jax"], said["jax"]
    assert "step / exact step: [0.9999936, 0.9999936, 0.9999936]" in said["torch"]
    assert "velocity / (0.001 g**2): [1.0, 1.0, 1.0]" in said["torch"]


def test_log_one_plus_exp_loses_digits_below_zero() -> None:
    """The claim of docs/findings/log-one-plus-exp.md, run: PyTorch's binary
    cross-entropy from logits and MXNet's softrelu are 3e-3 off at z = -9,
    PyTorch's softplus is exact.  A release that fixes either fails here."""
    torch = subprocess.run(
        [interpreter("torch"), "log_one_plus_exp.py", "torch"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=FINDINGS,
        check=True,
    ).stdout
    errors = {
        line.split(":")[0]: json.loads(line.split(":", 1)[1])
        for line in torch.splitlines()
    }
    assert errors["binary_cross_entropy_with_logits"][0] > 1e-3
    assert max(errors["softplus"]) < 1e-7
    mxnet = os.environ.get("HARNESS_PYTHON_MXNET", "")
    if mxnet and Path(mxnet).exists():  # Path("") is the folder: it exists
        said = subprocess.run(
            [mxnet, "log_one_plus_exp.py", "mxnet"],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=FINDINGS,
            check=True,
        ).stdout
        line = next(x for x in said.splitlines() if x.startswith("softrelu:"))
        assert json.loads(line.split(":", 1)[1])[0] > 1e-3


def test_keras_torch_one_channel_conv_gradient_raises() -> None:
    """docs/findings/pytorch-conv-grad-weight.md, through Keras: the gradient
    of Keras' Conv2D with one filter over four channels, and of its
    Conv2DTranspose over one channel, raises on PyTorch (PyTorch's bug with
    the strides of Keras' kernel layout).  A release that fixes it fails
    here."""
    done = subprocess.run(
        [interpreter("torch"), "keras_torch_one_channel_conv.py"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=FINDINGS,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "Conv2D: RuntimeError: slow_conv2d: grad_weight must be contiguous",
        "Conv2DTranspose: RuntimeError: grad_weight needs to be contiguous",
    ]
