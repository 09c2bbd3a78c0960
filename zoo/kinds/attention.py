"""``attention``: Keras' ``MultiHeadAttention`` over one sequence ``(T, F)``
as query, key and value (self-attention), as ``EinsumDense`` sublayers:
``query``, ``key`` and ``value`` kernels ``(F, heads, key_dim)`` with
biases ``(heads, key_dim)``, the output kernel ``(heads, key_dim, F)`` with
bias ``(F,)``.  ``size`` is ``key_dim``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds.base import (
    ACTIVATION_FLOPS,
    Kind,
    Layer,
    Mask,
    Mistake,
    Param,
    Pick,
    Shape,
)

# The arguments a MultiHeadAttention call may pass beyond its tensors, each
# only at its default (a mask, a causal mask, the scores as a second output
# would all compute something else).
CALL_TENSORS = ("query", "value", "key")


@dataclass(frozen=True)
class Options:
    """Keras' ``MultiHeadAttention`` arguments: ``num_heads`` heads of
    ``key_dim`` each, whether its kernels have biases, and the rate of the
    ``dropout`` of its weights in a training step (``masks``)."""

    num_heads: int
    key_dim: int
    use_bias: bool = True
    dropout: float = 0.0


def masks(layer: Layer) -> tuple[Mask, ...]:
    """The masks ``layer`` draws in a training step with ``dropout``: Keras
    3.15's ``MultiHeadAttention`` drops its weights after the softmax (its
    ``_dropout_layer``, a ``Dropout`` drawing per value), so one mask per
    head of every query's weight of every key."""
    rate = layer.options.dropout
    if not rate:
        return ()
    count = layer.options.num_heads
    return (Mask(f"{layer.name}/score_masks", "", "scores", count, rate, "dropout"),)


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    if not 0.0 <= layer.options.dropout < 1.0:
        raise ValueError(
            f"attention layer {layer.name!r} has dropout {layer.options.dropout!r}; "
            "it must be at least 0 and below 1"
        )
    if len(shapes[0]) != 2:
        raise ValueError(
            f"attention layer {layer.name!r} needs a sequence (T, F), not {shapes[0]}"
        )
    return shapes[0]


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, features = layer.name, shapes[0][-1]
    heads, key_dim = layer.options.num_heads, layer.options.key_dim
    found = []
    for part in ("query", "key", "value"):
        found.append(
            Param(
                f"{n}/{part}/kernel",
                (features, heads, key_dim),
                "attention_kernel",
                n,
                f"{part}/kernel",
            )
        )
        if layer.options.use_bias:
            found.append(
                Param(
                    f"{n}/{part}/bias",
                    (heads, key_dim),
                    "attention_bias",
                    n,
                    f"{part}/bias",
                )
            )
    found.append(
        Param(
            f"{n}/attention_output/kernel",
            (heads, key_dim, features),
            "attention_output",
            n,
            "attention_output/kernel",
        )
    )
    if layer.options.use_bias:
        found.append(
            Param(
                f"{n}/attention_output/bias",
                (features,),
                "bias",
                n,
                "attention_output/bias",
            )
        )
    return found


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    """The four projections and the two products of every query with every
    key as matmul; their biases, the query's scaling and the softmax (3 per
    score) as elementwise."""
    steps, features = shapes[0]
    width = (
        layer.options.num_heads * layer.options.key_dim
    )  # all heads' key_dim together
    projections = 3 * 2 * steps * features * width + 2 * steps * width * features
    mixing = 2 * (2 * steps * steps * width)  # q . k, then weights . v
    biases = 3 * steps * width + steps * features if layer.options.use_bias else 0
    softmax = ACTIVATION_FLOPS["softmax"] * layer.options.num_heads * steps * steps
    return projections + mixing, biases + steps * width + softmax


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    return keras.layers.MultiHeadAttention(
        layer.options.num_heads,
        layer.options.key_dim,
        use_bias=layer.options.use_bias,
        dropout=layer.options.dropout,
        name=layer.name,
    )


def keras_call(block: Any, tensors: list[Any]) -> Any:
    return block(tensors[0], tensors[0])  # the sequence as query and value


_MUST = (
    ("output_shape", None),
    ("use_gate", False),
    ("sliding_window", None),
    ("kernel_regularizer", None),
    ("bias_regularizer", None),
    *kw.REGULARIZED,
)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    """Heads and key_dim, the other shape options checked to be Keras'
    defaults for self-attention over a sequence."""
    kw.must(cls, name, config, _MUST)
    key_dim, value_dim = config.get("key_dim"), config.get("value_dim")
    if value_dim is not None and value_dim != key_dim:
        raise ValueError(
            f"MultiHeadAttention layer {name!r} has value_dim={value_dim!r} and "
            f"key_dim={key_dim!r}; the tool computes value_dim equal to key_dim "
            "(or None) only"
        )
    # Built on a sequence (B, T, F), Keras writes its default axes as [1].
    axes = config.get("attention_axes")
    if axes not in (None, 1, [1]):
        raise ValueError(
            f"MultiHeadAttention layer {name!r} has attention_axes={axes!r}; the "
            "tool computes attention over a sequence's steps only (None)"
        )
    return {
        "kind": "attention",
        "name": name,
        "num_heads": config.get("num_heads"),
        "key_dim": key_dim,
        **kw.bias_words(config),
        # left out at 0, so a file read before keeps its digest
        **({"dropout": config["dropout"]} if config.get("dropout") else {}),
    }


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    drawn = {
        "num_heads": pick.integer(1, 2),
        "key_dim": pick.integer(1, 3),
        "use_bias": pick.boolean(),
    }
    dropout = pick.one_of([0.0, 0.2])
    return drawn | ({"dropout": dropout} if dropout else {})


def heads_interleaved(a: Any, p: Param) -> Any:
    # A projection (F, heads * key_dim) split into heads as (key_dim, heads):
    # what a hand-written reshape gets wrong when it takes heads innermost.
    features, heads, key_dim = a.shape
    return a.reshape(features, key_dim, heads).transpose(0, 2, 1).copy()


def unscaled(
    layer: Layer, spec: Any, weights: Mapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    # Scores q . k without Keras' 1 / sqrt(key_dim): what the correct pass
    # computes from a query projection sqrt(key_dim) times larger.
    query = (f"{layer.name}/query/kernel", f"{layer.name}/query/bias")
    return spec, {
        name: a * a.dtype.type(math.sqrt(layer.options.key_dim)) if name in query else a
        for name, a in weights.items()
    }


MISTAKES = (
    Mistake(
        "attention-heads-interleaved",
        "attention's query, key and value kernels split into heads as "
        "(key_dim, heads), not (heads, key_dim)",
        "transformer-tiny",
        params="attention_kernel",
        corrupt=heads_interleaved,
    ),
    Mistake(
        "attention-unscaled",
        "attention scores q . k without the 1 / sqrt(key_dim) scaling",
        "transformer-tiny",
        inject=unscaled,
    ),
)


KIND = Kind(
    name="attention",
    summary="multi-head self-attention over a sequence",
    options=Options,
    shape=shape,
    params=params,
    flops=flops,
    keras=keras,
    keras_classes=("MultiHeadAttention",),
    read=read,
    keras_call=keras_call,
    draw=draw,
    draw_ranks=(2,),
    masks=masks,
    mistakes=MISTAKES,
)
