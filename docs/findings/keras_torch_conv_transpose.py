"""Keras 3 on PyTorch: the gradient of a Conv2DTranspose without a bias
raises ``RuntimeError: grad_weight needs to be contiguous`` on the CPU
(finding 11b1318ed9 of issue 74's second campaign).  It prints the error,
or that there was none."""

import os

os.environ["KERAS_BACKEND"] = "torch"
import keras
import numpy as np
import torch

inputs = keras.Input((3, 3, 1))
h = keras.layers.Conv2DTranspose(2, 2, use_bias=False, activation="relu")(inputs)
model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(h)))
x = torch.tensor(
    np.random.default_rng(0).normal(size=(1, 3, 3, 1)), dtype=torch.float32
)
loss = model(x).sum()
try:
    torch.autograd.grad(loss, [v.value for v in model.trainable_variables])
    print("no error")
except RuntimeError as exc:
    print("RuntimeError:", str(exc).splitlines()[0])
