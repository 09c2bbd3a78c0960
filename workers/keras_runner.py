"""The Keras paths (``keras-jax``, ``keras-tensorflow``, ``keras-torch``) as
a worker runs them: the ``workers.protocol.Runner`` of Keras.

``KerasRunner(backend)`` sets ``KERAS_BACKEND`` and only then imports Keras;
the models themselves are built by ``zoo.keras_models``.
Training is timed through ``Model.fit`` and inference through
``Model.predict``, the APIs users use; gradients for the equivalence checks
come from each backend's own autodiff around the same Keras model.  A level
path (``workers.paths.LEVEL_PATHS``) has the same checks and times the
closures of its level instead (``workers.keras_levels``).

A path's execution mode (``workers.paths.MODES``) is what ``Model.compile``
is told (``COMPILE``): the default modes leave Keras' own default,
``jit_compile="auto"``; ``@xla`` and ``@compile`` ask for
``jit_compile=True`` (XLA on TensorFlow, ``torch.compile`` on PyTorch);
``@spe`` on JAX runs several steps per jitted call.  ``fit``, ``predict``,
``train_on_batch`` and ``predict_on_batch`` all run in it, so the trajectory,
logits, localization and timed closures of a mode are checked in that mode;
the one-batch gradients of ``evaluate`` come from the backend's autodiff
around the model's call, in no compiled mode.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from native import load_framework
from workers import keras_levels
from workers.masks import check_masks
from workers.paths import STEPS_PER_EXECUTION, default_mode
from workers.protocol import (
    Predictor,
    TrainCheck,
    Trainer,
    check_noise,
    check_training,
    noise_batch,
)
from zoo import packing
from zoo.kinds.base import Mask
from zoo.losses import keras_loss, total
from zoo.optimizers import keras_optimizer
from zoo.specs import ModelSpec, masks_of

# ``Model.compile`` keyword arguments of each mode that is not a backend's
# default (``workers.paths.MODES``; the defaults leave Keras' own).
COMPILE: dict[str, dict[str, Any]] = {
    "spe": {"steps_per_execution": STEPS_PER_EXECUTION},
    "xla": {"jit_compile": True},
    "compile": {"jit_compile": True},
}


class KerasRunner:
    """``level``: which closures ``trainer`` and ``predictor`` build
    (``workers.paths.LEVELS``); several runners of one backend may share a
    process (``harness explain`` times every level in one).  ``mode``: the
    execution mode (``workers.paths.MODES``; empty: the backend's default)."""

    def __init__(self, backend: str, level: str = "fit", mode: str = "") -> None:
        if "keras" in sys.modules and os.environ.get("KERAS_BACKEND") != backend:
            raise RuntimeError("Keras was imported before its backend was chosen")
        os.environ["KERAS_BACKEND"] = backend
        self.keras = importlib.import_module("keras")
        self.models = importlib.import_module("zoo.keras_models")
        self.backend = self.framework = backend
        self.level = level
        self.mode = mode or default_mode("keras", backend)
        if self.mode != default_mode("keras", backend) and self.mode not in COMPILE:
            raise ValueError(f"unknown Keras mode {mode!r}")
        self.compile_args = COMPILE.get(self.mode, {})
        if self.keras.backend.backend() != backend:
            raise RuntimeError(f"Keras chose {self.keras.backend.backend()!r}")

    def _model(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> Any:
        shape = None if spec.more_inputs else tuple(x.shape[1:])
        model = self.models.build(spec, input_shape=shape)
        self.models.set_weights(model, spec, weights)
        return model

    def _loss_fn(self, spec: ModelSpec) -> Any:
        return loss_function(self.keras, spec)

    def _compile_loss(self, spec: ModelSpec) -> dict[str, Any]:
        """``compile``'s loss arguments as a user writes them: one loss
        object, or a list of them with ``loss_weights``."""
        if not spec.several_outputs:
            return {"loss": self._loss_fn(spec)}
        return {
            "loss": [keras_loss(self.keras, h.objective) for h in spec.heads],
            "loss_weights": [h.weight for h in spec.heads],
        }

    def evaluate(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        x: np.ndarray,
        y: np.ndarray,
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        model = self._model(spec, weights, x)
        loss_fn = self._loss_fn(spec)
        logits, loss, grads = _GRADS[self.backend](
            model, loss_fn, fed(spec, x), targeted(spec, y)
        )
        if spec.noisy:  # after: a training pass updates the moving statistics
            self._check_noise(model, spec, x, weights)
        by_variable = dict(
            zip((id(v) for v in model.trainable_variables), grads, strict=True)
        )
        canonical = {
            p.name: np.asarray(
                self.keras.ops.convert_to_numpy(
                    by_variable[id(self.models.variable(model, p))]
                )
            )
            for p in spec.params
            if p.trainable  # a batch normalization's statistics get none
        }
        return packing.outputs(spec, logits, np.asarray), float(loss), canonical

    def output_losses(
        self, spec: ModelSpec, logits: np.ndarray, y: np.ndarray
    ) -> dict[str, float]:
        """Each output's loss (``workers.protocol.Runner.output_losses``),
        by Keras' own loss object of that output."""
        if not spec.several_outputs:
            return {}
        outputs = packing.per_output(spec, logits)
        targets = packing.split_targets(spec, y)
        convert = self.keras.ops.convert_to_numpy
        return {
            h.layer: float(
                np.asarray(
                    convert(keras_loss(self.keras, h.objective)(t, outputs[h.layer]))
                )
            )
            for h, t in zip(spec.heads, targets, strict=True)
        }

    def _check_noise(
        self,
        model: Any,
        spec: ModelSpec,
        x: np.ndarray,
        weights: Mapping[str, np.ndarray],
    ) -> None:
        """A ValueError unless every layer that draws noise, in one training
        forward pass on ``x`` (repeated: ``noise_batch``), drew as its kind
        must (``check_noise``)."""
        layers = spec.noisy_layers()
        ends, drawn, hooked = [], {}, []
        for layer in layers:
            keras_layer = model.get_layer(layer.name)
            taken = keras_layer.input  # an attention's: the sequence twice
            ends += [taken[0] if isinstance(taken, list) else taken, keras_layer.output]
            for mask in masks_of(layer):  # drawn inside its block
                owner = _drawer(keras_layer, mask)
                drawn[mask] = _recording(owner, _MASK_METHODS[mask.side])
                hooked.append(owner)
        probe = self.keras.Model(model.inputs, ends)
        ops = self.keras.ops
        given = fed(spec, noise_batch(spec, x))
        tensors = (
            [ops.convert_to_tensor(a) for a in given]
            if isinstance(given, list)
            else ops.convert_to_tensor(given)
        )
        try:
            values = [ops.convert_to_numpy(v) for v in probe(tensors, training=True)]
        finally:
            for owner in hooked:  # their own methods again
                for method in _MASK_METHODS.values():
                    owner.__dict__.pop(method, None)
        found = {mask.tap: _stacked(ops, mask, got) for mask, got in drawn.items()}
        for i, layer in enumerate(layers):
            taken, gave = values[2 * i], values[2 * i + 1]
            if masks_of(layer):
                problem = check_masks(layer, taken, found, gave, weights)
            else:
                problem = check_noise(layer, taken, gave)
            if problem:
                raise ValueError(problem)

    def _compiled(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> Any:
        model = self._model(spec, weights, x)
        optimizer = keras_optimizer(self.keras, spec.workload)
        model.compile(
            optimizer=optimizer, **self._compile_loss(spec), **self.compile_args
        )
        self._check_mode(model, spec)
        return model

    def _in_mode(self, model: Any, spec: ModelSpec) -> Any:
        """``model`` (built, not compiled for training) set to run ``predict``
        and ``predict_on_batch`` in this path's mode; in a default mode it is
        left as it is, with Keras' own defaults."""
        if self.compile_args:
            model.compile(**self.compile_args)
            self._check_mode(model, spec)
        return model

    def _check_mode(self, model: Any, spec: ModelSpec) -> None:
        if self.compile_args.get("jit_compile") and not model.jit_compile:
            # Keras falls back to no compilation with a warning; a mode path
            # must not be timed as something it is not.
            raise ValueError(
                f"Keras refused jit_compile=True for {spec.name} on {self.backend} "
                f"(mode {self.mode!r}), so this mode cannot run it"
            )

    def trainer(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        xs: np.ndarray,
        ys: np.ndarray,
    ) -> Trainer:
        """``run(n)``: ``n`` optimizer steps through ``fit``, finished on return;
        ``run.finish()``: the loss of the last batch trained and the
        parameters, checked for NaN and inf."""
        model = self._compiled(spec, weights, xs[0])

        def check(steps: int) -> TrainCheck:
            i = max(steps, 1) - 1
            return check_training(
                self._loss(model, spec, xs[i], ys[i]), self._params(model, spec)
            )

        if self.level != "fit":
            _one_input_and_output(spec, self.level)
            return keras_levels.trainer(
                self.keras, self.level, model, xs, ys, check=check
            )
        batch = xs.shape[1]
        x_all = fed(spec, xs.reshape(-1, *xs.shape[2:]))
        y_all = targeted(spec, ys.reshape(-1, *ys.shape[2:]))
        probe = model.trainable_variables[-1]

        def run(n: int) -> None:
            if n > xs.shape[0]:
                raise ValueError(f"asked for {n} steps but only {xs.shape[0]} batches")
            model.fit(
                _first(x_all, n * batch),
                _first(y_all, n * batch),
                batch_size=batch,
                epochs=1,
                shuffle=False,
                verbose=0,
            )
            # Reading a weight back waits for every update of the last step.
            self.keras.ops.convert_to_numpy(probe.value)

        return Trainer(run, check)

    def _loss(self, model: Any, spec: ModelSpec, x: np.ndarray, y: np.ndarray) -> float:
        """The mean loss of one batch at the model's current weights (a plain
        forward pass: nothing compiled, no optimizer step)."""
        ops = self.keras.ops
        given, wanted = fed(spec, x), targeted(spec, y)
        convert = ops.convert_to_tensor
        logits = model(
            [convert(a) for a in given] if isinstance(given, list) else convert(given),
            training=False,
        )
        goal = (
            [convert(a) for a in wanted]
            if isinstance(wanted, list)
            else convert(wanted)
        )
        loss = _with_penalty(model, self._loss_fn(spec)(goal, logits))
        return float(np.asarray(ops.convert_to_numpy(loss)))

    def _params(self, model: Any, spec: ModelSpec) -> dict[str, np.ndarray]:
        """The model's current parameters by canonical name, as NumPy."""
        convert = self.keras.ops.convert_to_numpy
        return {
            p.name: np.asarray(convert(self.models.variable(model, p).value))
            for p in spec.params
        }

    def predictor(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
    ) -> Predictor:
        """``run()``: one ``predict`` over all resident batches (returns NumPy,
        so the work is finished when it returns); ``run.nonfinite()``: whether
        the last call's outputs hold NaN or inf."""
        model = self._in_mode(self._model(spec, weights, xs[0]), spec)
        if self.level != "fit":
            _one_input_and_output(spec, self.level)
            return keras_levels.predictor(self.keras, self.level, model, xs)
        batch = xs.shape[1]
        x_all = fed(spec, xs.reshape(-1, *xs.shape[2:]))

        def run() -> Any:
            return model.predict(x_all, batch_size=batch, verbose=0)

        def to_numpy(outputs: Any) -> list[np.ndarray]:
            if spec.several_outputs:  # one array per output: packed as one
                return [packing.outputs(spec, outputs, np.asarray)]
            if isinstance(outputs, list | tuple):
                return [np.asarray(o) for o in outputs]
            return [np.asarray(outputs)]

        return Predictor(run, to_numpy)

    def activations(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> tuple[dict[str, np.ndarray], str | None]:
        """Every tapped layer's output (``ModelSpec.tapped_layers``), from one
        model whose outputs are those layers' outputs."""
        model = self._model(spec, weights, x)
        names = spec.tapped_layers()
        probe = self.keras.Model(
            model.inputs, [model.get_layer(n).output for n in names]
        )
        self._in_mode(probe, spec)  # the layers as the mode runs them
        outputs = listed(probe.predict_on_batch(fed(spec, x)))
        return dict(zip(names, outputs, strict=True)), None

    def session(self, spec: ModelSpec, weights: Mapping[str, np.ndarray]) -> Session:
        return Session(self, spec, weights)

    def describe(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "keras_version": self.keras.__version__,
            "keras_backend": self.backend,
            "keras_level": self.level,
            "keras_mode": self.mode,
            "keras_jit_compile": self._resolved_jit_compile(),
        }
        # The backend's own settings, described once by its native package.
        info.update(load_framework(self.backend).describe())
        return info

    def _resolved_jit_compile(self) -> bool:
        """What this mode's ``jit_compile`` resolves to on this machine (Keras'
        ``"auto"`` depends on the backend and the devices), read from a
        one-layer model compiled as the path's models are."""
        keras = self.keras
        tiny = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        tiny.compile(optimizer="sgd", loss="mse", **self.compile_args)
        return bool(tiny.jit_compile)


class Session:
    """A training run step by step through ``train_on_batch``, for the
    trajectory and accuracy checks (``workers.protocol.Session``)."""

    def __init__(
        self, runner: KerasRunner, spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> None:
        self.runner, self.spec, self.weights = runner, spec, weights
        self._model: Any = None

    def _built(self, x: np.ndarray) -> Any:
        # Built on first use, for the input shape the run feeds (sequence
        # lengths other than the spec's, for instance).
        if self._model is None:
            self._model = self.runner._compiled(self.spec, self.weights, x)
        return self._model

    def step(self, x: np.ndarray, y: np.ndarray, with_loss: bool = True) -> float:
        """One optimizer step; returns the loss at the parameters before it."""
        model = self._built(x)
        model.reset_metrics()  # the loss tracker is a running mean across calls
        loss = model.train_on_batch(fed(self.spec, x), targeted(self.spec, y))
        return float(loss if np.ndim(loss) == 0 else loss[0])

    def params(self) -> dict[str, np.ndarray]:
        if self._model is None:
            return dict(self.weights)
        return self.runner._params(self._model, self.spec)

    def logits(self, x: np.ndarray) -> np.ndarray:
        outputs = self._built(x).predict_on_batch(fed(self.spec, x))
        return packing.outputs(self.spec, outputs, np.asarray)


def loss_function(keras: Any, spec: ModelSpec, each: Any = None) -> Any:
    """Keras' own loss object for the spec's ``Workload.objective``; for
    several outputs, ``(targets, outputs) ->`` the sum of each output's
    Keras loss object (or of ``each``'s: a file's own, in output order)
    times its weight, as ``compile`` adds them."""
    if not spec.several_outputs:
        return keras_loss(keras, spec.workload.objective)
    losses = each or [keras_loss(keras, h.objective) for h in spec.heads]
    goal = spec.objective
    return lambda ys, outs: total(
        lambda out, y, i: losses[i](y, out), outs, ys, _indexed(goal)
    )


def fed(spec: ModelSpec, x: np.ndarray) -> Any:
    """What a Keras model of ``spec`` is fed for the (packed) inputs ``x``:
    ``x``, or the list of the model's inputs (``zoo.packing``)."""
    return list(packing.split_inputs(spec, x)) if spec.more_inputs else x


def targeted(spec: ModelSpec, y: np.ndarray) -> Any:
    """The targets ``fit`` and the losses take: ``y``, or a list of each
    output's targets."""
    return list(packing.split_targets(spec, y)) if spec.several_outputs else y


def _first(given: Any, n: int) -> Any:
    """The first ``n`` examples of an array, or of each array of a list."""
    return [a[:n] for a in given] if isinstance(given, list) else given[:n]


def _indexed(goal: Any) -> Any:
    """``goal`` (``zoo.losses.Heads``) with each objective replaced by its
    output's index, for a loss function that looks its loss object up."""
    return type(goal)(tuple(range(len(goal.objectives))), goal.weights)


def _one_input_and_output(spec: ModelSpec, level: str) -> None:
    """A ValueError in one sentence for a model with several inputs or
    outputs at a Keras level other than ``fit``, whose closures take one
    array of each."""
    if not spec.one_to_one:
        raise ValueError(
            f"the Keras level {level!r} feeds one input and one target array, and "
            f"{spec.name} has several inputs or outputs; its fit level times it"
        )


def listed(outputs: Any) -> list[np.ndarray]:
    """A probe model's outputs as a list: one output comes alone, and
    zipping names with it would walk its batch (a one-layer model's tap was
    its first example; issue 74's campaign, findings 933e5f4ee2 and
    6e3308685d)."""
    if isinstance(outputs, list | tuple):
        return [np.asarray(o) for o in outputs]
    return [np.asarray(outputs)]


def _with_penalty(model: Any, loss: Any, losses: Any = None) -> Any:
    """``loss`` plus the model's weight regularizers' terms (its ``losses``,
    or those a stateless call returned), as Keras' ``compute_loss`` adds
    them: the loss a training step minimizes and ``fit`` reports."""
    terms = list(model.losses if losses is None else losses)
    return loss + sum(terms[1:], terms[0]) if terms else loss


def _each(logits: Any, to_numpy: Any) -> Any:
    """A model's output as NumPy: one array, or a list of one per output."""
    if isinstance(logits, list | tuple):
        return [to_numpy(t) for t in logits]
    return to_numpy(logits)


def _grads_jax(
    model: Any, loss_fn: Any, x: np.ndarray, y: np.ndarray, training: bool = False
) -> Any:
    import jax

    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]

    def loss_of(tv: Any, x: Any, y: Any) -> Any:
        logits, _, losses = model.stateless_call(
            tv, frozen, x, training=training, return_losses=True
        )
        return _with_penalty(model, loss_fn(y, logits), losses), logits

    # One jitted program, as Keras' own train step is: op by op, JAX compiles
    # every operator for every new batch shape, 4-10 times slower here (VGG16
    # at batch 2: 11.3 s against 2.0 s) for the same bits.
    grad = jax.jit(jax.value_and_grad(loss_of, has_aux=True))
    (loss, logits), grads = grad(trainable, x, y)
    return _each(logits, np.asarray), float(loss), grads


def _grads_tensorflow(
    model: Any, loss_fn: Any, x: np.ndarray, y: np.ndarray, training: bool = False
) -> Any:
    import tensorflow as tf

    with tf.GradientTape() as tape:
        logits = model(x, training=training)
        loss = _with_penalty(model, loss_fn(y, logits))
    grads = tape.gradient(loss, [v.value for v in model.trainable_variables])
    return _each(logits, lambda t: t.numpy()), float(loss), grads


def _grads_torch(
    model: Any, loss_fn: Any, x: np.ndarray, y: np.ndarray, training: bool = False
) -> Any:
    import torch

    logits = model(x, training=training)
    loss = _with_penalty(model, loss_fn(y, logits))
    grads = torch.autograd.grad(loss, [v.value for v in model.trainable_variables])
    return _each(logits, lambda t: t.detach().cpu().numpy()), float(loss.item()), grads


_GRADS = {"jax": _grads_jax, "tensorflow": _grads_tensorflow, "torch": _grads_torch}


# The method that draws each side's masks in Keras 3.15: a recurrent
# cell's (``DropoutRNNCell``), or the ``call`` of an attention's dropout of
# its weights (``MultiHeadAttention._dropout_layer``).
_MASK_METHODS = {
    "input": "get_dropout_mask",
    "state": "get_recurrent_dropout_mask",
    "scores": "call",
}


def _drawer(keras_layer: Any, mask: Mask) -> Any:
    """The Keras object whose ``_MASK_METHODS`` method draws ``mask``: an
    attention's dropout layer, a recurrent layer's cell, or the cell of a
    Bidirectional's ``forward_layer`` or ``backward_layer``
    (``Mask.copy``)."""
    if mask.side == "scores":
        return keras_layer._dropout_layer  # Keras names no public one
    if mask.copy:
        return getattr(keras_layer, f"{mask.copy}_layer").cell
    return keras_layer.cell


def _recording(owner: Any, method_name: str) -> list[tuple[Any, Any]]:
    """What ``owner``'s ``method_name`` takes and gives the first time it
    gives something from now on (a recurrent cell's mask, drawn on the first
    step and returned again at every other; an attention's dropped
    weights): the method wrapped on the instance (removing the attribute
    restores it)."""
    drawn: list[tuple[Any, Any]] = []
    method = getattr(owner, method_name)

    def record(given: Any, *args: Any, **kwargs: Any) -> Any:
        got = method(given, *args, **kwargs)
        if got is not None and not drawn:
            drawn.append((given, got))
        return got

    setattr(owner, method_name, record)
    return drawn


def _stacked(ops: Any, mask: Mask, drawn: list[tuple[Any, Any]]) -> np.ndarray:
    """The masks one recording holds as ``(count, N, width)``: a cell's
    list of one per gate, or its one mask; an attention's, its dropped
    weights over those it took ``(N, heads, T, T)``, head first."""
    if not drawn:
        return np.zeros((0, 0, 0), np.float32)  # none drawn: the check says so
    given, got = drawn[0]
    if mask.side == "scores":
        x = np.asarray(ops.convert_to_numpy(given), np.float64)
        y = np.asarray(ops.convert_to_numpy(got), np.float64)
        ratio = np.divide(y, x, out=np.zeros_like(y), where=x != 0)
        return ratio.swapaxes(0, 1).reshape(ratio.shape[1], ratio.shape[0], -1)
    if isinstance(got, list | tuple):
        return np.stack([ops.convert_to_numpy(m) for m in got])
    return np.asarray(ops.convert_to_numpy(got))[None]
