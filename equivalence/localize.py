"""Where two paths part ways: the first layer, stage by stage.

Given what two paths computed for the same case, walk a training step in the
order it happens and stop at the first layer that differs beyond tolerance:

1. ``forward``: each tapped layer's output (``ModelSpec.tapped_layers``), from
   the input towards the logits;
2. ``loss``: the mean cross-entropy;
3. ``backward``: each layer's parameter gradients, from the logits back
   towards the input, as backpropagation computes them;
4. ``update``: each layer's parameters after the first training step that
   differs, from the input towards the logits.

A forward mistake makes everything after it differ too, which is why the
first difference in this order is the one to report (CRADLE's idea, carried
through the backward pass and the optimizer).  Every layer's error is kept, so
the report shows how the difference grows.  Framework-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from equivalence.compare import (
    GRAD_PREFIX,
    TOLERANCES,
    quantity_error,
    step_tolerance,
)
from native.faults import Location
from zoo.specs import ModelSpec

Arrays = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class LayerError:
    stage: str
    layer: str
    error: float
    tolerance: float

    @property
    def ok(self) -> bool:
        return self.error <= self.tolerance


@dataclass(frozen=True)
class Localization:
    """``path`` against ``reference``: every layer's error in walking order,
    and the first location beyond tolerance (``None``: no difference found)."""

    path: str
    reference: str
    errors: tuple[LayerError, ...]
    first: Location | None
    step: int | None = None  # the training step of an ``update`` divergence
    error: str | None = None  # why the path's forward pass stopped, if it did


def _layer_error(a: Arrays, b: Arrays, keys: list[str]) -> float:
    return max(quantity_error(a, b, k) for k in keys)


def _param_layers(spec: ModelSpec) -> list[str]:
    return list(dict.fromkeys(p.layer for p in spec.params))


def _keys(spec: ModelSpec, layer: str, prefix: str) -> list[str]:
    return [prefix + p.name for p in spec.params if p.layer == layer]


def layer_errors(
    spec: ModelSpec,
    activations: tuple[Arrays, Arrays],
    evaluated: tuple[Arrays, Arrays],
    trajectory: tuple[Arrays, Arrays] | None = None,
) -> tuple[list[LayerError], int | None]:
    """Every layer's error in walking order, and the first differing training
    step whose parameters were compared (``None`` if none differs)."""
    (act_a, act_b), (ev_a, ev_b) = activations, evaluated
    tol = TOLERANCES["logits"]
    errors = [
        LayerError("forward", name, quantity_error(act_a, act_b, name), tol)
        for name in spec.tapped_layers()
    ]
    errors.append(LayerError("loss", "loss", quantity_error(ev_a, ev_b, "loss"), tol))
    for layer in reversed(_param_layers(spec)):
        keys = _keys(spec, layer, GRAD_PREFIX)
        errors.append(
            LayerError(
                "backward", layer, _layer_error(ev_a, ev_b, keys), TOLERANCES["grad"]
            )
        )
    step = None
    if trajectory is not None:
        traj_a, traj_b = trajectory
        steps = max(len(traj_a.get("loss", ())), len(traj_b.get("loss", ())))
        for t in range(1, steps + 1):
            per_layer = [
                LayerError(
                    "update",
                    layer,
                    _layer_error(traj_a, traj_b, _keys(spec, layer, f"step{t}/")),
                    step_tolerance(spec.name, t),
                )
                for layer in _param_layers(spec)
            ]
            if not all(e.ok for e in per_layer) or t == steps:
                errors += per_layer
                step = t if not all(e.ok for e in per_layer) else None
                break
    return errors, step


def localize(
    spec: ModelSpec,
    path: str,
    reference: str,
    *,
    activations: tuple[Arrays, Arrays],
    evaluated: tuple[Arrays, Arrays],
    trajectory: tuple[Arrays, Arrays] | None = None,
    error: str | None = None,
) -> Localization:
    """Where ``path`` first differs from ``reference`` (each pair of arrays is
    ``(path's, reference's)``)."""
    errors, step = layer_errors(spec, activations, evaluated, trajectory)
    first = next((e for e in errors if not e.ok), None)
    location = Location(first.stage, first.layer) if first else None
    return Localization(
        path,
        reference,
        tuple(errors),
        location,
        step if location and location.stage == "update" else None,
        error,
    )
