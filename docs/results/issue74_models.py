"""The models issue 74's figures were measured on, written as keras.io's
examples write them (a ResNet-style pair of residual blocks, MobileNetV2's
inverted residuals with ``ReLU(6.)``, a DCGAN discriminator, ConvMixer with
AdamW, and a DCGAN-style head whose batch normalization at batch 1 puts its
LeakyReLU at exactly 0).  ``python issue74_models.py FOLDER`` saves each as
``FOLDER/<name>.keras``; then, per model and seed::

    python -m equivalence --model FOLDER/<name>.keras --epochs 0 --seed S
    python -m equivalence --model FOLDER/bn_leaky.keras --epochs 0 \\
        --batch-size 1 --steps 2

(docs/equivalence.md, docs/findings/keras-jax-leaky-relu-at-zero.md).
They are not in the gallery: they test the judge, not the door."""

import os
import sys
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras
from keras import layers


def resnet_block() -> keras.Model:
    inputs = keras.Input(shape=(16, 16, 3))
    x = layers.Conv2D(8, 3, padding="same", use_bias=False)(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    for _ in range(2):
        shortcut = x
        y = layers.Conv2D(8, 3, padding="same", use_bias=False)(x)
        y = layers.BatchNormalization()(y)
        y = layers.Activation("relu")(y)
        y = layers.Conv2D(8, 3, padding="same", use_bias=False)(y)
        y = layers.BatchNormalization()(y)
        x = layers.Add()([shortcut, y])
        x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="resnet_block")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def _inverted(x, expansion: int, filters: int, stride: int, name: str):
    channels = x.shape[-1]
    h = layers.Conv2D(
        expansion * channels, 1, padding="same", use_bias=False, name=f"{name}_expand"
    )(x)
    h = layers.BatchNormalization(name=f"{name}_expand_BN")(h)
    h = layers.ReLU(6.0, name=f"{name}_expand_relu")(h)
    h = layers.DepthwiseConv2D(
        3, strides=stride, padding="same", use_bias=False, name=f"{name}_depthwise"
    )(h)
    h = layers.BatchNormalization(name=f"{name}_depthwise_BN")(h)
    h = layers.ReLU(6.0, name=f"{name}_depthwise_relu")(h)
    h = layers.Conv2D(
        filters, 1, padding="same", use_bias=False, name=f"{name}_project"
    )(h)
    h = layers.BatchNormalization(name=f"{name}_project_BN")(h)
    if stride == 1 and channels == filters:
        h = layers.Add(name=f"{name}_add")([x, h])
    return h


def mobilenet_v2() -> keras.Model:
    inputs = keras.Input(shape=(16, 16, 3))
    x = layers.Conv2D(8, 3, strides=2, padding="same", use_bias=False, name="Conv1")(
        inputs
    )
    x = layers.BatchNormalization(name="bn_Conv1")(x)
    x = layers.ReLU(6.0, name="Conv1_relu")(x)
    x = _inverted(x, 1, 8, 1, "block_0")
    x = _inverted(x, 4, 8, 1, "block_1")
    x = _inverted(x, 4, 12, 2, "block_2")
    x = layers.Conv2D(32, 1, use_bias=False, name="Conv_1")(x)
    x = layers.BatchNormalization(name="Conv_1_bn")(x)
    x = layers.ReLU(6.0, name="out_relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="mobilenet_v2")
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    return model


def dcgan_discriminator() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input(shape=(16, 16, 1)),
            layers.Conv2D(16, 4, strides=2, padding="same"),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Conv2D(32, 4, strides=2, padding="same"),
            layers.BatchNormalization(),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Dropout(0.3),
            layers.Flatten(),
            layers.Dense(1, activation="sigmoid"),
        ],
        name="dcgan_discriminator",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-4, beta_1=0.5), loss="binary_crossentropy"
    )
    return model


def convmixer() -> keras.Model:
    inputs = keras.Input((16, 16, 3))
    x = layers.Conv2D(16, kernel_size=2, strides=2)(inputs)
    x = layers.Activation("gelu")(x)
    x = layers.BatchNormalization()(x)
    for _ in range(2):
        x0 = x
        x = layers.DepthwiseConv2D(kernel_size=3, padding="same")(x)
        x = layers.Add()(
            [layers.BatchNormalization()(layers.Activation("gelu")(x)), x0]
        )
        x = layers.Conv2D(16, kernel_size=1)(x)
        x = layers.Activation("gelu")(x)
        x = layers.BatchNormalization()(x)
    x = layers.GlobalAvgPool2D()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    model = keras.Model(inputs, outputs, name="convmixer")
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=0.001, weight_decay=0.0001),
        loss="sparse_categorical_crossentropy",
    )
    return model


def bn_leaky() -> keras.Model:
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8),
            layers.BatchNormalization(),
            layers.LeakyReLU(negative_slope=0.2),
            layers.Dense(1, activation="sigmoid"),
        ],
        name="bn_leaky",
    )
    model.compile(
        optimizer=keras.optimizers.Adam(2e-4, beta_1=0.5), loss="binary_crossentropy"
    )
    return model


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "."
    for make in (resnet_block, mobilenet_v2, dcgan_discriminator, convmixer, bn_leaky):
        model = make()
        model.save(Path(folder) / f"{model.name}.keras")
        print("saved", model.name)
