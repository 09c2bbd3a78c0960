"""``gru``: Keras' ``GRU`` (``reset_after=True``) over a sequence ``(T, F)``,
its states as ``lstm`` gives them.  Kernel ``(in, 3u)``, recurrent kernel
``(u, 3u)``, bias ``(2, 3u)`` (the input bias, then the recurrent bias,
inside the reset gate), gates ``z, r, h``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zoo.kinds import keras_words as kw
from zoo.kinds import recurrent
from zoo.kinds.base import Kind, Layer, Mistake, Param, Shape

# Per unit and time step of Keras' GRU: the sums of the z and r gates'
# halves, their sigmoids, r times the recurrent candidate, its sum and tanh,
# z * h, 1 - z, its product and the final sum.
GATE_FLOPS_PER_UNIT = 11


def params(layer: Layer, shapes: tuple[Shape, ...]) -> list[Param]:
    n, u = layer.name, layer.options.units
    found = [
        Param(f"{n}/kernel", (shapes[0][-1], 3 * u), "gru_kernel", n, "kernel"),
        Param(
            f"{n}/recurrent_kernel",
            (u, 3 * u),
            "gru_recurrent_kernel",
            n,
            "recurrent_kernel",
        ),
    ]
    if layer.options.use_bias:
        found.append(Param(f"{n}/bias", (2, 3 * u), "gru_bias", n, "bias"))
    return found


def flops(layer: Layer, shapes: tuple[Shape, ...], out: Shape) -> tuple[int, int]:
    steps, features = shapes[0]
    u = layer.options.units
    matmul = steps * (2 * features * 3 * u + 2 * u * 3 * u)
    biases = 2 * 3 * u if layer.options.use_bias else 0
    return matmul, steps * (biases + GATE_FLOPS_PER_UNIT * u)


def read(cls: str, name: str, config: Mapping[str, Any], built: Any) -> dict[str, Any]:
    # reset_after=True: the recurrent bias inside the reset gate, the layout
    # the (2, 3u) bias holds.
    kw.must(cls, name, config, (("reset_after", True),))
    return recurrent.read("gru", cls, name, config)


def zr_swapped(a: Any, p: Param) -> Any:
    # PyTorch's nn.GRU keeps its gates as r, z, n; read as Keras' z, r, h.
    u = a.shape[-1] // 3
    return a[..., [*range(u, 2 * u), *range(u), *range(2 * u, 3 * u)]]


MISTAKES = (
    Mistake(
        "gru-gates-swapped",
        "GRU input kernel loaded in PyTorch's gate order (r, z) for Keras' (z, r)",
        "conv1d-gru",
        params="gru_kernel",
        corrupt=zr_swapped,
    ),
)


KIND = Kind(
    name="gru",
    summary="a gated recurrent unit over a sequence (reset_after)",
    options=recurrent.Recurrent,
    regularized=True,
    shape=recurrent.shape,
    inner_activation=True,
    masks=lambda layer: recurrent.cell_masks(layer, "gru"),
    params=params,
    flops=flops,
    keras=recurrent.keras_builder("GRU"),
    keras_classes=("GRU",),
    read=read,
    draw=recurrent.draw,
    draw_ranks=(2,),
    mistakes=MISTAKES,
)
