"""Compiled MXNet (path ``native-mxnet-hybrid``): the same forward passes and
optimizers as ``common``, run inside a hybridized ``gluon.HybridBlock``.

Hybridizing turns the model's forward pass (which picks ``mx.sym`` when it
is handed symbols) into one cached symbolic graph (with ``static_alloc``), as
the papers' "compiled" MXNet mode does.  Parameters are the block's;
gradients and the hand-written Keras optimizers work on their ``data()`` and
``grad()`` arrays.  Everything else is ``common``'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
from mxnet import autograd, gluon, nd

import native
from native import at_shape
from native.compose import train_forward
from native.mxnet import common
from native.mxnet.common import (
    CTX,
    LAYOUT,
    TrainState,
    loss,
    penalty,
    state_params,
    sync,
    to_input,
    to_labels,
    to_numpy,
    update,
)
from native.protocol import Apply
from zoo.specs import Workload

__all__ = [
    "LAYOUT",
    "loss",
    "state_params",
    "sync",
    "to_input",
    "to_labels",
    "to_numpy",
]


def _attribute(name: str) -> str:
    return name.replace("/", "__")  # canonical names are not attribute names


class Model(gluon.HybridBlock):
    """A model's forward pass over its canonical parameters, hybridizable."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        super().__init__(prefix="")
        self.apply_fn: Apply | None = None
        # Whether the compiled graph is the pass a training step runs
        # (``native.compose.train_forward``), and the state parameters it
        # sets, in the order the graph returns their new values.
        self.training = False
        self.state_names: list[str] = []
        self.names = {_attribute(name): name for name in arrays}
        for attr, name in self.names.items():
            param = self.params.get(attr, shape=arrays[name].shape)
            param.initialize(ctx=CTX)
            param.set_data(nd.array(arrays[name], ctx=CTX, dtype="float32"))
            setattr(self, attr, param)

    def bind(self, apply: Apply, x: Any, training: bool = False) -> Model:
        """Use ``apply`` as the forward pass for inputs shaped as ``x`` (a
        tuple for a model of several inputs, whose shapes are its own), as
        inference or a training step runs it, and compile it (once per pass,
        input shape and purpose: the graph fixes every operator attribute, a
        sequence's padding included)."""
        if not isinstance(x, tuple):
            shape = tuple(x.shape[1:])
            if len(shape) == 3:  # images (C, H, W) -> canonical (H, W, C)
                shape = (*shape[1:], shape[0])
            apply = at_shape(apply, shape)
        if self.apply_fn is not apply or self.training != training:
            self.apply_fn, self.training = apply, training
            for name in native.frozen_of(apply) if training else ():
                getattr(self, _attribute(name)).grad_req = "null"  # held
            # Not static_shape: with it, MXNet 1.9.1 computes the LSTM's
            # contrib.foreach loop wrongly (the equivalence checks caught it).
            self.hybridize(static_alloc=True)
        return self

    def hybrid_forward(self, F: Any, x: Any, *more: Any, **params: Any) -> Any:
        assert self.apply_fn is not None
        canonical = {self.names[attr]: p for attr, p in params.items()}
        given = (x, *more) if more else x  # several inputs: their tuple
        if not self.training:
            return self.apply_fn(canonical, given)  # F is x's namespace
        logits, updates = train_forward(self.apply_fn, canonical, given)
        # traced once: fixes the order; a frozen layer's held, not returned
        held = native.frozen_of(self.apply_fn)
        self.state_names = sorted(set(updates) - held)
        heads = list(logits) if isinstance(logits, tuple) else [logits]
        return [*heads, *(updates[name] for name in self.state_names)]

    def run(self, x: Any) -> Any:
        """The compiled pass on ``x`` (a tuple: a model's several inputs)."""
        return self(*x) if isinstance(x, tuple) else self(x)

    def arrays(self) -> dict[str, nd.NDArray]:
        return {self.names[a]: getattr(self, a).data() for a in self.names}

    def grads(self) -> dict[str, nd.NDArray]:
        return {
            self.names[a]: getattr(self, a).grad()
            for a in self.names
            if getattr(self, a).grad_req != "null"  # a frozen layer's: held
        }


def _objective(apply: Apply, net: Model, logits: Any, y: nd.NDArray) -> nd.NDArray:
    """``common.objective`` over the block's parameter arrays (read only
    for a model with weight penalties), recorded outside the cached graph."""
    value = loss(logits, y, native.objective_of(apply))
    penalties = native.penalties_of(apply)
    return value + penalty(net.arrays(), penalties) if penalties else value


def init(arrays: Mapping[str, np.ndarray]) -> Model:
    return Model(arrays)


def arrays(params: Model) -> dict[str, nd.NDArray]:
    return params.arrays()


def loss_and_grads(
    apply: Apply, params: Model, x: nd.NDArray, y: nd.NDArray
) -> tuple[nd.NDArray, nd.NDArray, dict[str, nd.NDArray]]:
    net = params.bind(apply, x)
    with autograd.record():
        logits = _outputs(net.run(x))
        value = _objective(apply, net, logits, y)
    value.backward()
    return logits, value, net.grads()


def inference(apply: Apply, params: Model, x: nd.NDArray) -> nd.NDArray:
    return _outputs(params.bind(apply, x).run(x))


def _outputs(given: Any) -> Any:
    """A compiled inference pass's outputs as ``native.compose.apply``
    gives them: one array, or the tuple of a model's several (Gluon hands
    back a list)."""
    return tuple(given) if isinstance(given, list) else given


def make_train_state(params: Model, workload: Workload) -> TrainState:
    # The optimizer's slots are common's, over the block's arrays; the state
    # holds the block, and common.update steps its arrays.
    plain = common.make_train_state(arrays(params), workload)
    return dataclasses.replace(plain, params=params)


def train_step(
    apply: Apply, state: TrainState, x: nd.NDArray, y: nd.NDArray
) -> TrainState:
    net = state.params.bind(apply, x, training=True)
    heads = len(apply.keywords["spec"].heads)  # type: ignore[attr-defined]
    with autograd.record():
        outputs = net.run(x)
        logits = tuple(outputs[:heads]) if heads > 1 else outputs[0]
        values = outputs[heads:]
        value = _objective(apply, net, logits, y)
    value.backward()
    updates = dict(zip(net.state_names, values, strict=True))
    held = native.frozen_of(apply)
    grads = {k: g for k, g in net.grads().items() if k not in updates and k not in held}
    update(state, arrays(state.params), grads, updates)
    return state


def describe() -> dict[str, Any]:
    return {**common.describe(), "hybridized": True}
