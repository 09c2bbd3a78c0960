"""The operators of ``zoo.operators`` through MXNet's own ``mx.nd`` operators.

One function per operator, called ``fn(*operands, **attributes)`` as
``zoo.operators`` says, on arrays ``to_tensor`` placed on ``common.CTX``.
Each is the lowest-level public operator an MXNet user reaches for:
``nd.dot``, ``nd.FullyConnected``, ``nd.Convolution`` (``same`` padding as a
pad of ``k // 2``), ``nd.Pooling`` and ``nd.relu`` / ``sigmoid`` / ``tanh``.
MXNet has no LSTM-cell operator over Keras' layouts and no Keras Adam, so
those two are written out with its product and element-wise operators, as
``native/mxnet/ops.py`` and ``common.py`` do; the loss is ``common``'s
``cross_entropy`` (written out too: MXNet 1.9.1's oneDNN ``log_softmax`` is
3.5e-6 off).

Layout ``oihw`` (``native.layout``'s family): images ``(N, C, H, W)``,
conv kernels ``(out, in, kh, kw)``,
dense kernels ``(out, in)`` as ``FullyConnected`` wants them; LSTM kernels
keep their canonical ``(in, 4u)`` and ``(u, 4u)``.  MXNet's ``nd`` arrays
have no 0-d shape: a scalar (the loss, its cotangent) is ``(1,)``.

The forward pass is ``fn(*operands)`` called imperatively (no hybridize);
``backward`` builds the gradient pass once with ``autograd``; the engine is
asynchronous, so ``sync`` waits with ``nd.waitall()``.  Runs on NumPy 1.23
without Keras.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from mxnet import autograd, nd

from native.mxnet.common import CTX, cross_entropy, to_numpy
from zoo.operators import ADAM

__all__ = [
    "LAYOUT",
    "adam",
    "avg_pool",
    "backward",
    "conv2d",
    "dense",
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
    integer labels as float32, the indices ``nd.pick`` takes (exact below
    2**24 classes)."""
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


def relu(x: nd.NDArray) -> nd.NDArray:
    """``max(x, 0)``."""
    return nd.relu(x)


def sigmoid(x: nd.NDArray) -> nd.NDArray:
    """``1 / (1 + exp(-x))``."""
    return nd.sigmoid(x)


def tanh(x: nd.NDArray) -> nd.NDArray:
    """``tanh(x)``."""
    return nd.tanh(x)


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


def softmax_cross_entropy(logits: nd.NDArray, labels: nd.NDArray) -> nd.NDArray:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``, shape
    ``(1,)``; labels float32 class indices."""
    return cross_entropy(logits, labels)


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
