"""Writes the three example models a user might bring, as a user would:
plain Keras 3, compiled, saved with ``model.save``.

    python examples/save_examples.py        # rewrites examples/*.keras

- ``stacked_lstm.keras``: two stacked LSTMs and a dense head, the model of
  keras-team/keras#20902 ("pytorch backend lstm very +10x slow");
- ``strided_cnn.keras``: a CNN with strided 'same' convolutions and tanh;
- ``sigmoid_mlp.keras``: an MLP with sigmoid hidden layers, trained by SGD.

Each ends in plain class scores (no softmax), the way Keras recommends
training with ``from_logits=True``: the tool's loss is that one.  The
weights are Keras' own initial ones from seed 0 (any Keras backend).
"""

from __future__ import annotations

from pathlib import Path

import keras

HERE = Path(__file__).resolve().parent


def stacked_lstm() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((50, 32)),
            keras.layers.LSTM(64, return_sequences=True),
            keras.layers.LSTM(64),
            keras.layers.Dense(2),
        ],
        name="stacked_lstm",
    )


def strided_cnn() -> keras.Model:
    inputs = keras.Input((28, 28, 1))
    h = keras.layers.Conv2D(16, 3, strides=2, padding="same", activation="tanh")(inputs)
    h = keras.layers.Conv2D(32, 3, strides=2, padding="same", activation="tanh")(h)
    h = keras.layers.MaxPooling2D(2)(h)
    h = keras.layers.Flatten()(h)
    outputs = keras.layers.Dense(10)(h)
    return keras.Model(inputs, outputs, name="strided_cnn")


def sigmoid_mlp() -> keras.Model:
    return keras.Sequential(
        [
            keras.Input((784,)),
            keras.layers.Dense(256, activation="sigmoid"),
            keras.layers.Dense(128, activation="sigmoid"),
            keras.layers.Dense(10),
        ],
        name="sigmoid_mlp",
    )


def main() -> None:
    keras.utils.set_random_seed(0)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for build, optimizer in (
        (stacked_lstm, keras.optimizers.Adam(0.001)),
        (strided_cnn, keras.optimizers.Adam(0.001)),
        (sigmoid_mlp, keras.optimizers.SGD(0.1)),
    ):
        model = build()
        model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
        path = HERE / f"{model.name}.keras"
        model.save(path)
        print(f"wrote {path.relative_to(HERE.parent)} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
