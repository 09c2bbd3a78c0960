"""``lstm``: Keras' ``LSTM`` over a sequence ``(T, F)``: the last hidden state
``(u,)``, or every step's ``(T, u)`` with ``return_sequences``.  Kernel
``(in, 4u)``, recurrent kernel ``(u, 4u)``, bias ``(4u,)``, gates in the
order ``i, f, c, o``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.kinds import recurrent
from zoo.kinds.base import Example, Kind, Layer, Mistake, Param, Shape

# 3 sigmoids + 2 tanh + 3 multiplications + 1 add, per unit and time step.
GATE_FLOPS_PER_UNIT = 9


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, u = layer.name, layer.options.units
    found = [
        Param(f"{n}/kernel", (shapes[0][-1], 4 * u), "lstm_kernel", n, "kernel"),
        Param(
            f"{n}/recurrent_kernel",
            (u, 4 * u),
            "lstm_recurrent_kernel",
            n,
            "recurrent_kernel",
        ),
    ]
    if layer.options.use_bias:
        found.append(Param(f"{n}/bias", (4 * u,), "lstm_bias", n, "bias"))
    return found


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    steps, features = shapes[0]
    u = layer.options.units
    matmul = steps * (2 * features * 4 * u + 2 * u * 4 * u)
    return matmul, steps * (
        (4 * u if layer.options.use_bias else 0) + GATE_FLOPS_PER_UNIT * u
    )


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    return recurrent.read("lstm", cls, name, config)


def if_swapped(a: Any, p: Param) -> Any:
    # The input and forget gates exchanged: Keras' order is i, f, c, o.
    u = a.shape[-1] // 4
    return a[..., [*range(u, 2 * u), *range(u), *range(2 * u, 4 * u)]]


def activation_ignored(layer: Layer) -> dict[str, Any]:
    return {"activation": recurrent.TANH}


MISTAKES = (
    Mistake(
        "cell-activation-ignored",
        "an LSTM's own activation ignored: the cell computed with Keras' default tanh",
        "kind-lstm",
        seq_len=6,
        hits=lambda layer, shapes: layer.options.activation != recurrent.TANH,
        changes=activation_ignored,
    ),
    Mistake(
        "lstm-gates-swapped",
        "LSTM input kernel loaded with the input and forget gates exchanged",
        "lstm",
        seq_len=12,
        params="lstm_kernel",
        corrupt=if_swapped,
    ),
)


KIND = Kind(
    name="lstm",
    summary="a long short-term memory over a sequence",
    options=recurrent.Recurrent,
    regularized=True,
    shape=recurrent.shape,
    inner_activation=True,
    masks=lambda layer: recurrent.cell_masks(layer, "lstm"),
    params=params,
    flops=flops,
    keras=recurrent.keras_builder("LSTM"),
    keras_classes=("LSTM",),
    read=read,
    draw=recurrent.draw,
    draw_ranks=(2,),
    mistakes=MISTAKES,
    example=Example(  # a forecaster's LSTM as public examples write it
        (6, 3),
        lambda: (Layer.of("lstm", "lstm", units=5, activation="relu", dropout=0.25),),
    ),
)
