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

from native.torch.common import DEVICE, penalty
from zoo.kinds.recurrent import TANH
from zoo.optimizers import plain
from zoo.specs import Layer, ModelSpec, input_of, padding_of


class _ChannelsLast(nn.Module):
    """``(N, C, H, W) -> (N, H, W, C)``: images flattened in Keras' order."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(0, 2, 3, 1)


class _Recurrent(nn.Module):
    """``nn.LSTM`` returning what Keras' LSTM returns: the last hidden state,
    or every step's with ``return_sequences``."""

    def __init__(self, features: int, units: int, sequences: bool, bias: bool) -> None:
        super().__init__()
        self.lstm = nn.LSTM(features, units, bias=bias, batch_first=True)
        self.sequences = sequences

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        steps, (h, _) = self.lstm(x)
        return steps if self.sequences else h[-1]


# Each activation's stock module(s), given the layer's slope (``Layer.
# activation_slope``: leaky_relu's and elu's number, 0 for the others).
_ACTIVATIONS: dict[str | None, Callable[[float], list[nn.Module]]] = {
    None: lambda slope: [],
    "relu": lambda slope: [nn.ReLU()],
    "tanh": lambda slope: [nn.Tanh()],
    "sigmoid": lambda slope: [nn.Sigmoid()],
    "softmax": lambda slope: [nn.Softmax(dim=-1)],
    "gelu": lambda slope: [nn.GELU()],  # exact, Keras' default
    "elu": lambda slope: [nn.ELU(alpha=slope)],
    "selu": lambda slope: [nn.SELU()],
    "silu": lambda slope: [nn.SiLU()],
    "softplus": lambda slope: [nn.Softplus()],
    "leaky_relu": lambda slope: [nn.LeakyReLU(negative_slope=slope)],
    "relu6": lambda slope: [nn.ReLU6()],
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
    activation = _ACTIVATIONS[layer.activation](layer.activation_slope)
    o = layer.options
    if layer.kind == "dense":
        fan_in, out = params["kernel"].shape
        return [nn.Linear(fan_in, out, bias=o.use_bias), *activation]
    if layer.kind == "conv2d":
        k, _, fan_in, out = params["kernel"].shape
        conv = nn.Conv2d(fan_in, out, k, stride=o.stride, bias=o.use_bias)
        return [*_padding(layer, spec, 0.0), conv, *activation]
    if layer.kind == "avg_pool":
        if _padding(layer, spec, 0.0):
            raise ValueError(
                f"average pool {layer.name!r} is padded: Keras leaves the padding "
                "out of each mean, which no nn module does; floors cannot build it"
            )
        return [nn.AvgPool2d(o.pool_size, o.stride)]
    if layer.kind == "max_pool":
        pool = nn.MaxPool2d(o.pool_size, o.stride)
        return [*_padding(layer, spec, float("-inf")), pool]
    if layer.kind == "flatten":
        # Keras' H, W, C order, as the native path flattens (native.layout)
        images = len(input_of(spec, layer.name)) == 3
        return [_ChannelsLast(), nn.Flatten()] if images else [nn.Flatten()]
    features, _ = params["kernel"].shape
    return [_Recurrent(features, o.units, o.return_sequences, o.use_bias)]


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
    "huber": F.huber_loss,  # delta 1
}


def _biased(name: str, module_has: bool, arrays: Mapping[str, torch.Tensor]) -> bool:
    """Whether layer ``name``'s module has a bias to load, checked against the
    arrays: a module built with ``bias=False`` exactly where the layer has
    ``use_bias=False`` (no ``<name>/bias``)."""
    if module_has != (f"{name}/bias" in arrays):
        raise ValueError(
            f"layer {name!r}: the stock module {'has' if module_has else 'lacks'} a "
            "bias where the weights do not agree"
        )
    return module_has


def _check(spec: ModelSpec) -> None:
    """A ValueError in one sentence unless stock modules and a stock loss
    compute ``spec`` as the native path does."""
    goal = spec.workload.objective
    if not goal.from_logits and goal.loss.endswith("crossentropy"):
        raise ValueError(
            f"{spec.name} trains on probabilities ({goal.loss}, from_logits "
            "false), which no stock PyTorch loss clips as Keras does"
        )
    if goal.loss not in STOCK_LOSSES:
        raise ValueError(
            f"{spec.name} trains on {goal.loss}, which the idiomatic PyTorch "
            f"yardstick has no stock loss for; it takes {', '.join(STOCK_LOSSES)}"
        )
    missing = sorted({layer.kind for layer in spec.layers} - set(KINDS))
    if missing or any(layer.inputs for layer in spec.layers):
        raise ValueError(
            f"{spec.name} has layers no nn.Sequential here computes "
            f"({', '.join(missing) or 'a residual graph'}): the idiomatic "
            f"PyTorch yardstick takes {', '.join(KINDS)}"
        )
    cells = [
        layer.name
        for layer in spec.layers
        if layer.kind == "lstm"
        and (
            layer.options.activation != TANH
            or layer.options.dropout
            or layer.options.recurrent_dropout
        )
    ]
    if cells:
        raise ValueError(
            f"{spec.name} has LSTMs nn.LSTM does not compute ({', '.join(cells)}: "
            "a cell activation other than tanh, or a dropout in the cell): the "
            "idiomatic PyTorch yardstick takes Keras' default LSTM"
        )
    unknown = sorted(
        {str(layer.activation) for layer in spec.layers}
        - {str(a) for a in _ACTIVATIONS}
    )
    if unknown:
        known = ", ".join(a for a in _ACTIVATIONS if a is not None)
        raise ValueError(
            f"{spec.name} has activations no nn.Sequential here computes "
            f"({', '.join(unknown)}): the idiomatic PyTorch yardstick takes {known}"
        )


def build(spec: ModelSpec, arrays: Mapping[str, np.ndarray]) -> nn.Sequential:
    """The model as ``nn.Sequential``, loaded with ``arrays`` (this framework's
    layout, ``native.layout.to_native``); a ValueError in one sentence for a
    layer this module has no stock module for."""
    _check(spec)
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
                if _biased(name, module.bias is not None, native):
                    module.bias.copy_(native[f"{name}/bias"])
            elif isinstance(module, _Recurrent):
                module.lstm.weight_ih_l0.copy_(native[f"{name}/kernel"])
                module.lstm.weight_hh_l0.copy_(native[f"{name}/recurrent_kernel"])
                if _biased(name, module.lstm.bias, native):
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
    if not plain(w):
        raise ValueError(
            f"the idiomatic yardstick writes out plain SGD and Adam only, not "
            f"{w.optimizer} with these options"
        )
    if spec.frozen_names():
        raise ValueError(
            f"{spec.name} has frozen layers, which the yardstick's stock "
            "torch.optim step would train"
        )
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

    penalties = spec.penalties
    weights = _canonical_weights(model) if penalties else {}

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = stock(model(x), y)
        if penalties:  # the weight penalties, as the native path adds them
            loss = loss + penalty(weights, penalties)
        loss.backward()
        optimizer.step()
        return loss

    return step


def _canonical_weights(model: nn.Sequential) -> dict[str, torch.Tensor]:
    """The modules' parameters by canonical name (``<layer>/kernel``, ...),
    for the weight penalties (whose sums do not depend on the layout)."""
    found: dict[str, torch.Tensor] = {}
    for name, module in model.named_children():
        if isinstance(module, nn.Linear | nn.Conv2d):
            found[f"{name}/kernel"] = module.weight
            if module.bias is not None:
                found[f"{name}/bias"] = module.bias
        elif isinstance(module, _Recurrent):
            found[f"{name}/kernel"] = module.lstm.weight_ih_l0
            found[f"{name}/recurrent_kernel"] = module.lstm.weight_hh_l0
            if module.lstm.bias:
                found[f"{name}/bias"] = module.lstm.bias_ih_l0
    return found
