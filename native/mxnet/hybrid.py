"""Compiled MXNet (path ``native-mxnet-hybrid``): the same forward passes and
optimizers as ``common``, run inside a hybridized ``gluon.HybridBlock``.

Hybridizing turns the model's ``F``-generic forward pass into one cached
symbolic graph (with ``static_alloc``), as the papers' "compiled"
MXNet mode does.  Parameters are the block's; gradients and the hand-written
Keras optimizers work on their ``data()`` and ``grad()`` arrays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from mxnet import autograd, gluon, nd

from native import layout
from native.mxnet import common
from native.mxnet.common import (
    CTX,
    LAYOUT,
    TrainState,
    cross_entropy,
    sync,
    to_input,
    to_labels,
    to_numpy,
    update,
)
from native.protocol import Apply
from zoo.specs import ModelSpec

__all__ = ["LAYOUT", "sync", "to_input", "to_labels", "to_numpy"]


def _attribute(name: str) -> str:
    return name.replace("/", "__")  # canonical names are not attribute names


class Model(gluon.HybridBlock):
    """A model's forward pass over its canonical parameters, hybridizable."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        super().__init__(prefix="")
        self.apply_fn: Apply | None = None
        self.names = {_attribute(name): name for name in arrays}
        for attr, name in self.names.items():
            param = self.params.get(attr, shape=arrays[name].shape)
            param.initialize(ctx=CTX)
            param.set_data(nd.array(arrays[name], ctx=CTX, dtype="float32"))
            setattr(self, attr, param)

    def bind(self, apply: Apply) -> Model:
        """Use ``apply`` as the forward pass and compile it (once)."""
        if self.apply_fn is not apply:
            self.apply_fn = apply
            # Not static_shape: with it, MXNet 1.9.1 computes the LSTM's
            # contrib.foreach loop wrongly (the equivalence checks caught it).
            self.hybridize(static_alloc=True)
        return self

    def hybrid_forward(self, F: Any, x: Any, **params: Any) -> Any:
        assert self.apply_fn is not None
        canonical = {self.names[attr]: p for attr, p in params.items()}
        return self.apply_fn(canonical, x, F=F)

    def arrays(self) -> dict[str, nd.NDArray]:
        return {self.names[a]: getattr(self, a).data() for a in self.names}

    def grads(self) -> dict[str, nd.NDArray]:
        return {self.names[a]: getattr(self, a).grad() for a in self.names}


def init(spec: ModelSpec, canonical: Mapping[str, np.ndarray]) -> Model:
    return Model(layout.to_native(spec, canonical, LAYOUT))


def evaluate(
    spec: ModelSpec, apply: Apply, params: Model, x: nd.NDArray, y: nd.NDArray
) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
    net = params.bind(apply)
    with autograd.record():
        logits = net(x)
        loss = cross_entropy(nd, logits, y)
    loss.backward()
    native = {name: g.asnumpy() for name, g in net.grads().items()}
    return (
        logits.asnumpy(),
        float(loss.asscalar()),
        layout.to_canonical(spec, native, LAYOUT),
    )


def inference(apply: Apply, params: Model, x: nd.NDArray) -> nd.NDArray:
    return params.bind(apply)(x)


def export(spec: ModelSpec, params: Model) -> dict[str, np.ndarray]:
    return common.export(spec, params.arrays())


def activations(
    apply: Apply, params: Model, x: nd.NDArray, taps: dict[str, np.ndarray]
) -> None:
    # The plain imperative pass over the block's arrays: a hybridized graph
    # cannot hand out its intermediate outputs.
    common.activations(apply, params.arrays(), x, taps)


@dataclass
class HybridTrainState(TrainState):
    net: Model | None = None  # the block whose parameter arrays ``params`` are


def make_train_state(spec: ModelSpec, params: Model) -> HybridTrainState:
    plain = common.make_train_state(spec, params.arrays())
    return HybridTrainState(
        plain.params, plain.workload, plain.step, plain.m, plain.v, net=params
    )


def state_params(state: HybridTrainState) -> Model:
    assert state.net is not None
    return state.net


def train_step(
    apply: Apply, state: HybridTrainState, x: nd.NDArray, y: nd.NDArray
) -> HybridTrainState:
    assert state.net is not None
    net = state.net.bind(apply)
    with autograd.record():
        loss = cross_entropy(nd, net(x), y)
    loss.backward()
    update(state, net.grads())
    return state


def describe() -> dict[str, Any]:
    return {**common.describe(), "hybridized": True}
