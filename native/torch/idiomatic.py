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
from zoo.specs import Layer, ModelSpec, input_of, padding_of


class _ChannelsLast(nn.Module):
    """``(N, C, H, W) -> (N, H, W, C)``: images flattened in Keras' order."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1)


class _Recurrent(nn.Module):
    """``nn.LSTM`` returning what Keras' LSTM returns: the last hidden state,
    or every step's with ``return_sequences``."""

    def __init__(self, features: int, units: int, sequences: bool) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, units, batch_first=True)
        self.sequences = sequences

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps, (h, _) = self.lstm(x)
        return steps if self.sequences else h[-1]


_ACTIVATIONS: dict[str | None, Callable[[], list[nn.Module]]] = {
    None: list,
    "relu": lambda: [nn.ReLU()],
    "tanh": lambda: [nn.Tanh()],
    "sigmoid": lambda: [nn.Sigmoid()],
    "softmax": lambda: [nn.Softmax(dim=-1)],
}


def _padding(layer: Layer, spec: ModelSpec, value: float) -> list[nn.Module]:
    """A padding module where Keras pads (its ``same`` may pad one more
    position after than before, which ``nn.Conv2d`` cannot say)."""
    h, w, _ = input_of(spec, layer.name)
    (top, bottom), (left, right) = padding_of(layer, h), padding_of(layer, w)
    if not any((top, bottom, left, right)):
        return []
    return [nn.ConstantPad2d((left, right, top, bottom), value)]


def _module(layer: Layer, spec: ModelSpec) -> list[nn.Module]:
    params = {p.role: p for p in spec.params if p.layer == layer.name}
    activation = _ACTIVATIONS[layer.activation]()
    if layer.kind == "dense":
        fan_in, out = params["kernel"].shape
        return [nn.Linear(fan_in, out), *activation]
    if layer.kind == "conv2d":
        k, _, fan_in, out = params["kernel"].shape
        conv = nn.Conv2d(fan_in, out, k, stride=layer.stride)
        return [*_padding(layer, spec, 0.0), conv, *activation]
    if layer.kind == "avg_pool":
        if _padding(layer, spec, 0.0):
            raise ValueError(
                f"average pool {layer.name!r} is padded: Keras leaves the padding "
                "out of each mean, which no nn module does; floors cannot build it"
            )
        return [nn.AvgPool2d(layer.size, layer.stride)]
    if layer.kind == "max_pool":
        pool = nn.MaxPool2d(layer.size, layer.stride)
        return [*_padding(layer, spec, float("-inf")), pool]
    if layer.kind == "flatten":
        # Keras' H, W, C order, as the native path flattens (native.layout)
        images = len(input_of(spec, layer.name)) == 3
        return [_ChannelsLast(), nn.Flatten()] if images else [nn.Flatten()]
    features, _ = params["kernel"].shape
    return [_Recurrent(features, layer.size, layer.return_sequences)]


# The layer kinds an ``nn.Sequential`` of stock modules here computes as the
# native path does; the transformer's kinds (a residual graph, attention in
# Keras' layout) have none yet.
KINDS = ("dense", "conv2d", "avg_pool", "max_pool", "flatten", "lstm")
# PyTorch's stock loss for each loss from logits (``zoo.losses``): the same
# batch mean in exact arithmetic (soft targets for one-hot rows).
STOCK_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "sparse_categorical_crossentropy": F.cross_entropy,
    "categorical_crossentropy": F.cross_entropy,
    "binary_crossentropy": F.binary_cross_entropy_with_logits,
    "mean_squared_error": F.mse_loss,
    "mean_absolute_error": F.l1_loss,
}


def build(spec: ModelSpec, arrays: Mapping[str, np.ndarray]) -> nn.Sequential:
    """The model as ``nn.Sequential``, loaded with ``arrays`` (this framework's
    layout, ``native.layout.to_native``); a ValueError in one sentence for a
    layer this module has no stock module for."""
    goal = spec.workload.objective
    if not goal.from_logits and goal.loss.endswith("crossentropy"):
        raise ValueError(
            f"{spec.name} trains on probabilities ({goal.loss}, from_logits "
            "false), which no stock PyTorch loss clips as Keras does"
        )
    missing = sorted({layer.kind for layer in spec.layers} - set(KINDS))
    if missing or any(layer.inputs for layer in spec.layers):
        raise ValueError(
            f"{spec.name} has layers no nn.Sequential here computes "
            f"({', '.join(missing) or 'a residual graph'}): the idiomatic "
            f"PyTorch yardstick takes {', '.join(KINDS)}"
        )
    modules: dict[str, nn.Module] = {}
    for layer in spec.layers:
        # The module with the weights is named after the layer, the padding
        # (or the channels moved last) before it and the activation after it
        # after their roles.
        for module in _module(layer, spec):
            roles = {nn.ConstantPad2d: "_pad", _ChannelsLast: "_channels_last"}
            role = roles.get(type(module), "")
            if not role and layer.name in modules:
                role = "_activation"
            modules[f"{layer.name}{role}"] = module
    model = nn.Sequential(OrderedDict(modules))
    native = {k: torch.tensor(a) for k, a in arrays.items()}
    with torch.no_grad():
        for name, module in model.named_children():
            if isinstance(module, nn.Linear | nn.Conv2d):
                module.weight.copy_(native[f"{name}/kernel"])
                module.bias.copy_(native[f"{name}/bias"])
            elif isinstance(module, _Recurrent):
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
    stock = STOCK_LOSSES[spec.workload.loss]
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
        loss = stock(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    return step
