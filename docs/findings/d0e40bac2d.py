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

inputs = keras.Input(shape=(2,), dtype='int32')
h1 = keras.layers.Embedding(name='embedding', input_dim=2, output_dim=1)(inputs)
h2 = keras.layers.Flatten(name='head_flatten', data_format='channels_last')(h1)
h3 = keras.layers.Dense(name='outputs', units=1, activation='sigmoid')(h2)
model = keras.Model(inputs, h3)
model.set_weights([
    np.array([[ 0.013696169],
 [-0.02302133 ]], dtype='float32'),
    np.array([[-1.2983229],
 [-1.3674663]], dtype='float32'),
    np.array([0.06265405], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.Adagrad(learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-07), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[1, 1]]], dtype='int32')
y = np.array([[[1.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_step1_embedding_embeddings = np.array([[ 0.013696168549358845],
 [-0.023990803667067784]], dtype='float64')

variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
print("step1/embedding/embeddings: error", error(np.asarray(variables['embedding/embeddings']), expected_step1_embedding_embeddings))
