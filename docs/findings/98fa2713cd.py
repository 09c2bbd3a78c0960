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

inputs = keras.Input(shape=(4,), dtype='int32')
h1 = keras.layers.Embedding(name='embedding', input_dim=4, output_dim=4)(inputs)
h2 = keras.layers.Rescaling(name='rescaling_1', scale=2.0)(h1)
h3 = keras.layers.Dense(name='dense_2', units=1, activation='tanh')(h2)
h4 = keras.layers.Flatten(name='head_flatten', data_format='channels_last')(h3)
h5 = keras.layers.Dense(name='outputs', units=1, activation='sigmoid')(h4)
model = keras.Model(inputs, h5)
model.set_weights([
    np.array([[-0.023838786 , -0.020150885 ,  0.031422574 , -0.040808406 ],
 [ 0.0100100525,  0.022856053 , -0.031209894 , -0.044485338 ],
 [-0.022503063 ,  0.015743302 ,  0.006226566 , -0.034993775 ],
 [-0.006736921 ,  0.01692973  , -0.0077215326,  0.01331844  ]], dtype='float32'),
    np.array([[ 1.0241009 ],
 [ 0.40107492],
 [-0.2374381 ],
 [-0.68519527]], dtype='float32'),
    np.array([-0.030807868], dtype='float32'),
    np.array([[ 0.024244333],
 [ 0.85709685 ],
 [ 0.6037303  ],
 [-0.39842084 ]], dtype='float32'),
    np.array([0.08484338], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.001, rho=0.5, momentum=0.0, epsilon=1e-07, centered=True, weight_decay=0.01), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[3, 1, 0, 1],
  [1, 3, 1, 0],
  [1, 2, 3, 2],
  [3, 0, 3, 0],
  [2, 1, 0, 2],
  [1, 2, 1, 0]],

 [[2, 1, 2, 2],
  [3, 1, 0, 2],
  [3, 3, 3, 2],
  [1, 1, 0, 0],
  [1, 1, 2, 2],
  [2, 3, 3, 3]],

 [[3, 1, 3, 3],
  [0, 1, 2, 2],
  [2, 0, 1, 0],
  [3, 0, 1, 3],
  [2, 2, 1, 3],
  [2, 2, 1, 1]]], dtype='int32')
y = np.array([[[1.],
  [1.],
  [1.],
  [1.],
  [0.],
  [1.]],

 [[0.],
  [0.],
  [0.],
  [1.],
  [0.],
  [1.]],

 [[0.],
  [1.],
  [0.],
  [0.],
  [0.],
  [1.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_step1_dense_2_bias = np.array([-0.028807563111215004], dtype='float64')
expected_step1_dense_2_kernel = np.array([[ 1.022102380752801  ],
 [ 0.40306886000116005],
 [-0.23942637595355526],
 [-0.6871821088604249 ]], dtype='float64')
expected_step1_embedding_embeddings = np.array([[-0.025838441024025723, -0.022149986190335223,  0.033420272192492294,
  -0.03880823663489964 ],
 [ 0.012009925694733387,  0.02485565049419143 , -0.03320908532449021 ,
  -0.04648483358732675 ],
 [-0.020502843149866445,  0.01774311151237472 ,  0.00422659871725318 ,
  -0.03699341386342626 ],
 [-0.004736857104809578,  0.018929539781259025, -0.009721393487363728,
   0.0113183141943598  ]], dtype='float64')

variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
print("step1/dense_2/bias: error", error(np.asarray(variables['dense_2/bias']), expected_step1_dense_2_bias))
print("step1/dense_2/kernel: error", error(np.asarray(variables['dense_2/kernel']), expected_step1_dense_2_kernel))
print("step1/embedding/embeddings: error", error(np.asarray(variables['embedding/embeddings']), expected_step1_embedding_embeddings))
model.train_on_batch(x[1], y[1])
model.train_on_batch(x[2], y[2])
