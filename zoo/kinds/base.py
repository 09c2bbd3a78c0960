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

import dataclasses
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
# Keras' Conv1D padding that puts every position's window over it and the
# positions before it: ``(window - 1, 0)`` (a kind takes it when its
# ``Kind.paddings`` names it).
CAUSAL = "causal"
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

    ``kind`` is a registered kind (``zoo.kinds.KINDS``); ``options`` is that
    kind's own record (``Kind.options``, in the kind's module): each option
    named as Keras names the argument, typed, with Keras' default, and
    meaning only what the kind's module says (a convolution's ``padding``
    is ``valid`` or ``same``, a zero padding's its widths).  ``None`` is the
    kind's defaults.  ``Layer.of(name, kind, **options)`` makes one from
    the options by name.

    What every layer has beside: ``inputs``, the earlier layers (or
    ``INPUT``) whose outputs it takes (empty: the previous layer's);
    ``regularize``, each regularized parameter role with its L1 and L2
    factors (a kind whose ``Kind.regularized`` is set); ``trainable``
    ``False`` for a frozen layer (Keras' ``trainable=False``): no step
    updates its parameters, none of them has a gradient taken, and a frozen
    batch normalization normalizes with its moving statistics in a training
    step too, as Keras runs it; ``mistake``, the name of the mistake of its
    kind the layer computes (``Kind.mistakes``; set only by a deliberate
    fault; empty: none).

    The repr shows the options that differ from the kind's defaults (and
    those without one), and the rest only when set (the verdict cache keys
    on that text: ``harness.core.gate``).
    """

    name: str
    kind: str
    options: Any = None
    inputs: tuple[str, ...] = ()
    regularize: tuple[tuple[str, float, float], ...] = ()
    trainable: bool = True
    mistake: str = ""

    def __post_init__(self) -> None:
        from zoo.kinds import KINDS  # the registry imports this module

        kind = KINDS.get(self.kind)
        if kind is None:
            raise ValueError(
                f"layer {self.name!r} has unknown kind {self.kind!r}; "
                f"known: {', '.join(KINDS)}"
            )
        if self.options is None:
            object.__setattr__(self, "options", _made(self.name, kind, {}))
        elif type(self.options) is not kind.options:
            raise TypeError(
                f"{self.kind} layer {self.name!r} has options of "
                f"{type(self.options).__name__}, not {kind.options.__name__}"
            )

    @classmethod
    def of(
        cls,
        name: str,
        kind: str,
        *,
        inputs: tuple[str, ...] = (),
        regularize: tuple[tuple[str, float, float], ...] = (),
        trainable: bool = True,
        **options: Any,
    ) -> Layer:
        """A layer of ``kind`` with ``options`` by their names (the kind's
        record's fields, Keras' argument names)."""
        from zoo.kinds import KINDS

        record = KINDS.get(kind)
        made = _made(name, record, options) if record else None
        return cls(name, kind, made, tuple(inputs), regularize, trainable)

    def replace(self, **changes: Any) -> Layer:
        """This layer with ``changes``: its own fields (``inputs``, ``name``)
        or its options by name."""
        own = {f.name for f in fields(self)}
        options = {k: v for k, v in changes.items() if k not in own}
        layer = dataclasses.replace(
            self, **{k: v for k, v in changes.items() if k in own}
        )
        if options:
            merged = {**_values(layer.options), **options}
            made = _made(layer.name, layer.kind_record, merged)
            layer = dataclasses.replace(layer, options=made)
        return layer

    def __repr__(self) -> str:
        shown = [f"name={self.name!r}", f"kind={self.kind!r}"]
        shown += [f"{k}={v!r}" for k, v in shown_options(self.options).items()]
        shown += [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.name in ("inputs", "regularize", "trainable", "mistake")
            and getattr(self, f.name) != f.default
        ]
        return f"Layer({', '.join(shown)})"

    @property
    def kind_record(self) -> Kind:
        from zoo.kinds import KINDS  # the registry imports this module

        return KINDS[self.kind]

    @property
    def activation(self) -> str | None:
        """The activation that follows the layer (``ACTIVATIONS``): its
        ``activation`` option, or ``None`` (linear) for a kind without one
        or whose option is computed inside its block
        (``Kind.inner_activation``)."""
        if self.kind_record.inner_activation:
            return None
        value = getattr(self.options, "activation", None)
        return value if isinstance(value, str) else None

    @property
    def activation_slope(self) -> float:
        """The number a sloped activation takes: the layer's own ``slope``
        option, or Keras' default for the activation (``SLOPED``)."""
        own = getattr(self.options, "slope", None)
        return float(own) if own else SLOPED.get(self.activation or "", 0.0)


def _values(options: Any) -> dict[str, Any]:
    return {f.name: getattr(options, f.name) for f in fields(options)}


def _made(name: str, kind: Kind | None, given: Mapping[str, Any]) -> Any:
    """``kind``'s options record from ``given`` by name, or a ValueError in
    one sentence naming what it does not take or lacks."""
    if kind is None:
        raise ValueError(f"layer {name!r} has no registered kind")
    record = kind.options
    known = [f.name for f in fields(record)]
    foreign = sorted(set(given) - set(known))
    if foreign:
        raise ValueError(
            f"{kind.name} layer {name!r} takes no {', '.join(foreign)}; it takes: "
            f"{', '.join(known) or 'no options'}"
        )
    lacking = [o for o in required(record) if o not in given]
    if lacking:
        raise ValueError(f"{kind.name} layer {name!r} needs {', '.join(lacking)}")
    return record(**given)


def required(record: type) -> tuple[str, ...]:
    """The options of an options record that have no default (Keras'
    arguments without one): a document always writes them out."""
    return tuple(
        f.name
        for f in fields(record)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )


def shown_options(options: Any) -> dict[str, Any]:
    """An options record's values that differ from its defaults, and those
    without a default, by name, in its order."""
    need = required(type(options))
    return {
        f.name: getattr(options, f.name)
        for f in fields(options)
        if f.name in need or getattr(options, f.name) != f.default
    }


@dataclass(frozen=True)
class NoOptions:
    """The options record of a kind that takes none."""


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
class Mask:
    """Masks a layer draws inside its block in a training step, once per
    sequence (``Kind.masks``): ``count`` of them, each ``(batch, width)``
    (``zoo.specs.mask_width``) of the ``side`` it multiplies (``input``: a
    recurrent cell's input at every step, of the input's features; ``state``:
    its state before every step, of ``units``; ``scores``: an attention's
    weights after the softmax, one per head, of ``steps * steps``), each
    value kept with probability ``1 - rate`` and scaled by ``1 / (1 -
    rate)``, ``rate`` the layer's ``option``; drawn by the layer's ``copy``
    (a Bidirectional's direction, or ``""``) and tapped as ``tap``
    (``native.compose``)."""

    tap: str
    copy: str
    side: str
    count: int
    rate: float
    option: str


@dataclass(frozen=True)
class Noise:
    """What a kind that draws noise in a training step draws (``Kind.noise``);
    in inference it is the identity.  ``amount``: the option that says how
    much (``rate``, ``stddev``; at 0 it draws nothing and is the identity in
    training too); ``draws``: how the noise enters,

    - ``mask``: each value kept or zeroed, kept with probability ``1 -
      rate`` and scaled by ``1 / (1 - rate)``; one draw shared along the
      axes of the option ``shared_axes`` (counted from 1 after the batch, as
      Keras' ``noise_shape`` has a 1 there), if the kind has it;
    - ``added``: ``h + n``, ``n`` normal of mean 0 and ``stddev(options)``;
    - ``multiplied``: ``h * n``, ``n`` normal of mean 1 and
      ``stddev(options)``.

    Random draws cannot agree between paths, so a training trajectory is
    compared with every ``amount`` at 0 (``zoo.specs.without_noise``), and
    each path's draws are judged on their own in one training pass
    (``workers.protocol.check_noise``)."""

    amount: str
    draws: str
    stddev: Callable[[Any], float] | None = None


@dataclass(frozen=True)
class Kind:
    """Everything the framework-free side knows of one layer kind; each
    kind's module makes one (``zoo.kinds`` registers them).

    - ``name``: the spec's word (``Layer.kind``) and the ``[model]`` table's.
    - ``summary``: what it computes, one line (docs, errors).
    - ``options``: its options record (``Layer.options``), a frozen
      dataclass in the kind's module: one field per option, named as Keras
      names the argument (the ``[model]`` table's word too), typed, with
      Keras' default where Keras has one (``NoOptions``: it takes none).
    - ``regularized``: it takes Keras' weight regularizers
      (``Layer.regularize``).
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
    - ``inner_activation``: its ``activation`` option is computed inside
      its block (a recurrent cell's, Keras' tanh by default: each framework
      reads it with ``native.compose.activation_function``), not after it:
      ``Layer.activation`` is then ``None``.
    - ``paddings``: the ``padding`` words it takes, for a kind with that
      option (``PADDINGS``; Conv1D's also ``causal``).
    - ``trains_differently``: computes otherwise in a training step
      (``native.compose``); ``noise``: what it draws there, for a kind
      that draws noise (``Noise``: a dropout and its kin), whose training
      block is ``ops.<name>(h, spec, name, rng, index)``
      (``native.protocol.NoiseBlock``); ``cell_masks(layer)``: the masks a
      kind with parameters draws inside its cells (a recurrent layer's
      ``dropout`` and ``recurrent_dropout``:
      ``zoo.kinds.recurrent.cell_masks``), drawn by ``native.compose``,
      each framework's blocks taking them (``native.protocol.Masked``),
      each path's checked by ``workers.masks``.
    - ``shift``: the role of a parameter added to each output channel last
      (a bias, a batch normalization's beta), whose gradient is zero when
      only batch normalizations take the output (``ModelSpec.noise_trained``);
      ``carries_shift(layer)``: whether the layer, without an activation,
      turns a per-channel constant added to its input into one added to its
      output (an add, a dense layer, a convolution that pads nothing, a
      dropout at rate 0 as trajectories run it), so that such a shift is
      followed through it to the normalizations it reaches.
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
    options: type
    shape: Callable[[Layer, tuple[Shape, ...]], Shape]
    params: Callable[[Layer, tuple[Shape, ...]], list[Param]]
    flops: Callable[[Layer, tuple[Shape, ...], Shape], tuple[int, int]]
    keras: Callable[[Any, Layer, tuple[Shape, ...]], Any]
    keras_classes: tuple[str, ...]
    read: Callable[[str, str, Mapping[str, Any], Any], dict[str, Any]]
    keras_call: Callable[[Any, list[Any]], Any] | None = None
    takes: int = 1
    pool: bool = False
    inner_activation: bool = False
    trains_differently: bool = False
    noise: Noise | None = None
    masks: Callable[[Layer], tuple[Any, ...]] | None = None
    carries_shift: Callable[[Layer], bool] = lambda layer: False
    paddings: tuple[str, ...] = PADDINGS
    regularized: bool = False
    shift: str | None = None
    example: Example | None = None
    draw: Callable[[Pick, Shape], dict[str, Any]] | None = None
    draw_ranks: tuple[int, ...] = ()
    not_drawn: str = ""
    mistakes: tuple[Mistake, ...] = ()


@dataclass(frozen=True)
class Example:
    """A test-size model that uses a kind (``Kind.example``): its input (no
    batch) and a function making its layers, the first taking the input
    (``lambda: (Layer.of(...), ...)``: a layer cannot be made while the
    registry is still importing the kinds' modules, so ``zoo.specs`` calls
    it once they are all registered).  ``zoo.specs`` adds the head: a
    flatten when the last layer's output is not one row, then a dense layer
    of ``classes`` scores.  Keep it small (a few hundred parameters): every
    path is checked on it in both test tiers."""

    input_shape: Shape
    layers: Callable[[], tuple[Layer, ...]]
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
    """A layer's ``bias`` of ``width``, unless its options say
    ``use_bias=False``."""
    n = layer.name
    wanted = layer.options.use_bias
    return [Param(f"{n}/bias", (width,), "bias", n, "bias")] if wanted else []


# --- Keras' windows -----------------------------------------------------------


def same_padding(side: int, window: int, stride: int) -> tuple[int, int]:
    """Keras' (and TensorFlow's) ``same`` padding of one axis: the output has
    ``ceil(side / stride)`` positions and the padding they need is split with
    the odd one after (``(0, 1)`` for a 3-wide stride-2 window on 28)."""
    out = -(-side // stride)
    total = max((out - 1) * stride + window - side, 0)
    return total // 2, total - total // 2


class Window(Protocol):
    """The options of a kind that slides a window (a convolution's, a
    pool's records): its (square) side, the step actually taken (Keras'
    default resolved) and ``valid``/``same`` padding."""

    padding: str

    @property
    def window(self) -> int: ...

    @property
    def stride(self) -> int: ...


class Kernel:
    """What a convolution's options record (a frozen dataclass with
    ``kernel_size`` and ``strides`` fields, and ``dilation_rate`` if it
    takes one) takes from here: its ``Window``, whose side is the span of
    the dilated kernel, ``(kernel_size - 1) * dilation_rate + 1``."""

    kernel_size: int
    strides: int
    dilation_rate: int = 1  # a record without the field: a plain kernel

    @property
    def window(self) -> int:
        return (self.kernel_size - 1) * self.dilation_rate + 1

    @property
    def stride(self) -> int:
        return self.strides


def padding_of(layer: Layer, side: int) -> tuple[int, int]:
    """The padding (before, after) ``layer`` puts on an axis of ``side`` (a
    layer computing the mistake ``SYMMETRIC_SAME``: ``window // 2`` each)."""
    o: Window = layer.options
    if layer.mistake == SYMMETRIC_SAME:
        return o.window // 2, o.window // 2
    if o.padding == "same":
        return same_padding(side, o.window, o.stride)
    if o.padding == CAUSAL:
        return o.window - 1, 0
    return 0, 0


def window_out(layer: Layer, side: int) -> int:
    """Positions a convolution or pool ``layer`` gives on an axis of ``side``."""
    o: Window = layer.options
    before, after = padding_of(layer, side)
    return (side + before + after - o.window) // o.stride + 1


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
            f"{layer.kind} layer {layer.name!r}: a window of "
            f"{layer.options.window} does not fit its input {shape[:-1]}"
        )
    return (*out, channels)


def needs_rank(layer: Layer, shape: Shape, ranks: tuple[int, ...], what: str) -> None:
    """A ValueError in one sentence unless ``shape`` has one of ``ranks``."""
    if len(shape) not in ranks:
        raise ValueError(
            f"{layer.kind} layer {layer.name!r} needs {what}, not shape {shape}"
        )
