"""Deliberate mistakes, injected into one native path to prove the checks work.

Each fault is a mistake someone writing a native model could make.  It enters
the path through what the path reads: its canonical weights (a layout mistake,
a missing bias) or its model description (the wrong padding, a wrong
optimizer); every other path keeps the correct ones.  ``Fault.target`` says
where localization must point: the stage (``forward``, ``loss``, ``backward``,
``update``) and the layer.

A mistake typical of one layer kind is declared in that kind's module
(``Kind.mistakes``, a ``zoo.kinds.base.Mistake``) and made a fault here; the
faults written here are those of no one kind (a flatten's order into a dense
layer, a bias, an activation, a regularizer, the optimizer).

Framework-free: the MXNet environment imports it too.  Every fault is data:
the optimizer fault ``adam-eps-inside-sqrt`` sets the workload's
``epsilon_inside_sqrt``, which each framework's one Adam honours in its
denominator (the Keras paths refuse faults, so they never see it).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.kinds import KINDS, MISTAKES
from zoo.kinds.base import Mistake
from zoo.specs import GELU_TANH, Layer, ModelSpec, Param, layer_inputs

Weights = dict[str, np.ndarray]


@dataclass(frozen=True)
class Location:
    """Where two paths part ways: a stage of a training step and a layer."""

    stage: str  # "forward", "loss", "backward" or "update"
    layer: str

    def __str__(self) -> str:
        return f"{self.stage} at layer {self.layer}"


@dataclass(frozen=True)
class Fault:
    name: str
    description: str
    applies: Callable[[ModelSpec], bool]
    target: Callable[[ModelSpec], Location]
    inject: Callable[[ModelSpec, Mapping[str, np.ndarray]], tuple[ModelSpec, Weights]]


def _corrupt_params(
    chosen: Callable[[ModelSpec], list[Param]],
    corrupt: Callable[[np.ndarray, Param], np.ndarray],
) -> Callable[[ModelSpec, Mapping[str, np.ndarray]], tuple[ModelSpec, Weights]]:
    """A weights fault: ``corrupt`` applied to the ``chosen`` parameters."""

    def inject(
        spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> tuple[ModelSpec, Weights]:
        return spec, _corrupted(spec, weights, chosen(spec), corrupt)

    return inject


def _corrupted(
    spec: ModelSpec,
    weights: Mapping[str, np.ndarray],
    chosen: list[Param],
    corrupt: Callable[[np.ndarray, Param], np.ndarray],
) -> Weights:
    names = {p.name for p in chosen}
    return {
        p.name: corrupt(weights[p.name], p) if p.name in names else weights[p.name]
        for p in spec.params
    }


def _layer_changed(
    spec: ModelSpec, weights: Mapping[str, np.ndarray], name: str, **changes: Any
) -> tuple[ModelSpec, Weights]:
    """``spec`` with layer ``name`` computed with ``changes`` (a padding, an
    activation, an epsilon), and the weights as they are."""
    layers = tuple(
        layer.replace(**changes) if layer.name == name else layer
        for layer in spec.layers
    )
    return _with_layers(spec, layers), dict(weights)


def _with_layers(spec: ModelSpec, layers: tuple[Layer, ...]) -> ModelSpec:
    """``spec`` whose forward pass runs ``layers``.  The author declared the
    weights of the correct model; only the forward pass is wrong, so the
    parameter list (which loading follows) is kept, and the layers are not
    checked against it (a wrong padding may leave a later window nothing to
    cover: the path then fails at that layer, and is caught)."""
    faulty = copy.copy(spec)
    object.__setattr__(faulty, "layers", layers)
    return faulty


# --- the kinds' mistakes ------------------------------------------------------
#
# Each ``Mistake`` a kind declares (``zoo.kinds.base``) is the fault of its
# name: it applies where it hits a layer, points at the first such layer, and
# enters as it says (its parameters corrupted, that layer's options changed,
# or its own injection).


def _hit(spec: ModelSpec, mistake: Mistake) -> list[Layer]:
    """The layers of ``spec`` that ``mistake`` hits, in order: of those
    holding one of its ``params``, or else of a kind that declares it."""
    if mistake.params:
        holders = {p.layer for p in _mistaken_params(spec, mistake)}
        reached = [layer.name in holders for layer in spec.layers]
    else:
        kinds = [k.name for k in KINDS.values() if mistake in k.mistakes]
        reached = [layer.kind in kinds for layer in spec.layers]
    return [
        layer
        for layer, reaches, (shapes, _) in zip(
            spec.layers, reached, layer_inputs(spec), strict=True
        )
        if reaches and mistake.hits(layer, shapes)
    ]


def _mistaken_params(spec: ModelSpec, mistake: Mistake) -> list[Param]:
    return [p for p in spec.params if mistake.params in (p.kind, p.role)]


def _mistake_injected(
    mistake: Mistake,
) -> Callable[[ModelSpec, Mapping[str, np.ndarray]], tuple[ModelSpec, Weights]]:
    def inject(
        spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> tuple[ModelSpec, Weights]:
        hit = _hit(spec, mistake)
        if mistake.inject is not None:
            return mistake.inject(hit[0], spec, weights)
        faulty, wrong = spec, dict(weights)
        if mistake.corrupt is not None:
            names = {layer.name for layer in hit}
            chosen = [p for p in _mistaken_params(spec, mistake) if p.layer in names]
            wrong = _corrupted(spec, weights, chosen, mistake.corrupt)
        if mistake.changes is not None:
            faulty, _ = _layer_changed(spec, {}, hit[0].name, **mistake.changes(hit[0]))
        return faulty, wrong

    return inject


def fault_of(mistake: Mistake) -> Fault:
    """The fault a kind's mistake is (``Kind.mistakes``)."""
    return Fault(
        mistake.name,
        mistake.description,
        lambda s: bool(_hit(s, mistake)),
        lambda s: Location(mistake.stage, _hit(s, mistake)[0].name),
        _mistake_injected(mistake),
    )


# --- the faults of no one kind ------------------------------------------------


def _after_flatten(spec: ModelSpec) -> list[Param]:
    """The dense kernels right after a flatten of images."""
    return [p for p in spec.params if p.feature_shape is not None]


def _unpermuted_flatten(a: np.ndarray, p: Param) -> np.ndarray:
    # A kernel whose rows are read in C, H, W order where the flatten gives
    # H, W, C (what mixing PyTorch's flatten order into Keras' weights does).
    assert p.feature_shape is not None
    h, w, c = p.feature_shape
    rows = a.reshape(c, h, w, -1).transpose(1, 2, 0, 3)  # (C,H,W,out) -> (H,W,C,out)
    return np.ascontiguousarray(rows.reshape(a.shape))


def _last_hidden_bias(spec: ModelSpec) -> Param:
    """The bias of the last layer before the logits (deep in the network, so
    localization has to see every earlier layer agree)."""
    biases = [p for p in spec.params if p.role == "bias" and p.layer != "logits"]
    return biases[-1]


def _missing_bias(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # A forward pass that forgets to add the bias computes what a zero bias gives.
    missing = _last_hidden_bias(spec).name
    return spec, {
        name: np.zeros_like(a) if name == missing else a for name, a in weights.items()
    }


_SWAPPED = {"tanh": "sigmoid", "sigmoid": "tanh"}


def _first_squashing(spec: ModelSpec) -> str:
    return next(layer.name for layer in spec.layers if layer.activation in _SWAPPED)


def _activation_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    wrong = _first_squashing(spec)
    swapped = _SWAPPED[spec.layer(wrong).activation or ""]
    return _layer_changed(spec, weights, wrong, activation=swapped)


def _last_gelu(spec: ModelSpec) -> str:
    """The last GELU layer: a feed-forward one after a normalization, whose
    inputs are of unit size, where the approximation is 1e-3 off (on the
    small embeddings the position convolution sees it is exact to float32)."""
    return [layer.name for layer in spec.layers if layer.activation == "gelu"][-1]


def _gelu_tanh(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    return _layer_changed(spec, weights, _last_gelu(spec), activation=GELU_TANH)


def _adam_eps_inside_sqrt(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    workload = dataclasses.replace(spec.workload, epsilon_inside_sqrt=True)
    return dataclasses.replace(spec, workload=workload), dict(weights)


def _loss_weights_ignored(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # Each output's loss summed as it is, the model's loss_weights dropped.
    workload = dataclasses.replace(spec.workload, loss_weights=())
    return dataclasses.replace(spec, workload=workload), dict(weights)


def _l2_halved(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # TensorFlow 1's tf.nn.l2_loss is sum(w ** 2) / 2; Keras' L2 has no 1/2.
    layers = tuple(
        dataclasses.replace(
            layer, regularize=tuple((r, l1, l2 / 2) for r, l1, l2 in layer.regularize)
        )
        for layer in spec.layers
    )
    return _with_layers(spec, layers), dict(weights)


# The faults of no one kind, in the order the suite runs them: those of the
# forward pass before the kinds' mistakes, those of the loss and the update
# after them.
_OF_LAYERS = (
    Fault(
        "unpermuted-flatten",
        "dense layer after flatten loaded with its rows in C,H,W order",
        lambda s: bool(_after_flatten(s)),
        lambda s: Location("forward", _after_flatten(s)[0].layer),
        _corrupt_params(_after_flatten, _unpermuted_flatten),
    ),
    Fault(
        "missing-bias",
        "the last hidden layer's bias left out of the forward pass",
        lambda s: True,
        lambda s: Location("forward", _last_hidden_bias(s).layer),
        _missing_bias,
    ),
    Fault(
        "activation-swapped",
        "the first tanh layer computed with sigmoid, or sigmoid with tanh",
        lambda s: any(layer.activation in _SWAPPED for layer in s.layers),
        lambda s: Location("forward", _first_squashing(s)),
        _activation_swapped,
    ),
    Fault(  # an activation's, not a kind's (``GELU_TANH``)
        "gelu-tanh",
        "the last GELU by its tanh approximation (jax.nn.gelu's default), "
        "not Keras' exact erf",
        lambda s: any(layer.activation == "gelu" for layer in s.layers),
        lambda s: Location("forward", _last_gelu(s)),
        _gelu_tanh,
    ),
)
_OF_TRAINING = (
    Fault(
        "l2-halved",
        "an L2 regularizer's term as tf.nn.l2_loss computes it, sum(w ** 2) "
        "/ 2, not Keras' sum(w ** 2)",
        lambda s: any(l2 for _, _, l2 in s.penalties),
        lambda s: Location("loss", "loss"),
        _l2_halved,
    ),
    Fault(
        "loss-weights-ignored",
        "a model's several outputs' losses summed without its loss_weights",
        lambda s: any(h.weight != 1 for h in s.heads),
        lambda s: Location("loss", "loss"),
        _loss_weights_ignored,
    ),
    Fault(
        "adam-eps-inside-sqrt",
        "Adam with epsilon inside the square root: sqrt(v + eps)",
        lambda s: s.workload.optimizer == "adam",
        lambda s: Location("update", s.params[0].layer),
        _adam_eps_inside_sqrt,
    ),
)
# Every fault by name: the kinds' mistakes (``zoo.kinds.MISTAKES``, in the
# registry's order) between the faults of no one kind.
FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        *_OF_LAYERS,
        *(fault_of(mistake) for mistake in MISTAKES.values()),
        *_OF_TRAINING,
    )
}
CROSS_CUTTING = tuple(f.name for f in (*_OF_LAYERS, *_OF_TRAINING))


def get_fault(name: str) -> Fault:
    if name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; known faults: {', '.join(FAULTS)}")
    return FAULTS[name]


def inject(
    spec: ModelSpec, weights: Mapping[str, np.ndarray], name: str
) -> tuple[ModelSpec, Weights]:
    """The spec and weights a path runs with when it has fault ``name``."""
    fault = get_fault(name)
    if not fault.applies(spec):
        raise ValueError(f"fault {name!r} does not apply to model {spec.name!r}")
    return fault.inject(spec, weights)


# --- faults in the timed closures alone ----------------------------------------
#
# A timed fault enters only the closure the harness times (``Runner.trainer``
# or ``Runner.predictor``, built by ``workers.serve``); the checks' own tasks
# (Evaluate, Activations, Trajectory) run the correct model, so the
# equivalence checks pass it and only the gate's comparison of the timed
# closures with the checked results (``harness.core.gate``) can catch it.  They are
# kept apart from ``FAULTS``, which the fault suite iterates.


@dataclass(frozen=True)
class TimedFault:
    """``inject(spec, weights, xs)``: the spec, weights and resident inputs
    the faulty ``closure`` (``trainer`` or ``predictor``) is built from."""

    name: str
    description: str
    closure: str
    inject: Callable[
        [ModelSpec, Mapping[str, np.ndarray], np.ndarray],
        tuple[ModelSpec, Weights, np.ndarray],
    ]


def bfloat16_rounded(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even) and back
    to float32: what a cast to bfloat16 and back keeps.  Other dtypes (integer
    labels or token ids) are returned as they are."""
    if np.asarray(a).dtype != np.float32:
        return a
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    odd = (bits >> np.uint32(16)) & np.uint32(1)
    kept = (bits + np.uint32(0x7FFF) + odd) & np.uint32(0xFFFF0000)
    return kept.view(np.float32)


def _inference_in_bfloat16(
    spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
) -> tuple[ModelSpec, Weights, np.ndarray]:
    rounded = {name: bfloat16_rounded(a) for name, a in weights.items()}
    return spec, rounded, bfloat16_rounded(xs)


LEARNING_RATE_ERROR = 1.01  # the factor ``timed-train-lr`` puts on the rate


def _learning_rate_off(
    spec: ModelSpec, weights: Mapping[str, np.ndarray], xs: np.ndarray
) -> tuple[ModelSpec, Weights, np.ndarray]:
    rate = spec.workload.learning_rate * LEARNING_RATE_ERROR
    workload = dataclasses.replace(spec.workload, learning_rate=rate)
    return dataclasses.replace(spec, workload=workload), dict(weights), xs


TIMED_FAULTS: dict[str, TimedFault] = {
    f.name: f
    for f in (
        TimedFault(
            "timed-infer-bfloat16",
            "the timed inference casts its inputs and weights to bfloat16 and back",
            "predictor",
            _inference_in_bfloat16,
        ),
        TimedFault(
            "timed-train-lr",
            "the timed training steps use a learning rate 1% too high",
            "trainer",
            _learning_rate_off,
        ),
    )
}


def inject_timed(
    spec: ModelSpec,
    weights: Mapping[str, np.ndarray],
    xs: np.ndarray,
    name: str | None,
    closure: str,
) -> tuple[ModelSpec, Mapping[str, np.ndarray], np.ndarray]:
    """What ``closure`` (``trainer`` or ``predictor``) is built from when the
    path has the timed fault ``name``: changed only where the fault lives in
    that closure, else ``spec``, ``weights`` and ``xs`` as they are."""
    if name is None:
        return spec, weights, xs
    if name not in TIMED_FAULTS:
        raise ValueError(
            f"unknown timed fault {name!r}; known timed faults: "
            f"{', '.join(TIMED_FAULTS)}"
        )
    fault = TIMED_FAULTS[name]
    if fault.closure != closure:
        return spec, weights, xs
    return fault.inject(spec, weights, xs)
