"""What every layer kind is made of: the ``Layer`` and ``Param`` records, the
``Kind`` record a kind's module fills in, the ``Pick`` a kind's fuzz draw
asks its choices of, and the rules several kinds share (Keras' ``same``
padding, activations and their FLOPs).
``Kind`` record a kind's module fills in (with the ``Mistake`` records of its
typical hand-written mistakes), and the rules several kinds share
(Keras' ``same`` padding, activations and their FLOPs).

Standard library only: every environment (the MXNet one included, with
NumPy 1.23 and no Keras) imports it.  ``zoo.specs`` re-exports what it
always offered (``Layer``, ``Param``, ``padding_of``, the constants).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, TypeVar

Shape = tuple[int, ...]
T = TypeVar("T")

# ``None`` is Keras' ``linear``; ``softmax`` is over the last axis; ``gelu``
# is Keras' default, the exact one: ``x / 2 * (1 + erf(x / sqrt(2)))``;
# ``silu`` is ``x * sigmoid(x)`` (Keras' ``swish`` is the same function);
# ``leaky_relu`` is ``x`` above 0, ``alpha * x`` below (``Layer.slope``);
# ``elu`` is ``x`` above 0, ``alpha * (exp(x) - 1)`` below; ``selu`` is
# ``SELU_SCALE * elu`` with ``SELU_ALPHA``; ``relu6`` is ``min(relu, 6)``.
ACTIVATIONS = (
    None,
    "relu",
    "tanh",
    "sigmoid",
    "softmax",
    "gelu",
    "elu",
    "selu",
    "silu",
    "softplus",
    "leaky_relu",
    "relu6",
)
# Activations that take a number (``Layer.slope``), with Keras' default for
# it: the ``leaky_relu`` activation's negative slope and ``elu``'s alpha.
SLOPED = {"leaky_relu": 0.2, "elu": 1.0}
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
# FLOPs per output element of a layer with that activation (None: linear); a
# transcendental function counts one, as in tanh; gelu is x / sqrt(2), erf,
# + 1, times x, times 1/2; softmax an exponential, a sum and a division.
ACTIVATION_FLOPS: dict[str | None, int] = {
    None: 0,
    "relu": 1,
    "tanh": 1,
    "sigmoid": 1,
    "softmax": 3,
    "gelu": 5,
    "elu": 3,  # compare, exponential, scale
    "selu": 4,  # the same and the outer scale
    "silu": 2,  # sigmoid, product
    "softplus": 2,  # exponential, log1p
    "leaky_relu": 2,  # compare, scale
    "relu6": 2,  # two compares
    "gelu_tanh": 8,
}
# Keras' LayerNormalization and BatchNormalization epsilon, and the
# BatchNormalization momentum, when a layer does not set its own.
LAYER_NORM_EPSILON = 1e-3
BATCH_NORM_MOMENTUM = 0.99
PADDINGS = ("valid", "same")
# The mistake (``Layer.mistake``, conv2d's) whose padding ``padding_of``
# gives: ``window // 2`` on each side, what a hand-written PyTorch
# ``padding=k // 2`` gives where Keras puts the odd position after.
SYMMETRIC_SAME = "same-padding-symmetric"
# An activation no Keras layer has: GELU by its tanh approximation
# (``jax.nn.gelu``'s default), which only the deliberate fault ``gelu-tanh``
# sets; every framework's ops.py computes it as written there.
GELU_TANH = "gelu_tanh"
# Parameter kinds that are state, not trained: a batch normalization's moving
# statistics, which a training step sets from the batch, and a
# ``Normalization``'s adapted mean and variance, which nothing changes.
STATE_KINDS = ("moving_mean", "moving_variance", "adapted_mean", "adapted_variance")
# The name a layer's ``inputs`` gives the model's input (a branch that starts
# there); no layer may take it as its own name.
INPUT = "input"


@dataclass(frozen=True)
class Layer:
    """One layer of a model.

    ``kind`` is a registered kind (``zoo.kinds.KINDS``), whose module says
    what each field means to it.  ``size`` is units (dense, lstm, gru),
    filters (convolutions), the embedding width, an attention head's
    ``key_dim`` or the pool window; ``kernel`` the (square) convolution
    side; ``strides`` the step of a convolution or pool window (0: Keras'
    default, as ``stride`` resolves it); ``padding`` ``valid`` or ``same``;
    ``activation`` one of ``ACTIVATIONS``; ``return_sequences`` whether a
    recurrent layer gives every step's state; ``vocab`` an embedding's
    number of token ids; ``heads`` an attention layer's; ``epsilon`` a
    normalization's (0: Keras' default); ``momentum`` a batch
    normalization's; ``rate`` a dropout's fraction dropped; ``inputs`` the
    earlier layers (or ``INPUT``) whose outputs this layer takes (empty: the
    previous layer's); ``use_bias`` whether a layer with a bias has one;
    ``slope`` an activation's number (``SLOPED``; 0: Keras' default);
    ``scale`` and ``offset`` a rescaling's; ``target`` a shape, axis order,
    crop or pad widths or upsampling factors (the kind says which);
    ``merge`` a bidirectional layer's merge mode and ``cell`` its recurrent
    kind; ``multiplier`` a depthwise convolution's depth multiplier (0: 1);
    ``regularize`` each regularized parameter role with its L1 and L2
    factors; ``trainable`` ``False`` for a frozen layer (Keras'
    ``trainable=False``): no step updates its parameters, none of them has a
    gradient taken, and a frozen batch normalization normalizes with its
    moving statistics in a training step too, as Keras runs it; ``mistake``
    the name of the mistake of its kind this layer computes (``Kind.mistakes``,
    set only by a deliberate fault; empty: none).

    The options added after the reference models show in the repr only when
    set, so those models read as they always have (the verdict cache keys on
    that text: ``harness.core.gate``).
    """

    name: str
    kind: str
    size: int = 0
    kernel: int = 0
    padding: str = "valid"
    activation: str | None = None
    strides: int = 0
    return_sequences: bool = False
    vocab: int = 0
    heads: int = 0
    epsilon: float = 0.0
    inputs: tuple[str, ...] = ()
    momentum: float = 0.0
    rate: float = 0.0
    use_bias: bool = True
    slope: float = 0.0
    scale: float = 1.0
    offset: float = 0.0
    target: tuple[int, ...] = ()
    merge: str = ""
    cell: str = ""
    multiplier: int = 0
    regularize: tuple[tuple[str, float, float], ...] = ()
    trainable: bool = True
    mistake: str = ""

    def __repr__(self) -> str:
        shown = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name not in QUIET or getattr(self, f.name) != f.default
        ]
        return f"Layer({', '.join(shown)})"

    @property
    def kind_record(self) -> Kind:
        from zoo.kinds import KINDS  # the registry imports this module

        return KINDS[self.kind]

    @property
    def stride(self) -> int:
        """The step actually taken: ``strides``, or Keras' default (a pool's
        window, 1 for a convolution)."""
        if self.strides:
            return self.strides
        return self.size if self.kind_record.pool else 1

    @property
    def window(self) -> int:
        """The (square) window side of a convolution or pool."""
        return self.size if self.kind_record.pool else self.kernel

    @property
    def norm_epsilon(self) -> float:
        """A layer or batch normalization's epsilon: its own, or Keras' default."""
        return self.epsilon or LAYER_NORM_EPSILON

    @property
    def norm_momentum(self) -> float:
        """A batch normalization's momentum: its own, or Keras' default."""
        return self.momentum or BATCH_NORM_MOMENTUM

    @property
    def activation_slope(self) -> float:
        """The number a sloped activation takes: its own, or Keras' default."""
        return self.slope or SLOPED.get(self.activation or "", 0.0)


# Fields shown in a Layer's repr only when they differ from the default.
QUIET = (
    "strides",
    "return_sequences",
    "vocab",
    "heads",
    "epsilon",
    "inputs",
    "momentum",
    "rate",
    "use_bias",
    "slope",
    "scale",
    "offset",
    "target",
    "merge",
    "cell",
    "multiplier",
    "regularize",
    "trainable",
    "mistake",
)
# The fields a kind may take as its options (``Kind.options``), beyond name,
# kind, size, inputs and ``trainable`` (every layer's) and ``mistake`` (no
# model's: only a deliberate fault sets it).
OPTIONAL = tuple(
    f.name
    for f in fields(Layer)
    if f.name not in ("name", "kind", "size", "inputs", "trainable", "mistake")
)


@dataclass(frozen=True)
class Param:
    """One array of a model's state in canonical (Keras) layout: a trained
    weight, or (``STATE_KINDS``) a statistic."""

    name: str
    shape: tuple[int, ...]
    kind: str
    layer: str
    role: str
    # A dense kernel right after a flatten of images: the (H, W, C) of its
    # input rows (only ``native.faults`` reads it: the rows in C, H, W order).
    feature_shape: tuple[int, int, int] | None = None
    # Of a frozen layer (``Layer.trainable`` False): held as it is.  Out of
    # the repr: its layer's shows it, and every other spec reads as before.
    frozen: bool = field(default=False, repr=False)

    @property
    def state(self) -> bool:
        """Whether it is a statistic (``STATE_KINDS``) rather than a weight."""
        return self.kind in STATE_KINDS

    @property
    def trainable(self) -> bool:
        """Whether an optimizer trains it (and a gradient is compared): a
        weight of a layer that is not frozen."""
        return not self.state and not self.frozen


class Pick(Protocol):
    """What a kind's fuzz draw (``Kind.draw``) may ask for.  ``harness fuzz``
    answers on Hypothesis (``harness.fuzz.draw``), which shrinks each answer
    toward the first it could give: the low end, the first option,
    ``False``, the order given; so a draw lists its options simplest first."""

    def integer(self, lo: int, hi: int) -> int:
        """A whole number from ``lo`` to ``hi``, both included."""
        ...

    def one_of(self, options: Sequence[T]) -> T:
        """One of ``options`` (one listed twice is picked twice as often)."""
        ...

    def boolean(self) -> bool: ...

    def permutation(self, items: Sequence[T]) -> list[T]:
        """``items`` in some order."""
        ...

    def width(self) -> int:
        """A layer's width (units, filters): from 1 to the fuzzer's largest,
        which is the fuzzer's to choose (a check must take seconds)."""
        ...


def pick_activation(pick: Pick) -> str | None:
    """An activation for a kind's draw: linear first, then ``ACTIVATIONS``."""
    return pick.one_of([None, *(a for a in ACTIVATIONS if a is not None)])


# A custom injection: (the layer hit, the spec, the weights) -> the spec and
# weights the path runs with.
Injection = Callable[[Layer, Any, Mapping[str, Any]], tuple[Any, dict[str, Any]]]


@dataclass(frozen=True)
class Mistake:
    """A mistake typical of writing a kind by hand, declared on the kind
    (``Kind.mistakes``).  ``native.faults`` makes it the deliberate fault of
    its name, injected into one native path to prove that the equivalence
    checks catch it and point at it.

    - ``name``: the fault's name; ``description``: what it gets wrong.
    - ``model``: the small model (``zoo.specs``) the fault suite tries it
      on, with ``batch_size``, ``steps`` (a mistake in the update shows only
      after one) and ``seq_len`` as ``equivalence.check.Case`` takes them.
    - ``stage``: where localization must point (``forward``, ``loss``,
      ``backward`` or ``update``), at the layer it hits.
    - ``hits(layer, shapes)``: whether it shows in ``layer`` (``shapes``:
      what the layer takes, as ``Kind.shape`` gets them); default: in any.
      It applies to a model with a layer it hits, and hits the first.
    - How it enters (one way, or ``params`` and ``changes`` together):
      ``params`` and ``corrupt(array, param)``, a loading mistake: every
      parameter whose Param kind or role is ``params`` (in whichever layer
      holds it: a bidirectional layer's cells too) and whose layer it hits,
      loaded as ``corrupt`` returns it (NumPy arrays, used by their methods);
      ``changes(layer)``: the layer it hits computed with these ``Layer``
      fields changed (a padding, an epsilon, its inputs), the weights kept;
      ``inject(layer, spec, weights)``: anything else, given the layer it
      hits: the spec and weights the path runs with.

    The layers it can hit are those holding a ``params`` parameter, or
    without ``params`` the layers of a kind that declares it (several kinds
    may declare one, as the merges do ``join-reversed``).  Examples:
    ``zoo/kinds/lstm.py`` (a loading mistake), ``zoo/kinds/conv2d.py``
    (options changed), ``zoo/kinds/attention.py`` (an injection).
    """

    name: str
    description: str
    model: str
    batch_size: int = 4
    steps: int = 0
    seq_len: int | None = None
    stage: str = "forward"
    hits: Callable[[Layer, tuple[Shape, ...]], bool] = lambda layer, shapes: True
    params: str = ""
    corrupt: Callable[[Any, Param], Any] | None = None
    changes: Callable[[Layer], dict[str, Any]] | None = None
    inject: Injection | None = None


@dataclass(frozen=True)
class Kind:
    """Everything the framework-free side knows of one layer kind; each
    kind's module makes one (``zoo.kinds`` registers them).

    - ``name``: the spec's word (``Layer.kind``) and the ``[model]`` table's.
    - ``summary``: what it computes, one line (docs, errors).
    - ``options``: the ``Layer`` fields it takes beyond ``size`` and
      ``inputs``; ``size_word`` the document's word for ``Layer.size``
      (``None``: it has no size); ``words`` document words that differ
      from the field's own name (``OPTION_WORDS``).
    - ``shape(layer, shapes)``: its output shape (no batch) from the shapes
      of what it takes, or a ValueError in one sentence.
    - ``params(layer, shapes)``: its parameters in canonical layout.
    - ``flops(layer, shapes, out)``: ``(matmul, elementwise)`` per sample
      forward, its activation left out (``harness.core.flops``).
    - ``keras(keras, layer, shapes)``: Keras' layer for it
      (``zoo.keras_models``; ``keras`` is the imported module, so a kind's
      module needs no Keras), called on its one tensor, or on the list of
      them when it takes several; ``keras_call(block, tensors)`` calls it
      otherwise (self-attention: the sequence as query and value).
    - ``keras_classes``: the Keras classes read as this kind, and
      ``read(cls, name, config, built)``: a Keras config (``built``: the
      input shape Keras built the layer for, with the batch, or ``None``) as
      the document's words (``kind`` included), or a ValueError saying what
      it does not compute.
    - ``takes``: how many inputs: ``1``, ``2`` or ``0`` (two or more).
    - ``pool``: a pooling window whose default step is its size.
    - ``trains_differently``: computes otherwise in a training step
      (``native.compose``).
    - ``scores``: its size is what a model that ends in it outputs.
    - ``defaulted``: its options that Keras gives a default although the
      same option of other kinds has none (a ``PReLU``'s ``shared_axes``,
      where a ``Reshape``'s ``target_shape`` must be given): a document may
      leave them out (``zoo.user_models``).
    - ``shift``: the role of a parameter added to each output channel last
      (a bias, a batch normalization's beta), whose gradient is zero when
      only batch normalizations take the output (``ModelSpec.noise_trained``).
    - ``example``: a test-size model that uses the kind (``Example``), which
      ``zoo.specs`` makes the variant ``kind-<name>`` that both test tiers
      judge every path on against float64.  A kind that a hand-written
      variant already uses (``kinds-cnn``, ``kinds-seq``) needs none.
    - ``draw(pick, shape)``: its options in the ``[model]`` document's words
      for an input of ``shape``, as ``harness fuzz`` draws them (``Pick``);
      ``draw_ranks`` the ranks of input it is drawn on.  A kind that takes
      several inputs and has no draw is drawn as a merge: after a layer,
      joining it with an earlier output of its shape.  ``not_drawn``: why
      the fuzzer never draws a kind that has neither.
    - ``mistakes``: the mistakes typical of writing it by hand (``Mistake``),
      each a deliberate fault of ``native.faults`` that the checks must catch.
    """

    name: str
    summary: str
    options: tuple[str, ...]
    size_word: str | None
    shape: Callable[[Layer, tuple[Shape, ...]], Shape]
    params: Callable[[Layer, tuple[Shape, ...]], list[Param]]
    flops: Callable[[Layer, tuple[Shape, ...], Shape], tuple[int, int]]
    keras: Callable[[Any, Layer, tuple[Shape, ...]], Any]
    keras_classes: tuple[str, ...]
    read: Callable[[str, str, Mapping[str, Any], Any], dict[str, Any]]
    words: Mapping[str, str] = field(default_factory=dict)
    keras_call: Callable[[Any, list[Any]], Any] | None = None
    takes: int = 1
    pool: bool = False
    trains_differently: bool = False
    scores: bool = False
    shift: str | None = None
    defaulted: tuple[str, ...] = ()
    example: Example | None = None
    draw: Callable[[Pick, Shape], dict[str, Any]] | None = None
    draw_ranks: tuple[int, ...] = ()
    not_drawn: str = ""
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Example:
    """A test-size model that uses a kind (``Kind.example``): its input (no
    batch) and its layers, the first taking the input.  ``zoo.specs`` adds
    the head: a flatten when the last layer's output is not one row, then a
    dense layer of ``classes`` scores.  Keep it small (a few hundred
    parameters): every path is checked on it in both test tiers."""

    input_shape: Shape
    layers: tuple[Layer, ...]
    classes: int = 2


def no_options(pick: Pick, shape: Shape) -> dict[str, Any]:
    """The draw of a kind with no options to draw (``Kind.draw``)."""
    return {}


def no_params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    return []


def no_flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    return 0, 0


def elementwise(
    per: int,
) -> Callable[[Layer, tuple[Shape, ...], Shape], tuple[int, int]]:
    """A FLOP rule of ``per`` operations for each output element."""

    def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
        return 0, per * math.prod(out)

    return flops


def one_input(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    return shapes[0]


def bias(layer: Layer, width: int) -> list[Param]:
    """A layer's ``bias`` of ``width``, unless it has ``use_bias=False``."""
    n = layer.name
    return [Param(f"{n}/bias", (width,), "bias", n, "bias")] if layer.use_bias else []


# --- Keras' windows -----------------------------------------------------------


def same_padding(side: int, window: int, stride: int) -> tuple[int, int]:
    """Keras' (and TensorFlow's) ``same`` padding of one axis: the output has
    ``ceil(side / stride)`` positions and the padding they need is split with
    the odd one after (``(0, 1)`` for a 3-wide stride-2 window on 28)."""
    out = -(-side // stride)
    total = max((out - 1) * stride + window - side, 0)
    return total // 2, total - total // 2


def padding_of(layer: Layer, side: int) -> tuple[int, int]:
    """The padding (before, after) ``layer`` puts on an axis of ``side`` (a
    layer computing the mistake ``SYMMETRIC_SAME``: ``window // 2`` each)."""
    if layer.mistake == SYMMETRIC_SAME:
        return layer.window // 2, layer.window // 2
    if layer.padding == "same":
        return same_padding(side, layer.window, layer.stride)
    return 0, 0


def window_out(layer: Layer, side: int) -> int:
    """Positions a convolution or pool ``layer`` gives on an axis of ``side``."""
    before, after = padding_of(layer, side)
    return (side + before + after - layer.window) // layer.stride + 1


def windowed(layer: Layer, shape: Shape, rank: int, channels: int) -> Shape:
    """The output of a window sliding over the first ``rank - 1`` axes of
    ``shape`` (a sequence ``(T, F)``: rank 2; images ``(H, W, C)``: 3),
    giving ``channels`` per position."""
    if len(shape) != rank:
        what = "images (H, W, C)" if rank == 3 else "a sequence (T, F)"
        raise ValueError(f"{layer.kind} layer {layer.name!r} needs {what}, not {shape}")
    out = tuple(window_out(layer, side) for side in shape[:-1])
    if min(out) < 1:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r}: a window of {layer.window} does "
            f"not fit its input {shape[:-1]}"
        )
    return (*out, channels)


def needs_rank(layer: Layer, shape: Shape, ranks: tuple[int, ...], what: str) -> None:
    """A ValueError in one sentence unless ``shape`` has one of ``ranks``."""
    if len(shape) not in ranks:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} needs {what}, not shape {shape}"
        )
