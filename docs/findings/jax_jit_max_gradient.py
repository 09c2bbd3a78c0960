"""JAX's gradient of ``jnp.max`` under ``jax.jit`` on the CPU loses whole
entries, in float64, where the same gradient computed op by op is right.

The function: an embedding's rows taken by two samples of two tokens, a
layer normalization over 3 features (gamma and beta), the maximum over the
two positions, a linear read-out.  Every sample's maximum moves one for one
with beta, so the gradient of the read-out's sum with respect to beta is
twice the read-out's weights ``k``, whatever ties there are.  The weights
are those of finding ea62e9c9a5 of ``harness fuzz`` (issue 74).  It prints
the gradient op by op and under ``jit`` and exits 1 when they differ."""

import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

E = np.array(
    [
        [0.013696168549358845, -0.023021329194307327, -0.04590264707803726],
        [-0.04834723472595215, 0.031327024102211, 0.04127555713057518],
    ]
)
GAMMA = np.array([1.0213271379470825, 1.0458992719650269, 1.0087250471115112])
BETA = np.array([0.08701448142528534, 0.06317070871591568, -0.09945230185985565])
K = np.array([0.8754581212997437, -1.1424773931503296, 0.5625386834144592])
TOKENS = np.array([[1, 1], [1, 0]])


def read_out(beta, embeddings, gamma):
    h = embeddings[TOKENS]  # (2 samples, 2 positions, 3 features)
    mean = h.mean(-1, keepdims=True)
    variance = ((h - mean) ** 2).mean(-1, keepdims=True)
    h = (h - mean) * jax.lax.rsqrt(variance + 1e-3) * gamma + beta
    return (jnp.max(h, axis=1) @ K).sum()


gradient = jax.grad(read_out)
args = (jnp.asarray(BETA), jnp.asarray(E), jnp.asarray(GAMMA))
eager, jitted = np.asarray(gradient(*args)), np.asarray(jax.jit(gradient)(*args))
print("expected:", np.round(2 * K, 6).tolist())
print("op by op:", np.round(eager, 6).tolist())
print("jit:     ", np.round(jitted, 6).tolist())
sys.exit(0 if np.allclose(eager, jitted) else 1)
