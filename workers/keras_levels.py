"""The timed closures of the Keras *levels* (``workers.paths.LEVELS``): one
compiled Keras model, handed ever less of the work.

``python -m harness explain`` takes Keras' cost apart by timing, in one
process, the same model through:

- ``fit``: ``Model.fit`` / ``Model.predict`` on NumPy arrays (every
  ``keras-*`` path of the benchmark; ``workers.keras_runner``);
- ``resident``: the same calls on tensors already in the backend's own type
  (a ``jax.Array``, ``tf.Tensor``, ``torch.Tensor``), made once before any
  timing, so ``fit`` converts nothing per batch it would not convert anyway;
- ``step``: Keras' own ``Model.train_step`` / ``Model.predict_step`` called
  in a plain Python loop on per-batch resident tensors, compiled the way
  ``fit`` compiles it on that backend (``jax.jit`` of the stateless step
  with the state donated; ``tf.function`` with the model's resolved
  ``jit_compile``; eager on PyTorch, whose ``jit_compile="auto"`` resolves to
  no compilation), with no epoch iterator, callbacks or logs around it.

Before the first ``step``, the model is built the way ``fit`` and
``train_on_batch`` build it (``Model._symbolic_build``, the one private call
here: Keras pinned at 3.15) so that the compiled step creates no variables.

Each builder returns the same ``workers.protocol`` ``Trainer`` / ``Predictor``
as the ``fit`` level, so the gate checks these closures as it checks every
timed closure (``workers.messages.TimedOutputs``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from workers.protocol import Predictor, TrainCheck, Trainer


def trainer(
    keras: Any,
    level: str,
    model: Any,
    xs: np.ndarray,
    ys: np.ndarray,
    *,
    check: Callable[[int], TrainCheck],
) -> Trainer:
    """``run(n)``: ``n`` steps at ``level`` (``resident`` or ``step``) over
    the first ``n`` mini-batches of ``xs``/``ys`` (``(batches, batch, ...)``),
    finished on return; ``check(n)`` reads the loss and parameters after
    the model's variables hold the trained values."""
    if level == "resident":
        return _resident_trainer(keras, model, xs, ys, check)
    if level == "step":
        build = _STEP_TRAINERS[keras.backend.backend()]
        return build(keras, model, xs, ys, check)
    raise ValueError(f"unknown level {level!r}; known levels: fit, resident, step")


def predictor(keras: Any, level: str, model: Any, xs: np.ndarray) -> Predictor:
    """``run()``: one round over every mini-batch of ``xs`` at ``level``."""
    if level == "resident":
        return _resident_predictor(keras, model, xs)
    if level == "step":
        return _STEP_PREDICTORS[keras.backend.backend()](keras, model, xs)
    raise ValueError(f"unknown level {level!r}; known levels: fit, resident, step")


def _to_numpy(keras: Any) -> Callable[[Any], list[np.ndarray]]:
    def convert(outputs: Any) -> list[np.ndarray]:
        if isinstance(outputs, list | tuple):
            return [np.asarray(keras.ops.convert_to_numpy(o)) for o in outputs]
        return [np.asarray(keras.ops.convert_to_numpy(outputs))]

    return convert


# --- resident: fit / predict on the backend's own tensors ----------------------


def _resident_trainer(
    keras: Any,
    model: Any,
    xs: np.ndarray,
    ys: np.ndarray,
    check: Callable[[int], TrainCheck],
) -> Trainer:
    batch = xs.shape[1]
    x_all = keras.ops.convert_to_tensor(xs.reshape(-1, *xs.shape[2:]))
    y_all = keras.ops.convert_to_tensor(ys.reshape(-1, *ys.shape[2:]))
    probe = model.trainable_variables[-1]
    # Slices of the resident tensors, made once per step count (the first
    # call for a count is the warm-up, never a timed block).
    sliced: dict[int, tuple[Any, Any]] = {}

    def run(n: int) -> None:
        if n > xs.shape[0]:
            raise ValueError(f"asked for {n} steps but only {xs.shape[0]} batches")
        if n not in sliced:
            sliced[n] = (x_all[: n * batch], y_all[: n * batch])
        x, y = sliced[n]
        model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
        keras.ops.convert_to_numpy(probe.value)  # waits for the last update

    return Trainer(run, check)


def _resident_predictor(keras: Any, model: Any, xs: np.ndarray) -> Predictor:
    batch = xs.shape[1]
    x_all = keras.ops.convert_to_tensor(xs.reshape(-1, *xs.shape[2:]))

    def run() -> Any:
        return model.predict(x_all, batch_size=batch, verbose=0)

    return Predictor(run, _to_numpy(keras))


# --- step: Keras' own train_step / predict_step in a plain loop ----------------


def _built(keras: Any, model: Any, xs: np.ndarray, ys: np.ndarray) -> list[Any]:
    """The mini-batches as resident tensors, pairs ``(x, y)``, after the
    model, its loss and its optimizer are built as ``fit`` builds them."""
    convert = keras.ops.convert_to_tensor
    data = [(convert(x), convert(y)) for x, y in zip(xs, ys, strict=True)]
    model._symbolic_build(data_batch=data[0])
    return data


def _jax_step_trainer(
    keras: Any,
    model: Any,
    xs: np.ndarray,
    ys: np.ndarray,
    check: Callable[[int], TrainCheck],
) -> Trainer:
    import jax

    data = _built(keras, model, xs, ys)
    step = jax.jit(model.train_step, donate_argnums=0)
    variables = (
        model.trainable_variables,
        model.non_trainable_variables,
        model.optimizer.variables,
        model.metrics_variables,
    )
    state = [tuple(v.value for v in group) for group in variables]

    def run(n: int) -> None:
        nonlocal state
        current = tuple(state)
        for i in range(n):
            _, current = step(current, data[i])
        state = list(current)
        jax.block_until_ready(state[0])

    def synced(n: int) -> TrainCheck:
        # The donated state lives in ``state``; the variables get it back.
        for group, values in zip(variables, state, strict=True):
            for v, value in zip(group, values, strict=True):
                v.assign(value)
        return check(n)

    return Trainer(run, synced)


def _tensorflow_step_trainer(
    keras: Any,
    model: Any,
    xs: np.ndarray,
    ys: np.ndarray,
    check: Callable[[int], TrainCheck],
) -> Trainer:
    import tensorflow as tf

    data = _built(keras, model, xs, ys)
    step = tf.function(
        model.train_step, reduce_retracing=True, jit_compile=model.jit_compile
    )
    probe = model.trainable_variables[-1]

    def run(n: int) -> None:
        for i in range(n):
            step(data[i])
        keras.ops.convert_to_numpy(probe.value)

    return Trainer(run, check)


def _torch_step_trainer(
    keras: Any,
    model: Any,
    xs: np.ndarray,
    ys: np.ndarray,
    check: Callable[[int], TrainCheck],
) -> Trainer:
    data = _built(keras, model, xs, ys)
    probe = model.trainable_variables[-1]
    model.train()  # torch's module mode, as fit sets it

    def run(n: int) -> None:
        for i in range(n):
            model.train_step(data[i])
        keras.ops.convert_to_numpy(probe.value)

    return Trainer(run, check)


def _jax_step_predictor(keras: Any, model: Any, xs: np.ndarray) -> Predictor:
    import jax

    batches = [keras.ops.convert_to_tensor(x) for x in xs]
    step = jax.jit(model.predict_step)
    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
    )

    def run() -> Any:
        outputs = [step(state, (x,))[0] for x in batches]
        return jax.block_until_ready(outputs)

    return Predictor(run, _to_numpy(keras))


def _tensorflow_step_predictor(keras: Any, model: Any, xs: np.ndarray) -> Predictor:
    import tensorflow as tf

    batches = [keras.ops.convert_to_tensor(x) for x in xs]
    step = tf.function(
        model.predict_step, reduce_retracing=True, jit_compile=model.jit_compile
    )

    def run() -> Any:
        outputs = [step((x,)) for x in batches]
        # Reading the last output back waits for every batch.
        keras.ops.convert_to_numpy(outputs[-1])
        return outputs

    return Predictor(run, _to_numpy(keras))


def _torch_step_predictor(keras: Any, model: Any, xs: np.ndarray) -> Predictor:
    import torch

    batches = [keras.ops.convert_to_tensor(x) for x in xs]
    model.eval()  # as predict sets it

    def run() -> Any:
        with torch.no_grad():
            outputs = [model.predict_step((x,)) for x in batches]
        keras.ops.convert_to_numpy(outputs[-1])
        return outputs

    return Predictor(run, _to_numpy(keras))


_STEP_TRAINERS: dict[str, Callable[..., Trainer]] = {
    "jax": _jax_step_trainer,
    "tensorflow": _tensorflow_step_trainer,
    "torch": _torch_step_trainer,
}
_STEP_PREDICTORS: dict[str, Callable[..., Predictor]] = {
    "jax": _jax_step_predictor,
    "tensorflow": _tensorflow_step_predictor,
    "torch": _torch_step_predictor,
}
