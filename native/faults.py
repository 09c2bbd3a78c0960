"""Deliberate mistakes, injected into one native path to prove the checks work.

Each fault is a mistake someone writing a native model could make.  It enters
the path through what the path reads: its canonical weights (a layout mistake,
a missing bias) or its model description (the wrong padding, a wrong
optimizer); every other path keeps the correct ones.  ``Fault.target`` says
where localization must point: the stage (``forward``, ``loss``, ``backward``,
``update``) and the layer.

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

from zoo.specs import (
    GELU_TANH,
    SYMMETRIC,
    Layer,
    ModelSpec,
    Param,
    input_of,
    padding_of,
    window_out,
)

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


def _params_of(spec: ModelSpec, kind: str) -> list[Param]:
    return [p for p in spec.params if p.kind == kind]


def _corrupt(
    kind: str, corrupt: Callable[[np.ndarray, Param], np.ndarray]
) -> Callable[[ModelSpec, Mapping[str, np.ndarray]], tuple[ModelSpec, Weights]]:
    """A weights fault: ``corrupt`` applied to every parameter of ``kind``."""
    return _corrupt_params(lambda spec: _params_of(spec, kind), corrupt)


def _corrupt_params(
    chosen: Callable[[ModelSpec], list[Param]],
    corrupt: Callable[[np.ndarray, Param], np.ndarray],
) -> Callable[[ModelSpec, Mapping[str, np.ndarray]], tuple[ModelSpec, Weights]]:
    """A weights fault: ``corrupt`` applied to the ``chosen`` parameters."""

    def inject(
        spec: ModelSpec, weights: Mapping[str, np.ndarray]
    ) -> tuple[ModelSpec, Weights]:
        names = {p.name for p in chosen(spec)}
        return spec, {
            p.name: corrupt(weights[p.name], p) if p.name in names else weights[p.name]
            for p in spec.params
        }

    return inject


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


def _conv_hw_swapped(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(1, 0, 2, 3))  # (kh,kw,..) -> (kw,kh,..)


def _lstm_if_swapped(a: np.ndarray, p: Param) -> np.ndarray:
    i, f, c, o = np.split(a, 4, axis=-1)
    return np.ascontiguousarray(np.concatenate([f, i, c, o], axis=-1))


def _first_layer(spec: ModelSpec, kind: str) -> Location:
    return Location("forward", _params_of(spec, kind)[0].layer)


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


def _first_same_conv(spec: ModelSpec) -> str:
    return next(
        layer.name
        for layer in spec.layers
        if layer.kind == "conv2d" and layer.padding == "same"
    )


def _valid_padding(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    return _layer_changed(spec, weights, _first_same_conv(spec), padding="valid")


def _layer_changed(
    spec: ModelSpec, weights: Mapping[str, np.ndarray], name: str, **changes: Any
) -> tuple[ModelSpec, Weights]:
    """``spec`` with layer ``name`` computed with ``changes`` (a padding, an
    activation, an epsilon), and the weights as they are."""
    layers = tuple(
        dataclasses.replace(layer, **changes) if layer.name == name else layer
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


_SWAPPED = {"tanh": "sigmoid", "sigmoid": "tanh"}


def _first_squashing(spec: ModelSpec) -> str:
    return next(layer.name for layer in spec.layers if layer.activation in _SWAPPED)


def _activation_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    wrong = _first_squashing(spec)
    swapped = _SWAPPED[spec.layer(wrong).activation or ""]
    return _layer_changed(spec, weights, wrong, activation=swapped)


def _asymmetric_same(layer: Layer, spec: ModelSpec) -> bool:
    """A 'same' convolution whose Keras padding puts more after than before
    and which a symmetric ``window // 2`` padding leaves the same size: the
    case where a hand-written ``padding=k // 2`` runs and is silently off."""
    if layer.kind != "conv2d" or layer.padding != "same":
        return False
    symmetric = dataclasses.replace(layer, padding=SYMMETRIC)
    sides = input_of(spec, layer.name)[:2]
    return any(padding_of(layer, n) != padding_of(symmetric, n) for n in sides) and all(
        window_out(layer, n) == window_out(symmetric, n) for n in sides
    )


def _first_asymmetric_same(spec: ModelSpec) -> str:
    return next(layer.name for layer in spec.layers if _asymmetric_same(layer, spec))


def _symmetric_padding(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    wrong = _first_asymmetric_same(spec)
    return _layer_changed(spec, weights, wrong, padding=SYMMETRIC)


def _heads_interleaved(a: np.ndarray, p: Param) -> np.ndarray:
    # A projection (F, heads * key_dim) split into heads as (key_dim, heads):
    # what a hand-written reshape gets wrong when it takes heads innermost.
    features, heads, key_dim = a.shape
    return np.ascontiguousarray(a.reshape(features, key_dim, heads).transpose(0, 2, 1))


def _gru_zr_swapped(a: np.ndarray, p: Param) -> np.ndarray:
    # PyTorch's nn.GRU keeps its gates as r, z, n; read as Keras' z, r, h.
    z, r, h = np.split(a, 3, axis=-1)
    return np.ascontiguousarray(np.concatenate([r, z, h], axis=-1))


def _ids_off_by_one(a: np.ndarray, p: Param) -> np.ndarray:
    # Token id t looks up row t + 1: a table indexed as if ids started at 0
    # where they start at 1 (or the padding row forgotten).
    return np.ascontiguousarray(np.roll(a, -1, axis=0))


def _kernel_flipped(a: np.ndarray, p: Param) -> np.ndarray:
    # A true convolution (the kernel reversed in time, as np.convolve has it)
    # where Keras, like every framework, computes a correlation.
    return np.ascontiguousarray(a[::-1])


def _first_attention(spec: ModelSpec) -> str:
    return next(layer.name for layer in spec.layers if layer.kind == "attention")


def _attention_unscaled(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # Scores q . k without Keras' 1 / sqrt(key_dim): what the correct pass
    # computes from a query projection sqrt(key_dim) times larger.
    wrong = _first_attention(spec)
    factor = np.float32(np.sqrt(spec.layer(wrong).size))
    query = (f"{wrong}/query/kernel", f"{wrong}/query/bias")
    return spec, {
        name: a * factor if name in query else a for name, a in weights.items()
    }


# PyTorch's nn.LayerNorm default, where Keras' LayerNormalization has 1e-3.
TORCH_LAYER_NORM_EPSILON = 1e-5


def _first_keras_epsilon(spec: ModelSpec) -> str:
    return next(
        layer.name
        for layer in spec.layers
        if layer.kind == "layer_norm" and layer.norm_epsilon != TORCH_LAYER_NORM_EPSILON
    )


def _layer_norm_epsilon(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    wrong = _first_keras_epsilon(spec)
    return _layer_changed(spec, weights, wrong, epsilon=TORCH_LAYER_NORM_EPSILON)


def _last_gelu(spec: ModelSpec) -> str:
    """The last GELU layer: a feed-forward one after a normalization, whose
    inputs are of unit size, where the approximation is 1e-3 off (on the
    small embeddings the position convolution sees it is exact to float32)."""
    return [layer.name for layer in spec.layers if layer.activation == "gelu"][-1]


def _gelu_tanh(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    return _layer_changed(spec, weights, _last_gelu(spec), activation=GELU_TANH)


def _first_batch_norm(spec: ModelSpec) -> str:
    return next(layer.name for layer in spec.layers if layer.kind == "batch_norm")


def _momentum_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # PyTorch's convention (new = (1 - m) * moving + m * batch, m = 0.1) read
    # as Keras' (new = m * moving + (1 - m) * batch, m = 0.99): the moving
    # statistics kept with the weight the batch should get.
    wrong = _first_batch_norm(spec)
    momentum = 1 - spec.layer(wrong).norm_momentum
    return _layer_changed(spec, weights, wrong, momentum=momentum)


def _adam_eps_inside_sqrt(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    workload = dataclasses.replace(spec.workload, epsilon_inside_sqrt=True)
    return dataclasses.replace(spec, workload=workload), dict(weights)


def _first_of(spec: ModelSpec, wanted: Callable[[Layer], bool]) -> str:
    return next(layer.name for layer in spec.layers if wanted(layer))


def _reversed_join(layer: Layer) -> bool:
    """A concatenate or subtract of two different outputs: reversing its
    inputs computes something else."""
    return layer.kind in ("concatenate", "subtract") and len(set(layer.inputs)) > 1


def _join_reversed(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    layer = spec.layer(_first_of(spec, _reversed_join))
    return _layer_changed(spec, weights, layer.name, inputs=layer.inputs[::-1])


def _own_slope(layer: Layer) -> bool:
    """A LeakyReLU or ELU layer with a slope of its own (not the default of
    the activation function of that name)."""
    return layer.kind == "activation" and bool(layer.slope)


def _slope_default(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    return _layer_changed(spec, weights, _first_of(spec, _own_slope), slope=0.0)


def _uneven_crop(layer: Layer) -> bool:
    t = layer.target
    return layer.kind == "cropping" and any(
        t[i] != t[i + 1] for i in range(0, len(t), 2)
    )


def _crop_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    layer = spec.layer(_first_of(spec, _uneven_crop))
    t = layer.target
    swapped = tuple(t[i + 1 - 2 * (i % 2)] for i in range(len(t)))
    return _layer_changed(spec, weights, layer.name, target=swapped)


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


def _directions_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    # A loader that reads backward_lstm's weights into the forward copy.
    name = _first_of(spec, lambda layer: layer.kind == "bidirectional")
    swapped = dict(weights)
    for p in spec.params:
        if p.layer == name and p.role.startswith("forward/"):
            other = p.name.replace("/forward/", "/backward/")
            swapped[p.name], swapped[other] = weights[other], weights[p.name]
    return spec, swapped


def _taps_unflipped(a: np.ndarray, p: Param) -> np.ndarray:
    # A transposed convolution written as a convolution of the dilated input
    # with the kernel as it is: its taps must be reversed in both axes.
    return np.ascontiguousarray(a[::-1, ::-1])


def _depth_order(a: np.ndarray, p: Param) -> np.ndarray:
    # Output channel k * C + c read as Keras' c * m + k: the (C, m) kernels
    # in multiplier-major order.
    kh, kw, channels, depth = a.shape
    return np.ascontiguousarray(
        a.transpose(0, 1, 3, 2).reshape(kh, kw, channels * depth).reshape(a.shape)
    )


def _recurrence_transposed(a: np.ndarray, p: Param) -> np.ndarray:
    # h @ U read as U @ h: PyTorch's (out, in) weight_hh taken as Keras' (in, out).
    return np.ascontiguousarray(a.T)


def _keyed_query(layer: Layer) -> bool:
    """A dot attention given a key of the query's shape: exchanging the
    two computes another layer of the same shape."""
    return layer.kind == "dot_attention" and len(layer.inputs) == 3


def _query_key_swapped(
    spec: ModelSpec, weights: Mapping[str, np.ndarray]
) -> tuple[ModelSpec, Weights]:
    layer = spec.layer(_first_of(spec, _keyed_query))
    query, value, key = layer.inputs
    return _layer_changed(spec, weights, layer.name, inputs=(key, value, query))


FAULTS: dict[str, Fault] = {
    f.name: f
    for f in (
        Fault(
            "unpermuted-flatten",
            "dense layer after flatten loaded with its rows in C,H,W order",
            lambda s: bool(_after_flatten(s)),
            lambda s: Location("forward", _after_flatten(s)[0].layer),
            _corrupt_params(_after_flatten, _unpermuted_flatten),
        ),
        Fault(
            "conv-hw-swapped",
            "convolution kernels loaded with height and width exchanged",
            lambda s: bool(_params_of(s, "conv2d")),
            lambda s: _first_layer(s, "conv2d"),
            _corrupt("conv2d", _conv_hw_swapped),
        ),
        Fault(
            "lstm-gates-swapped",
            "LSTM input kernel loaded with the input and forget gates exchanged",
            lambda s: bool(_params_of(s, "lstm_kernel")),
            lambda s: _first_layer(s, "lstm_kernel"),
            _corrupt("lstm_kernel", _lstm_if_swapped),
        ),
        Fault(
            "missing-bias",
            "the last hidden layer's bias left out of the forward pass",
            lambda s: True,
            lambda s: Location("forward", _last_hidden_bias(s).layer),
            _missing_bias,
        ),
        Fault(
            "valid-padding",
            "the first 'same' convolution computed with 'valid' padding",
            lambda s: any(
                layer.kind == "conv2d" and layer.padding == "same" for layer in s.layers
            ),
            lambda s: Location("forward", _first_same_conv(s)),
            _valid_padding,
        ),
        Fault(
            "activation-swapped",
            "the first tanh layer computed with sigmoid, or sigmoid with tanh",
            lambda s: any(layer.activation in _SWAPPED for layer in s.layers),
            lambda s: Location("forward", _first_squashing(s)),
            _activation_swapped,
        ),
        Fault(
            "same-padding-symmetric",
            "a 'same' convolution padded k//2 on both sides, not Keras' "
            "odd position after",
            lambda s: any(_asymmetric_same(layer, s) for layer in s.layers),
            lambda s: Location("forward", _first_asymmetric_same(s)),
            _symmetric_padding,
        ),
        Fault(
            "attention-heads-interleaved",
            "attention's query, key and value kernels split into heads as "
            "(key_dim, heads), not (heads, key_dim)",
            lambda s: bool(_params_of(s, "attention_kernel")),
            lambda s: _first_layer(s, "attention_kernel"),
            _corrupt("attention_kernel", _heads_interleaved),
        ),
        Fault(
            "attention-unscaled",
            "attention scores q . k without the 1 / sqrt(key_dim) scaling",
            lambda s: any(layer.kind == "attention" for layer in s.layers),
            lambda s: Location("forward", _first_attention(s)),
            _attention_unscaled,
        ),
        Fault(
            "gru-gates-swapped",
            "GRU input kernel loaded in PyTorch's gate order (r, z) for Keras' (z, r)",
            lambda s: bool(_params_of(s, "gru_kernel")),
            lambda s: _first_layer(s, "gru_kernel"),
            _corrupt("gru_kernel", _gru_zr_swapped),
        ),
        Fault(
            "layer-norm-epsilon",
            "layer normalization with PyTorch's default epsilon 1e-5 for Keras' 1e-3",
            lambda s: any(
                layer.kind == "layer_norm"
                and layer.norm_epsilon != TORCH_LAYER_NORM_EPSILON
                for layer in s.layers
            ),
            lambda s: Location("forward", _first_keras_epsilon(s)),
            _layer_norm_epsilon,
        ),
        Fault(
            "gelu-tanh",
            "the last GELU by its tanh approximation (jax.nn.gelu's default), "
            "not Keras' exact erf",
            lambda s: any(layer.activation == "gelu" for layer in s.layers),
            lambda s: Location("forward", _last_gelu(s)),
            _gelu_tanh,
        ),
        Fault(
            "embedding-off-by-one",
            "token id t looks up the embedding row of t + 1",
            lambda s: bool(_params_of(s, "embedding")),
            lambda s: _first_layer(s, "embedding"),
            _corrupt("embedding", _ids_off_by_one),
        ),
        Fault(
            "conv1d-kernel-flipped",
            "1-D convolution kernels reversed in time (a true convolution for "
            "Keras' correlation)",
            lambda s: bool(_params_of(s, "conv1d")),
            lambda s: _first_layer(s, "conv1d"),
            _corrupt("conv1d", _kernel_flipped),
        ),
        Fault(
            "batch-norm-momentum-swapped",
            "batch normalization's moving statistics updated with momentum and "
            "1 - momentum exchanged (PyTorch's convention for Keras')",
            lambda s: any(layer.kind == "batch_norm" for layer in s.layers),
            lambda s: Location("update", _first_batch_norm(s)),
            _momentum_swapped,
        ),
        Fault(
            "join-reversed",
            "a concatenate or subtract taking its inputs in the reverse order",
            lambda s: any(_reversed_join(layer) for layer in s.layers),
            lambda s: Location("forward", _first_of(s, _reversed_join)),
            _join_reversed,
        ),
        Fault(
            "slope-default",
            "a LeakyReLU or ELU layer computed with its activation function's "
            "default slope, not its own (LeakyReLU's 0.3 is not leaky_relu's 0.2)",
            lambda s: any(_own_slope(layer) for layer in s.layers),
            lambda s: Location("forward", _first_of(s, _own_slope)),
            _slope_default,
        ),
        Fault(
            "crop-swapped",
            "a cropping that cuts its before and after widths the wrong way round",
            lambda s: any(_uneven_crop(layer) for layer in s.layers),
            lambda s: Location("forward", _first_of(s, _uneven_crop)),
            _crop_swapped,
        ),
        Fault(
            "l2-halved",
            "an L2 regularizer's term as tf.nn.l2_loss computes it, sum(w ** 2) "
            "/ 2, not Keras' sum(w ** 2)",
            lambda s: any(l2 for _, _, l2 in s.penalties),
            lambda s: Location("loss", "loss"),
            _l2_halved,
        ),
        Fault(
            "directions-swapped",
            "a bidirectional layer's forward and backward weights exchanged",
            lambda s: any(layer.kind == "bidirectional" for layer in s.layers),
            lambda s: Location(
                "forward", _first_of(s, lambda layer: layer.kind == "bidirectional")
            ),
            _directions_swapped,
        ),
        Fault(
            "transpose-taps-unflipped",
            "a transposed convolution's kernel taps in the wrong spatial order",
            lambda s: bool(_params_of(s, "conv2d_transpose")),
            lambda s: _first_layer(s, "conv2d_transpose"),
            _corrupt("conv2d_transpose", _taps_unflipped),
        ),
        Fault(
            "depthwise-order",
            "a depthwise convolution's output channels in multiplier-major "
            "order (k * C + c, not Keras' c * m + k)",
            lambda s: any(p.kind == "depthwise" and p.shape[3] > 1 for p in s.params),
            lambda s: _first_layer(s, "depthwise"),
            _corrupt("depthwise", _depth_order),
        ),
        Fault(
            "recurrence-transposed",
            "a SimpleRNN's recurrent kernel transposed (PyTorch's weight_hh "
            "layout read as Keras')",
            lambda s: bool(_params_of(s, "simple_rnn_recurrent_kernel")),
            lambda s: _first_layer(s, "simple_rnn_recurrent_kernel"),
            _corrupt("simple_rnn_recurrent_kernel", _recurrence_transposed),
        ),
        Fault(
            "query-key-swapped",
            "a dot-product attention taking its query and key the wrong way round",
            lambda s: any(_keyed_query(layer) for layer in s.layers),
            lambda s: Location("forward", _first_of(s, _keyed_query)),
            _query_key_swapped,
        ),
        Fault(
            "adam-eps-inside-sqrt",
            "Adam with epsilon inside the square root: sqrt(v + eps)",
            lambda s: s.workload.optimizer == "adam",
            lambda s: Location("update", s.params[0].layer),
            _adam_eps_inside_sqrt,
        ),
    )
}


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
