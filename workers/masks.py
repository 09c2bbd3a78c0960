"""The check of the masks a layer draws inside its block in a training step
(``Kind.masks``): a recurrent layer's (``zoo.kinds.recurrent.cell_masks``:
Keras' ``dropout`` on the input and ``recurrent_dropout`` on the state, one
mask per gate or one for every gate) and an attention's
(``zoo.kinds.attention.masks``: Keras' ``dropout`` of its weights, one mask
per head).

Random draws cannot agree between paths, so each path's training pass is
judged on its own (as every dropout is: ``workers.protocol.check_noise``),
in two parts:

- the masks it drew, as a dropout of ones: every value 0 or ``1 / (1 -
  rate)``, the kept share ``1 - rate`` within Hoeffding's bound, and two
  gates' or heads' masks, or a Bidirectional's two directions', drawn apart
  (``check_apart``: one mask used for both agrees with itself everywhere);
- what it computed with them: the layer's output recomputed here in float64
  from its input, those masks and its weights (``forward``: Keras 3.15's
  recurrent cells, first implementation, and its attention, written out)
  must agree within ``MASK_TOLERANCE``.  A mask on the wrong gate or head,
  on the state where the input's is due, drawn anew at each step or left
  out moves the output by the share of values it drops, 0.1 or more at the
  rates in use; a float32 pass over a few dozen steps rounds it by about
  1e-6.

NumPy only (the MXNet worker imports it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import numpy as np

from workers.protocol import check_apart, check_dropout
from zoo.kinds.base import SELU_ALPHA, SELU_SCALE, SLOPED
from zoo.kinds.bidirectional import DIRECTIONS
from zoo.specs import Layer, mask_width, masks_of

# The largest relative (normwise) distance of a path's output from its
# recomputation with the masks it drew; see the module docstring.
MASK_TOLERANCE = 1e-3

Arrays = Mapping[str, np.ndarray]


def check_masks(
    layer: Layer,
    inputs: np.ndarray,
    masks: Arrays,
    outputs: np.ndarray,
    weights: Arrays,
) -> str | None:
    """``None`` when ``layer``, run in one training pass on ``inputs`` (Keras'
    layout), drew ``masks`` (by ``Mask.tap``) as it must and gave
    ``outputs`` from them; else what it did, in one sentence naming it.
    ``weights``: the canonical arrays it ran with."""
    first: dict[str, np.ndarray] = {}  # each side's first copy's masks
    for mask in masks_of(layer):
        drawn = np.asarray(masks[mask.tap], np.float64)
        where = f"{mask.side} masks of {layer.kind} layer {layer.name!r}"
        width = mask_width(layer, mask, inputs.shape[1:])
        if drawn.shape[::2] != (mask.count, width):
            return f"the {where} are {drawn.shape}, not {mask.count} of (batch, width)"
        ones = np.ones_like(drawn)
        problem = check_dropout(layer.name, mask.rate, ones, drawn)
        if problem is None and mask.count > 1:
            problem = check_apart(layer.name, mask.rate, ones[0], [drawn[0], drawn[1]])
        if problem is None and mask.side in first:  # a Bidirectional's second
            apart = [first[mask.side], drawn]
            problem = check_apart(layer.name, mask.rate, ones, apart)
        first.setdefault(mask.side, drawn)
        if problem:
            return f"the {where}: {problem}"
    expected = forward(layer, np.asarray(inputs, np.float64), masks, weights)
    got = np.asarray(outputs, np.float64)
    if got.shape != expected.shape:
        return (
            f"{layer.kind} layer {layer.name!r} gave {got.shape}, not {expected.shape}"
        )
    scale = max(float(np.linalg.norm(expected)), 1e-30)
    error = float(np.linalg.norm(got - expected)) / scale
    if not error <= MASK_TOLERANCE:
        return (
            f"{layer.kind} layer {layer.name!r} computed with the masks it drew is "
            f"{error:.1e} off its float64 recomputation from them (allowed "
            f"{MASK_TOLERANCE:g}): a mask applied where Keras' layer does not"
        )
    return None


def forward(layer: Layer, x: np.ndarray, masks: Arrays, weights: Arrays) -> np.ndarray:
    """``layer`` (an ``lstm``, ``gru``, ``simple_rnn``, ``bidirectional`` or
    ``attention``) over the sequences ``x`` ``(N, T, F)`` in float64 with
    the masks it drew (``Mask.tap``): each gate's product taking its own, as
    Keras' first implementation computes (``(x_t * m_g) W_g``, ``(h * s_g)
    U_g``), or each head's weights theirs (``attention``)."""
    name, o = layer.name, layer.options
    if layer.kind == "attention":
        return attention(name, x, masks.get(f"{name}/score_masks"), weights)
    if layer.kind != "bidirectional":
        return _over(layer.kind, o, x, _cell(name, masks, weights))
    ahead = _over(o.cell, o, x, _cell(f"{name}/{DIRECTIONS[0]}", masks, weights))
    behind = _over(
        o.cell, o, x[:, ::-1], _cell(f"{name}/{DIRECTIONS[1]}", masks, weights)
    )
    if o.return_sequences:
        behind = behind[:, ::-1]
    merged: dict[str, Callable[[], np.ndarray]] = {
        "concat": lambda: np.concatenate([ahead, behind], axis=-1),
        "sum": lambda: ahead + behind,
        "ave": lambda: (ahead + behind) / 2,
        "mul": lambda: ahead * behind,
    }
    return merged[o.merge_mode]()


def attention(
    name: str, x: np.ndarray, masks: np.ndarray | None, weights: Arrays
) -> np.ndarray:
    """Keras' ``MultiHeadAttention`` ``name`` over ``x`` ``(N, T, F)`` as
    query, key and value, in float64: the projections plus their biases
    (where ``weights`` has them), the query scaled by ``1 / sqrt(key_dim)``,
    the softmax over the keys, each head's weights times its mask (``masks``
    ``(heads, N, T * T)``, or none), the values mixed and projected back."""

    def get(key: str) -> np.ndarray | float:
        found = weights.get(f"{name}/{key}")
        return 0.0 if found is None else np.asarray(found, np.float64)

    def project(part: str) -> np.ndarray:  # (N, T, F) -> (N, T, heads, key_dim)
        projected = np.einsum("ntf,fhk->nthk", x, get(f"{part}/kernel"))
        return np.asarray(projected + get(f"{part}/bias"))

    q, k, v = project("query"), project("key"), project("value")
    q = q / math.sqrt(q.shape[-1])
    scores = np.einsum("nthk,nshk->nhts", q, k)  # (N, heads, T, T)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    attended = scores / scores.sum(axis=-1, keepdims=True)
    if masks is not None:
        drawn = np.asarray(masks, np.float64).swapaxes(0, 1)
        attended = attended * drawn.reshape(attended.shape)
    mixed = np.einsum("nhts,nshk->nthk", attended, v)
    out = np.einsum("nthk,hkf->ntf", mixed, get("attention_output/kernel"))
    return np.asarray(out + get("attention_output/bias"))


Cell = tuple[
    np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray | None
]


def _cell(prefix: str, masks: Arrays, weights: Arrays) -> Cell:
    """The kernel, recurrent kernel, bias (or ``None``), input masks (or
    ``None``) and state masks (or ``None``) under ``prefix``, in float64."""

    def get(found: Arrays, key: str) -> np.ndarray | None:
        return np.asarray(found[key], np.float64) if key in found else None

    kernel, recurrent = (
        get(weights, f"{prefix}/kernel"),
        get(weights, f"{prefix}/recurrent_kernel"),
    )
    if kernel is None or recurrent is None:
        raise ValueError(f"no weights of the recurrent cell {prefix!r}")
    return (
        kernel,
        recurrent,
        get(weights, f"{prefix}/bias"),
        get(masks, f"{prefix}/input_masks"),
        get(masks, f"{prefix}/state_masks"),
    )


def _gated(v: np.ndarray, w: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
    """``v @ w``; with ``masks`` each gate's block of ``w``'s columns takes
    ``v`` times its own mask."""
    if masks is None:
        return np.asarray(v @ w)
    blocks = np.split(w, masks.shape[0], axis=1)
    return np.concatenate(
        [(v * m) @ b for m, b in zip(masks, blocks, strict=True)], axis=-1
    )


def _over(kind: str, o: object, x: np.ndarray, cell: Cell) -> np.ndarray:
    """The recurrence of ``kind`` with options ``o`` over ``x``: every step's
    state ``(N, T, u)`` with ``return_sequences``, else the last."""
    kernel, recurrent, bias, inputs, states = cell
    act = ACTIVATIONS[getattr(o, "activation", "tanh")]
    units = recurrent.shape[0]
    h = np.zeros((x.shape[0], units))
    c = np.zeros_like(h)
    seen = []
    for t in range(x.shape[1]):
        xs, hs = _gated(x[:, t], kernel, inputs), _gated(h, recurrent, states)
        if kind == "lstm":
            z = xs + hs + (0 if bias is None else bias)
            i, f, g, out = np.split(z, 4, axis=-1)
            c = _sigmoid(f) * c + _sigmoid(i) * act(g)
            h = _sigmoid(out) * act(c)
        elif kind == "gru":  # reset_after: the recurrent bias inside the gate
            if bias is not None:
                xs, hs = xs + bias[0], hs + bias[1]
            x_z, x_r, x_h = np.split(xs, 3, axis=-1)
            h_z, h_r, h_h = np.split(hs, 3, axis=-1)
            z, r = _sigmoid(x_z + h_z), _sigmoid(x_r + h_r)
            h = z * h + (1 - z) * act(x_h + r * h_h)
        else:  # simple_rnn
            h = act(xs + hs + (0 if bias is None else bias))
        seen.append(h)
    return np.stack(seen, axis=1) if getattr(o, "return_sequences", False) else h


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(0.5 * (1 + np.tanh(x / 2)))  # never overflows


_ERF = np.vectorize(math.erf)

# Every cell activation (``zoo.kinds.base.ACTIVATIONS``) in float64.
ACTIVATIONS: dict[str | None, Callable[[np.ndarray], np.ndarray]] = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0),
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "softmax": lambda x: (
        np.exp(x - x.max(-1, keepdims=True))
        / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
    ),
    "gelu": lambda x: x / 2 * (1 + _ERF(x / math.sqrt(2))),
    "elu": lambda x: np.where(x > 0, x, SLOPED["elu"] * np.expm1(np.minimum(x, 0))),
    "selu": lambda x: (
        SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))
    ),
    "silu": lambda x: x * _sigmoid(x),
    "softplus": lambda x: np.logaddexp(0, x),
    "leaky_relu": lambda x: np.where(x >= 0, x, SLOPED["leaky_relu"] * x),
    "relu6": lambda x: np.clip(x, 0, 6),
}
