"""Framework-free descriptions of the models: the four reference models and
any model a user brings (``zoo.user_models``).

This module imports nothing but the standard library, so every environment
(the MXNet one included, with NumPy 1.23 and no Keras) can read it.

A model is a plain sequence of layers.  From that sequence this module derives
every activation's shape (``layer_shapes``) and the canonical parameter list
(name, shape, kind) in Keras layout, which is the one vocabulary every path
uses to exchange weights and gradients:

- dense kernel ``(in, out)``, bias ``(out,)``;
- conv2d kernel ``(kh, kw, in, out)``, bias ``(out,)``;
- a ``flatten`` of images gives its features in Keras' ``H, W, C`` order in
  every framework (``native.layout``), so a dense kernel after it is a plain
  ``dense`` one; a dense layer right after it carries the ``(H, W, C)`` it
  takes (``Param.feature_shape``), which a deliberate layout fault reads;
- LSTM kernel ``(in, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)``, gates
  in the order ``i, f, c, o``;
- conv1d kernel ``(k, in, out)``; embeddings ``(vocab, dim)``;
- GRU kernel ``(in, 3u)``, recurrent kernel ``(u, 3u)``, bias ``(2, 3u)`` (input
  bias, recurrent bias: Keras' ``reset_after=True``), gates ``z, r, h``;
- layer normalization ``gamma`` and ``beta`` ``(F,)``; batch normalization
  the same over the last (channel) axis, and its ``moving_mean`` and
  ``moving_variance`` ``(F,)``: state, not trained (``STATE_KINDS``), which a
  training step sets from the batch as Keras does and which are compared
  after each step like the weights;
- multi-head attention as Keras' ``EinsumDense`` sublayers: ``query``, ``key``
  and ``value`` kernels ``(F, heads, key_dim)`` with biases ``(heads,
  key_dim)``, the output kernel ``(heads, key_dim, F)`` with bias ``(F,)``.

A model is a small graph: each layer takes the previous layer's output, or
the outputs of the earlier layers its ``inputs`` names (``add`` takes two:
a residual connection).  Self-attention takes one input as query, key and
value.

The layer options are each kind's own record, named as Keras names the
arguments (``zoo.kinds``; ``LAYER_OPTIONS`` lists which kind takes which):
convolutions and pools take ``strides`` and ``padding`` (``valid`` or
``same``, Keras' rule: ``same_padding``), dense and convolution layers an
``activation`` (``ACTIVATIONS``), an LSTM ``return_sequences``; a dense layer
on a sequence ``(T, F)`` applies to its last axis, as Keras applies it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace

from zoo import losses
from zoo.kinds import KINDS as KIND_RECORDS
from zoo.kinds.base import (
    ACTIVATIONS,
    BATCH_NORM_MOMENTUM,
    GELU_TANH,
    INPUT,
    LAYER_NORM_EPSILON,
    PADDINGS,
    SLOPED,
    STATE_KINDS,
    Example,
    Layer,
    Mask,
    Noise,
    Param,
    Shape,
    padding_of,
    same_padding,
    window_out,
)
from zoo.kinds.global_pool import fixes_length
from zoo.losses import DEFAULT as DEFAULT_OBJECTIVE
from zoo.losses import Heads, Objective
from zoo.optimizers import OPTIMIZERS as OPTIMIZER_RECORDS
from zoo.optimizers import Schedule

__all__ = [
    "ACTIVATIONS",
    "BATCH_NORM_MOMENTUM",
    "GELU_TANH",
    "INPUT",
    "LAYER_NORM_EPSILON",
    "PADDINGS",
    "SLOPED",
    "STATE_KINDS",
    "Layer",
    "Param",
    "padding_of",
    "same_padding",
    "window_out",
]

# The layer kinds a model is made of (``zoo.kinds``: one module per kind
# holds all its facts), and the options each takes beyond its size;
# ``zoo.user_models`` reads a table or a Keras file into these.
LAYER_KINDS = tuple(KIND_RECORDS)
LAYER_OPTIONS: dict[str, tuple[str, ...]] = {
    name: tuple(f.name for f in fields(kind.options))
    for name, kind in KIND_RECORDS.items()
}
# Kinds that compute differently in a training step than in inference: a
# batch normalization (batch statistics, moving ones updated) and dropout.
TRAINING_KINDS = tuple(n for n, k in KIND_RECORDS.items() if k.trains_differently)
# Parameters whose gradient is zero in exact arithmetic, by role, each with
# the role of the same layer's parameter whose gradient (and value after a
# training step) sets the scale its rounding noise is judged on
# (``equivalence.compare.quantity_error``): an attention layer's key bias adds
# one number to all of a query's scores, which the softmax over them ignores.
ZERO_GRADIENT_ROLES = {"key/bias": "key/kernel"}
# The optimizers a workload may name: every native framework's common.py
# writes each out with Keras' formulas (``zoo.optimizers``;
# ``native.OPTIMIZERS`` is this).
OPTIMIZERS = tuple(OPTIMIZER_RECORDS)


# Optimizer options a workload's repr leaves out at their default.
_QUIET_OPTIONS = (
    "amsgrad",
    "momentum",
    "nesterov",
    "rho",
    "centered",
    "initial_accumulator_value",
    "weight_decay",
    "clipnorm",
    "global_clipnorm",
    "clipvalue",
    "schedule",
    "losses",
    "loss_weights",
    "label_smoothing",
    "gamma",
    "alpha",
)


@dataclass(frozen=True)
class Workload:
    """Training hyperparameters of a model's default workload.

    ``optimizer`` is one of ``zoo.optimizers.OPTIMIZERS`` (``sgd``, ``adam``,
    ``adamw``, ``rmsprop``, ``adagrad``, ``nadam``), its options the fields
    from ``beta_1`` to ``clipvalue``, and ``schedule`` a learning-rate
    schedule (``zoo.optimizers.Schedule``; ``None``: the rate is constant),
    Keras' defaults unless a model sets
    them (an option its optimizer does not take stays at its default and is
    never read); ``zoo.optimizers`` has the formulas every hand-written
    optimizer follows.
    ``loss`` and ``from_logits`` name the loss (``zoo.losses``; the default
    is the mean sparse categorical cross-entropy over the outputs taken as
    logits), with ``label_smoothing``, ``gamma`` and ``alpha`` for the
    losses that take them; ``objective`` holds them all.

    ``epsilon_inside_sqrt`` places Adam's epsilon: ``False`` is Keras' Adam,
    which divides by ``sqrt(v) + epsilon``; ``True`` is the ``sqrt(v + epsilon)``
    variant some implementations use.  Only the native paths read it (the
    ``adam-eps-inside-sqrt`` fault of ``native.faults`` sets it); Keras' Adam
    is always ``False``.

    ``dataset`` names the real data of ``zoo.datasets`` (``mnist``,
    ``cifar10``, ``imdb``), or ``user`` for a user's model, whose real data is
    the user's own ``.npz`` file.
    """

    dataset: str
    optimizer: str
    learning_rate: float
    batch_size: int
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7
    epsilon_inside_sqrt: bool = False
    loss: str = DEFAULT_OBJECTIVE.loss
    from_logits: bool = DEFAULT_OBJECTIVE.from_logits
    amsgrad: bool = False
    momentum: float = 0.0
    nesterov: bool = False
    rho: float = 0.9
    centered: bool = False
    initial_accumulator_value: float = 0.1
    weight_decay: float = 0.0
    clipnorm: float = 0.0
    global_clipnorm: float = 0.0
    clipvalue: float = 0.0
    schedule: Schedule | None = None
    # A model with several outputs (``ModelSpec.outputs``): a loss per output
    # in their order (empty: ``loss`` for every output, as Keras applies one
    # loss given for all) and Keras' ``loss_weights`` (empty: 1 each).
    losses: tuple[Objective, ...] = ()
    loss_weights: tuple[float, ...] = ()
    # The options of ``loss`` that take them (``zoo.losses.Objective``).
    label_smoothing: float = 0.0
    gamma: float = 2.0
    alpha: float | None = None

    @property
    def objective(self) -> Objective:
        return Objective(
            self.loss, self.from_logits, self.label_smoothing, self.gamma, self.alpha
        )

    def __repr__(self) -> str:
        # The loss shows only when it is not the default, and an optimizer's
        # option only when it is not Keras' default, so the verdict keys of
        # models that train on the defaults (``harness.core.gate``) stay.
        quiet = ("loss", "from_logits")
        shown = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if (f.name not in quiet or self.objective != DEFAULT_OBJECTIVE)
            and (f.name not in _QUIET_OPTIONS or getattr(self, f.name) != f.default)
        ]
        return f"Workload({', '.join(shown)})"


@dataclass(frozen=True)
class ModelInput:
    """An input of a model beyond its first (``INPUT``, of ``input_shape``):
    its name, which a layer's ``inputs`` gives to take it, and its shape
    without the batch."""

    name: str
    shape: Shape


@dataclass(frozen=True)
class Head:
    """One output of a model: the layer that gives it, the loss it trains
    on and that loss's weight in the total (``Workload.loss_weights``), and
    its shape per example (a row, or a row per step or pixel)."""

    layer: str
    objective: Objective
    weight: float
    shape: Shape

    @property
    def positions(self) -> Shape:
        """Its positions per example, each a row with a target of its own:
        ``()`` for one row, ``(T,)`` per step, ``(H, W)`` per pixel."""
        return self.shape[:-1]


# ModelSpec fields its repr leaves out at their default, so the verdict keys
# of models with one input and one output (``harness.core.gate``) stay.
_QUIET_SPEC = ("more_inputs", "outputs")


@dataclass(frozen=True)
class ModelSpec:
    """Everything a path needs to build and feed one model, with no framework.

    A model takes one input (``input_shape``, named ``INPUT``) or several
    (``more_inputs`` after it), and gives the output of its last layer, or
    of the layers ``outputs`` names, in that order (``heads``: each with its
    loss)."""

    name: str
    input_shape: tuple[int, ...]
    classes: int
    layers: tuple[Layer, ...]
    workload: Workload
    # The family a model's trajectory tolerances are set for
    # (``equivalence.compare``); empty means the model's own name.  Variants
    # share their family's.
    module: str = ""
    # A file of fixed canonical weights (a user's ``.keras`` model, through
    # ``zoo.user_models``); empty: weights are drawn from a seed (``zoo.weights``).
    weights: str = field(default="", repr=False)
    more_inputs: tuple[ModelInput, ...] = ()
    outputs: tuple[str, ...] = ()  # empty: the last layer's output
    params: tuple[Param, ...] = field(init=False)
    heads: tuple[Head, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", _derive_params(self))
        object.__setattr__(self, "module", self.module or self.name)

    def __repr__(self) -> str:
        shown = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.repr and (f.name not in _QUIET_SPEC or getattr(self, f.name))
        ]
        return f"ModelSpec({', '.join(shown)})"

    @property
    def input_names(self) -> tuple[str, ...]:
        """The names of the model's inputs, in the order it takes them."""
        return (INPUT, *(i.name for i in self.more_inputs))

    @property
    def input_shapes(self) -> tuple[Shape, ...]:
        """The shapes of the model's inputs (no batch), in order."""
        return (self.input_shape, *(i.shape for i in self.more_inputs))

    @property
    def several_outputs(self) -> bool:
        """Whether the model has more than one output (``heads``)."""
        return len(self.heads) > 1

    @property
    def one_to_one(self) -> bool:
        """Whether the model takes one input and gives one output: its
        batches, outputs and losses are single arrays, not packed
        (``zoo.packing``)."""
        return not self.more_inputs and not self.several_outputs

    @property
    def objective(self) -> Objective | Heads:
        """What every path's loss takes: the workload's objective for one
        output, ``Heads`` (each output's loss and weight) for several."""
        if not self.several_outputs:
            return self.workload.objective
        return Heads(
            tuple(h.objective for h in self.heads),
            tuple(h.weight for h in self.heads),
        )

    def input_tokens(self, name: str) -> int:
        """How many token ids input ``name`` draws from when embeddings take
        it (the smallest table's), 0 when it is floats."""
        tables = [
            layer.options.input_dim
            for i, layer in enumerate(self.layers)
            if layer.kind == "embedding"
            and (
                name in layer.inputs or (i == 0 and not layer.inputs and name == INPUT)
            )
        ]
        return min(tables, default=0)

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")

    @property
    def penalties(self) -> tuple[tuple[str, float, float], ...]:
        """Each regularized parameter with its L1 and L2 factors: the loss a
        training step minimizes adds ``l1 * sum(|w|) + l2 * sum(w ** 2)`` for
        each (Keras' ``L1L2``; no 1/2), as Keras adds a model's ``losses``."""
        return tuple(
            (f"{layer.name}/{role}", l1, l2)
            for layer in self.layers
            for role, l1, l2 in layer.regularize
        )

    def trainable_names(self) -> tuple[str, ...]:
        """The parameters an optimizer trains: all but ``STATE_KINDS`` and
        those of frozen layers (``Param.trainable``)."""
        return tuple(p.name for p in self.params if p.trainable)

    def frozen_names(self) -> tuple[str, ...]:
        """The weights of frozen layers (Keras' ``trainable=False``): held as
        they are in a training step, with no gradient taken."""
        return tuple(p.name for p in self.params if p.frozen)

    @property
    def trains_differently(self) -> bool:
        """Whether a training step's forward pass differs from inference's
        (``TRAINING_KINDS``, or a layer that draws noise: a recurrent layer's
        dropout, ``draws_noise``)."""
        return any(
            layer.kind in TRAINING_KINDS or draws_noise(layer) for layer in self.layers
        )

    def noisy_layers(self) -> tuple[Layer, ...]:
        """The layers that draw noise in a training step (``Kind.noise``: a
        dropout at a nonzero rate, Gaussian noise of a nonzero deviation)."""
        return tuple(layer for layer in self.layers if draws_noise(layer))

    @property
    def noisy(self) -> bool:
        """Whether a layer draws noise in a training step."""
        return bool(self.noisy_layers())

    def noise_trained(self) -> tuple[str, ...]:
        """Parameters whose gradient in a training step is zero in exact
        arithmetic: an attention layer's key bias (measured: 2e-19 in float64,
        where the query's is 1.5e-4), and a per-channel shift (``Kind.shift``:
        the bias of a dense or convolution layer without an activation, a
        batch normalization's beta) whose output only batch normalizations take,
        directly or through layers that carry a per-channel constant on
        (``Kind.carries_shift``: residual adds, dense layers, convolutions that
        pad nothing, dropout; the batch mean removes it). Their steps are
        rounding noise in every run, float64's too, and Adam makes each a full
        step of either sign, so their values after training steps are not
        compared (their gradient in inference, where the moving mean leaves
        it, still is), nor the moving means of the normalizations they reach,
        which keep that noise (moving variances do not). Measured (issue 60):
        a batch normalization added into a residual sum that the next one
        normalizes, its beta 5.4e-4 off after one Adam step on TensorFlow and
        3e-5 on PyTorch and JAX, by luck, from the same zero; then the next
        one's moving mean.  Issue 79: Keras Applications' EfficientNet blocks,
        each projection's beta reaching batch normalizations only through a
        residual add and 1x1 convolutions, every path's value 1.0 off after
        one step."""
        takers: dict[str, list[Layer]] = {}
        for layer in self.layers:
            for source in self.sources(layer.name):
                takers.setdefault(source, []).append(layer)

        def normalizers(name: str) -> set[str] | None:
            """The batch normalizations ``name``'s output reaches through
            layers that carry a shift, if it reaches nothing else."""
            reached: set[str] = set()
            for taker in takers.get(name, []):
                if taker.kind == "batch_norm":
                    reached.add(taker.name)
                    continue
                further = None
                carries = KIND_RECORDS[taker.kind].carries_shift(taker)
                if carries and taker.activation is None:
                    further = normalizers(taker.name)
                if further is None:
                    return None
                reached |= further
            return reached or None

        noise: list[str] = []
        names = {p.name for p in self.params}
        for layer in self.layers:
            reached = normalizers(layer.name)
            shift = KIND_RECORDS[layer.kind].shift  # a bias, or beta
            shifted = shift is not None and f"{layer.name}/{shift}" in names
            if shifted and layer.activation is None and reached:
                noise.append(f"{layer.name}/{shift}")
                # the noise moves the batch means those normalizations keep
                noise += [f"{n}/moving_mean" for n in sorted(reached)]
            if layer.kind == "attention":
                # A key's bias adds q . b to every score of a query's row,
                # which the softmax over the row removes.
                noise.append(f"{layer.name}/key/bias")
        return tuple(dict.fromkeys(noise))

    def tapped_layers(self) -> tuple[str, ...]:
        """Layers whose outputs are compared when localizing a divergence: all
        but ``flatten``, which only reorders what the layer before it gave
        (compared already; the next layer's output is compared after it)."""
        return tuple(layer.name for layer in self.layers if layer.kind != "flatten")

    def layer(self, name: str) -> Layer:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"{self.name} has no layer {name!r}")

    @property
    def free_length(self) -> bool:
        """Whether the model takes sequences of any length: its input is
        ``(steps, features)`` and no layer fixes how many (a ``flatten``,
        ``reshape`` or ``permute``: ``(28, 28)`` images flattened into a
        dense layer take 28 rows and no other; a global pool over each
        step's features gives one value per step).  Token ids ``(T,)`` are
        checked at their own length only, as the transformer always was."""
        fixing = ("flatten", "reshape", "permute")
        return (
            not self.more_inputs
            and len(self.input_shape) == 2
            and all(
                layer.kind not in fixing and not fixes_length(layer)
                for layer in self.layers
            )
        )

    @property
    def tokens(self) -> int:
        """How many token ids the model's input draws from, when it takes
        token ids (embeddings take it: the smallest table's); 0 when it takes
        floats."""
        tables = [
            layer.options.input_dim
            for layer in self.layers
            if layer.kind == "embedding"
        ]
        return min(tables, default=0)

    def sources(self, name: str) -> tuple[str, ...]:
        """The layers whose outputs layer ``name`` takes: its ``inputs``, or
        the layer before it (``()`` for the first, which takes the input)."""
        names = [layer.name for layer in self.layers]
        i = names.index(name)
        given = self.layers[i].inputs
        return given if given else tuple(names[i - 1 : i])


# What a model's description may imply, float32 (``_check_size``): its
# parameters, one example's activations (every layer's output, an attention
# layer's scores), and those at its workload's batch.  VGG16, the largest
# reference model, has 0.06 GiB of parameters and 0.001 GiB of activations
# per example.
MAX_PARAM_BYTES = 2 << 30
MAX_SAMPLE_BYTES = 256 << 20
MAX_BATCH_BYTES = 16 << 30


# --- shapes -----------------------------------------------------------------


def output_shape(layer: Layer, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape (without the batch) ``layer`` gives for the shapes of what it
    takes; a ValueError in one sentence when the layer cannot take them."""
    kind = KIND_RECORDS.get(layer.kind)
    if kind is None:
        raise ValueError(
            f"layer {layer.name!r} has unknown kind {layer.kind!r}; known: "
            f"{', '.join(LAYER_KINDS)}"
        )
    return kind.shape(layer, shapes)


def _walk(
    spec: ModelSpec, input_shape: tuple[int, ...] | None, until: str | None = None
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each layer's (input shape, output shape) in order, stopping before
    layer ``until`` (whose input shape is then the last entry's second).  A
    merge's input shape is its first input's."""
    return [
        (given[0], out)
        for given, out in _walk_all(
            spec.layers, spec.input_shape, input_shape, until, spec.more_inputs
        )
    ]


def _walk_all(
    layers: tuple[Layer, ...],
    model_input: tuple[int, ...],
    input_shape: tuple[int, ...] | None = None,
    until: str | None = None,
    more_inputs: tuple[ModelInput, ...] = (),
) -> list[tuple[tuple[Shape, ...], Shape]]:
    """Each layer's (shapes of what it takes, output shape) in order."""
    shape = model_input if input_shape is None else input_shape
    outputs: dict[str, tuple[int, ...]] = {INPUT: shape}
    outputs.update((i.name, i.shape) for i in more_inputs)
    shapes: list[tuple[tuple[Shape, ...], Shape]] = []
    for layer in layers:
        given = tuple(outputs[n] for n in layer.inputs) if layer.inputs else (shape,)
        if layer.name == until:
            return [*shapes, ((given[0],), given[0])]
        out = output_shape(layer, *given)
        shapes.append((given, out))
        outputs[layer.name] = shape = out
    return shapes


def layer_outputs(
    layers: tuple[Layer, ...],
    input_shape: tuple[int, ...],
    more_inputs: tuple[ModelInput, ...] = (),
) -> dict[str, Shape]:
    """Each layer's output shape (no batch) by name, for a model of
    ``layers`` taking inputs of ``input_shape`` and ``more_inputs``; a
    ValueError where a layer cannot take what it is given."""
    walked = _walk_all(layers, input_shape, None, None, more_inputs)
    return {layer.name: out for layer, (_, out) in zip(layers, walked, strict=True)}


def final_shape(
    layers: tuple[Layer, ...], input_shape: tuple[int, ...]
) -> tuple[int, ...]:
    """The shape (no batch) ``layers`` end in for ``input_shape``: what a
    model of them outputs per example."""
    walked = _walk_all(layers, input_shape)
    return walked[-1][1] if walked else input_shape


def layer_shapes(
    spec: ModelSpec, input_shape: tuple[int, ...] | None = None
) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """Each layer's (input shape, output shape), without the batch, in order;
    ``input_shape`` overrides the spec's (a shorter sequence, say).  A
    merge's input shape is its first input's (``layer_inputs`` has all)."""
    return tuple(_walk(spec, input_shape))


def layer_inputs(
    spec: ModelSpec, input_shape: tuple[int, ...] | None = None
) -> tuple[tuple[tuple[Shape, ...], Shape], ...]:
    """Each layer's (shapes of everything it takes, output shape), in order."""
    return tuple(
        _walk_all(spec.layers, spec.input_shape, input_shape, None, spec.more_inputs)
    )


def input_of(spec: ModelSpec, name: str) -> tuple[int, ...]:
    """The input shape of layer ``name`` (without the batch), from the layers
    before it only (a deliberately faulty spec may not fit after it)."""
    spec.layer(name)  # a KeyError for a name the spec lacks
    return _walk(spec, None, until=name)[-1][1]


# The least value of a whole-number option, by Keras' name (each name means
# one thing wherever a kind's record has it: ``zoo.kinds``).
AT_LEAST = {
    "units": 1,
    "filters": 1,
    "kernel_size": 1,
    "strides": 1,
    "pool_size": 1,
    "key_dim": 1,
    "num_heads": 1,
    "output_dim": 1,
    "input_dim": 2,
    "depth_multiplier": 1,
}
# The range of a number option, by name: (the test, what it must be).
IN_RANGE: dict[str, tuple[Callable[[float], bool], str]] = {
    "epsilon": (lambda v: 0 < v < 1, "above 0 and below 1"),
    "momentum": (lambda v: 0 < v < 1, "above 0 and below 1"),
    "rate": (lambda v: 0 <= v < 1, "at least 0 and below 1"),
    "slope": (lambda v: 0 < v < 1e6, "above 0"),
    "scale": (math.isfinite, "finite"),
    "offset": (math.isfinite, "finite"),
}


def _check_options(layer: Layer) -> None:
    """A ValueError in one sentence unless ``layer``'s name and options are
    ones the tool computes (the kind's own shape rule checks the rest)."""
    n, o = layer.name, layer.options
    kind = KIND_RECORDS[layer.kind]
    if not n or "/" in n:
        raise ValueError(f"layer name {n!r} must be non-empty and without '/'")
    if n == INPUT:
        raise ValueError(
            f"no layer may be named {INPUT!r}: a layer's inputs name the model's "
            "input so"
        )
    if layer.activation not in ACTIVATIONS and layer.activation != GELU_TANH:
        known = ", ".join(a or "linear" for a in ACTIVATIONS)
        raise ValueError(
            f"layer {n!r} has activation {layer.activation!r}; known: {known}"
        )
    padding = getattr(o, "padding", None)
    if isinstance(padding, str) and padding not in kind.paddings:
        raise ValueError(
            f"layer {n!r} has padding {padding!r}; use {' or '.join(kind.paddings)}"
        )
    if layer.mistake not in ("", *(m.name for m in kind.mistakes)):
        raise ValueError(
            f"{layer.kind} layer {n!r} computes mistake {layer.mistake!r}, "
            "which is no mistake of its kind"
        )
    for option, least in AT_LEAST.items():
        value = getattr(o, option, None)
        if value is not None and value < least:
            raise ValueError(
                f"{layer.kind} layer {n!r} needs {option} of at least {least}, "
                f"not {value}"
            )
    for option, (within, what) in IN_RANGE.items():
        value = getattr(o, option, None)
        if value is not None and not within(value):
            raise ValueError(f"{layer.kind} layer {n!r} needs {option} {what}")
    if getattr(o, "slope", None) is not None and layer.activation not in SLOPED:
        raise ValueError(
            f"layer {n!r} has a slope, which only {' and '.join(SLOPED)} take"
        )
    if layer.regularize and not kind.regularized:
        raise ValueError(
            f"{layer.kind} layer {n!r} takes no regularize: Keras gives it no "
            "weight regularizer"
        )


def _check_graph(spec: ModelSpec) -> None:
    """Every layer takes what exists before it (the model's inputs are
    ``INPUT`` and ``more_inputs``), a merge two or more outputs (a
    ``subtract`` two), every other kind one; an embedding takes a model's
    input (the token ids)."""
    _check_inputs(spec)
    seen: set[str] = set(spec.input_names)
    for i, layer in enumerate(spec.layers):
        n = layer.name
        unknown = [name for name in layer.inputs if name not in seen]
        if unknown:
            raise ValueError(
                f"layer {n!r} takes {', '.join(unknown)}, which no earlier layer "
                "of the model is"
            )
        takes, count = KIND_RECORDS[layer.kind].takes, len(layer.inputs)
        wrong = (
            count != takes if takes > 1 else (count < 2 if takes == 0 else count > 1)
        )
        if wrong:
            wants = {0: "sums two or more", 2: "takes exactly two"}.get(takes)
            what = f"{'an' if layer.kind == 'add' else 'a'} {layer.kind} layer"
            raise ValueError(
                f"layer {n!r} takes {count or 'the previous'} layer output(s): "
                + (
                    f"{what} {wants} earlier layers' outputs (inputs)"
                    if wants
                    else "a merge takes two or more, every other kind takes one"
                )
            )
        takes_input = (i == 0 and not layer.inputs) or (
            len(layer.inputs) == 1 and layer.inputs[0] in spec.input_names
        )
        if layer.kind == "embedding" and not takes_input:
            raise ValueError(
                f"embedding layer {n!r} must take the model's input: it takes "
                "the token ids"
            )
        seen.add(n)
    for name in spec.input_names:
        readers = [
            layer
            for i, layer in enumerate(spec.layers)
            if name in layer.inputs or (name == INPUT and i == 0 and not layer.inputs)
        ]
        embeds = [layer.kind == "embedding" for layer in readers]
        if any(embeds) and not all(embeds):
            what = f"{spec.name}'s input" + (f" {name!r}" if spec.more_inputs else "")
            raise ValueError(
                f"{what} is token ids for its embeddings and floats for "
                "its other layers that take it; it must be one or the other"
            )
        if not readers:
            raise ValueError(
                f"{spec.name}'s input {name!r} feeds no layer; feed it to one "
                "or remove it"
            )
    _check_used(spec)


def _check_inputs(spec: ModelSpec) -> None:
    """The model's inputs and outputs are named once each: inputs apart from
    every layer, outputs among the layers."""
    names = spec.input_names
    layers = {layer.name for layer in spec.layers}
    clash = [n for n in names if n in layers] + [
        n for i, n in enumerate(names) if n in names[:i]
    ]
    if clash:
        raise ValueError(
            f"{spec.name} names {clash[0]!r} twice among its inputs and layers; "
            "each needs a name of its own"
        )
    for i in spec.more_inputs:
        if not i.shape or any(not isinstance(n, int) or n < 1 for n in i.shape):
            raise ValueError(
                f"{spec.name}'s input {i.name!r} has shape {i.shape}; an input "
                "needs one or more sizes of at least 1"
            )
    unknown = [n for n in spec.outputs if n not in layers]
    if unknown or len(set(spec.outputs)) != len(spec.outputs):
        what = f"{unknown[0]!r}, which is no layer" if unknown else "a layer twice"
        raise ValueError(f"{spec.name}'s outputs name {what}")


def _check_used(spec: ModelSpec) -> None:
    """Every layer but the model's outputs (its last) feeds a later one: a
    layer whose output no layer takes is not part of the model (Keras'
    functional model leaves it out, and its parameters have no gradient),
    so it is refused."""
    taken: set[str] = set(output_names(spec))
    for before, layer in zip(spec.layers, spec.layers[1:], strict=False):
        taken.update(layer.inputs or (before.name,))
    unused = [layer.name for layer in spec.layers if layer.name not in taken]
    if unused:
        raise ValueError(
            f"layer {unused[0]!r} feeds no later layer, so it is not part of the "
            "model; remove it or feed it to a later layer"
        )


def _check_penalties(spec: ModelSpec, params: list[Param]) -> None:
    """A regularized role is a trained parameter of its layer, penalized
    once, by factors at least 0."""
    trained = {p.name for p in params if p.trainable}
    seen: set[str] = set()
    for name, l1, l2 in spec.penalties:
        layer = name.split("/", 1)[0]
        if name not in trained or name in seen:
            raise ValueError(
                f"layer {layer!r} regularizes {name.split('/', 1)[1]!r}, which is "
                "not one of its trained parameters or is regularized twice"
            )
        if not (0 <= l1 < 1e6 and 0 <= l2 < 1e6):
            raise ValueError(f"layer {layer!r} needs L1 and L2 factors of at least 0")
        seen.add(name)


# The ranks of output (no batch) a loss is computed over: one row of
# outputs per example, a row per step of a sequence (a tagger's or a
# forecaster's), or a row per pixel of an image (a segmentation's classes,
# an autoencoder's channels); each position's loss as a row's, their mean
# over the batch and the positions as Keras takes it.
OUTPUT_RANKS = (1, 2, 3)


def not_one_row(model: str, final: tuple[int, ...]) -> str:
    """Why a model ending in ``final`` (not ``OUTPUT_RANKS``) is refused."""
    return (
        f"{model} ends in shape {final}; the tool computes a loss over a row of "
        "outputs per example, per step of a sequence or per pixel of an image"
    )


def output_positions(
    spec: ModelSpec, input_shape: tuple[int, ...] | None = None
) -> tuple[int, ...]:
    """The positions of a model's (first) output per example, each a row of
    ``classes`` outputs with a target of its own: ``()`` for one row,
    ``(T,)`` for a row per step, ``(H, W)`` per pixel (``input_shape``
    overrides the spec's: a shorter sequence)."""
    if input_shape is None or input_shape == spec.input_shape:
        return spec.heads[0].positions
    return final_shape(spec.layers, input_shape)[:-1]


def output_names(spec: ModelSpec) -> tuple[str, ...]:
    """The layers whose outputs the model gives, in order: ``outputs``, or
    its last layer."""
    return spec.outputs or (spec.layers[-1].name,) if spec.layers else spec.outputs


def _heads(
    spec: ModelSpec, walked: list[tuple[tuple[Shape, ...], Shape]]
) -> tuple[Head, ...]:
    """Each output with its loss, weight and shape, checked: an output of a
    rank the loss is computed over, the first ``classes`` wide, a loss per
    output that its width can train on."""
    shapes = {
        layer.name: out for layer, (_, out) in zip(spec.layers, walked, strict=True)
    }
    names = output_names(spec) or ("",)  # no layers: the input is the output
    work = spec.workload
    objectives = work.losses or (work.objective,) * len(names)
    weights = work.loss_weights or (1.0,) * len(names)
    if len(objectives) != len(names) or len(weights) != len(names):
        raise ValueError(
            f"{spec.name} gives {len(names)} output(s) and its workload names "
            f"{len(objectives)} loss(es) and {len(weights)} loss weight(s); it "
            "needs one of each per output"
        )
    heads = []
    for i, (name, objective, weight) in enumerate(
        zip(names, objectives, weights, strict=True)
    ):
        final = shapes.get(name, spec.input_shape)
        what = spec.name if len(names) == 1 else f"{spec.name}'s output {name!r}"
        if len(final) not in OUTPUT_RANKS:
            raise ValueError(not_one_row(what, final))
        if i == 0 and final[-1] != spec.classes:
            raise ValueError(
                f"{what} ends in shape {final} but says it gives "
                f"{spec.classes} outputs per example"
            )
        if not (math.isfinite(weight) and weight >= 0):
            raise ValueError(f"{what}'s loss weight is {weight}; it must be at least 0")
        losses.check(objective, final[-1], what)
        if name:  # a model of no layers gives its (any) input
            losses.check_outputs(objective, spec.layer(name).activation, what)
        heads.append(Head(name, objective, float(weight), final))
    return tuple(heads)


def _derive_params(spec: ModelSpec) -> tuple[Param, ...]:
    """Walk the layers, tracking the activation shapes, and list the
    parameters each kind has (``zoo.kinds``)."""
    names = [layer.name for layer in spec.layers]
    if len(set(names)) != len(names):
        raise ValueError(f"{spec.name} names a layer twice: {names}")
    params: list[Param] = []
    for layer in spec.layers:
        _check_options(layer)
    _check_graph(spec)
    # The (H, W, C) a flatten of images had, by layer name: a dense layer
    # right after it carries it (``Param.feature_shape``).
    images: dict[str, tuple[int, int, int]] = {}
    walked = layer_inputs(spec)
    for layer, (given, _) in zip(spec.layers, walked, strict=True):
        n = layer.name
        source = spec.sources(n)
        flattened_from = images.get(source[0]) if source else None
        found = KIND_RECORDS[layer.kind].params(layer, given)
        if layer.kind == "dense" and flattened_from:
            found[0] = replace(found[0], feature_shape=flattened_from)
        if not layer.trainable:
            found = [replace(p, frozen=True) for p in found]
        params += found
        if layer.kind == "flatten" and len(given[0]) == 3:
            images[n] = (given[0][0], given[0][1], given[0][2])
    _check_penalties(spec, params)
    object.__setattr__(spec, "heads", _heads(spec, list(walked)))
    _check_size(spec, params)
    return tuple(params)


def _check_size(spec: ModelSpec, params: list[Param]) -> None:
    """A ValueError in one sentence when the model's description implies
    more memory than the tool takes (``MAX_PARAM_BYTES``,
    ``MAX_SAMPLE_BYTES``, ``MAX_BATCH_BYTES``, float32): computed from the
    shapes alone, before any weight is drawn or any Keras variable built."""
    count = sum(math.prod(p.shape) for p in params)
    if count * 4 > MAX_PARAM_BYTES:
        raise ValueError(
            f"{spec.name} has {count:,} parameters ({_gib(count * 4)} in float32); "
            f"the tool takes models of at most {_gib(MAX_PARAM_BYTES)} of them"
        )
    values = sum(math.prod(shape) for shape in spec.input_shapes)
    for layer, (shape, out) in zip(spec.layers, layer_shapes(spec), strict=True):
        values += math.prod(out)
        if layer.kind == "attention":  # every head's scores and weights
            values += 2 * layer.options.num_heads * shape[0] * shape[0]
    if values * 4 > MAX_SAMPLE_BYTES:
        raise ValueError(
            f"{spec.name}'s activations take {_gib(values * 4)} per example; the "
            f"tool takes at most {_gib(MAX_SAMPLE_BYTES)} (a smaller input or "
            "fewer units)"
        )
    batch = spec.workload.batch_size
    if values * 4 * batch > MAX_BATCH_BYTES:
        raise ValueError(
            f"{spec.name}'s activations take {_gib(values * 4 * batch)} at its "
            f"batch of {batch}; the tool takes at most {_gib(MAX_BATCH_BYTES)}"
        )


def _gib(size: int) -> str:
    return f"{size / (1 << 30):,.2f} GiB"


def _dense(
    name: str,
    units: int,
    activation: str | None = "relu",
    inputs: tuple[str, ...] = (),
) -> Layer:
    return Layer.of(name, "dense", units=units, activation=activation, inputs=inputs)


def vgg_layers(
    blocks: tuple[tuple[int, ...], ...], dense: tuple[int, ...], classes: int = 10
) -> tuple[Layer, ...]:
    """VGG-style stack: 3x3 'same' ReLU convolutions per block, a 2x2 max-pool
    after each block, flatten, ReLU dense layers, then logits."""
    layers: list[Layer] = []
    for b, filters in enumerate(blocks, start=1):
        for i, f in enumerate(filters, start=1):
            layers.append(
                Layer.of(
                    f"block{b}_conv{i}",
                    "conv2d",
                    filters=f,
                    kernel_size=3,
                    padding="same",
                    activation="relu",
                )
            )
        layers.append(Layer.of(f"block{b}_pool", "max_pool", pool_size=2))
    layers.append(Layer.of("flatten", "flatten"))
    layers += [_dense(f"fc{i}", u) for i, u in enumerate(dense, start=1)]
    layers.append(_dense("logits", classes, None))
    return tuple(layers)


VGG16_BLOCKS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512), (512, 512, 512))
# The Rysia paper's CIFAR-10 network: ten convolutions, four blocks, 512-256 head.
RYSIA_VGG_BLOCKS = ((64, 64), (128, 128), (256, 256, 256), (512, 512, 512))
# VGG16 at a sixteenth of its filters: the same thirteen convolutions in five
# blocks, the same pools and head on the same 32x32 images, some 1/200 of the
# work.  The fast test tier checks the VGG16 family with it (tests/tiers.py).
NARROW_VGG16_BLOCKS = tuple(tuple(f // 16 for f in block) for block in VGG16_BLOCKS)


def encoder_block(
    prefix: str, source: str, heads: int, key_dim: int, hidden: int
) -> tuple[Layer, ...]:
    """One Transformer encoder block after ``source``, post-norm as in
    "Attention Is All You Need": self-attention, residual add, layer
    normalization; a GELU feed-forward of ``hidden`` units back to the width,
    residual add, layer normalization.  Its output is ``<prefix>_norm2``."""
    width = heads * key_dim
    return (
        Layer.of(f"{prefix}_attention", "attention", key_dim=key_dim, num_heads=heads),
        Layer.of(f"{prefix}_add1", "add", inputs=(source, f"{prefix}_attention")),
        Layer.of(f"{prefix}_norm1", "layer_norm"),
        _dense(f"{prefix}_ffn1", hidden, "gelu"),
        _dense(f"{prefix}_ffn2", width, None),
        Layer.of(f"{prefix}_add2", "add", inputs=(f"{prefix}_norm1", f"{prefix}_ffn2")),
        Layer.of(f"{prefix}_norm2", "layer_norm"),
    )


def transformer_layers(
    vocab: int, *, heads: int, key_dim: int, hidden: int, blocks: int, classes: int
) -> tuple[Layer, ...]:
    """A Transformer encoder classifier from Keras' own layers: token
    embeddings; positions encoded by a convolution over them, added back (the
    convolutional position encoding of wav2vec 2.0: relative positions from
    built-in layers only, where a learned table of absolute positions needs
    a second input or a custom layer); ``blocks`` encoder blocks; the mean
    over the sequence; logits."""
    width = heads * key_dim
    layers: list[Layer] = [
        Layer.of("embed", "embedding", output_dim=width, input_dim=vocab),
        Layer.of(
            "position",
            "conv1d",
            filters=width,
            kernel_size=3,
            padding="same",
            activation="gelu",
        ),
        Layer.of("encode", "add", inputs=("embed", "position")),
    ]
    source = "encode"
    for b in range(1, blocks + 1):
        layers += encoder_block(f"block{b}", source, heads, key_dim, hidden)
        source = f"block{b}_norm2"
    layers += [Layer.of("pool", "global_avg_pool"), _dense("logits", classes, None)]
    return tuple(layers)


# The transformer's token ids: IMDB's reader with a vocabulary of this many
# words minus its two reserved ids (0 pads, 1 stands for any other word).
TRANSFORMER_VOCAB = 10_000


def _build_models() -> dict[str, ModelSpec]:
    mnist_sgd = Workload("mnist", "sgd", 0.01, 128)
    specs = [
        ModelSpec(
            "ffn",
            (784,),
            10,
            (_dense("fc1", 128), _dense("fc2", 64), _dense("logits", 10, None)),
            mnist_sgd,
        ),
        ModelSpec(
            "lenet",
            (28, 28, 1),
            10,
            (
                Layer.of(
                    "conv1", "conv2d", filters=6, kernel_size=5, activation="relu"
                ),
                Layer.of("pool1", "avg_pool", pool_size=2),
                Layer.of(
                    "conv2", "conv2d", filters=16, kernel_size=3, activation="relu"
                ),
                Layer.of("pool2", "avg_pool", pool_size=2),
                Layer.of("flatten", "flatten"),
                _dense("fc1", 120),
                _dense("fc2", 84),
                _dense("logits", 10, None),
            ),
            Workload("mnist", "adam", 0.001, 200),
        ),
        ModelSpec(
            "vgg16",
            (32, 32, 3),
            10,
            vgg_layers(VGG16_BLOCKS, (512, 512)),
            Workload("cifar10", "adam", 0.01, 128),
        ),
        ModelSpec(
            "lstm",
            (250, 50),
            2,
            (Layer.of("lstm", "lstm", units=128), _dense("logits", 2, None)),
            Workload("imdb", "adam", 0.01, 128),
        ),
        # Width 64 in 4 heads of 16, a 128-unit feed-forward, 128 tokens.
        ModelSpec(
            "transformer",
            (128,),
            2,
            transformer_layers(
                TRANSFORMER_VOCAB, heads=4, key_dim=16, hidden=128, blocks=2, classes=2
            ),
            Workload("imdb", "adam", 0.001, 32),
        ),
    ]
    return {s.name: s for s in specs}


MODELS: dict[str, ModelSpec] = _build_models()

# Configurations reachable by name but not part of the default comparison.
VARIANTS: dict[str, ModelSpec] = {
    "vgg-rysia": ModelSpec(
        "vgg-rysia",
        (32, 32, 3),
        10,
        vgg_layers(RYSIA_VGG_BLOCKS, (512, 256)),
        Workload("cifar10", "adam", 0.01, 128),
        module="vgg16",
    ),
    "vgg16-narrow": ModelSpec(
        "vgg16-narrow",
        (32, 32, 3),
        10,
        vgg_layers(NARROW_VGG16_BLOCKS, (32, 32)),
        Workload("cifar10", "adam", 0.01, 128),
        module="vgg16",
    ),
    # The layer options users' models bring, at test size: the fast tier
    # checks every path on them (tests/tiers.py) and the fault suite injects
    # its option faults into them (equivalence/sensitivity.py).
    "strided-cnn": ModelSpec(
        "strided-cnn",
        (28, 28, 1),
        10,
        (
            Layer.of(
                "conv1",
                "conv2d",
                filters=8,
                kernel_size=3,
                padding="same",
                activation="tanh",
                strides=2,
            ),  # 14x14
            Layer.of(
                "pool1", "max_pool", pool_size=3, padding="same", strides=2
            ),  # 7x7
            Layer.of(
                "conv2",
                "conv2d",
                filters=8,
                kernel_size=2,
                padding="same",
                activation="sigmoid",
            ),  # pads (0, 1)
            Layer.of(
                "pool2", "avg_pool", pool_size=2, padding="same"
            ),  # 4x4, edge of 1
            Layer.of("flatten", "flatten"),
            _dense("fc1", 16, "softmax"),
            _dense("logits", 10, None),
        ),
        Workload("mnist", "adam", 0.001, 32),
    ),
    "stacked-lstm": ModelSpec(
        "stacked-lstm",
        (250, 50),
        2,
        (
            Layer.of("lstm1", "lstm", units=16, return_sequences=True),
            _dense("project", 8, "tanh"),  # on every step of the sequence
            Layer.of("lstm2", "lstm", units=8),
            _dense("logits", 2, None),
        ),
        Workload("imdb", "adam", 0.001, 32),
    ),
    # The transformer's layer kinds at test size: one block, width 8 in two
    # heads, 12 tokens of 50.
    "transformer-tiny": ModelSpec(
        "transformer-tiny",
        (12,),
        2,
        transformer_layers(50, heads=2, key_dim=4, hidden=16, blocks=1, classes=2),
        Workload("imdb", "adam", 0.001, 16),
        module="transformer",
    ),
    # The other sequence kinds: strided and 'same' 1-D convolutions and
    # pools, stacked GRUs (every step's state, then the last), layer
    # normalization with an epsilon of its own.
    "conv1d-gru": ModelSpec(
        "conv1d-gru",
        (20, 6),
        2,
        (
            Layer.of(
                "conv1",
                "conv1d",
                filters=8,
                kernel_size=3,
                padding="same",
                activation="relu",
                strides=2,
            ),  # 10
            Layer.of(
                "pool1", "max_pool1d", pool_size=2, padding="same", strides=1
            ),  # 10
            Layer.of(
                "conv2",
                "conv1d",
                filters=8,
                kernel_size=2,
                padding="same",
                activation="tanh",
            ),  # pads (0, 1)
            # 10, padded (0, 1).  Not a 3-wide window there: Keras on PyTorch
            # pads a 'same' pool by repeating the edge, which a 3-wide average
            # then counts (docs/results/transformer.md).
            Layer.of("pool2", "avg_pool1d", pool_size=2, padding="same", strides=1),
            Layer.of("gru1", "gru", units=8, return_sequences=True),
            Layer.of("gru2", "gru", units=6),
            Layer.of("norm", "layer_norm", epsilon=1e-5),
            _dense("logits", 2, None),
        ),
        Workload("imdb", "adam", 0.001, 16),
    ),
    # Batch normalization over an image's channels and over features (its
    # own epsilon and momentum), and dropout: training and inference differ.
    "bn-dropout-cnn": ModelSpec(
        "bn-dropout-cnn",
        (28, 28, 1),
        10,
        (
            Layer.of(
                "conv", "conv2d", filters=8, kernel_size=3, padding="same", strides=2
            ),  # 14x14
            Layer.of("conv_norm", "batch_norm"),
            Layer.of("pool", "max_pool", pool_size=2, padding="same"),  # 7x7
            Layer.of("flatten", "flatten"),
            _dense("fc", 16, None),
            Layer.of("fc_norm", "batch_norm", epsilon=1e-5, momentum=0.9),
            Layer.of("drop", "dropout", rate=0.25),
            _dense("logits", 10, None),
        ),
        Workload("mnist", "adam", 0.001, 16),
    ),
    # The mean over an image's positions.
    "gap-cnn": ModelSpec(
        "gap-cnn",
        (28, 28, 1),
        10,
        (
            Layer.of(
                "conv",
                "conv2d",
                filters=8,
                kernel_size=3,
                padding="same",
                activation="relu",
                strides=2,
            ),
            Layer.of("pool", "global_avg_pool"),
            _dense("logits", 10, None),
        ),
        Workload("mnist", "adam", 0.001, 16),
    ),
    # The kinds users' models brought (issue 62), at test size: every merge,
    # a branch from the model's input, borders, an upsampling, a permutation,
    # the activations as layers and on layers, layers without a bias.
    "kinds-cnn": ModelSpec(
        "kinds-cnn",
        (12, 12, 3),
        10,
        (
            Layer.of("scale", "rescaling", scale=0.5, offset=-0.1),
            Layer.of("pad", "zero_padding", padding=(1, 0, 0, 1)),  # 13x13
            Layer.of(
                "conv", "conv2d", filters=6, kernel_size=3, use_bias=False
            ),  # 11x11
            Layer.of("elu", "activation", activation="elu", slope=0.5),
            Layer.of("prelu", "prelu", shared_axes=(1, 2)),
            Layer.of("crop", "cropping", cropping=(0, 1, 1, 0)),  # 10x10
            Layer.of(
                "dw",
                "depthwise_conv2d",
                kernel_size=3,
                padding="same",
                activation="relu",
                depth_multiplier=2,
            ),
            Layer.of(
                "sep",
                "separable_conv2d",
                filters=6,
                kernel_size=3,
                padding="same",
                regularize=(("pointwise_kernel", 0.001, 0.0),),
            ),
            Layer.of("pool", "max_pool", pool_size=2),  # 5x5
            Layer.of("up", "upsampling", size=(2, 2)),  # 10x10
            Layer.of(
                "grow",
                "conv2d_transpose",
                filters=6,
                kernel_size=4,
                padding="same",
                strides=2,
                inputs=("pool",),
                regularize=(("kernel", 0.0, 0.01), ("bias", 0.01, 0.01)),
            ),  # 10x10, its output starting 1 into the full scatter
            Layer.of("regrown", "add", inputs=("up", "grow")),
            Layer.of("middle", "cropping", cropping=(2, 2, 2, 2)),  # 6x6
            Layer.of(
                "side",
                "conv2d",
                filters=6,
                kernel_size=3,
                padding="same",
                activation="silu",
                strides=2,
                inputs=(INPUT,),
            ),  # 6x6, from the input
            Layer.of("cat", "concatenate", inputs=("middle", "side")),  # 12 channels
            Layer.of("mul", "multiply", inputs=("middle", "side")),
            Layer.of("sub", "subtract", inputs=("side", "middle")),
            Layer.of("avg", "average", inputs=("mul", "sub", "side")),
            Layer.of("max", "maximum", inputs=("avg", "middle")),
            Layer.of("min", "minimum", inputs=("avg", "side")),
            Layer.of("joined", "concatenate", inputs=("cat", "max", "min")),  # 24
            Layer.of("swap", "permute", dims=(2, 1, 3)),
            Layer.of("capped", "activation", activation="relu6"),
            Layer.of("gmax", "global_max_pool"),
            Layer.of(
                "fc",
                "dense",
                units=16,
                activation="selu",
                use_bias=False,
                regularize=(("kernel", 0.0, 0.01),),
            ),
            Layer.of("leaky", "activation", activation="leaky_relu", slope=0.1),
            Layer.of("fc2", "dense", units=12, activation="softplus"),
            Layer.of("grid", "reshape", target_shape=(3, 4)),
            Layer.of("row", "reshape", target_shape=(-1,)),
            Layer.of("fc3", "dense", units=12, activation="leaky_relu"),
            _dense("logits", 10, None),
        ),
        Workload("cifar10", "adam", 0.001, 16),
    ),
    "kinds-seq": ModelSpec(
        "kinds-seq",
        (8, 5),
        2,
        (
            Layer.of("norm", "normalization"),
            Layer.of("proj", "dense", units=6, activation="silu"),
            Layer.of(
                "lstm",
                "lstm",
                units=6,
                return_sequences=True,
                use_bias=False,
                regularize=(("recurrent_kernel", 0.0, 0.01),),
            ),
            Layer.of("gru", "gru", units=6, return_sequences=True, use_bias=False),
            Layer.of("att", "attention", key_dim=3, num_heads=2, use_bias=False),
            Layer.of("res", "add", inputs=("gru", "att")),
            Layer.of(
                "bi",
                "bidirectional",
                units=4,
                return_sequences=True,
                merge_mode="concat",
                cell="lstm",
                inputs=("proj",),
            ),  # (8, 8)
            Layer.of("look", "dot_attention", inputs=("res", "bi", "gru")),  # (8, 8)
            Layer.of(
                "bg", "bidirectional", units=3, merge_mode="ave", cell="gru"
            ),  # (3,)
            Layer.of(
                "rnn", "simple_rnn", units=4, return_sequences=True, inputs=("look",)
            ),
            Layer.of(
                "bs", "bidirectional", units=3, merge_mode="mul", cell="simple_rnn"
            ),  # (3,)
            Layer.of("pad", "zero_padding", padding=(1, 2), inputs=("res",)),  # 11
            Layer.of("crop", "cropping", cropping=(2, 1)),  # 8
            Layer.of("up", "upsampling", size=(2,)),  # 16
            Layer.of("swap", "permute", dims=(2, 1)),  # (6, 16)
            Layer.of("gmax", "global_max_pool"),  # 16
            Layer.of("gavg", "global_avg_pool", inputs=("crop",)),  # 6
            Layer.of("both", "concatenate", inputs=("gmax", "gavg", "bg", "bs")),  # 28
            Layer.of("act", "activation", activation="elu"),
            _dense("logits", 2, None),
        ),
        Workload("imdb", "adam", 0.001, 16),
    ),
    # Several inputs and outputs (issue 78), as a Wide & Deep model with two
    # heads is written: token ids embedded and pooled (the deep part) beside
    # a row of floats (the wide part), joined; a class head and a score head,
    # each with its own loss, the score's weighted 0.5 (``loss_weights``).
    # SGD: Keras' other optimizers on TensorFlow step an embedding's sparse
    # gradient wrongly (docs/findings/sparse-gradient-optimizers.md), which
    # would hold keras-tensorflow back on this model in every tier.
    "wide-deep": ModelSpec(
        "wide-deep",
        (6,),
        3,
        (
            Layer.of("embed", "embedding", input_dim=30, output_dim=4),
            Layer.of("pool", "global_avg_pool"),
            _dense("deep", 8),
            Layer.of("both", "concatenate", inputs=("deep", "wide")),
            _dense("logits", 3, None),
            _dense("score", 1, None, inputs=("both",)),
        ),
        Workload(
            "user",
            "sgd",
            0.05,
            16,
            losses=(DEFAULT_OBJECTIVE, Objective("mean_squared_error", False)),
            loss_weights=(1.0, 0.5),
        ),
        more_inputs=(ModelInput("wide", (5,)),),
        outputs=("logits", "score"),
    ),
}
# The variants with several inputs or outputs: both tiers check every path
# on them.
SHAPE_MODELS = ("wide-deep",)


def _example(kind: str, example: Example) -> ModelSpec:
    """The variant ``kind-<kind>``: a kind's ``Example`` with a head of
    scores (a flatten first when its last output is not one row)."""
    name = f"kind-{kind}".replace("_", "-")
    layers = example.layers()
    head = [_dense("logits", example.classes, None)]
    if len(final_shape(layers, example.input_shape)) > 1:
        head.insert(0, Layer.of("flat", "flatten"))
    return ModelSpec(
        name,
        example.input_shape,
        example.classes,
        (*layers, *head),
        _EXAMPLE_WORKLOAD,
    )


_EXAMPLE_WORKLOAD = Workload("user", "adam", 0.001, 16)
# The variants the kinds' own examples make (``Kind.example``), by name.
EXAMPLE_MODELS: tuple[str, ...] = tuple(
    _example(name, kind.example).name
    for name, kind in KIND_RECORDS.items()
    if kind.example is not None
)
VARIANTS.update(
    (spec.name, spec)
    for spec in (
        _example(name, kind.example)
        for name, kind in KIND_RECORDS.items()
        if kind.example is not None
    )
)


def noise_of(layer: Layer) -> Noise | None:
    """What ``layer``'s kind draws in a training step (``Kind.noise``: a
    dropout and its kin); ``None`` for a kind that draws none (or draws
    masks inside its cells: ``masks_of``)."""
    return KIND_RECORDS[layer.kind].noise


def masks_of(layer: Layer) -> tuple[Mask, ...]:
    """The masks ``layer`` draws inside its block in a training step
    (``Kind.masks``: a recurrent layer's with ``dropout`` or
    ``recurrent_dropout``, an attention's with ``dropout``;
    ``zoo.kinds.base.Mask``), none for any other."""
    masks = KIND_RECORDS[layer.kind].masks
    return masks(layer) if masks is not None else ()


def mask_width(layer: Layer, mask: Mask, given: Shape) -> int:
    """The width of each of ``mask``'s masks (``Mask.side``) for ``layer``
    on an input of ``given`` ``(steps, features)``."""
    steps, features = given
    if mask.side == "scores":  # every query's weight of every key
        return steps * steps
    return int(layer.options.units) if mask.side == "state" else features


def draws_noise(layer: Layer) -> bool:
    """Whether ``layer`` draws noise in a training step (``noise_of``, its
    amount above 0, or masks inside its cells: ``masks_of``)."""
    noise = noise_of(layer)
    drawn = noise is not None and bool(getattr(layer.options, noise.amount))
    return drawn or bool(masks_of(layer))


def without_noise(spec: ModelSpec) -> ModelSpec:
    """``spec`` with every layer that draws noise at an amount of 0 (a
    dropout at rate 0, Gaussian noise of deviation 0): what a training
    trajectory is compared on (random draws cannot agree between paths; at 0
    such a layer is the identity, and the pass is otherwise the one timed)."""
    if not spec.noisy:
        return spec
    return replace(spec, layers=tuple(_silenced(layer) for layer in spec.layers))


def _silenced(layer: Layer) -> Layer:
    masks = masks_of(layer)
    if masks:  # each at rate 0
        return layer.replace(**{mask.option: 0.0 for mask in masks})
    noise = noise_of(layer)
    if noise is None or not draws_noise(layer):
        return layer
    return layer.replace(**{noise.amount: 0.0})
