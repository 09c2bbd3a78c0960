"""A gallery of Keras 3 models written the way public Keras and TensorFlow
examples write them, to see which the tool accepts and how they fare.

    python examples/gallery.py OUTDIR              # every model: OUTDIR/<name>.keras
    python examples/gallery.py OUTDIR lenet_d2l    # the named ones only

Each builder follows one public example (named, with its address, by the
``@example`` decorator above it): the same layers, activations (the last
one included) and ``model.compile`` arguments as the example writes them,
with the sizes shrunk (inputs, units, vocabularies, sequence lengths) so
that every model has well under 200,000 parameters.  Every axis but the
batch has a size (``keras.Input`` where an example gives its first layer
``input_shape``, which Keras 3 warns about); token models take ``int32``
ids.  Where a builder departs from its example in anything else, its
docstring says so.  Some are
refused by the tool, on purpose: the table shows refusals too.

One fact, one place: ``@example(title, url)`` registers a builder in
``GALLERY`` (name: the function's name) and its example in ``EXAMPLES``,
in the order they are written.  Keras is imported only inside the builders,
so ``EXAMPLES`` can be read without it (``examples/gallery_table.py``).
A registered builder clears Keras' session and seeds it
(``keras.utils.set_random_seed(0)``) before it builds, so a file's layer
names and weights are the same on every run, built alone or with others
(on one Keras backend: each backend draws its own initial weights).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import keras

SEED = 0
GALLERY: dict[str, Callable[[], keras.Model]] = {}
EXAMPLES: dict[str, tuple[str, str]] = {}


def example(title: str, url: str) -> Callable[[Callable[[], keras.Model]], Callable]:
    """Register the decorated builder under its function name, following the
    example ``title`` at ``url``; the registered builder seeds Keras first."""

    def register(build: Callable[[], keras.Model]) -> Callable[[], keras.Model]:
        name = build.__name__
        if name in GALLERY:
            raise ValueError(f"two gallery builders are named {name!r}")
        if not url.startswith("https://"):
            raise ValueError(f"{name}: the example's address must be https, {url!r}")

        @functools.wraps(build)
        def seeded() -> keras.Model:
            import keras

            keras.backend.clear_session()  # layer names count from zero again
            keras.utils.set_random_seed(SEED)
            return build()

        seeded.__doc__ = f"{title} ({url}). {build.__doc__ or ''}".strip()
        GALLERY[name] = seeded
        EXAMPLES[name] = (title, url)
        return seeded

    return register


# --- images ---------------------------------------------------------------


@example(
    'keras.io "Image segmentation with a U-Net-like architecture"',
    "https://keras.io/examples/vision/oxford_pets_image_segmentation/",
)
def unet_segmentation() -> keras.Model:
    """Issue 78: a class per pixel.  Images 160x160 shrunk to 32x32, its
    three down-sampling blocks (64, 128, 256 filters) to two of 8 and its
    four up-sampling blocks (256, 128, 64, 32) to three (8, 8, 4), the stem's
    32 to 4; three classes, a softmax per pixel, each block as the
    example's ``get_model`` writes it (with its residual projection), and
    compiled as the example compiles it."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Conv2D(4, 3, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x
    for filters in [8, 8]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(filters, 1, strides=2, padding="same")(
            previous_block_activation
        )
        x = layers.add([x, residual])
        previous_block_activation = x
    for filters in [8, 8, 4]:
        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.Conv2DTranspose(filters, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.UpSampling2D(2)(x)
        residual = layers.UpSampling2D(2)(previous_block_activation)
        residual = layers.Conv2D(filters, 1, padding="same")(residual)
        x = layers.add([x, residual])
        previous_block_activation = x
    outputs = layers.Conv2D(3, 3, activation="softmax", padding="same")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-4), loss="sparse_categorical_crossentropy"
    )
    return model


@example(
    'keras.io "Convolutional autoencoder for image denoising"',
    "https://keras.io/examples/vision/autoencoder/",
)
def denoising_autoencoder() -> keras.Model:
    """Issue 78: an image per image.  MNIST's 28x28 at its own size, the
    filters 32 shrunk to 8; a sigmoid per pixel, binary cross-entropy, as
    the example compiles it."""
    import keras
    from keras import layers

    inputs = layers.Input(shape=(28, 28, 1))
    x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(inputs)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)
    x = layers.Conv2D(8, (3, 3), activation="relu", padding="same")(x)
    x = layers.MaxPooling2D((2, 2), padding="same")(x)
    x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(
        x
    )
    x = layers.Conv2DTranspose(8, (3, 3), strides=2, activation="relu", padding="same")(
        x
    )
    x = layers.Conv2D(1, (3, 3), activation="sigmoid", padding="same")(x)
    autoencoder = keras.Model(inputs, x)
    autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
    return autoencoder


@example(
    'keras.io "Simple MNIST convnet"', "https://keras.io/examples/vision/mnist_convnet/"
)
def mnist_convnet() -> keras.Model:
    """Filters 32 and 64 shrunk to 8 and 16."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"]
    )
    return model


@example(
    'tensorflow.org "TensorFlow 2 quickstart for beginners"',
    "https://www.tensorflow.org/tutorials/quickstart/beginner",
)
def quickstart_beginner() -> keras.Model:
    """At its own size (101,770 parameters); ``keras.Input`` instead of
    ``Flatten(input_shape=...)``, which Keras 3 warns about."""
    import keras

    model = keras.models.Sequential(
        [
            keras.Input(shape=(28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10),
        ]
    )
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer="adam", loss=loss_fn, metrics=["accuracy"])
    return model


@example(
    'tensorflow.org "Basic classification: Classify images of clothing"',
    "https://www.tensorflow.org/tutorials/keras/classification",
)
def clothing_classification() -> keras.Model:
    """128 hidden units shrunk to 64."""
    import keras

    model = keras.Sequential(
        [
            keras.Input(shape=(28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


@example(
    'keras.io "Introduction to Keras for engineers"',
    "https://keras.io/getting_started/intro_to_keras_for_engineers/",
)
def engineers_convnet() -> keras.Model:
    """Filters 64 and 128 shrunk to 8 and 16."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            layers.Input(shape=(28, 28, 1)),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.Conv2D(8, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.Conv2D(16, kernel_size=(3, 3), activation="relu"),
            layers.GlobalAveragePooling2D(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(),
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="acc")],
    )
    return model


@example(
    'tensorflow.org "Convolutional Neural Network (CNN)"',
    "https://www.tensorflow.org/tutorials/images/cnn",
)
def cifar10_cnn() -> keras.Model:
    """CIFAR-10's 32x32x3 images; filters 32, 64, 64 shrunk to 8, 16, 16 and
    the 64-unit dense layer to 32."""
    import keras
    from keras import layers, models

    model = models.Sequential()
    model.add(keras.Input(shape=(32, 32, 3)))
    model.add(layers.Conv2D(8, (3, 3), activation="relu"))
    model.add(layers.MaxPooling2D((2, 2)))
    model.add(layers.Conv2D(16, (3, 3), activation="relu"))
    model.add(layers.MaxPooling2D((2, 2)))
    model.add(layers.Conv2D(16, (3, 3), activation="relu"))
    model.add(layers.Flatten())
    model.add(layers.Dense(32, activation="relu"))
    model.add(layers.Dense(10))
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


@example(
    'tensorflow.org "Image classification"',
    "https://www.tensorflow.org/tutorials/images/classification",
)
def flowers_classification() -> keras.Model:
    """Images 180x180 shrunk to 32x32, filters 16, 32, 64 to 4, 8, 8, the
    128-unit layer to 32; five classes.  Starts with ``Rescaling``."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(32, 32, 3)),
            layers.Rescaling(1.0 / 255),
            layers.Conv2D(4, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(8, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(8, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(32, activation="relu"),
            layers.Dense(5),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


@example(
    'keras.io "Image classification from scratch"',
    "https://keras.io/examples/vision/image_classification_from_scratch/",
)
def xception_mini() -> keras.Model:
    """The example's small Xception: images 180x180 shrunk to 32x32, its
    widths (128; 256, 512, 728; 1024) to (8; 8, 16; 16), three middle
    blocks to two; two classes, so one logit.  Its data augmentation runs on
    the dataset, not in the model."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(8, 3, strides=2, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    previous_block_activation = x
    for size in [8, 16]:
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.Activation("relu")(x)
        x = layers.SeparableConv2D(size, 3, padding="same")(x)
        x = layers.BatchNormalization()(x)
        x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
        residual = layers.Conv2D(size, 1, strides=2, padding="same")(
            previous_block_activation
        )
        x = layers.add([x, residual])
        previous_block_activation = x
    x = layers.SeparableConv2D(16, 3, padding="same")(x)
    x = layers.BatchNormalization()(x)
    x = layers.Activation("relu")(x)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dropout(0.25)(x)
    outputs = layers.Dense(1, activation=None)(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(3e-4),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[keras.metrics.BinaryAccuracy(name="acc")],
    )
    return model


@example(
    'keras.io "The Functional API": a toy ResNet model',
    "https://keras.io/guides/functional_api/",
)
def functional_toy_resnet() -> keras.Model:
    """CIFAR-10's 32x32x3; filters 32 and 64 shrunk to 8 and 16, the
    256-unit layer to 32."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(32, 32, 3), name="img")
    x = layers.Conv2D(8, 3, activation="relu")(inputs)
    x = layers.Conv2D(16, 3, activation="relu")(x)
    block_1_output = layers.MaxPooling2D(3)(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(block_1_output)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
    block_2_output = layers.add([x, block_1_output])
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(block_2_output)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
    block_3_output = layers.add([x, block_2_output])
    x = layers.Conv2D(16, 3, activation="relu")(block_3_output)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(32, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(10)(x)
    model = keras.Model(inputs, outputs, name="toy_resnet")
    model.compile(
        optimizer=keras.optimizers.RMSprop(1e-3),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["acc"],
    )
    return model


@example(
    'keras.io "The Functional API": a toy ResNet model, batch-normalized',
    "https://keras.io/guides/functional_api/",
)
def functional_toy_resnet_bn() -> keras.Model:
    """Not the guide's own: its toy ResNet (shrunk as in
    ``functional_toy_resnet``) with a ``BatchNormalization`` after every
    convolution of the residual blocks, the way ResNets normalize."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(32, 32, 3), name="img")
    x = layers.Conv2D(8, 3, activation="relu")(inputs)
    x = layers.Conv2D(16, 3, activation="relu")(x)
    block_1_output = layers.MaxPooling2D(3)(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(block_1_output)
    x = layers.BatchNormalization()(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
    x = layers.BatchNormalization()(x)
    block_2_output = layers.add([x, block_1_output])
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(block_2_output)
    x = layers.BatchNormalization()(x)
    x = layers.Conv2D(16, 3, activation="relu", padding="same")(x)
    x = layers.BatchNormalization()(x)
    block_3_output = layers.add([x, block_2_output])
    x = layers.Conv2D(16, 3, activation="relu")(block_3_output)
    x = layers.GlobalAveragePooling2D()(x)
    x = layers.Dense(32, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    outputs = layers.Dense(10)(x)
    model = keras.Model(inputs, outputs, name="toy_resnet_bn")
    model.compile(
        optimizer=keras.optimizers.RMSprop(1e-3),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["acc"],
    )
    return model


@example(
    "Keras Applications: ResNet's residual_block_v1 (keras/src/applications/resnet.py)",
    "https://github.com/keras-team/keras/blob/master/keras/src/applications/resnet.py",
)
def resnet_v1_blocks() -> keras.Model:
    """ResNet50's stem and two bottleneck blocks (``residual_block_v1``:
    convolution, ``BatchNormalization(axis=3, epsilon=1.001e-5)``,
    ``Activation("relu")``, the shortcut added, a last ``Activation``), on
    32x32x3 with 4 filters (bottleneck 16 out) instead of 64 (256 out); the
    stem's ``ZeroPadding2D`` replaced by ``padding="same"``; the
    applications' own top (average pool, softmax) over 10 classes.  The
    applications do not compile their models; nor does this."""
    import keras
    from keras import layers

    def block(x: keras.KerasTensor, filters: int, conv_shortcut: bool):
        if conv_shortcut:
            shortcut = layers.Conv2D(4 * filters, 1)(x)
            shortcut = layers.BatchNormalization(axis=3, epsilon=1.001e-5)(shortcut)
        else:
            shortcut = x
        x = layers.Conv2D(filters, 1)(x)
        x = layers.BatchNormalization(axis=3, epsilon=1.001e-5)(x)
        x = layers.Activation("relu")(x)
        x = layers.Conv2D(filters, 3, padding="same")(x)
        x = layers.BatchNormalization(axis=3, epsilon=1.001e-5)(x)
        x = layers.Activation("relu")(x)
        x = layers.Conv2D(4 * filters, 1)(x)
        x = layers.BatchNormalization(axis=3, epsilon=1.001e-5)(x)
        x = layers.Add()([shortcut, x])
        return layers.Activation("relu")(x)

    inputs = keras.Input(shape=(32, 32, 3))
    x = layers.Conv2D(4, 7, strides=2, padding="same")(inputs)
    x = layers.BatchNormalization(axis=3, epsilon=1.001e-5)(x)
    x = layers.Activation("relu")(x)
    x = layers.MaxPooling2D(3, strides=2, padding="same")(x)
    x = block(x, 4, conv_shortcut=True)
    x = block(x, 4, conv_shortcut=False)
    x = layers.GlobalAveragePooling2D()(x)
    outputs = layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="resnet_v1_blocks")


@example(
    'Machine Learning Mastery "How to Develop a CNN From Scratch for CIFAR-10 '
    'Photo Classification" (three VGG blocks)',
    "https://machinelearningmastery.com/how-to-develop-a-cnn-from-scratch-for-"
    "cifar-10-photo-classification/",
)
def vgg3_cifar10() -> keras.Model:
    """The three-block VGG baseline; filters 32, 64, 128 shrunk to 8, 16, 32
    and the 128-unit layer to 32; ``SGD(lr=...)`` written ``learning_rate``."""
    import keras
    from keras.layers import Conv2D, Dense, Flatten, MaxPooling2D
    from keras.models import Sequential

    model = Sequential()
    model.add(keras.Input(shape=(32, 32, 3)))
    for filters in (8, 16, 32):
        for _ in range(2):
            model.add(
                Conv2D(
                    filters,
                    (3, 3),
                    activation="relu",
                    kernel_initializer="he_uniform",
                    padding="same",
                )
            )
        model.add(MaxPooling2D((2, 2)))
    model.add(Flatten())
    model.add(Dense(32, activation="relu", kernel_initializer="he_uniform"))
    model.add(Dense(10, activation="softmax"))
    opt = keras.optimizers.SGD(learning_rate=0.001, momentum=0.9)
    model.compile(optimizer=opt, loss="categorical_crossentropy", metrics=["accuracy"])
    return model


@example(
    'Dive into Deep Learning "Convolutional Neural Networks (LeNet)", '
    "TensorFlow version",
    "https://d2l.ai/chapter_convolutional-neural-networks/lenet.html",
)
def lenet_d2l() -> keras.Model:
    """At its own size (61,706 parameters).  The book's current edition
    trains it in a loop of its own; compiled here as its earlier edition's
    ``train_ch6`` compiled it (SGD at 0.9, cross-entropy on the logits)."""
    import keras

    model = keras.models.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(
                filters=6, kernel_size=5, activation="sigmoid", padding="same"
            ),
            keras.layers.AvgPool2D(pool_size=2, strides=2),
            keras.layers.Conv2D(filters=16, kernel_size=5, activation="sigmoid"),
            keras.layers.AvgPool2D(pool_size=2, strides=2),
            keras.layers.Flatten(),
            keras.layers.Dense(120, activation="sigmoid"),
            keras.layers.Dense(84, activation="sigmoid"),
            keras.layers.Dense(10),
        ]
    )
    optimizer = keras.optimizers.SGD(learning_rate=0.9)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
    return model


@example(
    'keras.io "The Sequential model": a convnet feature extractor',
    "https://keras.io/guides/sequential_model/",
)
def sequential_guide_convnet() -> keras.Model:
    """The guide's convnet with its ``GlobalMaxPooling2D`` head and ten
    class scores; 250x250x3 shrunk to 160x160x3 (the smallest its three
    pools take whole), 32 filters to 8.  The guide does not compile it."""
    import keras
    from keras import layers

    model = keras.Sequential()
    model.add(keras.Input(shape=(160, 160, 3)))
    model.add(layers.Conv2D(8, 5, strides=2, activation="relu"))
    model.add(layers.Conv2D(8, 3, activation="relu"))
    model.add(layers.MaxPooling2D(3))
    model.add(layers.Conv2D(8, 3, activation="relu"))
    model.add(layers.Conv2D(8, 3, activation="relu"))
    model.add(layers.MaxPooling2D(3))
    model.add(layers.Conv2D(8, 3, activation="relu"))
    model.add(layers.Conv2D(8, 3, activation="relu"))
    model.add(layers.MaxPooling2D(2))
    model.add(layers.GlobalMaxPooling2D())
    model.add(layers.Dense(10))
    return model


# --- dense networks -------------------------------------------------------


@example('keras.io "The Sequential model"', "https://keras.io/guides/sequential_model/")
def sequential_guide_mlp() -> keras.Model:
    """The guide's first model (Dense 2, 3, 4) on three features, at its own
    size; the guide does not compile it."""
    import keras
    from keras import layers

    return keras.Sequential(
        [
            keras.Input(shape=(3,)),
            layers.Dense(2, activation="relu", name="layer1"),
            layers.Dense(3, activation="relu", name="layer2"),
            layers.Dense(4, name="layer3"),
        ]
    )


@example(
    'keras.io "The Functional API": the MNIST model',
    "https://keras.io/guides/functional_api/",
)
def functional_mnist_mlp() -> keras.Model:
    """At its own size (55,050 parameters)."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(784,))
    x = layers.Dense(64, activation="relu")(inputs)
    x = layers.Dense(64, activation="relu")(x)
    outputs = layers.Dense(10)(x)
    model = keras.Model(inputs=inputs, outputs=outputs, name="mnist_model")
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.RMSprop(),
        metrics=["accuracy"],
    )
    return model


@example(
    'tensorflow.org "Basic regression: Predict fuel efficiency" (the DNN model)',
    "https://www.tensorflow.org/tutorials/keras/regression",
)
def fuel_efficiency_dnn() -> keras.Model:
    """Nine features through the tutorial's adapted ``Normalization`` layer
    (adapted here to 64 seeded random rows), 64 units shrunk to 32, one
    output, mean absolute error."""
    import keras
    import numpy as np
    from keras import layers

    normalizer = layers.Normalization(axis=-1)
    normalizer.adapt(np.random.default_rng(SEED).normal(size=(64, 9)))
    model = keras.Sequential(
        [
            keras.Input(shape=(9,)),
            normalizer,
            layers.Dense(32, activation="relu"),
            layers.Dense(32, activation="relu"),
            layers.Dense(1),
        ]
    )
    model.compile(loss="mean_absolute_error", optimizer=keras.optimizers.Adam(0.001))
    return model


@example(
    'tensorflow.org "Basic regression: Predict fuel efficiency" (the DNN model, '
    "inputs normalized beforehand)",
    "https://www.tensorflow.org/tutorials/keras/regression",
)
def fuel_efficiency_dnn_prenormalized() -> keras.Model:
    """``fuel_efficiency_dnn`` without its ``Normalization`` layer, as when
    the features are normalized before they reach the model."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(9,)),
            layers.Dense(32, activation="relu"),
            layers.Dense(32, activation="relu"),
            layers.Dense(1),
        ]
    )
    model.compile(loss="mean_absolute_error", optimizer=keras.optimizers.Adam(0.001))
    return model


@example(
    'tensorflow.org "Overfit and underfit" (the tiny model)',
    "https://www.tensorflow.org/tutorials/keras/overfit_and_underfit",
)
def overfit_tiny() -> keras.Model:
    """28 features, 16 elu units, one logit, at its own size; compiled as the
    tutorial's ``compile_and_fit`` does (Adam on an ``InverseTimeDecay``)."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(28,)),
            layers.Dense(16, activation="elu"),
            layers.Dense(1),
        ]
    )
    lr_schedule = keras.optimizers.schedules.InverseTimeDecay(
        0.001, decay_steps=20 * 1000, decay_rate=1, staircase=False
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr_schedule),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.BinaryCrossentropy(
                from_logits=True, name="binary_crossentropy"
            ),
            "accuracy",
        ],
    )
    return model


@example(
    'tensorflow.org "Overfit and underfit" (the dropout model)',
    "https://www.tensorflow.org/tutorials/keras/overfit_and_underfit",
)
def overfit_dropout() -> keras.Model:
    """Four elu layers of 512 units shrunk to 64, each followed by
    ``Dropout(0.5)``, one logit; compiled as ``overfit_tiny``."""
    import keras
    from keras import layers

    model = keras.Sequential([keras.Input(shape=(28,))])
    for _ in range(4):
        model.add(layers.Dense(64, activation="elu"))
        model.add(layers.Dropout(0.5))
    model.add(layers.Dense(1))
    lr_schedule = keras.optimizers.schedules.InverseTimeDecay(
        0.001, decay_steps=20 * 1000, decay_rate=1, staircase=False
    )
    model.compile(
        optimizer=keras.optimizers.Adam(lr_schedule),
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.BinaryCrossentropy(
                from_logits=True, name="binary_crossentropy"
            ),
            "accuracy",
        ],
    )
    return model


@example(
    'keras.io "Imbalanced classification: credit card fraud detection"',
    "https://keras.io/examples/structured_data/imbalanced_classification/",
)
def fraud_detection_mlp() -> keras.Model:
    """30 features; 256 units shrunk to 64; a sigmoid output."""
    import keras

    model = keras.Sequential(
        [
            keras.Input(shape=(30,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(1, activation="sigmoid"),
        ]
    )
    metrics = [
        keras.metrics.FalseNegatives(name="fn"),
        keras.metrics.FalsePositives(name="fp"),
        keras.metrics.TrueNegatives(name="tn"),
        keras.metrics.TruePositives(name="tp"),
        keras.metrics.Precision(name="precision"),
        keras.metrics.Recall(name="recall"),
    ]
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss="binary_crossentropy",
        metrics=metrics,
    )
    return model


@example(
    'Machine Learning Mastery "How to Accelerate Learning of Deep Neural '
    'Networks With Batch Normalization" (the MLP with batch normalization)',
    "https://machinelearningmastery.com/how-to-accelerate-learning-of-deep-"
    "neural-networks-with-batch-normalization/",
)
def batch_norm_mlp() -> keras.Model:
    """Two features (the circles problem), 50 relu units, batch
    normalization, a sigmoid output, at its own size; ``SGD(lr=...)``
    written ``learning_rate``."""
    import keras
    from keras.layers import BatchNormalization, Dense
    from keras.models import Sequential

    model = Sequential()
    model.add(keras.Input(shape=(2,)))
    model.add(Dense(50, activation="relu", kernel_initializer="he_uniform"))
    model.add(BatchNormalization())
    model.add(Dense(1, activation="sigmoid"))
    opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9)
    model.compile(loss="binary_crossentropy", optimizer=opt, metrics=["accuracy"])
    return model


@example(
    'The Keras Blog "Building Autoencoders in Keras" (the simplest autoencoder)',
    "https://blog.keras.io/building-autoencoders-in-keras.html",
)
def dense_autoencoder() -> keras.Model:
    """784 pixels in, a 32-unit code, 784 sigmoid pixels out, at its own
    size (50,992 parameters)."""
    import keras
    from keras import layers

    encoding_dim = 32
    input_img = keras.Input(shape=(784,))
    encoded = layers.Dense(encoding_dim, activation="relu")(input_img)
    decoded = layers.Dense(784, activation="sigmoid")(encoded)
    autoencoder = keras.Model(input_img, decoded)
    autoencoder.compile(optimizer="adam", loss="binary_crossentropy")
    return autoencoder


# --- text -----------------------------------------------------------------


@example(
    'keras.io "Text classification from scratch"',
    "https://keras.io/examples/nlp/text_classification_from_scratch/",
)
def text_classification_from_scratch() -> keras.Model:
    """Vocabulary 20,000 shrunk to 1,000, width 128 to 16, 64 tokens (int32
    ids; the example's are int64); its ``Conv1D`` pair and
    ``GlobalMaxPooling1D``, a sigmoid output."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(64,), dtype="int32")
    x = layers.Embedding(1000, 16)(inputs)
    x = layers.Dropout(0.5)(x)
    x = layers.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.Conv1D(16, 7, padding="valid", activation="relu", strides=3)(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(16, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    predictions = layers.Dense(1, activation="sigmoid", name="predictions")(x)
    model = keras.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model


@example(
    'tensorflow.org "Basic text classification"',
    "https://www.tensorflow.org/tutorials/keras/text_classification",
)
def basic_text_classification() -> keras.Model:
    """Vocabulary 10,000 shrunk to 1,000, 64 tokens, width 16; the
    tutorial's sigmoid output and ``BinaryCrossentropy()``; its
    ``TextVectorization`` runs on the dataset, not in the model."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(64,), dtype="int32"),
            layers.Embedding(1000, 16),
            layers.Dropout(0.2),
            layers.GlobalAveragePooling1D(),
            layers.Dropout(0.2),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(
        loss=keras.losses.BinaryCrossentropy(),
        optimizer="adam",
        metrics=[keras.metrics.BinaryAccuracy(threshold=0.5)],
    )
    return model


@example(
    'tensorflow.org "Word embeddings"',
    "https://www.tensorflow.org/text/guide/word_embeddings",
)
def word_embeddings() -> keras.Model:
    """Vocabulary 10,000 shrunk to 1,000, 64 tokens, width 16; one logit.
    The guide's first layer, ``TextVectorization`` (strings in), is left
    out: the model takes its token ids."""
    import keras
    from keras.layers import Dense, Embedding, GlobalAveragePooling1D

    model = keras.Sequential(
        [
            keras.Input(shape=(64,), dtype="int32"),
            Embedding(1000, 16, name="embedding"),
            GlobalAveragePooling1D(),
            Dense(16, activation="relu"),
            Dense(1),
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


@example(
    'keras.io "Bidirectional LSTM on IMDB"',
    "https://keras.io/examples/nlp/bidirectional_lstm_imdb/",
)
def bidirectional_lstm_imdb() -> keras.Model:
    """Vocabulary 20,000 shrunk to 1,000, 64 tokens, width 128 to 16, the
    LSTMs' 64 units to 16."""
    import keras
    from keras import layers

    inputs = keras.Input(shape=(64,), dtype="int32")
    x = layers.Embedding(1000, 16)(inputs)
    x = layers.Bidirectional(layers.LSTM(16, return_sequences=True))(x)
    x = layers.Bidirectional(layers.LSTM(16))(x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    model = keras.Model(inputs, outputs)
    model.compile("adam", "binary_crossentropy", metrics=["accuracy"])
    return model


@example(
    "A GRU sentiment model on IMDB (chandan11248/deep-learning)",
    "https://github.com/chandan11248/deep-learning",
)
def gru_sentiment() -> keras.Model:
    """Vocabulary 10,000 shrunk to 1,000, 100 tokens to 64, width 128 to 16,
    the GRU's 64 units to 16; a sigmoid output.  ``input_length``, gone in
    Keras 3, is the input's shape."""
    import keras
    from keras.layers import GRU, Dense, Embedding
    from keras.models import Sequential

    model = Sequential(
        [
            keras.Input(shape=(64,), dtype="int32"),
            Embedding(1000, 16),
            GRU(16, return_sequences=False),
            Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model


@example(
    'keras.io "Using pre-trained word embeddings"',
    "https://keras.io/examples/nlp/pretrained_word_embeddings/",
)
def pretrained_embeddings_cnn() -> keras.Model:
    """A frozen embedding set from a matrix (seeded random numbers standing
    in for GloVe), vocabulary 20,000 shrunk to 1,000, 100 dimensions to 16,
    64 tokens; three ``Conv1D`` of 128 filters shrunk to 16 (kernel 5, the
    pools 5 shrunk to 2), ``GlobalMaxPooling1D``, a softmax over 20 classes."""
    import keras
    import numpy as np
    from keras import layers
    from keras.layers import Embedding

    embedding_matrix = np.random.default_rng(SEED).normal(size=(1000, 16))
    embedding_layer = Embedding(1000, 16, trainable=False)
    embedding_layer.build((1,))
    embedding_layer.set_weights([embedding_matrix])
    int_sequences_input = keras.Input(shape=(64,), dtype="int32")
    embedded_sequences = embedding_layer(int_sequences_input)
    x = layers.Conv1D(16, 5, activation="relu")(embedded_sequences)
    x = layers.MaxPooling1D(2)(x)
    x = layers.Conv1D(16, 5, activation="relu")(x)
    x = layers.MaxPooling1D(2)(x)
    x = layers.Conv1D(16, 5, activation="relu")(x)
    x = layers.GlobalMaxPooling1D()(x)
    x = layers.Dense(16, activation="relu")(x)
    x = layers.Dropout(0.5)(x)
    preds = layers.Dense(20, activation="softmax")(x)
    model = keras.Model(int_sequences_input, preds)
    model.compile(
        loss="sparse_categorical_crossentropy", optimizer="rmsprop", metrics=["acc"]
    )
    return model


@example(
    'keras.io "Text classification with Transformer"',
    "https://keras.io/examples/nlp/text_classification_with_transformer/",
)
def text_transformer() -> keras.Model:
    """The example's own ``TransformerBlock`` and ``TokenAndPositionEmbedding``
    layer classes; 200 tokens of 20,000 shrunk to 32 of 1,000, width 32 to
    16, its feed-forward 32 to 16, the 20-unit layer kept, a softmax over
    two classes.  Its input float, as the example leaves it (the door reads
    a float input before an Embedding as token ids, as Keras does)."""
    import keras
    from keras import layers, ops

    class TransformerBlock(layers.Layer):
        def __init__(self, embed_dim, num_heads, ff_dim, rate=0.1, **kwargs):
            super().__init__(**kwargs)
            self.att = layers.MultiHeadAttention(num_heads=num_heads, key_dim=embed_dim)
            self.ffn = keras.Sequential(
                [layers.Dense(ff_dim, activation="relu"), layers.Dense(embed_dim)]
            )
            self.layernorm1 = layers.LayerNormalization(epsilon=1e-6)
            self.layernorm2 = layers.LayerNormalization(epsilon=1e-6)
            self.dropout1 = layers.Dropout(rate)
            self.dropout2 = layers.Dropout(rate)

        def call(self, inputs):
            attn_output = self.att(inputs, inputs)
            attn_output = self.dropout1(attn_output)
            out1 = self.layernorm1(inputs + attn_output)
            ffn_output = self.ffn(out1)
            ffn_output = self.dropout2(ffn_output)
            return self.layernorm2(out1 + ffn_output)

    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim, **kwargs):
            super().__init__(**kwargs)
            self.token_emb = layers.Embedding(
                input_dim=vocab_size, output_dim=embed_dim
            )
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            maxlen = ops.shape(x)[-1]
            positions = ops.arange(start=0, stop=maxlen, step=1)
            positions = self.pos_emb(positions)
            x = self.token_emb(x)
            return x + positions

    maxlen, vocab_size, embed_dim, num_heads, ff_dim = 32, 1000, 16, 2, 16
    inputs = layers.Input(shape=(maxlen,))
    embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    transformer_block = TransformerBlock(embed_dim, num_heads, ff_dim)
    x = transformer_block(x)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dropout(0.1)(x)
    x = layers.Dense(20, activation="relu")(x)
    x = layers.Dropout(0.1)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    return model


@example(
    'keras.io "Character-level text generation with LSTM"',
    "https://keras.io/examples/generative/lstm_character_level_text_generation/",
)
def char_lstm() -> keras.Model:
    """40 characters of a 56-letter alphabet, one-hot, shrunk to 20 of 30;
    the LSTM's 128 units to 32; a softmax over the alphabet."""
    import keras
    from keras import layers

    maxlen, chars = 20, 30
    model = keras.Sequential(
        [
            keras.Input(shape=(maxlen, chars)),
            layers.LSTM(32),
            layers.Dense(chars, activation="softmax"),
        ]
    )
    optimizer = keras.optimizers.RMSprop(learning_rate=0.01)
    model.compile(loss="categorical_crossentropy", optimizer=optimizer)
    return model


# --- recurrent and time series -------------------------------------------


@example(
    'keras.io "Working with RNNs": the MNIST LSTM model',
    "https://keras.io/guides/working_with_rnns/",
)
def rnn_guide_mnist_lstm() -> keras.Model:
    """MNIST rows as 28 steps of 28, the LSTM's 64 units shrunk to 32, batch
    normalization, ten logits, SGD; ``keras.Input`` instead of the LSTM's
    ``input_shape=(None, 28)``."""
    import keras

    model = keras.models.Sequential(
        [
            keras.Input(shape=(28, 28)),
            keras.layers.LSTM(32),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer="sgd",
        metrics=["accuracy"],
    )
    return model


@example(
    'keras.io "Working with RNNs": a GRU and a SimpleRNN',
    "https://keras.io/guides/working_with_rnns/",
)
def rnn_guide_gru_simple_rnn() -> keras.Model:
    """Tokens of 1,000 (64 of them) embedded in 64 shrunk to 16, the GRU's
    256 units to 32, the SimpleRNN's 128 to 16, ten class scores; the guide
    does not compile it."""
    import keras
    from keras import layers

    model = keras.Sequential()
    model.add(keras.Input(shape=(64,), dtype="int32"))
    model.add(layers.Embedding(input_dim=1000, output_dim=16))
    model.add(layers.GRU(32, return_sequences=True))
    model.add(layers.SimpleRNN(16))
    model.add(layers.Dense(10))
    return model


@example(
    'keras.io "Timeseries forecasting for weather prediction"',
    "https://keras.io/examples/timeseries/timeseries_weather_forecasting/",
)
def weather_forecasting_lstm() -> keras.Model:
    """120 steps of 7 features shrunk to 24 steps, the LSTM's 32 units kept,
    one output, mean squared error."""
    import keras

    inputs = keras.layers.Input(shape=(24, 7))
    lstm_out = keras.layers.LSTM(32)(inputs)
    outputs = keras.layers.Dense(1)(lstm_out)
    model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
    return model


@example(
    'tensorflow.org "Time series forecasting" (the LSTM model)',
    "https://www.tensorflow.org/tutorials/structured_data/time_series",
)
def time_series_lstm() -> keras.Model:
    """24 hours of 19 features, an LSTM of 32 returning every step, one
    output per step; compiled as the tutorial's ``compile_and_fit``."""
    import keras

    lstm_model = keras.models.Sequential(
        [
            keras.Input(shape=(24, 19)),
            keras.layers.LSTM(32, return_sequences=True),
            keras.layers.Dense(units=1),
        ]
    )
    lstm_model.compile(
        loss=keras.losses.MeanSquaredError(),
        optimizer=keras.optimizers.Adam(),
        metrics=[keras.metrics.MeanAbsoluteError()],
    )
    return lstm_model


@example(
    'tensorflow.org "Time series forecasting" (the convolution model)',
    "https://www.tensorflow.org/tutorials/structured_data/time_series",
)
def time_series_conv() -> keras.Model:
    """Three hours of 19 features, a ``Conv1D`` of 32 over all three, a
    32-unit layer, one output; compiled as the tutorial's
    ``compile_and_fit``."""
    import keras

    conv_width = 3
    conv_model = keras.Sequential(
        [
            keras.Input(shape=(conv_width, 19)),
            keras.layers.Conv1D(
                filters=32, kernel_size=(conv_width,), activation="relu"
            ),
            keras.layers.Dense(units=32, activation="relu"),
            keras.layers.Dense(units=1),
        ]
    )
    conv_model.compile(
        loss=keras.losses.MeanSquaredError(),
        optimizer=keras.optimizers.Adam(),
        metrics=[keras.metrics.MeanAbsoluteError()],
    )
    return conv_model


@example(
    'keras.io "Timeseries classification from scratch"',
    "https://keras.io/examples/timeseries/timeseries_classification_from_scratch/",
)
def timeseries_classification_fcn() -> keras.Model:
    """500 steps of one value shrunk to 64, the three ``Conv1D`` of 64
    filters to 16, each followed by ``BatchNormalization`` and a ``ReLU``
    layer; a softmax over two classes."""
    import keras

    input_layer = keras.layers.Input((64, 1))
    conv1 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(input_layer)
    conv1 = keras.layers.BatchNormalization()(conv1)
    conv1 = keras.layers.ReLU()(conv1)
    conv2 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(conv1)
    conv2 = keras.layers.BatchNormalization()(conv2)
    conv2 = keras.layers.ReLU()(conv2)
    conv3 = keras.layers.Conv1D(filters=16, kernel_size=3, padding="same")(conv2)
    conv3 = keras.layers.BatchNormalization()(conv3)
    conv3 = keras.layers.ReLU()(conv3)
    gap = keras.layers.GlobalAveragePooling1D()(conv3)
    output_layer = keras.layers.Dense(2, activation="softmax")(gap)
    model = keras.models.Model(inputs=input_layer, outputs=output_layer)
    model.compile(
        optimizer="adam",
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    return model


@example(
    'keras.io "Timeseries classification with a Transformer model"',
    "https://keras.io/examples/timeseries/timeseries_classification_transformer/",
)
def timeseries_transformer() -> keras.Model:
    """500 steps of one value shrunk to 32; head size 256 to 8, four heads
    to two, two encoder blocks instead of four, the 128-unit layer to 16;
    its residuals written ``x + inputs``, its attention with
    ``dropout=0.25``, its pooling over ``channels_first``."""
    import keras
    from keras import layers

    def transformer_encoder(inputs, head_size, num_heads, ff_dim, dropout=0):
        x = layers.MultiHeadAttention(
            key_dim=head_size, num_heads=num_heads, dropout=dropout
        )(inputs, inputs)
        x = layers.Dropout(dropout)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        res = x + inputs
        x = layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
        x = layers.Dropout(dropout)(x)
        x = layers.Conv1D(filters=inputs.shape[-1], kernel_size=1)(x)
        x = layers.LayerNormalization(epsilon=1e-6)(x)
        return x + res

    inputs = keras.Input(shape=(32, 1))
    x = inputs
    for _ in range(2):
        x = transformer_encoder(x, head_size=8, num_heads=2, ff_dim=4, dropout=0.25)
    x = layers.GlobalAveragePooling1D(data_format="channels_first")(x)
    for dim in [16]:
        x = layers.Dense(dim, activation="relu")(x)
        x = layers.Dropout(0.4)(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        loss="sparse_categorical_crossentropy",
        optimizer=keras.optimizers.Adam(learning_rate=1e-4),
        metrics=["sparse_categorical_accuracy"],
    )
    return model


@example(
    'HSE / Coursera "Introduction to Deep Learning", week 5: part-of-speech '
    "tagging with a recurrent network",
    "https://github.com/hse-aml/intro-to-dl/blob/master/week5/POS-task.ipynb",
)
def pos_tagger_rnn() -> keras.Model:
    """Issue 78: a token tagger, a tag per token through
    ``TimeDistributed(Dense(..., softmax))``.  Sentences of 12 tokens (the
    notebook leaves the length free), its vocabulary of 5,000 words shrunk
    to 200, embeddings of 50 to 8, the SimpleRNN's 64 units to 16; 14 tags
    (the notebook's 12 universal tags with its padding and unknown ones),
    one-hot per token, compiled as the notebook compiles it."""
    import keras
    from keras import layers

    model = keras.Sequential()
    model.add(layers.InputLayer(shape=(12,), dtype="int32"))
    model.add(layers.Embedding(200, 8))
    model.add(layers.SimpleRNN(16, return_sequences=True))
    stepwise_dense = layers.Dense(14, activation="softmax")
    stepwise_dense = layers.TimeDistributed(stepwise_dense)
    model.add(stepwise_dense)
    model.compile("adam", "categorical_crossentropy")
    return model


# --- several inputs and outputs ---------------------------------------------


@example(
    'keras.io "The Functional API" (models with multiple inputs and outputs: '
    "ticket priority and department)",
    "https://keras.io/guides/functional_api/",
)
def functional_ticket_ranking() -> keras.Model:
    """Issue 78: three inputs (a title's and a body's token ids, twelve tag
    flags) and two outputs (a priority logit, four department logits), each
    with its own loss, the department's weighted 0.2.  Titles of 10 tokens
    and bodies of 20 (the guide's dummy data: 10 and 100; its inputs leave
    the length free), 10,000 words shrunk to 200, embeddings of 64 to 8, the
    LSTMs' 128 and 32 units to 16 and 8; the outputs a list, as the guide's
    first ``compile`` takes its losses (its later edition names them in a
    dict)."""
    return _ticket_ranking(dict_outputs=False)


@example(
    'keras.io "The Functional API" (the same model, its outputs, losses and '
    "loss weights named in dicts)",
    "https://keras.io/guides/functional_api/",
)
def functional_ticket_ranking_dict() -> keras.Model:
    """Issue 78: ``functional_ticket_ranking`` as the guide writes it next,
    ``outputs={"priority": ..., "department": ...}`` and ``compile``'s loss
    and ``loss_weights`` dicts keyed by those names."""
    return _ticket_ranking(dict_outputs=True)


def _ticket_ranking(*, dict_outputs: bool) -> keras.Model:
    """The Functional API guide's ticket model at test sizes, its outputs a
    list or a dict by name."""
    import keras
    from keras import layers

    num_tags, num_words, num_departments = 12, 200, 4
    title_input = keras.Input(shape=(10,), name="title", dtype="int32")
    body_input = keras.Input(shape=(20,), name="body", dtype="int32")
    tags_input = keras.Input(shape=(num_tags,), name="tags")
    title_features = layers.Embedding(num_words, 8)(title_input)
    body_features = layers.Embedding(num_words, 8)(body_input)
    title_features = layers.LSTM(16)(title_features)
    body_features = layers.LSTM(8)(body_features)
    x = layers.concatenate([title_features, body_features, tags_input])
    priority_pred = layers.Dense(1, name="priority")(x)
    department_pred = layers.Dense(num_departments, name="department")(x)
    losses = {
        "priority": keras.losses.BinaryCrossentropy(from_logits=True),
        "department": keras.losses.CategoricalCrossentropy(from_logits=True),
    }
    weights = {"priority": 1.0, "department": 0.2}
    inputs = [title_input, body_input, tags_input]
    if dict_outputs:
        outputs: Any = {"priority": priority_pred, "department": department_pred}
        model = keras.Model(inputs=inputs, outputs=outputs)
        model.compile(
            optimizer=keras.optimizers.RMSprop(1e-3), loss=losses, loss_weights=weights
        )
        return model
    model = keras.Model(inputs=inputs, outputs=[priority_pred, department_pred])
    model.compile(
        optimizer=keras.optimizers.RMSprop(1e-3),
        loss=list(losses.values()),
        loss_weights=list(weights.values()),
    )
    return model


@example(
    "Hands-On Machine Learning (3rd edition), chapter 10: the Wide & Deep "
    "network with an auxiliary output",
    "https://github.com/ageron/handson-ml3/blob/main/10_neural_nets_with_keras.ipynb",
)
def wide_deep_auxiliary() -> keras.Model:
    """Issue 78: two inputs (five wide features, six deep ones, each through
    its own adapted ``Normalization``, adapted here to 64 seeded random
    rows) and two outputs (the main one and an auxiliary one on the deep
    path), mean squared error on each weighted 0.9 and 0.1, at its own size
    (30 units); no ``metrics`` (Keras 3 wants one list per output where the
    book gives one for both, and metrics change nothing the tool checks)."""
    import keras
    import numpy as np
    from keras import layers

    rng = np.random.default_rng(SEED)
    input_wide = keras.Input(shape=(5,))
    input_deep = keras.Input(shape=(6,))
    norm_layer_wide = layers.Normalization()
    norm_layer_deep = layers.Normalization()
    norm_wide = norm_layer_wide(input_wide)
    norm_deep = norm_layer_deep(input_deep)
    hidden1 = layers.Dense(30, activation="relu")(norm_deep)
    hidden2 = layers.Dense(30, activation="relu")(hidden1)
    concat = layers.concatenate([norm_wide, hidden2])
    output = layers.Dense(1)(concat)
    aux_output = layers.Dense(1)(hidden2)
    model = keras.Model(inputs=[input_wide, input_deep], outputs=[output, aux_output])
    optimizer = keras.optimizers.Adam(learning_rate=1e-3)
    model.compile(loss=("mse", "mse"), loss_weights=(0.9, 0.1), optimizer=optimizer)
    norm_layer_wide.adapt(rng.normal(size=(64, 5)))
    norm_layer_deep.adapt(rng.normal(size=(64, 6)))
    return model


@example(
    "Keras Applications' EfficientNet (its MBConv block), compiled as keras.io's "
    '"Image classification via fine-tuning with EfficientNet" compiles it',
    "https://github.com/keras-team/keras/blob/master/keras/src/applications/efficientnet.py",
)
def efficientnet_mbconv() -> keras.Model:
    """Issue 79: EfficientNet's stem and two MBConv blocks (``block`` of
    efficientnet.py: a 1x1 expansion, a depthwise convolution, the
    squeeze-and-excite phase whose ``(1, 1, C)`` weights multiply the
    ``(H, W, C)`` images, a 1x1 projection, and on the repeated block the
    drop connect, ``Dropout(noise_shape=(None, 1, 1, 1))``, before the
    residual add), its head (a 1x1 convolution, pooling, dropout, softmax),
    every normalization without a bias before it (``use_bias=False``) and
    swish activations.  Images 224x224 shrunk to 16x16, the stem's 32
    filters to 8, the blocks' to 8 (expand ratio 2, se_ratio 0.25), the
    head's 1,280 to 16, 10 classes; the stem's ``ZeroPadding2D`` with
    ``correct_pad``'s (0, 1) sides, its ``Rescaling`` and ``Normalization``
    left out (the image is taken as the model's input).  Compiled as the
    keras.io example: ``Adam(learning_rate=1e-2)``,
    ``categorical_crossentropy``."""
    import keras
    from keras import layers

    def block(x: Any, name: str, filters: int, drop: float) -> Any:
        inputs = x
        x = layers.Conv2D(
            filters * 2, 1, padding="same", use_bias=False, name=name + "expand_conv"
        )(x)
        x = layers.BatchNormalization(name=name + "expand_bn")(x)
        x = layers.Activation("swish", name=name + "expand_activation")(x)
        x = layers.DepthwiseConv2D(
            3, padding="same", use_bias=False, name=name + "dwconv"
        )(x)
        x = layers.BatchNormalization(name=name + "bn")(x)
        x = layers.Activation("swish", name=name + "activation")(x)
        se = layers.GlobalAveragePooling2D(name=name + "se_squeeze")(x)
        se = layers.Reshape((1, 1, filters * 2), name=name + "se_reshape")(se)
        se = layers.Conv2D(
            max(1, filters // 4),
            1,
            padding="same",
            activation="swish",
            name=name + "se_reduce",
        )(se)
        se = layers.Conv2D(
            filters * 2,
            1,
            padding="same",
            activation="sigmoid",
            name=name + "se_expand",
        )(se)
        x = layers.multiply([x, se], name=name + "se_excite")
        x = layers.Conv2D(
            filters, 1, padding="same", use_bias=False, name=name + "project_conv"
        )(x)
        x = layers.BatchNormalization(name=name + "project_bn")(x)
        if inputs.shape[-1] == filters:
            if drop > 0:
                x = layers.Dropout(
                    drop, noise_shape=(None, 1, 1, 1), name=name + "drop"
                )(x)
            x = layers.add([x, inputs], name=name + "add")
        return x

    inputs = keras.Input(shape=(16, 16, 3))
    x = layers.ZeroPadding2D(padding=((0, 1), (0, 1)), name="stem_conv_pad")(inputs)
    x = layers.Conv2D(
        8, 3, strides=2, padding="valid", use_bias=False, name="stem_conv"
    )(x)
    x = layers.BatchNormalization(name="stem_bn")(x)
    x = layers.Activation("swish", name="stem_activation")(x)
    x = block(x, "block1a_", 8, 0.0)
    x = block(x, "block1b_", 8, 0.2)
    x = layers.Conv2D(16, 1, padding="same", use_bias=False, name="top_conv")(x)
    x = layers.BatchNormalization(name="top_bn")(x)
    x = layers.Activation("swish", name="top_activation")(x)
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    x = layers.Dropout(0.2, name="top_dropout")(x)
    outputs = layers.Dense(10, activation="softmax", name="predictions")(x)
    model = keras.Model(inputs, outputs, name="EfficientNet")
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-2),
        loss="categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


@example(
    "keras-tcn's TCN (its residual blocks: causal dilated convolutions and "
    "spatial dropout) as its compiled_tcn classifier builds it",
    "https://github.com/philipperemy/keras-tcn/blob/master/tcn/tcn.py",
)
def tcn_classifier() -> keras.Model:
    """Issue 79: the TCN layer written out in Keras' own layers, as its
    ``ResidualBlock`` builds them: per block two ``Conv1D(padding="causal",
    dilation_rate=d)``, each followed by ``Activation("relu")`` and
    ``SpatialDropout1D``, then ``Activation("relu")``; a 1x1 ``Conv1D``
    matching the channels where they differ; ``Activation("relu")`` of the
    sum; the blocks' outputs summed as skip connections; its last step
    taken (``tt[:, -1, :]``, a ``Lambda`` in the library, here
    ``Cropping1D`` of every step but the last and ``Flatten``: the same
    values); ``Dense`` and ``Activation("softmax")``.  Dilations (1, 2, 4),
    kernel 2, 16 filters shrunk to 8, 20 steps of 3 features, 4 classes,
    dropout 0.05 as ``compiled_tcn``'s default; compiled as it compiles a
    classifier, ``Adam(lr=0.002, clipnorm=1.0)`` (``learning_rate`` in
    Keras 3) and ``sparse_categorical_crossentropy``."""
    import keras
    from keras import layers

    steps, features, filters = 20, 3, 8
    inputs = keras.Input(shape=(steps, features))
    x, skips = inputs, []
    for i, d in enumerate((1, 2, 4)):
        name = f"residual_block_{i}_"
        x1 = x
        for k in range(2):
            x1 = layers.Conv1D(
                filters, 2, dilation_rate=d, padding="causal", name=f"{name}conv1D_{k}"
            )(x1)
            x1 = layers.Activation("relu", name=f"{name}Act_Conv1D_{k}")(x1)
            x1 = layers.SpatialDropout1D(0.05, name=f"{name}SDropout_{k}")(x1)
        x1 = layers.Activation("relu", name=f"{name}Act_Conv_Blocks")(x1)
        x2 = x
        if x.shape[-1] != filters:
            x2 = layers.Conv1D(
                filters, 1, padding="same", name=f"{name}matching_conv1D"
            )(x)
        x = layers.Activation("relu", name=f"{name}Act_Res_Block")(
            layers.add([x2, x1], name=f"{name}Add_Res")
        )
        skips.append(x1)
    x = layers.add(skips, name="Add_Skip_Connections")
    x = layers.Cropping1D((steps - 1, 0), name="Slice_Output")(x)
    x = layers.Flatten()(x)
    x = layers.Dense(4)(x)
    outputs = layers.Activation("softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        keras.optimizers.Adam(learning_rate=0.002, clipnorm=1.0),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model


@example(
    "Machine Learning Mastery's multi-step stacked LSTM forecaster (its "
    "vector output model)",
    "https://machinelearningmastery.com/how-to-develop-lstm-models-for-time-series-forecasting/",
)
def lstm_forecaster() -> keras.Model:
    """Issue 79: two ``LSTM(100, activation="relu")`` layers, the first
    ``return_sequences=True``, then ``Dense(n_steps_out)``, compiled with
    ``optimizer="adam"`` and ``loss="mse"``, as the tutorial writes them
    (``input_shape=(n_steps_in, n_features)`` as ``keras.Input``); the
    relu is each cell's own activation, where Keras' default has a tanh.
    100 units shrunk to 16; 3 steps in of 1 feature, 2 steps out, as
    there."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(3, 1)),
            layers.LSTM(16, activation="relu", return_sequences=True),
            layers.LSTM(16, activation="relu"),
            layers.Dense(2),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


@example(
    "Keras 2's IMDB LSTM example (examples/imdb_lstm.py)",
    "https://github.com/keras-team/keras/blob/cc360f6663f3c4ba3e7ae8e4e19f507f717e6c97/examples/imdb_lstm.py",
)
def imdb_lstm() -> keras.Model:
    """Issue 79: ``Embedding(max_features, 128)``, ``LSTM(128, dropout=0.2,
    recurrent_dropout=0.2)``, ``Dense(1, activation="sigmoid")``, compiled
    with ``binary_crossentropy`` and ``adam``, as the example writes them:
    the LSTM draws a mask per gate on its input and on its state in
    training.  Vocabulary 20,000 shrunk to 1,000, 80 tokens to 16, width
    and units 128 to 16."""
    import keras
    from keras import layers

    model = keras.Sequential(
        [
            keras.Input(shape=(16,), dtype="int32"),
            layers.Embedding(1000, 16),
            layers.LSTM(16, dropout=0.2, recurrent_dropout=0.2),
            layers.Dense(1, activation="sigmoid"),
        ]
    )
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model


def main(argv: list[str]) -> int:
    """``OUTDIR [NAME ...]``: write each named model (all by default) to
    ``OUTDIR/<name>.keras``, one line per file."""
    if not argv or argv[0].startswith("-"):
        print("usage: python examples/gallery.py OUTDIR [NAME ...]", file=sys.stderr)
        return 2
    out, names = Path(argv[0]), argv[1:] or list(GALLERY)
    unknown = [name for name in names if name not in GALLERY]
    if unknown:
        print(
            f"no gallery model {', '.join(unknown)}; known: {', '.join(GALLERY)}",
            file=sys.stderr,
        )
        return 2
    from zoo import files  # writes renamed into place, never through a link

    try:
        files.folder(out, follow=True)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name in names:
        model = GALLERY[name]()
        path = files.write_with(out / f"{name}.keras", model.save)
        print(f"wrote {path} ({model.count_params():,} parameters)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
