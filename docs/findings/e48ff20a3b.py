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

inputs = keras.Input(shape=(3,), dtype='int32')
h1 = keras.layers.Embedding(name='embedding', input_dim=6, output_dim=1)(inputs)
h2 = keras.layers.MaxPooling1D(name='max_pool1d_1', pool_size=(3,), padding='same', strides=(2,), data_format='channels_last')(h1)
h3 = keras.layers.GlobalMaxPooling1D(name='global_max_pool_2', data_format='channels_last')(h2)
h4 = keras.layers.Activation(name='activation_4', activation='gelu')(h3)
h5 = keras.layers.Maximum(name='maximum_4')([h4, h3])
h6 = keras.layers.Activation(name='activation_5', activation='relu6')(h5)
h7 = keras.layers.Multiply(name='multiply_5')([h6, h3])
h8 = keras.layers.Dense(name='outputs', units=3, activation='linear')(h7)
model = keras.Model(inputs, h8)
model.set_weights([
    np.array([[ 0.013696169],
 [-0.02302133 ],
 [-0.045902647],
 [-0.048347235],
 [ 0.031327024],
 [ 0.041275557]], dtype='float32'),
    np.array([[0.26120323, 0.56214947, 0.10685897]], dtype='float32'),
    np.array([ 0.08701448,  0.06317071, -0.0994523 ], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01, rho=0.9, momentum=0.5, epsilon=1e-07, centered=False), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = np.array([[[5, 3, 3],
  [1, 1, 0],
  [0, 0, 1],
  [4, 3, 5],
  [3, 3, 5]]], dtype='int32')
y = np.array([[2, 1, 1, 1, 2]], dtype='int32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_step1_embedding_embeddings = np.array([[ 0.043282714180228776],
 [-0.023021329194307327],
 [-0.04590264707803726 ],
 [-0.04834723472595215 ],
 [ 0.031327024102211   ],
 [ 0.01122044206012007 ]], dtype='float64')
expected_step1_outputs_bias = np.array([ 0.055391829360916016,  0.09479323627000252 , -0.0678309772398305  ], dtype='float64')
expected_step1_outputs_kernel = np.array([[0.24968895465963747, 0.563219147455528  , 0.11749384801988286]], dtype='float64')

variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
print("step1/embedding/embeddings: error", error(np.asarray(variables['embedding/embeddings']), expected_step1_embedding_embeddings))
print("step1/outputs/bias: error", error(np.asarray(variables['outputs/bias']), expected_step1_outputs_bias))
print("step1/outputs/kernel: error", error(np.asarray(variables['outputs/kernel']), expected_step1_outputs_kernel))
