"""The operators of ``zoo.operators`` through PyTorch's own operators.

One function per operator, called ``fn(*operands, **attributes)`` as
``zoo.operators`` says, on tensors ``to_tensor`` placed on ``common.DEVICE``.
Each is the lowest-level public operator a PyTorch user reaches for:
``torch.matmul``, ``F.linear``, ``F.conv2d`` (padding by name),
``F.avg_pool2d`` / ``F.max_pool2d``, ``torch.relu`` / ``sigmoid`` / ``tanh``
and ``F.cross_entropy``.  PyTorch has no LSTM-cell operator over Keras'
layouts and no Keras Adam, so those two are written out with its product and
element-wise operators, as ``native/torch/ops.py`` and ``common.py`` do.

Layout ``oihw`` (``native.layout``'s family): images ``(N, C, H, W)``,
conv kernels ``(out, in, kh, kw)``,
dense kernels ``(out, in)`` as ``F.linear`` wants them; LSTM kernels keep
their canonical ``(in, 4u)`` and ``(u, 4u)``.

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


def to_tensor(a: np.ndarray) -> torch.Tensor:
    """``a`` on ``DEVICE`` in its own float dtype; integer labels as int64,
    the class indices ``F.cross_entropy`` takes."""
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


def avg_pool(x: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` averages, stride ``size``, no padding, floor."""
    return F.avg_pool2d(x, size)


def max_pool(x: torch.Tensor, size: int) -> torch.Tensor:
    """``size`` x ``size`` maxima, stride ``size``, no padding, floor."""
    return F.max_pool2d(x, size)


def relu(x: torch.Tensor) -> torch.Tensor:
    """``max(x, 0)``."""
    return torch.relu(x)


def sigmoid(x: torch.Tensor) -> torch.Tensor:
    """``1 / (1 + exp(-x))``."""
    return torch.sigmoid(x)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)``."""
    return torch.tanh(x)


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
