"""``simple_rnn``: Keras' ``SimpleRNN`` over a sequence ``(T, F)``: ``h_t =
tanh(x_t @ kernel + h_{t-1} @ recurrent_kernel + bias)`` from ``h_{-1} =
0``; the last ``h`` ``(u,)``, or every step's ``(T, u)`` with
``return_sequences``.  Kernel ``(in, u)``, recurrent kernel ``(u, u)``,
bias ``(u,)``.  Its ``activation`` (tanh, Keras' default) is the cell's
(``recurrent.Recurrent``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.kinds import recurrent
from zoo.kinds.base import Kind, Layer, Mistake, Param, Shape, bias


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, u = layer.name, layer.options.units
    return [
        Param(f"{n}/kernel", (shapes[0][-1], u), "dense", n, "kernel"),
        Param(
            f"{n}/recurrent_kernel",
            (u, u),
            "simple_rnn_recurrent_kernel",
            n,
            "recurrent_kernel",
        ),
        *bias(layer, u),
    ]


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    """Two products, the sum, the bias and tanh per unit and step."""
    steps, features = shapes[0]
    u = layer.options.units
    matmul = steps * (2 * features * u + 2 * u * u)
    return matmul, steps * u * (3 if layer.options.use_bias else 2)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    # RECURRENT's recurrent_activation has no meaning here: SimpleRNN has none.
    return recurrent.read(
        "simple_rnn", cls, name, {"recurrent_activation": "sigmoid", **config}
    )


def recurrence_transposed(a: Any, p: Param) -> Any:
    # h @ U read as U @ h: PyTorch's (out, in) weight_hh taken as Keras' (in, out).
    return a.T.copy()


MISTAKES = (
    Mistake(
        "recurrence-transposed",
        "a SimpleRNN's recurrent kernel transposed (PyTorch's weight_hh "
        "layout read as Keras')",
        "kinds-seq",
        params="simple_rnn_recurrent_kernel",
        corrupt=recurrence_transposed,
    ),
)


KIND = Kind(
    name="simple_rnn",
    summary="a plain recurrent layer over a sequence",
    options=recurrent.Recurrent,
    regularized=True,
    shape=recurrent.shape,
    inner_activation=True,
    masks=lambda layer: recurrent.cell_masks(layer, "simple_rnn"),
    params=params,
    flops=flops,
    keras=recurrent.keras_builder("SimpleRNN"),
    keras_classes=("SimpleRNN",),
    read=read,
    draw=recurrent.draw,
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
