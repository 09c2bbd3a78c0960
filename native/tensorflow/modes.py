"""TensorFlow's execution modes: ``tf.function`` graphs, eager, or XLA.

- ``graph`` (the default, ``native.tensorflow.common``): the gradient
  computation, the train step (the optimizer's variable updates included) and
  inference are each one ``tf.function`` graph, run by TensorFlow's executor
  kernel by kernel, without XLA.
- ``eager``: no ``tf.function`` anywhere; the same Python functions are
  called as they are, every operation dispatched as it is reached (the LSTM's
  ``tf.scan`` becomes a Python loop over the time steps).
- ``xla``: the same three functions as ``tf.function(jit_compile=True)``,
  each compiled by XLA into one fused program.

Graphs are cached per ``apply`` object, and the train step per workload too,
as in ``common`` (``native.load_apply`` hands out one ``apply`` per forward
pass); each is traced (and, for ``xla``, compiled) on its first call.
"""

from __future__ import annotations

from typing import cast

import tensorflow as tf

import native
from native.protocol import Apply, Framework
from native.tensorflow import common
from native.tensorflow.common import Params, TrainState

MODES = {
    "graph": "one tf.function graph per gradient, train step and inference",
    "eager": "no tf.function: every operation dispatched as it is reached",
    "xla": "one tf.function(jit_compile=True) per gradient, train step, inference",
}
DEFAULT = "graph"
assert tuple(MODES) == native.MODES["tensorflow"]


def framework(mode: str) -> Framework:
    """The TensorFlow surface in ``mode``: ``common`` itself for the default."""
    if mode not in MODES:
        raise ValueError(f"unknown TensorFlow mode {mode!r}; known: {', '.join(MODES)}")
    if mode == DEFAULT:
        return cast("Framework", common)

    def loss_and_grads(
        apply: Apply, params: Params, x: tf.Tensor, y: tf.Tensor
    ) -> tuple[tf.Tensor, tf.Tensor, dict[str, tf.Tensor]]:
        return common.grads_function(apply, mode)(params, x, y)  # type: ignore[no-any-return]

    def inference(apply: Apply, params: Params, x: tf.Tensor) -> tf.Tensor:
        return common.apply_function(apply, mode)(params, x)

    def train_step(
        apply: Apply, state: TrainState, x: tf.Tensor, y: tf.Tensor
    ) -> TrainState:
        return common.run_step(apply, state, x, y, mode)

    return native.in_mode(
        cast("Framework", common),
        mode,
        loss_and_grads=loss_and_grads,
        inference=inference,
        train_step=train_step,
    )
