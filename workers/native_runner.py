"""The native paths as a worker runs them: one class for every framework.

Everything framework-specific comes from ``native.<framework>.common`` and the
model modules; this file only wires them to the worker's three tasks.  Data is
made resident on the device before any timing starts.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from native import layout, load_apply, load_framework
from zoo.specs import ModelSpec


class NativeRunner:
    def __init__(self, framework: str) -> None:
        self.framework = framework
        self.fw = load_framework(framework)

    def evaluate(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        x: np.ndarray,
        y: np.ndarray,
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        apply = load_apply(self.framework, spec)
        params = self.fw.init(spec, weights)
        return self.fw.evaluate(
            spec, apply, params, self.fw.to_input(x), self.fw.to_labels(y)
        )

    def trainer(
        self,
        spec: ModelSpec,
        weights: Mapping[str, np.ndarray],
        xs: np.ndarray,
        ys: np.ndarray,
    ) -> Callable[[int], None]:
        """``run(n)``: ``n`` hand-written optimizer steps, finished on return."""
        apply = load_apply(self.framework, spec)
        state = self.fw.make_train_state(spec, self.fw.init(spec, weights))

        def step(batch: tuple[Any, Any]) -> Any:
            nonlocal state
            state = self.fw.train_step(apply, state, *batch)
            return state

        batches = [
            (self.fw.to_input(x), self.fw.to_labels(y))
            for x, y in zip(xs, ys, strict=True)
        ]
        return self._stepper(batches, step)

    def direct_trainer(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], data: Any
    ) -> Callable[[int], None]:
        """``direct(n)``: ``n`` train steps over the same resident batches as
        ``trainer`` (cycling), calling the framework's functions in a plain
        loop (no harness closure), then a wait: the reference that
        ``python -m harness selfcheck`` times."""
        fw, apply = self.fw, load_apply(self.framework, spec)
        state = fw.make_train_state(spec, fw.init(spec, weights))
        batches = [
            (fw.to_input(x), fw.to_labels(y))
            for x, y in zip(data["x"], data["y"], strict=True)
        ]

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
        prepare, step = idiomatic.make_trainer(spec, weights)
        batches = [prepare(x, y) for x, y in zip(xs, ys, strict=True)]
        return self._stepper(batches, step)

    def _stepper(
        self, batches: list[Any], step: Callable[[Any], Any]
    ) -> Callable[[int], None]:
        """``run(n)``: ``step`` over the first ``n`` resident batches, then a
        wait on what the last step returned."""

        def run(n: int) -> None:
            if n > len(batches):
                raise ValueError(f"asked for {n} steps but only {len(batches)} batches")
            last = None
            for batch in batches[:n]:
                last = step(batch)
            self.fw.sync(last)

        return run

    def predictor(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
    ) -> Callable[[], None]:
        """``run()``: the forward pass over every resident batch, finished on return."""
        apply = load_apply(self.framework, spec)
        params = self.fw.init(spec, weights)
        inputs = [self.fw.to_input(x) for x in xs]

        def run() -> None:
            outputs = [self.fw.inference(apply, params, x) for x in inputs]
            self.fw.sync(outputs)

        return run

    def activations(
        self, spec: ModelSpec, weights: Mapping[str, np.ndarray], x: np.ndarray
    ) -> tuple[dict[str, np.ndarray], str | None]:
        """Every tapped layer's output in canonical layout, and the error that
        stopped the forward pass part-way (``None`` if it ran through)."""
        apply = load_apply(self.framework, spec)
        params = self.fw.init(spec, weights)
        taps: dict[str, np.ndarray] = {}
        error = None
        try:
            self.fw.activations(apply, params, self.fw.to_input(x), taps)
        except Exception as exc:  # a faulty pass may fail; keep the layers before
            error = f"{type(exc).__name__}: {exc}"
        family = self.fw.LAYOUT
        return {
            k: layout.activation_to_canonical(a, family) for k, a in taps.items()
        }, (error)

    def session(self, spec: ModelSpec, weights: Mapping[str, np.ndarray]) -> Session:
        return Session(self.framework, spec, weights)

    def describe(self) -> dict[str, Any]:
        return self.fw.describe()


class Session:
    """A training run step by step, for the trajectory and accuracy checks
    (``equivalence.runs``); the same surface as ``zoo.keras_path.Session``."""

    def __init__(
        self, framework: str, spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> None:
        self.fw = load_framework(framework)
        self.spec = spec
        self.apply = load_apply(framework, spec)
        self.state = self.fw.make_train_state(spec, self.fw.init(spec, weights))

    def step(self, x: np.ndarray, y: np.ndarray, with_loss: bool = True) -> float:
        """One optimizer step; returns the loss at the parameters before it
        (computed by a separate forward pass, or NaN when not asked for)."""
        xt, yt = self.fw.to_input(x), self.fw.to_labels(y)
        loss = math.nan
        if with_loss:
            params = self.fw.state_params(self.state)
            _, loss, _ = self.fw.evaluate(self.spec, self.apply, params, xt, yt)
        self.state = self.fw.train_step(self.apply, self.state, xt, yt)
        self.fw.sync(self.state)
        return loss

    def params(self) -> dict[str, np.ndarray]:
        return self.fw.export(self.spec, self.fw.state_params(self.state))

    def logits(self, x: np.ndarray) -> np.ndarray:
        params = self.fw.state_params(self.state)
        return self.fw.to_numpy(
            self.fw.inference(self.apply, params, self.fw.to_input(x))
        )
