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

inputs = keras.Input(shape=(6, 4, 1), dtype='float32')
h1 = keras.layers.Rescaling(name='rescaling_1', scale=0.5)(inputs)
h2 = keras.layers.Add(name='add_1')([h1, inputs])
h3 = keras.layers.SeparableConv2D(name='separable_conv2d_2', depth_multiplier=2, filters=4, kernel_size=(3, 3), padding='same', data_format='channels_last', activation='relu', use_bias=False)(h2)
h4 = keras.layers.Conv2D(name='conv2d_4', filters=1, kernel_size=(3, 3), strides=(2, 2), data_format='channels_last', activation='softmax', use_bias=False)(h3)
h5 = keras.layers.Flatten(name='head_flatten', data_format='channels_last')(h4)
h6 = keras.layers.Dense(name='outputs', units=1, activation='linear')(h5)
model = keras.Model(inputs, h6)
model.set_weights([
    np.array([[[[ 0.12912872 , -0.21704717 ]],

  [[-0.4327743  , -0.4558221  ]],

  [[ 0.295354   ,  0.3891497  ]]],


 [[[ 0.10053717 ,  0.21637143 ]],

  [[ 0.041130036,  0.41019022 ]],

  [[ 0.29778957 , -0.46882263 ]]],


 [[[ 0.33696398 , -0.43973973 ]],

  [[ 0.21652123 , -0.3057948  ]],

  [[ 0.34240836 ,  0.039090015]]]], dtype='float32'),
    np.array([[[[-0.4005762 , -0.15462556, -0.9433607 , -0.75143343],
   [ 0.34124884,  0.29437903,  0.23077023, -0.23264489]]]], dtype='float32'),
    np.array([[[[ 0.3631108  ],
   [ 0.35115248 ],
   [ 0.13550071 ],
   [ 0.10987992 ]],

  [[ 0.13762203 ],
   [-0.08112032 ],
   [-0.26648784 ],
   [ 0.16175221 ]],

  [[ 0.01851618 ],
   [-0.13857974 ],
   [-0.010344392],
   [ 0.2844417  ]]],


 [[[ 0.31698057 ],
   [-0.103851706],
   [ 0.052238002],
   [-0.13008821 ]],

  [[ 0.068867005],
   [-0.1183729  ],
   [-0.07915029 ],
   [ 0.2850161  ]],

  [[-0.19925591 ],
   [ 0.08996317 ],
   [-0.30379224 ],
   [ 0.24292894 ]]],


 [[[ 0.20966695 ],
   [-0.19033764 ],
   [ 0.2749452  ],
   [-0.32237634 ]],

  [[-0.11968318 ],
   [-0.25539976 ],
   [-0.036266997],
   [ 0.21640465 ]],

  [[-0.19671112 ],
   [-0.32715738 ],
   [-0.06970548 ],
   [-0.22017494 ]]]], dtype='float32'),
    np.array([[-1.1575252],
 [ 0.2272143]], dtype='float32'),
    np.array([-0.040260773], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-07, amsgrad=False), loss=keras.losses.MeanSquaredError())
x = np.array([[[[[ 0.12573022 ],
    [-0.13210486 ],
    [ 0.64042264 ],
    [ 0.104900114]],

   [[-0.5356694  ],
    [ 0.36159506 ],
    [ 1.304      ],
    [ 0.94708097 ]],

   [[-0.70373523 ],
    [-1.2654215  ],
    [-0.62327445 ],
    [ 0.04132598 ]],

   [[-2.3250308  ],
    [-0.21879166 ],
    [-1.245911   ],
    [-0.7322674  ]],

   [[-0.544259   ],
    [-0.31630015 ],
    [ 0.41163054 ],
    [ 1.0425134  ]],

   [[-0.12853466 ],
    [ 1.3664634  ],
    [-0.6651947  ],
    [ 0.35151008 ]]]]], dtype='float32')
y = np.array([[[0.90347016]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())



