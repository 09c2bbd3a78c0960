"""LSTM-128 over (T, 50) sequences, last hidden state -> 2 logits, in MXNet.

The cell is written out: ``z = x_t W + h U + b`` split into gates in Keras'
order ``i, f, c, o``; ``c = f * c + i * tanh(z_c)``; ``h = o * tanh(c)`` with
sigmoid gates, run over time with ``contrib.foreach`` (which also works
hybridized, where the sequence length is not known in advance).  The same pass
runs imperatively (``mx.nd``) and hybridized (``mx.sym``): the namespace ``F``
is picked from ``x``.

Layouts: x ``(N, T, F)`` batch-first; kernel ``(4u, F)``, recurrent kernel
``(4u, u)``, bias ``(4u,)``, as ``FullyConnected`` wants them.
"""

from __future__ import annotations

from typing import Any

from native.mxnet.common import Params
from native.mxnet.ops import dense, namespace
from native.protocol import Tap, no_tap
from zoo.specs import MODELS, ModelSpec

SPEC = MODELS["lstm"]


def apply(params: Params, x: Any, spec: ModelSpec = SPEC, tap: Tap = no_tap) -> Any:
    F = namespace(x)  # noqa: N806 (MXNet's name for the operator namespace)
    kernel, recurrent = params["lstm/kernel"], params["lstm/recurrent_kernel"]
    bias = params["lstm/bias"]
    units = spec.layer("lstm").size

    def cell(x_t: Any, states: list[Any]) -> Any:
        h, c = states
        z = F.FullyConnected(
            x_t, kernel, bias, num_hidden=4 * units
        ) + F.FullyConnected(h, recurrent, no_bias=True, num_hidden=4 * units)
        i, f, g, o = F.split(z, num_outputs=4, axis=1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        return h, [h, c]

    def zeros() -> Any:
        # (N, u) zeros built from the input, so the batch size may be symbolic;
        # one call per state, as foreach wants distinct inputs
        first = F.slice_axis(F.slice_axis(x, 1, 0, 1), 2, 0, 1)  # (N, 1, 1)
        return F.broadcast_axis(
            F.zeros_like(F.reshape(first, (0, 1))), axis=1, size=units
        )

    time_major = F.swapaxes(x, 0, 1)  # (N, T, F) -> (T, N, F)
    _, (h, _) = F.contrib.foreach(cell, time_major, [zeros(), zeros()])
    h = tap("lstm", h)  # the last hidden state (N, u)
    h = dense(h, params, spec, "logits")
    return tap("logits", h)
