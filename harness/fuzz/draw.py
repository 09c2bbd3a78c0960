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
with an earlier output of the same shape (a residual).  A layer whose
options do not fit the shape (its kind's own ``shape`` rule says so) is
left out.  A head ends the model in one row of outputs that the drawn loss
takes (``zoo.losses``), and the workload draws an optimizer of
``zoo.optimizers`` with its options.

Hypothesis shrinks what it drew: fewer layers (each layer is behind a
"one more?" choice), smaller sizes, the defaults of options, fewer steps,
a smaller batch, no extra modes.  What it cannot do is leave out the first
layer and start the model where that layer ended (the input shape is drawn
before the layers, so leaving a layer out changes every shape after it):
``cut_first_layer`` writes that model, and the campaign tries it once
Hypothesis is done.

Every kind of ``zoo.kinds.KINDS`` has an entry in ``DRAWS`` or a reason in
``NOT_DRAWN`` (``tests/test_fuzz.py`` names a kind that has neither).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st

from workers.paths import MODE_PATHS
from zoo.kinds import KINDS
from zoo.kinds.base import ACTIVATIONS, INPUT, SLOPED, Layer
from zoo.losses import LOSSES
from zoo.optimizers import CLIPS, OPTIMIZERS, SWITCHES
from zoo.optimizers import defaults as optimizer_defaults
from zoo.user_models import spec_from_document

Shape = tuple[int, ...]
Entry = dict[str, Any]
Draw = st.DrawFn
# Layers of a model's body at most (the head adds two).
MAX_BODY = 6
# The largest side of an image or sequence drawn, and of a layer's width.
MAX_SIDE = 9
MAX_WIDTH = 4
MAX_STEPS = 3
MAX_BATCH = 6
MAX_SEED = 3
# Kinds never drawn, and why.
NOT_DRAWN = {
    "embedding": "drawn as the first layer of a token model, never in the body",
}
_RATES = (0.001, 0.01, 0.1)
_ACTIVATIONS = [a for a in ACTIVATIONS if a is not None]


def _act(draw: Draw) -> str | None:
    return draw(st.sampled_from([None, *_ACTIVATIONS]))


def _regularize(draw: Draw, entry: Entry, shape: Shape) -> None:
    """Sometimes an L1/L2 penalty on one of the layer's trained parameters
    (its kind's own roles), when the kind takes one."""
    if "regularize" not in KINDS[entry["kind"]].options or not draw(st.booleans()):
        return
    from zoo.user_models import _layer

    layer = _layer(entry, 0, None)
    roles = [p.role for p in KINDS[layer.kind].params(layer, (shape,)) if p.trainable]
    if roles:
        l1, l2 = draw(st.sampled_from([(0.01, 0.0), (0.0, 0.01), (0.01, 0.01)]))
        entry["regularize"] = [[draw(st.sampled_from(roles)), l1, l2]]


def _window(draw: Draw, shape: Shape, axes: int) -> dict[str, Any]:
    """A convolution's or pool's kernel, strides and padding for ``axes``
    spatial axes of ``shape``."""
    side = min(shape[:axes])
    kernel = draw(st.integers(1, max(1, min(3, side))))
    return {
        "strides": draw(st.integers(1, 2)),
        "padding": draw(st.sampled_from(["valid", "same"])),
        "kernel": kernel,
    }


def _conv(draw: Draw, shape: Shape, axes: int, filters: bool = True) -> Entry:
    w = _window(draw, shape, axes)
    entry: Entry = {
        "kernel_size": w["kernel"],
        "strides": w["strides"],
        "padding": w["padding"],
        "activation": _act(draw),
        "use_bias": draw(st.booleans()),
    }
    if filters:
        entry["filters"] = draw(st.integers(1, MAX_WIDTH))
    return entry


def _pool(draw: Draw, shape: Shape, axes: int) -> Entry:
    sides = shape[:axes]
    # a window of one pools nothing; an odd window over an edge it does not
    # cover (``same``) is where padding rules differ, so it is drawn first
    windows = [w for w in (3, 2) if w <= min(sides)] or [min(sides)]
    window = draw(st.sampled_from(windows))
    padding = draw(st.sampled_from(["same", "same", "valid"]))
    entry: Entry = {"pool_size": window, "padding": padding}
    # the stride: Keras' default (the window), or 2, 1, 3.  With ``same``
    # padding, a stride that pads one edge alone (an odd total padding on
    # some axis) is drawn four times as often: there one side's padding
    # must not count, and backends have done that differently
    strides: list[int | None] = [None, 2, 1, 3]
    if padding == "same":
        edge = [s for s in strides if any(_odd(n, window, s or window) for n in sides)]
        strides = edge * 3 + strides
    stride = draw(st.sampled_from(strides))
    if stride is not None:
        entry["strides"] = stride
    return entry


def _odd(side: int, window: int, stride: int) -> bool:
    """Whether ``same`` padding of a window over ``side`` steps is odd (one
    edge gets a step more than the other)."""
    out = -(-side // stride)
    return max((out - 1) * stride + window - side, 0) % 2 == 1


def _recurrent(draw: Draw, shape: Shape) -> Entry:
    entry: Entry = {
        "units": draw(st.integers(1, MAX_WIDTH)),
        "return_sequences": draw(st.booleans()),
        "use_bias": draw(st.booleans()),
    }
    return entry


def _bidirectional(draw: Draw, shape: Shape) -> Entry:
    return {
        "units": draw(st.integers(1, MAX_WIDTH)),
        "return_sequences": draw(st.booleans()),
        "use_bias": draw(st.booleans()),
        "cell": draw(st.sampled_from(["lstm", "gru", "simple_rnn"])),
        "merge_mode": draw(st.sampled_from(["concat", "sum", "ave", "mul"])),
    }


def _borders(kind: str) -> Callable[[Draw, Shape], Entry]:
    """Zero padding, cropping or upsampling widths for a sequence or image."""

    def drawn(draw: Draw, shape: Shape) -> Entry:
        sides = 1 if len(shape) == 2 else 2
        if kind == "upsampling":
            return {"size": [draw(st.integers(1, 2)) for _ in range(sides)]}
        widths = [draw(st.integers(0, 2)) for _ in range(2 * sides)]
        word = "padding" if kind == "zero_padding" else "cropping"
        return {word: widths}

    return drawn


def _reshape(draw: Draw, shape: Shape) -> Entry:
    """To a feature row, a sequence of it, or (images) a sequence of rows."""
    size = 1
    for d in shape:
        size *= d
    options: list[list[int]] = [[size], [size, 1]]
    if len(shape) == 3:
        options.append([shape[0] * shape[1], shape[2]])
    if len(shape) == 2:
        options.append([shape[1], shape[0]])
    return {"target_shape": draw(st.sampled_from(options))}


def _permute(draw: Draw, shape: Shape) -> Entry:
    axes = list(range(1, len(shape) + 1))
    return {"dims": draw(st.permutations(axes))}


def _prelu(draw: Draw, shape: Shape) -> Entry:
    shared = list(range(1, len(shape)))  # every axis but the channels
    return {"shared_axes": shared if draw(st.booleans()) else []}


def _activation(draw: Draw, shape: Shape) -> Entry:
    name = draw(st.sampled_from(_ACTIVATIONS))
    entry: Entry = {"activation": name}
    if name in SLOPED and draw(st.booleans()):
        entry["slope"] = draw(st.sampled_from([0.1, 0.5]))
    return entry


@dataclass(frozen=True)
class KindDraw:
    """How to draw one kind: the ranks of input it takes and its options in
    the document's words, given the input shape."""

    ranks: tuple[int, ...]
    options: Callable[[Draw, Shape], Entry]


DRAWS: dict[str, KindDraw] = {
    "dense": KindDraw(
        (1, 2),
        lambda d, s: {
            "units": d(st.integers(1, MAX_WIDTH)),
            "activation": _act(d),
            "use_bias": d(st.booleans()),
        },
    ),
    "conv2d": KindDraw((3,), lambda d, s: _conv(d, s, 2)),
    "conv2d_transpose": KindDraw((3,), lambda d, s: _conv(d, s, 2)),
    "depthwise_conv2d": KindDraw(
        (3,),
        lambda d, s: {
            **_conv(d, s, 2, filters=False),
            "depth_multiplier": d(st.integers(1, 2)),
        },
    ),
    "separable_conv2d": KindDraw(
        (3,),
        lambda d, s: {**_conv(d, s, 2), "depth_multiplier": d(st.integers(1, 2))},
    ),
    "conv1d": KindDraw((2,), lambda d, s: _conv(d, s, 1)),
    "avg_pool": KindDraw((3,), lambda d, s: _pool(d, s, 2)),
    "max_pool": KindDraw((3,), lambda d, s: _pool(d, s, 2)),
    "avg_pool1d": KindDraw((2,), lambda d, s: _pool(d, s, 1)),
    "max_pool1d": KindDraw((2,), lambda d, s: _pool(d, s, 1)),
    "global_avg_pool": KindDraw((2, 3), lambda d, s: {}),
    "global_max_pool": KindDraw((2, 3), lambda d, s: {}),
    "flatten": KindDraw((2, 3), lambda d, s: {}),
    "lstm": KindDraw((2,), _recurrent),
    "gru": KindDraw((2,), _recurrent),
    "simple_rnn": KindDraw((2,), _recurrent),
    "bidirectional": KindDraw((2,), _bidirectional),
    "attention": KindDraw(
        (2,),
        lambda d, s: {
            "num_heads": d(st.integers(1, 2)),
            "key_dim": d(st.integers(1, 3)),
            "use_bias": d(st.booleans()),
        },
    ),
    "dot_attention": KindDraw((2,), lambda d, s: {}),
    "layer_norm": KindDraw(
        (1, 2, 3), lambda d, s: {"epsilon": d(st.sampled_from([0.001, 1e-5]))}
    ),
    "batch_norm": KindDraw(
        (1, 2, 3),
        lambda d, s: {
            "epsilon": d(st.sampled_from([0.001, 1e-5])),
            "momentum": d(st.sampled_from([0.99, 0.5])),
        },
    ),
    "normalization": KindDraw((1, 2, 3), lambda d, s: {}),
    "dropout": KindDraw(
        (1, 2, 3), lambda d, s: {"rate": d(st.sampled_from([0.0, 0.5]))}
    ),
    "activation": KindDraw((1, 2, 3), _activation),
    "prelu": KindDraw((1, 2, 3), _prelu),
    "rescaling": KindDraw(
        (1, 2, 3),
        lambda d, s: {
            "scale": d(st.sampled_from([0.5, 2.0])),
            "offset": d(st.sampled_from([0.0, -0.5])),
        },
    ),
    "reshape": KindDraw((1, 2, 3), _reshape),
    "permute": KindDraw((2, 3), _permute),
    "zero_padding": KindDraw((2, 3), _borders("zero_padding")),
    "cropping": KindDraw((2, 3), _borders("cropping")),
    "upsampling": KindDraw((2, 3), _borders("upsampling")),
}
# The window pools, drawn ``1 + POOLED`` times as often as another kind
# (``_next_layer``): a window's padding at an edge is where backends' rules
# differ most.  Measured (2,000 draws, two seeds): a drawn model holds an
# average pool whose ``same`` padding is odd 0.6-1.4% of the time with the
# pools drawn twice as often and strides drawn evenly, 2.9-3.1% with this
# weight and ``_pool``'s own (docs/findings/README.md).
POOLS = ("avg_pool", "max_pool", "avg_pool1d", "max_pool1d")
POOLED = 2
# The merges: drawn after a layer, with an earlier output of its shape.
MERGES = ("add", "subtract", "multiply", "average", "maximum", "minimum", "concatenate")


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


def _head(draw: Draw, shape: Shape, last: str, loss: str) -> list[Entry]:
    """Layers that end the model in one row of outputs ``loss`` takes."""
    entries: list[Entry] = []
    if len(shape) > 1:
        kind = draw(st.sampled_from(["flatten", "global_avg_pool", "global_max_pool"]))
        entries.append({"kind": kind, "name": "head_" + kind, "inputs": [last]})
    facts = LOSSES[loss]
    units = draw(st.integers(max(1, facts.least_outputs), MAX_WIDTH))
    entries.append({"kind": "dense", "name": "outputs", "units": units})
    return entries


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
    entry: Entry = {"kind": kind, "name": name, **DRAWS[kind].options(draw, shape)}
    inputs = [source, source] if kind == "dot_attention" else [source]
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
    loss = draw(st.sampled_from(sorted(LOSSES)))
    layers += _head(draw, outputs[-1][1], outputs[-1][0], loss)
    from_logits = draw(st.booleans()) if LOSSES[loss].takes_logits else False
    if not from_logits and LOSSES[loss].activation is not None:
        layers[-1]["activation"] = LOSSES[loss].activation
    optimizer = draw(st.sampled_from(list(OPTIMIZERS)))
    workload: dict[str, Any] = {
        "optimizer": optimizer,
        "learning_rate": draw(st.sampled_from(_RATES)),
        "loss": loss,
        "from_logits": from_logits,
    }
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
    document = {"input_shape": input_shape, "layers": layers, "workload": workload}
    try:
        spec_from_document("drawn", document)
    except ValueError:
        reject()  # a combination the per-layer rules let through
    modes = tuple(
        draw(st.lists(st.sampled_from(sorted(MODE_PATHS)), max_size=2, unique=True))
    )
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
    or the first layer's output is not an input a model may have."""
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
