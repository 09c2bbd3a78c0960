"""What is particular to native PyTorch; the shared checks are in tests/native."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from native import layout, load_apply, load_framework  # noqa: E402
from workers.launch import Worker  # noqa: E402
from workers.messages import Evaluate  # noqa: E402
from zoo.data import batches_file, make_batches  # noqa: E402
from zoo.specs import MODELS, Workload  # noqa: E402
from zoo.weights import make_weights, weights_file  # noqa: E402

common = load_framework("torch")


def test_keras_adam_differs_from_torch_optim_for_small_gradients() -> None:
    """Why Adam is written by hand: with gradients near epsilon, Keras' placement
    of epsilon takes other steps than ``torch.optim.Adam``."""
    wl = Workload("mnist", "adam", 0.01, 8)
    spec = dataclasses.replace(MODELS["ffn"], workload=wl)
    apply = load_apply("torch", spec)
    weights = make_weights(spec, 2)
    x, y = make_batches(spec, 2, 8, 1)
    inputs, labels = common.to_input(x[0] * np.float32(1e-4)), common.to_labels(y[0])

    arrays = layout.to_native(spec, weights, common.LAYOUT)
    state = common.make_train_state(common.init(arrays), spec.workload)
    for _ in range(3):
        state = common.train_step(apply, state, inputs, labels)
    ours = state.params["fc1/kernel"].detach()

    params = common.init(arrays)
    optimizer = torch.optim.Adam(params.values(), lr=0.01, eps=1e-7)
    for _ in range(3):
        optimizer.zero_grad()
        common.loss(apply(params, inputs), labels, spec.workload.objective).backward()
        optimizer.step()
    theirs = params["fc1/kernel"].detach()
    # far beyond float32 noise (about 1e-7 relative)
    assert not torch.allclose(ours, theirs, rtol=1e-4, atol=0)


def test_worker_reports_a_bad_request_and_keeps_serving(tmp_path: Path) -> None:
    spec = MODELS["ffn"]
    weights = weights_file(spec, 0, tmp_path)
    data = batches_file(spec, 0, 2, 1, tmp_path)
    with Worker("native-torch") as worker:
        assert worker.failure is None
        assert worker.platform["framework"] == "torch"
        bad = worker.call(
            Evaluate(model="resnet", weights="x", data="y", out="o"), timeout=60
        )
        assert bad.status == "error"
        assert bad.error is not None
        assert "unknown model 'resnet'" in bad.error
        good = worker.call(
            Evaluate(
                model="ffn",
                weights=str(weights),
                data=str(data),
                out=str(tmp_path / "o.npz"),
            ),
            timeout=60,
        )
        assert good.ok
