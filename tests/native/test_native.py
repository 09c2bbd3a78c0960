"""Every native framework package in process: its surface, and its numbers
against one NumPy reference.

Parametrized over the frameworks; a framework that is not installed is skipped
with its reason.  The surface: the same files in every framework folder, the
same ``apply`` signature in all sixteen model modules, the same building
blocks in every ``ops.py``, every ``common`` meeting ``native.protocol``'s
``Framework``, and the runner meeting ``workers.protocol``.  The numbers: the
feed-forward net's forward pass, gradients and Keras' SGD and Adam (and the
``epsilon_inside_sqrt`` variant a fault uses) written in float64 NumPy.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

import native
from equivalence.compare import relative_error
from native import (
    FILES,
    FRAMEWORKS,
    IDIOMATIC,
    compose,
    faults,
    layout,
    load_apply,
    load_framework,
)
from native.protocol import Framework, blocks, score_masks, unmasked
from tests import tiers
from workers import protocol
from workers.native_runner import NativeRunner, Session
from zoo import packing
from zoo.data import make_batches
from zoo.kinds import base as zoo_base
from zoo.losses import Objective
from zoo.optimizers import Schedule
from zoo.specs import (
    LAYER_KINDS,
    MODELS,
    VARIANTS,
    Layer,
    ModelSpec,
    Workload,
    layer_shapes,
)
from zoo.user_models import spec_from_document
from zoo.weights import make_weights

ALL_MODELS = {**MODELS, **VARIANTS}
# The tier's models (tests/tiers.py): VGG16 narrow in the fast tier.
SIZED_MODELS = list(tiers.size().models)
FAMILIES = list(tiers.size().families)
PACKAGES = ("jax", "tensorflow", "torch", "mxnet")


@pytest.fixture(params=FRAMEWORKS)
def runner(request: pytest.FixtureRequest) -> NativeRunner:
    pytest.importorskip(request.param.split("-")[0])
    return NativeRunner(request.param)


def _package(runner: NativeRunner) -> str:
    return runner.framework.split("-")[0]


def _parameters(function: Callable[..., object]) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]


# The surface ---------------------------------------------------------------


@pytest.mark.parametrize("package", PACKAGES)
def test_every_framework_folder_has_the_same_files(package: str) -> None:
    folder = Path(native.__file__).parent / package
    extra = {"idiomatic.py"} if package in IDIOMATIC else set()
    extra |= {"hybrid.py"} if package == "mxnet" else set()
    files = {p.name for p in folder.glob("*.py")}
    assert files == {*FILES, *extra}


def test_ops_meet_the_ops_protocol(runner: NativeRunner) -> None:
    """Every block and activation ``native.compose`` may call, with the
    protocol's parameters: a ``Block`` per registered layer kind (derived
    from ``zoo.kinds``, so a new kind asks for its block here at once), and
    ``Ops``' members: one per activation, a batch normalization's training
    pass, the dropout mask and the perturbations of a perturbed reference
    run."""
    expected = blocks()
    assert set(LAYER_KINDS) <= set(expected)
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    where = f"native/{_package(runner)}/ops.py"
    problems = _unmet(ops, where, expected)
    assert not problems, "; ".join(problems)


def _unmet(
    ops: object, where: str, expected: dict[str, Callable[..., object]]
) -> list[str]:
    """What ``ops`` lacks of ``expected``, each named with its file and the
    guide's step."""
    step = "docs/extending.md, Adding a layer kind, step 1"
    problems = []
    for member, signature in expected.items():
        found = getattr(ops, member, None)
        if not callable(found):
            problems.append(
                f"{where} has no block {member!r}: write "
                f"{member}({', '.join(_parameters(signature))}) there ({step})"
            )
        elif _parameters(found) != _parameters(signature):
            problems.append(
                f"{where}: {member} takes ({', '.join(_parameters(found))}), not "
                f"({', '.join(_parameters(signature))}) as native/protocol.py "
                f"asks ({step})"
            )
    return problems


def test_a_missing_or_misshapen_block_is_named_with_its_file() -> None:
    """The check itself: a kind's block left out, and one of another
    signature, are each named with the file and the step."""

    def dense(h: object, params: object, spec: object, name: str) -> object:
        return h

    def conv2d(h: object, params: object) -> object:
        return h

    ops = SimpleNamespace(dense=dense, conv2d=conv2d)
    wanted = {k: v for k, v in blocks().items() if k in ("dense", "conv2d", "flatten")}
    problems = _unmet(ops, "native/toy/ops.py", wanted)
    assert len(problems) == 2, problems
    assert "native/toy/ops.py has no block 'flatten'" in problems[1]
    assert "conv2d takes (h, params), not (h, params, spec, name)" in problems[0]
    assert all("Adding a layer kind, step 1" in p for p in problems)


def test_common_meets_the_framework_protocol(runner: NativeRunner) -> None:
    fw: ModuleType = runner.fw  # type: ignore[assignment]
    members = [m for m in vars(Framework) if not m.startswith("_") and m != "LAYOUT"]
    assert members  # the Protocol is read, not empty
    for member in members:
        assert callable(getattr(fw, member, None)), member
        assert _parameters(getattr(fw, member)) == _parameters(
            getattr(Framework, member)
        ), member
    assert fw.LAYOUT in layout.FAMILIES


def test_flatten_gives_keras_order(runner: NativeRunner) -> None:
    """Images flattened in every framework come out in Keras' H, W, C order
    (``native.layout``), whatever the framework's own image layout."""
    spec = ModelSpec(
        "flat",
        (2, 3, 4),
        5,
        (Layer.of("flat", "flatten"), Layer.of("out", "dense", units=5)),
        Workload("none", "sgd", 0.1, 2),
    )
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    x = np.arange(2 * 2 * 3 * 4, dtype=np.float32).reshape(2, 2, 3, 4)
    fw = runner.fw
    flat = fw.to_numpy(ops.flatten(fw.to_input(x), {}, spec, "flat"))
    np.testing.assert_array_equal(flat, x.reshape(2, -1))


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_train_state_fields_are_in_one_order(
    runner: NativeRunner, optimizer: str
) -> None:
    spec = _with_workload(MODELS["ffn"], Workload("mnist", optimizer, 0.01, 8))
    state = runner.train_state(spec, make_weights(spec, 0))
    fields = [f.name for f in dataclasses.fields(state)]
    assert fields == ["params", "slots", "u_product", "step", "workload"]
    assert state.workload is spec.workload
    # plain SGD keeps no slot; Adam its two moments
    assert sorted(state.slots) == (
        [] if optimizer == "sgd" else ["momentum", "velocity"]
    )


def test_unknown_optimizer_is_refused(runner: NativeRunner) -> None:
    spec = _with_workload(MODELS["ffn"], Workload("mnist", "adadelta", 0.01, 8))
    with pytest.raises(ValueError, match="optimizer 'adadelta'"):
        runner.train_state(spec, make_weights(spec, 0))


def test_load_apply_is_one_object_per_forward_pass(runner: NativeRunner) -> None:
    name = runner.framework
    vgg = MODELS["vgg16"]
    apply = load_apply(name, vgg)
    assert load_apply(name, vgg) is apply
    # the workload does not shape the pass
    other = _with_workload(vgg, dataclasses.replace(vgg.workload, learning_rate=1))
    assert load_apply(name, other) is apply
    rysia = load_apply(name, VARIANTS["vgg-rysia"])
    assert rysia is load_apply(name, VARIANTS["vgg-rysia"])
    assert rysia is not apply


def test_runner_meets_the_worker_protocol(runner: NativeRunner) -> None:
    assert isinstance(runner, protocol.NativeOnly)
    for surface in (protocol.Runner, protocol.NativeOnly):
        for member in (m for m in vars(surface) if not m.startswith("_")):
            if member == "framework":
                continue
            assert _parameters(getattr(runner, member)) == _parameters(
                getattr(surface, member)
            ), member
    for member in ("step", "params", "logits"):
        assert _parameters(getattr(Session, member)) == _parameters(
            getattr(protocol.Session, member)
        ), member


# The numbers ---------------------------------------------------------------


def _with_workload(spec: ModelSpec, workload: Workload) -> ModelSpec:
    return dataclasses.replace(spec, workload=workload)


@pytest.mark.sized
@pytest.mark.parametrize("model", SIZED_MODELS)
def test_logits_have_the_spec_shape(runner: NativeRunner, model: str) -> None:
    spec = ALL_MODELS[model]
    fw = runner.fw
    x, _ = make_batches(spec, 0, 2, 1)  # several inputs: packed, fed apart
    logits = fw.inference(
        load_apply(runner.framework, spec),
        runner.init(spec, make_weights(spec, 0)),
        runner.feed(spec, x[0]),
    )
    fw.sync(logits)
    given = logits if spec.several_outputs else (logits,)  # several: a tuple
    assert [tuple(o.shape) for o in given] == [(2, *h.shape) for h in spec.heads]


def _ffn_numpy(
    w: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray
) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    """Forward pass, mean cross-entropy and gradients of ``ffn`` in float64."""
    a1 = x @ w["fc1/kernel"] + w["fc1/bias"]
    h1 = np.maximum(a1, 0)
    a2 = h1 @ w["fc2/kernel"] + w["fc2/bias"]
    h2 = np.maximum(a2, 0)
    z = h2 @ w["logits/kernel"] + w["logits/bias"]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    loss = -np.log(p[np.arange(n), y]).mean()
    dz = (p - np.eye(z.shape[1])[y]) / n
    da2 = (dz @ w["logits/kernel"].T) * (a2 > 0)
    da1 = (da2 @ w["fc2/kernel"].T) * (a1 > 0)
    grads = {
        "logits/kernel": h2.T @ dz,
        "logits/bias": dz.sum(0),
        "fc2/kernel": h1.T @ da2,
        "fc2/bias": da2.sum(0),
        "fc1/kernel": x.T @ da1,
        "fc1/bias": da1.sum(0),
    }
    return z, float(loss), grads


def _rate_numpy(wl: Workload, t: int) -> float:
    """Keras 3's learning-rate schedules (keras/src/optimizers/schedules)
    at step ``t`` (Keras' iterations: 0 first) in float64, written here once
    more, apart from every framework's."""
    s, lr0 = wl.schedule, wl.learning_rate
    if s is None:
        return lr0
    if s.kind == "piecewise_constant_decay":
        return s.values[sum(t > b for b in s.boundaries)]
    p = t / s.decay_steps
    p = math.floor(p) if s.staircase else p
    if s.kind == "exponential_decay":
        return lr0 * s.decay_rate**p
    if s.kind == "inverse_time_decay":
        return lr0 / (1 + s.decay_rate * p)
    if s.warmup_target and t < s.warmup_steps:
        return lr0 + (s.warmup_target - lr0) * t / s.warmup_steps
    start = s.warmup_target or lr0
    done = min(t, s.decay_steps + s.warmup_steps) - s.warmup_steps
    cosine = 0.5 * (1 + math.cos(math.pi * done / s.decay_steps))
    return start * ((1 - s.alpha) * cosine + s.alpha)


def _clip_numpy(wl: Workload, g: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Keras 3's gradient clipping (its base optimizer), in float64."""
    if wl.clipnorm:
        c = wl.clipnorm
        return {k: v * c / max(float(np.sqrt((v**2).sum())), c) for k, v in g.items()}
    if wl.global_clipnorm:
        c = wl.global_clipnorm
        norm = math.sqrt(sum(float((v**2).sum()) for v in g.values()))
        return {k: v * (c * min(1 / norm, 1 / c)) for k, v in g.items()}
    if wl.clipvalue:
        return {k: np.clip(v, -wl.clipvalue, wl.clipvalue) for k, v in g.items()}
    return g


def _train_numpy(  # noqa: PLR0915, PLR0917 (one branch per optimizer, as Keras has them)
    w: dict[str, np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    wl: Workload,
    steps: int,
    frozen: tuple[str, ...] = (),
) -> dict[str, np.ndarray]:
    """Keras 3's optimizers (keras/src/optimizers/*.py, as zoo/optimizers.py
    states them) in float64, written here once more, apart from every
    framework's: the gradients of the parameters not ``frozen``, clipped,
    the schedule's rate, weight decay first, then SGD (momentum, Nesterov),
    Adam and AdamW (amsgrad; epsilon inside the square root when the
    workload says so, the fault), RMSprop (centered, momentum), Adagrad or
    Nadam."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    slot: dict[str, dict[str, np.ndarray]] = {}

    def zeros(name: str, k: str, start: float = 0.0) -> np.ndarray:
        return slot.setdefault(name, {}).setdefault(k, np.full_like(w[k], start))

    b1, b2, eps = wl.beta_1, wl.beta_2, wl.epsilon
    u_product = 1.0
    for t in range(1, steps + 1):
        _, _, every = _ffn_numpy(w, x, y)
        g = _clip_numpy(wl, {k: v for k, v in every.items() if k not in frozen})
        lr = _rate_numpy(wl, t - 1)
        if wl.weight_decay:
            w = {k: w[k] - w[k] * wl.weight_decay * lr if k in g else w[k] for k in w}

        def u(step: int) -> float:
            return b1 * (1 - 0.5 * 0.96**step)

        u_product *= u(t)
        for k in g:
            if wl.optimizer == "sgd" and not wl.momentum:
                w[k] = w[k] - lr * g[k]
            elif wl.optimizer == "sgd":
                b = zeros("momentum", k)
                b[:] = b * wl.momentum - lr * g[k]
                w[k] = w[k] + (b * wl.momentum - lr * g[k] if wl.nesterov else b)
            elif wl.optimizer in ("adam", "adamw"):
                alpha = lr * math.sqrt(1 - b2**t) / (1 - b1**t)
                m, v = zeros("m", k), zeros("v", k)
                m += (g[k] - m) * (1 - b1)
                v += (g[k] ** 2 - v) * (1 - b2)
                if wl.amsgrad:
                    vh = zeros("vh", k)
                    vh[:] = np.maximum(vh, v)
                    v = vh
                root = np.sqrt(v + eps) if wl.epsilon_inside_sqrt else np.sqrt(v) + eps
                w[k] = w[k] - m * alpha / root
            elif wl.optimizer == "rmsprop":
                v = zeros("v", k)
                v[:] = wl.rho * v + (1 - wl.rho) * g[k] ** 2
                d = v + eps
                if wl.centered:
                    a = zeros("a", k)
                    a[:] = wl.rho * a + (1 - wl.rho) * g[k]
                    d = v - a**2 + eps
                increment = lr * g[k] / np.sqrt(d)
                if wl.momentum:
                    b = zeros("momentum", k)
                    b[:] = wl.momentum * b + increment
                    increment = b
                w[k] = w[k] - increment
            elif wl.optimizer == "adagrad":
                acc = zeros("acc", k, wl.initial_accumulator_value)
                acc += g[k] ** 2
                w[k] = w[k] - lr * g[k] / np.sqrt(acc + eps)
            else:  # nadam
                m, v = zeros("m", k), zeros("v", k)
                m += (g[k] - m) * (1 - b1)
                v += (g[k] ** 2 - v) * (1 - b2)
                m_hat = u(t + 1) * m / (1 - u_product * u(t + 1)) + (1 - u(t)) * g[
                    k
                ] / (1 - u_product)
                v_hat = v / (1 - b2**t)
                w[k] = w[k] - m_hat * lr / (np.sqrt(v_hat) + eps)
    return w


def test_layer_norm_over_images_normalizes_each_pixels_channels(
    runner: NativeRunner,
) -> None:
    """What ``harness fuzz`` found (finding 20b4e3d631, shrunk to these three
    layers): PyTorch and MXNet normalized an image's last axis of their own
    ``(N, C, H, W)`` layout, the width, not Keras' channels."""
    spec = ModelSpec(
        "image-norm",
        (3, 4, 2),
        3,
        (
            Layer.of("ln", "layer_norm", epsilon=1e-5),
            Layer.of("flat", "flatten"),
            Layer.of("out", "dense", units=3),
        ),
        Workload("none", "sgd", 0.1, 2),
    )
    weights = make_weights(spec, 0)
    weights["ln/gamma"][:] = [1.5, -0.5]
    weights["ln/beta"][:] = [0.25, 1.0]
    x, y = make_batches(spec, 0, 2, 1)
    logits, _, _ = runner.evaluate(spec, weights, x[0], y[0])
    h = x[0].astype(np.float64)
    mean = h.mean(axis=-1, keepdims=True)
    norm = (h - mean) / np.sqrt(((h - mean) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
    norm = norm * weights["ln/gamma"] + weights["ln/beta"]
    expected = norm.reshape(2, -1) @ weights["out/kernel"] + weights["out/bias"]
    assert relative_error(logits, expected) < 1e-5


def test_a_softmax_over_an_image_is_over_its_channels(runner: NativeRunner) -> None:
    """Finding 20b4e3d631 of issue 74's campaign: a softmax activation on an
    image, which PyTorch and MXNet took over the last axis of their own
    ``(N, C, H, W)`` layout, the width, not Keras' channels."""
    spec = ModelSpec(
        "image-softmax",
        (2, 3, 2),
        3,
        (
            Layer.of("soft", "activation", activation="softmax"),
            Layer.of("flat", "flatten"),
            Layer.of("out", "dense", units=3),
        ),
        Workload("none", "sgd", 0.1, 2),
    )
    weights = make_weights(spec, 0)
    x, y = make_batches(spec, 0, 2, 1)
    logits, _, _ = runner.evaluate(spec, weights, x[0], y[0])
    h = np.exp(x[0].astype(np.float64))
    soft = h / h.sum(axis=-1, keepdims=True)
    expected = soft.reshape(2, -1) @ weights["out/kernel"] + weights["out/bias"]
    assert relative_error(logits, expected) < 1e-5


def test_a_global_max_pool_passes_each_samples_gradient_once(
    runner: NativeRunner,
) -> None:
    """Finding ea62e9c9a5 of issue 74's campaign, shrunk: an embedding, a
    layer normalization, a global max pool, a sigmoid unit.  Native JAX's
    ``jnp.max`` under ``jit`` lost whole entries of the normalization's beta
    gradient (float64 too): every sample's maximum moves one for one with
    beta, so beta's gradient is the sum of the pooled gradients."""
    spec = spec_from_document(
        "max-after-norm",
        {
            "input_shape": [2],
            "layers": [
                {"kind": "embedding", "name": "emb", "input_dim": 2, "output_dim": 3},
                {"kind": "layer_norm", "name": "ln", "epsilon": 0.001},
                {"kind": "global_max_pool", "name": "pool"},
                {"kind": "dense", "name": "out", "units": 1, "activation": "sigmoid"},
            ],
            "workload": {"optimizer": "sgd", "loss": "binary_crossentropy"},
        },
    )
    weights = make_weights(spec, 0)
    x = np.array([[1, 1], [1, 0]], np.int32)  # the first sample's a tie
    y = np.zeros((2, 1), np.float32)
    _, _, grads = runner.evaluate(spec, weights, x, y)
    e = weights["emb/embeddings"].astype(np.float64)[x]
    norm = (e - e.mean(-1, keepdims=True)) / np.sqrt(e.var(-1, keepdims=True) + 1e-3)
    pooled = (norm * weights["ln/gamma"] + weights["ln/beta"]).max(axis=1)
    z = pooled @ weights["out/kernel"] + weights["out/bias"]
    d_pooled = ((1 / (1 + np.exp(-z)) - y) / len(x)) @ weights["out/kernel"].T
    assert relative_error(grads["ln/beta"], d_pooled.sum(axis=0)) < 1e-5


def test_a_global_max_pool_passes_each_samples_gradient_once_in_float64() -> None:
    """The same in float64, where the finding was seen (the float64 run of
    native JAX voted out): JAX turned to float64 in a process of its own."""
    pytest.importorskip("jax")
    check = (
        "from tests.native.test_native import "
        "test_a_global_max_pool_passes_each_samples_gradient_once as check; "
        "from workers.native_runner import NativeRunner; "
        "check(NativeRunner('jax'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", check],
        env={**os.environ, "HARNESS_NATIVE_DTYPE": "float64"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_tensorflow_rewrites_a_maximum_as_a_minimum() -> None:
    """The claim of docs/findings/tensorflow-onednn-max-fusion.md, run:
    in a graph, with oneDNN's operations on, ``maximum(2x, x)`` comes out
    as the minimum; with them off it does not.  A TensorFlow release that
    fixes it fails here: update the page."""
    pytest.importorskip("tensorflow")
    script = Path(__file__).parents[2] / "docs/findings/tensorflow_onednn_max_fusion.py"
    runs = {}
    for onednn in ("1", "0"):
        runs[onednn] = subprocess.run(
            [sys.executable, str(script)],
            env={**os.environ, "TF_ENABLE_ONEDNN_OPTS": onednn},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    wrong = "eager [-1.0, 2.0], graph [-2.0, 1.0]"
    assert wrong in runs["1"].stdout, runs["1"].stdout + runs["1"].stderr[-2000:]
    assert runs["1"].returncode == 1
    assert "eager [-1.0, 2.0], graph [-1.0, 2.0]" in runs["0"].stdout
    assert runs["0"].returncode == 0


def test_jax_loses_a_max_gradient_under_jit() -> None:
    """The claim of docs/findings/jax-jit-max-gradient.md, run: its
    reproducer's gradient under ``jit`` lacks whole entries that the same
    gradient op by op has.  A JAX release that fixes it fails here: update
    the page."""
    pytest.importorskip("jax")
    script = Path(__file__).parents[2] / "docs/findings/jax_jit_max_gradient.py"
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert "op by op: [1.750916, -2.284955, 1.125077]" in done.stdout, done.stdout
    assert "jit:      [0.875458, 0.0, 1.125077]" in done.stdout, done.stdout
    assert done.returncode == 1


@pytest.mark.parametrize(
    ("activation", "edge"), [("relu", 0.0), ("relu6", 0.0), ("relu6", 6.0)]
)
def test_relu_has_no_gradient_at_exactly_zero(
    runner: NativeRunner, activation: str, edge: float
) -> None:
    """A unit whose input is exactly 0 (zero kernel and bias, as a Keras
    model's dead units start), or exactly a capped ReLU's cap, passes no
    gradient, as Keras' relu has it (MXNet's clip passed it: issue 74)."""
    spec = ModelSpec(
        "dead",
        (3,),
        2,
        (
            Layer.of("h", "dense", units=4, activation=activation),
            Layer.of("out", "dense", units=2),
        ),
        Workload("none", "sgd", 0.1, 2),
    )
    weights = make_weights(spec, 0)
    weights["h/kernel"][:] = 0
    weights["h/bias"][:] = edge
    x, y = make_batches(spec, 0, 4, 1)
    _, _, grads = runner.evaluate(spec, weights, x[0], y[0])
    assert not np.asarray(grads["h/bias"]).any()


def test_leaky_relu_takes_its_slope_at_exactly_zero(runner: NativeRunner) -> None:
    """At exactly 0 (zero kernel and bias) a leaky ReLU passes ``slope``
    times the gradient, as TensorFlow, PyTorch, MXNet and Keras on those two
    backends do (Keras on JAX passes all of it:
    docs/findings/keras-jax-leaky-relu-at-zero.md).  The gradient arriving
    there is the linear layer's: its output is 0 either way."""

    def bias_gradient(leaky: bool) -> np.ndarray:
        kink = Layer.of("kink", "activation", activation="leaky_relu", slope=0.3)
        spec = ModelSpec(
            "kink",
            (3,),
            2,
            (
                Layer.of("h", "dense", units=4),
                *([kink] if leaky else []),
                Layer.of("out", "dense", units=2),
            ),
            Workload("none", "sgd", 0.1, 2),
        )
        weights = make_weights(spec, 0)
        weights["h/kernel"][:] = 0
        weights["h/bias"][:] = 0
        x, y = make_batches(spec, 0, 4, 1)
        return np.asarray(runner.evaluate(spec, weights, x[0], y[0])[2]["h/bias"])

    linear = bias_gradient(leaky=False)
    assert np.abs(linear).min() > 0
    np.testing.assert_allclose(bias_gradient(leaky=True), 0.3 * linear, rtol=1e-5)


@pytest.mark.parametrize("package", ["tensorflow", "torch"])
def test_a_float64_run_takes_a_leaky_relus_slope_in_float64(package: str) -> None:
    """Finding d8b231ec1c: TensorFlow's ``LeakyRelu`` op holds its ``alpha``
    as a float32 attribute, so native TensorFlow's float64 run multiplied
    by f32(0.2), 1.5e-8 off, and the vote put it out as "computed in float32
    somewhere".  A reference framework's float64 leaky ReLU is the float64
    formula to the bit (JAX's is ``jnp.where``, float64 only in a process
    of its own: the reference runs check it)."""
    framework = pytest.importorskip(package)
    ops = importlib.import_module(f"native.{package}.ops")
    x = np.array([-3.0, -1.0, 0.0, 2.0])
    tensor = (
        framework.constant(x, framework.float64)
        if package == "tensorflow"
        else framework.tensor(x, dtype=framework.float64)
    )
    got = np.asarray(ops.leaky_relu(tensor, 0.2))
    np.testing.assert_array_equal(got, np.where(x > 0, x, x * 0.2))


ODD_PADDING = ModelSpec(
    "odd-padding",
    (7, 8, 2),
    2,
    (
        Layer.of(
            "conv", "conv2d", filters=3, kernel_size=3, padding="same", strides=2
        ),  # 7: (1, 1); 8: (0, 1)
        Layer.of("pool", "max_pool", pool_size=2, padding="same"),  # 4x4: (0, 0)
        Layer.of("flat", "flatten"),
        Layer.of("out", "dense", units=2),
    ),
    Workload("none", "sgd", 0.1, 2),
)


def test_the_reference_implementations_split_a_same_padding_on_their_own(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 74: a wrong split in ``zoo`` (the odd one before, not after) was
    read by native PyTorch's and JAX's float64 runs alike, won the vote two
    to one, and the correct native TensorFlow was blamed.  With ``zoo``'s
    rule swapped, the three reference implementations compute what they
    computed; MXNet, a path and no reference, reads it."""
    weights = make_weights(ODD_PADDING, 3)
    x, y = make_batches(ODD_PADDING, 3, 2, 1)
    before = runner.evaluate(ODD_PADDING, weights, x[0], y[0])[0]
    rule = zoo_base.same_padding
    monkeypatch.setattr(
        zoo_base, "same_padding", lambda *args: tuple(reversed(rule(*args)))
    )
    # a new forward pass, traced anew: JAX's compiled one fixed its pads
    monkeypatch.setattr(native, "_PASSES", {})
    after = runner.evaluate(ODD_PADDING, weights, x[0], y[0])[0]
    reads_zoo = runner.framework.startswith("mxnet")
    assert np.array_equal(before, after) != reads_zoo


def test_a_perturbed_run_moves_values_and_gradients_by_its_scale(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a perturbation seed (``native.compose``, as a perturbed reference
    run sets it) the logits move by about the perturbation, never more than
    a few times it, and the gradients move too; unset, nothing moves.  A
    perturbation that did nothing would let a perturbed run allow nothing
    beyond the baselines, silently."""
    if runner.framework == "mxnet-hybrid":
        pytest.skip("a traced MXNet graph has no shapes to draw from; no reference")
    weights = make_weights(NORMED, 5)
    x, y = make_batches(NORMED, 5, 8, 1)
    logits, _, grads = runner.evaluate(NORMED, weights, x[0], y[0])
    scale = 1e-3
    monkeypatch.setattr(compose, "PERTURB_SEED", 1)
    monkeypatch.setattr(compose, "PERTURBATION", scale)
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    moved, _, moved_grads = runner.evaluate(NORMED, weights, x[0], y[0])
    assert 0.01 * scale < relative_error(moved, logits) < 10 * scale
    assert relative_error(moved_grads["fc/kernel"], grads["fc/kernel"]) > 0.01 * scale
    monkeypatch.setattr(compose, "PERTURB_SEED", 0)
    monkeypatch.setattr(native, "_PASSES", {})
    again = runner.evaluate(NORMED, weights, x[0], y[0])[0]
    np.testing.assert_array_equal(again, logits)


NORMED = ModelSpec(
    "normed",
    (6,),
    3,
    (
        Layer.of("fc", "dense", units=5),
        Layer.of("norm", "batch_norm", momentum=0.9),
        Layer.of("logits", "dense", units=3),
    ),
    Workload("mnist", "sgd", 0.1, 8),
)


# A layer normalization over one feature centres it to exactly 0 too.
ONE_FEATURE = ModelSpec(
    "one-feature",
    (6,),
    3,
    (
        Layer.of("fc", "dense", units=1),
        Layer.of("norm", "layer_norm", epsilon=1e-3),
        Layer.of("logits", "dense", units=3),
    ),
    Workload("mnist", "sgd", 0.1, 8),
)


@pytest.mark.parametrize("spec", [NORMED, ONE_FEATURE], ids=lambda s: s.name)
def test_a_perturbed_run_leaves_a_residue_where_a_normalization_centers_to_zero(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch, spec: ModelSpec
) -> None:
    """A batch normalization at a batch of one, or a layer normalization
    over one feature, centres to exactly 0, so its gamma's gradient is
    exactly 0 and one SGD step leaves gamma as it was; float32 leaves a
    residue there, and so must a perturbed run (its statistics moved,
    ``native.compose.moved_statistics``), or it allows nothing where Adam
    turns that residue into a full step (findings cc6fc63f29, 111472bdaf)."""
    if runner.framework.startswith("mxnet"):
        pytest.skip("MXNet is no float64 reference: never a perturbed run")
    weights = make_weights(spec, 5)
    x, y = make_batches(spec, 5, 1, 1)
    gamma = weights["norm/gamma"]
    plain = _trained(runner, spec, weights, (x[0], y[0]), 1)["norm/gamma"]
    np.testing.assert_array_equal(plain, gamma)
    scale = 1e-3  # float32 would round a residue at 2^-24 off gamma again
    monkeypatch.setattr(compose, "PERTURB_SEED", 1)
    monkeypatch.setattr(compose, "PERTURBATION", scale)
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    moved = _trained(runner, spec, weights, (x[0], y[0]), 1)["norm/gamma"]
    assert np.any(moved != gamma)
    assert relative_error(moved, gamma) < 10 * scale  # a residue, not a step


def test_evaluate_matches_numpy(runner: NativeRunner) -> None:
    spec = MODELS["ffn"]
    weights = make_weights(spec, 1)
    x, y = make_batches(spec, 1, 16, 1)
    logits, loss, grads = runner.evaluate(spec, weights, x[0], y[0])
    ref_logits, ref_loss, ref_grads = _ffn_numpy(
        {k: a.astype(np.float64) for k, a in weights.items()},
        x[0].astype(np.float64),
        y[0],
    )
    assert isinstance(loss, float)
    assert relative_error(logits, ref_logits) < 1e-5
    assert abs(loss - ref_loss) / ref_loss < 1e-5
    assert list(grads) == list(weights)
    for name, g in ref_grads.items():
        assert relative_error(grads[name], g) < 1e-4, name


def _trained(
    runner: NativeRunner,
    spec: ModelSpec,
    weights: dict[str, np.ndarray],
    batch: tuple[np.ndarray, np.ndarray],
    steps: int,
) -> dict[str, np.ndarray]:
    """The canonical parameters after ``steps`` steps on one batch."""
    session = runner.session(spec, weights)
    for _ in range(steps):
        session.step(*batch, with_loss=False)
    return session.params()


# Every optimizer and option of zoo/optimizers.py, by id.
OPTIMIZER_CASES: dict[str, tuple[dict[str, object], float]] = {
    "sgd": ({"optimizer": "sgd"}, 1.0),
    "sgd-momentum": ({"optimizer": "sgd", "momentum": 0.9}, 1.0),
    "sgd-nesterov-decay": (
        {"optimizer": "sgd", "momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
        1.0,
    ),
    "adam": ({"optimizer": "adam"}, 1.0),
    # tiny gradients make Adam's epsilon placement visible
    "adam-tiny-gradients": ({"optimizer": "adam"}, 1e-4),
    "adam-eps-inside-sqrt": ({"optimizer": "adam", "epsilon_inside_sqrt": True}, 1e-4),
    "adam-amsgrad": ({"optimizer": "adam", "amsgrad": True}, 1.0),
    "adamw": ({"optimizer": "adamw", "weight_decay": 0.004}, 1.0),
    "rmsprop": ({"optimizer": "rmsprop"}, 1.0),
    "rmsprop-centered-momentum": (
        {"optimizer": "rmsprop", "centered": True, "momentum": 0.5, "rho": 0.5},
        1.0,
    ),
    "adagrad": ({"optimizer": "adagrad", "initial_accumulator_value": 1.0}, 1.0),
    "nadam": ({"optimizer": "nadam"}, 1.0),
    # Keras' clipping (issue 75), each small enough to act on these gradients
    "sgd-clipnorm": ({"optimizer": "sgd", "clipnorm": 0.05}, 1.0),
    "adam-global-clipnorm": ({"optimizer": "adam", "global_clipnorm": 0.05}, 1.0),
    "rmsprop-clipvalue": ({"optimizer": "rmsprop", "clipvalue": 0.002}, 1.0),
    # Keras' learning-rate schedules, each moving the rate within three steps
    "sgd-exponential-decay": (
        {"optimizer": "sgd", "schedule": Schedule("exponential_decay", 1, 0.5)},
        1.0,
    ),
    "sgd-inverse-time-staircase": (
        {
            "optimizer": "sgd",
            "weight_decay": 0.1,
            "schedule": Schedule("inverse_time_decay", 2, 3.0, staircase=True),
        },
        1.0,
    ),
    "sgd-cosine": (
        {"optimizer": "sgd", "schedule": Schedule("cosine_decay", 2, alpha=0.1)},
        1.0,
    ),
    "sgd-cosine-warmup": (
        {
            "optimizer": "sgd",
            "schedule": Schedule("cosine_decay", 2, warmup_steps=2, warmup_target=0.05),
        },
        1.0,
    ),
    "adam-piecewise": (
        {
            "optimizer": "adam",
            "schedule": Schedule(
                "piecewise_constant_decay",
                boundaries=(0, 1),
                values=(0.01, 0.03, 0.001),
            ),
        },
        1.0,
    ),
}


@pytest.mark.parametrize("case", list(OPTIMIZER_CASES))
def test_train_steps_follow_keras_formulas(runner: NativeRunner, case: str) -> None:
    options, input_scale = OPTIMIZER_CASES[case]
    optimizer = str(options["optimizer"])
    rest = {k: v for k, v in options.items() if k != "optimizer"}
    wl = Workload("mnist", optimizer, 0.01, 8, **rest)  # type: ignore[arg-type]
    spec = _with_workload(MODELS["ffn"], wl)
    weights = make_weights(spec, 2)
    x, y = make_batches(spec, 2, 8, 1)
    x = x * np.float32(input_scale)
    got = _trained(runner, spec, weights, (x[0], y[0]), 3)
    expected = _train_numpy(weights, x[0].astype(np.float64), y[0], wl, 3)
    for name, final in expected.items():
        # Compare the change the steps made, not the weights, so that the check
        # is as strict for a small update as for a large one.  Adam's first
        # steps are about lr * sign(g): a gradient entry within float32 noise
        # of zero may flip, so a few entries of 1e5 can differ by 2 lr; a wrong
        # formula (bias correction, epsilon at scale 1e-4) errs by 10% or more.
        change, ref_change = got[name] - weights[name], final - weights[name]
        assert relative_error(change, ref_change) < 1e-2, name


def test_a_frozen_layer_is_held_and_the_rest_trained_as_keras(
    runner: NativeRunner,
) -> None:
    """Keras' trainable=False (issue 75): no step moves a frozen layer's
    parameters, and the others take Keras' steps with the gradient that
    flows through it; the control, the same layer not frozen, moves."""
    base = MODELS["ffn"]
    wl = Workload("mnist", "adam", 0.01, 8, weight_decay=0.1)
    layers = tuple(
        dataclasses.replace(layer, trainable=layer.name != "fc1")
        for layer in base.layers
    )
    weights = make_weights(base, 3)
    x, y = make_batches(base, 3, 8, 1)
    for spec, frozen in (
        (
            dataclasses.replace(base, layers=layers, workload=wl),
            ("fc1/kernel", "fc1/bias"),
        ),
        (_with_workload(base, wl), ()),
    ):
        got = _trained(runner, spec, weights, (x[0], y[0]), 3)
        expected = _train_numpy(weights, x[0].astype(np.float64), y[0], wl, 3, frozen)
        for name, final in expected.items():
            change, ref_change = got[name] - weights[name], final - weights[name]
            if name in frozen:
                assert not change.any(), name
            else:
                assert np.abs(change).max() > 0, name
                assert relative_error(change, ref_change) < 1e-2, name


def test_epsilon_inside_sqrt_differs_from_keras_adam(runner: NativeRunner) -> None:
    """What the ``adam-eps-inside-sqrt`` fault changes is visible after one
    step at ordinary inputs, so the equivalence checks can catch it."""
    base = MODELS["ffn"]
    weights = make_weights(base, 8)
    x, y = make_batches(base, 8, 8, 1)
    changes = {}
    for inside in (False, True):
        workload = Workload("mnist", "adam", 0.01, 8, epsilon_inside_sqrt=inside)
        spec = _with_workload(base, workload)
        trained = _trained(runner, spec, weights, (x[0], y[0]), 1)
        changes[inside] = np.concatenate(
            [(trained[k] - weights[k]).ravel() for k in weights]
        )
    assert relative_error(changes[True], changes[False]) > 1e-3


@pytest.mark.parametrize("framework", IDIOMATIC)
@pytest.mark.sized
@pytest.mark.parametrize("model", FAMILIES)
def test_idiomatic_yardstick_trains(framework: str, model: str) -> None:
    pytest.importorskip(framework)
    spec = ALL_MODELS[model]
    x, y = make_batches(spec, 0, 2, 1, input_shape=(6, 50) if model == "lstm" else None)
    trainer = NativeRunner(framework).idiomatic_trainer
    if framework == "torch" and not _torch_idiomatic(spec):
        with pytest.raises(ValueError, match=r"no nn\.Sequential here computes"):
            trainer(spec, make_weights(spec, 0), x, y)
        return
    trainer(spec, make_weights(spec, 0), x, y)(1)


def _torch_idiomatic(spec: ModelSpec) -> bool:
    """Whether the idiomatic PyTorch yardstick has modules for ``spec``."""
    from native.torch.idiomatic import KINDS

    return all(layer.kind in KINDS and not layer.inputs for layer in spec.layers)


def _valid_last_pool(spec: ModelSpec) -> ModelSpec:
    """strided-cnn with its padded average pool made unpadded: the rest of
    its options (strided, unevenly padded convolutions, a padded max pool,
    tanh, sigmoid, softmax) have nn modules."""
    layers = tuple(
        layer.replace(padding="valid") if layer.name == "pool2" else layer
        for layer in spec.layers
    )
    return dataclasses.replace(spec, layers=layers)


IDIOMATIC_MODELS = {
    # (the transformer's residual graph has no nn.Sequential: refused above)
    **{n: ALL_MODELS[n] for n in FAMILIES if ALL_MODELS[n].module != "transformer"},
    "stacked-lstm": VARIANTS["stacked-lstm"],
    "strided-cnn, valid pool": _valid_last_pool(VARIANTS["strided-cnn"]),
}


def test_torch_idiomatic_refuses_what_no_module_computes() -> None:
    pytest.importorskip("torch")
    from native.torch import idiomatic

    spec = VARIANTS["strided-cnn"]  # pool2: 'same', the padding left out of the mean
    with pytest.raises(ValueError, match="average pool 'pool2' is padded"):
        idiomatic.build(spec, layout.to_native(spec, make_weights(spec, 0), "oihw"))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_each_outputs_loss_of_a_row_per_pixel_reads_keras_order(
    framework: str,
) -> None:
    """A second output of a row per pixel (a 1x1 convolution) trained on a
    loss of each row (a cosine): its own loss, judged as ``loss:<layer>``,
    is the mean over Keras' ``(N, H, W, C)`` rows.  PyTorch and MXNet read
    them channels-first once, 110% off (issue 79's fuzz, finding
    20b4e3d631); the control below is that reading, and differs."""
    pytest.importorskip(framework.split("-", maxsplit=1)[0])
    from tests.native.test_losses import numpy_loss

    document = {
        "input_shape": [3, 3, 2],
        "outputs": ["rows", "pixels"],
        "layers": [
            {"kind": "flatten", "name": "flat"},
            {"kind": "dense", "name": "rows", "units": 2},
            {
                "kind": "conv2d",
                "name": "pixels",
                "filters": 3,
                "kernel_size": 1,
                "inputs": ["input"],
            },
        ],
        "workload": {
            "optimizer": "sgd",
            "learning_rate": 0.1,
            "loss": ["mean_squared_error", "cosine_similarity"],
            "from_logits": [False, False],
            "batch_size": 4,
        },
    }
    spec = spec_from_document("two-heads", document)
    rng = np.random.default_rng(5)
    heads = {h.layer: h for h in spec.heads}
    pixels = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    outputs = {"rows": rng.standard_normal((4, 2)).astype(np.float32), "pixels": pixels}
    targets = [
        rng.standard_normal((4, *h.shape)).astype(np.float32) for h in spec.heads
    ]
    packed = packing.pack([outputs[h.layer] for h in spec.heads], 1)
    y = packing.pack(targets, 1)
    losses = NativeRunner(framework).output_losses(spec, packed, y)
    goal = heads["pixels"].objective
    rows = numpy_loss(pixels.reshape(-1, 3), targets[1].reshape(-1, 3), goal)
    assert relative_error(np.float64(losses["pixels"]), np.float64(rows)) < 1e-5
    across = numpy_loss(  # the channels-first misreading
        pixels.transpose(0, 3, 1, 2).reshape(-1, 3),
        targets[1].reshape(-1, 3),
        goal,
    )
    assert relative_error(np.float64(across), np.float64(rows)) > 1e-2


def test_torch_idiomatic_refuses_a_loss_it_has_no_stock_loss_for() -> None:
    """A KeyError once: the yardstick looked its loss up without asking."""
    pytest.importorskip("torch")
    from native.torch import idiomatic

    spec = VARIANTS["stacked-lstm"]
    spec = _with_workload(
        spec, dataclasses.replace(spec.workload, loss="hinge", from_logits=False)
    )
    with pytest.raises(ValueError, match="trains on hinge, which the idiomatic"):
        idiomatic.build(spec, layout.to_native(spec, make_weights(spec, 0), "oihw"))


def test_torch_stock_huber_is_the_native_huber() -> None:
    """The stock loss added for Huber is Keras' (delta 1), as native's."""
    pytest.importorskip("torch")
    import torch

    from native.torch import idiomatic

    fw = load_framework("torch")
    rng = np.random.default_rng(3)
    o, t = (torch.tensor(rng.standard_normal((5, 3)) * 2) for _ in range(2))
    native = fw.loss(o, t, Objective("huber", False))
    assert (
        relative_error(idiomatic.STOCK_LOSSES["huber"](o, t).numpy(), native.numpy())
        < 1e-12
    )
    wrong = fw.loss(o, t, Objective("mean_squared_error", False))
    assert relative_error(wrong.numpy(), native.numpy()) > 1e-3


@pytest.mark.sized
@pytest.mark.parametrize("model", list(IDIOMATIC_MODELS))
def test_torch_idiomatic_model_computes_the_native_logits(model: str) -> None:
    pytest.importorskip("torch")
    import torch

    from native.torch import idiomatic

    fw = load_framework("torch")
    spec = IDIOMATIC_MODELS[model]
    weights = make_weights(spec, 4)
    arrays = layout.to_native(spec, weights, fw.LAYOUT)
    short = (7, 50) if len(spec.input_shape) == 2 else None
    x, _ = make_batches(spec, 4, 3, 1, input_shape=short)
    inputs = fw.to_input(x[0])
    ours = fw.inference(load_apply("torch", spec), fw.init(arrays), inputs)
    with torch.no_grad():
        theirs = idiomatic.build(spec, arrays)(inputs)
    assert relative_error(theirs.numpy(), ours.numpy()) < 1e-5


def test_timed_closures_run(runner: NativeRunner) -> None:
    spec = MODELS["ffn"]
    weights = make_weights(spec, 3)
    xs, ys = make_batches(spec, 3, 4, 2)
    runner.trainer(spec, weights, xs, ys)(2)
    runner.direct_trainer(spec, weights, xs, ys)(3)  # cycles over the batches
    runner.predictor(spec, weights, xs)()
    with pytest.raises(ValueError, match="only 2 batches"):
        runner.trainer(spec, weights, xs, ys)(3)


def _short_input(spec: ModelSpec) -> tuple[int, ...] | None:
    """A short sequence for the LSTM (its eager loop runs step by step)."""
    return (6, 50) if spec.module == "lstm" else None


def _output_shapes(
    spec: ModelSpec, input_shape: tuple[int, ...]
) -> dict[str, tuple[int, ...]]:
    """Each tapped layer's output shape for one example, channels-last, as
    the spec works them out (``tests/test_specs.py`` checks that by hand)."""
    shapes = {
        layer.name: out
        for layer, (_, out) in zip(
            spec.layers, layer_shapes(spec, input_shape), strict=True
        )
    }
    return {name: shapes[name] for name in spec.tapped_layers()}


@pytest.mark.sized
@pytest.mark.parametrize("model", SIZED_MODELS)
def test_activations_tap_every_layer_in_order(runner: NativeRunner, model: str) -> None:
    spec = ALL_MODELS[model]
    input_shape = _short_input(spec)
    x, _ = make_batches(spec, 5, 2, 1, input_shape=input_shape)
    weights = make_weights(spec, 5)
    taps, error = runner.activations(spec, weights, x[0])
    assert error is None
    assert list(taps) == list(spec.tapped_layers())
    assert all(isinstance(a, np.ndarray) for a in taps.values())
    shapes = {name: a.shape[1:] for name, a in taps.items()}
    assert shapes == _output_shapes(spec, input_shape or spec.input_shape)
    logits = runner.session(spec, weights).logits(x[0])
    tapped = [taps[h.layer] for h in spec.heads]  # each output's layer
    expected = packing.outputs(
        spec, tuple(tapped) if len(tapped) > 1 else tapped[0], np.asarray
    )
    assert relative_error(expected, logits) < 1e-5


def test_tapped_convolution_is_canonical(runner: NativeRunner) -> None:
    spec = MODELS["lenet"]
    weights = make_weights(spec, 10)
    x, _ = make_batches(spec, 10, 2, 1)
    taps, _ = runner.activations(spec, weights, x[0])
    # conv1 ('valid', 5x5) in float64 NumPy, channels-last
    windows = np.lib.stride_tricks.sliding_window_view(
        x[0].astype(np.float64), (5, 5), axis=(1, 2)
    )  # (N, 24, 24, 1, 5, 5)
    conv = np.einsum("nhwcij,ijco->nhwo", windows, weights["conv1/kernel"])
    expected = np.maximum(conv + weights["conv1/bias"], 0)
    assert relative_error(taps["conv1"], expected) < 1e-5


@pytest.mark.sized
@pytest.mark.parametrize(
    ("kind", "reduce"), [("global_avg_pool", np.mean), ("global_max_pool", np.max)]
)
def test_a_global_pool_channels_first_reduces_each_steps_features(
    runner: NativeRunner, kind: str, reduce: Callable[..., np.ndarray]
) -> None:
    """``GlobalAveragePooling1D(data_format="channels_first")`` (keras.io's
    time-series Transformer) and its max: each framework's pool of a (4, 4)
    sequence is NumPy's over each step's features, which a pool over the
    steps (the layer's default, the same shape here) is not."""
    spec = ModelSpec(
        "pooled",
        (4, 4),
        3,
        (
            Layer.of("conv", "conv1d", filters=4, kernel_size=1),
            Layer.of("pool", kind, data_format="channels_first"),
            Layer.of("logits", "dense", units=3),
        ),
        Workload("mnist", "sgd", 0.1, 8),
    )
    x, _ = make_batches(spec, 5, 3, 1)
    taps, error = runner.activations(spec, make_weights(spec, 5), x[0])
    assert error is None
    conv = taps["conv"].astype(np.float64)
    assert relative_error(taps["pool"], reduce(conv, axis=2)) < 1e-6
    assert relative_error(taps["pool"], reduce(conv, axis=1)) > 1e-2


def test_activations_keep_the_layers_before_a_failure(runner: NativeRunner) -> None:
    spec = ALL_MODELS[tiers.size().vgg16]
    first = spec.layers[0]
    # The weights are the correct model's (native.faults keeps them): the
    # wrongly padded pass shrinks the image to nothing and fails at a later layer.
    faulty, weights = faults.inject(spec, make_weights(spec, 9), "valid-padding")
    assert faulty.layers[0].options.padding == "valid"
    x, _ = make_batches(spec, 9, 2, 1)
    taps, error = runner.activations(faulty, weights, x[0])
    assert error is not None  # each framework raises its own error type
    assert taps["block1_conv1"].shape == (2, 30, 30, first.options.filters)
    assert "logits" not in taps
    assert list(taps) == list(spec.tapped_layers()[: len(taps)])


@pytest.mark.sized
@pytest.mark.parametrize("model", SIZED_MODELS)
def test_export_inverts_init(runner: NativeRunner, model: str) -> None:
    spec = ALL_MODELS[model]
    weights = make_weights(spec, 6)
    exported = runner.export(spec, runner.init(spec, weights))
    assert list(exported) == list(weights)
    for name, w in weights.items():
        assert exported[name].dtype == np.float32, name
        np.testing.assert_array_equal(exported[name], w, err_msg=name)


@pytest.mark.sized
@pytest.mark.parametrize("model", FAMILIES)
def test_state_params_follow_training(runner: NativeRunner, model: str) -> None:
    spec = ALL_MODELS[model]
    fw = runner.fw
    weights = make_weights(spec, 7)
    x, y = make_batches(spec, 7, 2, 1, input_shape=_short_input(spec))
    inputs, labels = fw.to_input(x[0]), fw.to_labels(y[0])
    apply = load_apply(runner.framework, spec)
    state = fw.train_step(apply, runner.train_state(spec, weights), inputs, labels)
    fw.sync(state)
    params = fw.state_params(state)
    trained = runner.export(spec, params)
    for name, w in weights.items():
        assert not np.array_equal(trained[name], w), name
    logits, loss, grads = fw.loss_and_grads(apply, params, inputs, labels)
    assert tuple(logits.shape) == (2, spec.classes)
    assert math.isfinite(float(fw.to_numpy(loss).item()))
    assert set(grads) == set(weights)


# Batch normalization and dropout: what a training step computes ------------


def test_batch_norm_sets_its_moving_statistics_as_keras_does(
    runner: NativeRunner,
) -> None:
    """One training step: the moving statistics become ``0.9 * moving + 0.1 *
    batch`` (the batch's mean and biased variance of the dense layer's
    outputs, in float64 NumPy); the trained parameters move, by gradients
    through the batch statistics."""
    weights = make_weights(NORMED, 4)
    x, y = make_batches(NORMED, 4, 8, 1)
    trained = _trained(runner, NORMED, weights, (x[0], y[0]), 1)
    h = x[0].astype(np.float64) @ weights["fc/kernel"] + weights["fc/bias"]
    for stat, batch in (("moving_mean", h.mean(0)), ("moving_variance", h.var(0))):
        expected = 0.9 * weights[f"norm/{stat}"] + 0.1 * batch
        assert relative_error(trained[f"norm/{stat}"], expected) < 1e-5, stat
    assert not np.allclose(trained["norm/gamma"], weights["norm/gamma"])


def test_a_dropout_that_does_not_drop_is_caught(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evaluate`` checks every dropout at its rate: the correct one passes,
    one that keeps everything (scaled, but never dropping) is named."""
    spec = VARIANTS["bn-dropout-cnn"]
    weights = make_weights(spec, 5)
    x, y = make_batches(spec, 5, 64, 1)
    runner.evaluate(spec, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    monkeypatch.setattr(
        ops, "dropout", lambda h, spec, name, rng, index: h / (1 - RATE_OF_DROP)
    )
    with pytest.raises(
        ValueError, match=r"dropout layer 'drop' at rate 0\.25 kept 1\.000 of"
    ):
        runner.evaluate(spec, weights, x[0], y[0])


RATE_OF_DROP = 0.25  # bn-dropout-cnn's


def _drawn_as(spec: ModelSpec, name: str, **changes: object) -> Callable[..., object]:
    """A framework's block for layer ``name`` computed as if the layer had
    ``changes``: its own draw, of the wrong distribution."""

    def block(ops: object) -> Callable[..., object]:
        right = getattr(ops, spec.layer(name).kind)
        wrong = _layer_changed(spec, name, **changes)
        return lambda h, spec, name, rng, index: right(h, wrong, name, rng, index)

    return block


def _layer_changed(spec: ModelSpec, name: str, **changes: object) -> ModelSpec:
    layers = tuple(
        layer.replace(**changes) if layer.name == name else layer
        for layer in spec.layers
    )
    return dataclasses.replace(spec, layers=layers)


@pytest.mark.parametrize(
    "case",
    [
        # SpatialDropout2D drawn per value, not per image channel
        ("kind-dropout", "drop", {"shared_axes": ()}, r"shares a draw along axes"),
        # the deviation taken as the variance
        ("kind-gaussian-noise", "noise", {"stddev": 0.01}, r"deviation 0\.1 "),
        # the rate taken as the deviation (0.3, not sqrt(0.3 / 0.7))
        ("kind-gaussian-noise", "multiplied", {"rate": 0.0826}, r"mean 1 and dev"),
    ],
)
def test_a_noise_drawn_wrong_is_caught(
    runner: NativeRunner,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[str, str, dict[str, object], str],
) -> None:
    """``evaluate`` checks every layer that draws noise at its amount in
    Keras' layout (an image's channels, which PyTorch and MXNet hold first):
    each framework's own block passes, and the same block drawing another
    distribution (changed options) is named with its layer."""
    variant, name, changes, caught = case
    spec = VARIANTS[variant]
    weights = make_weights(spec, 5)
    x, y = make_batches(spec, 5, 16, 1)
    runner.evaluate(spec, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    kind = spec.layer(name).kind
    monkeypatch.setattr(ops, kind, _drawn_as(spec, name, **changes)(ops))
    with pytest.raises(ValueError, match=rf"layer '{name}'.*{caught}"):
        runner.evaluate(spec, weights, x[0], y[0])


# A recurrent layer's own dropout alone: one mask on the input for every
# gate (zoo.kinds.recurrent.cell_masks).
CELL_DROPOUT = ModelSpec(
    "cell-dropout",
    (6, 3),
    3,
    (
        Layer.of("lstm", "lstm", units=4, dropout=0.3),
        Layer.of("logits", "dense", units=3),
    ),
    Workload("mnist", "sgd", 0.1, 8),
)


@pytest.mark.parametrize(
    "wrong", ["rate read as the share kept", "no draw", "drawn but not applied"]
)
def test_a_recurrent_layers_input_dropout_drawn_or_applied_wrong_is_caught(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """``evaluate`` checks a recurrent layer's own dropout by the mask its
    cells drew (``workers.masks``): each framework's passes; drawn at the
    share kept, not drawn, or drawn and left out of the cell, the layer is
    named."""
    weights = make_weights(CELL_DROPOUT, 5)
    x, y = make_batches(CELL_DROPOUT, 5, 16, 1)
    runner.evaluate(CELL_DROPOUT, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    right = ops.dropout_mask
    if wrong == "rate read as the share kept":
        monkeypatch.setattr(
            ops,
            "dropout_mask",
            lambda h, size, rate, *rest: right(h, size, 1 - rate, *rest),
        )
        caught = r"input masks of lstm layer 'lstm'.*kept values off the input"
    elif wrong == "no draw":
        monkeypatch.setattr(
            ops, "dropout_mask", lambda h, size, rate, *rest: right(h, size, 0.0, *rest)
        )
        caught = r"input masks of lstm layer 'lstm'.*at rate 0.3 kept"
    else:
        monkeypatch.setattr(ops, "unmasked", lambda h: (unmasked(h)[0], None, None))
        caught = r"layer 'lstm' computed with the masks it drew is .* off"
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    with pytest.raises(ValueError, match=caught):
        runner.evaluate(CELL_DROPOUT, weights, x[0], y[0])


BOTH_DROPOUT = dataclasses.replace(
    CELL_DROPOUT,
    name="both-dropout",
    layers=(
        Layer.of(
            "both",
            "bidirectional",
            units=3,
            merge_mode="concat",
            cell="gru",
            dropout=0.4,
        ),
        Layer.of("logits", "dense", units=3),
    ),
)


def test_a_bidirectional_layers_directions_each_draw_their_own_mask(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras' Bidirectional(GRU(dropout=0.4)): each direction's cell draws
    its own mask; each framework's pass draws one per direction
    (``native.compose``, ``<name>/<direction>/input_masks``), and one mask
    given to both is caught (``workers.protocol.check_apart``)."""
    weights = make_weights(BOTH_DROPOUT, 5)
    x, y = make_batches(BOTH_DROPOUT, 5, 16, 1)
    runner.evaluate(BOTH_DROPOUT, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    right, drawn = ops.dropout_mask, []

    def once(h: object, *rest: object) -> object:
        if not drawn:
            drawn.append(right(h, *rest))
        return drawn[0]

    monkeypatch.setattr(ops, "dropout_mask", once)
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    with pytest.raises(ValueError, match=r"layer 'both'.*one mask, not one each"):
        runner.evaluate(BOTH_DROPOUT, weights, x[0], y[0])


# Keras' recurrent_dropout: masks per gate inside the cells (an LSTM's on
# its input and state, a Bidirectional GRU's on each direction's state).
CELL_MASKED = dataclasses.replace(
    CELL_DROPOUT,
    name="cell-masked",
    layers=(
        Layer.of(
            "lstm",
            "lstm",
            units=4,
            dropout=0.3,
            recurrent_dropout=0.25,
            return_sequences=True,
        ),
        Layer.of(
            "both",
            "bidirectional",
            units=3,
            merge_mode="sum",
            cell="gru",
            recurrent_dropout=0.4,
        ),
        Layer.of("logits", "dense", units=3),
    ),
)


def _first_for_all(runner: NativeRunner, ops: ModuleType) -> Callable[..., object]:
    """A ``dropout_mask`` whose every gate gets the first gate's mask."""
    right = ops.dropout_mask

    def drawn(h: object, size: tuple[int, int], *rest: object) -> object:
        masks = right(h, size, *rest)
        if runner.framework.startswith("mxnet"):
            space = ops.namespace(masks)
            return space.broadcast_add(masks * 0, space.slice_axis(masks, 0, 0, 1))
        return masks * 0 + masks[:1]

    return drawn


@pytest.mark.parametrize(
    "wrong",
    ["state masks left out", "one mask for every gate", "unscaled"],
)
def test_a_recurrent_layers_cell_masks_drawn_or_applied_wrong_are_caught(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """``evaluate`` checks the masks each recurrent layer's cells drew
    (``workers.masks``): each framework's cells pass; the state's masks
    drawn but not applied, one mask given to every gate, or masks not
    scaled are each named with the layer."""
    weights = make_weights(CELL_MASKED, 5)
    x, y = make_batches(CELL_MASKED, 5, 16, 1)
    runner.evaluate(CELL_MASKED, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    right = ops.dropout_mask
    if wrong == "state masks left out":
        monkeypatch.setattr(ops, "unmasked", lambda h: (*unmasked(h)[:2], None))
        caught = r"layer 'lstm' computed with the masks it drew is .* off"
    elif wrong == "one mask for every gate":
        monkeypatch.setattr(ops, "dropout_mask", _first_for_all(runner, ops))
        caught = r"input masks of lstm layer 'lstm'.*one mask, not one each"
    else:
        monkeypatch.setattr(
            ops,
            "dropout_mask",
            lambda h, size, rate, *rest: right(h, size, rate, *rest) * (1 - rate),
        )
        caught = r"input masks of lstm layer 'lstm'.*kept values off the input"
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    with pytest.raises(ValueError, match=caught):
        runner.evaluate(CELL_MASKED, weights, x[0], y[0])


# Keras' MultiHeadAttention(dropout=...): one mask per head of its weights.
ATTENTION_DROPOUT = dataclasses.replace(
    CELL_DROPOUT,
    name="attention-dropout",
    input_shape=(5, 4),
    layers=(
        Layer.of("att", "attention", num_heads=2, key_dim=3, dropout=0.3),
        Layer.of("pool", "global_avg_pool"),
        Layer.of("logits", "dense", units=3),
    ),
)


@pytest.mark.parametrize(
    "wrong", ["masks left out", "one mask for every head", "unscaled"]
)
def test_an_attentions_weight_masks_drawn_or_applied_wrong_are_caught(
    runner: NativeRunner, monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """``evaluate`` checks the masks an attention drew for its weights
    (``workers.masks``): each framework's attention passes; the masks drawn
    but not applied, one mask given to every head, or masks not scaled are
    each named with the layer."""
    weights = make_weights(ATTENTION_DROPOUT, 5)
    x, y = make_batches(ATTENTION_DROPOUT, 5, 16, 1)
    runner.evaluate(ATTENTION_DROPOUT, weights, x[0], y[0])
    ops = importlib.import_module(f"native.{_package(runner)}.ops")
    right = ops.dropout_mask
    if wrong == "masks left out":
        monkeypatch.setattr(ops, "score_masks", lambda h: (score_masks(h)[0], None))
        caught = r"layer 'att' computed with the masks it drew is .* off"
    elif wrong == "one mask for every head":
        monkeypatch.setattr(ops, "dropout_mask", _first_for_all(runner, ops))
        caught = r"scores masks of attention layer 'att'.*one mask, not one each"
    else:
        monkeypatch.setattr(
            ops,
            "dropout_mask",
            lambda h, size, rate, *rest: right(h, size, rate, *rest) * (1 - rate),
        )
        caught = r"scores masks of attention layer 'att'.*kept values off the input"
    monkeypatch.setattr(native, "_PASSES", {})  # a pass traced anew
    with pytest.raises(ValueError, match=caught):
        runner.evaluate(ATTENTION_DROPOUT, weights, x[0], y[0])


def test_a_step_loss_with_batch_statistics_carries_the_weight_penalty(
    runner: NativeRunner,
) -> None:
    """A model that trains differently (batch normalization) reports the
    loss its training step computes, and that loss carries the weight
    penalties as Keras' ``train_on_batch`` does: the regularized model's
    step loss exceeds the plain one's by ``l1 * sum(|kernel|)`` (finding
    6ece828580: the native paths, float64 references included, left it
    out, so every Keras path failed on ``step1/loss``)."""
    fc = dataclasses.replace(NORMED.layers[0], regularize=(("kernel", 0.01, 0.0),))
    regularized = dataclasses.replace(
        NORMED, name="normed-l1", layers=(fc, *NORMED.layers[1:])
    )
    assert regularized.penalties
    weights = make_weights(NORMED, 4)
    x, y = make_batches(NORMED, 4, 8, 1)
    plain = Session(runner.framework, NORMED, weights).step(x[0], y[0])
    penalized = Session(runner.framework, regularized, weights).step(x[0], y[0])
    expected = 0.01 * np.abs(weights["fc/kernel"].astype(np.float64)).sum()
    assert penalized - plain == pytest.approx(expected, rel=1e-5)
