"""What ``harness fuzz`` draws: a valid model from the whole vocabulary, as
the document a ``[model]`` table holds (``zoo.user_models``), and the case
it is checked on.

A model is drawn layer by layer from its input: images ``(H, W, C)``, a
sequence ``(T, F)`` (an image without a channel axis reads as one), a
feature row ``(F,)``, or token ids ``(T,)`` that an embedding starts on.
Each step draws a kind that takes the current shape (``DRAWS``: per kind,
the ranks it takes and its options in the document's words, at sizes a
2-core machine checks in seconds), sometimes from an earlier layer's
output instead of the last one (a branch), sometimes followed by a merge
with an earlier output of the same shape (a residual).  Each kind's module
holds its draw (``Kind.draw``, ``Kind.draw_ranks``, asking a
``zoo.kinds.base.Pick`` that this module answers on Hypothesis); the
tables here (``DRAWS``, ``NOT_DRAWN``, ``POOLS``, ``MERGES``) are read from
``zoo.kinds.KINDS``, so a new kind is drawn without an edit here.  A layer whose
options do not fit the shape (its kind's own ``shape`` rule says so) is
left out.  A head ends the model in outputs that the drawn loss takes
(``zoo.losses``): one row per example, or an output per step or per pixel
(a tagger's, a U-Net's); sometimes a second head with its own loss and
weight, and a second input, a feature row joined to the row before the
head (issue 78).  The workload draws an optimizer of ``zoo.optimizers``
with its options.

Hypothesis shrinks what it drew: fewer layers (each layer is behind a
"one more?" choice), smaller sizes, the defaults of options, fewer steps,
a smaller batch, no extra modes.  What it cannot do is leave out the first
layer and start the model where that layer ended (the input shape is drawn
before the layers, so leaving a layer out changes every shape after it):
``cut_first_layer`` writes that model, and the campaign tries it once
Hypothesis is done.

Every kind of ``zoo.kinds.KINDS`` is drawn as a layer (a draw), as a
merge (several inputs, no draw) or says why not (``Kind.not_drawn``);
``tests/test_fuzz.py`` names a kind that does none, with its module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from hypothesis import reject
from hypothesis import strategies as st

from workers.paths import MODE_PATHS
from zoo.kinds import KINDS
from zoo.kinds.base import INPUT, Kind, Layer, Pick
from zoo.losses import LOSSES
from zoo.optimizers import CLIPS, OPTIMIZERS, SWITCHES
from zoo.optimizers import defaults as optimizer_defaults
from zoo.user_models import spec_from_document

Shape = tuple[int, ...]
Entry = dict[str, Any]
Draw = st.DrawFn
T = TypeVar("T")
# Layers of a model's body at most (the head adds two).
MAX_BODY = 6
# The largest side of an image or sequence drawn, and of a layer's width.
MAX_SIDE = 9
MAX_WIDTH = 4
MAX_STEPS = 3
MAX_BATCH = 6
MAX_SEED = 3
_RATES = (0.001, 0.01, 0.1)
# A second output's weight in the total loss (the first's is 1).
_LOSS_WEIGHTS = (1.0, 0.5, 0.2)
# One draw in ``_SOMETIMES`` ends a sequence or image in an output per
# position; one in ``_RARELY`` adds a second input, or a second output.
_SOMETIMES = 3
_RARELY = 4
_IMAGE = 3  # an image's rank (H, W, C)
# One draw in ``_MODED`` is also checked in one or two modes (a path
# compiled or jitted: ``workers.paths.MODE_PATHS``).  A mode costs a worker's
# start and a compile: drawn as often as Hypothesis' lists draw them (a mode
# in two models of three), the models with modes took three quarters of a
# 10-minute campaign's time at 30 s each, against 5.6 s without; one in four,
# still 360 s of 610, a compiled PyTorch model 50 to 66 s
# (docs/results/fuzz/README.md).
_MODED = 8
# The layers a row head puts before its dense layer on a sequence or image,
# each named ``<head>_<kind>`` (``is_row_layer``).
ROW_KINDS = ("flatten", "global_avg_pool", "global_max_pool")
HEAD_NAMES = ("outputs", "outputs_2")


@dataclass(frozen=True)
class _Picked:
    """``zoo.kinds.base.Pick`` on Hypothesis' draw: what a kind's draw asks
    for, as one strategy each (so Hypothesis shrinks each answer)."""

    draw: Draw

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def one_of(self, options: Sequence[T]) -> T:
        return self.draw(st.sampled_from(options))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def permutation(self, items: Sequence[T]) -> list[T]:
        return self.draw(st.permutations(items))

    def width(self) -> int:
        return self.draw(st.integers(1, MAX_WIDTH))


def _regularize(draw: Draw, entry: Entry, shape: Shape) -> None:
    """Sometimes an L1/L2 penalty on one of the layer's trained parameters
    (its kind's own roles), when the kind takes one."""
    if not KINDS[entry["kind"]].regularized or not draw(st.booleans()):
        return
    from zoo.user_models import _layer

    layer = _layer(entry, 0, None)
    roles = [p.role for p in KINDS[layer.kind].params(layer, (shape,)) if p.trainable]
    if roles:
        l1, l2 = draw(st.sampled_from([(0.01, 0.0), (0.0, 0.01), (0.01, 0.01)]))
        entry["regularize"] = [[draw(st.sampled_from(roles)), l1, l2]]


@dataclass(frozen=True)
class KindDraw:
    """How to draw one kind (its ``Kind.draw_ranks`` and ``Kind.draw``): the
    ranks of input it takes and its options in the document's words, given
    the input shape."""

    ranks: tuple[int, ...]
    options: Callable[[Pick, Shape], Entry]


@dataclass(frozen=True)
class Vocabulary:
    """What the fuzzer draws, from the kinds' own records: ``draws`` the
    kinds drawn as a layer, ``not_drawn`` each kind never drawn with why,
    ``pools`` the window pools (``Kind.pool``), ``merges`` the kinds drawn
    as a merge (several inputs and no draw of their own), each in the
    registry's order."""

    draws: dict[str, KindDraw]
    not_drawn: dict[str, str]
    pools: tuple[str, ...]
    merges: tuple[str, ...]


def vocabulary(kinds: Mapping[str, Kind]) -> Vocabulary:
    """The vocabulary ``kinds`` give (``zoo.kinds.KINDS``: the fuzzer's)."""
    return Vocabulary(
        draws={
            name: KindDraw(kind.draw_ranks, kind.draw)
            for name, kind in kinds.items()
            if kind.draw is not None
        },
        not_drawn={n: k.not_drawn for n, k in kinds.items() if k.not_drawn},
        pools=tuple(n for n, k in kinds.items() if k.pool),
        merges=tuple(n for n, k in kinds.items() if k.takes != 1 and k.draw is None),
    )


_VOCABULARY = vocabulary(KINDS)
DRAWS = _VOCABULARY.draws
NOT_DRAWN = _VOCABULARY.not_drawn
# The window pools, drawn ``1 + POOLED`` times as often as another kind
# (``_next_layer``): a window's padding at an edge is where backends' rules
# differ most.  With the pools' own draw (``zoo.kinds.pooling``: a window of
# three twice as often as two, a stride that pads one edge alone ten times
# as often as another), how often a drawn model holds a pool on which Keras
# on PyTorch is wrong, and how often ten campaigns met it:
# docs/results/fuzz/README.md (``docs/results/fuzz/rediscovery.py``).
POOLS = _VOCABULARY.pools
POOLED = 4
# The merges: drawn after a layer, with an earlier output of its shape.
MERGES = _VOCABULARY.merges


def _shape_of(entry: Entry, shapes: tuple[Shape, ...]) -> Shape | None:
    """The output shape of a document entry for the given input shapes, or
    ``None`` when its kind's rule refuses them (or the entry's options)."""
    from zoo.user_models import _layer  # the document reader's own rule

    try:
        layer: Layer = _layer(entry, 0, None)
        return tuple(KINDS[layer.kind].shape(layer, shapes))
    except (ValueError, KeyError, TypeError, ZeroDivisionError):
        return None


@st.composite
def _input(draw: Draw) -> tuple[list[int], list[Entry]]:
    """The input shape, and for token ids the embedding that starts on them."""
    form = draw(st.sampled_from(["features", "sequence", "image", "tokens"]))
    if form == "features":
        return [draw(st.integers(1, 8))], []
    if form == "sequence":
        return [draw(st.integers(2, MAX_SIDE)), draw(st.integers(1, 4))], []
    if form == "image":
        side = st.integers(3, MAX_SIDE)
        return [draw(side), draw(side), draw(st.integers(1, 3))], []
    length = draw(st.integers(2, MAX_SIDE))
    embedding = {
        "kind": "embedding",
        "name": "embedding",
        "input_dim": draw(st.integers(2, 6)),  # few ids: tokens repeat
        "output_dim": draw(st.integers(1, MAX_WIDTH)),
    }
    return [length], [embedding]


def _head(
    draw: Draw, shape: Shape, last: str, loss: str, name: str = "outputs"
) -> list[Entry]:
    """Layers that end the model in outputs ``loss`` takes, from ``last``
    (of ``shape``), the last one named ``name``: one row per example (a
    sequence or an image flattened or pooled first), or, drawn less often
    and shrinking to the row, an output per position (a dense layer on
    every step of a sequence, a 1x1 convolution on every pixel of an
    image), as a tagger or a U-Net ends."""
    facts = LOSSES[loss]
    units = draw(st.integers(max(1, facts.least_outputs), MAX_WIDTH))
    entries: list[Entry] = []
    per_position = False
    if len(shape) > 1:
        # the row's layer is drawn either way, so that a model shrinks to
        # the row head (the smaller choice) with nothing else moved
        kind = draw(st.sampled_from(ROW_KINDS))
        per_position = draw(st.integers(0, _SOMETIMES - 1)) == _SOMETIMES - 1
        if not per_position:
            entries.append({"kind": kind, "name": f"{name}_{kind}", "inputs": [last]})
            last = entries[-1]["name"]
    if per_position and len(shape) == _IMAGE:
        head = {"kind": "conv2d", "name": name, "filters": units, "kernel_size": 1}
    else:
        head = {"kind": "dense", "name": name, "units": units}
    return [*entries, {**head, "inputs": [last]}]


def is_row_layer(entry: Entry) -> bool:
    """Whether a drawn document's layer is the row layer of a head (the
    flatten or pool before its dense layer), not a layer of its body."""
    return entry["kind"] in ROW_KINDS and entry["name"] in {
        f"{head}_{entry['kind']}" for head in HEAD_NAMES
    }


def _activate(draw: Draw, head: Entry, loss: str) -> bool:
    """Draw ``from_logits`` for ``loss``; a loss from probabilities (or
    counts) gets its activation on ``head``, the output layer."""
    from_logits = draw(st.booleans()) if LOSSES[loss].takes_logits else False
    if not from_logits and LOSSES[loss].activation is not None:
        head["activation"] = LOSSES[loss].activation
    return from_logits


@dataclass(frozen=True)
class _Ends:
    """How a drawn model ends: each output's loss and ``from_logits``, and
    the width of a second input (``None``: one input)."""

    losses: list[str]
    from_logits: list[bool]
    side: int | None


def _ends(draw: Draw, layers: list[Entry], outputs: list[tuple[str, Shape]]) -> _Ends:
    """Append the model's head, and sometimes a second, to ``layers``
    (``outputs``: every output a head may start from, the last layer's
    last).  A row head may take a second input, a feature row concatenated
    to the row it takes (Wide & Deep's wide part); a second head starts from
    any layer's output, with its own loss, as a multi-task model ends.
    Each is drawn one time in four and shrinks to none."""
    loss = draw(st.sampled_from(sorted(LOSSES)))
    last, shape = outputs[-1]
    head = _head(draw, shape, last, loss)
    side = None
    row_head = head[-1]["kind"] == "dense" and (len(head) > 1 or len(shape) == 1)
    if row_head and draw(st.integers(0, 3)) == _RARELY - 1:
        side = draw(st.integers(1, 4))
        row = head[-1]["inputs"][0]
        joined = {"kind": "concatenate", "name": "joined", "inputs": [row, "side"]}
        head = [*head[:-1], joined, {**head[-1], "inputs": ["joined"]}]
    layers += head
    losses, from_logits = [loss], [_activate(draw, layers[-1], loss)]
    if draw(st.integers(0, 3)) == _RARELY - 1:
        source, at = draw(st.sampled_from(outputs))
        losses.append(draw(st.sampled_from(sorted(LOSSES))))
        layers += _head(draw, at, source, losses[1], name=HEAD_NAMES[1])
        from_logits.append(_activate(draw, layers[-1], losses[1]))
    return _Ends(losses, from_logits, side)


@dataclass(frozen=True)
class Drawn:
    """One drawn check: the model's document, and the case it runs on."""

    document: dict[str, Any]
    seed: int
    batch_size: int
    steps: int
    modes: tuple[str, ...]


@st.composite
def _next_layer(
    draw: Draw, outputs: tuple[tuple[str, Shape], ...], position: int
) -> list[tuple[Entry, Shape]]:
    """The next layer after ``outputs`` (every earlier output, the last one
    last), and the merge that joins it where one is drawn, each with its
    output shape; nothing when the options drawn do not fit."""
    last, shape = outputs[-1]
    source = last
    if len(outputs) > 1 and draw(st.integers(0, 3)) == 3:  # a branch (shrinks to none)
        source, shape = draw(st.sampled_from(outputs[:-1]))
    kinds = sorted(k for k, d in DRAWS.items() if len(shape) in d.ranks)
    # the window pools more often: a window's padding at an edge is where
    # backends' rules differ most
    kind = draw(st.sampled_from(kinds + [k for k in kinds if k in POOLS] * POOLED))
    name = f"{kind}_{position}"
    options = DRAWS[kind].options(_Picked(draw), shape)
    entry: Entry = {"kind": kind, "name": name, **options}
    # a kind of several inputs drawn as a layer (dot attention) takes the
    # one output as each of two
    inputs = [source] * (1 if KINDS[kind].takes == 1 else 2)
    if inputs != [last]:
        entry["inputs"] = inputs
    made = _shape_of(entry, tuple(shape for _ in inputs))
    if made is None or not all(made) or len(made) > 3:
        return []  # options that do not fit the shape: left out
    _regularize(draw, entry, shape)
    # a branch joins the last output again, or the last would feed nothing
    partner = last if source != last else None
    if partner is None and draw(st.integers(0, 2)) == 2:  # a residual (shrinks to none)
        same = [n for n, s in outputs if s == made]
        partner = draw(st.sampled_from(same)) if same else None
    if partner is None:
        return [(entry, made)]
    merge = draw(st.sampled_from(MERGES))
    joined: Entry = {
        "kind": merge,
        "name": f"{merge}_{position}",
        "inputs": [name, partner],
    }
    merged = _shape_of(joined, (made, dict(outputs)[partner]))
    if merged is None:  # a branch that cannot join is left out
        return [] if source != last else [(entry, made)]
    return [(entry, made), (joined, merged)]


def _modes(draw: Draw) -> tuple[str, ...]:
    """The modes a drawn model is also checked in: none, or one draw in
    ``_MODED`` one or two (shrinking to none)."""
    if draw(st.integers(0, _MODED - 1)) < _MODED - 1:
        return ()
    some = st.lists(
        st.sampled_from(sorted(MODE_PATHS)), min_size=1, max_size=2, unique=True
    )
    return tuple(draw(some))


@st.composite
def drawn_models(draw: Draw) -> Drawn:
    """A valid model and its case (see the module docstring)."""
    input_shape, layers = draw(_input())
    # every output a later layer may take (token ids only the embedding)
    outputs: list[tuple[str, Shape]] = [(INPUT, tuple(input_shape))]
    if layers:
        outputs = [("embedding", (input_shape[0], layers[0]["output_dim"]))]
    position = 0
    while position < MAX_BODY and draw(st.integers(0, 3)) > 0:  # one more?
        position += 1
        # one layer (and its merge) is one draw, so that Hypothesis can
        # shrink a model by leaving a whole layer out
        added = draw(_next_layer(tuple(outputs), position))
        for entry, made in added:
            layers.append(entry)
            outputs.append((entry["name"], made))
    ends = _ends(draw, layers, outputs)
    optimizer = draw(st.sampled_from(list(OPTIMIZERS)))
    workload: dict[str, Any] = {
        "optimizer": optimizer,
        "learning_rate": draw(st.sampled_from(_RATES)),
        "loss": ends.losses[0],
        "from_logits": ends.from_logits[0],
    }
    document: dict[str, Any] = {"input_shape": input_shape}
    if ends.side is not None:
        document = {
            "inputs": [
                {"name": INPUT, "shape": input_shape},
                {"name": "side", "shape": [ends.side]},
            ]
        }
    taken = {option for loss in ends.losses for option in LOSSES[loss].options}
    for option, values in _LOSS_OPTION_VALUES.items():  # shrinks to the default
        value = draw(st.sampled_from((None, *values))) if option in taken else None
        if value is not None:
            workload[option] = value
    if len(ends.losses) > 1:
        workload["loss"], workload["from_logits"] = ends.losses, ends.from_logits
        workload["loss_weights"] = [1.0, draw(st.sampled_from(_LOSS_WEIGHTS))]
        document["outputs"] = ["outputs", "outputs_2"]
    for option, default in optimizer_defaults(optimizer).items():
        if option in ("beta_1", "beta_2", "epsilon", *CLIPS) or not draw(st.booleans()):
            continue  # Keras' default (constants are drawn as options are set)
        workload[option] = (
            not default
            if option in SWITCHES
            else draw(st.sampled_from(_OPTION_VALUES[option]))
        )
    clip = draw(st.sampled_from((None, *CLIPS)))  # Keras takes one at most
    if clip is not None:
        workload[clip] = draw(st.sampled_from(_OPTION_VALUES[clip]))
    schedule = draw(st.sampled_from(_SCHEDULES))
    if schedule is not None:
        workload["schedule"] = schedule
    batch_size = draw(st.integers(1, MAX_BATCH))
    workload["batch_size"] = batch_size
    document.update(layers=layers, workload=workload)
    try:
        spec_from_document("drawn", document)
    except ValueError:
        reject()  # a combination the per-layer rules let through
    modes = _modes(draw)
    return Drawn(
        document,
        seed=draw(st.integers(0, MAX_SEED)),
        batch_size=batch_size,
        steps=draw(st.integers(0, MAX_STEPS)),
        modes=modes,
    )


def cut_first_layer(document: dict[str, Any]) -> dict[str, Any] | None:
    """The model that starts where ``document``'s first layer ends: that
    layer's output shape as the input, every later layer as it was (one
    that took the first layer's output by name takes the input).  ``None``
    when that is not the same model less one layer: the first layer is an
    embedding (the input is token ids), a later layer takes the input too,
    or the first layer's output is not an input a model may have, or the
    model has a second input."""
    if "input_shape" not in document:
        return None
    first, *rest = document["layers"]
    if first["kind"] == "embedding" or not rest:
        return None
    if any(INPUT in entry.get("inputs", ()) for entry in rest):
        return None
    taken = tuple(tuple(document["input_shape"]) for _ in first.get("inputs", [INPUT]))
    shape = _shape_of(first, taken)
    if shape is None or not all(shape) or not 1 <= len(shape) <= 3:
        return None
    cut = []
    for entry in rest:
        kept = dict(entry)
        if "inputs" in kept:
            named = kept["inputs"]
            kept["inputs"] = [INPUT if n == first["name"] else n for n in named]
        cut.append(kept)
    made = {**document, "input_shape": list(shape), "layers": cut}
    try:
        spec_from_document("cut", made)
    except ValueError:
        return None
    return made


# The values an option is drawn from when it is set (Keras' default is the
# other choice).
_OPTION_VALUES: dict[str, list[float]] = {
    "momentum": [0.5, 0.9],
    "rho": [0.5],
    "initial_accumulator_value": [0.0, 1.0],
    "weight_decay": [0.01, 0.1],
    # at sizes that act on a drawn model's gradients
    "clipnorm": [0.01, 1.0],
    "global_clipnorm": [0.01, 1.0],
    "clipvalue": [0.001, 0.1],
}
# The options of the losses that take them (``zoo.losses.Objective``), other
# than Keras' defaults, as a workload may draw them.
_LOSS_OPTION_VALUES: dict[str, tuple[float, ...]] = {
    "label_smoothing": (0.1, 0.2),
    "gamma": (1.0, 3.0),
    "alpha": (0.25, 0.6),
}
# The learning rate's schedules a workload may draw (None: constant), each
# moving the rate within the few steps a check takes.
_SCHEDULES: list[dict[str, Any] | None] = [
    None,
    {"kind": "exponential_decay", "decay_steps": 1, "decay_rate": 0.5},
    {
        "kind": "inverse_time_decay",
        "decay_steps": 2,
        "decay_rate": 1.0,
        "staircase": True,
    },
    {"kind": "cosine_decay", "decay_steps": 3, "alpha": 0.1},
    {
        "kind": "cosine_decay",
        "decay_steps": 3,
        "warmup_steps": 2,
        "warmup_target": 0.01,
    },
    {
        "kind": "piecewise_constant_decay",
        "boundaries": [0, 1],
        "values": [0.01, 0.003, 0.001],
    },
]
