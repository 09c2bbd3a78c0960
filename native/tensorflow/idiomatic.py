"""The idiomatic fast TensorFlow training step, for the floors benchmark
(``python -m harness floors``): the native step itself, compiled by XLA
(``tf.function(jit_compile=True)``) instead of run as a plain graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from native import load_apply
from native.tensorflow.common import (
    graph_step,
    init,
    make_train_state,
    to_input,
    to_labels,
)
from zoo.specs import ModelSpec


def make_trainer(
    spec: ModelSpec, canonical: Mapping[str, np.ndarray]
) -> tuple[Callable[[np.ndarray, np.ndarray], object], Callable[[object], object]]:
    """``(prepare, step)``: ``prepare(x, y)`` puts a batch on the device and
    ``step(batch)`` runs one XLA-compiled step, returning the state to wait on."""
    apply = load_apply("tensorflow", spec)
    state = make_train_state(spec, init(spec, canonical))
    compiled = graph_step(apply, spec.workload, jit_compile=True)

    def prepare(x: np.ndarray, y: np.ndarray) -> object:
        return to_input(x), to_labels(y)

    def step(batch: object) -> object:
        x, y = batch  # type: ignore[misc]
        compiled(state.params, state.m, state.v, state.step, x, y)
        return state

    return prepare, step
