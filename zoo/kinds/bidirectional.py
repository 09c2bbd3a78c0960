"""``bidirectional``: Keras' ``Bidirectional`` over an ``lstm``, ``gru`` or
``simple_rnn``
(``cell``) of ``units``: one copy reads the sequence forward, a second
(its own weights) reads it backward, and their outputs merge by
``merge_mode``:
``concat`` (forward then backward along the features, ``2 * units``),
``sum``, ``ave`` or ``mul``.  With ``return_sequences`` the backward
copy's steps are put back in time order before the merge (Keras' flip),
so step ``t`` merges both copies' states at ``t``; without it each gives
its last state (the backward copy's after reading step 0).  Each copy has
its cell's parameters under ``forward/`` and ``backward/`` (Keras' paths
``<name>/forward_<cell>/...`` and ``<name>/backward_<cell>/...``)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from zoo.kinds import gru, lstm, recurrent, simple_rnn
from zoo.kinds.base import Kind, Layer, Mistake, Param, Pick, Shape

CELLS = {"lstm": lstm.KIND, "gru": gru.KIND, "simple_rnn": simple_rnn.KIND}
MERGES = ("concat", "sum", "ave", "mul")
DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class Options:
    """Keras' ``Bidirectional`` arguments: the recurrent ``cell`` it wraps
    (``lstm``, ``gru`` or ``simple_rnn``: the kind of Keras' ``layer``) with
    that layer's ``units``, ``return_sequences``, ``use_bias`` and cell
    ``activation``, input ``dropout`` and ``recurrent_dropout``
    (``recurrent.Recurrent``; each direction's cell draws its own masks,
    as Keras' two copies of the layer do: ``recurrent.cell_masks``), and the
    ``merge_mode`` of the two directions."""

    units: int
    merge_mode: str
    cell: str
    return_sequences: bool = False
    use_bias: bool = True
    activation: str | None = recurrent.TANH
    dropout: float = 0.0
    recurrent_dropout: float = 0.0


def cell_layer(layer: Layer) -> Layer:
    """The recurrent layer each direction runs (named as the cell)."""
    o: Options = layer.options
    options = recurrent.Recurrent(
        o.units,
        o.return_sequences,
        o.use_bias,
        o.activation,
        o.dropout,
        o.recurrent_dropout,
    )
    return Layer(o.cell, o.cell, options)


def _check(layer: Layer) -> None:
    o: Options = layer.options
    if o.cell not in CELLS or o.merge_mode not in MERGES:
        raise ValueError(
            f"bidirectional layer {layer.name!r} needs a cell ({', '.join(CELLS)}) "
            f"and a merge_mode ({', '.join(MERGES)}), not {o.cell!r} and "
            f"{o.merge_mode!r}"
        )


def shape(layer: Layer, shapes: tuple[Shape, ...]) -> Shape:
    _check(layer)
    one = recurrent.shape(cell_layer(layer), shapes)
    concat = layer.options.merge_mode == "concat"
    return (*one[:-1], 2 * one[-1]) if concat else one


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    _check(layer)
    found = []
    for direction in DIRECTIONS:
        inner = dataclasses.replace(cell_layer(layer), name=f"{layer.name}/{direction}")
        for p in CELLS[layer.options.cell].params(inner, shapes):
            found.append(
                dataclasses.replace(p, layer=layer.name, role=f"{direction}/{p.role}")
            )
    return found


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    o: Options = layer.options
    one = recurrent.shape(cell_layer(layer), shapes)
    matmul, elementwise = CELLS[o.cell].flops(cell_layer(layer), shapes, one)
    merged = 0 if o.merge_mode == "concat" else math.prod(one)  # concat: a copy
    return 2 * matmul, 2 * elementwise + merged


def keras(keras: Any, layer: Layer, shapes: tuple[Shape, ...]) -> Any:
    o: Options = layer.options
    inner = CELLS[o.cell].keras(keras, cell_layer(layer), shapes)
    return keras.layers.Bidirectional(inner, merge_mode=o.merge_mode, name=layer.name)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    merge = config.get("merge_mode", "concat")
    if merge not in MERGES:
        raise ValueError(
            f"Bidirectional layer {name!r} has merge_mode={merge!r}; the tool "
            f"computes {', '.join(MERGES)} (None gives two outputs)"
        )
    inner = config.get("layer") or {}
    cell_class = str(inner.get("class_name"))
    cell = next(
        (k for k, kind in CELLS.items() if cell_class in kind.keras_classes), None
    )
    if cell is None:
        raise ValueError(
            f"Bidirectional layer {name!r} wraps a {cell_class}; the tool computes "
            "it over an LSTM, a GRU or a SimpleRNN"
        )
    forward = inner.get("config") or {}
    words = CELLS[cell].read(cell_class, name, forward, built)
    backward = (config.get("backward_layer") or {}).get("config")
    if backward is not None:  # written by Keras: the forward one's mirror
        mirrored = {**backward, "go_backwards": not backward.get("go_backwards")}
        if CELLS[cell].read(cell_class, name, mirrored, built) != words:
            raise ValueError(
                f"Bidirectional layer {name!r} has a backward layer of its own "
                "options; the tool computes one that mirrors the forward layer"
            )
    if "regularize" in words:
        raise ValueError(
            f"Bidirectional layer {name!r} regularizes its {cell_class}'s weights, "
            "which the tool does not compute; remove the regularizer"
        )
    return {**words, "kind": "bidirectional", "cell": cell, "merge_mode": merge}


def draw(pick: Pick, shape: Shape) -> dict[str, Any]:
    return recurrent.draw(pick, shape) | {
        "cell": pick.one_of(list(CELLS)),
        "merge_mode": pick.one_of(list(MERGES)),
    }


def directions_swapped(
    layer: Layer, spec: Any, weights: Mapping[str, Any]
) -> tuple[Any, dict[str, Any]]:
    # A loader that reads backward_lstm's weights into the forward copy.
    swapped = dict(weights)
    for p in spec.params:
        if p.layer == layer.name and p.role.startswith("forward/"):
            other = p.name.replace("/forward/", "/backward/")
            swapped[p.name], swapped[other] = weights[other], weights[p.name]
    return spec, swapped


MISTAKES = (
    Mistake(
        "directions-swapped",
        "a bidirectional layer's forward and backward weights exchanged",
        "kinds-seq",
        inject=directions_swapped,
    ),
)


KIND = Kind(
    name="bidirectional",
    summary="an LSTM, GRU or SimpleRNN read forward and backward, merged",
    options=Options,
    shape=shape,
    inner_activation=True,
    masks=lambda layer: recurrent.cell_masks(layer, layer.options.cell, DIRECTIONS),
    params=params,
    flops=flops,
    keras=keras,
    keras_classes=("Bidirectional",),
    read=read,
    draw=draw,
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
