"""The operators of ``zoo.operators`` through ``keras.ops``, on any backend.

Import this only in a process whose ``KERAS_BACKEND`` is already set: Keras
picks its backend once per process, at import, so ``keras.ops`` here is that
backend's and every function takes and returns that backend's own tensors.

Each function is what a Keras user gets from the matching layer, loss or
optimizer (read in the installed Keras 3.15 source, and checked equal to
them on all three backends):

- ``dense``: ``keras.layers.Dense.call``, ``ops.matmul`` then ``ops.add``.
- ``conv2d``: ``keras.layers.Conv2D``, ``ops.conv`` channels_last plus the
  bias reshaped to ``(1, 1, 1, f)``.  JAX runs ``lax.conv_general_dilated``
  in NHWC/HWIO and TensorFlow ``tf.nn.convolution`` in NHWC; torch copies
  the images to contiguous NCHW, then to ``channels_last`` memory (NHWC
  again), the kernel to ``channels_last`` OIHW, runs ``conv2d`` and permutes
  the result back to NHWC.
- ``conv1d``: ``keras.layers.Conv1D``, ``ops.conv`` channels_last plus the
  bias reshaped to ``(1, 1, f)``.
- ``global_avg_pool``: ``GlobalAveragePooling1D``, ``ops.mean`` over the
  steps.
- ``gelu``: the ``gelu`` activation, ``ops.gelu(approximate=False)``.
- ``layer_norm``: ``LayerNormalization.call``, ``ops.layer_normalization``
  over the last axis (torch: ``F.layer_norm``; elsewhere moments, ``rsqrt``
  and ``x * inv + (beta - mean * inv)``).
- ``batch_norm``: ``BatchNormalization.call`` in training on ``(rows,
  channels)``: ``ops.moments`` over the rows (torch: ``E[x^2] - E[x]^2``;
  JAX and TensorFlow: the mean of squared deviations), then
  ``ops.batch_normalization`` over the last axis.
- ``embedding``: ``keras.layers.Embedding.call``, ``ops.take`` along the
  table's rows.
- ``attention``: the core of ``MultiHeadAttention._compute_attention``
  without dropout or mask, ``ops.dot_product_attention`` on its ``(N, T,
  heads, key_dim)`` projections with the scale ``1 / sqrt(key_dim)``.
- ``gru_cell``: one step of ``keras.layers.GRUCell``'s default path
  (``implementation=2``, ``reset_after=True``), in its order of operations.
- ``avg_pool``, ``max_pool``: the pooling layers' ``ops.average_pool`` /
  ``ops.max_pool``; torch pools a contiguous NCHW copy and returns a
  permuted (non-contiguous) NHWC view.
- ``lstm_cell``: one step of ``keras.layers.LSTMCell``'s default fused path
  (``implementation=2``), in its order of operations.
- ``softmax_cross_entropy``: ``SparseCategoricalCrossentropy(from_logits=
  True)``'s mean (TensorFlow: ``sparse_softmax_cross_entropy_with_logits``;
  torch: ``cross_entropy``; JAX: ``log_softmax`` and a one-hot sum).
- ``adam``: ``keras.optimizers.Adam.update_step``, functional.  Bitwise
  what Keras' Adam gives on JAX and TensorFlow; on torch Keras' Adam runs
  its own ``torch._foreach`` form (``m * b1 + g * (1 - b1)``), which can
  differ in the last bit.
"""

from __future__ import annotations

import math
from typing import Any

from keras import ops

from zoo.operators import ADAM

LAYOUT = "keras"  # native.layout's family: channels-last, canonical

Tensor = Any  # the backend's own tensor type


def matmul(x: Tensor, w: Tensor) -> Tensor:
    """``x @ w``."""
    return ops.matmul(x, w)


def dense(x: Tensor, w: Tensor, b: Tensor) -> Tensor:
    """``x @ w + b``, as ``keras.layers.Dense`` without activation."""
    return ops.add(ops.matmul(x, w), b)


def conv2d(x: Tensor, w: Tensor, b: Tensor, padding: str) -> Tensor:
    """Stride-1 NHWC convolution with ``padding`` ``"same"`` or ``"valid"``,
    plus bias, as ``keras.layers.Conv2D`` without activation."""
    y = ops.conv(x, w, strides=1, padding=padding, data_format="channels_last")
    return ops.add(y, ops.reshape(b, (1, 1, 1, -1)))


def conv1d(x: Tensor, w: Tensor, b: Tensor, padding: str) -> Tensor:
    """Stride-1 convolution over ``(N, T, C)`` with ``padding`` ``"same"`` or
    ``"valid"``, plus bias, as ``keras.layers.Conv1D`` without activation."""
    y = ops.conv(x, w, strides=1, padding=padding, data_format="channels_last")
    return ops.add(y, ops.reshape(b, (1, 1, -1)))


def avg_pool(x: Tensor, size: int) -> Tensor:
    """``size x size`` average pooling, stride ``size``, no padding."""
    return ops.average_pool(
        x, size, strides=size, padding="valid", data_format="channels_last"
    )


def max_pool(x: Tensor, size: int) -> Tensor:
    """``size x size`` max pooling, stride ``size``, no padding."""
    return ops.max_pool(
        x, size, strides=size, padding="valid", data_format="channels_last"
    )


def global_avg_pool(x: Tensor) -> Tensor:
    """The mean over a sequence's steps, as ``GlobalAveragePooling1D``."""
    return ops.mean(x, axis=1)


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    return ops.relu(x)


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return ops.sigmoid(x)


def tanh(x: Tensor) -> Tensor:
    """``tanh(x)``."""
    return ops.tanh(x)


def gelu(x: Tensor) -> Tensor:
    """The exact GELU, Keras' ``gelu`` activation."""
    return ops.gelu(x, approximate=False)


def layer_norm(x: Tensor, gamma: Tensor, beta: Tensor, epsilon: float) -> Tensor:
    """``LayerNormalization`` over the last axis with ``epsilon``."""
    return ops.layer_normalization(x, gamma, beta, -1, epsilon)


def batch_norm(x: Tensor, gamma: Tensor, beta: Tensor, epsilon: float) -> Tensor:
    """``BatchNormalization`` over the last axis in a training step, with
    ``epsilon``: the batch's mean and (biased) variance over the rows."""
    mean, variance = ops.moments(x, axes=[0])
    return ops.batch_normalization(
        x, mean, variance, axis=-1, offset=beta, scale=gamma, epsilon=epsilon
    )


def embedding(ids: Tensor, table: Tensor) -> Tensor:
    """The rows of ``table`` that ``ids`` name, as ``keras.layers.Embedding``."""
    return ops.take(table, ids, axis=0)


def attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """``softmax(q k^T / sqrt(key_dim)) v`` per head on ``(N, T, heads,
    key_dim)``, as ``MultiHeadAttention`` computes it (no dropout, no mask,
    flash attention left to the backend)."""
    scale = 1 / math.sqrt(q.shape[-1])
    return ops.dot_product_attention(q, k, v, scale=scale, flash_attention=None)


def lstm_cell(  # noqa: PLR0917 (the operands arrive positionally)
    x: Tensor,
    h: Tensor,
    c: Tensor,
    kernel: Tensor,
    recurrent_kernel: Tensor,
    bias: Tensor,
) -> tuple[Tensor, Tensor]:
    """``(h_new, c_new)`` of one LSTM step, gates in Keras' ``i, f, c, o``
    order, in ``LSTMCell.call``'s order of operations."""
    z = ops.add(ops.matmul(x, kernel), ops.matmul(h, recurrent_kernel))
    z_i, z_f, z_c, z_o = ops.split(ops.add(z, bias), 4, axis=1)
    i, f, o = ops.sigmoid(z_i), ops.sigmoid(z_f), ops.sigmoid(z_o)
    c_new = ops.add(ops.multiply(f, c), ops.multiply(i, ops.tanh(z_c)))
    return ops.multiply(o, ops.tanh(c_new)), c_new


def gru_cell(
    x: Tensor,
    h: Tensor,
    kernel: Tensor,
    recurrent_kernel: Tensor,
    bias: Tensor,
) -> Tensor:
    """``h_new`` of one GRU step, gates in Keras' ``z, r, h`` order, in
    ``GRUCell.call``'s order of operations (``reset_after``: ``bias`` is the
    input bias and the recurrent one)."""
    input_bias, recurrent_bias = (
        ops.squeeze(e, axis=0) for e in ops.split(bias, 2, axis=0)
    )
    x_z, x_r, x_h = ops.split(ops.add(ops.matmul(x, kernel), input_bias), 3, axis=-1)
    inner = ops.add(ops.matmul(h, recurrent_kernel), recurrent_bias)
    units = h.shape[-1]
    z = ops.sigmoid(ops.add(x_z, inner[:, :units]))
    r = ops.sigmoid(ops.add(x_r, inner[:, units : 2 * units]))
    candidate = ops.tanh(ops.add(x_h, ops.multiply(r, inner[:, 2 * units :])))
    return ops.add(ops.multiply(z, h), ops.multiply(1 - z, candidate))


def softmax_cross_entropy(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``."""
    # Keras' loss functions take the target first.
    per_example = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    return ops.mean(per_example)


def adam(
    p: Tensor, g: Tensor, m: Tensor, v: Tensor, step: int
) -> tuple[Tensor, Tensor, Tensor]:
    """``(p_new, m_new, v_new)``: Keras' Adam update at iteration ``step``
    (1-based) with ``zoo.operators.ADAM``'s constants."""
    b1, b2 = ADAM["beta_1"], ADAM["beta_2"]
    # As update_step: learning rate and step cast to float32, beta's powers in
    # float32, the (1 - beta) factors and epsilon left as Python floats.
    lr = ops.cast(ADAM["learning_rate"], "float32")
    t = ops.cast(step, "float32")
    b1_power = ops.power(ops.cast(b1, "float32"), t)
    b2_power = ops.power(ops.cast(b2, "float32"), t)
    alpha = lr * ops.sqrt(1 - b2_power) / (1 - b1_power)
    m_new = ops.add(m, ops.multiply(ops.subtract(g, m), 1 - b1))
    v_new = ops.add(v, ops.multiply(ops.subtract(ops.square(g), v), 1 - b2))
    update = ops.divide(
        ops.multiply(m_new, alpha), ops.add(ops.sqrt(v_new), ADAM["epsilon"])
    )
    return ops.subtract(p, update), m_new, v_new
