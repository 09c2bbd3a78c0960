"""The NumPy reference every operator path is judged against.

``forward`` computes an operator of ``zoo.operators`` (canonical layout:
NHWC images, ``(N, T, C)`` sequences, ``(kh, kw, in, out)`` and ``(k, in,
out)`` convolution kernels, ``(in, out)`` dense kernels, attention heads
``(N, T, heads, key_dim)``, LSTM gates in Keras' ``i, f, c, o`` order, GRU
gates in its ``z, r, h``) and ``backward`` adds the
hand-written vector-Jacobian product: the gradient of ``sum_k <result_k,
cotangent_k>`` with respect to each of the operator's ``wrt`` operands.

One code serves two dtypes.  In float64 it is the reference.  In float32 it
is the baseline: a correct float32 computation written the straightforward
way (products by BLAS, the loss as a stable logsumexp, Adam's beta powers in
float32 as Keras computes them), whose own error against float64 sets what a
float32 path is allowed.

Sized for the timed cases (a 4096 x 4096 GEMM, VGG16's convolutions at batch
32): a convolution and its VJP are a sum over kernel offsets of one
``(N*Ho*Wo, C) @ (C, F)`` product each on the zero-padded input, so no
im2col of the whole batch is ever built (a 1-D convolution is the 2-D one on
images one row high); pools reshape the cropped input into windows.  NumPy
has no erf: GELU takes the standard library's, element by element (0.7 s per
4M elements), in float64 and rounded to the computation's dtype.  Sigmoid,
tanh and logsumexp never overflow: at value scales 1e-3 to 1e3 they raise no
NumPy warning (underflow to zero is their intended result).

NumPy only, and NumPy 1.23-safe: every scalar constant is made in the
computation's dtype, so value-based casting (NumPy 1) and NEP 50 (NumPy 2)
give the same dtypes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from zoo.operators import ADAM, INTEGER_ROLES, Operator, get_operator

Arrays = dict[str, np.ndarray]
Attributes = Mapping[str, int | float | str]
Results = tuple[np.ndarray, ...]
_Forward = Callable[[Arrays, Attributes], Results]
_Backward = Callable[[Arrays, Attributes, Results], tuple[Results, Arrays]]


def forward(
    op: str,
    operands: Mapping[str, np.ndarray],
    attributes: Attributes,
    dtype: type[np.floating[Any]],
) -> dict[str, np.ndarray]:
    """The results of ``op`` by name (``Operator.outputs``' names), computed
    in ``dtype``: float operands are cast to it first, integer labels and
    token ids stay integers.  A ValueError for an unknown operator (naming
    the known ones), missing or unexpected operands, or attributes the
    operator cannot take."""
    operator = get_operator(op)
    arrays = _cast(operator, operands, dtype)
    with np.errstate(under="ignore"):
        results = _FORWARD[op](arrays, attributes)
    return dict(zip(_outputs(operator), results, strict=True))


def backward(
    op: str,
    operands: Mapping[str, np.ndarray],
    attributes: Attributes,
    cotangents: Mapping[str, np.ndarray],
    dtype: type[np.floating[Any]],
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(results, gradients)`` of ``op`` in ``dtype``: the results as
    ``forward`` gives them, and the gradient of ``sum_k <result_k,
    cotangent_k>`` with respect to each operand in ``Operator.wrt``, by
    operand name, each of its operand's shape.  A ValueError for an operator
    without a backward pass, or a cotangent missing or of the wrong shape."""
    operator = get_operator(op)
    if not operator.has_backward:
        raise ValueError(f"{op} has no backward pass")
    arrays = _cast(operator, operands, dtype)
    names = _outputs(operator)
    if set(cotangents) != set(names):
        raise ValueError(
            f"{op} takes cotangents {', '.join(names)}, not {', '.join(cotangents)}"
        )
    cast = tuple(_as(cotangents[name], _resolve(dtype)) for name in names)
    with np.errstate(under="ignore"):
        results, gradients = _BACKWARD[op](arrays, attributes, cast)
    for name, result, cotangent in zip(names, results, cast, strict=True):
        if cotangent.shape != result.shape:
            raise ValueError(
                f"{op}: cotangent {name} has shape {cotangent.shape}, "
                f"its result {result.shape}"
            )
    return dict(zip(names, results, strict=True)), gradients


# --- operands and attributes ------------------------------------------------------


def _resolve(dtype: type[np.floating[Any]]) -> np.dtype[Any]:
    """``dtype`` as a NumPy dtype; a ValueError unless it is a float type."""
    resolved = np.dtype(dtype)
    if resolved.kind != "f":
        raise ValueError(f"the reference computes in a float dtype, not {resolved}")
    return resolved


def _as(array: np.ndarray, dtype: np.dtype[Any]) -> np.ndarray:
    return np.asarray(array).astype(dtype, copy=False)


def _names(operator: Operator) -> tuple[tuple[str, ...], tuple[str, ...], set[str]]:
    """``(inputs, outputs, integers)``: operand and result names and the
    integer operands (labels, token ids).  Names and roles do not depend on
    the dims, so any dims that fit do (all ones: a 1x1 kernel, a 1x1 pool
    window)."""
    ones = dict.fromkeys(operator.dims, 1)
    inputs = operator.inputs(ones)
    outputs = operator.outputs(ones)
    labels = {o.name for o in inputs if o.role in INTEGER_ROLES}
    return tuple(o.name for o in inputs), tuple(o.name for o in outputs), labels


def _outputs(operator: Operator) -> tuple[str, ...]:
    return _names(operator)[1]


def _cast(
    operator: Operator,
    operands: Mapping[str, np.ndarray],
    dtype: type[np.floating[Any]],
) -> Arrays:
    inputs, _, labels = _names(operator)
    if set(operands) != set(inputs):
        raise ValueError(
            f"{operator.name} takes operands {', '.join(inputs)}, "
            f"not {', '.join(operands)}"
        )
    resolved = _resolve(dtype)
    arrays = {}
    for name in inputs:
        array = np.asarray(operands[name])
        if name in labels:
            if array.dtype.kind not in "iu":
                raise ValueError(f"{operator.name}: {name} must be integers")
            arrays[name] = array
        else:
            arrays[name] = array.astype(resolved, copy=False)
    return arrays


def _attribute(op: str, attributes: Attributes, name: str) -> int | float | str:
    if name not in attributes:
        raise ValueError(f"{op} needs the attribute {name!r}")
    return attributes[name]


def _positive(op: str, attributes: Attributes, name: str) -> int:
    value = _attribute(op, attributes, name)
    # bool is an int too, and never a window size or a step
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{op}: {name} must be an integer, not {value!r}")
    if value < 1:
        raise ValueError(f"{op}: {name} must be at least 1, not {value}")
    return int(value)


def _epsilon(op: str, attributes: Attributes) -> float:
    value = _attribute(op, attributes, "epsilon")
    if isinstance(value, bool | str) or not value > 0:
        raise ValueError(f"{op}: epsilon must be a positive number, not {value!r}")
    return float(value)


# --- products ---------------------------------------------------------------------


def _matmul(a: Arrays, attributes: Attributes) -> Results:
    return (a["x"] @ a["w"],)


def _matmul_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x, w = a["x"], a["w"]
    return (x @ w,), {"x": gy @ w.T, "w": x.T @ gy}


def _dense(a: Arrays, attributes: Attributes) -> Results:
    return (a["x"] @ a["w"] + a["b"],)


def _dense_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x, w = a["x"], a["w"]
    return (x @ w + a["b"],), {"x": gy @ w.T, "w": x.T @ gy, "b": gy.sum(axis=0)}


# --- convolution ------------------------------------------------------------------


def _pads(attributes: Attributes, kernel: int, op: str) -> tuple[int, int]:
    """Zero rows (or columns) before and after the input along one side.
    "same" pads ``kernel - 1`` in all, the extra one after as TensorFlow and
    Keras do (odd kernels: ``kernel // 2`` each side)."""
    padding = _attribute(op, attributes, "padding")
    if padding == "valid":
        return 0, 0
    if padding == "same":
        before = (kernel - 1) // 2
        return before, kernel - 1 - before
    raise ValueError(f"{op}: padding must be 'same' or 'valid', not {padding!r}")


@dataclass(frozen=True)
class _Padded:
    """The zero-padded input of a convolution and where the input lies in it."""

    x: np.ndarray  # (N, H + pads, W + pads, C)
    top: int
    left: int
    out_h: int
    out_w: int

    def offsets(self, kernel: np.ndarray) -> Iterator[tuple[int, int]]:
        return itertools.product(range(kernel.shape[0]), range(kernel.shape[1]))

    def window(self, i: int, j: int) -> np.ndarray:
        """The input pixels kernel offset ``(i, j)`` meets, one row per output
        pixel: ``(N * Ho * Wo, C)`` (a copy of one input's size, never the
        whole im2col)."""
        rows = self.x[:, i : i + self.out_h, j : j + self.out_w, :]
        return rows.reshape(-1, self.x.shape[3])


def _pad(
    x: np.ndarray, kernel: np.ndarray, attributes: Attributes, op: str = "conv2d"
) -> _Padded:
    if x.ndim != 4 or kernel.ndim != 4 or kernel.shape[2] != x.shape[3]:
        raise ValueError(
            f"{op}: kernel {kernel.shape} does not fit an NHWC input {x.shape}"
        )
    # (a 1-D convolution's one-row kernel pads its one-row images by nothing)
    top, bottom = _pads(attributes, kernel.shape[0], op)
    left, right = _pads(attributes, kernel.shape[1], op)
    padded = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)))
    out_h = padded.shape[1] - kernel.shape[0] + 1
    out_w = padded.shape[2] - kernel.shape[1] + 1
    if out_h < 1 or out_w < 1:
        raise ValueError(f"{op}: kernel {kernel.shape} does not fit {x.shape}")
    return _Padded(padded, top, left, out_h, out_w)


def _conv2d(a: Arrays, attributes: Attributes, op: str = "conv2d") -> Results:
    x, w = a["x"], a["w"]
    p = _pad(x, w, attributes, op)
    y = np.zeros((x.shape[0] * p.out_h * p.out_w, w.shape[3]), dtype=x.dtype)
    for i, j in p.offsets(w):
        y += p.window(i, j) @ w[i, j]
    y += a["b"]
    return (y.reshape(x.shape[0], p.out_h, p.out_w, w.shape[3]),)


def _conv2d_vjp(
    a: Arrays, attributes: Attributes, cot: Results, op: str = "conv2d"
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x, w = a["x"], a["w"]
    n, h, width, c = x.shape
    p = _pad(x, w, attributes, op)
    y = np.zeros((n * p.out_h * p.out_w, w.shape[3]), dtype=x.dtype)
    gy_rows = gy.reshape(-1, w.shape[3])
    dw = np.empty_like(w)
    dx_padded = np.zeros_like(p.x)
    for i, j in p.offsets(w):
        # one window copy serves the result and the kernel's gradient
        window = p.window(i, j)
        y += window @ w[i, j]
        dw[i, j] = window.T @ gy_rows
        dx_padded[:, i : i + p.out_h, j : j + p.out_w, :] += (
            gy_rows @ w[i, j].T
        ).reshape(n, p.out_h, p.out_w, c)
    y += a["b"]
    dx = dx_padded[:, p.top : p.top + h, p.left : p.left + width, :]
    return (y.reshape(n, p.out_h, p.out_w, w.shape[3]),), {
        "x": np.ascontiguousarray(dx),
        "w": dw,
        "b": gy_rows.sum(axis=0),
    }


def _as_images(a: Arrays) -> Arrays:
    """A 1-D convolution's operands as a 2-D one's: ``(N, T, C)`` sequences
    as ``(N, 1, T, C)`` images, ``(k, in, out)`` kernels as ``(1, k, in,
    out)`` (views, no copies)."""
    x, w = a["x"], a["w"]
    if x.ndim != 3 or w.ndim != 3:
        raise ValueError(
            f"conv1d: takes a sequence (N, T, C) and a kernel (k, in, out), not "
            f"{x.shape} and {w.shape}"
        )
    return {"x": x[:, None], "w": w[None], "b": a["b"]}


def _conv1d(a: Arrays, attributes: Attributes) -> Results:
    (y,) = _conv2d(_as_images(a), attributes, "conv1d")
    return (y[:, 0],)


def _conv1d_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    (y,), grads = _conv2d_vjp(_as_images(a), attributes, (gy[:, None],), "conv1d")
    return (y[:, 0],), {"x": grads["x"][:, 0], "w": grads["w"][0], "b": grads["b"]}


# --- pools ------------------------------------------------------------------------


def _windows(op: str, x: np.ndarray, attributes: Attributes) -> np.ndarray:
    """``x`` cropped to whole windows, as ``(N, Ho, size, Wo, size, C)``: a
    view, no copy (the crop drops the last ``H % size`` rows and columns)."""
    size = _positive(op, attributes, "size")
    n, h, w, c = x.shape
    if min(h, w) < size:
        raise ValueError(f"{op}: a {size}x{size} window does not fit {x.shape}")
    ho, wo = h // size, w // size
    return x[:, : ho * size, : wo * size, :].reshape(n, ho, size, wo, size, c)


def _scatter(x: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """A gradient of ``x``'s shape holding ``windows`` (one gradient per
    window pixel, laid out as ``_windows``) and zero in the cropped rows and
    columns."""
    n, ho, size, wo, _, c = windows.shape
    dx = np.zeros_like(x)
    dx[:, : ho * size, : wo * size, :] = windows.reshape(n, ho * size, wo * size, c)
    return dx


def _avg_pool(a: Arrays, attributes: Attributes) -> Results:
    return (_windows("avg_pool", a["x"], attributes).mean(axis=(2, 4)),)


def _avg_pool_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x = a["x"]
    windows = _windows("avg_pool", x, attributes)
    size = windows.shape[2]
    share = gy / x.dtype.type(size * size)
    spread = np.broadcast_to(share[:, :, None, :, None, :], windows.shape)
    return (windows.mean(axis=(2, 4)),), {"x": _scatter(x, spread)}


def _max_pool(a: Arrays, attributes: Attributes) -> Results:
    return (_windows("max_pool", a["x"], attributes).max(axis=(2, 4)),)


def _max_pool_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x = a["x"]
    windows = _windows("max_pool", x, attributes)
    n, ho, size, wo, _, c = windows.shape
    # each window's pixels along one axis, in row-major order, so that argmax
    # picks the first maximum of a tie
    flat = windows.transpose(0, 1, 3, 5, 2, 4).reshape(n, ho, wo, c, size * size)
    first = flat.argmax(axis=-1)
    chosen = first[..., None] == np.arange(size * size)
    routed = (chosen * gy[..., None]).reshape(n, ho, wo, c, size, size)
    back = routed.transpose(0, 1, 4, 2, 5, 3)
    return (flat.max(axis=-1),), {"x": _scatter(x, back)}


def _global_avg_pool(a: Arrays, attributes: Attributes) -> Results:
    return (a["x"].mean(axis=1),)


def _global_avg_pool_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x = a["x"]
    share = gy / x.dtype.type(x.shape[1])
    dx = np.ascontiguousarray(np.broadcast_to(share[:, None, :], x.shape))
    return (x.mean(axis=1),), {"x": dx}


# --- element-wise -----------------------------------------------------------------


def _sigmoid_slope(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sigmoid(x) from ``e = exp(-|x|) <= 1``, which cannot overflow, and its
    derivative as autodiff computes it, from the value: ``s * (1 - s)``.
    That cancels where ``s`` rounds to 1 (x above about 17 in float32) as it
    does in every framework, so the float32 baseline's error there is what a
    correct float32 path's is, and the judge allows it."""
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    s = np.where(x >= 0, one / (one + e), e / (one + e))
    return s, s * (one - s)


def _tanh_slope(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """tanh(x) and its derivative as autodiff computes it, from the value:
    ``1 - t**2`` (see ``_sigmoid_slope`` for why not a form without the
    cancellation)."""
    t = np.tanh(x)
    return t, x.dtype.type(1) - t * t


def _relu(a: Arrays, attributes: Attributes) -> Results:
    return (np.maximum(a["x"], a["x"].dtype.type(0)),)


def _relu_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    x = a["x"]
    # the derivative at 0 is taken as 0, as the frameworks do
    return _relu(a, attributes), {"x": gy * (x > 0)}


def _sigmoid(a: Arrays, attributes: Attributes) -> Results:
    return (_sigmoid_slope(a["x"])[0],)


def _sigmoid_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    y, slope = _sigmoid_slope(a["x"])
    return (y,), {"x": cot[0] * slope}


def _tanh(a: Arrays, attributes: Attributes) -> Results:
    return (np.tanh(a["x"]),)


def _tanh_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    y, slope = _tanh_slope(a["x"])
    return (y,), {"x": cot[0] * slope}


_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu_parts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Phi(x), phi(x))``: the standard normal distribution and density
    at ``x``, in ``x``'s dtype.  Phi from the standard library's erf in
    float64 (correctly rounded to float32 for float32: a float32 erf a few
    ulp off is what the judge's allowance is for)."""
    kind = x.dtype.type
    erf = np.asarray(_ERF(x.astype(np.float64) / math.sqrt(2))).astype(x.dtype)
    cdf = kind(0.5) * (kind(1) + erf)
    pdf = np.exp(-(x * x) / kind(2)) * kind(1 / math.sqrt(2 * math.pi))
    return cdf, pdf


def _gelu(a: Arrays, attributes: Attributes) -> Results:
    x = a["x"]
    return (x * _gelu_parts(x)[0],)


def _gelu_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    x = a["x"]
    cdf, pdf = _gelu_parts(x)
    return (x * cdf,), {"x": cot[0] * (cdf + x * pdf)}


# --- layer and batch normalization ------------------------------------------------
#
# One normalization, two axes: a layer normalization takes each row's
# statistics (over its features, axis 1), a batch normalization in training
# each column's (a channel's, over the batch, axis 0).  The variance is the
# biased one in both, as Keras takes it.
_NORM_AXIS = {"layer_norm": 1, "batch_norm": 0}


def _normalized(
    op: str, a: Arrays, attributes: Attributes
) -> tuple[np.ndarray, np.ndarray]:
    """``(xhat, inv)``: ``x`` less its mean over ``op``'s axis, times ``inv
    = 1 / sqrt(var + epsilon)``."""
    x, axis = a["x"], _NORM_AXIS[op]
    epsilon = x.dtype.type(_epsilon(op, attributes))
    centered = x - x.mean(axis=axis, keepdims=True)
    var = (centered * centered).mean(axis=axis, keepdims=True)
    inv = x.dtype.type(1) / np.sqrt(var + epsilon)
    return centered * inv, inv


def _norm(op: str) -> _Forward:
    def forward(a: Arrays, attributes: Attributes) -> Results:
        xhat, _ = _normalized(op, a, attributes)
        return (xhat * a["gamma"] + a["beta"],)

    return forward


def _norm_vjp(
    op: str,
) -> _Backward:
    def vjp(a: Arrays, attributes: Attributes, cot: Results) -> tuple[Results, Arrays]:
        (gy,) = cot
        xhat, inv = _normalized(op, a, attributes)
        dxhat = gy * a["gamma"]
        # the mean and the variance depend on every element along the axis
        axis = _NORM_AXIS[op]
        dx = inv * (
            dxhat
            - dxhat.mean(axis=axis, keepdims=True)
            - xhat * (dxhat * xhat).mean(axis=axis, keepdims=True)
        )
        return (xhat * a["gamma"] + a["beta"],), {
            "x": dx,
            "gamma": (gy * xhat).sum(axis=0),
            "beta": gy.sum(axis=0),
        }

    return vjp


# --- embedding ----------------------------------------------------------------------


def _ids(a: Arrays) -> np.ndarray:
    ids, table = a["ids"], a["table"]
    if ids.size and (ids.min() < 0 or ids.max() >= table.shape[0]):
        raise ValueError(f"embedding: token ids must lie in [0, {table.shape[0]})")
    return ids


def _embedding(a: Arrays, attributes: Attributes) -> Results:
    return (a["table"][_ids(a)],)


def _embedding_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gy,) = cot
    ids, table = _ids(a), a["table"]
    dtable = np.zeros_like(table)
    # a row looked up twice gets both cotangents: a scatter-add
    np.add.at(dtable, ids.ravel(), gy.reshape(-1, table.shape[1]))
    return (table[ids],), {"table": dtable}


# --- attention ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Attention:
    """Queries, keys and values per head ``(N, heads, T, key_dim)``, the
    attention weights ``(N, heads, T, T)`` and the scale."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    weights: np.ndarray
    scale: np.floating[Any]

    @property
    def y(self) -> np.ndarray:
        """The result in canonical ``(N, T, heads, key_dim)``."""
        return np.ascontiguousarray((self.weights @ self.v).transpose(0, 2, 1, 3))


def _attend(a: Arrays) -> _Attention:
    q, k, v = (a[name].transpose(0, 2, 1, 3) for name in ("q", "k", "v"))
    scale = q.dtype.type(1 / math.sqrt(q.shape[-1]))
    # as Keras' MultiHeadAttention: the queries scaled, then the products
    scores = (q * scale) @ k.transpose(0, 1, 3, 2)
    shifted = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = shifted / shifted.sum(axis=-1, keepdims=True)
    return _Attention(q, k, v, weights, scale)


def _attention(a: Arrays, attributes: Attributes) -> Results:
    return (_attend(a).y,)


def _attention_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    at = _attend(a)
    gy = cot[0].transpose(0, 2, 1, 3)
    dweights = gy @ at.v.transpose(0, 1, 3, 2)
    # the softmax's Jacobian, row by row: w * (g - <w, g>)
    dscores = at.weights * (
        dweights - (dweights * at.weights).sum(axis=-1, keepdims=True)
    )
    dq = (dscores @ at.k) * at.scale
    dk = (dscores.transpose(0, 1, 3, 2) @ at.q) * at.scale
    dv = at.weights.transpose(0, 1, 3, 2) @ gy

    def canonical(g: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(g.transpose(0, 2, 1, 3))

    return (at.y,), {"q": canonical(dq), "k": canonical(dk), "v": canonical(dv)}


# --- LSTM cell --------------------------------------------------------------------


@dataclass(frozen=True)
class _LstmStep:
    """One step's gates (after their activations), their derivatives with
    respect to the pre-activations, and the new state."""

    gates: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # i, f, g, o
    slopes: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    c_new: np.ndarray
    tanh_c: np.ndarray
    tanh_c_slope: np.ndarray
    h_new: np.ndarray


def _lstm_step(a: Arrays) -> _LstmStep:
    units = a["h"].shape[1]
    z = a["x"] @ a["kernel"] + a["h"] @ a["recurrent_kernel"] + a["bias"]
    i, di = _sigmoid_slope(z[:, :units])
    f, df = _sigmoid_slope(z[:, units : 2 * units])
    g, dg = _tanh_slope(z[:, 2 * units : 3 * units])
    o, do = _sigmoid_slope(z[:, 3 * units :])
    c_new = f * a["c"] + i * g
    tanh_c, tanh_c_slope = _tanh_slope(c_new)
    return _LstmStep(
        (i, f, g, o), (di, df, dg, do), c_new, tanh_c, tanh_c_slope, o * tanh_c
    )


def _lstm_cell(a: Arrays, attributes: Attributes) -> Results:
    step = _lstm_step(a)
    return step.h_new, step.c_new


def _lstm_cell_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    gh, gc = cot
    step = _lstm_step(a)
    i, f, g, o = step.gates
    di, df, dg, do = step.slopes
    # the new cell state reaches the loss directly and through h_new
    gc_total = gc + gh * o * step.tanh_c_slope
    dz = np.concatenate(
        [
            gc_total * g * di,
            gc_total * a["c"] * df,
            gc_total * i * dg,
            gh * step.tanh_c * do,
        ],
        axis=1,
    )
    return (step.h_new, step.c_new), {
        "x": dz @ a["kernel"].T,
        "h": dz @ a["recurrent_kernel"].T,
        "c": gc_total * f,
        "kernel": a["x"].T @ dz,
        "recurrent_kernel": a["h"].T @ dz,
        "bias": dz.sum(axis=0),
    }


# --- GRU cell ---------------------------------------------------------------------


@dataclass(frozen=True)
class _GruStep:
    """One step's gates (after their activations) and their derivatives
    with respect to the pre-activations, the recurrent candidate projection
    ``h @ U_h + b_h`` the reset gate scales, and the new state."""

    z: np.ndarray
    r: np.ndarray
    candidate: np.ndarray  # hh, the tanh of x_h + r * recurrent_h
    slopes: tuple[np.ndarray, np.ndarray, np.ndarray]  # z, r, hh
    recurrent_h: np.ndarray
    h_new: np.ndarray


def _gru_step(a: Arrays) -> _GruStep:
    h, bias = a["h"], a["bias"]
    units = h.shape[1]
    if bias.shape != (2, 3 * units):
        raise ValueError(
            f"gru_cell: bias must be (2, {3 * units}) (input and recurrent "
            f"biases), not {bias.shape}"
        )
    xs = a["x"] @ a["kernel"] + bias[0]
    hs = h @ a["recurrent_kernel"] + bias[1]
    z, dz = _sigmoid_slope(xs[:, :units] + hs[:, :units])
    r, dr = _sigmoid_slope(xs[:, units : 2 * units] + hs[:, units : 2 * units])
    recurrent_h = hs[:, 2 * units :]
    candidate, dc = _tanh_slope(xs[:, 2 * units :] + r * recurrent_h)
    h_new = z * h + (h.dtype.type(1) - z) * candidate
    return _GruStep(z, r, candidate, (dz, dr, dc), recurrent_h, h_new)


def _gru_cell(a: Arrays, attributes: Attributes) -> Results:
    return (_gru_step(a).h_new,)


def _gru_cell_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gh,) = cot
    step = _gru_step(a)
    dz, dr, dc = step.slopes
    d_candidate = gh * (a["h"].dtype.type(1) - step.z) * dc
    d_z = gh * (a["h"] - step.candidate) * dz
    d_r = d_candidate * step.recurrent_h * dr
    # the pre-activations' gradients by source: the input's projection, and
    # the state's, whose candidate block the reset gate scaled
    d_xs = np.concatenate([d_z, d_r, d_candidate], axis=1)
    d_hs = np.concatenate([d_z, d_r, d_candidate * step.r], axis=1)
    return (step.h_new,), {
        "x": d_xs @ a["kernel"].T,
        "h": d_hs @ a["recurrent_kernel"].T + gh * step.z,
        "kernel": a["x"].T @ d_xs,
        "recurrent_kernel": a["h"].T @ d_hs,
        "bias": np.stack([d_xs.sum(axis=0), d_hs.sum(axis=0)]),
    }


# --- loss -------------------------------------------------------------------------


def _log_softmax(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``logits - logsumexp(logits)`` per row, the maximum taken out first
    so that no exponential overflows."""
    if logits.ndim != 2 or labels.shape != logits.shape[:1]:
        raise ValueError(
            f"softmax_cross_entropy: labels {labels.shape} do not fit "
            f"logits {logits.shape}"
        )
    if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[1]):
        raise ValueError(
            f"softmax_cross_entropy: labels must lie in [0, {logits.shape[1]})"
        )
    shifted = logits - logits.max(axis=1, keepdims=True)
    log_p: np.ndarray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return log_p


def _picked(log_p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    picked: np.ndarray = log_p[np.arange(log_p.shape[0]), labels]
    return picked


def _softmax_cross_entropy(a: Arrays, attributes: Attributes) -> Results:
    log_p = _log_softmax(a["logits"], a["labels"])
    return (np.asarray(-_picked(log_p, a["labels"]).mean(), dtype=log_p.dtype),)


def _softmax_cross_entropy_vjp(
    a: Arrays, attributes: Attributes, cot: Results
) -> tuple[Results, Arrays]:
    (gloss,) = cot
    labels = a["labels"]
    log_p = _log_softmax(a["logits"], labels)
    loss = np.asarray(-_picked(log_p, labels).mean(), dtype=log_p.dtype)
    grad = np.exp(log_p)
    grad[np.arange(grad.shape[0]), labels] -= log_p.dtype.type(1)
    return (loss,), {"logits": grad * (gloss / log_p.dtype.type(grad.shape[0]))}


# --- Adam -------------------------------------------------------------------------


def _adam(a: Arrays, attributes: Attributes) -> Results:
    """Keras' update, every constant and the beta powers in the operands'
    dtype (``float32(beta) ** float32(t)`` in float32, as Keras does)."""
    kind = a["p"].dtype.type
    t = kind(_positive("adam", attributes, "step"))
    lr, b1, b2, eps = (
        kind(ADAM[name]) for name in ("learning_rate", "beta_1", "beta_2", "epsilon")
    )
    one = kind(1)
    p, g, m, v = a["p"], a["g"], a["m"], a["v"]
    m_new = m + (g - m) * (one - b1)
    v_new = v + (g * g - v) * (one - b2)
    alpha = lr * np.sqrt(one - b2**t) / (one - b1**t)
    p_new = p - m_new * alpha / (np.sqrt(v_new) + eps)
    return p_new, m_new, v_new


_FORWARD: dict[str, _Forward] = {
    "matmul": _matmul,
    "dense": _dense,
    "conv2d": _conv2d,
    "conv1d": _conv1d,
    "avg_pool": _avg_pool,
    "max_pool": _max_pool,
    "global_avg_pool": _global_avg_pool,
    "relu": _relu,
    "sigmoid": _sigmoid,
    "tanh": _tanh,
    "gelu": _gelu,
    "layer_norm": _norm("layer_norm"),
    "batch_norm": _norm("batch_norm"),
    "embedding": _embedding,
    "attention": _attention,
    "lstm_cell": _lstm_cell,
    "gru_cell": _gru_cell,
    "softmax_cross_entropy": _softmax_cross_entropy,
    "adam": _adam,
}
_BACKWARD: dict[str, _Backward] = {
    "matmul": _matmul_vjp,
    "dense": _dense_vjp,
    "conv2d": _conv2d_vjp,
    "conv1d": _conv1d_vjp,
    "avg_pool": _avg_pool_vjp,
    "max_pool": _max_pool_vjp,
    "global_avg_pool": _global_avg_pool_vjp,
    "relu": _relu_vjp,
    "sigmoid": _sigmoid_vjp,
    "tanh": _tanh_vjp,
    "gelu": _gelu_vjp,
    "layer_norm": _norm_vjp("layer_norm"),
    "batch_norm": _norm_vjp("batch_norm"),
    "embedding": _embedding_vjp,
    "attention": _attention_vjp,
    "lstm_cell": _lstm_cell_vjp,
    "gru_cell": _gru_cell_vjp,
    "softmax_cross_entropy": _softmax_cross_entropy_vjp,
}
