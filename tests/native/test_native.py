"""Every native framework package in process, against one NumPy reference.

Parametrized over the frameworks; a framework that is not installed is skipped
with its reason.  The reference is the feed-forward net's forward pass,
gradients and Keras' SGD and Adam written in float64 NumPy.  The surface for
the equivalence checks (``activations``, ``export``, ``state_params`` and the
faulty optimizer of ``native/<fw>/faults.py``) is checked here too.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
from types import ModuleType

import numpy as np
import pytest

from equivalence.compare import relative_error
from native import FRAMEWORKS, IDIOMATIC, layout, load_apply, load_framework
from native.protocol import Framework, ModelModule, no_tap
from zoo.data import make_batches
from zoo.specs import MODELS, VARIANTS, ModelSpec, Workload
from zoo.weights import make_weights


@pytest.fixture(params=FRAMEWORKS)
def fw(request: pytest.FixtureRequest) -> ModuleType:
    pytest.importorskip(request.param.split("-")[0])
    return load_framework(request.param)  # type: ignore[return-value]


def _name(fw: ModuleType) -> str:
    return str(fw.describe()["framework"])


@pytest.mark.parametrize("model", list(MODELS))
def test_model_modules_meet_the_surface(fw: ModuleType, model: str) -> None:
    module = importlib.import_module(f"native.{_name(fw)}.{model}")
    surface = [*ModelModule.__annotations__, "apply"]
    assert all(hasattr(module, name) for name in surface)
    assert module.SPEC is MODELS[model]
    parameters = inspect.signature(module.apply).parameters
    assert list(parameters)[:2] == ["params", "x"]
    assert parameters["tap"].default is no_tap


def test_common_meets_the_framework_protocol(fw: ModuleType) -> None:
    missing = [
        m
        for m in vars(Framework)
        if not m.startswith("_")
        and m not in ("LAYOUT",)
        and not callable(getattr(fw, m, None))
    ]
    assert missing == []
    assert fw.LAYOUT in ("keras", "oihw")


@pytest.mark.parametrize("model", [*MODELS, *VARIANTS])
def test_logits_have_the_spec_shape(fw: ModuleType, model: str) -> None:
    spec = {**MODELS, **VARIANTS}[model]
    params = fw.init(spec, make_weights(spec, 0))
    x = np.zeros((2, *spec.input_shape), np.float32)
    logits = fw.inference(load_apply(_name(fw), spec), params, fw.to_input(x))
    fw.sync(logits)
    assert tuple(logits.shape) == (2, spec.classes)


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


def _train_numpy(
    w: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray, wl: Workload, steps: int
) -> dict[str, np.ndarray]:
    """Keras 3's SGD and Adam (keras/src/optimizers/{sgd,adam}.py) in float64."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    m = {k: np.zeros_like(v) for k, v in w.items()}
    v = {k: np.zeros_like(a) for k, a in w.items()}
    for t in range(1, steps + 1):
        _, _, g = _ffn_numpy(w, x, y)
        if wl.optimizer == "sgd":
            w = {k: w[k] - wl.learning_rate * g[k] for k in w}
            continue
        alpha = wl.learning_rate * math.sqrt(1 - wl.beta_2**t) / (1 - wl.beta_1**t)
        for k in w:
            m[k] += (g[k] - m[k]) * (1 - wl.beta_1)
            v[k] += (g[k] ** 2 - v[k]) * (1 - wl.beta_2)
            w[k] = w[k] - m[k] * alpha / (np.sqrt(v[k]) + wl.epsilon)
    return w


def test_evaluate_matches_numpy(fw: ModuleType) -> None:
    spec = MODELS["ffn"]
    weights = make_weights(spec, 1)
    x, y = make_batches(spec, 1, 16, 1)
    logits, loss, grads = fw.evaluate(
        spec,
        load_apply(_name(fw), spec),
        fw.init(spec, weights),
        fw.to_input(x[0]),
        fw.to_labels(y[0]),
    )
    ref_logits, ref_loss, ref_grads = _ffn_numpy(
        {k: a.astype(np.float64) for k, a in weights.items()},
        x[0].astype(np.float64),
        y[0],
    )
    assert relative_error(logits, ref_logits) < 1e-5
    assert abs(loss - ref_loss) / ref_loss < 1e-5
    for name, g in ref_grads.items():
        assert relative_error(grads[name], g) < 1e-4, name


@pytest.mark.parametrize(
    ("optimizer", "input_scale"),
    [
        ("sgd", 1.0),
        ("adam", 1.0),
        # tiny gradients make Adam's epsilon placement visible
        ("adam", 1e-4),
    ],
)
def test_train_steps_follow_keras_formulas(
    fw: ModuleType, optimizer: str, input_scale: float
) -> None:
    wl = Workload("mnist", optimizer, 0.01, 8)
    spec: ModelSpec = dataclasses.replace(MODELS["ffn"], workload=wl)
    weights = make_weights(spec, 2)
    x, y = make_batches(spec, 2, 8, 1)
    x = x * np.float32(input_scale)
    state = fw.make_train_state(spec, fw.init(spec, weights))
    apply = load_apply(_name(fw), spec)
    for _ in range(3):
        state = fw.train_step(apply, state, fw.to_input(x[0]), fw.to_labels(y[0]))
    fw.sync(state)
    expected = _train_numpy(weights, x[0].astype(np.float64), y[0], wl, 3)
    got = layout.to_canonical(
        spec, {k: _to_numpy(p) for k, p in state.params.items()}, fw.LAYOUT
    )
    for name, final in expected.items():
        # Compare the change the steps made, not the weights, so that the check
        # is as strict for a small update as for a large one.  Adam's first
        # steps are about lr * sign(g): a gradient entry within float32 noise
        # of zero may flip, so a few entries of 1e5 can differ by 2 lr; a wrong
        # formula (bias correction, epsilon at scale 1e-4) errs by 10% or more.
        change, ref_change = got[name] - weights[name], final - weights[name]
        assert relative_error(change, ref_change) < 1e-2, name


def _to_numpy(value: object) -> np.ndarray:
    asnumpy = getattr(value, "asnumpy", None)
    if asnumpy is not None:  # mxnet
        return np.asarray(asnumpy())
    detach = getattr(value, "detach", None)
    if detach is not None:  # torch
        return np.asarray(detach().cpu().numpy())
    numpy = getattr(value, "numpy", None)
    if numpy is not None:  # tensorflow
        return np.asarray(numpy())
    return np.asarray(value)  # jax


@pytest.mark.parametrize("framework", IDIOMATIC)
@pytest.mark.parametrize("model", list(MODELS))
def test_idiomatic_yardstick_trains(framework: str, model: str) -> None:
    pytest.importorskip(framework)
    fw = load_framework(framework)
    idiomatic = importlib.import_module(f"native.{framework}.idiomatic")
    spec = MODELS[model]
    x, y = make_batches(spec, 0, 2, 1, input_shape=(6, 50) if model == "lstm" else None)
    prepare, step = idiomatic.make_trainer(spec, make_weights(spec, 0))
    fw.sync(step(prepare(x[0], y[0])))


@pytest.mark.parametrize("model", list(MODELS))
def test_torch_idiomatic_model_computes_the_native_logits(model: str) -> None:
    pytest.importorskip("torch")
    import torch

    from native.torch import idiomatic

    fw = load_framework("torch")
    spec = MODELS[model]
    weights = make_weights(spec, 4)
    x, _ = make_batches(spec, 4, 3, 1, input_shape=(7, 50) if model == "lstm" else None)
    inputs = fw.to_input(x[0])
    native = fw.inference(load_apply("torch", spec), fw.init(spec, weights), inputs)
    with torch.no_grad():
        theirs = idiomatic.build(spec, weights)(inputs)
    assert relative_error(theirs.numpy(), native.numpy()) < 1e-5


ALL_MODELS = {**MODELS, **VARIANTS}


def _short_input(spec: ModelSpec) -> tuple[int, ...] | None:
    """A short sequence for the LSTM (its eager loop runs step by step)."""
    return (6, 50) if spec.module == "lstm" else None


def _output_shapes(
    spec: ModelSpec, input_shape: tuple[int, ...]
) -> dict[str, tuple[int, ...]]:
    """Each tapped layer's output shape for one example, channels-last,
    worked out from the spec's layers."""
    shapes: dict[str, tuple[int, ...]] = {}
    shape = input_shape
    for layer in spec.layers:
        if layer.kind == "conv2d":
            h, w, _ = shape
            lost = 0 if layer.padding == "same" else layer.kernel - 1
            shape = (h - lost, w - lost, layer.size)
        elif layer.kind in ("avg_pool", "max_pool"):
            h, w, c = shape
            shape = (h // layer.size, w // layer.size, c)
        elif layer.kind == "flatten":
            shape = (math.prod(shape),)
        else:  # dense and lstm
            shape = (layer.size,)
        shapes[layer.name] = shape
    return {name: shapes[name] for name in spec.tapped_layers()}


@pytest.mark.parametrize("model", list(ALL_MODELS))
def test_activations_tap_every_layer_in_order(fw: ModuleType, model: str) -> None:
    spec = ALL_MODELS[model]
    input_shape = _short_input(spec)
    x, _ = make_batches(spec, 5, 2, 1, input_shape=input_shape)
    apply = load_apply(_name(fw), spec)
    params = fw.init(spec, make_weights(spec, 5))
    inputs = fw.to_input(x[0])
    taps: dict[str, np.ndarray] = {}
    fw.activations(apply, params, inputs, taps)
    assert list(taps) == list(spec.tapped_layers())
    assert all(isinstance(a, np.ndarray) for a in taps.values())
    shapes = {
        name: layout.activation_to_canonical(a, fw.LAYOUT).shape[1:]
        for name, a in taps.items()
    }
    assert shapes == _output_shapes(spec, input_shape or spec.input_shape)
    logits = fw.to_numpy(fw.inference(apply, params, inputs))
    assert relative_error(taps["logits"], logits) < 1e-5


def test_tapped_convolution_is_canonical_after_conversion(fw: ModuleType) -> None:
    spec = MODELS["lenet"]
    weights = make_weights(spec, 10)
    x, _ = make_batches(spec, 10, 2, 1)
    taps: dict[str, np.ndarray] = {}
    apply = load_apply(_name(fw), spec)
    fw.activations(apply, fw.init(spec, weights), fw.to_input(x[0]), taps)
    # conv1 ('valid', 5x5) in float64 NumPy, channels-last
    windows = np.lib.stride_tricks.sliding_window_view(
        x[0].astype(np.float64), (5, 5), axis=(1, 2)
    )  # (N, 24, 24, 1, 5, 5)
    conv = np.einsum("nhwcij,ijco->nhwo", windows, weights["conv1/kernel"])
    expected = np.maximum(conv + weights["conv1/bias"], 0)
    got = layout.activation_to_canonical(taps["conv1"], fw.LAYOUT)
    assert relative_error(got, expected) < 1e-5


def test_activations_keep_the_layers_before_a_failure(fw: ModuleType) -> None:
    spec = MODELS["vgg16"]
    first, *rest = spec.layers
    faulty = dataclasses.replace(
        spec, layers=(dataclasses.replace(first, padding="valid"), *rest)
    )
    # The weights are the correct model's (as native.faults does): the wrongly
    # padded pass shrinks the image to nothing and fails at a later layer.
    object.__setattr__(faulty, "params", spec.params)
    x, _ = make_batches(spec, 9, 2, 1)
    params = fw.init(spec, make_weights(spec, 9))
    taps: dict[str, np.ndarray] = {}
    # each framework raises its own error type
    with pytest.raises(Exception):  # noqa: B017, PT011
        fw.activations(load_apply(_name(fw), faulty), params, fw.to_input(x[0]), taps)
    conv = layout.activation_to_canonical(taps["block1_conv1"], fw.LAYOUT)
    assert conv.shape == (2, 30, 30, 64)
    assert "logits" not in taps
    assert list(taps) == list(spec.tapped_layers()[: len(taps)])


@pytest.mark.parametrize("model", list(ALL_MODELS))
def test_export_inverts_init(fw: ModuleType, model: str) -> None:
    spec = ALL_MODELS[model]
    weights = make_weights(spec, 6)
    exported = fw.export(spec, fw.init(spec, weights))
    assert list(exported) == list(weights)
    for name, w in weights.items():
        assert exported[name].dtype == np.float32, name
        np.testing.assert_array_equal(exported[name], w, err_msg=name)


@pytest.mark.parametrize("model", list(MODELS))
def test_state_params_follow_training(fw: ModuleType, model: str) -> None:
    spec = MODELS[model]
    weights = make_weights(spec, 7)
    x, y = make_batches(spec, 7, 2, 1, input_shape=_short_input(spec))
    inputs, labels = fw.to_input(x[0]), fw.to_labels(y[0])
    apply = load_apply(_name(fw), spec)
    state = fw.make_train_state(spec, fw.init(spec, weights))
    state = fw.train_step(apply, state, inputs, labels)
    fw.sync(state)
    params = fw.state_params(state)
    trained = fw.export(spec, params)
    for name, w in weights.items():
        assert not np.array_equal(trained[name], w), name
    logits, loss, grads = fw.evaluate(spec, apply, params, inputs, labels)
    assert logits.shape == (2, spec.classes)
    assert math.isfinite(loss)
    assert set(grads) == set(weights)


def test_faulty_optimizer_differs_from_adam(fw: ModuleType) -> None:
    importlib.import_module(f"native.{_name(fw)}.faults")
    base = MODELS["ffn"]
    weights = make_weights(base, 8)
    x, y = make_batches(base, 8, 8, 1)
    apply = load_apply(_name(fw), base)  # the workload does not change the pass
    changes: dict[str, np.ndarray] = {}
    for optimizer in ("adam", "adam-eps-inside-sqrt"):
        workload = dataclasses.replace(base.workload, optimizer=optimizer)
        spec = dataclasses.replace(base, workload=workload)
        state = fw.make_train_state(spec, fw.init(spec, weights))
        state = fw.train_step(apply, state, fw.to_input(x[0]), fw.to_labels(y[0]))
        trained = fw.export(spec, fw.state_params(state))
        changes[optimizer] = np.concatenate(
            [(trained[k] - weights[k]).ravel() for k in weights]
        )
    assert relative_error(changes["adam-eps-inside-sqrt"], changes["adam"]) > 1e-3
