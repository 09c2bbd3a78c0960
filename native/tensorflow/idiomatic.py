"""The idiomatic fast TensorFlow training step, for the floors benchmark
(``python -m harness floors``): the native step itself, compiled by XLA
(``tf.function(jit_compile=True)``) instead of run as a plain graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from native import load_apply
from native.tensorflow.common import (
    init,
    make_train_state,
    state_variables,
    step_function,
)
from zoo.specs import ModelSpec


def make_step(
    spec: ModelSpec, arrays: Mapping[str, np.ndarray]
) -> Callable[[tf.Tensor, tf.Tensor], Any]:
    """``step(x, y)``: one XLA-compiled step from ``arrays`` (this framework's
    layout) onwards, returning the state to wait on."""
    apply = load_apply("tensorflow", spec)
    state = make_train_state(init(arrays), spec.workload)
    compiled = step_function(apply, spec.workload, "xla")
    variables = state_variables(state)

    def step(x: tf.Tensor, y: tf.Tensor) -> Any:
        compiled(*variables, x, y)
        return state

    return step
