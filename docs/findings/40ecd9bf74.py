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

inputs = keras.Input(shape=(6,), dtype='int32')
h1 = keras.layers.Embedding(name='embedding', input_dim=5, output_dim=2)(inputs)
h2 = keras.layers.SimpleRNN(name='simple_rnn_1', zero_output_for_mask=False, units=1, kernel_regularizer=keras.regularizers.L1L2(l1=0.01))(h1)
h3 = keras.layers.Dropout(name='dropout_2', rate=0.0)(h2)
h4 = keras.layers.Dense(name='outputs', units=4, activation='sigmoid')(h3)
model = keras.Model(inputs, h4)
model.set_weights([
    np.array([[ 0.013696169 , -0.02302133  ],
 [-0.045902647 , -0.048347235 ],
 [ 0.031327024 ,  0.041275557 ],
 [ 0.010663577 ,  0.022949656 ],
 [ 0.0043624993,  0.04350724  ]], dtype='float32'),
    np.array([[ 0.8933688],
 [-1.4064679]], dtype='float32'),
    np.array([[-1.]], dtype='float32'),
    np.array([-0.093282886], dtype='float32'),
    np.array([[ 0.50314987, -0.71060294,  0.7956852 ,  0.09083698]], dtype='float32'),
    np.array([-0.040057622, -0.015462556, -0.09433606 , -0.075143345], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.AdamW(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07, amsgrad=False, weight_decay=0.004), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[4, 3, 2, 1, 1, 0],
  [0, 0, 0, 4, 3, 4]]], dtype='int32')
y = np.array([[[1., 1., 1., 1.],
  [1., 1., 1., 1.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_step1_embedding_embeddings = np.array([[ 0.012696496930297247, -0.0220214805244631  ],
 [-0.04689120722421512 , -0.04735422062682755 ],
 [ 0.03032699183263158 ,  0.04227533292957387 ],
 [ 0.009663823841952404,  0.023949380995399505],
 [ 0.00536242554510603 ,  0.04250710247477647 ]], dtype='float64')

variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
print("step1/embedding/embeddings: error", error(np.asarray(variables['embedding/embeddings']), expected_step1_embedding_embeddings))
