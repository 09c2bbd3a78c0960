"""Reproducer written by `python -m harness fuzz --write`: run it with
the backend as its argument (jax, tensorflow or torch).  It prints each
quantity's error against float64 (three hand-written float64
implementations that agree); float32 rounding alone stays below 1e-5."""

import os
import sys

backend = sys.argv[1] if len(sys.argv) > 1 else "tensorflow"
os.environ["KERAS_BACKEND"] = backend
import keras  # noqa: E402
import numpy as np  # noqa: E402

inputs = keras.Input(shape=(1,), dtype='float32')
h1 = keras.layers.Dense(name='outputs', units=1, activation='sigmoid')(inputs)
model = keras.Model(inputs, h1)
model.set_weights([
    np.array([[0.4744492]], dtype='float32'),
    np.array([-0.04604266], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.Nadam(learning_rate=0.01, beta_1=0.9, beta_2=0.999, epsilon=1e-07), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[0.12573022]]], dtype='float32')
y = np.array([[[1.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_step1_outputs_bias = np.array([-0.03541478249566549], dtype='float64')

variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
print("step1/outputs/bias: error", error(np.asarray(variables['outputs/bias']), expected_step1_outputs_bias))
