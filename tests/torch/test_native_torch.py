"""Native PyTorch in process: module surface, optimizers, worker errors."""

from __future__ import annotations

import importlib
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from harness.launch import Worker  # noqa: E402
from native import load_apply, load_framework  # noqa: E402
from native.protocol import Framework  # noqa: E402
from zoo.specs import MODELS, VARIANTS, Workload  # noqa: E402
from zoo.weights import make_weights, weights_file  # noqa: E402

common = load_framework("torch")


@pytest.mark.parametrize("name", list(MODELS))
def test_model_modules_meet_the_surface(name: str) -> None:
    module = importlib.import_module(f"native.torch.{name}")
    assert module.SPEC is MODELS[name]
    assert list(inspect.signature(module.apply).parameters)[:2] == ["params", "x"]


def test_common_meets_the_framework_protocol() -> None:
    for member in Framework.__dict__:
        if not member.startswith("_"):
            assert hasattr(common, member), member


@pytest.mark.parametrize("name", [*MODELS, *VARIANTS])
def test_logits_have_the_spec_shape(name: str) -> None:
    spec = {**MODELS, **VARIANTS}[name]
    params = common.init(spec, make_weights(spec, 0))
    x = np.zeros((2, *spec.input_shape), np.float32)
    logits = common.inference(load_apply("torch", spec), params, common.to_input(x))
    assert tuple(logits.shape) == (2, spec.classes)


def _softmax_grad(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Gradient of cross-entropy(class 0) of logits ``w * x`` with respect to w."""
    z = w * x
    p = np.exp(z - z.max())
    p /= p.sum()
    return x * (p - np.eye(len(w))[0])


def _keras_adam_numpy(
    w: np.ndarray, x: np.ndarray, steps: int, wl: Workload
) -> np.ndarray:
    """Keras 3's Adam (keras/src/optimizers/adam.py) in float64."""
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, steps + 1):
        g = _softmax_grad(w, x)
        alpha = wl.learning_rate * math.sqrt(1 - wl.beta_2**t) / (1 - wl.beta_1**t)
        m += (g - m) * (1 - wl.beta_1)
        v += (g * g - v) * (1 - wl.beta_2)
        w = w - m * alpha / (np.sqrt(v) + wl.epsilon)
    return w


def _one_param_state(optimizer: str, w0: np.ndarray) -> object:
    params = {"w": torch.tensor(w0, requires_grad=True)}
    spec = MODELS["ffn" if optimizer == "sgd" else "lenet"]
    state = common.make_train_state(spec, params)
    state.workload = Workload("none", optimizer, 0.1, 1)
    return state


def _train(state: object, x: np.ndarray, steps: int) -> np.ndarray:
    def apply(params: dict[str, torch.Tensor], inputs: torch.Tensor) -> torch.Tensor:
        return (params["w"] * inputs).reshape(1, -1)  # logits w * x, one sample

    target = torch.zeros(1, dtype=torch.int64)
    for _ in range(steps):
        state = common.train_step(apply, state, torch.tensor(x), target)
    return state.params["w"].detach().numpy()  # type: ignore[attr-defined]


@pytest.mark.parametrize("scale", [1.0, 1e-5])
def test_adam_follows_keras_formula(scale: float) -> None:
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(5).astype(np.float32)
    x = (rng.standard_normal(5) * scale).astype(np.float32)
    ours = _train(_one_param_state("adam", w0.copy()), x, 3)
    expected = _keras_adam_numpy(
        w0.astype(np.float64), x.astype(np.float64), 3, Workload("none", "adam", 0.1, 1)
    )
    np.testing.assert_allclose(ours, expected, rtol=1e-5, atol=1e-6)


def test_keras_adam_differs_from_torch_optim_for_small_gradients() -> None:
    """The reason Adam is hand-written: with gradients near epsilon, Keras'
    placement of epsilon gives other steps than ``torch.optim.Adam``."""
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal(5).astype(np.float32)
    x = (rng.standard_normal(5) * 1e-5).astype(np.float32)
    ours = _train(_one_param_state("adam", w0.copy()), x, 3)
    w = torch.tensor(w0, requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1, eps=1e-7)
    for _ in range(3):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(
            (w * torch.tensor(x))[None], torch.zeros(1, dtype=torch.int64)
        )
        loss.backward()
        opt.step()
    assert np.abs(ours - w.detach().numpy()).max() > 1e-3


def test_sgd_is_plain_gradient_descent() -> None:
    w0 = np.array([0.5, -0.5, 0.25], np.float32)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    ours = _train(_one_param_state("sgd", w0.copy()), x, 1)
    expected = w0 - 0.1 * _softmax_grad(w0.astype(np.float64), x.astype(np.float64))
    np.testing.assert_allclose(ours, expected, rtol=1e-6)


def test_worker_reports_a_bad_request_and_keeps_serving(tmp_path: Path) -> None:
    spec = MODELS["ffn"]
    weights = weights_file(spec, 0, tmp_path)
    from zoo.data import batches_file

    data = batches_file(spec, 0, 2, 1, tmp_path)
    with Worker("native-torch") as worker:
        assert worker.failure is None
        assert worker.platform["framework"] == "torch"
        bad = worker.call(
            {"task": "evaluate", "model": "resnet", "weights": "x", "data": "y"},
            timeout=60,
        )
        assert bad["status"] == "error"
        assert "unknown model 'resnet'" in bad["error"]
        good = worker.call(
            {
                "task": "evaluate",
                "model": "ffn",
                "weights": str(weights),
                "data": str(data),
                "out": str(tmp_path / "o.npz"),
            },
            timeout=60,
        )
        assert good["status"] == "ok"
