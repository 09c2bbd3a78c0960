"""The one interface both runners meet: what a worker asks of a path.

``workers.serve`` turns each typed request (``workers.messages``) into calls
of a ``Runner``; ``workers.keras_runner.KerasRunner`` (the Keras paths) and
``workers.native_runner.NativeRunner`` (the hand-written paths) implement it.
The closures ``trainer`` and ``predictor`` return are what the harness times;
``evaluate``, ``activations`` and ``session`` are what the equivalence checks
compare.  ``NativeRunner`` has two more (``NativeOnly``): the reference loop
the self-check times and the idiomatic step the floors benchmark times.

Framework-free and NumPy 1.23-safe: the MXNet worker imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np

from zoo.specs import ModelSpec

Weights = Mapping[str, np.ndarray]  # canonical (Keras-layout) arrays by name


class Session(Protocol):
    """A training run step by step, for the trajectory and accuracy checks
    (``workers.runs``)."""

    def step(self, x: np.ndarray, y: np.ndarray, with_loss: bool = True) -> float:
        """One optimizer step; the loss at the parameters before it (NaN when
        ``with_loss`` is false)."""

    def params(self) -> dict[str, np.ndarray]:
        """The current parameters in canonical layout."""

    def logits(self, x: np.ndarray) -> np.ndarray:
        """The forward pass at the current parameters."""


class Runner(Protocol):
    framework: str

    def evaluate(
        self, spec: ModelSpec, weights: Weights, x: np.ndarray, y: np.ndarray
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        """Logits, mean cross-entropy and canonical-layout gradients of one batch."""

    def activations(
        self, spec: ModelSpec, weights: Weights, x: np.ndarray
    ) -> tuple[dict[str, np.ndarray], str | None]:
        """Every tapped layer's output (canonical layout), and the error that
        stopped the forward pass part-way (``None`` if it ran through)."""

    def session(self, spec: ModelSpec, weights: Weights) -> Session:
        """A fresh training run from ``weights``."""

    def trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Callable[[int], None]:
        """``run(n)``: ``n`` optimizer steps over the first ``n`` resident
        batches of ``xs``/``ys``, finished (synchronized) on return."""

    def predictor(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray
    ) -> Callable[[], None]:
        """``run()``: the forward pass over every resident batch of ``xs``,
        finished (synchronized) on return."""

    def describe(self) -> dict[str, Any]:
        """Versions, device, threads and numeric settings, for the records."""


@runtime_checkable
class NativeOnly(Protocol):
    """What only the native runner offers."""

    def direct_trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Callable[[int], None]:
        """``direct(n)``: ``n`` train steps over the resident batches (cycling)
        by the framework's own functions in a plain loop, then a wait: the
        reference the self-check times against ``trainer``."""

    def idiomatic_trainer(
        self, spec: ModelSpec, weights: Weights, xs: np.ndarray, ys: np.ndarray
    ) -> Callable[[int], None]:
        """Like ``trainer``, with the framework's idiomatic fast training step
        (``native.<framework>.idiomatic``), for the floors benchmark."""
