"""The operators of ``zoo.operators`` through PyTorch's own operators.

One function per operator, called ``fn(*operands, **attributes)`` as
``zoo.operators`` says, on tensors ``to_tensor`` placed on ``common.DEVICE``.
Each is the lowest-level public operator a PyTorch user reaches for:
``torch.matmul``, ``F.linear``, ``F.conv2d`` and ``F.conv1d`` (padding by
name), ``F.avg_pool2d`` / ``F.max_pool2d``, ``torch.mean``, ``torch.relu`` /
``sigmoid`` / ``tanh``, ``F.gelu``, ``F.layer_norm``, ``F.batch_norm``
(training: the batch's statistics, no running ones), ``F.embedding``,
``F.scaled_dot_product_attention`` and ``F.cross_entropy``.  PyTorch has no
LSTM- or GRU-cell operator over Keras' layouts and no Keras Adam, so those
are written out with its product and element-wise operators, as
``native/torch/ops.py`` and ``common.py`` do.

Layout ``oihw`` (``native.layout``'s family): images ``(N, C, H, W)``,
conv kernels ``(out, in, kh, kw)`` and ``(out, in, k)``,
dense kernels ``(out, in)`` as ``F.linear`` wants them, attention heads
``(N, heads, T, key_dim)``; sequences stay ``(N, T, C)``; LSTM and GRU
kernels keep their canonical ``(in, 4u)``, ``(u, 4u)``, ``(in, 3u)``,
``(u, 3u)``.

The forward pass is ``fn(*operands)`` called eagerly (no ``torch.compile``);
``backward`` builds the gradient pass once with eager autograd; ``sync``
waits for the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from native.torch.common import DEVICE, to_numpy
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


def to_tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` on ``DEVICE`` in its own float dtype; integer labels and token
    ids as int64, the indices ``F.cross_entropy`` and ``F.embedding`` take."""
    if np.issubdtype(a.dtype, np.integer):
        return torch.tensor(a, dtype=torch.int64, device=DEVICE)
    return torch.tensor(a, device=DEVICE)


def sync(results: Sequence[torch.Tensor]) -> None:
    """Returns once every tensor in ``results`` is computed: the CPU computes
    eagerly, a GPU is waited for as a whole (no copy to the host)."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()


def backward(
    fn: Callable[..., Any],
    operands: list[torch.Tensor],
    wrt: list[int],
    cotangents: list[torch.Tensor],
) -> Callable[[], tuple[list[torch.Tensor], list[torch.Tensor]]]:
    """A closure computing ``fn(*operands)`` and the gradients of ``sum_k
    <results[k], cotangents[k]>`` with respect to ``operands[i]`` for ``i``
    in ``wrt`` (in that order), as ``(results, grads)``, without waiting.

    Only autograd is used, so ``fn`` may be any function of torch tensors
    (``keras.ops`` on the torch backend too).  The caller's operands are left
    as they are: the differentiated ones are aliases (``detach``, the same
    memory) that require gradients, so the caller's forward pass over the
    originals records no graph."""
    args = list(operands)
    for i in wrt:
        args[i] = operands[i].detach().requires_grad_()
    inputs = [args[i] for i in wrt]

    def run() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        out = fn(*args)
        results = list(out) if isinstance(out, tuple | list) else [out]
        grads = torch.autograd.grad(results, inputs, grad_outputs=cotangents)
        # The graph is freed by now; detached results hold none of it.
        return [r.detach() for r in results], list(grads)

    return run


def matmul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w``."""
    return torch.matmul(x, w)


def dense(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``x @ w.T + b``; ``w`` is ``(out, in)``."""
    return F.linear(x, w, b)


def conv2d(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, padding: str
) -> torch.Tensor:
    """Stride-1 convolution plus bias, ``padding`` ``"same"`` or ``"valid"``
    (which ``F.conv2d`` takes by name); ``w`` is ``(out, in, kh, kw)``."""
    return F.conv2d(x, w, b, padding=padding)


def conv1d(
    x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, padding: str
) -> torch.Tensor:
    """Stride-1 convolution over a sequence plus bias, ``padding`` ``"same"``
    (as Keras': an odd pad after) or ``"valid"``; ``x`` is ``(N, T, C)``,
    viewed as the ``(N, C, T)`` ``F.conv1d`` takes, and ``w`` is ``(out, in,
    k)``."""
    channels_first = x.transpose(1, 2)
    k = w.shape[2]
    if padding == "same" and k % 2 == 0:
        # F.conv1d's "same" would pad this copy itself, and warn every call
        channels_first = F.pad(channels_first, ((k - 1) // 2, k // 2))
        padding = "valid"
    return F.conv1d(channels_first, w, b, padding=padding).transpose(1, 2)


def avg_pool(x: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` averages, stride ``size``, no padding, floor."""
    return F.avg_pool2d(x, size)


def max_pool(x: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` maxima, stride ``size``, no padding, floor."""
    return F.max_pool2d(x, size)


def global_avg_pool(x: torch.Tensor) -> torch.Tensor:
    """The mean over a sequence's steps: ``(N, T, C)`` to ``(N, C)``."""
    return torch.mean(x, dim=1)


def relu(x: torch.Tensor) -> torch.Tensor:
    """``max(x, 0)``."""
    return torch.relu(x)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """``1 / (1 + exp(-x))``."""
    return torch.sigmoid(x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``."""
    return torch.tanh(x)


def gelu(x: torch.Tensor) -> torch.Tensor:
    """``x / 2 * (1 + erf(x / sqrt(2)))``, the exact GELU."""
    return F.gelu(x)


def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, epsilon: float
) -> torch.Tensor:
    """Each row normalized by its mean and (biased) variance, then scaled by
    ``gamma`` and shifted by ``beta``."""
    return F.layer_norm(x, (x.shape[1],), gamma, beta, epsilon)


def batch_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, epsilon: float
) -> torch.Tensor:
    """A training step's batch normalization of ``(rows, channels)``: each
    channel normalized by its mean and (biased) variance over the rows, then
    scaled by ``gamma`` and shifted by ``beta`` (``F.batch_norm`` in training
    without running statistics: PyTorch's unbiased variance only updates
    those, which are not kept here)."""
    return F.batch_norm(x, None, None, gamma, beta, training=True, eps=epsilon)


def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """The rows of ``table`` that ``ids`` (int64, ``(N, T)``) name: ``(N, T,
    dim)``; the table's gradient dense."""
    return F.embedding(ids, table)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``softmax(q k^T / sqrt(key_dim)) v`` per head (the default scale);
    each ``(N, heads, T, key_dim)``."""
    return F.scaled_dot_product_attention(q, k, v)


def lstm_cell(  # noqa: PLR0917 (the operands arrive positionally)
    x: torch.Tensor,
    h: torch.Tensor,
    c: torch.Tensor,
    kernel: torch.Tensor,
    recurrent_kernel: torch.Tensor,
    bias: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h_new, c_new)`` of one LSTM step; kernels ``(in, 4u)`` and ``(u,
    4u)``, gates in Keras' ``i, f, c, o`` order."""
    z = torch.matmul(x, kernel) + torch.matmul(h, recurrent_kernel) + bias
    i, f, g, o = z.chunk(4, dim=1)
    c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c_new), c_new


def gru_cell(
    x: torch.Tensor,
    h: torch.Tensor,
    kernel: torch.Tensor,
    recurrent_kernel: torch.Tensor,
    bias: torch.Tensor,
) -> torch.Tensor:
    """``h_new`` of one GRU step; kernels ``(in, 3u)`` and ``(u, 3u)``, gates
    in Keras' ``z, r, h`` order, the reset gate applied after the recurrent
    product (``reset_after``); ``bias`` ``(2, 3u)``: input, recurrent."""
    x_z, x_r, x_h = (torch.matmul(x, kernel) + bias[0]).chunk(3, dim=1)
    h_z, h_r, h_h = (torch.matmul(h, recurrent_kernel) + bias[1]).chunk(3, dim=1)
    z = torch.sigmoid(x_z + h_z)
    candidate = torch.tanh(x_h + torch.sigmoid(x_r + h_r) * h_h)
    return z * h + (1 - z) * candidate


def softmax_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``; labels
    int64 class indices."""
    return F.cross_entropy(logits, labels)


@torch.no_grad()
def adam(
    p: torch.Tensor, g: torch.Tensor, m: torch.Tensor, v: torch.Tensor, step: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keras' Adam update at iteration ``step`` (1-based) with
    ``zoo.operators.ADAM``'s constants, in place on ``p``, ``m`` and ``v`` as
    ``common``'s optimizer does; returns them, updated."""
    b1, b2 = ADAM["beta_1"], ADAM["beta_2"]
    # As Keras computes it: the powers of beta in the parameter's dtype (in
    # float32, 0.999 is 0.99900001, which moves sqrt(1 - b2**t) by 6e-6).  A
    # CPU scalar, so reading it back waits for nothing on a GPU.
    t = torch.tensor(step, dtype=p.dtype)
    alpha = (ADAM["learning_rate"] * (1 - b2**t).sqrt() / (1 - b1**t)).item()
    m.add_(g - m, alpha=1 - b1)
    v.add_(g * g - v, alpha=1 - b2)
    p.sub_(m * alpha / (v.sqrt() + ADAM["epsilon"]))
    return p, m, v
