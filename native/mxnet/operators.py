"""The operators of ``zoo.operators`` through MXNet's own ``mx.nd`` operators.

One function per operator, called ``fn(*operands, **attributes)`` as
``zoo.operators`` says, on arrays ``to_tensor`` placed on ``common.CTX``.
Each is the lowest-level public operator an MXNet user reaches for:
``nd.dot``, ``nd.FullyConnected``, ``nd.Convolution`` (``same`` padding as a
pad of ``k // 2``), ``nd.Pooling``, ``nd.mean``, ``nd.relu`` / ``sigmoid`` /
``tanh``, ``nd.LeakyReLU``'s exact GELU, ``nd.LayerNorm``, ``nd.Embedding``
and ``nd.batch_dot`` with ``nd.softmax`` for attention.  MXNet has no LSTM-
or GRU-cell operator over Keras' layouts and no Keras Adam, so those are
written out with its product and element-wise operators, and a training
step's batch normalization with ``nd.mean`` and broadcasts, as
``native/mxnet/ops.py`` and ``common.py`` do; the loss is ``common``'s
``loss`` (written out too: MXNet 1.9.1's oneDNN ``log_softmax`` is
3.5e-6 off).

Layout ``oihw`` (``native.layout``'s family): images ``(N, C, H, W)``,
conv kernels ``(out, in, kh, kw)`` and ``(out, in, k)``,
dense kernels ``(out, in)`` as ``FullyConnected`` wants them, attention heads
``(N, heads, T, key_dim)``; sequences stay ``(N, T, C)``; LSTM and GRU
kernels keep their canonical ``(in, 4u)``, ``(u, 4u)``, ``(in, 3u)``,
``(u, 3u)``.  MXNet's ``nd`` arrays
have no 0-d shape: a scalar (the loss, its cotangent) is ``(1,)``.

The forward pass is ``fn(*operands)`` called imperatively (no hybridize);
``backward`` builds the gradient pass once with ``autograd``; the engine is
asynchronous, so ``sync`` waits with ``nd.waitall()``.  Runs on NumPy 1.23
without Keras.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mxnet import autograd, nd

from native.mxnet.common import CTX, loss, to_numpy
from zoo.losses import DEFAULT as DEFAULT_OBJECTIVE
from zoo.operators import ADAM

__all__ = [
    "LAYOUT",
    "adam",
    "attention",
    "avg_pool",
    "backward",
    "batch_norm",
    "conv1d",
    "conv2d",
    "dense",
    "embedding",
    "gelu",
    "global_avg_pool",
    "gru_cell",
    "layer_norm",
    "lstm_cell",
    "matmul",
    "max_pool",
    "relu",
    "sigmoid",
    "softmax_cross_entropy",
    "sync",
    "tanh",
    "to_numpy",
    "to_tensor",
]

LAYOUT = "oihw"


def to_tensor(a: np.ndarray) -> nd.NDArray:
    """``a`` on ``CTX`` in its own float dtype (a scalar as shape ``(1,)``);
    integer labels and token ids as float32, the indices ``nd.pick`` and
    ``nd.Embedding`` take (exact below 2**24)."""
    if np.issubdtype(a.dtype, np.integer):
        return nd.array(a, ctx=CTX, dtype="float32")
    return nd.array(a.reshape(a.shape or (1,)), ctx=CTX, dtype=a.dtype)


def sync(results: Sequence[nd.NDArray]) -> None:
    """Returns once every array in ``results`` is computed: waits for the
    engine as a whole (no copy to the host)."""
    nd.waitall()


def backward(
    fn: Callable[..., Any],
    operands: list[nd.NDArray],
    wrt: list[int],
    cotangents: list[nd.NDArray],
) -> Callable[[], tuple[list[nd.NDArray], list[nd.NDArray]]]:
    """A closure computing ``fn(*operands)`` and the gradients of ``sum_k
    <results[k], cotangents[k]>`` with respect to ``operands[i]`` for ``i``
    in ``wrt`` (in that order), as ``(results, grads)``, without waiting.

    Only ``autograd`` is used, so ``fn`` may be any function of ``nd``
    arrays.  The caller's operands are left as they are: the differentiated
    ones are aliases (``detach``, the same memory) with gradient buffers
    attached.  Each call overwrites those buffers, which it returns."""
    args = list(operands)
    for i in wrt:
        args[i] = operands[i].detach()
        args[i].attach_grad()
    inputs = [args[i] for i in wrt]

    def run() -> tuple[list[nd.NDArray], list[nd.NDArray]]:
        with autograd.record():
            out = fn(*args)
        results = list(out) if isinstance(out, tuple | list) else [out]
        autograd.backward(results, head_grads=cotangents)
        return results, [a.grad for a in inputs]

    return run


def matmul(x: nd.NDArray, w: nd.NDArray) -> nd.NDArray:
    """``x @ w``."""
    return nd.dot(x, w)


def dense(x: nd.NDArray, w: nd.NDArray, b: nd.NDArray) -> nd.NDArray:
    """``x @ w.T + b``; ``w`` is ``(out, in)``."""
    return nd.FullyConnected(x, w, b, num_hidden=w.shape[0])


def conv2d(x: nd.NDArray, w: nd.NDArray, b: nd.NDArray, padding: str) -> nd.NDArray:
    """Stride-1 convolution plus bias, ``padding`` ``"same"`` (odd kernels:
    a pad of ``k // 2`` each side) or ``"valid"``; ``w`` is ``(out, in, kh,
    kw)``."""
    filters, _, k, _ = w.shape
    pad = k // 2 if padding == "same" else 0
    return nd.Convolution(x, w, b, kernel=(k, k), num_filter=filters, pad=(pad, pad))


def conv1d(x: nd.NDArray, w: nd.NDArray, b: nd.NDArray, padding: str) -> nd.NDArray:
    """Stride-1 convolution over a sequence plus bias, ``padding`` ``"same"``
    or ``"valid"``; ``x`` is ``(N, T, C)``, transposed to the ``(N, C, T)``
    ``nd.Convolution`` takes and back, ``w`` is ``(out, in, k)``."""
    filters, _, k = w.shape
    pad = k // 2 if padding == "same" else 0
    y = nd.Convolution(
        nd.transpose(x, axes=(0, 2, 1)),
        w,
        b,
        kernel=(k,),
        num_filter=filters,
        pad=(pad,),
    )
    if padding == "same" and k % 2 == 0:
        # MXNet pads k // 2 on both sides, one more before than Keras' same:
        # one more output, first, which Keras' does not have
        y = nd.slice_axis(y, axis=2, begin=1, end=None)
    return nd.transpose(y, axes=(0, 2, 1))


def _pool(x: nd.NDArray, size: int, kind: str) -> nd.NDArray:
    # ``valid``: the floor of odd sizes, as Keras' padding="valid".
    return nd.Pooling(
        x,
        kernel=(size, size),
        stride=(size, size),
        pool_type=kind,
        pooling_convention="valid",
    )


def avg_pool(x: nd.NDArray, size: int) -> nd.NDArray:
    """``size`` x ``size`` averages, stride ``size``, no padding, floor."""
    return _pool(x, size, "avg")


def max_pool(x: nd.NDArray, size: int) -> nd.NDArray:
    """``size`` x ``size`` maxima, stride ``size``, no padding, floor."""
    return _pool(x, size, "max")


def global_avg_pool(x: nd.NDArray) -> nd.NDArray:
    """The mean over a sequence's steps: ``(N, T, C)`` to ``(N, C)``."""
    return nd.mean(x, axis=1)


def relu(x: nd.NDArray) -> nd.NDArray:
    """``max(x, 0)``."""
    return nd.relu(x)


def sigmoid(x: nd.NDArray) -> nd.NDArray:
    """``1 / (1 + exp(-x))``."""
    return nd.sigmoid(x)


def tanh(x: nd.NDArray) -> nd.NDArray:
    """``tanh(x)``."""
    return nd.tanh(x)


def gelu(x: nd.NDArray) -> nd.NDArray:
    """``x / 2 * (1 + erf(x / sqrt(2)))``, the exact GELU (``LeakyReLU``'s
    ``gelu`` is erf's, not the tanh approximation)."""
    return nd.LeakyReLU(x, act_type="gelu")


def layer_norm(
    x: nd.NDArray, gamma: nd.NDArray, beta: nd.NDArray, epsilon: float
) -> nd.NDArray:
    """Each row normalized by its mean and (biased) variance, then scaled by
    ``gamma`` and shifted by ``beta``."""
    return nd.LayerNorm(x, gamma, beta, axis=-1, eps=epsilon)


def batch_norm(
    x: nd.NDArray, gamma: nd.NDArray, beta: nd.NDArray, epsilon: float
) -> nd.NDArray:
    """A training step's batch normalization of ``(rows, channels)``: each
    channel's mean and (biased) variance over the rows, then ``x * inv +
    (beta - mean * inv)`` with ``inv = gamma / sqrt(var + epsilon)``, as
    ``native.mxnet.ops.batch_norm_train`` computes it."""
    channels = (1, x.shape[1])
    mean = nd.mean(x, axis=0)
    centered = nd.broadcast_sub(x, nd.reshape(mean, shape=channels))
    var = nd.mean(nd.square(centered), axis=0)
    inv = nd.rsqrt(var + epsilon) * gamma
    shift = beta - mean * inv
    scaled = nd.broadcast_mul(x, nd.reshape(inv, shape=channels))
    return nd.broadcast_add(scaled, nd.reshape(shift, shape=channels))


def embedding(ids: nd.NDArray, table: nd.NDArray) -> nd.NDArray:
    """The rows of ``table`` that ``ids`` (float32 indices, ``(N, T)``) name:
    ``(N, T, dim)``; the table's gradient dense."""
    vocab, dim = table.shape
    return nd.Embedding(ids, table, input_dim=vocab, output_dim=dim)


def attention(q: nd.NDArray, k: nd.NDArray, v: nd.NDArray) -> nd.NDArray:
    """``softmax(q k^T / sqrt(key_dim)) v`` per head; each ``(N, heads, T,
    key_dim)``, the heads folded into ``batch_dot``'s batch."""
    n, heads, steps, key_dim = q.shape

    def folded(a: nd.NDArray) -> nd.NDArray:
        return nd.reshape(a, shape=(n * heads, steps, key_dim))

    scores = nd.batch_dot(
        folded(q) * (1 / math.sqrt(key_dim)), folded(k), transpose_b=True
    )
    y = nd.batch_dot(nd.softmax(scores, axis=-1), folded(v))
    return nd.reshape(y, shape=(n, heads, steps, key_dim))


def lstm_cell(  # noqa: PLR0917 (the operands arrive positionally)
    x: nd.NDArray,
    h: nd.NDArray,
    c: nd.NDArray,
    kernel: nd.NDArray,
    recurrent_kernel: nd.NDArray,
    bias: nd.NDArray,
) -> tuple[nd.NDArray, nd.NDArray]:
    """``(h_new, c_new)`` of one LSTM step; kernels ``(in, 4u)`` and ``(u,
    4u)``, gates in Keras' ``i, f, c, o`` order."""
    z = nd.broadcast_add(nd.dot(x, kernel) + nd.dot(h, recurrent_kernel), bias)
    i, f, g, o = nd.split(z, num_outputs=4, axis=1)
    c_new = nd.sigmoid(f) * c + nd.sigmoid(i) * nd.tanh(g)
    return nd.sigmoid(o) * nd.tanh(c_new), c_new


def gru_cell(
    x: nd.NDArray,
    h: nd.NDArray,
    kernel: nd.NDArray,
    recurrent_kernel: nd.NDArray,
    bias: nd.NDArray,
) -> nd.NDArray:
    """``h_new`` of one GRU step; kernels ``(in, 3u)`` and ``(u, 3u)``, gates
    in Keras' ``z, r, h`` order, the reset gate applied after the recurrent
    product (``reset_after``); ``bias`` ``(2, 3u)``: input, recurrent."""
    xs = nd.broadcast_add(nd.dot(x, kernel), bias[0])
    hs = nd.broadcast_add(nd.dot(h, recurrent_kernel), bias[1])
    x_z, x_r, x_h = nd.split(xs, num_outputs=3, axis=1)
    h_z, h_r, h_h = nd.split(hs, num_outputs=3, axis=1)
    z = nd.sigmoid(x_z + h_z)
    candidate = nd.tanh(x_h + nd.sigmoid(x_r + h_r) * h_h)
    return z * h + (1 - z) * candidate


def softmax_cross_entropy(logits: nd.NDArray, labels: nd.NDArray) -> nd.NDArray:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``, shape
    ``(1,)``; labels float32 class indices."""
    return loss(logits, labels, DEFAULT_OBJECTIVE)


def adam(
    p: nd.NDArray, g: nd.NDArray, m: nd.NDArray, v: nd.NDArray, step: int
) -> tuple[nd.NDArray, nd.NDArray, nd.NDArray]:
    """Keras' Adam update at iteration ``step`` (1-based) with
    ``zoo.operators.ADAM``'s constants, in place on ``p``, ``m`` and ``v`` as
    ``common``'s optimizer does; returns them, updated."""
    b1, b2 = ADAM["beta_1"], ADAM["beta_2"]
    # As Keras computes it: the powers of beta in float32 (0.999 is 0.99900001
    # there, which moves sqrt(1 - b2**t) by 6e-6).
    t, b1_32, b2_32 = np.float32(step), np.float32(b1), np.float32(b2)
    lr = np.float32(ADAM["learning_rate"])
    alpha = float(lr * np.sqrt(1 - b2_32**t) / (1 - b1_32**t))
    m[:] = m + (g - m) * (1 - b1)
    v[:] = v + (g * g - v) * (1 - b2)
    p[:] = p - m * alpha / (nd.sqrt(v) + ADAM["epsilon"])
    return p, m, v
