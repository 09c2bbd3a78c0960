"""Keras 3's LeakyReLU takes a different gradient at exactly 0 on JAX
(1) than on TensorFlow and PyTorch (the slope): run with the backend as its
argument (jax, tensorflow or torch).  It prints the gradient of
``sum(leaky_relu(x, 0.2))`` at x = 0, 1 and -1, then the same through a
model: a batch normalization of a dense layer at batch 1 normalizes every
unit to exactly its beta (0 as Keras starts it), so the LeakyReLU after it
sits at exactly 0 and the beta's gradient is the output gradient times 1 on
JAX, times 0.2 on the others."""

import os
import sys

backend = sys.argv[1] if len(sys.argv) > 1 else "tensorflow"
os.environ["KERAS_BACKEND"] = backend
import keras  # noqa: E402
import numpy as np  # noqa: E402


def gradient(f, x):
    """d sum(f(x)) / dx with the backend's own autodiff."""
    if backend == "jax":
        import jax

        return np.asarray(jax.grad(lambda v: f(v).sum())(x))
    if backend == "tensorflow":
        import tensorflow as tf

        v = tf.Variable(x)
        with tf.GradientTape() as tape:
            y = tf.reduce_sum(f(v))
        return tape.gradient(y, v).numpy()
    import torch

    v = torch.tensor(x, requires_grad=True)
    f(v).sum().backward()
    return v.grad.numpy()


x = np.array([0.0, 1.0, -1.0], np.float32)
print("leaky_relu:", gradient(lambda v: keras.ops.leaky_relu(v, 0.2), x))

keras.utils.set_random_seed(0)
model = keras.Sequential(
    [
        keras.Input((3,)),
        keras.layers.Dense(4),
        keras.layers.BatchNormalization(),
        keras.layers.LeakyReLU(negative_slope=0.2),
        keras.layers.Dense(1, kernel_initializer="ones"),
    ]
)
beta = model.layers[1].beta
batch = np.array([[0.5, -1.0, 2.0]], np.float32)
inputs = keras.ops.convert_to_tensor(batch)
if backend == "jax":
    import jax

    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]
    index = [v.path for v in model.trainable_variables].index(beta.path)

    def loss(tv):
        y, _ = model.stateless_call(tv, frozen, inputs, training=True)
        return y.sum()

    grad = np.asarray(jax.grad(loss)(trainable)[index])
elif backend == "tensorflow":
    import tensorflow as tf

    with tf.GradientTape() as tape:
        y = tf.reduce_sum(model(inputs, training=True))
    grad = tape.gradient(y, beta.value).numpy()
else:
    y = model(inputs, training=True).sum()
    y.backward()
    grad = beta.value.grad.numpy()
print("beta gradient:", grad)
