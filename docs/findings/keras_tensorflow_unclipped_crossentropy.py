"""Keras on TensorFlow computes a cross-entropy from probabilities
(`from_logits=False`, Keras' default) from the logits before the final
softmax (`_keras_logits`, which its softmax sets on the tensor it returns)
and never clips, eagerly and in its train step alike; Keras on JAX and on
PyTorch clip every probability to [1e-7, 1 - 1e-7] first, as Keras'
formula does.  The two agree to float32 rounding unless a true class's
probability is below 1e-7; then the loss differs.  keras.io's U-Net
(examples/gallery.py `unet_segmentation`) has 79 such pixels of 16,384 in
the first training-mode pass of its check (none in inference mode), and
Keras on TensorFlow's loss at step 1 is 3.7e-3 away from the formula's.

Plain Keras, no project code: one `Dense(3, softmax)` whose weights put a
true class below the clip, its loss by `train_on_batch` (the compiled
train step, reported before the update) and by an eager call of the same
loss object, on each backend, against the float64 NumPy losses from the
logits with and without the clip.

    python docs/findings/keras_tensorflow_unclipped_crossentropy.py

prints one line of JSON for float64, then one per backend
(tests/test_findings_scripts.py runs it).
"""

import json
import os
import subprocess
import sys

import numpy as np

EPSILON = 1e-7
X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, -0.5]], dtype=np.float32)
Y = np.array([2, 0, 1, 1])
KERNEL = np.array([[9.0, 0.0, -9.0], [0.0, 1.0, 0.5]], dtype=np.float32)


def expected() -> dict[str, float]:
    """The float64 losses from the logits: clipped as Keras' formula clips,
    and exact."""
    z = X.astype(np.float64) @ KERNEL.astype(np.float64)
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    true = p[np.arange(len(Y)), Y]
    return {
        "clipped": float(-np.log(np.clip(true, EPSILON, 1 - EPSILON)).mean()),
        "exact": float(-np.log(true).mean()),
        "below_clip": int((true < EPSILON).sum()),
    }


def one_backend() -> None:
    import keras

    model = keras.Sequential(
        [keras.Input((2,)), keras.layers.Dense(3, activation="softmax", use_bias=False)]
    )
    model.layers[0].set_weights([KERNEL])
    loss = keras.losses.SparseCategoricalCrossentropy()
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
    eager = float(keras.ops.convert_to_numpy(loss(Y, model(X))))
    trained = float(model.train_on_batch(X, Y))
    print(
        json.dumps(
            {
                "backend": keras.backend.backend(),
                "keras": keras.__version__,
                "eager": eager,
                "train_on_batch": trained,
            }
        )
    )


def main() -> None:
    print(json.dumps({"float64": expected()}))
    for backend in ("tensorflow", "jax", "torch"):
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run(
            [sys.executable, __file__, "--one"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        print(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if sys.argv[1:] == ["--one"]:
        one_backend()
    else:
        main()
