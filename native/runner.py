"""The native paths as a worker runs them: one class for every framework.

Everything framework-specific comes from ``native.<framework>.common`` and the
model modules; this file only wires them to the worker's three tasks.  Data is
made resident on the device before any timing starts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from native import load_apply, load_framework
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

    def describe(self) -> dict[str, Any]:
        return self.fw.describe()
