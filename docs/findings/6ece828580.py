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

inputs = keras.Input(shape=(2,), dtype='float32')
h1 = keras.layers.BatchNormalization(name='batch_norm_1')(inputs)
h2 = keras.layers.Add(name='add_1')([h1, inputs])
h3 = keras.layers.Dense(name='dense_2', units=1, activation='relu', use_bias=False, kernel_regularizer=keras.regularizers.L1L2(l1=0.01))(h2)
h4 = keras.layers.Dense(name='outputs', units=1, activation='sigmoid')(h3)
model = keras.Model(inputs, h4)
model.set_weights([
    np.array([1.0273924, 0.9539573], dtype='float32'),
    np.array([-0.091805294, -0.09669447 ], dtype='float32'),
    np.array([0.06265405 , 0.082551114], dtype='float32'),
    np.array([1.0213271, 1.0458993], dtype='float32'),
    np.array([[0.12339011],
 [1.2305707 ]], dtype='float32'),
    np.array([[1.0941488]], dtype='float32'),
    np.array([-0.0994523], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.001, momentum=0.0, nesterov=False), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[ 0.12573022, -0.13210486]]], dtype='float32')
y = np.array([[[0.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())



variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
