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

inputs = keras.Input(shape=(7, 9, 1), dtype='float32')
h1 = keras.layers.Conv2D(name='conv2d_1', filters=4, kernel_size=(1, 1), strides=(2, 2), data_format='channels_last', activation='relu', bias_regularizer=keras.regularizers.L1L2(l1=0.01))(inputs)
h2 = keras.layers.AveragePooling2D(name='avg_pool_2', pool_size=(3, 3), padding='same', strides=(3, 3), data_format='channels_last')(h1)
h3 = keras.layers.Flatten(name='head_flatten', data_format='channels_last')(h2)
h4 = keras.layers.Dense(name='outputs', units=1, activation='sigmoid')(h3)
model = keras.Model(inputs, h4)
model.set_weights([
    np.array([[[[ 0.30006802, -0.50437206, -1.0056766 , -1.0592349 ]]]], dtype='float32'),
    np.array([0.06265405 , 0.082551114, 0.021327155, 0.045899313], dtype='float32'),
    np.array([[ 0.051834214],
 [ 0.5169431  ],
 [ 0.37528995 ],
 [-0.5908347  ],
 [ 0.42465955 ],
 [-0.5541829  ],
 [ 0.27287135 ],
 [-0.38537854 ],
 [ 0.43152085 ],
 [ 0.04926327 ],
 [-0.23797773 ],
 [-0.09186127 ],
 [-0.56043977 ],
 [-0.446418   ],
 [ 0.20273201 ],
 [ 0.1748872  ]], dtype='float32'),
    np.array([0.023077022], dtype='float32'),
])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.001, momentum=0.0, nesterov=False), loss=keras.losses.BinaryCrossentropy(from_logits=False))
x = np.array([[[[[ 0.12573022 ],
    [-0.13210486 ],
    [ 0.64042264 ],
    [ 0.104900114],
    [-0.5356694  ],
    [ 0.36159506 ],
    [ 1.304      ],
    [ 0.94708097 ],
    [-0.70373523 ]],

   [[-1.2654215  ],
    [-0.62327445 ],
    [ 0.04132598 ],
    [-2.3250308  ],
    [-0.21879166 ],
    [-1.245911   ],
    [-0.7322674  ],
    [-0.544259   ],
    [-0.31630015 ]],

   [[ 0.41163054 ],
    [ 1.0425134  ],
    [-0.12853466 ],
    [ 1.3664634  ],
    [-0.6651947  ],
    [ 0.35151008 ],
    [ 0.90347016 ],
    [ 0.0940123  ],
    [-0.7434993  ]],

   [[-0.9217254  ],
    [-0.45772582 ],
    [ 0.22019513 ],
    [-1.0096182  ],
    [-0.20917557 ],
    [-0.15922502 ],
    [ 0.5408456  ],
    [ 0.21465912 ],
    [ 0.3553727  ]],

   [[-0.6538286  ],
    [-0.12961364 ],
    [ 0.7839755  ],
    [ 1.4934311  ],
    [-1.2590655  ],
    [ 1.5139238  ],
    [ 1.3458754  ],
    [ 0.7813114  ],
    [ 0.26445562 ]],

   [[-0.31392282 ],
    [ 1.4580207  ],
    [ 1.9602584  ],
    [ 1.8016349  ],
    [ 1.3151038  ],
    [ 0.35738042 ],
    [-1.2083186  ],
    [-0.004454133],
    [ 0.65647495 ]],

   [[-1.2883614  ],
    [ 0.39512205 ],
    [ 0.4298637  ],
    [ 0.6960427  ],
    [-1.1841179  ],
    [-0.6617026  ],
    [-0.43643525 ],
    [-1.169802   ],
    [ 1.7393678  ]]]]], dtype='float32')
y = np.array([[[1.]]], dtype='float32')


def error(value, expected):
    value = np.asarray(value, np.float64)
    return float(np.abs(value - expected).max() / np.abs(expected).max())


expected_logits = np.array([[0.4007945396916623]], dtype='float64')

logits = model.predict_on_batch(x[0])
print("logits: error", error(logits, expected_logits))
