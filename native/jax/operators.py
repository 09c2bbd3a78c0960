"""The operators of ``zoo.operators`` from JAX's own ``jax.lax`` primitives.

One function per operator, called as ``zoo.operators`` says: operands in
``Operator.inputs`` order, in Keras' layouts (``LAYOUT = "keras"``: images
``(N, H, W, C)``, sequences ``(N, T, C)``, conv kernels ``HWIO`` and ``WIO``,
dense kernels ``(in, out)``, attention heads ``(N, T, heads, key_dim)``),
results in ``Operator.outputs`` order.  Products follow
``jax_default_matmul_precision``, which the worker pins to ``"highest"`` (no
silent bfloat16 or TF32 passes).
Where ``lax`` has no single primitive (the GELU, layer and batch
normalization, the embedding's lookup, attention, the LSTM and GRU cells, the
loss, Adam) the function writes it out from primitives (and ``jnp.take``),
functionally: new arrays, no donation.

The forward pass is ``fn(*operands)`` called eagerly, no ``jax.jit``: JAX then
dispatches each primitive on its own (compiled once per shape and cached), as
op-by-op code runs.  The backward pass (``backward``) is ``jax.jit``-compiled
instead, because JAX's only reverse mode (``jax.vjp``) traces the function
anew on every eager call; compilation happens on the closure's first call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from zoo.operators import ADAM

LAYOUT = "keras"
_NHWC = ("NHWC", "HWIO", "NHWC")
_NWC = ("NWC", "WIO", "NWC")
_MATMUL = (((1,), (0,)), ((), ()))  # contract x's columns with w's rows


def to_tensor(a: np.ndarray) -> jax.Array:
    """``a`` on JAX's default device, its dtype kept (float32, int32 labels)."""
    return jnp.asarray(a)


def to_numpy(t: jax.Array) -> np.ndarray:
    """A host copy of ``t``, once it is computed."""
    return np.array(t)


def sync(results: Sequence[Any]) -> None:
    """Return once every array in ``results`` (nested lists too) is computed,
    copying nothing to the host."""
    jax.block_until_ready(results)


def backward(
    fn: Callable[..., Any],
    operands: list[jax.Array],
    wrt: list[int],
    cotangents: list[jax.Array],
) -> Callable[[], tuple[list[jax.Array], list[jax.Array]]]:
    """A closure returning ``(results, grads)``: ``fn(*operands)`` as a list,
    and the gradients of ``sum_k <results[k], cotangents[k]>`` with respect to
    ``operands[i]`` for ``i`` in ``wrt``, in ``wrt`` order, not waited for.

    ``jax.vjp`` inside one ``jax.jit``, built here and compiled on the first
    call: eager ``jax.vjp`` would trace ``fn`` again on every call.  The
    operands and cotangents are the compiled function's arguments, not
    constants baked into it; operands outside ``wrt`` (labels) pass through.
    """

    def forward_backward(
        args: list[jax.Array], cots: list[jax.Array]
    ) -> tuple[list[jax.Array], list[jax.Array]]:
        def differentiated(*primals: jax.Array) -> list[jax.Array]:
            full = list(args)
            for i, primal in zip(wrt, primals, strict=True):
                full[i] = primal
            out = fn(*full)
            return list(out) if isinstance(out, tuple) else [out]

        results, pullback = jax.vjp(differentiated, *(args[i] for i in wrt))
        return results, list(pullback(cots))

    compiled = jax.jit(forward_backward)
    return lambda: compiled(operands, cotangents)  # type: ignore[no-any-return]


def matmul(x: jax.Array, w: jax.Array) -> jax.Array:
    """``x @ w``: ``(m, k) @ (k, n)``."""
    return lax.dot_general(x, w, _MATMUL)


def dense(x: jax.Array, w: jax.Array, b: jax.Array) -> jax.Array:
    """``x @ w + b``; ``w`` is ``(in, out)``."""
    return lax.dot_general(x, w, _MATMUL) + b


def conv2d(x: jax.Array, w: jax.Array, b: jax.Array, padding: str) -> jax.Array:
    """Stride-1 convolution plus bias, ``padding`` ``"same"`` or ``"valid"``;
    ``x`` is ``(N, H, W, C)``, ``w`` is ``(kh, kw, in, out)``."""
    y = lax.conv_general_dilated(x, w, (1, 1), padding.upper(), dimension_numbers=_NHWC)
    return y + b


def conv1d(x: jax.Array, w: jax.Array, b: jax.Array, padding: str) -> jax.Array:
    """Stride-1 convolution over a sequence plus bias, ``padding`` ``"same"``
    (XLA's, as Keras': an odd pad after) or ``"valid"``; ``x`` is ``(N, T,
    C)``, ``w`` is ``(k, in, out)``."""
    y = lax.conv_general_dilated(x, w, (1,), padding.upper(), dimension_numbers=_NWC)
    return y + b


def avg_pool(x: jax.Array, size: int) -> jax.Array:
    """Means of ``size`` x ``size`` windows, stride ``size``, no padding (a
    ragged last row or column is dropped)."""
    window = (1, size, size, 1)
    return lax.reduce_window(x, 0.0, lax.add, window, window, "VALID") / (size * size)


def max_pool(x: jax.Array, size: int) -> jax.Array:
    """Maxima of ``size`` x ``size`` windows, stride ``size``, no padding."""
    window = (1, size, size, 1)
    return lax.reduce_window(x, -jnp.inf, lax.max, window, window, "VALID")


def global_avg_pool(x: jax.Array) -> jax.Array:
    """The mean over a sequence's steps: ``(N, T, C)`` to ``(N, C)``."""
    return lax.reduce_sum(x, (1,)) / x.shape[1]


def relu(x: jax.Array) -> jax.Array:
    # A zero of x's own dtype: lax does not promote, and a Python 0.0 would be
    # float64 were 64-bit mode on.
    return lax.max(x, x.dtype.type(0))


def sigmoid(x: jax.Array) -> jax.Array:
    return lax.logistic(x)


def tanh(x: jax.Array) -> jax.Array:
    return lax.tanh(x)


def gelu(x: jax.Array) -> jax.Array:
    """``x / 2 * (1 + erf(x / sqrt(2)))``, the exact GELU."""
    return x * (lax.erf(x * (1 / math.sqrt(2))) + 1) * 0.5


def layer_norm(
    x: jax.Array, gamma: jax.Array, beta: jax.Array, epsilon: float
) -> jax.Array:
    """Each row of ``x`` less its mean, over ``sqrt(var + epsilon)`` (the
    variance biased), times ``gamma`` plus ``beta``."""
    cols = x.shape[1]
    centered = x - (lax.reduce_sum(x, (1,)) / cols)[:, None]
    var = lax.reduce_sum(centered * centered, (1,)) / cols
    return centered * lax.rsqrt(var + epsilon)[:, None] * gamma + beta


def batch_norm(
    x: jax.Array, gamma: jax.Array, beta: jax.Array, epsilon: float
) -> jax.Array:
    """A training step's batch normalization of ``(rows, channels)``: each
    channel's mean and (biased) variance over the rows, then ``x * inv +
    (beta - mean * inv)`` with ``inv = gamma / sqrt(var + epsilon)``, as
    ``native.jax.ops.batch_norm_train`` computes it."""
    rows = x.shape[0]
    mean = lax.reduce_sum(x, (0,)) / rows
    centered = x - mean
    var = lax.reduce_sum(centered * centered, (0,)) / rows
    inv = lax.rsqrt(var + epsilon) * gamma
    return x * inv + (beta - mean * inv)


def embedding(ids: jax.Array, table: jax.Array) -> jax.Array:
    """The rows of ``table`` that ``ids`` (int32, ``(N, T)``) name: ``(N, T,
    dim)``."""
    return jnp.take(table, ids, axis=0)


def attention(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """``softmax(q k^T / sqrt(key_dim)) v`` per head; each ``(N, T, heads,
    key_dim)``."""
    scaled = q * (1 / math.sqrt(q.shape[-1]))
    # contract key_dim, batch over (N, heads): scores (N, heads, T, T)
    scores = lax.dot_general(scaled, k, (((3,), (3,)), ((0, 2), (0, 2))))
    top = lax.stop_gradient(lax.reduce_max(scores, (3,)))
    e = lax.exp(scores - top[..., None])
    weights = e / lax.reduce_sum(e, (3,))[..., None]
    # contract the keys' steps: (N, heads, T, key_dim)
    y = lax.dot_general(weights, v, (((3,), (1,)), ((0, 1), (0, 2))))
    return lax.transpose(y, (0, 2, 1, 3))


def lstm_cell(  # noqa: PLR0917 (the operator's positional operands)
    x: jax.Array,
    h: jax.Array,
    c: jax.Array,
    kernel: jax.Array,
    recurrent_kernel: jax.Array,
    bias: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """One LSTM step, ``(h_new, c_new)``, gates in Keras' ``i, f, c, o``
    order."""
    z = lax.dot_general(x, kernel, _MATMUL) + lax.dot_general(
        h, recurrent_kernel, _MATMUL
    )
    units = h.shape[1]
    i, f, g, o = lax.split(z + bias, (units,) * 4, axis=1)
    c_new = lax.logistic(f) * c + lax.logistic(i) * lax.tanh(g)
    return lax.logistic(o) * lax.tanh(c_new), c_new


def gru_cell(
    x: jax.Array,
    h: jax.Array,
    kernel: jax.Array,
    recurrent_kernel: jax.Array,
    bias: jax.Array,
) -> jax.Array:
    """One GRU step, ``h_new``, gates in Keras' ``z, r, h`` order, the reset
    gate applied after the recurrent product (``reset_after``); ``bias`` is
    ``(2, 3u)``: input and recurrent biases."""
    units = h.shape[1]
    xs = lax.dot_general(x, kernel, _MATMUL) + bias[0]
    hs = lax.dot_general(h, recurrent_kernel, _MATMUL) + bias[1]
    x_z, x_r, x_h = lax.split(xs, (units,) * 3, axis=1)
    h_z, h_r, h_h = lax.split(hs, (units,) * 3, axis=1)
    z = lax.logistic(x_z + h_z)
    candidate = lax.tanh(x_h + lax.logistic(x_r + h_r) * h_h)
    return z * h + (1 - z) * candidate


def softmax_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``."""
    # Shifting by the row's maximum keeps exp finite; the shift cancels in the
    # loss, so its gradient is not followed.
    top = lax.stop_gradient(lax.reduce_max(logits, (1,)))
    shifted = logits - top[:, None]
    log_norm = lax.log(lax.reduce_sum(lax.exp(shifted), (1,)))
    picked = jnp.take_along_axis(shifted, labels[:, None], axis=1)[:, 0]
    return lax.reduce_sum(log_norm - picked, (0,)) / logits.shape[0]


def adam(
    p: jax.Array, g: jax.Array, m: jax.Array, v: jax.Array, step: int
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """One Adam update at step ``step`` (counted from 1), Keras' formula and
    defaults: ``(p_new, m_new, v_new)``."""
    lr, beta_1, beta_2 = ADAM["learning_rate"], ADAM["beta_1"], ADAM["beta_2"]
    # The bias corrections' powers in float32, as Keras computes them.
    t = jnp.float32(step)
    power_1 = jnp.float32(beta_1) ** t
    power_2 = jnp.float32(beta_2) ** t
    alpha = lr * lax.sqrt(1 - power_2) / (1 - power_1)
    m_new = m + (g - m) * (1 - beta_1)
    v_new = v + (g * g - v) * (1 - beta_2)
    p_new = p - m_new * alpha / (lax.sqrt(v_new) + ADAM["epsilon"])
    return p_new, m_new, v_new
