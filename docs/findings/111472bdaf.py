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

inputs = keras.Input(shape=(4, 2), dtype='float32')
h1 = keras.layers.GlobalMaxPooling1D(name='global_max_pool_1', data_format='channels_last')(inputs)
h2 = keras.layers.Dense(name='dense_2', units=1, activation='leaky_relu', bias_regularizer=keras.regularizers.L1L2(l1=0.01))(h1)
h3 = keras.layers.LayerNormalization(name='layer_norm_4', axis=(-1,), rms_scaling=False)(h2)
h4 = keras.layers.Dense(name='outputs', units=1, activation='linear')(h3)
model = keras.Model(inputs, h4)
model.set_weights([
    np.array([[-0.6742627 ],
 [-0.56995314]], dtype='float32'),
    np.array([0.06284515], dtype='float32'),
    np.array([0.9183832], dtype='float32'),
    np.array([0.020020105], dtype='float32'),
    np.array([[0.79175687]], dtype='float32'),
    np.array([-0.062419787], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.Adagrad(learning_rate=0.001, initial_accumulator_value=0.1, epsilon=1e-07), loss=keras.losses.MeanAbsoluteError())
x = np.array([[[[ 0.18905339, -0.5227485 ],
   [-0.41306356, -2.4414673 ],
   [ 1.7997074 ,  1.1441659 ],
   [-0.32542282,  0.7738066 ]],

  [[ 0.28121066, -0.5538228 ],
   [ 0.97756743, -0.31055656],
   [-0.3288239 , -0.79214674],
   [ 0.45495808, -0.09919805]],

  [[ 0.54528874, -0.6071857 ],
   [ 0.12682785, -0.892274  ],
   [ 0.841465  ,  0.18803509],
   [ 0.330571  ,  0.41050392]],

  [[-1.0107574 ,  0.783181  ],
   [ 2.0567029 , -1.6384425 ],
   [-1.7294115 , -1.5048314 ],
   [ 0.8414589 ,  0.12871566]],

  [[ 1.0783424 ,  0.7224309 ],
   [ 0.21057181,  0.28403816],
   [-0.1697605 ,  0.86846024],
   [-1.1297159 , -0.42185882]]]], dtype='float32')
y = np.array([[[ 0.24293885],
  [ 1.8014208 ],
  [-0.76446414],
  [-1.0790604 ],
  [-0.5632872 ]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_logits = np.array([[-0.04656873145398599],
 [-0.04656873145398599],
 [-0.04656873145398599],
 [-0.04656873145398599],
 [-0.04656873145398599]], dtype='float64')

logits = model.predict_on_batch(x[0])
print("logits: error", error(logits, expected_logits))
variables = {v.path: v for v in model.weights}
model.train_on_batch(x[0], y[0])
