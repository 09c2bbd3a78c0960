"""Writes the example models a user might bring, as a user would: plain
Keras 3, compiled, saved with ``model.save``.

    python examples/save_examples.py                    # rewrites examples/*.keras
    python examples/save_examples.py tiny_transformer   # rewrites that one only

- ``stacked_lstm.keras``: two stacked LSTMs and a dense head, the model of
  keras-team/keras#20902 ("pytorch backend lstm very +10x slow");
- ``strided_cnn.keras``: a CNN with strided 'same' convolutions and tanh;
- ``sigmoid_mlp.keras``: an MLP with sigmoid hidden layers, trained by SGD;
- ``tiny_transformer.keras``: a Transformer encoder classifier in the
  functional API, token ids in: an embedding, positions from a gelu Conv1D
  added back, one post-norm encoder block (self-attention, Add,
  LayerNormalization, a gelu feed-forward, Add, LayerNormalization), the
  mean over the sequence, class scores.

Each ends in plain class scores (no softmax), the way Keras recommends
training with ``from_logits=True``: the tool's loss is that one.  The
weights are Keras' own initial ones from seed 0 (any Keras backend): the
first three draw one after another from one seed, as they always have, and
every file is built on every run so that writing one alone draws the same
weights.
"""

from __future__ import annotations

import sys
from pathlib import Path

import keras

from zoo import files

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


def tiny_transformer() -> keras.Model:
    """16 tokens of 100 ids, width 16 in two heads of 8, a 32-unit
    feed-forward: some 4,700 parameters."""
    width, heads = 16, 2
    tokens = keras.Input((16,), dtype="int32")
    h = keras.layers.Embedding(100, width)(tokens)
    # Positions from built-in layers only: a convolution over each token's
    # neighbours, added back (a learned table of positions needs a second
    # input or a layer of one's own).
    position = keras.layers.Conv1D(width, 3, padding="same", activation="gelu")(h)
    h = keras.layers.Add()([h, position])
    attended = keras.layers.MultiHeadAttention(heads, width // heads)(h, h)
    h = keras.layers.LayerNormalization()(keras.layers.Add()([h, attended]))
    hidden = keras.layers.Dense(32, activation="gelu")(h)
    hidden = keras.layers.Dense(width)(hidden)
    h = keras.layers.LayerNormalization()(keras.layers.Add()([h, hidden]))
    h = keras.layers.GlobalAveragePooling1D()(h)
    outputs = keras.layers.Dense(2)(h)
    return keras.Model(tokens, outputs, name="tiny_transformer")


def main(names: list[str]) -> None:
    """Write the examples ``names`` (all when empty)."""
    known = ("stacked_lstm", "strided_cnn", "sigmoid_mlp", "tiny_transformer")
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"no example {', '.join(unknown)}; known: {', '.join(known)}")
    keras.utils.set_random_seed(0)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for build, optimizer in (
        (stacked_lstm, keras.optimizers.Adam(0.001)),
        (strided_cnn, keras.optimizers.Adam(0.001)),
        (sigmoid_mlp, keras.optimizers.SGD(0.1)),
        (tiny_transformer, keras.optimizers.Adam(0.001)),
    ):
        if build is tiny_transformer:
            keras.utils.set_random_seed(0)  # its own seed: the first three's stay
        model = build()
        model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
        if names and model.name not in names:
            continue
        path = files.write_with(HERE / f"{model.name}.keras", model.save)
        print(f"wrote {path.relative_to(HERE.parent)} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
