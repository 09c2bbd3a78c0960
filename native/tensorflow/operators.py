"""The operators of ``zoo.operators`` from TensorFlow's own ``tf.raw_ops`` and
``tf.nn`` operators.

One function per operator, called as ``zoo.operators`` says: operands in
``Operator.inputs`` order, in Keras' layouts (``LAYOUT = "keras"``: images
``(N, H, W, C)``, sequences ``(N, T, C)``, conv kernels ``(kh, kw, in, out)``
and ``(k, in, out)``, dense kernels ``(in, out)``, attention heads ``(N, T,
heads, key_dim)``), results in ``Operator.outputs`` order.  Where TensorFlow
has no single operator (attention, the LSTM and GRU cells, Adam) the function
writes it out from element-wise and product operators, functionally: new
tensors, no variables.

Everything runs eagerly, no ``tf.function``: the forward pass is
``fn(*operands)`` called as it is, and the backward pass (``backward``) a
fresh ``tf.GradientTape`` per call, as eager TensorFlow code computes
gradients.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from zoo.operators import ADAM

LAYOUT = "keras"


def to_tensor(a: np.ndarray) -> tf.Tensor:
    """``a`` as an eager tensor placed as ``native.tensorflow.common`` places
    inputs, its dtype kept (float32; int32 labels, which the loss takes)."""
    return tf.constant(a)


def to_numpy(t: tf.Tensor) -> np.ndarray:
    """A host copy of ``t``, once it is computed (``t.numpy()`` alone may share
    a CPU tensor's buffer)."""
    return np.array(t)


def sync(results: Sequence[Any]) -> None:
    """Return once every tensor in ``results`` is computed, copying nothing to
    the host: ``tf.test.experimental.sync_devices`` waits for every device
    (and any asynchronous eager queue), so it covers ``results`` and more."""
    tf.test.experimental.sync_devices()


def backward(
    fn: Callable[..., Any],
    operands: list[tf.Tensor],
    wrt: list[int],
    cotangents: list[tf.Tensor],
) -> Callable[[], tuple[list[tf.Tensor], list[tf.Tensor]]]:
    """A closure returning ``(results, grads)``: ``fn(*operands)`` as a list,
    and the gradients of ``sum_k <results[k], cotangents[k]>`` with respect to
    ``operands[i]`` for ``i`` in ``wrt``, in ``wrt`` order, not waited for.

    Each call records ``fn`` on a new eager ``tf.GradientTape`` watching the
    ``wrt`` operands (plain tensors, not variables) and replays it with the
    cotangents as output gradients; the other operands (labels) go in as they
    are.  Gradients come back dense, zeros where ``fn`` ignores an operand."""
    # The tape tells tensors apart by identity: one tensor passed twice (x and
    # w of ``matmul(a, a)``) would get the sum of both gradients in both
    # places, so each differentiated operand gets its own tensor, once, here.
    args = list(operands)
    for i in wrt:
        args[i] = tf.identity(args[i])
    watched = [args[i] for i in wrt]

    def forward_backward() -> tuple[list[tf.Tensor], list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            tape.watch(watched)
            out = fn(*args)
        results = list(out) if isinstance(out, tuple) else [out]
        grads = tape.gradient(
            results,
            watched,
            output_gradients=cotangents,
            unconnected_gradients=tf.UnconnectedGradients.ZERO,  # as jax.vjp
        )
        # A gather's gradient comes back as IndexedSlices; the caller wants
        # dense tensors, and densifying is part of computing them.
        return results, [tf.convert_to_tensor(g) for g in grads]

    return forward_backward


def matmul(x: tf.Tensor, w: tf.Tensor) -> tf.Tensor:
    """``x @ w``: ``(m, k) @ (k, n)``."""
    return tf.raw_ops.MatMul(a=x, b=w)


def dense(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor) -> tf.Tensor:
    """``x @ w + b``; ``w`` is ``(in, out)``."""
    return tf.nn.bias_add(tf.raw_ops.MatMul(a=x, b=w), b)


def conv2d(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, padding: str) -> tf.Tensor:
    """Stride-1 convolution plus bias, ``padding`` ``"same"`` or ``"valid"``;
    ``x`` is ``(N, H, W, C)``, ``w`` is ``(kh, kw, in, out)``."""
    return tf.nn.bias_add(tf.nn.conv2d(x, w, 1, padding.upper()), b)


def conv1d(x: tf.Tensor, w: tf.Tensor, b: tf.Tensor, padding: str) -> tf.Tensor:
    """Stride-1 convolution over a sequence plus bias, ``padding`` ``"same"``
    or ``"valid"``; ``x`` is ``(N, T, C)``, ``w`` is ``(k, in, out)``."""
    return tf.nn.bias_add(tf.nn.conv1d(x, w, 1, padding.upper()), b)


def avg_pool(x: tf.Tensor, size: int) -> tf.Tensor:
    """Means of ``size`` x ``size`` windows, stride ``size``, no padding (a
    ragged last row or column is dropped)."""
    return tf.nn.avg_pool2d(x, size, size, "VALID")


def max_pool(x: tf.Tensor, size: int) -> tf.Tensor:
    """Maxima of ``size`` x ``size`` windows, stride ``size``, no padding."""
    return tf.nn.max_pool2d(x, size, size, "VALID")


def global_avg_pool(x: tf.Tensor) -> tf.Tensor:
    """The mean over a sequence's steps: ``(N, T, C)`` to ``(N, C)``."""
    return tf.reduce_mean(x, axis=1)


def relu(x: tf.Tensor) -> tf.Tensor:
    return tf.nn.relu(x)


def sigmoid(x: tf.Tensor) -> tf.Tensor:
    return tf.math.sigmoid(x)


def tanh(x: tf.Tensor) -> tf.Tensor:
    return tf.math.tanh(x)


def gelu(x: tf.Tensor) -> tf.Tensor:
    """``x / 2 * (1 + erf(x / sqrt(2)))``, the exact GELU."""
    return tf.nn.gelu(x, approximate=False)


def layer_norm(
    x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float
) -> tf.Tensor:
    """Each row normalized by its mean and (biased) variance, then scaled by
    ``gamma`` and shifted by ``beta``: ``tf.nn.moments`` and
    ``tf.nn.batch_normalization`` over the last axis."""
    mean, var = tf.nn.moments(x, axes=[1], keepdims=True)
    return tf.nn.batch_normalization(x, mean, var, beta, gamma, epsilon)


def batch_norm(
    x: tf.Tensor, gamma: tf.Tensor, beta: tf.Tensor, epsilon: float
) -> tf.Tensor:
    """A training step's batch normalization of ``(rows, channels)``: each
    channel normalized by its mean and (biased) variance over the rows, then
    scaled by ``gamma`` and shifted by ``beta``: ``tf.nn.moments`` over the
    rows and ``tf.nn.batch_normalization``."""
    mean, var = tf.nn.moments(x, axes=[0])
    return tf.nn.batch_normalization(x, mean, var, beta, gamma, epsilon)


def embedding(ids: tf.Tensor, table: tf.Tensor) -> tf.Tensor:
    """The rows of ``table`` that ``ids`` (``(N, T)``) name: ``(N, T, dim)``."""
    return tf.nn.embedding_lookup(table, ids)


def attention(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor) -> tf.Tensor:
    """``softmax(q k^T / sqrt(key_dim)) v`` per head; each ``(N, T, heads,
    key_dim)``, transposed to ``(N, heads, T, key_dim)`` for the products."""
    heads = [tf.transpose(a, (0, 2, 1, 3)) for a in (q, k, v)]
    scaled = heads[0] * (1 / math.sqrt(q.shape[-1]))
    weights = tf.nn.softmax(tf.matmul(scaled, heads[1], transpose_b=True))
    return tf.transpose(tf.matmul(weights, heads[2]), (0, 2, 1, 3))


def lstm_cell(  # noqa: PLR0917 (the operator's positional operands)
    x: tf.Tensor,
    h: tf.Tensor,
    c: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
) -> tuple[tf.Tensor, tf.Tensor]:
    """One LSTM step, ``(h_new, c_new)``, gates in Keras' ``i, f, c, o``
    order."""
    z = tf.raw_ops.MatMul(a=x, b=kernel) + tf.raw_ops.MatMul(a=h, b=recurrent_kernel)
    i, f, g, o = tf.split(tf.nn.bias_add(z, bias), 4, axis=1)
    c_new = tf.math.sigmoid(f) * c + tf.math.sigmoid(i) * tf.math.tanh(g)
    return tf.math.sigmoid(o) * tf.math.tanh(c_new), c_new


def gru_cell(
    x: tf.Tensor,
    h: tf.Tensor,
    kernel: tf.Tensor,
    recurrent_kernel: tf.Tensor,
    bias: tf.Tensor,
) -> tf.Tensor:
    """One GRU step, ``h_new``, gates in Keras' ``z, r, h`` order, the reset
    gate applied after the recurrent product (``reset_after``); ``bias`` is
    ``(2, 3u)``: input and recurrent biases."""
    xs = tf.nn.bias_add(tf.raw_ops.MatMul(a=x, b=kernel), bias[0])
    hs = tf.nn.bias_add(tf.raw_ops.MatMul(a=h, b=recurrent_kernel), bias[1])
    x_z, x_r, x_h = tf.split(xs, 3, axis=1)
    h_z, h_r, h_h = tf.split(hs, 3, axis=1)
    z = tf.math.sigmoid(x_z + h_z)
    candidate = tf.math.tanh(x_h + tf.math.sigmoid(x_r + h_r) * h_h)
    return z * h + (1 - z) * candidate


def softmax_cross_entropy(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Mean over the batch of ``logsumexp(logits) - logits[label]``."""
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits
    )
    return tf.reduce_mean(losses)


def adam(
    p: tf.Tensor, g: tf.Tensor, m: tf.Tensor, v: tf.Tensor, step: int
) -> tuple[tf.Tensor, tf.Tensor, tf.Tensor]:
    """One Adam update at step ``step`` (counted from 1), Keras' formula and
    defaults: ``(p_new, m_new, v_new)``."""
    lr, beta_1, beta_2 = ADAM["learning_rate"], ADAM["beta_1"], ADAM["beta_2"]
    # The bias corrections' powers in float32, as Keras computes them.
    t = tf.constant(step, tf.float32)
    power_1 = tf.constant(beta_1, tf.float32) ** t
    power_2 = tf.constant(beta_2, tf.float32) ** t
    alpha = lr * tf.sqrt(1 - power_2) / (1 - power_1)
    m_new = m + (g - m) * (1 - beta_1)
    v_new = v + (g * g - v) * (1 - beta_2)
    p_new = p - m_new * alpha / (tf.sqrt(v_new) + ADAM["epsilon"])
    return p_new, m_new, v_new
