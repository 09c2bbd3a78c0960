"""Keras 3's Nadam on PyTorch (its own ``torch_nadam.py``) scales its first
step by sqrt(1 - 0.999) / sqrt(1 - float32(0.999)) = 1 - 6.4e-6 against the
exact formula, on every parameter: it accumulates the velocity with ``1 -
beta_2`` taken in double (0.001) and divides it by ``1 - beta_2**t`` taken
in float32 (0.00099998713), where Keras' generic Nadam (JAX, TensorFlow)
takes both in float32 and they cancel at step 1.  Run with the backend as
its argument (jax, tensorflow or torch).  It prints the velocity's ratio to
g**2 * 0.001 and the step's ratio to the exact one, ``lr * m_hat /
sqrt(v_hat)`` at step 1 (``v_hat = g**2`` exactly there), for gradients
far above epsilon."""

import os
import sys

backend = sys.argv[1] if len(sys.argv) > 1 else "tensorflow"
os.environ["KERAS_BACKEND"] = backend
import keras  # noqa: E402
import numpy as np  # noqa: E402

lr, beta_1 = 0.01, 0.9
g = np.array([0.5, -1.0, 2.0], np.float32)
w = keras.Variable(np.zeros(3, np.float32))
optimizer = keras.optimizers.Nadam(learning_rate=lr, epsilon=0.0)
optimizer.apply_gradients([(keras.ops.convert_to_tensor(g), w)])
velocity = keras.ops.convert_to_numpy(optimizer.variables[3]).astype(np.float64)
# the exact first step: m = (1 - beta_1) g, v_hat = g**2
u_1, u_2 = beta_1 * (1 - 0.5 * 0.96), beta_1 * (1 - 0.5 * 0.96**2)
m_hat = u_2 * (1 - beta_1) * g / (1 - u_1 * u_2) + (1 - u_1) * g / (1 - u_1)
exact = -lr * m_hat / np.abs(g.astype(np.float64))
step = keras.ops.convert_to_numpy(w).astype(np.float64)
print(
    "velocity / (0.001 g**2):",
    np.round(velocity / (0.001 * g.astype(np.float64) ** 2), 7).tolist(),
)
print("step / exact step:", np.round(step / exact, 7).tolist())
