"""Canonical weights: drawn once with NumPy from a seed, in Keras layout.

Each framework has its own random generator, so "same seed" never means "same
weights" across frameworks.  Instead every path loads the arrays made here.

Kernels follow Keras' default initializer families (Glorot-uniform kernels,
orthogonal LSTM recurrent kernels).  Biases depart from Keras' zeros on
purpose: they are drawn from U(-0.1, 0.1) so that a bias loaded into the wrong
place (or not at all) changes the outputs and is caught by the equivalence
checks.  The LSTM forget-gate bias gets +1, as Keras' ``unit_forget_bias``.
For the same reason a layer normalization's scale is 1 + U(-0.1, 0.1), not
Keras' ones.  Embeddings are U(-0.05, 0.05), Keras' default; GRU recurrent
kernels orthogonal like the LSTM's.  A PReLU's alpha is U(0.05, 0.3), not
Keras' zeros; a ``Normalization``'s adapted mean and variance are drawn as a
bias and a scale are.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from zoo.arrays import load_npz, save_npz
from zoo.specs import ModelSpec, Param

BIAS_RANGE = 0.1
EMBEDDING_RANGE = 0.05
# A PReLU's slopes below 0, drawn apart from each other and from 0.
PRELU_LOW, PRELU_HIGH = 0.05, 0.3


def _glorot_uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, size=shape)


def _orthogonal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    rows, cols = shape
    a = rng.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.sign(np.diag(r))  # make the decomposition unique
    return q.T if rows < cols else q


def _draw(rng: np.random.Generator, param: Param) -> np.ndarray:
    if param.kind in (
        "lstm_recurrent_kernel",
        "gru_recurrent_kernel",
        "simple_rnn_recurrent_kernel",
    ):
        return _orthogonal(rng, param.shape)
    if param.kind == "embedding":
        return rng.uniform(-EMBEDDING_RANGE, EMBEDDING_RANGE, size=param.shape)
    if param.kind == "prelu":  # Keras' zeros would hide a misplaced alpha
        return rng.uniform(PRELU_LOW, PRELU_HIGH, size=param.shape)
    if param.kind in ("gamma", "moving_variance", "adapted_variance"):  # near 1
        return 1.0 + rng.uniform(-BIAS_RANGE, BIAS_RANGE, size=param.shape)
    shifts = ("bias", "lstm_bias", "gru_bias", "attention_bias", "moving_mean")
    if param.kind in (*shifts, "adapted_mean"):
        bias = rng.uniform(-BIAS_RANGE, BIAS_RANGE, size=param.shape)
        if param.kind == "lstm_bias":
            units = param.shape[0] // 4
            bias[units : 2 * units] += 1.0  # gates i, f, c, o: the forget gate
        return bias
    return _glorot_uniform(rng, param.shape)


def make_weights(spec: ModelSpec, seed: int) -> dict[str, np.ndarray]:
    """All canonical parameters of ``spec`` as float32, drawn in spec order;
    a user's model with weights of its own (``ModelSpec.weights``) has
    those, whatever the seed."""
    if spec.weights:
        return load_weights(spec, Path(spec.weights))
    rng = np.random.default_rng(seed)
    return {p.name: _draw(rng, p).astype(np.float32) for p in spec.params}


def check_weights(spec: ModelSpec, weights: dict[str, np.ndarray]) -> None:
    """Raise ValueError unless ``weights`` has exactly the spec's names and shapes."""
    expected = {p.name: p.shape for p in spec.params}
    got = {name: tuple(a.shape) for name, a in weights.items()}
    if got != expected:
        missing = sorted(set(expected) - set(got))
        extra = sorted(set(got) - set(expected))
        wrong = sorted(n for n in set(got) & set(expected) if got[n] != expected[n])
        raise ValueError(
            f"weights do not match model {spec.name}: missing {missing}, "
            f"unexpected {extra}, wrong shape {wrong}"
        )


def weights_file(spec: ModelSpec, seed: int, cache_dir: Path) -> Path:
    """Path of the canonical weights for (spec, seed), written on first use
    (a model's own weights file, when it has one)."""
    if spec.weights:
        return Path(spec.weights)
    path = cache_dir / f"weights-{spec.name}-seed{seed}.npz"
    if not path.exists():
        save_npz(path, make_weights(spec, seed))
    return path


def load_weights(spec: ModelSpec, path: Path) -> dict[str, np.ndarray]:
    weights = load_npz(path)
    check_weights(spec, weights)
    return weights
