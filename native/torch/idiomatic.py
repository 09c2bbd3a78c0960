"""The idiomatic PyTorch version of each model: ``nn.Module`` layers and
``torch.optim``, for the floors benchmark (``python -m harness floors``).

It is the yardstick for the native path, not a path itself: ``nn.LSTM`` runs
the recurrence in a fused kernel and ``torch.optim.Adam`` places epsilon
differently from Keras, so its training trajectory is not Keras'.  Its forward
pass from the same weights matches the native one (tests check that).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from native.torch.common import DEVICE
from zoo.specs import Layer, ModelSpec


class _LastHidden(nn.Module):
    """``nn.LSTM`` returning the last hidden state, as Keras' LSTM does."""

    def __init__(self, features: int, units: int) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, units, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h, _) = self.lstm(x)
        return h[-1]


def _module(layer: Layer, spec: ModelSpec) -> list[nn.Module]:
    params = {p.role: p for p in spec.params if p.layer == layer.name}
    relu = [nn.ReLU()] if layer.activation == "relu" else []
    if layer.kind == "dense":
        fan_in, out = params["kernel"].shape
        return [nn.Linear(fan_in, out), *relu]
    if layer.kind == "conv2d":
        k, _, fan_in, out = params["kernel"].shape
        return [nn.Conv2d(fan_in, out, k, padding=layer.padding), *relu]
    if layer.kind == "avg_pool":
        return [nn.AvgPool2d(layer.size)]
    if layer.kind == "max_pool":
        return [nn.MaxPool2d(layer.size)]
    if layer.kind == "flatten":
        return [nn.Flatten()]
    features, _ = params["kernel"].shape
    return [_LastHidden(features, layer.size)]


def build(spec: ModelSpec, arrays: Mapping[str, np.ndarray]) -> nn.Sequential:
    """The model as ``nn.Sequential``, loaded with ``arrays`` (this framework's
    layout, ``native.layout.to_native``)."""
    modules: dict[str, nn.Module] = {}
    for layer in spec.layers:
        for i, module in enumerate(_module(layer, spec)):
            modules[layer.name if i == 0 else f"{layer.name}_relu"] = module
    model = nn.Sequential(OrderedDict(modules))
    native = {k: torch.tensor(a) for k, a in arrays.items()}
    with torch.no_grad():
        for name, module in model.named_children():
            if isinstance(module, nn.Linear | nn.Conv2d):
                module.weight.copy_(native[f"{name}/kernel"])
                module.bias.copy_(native[f"{name}/bias"])
            elif isinstance(module, _LastHidden):
                module.lstm.weight_ih_l0.copy_(native[f"{name}/kernel"])
                module.lstm.weight_hh_l0.copy_(native[f"{name}/recurrent_kernel"])
                module.lstm.bias_ih_l0.copy_(native[f"{name}/bias"])
                module.lstm.bias_hh_l0.zero_()  # PyTorch's second bias: unused
    return model.to(DEVICE)


def make_step(
    spec: ModelSpec, arrays: Mapping[str, np.ndarray]
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``step(x, y)``: one ``torch.optim`` step of the model built from
    ``arrays`` (this framework's layout), returning the loss."""
    model = build(spec, arrays)
    w = spec.workload
    optimizer = (
        torch.optim.SGD(model.parameters(), lr=w.learning_rate)
        if w.optimizer == "sgd"
        else torch.optim.Adam(
            model.parameters(),
            lr=w.learning_rate,
            betas=(w.beta_1, w.beta_2),
            eps=w.epsilon,
        )
    )

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step
