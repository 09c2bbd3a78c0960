"""The native paths as a worker runs them: one class for every framework.

What differs per framework comes from ``native.<framework>.common`` (which
meets ``native.protocol.Framework``) and the model modules.  What is the same
for all of them is written once here: canonical weights are converted to the
framework's layout (``native.layout.to_native``) before ``init``, gradients
and parameters back (``native.layout.to_canonical``); the activation tap
records every layer's output in canonical layout; ``evaluate`` turns the
framework's logits, loss and gradients into NumPy.  Data is made resident on
the device before any timing starts, and every timed closure ends by waiting
for the device (``sync``).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from native import OPTIMIZERS, layout, load_apply, load_framework, penalties_of
from native.compose import train_forward
from native.protocol import Params, Tensor, TrainState
from workers.masks import check_masks
from workers.protocol import (
    Predictor,
    TrainCheck,
    Trainer,
    check_noise,
    check_training,
    noise_batch,
)
from zoo import packing
from zoo.specs import ModelSpec, masks_of

Batch = tuple[Tensor, Tensor]


class NativeRunner:
    """``mode``: an execution mode of the framework other than its default
    (``native.load_framework``), or None for the default.  The activation
    tap runs op by op in every mode, so localization compares layers as
    the framework computes them one at a time."""

    def __init__(self, framework: str, mode: str | None = None) -> None:
        self.framework, self.mode = framework, mode
        self.fw = load_framework(framework, mode)
        # The default mode, for what is computed after a timed training run
        # (its final loss): so that a mode's inference function is compiled
        # by the first inference it times, not by a training cell's check.
        self.plain = load_framework(framework)

    def init(self, spec: ModelSpec, weights: Mapping[str, np.ndarray]) -> Params:
        """Canonical weights -> this framework's parameters, on its device."""
        return self.fw.init(layout.to_native(spec, weights, self.fw.LAYOUT))

    def train_state(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> TrainState:
        """Parameters from ``weights`` plus the workload's optimizer state."""
        optimizer = spec.workload.optimizer
        if optimizer not in OPTIMIZERS:
            raise ValueError(
                f"model {spec.name!r} asks for optimizer {optimizer!r}; the native "
                f"paths write out {', '.join(OPTIMIZERS)}"
            )
        return self.fw.make_train_state(self.init(spec, weights), spec.workload)

    def export(self, spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
        """Parameters -> canonical-layout NumPy arrays (the inverse of ``init``)."""
        native = {k: self.fw.to_numpy(a) for k, a in self.fw.arrays(params).items()}
        return layout.to_canonical(spec, native, self.fw.LAYOUT)

    def batches(self, spec: ModelSpec, xs: np.ndarray, ys: np.ndarray) -> list[Batch]:
        """Stacked canonical mini-batches, resident on the device."""
        return [
            (self.feed(spec, x), self.labels(spec, y))
            for x, y in zip(xs, ys, strict=True)
        ]

    def feed(self, spec: ModelSpec, x: np.ndarray) -> Any:
        """One canonical batch of inputs, resident on the device: one tensor,
        or the tuple of the model's inputs (``zoo.packing``)."""
        return packing.inputs(spec, x, self.fw.to_input)

    def labels(self, spec: ModelSpec, y: np.ndarray) -> Any:
        """One canonical batch of targets, resident: one tensor, or each
        output's (``zoo.packing``)."""
        return packing.targets(spec, y, self.fw.to_labels)

    def read(self, spec: ModelSpec, outputs: Any) -> np.ndarray:
        """A pass's outputs as one NumPy array (several packed)."""
        return packing.outputs(spec, outputs, self.fw.to_numpy)

    def evaluate(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        x: np.ndarray,
        y: np.ndarray,
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        """Logits, mean cross-entropy and canonical-layout gradients of one batch."""
        fw = self.fw
        logits, loss, grads = fw.loss_and_grads(
            load_apply(self.framework, spec),
            self.init(spec, weights),
            self.feed(spec, x),
            self.labels(spec, y),
        )
        if spec.noisy:
            self._check_noise(spec, weights, x)
        # Gradients of the trained parameters only: in inference a batch
        # normalization's moving statistics have one, which Keras never takes.
        trained = spec.trainable_names()
        native = {name: fw.to_numpy(g) for name, g in grads.items() if name in trained}
        return (
            self.read(spec, logits),
            float(fw.to_numpy(loss).item()),
            layout.to_canonical(spec, native, fw.LAYOUT),
        )

    def output_losses(
        self, spec: ModelSpec, logits: np.ndarray, y: np.ndarray
    ) -> dict[str, float]:
        """Each output's loss (``workers.protocol.Runner.output_losses``),
        by this framework's ``loss``."""
        if not spec.several_outputs:
            return {}
        fw, outputs = self.fw, packing.per_output(spec, logits)
        targets = packing.split_targets(spec, y)
        # The packed outputs are in Keras' order, as the loss takes them
        # (``ops.outputs``): ``to_labels`` keeps that layout, where
        # ``to_input`` would make an image's rows channels-first and a
        # loss of each pixel's row (a cross-entropy, a cosine) read them
        # across the wrong axis (issue 79's fuzz: 110% off on PyTorch).
        return {
            h.layer: float(
                fw.to_numpy(
                    fw.loss(
                        fw.to_labels(outputs[h.layer]), fw.to_labels(t), h.objective
                    )
                ).item()
            )
            for h, t in zip(spec.heads, targets, strict=True)
        }

    def _check_noise(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> None:
        """A ValueError unless every layer that draws noise, in one training
        forward pass on ``x`` (repeated: ``noise_batch``), drew as its kind
        must (``check_noise``, in Keras' layout)."""
        fw, taps = self.fw, {}

        def record(name: str, h: Tensor) -> Tensor:
            taps[name] = layout.activation_to_canonical(fw.to_numpy(h), fw.LAYOUT)
            return h

        apply = load_apply(self.framework, spec)
        arrays = fw.arrays(self.init(spec, weights))
        apply(arrays, self.feed(spec, noise_batch(spec, x)), tap=record, training=True)
        for layer in spec.noisy_layers():
            masks = {mask.tap: taps[mask.tap] for mask in masks_of(layer)}
            if masks:  # drawn inside its cells
                given, got = taps[f"{layer.name}/input"], taps[layer.name]
                problem = check_masks(layer, given, masks, got, weights)
            else:
                problem = check_noise(
                    layer, taps[f"{layer.name}/input"], taps[layer.name]
                )
            if problem:
                raise ValueError(problem)

    def activations(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> tuple[dict[str, np.ndarray], str | None]:
        """Every tapped layer's output in canonical layout, and the error that
        stopped the forward pass part-way (``None`` if it ran through)."""
        fw = self.fw
        apply = load_apply(self.framework, spec)
        arrays = fw.arrays(self.init(spec, weights))
        taps: dict[str, np.ndarray] = {}

        # The pass runs op by op over the plain arrays (never compiled, no
        # gradient bookkeeping), so every operator runs, and fails, as it is
        # reached; reading each output back at once also surfaces an error of an
        # asynchronous engine (MXNet) at its layer, and keeps the layers before.
        def record(name: str, h: Tensor) -> Tensor:
            taps[name] = layout.activation_to_canonical(fw.to_numpy(h), fw.LAYOUT)
            return h

        error = None
        try:
            apply(arrays, self.feed(spec, x), tap=record)
        except Exception as exc:  # a faulty pass may fail; keep the layers before
            error = f"{type(exc).__name__}: {exc}"
        return taps, error

    def trainer(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        xs: np.ndarray,
        ys: np.ndarray,
    ) -> Trainer:
        """``run(n)``: ``n`` hand-written optimizer steps, finished on return;
        ``run.finish()``: the loss of the last batch trained and the
        parameters, checked for NaN and inf."""
        fw, apply = self.fw, load_apply(self.framework, spec)
        state = self.train_state(spec, weights)
        batches = self.batches(spec, xs, ys)

        def step(x: Tensor, y: Tensor) -> TrainState:
            nonlocal state
            state = fw.train_step(apply, state, x, y)
            return state

        def check(steps: int) -> TrainCheck:
            params = fw.state_params(state)
            x, y = batches[max(steps, 1) - 1]
            outputs = self.plain.inference(apply, params, x)
            loss = fw.loss(outputs, y, spec.objective)
            return check_training(
                float(fw.to_numpy(loss).item()), self.export(spec, params)
            )

        return Trainer(self._stepper(batches, step), check)

    def direct_trainer(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        xs: np.ndarray,
        ys: np.ndarray,
    ) -> Callable[[int], None]:
        """``direct(n)``: ``n`` train steps over the same resident batches as
        ``trainer`` (cycling), calling the framework's functions in a plain
        loop (no harness closure), then a wait: the reference that
        ``python -m harness selfcheck`` times."""
        fw, apply = self.fw, load_apply(self.framework, spec)
        state = self.train_state(spec, weights)
        batches = self.batches(spec, xs, ys)

        def direct(n: int) -> None:
            nonlocal state
            for i in range(n):
                x, y = batches[i % len(batches)]
                state = fw.train_step(apply, state, x, y)
            fw.sync(state)

        return direct

    def idiomatic_trainer(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        xs: np.ndarray,
        ys: np.ndarray,
    ) -> Callable[[int], None]:
        """Like ``trainer``, with the framework's idiomatic fast training step
        (``native.<framework>.idiomatic``), for the floors benchmark."""
        idiomatic = importlib.import_module(f"native.{self.framework}.idiomatic")
        arrays = layout.to_native(spec, weights, self.fw.LAYOUT)
        return self._stepper(
            self.batches(spec, xs, ys), idiomatic.make_step(spec, arrays)
        )

    def _stepper(
        self, batches: list[Batch], step: Callable[[Tensor, Tensor], Any]
    ) -> Callable[[int], None]:
        """``run(n)``: ``step`` over the first ``n`` resident batches, then a
        wait on what the last step returned."""

        def run(n: int) -> None:
            if n > len(batches):
                raise ValueError(f"asked for {n} steps but only {len(batches)} batches")
            last = None
            for x, y in batches[:n]:
                last = step(x, y)
            self.fw.sync(last)

        return run

    def predictor(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
    ) -> Predictor:
        """``run()``: the forward pass over every resident batch, finished on
        return; ``run.nonfinite()``: whether its last logits hold NaN or inf."""
        fw, apply = self.fw, load_apply(self.framework, spec)
        params = self.init(spec, weights)
        inputs = [self.feed(spec, x) for x in xs]

        def run() -> list[Tensor]:
            outputs = [fw.inference(apply, params, x) for x in inputs]
            fw.sync(outputs)
            return outputs

        def to_numpy(outputs: list[Tensor]) -> list[np.ndarray]:
            return [self.read(spec, o) for o in outputs]

        return Predictor(run, to_numpy)

    def session(self, spec: ModelSpec, weights: Mapping[str, np.ndarray]) -> Session:
        return Session(self.framework, spec, weights, self.mode)

    def describe(self) -> dict[str, Any]:
        return self.fw.describe()


class Session:
    """A training run step by step, for the trajectory and accuracy checks
    (``workers.runs``); the same surface as the Keras runner's ``Session``
    (``workers.protocol.Session``)."""

    def __init__(
        self,
        framework: str,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        mode: str | None = None,
    ) -> None:
        self.runner = NativeRunner(framework, mode)
        self.fw = self.runner.fw
        self.spec = spec
        self.apply = load_apply(framework, spec)
        self.state = self.runner.train_state(spec, weights)

    def step(self, x: np.ndarray, y: np.ndarray, with_loss: bool = True) -> float:
        """One optimizer step; returns the loss at the parameters before it
        (computed by a separate forward pass, or NaN when not asked for)."""
        fw = self.fw
        xt, yt = self.runner.feed(self.spec, x), self.runner.labels(self.spec, y)
        loss = math.nan
        if with_loss:
            params = fw.state_params(self.state)
            if self.spec.trains_differently:
                # The loss a training step computes (Keras' train_on_batch
                # reports it): batch statistics, as ``train_step`` runs.
                # (its weight penalties too, as ``loss_and_grads`` adds them:
                # without them a regularized model's step losses were off by
                # the penalty on every native path, float64 references
                # included, finding 6ece828580)
                logits, _ = train_forward(self.apply, fw.arrays(params), xt)
                value = fw.loss(logits, yt, self.spec.objective)
                if penalties := penalties_of(self.apply):
                    value = value + fw.penalty(fw.arrays(params), penalties)
            else:
                _, value, _ = fw.loss_and_grads(self.apply, params, xt, yt)
            loss = float(fw.to_numpy(value).item())
        self.state = fw.train_step(self.apply, self.state, xt, yt)
        fw.sync(self.state)
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return self.runner.export(self.spec, self.fw.state_params(self.state))

    def logits(self, x: np.ndarray) -> np.ndarray:
        params = self.fw.state_params(self.state)
        return self.runner.read(
            self.spec,
            self.fw.inference(self.apply, params, self.runner.feed(self.spec, x)),
        )
