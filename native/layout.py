"""Canonical (Keras) <-> framework weight layouts, in pure NumPy.

Two layout families exist among the native paths:

- ``keras``: JAX and TensorFlow take Keras layouts as they are, so their
  converters are the identity (``(in, out)`` kernels, ``(kh, kw, in, out)``
  convolutions, channels-last activations).
- ``oihw``: PyTorch and MXNet put the output axis first and use channels-first
  activations.  Dense kernels ``(in, out) -> (out, in)``; conv kernels ``(kh,
  kw, in, out) -> (out, in, kh, kw)``; LSTM, GRU and SimpleRNN kernels are
  transposed with the gates kept in Keras' order (``i, f, c, o``; ``z, r, h``); conv1d
  kernels ``(k, in, out) -> (out, in, k)``; an attention layer's query, key
  and value kernels ``(F, heads, key_dim) -> (heads * key_dim, F)`` and biases
  ``(heads, key_dim) -> (heads * key_dim,)``, its output kernel ``(heads,
  key_dim, F) -> (F, heads * key_dim)``: the ``(out, in)`` weights
  ``F.linear`` and ``FullyConnected`` take, heads outermost; a PReLU's
  alpha over an image ``(H, W, C) -> (C, H, W)`` (shared axes are 1 there).
  A transposed convolution's kernel ``(kh, kw, out, in) -> (in, out, kh,
  kw)`` (the convolution's rule: what ``conv_transpose2d`` and
  ``Deconvolution`` take); a depthwise kernel ``(kh, kw, C, m) -> (C * m, 1,
  kh, kw)``, output channel ``c * m + k`` (a grouped convolution's weight,
  one group per channel).  Embeddings, GRU biases, normalizations' statistics and layer
  normalization keep their shapes.

A flatten of images puts the features in Keras' ``H, W, C`` order in every
framework (PyTorch and MXNet move the channels last first: ``flatten`` in
their ``ops.py``), so whatever stands between a flatten and the layer that
takes its output (a dropout, a normalization, several layers) has the same
features in the same order everywhere, and a dense kernel after it is an
ordinary dense kernel.

Converters are chosen by the parameter's declared ``kind``, never by its name.
Every converter has an inverse; ``to_native`` and ``to_canonical`` are each
other's inverse for every kind (tests check the round trip).

Deliberately wrong layouts, used to prove the checks catch them, live in
``native.faults``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from zoo.specs import ModelSpec, Param

Converter = Callable[[np.ndarray, Param], np.ndarray]
FAMILIES = ("keras", "oihw")


def _identity(a: np.ndarray, p: Param) -> np.ndarray:
    return a


def _transpose(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.T)  # (in, out) -> (out, in) and back


def _conv_to_oihw(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(3, 2, 0, 1))  # (kh,kw,i,o) -> (o,i,kh,kw)


def _conv_from_oihw(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(2, 3, 1, 0))  # (o,i,kh,kw) -> (kh,kw,i,o)


def _conv1d_swap(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(2, 1, 0))  # (k,i,o) <-> (o,i,k)


def _heads_to_rows(a: np.ndarray, p: Param) -> np.ndarray:
    features = a.shape[0]  # (F, heads, key_dim) -> (heads * key_dim, F)
    return np.ascontiguousarray(a.reshape(features, -1).T)


def _rows_to_heads(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.T.reshape(p.shape))  # (h*k, F) -> (F, h, k)


def _heads_flat(a: np.ndarray, p: Param) -> np.ndarray:
    return a.reshape(-1)  # (heads, key_dim) -> (heads * key_dim,)


def _heads_unflat(a: np.ndarray, p: Param) -> np.ndarray:
    return a.reshape(p.shape)


def _output_to_rows(a: np.ndarray, p: Param) -> np.ndarray:
    features = a.shape[-1]  # (heads, key_dim, F) -> (F, heads * key_dim)
    return np.ascontiguousarray(a.reshape(-1, features).T)


def _rows_to_output(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.T.reshape(p.shape))  # (F, h*k) -> (h, k, F)


def _depthwise_to_oihw(a: np.ndarray, p: Param) -> np.ndarray:
    kh, kw, channels, depth = a.shape  # (kh, kw, C, m) -> (C * m, 1, kh, kw)
    return np.ascontiguousarray(
        a.reshape(kh, kw, 1, channels * depth).transpose(3, 2, 0, 1)
    )


def _depthwise_from_oihw(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(2, 3, 1, 0).reshape(p.shape))


def _channels_first(a: np.ndarray, p: Param) -> np.ndarray:
    """A per-value array of an image (a PReLU's alpha ``(H, W, C)``) ->
    ``(C, H, W)``, as the image itself is laid out; any other rank keeps."""
    return np.ascontiguousarray(a.transpose(2, 0, 1)) if a.ndim == 3 else a


def _channels_last(a: np.ndarray, p: Param) -> np.ndarray:
    return np.ascontiguousarray(a.transpose(1, 2, 0)) if a.ndim == 3 else a


_TO_OIHW: dict[str, Converter] = {
    "dense": _transpose,
    "bias": _identity,
    "conv2d": _conv_to_oihw,
    "conv1d": _conv1d_swap,
    "lstm_kernel": _transpose,
    "lstm_recurrent_kernel": _transpose,
    "lstm_bias": _identity,
    "gru_kernel": _transpose,
    "gru_recurrent_kernel": _transpose,
    "gru_bias": _identity,
    "embedding": _identity,
    "gamma": _identity,
    "moving_mean": _identity,
    "moving_variance": _identity,
    "attention_kernel": _heads_to_rows,
    "attention_bias": _heads_flat,
    "attention_output": _output_to_rows,
    "prelu": _channels_first,
    "adapted_mean": _identity,
    "adapted_variance": _identity,
    "conv2d_transpose": _conv_to_oihw,
    "depthwise": _depthwise_to_oihw,
    "simple_rnn_recurrent_kernel": _transpose,
}
_FROM_OIHW: dict[str, Converter] = {
    "dense": _transpose,
    "bias": _identity,
    "conv2d": _conv_from_oihw,
    "conv1d": _conv1d_swap,
    "lstm_kernel": _transpose,
    "lstm_recurrent_kernel": _transpose,
    "lstm_bias": _identity,
    "gru_kernel": _transpose,
    "gru_recurrent_kernel": _transpose,
    "gru_bias": _identity,
    "embedding": _identity,
    "gamma": _identity,
    "moving_mean": _identity,
    "moving_variance": _identity,
    "attention_kernel": _rows_to_heads,
    "attention_bias": _heads_unflat,
    "attention_output": _rows_to_output,
    "prelu": _channels_last,
    "adapted_mean": _identity,
    "adapted_variance": _identity,
    "conv2d_transpose": _conv_from_oihw,
    "depthwise": _depthwise_from_oihw,
    "simple_rnn_recurrent_kernel": _transpose,
}


def _check_family(family: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown layout family {family!r}; known: {FAMILIES}")


def to_native(
    spec: ModelSpec, canonical: Mapping[str, np.ndarray], family: str
) -> dict[str, np.ndarray]:
    """Convert canonical weights to ``family`` layout."""
    _check_family(family)
    if family == "keras":
        return {p.name: canonical[p.name] for p in spec.params}
    return {p.name: _TO_OIHW[p.kind](canonical[p.name], p) for p in spec.params}


def activation_to_canonical(a: np.ndarray, family: str) -> np.ndarray:
    """A layer's output in ``family`` layout -> canonical (channels-last)."""
    _check_family(family)
    if family == "oihw" and a.ndim == 4:
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1))  # NCHW -> NHWC
    return a


def native_axes(axes: tuple[int, ...], rank: int, family: str) -> tuple[int, ...]:
    """Axes of an example counted from 1 after the batch in Keras' layout
    (a dropout's ``shared_axes``) as axes of the batch's array in
    ``family`` layout, for an example of ``rank`` axes: an image's ``H, W,
    C`` (1, 2, 3) are ``(N, C, H, W)``'s 2, 3, 1 in ``oihw``."""
    _check_family(family)
    if family == "oihw" and rank == 3:
        return tuple({1: 2, 2: 3, 3: 1}[axis] for axis in axes)
    return axes


def param_to_canonical(a: np.ndarray, p: Param, family: str) -> np.ndarray:
    """One array of parameter ``p`` in ``family`` layout -> canonical."""
    _check_family(family)
    return a if family == "keras" else _FROM_OIHW[p.kind](a, p)


# Operator operands (``zoo.operators.Operand.role``) in the ``oihw`` family:
# images (N, H, W, C) -> (N, C, H, W), conv kernels (kh, kw, in, out) ->
# (out, in, kh, kw), 1-D conv kernels (k, in, out) -> (out, in, k), dense
# kernels (in, out) -> (out, in), attention heads (N, T, heads, key_dim) ->
# (N, heads, T, key_dim) (what scaled_dot_product_attention and batch_dot
# take); any other role keeps its canonical shape (sequences (N, T, C) too).
_ROLE_TO_OIHW: dict[str, tuple[int, ...]] = {
    "image": (0, 3, 1, 2),
    "conv_kernel": (3, 2, 0, 1),
    "conv1d_kernel": (2, 1, 0),
    "dense_kernel": (1, 0),
    "heads": (0, 2, 1, 3),
}


def operand_to_native(a: np.ndarray, role: str, family: str) -> np.ndarray:
    """One canonical operator operand of ``role`` -> ``family`` layout."""
    _check_family(family)
    axes = _ROLE_TO_OIHW.get(role) if family == "oihw" else None
    return a if axes is None else np.ascontiguousarray(a.transpose(axes))


def operand_to_canonical(a: np.ndarray, role: str, family: str) -> np.ndarray:
    """``operand_to_native``'s inverse (results and gradients back)."""
    _check_family(family)
    axes = _ROLE_TO_OIHW.get(role) if family == "oihw" else None
    if axes is None:
        return a
    return np.ascontiguousarray(a.transpose(np.argsort(axes)))


def to_canonical(
    spec: ModelSpec, native: Mapping[str, np.ndarray], family: str
) -> dict[str, np.ndarray]:
    """Convert arrays (weights or gradients) in ``family`` layout to canonical:
    every parameter, or (gradients) every trained one."""
    _check_family(family)
    missing = [p.name for p in spec.params if p.trainable and p.name not in native]
    if missing:
        raise KeyError(f"{spec.name}: no array for {', '.join(missing)}")
    return {
        p.name: param_to_canonical(native[p.name], p, family)
        for p in spec.params
        if p.name in native
    }
