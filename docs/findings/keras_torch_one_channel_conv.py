"""Keras 3 on PyTorch: the gradient of a convolution whose kernel has one
output channel (a `Conv2D(filters=1)` over several channels) or one input
channel (a `Conv2DTranspose` over a one-channel image) raises on the CPU:
PyTorch's bug (pytorch-conv-grad-weight.md), met through Keras' kernel
layout (findings 11b1318ed9 of issue 74's second campaign and of the hour's
campaign).  It prints one line per layer: the error, or that there was
none."""

import os

os.environ["KERAS_BACKEND"] = "torch"
import keras
import numpy as np
import torch

LAYERS = {
    "Conv2D": (keras.layers.Conv2D(1, 3), 4),
    "Conv2DTranspose": (keras.layers.Conv2DTranspose(2, 2, activation="relu"), 1),
}

for name, (layer, channels) in LAYERS.items():
    inputs = keras.Input((6, 5, channels))
    model = keras.Model(
        inputs, keras.layers.Dense(1)(keras.layers.Flatten()(layer(inputs)))
    )
    x = np.random.default_rng(0).normal(size=(1, 6, 5, channels))
    loss = model(torch.tensor(x, dtype=torch.float32)).sum()
    try:
        torch.autograd.grad(loss, [v.value for v in model.trainable_variables])
        print(f"{name}: no error")
    except RuntimeError as exc:
        print(f"{name}: RuntimeError:", str(exc).splitlines()[0])
