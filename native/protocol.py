"""The surface every native framework package and model module offers.

A model module (``native/<fw>/<model>.py``) is small: its ``SPEC`` and its
forward pass ``apply(params, x, tap=no_tap) -> logits``.  ``tap(name, h)`` is
called with the output of every layer in ``spec.tapped_layers()``, in order,
and returns ``h``; the default does nothing, so compiled passes are unchanged,
and ``Framework.activations`` passes a recording tap to localize a divergence.

Everything that is the same for all models of one framework lives once in
``native/<fw>/common.py``, which meets ``Framework`` below.  ``tests/native``
checks that each module meets these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import numpy as np

from zoo.specs import ModelSpec

Params = Any  # the framework's own container of parameter tensors
Tensor = Any
Apply = Callable[..., Tensor]  # apply(params, x, tap=no_tap) -> logits
Tap = Callable[[str, Tensor], Tensor]


def no_tap(name: str, h: Tensor) -> Tensor:
    """The default tap: records nothing."""
    return h


class ModelModule(Protocol):
    SPEC: ModelSpec

    def apply(self, params: Params, x: Tensor, tap: Tap = no_tap) -> Tensor: ...


class Framework(Protocol):
    LAYOUT: str  # a layout family of native.layout

    def init(self, spec: ModelSpec, canonical: Mapping[str, np.ndarray]) -> Params:
        """Canonical weights -> this framework's parameters, on its device."""

    def to_input(self, x: np.ndarray) -> Tensor:
        """A canonical-layout input batch -> this framework's layout and device."""

    def to_labels(self, y: np.ndarray) -> Tensor:
        """Integer class labels -> this framework's tensor on its device."""

    def evaluate(
        self, spec: ModelSpec, apply: Apply, params: Params, x: Tensor, y: Tensor
    ) -> tuple[np.ndarray, float, dict[str, np.ndarray]]:
        """Logits, mean cross-entropy and gradients in canonical layout."""

    def inference(self, apply: Apply, params: Params, x: Tensor) -> Tensor:
        """Logits without gradient bookkeeping (may return before they are ready)."""

    def make_train_state(self, spec: ModelSpec, params: Params) -> Any:
        """Parameters plus the workload's optimizer state (step 0)."""

    def train_step(self, apply: Apply, state: Any, x: Tensor, y: Tensor) -> Any:
        """One optimizer step with Keras' update formulas; returns the new state."""

    def to_numpy(self, t: Tensor) -> np.ndarray:
        """A tensor's values as a NumPy array (waits for them)."""

    def state_params(self, state: Any) -> Params:
        """The current parameters of a train state, as ``evaluate`` takes them."""

    def export(self, spec: ModelSpec, params: Params) -> dict[str, np.ndarray]:
        """Parameters -> canonical-layout NumPy arrays (the inverse of ``init``)."""

    def activations(
        self, apply: Apply, params: Params, x: Tensor, taps: dict[str, np.ndarray]
    ) -> None:
        """Run the forward pass op by op (never compiled) and store each tapped
        layer's output, in this framework's layout, into ``taps`` as soon as it
        is computed, so a pass that fails part-way keeps the layers before."""

    def sync(self, value: Any) -> None:
        """Block until every computation producing ``value`` has finished."""

    def describe(self) -> dict[str, Any]:
        """Versions, device, threads and numeric settings, for the records."""
