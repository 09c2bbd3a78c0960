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

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from equivalence.compare import (
    GRAD_PREFIX,
    TOLERANCES,
    quantity_error,
    step_tolerance,
)
from equivalence.reference import limit as judged_limit
from equivalence.reference import witnessed
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
    # set when the path's tapped and evaluated forward passes disagree
    contradiction: str | None = None
    # set when the path's evaluation or training run raised: there are no
    # arrays to walk, and the error is the finding (no layer is named)
    raised: str | None = None


def _worst(
    pair: tuple[Arrays, Arrays],
    stage: str,
    keys: list[str],
    tolerance: float,
    limit: Limit,
) -> tuple[float, float]:
    """A layer's error and allowance: those of its array furthest beyond
    (or nearest to) its own allowance, each array judged against its own as
    the judgement judges it.  Not the largest error against the largest
    allowance: a batch normalization's moving variance 3e-6 off, allowed
    1.5e-6, hid behind its layer's most lenient parameter (1.2e-4) and the
    walk went on to a later layer (issue 65)."""
    a, b = pair
    judged = [(quantity_error(a, b, k), limit(stage, k, tolerance)) for k in keys]
    return max(judged, key=_over)


def _over(judged: tuple[float, float]) -> float:
    """How far an error is beyond its allowance (above 1: beyond)."""
    error, allowed = judged
    if allowed > 0:
        return error / allowed
    return math.inf if error > 0 else 0.0


def _param_layers(spec: ModelSpec) -> list[str]:
    return list(dict.fromkeys(p.layer for p in spec.params))


def _keys(spec: ModelSpec, layer: str, prefix: str, trained: bool = False) -> list[str]:
    """The arrays of ``layer``'s parameters under ``prefix``: for gradients
    (``trained``) those an optimizer trains, for training steps every one
    whose steps are not rounding noise (``ModelSpec.noise_trained``)."""
    noise = () if trained else spec.noise_trained()
    return [
        prefix + p.name
        for p in spec.params
        if p.layer == layer and (p.trainable or not trained) and p.name not in noise
    ]


def _steps(trajectory: Arrays) -> int:
    """How many training steps a trajectory holds (``step<t>/...`` keys, or
    a ``loss`` vector)."""
    steps = {int(k.split("/")[0].removeprefix("step")) for k in trajectory if "/" in k}
    return max(steps, default=len(trajectory.get("loss", ())))


# The error allowed at ``stage`` on one array (``key``), given the stage's
# fixed ``tolerance``.
Limit = Callable[[str, str, float], float]


def fixed_limit(stage: str, key: str, tolerance: float) -> float:
    """Two float32 paths: the fixed tolerance of ``equivalence.compare``."""
    return tolerance


def layer_errors(
    spec: ModelSpec,
    activations: tuple[Arrays, Arrays],
    evaluated: tuple[Arrays, Arrays],
    trajectory: tuple[Arrays, Arrays] | None = None,
    limit: Limit = fixed_limit,
    *,
    forward_only: bool = False,
) -> tuple[list[LayerError], int | None]:
    """Every layer's error in walking order, and the first differing training
    step whose parameters were compared (``None`` if none differs).

    ``limit(stage, key, tolerance)`` gives the error allowed on one array
    (``fixed_limit``: the fixed tolerance; the checker passes one from the
    float32 baselines' error instead), and a layer of several arrays shows
    the one furthest beyond its own (``_worst``)."""
    (act_a, act_b), (ev_a, ev_b) = activations, evaluated
    tol = TOLERANCES["logits"]
    errors = [
        LayerError(
            "forward",
            name,
            quantity_error(act_a, act_b, name),
            limit("forward", name, tol),
        )
        for name in spec.tapped_layers()
    ]
    if forward_only:  # nothing evaluated to walk past the forward pass
        return errors, None
    errors.append(
        LayerError(
            "loss",
            "loss",
            quantity_error(ev_a, ev_b, "loss"),
            limit("loss", "loss", tol),
        )
    )
    for layer in reversed(_param_layers(spec)):
        keys = _keys(spec, layer, GRAD_PREFIX, trained=True)
        if not keys:  # state only (a Normalization's statistics): no gradient
            continue
        errors.append(
            LayerError(
                "backward",
                layer,
                *_worst((ev_a, ev_b), "backward", keys, TOLERANCES["grad"], limit),
            )
        )
    step = None
    if trajectory is not None:
        traj_a, traj_b = trajectory
        steps = max(_steps(traj_a), _steps(traj_b))
        for t in range(1, steps + 1):
            per_layer = []
            for layer in _param_layers(spec):
                keys = _keys(spec, layer, f"step{t}/")
                if not keys:
                    continue
                tolerance = step_tolerance(spec.name, t)
                per_layer.append(
                    LayerError(
                        "update",
                        layer,
                        *_worst((traj_a, traj_b), "update", keys, tolerance, limit),
                    )
                )
            if not all(e.ok for e in per_layer) or t == steps:
                errors += per_layer
                step = t if not all(e.ok for e in per_layer) else None
                break
    return errors, step


Triple = tuple[Arrays, Arrays, Arrays | None]  # activations, evaluated, trajectory


def baseline_limit(
    spec: ModelSpec,
    reference: Triple,
    baselines: list[Triple],
    share: float = 1.0,
    witnesses: Sequence[Triple] = (),
) -> Limit:
    """Each array allowed ``share`` of what ``equivalence.reference.limit``
    allows from the float32 baselines' largest error on it against the
    float64 reference (each given as ``(activations, evaluated,
    trajectory)``), raised by ``witnesses`` as the judgement raises it
    (``equivalence.reference.witnessed``), as the judgement allows it."""
    stages = {"forward": 0, "loss": 1, "backward": 1, "update": 2}

    def layer_limit(stage: str, key: str, tolerance: float) -> float:
        ref = reference[stages[stage]]
        bases = [b[stages[stage]] for b in baselines]
        if ref is None or not bases or any(b is None for b in bases):
            return share * tolerance
        base = max(quantity_error(b, ref, key) for b in bases if b is not None)
        if not base < math.inf:  # a baseline's tapped pass stopped: no allowance
            return share * tolerance
        seen = [w[stages[stage]] for w in witnesses]
        base = witnessed(
            base, [quantity_error(w, ref, key) for w in seen if w is not None]
        )
        return share * judged_limit(spec.name, key, base)

    return layer_limit


def localize(
    spec: ModelSpec,
    path: str,
    reference: str,
    *,
    activations: tuple[Arrays, Arrays],
    evaluated: tuple[Arrays, Arrays],
    trajectory: tuple[Arrays, Arrays] | None = None,
    baselines: list[Triple] | None = None,
    share: float = 1.0,
    witnesses: Sequence[Triple] = (),
    error: str | None = None,
    contradiction: str | None = None,
    raised: str | None = None,
    tapped: bool = True,
) -> Localization:
    """Where ``path`` first differs from ``reference`` (each pair of arrays is
    ``(path's, reference's)``); no layer when ``path``'s tapped forward pass
    never ran (``tapped`` false: its set-up raised, ``error`` says why),
    never a first layer at an infinite error.  ``baselines``: the float32 baselines'
    activations, evaluations and trajectories when ``reference`` is a float64
    run, so that every layer is allowed what the judgement allows (``share``
    of it: two float64 runs are held to ``CROSS_CHECK_SHARE``), with the
    ``witnesses`` the judgement took (``equivalence.reference``).  ``raised``:
    why the path's evaluation or training run raised; then only its tapped
    forward pass is walked (a layer that differs there is still named: a
    wrong padding whose shapes stop the evaluation), never the loss, the
    gradients or the updates it has no arrays for."""
    if not tapped:
        return Localization(path, reference, (), None, None, error, None, raised)
    layer_limit: Limit = fixed_limit
    if baselines is not None:
        layer_limit = baseline_limit(
            spec,
            (activations[1], evaluated[1], trajectory[1] if trajectory else None),
            baselines,
            share,
            witnesses,
        )
    errors, step = layer_errors(
        spec,
        activations,
        evaluated,
        trajectory,
        layer_limit,
        forward_only=raised is not None,
    )
    first = next((e for e in errors if not e.ok), None)
    location = Location(first.stage, first.layer) if first else None
    return Localization(
        path,
        reference,
        tuple(errors),
        location,
        step if location and location.stage == "update" else None,
        error,
        contradiction,
        raised,
    )
