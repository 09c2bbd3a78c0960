"""What is left at Keras 3.15.1 of the 3.12.0 step on PyTorch: LeNet's
training step, counted by Keras function with cProfile, and Keras' tree
functions timed per call.  The measurement behind keras-torch-tree-step.md.

    python docs/findings/keras_torch_tree_step.py     # one JSON line

Run it with the Keras release to measure first on ``PYTHONPATH`` (an
overlay of ``harness bisect``: ``.nox/release-overlays/keras-3.11.3/site``)
and without (the environment's 3.15.1).  Deterministic: LeNet as the
project builds it (two convolutions with average pools, three dense
layers), Adam at 0.001, **batch 200**, 20 steps on fixed random data, one
thread; the calls counted are the same on every run.
"""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import timeit

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import keras
import numpy as np

BATCH, STEPS = 200, 20
TREE = ("_tree_is_leaf", "is_nested", "flatten", "map_structure", "pack_sequence_as")


def lenet() -> keras.Model:
    layers = keras.layers
    inputs = keras.Input((28, 28, 1))
    h = layers.Conv2D(6, 5, activation="relu")(inputs)
    h = layers.AveragePooling2D(2)(h)
    h = layers.Conv2D(16, 3, activation="relu")(h)
    h = layers.AveragePooling2D(2)(h)
    h = layers.Flatten()(h)
    h = layers.Dense(120, activation="relu")(h)
    h = layers.Dense(84, activation="relu")(h)
    return keras.Model(inputs, layers.Dense(10)(h))


def main() -> None:
    keras.utils.set_random_seed(0)
    model = lenet()
    model.compile(
        keras.optimizers.Adam(0.001),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, 28, 28, 1)).astype("float32")
    y = rng.integers(0, 10, BATCH)
    model.train_on_batch(x, y)  # built, compiled, warm
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(STEPS):
        model.train_on_batch(x, y)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    calls: dict[str, int] = {}
    for (file, _, function), (_, total_calls, *_rest) in stats.items():
        if "keras" in file and "/tree/" in file and function in TREE:
            key = f"{file.split('/tree/')[1]}:{function}"
            calls[key] = calls.get(key, 0) + total_calls
    structure = [v.value for v in model.trainable_variables]
    flatten_s = (
        min(timeit.repeat(lambda: keras.tree.flatten(structure), number=2000, repeat=5))
        / 2000
    )
    is_nested_s = (
        min(
            timeit.repeat(
                lambda: keras.tree.is_nested(structure[0]), number=20000, repeat=5
            )
        )
        / 20000
    )
    print(
        json.dumps(
            {
                "keras": keras.__version__,
                "batch": BATCH,
                "tree_calls_per_step": {k: v / STEPS for k, v in sorted(calls.items())},
                "flatten_of_the_variables_us": round(flatten_s * 1e6, 2),
                "is_nested_of_a_tensor_us": round(is_nested_s * 1e6, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
